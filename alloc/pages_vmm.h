/* The device page backend (CUDA virtual memory management), apart from
 * pages.h so that the CPU backends need no driver types. */
#ifndef DRK_ALLOC_PAGES_VMM_H
#define DRK_ALLOC_PAGES_VMM_H

#include "alloc/pages.h"
#include "base/driver.h"

/* Pages of device `dev`, at the driver's recommended granularity, as many
 * as its memory holds, or `max_pages` if that is fewer (0: no limit).
 * NULL when the driver lacks virtual memory management or refuses the
 * granularity query. */
drk_page_backend *drk_pages_vmm(const drk_driver *drv, CUdevice dev, size_t max_pages);

/* Device `dev` gets read-write access to every page mapped from now on,
 * and now to [va, va + bytes) (mapped pages; bytes may be 0). At most 8
 * devices. 0, or a DRK_PAGES_* error. */
int drk_pages_vmm_add_access(drk_page_backend *b, CUdevice dev, uintptr_t va, size_t bytes);

/* A page's memory as a POSIX file descriptor for another process to map
 * (pages are created exportable when the driver allows it). 0, or an error. */
int drk_pages_vmm_export(drk_page_backend *b, drk_page_handle page, int *fd);

#endif
