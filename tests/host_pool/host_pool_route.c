/* Pinned host memory through the real library over the stand-in driver:
 * run with libdrk_shim.so preloaded (and the driver linked), as
 *   host_pool_route pool     the host pool serves (DRK_HOST_ALLOC=1)
 *   host_pool_route driver   the driver serves (DRK_HOST_ALLOC=0, DRK_DISABLE=1)
 * Every answer the program sees must be the same either way; only the
 * driver's call counts differ. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/fakecuda/fakecuda.h"

/* The legacy 32-bit form, which cuda.h renames away. */
extern CUresult legacy_mem_alloc_host(void **pp, unsigned int bytesize) __asm__("cuMemAllocHost");

static int failures;
#define EXPECT(cond)                                                           \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                \
        }                                                                      \
    } while (0)

static CUcontext ctx;
static unsigned long long made_host_alloc, made_alloc_host;

static CUresult host_alloc(void **p, size_t n, unsigned flags)
{
    __atomic_add_fetch(&made_host_alloc, 1, __ATOMIC_RELAXED);
    return cuMemHostAlloc(p, n, flags);
}

/* Checks of a fresh allocation as the driver defines it. */
static void check_alloc(void *p, size_t n, unsigned flags)
{
    EXPECT((uintptr_t)p % 256 == 0);
    if (n >= 4096)
        EXPECT((uintptr_t)p % 4096 == 0);
    unsigned got = ~0u;
    EXPECT(cuMemHostGetFlags(&got, p) == CUDA_SUCCESS && got == flags);
    EXPECT(cuMemHostGetFlags(&got, (char *)p + n - 1) == CUDA_SUCCESS && got == flags);
    /* The stand-in driver has unified addressing: device pointer = host. */
    CUdeviceptr d = 0;
    EXPECT(cuMemHostGetDevicePointer(&d, (char *)p + n / 2, 0) == CUDA_SUCCESS &&
           d == (CUdeviceptr)(uintptr_t)p + n / 2);
}

static const size_t sizes[] = {1, 100, 256, 257, 4000, 4096, 5000, 65536, 1 << 20, (3 << 20) + 7, 17 << 20};
#define NSIZES (sizeof sizes / sizeof *sizes)

static void flag_sets(void)
{
    void *p[8][NSIZES], *h[NSIZES];
    for (unsigned f = 0; f < 8; f++)
        for (size_t i = 0; i < NSIZES; i++) {
            EXPECT(host_alloc(&p[f][i], sizes[i], f) == CUDA_SUCCESS);
            check_alloc(p[f][i], sizes[i], f);
            memset(p[f][i], (int)(f * 16 + i), sizes[i]);
        }
    for (size_t i = 0; i < NSIZES; i++) {
        made_alloc_host++;
        EXPECT(cuMemAllocHost(&h[i], sizes[i]) == CUDA_SUCCESS);
        check_alloc(h[i], sizes[i], 0);
        memset(h[i], 0xee, sizes[i]);
    }
    for (unsigned f = 0; f < 8; f++)
        for (size_t i = 0; i < NSIZES; i++) {
            unsigned char *b = p[f][i], v = (unsigned char)(f * 16 + i);
            EXPECT(b[0] == v && b[sizes[i] / 2] == v && b[sizes[i] - 1] == v);
            EXPECT(cuMemFreeHost(b) == CUDA_SUCCESS);
        }
    for (size_t i = 0; i < NSIZES; i++) {
        EXPECT(((unsigned char *)h[i])[sizes[i] - 1] == 0xee);
        EXPECT(cuMemFreeHost(h[i]) == CUDA_SUCCESS);
    }
}

/* The driver's errors, whoever answers. */
static void errors(void)
{
    void *p = NULL, *q = NULL;
    int local;
    unsigned f;
    CUdeviceptr d;
    EXPECT(host_alloc(&p, 1000, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
    EXPECT(host_alloc(&q, 1000, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
    EXPECT(cuMemFreeHost((char *)p + 512) == CUDA_ERROR_INVALID_VALUE); /* interior */
    EXPECT(cuMemHostGetFlags(&f, p) == CUDA_SUCCESS && f == CU_MEMHOSTALLOC_DEVICEMAP);
    EXPECT(cuMemHostGetDevicePointer(&d, p, 1) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetDevicePointer(NULL, p, 0) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(NULL, p) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeHost(p) == CUDA_SUCCESS);
    EXPECT(cuMemFreeHost(p) == CUDA_ERROR_INVALID_VALUE); /* double free */
    EXPECT(cuMemHostGetFlags(&f, p) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetDevicePointer(&d, p, 0) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(&f, q) == CUDA_SUCCESS);
    EXPECT(cuMemFreeHost(q) == CUDA_SUCCESS);
    EXPECT(cuMemFreeHost(&local) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeHost(NULL) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(&f, &local) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(host_alloc(&p, 100, 0x8) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(host_alloc(NULL, 100, 0) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(host_alloc(&p, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    /* The legacy form: the driver's, under 4 GiB. */
    EXPECT(legacy_mem_alloc_host(&p, 5000) == CUDA_SUCCESS && (uintptr_t)p < ((uintptr_t)1 << 32));
    EXPECT(cuMemFreeHost(p) == CUDA_SUCCESS);
}

enum { THREADS = 8, PAIRS = 3000, LIVE = 32 };

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg + 17;
    EXPECT(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    struct {
        unsigned char *p;
        size_t n;
        unsigned char tag;
        unsigned flags;
    } live[LIVE] = {{0}};
    for (int it = 0; it < 2 * PAIRS; it++) {
        int k = (int)(rand_r(&seed) % LIVE);
        if (live[k].p) {
            unsigned char t = live[k].tag;
            EXPECT(live[k].p[0] == t && live[k].p[live[k].n - 1] == t);
            unsigned f = ~0u;
            if (it % 16 == 0)
                EXPECT(cuMemHostGetFlags(&f, live[k].p) == CUDA_SUCCESS && f == live[k].flags);
            EXPECT(cuMemFreeHost(live[k].p) == CUDA_SUCCESS);
            live[k].p = NULL;
        } else {
            unsigned r = (unsigned)rand_r(&seed);
            size_t n = 1 + r % (r % 8 ? 8192 : 300000);
            unsigned flags = (unsigned)rand_r(&seed) % 8;
            void *p = NULL;
            EXPECT(host_alloc(&p, n, flags) == CUDA_SUCCESS && p);
            if (!p)
                continue;
            live[k].p = p, live[k].n = n, live[k].flags = flags;
            live[k].tag = (unsigned char)(it + (int)(uintptr_t)arg);
            live[k].p[0] = live[k].p[n - 1] = live[k].tag;
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k].p)
            EXPECT(cuMemFreeHost(live[k].p) == CUDA_SUCCESS);
    return NULL;
}

static void threads(void)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

/* A fork while other threads allocate: the child frees what it inherited
 * (the pool's answer, no driver and no lock involved) and exits. */
static void fork_child(void)
{
    void *p = NULL;
    EXPECT(host_alloc(&p, 4096, 0) == CUDA_SUCCESS);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)(100 + i));
    pid_t child = fork();
    if (child == 0) {
        alarm(20);
        int ok = cuMemFreeHost(p) == CUDA_SUCCESS && cuMemFreeHost(p) == CUDA_ERROR_INVALID_VALUE;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    EXPECT(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    EXPECT(cuMemFreeHost(p) == CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "pool") && strcmp(argv[1], "driver"))) {
        fprintf(stderr, "usage: host_pool_route pool|driver\n");
        return 2;
    }
    int pooled = strcmp(argv[1], "pool") == 0;
    CUdevice dev;
    EXPECT(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    EXPECT(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    fakecuda_reset_calls();

    flag_sets();
    errors();
    threads();
    if (pooled)
        fork_child();

    unsigned long long seen = fakecuda_calls("cuMemHostAlloc"), seen_v2 = fakecuda_calls("cuMemAllocHost_v2");
    unsigned long long pinned = fakecuda_live_host_allocations();
    printf("program: %llu cuMemHostAlloc, %llu cuMemAllocHost_v2; driver: %llu, %llu; live pinned: %llu\n",
           made_host_alloc, made_alloc_host, seen, seen_v2, pinned);
    if (pooled) {
        /* Chunks, and the calls the pool leaves to the driver. */
        EXPECT(seen * 20 < made_host_alloc && seen_v2 == 0);
        EXPECT(pinned > 0 && pinned <= seen);
    } else {
        EXPECT(seen == made_host_alloc && seen_v2 == made_alloc_host && pinned == 0);
    }
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
