/* One of the twelve kernels of evolve_kernels.cu run as a program would run
 * it, for the evolution benchmark (evolve_bench.py): its compute_90 PTX handed
 * to cuModuleLoadData (the driver's default JIT; under drk with DRK_EVOLVE=1
 * the PTX drk keeps and may rebuild), then ROUNDS rounds of LAUNCHES launches
 * at its recorded shape (evolve_specs.h), each round timed with events on the
 * program's stream and by the wall clock, ended by cuProfilerStop, and
 * followed by a pause (drk's thread closes a round a 50 ms tick after its
 * end). Outputs written from scratch are zeroed before each round, so every
 * round's first launch writes new bytes.
 *
 *   evolve_run PTX_FILE KERNEL [ROUNDS [LAUNCHES [PAUSE_MS]]]   (16 1500 100)
 *
 * Prints one JSON object: the kernel, the module's load (JIT) time, per round
 * the GPU time and the wall time a launch (ms) and the longest launch call
 * (a stall: the launch queue full, or the driver busy with a build) with
 * when it began (CLOCK_MONOTONIC seconds, as drk's debug lines), and an FNV-1a hash of the
 * outputs at the end (equal natively and under drk for the same rounds and
 * launches: every kernel here is deterministic).
 *
 * VARIANT runs the program natively as one variant of evolve_space.c's
 * space would run it: "REGS,MINCTAS,OPT,CACHE,CARVEOUT" (0 / -1 for the
 * driver's default, as tests/evolve/spaces/ records them), the PTX JIT'd
 * with those options (cuModuleLoadDataEx) and the carveout set BY:
 *   fn      cuFuncSetAttribute on the function, once (as evolve_space does)
 *   launch  on each launch (cuLaunchKernelEx's PREFERRED_SHARED_MEMORY_
 *           CARVEOUT attribute; the function's own left at the default)
 *   alt     as `launch` in even rounds and no attribute in odd ones: the
 *           same function, so the rounds tell whether the attribute holds
 *           for its launch only
 * The benchmark's "exhaustive best" runs this way, in the same run as drk.
 *
 *   evolve_run PTX_FILE KERNEL [ROUNDS [LAUNCHES [PAUSE_MS [VARIANT [BY]]]]] */
#include <cuda.h>
#include <cudaProfiler.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "evolve_run"
#include "bench_cuda.h"

#include "evolve_specs.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: evolve_run PTX_FILE KERNEL [ROUNDS [LAUNCHES [PAUSE_MS [VARIANT [fn|launch|alt]]]]]\n");
        return 2;
    }
    const int rounds = argc > 3 ? atoi(argv[3]) : 16;
    const int launches = argc > 4 ? atoi(argv[4]) : 1500;
    const int pause_ms = argc > 5 ? atoi(argv[5]) : 100;
    int regs = 0, minctas = 0, opt = 4, cache = -1, carveout = -1;
    const char *by = argc > 7 ? argv[7] : "fn";
    if (argc > 6 && strcmp(argv[6], "default") != 0 &&
        (sscanf(argv[6], "%d,%d,%d,%d,%d", &regs, &minctas, &opt, &cache, &carveout) != 5 || regs < 0 ||
         minctas < 0 || opt < 0 || opt > 4 || cache < -1 || carveout < -1 || carveout > 100)) {
        fprintf(stderr, "evolve_run: VARIANT is REGS,MINCTAS,OPT,CACHE,CARVEOUT (e.g. 48,0,4,-1,100), not %s\n",
                argv[6]);
        return 2;
    }
    if (strcmp(by, "fn") != 0 && strcmp(by, "launch") != 0 && strcmp(by, "alt") != 0) {
        fprintf(stderr, "evolve_run: BY is fn, launch or alt, not %s\n", by);
        return 2;
    }
    const kernel_spec *k = find_kernel(argv[2]);
    if (!k || rounds < 1 || launches < 1 || pause_ms < 0) {
        fprintf(stderr, "evolve_run: unknown kernel %s or a bad count (kernels:", argv[2]);
        for (size_t i = 0; i < NKERNELS; i++)
            fprintf(stderr, " %s", kernels[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    CUdevice dev;
    char *ptx = bench_ptx_program(argv[1], &dev);
    if (!ptx)
        return 1;
    sleep_ms(300); /* drk's GPU times start a little after the context does */
    CUmodule mod;
    CUfunction fn;
    /* The options evolve_space.c passes for the same variant. */
    CUjit_option o[8];
    void *v[8];
    unsigned n = 0, threads = k->block[0] * k->block[1] * k->block[2];
    if (regs)
        o[n] = CU_JIT_MAX_REGISTERS, v[n++] = (void *)(uintptr_t)regs;
    if (minctas) {
        o[n] = CU_JIT_MIN_CTA_PER_SM, v[n++] = (void *)(uintptr_t)minctas;
        o[n] = CU_JIT_MAX_THREADS_PER_BLOCK, v[n++] = (void *)(uintptr_t)threads;
    }
    if (opt != 4)
        o[n] = CU_JIT_OPTIMIZATION_LEVEL, v[n++] = (void *)(uintptr_t)opt;
    if (cache >= 0)
        o[n] = CU_JIT_CACHE_MODE, v[n++] = (void *)(uintptr_t)cache;
    double t0 = now_ms();
    if (n)
        CHECK(cuModuleLoadDataEx(&mod, ptx, n, o, v));
    else
        CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&fn, mod, k->name));
    double load_ms = now_ms() - t0;
    if (carveout >= 0 && strcmp(by, "fn") == 0)
        CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carveout));
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT};
    attr.value.sharedMemCarveout = (unsigned)carveout;
    CUlaunchConfig lc = {k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], 0, NULL,
                         &attr, 1};

    CUdeviceptr d[6];
    for (int i = 0; i < k->nbufs; i++) {
        void *h = malloc(k->bufs[i].bytes);
        if (!h)
            return 1;
        fill_host(h, &k->bufs[i]);
        CHECK(cuMemAlloc(&d[i], k->bufs[i].bytes));
        CHECK(cuMemcpyHtoD(d[i], h, k->bufs[i].bytes));
        free(h);
    }
    uint64_t words[8];
    void *params[8];
    kernel_params(k, d, words, params);
    CUevent e0, e1;
    CHECK(cuEventCreate(&e0, 0));
    CHECK(cuEventCreate(&e1, 0));
    double *gpu = calloc((size_t)rounds, sizeof *gpu), *wall = calloc((size_t)rounds, sizeof *wall);
    double *longest = calloc((size_t)rounds, sizeof *longest); /* the longest launch call: a stall */
    double *longest_at = calloc((size_t)rounds, sizeof *longest_at); /* when it began (CLOCK_MONOTONIC) */
    if (!gpu || !wall || !longest || !longest_at)
        return 1;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < k->nbufs; i++)
            if (k->bufs[i].out && k->bufs[i].init == ZERO)
                CHECK(cuMemsetD8(d[i], 0, k->bufs[i].bytes));
        CHECK(cuCtxSynchronize());
        double w0 = now_ms();
        int per_launch = carveout >= 0 && (strcmp(by, "launch") == 0 || (strcmp(by, "alt") == 0 && r % 2 == 0));
        CHECK(cuEventRecord(e0, NULL));
        for (int l = 0; l < launches; l++) {
            double c0 = now_ms();
            if (per_launch)
                CHECK(cuLaunchKernelEx(&lc, fn, params, NULL));
            else
                CHECK(cuLaunchKernel(fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                                     k->block[2], 0, NULL, params, NULL));
            double c = now_ms() - c0;
            if (c > longest[r])
                longest[r] = c, longest_at[r] = c0;
        }
        CHECK(cuEventRecord(e1, NULL));
        CHECK(cuEventSynchronize(e1));
        wall[r] = (now_ms() - w0) / launches;
        float ms;
        CHECK(cuEventElapsedTime(&ms, e0, e1));
        gpu[r] = ms / launches;
        CHECK(cuProfilerStop()); /* the round's end, for drk */
        sleep_ms(pause_ms);
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < k->nbufs; i++) {
        if (!k->bufs[i].out)
            continue;
        unsigned char *b = malloc(k->bufs[i].bytes);
        if (!b)
            return 1;
        CHECK(cuMemcpyDtoH(b, d[i], k->bufs[i].bytes));
        for (size_t j = 0; j < k->bufs[i].bytes; j++)
            h = (h ^ b[j]) * 0x100000001b3ull;
        free(b);
    }
    printf("{\"kernel\": \"%s\", \"rounds\": %d, \"launches\": %d, \"load_ms\": %.3f, \"hash\": \"0x%016llx\", "
           "\"gpu_ms\": [",
           k->name, rounds, launches, load_ms, (unsigned long long)h);
    for (int r = 0; r < rounds; r++)
        printf("%s%.6f", r ? ", " : "", gpu[r]);
    printf("], \"wall_ms\": [");
    for (int r = 0; r < rounds; r++)
        printf("%s%.6f", r ? ", " : "", wall[r]);
    printf("], \"longest_launch_ms\": [");
    for (int r = 0; r < rounds; r++)
        printf("%s%.4f", r ? ", " : "", longest[r]);
    printf("], \"longest_launch_at_s\": [");
    for (int r = 0; r < rounds; r++)
        printf("%s%.6f", r ? ", " : "", longest_at[r] / 1e3);
    printf("]}\n");
    for (int i = 0; i < k->nbufs; i++)
        CHECK(cuMemFree(d[i]));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
