/* The process's device pools, one per device, behind the allocation hooks:
 * what cuMemAlloc, cuMemAllocAsync, cuMemAllocPitch and their frees become,
 * and the pointer queries that must answer for pool memory as the driver
 * answers for its own allocations.
 *
 * Each call says whether the pool handled it (1, with the driver result it
 * gives the program in *r) or whether the hook should hand the call to the
 * driver unchanged (0): memory the pool does not own, allocations while a
 * stream captures a graph, and everything once the pool could not start.
 * The pool reaches the driver only through the driver table. */
#ifndef DRK_ALLOC_DEVICE_H
#define DRK_ALLOC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "base/driver.h"

typedef struct drk_dpool_settings {
    int sync_free;              /* cuMemFree waits for the device first */
    int defrag;                 /* idle pages may move (stitching) */
    long reserve;               /* DRK_STREAM_RESERVE: bytes, or -(basis points) of device memory */
    unsigned defrag_threshold;  /* basis points of pages idle past which a quiet moment trims */
    int thread_shards;          /* threads meeting on shard 0 may get shards of their own */
    int grow;                   /* a thread of drk's maps pages ahead of demand */
    size_t run_pages;           /* the most pages a driver handle covers (0: the heap's default) */
} drk_dpool_settings;

/* Called once, before any other call, with the driver table to use. */
void drk_dpool_configure(const drk_driver *drv, const drk_dpool_settings *s);

/* The pool's switch for an A/B inside one program (drk_alloc_switch,
 * docs/memory.md): off, new allocations go to the driver; blocks the pool
 * served stay its own, and their frees and queries are its. on: 1, 0 or
 * -1 (only asks). Returns the state before. */
int drk_dpool_switch(int on);

/* has_stream: cuMemAllocAsync on `stream` (already normalized: NULL is
 * CU_STREAM_LEGACY; a per-thread stream counts as no stream). */
int drk_dpool_alloc(CUdeviceptr *ptr, size_t size, CUstream stream, int has_stream, CUresult *r);
int drk_dpool_free(CUdeviceptr ptr, CUstream stream, int has_stream, CUresult *r);

/* What the pools know of an address, for the pointer queries. */
typedef struct drk_dpool_block {
    CUdeviceptr base;
    size_t size;                 /* as asked */
    unsigned long long buffer_id; /* unique in the process, never one of the driver's */
    CUcontext ctx;                /* the context the pool serves */
    int device;                   /* ordinal */
    int async;                    /* from cuMemAllocAsync: no legacy IPC, as with the driver's pools */
} drk_dpool_block;

/* -1: not pool memory (ask the driver); 0: in a pool's address space but
 * in no live allocation (unknown to the program); 1: inside the live
 * allocation *out. Interior pointers count. */
int drk_dpool_query(CUdeviceptr ptr, drk_dpool_block *out);
/* Free memory the pools hold (whole pages under no live block). */
size_t drk_dpool_cached_free(void);

/* Streams the program creates and destroys: frees without a stream must
 * wait for work on every one of them. */
void drk_dpool_stream_created(CUstream stream);
void drk_dpool_stream_destroyed(CUstream stream);

/* The program made a green context on `dev` (cuGreenCtxCreate). Its
 * streams run work on the primary context's memory but belong to no
 * context drk follows, so no seal could cover them: from now on the driver
 * serves the device's allocations, and the pool's seals stop (memory it
 * served and the program frees is reused only after a wait below). */
void drk_dpool_green_ctx(CUdevice dev);

/* The program waits for context `ctx` (NULL: the current one) with
 * cuCtxSynchronize, which for a primary context covers its green contexts
 * too. Before the wait: a mark (0: nothing to do); after it succeeded,
 * drk_dpool_sync_end with that mark gives back, in a pool whose seals
 * stopped, every block freed before the wait began. A failed wait calls
 * nothing. */
uint64_t drk_dpool_sync_begin(CUcontext ctx);
void drk_dpool_sync_end(CUcontext ctx, uint64_t mark);

/* A graph capture begins (before the driver's call) or ends. While none is
 * under way, allocations need not ask the driver whether their stream
 * captures. Any thread; never below zero. */
void drk_dpool_capture_begins(void);
void drk_dpool_capture_ends(void);
/* Whether a capture is under way in any thread (the host pool then does
 * not wait for the device: a wait would end the capture). */
int drk_dpool_captures_under_way(void);

/* A quiet moment (the program waits for the device): give back idle pages
 * past the reserve when more than the threshold of pages are idle. Never
 * waits for a lock. */
void drk_dpool_quiet(void);

/* A peer context's device may now access the pools' pages, present and future. */
void drk_dpool_peer_enabled(CUcontext peer);

/* For IPC: the runs of pages under the live allocation at `ptr` (its
 * start; drk_heap_block_runs) and the backend that made them. 0 on success. */
struct drk_page_backend;
int drk_dpool_block_runs(CUdeviceptr ptr, uint64_t *handles, uint32_t *lens, size_t max, size_t *n,
                         uintptr_t *first_va, size_t *size, struct drk_page_backend **pages);
/* Held around the use of a backend (and its handles) that
 * drk_dpool_block_runs handed out: a pool whose context ends waits for
 * every hold before it releases its pages and lets the backend go. Hold
 * only briefly (no socket waits inside). */
void drk_dpool_backends_hold(void);
void drk_dpool_backends_release(void);

/* One shard: the device's shared one (stream 0), a thread's own (stream 0,
 * thread 1) or a stream's own. */
typedef struct drk_dpool_shard_report {
    int device;
    uintptr_t stream;
    int thread;
    uint64_t allocs, frees, live_bytes, peak_live_bytes, reserved_bytes, peak_reserved_bytes, idle_bytes;
    uint64_t same_stream_reuses, pages_moved;
} drk_dpool_shard_report;

#define DRK_DPOOL_REPORT_SHARDS 64

typedef struct drk_dpool_report {
    int enabled, started;
    uint64_t page_bytes;
    uint64_t allocs, frees, failed_allocs, bad_frees, driver_allocs, out_of_memory, steals;
    uint64_t switched_off_allocs; /* handed to the driver while the program had the pool switched off */
    uint64_t green_devices;       /* devices where the program made a green context (drk_dpool_green_ctx) */
    uint64_t green_allocs;        /* allocations handed to the driver there since */
    uint64_t sync_reclaims;       /* blocks given back after the program waited for the device, seals stopped */
    uint64_t live_bytes, peak_live_bytes, live_blocks;   /* peaks: of the device, all shards together */
    uint64_t reserved_bytes, peak_reserved_bytes, va_bytes;
    uint64_t pages_created, pages_released, pages_moved, idle_pages, spare_pages, map_calls, unmap_calls;
    uint64_t handles_created, handles_moved; /* the driver handles (runs of pages) those pages were */
    uint64_t defrag_events, quiet_trims, oom_waits, same_stream_reuses, events, pending_bytes;
    uint64_t free_total, free_largest; /* holes of the virtual space */
    uint64_t streams;                  /* created streams alive */
    uint64_t contexts_ended;           /* pools ended with their context (reset, destroyed) */
    uint64_t thread_shards;            /* threads' own shards (allocating alongside others) */
    /* Growth ahead of demand: pages the grower made (in pages_created too),
     * those allocations took, pages allocations made themselves, pages
     * ahead at exit, allocations that waited for the grower. */
    uint64_t pages_made_ahead, pages_taken_ahead, pages_created_in_calls, ahead_pages, growth_waits;
    uint64_t alloc_ns[32], free_ns[32]; /* sampled latency, bucket b: [2^b, 2^(b+1)) ns */
    uint64_t latency_samples;
    int nshards;
    drk_dpool_shard_report shards[DRK_DPOOL_REPORT_SHARDS];
} drk_dpool_report;

/* Summed over devices; shards of pools that ended count with the rest. */
void drk_dpool_get_report(drk_dpool_report *out);

/* Context `ctx` is about to end (alive: it still exists; cuCtxDestroy,
 * cuDevicePrimaryCtxReset) or has ended (0: its last release). A device
 * pool there gives its memory back while it can (the program's blocks end
 * with the context, as the driver's would), forgets its pointers (the
 * driver may hand their addresses out again) and starts afresh at the next
 * allocation. */
void drk_dpool_context_ends(CUcontext ctx, int alive);
/* At exit: drk's page grower stops (waiting 2 s at most). */
void drk_dpool_at_exit(void);
/* In a fork child: the parent's pools are unusable (CUDA is); forget them. */
void drk_dpool_after_fork_child(void);

#endif
