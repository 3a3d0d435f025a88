/* The process's device pools. Per device, one set of pages (pages_vmm.c)
 * and several shards, each a stream-ordered pool (pool.c) over a paged heap
 * (heap.c) behind its own mutex: shard 0 serves cuMemAlloc and the default
 * streams; every created stream that allocates gets a shard of its own (up
 * to MAX_SHARDS), so threads on their own streams never wait for each
 * other; and a thread that keeps finding shard 0's lock held gets a shard
 * of its own for its cuMemAlloc and default-stream allocations (a thread
 * shard, up to MAX_THREAD_SHARDS), so threads allocating at once scale
 * while a program that allocates from one thread keeps one shared shard.
 * A free goes to the shard whose virtual range holds the pointer,
 * found without a lock in a table of the ranges the shards reserved (only
 * ever appended to). Idle pages stay in their shard up to its share of the
 * reserve; under pressure a shard takes the others' idle pages by having
 * them give theirs back to the driver. */
#define _GNU_SOURCE
#include "alloc/device.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/epochs.h"
#include "alloc/growth.h"
#include "alloc/heap.h"
#include "alloc/pages_vmm.h"
#include "alloc/pool.h"
#include "alloc/pool_events.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"

#define MAX_DEVICES 64
#define MAX_SHARDS 64
/* Thread shards at most; past them, threads share shard 0. */
#define MAX_THREAD_SHARDS 16
/* Allocations of one thread that found shard 0's lock held, before that
 * thread gets a shard of its own: a thread that meets another now and then
 * stays on the shared shard (memory in one heap serves every thread). */
#define SPLIT_AFTER 8
#define MAX_RANGES 8192
#define VA_CHUNK_MAX ((size_t)64 << 30)
#define VA_CHUNK_STREAM ((size_t)8 << 30)
/* Latency is timed on one operation in this many: a prime, so that the
 * sample does not fall in step with the pool's periodic work. */
#define SAMPLE_EVERY 13
/* A shard's seal of cuMemFree's epoch that is not urgent waits, after the
 * newest seal (another shard's; its own too where a seal records more than
 * the legacy stream's event), this long per event a seal records (a
 * stream's): with 10 streams, 50 us between seals. */
#define EPOCH_GAP_NS 5000u

typedef struct shard {
    pthread_mutex_t lock;
    uintptr_t stream; /* 0 for shard 0 and thread shards */
    int index;
    int thread;              /* a thread shard */
    atomic_uintptr_t owner;  /* a thread shard's thread (its token), 0 once that thread ended */
    drk_page_backend *pages; /* the device's pages, seen through this shard's range notes */
    drk_heap *heap;
    drk_cuda_events *events;
    drk_pool *pool;
    /* Under the lock. */
    uint64_t allocs, frees, failed, bad_frees, ooms, defrag_events, quiet_trims, last_moves, steals;
    uint64_t alloc_ns[32], free_ns[32], samples;
    size_t keep_pages; /* its share of the reserve */
    uint64_t seen_live, seen_pages; /* what the device's totals last heard from it */
    int retired; /* its context ended: nothing of it may be used (under the lock) */
    /* Growth ahead of demand (under the lock): the heap's grown count the
     * allocations last saw, the grower's watermarks, when it may try again
     * after the driver had no memory, and allocations that waited. */
    uint64_t seen_grown, grow_after_ns, busy_waits;
    drk_growth growth;
    atomic_uint claims_done; /* claims the grower ended: what a waiting allocation watches */
    atomic_int program_in;   /* a program call holds the lock (drk's own threads take it without this) */
    struct shard *forgotten; /* in a fork child: the next of the parent's shards, kept (see below) */
} shard;

typedef struct dpool {
    atomic_int state; /* 0 not started, 1 ready, 2 ending, -1 failed: the driver allocates */
    atomic_uint gen;  /* pools started on this device, and a green context made: threads' caches name one */
    int ordinal;
    CUcontext ctx;
    CUdevice dev;
    int holds_primary; /* drk retained ctx, the device's primary context, so that the
                          program's last release cannot end it under the pool */
    drk_page_backend *vmm; /* shared by the shards; thread-safe */
    size_t total, keep_pages;
    size_t page_bytes; /* once a pool started here */
    pthread_mutex_t grow_lock; /* adding shards, granting peers */
    pthread_mutex_t grower_lock; /* held by the grower while it maps pages here: the pool ends only outside it */
    shard *shards[MAX_SHARDS];
    atomic_int nshards;
    /* cuMemFree's epochs, sealed for all shards together (alloc/epochs.h),
     * on events of their own; NULL: each shard seals its own. */
    drk_epochs *epochs;
    drk_cuda_events *epoch_events;
    int nthread_shards; /* under grow_lock */
    /* The context of a created stream drk could not list (out of host
     * memory; LOST_SEVERAL: streams of two contexts): seals in that
     * context would complete without its work, so its pool seals none.
     * Under streams_lock; cleared when that context ends. */
    CUcontext lost;
    /* The program made a green context on this device: its streams (of the
     * primary context's memory, but of no context drk follows) are behind
     * no seal, so the pool serves no more allocations and seals no more;
     * set for the process. */
    atomic_int green;
    /* The program's waits for this pool's context begun (their marks), and
     * whether a seal of the pool may have stopped (only then do those
     * waits look at its shards). */
    _Atomic uint64_t sync_marks;
    atomic_int may_be_stopped;
    /* All shards together, and their peaks. */
    _Atomic uint64_t live, peak_live, pages, peak_pages;
    /* What shards of pools whose context ended had counted; under start_lock. */
    drk_dpool_report ended;
} dpool;

static dpool pools[MAX_DEVICES];
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static drk_driver drv_copy;
static const drk_driver *drv = &drv_copy;
static drk_dpool_settings cfg;
static atomic_int configured;
static _Atomic uint64_t driver_allocs, switched_off_allocs, green_allocs, sync_reclaims;
static atomic_int switched_on = 1;
static atomic_int warned_alloc, warned_free; /* drk's own failures: said once */
/* Ends a thread's claim on its thread shard when the thread exits. */
static pthread_key_t thread_key;
static int have_thread_key;
/* Per device: the devices given peer access to its memory. */
static _Atomic uint64_t peer_grants[MAX_DEVICES];

/* Reserved ranges and whose they are; read without a lock. */
static struct range {
    uintptr_t base, end;
    shard *owner;
    dpool *pool;
    atomic_int dead; /* its context ended: the driver may hand the addresses out again */
} ranges[MAX_RANGES];
static atomic_size_t nranges;
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;

/* Read-held by IPC while it uses a backend and its handles; write-held
 * by a pool ending while it releases them. */
static pthread_rwlock_t backends_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Created streams and their devices, for shards that start later. */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct known_stream {
    CUstream s;
    int device;
    CUcontext ctx;
} *streams;
static size_t nstreams, streams_cap;

/* A thread that held a thread shard has ended: another thread may take it
 * (its blocks stay where they are; their frees find them by address).
 * Shards are never freed, so the pointer is good even after its pool ended. */
static void thread_ends(void *arg)
{
    shard *s = arg;
    atomic_store_explicit(&s->owner, 0, memory_order_release);
}

void drk_dpool_configure(const drk_driver *d, const drk_dpool_settings *s)
{
    drv_copy = *d; /* the table handed in may be a thread's own copy */
    cfg = *s;
    have_thread_key = pthread_key_create(&thread_key, thread_ends) == 0;
    for (int i = 0; i < MAX_DEVICES; i++) {
        pthread_mutex_init(&pools[i].grow_lock, NULL);
        pthread_mutex_init(&pools[i].grower_lock, NULL);
    }
    atomic_store(&configured, 1);
}

/* ---- Ranges: each shard's view of the pages notes what it reserves ---- */

typedef struct ranged {
    drk_page_backend base; /* first */
    drk_page_backend *inner;
    shard *owner;
    dpool *pool;
} ranged;

static drk_page_backend *inner_of(drk_page_backend *b) { return ((ranged *)b)->inner; }

static int r_reserve(drk_page_backend *b, size_t size, uintptr_t *va)
{
    int rc = inner_of(b)->reserve(inner_of(b), size, va);
    if (rc != DRK_PAGES_OK)
        return rc;
    pthread_mutex_lock(&ranges_lock);
    size_t i = atomic_load(&nranges);
    if (i < MAX_RANGES) {
        ranges[i].base = *va, ranges[i].end = *va + size;
        ranges[i].owner = ((ranged *)b)->owner, ranges[i].pool = ((ranged *)b)->pool;
        atomic_store_explicit(&ranges[i].dead, 0, memory_order_relaxed);
        atomic_store_explicit(&nranges, i + 1, memory_order_release);
    }
    pthread_mutex_unlock(&ranges_lock);
    if (i >= MAX_RANGES) {
        inner_of(b)->unreserve(inner_of(b), *va, size);
        return DRK_PAGES_OOM;
    }
    return rc;
}
/* Shards are never deleted, so their ranges are freed only when a shard
 * fails to start (before it was ever used). */
static int r_unreserve(drk_page_backend *b, uintptr_t va, size_t size) { return inner_of(b)->unreserve(inner_of(b), va, size); }
static int r_create(drk_page_backend *b, drk_page_handle *p) { return inner_of(b)->create(inner_of(b), p); }
static int r_create_run(drk_page_backend *b, size_t n, drk_page_handle *p)
{
    return inner_of(b)->create_run(inner_of(b), n, p);
}
static int r_release(drk_page_backend *b, drk_page_handle p) { return inner_of(b)->release(inner_of(b), p); }
static int r_map(drk_page_backend *b, uintptr_t va, const drk_page_handle *p, size_t n)
{
    return inner_of(b)->map(inner_of(b), va, p, n);
}
static int r_unmap(drk_page_backend *b, uintptr_t va, size_t n) { return inner_of(b)->unmap(inner_of(b), va, n); }
static size_t r_created(drk_page_backend *b) { return inner_of(b)->pages_created(inner_of(b)); }
static size_t r_mapped(drk_page_backend *b) { return inner_of(b)->pages_mapped(inner_of(b)); }
static void r_destroy(drk_page_backend *b) { free(b); } /* the device's pages outlive a shard */

static drk_page_backend *ranged_new(dpool *d, shard *s)
{
    ranged *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->inner = d->vmm, g->owner = s, g->pool = d;
    g->base = *d->vmm;
    g->base.reserve = r_reserve, g->base.unreserve = r_unreserve, g->base.create = r_create;
    g->base.create_run = d->vmm->create_run ? r_create_run : NULL;
    g->base.release = r_release, g->base.map = r_map, g->base.unmap = r_unmap;
    g->base.pages_created = r_created, g->base.pages_mapped = r_mapped, g->base.destroy = r_destroy;
    return &g->base;
}

static shard *owner(uintptr_t p, dpool **d)
{
    size_t n = atomic_load_explicit(&nranges, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (p >= ranges[i].base && p < ranges[i].end && !atomic_load_explicit(&ranges[i].dead, memory_order_acquire)) {
            *d = ranges[i].pool;
            return ranges[i].owner;
        }
    return NULL;
}

/* ---- Shards ---- */

static size_t reserve_bytes(size_t total)
{
    return cfg.reserve >= 0 ? (size_t)cfg.reserve : (size_t)((double)total * (double)-cfg.reserve / 10000.0);
}

#define LOST_SEVERAL ((CUcontext)(uintptr_t)-1)

static int stream_lost(const dpool *d)
{
    return (d->lost && (d->lost == d->ctx || d->lost == LOST_SEVERAL)) || atomic_load(&d->green);
}

/* The streams of the pool's context known now, told to a new shard (and
 * for shard 0 to the epochs), or that one is not known. Under streams_lock. */
static void register_streams_locked(dpool *d, shard *s)
{
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i].device == d->ordinal && streams[i].ctx == d->ctx) {
            if (drk_pool_stream_created(s->pool, (uintptr_t)streams[i].s) != 0 ||
                (s->index == 0 && d->epochs && drk_epochs_stream_created(d->epochs, (uintptr_t)streams[i].s) != 0))
                atomic_store(&d->may_be_stopped, 1);
        }
    if (stream_lost(d)) {
        drk_pool_stream_lost(s->pool);
        if (s->index == 0 && d->epochs)
            drk_epochs_stream_lost(d->epochs);
    }
}

/* A new shard (not shard 0) joins `d`: told of the streams and listed
 * under streams_lock, so that a stream created meanwhile is told to it
 * by its hook or is in the list it read. Under grow_lock. */
static void add_shard(dpool *d, shard *s, int n)
{
    pthread_mutex_lock(&streams_lock);
    register_streams_locked(d, s);
    d->shards[n] = s;
    atomic_store_explicit(&d->nshards, n + 1, memory_order_release);
    pthread_mutex_unlock(&streams_lock);
}

/* cuMemFree's epochs for every shard of `d`; without them (no events, out
 * of host memory) each shard seals its own, as before. */
static void epochs_start(dpool *d)
{
    d->epoch_events = drk_cuda_events_new(drv);
    drk_pool_events table = d->epoch_events ? drk_cuda_events_table(d->epoch_events) : (drk_pool_events){0};
    d->epochs = d->epoch_events ? drk_epochs_new(&table, EPOCH_GAP_NS) : NULL;
    if (!d->epochs && d->epoch_events) {
        drk_cuda_events_delete(d->epoch_events);
        d->epoch_events = NULL;
    }
}

/* A new shard for `stream` (0: the device's shared one), or NULL. Under
 * grow_lock (or start_lock for shard 0). */
static shard *shard_new(dpool *d, uintptr_t stream, int index)
{
    /* A cache line of its own: threads on other shards never touch it. */
    shard *s = aligned_alloc(64, (sizeof(shard) + 63) / 64 * 64);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->stream = stream, s->index = index;
    size_t page = d->vmm->page_size;
    size_t chunk = index == 0 ? (d->total + page - 1) / page * page : VA_CHUNK_STREAM;
    if (chunk > VA_CHUNK_MAX)
        chunk = VA_CHUNK_MAX;
    chunk = chunk / page * page;
    s->pages = ranged_new(d, s);
    s->heap = s->pages ? drk_heap_new(s->pages, chunk) : NULL;
    if (s->heap && cfg.run_pages)
        drk_heap_set_run_max(s->heap, cfg.run_pages);
    s->events = s->heap ? drk_cuda_events_new(drv) : NULL;
    drk_pool_events table = s->events ? drk_cuda_events_table(s->events) : (drk_pool_events){0};
    s->pool = s->events ? drk_pool_new(s->heap, &table) : NULL;
    if (s->pool && d->epochs)
        drk_pool_share_epochs(s->pool, d->epochs);
    if (!s->pool) {
        if (s->events)
            drk_cuda_events_delete(s->events);
        drk_heap_delete(s->heap);
        if (s->pages)
            s->pages->destroy(s->pages);
        free(s);
        return NULL;
    }
    return s; /* told of the streams as it joins: start, add_shard */
}

/* Shard s keeps up to `pages` idle pages. Under s->lock. */
static void set_keep(shard *s, size_t pages)
{
    s->keep_pages = pages;
    drk_heap_set_policy(s->heap, DRK_HEAP_IDLE_PERMILLE, pages, cfg.defrag);
}

/* Each shard keeps an equal share of the reserve; a new shard shrinks the
 * others' shares (until their pages change: follow_reserve). Under
 * grow_lock. */
static void share_reserve(dpool *d, int n)
{
    size_t each = d->keep_pages / (size_t)(n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        shard *s = d->shards[i];
        pthread_mutex_lock(&s->lock);
        set_keep(s, each);
        pthread_mutex_unlock(&s->lock);
    }
}

static void grower_start(void);

/* Under start_lock, with `ctx` current. */
static void start(dpool *d, CUcontext ctx, CUdevice dev)
{
    d->vmm = drk_pages_vmm(drv, dev, 0);
    if (!d->vmm || drv->device_total_mem(&d->total, dev) != CUDA_SUCCESS) {
        if (d->vmm)
            d->vmm->destroy(d->vmm);
        drk_log(DRK_LOG_WARN, "device %d: the driver offers no virtual memory management; it allocates "
                              "(drk's device pool is off for this device)", d->ordinal);
        atomic_store(&d->state, -1);
        return;
    }
    d->ctx = ctx, d->dev = dev;
    /* The pool's pages live in this context: if it is the device's primary
     * one, drk holds it too, so that the program's last release cannot end
     * it while the pool has memory there (a reset still does: see
     * drk_dpool_context_ends). */
    unsigned int pflags;
    int active = 0;
    CUcontext primary = NULL;
    if (!d->holds_primary && drv->primary_ctx_get_state && drv->primary_ctx_retain && drv->primary_ctx_release &&
        drv->primary_ctx_get_state(dev, &pflags, &active) == CUDA_SUCCESS && active &&
        drv->primary_ctx_retain(&primary, dev) == CUDA_SUCCESS) {
        if (primary == ctx)
            d->holds_primary = 1;
        else
            drv->primary_ctx_release(dev);
    }
    uint64_t grants = atomic_load(&peer_grants[d->ordinal]);
    for (int i = 0; i < MAX_DEVICES; i++)
        if (grants >> i & 1)
            drk_pages_vmm_add_access(d->vmm, (CUdevice)i, 0, 0);
    size_t page = d->vmm->page_size;
    d->page_bytes = page;
    d->keep_pages = reserve_bytes(d->total) / page;
    epochs_start(d);
    shard *s0 = shard_new(d, 0, 0);
    if (!s0) {
        drk_epochs_delete(d->epochs);
        drk_cuda_events_delete(d->epoch_events);
        d->epochs = NULL, d->epoch_events = NULL;
        drk_log(DRK_LOG_WARN, "device %d: drk's device pool could not start (out of host memory or no events); "
                              "the driver allocates", d->ordinal);
        atomic_store(&d->state, -1);
        return;
    }
    d->shards[0] = s0;
    atomic_store(&d->nshards, 1);
    share_reserve(d, 1);
    drk_log(DRK_LOG_INFO, "device %d: drk's device pool serves allocations (pages of %zu KiB, up to %zu MiB kept "
                          "free for reuse, stitching %s)", d->ordinal, page >> 10, (d->keep_pages * page) >> 20,
            cfg.defrag ? "on" : "off");
    /* The streams known now and the state together, under streams_lock: a
     * stream created or destroyed meanwhile is told to the pool by its hook
     * (state 1) or is in the list read here, never neither (no seal would
     * record on it) nor gone from the list but still told (seals would
     * record on a destroyed stream). */
    pthread_mutex_lock(&streams_lock);
    register_streams_locked(d, s0);
    atomic_store_explicit(&d->state, 1, memory_order_release);
    pthread_mutex_unlock(&streams_lock);
    grower_start();
}

static __thread CUcontext tl_ctx;
static __thread dpool *tl_pool;
static __thread unsigned tl_gen;
static __thread uintptr_t tl_stream;
static __thread shard *tl_shard;
/* This thread's thread shard, for pool tl_own_pool while its gen is
 * tl_own_gen; and how many of its allocations found shard 0's lock held.
 * tl_held's address is the thread's token in a shard's owner. */
static __thread shard *tl_own;
static __thread dpool *tl_own_pool;
static __thread unsigned tl_own_gen;
static __thread unsigned tl_held;

/* The pool of the current context's device, started on first use; NULL
 * when there is no current context or the pool cannot run there. */
static dpool *current_pool(CUcontext *current)
{
    CUcontext ctx = NULL;
    if (!atomic_load_explicit(&configured, memory_order_relaxed) || drv->ctx_get_current(&ctx) != CUDA_SUCCESS ||
        !ctx)
        return NULL;
    *current = ctx;
    if (ctx == tl_ctx && tl_pool && tl_gen == atomic_load_explicit(&tl_pool->gen, memory_order_acquire))
        return tl_pool;
    CUdevice dev;
    if (drv->ctx_get_device(&dev) != CUDA_SUCCESS || dev < 0 || dev >= MAX_DEVICES)
        return NULL;
    dpool *d = &pools[dev];
    if (atomic_load_explicit(&d->green, memory_order_acquire)) {
        atomic_fetch_add_explicit(&green_allocs, 1, memory_order_relaxed);
        return NULL;
    }
    /* Read before the state: a pool ending meanwhile changes it, so this
     * thread's cache goes stale at once. */
    unsigned gen = atomic_load_explicit(&d->gen, memory_order_acquire);
    if (atomic_load_explicit(&d->state, memory_order_acquire) == 0) {
        pthread_mutex_lock(&start_lock);
        if (atomic_load(&d->state) == 0) {
            d->ordinal = (int)dev;
            start(d, ctx, dev);
        }
        pthread_mutex_unlock(&start_lock);
    }
    /* Another context on the device: the driver serves it. The pool's
     * events belong to its own context and cannot be recorded on another's
     * streams, whose work a free's seal would then not cover. */
    if (atomic_load_explicit(&d->state, memory_order_acquire) != 1 || d->ctx != ctx)
        return NULL;
    tl_ctx = ctx, tl_pool = d, tl_shard = NULL, tl_gen = gen;
    return d;
}

/* The shard serving allocations on `stream` (0: cuMemAlloc and the
 * default streams: the thread's own shard if it has one, else shard 0). */
static shard *shard_for(dpool *d, uintptr_t stream)
{
    if (!stream)
        return tl_own && tl_own_pool == d && tl_own_gen == atomic_load_explicit(&d->gen, memory_order_relaxed)
                   ? tl_own
                   : d->shards[0];
    if (tl_shard && tl_stream == stream && tl_pool == d)
        return tl_shard;
    int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
    shard *found = NULL;
    for (int i = 1; i < n && !found; i++)
        if (d->shards[i]->stream == stream)
            found = d->shards[i];
    if (!found) {
        pthread_mutex_lock(&d->grow_lock);
        n = atomic_load(&d->nshards);
        for (int i = 1; i < n && !found; i++)
            if (d->shards[i]->stream == stream)
                found = d->shards[i];
        if (!found && atomic_load(&d->state) == 1 && n < MAX_SHARDS && (found = shard_new(d, stream, n)) != NULL) {
            add_shard(d, found, n);
            share_reserve(d, n + 1);
        }
        pthread_mutex_unlock(&d->grow_lock);
        if (!found)
            found = d->shards[0]; /* past the table, or out of host memory: share */
    }
    tl_stream = stream, tl_shard = found;
    return found;
}

/* Pool calls run in the pool's context: its events belong there. `cur`
 * is the caller's current context; *held says whether another thread held
 * the lock (a try first costs nothing more when it is free). */
static CUcontext enter_noting(dpool *d, shard *s, CUcontext cur, int *held)
{
    *held = pthread_mutex_trylock(&s->lock) != 0;
    if (*held) {
        /* Only another program call's hold counts: with the grower on, a
         * single-threaded program (alloc_frag on the H200) took a shard
         * after waits for drk's own threads. */
        *held = atomic_load_explicit(&s->program_in, memory_order_relaxed);
        pthread_mutex_lock(&s->lock);
    }
    atomic_store_explicit(&s->program_in, 1, memory_order_relaxed);
    if (cur != d->ctx && drv->ctx_set_current(d->ctx) != CUDA_SUCCESS)
        cur = d->ctx;
    return cur;
}

static CUcontext enter_from(dpool *d, shard *s, CUcontext cur)
{
    int held;
    return enter_noting(d, s, cur, &held);
}

static CUcontext enter(dpool *d, shard *s)
{
    CUcontext cur = NULL;
    if (drv->ctx_get_current(&cur) != CUDA_SUCCESS)
        cur = d->ctx;
    return enter_from(d, s, cur);
}

/* This thread keeps meeting others on shard 0: it takes a thread shard
 * that no live thread holds, or a new one (under grow_lock, with the
 * reserve shared anew), for its later allocations without a stream. Past
 * MAX_THREAD_SHARDS it stays on shard 0. Blocks it allocated before stay in
 * shard 0; frees find every block's shard by address. */
static void take_thread_shard(dpool *d)
{
    uintptr_t me = (uintptr_t)&tl_held;
    unsigned gen = atomic_load_explicit(&d->gen, memory_order_acquire);
    shard *got = NULL;
    tl_held = 0;
    int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
    for (int i = 1; i < n && !got; i++) {
        uintptr_t none = 0;
        if (d->shards[i]->thread && atomic_compare_exchange_strong(&d->shards[i]->owner, &none, me))
            got = d->shards[i];
    }
    if (!got) {
        pthread_mutex_lock(&d->grow_lock);
        n = atomic_load(&d->nshards);
        if (atomic_load(&d->state) == 1 && d->nthread_shards < MAX_THREAD_SHARDS && n < MAX_SHARDS &&
            (got = shard_new(d, 0, n)) != NULL) {
            got->thread = 1;
            atomic_store(&got->owner, me);
            d->nthread_shards++;
            add_shard(d, got, n);
            share_reserve(d, n + 1);
        }
        pthread_mutex_unlock(&d->grow_lock);
    }
    if (!got)
        return;
    if (tl_own)
        atomic_store_explicit(&tl_own->owner, 0, memory_order_release); /* an ended pool's */
    tl_own = got, tl_own_pool = d, tl_own_gen = gen;
    if (have_thread_key)
        pthread_setspecific(thread_key, got);
    drk_log(DRK_LOG_DEBUG, "device %d: a thread allocating alongside others takes shard %d of its own", d->ordinal,
            got->index);
}

static void leave(dpool *d, shard *s, CUcontext cur)
{
    if (cur != d->ctx)
        drv->ctx_set_current(cur);
    atomic_store_explicit(&s->program_in, 0, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
}

static void note_ns(uint64_t *hist, uint64_t ns)
{
    int b = ns ? 63 - __builtin_clzll(ns) : 0;
    hist[b < 32 ? b : 31]++;
}

/* Captures begun and not ended, in any thread. */
static atomic_long captures;

void drk_dpool_capture_begins(void) { atomic_fetch_add(&captures, 1); }

void drk_dpool_capture_ends(void)
{
    long n = atomic_load(&captures);
    while (n > 0 && !atomic_compare_exchange_weak(&captures, &n, n - 1)) {
    }
}

int drk_dpool_captures_under_way(void) { return atomic_load_explicit(&captures, memory_order_acquire) > 0; }

/* Whether `s` is capturing a graph; asked of the driver only while some
 * capture is under way (a stream joins one through events, not calls). */
static int capturing(CUstream s)
{
    if (!atomic_load_explicit(&captures, memory_order_acquire))
        return 0;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return drv->stream_is_capturing && drv->stream_is_capturing(s, &st) == CUDA_SUCCESS &&
           st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void raise_peak(_Atomic uint64_t *peak, uint64_t v)
{
    uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
    while (v > p && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Carries a shard's changes of live bytes and pages to the device's
 * totals: pages whenever they change (rarely); live bytes at once while
 * the device has one shard, and with several (threads on their own
 * streams, which would all write these totals) once they moved by
 * ACCOUNT_SLACK or 1/64 of the device's live bytes, whichever is more, or
 * pages changed; so the device's peak live is exact with one shard and
 * within that much per shard with several. Under the shard's lock. */
#define ACCOUNT_SLACK ((uint64_t)4 << 20)

/* A shard's share of the reserve follows its share of the device's pages,
 * never below an equal share: the one busy stream of a program has most of
 * the reserve to itself. With equal shares it had half (shard 0, the
 * legacy stream's, holding nothing), and on an 80 GB device the anchor's
 * stream gave idle pages back and made them again inside its loop (an H100:
 * 0.93x the driver's cuMemAllocAsync; the stand-in: 2,722 pages made for a
 * peak of 1,579). The shares may add up to more than the reserve until the
 * other shards' pages next change; memory short in one shard takes idle
 * pages from the others (take_from_others). Under s->lock. */
static void follow_reserve(dpool *d, shard *s, uint64_t pages, uint64_t all)
{
    int n = atomic_load_explicit(&d->nshards, memory_order_relaxed);
    size_t equal = d->keep_pages / (size_t)(n > 0 ? n : 1);
    size_t keep = all ? (size_t)((double)d->keep_pages * (double)pages / (double)all) : equal;
    if (keep < equal)
        keep = equal;
    if (keep > d->keep_pages)
        keep = d->keep_pages;
    if (keep != s->keep_pages)
        set_keep(s, keep);
}

static void account(dpool *d, shard *s)
{
    uint64_t live = drk_pool_live_bytes(s->pool), pages = drk_heap_pages(s->heap);
    uint64_t drift = live > s->seen_live ? live - s->seen_live : s->seen_live - live;
    /* One shard has the device to itself: nothing to share, so exact. */
    uint64_t slack = atomic_load_explicit(&d->live, memory_order_relaxed) / 64;
    if (slack < ACCOUNT_SLACK)
        slack = ACCOUNT_SLACK;
    if (atomic_load_explicit(&d->nshards, memory_order_relaxed) == 1)
        slack = 1;
    if (drift >= slack || (pages != s->seen_pages && live != s->seen_live)) {
        raise_peak(&d->peak_live, atomic_fetch_add(&d->live, live - s->seen_live) + (live - s->seen_live));
        s->seen_live = live;
    }
    if (pages != s->seen_pages) {
        uint64_t all = atomic_fetch_add(&d->pages, pages - s->seen_pages) + (pages - s->seen_pages);
        raise_peak(&d->peak_pages, all);
        s->seen_pages = pages;
        follow_reserve(d, s, pages, all);
    }
}

/* Memory is short in `self`: every other shard waits for its pending frees
 * and gives its idle pages back to the driver, for `self` to create. Takes
 * one shard lock at a time, holding none of its own. 1 if pages went back. */
static int take_from_others(dpool *d, shard *self)
{
    int n = atomic_load_explicit(&d->nshards, memory_order_acquire), got = 0;
    for (int i = 0; i < n; i++) {
        shard *s = d->shards[i];
        if (s == self)
            continue;
        CUcontext cur = enter(d, s);
        if (s->retired) {
            leave(d, s, cur);
            continue;
        }
        drk_pool_flush(s->pool);
        drk_heap_stats before = drk_heap_get_stats(s->heap);
        drk_heap_trim(s->heap, 0);
        drk_heap_stats after = drk_heap_get_stats(s->heap);
        account(d, s);
        leave(d, s, cur);
        got |= after.pages < before.pages;
    }
    return got;
}

/* ---- Growth ahead of demand ----
 *
 * Making a page costs tens of microseconds in the driver (create, map, set
 * access: ~55 us on an H200), which a growing program paid inside its
 * allocation calls. drk's grower thread maps pages at each shard's frontier
 * (heap.h) before they are asked for: woken when an allocation grew its
 * heap, it sets the shard's watermarks from the growth of the last ~100 ms
 * (growth.h) and, while fewer than the low one are ready, claims up to
 * CLAIM_PAGES pages at a time, makes them outside the shard's lock, and
 * hands them to the heap as idle pages. It never holds more than the
 * shard's share of the reserve idle. An allocation that needs a page the
 * grower is making waits for that claim to end (BUSY_WAIT_NS at most, then
 * the driver serves it); one that finds none ready makes its own, as
 * before. DRK_ALLOC_GROW=0: no thread, no pages ahead. */

/* Pages a claim makes at most: what an allocation may wait for (~0.4 ms). */
#define CLAIM_PAGES 8
#define BUSY_WAIT_NS 200000000ull
/* After the driver had no memory for a page, the grower leaves the shard be
 * this long (the allocations' own pressure handling takes over). */
#define GROW_BACKOFF_NS 1000000000ull

static pthread_mutex_t grow_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t grow_cv = PTHREAD_COND_INITIALIZER;
static pthread_t grower;
static atomic_int grower_state; /* 0 not started, 1 running, 2 stopped (or could not start) */
static atomic_int grow_asked;   /* an allocation grew a heap since the grower last looked */
static atomic_int grow_stop;
static atomic_int warned_grow, warned_busy;

/* An allocation grew its heap: the grower looks, once however many ask
 * before it wakes. */
static void grow_ask(void)
{
    if (atomic_load_explicit(&grower_state, memory_order_relaxed) != 1 || atomic_exchange(&grow_asked, 1))
        return;
    pthread_mutex_lock(&grow_mu);
    pthread_cond_signal(&grow_cv);
    pthread_mutex_unlock(&grow_mu);
}

/* Maps pages ahead in one shard until its low watermark is met. Under the
 * pool's grower_lock (so the pool cannot end meanwhile) with the pool's
 * context pushed, without the shard's lock on entry. */
static void grow_shard(dpool *d, shard *s)
{
    pthread_mutex_lock(&s->lock);
    while (!s->retired && !atomic_load_explicit(&grow_stop, memory_order_relaxed)) {
        uint64_t now = drk_mono_ns();
        if (now < s->grow_after_ns)
            break;
        uintptr_t va;
        size_t n = drk_growth_claim(&s->growth, s->heap, now, s->keep_pages, CLAIM_PAGES, &va);
        if (!n)
            break;
        pthread_mutex_unlock(&s->lock);
        /* The driver's slow part, with the shard free for its allocations. */
        drk_page_handle pages[CLAIM_PAGES];
        size_t made = 0;
        int rc = 0;
        while (made < n && (rc = s->pages->create(s->pages, &pages[made])) == 0)
            made++;
        if (made && s->pages->map(s->pages, va, pages, made) != 0) {
            for (size_t i = 0; i < made; i++)
                s->pages->release(s->pages, pages[i]);
            made = 0;
            rc = rc ? rc : DRK_PAGES_FAILED;
        }
        pthread_mutex_lock(&s->lock);
        drk_heap_claim_done(s->heap, pages, made);
        atomic_fetch_add_explicit(&s->claims_done, 1, memory_order_release);
        account(d, s);
        if (rc) {
            s->grow_after_ns = drk_mono_ns() + GROW_BACKOFF_NS;
            if (rc != DRK_PAGES_OOM && !atomic_exchange(&warned_grow, 1))
                drk_log(DRK_LOG_INFO, "device %d: drk could not make a page ahead of demand (error %d); "
                                      "allocations make their own when it fails", d->ordinal, rc);
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

static void grow_all(void)
{
    for (int i = 0; i < MAX_DEVICES && !atomic_load(&grow_stop); i++) {
        dpool *d = &pools[i];
        if (atomic_load_explicit(&d->state, memory_order_acquire) != 1)
            continue;
        pthread_mutex_lock(&d->grower_lock);
        /* Pushed, not set: the grower's thread is drk's own, and the
         * program's context calls stay the program's. */
        int n = atomic_load_explicit(&d->state, memory_order_acquire) == 1 ? atomic_load(&d->nshards) : 0;
        CUcontext popped;
        if (n && drv->ctx_push_current && drv->ctx_push_current(d->ctx) == CUDA_SUCCESS) {
            for (int k = 0; k < n && !atomic_load(&grow_stop); k++)
                grow_shard(d, d->shards[k]);
            drv->ctx_pop_current(&popped);
        }
        pthread_mutex_unlock(&d->grower_lock);
    }
}

static void *grow_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&grow_mu);
    while (!atomic_load(&grow_stop)) {
        if (!atomic_load(&grow_asked)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            pthread_cond_timedwait(&grow_cv, &grow_mu, &until);
            continue;
        }
        atomic_store(&grow_asked, 0);
        pthread_mutex_unlock(&grow_mu);
        grow_all();
        pthread_mutex_lock(&grow_mu);
    }
    pthread_mutex_unlock(&grow_mu);
    return NULL;
}

/* Under start_lock, when a pool starts. */
static void grower_start(void)
{
    if (!cfg.grow || atomic_load(&grower_state) != 0)
        return;
    int ok = drk_thread_start(&grower, grow_main, NULL) == 0;
    atomic_store(&grower_state, ok ? 1 : 2);
    if (!ok)
        drk_log(DRK_LOG_INFO, "drk could not start its page grower; allocations make their own pages");
}

/* The grower is making pages an allocation needs: wait for that claim to
 * end (`seen` was the count of ended claims under the lock). 1 once it
 * ended, 0 after BUSY_WAIT_NS. */
static int wait_claim(shard *s, unsigned seen)
{
    uint64_t until = drk_mono_ns() + BUSY_WAIT_NS;
    for (int spins = 0; atomic_load_explicit(&s->claims_done, memory_order_acquire) == seen; spins++) {
        if (spins < 64) {
            sched_yield();
            continue;
        }
        if (drk_mono_ns() > until)
            return 0;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return 1;
}

void drk_dpool_at_exit(void)
{
    if (atomic_load(&grower_state) != 1)
        return;
    pthread_mutex_lock(&grow_mu);
    atomic_store(&grow_stop, 1);
    pthread_cond_signal(&grow_cv);
    pthread_mutex_unlock(&grow_mu);
    /* It may be inside a driver call: wait a little, then go on without it. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    if (pthread_timedjoin_np(grower, NULL, &until) != 0)
        drk_log(DRK_LOG_INFO, "drk's page grower did not stop in 2 s; the process exits without it");
    atomic_store(&grower_state, 2);
}

/* ---- Allocation ---- */

int drk_dpool_switch(int on)
{
    if (on < 0)
        return atomic_load(&switched_on);
    int was = atomic_exchange(&switched_on, on ? 1 : 0);
    if (was != (on ? 1 : 0))
        drk_log(DRK_LOG_INFO, "device pool: switched %s by the program (drk_alloc_switch)%s", on ? "on" : "off",
                on ? "" : ": new allocations go to the driver");
    return was;
}

int drk_dpool_alloc(CUdeviceptr *ptr, size_t size, CUstream stream, int has_stream, CUresult *r)
{
    /* The driver answers its own errors: no pointer, size 0, absurd sizes. */
    if (!ptr || !size || size > ((size_t)1 << 48))
        return 0;
    if (__builtin_expect(!atomic_load_explicit(&switched_on, memory_order_relaxed), 0)) {
        atomic_fetch_add_explicit(&switched_off_allocs, 1, memory_order_relaxed);
        return 0;
    }
    CUcontext ctx;
    dpool *d = current_pool(&ctx);
    if (!d)
        return 0;
    /* A capture records the allocation as a graph node: only the driver can. */
    if (has_stream && capturing(stream)) {
        atomic_fetch_add_explicit(&driver_allocs, 1, memory_order_relaxed);
        return 0;
    }
    /* A stream's own shard when it has one; cuMemAlloc's blocks, usable by
     * any stream, come from shard 0. */
    uintptr_t keyed = has_stream && stream != CU_STREAM_LEGACY ? (uintptr_t)stream : 0;
    shard *s = shard_for(d, keyed);
    uintptr_t p = 0;
    int rc, stitched = 0, took = 0, held = 0, grew = 0;
    uint64_t moves = 0;
    for (;;) {
        int h;
        CUcontext cur = enter_noting(d, s, ctx, &h);
        held |= h && !took;
        if (__builtin_expect(s->retired, 0)) {
            leave(d, s, cur); /* its context ended as this thread came in */
            return 0;
        }
        int timed = (s->allocs % SAMPLE_EVERY) == 0;
        uint64_t t0 = timed ? drk_mono_ns() : 0;
        rc = drk_pool_alloc(s->pool, size, (uintptr_t)stream, has_stream, &p);
        if (rc == DRK_PAGES_BUSY) {
            /* The grower is making pages this block needs: wait, ask again. */
            unsigned seen = atomic_load_explicit(&s->claims_done, memory_order_acquire);
            s->busy_waits++;
            leave(d, s, cur);
            if (wait_claim(s, seen))
                continue;
            if (!atomic_exchange(&warned_busy, 1))
                drk_log(DRK_LOG_WARN, "device %d: drk's page grower held pages an allocation needed for over "
                                      "%llu ms; the driver serves such allocations", d->ordinal,
                        BUSY_WAIT_NS / 1000000ull);
            atomic_fetch_add_explicit(&driver_allocs, 1, memory_order_relaxed);
            return 0;
        }
        s->allocs++;
        if (timed) {
            note_ns(s->alloc_ns, drk_mono_ns() - t0);
            s->samples++;
        }
        if (cfg.grow) {
            uint64_t g = drk_heap_grown(s->heap);
            grew |= g != s->seen_grown;
            s->seen_grown = g;
        }
        moves = drk_heap_moves(s->heap);
        if (moves != s->last_moves) {
            s->defrag_events++;
            s->last_moves = moves;
            stitched = 1;
        }
        int steal = rc == DRK_PAGES_OOM && !took && atomic_load(&d->nshards) > 1;
        if (steal)
            s->steals++;
        else if (rc == DRK_PAGES_OOM)
            s->ooms++; /* the program's answer */
        else if (rc != 0)
            s->failed++;
        account(d, s);
        leave(d, s, cur);
        if (!steal)
            break;
        took = 1;
        if (!take_from_others(d, s)) {
            CUcontext again = enter_from(d, s, ctx);
            s->ooms++;
            leave(d, s, again);
            break;
        }
    }
    if (grew)
        grow_ask();
    if (held && !keyed && cfg.thread_shards && s == d->shards[0] && ++tl_held >= SPLIT_AFTER)
        take_thread_shard(d);
    if (stitched)
        drk_log(DRK_LOG_INFO, "device %d: stitched free pages into a new range for %zu bytes (%llu pages moved "
                              "so far on this stream)", d->ordinal, size, (unsigned long long)moves);
    if (rc == 0) {
        *ptr = (CUdeviceptr)p;
        *r = CUDA_SUCCESS;
        return 1;
    }
    if (rc == DRK_PAGES_OOM) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return 1;
    }
    /* drk's own failure: the driver allocates this one (said once; the
     * report counts them all as failed_allocs). */
    if (!atomic_exchange(&warned_alloc, 1))
        drk_log(DRK_LOG_WARN, "device %d: drk's device pool failed an allocation of %zu bytes (error %d); the "
                              "driver serves such allocations", d->ordinal, size, rc);
    atomic_fetch_add_explicit(&driver_allocs, 1, memory_order_relaxed);
    return 0;
}

int drk_dpool_free(CUdeviceptr ptr, CUstream stream, int has_stream, CUresult *r)
{
    dpool *d;
    shard *s = owner((uintptr_t)ptr, &d);
    if (!s)
        return 0;
    /* A stream capturing a graph runs nothing now, and its free cannot go
     * into the graph: the block waits for every stream, as cuMemFree's. */
    if (has_stream && capturing(stream))
        has_stream = 0, stream = NULL;
    /* The driver's cuMemFree may wait for the device; some programs rely on it. */
    if (cfg.sync_free && !has_stream && drv->ctx_synchronize)
        drv->ctx_synchronize();
    CUcontext cur = enter(d, s);
    if (__builtin_expect(s->retired, 0)) {
        leave(d, s, cur);
        return 0;
    }
    int timed = (s->frees % SAMPLE_EVERY) == 0;
    uint64_t t0 = timed ? drk_mono_ns() : 0;
    int rc = drk_pool_free(s->pool, (uintptr_t)ptr, (uintptr_t)stream, has_stream);
    if (timed)
        note_ns(s->free_ns, drk_mono_ns() - t0);
    if (rc == 0)
        s->frees++;
    else if (rc == DRK_PAGES_INVALID)
        s->bad_frees++;
    account(d, s);
    leave(d, s, cur);
    if (rc == DRK_PAGES_INVALID) {
        *r = CUDA_ERROR_INVALID_VALUE; /* what the driver says of a pointer that is no allocation's start */
        return 1;
    }
    if (rc != 0 && !atomic_exchange(&warned_free, 1))
        drk_log(DRK_LOG_WARN, "device %d: drk's device pool could not queue a free (out of host memory); the "
                              "block at 0x%llx stays allocated, as will others that meet this", d->ordinal,
                (unsigned long long)ptr);
    *r = CUDA_SUCCESS;
    return 1;
}

/* ---- Queries ---- */

int drk_dpool_query(CUdeviceptr ptr, drk_dpool_block *out)
{
    dpool *d;
    shard *s = owner((uintptr_t)ptr, &d);
    if (!s)
        return -1;
    uintptr_t base;
    size_t size;
    uint64_t serial;
    pthread_mutex_lock(&s->lock);
    int async = 0;
    int rc = s->retired ? -1 : drk_pool_lookup(s->pool, (uintptr_t)ptr, &base, &size, &serial, &async);
    pthread_mutex_unlock(&s->lock);
    if (rc == -1)
        return -1;
    if (rc != 0)
        return 0;
    /* Driver buffer ids count up from small numbers; these start at 2^62. */
    *out = (drk_dpool_block){.base = (CUdeviceptr)base,
                             .size = size,
                             .buffer_id = (1ull << 62) | ((unsigned long long)d->ordinal << 54) |
                                          ((unsigned long long)s->index << 47) | serial,
                             .ctx = d->ctx,
                             .device = d->ordinal,
                             .async = async};
    return 1;
}

/* How each_shard takes a shard's lock. */
enum { WAIT, TRY, PATIENT };

/* A lock taken within about a millisecond, or not: at exit another thread
 * may hold one for good (it was stopped inside the pool), and the report
 * must not hang the program. */
static int lock_patiently(pthread_mutex_t *m)
{
    for (int i = 0; i < 1000; i++) {
        if (pthread_mutex_trylock(m) == 0)
            return 0;
        struct timespec ts = {0, 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* Calls fn on every shard of every started device, under the shard's lock:
 * waiting for it, only if it is free (TRY), or waiting a little (PATIENT). */
static void each_shard(int how, void (*fn)(dpool *, shard *, void *), void *arg)
{
    for (int i = 0; i < MAX_DEVICES; i++) {
        dpool *d = &pools[i];
        if (atomic_load_explicit(&d->state, memory_order_acquire) != 1)
            continue;
        int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
        for (int k = 0; k < n; k++) {
            shard *s = d->shards[k];
            int got = how == WAIT  ? pthread_mutex_lock(&s->lock)
                      : how == TRY ? pthread_mutex_trylock(&s->lock)
                                   : lock_patiently(&s->lock);
            if (got != 0)
                continue;
            if (!s->retired)
                fn(d, s, arg);
            pthread_mutex_unlock(&s->lock);
        }
    }
}

static void add_cached(dpool *d, shard *s, void *arg)
{
    drk_heap_stats hs = drk_heap_get_stats(s->heap);
    *(size_t *)arg += (size_t)(hs.idle_pages + hs.spare_pages) * d->vmm->page_size;
}

size_t drk_dpool_cached_free(void)
{
    size_t bytes = 0;
    each_shard(WAIT, add_cached, &bytes);
    return bytes;
}

/* ---- Streams ---- */

/* The running pool's seals stop: its epochs' and every shard's. Under
 * streams_lock. */
static void stop_seals(dpool *d)
{
    atomic_store(&d->may_be_stopped, 1);
    if (atomic_load_explicit(&d->state, memory_order_acquire) != 1 || !stream_lost(d))
        return;
    if (d->epochs)
        drk_epochs_stream_lost(d->epochs);
    int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
    for (int k = 0; k < n; k++) {
        pthread_mutex_lock(&d->shards[k]->lock);
        if (!d->shards[k]->retired)
            drk_pool_stream_lost(d->shards[k]->pool);
        pthread_mutex_unlock(&d->shards[k]->lock);
    }
}

/* A stream of `ctx` drk cannot list: it would never be told to a pool
 * (nor its destroy), so seals would complete without its work. The pool
 * in that context, running now or starting later, seals no more: blocks
 * freed by cuMemFree stay out of reuse until the program waits for the
 * device (drk_dpool_sync_end) rather than risk one too soon. Under
 * streams_lock. */
static void lose_stream(dpool *d, CUcontext ctx)
{
    static atomic_int warned;
    d->lost = !d->lost || d->lost == ctx ? ctx : LOST_SEVERAL;
    if (!atomic_exchange(&warned, 1))
        drk_log(DRK_LOG_WARN, "out of host memory: drk's device pool cannot follow a new stream; memory freed by "
                              "cuMemFree in its context is reused only after the program waits for the device "
                              "(cuCtxSynchronize)");
    stop_seals(d);
}

void drk_dpool_stream_created(CUstream stream)
{
    if (!atomic_load_explicit(&configured, memory_order_relaxed))
        return;
    CUdevice dev;
    if (drv->ctx_get_device(&dev) != CUDA_SUCCESS || dev < 0 || dev >= MAX_DEVICES)
        return;
    CUcontext ctx = NULL;
    if (drv->ctx_get_current)
        drv->ctx_get_current(&ctx);
    dpool *d = &pools[dev];
    pthread_mutex_lock(&streams_lock);
    if (nstreams == streams_cap) {
        size_t cap = streams_cap ? streams_cap * 2 : 64;
        struct known_stream *n = realloc(streams, cap * sizeof *n);
        if (!n) {
            lose_stream(d, ctx);
            pthread_mutex_unlock(&streams_lock);
            return;
        }
        streams = n, streams_cap = cap;
    }
    streams[nstreams++] = (struct known_stream){stream, (int)dev, ctx};
    /* Told to every shard under streams_lock, so a shard starting now sees it once. */
    if (atomic_load_explicit(&d->state, memory_order_acquire) == 1 && d->ctx == ctx) {
        if (d->epochs && drk_epochs_stream_created(d->epochs, (uintptr_t)stream) != 0) {
            atomic_store(&d->may_be_stopped, 1);
            drk_log(DRK_LOG_WARN, "out of host memory: drk's device pool cannot follow a new stream");
        }
        int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
        for (int k = 0; k < n; k++) {
            pthread_mutex_lock(&d->shards[k]->lock);
            if (!d->shards[k]->retired && drk_pool_stream_created(d->shards[k]->pool, (uintptr_t)stream) != 0)
                atomic_store(&d->may_be_stopped, 1);
            pthread_mutex_unlock(&d->shards[k]->lock);
        }
    }
    pthread_mutex_unlock(&streams_lock);
}

/* A destroyed stream's work that no event could be recorded behind: waits
 * for the stream, 1 when it is idle (said once when it could not be). */
static int wait_destroyed(dpool *d, CUstream stream)
{
    static atomic_int warned;
    if (drv->stream_synchronize && drv->stream_synchronize(stream) == CUDA_SUCCESS)
        return 1;
    atomic_store(&d->may_be_stopped, 1);
    if (!atomic_exchange(&warned, 1))
        drk_log(DRK_LOG_WARN, "device %d: a destroyed stream's work could not be waited for; memory freed by "
                              "cuMemFree is reused only after the program waits for the device "
                              "(cuCtxSynchronize)",
                d->ordinal);
    return 0;
}

void drk_dpool_stream_destroyed(CUstream stream)
{
    if (!atomic_load_explicit(&configured, memory_order_relaxed))
        return;
    pthread_mutex_lock(&streams_lock);
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i].s == stream) {
            dpool *d = &pools[streams[i].device];
            if (atomic_load_explicit(&d->state, memory_order_acquire) == 1 && d->ctx == streams[i].ctx) {
                /* Its work goes on after the destroy; frees made before it
                 * wait for an event recorded there now, or, if none can
                 * be, for the stream itself (a shard's pool sealing its own
                 * epochs: under its lock, before its next free). */
                if (d->epochs && drk_epochs_stream_destroyed(d->epochs, (uintptr_t)stream) != 0)
                    drk_epochs_stream_waited(d->epochs, (uintptr_t)stream, wait_destroyed(d, stream));
                int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
                for (int k = 0; k < n; k++) {
                    CUcontext cur = enter(d, d->shards[k]);
                    if (!d->shards[k]->retired && drk_pool_stream_destroyed(d->shards[k]->pool, (uintptr_t)stream) != 0)
                        drk_pool_stream_waited(d->shards[k]->pool, wait_destroyed(d, stream));
                    leave(d, d->shards[k], cur);
                }
            }
            streams[i] = streams[--nstreams];
            break;
        }
    pthread_mutex_unlock(&streams_lock);
    /* A thread's cached shard for this handle stays right: a new stream
     * with the same handle gets the same shard. */
}

void drk_dpool_green_ctx(CUdevice dev)
{
    if (!atomic_load_explicit(&configured, memory_order_relaxed) || dev < 0 || dev >= MAX_DEVICES)
        return;
    dpool *d = &pools[dev];
    pthread_mutex_lock(&streams_lock);
    if (!atomic_exchange(&d->green, 1)) {
        drk_log(DRK_LOG_WARN, "device %d: the program made a green context, whose streams drk's device pool "
                              "cannot follow; the driver serves this device's allocations from now on, and "
                              "memory drk already served is reused only after the program waits for the device "
                              "(cuCtxSynchronize)", (int)dev);
        /* Threads' cached pools go stale, so their next allocation finds
         * the flag (the allocation path itself reads nothing more). */
        atomic_fetch_add(&d->gen, 1);
        stop_seals(d);
    }
    pthread_mutex_unlock(&streams_lock);
}

/* The pool of `ctx` (NULL: the current context) when one runs there. */
static dpool *pool_of(CUcontext ctx)
{
    if (!atomic_load_explicit(&configured, memory_order_relaxed) ||
        (!ctx && (drv->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx)))
        return NULL;
    for (int i = 0; i < MAX_DEVICES; i++)
        if (atomic_load_explicit(&pools[i].state, memory_order_acquire) == 1 && pools[i].ctx == ctx)
            return &pools[i];
    return NULL;
}

uint64_t drk_dpool_sync_begin(CUcontext ctx)
{
    dpool *d = pool_of(ctx);
    if (!d || !atomic_load_explicit(&d->may_be_stopped, memory_order_acquire))
        return 0;
    uint64_t mark = atomic_fetch_add(&d->sync_marks, 1) + 1;
    int any = 0;
    int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
    for (int k = 0; k < n; k++) {
        pthread_mutex_lock(&d->shards[k]->lock);
        if (!d->shards[k]->retired)
            any |= drk_pool_sync_begin(d->shards[k]->pool, mark);
        pthread_mutex_unlock(&d->shards[k]->lock);
    }
    return any ? mark : 0;
}

void drk_dpool_sync_end(CUcontext ctx, uint64_t mark)
{
    dpool *d = mark ? pool_of(ctx) : NULL;
    if (!d)
        return;
    size_t back = 0;
    int n = atomic_load_explicit(&d->nshards, memory_order_acquire);
    for (int k = 0; k < n; k++) {
        CUcontext cur = enter(d, d->shards[k]); /* the heap may give pages back */
        if (!d->shards[k]->retired) {
            back += drk_pool_sync_end(d->shards[k]->pool, mark);
            account(d, d->shards[k]);
        }
        leave(d, d->shards[k], cur);
    }
    atomic_fetch_add_explicit(&sync_reclaims, back, memory_order_relaxed);
}

/* ---- Quiet moments, peers, IPC ---- */

static void quiet_shard(dpool *d, shard *s, void *arg)
{
    (void)d, (void)arg;
    drk_pool_reclaim(s->pool);
    drk_heap_stats hs = drk_heap_get_stats(s->heap);
    uint64_t idle = hs.idle_pages + hs.spare_pages;
    if (hs.pages && idle * 10000 > (uint64_t)cfg.defrag_threshold * hs.pages && idle > s->keep_pages) {
        drk_heap_trim(s->heap, s->keep_pages);
        account(d, s);
        s->quiet_trims++;
        s->defrag_events++;
        drk_log(DRK_LOG_INFO, "device %d: a quiet moment gave back %llu idle pages (%llu idle of %llu, kept %zu)",
                d->ordinal, (unsigned long long)(hs.pages - drk_heap_get_stats(s->heap).pages),
                (unsigned long long)idle, (unsigned long long)hs.pages, s->keep_pages);
    }
}

void drk_dpool_quiet(void)
{
    if (atomic_load_explicit(&configured, memory_order_relaxed) && cfg.defrag)
        each_shard(TRY, quiet_shard, NULL);
}

typedef struct grant {
    dpool *d;
    CUdevice to;
    int rc;
} grant;

static void grant_run(void *ctx, uintptr_t va, size_t bytes)
{
    grant *g = ctx;
    int rc = drk_pages_vmm_add_access(g->d->vmm, g->to, va, bytes);
    if (rc)
        g->rc = rc;
}

void drk_dpool_peer_enabled(CUcontext peer)
{
    if (!atomic_load_explicit(&configured, memory_order_relaxed))
        return;
    /* The current context's device may now read the peer's memory. */
    CUcontext cur = NULL;
    CUdevice self, peer_dev;
    if (drv->ctx_get_current(&cur) != CUDA_SUCCESS || drv->ctx_get_device(&self) != CUDA_SUCCESS ||
        drv->ctx_set_current(peer) != CUDA_SUCCESS)
        return;
    CUresult r = drv->ctx_get_device(&peer_dev);
    drv->ctx_set_current(cur);
    if (r != CUDA_SUCCESS || peer_dev < 0 || peer_dev >= MAX_DEVICES || peer_dev == self)
        return;
    dpool *d = &pools[peer_dev];
    /* Under start_lock: a pool starting now reads the grant after this, or
     * has started and is granted here; none ends meanwhile. */
    pthread_mutex_lock(&start_lock);
    atomic_fetch_or(&peer_grants[peer_dev], 1ull << self);
    if (atomic_load_explicit(&d->state, memory_order_acquire) != 1) {
        pthread_mutex_unlock(&start_lock);
        return; /* it grants the access when it starts */
    }
    pthread_mutex_lock(&d->grow_lock);
    /* Future pages first, then every page mapped now. */
    grant g = {d, self, drk_pages_vmm_add_access(d->vmm, self, 0, 0)};
    int n = atomic_load(&d->nshards);
    for (int k = 0; g.rc == 0 && k < n; k++) {
        CUcontext was = enter(d, d->shards[k]);
        if (!d->shards[k]->retired)
            drk_heap_mapped_runs(d->shards[k]->heap, grant_run, &g);
        leave(d, d->shards[k], was);
    }
    pthread_mutex_unlock(&d->grow_lock);
    pthread_mutex_unlock(&start_lock);
    if (g.rc != 0)
        drk_log(DRK_LOG_WARN, "device %d: cannot give device %d access to drk's pool pages (error %d); its "
                              "kernels cannot reach this device's pool memory", (int)peer_dev, (int)self, g.rc);
    else
        drk_log(DRK_LOG_INFO, "device %d: pool pages, present and future, are open to device %d", (int)peer_dev,
                (int)self);
}

void drk_dpool_backends_hold(void) { pthread_rwlock_rdlock(&backends_lock); }
void drk_dpool_backends_release(void) { pthread_rwlock_unlock(&backends_lock); }

int drk_dpool_block_runs(CUdeviceptr ptr, uint64_t *handles, uint32_t *lens, size_t max, size_t *n,
                         uintptr_t *first_va, size_t *size, struct drk_page_backend **pages)
{
    dpool *d;
    shard *s = owner((uintptr_t)ptr, &d);
    if (!s)
        return -1;
    uintptr_t base;
    uint64_t serial;
    pthread_mutex_lock(&s->lock);
    if (s->retired) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    int rc = drk_pool_lookup(s->pool, (uintptr_t)ptr, &base, size, &serial, NULL);
    if (rc == 0 && base != (uintptr_t)ptr)
        rc = DRK_PAGES_INVALID;
    if (rc == 0)
        rc = drk_heap_block_runs(s->heap, base, handles, lens, max, n, first_va);
    /* Under the lock: a pool that ends retires its shards under theirs
     * before it lets its page backend go. */
    *pages = d->vmm;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- Report, fork ---- */

/* What an ended pool's shards counted, kept for the report: counts, not
 * state (it holds nothing now; every page went back). */
static void keep_counts(drk_dpool_report *o, const drk_dpool_report *r)
{
    o->allocs += r->allocs, o->frees += r->frees, o->failed_allocs += r->failed_allocs;
    o->bad_frees += r->bad_frees, o->out_of_memory += r->out_of_memory, o->steals += r->steals;
    o->pages_created += r->pages_created, o->pages_released += r->pages_released, o->pages_moved += r->pages_moved;
    o->handles_created += r->handles_created, o->handles_moved += r->handles_moved;
    o->pages_made_ahead += r->pages_made_ahead, o->pages_taken_ahead += r->pages_taken_ahead;
    o->pages_created_in_calls += r->pages_created_in_calls, o->growth_waits += r->growth_waits;
    o->map_calls += r->map_calls, o->unmap_calls += r->unmap_calls;
    o->defrag_events += r->defrag_events, o->quiet_trims += r->quiet_trims, o->oom_waits += r->oom_waits;
    o->same_stream_reuses += r->same_stream_reuses, o->events += r->events;
    for (int b = 0; b < 32; b++)
        o->alloc_ns[b] += r->alloc_ns[b], o->free_ns[b] += r->free_ns[b];
    o->latency_samples += r->latency_samples;
}

static void report_shard(dpool *d, shard *s, void *arg)
{
    drk_dpool_report *o = arg;
    drk_heap_stats hs = drk_heap_get_stats(s->heap);
    drk_pool_stats ps = drk_pool_get_stats(s->pool);
    uint64_t total, big, page = d->vmm->page_size;
    drk_heap_holes(s->heap, &total, &big);
    o->page_bytes = page;
    o->allocs += s->allocs, o->frees += s->frees, o->failed_allocs += s->failed;
    o->bad_frees += s->bad_frees, o->out_of_memory += s->ooms;
    o->live_blocks += hs.live_blocks - ps.pending_blocks;
    o->live_bytes += ps.live_bytes, o->reserved_bytes += hs.pages * page;
    o->va_bytes += hs.reserved_va;
    o->pages_created += hs.creates + hs.ahead_made, o->pages_released += hs.releases, o->pages_moved += hs.moves;
    o->handles_created += hs.create_calls + hs.ahead_made, o->handles_moved += hs.move_calls;
    o->pages_made_ahead += hs.ahead_made, o->pages_taken_ahead += hs.ahead_used;
    o->pages_created_in_calls += hs.creates, o->ahead_pages += hs.ahead_pages, o->growth_waits += s->busy_waits;
    o->idle_pages += hs.idle_pages, o->spare_pages += hs.spare_pages;
    o->map_calls += hs.map_calls, o->unmap_calls += hs.unmap_calls;
    o->defrag_events += s->defrag_events, o->quiet_trims += s->quiet_trims, o->steals += s->steals;
    o->oom_waits += ps.waits, o->same_stream_reuses += ps.same_stream_reuses, o->events += ps.events;
    o->pending_bytes += ps.pending_bytes;
    o->free_total += total;
    if (big > o->free_largest)
        o->free_largest = big;
    for (int b = 0; b < 32; b++)
        o->alloc_ns[b] += s->alloc_ns[b], o->free_ns[b] += s->free_ns[b];
    o->latency_samples += s->samples;
    o->thread_shards += s->thread;
    if (o->nshards < DRK_DPOOL_REPORT_SHARDS)
        o->shards[o->nshards++] = (drk_dpool_shard_report){
            .device = d->ordinal,
            .stream = s->stream,
            .thread = s->thread,
            .allocs = s->allocs,
            .frees = s->frees,
            .live_bytes = ps.live_bytes,
            .peak_live_bytes = ps.peak_live_bytes,
            .reserved_bytes = hs.pages * page,
            .peak_reserved_bytes = hs.peak_pages * page,
            .idle_bytes = (hs.idle_pages + hs.spare_pages) * page,
            .same_stream_reuses = ps.same_stream_reuses,
            .pages_moved = hs.moves,
        };
}

void drk_dpool_get_report(drk_dpool_report *o)
{
    memset(o, 0, sizeof *o);
    o->enabled = atomic_load(&configured);
    o->driver_allocs = atomic_load(&driver_allocs);
    o->switched_off_allocs = atomic_load(&switched_off_allocs);
    o->green_allocs = atomic_load(&green_allocs);
    o->sync_reclaims = atomic_load(&sync_reclaims);
    for (int i = 0; i < MAX_DEVICES; i++)
        o->green_devices += atomic_load(&pools[i].green) != 0;
    for (int i = 0; i < MAX_DEVICES; i++)
        o->started += atomic_load_explicit(&pools[i].state, memory_order_acquire) == 1;
    each_shard(PATIENT, report_shard, o);
    /* Under start_lock: a pool's end (which holds it) deletes its epochs. */
    if (lock_patiently(&start_lock) == 0) {
        for (int i = 0; i < MAX_DEVICES; i++) {
            if (atomic_load_explicit(&pools[i].state, memory_order_acquire) == 1 && pools[i].epochs)
                o->events += drk_epochs_get_stats(pools[i].epochs).events;
            keep_counts(o, &pools[i].ended);
            o->contexts_ended += pools[i].ended.contexts_ended;
        }
        pthread_mutex_unlock(&start_lock);
    }
    for (int i = 0; i < MAX_DEVICES; i++) {
        dpool *d = &pools[i];
        /* Peaks span the process: a pool that ended keeps its device's. */
        if (!d->page_bytes)
            continue;
        o->peak_live_bytes += atomic_load(&d->peak_live);
        o->peak_reserved_bytes += atomic_load(&d->peak_pages) * d->page_bytes;
    }
    if (o->peak_live_bytes < o->live_bytes)
        o->peak_live_bytes = o->live_bytes;
    if (o->peak_reserved_bytes < o->reserved_bytes)
        o->peak_reserved_bytes = o->reserved_bytes;
    if (lock_patiently(&streams_lock) == 0) {
        o->streams = nstreams;
        pthread_mutex_unlock(&streams_lock);
    }
}

/* ---- Contexts ending ---- */

/* Under start_lock. */
static void end_pool(dpool *d, int alive)
{
    /* Under streams_lock: a stream's hook that saw the pool running has
     * done with its epochs, deleted below, and later ones see it ending. */
    pthread_mutex_lock(&streams_lock);
    atomic_store(&d->state, 2);
    pthread_mutex_unlock(&streams_lock);
    atomic_fetch_add(&d->gen, 1);
    size_t nr = atomic_load(&nranges);
    for (size_t i = 0; i < nr; i++)
        if (ranges[i].pool == d)
            atomic_store_explicit(&ranges[i].dead, 1, memory_order_release);
    /* The grower is making none of its pages from here on. */
    pthread_mutex_lock(&d->grower_lock);
    pthread_mutex_lock(&d->grow_lock);
    CUcontext cur = NULL;
    int switched = alive && drv->ctx_get_current(&cur) == CUDA_SUCCESS && cur != d->ctx &&
                   drv->ctx_set_current(d->ctx) == CUDA_SUCCESS;
    uint64_t live_blocks = 0, pages = 0;
    pthread_rwlock_wrlock(&backends_lock);
    int n = atomic_load(&d->nshards);
    for (int k = 0; k < n; k++) {
        shard *s = d->shards[k];
        pthread_mutex_lock(&s->lock);
        drk_dpool_report r;
        memset(&r, 0, sizeof r);
        report_shard(d, s, &r);
        keep_counts(&d->ended, &r);
        live_blocks += r.live_blocks, pages += drk_heap_pages(s->heap);
        /* Pending frees are waited for, then every page goes back. Past
         * the context's end the driver has freed them itself. */
        if (alive) {
            drk_pool_delete(s->pool);
            drk_cuda_events_delete(s->events);
            drk_heap_delete(s->heap);
        }
        s->pages->destroy(s->pages);
        s->pool = NULL, s->events = NULL, s->heap = NULL, s->pages = NULL;
        s->retired = 1;
        pthread_mutex_unlock(&s->lock);
    }
    if (d->epochs) {
        d->ended.events += drk_epochs_get_stats(d->epochs).events;
        if (alive) { /* else the context took their events */
            drk_epochs_delete(d->epochs);
            drk_cuda_events_delete(d->epoch_events);
        }
        d->epochs = NULL, d->epoch_events = NULL;
    }
    /* Chunks reserved since the first marking (a thread inside a shard as
     * the pool began to end) went back with the heaps too. */
    nr = atomic_load(&nranges);
    for (size_t i = 0; i < nr; i++)
        if (ranges[i].pool == d)
            atomic_store_explicit(&ranges[i].dead, 1, memory_order_release);
    if (alive)
        d->vmm->destroy(d->vmm);
    d->vmm = NULL;
    pthread_rwlock_unlock(&backends_lock);
    atomic_store(&d->nshards, 0);
    d->nthread_shards = 0;
    atomic_store(&d->live, 0);
    atomic_store(&d->pages, 0);
    d->ended.contexts_ended++;
    if (switched)
        drv->ctx_set_current(cur);
    pthread_mutex_unlock(&d->grow_lock);
    pthread_mutex_unlock(&d->grower_lock);
    drk_log(DRK_LOG_INFO, "device %d: its context ends: drk's device pool %s its %llu pages (%llu blocks still "
                          "allocated end with the context) and starts again at the next allocation",
            d->ordinal, alive ? "gave back" : "lost", (unsigned long long)pages, (unsigned long long)live_blocks);
    atomic_store(&d->state, 0);
}

void drk_dpool_context_ends(CUcontext ctx, int alive)
{
    if (!atomic_load_explicit(&configured, memory_order_relaxed) || !ctx)
        return;
    pthread_mutex_lock(&start_lock);
    for (int i = 0; i < MAX_DEVICES; i++)
        if (atomic_load(&pools[i].state) == 1 && pools[i].ctx == ctx)
            end_pool(&pools[i], alive);
    /* Its streams ended with it, a pool's or not (another context's are
     * told to no pool: forgotten too, so the list stays short). */
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_DEVICES; i++)
        if (pools[i].lost == ctx)
            pools[i].lost = NULL;
    for (size_t i = 0; i < nstreams;)
        if (streams[i].ctx == ctx)
            streams[i] = streams[--nstreams];
        else
            i++;
    pthread_mutex_unlock(&streams_lock);
    pthread_mutex_unlock(&start_lock);
}

/* A fork child's copies of the parent's shards: never used again, never
 * freed (another parent thread may have been changing them as it forked),
 * but still reachable, so that a leak checker does not count them. */
static shard *forgotten;
static drk_epochs *forgotten_epochs[MAX_DEVICES * 4];
static int nforgotten_epochs;

void drk_dpool_after_fork_child(void)
{
    /* The parent's device memory is not the child's: nothing of it may be
     * used or released here. Leak the records and start over. */
    for (int i = 0; i < MAX_DEVICES; i++) {
        int n = atomic_load(&pools[i].nshards);
        for (int k = 0; k < n && k < MAX_SHARDS; k++)
            if (pools[i].shards[k]) {
                pools[i].shards[k]->forgotten = forgotten;
                forgotten = pools[i].shards[k];
            }
        /* Its mutex may have been held by a parent thread: never used again. */
        if (pools[i].epochs && nforgotten_epochs < MAX_DEVICES * 4)
            forgotten_epochs[nforgotten_epochs++] = pools[i].epochs;
        pools[i].epochs = NULL, pools[i].epoch_events = NULL;
        atomic_store(&pools[i].state, 0);
        atomic_store(&pools[i].nshards, 0);
        atomic_store(&pools[i].live, 0), atomic_store(&pools[i].peak_live, 0);
        atomic_store(&pools[i].pages, 0), atomic_store(&pools[i].peak_pages, 0);
        atomic_fetch_add(&pools[i].gen, 1);
        pools[i].page_bytes = 0, pools[i].holds_primary = 0, pools[i].nthread_shards = 0, pools[i].lost = NULL;
        atomic_store(&pools[i].green, 0); /* the parent's green contexts are not the child's */
        atomic_store(&pools[i].may_be_stopped, 0);
        memset(&pools[i].ended, 0, sizeof pools[i].ended);
        pthread_mutex_init(&pools[i].grow_lock, NULL);
        pthread_mutex_init(&pools[i].grower_lock, NULL);
    }
    /* The grower did not follow the fork: the next pool starts one. */
    atomic_store(&grower_state, 0);
    atomic_store(&grow_asked, 0);
    atomic_store(&grow_stop, 0);
    pthread_mutex_init(&grow_mu, NULL);
    pthread_cond_init(&grow_cv, NULL);
    atomic_store(&nranges, 0);
    pthread_mutex_init(&ranges_lock, NULL);
    pthread_mutex_init(&streams_lock, NULL);
    pthread_mutex_init(&start_lock, NULL);
    pthread_rwlock_init(&backends_lock, NULL);
    nstreams = 0;
    tl_ctx = NULL, tl_pool = NULL, tl_shard = NULL, tl_stream = 0;
    tl_own = NULL, tl_own_pool = NULL, tl_held = 0;
    atomic_store(&driver_allocs, 0);
    atomic_store(&switched_off_allocs, 0);
    atomic_store(&switched_on, 1);
}
