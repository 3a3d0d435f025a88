/* Which driver calls on drk's thread hold the program's launches while the
 * program's launch queue is deep, as a trainer's is (evolve_bench.py saw
 * launch calls held for up to 1024 x the kernel's time while drk worked).
 * One thread plays the program: bursts of BURST launches of a kernel that
 * spins KERNEL_US microseconds, a stream sync after each, every
 * cuLaunchKernel call timed. Another thread runs each driver call drk's
 * evolution makes, REPS times 40 ms apart, in a context of its own (as
 * drk's trials do) or in the program's (as serving a variant does):
 * module load and unload of a cubin, function lookup, a launch and a copy
 * on a stream of its own with its sync, allocation and free, events,
 * streams, pinned host memory. For each call it prints its own mean and
 * longest time and the longest program launch call that overlapped it; a
 * call that waits for the device to drain while holding a lock the launch
 * path needs shows as a launch held about as long as the queue's drain
 * (BURST x KERNEL_US, printed). STREAM "legacy" puts the program's launches
 * on the legacy default stream, as evolve_run's (and many programs') are,
 * whose implicit synchronization the other streams of its context may meet;
 * the default is a non-blocking stream of its own. A benchmark: it prints
 * and judges nothing.
 *
 * With CUPTI_SO (a libcupti.so.13 path) it then does, REPS times 40 ms
 * apart, what drk's GPU times do with CUPTI on drk's thread: its start
 * (the library opened once, buffers registered, kernel, copy and set
 * records enabled: "cupti_start"), kernel records resting and back
 * ("kernels_off", "kernels_on": the rest evolution's timing takes), a
 * forced flush, and the stop (every kind disabled); each with the program's
 * launch calls it held; then the making and the end of a context of drk's
 * own ("ctx_create", "ctx_destroy": evolution's trials run in one).
 *
 *   drain_stall [BURST [KERNEL_US [REPS [STREAM [CUPTI_SO]]]]]   (1000 200 4 own) */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "drain_stall"
#include "bench_cuda.h"
#include "bench_spin.h"
#include "bench_cupti.h"

/* The program's launch calls longer than HELD_MS, with when they began. */
enum { HELD_MAX = 4096 };
#define HELD_MS 1.0
static struct {
    double at, ms;
} held[HELD_MAX];
static atomic_int nheld, stop;
static double longest_any;
static CUcontext prog_ctx;
static CUfunction prog_spin;
static unsigned long long spin_cycles;
static int burst = 1000;
static int legacy; /* the program launches on the legacy default stream */

static void *program(void *arg)
{
    (void)arg;
    CHECK(cuCtxSetCurrent(prog_ctx));
    CUstream s = NULL;
    if (!legacy)
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *kp[] = {&spin_cycles};
    while (!atomic_load(&stop)) {
        for (int i = 0; i < burst; i++) {
            double t0 = now_ms();
            CHECK(cuLaunchKernel(prog_spin, 1, 1, 1, 32, 1, 1, 0, s, kp, NULL));
            double ms = now_ms() - t0;
            if (ms > longest_any)
                longest_any = ms;
            if (ms > HELD_MS) {
                int n = atomic_load(&nheld);
                if (n < HELD_MAX) {
                    held[n].at = t0, held[n].ms = ms;
                    atomic_store(&nheld, n + 1);
                }
            }
        }
        CHECK(cuStreamSynchronize(s));
    }
    if (s)
        CHECK(cuStreamDestroy(s));
    return NULL;
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET};

static CUdevice device;
static CUcontext made; /* ctx_create's */

static void cupti_op(const char *name, const char *so)
{
    if (!strcmp(name, "cupti_start")) {
        if (!cupti.lib) {
            double t0 = now_ms();
            bench_cupti_open(so);
            printf("cupti: %s opened in %.3f ms (in cupti_start's first time)\n", so, now_ms() - t0);
        }
        bench_cupti_register();
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
            CUPTI_CHECK(cupti.enable(kinds[i]));
    } else if (!strcmp(name, "kernels_off")) {
        CUPTI_CHECK(cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    } else if (!strcmp(name, "kernels_on")) {
        CUPTI_CHECK(cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    } else if (!strcmp(name, "flush_forced")) {
        CUPTI_CHECK(cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    } else if (!strcmp(name, "cupti_stop")) {
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
            CUPTI_CHECK(cupti.disable(kinds[i]));
        CUPTI_CHECK(cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    } else if (!strcmp(name, "ctx_create")) {
        CUcontext popped;
        CHECK(cuCtxCreate(&made, NULL, CU_CTX_SCHED_BLOCKING_SYNC, device));
        CHECK(cuCtxPopCurrent(&popped));
    } else if (!strcmp(name, "ctx_destroy")) {
        CHECK(cuCtxDestroy(made));
    }
}

enum { OWN, PROG };
struct state {
    CUcontext ctx[2];
    void *cubin;
    size_t cubin_len;
    CUmodule mod[2];
    CUfunction tiny[2];
    CUdeviceptr buf[2], scratch[2];
    CUstream stream[2];
    CUevent ev;
    void *host;
};

/* One call, by name, in context `c`: 0 done. */
static void op(struct state *st, const char *name, int c)
{
    CHECK(cuCtxSetCurrent(st->ctx[c]));
    if (!strcmp(name, "load")) {
        CHECK(cuModuleLoadData(&st->mod[c], st->cubin));
    } else if (!strcmp(name, "get_function")) {
        CHECK(cuModuleGetFunction(&st->tiny[c], st->mod[c], "tiny"));
    } else if (!strcmp(name, "launch+sync")) {
        void *kp[] = {&st->scratch[c]};
        CHECK(cuLaunchKernel(st->tiny[c], 1, 1, 1, 1, 1, 1, 0, st->stream[c], kp, NULL));
        CHECK(cuStreamSynchronize(st->stream[c]));
    } else if (!strcmp(name, "memcpy+sync")) {
        CHECK(cuMemcpyDtoDAsync(st->buf[c], st->scratch[c], 4096, st->stream[c]));
        CHECK(cuStreamSynchronize(st->stream[c]));
    } else if (!strcmp(name, "memset+sync")) {
        CHECK(cuMemsetD8Async(st->scratch[c], 0, 4096, st->stream[c]));
        CHECK(cuStreamSynchronize(st->stream[c]));
    } else if (!strcmp(name, "event")) {
        CHECK(cuEventRecord(st->ev, st->stream[c]));
        CHECK(cuEventSynchronize(st->ev));
    } else if (!strcmp(name, "unload")) {
        CHECK(cuModuleUnload(st->mod[c]));
    } else if (!strcmp(name, "mem_alloc")) {
        CHECK(cuMemAlloc(&st->buf[c], 8 << 20));
    } else if (!strcmp(name, "mem_free")) {
        CHECK(cuMemFree(st->buf[c]));
    } else if (!strcmp(name, "host_alloc")) {
        CHECK(cuMemHostAlloc(&st->host, 8 << 20, 0));
    } else if (!strcmp(name, "host_free")) {
        CHECK(cuMemFreeHost(st->host));
    } else if (!strcmp(name, "stream_create")) {
        CHECK(cuStreamCreate(&st->stream[c], CU_STREAM_NON_BLOCKING));
    } else if (!strcmp(name, "stream_destroy")) {
        CHECK(cuStreamDestroy(st->stream[c]));
    } else if (!strcmp(name, "event_create")) {
        CHECK(cuEventCreate(&st->ev, CU_EVENT_DEFAULT));
    } else if (!strcmp(name, "event_destroy")) {
        CHECK(cuEventDestroy(st->ev));
    } else {
        fprintf(stderr, "drain_stall: no call %s\n", name);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    burst = argc > 1 ? atoi(argv[1]) : 1000;
    int kernel_us = argc > 2 ? atoi(argv[2]) : 200;
    int reps = argc > 3 ? atoi(argv[3]) : 4;
    legacy = argc > 4 && strcmp(argv[4], "legacy") == 0;
    const char *cupti_so = argc > 5 ? argv[5] : NULL;
    if (burst < 1 || kernel_us < 1 || reps < 1 || (argc > 4 && !legacy && strcmp(argv[4], "own") != 0)) {
        fprintf(stderr, "usage: drain_stall [BURST [KERNEL_US [REPS [own|legacy [CUPTI_SO]]]]]\n");
        return 2;
    }
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    device = dev;
    int khz = 0;
    CHECK(cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev));
    spin_cycles = (unsigned long long)khz * (unsigned long long)kernel_us / 1000ULL;
    struct state st = {0};
    CHECK(cuDevicePrimaryCtxRetain(&st.ctx[PROG], dev));
    prog_ctx = st.ctx[PROG];
    CHECK(cuCtxCreate(&st.ctx[OWN], NULL, 0, dev));

    /* The cubin both contexts load, linked once. */
    CHECK(cuCtxSetCurrent(st.ctx[OWN]));
    CUlinkState link;
    CHECK(cuLinkCreate(0, NULL, NULL, &link));
    CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)spin_ptx, sizeof spin_ptx, "drain_stall", 0, NULL, NULL));
    void *out;
    CHECK(cuLinkComplete(link, &out, &st.cubin_len));
    st.cubin = malloc(st.cubin_len);
    memcpy(st.cubin, out, st.cubin_len);
    CHECK(cuLinkDestroy(link));
    CUmodule pm;
    CHECK(cuCtxSetCurrent(st.ctx[PROG]));
    CHECK(cuModuleLoadData(&pm, st.cubin));
    CHECK(cuModuleGetFunction(&prog_spin, pm, "spin"));
    for (int c = 0; c < 2; c++) {
        CHECK(cuCtxSetCurrent(st.ctx[c]));
        CHECK(cuMemAlloc(&st.scratch[c], 4096));
    }

    /* Each context's calls in an order that keeps every handle valid. */
    static const char *const calls[] = {"stream_create", "event_create", "load", "get_function", "launch+sync",
                                        "mem_alloc", "memcpy+sync", "memset+sync", "event", "mem_free",
                                        "unload", "event_destroy", "stream_destroy", "host_alloc", "host_free"};
    enum { NCALLS = sizeof calls / sizeof calls[0] };
    static const char *const cupti_calls[] = {"cupti_start", "flush_forced", "kernels_off", "kernels_on", "cupti_stop",
                                              "ctx_create", "ctx_destroy"};
    enum { NCUPTI = sizeof cupti_calls / sizeof cupti_calls[0] };
    static struct {
        double sum, max, t0[64], t1[64];
    } took[3][NCALLS];
    if (reps > 64)
        reps = 64;

    pthread_t th;
    if (pthread_create(&th, NULL, program, NULL) != 0) {
        fprintf(stderr, "drain_stall: pthread_create failed\n");
        return 1;
    }
    sleep_ms(500); /* the queue fills */
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < NCALLS; i++) {
                double t0 = now_ms();
                op(&st, calls[i], c);
                double t1 = now_ms();
                took[c][i].t0[r] = t0, took[c][i].t1[r] = t1;
                took[c][i].sum += t1 - t0;
                if (t1 - t0 > took[c][i].max)
                    took[c][i].max = t1 - t0;
                sleep_ms(40);
            }
    for (int r = 0; cupti_so && r < reps; r++)
        for (int i = 0; i < NCUPTI; i++) {
            double t0 = now_ms();
            cupti_op(cupti_calls[i], cupti_so);
            double t1 = now_ms();
            took[2][i].t0[r] = t0, took[2][i].t1[r] = t1;
            took[2][i].sum += t1 - t0;
            if (t1 - t0 > took[2][i].max)
                took[2][i].max = t1 - t0;
            sleep_ms(40);
        }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);

    int n = atomic_load(&nheld);
    double drain = burst * kernel_us / 1000.0;
    printf("drain_stall: bursts of %d launches of a %d us kernel on %s (a full queue drains in up to %.0f ms); "
           "%d program launch calls over %.1f ms; the longest %.3f ms\n",
           burst, kernel_us, legacy ? "the legacy stream" : "a non-blocking stream", drain, n, HELD_MS, longest_any);
    printf("%-8s %-15s %10s %10s %14s\n", "context", "call", "mean ms", "max ms", "held launch ms");
    for (int c = 0; c < (cupti_so ? 3 : 2); c++)
        for (int i = 0; i < (c == 2 ? NCUPTI : NCALLS); i++) {
            double worst = 0;
            for (int r = 0; r < reps; r++)
                for (int h = 0; h < n; h++)
                    if (held[h].at < took[c][i].t1[r] && held[h].at + held[h].ms > took[c][i].t0[r] &&
                        held[h].ms > worst)
                        worst = held[h].ms;
            printf("%-8s %-15s %10.3f %10.3f %14.3f\n", c == OWN ? "own" : c == PROG ? "program" : "drk",
                   c == 2 ? cupti_calls[i] : calls[i],
                   took[c][i].sum / reps, took[c][i].max, worst);
        }
    CHECK(cuCtxSetCurrent(st.ctx[PROG]));
    CHECK(cuModuleUnload(pm));
    CHECK(cuCtxDestroy(st.ctx[OWN]));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    free(st.cubin);
    return 0;
}
