#include "alloc/heap.h"

#include "alloc/slab.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Blocks, pages, chunks ---- */

typedef struct page page;
typedef struct chunk chunk;

typedef struct block {
    uintptr_t addr;
    size_t size;                 /* a multiple of DRK_HEAP_ALIGN */
    size_t asked;                /* live blocks: the size asked for */
    uint64_t serial;             /* live blocks: which allocation this is */
    unsigned tag;                /* live blocks: the caller's mark */
    struct block *prev, *next;   /* address order within the chunk */
    struct block *fprev, *fnext; /* free blocks: the list of their class */
    struct block *pnext;         /* live blocks: the others starting in the same page */
    chunk *chunk;
    int free, cls;
} block;

struct page {
    uintptr_t va;
    drk_page_handle handle; /* when mapped */
    uint32_t refs;          /* live blocks over this page */
    uint8_t mapped;
    uint8_t claimed;        /* being mapped outside the heap (drk_heap_claim_ahead) */
    uint8_t ahead;          /* mapped ahead of demand and not yet under a block */
    page *iprev, *inext;    /* idle (mapped, no refs): oldest first */
    block *starts;          /* live blocks starting in this page */
};

struct chunk {
    uintptr_t base;
    size_t size, npages;
    size_t unmapped; /* pages not mapped: none, and no request here needs a page mapped */
    page *pages;
    block *first, *last;
    chunk *next;
};

/* Free blocks by size class: 4 classes per power of two from 512 bytes. */
#define CLASSES ((64 - 9) * 4)

/* Live blocks by address: open addressing with backward-shift deletion. */
typedef struct live_map {
    block **slot;
    size_t cap, n;
} live_map;

/* Block records come from slabs (slab.h): splitting and merging blocks, on
 * every allocation and free, never calls malloc. */
#define SLAB_BLOCKS 4096

struct drk_heap {
    drk_page_backend *pb;
    drk_slab blocks;
    size_t page, va_chunk;
    unsigned shift; /* log2(page) when a power of two (0: divide), for page indices on every call */
    chunk *chunks;
    block *free_lists[CLASSES];
    uint64_t nonempty[(CLASSES + 63) / 64];
    live_map live;
    page *idle_head, *idle_tail;
    drk_page_handle *spare; /* created, mapped nowhere */
    unsigned idle_permille; /* idle pages kept, per thousand pages in use */
    size_t idle_floor;      /* idle pages kept whatever the pages in use */
    int no_moves;           /* pages stay where they were first mapped */
    int no_create;          /* this allocation may not create pages */
    chunk *claim_chunk;     /* the claim under way: pages [claim_first, + claim_n) */
    size_t claim_first, claim_n;
    uint64_t serial;
    size_t nspare, spare_cap;
    drk_heap_stats st;
};

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* The page `off` bytes into a chunk lies at. */
static inline size_t page_at(const drk_heap *h, size_t off) { return h->shift ? off >> h->shift : off / h->page; }

static block *block_new(drk_heap *h) { return drk_slab_get(&h->blocks); }

static void block_del(drk_heap *h, block *b) { drk_slab_put(&h->blocks, b); }

static int size_class(size_t s)
{
    unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)s);
    return (int)((lg - 9) * 4 + ((s >> (lg - 2)) & 3));
}

/* ---- Free lists ---- */

static void free_insert(drk_heap *h, block *b)
{
    int c = size_class(b->size);
    b->cls = c;
    b->fprev = NULL;
    b->fnext = h->free_lists[c];
    if (b->fnext)
        b->fnext->fprev = b;
    h->free_lists[c] = b;
    h->nonempty[c / 64] |= 1ull << (c % 64);
}

static void free_remove(drk_heap *h, block *b)
{
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        h->free_lists[b->cls] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    if (!h->free_lists[b->cls])
        h->nonempty[b->cls / 64] &= ~(1ull << (b->cls % 64));
    b->fprev = b->fnext = NULL;
}

/* Pages a block of `size` bytes carved at the start of free block `b`
 * would need mapped: the moves or creations placing it there costs. */
static size_t unmapped_in(const drk_heap *h, const block *b, size_t size)
{
    const chunk *c = b->chunk;
    if (!c->unmapped)
        return 0;
    size_t first = page_at(h, b->addr - c->base), last = page_at(h, b->addr + size - 1 - c->base), n = 0;
    for (size_t i = first; i <= last; i++)
        n += !c->pages[i].mapped;
    return n;
}

/* A free block of at least `size`. Among the first few of size's own class
 * that fit, else of the next class that has any (all of those fit): the
 * one that needs the fewest pages mapped, then the smallest. Bounded, so a
 * long class list costs no more. */
static void consider(const drk_heap *h, block *b, size_t size, block **best, size_t *best_need)
{
    if (b->size < size)
        return;
    size_t need = unmapped_in(h, b, size);
    if (need < *best_need || (need == *best_need && b->size < (*best)->size))
        *best = b, *best_need = need;
}

static block *free_find(drk_heap *h, size_t size)
{
    int c = size_class(size), looked = 0;
    block *best = NULL;
    size_t best_need = SIZE_MAX;
    for (block *b = h->free_lists[c]; b && looked < 16; b = b->fnext, looked++)
        consider(h, b, size, &best, &best_need);
    if (best)
        return best;
    for (int w = (c + 1) / 64; w < (CLASSES + 63) / 64; w++) {
        uint64_t bits = h->nonempty[w];
        if (w == (c + 1) / 64)
            bits &= (c + 1) % 64 ? ~0ull << ((c + 1) % 64) : ~0ull;
        if (!bits)
            continue;
        looked = 0;
        for (block *b = h->free_lists[w * 64 + __builtin_ctzll(bits)]; b && looked < 16; b = b->fnext, looked++)
            consider(h, b, size, &best, &best_need);
        return best;
    }
    return NULL;
}

/* ---- Live blocks by start address ---- */

static size_t hash(uintptr_t a) { return (size_t)((a >> 9) * 0x9e3779b97f4a7c15ull); }

static int live_grow(live_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    block **slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        block *b = m->slot[i];
        if (!b)
            continue;
        size_t j = hash(b->addr) & (cap - 1);
        while (slot[j])
            j = (j + 1) & (cap - 1);
        slot[j] = b;
    }
    free(m->slot);
    m->slot = slot, m->cap = cap;
    return 0;
}

static int live_put(live_map *m, block *b)
{
    if ((m->n + 1) * 2 > m->cap && live_grow(m) != 0)
        return -1;
    size_t j = hash(b->addr) & (m->cap - 1);
    while (m->slot[j])
        j = (j + 1) & (m->cap - 1);
    m->slot[j] = b;
    m->n++;
    return 0;
}

static size_t live_index(const live_map *m, uintptr_t addr)
{
    if (!m->cap)
        return SIZE_MAX;
    for (size_t j = hash(addr) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        if (!m->slot[j])
            return SIZE_MAX;
        if (m->slot[j]->addr == addr)
            return j;
    }
}

static void live_del(live_map *m, size_t j)
{
    m->slot[j] = NULL;
    m->n--;
    /* Backward shift: later members of the run move into the hole when
     * their home is at or before it. */
    for (size_t k = (j + 1) & (m->cap - 1); m->slot[k]; k = (k + 1) & (m->cap - 1)) {
        size_t home = hash(m->slot[k]->addr) & (m->cap - 1);
        if (((k - home) & (m->cap - 1)) >= ((k - j) & (m->cap - 1))) {
            m->slot[j] = m->slot[k];
            m->slot[k] = NULL;
            j = k;
        }
    }
}

/* ---- Pages ---- */

static page *page_of(const drk_heap *h, chunk *c, uintptr_t a) { return &c->pages[page_at(h, a - c->base)]; }

static void idle_push(drk_heap *h, page *p)
{
    p->inext = NULL;
    p->iprev = h->idle_tail;
    if (h->idle_tail)
        h->idle_tail->inext = p;
    else
        h->idle_head = p;
    h->idle_tail = p;
    h->st.idle_pages++;
}

static void idle_remove(drk_heap *h, page *p)
{
    if (p->iprev)
        p->iprev->inext = p->inext;
    else
        h->idle_head = p->inext;
    if (p->inext)
        p->inext->iprev = p->iprev;
    else
        h->idle_tail = p->iprev;
    p->iprev = p->inext = NULL;
    h->st.idle_pages--;
}

/* Spare handles: created and mapped nowhere. Room for `k` more; a handle
 * taken from the array always fits back, so only growth past the old size
 * can fail. */
static int spare_room(drk_heap *h, size_t k)
{
    while (h->spare_cap - h->nspare < k) {
        size_t cap = h->spare_cap ? h->spare_cap * 2 : 64;
        drk_page_handle *s = realloc(h->spare, cap * sizeof *s);
        if (!s)
            return -1;
        h->spare = s, h->spare_cap = cap;
    }
    return 0;
}

static int spare_push(drk_heap *h, drk_page_handle handle)
{
    if (spare_room(h, 1) != 0)
        return -1;
    h->spare[h->nspare++] = handle;
    return 0;
}

static chunk *chunk_of(const drk_heap *h, uintptr_t a);

/* An idle page that may join a run being moved: pages made ahead stay. */
static int movable(const page *q) { return q->mapped && !q->refs && !q->ahead; }

/* Unmaps the oldest idle page from its hole, with idle pages next to it up
 * to `max` in all, in one call, and makes them spares (*n of them): a run
 * costs one unmap where pages one by one cost one each. */
static int idle_run_to_spare(drk_heap *h, size_t max, size_t *n)
{
    *n = 0;
    page *p = h->idle_head;
    chunk *c = p ? chunk_of(h, p->va) : NULL;
    if (!c)
        return DRK_PAGES_OOM;
    size_t lo = page_at(h, p->va - c->base), hi = lo;
    if (max > 64)
        max = 64;
    while (hi - lo + 1 < max && hi + 1 < c->npages && movable(&c->pages[hi + 1]))
        hi++;
    while (hi - lo + 1 < max && lo > 0 && movable(&c->pages[lo - 1]))
        lo--;
    size_t k = hi - lo + 1;
    if (spare_room(h, k) != 0)
        return DRK_PAGES_FAILED;
    int r = h->pb->unmap(h->pb, c->pages[lo].va, k);
    h->st.unmap_calls++;
    if (r)
        return r;
    for (size_t i = lo; i <= hi; i++) {
        page *q = &c->pages[i];
        h->spare[h->nspare++] = q->handle;
        idle_remove(h, q);
        q->mapped = 0;
        c->unmapped++;
        if (q->ahead) {
            q->ahead = 0;
            h->st.ahead_pages--;
        }
    }
    *n = k;
    return 0;
}

/* Idle pages the heap keeps where they are, for holes to be reused at no
 * cost: a share of the pages under live data. */
static uint64_t idle_keep(const drk_heap *h)
{
    uint64_t share = (h->st.pages - h->st.idle_pages) * h->idle_permille / 1000;
    return share > h->idle_floor ? share : h->idle_floor;
}

/* A handle for a page about to be mapped, `want` pages still to come for
 * this request: a spare one; the oldest idle page, moved from its hole with
 * its idle neighbours (as many as the request wants and the heap need not
 * keep), when more are idle than the heap keeps; a new one; or, when the
 * backend has no more, idle pages after all. Moving before creating keeps
 * the pages held close to the pages live data touches. */
static int get_handle(drk_heap *h, size_t want, drk_page_handle *out)
{
    size_t moved;
    uint64_t keep = idle_keep(h);
    if (!h->nspare && !h->no_moves && h->st.idle_pages > keep &&
        idle_run_to_spare(h, want < h->st.idle_pages - keep ? want : (size_t)(h->st.idle_pages - keep), &moved) == 0)
        h->st.moves += moved;
    if (!h->nspare) {
        drk_page_handle nh;
        int r = h->no_create ? DRK_PAGES_OOM : h->pb->create(h->pb, &nh);
        if (r == 0) {
            if (spare_push(h, nh) != 0) {
                h->pb->release(h->pb, nh);
                return DRK_PAGES_FAILED;
            }
            h->st.creates++;
            h->st.grown++;
            if (++h->st.pages > h->st.peak_pages)
                h->st.peak_pages = h->st.pages;
        } else if (r != DRK_PAGES_OOM || h->no_moves || h->no_create || (r = idle_run_to_spare(h, want, &moved)) != 0) {
            return r;
        } else {
            h->st.moves += moved;
        }
    }
    *out = h->spare[--h->nspare];
    return 0;
}

/* Maps the unmapped pages among [first, last] of c, one map call per run
 * of consecutive ones (at most 64 pages a call). */
static int map_missing(drk_heap *h, chunk *c, size_t first, size_t last)
{
    for (size_t i = first; i <= last;) {
        if (c->pages[i].mapped) {
            i++;
            continue;
        }
        drk_page_handle run[64];
        size_t n = 0, want = 0;
        int r = 0;
        while (i + want <= last && want < 64 && !c->pages[i + want].mapped)
            want++;
        while (n < want && (r = get_handle(h, want - n, &run[n])) == 0)
            n++;
        if (n) {
            int m = h->pb->map(h->pb, c->pages[i].va, run, n);
            h->st.map_calls++;
            if (m) {
                while (n)
                    spare_push(h, run[--n]); /* fits: they came from the array */
                return m;
            }
            for (size_t k = 0; k < n; k++) {
                c->pages[i + k].handle = run[k];
                c->pages[i + k].mapped = 1;
            }
            c->unmapped -= n;
        }
        if (r)
            return r;
        i += n;
    }
    return 0;
}

/* Pages [first, last] gain or lose a live block over them. */
static void pages_ref(drk_heap *h, chunk *c, size_t first, size_t last)
{
    for (size_t i = first; i <= last; i++) {
        page *p = &c->pages[i];
        if (p->refs++ == 0 && p->mapped)
            idle_remove(h, p);
        if (p->ahead) {
            p->ahead = 0;
            h->st.ahead_pages--;
            h->st.ahead_used++;
            h->st.grown++;
        }
    }
}

static void pages_unref(drk_heap *h, chunk *c, size_t first, size_t last)
{
    for (size_t i = first; i <= last; i++) {
        page *p = &c->pages[i];
        if (--p->refs == 0 && p->mapped)
            idle_push(h, p);
    }
}

/* ---- Chunks ---- */

static chunk *chunk_new(drk_heap *h, size_t size)
{
    chunk *c = calloc(1, sizeof *c);
    block *b = block_new(h);
    size_t npages = size / h->page;
    page *pages = calloc(npages, sizeof *pages);
    uintptr_t va = 0;
    if (!c || !b || !pages || h->pb->reserve(h->pb, size, &va) != 0) {
        free(c), free(pages);
        if (b)
            block_del(h, b);
        return NULL;
    }
    for (size_t i = 0; i < npages; i++)
        pages[i].va = va + i * h->page;
    *c = (chunk){.base = va, .size = size, .npages = npages, .unmapped = npages, .pages = pages, .first = b, .last = b,
                 .next = h->chunks};
    h->chunks = c;
    *b = (block){.addr = va, .size = size, .chunk = c, .free = 1};
    free_insert(h, b);
    h->st.reserved_va += size;
    return c;
}

static chunk *chunk_of(const drk_heap *h, uintptr_t a)
{
    for (chunk *c = h->chunks; c; c = c->next)
        if (a >= c->base && a - c->base < c->size)
            return c;
    return NULL;
}

/* ---- The heap ---- */

drk_heap *drk_heap_new(drk_page_backend *pages, size_t va_chunk)
{
    if (!pages || !pages->page_size || va_chunk % pages->page_size || !va_chunk)
        return NULL;
    drk_heap *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->pb = pages;
    drk_slab_init(&h->blocks, sizeof(block), SLAB_BLOCKS);
    h->page = pages->page_size;
    if (!(h->page & (h->page - 1)))
        h->shift = (unsigned)__builtin_ctzll((unsigned long long)h->page);
    h->va_chunk = va_chunk;
    h->idle_permille = DRK_HEAP_IDLE_PERMILLE;
    return h;
}

/* Splits `b` (free, at least `size`) so that its first `size` bytes are a
 * block of their own; the rest stays free. */
static block *carve(drk_heap *h, block *b, size_t size)
{
    free_remove(h, b);
    if (b->size > size) {
        block *rest = block_new(h);
        if (!rest) {
            free_insert(h, b);
            return NULL;
        }
        *rest = (block){.addr = b->addr + size, .size = b->size - size, .prev = b, .next = b->next,
                        .chunk = b->chunk, .free = 1};
        if (b->next)
            b->next->prev = rest;
        else
            b->chunk->last = rest;
        b->next = rest;
        b->size = size;
        free_insert(h, rest);
    }
    b->free = 0;
    return b;
}

/* Merges `b` (free, in no list) with its free neighbours and lists the
 * result. */
static void coalesce(drk_heap *h, block *b)
{
    block *n = b->next;
    if (n && n->free) {
        free_remove(h, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
        else
            b->chunk->last = b;
        block_del(h, n);
    }
    block *p = b->prev;
    if (p && p->free) {
        free_remove(h, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next)
            b->next->prev = p;
        else
            p->chunk->last = p;
        block_del(h, b);
        b = p;
    }
    free_insert(h, b);
}

static void page_span(const drk_heap *h, const block *b, size_t *first, size_t *last)
{
    *first = page_at(h, b->addr - b->chunk->base);
    *last = page_at(h, b->addr + b->size - 1 - b->chunk->base);
}

static void start_link(const drk_heap *h, block *b)
{
    page *p = page_of(h, b->chunk, b->addr);
    b->pnext = p->starts;
    p->starts = b;
}

static void start_unlink(const drk_heap *h, block *b)
{
    page *p = page_of(h, b->chunk, b->addr);
    for (block **q = &p->starts; *q; q = &(*q)->pnext)
        if (*q == b) {
            *q = b->pnext;
            break;
        }
    b->pnext = NULL;
}

/* Makes `b` (just carved) free again after a failed allocation. */
static void uncarve(drk_heap *h, block *b)
{
    b->free = 1;
    coalesce(h, b);
}

int drk_heap_alloc_existing(drk_heap *h, size_t size, uintptr_t *ptr)
{
    h->no_create = 1;
    int r = drk_heap_alloc(h, size, ptr);
    h->no_create = 0;
    return r;
}

int drk_heap_alloc(drk_heap *h, size_t size, uintptr_t *ptr)
{
    if (!size || size > SIZE_MAX / 2)
        return DRK_PAGES_INVALID;
    size_t need = round_up(size, DRK_HEAP_ALIGN);
    block *b = free_find(h, need);
    if (!b) {
        chunk *c = chunk_new(h, need > h->va_chunk ? round_up(need, h->page) : h->va_chunk);
        if (!c)
            return DRK_PAGES_OOM;
        b = c->first;
    }
    b = carve(h, b, need);
    if (!b)
        return DRK_PAGES_FAILED;
    size_t first, last;
    page_span(h, b, &first, &last);
    /* Pages the grower is mapping: the caller waits for them and asks again. */
    if (b->chunk == h->claim_chunk && h->claim_n && first < h->claim_first + h->claim_n && last >= h->claim_first) {
        uncarve(h, b);
        h->st.busy++;
        return DRK_PAGES_BUSY;
    }
    /* Referenced first, so that getting pages for this block never takes
     * one of its own idle pages. */
    pages_ref(h, b->chunk, first, last);
    int r = map_missing(h, b->chunk, first, last);
    if (r == 0 && live_put(&h->live, b) != 0)
        r = DRK_PAGES_FAILED;
    if (r) {
        pages_unref(h, b->chunk, first, last);
        uncarve(h, b);
        return r;
    }
    b->asked = size;
    b->serial = ++h->serial;
    b->tag = 0;
    start_link(h, b);
    h->st.live_blocks++;
    h->st.live_bytes += size;
    if (h->st.live_bytes > h->st.peak_live_bytes)
        h->st.peak_live_bytes = h->st.live_bytes;
    *ptr = b->addr;
    return 0;
}

int drk_heap_free(drk_heap *h, uintptr_t ptr)
{
    size_t j = live_index(&h->live, ptr);
    if (j == SIZE_MAX)
        return DRK_PAGES_INVALID;
    block *b = h->live.slot[j];
    live_del(&h->live, j);
    start_unlink(h, b);
    size_t first, last;
    page_span(h, b, &first, &last);
    pages_unref(h, b->chunk, first, last);
    h->st.live_blocks--;
    h->st.live_bytes -= b->asked;
    b->asked = 0;
    b->free = 1;
    coalesce(h, b);
    return 0;
}

int drk_heap_resize(drk_heap *h, uintptr_t ptr, size_t size)
{
    size_t j = live_index(&h->live, ptr);
    if (j == SIZE_MAX || !size || size > h->live.slot[j]->size)
        return DRK_PAGES_INVALID;
    block *b = h->live.slot[j];
    h->st.live_bytes = h->st.live_bytes - b->asked + size;
    if (h->st.live_bytes > h->st.peak_live_bytes)
        h->st.peak_live_bytes = h->st.live_bytes;
    b->asked = size;
    b->serial = ++h->serial;
    b->tag = 0;
    return 0;
}

int drk_heap_find(const drk_heap *h, uintptr_t ptr, uintptr_t *base, size_t *size)
{
    uint64_t serial;
    return drk_heap_lookup(h, ptr, base, size, &serial, NULL);
}

int drk_heap_set_tag(drk_heap *h, uintptr_t ptr, unsigned tag)
{
    size_t j = live_index(&h->live, ptr);
    if (j == SIZE_MAX)
        return DRK_PAGES_INVALID;
    h->live.slot[j]->tag = tag;
    return 0;
}

int drk_heap_contains(const drk_heap *h, uintptr_t ptr) { return chunk_of(h, ptr) != NULL; }

int drk_heap_block_size(const drk_heap *h, uintptr_t ptr, size_t *size)
{
    size_t j = live_index(&h->live, ptr);
    if (j == SIZE_MAX)
        return DRK_PAGES_INVALID;
    *size = h->live.slot[j]->asked;
    return 0;
}

int drk_heap_lookup(const drk_heap *h, uintptr_t ptr, uintptr_t *base, size_t *size, uint64_t *serial,
                    unsigned *tag)
{
    chunk *c = chunk_of(h, ptr);
    if (!c)
        return DRK_PAGES_INVALID;
    /* The block holding ptr, if any, is over every page from its start
     * page to ptr's: walk back while pages are referenced. */
    for (size_t i = page_at(h, ptr - c->base) + 1; i-- > 0;) {
        const page *p = &c->pages[i];
        if (!p->refs)
            break;
        for (const block *b = p->starts; b; b = b->pnext)
            if (b->addr <= ptr && ptr < b->addr + b->asked) {
                *base = b->addr;
                *size = b->asked;
                *serial = b->serial;
                if (tag)
                    *tag = b->tag;
                return 0;
            }
    }
    return DRK_PAGES_INVALID;
}

/* ---- Growth ahead of demand ---- */

/* The newest chunk's frontier: the index of its first unmapped page past
 * the pages mapped at the start of its last free block (*ready of them);
 * npages when there is none. */
static size_t frontier(const drk_heap *h, size_t *ready)
{
    *ready = 0;
    const chunk *c = h->chunks;
    const block *b = c ? c->last : NULL;
    if (!b || !b->free)
        return c ? c->npages : 0;
    size_t i = (b->addr - c->base + h->page - 1) / h->page;
    while (i < c->npages && c->pages[i].mapped)
        i++, ++*ready;
    return i;
}

size_t drk_heap_ahead_ready(const drk_heap *h)
{
    size_t ready;
    frontier(h, &ready);
    return ready;
}

size_t drk_heap_claim_ahead(drk_heap *h, size_t n, uintptr_t *va)
{
    size_t ready, i = frontier(h, &ready);
    chunk *c = h->chunks;
    if (!c || h->claim_n || i >= c->npages || !n)
        return 0;
    if (n > c->npages - i)
        n = c->npages - i;
    for (size_t k = 0; k < n; k++)
        c->pages[i + k].claimed = 1;
    h->claim_chunk = c, h->claim_first = i, h->claim_n = n;
    *va = c->pages[i].va;
    return n;
}

void drk_heap_claim_done(drk_heap *h, const drk_page_handle *handles, size_t n)
{
    chunk *c = h->claim_chunk;
    for (size_t k = 0; c && k < h->claim_n; k++) {
        page *p = &c->pages[h->claim_first + k];
        p->claimed = 0;
        if (k >= n)
            continue;
        /* No block lies over a claimed page (drk_heap_alloc refuses to
         * place one), so each is idle. */
        p->handle = handles[k];
        p->mapped = 1;
        c->unmapped--;
        p->ahead = 1;
        idle_push(h, p);
        h->st.ahead_pages++;
        h->st.ahead_made++;
        if (++h->st.pages > h->st.peak_pages)
            h->st.peak_pages = h->st.pages;
    }
    if (n)
        h->st.map_calls++;
    h->claim_chunk = NULL, h->claim_n = 0;
}

uint64_t drk_heap_grown(const drk_heap *h) { return h->st.grown; }

void drk_heap_trim(drk_heap *h, size_t keep)
{
    size_t moved;
    while (h->st.idle_pages > keep && idle_run_to_spare(h, (size_t)(h->st.idle_pages - keep), &moved) == 0) {
    }
    while (h->nspare && h->pb->release(h->pb, h->spare[h->nspare - 1]) == 0) {
        h->nspare--;
        h->st.pages--;
        h->st.releases++;
    }
}

drk_heap_stats drk_heap_get_stats(const drk_heap *h)
{
    drk_heap_stats st = h->st;
    st.spare_pages = h->nspare;
    return st;
}

void drk_heap_set_idle(drk_heap *h, unsigned permille) { h->idle_permille = permille; }

uint64_t drk_heap_pages(const drk_heap *h) { return h->st.pages; }
uint64_t drk_heap_moves(const drk_heap *h) { return h->st.moves; }

void drk_heap_set_policy(drk_heap *h, unsigned permille, size_t floor_pages, int moves)
{
    h->idle_permille = permille;
    h->idle_floor = floor_pages;
    h->no_moves = !moves;
}

int drk_heap_block_pages(const drk_heap *h, uintptr_t ptr, drk_page_handle *out, size_t max, size_t *n,
                         uintptr_t *first_va)
{
    size_t j = live_index(&h->live, ptr);
    if (j == SIZE_MAX)
        return DRK_PAGES_INVALID;
    const block *b = h->live.slot[j];
    size_t first, last;
    page_span(h, b, &first, &last);
    *n = last - first + 1;
    *first_va = b->chunk->pages[first].va;
    if (*n > max)
        return DRK_PAGES_OOM;
    for (size_t i = first; i <= last; i++)
        out[i - first] = b->chunk->pages[i].handle;
    return 0;
}

void drk_heap_mapped_runs(const drk_heap *h, void (*fn)(void *ctx, uintptr_t va, size_t bytes), void *ctx)
{
    for (const chunk *c = h->chunks; c; c = c->next)
        for (size_t i = 0; i < c->npages;) {
            size_t n = 0;
            while (i + n < c->npages && c->pages[i + n].mapped)
                n++;
            if (n)
                fn(ctx, c->pages[i].va, n * h->page);
            i += n ? n : 1;
        }
}

void drk_heap_holes(const drk_heap *h, uint64_t *total, uint64_t *largest)
{
    *total = *largest = 0;
    for (const chunk *c = h->chunks; c; c = c->next)
        for (const block *b = c->first; b; b = b->next)
            if (b->free) {
                *total += b->size;
                if (b->size > *largest)
                    *largest = b->size;
            }
}

void drk_heap_delete(drk_heap *h)
{
    if (!h)
        return;
    while (h->chunks) {
        chunk *c = h->chunks;
        h->chunks = c->next;
        for (size_t i = 0; i < c->npages; i++)
            if (c->pages[i].mapped) {
                h->pb->unmap(h->pb, c->pages[i].va, 1);
                h->pb->release(h->pb, c->pages[i].handle);
            }
        h->pb->unreserve(h->pb, c->base, c->size);
        free(c->pages);
        free(c);
    }
    for (size_t i = 0; i < h->nspare; i++)
        h->pb->release(h->pb, h->spare[i]);
    drk_slab_fini(&h->blocks);
    free(h->spare);
    free(h->live.slot);
    free(h);
}

/* ---- Invariants, for tests ---- */

__attribute__((format(printf, 3, 4))) static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

typedef struct tally {
    uint64_t live, blocks, idle, mapped, ahead;
} tally;

/* One chunk's blocks and pages, against a count of the blocks over each page. */
static int check_chunk(const drk_heap *h, const chunk *c, uint32_t *refs, tally *t, char *err, size_t errlen)
{
    uintptr_t at = c->base;
    for (const block *b = c->first; b; b = b->next) {
        if (b->addr != at || b->size == 0 || b->size % DRK_HEAP_ALIGN || (b->next && b->next->prev != b))
            return bad(err, errlen, "block %#lx+%zu breaks the tiling at %#lx", (unsigned long)b->addr, b->size,
                       (unsigned long)at);
        if (b->free && b->next && b->next->free)
            return bad(err, errlen, "free neighbours at %#lx not merged", (unsigned long)b->addr);
        if (!b->free) {
            size_t first, last;
            page_span(h, b, &first, &last);
            for (size_t i = first; i <= last; i++)
                refs[i]++;
            t->live += b->asked;
            t->blocks++;
            if (live_index(&h->live, b->addr) == SIZE_MAX)
                return bad(err, errlen, "live block %#lx not in the map", (unsigned long)b->addr);
        }
        at += b->size;
    }
    if (at != c->base + c->size)
        return bad(err, errlen, "chunk %#lx: blocks end at %#lx", (unsigned long)c->base, (unsigned long)at);
    if (!c->last || c->last->next || c->last->addr + c->last->size != c->base + c->size)
        return bad(err, errlen, "chunk %#lx: its last block is not the one ending it", (unsigned long)c->base);
    size_t unmapped = 0;
    for (size_t i = 0; i < c->npages; i++) {
        const page *p = &c->pages[i];
        unmapped += !p->mapped;
        if (p->refs != refs[i] || (p->refs && !p->mapped))
            return bad(err, errlen, "page %#lx: refs %u, blocks over it %u, mapped %d", (unsigned long)p->va,
                       p->refs, refs[i], p->mapped);
        if ((p->ahead && (!p->mapped || p->refs)) || (p->claimed && (p->mapped || p->refs)))
            return bad(err, errlen, "page %#lx: ahead %d claimed %d, mapped %d, refs %u", (unsigned long)p->va,
                       p->ahead, p->claimed, p->mapped, p->refs);
        t->mapped += p->mapped;
        t->idle += p->mapped && !p->refs;
        t->ahead += p->ahead;
    }
    if (unmapped != c->unmapped)
        return bad(err, errlen, "chunk %#lx: %zu pages unmapped, its count says %zu", (unsigned long)c->base, unmapped,
                   c->unmapped);
    return 0;
}

int drk_heap_check(const drk_heap *h, char *err, size_t errlen)
{
    tally t = {0};
    for (const chunk *c = h->chunks; c; c = c->next) {
        uint32_t *refs = calloc(c->npages, sizeof *refs);
        if (!refs)
            return bad(err, errlen, "out of memory");
        int r = check_chunk(h, c, refs, &t, err, errlen);
        free(refs);
        if (r)
            return r;
    }
    if (t.live != h->st.live_bytes || t.blocks != h->st.live_blocks || t.blocks != h->live.n)
        return bad(err, errlen, "live %llu bytes in %llu blocks; stats say %llu in %llu, map %zu",
                   (unsigned long long)t.live, (unsigned long long)t.blocks, (unsigned long long)h->st.live_bytes,
                   (unsigned long long)h->st.live_blocks, h->live.n);
    if (t.ahead != h->st.ahead_pages)
        return bad(err, errlen, "ahead pages %llu, stats say %llu", (unsigned long long)t.ahead,
                   (unsigned long long)h->st.ahead_pages);
    if (t.idle != h->st.idle_pages || t.mapped + h->nspare != h->st.pages)
        return bad(err, errlen, "idle %llu (stats %llu); mapped %llu + spare %zu != pages %llu",
                   (unsigned long long)t.idle, (unsigned long long)h->st.idle_pages, (unsigned long long)t.mapped,
                   h->nspare, (unsigned long long)h->st.pages);
    return 0;
}
