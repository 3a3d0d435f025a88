/* The per-process life of drk: the mode, the exit report, fork. There are no
 * constructors: the first call into drk starts it. */
#define _GNU_SOURCE
#include "shim/state.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc/device.h"
#include "alloc/ipc.h"
#include "alloc/recorder.h"
#include "alloc/stats.h"
#include "evolve/loaded.h"
#include "evolve/registry.h"
#include "interpose/real.h"
#include "interpose/routes.h"
#include "interpose/table.h"
#include "base/log.h"
#include "base/options.h"
#include "shim/report.h"
#include "shim/calls.h"

atomic_int drk_mode_now;
atomic_int drk_pool_on;

static long long start_ns;
static int forked_from;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

long long drk_process_start_ns(void) { return start_ns; }
int drk_process_forked_from(void) { return forked_from; }

static void at_exit(void)
{
    drk_report_at_exit();
    if (drk_recorder_write() != 0)
        drk_log(DRK_LOG_WARN, "cannot write the allocation trace (DRK_ALLOC_TRACE=%s): %s",
                drk_opt_str(DRK_OPT_ALLOC_TRACE), strerror(errno));
}

static int fork_parent_pid;
static void before_fork(void) { fork_parent_pid = (int)getpid(); }

/* The child is a new process with its own report: it starts counting from
 * zero and names the parent it came from. */
static void after_fork_child(void)
{
    drk_settings_after_fork_child();
    drk_stats_reset();
    drk_alloc_stats_reset();
    drk_registry_reset_counts();
    drk_images_after_fork_child();
    drk_recorder_after_fork_child();
    drk_dpool_after_fork_child();
    drk_ipc_after_fork_child();
    drk_report_after_fork_child();
    forked_from = fork_parent_pid;
    start_ns = now_ns();
}

/* Threads racing drk's start would otherwise see the mode before the pool
 * is set up and allocate from the driver. They wait for it, briefly: the
 * starting thread may need the loader lock one of them holds (a library
 * constructor calling CUDA), so past ~100 ms they go on without the pool
 * (the driver serves them; frees find their owner either way). */
int drk_pool_wait(void)
{
    for (int i = 0; i < 2000 && atomic_load_explicit(&drk_pool_on, memory_order_acquire) == 2; i++) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    return atomic_load_explicit(&drk_pool_on, memory_order_acquire) == 1;
}

drk_mode drk_mode_start(void)
{
    drk_mode m = drk_opt_num(DRK_OPT_DISABLE)   ? DRK_MODE_OFF
                 : drk_opt_num(DRK_OPT_OBSERVE) ? DRK_MODE_OBSERVE
                                                : DRK_MODE_FORWARD;
    /* Pending before the mode is out: every thread reads the same options. */
    if (m != DRK_MODE_OFF && drk_opt_num(DRK_OPT_ALLOC)) {
        int off = 0;
        atomic_compare_exchange_strong(&drk_pool_on, &off, 2);
    }
    int expected = DRK_MODE_UNSET;
    if (!atomic_compare_exchange_strong(&drk_mode_now, &expected, (int)m))
        return (drk_mode)expected;
    if (m == DRK_MODE_OFF)
        return m;
    start_ns = now_ns();
    if (atexit(at_exit) != 0 || pthread_atfork(before_fork, NULL, after_fork_child) != 0)
        drk_log(DRK_LOG_WARN, "cannot register exit and fork handlers; no report will be written");
    if (drk_opt_num(DRK_OPT_ALLOC)) {
        drk_dpool_settings ps = {.sync_free = (int)drk_opt_num(DRK_OPT_ALLOC_SYNC_FREE),
                                 .defrag = (int)drk_opt_num(DRK_OPT_DEFRAG),
                                 .reserve = drk_opt_num(DRK_OPT_STREAM_RESERVE),
                                 .defrag_threshold = (unsigned)drk_opt_num(DRK_OPT_DEFRAG_THRESHOLD)};
        drk_dpool_configure(drk_driver_table(), &ps);
        drk_ipc_configure(drk_driver_table());
        atomic_store(&drk_pool_on, 1);
    }
    /* Allocations are recorded only where the hooks observe them. */
    if (m == DRK_MODE_OBSERVE && *drk_opt_str(DRK_OPT_ALLOC_TRACE))
        drk_recorder_start(drk_opt_str(DRK_OPT_ALLOC_TRACE));
    const char *report = drk_opt_str(DRK_OPT_REPORT);
    drk_log(DRK_LOG_INFO, "drk %s active (%s)%s%s", DRK_VERSION,
            m == DRK_MODE_OBSERVE ? "observing" : "forwarding only", *report ? ", report to " : "",
            report);
    return m;
}

int drk_routes_active(void) { return drk_current_mode() != DRK_MODE_OFF; }

void drk_interpose_settings_get(drk_interpose_settings *out)
{
    out->cuda_library = drk_opt_str(DRK_OPT_CUDA_LIBRARY);
    out->cuda_library_default = drk_option_table[DRK_OPT_CUDA_LIBRARY].fallback;
}
