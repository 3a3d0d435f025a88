/* Work done once per process that takes no lock, calls nothing that can
 * come back into drk and waits on nothing (reading the options, copying
 * tables): the first caller does it and racing callers wait the
 * microseconds it takes, so everyone returns with it done. */
#ifndef DRK_BASE_ONCE_H
#define DRK_BASE_ONCE_H

#include <sched.h>
#include <stdatomic.h>

typedef atomic_int drk_once; /* 0 not done, 1 being done, 2 done */

/* 1: the caller does the work, then calls drk_once_end. 0: it is done. */
static inline int drk_once_begin(drk_once *o)
{
    if (atomic_load_explicit(o, memory_order_acquire) == 2)
        return 0;
    int expected = 0;
    if (atomic_compare_exchange_strong(o, &expected, 1))
        return 1;
    while (atomic_load_explicit(o, memory_order_acquire) != 2)
        sched_yield();
    return 0;
}

static inline void drk_once_end(drk_once *o) { atomic_store_explicit(o, 2, memory_order_release); }

/* In a fork child: work a thread of the parent had under way (that thread
 * does not exist here) is started afresh. */
static inline void drk_once_after_fork_child(drk_once *o)
{
    int doing = 1;
    atomic_compare_exchange_strong(o, &doing, 0);
}

#endif
