/* CUPTI's ways in, interposed: a program or a tool that starts to use CUPTI
 * itself (PyTorch's profiler registers activity buffers and enables records;
 * nsys, ncu and compute-sanitizer subscribe) gets it unchanged, and drk's GPU
 * timing steps aside first: its records are disabled and its buffers come
 * back to it, so no other client ever gets one of drk's, and drk never
 * starts again in this process. The report says so. Names looked up with
 * dlsym (interpose/routes.c) step it aside too.
 *
 * These are CUPTI's functions, not the driver's: they are found in the
 * libcupti the process loaded, by its soname, else after drk in the load
 * order. Under DRK_DISABLE=1 they only forward. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>

#include "interpose/real.h"
#include "shim/state.h"

#define DRK_CUPTI_EXPORT __attribute__((visibility("default")))

/* CUPTI's own `name`, or NULL when no CUPTI is loaded. */
static void *cupti_real(const char *name)
{
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    void *p = h ? drk_real_dlsym()(h, name) : NULL;
    if (h)
        dlclose(h); /* a RTLD_NOLOAD open counts a reference too */
    return p ? p : drk_real_dlsym()(RTLD_NEXT, name);
}


#define DRK_CUPTI_FORWARD(name, why, params, args)                                                    \
    CUptiResult CUPTIAPI name params DRK_CUPTI_EXPORT;                                                 \
    CUptiResult CUPTIAPI name params                                                                   \
    {                                                                                                  \
        drk_uses_cupti(why);                                                                             \
        static _Atomic(__typeof__(&name)) real;                                                       \
        __typeof__(&name) fn = atomic_load_explicit(&real, memory_order_acquire);                     \
        if (!fn) {                                                                                     \
            fn = (__typeof__(&name))cupti_real(#name);                                                 \
            if (fn == &name)                                                                           \
                fn = NULL; /* drk's own: no CUPTI behind it */                                         \
            atomic_store_explicit(&real, fn, memory_order_release);                                    \
        }                                                                                              \
        return fn ? fn args : CUPTI_ERROR_NOT_INITIALIZED;                                             \
    }

DRK_CUPTI_FORWARD(cuptiSubscribe, "a CUPTI client subscribed (cuptiSubscribe: nsys, ncu, a profiler)",
                  (CUpti_SubscriberHandle * subscriber, CUpti_CallbackFunc callback, void *userdata),
                  (subscriber, callback, userdata))
DRK_CUPTI_FORWARD(cuptiActivityRegisterCallbacks,
                  "the program registered CUPTI activity buffers (cuptiActivityRegisterCallbacks: a profiler)",
                  (CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed),
                  (requested, completed))
DRK_CUPTI_FORWARD(cuptiActivityEnable, "the program enabled CUPTI activity records (cuptiActivityEnable: a profiler)",
                  (CUpti_ActivityKind kind), (kind))
