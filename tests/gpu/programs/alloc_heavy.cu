// Many device allocations of many sizes (runtime API, static cudart), each
// written in full by a kernel, exactly its bytes, and read back by another
// that sums them: cudaMalloc/cudaFree with up to 24 blocks live,
// cudaMallocAsync/cudaFreeAsync on 4 streams (a fifth of the frees on
// another stream, ordered by an event), and cudaMallocPitch (only the width
// of each row written and read). Sizes run from 1 byte to 64 MiB, including
// the edges of 512-byte and 2 MiB granules. Made for compute-sanitizer's
// memcheck: any access outside a block is its error; a block that is not
// really the program's, or shared, shows as a wrong sum.
//
//   alloc_heavy [MALLOCS [ASYNCS [PITCHES]]]     (defaults 300 320 80)
//
// Prints its counts and a checksum of the sums; writes its counts as JSON to
// $DRK_TEST_COUNTS if set. Every CUDA call is checked.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/gpu/programs/test_counts.h"

#define CHECK(call)                                                                                    \
    do {                                                                                               \
        cudaError_t err_ = (call);                                                                     \
        if (err_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "alloc_heavy: %s failed: %s (%s) at line %d\n", #call,                     \
                    cudaGetErrorName(err_), cudaGetErrorString(err_), __LINE__);                       \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

extern "C" __global__ void drk_fill_bytes(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)(seed + i);
}

extern "C" __global__ void drk_sum_bytes(const unsigned char *p, size_t n, unsigned long long *out)
{
    unsigned long long s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += p[i];
    if (s)
        atomicAdd(out, s);
}

// Pitched: element idx of the width x height block is row idx / width,
// column idx % width; the padding of each row is never touched.
extern "C" __global__ void drk_fill_pitch(unsigned char *p, size_t pitch, size_t width, size_t height,
                                          unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < width * height;
         i += (size_t)gridDim.x * blockDim.x)
        p[(i / width) * pitch + i % width] = (unsigned char)(seed + i);
}

extern "C" __global__ void drk_sum_pitch(const unsigned char *p, size_t pitch, size_t width, size_t height,
                                         unsigned long long *out)
{
    unsigned long long s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < width * height;
         i += (size_t)gridDim.x * blockDim.x)
        s += p[(i / width) * pitch + i % width];
    if (s)
        atomicAdd(out, s);
}

static uint32_t lcg = 4242u;
static uint32_t rnd(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lcg >> 8;
}

// Sizes from 1 byte to 64 MiB, granule edges often.
static size_t pick_size(void)
{
    static const size_t edges[] = {1, 511, 512, 513, 4095, 65537, (2u << 20) - 1, 2u << 20, (2u << 20) + 1,
                                   (4u << 20) + 512, (16u << 20) + 3, (64u << 20) - 512};
    uint32_t c = rnd() % 100;
    if (c < 35)
        return 1 + rnd() % 4096;
    if (c < 65)
        return 4097 + rnd() % (1u << 20);
    if (c < 85)
        return (1u << 20) + rnd() % (7u << 20);
    return edges[rnd() % (sizeof edges / sizeof edges[0])];
}

// The sum of bytes (seed + i) mod 256 for i < n.
static unsigned long long byte_sum(size_t n, unsigned seed)
{
    unsigned long long s = (unsigned long long)(n / 256) * (255ull * 256 / 2);
    for (size_t i = 0; i < n % 256; i++)
        s += (seed + i) & 255u;
    return s;
}

static unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 1024 ? 1024 : g);
}

enum { STREAMS = 4, SYNC_WINDOW = 24, ASYNC_WINDOW = 8 };

int main(int argc, char **argv)
{
    const long n_malloc = argc > 1 ? atol(argv[1]) : 300;
    const long n_async = argc > 2 ? atol(argv[2]) : 320;
    const long n_pitch = argc > 3 ? atol(argv[3]) : 80;
    const long n_total = n_malloc + n_async + n_pitch;

    unsigned long long *sums = NULL;
    unsigned long long *want = (unsigned long long *)calloc((size_t)n_total + 1, sizeof *want);
    unsigned long long *got = (unsigned long long *)calloc((size_t)n_total + 1, sizeof *got);
    if (!want || !got)
        return fprintf(stderr, "alloc_heavy: out of host memory\n"), 1;
    CHECK(cudaMalloc(&sums, (size_t)(n_total + 1) * sizeof *sums));
    CHECK(cudaMemset(sums, 0, (size_t)(n_total + 1) * sizeof *sums));
    long id = 0, launches = 0;
    unsigned long long bytes_total = 0;

    // cudaMalloc / cudaFree, up to SYNC_WINDOW live, freed in random order.
    unsigned char *live[SYNC_WINDOW] = {0};
    for (long k = 0; k < n_malloc; k++, id++) {
        int slot = (int)(rnd() % SYNC_WINDOW);
        if (live[slot])
            CHECK(cudaFree(live[slot]));
        size_t n = pick_size();
        unsigned seed = rnd() & 255u;
        CHECK(cudaMalloc(&live[slot], n));
        drk_fill_bytes<<<grid_for(n), 256>>>(live[slot], n, seed);
        CHECK(cudaGetLastError());
        drk_sum_bytes<<<grid_for(n), 256>>>(live[slot], n, sums + id);
        CHECK(cudaGetLastError());
        launches += 2;
        unsigned char last = 0;
        CHECK(cudaMemcpy(&last, live[slot] + n - 1, 1, cudaMemcpyDeviceToHost));
        if (last != (unsigned char)(seed + n - 1))
            return fprintf(stderr, "alloc_heavy: cudaMalloc block %ld (%zu bytes): last byte 0x%02x, expected 0x%02x\n",
                           id, n, last, (unsigned char)(seed + n - 1)),
                   1;
        want[id] = byte_sum(n, seed);
        bytes_total += n;
    }
    for (int s = 0; s < SYNC_WINDOW; s++)
        if (live[s])
            CHECK(cudaFree(live[s]));

    // cudaMallocAsync / cudaFreeAsync on STREAMS streams.
    cudaStream_t st[STREAMS];
    cudaEvent_t ev;
    for (int s = 0; s < STREAMS; s++)
        CHECK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    unsigned char *alive[STREAMS][ASYNC_WINDOW] = {{0}};
    for (long k = 0; k < n_async; k++, id++) {
        int s = (int)(k % STREAMS), slot = (int)(rnd() % ASYNC_WINDOW);
        if (alive[s][slot]) {
            if (rnd() % 5 == 0) { // freed on another stream, after this one's work
                int t = (s + 1 + (int)(rnd() % (STREAMS - 1))) % STREAMS;
                CHECK(cudaEventRecord(ev, st[s]));
                CHECK(cudaStreamWaitEvent(st[t], ev, 0));
                CHECK(cudaFreeAsync(alive[s][slot], st[t]));
            } else {
                CHECK(cudaFreeAsync(alive[s][slot], st[s]));
            }
        }
        size_t n = pick_size();
        unsigned seed = rnd() & 255u;
        CHECK(cudaMallocAsync((void **)&alive[s][slot], n, st[s]));
        drk_fill_bytes<<<grid_for(n), 256, 0, st[s]>>>(alive[s][slot], n, seed);
        CHECK(cudaGetLastError());
        drk_sum_bytes<<<grid_for(n), 256, 0, st[s]>>>(alive[s][slot], n, sums + id);
        CHECK(cudaGetLastError());
        launches += 2;
        want[id] = byte_sum(n, seed);
        bytes_total += n;
    }
    for (int s = 0; s < STREAMS; s++)
        for (int slot = 0; slot < ASYNC_WINDOW; slot++)
            if (alive[s][slot])
                CHECK(cudaFreeAsync(alive[s][slot], st[s]));
    for (int s = 0; s < STREAMS; s++)
        CHECK(cudaStreamSynchronize(st[s]));

    // cudaMallocPitch: rows of 1 to 5000 bytes, 1 to 300 rows.
    for (long k = 0; k < n_pitch; k++, id++) {
        size_t width = 1 + rnd() % 5000, height = 1 + rnd() % 300, pitch = 0;
        unsigned seed = rnd() & 255u;
        unsigned char *p = NULL;
        CHECK(cudaMallocPitch((void **)&p, &pitch, width, height));
        if (pitch < width)
            return fprintf(stderr, "alloc_heavy: cudaMallocPitch gave pitch %zu < width %zu\n", pitch, width), 1;
        drk_fill_pitch<<<grid_for(width * height), 256>>>(p, pitch, width, height, seed);
        CHECK(cudaGetLastError());
        drk_sum_pitch<<<grid_for(width * height), 256>>>(p, pitch, width, height, sums + id);
        CHECK(cudaGetLastError());
        launches += 2;
        CHECK(cudaFree(p));
        want[id] = byte_sum(width * height, seed);
        bytes_total += width * height;
    }

    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got, sums, (size_t)n_total * sizeof *sums, cudaMemcpyDeviceToHost));
    uint64_t fnv = 1469598103934665603ull;
    long bad = 0;
    for (long i = 0; i < n_total; i++) {
        if (got[i] != want[i] && bad++ < 5)
            fprintf(stderr, "alloc_heavy: allocation %ld: sum %llu, expected %llu\n", i, got[i], want[i]);
        for (int byte = 0; byte < 8; byte++)
            fnv = (fnv ^ ((got[i] >> (8 * byte)) & 0xffu)) * 1099511628211ull;
    }
    CHECK(cudaEventDestroy(ev));
    for (int s = 0; s < STREAMS; s++)
        CHECK(cudaStreamDestroy(st[s]));
    CHECK(cudaFree(sums));
    free(want);
    free(got);
    if (bad)
        return fprintf(stderr, "alloc_heavy: %ld of %ld allocations summed wrong\n", bad, n_total), 1;

    printf("alloc_heavy malloc=%ld async=%ld pitch=%ld bytes=%llu launches=%ld\n", n_malloc, n_async, n_pitch,
           bytes_total, launches);
    printf("checksum %016llx\n", (unsigned long long)fnv);

    // The sums buffer is one more cudaMalloc.
    if (write_test_counts(
            "{\"workload\": \"alloc_heavy\", \"pid\": %d, \"failed_launches\": 0, "
            "\"kernels\": {\"drk_fill_bytes\": %ld, \"drk_sum_bytes\": %ld, \"drk_fill_pitch\": %ld, "
            "\"drk_sum_pitch\": %ld}, \"allocs\": {\"malloc\": %ld, \"async\": %ld, \"pitch\": %ld}}\n",
            (int)getpid(), n_malloc + n_async, n_malloc + n_async, n_pitch, n_pitch, n_malloc + 1, n_async,
            n_pitch) != 0)
        return 1;
    return 0;
}
