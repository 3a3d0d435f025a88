/* The pool's device pages on a real GPU: the heap (alloc/heap.c) over the
 * VMM backend (alloc/pages_vmm.c), capped at 32 pages so it must move idle
 * pages. 32 one-page blocks are written by the device, every other one is
 * freed, and a 16-page block must then be stitched from the freed pages;
 * the survivors keep their bytes and the new block is writable end to end.
 * Also prints what each VMM step costs here. Prints "ok ..." and exits 0,
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
    drk_heap_delete(h);
    pb->destroy(pb);
    free(host);
    printf("ok page %zu KiB; %d one-page blocks in %.0f us (create+map+access %.1f us a page); "
           "a %d-page block stitched from moved pages in %.0f us (%.1f us a page)\n",
           page >> 10, N, t_fill, t_fill / N, N / 2, t_stitch, t_stitch / (N / 2));
    return 0;
}
