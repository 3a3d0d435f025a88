/* Driver-API program linked with -lcuda (exported-symbol route): cuInit,
 * cuModuleLoadData of an embedded fatbin, cuModuleGetFunction, cuMemAlloc,
 * then N cuLaunchKernel, M cuLaunchKernelEx, C cuLaunchCooperativeKernel,
 * P cuLaunchKernel_ptsz and P cuLaunchKernelEx_ptsz launches, and one launch
 * with a zero grid that the driver must refuse (a failed launch for drk's
 * report). The kernel accumulates, so the host check proves every successful
 * launch ran exactly once.
 *
 *   drv_vecadd [N [M [C [P]]]]     (defaults 1000 500 100 100)
 *
 * Prints a checksum and its own counts; writes them as JSON to
 * $DRK_TEST_COUNTS if set. Every driver call is checked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/gpu/programs/drv_vecadd.h"
#include "tests/gpu/programs/test_counts.h"

static void check(CUresult r, const char *what, int line)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL, *text = NULL;
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &text);
    fprintf(stderr, "drv_vecadd: %s failed: %s (%d): %s at line %d\n", what, name ? name : "?", (int)r,
            text ? text : "?", line);
    exit(1);
}
#define CHECK(call) check((call), #call, __LINE__)

int main(int argc, char **argv)
{
    const long n_kernel = argc > 1 ? atol(argv[1]) : 1000;
    const long n_ex = argc > 2 ? atol(argv[2]) : 500;
    const long n_coop = argc > 3 ? atol(argv[3]) : 100;
    const long n_ptsz = argc > 4 ? atol(argv[4]) : 100;
    int n = (1 << 20) + 77;
    const unsigned block = 256, grid = (unsigned)((n + block - 1) / block);

    int *ha = malloc(n * sizeof(int)), *hb = malloc(n * sizeof(int)), *hacc = malloc(n * sizeof(int));
    if (!ha || !hb || !hacc)
        return fprintf(stderr, "drv_vecadd: out of host memory\n"), 1;
    uint32_t s = 54321u; /* fixed LCG: same inputs every run */
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ha[i] = (int)(s >> 22) - 512;
        s = s * 1664525u + 1013904223u;
        hb[i] = (int)(s >> 22) - 512;
    }

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, drk_vecadd_fatbin));
    CHECK(cuModuleGetFunction(&fn, mod, "drk_drv_vecadd"));

    int sms = 0, coop = 0, per_sm = 0;
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CHECK(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev));
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, (int)block, 0));
    if (n_coop > 0 && (!coop || per_sm < 1))
        return fprintf(stderr, "drv_vecadd: device cannot run cooperative launches\n"), 1;

    CUdeviceptr da, db, dacc;
    CHECK(cuMemAlloc(&da, n * sizeof(int)));
    CHECK(cuMemAlloc(&db, n * sizeof(int)));
    CHECK(cuMemAlloc(&dacc, n * sizeof(int)));
    CHECK(cuMemcpyHtoD(da, ha, n * sizeof(int)));
    CHECK(cuMemcpyHtoD(db, hb, n * sizeof(int)));
    CHECK(cuMemsetD32(dacc, 0, (size_t)n));

    void *params[] = {&da, &db, &dacc, &n};
    for (long k = 0; k < n_kernel; k++)
        CHECK(cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, params, NULL));

    CUlaunchConfig cfg = {0};
    cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = block, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.hStream = NULL;
    for (long k = 0; k < n_ex; k++)
        CHECK(cuLaunchKernelEx(&cfg, fn, params, NULL));

    /* One block per SM: always co-resident, the grid-stride loop covers n. */
    for (long k = 0; k < n_coop; k++)
        CHECK(cuLaunchCooperativeKernel(fn, (unsigned)sms, 1, 1, block, 1, 1, 0, NULL, params));

    /* The per-thread default stream is ordered with the legacy one anyway;
     * synchronizing too makes the accumulations plainly race-free. */
    CHECK(cuCtxSynchronize());
    for (long k = 0; k < n_ptsz; k++)
        CHECK(drv_launch_ptsz(fn, grid, block, params));
    for (long k = 0; k < n_ptsz; k++)
        CHECK(drv_launch_ex_ptsz(fn, grid, block, params));
    CHECK(cuCtxSynchronize());

    /* A zero grid: the driver must refuse it (CUDA_ERROR_INVALID_VALUE), and
     * nothing runs. Not sticky: the context stays usable. */
    CUresult bad_launch = cuLaunchKernel(fn, 0, 1, 1, block, 1, 1, 0, NULL, params, NULL);
    if (bad_launch == CUDA_SUCCESS) {
        fprintf(stderr, "drv_vecadd: a launch with a zero grid succeeded\n");
        return 1;
    }

    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(hacc, dacc, n * sizeof(int)));

    const long ok = n_kernel + n_ex + n_coop + 2 * n_ptsz;
    uint64_t fnv = 1469598103934665603ull;
    long bad = 0;
    for (int i = 0; i < n; i++) {
        long want = ok * (long)(ha[i] + hb[i]);
        if ((long)hacc[i] != want && bad++ < 5)
            fprintf(stderr, "drv_vecadd: acc[%d] = %d, expected %ld\n", i, hacc[i], want);
        for (int byte = 0; byte < 4; byte++)
            fnv = (fnv ^ (((uint32_t)hacc[i] >> (8 * byte)) & 0xffu)) * 1099511628211ull;
    }
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dacc));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    if (bad) {
        fprintf(stderr, "drv_vecadd: %ld wrong elements\n", bad);
        return 1;
    }

    const char *bad_name = NULL;
    cuGetErrorName(bad_launch, &bad_name);
    printf("drv_vecadd n=%d kernel=%ld ex=%ld coop=%ld ptsz=%ld+%ld\n", n, n_kernel, n_ex, n_coop, n_ptsz,
           n_ptsz);
    printf("checksum %016llx\n", (unsigned long long)fnv);
    printf("launches %ld failed %d (%s)\n", ok, 1, bad_name ? bad_name : "?");

    if (write_test_counts(
            "{\"workload\": \"drv_vecadd\", \"pid\": %d, \"launches\": %ld, \"failed_launches\": 1, "
            "\"kernels\": {\"drk_drv_vecadd\": %ld}, "
            "\"by_api\": {\"cuLaunchKernel\": %ld, \"cuLaunchKernelEx\": %ld, "
            "\"cuLaunchCooperativeKernel\": %ld, \"cuLaunchKernel_ptsz\": %ld, "
            "\"cuLaunchKernelEx_ptsz\": %ld}}\n",
            (int)getpid(), ok, ok, n_kernel + 1, n_ex, n_coop, n_ptsz, n_ptsz) != 0)
        return 1;
    free(ha);
    free(hb);
    free(hacc);
    return 0;
}
