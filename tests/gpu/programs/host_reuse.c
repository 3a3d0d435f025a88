/* Pinned host memory freed while a copy that uses it is still queued
 * (-lcuda). The driver's cuMemFreeHost waits for the device, so a program
 * may free a staging buffer right after queueing its copy; a pool that hands
 * the same block out again at once lets the program's next writes reach the
 * old copy. For each size, on a non-blocking stream held back by a host
 * function (a 150 ms sleep):
 *   up:   a copy host->device from A queued, A freed, B allocated (the same
 *         size) and filled with another byte; the device must get A's byte;
 *   down: a copy device->host into A queued, A freed, B allocated and
 *         filled; B must keep its own byte.
 * Prints one line per case (whether B is A's address, the free's time) and
 * "ok" last when every case kept its bytes; exit 1 otherwise.
 *
 *   host_reuse */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CU_CHECK_PROGRAM "host_reuse"
#include "tests/gpu/programs/cu_check.h"

static void CUDA_CB hold(void *arg)
{
    (void)arg;
    usleep(150 * 1000);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The first byte of buf[0, n) that is not `want`, or -1. */
static long first_other(const unsigned char *buf, size_t n, unsigned char want)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != want)
            return (long)i;
    return -1;
}

static int run_case(CUstream s, CUdeviceptr d, unsigned char *check, size_t bytes, int down)
{
    unsigned char *a, *b;
    CU_CHECK(cuMemAllocHost((void **)&a, bytes));
    memset(a, 0x11, bytes);
    if (down)
        CU_CHECK(cuMemsetD8(d, 0x33, bytes));
    CU_CHECK(cuLaunchHostFunc(s, hold, NULL));
    if (down)
        CU_CHECK(cuMemcpyDtoHAsync(a, d, bytes, s));
    else
        CU_CHECK(cuMemcpyHtoDAsync(d, a, bytes, s));
    double t0 = now_ms();
    CU_CHECK(cuMemFreeHost(a));
    double freed_ms = now_ms() - t0;
    CU_CHECK(cuMemAllocHost((void **)&b, bytes));
    memset(b, 0x22, bytes);
    CU_CHECK(cuStreamSynchronize(s));
    long bad;
    if (down) {
        bad = first_other(b, bytes, 0x22);
    } else {
        CU_CHECK(cuMemcpyDtoH(check, d, bytes));
        bad = first_other(check, bytes, 0x11);
    }
    printf("%-4s %9zu bytes: B %s A, free %.1f ms: %s\n", down ? "down" : "up", bytes, b == a ? "is" : "is not",
           freed_ms, bad < 0 ? "kept" : "CHANGED");
    if (bad >= 0)
        fprintf(stderr, "host_reuse: %s %zu bytes: byte %ld is 0x%02x\n", down ? "down" : "up", bytes, bad,
                down ? b[bad] : check[bad]);
    CU_CHECK(cuMemFreeHost(b));
    return bad < 0 ? 0 : 1;
}

int main(void)
{
    static const size_t sizes[] = {4096, (size_t)4 << 20, (size_t)64 << 20};
    const size_t most = (size_t)64 << 20;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr d;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&d, most));
    unsigned char *check = malloc(most);
    if (!check)
        return fprintf(stderr, "host_reuse: out of host memory\n"), 1;
    int failed = 0;
    for (int down = 0; down < 2; down++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            failed += run_case(s, d, check, sizes[i], down);
    free(check);
    CU_CHECK(cuMemFree(d));
    CU_CHECK(cuStreamDestroy(s));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    if (failed)
        return fprintf(stderr, "host_reuse: %d of 6 cases changed bytes\n", failed), 1;
    printf("ok: 6 cases kept their bytes\n");
    return 0;
}
