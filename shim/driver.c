#include "shim/driver.h"

#include <stdatomic.h>

#include "interpose/driver.h"

static drk_driver table;
static atomic_int table_state; /* 0 empty, 1 being filled, 2 full */
static __thread drk_driver own_copy;

static void fill(drk_driver *t)
{
    t->func_get_name = (CUresult(*)(const char **, CUfunction))drk_driver_sym("cuFuncGetName");
    t->kernel_get_name = (CUresult(*)(const char **, CUkernel))drk_driver_sym("cuKernelGetName");
    t->driver_get_version = (CUresult(*)(int *))drk_driver_sym("cuDriverGetVersion");
    t->func_get_param_info = (__typeof__(t->func_get_param_info))drk_driver_sym("cuFuncGetParamInfo");
    t->kernel_get_param_info = (__typeof__(t->kernel_get_param_info))drk_driver_sym("cuKernelGetParamInfo");
    t->func_get_attribute = (__typeof__(t->func_get_attribute))drk_driver_sym("cuFuncGetAttribute");
    t->kernel_get_attribute = (__typeof__(t->kernel_get_attribute))drk_driver_sym("cuKernelGetAttribute");
    t->ctx_get_device = (__typeof__(t->ctx_get_device))drk_driver_sym("cuCtxGetDevice");
    t->device_get = (__typeof__(t->device_get))drk_driver_sym("cuDeviceGet");
    t->device_get_attribute = (__typeof__(t->device_get_attribute))drk_driver_sym("cuDeviceGetAttribute");
    t->device_total_mem = (__typeof__(t->device_total_mem))drk_driver_sym("cuDeviceTotalMem_v2");
    t->mem_address_reserve = (__typeof__(t->mem_address_reserve))drk_driver_sym("cuMemAddressReserve");
    t->mem_address_free = (__typeof__(t->mem_address_free))drk_driver_sym("cuMemAddressFree");
    t->mem_create = (__typeof__(t->mem_create))drk_driver_sym("cuMemCreate");
    t->mem_release = (__typeof__(t->mem_release))drk_driver_sym("cuMemRelease");
    t->mem_map = (__typeof__(t->mem_map))drk_driver_sym("cuMemMap");
    t->mem_unmap = (__typeof__(t->mem_unmap))drk_driver_sym("cuMemUnmap");
    t->mem_set_access = (__typeof__(t->mem_set_access))drk_driver_sym("cuMemSetAccess");
    t->event_create = (__typeof__(t->event_create))drk_driver_sym("cuEventCreate");
    t->event_record = (__typeof__(t->event_record))drk_driver_sym("cuEventRecord");
    t->event_query = (__typeof__(t->event_query))drk_driver_sym("cuEventQuery");
    t->event_synchronize = (__typeof__(t->event_synchronize))drk_driver_sym("cuEventSynchronize");
    t->event_destroy = (__typeof__(t->event_destroy))drk_driver_sym("cuEventDestroy_v2");
    t->mem_get_allocation_granularity =
        (__typeof__(t->mem_get_allocation_granularity))drk_driver_sym("cuMemGetAllocationGranularity");
    t->mem_export_to_shareable_handle =
        (__typeof__(t->mem_export_to_shareable_handle))drk_driver_sym("cuMemExportToShareableHandle");
    t->mem_import_from_shareable_handle =
        (__typeof__(t->mem_import_from_shareable_handle))drk_driver_sym("cuMemImportFromShareableHandle");
    t->mem_get_info = (__typeof__(t->mem_get_info))drk_driver_sym("cuMemGetInfo_v2");
    t->stream_is_capturing = (__typeof__(t->stream_is_capturing))drk_driver_sym("cuStreamIsCapturing");
    t->stream_synchronize = (__typeof__(t->stream_synchronize))drk_driver_sym("cuStreamSynchronize");
    t->ctx_synchronize = (__typeof__(t->ctx_synchronize))drk_driver_sym("cuCtxSynchronize");
    t->ctx_get_current = (__typeof__(t->ctx_get_current))drk_driver_sym("cuCtxGetCurrent");
    t->ctx_set_current = (__typeof__(t->ctx_set_current))drk_driver_sym("cuCtxSetCurrent");
    t->primary_ctx_retain = (__typeof__(t->primary_ctx_retain))drk_driver_sym("cuDevicePrimaryCtxRetain");
    t->primary_ctx_release = (__typeof__(t->primary_ctx_release))drk_driver_sym("cuDevicePrimaryCtxRelease_v2");
    t->primary_ctx_get_state = (__typeof__(t->primary_ctx_get_state))drk_driver_sym("cuDevicePrimaryCtxGetState");
    t->mem_host_alloc = (__typeof__(t->mem_host_alloc))drk_driver_sym("cuMemHostAlloc");
    t->mem_free_host = (__typeof__(t->mem_free_host))drk_driver_sym("cuMemFreeHost");
    t->mem_host_get_device_pointer =
        (__typeof__(t->mem_host_get_device_pointer))drk_driver_sym("cuMemHostGetDevicePointer_v2");
    /* Asked now: it needs no cuInit. */
    if (!t->driver_get_version || t->driver_get_version(&t->version) != CUDA_SUCCESS)
        t->version = 0;
}

/* The table is filled as soon as the driver is open: the driver's version,
 * for one, cannot be asked at exit, when the driver may have shut down. */
void drk_driver_opened(void) { (void)drk_driver_table(); }

const drk_driver *drk_driver_table(void)
{
    if (atomic_load_explicit(&table_state, memory_order_acquire) == 2)
        return &table;
    int expected = 0;
    if (atomic_compare_exchange_strong(&table_state, &expected, 1)) {
        fill(&table);
        atomic_store_explicit(&table_state, 2, memory_order_release);
        return &table;
    }
    /* Another thread is filling it, perhaps waiting on the loader lock this
     * thread holds: never wait, fill a private copy. */
    fill(&own_copy);
    return &own_copy;
}
