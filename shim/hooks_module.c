/* Module and library hooks: loads are counted and their images read; the
 * handles the driver hands out for named kernels go into the registry with
 * their image's facts, and unloads retire them. */
#include "shim/hook.h"

#include "interpose/symbols.h"
#include "shim/modules.h"

/* After a load that gave `*owner` (a CUmodule* or CUlibrary*) for the image
 * at `data` or the file `path`, made as `how` says (NULL: a module, no JIT
 * options). */
static inline __attribute__((always_inline)) CUresult loaded(drk_sym sym, CUresult r, uint64_t t0, const void *owner,
                                                             const void *data, const char *path,
                                                             const drk_images_load *how)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_modules_loaded(r, (const void *const *)owner, drk_sym_name[sym], data, path, how,
                           drk_modules_clock() - t0);
    }
    return r;
}

/* A load's JIT options as passed, on the hook's stack (no allocation). */
typedef struct jit_copy {
    CUjit_option opts[DRK_IMAGES_AGAIN_OPTS];
    void *vals[DRK_IMAGES_AGAIN_OPTS];
} jit_copy;

/* The `n` options of a load into `c`, before the driver's call writes into
 * their values (CU_JIT_THREADS_PER_BLOCK's, the log sizes'): at most
 * DRK_IMAGES_AGAIN_OPTS of them; past that the count alone tells
 * evolve/loaded.c they are too many to repeat. */
static inline __attribute__((always_inline)) drk_images_load copy_jit(jit_copy *c, unsigned n,
                                                                      const CUjit_option *opts, void *const *vals)
{
    drk_images_load ld = {0, n, c->opts, c->vals};
    if (n && (!opts || !vals))
        ld.opts = NULL, ld.vals = NULL; /* the driver refuses it */
    for (unsigned i = 0; ld.opts && i < n && i < DRK_IMAGES_AGAIN_OPTS; i++) {
        c->opts[i] = opts[i];
        c->vals[i] = vals[i];
    }
    return ld;
}

DRK_BODY drk_body_module_load(drk_sym sym, CUmodule *module, const char *fname)
{
    DRK_REAL_OR_MISSING(module_load);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(module, fname);
    return loaded(sym, r, t0, module, NULL, fname, NULL);
}

DRK_BODY drk_body_module_load_data(drk_sym sym, CUmodule *module, const void *image)
{
    DRK_REAL_OR_MISSING(module_load_data);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(module, image);
    return loaded(sym, r, t0, module, image, NULL, NULL);
}

DRK_BODY drk_body_module_load_data_ex(drk_sym sym, CUmodule *module, const void *image, unsigned int nopt,
                                      CUjit_option *opts, void **optvals)
{
    DRK_REAL_OR_MISSING(module_load_data_ex);
    jit_copy c;
    drk_images_load how = copy_jit(&c, nopt, opts, optvals);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(module, image, nopt, opts, optvals);
    return loaded(sym, r, t0, module, image, NULL, &how);
}

DRK_BODY drk_body_library_load_data(drk_sym sym, CUlibrary *library, const void *code, CUjit_option *jit_opts,
                                    void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts, void **lib_vals,
                                    unsigned int nlib)
{
    DRK_REAL_OR_MISSING(library_load_data);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(library, code, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib);
    drk_images_load how = {1, njit, jit_opts, jit_vals}; /* a library's options are not kept */
    return loaded(sym, r, t0, library, code, NULL, &how);
}

DRK_BODY drk_body_library_load_file(drk_sym sym, CUlibrary *library, const char *path, CUjit_option *jit_opts,
                                    void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts, void **lib_vals,
                                    unsigned int nlib)
{
    DRK_REAL_OR_MISSING(library_load_file);
    uint64_t t0 = drk_modules_clock();
    CUresult r = real(library, path, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib);
    drk_images_load how = {1, njit, jit_opts, jit_vals}; /* a library's options are not kept */
    return loaded(sym, r, t0, library, NULL, path, &how);
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
