/* Finding a CUDA library drk opens itself (CUPTI, nvJitLink), always on
 * drk's thread: a copy already loaded in the process wins (one of each a
 * process), then the path the user's option names, then the CUDA toolkit,
 * then NVIDIA's wheels in a Python site-packages (PyTorch ships them: beside
 * the program's interpreter first, then the system's Pythons), then the
 * loader's path. */
#ifndef DRK_EVOLVE_LIBFIND_H
#define DRK_EVOLVE_LIBFIND_H

#include <stddef.h>

typedef struct drk_libfind {
    const char *soname;          /* "libnvJitLink.so.13" */
    const char *probe;           /* one of its symbols: the file a loaded copy came from */
    const char *option;          /* the option naming a path, for the log: "DRK_NVJITLINK" */
    const char *const *toolkit;  /* glob patterns, in order */
    size_t ntoolkit;
    const char *const *wheels;   /* folders under site-packages/nvidia/: "cu13/lib" */
    size_t nwheels;
} drk_libfind;

/* The dlopen handle of `what`, its file in `path`; NULL if none opens.
 * `explicit_path` ("" or NULL: none) is tried after a loaded copy (a warning
 * if it does not open); `exe` is the program, for its interpreter's
 * site-packages. */
void *drk_libfind_open(const drk_libfind *what, const char *explicit_path, const char *exe, char *path, size_t len);

#endif
