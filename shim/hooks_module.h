/* Module and library hooks: loads are counted; the handles the driver hands
 * out for named kernels go into the registry, and unloads retire them.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_MODULE_H
#define DRK_SHIM_HOOKS_MODULE_H

#include "../evolve/registry.h"
#include "driver.h"
#include "hook.h"

DRK_FORWARD_BODY(module_load)
DRK_FORWARD_BODY(module_load_data)
DRK_FORWARD_BODY(module_load_data_ex)
DRK_FORWARD_BODY(library_load_data)
DRK_FORWARD_BODY(library_load_file)

DRK_BODY drk_body_module_get_function(drk_sym sym, CUfunction *fn, CUmodule module, const char *name)
{
    drk_fn_module_get_function real = DRK_REAL(module_get_function);
    if (!real)
        return drk_missing(sym);
    CUresult r = real(fn, module, name);
    if (drk_observing()) {
        drk_count_call(sym);
        if (r == CUDA_SUCCESS && fn && *fn && name)
            drk_registry_bind((uintptr_t)*fn, DRK_HANDLE_FUNCTION, name, (uintptr_t)module);
    }
    return r;
}

DRK_BODY drk_body_library_get_kernel(drk_sym sym, CUkernel *kernel, CUlibrary library, const char *name)
{
    drk_fn_library_get_kernel real = DRK_REAL(library_get_kernel);
    if (!real)
        return drk_missing(sym);
    CUresult r = real(kernel, library, name);
    if (drk_observing()) {
        drk_count_call(sym);
        if (r == CUDA_SUCCESS && kernel && *kernel && name)
            drk_registry_bind((uintptr_t)*kernel, DRK_HANDLE_KERNEL, name, (uintptr_t)library);
    }
    return r;
}

DRK_BODY drk_body_kernel_get_function(drk_sym sym, CUfunction *fn, CUkernel kernel)
{
    drk_fn_kernel_get_function real = DRK_REAL(kernel_get_function);
    if (!real)
        return drk_missing(sym);
    CUresult r = real(fn, kernel);
    if (!drk_observing())
        return r;
    drk_count_call(sym);
    if (r != CUDA_SUCCESS || !fn || !*fn)
        return r;
    /* The function is the kernel in the current context: same name, same
     * library. */
    const drk_kernel_record *k = drk_registry_find((uintptr_t)kernel);
    const char *name = k ? k->name : NULL;
    const drk_driver *drv = drk_driver_table();
    if (!name && (!drv->kernel_get_name || drv->kernel_get_name(&name, kernel) != CUDA_SUCCESS))
        name = NULL;
    if (name)
        drk_registry_bind((uintptr_t)*fn, DRK_HANDLE_FUNCTION, name,
                          k ? atomic_load_explicit(&k->owner, memory_order_relaxed) : 0);
    return r;
}

DRK_BODY drk_body_module_unload(drk_sym sym, CUmodule module)
{
    drk_fn_module_unload real = DRK_REAL(module_unload);
    if (!real)
        return drk_missing(sym);
    CUresult r = real(module);
    if (drk_observing()) {
        drk_count_call(sym);
        if (r == CUDA_SUCCESS)
            drk_registry_retire((uintptr_t)module);
    }
    return r;
}

DRK_BODY drk_body_library_unload(drk_sym sym, CUlibrary library)
{
    drk_fn_library_unload real = DRK_REAL(library_unload);
    if (!real)
        return drk_missing(sym);
    CUresult r = real(library);
    if (drk_observing()) {
        drk_count_call(sym);
        if (r == CUDA_SUCCESS)
            drk_registry_retire((uintptr_t)library);
    }
    return r;
}

#endif
