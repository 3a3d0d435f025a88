/* Counters owned by one thread. The first threads that count each get a
 * shard of counters of their own; a shard's owner adds with a plain load and
 * store (no locked instruction on the launch path), and everything else
 * only reads. Threads beyond the owned shards share one more shard, added to
 * atomically. */
#ifndef DRK_BASE_COUNTER_H
#define DRK_BASE_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

/* Shards owned by one thread each; thread indexes from this on share. */
#define DRK_OWNED_SHARDS 32

extern __thread unsigned drk_thread_index1 __attribute__((tls_model("initial-exec")));
unsigned drk_thread_index_assign(void);

/* This thread's index: 0, 1, ... in the order threads first counted. */
static inline unsigned drk_thread_index(void)
{
    unsigned i = drk_thread_index1;
    if (__builtin_expect(i == 0, 0))
        i = drk_thread_index_assign();
    return i - 1;
}

static inline void drk_counter_add(_Atomic uint64_t *c, int owned)
{
    if (owned)
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

#endif
