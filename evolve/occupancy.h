/* Theoretical occupancy of the launched kernel-shapes, from the driver's
 * occupancy calculator, for the occupancy_drop finding (evolve/findings.h).
 *
 * Worked out on drk's own thread (shim/worker.c, each tick and once at
 * exit) and just before a module or library is unloaded, never on a launch: for each registry record's launch shapes not yet
 * done, blocks an SM holds (cuOccupancyMaxActiveBlocksPerMultiprocessor with
 * the shape's block size and dynamic shared memory) times warps a block,
 * over the SM's warps (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR /
 * warp size); and what limits it, from the function's registers and static
 * shared memory held against the device's limits. Handed to gputime per
 * kernel-shape with the registers and static shared memory of the function,
 * so a kernel reloaded with more registers at the same shape is told apart.
 *
 * That thread has no context current, and the calculator needs one (even
 * for a module's CUfunction: CUDA_ERROR_INVALID_CONTEXT on an H200 without),
 * as does cuKernelGetFunction: drk pushes the primary context of the device
 * the kernel first launched on, retained for the while, and only when the
 * program has it active (retaining an inactive one would create it). Every driver call
 * is checked; a failure leaves that shape's occupancy unknown and is said
 * once in all. Each shape is tried once; the records are looked at again
 * only when the registry recorded a new shape. */
#ifndef DRK_EVOLVE_OCCUPANCY_H
#define DRK_EVOLVE_OCCUPANCY_H

#include "base/driver.h"

/* Once, at configure: the driver table (copied). */
void drk_occupancy_configure(const drk_driver *drv);

/* Works out the occupancy of at most `max` shapes launched since the last
 * call (the rest at the next); the number worked out, failures included.
 * Callers take turns: drk's thread each tick, the exit once it stopped, and
 * a program thread about to unload a module (its handles are gone after, and
 * a short-lived kernel may have launched since the last tick). */
unsigned drk_occupancy_update(unsigned max);

void drk_occupancy_after_fork_child(void);

#endif
