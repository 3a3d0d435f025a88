#define _GNU_SOURCE
#include "interpose/routes.h"

#include <dlfcn.h>
#include <string.h>

#include "base/guard.h"
#include "interpose/real.h"
#include "interpose/symbols.h"

/* glibc's dlsym, for the entry's tail jump. Hidden, read by dlsym_entry.S. */
__attribute__((visibility("hidden"))) _Atomic(drk_dlsym_fn) drk_dlsym_forward;

void *drk_dlsym_answer(void *handle, const char *name);

/* A hook for a hooked name, whatever the handle; NULL means "let glibc
 * answer", which the entry does by a tail jump. A sanitizer runtime resolves
 * its interceptors with dlsym(RTLD_NEXT) before it is itself initialised,
 * so the path of those calls is not instrumented. */
DRK_NO_SANITIZE void *drk_dlsym_answer(void *handle, const char *name)
{
    drk_dlsym_fn real = drk_real_dlsym();
    atomic_store_explicit(&drk_dlsym_forward, real, memory_order_relaxed);
    if (handle != RTLD_NEXT && name && name[0] == 'd' && strncmp(name, "drk_", 4) == 0 && !drk_guarded())
        return drk_routes_active() ? drk_routes_own(name) : NULL;
    if (handle == RTLD_NEXT || name == NULL || name[0] != 'c' || name[1] != 'u')
        return NULL;
    if (drk_guarded())
        return NULL;
    if (strncmp(name, "cupti", 5) == 0) {
        drk_routes_cupti_seen(name);
        return NULL;
    }
    int sym = drk_sym_find(name);
    if (sym < 0 || !drk_routes_active())
        return NULL;
    /* Hand out the hook only where the caller's own lookup would have found
     * something: a name the library lacks stays NULL, with glibc's error. */
    drk_guard_enter();
    void *found = real(handle, name);
    drk_guard_leave();
    return found ? drk_sym_hook[sym] : NULL;
}

void *drk_route_proc(const char *symbol, void *fn)
{
    if (!fn || !drk_routes_active())
        return fn;
    /* The driver picked the ABI form for the version and flags; find which
     * exported name it is. Several names may share an address: prefer a
     * form of the requested base name. cudart asks this a few hundred times
     * at start, so a scan of the slots is cheap enough. */
    int best = -1;
    for (int s = 0; s < DRK_SYM_COUNT; s++) {
        if (drk_real((drk_sym)s) != fn)
            continue;
        if (best < 0 || drk_sym_is_form_of(drk_sym_name[s], symbol))
            best = s;
    }
    return best >= 0 ? drk_sym_hook[best] : fn;
}
