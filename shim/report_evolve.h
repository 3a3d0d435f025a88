/* The report's "evolve": what the evolution engine did (evolve/engine.h). */
#ifndef DRK_SHIM_REPORT_EVOLVE_H
#define DRK_SHIM_REPORT_EVOLVE_H

#include "base/json.h"

void drk_report_evolve(drk_json *j);

#endif
