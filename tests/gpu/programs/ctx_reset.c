/* Contexts that end under a running program (-lcuda), and the memory made in
 * them: each round allocates device memory (cuMemAlloc, cuMemAllocAsync) and
 * pinned host memory, runs the suite's accumulating kernel (embedded
 * fatbin) on it N times and checks every element, then ends its context:
 *
 *   round 1: a created context (cuCtxCreate), ended by cuCtxDestroy;
 *   round 2: the primary context, ended by cuDevicePrimaryCtxReset (as
 *            cudaDeviceReset does), with its memory still allocated;
 *   round 3: the primary context again, retained anew, freed properly.
 *
 * After round 2 the memory it left allocated is freed anyway, as programs
 * that reset and then run their destructors do; the driver refuses (or
 * not): the answers go to stderr, not compared. Under drk the pools must
 * hand out memory that works in every round.
 *
 *   ctx_reset [N]     (default 10)
 *
 * Prints one checksum per round; writes its counts as JSON to
 * $DRK_TEST_COUNTS if set. Every other driver call is checked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CU_CHECK_PROGRAM "ctx_reset"
#include "tests/gpu/programs/cu_check.h"
#include "tests/gpu/programs/drv_vecadd.h"
#include "tests/gpu/programs/test_counts.h"

enum { BUFS = 3 };

typedef struct round_mem {
    CUdeviceptr d[BUFS];
    int *host;
} round_mem;

/* One round in the current context: a and b (cuMemAlloc, cuMemAllocAsync),
 * c accumulates a + b `launches` times; checked through pinned memory. */
static uint64_t run_round(int round, long launches, int n, round_mem *m)
{
    const size_t bytes = (size_t)n * sizeof(int);
    const unsigned block = 256, grid = (unsigned)((n + block - 1) / block);
    CUmodule mod;
    CUfunction fn;
    CUstream s;
    CU_CHECK(cuModuleLoadData(&mod, drk_vecadd_fatbin));
    CU_CHECK(cuModuleGetFunction(&fn, mod, "drk_drv_vecadd"));
    CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&m->d[0], bytes));
    CU_CHECK(cuMemAllocAsync(&m->d[1], bytes, s));
    CU_CHECK(cuMemAlloc(&m->d[2], bytes));
    CU_CHECK(cuMemHostAlloc((void **)&m->host, bytes, 0));
    uint32_t x = 1000u + (uint32_t)round; /* fixed LCG: same inputs every run */
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++) {
            x = x * 1664525u + 1013904223u;
            m->host[i] = k == 2 ? i : (int)(x >> 22) - 512;
        }
        CU_CHECK(cuMemcpyHtoDAsync(m->d[k], m->host, bytes, s));
        CU_CHECK(cuStreamSynchronize(s)); /* the host buffer is reused */
    }
    void *params[] = {&m->d[0], &m->d[1], &m->d[2], &n};
    for (long k = 0; k < launches; k++)
        CU_CHECK(cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, s, params, NULL));
    int *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b)
        exit((fprintf(stderr, "ctx_reset: out of host memory\n"), 1));
    CU_CHECK(cuMemcpyDtoH(a, m->d[0], bytes));
    CU_CHECK(cuMemcpyDtoH(b, m->d[1], bytes));
    CU_CHECK(cuMemcpyDtoHAsync(m->host, m->d[2], bytes, s));
    CU_CHECK(cuStreamSynchronize(s));
    uint64_t fnv = 1469598103934665603ull;
    long bad = 0;
    for (int i = 0; i < n; i++) {
        long want = (long)i + launches * (long)(a[i] + b[i]);
        if ((long)m->host[i] != want && bad++ < 5)
            fprintf(stderr, "ctx_reset: round %d: c[%d] = %d, expected %ld\n", round, i, m->host[i], want);
        for (int byte = 0; byte < 4; byte++)
            fnv = (fnv ^ (((uint32_t)m->host[i] >> (8 * byte)) & 0xffu)) * 1099511628211ull;
    }
    free(a);
    free(b);
    if (bad)
        exit((fprintf(stderr, "ctx_reset: round %d: %ld wrong elements\n", round, bad), 1));
    CU_CHECK(cuStreamDestroy(s));
    return fnv;
}

static void free_round(round_mem *m)
{
    for (int i = 0; i < BUFS; i++)
        CU_CHECK(cuMemFree(m->d[i]));
    CU_CHECK(cuMemFreeHost(m->host));
}

int main(int argc, char **argv)
{
    const long launches = argc > 1 ? atol(argv[1]) : 10;
    const int n = (1 << 20) + 77;
    CUdevice dev;
    CUcontext created, primary;
    round_mem m1, m2, m3;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));

    /* Round 1: a context of the program's own, destroyed with its memory freed. */
    CU_CHECK(cuCtxCreate(&created, NULL, 0, dev));
    uint64_t c1 = run_round(1, launches, n, &m1);
    free_round(&m1);
    CU_CHECK(cuCtxDestroy(created));

    /* Round 2: the primary context, reset with its memory still allocated. */
    CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CU_CHECK(cuCtxSetCurrent(primary));
    uint64_t c2 = run_round(2, launches, n, &m2);
    CU_CHECK(cuDevicePrimaryCtxReset(dev));

    /* Round 3: the primary context anew. */
    CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CU_CHECK(cuCtxSetCurrent(primary));
    CUresult stale_dev = cuMemFree(m2.d[0]), stale_host = cuMemFreeHost(m2.host);
    fprintf(stderr, "ctx_reset: after the reset, cuMemFree of round 2's memory: %s, cuMemFreeHost: %s\n",
            cu_error_name(stale_dev), cu_error_name(stale_host));
    uint64_t c3 = run_round(3, launches, n, &m3);
    free_round(&m3);
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));

    printf("ctx_reset n=%d launches=%ld per round\n", n, launches);
    printf("checksums %016llx %016llx %016llx\n", (unsigned long long)c1, (unsigned long long)c2,
           (unsigned long long)c3);

    if (write_test_counts(
            "{\"workload\": \"ctx_reset\", \"pid\": %d, \"kernels\": {\"drk_drv_vecadd\": %ld}, "
            "\"by_api\": {\"cuLaunchKernel\": %ld}, \"failed_launches\": 0, \"contexts_ended\": 2}\n",
            (int)getpid(), 3 * launches, 3 * launches) != 0)
        return 1;
    return 0;
}
