/* The report's "device_pool" object: what drk's device pool did. */
#ifndef DRK_SHIM_REPORT_POOL_H
#define DRK_SHIM_REPORT_POOL_H

#include "base/json.h"

void drk_report_device_pool(drk_json *j);
/* The "host_pool" object: what drk's pinned host pool did. */
void drk_report_host_pool(drk_json *j);

#endif
