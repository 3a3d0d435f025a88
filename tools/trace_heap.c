/* The `drk-heap` model: drk's device heap (alloc/heap.c) on the counting
 * page backend, which maps nothing, so traces of any size replay here.
 * Reserved is the pages the heap holds; its free space is its idle pages,
 * which it can map into any range, so the largest usable run is all of it. */
#include <stdlib.h>

#include "alloc/heap.h"
#include "tools/trace_models.h"

typedef struct heap_model {
    drk_page_backend *pages;
    drk_heap *heap;
    uintptr_t *ptr; /* by slot */
    size_t nptr;
    uint64_t page;
} heap_model;

static trace_model *heap_create(const trace_model_config *cfg)
{
    heap_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->page = cfg->page_size;
    uint64_t cap = cfg->capacity ? cfg->capacity / m->page : (1u << 31) - 1;
    m->pages = drk_pages_counting(m->page, cap < (1u << 31) ? cap : (1u << 31) - 1);
    /* Virtual space in chunks of 64 GiB: plenty, and reserved at no cost. */
    m->heap = m->pages ? drk_heap_new(m->pages, (size_t)((64ull << 30) / m->page * m->page)) : NULL;
    if (m->heap)
        drk_heap_set_policy(m->heap, DRK_HEAP_IDLE_PERMILLE, (size_t)(cfg->reserve / m->page), 1);
    if (!m->heap) {
        if (m->pages)
            m->pages->destroy(m->pages);
        free(m);
        return NULL;
    }
    return (trace_model *)m;
}

static int heap_alloc(trace_model *tm, size_t slot, uint64_t size, uint32_t stream)
{
    heap_model *m = (heap_model *)tm;
    (void)stream;
    if (slot >= m->nptr) {
        size_t n = m->nptr ? m->nptr : 1024;
        while (n <= slot)
            n *= 2;
        uintptr_t *p = realloc(m->ptr, n * sizeof *p);
        if (!p)
            return MODEL_NOMEM;
        m->ptr = p, m->nptr = n;
    }
    int r = drk_heap_alloc(m->heap, size, &m->ptr[slot]);
    return r == 0 ? MODEL_OK : r == DRK_PAGES_OOM ? MODEL_OOM : MODEL_NOMEM;
}

static void heap_free(trace_model *tm, size_t slot, uint64_t size, uint32_t stream)
{
    heap_model *m = (heap_model *)tm;
    (void)size, (void)stream;
    drk_heap_free(m->heap, m->ptr[slot]);
}

static uint64_t heap_reserved(const trace_model *tm)
{
    const heap_model *m = (const heap_model *)tm;
    return drk_heap_get_stats(m->heap).pages * m->page;
}

static void heap_free_space(const trace_model *tm, uint64_t *total, uint64_t *largest)
{
    const heap_model *m = (const heap_model *)tm;
    *total = *largest = drk_heap_get_stats(m->heap).idle_pages * m->page;
}

static void heap_destroy(trace_model *tm)
{
    heap_model *m = (heap_model *)tm;
    drk_heap_delete(m->heap);
    m->pages->destroy(m->pages);
    free(m->ptr);
    free(m);
}

const trace_model_ops trace_model_drk_heap = {
    .name = "drk-heap",
    .what = "drk's device heap: 512-byte blocks in a large virtual space, pages only under live blocks, idle "
            "pages moved where a request needs them (stitching)",
    .create = heap_create,
    .alloc = heap_alloc,
    .free = heap_free,
    .reserved = heap_reserved,
    .free_space = heap_free_space,
    .destroy = heap_destroy,
};
