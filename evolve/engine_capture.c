/* A captured launch: the original loaded again in drk's context, the
 * launch's snapshot and the trials on it, the launches kept for later
 * proofs, and what trials cost the budget. The engine's other parts:
 * evolve/engine.c. */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "evolve/facts.h"
#include "evolve/loaded.h"

/* Held around every replay and by a program's unload: a handle is never
 * launched after its module went. */
static pthread_mutex_t fence = PTHREAD_MUTEX_INITIALIZER;

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
            drk_eng_drv.module_unload(origs[i].module); /* drk's context: waits for nothing */
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
    CUresult r = drk_eng_drv.module_load_data_ex(out, again->image, again->nopts, again->opts, again->vals);
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
    if (t->orig && t->orig_ctx == drk_eng_own_ctx)
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
        if (r == CUDA_SUCCESS && (r = drk_eng_drv.module_get_function(&fn, m, t->rec->name)) != CUDA_SUCCESS)
            what = "cuModuleGetFunction";
    }
    pthread_mutex_lock(&fence);
    if (atomic_load(&t->gone)) {
        pthread_mutex_unlock(&fence);
        return snprintf(why, len, "its module was unloaded by the program"), NULL;
    }
    if (!k && again.library) {
        what = "cuLibraryGetKernel";
        r = drk_eng_drv.library_get_kernel ? drk_eng_drv.library_get_kernel(&k, (CUlibrary)owner, t->rec->name)
                                           : CUDA_ERROR_NOT_FOUND;
    }
    if (k && r == CUDA_SUCCESS) {
        what = "cuKernelGetFunction (in drk's context)";
        r = drk_eng_drv.kernel_get_function ? drk_eng_drv.kernel_get_function(&fn, k) : CUDA_ERROR_NOT_FOUND;
    }
    pthread_mutex_unlock(&fence);
    if (r != CUDA_SUCCESS || !fn)
        return snprintf(why, len, "%s failed (%d)", what, (int)r), NULL;
    t->orig = fn, t->orig_ctx = drk_eng_own_ctx;
    return fn;
}

/* A target just chosen (the program's context current): its original
 * loaded into drk's context while its captures are awaited, not after the
 * first comes. A module's load JIT-compiles its PTX image whole: 150-300
 * ms for evolve_bench's twelve kernels on the H200, which held up naive
 * matmul's first capture. A failure is left for its trials to say. */
void drk_eng_load_original_ahead(struct target *t)
{
    char why[192];
    if (drk_eng_push_own() != 0)
        return;
    uint64_t t0 = drk_mono_ns();
    CUfunction fn = original_of(t, why, sizeof why);
    drk_eng_pop_own();
    if (fn)
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: its original loaded in drk's context in %.1f ms, ahead of its captures",
                t->rec->name, ms_of(drk_mono_ns() - t0));
}

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

/* Its buffers back to drk's trial means (drk's context pushed: a target
 * may end with the program's current). */
static void kept_close(struct kept *k)
{
    if (!k->t)
        return;
    if (drk_eng_env_open && drk_eng_push_own() == 0) {
        drk_trial_close(&k->tr);
        drk_eng_pop_own();
    }
    memset(&k->tr, 0, sizeof k->tr);
    k->t = NULL;
}

/* `t`'s kept launches go (NULL: all of them). */
void drk_eng_kept_forget(const struct target *t)
{
    for (unsigned i = 0; i < KEPT; i++)
        if (kept[i].t && (!t || kept[i].t == t))
            kept_close(&kept[i]);
}

/* A forked child: the parent's kept launches (their buffers) and reloaded
 * originals are not its, and the fence a parent's thread held (mid-trial)
 * is not waited for. */
void drk_eng_capture_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    fence = fresh;
    memset(kept, 0, sizeof kept);
    norigs = 0;
    unloads = 0;
}

/* Keeps the trial of `t`'s capture just done (moved out of *tr, which is
 * then closed empty) when it can serve later proofs: 1, or 0 (the caller
 * closes it). */
static int keep_trial(struct target *t, drk_trial *tr, const drk_proof_ref *ref)
{
    size_t bytes = 3 * tr->reach.bytes;
    if (t->state != DRK_TARGET_SEARCHING || drk_eng_active != t || t->rechecking || t->from_cache ||
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
    drk_eng_totals.trial_ns += (uint64_t)(gpu + 0.5);
    t->trial_bytes += (uint64_t)moved;
    drk_eng_totals.trial_bytes += (uint64_t)moved;
    t->ledger_ns -= charge;
    drk_eng_totals.charged += charge;
    return charge;
}

/* Variant `v` of `t`, the search's choice, proven on the kept launches it
 * was not proven on, until it has enough. Charged to the ledger as a
 * capture's trials are. 0; 1 when a kept launch rejected it (the round's
 * choice is void: what serves stays, the next round chooses anew); -1
 * when the target ended. */
int drk_eng_prove_kept(struct target *t, const drk_variant *v)
{
    struct built *b = drk_eng_built_of(t, drk_variant_id(&drk_space_ptx, v));
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
            drk_eng_kept_forget(t);
            if (!unloaded)
                drk_eng_end_target(t, DRK_TARGET_FAILED, "a replay failed on a kept launch: %s", pr.why);
            return unloaded ? 0 : -1;
        }
        if (pr.verdict != DRK_PROOF_EQUAL) {
            char where[48];
            snprintf(where, sizeof where, " (a kept launch, capture %u)", k->capture);
            drk_eng_reject(t, v, pr.why, where);
            if (drk_eng_is_served(t, b))
                drk_eng_withdraw(t);
            drk_eng_free_built(t, b);
            return 1;
        }
        if (drk_eng_count_proof(b, k->capture))
            t->proven += b->proven == 1;
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s proven bit for bit on capture %u, kept (%u of %d launches; %.1f ms "
                               "charged)",
                t->rec->name, text, k->capture, b->proven, DRK_PROOF_LAUNCHES, charge / 1e6);
    }
    return 0;
}

/* ---- A captured launch's snapshot and trials ---- */

/* Snapshot buffers for what a launch reaches, into the plan: 0; 1 when
 * device memory ran out (armed for bytes again: a later launch may fit);
 * -1 when the target ended. The buffers are drk's context's, the event
 * (recorded on the program's stream) the program's; its context current. */
static int make_snapshot(struct target *t, const drk_reach *reach)
{
    drk_eng_free_snapshot(t);
    if (drk_eng_push_own() != 0) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "drk's context cannot be made current");
        return -1;
    }
    CUresult r = CUDA_SUCCESS;
    for (unsigned i = 0; i < reach->n && r == CUDA_SUCCESS; i++) {
        r = drk_trial_buf_get(&drk_eng_env, &t->plan.snap[i], reach->alloc[i].size);
        if (r != CUDA_SUCCESS)
            t->plan.snap[i] = 0;
        t->plan.alloc[i] = reach->alloc[i];
        t->plan.n = i + 1;
    }
    drk_eng_pop_own();
    if (r != CUDA_SUCCESS) {
        drk_eng_free_snapshot(t);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            snprintf(t->why, sizeof t->why, "device memory ran out for a snapshot: waiting");
            drk_eng_arm(t);
            return 1;
        }
        drk_eng_end_target(t, DRK_TARGET_FAILED, "cuMemAlloc for a snapshot failed (%d)", (int)r);
        return -1;
    }
    if (drk_eng_drv.event_create(&t->plan.done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        t->plan.done = NULL;
        drk_eng_free_snapshot(t);
        drk_eng_end_target(t, DRK_TARGET_FAILED, "cuEventCreate failed");
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
    int rc = drk_trial_open(&tr, &drk_eng_env, im->flow, reach, snap, got->params, got->len, t->shape.grid,
                            t->shape.block, t->shape.shared_bytes, orig);
    tr.fence = &fence, tr.gone = &t->gone;
    if (!orig) {
        drk_trial_close(&tr);
        drk_eng_end_target(t, DRK_TARGET_FAILED, "%s", why);
        return 0;
    }
    if (rc != DRK_TRIAL_OK) {
        if (rc == DRK_TRIAL_NO_MEMORY) {
            snprintf(t->why, sizeof t->why, "device memory ran out for a trial: waiting");
            drk_trial_close(&tr);
            drk_eng_arm(t);
        } else {
            drk_eng_end_target(t, DRK_TARGET_FAILED, "%s", tr.why);
            drk_trial_close(&tr);
        }
        return 0;
    }
    drk_proof_ops ops = drk_trial_ops(&tr);
    drk_proof_ref ref;
    uint64_t w0 = drk_mono_ns(), b0 = drk_eng_totals.build_wall_ns;
    unsigned b_made = drk_eng_totals.builds_made;
    /* A search round's reference is queued with its first batch (after
     * its builds: the fence is never held across a compile), for one wait:
     * with what an earlier capture said the original writes, or blind on
     * the first (no poison, no O3: the next probes for it); a served
     * variant's proofs again wait for their own. */
    memset(&ref, 0, sizeof ref); /* deferred: EQUAL until its batch queues it */
    drk_eng_ref_prev = t->rechecking || t->from_cache ? NULL
                       : t->prev.state == DRK_PROOF_EQUAL && t->prev.runs && t->prev.n == reach->n
                           ? &t->prev
                           : &drk_eng_first_launch;
    if (!drk_eng_ref_prev)
        drk_proof_reference(&ops, &ref);
    if (ref.state != DRK_PROOF_EQUAL)
        drk_eng_end_by_ref(t, &ref);
    else {
        t->state = DRK_TARGET_SEARCHING;
        tr.ref = &ref;
        drk_eng_search_round(t, &tr, &ref);
    }
    /* Settled, for the next capture; still deferred (no batch was tried):
     * nothing rests on it, and nothing was queued. */
    if (!drk_eng_ref_prev && ref.state == DRK_PROOF_EQUAL && !ref.queued)
        t->prev = ref;
    drk_eng_ref_prev = NULL;
    uint64_t wall = drk_mono_ns() - w0, built = drk_eng_totals.build_wall_ns - b0;
    wall = wall > built ? wall - built : 0;
    double gpu = drk_trial_gpu_ns(&tr);
    double moved = (double)tr.moved + 2.0 * (double)reach->bytes; /* the snapshot, copied on the program's stream */
    double charge = pay(t, gpu, tr.waits, drk_eng_totals.builds_made - b_made, moved);
    drk_log(DRK_LOG_DEBUG,
            "evolve: %.80s: capture %u's trials took %.1f ms besides %.1f ms of builds (GPU %.1f ms, by their "
            "events %.1f ms, %u waits, %u loads, %.0f MiB moved: %.1f ms charged)",
            t->rec->name, t->captures, ms_of(wall), ms_of(built), gpu / 1e6, ms_of(tr.gpu_ns), tr.waits,
            drk_eng_totals.builds_made - b_made, moved / (1 << 20), charge / 1e6);
    if (!keep_trial(t, &tr, &ref))
        drk_trial_close(&tr);
    return t->state == DRK_TARGET_SEARCHING && drk_eng_active == t;
}

/* The first search round's compiles, made while its capture is awaited
 * (the launch after the one whose bytes planned the snapshot): on the H200
 * naive matmul's first capture came 0.15 s after its bytes, and its
 * compiles then took 0.18 s more before the first trial. The search's
 * first proposals are asked of a copy of it (the round opened as it will
 * be), and compiled ahead with those it would propose next. */
static void compile_first(struct target *t)
{
    if (t->captures || t->from_cache || t->rechecking || drk_eng_compile_threads < 2 || !t->sk.ptx)
        return;
    drk_eng_peek = t->evo;
    drk_evolution_begin_round(&drk_eng_peek, drk_eng_round_credit(t), t->default_ns > 0 ? t->default_ns : 1000.0,
                              PAIRS);
    drk_variant cand[BATCH];
    unsigned n = drk_evolution_next(&drk_eng_peek, cand, BATCH);
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the first search round's compiles, while its capture is awaited",
            t->rec->name);
    drk_eng_compile_ahead(t, cand, n, &drk_eng_peek);
}

/* A capture came back: bytes only (plan the snapshot) or with it (prove,
 * search). The program's context is current. */
void drk_eng_captured(struct target *t, const drk_capture_got *got)
{
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: a launch captured (%s)", t->rec->name,
            got->snapped ? "with its snapshot" : "its bytes");
    const drk_image_facts *im = t->sk.facts;
    if (!got->snapped && t->plan.n && got->rc != CUDA_SUCCESS) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "a snapshot could not be queued: %s (%d)", got->why, (int)got->rc);
        return;
    }
    if (!got->snapped) {
        /* What the bytes reach, and buffers for it. */
        drk_reach reach;
        if (drk_reach_of(im->flow, got->params, got->len, drk_eng_cfg.resolve, drk_eng_cfg.copy_max, &reach) != 0) {
            drk_eng_end_target(t, DRK_TARGET_REFUSED, "%s", reach.why);
            return;
        }
        if (make_snapshot(t, &reach) == 0) {
            drk_eng_arm(t);
            compile_first(t);
        }
        return;
    }
    if (drk_eng_drv.event_synchronize(t->plan.done) != CUDA_SUCCESS) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "the snapshot's copies failed");
        return;
    }
    t->captures++;
    drk_reach reach = {0};
    if (drk_reach_of(im->flow, got->params, got->len, drk_eng_cfg.resolve, drk_eng_cfg.copy_max, &reach) != 0) {
        drk_eng_end_target(t, DRK_TARGET_REFUSED, "%s", reach.why);
        return;
    }
    /* The snapshot's buffers go to the trials; the plan gets new ones for
     * the next capture. */
    CUdeviceptr snap[DRK_REACH_MAX];
    memcpy(snap, t->plan.snap, sizeof snap);
    memset(t->plan.snap, 0, sizeof t->plan.snap);
    drk_eng_drv.event_destroy(t->plan.done);
    t->plan.done = NULL;
    t->plan.n = 0;
    if (drk_eng_push_own() != 0) {
        for (unsigned i = 0; i < reach.n; i++)
            drk_trial_buf_put(&drk_eng_env, snap[i], reach.alloc[i].size);
        drk_eng_end_target(t, DRK_TARGET_FAILED, "drk's context cannot be made current");
        return;
    }
    int next = trials(t, got, &reach, snap);
    drk_eng_pop_own();
    /* One search round a program round: the next launch (new inputs) is
     * captured once this round closes, with buffers for the same reach. */
    if (next && make_snapshot(t, &reach) == 0)
        t->await_round = 1;
}

void drk_engine_unloading(uintptr_t owner)
{
    if (!owner || !drk_eng_started)
        return;
    pthread_mutex_lock(&fence);
    unsigned n = atomic_load(&drk_eng_ntargets);
    for (unsigned i = 0; i < n; i++)
        if (drk_eng_targets[i].rec &&
            atomic_load_explicit(&drk_eng_targets[i].rec->owner, memory_order_acquire) == owner)
            atomic_store(&drk_eng_targets[i].gone, 1);
    for (unsigned i = 0; i < norigs; i++)
        if (origs[i].owner == owner)
            origs[i].stale = 1;
    unloads++;
    pthread_mutex_unlock(&fence);
}
