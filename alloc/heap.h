/* The device heap: blocks carved at 512-byte granularity from a large
 * virtual space, with physical pages only under live blocks, made and moved
 * in runs (one driver handle of several pages, below). A page no live
 * block touches is idle: it stays mapped (its hole is reused at no cost)
 * until a block elsewhere needs pages, which then takes idle runs that fit
 * its gap and maps them where they are needed. So free memory scattered in
 * holes is stitched into whatever contiguous range a request needs,
 * without moving data, and the pages in use stay close to the pages live
 * data touches — the fragmentation a caching pool cannot undo.
 *
 * Blocks and pages are tracked out of band (device memory is never read).
 * Block records come from mmap'd slabs; the heap calls malloc only when a
 * table doubles or a new chunk of virtual space is reserved. Not
 * thread-safe: the pool above serializes calls. The heap knows nothing of
 * streams; the pool decides when a freed block may be reused. */
#ifndef DRK_ALLOC_HEAP_H
#define DRK_ALLOC_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "alloc/pages.h"

#define DRK_HEAP_ALIGN 512u /* every block starts and ends on this (cuMemAlloc guarantees 256) */

typedef struct drk_heap drk_heap;

/* A heap on `pages`, reserving virtual space `va_chunk` bytes at a time (a
 * multiple of the page size; larger requests get a chunk of their own).
 * NULL if out of host memory. */
drk_heap *drk_heap_new(drk_page_backend *pages, size_t va_chunk);
/* Unmaps and releases every page and range; live blocks are gone. */
void drk_heap_delete(drk_heap *h);

/* A block of at least `size` bytes (size > 0), its address in *ptr.
 * DRK_PAGES_OOM when no page can be had (nothing changed), DRK_PAGES_INVALID
 * for size 0, a backend error otherwise. */
int drk_heap_alloc(drk_heap *h, size_t size, uintptr_t *ptr);
/* The same, but only with pages the heap holds (spare, idle past what it
 * keeps): DRK_PAGES_OOM where a new page would be needed. */
int drk_heap_alloc_existing(drk_heap *h, size_t size, uintptr_t *ptr);
/* Frees the block starting at `ptr`; DRK_PAGES_INVALID (nothing changed) if
 * no live block starts there. */
int drk_heap_free(drk_heap *h, uintptr_t ptr);
/* Changes the size asked of the live block at `ptr` (for its reuse by a
 * smaller or larger request that still fits its 512-byte rounded size).
 * 0, or DRK_PAGES_INVALID. */
int drk_heap_resize(drk_heap *h, uintptr_t ptr, size_t size);
/* The live block containing `ptr` (also an interior pointer): its start
 * and its size as asked. 0, or DRK_PAGES_INVALID. */
int drk_heap_find(const drk_heap *h, uintptr_t ptr, uintptr_t *base, size_t *size);
/* The same, with the block's serial (a number no other allocation of this
 * heap has had; a resize makes a new one) and its tag (tag may be NULL). */
int drk_heap_lookup(const drk_heap *h, uintptr_t ptr, uintptr_t *base, size_t *size, uint64_t *serial,
                    unsigned *tag);
/* Marks the live block starting at `ptr` for the caller (0 after each
 * allocation and resize). 0, or DRK_PAGES_INVALID. */
int drk_heap_set_tag(drk_heap *h, uintptr_t ptr, unsigned tag);
/* The size asked of the live block starting at `ptr` (its start only: one
 * hash lookup). 0, or DRK_PAGES_INVALID. */
int drk_heap_block_size(const drk_heap *h, uintptr_t ptr, size_t *size);
/* Whether `ptr` lies in the heap's virtual space, live or not. */
int drk_heap_contains(const drk_heap *h, uintptr_t ptr);

/* The runs (handles, heap.c) under the live block starting at `ptr`, in
 * address order: *n of them, lens[i] pages each, the first run's first page
 * at *first_va (a run may start before the block and end after it: a handle
 * maps only whole). DRK_PAGES_OOM (with *n set) when more than `max`;
 * DRK_PAGES_INVALID for no such block. They never move while the block
 * lives. */
int drk_heap_block_runs(const drk_heap *h, uintptr_t ptr, drk_page_handle *handles, uint32_t *lens, size_t max,
                        size_t *n, uintptr_t *first_va);
/* Calls fn once per run of consecutive mapped pages. */
void drk_heap_mapped_runs(const drk_heap *h, void (*fn)(void *ctx, uintptr_t va, size_t bytes), void *ctx);

/* Idle pages are kept where they are, for their holes to be reused at no
 * cost, up to this many per thousand pages under live data; past that a
 * page a request needs is an idle one moved, not a new one. Lower keeps
 * memory closer to live data; higher saves remapping. */
#define DRK_HEAP_IDLE_PERMILLE 10u
void drk_heap_set_idle(drk_heap *h, unsigned permille);

/* Pages are mapped in runs: one handle of several pages, made with one
 * driver call for a request's gap, mapped, moved and given back whole
 * (every VMM call costs about the same per handle whatever its size).
 * A run's idle pages move only once none of its pages is under a live
 * block: within the reserve a smaller block reuses part of an idle run in
 * place; past it the run is cut (heap.c, cuts). The longest run made, in
 * pages (DRK_ALLOC_RUN_PAGES; 1: one handle a page; the backend's
 * create_run is needed for more). */
#define DRK_HEAP_RUN_MAX 64u
void drk_heap_set_run_max(drk_heap *h, size_t pages);
/* The same, plus a number of idle pages kept whatever the share (a reserve
 * of free memory that stays mapped, where reuse costs nothing), and
 * whether idle pages may move at all: with moves off, a page stays where
 * it was first mapped and a request no hole fits needs a new page. */
void drk_heap_set_policy(drk_heap *h, unsigned permille, size_t floor_pages, int moves);

/* Releases idle runs (oldest first) while more than `keep` pages are idle,
 * none that would leave fewer. */
void drk_heap_trim(drk_heap *h, size_t keep);

/* Growth ahead of demand. A request no hole fits is carved at the heap's
 * frontier: the start of the free block that ends its newest chunk. A
 * grower (device.c's thread) maps pages there before they are asked for,
 * with its slow driver calls outside the lock the caller of the heap holds:
 *   under the lock:   n = drk_heap_claim_ahead(...)  marks n pages claimed
 *   without it:       create pages, map them at va    (the page backend)
 *   under the lock:   drk_heap_claim_done(...)       they are idle pages now
 * Meanwhile an allocation that would lie over a claimed page fails with
 * DRK_PAGES_BUSY and changes nothing: its caller waits for the claim to end
 * and asks again. One claim at a time. Pages mapped so are "ahead" until a
 * block lies over them or they move; they count as idle pages throughout. */

/* The pages mapped at the frontier now, ready for requests no hole fits. */
size_t drk_heap_ahead_ready(const drk_heap *h);
/* Claims up to `n` unmapped pages after the ready ones: returns how many,
 * the first at *va; 0 when a claim is under way or the newest chunk has no
 * unmapped page left. */
size_t drk_heap_claim_ahead(drk_heap *h, size_t n, uintptr_t *va);
/* Ends the claim: the first `n` of its pages were mapped (handles[i] at
 * va + i * page size, readable and writable); the rest were not and are
 * unclaimed as they were. */
void drk_heap_claim_done(drk_heap *h, const drk_page_handle *handles, size_t n);
/* Pages the heap's allocations took for growth: created by the allocation
 * itself, or mapped ahead. What the grower's pace follows. */
uint64_t drk_heap_grown(const drk_heap *h);

typedef struct drk_heap_stats {
    uint64_t live_bytes, peak_live_bytes;   /* as asked */
    uint64_t live_blocks;
    uint64_t pages, peak_pages;             /* created and not released */
    uint64_t idle_pages;                    /* mapped under no live block */
    uint64_t idle_run_pages;                /* of those, in runs no live block lies over: they can move */
    uint64_t spare_pages;                   /* created, mapped nowhere */
    uint64_t reserved_va;                   /* bytes of virtual space */
    uint64_t creates, moves, releases;      /* pages created by allocations, remapped from idle holes, released */
    uint64_t create_calls, move_calls;      /* the handles those pages were: what the driver's time follows */
    uint64_t cut_calls;                     /* idle runs given back because a block covered them in part */
    uint64_t map_calls, unmap_calls;
    uint64_t ahead_pages;                   /* mapped ahead and not yet taken (idle pages too) */
    uint64_t ahead_made, ahead_used;        /* pages mapped ahead (created too); taken by allocations */
    uint64_t busy;                          /* allocations refused while the pages they needed were claimed */
    uint64_t grown;                         /* creates + ahead_used */
} drk_heap_stats;

drk_heap_stats drk_heap_get_stats(const drk_heap *h);
/* Two of the stats, for callers that look after every allocation. */
uint64_t drk_heap_pages(const drk_heap *h);
uint64_t drk_heap_moves(const drk_heap *h);

/* Bytes in holes of the virtual space, and the largest hole: a walk over
 * every block (for tests and reports, not for each allocation). */
void drk_heap_holes(const drk_heap *h, uint64_t *total, uint64_t *largest);

/* Checks every invariant (blocks tile each chunk, free neighbours are
 * merged, page counts match the blocks over them); 0, or -1 with what is
 * wrong in err. For tests. */
int drk_heap_check(const drk_heap *h, char *err, size_t errlen);

#endif
