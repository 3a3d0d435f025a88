#include "evolve/facts.h"

#include <string.h>

#include "evolve/arena.h"
#include "evolve/registry.h"

const drk_image_facts *drk_image_facts_make(const drk_image_kernel *k, const char *image, unsigned sm)
{
    drk_image_facts *f = drk_arena_alloc(sizeof *f, _Alignof(drk_image_facts));
    drk_param *params = k->info.nparams ? drk_arena_alloc(sizeof *params * k->info.nparams, _Alignof(drk_param)) : NULL;
    if (!f || (k->info.nparams && !params))
        return NULL;
    if (params)
        memcpy(params, k->info.params, sizeof *params * k->info.nparams);
    f->image = drk_name_copy(image ? image : "?");
    f->nparams = k->info.nparams;
    f->params = params;
    f->params_size = k->info.params_size;
    f->regs = k->info.regs;
    f->shared_bytes = k->info.shared_bytes;
    f->local_bytes = k->info.local_bytes;
    f->const_bytes = k->info.const_bytes;
    f->max_threads = k->info.max_threads;
    memcpy(f->reqntid, k->info.reqntid, sizeof f->reqntid);
    f->from_ptx = k->source == DRK_INFO_PTX;
    f->source_arch = (uint16_t)k->source_arch;
    f->nsass = (uint8_t)(k->nsass < DRK_IMAGE_MAX_ARCHS ? k->nsass : DRK_IMAGE_MAX_ARCHS);
    f->nptx = (uint8_t)(k->nptx < DRK_IMAGE_MAX_ARCHS ? k->nptx : DRK_IMAGE_MAX_ARCHS);
    memcpy(f->sass, k->sass, sizeof f->sass[0] * f->nsass);
    memcpy(f->ptx, k->ptx, sizeof f->ptx[0] * f->nptx);
    memcpy(f->ptx_isa, k->ptx_isa, sizeof f->ptx_isa[0] * f->nptx);
    f->ptx_for_device = sm && drk_image_kernel_ptx_for(k, sm);
    if (k->flow) { /* without memory for it, no flow: the kernel is not evolved */
        drk_ptx_flow *fl = drk_arena_alloc(drk_ptx_flow_size(k->flow), _Alignof(drk_ptx_flow));
        if (fl)
            memcpy(fl, k->flow, drk_ptx_flow_size(k->flow));
        f->flow = fl;
    }
    return f;
}

/* No kernel has more parameters than fit in 32 KiB of one-byte ones. */
#define MAX_PARAMS 32768

static CUresult param_info(const drk_driver *drv, uintptr_t handle, int kind, size_t i, size_t *off, size_t *size)
{
    if (kind == DRK_HANDLE_KERNEL)
        return drv->kernel_get_param_info ? drv->kernel_get_param_info((CUkernel)handle, i, off, size)
                                          : CUDA_ERROR_NOT_SUPPORTED;
    return drv->func_get_param_info ? drv->func_get_param_info((CUfunction)handle, i, off, size)
                                    : CUDA_ERROR_NOT_SUPPORTED;
}

/* The parameter count: the first index the driver refuses as out of range.
 * Found by doubling then bisecting, so a kernel of n parameters costs
 * O(log n) calls before the n that read the layout. */
static int32_t count_params(const drk_driver *drv, uintptr_t handle, int kind)
{
    size_t off, size;
    CUresult r = param_info(drv, handle, kind, 0, &off, &size);
    if (r == CUDA_ERROR_INVALID_VALUE)
        return 0;
    if (r != CUDA_SUCCESS)
        return DRK_DRIVER_UNKNOWN;
    size_t lo = 0, hi = 1; /* lo answers, hi is the next guess */
    while (hi < MAX_PARAMS && param_info(drv, handle, kind, hi, &off, &size) == CUDA_SUCCESS)
        lo = hi, hi *= 2;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (param_info(drv, handle, kind, mid, &off, &size) == CUDA_SUCCESS)
            lo = mid;
        else
            hi = mid;
    }
    return (int32_t)hi;
}

static int32_t attribute(const drk_driver *drv, uintptr_t handle, int kind, CUfunction_attribute a, CUdevice dev,
                         int have_dev)
{
    int v = 0;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (kind == DRK_HANDLE_KERNEL) {
        if (drv->kernel_get_attribute && have_dev)
            r = drv->kernel_get_attribute(&v, a, (CUkernel)handle, dev);
    } else if (drv->func_get_attribute) {
        r = drv->func_get_attribute(&v, a, (CUfunction)handle);
    }
    return r == CUDA_SUCCESS ? v : DRK_DRIVER_UNKNOWN;
}

const drk_driver_facts *drk_driver_facts_ask(const drk_driver *drv, uintptr_t handle, int kind)
{
    drk_driver_facts *f = drk_arena_alloc(sizeof *f, _Alignof(drk_driver_facts));
    if (!f)
        return NULL;
    /* A handle first seen at launch may be either kind: the driver tells. */
    if (kind == DRK_HANDLE_UNKNOWN) {
        size_t off, size;
        kind = param_info(drv, handle, DRK_HANDLE_FUNCTION, 0, &off, &size) == CUDA_ERROR_INVALID_HANDLE
                   ? DRK_HANDLE_KERNEL
                   : DRK_HANDLE_FUNCTION;
    }
    f->nparams = count_params(drv, handle, kind);
    if (f->nparams > 0) {
        drk_param *p = drk_arena_alloc(sizeof *p * (size_t)f->nparams, _Alignof(drk_param));
        for (int32_t i = 0; p && i < f->nparams; i++) {
            size_t off = 0, size = 0;
            if (param_info(drv, handle, kind, (size_t)i, &off, &size) != CUDA_SUCCESS) {
                p = NULL;
                break;
            }
            p[i] = (drk_param){(uint32_t)off, (uint32_t)size, 0, DRK_PARAM_KIND_UNKNOWN};
        }
        if (!p)
            f->nparams = DRK_DRIVER_UNKNOWN;
        f->params = p;
    }
    CUdevice dev = 0;
    int have_dev = drv->ctx_get_device && drv->ctx_get_device(&dev) == CUDA_SUCCESS;
    f->device = have_dev ? (int32_t)dev : DRK_DRIVER_UNKNOWN;
    f->regs = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_NUM_REGS, dev, have_dev);
    f->shared_bytes = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, dev, have_dev);
    f->local_bytes = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, dev, have_dev);
    f->const_bytes = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, dev, have_dev);
    f->max_threads = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev, have_dev);
    f->ptx_version = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_PTX_VERSION, dev, have_dev);
    f->binary_version = attribute(drv, handle, kind, CU_FUNC_ATTRIBUTE_BINARY_VERSION, dev, have_dev);
    return f;
}

int drk_facts_params_match(const drk_image_facts *img, const drk_driver_facts *drv)
{
    if (!img || !drv || drv->nparams == DRK_DRIVER_UNKNOWN)
        return -1;
    if ((uint32_t)drv->nparams != img->nparams)
        return 0;
    for (uint32_t i = 0; i < img->nparams; i++)
        if (img->params[i].offset != drv->params[i].offset || img->params[i].size != drv->params[i].size)
            return 0;
    return 1;
}
