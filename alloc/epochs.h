/* Free epochs shared by the pools of one device (its shards). A block freed
 * by cuMemFree may still be in use by work on any stream, so the pool keeps
 * it until events recorded on every stream after the free have completed:
 * a seal. Each pool sealing its own epochs recorded one event per stream
 * per seal, and with threads on shards of their own the seals multiplied:
 * on the H200, 8 threads freeing on 8 shards with 10 streams recorded
 * 50,785 events for 168,512 frees (one thread: 1,408 for 21,064), and the
 * driver serialized them (8 threads ran at 1.96x the rate of one).
 *
 * Shared, one seal covers every pool's frees made before it began: a pool
 * whose open epoch's last free precedes the newest seal takes that seal's
 * ticket and records nothing (and one whose earlier frees do, those:
 * pool.c). A seal that is not urgent (a batch full or left open a while)
 * waits until `gap_ns` per event a seal records has passed since the newest
 * began; where seals record an event on created streams too, also after
 * its own pool's: a pool that sealed again at once while the others waited
 * sealed every batch (each free then waited for its own pool's seal), and
 * with many streams a pool alone recorded an event per stream every 32
 * allocations (on the stand-in, 8 threads' cuMemFree on one shard with 8
 * streams: 28 events per 100 allocations). A pool whose seals record one
 * event (the legacy stream's) is never held back by its own, so that one
 * thread's program on the default streams seals as it always did. A ticket
 * is done once its seal's events (and every earlier seal's: later events on
 * the same streams complete after them) have.
 *
 * Thread-safe: one mutex, held while a seal records its events and while a
 * ticket is looked at (a look that is not a wait only tries it). */
#ifndef DRK_ALLOC_EPOCHS_H
#define DRK_ALLOC_EPOCHS_H

#include <stdint.h>

#include "alloc/pool.h" /* drk_pool_events, and the drk_epochs type */

/* Seals over `events` (which must stay valid; the epochs call them under
 * their own mutex only), recording on the legacy stream and on every
 * stream added. NULL if out of memory or the table is incomplete. */
drk_epochs *drk_epochs_new(const drk_pool_events *events, uint64_t gap_ns);
/* Waits for every seal and releases its events; no pool may use it any
 * more. */
void drk_epochs_delete(drk_epochs *e);

/* The streams a seal covers besides the legacy one (which waits for every
 * blocking stream). 0, or -1 when out of memory (no seal is made any more:
 * one would complete without the stream's work). Destroyed: told before
 * the driver destroys it; an event is recorded there for the next seal to
 * wait for (its work goes on after the destroy). -1 when that event could
 * not be recorded: the stream stays listed (seals still record there), the
 * caller waits for the stream itself and then tells drk_epochs_stream_waited
 * whether that wait succeeded (`idle`). Not idle, no seal is made any more:
 * frees not covered yet stay out of reuse for good. */
int drk_epochs_stream_created(drk_epochs *e, uintptr_t stream);
int drk_epochs_stream_destroyed(drk_epochs *e, uintptr_t stream);
void drk_epochs_stream_waited(drk_epochs *e, uintptr_t stream, int idle);
/* A stream exists that the caller could not list (out of host memory): no
 * seal is made any more. */
void drk_epochs_stream_lost(drk_epochs *e);
/* Whether seals stopped (any of the above): 1 or 0. */
int drk_epochs_stopped(drk_epochs *e);

/* A free's stamp: the seals begun so far (one atomic load, where a clock
 * read cost ~25 ns a free). A seal covers the frees stamped below its place
 * among them: those made before it began. */
uint64_t drk_epochs_stamp(drk_epochs *e);

/* A ticket covering every free stamped at `last_free` or before
 * (0 with *ticket set); 1 when not `urgent` and held back (nothing
 * recorded: ask again later); -1 when an event could not be recorded.
 * `who` tells the pools apart (any pointer of the caller's). */
int drk_epochs_seal(drk_epochs *e, const void *who, uint64_t last_free, int urgent, uint64_t *ticket);

/* 1 when the ticket's seal has completed, else 0 (`wait`: waits for it;
 * 0 then means an event failed, and the ticket never completes). */
int drk_epochs_done(drk_epochs *e, uint64_t ticket, int wait);

/* The newest seal, when it is not the one whose place is `seen`: its place
 * (a free stamped below it is covered) and its ticket; 1, else 0 (none
 * newer, or the lock busy: ask again later; never waits). */
int drk_epochs_newest(drk_epochs *e, uint64_t seen, uint64_t *ord, uint64_t *ticket);

typedef struct drk_epochs_stats {
    uint64_t seals, shared, held, events; /* sealed; tickets given from a seal made before; requests held back */
} drk_epochs_stats;

drk_epochs_stats drk_epochs_get_stats(drk_epochs *e); /* without the lock */

#endif
