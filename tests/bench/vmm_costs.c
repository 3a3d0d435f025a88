/* What the driver's virtual-memory calls cost by physical handle size, and
 * what the few driver calls on the pool's hot path cost: the facts behind
 * the device pool's page size and growth (docs/memory.md). Handles are made
 * as the pool makes them (pinned, POSIX-fd exportable, GPUDirect RDMA where
 * supported); for each size, `--total` bytes of handles are created, mapped
 * into one reserved range, made accessible in one call, unmapped and
 * released, and each step is timed; half the handles are unmapped one
 * call each, the other half in runs of UNMAP_RUN handles a call (whether
 * the pool's moves would gain by unmapping runs of idle pages together).
 * Then, for handles larger than the granularity, the same handles mapped in
 * granularity-sized pieces (cuMemMap's offset): interleaved, so that
 * neighbouring pages come from different handles, and in order, so that
 * one access call covers each handle whole — whether a pool could create
 * large handles and still place, move and free its pages one by one, and
 * what each piece then costs. Prints one line per size and per call, and
 * exits non-zero if any driver call fails.
 *
 *   vmm_costs [--total MiB] [--sizes 2,8,32,...]                           */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "vmm_costs"
#include "bench_cuda.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

#define UNMAP_RUN 16

/* Room for n handles' records, and a range for them. */
static CUmemGenericAllocationHandle *set_up(size_t n, size_t size, size_t gran, CUdeviceptr *va)
{
    CUmemGenericAllocationHandle *h = calloc(n, sizeof *h);
    if (!h)
        exit(1);
    CHECK(cuMemAddressReserve(va, n * size, gran, 0, 0));
    return h;
}

static CUmemAccessDesc access_of(CUdevice dev)
{
    return (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev},
                             .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
}

static void one_size(CUdevice dev, const CUmemAllocationProp *prop, size_t gran, size_t mib, size_t total_mib)
{
    size_t size = mib << 20, n = total_mib / mib;
    if (size % gran || !n)
        return;
    CUdeviceptr va;
    CUmemGenericAllocationHandle *h = set_up(n, size, gran, &va);
    CUmemAccessDesc acc = access_of(dev);
    double t0 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemCreate(&h[i], size, prop, 0));
    double t1 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemMap(va + i * size, size, 0, h[i], 0));
    double t2 = now_us();
    CHECK(cuMemSetAccess(va, n * size, &acc, 1));
    double t3 = now_us();
    /* Access per handle too: what mapping pages one by one costs. */
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemSetAccess(va + i * size, size, &acc, 1));
    double t4 = now_us();
    CHECK(cuMemsetD8(va, 1, n * size));
    CHECK(cuCtxSynchronize());
    double t5 = now_us();
    size_t half = n / 2;
    for (size_t i = 0; i < half; i++)
        CHECK(cuMemUnmap(va + i * size, size));
    double t5b = now_us();
    for (size_t i = half; i < n; i += UNMAP_RUN)
        CHECK(cuMemUnmap(va + i * size, (n - i < UNMAP_RUN ? n - i : UNMAP_RUN) * size));
    double t6 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemRelease(h[i]));
    double t7 = now_us();
    CHECK(cuMemAddressFree(va, n * size));
    double per2 = (double)(n * size) / (2u << 20), pages = (double)size / (2u << 20);
    size_t rest = n - half;
    double unmap_each = half ? (t5b - t5) / half : 0, unmap_runs = rest ? (t6 - t5b) / rest : 0;
    printf("handle %4zu MiB x %4zu: create %8.1f us (%6.2f per 2 MiB)  map %7.1f (%6.2f)  access-once %8.1f (%6.2f)  "
           "access-each %8.1f (%6.2f)  unmap %8.1f (%6.2f)  unmap-in-runs-of-%d %8.1f (%6.2f)  release %8.1f (%6.2f)  "
           "total-new %6.2f us per 2 MiB\n",
           mib, n, (t1 - t0) / n, (t1 - t0) / per2, (t2 - t1) / n, (t2 - t1) / per2, t3 - t2, (t3 - t2) / per2,
           (t4 - t3) / n, (t4 - t3) / per2, unmap_each, unmap_each / pages, UNMAP_RUN, unmap_runs,
           unmap_runs / pages, (t7 - t6) / n, (t7 - t6) / per2, (t3 - t0) / per2);
    free(h);
}

/* Handles of `mib` MiB mapped as granularity-sized pieces: each piece its
 * own cuMemMap (offset into its handle) and cuMemUnmap. */
static void pieces(CUdevice dev, const CUmemAllocationProp *prop, size_t gran, size_t mib, size_t total_mib)
{
    size_t size = mib << 20, n = total_mib / mib, per = size / gran;
    if (size % gran || !n || per < 2)
        return;
    CUdeviceptr va;
    CUmemGenericAllocationHandle *h = set_up(n, size, gran, &va);
    CUmemAccessDesc acc = access_of(dev);
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemCreate(&h[i], size, prop, 0));
    double npieces = (double)(n * per);
    /* Interleaved: piece j of handle i at slot j * n + i. */
    double t0 = now_us();
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < per; j++)
            CHECK(cuMemMap(va + (j * n + i) * gran, gran, j * gran, h[i], 0));
    double t1 = now_us();
    for (size_t k = 0; k < n * per; k++)
        CHECK(cuMemSetAccess(va + k * gran, gran, &acc, 1));
    double t2 = now_us();
    CHECK(cuMemsetD8(va, 2, n * size));
    CHECK(cuCtxSynchronize());
    double t3 = now_us();
    for (size_t k = 0; k < n * per; k++)
        CHECK(cuMemUnmap(va + k * gran, gran));
    double t4 = now_us();
    /* In order: one access call over each handle's pieces. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < per; j++)
            CHECK(cuMemMap(va + (i * per + j) * gran, gran, j * gran, h[i], 0));
    double t5 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemSetAccess(va + i * size, size, &acc, 1));
    double t6 = now_us();
    CHECK(cuMemsetD8(va, 3, n * size));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemUnmap(va, n * size));
    for (size_t i = 0; i < n; i++)
        CHECK(cuMemRelease(h[i]));
    CHECK(cuMemAddressFree(va, n * size));
    printf("pieces of %4zu MiB handles, %zu KiB each, x %6.0f: map %6.2f us a piece  access-each %6.2f  unmap %6.2f  "
           "move (unmap+map+access) %6.2f | in order: map %6.2f  access per handle %8.1f (%6.2f a piece)\n",
           mib, gran >> 10, npieces, (t1 - t0) / npieces, (t2 - t1) / npieces, (t4 - t3) / npieces,
           (t1 - t0 + t2 - t1 + t4 - t3) / npieces, (t5 - t4) / npieces, (t6 - t5) / n, (t6 - t5) / npieces);
    free(h);
}

static void hot_calls(void)
{
    enum { N = 200000 };
    CUcontext c;
    double t0 = now_us();
    for (int i = 0; i < N; i++)
        CHECK(cuCtxGetCurrent(&c));
    double t1 = now_us();
    CUevent e;
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    double t2 = now_us();
    for (int i = 0; i < N / 10; i++)
        CHECK(cuEventRecord(e, s));
    double t3 = now_us();
    CHECK(cuStreamSynchronize(s));
    double t4 = now_us();
    for (int i = 0; i < N / 10; i++)
        CHECK(cuEventQuery(e));
    double t5 = now_us();
    CUstreamCaptureStatus st;
    for (int i = 0; i < N / 10; i++)
        CHECK(cuStreamIsCapturing(s, &st));
    double t6 = now_us();
    for (int i = 0; i < N / 10; i++)
        CHECK(cuCtxSetCurrent(c));
    double t7 = now_us();
    printf("hot calls: cuCtxGetCurrent %.3f us  cuEventRecord %.3f  cuEventQuery(done) %.3f  cuStreamIsCapturing "
           "%.3f  cuCtxSetCurrent(same) %.3f\n",
           (t1 - t0) / N, (t3 - t2) / (N / 10), (t5 - t4) / (N / 10), (t6 - t5) / (N / 10), (t7 - t6) / (N / 10));
    CHECK(cuEventDestroy(e));
    CHECK(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
    size_t total = 1024;
    const char *sizes = "2,4,8,16,32,64,128,256,512";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--total"))
            total = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--sizes"))
            sizes = argv[i + 1];
        else {
            fprintf(stderr, "usage: vmm_costs [--total MiB] [--sizes 2,8,32,...]\n");
            return 2;
        }
    }
    CUdevice dev;
    bench_primary_context(&dev);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev},
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    int rdma = 0;
    CHECK(cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev));
    prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("granularity %zu KiB, gpuDirectRDMACapable %d, %zu MiB of handles per size\n", gran >> 10, rdma, total);
    hot_calls();
    /* Once unmeasured: the first VMM calls of a process pay set-up. */
    one_size(dev, &prop, gran, 2, 64);
    for (const char *p = sizes; *p;) {
        char *end;
        size_t mib = strtoull(p, &end, 10);
        if (end == p)
            break;
        one_size(dev, &prop, gran, mib, total);
        pieces(dev, &prop, gran, mib, total);
        p = *end == ',' ? end + 1 : end;
    }
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
