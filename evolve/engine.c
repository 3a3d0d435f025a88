#define _GNU_SOURCE
#include "evolve/engine.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cache.h"
#include "base/clock.h"
#include "base/fnv.h"
#include "base/log.h"
#include "base/thread.h"
#include "evolve/capture.h"
#include "evolve/cupti.h"
#include "evolve/facts.h"
#include "evolve/image/cubin.h"
#include "evolve/image/ptx_entry.h"
#include "evolve/jitlink.h"
#include "evolve/loaded.h"
#include "evolve/predict.h"
#include "evolve/proof.h"
#include "evolve/registry.h"
#include "evolve/search.h"
#include "evolve/shapes.h"
#include "evolve/source.h"
#include "evolve/space.h"
#include "evolve/trial.h"

#define TARGETS 64          /* kernel-shapes evolved (or refused) at most */
#define BUILT 8             /* variants kept built per target */
#define PAIRS 4             /* paired timings a variant a round */
#define BATCH 6             /* candidates proven and timed a wait (each holds a build slot: < BUILT - 1) */
#define CODES 64            /* distinct codes remembered per target, to skip a variant that makes one again */
#define CHOICES 2           /* the search's choices kept being proven until they can serve */
#define HOT_SHARE 0.01      /* a kernel-shape below this share of a round's kernel time is not worth it */
#define PATIENCE 3          /* rounds an armed capture may wait before the next target is tried */
#define RECHECK 8           /* rounds a served variant rests before it is measured against the original again */
#define RECHECK_MAX 128     /* and at most, once measurements kept finding it as fast (each doubles the rest) */
#define TURN_DEFAULT 10     /* DRK_EVOLVE_TURN's, for settings that leave it 0 */
#define KEEP_BYTES (64u << 20) /* trial buffers kept between targets (a free can hold the program's launches) */

static drk_driver drv;
static drk_engine_settings cfg;
static char only[512], skip[512], plant[96];
static int on, started; /* on: working; started: it ran (the report's) */
static char off_why[160] = "DRK_EVOLVE=0";

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

/* ---- Launches kept for proofs ----
 *
 * A variant serves once proven on DRK_PROOF_LAUNCHES captured launches, and
 * the search trusts it only after two trials, so one the search meets at
 * capture k could serve at capture k + 2 at the earliest, each capture
 * waiting for the budget: on the H200 naive matmul met its carveout=100
 * corner at its second capture and, its budget spent, never served it in
 * 16 rounds (it needed a fourth capture). So the latest KEPT captures'
 * trials stay open after their round -- the launch's snapshot, the
 * original's output on it and a work set, with its reference -- and the
 * search's choice, not yet proven on enough launches, is proven on them
 * at once: each kept launch a wait, charged as any. Distinct real launches
 * still, each proven as on its own capture; only no longer paced by the
 * captures to come. A launch is kept only while its target searches, and
 * only while all kept copies take at most KEPT_BYTES. */
#define KEPT 2
#define KEPT_BYTES (48u << 20)
static struct kept {
    const struct target *t;     /* NULL: free */
    unsigned capture;           /* the capture it was */
    size_t bytes;               /* its three sets */
    drk_trial tr;
    drk_proof_ref ref;          /* settled: O1 in set 1 */
} kept[KEPT];
static void kept_forget(const struct target *t);

static struct target targets[TARGETS];
static _Atomic unsigned ntargets; /* read by drk_engine_unloading on a program thread */
/* Held around every replay and by a program's unload: a handle is never
 * launched after its module went. */
static pthread_mutex_t fence = PTHREAD_MUTEX_INITIALIZER;
static struct target *active;   /* the one being captured and searched */
static drk_trial_env env;
static unsigned idle_rounds; /* rounds in a row that ended with no target active */
static int env_open;
static int env_device = -1;
static CUcontext prog_ctx; /* the program's primary context of env_device, while pushed */
static drk_predictor predictor;
static drk_shapes shapes;
static uint64_t trial_ns_all, program_ns_all, trial_bytes_all;
static double charged_all; /* what every capture's ledger was charged */
static unsigned rounds_seen;
static double researched_sum;
static unsigned cache_hits, cache_stored;
static unsigned partial_hits, partial_stored; /* searches an earlier run ended, gone on from; ended by this one */
static unsigned cubin_hits, cubins_stored; /* cubins loaded from the cache; written to it */
static double cubin_hit_ms_sum, cubin_hit_ms_max, cubin_read_ms_sum;
static uint64_t build_wall_ns; /* builds' wall time (nvJitLink on the CPU, the load): not the GPU's */
static unsigned builds_made;    /* modules loaded in drk's context by builds (each a switch of the GPU) */
static unsigned borrowed_loads; /* builds that borrowed a module another build loaded (the same cubin) */
static unsigned served_loads;
static double served_load_ms_max;
/* Earlier runs' results served from the cache: the cubin's read and its
 * load into the program's context (at a synchronize, or by drk's thread). */
static unsigned cache_serves;
static double cache_serve_ms_sum, cache_serve_ms_max;

/* ---- Settings ---- */

void drk_engine_configure(const drk_driver *d) { drv = *d; }

int drk_engine_on(void) { return on; }

static int matches(const char *list, const char *name)
{
    char pat[512];
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n && n < sizeof pat) {
            memcpy(pat, p, n);
            pat[n] = '\0';
            if (fnmatch(pat, name, 0) == 0)
                return 1;
        }
        p += n + (end != NULL);
    }
    return 0;
}

/* Threads a batch's compiles run on at once (compile_ahead). */
static unsigned compile_threads = 1;

void drk_engine_start(const drk_engine_settings *s)
{
    cfg = *s;
    snprintf(only, sizeof only, "%s", s->only ? s->only : "");
    snprintf(skip, sizeof skip, "%s", s->skip ? s->skip : "");
    snprintf(plant, sizeof plant, "%s", s->plant ? s->plant : "");
    cfg.only = only, cfg.skip = skip, cfg.plant = plant;
    if (*plant)
        drk_log(DRK_LOG_WARN, "evolve: DRK_EVOLVE_PLANT=%s: that variant is built wrong on purpose (testing)", plant);
    drk_predictor_init(&predictor);
    drk_shapes_init(&shapes);
    compile_threads = s->compile_threads < BATCH ? s->compile_threads : BATCH;
    on = started = 1;
}

/* ---- The contexts ----
 *
 * The program's primary context of the kernel's device (prog_ctx) holds
 * its kernels, the launch's memory and the served variants. The trials run
 * in a context of drk's own on the same device (own_ctx): the original
 * loaded there again from its image, the variants, the copies and drk's
 * stream. On the H200 a module load, an unload or a first launch in the
 * program's context waits for the program's queue to drain (117-190 ms
 * behind 1000 launches of 200 us) and may hold its launches meanwhile; in
 * a context of drk's own none waits (docs/evolve.md, "Deep launch
 * queues"). It isolates nothing: the contexts of a device share its
 * address space, so the trials' safety is the pointer rules'. */

static int pushed;
static CUcontext own_ctx;
static size_t own_ctx_bytes;   /* device memory drk's context took when made (the report's) */
static unsigned own_failed_at; /* the round making it last failed: retried OWN_RETRY rounds later */
static char own_why[192];
#define OWN_RETRY 50
/* Device memory the program keeps free after drk's context is made, at
 * least: 1 GiB (a quarter on a smaller device); and twice that before. */
#define OWN_MIN_FREE(total) ((total) / 4 < ((size_t)1 << 30) ? (total) / 4 : ((size_t)1 << 30))

/* The program's primary context of `dev`, retained and made current on the
 * calling thread: 1 and *ctx, or 0. primary_pop() undoes it. */
static int primary_push(int dev, CUcontext *ctx)
{
    unsigned flags;
    int active_ctx = 0;
    if (!drv.primary_ctx_get_state || drv.primary_ctx_get_state((CUdevice)dev, &flags, &active_ctx) != CUDA_SUCCESS ||
        !active_ctx)
        return 0; /* the program runs in contexts of its own: drk makes none */
    if (drv.primary_ctx_retain(ctx, (CUdevice)dev) != CUDA_SUCCESS)
        return 0;
    if (drv.ctx_push_current(*ctx) != CUDA_SUCCESS) {
        drv.primary_ctx_release((CUdevice)dev);
        return 0;
    }
    return 1;
}

static void primary_pop(int dev)
{
    CUcontext c;
    drv.ctx_pop_current(&c);
    drv.primary_ctx_release((CUdevice)dev);
}

static int push(int dev)
{
    CUcontext ctx;
    if (!primary_push(dev, &ctx))
        return 0;
    pushed = dev + 1;
    prog_ctx = ctx;
    return 1;
}

static void pop(void)
{
    if (!pushed)
        return;
    primary_pop(pushed - 1);
    pushed = 0;
}

/* drk's context over whatever is current (the program's, pushed): 0, or -1. */
static int push_own(void)
{
    return own_ctx && drv.ctx_push_current(own_ctx) == CUDA_SUCCESS ? 0 : -1;
}

static void pop_own(void)
{
    CUcontext c;
    drv.ctx_pop_current(&c);
}

/* Makes drk's context on `dev`, the program's context current: 0, or -1
 * with own_why. Its threads block in waits rather than spin (drk's thread
 * waits on its trials; the program's CPU is the program's). The stack limit
 * is the program's, so a kernel runs there as it runs in the program. */
static int make_own(int dev)
{
    size_t free0 = 0, total = 0, free1 = 0, stack = 0;
    uint64_t tq = drk_mono_ns();
    if (!drv.ctx_create || !drv.ctx_destroy || !drv.memcpy_peer_async) {
        snprintf(own_why, sizeof own_why, "the driver lacks cuCtxCreate_v4, cuCtxDestroy or cuMemcpyPeerAsync");
        return -1;
    }
    if (drv.mem_get_info(&free0, &total) != CUDA_SUCCESS || free0 < 2 * OWN_MIN_FREE(total)) {
        snprintf(own_why, sizeof own_why, "device %d has %zu MiB free: too little for a context of drk's own", dev,
                 free0 >> 20);
        return -1;
    }
    if (drv.ctx_get_limit && drv.ctx_get_limit(&stack, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS)
        stack = 0;
    CUcontext c = NULL;
    uint64_t t0 = drk_mono_ns();
    CUresult r = drv.ctx_create(&c, NULL, CU_CTX_SCHED_BLOCKING_SYNC, (CUdevice)dev);
    uint64_t t1 = drk_mono_ns();
    if (r != CUDA_SUCCESS) {
        snprintf(own_why, sizeof own_why, "cuCtxCreate on device %d failed (%d)", dev, (int)r);
        return -1;
    }
    /* cuCtxCreate made it current: it stays so while it is set up. */
    if (stack && drv.ctx_set_limit && (r = drv.ctx_set_limit(CU_LIMIT_STACK_SIZE, stack)) != CUDA_SUCCESS)
        drk_log(DRK_LOG_DEBUG, "evolve: drk's context keeps its own stack size (cuCtxSetLimit: %d)", (int)r);
    own_ctx = c;
    if (drk_trial_env_open(&env, &drv, c, cfg.fatbin) != 0) {
        snprintf(own_why, sizeof own_why, "drk's stream and buffers on device %d: %.150s", dev, env.why);
        pop_own();
        drv.ctx_destroy(c);
        own_ctx = NULL;
        return -1;
    }
    env.spans = cfg.spans;
    if (drv.mem_get_info(&free1, &total) == CUDA_SUCCESS && free1 < free0)
        own_ctx_bytes = free0 - free1;
    pop_own();
    if (free1 && free1 < OWN_MIN_FREE(total)) {
        snprintf(own_why, sizeof own_why, "a context of drk's own leaves device %d %zu MiB free: too little", dev,
                 free1 >> 20);
        if (push_own() == 0) {
            drk_trial_env_close(&env);
            pop_own();
        }
        drv.ctx_destroy(c);
        own_ctx = NULL;
        return -1;
    }
    drk_log(DRK_LOG_INFO, "evolve: trials run in a context of drk's own on device %d (%zu MiB of device memory)",
            dev, own_ctx_bytes >> 20);
    /* Its steps' times and when they ran (CLOCK_MONOTONIC, as a program's
     * own clock reads it), to tell whether one of them held a launch. */
    const uint64_t *o = env.opened_ns;
    drk_log(DRK_LOG_DEBUG,
            "evolve: drk's context took the questions first %.2f ms, cuCtxCreate %.2f, its stack limit %.2f, "
            "the stream and events %.2f, cuMemAlloc %.2f, cuMemHostAlloc %.2f, its kernels %.2f ms "
            "(from %.6f to %.6f s on the monotonic clock)",
            (t0 - tq) / 1e6, (t1 - t0) / 1e6, (o[0] - t1) / 1e6, (o[1] - o[0]) / 1e6, (o[2] - o[1]) / 1e6,
            (o[3] - o[2]) / 1e6, (o[4] - o[3]) / 1e6, tq / 1e9, o[4] / 1e9);
    return 0;
}

/* drk's context exists: the program's allocations may ask for its memory
 * (drk_engine_give_back). */
static atomic_int own_held;
/* The program ran out of device memory: drk gave its own back, and makes
 * no context of its own again in this process. */
static int memory_out;
static atomic_uint give_asked, give_done;

static void close_own(void)
{
    if (!own_ctx)
        return;
    kept_forget(NULL);
    if (push_own() == 0) {
        if (env_open)
            drk_trial_env_close(&env);
        pop_own();
    }
    env_open = 0, env_device = -1;
    drv.ctx_destroy(own_ctx);
    own_ctx = NULL;
    atomic_store(&own_held, 0);
}

/* drk's context made on `dev`: its means are open. */
static void own_opened(int dev)
{
    own_failed_at = 0;
    env_open = 1, env_device = dev;
    atomic_store(&own_held, 1);
    /* Trials' GPU time is drk's, not the program's: CUPTI's records of
     * drk's stream are counted apart. */
    if (drk_cupti_own_stream(own_ctx, env.stream) != 0)
        drk_log(DRK_LOG_INFO, "evolve: CUPTI cannot name drk's stream: the trials' replays count in the program's "
                              "GPU times");
}

/* ---- drk's context made early ----
 *
 * Making drk's context and its means takes a while: on the H200 0.35-0.55
 * s (cuCtxCreate, drk's kernels loaded, the stream and buffers), which
 * came between the round that chose naive matmul and its choice, three of
 * its program's rounds after it began. So once the program has launched a
 * kernel evolution could take up (CUPTI starts then), a helper thread
 * makes it while the first rounds are timed; drk's thread takes it over
 * (joins) before it touches drk's context. */
enum { EARLY_IDLE, EARLY_RUNNING, EARLY_JOINED };
static atomic_int early_state;
static pthread_t early_thread;
static int early_dev, early_rc;
static uint64_t early_ns;

static void *early_job(void *arg)
{
    (void)arg;
    uint64_t t0 = drk_mono_ns();
    CUcontext ctx;
    early_rc = -1;
    snprintf(own_why, sizeof own_why, "the program's primary context on device %d could not be made current",
             early_dev);
    /* As push(), on this thread: push()'s globals are drk's thread's. */
    if (primary_push(early_dev, &ctx)) {
        early_rc = make_own(early_dev);
        primary_pop(early_dev);
    }
    if (early_rc == 0)
        atomic_store(&own_held, 1); /* a program out of memory may ask for it back from now on */
    early_ns = drk_mono_ns() - t0;
    return NULL;
}

/* drk's thread: the early context taken over (waiting for it if it is
 * still being made); nothing when none was started. */
static void own_join(void)
{
    if (atomic_load(&early_state) != EARLY_RUNNING)
        return;
    pthread_join(early_thread, NULL);
    atomic_store(&early_state, EARLY_JOINED);
    if (early_rc == 0 && own_ctx) {
        own_opened(early_dev);
        drk_log(DRK_LOG_DEBUG, "evolve: drk's context was made on device %d in %.1f ms, ahead of a choice",
                early_dev, early_ns / 1e6);
    }
}

static int first_evolvable(int on_device);

void drk_engine_prepare(void)
{
    if (!on || atomic_load(&early_state) != EARLY_IDLE || own_ctx || memory_out)
        return;
    /* The device of the first kernel evolution could take up. */
    int dev = first_evolvable(1);
    if (dev < 0)
        return;
    early_dev = dev;
    atomic_store(&early_state, EARLY_RUNNING);
    if (drk_thread_start(&early_thread, early_job, NULL) != 0)
        atomic_store(&early_state, EARLY_IDLE); /* made at the choice, as without */
}

/* drk's context and its means on `dev`, the program's context current. */
static int ensure_env(int dev)
{
    own_join();
    if (env_open && env_device == dev)
        return 1;
    if (env_open || memory_out)
        return 0; /* one device's means at a time: a second device's kernels wait */
    if (own_failed_at && rounds_seen - own_failed_at < OWN_RETRY)
        return 0;
    if (make_own(dev) != 0) {
        if (!own_failed_at)
            drk_log(DRK_LOG_INFO, "evolve: no trials for now: %s (tried again every %d rounds)", own_why, OWN_RETRY);
        own_failed_at = rounds_seen ? rounds_seen : 1;
        return 0;
    }
    own_opened(dev);
    return 1;
}

/* ---- Targets ---- */

static void end_target(struct target *t, drk_target_state st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void target_round(struct target *t, uint64_t kernel_ns);
static const drk_time_row *row_of(const drk_round *r, const struct target *t);
static void saved(struct target *t);
static void aheads_forget(const struct target *t);
static uint64_t last_kernel_ns; /* the latest timed round's kernel time: an untimed round is granted as much */
static int want_choice;         /* a target ended since the latest timed round: the next is chosen from one */
static unsigned never_chosen;   /* hot kernel-shapes of the latest timed round that are no target yet */

/* Served modules in the program's context are unloaded at exit, not when
 * dropped: on the H200 an unload there can wait for the device to drain,
 * holding the program's context (and its launches) meanwhile. Past GRAVES,
 * the oldest is unloaded at once. drk's own context unloads at once. */
#define GRAVES 256
static CUmodule graves[GRAVES];
static unsigned ngraves, next_grave;

static void bury(CUmodule m)
{
    if (ngraves == GRAVES) {
        drv.module_unload(graves[next_grave]);
        graves[next_grave] = m;
        next_grave = (next_grave + 1) % GRAVES;
    } else {
        graves[ngraves++] = m;
    }
}

static void unload_graves(void)
{
    for (unsigned i = 0; i < ngraves; i++)
        drv.module_unload(graves[i]);
    ngraves = next_grave = 0;
}

/* The program's context is current (pushed). A module other slots of `t`
 * borrow goes to one of them rather than away. */
static void free_built(struct target *t, struct built *b)
{
    for (unsigned i = 0; i < BUILT && b->jit.module && !b->borrowed; i++)
        if (&t->b[i] != b && t->b[i].borrowed && t->b[i].jit.module == b->jit.module) {
            t->b[i].borrowed = 0;
            b->borrowed = 1;
        }
    if (b->jit.module && !b->borrowed && push_own() == 0) {
        drk_build_in in = {.drv = &drv};
        drk_source_ptx.unload(&in, &b->jit);
        pop_own();
    }
    if (b->pmodule)
        bury(b->pmodule);
    free(b->cubin);
    memset(b, 0, sizeof *b);
    b->id = DRK_VARIANT_NONE;
}

/* The carveout variant `attr` asks for (-1: none). */
static int carveout_of(const drk_variant *attr)
{
    return drk_source_attr.knobs[0].values[attr->k[0] < drk_source_attr.knobs[0].nvalues ? attr->k[0] : 0];
}

static drk_trial_fn trial_fn(const struct built *b) { return (drk_trial_fn){b->jit.fn, carveout_of(&b->attrv)}; }

static int proven_at(const struct built *b, unsigned capture) { return (int)(b->proven_on >> (capture & 63) & 1); }

/* A build of t's (NULL: none) that still wants a proof on this capture: not
 * built, or proven on too few launches and not on this one. */
static int wants_proof(const struct target *t, const struct built *b)
{
    return !b || (b->proven < DRK_PROOF_LAUNCHES && !proven_at(b, t->captures));
}

/* b proven on capture `capture`: counted once a launch. 1 if it was not yet. */
static int count_proof(struct built *b, unsigned capture)
{
    if (proven_at(b, capture))
        return 0;
    b->proven_on |= 1ull << (capture & 63);
    b->proven++;
    return 1;
}

/* What serves, or an earlier run's result that will once its copy is in
 * the program's context. */
static int is_served(const struct target *t, const struct built *b)
{
    return (t->served && b->pfn == t->served) ||
           (t->cached_pending && b->id == drk_variant_id(&drk_space_ptx, &t->served_v));
}

static void free_snapshot(struct target *t)
{
    for (unsigned i = 0; i < t->plan.n; i++)
        if (t->plan.snap[i])
            drk_trial_buf_put(&env, t->plan.snap[i], t->plan.alloc[i].size);
    if (t->plan.done)
        drv.event_destroy(t->plan.done);
    t->plan.n = 0;
    t->plan.done = NULL;
}

/* What `t` serves changed: the rounds that ran it whole start after the next. */
static void served_changed(struct target *t)
{
    t->changed_at = rounds_seen;
    t->run_served_ns = 0;
}

/* Withdraws what `t` serves: the program's own function from its next launch. */
static void withdraw(struct target *t)
{
    drk_registry_serve(t->rec->handle, &t->shape, 0);
    t->served = NULL, t->from_cache = t->came_from_cache = t->cached_pending = 0, t->speedup = 1;
    served_changed(t);
}

/* The served variant's speedup in the program: the original's median
 * launch over the variant's, each in a round that ran it throughout; 0
 * until both were timed. Replays in drk's context measure it only while
 * the GPU is not shared with a busy program (on the H200 the n-body's
 * replays said 5.4-5.7x of a variant the program ran 2.05x faster). */
static double run_speedup(const struct target *t)
{
    return t->served && t->run_default_ns > 0 && t->run_served_ns > 0 ? t->run_default_ns / t->run_served_ns : 0;
}

/* What the served variant is taken to win: the program's timing, else the
 * replays'. */
static double best_speedup(const struct target *t)
{
    double x = run_speedup(t);
    return x > 0 ? x : t->speedup;
}

static void drop_ptx(struct target *t)
{
    free((char *)t->ptx.text);
    t->ptx.text = NULL;
    t->sk.ptx = NULL;
}

/* `t` is worked on no more for now: not captured, its snapshot buffers
 * back; the next target is chosen from a timed round. */
static void let_go(struct target *t)
{
    if (active == t) {
        drk_capture_disarm();
        active = NULL;
        want_choice = 1;
    }
    free_snapshot(t);
    t->await_round = 0;
}

/* Its builds but the served one's. */
static void free_unserved(struct target *t)
{
    for (unsigned i = 0; i < BUILT; i++)
        if (t->b[i].id != DRK_VARIANT_NONE && !is_served(t, &t->b[i]))
            free_built(t, &t->b[i]);
}

static void end_target(struct target *t, drk_target_state st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof t->why, fmt, ap);
    va_end(ap);
    if (atomic_load(&t->gone) && st == DRK_TARGET_FAILED) {
        /* The program unloaded the module under a trial: nothing failed. */
        st = t->served ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED;
        snprintf(t->why, sizeof t->why, "the program unloaded its module after %u rounds of search", t->rounds);
    }
    t->state = st;
    drop_ptx(t);
    aheads_forget(t);
    kept_forget(t);
    if ((t->served || t->cached_pending) && t->from_cache && (st == DRK_TARGET_REFUSED || st == DRK_TARGET_FAILED)) {
        /* An earlier run's result not yet proven again here: withdrawn. */
        withdraw(t);
    }
    let_go(t);
    free_unserved(t);
    if (st != DRK_TARGET_SETTLED && st != DRK_TARGET_SEARCHING)
        drk_log(st == DRK_TARGET_FAILED ? DRK_LOG_INFO : DRK_LOG_DEBUG, "evolve: %.80s: %s", t->rec->name,
                t->why);
}

/* Settled, serving a variant: it rests, keeping that variant, and is
 * measured against the original again after RECHECK rounds (a variant that
 * has become slower is dropped then; one that kept its speed rests twice as
 * long the next time, up to RECHECK_MAX: remeasure). */
static void rest(struct target *t, const char *why)
{
    t->recheck_every = RECHECK;
    snprintf(t->why, sizeof t->why, "%s", why);
    t->state = DRK_TARGET_SETTLED;
    let_go(t);
    drop_ptx(t);
    aheads_forget(t);
    kept_forget(t);
    free_unserved(t);
    t->rested_at = rounds_seen;
}

/* A settled variant due to be measured against the original again (one
 * settled other than by rest() at RECHECK). */
static int recheck_due(const struct target *t)
{
    return t->state == DRK_TARGET_SETTLED && t->served && !t->from_cache && !atomic_load(&t->gone) &&
           rounds_seen - t->rested_at >= (t->recheck_every ? t->recheck_every : RECHECK);
}

/* A reference that is not EQUAL ends `t`: an original that differs from
 * itself refuses it; a failure fails it. */
static void end_by_ref(struct target *t, const drk_proof_ref *ref)
{
    end_target(t, ref->state == DRK_PROOF_NONDETERMINISTIC ? DRK_TARGET_REFUSED : DRK_TARGET_FAILED, "%s", ref->why);
}

/* Its turn passes mid-search: a kernel-shape that never had one goes
 * first (searched one after another, the hottest's 20-40 rounds left a
 * program's fifth kernel no turn in 60 rounds on the H200). Its search
 * keeps its memory, center, builds (with the launches they were proven
 * on) and what it serves; only the snapshot buffers go. */
static void yield_turn(struct target *t)
{
    snprintf(t->why, sizeof t->why, "its turn passed after %u round%s of search: another kernel has its first",
             t->turn_rounds, t->turn_rounds == 1 ? "" : "s");
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s (round %u)", t->rec->name, t->why, rounds_seen);
    let_go(t);
    t->yielded = 1;
}

static struct target *find_target(const drk_kernel_record *r, int slot)
{
    for (unsigned i = 0; i < ntargets; i++)
        if (targets[i].rec == r && targets[i].slot == slot)
            return &targets[i];
    return NULL;
}

static void features_of(const struct target *t, drk_kernel_features *f)
{
    const drk_image_facts *im = t->sk.facts;
    *f = (drk_kernel_features){
        .regs = im && im->regs != DRK_UNKNOWN_U32 ? im->regs : 0,
        .shared_bytes = (im && im->shared_bytes != DRK_UNKNOWN_U32 ? im->shared_bytes : 0) + t->shape.shared_bytes,
        .block_threads = t->shape.block[0] * t->shape.block[1] * t->shape.block[2],
        .param_bytes = im ? im->params_size : 0,
    };
}

/* Whether the kernel may be evolved at all, whatever its launches; the
 * reason when not. */
static int eligible_kernel(const drk_kernel_record *r, char *why, size_t len)
{
    if (!r->name)
        return snprintf(why, len, "unnamed"), 0;
    if (*cfg.only && !matches(cfg.only, r->name))
        return snprintf(why, len, "not in DRK_EVOLVE_ONLY"), 0;
    if (*cfg.skip && matches(cfg.skip, r->name))
        return snprintf(why, len, "in DRK_EVOLVE_SKIP"), 0;
    const drk_image_facts *im = atomic_load_explicit(&r->image, memory_order_acquire);
    if (!im)
        return snprintf(why, len, "no image facts (its module was not read)"), 0;
    if (!im->flow)
        return snprintf(why, len, "no PTX the pointers can be found in"), 0;
    if (!im->flow->evolvable)
        return snprintf(why, len, "%s", im->flow->reason), 0;
    return 1;
}

/* Whether the kernel may be evolved in this launch shape. */
static int eligible(const drk_kernel_record *r, const drk_launch_shape *s, char *why, size_t len)
{
    if (s->entry < 32 && (cfg.cooperative_entries >> s->entry & 1))
        return snprintf(why, len, "launched cooperatively"), 0;
    return eligible_kernel(r, why, len);
}

/* The first launched kernel evolution could take up (`on_device`: whose
 * device is known): its device (-1 when unknown), or -2 when there is none. */
static int first_evolvable(int on_device)
{
    char why[192];
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n; i++) {
        /* Its facts first: they settle most kernels (SASS only, modules not
         * read) before a name is matched or launches are summed. */
        const drk_kernel_record *r = drk_registry_at(i);
        const drk_image_facts *im = atomic_load_explicit(&r->image, memory_order_acquire);
        const drk_driver_facts *f = atomic_load_explicit(&r->driver, memory_order_acquire);
        int dev = f && f->device >= 0 ? f->device : -1;
        if (im && im->flow && im->flow->evolvable && (dev >= 0 || !on_device) &&
            eligible_kernel(r, why, sizeof why) && drk_record_launches(r))
            return dev;
    }
    return -2;
}

int drk_engine_could_evolve(void)
{
    return on && first_evolvable(0) != -2;
}

/* ---- Results between runs ---- */

#define RESULT_KIND "result"
#define CUBIN_KIND "cubin"

/* The key of a target's result: its PTX, the device and driver, and the
 * kernel and shape class it is for. */
/* A cache key for `t` on device `dev`: its PTX, the device, the driver,
 * and what `extra` distinguishes. 0, or -1 without a cache or a device. */
static int key_of(const struct target *t, int dev, const char *extra, drk_cache_key *out)
{
    char name[256] = "";
    int major = 0, minor = 0, version = 0;
    if (!cfg.cache || !t->sk.ptx || !drv.device_get_name || drv.device_get_name(name, sizeof name, dev) != CUDA_SUCCESS ||
        drv.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        drv.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
        drv.driver_get_version(&version) != CUDA_SUCCESS)
        return -1;
    drk_cache_key_parts kp = {.ptx = t->sk.ptx->text, .ptx_len = t->sk.ptx->len, .device_name = name,
                              .cc_major = major, .cc_minor = minor, .driver_version = version,
                              .extra = extra, .extra_len = strlen(extra)};
    drk_cache_key_make(&kp, out);
    return 0;
}

static void result_key(struct target *t, int dev)
{
    char extra[320];
    snprintf(extra, sizeof extra, "engine 1|%s|%016llx", t->rec->name, (unsigned long long)t->cls);
    t->keyed = key_of(t, dev, extra, &t->key) == 0;
}

/* An earlier run's result for `t`: 1 and the variant (the default: nothing
 * won), 0 if none; *partial: a search the run ended before it settled, and
 * the variant its best so far (a start, not a result): PARTIAL_SERVING
 * where that variant served there, proven (served again here once loaded,
 * and the search goes on from it once proven again). */
enum { PARTIAL_BEST = 1, PARTIAL_SERVING = 2 };

static int result_get(struct target *t, drk_variant *v, double *speedup, int *partial)
{
    drk_cache_blob b;
    if (!t->keyed || drk_cache_get(cfg.cache, &t->key, RESULT_KIND, &b) != 0)
        return 0;
    char text[128];
    size_t n = b.len < sizeof text - 1 ? b.len : sizeof text - 1;
    memcpy(text, b.data, n);
    text[n] = '\0';
    drk_cache_blob_free(&b);
    unsigned id;
    if (sscanf(text, "variant %u speedup %lf", &id, speedup) != 2 || drk_variant_from_id(&drk_space_ptx, id, v) != 0)
        return 0;
    *partial = strstr(text, " partial serving\n") ? PARTIAL_SERVING : strstr(text, " partial\n") ? PARTIAL_BEST : 0;
    return 1;
}

/* `t`'s result into the cache: 0, or -1 if it was not written. */
static int result_put(struct target *t, const drk_variant *v, double speedup, int partial)
{
    if (!t->keyed)
        return -1;
    char text[128];
    int n = snprintf(text, sizeof text, "variant %u speedup %.4f%s\n", drk_variant_id(&drk_space_ptx, v), speedup,
                     partial == PARTIAL_SERVING ? " partial serving" : partial ? " partial" : "");
    return n > 0 && drk_cache_put(cfg.cache, &t->key, RESULT_KIND, text, (size_t)n, t->rec->name) == 0 ? 0 : -1;
}

static void from_cache(struct target *t, const drk_variant *v, double speedup);
static void serve_cached(struct target *t, struct built *b, double load_ms);

/* The search's random stream for a kernel and shape class: from its name,
 * not its record's address, so that a run proposes what the last run of the
 * same program did (the address moves with the process's layout). */
static uint64_t search_seed(const drk_kernel_record *r, uint64_t cls)
{
    return drk_fnv(DRK_FNV_OFFSET, r->name, r->name ? strlen(r->name) : 0) ^ cls;
}

static struct target *make_target(const drk_kernel_record *r, int slot, const drk_time_row *row)
{
    unsigned n = atomic_load(&ntargets);
    if (n == TARGETS)
        return NULL;
    struct target *t = &targets[n];
    memset(t, 0, sizeof *t);
    t->rec = r;
    atomic_store(&ntargets, n + 1); /* after rec: drk_engine_unloading reads it */
    for (unsigned i = 0; i < BUILT; i++)
        t->b[i].id = DRK_VARIANT_NONE;
    t->rec = r, t->slot = slot;
    t->shape = r->shapes[slot].shape;
    t->cls = drk_shape_class(t->shape.grid, t->shape.block, t->shape.shared_bytes);
    t->sk = (drk_source_kernel){r->name, atomic_load_explicit(&r->image, memory_order_acquire),
                                drk_images_ptx(atomic_load_explicit(&r->owner, memory_order_acquire), r->name), 0};
    t->default_ns = (double)row->stats.median_ns;
    t->run_default_ns = t->default_ns; /* a round that ran the original throughout: nothing served before */
    /* Its time in the round that chose it: what spending ahead weighs a
     * promise by until the next timed round (records rest while it
     * searches: on the H200 naive matmul's second capture waited five
     * rounds for want of it). */
    t->round_ns = row->stats.total_ns;
    char why[192];
    if (!eligible(r, &t->shape, why, sizeof why)) {
        end_target(t, DRK_TARGET_REFUSED, "%s", why);
        return t;
    }
    if (!drk_source_ptx.applies(&t->sk, why, sizeof why)) {
        end_target(t, DRK_TARGET_REFUSED, "%s", why);
        return t;
    }
    if (drk_jitlink_ready(why, sizeof why) != 0) {
        static int told;
        if (!told++)
            drk_log(DRK_LOG_INFO, "evolve: no kernel is rebuilt: %s", why);
        end_target(t, DRK_TARGET_REFUSED, "%s", why);
        return t;
    }
    /* drk's copy holds this kernel's entry alone (ptx_entry.h: a compile
     * several times faster), or the whole module where it cannot be cut;
     * its digest stays the module's, for the cache's keys. */
    size_t cut = 0;
    char *copy = drk_ptx_only_entry(t->sk.ptx->text, t->sk.ptx->len, r->name, &cut);
    if (!copy && (copy = malloc(t->sk.ptx->len + 1))) {
        memcpy(copy, t->sk.ptx->text, t->sk.ptx->len + 1);
        cut = t->sk.ptx->len;
    }
    if (!copy) {
        end_target(t, DRK_TARGET_FAILED, "memory ran out for a copy of its PTX");
        return t;
    }
    t->ptx = *t->sk.ptx;
    t->ptx.text = copy, t->ptx.len = cut;
    t->sk.ptx = &t->ptx;
    drk_kernel_features f;
    features_of(t, &f);
    drk_variant start;
    double distance;
    uint64_t from;
    drk_predictor_guess(&predictor, (uint64_t)(uintptr_t)r, t->cls, &f, &start, &distance, &from);
    drk_evolution_init(&t->evo, &drk_space_ptx, search_seed(r, t->cls), &start);
    t->state = DRK_TARGET_CAPTURING;
    snprintf(t->why, sizeof t->why, "waiting for a launch");
    if (cfg.open_cache) { /* with the first target: once */
        cfg.cache = cfg.open_cache();
        cfg.open_cache = NULL;
    }
    const drk_driver_facts *df = atomic_load_explicit(&r->driver, memory_order_acquire);
    result_key(t, df ? df->device : 0);
    drk_variant cached;
    double speedup;
    int partial = 0, got = result_get(t, &cached, &speedup, &partial);
    if (got && partial) {
        /* An earlier run ended this search: it goes on from its best. */
        char text[96];
        drk_evolution_init(&t->evo, &drk_space_ptx, search_seed(r, t->cls), &cached);
        partial_hits++;
        drk_log(DRK_LOG_INFO, "evolve: %.80s: an earlier run's search ended %s %s (%.3fx, not yet proven here): %s",
                r->name, partial == PARTIAL_SERVING ? "serving" : "at",
                drk_variant_text(&drk_space_ptx, &cached, text, sizeof text), speedup,
                partial == PARTIAL_SERVING ? "served again, and searched on from it once proven again"
                                           : "searching on from it");
        if (partial == PARTIAL_SERVING) {
            t->search_on = 1;
            from_cache(t, &cached, speedup);
        }
    } else if (got) {
        from_cache(t, &cached, speedup);
    }
    return t;
}

/* Arms the capture of the active target: its bytes only, or with the
 * snapshot of what they reached last time. */
static void arm(struct target *t)
{
    const drk_image_facts *im = t->sk.facts;
    t->plan.handle = t->rec->handle;
    memcpy(t->plan.grid, t->shape.grid, sizeof t->plan.grid);
    memcpy(t->plan.block, t->shape.block, sizeof t->plan.block);
    t->plan.shared_bytes = t->shape.shared_bytes;
    t->plan.params = im->params, t->plan.nparams = im->nparams;
    t->plan.flow = im->flow;
    t->plan.ctx = prog_ctx;
    t->plan.snap_ctx = own_ctx;
    if (drk_capture_arm(&t->plan) != 0)
        end_target(t, DRK_TARGET_FAILED, "its capture could not be armed");
    t->waited = 0;
}

/* ---- Variants ---- */

/* The PTX source's variant and the carveout for a point of drk_space_ptx,
 * by the knobs' names (the space and the sources list the same values). */
static const struct {
    const char *space, *knob;
} knob_of[] = {{"regs", "max_registers"}, {"minctas", "min_ctas_per_sm"}, {"opt", "opt_level"}, {"cache", "cache_mode"}};

static void to_sources(const drk_variant *v, drk_variant *jit, drk_variant *attr)
{
    memset(jit, 0, sizeof *jit);
    memset(attr, 0, sizeof *attr);
    for (unsigned d = 0; d < drk_space_ptx.ndims; d++) {
        const char *name = drk_space_ptx.dims[d].name;
        if (strcmp(name, "carveout") == 0) {
            attr->k[0] = v->k[d];
            continue;
        }
        for (unsigned m = 0; m < sizeof knob_of / sizeof knob_of[0]; m++)
            if (strcmp(knob_of[m].space, name) == 0)
                for (unsigned k = 0; k < drk_source_ptx.nknobs; k++)
                    if (strcmp(drk_source_ptx.knobs[k].name, knob_of[m].knob) == 0)
                        jit->k[k] = v->k[d];
    }
}

static struct built *built_of(struct target *t, uint32_t id)
{
    for (unsigned i = 0; i < BUILT; i++)
        if (t->b[i].id == id)
            return &t->b[i];
    return NULL;
}

static int is_choice(const struct target *t, const struct built *b)
{
    for (unsigned i = 0; i < t->nchoices; i++)
        if (t->choices[i] == b->id)
            return 1;
    return 0;
}

/* A slot for a new build: a free one, else the slowest the search
 * measured (the least proven of equals) that is not served, one of the
 * search's choices last. Not the least proven first: on the stand-in's
 * ladder a capture's many siblings gave up the fastest, proven on two
 * launches, before the search chose it, and its proofs were made again. */
static struct built *slot_for(struct target *t)
{
    struct built *best = NULL;
    double best_rank = 0;
    for (unsigned i = 0; i < BUILT; i++) {
        struct built *b = &t->b[i];
        if (b->id == DRK_VARIANT_NONE)
            return b;
        drk_variant v;
        drk_ratio_stats st = {0};
        if (drk_variant_from_id(&drk_space_ptx, b->id, &v) == 0)
            st = drk_evolution_stats(&t->evo, &v);
        double rank = (st.n ? st.median : 1.0) + 1e-4 * (b->proven < DRK_PROOF_LAUNCHES ? b->proven : DRK_PROOF_LAUNCHES) +
                      (is_choice(t, b) ? 1e3 : 0);
        if (!is_served(t, b) && !b->busy && (!best || rank < best_rank))
            best = b, best_rank = rank;
    }
    if (best)
        free_built(t, best);
    return best;
}

static double ms_of(uint64_t ns) { return (double)ns / 1e6; }

/* DRK_EVOLVE_PLANT's wrong code: the PTX with its float adds, multiplies
 * and fused multiply-adds rounding toward zero (valid PTX, results off in
 * their last bits), for the GPU suite to see the proof reject it. */
static char *planted(const drk_ptx_text *ptx, unsigned *nedits)
{
    *nedits = 0;
    static const struct {
        const char *from, *to;
    } edits[] = {{"fma.rn.f32", "fma.rz.f32"}, {"add.f32", "add.rz.f32"}, {"mul.f32", "mul.rz.f32"},
                 {"add.rn.f32", "add.rz.f32"}, {"mul.rn.f32", "mul.rz.f32"}};
    size_t cap = ptx->len * 2 + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0;
    for (const char *p = ptx->text; *p && o + 16 < cap;) {
        size_t e = 0;
        /* Instructions only: `atom.global.add.f32` is no `add.f32`. The
         * PTX nvcc embeds in a fatbin has its lines' indentation stripped,
         * so an instruction may start a line. */
        int start = p == ptx->text || strchr(" \t\n;{}", p[-1]) != NULL;
        while (start && e < sizeof edits / sizeof edits[0] && strncmp(p, edits[e].from, strlen(edits[e].from)) != 0)
            e++;
        if (!start)
            e = sizeof edits / sizeof edits[0];
        if (e < sizeof edits / sizeof edits[0]) {
            size_t n = strlen(edits[e].to);
            memcpy(out + o, edits[e].to, n);
            o += n, p += strlen(edits[e].from);
            ++*nedits;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

/* Whether variant `id` (its jit part compiled to `cubin`) runs the same
 * code as a variant of `t` compiled before, with the same attributes: 1
 * with the twin's words in `why`. Otherwise its code is remembered. The
 * code's digest in *digest (0 when it has none). */
static int same_code(struct target *t, uint32_t id, const drk_variant *attr, const void *cubin, size_t len,
                     uint64_t *digest, char *why, size_t wlen)
{
    uint64_t key;
    char err[160];
    *digest = 0;
    if (drk_cubin_code_digest(cubin, len, t->rec->name, &key, err, sizeof err) != 0) {
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: no digest of a build's code (%s): not compared", t->rec->name, err);
        return 0;
    }
    *digest = key ? key : 1;
    for (unsigned i = 0; i < DRK_SPACE_DIMS; i++)
        key = (key ^ attr->k[i]) * 0x100000001b3ull;
    unsigned n = t->ncodes < CODES ? t->ncodes : CODES;
    for (unsigned i = 0; i < n; i++)
        if (t->codes[i].key == key && t->codes[i].id != id) {
            drk_variant twin;
            char text[96];
            if (drk_variant_from_id(&drk_space_ptx, t->codes[i].id, &twin) != 0)
                snprintf(text, sizeof text, "?");
            else
                drk_variant_text(&drk_space_ptx, &twin, text, sizeof text);
            snprintf(why, wlen, "the same code as %s", text);
            return 1;
        }
    t->codes[t->ncodes % CODES] = (struct code){key, id};
    t->ncodes++;
    return 0;
}

/* What a build of `t` in drk's context starts from. */
static drk_build_in own_build_in(struct target *t)
{
    return (drk_build_in){.drv = &drv, .ctx = own_ctx, .k = &t->sk,
                          .block_threads = t->shape.block[0] * t->shape.block[1] * t->shape.block[2],
                          .sm = env.sm > 0 ? (unsigned)env.sm : 0};
}

/* The cache's key of `t`'s cubin built with the PTX source's variant
 * `jit`: the PTX, the compile's options, the device and nvJitLink. 0 or -1. */
static int cubin_key(struct target *t, const drk_build_in *in, const drk_variant *jit, drk_cache_key *ck)
{
    char extra[320], opts[160];
    drk_source_variant_text(&drk_source_ptx, jit, in->block_threads, opts, sizeof opts);
    snprintf(extra, sizeof extra, "cubin 1|sm %u|nvjitlink %u|%s", in->sm, drk_jitlink_version(), opts);
    return key_of(t, env_device, extra, ck);
}

/* Loads `in->cubin` (in_len bytes; its code's digest `code`, 0 if none)
 * into drk's context as build `b` (its slot kept on failure: the
 * caller's), with its carveout (`attr`) asked for by each of its trials'
 * launches: its trial function, or one with fn NULL (why). Counted as a
 * build: a module in drk's context. The module of another slot with the
 * same code -- the same bytes, or the same digest: the same instructions
 * on the same resources -- is borrowed instead, and *lender set to that
 * slot (its cubin then serves for both): a load in drk's context costs
 * the program's kernels a switch of the GPU, and on the H200 naive
 * matmul's captures loaded 5-8 modules each, most of them siblings of one
 * loaded before (another carveout, or a knob that changed nothing). */
static drk_trial_fn load_own(struct target *t, struct built *b, drk_build_in *in, size_t in_len, uint64_t code,
                             const drk_variant *jit, const drk_variant *attr, const struct built **lender, char *why,
                             size_t len)
{
    b->attrv = *attr;
    b->code = code;
    *lender = NULL;
    for (unsigned i = 0; i < BUILT; i++) {
        const struct built *o = &t->b[i];
        if (o != b && o->id != DRK_VARIANT_NONE && o->jit.module && o->cubin &&
            ((code && o->code == code) ||
             (o->cubin_len == in_len && memcmp(o->cubin, in->cubin, in_len) == 0))) {
            b->jit = (drk_built){.module = o->jit.module, .fn = o->jit.fn, .jit_ms = 0};
            b->code = o->code;
            b->borrowed = 1;
            *lender = o;
            borrowed_loads++;
            return trial_fn(b);
        }
    }
    if (drk_source_ptx.build(in, jit, &b->jit) != 0)
        return snprintf(why, len, "build failed: %.220s", b->jit.why), (drk_trial_fn){NULL, -1};
    t->builds++;
    builds_made++;
    build_wall_ns += b->jit.build_ns;
    return trial_fn(b);
}

static void cubin_hit(double ms, double read_ms)
{
    cubin_hits++;
    cubin_hit_ms_sum += ms;
    cubin_read_ms_sum += read_ms;
    cubin_hit_ms_max = ms > cubin_hit_ms_max ? ms : cubin_hit_ms_max;
}

/* Where a build's cubin came from, for its log line. */
enum { BUILT_NOW, BUILT_CACHED, BUILT_AHEAD };

static void built_ms(struct target *t, const struct built *b, const char *text, int from)
{
    double ms = ms_of(b->jit.build_ns);
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s built in %.1f ms (compile %.1f ms%s, %s %.2f ms)", t->rec->name, text,
            ms, b->jit.jit_ms > 0 ? b->jit.jit_ms : 0.0,
            from == BUILT_CACHED ? ", a cached cubin" : from == BUILT_AHEAD ? ", compiled ahead" : "",
            b->borrowed ? "the same code's module loaded before, no load:" : "load", ms_of(b->jit.load_ns));
    t->build_ms += ms;
    if (ms > t->build_ms_max)
        t->build_ms_max = ms;
}

/* An earlier run's result that serves (or will) from the program's
 * context without a build in drk's: its cubin, read from the cache then,
 * loaded into drk's context now, for its proofs. */
static drk_trial_fn load_cached_own(struct target *t, struct built *b, drk_build_in *in, const drk_variant *jit,
                                    const drk_variant *attr, char *why, size_t len)
{
    if (!b->cubin || !t->sk.ptx)
        return snprintf(why, len, "%s", b->cubin ? "its PTX is gone" : "its cubin was not kept"),
               (drk_trial_fn){NULL, -1};
    uint64_t c0 = drk_mono_ns();
    in->cubin = b->cubin;
    const struct built *lender; /* the same bytes only (no digest): its cubin is b's already */
    drk_trial_fn fn = load_own(t, b, in, b->cubin_len, 0, jit, attr, &lender, why, len);
    if (fn.fn) {
        char text[96];
        cubin_hit(ms_of(drk_mono_ns() - c0) + t->pending_read_ms, t->pending_read_ms);
        built_ms(t, b, drk_variant_text(&drk_space_ptx, &t->served_v, text, sizeof text), BUILT_CACHED);
    }
    return fn;
}

/* ---- Compiles ahead, several at once ----
 *
 * A batch's candidates are compiled one after another inside build(): on
 * the H200, naive matmul's first capture compiled 14 variants at ~25 ms
 * each (9 to find they make code compiled before), while the program ran
 * on; its search took five of the program's rounds. So before a batch is
 * built, the compiles it needs (its candidates' distinct option sets, not
 * built yet, not in the cache, not planted) run on up to compile_threads
 * threads at once (DRK_EVOLVE_COMPILE_THREADS, 4: on the H200 host 4
 * threads compiled 3.96x as fast as one) -- drk's own thread among them,
 * the others started for the batch and joined before it goes on -- and
 * build() takes their cubins instead of compiling.
 *
 * Looking ahead. A candidate that makes code compiled before drops out of
 * its batch and the search is asked for the next, one slot at a time: on
 * the H200 naive matmul's second capture then compiled 11 such proposals
 * one after another (~30 ms each, every register cap from 48 up with
 * minctas=2 making regs=48's code), 0.33 s of the program's rounds. So a
 * search round's batch compiles, besides its candidates, the proposals the
 * search would make next were they all to drop out (asked of a copy of its
 * state, told they did: its order does not depend on what trials measure
 * within a round), up to LOOKAHEAD more; they wait for the round's next
 * batches, and those the round does not take go to the cubin cache. */
#define LOOKAHEAD 8
#define AHEADS (BATCH + LOOKAHEAD)
struct ahead {
    drk_variant jit;            /* the PTX source's variant compiled */
    drk_built c;                /* its cubin (malloc'd) or its failure, as drk_source_ptx.compile made it */
    int rc;
    int keyed;                  /* ck holds its key in the cubin cache */
    drk_cache_key ck;
};
static struct ahead aheads[AHEADS];
static const struct target *ahead_owner; /* the target they were compiled for: no other takes them */
static unsigned naheads, aheads_made; /* aheads_made: those compiled (the rest wait for compile_jobs) */
static atomic_uint ahead_next;
static drk_build_in ahead_in;
static drk_evolution peek; /* compile_ahead's copy of a search (large: static) */

static void *compile_jobs(void *arg)
{
    (void)arg;
    for (unsigned i; (i = atomic_fetch_add(&ahead_next, 1) + aheads_made) < naheads;)
        aheads[i].rc = drk_source_ptx.compile(&ahead_in, &aheads[i].jit, &aheads[i].c);
    return NULL;
}

/* Lets the compiles made ahead go: those never taken to the cubin cache
 * (a later round or run loads them instead of compiling). */
static void aheads_clear(void)
{
    for (unsigned i = 0; i < naheads; i++) {
        if (aheads[i].c.cubin && aheads[i].rc == 0 && aheads[i].keyed && cfg.cache &&
            drk_cache_put(cfg.cache, &aheads[i].ck, CUBIN_KIND, aheads[i].c.cubin, aheads[i].c.cubin_len,
                          ahead_owner ? ahead_owner->rec->name : "") == 0)
            cubins_stored++;
        free(aheads[i].c.cubin);
    }
    naheads = aheads_made = 0;
    ahead_owner = NULL;
}

/* Compiles ahead that build() took leave the list, so that a round's later
 * batches can look ahead again: on the H200 naive matmul's first capture
 * filled all AHEADS at once, and its next 14 proposals (every register cap
 * with minctas=2: regs=48's code) were then compiled one after another,
 * 0.3 s. A take leaves the entry's cubin NULL and its rc 0; what remains
 * is compiled and not taken. */
static void aheads_compact(void)
{
    unsigned k = 0;
    for (unsigned i = 0; i < aheads_made; i++)
        if (aheads[i].c.cubin || aheads[i].rc != 0)
            aheads[k++] = aheads[i];
    naheads = aheads_made = k;
}

/* `t` ends or rests: what was compiled ahead for it goes (to the cache). */
static void aheads_forget(const struct target *t)
{
    if (ahead_owner == t)
        aheads_clear();
}

/* The compile of `jit` made ahead, moved to *out (1), or 0 if none. */
static int ahead_take(const struct target *t, const drk_variant *jit, drk_built *out, int *rc)
{
    if (t != ahead_owner)
        return 0;
    for (unsigned i = 0; i < aheads_made; i++)
        if (drk_variant_equal(&aheads[i].jit, jit) && (aheads[i].c.cubin || aheads[i].rc != 0)) {
            *out = aheads[i].c, *rc = aheads[i].rc;
            aheads[i].c.cubin = NULL;
            aheads[i].rc = 0;
            aheads[i].keyed = 0;
            return 1;
        }
    return 0;
}

/* Adds `v`'s compile to the list, unless it needs none or is there: 1 if added. */
static int ahead_add(struct target *t, const drk_build_in *in, const drk_variant *v)
{
    uint32_t id = drk_variant_id(&drk_space_ptx, v);
    char text[96];
    if (naheads >= AHEADS || drk_variant_is_default(v) || built_of(t, id) ||
        (*cfg.plant && strcmp(cfg.plant, drk_variant_text(&drk_space_ptx, v, text, sizeof text)) == 0))
        return 0;
    drk_variant jit, attr;
    to_sources(v, &jit, &attr);
    for (unsigned k = 0; k < naheads; k++)
        if (drk_variant_equal(&aheads[k].jit, &jit))
            return 0; /* another carveout of the same code, or compiled ahead already */
    struct ahead a = {.jit = jit};
    drk_cache_blob hit = {0};
    if (cfg.cache && cubin_key(t, in, &jit, &a.ck) == 0) {
        if (drk_cache_get(cfg.cache, &a.ck, CUBIN_KIND, &hit) == 0) {
            drk_cache_blob_free(&hit);
            return 0; /* build() loads it from the cache */
        }
        a.keyed = 1;
    }
    aheads[naheads++] = a;
    return 1;
}

/* Compiles ahead what `cand` needs and, given the search they came from
 * (`from`), what it would propose next (above); compiles made ahead for
 * `t` before and not taken yet stay. */
static void compile_ahead(struct target *t, const drk_variant *cand, unsigned n, const drk_evolution *from)
{
    if (compile_threads < 2 || !t->sk.ptx || !own_ctx)
        return;
    if (ahead_owner != t)
        aheads_clear();
    else
        aheads_compact();
    ahead_owner = t;
    drk_build_in in = own_build_in(t);
    for (unsigned i = 0; i < n; i++)
        ahead_add(t, &in, &cand[i]);
    unsigned more = 0;
    if (from) {
        if (from != &peek)
            peek = *from;
        for (unsigned i = 0; i < n; i++)
            drk_evolution_same(&peek, &cand[i]);
        drk_variant next[BATCH];
        /* At most 4 batches' proposals looked at: those already built or
         * in the cache add nothing, and each costs a look in the cache. */
        for (unsigned k, asks = 0;
             asks < 4 && more < LOOKAHEAD && naheads < AHEADS && (k = drk_evolution_next(&peek, next, BATCH)); asks++)
            for (unsigned i = 0; i < k; i++) {
                more += ahead_add(t, &in, &next[i]);
                drk_evolution_same(&peek, &next[i]);
            }
    }
    unsigned todo = naheads - aheads_made;
    if (todo < 2) {
        naheads = aheads_made; /* one compile: build() makes it when a candidate needs it */
        return;
    }
    ahead_in = in;
    atomic_store(&ahead_next, 0);
    pthread_t th[AHEADS];
    unsigned started = 0;
    uint64_t t0 = drk_mono_ns();
    while (started + 1 < compile_threads && started + 1 < todo && drk_thread_start(&th[started], compile_jobs, NULL) == 0)
        started++;
    compile_jobs(NULL);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    uint64_t each = 0;
    for (unsigned i = aheads_made; i < naheads; i++)
        each += aheads[i].c.build_ns;
    aheads_made = naheads;
    drk_log(DRK_LOG_DEBUG,
            "evolve: %.80s: %u compiles on %u threads at once in %.1f ms (%.1f ms one after another; %u of them "
            "for the search's next proposals)",
            t->rec->name, todo, started + 1, ms_of(drk_mono_ns() - t0), ms_of(each), more);
}

/* Builds variant `v` of `t` (or finds it built): its function, or NULL
 * (why). A rebuild is compiled (or read from the cache) first, on the CPU:
 * one that makes the same code as a variant compiled before sets *same
 * (when given) and is neither loaded nor tried. */
static drk_trial_fn build(struct target *t, const drk_variant *v, int *same, char *why, size_t len)
{
    const drk_trial_fn none = {NULL, -1};
    uint32_t id = drk_variant_id(&drk_space_ptx, v);
    struct built *b = built_of(t, id);
    if (same)
        *same = 0;
    if (b && b->jit.fn)
        return trial_fn(b);
    drk_variant jit, attr;
    to_sources(v, &jit, &attr);
    if (!own_ctx)
        return snprintf(why, len, "drk's context is gone"), none;
    /* Built in drk's context; loaded into the program's only once served. */
    drk_build_in in = own_build_in(t);
    if (b)
        return load_cached_own(t, b, &in, &jit, &attr, why, len);
    if (!t->sk.ptx)
        return snprintf(why, len, "its PTX is gone"), none;
    char text[96];
    drk_variant_text(&drk_space_ptx, v, text, sizeof text);
    drk_source_kernel wrong;
    drk_ptx_text wrong_ptx;
    char *edited = NULL;
    unsigned nedits = 0;
    if (*cfg.plant && strcmp(cfg.plant, text) == 0 && (edited = planted(t->sk.ptx, &nedits))) {
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s built from planted PTX (%u float instructions of %zu bytes "
                               "round toward zero)", t->rec->name, text, nedits, t->sk.ptx->len);
        wrong = t->sk, wrong_ptx = *t->sk.ptx;
        wrong_ptx.text = edited;
        wrong_ptx.len = strlen(edited);
        wrong.ptx = &wrong_ptx;
        in.k = &wrong;
    }
    /* The compiled cubin, from the cache or into it (never a planted one):
     * keyed by the PTX, the compile's options, the device and nvJitLink. */
    drk_cache_key ck;
    drk_cache_blob hit = {0};
    int cached = 0, from_cache = 0, ahead = 0;
    uint64_t c0 = drk_mono_ns();
    if (!edited && cfg.cache) {
        cached = cubin_key(t, &in, &jit, &ck) == 0;
        if (cached && drk_cache_get(cfg.cache, &ck, CUBIN_KIND, &hit) == 0)
            from_cache = 1;
    }
    uint64_t c1 = drk_mono_ns();
    const void *code = from_cache ? hit.data : NULL;
    size_t code_len = from_cache ? hit.len : 0;
    drk_built compiled = {.jit_ms = 0}; /* compiled.cubin: malloc'd, ours until a build keeps it */
    if (!code) {
        int rc = 0;
        if (edited || !(ahead = ahead_take(t, &jit, &compiled, &rc)))
            rc = drk_source_ptx.compile(&in, &jit, &compiled);
        if (rc != 0) {
            free(edited);
            return snprintf(why, len, "build failed: %.220s", compiled.why), none;
        }
        code = compiled.cubin, code_len = compiled.cubin_len;
        if (cached && drk_cache_put(cfg.cache, &ck, CUBIN_KIND, code, code_len, t->rec->name) == 0)
            cubins_stored++;
    }
    uint64_t c2 = drk_mono_ns(), digest = 0;
    if (!edited && same_code(t, id, &attr, code, code_len, &digest, why, len)) {
        drk_cache_blob_free(&hit);
        free(compiled.cubin);
        t->same++;
        if (same)
            *same = 1;
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s makes %s (%.1f ms): not tried", t->rec->name, text, why,
                ms_of(c2 - c0));
        return none;
    }
    if (!(b = slot_for(t))) {
        drk_cache_blob_free(&hit);
        free(compiled.cubin);
        free(edited);
        return snprintf(why, len, "no slot to build in"), none;
    }
    in.cubin = code;
    const struct built *lender;
    drk_trial_fn fn = load_own(t, b, &in, code_len, edited ? 0 : digest, &jit, &attr, &lender, why, len);
    free(edited);
    if (!fn.fn) {
        drk_cache_blob_free(&hit);
        free(compiled.cubin); /* the driver did not keep it */
        free_built(t, b);
        return none;
    }
    /* Kept to serve: the served copy is this cubin again. */
    if (from_cache) {
        if ((b->cubin = malloc(code_len)) != NULL) {
            memcpy(b->cubin, code, code_len);
            b->cubin_len = code_len;
        }
        drk_cache_blob_free(&hit);
        cubin_hit(ms_of(drk_mono_ns() - c0), ms_of(c1 - c0));
    } else {
        b->cubin = compiled.cubin, b->cubin_len = code_len;
        b->jit.jit_ms = compiled.jit_ms;
        b->jit.build_ns += compiled.build_ns;
        build_wall_ns += compiled.build_ns;
        memcpy(b->jit.log, compiled.log, sizeof b->jit.log);
    }
    /* Borrowed by its digest, with other bytes: the lender's cubin serves,
     * whose module its proofs ran (its own, the same code by the digest,
     * only if no copy can be made). */
    void *copy;
    if (lender && b->cubin && (lender->cubin_len != b->cubin_len || memcmp(lender->cubin, b->cubin, b->cubin_len)) &&
        (copy = malloc(lender->cubin_len))) {
        memcpy(copy, lender->cubin, lender->cubin_len);
        free(b->cubin);
        b->cubin = copy, b->cubin_len = lender->cubin_len;
    }
    b->id = id;
    built_ms(t, b, text, from_cache ? BUILT_CACHED : ahead ? BUILT_AHEAD : BUILT_NOW);
    return fn;
}

/* A served copy into the current context: the cubin loaded, the kernel
 * looked up, the carveout set as on the trials' copy, and the function
 * loaded now (cuFuncLoad), so that its first launch does not wait for the
 * program's queue to drain. CUDA_SUCCESS, or the failing call's result
 * (in *what; *m may then hold the module, the caller's to unload). */
static CUresult load_copy(const void *cubin, const char *name, const drk_variant *attrv, CUmodule *m, CUfunction *fn,
                          const char **what)
{
    *m = NULL, *fn = NULL, *what = "cuModuleLoadDataEx";
    CUresult r = drv.module_load_data_ex(m, cubin, 0, NULL, NULL);
    if (r == CUDA_SUCCESS && (r = drv.module_get_function(fn, *m, name)) != CUDA_SUCCESS)
        *what = "cuModuleGetFunction";
    if (r == CUDA_SUCCESS && !drk_variant_is_default(attrv)) {
        drk_build_in in = {.drv = &drv, .fn = *fn};
        drk_built a;
        if (drk_source_attr.build(&in, attrv, &a) != 0)
            r = a.rc != CUDA_SUCCESS ? a.rc : CUDA_ERROR_UNKNOWN, *what = "cuFuncSetAttribute";
    }
    if (r == CUDA_SUCCESS && drv.func_load && (r = drv.func_load(*fn)) != CUDA_SUCCESS) {
        /* An older driver lacks it: the first launch loads the function. */
        if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_SUPPORTED)
            r = CUDA_SUCCESS;
        else
            *what = "cuFuncLoad";
    }
    return r;
}

/* The served copy of `b` in the program's context (load_copy). Its
 * function, or NULL (why). */
static CUfunction serve_copy(struct target *t, struct built *b, char *why, size_t len)
{
    if (b->pfn)
        return b->pfn;
    if (!b->cubin)
        return snprintf(why, len, "its cubin was not kept"), NULL;
    uint64_t t0 = drk_mono_ns();
    CUmodule m;
    CUfunction fn;
    const char *what;
    CUresult r = drv.ctx_push_current(prog_ctx);
    if (r != CUDA_SUCCESS)
        return snprintf(why, len, "cuCtxPushCurrent (the program's context) failed (%d)", (int)r), NULL;
    r = load_copy(b->cubin, t->rec->name, &b->attrv, &m, &fn, &what);
    CUcontext popped;
    drv.ctx_pop_current(&popped);
    if (r != CUDA_SUCCESS) {
        if (m)
            bury(m);
        return snprintf(why, len, "%s in the program's context failed (%d)", what, (int)r), NULL;
    }
    b->pmodule = m, b->pfn = fn;
    double ms = ms_of(drk_mono_ns() - t0);
    served_loads++;
    served_load_ms_max = ms > served_load_ms_max ? ms : served_load_ms_max;
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the served copy loaded into the program's context in %.1f ms",
            t->rec->name, ms);
    return fn;
}

/* ---- The served copy's load at a quiet moment ----
 *
 * A module load in the program's context waits for the context's queue to
 * drain, and holds the program's launch calls meanwhile: on the H200 the
 * served copy's load took 520-850 ms under a queue of 1500 n-body launches,
 * and once a launch call waited 672 ms for it. Right after the program's
 * own synchronize returns, the queue is empty. So once the search chose a
 * variant that is not yet proven on enough launches, drk asks for its copy
 * to be loaded by the program's next synchronize, on the program's thread,
 * before the call returns (drk_engine_quiet); drk's thread takes the loaded
 * function on its next tick. A copy not loaded by the time it is to serve
 * is loaded by drk's thread as before. One request at a time; it holds its
 * own copy of the cubin, so drk may free the build meanwhile. */
enum { QUIET_IDLE, QUIET_ASKED, QUIET_LOADING, QUIET_DONE };
#define QUIET_ROUNDS 8 /* rounds a request may wait for a synchronize */
static struct {
    _Atomic int state;
    /* Written by drk's thread before ASKED; read by the loading thread. */
    CUcontext ctx;
    void *cubin;
    const char *name;
    drk_variant attrv;
    /* Written by the loading thread before DONE. */
    CUmodule module;
    CUfunction fn;
    CUresult r;
    const char *what;
    uint64_t ns;
    /* drk's thread's own. */
    struct target *t;
    uint32_t id;
    unsigned asked_round;
} quiet;
static unsigned quiet_loads;

/* Asks for `b`'s served copy at the program's next synchronize. */
static void quiet_ask(struct target *t, const struct built *b)
{
    if (b->pfn || !b->cubin || !prog_ctx || atomic_load_explicit(&quiet.state, memory_order_acquire) != QUIET_IDLE)
        return;
    void *copy = malloc(b->cubin_len);
    if (!copy)
        return;
    memcpy(copy, b->cubin, b->cubin_len);
    free(quiet.cubin);
    quiet.cubin = copy;
    quiet.ctx = prog_ctx, quiet.name = t->rec->name, quiet.attrv = b->attrv;
    quiet.t = t, quiet.id = b->id, quiet.asked_round = rounds_seen;
    atomic_store_explicit(&quiet.state, QUIET_ASKED, memory_order_release);
}

void drk_engine_quiet(void)
{
    if (atomic_load_explicit(&quiet.state, memory_order_acquire) != QUIET_ASKED)
        return;
    CUcontext cur = NULL;
    if (drv.ctx_get_current(&cur) != CUDA_SUCCESS || cur != quiet.ctx)
        return; /* another context's synchronize: its queue says nothing of this one's */
    int want = QUIET_ASKED;
    if (!atomic_compare_exchange_strong(&quiet.state, &want, QUIET_LOADING))
        return;
    uint64_t t0 = drk_mono_ns();
    CUmodule m;
    CUfunction fn;
    const char *what;
    CUresult r = load_copy(quiet.cubin, quiet.name, &quiet.attrv, &m, &fn, &what);
    if (r != CUDA_SUCCESS && m) {
        CUresult u = drv.module_unload(m);
        (void)u; /* the load's failure is the one to tell */
        m = NULL;
    }
    quiet.module = m, quiet.fn = fn, quiet.r = r, quiet.what = what;
    quiet.ns = drk_mono_ns() - t0;
    atomic_store_explicit(&quiet.state, QUIET_DONE, memory_order_release);
}

/* drk's thread: a loaded copy goes to its build (still there, not loaded
 * since); a request no synchronize answered in QUIET_ROUNDS rounds, or
 * whose target ended, is taken back. `all`: at exit, waits for a load in
 * flight (right after a synchronize it takes well under a millisecond;
 * after 2 s the exit goes on and leaves it its cubin). */
static void quiet_take(int all)
{
    int s = atomic_load_explicit(&quiet.state, memory_order_acquire);
    if (s == QUIET_ASKED && (all || rounds_seen - quiet.asked_round > QUIET_ROUNDS ||
                             quiet.t->state == DRK_TARGET_FAILED || atomic_load(&quiet.t->gone))) {
        int want = QUIET_ASKED;
        if (atomic_compare_exchange_strong(&quiet.state, &want, QUIET_IDLE)) {
            free(quiet.cubin); /* no synchronize can take it now */
            quiet.cubin = NULL;
            return;
        }
        s = want;
    }
    for (int waited = 0; all && s == QUIET_LOADING && waited < 2000; waited++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        s = atomic_load_explicit(&quiet.state, memory_order_acquire);
    }
    if (s != QUIET_DONE)
        return;
    struct target *t = quiet.t;
    struct built *b = built_of(t, quiet.id);
    double ms = ms_of(quiet.ns);
    int pending = b && t->cached_pending && is_served(t, b);
    if (quiet.r != CUDA_SUCCESS) {
        drk_log(pending ? DRK_LOG_INFO : DRK_LOG_DEBUG, "evolve: %.80s: the served copy's load at a synchronize "
                "failed: %s (%d)%s", t->rec->name, quiet.what, (int)quiet.r,
                pending ? "; the cached result is withdrawn, searching" : "");
        if (pending) {
            withdraw(t);
            free_built(t, b);
        }
    } else if (b && !b->pfn && !atomic_load(&t->gone)) {
        b->pmodule = quiet.module, b->pfn = quiet.fn;
        served_loads++;
        quiet_loads++;
        served_load_ms_max = ms > served_load_ms_max ? ms : served_load_ms_max;
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the served copy loaded into the program's context at its "
                               "synchronize in %.2f ms", t->rec->name, ms);
        if (pending)
            serve_cached(t, b, ms);
    } else {
        bury(quiet.module); /* its build went, or was loaded meanwhile */
    }
    free(quiet.cubin);
    quiet.cubin = NULL;
    atomic_store_explicit(&quiet.state, QUIET_IDLE, memory_order_release);
}

/* ---- Earlier runs' results (the cache) ---- */

/* Variant `v` of `t` read from the cache into a build slot, not loaded in
 * any context yet (load_cached_own loads it into drk's for proofs), or
 * NULL if its cubin is not in the cache. */
static struct built *cached_slot(struct target *t, const drk_variant *v)
{
    if (!cfg.cache)
        return NULL;
    drk_variant jit, attr;
    to_sources(v, &jit, &attr);
    drk_build_in in = own_build_in(t);
    drk_cache_key ck;
    drk_cache_blob hit = {0};
    if (cubin_key(t, &in, &jit, &ck) != 0 || drk_cache_get(cfg.cache, &ck, CUBIN_KIND, &hit) != 0)
        return NULL;
    struct built *b = slot_for(t);
    void *cubin = b ? malloc(hit.len) : NULL;
    if (cubin) {
        memcpy(cubin, hit.data, hit.len);
        b->cubin = cubin, b->cubin_len = hit.len;
        b->id = drk_variant_id(&drk_space_ptx, v), b->attrv = attr;
    }
    drk_cache_blob_free(&hit);
    return cubin ? b : NULL;
}

/* An earlier run's result serves: its copy in the program's context loaded
 * in `load_ms` (at a synchronize, or by drk's thread). */
static void serve_cached(struct target *t, struct built *b, double load_ms)
{
    t->cached_pending = 0;
    drk_registry_serve(t->rec->handle, &t->shape, (uintptr_t)b->pfn);
    t->served = b->pfn;
    served_changed(t);
    double ms = t->pending_read_ms + load_ms;
    cache_serves++;
    cache_serve_ms_sum += ms;
    cache_serve_ms_max = ms > cache_serve_ms_max ? ms : cache_serve_ms_max;
    char text[96];
    drk_log(DRK_LOG_INFO, "evolve: %.80s at grid (%u,%u,%u) block (%u,%u,%u): serving %s from the cache (%.3fx in an "
                          "earlier run; read and loaded in %.2f ms)%s",
            t->rec->name, t->shape.grid[0], t->shape.grid[1], t->shape.grid[2], t->shape.block[0], t->shape.block[1],
            t->shape.block[2], drk_variant_text(&drk_space_ptx, &t->served_v, text, sizeof text), t->speedup, ms,
            t->from_cache ? ", to be proven again on launches" : ", proven again on launches already");
}

/* A result from the cache: served from the program's next synchronize,
 * its copy loaded into the program's context there with its queue empty
 * (quiet_ask; drk's thread loaded it at once before, behind a busy queue
 * that the program's launch calls then waited for: 672 ms once on the
 * H200), and proven again on the next launches before the target settles
 * (a proof that fails withdraws it and the search starts). Its cubin comes
 * from the cache without a load into drk's context, which waits for the
 * GPU to switch to it (1-3 ms on a busy H200): the proofs load it there. */
static void from_cache(struct target *t, const drk_variant *v, double speedup)
{
    cache_hits++;
    char text[96], why[256];
    drk_variant_text(&drk_space_ptx, v, text, sizeof text);
    if (drk_variant_is_default(v)) {
        end_target(t, DRK_TARGET_SETTLED, "an earlier run found nothing faster (the cache)");
        return;
    }
    uint64_t c0 = drk_mono_ns();
    struct built *b = cached_slot(t, v);
    if (!b && build(t, v, NULL, why, sizeof why).fn) /* its cubin not in the cache: compiled */
        b = built_of(t, drk_variant_id(&drk_space_ptx, v));
    if (!b) {
        drk_log(DRK_LOG_INFO, "evolve: %.80s: the cached result %s does not build (%.160s): searching", t->rec->name,
                text, why);
        return;
    }
    t->served_v = *v, t->speedup = speedup, t->from_cache = t->came_from_cache = 1;
    t->cached_pending = 1, t->pending_round = rounds_seen, t->pending_read_ms = ms_of(drk_mono_ns() - c0);
    quiet_ask(t, b);
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the cached %s (%.3fx in an earlier run) serves from the program's next "
                           "synchronize", t->rec->name, text, speedup);
}

/* ---- One search round on a captured launch ---- */

/* The program's original kernel in drk's context (current), loaded again
 * from its image: a library's kernel by the driver (which keeps its image),
 * a module's from drk's copy of the image and its JIT options. Same image,
 * same options, same driver: the same code the program runs. NULL with
 * why. Kept per target. */
/* The program's modules loaded again in drk's context, by owner: one load
 * serves every kernel of a module. The program's unload marks its entry
 * stale (drk_engine_unloading, under the fence); it is unloaded when next
 * looked at. A load that an unload (of any module) overtook is not kept
 * here: the owner's value may be a new module's by then. */
#define ORIGS 32
static struct {
    uintptr_t owner;
    CUmodule module;
    int stale;
} origs[ORIGS];
static unsigned norigs;
static uint64_t unloads; /* the program's unloads, under the fence */

/* The owner's module in drk's context (current): CUDA_SUCCESS, or the
 * failing call in *what. */
static CUresult orig_module(uintptr_t owner, drk_images_again *again, CUmodule *out, const char **what)
{
    *out = NULL;
    int slot = -1;
    pthread_mutex_lock(&fence);
    for (unsigned i = 0; i < norigs; i++) {
        if (origs[i].module && origs[i].stale) {
            drv.module_unload(origs[i].module); /* drk's context: waits for nothing */
            origs[i].module = NULL;
        }
        if (origs[i].module && origs[i].owner == owner)
            *out = origs[i].module;
        if (!origs[i].module && slot < 0)
            slot = (int)i;
    }
    uint64_t seen = unloads;
    pthread_mutex_unlock(&fence);
    if (*out)
        return CUDA_SUCCESS;
    /* Outside the fence: a JIT of the PTX may take a while. */
    *what = "cuModuleLoadDataEx (the program's image)";
    CUresult r = drv.module_load_data_ex(out, again->image, again->nopts, again->opts, again->vals);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fence);
    if (slot < 0 && norigs < ORIGS)
        slot = (int)norigs++;
    if (slot >= 0 && unloads == seen)
        origs[slot].owner = owner, origs[slot].module = *out, origs[slot].stale = 0;
    pthread_mutex_unlock(&fence);
    return CUDA_SUCCESS; /* not kept: drk's context goes with its modules */
}

static CUfunction original_of(struct target *t, char *why, size_t len)
{
    if (t->orig && t->orig_ctx == own_ctx)
        return t->orig;
    uintptr_t owner = atomic_load_explicit(&t->rec->owner, memory_order_acquire);
    CUkernel k = t->rec->kind == DRK_HANDLE_KERNEL ? (CUkernel)t->rec->handle : NULL;
    drk_images_again again = {0};
    if (!k && drk_images_again_of(owner, &again) != 0)
        return snprintf(why, len, "its image cannot be loaded again in drk's context: %.120s", again.why), NULL;
    CUfunction fn = NULL;
    CUresult r = CUDA_SUCCESS;
    const char *what = "";
    if (!k && !again.library) {
        CUmodule m = NULL;
        r = orig_module(owner, &again, &m, &what);
        drk_images_again_free(&again);
        if (r == CUDA_SUCCESS && (r = drv.module_get_function(&fn, m, t->rec->name)) != CUDA_SUCCESS)
            what = "cuModuleGetFunction";
    }
    pthread_mutex_lock(&fence);
    if (atomic_load(&t->gone)) {
        pthread_mutex_unlock(&fence);
        return snprintf(why, len, "its module was unloaded by the program"), NULL;
    }
    if (!k && again.library) {
        what = "cuLibraryGetKernel";
        r = drv.library_get_kernel ? drv.library_get_kernel(&k, (CUlibrary)owner, t->rec->name) : CUDA_ERROR_NOT_FOUND;
    }
    if (k && r == CUDA_SUCCESS) {
        what = "cuKernelGetFunction (in drk's context)";
        r = drv.kernel_get_function ? drv.kernel_get_function(&fn, k) : CUDA_ERROR_NOT_FOUND;
    }
    pthread_mutex_unlock(&fence);
    if (r != CUDA_SUCCESS || !fn)
        return snprintf(why, len, "%s failed (%d)", what, (int)r), NULL;
    t->orig = fn, t->orig_ctx = own_ctx;
    return fn;
}

/* A target just chosen (the program's context current): its original
 * loaded into drk's context while its captures are awaited, not after the
 * first comes. A module's load JIT-compiles its PTX image whole: 150-300
 * ms for evolve_bench's twelve kernels on the H200, which held up naive
 * matmul's first capture. A failure is left for its trials to say. */
static void load_original_ahead(struct target *t)
{
    char why[192];
    if (push_own() != 0)
        return;
    uint64_t t0 = drk_mono_ns();
    CUfunction fn = original_of(t, why, sizeof why);
    pop_own();
    if (fn)
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: its original loaded in drk's context in %.1f ms, ahead of its captures",
                t->rec->name, ms_of(drk_mono_ns() - t0));
}

static uint32_t served_id(const struct target *t)
{
    return t->served ? drk_variant_id(&drk_space_ptx, &t->served_v) : DRK_VARIANT_NONE;
}

/* The best of the earlier choices proven on enough launches, still faster
 * than the original and faster by the margin than what serves; or NULL. */
static struct built *best_proven_choice(struct target *t, drk_variant *v, double *median)
{
    double floor = 0;
    drk_ratio_stats st;
    if (t->served && drk_evolution_worth_serving(&t->evo, &t->served_v, &st))
        floor = st.median * (1 + DRK_EVO_MARGIN);
    struct built *best = NULL;
    for (unsigned i = 0; i < t->nchoices; i++) {
        struct built *b = built_of(t, t->choices[i]);
        drk_variant c;
        if (!b || b->proven < DRK_PROOF_LAUNCHES || t->choices[i] == served_id(t) ||
            drk_variant_from_id(&drk_space_ptx, t->choices[i], &c) != 0 ||
            !drk_evolution_worth_serving(&t->evo, &c, &st) || st.median < floor)
            continue;
        floor = st.median, best = b, *v = c, *median = st.median;
    }
    return best;
}

/* The proven build's copy in the program's context, or NULL with one log line. */
static CUfunction serve_proven(struct target *t, struct built *b)
{
    char why[160];
    CUfunction fn = serve_copy(t, b, why, sizeof why);
    if (!fn)
        drk_log(DRK_LOG_INFO, "evolve: %.80s: a proven variant cannot be served: %s", t->rec->name, why);
    return fn;
}

static void publish(struct target *t, const drk_evo_decision *d)
{
    CUfunction fn = NULL;
    /* An earlier run's choice (PARTIAL_SERVING) serves on while this
     * search has not measured it slower than the original. */
    drk_ratio_stats was = drk_evolution_stats(&t->evo, &t->served_v);
    if (!d->serve && t->served && t->came_from_cache && (!was.n || was.median >= 1))
        return;
    drk_variant v = d->variant;
    double median = d->stats.median;
    if (d->serve) {
        uint32_t id = drk_variant_id(&drk_space_ptx, &d->variant);
        struct built *b = built_of(t, id);
        /* Served only once proven on enough distinct launches; until then
         * the original runs, and the search keeps measuring it. */
        if (b && b->proven >= DRK_PROOF_LAUNCHES)
            fn = serve_proven(t, b);
        else if (b)
            quiet_ask(t, b); /* to serve once proven: its copy loaded while the program's queue is empty */
        /* The search moved on to a variant not yet proven on enough
         * launches (or not loadable): an earlier choice proven since, and
         * faster, serves meanwhile; else what serves goes on serving
         * (proven, and not found slower, or the search would have dropped
         * it). On the H200 the n-body went back to its default twice when
         * the search moved on; once it served nothing in 10 rounds, its
         * search's choice changing every round before its third proof. */
        struct built *alt;
        if (!fn && (alt = best_proven_choice(t, &v, &median)))
            fn = serve_proven(t, alt);
        if (!fn && t->served)
            return;
    }
    if (fn == t->served)
        return;
    drk_registry_serve(t->rec->handle, &t->shape, (uintptr_t)fn);
    char text[96];
    if (fn) {
        t->served_v = v;
        t->speedup = median;
        t->trusted++;
        drk_log(DRK_LOG_INFO, "evolve: %.80s at grid (%u,%u,%u) block (%u,%u,%u): serving %s, %.3fx (%u launches "
                              "proven bit for bit)",
                t->rec->name, t->shape.grid[0], t->shape.grid[1], t->shape.grid[2], t->shape.block[0],
                t->shape.block[1], t->shape.block[2], drk_variant_text(&drk_space_ptx, &v, text, sizeof text),
                median, DRK_PROOF_LAUNCHES);
    } else {
        t->speedup = 1;
        drk_log(DRK_LOG_INFO, "evolve: %.80s: back to the program's own function", t->rec->name);
    }
    t->served = fn;
    t->came_from_cache = 0;
    served_changed(t);
}

/* After the round's decision: the search's choice joins the choices when
 * it does not serve; those that serve, were banned or are no longer
 * faster leave. A full list gives up its slowest. */
static void note_choice(struct target *t, const drk_evo_decision *d)
{
    unsigned k = 0;
    double median[CHOICES];
    drk_ratio_stats st;
    for (unsigned i = 0; i < t->nchoices; i++) {
        drk_variant c;
        if (t->choices[i] != served_id(t) && drk_variant_from_id(&drk_space_ptx, t->choices[i], &c) == 0 &&
            drk_evolution_worth_serving(&t->evo, &c, &st))
            median[k] = st.median, t->choices[k++] = t->choices[i];
    }
    t->nchoices = k;
    uint32_t id = d->serve ? drk_variant_id(&drk_space_ptx, &d->variant) : DRK_VARIANT_NONE;
    if (id == DRK_VARIANT_NONE || id == served_id(t))
        return;
    for (unsigned i = 0; i < k; i++)
        if (t->choices[i] == id)
            return;
    if (k < CHOICES) {
        t->choices[t->nchoices++] = id;
        return;
    }
    unsigned slow = 0;
    for (unsigned i = 1; i < k; i++)
        if (median[i] < median[slow])
            slow = i;
    if (d->stats.median > median[slow])
        t->choices[slow] = id;
}

/* The served variant's build (its trials' copy in drk's context), or NULL
 * with the target ended: it was lost. */
static struct built *served_built(struct target *t)
{
    struct built *b = built_of(t, drk_variant_id(&drk_space_ptx, &t->served_v));
    if (b && is_served(t, b))
        return b;
    withdraw(t);
    end_target(t, DRK_TARGET_FAILED, "the served variant's build was lost");
    return NULL;
}

/* The last wait found a timed run of the original different from O1, on
 * an input every check before it vouched for (drk_proof_work's
 * nondeterministic): the original differs from itself, as O1 != O2 would
 * have shown; refused as then. 1 when it ended `t`. */
static int original_differed(struct target *t, const drk_trial *tr)
{
    if (!tr->work.nondeterministic)
        return 0;
    end_target(t, DRK_TARGET_REFUSED,
               "the original differed from its own output in a timed run on capture %u: nondeterministic, so no "
               "variant can be proven equal", t->captures);
    return 1;
}

/* A served result from the cache, proven again on this launch. */
static void verify_cached(struct target *t, drk_trial *tr, const drk_proof_ref *ref)
{
    drk_proof_ops ops = drk_trial_ops(tr);
    struct built *b = served_built(t);
    if (!b)
        return;
    char text[96], why[256];
    drk_variant_text(&drk_space_ptx, &t->served_v, text, sizeof text);
    /* Served from its cubin alone so far: loaded into drk's context now. */
    if (!(tr->variant = trial_fn(b)).fn && !(tr->variant = build(t, &t->served_v, NULL, why, sizeof why)).fn) {
        withdraw(t);
        free_built(t, b);
        snprintf(t->why, sizeof t->why, "the cached %.40s does not load for its proofs: %.100s", text, why);
        drk_log(DRK_LOG_INFO, "evolve: %.80s: %s; withdrawn, searching", t->rec->name, t->why);
        return;
    }
    drk_proof_result pr = drk_proof_variant(&ops, ref);
    if (pr.verdict == DRK_PROOF_EQUAL) {
        if (b)
            count_proof(b, t->captures);
        t->rounds++;
        if (b && b->proven >= DRK_PROOF_LAUNCHES) {
            t->proven++, t->trusted++;
            t->from_cache = 0; /* proven here now: measured again like any served variant */
            if (t->search_on) {
                t->search_on = 0;
                drk_log(DRK_LOG_INFO, "evolve: %.80s: the cached %s proven again on %d launches: its search goes on",
                        t->rec->name, text, DRK_PROOF_LAUNCHES);
                return;
            }
            drk_log(DRK_LOG_INFO, "evolve: %.80s: the cached %s proven again on %d launches", t->rec->name, text,
                    DRK_PROOF_LAUNCHES);
            rest(t, "an earlier run's result (the cache), proven again on 3 launches");
        }
        return;
    }
    /* Withdrawn at once; the search takes over. */
    withdraw(t);
    if (pr.verdict == DRK_PROOF_ERROR) {
        end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", pr.why);
        return;
    }
    t->rejected++;
    drk_evolution_reject(&t->evo, &t->served_v);
    snprintf(t->why, sizeof t->why, "the cached %.40s rejected: %.120s", text, pr.why);
    drk_log(DRK_LOG_WARN, "evolve: %.80s: %s; withdrawn, searching", t->rec->name, t->why);
    if (b)
        free_built(t, b);
}

/* A rested variant measured again on this launch: proven, then timed in all
 * its pairs against the original; one that differs now, or has become
 * slower by the margin beyond its noise, is withdrawn. */
static void remeasure(struct target *t, drk_trial *tr, const drk_proof_ref *ref)
{
    drk_proof_ops ops = drk_trial_ops(tr);
    char text[96];
    drk_variant_text(&drk_space_ptx, &t->served_v, text, sizeof text);
    t->rechecking = 0;
    struct built *b = served_built(t);
    if (!b)
        return;
    tr->variant = trial_fn(b);
    drk_proof_result pr = drk_proof_variant(&ops, ref);
    if (pr.verdict != DRK_PROOF_EQUAL) {
        withdraw(t);
        if (pr.verdict == DRK_PROOF_ERROR) {
            end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", pr.why);
            return;
        }
        t->rejected++;
        drk_log(DRK_LOG_WARN, "evolve: %.80s: %s now differs (%.150s): back to the program's own function",
                t->rec->name, text, pr.why);
        end_target(t, DRK_TARGET_SETTLED, "%.40s differed when measured again", text);
        return;
    }
    float sp[PAIRS];
    double orig_ns = 0;
    tr->full = 1;
    int n = drk_trial_time(tr, PAIRS, sp, &orig_ns);
    if (n < 0) {
        end_target(t, DRK_TARGET_FAILED, "a timed replay failed: %s", tr->why);
        return;
    }
    if (original_differed(t, tr))
        return;
    if (tr->work.failed) {
        /* Its timed runs are compared too (restoring only what may differ):
         * one differed from the original's output, a variant that differs
         * from run to run. */
        withdraw(t);
        t->rejected++;
        drk_log(DRK_LOG_WARN, "evolve: %.80s: %s differed from the original in a timed run: back to the program's "
                              "own function", t->rec->name, text);
        end_target(t, DRK_TARGET_SETTLED, "%.40s differed in a timed run", text);
        return;
    }
    drk_ratio_stats st = drk_ratio_stats_of(sp, (unsigned)n);
    if (n >= 3 && st.median <= 1 - DRK_EVO_MARGIN && st.upper < 1) {
        withdraw(t);
        drk_log(DRK_LOG_INFO, "evolve: %.80s: %s now measures %.3fx: back to the program's own function",
                t->rec->name, text, st.median);
        end_target(t, DRK_TARGET_SETTLED, "%.40s became slower (%.3fx) and was withdrawn", text, st.median);
        return;
    }
    if (n >= 3)
        t->speedup = st.median;
    char why[96];
    snprintf(why, sizeof why, "measured again: %.3fx", st.median);
    unsigned every = t->recheck_every;
    rest(t, why);
    t->recheck_every = every >= RECHECK_MAX / 2 ? RECHECK_MAX : 2 * every;
}

/* A wait was tainted (drk_trial_tainted; `what` of it is lost): the
 * capture's runs from now on are prepared from whole copies, and the
 * original is timed again so. Their timed runs are still compared with
 * O1 (check_whole), so that a candidate that differs only from run to run
 * is named in the batch made again too. */
static void whole_copies(const struct target *t, drk_trial *tr, const char *what)
{
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: a run changed what later runs read: %s; whole copies from "
                           "now on", t->rec->name, t->captures, what);
    tr->work.spans = 0;
    tr->check_whole = 1;
    tr->original_ns = 0;
}

/* The capture before's reference, while this capture's is still to be
 * queued (by its first batch), or &first_launch where no capture before
 * fits (its reference queued blind: drk_proof_reference_queue's NULL);
 * NULL otherwise. */
static const drk_proof_ref *ref_prev;
static const drk_proof_ref first_launch;

/* A candidate of a batch: built, then its proof and timed runs queued. */
struct queued {
    drk_variant v;
    struct built *b;
    int served;                 /* timed whole, in pairs (a drop wants its samples) */
    int first, more;            /* its first timed run's ticket, and the further runs'; -1: none */
    drk_proof_result pr;
    float s[PAIRS];
    int got;
};

/* A candidate found to differ from the original: the search told, and one
 * info line (`where`: "", or which launch said so). */
static void reject(struct target *t, const drk_variant *v, const char *why, const char *where)
{
    char text[96];
    drk_variant_text(&drk_space_ptx, v, text, sizeof text);
    snprintf(t->why, sizeof t->why, "%.60s rejected: %.120s", text, why);
    drk_log(DRK_LOG_INFO, "evolve: %.80s: %s%s", t->rec->name, t->why, where);
    drk_evolution_reject(&t->evo, v);
    t->rejected++;
}

/* The candidate whose run the last wait found different from O1 on an
 * input every check before it held for (drk_proof_work's differed): its
 * proof's run, or a timed one, which is compared too while runs are
 * restored in part. Rejected as a proof that differs would be: a variant
 * whose output changes from run to run is not equal to the original, even
 * if its proof's run was. Its index in q, or -1. `diffs`: the batch's
 * compares, for its proof's own words; NULL after the further runs'
 * wait. */
static int candidate_differed(struct target *t, drk_trial *tr, const drk_proof_ref *ref, struct queued *q,
                              unsigned nq, const drk_diff *diffs)
{
    unsigned tag = tr->work.differed;
    if (!tag || tag > nq || q[tag - 1].pr.verdict == DRK_PROOF_DIFFERS)
        return -1;
    struct queued *c = &q[tag - 1];
    drk_proof_ops ops = drk_trial_ops(tr);
    drk_proof_result pr = diffs ? drk_proof_variant_check(&ops, ref, diffs + (tag - 1) * ops.n)
                                : (drk_proof_result){.verdict = DRK_PROOF_EQUAL};
    if (pr.verdict == DRK_PROOF_ERROR)
        return -1; /* the batch's own check ends the target */
    if (pr.verdict == DRK_PROOF_EQUAL) {
        pr = (drk_proof_result){.verdict = DRK_PROOF_DIFFERS};
        snprintf(pr.why, sizeof pr.why, "a timed run differs from the original's output on capture %u (its "
                                        "proof's run did not): it differs from run to run", t->captures);
    }
    c->pr = pr;
    reject(t, &c->v, pr.why, "");
    return (int)tag - 1;
}

/* The proofs and timings of built candidates, queued and waited for once
 * (and once more for the runs of those that look faster by the margin):
 * in drk's context every wait is a switch of the GPU between contexts,
 * which the program's kernels pay for (docs/evolve.md, "Trials in
 * batches"). Candidates are timed against the original's median on this
 * capture (timed once, PAIRS runs), one run first and the rest only for
 * one that looks faster by the margin: most candidates win nothing
 * (docs/evolve.md, the recorded spaces), and none pays for the original's
 * runs; unless the kernel is so short that all their runs cost less than
 * that second wait. The served variant is timed whole, in pairs. 0; 1 when
 * the batch is to be made again (poison did not stand); -1 when the target
 * ended. */
static int run_batch(struct target *t, drk_trial *tr, drk_proof_ref *ref, struct queued *q, unsigned *nqp, int timed)
{
    drk_proof_ops ops = drk_trial_ops(tr);
    unsigned nq = *nqp;
    tr->work.tag = 0; /* the reference's and the original's runs: no candidate's */
    if (ref_prev) {
        /* The capture's reference, queued first: its compares take the
         * first slots, and the batch's verdicts wait for it to settle. */
        int rc = drk_proof_reference_queue(&ops, ref_prev == &first_launch ? NULL : ref_prev, ref);
        ref_prev = NULL;
        if (rc != 0)
            drk_proof_reference(&ops, ref); /* the capture before does not fit this one */
        if (ref->state != DRK_PROOF_EQUAL) {
            end_by_ref(t, ref);
            return -1;
        }
    }
    unsigned base = ref->queued; /* a queued reference's compares come first */
    int orig[PAIRS], norig = 0, need_orig = 0, more = 0;
    /* A short kernel's further runs cost less than the wait for them
     * (DRK_EVO_WAIT_NS): every candidate gets all its runs in this batch. */
    int eager = timed && t->default_ns > 0 && t->default_ns * (PAIRS - 1) * nq < DRK_EVO_WAIT_NS;
    if (eager)
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: %u candidates timed in full in one wait (%.1f us a run)",
                t->rec->name, t->captures, nq, t->default_ns / 1e3);
    for (unsigned k = 0; k < nq; k++)
        need_orig |= timed && !q[k].served && tr->original_ns <= 0;
    /* After a wait the GPU has just switched to drk's context, and the
     * first runs there are not like the rest: one untimed run of the
     * original first, and the original's timed runs spread among the
     * candidates', so that neither side has the batch's start to itself. */
    if (timed && drk_trial_queue_timed(tr, tr->original) < 0)
        goto failed;
    for (unsigned k = 0; k < nq; k++) {
        tr->work.tag = 0;
        if (need_orig && norig < PAIRS && (orig[norig++] = drk_trial_queue_timed(tr, tr->original)) < 0)
            goto failed;
        tr->variant = trial_fn(q[k].b);
        tr->work.tag = k + 1; /* its proof's run and its timed runs: a check of one that fails names it */
        if (drk_proof_variant_queue(&ops, ref, base + k * ops.n, &q[k].pr) != 0) {
            end_target(t, DRK_TARGET_FAILED, "a replay failed: %s (%s)", q[k].pr.why, tr->why);
            return -1;
        }
        /* The proof's run, prepared as every timed run is (tr->ref), is the
         * candidate's first sample; the served one is timed in pairs. */
        if (timed && (q[k].first = q[k].served ? drk_trial_queue_pairs(tr, PAIRS) : drk_trial_last_ticket(tr)) < 0)
            goto failed;
        if (eager && !q[k].served && (q[k].more = drk_trial_queue_runs(tr, trial_fn(q[k].b), PAIRS - 1)) < 0)
            goto failed;
    }
    tr->work.tag = 0;
    while (need_orig && norig < PAIRS)
        if ((orig[norig++] = drk_trial_queue_timed(tr, tr->original)) < 0)
            goto failed;
    static drk_diff diffs[DRK_PROOF_SLOTS];
    if (ops.wait(ops.self, diffs, base + nq * ops.n) != 0 ||
        (need_orig && drk_trial_read_original_at(tr, orig, PAIRS) != 0))
        goto failed;
    int stands = base ? drk_proof_reference_settle(&ops, ref, diffs) : 1;
    if (stands < 0) {
        end_by_ref(t, ref);
        return -1;
    }
    if (!stands) {
        /* Poison did not stand in on this launch: every proof and time of
         * the batch is made again, unpoisoned. */
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the original reads what it writes on capture %u: proofs again, "
                               "unpoisoned", t->rec->name, t->captures);
        tr->original_ns = 0;
        return 1;
    }
    if (original_differed(t, tr))
        return -1;
    /* A candidate whose run differed from O1 on S, whichever of its runs
     * (its proof's or a timed one): rejected as its proof would be. */
    int odd = candidate_differed(t, tr, ref, q, nq, diffs + base);
    if (drk_trial_tainted(tr)) {
        /* A run changed what later runs of the batch read (a variant that
         * differs, or a launch that writes what the one before did not):
         * nothing of the batch stands; made again from whole copies,
         * without the candidate that differed. */
        whole_copies(t, tr, "the batch is made again");
        if (odd >= 0) {
            struct queued c = q[odd];
            q[odd] = q[nq - 1], q[nq - 1] = c;
            (*nqp)--;
        }
        return 1;
    }
    for (unsigned k = 0; k < nq; k++) {
        struct queued *c = &q[k];
        char text[96];
        drk_variant_text(&drk_space_ptx, &c->v, text, sizeof text);
        if ((int)k == odd)
            continue; /* rejected above */
        c->pr = drk_proof_variant_check(&ops, ref, diffs + base + k * ops.n);
        if (c->pr.verdict == DRK_PROOF_ERROR) {
            end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", c->pr.why);
            return -1;
        }
        if (c->pr.verdict != DRK_PROOF_EQUAL) {
            reject(t, &c->v, c->pr.why, "");
            continue;
        }
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s proven bit for bit on capture %u (%u allocations compared)",
                t->rec->name, text, t->captures, ops.n);
        if (count_proof(c->b, t->captures))
            t->proven += c->b->proven == 1;
        if (!timed)
            continue;
        tr->full = c->served;
        c->got = c->served ? drk_trial_read_pairs(tr, c->first, PAIRS, c->s, NULL)
                           : drk_trial_read_runs(tr, c->first, 1, c->s);
        if (c->got < 0)
            goto failed_timing;
        if (!eager && !c->served && c->got == 1 && c->s[0] >= 1 + DRK_EVO_MARGIN) {
            tr->work.tag = 0;
            if (!more && drk_trial_queue_timed(tr, tr->original) < 0) /* after the wait, untimed */
                goto failed_timing;
            tr->work.tag = k + 1;
            if ((c->more = drk_trial_queue_runs(tr, trial_fn(c->b), PAIRS - 1)) < 0)
                goto failed_timing;
            more = 1;
        }
    }
    tr->work.tag = 0;
    if (more && drk_trial_wait(tr) != 0)
        goto failed_timing;
    if (more && original_differed(t, tr))
        return -1;
    if (more)
        candidate_differed(t, tr, ref, q, nq, NULL);
    /* The further runs' times rested on a variant's run that differed: the
     * first runs' stand, these do not. */
    int further = !more || !drk_trial_tainted(tr);
    if (!further)
        whole_copies(t, tr, "the further runs' times are dropped");
    for (unsigned k = 0; k < nq; k++) {
        struct queued *c = &q[k];
        if (c->pr.verdict != DRK_PROOF_EQUAL)
            continue;
        int m = c->more >= 0 && further ? drk_trial_read_runs(tr, c->more, PAIRS - 1, c->s + 1) : 0;
        if (m < 0)
            goto failed_timing;
        if (c->got + m > 0)
            drk_evolution_record(&t->evo, &c->v, c->s, (unsigned)(c->got + m));
        if (c->served && c->got >= 4) {
            char text[96];
            drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the served %s measured in pairs on capture %u: %.3f %.3f %.3f %.3f",
                    t->rec->name, drk_variant_text(&drk_space_ptx, &c->v, text, sizeof text), t->captures, c->s[0],
                    c->s[1], c->s[2], c->s[3]);
        }
    }
    return 0;
failed:
    end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", tr->why);
    return -1;
failed_timing:
    end_target(t, DRK_TARGET_FAILED, "a timed replay failed: %s", tr->why);
    return -1;
}

/* Builds candidates onto the queue (compiled ahead, several at once; on
 * the CPU, before anything is queued: the fence is held from the first
 * replay queued to the wait), up to BATCH queued: the search is told of
 * those that build code built before, or fail. 0, or -1 when the target
 * ended. */
static int queue_builds(struct target *t, const drk_variant *cand, unsigned n, struct queued *q, unsigned *nq,
                        int timed, int look)
{
    char why[256];
    int rc = 0;
    compile_ahead(t, cand, n, look ? &t->evo : NULL);
    for (unsigned i = 0; i < n && *nq < BATCH && rc == 0; i++) {
        const drk_variant *v = &cand[i];
        if (drk_variant_is_default(v))
            continue;
        uint32_t id = drk_variant_id(&drk_space_ptx, v);
        int fresh = !built_of(t, id);
        int same;
        CUfunction fn = build(t, v, &same, why, sizeof why).fn;
        if (same) {
            drk_evolution_same(&t->evo, v);
        } else if (!fn && drk_jitlink_closed()) {
            end_target(t, t->served ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED,
                       "the program exited before the search ended (%u rounds)", t->rounds);
            rc = -1;
        } else if (!fn) {
            drk_evolution_reject(&t->evo, v);
            t->rejected++;
            snprintf(t->why, sizeof t->why, "%.190s", why);
        } else {
            t->tried += fresh;
            struct built *b = built_of(t, id);
            b->busy = 1;
            q[(*nq)++] = (struct queued){.v = *v, .b = b, .served = timed && is_served(t, b), .first = -1, .more = -1};
        }
    }
    if (!look)
        aheads_clear();
    return rc;
}

/* Proves and times the queued candidates in one wait (run_batch), then
 * lets their builds go. 0, or -1 when the target ended (or `rc` was
 * already -1: the queue is only let go). */
static int run_queued(struct target *t, drk_trial *tr, drk_proof_ref *ref, struct queued *q, unsigned nq, int timed,
                      int rc)
{
    unsigned left = nq; /* those still in the batch: the first `left` (one that differed drops out) */
    while (rc == 0 && left && (rc = run_batch(t, tr, ref, q, &left, timed)) == 1)
        rc = 0; /* made again: unpoisoned, or from whole copies */
    /* Dropped after the wait: nothing queued uses them any more. */
    for (unsigned k = 0; k < nq; k++) {
        q[k].b->busy = 0;
        if (rc == 0 && q[k].pr.verdict == DRK_PROOF_DIFFERS) {
            if (is_served(t, q[k].b))
                withdraw(t);
            free_built(t, q[k].b);
        }
    }
    return rc;
}

/* Builds up to BATCH candidates, then proves and (`timed`) times them in
 * one batch: 0, or -1 when the target ended. */
static int try_batch(struct target *t, drk_trial *tr, drk_proof_ref *ref, const drk_variant *cand, unsigned n,
                     int timed)
{
    struct queued q[BATCH];
    unsigned nq = 0;
    int rc = queue_builds(t, cand, n, q, &nq, timed, 0);
    return run_queued(t, tr, ref, q, nq, timed, rc);
}

/* Its buffers back to drk's trial means (drk's context pushed: a target
 * may end with the program's current). */
static void kept_close(struct kept *k)
{
    if (!k->t)
        return;
    if (env_open && push_own() == 0) {
        drk_trial_close(&k->tr);
        pop_own();
    }
    memset(&k->tr, 0, sizeof k->tr);
    k->t = NULL;
}

/* `t`'s kept launches go (NULL: all of them). */
static void kept_forget(const struct target *t)
{
    for (unsigned i = 0; i < KEPT; i++)
        if (kept[i].t && (!t || kept[i].t == t))
            kept_close(&kept[i]);
}

/* Keeps the trial of `t`'s capture just done (moved out of *tr, which is
 * then closed empty) when it can serve later proofs: 1, or 0 (the caller
 * closes it). */
static int keep_trial(struct target *t, drk_trial *tr, const drk_proof_ref *ref)
{
    size_t bytes = 3 * tr->reach.bytes;
    if (t->state != DRK_TARGET_SEARCHING || active != t || t->rechecking || t->from_cache ||
        ref->state != DRK_PROOF_EQUAL || !ref->runs || ref->queued || tr->fenced || tr->unloaded ||
        bytes > KEPT_BYTES)
        return 0;
    /* Another target's go (one searches at a time); then the oldest, while
     * all kept would take more than KEPT_BYTES. */
    for (unsigned i = 0; i < KEPT; i++)
        if (kept[i].t && kept[i].t != t)
            kept_close(&kept[i]);
    for (;;) {
        size_t held = 0;
        struct kept *old = NULL, *free_one = NULL;
        for (unsigned i = 0; i < KEPT; i++) {
            if (!kept[i].t)
                free_one = free_one ? free_one : &kept[i];
            else if (held += kept[i].bytes, !old || kept[i].capture < old->capture)
                old = &kept[i];
        }
        if (free_one && held + bytes <= KEPT_BYTES) {
            free_one->t = t, free_one->capture = t->captures, free_one->bytes = bytes;
            free_one->tr = *tr;
            free_one->ref = *ref;
            free_one->tr.ref = &free_one->ref;
            memset(tr, 0, sizeof *tr); /* the buffers are the kept one's now */
            return 1;
        }
        if (!old)
            return 0;
        kept_close(old);
    }
}

/* The budget pays what the program loses: trials' GPU time `gpu` and,
 * for each of `waits` and each of `loads` (builds loaded in drk's
 * context), the GPU's switch to that context and back (DRK_EVO_WAIT_NS,
 * DRK_EVO_LOAD_NS: the program's kernels wait for both), and the bytes
 * `moved`. Not the wall time, nor the replays' events: while drk waits,
 * the GPU runs the program's kernels in their time slices, and the events
 * count those too. What was charged. */
static double pay(struct target *t, double gpu, unsigned waits, unsigned loads, double moved)
{
    double charge = gpu + waits * DRK_EVO_WAIT_NS + loads * DRK_EVO_LOAD_NS + moved * DRK_EVO_BYTE_NS;
    t->trial_ns += (uint64_t)(gpu + 0.5);
    trial_ns_all += (uint64_t)(gpu + 0.5);
    t->trial_bytes += (uint64_t)moved;
    trial_bytes_all += (uint64_t)moved;
    t->ledger_ns -= charge;
    charged_all += charge;
    return charge;
}

/* Variant `v` of `t`, the search's choice, proven on the kept launches it
 * was not proven on, until it has enough. Charged to the ledger as a
 * capture's trials are. 0; 1 when a kept launch rejected it (the round's
 * choice is void: what serves stays, the next round chooses anew); -1
 * when the target ended. */
static int prove_kept(struct target *t, const drk_variant *v)
{
    struct built *b = built_of(t, drk_variant_id(&drk_space_ptx, v));
    if (!b || !b->jit.fn || b->proven >= DRK_PROOF_LAUNCHES)
        return 0;
    char text[96];
    drk_variant_text(&drk_space_ptx, v, text, sizeof text);
    for (unsigned i = 0; i < KEPT && b->proven < DRK_PROOF_LAUNCHES; i++) {
        struct kept *k = &kept[i];
        if (k->t != t || k->capture == t->captures || proven_at(b, k->capture))
            continue;
        drk_trial *tr = &k->tr;
        unsigned w0 = tr->waits;
        uint64_t m0 = tr->moved;
        double g0 = drk_trial_gpu_ns(tr);
        drk_proof_ops ops = drk_trial_ops(tr);
        tr->variant = trial_fn(b);
        drk_proof_result pr = drk_proof_variant(&ops, &k->ref);
        double charge = pay(t, drk_trial_gpu_ns(tr) - g0, tr->waits - w0, 0, (double)(tr->moved - m0));
        if (pr.verdict == DRK_PROOF_ERROR) {
            int unloaded = tr->unloaded;
            kept_forget(t);
            if (!unloaded)
                end_target(t, DRK_TARGET_FAILED, "a replay failed on a kept launch: %s", pr.why);
            return unloaded ? 0 : -1;
        }
        if (pr.verdict != DRK_PROOF_EQUAL) {
            char where[48];
            snprintf(where, sizeof where, " (a kept launch, capture %u)", k->capture);
            reject(t, v, pr.why, where);
            if (is_served(t, b))
                withdraw(t);
            free_built(t, b);
            return 1;
        }
        if (count_proof(b, k->capture))
            t->proven += b->proven == 1;
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s proven bit for bit on capture %u, kept (%u of %d launches; %.1f ms "
                               "charged)",
                t->rec->name, text, k->capture, b->proven, DRK_PROOF_LAUNCHES, charge / 1e6);
    }
    return 0;
}

/* The search's earlier choices not proven on enough launches yet, proven
 * (untimed) on this capture; the one the search serves now too, unless
 * this round measures it (and so proves it) anyway. On a tight budget the
 * search measures what it serves every few rounds only: on the H200 naive
 * matmul's choice, proven on two captures (which the kept launches were),
 * went unproven on the third, and nothing served for the rest of the run.
 * 0, or -1 when the target ended. */
static int prove_choices(struct target *t, drk_trial *tr, drk_proof_ref *ref)
{
    drk_variant cand[CHOICES + 1], now;
    uint32_t ids[CHOICES + 1];
    unsigned k = 0, n = 0;
    for (unsigned i = 0; i < t->nchoices; i++)
        ids[k++] = t->choices[i];
    uint32_t now_id = drk_evolution_serving(&t->evo, &now) ? drk_variant_id(&drk_space_ptx, &now) : DRK_VARIANT_NONE;
    int measured = now_id != DRK_VARIANT_NONE && drk_evolution_served_due(&t->evo);
    if (now_id != DRK_VARIANT_NONE && now_id != served_id(t) && !measured) {
        unsigned i = 0;
        while (i < k && ids[i] != now_id)
            i++;
        if (i == k)
            ids[k++] = now_id; /* a choice the full list gave up */
    }
    for (unsigned i = 0; i < k; i++) {
        const struct built *b = built_of(t, ids[i]);
        if ((ids[i] != now_id || !measured) &&
            wants_proof(t, b) &&
            drk_variant_from_id(&drk_space_ptx, ids[i], &cand[n]) == 0)
            n++;
    }
    return n ? try_batch(t, tr, ref, cand, n, 0) : 0;
}

/* What a capture's search round may spend on trials: the grant since the
 * last, but at least a full batch's runs. A capture's waits, loads and
 * copies cost the program more than its trials' GPU time, and the ledger
 * charges what the round used: on the H200 naive matmul, chosen with 0.1
 * ms of credit, spent its first capture (4.8 ms charged) on one candidate. */
static double round_credit(const struct target *t)
{
    double each = t->default_ns > 0 ? t->default_ns : 1000.0, batch = BATCH * PAIRS * each;
    return t->credit_ns > batch ? t->credit_ns : batch;
}

static void search_round(struct target *t, drk_trial *tr, drk_proof_ref *ref)
{
    if (t->rechecking) {
        remeasure(t, tr, ref);
        return;
    }
    if (t->from_cache) {
        verify_cached(t, tr, ref);
        return;
    }
    drk_evolution_begin_round(&t->evo, round_credit(t), t->default_ns > 0 ? t->default_ns : 1000.0, PAIRS);
    t->credit_ns = 0;
    drk_variant cand[BATCH];
    unsigned n;
    if (*cfg.plant && !t->plant_tried) {
        /* Testing: the planted variant is tried first, whatever the search
         * would pick, so its rejection is seen on every target. */
        t->plant_tried = 1;
        drk_variant pv;
        char text[96];
        for (uint32_t id = 0; id < drk_space_size(&drk_space_ptx); id++)
            if (drk_variant_from_id(&drk_space_ptx, id, &pv) == 0 &&
                strcmp(drk_variant_text(&drk_space_ptx, &pv, text, sizeof text), cfg.plant) == 0) {
                if (try_batch(t, tr, ref, &pv, 1, 0) != 0)
                    return;
                break;
            }
    }
    if (prove_choices(t, tr, ref) != 0)
        return;
    /* A wait for a full batch, or for what the search has left: proposals
     * that build code built before drop out of a batch, and the search is
     * asked for more before the wait (each wait is a switch of the GPU to
     * drk's context, which the program pays). */
    struct queued q[BATCH];
    unsigned nq = 0;
    for (;;) {
        n = drk_evolution_next(&t->evo, cand, BATCH - nq);
        int rc = n ? queue_builds(t, cand, n, q, &nq, 1, 1) : 0;
        if (rc != 0 || (nq && (nq == BATCH || !n))) {
            rc = run_queued(t, tr, ref, q, nq, 1, rc);
            nq = 0;
        }
        if (rc != 0) {
            aheads_clear();
            return;
        }
        if (!n && !nq)
            break;
    }
    aheads_clear();
    drk_evo_decision d = drk_evolution_end_round(&t->evo);
    t->rounds++;
    t->turn_rounds++;
    if (d.serve) {
        char text[96];
        uint32_t id = drk_variant_id(&drk_space_ptx, &d.variant);
        const struct built *b = built_of(t, id);
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: the search chooses %s, %.3fx over %u trials (proven on %u "
                               "of %d launches)%s",
                t->rec->name, t->captures, drk_variant_text(&drk_space_ptx, &d.variant, text, sizeof text),
                d.stats.median, drk_evolution_trials_of(&t->evo, &d.variant), b ? b->proven : 0, DRK_PROOF_LAUNCHES,
                d.state == DRK_EVO_SETTLED ? "; settled" : "");
        /* The choice proven on this capture too, if the round did not
         * (chosen unmeasured, or its build given up to a later one of the
         * round: built again, from the cache), then on the kept ones. */
        if (wants_proof(t, b)) {
            drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: the search's choice, %s, proven on it", t->rec->name,
                    t->captures, b ? "not measured by the round" : "its build given up in the round, built again");
            if (try_batch(t, tr, ref, &d.variant, 1, 0) != 0)
                return;
            b = built_of(t, id);
            if (!b || !proven_at(b, t->captures))
                return; /* rejected, or not built: the round's choice is void, what serves stays */
        }
        if (prove_kept(t, &d.variant) != 0)
            return; /* ended, or its choice rejected on a kept launch */
    } else {
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: the search trusts no variant yet%s", t->rec->name,
                t->captures, d.state == DRK_EVO_SETTLED ? "; settled" : "");
    }
    note_choice(t, &d);
    publish(t, &d);
    /* Settled once its choice was proven (it serves, or cannot: then what
     * serves stays). */
    const struct built *chosen = d.serve ? built_of(t, drk_variant_id(&drk_space_ptx, &d.variant)) : NULL;
    if (d.state == DRK_EVO_SETTLED &&
        (!d.serve || (t->served && chosen && chosen->proven >= DRK_PROOF_LAUNCHES))) {
        if (!t->stored) {
            /* What serves, proven on enough launches: the decision's
             * variant, or the one kept while that was proven (publish). */
            drk_kernel_features f;
            features_of(t, &f);
            drk_predictor_learn(&predictor, (uint64_t)(uintptr_t)t->rec, t->cls, &f, t->served ? &t->served_v : NULL,
                                t->served ? t->speedup : 1.0);
            drk_variant none = {{0}};
            cache_stored += result_put(t, t->served ? &t->served_v : &none, t->served ? best_speedup(t) : 1.0, 0) == 0;
            t->stored = 1;
        }
        char why[96];
        snprintf(why, sizeof why, "settled after %u rounds", t->rounds);
        if (t->served)
            rest(t, why);
        else
            end_target(t, DRK_TARGET_SETTLED, "%s", why);
    }
}

/* Snapshot buffers for what a launch reaches, into the plan: 0; 1 when
 * device memory ran out (armed for bytes again: a later launch may fit);
 * -1 when the target ended. The buffers are drk's context's, the event
 * (recorded on the program's stream) the program's; its context current. */
static int make_snapshot(struct target *t, const drk_reach *reach)
{
    free_snapshot(t);
    if (push_own() != 0) {
        end_target(t, DRK_TARGET_FAILED, "drk's context cannot be made current");
        return -1;
    }
    CUresult r = CUDA_SUCCESS;
    for (unsigned i = 0; i < reach->n && r == CUDA_SUCCESS; i++) {
        r = drk_trial_buf_get(&env, &t->plan.snap[i], reach->alloc[i].size);
        if (r != CUDA_SUCCESS)
            t->plan.snap[i] = 0;
        t->plan.alloc[i] = reach->alloc[i];
        t->plan.n = i + 1;
    }
    pop_own();
    if (r != CUDA_SUCCESS) {
        free_snapshot(t);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            snprintf(t->why, sizeof t->why, "device memory ran out for a snapshot: waiting");
            arm(t);
            return 1;
        }
        end_target(t, DRK_TARGET_FAILED, "cuMemAlloc for a snapshot failed (%d)", (int)r);
        return -1;
    }
    if (drv.event_create(&t->plan.done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        t->plan.done = NULL;
        free_snapshot(t);
        end_target(t, DRK_TARGET_FAILED, "cuEventCreate failed");
        return -1;
    }
    t->snapshot_bytes = reach->bytes;
    return 0;
}

/* The trials of one capture, in drk's context (current): the snapshot
 * `snap` is theirs. 1 when the search goes on to the next capture. */
static int trials(struct target *t, const drk_capture_got *got, const drk_reach *reach, const CUdeviceptr *snap)
{
    const drk_image_facts *im = t->sk.facts;
    static drk_trial tr; /* large; one at a time */
    char why[192];
    CUfunction orig = original_of(t, why, sizeof why);
    /* The trial owns the snapshot whatever it returns, and frees it. */
    int rc = drk_trial_open(&tr, &env, im->flow, reach, snap, got->params, got->len, t->shape.grid,
                            t->shape.block, t->shape.shared_bytes, orig);
    tr.fence = &fence, tr.gone = &t->gone;
    if (!orig) {
        drk_trial_close(&tr);
        end_target(t, DRK_TARGET_FAILED, "%s", why);
        return 0;
    }
    if (rc != DRK_TRIAL_OK) {
        if (rc == DRK_TRIAL_NO_MEMORY) {
            snprintf(t->why, sizeof t->why, "device memory ran out for a trial: waiting");
            drk_trial_close(&tr);
            arm(t);
        } else {
            end_target(t, DRK_TARGET_FAILED, "%s", tr.why);
            drk_trial_close(&tr);
        }
        return 0;
    }
    drk_proof_ops ops = drk_trial_ops(&tr);
    drk_proof_ref ref;
    uint64_t w0 = drk_mono_ns(), b0 = build_wall_ns;
    unsigned b_made = builds_made;
    /* A search round's reference is queued with its first batch (after
     * its builds: the fence is never held across a compile), for one wait:
     * with what an earlier capture said the original writes, or blind on
     * the first (no poison, no O3: the next probes for it); a served
     * variant's proofs again wait for their own. */
    memset(&ref, 0, sizeof ref); /* deferred: EQUAL until its batch queues it */
    ref_prev = t->rechecking || t->from_cache ? NULL
               : t->prev.state == DRK_PROOF_EQUAL && t->prev.runs && t->prev.n == reach->n ? &t->prev
                                                                                            : &first_launch;
    if (!ref_prev)
        drk_proof_reference(&ops, &ref);
    if (ref.state != DRK_PROOF_EQUAL)
        end_by_ref(t, &ref);
    else {
        t->state = DRK_TARGET_SEARCHING;
        tr.ref = &ref;
        search_round(t, &tr, &ref);
    }
    /* Settled, for the next capture; still deferred (no batch was tried):
     * nothing rests on it, and nothing was queued. */
    if (!ref_prev && ref.state == DRK_PROOF_EQUAL && !ref.queued)
        t->prev = ref;
    ref_prev = NULL;
    uint64_t wall = drk_mono_ns() - w0, built = build_wall_ns - b0;
    wall = wall > built ? wall - built : 0;
    double gpu = drk_trial_gpu_ns(&tr);
    double moved = (double)tr.moved + 2.0 * (double)reach->bytes; /* the snapshot, copied on the program's stream */
    double charge = pay(t, gpu, tr.waits, builds_made - b_made, moved);
    drk_log(DRK_LOG_DEBUG,
            "evolve: %.80s: capture %u's trials took %.1f ms besides %.1f ms of builds (GPU %.1f ms, by their "
            "events %.1f ms, %u waits, %u loads, %.0f MiB moved: %.1f ms charged)",
            t->rec->name, t->captures, ms_of(wall), ms_of(built), gpu / 1e6, ms_of(tr.gpu_ns), tr.waits,
            builds_made - b_made, moved / (1 << 20), charge / 1e6);
    if (!keep_trial(t, &tr, &ref))
        drk_trial_close(&tr);
    return t->state == DRK_TARGET_SEARCHING && active == t;
}

/* The first search round's compiles, made while its capture is awaited
 * (the launch after the one whose bytes planned the snapshot): on the H200
 * naive matmul's first capture came 0.15 s after its bytes, and its
 * compiles then took 0.18 s more before the first trial. The search's
 * first proposals are asked of a copy of it (the round opened as it will
 * be), and compiled ahead with those it would propose next. */
static void compile_first(struct target *t)
{
    if (t->captures || t->from_cache || t->rechecking || compile_threads < 2 || !t->sk.ptx)
        return;
    peek = t->evo;
    drk_evolution_begin_round(&peek, round_credit(t), t->default_ns > 0 ? t->default_ns : 1000.0, PAIRS);
    drk_variant cand[BATCH];
    unsigned n = drk_evolution_next(&peek, cand, BATCH);
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the first search round's compiles, while its capture is awaited",
            t->rec->name);
    compile_ahead(t, cand, n, &peek);
}

/* A capture came back: bytes only (plan the snapshot) or with it (prove,
 * search). The program's context is current. */
static void captured(struct target *t, const drk_capture_got *got)
{
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: a launch captured (%s)", t->rec->name,
            got->snapped ? "with its snapshot" : "its bytes");
    const drk_image_facts *im = t->sk.facts;
    if (!got->snapped && t->plan.n && got->rc != CUDA_SUCCESS) {
        end_target(t, DRK_TARGET_FAILED, "a snapshot could not be queued: %s (%d)", got->why, (int)got->rc);
        return;
    }
    if (!got->snapped) {
        /* What the bytes reach, and buffers for it. */
        drk_reach reach;
        if (drk_reach_of(im->flow, got->params, got->len, cfg.resolve, cfg.copy_max, &reach) != 0) {
            end_target(t, DRK_TARGET_REFUSED, "%s", reach.why);
            return;
        }
        if (make_snapshot(t, &reach) == 0) {
            arm(t);
            compile_first(t);
        }
        return;
    }
    if (drv.event_synchronize(t->plan.done) != CUDA_SUCCESS) {
        end_target(t, DRK_TARGET_FAILED, "the snapshot's copies failed");
        return;
    }
    t->captures++;
    drk_reach reach = {0};
    if (drk_reach_of(im->flow, got->params, got->len, cfg.resolve, cfg.copy_max, &reach) != 0) {
        end_target(t, DRK_TARGET_REFUSED, "%s", reach.why);
        return;
    }
    /* The snapshot's buffers go to the trials; the plan gets new ones for
     * the next capture. */
    CUdeviceptr snap[DRK_REACH_MAX];
    memcpy(snap, t->plan.snap, sizeof snap);
    memset(t->plan.snap, 0, sizeof t->plan.snap);
    drv.event_destroy(t->plan.done);
    t->plan.done = NULL;
    t->plan.n = 0;
    if (push_own() != 0) {
        for (unsigned i = 0; i < reach.n; i++)
            drk_trial_buf_put(&env, snap[i], reach.alloc[i].size);
        end_target(t, DRK_TARGET_FAILED, "drk's context cannot be made current");
        return;
    }
    int next = trials(t, got, &reach, snap);
    pop_own();
    /* One search round a program round: the next launch (new inputs) is
     * captured once this round closes, with buffers for the same reach. */
    if (next && make_snapshot(t, &reach) == 0)
        t->await_round = 1;
}

/* ---- Driving ---- */

/* The round's row `i` if it is worth a search: its record (and slot). */
static const drk_kernel_record *hot_row(const drk_round *r, unsigned i, int *slot)
{
    const drk_time_row *row = &r->top[i];
    if (!row->key.name || !r->kernel_ns || (double)row->stats.total_ns < HOT_SHARE * (double)r->kernel_ns)
        return NULL;
    return drk_registry_find_shape(row->key.name, row->key.grid, row->key.block, row->key.shared_bytes, slot);
}

/* The next target: the hottest kernel-shape of the round worth a search
 * that never had a turn; else the hottest whose turn passed mid-search. */
static void choose(const drk_round *r)
{
    for (int again = 0; again < 2 && !active; again++)
        for (unsigned i = 0; i < r->ntop && !active; i++) {
            int slot;
            const drk_kernel_record *rec = hot_row(r, i, &slot);
            struct target *had = rec ? find_target(rec, slot) : NULL;
            if (!rec || (again ? !had || !had->yielded || atomic_load(&had->gone) : had != NULL))
                continue;
            const drk_driver_facts *f = atomic_load_explicit(&rec->driver, memory_order_acquire);
            if (!f || f->device < 0)
                continue;
            if (!push(f->device)) {
                drk_log(DRK_LOG_DEBUG, "evolve: %.80s: device %d's primary context is not active", rec->name,
                        (int)f->device);
                continue;
            }
            if (!ensure_env(f->device)) {
                pop();
                continue;
            }
            struct target *t = had ? had : make_target(rec, slot, &r->top[i]);
            if (!t || (!had && t->state != DRK_TARGET_CAPTURING)) {
                pop();
                continue;
            }
            if (had) {
                had->yielded = 0;
                snprintf(had->why, sizeof had->why, "its search goes on: waiting for a launch");
                drk_log(DRK_LOG_DEBUG, "evolve: %.80s: its turn again after %u round%s of search (round %u)",
                        rec->name, had->rounds, had->rounds == 1 ? "" : "s", rounds_seen);
            }
            if (!had) {
                /* The budget the rounds before it earned and nothing spent
                 * (the kernel ran meanwhile), up to the carry's cap: a
                 * kernel that runs from the start begins its search with
                 * credit, as one searched for a while keeps what it left. */
                double cap = DRK_EVO_CARRY_ROUNDS * cfg.budget * (double)r->kernel_ns;
                double earned = cfg.budget * (double)program_ns_all - charged_all;
                t->ledger_ns = t->credit_ns = earned < 0 ? 0 : earned < cap ? earned : cap;
                drk_log(DRK_LOG_DEBUG, "evolve: %.80s: chosen in round %u, with %.1f ms of credit the rounds before "
                        "earned (a round grants %.1f ms)", rec->name, rounds_seen, t->ledger_ns / 1e6,
                        cfg.budget * (double)r->kernel_ns / 1e6);
            }
            t->turn_rounds = 0;
            active = t;
            arm(t);
            if (!had)
                load_original_ahead(t);
            pop();
        }
}

/* Hot kernel-shapes of the round that are no target yet (and could be:
 * on the device drk's trials are on, while a target's works there). */
static unsigned count_never_chosen(const drk_round *r)
{
    unsigned n = 0;
    for (unsigned i = 0; i < r->ntop; i++) {
        int slot;
        const drk_kernel_record *rec = hot_row(r, i, &slot);
        const drk_driver_facts *f = rec ? atomic_load_explicit(&rec->driver, memory_order_acquire) : NULL;
        n += f && f->device >= 0 && (env_device < 0 || f->device == env_device) && !find_target(rec, slot);
    }
    return n;
}

/* The active target's turn is over: it has searched DRK_EVOLVE_TURN rounds
 * in a row and a hot kernel-shape never had a turn. */
static int turn_over(const struct target *t)
{
    return never_chosen && t->state == DRK_TARGET_SEARCHING && !t->rechecking && !t->from_cache &&
           t->turn_rounds >= (cfg.turn ? cfg.turn : TURN_DEFAULT);
}

void drk_engine_round(const drk_round *r)
{
    if (!on || !r)
        return;
    rounds_seen++;
    program_ns_all += r->kernel_ns;
    /* The share of kernels at a new class this round (the report's). */
    for (unsigned i = 0; i < r->ntop; i++) {
        int slot;
        const drk_kernel_record *rec = r->top[i].key.name
                                           ? drk_registry_find_shape(r->top[i].key.name, r->top[i].key.grid,
                                                                     r->top[i].key.block, r->top[i].key.shared_bytes,
                                                                     &slot)
                                           : NULL;
        if (rec)
            drk_shapes_note(&shapes, (uint64_t)(uintptr_t)rec,
                            drk_shape_class(r->top[i].key.grid, r->top[i].key.block, r->top[i].key.shared_bytes));
    }
    researched_sum += drk_shapes_round_end(&shapes).share;
    last_kernel_ns = r->kernel_ns;
    for (unsigned n = 0; n < ntargets; n++) {
        struct target *t = &targets[n];
        const drk_time_row *row = row_of(r, t);
        if (t == active && row)
            t->default_ns = (double)row->stats.median_ns;
        /* A round that ran one function throughout (what serves changed
         * before the round before closed) times it in the program. */
        if (row && row->stats.median_ns && t->changed_at + 1 < rounds_seen) {
            if (t->served)
                t->run_served_ns = (double)row->stats.median_ns;
            else
                t->run_default_ns = (double)row->stats.median_ns;
            /* A settled result went to the cache with the replays' speedup
             * (settled before the program timed it): now the program's. */
            if (t->stored == 1 && t->state == DRK_TARGET_SETTLED && run_speedup(t) > 0) {
                result_put(t, &t->served_v, run_speedup(t), 0); /* the same result: not counted again */
                t->stored = 2;
            }
        }
        /* What a served variant saved: its time in the round, had it
         * taken the original's, less what it took. */
        t->served_round_ns = t->served && row ? row->stats.total_ns : 0;
        if (row)
            t->round_ns = row->stats.total_ns;
        saved(t);
        if (t->yielded && atomic_load(&t->gone)) {
            t->yielded = 0;
            end_target(t, DRK_TARGET_FAILED, "its module was unloaded by the program");
        }
    }
    never_chosen = count_never_chosen(r);
    if (active && turn_over(active))
        yield_turn(active); /* before another capture is armed */
    if (active)
        target_round(active, r->kernel_ns);
    if (!active)
        choose(r);
    never_chosen = count_never_chosen(r); /* for the untimed rounds to come */
    want_choice = 0;
    /* Nothing new to search: a rested variant is measured again (on
     * replays in drk's context: none once drk gave its memory back). */
    for (unsigned i = 0; i < ntargets && !active && !memory_out; i++) {
        struct target *t = &targets[i];
        if (recheck_due(t)) {
            snprintf(t->why, sizeof t->why, "measured again against the original");
            drk_log(DRK_LOG_DEBUG, "evolve: %.80s: measured again against the original (round %u)", t->rec->name,
                    rounds_seen);
            active = t;
            t->rechecking = 1;
            arm(t);
        }
    }
    idle_rounds = active ? 0 : idle_rounds + 1;
}

/* `t`'s kernel-shape among the round's hottest, or NULL. */
static const drk_time_row *row_of(const drk_round *r, const struct target *t)
{
    for (unsigned i = 0; i < r->ntop; i++)
        if (r->top[i].key.name && strcmp(r->top[i].key.name, t->rec->name) == 0 &&
            memcmp(r->top[i].key.grid, t->shape.grid, sizeof t->shape.grid) == 0 &&
            memcmp(r->top[i].key.block, t->shape.block, sizeof t->shape.block) == 0)
            return &r->top[i];
    return NULL;
}

/* A round's saving by `t`'s served variant (timed, or untimed: as the
 * latest timed round it served). */
static void saved(struct target *t)
{
    double x = best_speedup(t);
    if (t->served && x > 1)
        t->saved_ns += (double)t->served_round_ns * (x - 1);
}

/* How far below zero `t`'s ledger may go before the next capture waits:
 * while its search has a variant in sight faster than what runs
 * (drk_evolution_promise), what that variant would save in
 * DRK_EVO_AHEAD_PAYBACK rounds, at most DRK_EVO_AHEAD_ROUNDS rounds'
 * `grant`. The spend stays the budget's over the run; a kernel with a win
 * in sight takes it sooner (search.h says why). */
static double spend_ahead(const struct target *t, double grant)
{
    double gain = drk_evolution_promise(&t->evo, t->served ? &t->served_v : NULL) - 1;
    if (gain <= 0 || !t->round_ns)
        return 0;
    double ahead = DRK_EVO_AHEAD_PAYBACK * gain * (double)t->round_ns, cap = DRK_EVO_AHEAD_ROUNDS * grant;
    return ahead < cap ? ahead : cap;
}

/* A round of the active target's, timed or not (`kernel_ns`: the round's,
 * or the latest timed round's): its grant, and the next capture. */
static void target_round(struct target *t, uint64_t kernel_ns)
{
    /* The budget: this round's share of the program's kernel time, to the
     * kernel being searched. */
    double grant = cfg.budget * (double)kernel_ns;
    t->credit_ns += grant;
    t->ledger_ns += grant;
    double ahead = t->await_round ? spend_ahead(t, grant) : 0;
    if (atomic_load(&t->gone)) {
        end_target(t, DRK_TARGET_FAILED, "its module was unloaded by the program");
    } else if (t->await_round && t->ledger_ns < -ahead) {
        /* The budget is spent: the next capture waits for rounds to pay it back. */
        snprintf(t->why, sizeof t->why, "the budget is spent: waiting %.1f ms of rounds' credit",
                 (-ahead - t->ledger_ns) / 1e6);
    } else if (t->await_round) {
        t->await_round = 0;
        if (t->ledger_ns < 0)
            drk_log(DRK_LOG_DEBUG, "evolve: %.80s: a capture %.1f ms ahead of the budget, for a variant measured "
                    "%.3fx or more of what runs", t->rec->name, -t->ledger_ns / 1e6,
                    drk_evolution_promise(&t->evo, t->served ? &t->served_v : NULL));
        arm(t); /* this round's search is done: the next launch */
    } else if (++t->waited > PATIENCE) {
        /* Waiting on a capture that does not come (the kernel ran out of
         * use, or its pointers keep moving): let it go, keeping what it
         * serves, so other kernels get their turn. */
        end_target(t, t->served || t->rounds ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED,
                   "not captured again at its shape within %d rounds", PATIENCE);
    }
}

unsigned drk_engine_idle_rounds(void) { return on ? idle_rounds : 0; }

unsigned drk_engine_targets(void) { return on ? atomic_load(&ntargets) : 0; }

int drk_engine_searching(void)
{
    return on && active && !want_choice && active->default_ns > 0 && last_kernel_ns > 0;
}

int drk_engine_round_untimed(void)
{
    if (!on)
        return 0;
    rounds_seen++;
    /* The program ran its kernels all the same, about as long as in the
     * latest timed round: what a search chosen later begins with counts
     * it (on the H200 the records rested for the rounds before naive
     * matmul's choice, which then began with one round's credit). */
    program_ns_all += last_kernel_ns;
    for (unsigned n = 0; n < ntargets; n++)
        saved(&targets[n]);
    if (active && turn_over(active)) {
        /* Its turn is over (by the latest timed round's count of those
         * waiting): it passes now, before another capture is armed, and
         * the next is chosen from a timed round. */
        yield_turn(active);
        return 1;
    }
    if (active) {
        /* A search goes on through untimed rounds, granted the latest
         * timed round's kernel time. */
        target_round(active, last_kernel_ns);
        return want_choice;
    }
    if (want_choice)
        return 1; /* the next target is chosen from a timed round */
    for (unsigned i = 0; i < ntargets; i++) {
        struct target *t = &targets[i];
        /* What serves was never timed in the program (a cached result
         * settles within a few rounds, and the records then rested for 20,
         * so the H200's warm runs reported the replays' 5.7x for a 2.0x
         * n-body): one timed round, once for each change. */
        if (t->served && !t->run_served_ns && t->changed_at + 1 < rounds_seen && t->timed_ask != t->changed_at + 1) {
            t->timed_ask = t->changed_at + 1;
            return 1;
        }
        if (recheck_due(t))
            return 1;
    }
    return 0;
}

/* Earlier runs' results waiting to serve: each asks for its load at a
 * synchronize in turn (one request at a time); one that no synchronize
 * loaded in QUIET_ROUNDS rounds is loaded by drk's thread. */
static void serve_pending(void)
{
    for (unsigned i = 0; i < ntargets; i++) {
        struct target *t = &targets[i];
        if (!t->cached_pending)
            continue;
        struct built *b = built_of(t, drk_variant_id(&drk_space_ptx, &t->served_v));
        if (!b || atomic_load(&t->gone)) {
            withdraw(t);
            continue;
        }
        if (rounds_seen - t->pending_round <= QUIET_ROUNDS) {
            quiet_ask(t, b);
            continue;
        }
        if (atomic_load_explicit(&quiet.state, memory_order_acquire) != QUIET_IDLE && quiet.t == t)
            continue; /* asked: quiet_take takes it back first */
        char why[192];
        uint64_t t0 = drk_mono_ns();
        if (serve_copy(t, b, why, sizeof why)) {
            serve_cached(t, b, ms_of(drk_mono_ns() - t0));
        } else {
            drk_log(DRK_LOG_INFO, "evolve: %.80s: the cached result cannot be served: %s; searching", t->rec->name,
                    why);
            withdraw(t);
            free_built(t, b);
        }
    }
}

/* The program's allocation ran out of device memory: everything of drk's
 * on the device goes (its context, with the copies, trial buffers and
 * builds in it), and no trial runs again in this process. What serves was
 * proven and stays (its copy is in the program's context). A capture that
 * fired has its copies done before their buffers go: they read the
 * program's memory in its stream's order. */
static void give_back(void)
{
    own_join();
    unsigned asked = atomic_load(&give_asked);
    if (!memory_out && own_ctx) {
        memory_out = 1;
        int dev = env_device;
        size_t bytes = own_ctx_bytes;
        drk_capture_disarm();
        if (push(dev)) {
            if (active && active->plan.done)
                drv.event_synchronize(active->plan.done);
            for (unsigned i = 0; i < ntargets; i++) {
                struct target *t = &targets[i];
                if (t->state == DRK_TARGET_CAPTURING || t->state == DRK_TARGET_SEARCHING)
                    end_target(t, t->served && !t->from_cache ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED,
                               "the program ran out of device memory: drk gave its own back, no more trials%s",
                               t->served && !t->from_cache ? " (what serves was proven)" : "");
            }
            pop();
        }
        close_own();
        env_device = dev; /* the served copies' device, for their unload at exit */
        drk_log(DRK_LOG_WARN, "evolve: the program ran out of device memory: drk gave back its own (a context of "
                              "%zu MiB, copies and builds); no more trials in this process, proven variants keep "
                              "serving", bytes >> 20);
    }
    atomic_store(&give_done, asked);
}

int drk_engine_give_back(unsigned wait_ms)
{
    if (!atomic_load_explicit(&own_held, memory_order_relaxed))
        return 0;
    unsigned want = atomic_fetch_add(&give_asked, 1) + 1;
    for (unsigned i = 0; i < wait_ms; i++) {
        if ((int)(atomic_load(&give_done) - want) >= 0)
            return 1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

void drk_engine_give_back_due(void)
{
    if (on && atomic_load(&give_asked) != atomic_load(&give_done))
        give_back();
}

void drk_engine_tick(void)
{
    if (!on)
        return;
    quiet_take(0);
    serve_pending();
    if (!active)
        return;
    static drk_capture_got got;
    if (!drk_capture_take(&got))
        return;
    struct target *t = active;
    if (atomic_load(&t->gone)) {
        end_target(t, DRK_TARGET_FAILED, "its module was unloaded by the program");
        return;
    }
    if (!push(env_device)) {
        end_target(t, DRK_TARGET_FAILED, "the device's primary context is gone");
        return;
    }
    captured(t, &got);
    if (!active && push_own() == 0) {
        drk_trial_env_trim(&env, KEEP_BYTES); /* the target ended: big buffers go */
        pop_own();
    }
    pop();
}

void drk_engine_unloading(uintptr_t owner)
{
    if (!owner || !started)
        return;
    pthread_mutex_lock(&fence);
    unsigned n = atomic_load(&ntargets);
    for (unsigned i = 0; i < n; i++)
        if (targets[i].rec && atomic_load_explicit(&targets[i].rec->owner, memory_order_acquire) == owner)
            atomic_store(&targets[i].gone, 1);
    for (unsigned i = 0; i < norigs; i++)
        if (origs[i].owner == owner)
            origs[i].stale = 1;
    unloads++;
    pthread_mutex_unlock(&fence);
}

void drk_engine_stop(void)
{
    if (!on)
        return;
    own_join();
    drk_capture_disarm();
    /* Searches the exit ends: their best so far, for the next run to go
     * on from (a start: proven and measured again there). */
    for (unsigned i = 0; i < ntargets; i++) {
        struct target *t = &targets[i];
        drk_variant best;
        if (t->stored || t->from_cache || !t->rounds || (t->state == DRK_TARGET_SETTLED && t->came_from_cache))
            continue; /* nothing searched here, or its result is in the cache already */
        /* A module the program unloaded (cudart unregisters its modules at
         * exit, before this runs) leaves what was found in its PTX good. */
        if (t->served) {
            /* Proven and serving: the next run serves it at once. */
            cache_stored += result_put(t, &t->served_v, best_speedup(t), PARTIAL_SERVING) == 0;
            t->stored = 1;
            partial_stored++;
            continue;
        }
        if (drk_variant_from_id(&drk_space_ptx, t->evo.center, &best) != 0 || drk_variant_is_default(&best))
            continue;
        drk_ratio_stats st = drk_evolution_stats(&t->evo, &best);
        if (st.n && st.median >= 1 + DRK_EVO_MARGIN) {
            cache_stored += result_put(t, &best, st.median, PARTIAL_BEST) == 0;
            t->stored = 1;
            partial_stored++;
        }
    }
    quiet_take(1);
    if ((active || ngraves) && push(env_device)) {
        if (active)
            free_snapshot(active);
        unload_graves();
        pop();
    }
    close_own();
    active = NULL;
    on = 0;
}

/* Evolution stays with the parent: drk's thread, its context, CUPTI and
 * the parent's kept launches (their buffers) do not follow a fork. The
 * child starts clean (its launches get the program's own functions: the
 * registry's fork handler withdrew the variants), its report counts
 * nothing of the parent's, and a lock a parent's thread held at the fork
 * (the fence, mid-trial) is not waited for: a child whose exit unloads
 * modules (cudart unregisters them) would wait on it for ever. */
void drk_engine_after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    fence = fresh;
    atomic_store(&early_state, EARLY_IDLE);
    memset(kept, 0, sizeof kept);
    free(quiet.cubin);
    quiet.cubin = NULL;
    atomic_store(&quiet.state, QUIET_IDLE);
    atomic_store(&ntargets, 0);
    active = NULL;
    on = started = 0;
    snprintf(off_why, sizeof off_why, "a forked child: evolution stays with the parent");
    norigs = 0;
    unloads = 0;
    ngraves = next_grave = 0;
    idle_rounds = rounds_seen = 0;
    trial_ns_all = program_ns_all = trial_bytes_all = 0;
    charged_all = researched_sum = 0;
    cache_hits = cache_stored = partial_hits = partial_stored = cubin_hits = cubins_stored = 0;
    cubin_hit_ms_sum = cubin_hit_ms_max = cubin_read_ms_sum = 0;
    build_wall_ns = 0;
    builds_made = borrowed_loads = served_loads = cache_serves = quiet_loads = 0;
    served_load_ms_max = cache_serve_ms_sum = cache_serve_ms_max = 0;
    own_ctx_bytes = 0;
    memory_out = 0;
}

/* ---- Report ---- */

size_t drk_engine_rows(drk_engine_row *out, size_t max)
{
    size_t n = 0;
    for (unsigned i = 0; i < ntargets && n < max; i++) {
        const struct target *t = &targets[i];
        drk_engine_row *o = &out[n++];
        memset(o, 0, sizeof *o);
        o->name = t->rec->name;
        memcpy(o->grid, t->shape.grid, sizeof o->grid);
        memcpy(o->block, t->shape.block, sizeof o->block);
        o->shared_bytes = t->shape.shared_bytes;
        o->state = t->state;
        snprintf(o->why, sizeof o->why, "%s", t->why);
        o->captures = t->captures, o->rounds = t->rounds;
        o->tried = t->tried, o->proven = t->proven, o->rejected = t->rejected, o->trusted = t->trusted;
        o->same_code = t->same;
        if (t->served)
            drk_variant_text(&drk_space_ptx, &t->served_v, o->serving, sizeof o->serving);
        else
            snprintf(o->serving, sizeof o->serving, "default");
        o->replay_speedup = t->served ? t->speedup : 1.0;
        o->run_speedup = run_speedup(t);
        o->speedup = t->served ? best_speedup(t) : 1.0;
        o->build_ms = t->build_ms, o->builds = t->builds, o->build_ms_max = t->build_ms_max;
        o->trial_ns = t->trial_ns, o->trial_bytes = t->trial_bytes;
        o->saved_ns = (uint64_t)(t->saved_ns + 0.5);
        o->snapshot_bytes = t->snapshot_bytes;
        o->from_cache = t->came_from_cache && t->served;
    }
    return n;
}

drk_engine_totals drk_engine_totals_get(void)
{
    drk_engine_totals s = {.on = started, .off = started ? NULL : off_why, .budget = cfg.budget};
    s.kernels = ntargets;
    for (unsigned i = 0; i < ntargets; i++) {
        s.evolved += targets[i].served != NULL;
        s.refused += targets[i].state == DRK_TARGET_REFUSED;
        s.failed += targets[i].state == DRK_TARGET_FAILED;
    }
    s.trial_ns = trial_ns_all, s.program_ns = program_ns_all, s.trial_bytes = trial_bytes_all;
    s.rounds = rounds_seen;
    s.researched_share = rounds_seen ? researched_sum / rounds_seen : 0;
    s.cache_hits = cache_hits, s.cache_stored = cache_stored;
    s.partial_hits = partial_hits, s.partial_stored = partial_stored;
    s.cubin_hits = cubin_hits, s.cubins_stored = cubins_stored, s.borrowed_loads = borrowed_loads;
    s.cubin_hit_ms_mean = cubin_hits ? cubin_hit_ms_sum / cubin_hits : 0, s.cubin_hit_ms_max = cubin_hit_ms_max;
    s.cubin_read_ms_mean = cubin_hits ? cubin_read_ms_sum / cubin_hits : 0;
    s.own_ctx_bytes = own_ctx_bytes;
    s.gave_back = memory_out;
    for (unsigned i = 0; i < ntargets; i++)
        s.saved_ns += (uint64_t)(targets[i].saved_ns + 0.5);
    s.served_loads = served_loads, s.served_load_ms_max = served_load_ms_max;
    s.cache_serves = cache_serves, s.cache_serve_ms_max = cache_serve_ms_max;
    s.cache_serve_ms_mean = cache_serves ? cache_serve_ms_sum / cache_serves : 0;
    s.quiet_loads = quiet_loads;
    return s;
}
