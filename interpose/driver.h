/* Finding the real driver: glibc's own dlsym, the driver library, and the
 * driver's function behind each hooked slot. All of it is resolved on first
 * use without locks or waiting: racing threads resolve the same values, so
 * it is safe from any thread, before cuInit, inside the loader and in a
 * forked child. */
#ifndef DRK_INTERPOSE_DRIVER_H
#define DRK_INTERPOSE_DRIVER_H

#include <stdatomic.h>
#include <stdint.h>

#include "interpose/hooks.h"

typedef void *(*drk_dlsym_fn)(void *handle, const char *name);

/* For code that may run before a sanitizer runtime has started. */
#define DRK_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* glibc's dlsym, found with dlvsym, newest version first. */
drk_dlsym_fn drk_real_dlsym(void);

/* The driver library (DRK_CUDA_LIBRARY), opened on first use; NULL when it
 * cannot be opened (logged once). */
void *drk_driver_handle(void);

/* Provided by shim/: called once, right after drk opened the driver (while
 * it is surely alive), to learn what it needs of it. */
void drk_driver_opened(void);

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
