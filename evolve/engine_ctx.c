/* drk's own context on the kernel's device, where the trials run: made
 * (early, by a helper thread, where it can be), made current over the
 * program's, and given back when the program runs out of device memory.
 * The engine's other parts: evolve/engine.c. */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "evolve/cupti.h"

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

drk_trial_env drk_eng_env;
int drk_eng_env_open;
int drk_eng_env_device = -1;
CUcontext drk_eng_prog_ctx; /* the program's primary context of env_device, while pushed */

static int pushed;
CUcontext drk_eng_own_ctx;
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
    if (!drk_eng_drv.primary_ctx_get_state ||
        drk_eng_drv.primary_ctx_get_state((CUdevice)dev, &flags, &active_ctx) != CUDA_SUCCESS || !active_ctx)
        return 0; /* the program runs in contexts of its own: drk makes none */
    if (drk_eng_drv.primary_ctx_retain(ctx, (CUdevice)dev) != CUDA_SUCCESS)
        return 0;
    if (drk_eng_drv.ctx_push_current(*ctx) != CUDA_SUCCESS) {
        drk_eng_drv.primary_ctx_release((CUdevice)dev);
        return 0;
    }
    return 1;
}

static void primary_pop(int dev)
{
    CUcontext c;
    drk_eng_drv.ctx_pop_current(&c);
    drk_eng_drv.primary_ctx_release((CUdevice)dev);
}

int drk_eng_push(int dev)
{
    CUcontext ctx;
    if (!primary_push(dev, &ctx))
        return 0;
    pushed = dev + 1;
    drk_eng_prog_ctx = ctx;
    return 1;
}

void drk_eng_pop(void)
{
    if (!pushed)
        return;
    primary_pop(pushed - 1);
    pushed = 0;
}

/* drk's context over whatever is current (the program's, pushed): 0, or -1. */
int drk_eng_push_own(void)
{
    return drk_eng_own_ctx && drk_eng_drv.ctx_push_current(drk_eng_own_ctx) == CUDA_SUCCESS ? 0 : -1;
}

void drk_eng_pop_own(void)
{
    CUcontext c;
    drk_eng_drv.ctx_pop_current(&c);
}

/* Makes drk's context on `dev`, the program's context current: 0, or -1
 * with own_why. Its threads block in waits rather than spin (drk's thread
 * waits on its trials; the program's CPU is the program's). The stack limit
 * is the program's, so a kernel runs there as it runs in the program. */
static int make_own(int dev)
{
    size_t free0 = 0, total = 0, free1 = 0, stack = 0;
    uint64_t tq = drk_mono_ns();
    if (!drk_eng_drv.ctx_create || !drk_eng_drv.ctx_destroy || !drk_eng_drv.memcpy_peer_async) {
        snprintf(own_why, sizeof own_why, "the driver lacks cuCtxCreate_v4, cuCtxDestroy or cuMemcpyPeerAsync");
        return -1;
    }
    if (drk_eng_drv.mem_get_info(&free0, &total) != CUDA_SUCCESS || free0 < 2 * OWN_MIN_FREE(total)) {
        snprintf(own_why, sizeof own_why, "device %d has %zu MiB free: too little for a context of drk's own", dev,
                 free0 >> 20);
        return -1;
    }
    if (drk_eng_drv.ctx_get_limit && drk_eng_drv.ctx_get_limit(&stack, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS)
        stack = 0;
    CUcontext c = NULL;
    uint64_t t0 = drk_mono_ns();
    CUresult r = drk_eng_drv.ctx_create(&c, NULL, CU_CTX_SCHED_BLOCKING_SYNC, (CUdevice)dev);
    uint64_t t1 = drk_mono_ns();
    if (r != CUDA_SUCCESS) {
        snprintf(own_why, sizeof own_why, "cuCtxCreate on device %d failed (%d)", dev, (int)r);
        return -1;
    }
    /* cuCtxCreate made it current: it stays so while it is set up. */
    if (stack && drk_eng_drv.ctx_set_limit &&
        (r = drk_eng_drv.ctx_set_limit(CU_LIMIT_STACK_SIZE, stack)) != CUDA_SUCCESS)
        drk_log(DRK_LOG_DEBUG, "evolve: drk's context keeps its own stack size (cuCtxSetLimit: %d)", (int)r);
    drk_eng_own_ctx = c;
    if (drk_trial_env_open(&drk_eng_env, &drk_eng_drv, c, drk_eng_cfg.fatbin) != 0) {
        snprintf(own_why, sizeof own_why, "drk's stream and buffers on device %d: %.150s", dev, drk_eng_env.why);
        drk_eng_pop_own();
        drk_eng_drv.ctx_destroy(c);
        drk_eng_own_ctx = NULL;
        return -1;
    }
    drk_eng_env.spans = drk_eng_cfg.spans;
    if (drk_eng_drv.mem_get_info(&free1, &total) == CUDA_SUCCESS && free1 < free0)
        drk_eng_totals.own_ctx_bytes = free0 - free1;
    drk_eng_pop_own();
    if (free1 && free1 < OWN_MIN_FREE(total)) {
        snprintf(own_why, sizeof own_why, "a context of drk's own leaves device %d %zu MiB free: too little", dev,
                 free1 >> 20);
        if (drk_eng_push_own() == 0) {
            drk_trial_env_close(&drk_eng_env);
            drk_eng_pop_own();
        }
        drk_eng_drv.ctx_destroy(c);
        drk_eng_own_ctx = NULL;
        return -1;
    }
    drk_log(DRK_LOG_INFO, "evolve: trials run in a context of drk's own on device %d (%zu MiB of device memory)",
            dev, drk_eng_totals.own_ctx_bytes >> 20);
    /* Its steps' times and when they ran (CLOCK_MONOTONIC, as a program's
     * own clock reads it), to tell whether one of them held a launch. */
    const uint64_t *o = drk_eng_env.opened_ns;
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
int drk_eng_memory_out;
static atomic_uint give_asked, give_done;

void drk_eng_close_own(void)
{
    if (!drk_eng_own_ctx)
        return;
    drk_eng_kept_forget(NULL);
    if (drk_eng_push_own() == 0) {
        if (drk_eng_env_open)
            drk_trial_env_close(&drk_eng_env);
        drk_eng_pop_own();
    }
    drk_eng_env_open = 0, drk_eng_env_device = -1;
    drk_eng_drv.ctx_destroy(drk_eng_own_ctx);
    drk_eng_own_ctx = NULL;
    atomic_store(&own_held, 0);
}

/* drk's context made on `dev`: its means are open. */
static void own_opened(int dev)
{
    own_failed_at = 0;
    drk_eng_env_open = 1, drk_eng_env_device = dev;
    atomic_store(&own_held, 1);
    /* Trials' GPU time is drk's, not the program's: CUPTI's records of
     * drk's stream are counted apart. */
    if (drk_cupti_own_stream(drk_eng_own_ctx, drk_eng_env.stream) != 0)
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
void drk_eng_own_join(void)
{
    if (atomic_load(&early_state) != EARLY_RUNNING)
        return;
    pthread_join(early_thread, NULL);
    atomic_store(&early_state, EARLY_JOINED);
    if (early_rc == 0 && drk_eng_own_ctx) {
        own_opened(early_dev);
        drk_log(DRK_LOG_DEBUG, "evolve: drk's context was made on device %d in %.1f ms, ahead of a choice",
                early_dev, early_ns / 1e6);
    }
}

void drk_engine_prepare(void)
{
    if (!drk_eng_on || atomic_load(&early_state) != EARLY_IDLE || drk_eng_own_ctx || drk_eng_memory_out)
        return;
    /* The device of the first kernel evolution could take up. */
    int dev = drk_eng_first_evolvable(1);
    if (dev < 0)
        return;
    early_dev = dev;
    atomic_store(&early_state, EARLY_RUNNING);
    if (drk_thread_start(&early_thread, early_job, NULL) != 0)
        atomic_store(&early_state, EARLY_IDLE); /* made at the choice, as without */
}

/* A forked child: no early context is being made for it, it gave no
 * memory back, and the parent's context is not its to give back (no thread
 * of drk's would answer the ask: a child out of memory waited it out). */
void drk_eng_ctx_after_fork(void)
{
    atomic_store(&early_state, EARLY_IDLE);
    drk_eng_memory_out = 0;
    atomic_store(&own_held, 0);
    atomic_store(&give_asked, 0);
    atomic_store(&give_done, 0);
}

/* drk's context and its means on `dev`, the program's context current. */
int drk_eng_ensure_env(int dev)
{
    drk_eng_own_join();
    if (drk_eng_env_open && drk_eng_env_device == dev)
        return 1;
    if (drk_eng_env_open || drk_eng_memory_out)
        return 0; /* one device's means at a time: a second device's kernels wait */
    if (own_failed_at && drk_eng_rounds_seen - own_failed_at < OWN_RETRY)
        return 0;
    if (make_own(dev) != 0) {
        if (!own_failed_at)
            drk_log(DRK_LOG_INFO, "evolve: no trials for now: %s (tried again every %d rounds)", own_why, OWN_RETRY);
        own_failed_at = drk_eng_rounds_seen ? drk_eng_rounds_seen : 1;
        return 0;
    }
    own_opened(dev);
    return 1;
}

/* ---- drk's context given back ---- */

/* The program's allocation ran out of device memory: everything of drk's
 * on the device goes (its context, with the copies, trial buffers and
 * builds in it), and no trial runs again in this process. What serves was
 * proven and stays (its copy is in the program's context). A capture that
 * fired has its copies done before their buffers go: they read the
 * program's memory in its stream's order. */
static void give_back(void)
{
    drk_eng_own_join();
    unsigned asked = atomic_load(&give_asked);
    if (!drk_eng_memory_out && drk_eng_own_ctx) {
        drk_eng_memory_out = 1;
        int dev = drk_eng_env_device;
        size_t bytes = drk_eng_totals.own_ctx_bytes;
        drk_capture_disarm();
        if (drk_eng_push(dev)) {
            if (drk_eng_active && drk_eng_active->plan.done)
                drk_eng_drv.event_synchronize(drk_eng_active->plan.done);
            for (unsigned i = 0; i < drk_eng_ntargets; i++) {
                struct target *t = &drk_eng_targets[i];
                if (t->state == DRK_TARGET_CAPTURING || t->state == DRK_TARGET_SEARCHING)
                    drk_eng_end_target(t, t->served && !t->from_cache ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED,
                                       "the program ran out of device memory: drk gave its own back, no more trials%s",
                                       t->served && !t->from_cache ? " (what serves was proven)" : "");
            }
            drk_eng_pop();
        }
        drk_eng_close_own();
        drk_eng_env_device = dev; /* the served copies' device, for their unload at exit */
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
    if (drk_eng_on && atomic_load(&give_asked) != atomic_load(&give_done))
        give_back();
}
