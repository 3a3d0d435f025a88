/* The search for a faster variant of one kernel at one shape class
 * (evolve/shapes.h): which variants to try each round, what the trials
 * measured, and what to serve. Pure CPU code: the engine runs the trials
 * and hands in what they measured; nothing here calls the driver, reads a
 * setting, allocates or locks (one worker thread drives it). Fixed size:
 * everything is inside drk_evolution (~7 KiB); a call uses ~30 KiB of
 * stack. docs/evolve.md ("Search") has the policy with the numbers behind
 * it and the simulator's results on the recorded H200 spaces.
 *
 * Samples. A trial of variant V is a few launches of V, each paired with a
 * launch of the default on the same shape in the same round; a pair gives
 * one sample, the speedup  default time / V's time  (above 1: V is
 * faster). Statistics of a variant's samples over the memory (the last 20
 * rounds that measured anything): the median; the standard error of the
 * median, 1.2533 x sigma / sqrt(n), never under 0.25%, sigma the larger of
 * the samples' own spread (1.4826 x their median absolute deviation) and
 * the kernel's noise (every trial's deviations from its own median, pooled
 * over the memory: steadier than a few samples' spread); its range,
 * median -/+ 2 standard errors.
 *
 * Margin (1%). Served ("trusted"): measured in 2 trials or more, a median
 * of at least 1.01, and beyond noise without the luck that picked it: the
 * samples after its first trial have a median of at least 1.01 and 3
 * standard errors above 1 (the predictor's start, chosen before any trial:
 * all samples, 2 standard errors). A served variant is dropped, and never
 * tried again, once its latest trial (or its last two together) measures a
 * median of 0.99 or less with the upper end under 1; it is withdrawn, and
 * the search starts over from it, once its latest trial is 4 standard
 * errors below its history (times changed). 1% is 3x the recorded
 * run-to-run noise of identical builds (0.13-0.44% sd; single pairs up to
 * 1.6%, hence two trials and the test without the first): trusted this
 * way, a variant is not slower than 0.99x unless the world changed, which
 * the two withdrawal rules catch within a round.
 *
 * Exploration: cyclic coordinate search around a center, the variant that
 * qualified best (median >= 1.01, lower end above 1) once clearly better
 * than the center (by 1% and 2 standard errors of the difference); the
 * default until one does. Dimensions in the space's scan order (the
 * register budget first); along one, every other value of the line
 * through the center, nearest index first; then the next dimension. A move
 * of the center keeps the position; a whole cycle without a move exhausts
 * the neighbourhood. Mutation at temperature T = 0.2: each exploration slot
 * is, with probability T, a random variant 1 or 2 index steps from the
 * center (each step in a uniformly random dimension, +1 or -1, reflected at
 * the edge; one or two steps equally likely) instead of the next
 * coordinate candidate; once those run out, with probability T a slot is
 * such a mutation, otherwise the round's exploration ends. Plateau hops:
 * a whole cycle without a move around a center measured at 1.02x or more
 * does not end the search while a variant that qualifies, measured within
 * 2% of the center's median (DRK_EVO_HOP_SPAN), has never been a center:
 * the one with the most knob values no center had (then the best median)
 * becomes the center, and a new cycle searches its lines (at most
 * DRK_EVO_HOPS hops; a center left is never moved back to). Near equals are
 * where noise leaves the center, and the knobs interact: on an H100
 * (2026-12-06) the n-body's center settled on regs=56 carveout=25, whose
 * cache line won nothing, while cache=1 beside regs=56 carveout=50, within
 * noise of it, ran 6% faster. A kernel with nothing to win never hops.
 * Deterministic for a seed (xorshift64*). A proposal the engine finds to compile to the code
 * of one compiled before (drk_evolution_same: every register cap above
 * what the compiler wants makes the same code) is skipped for free, so a
 * plateau of equal builds costs no trials and the line reaches past it.
 *
 * Each round, in order, within the trial budget: the served variant again
 * (to catch it getting slower; while searching on a budget that pays for
 * less than it and one more trial, every 3rd round only, so exploration
 * goes on); the predictor's start (evolve/predict.h) if
 * not yet tried; up to 2 promising variants again (median >= 1.01, fewer
 * than 8 trials, upper end above 1.01 x the better of the served variant
 * and the center: the one that may be best); then exploration. The search
 * settles -- only the served variant's trial and confirmations -- once the
 * neighbourhood is exhausted with nothing to confirm; after 8 rounds of
 * searching that measured trials, when nothing serves that wins twice the margin (a flat space:
 * at 3% noise the center wanders on noise and the search ran its 20 rounds,
 * each costing the program more than its trials); or after 20 rounds of
 * searching regardless; a new center reopens it.
 *
 * Budget. Each round the engine grants trial time (DRK_EVOLVE_BUDGET x the
 * round's GPU time, split among kernels by their share of it); a trial is
 * estimated at launches x the variant's expected time (the default's time
 * over its median; the default's time when untried) and charged what it
 * measured. Unspent time carries over, capped at 4 rounds' grant (or 2
 * trials, when a trial costs more), so a small kernel still gets an
 * occasional trial and the share holds on average; an overrun is paid from
 * the next rounds. The engine should cut a trial short once its first
 * launch is 2x slower than the default's: one sample says enough. */
#ifndef DRK_EVOLVE_SEARCH_H
#define DRK_EVOLVE_SEARCH_H

#include <stdint.h>

#include "evolve/robust.h"
#include "evolve/space.h"

#define DRK_EVO_ROUNDS 20        /* rounds of measured results remembered (rounds with none take no slot) */
#define DRK_EVO_TRIALS 8         /* trials a round at most */
#define DRK_EVO_SAMPLES 8        /* samples a trial keeps (more: 8 evenly spaced order statistics) */
#define DRK_EVO_BANNED 32        /* variants never tried again: failed builds, unequal outputs, dropped */
#define DRK_EVO_SAME 64          /* variants remembered as building another's code */
#define DRK_EVO_TEMPERATURE 0.2  /* chance that an exploration slot is a mutation */
#define DRK_EVO_MUTATION_STEPS 2 /* a mutation is 1..this many index steps from the center */
#define DRK_EVO_MARGIN 0.01      /* faster (or slower) by at least this to count */
#define DRK_EVO_NOISE_TRIALS 10  /* trials of 3 samples or more before the kernel's noise is known */
#define DRK_EVO_TRUST_TRIALS 2   /* trials before a variant is trusted */
#define DRK_EVO_TRUST_Z 3.0      /* standard errors its median must be above 1 to be trusted */
#define DRK_EVO_START_Z 2.0      /* the same for the predictor's start (chosen before any trial) */
#define DRK_EVO_CHANGE_Z 4.0     /* a served variant's latest trial this far below its history: times changed */
#define DRK_EVO_CONFIRM 2        /* promising variants measured again a round */
#define DRK_EVO_SERVED_EVERY 3   /* rounds between the served variant's trials while searching on a tight budget */
#define DRK_EVO_CONFIRM_MAX 8    /* trials after which a promising variant is not measured again */
#define DRK_EVO_SEARCH_ROUNDS 20 /* rounds of searching before the search settles regardless */
#define DRK_EVO_BARREN_ROUNDS 8  /* measured rounds of searching after which one with no 2-margin win settles */
#define DRK_EVO_CARRY_ROUNDS 4   /* rounds of grant that unspent budget may add up to */
#define DRK_EVO_HOPS 2           /* plateau hops a search makes at most (see "Exploration") */
#define DRK_EVO_HOP_SPAN 0.02    /* a hop's target measured within this of the center's median */
/* What a capture's trials are charged besides their replays' GPU time
 * (evolve/engine_capture.c's ledger; the simulator charges the first two): each
 * wait for them and each build loaded in drk's context, and each byte
 * their copies, poison and compares read or write and the snapshot
 * copied. tests/bench/switch_cost.c measured the bare switches on the
 * H200 (2026-12-03): rounds of 1500 kernels of 57 us lost 0.26 ms a wait
 * and 0.51 ms a load (10 us kernels: 0.32 and 0.63; 200 us: 0.15 and
 * 0.39). Charged at those (evolve_bench.py, all twelve), the kernels with
 * nothing to win searched longer and ran at 0.972-0.990x of native
 * (stencil5, softmax_rows, gather_rows, saxpy): a searching round costs
 * more than its switches (its timed rounds' kernel records, +4 us a
 * launch; its copies and compares, uncharged then), and naive matmul's
 * corner was found no sooner (its captures' compiles, not the ledger,
 * held them to two in the run). At 1 ms, with bytes charged, those ten
 * ran at 0.989-1.009x (geometric mean 1.0000). Bytes at 2 TB/s, half what
 * the H200's copies reach: never less than the bandwidth they take from
 * a memory-bound kernel (to a compute-bound one, 512 MiB moved cost 0.08
 * ms beyond the wait). */
#define DRK_EVO_WAIT_NS 1000000.0
#define DRK_EVO_LOAD_NS 1000000.0
#define DRK_EVO_BYTE_NS 0.0005
/* Spending ahead. A capture waits while the ledger is below zero -- but
 * while the search has a variant in sight faster than what the program
 * runs (drk_evolution_promise: its range's lower end, beyond noise), the
 * ledger may go below zero by what that variant would save in
 * DRK_EVO_AHEAD_PAYBACK rounds of the kernel's time, at most
 * DRK_EVO_AHEAD_ROUNDS rounds' grant; later rounds' grants pay it back, so
 * the spend over a run stays the budget's. A short kernel's round grants
 * 1.75 ms and a capture costs several (its waits and loads), and a variant
 * serves only once proven on 3 captures: waiting out the ledger each time,
 * naive matmul's 1.10x corner came by round 10 in 0 of 20 of the
 * simulator's seeds (1% noise), spending ahead in 20 of 20 (3% noise: 0
 * and 7); the kernels with nothing to win spend no more (their most
 * GPU share 2.79% and 2.69% of a run either way: noise rarely holds a
 * variant beyond it), and none serves below 0.99x. tests/unit/test_search.c,
 * "as the engine pays". */
#define DRK_EVO_AHEAD_ROUNDS 12.0
#define DRK_EVO_AHEAD_PAYBACK 4.0
#define DRK_EVO_BUDGET_DEFAULT 0.02 /* DRK_EVOLVE_BUDGET's default: 2% of GPU time on trials */

/* ---- The evolution of one kernel at one shape class ---- */

typedef struct drk_evo_trial {
    uint32_t id;                 /* drk_variant_id */
    uint32_t n;                  /* samples kept */
    float s[DRK_EVO_SAMPLES];    /* speedups: default / variant, paired */
} drk_evo_trial;

typedef struct drk_evo_round {
    uint64_t round;              /* the evolution's round it was measured in */
    unsigned ntrials;
    drk_evo_trial t[DRK_EVO_TRIALS];
} drk_evo_round;

typedef enum drk_evo_state {
    DRK_EVO_SEARCHING,           /* exploring */
    DRK_EVO_SETTLED,             /* only the served variant is measured again */
} drk_evo_state;

typedef struct drk_evolution {
    const drk_space *space;
    uint64_t rng;
    uint64_t round;              /* rounds begun; the open one's number */
    int open;
    drk_evo_state state;
    unsigned search_rounds;      /* rounds spent searching since the start (or the last drop) */
    unsigned measured_rounds;    /* of them, rounds that measured a trial */

    /* The circular memory: mem[(head + i) % DRK_EVO_ROUNDS], i < count, oldest first. */
    drk_evo_round mem[DRK_EVO_ROUNDS];
    unsigned head, count;

    uint32_t start;              /* the predictor's first candidate; DRK_VARIANT_NONE: none */
    uint32_t center;             /* exploration's center (0: the default) */
    unsigned dim;                /* the dimension the coordinate search is on */
    unsigned cycle_moves;        /* center moves in the current cycle */
    int exhausted;               /* a whole cycle moved nothing, and no plateau hop is left */
    uint32_t visited[DRK_EVO_HOPS + 1]; /* centers whose neighbourhood a whole cycle searched */
    unsigned nvisited;
    uint32_t served;             /* DRK_VARIANT_NONE: the default */
    uint64_t served_round;       /* the round whose end chose it: its trials after it are measured while it serves */

    uint32_t pending[DRK_EVO_TRIALS]; /* proposed this round, not yet recorded */
    double pending_ns[DRK_EVO_TRIALS];
    unsigned npending, proposed;      /* proposed: this round, recorded or not */
    unsigned confirms;                /* of them, promising ones measured again */
    int explore_done;                 /* exploration has nothing more this round */

    uint32_t banned[DRK_EVO_BANNED];
    unsigned nbanned, ban_next;
    uint32_t same[DRK_EVO_SAME];      /* built the same code as a variant proposed before */
    unsigned nsame, same_next;

    double default_ns;           /* the default's time this round */
    unsigned launches;           /* launches a trial */
    double credit_ns, reserved_ns;

    /* Totals, for the report. */
    uint64_t trials, samples, drops, switches, sames;
    uint64_t explorations, mutations; /* exploration proposals; of them, mutations */
    uint64_t hops;                    /* plateau hops */
    double granted_ns, spent_ns;
} drk_evolution;

/* A fresh search of `s` (which must outlive it), random stream from `seed`;
 * `start`: the predictor's candidate (NULL or the default: none). */
void drk_evolution_init(drk_evolution *e, const drk_space *s, uint64_t seed, const drk_variant *start);

/* Opens a round: `budget_ns` of trial time granted, the default measured at
 * `default_ns` a launch this round, `launches` launches (samples) a trial.
 * Proposals of an earlier round not recorded are forgotten (proposed again
 * later, in the same order: a variant still compiling is simply late). */
void drk_evolution_begin_round(drk_evolution *e, double budget_ns, double default_ns, unsigned launches);

/* Up to `max` variants to try now, in order, within what is left of the
 * budget; the number written (0: nothing more this round). A second call
 * continues where the first left off. */
unsigned drk_evolution_next(drk_evolution *e, drk_variant *out, unsigned max);

/* What a trial of `v` measured: `n` paired speedups (default / v). Charged
 * to the budget (the default's time over each speedup). A second record of
 * the same variant in a round adds to its trial. */
void drk_evolution_record(drk_evolution *e, const drk_variant *v, const float *speedups, unsigned n);

/* `v` cannot be used (its build failed, its outputs differed): never
 * proposed again by this search. */
void drk_evolution_reject(drk_evolution *e, const drk_variant *v);
/* `v` builds the same code as a variant proposed before (the engine
 * compared their cubins): never proposed again, and a proposal of this
 * round it was does not count against the round's trials. Nothing is
 * charged; the twin's measurements stand for both. */
void drk_evolution_same(drk_evolution *e, const drk_variant *v);
/* Whether `v`, not rejected or dropped, measures faster than the default
 * by the margin beyond noise over the memory (its stats in *st): a variant
 * the search chose once and still worth serving. */
int drk_evolution_worth_serving(const drk_evolution *e, const drk_variant *v, drk_ratio_stats *st);

/* What the search has in sight beyond what the program runs (`running`;
 * NULL: the default): the lower end of the range of the best variant
 * measured faster than the default by the margin beyond noise, not
 * rejected or dropped, over the running variant's median (the default's:
 * 1); 1 when there is none. What a budget may spend ahead for. */
double drk_evolution_promise(const drk_evolution *e, const drk_variant *running);

typedef struct drk_evo_decision {
    int serve;                   /* 1: serve `variant`; 0: the default */
    drk_variant variant;
    drk_ratio_stats stats;       /* the served variant's, over the memory (n 0 for the default) */
    int changed;                 /* what is served changed this round */
    int dropped;                 /* the served variant was withdrawn this round: it measured slower than the
                                  * default (never tried again), or than it used to (the search starts over) */
    drk_evo_state state;
} drk_evo_decision;

/* Closes the round: drops, trust, what to serve from the next launch on. */
drk_evo_decision drk_evolution_end_round(drk_evolution *e);

/* What is served now: 1 and *out, or 0 (the default). */
int drk_evolution_serving(const drk_evolution *e, drk_variant *out);
/* In an open round none of whose variants was proposed yet: 1 when its
 * first proposal will be the served variant, measured again (the budget
 * pays for it, and it is due); 0 when this round leaves it unmeasured. */
int drk_evolution_served_due(drk_evolution *e);

/* Variant `v`'s samples over the memory (n 0: none). */
drk_ratio_stats drk_evolution_stats(const drk_evolution *e, const drk_variant *v);
/* Trials of `v` in the memory. */
unsigned drk_evolution_trials_of(const drk_evolution *e, const drk_variant *v);
/* The kernel's timing noise: the median over the memory's trials of each
 * trial's own spread (a standard deviation of one sample; 0: none yet). */
double drk_evolution_noise(const drk_evolution *e);

#endif
