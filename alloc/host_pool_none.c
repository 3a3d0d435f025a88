/* The host pool left out: the library was built without jemalloc
 * (libjemalloc_pic.a), so the driver serves pinned host memory. */
#include <stdatomic.h>

#include "base/log.h"
#include "base/options.h"
#include "alloc/host_pool.h"

int drk_host_pool_alloc(const drk_driver *drv, void **pp, size_t size, unsigned flags)
{
    (void)drv, (void)pp, (void)size, (void)flags;
    static atomic_int said;
    if (!atomic_load_explicit(&said, memory_order_relaxed) && !atomic_exchange(&said, 1) &&
        drk_opt_num(DRK_OPT_HOST_ALLOC))
        drk_log(DRK_LOG_INFO, "host pool: not built into this library (no jemalloc at build time); the driver "
                "serves pinned host memory");
    return -1;
}

void drk_host_pool_context_ends(CUcontext ctx) { (void)ctx; }

int drk_host_pool_free(void *p)
{
    (void)p;
    return DRK_HOST_FOREIGN;
}
