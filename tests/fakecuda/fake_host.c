/* fakecuda, the stand-in libcuda.so.1: pinned host memory. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

/* ------------------------------------------------------------------------ */
/* Pinned host memory: records among the allocations (A_HOST), so copies,   */
/* sets and pointer queries see it as the driver's unified addressing does. */
/* ------------------------------------------------------------------------ */

FC_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    ENTER_INIT(cuMemHostAlloc);
    if (!pp || (Flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                        CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 1, 0, Flags);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

/* The legacy form's memory lies under 4 GiB, like cuMemAlloc's, so the
 * legacy cuMemHostGetDevicePointer can hand out its 32-bit address. */
FC_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    ENTER_INIT(cuMemAllocHost);
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 1, 1, 0);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

FC_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    ENTER_INIT(cuMemAllocHost_v2);
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 1, 0, 0);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

FC_EXPORT CUresult cuMemFreeHost(void *p)
{
    ENTER_INIT(cuMemFreeHost);
    return mem_free((uintptr_t)p, 1);
}

/* The live pinned allocation containing p, copied; 0 if there is none. */
static int host_alloc_of(const void *p, struct alloc *out)
{
    LOCK();
    struct alloc *a = a_containing((uintptr_t)p);
    int ok = a && a->kind == A_HOST;
    if (ok)
        *out = *a;
    UNLOCK();
    return ok;
}

/* Unified addressing: the device pointer of pinned memory is its host
 * address, interior pointers included. */
FC_EXPORT CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    ENTER_INIT(cuMemHostGetDevicePointer);
    struct alloc a;
    if (!pdptr || Flags != 0 || !host_alloc_of(p, &a) || (uintptr_t)p > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr_v1)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    ENTER_INIT(cuMemHostGetDevicePointer_v2);
    struct alloc a;
    if (!pdptr || Flags != 0 || !host_alloc_of(p, &a))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    ENTER_INIT(cuMemHostGetFlags);
    struct alloc a;
    if (!pFlags || !host_alloc_of(p, &a))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = a.flags;
    return CUDA_SUCCESS;
}
