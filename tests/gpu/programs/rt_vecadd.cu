// Runtime-API program (static cudart, nvcc's default): N launches by <<<>>>
// and M by cudaLaunchKernelEx, every CUDA call checked. The kernel
// accumulates, so the host check proves every launch ran exactly once.
//
//   rt_vecadd [N [M]]     (defaults 2000 1000)
//
// Prints a checksum and its own launch count; writes its counts as JSON to
// $DRK_TEST_COUNTS if set.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/gpu/programs/test_counts.h"

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess) {                                                   \
            fprintf(stderr, "rt_vecadd: %s failed: %s (%d) at line %d\n", #call,    \
                    cudaGetErrorString(err_), (int)err_, __LINE__);                  \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

extern "C" __global__ void drk_rt_vecadd(const int *a, const int *b, int *acc, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc[i] += a[i] + b[i];
}

int main(int argc, char **argv)
{
    const long n_chevron = argc > 1 ? atol(argv[1]) : 2000;
    const long n_ex = argc > 2 ? atol(argv[2]) : 1000;
    const int n = (1 << 20) + 77; // not a multiple of the block: the tail matters
    const int block = 256, grid = (n + block - 1) / block;

    int *ha = (int *)malloc(n * sizeof(int)), *hb = (int *)malloc(n * sizeof(int));
    int *hacc = (int *)malloc(n * sizeof(int));
    if (!ha || !hb || !hacc)
        return fprintf(stderr, "rt_vecadd: out of host memory\n"), 1;
    uint32_t s = 12345u; // fixed LCG: same inputs every run
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ha[i] = (int)(s >> 22) - 512; // [-512, 511]
        s = s * 1664525u + 1013904223u;
        hb[i] = (int)(s >> 22) - 512;
    }

    int *da, *db, *dacc;
    CHECK(cudaMalloc(&da, n * sizeof(int)));
    CHECK(cudaMalloc(&db, n * sizeof(int)));
    CHECK(cudaMalloc(&dacc, n * sizeof(int)));
    CHECK(cudaMemcpy(da, ha, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dacc, 0, n * sizeof(int)));

    for (long k = 0; k < n_chevron; k++) {
        drk_rt_vecadd<<<grid, block>>>(da, db, dacc, n);
        CHECK(cudaGetLastError());
    }

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = 0;
    cfg.attrs = NULL;
    cfg.numAttrs = 0;
    for (long k = 0; k < n_ex; k++)
        CHECK(cudaLaunchKernelEx(&cfg, drk_rt_vecadd, (const int *)da, (const int *)db, dacc, n));

    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(hacc, dacc, n * sizeof(int), cudaMemcpyDeviceToHost));

    const long total = n_chevron + n_ex;
    uint64_t fnv = 1469598103934665603ull;
    long bad = 0;
    for (int i = 0; i < n; i++) {
        long want = total * (long)(ha[i] + hb[i]);
        if ((long)hacc[i] != want && bad++ < 5)
            fprintf(stderr, "rt_vecadd: acc[%d] = %d, expected %ld\n", i, hacc[i], want);
        for (int byte = 0; byte < 4; byte++)
            fnv = (fnv ^ (((uint32_t)hacc[i] >> (8 * byte)) & 0xffu)) * 1099511628211ull;
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dacc));
    if (bad) {
        fprintf(stderr, "rt_vecadd: %ld wrong elements\n", bad);
        return 1;
    }

    printf("rt_vecadd n=%d chevron=%ld ex=%ld\n", n, n_chevron, n_ex);
    printf("checksum %016llx\n", (unsigned long long)fnv);
    printf("launches %ld\n", total);

    // by_api is not claimed: which driver entry cudart uses is its choice.
    if (write_test_counts(
            "{\"workload\": \"rt_vecadd\", \"pid\": %d, \"launches\": %ld, "
            "\"kernels\": {\"drk_rt_vecadd\": %ld}, \"failed_launches\": 0}\n",
            (int)getpid(), total, total) != 0)
        return 1;
    free(ha);
    free(hb);
    free(hacc);
    return 0;
}
