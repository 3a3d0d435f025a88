/* The device page backend (alloc/pages_vmm.c) on the stand-in driver's
 * virtual memory management, with the heap on top: the same driver calls a
 * GPU gets, on host memory a test can read. Run handles (pages_runs.h) and
 * the driver calls they cost, and the stand-in's own handling of handles
 * of several pages. */
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc/heap.h"
#include "alloc/pages_vmm.h"
#include "alloc/pool_events.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/gpu/programs/linked_driver.h"
#include "tests/unit/check.h"
#include "tests/unit/pages_runs.h"

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

/* The stand-in driver as the real one: an allocation of several
 * granules maps whole only, and an unmap must cover whole mappings (one or
 * several end to end), never part of one. */
static void test_fake_multi_page(void)
{
    const size_t g = 2 * MIB;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc rw = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle h3, h1, bad;
    CUdeviceptr va;
    size_t free0, free1, total;
    CHECK(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    CHECK(cuMemCreate(&h3, 3 * g, &prop, 0) == CUDA_SUCCESS && cuMemCreate(&h1, g, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemCreate(&bad, g + 4096, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free0 - free1 == 4 * g);
    CHECK(cuMemAddressReserve(&va, 8 * g, g, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, g, 0, h3, 0) == CUDA_ERROR_INVALID_VALUE); /* part of it */
    CHECK(cuMemMap(va, 3 * g, 0, h3, 0) == CUDA_SUCCESS && cuMemMap(va + 3 * g, g, 0, h1, 0) == CUDA_SUCCESS);
    CHECK(cuMemSetAccess(va, 4 * g, &rw, 1) == CUDA_SUCCESS);
    memset((void *)(uintptr_t)va, 0x3c, 4 * g);
    CHECK(cuMemUnmap(va, g) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va + g, 2 * g) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va + 2 * g, 2 * g) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va, 2 * g) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va, 5 * g) == CUDA_ERROR_INVALID_VALUE);
    CHECK(((unsigned char *)(uintptr_t)va)[3 * g + 5] == 0x3c); /* still mapped */
    CHECK(cuMemUnmap(va, 4 * g) == CUDA_SUCCESS);
    CHECK(cuMemMap(va + g, 3 * g, 0, h3, 0) == CUDA_SUCCESS && cuMemUnmap(va + g, 3 * g) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h3) == CUDA_SUCCESS && cuMemRelease(h1) == CUDA_SUCCESS);
    CHECK(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free1 == free0);
    CHECK(cuMemAddressFree(va, 8 * g) == CUDA_SUCCESS);
}

static void test_runs(void)
{
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, 0, 8);
    CHECK(pb != NULL);
    if (!pb)
        return;
    check_runs(pb, 1);
    pb->destroy(pb);
}

/* What run handles cost in driver calls: one cuMemCreate of the run's
 * size, one cuMemMap per handle and one cuMemSetAccess per run, one
 * cuMemUnmap per run, or per mapping once the driver refused a run. A
 * refused access grant unmaps what the call mapped; destroy unmaps each
 * mapping whole and releases each handle. */
static unsigned long long calls(const char *name) { return fakecuda_calls(name); }

static void test_run_calls(void)
{
    drk_page_backend *pb = drk_pages_vmm(&linked_driver, 0, 8);
    CHECK(pb != NULL);
    if (!pb)
        return;
    const size_t ps = pb->page_size;
    size_t free0, free1, total;
    drk_page_handle r, s, c;
    uintptr_t va;
    CHECK(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    unsigned long long n = calls("cuMemCreate");
    CHECK(pb->create_run(pb, 3, &r) == 0 && calls("cuMemCreate") == n + 1);
    CHECK(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free0 - free1 == 3 * ps);
    CHECK(pb->create(pb, &s) == 0 && pb->create_run(pb, 2, &c) == 0 && pb->pages_created(pb) == 6);
    int fd = -1;
    struct stat st;
    CHECK(drk_pages_vmm_export(pb, r, &fd) == 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == 3 * ps);
    if (fd >= 0)
        close(fd);
    CHECK(pb->reserve(pb, 8 * ps, &va) == 0);

    unsigned long long maps = calls("cuMemMap"), access = calls("cuMemSetAccess"), unmaps = calls("cuMemUnmap");
    CHECK(pb->map(pb, va, (drk_page_handle[]){r, s, c}, 3) == 0);
    CHECK(calls("cuMemMap") == maps + 3 && calls("cuMemSetAccess") == access + 1);
    memset((void *)va, 0x11, 6 * ps); /* access covers all of it */
    CHECK(pb->unmap(pb, va, 6) == 0 && calls("cuMemUnmap") == unmaps + 1 && pb->pages_mapped(pb) == 0);

    /* Refused once: mapping by mapping (three calls, not six), from then on. */
    CHECK(pb->map(pb, va, (drk_page_handle[]){r, s, c}, 3) == 0);
    fakecuda_inject_error("cuMemUnmap", CUDA_ERROR_INVALID_VALUE, 1);
    unmaps = calls("cuMemUnmap");
    CHECK(pb->unmap(pb, va, 6) == 0 && calls("cuMemUnmap") == unmaps + 1 + 3 && pb->pages_mapped(pb) == 0);
    CHECK(pb->map(pb, va + ps, (drk_page_handle[]){c, r}, 2) == 0); /* the driver holds nothing there */
    unmaps = calls("cuMemUnmap");
    CHECK(pb->unmap(pb, va + ps, 5) == 0 && calls("cuMemUnmap") == unmaps + 2);
    CHECK(pb->map(pb, va, &r, 1) == 0);
    unmaps = calls("cuMemUnmap");
    CHECK(pb->unmap(pb, va, 3) == 0 && calls("cuMemUnmap") == unmaps + 1); /* one mapping: one call */

    /* Access refused: each handle the call mapped is unmapped again. */
    fakecuda_inject_error("cuMemSetAccess", CUDA_ERROR_INVALID_VALUE, 1);
    unmaps = calls("cuMemUnmap");
    CHECK(pb->map(pb, va, (drk_page_handle[]){s, c, r}, 3) == DRK_PAGES_FAILED && pb->pages_mapped(pb) == 0);
    CHECK(calls("cuMemUnmap") == unmaps + 3);
    CHECK(pb->map(pb, va, (drk_page_handle[]){s, c, r}, 3) == 0);

    /* Left mapped, r at two addresses: destroy unmaps each mapping (the
     * driver would refuse a page of one) and frees the range. */
    CHECK(pb->map(pb, va + 6 * ps, (drk_page_handle[]){r}, 1) == DRK_PAGES_INVALID); /* past the end */
    CHECK(pb->map(pb, va + 6 * ps, &s, 1) == 0 && pb->pages_mapped(pb) == 7);
    pb->destroy(pb);
    CUdeviceptr base;
    size_t size;
    for (size_t i = 0; i < 7; i++)
        CHECK(cuMemGetAddressRange(&base, &size, (CUdeviceptr)(va + i * ps)) != CUDA_SUCCESS);
    CHECK(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free1 == free0);
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
    test_fake_multi_page();
    test_runs();
    test_run_calls();
    test_heap_on_vmm();
    test_pool_events();
    return CHECK_DONE();
}
