/* Variants from the kernel's own PTX, compiled again with other options:
 * the register budget, a threads-per-block target, min CTAs per SM, the
 * optimization level, the load cache mode. Options apply to the whole
 * module, so the module's PTX is compiled whole (by nvJitLink, off the
 * driver: jitlink.h says why), its cubin loaded and the kernel looked up by
 * name; the variant is a new module, with its own copies of any module
 * globals, which is one reason only evolvable kernels (no module globals,
 * ptx_flow.h) are rebuilt. */
#define _GNU_SOURCE
#include "evolve/source.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "evolve/jitlink.h"

enum { K_REGS, K_THREADS, K_MIN_CTA, K_OPT, K_CACHE, NKNOBS };

static const int32_t regs[] = {0, 32, 40, 48, 56, 64, 80, 96, 128, 168, 255};
static const int32_t threads[] = {0, DRK_KNOB_BLOCK};
static const int32_t min_cta[] = {0, 2, 4};
static const int32_t opt_level[] = {4, 3};
static const int32_t cache[] = {CU_JIT_CACHE_OPTION_NONE, CU_JIT_CACHE_OPTION_CG, CU_JIT_CACHE_OPTION_CA};

#define N(a) (uint8_t)(sizeof a / sizeof *a)
static const drk_knob knobs[NKNOBS] = {
    [K_REGS] = {"max_registers", N(regs), regs, 1},
    [K_THREADS] = {"threads_per_block", N(threads), threads, 1},
    [K_MIN_CTA] = {"min_ctas_per_sm", N(min_cta), min_cta, 1},
    [K_OPT] = {"opt_level", N(opt_level), opt_level, 1},
    [K_CACHE] = {"cache_mode", N(cache), cache, 1},
};

/* Never passed (docs/evolve.md, "Variant sources"), as prefixes of
 * nvJitLink's options and ptxas's through it: what changes results
 * (flush-to-zero, division and square root precision, fused multiply-add,
 * fast math, float atomics' order), link-time optimization, debug code, the
 * fast compile, directive overrides (a kernel's .maxntid/.reqntid/.maxnreg
 * are its author's), options that drop or rename what the module holds,
 * position-independent and split compiles, the sanitizer. */
const char *const drk_source_ptx_never[] = {
    "-ftz", "-prec-div", "-prec-sqrt", "-fma", "-use_fast_math", "-lto", "-g", "-lineinfo", "-split-compile",
    "-kernels-used", "-variables-used", "-optimize-unused-variables", "-Xptxas=-fmad", "-Xptxas=--fmad",
    "-Xptxas=-opt-fp-atomics", "-Xptxas=--optimize-float-atomics", "-Xptxas=-g", "-Xptxas=--device-debug",
    "-Xptxas=-lineinfo", "-Xptxas=--generate-line-info", "-Xptxas=-Ofc", "-Xptxas=--Ofast-compile",
    "-Xptxas=-override-directive-values", "-Xptxas=--override-directive-values", "-Xptxas=-pic",
    "-Xptxas=--position-independent-code", "-Xptxas=-split-compile", "-Xptxas=--split-compile",
    "-Xptxas=-e", "-Xptxas=--entry", "-Xptxas=-sanitize", "-Xptxas=--sanitize", NULL,
};

static int no(char *why, size_t len, const char *what, const char *detail)
{
    snprintf(why, len, "%s%s", what, detail);
    return 0;
}

static int applies(const drk_source_kernel *k, char *why, size_t len)
{
    const drk_image_facts *f = k->facts;
    if (!f)
        return no(why, len, "no image facts: its image was not read", "");
    if (!f->ptx_for_device)
        return no(why, len, f->nptx ? "no PTX the device can JIT" : "no PTX (SASS only)", "");
    if (!f->flow)
        return no(why, len, "its PTX's flow is unknown", "");
    if (!f->flow->evolvable)
        return no(why, len, "not evolvable: ", f->flow->reason);
    if (k->cooperative)
        return no(why, len, "launched cooperatively", "");
    if (!k->ptx)
        return no(why, len, "its PTX was not kept (keeping off, or past the cap)", "");
    return 1;
}

static int redundant(const drk_source_kernel *k, const drk_variant *v)
{
    /* The driver ignores MIN_CTA_PER_SM given with MAX_REGISTERS or
     * THREADS_PER_BLOCK, and directives the PTX declares beat both
     * MIN_CTA's MAX_THREADS_PER_BLOCK and a threads target. */
    int declared = k->facts && (k->facts->reqntid[0] || (k->facts->max_threads &&
                                                         k->facts->max_threads != DRK_UNKNOWN_U32));
    if (v->k[K_MIN_CTA] && (v->k[K_REGS] || v->k[K_THREADS] || declared))
        return 1;
    return v->k[K_THREADS] && declared;
}

static const char *result_name(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    default: return "a CUDA error";
    }
}

static int fail(drk_built *out, const char *call, CUresult rc, const char *log)
{
    out->rc = rc;
    snprintf(out->why, sizeof out->why, "%s: %s (%d)%s%.200s", call, result_name(rc), (int)rc,
             log && *log ? ": " : "", log ? log : "");
    return -1;
}

/* nvJitLink's options for a variant: the device, the info log, then each
 * knob off its default as ptxas takes it. The driver's JIT levels run 0..4
 * with 4 its default and ptxas's run 0..3 with 3 its default, so level 3 is
 * ptxas's -O2; a threads target is ptxas's --maxntid (the register budget
 * that lets a block of that many threads launch), which a min-CTAs target
 * needs beside it. */
typedef struct nvjl_opts {
    unsigned n;
    const char *opt[8];
    char text[8][40];
} nvjl_opts;

static void put(nvjl_opts *o, const char *name, long v)
{
    if (v < 0)
        snprintf(o->text[o->n], sizeof o->text[o->n], "%s", name);
    else
        snprintf(o->text[o->n], sizeof o->text[o->n], "%s%ld", name, v);
    o->opt[o->n] = o->text[o->n];
    o->n++;
}

static void options_of(const drk_variant *v, unsigned sm, uint32_t block, nvjl_opts *o)
{
    o->n = 0;
    put(o, "-arch=sm_", (long)sm);
    put(o, "-verbose", -1);
    if (v->k[K_REGS])
        put(o, "-maxrregcount=", (long)regs[v->k[K_REGS]]);
    if (v->k[K_THREADS] || v->k[K_MIN_CTA])
        put(o, "-Xptxas=--maxntid=", (long)block);
    if (v->k[K_MIN_CTA])
        put(o, "-Xptxas=--minnctapersm=", (long)min_cta[v->k[K_MIN_CTA]]);
    if (v->k[K_OPT])
        put(o, "-Xptxas=-O", (long)opt_level[v->k[K_OPT]] - 1);
    if (v->k[K_CACHE])
        put(o, cache[v->k[K_CACHE]] == CU_JIT_CACHE_OPTION_CG ? "-Xptxas=-dlcm=cg" : "-Xptxas=-dlcm=ca", -1);
}

/* What a build and a compile both check first: 0, or -1 with out->why. */
static int check(const drk_build_in *in, const drk_variant *v, drk_built *out, unsigned *sm)
{
    char why[256];
    if (!applies(in->k, why, sizeof why)) {
        snprintf(out->why, sizeof out->why, "does not apply: %s", why);
        out->rc = CUDA_ERROR_INVALID_VALUE;
        return -1;
    }
    for (unsigned k = 0; k < NKNOBS; k++)
        if (v->k[k] >= knobs[k].nvalues)
            return fail(out, "a knob's value", CUDA_ERROR_INVALID_VALUE, "out of range");
    if ((v->k[K_THREADS] || v->k[K_MIN_CTA]) && !in->block_threads)
        return fail(out, "the launch's block", CUDA_ERROR_INVALID_VALUE, "not given");
    *sm = in->sm ? in->sm : drk_images_sm();
    if (!*sm)
        return fail(out, "the device's compute capability", CUDA_ERROR_INVALID_VALUE, "not known");
    return 0;
}

static int compile(const drk_build_in *in, const drk_variant *v, drk_built *out)
{
    *out = (drk_built){.jit_ms = -1};
    unsigned sm;
    if (check(in, v, out, &sm) != 0)
        return -1;
    uint64_t t0 = drk_mono_ns();
    nvjl_opts o;
    options_of(v, sm, in->block_threads, &o);
    char error[sizeof out->why - 64];
    int rc = drk_jitlink_compile(in->k->ptx->text, in->k->ptx->len, o.opt, o.n, &out->cubin, &out->cubin_len,
                                 out->log, sizeof out->log, error, sizeof error);
    out->build_ns = drk_mono_ns() - t0;
    if (rc != 0) {
        out->cubin = NULL, out->cubin_len = 0;
        return fail(out, "nvJitLink", CUDA_ERROR_INVALID_PTX, error);
    }
    out->jit_ms = (float)((double)out->build_ns / 1e6);
    out->rc = CUDA_SUCCESS;
    return 0;
}

static int build(const drk_build_in *in, const drk_variant *v, drk_built *out)
{
    *out = (drk_built){.jit_ms = -1};
    const drk_driver *d = in->drv;
    unsigned sm;
    if (check(in, v, out, &sm) != 0)
        return -1;
    if (!d->module_load_data_ex || !d->module_get_function || !d->module_unload ||
        (in->ctx && (!d->ctx_push_current || !d->ctx_pop_current)))
        return fail(out, "the driver table", CUDA_ERROR_NOT_SUPPORTED, "lacks a module entry");

    uint64_t t0 = drk_mono_ns();
    void *cubin = NULL;
    size_t size = 0;
    if (!in->cubin) {
        drk_built c;
        if (compile(in, v, &c) != 0) {
            out->build_ns = drk_mono_ns() - t0;
            memcpy(out->why, c.why, sizeof out->why);
            memcpy(out->log, c.log, sizeof out->log);
            out->rc = c.rc;
            return -1;
        }
        cubin = c.cubin, size = c.cubin_len;
        memcpy(out->log, c.log, sizeof out->log);
    }
    uint64_t t1 = drk_mono_ns();
    out->jit_ms = (float)((double)(t1 - t0) / 1e6);
    /* Only the cubin's load takes the program's context, briefly. */
    CUresult rc;
    if (in->ctx && (rc = d->ctx_push_current(in->ctx)) != CUDA_SUCCESS) {
        free(cubin);
        return fail(out, "cuCtxPushCurrent", rc, NULL);
    }
    CUmodule m = NULL;
    CUfunction fn = NULL;
    int failed = 0;
    rc = d->module_load_data_ex(&m, in->cubin ? in->cubin : cubin, 0, NULL, NULL);
    if (in->keep_cubin && cubin && rc == CUDA_SUCCESS)
        out->cubin = cubin, out->cubin_len = size;
    else
        free(cubin); /* the driver copied it */
    if (rc != CUDA_SUCCESS) {
        failed = fail(out, "cuModuleLoadDataEx (the cubin)", rc, NULL);
    } else if ((rc = d->module_get_function(&fn, m, in->k->name)) != CUDA_SUCCESS) {
        failed = fail(out, "cuModuleGetFunction", rc, in->k->name);
        CUresult u = d->module_unload(m);
        (void)u; /* the lookup's failure is the one to tell */
    }
    if (in->ctx) {
        CUcontext popped;
        CUresult p = d->ctx_pop_current(&popped);
        if (p != CUDA_SUCCESS && !failed) {
            CUresult u = d->module_unload(m);
            (void)u;
            failed = fail(out, "cuCtxPopCurrent", p, NULL);
        }
    }
    out->load_ns = drk_mono_ns() - t1;
    out->build_ns = drk_mono_ns() - t0;
    if (failed) {
        free(out->cubin);
        out->cubin = NULL, out->cubin_len = 0;
        return -1;
    }
    out->module = m;
    out->fn = fn;
    out->rc = CUDA_SUCCESS;
    return 0;
}

static CUresult unload(const drk_build_in *in, drk_built *b)
{
    CUresult rc = CUDA_SUCCESS;
    if (b->module) {
        const drk_driver *d = in->drv;
        if (in->ctx && (rc = d->ctx_push_current(in->ctx)) != CUDA_SUCCESS)
            return rc;
        rc = d->module_unload(b->module);
        CUcontext popped;
        CUresult p = in->ctx ? d->ctx_pop_current(&popped) : CUDA_SUCCESS;
        if (rc == CUDA_SUCCESS)
            rc = p;
    }
    b->module = NULL;
    b->fn = NULL;
    return rc;
}

const drk_source drk_source_ptx = {"ptx_jit", NKNOBS, knobs, applies, redundant, build, unload, compile};
