/* What every hook body shares: its driver function, the mode, the counters,
 * and the exported definitions made from it. A family's bodies are static
 * inline in shim/hooks_<family>.c, which ends with DRK_HOOKS_<FAMILY>(DRK_EXPORT):
 * each exported function is its body, with no call in between.
 *
 * Include this first: it reads cuda.h in its internal mode, which declares
 * every ABI form (_v1 under the bare name, _v2, _ptsz ...), so each exported
 * definition is checked against the driver's own prototype. */
#ifndef DRK_SHIM_HOOK_H
#define DRK_SHIM_HOOK_H

#ifdef CUDA_VERSION
#error "shim/hook.h must be included before cuda.h"
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include "interpose/real.h"
#include "interpose/signatures.h"
#include "shim/calls.h"
#include "shim/state.h"

/* The driver's function behind this hook's slot, typed for its body. */
#define DRK_REAL(body) ((drk_fn_##body)drk_real(sym))

/* What a hook returns when the driver lacks its function: the driver could
 * not be opened, or it does not export this name. Logged once elsewhere. */
CUresult drk_missing(drk_sym sym);

/* A body's way to the driver: `real`, the driver's function behind the
 * hook's slot; a hook whose driver lacks it returns drk_missing. */
#define DRK_REAL_OR_MISSING(body)                                              \
    drk_fn_##body real = DRK_REAL(body);                                       \
    if (__builtin_expect(real == NULL, 0))                                     \
        return drk_missing(sym)

/* The start of a body's definition. */
#define DRK_BODY static inline __attribute__((always_inline)) CUresult

/* The end of most bodies: the call is counted when observing. */
static inline __attribute__((always_inline)) CUresult drk_counted(drk_sym sym, CUresult r)
{
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

/* A body's call: its slot, then the parameters, if any (cuCtxSynchronize
 * has none: __VA_OPT__ leaves the comma out). */
#define DRK_CALL_WITH_(fn, sym, ...) fn(sym __VA_OPT__(, ) __VA_ARGS__)
#define DRK_CALL_BODY_(fn, sym, args) DRK_CALL_WITH_(fn, sym, DRK_UNPAREN args)

/* The exported definition of one hooked name, for DRK_HOOKS_<FAMILY>(X):
 * drk_export_<name> is hidden and is what hook tables point at, so lookups
 * inside drk never resolve to another object's definition; <name> is its
 * exported alias. */
#define DRK_EXPORT_DEF_(name, body, params, args)                              \
    CUresult drk_export_##name params;                                         \
    CUresult drk_export_##name params                                          \
    {                                                                          \
        return DRK_CALL_BODY_(drk_body_##body, DRK_SYM_##name, args);          \
    }                                                                          \
    extern __typeof__(drk_export_##name) name                                  \
        __attribute__((alias("drk_export_" #name), visibility("default")));
#define DRK_EXPORT(name, body, family) DRK_SIG_##body(DRK_EXPORT_DEF_, name, body)

#endif
