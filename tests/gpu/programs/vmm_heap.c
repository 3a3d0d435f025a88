/* The pool's device pages on a real GPU: the heap (alloc/heap.c) over the
 * VMM backend (alloc/pages_vmm.c), capped at 32 pages so it must move idle
 * pages. 32 one-page blocks are written by the device, every other one is
 * freed, and a 16-page block must then be stitched from the freed pages;
 * the survivors keep their bytes and the new block is writable end to end.
 * Then the same with runs (handles of several pages) moved whole. Also
 * prints what each VMM step costs here. Prints "ok ..." and exits 0,
 * or says what failed and exits 1. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloc/heap.h"
#include "alloc/pages_vmm.h"
#include "tests/gpu/programs/linked_driver.h"
#include "tests/gpu/programs/self_check.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(void)
{
    enum { N = 32 };
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, dev, N);
    EXPECT(pb != NULL);
    size_t page = pb->page_size;
    drk_heap *h = drk_heap_new(pb, 4 * N * page);
    EXPECT(h != NULL);

    uintptr_t blk[N], big;
    double t0 = now_us();
    for (int i = 0; i < N; i++)
        EXPECT(drk_heap_alloc(h, page, &blk[i]) == 0);
    double t_fill = now_us() - t0;
    for (int i = 0; i < N; i++)
        CHECK(cuMemsetD8((CUdeviceptr)blk[i], (unsigned char)i, page));
    EXPECT(drk_heap_alloc(h, 1, &big) == DRK_PAGES_OOM);
    for (int i = 0; i < N; i += 2)
        EXPECT(drk_heap_free(h, blk[i]) == 0);
    t0 = now_us();
    EXPECT(drk_heap_alloc(h, N / 2 * page, &big) == 0);
    double t_stitch = now_us() - t0;
    CHECK(cuMemsetD8((CUdeviceptr)big, 0xee, N / 2 * page));
    CHECK(cuCtxSynchronize());

    unsigned char *host = malloc(page);
    EXPECT(host != NULL);
    for (int i = 1; i < N; i += 2) {
        CHECK(cuMemcpyDtoH(host, (CUdeviceptr)blk[i], page));
        for (size_t k = 0; k < page; k += 4093)
            EXPECT(host[k] == (unsigned char)i);
    }
    for (int p = 0; p < N / 2; p++) {
        CHECK(cuMemcpyDtoH(host, (CUdeviceptr)(big + (size_t)p * page), page));
        EXPECT(host[0] == 0xee && host[page - 1] == 0xee);
    }
    drk_heap_stats s = drk_heap_get_stats(h);
    char err[200];
    EXPECT(drk_heap_check(h, err, sizeof err) == 0);
    EXPECT(s.moves == N / 2 && s.pages == N && s.idle_pages == 0);

    /* Runs: everything given back, then two blocks of N/2 - 1 pages, each
     * followed by a pin, each made of a few handles (one cuMemCreate of several
     * pages each); freed, their runs move whole, one cuMemUnmap, cuMemMap
     * and access grant each, under a block of N/2 pages that neither hole
     * fits. Survivors and the new block hold their bytes. */
    for (int i = 1; i < N; i += 2)
        EXPECT(drk_heap_free(h, blk[i]) == 0);
    EXPECT(drk_heap_free(h, big) == 0);
    drk_heap_trim(h, 0);
    uintptr_t r1, pin, r2, pin2;
    const size_t half = N / 2 - 1;
    drk_heap_stats made = drk_heap_get_stats(h);
    EXPECT(drk_heap_alloc(h, half * page, &r1) == 0 && drk_heap_alloc(h, page, &pin) == 0 &&
           drk_heap_alloc(h, half * page, &r2) == 0 && drk_heap_alloc(h, page, &pin2) == 0);
    CHECK(cuMemsetD8((CUdeviceptr)r1, 0x11, half * page));
    CHECK(cuMemsetD8((CUdeviceptr)pin, 0x22, page));
    CHECK(cuMemsetD8((CUdeviceptr)r2, 0x33, half * page));
    CHECK(cuCtxSynchronize());
    s = drk_heap_get_stats(h);
    EXPECT(s.pages == N && s.creates - made.creates == N &&
           s.create_calls - made.create_calls < N - 8); /* runs: fewer handles than pages */
    EXPECT(drk_heap_free(h, r1) == 0 && drk_heap_free(h, r2) == 0);
    drk_heap_stats before = drk_heap_get_stats(h);
    t0 = now_us();
    EXPECT(drk_heap_alloc(h, N / 2 * page, &big) == 0);
    double t_runs = now_us() - t0;
    CHECK(cuMemsetD8((CUdeviceptr)big, 0x44, N / 2 * page));
    CHECK(cuCtxSynchronize());
    s = drk_heap_get_stats(h);
    EXPECT(s.moves - before.moves == N / 2 && s.move_calls - before.move_calls < N / 4 &&
           s.creates == before.creates);
    for (int p = 0; p < N / 2; p++) {
        CHECK(cuMemcpyDtoH(host, (CUdeviceptr)(big + (size_t)p * page), page));
        EXPECT(host[0] == 0x44 && host[page / 2] == 0x44 && host[page - 1] == 0x44);
    }
    CHECK(cuMemcpyDtoH(host, (CUdeviceptr)pin, page));
    EXPECT(host[0] == 0x22 && host[page - 1] == 0x22);
    EXPECT(drk_heap_check(h, err, sizeof err) == 0);
    EXPECT(drk_heap_free(h, big) == 0 && drk_heap_free(h, pin) == 0 && drk_heap_free(h, pin2) == 0);
    drk_heap_trim(h, 0);
    EXPECT(drk_heap_get_stats(h).pages == 0 && drk_heap_check(h, err, sizeof err) == 0);
    drk_heap_delete(h);
    pb->destroy(pb);
    free(host);
    printf("ok page %zu KiB; %d one-page blocks in %.0f us (create+map+access %.1f us a page); "
           "a %d-page block stitched from moved pages in %.0f us (%.1f us a page), from moved runs in %.0f us "
           "(%llu handles)\n",
           page >> 10, N, t_fill, t_fill / N, N / 2, t_stitch, t_stitch / (N / 2), t_runs,
           (unsigned long long)(s.move_calls - before.move_calls));
    return 0;
}
