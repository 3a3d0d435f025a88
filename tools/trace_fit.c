/* The non-stitching pools: `first-fit` (one address space grown at its end)
 * and `best-fit-per-stream` (PyTorch-like segments per stream). Free blocks
 * live in a block_tree, neighbours in address lists: O(log n) an op. */
#include <stdlib.h>

#include "alloc/trace.h"
#include "tools/block_tree.h"
#include "tools/trace_models.h"

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* ------------------------------------------------ blocks and slots */

/* Blocks come from slabs and go back to a free list: no malloc an op. */
#define SLAB_BLOCKS 4096

typedef struct slab {
    struct slab *next;
    block blocks[SLAB_BLOCKS];
} slab;

typedef struct block_store {
    slab *slabs;
    block *spare;       /* free list through ->next */
    block **by_slot;    /* the live block of each slot */
    size_t nslots;
} block_store;

static block *new_block(block_store *s)
{
    if (!s->spare) {
        slab *sl = malloc(sizeof *sl);
        if (!sl)
            return NULL;
        sl->next = s->slabs, s->slabs = sl;
        for (size_t i = 0; i < SLAB_BLOCKS; i++) {
            sl->blocks[i].next = s->spare;
            s->spare = &sl->blocks[i];
        }
    }
    block *b = s->spare;
    s->spare = b->next;
    *b = (block){0};
    return b;
}

static void drop_block(block_store *s, block *b)
{
    b->next = s->spare;
    s->spare = b;
}

static int set_slot(block_store *s, size_t slot, block *b)
{
    if (slot >= s->nslots) {
        size_t n = s->nslots ? s->nslots : 1024;
        while (n <= slot)
            n *= 2;
        block **p = realloc(s->by_slot, n * sizeof *p);
        if (!p)
            return -1;
        for (size_t i = s->nslots; i < n; i++)
            p[i] = NULL;
        s->by_slot = p, s->nslots = n;
    }
    s->by_slot[slot] = b;
    return 0;
}

static void store_free(block_store *s)
{
    while (s->slabs) {
        slab *n = s->slabs->next;
        free(s->slabs);
        s->slabs = n;
    }
    free(s->by_slot);
}

/* Cuts `b` (held, out of the tree) to `size` bytes; the rest becomes a free
 * block after it, in the tree. Returns the rest, or NULL (none or no memory:
 * then b keeps its size). */
static block *split_off(block_store *s, block_tree *t, block *b, uint64_t size)
{
    block *rest = new_block(s);
    if (!rest)
        return NULL;
    rest->addr = b->addr + size;
    rest->size = b->size - size;
    rest->segment = b->segment;
    rest->group = b->group;
    rest->is_free = 1;
    rest->prev = b, rest->next = b->next;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = size;
    block_tree_insert(t, rest);
    return rest;
}

/* Merges free `b` with its free address neighbours (those leave the tree);
 * returns the merged block, not in the tree. `*last` follows a merged-away
 * last block. */
static block *coalesce(block_store *s, block_tree *t, block *b, block **last)
{
    block *p = b->prev, *n = b->next;
    if (p && p->is_free) {
        block_tree_remove(t, p);
        p->size += b->size;
        p->next = n;
        if (n)
            n->prev = p;
        if (last && *last == b)
            *last = p;
        drop_block(s, b);
        b = p;
    }
    if (n && n->is_free) {
        block_tree_remove(t, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
        if (last && *last == n)
            *last = b;
        drop_block(s, n);
    }
    return b;
}

/* ------------------------------------------------------ first-fit */

typedef struct first_fit {
    trace_model_config cfg;
    block_store store;
    block_tree tree; /* free blocks by address */
    block *last;     /* the highest-addressed block */
    uint64_t top;    /* the space grown so far: reserved */
    uint64_t free_bytes;
} first_fit;

static trace_model *ff_create(const trace_model_config *cfg)
{
    first_fit *f = calloc(1, sizeof *f);
    if (f)
        f->cfg = *cfg;
    return (trace_model *)f;
}

/* Grows the space so that a free block at its end holds `size` bytes;
 * returns that block, out of the tree. */
static block *ff_grow(first_fit *f, uint64_t size, int *status)
{
    block *end = f->last && f->last->is_free ? f->last : NULL;
    uint64_t grow = round_up(size - (end ? end->size : 0), f->cfg.page_size);
    if (f->cfg.capacity && grow > f->cfg.capacity - f->top) {
        *status = MODEL_OOM;
        return NULL;
    }
    if (end) {
        block_tree_remove(&f->tree, end);
        end->size += grow;
    } else {
        end = new_block(&f->store);
        if (!end) {
            *status = MODEL_NOMEM;
            return NULL;
        }
        end->addr = f->top, end->size = grow, end->is_free = 1;
        end->prev = f->last;
        if (f->last)
            f->last->next = end;
        f->last = end;
    }
    f->top += grow;
    f->free_bytes += grow;
    return end;
}

static int ff_alloc(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)stream;
    first_fit *f = (first_fit *)m;
    uint64_t r = round_up(size, MODEL_ROUND);
    block *b = block_tree_first_fit(&f->tree, r);
    if (b) {
        block_tree_remove(&f->tree, b);
    } else {
        int status = MODEL_OK;
        if (!(b = ff_grow(f, r, &status)))
            return status;
    }
    if (b->size > r) {
        block *rest = split_off(&f->store, &f->tree, b, r);
        if (rest && f->last == b)
            f->last = rest;
    }
    b->is_free = 0;
    f->free_bytes -= b->size;
    return set_slot(&f->store, slot, b) == 0 ? MODEL_OK : MODEL_NOMEM;
}

static void ff_free(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)size, (void)stream;
    first_fit *f = (first_fit *)m;
    block *b = f->store.by_slot[slot];
    f->store.by_slot[slot] = NULL;
    b->is_free = 1;
    f->free_bytes += b->size;
    block_tree_insert(&f->tree, coalesce(&f->store, &f->tree, b, &f->last));
}

static uint64_t ff_reserved(const trace_model *m) { return ((const first_fit *)m)->top; }

static void ff_free_space(const trace_model *m, uint64_t *total, uint64_t *largest)
{
    const first_fit *f = (const first_fit *)m;
    *total = f->free_bytes;
    *largest = block_tree_max(&f->tree);
}

static void ff_destroy(trace_model *m)
{
    first_fit *f = (first_fit *)m;
    store_free(&f->store);
    free(f);
}

const trace_model_ops trace_model_first_fit = {
    .name = "first-fit",
    .what = "one address space grown by pages at its end, first fit, coalescing, no stitching",
    .create = ff_create,
    .alloc = ff_alloc,
    .free = ff_free,
    .reserved = ff_reserved,
    .free_space = ff_free_space,
    .destroy = ff_destroy,
};

/* -------------------------------------------- best-fit-per-stream */

/* PyTorch's CUDACachingAllocator constants. */
#define SMALL_SIZE (1u << 20)         /* requests up to this use the small pool */
#define SMALL_BUFFER (2u << 20)       /* small pool segment */
#define LARGE_BUFFER (20u << 20)      /* large pool segment for requests below MIN_LARGE_ALLOC */
#define MIN_LARGE_ALLOC (10u << 20)
#define ROUND_LARGE (2u << 20)        /* larger segments: the request rounded to this */

typedef struct segment {
    uint64_t addr, size;
    block *first;
    struct segment *prev, *next; /* every segment */
} segment;

typedef struct best_fit {
    trace_model_config cfg;
    block_store store;
    block_tree tree; /* free blocks by (stream and pool, size, address) */
    segment *segments;
    uint64_t reserved, next_addr, free_bytes;
} best_fit;

static trace_model *bf_create(const trace_model_config *cfg)
{
    best_fit *f = calloc(1, sizeof *f);
    if (f) {
        f->cfg = *cfg;
        f->tree.by_size = 1;
    }
    return (trace_model *)f;
}

/* PyTorch's empty_cache on an allocation that would fail: segments with no
 * allocation in them go back to the device. O(segments), on OOM only. */
static void bf_release_free_segments(best_fit *f)
{
    for (segment *s = f->segments, *next; s; s = next) {
        next = s->next;
        block *b = s->first;
        if (!b->is_free || b->size != s->size)
            continue;
        block_tree_remove(&f->tree, b);
        drop_block(&f->store, b);
        f->free_bytes -= s->size;
        f->reserved -= s->size;
        if (s->prev)
            s->prev->next = s->next;
        else
            f->segments = s->next;
        if (s->next)
            s->next->prev = s->prev;
        free(s);
    }
}

static block *bf_new_segment(best_fit *f, uint64_t size, uint32_t group, int *status)
{
    if (f->cfg.capacity && size > f->cfg.capacity - f->reserved) {
        bf_release_free_segments(f);
        if (size > f->cfg.capacity - f->reserved) {
            *status = MODEL_OOM;
            return NULL;
        }
    }
    segment *s = calloc(1, sizeof *s);
    block *b = s ? new_block(&f->store) : NULL;
    if (!b) {
        free(s);
        *status = MODEL_NOMEM;
        return NULL;
    }
    s->addr = f->next_addr, s->size = size;
    s->first = b;
    s->next = f->segments;
    if (f->segments)
        f->segments->prev = s;
    f->segments = s;
    f->next_addr += size;
    f->reserved += size;
    f->free_bytes += size;
    b->addr = s->addr, b->size = size, b->segment = s, b->group = group, b->is_free = 1;
    return b;
}

static int bf_alloc(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    best_fit *f = (best_fit *)m;
    uint64_t r = round_up(size, MODEL_ROUND);
    int small = r <= SMALL_SIZE;
    /* cuMemAlloc has no stream: it counts as the legacy default stream 0. */
    uint32_t group = (stream == DRK_TRACE_NO_STREAM ? 0 : stream) * 2 + (uint32_t)!small;
    block *b = block_tree_best_fit(&f->tree, group, r);
    if (b) {
        block_tree_remove(&f->tree, b);
    } else {
        uint64_t seg = small ? SMALL_BUFFER : r < MIN_LARGE_ALLOC ? LARGE_BUFFER : round_up(r, ROUND_LARGE);
        int status = MODEL_OK;
        if (!(b = bf_new_segment(f, seg, group, &status)))
            return status;
    }
    uint64_t rest = b->size - r;
    if (small ? rest >= MODEL_ROUND : rest > SMALL_SIZE)
        split_off(&f->store, &f->tree, b, r);
    b->is_free = 0;
    f->free_bytes -= b->size;
    return set_slot(&f->store, slot, b) == 0 ? MODEL_OK : MODEL_NOMEM;
}

static void bf_free(trace_model *m, size_t slot, uint64_t size, uint32_t stream)
{
    (void)size, (void)stream; /* the block goes back to its allocation's stream */
    best_fit *f = (best_fit *)m;
    block *b = f->store.by_slot[slot];
    f->store.by_slot[slot] = NULL;
    b->is_free = 1;
    f->free_bytes += b->size;
    b = coalesce(&f->store, &f->tree, b, NULL);
    segment *s = b->segment;
    if (!b->prev)
        s->first = b;
    block_tree_insert(&f->tree, b);
}

static uint64_t bf_reserved(const trace_model *m) { return ((const best_fit *)m)->reserved; }

static void bf_free_space(const trace_model *m, uint64_t *total, uint64_t *largest)
{
    const best_fit *f = (const best_fit *)m;
    *total = f->free_bytes;
    *largest = block_tree_max(&f->tree);
}

static void bf_destroy(trace_model *m)
{
    best_fit *f = (best_fit *)m;
    for (segment *s = f->segments, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    store_free(&f->store);
    free(f);
}

const trace_model_ops trace_model_best_fit_stream = {
    .name = "best-fit-per-stream",
    .what = "PyTorch-like: segments per stream (2 MiB small, 20 MiB large), best fit, split, no stitching",
    .create = bf_create,
    .alloc = bf_alloc,
    .free = bf_free,
    .reserved = bf_reserved,
    .free_space = bf_free_space,
    .destroy = bf_destroy,
};
