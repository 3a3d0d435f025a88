/* The report's GPU times: "gpu_time" (per kernel-shape, from CUPTI) and
 * "rounds" (per round: busy time, gaps, top kernels, memory). */
#ifndef DRK_SHIM_REPORT_TIME_H
#define DRK_SHIM_REPORT_TIME_H

#include <stdint.h>

#include "base/json.h"

void drk_report_gpu_time(drk_json *j);
void drk_report_rounds(drk_json *j);
/* "findings": what went wrong, with its evidence and first round. */
void drk_report_findings(drk_json *j);

/* GPU time of every shape of the kernel `name`, and its timed launches. */
uint64_t drk_report_kernel_gpu_ns(const char *name, uint64_t *launches);

#endif
