/* The stream-ordered device pool, over the heap: what cuMemAlloc,
 * cuMemFree, cuMemAllocAsync and cuMemFreeAsync become.
 *
 * A block freed by cuMemFreeAsync on stream S may be reused at once by an
 * allocation on S (stream order protects it); anywhere else only after an
 * event recorded on S after the free has completed. A block freed by
 * cuMemFree carries no stream and may still be in use by work on any
 * stream: it is reused only after events recorded on every stream have
 * completed. Events are batched: frees gather in an open batch per stream
 * (and one "free epoch" for cuMemFree), which is sealed with one event (one
 * per stream for an epoch) when it is full or when memory is short. A block
 * waiting for its batch stays allocated in the heap; a completed batch
 * gives its blocks back to the heap, where any stream may have them.
 *
 * When the heap cannot serve a request, the pool seals every open batch
 * and waits for the oldest pending ones before it gives up with
 * DRK_PAGES_OOM. Not thread-safe: the caller serializes calls. */
#ifndef DRK_ALLOC_POOL_H
#define DRK_ALLOC_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "alloc/heap.h"

/* The pool's only view of stream order. An event is recorded in a stream
 * and completes when the work queued before it has. */
typedef struct drk_pool_events {
    void *ctx;
    int (*record)(void *ctx, uintptr_t stream, uint64_t *event); /* 0, or an error */
    int (*query)(void *ctx, uint64_t event);                     /* 1 complete, 0 not yet, < 0 error */
    int (*wait)(void *ctx, uint64_t event);                      /* 0 once complete */
    void (*release)(void *ctx, uint64_t event);
} drk_pool_events;

typedef struct drk_pool drk_pool;

/* Frees that seal a batch by themselves. */
#define DRK_POOL_BATCH 64

/* A pool over `heap` (which it does not own). NULL if out of memory. */
drk_pool *drk_pool_new(drk_heap *heap, const drk_pool_events *events);
/* Waits for every pending batch, gives its blocks back, frees the pool. */
void drk_pool_delete(drk_pool *p);

/* Seals this pool's epochs with `e` (alloc/epochs.h), shared with other
 * pools, instead of with events of its own; before its first free. The
 * epochs must outlive the pool. */
typedef struct drk_epochs drk_epochs;
void drk_pool_share_epochs(drk_pool *p, drk_epochs *e);

/* The streams an epoch must cover: the legacy and per-thread default
 * streams are known from the start; created streams are added and removed
 * as the program creates and destroys them (told before the driver
 * destroys it). Created: 0, or DRK_PAGES_FAILED when out of memory (a
 * pool sealing its own epochs then seals none again). Destroyed: 0, or -1
 * when, sealing its own epochs, the pool could not record an event there
 * for later epochs to wait for: it seals no epoch until the caller, before
 * the pool's next call, has waited for the stream and told
 * drk_pool_stream_waited whether that wait succeeded (`idle`); not idle,
 * it never seals one again. */
int drk_pool_stream_created(drk_pool *p, uintptr_t stream);
int drk_pool_stream_destroyed(drk_pool *p, uintptr_t stream);
void drk_pool_stream_waited(drk_pool *p, int idle);
/* A stream exists that the caller could not list (out of host memory): a
 * pool sealing its own epochs seals none again (shared ones: stop them). */
void drk_pool_stream_lost(drk_pool *p);

/* The program waits for the device (a cuCtxSynchronize of the pool's
 * context, `mark` rising with each): a pool whose seals stopped sets its
 * open epoch's frees aside for that wait. 1 if frees are set aside (for
 * this wait or an earlier one that failed), else 0. */
int drk_pool_sync_begin(drk_pool *p, uint64_t mark);

/* That wait succeeded: every free set aside at a mark up to `mark` was made
 * before it began, so its work is done; those blocks go back to the heap.
 * How many. A wait that failed calls nothing: a later one gives them. */
size_t drk_pool_sync_end(drk_pool *p, uint64_t mark);

/* An allocation of `size` bytes for `stream` (has_stream: cuMemAllocAsync;
 * otherwise cuMemAlloc, which may use only blocks every stream is done
 * with). DRK_PAGES_OOM, DRK_PAGES_INVALID for size 0, or 0. */
int drk_pool_alloc(drk_pool *p, size_t size, uintptr_t stream, int has_stream, uintptr_t *ptr);

/* Frees the allocation at `ptr`: on `stream` (cuMemFreeAsync) or, without
 * a stream, as cuMemFree. DRK_PAGES_INVALID (nothing changed) for a pointer
 * that is not a live allocation's start, freed already included. */
int drk_pool_free(drk_pool *p, uintptr_t ptr, uintptr_t stream, int has_stream);

/* The live allocation containing `ptr` (interior pointers too): its start,
 * its size as asked, its heap serial and whether it was allocated with a
 * stream (async may be NULL). DRK_PAGES_INVALID for memory that is free or
 * waiting for its free's events. */
int drk_pool_lookup(const drk_pool *p, uintptr_t ptr, uintptr_t *base, size_t *size, uint64_t *serial,
                    int *async);

/* Gives back the blocks of every batch whose events have completed,
 * without waiting; returns how many blocks went back. */
size_t drk_pool_reclaim(drk_pool *p);

/* Seals every open batch and waits for all pending ones: every freed block
 * goes back to the heap. Returns how many did. For memory pressure. */
size_t drk_pool_flush(drk_pool *p);

typedef struct drk_pool_stats {
    uint64_t same_stream_reuses;  /* allocations served by a block freed on their stream, still pending */
    uint64_t batches, epochs;     /* sealed */
    uint64_t epochs_split;        /* of those, frees of an open epoch that another pool's seal covered */
    uint64_t epoch_mallocs;       /* epochs whose record had to come from malloc (most reuse one) */
    uint64_t events;              /* recorded */
    uint64_t waits;               /* out-of-memory waits for pending frees */
    uint64_t sync_reclaims;       /* blocks given back after the program waited for the device (seals stopped) */
    uint64_t pending_blocks, pending_bytes;
    uint64_t live_bytes, peak_live_bytes; /* as the program sees them: asked, not yet freed */
} drk_pool_stats;

drk_pool_stats drk_pool_get_stats(const drk_pool *p);
uint64_t drk_pool_live_bytes(const drk_pool *p);

#endif
