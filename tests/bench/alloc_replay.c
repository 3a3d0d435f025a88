/* Replays a device allocation trace (docs/alloc-trace.md) as a program's own
 * driver calls, in order and as fast as they go: cuMemAlloc_v2 and
 * cuMemFree_v2, cuMemAllocAsync and cuMemFreeAsync on the trace's streams
 * (created here; stream 0 is the legacy one). What a recorded program's
 * allocations cost, natively or with drk preloaded, on a GPU or on the
 * stand-in driver (sized to the trace's device when it says how large, its
 * VMM calls as slow as FAKECUDA_VMM_COSTS makes them).
 *
 *   alloc_replay TRACE [DEVICE_BYTES]
 *
 * DEVICE_BYTES sizes the stand-in's device where the trace does not say
 * (an H200's: 150109880320); a GPU's is what it is.
 *
 * Prints one JSON line: ops, allocations, failures (allocations the driver
 * refused: their frees are skipped), seconds and microseconds per op.
 * Exit status 0 when every allocation succeeded, 1 otherwise, 2 for a trace
 * it cannot read. */
#define _GNU_SOURCE
#include <dlfcn.h>

#define BENCH_NAME "alloc_replay"
#include "alloc/trace.h"
#include "tests/bench/bench_cuda.h"

static CUstream streams[DRK_TRACE_MAX_STREAM + 1];

/* The trace's stream n: 0 is the legacy stream, others made on first use. */
static int stream_of(uint32_t n, CUstream *s)
{
    if (n == 0 || n == DRK_TRACE_NO_STREAM) {
        *s = NULL;
        return 0;
    }
    if (!streams[n] && cuStreamCreate(&streams[n], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return -1;
    *s = streams[n];
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: alloc_replay TRACE [DEVICE_BYTES]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    drk_trace_reader rd;
    if (!f || drk_trace_open(&rd, f) != 0) {
        fprintf(stderr, "alloc_replay: %s: %s\n", argv[1], f ? rd.error : "cannot open");
        if (f)
            drk_trace_close(&rd), fclose(f);
        return 2;
    }
    CUdevice dev;
    bench_primary_context(&dev);
    /* The stand-in driver only: room for the trace's device. */
    void (*set_total)(size_t) = (void (*)(size_t))dlsym(RTLD_DEFAULT, "fakecuda_set_total_memory");
    size_t device = rd.header.device_bytes ? (size_t)rd.header.device_bytes
                    : argc == 3              ? (size_t)strtoull(argv[2], NULL, 10)
                                             : 0;
    if (set_total && device)
        set_total(device);

    CUdeviceptr *ptr = NULL;
    size_t nptr = 0;
    unsigned long long ops = 0, allocs = 0, failures = 0;
    drk_trace_op op;
    int r;
    double t0 = now_ms();
    while ((r = drk_trace_next(&rd, &op)) == 1) {
        ops++;
        if (op.slot >= nptr) {
            size_t n = nptr ? 2 * nptr : 1024;
            while (n <= op.slot)
                n *= 2;
            CUdeviceptr *p = realloc(ptr, n * sizeof *p);
            if (!p) {
                fprintf(stderr, "alloc_replay: out of host memory\n");
                return 2;
            }
            for (size_t i = nptr; i < n; i++)
                p[i] = 0;
            ptr = p, nptr = n;
        }
        CUstream s;
        if (stream_of(op.stream, &s) != 0) {
            fprintf(stderr, "alloc_replay: cuStreamCreate failed\n");
            return 1;
        }
        CUresult c;
        if (drk_trace_is_alloc(op.kind)) {
            allocs++;
            c = op.kind == DRK_TRACE_ALLOC ? cuMemAlloc_v2(&ptr[op.slot], op.size)
                                           : cuMemAllocAsync(&ptr[op.slot], op.size, s);
            if (c != CUDA_SUCCESS) {
                ptr[op.slot] = 0;
                failures++;
            }
        } else if (ptr[op.slot]) {
            c = op.kind == DRK_TRACE_FREE ? cuMemFree_v2(ptr[op.slot]) : cuMemFreeAsync(ptr[op.slot], s);
            ptr[op.slot] = 0;
            if (c != CUDA_SUCCESS) {
                fprintf(stderr, "alloc_replay: a free failed on line %llu: %d\n", (unsigned long long)rd.line,
                        (int)c);
                return 1;
            }
        }
    }
    CHECK(cuCtxSynchronize());
    double t = (now_ms() - t0) / 1e3;
    if (r < 0) {
        fprintf(stderr, "alloc_replay: %s\n", rd.error);
        return 2;
    }
    for (size_t i = 0; i < nptr; i++)
        if (ptr[i])
            cuMemFree_v2(ptr[i]);
    for (size_t i = 0; i <= DRK_TRACE_MAX_STREAM; i++)
        if (streams[i])
            cuStreamDestroy(streams[i]);
    drk_trace_close(&rd);
    fclose(f);
    free(ptr);
    printf("{\"ops\": %llu, \"allocs\": %llu, \"failures\": %llu, \"seconds\": %.6f, \"us_per_op\": %.4f}\n", ops,
           allocs, failures, t, ops ? t * 1e6 / (double)ops : 0.0);
    return failures ? 1 : 0;
}
