/* Whether the shared-memory carveout one launch asks for stays on the SMs
 * for the launches after it that ask for none: drk's trials run variants
 * with carveouts 25-100 in drk's own context, between the program's rounds,
 * and the program's kernels (most of them with no preference of their own)
 * run next.
 *
 *   carveout_left PTX_FILE KERNEL [LAUNCHES [REPS]]   (300 8)
 *
 * One of evolve_kernels.cu's kernels (evolve_specs.h), loaded in the
 * program's primary context and in a second context made as drk makes its
 * own (cuCtxCreate, blocking sync), each with its own buffers. A timed round
 * is LAUNCHES launches in the primary context with no carveout asked, timed
 * with events. Before each timed round, one of these, in turns (REPS each,
 * interleaved, so that the GPU's drift falls on all alike):
 *   none          nothing
 *   other:-1      5 launches in the second context, no carveout asked
 *   other:C       5 launches there asking carveout C (100, 50, 25, 0)
 *   other:100,-1  5 at 100, then 1 asking none
 *   other:100,0   5 at 100, then 1 asking 0
 *   same:100      5 launches in the primary context asking 100
 * and, first of all, 3 rounds before any carveout was asked ("fresh").
 * Prints one JSON object: per mode its rounds' GPU time a launch (ms), the
 * median, and the median over none's. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "carveout_left"
#include "bench_cuda.h"

#include "evolve_specs.h"

typedef struct {
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr d[6];
    uint64_t words[8];
    void *params[8];
} side;

/* The kernel and its buffers in the current context. */
static void side_init(side *s, const kernel_spec *k, const char *ptx)
{
    CHECK(cuModuleLoadData(&s->mod, ptx));
    CHECK(cuModuleGetFunction(&s->fn, s->mod, k->name));
    for (int i = 0; i < k->nbufs; i++) {
        void *h = malloc(k->bufs[i].bytes);
        if (!h)
            exit(1);
        fill_host(h, &k->bufs[i]);
        CHECK(cuMemAlloc(&s->d[i], k->bufs[i].bytes));
        CHECK(cuMemcpyHtoD(s->d[i], h, k->bufs[i].bytes));
        free(h);
    }
    kernel_params(k, s->d, s->words, s->params);
}

/* n launches asking `carveout` (-1: no attribute), then a synchronize. */
static void launch_n(const side *s, const kernel_spec *k, int carveout, int n)
{
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT};
    attr.value.sharedMemCarveout = (unsigned)carveout;
    CUlaunchConfig lc = {k->grid[0],  k->grid[1], k->grid[2], k->block[0],       k->block[1],
                         k->block[2], 0,          NULL,       carveout >= 0 ? &attr : NULL, carveout >= 0};
    for (int i = 0; i < n; i++)
        CHECK(cuLaunchKernelEx(&lc, s->fn, (void **)s->params, NULL));
    CHECK(cuCtxSynchronize());
}

static double timed_round(const side *s, const kernel_spec *k, int launches, CUevent e0, CUevent e1)
{
    CHECK(cuEventRecord(e0, NULL));
    for (int l = 0; l < launches; l++)
        CHECK(cuLaunchKernel(s->fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], 0,
                             NULL, (void **)s->params, NULL));
    CHECK(cuEventRecord(e1, NULL));
    CHECK(cuEventSynchronize(e1));
    float ms;
    CHECK(cuEventElapsedTime(&ms, e0, e1));
    return ms / launches;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        exit(1);
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

enum { NONE, OTHER, OTHER_THEN, SAME };
static const struct {
    const char *name;
    int where, carveout, then;
} modes[] = {
    {"none", NONE, 0, 0},           {"other:-1", OTHER, -1, 0},      {"other:100", OTHER, 100, 0},
    {"other:50", OTHER, 50, 0},     {"other:25", OTHER, 25, 0},      {"other:0", OTHER, 0, 0},
    {"other:100,-1", OTHER_THEN, 100, -1}, {"other:100,0", OTHER_THEN, 100, 0}, {"same:100", SAME, 100, 0},
};
#define NMODES (sizeof modes / sizeof modes[0])

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: carveout_left PTX_FILE KERNEL [LAUNCHES [REPS]]\n");
        return 2;
    }
    const int launches = argc > 3 ? atoi(argv[3]) : 300, reps = argc > 4 ? atoi(argv[4]) : 8;
    const kernel_spec *k = find_kernel(argv[2]);
    if (!k || launches < 1 || reps < 1) {
        fprintf(stderr, "carveout_left: unknown kernel %s or a bad count\n", argv[2]);
        return 2;
    }
    CUdevice dev;
    char *ptx = bench_ptx_program(argv[1], &dev);
    if (!ptx)
        return 1;
    CUcontext prog, own;
    CHECK(cuCtxGetCurrent(&prog));
    side p, o;
    side_init(&p, k, ptx);
    CUevent e0, e1;
    CHECK(cuEventCreate(&e0, 0));
    CHECK(cuEventCreate(&e1, 0));
    /* Warm, then the rounds before any carveout was asked anywhere. */
    launch_n(&p, k, -1, 20);
    double fresh[3];
    for (int r = 0; r < 3; r++)
        fresh[r] = timed_round(&p, k, launches, e0, e1);
    CHECK(cuCtxCreate(&own, NULL, CU_CTX_SCHED_BLOCKING_SYNC, dev));
    side_init(&o, k, ptx);
    CHECK(cuCtxSetCurrent(prog));

    double *t = calloc(NMODES * (size_t)reps, sizeof *t);
    if (!t)
        return 1;
    for (int r = 0; r < reps; r++)
        for (size_t m = 0; m < NMODES; m++) {
            if (modes[m].where == OTHER || modes[m].where == OTHER_THEN) {
                CHECK(cuCtxSetCurrent(own));
                launch_n(&o, k, modes[m].carveout, 5);
                if (modes[m].where == OTHER_THEN)
                    launch_n(&o, k, modes[m].then, 1);
                CHECK(cuCtxSetCurrent(prog));
            } else if (modes[m].where == SAME) {
                launch_n(&p, k, modes[m].carveout, 5);
            }
            t[m * (size_t)reps + (size_t)r] = timed_round(&p, k, launches, e0, e1);
        }
    double base = median(t, reps);
    printf("{\"kernel\": \"%s\", \"launches\": %d, \"fresh_ms\": [%.6f, %.6f, %.6f], \"modes\": {", k->name, launches,
           fresh[0], fresh[1], fresh[2]);
    for (size_t m = 0; m < NMODES; m++) {
        const double *v = t + m * (size_t)reps;
        double med = median(v, reps);
        printf("%s\"%s\": {\"median_ms\": %.6f, \"over_none\": %.4f, \"ms\": [", m ? ", " : "", modes[m].name, med,
               med / base);
        for (int r = 0; r < reps; r++)
            printf("%s%.6f", r ? ", " : "", v[r]);
        printf("]}");
    }
    printf("}}\n");
    CHECK(cuCtxDestroy(own));
    return 0;
}
