/* Launch hooks: the launch goes to the driver untouched; a successful one is
 * recorded against its kernel and shape. */
#include "../evolve/registry.h"
#include "driver.h"
#include "hook.h"

static inline void launched(drk_sym sym, CUresult r, const void *f, unsigned gx, unsigned gy,
                            unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem)
{
    unsigned thread = drk_thread_index();
    drk_count_call_by(thread, sym);
    if (r != CUDA_SUCCESS) {
        drk_count_failed_launch_by(thread);
        return;
    }
    drk_launch_shape shape = {{gx, gy, gz}, {bx, by, bz}, shmem};
    drk_registry_launch(drk_driver_table, (uintptr_t)f, &shape, thread);
}

CUresult drk_body_launch_kernel(drk_sym sym, CUfunction f, unsigned int gx, unsigned int gy,
                                unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shmem, CUstream stream, void **params, void **extra)
{
    drk_fn_launch_kernel real = DRK_REAL(launch_kernel);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
    if (drk_observing())
        launched(sym, r, f, gx, gy, gz, bx, by, bz, shmem);
    return r;
}

CUresult drk_body_launch_kernel_coop(drk_sym sym, CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shmem, CUstream stream,
                                     void **params)
{
    drk_fn_launch_kernel_coop real = DRK_REAL(launch_kernel_coop);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
    if (drk_observing())
        launched(sym, r, f, gx, gy, gz, bx, by, bz, shmem);
    return r;
}

CUresult drk_body_launch_kernel_ex(drk_sym sym, const CUlaunchConfig *config, CUfunction f,
                                   void **params, void **extra)
{
    drk_fn_launch_kernel_ex real = DRK_REAL(launch_kernel_ex);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
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

DRK_FORWARD_BODY(graph_launch)
