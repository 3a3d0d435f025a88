/* The driver table the host pool's stand-alone tests give it: pins by the
 * includer's t_host_alloc, frees that do nothing, and the includer's
 * `current` as the current context (both defined before the include). */
#ifndef DRK_TESTS_HOST_POOL_STUB_TABLE_H
#define DRK_TESTS_HOST_POOL_STUB_TABLE_H

static CUresult t_free_host(void *p)
{
    (void)p;
    return CUDA_SUCCESS;
}

static CUresult t_ctx_get_current(CUcontext *ctx)
{
    *ctx = current;
    return CUDA_SUCCESS;
}

static drk_driver table = {
    .mem_host_alloc = t_host_alloc,
    .mem_free_host = t_free_host,
    .ctx_get_current = t_ctx_get_current,
};

#endif
