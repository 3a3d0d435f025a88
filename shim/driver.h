/* The driver table: the real driver entry points that alloc/ and evolve/ may
 * call. shim/ fills it and hands it to them, so they never reach the driver
 * another way and run on the CPU against any table a test gives them. */
#ifndef DRK_SHIM_DRIVER_H
#define DRK_SHIM_DRIVER_H

#include <cuda.h>

typedef struct drk_driver {
    CUresult (*func_get_name)(const char **name, CUfunction fn);
    CUresult (*kernel_get_name)(const char **name, CUkernel kernel);
    CUresult (*driver_get_version)(int *version);
    CUresult (*func_get_param_info)(CUfunction fn, size_t index, size_t *offset, size_t *size);
    CUresult (*kernel_get_param_info)(CUkernel kernel, size_t index, size_t *offset, size_t *size);
    CUresult (*func_get_attribute)(int *value, CUfunction_attribute attr, CUfunction fn);
    CUresult (*kernel_get_attribute)(int *value, CUfunction_attribute attr, CUkernel kernel, CUdevice dev);
    CUresult (*ctx_get_device)(CUdevice *dev);
    CUresult (*device_get)(CUdevice *dev, int ordinal);
    CUresult (*device_get_attribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    CUresult (*device_total_mem)(size_t *bytes, CUdevice dev);
    /* Virtual memory management, for the pool's pages. */
    CUresult (*mem_address_reserve)(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags);
    CUresult (*mem_address_free)(CUdeviceptr ptr, size_t size);
    CUresult (*mem_create)(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                           unsigned long long flags);
    CUresult (*mem_release)(CUmemGenericAllocationHandle handle);
    CUresult (*mem_map)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                        unsigned long long flags);
    CUresult (*mem_unmap)(CUdeviceptr ptr, size_t size);
    CUresult (*mem_set_access)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
    CUresult (*mem_get_allocation_granularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option);
    /* Events, for the pool's stream order. */
    CUresult (*event_create)(CUevent *event, unsigned int flags);
    CUresult (*event_record)(CUevent event, CUstream stream);
    CUresult (*event_query)(CUevent event);
    CUresult (*event_synchronize)(CUevent event);
    CUresult (*event_destroy)(CUevent event);
    CUresult (*mem_export_to_shareable_handle)(void *shareable, CUmemGenericAllocationHandle handle,
                                               CUmemAllocationHandleType type, unsigned long long flags);
    CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle *handle, void *shareable,
                                                 CUmemAllocationHandleType type);
    CUresult (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
    /* Streams and contexts, for stream order and capture. */
    CUresult (*stream_is_capturing)(CUstream stream, CUstreamCaptureStatus *status);
    CUresult (*stream_synchronize)(CUstream stream);
    CUresult (*ctx_synchronize)(void);
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_set_current)(CUcontext ctx);
    /* Primary contexts, for pools to outlive the program's releases and to
     * know which context a reset ends. */
    CUresult (*primary_ctx_retain)(CUcontext *ctx, CUdevice dev);
    CUresult (*primary_ctx_release)(CUdevice dev);
    CUresult (*primary_ctx_get_state)(CUdevice dev, unsigned int *flags, int *active);
    /* Pinned host memory, for the host pool's chunks. */
    CUresult (*mem_host_alloc)(void **p, size_t size, unsigned int flags);
    CUresult (*mem_free_host)(void *p);
    CUresult (*mem_host_get_device_pointer)(CUdeviceptr *dptr, void *p, unsigned int flags);
    int version; /* cuDriverGetVersion when the table was filled, 0 if unknown */
} drk_driver;

/* The process's table; members the driver lacks are NULL. */
const drk_driver *drk_driver_table(void);

#endif
