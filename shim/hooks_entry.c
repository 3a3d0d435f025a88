/* cuGetProcAddress: the driver resolves; drk swaps in the hook of the exact
 * name the driver chose, so _v2/_ptsz forms keep their ABI and stream. */
#include "shim/hook.h"

#include "interpose/routes.h"

/* After the driver resolved `symbol`: hand out the hook of the name it chose. */
static inline __attribute__((always_inline)) CUresult routed(drk_sym sym, CUresult r, const char *symbol, void **pfn)
{
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol)
        *pfn = drk_route_proc(symbol, *pfn);
    return drk_counted(sym, r);
}

DRK_BODY drk_body_get_proc_address(drk_sym sym, const char *symbol, void **pfn, int version,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    DRK_REAL_OR_MISSING(get_proc_address);
    return routed(sym, real(symbol, pfn, version, flags, status), symbol, pfn);
}

DRK_BODY drk_body_get_proc_address_v1(drk_sym sym, const char *symbol, void **pfn, int version,
                                      cuuint64_t flags)
{
    DRK_REAL_OR_MISSING(get_proc_address_v1);
    return routed(sym, real(symbol, pfn, version, flags), symbol, pfn);
}

DRK_HOOKS_ENTRY(DRK_EXPORT)
