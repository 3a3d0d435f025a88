/* The per-thread-default-stream launches of drv_vecadd. With
 * CUDA_API_PER_THREAD_DEFAULT_STREAM defined before cuda.h, cuLaunchKernel and
 * cuLaunchKernelEx name the exported cuLaunchKernel_ptsz and
 * cuLaunchKernelEx_ptsz, so these two calls bind to those symbols. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda.h>

#include "tests/gpu/programs/drv_vecadd.h"

CUresult drv_launch_ptsz(CUfunction f, unsigned grid, unsigned block, void **params)
{
    return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, 0, params, NULL);
}

CUresult drv_launch_ex_ptsz(CUfunction f, unsigned grid, unsigned block, void **params)
{
    CUlaunchConfig cfg = {0};
    cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = block, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    return cuLaunchKernelEx(&cfg, f, params, NULL);
}
