/* The parameter list of each hook body, written once: DRK_SIG_<body>(M, ...)
 * expands to M(..., (params), (args)). Every body returns CUresult.
 * shim/exports.c checks each exported form against cuda.h's own prototype, so a
 * signature that drifts from the driver's fails to compile. The legacy (_v1)
 * forms spell CUdeviceptr_v1 as unsigned int, which is what it is. */
#ifndef DRK_INTERPOSE_SIGNATURES_H
#define DRK_INTERPOSE_SIGNATURES_H

#include <cuda.h>
#include "interpose/hooks.h"

#define DRK_UNPAREN(...) __VA_ARGS__

#define DRK_LAUNCH_PARAMS_                                                     \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,          \
     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,    \
     CUstream stream, void **params, void **extra)
#define DRK_LAUNCH_ARGS_ (f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra)

#define DRK_SIG_launch_kernel(M, ...) M(__VA_ARGS__, DRK_LAUNCH_PARAMS_, DRK_LAUNCH_ARGS_)
#define DRK_SIG_launch_kernel_coop(M, ...)                                     \
    M(__VA_ARGS__,                                                             \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,        \
       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,  \
       CUstream stream, void **params),                                        \
      (f, gx, gy, gz, bx, by, bz, shmem, stream, params))
#define DRK_SIG_launch_kernel_ex(M, ...)                                       \
    M(__VA_ARGS__, (const CUlaunchConfig *config, CUfunction f, void **params, void **extra), \
      (config, f, params, extra))
#define DRK_SIG_graph_launch(M, ...)                                           \
    M(__VA_ARGS__, (CUgraphExec exec, CUstream stream), (exec, stream))

#define DRK_SIG_module_load(M, ...)                                            \
    M(__VA_ARGS__, (CUmodule *module, const char *fname), (module, fname))
#define DRK_SIG_module_load_data(M, ...)                                       \
    M(__VA_ARGS__, (CUmodule *module, const void *image), (module, image))
#define DRK_SIG_module_load_data_ex(M, ...)                                    \
    M(__VA_ARGS__,                                                             \
      (CUmodule *module, const void *image, unsigned int nopt,                 \
       CUjit_option *opts, void **optvals),                                    \
      (module, image, nopt, opts, optvals))
#define DRK_SIG_library_load_data(M, ...)                                      \
    M(__VA_ARGS__,                                                             \
      (CUlibrary *library, const void *code, CUjit_option *jit_opts,           \
       void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts,          \
       void **lib_vals, unsigned int nlib),                                    \
      (library, code, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib))
#define DRK_SIG_library_load_file(M, ...)                                      \
    M(__VA_ARGS__,                                                             \
      (CUlibrary *library, const char *path, CUjit_option *jit_opts,           \
       void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts,          \
       void **lib_vals, unsigned int nlib),                                    \
      (library, path, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib))
#define DRK_SIG_module_get_function(M, ...)                                    \
    M(__VA_ARGS__, (CUfunction *fn, CUmodule module, const char *name), (fn, module, name))
#define DRK_SIG_library_get_kernel(M, ...)                                     \
    M(__VA_ARGS__, (CUkernel *kernel, CUlibrary library, const char *name),   \
      (kernel, library, name))
#define DRK_SIG_kernel_get_function(M, ...)                                    \
    M(__VA_ARGS__, (CUfunction *fn, CUkernel kernel), (fn, kernel))
#define DRK_SIG_module_unload(M, ...) M(__VA_ARGS__, (CUmodule module), (module))
#define DRK_SIG_library_unload(M, ...) M(__VA_ARGS__, (CUlibrary library), (library))

#define DRK_SIG_mem_alloc_v1(M, ...)                                           \
    M(__VA_ARGS__, (unsigned int *dptr, unsigned int size), (dptr, size))
#define DRK_SIG_mem_alloc(M, ...)                                              \
    M(__VA_ARGS__, (CUdeviceptr *dptr, size_t size), (dptr, size))
#define DRK_SIG_mem_alloc_pitch_v1(M, ...)                                     \
    M(__VA_ARGS__,                                                             \
      (unsigned int *dptr, unsigned int *pitch, unsigned int width,            \
       unsigned int height, unsigned int elem),                                \
      (dptr, pitch, width, height, elem))
#define DRK_SIG_mem_alloc_pitch(M, ...)                                        \
    M(__VA_ARGS__,                                                             \
      (CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,          \
       unsigned int elem),                                                     \
      (dptr, pitch, width, height, elem))
#define DRK_SIG_mem_free_v1(M, ...) M(__VA_ARGS__, (unsigned int dptr), (dptr))
#define DRK_SIG_mem_free(M, ...) M(__VA_ARGS__, (CUdeviceptr dptr), (dptr))
#define DRK_SIG_mem_alloc_async(M, ...)                                        \
    M(__VA_ARGS__, (CUdeviceptr *dptr, size_t size, CUstream stream), (dptr, size, stream))
#define DRK_SIG_mem_alloc_pool_async(M, ...)                                   \
    M(__VA_ARGS__,                                                             \
      (CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream),    \
      (dptr, size, pool, stream))
#define DRK_SIG_mem_free_async(M, ...)                                         \
    M(__VA_ARGS__, (CUdeviceptr dptr, CUstream stream), (dptr, stream))
#define DRK_SIG_mem_get_info_v1(M, ...)                                        \
    M(__VA_ARGS__, (unsigned int *free_bytes, unsigned int *total_bytes),     \
      (free_bytes, total_bytes))
#define DRK_SIG_mem_get_info(M, ...)                                           \
    M(__VA_ARGS__, (size_t *free_bytes, size_t *total_bytes), (free_bytes, total_bytes))
#define DRK_SIG_mem_get_range_v1(M, ...)                                       \
    M(__VA_ARGS__, (unsigned int *base, unsigned int *size, unsigned int dptr), \
      (base, size, dptr))
#define DRK_SIG_mem_get_range(M, ...)                                          \
    M(__VA_ARGS__, (CUdeviceptr *base, size_t *size, CUdeviceptr dptr), (base, size, dptr))
#define DRK_SIG_pointer_get_attribute(M, ...)                                  \
    M(__VA_ARGS__, (void *data, CUpointer_attribute attr, CUdeviceptr ptr),    \
      (data, attr, ptr))
#define DRK_SIG_pointer_get_attributes(M, ...)                                 \
    M(__VA_ARGS__,                                                             \
      (unsigned int nattr, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr), \
      (nattr, attrs, data, ptr))
#define DRK_SIG_ipc_get_mem_handle(M, ...)                                     \
    M(__VA_ARGS__, (CUipcMemHandle *handle, CUdeviceptr dptr), (handle, dptr))
#define DRK_SIG_ipc_open_mem_handle(M, ...)                                    \
    M(__VA_ARGS__, (CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags), \
      (dptr, handle, flags))
#define DRK_SIG_ipc_close_mem_handle(M, ...) M(__VA_ARGS__, (CUdeviceptr dptr), (dptr))
#define DRK_SIG_ctx_enable_peer_access(M, ...)                                 \
    M(__VA_ARGS__, (CUcontext peer, unsigned int flags), (peer, flags))
#define DRK_SIG_ctx_destroy(M, ...) M(__VA_ARGS__, (CUcontext ctx), (ctx))
#define DRK_SIG_primary_ctx_reset(M, ...) M(__VA_ARGS__, (CUdevice dev), (dev))
#define DRK_SIG_primary_ctx_release(M, ...) M(__VA_ARGS__, (CUdevice dev), (dev))
#define DRK_SIG_green_ctx_create(M, ...)                                       \
    M(__VA_ARGS__, (CUgreenCtx *green, CUdevResourceDesc desc, CUdevice dev,   \
                    unsigned int flags), (green, desc, dev, flags))

#define DRK_SIG_mem_host_alloc(M, ...)                                         \
    M(__VA_ARGS__, (void **pp, size_t size, unsigned int flags), (pp, size, flags))
#define DRK_SIG_mem_alloc_host_v1(M, ...)                                      \
    M(__VA_ARGS__, (void **pp, unsigned int size), (pp, size))
#define DRK_SIG_mem_alloc_host(M, ...)                                         \
    M(__VA_ARGS__, (void **pp, size_t size), (pp, size))
#define DRK_SIG_mem_free_host(M, ...) M(__VA_ARGS__, (void *p), (p))
#define DRK_SIG_mem_host_get_dptr_v1(M, ...)                                   \
    M(__VA_ARGS__, (unsigned int *dptr, void *p, unsigned int flags), (dptr, p, flags))
#define DRK_SIG_mem_host_get_dptr(M, ...)                                      \
    M(__VA_ARGS__, (CUdeviceptr *dptr, void *p, unsigned int flags), (dptr, p, flags))
#define DRK_SIG_mem_host_get_flags(M, ...)                                     \
    M(__VA_ARGS__, (unsigned int *flags, void *p), (flags, p))

#define DRK_SIG_stream_create(M, ...)                                          \
    M(__VA_ARGS__, (CUstream *stream, unsigned int flags), (stream, flags))
#define DRK_SIG_stream_create_priority(M, ...)                                 \
    M(__VA_ARGS__, (CUstream *stream, unsigned int flags, int priority),       \
      (stream, flags, priority))
#define DRK_SIG_stream_destroy(M, ...) M(__VA_ARGS__, (CUstream stream), (stream))
#define DRK_SIG_stream_synchronize(M, ...) M(__VA_ARGS__, (CUstream stream), (stream))
#define DRK_SIG_ctx_synchronize(M, ...) M(__VA_ARGS__, (void), ())
#define DRK_SIG_ctx_synchronize_v2(M, ...) M(__VA_ARGS__, (CUcontext ctx), (ctx))
#define DRK_SIG_event_synchronize(M, ...) M(__VA_ARGS__, (CUevent event), (event))
#define DRK_SIG_begin_capture_v1(M, ...) M(__VA_ARGS__, (CUstream stream), (stream))
#define DRK_SIG_begin_capture(M, ...)                                          \
    M(__VA_ARGS__, (CUstream stream, CUstreamCaptureMode mode), (stream, mode))
#define DRK_SIG_begin_capture_to_graph(M, ...)                                 \
    M(__VA_ARGS__,                                                             \
      (CUstream stream, CUgraph graph, const CUgraphNode *deps,                \
       const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode),  \
      (stream, graph, deps, edges, ndeps, mode))
#define DRK_SIG_end_capture(M, ...)                                            \
    M(__VA_ARGS__, (CUstream stream, CUgraph *graph), (stream, graph))

#define DRK_SIG_profiler_start(M, ...) M(__VA_ARGS__, (void), ())
#define DRK_SIG_profiler_stop(M, ...) M(__VA_ARGS__, (void), ())

#define DRK_SIG_get_proc_address_v1(M, ...)                                    \
    M(__VA_ARGS__,                                                             \
      (const char *symbol, void **pfn, int version, cuuint64_t flags),         \
      (symbol, pfn, version, flags))
#define DRK_SIG_get_proc_address(M, ...)                                       \
    M(__VA_ARGS__,                                                             \
      (const char *symbol, void **pfn, int version, cuuint64_t flags,          \
       CUdriverProcAddressQueryResult *status),                                \
      (symbol, pfn, version, flags, status))

/* For every hooked name, drk_fn_<body>: the type of the driver's function.
 * Bodies shared by several names repeat their typedef; C11 allows that. */
#define DRK_DECLARE_BODY_(body, params, args) typedef CUresult (*drk_fn_##body) params;
#define DRK_DECLARE_HOOK_(name, body, family) DRK_SIG_##body(DRK_DECLARE_BODY_, body)
DRK_HOOKS(DRK_DECLARE_HOOK_)
#undef DRK_DECLARE_HOOK_

#endif
