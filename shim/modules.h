/* Between the module hooks and evolve/: loaded images are read (unless
 * DRK_IMAGES=0) for the device's SM, and kernels bound by name get their
 * image's facts. Load-time work, never on a launch. */
#ifndef DRK_SHIM_MODULES_H
#define DRK_SHIM_MODULES_H

#include <stdint.h>

#include "evolve/loaded.h"
#include "evolve/registry.h"

/* A load returned owner `*owner` (a CUmodule* or CUlibrary*, read only when
 * r is CUDA_SUCCESS) for the image at `data` or the file `path`, made as
 * `how_loaded` says (NULL: a module, no JIT options); the driver's call
 * took `load_ns`. */
void drk_modules_loaded(int r, const void *const *owner, const char *how, const void *data, const char *path,
                        const drk_images_load *how_loaded, uint64_t load_ns);

/* A monotonic clock in ns, for timing loads (not launches). */
uint64_t drk_modules_clock(void);
/* Before a module or library unload: the occupancy of shapes not yet worked
 * out, and no trial launches its kernels from now on. */
void drk_modules_unloading(const void *owner);
void drk_modules_unloaded(int r, const void *owner);

/* The driver handed out `*handle` for kernel `name` of `owner`. */
void drk_modules_bound(int r, const void *const *handle, drk_handle_kind kind, const char *name, const void *owner);

/* cuKernelGetFunction gave `*fn`, the function of `kernel`. */
void drk_modules_function_of(int r, const void *const *fn, const void *kernel);

/* Shared memory the device reserves per block (1 KiB on sm_90), -1 if unknown. */
int drk_modules_reserved_shared(void);

/* Before the report: launched kernels without image facts get them from
 * their owner's image (read now if it was left for later) or from any image
 * with their name. */
void drk_modules_complete(void);

#endif
