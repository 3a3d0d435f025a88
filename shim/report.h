/* The per-process JSON report (docs/report.md), written at exit. */
#ifndef DRK_SHIM_REPORT_H
#define DRK_SHIM_REPORT_H

#define DRK_REPORT_SCHEMA_VERSION 1

void drk_report_at_exit(void);
void drk_report_after_fork_child(void);

#endif
