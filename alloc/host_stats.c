/* The host pool's counts, per flag set, for the report. */
#include <stdatomic.h>
#include <string.h>

#include "alloc/host_chunks.h"
#include "alloc/host_pool.h"

#ifndef DRK_HOST_POOL_BUILT
#define DRK_HOST_POOL_BUILT 0
#endif

/* One cache line a flag set: threads on different sets do not share. */
typedef struct set_counts {
    _Alignas(64) _Atomic uint64_t allocs, frees, live, peak, chunk_bytes, chunks, fallbacks, direct;
} set_counts;

static set_counts sets[DRK_HOST_FLAG_SETS];
static set_counts total;
static _Atomic uint64_t invalid_frees, contexts_ended, large_reused, waits, wait_ns;
static atomic_int started;

static void raise_peak(_Atomic uint64_t *peak, uint64_t now)
{
    uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
    while (now > p && !atomic_compare_exchange_weak_explicit(peak, &p, now, memory_order_relaxed, memory_order_relaxed))
        ;
}

#define ADD(flags, field, n)                                                               \
    (atomic_fetch_add_explicit(&sets[(flags) % DRK_HOST_FLAG_SETS].field, (n), memory_order_relaxed), \
     atomic_fetch_add_explicit(&total.field, (n), memory_order_relaxed))

void drk_host_stats_started(void) { atomic_store(&started, 1); }

void drk_host_stats_alloc(unsigned flags, size_t size)
{
    set_counts *s = &sets[flags % DRK_HOST_FLAG_SETS];
    atomic_fetch_add_explicit(&s->allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&total.allocs, 1, memory_order_relaxed);
    raise_peak(&s->peak, atomic_fetch_add_explicit(&s->live, size, memory_order_relaxed) + size);
    raise_peak(&total.peak, atomic_fetch_add_explicit(&total.live, size, memory_order_relaxed) + size);
}

void drk_host_stats_free(unsigned flags, size_t size)
{
    ADD(flags, frees, 1);
    ADD(flags, live, -(uint64_t)size);
}

void drk_host_stats_chunk(unsigned flags, size_t size)
{
    ADD(flags, chunks, 1);
    ADD(flags, chunk_bytes, size);
}

void drk_host_stats_fallback(unsigned flags) { ADD(flags, fallbacks, 1); }
void drk_host_stats_direct(unsigned flags) { ADD(flags, direct, 1); }
void drk_host_stats_invalid_free(void) { atomic_fetch_add_explicit(&invalid_frees, 1, memory_order_relaxed); }
void drk_host_stats_context_ended(void) { atomic_fetch_add_explicit(&contexts_ended, 1, memory_order_relaxed); }
void drk_host_stats_large_reused(void) { atomic_fetch_add_explicit(&large_reused, 1, memory_order_relaxed); }
void drk_host_stats_wait(uint64_t ns)
{
    atomic_fetch_add_explicit(&waits, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&wait_ns, ns, memory_order_relaxed);
}

static void reset(set_counts *s)
{
    atomic_store(&s->allocs, 0), atomic_store(&s->frees, 0);
    atomic_store(&s->fallbacks, 0), atomic_store(&s->direct, 0);
    atomic_store(&s->peak, atomic_load(&s->live));
}

void drk_host_stats_after_fork_child(void)
{
    for (int i = 0; i < DRK_HOST_FLAG_SETS; i++)
        reset(&sets[i]);
    reset(&total);
    atomic_store(&invalid_frees, 0);
    atomic_store(&large_reused, 0);
    atomic_store(&waits, 0), atomic_store(&wait_ns, 0);
    atomic_store(&started, 0); /* a child's pool is off (alloc/host_pool.c) */
}

static void fill(drk_host_pool_counts *out, set_counts *s)
{
    out->allocs = atomic_load(&s->allocs);
    out->frees = atomic_load(&s->frees);
    out->live_bytes = atomic_load(&s->live);
    out->peak_live_bytes = atomic_load(&s->peak);
    out->chunk_bytes = atomic_load(&s->chunk_bytes);
    out->chunks = atomic_load(&s->chunks);
    out->fallbacks = atomic_load(&s->fallbacks);
    out->direct = atomic_load(&s->direct);
}

void drk_host_pool_get_stats(drk_host_pool_stats *out)
{
    memset(out, 0, sizeof *out);
    out->built = DRK_HOST_POOL_BUILT;
    out->on = atomic_load(&started);
    out->invalid_frees = atomic_load(&invalid_frees);
    out->contexts_ended = atomic_load(&contexts_ended);
    out->large_reused = atomic_load(&large_reused);
    out->waits = atomic_load(&waits);
    out->wait_ns = atomic_load(&wait_ns);
    fill(&out->total, &total);
    for (int i = 0; i < DRK_HOST_FLAG_SETS; i++)
        fill(&out->by_flags[i], &sets[i]);
}
