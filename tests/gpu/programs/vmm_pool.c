/* The stream-ordered pool on a real GPU: pool (alloc/pool.c) over the heap
 * over the VMM backend, with the driver's events. Stream S1 is kept busy
 * writing a block, which is then freed on S1: S1 may reuse it at once, S2
 * must not get it while S1's work is still running, and when memory runs
 * out S2's request waits for that work and then gets the memory. Prints
 * "ok ..." and exits 0, or says what failed and exits 1. */
#include <cuda.h>
#include <stdio.h>

#include "alloc/pages_vmm.h"
#include "alloc/pool_events.h"
#include "tests/gpu/programs/linked_driver.h"
#include "tests/gpu/programs/self_check.h"

/* Keeps `s` writing [p, p + n) for a while: many device-side memsets. */
static CUresult busy(CUstream s, uintptr_t p, size_t n, int rounds)
{
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < rounds && r == CUDA_SUCCESS; i++)
        r = cuMemsetD8Async((CUdeviceptr)p, (unsigned char)i, n, s);
    return r;
}

int main(void)
{
    enum { PAGES = 32 };
    CUdevice dev;
    CUcontext ctx;
    CUstream s1, s2;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, dev, PAGES);
    drk_heap *h = pb ? drk_heap_new(pb, 4 * PAGES * pb->page_size) : NULL;
    drk_cuda_events *ce = drk_cuda_events_new(&linked_driver);
    EXPECT(h && ce);
    drk_pool_events table = drk_cuda_events_table(ce);
    drk_pool *p = drk_pool_new(h, &table);
    EXPECT(p && drk_pool_stream_created(p, (uintptr_t)s1) == 0 && drk_pool_stream_created(p, (uintptr_t)s2) == 0);
    size_t half = PAGES / 2 * pb->page_size;

    /* A, written by S1 for a while, freed on S1. */
    uintptr_t a, b, c;
    EXPECT(drk_pool_alloc(p, half, (uintptr_t)s1, 1, &a) == 0);
    /* Long enough (tens of ms) that S1 is still running when S2 runs out:
     * the pool takes back completed frees without waiting, so a short
     * burst would leave nothing to wait for. */
    CHECK(busy(s1, a, half, 4000));
    EXPECT(drk_pool_free(p, a, (uintptr_t)s1, 1) == 0);
    /* S1 may have it back at once; S2 gets other memory while S1 runs. */
    EXPECT(drk_pool_alloc(p, half, (uintptr_t)s1, 1, &c) == 0 && c == a);
    EXPECT(drk_pool_free(p, c, (uintptr_t)s1, 1) == 0);
    EXPECT(drk_pool_alloc(p, half, (uintptr_t)s2, 1, &b) == 0);
    int s1_busy = cuStreamQuery(s1) == CUDA_ERROR_NOT_READY;
    EXPECT(b + half <= a || a + half <= b);
    /* Memory is full now (A pending, B live): S2's next request must wait
     * for S1's work, then gets A's pages. */
    EXPECT(drk_pool_alloc(p, half, (uintptr_t)s2, 1, &c) == 0);
    EXPECT(cuStreamQuery(s1) == CUDA_SUCCESS); /* the wait covered S1's work */
    CHECK(busy(s2, c, half, 1));
    CHECK(cuStreamSynchronize(s2));
    drk_pool_stats st = drk_pool_get_stats(p);
    EXPECT(st.same_stream_reuses == 1);
    EXPECT(s1_busy && st.waits >= 1);
    EXPECT(drk_pool_free(p, b, (uintptr_t)s2, 1) == 0 && drk_pool_free(p, c, (uintptr_t)s2, 1) == 0);
    drk_pool_delete(p);
    drk_cuda_events_delete(ce);
    char err[200];
    EXPECT(drk_heap_check(h, err, sizeof err) == 0 && drk_heap_get_stats(h).live_blocks == 0);
    drk_heap_delete(h);
    pb->destroy(pb);
    CHECK(cuStreamDestroy(s1));
    CHECK(cuStreamDestroy(s2));
    printf("ok same-stream reuse while S1 ran; S2 kept off S1's pending block; "
           "full memory: S2 waited (%llu waits) for S1 and got its pages; %llu events recorded\n",
           (unsigned long long)st.waits, (unsigned long long)st.events);
    return 0;
}
