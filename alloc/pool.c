#include "alloc/pool.h"

#include "alloc/epochs.h"
#include "alloc/slab.h"

#include <stdlib.h>
#include <string.h>

/* Handles the legacy default stream has (CU_STREAM_LEGACY, and NULL as the
 * caller normalizes it). An event there waits for every blocking stream's
 * earlier work, per-thread default streams included. */
#define LEGACY_STREAM ((uintptr_t)0x1)

typedef struct batch batch;

typedef struct pend {
    uintptr_t ptr;
    size_t room;              /* the block's size in the heap: a reuse may ask up to this */
    struct pend *next, *prev; /* in its batch */
    batch *in;
    uint64_t stamp;           /* a free of the open epoch with shared epochs: its stamp */
    struct pend *hnext;
    /* Frees on a stream are also listed by size class, for that stream's
     * allocations to find at once (chead: the list's head, or NULL). */
    struct pend *cnext, *cprev, **chead;
} pend;

struct batch {
    struct batch *next; /* sealed: the FIFO it waits in */
    pend *blocks;
    size_t n;
    uint64_t opened_at; /* the pool's allocation count when it opened */
    size_t nev, room; /* events recorded; room for */
    uint64_t *ev;     /* one (a stream's batch) or one per stream (an epoch) */
    uint64_t ticket;  /* an epoch sealed by shared epochs: their ticket (no events of its own) */
    uint64_t last_free;    /* an open epoch with shared epochs: its newest free's stamp */
    uint64_t sync;         /* set aside for the program's wait for the device: that wait's mark */
};

/* Size classes of pending frees on a stream: one per power of two. */
#define CLASSES 64

typedef struct stream_state {
    uintptr_t stream;
    batch *open;
    batch *head, *tail; /* sealed, oldest first */
    pend **by_class;    /* its pending frees by size class; made at its first free */
} stream_state;

/* Pending records come from slabs (slab.h), so a free never calls malloc. */
#define SLAB_PENDS 2048
#define SLAB_BATCHES 256

struct drk_pool {
    drk_heap *heap;
    drk_slab pends, batches;
    uint64_t sealed;  /* sealed batches not yet given back */
    drk_pool_events ev;
    stream_state *streams;
    size_t nstreams, cap_streams;
    batch *epoch_open, *epoch_head, *epoch_tail;
    drk_epochs *shared; /* epochs sealed with the device's other pools, or NULL */
    uint64_t split_seen; /* the newest seal the open epoch was last split at (its place) */
    /* Its own epochs: a destroyed stream's work is behind no event, so no
     * epoch is sealed until the caller has waited for the stream (1), or
     * ever, the wait failed (2). */
    int epochs_held;
    /* A pool that seals no epochs: its open epochs set aside for the
     * program's waits for the device, oldest first (drk_pool_sync_begin). */
    batch *synced_head, *synced_tail;
    batch *spare_epochs; /* released epoch batches, kept for the next seals */
    size_t nspare_epochs;
    uint64_t allocs;
    pend **buckets; /* pending blocks by pointer */
    size_t nbuckets, npending;
    drk_pool_stats st;
};

/* ---- Pending records ---- */

static pend *pend_new(drk_pool *p) { return drk_slab_get(&p->pends); }

static void pend_del(drk_pool *p, pend *e) { drk_slab_put(&p->pends, e); }

static int class_of(size_t room) { return 63 - __builtin_clzll((unsigned long long)room); }

static void class_link(pend **head, pend *e)
{
    e->chead = head;
    e->cprev = NULL;
    e->cnext = *head;
    if (*head)
        (*head)->cprev = e;
    *head = e;
}

static void class_unlink(pend *e)
{
    if (!e->chead)
        return;
    if (e->cprev)
        e->cprev->cnext = e->cnext;
    else
        *e->chead = e->cnext;
    if (e->cnext)
        e->cnext->cprev = e->cprev;
    e->chead = NULL;
}

/* Takes `e` out of its batch, which stays where it is. */
static void batch_unlink(pend *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        e->in->blocks = e->next;
    if (e->next)
        e->next->prev = e->prev;
    e->in->n--;
}

/* ---- Pending blocks by pointer ---- */

static size_t bucket_of(const drk_pool *p, uintptr_t ptr)
{
    return (size_t)((ptr >> 9) * 0x9e3779b97f4a7c15ull) & (p->nbuckets - 1);
}

static int pend_index(drk_pool *p, pend *b)
{
    if (p->npending + 1 > p->nbuckets) {
        size_t n = p->nbuckets ? p->nbuckets * 2 : 256;
        pend **nb = calloc(n, sizeof *nb);
        if (!nb)
            return -1;
        for (size_t i = 0; i < p->nbuckets; i++)
            for (pend *e = p->buckets[i], *next; e; e = next) {
                next = e->hnext;
                size_t j = (size_t)((e->ptr >> 9) * 0x9e3779b97f4a7c15ull) & (n - 1);
                e->hnext = nb[j];
                nb[j] = e;
            }
        free(p->buckets);
        p->buckets = nb, p->nbuckets = n;
    }
    size_t j = bucket_of(p, b->ptr);
    b->hnext = p->buckets[j];
    p->buckets[j] = b;
    p->npending++;
    return 0;
}

static int is_pending(const drk_pool *p, uintptr_t ptr)
{
    if (!p->nbuckets)
        return 0;
    for (const pend *e = p->buckets[bucket_of(p, ptr)]; e; e = e->hnext)
        if (e->ptr == ptr)
            return 1;
    return 0;
}

static void pend_unindex(drk_pool *p, const pend *b)
{
    for (pend **e = &p->buckets[bucket_of(p, b->ptr)]; *e; e = &(*e)->hnext)
        if (*e == b) {
            *e = b->hnext;
            p->npending--;
            return;
        }
}

/* ---- Streams ---- */

static stream_state *stream_find(drk_pool *p, uintptr_t s)
{
    for (size_t i = 0; i < p->nstreams; i++)
        if (p->streams[i].stream == s)
            return &p->streams[i];
    return NULL;
}

static stream_state *stream_get(drk_pool *p, uintptr_t s)
{
    stream_state *st = stream_find(p, s);
    if (st)
        return st;
    if (p->nstreams == p->cap_streams) {
        size_t n = p->cap_streams ? p->cap_streams * 2 : 16;
        stream_state *ns = realloc(p->streams, n * sizeof *ns);
        if (!ns)
            return NULL;
        p->streams = ns, p->cap_streams = n;
    }
    st = &p->streams[p->nstreams++];
    *st = (stream_state){.stream = s};
    return st;
}

/* ---- Batches ---- */

/* A batch with room for `nev` events: one-event batches (every stream's,
 * and the open epoch) from a slab, for they come and go with the frees;
 * sealed epochs, one event per stream, from a few kept from earlier epochs
 * (so sealing calls malloc only when streams were added), else malloc. */
#define SPARE_EPOCHS 8

/* A kept epoch batch with room for `nev` events, or NULL. Kept ones too
 * small for today's streams will never fit again: they go. */
static batch *spare_take(drk_pool *p, size_t nev)
{
    while (p->spare_epochs) {
        batch *b = p->spare_epochs;
        p->spare_epochs = b->next;
        p->nspare_epochs--;
        if (b->room >= nev) {
            size_t room = b->room;
            memset(b, 0, sizeof *b);
            b->room = room;
            return b;
        }
        free(b);
    }
    return NULL;
}

static batch *batch_new(drk_pool *p, size_t nev)
{
    batch *b;
    if (nev == 1) {
        if ((b = drk_slab_get(&p->batches)) != NULL)
            b->room = 1;
    } else if ((b = spare_take(p, nev)) == NULL && (b = calloc(1, sizeof *b + nev * sizeof(uint64_t))) != NULL) {
        b->room = nev;
        p->st.epoch_mallocs++;
    }
    if (b)
        b->ev = (uint64_t *)(b + 1);
    return b;
}

static void batch_del(drk_pool *p, batch *b, size_t nev)
{
    if (nev == 1)
        drk_slab_put(&p->batches, b);
    else if (p->nspare_epochs < SPARE_EPOCHS && (!p->spare_epochs || b->room >= p->spare_epochs->room)) {
        b->next = p->spare_epochs; /* the roomiest first */
        p->spare_epochs = b;
        p->nspare_epochs++;
    } else
        free(b);
}

/* Gives a completed batch's blocks back to the heap. */
static size_t batch_release(drk_pool *p, batch *b)
{
    size_t n = 0;
    for (pend *e = b->blocks, *next; e; e = next) {
        next = e->next;
        pend_unindex(p, e);
        class_unlink(e);
        drk_heap_free(p->heap, e->ptr);
        p->st.pending_blocks--;
        p->st.pending_bytes -= e->room;
        pend_del(p, e);
        n++;
    }
    for (size_t i = 0; i < b->nev; i++)
        p->ev.release(p->ev.ctx, b->ev[i]);
    batch_del(p, b, b->room);
    return n;
}

/* Whether every event of a sealed batch has completed (errors count as not:
 * the block stays out of the heap rather than risk a reuse). */
static int batch_done(drk_pool *p, const batch *b, int wait)
{
    if (b->ticket)
        return drk_epochs_done(p->shared, b->ticket, wait) == 1;
    for (size_t i = 0; i < b->nev; i++) {
        if (wait && p->ev.wait(p->ev.ctx, b->ev[i]) != 0)
            return 0;
        if (!wait && p->ev.query(p->ev.ctx, b->ev[i]) != 1)
            return 0;
    }
    return 1;
}

static void fifo_push(batch **head, batch **tail, batch *b)
{
    if (*tail)
        (*tail)->next = b;
    else
        *head = b;
    *tail = b;
}

/* Seals a stream's open batch with an event recorded on it now. */
static int seal_stream(drk_pool *p, stream_state *s)
{
    batch *b = s->open;
    if (!b)
        return 0;
    if (p->ev.record(p->ev.ctx, s->stream, &b->ev[0]) != 0)
        return -1;
    b->nev = 1;
    p->st.events++;
    p->st.batches++;
    p->sealed++;
    s->open = NULL;
    fifo_push(&s->head, &s->tail, b);
    return 0;
}

static void epoch_queue(drk_pool *p, batch *sealed)
{
    p->st.epochs++;
    p->sealed++;
    for (pend *e = sealed->blocks; e; e = e->next)
        e->in = sealed;
    fifo_push(&p->epoch_head, &p->epoch_tail, sealed);
}

static void epoch_append(drk_pool *p, batch *sealed)
{
    epoch_queue(p, sealed);
    p->epoch_open = NULL;
}

/* Held back, the open epoch's frees made before the newest seal began are
 * covered by it: they take its ticket in a batch of their own. Shared only
 * whole, a batch whose pool went on freeing never came before another's
 * seal: its frees waited for a seal of its own, which the gap held back
 * until the pool ran short and sealed at once (on the stand-in, 8 threads'
 * cuMemFree: a fifth of the seals were such). Looked at once a seal. Its
 * frees are newest first, their stamps never rising. */
static void split_covered(drk_pool *p)
{
    batch *b = p->epoch_open;
    uint64_t ord, ticket;
    if (!b || !drk_epochs_newest(p->shared, p->split_seen, &ord, &ticket))
        return;
    p->split_seen = ord;
    pend *e = b->blocks;
    while (e && e->stamp >= ord)
        e = e->next;
    if (!e || e == b->blocks)
        return; /* none covered; or all, which the seal itself gives */
    batch *c = batch_new(p, 1);
    if (!c)
        return;
    size_t n = 0;
    for (pend *x = e; x; x = x->next)
        n++;
    e->prev->next = NULL;
    e->prev = NULL;
    c->blocks = e, c->n = n, c->ticket = ticket, c->last_free = e->stamp;
    b->n -= n;
    epoch_queue(p, c);
    p->st.epochs_split++;
}

/* Seals the open epoch with an event on the legacy stream (which waits for
 * every blocking stream) and one on each created stream; with shared
 * epochs, by their ticket, which a seal that is not `urgent` may leave for
 * later (the batch stays open). */
static int seal_epoch(drk_pool *p, int urgent)
{
    batch *b = p->epoch_open;
    if (!b)
        return 0;
    if (p->epochs_held)
        return -1;
    if (p->shared) {
        uint64_t ticket;
        int r = drk_epochs_seal(p->shared, p, b->last_free, urgent, &ticket);
        if (r == 1)
            split_covered(p);
        if (r != 0)
            return r < 0 ? -1 : 0;
        b->ticket = ticket;
        epoch_append(p, b);
        return 0;
    }
    batch *sealed = batch_new(p, p->nstreams + 1);
    if (!sealed)
        return -1;
    sealed->blocks = b->blocks, sealed->n = b->n;
    int r = p->ev.record(p->ev.ctx, LEGACY_STREAM, &sealed->ev[sealed->nev]);
    sealed->nev += r == 0;
    for (size_t i = 0; r == 0 && i < p->nstreams; i++)
        if (p->streams[i].stream != LEGACY_STREAM && (r = p->ev.record(p->ev.ctx, p->streams[i].stream,
                                                                         &sealed->ev[sealed->nev])) == 0)
            sealed->nev++;
    if (r != 0) {
        for (size_t i = 0; i < sealed->nev; i++)
            p->ev.release(p->ev.ctx, sealed->ev[i]);
        batch_del(p, sealed, sealed->room);
        return -1;
    }
    p->st.events += sealed->nev;
    batch_del(p, b, b->room);
    epoch_append(p, sealed);
    return 0;
}

/* Releases the completed batches at the head of one FIFO; `wait_one`
 * waits for the first that gives blocks back (a stream's batch whose frees
 * were all reused on their stream gives none: flushes and waits for memory
 * took it for a failed event and stopped, frees behind it still pending). */
static size_t reclaim_fifo(drk_pool *p, batch **head, batch **tail, int wait_one)
{
    size_t n = 0;
    while (*head && batch_done(p, *head, wait_one)) {
        batch *b = *head;
        *head = b->next;
        if (!*head)
            *tail = NULL;
        p->sealed--;
        n += batch_release(p, b);
        wait_one = wait_one && !n;
    }
    return n;
}

size_t drk_pool_reclaim(drk_pool *p)
{
    size_t n = reclaim_fifo(p, &p->epoch_head, &p->epoch_tail, 0);
    for (size_t i = 0; i < p->nstreams; i++)
        n += reclaim_fifo(p, &p->streams[i].head, &p->streams[i].tail, 0);
    return n;
}

/* Pages are short: seal everything open and give back what has completed,
 * without waiting. 1 if blocks went back. */
static int reclaim_soft(drk_pool *p)
{
    seal_epoch(p, 1);
    for (size_t i = 0; i < p->nstreams; i++)
        seal_stream(p, &p->streams[i]);
    return drk_pool_reclaim(p) > 0;
}

/* Memory is short: seal everything open, then wait for the oldest pending
 * batch of each FIFO. 1 if that gave blocks back, 0 if nothing is pending. */
static int reclaim_hard(drk_pool *p)
{
    seal_epoch(p, 1);
    for (size_t i = 0; i < p->nstreams; i++)
        seal_stream(p, &p->streams[i]);
    size_t n = drk_pool_reclaim(p);
    if (n)
        return 1;
    if (p->epoch_head) {
        p->st.waits++;
        n += reclaim_fifo(p, &p->epoch_head, &p->epoch_tail, 1);
    }
    for (size_t i = 0; i < p->nstreams; i++)
        if (p->streams[i].head) {
            p->st.waits++;
            n += reclaim_fifo(p, &p->streams[i].head, &p->streams[i].tail, 1);
        }
    return n > 0;
}

size_t drk_pool_flush(drk_pool *p)
{
    seal_epoch(p, 1);
    for (size_t i = 0; i < p->nstreams; i++)
        seal_stream(p, &p->streams[i]);
    size_t n = 0;
    while (p->epoch_head) {
        size_t k = reclaim_fifo(p, &p->epoch_head, &p->epoch_tail, 1);
        if (!k && p->epoch_head)
            break; /* an event failed: its blocks stay out */
        n += k;
    }
    for (size_t i = 0; i < p->nstreams; i++)
        while (p->streams[i].head) {
            size_t k = reclaim_fifo(p, &p->streams[i].head, &p->streams[i].tail, 1);
            if (!k && p->streams[i].head)
                break; /* an event failed: its blocks stay out */
            n += k;
        }
    return n;
}

/* ---- The pool ---- */

drk_pool *drk_pool_new(drk_heap *heap, const drk_pool_events *events)
{
    if (!heap || !events || !events->record || !events->query || !events->wait || !events->release)
        return NULL;
    drk_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->heap = heap;
    drk_slab_init(&p->pends, sizeof(pend), SLAB_PENDS);
    drk_slab_init(&p->batches, sizeof(batch) + sizeof(uint64_t), SLAB_BATCHES);
    p->ev = *events;
    if (!stream_get(p, LEGACY_STREAM)) {
        free(p);
        return NULL;
    }
    return p;
}

void drk_pool_share_epochs(drk_pool *p, drk_epochs *e) { p->shared = e; }

int drk_pool_stream_created(drk_pool *p, uintptr_t stream)
{
    if (stream_get(p, stream))
        return 0;
    drk_pool_stream_lost(p); /* its own epochs would complete without the stream's work */
    return DRK_PAGES_FAILED;
}

static void drop_batch(drk_pool *p, batch *b);

/* A destroyed stream's pending frees wait for its last event (the driver
 * finishes its work first); its open batch is sealed before it goes. So is
 * the open epoch, where the pool seals its own, empty if need be: a free
 * made before the destroy, or after it (the driver's cuMemFree would wait
 * for the stream's work too), may still wait for the stream's work, which
 * goes on after the destroy, and later epochs record nothing there; they
 * are given back only after this one. With shared epochs,
 * drk_epochs_stream_destroyed sees to it. What cannot be sealed (no event)
 * is kept out of the heap for good rather than risk a reuse. */
int drk_pool_stream_destroyed(drk_pool *p, uintptr_t stream)
{
    stream_state *s = stream_find(p, stream);
    if (!s || stream == LEGACY_STREAM)
        return 0;
    int rc = 0;
    if (!p->shared) {
        if (!p->epoch_open && (p->epoch_open = batch_new(p, 1)) != NULL)
            p->epoch_open->opened_at = p->allocs;
        if (!p->epoch_open || seal_epoch(p, 1) != 0) {
            if (p->epoch_open)
                drop_batch(p, p->epoch_open);
            p->epoch_open = NULL;
            if (!p->epochs_held)
                p->epochs_held = 1; /* 2 stays: a wait failed before */
            rc = -1;
        }
    }
    if (seal_stream(p, s) != 0) {
        drop_batch(p, s->open);
        s->open = NULL;
    }
    while (s->head) {
        if (!batch_done(p, s->head, 1))
            break; /* the event failed: leave the blocks out of the heap */
        batch *b = s->head;
        s->head = b->next;
        p->sealed--;
        batch_release(p, b);
    }
    if (!s->head) { /* else kept, so its blocks stay accounted for */
        free(s->by_class);
        *s = p->streams[--p->nstreams];
    }
    return rc;
}

void drk_pool_stream_waited(drk_pool *p, int idle)
{
    if (p->epochs_held == 1)
        p->epochs_held = idle ? 0 : 2;
}

void drk_pool_stream_lost(drk_pool *p)
{
    if (!p->shared)
        p->epochs_held = 2;
}

/* A block freed on `s`, still pending, that can hold `size` bytes without
 * wasting more than an eighth of it: stream order makes it safe on `s` at
 * once. Looks at the newest SAME_STREAM_LOOK frees of the two size classes
 * where such a block can be. Up to half wasted, the traces replayed as the
 * pool runs (`drk trace replay`, model drk-pool, H200's reserve) peaked
 * 4-9% higher: GPT with cudaMallocAsync 1.35 against 1.24 GiB, the
 * synthetic GPT 29.2 against 28.0 GiB, with more driver time too. */
#define SAME_STREAM_LOOK 8

static pend *take_same_stream(drk_pool *p, stream_state *s, size_t size)
{
    if (!s->by_class)
        return NULL;
    size_t need = (size + DRK_HEAP_ALIGN - 1) / DRK_HEAP_ALIGN * DRK_HEAP_ALIGN;
    int c = class_of(need);
    for (int k = c; k <= c + 1 && k < CLASSES; k++) {
        int looked = 0;
        for (pend *b = s->by_class[k]; b && looked < SAME_STREAM_LOOK; b = b->cnext, looked++)
            if (b->room >= size && b->room - b->room / 8 <= size) {
                class_unlink(b);
                batch_unlink(b);
                pend_unindex(p, b);
                p->st.pending_blocks--;
                p->st.pending_bytes -= b->room;
                return b;
            }
    }
    return NULL;
}

/* A batch left open this many allocations is sealed, so that frees on a
 * quiet stream do not stay out of everyone else's reach. */
#define SEAL_AFTER 32
#define STALE_EVERY 16
#define RECLAIM_EVERY 64

static void seal_stale(drk_pool *p)
{
    if (p->epoch_open && p->allocs - p->epoch_open->opened_at >= SEAL_AFTER)
        seal_epoch(p, 0);
    for (size_t i = 0; i < p->nstreams; i++)
        if (p->streams[i].open && p->allocs - p->streams[i].open->opened_at >= SEAL_AFTER)
            seal_stream(p, &p->streams[i]);
}

static void live_add(drk_pool *p, size_t size)
{
    p->st.live_bytes += size;
    if (p->st.live_bytes > p->st.peak_live_bytes)
        p->st.peak_live_bytes = p->st.live_bytes;
}

int drk_pool_alloc(drk_pool *p, size_t size, uintptr_t stream, int has_stream, uintptr_t *ptr)
{
    if (!size)
        return DRK_PAGES_INVALID;
    /* Stale batches and completed events are looked at every few
     * allocations, not each: an event query costs more than ten
     * allocations. Before pages are made, completed ones are looked at
     * anyway (below). */
    uint64_t n = p->allocs++;
    if ((n & (STALE_EVERY - 1)) == 0)
        seal_stale(p);
    if ((n & (RECLAIM_EVERY - 1)) == 0 && p->sealed)
        drk_pool_reclaim(p);
    stream_state *s = has_stream ? stream_get(p, stream) : NULL;
    if (s) {
        pend *b = take_same_stream(p, s, size);
        if (b) {
            *ptr = b->ptr;
            pend_del(p, b);
            drk_heap_resize(p->heap, *ptr, size);
            drk_heap_set_tag(p->heap, *ptr, 1);
            p->st.same_stream_reuses++;
            live_add(p, size);
            return 0;
        }
    }
    /* Before a new page is made, frees whose work is done give theirs. */
    int r = drk_heap_alloc_existing(p->heap, size, ptr);
    if (r == DRK_PAGES_OOM && p->st.pending_blocks && reclaim_soft(p))
        r = drk_heap_alloc_existing(p->heap, size, ptr);
    while (r == DRK_PAGES_OOM) {
        r = drk_heap_alloc(p->heap, size, ptr);
        if (r != DRK_PAGES_OOM || !reclaim_hard(p))
            break;
    }
    if (r == 0) {
        live_add(p, size);
        if (has_stream)
            drk_heap_set_tag(p->heap, *ptr, 1);
    }
    return r;
}

int drk_pool_free(drk_pool *p, uintptr_t ptr, uintptr_t stream, int has_stream)
{
    size_t asked;
    if (drk_heap_block_size(p->heap, ptr, &asked) != 0 || is_pending(p, ptr))
        return DRK_PAGES_INVALID;
    stream_state *s = has_stream ? stream_get(p, stream) : NULL;
    batch **open = s ? &s->open : &p->epoch_open;
    if (!*open) {
        if (!(*open = batch_new(p, 1)))
            return DRK_PAGES_FAILED;
        (*open)->opened_at = p->allocs;
    }
    pend *b = pend_new(p);
    if (!b)
        return DRK_PAGES_FAILED;
    b->ptr = ptr;
    if (pend_index(p, b) != 0) {
        pend_del(p, b);
        return DRK_PAGES_FAILED;
    }
    b->room = (asked + DRK_HEAP_ALIGN - 1) / DRK_HEAP_ALIGN * DRK_HEAP_ALIGN;
    p->st.live_bytes -= asked;
    b->in = *open;
    if (!s && p->shared)
        (*open)->last_free = b->stamp = drk_epochs_stamp(p->shared);
    b->next = (*open)->blocks;
    if (b->next)
        b->next->prev = b;
    (*open)->blocks = b;
    /* Without room for its index, a stream's frees wait for their event. */
    if (s && !s->by_class)
        s->by_class = calloc(CLASSES, sizeof *s->by_class);
    if (s && s->by_class)
        class_link(&s->by_class[class_of(b->room)], b);
    p->st.pending_blocks++;
    p->st.pending_bytes += b->room;
    /* An epoch held back (shared epochs) is asked again every 16 frees, not
     * at each: asking reads the clock (on the stand-in, 8 threads' frees
     * spent two thirds of the heap's allocation time there). */
    size_t n = ++(*open)->n;
    if (n >= DRK_POOL_BATCH && (s || !p->shared || n % 16 == 0)) {
        if (s)
            seal_stream(p, s);
        else
            seal_epoch(p, 0);
    }
    return 0;
}

/* Whether the pool's cuMemFree'd blocks wait for seals that will never
 * come: its own epochs stopped (a destroyed stream's wait failed, a stream
 * it could not list), or the shared ones. */
static int seals_stopped(drk_pool *p)
{
    return p->shared ? drk_epochs_stopped(p->shared) : p->epochs_held != 0;
}

int drk_pool_sync_begin(drk_pool *p, uint64_t mark)
{
    batch *b = p->epoch_open;
    if (!b || !b->n || !seals_stopped(p))
        return p->synced_head != NULL;
    p->epoch_open = NULL;
    b->sync = mark;
    b->next = NULL;
    fifo_push(&p->synced_head, &p->synced_tail, b);
    return 1;
}

size_t drk_pool_sync_end(drk_pool *p, uint64_t mark)
{
    size_t n = 0;
    batch **at = &p->synced_head, *last = NULL;
    while (*at) {
        batch *b = *at;
        if (b->sync > mark) { /* another thread's wait, begun later */
            last = b;
            at = &b->next;
            continue;
        }
        *at = b->next;
        n += batch_release(p, b);
    }
    p->synced_tail = last;
    p->st.sync_reclaims += n;
    return n;
}

drk_pool_stats drk_pool_get_stats(const drk_pool *p) { return p->st; }

uint64_t drk_pool_live_bytes(const drk_pool *p) { return p->st.live_bytes; }

/* Forgets a batch whose blocks cannot be proven idle: they stay allocated
 * in the heap, never handed out again. */
static void drop_batch(drk_pool *p, batch *b)
{
    for (pend *e = b->blocks, *next; e; e = next) {
        next = e->next;
        pend_unindex(p, e);
        class_unlink(e);
        p->st.pending_blocks--;
        p->st.pending_bytes -= e->room;
        pend_del(p, e);
    }
    for (size_t i = 0; i < b->nev; i++)
        p->ev.release(p->ev.ctx, b->ev[i]);
    batch_del(p, b, b->room);
}

/* Waits for every batch of a FIFO, giving back what completes. */
static void drain(drk_pool *p, batch **head, batch **tail)
{
    while (*head) {
        batch *b = *head;
        *head = b->next;
        p->sealed--;
        if (batch_done(p, b, 1))
            batch_release(p, b);
        else
            drop_batch(p, b);
    }
    *tail = NULL;
}

void drk_pool_delete(drk_pool *p)
{
    if (!p)
        return;
    seal_epoch(p, 1);
    for (size_t i = 0; i < p->nstreams; i++)
        seal_stream(p, &p->streams[i]);
    drain(p, &p->epoch_head, &p->epoch_tail);
    for (size_t i = 0; i < p->nstreams; i++)
        drain(p, &p->streams[i].head, &p->streams[i].tail);
    /* A batch still open could not be sealed (no event): its blocks stay. */
    if (p->epoch_open)
        drop_batch(p, p->epoch_open);
    while (p->synced_head) {
        batch *b = p->synced_head;
        p->synced_head = b->next;
        drop_batch(p, b);
    }
    for (size_t i = 0; i < p->nstreams; i++)
        if (p->streams[i].open)
            drop_batch(p, p->streams[i].open);
    for (size_t i = 0; i < p->nstreams; i++)
        free(p->streams[i].by_class);
    free(p->streams);
    free(p->buckets);
    while (p->spare_epochs) {
        batch *b = p->spare_epochs;
        p->spare_epochs = b->next;
        free(b);
    }
    drk_slab_fini(&p->pends);
    drk_slab_fini(&p->batches);
    free(p);
}

int drk_pool_lookup(const drk_pool *p, uintptr_t ptr, uintptr_t *base, size_t *size, uint64_t *serial,
                    int *async)
{
    unsigned tag = 0;
    if (drk_heap_lookup(p->heap, ptr, base, size, serial, &tag) != 0 || is_pending(p, *base))
        return DRK_PAGES_INVALID;
    if (async)
        *async = (int)tag;
    return 0;
}
