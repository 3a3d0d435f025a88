/* The driver table: the real driver entry points that alloc/ and evolve/ may
 * call. interpose/ fills it (finding the driver is its job); shim/ hands each
 * component a copy once, at configure, so no component reaches the driver
 * another way and each runs on the CPU against any table a test gives it.
 *
 * The entries are written once, here: X(member, driver name, parameters).
 * From the list come the struct, its filling (interpose/table.c) and the
 * stand-in driver's check that it exports every entry (tests/fakecuda).
 * Adding an entry is one line. Expansions must use `name` only with #: in
 * files that include cuda.h normally, some names are macros. */
#ifndef DRK_BASE_DRIVER_H
#define DRK_BASE_DRIVER_H

#include <cuda.h>

#define DRK_DRIVER_ENTRIES(X)                                                                              \
    /* Kernels: names, parameters and attributes, for the registry's facts. */                            \
    X(func_get_name, cuFuncGetName, (const char **name, CUfunction fn))                                    \
    X(kernel_get_name, cuKernelGetName, (const char **name, CUkernel kernel))                              \
    X(driver_get_version, cuDriverGetVersion, (int *version))                                              \
    X(func_get_param_info, cuFuncGetParamInfo, (CUfunction fn, size_t index, size_t *offset, size_t *size)) \
    X(kernel_get_param_info, cuKernelGetParamInfo,                                                         \
      (CUkernel kernel, size_t index, size_t *offset, size_t *size))                                       \
    X(func_get_attribute, cuFuncGetAttribute, (int *value, CUfunction_attribute attr, CUfunction fn))      \
    X(kernel_get_attribute, cuKernelGetAttribute,                                                          \
      (int *value, CUfunction_attribute attr, CUkernel kernel, CUdevice dev))                              \
    X(ctx_get_device, cuCtxGetDevice, (CUdevice *dev))                                                     \
    X(device_get, cuDeviceGet, (CUdevice *dev, int ordinal))                                               \
    X(device_get_attribute, cuDeviceGetAttribute, (int *value, CUdevice_attribute attr, CUdevice dev))     \
    X(device_total_mem, cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev))                                \
    X(device_get_name, cuDeviceGetName, (char *name, int len, CUdevice dev))                               \
    /* Occupancy of launched shapes, on drk's thread: a CUkernel's function in                            \
     * the current context, and the driver's calculator. */                                               \
    X(kernel_get_function, cuKernelGetFunction, (CUfunction *fn, CUkernel kernel))                         \
    X(occupancy_max_active_blocks, cuOccupancyMaxActiveBlocksPerMultiprocessor,                            \
      (int *blocks, CUfunction fn, int block_size, size_t dynamic_shared))                                 \
    /* Virtual memory management, for the pool's pages. */                                                \
    X(mem_address_reserve, cuMemAddressReserve,                                                            \
      (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags))      \
    X(mem_address_free, cuMemAddressFree, (CUdeviceptr ptr, size_t size))                                  \
    X(mem_create, cuMemCreate,                                                                             \
      (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,                 \
       unsigned long long flags))                                                                          \
    X(mem_release, cuMemRelease, (CUmemGenericAllocationHandle handle))                                    \
    X(mem_map, cuMemMap,                                                                                   \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,                   \
       unsigned long long flags))                                                                          \
    X(mem_unmap, cuMemUnmap, (CUdeviceptr ptr, size_t size))                                               \
    X(mem_set_access, cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)) \
    X(mem_get_allocation_granularity, cuMemGetAllocationGranularity,                                       \
      (size_t *granularity, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option))     \
    /* Events, for the pool's stream order. */                                                            \
    X(event_create, cuEventCreate, (CUevent *event, unsigned int flags))                                   \
    X(event_record, cuEventRecord, (CUevent event, CUstream stream))                                       \
    X(event_query, cuEventQuery, (CUevent event))                                                          \
    X(event_synchronize, cuEventSynchronize, (CUevent event))                                              \
    X(event_destroy, cuEventDestroy_v2, (CUevent event))                                                   \
    /* IPC of pool memory. */                                                                             \
    X(mem_export_to_shareable_handle, cuMemExportToShareableHandle,                                        \
      (void *shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,               \
       unsigned long long flags))                                                                          \
    X(mem_import_from_shareable_handle, cuMemImportFromShareableHandle,                                    \
      (CUmemGenericAllocationHandle *handle, void *shareable, CUmemAllocationHandleType type))             \
    X(mem_get_info, cuMemGetInfo_v2, (size_t *free_bytes, size_t *total_bytes))                            \
    /* Streams and contexts, for stream order and capture. */                                             \
    X(stream_is_capturing, cuStreamIsCapturing, (CUstream stream, CUstreamCaptureStatus *status))          \
    X(stream_synchronize, cuStreamSynchronize, (CUstream stream))                                          \
    X(ctx_synchronize, cuCtxSynchronize, (void))                                                           \
    X(ctx_get_current, cuCtxGetCurrent, (CUcontext *ctx))                                                  \
    X(ctx_set_current, cuCtxSetCurrent, (CUcontext ctx))                                                   \
    X(ctx_push_current, cuCtxPushCurrent_v2, (CUcontext ctx))                                              \
    X(ctx_pop_current, cuCtxPopCurrent_v2, (CUcontext *ctx))                                               \
    /* Primary contexts, for pools to outlive the program's releases and to                               \
     * know which context a reset ends. */                                                                \
    X(primary_ctx_retain, cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev))                        \
    X(primary_ctx_release, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                   \
    X(primary_ctx_get_state, cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active)) \
    /* Pinned host memory, for the host pool's chunks. */                                                 \
    X(mem_host_alloc, cuMemHostAlloc, (void **p, size_t size, unsigned int flags))                         \
    X(mem_free_host, cuMemFreeHost, (void *p))                                                             \
    X(mem_host_get_device_pointer, cuMemHostGetDevicePointer_v2, (CUdeviceptr *dptr, void *p, unsigned int flags)) \
    /* Variants of kernels (evolve/source.h): a kernel's PTX loaded again                                 \
     * with JIT options, and attributes of a function. */                                                 \
    X(module_load_data_ex, cuModuleLoadDataEx,                                                             \
      (CUmodule *module, const void *image, unsigned int n, CUjit_option *options, void **values))        \
    X(module_get_function, cuModuleGetFunction, (CUfunction *fn, CUmodule module, const char *name))       \
    X(module_unload, cuModuleUnload, (CUmodule module))                                                    \
    X(func_set_attribute, cuFuncSetAttribute, (CUfunction fn, CUfunction_attribute attr, int value))      \
    /* Trials of variants (evolve/trial.h): drk's own buffers and stream,                                 \
     * snapshots of a launch's memory in the program's stream order, launches                             \
     * on copies, timing, and where an address lies. */                                                   \
    X(mem_alloc, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytes))                                         \
    X(mem_free, cuMemFree_v2, (CUdeviceptr dptr))                                                          \
    X(memcpy_dtod_async, cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(memcpy_dtoh_async, cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(memcpy_htod_async, cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)) \
    X(memset_d8_async, cuMemsetD8Async, (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream)) \
    X(launch_kernel, cuLaunchKernel,                                                                       \
      (CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
       unsigned int bz, unsigned int shared, CUstream stream, void **params, void **extra))                \
    X(launch_kernel_ex, cuLaunchKernelEx,                                                                   \
      (const CUlaunchConfig *config, CUfunction fn, void **params, void **extra))                          \
    X(stream_create, cuStreamCreate, (CUstream *stream, unsigned int flags))                               \
    X(stream_destroy, cuStreamDestroy_v2, (CUstream stream))                                               \
    X(stream_wait_event, cuStreamWaitEvent, (CUstream stream, CUevent event, unsigned int flags))          \
    X(event_elapsed_time, cuEventElapsedTime_v2, (float *ms, CUevent start, CUevent end))                  \
    X(mem_get_address_range, cuMemGetAddressRange_v2, (CUdeviceptr *base, size_t *size, CUdeviceptr p))    \
    X(pointer_get_attribute, cuPointerGetAttribute, (void *data, CUpointer_attribute attr, CUdeviceptr p)) \
    /* Trials in a context of drk's own on the kernel's device (evolve/engine.c):                         \
     * the context, the program's kernels found there, copies between the                                 \
     * program's context and drk's, and a served function loaded ahead of its                            \
     * first launch. */                                                                                   \
    X(ctx_create, cuCtxCreate_v4, (CUcontext *ctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)) \
    X(ctx_destroy, cuCtxDestroy_v2, (CUcontext ctx))                                                       \
    X(ctx_get_limit, cuCtxGetLimit, (size_t *value, CUlimit limit))                                        \
    X(ctx_set_limit, cuCtxSetLimit, (CUlimit limit, size_t value))                                         \
    X(library_get_kernel, cuLibraryGetKernel, (CUkernel *kernel, CUlibrary library, const char *name))     \
    X(memcpy_peer_async, cuMemcpyPeerAsync,                                                                \
      (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes, CUstream stream)) \
    X(func_load, cuFuncLoad, (CUfunction fn))

typedef struct drk_driver {
#define DRK_DRIVER_MEMBER_(member, name, params) CUresult(*member) params;
    DRK_DRIVER_ENTRIES(DRK_DRIVER_MEMBER_)
#undef DRK_DRIVER_MEMBER_
    int version; /* cuDriverGetVersion when the table was filled, 0 if unknown */
} drk_driver;

#endif
