/* What the engine's files (evolve/engine.c and its parts engine_*.c)
 * share: a target and its builds, the constants and state more than one
 * of them uses, and the functions one calls in another, each group under
 * the file that defines it. Shared only by the engine's own files; not for
 * other folders (evolve/engine.h is the engine's interface). Hidden as all
 * of drk's internal symbols are; drk_eng_ keeps the names apart from the
 * rest of the library's. */
#ifndef DRK_EVOLVE_ENGINE_INTERNAL_H
#define DRK_EVOLVE_ENGINE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cache.h"
#include "evolve/capture.h"
#include "evolve/engine.h"
#include "evolve/predict.h"
#include "evolve/proof.h"
#include "evolve/registry.h"
#include "evolve/search.h"
#include "evolve/source.h"
#include "evolve/space.h"
#include "evolve/trial.h"

#define TARGETS 64          /* kernel-shapes evolved (or refused) at most */
#define BUILT 8             /* variants kept built per target */
#define PAIRS 4             /* paired timings a variant a round */
#define BATCH 6             /* candidates proven and timed a wait (each holds a build slot: < BUILT - 1) */
#define CODES 64            /* distinct codes remembered per target, to skip a variant that makes one again */
#define CHOICES 2           /* the search's choices kept being proven until they can serve */
#define RECHECK 8           /* rounds a served variant rests before it is measured against the original again */
#define RECHECK_MAX 128     /* and at most, once measurements kept finding it as fast (each doubles the rest) */

/* A variant built for a target, and what its proofs found. */
struct built {
    uint32_t id;                /* drk_variant_id in drk_space_ptx; DRK_VARIANT_NONE: free slot */
    drk_built jit;              /* in drk's context: the PTX build (its trials ask for the carveout a launch) */
    int borrowed;               /* jit's module is another slot's (the same code): not unloaded with this one */
    uint64_t code;              /* its code's digest (drk_cubin_code_digest); 0: unknown */
    drk_variant attrv;          /* the attribute source's variant (the carveout), set again to serve */
    void *cubin;                /* what jit loaded (malloc'd): loaded again to serve */
    size_t cubin_len;
    CUmodule pmodule;           /* served: the cubin loaded into the program's context */
    CUfunction pfn;             /* its function there (the carveout set), or NULL */
    unsigned proven;            /* captured launches it was proven equal on */
    uint64_t proven_on;         /* the captures it was proven on: bit (capture % 64) (a launch counts once) */
    int busy;                   /* in the batch being tried: not evicted by its builds */
};

struct target {
    const drk_kernel_record *rec;
    int slot;                   /* its shape's slot in rec */
    drk_launch_shape shape;
    uint64_t cls;
    drk_source_kernel sk;
    drk_ptx_text ptx;           /* sk.ptx: drk's copy, whole while builds may come (the program may unload its own) */
    atomic_int gone;            /* its module was unloaded: no replay launches its handle again (the fence) */
    double ledger_ns;           /* budget granted less trial time spent: no capture is armed while below 0 */
    drk_target_state state;
    char why[192];
    drk_evolution evo;
    struct built b[BUILT];
    unsigned waited;            /* rounds the armed capture waited */
    int await_round;            /* searched on this round's capture: the next is armed when the round closes */
    unsigned rested_at;         /* settled serving a variant: the round it last was (for RECHECK) */
    unsigned recheck_every;     /* rounds from there until it is measured again: RECHECK, doubled by each that
                                 * kept it, up to RECHECK_MAX */
    int rechecking;             /* the capture in flight is for measuring the served variant again */
    int stored;                 /* its result went to the cache (2: with the speedup timed in the program) */
    unsigned captures, rounds, tried, proven, rejected, trusted;
    unsigned same;              /* variants not tried: they compiled to the code of one compiled before */
    struct code {
        uint64_t key;           /* the code's digest with the variant's attributes */
        uint32_t id;            /* the first variant that made it */
    } codes[CODES];             /* the latest CODES distinct codes compiled */
    unsigned ncodes;
    CUfunction served;          /* in the program's context: what its launches get */
    drk_variant served_v;
    CUfunction orig;            /* the original in drk's context (orig_ctx) */
    CUcontext orig_ctx;
    double speedup, build_ms, build_ms_max;
    unsigned builds;
    uint64_t trial_ns;
    uint64_t trial_bytes;       /* bytes its trials' copies, poison and compares moved, snapshots included */
    double default_ns;          /* the original's median GPU time in the latest round */
    double credit_ns;           /* trial time granted and not yet used */
    double saved_ns;            /* GPU time the served variant saved, estimated (the report's) */
    uint64_t served_round_ns;   /* its kernel-shape's time in the latest timed round it served */
    uint64_t round_ns;          /* its kernel-shape's time in the latest timed round that ran it */
    /* The program's own launches, timed by the per-kernel timing: their
     * median in the latest round that ran the original throughout, and in
     * the latest that ran what serves now throughout (0: none yet); and the
     * rounds seen when what serves last changed. */
    double run_default_ns, run_served_ns;
    unsigned changed_at;
    /* The capture in flight. */
    drk_capture_plan plan;
    size_t snapshot_bytes;
    /* Its search's result between runs (the cache). */
    drk_cache_key key;
    int keyed;
    int from_cache;             /* serving an earlier run's result, proven again before it settles */
    int plant_tried;            /* DRK_EVOLVE_PLANT's variant was tried on it */
    int came_from_cache;        /* what it serves was an earlier run's result (the report's) */
    /* An earlier run's result waiting for its copy in the program's
     * context (loaded at a synchronize) before it serves; the round it
     * was asked in, and the cache's read of its cubin. */
    int cached_pending;
    int search_on;              /* its search goes on once the cached result is proven again (PARTIAL_SERVING) */
    unsigned pending_round;
    double pending_read_ms;
    unsigned timed_ask;         /* changed_at + 1 when records were asked back to time what serves */
    unsigned turn_rounds;       /* search rounds since its turn began */
    drk_proof_ref prev;         /* the latest capture's settled reference (prev.state EQUAL): the next is queued */
    int yielded;                /* its turn passed mid-search: it goes on when it is chosen again */
    /* Variants the search chose to serve that do not serve (yet): each is
     * proven again on every capture, so one the search has moved on from
     * still reaches DRK_PROOF_LAUNCHES and may serve meanwhile. */
    uint32_t choices[CHOICES];
    unsigned nchoices;
};

/* The carveout variant `attr` asks for (-1: none). */
static inline int carveout_of(const drk_variant *attr)
{
    return drk_source_attr.knobs[0].values[attr->k[0] < drk_source_attr.knobs[0].nvalues ? attr->k[0] : 0];
}

static inline drk_trial_fn trial_fn(const struct built *b)
{
    return (drk_trial_fn){b->jit.fn, carveout_of(&b->attrv)};
}

static inline int proven_at(const struct built *b, unsigned capture)
{
    return (int)(b->proven_on >> (capture & 63) & 1);
}

static inline double ms_of(uint64_t ns) { return (double)ns / 1e6; }

/* What an earlier run left of a search it ended (engine_target.c's result_get). */
enum { PARTIAL_BEST = 1, PARTIAL_SERVING = 2 };

/* engine.c: the settings, the targets, the rounds and the report's totals. */
extern drk_driver drk_eng_drv;
extern drk_engine_settings drk_eng_cfg;
extern int drk_eng_on, drk_eng_started;
extern unsigned drk_eng_compile_threads;
extern struct target drk_eng_targets[TARGETS];
extern _Atomic unsigned drk_eng_ntargets;
extern struct target *drk_eng_active;
extern int drk_eng_want_choice;
extern drk_predictor drk_eng_predictor;
extern unsigned drk_eng_rounds_seen;
extern unsigned drk_eng_arms;   /* captures armed so far (drk_eng_arm): a capture held for a quiet moment is
                                 * stale once another was armed */
/* The report's totals, counted by the engine's parts (a forked child starts them at 0). */
struct drk_eng_totals {
    uint64_t trial_ns, trial_bytes; /* trials' GPU time; the bytes they moved */
    uint64_t program_ns;        /* the program's kernel time over the rounds seen (a chosen target's credit too) */
    double charged;             /* what every capture's ledger was charged */
    double researched_sum;      /* the rounds' shares of kernels at a new class, summed */
    unsigned cache_hits, cache_stored; /* results found in the cache; written to it */
    unsigned partial_hits;      /* searches an earlier run ended, gone on from */
    unsigned partial_stored;    /* and ended by this one */
    unsigned cubin_hits, cubins_stored; /* cubins loaded from the cache; written to it */
    double cubin_hit_ms_sum, cubin_hit_ms_max, cubin_read_ms_sum; /* those loads' times, and their reads' */
    uint64_t build_wall_ns;     /* builds' wall time (nvJitLink on the CPU, the load): not the GPU's */
    unsigned builds_made;       /* modules loaded in drk's context by builds (each a switch of the GPU) */
    unsigned borrowed_loads;    /* builds that borrowed a module another build loaded (the same cubin) */
    unsigned served_loads;      /* served copies loaded into the program's context */
    double served_load_ms_max;
    unsigned quiet_loads;       /* of them, at the program's synchronize */
    unsigned held, held_busy;   /* captures whose trials waited for the program to be quiet; of them, begun
                                 * while it was still busy (the wait's limit) */
    double held_ms_max;         /* the longest such wait */
    /* Earlier runs' results served from the cache: the cubin's read and its
     * load into the program's context (at a synchronize, or by drk's thread). */
    unsigned cache_serves;
    double cache_serve_ms_sum, cache_serve_ms_max;
    size_t own_ctx_bytes;       /* device memory drk's context took when made */
};
extern struct drk_eng_totals drk_eng_totals;

/* engine_ctx.c: drk's own context and the trials' means in it. */
extern drk_trial_env drk_eng_env;
extern int drk_eng_env_open, drk_eng_env_device;
extern CUcontext drk_eng_prog_ctx, drk_eng_own_ctx;
extern int drk_eng_memory_out;
int drk_eng_push(int dev);
void drk_eng_pop(void);
int drk_eng_push_own(void);
void drk_eng_pop_own(void);
void drk_eng_close_own(void);
void drk_eng_own_join(void);
int drk_eng_ensure_env(int dev);
void drk_eng_ctx_after_fork(void);

/* engine_target.c: targets, and the served modules kept until exit. */
void drk_eng_bury(CUmodule m);
void drk_eng_unload_graves(void);
unsigned drk_eng_graves(void);
void drk_eng_graves_after_fork(void);
void drk_eng_free_built(struct target *t, struct built *b);
int drk_eng_wants_proof(const struct target *t, const struct built *b);
int drk_eng_count_proof(struct built *b, unsigned capture);
int drk_eng_is_served(const struct target *t, const struct built *b);
void drk_eng_free_snapshot(struct target *t);
void drk_eng_served_changed(struct target *t);
void drk_eng_withdraw(struct target *t);
double drk_eng_run_speedup(const struct target *t);
double drk_eng_best_speedup(const struct target *t);
void drk_eng_end_target(struct target *t, drk_target_state st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void drk_eng_rest(struct target *t, const char *why);
int drk_eng_recheck_due(const struct target *t);
void drk_eng_end_by_ref(struct target *t, const drk_proof_ref *ref);
void drk_eng_yield_turn(struct target *t);
struct target *drk_eng_find_target(const drk_kernel_record *r, int slot);
void drk_eng_features_of(const struct target *t, drk_kernel_features *f);
int drk_eng_first_evolvable(int on_device);
int drk_eng_key_of(const struct target *t, int dev, const char *extra, drk_cache_key *out);
int drk_eng_result_put(struct target *t, const drk_variant *v, double speedup, int partial);
struct target *drk_eng_make_target(const drk_kernel_record *r, int slot, const drk_time_row *row);
void drk_eng_arm(struct target *t);

/* engine_build.c: variants built, and compiles ahead. */
extern drk_evolution drk_eng_peek;
struct built *drk_eng_built_of(struct target *t, uint32_t id);
void drk_eng_aheads_clear(void);
void drk_eng_aheads_forget(const struct target *t);
void drk_eng_compile_ahead(struct target *t, const drk_variant *cand, unsigned n, const drk_evolution *from);
drk_trial_fn drk_eng_build(struct target *t, const drk_variant *v, int *same, char *why, size_t len);
struct built *drk_eng_cached_slot(struct target *t, const drk_variant *v);

/* engine_serve.c: what serves, and the served copy's load at a quiet
 * moment (one request at a time). */
void drk_eng_quiet_take(int all);
void drk_eng_quiet_after_fork(void);
void drk_eng_from_cache(struct target *t, const drk_variant *v, double speedup);
uint32_t drk_eng_served_id(const struct target *t);
void drk_eng_publish(struct target *t, const drk_evo_decision *d);
void drk_eng_serve_pending(void);

/* engine_capture.c: a captured launch, and the launches kept for proofs. */
void drk_eng_load_original_ahead(struct target *t);
void drk_eng_kept_forget(const struct target *t);
void drk_eng_capture_after_fork(void);
int drk_eng_prove_kept(struct target *t, const drk_variant *v);
void drk_eng_captured(struct target *t, const drk_capture_got *got);

/* engine_round.c: one search round on a captured launch. */
extern const drk_proof_ref *drk_eng_ref_prev;
extern const drk_proof_ref drk_eng_first_launch;
void drk_eng_reject(struct target *t, const drk_variant *v, const char *why, const char *where);
double drk_eng_round_credit(const struct target *t);
void drk_eng_search_round(struct target *t, drk_trial *tr, drk_proof_ref *ref);

#endif
