/* Launch hooks: the launch goes to the driver untouched; a successful one is
 * recorded against its kernel and shape. With DRK_PROFILE=counters, the one
 * launch drk armed for a counter sample runs inside the range profiler
 * (evolve/counters.h); every other launch compares one word. */
#include "shim/hook.h"

#include "evolve/counters.h"
#include "evolve/registry.h"

/* The six launch entry points are the first slots of the hook list, so a
 * slot is also the registry's label for the entry point. */
_Static_assert(DRK_SYM_cuLaunchCooperativeKernel_ptsz < DRK_REGISTRY_ENTRIES, "launch slots first in hooks.h");

/* A launch returned `r`: a successful one counts against its kernel, shape
 * and entry point in the registry (which also makes its call count); a
 * refused one only as a call. */
static inline __attribute__((always_inline)) void launched(drk_sym sym, CUresult r, const void *f, unsigned gx,
                                                           unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                                           unsigned bz, unsigned shmem)
{
    unsigned thread = drk_thread_index();
    if (__builtin_expect(r != CUDA_SUCCESS, 0)) {
        drk_count_call_by(thread, sym);
        drk_count_failed_launch_by(thread);
        return;
    }
    drk_launch_shape shape = {{gx, gy, gz}, {bx, by, bz}, shmem, (uint32_t)sym};
    drk_registry_launch((uintptr_t)f, &shape, thread);
}

DRK_BODY drk_body_launch_kernel(drk_sym sym, CUfunction f, unsigned int gx, unsigned int gy,
                                unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shmem, CUstream stream, void **params, void **extra)
{
    DRK_REAL_OR_MISSING(launch_kernel);
    if (drk_counters_wanted((uintptr_t)f) &&
        drk_counters_begin((uintptr_t)f, (const uint32_t[3]){gx, gy, gz}, (const uint32_t[3]){bx, by, bz}, shmem,
                           stream)) {
        CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
        drk_counters_end(r);
        launched(sym, r, f, gx, gy, gz, bx, by, bz, shmem);
        return r;
    }
    CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
    if (drk_observing())
        launched(sym, r, f, gx, gy, gz, bx, by, bz, shmem);
    return r;
}

DRK_BODY drk_body_launch_kernel_coop(drk_sym sym, CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shmem, CUstream stream,
                                     void **params)
{
    DRK_REAL_OR_MISSING(launch_kernel_coop);
    CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
    if (drk_observing())
        launched(sym, r, f, gx, gy, gz, bx, by, bz, shmem);
    return r;
}

DRK_BODY drk_body_launch_kernel_ex(drk_sym sym, const CUlaunchConfig *config, CUfunction f,
                                   void **params, void **extra)
{
    DRK_REAL_OR_MISSING(launch_kernel_ex);
    /* Only plain launches are sampled: attributes (cooperative, clusters)
     * may not replay as they ran. */
    if (drk_counters_wanted((uintptr_t)f) && config && config->numAttrs == 0 &&
        drk_counters_begin((uintptr_t)f, (const uint32_t[3]){config->gridDimX, config->gridDimY, config->gridDimZ},
                           (const uint32_t[3]){config->blockDimX, config->blockDimY, config->blockDimZ},
                           config->sharedMemBytes, config->hStream)) {
        CUresult r = real(config, f, params, extra);
        drk_counters_end(r);
        launched(sym, r, f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                 config->blockDimY, config->blockDimZ, config->sharedMemBytes);
        return r;
    }
    CUresult r = real(config, f, params, extra);
    if (drk_observing()) {
        if (config)
            launched(sym, r, f, config->gridDimX, config->gridDimY, config->gridDimZ,
                     config->blockDimX, config->blockDimY, config->blockDimZ, config->sharedMemBytes);
        else /* the driver refused it; nothing to read */
            launched(sym, r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : r, f, 0, 0, 0, 0, 0, 0, 0);
    }
    return r;
}

DRK_HOOKS_LAUNCH(DRK_EXPORT)
