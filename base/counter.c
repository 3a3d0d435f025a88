#include "base/counter.h"

__thread unsigned drk_thread_index1 __attribute__((tls_model("initial-exec")));
static atomic_uint next_thread;

unsigned drk_thread_index_assign(void)
{
    /* Indexes are never reused: an owned shard keeps its one writer even
     * after that thread ends. Past ~4 billion threads they would wrap. */
    unsigned i = atomic_fetch_add_explicit(&next_thread, 1, memory_order_relaxed);
    drk_thread_index1 = i < DRK_OWNED_SHARDS ? i + 1 : DRK_OWNED_SHARDS + 1;
    return drk_thread_index1;
}
