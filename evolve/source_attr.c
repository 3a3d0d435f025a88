/* Variants that keep the kernel's code and change an attribute of its
 * function: the preferred shared-memory carveout. For every kernel, SASS
 * only too: nothing is compiled and nothing loaded.
 *
 * An attribute belongs to a function, and every launch of that function
 * sees it: set on the program's own function it changes all the program's
 * launches of it, at every shape. So the engine applies a trial to a
 * function of its own (a copy of the kernel it loaded, or its PTX variant)
 * and to the program's function only once the variant is trusted for the
 * shapes that function serves. The caller passes the function to set
 * (drk_build_in.fn); unload restores the driver's default on it. */
#include "evolve/source.h"

#include <stdio.h>

/* -1: no preference (the driver's default). 0 (all L1) is never tried: on
 * an H200 it measured up to 2.7x slower, for a kernel whose blocks then
 * could not all be resident. */
static const int32_t carveout[] = {-1, 25, 50, 100};

static const drk_knob knobs[] = {
    {"carveout", (uint8_t)(sizeof carveout / sizeof *carveout), carveout, 0},
};

static int applies(const drk_source_kernel *k, char *why, size_t len)
{
    /* Less shared memory holds fewer blocks per SM: a cooperative launch
     * sized to be all resident could then fail. */
    if (k->cooperative || (k->facts && k->facts->flow && (k->facts->flow->flags & DRK_FLOW_COOPERATIVE))) {
        snprintf(why, len, "launched cooperatively (all blocks must stay resident)");
        return 0;
    }
    return 1;
}

static int redundant(const drk_source_kernel *k, const drk_variant *v)
{
    (void)k, (void)v;
    return 0;
}

static int set(const drk_build_in *in, int value, drk_built *out)
{
    const drk_driver *d = in->drv;
    if (!in->fn || !d->func_set_attribute || (in->ctx && (!d->ctx_push_current || !d->ctx_pop_current))) {
        out->rc = CUDA_ERROR_INVALID_VALUE;
        snprintf(out->why, sizeof out->why, "%s",
                 in->fn ? "the driver table lacks cuFuncSetAttribute or the context calls" : "no function given");
        return -1;
    }
    CUresult rc;
    if (in->ctx && (rc = d->ctx_push_current(in->ctx)) != CUDA_SUCCESS) {
        out->rc = rc;
        snprintf(out->why, sizeof out->why, "cuCtxPushCurrent: %d", (int)rc);
        return -1;
    }
    rc = d->func_set_attribute(in->fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, value);
    CUcontext popped;
    CUresult p = in->ctx ? d->ctx_pop_current(&popped) : CUDA_SUCCESS;
    out->rc = rc != CUDA_SUCCESS ? rc : p;
    if (out->rc != CUDA_SUCCESS) {
        snprintf(out->why, sizeof out->why, "%s: %d (carveout %d)",
                 rc != CUDA_SUCCESS ? "cuFuncSetAttribute" : "cuCtxPopCurrent", (int)out->rc, value);
        return -1;
    }
    return 0;
}

static int build(const drk_build_in *in, const drk_variant *v, drk_built *out)
{
    *out = (drk_built){.jit_ms = -1};
    if (v->k[0] >= knobs[0].nvalues) {
        out->rc = CUDA_ERROR_INVALID_VALUE;
        snprintf(out->why, sizeof out->why, "carveout index %u out of range", v->k[0]);
        return -1;
    }
    if (set(in, carveout[v->k[0]], out) != 0)
        return -1;
    out->fn = in->fn;
    return 0;
}

static CUresult unload(const drk_build_in *in, drk_built *b)
{
    drk_built r = {0};
    CUresult rc = b->fn && set(in, carveout[0], &r) != 0 ? r.rc : CUDA_SUCCESS;
    b->fn = NULL;
    b->module = NULL;
    return rc;
}

const drk_source drk_source_attr = {"attributes", 1, knobs, applies, redundant, build, unload, NULL};
