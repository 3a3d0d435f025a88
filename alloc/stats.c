#include "stats.h"

const char *const drk_alloc_kind_name[DRK_ALLOC_KINDS] = {
    [DRK_ALLOC_DEVICE] = "device", [DRK_ALLOC_PITCH] = "pitch",
    [DRK_ALLOC_ASYNC] = "async",   [DRK_ALLOC_POOL] = "pool_async",
    [DRK_ALLOC_HOST] = "host",
};

static drk_alloc_counts counts[DRK_ALLOC_KINDS];

static inline int size_bucket(size_t n) { return n ? 64 - __builtin_clzll((unsigned long long)n) : 0; }

void drk_alloc_note(drk_alloc_kind kind, size_t bytes, int ok)
{
    drk_alloc_counts *c = &counts[kind];
    if (!ok) {
        atomic_fetch_add_explicit(&c->failed, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->bytes, bytes, memory_order_relaxed);
    int b = size_bucket(bytes);
    atomic_fetch_add_explicit(&c->by_size[b < DRK_SIZE_BUCKETS ? b : DRK_SIZE_BUCKETS - 1], 1,
                              memory_order_relaxed);
}

void drk_free_note(drk_alloc_kind kind, int ok)
{
    atomic_fetch_add_explicit(ok ? &counts[kind].frees : &counts[kind].free_failed, 1, memory_order_relaxed);
}

const drk_alloc_counts *drk_alloc_counts_of(drk_alloc_kind kind) { return &counts[kind]; }

void drk_alloc_stats_reset(void)
{
    for (int k = 0; k < DRK_ALLOC_KINDS; k++) {
        drk_alloc_counts *c = &counts[k];
        atomic_store(&c->allocs, 0);
        atomic_store(&c->failed, 0);
        atomic_store(&c->bytes, 0);
        atomic_store(&c->frees, 0);
        atomic_store(&c->free_failed, 0);
        for (int b = 0; b < DRK_SIZE_BUCKETS; b++)
            atomic_store(&c->by_size[b], 0);
    }
}
