/* fakecuda, the stand-in libcuda.so.1: the profiler calls, which programs
 * use to mark what to profile (drk ends a round at cuProfilerStop). Like the
 * driver, they need a current context. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

FC_EXPORT CUresult cuProfilerStart(void)
{
    ENTER_INIT(cuProfilerStart);
    return current_ctx() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_EXPORT CUresult cuProfilerStop(void)
{
    ENTER_INIT(cuProfilerStop);
    return current_ctx() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
