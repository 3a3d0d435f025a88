/* Launch hooks: the launch goes to the driver untouched; a successful one is
 * recorded against its kernel and shape. With DRK_PROFILE=counters, the one
 * launch drk armed for a counter sample runs inside the range profiler
 * (evolve/counters.h); the one armed for a capture (evolve/capture.h) has
 * its parameters and memory taken just before it goes; every other launch
 * compares one word for each. A launch at a shape an evolved variant serves
 * runs the variant (one load). */
#include "shim/hook.h"

#include "evolve/capture.h"
#include "evolve/counters.h"
#include "evolve/registry.h"

/* The six launch entry points are the first slots of the hook list, so a
 * slot is also the registry's label for the entry point. */
_Static_assert(DRK_SYM_cuLaunchCooperativeKernel_ptsz < DRK_REGISTRY_ENTRIES, "launch slots first in hooks.h");

/* A launch returned `r`: a successful one counts against its kernel, shape
 * and entry point in the registry (which also makes its call count); a
 * refused one only as a call. */
static inline __attribute__((always_inline)) void counted(drk_sym sym, CUresult r, drk_launch_site site,
                                                          const void *f, const drk_launch_shape *shape)
{
    unsigned thread = drk_thread_index();
    if (__builtin_expect(r != CUDA_SUCCESS, 0)) {
        drk_count_call_by(thread, sym);
        drk_count_failed_launch_by(thread);
        return;
    }
    drk_registry_count(site, (uintptr_t)f, shape, thread);
}

static inline __attribute__((always_inline)) void launched(drk_sym sym, CUresult r, const void *f, unsigned gx,
                                                           unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                                           unsigned bz, unsigned shmem)
{
    drk_launch_shape shape = {{gx, gy, gz}, {bx, by, bz}, shmem, (uint32_t)sym};
    counted(sym, r, drk_registry_site((uintptr_t)f, &shape), f, &shape);
}

/* The function a launch at `site` runs: the variant published there, if
 * any (evolve/registry.h), else the program's own. A variant the driver
 * refuses is withdrawn and the program's function launched instead, so the
 * program sees the driver's answer to its own call. */
#define DRK_SERVED(site, f, v) CUfunction v = (CUfunction)drk_site_variant(site), v##_run = v ? v : (f)
#define DRK_SERVED_RETRY(site, f, v, r, call)                                                                        \
    do {                                                                                                             \
        if (__builtin_expect(v != NULL && (r) != CUDA_SUCCESS, 0)) {                                                 \
            drk_registry_variant_failed(site, (uintptr_t)v);                                                         \
            v##_run = (f);                                                                                           \
            (r) = (call);                                                                                            \
        }                                                                                                            \
    } while (0)

/* The stream a capture queues its copies on: the launch's, where a _ptsz
 * entry's NULL is the calling thread's per-thread stream (the driver table's
 * entries are the legacy ones, which would read NULL as the legacy stream). */
static inline CUstream capture_stream(CUstream s, int per_thread_name)
{
    return !s && per_thread_name ? CU_STREAM_PER_THREAD : s;
}

#define LAUNCH_ARGS                                                                                            \
    CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,          \
        unsigned int bz, unsigned int shmem, CUstream stream, void **params, void **extra

/* An observed cuLaunchKernel past the capture's check. */
DRK_BODY launch_observed(drk_fn_launch_kernel real, drk_sym sym, LAUNCH_ARGS)
{
    if (drk_counters_wanted((uintptr_t)f) &&
        drk_counters_begin((uintptr_t)f, (const uint32_t[3]){gx, gy, gz}, (const uint32_t[3]){bx, by, bz}, shmem,
                           stream)) {
        CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
        drk_counters_end(r);
        launched(sym, r, f, gx, gy, gz, bx, by, bz, shmem);
        return r;
    }
    drk_launch_shape shape = {{gx, gy, gz}, {bx, by, bz}, shmem, (uint32_t)sym};
    drk_launch_site site = drk_registry_site((uintptr_t)f, &shape);
    DRK_SERVED(site, f, v);
    CUresult r = real(v_run, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
    DRK_SERVED_RETRY(site, f, v, r, real(v_run, gx, gy, gz, bx, by, bz, shmem, stream, params, extra));
    counted(sym, r, site, f, &shape);
    return r;
}

/* The launch armed for a capture: the program's own function is captured,
 * whatever variant runs. Out of line, so that the hot path keeps nothing
 * live across the capture's call (measured: 8 more instructions a launch
 * inline, launch_instructions.sh). */
static __attribute__((noinline, cold)) CUresult launch_captured(drk_fn_launch_kernel real, drk_sym sym, LAUNCH_ARGS)
{
    drk_capture_launch((uintptr_t)f, (const uint32_t[3]){gx, gy, gz}, (const uint32_t[3]){bx, by, bz}, shmem,
                       capture_stream(stream, sym == DRK_SYM_cuLaunchKernel_ptsz), params, extra);
    return launch_observed(real, sym, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

DRK_BODY drk_body_launch_kernel(drk_sym sym, LAUNCH_ARGS)
{
    DRK_REAL_OR_MISSING(launch_kernel);
    if (!drk_observing())
        return real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
    if (drk_capture_wanted((uintptr_t)f))
        return launch_captured(real, sym, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
    return launch_observed(real, sym, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

/* Cooperative launches are never served a variant (a rebuilt module's grid
 * sync is not the program's to vary). */
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
    if (!drk_observing())
        return real(config, f, params, extra);
    if (!config) { /* the driver refuses it; nothing to read */
        CUresult r = real(config, f, params, extra);
        launched(sym, r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : r, f, 0, 0, 0, 0, 0, 0, 0);
        return r;
    }
    /* Only plain launches are sampled or captured: attributes (cooperative,
     * clusters) may not replay as they ran. */
    if (drk_capture_wanted((uintptr_t)f) && config->numAttrs == 0)
        drk_capture_launch((uintptr_t)f, (const uint32_t[3]){config->gridDimX, config->gridDimY, config->gridDimZ},
                           (const uint32_t[3]){config->blockDimX, config->blockDimY, config->blockDimZ},
                           config->sharedMemBytes,
                           capture_stream(config->hStream, sym == DRK_SYM_cuLaunchKernelEx_ptsz), params, extra);
    if (drk_counters_wanted((uintptr_t)f) && config->numAttrs == 0 &&
        drk_counters_begin((uintptr_t)f, (const uint32_t[3]){config->gridDimX, config->gridDimY, config->gridDimZ},
                           (const uint32_t[3]){config->blockDimX, config->blockDimY, config->blockDimZ},
                           config->sharedMemBytes, config->hStream)) {
        CUresult r = real(config, f, params, extra);
        drk_counters_end(r);
        launched(sym, r, f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                 config->blockDimY, config->blockDimZ, config->sharedMemBytes);
        return r;
    }
    drk_launch_shape shape = {{config->gridDimX, config->gridDimY, config->gridDimZ},
                              {config->blockDimX, config->blockDimY, config->blockDimZ},
                              config->sharedMemBytes, (uint32_t)sym};
    drk_launch_site site = drk_registry_site((uintptr_t)f, &shape);
    DRK_SERVED(site, f, v);
    CUresult r = real(config, v_run, params, extra);
    DRK_SERVED_RETRY(site, f, v, r, real(config, v_run, params, extra));
    counted(sym, r, site, f, &shape);
    return r;
}

DRK_HOOKS_LAUNCH(DRK_EXPORT)
