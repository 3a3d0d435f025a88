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

/* A mapped page is one of the `len` pages of a handle (a run), the `off`th;
 * a run is mapped, moved and released whole, so its first page (its head)
 * keeps what concerns all of it. */
struct page {
    uintptr_t va;
    drk_page_handle handle; /* when mapped: its run's */
    uint32_t refs;          /* live blocks over this page */
    uint32_t len, off;      /* when mapped: its run's pages, and its place in it */
    uint32_t busy;          /* a head: pages of the run under live blocks */
    uint8_t mapped;
    uint8_t claimed;        /* being mapped outside the heap (drk_heap_claim_ahead) */
    uint8_t ahead;          /* mapped ahead of demand and not yet under a block */
    uint8_t listed;         /* a head in the idle list: no page of its run under a live block */
    page *iprev, *inext;    /* idle runs (heads): oldest first */
    block *starts;          /* live blocks starting in this page */
};

/* A handle created, or unmapped from its hole, mapped nowhere now. */
typedef struct spare_run {
    drk_page_handle handle;
    size_t len;
} spare_run;

struct chunk {
    uintptr_t base;
    size_t size, npages;
    size_t unmapped; /* pages not mapped: none, and no request here needs a page mapped */
    size_t top;      /* every page from this index on is unmapped (the untouched rest of the reservation) */
    page *pages;
    block *first, *last;
    chunk *next;
};

/* Idle runs by length: 1, 2-3, 4-7, ... 128 pages and more. */
#define IDLE_CLASSES 8

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
    page *idle_head[IDLE_CLASSES], *idle_tail[IDLE_CLASSES];
    size_t idle_run_pages;  /* pages of the runs in the idle lists: what can move or go back */
    spare_run *spare;       /* created, mapped nowhere */
    size_t spare_pages;
    size_t run_max;         /* pages a handle made for a request covers at most */
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

/* The page `off` bytes into a chunk lies at, and how far into it. */
static inline size_t page_at(const drk_heap *h, size_t off) { return h->shift ? off >> h->shift : off / h->page; }
static inline size_t in_page(const drk_heap *h, size_t off) { return h->shift ? off & (h->page - 1) : off % h->page; }

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

/* Unmapped pages among [first, last] of c. A chunk is a large reservation
 * mapped from its start: while no page below its top is unmapped (no run
 * went back from the middle) this is arithmetic, else a count. Asked for
 * every candidate hole of every allocation, whose blocks may span tens of
 * pages (the anchor's large sizes spent a fifth of a pair here). */
static size_t unmapped_span(const chunk *c, size_t first, size_t last)
{
    if (!c->unmapped)
        return 0;
    if (c->unmapped == c->npages - c->top)
        return last < c->top ? 0 : last - (first > c->top ? first : c->top) + 1;
    size_t n = 0;
    for (size_t i = first; i <= last; i++)
        n += !c->pages[i].mapped;
    return n;
}

/* Pages [at, at + n) of c were mapped, or unmapped: its top follows. */
static void top_mapped(chunk *c, size_t at, size_t n)
{
    if (at + n > c->top)
        c->top = at + n;
}

static void top_unmapped(chunk *c, size_t at, size_t n)
{
    if (at + n != c->top)
        return;
    c->top = at;
    while (c->top && !c->pages[c->top - 1].mapped)
        c->top--;
}

/* Pages a block of `size` bytes carved at the start of free block `b`
 * would need mapped: the moves or creations placing it there costs. */
static size_t unmapped_in(const drk_heap *h, const block *b, size_t size)
{
    const chunk *c = b->chunk;
    return unmapped_span(c, page_at(h, b->addr - c->base), page_at(h, b->addr + size - 1 - c->base));
}

/* Pages of idle run `hd` (at page run0) that a block over pages [first,
 * last] covers, if it must be cut: covered in part, or its page `shared`
 * (the block's first or last, which it does not fill) inside it. */
static size_t cut_of(const page *hd, size_t run0, size_t first, size_t last, int shared)
{
    if (hd->len == 1 || !hd->listed)
        return 0;
    size_t lo = first > run0 ? first : run0, hi = last < run0 + hd->len - 1 ? last : run0 + hd->len - 1;
    return hi - lo + 1 < hd->len || shared ? hi - lo + 1 : 0;
}

static uint64_t idle_keep(const drk_heap *h);

/* Runs are made only on pages a block fills, never on one it may share
 * with a neighbour. While the heap holds no more idle pages than it keeps
 * (the reserve), a block may be placed over part of an idle run at no cost;
 * the run's other pages then wait for that block to go before they can move
 * or go back (stranded). Past the reserve, where idle pages must be free to
 * move and a full device must find every idle page, a block placed over
 * part of an idle run, or over a page of one that it does not fill, has
 * the run cut instead: given back, and the block's pages there made anew
 * (never with moves off, DRK_DEFRAG=0: pages stay where first mapped).
 * Replayed on a device only 3% or 10% larger than the peak live set of
 * the RMM-like random trace, stranding ran out of memory 17 and 1 times
 * where single pages did not; cutting, never. This is what a block of
 * `size` bytes carved at the start of free block `b` would cut, in pages
 * it would need made (*lo, *hi: the runs): only the runs at either end of
 * its span can reach past it. */
static size_t cuts(const drk_heap *h, const block *b, size_t size, page **lo, page **hi)
{
    *lo = *hi = NULL;
    if (h->run_max == 1 || h->no_moves || h->st.idle_pages <= idle_keep(h))
        return 0; /* within the reserve (most calls): nothing to work out */
    const chunk *c = b->chunk;
    size_t first = page_at(h, b->addr - c->base), last = page_at(h, b->addr + size - 1 - c->base), n = 0, k;
    page *p = &c->pages[first], *q = &c->pages[last];
    int lo_shared = in_page(h, b->addr - c->base) != 0, hi_shared = in_page(h, b->addr + size - c->base) != 0;
    if (p->mapped && (k = cut_of(p - p->off, first - p->off, first, last, lo_shared || (first == last && hi_shared))))
        n += k, *lo = p - p->off;
    if (q->mapped && q - q->off != p - p->off && (k = cut_of(q - q->off, last - q->off, first, last, hi_shared)))
        n += k, *hi = q - q->off;
    return n;
}

/* A free block of at least `size`. Among the first few of size's own class
 * that fit, else of the next class that has any (all of those fit): the
 * one that needs the fewest pages mapped or made anew, then the smallest.
 * Bounded, so a long class list costs no more. */
static void consider(const drk_heap *h, block *b, size_t size, block **best, size_t *best_need)
{
    if (b->size < size)
        return;
    page *lo, *hi;
    size_t need = unmapped_in(h, b, size) + cuts(h, b, size, &lo, &hi);
    if (need < *best_need || (need == *best_need && b->size < (*best)->size))
        *best = b, *best_need = need;
}

/* A hole that needs pages mapped, or runs cut, is weighed against the
 * frontier (the free space ending the newest chunk, outside the class
 * lists looked at). Replayed (docs/memory.md), it takes alloc_frag's
 * driver time from 244 to 210 ms and the GPT trace's, stitching at once,
 * from 136 to 192 ms, at the same peak reserved: chosen with stranding,
 * before cuts; to be measured again on the GPU without it. */
static block *or_frontier(const drk_heap *h, size_t size, block *best, size_t best_need)
{
    block *f = h->chunks ? h->chunks->last : NULL;
    if (best_need && f && f != best && f->free)
        consider(h, f, size, &best, &best_need);
    return best;
}

static block *free_find(drk_heap *h, size_t size)
{
    int c = size_class(size), looked = 0;
    block *best = NULL;
    size_t best_need = SIZE_MAX;
    for (block *b = h->free_lists[c]; b && looked < 16; b = b->fnext, looked++)
        consider(h, b, size, &best, &best_need);
    if (best)
        return or_frontier(h, size, best, best_need);
    for (int w = (c + 1) / 64; w < (CLASSES + 63) / 64; w++) {
        uint64_t bits = h->nonempty[w];
        if (w == (c + 1) / 64)
            bits &= (c + 1) % 64 ? ~0ull << ((c + 1) % 64) : ~0ull;
        if (!bits)
            continue;
        looked = 0;
        for (block *b = h->free_lists[w * 64 + __builtin_ctzll(bits)]; b && looked < 16; b = b->fnext, looked++)
            consider(h, b, size, &best, &best_need);
        return or_frontier(h, size, best, best_need);
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

/* The idle lists hold the heads of runs no live block lies over, one list
 * a length class, oldest first: what can move or go back to the driver.
 * An idle page of a run that still has a live block over another of its
 * pages is reused only where it is. */
static int idle_class(size_t len)
{
    int c = 63 - __builtin_clzll((unsigned long long)len);
    return c < IDLE_CLASSES ? c : IDLE_CLASSES - 1;
}

static void idle_push(drk_heap *h, page *hd)
{
    int c = idle_class(hd->len);
    hd->inext = NULL;
    hd->iprev = h->idle_tail[c];
    if (h->idle_tail[c])
        h->idle_tail[c]->inext = hd;
    else
        h->idle_head[c] = hd;
    h->idle_tail[c] = hd;
    hd->listed = 1;
    h->idle_run_pages += hd->len;
}

static void idle_remove(drk_heap *h, page *hd)
{
    int c = idle_class(hd->len);
    if (hd->iprev)
        hd->iprev->inext = hd->inext;
    else
        h->idle_head[c] = hd->inext;
    if (hd->inext)
        hd->inext->iprev = hd->iprev;
    else
        h->idle_tail[c] = hd->iprev;
    hd->iprev = hd->inext = NULL;
    hd->listed = 0;
    h->idle_run_pages -= hd->len;
}

/* The oldest idle run of the longest class: the first to give back. */
static page *idle_longest(const drk_heap *h)
{
    for (int c = IDLE_CLASSES; c-- > 0;)
        if (h->idle_head[c])
            return h->idle_head[c];
    return NULL;
}

/* Spare runs: created and mapped nowhere. Room for `k` more; a run taken
 * from the array always fits back, so only growth past the old size can
 * fail. */
static int spare_room(drk_heap *h, size_t k)
{
    while (h->spare_cap - h->nspare < k) {
        size_t cap = h->spare_cap ? h->spare_cap * 2 : 64;
        spare_run *s = realloc(h->spare, cap * sizeof *s);
        if (!s)
            return -1;
        h->spare = s, h->spare_cap = cap;
    }
    return 0;
}

static void spare_put(drk_heap *h, spare_run s)
{
    h->spare[h->nspare++] = s;
    h->spare_pages += s.len;
}

static spare_run spare_pop(drk_heap *h, size_t i)
{
    spare_run s = h->spare[i];
    h->spare[i] = h->spare[--h->nspare];
    h->spare_pages -= s.len;
    return s;
}

/* The longest spare run of at most `want` pages, taken: 0 if none. */
static int spare_take(drk_heap *h, size_t want, spare_run *out)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < h->nspare; i++)
        if (h->spare[i].len <= want && (best == SIZE_MAX || h->spare[i].len > h->spare[best].len))
            best = i;
    if (best == SIZE_MAX)
        return 0;
    *out = spare_pop(h, best);
    return 1;
}

static int release_spare(drk_heap *h, size_t i)
{
    int r = h->pb->release(h->pb, h->spare[i].handle);
    if (r)
        return r;
    spare_run s = spare_pop(h, i);
    h->st.pages -= s.len;
    h->st.releases += s.len;
    return 0;
}

static chunk *chunk_of(const drk_heap *h, uintptr_t a);

/* Unmaps the idle run at `hd` from its hole, in one call: a spare now. */
static int run_to_spare(drk_heap *h, page *hd)
{
    chunk *c = chunk_of(h, hd->va);
    size_t len = hd->len;
    if (spare_room(h, 1) != 0)
        return DRK_PAGES_FAILED;
    int r = h->pb->unmap(h->pb, hd->va, len);
    h->st.unmap_calls++;
    if (r)
        return r;
    idle_remove(h, hd);
    spare_put(h, (spare_run){hd->handle, len});
    for (size_t k = 0; k < len; k++) {
        page *q = hd + k;
        q->mapped = 0;
        q->len = q->off = 0;
        if (q->ahead) {
            q->ahead = 0;
            h->st.ahead_pages--;
        }
    }
    hd->busy = 0;
    c->unmapped += len;
    top_unmapped(c, (size_t)(hd - c->pages), len);
    h->st.idle_pages -= len;
    return 0;
}

/* Unmaps the idle run at `hd` and releases it. */
static int give_back(drk_heap *h, page *hd)
{
    int r = run_to_spare(h, hd);
    return r ? r : release_spare(h, h->nspare - 1);
}

/* The longest idle run of at most `want` pages, as near as a bounded
 * look finds it: the fewest calls for a gap. Class by class from want's
 * own down, the oldest 64 of a class (every one when `all`) are looked at;
 * the first class holding one that fits gives its longest. */
static page *idle_pick(const drk_heap *h, size_t want, int all)
{
    page *best = NULL;
    for (int c = idle_class(want); !best && c >= 0; c--) {
        size_t looked = 0;
        for (page *p = h->idle_head[c]; p && (all || looked < 64) && !(best && best->len == want);
             p = p->inext, looked++)
            if (p->len <= want && (!best || p->len > best->len))
                best = p;
    }
    return best;
}

static int move_run(drk_heap *h, page *hd, spare_run *out)
{
    size_t len = hd->len;
    int r = run_to_spare(h, hd);
    if (r)
        return r;
    h->st.moves += len;
    h->st.move_calls++;
    *out = spare_pop(h, h->nspare - 1);
    return 0;
}

static int create_run(drk_heap *h, size_t n, spare_run *out)
{
    drk_page_handle nh;
    int r = n > 1 ? h->pb->create_run(h->pb, n, &nh) : h->pb->create(h->pb, &nh);
    if (r)
        return r;
    h->st.creates += n;
    h->st.create_calls++;
    h->st.grown += n;
    if ((h->st.pages += n) > h->st.peak_pages)
        h->st.peak_pages = h->st.pages;
    *out = (spare_run){nh, n};
    return 0;
}

/* The pages of a new run, `want` still to map in a gap of `gap` pages: up
 * to run_max where 32 or more are wanted, and the whole rest of a gap of
 * 64 or more; below that a quarter of what is wanted, single pages under
 * eight. Replayed with an H200's costs (docs/memory.md): alloc_frag's
 * trace spends 210 ms in the driver instead of 6.4 s with single pages, at
 * the same peak reserved; the GPT trace, whose holes are reused by smaller
 * blocks, stays at 2.4% over peak live stitching at once, as with single
 * pages. */
static size_t new_run(const drk_heap *h, size_t want, size_t gap)
{
    size_t n = want >= 32 || gap >= 64 ? want : want >= 8 ? want / 4 : 1;
    return n < h->run_max ? n : h->run_max;
}

/* Idle pages the heap keeps where they are, for holes to be reused at no
 * cost: a share of the pages under live data. */
static uint64_t idle_keep(const drk_heap *h)
{
    uint64_t share = (h->st.pages - h->st.idle_pages) * h->idle_permille / 1000;
    return share > h->idle_floor ? share : h->idle_floor;
}

/* A run of at most `want` pages for a gap of `gap` about to be mapped: a
 * spare; an idle run moved from its hole, when more pages are idle than
 * the heap keeps; a new one (new_run), one driver handle (what a call
 * costs hardly depends on its size); or, when the backend has no more
 * memory, idle runs moved after all, then spares and idle runs too long
 * for the gap given back to it so that a new one fits, then shorter new
 * ones. Moving before creating keeps the pages held close to the pages
 * live data touches. */
static int get_run(drk_heap *h, size_t want, size_t gap, spare_run *out)
{
    page *hd;
    if (spare_take(h, want, out))
        return 0;
    if (!h->no_moves && h->st.idle_pages > idle_keep(h) && h->idle_run_pages) {
        if ((hd = idle_pick(h, want, 0)))
            return move_run(h, hd, out);
        /* Every idle run is too long for the gap: the oldest goes back to the
         * driver and a new one is made to measure, so the pages held do
         * not grow. */
        if (!h->no_create)
            give_back(h, idle_longest(h));
    }
    if (h->no_create)
        return DRK_PAGES_OOM;
    size_t n = new_run(h, want, gap);
    for (;;) {
        int r = create_run(h, n, out);
        if (r != DRK_PAGES_OOM || h->no_moves)
            return r;
        if ((hd = idle_pick(h, want, 1)))
            return move_run(h, hd, out);
        if (h->nspare || h->idle_run_pages) {
            r = h->nspare ? release_spare(h, h->nspare - 1) : give_back(h, idle_longest(h));
            if (r)
                return r;
        } else if (n > 1) {
            n /= 2;
        } else {
            return DRK_PAGES_OOM;
        }
    }
}

/* Pages [at, at + s.len) of c now hold run s. */
static void run_mapped(drk_heap *h, chunk *c, size_t at, spare_run s)
{
    page *hd = &c->pages[at];
    uint32_t busy = 0;
    for (size_t k = 0; k < s.len; k++) {
        page *q = hd + k;
        q->handle = s.handle;
        q->mapped = 1;
        q->len = (uint32_t)s.len;
        q->off = (uint32_t)k;
        busy += q->refs > 0;
    }
    hd->busy = busy;
    top_mapped(c, at, s.len);
    h->st.idle_pages += s.len - busy;
    if (!busy)
        idle_push(h, hd);
}

/* Maps the unmapped pages among [first, last] of c, each gap with runs
 * that fit it, at most 64 runs a map call. */
static int map_range(drk_heap *h, chunk *c, size_t first, size_t last)
{
    if (!unmapped_span(c, first, last))
        return 0;
    for (size_t i = first; i <= last;) {
        size_t gap = 0;
        while (i + gap <= last && !c->pages[i + gap].mapped)
            gap++;
        if (!gap) {
            i++;
            continue;
        }
        for (const size_t whole = gap; gap;) {
            spare_run got[64];
            drk_page_handle hs[64];
            size_t n = 0, pages = 0;
            int r = spare_room(h, 64) ? DRK_PAGES_FAILED : 0;
            while (!r && n < 64 && pages < gap && (r = get_run(h, gap - pages, whole, &got[n])) == 0)
                hs[n] = got[n].handle, pages += got[n++].len;
            if (n) {
                int m = h->pb->map(h->pb, c->pages[i].va, hs, n);
                h->st.map_calls++;
                if (m) {
                    while (n)
                        spare_put(h, got[--n]); /* fits: room was made for 64 */
                    return m;
                }
                for (size_t k = 0, at = i; k < n; at += got[k++].len)
                    run_mapped(h, c, at, got[k]);
                c->unmapped -= pages;
                i += pages, gap -= pages;
            }
            if (r)
                return r;
        }
    }
    return 0;
}

/* Maps what block b lacks: a page it may share with a neighbour (its first
 * or last, where it does not start or end on a page boundary) gets a
 * handle of its own, so that runs lie under one block only. */
static int map_missing(drk_heap *h, const block *b, size_t first, size_t last)
{
    chunk *c = b->chunk;
    int lo_shared = in_page(h, b->addr - c->base) != 0, hi_shared = in_page(h, b->addr + b->size - c->base) != 0;
    int r = 0;
    if (lo_shared || first == last)
        r = map_range(h, c, first, first), first++;
    if (!r && first <= last && hi_shared)
        r = map_range(h, c, last, last), last--;
    if (!r && first <= last)
        r = map_range(h, c, first, last);
    return r;
}

/* Pages [first, last] gain or lose a live block over them. */
static void pages_ref(drk_heap *h, chunk *c, size_t first, size_t last)
{
    for (size_t i = first; i <= last; i++) {
        page *p = &c->pages[i];
        if (p->refs++ == 0 && p->mapped) {
            page *hd = p - p->off;
            h->st.idle_pages--;
            if (hd->busy++ == 0)
                idle_remove(h, hd);
        }
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
        if (--p->refs == 0 && p->mapped) {
            page *hd = p - p->off;
            h->st.idle_pages++;
            if (--hd->busy == 0)
                idle_push(h, hd);
        }
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
    h->run_max = pages->create_run ? DRK_HEAP_RUN_MAX : 1;
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
    /* Runs it would cover in part are cut first (cuts), then its pages
     * referenced, so that getting pages for it never takes one of its own
     * idle pages. */
    page *lo, *hi;
    int r = 0;
    if (cuts(h, b, b->size, &lo, &hi)) {
        if (lo && (r = give_back(h, lo)) == 0)
            h->st.cut_calls++;
        if (!r && hi && (r = give_back(h, hi)) == 0)
            h->st.cut_calls++;
        if (r) {
            uncarve(h, b);
            return r;
        }
    }
    pages_ref(h, b->chunk, first, last);
    r = map_missing(h, b, first, last);
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
         * place one), so each is an idle run of its own. */
        p->handle = handles[k];
        p->mapped = 1;
        p->len = 1, p->off = 0, p->busy = 0;
        c->unmapped--;
        top_mapped(c, h->claim_first + k, 1);
        p->ahead = 1;
        h->st.idle_pages++;
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
    /* Whole runs, longest first, none that would leave fewer than keep. */
    for (int c = IDLE_CLASSES; c-- > 0;)
        for (page *hd = h->idle_head[c]; hd && h->st.idle_pages > keep;) {
            page *next = hd->inext;
            if (hd->len <= h->st.idle_pages - keep && run_to_spare(h, hd) != 0)
                return;
            hd = next;
        }
    while (h->nspare && release_spare(h, h->nspare - 1) == 0) {
    }
}

drk_heap_stats drk_heap_get_stats(const drk_heap *h)
{
    drk_heap_stats st = h->st;
    st.spare_pages = h->spare_pages;
    st.idle_run_pages = h->idle_run_pages;
    return st;
}

void drk_heap_set_idle(drk_heap *h, unsigned permille) { h->idle_permille = permille; }

void drk_heap_set_run_max(drk_heap *h, size_t pages)
{
    h->run_max = pages > 1 && h->pb->create_run ? (pages < UINT32_MAX ? pages : UINT32_MAX) : 1;
}

uint64_t drk_heap_pages(const drk_heap *h) { return h->st.pages; }
uint64_t drk_heap_moves(const drk_heap *h) { return h->st.moves; }

void drk_heap_set_policy(drk_heap *h, unsigned permille, size_t floor_pages, int moves)
{
    h->idle_permille = permille;
    h->idle_floor = floor_pages;
    h->no_moves = !moves;
}

int drk_heap_block_runs(const drk_heap *h, uintptr_t ptr, drk_page_handle *handles, uint32_t *lens, size_t max,
                        size_t *n, uintptr_t *first_va)
{
    size_t j = live_index(&h->live, ptr);
    if (j == SIZE_MAX)
        return DRK_PAGES_INVALID;
    const block *b = h->live.slot[j];
    const page *pg = b->chunk->pages;
    size_t first, last;
    page_span(h, b, &first, &last);
    size_t i = first - pg[first].off;
    *first_va = pg[i].va;
    for (*n = 0; i <= last; i += pg[i].len, ++*n)
        if (*n < max) {
            handles[*n] = pg[i].handle;
            lens[*n] = pg[i].len;
        }
    return *n > max ? DRK_PAGES_OOM : 0;
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
            if (c->pages[i].mapped && !c->pages[i].off) {
                h->pb->unmap(h->pb, c->pages[i].va, c->pages[i].len);
                h->pb->release(h->pb, c->pages[i].handle);
            }
        h->pb->unreserve(h->pb, c->base, c->size);
        free(c->pages);
        free(c);
    }
    for (size_t i = 0; i < h->nspare; i++)
        h->pb->release(h->pb, h->spare[i].handle);
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
    uint64_t live, blocks, idle, mapped, ahead, listed;
} tally;

/* The run whose head is page i of c: whole, one handle, its busy count
 * and its place in the idle list as they should be. */
static int check_run(const chunk *c, size_t i, tally *t, char *err, size_t errlen)
{
    const page *hd = &c->pages[i];
    if (!hd->len || i + hd->len > c->npages)
        return bad(err, errlen, "page %#lx: a run of %u pages", (unsigned long)hd->va, hd->len);
    uint32_t busy = 0;
    for (size_t k = 0; k < hd->len; k++) {
        const page *q = hd + k;
        if (!q->mapped || q->handle != hd->handle || q->len != hd->len || q->off != k)
            return bad(err, errlen, "page %#lx: not page %zu of the run at %#lx (mapped %d, off %u, len %u)",
                       (unsigned long)q->va, k, (unsigned long)hd->va, q->mapped, q->off, q->len);
        busy += q->refs > 0;
    }
    if (busy != hd->busy || hd->listed != !busy)
        return bad(err, errlen, "run %#lx of %u pages: %u pages under blocks, its count says %u, listed %d",
                   (unsigned long)hd->va, hd->len, busy, hd->busy, hd->listed);
    t->listed += hd->listed ? hd->len : 0;
    return 0;
}

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
        if (p->mapped && !p->off && check_run(c, i, t, err, errlen))
            return -1;
        if (!p->mapped && p->listed)
            return bad(err, errlen, "page %#lx: listed idle, not mapped", (unsigned long)p->va);
        if (p->mapped && i >= c->top)
            return bad(err, errlen, "page %#lx: mapped at or past its chunk's top (page %zu)", (unsigned long)p->va,
                       c->top);
        t->mapped += p->mapped;
        t->idle += p->mapped && !p->refs;
        t->ahead += p->ahead;
    }
    if (unmapped != c->unmapped)
        return bad(err, errlen, "chunk %#lx: %zu pages unmapped, its count says %zu", (unsigned long)c->base, unmapped,
                   c->unmapped);
    if (c->top && !c->pages[c->top - 1].mapped)
        return bad(err, errlen, "chunk %#lx: its top (page %zu) is above an unmapped page", (unsigned long)c->base,
                   c->top);
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
    size_t spare = 0, listed = 0;
    for (size_t i = 0; i < h->nspare; i++)
        spare += h->spare[i].len;
    for (int c = 0; c < IDLE_CLASSES; c++)
        for (const page *p = h->idle_head[c]; p; p = p->inext) {
            if (idle_class(p->len) != c)
                return bad(err, errlen, "run %#lx of %u pages in idle list %d", (unsigned long)p->va, p->len, c);
            listed += p->listed ? p->len : 0;
        }
    if (t.idle != h->st.idle_pages || spare != h->spare_pages || t.mapped + spare != h->st.pages)
        return bad(err, errlen, "idle %llu (stats %llu); mapped %llu + spare %zu (count %zu) != pages %llu",
                   (unsigned long long)t.idle, (unsigned long long)h->st.idle_pages, (unsigned long long)t.mapped,
                   spare, h->spare_pages, (unsigned long long)h->st.pages);
    if (listed != t.listed || listed != h->idle_run_pages)
        return bad(err, errlen, "idle runs: %zu pages in the list, %llu listed, count %zu", listed,
                   (unsigned long long)t.listed, h->idle_run_pages);
    return 0;
}
