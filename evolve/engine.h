/* The evolution engine: the parts of docs/evolve.md joined on drk's thread.
 *
 * As rounds close (GPU times, evolve/gputime.h), the engine picks the
 * hottest kernel-shape it may evolve (PTX kept, an evolvable flow, not
 * cooperative, DRK_EVOLVE_ONLY/SKIP) and works on one at a time:
 *   1. capture a real launch's bytes (evolve/capture.h), place its pointers
 *      (evolve/reach.h, the resolver the wiring gives) within the copy
 *      budget, make snapshot buffers, and capture a launch with its
 *      snapshot;
 *   2. the proof's reference on it (evolve/proof.h): a nondeterministic
 *      original ends the kernel's evolution;
 *   3. one search round (evolve/search.h) on that launch: each proposed
 *      variant built (evolve/source.h), proven bitwise equal on it, and
 *      timed paired with the original (evolve/trial.h); unequal ones are
 *      rejected for good;
 *   4. the search's decision served (drk_registry_serve) once the variant
 *      was proven equal on DRK_PROOF_LAUNCHES distinct captured launches;
 *      withdrawn when the search drops it;
 *   then the next launch is captured (new inputs), until the search settles.
 * Everything runs in the program's primary context of the kernel's device
 * (pushed on drk's thread) on drk's own stream; a program call is never
 * waited for. A device or driver failure ends that kernel's evolution with
 * one log line; out of memory skips a round. One caller: drk's thread (and
 * the exit, once it stopped). */
#ifndef DRK_EVOLVE_ENGINE_H
#define DRK_EVOLVE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"
#include "evolve/gputime.h"
#include "evolve/reach.h"

typedef struct drk_engine_settings {
    double budget;              /* DRK_EVOLVE_BUDGET: trial GPU time over the program's kernel time */
    size_t copy_max;            /* DRK_EVOLVE_COPY_MAX: bytes a launch's snapshot may take */
    const char *only, *skip;    /* DRK_EVOLVE_ONLY / DRK_EVOLVE_SKIP: comma-separated fnmatch patterns ("" none) */
    const void *fatbin;         /* drk's kernels (compare, poison); NULL: host compares */
    drk_extent_fn resolve;      /* where an address lies */
    uint32_t cooperative_entries; /* bit e: launch shapes of entry label e are cooperative launches */
    const char *plant;          /* DRK_EVOLVE_PLANT: the variant (its text) built wrong on purpose ("" none) */
    unsigned turn;              /* DRK_EVOLVE_TURN: search rounds in a row while a kernel-shape awaits its first */
    unsigned compile_threads;   /* DRK_EVOLVE_COMPILE_THREADS: a batch's compiles at once (0 or 1: one at a time) */
    int spans;                  /* DRK_EVOLVE_SPANS: replays restore only what may differ (drk_proof_work) */
    struct drk_cache *cache;    /* where search results are kept between runs; NULL: none */
    /* Opens the cache when the first kernel-shape is taken up, so that a
     * program with nothing to evolve makes no directory; NULL: `cache` as is. */
    struct drk_cache *(*open_cache)(void);
} drk_engine_settings;

/* Once, at configure: the driver table (copied). */
void drk_engine_configure(const drk_driver *drv);
/* Turns the engine on (drk's thread, once). */
void drk_engine_start(const drk_engine_settings *s);
int drk_engine_on(void);
/* A round closed (the latest kept one). */
void drk_engine_round(const drk_round *r);
/* Rounds in a row, up to the latest, that ended with nothing to search or
 * measure again: while there are some, the caller may rest the kernel
 * records the engine reads its rounds from. */
unsigned drk_engine_idle_rounds(void);
/* Kernel-shapes the engine has taken up so far (searched, or refused):
 * 0 while the first rounds may still lack a kernel's facts. */
unsigned drk_engine_targets(void);
/* 1 once the program has launched a kernel the engine could take up (named,
 * its image read, every pointer of its PTX found, not excluded by
 * DRK_EVOLVE_ONLY/SKIP): until then evolution needs no GPU times. drk's
 * thread; reads the registry, takes no lock. */
int drk_engine_could_evolve(void);
/* drk's thread, once CUPTI has started for such a kernel: a helper thread
 * makes drk's context for trials on its device now, while the first
 * rounds are timed, rather than when a kernel is chosen. */
void drk_engine_prepare(void);
/* 1 while a search runs that needs no round's records (its kernel's time
 * is known): the caller may rest them but for a round now and then. */
int drk_engine_searching(void);
/* A round passed untimed (kernel records resting): the search in progress
 * is granted the latest timed round's kernel time and goes on, and it
 * counts toward measuring served variants again; 1 when records are wanted
 * (a variant is due to be measured again, or a target ended and the next
 * is to be chosen from a timed round, where one could be). */
int drk_engine_round_untimed(void);
/* Rounds the active search waits, at the latest timed round's kernel
 * time, for the budget to pay for its next capture (0: none). */
unsigned drk_engine_budget_rounds(void);
/* 1 while the engine works on no kernel and a timed round could give it
 * none: no hot kernel-shape of the latest timed round waits for a turn,
 * and no kernel-shape was launched for the first time since. A search that
 * ended then wants no timed round to choose the next from. */
int drk_engine_nothing_to_choose(void);
/* No timed round could give the engine a kernel-shape to choose (as in
 * drk_engine_nothing_to_choose, a search under way or not), and nothing
 * ran since the latest timed round but kernel-shapes the engine has taken
 * up (searched, settled or refused): a timed round could show nothing new
 * to become hot. */
int drk_engine_nothing_new(void);
/* A program thread, right after its synchronize (cuCtxSynchronize,
 * cuStreamSynchronize) returned success: its context's queue is empty, so
 * a served copy drk asked for is loaded into it now, in well under a
 * millisecond instead of waiting for a deep queue. One atomic load when
 * nothing is asked. */
void drk_engine_quiet(void);
/* In a fork child: no served copy is asked for (the parent's context is
 * not the child's). */
void drk_engine_after_fork_child(void);
/* A program thread whose device allocation failed for want of memory:
 * drk's thread gives back all the device memory evolution holds (its
 * context: copies, trial buffers, builds) at its next tick, for good.
 * Waits up to `wait_ms` for it; 1 when it was given back (the allocation
 * is worth another try), 0 when evolution held none or it took longer.
 * One atomic load when drk holds nothing. */
int drk_engine_give_back(unsigned wait_ms);
/* drk's thread, each tick whatever its timing's state: gives it back if asked. */
void drk_engine_give_back_due(void);
/* Each tick: captures taken are worked on. A capture with its snapshot
 * waits for `quiet` to say the program's GPU is idle (its trials then take
 * no time from the program's kernels), at most 2 s or two rounds; NULL:
 * at once. */
void drk_engine_tick(int (*quiet)(void));
/* 1 while a capture waits for `quiet`: the caller ticks often (1 ms). */
int drk_engine_holding(void);
/* At exit, after drk's thread stopped: disarms, frees trials (served
 * variants stay loaded: launches may still use them). */
/* A program thread, before it unloads module or library `owner`: once
 * this returns no trial launches a kernel of it (a replay in flight is
 * waited for: one launch), and its targets end at drk's next tick. */
void drk_engine_unloading(uintptr_t owner);

void drk_engine_stop(void);

/* ---- For the report ---- */

typedef enum drk_target_state {
    DRK_TARGET_CAPTURING,       /* waiting for a launch to capture */
    DRK_TARGET_SEARCHING,
    DRK_TARGET_SETTLED,         /* the search settled: its choice is served (or the default) */
    DRK_TARGET_REFUSED,         /* not evolved: `why` */
    DRK_TARGET_FAILED,          /* ended by a device or driver failure: `why` */
} drk_target_state;

typedef struct drk_engine_row {
    const char *name;
    uint32_t grid[3], block[3], shared_bytes;
    drk_target_state state;
    char why[192];              /* refused, failed, or the last rejection */
    unsigned captures;          /* launches captured with their snapshot */
    unsigned rounds;            /* search rounds */
    unsigned tried, proven, rejected, trusted;
    unsigned same_code;         /* variants not tried: their code was a variant's compiled before */
    unsigned hops;              /* the search's plateau hops (evolve/search.h) */
    char serving[96];           /* the served variant ("default" if none) */
    double speedup;             /* its speedup (1: default): run_speedup once timed, else replay_speedup */
    double run_speedup;         /* in the program: the original's median launch over the served variant's,
                                 * each timed in a round that ran it throughout (0: not both timed yet) */
    double replay_speedup;      /* on replays in drk's context (several times too high under a busy program) */
    double build_ms;            /* total wall time of builds */
    unsigned builds;
    double build_ms_max;
    int from_cache;             /* served from the first launch on a result an earlier run found */
    uint64_t trial_ns;          /* GPU time of its replays */
    uint64_t trial_bytes;       /* bytes its trials' copies, poison and compares read and wrote, its snapshots'
                                 * copies included (what the budget charges besides the GPU time) */
    uint64_t saved_ns;          /* GPU time its served variant saved, estimated: the variant's time in each round
                                 * it served x (speedup - 1, the speedup in the program once timed there, else on
                                 * replays); an untimed round counted as the latest timed one */
    size_t snapshot_bytes;
} drk_engine_row;

typedef struct drk_engine_totals {
    int on;
    const char *off;            /* why not, when off */
    unsigned kernels, evolved, refused, failed;
    uint64_t trial_ns, program_ns; /* replays' GPU time; the program's kernel time over the rounds seen */
    uint64_t trial_bytes;       /* the rows' trial_bytes, summed (targets forgotten included) */
    double budget;
    unsigned rounds;
    double researched_share;
    unsigned cache_hits, cache_stored; /* results found in the cache; results written to it */
    unsigned partial_hits, partial_stored; /* searches an earlier run ended, gone on from; ended by this run's exit
                                            * and written (their best so far) */
    unsigned cubin_hits, cubins_stored; /* variants' cubins loaded from the cache (no compile); written to it */
    unsigned borrowed_loads;    /* variants that ran a module another loaded (the same cubin: carveout siblings) */
    double cubin_hit_ms_mean, cubin_hit_ms_max; /* a cubin hit's time: the cache read and the module's load */
    double cubin_read_ms_mean;  /* of it, the cache's part: the key, the read and its check (the rest is the
                                 * driver's load, which waits for the GPU to switch to drk's context) */
    uint64_t own_ctx_bytes;     /* device memory drk's context took (trials run there); 0 if none was made */
    int gave_back;              /* the program ran out of device memory: drk gave its context back, trials ended */
    uint64_t saved_ns;          /* the rows' saved_ns, summed */
    unsigned served_loads;      /* served variants loaded into the program's context */
    unsigned quiet_loads;       /* of them, loaded at the program's synchronize (drk_engine_quiet) */
    unsigned held_trials;       /* captures whose trials waited for the program's GPU to be idle */
    unsigned held_busy;         /* of them, begun while it was still busy (after 2 s or two rounds) */
    double held_ms_max;         /* the longest such wait */
    double served_load_ms_max;  /* the longest of those loads (it may wait for the program's queue) */
    unsigned cache_serves;      /* earlier runs' results served from the cache */
    double cache_serve_ms_mean, cache_serve_ms_max; /* their time to serve: the cubin's read (or compile) and the
                                                     * load into the program's context (at a synchronize) */
} drk_engine_totals;

size_t drk_engine_rows(drk_engine_row *out, size_t max);
drk_engine_totals drk_engine_totals_get(void);

#endif
