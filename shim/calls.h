/* Call counts per hooked name, in per-thread shards (counter.h) so that many
 * threads launching at once neither lock nor share a cache line; the report
 * sums the shards. */
#ifndef DRK_SHIM_CALLS_H
#define DRK_SHIM_CALLS_H

#include <stdatomic.h>
#include <stdint.h>

#include "interpose/hooks.h"

#include "base/counter.h"

/* One shard per owning thread, and the shared one last. */
#define DRK_SHARDS (DRK_OWNED_SHARDS + 1)

typedef struct drk_call_shard {
    _Atomic uint64_t calls[DRK_SYM_COUNT];
    _Atomic uint64_t failed_launches;
} __attribute__((aligned(128))) drk_call_shard;

extern drk_call_shard drk_call_shards[DRK_SHARDS];

static inline unsigned drk_shard_of(unsigned thread)
{
    return thread < DRK_OWNED_SHARDS ? thread : DRK_OWNED_SHARDS;
}

/* Count one call of `sym` by thread `thread` (drk_thread_index()). */
static inline void drk_count_call_by(unsigned thread, drk_sym sym)
{
    unsigned s = drk_shard_of(thread);
    drk_counter_add(&drk_call_shards[s].calls[sym], s < DRK_OWNED_SHARDS);
}

static inline void drk_count_call(drk_sym sym) { drk_count_call_by(drk_thread_index(), sym); }

static inline void drk_count_failed_launch_by(unsigned thread)
{
    unsigned s = drk_shard_of(thread);
    drk_counter_add(&drk_call_shards[s].failed_launches, s < DRK_OWNED_SHARDS);
}

/* Calls of `sym`: the shards, plus the registry's successful launches. */
uint64_t drk_calls(drk_sym sym);
uint64_t drk_failed_launches(void);
void drk_calls_reset(void);

#endif
