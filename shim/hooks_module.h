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

/* A handle the driver handed out for a named kernel goes into the registry. */
static inline void bound(CUresult r, const void *const *handle, drk_handle_kind kind, const char *name, const void *owner)
{
    if (r == CUDA_SUCCESS && handle && *handle && name)
        drk_registry_bind((uintptr_t)*handle, kind, name, (uintptr_t)owner);
}

/* The function of a kernel is that kernel in the current context: same
 * name, same library. */
static inline void kernel_function_bound(CUresult r, const CUfunction *fn, CUkernel kernel)
{
    if (r != CUDA_SUCCESS || !fn || !*fn)
        return;
    const drk_kernel_record *k = drk_registry_find((uintptr_t)kernel);
    const char *name = k ? k->name : NULL;
    const drk_driver *drv = drk_driver_table();
    if (!name && (!drv->kernel_get_name || drv->kernel_get_name(&name, kernel) != CUDA_SUCCESS))
        name = NULL;
    if (name)
        drk_registry_bind((uintptr_t)*fn, DRK_HANDLE_FUNCTION, name,
                          k ? atomic_load_explicit(&k->owner, memory_order_relaxed) : 0);
}

/* An unloaded module's or library's handles may be reused for other kernels. */
static inline void unloaded(CUresult r, const void *owner)
{
    if (r == CUDA_SUCCESS)
        drk_registry_retire((uintptr_t)owner);
}

DRK_HOOK_BODY(module_get_function, (bound(r, (const void *const *)fn, DRK_HANDLE_FUNCTION, name, module)))
DRK_HOOK_BODY(library_get_kernel, (bound(r, (const void *const *)kernel, DRK_HANDLE_KERNEL, name, library)))
DRK_HOOK_BODY(kernel_get_function, (kernel_function_bound(r, fn, kernel)))
DRK_HOOK_BODY(module_unload, (unloaded(r, module)))
DRK_HOOK_BODY(library_unload, (unloaded(r, library)))

#endif
