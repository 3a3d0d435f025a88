/* The pinned host pool against a driver table whose "pinned" memory is
 * plain aligned host memory, each chunk kept with its flags. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/host_pool.h"
#include "base/options.h"
#include "tests/unit/check.h"

/* ---- the driver table */

#define DEV_OFFSET ((CUdeviceptr)1 << 20) /* device pointer = host address + this */
#define PINS_MAX 4096

static struct pin {
    uintptr_t base;
    size_t size;
    unsigned flags;
} pins[PINS_MAX];
static int npins, fail_pins, no_context;
static unsigned long long dptr_calls, syncs;
static int fail_syncs, capture;

static int t_captures(void) { return __atomic_load_n(&capture, __ATOMIC_RELAXED); }
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult t_host_alloc(void **pp, size_t size, unsigned int flags)
{
    pthread_mutex_lock(&pins_lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    void *p = NULL;
    if (fail_pins > 0)
        fail_pins--;
    else if (npins < PINS_MAX && posix_memalign(&p, 4096, size) == 0)
        pins[npins++] = (struct pin){(uintptr_t)p, size, flags}, *pp = p, r = CUDA_SUCCESS;
    pthread_mutex_unlock(&pins_lock);
    return r;
}

static struct pin *pin_of(uintptr_t p)
{
    for (int i = 0; i < npins; i++)
        if (p - pins[i].base < pins[i].size)
            return &pins[i];
    return NULL;
}

static CUresult t_free_host(void *p)
{
    pthread_mutex_lock(&pins_lock);
    struct pin *k = pin_of((uintptr_t)p);
    CUresult r = k && k->base == (uintptr_t)p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        free(p), k->size = 0;
    pthread_mutex_unlock(&pins_lock);
    return r;
}

static CUresult t_get_dptr(CUdeviceptr *d, void *p, unsigned int flags)
{
    pthread_mutex_lock(&pins_lock);
    struct pin *k = pin_of((uintptr_t)p);
    dptr_calls++;
    pthread_mutex_unlock(&pins_lock);
    if (!k || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *d = (CUdeviceptr)(uintptr_t)p + DEV_OFFSET;
    return CUDA_SUCCESS;
}

static CUresult t_ctx_get_current(CUcontext *ctx)
{
    *ctx = no_context ? NULL : (CUcontext)(uintptr_t)0x1000;
    return CUDA_SUCCESS;
}

static CUresult t_ctx_synchronize(void)
{
    if (__atomic_load_n(&fail_syncs, __ATOMIC_RELAXED))
        return CUDA_ERROR_ILLEGAL_ADDRESS; /* a context an earlier fault broke */
    __atomic_add_fetch(&syncs, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static drk_driver table = {
    .ctx_synchronize = t_ctx_synchronize,
    .mem_host_alloc = t_host_alloc,
    .mem_free_host = t_free_host,
    .mem_host_get_device_pointer = t_get_dptr,
    .ctx_get_current = t_ctx_get_current,
};

#if DRK_HOST_POOL_BUILT
/* ---- helpers */

static unsigned flags_of_pin(const void *p)
{
    pthread_mutex_lock(&pins_lock);
    struct pin *k = pin_of((uintptr_t)p);
    unsigned f = k ? k->flags : ~0u;
    pthread_mutex_unlock(&pins_lock);
    return f;
}

static void *must_alloc(size_t size, unsigned flags)
{
    void *p = NULL;
    if (drk_host_pool_alloc(&p, size, flags) != 0) {
        fprintf(stderr, "pool refused %zu bytes, flags %u\n", size, flags);
        exit(1);
    }
    return p;
}

/* One allocation's checks right after it is made. */
static void check_fresh(void *p, size_t size, unsigned flags)
{
    CHECK((uintptr_t)p % 256 == 0);
    if (size >= 4096)
        CHECK((uintptr_t)p % 4096 == 0);
    void *base = NULL;
    size_t got = 0;
    unsigned f = ~0u;
    CHECK(drk_host_pool_find(p, &base, &got, &f) == 0 && base == p && got == size && f == flags);
    CHECK(drk_host_pool_find((char *)p + size - 1, &base, &got, NULL) == 0 && base == p && got == size);
    CHECK(drk_host_pool_find((char *)p + size / 2, &base, NULL, NULL) == 0 && base == p);
    CHECK(flags_of_pin(p) == flags);
    CUdeviceptr d = 0;
    CHECK(drk_host_pool_device_pointer((char *)p + size / 3, &d) == CUDA_SUCCESS &&
          d == (CUdeviceptr)(uintptr_t)p + size / 3 + DEV_OFFSET);
}

/* ---- tests */

static const size_t sizes[] = {1,     100,    255,    256,       257,       1000,      4095,      4096, 4097,
                               10000, 16384,  65536,  100000,    1 << 20,   (3 << 20) + 5, 17 << 20};
#define NSIZES (sizeof sizes / sizeof *sizes)

static void test_flag_sets(void)
{
    void *p[DRK_HOST_FLAG_SETS][NSIZES];
    for (unsigned f = 0; f < DRK_HOST_FLAG_SETS; f++)
        for (size_t i = 0; i < NSIZES; i++) {
            p[f][i] = must_alloc(sizes[i], f);
            check_fresh(p[f][i], sizes[i], f);
            memset(p[f][i], (int)(f * 16 + i), sizes[i]);
        }
    for (unsigned f = 0; f < DRK_HOST_FLAG_SETS; f++)
        for (size_t i = 0; i < NSIZES; i++) {
            unsigned char *b = p[f][i];
            CHECK(b[0] == (unsigned char)(f * 16 + i) && b[sizes[i] - 1] == (unsigned char)(f * 16 + i));
        }
    /* An interior pointer is neither freed nor forgotten. */
    CHECK(drk_host_pool_free((char *)p[0][5] + 256) == DRK_HOST_INVALID);
    CHECK(drk_host_pool_find(p[0][5], NULL, NULL, NULL) == 0);
    for (unsigned f = 0; f < DRK_HOST_FLAG_SETS; f++)
        for (size_t i = 0; i < NSIZES; i++) {
            CHECK(drk_host_pool_free(p[f][i]) == DRK_HOST_FREED);
            CHECK(drk_host_pool_find(p[f][i], NULL, NULL, NULL) != 0);
            CUdeviceptr d;
            CHECK(drk_host_pool_device_pointer(p[f][i], &d) == CUDA_ERROR_INVALID_VALUE);
        }
    /* Double frees: known to be the pool's, refused. */
    CHECK(drk_host_pool_free(p[3][2]) == DRK_HOST_INVALID);
    CHECK(drk_host_pool_free(p[0][0]) == DRK_HOST_INVALID);
    CHECK(drk_host_pool_owns(p[3][2]));
}

static void test_foreign(void)
{
    int local;
    void *m = malloc(100);
    CHECK(drk_host_pool_free(NULL) == DRK_HOST_FOREIGN);
    CHECK(drk_host_pool_free(&local) == DRK_HOST_FOREIGN);
    CHECK(drk_host_pool_free(m) == DRK_HOST_FOREIGN);
    CHECK(drk_host_pool_find(m, NULL, NULL, NULL) == -1 && !drk_host_pool_owns(m));
    free(m);
    void *p = NULL;
    CHECK(drk_host_pool_alloc(&p, 0, 0) == -1);
    CHECK(drk_host_pool_alloc(&p, DRK_HOST_POOL_LARGEST + 1, 0) == -1);
    no_context = 1;
    CHECK(drk_host_pool_alloc(&p, 64, 0) == -1);
    no_context = 0;
}

/* drk's own failures: the caller is told to ask the driver, and the pool
 * works again once pinning does. */
static void test_pin_failures(void)
{
    drk_host_pool_stats st0, st1;
    drk_host_pool_get_stats(&st0);
    void *p = NULL;
    /* A first chunk that cannot be pinned: flag set 5 is not started yet. */
    fail_pins = 1;
    CHECK(drk_host_pool_alloc(&p, 1000, 5) == -1);
    p = must_alloc(1000, 5);
    check_fresh(p, 1000, 5);
    /* Growth that cannot be pinned: more than the first chunk holds
     * (jemalloc asks twice: a retained extent to grow by, then the size). */
    fail_pins = 1000;
    void *q = NULL;
    CHECK(drk_host_pool_alloc(&q, 200 << 20, 5) == -1);
    fail_pins = 0;
    q = must_alloc(200 << 20, 5);
    check_fresh(q, 200 << 20, 5);
    CHECK(drk_host_pool_free(q) == DRK_HOST_FREED && drk_host_pool_free(p) == DRK_HOST_FREED);
    drk_host_pool_get_stats(&st1);
    CHECK(st1.by_flags[5].fallbacks - st0.by_flags[5].fallbacks == 2);
    CHECK(st1.total.fallbacks - st0.total.fallbacks == 2);
    /* Freed memory is reused: no further pinning for the same again. */
    int before = npins;
    q = must_alloc(200 << 20, 5);
    CHECK(npins == before);
    CHECK(drk_host_pool_free(q) == DRK_HOST_FREED);
}

enum { THREADS = 8, ITERATIONS = 20000, LIVE = 64 };

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    struct {
        unsigned char *p;
        size_t n;
        unsigned char tag;
    } live[LIVE] = {{0}};
    for (int it = 0; it < ITERATIONS; it++) {
        int k = (int)(rand_r(&seed) % LIVE);
        if (live[k].p) {
            unsigned char t = live[k].tag;
            CHECK(live[k].p[0] == t && live[k].p[live[k].n - 1] == t && live[k].p[live[k].n / 2] == t);
            void *base = NULL;
            CHECK(drk_host_pool_find(live[k].p + live[k].n / 2, &base, NULL, NULL) == 0 && base == live[k].p);
            CHECK(drk_host_pool_free(live[k].p) == DRK_HOST_FREED);
            live[k].p = NULL;
        } else {
            unsigned r = (unsigned)rand_r(&seed);
            size_t n = r % 100 == 0 ? (size_t)(1 + r % 3) << 20 : 1 + r % (r % 4 ? 4096 : 262144);
            unsigned f = (unsigned)rand_r(&seed) % DRK_HOST_FLAG_SETS;
            void *p = must_alloc(n, f);
            if ((uintptr_t)p % 256)
                CHECK(!"misaligned");
            live[k].p = p, live[k].n = n, live[k].tag = (unsigned char)(it * 31 + (int)(uintptr_t)arg);
            live[k].p[0] = live[k].p[n - 1] = live[k].p[n / 2] = live[k].tag;
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k].p)
            CHECK(drk_host_pool_free(live[k].p) == DRK_HOST_FREED);
    return NULL;
}

/* Large blocks freed wait for the next request of their size class and
 * flag set; a request of another class gives them back to jemalloc first. */
static void test_large(void)
{
    const size_t big = (size_t)64 << 20;
    void *p = must_alloc(big, 0);
    check_fresh(p, big, 0);
    CHECK(drk_host_pool_free(p) == DRK_HOST_FREED);
    CHECK(drk_host_pool_find(p, NULL, NULL, NULL) == -1); /* waiting is not live */
    CHECK(drk_host_pool_free(p) == DRK_HOST_INVALID);     /* nor freed twice */
    drk_host_pool_stats st;
    drk_host_pool_get_stats(&st);
    uint64_t reused0 = st.large_reused;
    void *q = must_alloc(big, 0);
    CHECK(q == p);
    drk_host_pool_get_stats(&st);
    CHECK(st.large_reused == reused0 + 1); /* the waiting block, not jemalloc's */
    check_fresh(q, big, 0);
    CHECK(drk_host_pool_free(q) == DRK_HOST_FREED);
    void *r = must_alloc(big - 100000, 0); /* the same class */
    CHECK(r == p);
    check_fresh(r, big - 100000, 0);
    CHECK(drk_host_pool_free(r) == DRK_HOST_FREED);
    void *s = must_alloc(big, CU_MEMHOSTALLOC_DEVICEMAP); /* another flag set: its own */
    CHECK(s != p && flags_of_pin(s) == CU_MEMHOSTALLOC_DEVICEMAP);
    CHECK(drk_host_pool_free(s) == DRK_HOST_FREED);
    /* Another class: p goes back to jemalloc, which carves the request
     * from it instead of pinning a chunk. */
    pthread_mutex_lock(&pins_lock);
    int before = npins;
    pthread_mutex_unlock(&pins_lock);
    void *t = must_alloc((size_t)8 << 20, 0);
    check_fresh(t, (size_t)8 << 20, 0);
    pthread_mutex_lock(&pins_lock);
    CHECK(npins == before);
    pthread_mutex_unlock(&pins_lock);
    CHECK(drk_host_pool_free(t) == DRK_HOST_FREED);
    /* More frees than slots: the rest go to jemalloc; all come back. */
    enum { MANY = 12 };
    void *m[MANY], *again[MANY];
    for (int i = 0; i < MANY; i++)
        m[i] = must_alloc((size_t)2 << 20, 0);
    for (int i = 0; i < MANY; i++)
        CHECK(drk_host_pool_free(m[i]) == DRK_HOST_FREED);
    int reused = 0;
    for (int i = 0; i < MANY; i++) {
        again[i] = must_alloc((size_t)2 << 20, 0);
        check_fresh(again[i], (size_t)2 << 20, 0);
        for (int j = 0; j < MANY; j++)
            reused += again[i] == m[j];
    }
    CHECK(reused >= 8);
    for (int i = 0; i < MANY; i++)
        CHECK(drk_host_pool_free(again[i]) == DRK_HOST_FREED);
}

/* A freed block may still be read or written by work queued before its
 * free (the driver's cuMemFreeHost waits for it): an allocation made after
 * frees waits for the device before it returns, once for all of them, and
 * one made with no free since the last wait does not. Single-threaded, so
 * the counts are exact; DRK_ALLOC_SYNC_FREE=1 moves each wait to the free. */
static void test_reuse_waits(int sync_free)
{
    const size_t sizes2[] = {4096, 100, (size_t)64 << 20};
    for (size_t i = 0; i < sizeof sizes2 / sizeof sizes2[0]; i++) {
        size_t n = sizes2[i];
        void *p = must_alloc(n, 0);
        unsigned long long s0 = syncs;
        CHECK(drk_host_pool_free(p) == DRK_HOST_FREED);
        CHECK(syncs == s0 + (unsigned long long)sync_free);
        void *q = must_alloc(n, 0);
        CHECK(q == p); /* the freed block comes back: after the wait */
        CHECK(syncs == s0 + 1);
        void *r = must_alloc(n, 0); /* no free since: no wait */
        CHECK(syncs == s0 + 1);
        /* Three frees, then one wait covers them all. */
        void *more[2] = {must_alloc(n, 0), must_alloc(n, 0)};
        CHECK(drk_host_pool_free(q) == DRK_HOST_FREED);
        CHECK(drk_host_pool_free(more[0]) == DRK_HOST_FREED);
        CHECK(drk_host_pool_free(more[1]) == DRK_HOST_FREED);
        void *again[3] = {must_alloc(n, 0), must_alloc(n, 0), must_alloc(n, 0)};
        CHECK(syncs == s0 + 1 + (sync_free ? 3 : 1));
        for (int k = 0; k < 3; k++)
            CHECK(drk_host_pool_free(again[k]) == DRK_HOST_FREED);
        CHECK(drk_host_pool_free(r) == DRK_HOST_FREED);
    }
    /* A graph capture under way: a wait would end it, so the driver serves
     * until it ends; then the allocation waits and reuses the block. */
    void *p = must_alloc(4096, 0), *q = NULL;
    unsigned long long s0 = syncs;
    CHECK(drk_host_pool_free(p) == DRK_HOST_FREED);
    capture = 1;
    CHECK(drk_host_pool_alloc(&q, 4096, 0) == (sync_free ? 0 : -1));
    if (q)
        CHECK(drk_host_pool_free(q) == DRK_HOST_FREED && syncs == s0 + 2);
    capture = 0;
    q = must_alloc(4096, 0);
    CHECK(q == p && syncs == s0 + (sync_free ? 2 : 1));
    CHECK(drk_host_pool_free(q) == DRK_HOST_FREED);
    drk_host_pool_stats st;
    drk_host_pool_get_stats(&st);
    CHECK(sync_free ? st.waits == 0 : st.waits > 0 && st.waits < st.total.allocs);
}

/* The device cannot be waited for (a fault broke the context): the block
 * an allocation after a free got may be in use, so it stays out, the
 * driver answers, and the pool stops; frees of its live blocks still work. */
static void test_wait_fails(void)
{
    void *live = must_alloc(4096, 0), *p = must_alloc(4096, 0);
    fail_syncs = 1; /* with DRK_ALLOC_SYNC_FREE=1 the free's own wait fails too */
    CHECK(drk_host_pool_free(p) == DRK_HOST_FREED);
    void *q = NULL;
    CHECK(drk_host_pool_alloc(&q, 4096, 0) == -1 && q == NULL);
    CHECK(drk_host_pool_alloc(&q, 4096, 0) == -1 && q == NULL);
    CHECK(drk_host_pool_free(live) == DRK_HOST_FREED);
    fail_syncs = 0;
    CHECK(drk_host_pool_alloc(&q, 4096, 0) == -1); /* stopped for good */
}

static void test_threads(void)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Informational: what a pair costs here (the pool's, not the driver's). */
static void report_pair_time(void)
{
    enum { N = 100000 };
    void *p;
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        p = must_alloc(4096, 0);
        drk_host_pool_free(p);
    }
    double t1 = now_s();
    printf("host pool: 4 KiB alloc+free %.0f ns a pair\n", (t1 - t0) / N * 1e9);
}

#endif

int main(void)
{
    /* A configuration meant for the program's own jemalloc: were drk's copy
     * to read it, abort_conf would abort on the bogus option. */
    setenv("MALLOC_CONF", "abort_conf:true,bogus_option:1,junk:true,narenas:1000", 1);
    /* As the library configures it, DRK_ALLOC_SYNC_FREE from the environment. */
    drk_host_pool_configure(&table, &(drk_host_pool_settings){.on = 1,
                                                              .sync_free = (int)drk_opt_num(DRK_OPT_ALLOC_SYNC_FREE),
                                                              .captures_under_way = t_captures});
    drk_host_pool_stats st;
    drk_host_pool_get_stats(&st);
    CHECK(!st.on && st.total.allocs == 0);
#if !DRK_HOST_POOL_BUILT
    void *p;
    CHECK(!st.built);
    CHECK(drk_host_pool_alloc(&p, 100, 0) == -1 && npins == 0);
    CHECK(drk_host_pool_free(&p) == DRK_HOST_FOREIGN);
    return CHECK_DONE();
#else
    CHECK(st.built);
    test_pin_failures();
    test_flag_sets();
    test_foreign();
    test_large();
    const char *sync = getenv("DRK_ALLOC_SYNC_FREE");
    test_reuse_waits(sync && *sync == '1');
    test_threads();
    report_pair_time();

    drk_host_pool_get_stats(&st);
    CHECK(st.on);
    CHECK(st.total.allocs > 80000 && st.total.allocs == st.total.frees && st.total.live_bytes == 0);
    CHECK(st.total.peak_live_bytes >= (200 << 20));
    CHECK(st.total.chunks == (uint64_t)npins);
    uint64_t pinned = 0, allocs = 0;
    for (int i = 0; i < npins; i++)
        pinned += pins[i].size;
    for (int f = 0; f < DRK_HOST_FLAG_SETS; f++) {
        allocs += st.by_flags[f].allocs;
        CHECK(st.by_flags[f].live_bytes == 0 && st.by_flags[f].chunks >= 1);
    }
    CHECK(allocs == st.total.allocs);
    CHECK(st.total.chunk_bytes == pinned);
    CHECK(st.total.direct == 1);
    CHECK(st.invalid_frees == 4); /* 3 in test_foreign, 1 in test_large */
    /* Chunks are never unpinned, and far fewer than allocations. */
    for (int i = 0; i < npins; i++)
        CHECK(pins[i].size != 0);
    CHECK(npins < 100);
    /* Allocations after frees wait for the device; with
     * DRK_ALLOC_SYNC_FREE=1 every free waits itself, and covers its block. */
    CHECK(syncs == (sync && *sync == '1' ? st.total.frees : 0) + st.waits);
    CHECK(sync && *sync == '1' ? st.waits == 0 : st.waits > 0);
    /* Device pointers are asked of the driver once a chunk at most. */
    CHECK(dptr_calls <= (unsigned long long)npins);
    test_wait_fails(); /* last: the pool stops */
    for (int i = 0; i < npins; i++)
        printf("chunk %d: flags %u, %zu MiB\n", i, pins[i].flags, pins[i].size >> 20);
    printf("host pool: %llu allocations from %d pinned chunks (%.0f MiB)\n", (unsigned long long)st.total.allocs,
           npins, (double)pinned / (1 << 20));
    return CHECK_DONE();
#endif
}
