/* The evolution engine's options and means, from shim/ (evolve_wiring.c). */
#ifndef DRK_SHIM_EVOLVE_WIRING_H
#define DRK_SHIM_EVOLVE_WIRING_H

/* DRK_EVOLVE is on. */
int drk_evolve_wanted(void);
/* A device allocation of the program's ran out of memory: evolution's own
 * device memory is given back (see drk_engine_give_back); 1 when the
 * allocation is worth another try. */
int drk_evolve_give_back(void);
/* At configure, before any image is read: keeps the PTX variants need. */
void drk_evolve_wiring_configure(void);
/* On drk's thread: starts the engine (before GPU times run where evolution
 * alone wants them: drk_engine_could_evolve says when they are needed). */
void drk_evolve_wiring_start(void);

#endif
