#define _GNU_SOURCE
#include "interpose/real.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/guard.h"
#include "base/log.h"
#include "interpose/symbols.h"
#include "interpose/table.h"

_Atomic(void *) drk_real_tbl[DRK_SYM_COUNT];

static _Atomic(drk_dlsym_fn) real_dlsym;
static _Atomic(void *) driver;
static atomic_int driver_failed;

DRK_NO_SANITIZE drk_dlsym_fn drk_real_dlsym(void)
{
    drk_dlsym_fn fn = atomic_load_explicit(&real_dlsym, memory_order_acquire);
    if (__builtin_expect(fn != NULL, 1))
        return fn;
    /* x86-64 glibc has dlsym@GLIBC_2.34 (libc.so.6, 2.34 on) and
     * dlsym@GLIBC_2.2.5 (libdl or libc). Never _dl_sym/__libc_dlsym: they
     * are private and gone from newer glibc. */
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5"};
    for (size_t i = 0; i < sizeof versions / sizeof *versions && !fn; i++)
        fn = (drk_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (!fn) {
        /* Nothing after drk defines dlsym: without it no program can run. */
        static const char msg[] = "drk: fatal: glibc's dlsym not found (dlvsym failed)\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
    }
    atomic_store_explicit(&real_dlsym, fn, memory_order_release);
    return fn;
}

/* dlopen, with this thread marked as inside drk: a driver constructor that
 * calls dlsym gets glibc's answer at once. */
static void *open_guarded(const char *path, const char **err)
{
    drk_guard_enter();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    *err = h ? NULL : dlerror();
    drk_guard_leave();
    return h;
}

void *drk_driver_handle(void)
{
    void *h = atomic_load_explicit(&driver, memory_order_acquire);
    if (__builtin_expect(h != NULL, 1) || atomic_load_explicit(&driver_failed, memory_order_relaxed))
        return h;
    /* RTLD_LOCAL: opening the driver must not change what the program's own
     * symbol lookups find. The loader returns the same handle to every
     * racing thread; the extra references are harmless. */
    drk_interpose_settings set;
    drk_interpose_settings_get(&set);
    const char *path = set.cuda_library, *fallback = set.cuda_library_default;
    const char *err;
    h = open_guarded(path, &err);
    if (!h && strcmp(path, fallback) != 0) {
        /* A wrong DRK_CUDA_LIBRARY must not take the program's driver away. */
        drk_log(DRK_LOG_WARN, "cannot open DRK_CUDA_LIBRARY=%s (%s); using %s", path, err ? err : "unknown error",
                fallback);
        h = open_guarded(path = fallback, &err);
    }
    if (!h) {
        if (!atomic_exchange(&driver_failed, 1))
            drk_log(DRK_LOG_ERROR, "cannot open the CUDA driver %s (%s); driver calls through drk fail with CUDA_ERROR_NOT_INITIALIZED",
                    path, err ? err : "unknown error");
        return NULL;
    }
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(&driver, &expected, h)) {
        dlclose(h); /* drop this thread's extra reference */
        return expected;
    }
    drk_log(DRK_LOG_DEBUG, "driver %s opened", path);
    (void)drk_driver_table(); /* while the driver is surely alive */
    return h;
}

void *drk_driver_handle_if_open(void) { return atomic_load_explicit(&driver, memory_order_acquire); }

void *drk_driver_sym(const char *name)
{
    void *h = drk_driver_handle();
    if (!h)
        return NULL;
    drk_guard_enter();
    void *p = drk_real_dlsym()(h, name);
    drk_guard_leave();
    return p;
}

void *drk_real_slow(drk_sym sym)
{
    void *p = drk_driver_sym(drk_sym_name[sym]);
    if (!p && drk_driver_handle())
        drk_log(DRK_LOG_WARN, "the driver has no %s; calls to drk's %s return CUDA_ERROR_NOT_FOUND",
                drk_sym_name[sym], drk_sym_name[sym]);
    atomic_store_explicit(&drk_real_tbl[sym], p ? p : DRK_REAL_MISSING, memory_order_release);
    return p;
}
