/* evolve/ as shim/ drives it: configured once, before the first launch it
 * sees, with a copy of the driver table; told of a fork. */
#ifndef DRK_EVOLVE_EVOLVE_H
#define DRK_EVOLVE_EVOLVE_H

#include "base/driver.h"

void drk_evolve_configure(const drk_driver *drv);

/* In a fork child: launch counts start from zero; what the parent knew of
 * its kernels and images stays. */
void drk_evolve_after_fork_child(void);

#endif
