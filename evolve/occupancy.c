#include "evolve/occupancy.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "base/log.h"
#include "evolve/facts.h"
#include "evolve/gputime.h"
#include "evolve/registry.h"

#define DEVICES 64
#define ALL_SHAPES ((uint8_t)((1u << DRK_SHAPES_PER_KERNEL) - 1))

_Static_assert(DRK_SHAPES_PER_KERNEL <= 8, "a byte of bits a record");

static drk_driver drv;
static atomic_int configured;
static atomic_int said; /* a failure was logged */

/* Held by the one caller at a time (drk's thread, or an unloading program
 * thread) for all of the below. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t done[DRK_REGISTRY_RECORDS];   /* shapes worked out (or given up), a bit each */
static uint8_t waited[DRK_REGISTRY_RECORDS]; /* shapes put off once for their record's facts */
static uint64_t seen_added;                  /* the registry's shape count at the last look */
static int again;                            /* shapes left for the next call */
static int pushed = -1;                      /* the device whose primary context is pushed, or -1 */

/* What an SM of a device holds, asked once (known -1: the driver could not say). */
static struct device {
    int known;
    int max_warps, warp, regs, shared, blocks, reserved;
} devices[DEVICES];

void drk_occupancy_configure(const drk_driver *d)
{
    drv = *d;
    atomic_store_explicit(&configured, 1, memory_order_release);
}

/* A driver call failed (or could not be made): the shape's occupancy is
 * unknown. Said once in all, so a driver that refuses every kernel makes one
 * line, not one a kernel. */
static int unknown(const char *what, CUresult r, const char *kernel)
{
    if (!atomic_exchange(&said, 1))
        drk_log(DRK_LOG_INFO, "occupancy: %s failed (%d) for kernel %.80s: its theoretical occupancy is unknown "
                              "(said once; other kernels' failures are not)", what, (int)r, kernel);
    return 0;
}

static int check(CUresult r, const char *what, const char *kernel)
{
    return r == CUDA_SUCCESS ? 1 : unknown(what, r, kernel);
}

static const struct device *device_of(int dev, const char *kernel)
{
    if (dev < 0 || dev >= DEVICES) {
        unknown("a device drk can keep (its ordinal)", CUDA_ERROR_INVALID_DEVICE, kernel);
        return NULL;
    }
    struct device *d = &devices[dev];
    if (!d->known && !drv.device_get_attribute) {
        d->known = -1;
        unknown("cuDeviceGetAttribute (missing)", CUDA_ERROR_NOT_SUPPORTED, kernel);
    }
    if (!d->known) {
        int threads = 0;
        d->known = -1;
#define ASK_(attr, out) check(drv.device_get_attribute(out, attr, (CUdevice)dev), "cuDeviceGetAttribute(" #attr ")", kernel)
        int ok = ASK_(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &threads) &&
                 ASK_(CU_DEVICE_ATTRIBUTE_WARP_SIZE, &d->warp) &&
                 ASK_(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &d->regs) &&
                 ASK_(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &d->shared) &&
                 ASK_(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, &d->blocks);
#undef ASK_
        /* Since CUDA 11; without it, no reserve is reckoned. */
        if (drv.device_get_attribute(&d->reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
                                     (CUdevice)dev) != CUDA_SUCCESS)
            d->reserved = 0;
        if (ok && d->warp > 0 && threads >= d->warp) {
            d->max_warps = threads / d->warp;
            d->known = 1;
        } else if (ok) {
            unknown("the device's threads an SM and warp size (out of range)", CUDA_ERROR_INVALID_VALUE, kernel);
        }
    }
    return d->known > 0 ? d : NULL;
}

/* Pops what push_primary pushed. */
static void pop_primary(void)
{
    if (pushed < 0)
        return;
    CUcontext ctx;
    check(drv.ctx_pop_current(&ctx), "cuCtxPopCurrent_v2", "(any)");
    check(drv.primary_ctx_release((CUdevice)pushed), "cuDevicePrimaryCtxRelease_v2", "(any)");
    pushed = -1;
}

/* The primary context of `dev` current on this thread, if the program has
 * it active: retained for the while (so the program's release cannot end it
 * under drk's calls) and pushed. */
static int push_primary(int dev, const char *kernel)
{
    if (pushed == dev)
        return 1;
    pop_primary();
    if (!drv.primary_ctx_get_state || !drv.primary_ctx_retain || !drv.primary_ctx_release || !drv.ctx_push_current ||
        !drv.ctx_pop_current)
        return unknown("the driver's primary context calls (missing)", CUDA_ERROR_NOT_SUPPORTED, kernel);
    unsigned flags;
    int active = 0;
    CUcontext ctx;
    if (!check(drv.primary_ctx_get_state((CUdevice)dev, &flags, &active), "cuDevicePrimaryCtxGetState", kernel))
        return 0;
    if (!active) /* the program runs in contexts of its own: drk makes none */
        return unknown("the device's primary context (not active)", CUDA_ERROR_INVALID_CONTEXT, kernel);
    if (!check(drv.primary_ctx_retain(&ctx, (CUdevice)dev), "cuDevicePrimaryCtxRetain", kernel))
        return 0;
    if (!check(drv.ctx_push_current(ctx), "cuCtxPushCurrent_v2", kernel)) {
        check(drv.primary_ctx_release((CUdevice)dev), "cuDevicePrimaryCtxRelease_v2", kernel);
        return 0;
    }
    pushed = dev;
    return 1;
}

static uint64_t round_up(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

/* What bounds the blocks an SM holds, by the device's limits: the resource
 * that allows the fewest. On a tie the block size is named first (fewer
 * registers alone would not help then), then registers, shared memory, the
 * SM's blocks. Registers go per warp in units of 256 and shared memory in
 * units of 128 with the driver's reserve, as on sm_80 and later: a
 * reckoning for the words; the count itself is the driver's. */
static uint32_t limit_of(const struct device *d, uint32_t regs, uint32_t shared, uint32_t warps)
{
    uint64_t by[4] = {(uint64_t)d->max_warps / warps, UINT64_MAX, UINT64_MAX,
                      d->blocks > 0 ? (uint64_t)d->blocks : UINT64_MAX};
    if (regs)
        by[1] = (uint64_t)(d->regs > 0 ? d->regs : 0) / (round_up((uint64_t)regs * (uint64_t)d->warp, 256) * warps);
    if (shared)
        by[2] = (uint64_t)(d->shared > 0 ? d->shared : 0) / round_up((uint64_t)shared + (uint64_t)d->reserved, 128);
    static const uint32_t kinds[4] = {DRK_OCC_LIMIT_WARPS, DRK_OCC_LIMIT_REGISTERS, DRK_OCC_LIMIT_SHARED,
                                      DRK_OCC_LIMIT_BLOCKS};
    unsigned least = 0;
    for (unsigned i = 1; i < 4; i++)
        if (by[i] < by[least])
            least = i;
    return kinds[least];
}

/* One shape of record `r`, with the context of its device current. */
static int work_out(const drk_kernel_record *r, const drk_launch_shape *s, const struct device *d, drk_occupancy *o)
{
    CUfunction fn = (CUfunction)r->handle;
    if (r->kind == DRK_HANDLE_KERNEL) {
        if (!drv.kernel_get_function)
            return unknown("cuKernelGetFunction (missing)", CUDA_ERROR_NOT_SUPPORTED, r->name);
        if (!check(drv.kernel_get_function(&fn, (CUkernel)r->handle), "cuKernelGetFunction", r->name))
            return 0;
    }
    if (!drv.func_get_attribute || !drv.occupancy_max_active_blocks)
        return unknown("cuOccupancyMaxActiveBlocksPerMultiprocessor (missing)", CUDA_ERROR_NOT_SUPPORTED, r->name);
    int regs = 0, shared = 0, blocks = 0;
    if (!check(drv.func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute(NUM_REGS)",
               r->name) ||
        !check(drv.func_get_attribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
               "cuFuncGetAttribute(SHARED_SIZE_BYTES)", r->name))
        return 0;
    uint64_t threads = (uint64_t)s->block[0] * s->block[1] * s->block[2];
    if (!threads || threads > INT_MAX || regs < 0 || shared < 0)
        return unknown("the shape's block size (out of range)", CUDA_ERROR_INVALID_VALUE, r->name);
    if (!check(drv.occupancy_max_active_blocks(&blocks, fn, (int)threads, s->shared_bytes),
               "cuOccupancyMaxActiveBlocksPerMultiprocessor", r->name))
        return 0;
    uint32_t warps = (uint32_t)((threads + (uint64_t)d->warp - 1) / (uint64_t)d->warp);
    double theoretical = blocks > 0 ? (double)blocks * warps / d->max_warps : 0;
    *o = (drk_occupancy){
        .theoretical = theoretical < 1 ? theoretical : 1,
        .blocks_per_sm = blocks > 0 ? (uint32_t)blocks : 0,
        .warps_per_block = warps,
        .max_warps_per_sm = (uint32_t)d->max_warps,
        .regs = (uint32_t)regs,
        .static_shared = (uint32_t)shared,
        .dynamic_shared = s->shared_bytes,
        .block_threads = (uint32_t)threads,
        .limit = theoretical >= 1 ? DRK_OCC_LIMIT_NONE
                                  : limit_of(d, (uint32_t)regs, (uint32_t)shared + s->shared_bytes, warps),
    };
    return 1;
}

/* Shape k of record i (`r`): 1 when it is done with (worked out or given
 * up), 0 when it must wait for a later call. */
static int shape(size_t i, const drk_kernel_record *r, int k)
{
    const drk_driver_facts *f = atomic_load_explicit(&r->driver, memory_order_acquire);
    if (!f && !(waited[i] & (1u << k))) {
        /* Another thread launched it first and is still asking the
         * driver about it (microseconds); one wait, then it is unknown. */
        waited[i] |= (uint8_t)(1u << k);
        return 0;
    }
    if (!f || r->kind == DRK_HANDLE_UNKNOWN || drk_registry_find(r->handle) != r) {
        /* no device known, unnamed, or its module unloaded (the handle may be gone) */
        drk_log(DRK_LOG_DEBUG, "occupancy: %.80s passed over (%s)", r->name ? r->name : "?",
                !f ? "no driver facts" : r->kind == DRK_HANDLE_UNKNOWN ? "unknown handle" : "unloaded");
        return 1;
    }
    const struct device *d = device_of(f->device, r->name);
    drk_occupancy o;
    if (d && push_primary(f->device, r->name) && work_out(r, &r->shapes[k].shape, d, &o)) {
        const drk_launch_shape *s = &r->shapes[k].shape;
        drk_time_key key = {r->name, {s->grid[0], s->grid[1], s->grid[2]}, {s->block[0], s->block[1], s->block[2]},
                            s->shared_bytes};
        drk_gputime_occupancy(&key, &o);
        drk_log(DRK_LOG_DEBUG, "occupancy: %.80s at block (%u,%u,%u), dyn smem %u: %.3g%%", r->name, s->block[0],
                s->block[1], s->block[2], s->shared_bytes, 100 * o.theoretical);
    }
    return 1;
}

static unsigned update(unsigned max);

unsigned drk_occupancy_update(unsigned max)
{
    if (!atomic_load_explicit(&configured, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&lock);
    unsigned n = update(max);
    pthread_mutex_unlock(&lock);
    return n;
}

void drk_occupancy_after_fork_child(void)
{
    /* The lock may have been held by the parent's thread mid-update. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
    pushed = -1; /* the parent's thread pushed it; the child has no such thread */
}

static unsigned update(unsigned max)
{
    uint64_t added = drk_registry_shapes_added();
    if (added == seen_added && !again)
        return 0; /* nothing new: the common tick */
    seen_added = added, again = 0;
    unsigned worked = 0;
    int full = 0;
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n && !full; i++) {
        if (done[i] == ALL_SHAPES)
            continue;
        const drk_kernel_record *r = drk_registry_at(i);
        for (int k = 0; k < DRK_SHAPES_PER_KERNEL; k++) {
            if (done[i] & (1u << k))
                continue;
            /* A slot being written is passed over by racing launches, so
             * later slots may be ready before it. */
            uint32_t st = atomic_load_explicit(&r->shapes[k].state, memory_order_acquire);
            if (st != DRK_SHAPE_READY) {
                again |= st == DRK_SHAPE_WRITING;
                continue;
            }
            if (worked == max) {
                again = full = 1;
                break;
            }
            if (shape(i, r, k)) {
                done[i] |= (uint8_t)(1u << k);
                worked++;
            } else {
                again = 1;
            }
        }
    }
    pop_primary();
    return worked;
}
