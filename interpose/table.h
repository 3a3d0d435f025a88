/* The process's driver table (base/driver.h), filled from the real driver
 * as soon as drk opens it: the driver's version, for one, cannot be asked at
 * exit, when the driver may have shut down. */
#ifndef DRK_INTERPOSE_TABLE_H
#define DRK_INTERPOSE_TABLE_H

#include "base/driver.h"

/* The table; members the driver lacks are NULL. Never waits: a thread that
 * finds another filling it fills a copy of its own. */
const drk_driver *drk_driver_table(void);

#endif
