/* The pinned host pool's allocator: one jemalloc arena per flag set, whose
 * extent hooks carve pinned chunks from the driver. jemalloc does the work
 * of an allocation and a free; the chunk maps (alloc/host_chunks.h) record
 * what is live, for frees, double frees and pointer queries.
 *
 * Chunks grow from DRK_HOST_FIRST_CHUNK, doubling per flag set up to
 * DRK_HOST_CHUNK_MAX (or the request, rounded up), and are never given back
 * to the driver: the extent hooks refuse every dalloc, decommit and purge,
 * so jemalloc retains what it freed and reuses it. The process's exit (or
 * the driver's teardown) unpins them. */
#define _GNU_SOURCE
#include "alloc/host_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc/host_chunks.h"
#include "alloc/host_je.h"
#include "base/clock.h"
#include "base/log.h"

#define DRK_HOST_FIRST_CHUNK ((size_t)16 << 20)
#define DRK_HOST_CHUNK_MAX ((size_t)256 << 20)
/* jemalloc grows an arena by geometric steps up to this, and takes larger
 * requests at their size; after a large one its steps stay small. */
#define DRK_HOST_GROW_LIMIT ((size_t)64 << 20)
#define DRK_HOST_CHUNK_ROUND ((size_t)2 << 20)

typedef struct host_arena {
    extent_hooks_t hooks; /* first: the hooks' extent_hooks_t * is their arena */
    unsigned flags;
    atomic_int ready;     /* jemalloc's arena exists: index is valid */
    int broken;           /* jemalloc refused the arena: the driver serves this set */
    unsigned index;
    pthread_mutex_t lock; /* carving and pinning */
    const drk_driver *drv;
    drk_host_chunk *cur;  /* the chunk being carved */
    size_t used;          /* its bytes carved */
    size_t next_chunk;    /* the size of the next chunk to pin */
} host_arena;

static host_arena arenas[DRK_HOST_FLAG_SETS];

/* 0 not started, 1 on, -1 off (DRK_HOST_ALLOC=0, jemalloc failed, or a fork
 * child of a process whose pool had started). */
static atomic_int pool_state;
/* The process that started the pool: a fork child sees another pid and
 * never waits on a lock a parent's thread held when it forked. */
static atomic_int started_pid;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
/* The driver table chunks are pinned with, and the settings, given once.
 * DRK_ALLOC_SYNC_FREE: the driver's cuMemFreeHost waits for the device; a
 * program that uses the free as its wait (reading memory a copy wrote
 * after freeing another block) asks for it. Reuse is safe without it
 * (frees_begun below). */
static drk_driver drv;
static drk_host_pool_settings cfg;
static atomic_int configured;
static int sync_free;
/* The context the pool serves: the one current at its first allocation.
 * The driver frees a context's pinned memory when the context ends, and
 * only that context's; the arenas are per flag set, so a block asked for
 * under another context could lie in this one's chunk and go with it
 * (a library's context retained and released: the program's block freed
 * under it). Other contexts' allocations go to the driver. */
static _Atomic(CUcontext) pool_ctx;

/* A block freed while a copy or kernel queued before its free still uses
 * it: the driver's cuMemFreeHost waits for the device, so a program may
 * free a staging buffer right after queueing its copy. jemalloc may hand
 * the block out again at once, and the program's next writes would reach
 * the old copy (tests/gpu/programs/host_reuse.c). So an allocation made
 * after frees waits for the pool's context before it returns, once for
 * every free begun before its wait: frees_begun counts frees, frees_waited
 * the most a completed wait covered. An allocation reads the count after
 * it has its block: jemalloc's locks (and the large slots' exchanges) order
 * a block's free, counted first, before its reuse. */
static _Atomic uint64_t frees_begun, frees_waited;
static atomic_int logged_wait;

void drk_host_pool_configure(const drk_driver *d, const drk_host_pool_settings *s)
{
    drv = *d; /* the table handed in may be a thread's own copy */
    cfg = *s;
    atomic_store_explicit(&configured, 1, memory_order_release);
}

static atomic_int logged_pin, logged_chunks;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Alignment: the driver's pointers are page-aligned; programs may do
 * O_DIRECT I/O on page-sized buffers. 256 bytes for smaller ones. */
static int align_flags(size_t size) { return size >= 4096 ? MALLOCX_LG_ALIGN(12) : MALLOCX_LG_ALIGN(8); }

/* Large blocks a free gives back wait here, per flag set, for the next
 * request of their jemalloc size class: jemalloc's own path for a large
 * extent (finding, splitting and merging it) made a 64 MiB pair cost 1.7 us
 * on the H200 (issue: at most 1 us), a reuse from here a few atomics. Each
 * slot is one word, lock-free: the block's address (page-aligned) with its
 * size class in 64 KiB units in the top 16 bits; 0 empty. A request that
 * finds no block of its class first gives every waiting block of its flag
 * set back to jemalloc, so nothing waits while jemalloc pins a new chunk. */
#define LARGE_MIN ((size_t)1 << 20)
#define LARGE_SLOTS 8
#define LARGE_UNIT_SHIFT 16
static _Atomic uint64_t large[DRK_HOST_FLAG_SETS][LARGE_SLOTS];

static uint64_t large_word(uintptr_t p, size_t cls) { return (uint64_t)(cls >> LARGE_UNIT_SHIFT) << 48 | p; }
static size_t large_class(uint64_t w) { return (size_t)(w >> 48) << LARGE_UNIT_SHIFT; }
static void *large_ptr(uint64_t w) { return (void *)(uintptr_t)(w & (((uint64_t)1 << 48) - 1)); }

/* The size class jemalloc serves `size` from, when a slot can name it. */
static size_t large_class_of(size_t size)
{
    size_t cls = drk_je_nallocx(size, align_flags(size));
    return cls && cls % ((size_t)1 << LARGE_UNIT_SHIFT) == 0 && (cls >> LARGE_UNIT_SHIFT) < ((size_t)1 << 16) ? cls : 0;
}

static void *large_take(unsigned flags, size_t cls)
{
    for (int i = 0; i < LARGE_SLOTS; i++) {
        uint64_t w = atomic_load_explicit(&large[flags][i], memory_order_acquire);
        if (w && large_class(w) == cls &&
            atomic_compare_exchange_strong_explicit(&large[flags][i], &w, 0, memory_order_acq_rel,
                                                    memory_order_relaxed))
            return large_ptr(w);
    }
    return NULL;
}

static int large_put(unsigned flags, void *p, size_t cls)
{
    uint64_t w = large_word((uintptr_t)p, cls);
    for (int i = 0; i < LARGE_SLOTS; i++) {
        uint64_t empty = 0;
        if (atomic_compare_exchange_strong_explicit(&large[flags][i], &empty, w, memory_order_acq_rel,
                                                    memory_order_relaxed))
            return 0;
    }
    return -1;
}

/* Every block waiting in flag set `flags`'s slots back to jemalloc. */
static void large_flush(unsigned flags)
{
    for (int i = 0; i < LARGE_SLOTS; i++) {
        uint64_t w = atomic_exchange_explicit(&large[flags][i], 0, memory_order_acq_rel);
        if (w)
            drk_je_sdallocx(large_ptr(w), large_class(w), MALLOCX_TCACHE_NONE | align_flags(large_class(w)));
    }
}

/* ---- extent hooks: jemalloc's locks may be held; a->lock is taken inside them only. */

/* Pins a chunk of `size` bytes for arena a and makes it the one carved.
 * Caller holds a->lock. */
static int pin_chunk(host_arena *a, size_t size)
{
    void *p = NULL;
    CUresult r = a->drv && a->drv->mem_host_alloc ? a->drv->mem_host_alloc(&p, size, a->flags) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS) {
        /* Also before cuInit or without a context: the driver then answers
         * the program's call itself, with the same error. */
        if (!atomic_exchange(&logged_pin, 1))
            drk_log(DRK_LOG_INFO, "host pool: cannot pin a %zu-byte chunk (flags %#x): error %d; the driver serves "
                    "such allocations until a chunk can be pinned", size, a->flags, (int)r);
        return -1;
    }
    CUcontext ctx = NULL;
    if (a->drv->ctx_get_current)
        a->drv->ctx_get_current(&ctx);
    drk_host_chunk *c = drk_host_chunk_add((uintptr_t)p, size, a->flags, a->drv, ctx);
    if (!c) {
        if (a->drv->mem_free_host)
            a->drv->mem_free_host(p);
        if (!atomic_exchange(&logged_chunks, 1))
            drk_log(DRK_LOG_WARN, "host pool: no room to track another chunk; the driver serves what the pool cannot");
        return -1;
    }
    drk_host_stats_chunk(a->flags, size);
    a->cur = c, a->used = 0;
    if (a->next_chunk < DRK_HOST_CHUNK_MAX)
        a->next_chunk *= 2;
    return 0;
}

static void *carve(host_arena *a, size_t size, size_t alignment)
{
    drk_host_chunk *c = a->cur;
    if (!c)
        return NULL;
    uintptr_t start = round_up(c->base + a->used, alignment);
    if (start + size > c->base + c->size || start + size < start)
        return NULL;
    a->used = start + size - c->base;
    return (void *)start;
}

static void *hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment, bool *zero,
                        bool *commit, unsigned arena_ind)
{
    (void)arena_ind;
    host_arena *a = (host_arena *)hooks;
    /* A given address is asked only to grow an extent in place; chunks
     * are carved front to back, so decline. */
    if (new_addr)
        return NULL;
    pthread_mutex_lock(&a->lock);
    void *p = carve(a, size, alignment);
    if (!p) {
        size_t want = round_up(size + alignment, DRK_HOST_CHUNK_ROUND);
        if (want >= size && pin_chunk(a, want > a->next_chunk ? want : a->next_chunk) == 0)
            p = carve(a, size, alignment);
    }
    pthread_mutex_unlock(&a->lock);
    if (p && *zero)
        memset(p, 0, size);
    if (p)
        *commit = true;
    return p;
}

/* Pinned memory stays committed and whole. */
static bool hook_commit(extent_hooks_t *hooks, void *addr, size_t size, size_t offset, size_t length,
                        unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
    return false;
}

static bool hook_decommit(extent_hooks_t *hooks, void *addr, size_t size, size_t offset, size_t length,
                          unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
    return true;
}

static bool hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a, size_t size_b, bool committed,
                       unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
    return false;
}

/* Neighbours in two chunks stay apart: each chunk is its own pinned
 * allocation to the driver, with its own device pointer. */
static bool hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
                       bool committed, unsigned arena_ind)
{
    (void)hooks, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
    return drk_host_chunk_of((uintptr_t)addr_a) != drk_host_chunk_of((uintptr_t)addr_b);
}

/* ---- starting */

static void je_message(void *opaque, const char *s)
{
    (void)opaque;
    size_t n = strlen(s);
    while (n && s[n - 1] == '\n')
        n--;
    drk_log(DRK_LOG_WARN, "host pool: jemalloc: %.*s", (int)n, s);
}

/* The child of a fork is a new process whose pool is off: its jemalloc and
 * chunks are copies of the parent's (and not pinned). Pool pointers it
 * inherited are still known and may be freed (nothing is reused). A pool
 * that had not started may start in the child. */
void drk_host_pool_after_fork_child(void)
{
    if (atomic_load(&pool_state) != 1)
        return;
    atomic_store(&pool_state, -1);
    drk_host_stats_after_fork_child();
}

static int pool_start(void)
{
    int s = atomic_load(&pool_state);
    if (s)
        return s;
    if (!atomic_load_explicit(&configured, memory_order_acquire))
        return -1; /* not yet: the driver serves this one */
    int pid = (int)getpid(), owner = 0;
    if (!atomic_compare_exchange_strong(&started_pid, &owner, pid) && owner != pid)
        return -1; /* a fork child of a process that was starting the pool */
    pthread_mutex_lock(&start_lock);
    s = atomic_load(&pool_state);
    if (!s) {
        s = -1;
        const char *version = NULL;
        size_t len = sizeof version;
        drk_je_malloc_message = je_message;
        if (!cfg.on) {
            /* off: the driver pins every allocation */
        } else if (drk_je_mallctl("version", &version, &len, NULL, 0) != 0) {
            drk_log(DRK_LOG_WARN, "host pool: jemalloc did not start; the driver serves pinned host memory");
        } else {
            for (unsigned i = 0; i < DRK_HOST_FLAG_SETS; i++) {
                host_arena *a = &arenas[i];
                a->hooks = (extent_hooks_t){.alloc = hook_alloc, .commit = hook_commit, .decommit = hook_decommit,
                                            .split = hook_split, .merge = hook_merge};
                a->flags = i;
                a->next_chunk = DRK_HOST_FIRST_CHUNK;
                pthread_mutex_init(&a->lock, NULL);
            }
            sync_free = cfg.sync_free;
            drk_host_stats_started();
            drk_log(DRK_LOG_INFO, "host pool: on (jemalloc %s)", version);
            s = 1;
        }
        atomic_store(&pool_state, s);
    }
    pthread_mutex_unlock(&start_lock);
    return s;
}

static int arena_set(unsigned index, const char *what, size_t value_size, void *value)
{
    char name[64];
    snprintf(name, sizeof name, "arena.%u.%s", index, what);
    return drk_je_mallctl(name, NULL, NULL, value, value_size);
}

/* Creates flag set a's arena, its first chunk pinned beforehand (the
 * arena's own metadata lives in it). 0 when ready; -1: the driver serves
 * this call (and the next one tries again, unless jemalloc refused). */
static int arena_start(host_arena *a)
{
    pthread_mutex_lock(&start_lock);
    int ok = atomic_load(&a->ready);
    if (!ok && !a->broken) {
        pthread_mutex_lock(&a->lock);
        a->drv = &drv;
        int pinned = a->cur || pin_chunk(a, a->next_chunk) == 0;
        pthread_mutex_unlock(&a->lock);
        unsigned index;
        size_t len = sizeof index;
        extent_hooks_t *hooks = &a->hooks;
        if (!pinned) {
            /* the driver's error is the program's too */
        } else if (drk_je_mallctl("arenas.create", &index, &len, &hooks, sizeof hooks) != 0) {
            a->broken = 1;
            drk_log(DRK_LOG_WARN, "host pool: jemalloc cannot create an arena; the driver serves flags %#x", a->flags);
        } else {
            size_t grow = DRK_HOST_GROW_LIMIT;
            ssize_t never = -1;
            if (arena_set(index, "retain_grow_limit", sizeof grow, &grow) != 0 ||
                arena_set(index, "dirty_decay_ms", sizeof never, &never) != 0 ||
                arena_set(index, "muzzy_decay_ms", sizeof never, &never) != 0)
                drk_log(DRK_LOG_DEBUG, "host pool: arena %u keeps jemalloc's defaults", index);
            a->index = index;
            atomic_store_explicit(&a->ready, 1, memory_order_release);
            ok = 1;
        }
    }
    pthread_mutex_unlock(&start_lock);
    return ok ? 0 : -1;
}

/* ---- allocating and freeing */

static int capturing(void) { return cfg.captures_under_way && cfg.captures_under_way(); }

/* Frees begun no wait has covered yet: 0 when none. */
static uint64_t frees_unwaited(memory_order mo)
{
    uint64_t f = atomic_load_explicit(&frees_begun, mo);
    return f > atomic_load_explicit(&frees_waited, mo) ? f : 0;
}

/* Waits for the pool's context (current: the caller checked) and marks the
 * first `freed` frees covered. 0, or -1 when the driver cannot wait (a
 * context broken by an earlier fault): then no freed block is known to be
 * out of use, and the pool stops, the driver serving from now on. */
static int wait_for_frees(uint64_t freed)
{
    uint64_t t0 = drk_mono_ns();
    CUresult r = drv.ctx_synchronize ? drv.ctx_synchronize() : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS) {
        if (atomic_exchange(&pool_state, -1) == 1 && !atomic_exchange(&logged_wait, 1))
            drk_log(DRK_LOG_WARN, "host pool: cannot wait for the device before reusing freed pinned memory "
                    "(cuCtxSynchronize: error %d); the pool stops and the driver serves pinned host memory "
                    "from now on", (int)r);
        return -1;
    }
    drk_host_stats_wait(drk_mono_ns() - t0);
    uint64_t w = atomic_load_explicit(&frees_waited, memory_order_relaxed);
    while (w < freed && !atomic_compare_exchange_weak_explicit(&frees_waited, &w, freed, memory_order_release,
                                                               memory_order_relaxed))
        ;
    return 0;
}

int drk_host_pool_alloc(void **pp, size_t size, unsigned flags)
{
    int s = atomic_load_explicit(&pool_state, memory_order_relaxed);
    if (__builtin_expect(s != 1, 0) && (s < 0 || pool_start() != 1))
        return -1;
    flags &= DRK_HOST_FLAGS_ALL;
    if (size == 0)
        return -1; /* the driver's answer, whatever it is */
    if (size > DRK_HOST_POOL_LARGEST) {
        drk_host_stats_direct(flags);
        return -1;
    }
    /* The driver refuses to pin without a current context; so does the pool. */
    CUcontext ctx = NULL;
    if (drv.ctx_get_current && (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx))
        return -1;
    CUcontext mine = atomic_load_explicit(&pool_ctx, memory_order_relaxed);
    if (__builtin_expect(mine != ctx, 0) &&
        (mine || !atomic_compare_exchange_strong(&pool_ctx, &mine, ctx)) && mine != ctx) {
        drk_host_stats_fallback(flags);
        return -1;
    }
    /* A wait for the device while a graph capture is under way would end
     * the capture: the driver serves until the capture ends. */
    if (__builtin_expect(frees_unwaited(memory_order_relaxed) != 0, 0) && capturing()) {
        drk_host_stats_fallback(flags);
        return -1;
    }
    host_arena *a = &arenas[flags];
    if (__builtin_expect(!atomic_load_explicit(&a->ready, memory_order_acquire), 0) && arena_start(a) != 0) {
        drk_host_stats_fallback(flags);
        return -1;
    }
    size_t cls = size >= LARGE_MIN ? large_class_of(size) : 0;
    void *p = cls ? large_take(flags, cls) : NULL;
    if (p)
        drk_host_stats_large_reused();
    else if (cls)
        large_flush(flags);
    if (!p)
        p = drk_je_mallocx(size, MALLOCX_ARENA(a->index) | MALLOCX_TCACHE_NONE | align_flags(size));
    drk_host_chunk *c = p ? drk_host_chunk_of((uintptr_t)p) : NULL;
    if (__builtin_expect(!c, 0)) {
        drk_host_stats_fallback(flags);
        return -1;
    }
    uint64_t freed = frees_unwaited(memory_order_acquire);
    if (freed) {
        if (capturing()) { /* one began since the look above */
            if (atomic_load(&pool_state) == 1)
                drk_je_sdallocx(p, size, MALLOCX_TCACHE_NONE | align_flags(size));
            drk_host_stats_fallback(flags);
            return -1;
        }
        if (wait_for_frees(freed) != 0) {
            /* p may still be in use: it stays out of the pool for good */
            drk_host_stats_fallback(flags);
            return -1;
        }
    }
    drk_host_chunk_note(c, (uintptr_t)p, size);
    drk_host_stats_alloc(flags, size);
    *pp = p;
    return 0;
}

void drk_host_pool_context_ends(CUcontext ctx)
{
    size_t n = ctx ? drk_host_chunks_end_context(ctx) : 0;
    if (!n)
        return;
    /* jemalloc keeps its own records in the chunks: with some gone it may
     * not be called again. Pool pointers in other chunks stay valid and
     * known; their frees are noted, and nothing is reused. */
    int was = atomic_exchange(&pool_state, -1);
    drk_host_stats_context_ended();
    if (was == 1)
        drk_log(DRK_LOG_INFO, "host pool: a context ends with %zu of its chunks; the pool stops and the driver "
                "serves pinned host memory from now on", n);
}

int drk_host_pool_free(void *p)
{
    drk_host_chunk *c = drk_host_chunk_of((uintptr_t)p);
    if (!c)
        return DRK_HOST_FOREIGN;
    size_t size;
    if (drk_host_chunk_take(c, (uintptr_t)p, &size) != 0) {
        drk_host_stats_invalid_free();
        return DRK_HOST_INVALID;
    }
    drk_host_stats_free(c->flags, size);
    /* A fork child leaves its copy of the pool alone. */
    if (atomic_load_explicit(&pool_state, memory_order_relaxed) == 1) {
        /* DRK_ALLOC_SYNC_FREE: the free itself waits, as the driver's; a
         * wait on the pool's context covers this free. */
        int covered = 0;
        if (sync_free && c->drv->ctx_synchronize && c->drv->ctx_synchronize() == CUDA_SUCCESS) {
            CUcontext cur = NULL;
            covered = !c->drv->ctx_get_current ||
                      (c->drv->ctx_get_current(&cur) == CUDA_SUCCESS && cur == atomic_load(&pool_ctx));
        }
        if (!covered)
            atomic_fetch_add_explicit(&frees_begun, 1, memory_order_release);
        size_t cls = size >= LARGE_MIN ? large_class_of(size) : 0;
        if (!cls || large_put(c->flags, p, cls) != 0)
            drk_je_sdallocx(p, size, MALLOCX_TCACHE_NONE | align_flags(size));
    }
    return DRK_HOST_FREED;
}
