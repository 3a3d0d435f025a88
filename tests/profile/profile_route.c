/* GPU times under drk on the stand-in driver and the stand-in CUPTI (linked:
 * drk uses the copy the program loaded): kernels launched through the
 * driver, and activity records with known times queued as if the GPU had run
 * them; rounds ended by cuProfilerStop. Prints what it queued, for
 * check_profile.py to hold the report against.
 *
 *   profile_route rounds   four rounds; `empty` at two shapes, `hidden` (no
 *                          launch drk saw, as in a graph), a copy and a set;
 *                          from round 2 `empty`'s second shape takes twice as long;
 *                          in round 1 a module of PTX only (the driver JITs it)
 *   profile_route failing  a CUPTI that fails every call: the program runs on
 *   profile_route profiler after a round, the program registers activity
 *                          buffers of its own, as PyTorch's profiler does: its
 *                          callback must get only its own buffers, with the
 *                          records of what ran since
 *   profile_route lookup   after a round, the program looks CUPTI up with dlsym
 *   profile_route nvtx     rounds are NVTX ranges named "round" (DRK_ROUND's
 *                          default) with an "inner" range inside, instead of
 *                          cuProfilerStop; a range and a mark with a 1 MB name
 *   profile_route counters six rounds of 200 ms (fake clock) with a pause
 *                          after each, for drk's thread to close it and arm a
 *                          counter sample; each launch at the fake time its
 *                          record starts; `empty` at (4)x(64) four times as
 *                          long as at (1)x(32); prints the range profiler's
 *                          windows (FAKECUPTI_FAIL names an entry to fail;
 *                          FAKECUPTI_RANGES, the ranges a window decodes to;
 *                          FAKECUPTI_STOP_MS, the real time a sample's stop
 *                          takes; PROFILE_ROUTE_START_MS, a pause before the
 *                          first round)
 *   profile_route occupancy
 *                          eight rounds of `gemm`, `attn` and `empty`; from
 *                          round 5 `gemm` is a function reloaded with 128
 *                          registers (same name and shape), from round 6
 *                          `attn` takes 40 KiB of dynamic shared memory */
#include <cuda.h>
#include <cudaProfiler.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/fakecuda/fakecuda.h"
#include "tests/fakecupti/fakecupti.h"

#define ROUNDS 4
#define ROUND_NS 1000000ull /* 1 ms a round, on the fake's clock */

static int check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS)
        fprintf(stderr, "profile_route: %s failed: %d\n", what, (int)r);
    return r == CUDA_SUCCESS;
}

/* drk may start CUPTI on its own thread: wait until its records are on. */
static int cupti_on(void)
{
    for (int i = 0; i < 500; i++) {
        if (fakecupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) && fakecupti_enabled(CUPTI_ACTIVITY_KIND_MEMSET))
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The program's own CUPTI client, for the profiler mode. */
static uint8_t own[2][1 << 16];
static int own_next, foreign_buffers;
static size_t own_records;

static void CUPTIAPI own_requested(uint8_t **buffer, size_t *size, size_t *max)
{
    *buffer = own[own_next++ % 2];
    *size = sizeof own[0];
    *max = 0;
}

static void CUPTIAPI own_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    if (buffer != own[0] && buffer != own[1]) {
        foreign_buffers++; /* a buffer of drk's: never */
        return;
    }
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        own_records++;
}

/* After round 0: a profiler starts in the program. */
static int own_client(const char *mode)
{
    if (strcmp(mode, "lookup") == 0) {
        void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
        return h && dlsym(h, "cuptiActivityRegisterCallbacks") != NULL;
    }
    return cuptiActivityRegisterCallbacks(own_requested, own_completed) == CUPTI_SUCCESS &&
           cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
}

/* Counters: the sampled launch's record must start inside its window,
 * so each launch happens at its record's start on the fake clock. */
static int counters(CUfunction empty, uint64_t base)
{
    const uint64_t round_ns = 200000000ull;
    /* A program's long start (imports, building its model), in real time:
     * it must not buy a burst of samples later. */
    if (getenv("PROFILE_ROUTE_START_MS")) {
        long ms = atol(getenv("PROFILE_ROUTE_START_MS"));
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (int r = 0; r < 6; r++) {
        uint64_t t0 = base + (uint64_t)r * 2 * round_ns;
        for (int i = 0; i < 10; i++) {
            uint64_t s = t0 + 1000 + (uint64_t)i * 20000;
            fakecupti_set_time(s);
            if (!check(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), "launch"))
                return 1;
            fakecupti_kernel("empty", 1, 1, 1, 32, 1, 1, 0, s, s + 2000, 7);
            fakecupti_set_time(s + 3000);
            if (!check(cuLaunchKernel(empty, 4, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL), "launch"))
                return 1;
            fakecupti_kernel("empty", 4, 1, 1, 64, 1, 1, 0, s + 3000, s + 11000, 7);
        }
        fakecupti_set_time(t0 + round_ns);
        if (!check(cuProfilerStop(), "cuProfilerStop"))
            return 1;
        /* Past the round's end by more than a tick, then two ticks of real
         * time: drk's thread marks it, closes it and arms a sample. */
        fakecupti_set_time(t0 + round_ns + 100000000ull);
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
    }
    printf("counters: %llu windows %llu released\n", fakecupti_profiler_windows(),
           fakecupti_calls("cuptiProfilerDeInitialize"));
    return 0;
}

static void nothing(const fakecuda_thread *t) { (void)t; }

/* The occupancy mode: rounds of 1 ms from `base`, by cuProfilerStop. */
static int occupancy_rounds(uint64_t base)
{
    CUmodule mod, reloaded;
    CUfunction gemm, attn, empty;
    if (fakecuda_register_kernel("gemm", nothing) != 0 || fakecuda_register_kernel("attn", nothing) != 0 ||
        !check(cuModuleLoadData(&mod, "DRKFAKE1\ngemm\nattn\nempty\n"), "load") ||
        !check(cuModuleGetFunction(&gemm, mod, "gemm"), "get") ||
        !check(cuModuleGetFunction(&attn, mod, "attn"), "get") ||
        !check(cuModuleGetFunction(&empty, mod, "empty"), "get"))
        return 0;
    for (int r = 0; r < 8; r++) {
        uint64_t t0 = base + r * ROUND_NS;
        fakecupti_set_time(t0 + 10);
        if (r == 5) {
            /* Rebuilt with more registers, as a JIT with other options
             * would: a new handle, the same name and launch shape. */
            if (fakecuda_set_kernel_resources("gemm", 128, 0) != 0 ||
                !check(cuModuleLoadData(&reloaded, "DRKFAKE1\ngemm\n"), "reload") ||
                !check(cuModuleGetFunction(&gemm, reloaded, "gemm"), "get"))
                return 0;
            fakecupti_kernel_resources("gemm", 128, 0);
        }
        unsigned dyn = r >= 6 ? 40960 : 0;
        for (int i = 0; i < 10; i++) {
            if (!check(cuLaunchKernel(gemm, 64, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL), "launch") ||
                !check(cuLaunchKernel(attn, 8, 1, 1, 256, 1, 1, dyn, NULL, NULL, NULL), "launch") ||
                !check(cuLaunchKernel(empty, 4, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL), "launch"))
                return 0;
            uint64_t s = t0 + 1000 + (uint64_t)i * 20000;
            fakecupti_kernel("gemm", 64, 1, 1, 256, 1, 1, 0, s, s + 8000, 7);
            fakecupti_kernel("attn", 8, 1, 1, 256, 1, 1, dyn, s + 9000, s + 14000, 7);
            fakecupti_kernel("empty", 4, 1, 1, 64, 1, 1, 0, s + 15000, s + 18000, 7);
        }
        if (r == 5) {
            /* drk's thread ticks meanwhile and works the four shapes out
             * itself, once each, in the primary context it pushes (this
             * program pushes none), as on a run whose rounds last longer
             * than a tick. */
            unsigned long long calc = 0, pushes = 0, pops = 0;
            /* A tick is 50 ms; a loaded machine may take longer. Done when
             * the four are in and the context is popped again. */
            for (int i = 0; i < 500 && (calc < 4 || !pushes || pushes != pops); i++) {
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, NULL);
                pops = fakecuda_calls("cuCtxPopCurrent_v2");
                calc = fakecuda_calls("cuOccupancyMaxActiveBlocksPerMultiprocessor");
                pushes = fakecuda_calls("cuCtxPushCurrent_v2");
            }
            printf("occupancy: by round 5, %llu calculator calls, %llu pushes, %llu pops\n", calc, pushes, pops);
            if (calc != 4 || !pushes || pushes != pops)
                return 0;
        }
        if (r == 7) {
            /* A module loaded, launched and unloaded within a tick: its
             * shape is worked out before the unload retires the handle. */
            CUmodule brief_mod;
            CUfunction brief;
            unsigned long long before = fakecuda_calls("cuOccupancyMaxActiveBlocksPerMultiprocessor");
            if (fakecuda_register_kernel("brief", nothing) != 0 ||
                !check(cuModuleLoadData(&brief_mod, "DRKFAKE1\nbrief\n"), "load brief") ||
                !check(cuModuleGetFunction(&brief, brief_mod, "brief"), "get brief") ||
                !check(cuLaunchKernel(brief, 2, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL), "launch brief"))
                return 0;
            fakecupti_kernel("brief", 2, 1, 1, 128, 1, 1, 0, t0 + 500000, t0 + 500100, 7);
            if (!check(cuModuleUnload(brief_mod), "unload brief"))
                return 0;
            printf("occupancy: brief: %llu calculator calls by its unload\n",
                   fakecuda_calls("cuOccupancyMaxActiveBlocksPerMultiprocessor") - before);
        }
        fakecupti_set_time(t0 + ROUND_NS);
        if (!check(cuProfilerStop(), "cuProfilerStop"))
            return 0;
    }
    fakecupti_set_time(base + 8 * ROUND_NS + 5000);
    printf("occupancy: 8 rounds of %llu ns from %llu\n", (unsigned long long)ROUND_NS, (unsigned long long)base);
    return 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "rounds";
    /* The fake's clock, which drk reads when it starts CUPTI: the first
     * round opens just before `base`. */
    uint64_t base = 1000000000ull;
    fakecupti_set_time(base - 1000);
    if (strcmp(mode, "failing") == 0)
        fakecupti_fail_all(CUPTI_ERROR_UNKNOWN);
    if (getenv("FAKECUPTI_RANGES"))
        fakecupti_set_ranges((size_t)atoi(getenv("FAKECUPTI_RANGES")));
    if (getenv("FAKECUPTI_STOP_MS"))
        fakecupti_set_stop_delay((unsigned)atoi(getenv("FAKECUPTI_STOP_MS")));
    if (getenv("FAKECUPTI_FAIL"))
        fakecupti_fail_one(getenv("FAKECUPTI_FAIL"), CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction empty;
    if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") || !check(cuCtxSetCurrent(ctx), "set") ||
        !check(cuModuleLoadData(&mod, "DRKFAKE1\nempty\n"), "load"))
        return 1;
    /* The load was the first call drk saw, with a context current: CUPTI
     * started in it, before it returned (not on drk's thread meanwhile). */
    printf("records on when the first call returned: %d\n", fakecupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (!check(cuModuleGetFunction(&empty, mod, "empty"), "get"))
        return 1;
    if (strcmp(mode, "failing") == 0) {
        for (int i = 0; i < 10; i++)
            if (!check(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), "launch"))
                return 1;
        if (!check(cuProfilerStop(), "cuProfilerStop"))
            return 1;
        printf("failing: 10 launches\n");
        return 0;
    }
    if (!cupti_on()) {
        fprintf(stderr, "profile_route: drk never enabled CUPTI's records\n");
        return 1;
    }
    if (strcmp(mode, "counters") == 0)
        return counters(empty, base);
    if (strcmp(mode, "occupancy") == 0)
        return occupancy_rounds(base) ? 0 : 1;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = base + r * ROUND_NS;
        fakecupti_set_time(t0 + 10);
        int nvtx = strcmp(mode, "nvtx") == 0;
        if (nvtx) {
            nvtxRangePushA("round");
            nvtxRangePushA("inner");
            nvtxRangePop();
        }
        for (int i = 0; i < 10; i++) {
            if (!check(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), "launch") ||
                !check(cuLaunchKernel(empty, 4, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL), "launch"))
                return 1;
            uint64_t s = t0 + 1000 + (uint64_t)i * 20000;
            fakecupti_kernel("empty", 1, 1, 1, 32, 1, 1, 0, s, s + 2000, 7);
            fakecupti_kernel("empty", 4, 1, 1, 64, 1, 1, 0, s + 3000, s + 3000 + (r >= 2 ? 8000 : 4000), 7);
        }
        fakecupti_kernel("hidden", 2, 1, 1, 128, 1, 1, 256, t0 + 300000, t0 + 310000, 9);
        if (r == 1) {
            static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                                      ".visible .entry empty()\n{\n\tret;\n}\n";
            CUmodule jit;
            if (!check(cuModuleLoadData(&jit, ptx), "PTX load"))
                return 1;
        }
        fakecupti_memcpy(1 << 20, t0 + 400000, t0 + 420000, 7);
        fakecupti_memset(4096, t0 + 430000, t0 + 431000, 7);
        fakecupti_set_time(t0 + ROUND_NS);
        if (nvtx)
            nvtxRangePop();
        else if (!check(cuProfilerStop(), "cuProfilerStop"))
            return 1;
        if (r == 0 && (strcmp(mode, "profiler") == 0 || strcmp(mode, "lookup") == 0) && !own_client(mode)) {
            fprintf(stderr, "profile_route: the program's own CUPTI client did not start\n");
            return 1;
        }
    }
    if (strcmp(mode, "profiler") == 0) {
        cuptiActivityFlushAll(0);
        printf("profiler: %zu records, %d foreign buffers\n", own_records, foreign_buffers);
        if (foreign_buffers || own_records != 3 * 20 + 3)
            return 1;
    }
    if (strcmp(mode, "nvtx") == 0) {
        /* Names of no round, however long: nothing happens. */
        static char huge[1 << 20];
        memset(huge, 'r', sizeof huge - 1);
        nvtxRangePushA(huge);
        nvtxMarkA(huge);
        nvtxRangePop();
        nvtxRangePop(); /* one pop too many: NVTX's own answer, no round */
    }
    /* The program's own time goes on past its last mark: the exit round. */
    fakecupti_set_time(base + ROUNDS * ROUND_NS + 5000);
    printf("%s: %d rounds of %llu ns from %llu\n", mode, ROUNDS, (unsigned long long)ROUND_NS,
           (unsigned long long)base);
    return 0;
}
