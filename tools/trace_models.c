/* The bounds: `ideal` (each allocation exactly its size) and `driver`
 * (cuMemAlloc, whole pages per allocation); and the list of models. */
#include "tools/trace_models.h"

#include <stdlib.h>

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* ideal and driver both only count: reserved bytes and the capacity. */
typedef struct counter {
    uint64_t reserved, capacity;
} counter;

static trace_model *counter_create(const trace_model_config *cfg)
{
    counter *c = calloc(1, sizeof *c);
    if (c)
        c->capacity = cfg->capacity;
    return (trace_model *)c;
}

static int counter_add(counter *c, uint64_t bytes)
{
    if (c->capacity && bytes > c->capacity - c->reserved)
        return MODEL_OOM;
    c->reserved += bytes;
    return MODEL_OK;
}

static uint64_t counter_reserved(const trace_model *m) { return ((const counter *)m)->reserved; }

/* Neither has free space another allocation could use. */
static void counter_free_space(const trace_model *m, uint64_t *total, uint64_t *largest)
{
    (void)m;
    *total = *largest = 0;
}

static void counter_destroy(trace_model *m) { free(m); }

static int ideal_alloc(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)slot, (void)stream;
    return counter_add((counter *)m, size);
}

static void ideal_free(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)slot, (void)stream;
    ((counter *)m)->reserved -= size;
}

const trace_model_ops trace_model_ideal = {
    .name = "ideal",
    .what = "reserved = live bytes: the lower bound",
    .create = counter_create,
    .alloc = ideal_alloc,
    .free = ideal_free,
    .reserved = counter_reserved,
    .free_space = counter_free_space,
    .destroy = counter_destroy,
};

static int driver_alloc(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)slot, (void)stream;
    return counter_add((counter *)m, round_up(size, DRIVER_GRANULARITY));
}

static void driver_free(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)slot, (void)stream;
    ((counter *)m)->reserved -= round_up(size, DRIVER_GRANULARITY);
}

const trace_model_ops trace_model_driver = {
    .name = "driver",
    .what = "cuMemAlloc: each allocation its own 2 MiB pages, returned at its free",
    .create = counter_create,
    .alloc = driver_alloc,
    .free = driver_free,
    .reserved = counter_reserved,
    .free_space = counter_free_space,
    .destroy = counter_destroy,
};

const trace_model_ops *const trace_models[] = {
    &trace_model_ideal,
    &trace_model_driver,
    &trace_model_first_fit,
    &trace_model_best_fit_stream,
    &trace_model_drk_heap,
    &trace_model_drk_heap_pages,
    &trace_model_drk_heap_grow,
    &trace_model_drk_pool,
};
const size_t trace_nmodels = sizeof trace_models / sizeof *trace_models;
_Static_assert(sizeof trace_models / sizeof *trace_models <= TRACE_MAX_MODELS, "replay keeps TRACE_MAX_MODELS runs");
