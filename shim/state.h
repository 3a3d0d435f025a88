/* What drk is doing in this process: decided once, from the options, on the
 * first entry into drk, and read on every hook as one cached integer. */
#ifndef DRK_SHIM_STATE_H
#define DRK_SHIM_STATE_H

#include <stdatomic.h>

typedef enum drk_mode {
    DRK_MODE_UNSET,   /* options not read yet */
    DRK_MODE_OFF,     /* DRK_DISABLE=1: driver's own pointers, nothing else */
    DRK_MODE_FORWARD, /* DRK_OBSERVE=0: hooks forward without bookkeeping */
    DRK_MODE_OBSERVE, /* count and record everything */
} drk_mode;

extern atomic_int drk_mode_now;
drk_mode drk_mode_start(void);

static inline drk_mode drk_current_mode(void)
{
    int m = atomic_load_explicit(&drk_mode_now, memory_order_relaxed);
    return __builtin_expect(m != DRK_MODE_UNSET, 1) ? (drk_mode)m : drk_mode_start();
}

static inline int drk_observing(void) { return drk_current_mode() == DRK_MODE_OBSERVE; }

/* Whether device allocations go to drk's pool (DRK_ALLOC, not disabled).
 * Set, with the pool configured, before the mode is out. */
extern atomic_int drk_pool_on;
static inline int drk_pooling(void)
{
    (void)drk_current_mode();
    return atomic_load_explicit(&drk_pool_on, memory_order_acquire);
}

/* The program or a tool in it uses CUPTI itself (`why`: how drk saw it):
 * drk's GPU timing steps aside. */
void drk_uses_cupti(const char *why);

/* Process facts for the report. */
long long drk_process_start_ns(void);
int drk_process_forked_from(void);

#endif
