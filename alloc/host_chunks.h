/* The host pool's chunks: pinned ranges from the driver and, per chunk, which
 * 256-byte granules start a live allocation and its size as asked.
 *
 * Why this map: freeing must find (size, flags) of an allocation start in
 * O(1), and pointer queries must find the allocation containing any interior
 * pointer. A chunk keeps one bit per granule (a live allocation starts here)
 * and one size_t per granule (its size), both in lazily touched anonymous
 * memory, so noting and taking an allocation is one store and one atomic
 * bit operation, without a lock; the flags are the chunk's. An interior
 * pointer is found by scanning the bits backwards, 64 granules (16 KiB) a
 * word, no further than the widest allocation the chunk has held. The
 * registry of chunks is append-only (drk never unpins a chunk; a chunk whose
 * context ended is only marked dead), so readers
 * scan it without a lock too, and nothing here can deadlock in a fork child. */
#ifndef DRK_ALLOC_HOST_CHUNKS_H
#define DRK_ALLOC_HOST_CHUNKS_H

#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"

#define DRK_HOST_GRANULE 256
#define DRK_HOST_CHUNKS_MAX 1024

typedef struct drk_host_chunk {
    uintptr_t base;
    size_t size;
    unsigned flags;        /* the flag set it was pinned with */
    const drk_driver *drv; /* the driver that pinned it */
    _Atomic CUdeviceptr dptr; /* its device pointer, 0 until first asked */
    _Atomic uint64_t *starts; /* bit g: a live allocation starts at granule g */
    _Atomic size_t *sizes;    /* at such a granule: its size as asked */
    _Atomic size_t widest;    /* the largest allocation noted here: bounds backward scans */
    CUcontext ctx;            /* the context current when it was pinned: it ends with it */
    atomic_int dead;          /* its context ended: the driver freed it */
} drk_host_chunk;

/* Registers a pinned chunk. NULL if the registry is full or its maps cannot
 * be made: the caller unpins it. Serialized inside; readers need no lock. */
drk_host_chunk *drk_host_chunk_add(uintptr_t base, size_t size, unsigned flags, const drk_driver *drv,
                                   CUcontext ctx);

/* The chunks pinned in `ctx` are dead (the context ends): no pointer in
 * them is the pool's any more. Returns how many. */
size_t drk_host_chunks_end_context(CUcontext ctx);

/* The live chunk containing p, or NULL. */
drk_host_chunk *drk_host_chunk_of(uintptr_t p);

/* A live allocation of `size` bytes (> 0) now starts at p, granule-aligned. */
void drk_host_chunk_note(drk_host_chunk *c, uintptr_t p, size_t size);

/* If a live allocation starts at p: 0, *size its size, and it is no longer
 * live. Else -1 (an interior pointer, a double free). Atomic: of two
 * threads freeing one pointer, one gets 0. */
int drk_host_chunk_take(drk_host_chunk *c, uintptr_t p, size_t *size);

/* Statistics (alloc/host_stats.c). */
void drk_host_stats_started(void);
void drk_host_stats_alloc(unsigned flags, size_t size);
void drk_host_stats_free(unsigned flags, size_t size);
void drk_host_stats_chunk(unsigned flags, size_t size);
void drk_host_stats_fallback(unsigned flags);
void drk_host_stats_direct(unsigned flags);
void drk_host_stats_invalid_free(void);
void drk_host_stats_large_reused(void);
void drk_host_stats_wait(uint64_t ns);
void drk_host_stats_context_ended(void);
/* In a fork child: counting starts again; chunks and live bytes remain. */
void drk_host_stats_after_fork_child(void);

#endif
