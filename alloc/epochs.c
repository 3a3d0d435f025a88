#include "alloc/epochs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"

#define LEGACY_STREAM ((uintptr_t)0x1)
/* Seals not known complete at once, at most: past them a seal that is not
 * urgent is held back, an urgent one waits for the oldest. */
#define RING 256

typedef struct seal {
    uint64_t ticket, ord, start_ns; /* ord: its place among the seals begun (a free stamped below it is covered) */
    uint64_t *ev;
    size_t nev, room;
} seal;

struct drk_epochs {
    pthread_mutex_t lock;
    drk_pool_events ev;
    uint64_t gap_ns;
    uintptr_t *streams;
    size_t nstreams, cap;
    /* Events recorded on streams as they were destroyed, for the next seal
     * to take as its own (drk_epochs_stream_destroyed). */
    uint64_t *retired;
    size_t nretired, retired_cap;
    /* A destroyed stream's work could not be waited for: no seal is made
     * any more (one would complete without that work). */
    int stopped;
    seal ring[RING];
    size_t head, n;        /* ring[head] the oldest not known complete */
    uint64_t next;         /* the last ticket given out */
    /* Written under the lock, also read without it (a seal held back is
     * told so without the lock: pools ask again on each free meanwhile). */
    _Atomic(const void *) last_who; /* who made the newest seal */
    _Atomic uint64_t newest_ord;    /* its ord (0: none yet) */
    _Atomic uint64_t newest_start;  /* its start, monotonic ns */
    _Atomic uint64_t begun;         /* seals begun: a free's stamp */
    _Atomic uint64_t gap_total;     /* gap_ns x the events a seal records now */
    _Atomic uint64_t done; /* every ticket up to this has completed */
    /* Counts, written under the lock, read without it (a report at exit
     * must not wait for a thread stopped inside). */
    _Atomic uint64_t seals, shared, held, events;
};

static void count(_Atomic uint64_t *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

uint64_t drk_epochs_stamp(drk_epochs *e) { return atomic_load(&e->begun); }

/* Takes streams[i] off the list. Under the lock. */
static void unlist(drk_epochs *e, size_t i)
{
    e->streams[i] = e->streams[--e->nstreams];
    atomic_store(&e->gap_total, e->gap_ns * (e->nstreams + 1));
}

drk_epochs *drk_epochs_new(const drk_pool_events *events, uint64_t gap_ns)
{
    if (!events || !events->record || !events->query || !events->wait || !events->release)
        return NULL;
    drk_epochs *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    pthread_mutex_init(&e->lock, NULL);
    e->ev = *events;
    e->gap_ns = gap_ns;
    atomic_store(&e->gap_total, gap_ns);
    return e;
}

int drk_epochs_stream_created(drk_epochs *e, uintptr_t stream)
{
    int rc = 0;
    pthread_mutex_lock(&e->lock);
    size_t i = 0;
    while (i < e->nstreams && e->streams[i] != stream)
        i++;
    if (i == e->nstreams && stream != LEGACY_STREAM) {
        if (e->nstreams == e->cap) {
            size_t cap = e->cap ? 2 * e->cap : 16;
            uintptr_t *s = realloc(e->streams, cap * sizeof *s);
            if (s)
                e->streams = s, e->cap = cap;
        }
        if (e->nstreams < e->cap)
            e->streams[e->nstreams++] = stream;
        else
            rc = -1, e->stopped = 1; /* a seal would complete without its work */
        atomic_store(&e->gap_total, e->gap_ns * (e->nstreams + 1));
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* A destroyed stream's work goes on (cuStreamDestroy does not wait for
 * it), and a free made before the destroy may still wait for it: seals
 * begun since would record nothing there, and a non-blocking stream's work
 * is not behind the legacy stream's event. So an event is recorded on it
 * now, before it goes, and the next seal takes it as its own: every later
 * ticket completes after that one's. Without that event the stream stays
 * listed until the caller has waited for it: taken off at once, a seal
 * another pool made before that wait ended completed without it (the
 * threads' test, one round in about 150 of those whose records fail). */
int drk_epochs_stream_destroyed(drk_epochs *e, uintptr_t stream)
{
    int rc = 0;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->nstreams; i++)
        if (e->streams[i] == stream) {
            /* Those already done need no seal: a stream made and ended
             * often does not make the list grow. */
            size_t k = 0;
            for (size_t j = 0; j < e->nretired; j++)
                if (e->ev.query(e->ev.ctx, e->retired[j]) == 1)
                    e->ev.release(e->ev.ctx, e->retired[j]);
                else
                    e->retired[k++] = e->retired[j];
            e->nretired = k;
            if (e->nretired == e->retired_cap) {
                size_t cap = e->retired_cap ? 2 * e->retired_cap : 8;
                uint64_t *r = realloc(e->retired, cap * sizeof *r);
                if (r)
                    e->retired = r, e->retired_cap = cap;
            }
            if (e->nretired == e->retired_cap || e->ev.record(e->ev.ctx, stream, &e->retired[e->nretired]) != 0) {
                rc = -1;
                break;
            }
            e->nretired++;
            unlist(e, i);
            break;
        }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void drk_epochs_stream_waited(drk_epochs *e, uintptr_t stream, int idle)
{
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->nstreams; i++)
        if (e->streams[i] == stream) {
            unlist(e, i);
            break;
        }
    if (!idle)
        e->stopped = 1;
    pthread_mutex_unlock(&e->lock);
}

void drk_epochs_stream_lost(drk_epochs *e)
{
    pthread_mutex_lock(&e->lock);
    e->stopped = 1;
    pthread_mutex_unlock(&e->lock);
}

int drk_epochs_stopped(drk_epochs *e)
{
    pthread_mutex_lock(&e->lock);
    int stopped = e->stopped;
    pthread_mutex_unlock(&e->lock);
    return stopped;
}

/* Gives back the oldest seals whose events have completed (`wait`: the
 * oldest waited for), up to ticket `upto`. Under the lock. */
static void advance(drk_epochs *e, int wait, uint64_t upto)
{
    while (e->n && e->ring[e->head].ticket <= upto) {
        seal *s = &e->ring[e->head];
        for (; s->nev; s->nev--) {
            uint64_t ev = s->ev[s->nev - 1];
            if (wait ? e->ev.wait(e->ev.ctx, ev) != 0 : e->ev.query(e->ev.ctx, ev) != 1)
                return; /* not yet (or failed: it never completes) */
            e->ev.release(e->ev.ctx, ev);
        }
        atomic_store_explicit(&e->done, s->ticket, memory_order_release);
        e->head = (e->head + 1) % RING;
        e->n--;
    }
}

/* Whether a seal that is not urgent is held back: the newest seal began
 * after none of these frees and less than the gap ago, and it was another
 * pool's or seals record more than one event. */
static int held_back(drk_epochs *e, const void *who, uint64_t last_free)
{
    uint64_t ord = atomic_load_explicit(&e->newest_ord, memory_order_acquire);
    uint64_t gap = atomic_load_explicit(&e->gap_total, memory_order_relaxed);
    return ord && ord <= last_free &&
           (gap > e->gap_ns || who != atomic_load_explicit(&e->last_who, memory_order_relaxed)) &&
           drk_mono_ns() - atomic_load_explicit(&e->newest_start, memory_order_relaxed) < gap;
}

int drk_epochs_seal(drk_epochs *e, const void *who, uint64_t last_free, int urgent, uint64_t *ticket)
{
    if (!urgent && held_back(e, who, last_free)) {
        count(&e->held, 1);
        return 1;
    }
    pthread_mutex_lock(&e->lock);
    int rc = 0;
    if (e->next && atomic_load_explicit(&e->newest_ord, memory_order_relaxed) > last_free) {
        /* The newest seal began after these frees: it covers them. */
        *ticket = e->next;
        count(&e->shared, 1);
        goto out;
    }
    if (e->stopped) {
        rc = -1;
        goto out;
    }
    if (!urgent && held_back(e, who, last_free)) { /* a seal came and went before the lock */
        count(&e->held, 1);
        rc = 1;
        goto out;
    }
    if (e->n == RING)
        advance(e, 0, e->ring[e->head].ticket);
    if (e->n == RING && urgent)
        advance(e, 1, e->ring[e->head].ticket);
    if (e->n == RING) {
        rc = urgent ? -1 : 1;
        count(&e->held, !urgent);
        goto out;
    }
    seal *s = &e->ring[(e->head + e->n) % RING];
    size_t want = e->nstreams + 1 + e->nretired;
    if (s->room < want) {
        uint64_t *ev = realloc(s->ev, want * sizeof *ev);
        if (!ev) {
            rc = -1;
            goto out;
        }
        s->ev = ev, s->room = want;
    }
    /* Begun before the first event: a free stamped below its ord read the
     * count before this, after the work it waits for was queued (and after
     * its pool's lock), so every event below follows that work in its
     * stream. */
    s->ord = atomic_fetch_add(&e->begun, 1) + 1;
    s->start_ns = drk_mono_ns();
    s->nev = 0;
    int r = e->ev.record(e->ev.ctx, LEGACY_STREAM, &s->ev[0]);
    s->nev += r == 0;
    for (size_t i = 0; r == 0 && i < e->nstreams; i++)
        if ((r = e->ev.record(e->ev.ctx, e->streams[i], &s->ev[s->nev])) == 0)
            s->nev++;
    if (r != 0) {
        for (; s->nev; s->nev--)
            e->ev.release(e->ev.ctx, s->ev[s->nev - 1]);
        rc = -1;
        goto out;
    }
    /* Destroyed streams' last events: this seal's now (recorded before it
     * began, so its frees' work there is behind them too). */
    for (; e->nretired; e->nretired--)
        s->ev[s->nev++] = e->retired[e->nretired - 1];
    s->ticket = ++e->next;
    e->n++;
    atomic_store_explicit(&e->last_who, who, memory_order_relaxed);
    atomic_store_explicit(&e->newest_start, s->start_ns, memory_order_relaxed);
    atomic_store_explicit(&e->newest_ord, s->ord, memory_order_release);
    count(&e->seals, 1);
    count(&e->events, s->nev);
    *ticket = s->ticket;
out:
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int drk_epochs_done(drk_epochs *e, uint64_t ticket, int wait)
{
    if (ticket <= atomic_load_explicit(&e->done, memory_order_acquire))
        return 1;
    if (wait)
        pthread_mutex_lock(&e->lock);
    else if (pthread_mutex_trylock(&e->lock) != 0)
        return 0; /* another thread is sealing or looking: next time */
    advance(e, wait, ticket);
    pthread_mutex_unlock(&e->lock);
    return ticket <= atomic_load_explicit(&e->done, memory_order_acquire);
}

int drk_epochs_newest(drk_epochs *e, uint64_t seen, uint64_t *ord, uint64_t *ticket)
{
    if (atomic_load_explicit(&e->newest_ord, memory_order_acquire) == seen || pthread_mutex_trylock(&e->lock) != 0)
        return 0;
    /* Both written under the lock by the same seal. */
    *ord = atomic_load_explicit(&e->newest_ord, memory_order_relaxed);
    *ticket = e->next;
    pthread_mutex_unlock(&e->lock);
    return *ord != 0 && *ord != seen;
}

drk_epochs_stats drk_epochs_get_stats(drk_epochs *e)
{
    return (drk_epochs_stats){atomic_load(&e->seals), atomic_load(&e->shared), atomic_load(&e->held),
                              atomic_load(&e->events)};
}

void drk_epochs_delete(drk_epochs *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    if (e->n)
        advance(e, 1, e->ring[(e->head + e->n - 1) % RING].ticket);
    /* Seals whose events failed: their events go back unwaited. */
    for (; e->n; e->n--, e->head = (e->head + 1) % RING)
        for (seal *s = &e->ring[e->head]; s->nev; s->nev--)
            e->ev.release(e->ev.ctx, s->ev[s->nev - 1]);
    pthread_mutex_unlock(&e->lock);
    for (; e->nretired; e->nretired--)
        e->ev.release(e->ev.ctx, e->retired[e->nretired - 1]);
    for (size_t i = 0; i < RING; i++)
        free(e->ring[i].ev);
    free(e->retired);
    free(e->streams);
    pthread_mutex_destroy(&e->lock);
    free(e);
}
