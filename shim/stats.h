/* Call counts per hooked name. Counters are sharded by thread so that many
 * threads launching at once do not fight over one cache line; the report
 * sums the shards. */
#ifndef DRK_SHIM_STATS_H
#define DRK_SHIM_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "../interpose/hooks.h"

#define DRK_SHARDS 16

typedef struct drk_call_shard {
    _Atomic uint64_t calls[DRK_SYM_COUNT];
    _Atomic uint64_t failed_launches;
} __attribute__((aligned(64))) drk_call_shard;

extern drk_call_shard drk_call_shards[DRK_SHARDS];
extern __thread unsigned drk_thread_shard __attribute__((tls_model("initial-exec")));
unsigned drk_shard_assign(void);

static inline drk_call_shard *drk_my_shard(void)
{
    unsigned i = drk_thread_shard;
    if (__builtin_expect(i == 0, 0))
        i = drk_shard_assign();
    return &drk_call_shards[i - 1];
}

static inline void drk_count_call(drk_sym sym)
{
    atomic_fetch_add_explicit(&drk_my_shard()->calls[sym], 1, memory_order_relaxed);
}

uint64_t drk_calls(drk_sym sym);
uint64_t drk_failed_launches(void);
void drk_stats_reset(void);

#endif
