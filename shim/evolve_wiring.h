/* The evolution engine's options and means, from shim/ (evolve_wiring.c). */
#ifndef DRK_SHIM_EVOLVE_WIRING_H
#define DRK_SHIM_EVOLVE_WIRING_H

/* DRK_EVOLVE is on. */
int drk_evolve_wanted(void);
/* At configure, before any image is read: keeps the PTX variants need. */
void drk_evolve_wiring_configure(void);
/* On drk's thread, once GPU times run: starts the engine. */
void drk_evolve_wiring_start(void);

#endif
