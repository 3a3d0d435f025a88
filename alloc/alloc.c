#include "alloc/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc/ipc.h"
#include "alloc/recorder.h"
#include "alloc/stats.h"
#include "base/log.h"

static char trace_path[4096];

void drk_alloc_configure(const drk_driver *drv, const drk_alloc_settings *s)
{
    if (s->device_pool) {
        drk_dpool_configure(drv, &s->dpool);
        drk_ipc_configure(drv);
    }
    drk_host_pool_settings host = s->host;
    host.captures_under_way = drk_dpool_captures_under_way;
    drk_host_pool_configure(drv, &host);
    if (s->trace && *s->trace) {
        snprintf(trace_path, sizeof trace_path, "%s", s->trace);
        drk_recorder_start(trace_path);
    }
}

void drk_alloc_after_fork_child(void)
{
    drk_alloc_stats_reset();
    drk_recorder_after_fork_child();
    drk_dpool_after_fork_child();
    drk_ipc_after_fork_child();
    drk_host_pool_after_fork_child();
}

void drk_alloc_at_exit(void)
{
    drk_dpool_at_exit();
    if (drk_recorder_write() != 0)
        drk_log(DRK_LOG_WARN, "cannot write the allocation trace (DRK_ALLOC_TRACE=%s): %s", trace_path,
                strerror(errno));
}
