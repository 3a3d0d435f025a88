/* nvJitLink, opened on drk's thread at the first build: a variant's PTX is
 * compiled to a cubin here, outside the driver, and only the cubin is loaded
 * into the program's context. The driver's own JIT (cuModuleLoadDataEx of
 * PTX) holds the program's context while it compiles: every launch of the
 * program's threads waits for the whole build (tests/bench/jit_stall.c on
 * the H200: launches stalled 760 ms over six builds of 127 ms; through
 * nvJitLink the longest launch call was 0.4 ms and the cubin's load 0.2 ms).
 * Found as libfind.h says: a loaded copy, DRK_NVJITLINK, the toolkit, the
 * nvidia-nvjitlink wheel (PyTorch ships it). */
#ifndef DRK_EVOLVE_JITLINK_H
#define DRK_EVOLVE_JITLINK_H

#include <stddef.h>

/* Where to look first (DRK_NVJITLINK, "" for none) and the program (for its
 * interpreter's site-packages); nothing is opened yet. */
void drk_jitlink_configure(const char *explicit_path, const char *exe);

/* Opens the library once (later calls answer from the first): 0, or -1 with
 * the reason in `why`. */
int drk_jitlink_ready(char *why, size_t len);

/* The file in use ("" before ready) and its version (major * 1000 + minor *
 * 10; 0 unknown): part of a cubin's cache key. */
const char *drk_jitlink_path(void);
unsigned drk_jitlink_version(void);

/* Compiles NUL-terminated PTX with nvJitLink's options ("-arch=sm_90",
 * "-maxrregcount=56", "-Xptxas=..."): 0 with a malloc'd cubin in *cubin
 * and its size; -1 with the call and nvJitLink's error log in `why`. The
 * info log (registers, spills) goes to `log` ("" if none). */
int drk_jitlink_compile(const char *ptx, size_t len, const char *const *opts, unsigned nopts, void **cubin,
                        size_t *size, char *log, size_t loglen, char *why, size_t whylen);

/* 1 once the process has begun to exit: compiles are refused from then on
 * (not the variant's fault, so not a rejection). */
int drk_jitlink_closed(void);

/* Forgets the library (tests; a fork's child starts clean). */
void drk_jitlink_reset(void);

#endif
