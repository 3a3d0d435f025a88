/* The driver table (shim/driver.h) of a program linked with -lcuda: its
 * virtual memory and event calls, for the pool's pieces to run on the real
 * driver or on the stand-in one. */
#ifndef DRK_TESTS_LINKED_DRIVER_H
#define DRK_TESTS_LINKED_DRIVER_H

#include <cuda.h>

#include "../../../shim/driver.h"

static const drk_driver linked_driver = {
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
};

#endif
