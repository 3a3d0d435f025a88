/* Finding the real driver: glibc's own dlsym, the driver library, and the
 * driver's function behind each hooked slot. All of it is resolved on first
 * use without locks or waiting: racing threads resolve the same values, so
 * it is safe from any thread, before cuInit, inside the loader and in a
 * forked child. */
#ifndef DRK_INTERPOSE_REAL_H
#define DRK_INTERPOSE_REAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/dlsym.h" /* drk_real_dlsym: glibc's, found with dlvsym, newest version first */
#include "interpose/hooks.h"

/* What interpose/ needs of the options. Provided by shim/, asked when drk
 * first opens the driver, which can come before drk has started. */
typedef struct drk_interpose_settings {
    const char *cuda_library;         /* DRK_CUDA_LIBRARY */
    const char *cuda_library_default; /* what to open when that one cannot be */
} drk_interpose_settings;
void drk_interpose_settings_get(drk_interpose_settings *out);

/* The driver library (DRK_CUDA_LIBRARY), opened on first use, the driver
 * table filled right after (interpose/table.h); NULL when it cannot be
 * opened (logged once). */
void *drk_driver_handle(void);

/* The driver library if drk has opened it already, else NULL; opens nothing. */
void *drk_driver_handle_if_open(void);

/* The driver's own definition of an exported name, or NULL. */
void *drk_driver_sym(const char *name);

/* The driver's function behind a hooked slot, or NULL when the driver lacks
 * it. The fast path is one load. */
#define DRK_REAL_MISSING ((void *)1)
extern _Atomic(void *) drk_real_tbl[DRK_SYM_COUNT];
void *drk_real_slow(drk_sym sym);

static inline void *drk_real(drk_sym sym)
{
    void *p = atomic_load_explicit(&drk_real_tbl[sym], memory_order_acquire);
    if (__builtin_expect((uintptr_t)p > (uintptr_t)DRK_REAL_MISSING, 1))
        return p;
    return p == DRK_REAL_MISSING ? (void *)0 : drk_real_slow(sym);
}

#endif
