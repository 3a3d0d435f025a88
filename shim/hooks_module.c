/* Module and library hooks: loads are counted and their images read; the
 * handles the driver hands out for named kernels go into the registry with
 * their image's facts, and unloads retire them. */
#include "shim/hook.h"

#include "interpose/symbols.h"
#include "shim/modules.h"

/* After a load that gave `*owner` (a CUmodule* or CUlibrary*) for the image
 * at `data` or the file `path`. */
static inline __attribute__((always_inline)) CUresult loaded(drk_sym sym, CUresult r, uint64_t t0, const void *owner,
                                                             const void *data, const char *path)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_modules_loaded(r, (const void *const *)owner, drk_sym_name[sym], data, path, drk_modules_clock() - t0);
    }
    return r;
}

DRK_BODY drk_body_module_load(drk_sym sym, CUmodule *module, const char *fname)
{
    DRK_REAL_OR_MISSING(module_load);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(module, fname);
    return loaded(sym, r, t0, module, NULL, fname);
}

DRK_BODY drk_body_module_load_data(drk_sym sym, CUmodule *module, const void *image)
{
    DRK_REAL_OR_MISSING(module_load_data);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(module, image);
    return loaded(sym, r, t0, module, image, NULL);
}

DRK_BODY drk_body_module_load_data_ex(drk_sym sym, CUmodule *module, const void *image, unsigned int nopt,
                                      CUjit_option *opts, void **optvals)
{
    DRK_REAL_OR_MISSING(module_load_data_ex);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(module, image, nopt, opts, optvals);
    return loaded(sym, r, t0, module, image, NULL);
}

DRK_BODY drk_body_library_load_data(drk_sym sym, CUlibrary *library, const void *code, CUjit_option *jit_opts,
                                    void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts, void **lib_vals,
                                    unsigned int nlib)
{
    DRK_REAL_OR_MISSING(library_load_data);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(library, code, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib);
    return loaded(sym, r, t0, library, code, NULL);
}

DRK_BODY drk_body_library_load_file(drk_sym sym, CUlibrary *library, const char *path, CUjit_option *jit_opts,
                                    void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts, void **lib_vals,
                                    unsigned int nlib)
{
    DRK_REAL_OR_MISSING(library_load_file);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(library, path, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib);
    return loaded(sym, r, t0, library, NULL, path);
}

/* After the driver handed out `*handle` for kernel `name` of `owner`. */
static inline __attribute__((always_inline)) CUresult bound(drk_sym sym, CUresult r, const void *handle,
                                                            drk_handle_kind kind, const char *name, const void *owner)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_modules_bound(r, (const void *const *)handle, kind, name, owner);
    }
    return r;
}

DRK_BODY drk_body_module_get_function(drk_sym sym, CUfunction *fn, CUmodule module, const char *name)
{
    DRK_REAL_OR_MISSING(module_get_function);
    return bound(sym, real(fn, module, name), fn, DRK_HANDLE_FUNCTION, name, module);
}

DRK_BODY drk_body_library_get_kernel(drk_sym sym, CUkernel *kernel, CUlibrary library, const char *name)
{
    DRK_REAL_OR_MISSING(library_get_kernel);
    return bound(sym, real(kernel, library, name), kernel, DRK_HANDLE_KERNEL, name, library);
}

DRK_BODY drk_body_kernel_get_function(drk_sym sym, CUfunction *fn, CUkernel kernel)
{
    DRK_REAL_OR_MISSING(kernel_get_function);
    CUresult r = real(fn, kernel);
    if (drk_observing()) {
        drk_count_call(sym);
        drk_modules_function_of(r, (const void *const *)fn, kernel);
    }
    return r;
}

/* After an unload: its handles are retired. */
static inline __attribute__((always_inline)) CUresult unloaded(drk_sym sym, CUresult r, const void *owner)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_modules_unloaded(r, owner);
    }
    return r;
}

DRK_BODY drk_body_module_unload(drk_sym sym, CUmodule module)
{
    DRK_REAL_OR_MISSING(module_unload);
    if (drk_observing())
        drk_modules_unloading(module);
    return unloaded(sym, real(module), module);
}

DRK_BODY drk_body_library_unload(drk_sym sym, CUlibrary library)
{
    DRK_REAL_OR_MISSING(library_unload);
    if (drk_observing())
        drk_modules_unloading(library);
    return unloaded(sym, real(library), library);
}

DRK_HOOKS_MODULE(DRK_EXPORT)
