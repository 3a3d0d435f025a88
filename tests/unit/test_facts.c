/* What the driver says of a kernel (evolve/facts.c): the parameter count
 * found by probing cuFuncGetParamInfo / cuKernelGetParamInfo, the layout,
 * the attributes, and the comparison with an image's layout. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/facts.h"
#include "evolve/registry.h"
#include "tests/unit/check.h"

/* Handle h has h % 1000 parameters of 8 bytes, except that handles of
 * 5000 and up answer nothing (a driver without the call). */
static int calls;

static CUresult param_info(uintptr_t h, size_t i, size_t *off, size_t *size)
{
    calls++;
    if (h >= 5000)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (i >= h % 1000)
        return CUDA_ERROR_INVALID_VALUE;
    *off = i * 8, *size = 8;
    return CUDA_SUCCESS;
}

static CUresult func_param(CUfunction f, size_t i, size_t *off, size_t *size)
{
    if ((uintptr_t)f >= 2000 && (uintptr_t)f < 3000)
        return CUDA_ERROR_INVALID_HANDLE; /* a CUkernel */
    return param_info((uintptr_t)f, i, off, size);
}

static CUresult kernel_param(CUkernel k, size_t i, size_t *off, size_t *size)
{
    return param_info((uintptr_t)k, i, off, size);
}

static CUresult func_attr(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)f;
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 32 : a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return CUDA_SUCCESS;
}

static CUresult kernel_attr(int *v, CUfunction_attribute a, CUkernel k, CUdevice dev)
{
    (void)k;
    if (dev != 7)
        return CUDA_ERROR_INVALID_DEVICE;
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 40 : 0;
    return CUDA_SUCCESS;
}

static CUresult ctx_device(CUdevice *d)
{
    *d = 7;
    return CUDA_SUCCESS;
}

static const drk_driver drv = {.func_get_param_info = func_param,
                               .kernel_get_param_info = kernel_param,
                               .func_get_attribute = func_attr,
                               .kernel_get_attribute = kernel_attr,
                               .ctx_get_device = ctx_device};

static void test_counts(void)
{
    static const unsigned counts[] = {0, 1, 2, 3, 5, 8, 17, 64, 100, 999};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        unsigned n = counts[c];
        calls = 0;
        const drk_driver_facts *f = drk_driver_facts_ask(&drv, 1000 + n, DRK_HANDLE_FUNCTION);
        CHECK(f && f->nparams == (int32_t)n);
        /* O(log n) probes before the n that read the layout. */
        CHECK(calls <= (int)n + 2 * 11 + 2);
        for (unsigned i = 0; f && i < n && f->nparams == (int32_t)n; i++)
            CHECK(f->params[i].offset == i * 8 && f->params[i].size == 8);
        CHECK(f && f->regs == 32 && f->max_threads == 1024);
    }
}

static void test_kinds(void)
{
    /* A CUkernel is asked through cuKernel* calls, on the current device. */
    const drk_driver_facts *f = drk_driver_facts_ask(&drv, 2003, DRK_HANDLE_KERNEL);
    CHECK(f && f->nparams == 3 && f->regs == 40);
    /* A handle of unknown kind that cuFunc* refuses as a handle is a kernel. */
    f = drk_driver_facts_ask(&drv, 2004, DRK_HANDLE_UNKNOWN);
    CHECK(f && f->nparams == 4 && f->regs == 40);
    /* A driver that cannot say: unknown, not zero. */
    f = drk_driver_facts_ask(&drv, 5002, DRK_HANDLE_FUNCTION);
    CHECK(f && f->nparams == DRK_DRIVER_UNKNOWN);
    drk_driver none = {0};
    f = drk_driver_facts_ask(&none, 1003, DRK_HANDLE_FUNCTION);
    CHECK(f && f->nparams == DRK_DRIVER_UNKNOWN && f->regs == DRK_DRIVER_UNKNOWN);
}

static void test_match(void)
{
    const drk_driver_facts *d = drk_driver_facts_ask(&drv, 1002, DRK_HANDLE_FUNCTION);
    drk_param p[2] = {{0, 8, 3, DRK_PARAM_POINTER}, {8, 8, 0, DRK_PARAM_SCALAR}};
    drk_image_facts img = {.nparams = 2, .params = p};
    CHECK(drk_facts_params_match(&img, d) == 1);
    p[1].size = 4;
    CHECK(drk_facts_params_match(&img, d) == 0);
    img.nparams = 1;
    CHECK(drk_facts_params_match(&img, d) == 0);
    CHECK(drk_facts_params_match(NULL, d) == -1 && drk_facts_params_match(&img, NULL) == -1);
    CHECK(drk_facts_params_match(&img, drk_driver_facts_ask(&drv, 5001, DRK_HANDLE_FUNCTION)) == -1);
}

/* An image kernel's flow (ptx_flow.h) is copied with its words into the
 * facts, which outlive the image; without PTX there is none. */
static void test_flow(void)
{
    drk_param p[2] = {{0, 8, 3, DRK_PARAM_KIND_UNKNOWN}, {8, 4, 2, DRK_PARAM_SCALAR}};
    drk_ptx_flow *fl = calloc(1, sizeof *fl + 2 * sizeof fl->words[0]);
    fl->evolvable = 1;
    fl->nwords = 2;
    fl->words[0] = (drk_flow_word){0, 8, 0, DRK_FLOW_POINTER};
    fl->words[1] = (drk_flow_word){8, 4, 1, DRK_FLOW_VALUE};
    drk_image_kernel k = {.info = {.name = "k", .nparams = 2, .params = p, .params_size = 12}, .flow = fl};
    const drk_image_facts *f = drk_image_facts_make(&k, "test", 90);
    free(fl);
    CHECK(f && f->flow && f->flow != fl && f->flow->evolvable && f->flow->nwords == 2 &&
          f->flow->words[0].cls == DRK_FLOW_POINTER && f->flow->words[1].offset == 8);
    k.flow = NULL;
    f = drk_image_facts_make(&k, "test", 90);
    CHECK(f && !f->flow);
}

int main(void)
{
    test_counts();
    test_kinds();
    test_match();
    test_flow();
    return CHECK_DONE();
}
