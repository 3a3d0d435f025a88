#define _GNU_SOURCE
#include "evolve/cupti.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "base/dlsym.h"
#include "base/log.h"
#include "evolve/counters.h"
#include "evolve/gputime.h"
#include "evolve/libfind.h"

/* Buffers handed to CUPTI, allocated once at start, each on its own (a
 * profiler's completion callback that got one would free it as its own:
 * that must not crash; drk has stepped aside by then and never reuses it). */
#define NBUF 16
#define BUF_BYTES ((size_t)2 << 20)

static struct {
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*timestamp)(uint64_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    CUptiResult (*stream_id)(CUcontext, CUstream, uint8_t, uint32_t *); /* optional */
    CUptiResult (*context_id)(CUcontext, uint32_t *);                   /* optional */
} api;

/* drk's own stream (its trials' replays, copies and compares), as CUPTI
 * names it: context id << 32 | stream id; 0 none. */
static _Atomic uint64_t own_stream;

static int is_own(uint32_t context, uint32_t stream)
{
    uint64_t o = atomic_load_explicit(&own_stream, memory_order_relaxed);
    return o && o == ((uint64_t)context << 32 | stream);
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET};

static uint8_t *buffers[NBUF];
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static int buf_free[NBUF], nfree;
static atomic_int running;
static _Atomic(const char *) stopped_why;
/* Start and stepping aside exclude each other: CUPTI's registration is the
 * last caller's, and the program's must be last. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *aside; /* under start_lock: why drk must not start */
static char path[4096];
static void *library; /* the dlopen handle of the CUPTI in use */
static atomic_ulong starved; /* buffers CUPTI asked for when none was free */

static const char *result_text(CUptiResult r)
{
    const char *s = NULL;
    if (api.result_string && api.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

/* ---- Buffers ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    pthread_mutex_lock(&buf_lock);
    int i = nfree > 0 ? buf_free[--nfree] : -1;
    pthread_mutex_unlock(&buf_lock);
    *max_records = 0;
    if (i < 0) {
        atomic_fetch_add(&starved, 1); /* CUPTI drops what it cannot store, and counts it */
        *buffer = NULL, *size = 0;
        return;
    }
    *buffer = buffers[i];
    *size = BUF_BYTES;
}

static void give_back(uint8_t *buffer)
{
    for (int i = 0; buffer && i < NBUF; i++)
        if (buffers[i] == buffer) {
            pthread_mutex_lock(&buf_lock);
            buf_free[nfree++] = i;
            pthread_mutex_unlock(&buf_lock);
            return;
        }
    /* not drk's: a profiler's buffer delivered through drk's callback */
}

static void kernel_record(const CUpti_ActivityKernel10 *k)
{
    if (is_own(k->contextId, k->streamId)) {
        drk_gputime_own(k->start, k->end);
        return;
    }
    drk_time_key key = {k->name,
                        {(uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ},
                        {(uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ},
                        (uint32_t)k->dynamicSharedMemory};
    drk_gputime_kernel_built(&key, k->registersPerThread,
                             k->staticSharedMemory > 0 ? (uint32_t)k->staticSharedMemory : 0, k->start, k->end);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    while (buffer && valid && api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL:
            kernel_record((const CUpti_ActivityKernel10 *)rec);
            break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            if (is_own(m->contextId, m->streamId))
                drk_gputime_own(m->start, m->end);
            else
                drk_gputime_copy(DRK_COPY_MEMCPY, m->bytes, m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            if (is_own(m->contextId, m->streamId))
                drk_gputime_own(m->start, m->end);
            else
                drk_gputime_copy(DRK_COPY_MEMSET, m->bytes, m->start, m->end);
            break;
        }
        default:
            break;
        }
    }
    size_t dropped = 0;
    if (api.dropped && api.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        drk_gputime_dropped(dropped);
    give_back(buffer);
}

/* ---- Finding the library ---- */

static void *find_cupti(const drk_cupti_settings *s)
{
    static const char *const toolkit[] = {
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13", "/usr/local/cuda-13*/extras/CUPTI/lib64/libcupti.so.13",
        "/usr/local/cuda-13*/lib64/libcupti.so.13", "/usr/local/cuda-13*/targets/x86_64-linux/lib/libcupti.so.13",
    };
    static const char *const wheels[] = {"cu13/lib", "cuda_cupti/lib"};
    static const drk_libfind cupti = {"libcupti.so.13", "cuptiActivityEnable", "DRK_CUPTI_LIBRARY", toolkit, 6, wheels, 2};
    return drk_libfind_open(&cupti, s->library, s->exe, path, sizeof path);
}

/* ---- Start and stop ---- */

static int start_locked(const drk_cupti_settings *s, char *why, size_t whylen);
static int load_locked(const drk_cupti_settings *s, char *why, size_t whylen);

int drk_cupti_load(const drk_cupti_settings *s, char *why, size_t whylen)
{
    pthread_mutex_lock(&start_lock);
    int r = aside ? (snprintf(why, whylen, "%s", aside), -1) : load_locked(s, why, whylen);
    pthread_mutex_unlock(&start_lock);
    return r;
}

int drk_cupti_start(const drk_cupti_settings *s, char *why, size_t whylen)
{
    pthread_mutex_lock(&start_lock);
    int r = aside ? (snprintf(why, whylen, "%s", aside), -1) : start_locked(s, why, whylen);
    pthread_mutex_unlock(&start_lock);
    return r;
}

void drk_cupti_step_aside(const char *why)
{
    pthread_mutex_lock(&start_lock);
    if (!aside) {
        aside = why;
        if (atomic_load(&running))
            drk_log(DRK_LOG_INFO, "GPU times stop: %s", why);
        drk_cupti_stop(why);
        drk_counters_stop(why);
    }
    pthread_mutex_unlock(&start_lock);
}

/* The library opened, its entry points found and the buffers made: no
 * call into CUPTI yet (the first attaches it). Once is enough. */
static int loaded;

static int load_locked(const drk_cupti_settings *s, char *why, size_t whylen)
{
    if (loaded)
        return 0;
    void *h = find_cupti(s);
    library = h;
    if (!h) {
        snprintf(why, whylen, "CUPTI (libcupti.so.13) not found; set DRK_CUPTI_LIBRARY");
        return -1;
    }
    drk_dlsym_fn sym = drk_real_dlsym();
    api.register_callbacks = (__typeof__(api.register_callbacks))sym(h, "cuptiActivityRegisterCallbacks");
    api.enable = (__typeof__(api.enable))sym(h, "cuptiActivityEnable");
    api.disable = (__typeof__(api.disable))sym(h, "cuptiActivityDisable");
    api.flush_all = (__typeof__(api.flush_all))sym(h, "cuptiActivityFlushAll");
    api.next_record = (__typeof__(api.next_record))sym(h, "cuptiActivityGetNextRecord");
    api.dropped = (__typeof__(api.dropped))sym(h, "cuptiActivityGetNumDroppedRecords");
    api.timestamp = (__typeof__(api.timestamp))sym(h, "cuptiGetTimestamp");
    api.result_string = (__typeof__(api.result_string))sym(h, "cuptiGetResultString");
    api.stream_id = (__typeof__(api.stream_id))sym(h, "cuptiGetStreamIdEx");
    api.context_id = (__typeof__(api.context_id))sym(h, "cuptiGetContextId");
    if (!api.register_callbacks || !api.enable || !api.disable || !api.flush_all || !api.next_record ||
        !api.timestamp) {
        snprintf(why, whylen, "%s lacks the activity API", path);
        return -1;
    }
    if (!buffers[0]) {
        for (int i = 0; i < NBUF; i++)
            if (!(buffers[i] = aligned_alloc(64, BUF_BYTES))) {
                while (i-- > 0)
                    free(buffers[i]), buffers[i] = NULL;
                snprintf(why, whylen, "no memory for %zu MiB of activity buffers", NBUF * BUF_BYTES >> 20);
                return -1;
            }
        for (int i = 0; i < NBUF; i++)
            buf_free[i] = NBUF - 1 - i;
        nfree = NBUF;
    }
    loaded = 1;
    return 0;
}

static int start_locked(const drk_cupti_settings *s, char *why, size_t whylen)
{
    if (load_locked(s, why, whylen) != 0)
        return -1;
    /* Running (so marks are taken) from before the first record can come. */
    uint64_t now = 0;
    CUptiResult r = api.timestamp(&now);
    if (r == CUPTI_SUCCESS) {
        drk_gputime_reset(now);
        atomic_store(&running, 1);
        r = api.register_callbacks(buffer_requested, buffer_completed);
    }
    size_t on = 0;
    for (; r == CUPTI_SUCCESS && on < sizeof kinds / sizeof *kinds; on++)
        r = api.enable(kinds[on]);
    if (r != CUPTI_SUCCESS) {
        atomic_store(&running, 0);
        while (on > 0)
            api.disable(kinds[--on]);
        snprintf(why, whylen, "%s: %s", path, result_text(r));
        return -1;
    }
    drk_log(DRK_LOG_INFO, "GPU times from %s", path);
    return 0;
}

void drk_cupti_flush(int forced)
{
    if (atomic_load(&running))
        api.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

uint64_t drk_cupti_now(void)
{
    uint64_t t = 0;
    if (!atomic_load(&running) || api.timestamp(&t) != CUPTI_SUCCESS)
        return 0;
    return t;
}

int drk_cupti_own_stream(CUcontext ctx, CUstream stream)
{
    uint32_t c = 0, s = 0;
    if (!atomic_load(&running) || !api.stream_id || !api.context_id || api.context_id(ctx, &c) != CUPTI_SUCCESS ||
        api.stream_id(ctx, stream, 0, &s) != CUPTI_SUCCESS)
        return -1;
    atomic_store(&own_stream, (uint64_t)c << 32 | s);
    return 0;
}

int drk_cupti_kernels(int on)
{
    /* Under the start lock: never turned on after drk stepped aside for
     * another client (the program's round mark may turn them on). */
    pthread_mutex_lock(&start_lock);
    CUptiResult r = CUPTI_ERROR_NOT_INITIALIZED;
    if (atomic_load(&running))
        r = on ? api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) : api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    pthread_mutex_unlock(&start_lock);
    return r == CUPTI_SUCCESS ? 0 : -1;
}

void drk_cupti_stop(const char *why)
{
    if (!atomic_exchange(&running, 0))
        return;
    const char *expected = NULL;
    atomic_compare_exchange_strong(&stopped_why, &expected, why);
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        api.disable(kinds[i]);
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    unsigned long s = atomic_load(&starved);
    if (s)
        drk_log(DRK_LOG_INFO, "GPU times: CUPTI found no free buffer %lu times (records dropped)", s);
}

void drk_cupti_after_fork_child(void)
{
    if (atomic_exchange(&running, 0))
        atomic_store(&stopped_why, "a forked child: CUPTI does not follow a fork");
}

const char *drk_cupti_path(void) { return path[0] ? path : NULL; }
void *drk_cupti_handle(void) { return library; }
const char *drk_cupti_stopped(void) { return atomic_load(&stopped_why); }
int drk_cupti_running(void) { return atomic_load(&running); }
