#include "alloc/stats.h"

#include "base/counter.h"

const char *const drk_alloc_kind_name[DRK_ALLOC_KINDS] = {
    [DRK_ALLOC_DEVICE] = "device", [DRK_ALLOC_PITCH] = "pitch",
    [DRK_ALLOC_ASYNC] = "async",   [DRK_ALLOC_POOL] = "pool_async",
    [DRK_ALLOC_HOST] = "host",
};

typedef struct shard_counts {
    _Atomic uint64_t allocs, failed, bytes, frees, free_failed;
    _Atomic uint64_t by_size[DRK_SIZE_BUCKETS];
} shard_counts;

/* One shard per owning thread and the shared one last, as the call counts. */
typedef struct alloc_shard {
    shard_counts kind[DRK_ALLOC_KINDS];
} __attribute__((aligned(128))) alloc_shard;

static alloc_shard shards[DRK_OWNED_SHARDS + 1];

static inline int size_bucket(size_t n) { return n ? 64 - __builtin_clzll((unsigned long long)n) : 0; }

static inline void add(_Atomic uint64_t *c, uint64_t v, int owned)
{
    if (owned)
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline shard_counts *mine(drk_alloc_kind kind, int *owned)
{
    unsigned t = drk_thread_index();
    *owned = t < DRK_OWNED_SHARDS;
    return &shards[*owned ? t : DRK_OWNED_SHARDS].kind[kind];
}

void drk_alloc_note(drk_alloc_kind kind, size_t bytes, int ok)
{
    int owned;
    shard_counts *c = mine(kind, &owned);
    if (!ok) {
        add(&c->failed, 1, owned);
        return;
    }
    add(&c->allocs, 1, owned);
    add(&c->bytes, bytes, owned);
    int b = size_bucket(bytes);
    add(&c->by_size[b < DRK_SIZE_BUCKETS ? b : DRK_SIZE_BUCKETS - 1], 1, owned);
}

void drk_free_note(drk_alloc_kind kind, int ok)
{
    int owned;
    shard_counts *c = mine(kind, &owned);
    add(ok ? &c->frees : &c->free_failed, 1, owned);
}

drk_alloc_counts drk_alloc_counts_of(drk_alloc_kind kind)
{
    drk_alloc_counts t = {0};
    for (int s = 0; s <= DRK_OWNED_SHARDS; s++) {
        const shard_counts *c = &shards[s].kind[kind];
        t.allocs += atomic_load_explicit(&c->allocs, memory_order_relaxed);
        t.failed += atomic_load_explicit(&c->failed, memory_order_relaxed);
        t.bytes += atomic_load_explicit(&c->bytes, memory_order_relaxed);
        t.frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
        t.free_failed += atomic_load_explicit(&c->free_failed, memory_order_relaxed);
        for (int b = 0; b < DRK_SIZE_BUCKETS; b++)
            t.by_size[b] += atomic_load_explicit(&c->by_size[b], memory_order_relaxed);
    }
    return t;
}

void drk_alloc_stats_reset(void)
{
    /* In a fork child, whose only thread is the one that forked. */
    for (int s = 0; s <= DRK_OWNED_SHARDS; s++)
        for (int k = 0; k < DRK_ALLOC_KINDS; k++) {
            shard_counts *c = &shards[s].kind[k];
            atomic_store(&c->allocs, 0);
            atomic_store(&c->failed, 0);
            atomic_store(&c->bytes, 0);
            atomic_store(&c->frees, 0);
            atomic_store(&c->free_failed, 0);
            for (int b = 0; b < DRK_SIZE_BUCKETS; b++)
                atomic_store(&c->by_size[b], 0);
        }
}
