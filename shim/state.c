/* The per-process life of drk: the mode, the exit report, fork. There are no
 * constructors: the first call into drk starts it. */
#define _GNU_SOURCE
#include "shim/state.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "alloc/device.h"
#include "base/log.h"
#include "base/once.h"
#include "base/options.h"
#include "evolve/cupti.h"
#include "evolve/evolve.h"
#include "interpose/real.h"
#include "interpose/routes.h"
#include "interpose/table.h"
#include "shim/calls.h"
#include "shim/report.h"
#include "shim/evolve_wiring.h"
#include "shim/worker.h"

atomic_int drk_mode_now;
atomic_int drk_pool_on;

static long long start_ns;
static int forked_from;
static drk_once configured;

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
    drk_worker_at_exit();
    /* drk's threads stop before the report: its counts are final. */
    drk_alloc_at_exit();
    drk_report_at_exit();
}

static int fork_parent_pid;
static void before_fork(void) { fork_parent_pid = (int)getpid(); }

/* The child is a new process with its own report: it starts counting from
 * zero and names the parent it came from. Each part forgets what belonged
 * to the parent's threads. */
static void after_fork_child(void)
{
    drk_base_after_fork_child();
    drk_once_after_fork_child(&configured);
    drk_calls_reset();
    drk_alloc_after_fork_child();
    drk_evolve_after_fork_child();
    drk_worker_after_fork_child();
    drk_report_after_fork_child();
    forked_from = fork_parent_pid;
    start_ns = now_ns();
}

/* Every part below shim/ gets its copy of the driver table and its settings
 * here, once, before the mode is out: no thread sees drk started with a
 * part not yet configured. The table is asked for by every racing thread
 * first, since filling it may open the driver (the loader's lock, which a
 * thread starting drk from a library constructor holds): it never waits.
 * What the once covers only copies, so racing threads wait for it safely. */
static void configure(drk_mode m)
{
    const drk_driver *drv = drk_driver_table();
    if (!drk_once_begin(&configured))
        return;
    int pool = drk_opt_num(DRK_OPT_ALLOC) != 0;
    /* Allocations are recorded only where the hooks observe them. */
    drk_alloc_settings as = {
        .device_pool = pool,
        .dpool = {.sync_free = (int)drk_opt_num(DRK_OPT_ALLOC_SYNC_FREE),
                  .defrag = (int)drk_opt_num(DRK_OPT_DEFRAG),
                  .reserve = drk_opt_num(DRK_OPT_STREAM_RESERVE),
                  .defrag_threshold = (unsigned)drk_opt_num(DRK_OPT_DEFRAG_THRESHOLD),
                  .thread_shards = (int)drk_opt_num(DRK_OPT_ALLOC_THREAD_SHARDS),
                  .grow = (int)drk_opt_num(DRK_OPT_ALLOC_GROW),
                  .run_pages = (size_t)drk_opt_num(DRK_OPT_ALLOC_RUN_PAGES)},
        .host = {.on = (int)drk_opt_num(DRK_OPT_HOST_ALLOC), .sync_free = (int)drk_opt_num(DRK_OPT_ALLOC_SYNC_FREE)},
        .trace = m == DRK_MODE_OBSERVE ? drk_opt_str(DRK_OPT_ALLOC_TRACE) : NULL,
    };
    drk_alloc_configure(drv, &as);
    drk_evolve_configure(drv);
    if (m == DRK_MODE_OBSERVE)
        drk_evolve_wiring_configure();
    atomic_store_explicit(&drk_pool_on, pool, memory_order_release);
    drk_once_end(&configured);
}

/* Whether this thread has a context current: the program has made one and
 * may launch next. */
static int context_current(void)
{
    const drk_driver *drv = drk_driver_table();
    CUcontext c = NULL;
    return drv && drv->ctx_get_current && drv->ctx_get_current(&c) == CUDA_SUCCESS && c;
}

drk_mode drk_mode_start(void)
{
    drk_mode m = drk_opt_num(DRK_OPT_DISABLE)   ? DRK_MODE_OFF
                 : drk_opt_num(DRK_OPT_OBSERVE) ? DRK_MODE_OBSERVE
                                                : DRK_MODE_FORWARD;
    if (m != DRK_MODE_OFF)
        configure(m);
    int expected = DRK_MODE_UNSET;
    if (!atomic_compare_exchange_strong(&drk_mode_now, &expected, (int)m))
        return (drk_mode)expected;
    if (m == DRK_MODE_OFF)
        return m;
    start_ns = now_ns();
    if (atexit(at_exit) != 0 || pthread_atfork(before_fork, NULL, after_fork_child) != 0)
        drk_log(DRK_LOG_WARN, "cannot register exit and fork handlers; no report will be written");
    /* GPU times are taken only where the hooks observe. */
    if (m == DRK_MODE_OBSERVE && (drk_opt_num(DRK_OPT_PROFILE) || drk_evolve_wanted())) {
        /* A tool injected into the process owns CUPTI. */
        if (*drk_env(DRK_ENV_CUDA_INJECTION))
            drk_cupti_step_aside("a CUPTI tool is injected (CUDA_INJECTION64_PATH is set: nsys, ncu, "
                                 "compute-sanitizer or another)");
        drk_worker_settings ws = {.cupti_library = drk_opt_str(DRK_OPT_CUPTI_LIBRARY),
                                  .round_ms = drk_opt_num(DRK_OPT_ROUND_SECONDS),
                                  .counters = drk_opt_num(DRK_OPT_PROFILE) == DRK_PROFILE_COUNTERS,
                                  .profile = drk_opt_num(DRK_OPT_PROFILE) != 0,
                                  .evolve_waits = drk_opt_num(DRK_OPT_PROFILE) == 0,
                                  .records_share = (double)drk_opt_num(DRK_OPT_EVOLVE_BUDGET) / 10000.0 / 4,
                                  .counters_budget = (double)drk_opt_num(DRK_OPT_COUNTERS_BUDGET) / 10000.0,
                                  .start_here = context_current()};
        drk_worker_start(&ws);
    }
    const char *report = drk_opt_str(DRK_OPT_REPORT);
    drk_log(DRK_LOG_INFO, "drk %s active (%s)%s%s", DRK_VERSION,
            m == DRK_MODE_OBSERVE ? "observing" : "forwarding only", *report ? ", report to " : "",
            report);
    return m;
}

int drk_routes_active(void) { return drk_current_mode() != DRK_MODE_OFF; }

void drk_uses_cupti(const char *why)
{
    if (drk_current_mode() != DRK_MODE_OFF)
        drk_cupti_step_aside(why);
}

void drk_routes_cupti_seen(const char *name)
{
    (void)name;
    drk_uses_cupti("the program looked CUPTI up itself (dlsym of cupti*)");
}

/* drk_alloc_switch(on), which a program under drk finds with dlsym: the
 * device pool off (0) or on (1) for new allocations, or -1 to ask; the
 * state before, or -1 when the pool is off for the run (DRK_ALLOC=0). For
 * an A/B of drk's pool against the driver's allocator inside one process
 * (tests/bench/torch_ab.py). */
static int alloc_switch(int on)
{
    if (!atomic_load_explicit(&drk_pool_on, memory_order_acquire))
        return -1;
    return drk_dpool_switch(on);
}

void *drk_routes_own(const char *name)
{
    return strcmp(name, "drk_alloc_switch") == 0 ? (void *)alloc_switch : NULL;
}

void drk_interpose_settings_get(drk_interpose_settings *out)
{
    out->cuda_library = drk_opt_str(DRK_OPT_CUDA_LIBRARY);
    out->cuda_library_default = drk_option_table[DRK_OPT_CUDA_LIBRARY].fallback;
}
