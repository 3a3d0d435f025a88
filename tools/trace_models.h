/* Allocator models that `drk trace replay` drives op by op. A model sees
 * allocations by slot (drk_trace_op.slot: dense, unique while live), so it
 * keeps per-allocation state in arrays; reserved bytes are what the model
 * holds from the device at that moment. The real pool (alloc/pool.h) plugs
 * in as one more model. */
#ifndef DRK_TOOLS_TRACE_MODELS_H
#define DRK_TOOLS_TRACE_MODELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct trace_model trace_model;

typedef struct trace_model_config {
    uint64_t page_size; /* growth step of the pools (first-fit) */
    uint64_t capacity;  /* device bytes a model may reserve; 0: unlimited */
    uint64_t reserve;   /* drk-heap: idle bytes kept in place before pages move (DRK_STREAM_RESERVE) */
} trace_model_config;

enum { MODEL_OK = 0, MODEL_OOM = 1, MODEL_NOMEM = -1 /* the host ran out of memory */ };

/* What a model's allocation calls would have paid the driver (models of
 * drk's heap): pages created and moved inside them and the handles those
 * were, pages made ahead by a grower and taken, waits for pages being made,
 * and their time at an H200's costs. */
typedef struct trace_model_calls {
    uint64_t pages_created, pages_moved, unmap_calls, pages_made_ahead, pages_taken_ahead, waits;
    uint64_t handles_created, handles_moved;
    uint64_t driver_ns;
} trace_model_calls;

typedef struct trace_model_ops {
    const char *name;
    const char *what; /* one line for --help */
    trace_model *(*create)(const trace_model_config *cfg);
    /* stream: DRK_TRACE_NO_STREAM for cuMemAlloc. MODEL_OOM: the model
     * would exceed cfg->capacity; it then holds nothing for the slot. */
    int (*alloc)(trace_model *m, size_t slot, uint64_t size, uint32_t stream);
    /* Frees a slot alloc() accepted; size is the one it was given. */
    void (*free)(trace_model *m, size_t slot, uint64_t size, uint32_t stream);
    uint64_t (*reserved)(const trace_model *m);
    /* Reserved bytes held by no allocation and usable by a later one, and
     * the largest such contiguous run. */
    void (*free_space)(const trace_model *m, uint64_t *total, uint64_t *largest);
    /* Optional: the trace's time before each op (ns since its start), and
     * what the calls cost (NULL: the model does not say). */
    void (*clock)(trace_model *m, uint64_t t_ns);
    void (*calls)(const trace_model *m, trace_model_calls *out);
    void (*destroy)(trace_model *m);
} trace_model_ops;

extern const trace_model_ops trace_model_ideal, trace_model_driver, trace_model_first_fit,
    trace_model_best_fit_stream, trace_model_drk_heap, trace_model_drk_heap_pages,
    trace_model_drk_heap_grow, trace_model_drk_pool;

/* For the models of drk's heap and pool (trace_heap.c): a heap on the
 * counting page backend as cfg says (capacity, reserve), -1 if out of
 * memory; its free space as free_space() gives it; its driver calls at an
 * H200's costs, with `waits` for a grower that took `wait_ns`. */
typedef struct drk_heap drk_heap;
typedef struct drk_page_backend drk_page_backend;
int trace_heap_open(const trace_model_config *cfg, drk_page_backend **pages, drk_heap **heap);
void trace_heap_free_space(const drk_heap *h, uint64_t page, uint64_t *total, uint64_t *largest);
void trace_heap_calls(const drk_heap *h, uint64_t waits, uint64_t wait_ns, trace_model_calls *out);
/* Makes the array of *n addresses by slot hold `slot` (doubling, from
 * 1024); 0, or -1 out of memory (nothing changed). */
int trace_slots_fit(uintptr_t **ptr, size_t *n, size_t slot);

/* Every model, in the order replay prints them. */
extern const trace_model_ops *const trace_models[];
extern const size_t trace_nmodels;
/* At most this many (trace_models.c checks it). */
#define TRACE_MAX_MODELS 16

/* The granularity the driver model rounds each allocation to. */
#define DRIVER_GRANULARITY (2u << 20)
/* The first-fit and best-fit models round requests up to this. */
#define MODEL_ROUND 512u

#endif
