/* Memory that lives until exit, for kernel records and the names copied out
 * of the driver (its strings die with their module). Lock-free bump
 * allocation from mmap'd chunks: no malloc, so it is safe on a launch. */
#ifndef DRK_EVOLVE_ARENA_H
#define DRK_EVOLVE_ARENA_H

#include <stddef.h>

/* `size` zeroed bytes aligned to `align` (a power of two up to 4096), or
 * NULL if memory ran out. */
void *drk_arena_alloc(size_t size, size_t align);

/* A copy of `s`, or NULL if memory ran out. */
const char *drk_name_copy(const char *s);

#endif
