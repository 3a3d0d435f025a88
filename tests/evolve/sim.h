/* The search's simulator: recorded variant spaces (tests/evolve/spaces/,
 * measured exhaustively on a GPU by tests/bench/evolve_space.c) replayed on
 * the CPU, as Kernel Tuner's simulation mode replays recorded timings to
 * judge a strategy.
 *
 * A simulated round: the program runs SIM_ROUND_LAUNCHES launches of the
 * kernel with whatever is served; the search is granted 2% of that GPU time
 * (DRK_EVOLVE_BUDGET's default) and proposes trials; each trial is
 * SIM_TRIAL_LAUNCHES launches of the variant, each paired with a launch of
 * the default, both timed as the recorded time x lognormal noise of the
 * given sigma, independently; a sample is their ratio. At the default's
 * speed the budget is 30 launches: 6 trials a round. A trial whose first
 * launch is 2x slower than its default stops there (the engine's early
 * cut). A variant whose build failed or differed is rejected when proposed.
 * With the engine (below), a variant whose build makes code an earlier one
 * made (same registers, stack, optimization level and cache mode; the same
 * carveout) is skipped as the engine skips it, free: the recording has no
 * cubins to compare, so this stands in for the engine's digest. */
#ifndef DRK_TESTS_EVOLVE_SIM_H
#define DRK_TESTS_EVOLVE_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "evolve/predict.h"
#include "evolve/search.h"

#define SIM_VARIANTS 792         /* drk_space_ptx's points */
#define SIM_ROUND_LAUNCHES 1500
#define SIM_TRIAL_LAUNCHES 5
#define SIM_BUDGET 0.02
#define SIM_MAX_ROUNDS 64

typedef struct sim_kernel {
    char name[32];
    uint32_t grid[3], block[3];
    double ms[SIM_VARIANTS];     /* recorded median time; the test may rewrite it */
    int ok[SIM_VARIANTS];        /* built, and bitwise equal to the default */
    uint32_t code[SIM_VARIANTS / 4]; /* per build (the carveout varies fastest): what its code is, as far as the
                                  * recording tells (registers, stack, optimization level, cache mode) */
    drk_kernel_features f;
    double best_ms;              /* the exhaustive best over ok variants */
    uint32_t best_id;
} sim_kernel;

/* Reads a recorded space file (its dims must be drk_space_ptx's); the
 * kernels read, at most `max`; exits on a malformed file. */
unsigned sim_load(const char *path, sim_kernel *out, unsigned max);

/* Recomputes best_ms and best_id after ms changed. */
void sim_best(sim_kernel *k);

typedef struct sim_opts {
    double sigma;                /* lognormal sigma of each timed launch */
    uint64_t seed;
    unsigned rounds;             /* <= SIM_MAX_ROUNDS */
    const drk_variant *start;    /* the predictor's candidate, or NULL */
    unsigned swap_round;         /* planted: at its start the served variant's and the default's times swap; 0 none */
    int engine;                  /* 0: the search alone; else what evolve/engine.c pays and waits for (below) */
    double wait_ns, load_ns;     /* engine: charged besides GPU time for each wait and each load of a new build,
                                  * as the engine's ledger charges WAIT_NS and LOAD_NS (0: not charged) */
    unsigned start_rounds;       /* engine: rounds the program runs (the default) before the search begins */
    int start_credit;            /* engine: the search begins with what those rounds earned, at most
                                  * DRK_EVO_CARRY_ROUNDS rounds' grant (the engine's since 2026-12-03) */
    double ahead_rounds, ahead_payback; /* engine: a capture may spend ahead, down to the smaller of this many
                                  * rounds' grant and this many rounds of what the promise
                                  * (drk_evolution_promise) would save (0: never below 0) */
} sim_opts;

/* With engine set, a round is what evolve/engine.c does with one captured
 * launch, and the budget pays all of its GPU time, as the engine's ledger
 * does: the original run twice (the reference); per candidate one run of
 * the variant (its proof) and its timing; a variant served only once
 * proven on SIM_PROOF_CAPTURES rounds (the original until then); no
 * capture while the ledger is below zero (that round is skipped). The
 * search is granted the budget since its last round, and plans with
 * SIM_ENGINE_PAIRS samples. The timing:
 *  - SIM_ENGINE (the engine's): the original timed SIM_ENGINE_PAIRS times
 *    once a capture; a candidate's runs each a sample against their mean,
 *    one run first, the rest only if it shows the candidate faster by the
 *    margin;
 *  - SIM_ENGINE_PAIRED_SCREEN: pairs (the original and the variant), one
 *    first, the rest only for a candidate faster by the margin;
 *  - SIM_ENGINE_EVERY_PAIR: every pair for every candidate.
 * A round also pays wait_ns for each wait (one a batch of
 * SIM_ENGINE_BATCH candidates, one when none; the capture's reference is
 * queued with its first batch, blind on the first capture) and load_ns
 * for each build loaded the
 * first time (carveout siblings run one loaded module), as the engine's
 * ledger does for the GPU's switches to drk's context. The round's choice,
 * not yet proven on SIM_PROOF_CAPTURES rounds, is proven on the launches
 * kept from the SIM_KEPT rounds before it that it was not proven on (the
 * engine's kept launches): a wait and a run each. A round's search is
 * granted at least SIM_ENGINE_BATCH candidates' runs (the engine's
 * round_credit). */
#define SIM_ENGINE_BATCH 6
enum { SIM_ENGINE = 1, SIM_ENGINE_PAIRED_SCREEN = 2, SIM_ENGINE_EVERY_PAIR = 3 };
#define SIM_PROOF_CAPTURES 3
#define SIM_KEPT 2 /* evolve/engine_internal.h's KEPT */
#define SIM_ENGINE_PAIRS 4

typedef struct sim_result {
    uint32_t served[SIM_MAX_ROUNDS + 1];    /* id served after round r (0: the default); [0] before any */
    double speedup[SIM_MAX_ROUNDS + 1];     /* its true speedup over the default then */
    double vs_best[SIM_MAX_ROUNDS + 1];     /* its true time over the space's best then */
    int dropped[SIM_MAX_ROUNDS + 1];
    uint64_t trials_at[SIM_MAX_ROUNDS + 1]; /* trials run by the end of round r */
    unsigned within;             /* the first round from which served is within 2% of the best to the end */
    unsigned first_trust;        /* the first round a variant was served; 0: never */
    double worst_speedup;        /* the lowest true speedup served, outside the planted window */
    unsigned drop_round;         /* planted: the round the swapped variant was dropped or left for another
                                  * trusted one (no longer served); 0: never */
    int banned_served_again;     /* planted: the dropped variant was served again */
    uint64_t trials, mutations, sames;
    double spent_ns, granted_ns, gpu_ns;
    double engine_ns;            /* engine: the GPU time the rounds' trials took in all */
    drk_evo_state state;
    unsigned settled_at;         /* the first round from whose end on the search stayed settled; 0: never */
    drk_evolution e;             /* the end state */
} sim_result;

/* Where sim_run writes what each round proposed and measured (NULL: nowhere). */
extern FILE *sim_trace;

/* Runs one search over `k` (its ms may be rewritten by a planted swap). */
void sim_run(sim_kernel *k, const sim_opts *o, sim_result *r);

#endif
