/* Trials on the GPU: replays of a captured launch (evolve/capture.h) on
 * drk's own copies, for the proof (evolve/proof.h) and for paired timing,
 * in the context the environment was opened in (the engine's: a context of
 * drk's own on the kernel's device) and on drk's own stream. Run on drk's
 * thread only, with that context current (pushed by the caller).
 *
 * A trial holds, for the launch's allocations (evolve/reach.h), the three
 * buffer sets of the proof (set 0 the snapshot the capture filled; sets 1
 * and 2 allocated here with cuMemAlloc, drk's own, never the pool's), the
 * packed parameters rewritten onto each set, and the two functions it
 * replays (the program's, and the variant under trial). Launches go through
 * CU_LAUNCH_PARAM_BUFFER_POINTER with the rewritten bytes. Everything is
 * queued on drk's stream and waited for at drk_proof_ops.wait or
 * drk_trial_wait: each wait costs the program a switch of the GPU between
 * contexts, so a capture's trials wait a few times, not once a step
 * (docs/evolve.md, "Trials in batches"). Compares use
 * drk_compare from drk's embedded kernels (kernels/) when they load, else
 * copy both sides to the host (the stand-in driver, or a device the fatbin
 * has no code for; said once); poison is drk_poison, or on the host path
 * the pattern copied from a pinned staging buffer (cuMemcpyHtoD). Every
 * driver call is checked: a failure ends the trial with the call and its
 * result in `why`. Device memory running out is DRK_TRIAL_NO_MEMORY, so
 * the engine yields. */
#ifndef DRK_EVOLVE_TRIAL_H
#define DRK_EVOLVE_TRIAL_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"
#include "evolve/image/ptx_flow.h"
#include "evolve/proof.h"
#include "evolve/reach.h"

enum { DRK_TRIAL_OK = 0, DRK_TRIAL_FAILED = -1, DRK_TRIAL_NO_MEMORY = -2 };

/* drk_compare's and drk_poison's ABI (kernels/kernels.h, which evolve/ may
 * not include): mirrored here, checked field by field against the header
 * in tests/unit/test_trial.c. */
#define DRK_TRIAL_COMPARE "drk_compare"
#define DRK_TRIAL_POISON "drk_poison"
#define DRK_TRIAL_KERNEL_BLOCK 256       /* DRK_KERNELS_BLOCK */
#define DRK_TRIAL_KERNEL_BLOCKS_PER_SM 8 /* DRK_KERNELS_BLOCKS_PER_SM */
#define DRK_TRIAL_KERNEL_BYTES 16        /* DRK_KERNELS_BYTES_PER_THREAD */
typedef struct drk_trial_compare_params {
    uint64_t a, b, n, result;
} drk_trial_compare_params;
typedef struct drk_trial_compare_result {
    uint64_t ndiff, first, last, blocks;
    uint32_t done, reserved;
    uint64_t acc_ndiff, acc_first_inv, acc_last_end, acc_blocks;
} drk_trial_compare_result;
typedef struct drk_trial_poison_params {
    uint64_t dst, n, pattern;
} drk_trial_poison_params;

/* Compare slots past the proof's (DRK_PROOF_SLOTS) that a trial keeps for
 * its own checks of timed runs (drk_proof_check_work): so many runs a wait
 * (a batch: 5 of the original, 6 candidates' 3 further runs, the served
 * one's 4 pairs), of DRK_REACH_MAX allocations each. */
#define DRK_TRIAL_CHECKS 40
#define DRK_TRIAL_SLOTS (DRK_PROOF_SLOTS + DRK_TRIAL_CHECKS * DRK_REACH_MAX)

/* Bytes of the host staging buffer of host compares and poison (two halves). */
#define DRK_TRIAL_STAGING (2u << 20)

/* drk's per-context means: its stream, its kernels, a result buffer. */
enum { DRK_TRIAL_KEPT = 3 * DRK_REACH_MAX };
/* Replays in flight between waits (their event pairs; one more waits for
 * the oldest first), and replay times kept for reading after a wait. */
enum { DRK_TRIAL_EVENTS = 64, DRK_TRIAL_TICKETS = 256 };
/* What a replay launches: a function in drk's context and the shared-
 * memory carveout its launches ask for (cuLaunchKernelEx's PREFERRED_
 * SHARED_MEMORY_CARVEOUT attribute, which takes precedence over the
 * function's own; -1: none asked, cuLaunchKernel). Variants that differ
 * only in carveout run one loaded function (the engine loads their code
 * once), each launch asking for its own: on the H200 the attribute held
 * for its launch only (tests/bench/evolve_run.c, BY alt). */
typedef struct drk_trial_fn {
    CUfunction fn;
    int carveout;
} drk_trial_fn;

/* Functions a trial keeps each one's quickest run for (its GPU time). */
enum { DRK_TRIAL_FNS = 24 };
/* A run slower than the quickest of its function's runs read together by
 * this factor was held up by the program's time slice (trial.c,
 * clean_median). */
#define DRK_TRIAL_HELD 1.25

typedef struct drk_trial_env {
    drk_driver drv;
    CUcontext ctx;
    CUstream stream;                /* non-blocking, drk's own */
    CUmodule kernels;               /* drk's kernels, or NULL (host compares) */
    CUfunction compare, poison;
    CUdeviceptr result;             /* DRK_TRIAL_SLOTS drk_compare_results */
    drk_trial_compare_result *host_result; /* pinned: the slots read back at a wait */
    CUevent ev[2 * DRK_TRIAL_EVENTS]; /* a pair around each replay in flight */
    int sm;                         /* the device's SM (major * 10 + minor), for the report */
    int sms;                        /* its multiprocessors, for the kernels' grid */
    void *staging;                  /* pinned, DRK_TRIAL_STAGING bytes, when kernels is NULL */
    char why[192];                  /* open failed; or, opened, why compares are on the host */
    int spans;                      /* trials opened here restore only what may differ (drk_proof_work); 0: the
                                     * whole snapshot before every run */
    struct {
        CUdeviceptr ptr;
        size_t size;
    } kept[DRK_TRIAL_KEPT];         /* buffers freed by trials, kept for the next */
    unsigned nkept;
    uint64_t opened_ns[5];          /* drk_mono_ns as opening began and as each step ended: the stream and
                                     * events, the result buffer, its pinned host copy, drk's kernels */
} drk_trial_env;

/* Device buffers for snapshots and sets, kept between captures. In the
 * program's context cuMemFree (and cuMemAlloc) while its legacy stream has
 * a deep queue held the program's launch calls until the device drained
 * (evolve_bench.py on the H200: up to 0.45 s for the n-body); in drk's own
 * context a kept buffer still saves the allocation. A buffer a trial is
 * done with is kept for the next capture of the same size, and only
 * drk_trial_env_trim or closing frees them. 0, or the driver's error. */
CUresult drk_trial_buf_get(drk_trial_env *env, CUdeviceptr *ptr, size_t size);
void drk_trial_buf_put(drk_trial_env *env, CUdeviceptr ptr, size_t size);
/* Frees kept buffers until at most `keep` bytes stay kept (the engine: at
 * a target's end, what a small next target would reuse). */
void drk_trial_env_trim(drk_trial_env *env, size_t keep);

/* Opens `env` in context `ctx` (current): the stream, events, result
 * buffer, and drk's kernels from `fatbin` (NULL: host compares). 0, or -1
 * with env->why. A fatbin that does not load (or lacks a kernel) is no
 * failure: compares go to the host, env->why says why (logged once a
 * process). The staging buffer is pinned (cuMemHostAlloc), so its copies
 * to the device have completed when they return. */
int drk_trial_env_open(drk_trial_env *env, const drk_driver *drv, CUcontext ctx, const void *fatbin);
void drk_trial_env_close(drk_trial_env *env);

typedef struct drk_trial {
    drk_trial_env *env;
    drk_reach reach;                /* the allocations (alloc[i].size bytes each) */
    CUdeviceptr set[DRK_SETS][DRK_REACH_MAX]; /* set[0]: the snapshot, filled by the capture */
    uint8_t params[DRK_SETS][DRK_PARAMS_MAX]; /* the launch's bytes rewritten onto each set */
    size_t len;
    const drk_ptx_flow *flow;
    uint32_t grid[3], block[3], shared_bytes;
    drk_trial_fn original, variant; /* what run(.., 0) and run(.., 1) launch */
    uint64_t gpu_ns;                /* the events' time of its replays so far (see drk_trial_gpu_ns) */
    struct {
        drk_trial_fn fn;
        unsigned runs;              /* replays of fn timed */
        double min_ns;              /* the quickest of them */
    } fns[DRK_TRIAL_FNS];
    unsigned nfns;
    double other_ns;                /* replays of functions past DRK_TRIAL_FNS: their events' time */
    drk_trial_fn ticket_fn[DRK_TRIAL_TICKETS]; /* what replay k ran, at [k % DRK_TRIAL_TICKETS] */
    double original_ns;             /* drk_trial_time_original's median (held-up runs left out); 0 before */
    int full;                       /* time every pair, however slow (a served variant measured again: a drop
                                     * wants its samples) */
    /* Set by the caller, or NULL: held around each replay, and the
     * replay refused once *gone is set (the program unloads the kernel's
     * module under the same lock, so its handle is never launched after). */
    pthread_mutex_t *fence;
    const atomic_int *gone;
    int unloaded;                   /* a replay was refused: the module went */
    char why[192];
    /* Queued since the last wait. The fence is held from the first replay
     * queued to the wait, so an unload waits for drk's replays in flight
     * (a batch is queued with nothing slow in between: builds come first). */
    int fenced;
    unsigned slots;                 /* 1 + the highest compare slot queued */
    uint32_t slot_grid[DRK_TRIAL_SLOTS]; /* a compare queued there: its grid (host path: 1); 0: none */
    drk_diff slot_diff[DRK_TRIAL_SLOTS]; /* host path: its result */
    unsigned checks;                /* timed variant runs checked since the last wait (their slots) */
    drk_proof_work work;            /* what set 2 holds between runs */
    int check_whole;                /* with whole copies (work.spans 0), timed runs compared with O1 all the same
                                     * (after a tainted wait: a run that differs is still named) */
    unsigned tickets, harvested;    /* replays queued; those whose times were read */
    unsigned waits;                 /* waits for the GPU so far (the budget charges each a context switch) */
    uint64_t moved;                 /* bytes drk's copies, poison and compares read and wrote (the budget charges them) */
    /* Set by the caller after the reference, or NULL: timed runs are
     * prepared as a variant's proof run is (W poisoned when ref->poisoned),
     * so that run's time is a sample like theirs. */
    const drk_proof_ref *ref;
    double ns[DRK_TRIAL_TICKETS];   /* replay k's time at [k % DRK_TRIAL_TICKETS]; -1: lost with a failed wait */
} drk_trial;

/* Makes a trial of a captured launch: `bytes` (len) as captured, reaching
 * `reach`, whose snapshot lies in `snap` (drk's buffers, kept by the
 * trial and freed with it). Allocates sets 1 and 2. DRK_TRIAL_OK,
 * DRK_TRIAL_NO_MEMORY or DRK_TRIAL_FAILED (why). The snapshot is the
 * trial's from the call on, whatever it returns: close the trial either
 * way (a failed open has freed sets 1 and 2 already). t->variant.fn is
 * NULL until the caller sets it; the original asks for no carveout. */
int drk_trial_open(drk_trial *t, drk_trial_env *env, const drk_ptx_flow *flow, const drk_reach *reach,
                   const CUdeviceptr *snap, const uint8_t *bytes, size_t len, const uint32_t grid[3],
                   const uint32_t block[3], uint32_t shared_bytes, CUfunction original);
/* Frees sets 1 and 2 and the snapshot. */
void drk_trial_close(drk_trial *t);

/* The proof's operations on `t` (self = t); run(.., 1) launches t->variant. */
drk_proof_ops drk_trial_ops(drk_trial *t);

/* Timed replays, queued: each of `fn` on set 2 made the snapshot again
 * (drk_proof_fresh: restored where a run may have changed it, with
 * t->work.spans; poisoned as t->ref says), and then, with t->work.spans,
 * compared with O1 (drk_proof_check_work), between a pair of events on
 * drk's stream. _queue_timed returns
 * the replay's ticket (or -1 with why); after drk_trial_wait its time is
 * drk_trial_ticket_ns (-1 with why for a ticket not waited for or too old,
 * or a time of 0, below the events' resolution). Consecutive queues get
 * consecutive tickets. Replays' GPU time is added to t->gpu_ns at waits. */
int drk_trial_queue_timed(drk_trial *t, drk_trial_fn fn);
/* The ticket of the last replay queued (a proof's run, right after
 * drk_proof_variant_queue), or -1. */
int drk_trial_last_ticket(const drk_trial *t);

/* 1 when the last wait's runs rested on a compare that found a difference
 * (drk_proof_work: a variant changed what the runs after it read): no
 * verdict or time read from that wait stands. The caller makes its batch
 * again with whole copies (t->work.spans = 0). */
int drk_trial_tainted(const drk_trial *t);
/* `runs` of them: the first ticket, or -1. */
int drk_trial_queue_runs(drk_trial *t, drk_trial_fn fn, unsigned runs);
int drk_trial_wait(drk_trial *t);
double drk_trial_ticket_ns(drk_trial *t, int ticket);
/* The GPU time the replays waited for so far took: each at the quickest
 * run of its function in this trial. A replay's events also count the
 * program's time slices when the GPU shares itself between the program's
 * context and drk's (the H200, evolve_bench.py's n-body: 24-40 ms a
 * capture by the events, 10-23 ms by the quickest runs), and
 * the runs of one function on the same inputs take the same time on
 * their own; a function timed once counts as its events say. */
double drk_trial_gpu_ns(const drk_trial *t);

/* Paired timing, queued: `pairs` pairs, the original then the variant
 * (order alternating pair by pair); the first ticket, or -1. After a wait,
 * _read_pairs: speedups[i] = the original's time / the variant's, a run
 * held up (DRK_TRIAL_HELD past the quickest of its side's runs) standing
 * at the median of that side's runs that were not; a pair whose
 * variant is 2x slower ends the samples (one says enough), unless t->full.
 * The number of samples, or -1 (why). *original_ns (may be NULL): the
 * original's median over them, held-up runs left out. */
int drk_trial_queue_pairs(drk_trial *t, unsigned pairs);
int drk_trial_read_pairs(drk_trial *t, int first, unsigned pairs, float *speedups, double *original_ns);
/* `runs` consecutive tickets of one function against the original's median
 * on the capture (t->original_ns): speedups[i] = that median / run i's
 * time, a 2x slower run ending them. The number of samples, or -1 (why). */
int drk_trial_read_runs(drk_trial *t, int first, unsigned runs, float *speedups);
/* `runs` consecutive tickets of the original: the median of those not held
 * up (DRK_TRIAL_HELD past the quickest of them) into
 * t->original_ns (0, or -1 with why). _at: tickets anywhere. */
int drk_trial_read_original(drk_trial *t, int first, unsigned runs);
int drk_trial_read_original_at(drk_trial *t, const int *tickets, unsigned runs);

/* Queued and waited for at once (one wait each). drk_trial_time: paired
 * timing. drk_trial_time_original: the original `runs` times, their median
 * into t->original_ns (0, or -1 with why). drk_trial_time_variant: the
 * variant `runs` times against it. A candidate costs its own runs alone,
 * not the original's beside each (tests/evolve/sim.h: the search reaches
 * the recorded best about twice as often within 10 rounds at a 2% budget). */
int drk_trial_time(drk_trial *t, unsigned pairs, float *speedups, double *original_ns);
int drk_trial_time_original(drk_trial *t, unsigned runs);
int drk_trial_time_variant(drk_trial *t, unsigned runs, float *speedups);

#endif
