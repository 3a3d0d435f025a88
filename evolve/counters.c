#define _GNU_SOURCE
#include "evolve/counters.h"

#include <cupti.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/dlsym.h"
#include "base/log.h"
#include "evolve/cupti.h"
#include "evolve/cupti_host.h"
#include "evolve/registry.h"

/* The metrics, in the order the values come back. */
static const char *metrics[] = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
};
#define NMETRICS (sizeof metrics / sizeof *metrics)
#define MAX_RANGES 4 /* the sampled launch, and a few of other threads' that may fall in its window */

static struct {
    CUptiResult (*init)(CUpti_Profiler_Initialize_Params *);
    CUptiResult (*deinit)(CUpti_Profiler_DeInitialize_Params *);
    CUptiResult (*chip)(CUpti_Device_GetChipName_Params *);
    CUptiResult (*avail)(CUpti_Profiler_GetCounterAvailability_Params *);
    CUptiResult (*host_init)(drk_cupti_host_init *);
    CUptiResult (*host_deinit)(drk_cupti_host_deinit *);
    CUptiResult (*add_metrics)(drk_cupti_host_add_metrics *);
    CUptiResult (*config_size)(drk_cupti_host_config_size *);
    CUptiResult (*config)(drk_cupti_host_config *);
    CUptiResult (*passes)(drk_cupti_host_passes *);
    CUptiResult (*evaluate)(drk_cupti_host_evaluate *);
    CUptiResult (*enable)(CUpti_RangeProfiler_Enable_Params *);
    CUptiResult (*disable)(CUpti_RangeProfiler_Disable_Params *);
    CUptiResult (*data_size)(CUpti_RangeProfiler_GetCounterDataSize_Params *);
    CUptiResult (*data_init)(CUpti_RangeProfiler_CounterDataImage_Initialize_Params *);
    CUptiResult (*set_config)(CUpti_RangeProfiler_SetConfig_Params *);
    CUptiResult (*start)(CUpti_RangeProfiler_Start_Params *);
    CUptiResult (*stop)(CUpti_RangeProfiler_Stop_Params *);
    CUptiResult (*decode)(CUpti_RangeProfiler_DecodeData_Params *);
    CUptiResult (*data_info)(CUpti_RangeProfiler_GetCounterDataInfo_Params *);
    CUptiResult (*result_string)(CUptiResult, const char **);
} api;

_Atomic uintptr_t drk_counters_armed;
static atomic_int used;

static drk_driver drv;
/* Serializes samples, their setup and the table; a launch only tries it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int on;                    /* under lock, like everything below */
static char off_why[256] = "DRK_PROFILE is not counters";
static drk_counters_state st;
/* CLOCK_MONOTONIC before which no sample is armed: each sample's cost is
 * followed by cost * (1 / budget - 1) without one, so samples take at most
 * the budget of any stretch of wall time and none is banked (a program's
 * long start would otherwise buy a burst of samples in its first steps). */
static uint64_t next_ns;

/* What is armed: the handle (also in drk_counters_armed) and its shape. */
static struct {
    uintptr_t handle;
    drk_time_key key;
    uint64_t round;
    unsigned waited;              /* rounds closed since it was armed */
} armed;

/* Prepared for each sample, in that launch's context, and released after
 * it: CUPTI's profiler, while initialized, costs every driver call of the
 * program (measured on the H200), and samples are seconds apart. */
static CUcontext prepared_ctx;
static int prepared;              /* 1 ready, 0 released, -1 failed for good */
static int announced;
static drk_cupti_host_object *host;
static CUpti_RangeProfiler_Object *profiler;
static uint8_t *config_image, *data_image;
static size_t config_bytes, data_bytes;

/* The sample under way. */
static uint64_t sample_t0, sample_mono0;

static drk_counters_row rows[DRK_COUNTERS_KEYS];
static char *row_names[DRK_COUNTERS_KEYS];
static uint64_t row_tried[DRK_COUNTERS_KEYS]; /* round of the last try that found no launch, +1 */
static size_t nrows;

static const char *result_text(CUptiResult r)
{
    const char *s = NULL;
    if (api.result_string && api.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

/* Counters end for good, with one log line. Locked. */
static void turn_off(const char *what, CUptiResult r)
{
    if (!on)
        return;
    if (r == CUPTI_SUCCESS)
        snprintf(off_why, sizeof off_why, "%s", what);
    else
        snprintf(off_why, sizeof off_why, "%s failed: %s", what, result_text(r));
    drk_log(DRK_LOG_INFO, "counters off: %s", off_why);
    on = 0;
    atomic_store(&drk_counters_armed, 0);
}

void drk_counters_configure(const drk_driver *d) { drv = *d; }

int drk_counters_start(double budget, char *why, size_t whylen)
{
    void *h = drk_cupti_handle();
    if (!h) {
        snprintf(why, whylen, "no CUPTI");
        return -1;
    }
    drk_dlsym_fn sym = drk_real_dlsym();
#define RESOLVE(field, name) api.field = (__typeof__(api.field))sym(h, name)
    RESOLVE(init, "cuptiProfilerInitialize");
    RESOLVE(deinit, "cuptiProfilerDeInitialize");
    RESOLVE(chip, "cuptiDeviceGetChipName");
    RESOLVE(avail, "cuptiProfilerGetCounterAvailability");
    RESOLVE(host_init, "cuptiProfilerHostInitialize");
    RESOLVE(host_deinit, "cuptiProfilerHostDeinitialize");
    RESOLVE(add_metrics, "cuptiProfilerHostConfigAddMetrics");
    RESOLVE(config_size, "cuptiProfilerHostGetConfigImageSize");
    RESOLVE(config, "cuptiProfilerHostGetConfigImage");
    RESOLVE(passes, "cuptiProfilerHostGetNumOfPasses");
    RESOLVE(evaluate, "cuptiProfilerHostEvaluateToGpuValues");
    RESOLVE(enable, "cuptiRangeProfilerEnable");
    RESOLVE(disable, "cuptiRangeProfilerDisable");
    RESOLVE(data_size, "cuptiRangeProfilerGetCounterDataSize");
    RESOLVE(data_init, "cuptiRangeProfilerCounterDataImageInitialize");
    RESOLVE(set_config, "cuptiRangeProfilerSetConfig");
    RESOLVE(start, "cuptiRangeProfilerStart");
    RESOLVE(stop, "cuptiRangeProfilerStop");
    RESOLVE(decode, "cuptiRangeProfilerDecodeData");
    RESOLVE(data_info, "cuptiRangeProfilerGetCounterDataInfo");
    RESOLVE(result_string, "cuptiGetResultString");
#undef RESOLVE
    if (!api.init || !api.deinit || !api.chip || !api.avail || !api.host_init || !api.host_deinit || !api.add_metrics ||
        !api.config_size || !api.config || !api.passes || !api.evaluate || !api.enable || !api.disable ||
        !api.data_size || !api.data_init || !api.set_config || !api.start || !api.stop || !api.decode ||
        !api.data_info) {
        snprintf(why, whylen, "%s lacks the range profiler (CUDA 12.6 or later has it)", drk_cupti_path());
        pthread_mutex_lock(&lock);
        snprintf(off_why, sizeof off_why, "%s", why);
        pthread_mutex_unlock(&lock);
        return -1;
    }
    pthread_mutex_lock(&lock);
    on = 1;
    st.budget = budget;
    next_ns = budget > 0 ? 0 : UINT64_MAX; /* 0%: no samples */
    off_why[0] = '\0';
    pthread_mutex_unlock(&lock);
    return 0;
}

/* ---- The table of kernel-shapes with counters (locked) ---- */

static int same_key(const drk_time_key *a, const drk_time_key *b)
{
    return memcmp(a->grid, b->grid, sizeof a->grid) == 0 && memcmp(a->block, b->block, sizeof a->block) == 0 &&
           a->shared_bytes == b->shared_bytes && strcmp(a->name, b->name) == 0;
}

static long row_of(const drk_time_key *k, int make)
{
    for (size_t i = 0; i < nrows; i++)
        if (same_key(&rows[i].key, k))
            return (long)i;
    if (!make || nrows >= DRK_COUNTERS_KEYS || !(row_names[nrows] = strdup(k->name)))
        return -1;
    rows[nrows].key = *k;
    rows[nrows].key.name = row_names[nrows];
    return (long)nrows++;
}

/* ---- Arming, on the worker ---- */

/* The handle drk saw launched at this kernel-shape, or 0. */
static uintptr_t handle_of(const drk_time_key *k)
{
    const drk_kernel_record *r = drk_registry_find_shape(k->name, k->grid, k->block, k->shared_bytes, NULL);
    return r ? r->handle : 0;
}

static int within_budget(void) { return drk_mono_ns() >= next_ns; }

/* Whether kernel-shape `k` is due a sample in round `round`. */
static int due(const drk_time_key *k, uint64_t round)
{
    long i = row_of(k, 0);
    if (i < 0)
        return 1;
    if (row_tried[i] && round < row_tried[i] - 1 + DRK_COUNTERS_REFRESH)
        return 0;
    return rows[i].samples == 0 || round >= rows[i].round + DRK_COUNTERS_REFRESH;
}

void drk_counters_round(const drk_round *r)
{
    pthread_mutex_lock(&lock);
    if (!on)
        goto out;
    if (armed.handle) {
        if (++armed.waited < DRK_COUNTERS_PATIENCE)
            goto out;
        /* Not launched again: try the others first. */
        long i = row_of(&armed.key, 1);
        if (i >= 0)
            row_tried[i] = r->index + 1;
        drk_log(DRK_LOG_DEBUG, "counters: %s at grid (%u,%u,%u) not launched in %d rounds; trying others",
                armed.key.name, armed.key.grid[0], armed.key.grid[1], armed.key.grid[2], DRK_COUNTERS_PATIENCE);
        atomic_store(&drk_counters_armed, 0);
        armed.handle = 0;
    }
    if (!within_budget()) {
        drk_log(DRK_LOG_DEBUG, "counters: round %llu: within the budget's spacing (%.1f ms sampled)",
                (unsigned long long)r->index, (double)st.cost_ns / 1e6);
        goto out;
    }
    for (unsigned t = 0; t < r->ntop && t < DRK_COUNTERS_TOP; t++) {
        const drk_time_key *k = &r->top[t].key;
        if (!k->name || !due(k, r->index))
            continue;
        uintptr_t h = handle_of(k);
        if (!h)
            continue;
        long i = row_of(k, 1);
        if (i < 0)
            break;
        armed.handle = h;
        armed.key = rows[i].key;
        armed.round = r->index;
        armed.waited = 0;
        atomic_store(&drk_counters_armed, h);
        drk_log(DRK_LOG_DEBUG, "counters: round %llu: sampling %s at grid (%u,%u,%u) block (%u,%u,%u) next",
                (unsigned long long)r->index, k->name, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                k->block[2]);
        break;
    }
    if (!armed.handle)
        drk_log(DRK_LOG_DEBUG, "counters: round %llu: nothing to sample", (unsigned long long)r->index);
out:
    pthread_mutex_unlock(&lock);
}

/* ---- Sampling, in the launching thread ---- */

/* The profiler for context `ctx`: made on the first sample. Locked. */
static void release(void)
{
    if (profiler) {
        CUpti_RangeProfiler_Disable_Params dp = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE, NULL, profiler};
        api.disable(&dp);
        profiler = NULL;
    }
    if (host) {
        drk_cupti_host_deinit hd = {DRK_CUPTI_SIZE(drk_cupti_host_deinit, pHostObject), NULL, host};
        api.host_deinit(&hd);
        host = NULL;
    }
    if (prepared) {
        CUpti_Profiler_DeInitialize_Params dp = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE, NULL};
        api.deinit(&dp);
    }
    free(config_image);
    free(data_image);
    config_image = data_image = NULL;
}

static int prepare(CUcontext ctx)
{
    if (prepared)
        return prepared > 0 && ctx == prepared_ctx;
    prepared = -1;
    CUptiResult r;
    const char *what = NULL;
    CUdevice dev = 0;
    if (drv.ctx_get_device && drv.ctx_get_device(&dev) != CUDA_SUCCESS)
        dev = 0;
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE, NULL};
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE, NULL, (size_t)dev, NULL};
    CUpti_Profiler_GetCounterAvailability_Params ca = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE,
                                                       NULL, ctx, 0, NULL};
    uint8_t *avail = NULL;
    if ((r = api.init(&ip)) != CUPTI_SUCCESS) {
        what = "cuptiProfilerInitialize";
        goto fail;
    }
    if ((r = api.chip(&cn)) != CUPTI_SUCCESS || !cn.pChipName) {
        what = "cuptiDeviceGetChipName";
        goto fail;
    }
    if ((r = api.avail(&ca)) != CUPTI_SUCCESS || !ca.counterAvailabilityImageSize ||
        !(avail = malloc(ca.counterAvailabilityImageSize))) {
        what = "cuptiProfilerGetCounterAvailability";
        goto fail;
    }
    ca.pCounterAvailabilityImage = avail;
    if ((r = api.avail(&ca)) != CUPTI_SUCCESS) {
        what = "cuptiProfilerGetCounterAvailability";
        goto fail;
    }
    drk_cupti_host_init hi = {DRK_CUPTI_SIZE(drk_cupti_host_init, pHostObject), NULL, DRK_CUPTI_RANGE_PROFILER,
                              cn.pChipName, avail, NULL};
    if ((r = api.host_init(&hi)) != CUPTI_SUCCESS || !hi.pHostObject) {
        what = "cuptiProfilerHostInitialize";
        goto fail;
    }
    host = hi.pHostObject;
    drk_cupti_host_add_metrics am = {DRK_CUPTI_SIZE(drk_cupti_host_add_metrics, numMetrics), NULL, host, metrics,
                                     NMETRICS};
    drk_cupti_host_config_size cs = {DRK_CUPTI_SIZE(drk_cupti_host_config_size, configImageSize), NULL, host, 0};
    if ((r = api.add_metrics(&am)) != CUPTI_SUCCESS) {
        what = "cuptiProfilerHostConfigAddMetrics";
        goto fail;
    }
    if ((r = api.config_size(&cs)) != CUPTI_SUCCESS || !cs.configImageSize ||
        !(config_image = malloc(cs.configImageSize))) {
        what = "cuptiProfilerHostGetConfigImageSize";
        goto fail;
    }
    config_bytes = cs.configImageSize;
    drk_cupti_host_config ci = {DRK_CUPTI_SIZE(drk_cupti_host_config, pConfigImage), NULL, host, config_bytes,
                                config_image};
    if ((r = api.config(&ci)) != CUPTI_SUCCESS) {
        what = "cuptiProfilerHostGetConfigImage";
        goto fail;
    }
    drk_cupti_host_passes np = {DRK_CUPTI_SIZE(drk_cupti_host_passes, numOfPasses), NULL, config_bytes,
                                config_image, 0};
    if (api.passes(&np) == CUPTI_SUCCESS)
        st.passes = np.numOfPasses;
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE, NULL, ctx, NULL};
    if ((r = api.enable(&en)) != CUPTI_SUCCESS || !en.pRangeProfilerObject) {
        what = "cuptiRangeProfilerEnable";
        goto fail;
    }
    profiler = en.pRangeProfilerObject;
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE,
                                                        NULL, profiler, metrics, NMETRICS, MAX_RANGES, MAX_RANGES, 0};
    if ((r = api.data_size(&ds)) != CUPTI_SUCCESS || !ds.counterDataSize ||
        !(data_image = malloc(ds.counterDataSize))) {
        what = "cuptiRangeProfilerGetCounterDataSize";
        goto fail;
    }
    data_bytes = ds.counterDataSize;
    free(avail);
    prepared = 1;
    prepared_ctx = ctx;
    if (!announced++)
        drk_log(DRK_LOG_INFO, "counters: range profiler on %s, %zu metrics in %llu passes a sample", cn.pChipName,
                NMETRICS, (unsigned long long)st.passes);
    return 1;
fail:
    free(avail);
    release();
    turn_off(what, r);
    return 0;
}

int drk_counters_begin(uintptr_t f, const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes,
                       CUstream stream)
{
    if (pthread_mutex_trylock(&lock) != 0)
        return 0;
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CUcontext ctx = NULL;
    if (!on || !armed.handle || armed.handle != f || memcmp(armed.key.grid, grid, sizeof armed.key.grid) != 0 ||
        memcmp(armed.key.block, block, sizeof armed.key.block) != 0 || armed.key.shared_bytes != shared_bytes)
        goto no;
    if (!drk_cupti_running()) {
        turn_off("GPU times stopped", CUPTI_SUCCESS);
        goto no;
    }
    sample_mono0 = drk_mono_ns(); /* the profiler's setup is the sample's cost too */
    /* Kernel replay cannot run inside a capture; a later launch will do. */
    if (!drv.stream_is_capturing || drv.stream_is_capturing(stream, &cap) != CUDA_SUCCESS ||
        cap != CU_STREAM_CAPTURE_STATUS_NONE)
        goto no;
    if (!drv.ctx_get_current || drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx || !prepare(ctx))
        goto no;
    CUptiResult r;
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE, NULL, profiler, data_bytes, data_image};
    if ((r = api.data_init(&di)) != CUPTI_SUCCESS) {
        turn_off("cuptiRangeProfilerCounterDataImageInitialize", r);
        goto no;
    }
    CUpti_RangeProfiler_SetConfig_Params sc;
    memset(&sc, 0, sizeof sc);
    sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    sc.pRangeProfilerObject = profiler;
    sc.configSize = config_bytes;
    sc.pConfig = config_image;
    sc.counterDataImageSize = data_bytes;
    sc.pCounterDataImage = data_image;
    sc.range = CUPTI_AutoRange;
    sc.replayMode = CUPTI_KernelReplay;
    sc.maxRangesPerPass = MAX_RANGES;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    if ((r = api.set_config(&sc)) != CUPTI_SUCCESS) {
        turn_off("cuptiRangeProfilerSetConfig", r);
        goto no;
    }
    sample_t0 = drk_cupti_now();
    atomic_store(&used, 1);
    drk_gputime_exclude(sample_t0, UINT64_MAX);
    CUpti_RangeProfiler_Start_Params sp = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE, NULL, profiler};
    if ((r = api.start(&sp)) != CUPTI_SUCCESS) {
        drk_gputime_exclude(sample_t0, sample_t0);
        turn_off("cuptiRangeProfilerStart", r);
        goto no;
    }
    return 1; /* the lock is held until drk_counters_end */
no:
    pthread_mutex_unlock(&lock);
    return 0;
}

static double per_request(double sectors, double requests) { return requests > 0 ? sectors / requests : -1; }

void drk_counters_end(CUresult launched)
{
    CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE, NULL, profiler, 0, 0, 0};
    CUptiResult r = api.stop(&sp);
    CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE, NULL, profiler, 0};
    if (r == CUPTI_SUCCESS)
        r = api.decode(&dd);
    drk_gputime_exclude(sample_t0, drk_cupti_now());
    CUpti_RangeProfiler_GetCounterDataInfo_Params inf = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE,
                                                         NULL, data_image, data_bytes, 0};
    double v[NMETRICS] = {0};
    drk_cupti_host_evaluate ev = {DRK_CUPTI_SIZE(drk_cupti_host_evaluate, pMetricValues), NULL, host, data_image,
                                  data_bytes, 0, metrics, NMETRICS, v};
    long i = -1;
    if (r != CUPTI_SUCCESS) {
        turn_off("cuptiRangeProfilerStop", r);
    } else if (launched == CUDA_SUCCESS && api.data_info(&inf) == CUPTI_SUCCESS && inf.numTotalRanges == 1 &&
               api.evaluate(&ev) == CUPTI_SUCCESS && (i = row_of(&armed.key, 1)) >= 0) {
        /* One range: the sampled launch alone (another thread's launch in
         * the window would be a second, and the sample is given up). */
        drk_counters_row *row = &rows[i];
        row->v = (drk_counter_values){v[0], v[1], per_request(v[2], v[3]), per_request(v[4], v[5])};
        row->samples++;
        row->round = armed.round;
        row_tried[i] = 0;
        st.samples++;
    }
    if (i < 0) {
        st.discarded++;
        drk_log(DRK_LOG_DEBUG, "counters: sample of %s given up (launch %d, %zu ranges)", armed.key.name,
                (int)launched, inf.numTotalRanges);
    }
    armed.handle = 0;
    atomic_store(&drk_counters_armed, 0);
    if (prepared > 0) {
        release();
        prepared = 0;
    }
    uint64_t end = drk_mono_ns(), cost = end - sample_mono0;
    st.cost_ns += cost;
    if (st.budget > 0 && st.budget < 1)
        next_ns = end + (uint64_t)((double)cost * (1 / st.budget - 1));
    pthread_mutex_unlock(&lock);
}

/* ---- Stop, report, fork ---- */

void drk_counters_stop(const char *why)
{
    pthread_mutex_lock(&lock);
    if (on && why) {
        snprintf(off_why, sizeof off_why, "%s", why);
        on = 0;
    }
    atomic_store(&drk_counters_armed, 0);
    armed.handle = 0;
    if (prepared > 0)
        release();
    prepared = -1;
    pthread_mutex_unlock(&lock);
}

int drk_counters_used(void) { return atomic_load(&used); }

drk_counters_state drk_counters_state_get(void)
{
    pthread_mutex_lock(&lock);
    drk_counters_state s = st;
    s.on = on;
    s.off = on ? NULL : off_why;
    pthread_mutex_unlock(&lock);
    return s;
}

size_t drk_counters_rows(drk_counters_row *out, size_t max)
{
    pthread_mutex_lock(&lock);
    size_t n = 0;
    for (size_t i = 0; i < nrows && n < max; i++)
        if (rows[i].samples)
            out[n++] = rows[i];
    pthread_mutex_unlock(&lock);
    return n;
}

void drk_counters_after_fork_child(void)
{
    /* The lock may have been held by a parent's thread mid-sample. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
    atomic_store(&drk_counters_armed, 0);
    armed.handle = 0;
    if (on) {
        on = 0;
        snprintf(off_why, sizeof off_why, "a forked child: CUPTI does not follow a fork");
    }
    prepared = -1;
}
