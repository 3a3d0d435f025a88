/* cuGetProcAddress: the driver resolves; drk swaps in the hook of the exact
 * name the driver chose, so _v2/_ptsz forms keep their ABI and stream.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_ENTRY_H
#define DRK_SHIM_HOOKS_ENTRY_H

#include "interpose/routes.h"
#include "shim/hook.h"

/* After the driver resolved `symbol`: hand out the hook of the name it chose. */
static inline __attribute__((always_inline)) CUresult routed(drk_sym sym, CUresult r, const char *symbol, void **pfn)
{
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol)
        *pfn = drk_route_proc(symbol, *pfn);
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

DRK_BODY drk_body_get_proc_address(drk_sym sym, const char *symbol, void **pfn, int version,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    drk_fn_get_proc_address real = DRK_REAL(get_proc_address);
    if (!real)
        return drk_missing(sym);
    return routed(sym, real(symbol, pfn, version, flags, status), symbol, pfn);
}

DRK_BODY drk_body_get_proc_address_v1(drk_sym sym, const char *symbol, void **pfn, int version,
                                      cuuint64_t flags)
{
    drk_fn_get_proc_address_v1 real = DRK_REAL(get_proc_address_v1);
    if (!real)
        return drk_missing(sym);
    return routed(sym, real(symbol, pfn, version, flags), symbol, pfn);
}

#endif
