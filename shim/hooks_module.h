/* Module and library hooks: loads are counted and their images read; the
 * handles the driver hands out for named kernels go into the registry with
 * their image's facts, and unloads retire them.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_MODULE_H
#define DRK_SHIM_HOOKS_MODULE_H

#include "interpose/symbols.h"
#include "shim/hook.h"
#include "shim/modules.h"

#define DRK_LOADED(owner, data, path) drk_kernels_loaded(r, (const void *const *)(owner), drk_sym_name[sym], data, path)

DRK_HOOK_BODY(module_load, (DRK_LOADED(module, NULL, fname)))
DRK_HOOK_BODY(module_load_data, (DRK_LOADED(module, image, NULL)))
DRK_HOOK_BODY(module_load_data_ex, (DRK_LOADED(module, image, NULL)))
DRK_HOOK_BODY(library_load_data, (DRK_LOADED(library, code, NULL)))
DRK_HOOK_BODY(library_load_file, (DRK_LOADED(library, NULL, path)))
DRK_HOOK_BODY(module_get_function,
              (drk_kernels_bound(r, (const void *const *)fn, DRK_HANDLE_FUNCTION, name, module)))
DRK_HOOK_BODY(library_get_kernel,
              (drk_kernels_bound(r, (const void *const *)kernel, DRK_HANDLE_KERNEL, name, library)))
DRK_HOOK_BODY(kernel_get_function, (drk_kernels_function_of(r, (const void *const *)fn, kernel)))
DRK_HOOK_BODY(module_unload, (drk_kernels_unloaded(r, module)))
DRK_HOOK_BODY(library_unload, (drk_kernels_unloaded(r, library)))

#endif
