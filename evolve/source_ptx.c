/* Variants from the kernel's own PTX, JIT-compiled again with other
 * options: the register budget, a threads-per-block target, min CTAs per
 * SM, the optimization level, the load cache mode. Options apply to the
 * whole module, so the module's PTX is loaded whole and the kernel looked
 * up by name; the variant is a new module, with its own copies of any
 * module globals, which is one reason only evolvable kernels (no module
 * globals, ptx_flow.h) are rebuilt. */
#define _GNU_SOURCE
#include "evolve/source.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* Never passed (docs/evolve.md, "Variant sources"): results (ftz, prec-div,
 * prec-sqrt, fma contraction: deprecated and LTO-only, but never), code for
 * another target or a fallback, debug code, the driver's internal fast
 * compile, directive overrides (a kernel's .maxntid/.reqntid/.maxnreg are
 * its author's), symbols resolved from outside, and options that drop or
 * rename what the module holds. */
const CUjit_option drk_source_ptx_never[] = {
    CU_JIT_FTZ, CU_JIT_PREC_DIV, CU_JIT_PREC_SQRT, CU_JIT_FMA, CU_JIT_LTO,
    CU_JIT_TARGET, CU_JIT_TARGET_FROM_CUCONTEXT, CU_JIT_FALLBACK_STRATEGY,
    CU_JIT_GENERATE_DEBUG_INFO, CU_JIT_GENERATE_LINE_INFO, CU_JIT_FAST_COMPILE, CU_JIT_NEW_SM3X_OPT,
    CU_JIT_OVERRIDE_DIRECTIVE_VALUES, CU_JIT_GLOBAL_SYMBOL_NAMES, CU_JIT_GLOBAL_SYMBOL_ADDRESSES,
    CU_JIT_GLOBAL_SYMBOL_COUNT, CU_JIT_REFERENCED_KERNEL_NAMES, CU_JIT_REFERENCED_KERNEL_COUNT,
    CU_JIT_REFERENCED_VARIABLE_NAMES, CU_JIT_REFERENCED_VARIABLE_COUNT,
    CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES, CU_JIT_POSITION_INDEPENDENT_CODE, CU_JIT_SPLIT_COMPILE,
    (CUjit_option)-1,
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

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
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

/* Options as passed: the logs and wall time, then each knob off its default. */
typedef struct jit_opts {
    unsigned n;
    CUjit_option opt[16];
    void *val[16];
} jit_opts;

static void put(jit_opts *o, CUjit_option opt, uintptr_t val)
{
    o->opt[o->n] = opt;
    o->val[o->n++] = (void *)val;
}

static int build(const drk_build_in *in, const drk_variant *v, drk_built *out)
{
    *out = (drk_built){.jit_ms = -1};
    const drk_driver *d = in->drv;
    char why[160];
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
    if (!d->module_load_data_ex || !d->module_get_function || !d->module_unload ||
        (in->ctx && (!d->ctx_push_current || !d->ctx_pop_current)))
        return fail(out, "the driver table", CUDA_ERROR_NOT_SUPPORTED, "lacks a module entry");

    char info[sizeof out->log] = "", error[sizeof out->why - 64] = "";
    jit_opts o = {0};
    put(&o, CU_JIT_INFO_LOG_BUFFER, (uintptr_t)info);
    put(&o, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, sizeof info);
    put(&o, CU_JIT_ERROR_LOG_BUFFER, (uintptr_t)error);
    put(&o, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, sizeof error);
    put(&o, CU_JIT_LOG_VERBOSE, 1); /* registers and spills, in the info log */
    unsigned wall = o.n;
    put(&o, CU_JIT_WALL_TIME, 0);
    if (v->k[K_REGS])
        put(&o, CU_JIT_MAX_REGISTERS, (uintptr_t)regs[v->k[K_REGS]]);
    if (v->k[K_THREADS])
        put(&o, CU_JIT_THREADS_PER_BLOCK, in->block_threads);
    if (v->k[K_MIN_CTA]) {
        /* MIN_CTA needs the block it counts; a launch above it would fail,
         * so the variant serves this block only (the registry's shapes). */
        put(&o, CU_JIT_MIN_CTA_PER_SM, (uintptr_t)min_cta[v->k[K_MIN_CTA]]);
        put(&o, CU_JIT_MAX_THREADS_PER_BLOCK, in->block_threads);
    }
    if (v->k[K_OPT])
        put(&o, CU_JIT_OPTIMIZATION_LEVEL, (uintptr_t)opt_level[v->k[K_OPT]]);
    if (v->k[K_CACHE])
        put(&o, CU_JIT_CACHE_MODE, (uintptr_t)cache[v->k[K_CACHE]]);

    uint64_t t0 = now_ns();
    CUresult rc;
    if (in->ctx && (rc = d->ctx_push_current(in->ctx)) != CUDA_SUCCESS)
        return fail(out, "cuCtxPushCurrent", rc, NULL);
    CUmodule m = NULL;
    CUfunction fn = NULL;
    int failed = 0;
    rc = d->module_load_data_ex(&m, in->k->ptx->text, o.n, o.opt, o.val);
    if (rc != CUDA_SUCCESS) {
        error[sizeof error - 1] = 0;
        failed = fail(out, "cuModuleLoadDataEx", rc, error);
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
    out->build_ns = now_ns() - t0;
    if (failed)
        return -1;
    float ms;
    memcpy(&ms, &o.val[wall], sizeof ms); /* the driver writes a float into the slot */
    out->jit_ms = ms;
    info[sizeof info - 1] = 0;
    snprintf(out->log, sizeof out->log, "%s", info);
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

const drk_source drk_source_ptx = {"ptx_jit", NKNOBS, knobs, applies, redundant, build, unload};
