/* The `drk-heap` model: drk's device heap (alloc/heap.c) on the counting
 * page backend, which maps nothing, so traces of any size replay here.
 * Reserved is the pages the heap holds; its free space is its idle pages,
 * and the largest usable run is the pages of its idle runs, which it can
 * map into any range.
 *
 * `drk-heap-pages` is the heap with one handle a page (runs off), as it
 * was before runs: what runs cost in memory and save in driver calls.
 *
 * `drk-heap-grow` is the same heap with the library's page grower
 * (alloc/device.c, DRK_ALLOC_GROW) played on the trace's clock: woken by an
 * allocation that grew the heap, it follows the growth policy (growth.h)
 * and makes up to CLAIM pages at a time, each taking what making a page
 * took on an H200; an allocation over pages it is still making waits for
 * them. Each counts what the program's allocation calls would have spent in
 * the driver at the H200's costs (docs/memory.md): those costs are per
 * handle, whatever its size. */
#include <stdlib.h>

#include "alloc/growth.h"
#include "alloc/heap.h"
#include "tools/trace_models.h"

/* The H200's costs per handle, in ns: create + map + set access, and a
 * move (unmap + map + set access). The grower claims this many at most. */
#define MAKE_NS 52500u
#define MOVE_NS 65500u
#define CLAIM 8u

typedef struct heap_model {
    drk_page_backend *pages;
    drk_heap *heap;
    uintptr_t *ptr; /* by slot */
    size_t nptr;
    uint64_t page;
    size_t keep; /* idle pages kept in place: the reserve */
    int grow;
    /* The grower, on the trace's clock. */
    uint64_t now, busy_until, asked_at, seen_grown, wait_ns, waits;
    uintptr_t claim_va;
    size_t claimed;
    int asked;
    drk_growth growth;
} heap_model;

int trace_heap_open(const trace_model_config *cfg, drk_page_backend **pages, drk_heap **heap)
{
    uint64_t page = cfg->page_size;
    uint64_t cap = cfg->capacity ? cfg->capacity / page : (1u << 31) - 1;
    *pages = drk_pages_counting(page, cap < (1u << 31) ? cap : (1u << 31) - 1);
    /* Virtual space in chunks of 64 GiB: plenty, and reserved at no cost. */
    *heap = *pages ? drk_heap_new(*pages, (size_t)((64ull << 30) / page * page)) : NULL;
    if (!*heap) {
        if (*pages)
            (*pages)->destroy(*pages);
        *pages = NULL;
        return -1;
    }
    drk_heap_set_policy(*heap, DRK_HEAP_IDLE_PERMILLE, (size_t)(cfg->reserve / page), 1);
    return 0;
}

static trace_model *create(const trace_model_config *cfg, int grow, size_t run_max)
{
    heap_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->page = cfg->page_size;
    m->grow = grow;
    m->keep = (size_t)(cfg->reserve / m->page);
    if (trace_heap_open(cfg, &m->pages, &m->heap) != 0) {
        free(m);
        return NULL;
    }
    drk_heap_set_run_max(m->heap, run_max);
    return (trace_model *)m;
}

static trace_model *heap_create(const trace_model_config *cfg) { return create(cfg, 0, DRK_HEAP_RUN_MAX); }
static trace_model *pages_create(const trace_model_config *cfg) { return create(cfg, 0, 1); }
static trace_model *grow_create(const trace_model_config *cfg) { return create(cfg, 1, DRK_HEAP_RUN_MAX); }

/* The claim under way ends, its pages made (the counting backend maps
 * nothing, so at once here: its time was busy_until). */
static void claim_end(heap_model *m)
{
    drk_page_handle pages[CLAIM];
    size_t n = 0;
    while (n < m->claimed && m->pages->create(m->pages, &pages[n]) == 0)
        n++;
    if (n && m->pages->map(m->pages, m->claim_va, pages, n) != 0) {
        for (size_t i = 0; i < n; i++)
            m->pages->release(m->pages, pages[i]);
        n = 0;
    }
    drk_heap_claim_done(m->heap, pages, n);
    m->claimed = 0;
}

/* What the library's grow_shard does at time `at`: observe the growth, and
 * claim toward the high watermark while fewer than the low one are ready.
 * 1 if it claimed. */
static int claim_next(heap_model *m, uint64_t at)
{
    size_t n = drk_growth_claim(&m->growth, m->heap, at, m->keep, CLAIM, &m->claim_va);
    if (!n)
        return 0;
    m->claimed = n;
    m->busy_until = at + n * (uint64_t)MAKE_NS;
    return 1;
}

/* The grower up to time t: claims whose time came end; asked, it goes on
 * claiming until it has nothing more to do. */
static void advance(heap_model *m, uint64_t t)
{
    for (;;) {
        if (m->claimed) {
            if (m->busy_until > t)
                return;
            claim_end(m);
        }
        if (!m->asked)
            return;
        uint64_t at = m->busy_until > m->asked_at ? m->busy_until : m->asked_at;
        if (at > t)
            return;
        if (!claim_next(m, at))
            m->asked = 0;
    }
}

static void heap_clock(trace_model *tm, uint64_t t_ns)
{
    heap_model *m = (heap_model *)tm;
    m->now = t_ns;
    if (m->grow)
        advance(m, t_ns);
}

int trace_slots_fit(uintptr_t **ptr, size_t *n, size_t slot)
{
    if (slot < *n)
        return 0;
    size_t want = *n ? *n : 1024;
    while (want <= slot)
        want *= 2;
    uintptr_t *p = realloc(*ptr, want * sizeof *p);
    if (!p)
        return -1;
    *ptr = p, *n = want;
    return 0;
}

static int heap_alloc(trace_model *tm, size_t slot, uint64_t size, uint32_t stream)
{
    heap_model *m = (heap_model *)tm;
    (void)stream;
    if (trace_slots_fit(&m->ptr, &m->nptr, slot) != 0)
        return MODEL_NOMEM;
    int r;
    while ((r = drk_heap_alloc(m->heap, size, &m->ptr[slot])) == DRK_PAGES_BUSY) {
        /* The pages it needs are being made: it waits for them. */
        m->waits++;
        m->wait_ns += m->busy_until > m->now ? m->busy_until - m->now : 0;
        claim_end(m);
    }
    if (m->grow && r == 0) {
        uint64_t g = drk_heap_grown(m->heap);
        if (g != m->seen_grown && !m->asked)
            m->asked = 1, m->asked_at = m->now;
        m->seen_grown = g;
    }
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

void trace_heap_free_space(const drk_heap *h, uint64_t page, uint64_t *total, uint64_t *largest)
{
    drk_heap_stats st = drk_heap_get_stats(h);
    *total = st.idle_pages * page;
    *largest = st.idle_run_pages * page; /* runs with live data over a page are reused only in place */
}

static void heap_free_space(const trace_model *tm, uint64_t *total, uint64_t *largest)
{
    const heap_model *m = (const heap_model *)tm;
    trace_heap_free_space(m->heap, m->page, total, largest);
}

void trace_heap_calls(const drk_heap *h, uint64_t waits, uint64_t wait_ns, trace_model_calls *out)
{
    drk_heap_stats st = drk_heap_get_stats(h);
    *out = (trace_model_calls){
        .pages_created = st.creates,
        .pages_moved = st.moves,
        .handles_created = st.create_calls,
        .handles_moved = st.move_calls,
        .unmap_calls = st.unmap_calls,
        .pages_made_ahead = st.ahead_made,
        .pages_taken_ahead = st.ahead_used,
        .waits = waits,
        .driver_ns = st.create_calls * (uint64_t)MAKE_NS + st.move_calls * (uint64_t)MOVE_NS + wait_ns,
    };
}

static void heap_calls(const trace_model *tm, trace_model_calls *out)
{
    const heap_model *m = (const heap_model *)tm;
    trace_heap_calls(m->heap, m->waits, m->wait_ns, out);
}

static void heap_destroy(trace_model *tm)
{
    heap_model *m = (heap_model *)tm;
    drk_heap_delete(m->heap);
    m->pages->destroy(m->pages);
    free(m->ptr);
    free(m);
}

/* The three models differ only in how the heap is made. */
#define HEAP_MODEL(NAME, WHAT, CREATE)                                                                               \
    {                                                                                                                \
        .name = NAME, .what = WHAT, .create = CREATE, .alloc = heap_alloc, .free = heap_free,                       \
        .reserved = heap_reserved, .free_space = heap_free_space, .clock = heap_clock, .calls = heap_calls,         \
        .destroy = heap_destroy,                                                                                     \
    }

const trace_model_ops trace_model_drk_heap =
    HEAP_MODEL("drk-heap",
               "drk's device heap: 512-byte blocks in a large virtual space, pages only under live blocks, made and "
               "moved in runs (one driver handle of several pages), idle runs moved where a request needs them "
               "(stitching)",
               heap_create);

const trace_model_ops trace_model_drk_heap_pages =
    HEAP_MODEL("drk-heap-pages",
               "drk-heap with one driver handle a page (no runs): every page created, moved and given back by "
               "itself",
               pages_create);

const trace_model_ops trace_model_drk_heap_grow =
    HEAP_MODEL("drk-heap-grow",
               "drk-heap with the library's page grower on the trace's clock (DRK_ALLOC_GROW): pages made ahead "
               "of growth within the reserve, at an H200's cost a page",
               grow_create);
