/* What the program loses when another context of the same GPU does a little
 * work: the price evolution's ledger charges for each module drk loads into
 * its own context and for each wait of its trials there (evolve/engine_capture.c,
 * SWITCH_NS and LOAD_NS; docs/evolve.md, "What a switch costs").
 *
 * One thread plays the program, as evolve_run does: rounds of LAUNCHES
 * launches of a kernel that spins KERNEL_US microseconds on every SM, on
 * the legacy stream, then cuCtxSynchronize; each round's wall time is what
 * it cost. Another thread plays drk, in a context of its own made as drk
 * makes it (CU_CTX_SCHED_BLOCKING_SYNC), and in each round does one kind
 * of work, K times spread over the round:
 *   none     nothing (the baseline; every other kind is a round against it)
 *   load     cuModuleLoadDataEx of a cubin (linked beforehand) and the
 *            kernel's lookup, as a build's load does
 *   unload   cuModuleUnload of K modules the load round made
 *   wait     a launch of one short kernel on its own stream, then
 *            cuStreamSynchronize: a wait of trials with no GPU time to speak of
 *   trials   TRIAL_RUNS launches of the spin kernel for KERNEL_US, then a
 *            wait: a capture's batch (its GPU time is TRIAL_RUNS x KERNEL_US)
 *   burst    the K loads back to back, then one wait (the loads of a batch
 *            made just before its trials, in one switch if the GPU allows)
 *   copy     a device-to-device copy of COPY_MB MiB, then a wait: what a
 *            trial's copies, poison and compares cost beyond the switch
 * Rounds run in cycles of every kind, CYCLES times, so drift hits all
 * alike. Printed per kind: the program's median round, its median excess
 * over the same cycle's baseline, that excess per operation (burst: per
 * load), and the operations' own wall time on drk's side. A benchmark: it
 * prints and judges nothing.
 *
 *   switch_cost [CYCLES [LAUNCHES [KERNEL_US [K [TRIAL_RUNS [COPY_MB]]]]]]   (15 1500 57 6 4 64) */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "switch_cost"
#include "bench_cuda.h"
#include "bench_spin.h"

enum kind { NONE, LOAD, UNLOAD, WAIT, TRIALS, BURST, COPY, KINDS };
static const char *const kind_name[KINDS] = {"none", "load", "unload", "wait", "trials", "burst", "copy"};

enum { KMAX = 64, CYCLES_MAX = 200 };
static int cycles = 15, launches = 1500, kernel_us = 57, k_ops = 6, trial_runs = 4, copy_mb = 64;
static unsigned sms;
static unsigned long long spin_cycles;

/* drk's side: its context, a stream, the cubin, the modules it holds. */
static CUcontext own;
static CUstream own_stream;
static CUfunction own_spin, own_tiny;
static CUdeviceptr own_word, own_src, own_dst;
static void *cubin;
static size_t cubin_len;
static CUmodule held[KMAX];
static int nheld;

/* The round under way: its kind, and the gap between operations. */
static atomic_int round_kind = -1, round_done, prog_over;
static double gap_ms;
static double op_ms[KINDS][CYCLES_MAX * KMAX];
static int nop[KINDS];

static void note_op(enum kind k, double ms)
{
    if (nop[k] < CYCLES_MAX * KMAX)
        op_ms[k][nop[k]++] = ms;
}

static void one_wait(void)
{
    void *kp[] = {&own_word};
    CHECK(cuLaunchKernel(own_tiny, 1, 1, 1, 1, 1, 1, 0, own_stream, kp, NULL));
    CHECK(cuStreamSynchronize(own_stream));
}

static void one_load(void)
{
    CUmodule m;
    CUfunction f;
    CHECK(cuModuleLoadDataEx(&m, cubin, 0, NULL, NULL));
    CHECK(cuModuleGetFunction(&f, m, "spin"));
    held[nheld++] = m;
}

static void do_op(enum kind k)
{
    double t0 = now_ms();
    switch (k) {
    case LOAD:
        one_load();
        break;
    case UNLOAD:
        CHECK(cuModuleUnload(held[--nheld]));
        break;
    case WAIT:
        one_wait();
        break;
    case TRIALS: {
        void *kp[] = {&spin_cycles};
        for (int i = 0; i < trial_runs; i++)
            CHECK(cuLaunchKernel(own_spin, sms, 1, 1, 32, 1, 1, 0, own_stream, kp, NULL));
        CHECK(cuStreamSynchronize(own_stream));
        break;
    }
    case BURST:
        for (int i = 0; i < k_ops; i++)
            one_load();
        one_wait();
        break;
    case COPY:
        CHECK(cuMemcpyDtoDAsync(own_dst, own_src, (size_t)copy_mb << 20, own_stream));
        CHECK(cuStreamSynchronize(own_stream));
        break;
    default:
        return;
    }
    note_op(k, now_ms() - t0);
}

static void *drk_side(void *arg)
{
    (void)arg;
    CHECK(cuCtxSetCurrent(own));
    for (;;) {
        int k;
        while ((k = atomic_load(&round_kind)) < 0)
            sleep_ms(0);
        if (k == KINDS)
            return NULL;
        /* Spread over the round; a burst is one operation, mid-round. */
        int n = k == NONE ? 0 : k == BURST ? 1 : k_ops;
        double step = k == BURST ? gap_ms * (k_ops + 1) / 2 : gap_ms;
        for (int i = 0; i < n; i++) {
            double until = now_ms() + step;
            while (now_ms() < until)
                sleep_ms(1);
            do_op((enum kind)k);
        }
        /* The burst's modules go once the program's round is over, with its
         * GPU idle: no round pays for them. */
        while (k == BURST && !atomic_load(&prog_over))
            sleep_ms(0);
        while (k == BURST && nheld)
            CHECK(cuModuleUnload(held[--nheld]));
        atomic_store(&round_kind, -1);
        atomic_store(&round_done, 1);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    /* The arguments in order, each optional after the ones before. */
    int *const arg[] = {&cycles, &launches, &kernel_us, &k_ops, &trial_runs, &copy_mb};
    for (int i = 1; i < argc && i <= (int)(sizeof arg / sizeof *arg); i++)
        *arg[i - 1] = atoi(argv[i]);
    if (cycles < 1 || cycles > CYCLES_MAX || launches < 1 || kernel_us < 1 || k_ops < 1 || k_ops > KMAX / 2 ||
        trial_runs < 1 || copy_mb < 1 || copy_mb > 4096) {
        fprintf(stderr, "usage: switch_cost [CYCLES (1-%d) [LAUNCHES [KERNEL_US [K (1-%d) [TRIAL_RUNS [COPY_MB "
                        "(1-4096)]]]]]]\n",
                CYCLES_MAX, KMAX / 2);
        return 2;
    }
    CUdevice dev;
    bench_primary_context(&dev);
    CUcontext prog;
    CHECK(cuCtxGetCurrent(&prog));
    int clock_khz, nsm;
    CHECK(cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev));
    CHECK(cuDeviceGetAttribute(&nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    sms = (unsigned)nsm;
    spin_cycles = (unsigned long long)clock_khz * (unsigned long long)kernel_us / 1000ull;

    /* The program's kernel, and its cubin linked once for drk's loads. */
    CUmodule pm;
    CUfunction prog_spin;
    CHECK(cuModuleLoadData(&pm, spin_ptx));
    CHECK(cuModuleGetFunction(&prog_spin, pm, "spin"));
    CUlinkState ls;
    void *out;
    CHECK(cuLinkCreate(0, NULL, NULL, &ls));
    CHECK(cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)spin_ptx, sizeof spin_ptx, "switch_cost.ptx", 0, NULL, NULL));
    CHECK(cuLinkComplete(ls, &out, &cubin_len));
    if (!(cubin = malloc(cubin_len)))
        return 1;
    memcpy(cubin, out, cubin_len);
    CHECK(cuLinkDestroy(ls));

    CUcontext popped;
    CHECK(cuCtxCreate(&own, NULL, CU_CTX_SCHED_BLOCKING_SYNC, dev));
    CHECK(cuStreamCreate(&own_stream, CU_STREAM_NON_BLOCKING));
    CUmodule om;
    CHECK(cuModuleLoadData(&om, spin_ptx));
    CHECK(cuModuleGetFunction(&own_spin, om, "spin"));
    CHECK(cuModuleGetFunction(&own_tiny, om, "tiny"));
    CHECK(cuMemAlloc(&own_word, 4));
    CHECK(cuMemAlloc(&own_src, (size_t)copy_mb << 20));
    CHECK(cuMemAlloc(&own_dst, (size_t)copy_mb << 20));
    CHECK(cuMemsetD8(own_src, 1, (size_t)copy_mb << 20));
    one_wait(); /* every function of drk's side loaded before the rounds */
    CHECK(cuCtxPopCurrent(&popped));
    CHECK(cuCtxSetCurrent(prog));

    gap_ms = launches * kernel_us / 1000.0 / (k_ops + 1);
    printf("switch_cost: %d cycles of %d kinds; a round %d launches of %d us on %u SMs (legacy stream); drk's "
           "side K=%d operations a round, %.1f ms apart; trials %d runs of %d us a wait\n",
           cycles, KINDS, launches, kernel_us, sms, k_ops, gap_ms, trial_runs, kernel_us);
    pthread_t th;
    if (pthread_create(&th, NULL, drk_side, NULL) != 0)
        return 1;

    void *kp[] = {&spin_cycles};
    static double round_ms[KINDS][CYCLES_MAX], excess[KINDS][CYCLES_MAX];
    /* One untimed cycle first: every path warm. */
    for (int c = -1; c < cycles; c++) {
        for (int k = 0; k < KINDS; k++) {
            atomic_store(&round_done, 0);
            atomic_store(&prog_over, 0);
            double t0 = now_ms();
            atomic_store(&round_kind, k);
            for (int i = 0; i < launches; i++)
                CHECK(cuLaunchKernel(prog_spin, sms, 1, 1, 32, 1, 1, 0, NULL, kp, NULL));
            CHECK(cuCtxSynchronize());
            double ms = now_ms() - t0;
            atomic_store(&prog_over, 1);
            while (!atomic_load(&round_done))
                sleep_ms(1);
            if (c >= 0)
                round_ms[k][c] = ms;
        }
        if (c < 0)
            for (int k = 0; k < KINDS; k++)
                nop[k] = 0;
        else
            for (int k = 1; k < KINDS; k++)
                excess[k][c] = round_ms[k][c] - round_ms[NONE][c];
    }
    atomic_store(&round_kind, KINDS);
    pthread_join(th, NULL);

    printf("%-8s %12s %12s %14s %14s %8s\n", "kind", "round ms", "excess ms", "excess/op ms", "op wall ms", "ops");
    for (int k = 0; k < KINDS; k++) {
        double r = median(round_ms[k], cycles);
        double e = k ? median(excess[k], cycles) : 0;
        int per = k == NONE ? 0 : k_ops; /* burst: per load */
        double w = median(op_ms[k], nop[k]);
        printf("%-8s %12.3f %12.3f %14.3f %14.3f %8d\n", kind_name[k], r, e, per ? e / per : 0.0, w, nop[k]);
    }
    printf("(trials: their GPU time is %d x %d us = %.3f ms an operation, inside the excess; copy: %d MiB, %d MiB "
           "read and written)\n", trial_runs, kernel_us, trial_runs * kernel_us / 1000.0, copy_mb, 2 * copy_mb);
    return 0;
}
