/* Zero-copy pinned host memory (-lcuda): three buffers from cuMemHostAlloc
 * with CU_MEMHOSTALLOC_DEVICEMAP (one also WRITECOMBINED, one also
 * PORTABLE), their device pointers from cuMemHostGetDevicePointer, and the
 * suite's accumulating kernel (embedded fatbin) run N times on the device
 * pointers: it reads two buffers and adds into the third over the bus. The
 * host then reads the third buffer directly. cuMemHostGetFlags of each
 * buffer must include the flags it was allocated with; the flags are
 * printed, so the runs compare them.
 *
 *   host_map [N]     (default 20)
 *
 * Prints a checksum and its counts; writes them as JSON to $DRK_TEST_COUNTS
 * if set. Every driver call is checked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CU_CHECK_PROGRAM "host_map"
#include "tests/gpu/programs/cu_check.h"
#include "tests/gpu/programs/drv_vecadd.h"
#include "tests/gpu/programs/test_counts.h"

int main(int argc, char **argv)
{
    const long launches = argc > 1 ? atol(argv[1]) : 20;
    int n = (1 << 18) + 33;
    const unsigned block = 256, grid = (unsigned)((n + block - 1) / block);
    const size_t bytes = (size_t)n * sizeof(int);
    const unsigned flags[3] = {CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED,
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_DEVICEMAP};

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    int can_map = 0;
    CU_CHECK(cuDeviceGetAttribute(&can_map, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, dev));
    if (!can_map)
        return fprintf(stderr, "host_map: the device cannot map host memory\n"), 1;
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    CU_CHECK(cuModuleLoadData(&mod, drk_vecadd_fatbin));
    CU_CHECK(cuModuleGetFunction(&fn, mod, "drk_drv_vecadd"));

    int *h[3];
    CUdeviceptr d[3];
    unsigned got[3];
    for (int i = 0; i < 3; i++) {
        CU_CHECK(cuMemHostAlloc((void **)&h[i], bytes, flags[i]));
        CU_CHECK(cuMemHostGetDevicePointer(&d[i], h[i], 0));
        CU_CHECK(cuMemHostGetFlags(&got[i], h[i]));
        if ((got[i] & flags[i]) != flags[i])
            return fprintf(stderr, "host_map: buffer %d: cuMemHostGetFlags = 0x%x lacks the flags 0x%x\n", i, got[i],
                           flags[i]),
                   1;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < i; j++)
            if (d[i] == d[j] || h[i] == h[j])
                return fprintf(stderr, "host_map: buffers %d and %d share an address\n", i, j), 1;

    /* Inputs made in ordinary memory and copied in: write-combined memory
     * is slow to read back on the host. */
    int *in_a = malloc(bytes), *in_b = malloc(bytes);
    if (!in_a || !in_b)
        return fprintf(stderr, "host_map: out of host memory\n"), 1;
    uint32_t s = 777u; /* fixed LCG: same inputs every run */
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        in_a[i] = (int)(s >> 22) - 512;
        s = s * 1664525u + 1013904223u;
        in_b[i] = (int)(s >> 22) - 512;
        h[2][i] = i;
    }
    memcpy(h[0], in_a, bytes);
    memcpy(h[1], in_b, bytes);
    void *params[] = {&d[0], &d[1], &d[2], &n};
    for (long k = 0; k < launches; k++)
        CU_CHECK(cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, params, NULL));
    CU_CHECK(cuCtxSynchronize());

    uint64_t fnv = 1469598103934665603ull;
    long bad = 0;
    for (int i = 0; i < n; i++) {
        long want = (long)i + launches * (long)(in_a[i] + in_b[i]);
        if ((long)h[2][i] != want && bad++ < 5)
            fprintf(stderr, "host_map: acc[%d] = %d, expected %ld\n", i, h[2][i], want);
        for (int byte = 0; byte < 4; byte++)
            fnv = (fnv ^ (((uint32_t)h[2][i] >> (8 * byte)) & 0xffu)) * 1099511628211ull;
    }
    free(in_a);
    free(in_b);
    for (int i = 0; i < 3; i++)
        CU_CHECK(cuMemFreeHost(h[i]));
    CU_CHECK(cuModuleUnload(mod));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    if (bad)
        return fprintf(stderr, "host_map: %ld wrong elements\n", bad), 1;

    printf("host_map n=%d launches=%ld flags asked 0x%x 0x%x 0x%x, cuMemHostGetFlags 0x%x 0x%x 0x%x\n", n, launches,
           flags[0], flags[1], flags[2], got[0], got[1], got[2]);
    printf("checksum %016llx\n", (unsigned long long)fnv);

    if (write_test_counts(
            "{\"workload\": \"host_map\", \"pid\": %d, \"kernels\": {\"drk_drv_vecadd\": %ld}, "
            "\"by_api\": {\"cuLaunchKernel\": %ld}, \"failed_launches\": 0, \"host_allocs\": 3}\n",
            (int)getpid(), launches, launches) != 0)
        return 1;
    return 0;
}
