/* Device allocation as a program sees it, natively and under drk's pool:
 * every answer the program can observe must be the driver's. Linked -lcuda
 * (the stand-in driver).
 *
 *   route_pool basic   sizes, alignment, bytes kept, range and pointer
 *                      queries, bad frees, async and pitch forms, threads
 *                      on their own streams; prints one line per check
 *   route_pool frag    a live set that always fits in a small device, in
 *                      holes too small for later requests: prints
 *                      "frag completed" or "frag out of memory"
 *   route_pool reset   memory made in a created context that is destroyed,
 *                      then in the primary context, which is reset with
 *                      memory still allocated, then anew: prints the
 *                      answers to freeing what the reset ended, and
 *                      "reset ok" when every later allocation works
 *   route_pool tsplit  8 threads on cuMemAlloc and cuMemFree alone, each
 *                      writing its id into its blocks and finding it there,
 *                      12 new pages each at once first; at the end each
 *                      frees the blocks its neighbour left (frees from
 *                      another thread): prints "tsplit ok"
 *   route_pool grow    a program that grows 4 MiB a step with 3 ms of other
 *                      work between steps, then forks: the child grows the
 *                      same way and exits; the parent then allocates a
 *                      burst of blocks and returns at once (drk's page
 *                      grower busy as the process exits): prints "grow ok"
 *   route_pool runs    80 MiB blocks with pins between, freed, then 100 MiB
 *                      blocks no hole fits: under drk the pool moves whole
 *                      runs of pages (one driver handle each) into them;
 *                      every block holds its bytes: prints "runs ok"
 *   route_pool switch  drk_alloc_switch found with dlsym (natively: not
 *                      found): allocations with the pool switched off are
 *                      the driver's, the pool's own blocks stay its own,
 *                      every free and query answered; prints one line per
 *                      step */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/fakecuda/fakecuda.h"

static int failures;

#define CHECK(call)                                                                            \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)r_);           \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                \
        }                                                                                      \
    } while (0)
#define EXPECT(cond)                                                                           \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                \
        }                                                                                      \
    } while (0)

static CUcontext ctx;

/* Fills [p, p+n) with `v` and checks the first and last bytes come back. */
static void fill_check(CUdeviceptr p, size_t n, unsigned char v)
{
    CHECK(cuMemsetD8_v2(p, v, n));
    unsigned char first = 0, last = 0;
    CHECK(cuMemcpyDtoH_v2(&first, p, 1));
    CHECK(cuMemcpyDtoH_v2(&last, p + n - 1, 1));
    EXPECT(first == v && last == v);
}

static void sizes(void)
{
    static const size_t sz[] = {1, 255, 256, 511, 512, 4096, 65537, (2u << 20) - 1, 2u << 20, (5u << 20) + 3};
    CUdeviceptr p[sizeof sz / sizeof sz[0]];
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        CHECK(cuMemAlloc_v2(&p[i], sz[i]));
        EXPECT(p[i] % 256 == 0);
        fill_check(p[i], sz[i], (unsigned char)(i + 1));
    }
    /* Every block kept its bytes while the others were written. */
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
        unsigned char b = 0;
        CHECK(cuMemcpyDtoH_v2(&b, p[i] + sz[i] / 2, 1));
        EXPECT(b == (unsigned char)(i + 1));
    }
    CUdeviceptr z = 0;
    EXPECT(cuMemAlloc_v2(&z, 0) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(NULL, 64) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(&z, (size_t)1 << 62) == CUDA_ERROR_OUT_OF_MEMORY);
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
        CHECK(cuMemFree_v2(p[i]));
    printf("sizes ok\n");
}

static void queries(void)
{
    CUdeviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, 1000));
    CHECK(cuMemAlloc_v2(&b, 3000));
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(cuMemGetAddressRange_v2(&base, &size, a + 999));
    EXPECT(base == a && size == 1000);
    CHECK(cuMemGetAddressRange_v2(&base, NULL, b + 1));
    EXPECT(base == b);
    unsigned long long ida = 0, idb = 0;
    CHECK(cuPointerGetAttribute(&ida, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    CHECK(cuPointerGetAttribute(&idb, CU_POINTER_ATTRIBUTE_BUFFER_ID, b + 7));
    EXPECT(ida != idb);
    unsigned int type = 0;
    int ordinal = -1;
    CUcontext c = NULL;
    CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b + 100));
    CHECK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
    CHECK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, b));
    EXPECT(type == CU_MEMORYTYPE_DEVICE && ordinal == 0 && c == ctx);
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                    CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    size_t rsize = 0;
    void *data[3] = {&base, &rsize, &type};
    CHECK(cuPointerGetAttributes(3, attrs, data, a + 5));
    EXPECT(base == a && rsize == 1000 && type == CU_MEMORYTYPE_DEVICE);
    /* Bad frees: an interior pointer, twice the same, never allocated. */
    EXPECT(cuMemFree_v2(a + 256) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFree_v2(a));
    EXPECT(cuMemFree_v2(a) == CUDA_ERROR_INVALID_VALUE);
    /* A freed block is unknown to the queries (unless reused, which here
     * nothing asked for). */
    EXPECT(cuMemGetAddressRange_v2(&base, &size, a) != CUDA_SUCCESS);
    /* b was untouched by all that. */
    fill_check(b, 3000, 0x5a);
    CHECK(cuMemFree_v2(b));
    size_t free_b = 0, total = 0;
    CHECK(cuMemGetInfo_v2(&free_b, &total));
    EXPECT(free_b <= total && total > 0);
    printf("queries ok\n");
}

static void async_forms(void)
{
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p[6];
    CHECK(cuMemAllocAsync(&p[0], 4096, s));
    CHECK(cuMemAllocAsync(&p[1], 100, NULL));
    CHECK(cuMemAllocAsync_ptsz(&p[2], 70000, NULL));
    CHECK(cuMemAllocAsync(&p[3], 1 << 20, CU_STREAM_PER_THREAD));
    size_t pitch = 0;
    CHECK(cuMemAllocPitch_v2(&p[4], &pitch, 1000, 7, 4));
    EXPECT(pitch >= 1000 && p[4] % 256 == 0);
    CHECK(cuMemAlloc_v2(&p[5], 123));
    for (int i = 0; i < 4; i++)
        fill_check(p[i], 64, (unsigned char)(0x10 + i));
    fill_check(p[4], pitch * 7, 0x77);
    CHECK(cuMemFreeAsync(p[0], s));
    CHECK(cuMemFreeAsync(p[1], NULL));
    CHECK(cuMemFreeAsync_ptsz(p[2], NULL));
    CHECK(cuMemFreeAsync(p[3], CU_STREAM_PER_THREAD));
    CHECK(cuMemFree_v2(p[4]));
    CHECK(cuMemFreeAsync(p[5], s)); /* a cuMemAlloc block freed in stream order */
    CHECK(cuStreamSynchronize(s));
    /* While the stream captures a graph its async allocations are the
     * driver's (under drk's pool too); after the capture, the pool's again. */
    const char *pool_env = getenv("ROUTE_POOL");
    int pooled = pool_env && strcmp(pool_env, "1") == 0;
    unsigned long long before = fakecuda_calls("cuMemAllocAsync");
    CUdeviceptr c1, c2;
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuMemAllocAsync(&c1, 4096, s));
    /* cuMemFree meanwhile, enough to seal its epochs: no event of the
     * pool's may be recorded on the capturing stream (a real driver makes
     * it a node of the program's graph); the frees wait for the capture. */
    unsigned long long captured = fakecuda_captured_event_records();
    for (int i = 0; i < 300; i++) {
        CUdeviceptr t;
        CHECK(cuMemAlloc_v2(&t, 256 + (size_t)i * 64));
        CHECK(cuMemFree_v2(t));
    }
    EXPECT(fakecuda_captured_event_records() == captured);
    CUgraph graph = NULL;
    CHECK(cuStreamEndCapture(s, &graph));
    EXPECT(fakecuda_calls("cuMemAllocAsync") == before + 1);
    CHECK(cuMemAllocAsync(&c2, 4096, s));
    EXPECT(fakecuda_calls("cuMemAllocAsync") == before + (pooled ? 1 : 2));
    CHECK(cuMemFreeAsync(c1, s));
    CHECK(cuMemFreeAsync(c2, s));
    /* A capture that fails to begin leaves the pool serving. */
    EXPECT(cuStreamBeginCapture_v2((CUstream)(uintptr_t)0x1234, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&c2, 4096, s));
    EXPECT(fakecuda_calls("cuMemAllocAsync") == before + (pooled ? 1 : 3));
    CHECK(cuMemFreeAsync(c2, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    printf("async pitch=%zu ok\n", pitch);
}

/* Threads on their own streams: blocks of one never overlap another's
 * (each writes its id into its live blocks and finds it unchanged). */
enum { THREADS = 8, LIVE = 16, ROUNDS = 300 };
static pthread_barrier_t go;

static void *worker(void *arg)
{
    unsigned char id = (unsigned char)(uintptr_t)arg;
    CUstream s;
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr live[LIVE] = {0};
    size_t len[LIVE] = {0};
    unsigned seed = id * 7919u + 1;
    pthread_barrier_wait(&go);
    for (int i = 0; i < ROUNDS; i++) {
        int k = (int)(rand_r(&seed) % LIVE);
        if (live[k]) {
            unsigned char b = 0;
            CHECK(cuMemcpyDtoH_v2(&b, live[k] + len[k] - 1, 1));
            EXPECT(b == id);
            CHECK(i % 3 ? cuMemFreeAsync(live[k], s) : cuMemFree_v2(live[k]));
        }
        len[k] = 1 + rand_r(&seed) % (1u << 20);
        CHECK(i % 2 ? cuMemAllocAsync(&live[k], len[k], s) : cuMemAlloc_v2(&live[k], len[k]));
        CHECK(cuMemsetD8_v2(live[k], id, len[k]));
    }
    CHECK(cuStreamSynchronize(s));
    for (int k = 0; k < LIVE; k++)
        if (live[k]) {
            unsigned char b = 0;
            CHECK(cuMemcpyDtoH_v2(&b, live[k], 1));
            EXPECT(b == id);
            CHECK(cuMemFreeAsync(live[k], s));
        }
    CHECK(cuStreamDestroy_v2(s));
    return NULL;
}

static void threads(void)
{
    pthread_t t[THREADS];
    pthread_barrier_init(&go, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("threads ok\n");
}

/* Threads sharing cuMemAlloc (no streams): under drk, those that keep
 * meeting each other get shards of their own; blocks stay theirs, and a
 * block freed by another thread than its allocator's is freed all the same.
 * Each thread first takes TS_BIG blocks of 2 MiB at once with the others
 * (every one needs a new page: with page creation made slow, the threads
 * queue on the shared shard), then frees and allocates at random. */
enum { TS_THREADS = 8, TS_BIG = 12, TS_LIVE = 24 + TS_BIG, TS_ROUNDS = 400 };
static CUdeviceptr ts_left[TS_THREADS][TS_LIVE];
static size_t ts_len[TS_THREADS][TS_LIVE];

static void *tsplit_worker(void *arg)
{
    int me = (int)(uintptr_t)arg;
    unsigned char id = (unsigned char)(me + 1);
    CUdeviceptr *live = ts_left[me];
    size_t *len = ts_len[me];
    unsigned seed = (unsigned)me * 104729u + 7;
    CHECK(cuCtxSetCurrent(ctx));
    pthread_barrier_wait(&go);
    for (int k = 0; k < TS_BIG; k++) {
        len[k] = (size_t)2 << 20;
        CHECK(cuMemAlloc_v2(&live[k], len[k]));
        CHECK(cuMemsetD8_v2(live[k], id, len[k]));
    }
    for (int i = 0; i < TS_ROUNDS - TS_BIG; i++) {
        int k = TS_BIG + (int)(rand_r(&seed) % (TS_LIVE - TS_BIG));
        if (live[k]) {
            unsigned char b = 0;
            CHECK(cuMemcpyDtoH_v2(&b, live[k] + len[k] - 1, 1));
            EXPECT(b == id);
            CHECK(cuMemFree_v2(live[k]));
        }
        len[k] = 1 + rand_r(&seed) % (rand_r(&seed) % 8 ? (64u << 10) : (6u << 20));
        CHECK(cuMemAlloc_v2(&live[k], len[k]));
        CHECK(cuMemsetD8_v2(live[k], id, len[k]));
    }
    pthread_barrier_wait(&go);
    /* The neighbour's blocks: still its bytes, freed from here. */
    int nb = (me + 1) % TS_THREADS;
    for (int k = 0; k < TS_LIVE; k++)
        if (ts_left[nb][k]) {
            unsigned char b = 0;
            CHECK(cuMemcpyDtoH_v2(&b, ts_left[nb][k] + ts_len[nb][k] - 1, 1));
            EXPECT(b == (unsigned char)(nb + 1));
            CHECK(cuMemFree_v2(ts_left[nb][k]));
        }
    return NULL;
}

static void tsplit(void)
{
    pthread_t t[TS_THREADS];
    pthread_barrier_init(&go, NULL, TS_THREADS);
    for (int i = 0; i < TS_THREADS; i++)
        pthread_create(&t[i], NULL, tsplit_worker, (void *)(uintptr_t)i);
    for (int i = 0; i < TS_THREADS; i++)
        pthread_join(t[i], NULL);
    printf("tsplit ok\n");
}

/* A growing program with gaps between its allocations (a training step's
 * other work): drk's grower has time to make pages ahead of the next. */
static void grow_steps(int steps, CUdeviceptr *blk)
{
    for (int i = 0; i < steps; i++) {
        CHECK(cuMemAlloc_v2(&blk[i], (size_t)4 << 20));
        fill_check(blk[i], (size_t)4 << 20, (unsigned char)(i + 1));
        struct timespec ts = {0, 3000000};
        nanosleep(&ts, NULL);
    }
}

static int grow(void)
{
    enum { STEPS = 48, BURST = 24 };
    static CUdeviceptr blk[STEPS], burst[BURST];
    grow_steps(STEPS, blk);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        static CUdeviceptr mine[STEPS / 2];
        grow_steps(STEPS / 2, mine);
        exit(failures ? 1 : 0); /* exit(): the child's report is written */
    }
    int status;
    EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < STEPS; i++) {
        unsigned char b = 0;
        CHECK(cuMemcpyDtoH_v2(&b, blk[i] + ((size_t)4 << 20) - 1, 1));
        EXPECT(b == (unsigned char)(i + 1));
    }
    /* A burst, and out: pages still being made as the process ends. */
    for (int i = 0; i < BURST; i++)
        CHECK(cuMemAlloc_v2(&burst[i], (size_t)8 << 20));
    printf("grow ok\n");
    return 0;
}

/* Runs (docs/memory.md): blocks of 40 pages, pins between, freed: holes of
 * 40 pages, idle past the pool's reserve; blocks of 50 pages fit no hole,
 * so their pages come from idle runs moved whole (and, for what no idle
 * run fits, runs given back and made to measure). Every block is written
 * and read back, the pins' bytes survive the moves. */
static int runs(void)
{
    enum { N = 6, BIG = 3 };
    const size_t a_size = (size_t)80 << 20, big_size = (size_t)100 << 20, pin_size = (size_t)1 << 20;
    CUdeviceptr a[N], pin[N], big[BIG];
    for (int i = 0; i < N; i++) {
        CHECK(cuMemAlloc_v2(&a[i], a_size));
        CHECK(cuMemAlloc_v2(&pin[i], pin_size));
        fill_check(a[i], a_size, (unsigned char)(i + 1));
        fill_check(pin[i], pin_size, 0x7f);
    }
    for (int i = 0; i < N; i++)
        CHECK(cuMemFree_v2(a[i]));
    for (int i = 0; i < BIG; i++) {
        CHECK(cuMemAlloc_v2(&big[i], big_size));
        fill_check(big[i], big_size, (unsigned char)(0x40 + i));
    }
    for (int i = 0; i < BIG; i++) {
        unsigned char b = 0;
        CHECK(cuMemcpyDtoH_v2(&b, big[i] + big_size / 2, 1));
        EXPECT(b == (unsigned char)(0x40 + i));
    }
    for (int i = 0; i < N; i++) {
        unsigned char b = 0, e = 0;
        CHECK(cuMemcpyDtoH_v2(&b, pin[i], 1));
        CHECK(cuMemcpyDtoH_v2(&e, pin[i] + pin_size - 1, 1));
        EXPECT(b == 0x7f && e == 0x7f);
        CHECK(cuMemFree_v2(pin[i]));
    }
    for (int i = 0; i < BIG; i++)
        CHECK(cuMemFree_v2(big[i]));
    printf("runs ok\n");
    return 0;
}

/* 96 MiB of 2 MiB blocks, every other one freed (48 MiB free in 2 MiB
 * holes), then 8 MiB blocks up to 40 MiB more: the live set never passes
 * 96 MiB of a 128 MiB device, but only a pool that can map free pages
 * elsewhere (or the driver) finds room for them. */
static int frag(void)
{
    enum { SMALL = 48, BIG = 5 };
    fakecuda_set_total_memory((size_t)128 << 20);
    CUdeviceptr small[SMALL], big[BIG];
    for (int i = 0; i < SMALL; i++) {
        CHECK(cuMemAlloc_v2(&small[i], (size_t)2 << 20));
        fill_check(small[i], (size_t)2 << 20, (unsigned char)i);
    }
    for (int i = 0; i < SMALL; i += 2)
        CHECK(cuMemFree_v2(small[i]));
    CHECK(cuCtxSynchronize());
    for (int i = 0; i < BIG; i++) {
        CUresult r = cuMemAlloc_v2(&big[i], (size_t)8 << 20);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            printf("frag out of memory\n");
            return 0;
        }
        CHECK(r);
        fill_check(big[i], (size_t)8 << 20, 0xee);
    }
    /* The survivors kept their bytes. */
    for (int i = 1; i < SMALL; i += 2) {
        unsigned char b = 0;
        CHECK(cuMemcpyDtoH_v2(&b, small[i] + 12345, 1));
        EXPECT(b == (unsigned char)i);
    }
    printf("frag completed\n");
    return 0;
}

static const char *name_of(CUresult r)
{
    const char *n = NULL;
    return cuGetErrorName(r, &n) == CUDA_SUCCESS && n ? n : "?";
}

static int reset(CUdevice dev)
{
    /* A created context, destroyed with nothing left allocated. */
    CUcontext made;
    CUdeviceptr p;
    unsigned char *h;
    CHECK(cuCtxCreate_v4(&made, NULL, 0, dev));
    CHECK(cuMemAlloc_v2(&p, 3u << 20));
    fill_check(p, 3u << 20, 0x11);
    CHECK(cuMemHostAlloc((void **)&h, 4096, 0));
    memset(h, 0x22, 4096);
    CHECK(cuMemFree_v2(p));
    CHECK(cuMemFreeHost(h));
    CHECK(cuCtxDestroy_v2(made));
    /* The primary context, reset with memory still allocated. */
    CHECK(cuCtxSetCurrent(ctx));
    CUdeviceptr q;
    unsigned char *hh;
    CHECK(cuMemAlloc_v2(&q, 5u << 20));
    fill_check(q, 5u << 20, 0x33);
    CHECK(cuMemHostAlloc((void **)&hh, 8192, 0));
    CHECK(cuDevicePrimaryCtxReset_v2(dev));
    /* Anew: what the reset ended is not the program's any more; new memory works. */
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    printf("after reset: cuMemFree %s, cuMemFreeHost %s\n", name_of(cuMemFree_v2(q)), name_of(cuMemFreeHost(hh)));
    CUdeviceptr r1, r2;
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&r1, 7u << 20));
    CHECK(cuMemAllocAsync(&r2, 1u << 20, s));
    fill_check(r1, 7u << 20, 0x44);
    CHECK(cuStreamSynchronize(s));
    fill_check(r2, 1u << 20, 0x55);
    CHECK(cuMemFree_v2(r1));
    CHECK(cuMemFreeAsync(r2, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuMemHostAlloc((void **)&hh, 8192, 0));
    memset(hh, 0x66, 8192);
    CHECK(cuMemFreeHost(hh));
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    if (!failures)
        printf("reset ok\n");
    return 0;
}

/* "pool" for a block drk's pool served (its buffer ids start at 2^62),
 * "driver" otherwise. */
static const char *whose(CUdeviceptr p)
{
    unsigned long long id = 0;
    CHECK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
    return id >> 62 ? "pool" : "driver";
}

static void switched(void)
{
    int (*sw)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "drk_alloc_switch");
    if (!sw) {
        printf("no drk_alloc_switch\n");
        return;
    }
    CUdeviceptr a, b, c, d, e;
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&a, 1 << 20));
    printf("on: %s (switch was %d)\n", whose(a), sw(-1));
    printf("off: switch was %d\n", sw(0));
    CHECK(cuMemAlloc_v2(&b, 1 << 20));
    CHECK(cuMemAllocAsync(&c, 4096, s));
    CHECK(cuStreamSynchronize(s));
    printf("off: %s, async %s; the pool's block still %s\n", whose(b), whose(c), whose(a));
    fill_check(a, 1 << 20, 0x5a);
    fill_check(b, 1 << 20, 0xa5);
    size_t sz = 0;
    CUdeviceptr base = 0;
    CHECK(cuMemGetAddressRange_v2(&base, &sz, a + 100));
    EXPECT(base == a && sz == 1 << 20);
    CHECK(cuMemFree_v2(a)); /* the pool's, freed while off */
    EXPECT(cuMemFree_v2(a) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFreeAsync(c, s));
    printf("on: switch was %d\n", sw(1));
    CHECK(cuMemAlloc_v2(&d, 1 << 20));
    CHECK(cuMemAllocAsync(&e, 4096, s));
    CHECK(cuStreamSynchronize(s));
    printf("on: %s, async %s\n", whose(d), whose(e));
    CHECK(cuMemFree_v2(b)); /* the driver's, freed while on */
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFreeAsync(e, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    printf("switch ok\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    CUdevice dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (strcmp(mode, "frag") == 0) {
        frag();
    } else if (strcmp(mode, "reset") == 0) {
        reset(dev);
    } else if (strcmp(mode, "switch") == 0) {
        switched();
    } else if (strcmp(mode, "tsplit") == 0) {
        tsplit();
    } else if (strcmp(mode, "grow") == 0) {
        grow();
    } else if (strcmp(mode, "runs") == 0) {
        runs();
    } else {
        sizes();
        queries();
        async_forms();
        threads();
    }
    if (failures)
        printf("FAILED (%d)\n", failures);
    return failures ? 1 : 0;
}
