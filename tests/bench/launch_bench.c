// launch_bench: launch throughput of an empty kernel through the CUDA driver
// API, from T threads at once. Run natively and under LD_PRELOAD=libdrk_shim.so
// (tests/bench/run.sh does both, interleaved) to see what drk adds per launch.
//
// Linked with -lcuda, so the launches take the exported-symbol route: with drk
// preloaded, cuLaunchKernel[Ex] bind to drk's hooks.
//
//   launch_bench [--api launch|launchex] [--threads T] [--launches N]
//                [--reps R] [--warmup W]
//
// Each rep: all threads are released together by a barrier, each launches N
// empty kernels (1 block x 32 threads, no parameters) on its own non-blocking
// stream, then synchronizes that stream. The rep's time runs from the earliest
// release to the last thread's synchronize (CLOCK_MONOTONIC); its rate is
// T*N / time. The last stdout line is one JSON object.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef DRK_BENCH_FATBIN
#error "DRK_BENCH_FATBIN (path of the empty kernel's fatbin) must be defined by the build"
#endif

// The empty kernel as a fatbin (sm_90 SASS + compute_90 PTX) built by nvcc at
// build time and embedded here byte for byte, so the binary needs no file at
// run time. 64-byte alignment: the driver reads the fatbin header in place.
__asm__(".pushsection .rodata\n"
        ".balign 64\n"
        ".globl drk_bench_fatbin\n"
        ".hidden drk_bench_fatbin\n"
        ".type drk_bench_fatbin, @object\n"
        "drk_bench_fatbin:\n"
        ".incbin \"" DRK_BENCH_FATBIN "\"\n"
        ".size drk_bench_fatbin, . - drk_bench_fatbin\n"
        ".popsection\n");
extern const unsigned char drk_bench_fatbin[] __attribute__((visibility("hidden")));

#define KERNEL_NAME "drk_bench_empty"

enum api { API_LAUNCH, API_LAUNCHEX };

static const char *api_name(enum api a) { return a == API_LAUNCH ? "launch" : "launchex"; }

// Any failed CUDA call ends the program: a benchmark that silently skipped
// launches would report a rate for work it did not do.
static void check(CUresult r, const char *call, int line) {
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL, *text = NULL;
    // Both may fail themselves (e.g. in the toolkit's stub library).
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (!name && r == CUDA_ERROR_STUB_LIBRARY)
        name = "CUDA_ERROR_STUB_LIBRARY";
    fprintf(stderr, "launch_bench: %s failed: %s (%d)%s%s [line %d]\n", call, name ? name : "CUresult",
            (int)r, text ? ": " : "", text ? text : "", line);
    if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY)
        fprintf(stderr, "launch_bench: no usable GPU or CUDA driver on this machine; run it where there is one\n");
    exit(1);
}
#define CK(call) check((call), #call, __LINE__)

static void check_pthread(int err, const char *call, int line) {
    if (err == 0)
        return;
    fprintf(stderr, "launch_bench: %s failed: %s [line %d]\n", call, strerror(err), line);
    exit(1);
}
#define CKP(call) check_pthread((call), #call, __LINE__)

static double now_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("launch_bench: clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct shared {
    enum api api;
    int threads;
    long launches; // per thread, per rep
    int reps;
    long warmup; // per thread, once
    CUcontext ctx;
    CUfunction fn;
    pthread_barrier_t start; // releases a rep
    pthread_barrier_t done;  // all threads finished a rep
};

struct worker {
    struct shared *sh;
    pthread_t tid;
    double t0, t1; // this thread's release and synchronize times, current rep
};

static void launch_n(const struct shared *sh, CUstream s, long n) {
    if (sh->api == API_LAUNCH) {
        for (long i = 0; i < n; i++)
            CK(cuLaunchKernel(sh->fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    } else {
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 32;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = s;
        for (long i = 0; i < n; i++)
            CK(cuLaunchKernelEx(&cfg, sh->fn, NULL, NULL));
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct shared *sh = w->sh;
    CUstream s;
    // Each thread makes the primary context current itself (the context is
    // per thread) and has its own stream, as a multi-threaded launcher would.
    CK(cuCtxSetCurrent(sh->ctx));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    // Warm-up outside the timed region: first launches pay for lazy module
    // loading in the driver and first-sight bookkeeping in drk.
    launch_n(sh, s, sh->warmup);
    CK(cuStreamSynchronize(s));
    for (int r = 0; r < sh->reps; r++) {
        int rc = pthread_barrier_wait(&sh->start);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
        w->t0 = now_s();
        launch_n(sh, s, sh->launches);
        CK(cuStreamSynchronize(s));
        w->t1 = now_s();
        rc = pthread_barrier_wait(&sh->done);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
    }
    CK(cuStreamDestroy(s));
    return NULL;
}

static void usage(FILE *f) {
    fprintf(f, "usage: launch_bench [--api launch|launchex] [--threads T] [--launches N] [--reps R] [--warmup W]\n"
               "  --api       cuLaunchKernel (launch, default) or cuLaunchKernelEx (launchex)\n"
               "  --threads   launching threads, each with its own stream (default 1, max 256)\n"
               "  --launches  launches per thread per rep (default 200000)\n"
               "  --reps      timed repetitions (default 5)\n"
               "  --warmup    untimed launches per thread before the first rep (default 2000)\n");
}

static long parse_long(const char *opt, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "launch_bench: %s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, v ? v : "");
        exit(2);
    }
    return x;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Which object the program's reference to the launch entry point resolved to:
// libdrk_shim.so when drk is preloaded, libcuda.so.1 otherwise. Printed so a
// silently failed preload cannot pass for "no overhead".
static const char *bound_to(enum api a) {
    Dl_info info;
    void *p = a == API_LAUNCH ? (void *)&cuLaunchKernel : (void *)&cuLaunchKernelEx;
    if (dladdr(p, &info) == 0 || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

int main(int argc, char **argv) {
    struct shared sh = {.api = API_LAUNCH, .threads = 1, .launches = 200000, .reps = 5, .warmup = 2000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--api")) {
            if (v && !strcmp(v, "launch"))
                sh.api = API_LAUNCH;
            else if (v && !strcmp(v, "launchex"))
                sh.api = API_LAUNCHEX;
            else {
                fprintf(stderr, "launch_bench: --api wants launch or launchex, got '%s'\n", v ? v : "");
                return 2;
            }
        } else if (!strcmp(a, "--threads"))
            sh.threads = (int)parse_long(a, v, 1, 256);
        else if (!strcmp(a, "--launches"))
            sh.launches = parse_long(a, v, 1, LONG_MAX / 256);
        else if (!strcmp(a, "--reps"))
            sh.reps = (int)parse_long(a, v, 1, 1000);
        else if (!strcmp(a, "--warmup"))
            sh.warmup = parse_long(a, v, 0, LONG_MAX);
        else {
            fprintf(stderr, "launch_bench: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i++; // every option takes a value
    }

    CUdevice dev;
    char name[256];
    int driver = 0;
    CK(cuInit(0));
    CK(cuDriverGetVersion(&driver));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDeviceGetName(name, (int)sizeof name, dev));
    // The primary context: the one cudart (and so PyTorch) uses.
    CK(cuDevicePrimaryCtxRetain(&sh.ctx, dev));
    CK(cuCtxSetCurrent(sh.ctx));
    CUmodule mod;
    CK(cuModuleLoadData(&mod, drk_bench_fatbin));
    CK(cuModuleGetFunction(&sh.fn, mod, KERNEL_NAME));

    const char *bound = bound_to(sh.api);
    printf("launch_bench: %s, driver %d, api %s, %d thread(s) x %ld launches, %d reps; %s bound to %s\n", name,
           driver, api_name(sh.api), sh.threads, sh.launches, sh.reps,
           sh.api == API_LAUNCH ? "cuLaunchKernel" : "cuLaunchKernelEx", bound);
    fflush(stdout);

    // Barriers count the workers and this thread, which only waits and
    // computes; it launches nothing.
    CKP(pthread_barrier_init(&sh.start, NULL, (unsigned)sh.threads + 1));
    CKP(pthread_barrier_init(&sh.done, NULL, (unsigned)sh.threads + 1));
    struct worker *w = calloc((size_t)sh.threads, sizeof *w);
    double *rate = calloc((size_t)sh.reps, sizeof *rate);
    double *sorted = calloc((size_t)sh.reps, sizeof *sorted);
    if (!w || !rate || !sorted) {
        fprintf(stderr, "launch_bench: out of memory\n");
        return 1;
    }
    for (int t = 0; t < sh.threads; t++) {
        w[t].sh = &sh;
        CKP(pthread_create(&w[t].tid, NULL, worker_main, &w[t]));
    }
    const double total = (double)sh.threads * (double)sh.launches;
    for (int r = 0; r < sh.reps; r++) {
        int rc = pthread_barrier_wait(&sh.start);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
        rc = pthread_barrier_wait(&sh.done);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
        // The done barrier orders the workers' t0/t1 stores before these reads.
        double t0 = w[0].t0, t1 = w[0].t1;
        for (int t = 1; t < sh.threads; t++) {
            if (w[t].t0 < t0)
                t0 = w[t].t0;
            if (w[t].t1 > t1)
                t1 = w[t].t1;
        }
        double wall = t1 - t0;
        rate[r] = total / wall;
        printf("rep %d/%d: %.0f launches/s (%.3f us/launch aggregate, wall %.1f ms)\n", r + 1, sh.reps, rate[r],
               1e6 / rate[r], wall * 1e3);
        fflush(stdout);
    }
    for (int t = 0; t < sh.threads; t++)
        CKP(pthread_join(w[t].tid, NULL));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));

    memcpy(sorted, rate, (size_t)sh.reps * sizeof *rate);
    qsort(sorted, (size_t)sh.reps, sizeof *sorted, cmp_double);
    double median = sh.reps % 2 ? sorted[sh.reps / 2] : 0.5 * (sorted[sh.reps / 2 - 1] + sorted[sh.reps / 2]);

    printf("{\"api\":\"%s\",\"threads\":%d,\"launches_per_thread\":%ld,\"reps\":%d,"
           "\"launches_per_s_median\":%.1f,\"launches_per_s_min\":%.1f,\"launches_per_s_max\":%.1f,"
           "\"launches_per_s\":[",
           api_name(sh.api), sh.threads, sh.launches, sh.reps, median, sorted[0], sorted[sh.reps - 1]);
    for (int r = 0; r < sh.reps; r++)
        printf("%s%.1f", r ? "," : "", rate[r]);
    // The device name comes from the driver; escape nothing but quotes and
    // backslashes (GPU names have neither in practice).
    printf("],\"us_per_launch_median\":%.4f,\"bound_to\":\"%s\",\"driver_version\":%d,\"device\":\"", 1e6 / median,
           bound, driver);
    for (const char *c = name; *c; c++) {
        if (*c == '"' || *c == '\\')
            putchar('\\');
        putchar(*c);
    }
    printf("\"}\n");
    free(sorted);
    free(rate);
    free(w);
    pthread_barrier_destroy(&sh.start);
    pthread_barrier_destroy(&sh.done);
    return 0;
}
