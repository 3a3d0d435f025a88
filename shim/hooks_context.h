/* Context teardown hooks: a context that ends (cuCtxDestroy,
 * cuDevicePrimaryCtxReset, a last cuDevicePrimaryCtxRelease) takes the
 * memory made in it, so drk's pools must hear of it first: the device pool
 * gives its pages back while the context can still take them and starts
 * afresh; the host pool forgets the chunks pinned there. Otherwise a pool
 * would later hand out memory the driver had freed.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_CONTEXT_H
#define DRK_SHIM_HOOKS_CONTEXT_H

#include "alloc/device.h"
#include "alloc/host_pool.h"
#include "interpose/table.h"
#include "shim/hook.h"

/* The primary context of `dev` if it is active (asking for it then creates
 * nothing), else NULL. Rare calls: teardown only. */
static CUcontext primary_of(CUdevice dev)
{
    const drk_driver *d = drk_driver_table();
    unsigned int flags;
    int active = 0;
    CUcontext ctx = NULL;
    if (!d->primary_ctx_get_state || !d->primary_ctx_retain || !d->primary_ctx_release ||
        d->primary_ctx_get_state(dev, &flags, &active) != CUDA_SUCCESS || !active ||
        d->primary_ctx_retain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    d->primary_ctx_release(dev);
    return ctx;
}

static int primary_active(CUdevice dev)
{
    const drk_driver *d = drk_driver_table();
    unsigned int flags;
    int active = 0;
    return d->primary_ctx_get_state && d->primary_ctx_get_state(dev, &flags, &active) == CUDA_SUCCESS && active;
}

/* Whether ctx is some device's primary context: cuCtxDestroy refuses those
 * and they must then stay served. */
static int is_primary(CUcontext ctx)
{
    const drk_driver *d = drk_driver_table();
    CUcontext cur = NULL;
    CUdevice dev;
    if (!d->ctx_get_current || !d->ctx_set_current || !d->ctx_get_device || d->ctx_get_current(&cur) != CUDA_SUCCESS)
        return 0;
    int ok = (cur == ctx || d->ctx_set_current(ctx) == CUDA_SUCCESS) && d->ctx_get_device(&dev) == CUDA_SUCCESS;
    if (cur != ctx)
        d->ctx_set_current(cur);
    return ok && primary_of(dev) == ctx;
}

static void context_ends(CUcontext ctx, int alive)
{
    if (drk_pooling())
        drk_dpool_context_ends(ctx, alive);
    drk_host_pool_context_ends(ctx);
}

DRK_BODY drk_body_ctx_destroy(drk_sym sym, CUcontext ctx)
{
    drk_fn_ctx_destroy real = DRK_REAL(ctx_destroy);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    if (ctx && drk_current_mode() != DRK_MODE_OFF && !is_primary(ctx))
        context_ends(ctx, 1);
    CUresult r = real(ctx);
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

DRK_BODY drk_body_primary_ctx_reset(drk_sym sym, CUdevice dev)
{
    drk_fn_primary_ctx_reset real = DRK_REAL(primary_ctx_reset);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    CUcontext ctx = drk_current_mode() != DRK_MODE_OFF ? primary_of(dev) : NULL;
    if (ctx)
        context_ends(ctx, 1);
    CUresult r = real(dev);
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

/* Only the last release ends the context, and only the driver knows which
 * is last: asked afterwards. (A device pool holds its own retain, so its
 * context never ends this way; the host pool's chunks may.) */
DRK_BODY drk_body_primary_ctx_release(drk_sym sym, CUdevice dev)
{
    drk_fn_primary_ctx_release real = DRK_REAL(primary_ctx_release);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    CUcontext ctx = drk_current_mode() != DRK_MODE_OFF ? primary_of(dev) : NULL;
    CUresult r = real(dev);
    if (ctx && r == CUDA_SUCCESS && !primary_active(dev))
        context_ends(ctx, 0);
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

#endif
