/* A green context's stream works on memory the program allocated before it
 * made the green context (-lcuda): a long run of the suite's accumulating
 * kernel (a library kernel: it launches in any context) on block x from a
 * green stream; the program then frees x with cuMemFree, which waits for the
 * device, allocates y of the same size at once and fills it on the primary
 * context's default stream. Every word of y must hold the fill: a pool that
 * handed x out again as y while the green stream still ran would lose words
 * of y to the kernels. Under drk (found by dlsym) y must also not be x: drk
 * follows no green stream, so it leaves the device's allocations to the
 * driver once a green context exists (docs/memory.md).
 *
 *   green_ctx [LAUNCHES]     (default 200)
 *
 * Last line "ok ..." when every check held; exit 1 with the reason when not.
 * Every driver call is checked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CU_CHECK_PROGRAM "green_ctx"
#include "tests/gpu/programs/cu_check.h"
#include "tests/gpu/programs/drv_vecadd.h"

enum { FILL = 0x5a5a5a5a };

int main(int argc, char **argv)
{
    int launches = argc > 1 ? atoi(argv[1]) : 200;
    if (launches < 1) {
        fprintf(stderr, "green_ctx: LAUNCHES must be at least 1\n");
        return 2;
    }
    CUdevice dev;
    CUcontext primary;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CU_CHECK(cuCtxSetCurrent(primary));

    CUlibrary lib;
    CUkernel kernel;
    CU_CHECK(cuLibraryLoadData(&lib, drk_vecadd_fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CU_CHECK(cuLibraryGetKernel(&kernel, lib, "drk_drv_vecadd"));

    int n = 1 << 24;
    size_t bytes = (size_t)n * sizeof(int);
    CUdeviceptr a, b, x, y;
    CU_CHECK(cuMemAlloc(&a, bytes));
    CU_CHECK(cuMemAlloc(&b, bytes));
    CU_CHECK(cuMemAlloc(&x, bytes));
    CU_CHECK(cuMemsetD32(a, 1, (size_t)n));
    CU_CHECK(cuMemsetD32(b, 2, (size_t)n));
    CU_CHECK(cuMemsetD32(x, 0, (size_t)n));
    CU_CHECK(cuCtxSynchronize());

    /* A green context on all the device's SMs, and a stream of its own. */
    CUdevResource sm;
    CUdevResourceDesc desc;
    CUgreenCtx green;
    CUstream gs;
    CU_CHECK(cuDeviceGetDevResource(dev, &sm, CU_DEV_RESOURCE_TYPE_SM));
    CU_CHECK(cuDevResourceGenerateDesc(&desc, &sm, 1));
    CU_CHECK(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    CU_CHECK(cuGreenCtxStreamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0));

    /* Few blocks over many elements: each launch runs long. */
    void *args[] = {&a, &b, &x, &n};
    for (int i = 0; i < launches; i++)
        CU_CHECK(cuLaunchKernel((CUfunction)kernel, 8, 1, 1, 256, 1, 1, 0, gs, args, NULL));
    CU_CHECK(cuMemFree(x));
    CU_CHECK(cuMemAlloc(&y, bytes));
    CU_CHECK(cuMemsetD32(y, FILL, (size_t)n));
    CU_CHECK(cuCtxSynchronize());

    uint32_t *host = malloc(bytes);
    if (!host) {
        fprintf(stderr, "green_ctx: out of host memory\n");
        return 1;
    }
    CU_CHECK(cuMemcpyDtoH(host, y, bytes));
    size_t lost = 0;
    for (int i = 0; i < n; i++)
        lost += host[i] != (uint32_t)FILL;
    free(host);
    int under_drk = dlsym(RTLD_DEFAULT, "drk_alloc_switch") != NULL;
    printf("green_ctx: %d launches on a green stream; y %s x; %zu of %d words of y lost%s\n", launches,
           y == x ? "is" : "is not", lost, n, under_drk ? " (under drk)" : "");

    CU_CHECK(cuMemFree(y));
    CU_CHECK(cuMemFree(a));
    CU_CHECK(cuMemFree(b));
    CU_CHECK(cuStreamDestroy(gs));
    CU_CHECK(cuGreenCtxDestroy(green));
    CU_CHECK(cuLibraryUnload(lib));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    if (lost) {
        fprintf(stderr, "green_ctx: %zu words of the new block were overwritten by the green stream's kernels\n", lost);
        return 1;
    }
    if (under_drk && y == x) {
        fprintf(stderr, "green_ctx: drk served the new block from the freed one after a green context\n");
        return 1;
    }
    printf("ok green_ctx: every word of the new block held%s\n", under_drk ? "; drk left it to the driver" : "");
    return 0;
}
