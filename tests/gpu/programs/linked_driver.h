/* The driver table (base/driver.h) of a program linked with -lcuda: what
 * the device pool and IPC call, for them to run on the real driver or on
 * the stand-in one. */
#ifndef DRK_TESTS_LINKED_DRIVER_H
#define DRK_TESTS_LINKED_DRIVER_H

#include <cuda.h>

#include "base/driver.h"

static const drk_driver linked_driver = {
    .ctx_get_device = cuCtxGetDevice,
    .device_get = cuDeviceGet,
    .device_get_attribute = cuDeviceGetAttribute,
    .device_total_mem = cuDeviceTotalMem,
    .mem_address_reserve = cuMemAddressReserve,
    .mem_address_free = cuMemAddressFree,
    .mem_create = cuMemCreate,
    .mem_release = cuMemRelease,
    .mem_map = cuMemMap,
    .mem_unmap = cuMemUnmap,
    .mem_set_access = cuMemSetAccess,
    .mem_get_allocation_granularity = cuMemGetAllocationGranularity,
    .event_create = cuEventCreate,
    .event_record = cuEventRecord,
    .event_query = cuEventQuery,
    .event_synchronize = cuEventSynchronize,
    .event_destroy = cuEventDestroy,
    .mem_export_to_shareable_handle = cuMemExportToShareableHandle,
    .mem_import_from_shareable_handle = cuMemImportFromShareableHandle,
    .mem_get_info = cuMemGetInfo,
    .stream_is_capturing = cuStreamIsCapturing,
    .stream_synchronize = cuStreamSynchronize,
    .ctx_synchronize = cuCtxSynchronize,
    .ctx_get_current = cuCtxGetCurrent,
    .ctx_set_current = cuCtxSetCurrent,
    .primary_ctx_retain = cuDevicePrimaryCtxRetain,
    .primary_ctx_release = cuDevicePrimaryCtxRelease,
    .primary_ctx_get_state = cuDevicePrimaryCtxGetState,
};

#endif
