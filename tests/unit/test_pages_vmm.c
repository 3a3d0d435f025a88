/* The device page backend (alloc/pages_vmm.c) on the stand-in driver's
 * virtual memory management, with the heap on top: the same driver calls a
 * GPU gets, on host memory a test can read. */
#include <cuda.h>
#include <stdint.h>
#include <string.h>

#include "alloc/heap.h"
#include "alloc/pages_vmm.h"
#include "alloc/pool_events.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/gpu/programs/linked_driver.h"
#include "tests/unit/check.h"

#define MIB ((size_t)1 << 20)

static void test_backend(void)
{
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, 0, 0);
    CHECK(pb && pb->page_size == 2 * MIB && pb->capacity == 32);
    if (!pb)
        return;
    uintptr_t va;
    drk_page_handle pg[2];
    CHECK(pb->reserve(pb, 8 * pb->page_size, &va) == 0 && va % pb->page_size == 0);
    CHECK(pb->create(pb, &pg[0]) == 0 && pb->create(pb, &pg[1]) == 0);
    CHECK(pb->map(pb, va, pg, 2) == 0);
    memset((void *)va, 0x5a, 2 * pb->page_size);
    /* The same page at a second address shows the same bytes. */
    CHECK(pb->map(pb, va + 4 * pb->page_size, &pg[1], 1) == 0);
    CHECK(((unsigned char *)(va + 4 * pb->page_size))[123] == 0x5a);
    CHECK(pb->map(pb, va, pg, 1) == DRK_PAGES_INVALID);    /* mapped already */
    CHECK(pb->release(pb, pg[1]) == DRK_PAGES_INVALID);    /* still mapped */
    CHECK(pb->unmap(pb, va, 2) == 0 && pb->unmap(pb, va + 4 * pb->page_size, 1) == 0);
    CHECK(pb->release(pb, pg[0]) == 0 && pb->release(pb, pg[1]) == 0);
    CHECK(pb->unreserve(pb, va, 8 * pb->page_size) == 0);
    /* The driver's memory runs out with the backend's capacity. */
    drk_page_handle all[33];
    size_t n = 0;
    while (n < 33 && pb->create(pb, &all[n]) == 0)
        n++;
    CHECK(n == 32 && pb->create(pb, &all[32]) == DRK_PAGES_OOM);
    while (n)
        CHECK(pb->release(pb, all[--n]) == 0);
    pb->destroy(pb);
    pb = drk_pages_vmm(&linked_driver, 0, 5);
    CHECK(pb && pb->capacity == 5);
    if (pb)
        pb->destroy(pb);
}

/* A full device, every other page freed, then a block of half of it: the
 * heap moves idle pages through real cuMemUnmap/cuMemMap calls, and the
 * live blocks keep their bytes. */
static void test_heap_on_vmm(void)
{
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, 0, 0);
    drk_heap *h = pb ? drk_heap_new(pb, 64 * pb->page_size) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    uintptr_t blk[32], big;
    for (int i = 0; i < 32; i++) {
        CHECK(drk_heap_alloc(h, 2 * MIB, &blk[i]) == 0);
        memset((void *)blk[i], i, 2 * MIB);
    }
    CHECK(drk_heap_alloc(h, 1, &big) == DRK_PAGES_OOM);
    size_t free_b = 0, total = 0;
    CHECK(cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS && free_b == 0);
    for (int i = 0; i < 32; i += 2)
        CHECK(drk_heap_free(h, blk[i]) == 0);
    CHECK(drk_heap_alloc(h, 32 * MIB, &big) == 0);
    memset((void *)big, 0xee, 32 * MIB);
    int intact = 1;
    for (int i = 1; i < 32; i += 2)
        intact &= ((unsigned char *)blk[i])[MIB] == (unsigned char)i;
    CHECK(intact && drk_heap_get_stats(h).moves == 16);
    char err[200];
    CHECK(drk_heap_check(h, err, sizeof err) == 0);
    drk_heap_delete(h);
    CHECK(cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS && free_b == total);
    pb->destroy(pb);
}

/* The pool with the driver's events (here always complete): frees on a
 * stream are batched under recorded events, events are reused, and every
 * event created is destroyed. */
static void test_pool_events(void)
{
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, 0, 0);
    drk_heap *h = pb ? drk_heap_new(pb, 64 * pb->page_size) : NULL;
    drk_cuda_events *ce = drk_cuda_events_new(&linked_driver);
    CHECK(h && ce);
    if (!h || !ce)
        return;
    drk_pool_events table = drk_cuda_events_table(ce);
    drk_pool *p = drk_pool_new(h, &table);
    CUstream s;
    CHECK(p && cuStreamCreate(&s, 0) == CUDA_SUCCESS && drk_pool_stream_created(p, (uintptr_t)s) == 0);
    unsigned long long created0 = fakecuda_calls("cuEventCreate"), recorded0 = fakecuda_calls("cuEventRecord");
    for (int i = 0; i < 300; i++) {
        uintptr_t a;
        CHECK(drk_pool_alloc(p, 4096 + (size_t)i, (uintptr_t)s, 1, &a) == 0);
        CHECK(drk_pool_free(p, a, (uintptr_t)s, 1) == 0);
    }
    drk_pool_stats st = drk_pool_get_stats(p);
    unsigned long long recorded = fakecuda_calls("cuEventRecord") - recorded0;
    unsigned long long created = fakecuda_calls("cuEventCreate") - created0;
    CHECK(st.events == recorded && recorded >= 1 && created <= 2); /* batched, and reused */
    drk_pool_delete(p);
    drk_cuda_events_delete(ce);
    CHECK(fakecuda_calls("cuEventDestroy_v2") >= created);
    CHECK(drk_heap_get_stats(h).live_blocks == 0);
    drk_heap_delete(h);
    pb->destroy(pb);
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
}

int main(void)
{
    fakecuda_set_total_memory(64 * MIB);
    if (cuInit(0) != CUDA_SUCCESS)
        return 1;
    test_backend();
    test_heap_on_vmm();
    test_pool_events();
    return CHECK_DONE();
}
