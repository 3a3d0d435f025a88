/* alloc/ as shim/ drives it: configured once, before the first allocation,
 * with a copy of the driver table and its settings; told of a fork and of
 * the process's exit. */
#ifndef DRK_ALLOC_ALLOC_H
#define DRK_ALLOC_ALLOC_H

#include "alloc/device.h"
#include "alloc/host_pool.h"
#include "base/driver.h"

typedef struct drk_alloc_settings {
    int device_pool;          /* DRK_ALLOC: the device pool serves device allocations */
    drk_dpool_settings dpool; /* its settings */
    drk_host_pool_settings host;
    const char *trace;        /* DRK_ALLOC_TRACE: record allocations to this file (%p: the pid); NULL: no */
} drk_alloc_settings;

void drk_alloc_configure(const drk_driver *drv, const drk_alloc_settings *s);

/* In a fork child: counts, the trace and the pools start afresh. */
void drk_alloc_after_fork_child(void);

/* At exit: the allocation trace is written (a failure logged once). */
void drk_alloc_at_exit(void);

#endif
