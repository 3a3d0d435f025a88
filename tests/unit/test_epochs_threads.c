/* Shared cuMemFree epochs (alloc/epochs.c) under threads, as the device's
 * shards use them: four pools, each behind its own mutex and driven by its
 * own thread, seal together; a thread completes the streams' events at
 * random, another destroys and creates streams meanwhile; event records
 * fail now and then, queries too. Each thread checks its own pool: a block
 * freed by cuMemFree is never handed out again before every stream usable
 * at the free has completed an event recorded after it (a stream destroyed
 * since included: cuStreamDestroy does not wait for its work), a block
 * freed on a stream never elsewhere before that stream's; no event is
 * recorded on a stream that is gone; at the end, with everything
 * completed, one flush gives every free back (none lost) and every event
 * is released.
 *
 * Then four cases this test found (each failed before its fix): a stream
 * destroyed without a synchronize after a cuMemFree (test_destroyed_unsynced,
 * shared epochs and a pool's own), the same when its last event cannot be
 * recorded and a seal comes before the caller's wait for the stream ends
 * (test_destroyed_record_fails; one round in about 150 failed so), a flush
 * behind a stream batch that same-stream reuse emptied
 * (test_flush_empty_batch), a stream's open batch when its seal fails as it
 * goes (test_destroy_seal_fails).
 *
 * `test_epochs_threads ROUNDS` runs more rounds (seeds; 8 by default,
 * about half a second); NOCHURN=1 leaves the streams alone; ONLY_GAP=0..3
 * runs one gap's rounds (1 and 3 fail records), ONLY_SHORT=1 only those
 * with memory short. A block reused too soon is shown with each stream's
 * state at its free and now. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/epochs.h"
#include "alloc/pool.h"
#include "tests/unit/check.h"

#define MIB ((size_t)1 << 20)
#define LEGACY ((uintptr_t)1)

enum { NS = 6, NT = 4, SLOTS = 48, MAXPEND = 4096 };

static const uintptr_t sts[NS] = {LEGACY, 0x10, 0x20, 0x30, 0x40, 0x50};

/* ---- Events: per stream a count recorded and a count done ---- */

static _Atomic uint64_t recorded[NS], done[NS];
/* Per stream: `usable` odd while the program may queue work there (set
 * after the pool was told of it, cleared before it is told it is gone);
 * `exists` while the driver would take an event there. */
static _Atomic unsigned usable[NS];
static _Atomic int exists[NS];
static pthread_rwlock_t slock[NS];
static _Atomic long outstanding;
static _Atomic unsigned fail_permille, qfail_permille, yield_permille;
static _Atomic unsigned long injected, qinjected, dead_records, wrong_events;
static __thread unsigned trng = 1;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static int sidx(uintptr_t s)
{
    for (int k = 0; k < NS; k++)
        if (sts[k] == s)
            return k;
    return -1;
}

static int ev_record(void *ctx, uintptr_t s, uint64_t *ev)
{
    (void)ctx;
    int k = sidx(s);
    if (k < 0) {
        wrong_events++;
        return -1;
    }
    if (rnd(&trng) % 1000 < fail_permille) {
        injected++;
        return -1;
    }
    if (!atomic_load(&exists[k])) {
        dead_records++;
        return -1;
    }
    if (rnd(&trng) % 1000 < yield_permille)
        sched_yield();
    uint64_t seq = atomic_fetch_add(&recorded[k], 1) + 1;
    *ev = (uint64_t)k << 32 | seq;
    outstanding++;
    return 0;
}

static int ev_query(void *ctx, uint64_t ev)
{
    (void)ctx;
    if (rnd(&trng) % 1000 < qfail_permille) {
        qinjected++;
        return -1;
    }
    return (ev & 0xffffffffu) <= atomic_load(&done[ev >> 32]);
}

static void done_at_least(int k, uint64_t n)
{
    uint64_t d = atomic_load(&done[k]);
    while (d < n && !atomic_compare_exchange_weak(&done[k], &d, n)) {
    }
}

static int ev_wait(void *ctx, uint64_t ev)
{
    (void)ctx;
    done_at_least((int)(ev >> 32), ev & 0xffffffffu);
    return 0;
}

static void ev_release(void *ctx, uint64_t ev)
{
    (void)ctx, (void)ev;
    outstanding--;
}

static const drk_pool_events events = {NULL, ev_record, ev_query, ev_wait, ev_release};

/* ---- The pools ---- */

typedef struct shardx {
    pthread_mutex_t lock;
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *pool;
} shardx;

static shardx sh[NT];
static drk_epochs *ep;
static _Atomic int stop;
/* Done counts move only under the write side: a thread's allocation and its
 * check see none move between them (a completion right after the pool's
 * decision would hide a block reused too soon). */
static pthread_rwlock_t done_lock;

typedef struct pendx {
    uintptr_t ptr;
    size_t size;
    int stream;          /* index in sts, or -1: cuMemFree */
    unsigned use[NS];    /* usable[] at the free */
    uint64_t rec[NS];    /* recorded[] at the free */
} pendx;

typedef struct worker {
    int w, ops;
    unsigned seed;
    unsigned long violations, frees, epoch_frees, allocs, ooms;
    pendx pend[MAXPEND];
    size_t npend;
    struct {
        uintptr_t ptr;
        size_t size;
    } live[SLOTS];
} worker;

static int pend_safe(const pendx *p, int stream, unsigned stream_use)
{
    if (p->stream >= 0) {
        if (p->stream == stream && p->use[stream] == stream_use)
            return 1; /* stream order */
        return atomic_load(&done[p->stream]) > p->rec[p->stream];
    }
    for (int k = 0; k < NS; k++) {
        if (!(p->use[k] & 1))
            continue; /* not usable at the free: no work of it to wait for */
        if (atomic_load(&done[k]) > p->rec[k])
            continue;
        return 0;
    }
    return 1;
}

/* A created stream the program may use now, read-locked (the caller
 * unlocks), or -1 for none / cuMemFree-style. */
static int pick_stream(unsigned r)
{
    if (r % 3 == 0)
        return -1;
    int k = (int)((r >> 4) % NS);
    pthread_rwlock_rdlock(&slock[k]);
    if (!(atomic_load(&usable[k]) & 1)) {
        pthread_rwlock_unlock(&slock[k]);
        return -1;
    }
    return k;
}

static void *work(void *arg)
{
    worker *me = arg;
    trng = me->seed * 2654435761u + 1;
    unsigned r = me->seed;
    shardx *x = &sh[me->w];
    for (int op = 0; op < me->ops; op++) {
        unsigned v = rnd(&r);
        int s = (int)(v % SLOTS);
        int k = pick_stream(v >> 6);
        uintptr_t stream = k >= 0 ? sts[k] : 0;
        if (me->live[s].ptr) {
            pendx p = {.ptr = me->live[s].ptr, .size = me->live[s].size, .stream = k};
            /* Each stream's state at the free, read under its lock: a
             * destroy records its last event there between the two reads
             * otherwise, and the free would seem to wait for work after it
             * (k's is held already: a second read lock could wait on a
             * writer behind the first). */
            for (int j = 0; j < NS; j++) {
                if (j != k)
                    pthread_rwlock_rdlock(&slock[j]);
                p.use[j] = atomic_load(&usable[j]);
                p.rec[j] = atomic_load(&recorded[j]);
                if (j != k)
                    pthread_rwlock_unlock(&slock[j]);
            }
            pthread_mutex_lock(&x->lock);
            int rc = drk_pool_free(x->pool, p.ptr, stream, k >= 0);
            pthread_mutex_unlock(&x->lock);
            CHECK(rc == 0);
            me->frees++;
            me->epoch_frees += k < 0;
            if (me->npend < MAXPEND)
                me->pend[me->npend++] = p;
            me->live[s].ptr = 0;
        } else {
            size_t n = 1 + (v >> 3) % (3 * MIB);
            uintptr_t got;
            pthread_rwlock_rdlock(&done_lock);
            pthread_mutex_lock(&x->lock);
            int rc = drk_pool_alloc(x->pool, n, stream, k >= 0, &got);
            pthread_mutex_unlock(&x->lock);
            if (rc == 0) {
                me->allocs++;
                unsigned use = k >= 0 ? atomic_load(&usable[k]) : 0;
                for (size_t i = 0; i < me->npend; i++) {
                    pendx *p = &me->pend[i];
                    if (!(got < p->ptr + p->size && p->ptr < got + n))
                        continue;
                    if (!pend_safe(p, k, use) && me->violations++ < 5) {
                        fprintf(stderr, "thread %d op %d: block 0x%lx (freed %s%d) reused too soon on %d\n", me->w,
                                op, (unsigned long)p->ptr, p->stream < 0 ? "by cuMemFree" : "on stream ", p->stream, k);
                        for (int j = 0; j < NS; j++)
                            fprintf(stderr, "  stream %d: usable %u at the free (%u now), events %llu then, %llu now, "
                                    "%llu done\n", j, p->use[j], atomic_load(&usable[j]), (unsigned long long)p->rec[j],
                                    (unsigned long long)atomic_load(&recorded[j]),
                                    (unsigned long long)atomic_load(&done[j]));
                    }
                    me->pend[i--] = me->pend[--me->npend];
                }
                me->live[s].ptr = got, me->live[s].size = n;
            } else {
                CHECK(rc == DRK_PAGES_OOM);
                me->ooms++;
            }
            pthread_rwlock_unlock(&done_lock);
        }
        if (k >= 0)
            pthread_rwlock_unlock(&slock[k]);
        if (v % 997 == 0) {
            pthread_mutex_lock(&x->lock);
            if (v & 1)
                drk_pool_flush(x->pool);
            else
                drk_pool_reclaim(x->pool);
            pthread_mutex_unlock(&x->lock);
        }
        if (v % 7 == 0)
            sched_yield();
    }
    return NULL;
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* Completes the streams' work at random: one stream's, all of it or part. */
static void *complete_main(void *arg)
{
    unsigned r = *(unsigned *)arg;
    while (!atomic_load(&stop)) {
        unsigned v = rnd(&r);
        int k = (int)(v % NS);
        uint64_t rec = atomic_load(&recorded[k]), d = atomic_load(&done[k]);
        uint64_t to = (v >> 4) % 4 == 0 && rec > d ? d + (v >> 8) % (rec - d + 1) : rec;
        pthread_rwlock_wrlock(&done_lock);
        done_at_least(k, to);
        pthread_rwlock_unlock(&done_lock);
        nap(2000 + (v >> 12) % 30000);
    }
    return NULL;
}

/* Destroys and creates created streams, telling the pools as device.c does
 * (the epochs first, then each shard under its lock). */
static void *streams_main(void *arg)
{
    unsigned r = *(unsigned *)arg;
    while (!atomic_load(&stop)) {
        unsigned v = rnd(&r);
        int k = 1 + (int)(v % (NS - 1));
        pthread_rwlock_wrlock(&slock[k]);
        if (atomic_load(&usable[k]) & 1) {
            atomic_fetch_add(&usable[k], 1); /* the program's last use of it was before */
            /* As device.c: an event there, else a wait for the stream (as
             * good as an event recorded there now and completed). */
            if (drk_epochs_stream_destroyed(ep, sts[k]) != 0) {
                pthread_rwlock_wrlock(&done_lock);
                done_at_least(k, atomic_fetch_add(&recorded[k], 1) + 1);
                pthread_rwlock_unlock(&done_lock);
                drk_epochs_stream_waited(ep, sts[k], 1);
            }
            for (int w = 0; w < NT; w++) {
                pthread_mutex_lock(&sh[w].lock);
                drk_pool_stream_destroyed(sh[w].pool, sts[k]);
                pthread_mutex_unlock(&sh[w].lock);
            }
            atomic_store(&exists[k], 0);
        } else {
            atomic_store(&exists[k], 1);
            CHECK(drk_epochs_stream_created(ep, sts[k]) == 0);
            for (int w = 0; w < NT; w++) {
                pthread_mutex_lock(&sh[w].lock);
                CHECK(drk_pool_stream_created(sh[w].pool, sts[k]) == 0);
                pthread_mutex_unlock(&sh[w].lock);
            }
            atomic_fetch_add(&usable[k], 1);
        }
        pthread_rwlock_unlock(&slock[k]);
        nap(20000 + (v >> 8) % 200000);
    }
    return NULL;
}

static worker workers[NT];

static unsigned long round_run(unsigned seed, uint64_t gap_ns, int ops, int churn_streams, size_t pages)
{
    memset(recorded, 0, sizeof recorded);
    memset(done, 0, sizeof done);
    outstanding = 0;
    injected = 0;
    qinjected = 0;
    dead_records = 0;
    wrong_events = 0;
    stop = 0;
    ep = drk_epochs_new(&events, gap_ns);
    CHECK(ep != NULL);
    for (int k = 0; k < NS; k++) {
        usable[k] = k < 4 ? 1 : 0; /* 0x40, 0x50 start out not created */
        exists[k] = k < 4;
        if (k && k < 4)
            CHECK(drk_epochs_stream_created(ep, sts[k]) == 0);
    }
    for (int w = 0; w < NT; w++) {
        pthread_mutex_init(&sh[w].lock, NULL);
        sh[w].pages = drk_pages_counting(2 * MIB, pages);
        sh[w].heap = drk_heap_new(sh[w].pages, 256 * 2 * MIB);
        sh[w].pool = drk_pool_new(sh[w].heap, &events);
        CHECK(sh[w].pool != NULL);
        drk_pool_share_epochs(sh[w].pool, ep);
        for (int k = 1; k < 4; k++)
            CHECK(drk_pool_stream_created(sh[w].pool, sts[k]) == 0);
        memset(&workers[w], 0, sizeof workers[w]);
        workers[w].w = w, workers[w].ops = ops, workers[w].seed = seed * 131u + (unsigned)w * 7919u + 1;
    }
    pthread_t t[NT], tc, ts;
    unsigned cs = seed * 3u + 11u, ss = seed * 5u + 17u;
    for (int w = 0; w < NT; w++)
        pthread_create(&t[w], NULL, work, &workers[w]);
    pthread_create(&tc, NULL, complete_main, &cs);
    if (churn_streams)
        pthread_create(&ts, NULL, streams_main, &ss);
    for (int w = 0; w < NT; w++)
        pthread_join(t[w], NULL);
    stop = 1;
    pthread_join(tc, NULL);
    if (churn_streams)
        pthread_join(ts, NULL);
    /* Liveness: everything completed, no failures, each pool flushed gives
     * every free back. */
    unsigned fp = fail_permille, qp = qfail_permille;
    fail_permille = 0;
    qfail_permille = 0;
    for (int k = 0; k < NS; k++)
        done_at_least(k, atomic_load(&recorded[k]));
    unsigned long viol = 0, frees = 0, efrees = 0, ooms = 0;
    uint64_t split = 0;
    for (int w = 0; w < NT; w++) {
        drk_pool_flush(sh[w].pool);
        drk_pool_stats st = drk_pool_get_stats(sh[w].pool);
        CHECK(st.pending_blocks == 0 && st.pending_bytes == 0);
        if (st.pending_blocks)
            fprintf(stderr, "pool %d: %llu blocks never came back\n", w, (unsigned long long)st.pending_blocks);
        char err[200];
        CHECK(drk_heap_check(sh[w].heap, err, sizeof err) == 0);
        viol += workers[w].violations, frees += workers[w].frees, efrees += workers[w].epoch_frees;
        ooms += workers[w].ooms, split += st.epochs_split;
    }
    drk_epochs_stats es = drk_epochs_get_stats(ep);
    for (int w = 0; w < NT; w++) {
        drk_pool_delete(sh[w].pool);
        drk_heap_delete(sh[w].heap);
        sh[w].pages->destroy(sh[w].pages);
        pthread_mutex_destroy(&sh[w].lock);
    }
    drk_epochs_delete(ep);
    CHECK(outstanding == 0);
    CHECK(dead_records == 0 && wrong_events == 0);
    fail_permille = fp;
    qfail_permille = qp;
    fprintf(stderr,
            "seed %u gap %llu, %zu pages: %lu frees (%lu cuMemFree), %lu out of memory, %llu seals (%llu events), %llu "
            "shared, %llu held, %llu split, %lu record and %lu query failures injected, %lu reused too soon\n",
            seed, (unsigned long long)gap_ns, pages, frees, efrees, ooms, (unsigned long long)es.seals,
            (unsigned long long)es.events, (unsigned long long)es.shared, (unsigned long long)es.held,
            (unsigned long long)split, (unsigned long)injected, (unsigned long)qinjected, viol);
    CHECK(viol == 0);
    return viol;
}

/* A pool of `npages` 2 MiB pages knowing stream 0x10, its events as above,
 * none failing, none completed; sealing with epochs of its own or `shared`
 * ones (then `ep`, which knows 0x10 too). */
static drk_pool *one_pool(int shared, size_t npages, drk_page_backend **pages, drk_heap **heap)
{
    memset(recorded, 0, sizeof recorded);
    memset(done, 0, sizeof done);
    for (int k = 0; k < NS; k++) {
        exists[k] = 1;
        usable[k] = 1;
    }
    fail_permille = 0;
    qfail_permille = 0;
    ep = shared ? drk_epochs_new(&events, 0) : NULL;
    CHECK(!shared || (ep && drk_epochs_stream_created(ep, 0x10) == 0));
    *pages = drk_pages_counting(2 * MIB, npages);
    *heap = drk_heap_new(*pages, 64 * 2 * MIB);
    drk_pool *p = drk_pool_new(*heap, &events);
    CHECK(p != NULL);
    if (shared)
        drk_pool_share_epochs(p, ep);
    CHECK(drk_pool_stream_created(p, 0x10) == 0);
    return p;
}

static void one_pool_end(drk_pool *p, drk_heap *heap, drk_page_backend *pages)
{
    drk_pool_delete(p);
    drk_heap_delete(heap);
    pages->destroy(pages);
    drk_epochs_delete(ep);
    ep = NULL;
}

/* A stream destroyed with work still queued (cuStreamDestroy does not wait
 * for it): a block freed by cuMemFree before the destroy, in an epoch not
 * yet sealed, must still wait for that work. Seals made after the destroy
 * record nothing on the stream, and with it non-blocking the legacy
 * stream's event does not wait for it: before the fix the block came back
 * once that event completed. With epochs `shared` and with the pool's own. */
static void test_destroyed_unsynced(int shared, int free_after)
{
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *p = one_pool(shared, 8, &pages, &heap);
    uintptr_t x, y, z;
    CHECK(drk_pool_alloc(p, 4 * MIB, 0, 0, &x) == 0 && drk_pool_alloc(p, 12 * MIB, 0, 0, &z) == 0);
    /* The program queues a kernel on 0x10 that uses x, frees x, destroys 0x10. */
    uint64_t rec10 = recorded[1];
    if (!free_after)
        CHECK(drk_pool_free(p, x, 0, 0) == 0);
    if (shared)
        CHECK(drk_epochs_stream_destroyed(ep, 0x10) == 0);
    drk_pool_stream_destroyed(p, 0x10);
    exists[1] = 0;
    if (free_after)
        CHECK(drk_pool_free(p, x, 0, 0) == 0);
    /* Memory short: the pool seals and waits; the legacy stream's work completes, 0x10's not yet. */
    done_at_least(0, recorded[0] + 1000);
    int rc = drk_pool_alloc(p, 4 * MIB, 0, 0, &y);
    int reused = rc == 0 && y < x + 4 * MIB && x < y + 4 * MIB;
    int ok = !reused || done[1] > rec10;
    fprintf(stderr, "destroyed stream (%s epochs), x freed %s: x %s before its work on the destroyed stream completed\n",
            shared ? "shared" : "its own", free_after ? "after" : "before", ok ? "was not reused" : "WAS REUSED");
    CHECK(ok);
    /* Once 0x10's work completes, x comes back. */
    done_at_least(1, recorded[1]);
    if (rc == 0)
        drk_pool_free(p, y, 0, 0);
    drk_pool_flush(p);
    CHECK(drk_pool_get_stats(p).pending_blocks == 0);
    drk_pool_free(p, z, 0, 0);
    one_pool_end(p, heap, pages);
}

/* The caller's wait for 0x10 has ended (`idle`: it succeeded): told to
 * the epochs (else the pool), and 0x10 goes as device.c has it go. */
static void waited(drk_pool *p, int idle)
{
    if (ep)
        drk_epochs_stream_waited(ep, 0x10, idle);
    else
        drk_pool_stream_waited(p, idle);
    drk_pool_stream_destroyed(p, 0x10);
    exists[1] = 0;
}

/* A stream destroyed whose last event cannot be recorded: the caller
 * waits for the stream itself. A seal made before that wait ends (here the
 * pool's own, memory short) must still wait for the stream's work: before
 * the fix the stream was off the shared epochs' list at once, the seal
 * recorded only the legacy stream's event and x came back (the threads'
 * rounds found it). With the pool's own epochs x is freed after the
 * destroy, and no epoch may be sealed before the wait. With the wait failed
 * (`idle` 0), x never comes back and no seal is made any more; those made
 * before still complete. */
static void test_destroyed_record_fails(int shared, int idle)
{
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *p = one_pool(shared, 8, &pages, &heap);
    uintptr_t w, x, y, z;
    CHECK(drk_pool_alloc(p, 2 * MIB, 0, 0, &w) == 0 && drk_pool_alloc(p, 2 * MIB, 0, 0, &x) == 0 &&
          drk_pool_alloc(p, 12 * MIB, 0, 0, &z) == 0);
    /* w's free is sealed while 0x10 is listed: its ticket needs no more. */
    uint64_t tw = 0;
    if (shared)
        CHECK(drk_pool_free(p, w, 0, 0) == 0 && drk_epochs_seal(ep, p, drk_epochs_stamp(ep), 1, &tw) == 0);
    /* The program queues work on 0x10 that uses x, frees x, destroys 0x10
     * (its own epochs: destroys 0x10, then frees x). */
    uint64_t rec10 = recorded[1];
    if (shared)
        CHECK(drk_pool_free(p, x, 0, 0) == 0);
    fail_permille = 1000;
    CHECK((shared ? drk_epochs_stream_destroyed(ep, 0x10) : drk_pool_stream_destroyed(p, 0x10)) == -1);
    fail_permille = 0;
    if (!shared) {
        exists[1] = 0;
        CHECK(drk_pool_free(p, x, 0, 0) == 0);
    }
    if (!idle)
        waited(p, 0);
    /* Memory short before the wait ends: the pool seals and waits, the legacy stream's work completes. */
    done_at_least(0, recorded[0] + 1000);
    size_t ny = (shared ? 4 : 2) * MIB; /* what x gives back (and w, freed too where shared) */
    int rc = drk_pool_alloc(p, ny, 0, 0, &y);
    int reused = rc == 0 && y < x + 2 * MIB && x < y + ny;
    int ok = !reused || (idle && done[1] > rec10);
    fprintf(stderr, "destroyed stream (%s epochs), its event failed, wait %s: x %s\n", shared ? "shared" : "its own",
            idle ? "done" : "failed", ok ? "was not reused too soon" : "WAS REUSED TOO SOON");
    CHECK(ok);
    if (idle) {
        done_at_least(1, recorded[1] + 1); /* the caller's wait */
        waited(p, 1);
    }
    if (rc == 0)
        drk_pool_free(p, y, 0, 0);
    drk_pool_flush(p);
    uint64_t t;
    CHECK(!shared || drk_epochs_done(ep, tw, 1) == 1);
    CHECK(!shared || (drk_epochs_seal(ep, p, drk_epochs_stamp(ep), 1, &t) == 0) == idle);
    CHECK((drk_pool_get_stats(p).pending_blocks == 0) == idle);
    CHECK(dead_records == 0);
    if (!shared)
        drk_pool_free(p, w, 0, 0);
    drk_pool_free(p, z, 0, 0);
    one_pool_end(p, heap, pages);
}

/* A stream's sealed batch that same-stream reuse emptied, ahead of one
 * with blocks: drk_pool_flush waits for the first, gives back no block,
 * takes that for a failed event and stops, the second still pending (and
 * reclaim_hard likewise answers out of memory with frees still pending). */
static void test_flush_empty_batch(void)
{
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *p = one_pool(0, 32, &pages, &heap);
    uintptr_t b[64], c;
    for (int i = 0; i < 64; i++)
        CHECK(drk_pool_alloc(p, 1000, 0x10, 1, &b[i]) == 0);
    for (int i = 0; i < 64; i++)
        CHECK(drk_pool_free(p, b[i], 0x10, 1) == 0); /* the 64th seals the batch */
    for (int i = 0; i < 64; i++)
        CHECK(drk_pool_alloc(p, 1000, 0x10, 1, &b[i]) == 0); /* all from that batch, at once */
    CHECK(drk_pool_get_stats(p).same_stream_reuses == 64 && drk_pool_get_stats(p).pending_blocks == 0);
    CHECK(drk_pool_alloc(p, 1000, 0x10, 1, &c) == 0 && drk_pool_free(p, c, 0x10, 1) == 0);
    drk_pool_flush(p);
    uint64_t left = drk_pool_get_stats(p).pending_blocks;
    fprintf(stderr, "flush behind an emptied batch: %llu blocks still pending\n", (unsigned long long)left);
    CHECK(left == 0);
    for (int i = 0; i < 64; i++)
        drk_pool_free(p, b[i], 0x10, 1);
    one_pool_end(p, heap, pages);
}

/* A stream destroyed whose open batch cannot be sealed (its event record
 * fails): drk_pool_stream_destroyed drops the stream's record with the open
 * batch in it; its blocks stay pending for good (no flush, no delete finds
 * them). */
static void test_destroy_seal_fails(void)
{
    drk_page_backend *pages;
    drk_heap *heap;
    drk_pool *p = one_pool(0, 32, &pages, &heap);
    uintptr_t a;
    CHECK(drk_pool_alloc(p, 1000, 0x10, 1, &a) == 0 && drk_pool_free(p, a, 0x10, 1) == 0);
    fail_permille = 1000;
    drk_pool_stream_destroyed(p, 0x10);
    fail_permille = 0;
    drk_pool_flush(p);
    uint64_t left = drk_pool_get_stats(p).pending_blocks;
    fprintf(stderr, "stream destroyed, its seal failed: %llu blocks pending for good\n", (unsigned long long)left);
    CHECK(left == 0);
    one_pool_end(p, heap, pages);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 8;
    const char *only_gap = getenv("ONLY_GAP"), *only_short = getenv("ONLY_SHORT");
    /* Writers first: the completer and the streams' thread are not starved. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&done_lock, &ra);
    for (int k = 0; k < NS; k++)
        pthread_rwlock_init(&slock[k], &ra);
    static const uint64_t gaps[] = {0, 1000, 30000, 1000000000000ull};
    unsigned long viol = 0;
    for (int round = 0; round < rounds; round++)
        for (int g = 0; g < 4; g++) {
            if ((only_gap && atoi(only_gap) != g) || (only_short && !(round & 1)))
                continue;
            unsigned seed = (unsigned)round * 4u + (unsigned)g + 1;
            fail_permille = g & 1 ? 20 : 0;
            qfail_permille = g & 2 ? 20 : 0;
            yield_permille = 100;
            /* Memory short (most seals urgent) or not (seals held back, epochs split). */
            viol += round_run(seed, gaps[g], rounds > 1 ? 6000 : 4000, getenv("NOCHURN") ? 0 : 1, round & 1 ? 24 : 96);
        }
    if (viol)
        fprintf(stderr, "%lu blocks reused too soon in all\n", viol);
    fail_permille = 0;
    qfail_permille = 0;
    yield_permille = 0;
    for (int after = 0; after < 2; after++) {
        test_destroyed_unsynced(1, after);
        test_destroyed_unsynced(0, after);
    }
    for (int idle = 1; idle >= 0; idle--) {
        test_destroyed_record_fails(1, idle);
        test_destroyed_record_fails(0, idle);
    }
    test_flush_empty_batch();
    test_destroy_seal_fails();
    return CHECK_DONE();
}
