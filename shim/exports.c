/* The exported definitions: one function per name in interpose/hooks.h,
 * each its body (shim/hooks_*.h, inlined) for its own slot. cuda.h is read in
 * its internal mode, which declares every ABI form (_v1 under the bare name,
 * _v2, _ptsz ...), so each definition below is checked against the driver's
 * own prototype. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "interpose/signatures.h"
#include "interpose/symbols.h"
#include "shim/hooks_context.h"
#include "shim/hooks_entry.h"
#include "shim/hooks_host.h"
#include "shim/hooks_launch.h"
#include "shim/hooks_memory.h"
#include "shim/hooks_module.h"
#include "shim/hooks_stream.h"

/* A body's call: its slot, then the parameters, if any (cuCtxSynchronize
 * has none: __VA_OPT__ leaves the comma out). */
#define DRK_CALL_WITH_(fn, sym, ...) fn(sym __VA_OPT__(, ) __VA_ARGS__)
#define DRK_CALL_BODY_(fn, sym, args) DRK_CALL_WITH_(fn, sym, DRK_UNPAREN args)

/* drk_export_<name> is hidden and is what hook tables point at, so lookups
 * inside drk never resolve to another object's definition; <name> is its
 * exported alias. */
#define DRK_EXPORT_DEF_(name, body, params, args)                              \
    CUresult drk_export_##name params;                                        \
    CUresult drk_export_##name params                                         \
    {                                                                          \
        return DRK_CALL_BODY_(drk_body_##body, DRK_SYM_##name, args);         \
    }                                                                          \
    extern __typeof__(drk_export_##name) name                                 \
        __attribute__((alias("drk_export_" #name), visibility("default")));
#define DRK_EXPORT_HOOK_(name, body, family) DRK_SIG_##body(DRK_EXPORT_DEF_, name, body)
DRK_HOOKS(DRK_EXPORT_HOOK_)
#undef DRK_EXPORT_HOOK_

void *const drk_sym_hook[DRK_SYM_COUNT] = {
#define DRK_HOOK_PTR_(name, body, family) (void *)drk_export_##name,
    DRK_HOOKS(DRK_HOOK_PTR_)
#undef DRK_HOOK_PTR_
};
