/* What CUPTI attached costs a launch call, state by state, in one process,
 * so that drift falls on every state alike. drk's evolution starts CUPTI
 * once a kernel it could evolve is launched, and rests the kernel records
 * between timed rounds; on the H200 a launch-bound program still ran slower
 * with evolution on while the records rested (docs/evolve.md, "What kernel
 * records may cost"). This says which part costs:
 *
 *   detached  CUPTI not attached (before its first start, and after each
 *             cuptiFinalize)
 *   copies    attached, memcpy and memset records on (what resting leaves)
 *   kernels   kernel records on as well (a timed round)
 *   no_kinds  attached, every kind disabled
 *
 * Each cycle measures the four in that order and ends with cuptiFinalize
 * (CUPTI detaches; the next cycle attaches it again). If cuptiFinalize is
 * refused, the cycles go on attached, and "detached" is only the first
 * cycle's. Each state: BATCHES batches of LAUNCHES launches of an empty
 * kernel on a stream of its own; only the launch calls are timed, the
 * stream is synchronized after each batch (untimed), so the GPU never sets
 * the pace. Prints each state's median time a launch over all its batches,
 * and its ratio to "detached". A benchmark: it prints and judges nothing.
 *
 *   cupti_cost CUPTI_SO [CYCLES [BATCHES [LAUNCHES]]]   (5 20 5000) */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti_activity.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "cupti_cost"
#include "bench_cuda.h"
#include "bench_cupti.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry empty()\n{\nret;\n}\n";

enum { DETACHED, COPIES, KERNELS, NO_KINDS, STATES };
static const char *const names[STATES] = {"detached", "copies", "kernels", "no_kinds"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cupti_cost CUPTI_SO [CYCLES [BATCHES [LAUNCHES]]]\n");
        return 2;
    }
    int cycles = argc > 2 ? atoi(argv[2]) : 5, batches = argc > 3 ? atoi(argv[3]) : 20;
    int launches = argc > 4 ? atoi(argv[4]) : 5000;
    if (cycles < 1 || batches < 1 || launches < 1) {
        fprintf(stderr, "cupti_cost: CYCLES, BATCHES and LAUNCHES must be positive\n");
        return 2;
    }
    bench_cupti_open(argv[1]);
    CUdevice dev;
    CUmodule mod;
    CUfunction fn;
    CUstream stream;
    bench_primary_context(&dev);
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&fn, mod, "empty"));
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    /* Warm: the first launches pay the module's first use. */
    for (int i = 0; i < 1000; i++)
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
    CHECK(cuStreamSynchronize(stream));

    size_t cap = (size_t)cycles * (size_t)batches;
    double *us[STATES];
    size_t n[STATES] = {0};
    for (int s = 0; s < STATES; s++)
        if (!(us[s] = malloc(cap * sizeof **us))) {
            fprintf(stderr, "cupti_cost: out of memory\n");
            return 1;
        }
    static const CUpti_ActivityKind copies[] = {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
    int detaches = cupti.finalize != NULL, attached = 0;
    /* What a detach and the next attach cost the calling thread. */
    double *attach_ms = malloc((size_t)cycles * sizeof *attach_ms);
    double *finalize_ms = malloc((size_t)cycles * sizeof *finalize_ms);
    size_t nattach = 0, nfinalize = 0;
    if (!attach_ms || !finalize_ms) {
        fprintf(stderr, "cupti_cost: out of memory\n");
        return 1;
    }
    for (int c = 0; c < cycles; c++) {
        for (int s = 0; s < STATES; s++) {
            if (s == DETACHED && attached)
                continue; /* cuptiFinalize refused: no detached state after the first cycle */
            if (s == COPIES) {
                double t0 = now_ms();
                bench_cupti_register();
                for (size_t k = 0; k < sizeof copies / sizeof *copies; k++)
                    CUPTI_CHECK(cupti.enable(copies[k]));
                if (!attached)
                    attach_ms[nattach++] = now_ms() - t0;
                attached = 1;
            } else if (s == KERNELS) {
                CUPTI_CHECK(cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
            } else if (s == NO_KINDS) {
                CUPTI_CHECK(cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
                for (size_t k = 0; k < sizeof copies / sizeof *copies; k++)
                    CUPTI_CHECK(cupti.disable(copies[k]));
            }
            for (int b = 0; b < batches; b++) {
                double t0 = now_ms();
                for (int i = 0; i < launches; i++)
                    CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
                double t = now_ms() - t0;
                CHECK(cuStreamSynchronize(stream));
                us[s][n[s]++] = t * 1e3 / launches;
            }
        }
        CUPTI_CHECK(cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        if (detaches) {
            double t0 = now_ms();
            CUptiResult r = cupti.finalize();
            if (r == CUPTI_SUCCESS) {
                finalize_ms[nfinalize++] = now_ms() - t0;
                attached = 0;
            } else {
                printf("cupti_cost: cuptiFinalize refused (CUPTI error %d): the cycles go on attached\n", (int)r);
                detaches = 0;
            }
        }
    }
    double base = median(us[DETACHED], n[DETACHED]);
    printf("cupti_cost: %d cycles of %d batches x %d launches, CUPTI %s%s\n", cycles, batches, launches, argv[1],
           cupti.finalize ? "" : " (no cuptiFinalize: detached only before the first start)");
    for (int s = 0; s < STATES; s++) {
        double m = median(us[s], n[s]);
        printf("  %-9s %7.4f us a launch (median of %zu batches)  %.4fx detached's time\n", names[s], m, n[s],
               m / base);
    }
    if (nattach)
        printf("  attach (register the buffers, enable copies): median %.3f ms of %zu\n", median(attach_ms, nattach),
               nattach);
    if (nfinalize)
        printf("  detach (cuptiFinalize): median %.3f ms of %zu\n", median(finalize_ms, nfinalize), nfinalize);
    CHECK(cuStreamDestroy(stream));
    CHECK(cuModuleUnload(mod));
    return 0;
}
