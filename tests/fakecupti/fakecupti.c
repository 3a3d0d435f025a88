/* fakecupti, the stand-in libcupti.so.13: the Activity API entry points drk
 * uses, the record queue and its delivery through the client's buffer
 * callbacks, and the fakecupti_* test controls. fakecupti.h says what it
 * does and where it knowingly differs from CUPTI.
 *
 * Every definition is checked against the prototype of cupti.h. Exported
 * functions never call each other, so a call counts under exactly one name. */
#define _GNU_SOURCE
#include <cupti.h>

#include "tests/fakecupti/fakecupti.h"
#include "evolve/cupti_host.h"
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Exported names, call counts, failure                                     */
/* ------------------------------------------------------------------------ */

#define FP_API(X)                                                              \
    X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable)                   \
    X(cuptiActivityDisable) X(cuptiActivityFlushAll)                           \
    X(cuptiActivityGetNextRecord) X(cuptiActivityGetNumDroppedRecords)         \
    X(cuptiGetTimestamp) X(cuptiGetResultString) X(cuptiFinalize)              \
    X(cuptiGetVersion) X(cuptiSubscribe) X(cuptiUnsubscribe)                   \
    X(cuptiProfilerInitialize) X(cuptiProfilerDeInitialize)                    \
    X(cuptiDeviceGetChipName)                                                  \
    X(cuptiProfilerGetCounterAvailability) X(cuptiProfilerHostInitialize)      \
    X(cuptiProfilerHostDeinitialize) X(cuptiProfilerHostConfigAddMetrics)      \
    X(cuptiProfilerHostGetConfigImageSize) X(cuptiProfilerHostGetConfigImage)  \
    X(cuptiProfilerHostGetNumOfPasses) X(cuptiProfilerHostEvaluateToGpuValues) \
    X(cuptiRangeProfilerEnable) X(cuptiRangeProfilerDisable)                   \
    X(cuptiRangeProfilerGetCounterDataSize)                                    \
    X(cuptiRangeProfilerCounterDataImageInitialize)                            \
    X(cuptiRangeProfilerSetConfig) X(cuptiRangeProfilerStart)                  \
    X(cuptiRangeProfilerStop) X(cuptiRangeProfilerDecodeData)                  \
    X(cuptiRangeProfilerGetCounterDataInfo) X(cuptiGetStreamIdEx)             \
    X(cuptiGetContextId)

enum {
#define FP_ID_(name) FP_##name,
    FP_API(FP_ID_)
#undef FP_ID_
    FP_COUNT
};

static const char *const fp_names[FP_COUNT] = {
#define FP_NAME_(name) #name,
    FP_API(FP_NAME_)
#undef FP_NAME_
};

static _Atomic unsigned long long fp_calls[FP_COUNT];
static atomic_int fp_fail; /* a CUptiResult; CUPTI_SUCCESS: no failure */
static atomic_int fp_fail_one[FP_COUNT]; /* the same, for one entry point */

#define ENTER(name)                                                            \
    do {                                                                       \
        atomic_fetch_add_explicit(&fp_calls[FP_##name], 1, memory_order_relaxed); \
        CUptiResult f_ = (CUptiResult)atomic_load_explicit(&fp_fail, memory_order_relaxed); \
        if (f_ == CUPTI_SUCCESS)                                               \
            f_ = (CUptiResult)atomic_load_explicit(&fp_fail_one[FP_##name], memory_order_relaxed); \
        if (f_ != CUPTI_SUCCESS)                                               \
            return f_;                                                         \
    } while (0)

/* ------------------------------------------------------------------------ */
/* State                                                                    */
/* ------------------------------------------------------------------------ */

/* One record as queued; its kind says which member, and so its size. */
union rec {
    CUpti_Activity a;
    CUpti_ActivityKernel10 k;
    CUpti_ActivityMemcpy6 c;
    CUpti_ActivityMemset4 s;
};

/* Interned kernel names: records point into these, so a name outlives the
 * test's own string, as CUPTI's do. */
struct name {
    struct name *next;
    uint16_t regs;          /* what its kernel records carry (fakecupti_kernel_resources) */
    int32_t static_shared;
    char s[];
};

/* A handle to complete CUPTI's opaque subscriber type with. */
struct CUpti_Subscriber_st {
    int unused;
};

/* g_lock guards everything below. g_deliver makes deliveries one at a time
 * (taken before g_lock, and held while the callbacks run, g_lock not). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_deliver = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&g_lock)
#define UNLOCK() pthread_mutex_unlock(&g_lock)

static CUpti_BuffersCallbackRequestFunc g_request;
static CUpti_BuffersCallbackCompleteFunc g_complete;
static uint64_t g_registered_ns; /* fakecupti_registered_ns */
static unsigned char g_enabled[CUPTI_ACTIVITY_KIND_COUNT];
static struct CUpti_Subscriber_st g_subscriber;
static int g_subscribed;

/* Pending records: a FIFO of [g_head, g_count) in g_pend. */
static union rec *g_pend;
static size_t g_head, g_count, g_cap;

static struct name *g_names;
static uint32_t g_next_correlation = 1;
static int64_t g_next_grid = 1;
static size_t g_delivered, g_dropped, g_dropped_unread;

static _Atomic uint64_t g_time; /* 0: CLOCK_MONOTONIC */

/* Set while this thread runs a delivery (and so the client's callbacks): a
 * flush or queueing from a callback must not start a second delivery. */
static _Thread_local int t_delivering;

/* The size of a record of kind, or 0 for a kind the fake never makes. */
static size_t rec_size(CUpti_ActivityKind kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return sizeof(CUpti_ActivityMemset4);
    default:
        return 0;
    }
}

static int kind_valid(CUpti_ActivityKind kind)
{
    return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

/* Caller holds the lock. */
static void drop_pending(void)
{
    g_head = g_count = 0;
}

/* Caller holds the lock. NULL for a NULL name, or when out of memory (the
 * record then carries NULL, which a client must survive anyway). */
static const char *intern(const char *s)
{
    if (!s)
        return NULL;
    for (struct name *n = g_names; n; n = n->next)
        if (strcmp(n->s, s) == 0)
            return n->s;
    size_t len = strlen(s);
    struct name *n = malloc(sizeof *n + len + 1);
    if (!n)
        return NULL;
    memcpy(n->s, s, len + 1);
    n->regs = FAKECUPTI_REGISTERS_PER_THREAD;
    n->static_shared = 0;
    n->next = g_names;
    g_names = n;
    return n->s;
}

/* ------------------------------------------------------------------------ */
/* Delivery                                                                 */
/* ------------------------------------------------------------------------ */

/* Hands every pending record to the client, one buffer at a time, until
 * none is left or the callbacks are gone. Called without g_lock. */
static void deliver_all(void)
{
    if (t_delivering)
        return; /* from a callback: the delivery under way takes them */
    pthread_mutex_lock(&g_deliver);
    t_delivering = 1;
    for (;;) {
        LOCK();
        CUpti_BuffersCallbackRequestFunc request = g_request;
        CUpti_BuffersCallbackCompleteFunc complete = g_complete;
        int more = g_head < g_count && request && complete;
        UNLOCK();
        if (!more)
            break;

        uint8_t *buf = NULL;
        size_t size = 0, max_records = 0;
        request(&buf, &size, &max_records);

        size_t used = 0, n = 0;
        LOCK();
        /* Records are read through CUpti_Activity pointers: a misaligned
         * buffer would make every read undefined, so it holds none. */
        int usable = buf && (uintptr_t)buf % ACTIVITY_RECORD_ALIGNMENT == 0;
        while (usable && g_head < g_count && (max_records == 0 || n < max_records)) {
            const union rec *r = &g_pend[g_head];
            size_t rs = rec_size(r->a.kind);
            if (size - used < rs)
                break;
            memcpy(buf + used, r, rs);
            used += rs;
            n++;
            g_head++;
        }
        if (n == 0 && g_head < g_count) {
            /* Not one record fits: that record is lost, as with CUPTI. */
            g_head++;
            g_dropped++;
            g_dropped_unread++;
        }
        if (g_head == g_count)
            drop_pending();
        g_delivered += n;
        UNLOCK();
        /* A buffer with nothing in it goes back too: it is the client's
         * memory, and the complete callback is where it frees it. */
        if (buf)
            complete(NULL, 0, buf, size, used);
    }
    t_delivering = 0;
    pthread_mutex_unlock(&g_deliver);
}

/* Queues r; delivers everything if that leaves more than a buffer's worth
 * pending. */
static void queue(const union rec *r)
{
    int deliver = 0;
    LOCK();
    if (g_count - g_head >= FAKECUPTI_MAX_PENDING) {
        g_dropped++;
        g_dropped_unread++;
        UNLOCK();
        return;
    }
    if (g_count == g_cap) {
        if (g_head > 0) {
            /* Reuse the consumed front before growing. */
            memmove(g_pend, g_pend + g_head, (g_count - g_head) * sizeof *g_pend);
            g_count -= g_head;
            g_head = 0;
        } else {
            size_t cap = g_cap ? 2 * g_cap : 512;
            union rec *p = realloc(g_pend, cap * sizeof *p);
            if (!p) {
                g_dropped++;
                g_dropped_unread++;
                UNLOCK();
                return;
            }
            g_pend = p;
            g_cap = cap;
        }
    }
    g_pend[g_count++] = *r;
    deliver = g_count - g_head > FAKECUPTI_AUTO_DELIVER && g_request && g_complete;
    UNLOCK();
    if (deliver)
        deliver_all();
}

/* ------------------------------------------------------------------------ */
/* Activity API                                                             */
/* ------------------------------------------------------------------------ */

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    ENTER(cuptiActivityRegisterCallbacks);
    if (!funcBufferRequested || !funcBufferCompleted)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    g_request = funcBufferRequested;
    g_complete = funcBufferCompleted;
    if (!g_registered_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        g_registered_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    UNLOCK();
    return CUPTI_SUCCESS;
}

uint64_t fakecupti_registered_ns(void)
{
    LOCK();
    uint64_t t = g_registered_ns;
    UNLOCK();
    return t;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    ENTER(cuptiActivityEnable);
    if (!kind_valid(kind))
        return CUPTI_ERROR_INVALID_KIND;
    LOCK();
    g_enabled[kind] = 1;
    UNLOCK();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    ENTER(cuptiActivityDisable);
    if (!kind_valid(kind))
        return CUPTI_ERROR_INVALID_KIND;
    LOCK();
    g_enabled[kind] = 0;
    UNLOCK();
    return CUPTI_SUCCESS;
}

static atomic_int g_hold_unforced;

void fakecupti_hold_unforced(int on) { atomic_store(&g_hold_unforced, on); }

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    ENTER(cuptiActivityFlushAll);
    LOCK();
    int registered = g_request && g_complete;
    UNLOCK();
    if (!registered)
        return CUPTI_ERROR_INVALID_OPERATION;
    /* Every record is complete when queued: forced or not differs only in
     * whether a partly filled buffer is handed over. */
    if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) || !atomic_load(&g_hold_unforced))
        deliver_all();
    return CUPTI_SUCCESS;
}

/* Takes no lock: a complete callback walks its buffer with this. */
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity **record)
{
    ENTER(cuptiActivityGetNextRecord);
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = 0;
    if (*record) {
        uintptr_t at = (uintptr_t)*record, base = (uintptr_t)buffer;
        if (at < base || at - base >= validBufferSizeBytes)
            return CUPTI_ERROR_INVALID_PARAMETER;
        CUpti_ActivityKind kind;
        memcpy(&kind, *record, sizeof kind);
        size_t rs = rec_size(kind);
        if (rs == 0)
            return CUPTI_ERROR_INVALID_KIND;
        off = (size_t)(at - base) + rs;
    }
    if (off >= validBufferSizeBytes)
        return off == validBufferSizeBytes ? CUPTI_ERROR_MAX_LIMIT_REACHED : CUPTI_ERROR_INVALID_KIND;
    CUpti_ActivityKind kind;
    if (validBufferSizeBytes - off < sizeof kind)
        return CUPTI_ERROR_INVALID_KIND;
    /* memcpy: garbage may sit anywhere, aligned or not. */
    memcpy(&kind, buffer + off, sizeof kind);
    size_t rs = rec_size(kind);
    if (rs == 0 || validBufferSizeBytes - off < rs)
        return CUPTI_ERROR_INVALID_KIND;
    *record = (CUpti_Activity *)(void *)(buffer + off);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped)
{
    ENTER(cuptiActivityGetNumDroppedRecords);
    (void)context; /* one global queue, as CUPTI's buffers since CUDA 6 */
    (void)streamId;
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    *dropped = g_dropped_unread;
    g_dropped_unread = 0;
    UNLOCK();
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* The rest of CUPTI drk touches                                            */
/* ------------------------------------------------------------------------ */

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    ENTER(cuptiGetTimestamp);
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint64_t t = atomic_load(&g_time);
    if (t == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    *timestamp = t;
    return CUPTI_SUCCESS;
}

#define FP_RESULTS(X)                                                          \
    X(CUPTI_SUCCESS) X(CUPTI_ERROR_INVALID_PARAMETER) X(CUPTI_ERROR_INVALID_DEVICE) \
    X(CUPTI_ERROR_INVALID_CONTEXT) X(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID)      \
    X(CUPTI_ERROR_INVALID_EVENT_ID) X(CUPTI_ERROR_INVALID_EVENT_NAME)          \
    X(CUPTI_ERROR_INVALID_OPERATION) X(CUPTI_ERROR_OUT_OF_MEMORY)              \
    X(CUPTI_ERROR_HARDWARE) X(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT)       \
    X(CUPTI_ERROR_API_NOT_IMPLEMENTED) X(CUPTI_ERROR_MAX_LIMIT_REACHED)        \
    X(CUPTI_ERROR_NOT_READY) X(CUPTI_ERROR_NOT_COMPATIBLE)                     \
    X(CUPTI_ERROR_NOT_INITIALIZED) X(CUPTI_ERROR_INVALID_METRIC_ID)            \
    X(CUPTI_ERROR_INVALID_METRIC_NAME) X(CUPTI_ERROR_QUEUE_EMPTY)              \
    X(CUPTI_ERROR_INVALID_HANDLE) X(CUPTI_ERROR_INVALID_STREAM)                \
    X(CUPTI_ERROR_INVALID_KIND) X(CUPTI_ERROR_INVALID_EVENT_VALUE)             \
    X(CUPTI_ERROR_DISABLED) X(CUPTI_ERROR_INVALID_MODULE)                      \
    X(CUPTI_ERROR_INVALID_METRIC_VALUE) X(CUPTI_ERROR_HARDWARE_BUSY)           \
    X(CUPTI_ERROR_NOT_SUPPORTED) X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED)     \
    X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE)                        \
    X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES)               \
    X(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS)                         \
    X(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED)                                   \
    X(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED)                            \
    X(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE)                                \
    X(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)                                     \
    X(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED)                                \
    X(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE)                                   \
    X(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED)                               \
    X(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)                          \
    X(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)                  \
    X(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED)                        \
    X(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED) X(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED) \
    X(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED) X(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED) \
    X(CUPTI_ERROR_INVALID_CHIP_NAME) X(CUPTI_ERROR_UNKNOWN)

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    ENTER(cuptiGetResultString);
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
#define FP_RESULT_(r)                                                          \
    case r:                                                                    \
        *str = #r;                                                             \
        return CUPTI_SUCCESS;
        FP_RESULTS(FP_RESULT_)
#undef FP_RESULT_
    default:
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    ENTER(cuptiGetVersion);
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata)
{
    ENTER(cuptiSubscribe);
    (void)callback; /* no callback API here: it is never called */
    (void)userdata;
    if (!subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    CUptiResult r = CUPTI_SUCCESS;
    LOCK();
    if (g_subscribed)
        r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    else {
        g_subscribed = 1;
        *subscriber = &g_subscriber;
    }
    UNLOCK();
    return r;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    ENTER(cuptiUnsubscribe);
    CUptiResult r = CUPTI_SUCCESS;
    LOCK();
    if (!g_subscribed || subscriber != &g_subscriber)
        r = CUPTI_ERROR_INVALID_PARAMETER;
    else
        g_subscribed = 0;
    UNLOCK();
    return r;
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
    ENTER(cuptiFinalize);
    /* From a callback this thread already holds g_deliver, and the buffer
     * being read may point at the names: keep them then. */
    int in_callback = t_delivering;
    if (!in_callback)
        pthread_mutex_lock(&g_deliver);
    struct name *names = NULL;
    LOCK();
    g_request = NULL;
    g_complete = NULL;
    g_subscribed = 0;
    memset(g_enabled, 0, sizeof g_enabled);
    drop_pending();
    if (!in_callback) {
        names = g_names;
        g_names = NULL;
    }
    UNLOCK();
    if (!in_callback)
        pthread_mutex_unlock(&g_deliver);
    while (names) {
        struct name *next = names->next;
        free(names);
        names = next;
    }
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Test controls                                                            */
/* ------------------------------------------------------------------------ */

void fakecupti_kernel(const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                      unsigned bz, unsigned dynamic_shared, uint64_t start_ns, uint64_t end_ns, uint32_t stream)
{
    union rec r;
    memset(&r, 0, sizeof r);
    CUpti_ActivityKernel10 *k = &r.k;
    LOCK();
    if (g_enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    else if (g_enabled[CUPTI_ACTIVITY_KIND_KERNEL])
        k->kind = CUPTI_ACTIVITY_KIND_KERNEL;
    else {
        UNLOCK();
        return;
    }
    k->name = intern(name);
    k->correlationId = g_next_correlation++;
    k->gridId = g_next_grid++;
    const struct name *n = k->name ? (const struct name *)(k->name - offsetof(struct name, s)) : NULL;
    k->registersPerThread = n ? n->regs : FAKECUPTI_REGISTERS_PER_THREAD;
    k->staticSharedMemory = n ? n->static_shared : 0;
    UNLOCK();
    k->start = start_ns;
    k->end = end_ns;
    k->completed = end_ns;
    k->deviceId = 0;
    k->contextId = FAKECUPTI_CONTEXT_ID;
    k->streamId = stream;
    k->gridX = (int32_t)gx;
    k->gridY = (int32_t)gy;
    k->gridZ = (int32_t)gz;
    k->blockX = (int32_t)bx;
    k->blockY = (int32_t)by;
    k->blockZ = (int32_t)bz;
    k->dynamicSharedMemory = (int32_t)dynamic_shared;
    k->sharedMemoryExecuted = dynamic_shared;
    k->launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
    k->queued = CUPTI_TIMESTAMP_UNKNOWN;
    k->submitted = CUPTI_TIMESTAMP_UNKNOWN;
    queue(&r);
}

void fakecupti_kernel_resources(const char *name, unsigned regs, unsigned static_shared)
{
    LOCK();
    const char *s = intern(name);
    if (s) {
        struct name *n = (struct name *)(s - offsetof(struct name, s));
        n->regs = (uint16_t)regs;
        n->static_shared = (int32_t)static_shared;
    }
    UNLOCK();
}

/* Whether kind makes records now, and if so the record's correlation ID. */
static int take_correlation(CUpti_ActivityKind kind, uint32_t *correlation)
{
    LOCK();
    int on = g_enabled[kind];
    if (on)
        *correlation = g_next_correlation++;
    UNLOCK();
    return on;
}

void fakecupti_memcpy(uint64_t bytes, uint64_t start_ns, uint64_t end_ns, uint32_t stream)
{
    uint32_t correlation;
    if (!take_correlation(CUPTI_ACTIVITY_KIND_MEMCPY, &correlation))
        return;
    union rec r;
    memset(&r, 0, sizeof r);
    CUpti_ActivityMemcpy6 *c = &r.c;
    c->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    c->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    c->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    c->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    c->bytes = bytes;
    c->start = start_ns;
    c->end = end_ns;
    c->deviceId = 0;
    c->contextId = FAKECUPTI_CONTEXT_ID;
    c->streamId = stream;
    c->correlationId = correlation;
    c->copyCount = 1;
    queue(&r);
}

void fakecupti_memset(uint64_t bytes, uint64_t start_ns, uint64_t end_ns, uint32_t stream)
{
    uint32_t correlation;
    if (!take_correlation(CUPTI_ACTIVITY_KIND_MEMSET, &correlation))
        return;
    union rec r;
    memset(&r, 0, sizeof r);
    CUpti_ActivityMemset4 *s = &r.s;
    s->kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s->value = 0;
    s->bytes = bytes;
    s->start = start_ns;
    s->end = end_ns;
    s->deviceId = 0;
    s->contextId = FAKECUPTI_CONTEXT_ID;
    s->streamId = stream;
    s->correlationId = correlation;
    s->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    queue(&r);
}

static _Atomic uint32_t g_stream_id; /* what cuptiGetStreamIdEx answers; 0: not supported */

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t *contextId)
{
    ENTER(cuptiGetContextId);
    if (!context || !contextId)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *contextId = FAKECUPTI_CONTEXT_ID;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream,
                                        uint32_t *streamId)
{
    ENTER(cuptiGetStreamIdEx);
    (void)stream, (void)perThreadStream;
    if (!context || !streamId)
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint32_t id = atomic_load(&g_stream_id);
    if (!id)
        return CUPTI_ERROR_NOT_SUPPORTED;
    *streamId = id;
    return CUPTI_SUCCESS;
}

void fakecupti_set_stream_id(uint32_t id)
{
    atomic_store(&g_stream_id, id);
}

void fakecupti_set_time(uint64_t ns)
{
    atomic_store(&g_time, ns);
}

void fakecupti_fail_all(CUptiResult r)
{
    atomic_store(&fp_fail, (int)r);
}

void fakecupti_fail_one(const char *entry, CUptiResult r)
{
    for (int i = 0; entry && i < FP_COUNT; i++)
        if (strcmp(fp_names[i], entry) == 0)
            atomic_store(&fp_fail_one[i], (int)r);
}

unsigned long long fakecupti_calls(const char *entry)
{
    if (!entry)
        return 0;
    for (int i = 0; i < FP_COUNT; i++)
        if (strcmp(fp_names[i], entry) == 0)
            return atomic_load(&fp_calls[i]);
    return 0;
}

size_t fakecupti_delivered(void)
{
    LOCK();
    size_t n = g_delivered;
    UNLOCK();
    return n;
}

size_t fakecupti_dropped(void)
{
    LOCK();
    size_t n = g_dropped;
    UNLOCK();
    return n;
}

size_t fakecupti_pending(void)
{
    LOCK();
    size_t n = g_count - g_head;
    UNLOCK();
    return n;
}

int fakecupti_enabled(CUpti_ActivityKind kind)
{
    if (!kind_valid(kind))
        return 0;
    LOCK();
    int on = g_enabled[kind];
    UNLOCK();
    return on;
}

/* ------------------------------------------------------------------------ */
/* Range profiler and profiler host                                         */
/* ------------------------------------------------------------------------ */

/* The metrics the fake knows, and the value each evaluates to. */
static const char *const p_metric_names[] = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",     "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",     "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "gpu__time_duration.sum",
};
#define P_METRICS (sizeof p_metric_names / sizeof *p_metric_names)
#define P_AVAIL_BYTES 64
#define P_MAGIC_CONFIG 0x46434647u /* "GFCF" */
#define P_MAGIC_DATA 0x46444154u   /* "TADF" */

static double p_values[P_METRICS] = {42.5, 61.25, 400, 100, 128, 32, 5000};
static size_t p_ranges = 1;
static unsigned p_stop_ms; /* real time a Stop takes */

struct drk_cupti_host_object {
    int metric[P_METRICS];
    size_t nmetrics;
};
struct CUpti_RangeProfiler_Object {
    CUcontext ctx;
    int configured, started, stopped;
    uint8_t *data;
    size_t data_size;
};
static struct drk_cupti_host_object p_host;
static int p_host_live, p_initialized;
static struct CUpti_RangeProfiler_Object p_profiler;
static int p_profiler_live;
static unsigned long long p_windows; /* Start..Stop windows */

/* The data image: magic, ranges, metrics, then each range's values. */
struct p_data {
    uint32_t magic, ranges, nmetrics, pad;
    int metric[P_METRICS];
    double v[];
};

static int p_metric_of(const char *name)
{
    for (size_t i = 0; name && i < P_METRICS; i++)
        if (strcmp(name, p_metric_names[i]) == 0)
            return (int)i;
    return -1;
}

CUptiResult CUPTIAPI cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *p)
{
    ENTER(cuptiProfilerInitialize);
    if (!p || p->structSize < CUpti_Profiler_Initialize_Params_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    p_initialized = 1;
    UNLOCK();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params *p)
{
    ENTER(cuptiProfilerDeInitialize);
    if (!p || p->structSize < CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    int was = p_initialized, busy = p_profiler_live || p_host_live;
    if (was && !busy)
        p_initialized = 0;
    UNLOCK();
    /* Objects still live: the real one would leave them dangling; refuse. */
    return !was ? CUPTI_ERROR_NOT_INITIALIZED : busy ? CUPTI_ERROR_INVALID_OPERATION : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *p)
{
    ENTER(cuptiDeviceGetChipName);
    if (!p || p->structSize < CUpti_Device_GetChipName_Params_STRUCT_SIZE || p->deviceIndex != 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    p->pChipName = FAKECUPTI_CHIP;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerGetCounterAvailability(CUpti_Profiler_GetCounterAvailability_Params *p)
{
    ENTER(cuptiProfilerGetCounterAvailability);
    if (!p || p->structSize < CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!p->pCounterAvailabilityImage) {
        p->counterAvailabilityImageSize = P_AVAIL_BYTES;
        return CUPTI_SUCCESS;
    }
    if (p->counterAvailabilityImageSize < P_AVAIL_BYTES)
        return CUPTI_ERROR_INVALID_PARAMETER;
    memset(p->pCounterAvailabilityImage, 0xa5, P_AVAIL_BYTES);
    p->counterAvailabilityImageSize = P_AVAIL_BYTES;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostInitialize(drk_cupti_host_init *p)
{
    ENTER(cuptiProfilerHostInitialize);
    if (!p || p->structSize < DRK_CUPTI_SIZE(drk_cupti_host_init, pHostObject) ||
        p->profilerType != DRK_CUPTI_RANGE_PROFILER || !p->pChipName || strcmp(p->pChipName, FAKECUPTI_CHIP) != 0 ||
        !p->pCounterAvailabilityImage || p->pCounterAvailabilityImage[P_AVAIL_BYTES - 1] != 0xa5)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    int busy = p_host_live;
    if (!busy) {
        memset(&p_host, 0, sizeof p_host);
        p_host_live = 1;
        p->pHostObject = &p_host;
    }
    UNLOCK();
    return busy ? CUPTI_ERROR_INVALID_OPERATION : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostDeinitialize(drk_cupti_host_deinit *p)
{
    ENTER(cuptiProfilerHostDeinitialize);
    if (!p || p->pHostObject != &p_host)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    p_host_live = 0;
    UNLOCK();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostConfigAddMetrics(drk_cupti_host_add_metrics *p)
{
    ENTER(cuptiProfilerHostConfigAddMetrics);
    if (!p || p->pHostObject != &p_host || !p->ppMetricNames || !p->numMetrics ||
        p_host.nmetrics + p->numMetrics > P_METRICS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < p->numMetrics; i++)
        if (p_metric_of(p->ppMetricNames[i]) < 0)
            return CUPTI_ERROR_INVALID_METRIC_NAME;
    LOCK();
    for (size_t i = 0; i < p->numMetrics; i++)
        p_host.metric[p_host.nmetrics++] = p_metric_of(p->ppMetricNames[i]);
    UNLOCK();
    return CUPTI_SUCCESS;
}

static size_t p_config_bytes(void) { return 8 + p_host.nmetrics * sizeof(int); }

CUptiResult CUPTIAPI cuptiProfilerHostGetConfigImageSize(drk_cupti_host_config_size *p)
{
    ENTER(cuptiProfilerHostGetConfigImageSize);
    if (!p || p->pHostObject != &p_host || !p_host.nmetrics)
        return CUPTI_ERROR_INVALID_PARAMETER;
    p->configImageSize = p_config_bytes();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostGetConfigImage(drk_cupti_host_config *p)
{
    ENTER(cuptiProfilerHostGetConfigImage);
    if (!p || p->pHostObject != &p_host || !p->pConfigImage || p->configImageSize < p_config_bytes())
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint32_t head[2] = {P_MAGIC_CONFIG, (uint32_t)p_host.nmetrics};
    memcpy(p->pConfigImage, head, 8);
    memcpy(p->pConfigImage + 8, p_host.metric, p_host.nmetrics * sizeof(int));
    return CUPTI_SUCCESS;
}

static int p_config_ok(const uint8_t *img, size_t n)
{
    uint32_t head[2];
    if (!img || n < 8)
        return 0;
    memcpy(head, img, 8);
    return head[0] == P_MAGIC_CONFIG && head[1] >= 1 && head[1] <= P_METRICS && n >= 8 + head[1] * sizeof(int);
}

CUptiResult CUPTIAPI cuptiProfilerHostGetNumOfPasses(drk_cupti_host_passes *p)
{
    ENTER(cuptiProfilerHostGetNumOfPasses);
    if (!p || !p_config_ok(p->pConfigImage, p->configImageSize))
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint32_t n;
    memcpy(&n, p->pConfigImage + 4, 4);
    p->numOfPasses = n; /* one a metric, as the H200 gave 8 for 8 */
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerEnable(CUpti_RangeProfiler_Enable_Params *p)
{
    ENTER(cuptiRangeProfilerEnable);
    if (!p || p->structSize < CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE || !p->ctx)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    int busy = p_profiler_live || !p_initialized;
    if (!busy) {
        memset(&p_profiler, 0, sizeof p_profiler);
        p_profiler.ctx = p->ctx;
        p_profiler_live = 1;
        p->pRangeProfilerObject = &p_profiler;
    }
    UNLOCK();
    return busy ? CUPTI_ERROR_INVALID_OPERATION : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerDisable(CUpti_RangeProfiler_Disable_Params *p)
{
    ENTER(cuptiRangeProfilerDisable);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p_profiler_live)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    p_profiler_live = 0;
    UNLOCK();
    return CUPTI_SUCCESS;
}

static size_t p_data_bytes(size_t ranges, size_t nmetrics)
{
    return sizeof(struct p_data) + ranges * nmetrics * sizeof(double);
}

CUptiResult CUPTIAPI cuptiRangeProfilerGetCounterDataSize(CUpti_RangeProfiler_GetCounterDataSize_Params *p)
{
    ENTER(cuptiRangeProfilerGetCounterDataSize);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p->pMetricNames || !p->numMetrics ||
        p->numMetrics > P_METRICS || !p->maxNumOfRanges || p->maxNumRangeTreeNodes < p->maxNumOfRanges)
        return CUPTI_ERROR_INVALID_PARAMETER;
    p->counterDataSize = p_data_bytes(p->maxNumOfRanges, p->numMetrics);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerCounterDataImageInitialize(
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params *p)
{
    ENTER(cuptiRangeProfilerCounterDataImageInitialize);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p->pCounterData || p->counterDataSize < sizeof(struct p_data))
        return CUPTI_ERROR_INVALID_PARAMETER;
    struct p_data head = {P_MAGIC_DATA, 0, 0, 0, {0}};
    memcpy(p->pCounterData, &head, sizeof head);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerSetConfig(CUpti_RangeProfiler_SetConfig_Params *p)
{
    ENTER(cuptiRangeProfilerSetConfig);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p_config_ok(p->pConfig, p->configSize) ||
        !p->pCounterDataImage || p->counterDataImageSize < sizeof(struct p_data) ||
        ((struct p_data *)p->pCounterDataImage)->magic != P_MAGIC_DATA || p->range != CUPTI_AutoRange ||
        p->numNestingLevels != 1 || p_profiler.started)
        return CUPTI_ERROR_INVALID_PARAMETER;
    LOCK();
    p_profiler.configured = 1;
    p_profiler.stopped = 0;
    p_profiler.data = p->pCounterDataImage;
    p_profiler.data_size = p->counterDataImageSize;
    UNLOCK();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerStart(CUpti_RangeProfiler_Start_Params *p)
{
    ENTER(cuptiRangeProfilerStart);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p_profiler.configured || p_profiler.started)
        return CUPTI_ERROR_INVALID_OPERATION;
    LOCK();
    p_profiler.started = 1;
    p_windows++;
    UNLOCK();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerStop(CUpti_RangeProfiler_Stop_Params *p)
{
    ENTER(cuptiRangeProfilerStop);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p_profiler.started)
        return CUPTI_ERROR_INVALID_OPERATION;
    LOCK();
    p_profiler.started = 0;
    p_profiler.stopped = 1;
    unsigned ms = p_stop_ms;
    UNLOCK();
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (ms && nanosleep(&ts, &ts) != 0) {
    }
    p->isAllPassSubmitted = 1;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiRangeProfilerDecodeData(CUpti_RangeProfiler_DecodeData_Params *p)
{
    ENTER(cuptiRangeProfilerDecodeData);
    if (!p || p->pRangeProfilerObject != &p_profiler || !p_profiler.stopped)
        return CUPTI_ERROR_INVALID_OPERATION;
    LOCK();
    struct p_data *d = (struct p_data *)p_profiler.data;
    size_t ranges = p_ranges, fits = p_profiler.data_size >= p_data_bytes(ranges, p_host.nmetrics);
    if (fits) {
        d->ranges = (uint32_t)ranges;
        d->nmetrics = (uint32_t)p_host.nmetrics;
        memcpy(d->metric, p_host.metric, sizeof d->metric);
        for (size_t r = 0; r < ranges; r++)
            for (size_t m = 0; m < p_host.nmetrics; m++)
                d->v[r * p_host.nmetrics + m] = p_values[p_host.metric[m]];
    }
    p_profiler.stopped = 0;
    UNLOCK();
    p->numOfRangeDropped = fits ? 0 : ranges;
    return CUPTI_SUCCESS;
}

static const struct p_data *p_data_ok(const uint8_t *img, size_t n)
{
    const struct p_data *d = (const struct p_data *)img;
    if (!img || n < sizeof *d || d->magic != P_MAGIC_DATA || n < p_data_bytes(d->ranges, d->nmetrics))
        return NULL;
    return d;
}

CUptiResult CUPTIAPI cuptiRangeProfilerGetCounterDataInfo(CUpti_RangeProfiler_GetCounterDataInfo_Params *p)
{
    ENTER(cuptiRangeProfilerGetCounterDataInfo);
    const struct p_data *d = p ? p_data_ok(p->pCounterDataImage, p->counterDataImageSize) : NULL;
    if (!d)
        return CUPTI_ERROR_INVALID_PARAMETER;
    p->numTotalRanges = d->ranges;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiProfilerHostEvaluateToGpuValues(drk_cupti_host_evaluate *p)
{
    ENTER(cuptiProfilerHostEvaluateToGpuValues);
    const struct p_data *d = p ? p_data_ok(p->pCounterDataImage, p->counterDataImageSize) : NULL;
    if (!d || p->pHostObject != &p_host || p->rangeIndex >= d->ranges || !p->ppMetricNames || !p->pMetricValues)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < p->numMetrics; i++) {
        int m = p_metric_of(p->ppMetricNames[i]), col = -1;
        for (uint32_t k = 0; k < d->nmetrics; k++)
            if (d->metric[k] == m)
                col = (int)k;
        if (col < 0)
            return CUPTI_ERROR_INVALID_METRIC_NAME;
        p->pMetricValues[i] = d->v[p->rangeIndex * d->nmetrics + (size_t)col];
    }
    return CUPTI_SUCCESS;
}

void fakecupti_set_metric(const char *name, double value)
{
    int m = p_metric_of(name);
    LOCK();
    if (m >= 0)
        p_values[m] = value;
    UNLOCK();
}

void fakecupti_set_stop_delay(unsigned ms)
{
    LOCK();
    p_stop_ms = ms;
    UNLOCK();
}

void fakecupti_set_ranges(size_t n)
{
    LOCK();
    p_ranges = n;
    UNLOCK();
}

unsigned long long fakecupti_profiler_windows(void)
{
    LOCK();
    unsigned long long n = p_windows;
    UNLOCK();
    return n;
}
