/* Device and pinned host memory hooks: the driver allocates; drk counts
 * allocations, bytes and frees by kind. Queries pass through.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_MEMORY_H
#define DRK_SHIM_HOOKS_MEMORY_H

#include "../alloc/stats.h"
#include "hook.h"

static inline void noted_alloc(drk_sym sym, drk_alloc_kind kind, CUresult r, size_t bytes)
{
    drk_count_call(sym);
    drk_alloc_note(kind, bytes, r == CUDA_SUCCESS);
}

static inline void noted_free(drk_sym sym, drk_alloc_kind kind, CUresult r)
{
    drk_count_call(sym);
    drk_free_note(kind, r == CUDA_SUCCESS);
}

/* An allocating body: call the driver, then note `bytes` (an expression of
 * the parameters) under `kind`. */
#define DRK_ALLOC_BODY_(body, kind, bytes, params, args)                       \
    DRK_BODY drk_body_##body(drk_sym sym, DRK_UNPAREN params)                  \
    {                                                                          \
        drk_fn_##body real = DRK_REAL(body);                                   \
        if (!real)                                                             \
            return drk_missing(sym);                                           \
        CUresult r = real args;                                                \
        if (drk_observing())                                                   \
            noted_alloc(sym, kind, r, r == CUDA_SUCCESS ? (size_t)(bytes) : 0); \
        return r;                                                              \
    }
#define DRK_FREE_BODY_(body, kind, params, args)                               \
    DRK_BODY drk_body_##body(drk_sym sym, DRK_UNPAREN params)                  \
    {                                                                          \
        drk_fn_##body real = DRK_REAL(body);                                   \
        if (!real)                                                             \
            return drk_missing(sym);                                           \
        CUresult r = real args;                                                \
        if (drk_observing())                                                   \
            noted_free(sym, kind, r);                                          \
        return r;                                                              \
    }
#define DRK_ALLOC_BODY(body, kind, bytes) DRK_SIG_##body(DRK_ALLOC_BODY_, body, kind, bytes)
#define DRK_FREE_BODY(body, kind) DRK_SIG_##body(DRK_FREE_BODY_, body, kind)

DRK_ALLOC_BODY(mem_alloc_v1, DRK_ALLOC_DEVICE, size)
DRK_ALLOC_BODY(mem_alloc, DRK_ALLOC_DEVICE, size)
DRK_ALLOC_BODY(mem_alloc_pitch_v1, DRK_ALLOC_PITCH, (size_t)*pitch * height)
DRK_ALLOC_BODY(mem_alloc_pitch, DRK_ALLOC_PITCH, *pitch * height)
DRK_ALLOC_BODY(mem_alloc_async, DRK_ALLOC_ASYNC, size)
DRK_ALLOC_BODY(mem_alloc_pool_async, DRK_ALLOC_POOL, size)
DRK_ALLOC_BODY(mem_host_alloc, DRK_ALLOC_HOST, size)
DRK_ALLOC_BODY(mem_alloc_host_v1, DRK_ALLOC_HOST, size)
DRK_ALLOC_BODY(mem_alloc_host, DRK_ALLOC_HOST, size)

DRK_FREE_BODY(mem_free_v1, DRK_ALLOC_DEVICE)
DRK_FREE_BODY(mem_free, DRK_ALLOC_DEVICE)
DRK_FREE_BODY(mem_free_async, DRK_ALLOC_ASYNC)
DRK_FREE_BODY(mem_free_host, DRK_ALLOC_HOST)

DRK_FORWARD_BODY(mem_get_info_v1)
DRK_FORWARD_BODY(mem_get_info)
DRK_FORWARD_BODY(mem_get_range_v1)
DRK_FORWARD_BODY(mem_get_range)
DRK_FORWARD_BODY(pointer_get_attribute)
DRK_FORWARD_BODY(pointer_get_attributes)
DRK_FORWARD_BODY(ipc_get_mem_handle)

#endif
