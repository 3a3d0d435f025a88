/* Pinned host memory hooks: with DRK_HOST_ALLOC=1 (the default) the host
 * pool (alloc/host_pool.h) serves cuMemHostAlloc and cuMemAllocHost_v2 and
 * answers for its own pointers; everything else, and every call the driver
 * would refuse, goes to the driver, so the program gets the driver's own
 * errors. drk counts as for any allocation. */
#include "shim/hook.h"

#include "alloc/host_pool.h"
#include "alloc/stats.h"

/* Serves an allocation from the pool if it can (never under DRK_DISABLE=1);
 * 0 if it did. Arguments the driver would refuse are left to it. */
static inline __attribute__((always_inline)) int drk_host_serve(void **pp, size_t size, unsigned int flags)
{
    return pp && !(flags & ~(unsigned int)DRK_HOST_FLAGS_ALL) && drk_current_mode() != DRK_MODE_OFF &&
                   drk_host_pool_alloc(pp, size, flags) == 0
               ? 0
               : -1;
}

static inline __attribute__((always_inline)) void drk_host_alloc_counted(drk_sym sym, CUresult r, size_t bytes)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_alloc_note(DRK_ALLOC_HOST, r == CUDA_SUCCESS ? bytes : 0, r == CUDA_SUCCESS);
    }
}

DRK_BODY drk_body_mem_host_alloc(drk_sym sym, void **pp, size_t size, unsigned int flags)
{
    DRK_REAL_OR_MISSING(mem_host_alloc);
    CUresult r = drk_host_serve(pp, size, flags) == 0 ? CUDA_SUCCESS : real(pp, size, flags);
    drk_host_alloc_counted(sym, r, size);
    return r;
}

DRK_BODY drk_body_mem_alloc_host(drk_sym sym, void **pp, size_t size)
{
    DRK_REAL_OR_MISSING(mem_alloc_host);
    CUresult r = drk_host_serve(pp, size, 0) == 0 ? CUDA_SUCCESS : real(pp, size);
    drk_host_alloc_counted(sym, r, size);
    return r;
}

/* The legacy form is for 32-bit device address spaces: the driver places
 * its memory where a legacy device pointer can reach; the pool's chunks lie
 * anywhere. */
DRK_BODY drk_body_mem_alloc_host_v1(drk_sym sym, void **pp, unsigned int size)
{
    DRK_REAL_OR_MISSING(mem_alloc_host_v1);
    CUresult r = real(pp, size);
    drk_host_alloc_counted(sym, r, size);
    return r;
}

/* Pool pointers are freed into the pool; a pointer inside a chunk that no
 * live allocation starts at (a double free) gets the driver's
 * CUDA_ERROR_INVALID_VALUE without reaching it, since to the driver it lies
 * inside its chunk; all else is the driver's. */
DRK_BODY drk_body_mem_free_host(drk_sym sym, void *p)
{
    DRK_REAL_OR_MISSING(mem_free_host);
    int k = drk_host_pool_free(p);
    CUresult r = k == DRK_HOST_FREED ? CUDA_SUCCESS : k == DRK_HOST_INVALID ? CUDA_ERROR_INVALID_VALUE : real(p);
    if (drk_observing()) {
        drk_count_call(sym);
        drk_free_note(DRK_ALLOC_HOST, r == CUDA_SUCCESS);
    }
    return r;
}

/* Device pointers of pool memory: the chunk's plus the offset. A pointer
 * in a chunk but in no live allocation is unknown (CUDA_ERROR_INVALID_VALUE);
 * bad arguments and other pointers are the driver's. */
DRK_BODY drk_body_mem_host_get_dptr(drk_sym sym, CUdeviceptr *dptr, void *p, unsigned int flags)
{
    DRK_REAL_OR_MISSING(mem_host_get_dptr);
    CUresult r = dptr && flags == 0 && drk_host_pool_owns(p) ? drk_host_pool_device_pointer(p, dptr)
                                                              : real(dptr, p, flags);
    return drk_counted(sym, r);
}

/* The legacy form answers for pool memory whose device pointer fits in 32
 * bits; for the rest the driver says what it says of such a pointer. */
DRK_BODY drk_body_mem_host_get_dptr_v1(drk_sym sym, unsigned int *dptr, void *p, unsigned int flags)
{
    DRK_REAL_OR_MISSING(mem_host_get_dptr_v1);
    CUdeviceptr d = 0;
    CUresult r;
    if (!dptr || flags != 0 || !drk_host_pool_owns(p))
        r = real(dptr, p, flags);
    else if ((r = drk_host_pool_device_pointer(p, &d)) == CUDA_SUCCESS)
        r = d <= 0xffffffffu ? (*dptr = (unsigned int)d, CUDA_SUCCESS) : real(dptr, p, flags);
    return drk_counted(sym, r);
}

/* Flags of pool memory: the driver's answer for the chunk, which it pinned
 * with exactly the allocation's flags (any bits the driver adds included). */
DRK_BODY drk_body_mem_host_get_flags(drk_sym sym, unsigned int *flags, void *p)
{
    DRK_REAL_OR_MISSING(mem_host_get_flags);
    CUresult r = flags && drk_host_pool_owns(p) && drk_host_pool_find(p, NULL, NULL, NULL) != 0
                     ? CUDA_ERROR_INVALID_VALUE
                     : real(flags, p);
    return drk_counted(sym, r);
}

DRK_HOOKS_HOST_MEMORY(DRK_EXPORT)
