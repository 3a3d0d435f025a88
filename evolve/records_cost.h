/* What CUPTI's kernel records cost the program, kept within a share of its
 * run time. While they are on, CUPTI instruments every kernel launch: on
 * the H200 a launch call took 5.55 us instead of 3.73 (tests/bench/run.sh,
 * launch/1), whatever the kernel does, so a launch-bound program pays up to
 * a third of its launch rate for every round timed. With evolution's timing
 * alone (DRK_PROFILE=0) drk's thread keeps an account: the share of the time
 * passed is paid in, every launch made while the records are on is charged
 * DRK_RECORD_NS less what the program's waits for the GPU absorb (as for
 * attaching, below: a program that waits for its GPU has that time to
 * spare, and slower launch calls shorten its waits, not its run), and
 * records go on for a round only when the account holds what the round is
 * expected to cost. A program that launches little (its kernels long), or
 * waits for its GPU, keeps them on; a launch-bound one gets a timed round
 * only as often as it pays for one. Not charged: the kernels' own
 * slowdown on the GPU while records are on (H200: 6.4% for a 65,536-block
 * stencil, 0.4-2.8% for 4,096-block kernels), which nothing here measures;
 * the rounds timed while a search runs or after it (shim/worker.c) bound
 * it. Pure arithmetic on the caller's clock, the program's launch count
 * and its waits; tests/unit/test_records_cost.c. */
#ifndef DRK_EVOLVE_RECORDS_COST_H
#define DRK_EVOLVE_RECORDS_COST_H

#include <stdint.h>

/* A launch call's cost while kernel records are on, rounded up from the
 * H200's 1.82 us (launch) and 1.88 us (launchex) a launch. */
#define DRK_RECORD_NS 2000.0

/* A launch call's cost while CUPTI is attached with kernel records off:
 * the H200 measured 0.37-0.92 us (copy records on, or no kind at all;
 * tests/bench/cupti_cost, 2026-12-03), rounded up. It lasts as long as
 * CUPTI stays attached, records on or off. */
#define DRK_ATTACHED_NS 1000.0

typedef struct drk_records_cost {
    double share;          /* of the time passed, what the records may cost */
    double bank_ns;        /* paid in less charged for the rounds ended */
    uint64_t at_ns;        /* the latest reckoning */
    uint64_t launches;     /* the program's launches then */
    uint64_t waited;       /* its waits for the GPU then (ns) */
    uint64_t round_from;   /* its launches when the latest round ended */
    uint64_t waited_from;  /* its waits then */
    uint64_t open_on;      /* launches of the open round made with records on */
    uint64_t rounds;       /* rounds ended since the account started */
    double round_launches; /* launches in a round, by the latest rounds ended */
    double round_waited;   /* waits in a round (ns), the same way */
    uint64_t charged;      /* launches made while the records were on */
    double charged_ns;     /* what they cost the rounds ended, net of the waits */
    uint64_t since_ns;     /* the first reckoning */
    double prior_wait;     /* waits (ns) a launch, before a round has ended (drk_records_cost_prior) */
} drk_records_cost;

void drk_records_cost_init(drk_records_cost *c, double share, uint64_t now_ns, uint64_t launches, uint64_t waited);

/* Before a round has ended, the open round's waits to come are taken as
 * the program waited in the window that let CUPTI attach: `waited_ns` for
 * its `launches` (drk_attach_affordable). Without it, a burst of launches
 * caught by the account's first reckoning before its synchronize looked
 * launch-bound, and its round went untimed (engine_busy's `waits` under
 * ASan: 4,287 launches, no wait yet, one run in four). */
void drk_records_cost_prior(drk_records_cost *c, uint64_t launches, uint64_t waited_ns);

/* A reckoning at `now_ns`, the program having made `launches` in all and
 * waited `waited` ns for the GPU in its synchronize calls: `on` when the
 * records were on since the last one, `rounds_ended` the rounds that ended
 * since. A round is charged when it ends, for its launches made with
 * records on, net of its waits (drk_records_cost_of): a program's launches
 * and the waits that absorb them (a burst, then a synchronize) fall in
 * different reckonings but in one round. Until then the open round counts
 * as charged with the waits of the latest rounds (it has not waited yet). */
void drk_records_cost_reckon(drk_records_cost *c, uint64_t now_ns, uint64_t launches, uint64_t waited, int on,
                             unsigned rounds_ended);

/* What records on for `on` of a stretch's `launches` launch calls cost,
 * the program having waited `waited_ns` for the GPU in it: DRK_RECORD_NS a
 * launch, less the waits left after CUPTI's attached cost (DRK_ATTACHED_NS
 * for every launch, which they absorb first). */
double drk_records_cost_of(double on, double launches, double waited_ns);

/* What timing the next round whole is expected to cost (ns): its launches
 * and waits as the latest rounds', or the open round's so far where either
 * is more. */
double drk_records_cost_round(const drk_records_cost *c);

/* 1 when the account holds the next round's cost: records may go on, or
 * stay on, for it (at a round's end they rest otherwise). Before a round
 * has ended since the account started, nothing says what one costs (a
 * burst of launches, its waits still to come, would look launch-bound):
 * 1 unless over. */
int drk_records_cost_affords(const drk_records_cost *c);

/* 1 when they cost a round's worth (as the latest rounds ended) and a
 * second's share more than was paid in (the round is longer, launches
 * more or waits less than expected): they rest at once, the round they
 * were timing left untimed. */
int drk_records_cost_over(const drk_records_cost *c);

/* What CUPTI attached would have cost a window of the program's run in
 * which it made `launches` launch calls and waited `waited_ns` for the GPU
 * in its synchronize calls (ns): DRK_ATTACHED_NS a launch, less what those
 * waits absorb (a program that waits for the GPU has that time to spare:
 * slower launch calls shorten its waits, not its run). */
double drk_attach_cost_ns(uint64_t launches, uint64_t waited_ns);

/* 1 when that cost fits `share` of the window's `span_ns`: evolution's
 * timing may attach CUPTI. A launch-bound program (launch calls back to
 * back, few waits) is left without it. */
int drk_attach_affordable(double share, uint64_t span_ns, uint64_t launches, uint64_t waited_ns);

/* The charged cost (ns, net of the waits; the open round's as it stands)
 * and its share of the time since the first reckoning. */
double drk_records_cost_charged_ns(const drk_records_cost *c);
double drk_records_cost_charged_share(const drk_records_cost *c);

/* How long kernel records rest while evolution has nothing to search (the
 * rounds until the one timed to see what has become hot): `base` the first
 * time, then twice as long each time they rest so again, up to `max`, while
 * `marker` (what would give the engine something new: the kernel-shapes
 * launched, its targets) stays as it was; `base` again once it moved. What
 * they cost the kernels on the GPU (above: not charged) then shrinks the
 * longer a program runs with nothing new, instead of one round in base + 1
 * for ever. */
typedef struct drk_rest_backoff {
    unsigned next;         /* the rest the next call gives (0: base) */
    uint64_t marker;       /* the marker then */
} drk_rest_backoff;

unsigned drk_rest_backoff_next(drk_rest_backoff *b, uint64_t marker, unsigned base, unsigned max);

#endif
