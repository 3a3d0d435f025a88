/* The device page backend: CUDA virtual memory management through the
 * driver table. A handle is one cuMemCreate of one page, the allocation
 * granularity (2 MiB on an H200), or of a run of them, pinned on one
 * device: the driver charges per handle whatever its size. A run of handles
 * is mapped one cuMemMap per handle (a handle maps whole) and made
 * accessible with a single cuMemSetAccess, whose cost does not grow with
 * the run; it is unmapped in one cuMemUnmap where the driver takes that,
 * else one per mapping (never a page at a time: a run handle's mapping can
 * only go whole). Calls are checked against the same bookkeeping as the CPU
 * backends before the driver sees them, so a pool bug is an error here, not
 * a corrupted address space. */
#include <pthread.h>
#include <stdlib.h>

#include "alloc/pages.h"
#include "alloc/pages_book.h"
#include "alloc/pages_vmm.h"

typedef struct vmm {
    drk_page_backend base; /* first: the backend pointer is the struct's */
    pthread_mutex_t lock;
    drk_pages_book book;
    const drk_driver *drv;
    CUmemAllocationProp prop;
    CUmemAccessDesc access[8];
    size_t naccess;
    int exportable; /* pages are created with a POSIX file descriptor handle type */
    int no_run_unmap; /* the driver refused to unmap several mappings in one call */
    CUmemGenericAllocationHandle *handles; /* by book slot: a handle's head */
    size_t handles_cap;
} vmm;

static vmm *of(drk_page_backend *b) { return (vmm *)b; }

static int rc_of(CUresult r)
{
    return r == CUDA_SUCCESS ? DRK_PAGES_OK : r == CUDA_ERROR_OUT_OF_MEMORY ? DRK_PAGES_OOM : DRK_PAGES_FAILED;
}

static int v_reserve(drk_page_backend *b, size_t size, uintptr_t *va)
{
    vmm *v = of(b);
    if (!va || drk_book_reserve_check(&v->book, size) != DRK_PAGES_OK)
        return DRK_PAGES_INVALID;
    pthread_mutex_lock(&v->lock);
    CUdeviceptr at = 0;
    int rc = rc_of(v->drv->mem_address_reserve(&at, size, b->page_size, 0, 0));
    if (rc == DRK_PAGES_OK) {
        rc = drk_book_reserve_add(&v->book, (uintptr_t)at, size);
        if (rc == DRK_PAGES_OK)
            *va = (uintptr_t)at;
        else
            v->drv->mem_address_free(at, size);
    }
    pthread_mutex_unlock(&v->lock);
    return rc;
}

static int v_unreserve(drk_page_backend *b, uintptr_t va, size_t size)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    size_t at;
    int rc = drk_book_unreserve_check(&v->book, va, size, &at);
    if (rc == DRK_PAGES_OK)
        rc = rc_of(v->drv->mem_address_free((CUdeviceptr)va, size));
    if (rc == DRK_PAGES_OK)
        drk_book_unreserve_commit(&v->book, at);
    pthread_mutex_unlock(&v->lock);
    return rc;
}

/* Room for the driver handle of book slot `slot`. */
static int handles_room(vmm *v, uint32_t slot)
{
    if (slot < v->handles_cap)
        return DRK_PAGES_OK;
    size_t cap = v->handles_cap ? v->handles_cap * 2 : 256;
    while (cap <= slot)
        cap *= 2;
    CUmemGenericAllocationHandle *h = realloc(v->handles, cap * sizeof *h);
    if (!h)
        return DRK_PAGES_FAILED;
    v->handles = h, v->handles_cap = cap;
    return DRK_PAGES_OK;
}

/* Handles are made exportable for IPC; a driver or system that refuses
 * that gets plain ones from then on. */
static int create_handle(vmm *v, size_t n, CUmemGenericAllocationHandle *h)
{
    size_t size = n * v->base.page_size;
    CUresult r = v->drv->mem_create(h, size, &v->prop, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY && v->exportable) {
        v->exportable = 0;
        v->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        r = v->drv->mem_create(h, size, &v->prop, 0);
    }
    return rc_of(r);
}

static int v_create_run(drk_page_backend *b, size_t n, drk_page_handle *handle)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    int rc = drk_book_create_run(&v->book, n, handle); /* n is at most capacity: n * page_size fits */
    if (rc == DRK_PAGES_OK) {
        uint32_t slot = drk_book_slot_of(*handle);
        rc = handles_room(v, slot);
        if (rc == DRK_PAGES_OK)
            rc = create_handle(v, n, &v->handles[slot]);
        if (rc != DRK_PAGES_OK)
            drk_book_release(&v->book, *handle);
    }
    pthread_mutex_unlock(&v->lock);
    return rc;
}

static int v_create(drk_page_backend *b, drk_page_handle *page) { return v_create_run(b, 1, page); }

static int v_release(drk_page_backend *b, drk_page_handle handle)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    int rc = drk_book_release(&v->book, handle);
    if (rc == DRK_PAGES_OK)
        rc = rc_of(v->drv->mem_release(v->handles[drk_book_slot_of(handle)]));
    pthread_mutex_unlock(&v->lock);
    return rc;
}

/* Unmaps the first `done` of the handles mapped from va. */
static void unmap_handles(vmm *v, uintptr_t va, const drk_page_handle *handles, size_t done)
{
    size_t ps = v->base.page_size;
    for (size_t i = 0; i < done; i++) {
        size_t len = drk_book_pages_of(&v->book, handles[i]) * ps;
        v->drv->mem_unmap((CUdeviceptr)va, len);
        va += len;
    }
}

/* Maps the checked run one handle at a time, each whole, then grants access
 * to all `pages` of it at once; on a failure unmaps what this call mapped. */
static int map_run(vmm *v, uintptr_t va, const drk_page_handle *handles, size_t n, size_t pages)
{
    size_t ps = v->base.page_size, done = 0;
    uintptr_t at = va;
    CUresult r = CUDA_SUCCESS;
    for (; done < n && r == CUDA_SUCCESS; done++) {
        size_t len = drk_book_pages_of(&v->book, handles[done]) * ps;
        r = v->drv->mem_map((CUdeviceptr)at, len, 0, v->handles[drk_book_slot_of(handles[done])], 0);
        at += len;
    }
    if (r == CUDA_SUCCESS)
        r = v->drv->mem_set_access((CUdeviceptr)va, pages * ps, v->access, v->naccess);
    else
        done--; /* the failed one is not mapped */
    if (r != CUDA_SUCCESS)
        unmap_handles(v, va, handles, done);
    return rc_of(r);
}

static int v_map(drk_page_backend *b, uintptr_t va, const drk_page_handle *handles, size_t n)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    size_t at, pages;
    int rc = drk_book_map_check(&v->book, va, handles, n, &at, &pages);
    if (rc == DRK_PAGES_OK)
        rc = map_run(v, va, handles, n, pages);
    if (rc == DRK_PAGES_OK)
        drk_book_map_commit(&v->book, va, handles, n, at);
    pthread_mutex_unlock(&v->lock);
    return rc;
}

/* Unmaps the checked run mapping by mapping; *done: the pages unmapped. */
static int unmap_each(vmm *v, uintptr_t va, size_t n, size_t *done)
{
    size_t ps = v->base.page_size;
    int rc = DRK_PAGES_OK;
    for (*done = 0; rc == DRK_PAGES_OK && *done < n;) {
        uintptr_t start;
        size_t pages;
        drk_book_mapping(&v->book, va + *done * ps, &start, &pages); /* checked: starts here */
        rc = rc_of(v->drv->mem_unmap((CUdeviceptr)start, pages * ps));
        if (rc == DRK_PAGES_OK)
            *done += pages;
    }
    return rc;
}

/* Unmaps the checked run: one call for one mapping, or for several (as
 * PyTorch's expandable segments unmap several handles at once); should the
 * driver refuse several, mapping by mapping from then on. *done: the pages
 * unmapped, whole mappings from va. */
static int unmap_run(vmm *v, uintptr_t va, size_t n, size_t *done)
{
    uintptr_t start;
    size_t first;
    drk_book_mapping(&v->book, va, &start, &first);
    *done = 0;
    if (first == n || !v->no_run_unmap) {
        CUresult r = v->drv->mem_unmap((CUdeviceptr)va, n * v->base.page_size);
        if (r == CUDA_SUCCESS)
            *done = n;
        if (r == CUDA_SUCCESS || first == n)
            return rc_of(r);
        v->no_run_unmap = 1;
    }
    return unmap_each(v, va, n, done);
}

static int v_unmap(drk_page_backend *b, uintptr_t va, size_t n)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    size_t at, done = 0;
    int rc = drk_book_unmap_check(&v->book, va, n, &at);
    if (rc == DRK_PAGES_OK)
        rc = unmap_run(v, va, n, &done);
    /* What the driver did unmap, should it fail part way, leaves the book
     * too. */
    if (done)
        drk_book_unmap_commit(&v->book, va, done, at);
    pthread_mutex_unlock(&v->lock);
    return rc;
}

static size_t v_pages_created(drk_page_backend *b)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    size_t n = v->book.live;
    pthread_mutex_unlock(&v->lock);
    return n;
}

static size_t v_pages_mapped(drk_page_backend *b)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    size_t n = v->book.mapped;
    pthread_mutex_unlock(&v->lock);
    return n;
}

static void v_destroy(drk_page_backend *b)
{
    if (!b)
        return;
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    /* Unmap every mapping (each once, whole), release every live handle,
     * free every range: what the book knows is exactly what the driver
     * holds. */
    for (size_t i = 0; i < v->book.table_cap; i++) {
        drk_book_entry *e = &v->book.table[i];
        if (e->key && e->off == 0)
            v->drv->mem_unmap((CUdeviceptr)((e->key - 1) * b->page_size),
                              v->book.slots[e->slot].npages * b->page_size);
    }
    for (uint32_t s = 0; s < v->book.nslots; s++)
        if ((v->book.slots[s].gen & 1) && v->book.slots[s].npages) /* a live handle's head */
            v->drv->mem_release(v->handles[s]);
    for (size_t i = 0; i < v->book.nranges; i++)
        v->drv->mem_address_free((CUdeviceptr)v->book.ranges[i].start, v->book.ranges[i].size);
    pthread_mutex_unlock(&v->lock);
    drk_book_fini(&v->book);
    pthread_mutex_destroy(&v->lock);
    free(v->handles);
    free(v);
}

drk_page_backend *drk_pages_vmm(const drk_driver *drv, CUdevice dev, size_t max_pages)
{
    if (!drv || !drv->mem_address_reserve || !drv->mem_address_free || !drv->mem_create || !drv->mem_release ||
        !drv->mem_map || !drv->mem_unmap || !drv->mem_set_access || !drv->mem_get_allocation_granularity ||
        !drv->device_total_mem)
        return NULL;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    size_t gran = 0, total = 0;
    if (drv->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
        !gran || drv->device_total_mem(&total, dev) != CUDA_SUCCESS)
        return NULL;
    size_t pages = total / gran;
    if (max_pages && max_pages < pages)
        pages = max_pages;
    vmm *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    if (drk_book_init(&v->book, gran, pages) != DRK_PAGES_OK) {
        free(v);
        return NULL;
    }
    pthread_mutex_init(&v->lock, NULL);
    v->drv = drv;
    v->prop = prop;
    v->access[0] = (CUmemAccessDesc){.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    v->naccess = 1;
    if (drv->mem_export_to_shareable_handle) {
        v->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        v->exportable = 1;
    }
    /* GPUDirect RDMA (NCCL, network cards) reaches VMM memory only if asked for. */
    int rdma = 0;
    if (drv->device_get_attribute &&
        drv->device_get_attribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev) ==
            CUDA_SUCCESS &&
        rdma)
        v->prop.allocFlags.gpuDirectRDMACapable = 1;
    v->base = (drk_page_backend){
        .name = "vmm",
        .page_size = gran,
        .capacity = pages,
        .reserve = v_reserve,
        .unreserve = v_unreserve,
        .create = v_create,
        .create_run = v_create_run,
        .release = v_release,
        .map = v_map,
        .unmap = v_unmap,
        .pages_created = v_pages_created,
        .pages_mapped = v_pages_mapped,
        .destroy = v_destroy,
    };
    return &v->base;
}

int drk_pages_vmm_add_access(drk_page_backend *b, CUdevice dev, uintptr_t va, size_t bytes)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    size_t i = 0;
    while (i < v->naccess && v->access[i].location.id != dev)
        i++;
    int rc = DRK_PAGES_OK;
    if (i == v->naccess) {
        if (v->naccess == sizeof v->access / sizeof v->access[0])
            rc = DRK_PAGES_INVALID;
        else
            v->access[v->naccess++] = (CUmemAccessDesc){
                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    }
    if (rc == DRK_PAGES_OK && bytes)
        rc = rc_of(v->drv->mem_set_access((CUdeviceptr)va, bytes, &v->access[i], 1));
    pthread_mutex_unlock(&v->lock);
    return rc;
}

int drk_pages_vmm_export(drk_page_backend *b, drk_page_handle page, int *fd)
{
    vmm *v = of(b);
    pthread_mutex_lock(&v->lock);
    int rc = DRK_PAGES_INVALID;
    if (v->exportable && drk_book_slot_of(page) < v->handles_cap) {
        CUresult r = v->drv->mem_export_to_shareable_handle(fd, v->handles[drk_book_slot_of(page)],
                                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        rc = r == CUDA_SUCCESS ? DRK_PAGES_OK : DRK_PAGES_FAILED;
    }
    pthread_mutex_unlock(&v->lock);
    return rc;
}
