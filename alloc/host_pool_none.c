/* The host pool left out: the library was built without jemalloc
 * (libjemalloc_pic.a), so the driver serves pinned host memory. */
#include <stdatomic.h>

#include "alloc/host_pool.h"
#include "base/log.h"

static atomic_int asked; /* DRK_HOST_ALLOC=1 */

void drk_host_pool_configure(const drk_driver *drv, const drk_host_pool_settings *s)
{
    (void)drv;
    atomic_store(&asked, s->on);
}

void drk_host_pool_after_fork_child(void) {}

int drk_host_pool_alloc(void **pp, size_t size, unsigned flags)
{
    (void)pp, (void)size, (void)flags;
    static atomic_int said;
    if (!atomic_load_explicit(&said, memory_order_relaxed) && atomic_load(&asked) && !atomic_exchange(&said, 1))
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
