/* The stream-ordered pool (alloc/pool.c) with events the test completes by
 * hand: a block freed on a stream is reused at once on that stream, never
 * elsewhere before its event completes; a cuMemFree'd block waits for an
 * event on every stream; out of memory waits for pending frees. A random
 * run checks that no allocation ever overlaps a block still pending for
 * another stream. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc/epochs.h"
#include "alloc/pool.h"
#include "tests/unit/check.h"
#include "tests/unit/fail_realloc.h"

#define MIB ((size_t)1 << 20)
#define LEGACY ((uintptr_t)1)

/* ---- Events: per stream, a sequence recorded and a sequence done ---- */

enum { NSTREAMS = 16 };

typedef struct fake_events {
    uintptr_t stream[NSTREAMS];
    uint64_t recorded[NSTREAMS], done[NSTREAMS];
    int n, waits, outstanding;
} fake_events;

static fake_events fev;

static int sidx(uintptr_t s)
{
    for (int i = 0; i < fev.n; i++)
        if (fev.stream[i] == s)
            return i;
    fev.stream[fev.n] = s;
    return fev.n++;
}

static int ev_record(void *ctx, uintptr_t s, uint64_t *ev)
{
    (void)ctx;
    int i = sidx(s);
    *ev = (uint64_t)i << 32 | ++fev.recorded[i];
    fev.outstanding++;
    return 0;
}

static int ev_query(void *ctx, uint64_t ev)
{
    (void)ctx;
    return (ev & 0xffffffffu) <= fev.done[ev >> 32];
}

static int ev_wait(void *ctx, uint64_t ev)
{
    (void)ctx;
    uint64_t *d = &fev.done[ev >> 32];
    if (*d < (ev & 0xffffffffu))
        *d = ev & 0xffffffffu;
    fev.waits++;
    return 0;
}

static void ev_release(void *ctx, uint64_t ev)
{
    (void)ctx, (void)ev;
    fev.outstanding--;
}

/* The stream's work so far is done. */
static void complete(uintptr_t s) { fev.done[sidx(s)] = fev.recorded[sidx(s)]; }

static const drk_pool_events events = {NULL, ev_record, ev_query, ev_wait, ev_release};

typedef struct rig {
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *pool;
} rig;

static rig rig_new(size_t capacity_pages)
{
    memset(&fev, 0, sizeof fev);
    rig r = {drk_pages_counting(2 * MIB, capacity_pages), NULL, NULL};
    r.heap = r.pages ? drk_heap_new(r.pages, 1024 * 2 * MIB) : NULL;
    r.pool = r.heap ? drk_pool_new(r.heap, &events) : NULL;
    return r;
}

static void rig_end(rig *r)
{
    drk_pool_delete(r->pool);
    CHECK(fev.outstanding == 0); /* every event released */
    drk_heap_delete(r->heap);
    r->pages->destroy(r->pages);
}

static void test_same_stream(void)
{
    rig r = rig_new(64);
    CHECK(r.pool != NULL);
    uintptr_t a, b, c;
    CHECK(drk_pool_alloc(r.pool, 1000, 0x10, 1, &a) == 0);
    CHECK(drk_pool_free(r.pool, a, 0x10, 1) == 0);
    /* Pending on 0x10: at once on 0x10, not on 0x20. */
    CHECK(drk_pool_alloc(r.pool, 1000, 0x20, 1, &b) == 0 && b != a);
    CHECK(drk_pool_alloc(r.pool, 900, 0x10, 1, &c) == 0 && c == a);
    CHECK(drk_pool_get_stats(r.pool).same_stream_reuses == 1 && fev.recorded[sidx(0x10)] == 0);
    uintptr_t base;
    size_t size;
    CHECK(drk_heap_find(r.heap, a + 899, &base, &size) == 0 && base == a && size == 900);
    /* A block much larger than asked is not taken: it would waste half. */
    CHECK(drk_pool_free(r.pool, c, 0x10, 1) == 0);
    CHECK(drk_pool_alloc(r.pool, 100, 0x10, 1, &c) == 0 && c != a);
    /* Nor one that would waste a quarter (more than an eighth): 8 MiB
     * pending serves 7.5 MiB, not 6. */
    uintptr_t big, x;
    CHECK(drk_pool_alloc(r.pool, 8 * MIB, 0x10, 1, &big) == 0 && drk_pool_free(r.pool, big, 0x10, 1) == 0);
    CHECK(drk_pool_alloc(r.pool, 6 * MIB, 0x10, 1, &x) == 0 && x != big);
    CHECK(drk_pool_alloc(r.pool, 15 * MIB / 2, 0x10, 1, &x) == 0 && x == big);
    rig_end(&r);
}

static void test_cross_stream(void)
{
    rig r = rig_new(64);
    uintptr_t a, b;
    CHECK(drk_pool_alloc(r.pool, MIB, 0x10, 1, &a) == 0);
    CHECK(drk_pool_free(r.pool, a, 0x10, 1) == 0);
    /* After SEAL_AFTER allocations the batch is sealed with an event on
     * 0x10; until that completes, 0x20 never gets the block. */
    for (int i = 0; i < 40; i++) {
        CHECK(drk_pool_alloc(r.pool, MIB, 0x20, 1, &b) == 0 && b != a);
        CHECK(drk_pool_free(r.pool, b, 0x20, 1) == 0);
        complete(0x20);
    }
    CHECK(fev.recorded[sidx(0x10)] == 1 && drk_pool_get_stats(r.pool).pending_blocks >= 1);
    complete(0x10);
    CHECK(drk_pool_reclaim(r.pool) >= 1);
    CHECK(drk_pool_alloc(r.pool, MIB, 0x30, 1, &b) == 0); /* any block now */
    rig_end(&r);
}

static void test_epoch(void)
{
    rig r = rig_new(256); /* room for every block below: no out-of-memory wait */
    CHECK(drk_pool_stream_created(r.pool, 0x10) == 0 && drk_pool_stream_created(r.pool, 0x20) == 0);
    uintptr_t x, y;
    CHECK(drk_pool_alloc(r.pool, 4 * MIB, 0, 0, &x) == 0);
    CHECK(drk_pool_free(r.pool, x, 0, 0) == 0);
    CHECK(drk_pool_free(r.pool, x, 0, 0) == DRK_PAGES_INVALID); /* pending: freed already */
    for (int i = 0; i < 40; i++) {
        CHECK(drk_pool_alloc(r.pool, 4 * MIB, 0, 0, &y) == 0 && y != x);
        CHECK(drk_pool_free(r.pool, y, 0x10, 1) == 0);
    }
    /* The epoch was sealed with events on the legacy stream and both
     * created ones; two of three done is not enough. */
    CHECK(fev.recorded[sidx(LEGACY)] == 1 && fev.recorded[sidx(0x20)] >= 1);
    complete(LEGACY);
    complete(0x10);
    drk_pool_reclaim(r.pool);
    CHECK(drk_pool_get_stats(r.pool).pending_bytes >= 4 * MIB);
    complete(0x20);
    drk_pool_reclaim(r.pool);
    CHECK(drk_pool_get_stats(r.pool).epochs == 1);
    rig_end(&r);
}

/* Sealing epoch after epoch reuses the records of completed ones: once a
 * few are made (as many as are pending at once), no more malloc, and a few
 * more when a stream is added. */
static void test_epoch_records_reused(void)
{
    rig r = rig_new(256);
    CHECK(drk_pool_stream_created(r.pool, 0x10) == 0);
    uintptr_t x;
    uint64_t warm = 0, warm_epochs = 0;
    for (int i = 0; i < 3000; i++) {
        CHECK(drk_pool_alloc(r.pool, 4096, 0, 0, &x) == 0);
        CHECK(drk_pool_free(r.pool, x, 0, 0) == 0);
        complete(LEGACY);
        complete(0x10);
        complete(0x20);
        if (i == 1000)
            CHECK(drk_pool_stream_created(r.pool, 0x20) == 0);
        if (i == 2000)
            warm = drk_pool_get_stats(r.pool).epoch_mallocs, warm_epochs = drk_pool_get_stats(r.pool).epochs;
    }
    drk_pool_stats st = drk_pool_get_stats(r.pool);
    fprintf(stderr, "pool epochs: %llu sealed, %llu records from malloc (%llu of the last %llu)\n",
            (unsigned long long)st.epochs, (unsigned long long)st.epoch_mallocs,
            (unsigned long long)(st.epoch_mallocs - warm), (unsigned long long)(st.epochs - warm_epochs));
    CHECK(st.epochs >= 80 && st.epochs - warm_epochs >= 25 && st.epoch_mallocs == warm && warm <= 8);
    rig_end(&r);
}

static void test_oom_waits(void)
{
    rig r = rig_new(4); /* 8 MiB */
    uintptr_t a[4], b;
    for (int i = 0; i < 4; i++)
        CHECK(drk_pool_alloc(r.pool, 2 * MIB, 0, 0, &a[i]) == 0);
    CHECK(drk_pool_alloc(r.pool, 1, 0x20, 1, &b) == DRK_PAGES_OOM);
    for (int i = 0; i < 4; i++)
        CHECK(drk_pool_free(r.pool, a[i], 0x10, 1) == 0);
    /* Everything is pending on 0x10: the pool seals, waits, retries. */
    CHECK(drk_pool_alloc(r.pool, 6 * MIB, 0x20, 1, &b) == 0);
    CHECK(fev.waits >= 1 && drk_pool_get_stats(r.pool).waits >= 1);
    CHECK(drk_pool_free(r.pool, b + 512, 0x20, 1) == DRK_PAGES_INVALID); /* not a start */
    CHECK(drk_pool_free(r.pool, 0xdead000, 0x20, 1) == DRK_PAGES_INVALID);
    rig_end(&r);
}

/* Before creating pages the pool takes back frees whose events completed
 * (without waiting); lookups skip pending blocks and know async ones; a
 * flush waits for everything; live bytes are the program's. */
static void test_soft_reclaim_lookup_flush(void)
{
    rig r = rig_new(64);
    uintptr_t a, b, base;
    size_t size;
    uint64_t serial;
    int async = -1;
    CHECK(drk_pool_alloc(r.pool, 8 * MIB, 0x10, 1, &a) == 0);
    CHECK(drk_pool_lookup(r.pool, a + 5, &base, &size, &serial, &async) == 0 && base == a && async == 1);
    CHECK(drk_pool_get_stats(r.pool).live_bytes == 8 * MIB);
    CHECK(drk_pool_free(r.pool, a, 0x10, 1) == 0);
    CHECK(drk_pool_lookup(r.pool, a, &base, &size, &serial, NULL) == DRK_PAGES_INVALID); /* pending */
    CHECK(drk_pool_get_stats(r.pool).live_bytes == 0);
    /* Allocations elsewhere seal 0x10's batch (SEAL_AFTER), whose work then
     * completes; the block stays pending until someone looks. */
    uintptr_t small[40];
    for (int i = 0; i < 40; i++)
        CHECK(drk_pool_alloc(r.pool, 512, 0x30, 1, &small[i]) == 0);
    CHECK(fev.recorded[sidx(0x10)] == 1);
    complete(0x10);
    CHECK(drk_pool_get_stats(r.pool).pending_blocks == 1);
    uint64_t pages = drk_heap_get_stats(r.heap).pages;
    CHECK(drk_pool_alloc(r.pool, 8 * MIB, 0x20, 1, &b) == 0);
    /* Given back before new pages were made: its pages served 0x20. */
    CHECK(drk_heap_get_stats(r.heap).pages == pages && fev.waits == 0);
    for (int i = 0; i < 40; i++)
        CHECK(drk_pool_free(r.pool, small[i], 0x30, 1) == 0);
    complete(0x30);
    drk_pool_flush(r.pool);
    CHECK(drk_pool_alloc(r.pool, 100, 0, 0, &a) == 0);
    CHECK(drk_pool_lookup(r.pool, a, &base, &size, &serial, &async) == 0 && async == 0);
    CHECK(drk_pool_free(r.pool, a, 0, 0) == 0 && drk_pool_free(r.pool, b, 0x20, 1) == 0);
    CHECK(drk_pool_get_stats(r.pool).pending_blocks == 2);
    CHECK(drk_pool_flush(r.pool) == 2 && drk_pool_get_stats(r.pool).pending_blocks == 0);
    rig_end(&r);
}

/* Random allocations and frees on five streams (and cuMemAlloc/cuMemFree):
 * a returned block never overlaps a block freed on another stream whose
 * event has not completed. */
static void test_random(void)
{
    enum { SLOTS = 64, OPS = 20000 };
    rig r = rig_new(256);
    struct {
        uintptr_t ptr;
        size_t size;
        uintptr_t stream; /* 0: none */
    } live[SLOTS] = {{0}}, pend[4096];
    size_t npend = 0;
    uint64_t pend_seq[4096];
    unsigned rng = 99, violations = 0;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 1103515245u + 12345u;
        int s = (int)((rng >> 8) % SLOTS);
        uintptr_t stream = (rng >> 20) % 6 == 0 ? 0 : 0x10 * (1 + (rng >> 20) % 5);
        if (live[s].ptr) {
            CHECK(drk_pool_free(r.pool, live[s].ptr, stream, stream != 0) == 0);
            if (npend < 4096) {
                pend[npend].ptr = live[s].ptr, pend[npend].size = live[s].size, pend[npend].stream = stream;
                /* What the freeing stream has queued so far must finish first. */
                pend_seq[npend++] = stream ? fev.recorded[sidx(stream)] + 1 : 0;
            }
            live[s].ptr = 0;
        } else {
            size_t n = 1 + (rng >> 6) % (3 * MIB);
            uintptr_t p;
            if (drk_pool_alloc(r.pool, n, stream, stream != 0, &p) != 0)
                continue;
            for (size_t i = 0; i < npend; i++) {
                int overlap = p < pend[i].ptr + pend[i].size && pend[i].ptr < p + n;
                int safe_same = pend[i].stream && pend[i].stream == stream;
                int done = pend[i].stream && fev.done[sidx(pend[i].stream)] >= pend_seq[i];
                if (overlap && !safe_same && !done && pend[i].stream)
                    violations++;
                if (overlap) /* that pending free is over: the block is in use again */
                    pend[i] = pend[--npend], pend_seq[i] = pend_seq[npend], i--;
            }
            live[s].ptr = p, live[s].size = n, live[s].stream = stream;
        }
        if (op % 97 == 0) /* some stream finishes its work */
            complete(0x10 * (1 + (rng >> 12) % 5));
        if (op % 1000 == 0) {
            complete(LEGACY);
            for (int k = 1; k <= 5; k++)
                complete(0x10 * (uintptr_t)k);
        }
    }
    drk_pool_stats st = drk_pool_get_stats(r.pool);
    fprintf(stderr, "pool random: %llu same-stream reuses, %llu batches, %llu epochs, %llu events, %llu waits\n",
            (unsigned long long)st.same_stream_reuses, (unsigned long long)st.batches, (unsigned long long)st.epochs,
            (unsigned long long)st.events, (unsigned long long)st.waits);
    CHECK(violations == 0 && st.same_stream_reuses > 0 && st.batches > 0 && st.epochs > 0);
    char err[200];
    CHECK(drk_heap_check(r.heap, err, sizeof err) == 0);
    rig_end(&r);
}


/* ---- Epochs shared by two pools (a device's shards) ---- */

typedef struct duo {
    drk_page_backend *pages[2];
    drk_heap *heap[2];
    drk_pool *pool[2];
    drk_epochs *ep;
} duo;

static duo duo_new(uint64_t gap_ns)
{
    memset(&fev, 0, sizeof fev);
    duo d;
    memset(&d, 0, sizeof d);
    d.ep = drk_epochs_new(&events, gap_ns);
    CHECK(d.ep != NULL);
    for (int i = 0; i < 2; i++) {
        d.pages[i] = drk_pages_counting(2 * MIB, 256);
        d.heap[i] = d.pages[i] ? drk_heap_new(d.pages[i], 1024 * 2 * MIB) : NULL;
        d.pool[i] = d.heap[i] ? drk_pool_new(d.heap[i], &events) : NULL;
        CHECK(d.pool[i] != NULL);
        drk_pool_share_epochs(d.pool[i], d.ep);
    }
    return d;
}

static void duo_end(duo *d)
{
    for (int i = 0; i < 2; i++) {
        drk_pool_delete(d->pool[i]);
        drk_heap_delete(d->heap[i]);
        d->pages[i]->destroy(d->pages[i]);
    }
    drk_epochs_delete(d->ep);
    CHECK(fev.outstanding == 0); /* every event released */
}

/* `n` allocations and frees on stream 0x30 (its own batches): enough for
 * a pool to look at its stale epoch (SEAL_AFTER). */
static void churn(drk_pool *p, int n)
{
    uintptr_t x;
    for (int i = 0; i < n; i++) {
        CHECK(drk_pool_alloc(p, 512, 0x30, 1, &x) == 0);
        CHECK(drk_pool_free(p, x, 0x30, 1) == 0);
    }
}

/* One seal covers both pools' frees made before it; a free after it waits
 * for another, which a pool that did not make the newest seal holds back
 * for the gap unless it is urgent; a block comes back only once every
 * stream's event of its seal has completed. */
static void test_shared_epochs(void)
{
    duo d = duo_new(1000000000000ull); /* a gap nothing waits out */
    CHECK(drk_epochs_stream_created(d.ep, 0x10) == 0 && drk_epochs_stream_created(d.ep, 0x10) == 0);
    uintptr_t x, y, z;
    CHECK(drk_pool_alloc(d.pool[0], 4 * MIB, 0, 0, &x) == 0 && drk_pool_alloc(d.pool[1], 4 * MIB, 0, 0, &y) == 0);
    CHECK(drk_pool_free(d.pool[0], x, 0, 0) == 0 && drk_pool_free(d.pool[1], y, 0, 0) == 0);
    churn(d.pool[0], 48); /* pool 0 seals: the legacy stream and 0x10 */
    drk_epochs_stats st = drk_epochs_get_stats(d.ep);
    CHECK(st.seals == 1 && st.events == 2 && fev.recorded[sidx(LEGACY)] == 1 && fev.recorded[sidx(0x10)] == 1);
    churn(d.pool[1], 48); /* pool 1's free came before that seal: its ticket, no events */
    st = drk_epochs_get_stats(d.ep);
    CHECK(st.seals == 1 && st.shared == 1 && drk_pool_get_stats(d.pool[1]).epochs == 1);
    CHECK(drk_pool_alloc(d.pool[1], 4 * MIB, 0, 0, &z) == 0);
    CHECK(drk_pool_free(d.pool[1], z, 0, 0) == 0);
    churn(d.pool[1], 48); /* after the seal: held back for the gap */
    st = drk_epochs_get_stats(d.ep);
    CHECK(st.seals == 1 && st.held >= 1 && drk_pool_get_stats(d.pool[1]).epochs == 1);
    /* y waits for both streams' events. */
    complete(LEGACY);
    drk_pool_reclaim(d.pool[1]);
    CHECK(drk_pool_get_stats(d.pool[1]).pending_bytes >= 8 * MIB);
    complete(0x10);
    drk_pool_reclaim(d.pool[1]);
    uint64_t left = drk_pool_get_stats(d.pool[1]).pending_bytes; /* z, still open, and 0x30's */
    CHECK(left >= 4 * MIB && left < 5 * MIB);
    CHECK(drk_pool_reclaim(d.pool[0]) >= 1 && drk_pool_get_stats(d.pool[0]).pending_bytes < MIB); /* x */
    /* Urgent (out of pages, a flush): sealed at once. */
    CHECK(drk_pool_flush(d.pool[1]) >= 1 && drk_epochs_get_stats(d.ep).seals == 2);
    /* The pool that made the newest seal is held back too (alone, with many
     * streams, it recorded an event per stream every 32 allocations). */
    CHECK(drk_pool_alloc(d.pool[1], 4 * MIB, 0, 0, &z) == 0 && drk_pool_free(d.pool[1], z, 0, 0) == 0);
    uint64_t held = drk_epochs_get_stats(d.ep).held;
    churn(d.pool[1], 48);
    CHECK(drk_epochs_get_stats(d.ep).seals == 2 && drk_epochs_get_stats(d.ep).held > held);
    CHECK(drk_pool_flush(d.pool[1]) >= 1 && drk_epochs_get_stats(d.ep).seals == 3);
    drk_epochs_stream_destroyed(d.ep, 0x10);
    uint64_t on_10 = fev.recorded[sidx(0x10)], on_legacy = fev.recorded[sidx(LEGACY)];
    CHECK(drk_pool_alloc(d.pool[0], 4 * MIB, 0, 0, &x) == 0 && drk_pool_free(d.pool[0], x, 0, 0) == 0);
    CHECK(drk_pool_flush(d.pool[0]) >= 1 && fev.recorded[sidx(0x10)] == on_10 &&
          fev.recorded[sidx(LEGACY)] == on_legacy + 1); /* 0x10 gone: the legacy stream only */
    duo_end(&d);
}

/* A pool held back whose open epoch began before the newest seal (another
 * pool's): the frees it covers take its ticket and come back when it
 * completes; the later ones wait on. */
static void test_epoch_split(void)
{
    duo d = duo_new(1000000000000ull); /* a gap nothing waits out */
    CHECK(drk_epochs_stream_created(d.ep, 0x10) == 0);
    uintptr_t x, y, y2;
    /* Allocated first, and one 0x30 block each to reuse: churn needs no
     * page later (a page short with frees pending seals at once). */
    CHECK(drk_pool_alloc(d.pool[1], 4 * MIB, 0, 0, &y) == 0 && drk_pool_alloc(d.pool[1], 2 * MIB, 0, 0, &y2) == 0);
    CHECK(drk_pool_alloc(d.pool[0], 4 * MIB, 0, 0, &x) == 0);
    churn(d.pool[0], 1);
    churn(d.pool[1], 1);
    CHECK(drk_pool_free(d.pool[1], y, 0, 0) == 0 && drk_pool_free(d.pool[0], x, 0, 0) == 0);
    churn(d.pool[0], 48); /* pool 0 seals: it covers y too */
    CHECK(drk_epochs_get_stats(d.ep).seals == 1);
    CHECK(drk_pool_free(d.pool[1], y2, 0, 0) == 0);
    churn(d.pool[1], 48); /* held back: y takes pool 0's ticket, y2 stays open */
    drk_pool_stats st = drk_pool_get_stats(d.pool[1]);
    CHECK(drk_epochs_get_stats(d.ep).seals == 1 && st.epochs_split == 1 && st.epochs == 1);
    drk_pool_reclaim(d.pool[1]);
    CHECK(drk_pool_get_stats(d.pool[1]).pending_bytes >= 6 * MIB); /* nothing completed yet */
    complete(LEGACY);
    complete(0x10);
    drk_pool_reclaim(d.pool[1]);
    uint64_t left = drk_pool_get_stats(d.pool[1]).pending_bytes; /* y2, and 0x30's */
    CHECK(left >= 2 * MIB && left < 3 * MIB);
    /* Once split at a seal, not again until a newer one. */
    churn(d.pool[1], 48);
    CHECK(drk_pool_get_stats(d.pool[1]).epochs_split == 1 && drk_epochs_get_stats(d.ep).seals == 1);
    CHECK(drk_pool_flush(d.pool[1]) >= 1 && drk_epochs_get_stats(d.ep).seals == 2);
    complete(0x30);
    drk_pool_flush(d.pool[0]);
    duo_end(&d);
}

/* A seal that is not urgent is held back only for the gap; by its own
 * pool's seal only where seals record more than the legacy stream's event
 * (one thread's program on the default streams seals as it always did). */
static void test_epoch_gap(void)
{
    duo d = duo_new(250000000); /* 0.25 s an event: no preemption outlasts it */
    uintptr_t x;
    CHECK(drk_pool_alloc(d.pool[0], 4 * MIB, 0, 0, &x) == 0 && drk_pool_free(d.pool[0], x, 0, 0) == 0);
    churn(d.pool[0], 48);
    CHECK(drk_epochs_get_stats(d.ep).seals == 1);
    CHECK(drk_pool_alloc(d.pool[0], 4 * MIB, 0, 0, &x) == 0 && drk_pool_free(d.pool[0], x, 0, 0) == 0);
    churn(d.pool[0], 48); /* one event a seal: not held back by its own */
    CHECK(drk_epochs_get_stats(d.ep).seals == 2 && drk_epochs_get_stats(d.ep).held == 0);
    CHECK(drk_epochs_stream_created(d.ep, 0x10) == 0); /* two events a seal: 0.5 s */
    CHECK(drk_pool_alloc(d.pool[0], 4 * MIB, 0, 0, &x) == 0 && drk_pool_free(d.pool[0], x, 0, 0) == 0);
    churn(d.pool[0], 48);
    CHECK(drk_epochs_get_stats(d.ep).seals == 2 && drk_epochs_get_stats(d.ep).held >= 1);
    struct timespec ts = {0, 600000000};
    nanosleep(&ts, NULL);
    churn(d.pool[0], 48);
    CHECK(drk_epochs_get_stats(d.ep).seals == 3);
    complete(LEGACY);
    complete(0x10);
    drk_pool_flush(d.pool[0]);
    duo_end(&d);
}

/* Two pools sharing epochs, random cuMemAlloc/cuMemFree and frees on five
 * streams, the streams finishing their work at random: a cuMemFree'd block
 * is never handed out before every stream has completed an event recorded
 * after its free (nor a stream's block before its stream's), in either
 * pool; and the pools record fewer events than one pool sealing alone. */
static void test_shared_random(uint64_t gap_ns, unsigned seed)
{
    enum { SLOTS = 64, OPS = 20000, NS = 6 };
    duo d = duo_new(gap_ns);
    static const uintptr_t sts[NS] = {LEGACY, 0x10, 0x20, 0x30, 0x40, 0x50};
    for (int k = 1; k < NS; k++)
        CHECK(drk_epochs_stream_created(d.ep, sts[k]) == 0 && drk_pool_stream_created(d.pool[0], sts[k]) == 0 &&
              drk_pool_stream_created(d.pool[1], sts[k]) == 0);
    struct {
        uintptr_t ptr;
        size_t size;
    } live[2][SLOTS];
    memset(live, 0, sizeof live);
    static struct {
        uintptr_t ptr;
        size_t size;
        uintptr_t stream;
        uint64_t rec[NS]; /* each stream's events recorded at the free */
    } pend[2][4096];
    size_t npend[2] = {0, 0};
    unsigned rng = seed, violations = 0, epoch_frees = 0;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 1103515245u + 12345u;
        int w = (int)(rng >> 30) & 1, s = (int)((rng >> 8) % SLOTS);
        uintptr_t stream = (rng >> 20) % 3 == 0 ? 0 : sts[1 + (rng >> 22) % (NS - 1)];
        drk_pool *p = d.pool[w];
        if (live[w][s].ptr) {
            CHECK(drk_pool_free(p, live[w][s].ptr, stream, stream != 0) == 0);
            epoch_frees += stream == 0;
            if (npend[w] < 4096) {
                size_t i = npend[w]++;
                pend[w][i].ptr = live[w][s].ptr, pend[w][i].size = live[w][s].size, pend[w][i].stream = stream;
                for (int k = 0; k < NS; k++)
                    pend[w][i].rec[k] = fev.recorded[sidx(sts[k])];
            }
            live[w][s].ptr = 0;
        } else {
            size_t n = 1 + (rng >> 6) % (3 * MIB);
            uintptr_t x;
            if (drk_pool_alloc(p, n, stream, stream != 0, &x) != 0)
                continue;
            for (size_t i = 0; i < npend[w]; i++) {
                int overlap = x < pend[w][i].ptr + pend[w][i].size && pend[w][i].ptr < x + n;
                int safe = pend[w][i].stream && pend[w][i].stream == stream;
                for (int k = 0; k < NS && !safe; k++) {
                    int after = fev.done[sidx(sts[k])] > pend[w][i].rec[k]; /* an event after the free completed */
                    if (pend[w][i].stream && sts[k] == pend[w][i].stream)
                        safe = after;
                    else if (!pend[w][i].stream && !after)
                        break;
                    else if (!pend[w][i].stream && k == NS - 1)
                        safe = 1;
                }
                if (overlap && !safe)
                    violations++;
                if (overlap)
                    pend[w][i] = pend[w][--npend[w]], i--;
            }
            live[w][s].ptr = x, live[w][s].size = n;
        }
        if (op % 89 == 0)
            complete(sts[(rng >> 12) % NS]);
        if (op % 1000 == 0)
            for (int k = 0; k < NS; k++)
                complete(sts[k]);
    }
    drk_epochs_stats st = drk_epochs_get_stats(d.ep);
    uint64_t split = drk_pool_get_stats(d.pool[0]).epochs_split + drk_pool_get_stats(d.pool[1]).epochs_split;
    fprintf(stderr, "shared epochs (gap %llu ns): %u cuMemFree's, %llu seals (%llu events), %llu shared, %llu held, "
            "%llu split, %u blocks reused too soon\n", (unsigned long long)gap_ns, epoch_frees, (unsigned long long)st.seals, (unsigned long long)st.events,
            (unsigned long long)st.shared, (unsigned long long)st.held, (unsigned long long)split, violations);
    CHECK(violations == 0 && st.seals > 10 && st.shared > 0);
    for (int i = 0; i < 2; i++) {
        char err[200];
        CHECK(drk_heap_check(d.heap[i], err, sizeof err) == 0);
    }
    duo_end(&d);
}

/* Out of host memory as a stream is listed (the list's growth fails):
 * seals would record nothing there and complete without its work, so none
 * is made, by a pool sealing its own epochs (`shared` 0) or by shared
 * epochs. A block cuMemFree'd while that stream's work may use it stays
 * out of reuse, however many other streams' events complete. */
static void test_list_fails(int shared)
{
    duo d = {0};
    rig r = {0};
    drk_pool *p;
    if (shared) {
        d = duo_new(0);
        p = d.pool[0];
        for (uintptr_t s = 0x100; s < 0x110; s++) /* the list's first 16 */
            CHECK(drk_epochs_stream_created(d.ep, s) == 0);
        realloc_fails = 1;
        CHECK(drk_epochs_stream_created(d.ep, 0x200) == -1);
    } else {
        r = rig_new(256);
        p = r.pool;
        for (uintptr_t s = 0x100; s < 0x10f; s++) /* with the legacy stream, the list's first 16 */
            CHECK(drk_pool_stream_created(p, s) == 0);
        realloc_fails = 1;
        CHECK(drk_pool_stream_created(p, 0x200) == DRK_PAGES_FAILED);
    }
    CHECK(realloc_fails == 0);
    uintptr_t x, y;
    CHECK(drk_pool_alloc(p, 4 * MIB, 0, 0, &x) == 0);
    CHECK(drk_pool_free(p, x, 0, 0) == 0); /* 0x200's work may still use x */
    int reused = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 48; i++) {
            CHECK(drk_pool_alloc(p, MIB, 0, 0, &y) == 0); /* fits in x */
            reused += y == x;
            CHECK(drk_pool_free(p, y, 0, 0) == 0);
        }
        drk_pool_flush(p);
        for (int k = 0; k < fev.n; k++)
            fev.done[k] = fev.recorded[k]; /* every listed stream's work is done */
        drk_pool_reclaim(p);
    }
    printf("list_fails (%s): x reused %d times, %llu MiB pending\n", shared ? "shared epochs" : "the pool's own",
           reused, (unsigned long long)(drk_pool_get_stats(p).pending_bytes / MIB));
    CHECK(reused == 0 && drk_pool_get_stats(p).pending_bytes >= 4 * MIB);

    /* The program waits for the device (cuCtxSynchronize): frees made
     * before the wait began come back once it succeeds; one made after it
     * began waits for the next. A wait that failed gives nothing back; the
     * next that succeeds gives back what the failed one had set aside. */
    uint64_t pending = drk_pool_get_stats(p).pending_bytes, z, w;
    CHECK(drk_pool_sync_begin(p, 1) == 1);
    CHECK(drk_pool_alloc(p, 2 * MIB, 0, 0, &z) == 0 && z != x);
    CHECK(drk_pool_free(p, z, 0, 0) == 0); /* after the wait began */
    CHECK(drk_pool_sync_end(p, 1) > 0);
    drk_pool_stats st = drk_pool_get_stats(p);
    CHECK(pending >= 4 * MIB && st.pending_bytes == 2 * MIB && st.sync_reclaims > 0);
    CHECK(drk_pool_alloc(p, 4 * MIB, 0, 0, &y) == 0 && y == x); /* x is the heap's again */
    CHECK(drk_pool_free(p, y, 0, 0) == 0);
    CHECK(drk_pool_sync_begin(p, 2) == 1); /* z and x set aside; this wait fails */
    CHECK(drk_pool_alloc(p, MIB, 0, 0, &w) == 0 && w != z && w != x);
    CHECK(drk_pool_free(p, w, 0, 0) == 0);
    CHECK(drk_pool_sync_begin(p, 3) == 1);
    CHECK(drk_pool_sync_end(p, 3) == 3);
    CHECK(drk_pool_get_stats(p).pending_bytes == 0);
    CHECK(drk_pool_sync_begin(p, 4) == 0); /* nothing to set aside */
    printf("list_fails (%s): after the program's waits, %llu blocks back\n", shared ? "shared epochs" : "the pool's own",
           (unsigned long long)drk_pool_get_stats(p).sync_reclaims);
    if (shared)
        duo_end(&d);
    else
        rig_end(&r);
}

int main(void)
{
    test_soft_reclaim_lookup_flush();
    test_same_stream();
    test_cross_stream();
    test_epoch();
    test_epoch_records_reused();
    test_oom_waits();
    test_random();
    test_shared_epochs();
    test_epoch_split();
    test_epoch_gap();
    test_list_fails(0);
    test_list_fails(1);
    test_shared_random(0, 7);
    /* Held back for ever: only urgent seals, and the frees they cover split off. */
    for (unsigned seed = 7; seed < 12; seed++)
        test_shared_random(1000000000000ull, seed);
    return CHECK_DONE();
}
