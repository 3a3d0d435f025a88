// launch_bench: launch throughput of an empty kernel through the CUDA driver
// API, from T threads at once. Run natively and under LD_PRELOAD=libdrk_shim.so
// (tests/bench/run.sh does both, interleaved) to see what drk adds per launch.
//
// Linked with -lcuda, so the launches take the exported-symbol route: with drk
// preloaded, cuLaunchKernel[Ex] bind to drk's hooks.
//
//   launch_bench [--api launch|launchex] [--threads T] [--launches N]
//                [--reps R] [--warmup W] [--ab]
//
// --ab (under drk only): in this one process, each thread alternates batches
// of --batch launches through the driver's own entry point (found in
// libcuda's symbol table, past drk's dlsym) and through the program's bound
// one (drk's hook). Only the launch calls are timed; the stream is
// synchronized after each batch, untimed, so the launch queue never fills and
// the GPU never sets the pace. Drift in clocks or placement falls on both
// alike, batch by batch; the ratio of the two costs per launch is what drk
// adds, with nothing else different.
//
// Each rep: all threads are released together by a barrier, each launches N
// empty kernels (1 block x 32 threads, no parameters) on its own non-blocking
// stream, then synchronizes that stream. The rep's time runs from the earliest
// release to the last thread's synchronize (CLOCK_MONOTONIC); its rate is
// T*N / time. The last stdout line is one JSON object.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
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

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
typedef CUresult (*launchex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);

enum { PHASE_DRIVER, PHASE_BOUND };

struct shared {
    enum api api;
    int ab;                    // --ab: alternate batches of the two phases
    long batch;                // --ab: launches per batch
    launch_fn launch[2];       // by phase: the driver's own, the bound one
    launchex_fn launchex[2];
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
    double busy[2]; // --ab: seconds spent in launch calls this rep, by phase
    long done[2];   // --ab: launches made this rep, by phase
};

static void launch_n(const struct shared *sh, CUstream s, long n, int phase) {
    if (sh->api == API_LAUNCH) {
        launch_fn launch = sh->launch[phase];
        for (long i = 0; i < n; i++)
            CK(launch(sh->fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    } else {
        launchex_fn launchex = sh->launchex[phase];
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 32;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = s;
        for (long i = 0; i < n; i++)
            CK(launchex(&cfg, sh->fn, NULL, NULL));
    }
}

// --ab: batches alternate phases; the first batch's phase alternates by rep.
static void launch_ab(struct worker *w, CUstream s, int r) {
    const struct shared *sh = w->sh;
    w->busy[0] = w->busy[1] = 0;
    w->done[0] = w->done[1] = 0;
    for (long b = 0, left = sh->launches; left > 0; b++) {
        int phase = (int)((b + r) % 2);
        long n = left < sh->batch ? left : sh->batch;
        double t0 = now_s();
        launch_n(sh, s, n, phase);
        w->busy[phase] += now_s() - t0;
        w->done[phase] += n;
        left -= n;
        CK(cuStreamSynchronize(s));
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
    for (int phase = 0; phase <= sh->ab; phase++)
        launch_n(sh, s, sh->warmup, sh->ab ? phase : PHASE_BOUND);
    CK(cuStreamSynchronize(s));
    for (int r = 0; r < sh->reps; r++) {
        int rc = pthread_barrier_wait(&sh->start);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
        w->t0 = now_s();
        if (sh->ab) {
            launch_ab(w, s, r);
        } else {
            launch_n(sh, s, sh->launches, PHASE_BOUND);
            CK(cuStreamSynchronize(s));
        }
        w->t1 = now_s();
        rc = pthread_barrier_wait(&sh->done);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
    }
    CK(cuStreamDestroy(s));
    return NULL;
}

static void usage(FILE *f) {
    fprintf(f, "usage: launch_bench [--api launch|launchex] [--threads T] [--launches N] [--reps R] [--warmup W] [--ab]\n"
               "  --api       cuLaunchKernel (launch, default) or cuLaunchKernelEx (launchex)\n"
               "  --threads   launching threads, each with its own stream (default 1, max 256)\n"
               "  --launches  launches per thread per rep (default 200000)\n"
               "  --reps      timed repetitions (default 5)\n"
               "  --warmup    untimed launches per thread before the first rep (default 2000)\n"
               "  --ab        under drk: alternate batches through the driver's own entry point and drk's\n"
               "  --batch     --ab: launches per batch, each followed by an untimed synchronize (default 256)\n");
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

// The median of v[0..n), sorting a copy into `scratch`.
static double median_of(const double *v, double *scratch, int n) {
    memcpy(scratch, v, (size_t)n * sizeof *v);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

// The driver's own definition of `name`, read from libcuda's GNU hash table:
// under drk, dlsym answers with drk's hook, so look where the loader would.
static void *driver_symbol(const char *name) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    struct link_map *lm = NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        // glibc has made these absolute on x86-64; be safe if not.
        ElfW(Addr) p = d->d_un.d_ptr < lm->l_addr ? d->d_un.d_ptr + lm->l_addr : d->d_un.d_ptr;
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)p;
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)p;
        else if (d->d_tag == DT_GNU_HASH)
            gnu = (const uint32_t *)p;
    }
    if (!symtab || !strtab || !gnu)
        return NULL;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)&gnu[4] + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t hash = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        hash = hash * 33 + *c;
    uint32_t i = buckets[hash % nbuckets];
    if (i < symoffset)
        return NULL;
    for (;; i++) {
        uint32_t ch = chain[i - symoffset];
        if ((ch | 1) == (hash | 1) && strcmp(strtab + symtab[i].st_name, name) == 0 && symtab[i].st_value)
            return (void *)(lm->l_addr + symtab[i].st_value);
        if (ch & 1)
            return NULL;
    }
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
    struct shared sh = {.api = API_LAUNCH, .threads = 1, .launches = 200000, .reps = 5, .warmup = 2000, .batch = 256,
                        .launch = {cuLaunchKernel, cuLaunchKernel}, .launchex = {cuLaunchKernelEx, cuLaunchKernelEx}};
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
        else if (!strcmp(a, "--batch"))
            sh.batch = parse_long(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--ab")) {
            sh.ab = 1;
            continue; // takes no value
        } else {
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
    if (sh.ab) {
        sh.launch[PHASE_DRIVER] = (launch_fn)driver_symbol("cuLaunchKernel");
        sh.launchex[PHASE_DRIVER] = (launchex_fn)driver_symbol("cuLaunchKernelEx");
        Dl_info info;
        if (!sh.launch[PHASE_DRIVER] || !sh.launchex[PHASE_DRIVER] ||
            !dladdr((void *)sh.launch[PHASE_DRIVER], &info) || !strstr(info.dli_fname, "libcuda")) {
            fprintf(stderr, "launch_bench: --ab: cannot find the driver's own launch entry points\n");
            return 1;
        }
        if (strcmp(bound, "libdrk_shim.so") != 0) {
            fprintf(stderr, "launch_bench: --ab compares drk with the driver, but the launch entry point is bound to %s: run it under LD_PRELOAD=libdrk_shim.so\n", bound);
            return 1;
        }
    }
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
    double *rate_driver = calloc((size_t)sh.reps, sizeof *rate_driver), *ratio = calloc((size_t)sh.reps, sizeof *ratio);
    if (!rate_driver || !ratio) {
        fprintf(stderr, "launch_bench: out of memory\n");
        return 1;
    }
    for (int r = 0; r < sh.reps; r++) {
        int rc = pthread_barrier_wait(&sh.start);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
        rc = pthread_barrier_wait(&sh.done);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
            check_pthread(rc, "pthread_barrier_wait", __LINE__);
        // The done barrier orders the workers' stores before these reads.
        if (sh.ab) {
            // Cost per launch by phase: time in launch calls over launches,
            // summed over threads; as rates, launches per second of a thread.
            double busy[2] = {0, 0}, done[2] = {0, 0};
            for (int t = 0; t < sh.threads; t++)
                for (int p = 0; p < 2; p++)
                    busy[p] += w[t].busy[p], done[p] += (double)w[t].done[p];
            rate_driver[r] = done[PHASE_DRIVER] / busy[PHASE_DRIVER];
            rate[r] = done[PHASE_BOUND] / busy[PHASE_BOUND];
            ratio[r] = rate[r] / rate_driver[r];
            printf("rep %d/%d: driver %.4f us/launch, drk %.4f us/launch (in launch calls, per thread), ratio %.4f\n",
                   r + 1, sh.reps, 1e6 / rate_driver[r], 1e6 / rate[r], ratio[r]);
            fflush(stdout);
            continue;
        }
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

    double median = median_of(rate, sorted, sh.reps);
    printf("{\"api\":\"%s\",\"threads\":%d,\"launches_per_thread\":%ld,\"reps\":%d,"
           "\"launches_per_s_median\":%.1f,\"launches_per_s_min\":%.1f,\"launches_per_s_max\":%.1f,"
           "\"launches_per_s\":[",
           api_name(sh.api), sh.threads, sh.launches, sh.reps, median, sorted[0], sorted[sh.reps - 1]);
    for (int r = 0; r < sh.reps; r++)
        printf("%s%.1f", r ? "," : "", rate[r]);
    printf("],");
    if (sh.ab) {
        // Rates here are per thread, in launch calls only (see --ab); the
        // ratio per rep is drk / driver, then its median.
        printf("\"driver_launches_per_s_median\":%.1f,\"ratios\":[", median_of(rate_driver, sorted, sh.reps));
        for (int r = 0; r < sh.reps; r++)
            printf("%s%.5f", r ? "," : "", ratio[r]);
        printf("],\"ratio_median\":%.5f,", median_of(ratio, sorted, sh.reps));
    }
    // The device name comes from the driver; escape nothing but quotes and
    // backslashes (GPU names have neither in practice).
    printf("\"us_per_launch_median\":%.4f,\"bound_to\":\"%s\",\"driver_version\":%d,\"device\":\"", 1e6 / median,
           bound, driver);
    for (const char *c = name; *c; c++) {
        if (*c == '"' || *c == '\\')
            putchar('\\');
        putchar(*c);
    }
    printf("\"}\n");
    free(sorted);
    free(rate);
    free(rate_driver);
    free(ratio);
    free(w);
    pthread_barrier_destroy(&sh.start);
    pthread_barrier_destroy(&sh.done);
    return 0;
}
