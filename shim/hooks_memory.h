/* Device and pinned host memory hooks: the driver allocates; drk counts
 * allocations, bytes and frees by kind. Queries pass through.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_MEMORY_H
#define DRK_SHIM_HOOKS_MEMORY_H

#include "../alloc/recorder.h"
#include "../alloc/stats.h"
#include "hook.h"

/* An allocating body notes `bytes` (an expression of the parameters) of a
 * successful allocation under `kind`; a freeing body, the free. Device
 * allocations and frees are also recorded for DRK_ALLOC_TRACE, as trace op
 * `op` on `stream` (async kinds only). */
#define DRK_ALLOC_BODY(body, kind, bytes)                                      \
    DRK_HOOK_BODY(body, (drk_alloc_note(kind, r == CUDA_SUCCESS ? (size_t)(bytes) : 0, r == CUDA_SUCCESS)))
#define DRK_FREE_BODY(body, kind) DRK_HOOK_BODY(body, (drk_free_note(kind, r == CUDA_SUCCESS)))
#define DRK_DEVICE_ALLOC_BODY(body, kind, bytes, op, stream, has_stream)                                               \
    DRK_HOOK_BODY(body, (drk_alloc_note(kind, r == CUDA_SUCCESS ? (size_t)(bytes) : 0, r == CUDA_SUCCESS);          \
                         if (r == CUDA_SUCCESS) drk_record(op, (uintptr_t)*dptr, (size_t)(bytes), (uintptr_t)(stream), \
                                                           has_stream)))
#define DRK_DEVICE_FREE_BODY(body, kind, op, stream, has_stream)                                                       \
    DRK_HOOK_BODY(body, (drk_free_note(kind, r == CUDA_SUCCESS);                                                       \
                         if (r == CUDA_SUCCESS) drk_record(op, (uintptr_t)dptr, 0, (uintptr_t)(stream), has_stream)))

DRK_DEVICE_ALLOC_BODY(mem_alloc_v1, DRK_ALLOC_DEVICE, size, 'a', 0, 0)
DRK_DEVICE_ALLOC_BODY(mem_alloc, DRK_ALLOC_DEVICE, size, 'a', 0, 0)
DRK_DEVICE_ALLOC_BODY(mem_alloc_pitch_v1, DRK_ALLOC_PITCH, (size_t)*pitch * height, 'a', 0, 0)
DRK_DEVICE_ALLOC_BODY(mem_alloc_pitch, DRK_ALLOC_PITCH, *pitch * height, 'a', 0, 0)
DRK_DEVICE_ALLOC_BODY(mem_alloc_async, DRK_ALLOC_ASYNC, size, 'A', stream, 1)
DRK_DEVICE_ALLOC_BODY(mem_alloc_pool_async, DRK_ALLOC_POOL, size, 'A', stream, 1)
DRK_ALLOC_BODY(mem_host_alloc, DRK_ALLOC_HOST, size)
DRK_ALLOC_BODY(mem_alloc_host_v1, DRK_ALLOC_HOST, size)
DRK_ALLOC_BODY(mem_alloc_host, DRK_ALLOC_HOST, size)

DRK_DEVICE_FREE_BODY(mem_free_v1, DRK_ALLOC_DEVICE, 'f', 0, 0)
DRK_DEVICE_FREE_BODY(mem_free, DRK_ALLOC_DEVICE, 'f', 0, 0)
DRK_DEVICE_FREE_BODY(mem_free_async, DRK_ALLOC_ASYNC, 'F', stream, 1)
DRK_FREE_BODY(mem_free_host, DRK_ALLOC_HOST)

DRK_FORWARD_BODY(mem_get_info_v1)
DRK_FORWARD_BODY(mem_get_info)
DRK_FORWARD_BODY(mem_get_range_v1)
DRK_FORWARD_BODY(mem_get_range)
DRK_FORWARD_BODY(pointer_get_attribute)
DRK_FORWARD_BODY(pointer_get_attributes)
DRK_FORWARD_BODY(ipc_get_mem_handle)

#endif
