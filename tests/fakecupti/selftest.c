/* The stand-in CUPTI's own test: links libcupti.so.13 (the fake) directly,
 * no drk, and checks what drk's tests will rely on: the exported names,
 * every field of the records it makes, walking buffers with
 * cuptiActivityGetNextRecord, enabled and disabled kinds, dropped records,
 * buffer limits, auto-delivery past 256 pending, callbacks that call back
 * in, failure of every call, subscribers, finalize, and many threads at
 * once. Prints one line per failed check and a count; exits 1 if any. */
#define _GNU_SOURCE
#include <cupti.h>

#include "tests/fakecupti/fakecupti.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int passed, failed;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond)                                                              \
            passed++;                                                          \
        else {                                                                 \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failed++;                                                          \
        }                                                                      \
    } while (0)

#define EXPECT(call, want)                                                     \
    do {                                                                       \
        CUptiResult got_ = (call);                                             \
        CHECK(got_ == (want), "returned %d, expected %s (%d)", (int)got_, #want, (int)(want)); \
    } while (0)

#define OK(call) EXPECT(call, CUPTI_SUCCESS)

/* ------------------------------------------------------------------------ */
/* The client: buffer callbacks and what they collected                     */
/* ------------------------------------------------------------------------ */

/* What the request callback hands out. */
enum mode {
    BUF_NORMAL,     /* g_buf_size bytes, g_max_records */
    BUF_NULL,       /* no buffer */
    BUF_SMALL,      /* 16 bytes: too small for any record */
    BUF_MISALIGNED, /* large, but 4 bytes off 8-byte alignment */
};

static enum mode g_mode = BUF_NORMAL;
static size_t g_buf_size = 1 << 20, g_max_records;
/* Set: the complete callback calls back in (flush, queue one more kernel). */
static int g_reenter;

/* A record as delivered, with its name copied: the pointer need only be
 * valid until the complete callback returns. */
struct got {
    union {
        CUpti_Activity a;
        CUpti_ActivityKernel10 k;
        CUpti_ActivityMemcpy6 c;
        CUpti_ActivityMemset4 s;
    } r;
    char name[64];
    int has_name;
};

static pthread_mutex_t g_cb_lock = PTHREAD_MUTEX_INITIALIZER;
static struct got *g_got;
static size_t g_ngot, g_capgot;
static size_t g_requests, g_completes, g_empty_completes, g_walk_errors;
static size_t g_misaligned_base; /* offset of the misaligned buffer in its allocation */
static pthread_t g_cb_thread;

static void CUPTIAPI on_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    pthread_mutex_lock(&g_cb_lock);
    g_requests++;
    g_cb_thread = pthread_self();
    enum mode mode = g_mode;
    size_t want = g_buf_size, max = g_max_records;
    pthread_mutex_unlock(&g_cb_lock);
    *max_records = 0;
    switch (mode) {
    case BUF_NORMAL:
        *buffer = aligned_alloc(8, (want + 7) & ~(size_t)7);
        *size = want;
        *max_records = max;
        break;
    case BUF_NULL:
        *buffer = NULL;
        *size = 0;
        break;
    case BUF_SMALL:
        *buffer = malloc(16);
        *size = 16;
        break;
    case BUF_MISALIGNED: {
        uint8_t *p = malloc(4096 + 4);
        *buffer = p ? p + 4 : NULL;
        *size = 4096;
        g_misaligned_base = 4;
        break;
    }
    }
}

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    CUpti_Activity *rec = NULL;
    size_t n = 0;
    CUptiResult r;
    int bad_args = ctx != NULL || stream != 0 || valid > size;
    while ((r = cuptiActivityGetNextRecord(buffer, valid, &rec)) == CUPTI_SUCCESS) {
        struct got g;
        memset(&g, 0, sizeof g);
        size_t rs = rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY   ? sizeof(CUpti_ActivityMemcpy6)
                    : rec->kind == CUPTI_ACTIVITY_KIND_MEMSET ? sizeof(CUpti_ActivityMemset4)
                                                              : sizeof(CUpti_ActivityKernel10);
        memcpy(&g.r, rec, rs);
        if ((rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) &&
            g.r.k.name) {
            snprintf(g.name, sizeof g.name, "%s", g.r.k.name);
            g.has_name = 1;
        }
        pthread_mutex_lock(&g_cb_lock);
        if (g_ngot == g_capgot) {
            g_capgot = g_capgot ? 2 * g_capgot : 1024;
            g_got = realloc(g_got, g_capgot * sizeof *g_got);
            if (!g_got) {
                fprintf(stderr, "out of memory\n");
                exit(1);
            }
        }
        g_got[g_ngot++] = g;
        pthread_mutex_unlock(&g_cb_lock);
        n++;
    }
    int reenter;
    pthread_mutex_lock(&g_cb_lock);
    g_completes++;
    if (valid == 0)
        g_empty_completes++;
    if (r != CUPTI_ERROR_MAX_LIMIT_REACHED || bad_args)
        g_walk_errors++;
    reenter = g_reenter;
    g_reenter = 0;
    size_t off = (uintptr_t)buffer % 8 ? g_misaligned_base : 0;
    pthread_mutex_unlock(&g_cb_lock);
    if (reenter) {
        /* Must neither deadlock nor deliver from here; the flush under way
         * takes the kernel. */
        size_t before = fakecupti_delivered();
        fakecupti_kernel("from_callback", 1, 1, 1, 1, 1, 1, 0, 7, 8, 9);
        OK(cuptiActivityFlushAll(0));
        CHECK(fakecupti_delivered() == before, "nothing delivered from inside a callback");
    }
    free(buffer - off);
    (void)n;
}

static void reset_got(void)
{
    pthread_mutex_lock(&g_cb_lock);
    g_ngot = 0;
    g_requests = g_completes = g_empty_completes = g_walk_errors = 0;
    pthread_mutex_unlock(&g_cb_lock);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */

static const char *const entry_names[] = {
    "cuptiActivityRegisterCallbacks", "cuptiActivityEnable", "cuptiActivityDisable",
    "cuptiActivityFlushAll", "cuptiActivityGetNextRecord", "cuptiActivityGetNumDroppedRecords",
    "cuptiGetTimestamp", "cuptiGetResultString", "cuptiFinalize", "cuptiGetVersion",
    "cuptiSubscribe", "cuptiUnsubscribe",
};
#define NENTRIES (sizeof entry_names / sizeof *entry_names)

static void test_exports(void)
{
    void *lib = dlopen(FAKECUPTI_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL, "the linked fake is %s: %s", FAKECUPTI_LIBRARY, dlerror());
    if (!lib)
        return;
    const struct {
        const char *name;
        void *fn;
    } own[] = {
        {"cuptiActivityRegisterCallbacks", (void *)cuptiActivityRegisterCallbacks},
        {"cuptiActivityEnable", (void *)cuptiActivityEnable},
        {"cuptiActivityDisable", (void *)cuptiActivityDisable},
        {"cuptiActivityFlushAll", (void *)cuptiActivityFlushAll},
        {"cuptiActivityGetNextRecord", (void *)cuptiActivityGetNextRecord},
        {"cuptiActivityGetNumDroppedRecords", (void *)cuptiActivityGetNumDroppedRecords},
        {"cuptiGetTimestamp", (void *)cuptiGetTimestamp},
        {"cuptiGetResultString", (void *)cuptiGetResultString},
        {"cuptiFinalize", (void *)cuptiFinalize},
        {"cuptiGetVersion", (void *)cuptiGetVersion},
        {"cuptiSubscribe", (void *)cuptiSubscribe},
        {"cuptiUnsubscribe", (void *)cuptiUnsubscribe},
        {"fakecupti_kernel", (void *)fakecupti_kernel},
        {"fakecupti_memcpy", (void *)fakecupti_memcpy},
        {"fakecupti_memset", (void *)fakecupti_memset},
        {"fakecupti_set_time", (void *)fakecupti_set_time},
        {"fakecupti_fail_all", (void *)fakecupti_fail_all},
        {"fakecupti_calls", (void *)fakecupti_calls},
        {"fakecupti_delivered", (void *)fakecupti_delivered},
        {"fakecupti_dropped", (void *)fakecupti_dropped},
        {"fakecupti_pending", (void *)fakecupti_pending},
        {"fakecupti_enabled", (void *)fakecupti_enabled},
    };
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        CHECK(dlsym(lib, own[i].name) == own[i].fn, "%s exported", own[i].name);
    CHECK(dlsym(lib, "cuptiActivityFlush") == NULL, "only the listed names");
    CHECK(dlsym(lib, "queue") == NULL && dlsym(lib, "deliver_all") == NULL, "no internals exported");
    dlclose(lib);
}

static void test_basics(void)
{
    uint32_t v = 0;
    OK(cuptiGetVersion(&v));
    CHECK(v == CUPTI_API_VERSION, "version %u", v);
    EXPECT(cuptiGetVersion(NULL), CUPTI_ERROR_INVALID_PARAMETER);

    const char *s = NULL;
    OK(cuptiGetResultString(CUPTI_SUCCESS, &s));
    CHECK(s && strcmp(s, "CUPTI_SUCCESS") == 0, "%s", s ? s : "(null)");
    OK(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &s));
    CHECK(s && strcmp(s, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED") == 0, "%s", s ? s : "(null)");
    OK(cuptiGetResultString(CUPTI_ERROR_UNKNOWN, &s));
    CHECK(s && strcmp(s, "CUPTI_ERROR_UNKNOWN") == 0, "%s", s ? s : "(null)");
    EXPECT(cuptiGetResultString((CUptiResult)12345, &s), CUPTI_ERROR_INVALID_PARAMETER);
    EXPECT(cuptiGetResultString(CUPTI_SUCCESS, NULL), CUPTI_ERROR_INVALID_PARAMETER);

    uint64_t a = 0, b = 0, t0 = now_ns();
    OK(cuptiGetTimestamp(&a));
    OK(cuptiGetTimestamp(&b));
    uint64_t t1 = now_ns();
    CHECK(t0 <= a && a <= b && b <= t1, "monotonic clock: %llu %llu %llu %llu", (unsigned long long)t0,
          (unsigned long long)a, (unsigned long long)b, (unsigned long long)t1);
    fakecupti_set_time(123456789);
    OK(cuptiGetTimestamp(&a));
    CHECK(a == 123456789, "set time: %llu", (unsigned long long)a);
    fakecupti_set_time(0);
    OK(cuptiGetTimestamp(&a));
    CHECK(a >= t1, "back to the monotonic clock: %llu", (unsigned long long)a);
    EXPECT(cuptiGetTimestamp(NULL), CUPTI_ERROR_INVALID_PARAMETER);

    CHECK(fakecupti_calls("cuptiGetVersion") == 2, "%llu", fakecupti_calls("cuptiGetVersion"));
    CHECK(fakecupti_calls("cuptiNoSuchThing") == 0 && fakecupti_calls(NULL) == 0, "unknown names count 0");

    EXPECT(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_INVALID), CUPTI_ERROR_INVALID_KIND);
    EXPECT(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_COUNT), CUPTI_ERROR_INVALID_KIND);
    EXPECT(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_COUNT), CUPTI_ERROR_INVALID_KIND);
    EXPECT(cuptiActivityRegisterCallbacks(NULL, on_complete), CUPTI_ERROR_INVALID_PARAMETER);
    EXPECT(cuptiActivityRegisterCallbacks(on_request, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    EXPECT(cuptiActivityGetNumDroppedRecords(NULL, 0, NULL), CUPTI_ERROR_INVALID_PARAMETER);
}

static void test_subscribe(void)
{
    CUpti_SubscriberHandle first = NULL, second = NULL;
    OK(cuptiSubscribe(&first, NULL, NULL));
    CHECK(first != NULL, "a handle");
    EXPECT(cuptiSubscribe(&second, NULL, NULL), CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(second == NULL, "no handle for the second");
    EXPECT(cuptiSubscribe(NULL, NULL, NULL), CUPTI_ERROR_INVALID_PARAMETER);
    EXPECT(cuptiUnsubscribe(NULL), CUPTI_ERROR_INVALID_PARAMETER);
    OK(cuptiUnsubscribe(first));
    EXPECT(cuptiUnsubscribe(first), CUPTI_ERROR_INVALID_PARAMETER);
    OK(cuptiSubscribe(&second, NULL, NULL));
    OK(cuptiUnsubscribe(second));
}

/* Without callbacks nothing can be delivered: flush refuses, records wait. */
static void test_unregistered(void)
{
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    EXPECT(cuptiActivityFlushAll(0), CUPTI_ERROR_INVALID_OPERATION);
    fakecupti_memset(1, 2, 3, 4);
    CHECK(fakecupti_pending() == 1, "%zu pending", fakecupti_pending());
    OK(cuptiFinalize());
    CHECK(fakecupti_pending() == 0 && !fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMSET), "finalize clears");
}

static void check_kernel(const struct got *g, CUpti_ActivityKind kind, const char *name, unsigned gx, unsigned gy,
                         unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned dyn, uint64_t start,
                         uint64_t end, uint32_t stream)
{
    const CUpti_ActivityKernel10 *k = &g->r.k;
    CHECK(k->kind == kind, "kind %d", (int)k->kind);
    CHECK(g->has_name && strcmp(g->name, name) == 0, "name %s", g->has_name ? g->name : "(null)");
    CHECK(k->gridX == (int32_t)gx && k->gridY == (int32_t)gy && k->gridZ == (int32_t)gz, "grid %d %d %d",
          k->gridX, k->gridY, k->gridZ);
    CHECK(k->blockX == (int32_t)bx && k->blockY == (int32_t)by && k->blockZ == (int32_t)bz, "block %d %d %d",
          k->blockX, k->blockY, k->blockZ);
    CHECK(k->dynamicSharedMemory == (int32_t)dyn && k->sharedMemoryExecuted == dyn, "dynamic shared %d",
          k->dynamicSharedMemory);
    CHECK(k->staticSharedMemory == 0, "static shared %d", k->staticSharedMemory);
    CHECK(k->registersPerThread == FAKECUPTI_REGISTERS_PER_THREAD, "registers %u", k->registersPerThread);
    CHECK(k->start == start && k->end == end && k->completed == end, "times %llu %llu %llu",
          (unsigned long long)k->start, (unsigned long long)k->end, (unsigned long long)k->completed);
    CHECK(k->deviceId == 0 && k->contextId == FAKECUPTI_CONTEXT_ID && k->streamId == stream,
          "device %u context %u stream %u", k->deviceId, k->contextId, k->streamId);
    CHECK(k->correlationId != 0 && k->gridId != 0, "correlation %u grid %lld", k->correlationId,
          (long long)k->gridId);
    CHECK(k->launchType == CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR && k->queued == CUPTI_TIMESTAMP_UNKNOWN &&
              k->submitted == CUPTI_TIMESTAMP_UNKNOWN,
          "launch type %u", k->launchType);
}

static void test_records(void)
{
    reset_got();
    OK(cuptiActivityRegisterCallbacks(on_request, on_complete));
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CHECK(fakecupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) && fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMCPY) &&
              fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMSET),
          "enabled");
    CHECK(!fakecupti_enabled(CUPTI_ACTIVITY_KIND_KERNEL) && !fakecupti_enabled(CUPTI_ACTIVITY_KIND_COUNT),
          "others not");

    size_t delivered0 = fakecupti_delivered(), dropped0 = fakecupti_dropped();
    /* The test's own name buffer, overwritten after queueing: the record
     * must keep the name as it was. */
    char name[32];
    snprintf(name, sizeof name, "vec_add");
    fakecupti_kernel(name, 4, 2, 1, 256, 1, 1, 1024, 1000, 2000, 7);
    snprintf(name, sizeof name, "clobbered");
    fakecupti_memcpy(4096, 2100, 2500, 7);
    fakecupti_memset(8192, 2600, 2700, 13);
    fakecupti_kernel("scale", 1, 1, 1, 32, 4, 2, 0, 3000, 3500, 13);
    fakecupti_kernel("vec_add", 8, 1, 1, 128, 1, 1, 0, 4000, 4100, 7);
    fakecupti_memcpy(1ull << 33, 5000, 9000, 0);
    CHECK(fakecupti_pending() == 6, "%zu pending", fakecupti_pending());
    CHECK(fakecupti_delivered() == delivered0, "nothing before the flush");
    OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    CHECK(fakecupti_pending() == 0, "%zu pending", fakecupti_pending());
    CHECK(fakecupti_delivered() == delivered0 + 6, "%zu delivered", fakecupti_delivered() - delivered0);
    CHECK(fakecupti_dropped() == dropped0, "none dropped");
    CHECK(g_ngot == 6 && g_requests == 1 && g_completes == 1 && g_walk_errors == 0,
          "%zu records in %zu/%zu buffers, %zu walk errors", g_ngot, g_requests, g_completes, g_walk_errors);
    CHECK(pthread_equal(g_cb_thread, pthread_self()), "callbacks on the flushing thread");
    if (g_ngot != 6)
        return;

    check_kernel(&g_got[0], CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "vec_add", 4, 2, 1, 256, 1, 1, 1024, 1000, 2000, 7);
    const CUpti_ActivityMemcpy6 *c = &g_got[1].r.c;
    CHECK(c->kind == CUPTI_ACTIVITY_KIND_MEMCPY && c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD &&
              c->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED && c->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
          "memcpy kind %d copy kind %u", (int)c->kind, c->copyKind);
    CHECK(c->bytes == 4096 && c->start == 2100 && c->end == 2500 && c->streamId == 7 && c->deviceId == 0 &&
              c->contextId == FAKECUPTI_CONTEXT_ID && c->copyCount == 1 && c->correlationId != 0,
          "memcpy %llu bytes %llu..%llu stream %u", (unsigned long long)c->bytes, (unsigned long long)c->start,
          (unsigned long long)c->end, c->streamId);
    const CUpti_ActivityMemset4 *s = &g_got[2].r.s;
    CHECK(s->kind == CUPTI_ACTIVITY_KIND_MEMSET && s->value == 0 && s->bytes == 8192 && s->start == 2600 &&
              s->end == 2700 && s->streamId == 13 && s->deviceId == 0 && s->contextId == FAKECUPTI_CONTEXT_ID &&
              s->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && s->correlationId != 0,
          "memset %llu bytes %llu..%llu stream %u", (unsigned long long)s->bytes, (unsigned long long)s->start,
          (unsigned long long)s->end, s->streamId);
    check_kernel(&g_got[3], CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "scale", 1, 1, 1, 32, 4, 2, 0, 3000, 3500, 13);
    check_kernel(&g_got[4], CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "vec_add", 8, 1, 1, 128, 1, 1, 0, 4000, 4100, 7);
    c = &g_got[5].r.c;
    CHECK(c->kind == CUPTI_ACTIVITY_KIND_MEMCPY && c->bytes == 1ull << 33 && c->start == 5000 && c->end == 9000 &&
              c->streamId == 0,
          "big memcpy");
    CHECK(g_got[0].r.k.name == g_got[4].r.k.name, "one pointer per name");
    CHECK(g_got[0].r.k.gridId != g_got[4].r.k.gridId, "grid IDs differ");
    uint32_t corr[6] = {g_got[0].r.k.correlationId, g_got[1].r.c.correlationId, g_got[2].r.s.correlationId,
                        g_got[3].r.k.correlationId, g_got[4].r.k.correlationId, g_got[5].r.c.correlationId};
    for (size_t i = 1; i < 6; i++)
        CHECK(corr[i] > corr[i - 1], "correlation IDs in order: %u after %u", corr[i], corr[i - 1]);

    /* A flush with nothing pending asks for no buffer. */
    reset_got();
    OK(cuptiActivityFlushAll(0));
    CHECK(g_requests == 0 && g_completes == 0, "%zu requests", g_requests);
}

static void test_kinds(void)
{
    reset_got();
    size_t dropped0 = fakecupti_dropped();
    /* A record made while enabled is delivered after a disable. */
    fakecupti_memset(64, 10, 20, 1);
    OK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
    CHECK(!fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMSET), "disabled");
    fakecupti_memset(128, 30, 40, 1);
    CHECK(fakecupti_pending() == 1, "the disabled kind makes no record: %zu pending", fakecupti_pending());
    OK(cuptiActivityFlushAll(0));
    CHECK(g_ngot == 1 && g_got[0].r.s.bytes == 64, "%zu records", g_ngot);

    /* Serialized kernels: kind KERNEL, same struct. */
    reset_got();
    OK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    fakecupti_kernel("off", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    CHECK(fakecupti_pending() == 0, "no kernel kind enabled");
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL));
    fakecupti_kernel("serial", 2, 3, 4, 5, 6, 7, 8, 100, 200, 3);
    OK(cuptiActivityFlushAll(0));
    CHECK(g_ngot == 1, "%zu records", g_ngot);
    if (g_ngot == 1)
        check_kernel(&g_got[0], CUPTI_ACTIVITY_KIND_KERNEL, "serial", 2, 3, 4, 5, 6, 7, 8, 100, 200, 3);
    OK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_KERNEL));
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CHECK(fakecupti_dropped() == dropped0, "disabled kinds are not drops");

    /* A NULL name stays NULL. */
    reset_got();
    fakecupti_kernel(NULL, 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(g_ngot == 1 && !g_got[0].has_name && g_got[0].r.k.name == NULL, "NULL name");
}

static void test_buffers(void)
{
    size_t dropped_unread = 99;
    OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped_unread));
    CHECK(dropped_unread == 0, "%zu dropped before", dropped_unread);

    /* No buffer: one request per record, each record dropped. */
    reset_got();
    size_t dropped0 = fakecupti_dropped(), delivered0 = fakecupti_delivered();
    g_mode = BUF_NULL;
    fakecupti_kernel("k", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    fakecupti_memcpy(1, 2, 3, 0);
    fakecupti_memset(1, 2, 3, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(fakecupti_dropped() == dropped0 + 3 && fakecupti_delivered() == delivered0, "%zu dropped",
          fakecupti_dropped() - dropped0);
    CHECK(g_requests == 3 && g_completes == 0 && fakecupti_pending() == 0, "%zu requests %zu completes", g_requests,
          g_completes);
    OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped_unread));
    CHECK(dropped_unread == 3, "%zu dropped", dropped_unread);
    OK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped_unread));
    CHECK(dropped_unread == 0, "reset by reading: %zu", dropped_unread);

    /* Too small, and misaligned: dropped, the buffer comes back empty. */
    reset_got();
    g_mode = BUF_SMALL;
    fakecupti_memcpy(1, 2, 3, 0);
    fakecupti_memset(1, 2, 3, 0);
    OK(cuptiActivityFlushAll(0));
    g_mode = BUF_MISALIGNED;
    fakecupti_kernel("k", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(fakecupti_dropped() == dropped0 + 6, "%zu dropped", fakecupti_dropped() - dropped0);
    CHECK(g_requests == 3 && g_completes == 3 && g_empty_completes == 3 && g_ngot == 0,
          "%zu requests %zu completes %zu empty", g_requests, g_completes, g_empty_completes);
    OK(cuptiActivityGetNumDroppedRecords((CUcontext)(uintptr_t)0x1234, 5, &dropped_unread));
    CHECK(dropped_unread == 3, "any context, any stream: %zu", dropped_unread);

    /* Room for two kernel records: 5 kernels take three buffers. */
    reset_got();
    g_mode = BUF_NORMAL;
    g_buf_size = 2 * sizeof(CUpti_ActivityKernel10) + sizeof(CUpti_ActivityKernel10) / 2;
    for (int i = 0; i < 5; i++)
        fakecupti_kernel("k", 1, 1, 1, 1, 1, 1, 0, (uint64_t)i, (uint64_t)i + 1, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(g_requests == 3 && g_completes == 3 && g_ngot == 5 && g_walk_errors == 0, "%zu buffers, %zu records",
          g_completes, g_ngot);
    for (size_t i = 0; i < g_ngot; i++)
        CHECK(g_got[i].r.k.start == i, "in order: %zu", i);

    /* maxNumRecords: at most one each. */
    reset_got();
    g_buf_size = 1 << 20;
    g_max_records = 1;
    fakecupti_memset(1, 2, 3, 0);
    fakecupti_memcpy(1, 2, 3, 0);
    fakecupti_kernel("k", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(g_requests == 3 && g_completes == 3 && g_ngot == 3, "%zu buffers, %zu records", g_completes, g_ngot);
    g_max_records = 0;
    CHECK(fakecupti_dropped() == dropped0 + 6, "no more dropped");
}

static void test_next_record(void)
{
    uint64_t store[64];
    uint8_t *buf = (uint8_t *)store;
    memset(store, 0, sizeof store);
    CUpti_Activity *rec = NULL;
    EXPECT(cuptiActivityGetNextRecord(buf, 0, &rec), CUPTI_ERROR_MAX_LIMIT_REACHED);
    EXPECT(cuptiActivityGetNextRecord(NULL, 8, &rec), CUPTI_ERROR_INVALID_PARAMETER);
    EXPECT(cuptiActivityGetNextRecord(buf, 8, NULL), CUPTI_ERROR_INVALID_PARAMETER);

    /* One memset record, then garbage. */
    CUpti_ActivityMemset4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    memcpy(buf, &m, sizeof m);
    CUpti_ActivityKind junk = (CUpti_ActivityKind)9999;
    memcpy(buf + sizeof m, &junk, sizeof junk);
    rec = NULL;
    OK(cuptiActivityGetNextRecord(buf, sizeof m, &rec));
    CHECK(rec == (CUpti_Activity *)(void *)buf, "the first record at the start");
    CUpti_Activity *first = rec;
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof m, &rec), CUPTI_ERROR_MAX_LIMIT_REACHED);
    CHECK(rec == first, "unchanged at the end");
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof m + 8, &rec), CUPTI_ERROR_INVALID_KIND);
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof m - 8, &first), CUPTI_ERROR_INVALID_KIND);
    rec = (CUpti_Activity *)(void *)(buf + sizeof store);
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof m, &rec), CUPTI_ERROR_INVALID_PARAMETER);
    rec = NULL;
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof m - 8, &rec), CUPTI_ERROR_INVALID_KIND);
    EXPECT(cuptiActivityGetNextRecord(buf, 2, &rec), CUPTI_ERROR_INVALID_KIND);
    rec = (CUpti_Activity *)(void *)(buf + sizeof m);
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof m + 8, &rec), CUPTI_ERROR_INVALID_KIND);
    memset(store, 0xff, sizeof store);
    rec = NULL;
    EXPECT(cuptiActivityGetNextRecord(buf, sizeof store, &rec), CUPTI_ERROR_INVALID_KIND);
}

static void test_auto_delivery(void)
{
    reset_got();
    size_t delivered0 = fakecupti_delivered();
    unsigned long long flushes = fakecupti_calls("cuptiActivityFlushAll");
    for (int i = 0; i < FAKECUPTI_AUTO_DELIVER; i++)
        fakecupti_kernel("auto", 1, 1, 1, 1, 1, 1, 0, (uint64_t)i, (uint64_t)i + 1, 0);
    CHECK(fakecupti_pending() == FAKECUPTI_AUTO_DELIVER && fakecupti_delivered() == delivered0,
          "%zu pending at the limit", fakecupti_pending());
    fakecupti_memcpy(1, 2, 3, 0);
    CHECK(fakecupti_pending() == 0 && fakecupti_delivered() == delivered0 + FAKECUPTI_AUTO_DELIVER + 1,
          "%zu pending, %zu delivered past it", fakecupti_pending(), fakecupti_delivered() - delivered0);
    CHECK(g_ngot == FAKECUPTI_AUTO_DELIVER + 1 && g_walk_errors == 0 && pthread_equal(g_cb_thread, pthread_self()),
          "%zu records", g_ngot);
    CHECK(fakecupti_calls("cuptiActivityFlushAll") == flushes, "without a flush");
}

static void test_reentry(void)
{
    reset_got();
    g_reenter = 1;
    fakecupti_kernel("outer", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(g_ngot == 2 && g_completes == 2, "%zu records in %zu buffers", g_ngot, g_completes);
    CHECK(g_ngot == 2 && strcmp(g_got[1].name, "from_callback") == 0, "the kernel queued inside is delivered");
    CHECK(fakecupti_pending() == 0, "%zu pending", fakecupti_pending());
}

static void test_fail_all(void)
{
    unsigned long long before[NENTRIES];
    for (size_t i = 0; i < NENTRIES; i++)
        before[i] = fakecupti_calls(entry_names[i]);
    fakecupti_fail_all(CUPTI_ERROR_UNKNOWN);

    uint8_t buf[8] = {0};
    CUpti_Activity *rec = NULL;
    uint32_t v = 7;
    uint64_t ts = 7;
    size_t dropped = 7;
    const char *s = NULL;
    CUpti_SubscriberHandle sub = NULL;
    EXPECT(cuptiActivityRegisterCallbacks(on_request, on_complete), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_OVERHEAD), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiActivityFlushAll(0), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiActivityGetNextRecord(buf, 0, &rec), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiGetTimestamp(&ts), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiGetResultString(CUPTI_SUCCESS, &s), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiFinalize(), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiGetVersion(&v), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiSubscribe(&sub, NULL, NULL), CUPTI_ERROR_UNKNOWN);
    EXPECT(cuptiUnsubscribe(sub), CUPTI_ERROR_UNKNOWN);
    CHECK(v == 7 && ts == 7 && dropped == 7 && s == NULL && sub == NULL && rec == NULL, "nothing written");
    CHECK(!fakecupti_enabled(CUPTI_ACTIVITY_KIND_OVERHEAD) && fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMSET),
          "nothing changed");
    for (size_t i = 0; i < NENTRIES; i++)
        CHECK(fakecupti_calls(entry_names[i]) == before[i] + 1, "%s counted while failing", entry_names[i]);

    /* Queueing goes on, and so does delivery through the callbacks
     * registered before, whose walk now fails. */
    reset_got();
    size_t delivered0 = fakecupti_delivered();
    for (int i = 0; i <= FAKECUPTI_AUTO_DELIVER; i++)
        fakecupti_memset(1, 2, 3, 0);
    CHECK(fakecupti_delivered() == delivered0 + FAKECUPTI_AUTO_DELIVER + 1 && g_walk_errors == g_completes &&
              g_ngot == 0,
          "delivered while failing: %zu, %zu walk errors", fakecupti_delivered() - delivered0, g_walk_errors);

    fakecupti_fail_all(CUPTI_SUCCESS);
    OK(cuptiGetVersion(&v));
    CHECK(v == CUPTI_API_VERSION, "working again");
}

/* Many threads queue while one flushes: every record arrives exactly once. */
enum { THREADS = 4, PER_THREAD = 3000 };
static atomic_int g_producers_done;

static void *producer(void *arg)
{
    uint32_t stream = (uint32_t)(uintptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        switch (i % 3) {
        case 0:
            fakecupti_kernel(i % 2 ? "odd" : "even", 1, 1, 1, 1, 1, 1, 0, (uint64_t)i, (uint64_t)i + 1, stream);
            break;
        case 1:
            fakecupti_memcpy(1, (uint64_t)i, (uint64_t)i + 1, stream);
            break;
        default:
            fakecupti_memset(1, (uint64_t)i, (uint64_t)i + 1, stream);
            break;
        }
    }
    atomic_fetch_add(&g_producers_done, 1);
    return NULL;
}

static void *flusher(void *arg)
{
    (void)arg;
    while (atomic_load(&g_producers_done) < THREADS)
        cuptiActivityFlushAll(0);
    return NULL;
}

static void test_threads(void)
{
    reset_got();
    g_buf_size = 64 * sizeof(CUpti_ActivityKernel10);
    size_t delivered0 = fakecupti_delivered(), dropped0 = fakecupti_dropped();
    pthread_t t[THREADS + 1];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, producer, (void *)(i + 1));
    pthread_create(&t[THREADS], NULL, flusher, NULL);
    for (int i = 0; i <= THREADS; i++)
        pthread_join(t[i], NULL);
    OK(cuptiActivityFlushAll(0));
    size_t want = (size_t)THREADS * PER_THREAD;
    CHECK(fakecupti_delivered() == delivered0 + want && fakecupti_dropped() == dropped0 && g_ngot == want &&
              g_walk_errors == 0,
          "%zu delivered, %zu collected of %zu", fakecupti_delivered() - delivered0, g_ngot, want);
    /* Per stream (one producer each), records arrive in the order queued. */
    uint64_t last[THREADS + 1];
    int ordered = 1;
    memset(last, 0, sizeof last);
    for (size_t i = 0; i < g_ngot; i++) {
        uint32_t stream = g_got[i].r.a.kind == CUPTI_ACTIVITY_KIND_MEMCPY   ? g_got[i].r.c.streamId
                          : g_got[i].r.a.kind == CUPTI_ACTIVITY_KIND_MEMSET ? g_got[i].r.s.streamId
                                                                            : g_got[i].r.k.streamId;
        uint64_t end = g_got[i].r.a.kind == CUPTI_ACTIVITY_KIND_MEMCPY   ? g_got[i].r.c.end
                       : g_got[i].r.a.kind == CUPTI_ACTIVITY_KIND_MEMSET ? g_got[i].r.s.end
                                                                         : g_got[i].r.k.end;
        if (stream < 1 || stream > THREADS || end <= last[stream])
            ordered = 0;
        else
            last[stream] = end;
    }
    CHECK(ordered, "in order per producer");
    g_buf_size = 1 << 20;
}

static void test_finalize(void)
{
    CUpti_SubscriberHandle sub = NULL;
    OK(cuptiSubscribe(&sub, NULL, NULL));
    fakecupti_kernel("pending_at_finalize", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    size_t dropped0 = fakecupti_dropped();
    OK(cuptiFinalize());
    CHECK(fakecupti_pending() == 0 && fakecupti_dropped() == dropped0, "pending discarded, not dropped");
    CHECK(!fakecupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) && !fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMCPY),
          "kinds disabled");
    EXPECT(cuptiActivityFlushAll(0), CUPTI_ERROR_INVALID_OPERATION);
    OK(cuptiSubscribe(&sub, NULL, NULL));
    OK(cuptiUnsubscribe(sub));

    /* And it starts again, names and all. */
    reset_got();
    OK(cuptiActivityRegisterCallbacks(on_request, on_complete));
    OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    fakecupti_kernel("after_finalize", 1, 1, 1, 1, 1, 1, 0, 1, 2, 0);
    OK(cuptiActivityFlushAll(0));
    CHECK(g_ngot == 1 && strcmp(g_got[0].name, "after_finalize") == 0, "%zu records", g_ngot);
    OK(cuptiFinalize());
}

int main(void)
{
    test_exports();
    test_basics();
    test_subscribe();
    test_unregistered();
    test_records();
    test_kinds();
    test_buffers();
    test_next_record();
    test_auto_delivery();
    test_reentry();
    test_fail_all();
    test_threads();
    test_finalize();
    free(g_got);
    printf("fakecupti_selftest: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
