/* The pinned host pool: cuMemHostAlloc and cuMemAllocHost served from large
 * pinned chunks by jemalloc arenas, one per flag set, so an allocation costs
 * jemalloc's time rather than the driver's page pinning. Chunks come from the
 * driver table's mem_host_alloc and are never given back while the process
 * runs (docs/host-pool.md). */
#ifndef DRK_ALLOC_HOST_POOL_H
#define DRK_ALLOC_HOST_POOL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"

/* The cuMemHostAlloc flags the pool serves; a flag set indexes its arena. */
#define DRK_HOST_FLAGS_ALL (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)
#define DRK_HOST_FLAG_SETS 8

/* Requests above this go to the driver: holding a buffer that large pinned
 * for ever after its free would cost the system more than its pinning. */
#define DRK_HOST_POOL_LARGEST ((size_t)1 << 30)

typedef struct drk_host_pool_settings {
    int on;        /* DRK_HOST_ALLOC */
    int sync_free; /* DRK_ALLOC_SYNC_FREE: a free waits for the device first */
    /* Whether a graph capture is under way (NULL: never): the pool then
     * leaves allocations that would wait for the device to the driver. */
    int (*captures_under_way)(void);
} drk_host_pool_settings;

/* Once, before the first allocation (the pool serves none before): the
 * driver table that pins chunks (copied) and the settings. */
void drk_host_pool_configure(const drk_driver *drv, const drk_host_pool_settings *s);

/* Serves an allocation of `size` bytes with cuMemHostAlloc `flags` (within
 * DRK_HOST_FLAGS_ALL; cuMemAllocHost is flags 0, as cudaHostAllocDefault
 * "emulates cudaMallocHost"). 0: *pp is set. -1: the caller asks the driver
 * (pool off or not configured, size 0 or too large, no current context, or
 * drk could not pin or allocate). Alignment: 256 bytes, 4 KiB from 4 KiB. */
int drk_host_pool_alloc(void **pp, size_t size, unsigned flags);

/* In a fork child: a pool the parent had started is off here (its jemalloc
 * and chunks are copies, not pinned); pointers it inherited may be freed. */
void drk_host_pool_after_fork_child(void);

enum {
    DRK_HOST_FREED = 0,    /* a live pool allocation, now free */
    DRK_HOST_FOREIGN = 1,  /* not the pool's: the driver's to answer */
    DRK_HOST_INVALID = -1, /* in a pool chunk but not a live allocation's start: CUDA_ERROR_INVALID_VALUE */
};
int drk_host_pool_free(void *p);

/* Context `ctx` ends (cuCtxDestroy, cuDevicePrimaryCtxReset, its last
 * release): the driver frees the chunks pinned in it. Their pointers are no
 * longer the pool's (the driver answers for them), and if there were any
 * the pool stops for good: the driver serves later allocations. */
void drk_host_pool_context_ends(CUcontext ctx);

/* 0 if p lies inside a live pool allocation: its start, its size as asked
 * and its flags (any output may be NULL); else -1. A pointer inside a chunk
 * but outside every live allocation is unknown. Lock-free. */
int drk_host_pool_find(const void *p, void **base, size_t *size, unsigned *flags);

/* Whether p lies in one of the pool's chunks, live allocation or not. */
int drk_host_pool_owns(const void *p);

/* The device pointer of p inside a live pool allocation: its chunk's (the
 * driver's cuMemHostGetDevicePointer of the chunk) plus the offset; the
 * driver's error for the chunk if it had none; CUDA_ERROR_INVALID_VALUE if
 * p is not inside a live allocation. */
CUresult drk_host_pool_device_pointer(const void *p, CUdeviceptr *dptr);

/* Counts for the report. Bytes are bytes asked, except chunk bytes. */
typedef struct drk_host_pool_counts {
    uint64_t allocs;          /* allocations the pool served */
    uint64_t frees;           /* pool allocations freed */
    uint64_t live_bytes;      /* of live pool allocations */
    uint64_t peak_live_bytes; /* the most live_bytes has been */
    uint64_t chunk_bytes;     /* pinned from the driver for the pool */
    uint64_t chunks;
    uint64_t fallbacks;       /* allocations drk meant to serve but could not (pinning or jemalloc failed): the driver's */
    uint64_t direct;          /* allocations larger than DRK_HOST_POOL_LARGEST: the driver's */
} drk_host_pool_counts;

typedef struct drk_host_pool_stats {
    int built;                /* the library has the pool (jemalloc was found at build time) */
    int on;                   /* the pool started in this process (DRK_HOST_ALLOC=1 and jemalloc ready) */
    uint64_t invalid_frees;   /* cuMemFreeHost inside a chunk but not of a live start (double frees) */
    uint64_t contexts_ended;  /* contexts that ended with chunks in them (the pool then stopped) */
    uint64_t large_reused;    /* allocations of 1 MiB or more served by a block of their class a free left waiting */
    uint64_t waits;           /* allocations after frees that waited for the device first (a freed block may be in use) */
    uint64_t wait_ns;         /* their time waiting */
    drk_host_pool_counts total;
    drk_host_pool_counts by_flags[DRK_HOST_FLAG_SETS]; /* index: the CU_MEMHOSTALLOC_* bits */
} drk_host_pool_stats;

void drk_host_pool_get_stats(drk_host_pool_stats *out);

#endif
