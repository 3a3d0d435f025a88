#include "shim/calls.h"

#include "evolve/registry.h"

drk_call_shard drk_call_shards[DRK_SHARDS];

uint64_t drk_calls(drk_sym sym)
{
    /* Successful launches are counted by the registry alone. */
    uint64_t n = drk_registry_entry_launches((unsigned)sym);
    for (int i = 0; i < DRK_SHARDS; i++)
        n += atomic_load_explicit(&drk_call_shards[i].calls[sym], memory_order_relaxed);
    return n;
}

uint64_t drk_failed_launches(void)
{
    uint64_t n = 0;
    for (int i = 0; i < DRK_SHARDS; i++)
        n += atomic_load_explicit(&drk_call_shards[i].failed_launches, memory_order_relaxed);
    return n;
}

void drk_calls_reset(void)
{
    for (int i = 0; i < DRK_SHARDS; i++) {
        for (int s = 0; s < DRK_SYM_COUNT; s++)
            atomic_store_explicit(&drk_call_shards[i].calls[s], 0, memory_order_relaxed);
        atomic_store_explicit(&drk_call_shards[i].failed_launches, 0, memory_order_relaxed);
    }
}
