/* The report's kernel facts: per kernel what its image and the driver say,
 * and for the process how many launched kernels are fully known. */
#ifndef DRK_SHIM_REPORT_FACTS_H
#define DRK_SHIM_REPORT_FACTS_H

#include <stddef.h>

#include "base/json.h"
#include "evolve/registry.h"

/* Totals over launched kernels, filled by drk_report_facts. */
typedef struct drk_facts_totals {
    uint64_t launched, named, with_layout, layout_from_image, layout_equal, layout_differs, image_only,
        driver_only, ptx_for_device, with_ptx;
} drk_facts_totals;

/* The "image", "driver" and "params_match" members of one kernel (its
 * records, `count` of them, share a name); adds to `t` if it launched. */
void drk_report_facts(drk_json *j, const drk_kernel_record *const *recs, size_t count, uint64_t launches,
                      drk_facts_totals *t);

/* The "facts" object: the device SM, the images read, the totals. */
void drk_report_facts_totals(drk_json *j, const drk_facts_totals *t);

#endif
