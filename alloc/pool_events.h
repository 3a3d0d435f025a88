/* The pool's events on the driver: CUevents without timing, created as
 * needed and reused once the pool releases them (creating one costs more
 * than recording it). An event number is its index in a table. Not
 * thread-safe: the pool's caller serializes calls. */
#ifndef DRK_ALLOC_POOL_EVENTS_H
#define DRK_ALLOC_POOL_EVENTS_H

#include "alloc/pool.h"
#include "base/driver.h"

typedef struct drk_cuda_events drk_cuda_events;

/* NULL when the driver lacks the event calls or memory ran out. */
drk_cuda_events *drk_cuda_events_new(const drk_driver *drv);
/* Destroys every event; the pool using them must be gone. */
void drk_cuda_events_delete(drk_cuda_events *e);
/* The table to hand drk_pool_new. */
drk_pool_events drk_cuda_events_table(drk_cuda_events *e);

#endif
