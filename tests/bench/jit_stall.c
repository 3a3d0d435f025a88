/* Whether building a kernel stalls another thread's launches, and by how
 * much, for each way drk could build a variant (evolve_bench.py's "zero
 * stalls of program calls by compiles"). One thread plays the program: it
 * launches a short kernel (evolve_kernels.ptx's saxpy) in bursts of 64 with a
 * stream sync between, timing every cuLaunchKernel call. Another thread
 * builds the whole evolve_kernels module again and again with a register
 * budget, one way per mode:
 *
 *   none       nothing (the launch calls' own spread)
 *   jit_same   cuModuleLoadDataEx of the PTX in the program's context
 *   jit_own    the same in a context of drk's own (cuCtxCreate)
 *   link_own   cuLinkCreate/AddData/Complete in drk's own context makes a
 *              cubin, then cuModuleLoadData of the cubin in the program's
 *   nvjitlink  nvJitLink (dlopen'd) makes a cubin without the driver, then
 *              cuModuleLoadData of the cubin in the program's context
 *
 *   free       cuMemAlloc then cuMemFree of 8 MiB (the program's context)
 *   free_async cuMemAllocAsync then cuMemFreeAsync on a stream of its own,
 *              then a sync of that stream
 *   unload     cuModuleLoadData of a cubin made once, then cuModuleUnload
 *
 * The last three run twice: with the program's bursts of 64, and with
 * bursts of 4096 (its launch queue full, as a trainer's is): a call that
 * waits for the device to drain holds the program's launches that long.
 * It also prints what a context of drk's own costs in device memory.
 *
 * Per mode it prints one line: builds and their mean time (and, for
 * nvjitlink, the load's), launch calls, the longest, the 99.9th percentile,
 * and the time spent in calls longer than 1 ms. A benchmark: it prints and
 * judges nothing.
 *
 *   jit_stall PTX_FILE [BUILDS [NVJITLINK_SO]]   (10, libnvJitLink.so.13) */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "jit_stall"
#include "bench_cuda.h"

typedef int (*jl_create_t)(void **, uint32_t, const char **);
typedef int (*jl_destroy_t)(void **);
typedef int (*jl_add_t)(void *, int, const void *, size_t, const char *);
typedef int (*jl_complete_t)(void *);
typedef int (*jl_size_t)(void *, size_t *);
typedef int (*jl_get_t)(void *, void *);

static struct {
    jl_create_t create;
    jl_destroy_t destroy;
    jl_add_t add;
    jl_complete_t complete;
    jl_size_t cubin_size;
    jl_get_t cubin;
    jl_size_t log_size;
    jl_get_t log;
} jl;

static CUcontext ctx;
static CUdevice dev;
static char *ptx;
static int arch;
static atomic_int stop;
static int burst = 64; /* launches between the program's syncs: 64, or 4096 (a full launch queue) */

/* The program: bursts of launches, each call timed. */
static double *lat;
static size_t nlat, caplat;

static void *program(void *arg)
{
    CUfunction fn = arg;
    CHECK(cuCtxSetCurrent(ctx));
    CUdeviceptr x, y;
    const int n = 1 << 20;
    CHECK(cuMemAlloc(&x, (size_t)n * 4));
    CHECK(cuMemAlloc(&y, (size_t)n * 4));
    float a = 2.0f;
    int nn = n;
    void *params[] = {&y, &x, &a, &nn};
    while (!atomic_load(&stop)) {
        for (int i = 0; i < burst && nlat < caplat; i++) {
            double t0 = now_ms();
            CHECK(cuLaunchKernel(fn, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, NULL, params, NULL));
            lat[nlat++] = now_ms() - t0;
        }
        CHECK(cuStreamSynchronize(NULL));
    }
    CHECK(cuMemFree(x));
    CHECK(cuMemFree(y));
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void build_jit(CUcontext in)
{
    CUjit_option o[] = {CU_JIT_MAX_REGISTERS};
    void *v[] = {(void *)(uintptr_t)64};
    CHECK(cuCtxPushCurrent(in));
    CUmodule m;
    CHECK(cuModuleLoadDataEx(&m, ptx, 1, o, v));
    CHECK(cuModuleUnload(m));
    CUcontext popped;
    CHECK(cuCtxPopCurrent(&popped));
}

static double load_total;

static void load_cubin(const void *cubin)
{
    double t0 = now_ms();
    CHECK(cuCtxPushCurrent(ctx));
    CUmodule m;
    CHECK(cuModuleLoadData(&m, cubin));
    CHECK(cuModuleUnload(m));
    CUcontext popped;
    CHECK(cuCtxPopCurrent(&popped));
    load_total += now_ms() - t0;
}

static void build_link(CUcontext in)
{
    CUjit_option o[] = {CU_JIT_MAX_REGISTERS};
    void *v[] = {(void *)(uintptr_t)64};
    CHECK(cuCtxPushCurrent(in));
    CUlinkState ls;
    CHECK(cuLinkCreate(1, o, v, &ls));
    CHECK(cuLinkAddData(ls, CU_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "m", 0, NULL, NULL));
    void *img;
    size_t n;
    CHECK(cuLinkComplete(ls, &img, &n));
    void *cubin = malloc(n);
    if (!cubin)
        exit(1);
    memcpy(cubin, img, n);
    CHECK(cuLinkDestroy(ls));
    CUcontext popped;
    CHECK(cuCtxPopCurrent(&popped));
    load_cubin(cubin);
    free(cubin);
}

static void build_nvjitlink(void)
{
    char a[32];
    snprintf(a, sizeof a, "-arch=sm_%d", arch);
    const char *opts[] = {a, "-maxrregcount=64"};
    void *h = NULL;
    size_t n = 0;
    if (jl.create(&h, 2, opts) || jl.add(h, 2 /* NVJITLINK_INPUT_PTX */, ptx, strlen(ptx), "m") ||
        jl.complete(h) || jl.cubin_size(h, &n)) {
        char msg[4096] = "";
        size_t ln = 0;
        if (h && !jl.log_size(h, &ln) && ln && ln < sizeof msg)
            jl.log(h, msg);
        fprintf(stderr, "jit_stall: nvJitLink failed: %s\n", msg);
        exit(1);
    }
    void *cubin = malloc(n);
    if (!cubin || jl.cubin(h, cubin)) {
        fprintf(stderr, "jit_stall: nvJitLink cubin failed\n");
        exit(1);
    }
    jl.destroy(&h);
    load_cubin(cubin);
    free(cubin);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: jit_stall PTX_FILE [BUILDS [NVJITLINK_SO]]\n");
        return 2;
    }
    int builds = argc > 2 ? atoi(argv[2]) : 10;
    const char *so = argc > 3 ? argv[3] : "libnvJitLink.so.13";
    ptx = read_file(argv[1]);
    if (!ptx || builds < 1)
        return 2;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    int mj, mn;
    CHECK(cuDeviceGetAttribute(&mj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(cuDeviceGetAttribute(&mn, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    arch = mj * 10 + mn;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction fn;
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));

    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        jl.create = (jl_create_t)dlsym(lib, "__nvJitLinkCreate_13_0");
        jl.destroy = (jl_destroy_t)dlsym(lib, "__nvJitLinkDestroy_13_0");
        jl.add = (jl_add_t)dlsym(lib, "__nvJitLinkAddData_13_0");
        jl.complete = (jl_complete_t)dlsym(lib, "__nvJitLinkComplete_13_0");
        jl.cubin_size = (jl_size_t)dlsym(lib, "__nvJitLinkGetLinkedCubinSize_13_0");
        jl.cubin = (jl_get_t)dlsym(lib, "__nvJitLinkGetLinkedCubin_13_0");
        jl.log_size = (jl_size_t)dlsym(lib, "__nvJitLinkGetErrorLogSize_13_0");
        jl.log = (jl_get_t)dlsym(lib, "__nvJitLinkGetErrorLog_13_0");
        if (!jl.log_size || !jl.log || !jl.create || !jl.destroy || !jl.add || !jl.complete || !jl.cubin_size || !jl.cubin)
            lib = NULL;
    }
    if (!lib)
        fprintf(stderr, "jit_stall: %s: %s (the nvjitlink mode is skipped)\n", so, dlerror());

    size_t free0, free1, total;
    CHECK(cuMemGetInfo(&free0, &total));
    CUcontext own;
    CHECK(cuCtxCreate(&own, NULL, 0, dev));
    CUcontext popped;
    CHECK(cuCtxPopCurrent(&popped));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemGetInfo(&free1, &total));
    printf("a context of drk's own: %.1f MiB of device memory\n", ((double)free0 - (double)free1) / 1048576.0);

    caplat = 4u << 20;
    lat = malloc(caplat * sizeof *lat);
    const char *modes[] = {"none", "jit_same", "jit_own", "link_own", "nvjitlink", "free", "free_async", "unload",
                           "free", "free_async", "unload"};
    CUstream own_stream;
    CHECK(cuStreamCreate(&own_stream, CU_STREAM_NON_BLOCKING));
    void *kept_cubin = NULL;
    if (lib) {
        char a[32];
        snprintf(a, sizeof a, "-arch=sm_%d", arch);
        const char *opts[] = {a};
        void *h = NULL;
        size_t n = 0;
        if (!jl.create(&h, 1, opts) && !jl.add(h, 2, ptx, strlen(ptx), "m") && !jl.complete(h) &&
            !jl.cubin_size(h, &n) && (kept_cubin = malloc(n)) && jl.cubin(h, kept_cubin)) {
            free(kept_cubin);
            kept_cubin = NULL;
        }
        if (h)
            jl.destroy(&h);
    }
    printf("%-10s %6s %9s %9s %9s %9s %10s %9s\n", "mode", "builds", "build ms", "load ms", "launches", "max ms",
           "p99.9 ms", ">1ms ms");
    for (int mode = 0; mode < 11; mode++) {
        if ((mode == 4 || mode == 7 || mode == 10) && !kept_cubin)
            continue;
        burst = mode >= 8 ? 4096 : 64;
        nlat = 0;
        load_total = 0;
        atomic_store(&stop, 0);
        pthread_t t;
        pthread_create(&t, NULL, program, fn);
        struct timespec warm = {0, 100000000};
        nanosleep(&warm, NULL);
        double t0 = now_ms();
        for (int b = 0; b < builds; b++) {
            if (mode == 0) {
                struct timespec p = {0, 100000000};
                nanosleep(&p, NULL);
            } else if (mode == 1) {
                build_jit(ctx);
            } else if (mode == 2) {
                build_jit(own);
            } else if (mode == 3) {
                build_link(own);
            } else if (mode == 5 || mode == 8) {
                CUdeviceptr p;
                CHECK(cuMemAlloc(&p, 8u << 20));
                CHECK(cuMemFree(p));
                struct timespec gap = {0, 20000000};
                nanosleep(&gap, NULL);
            } else if (mode == 6 || mode == 9) {
                CUdeviceptr p;
                CHECK(cuMemAllocAsync(&p, 8u << 20, own_stream));
                CHECK(cuMemFreeAsync(p, own_stream));
                CHECK(cuStreamSynchronize(own_stream));
                struct timespec gap = {0, 20000000};
                nanosleep(&gap, NULL);
            } else if (mode == 7 || mode == 10) {
                load_cubin(kept_cubin);
                struct timespec gap = {0, 20000000};
                nanosleep(&gap, NULL);
            } else {
                build_nvjitlink();
            }
        }
        double each = (now_ms() - t0) / builds;
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
        double over = 0;
        for (size_t i = 0; i < nlat; i++)
            if (lat[i] > 1.0)
                over += lat[i];
        qsort(lat, nlat, sizeof *lat, cmp);
        printf("%-10s%s %6d %9.2f %9.3f %9zu %9.3f %10.4f %9.1f\n", modes[mode], burst > 64 ? "*" : " ", mode ? builds : 0, mode ? each : 0.0,
               mode >= 3 ? load_total / builds : 0.0, nlat, nlat ? lat[nlat - 1] : 0.0,
               nlat ? lat[(size_t)(nlat * 0.999)] : 0.0, over);
        fflush(stdout);
    }
    printf("(* the program's launch queue full)\n");
    free(kept_cubin);
    CHECK(cuStreamDestroy(own_stream));
    CHECK(cuCtxDestroy(own));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
