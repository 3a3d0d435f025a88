/* What CUPTI's kernel records cost the program, kept within a share of its
 * run time. While they are on, CUPTI instruments every kernel launch: on
 * the H200 a launch call took 5.55 us instead of 3.73 (tests/bench/run.sh,
 * launch/1), whatever the kernel does, so a launch-bound program pays up to
 * a third of its launch rate for every round timed. With evolution's timing
 * alone (DRK_PROFILE=0) drk's thread keeps an account: the share of the time
 * passed is paid in, every launch made while the records are on is charged
 * DRK_RECORD_NS, and records go on for a round only when the account holds
 * what the round is expected to cost. A program that launches little (its
 * kernels long) keeps them on; a launch-bound one gets a timed round only as
 * often as it pays for one. Pure arithmetic on the caller's clock and the
 * program's launch count; tests/unit/test_records_cost.c. */
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
    double bank_ns;        /* paid in less charged */
    uint64_t at_ns;        /* the latest reckoning */
    uint64_t launches;     /* the program's launches then */
    uint64_t round_from;   /* its launches when the latest round ended */
    double round_launches; /* launches in a round, by the latest rounds ended */
    uint64_t charged;      /* launches made while the records were on */
    uint64_t since_ns;     /* the first reckoning */
} drk_records_cost;

void drk_records_cost_init(drk_records_cost *c, double share, uint64_t now_ns, uint64_t launches);

/* A reckoning at `now_ns`, the program having made `launches` in all:
 * `on` when the records were on since the last one (charged for every
 * launch since), `rounds_ended` the rounds that ended since. */
void drk_records_cost_reckon(drk_records_cost *c, uint64_t now_ns, uint64_t launches, int on, unsigned rounds_ended);

/* What timing the next round whole is expected to cost (ns): its launches
 * as the latest rounds', or the open round's so far where that is more. */
double drk_records_cost_round(const drk_records_cost *c);

/* 1 when the account holds the next round's cost: records may go on, or
 * stay on, for it (at a round's end they rest otherwise). */
int drk_records_cost_affords(const drk_records_cost *c);

/* 1 when they cost a round's worth (as the latest rounds ended) and a
 * second's share more than was paid in (the round is longer, or launches
 * more, than expected): they rest at once, the round they were timing left
 * untimed. */
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

/* The charged cost (ns) and its share of the time since the first reckoning. */
double drk_records_cost_charged_ns(const drk_records_cost *c);
double drk_records_cost_charged_share(const drk_records_cost *c);

#endif
