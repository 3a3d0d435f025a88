/* Many threads make their first driver calls at the same moment (drk starts
 * under a race) and keep launching and allocating: every call must reach the
 * driver and be counted exactly once. Linked -lcuda. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/fakecuda.h"
#include "tests/routes/counts.h"

enum { THREADS = 16, LOOPS = 400 };

static const char image[] = "DRKFAKE1\nempty\nfill\n";
static CUcontext ctx;
static pthread_barrier_t start;
static int failures;

#define CHECK(call)                                                            \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)r_); \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                \
        }                                                                      \
    } while (0)

static void *worker(void *arg)
{
    long id = (long)arg;
    CUmodule mod;
    CUfunction empty, fill;
    CUstream s;
    CHECK(cuCtxSetCurrent(ctx));
    pthread_barrier_wait(&start);
    CHECK(cuModuleLoadData(&mod, image));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill"));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < LOOPS; i++) {
        CUdeviceptr p;
        int n = 64;
        float v = (float)id;
        CHECK(cuMemAlloc_v2(&p, (size_t)n * sizeof(float)));
        void *params[] = {&p, &v, &n};
        CHECK(cuLaunchKernel(fill, 2, 1, 1, 32, 1, 1, 0, s, params, NULL));
        CHECK(cuLaunchKernel_ptsz(empty, 1, 1, 1, 32 + (unsigned)(i % 3), 1, 1, 0, NULL, NULL, NULL));
        CUlaunchConfig cfg = {1, 1, 1, 64, 1, 1, 0, s, NULL, 0};
        CHECK(cuLaunchKernelEx(&cfg, empty, NULL, NULL));
        CHECK(cuMemFree_v2(p));
    }
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuModuleUnload(mod));
    return NULL;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);

    const unsigned long long T = THREADS, L = LOOPS;
    count_entry calls[] = {
        {"cuModuleLoadData", T},        {"cuModuleGetFunction", 2 * T}, {"cuStreamCreate", T},
        {"cuMemAlloc_v2", T * L},       {"cuLaunchKernel", T * L},      {"cuLaunchKernel_ptsz", T * L},
        {"cuLaunchKernelEx", T * L},    {"cuMemFree_v2", T * L},        {"cuStreamDestroy_v2", T},
        {"cuModuleUnload", T},
    };
    count_entry kernels[] = {{"fill", T * L}, {"empty", 2 * T * L}};
    char memory[160];
    snprintf(memory, sizeof memory, "{\"device\": {\"allocs\": %llu, \"bytes\": %llu, \"frees\": %llu, \"failed_frees\": 0}}",
             T * L, T * L * 64 * sizeof(float), T * L);
    /* Under drk's device pool the driver sees no allocation calls. */
    const char *pool = getenv("ROUTE_POOL");
    int pooled = pool && strcmp(pool, "1") == 0;
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        if (fakecuda_calls(calls[i].name) != calls[i].n &&
            !(pooled && strncmp(calls[i].name, "cuMem", 5) == 0 && fakecuda_calls(calls[i].name) == 0)) {
            fprintf(stderr, "driver saw %llu %s, expected %llu\n", fakecuda_calls(calls[i].name), calls[i].name,
                    calls[i].n);
            failures++;
        }
    /* A driver that has shut down, as the real one may have when drk writes
     * its report at exit: the report must still know the driver's version. */
    fakecuda_inject_error("cuDriverGetVersion", CUDA_ERROR_DEINITIALIZED, 1000000);
    if (argc > 1 && counts_write(argv[1], calls, sizeof calls / sizeof *calls, kernels, 2, memory) != 0)
        failures++;
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
