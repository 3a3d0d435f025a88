/* The device page backend (CUDA virtual memory management), apart from
 * pages.h so that the CPU backends need no driver types. */
#ifndef DRK_ALLOC_PAGES_VMM_H
#define DRK_ALLOC_PAGES_VMM_H

#include "../shim/driver.h"
#include "pages.h"

/* Pages of device `dev`, at the driver's recommended granularity, as many
 * as its memory holds, or `max_pages` if that is fewer (0: no limit).
 * NULL when the driver lacks virtual memory management or refuses the
 * granularity query. */
drk_page_backend *drk_pages_vmm(const drk_driver *drv, CUdevice dev, size_t max_pages);

#endif
