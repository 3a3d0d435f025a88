/* Wires the evolution engine (evolve/engine.h) to what only shim/ knows:
 * the options, drk's embedded kernels, and where an address lies (the
 * device pool's records first, then the driver's). */
#include "shim/evolve_wiring.h"

/* First: it must come before cuda.h. */
#include "shim/hook.h"

#include <cuda.h>
#include <unistd.h>

#include "alloc/device.h"
#include "base/cache.h"
#include "base/log.h"
#include "base/options.h"
#include "evolve/engine.h"
#include "evolve/jitlink.h"
#include "evolve/loaded.h"
#include "interpose/table.h"
#include "kernels/kernels.h"

int drk_evolve_wanted(void) { return drk_opt_num(DRK_OPT_EVOLVE) != 0; }

/* Up to two of drk's ticks and a trial's wait: a program out of memory
 * waits this once, at most, for evolution's memory. */
#define GIVE_BACK_WAIT_MS 500

int drk_evolve_give_back(void) { return drk_engine_give_back(GIVE_BACK_WAIT_MS); }

/* An address's allocation: pool memory by the pool's records (a block in
 * a pool's range but not live is no allocation), else the driver's range
 * query; host memory (pinned, mapped, managed on the host) as device 0. */
static int resolve(CUdeviceptr p, drk_extent *out)
{
    drk_dpool_block b;
    int q = drk_dpool_query(p, &b);
    if (q == 1) {
        *out = (drk_extent){b.base, b.size, 1};
        return 0;
    }
    if (q == 0)
        return -1;
    const drk_driver *drv = drk_driver_table();
    unsigned type = 0;
    CUdeviceptr base;
    size_t size;
    if (!drv->pointer_get_attribute || !drv->mem_get_address_range ||
        drv->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS)
        return -1;
    if (type != CU_MEMORYTYPE_DEVICE) {
        *out = (drk_extent){p, 1, 0};
        return 0;
    }
    if (drv->mem_get_address_range(&base, &size, p) != CUDA_SUCCESS)
        return -1;
    *out = (drk_extent){base, size, 1};
    return 0;
}

void drk_evolve_wiring_configure(void)
{
    if (!drk_evolve_wanted())
        return;
    /* The PTX variants are built from, kept from the first image read. */
    drk_images_keep_ptx(DRK_IMAGES_PTX_CAP);
}

/* The cache of search results, opened when the engine takes up its first
 * kernel: a failure to open it leaves evolution working without one. */
static drk_cache *open_cache(void)
{
    drk_cache *cache = NULL;
    char dir[4096], why[256];
    uint64_t cap = 0;
    if (drk_cache_dir_choose(drk_opt_str(DRK_OPT_CACHE_DIR), drk_env(DRK_ENV_XDG_CACHE_HOME), drk_env(DRK_ENV_HOME), dir,
                             sizeof dir) == 0 &&
        (cap = drk_cache_cap_bytes(drk_opt_num(DRK_OPT_CACHE_SIZE), dir)) > 0 &&
        drk_cache_open(&cache, dir, cap, 0, why, sizeof why) != 0) {
        drk_log(DRK_LOG_INFO, "evolve: no cache (%s): every run searches afresh", why);
        return NULL;
    }
    drk_log(DRK_LOG_INFO, "evolve: results %s%s", cache ? "cached in " : "not cached",
            cache ? drk_cache_root(cache) : "");
    return cache;
}

void drk_evolve_wiring_start(void)
{
    if (!drk_evolve_wanted())
        return;
    long copy = drk_opt_num(DRK_OPT_EVOLVE_COPY_MAX);
    size_t copy_max = copy >= 0 ? (size_t)copy : 0;
    if (copy < 0) { /* a share of device 0's memory, in basis points */
        const drk_driver *drv = drk_driver_table();
        size_t total = 0;
        CUdevice dev;
        if (drv->device_get && drv->device_total_mem && drv->device_get(&dev, 0) == CUDA_SUCCESS &&
            drv->device_total_mem(&total, dev) == CUDA_SUCCESS)
            copy_max = (size_t)((double)total * (double)-copy / 10000.0);
    }
    drk_engine_settings s = {
        .budget = (double)drk_opt_num(DRK_OPT_EVOLVE_BUDGET) / 10000.0,
        .copy_max = copy_max,
        .only = drk_opt_str(DRK_OPT_EVOLVE_ONLY),
        .skip = drk_opt_str(DRK_OPT_EVOLVE_SKIP),
        .plant = drk_opt_str(DRK_OPT_EVOLVE_PLANT),
        .turn = (unsigned)drk_opt_num(DRK_OPT_EVOLVE_TURN),
        .compile_threads = (unsigned)drk_opt_num(DRK_OPT_EVOLVE_COMPILE_THREADS),
        .spans = (int)drk_opt_num(DRK_OPT_EVOLVE_SPANS),
        .open_cache = open_cache,
        .fatbin = drk_kernels_fatbin,
        .resolve = resolve,
        .cooperative_entries = 1u << DRK_SYM_cuLaunchCooperativeKernel | 1u << DRK_SYM_cuLaunchCooperativeKernel_ptsz,
    };
    /* nvJitLink is opened at the first build, on drk's thread. */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    drk_jitlink_configure(drk_opt_str(DRK_OPT_NVJITLINK), exe);
    drk_engine_start(&s);
    drk_log(DRK_LOG_INFO, "evolve: on (budget %.1f%% of kernel time, copies up to %zu MiB a launch)", 100 * s.budget,
            copy_max >> 20);
}
