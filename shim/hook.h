/* What every hook body shares: its driver function, the mode, the counters.
 * Bodies are static inline in shim/hooks_*.h, which shim/exports.c alone
 * includes: each exported function is its body, with no call in between. */
#ifndef DRK_SHIM_HOOK_H
#define DRK_SHIM_HOOK_H

#include "interpose/real.h"
#include "interpose/signatures.h"
#include "shim/state.h"
#include "shim/calls.h"

/* The driver's function behind this hook's slot, typed for its body. */
#define DRK_REAL(body) ((drk_fn_##body)drk_real(sym))

/* What a hook returns when the driver lacks its function: the driver could
 * not be opened, or it does not export this name. Logged once elsewhere. */
CUresult drk_missing(drk_sym sym);

/* The start of a body's definition. */
#define DRK_BODY static inline __attribute__((always_inline)) CUresult

/* A body that calls the driver and then, when observing, counts the call
 * and runs `after`: a parenthesized statement that may read the parameters
 * and the driver's result `r`. */
#define DRK_AFTER_BODY_(body, after, params, args)                             \
    DRK_BODY drk_body_##body(drk_sym sym, DRK_UNPAREN params)                  \
    {                                                                          \
        drk_fn_##body real = DRK_REAL(body);                                   \
        if (__builtin_expect(real == NULL, 0))                                 \
            return drk_missing(sym);                                           \
        CUresult r = real args;                                                \
        if (drk_observing()) {                                                 \
            drk_count_call(sym);                                               \
            DRK_UNPAREN after;                                                 \
        }                                                                      \
        return r;                                                              \
    }
#define DRK_HOOK_BODY(body, after) DRK_SIG_##body(DRK_AFTER_BODY_, body, after)

/* A body that only counts its calls. */
#define DRK_FORWARD_BODY(body) DRK_HOOK_BODY(body, ())

#endif
