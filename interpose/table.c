#include "interpose/table.h"

#include <stdatomic.h>

#include "interpose/real.h"

static drk_driver table;
static atomic_int table_state; /* 0 empty, 1 being filled, 2 full */
static __thread drk_driver own_copy;

static void fill(drk_driver *t)
{
#define DRK_DRIVER_FILL_(member, name, params) t->member = (__typeof__(t->member))drk_driver_sym(#name);
    DRK_DRIVER_ENTRIES(DRK_DRIVER_FILL_)
#undef DRK_DRIVER_FILL_
    /* Asked now: it needs no cuInit. */
    if (!t->driver_get_version || t->driver_get_version(&t->version) != CUDA_SUCCESS)
        t->version = 0;
}

const drk_driver *drk_driver_table(void)
{
    if (atomic_load_explicit(&table_state, memory_order_acquire) == 2)
        return &table;
    int expected = 0;
    if (atomic_compare_exchange_strong(&table_state, &expected, 1)) {
        fill(&table);
        atomic_store_explicit(&table_state, 2, memory_order_release);
        return &table;
    }
    /* Another thread is filling it, perhaps waiting on the loader lock this
     * thread holds: never wait, fill a private copy. */
    fill(&own_copy);
    return &own_copy;
}
