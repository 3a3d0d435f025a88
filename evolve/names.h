/* Kernel names copied out of the driver (its strings die with their module)
 * into memory that lives until exit. Lock-free; no malloc, so it is safe on a
 * launch. */
#ifndef DRK_EVOLVE_NAMES_H
#define DRK_EVOLVE_NAMES_H

/* A copy of `s` for the rest of the process, or NULL if memory ran out. */
const char *drk_name_copy(const char *s);

#endif
