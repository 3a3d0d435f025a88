/* The `drk-pool` model: drk's stream-ordered pool (alloc/pool.c) over
 * drk-heap, as the library runs a shard: frees batched and given back to
 * the heap once their events complete. A replay has no GPU work, so every
 * event has completed when it is looked at: a freed block comes back when
 * its batch is sealed and the pool next looks (as in the library when the
 * GPU keeps up). Against drk-heap, whose frees are immediate: what stream
 * order costs in memory. */
#include <stdlib.h>

#include "alloc/pool.h"
#include "alloc/trace.h"
#include "tools/trace_models.h"

typedef struct pool_model {
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *pool;
    uintptr_t *ptr; /* by slot */
    size_t nptr;
    uint64_t page;
} pool_model;

static int ev_record(void *ctx, uintptr_t stream, uint64_t *event)
{
    (void)ctx, (void)stream;
    *event = 0;
    return 0;
}
static int ev_query(void *ctx, uint64_t event) { return (void)ctx, (void)event, 1; }
static int ev_wait(void *ctx, uint64_t event) { return (void)ctx, (void)event, 0; }
static void ev_release(void *ctx, uint64_t event) { (void)ctx, (void)event; }

static const drk_pool_events done_events = {NULL, ev_record, ev_query, ev_wait, ev_release};

static trace_model *pool_create(const trace_model_config *cfg)
{
    pool_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->page = cfg->page_size;
    if (trace_heap_open(cfg, &m->pages, &m->heap) == 0 && (m->pool = drk_pool_new(m->heap, &done_events)) != NULL)
        return (trace_model *)m;
    if (m->heap)
        drk_heap_delete(m->heap);
    if (m->pages)
        m->pages->destroy(m->pages);
    free(m);
    return NULL;
}

/* Trace streams are numbered from 0; the pool's 0 and 1 are no stream and
 * the legacy stream. */
static uintptr_t pool_stream(uint32_t stream) { return stream == DRK_TRACE_NO_STREAM ? 0 : (uintptr_t)stream + 2; }

static int pool_alloc(trace_model *tm, size_t slot, uint64_t size, uint32_t stream)
{
    pool_model *m = (pool_model *)tm;
    if (trace_slots_fit(&m->ptr, &m->nptr, slot) != 0)
        return MODEL_NOMEM;
    uintptr_t s = pool_stream(stream);
    int r = drk_pool_alloc(m->pool, size, s, s != 0, &m->ptr[slot]);
    return r == 0 ? MODEL_OK : r == DRK_PAGES_OOM ? MODEL_OOM : MODEL_NOMEM;
}

static void pool_free(trace_model *tm, size_t slot, uint64_t size, uint32_t stream)
{
    pool_model *m = (pool_model *)tm;
    uintptr_t s = pool_stream(stream);
    (void)size;
    drk_pool_free(m->pool, m->ptr[slot], s, s != 0);
}

static uint64_t pool_reserved(const trace_model *tm)
{
    const pool_model *m = (const pool_model *)tm;
    return drk_heap_get_stats(m->heap).pages * m->page;
}

static void pool_free_space(const trace_model *tm, uint64_t *total, uint64_t *largest)
{
    trace_heap_free_space(((const pool_model *)tm)->heap, ((const pool_model *)tm)->page, total, largest);
}

static void pool_calls(const trace_model *tm, trace_model_calls *out)
{
    trace_heap_calls(((const pool_model *)tm)->heap, 0, 0, out);
}

static void pool_destroy(trace_model *tm)
{
    pool_model *m = (pool_model *)tm;
    drk_pool_delete(m->pool);
    drk_heap_delete(m->heap);
    m->pages->destroy(m->pages);
    free(m->ptr);
    free(m);
}

const trace_model_ops trace_model_drk_pool = {
    .name = "drk-pool",
    .what = "drk's stream-ordered pool over drk-heap, as the library runs it: frees batched and given back once "
            "their events complete (at once on replay)",
    .create = pool_create,
    .alloc = pool_alloc,
    .free = pool_free,
    .reserved = pool_reserved,
    .free_space = pool_free_space,
    .calls = pool_calls,
    .destroy = pool_destroy,
};
