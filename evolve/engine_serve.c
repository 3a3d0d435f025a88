/* What the program's launches get: a proven variant's copy loaded into
 * the program's context (at the program's synchronize, where its queue is
 * empty, when it can be), an earlier run's result served from the cache,
 * and the search round's decision published. The engine's other parts:
 * evolve/engine.c. */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"

static void serve_cached(struct target *t, struct built *b, double load_ms);

/* A served copy into the current context: the cubin loaded, the kernel
 * looked up, the carveout set as on the trials' copy, and the function
 * loaded now (cuFuncLoad), so that its first launch does not wait for the
 * program's queue to drain. CUDA_SUCCESS, or the failing call's result
 * (in *what; *m may then hold the module, the caller's to unload). */
static CUresult load_copy(const void *cubin, const char *name, const drk_variant *attrv, CUmodule *m, CUfunction *fn,
                          const char **what)
{
    *m = NULL, *fn = NULL, *what = "cuModuleLoadDataEx";
    CUresult r = drk_eng_drv.module_load_data_ex(m, cubin, 0, NULL, NULL);
    if (r == CUDA_SUCCESS && (r = drk_eng_drv.module_get_function(fn, *m, name)) != CUDA_SUCCESS)
        *what = "cuModuleGetFunction";
    if (r == CUDA_SUCCESS && !drk_variant_is_default(attrv)) {
        drk_build_in in = {.drv = &drk_eng_drv, .fn = *fn};
        drk_built a;
        if (drk_source_attr.build(&in, attrv, &a) != 0)
            r = a.rc != CUDA_SUCCESS ? a.rc : CUDA_ERROR_UNKNOWN, *what = "cuFuncSetAttribute";
    }
    if (r == CUDA_SUCCESS && drk_eng_drv.func_load && (r = drk_eng_drv.func_load(*fn)) != CUDA_SUCCESS) {
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
    CUresult r = drk_eng_drv.ctx_push_current(drk_eng_prog_ctx);
    if (r != CUDA_SUCCESS)
        return snprintf(why, len, "cuCtxPushCurrent (the program's context) failed (%d)", (int)r), NULL;
    r = load_copy(b->cubin, t->rec->name, &b->attrv, &m, &fn, &what);
    CUcontext popped;
    drk_eng_drv.ctx_pop_current(&popped);
    if (r != CUDA_SUCCESS) {
        if (m)
            drk_eng_bury(m);
        return snprintf(why, len, "%s in the program's context failed (%d)", what, (int)r), NULL;
    }
    b->pmodule = m, b->pfn = fn;
    double ms = ms_of(drk_mono_ns() - t0);
    drk_eng_totals.served_loads++;
    drk_eng_totals.served_load_ms_max = ms > drk_eng_totals.served_load_ms_max ? ms : drk_eng_totals.served_load_ms_max;
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
#define QUIET_ROUNDS 8 /* rounds a request may wait for a synchronize */
enum { QUIET_IDLE, QUIET_ASKED, QUIET_LOADING, QUIET_DONE };
static struct quiet {
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

/* Asks for `b`'s served copy at the program's next synchronize. */
static void quiet_ask(struct target *t, const struct built *b)
{
    if (b->pfn || !b->cubin || !drk_eng_prog_ctx ||
        atomic_load_explicit(&quiet.state, memory_order_acquire) != QUIET_IDLE)
        return;
    void *copy = malloc(b->cubin_len);
    if (!copy)
        return;
    memcpy(copy, b->cubin, b->cubin_len);
    free(quiet.cubin);
    quiet.cubin = copy;
    quiet.ctx = drk_eng_prog_ctx, quiet.name = t->rec->name, quiet.attrv = b->attrv;
    quiet.t = t, quiet.id = b->id, quiet.asked_round = drk_eng_rounds_seen;
    atomic_store_explicit(&quiet.state, QUIET_ASKED, memory_order_release);
}

void drk_engine_quiet(void)
{
    if (atomic_load_explicit(&quiet.state, memory_order_acquire) != QUIET_ASKED)
        return;
    CUcontext cur = NULL;
    if (drk_eng_drv.ctx_get_current(&cur) != CUDA_SUCCESS || cur != quiet.ctx)
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
        CUresult u = drk_eng_drv.module_unload(m);
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
void drk_eng_quiet_take(int all)
{
    int s = atomic_load_explicit(&quiet.state, memory_order_acquire);
    if (s == QUIET_ASKED && (all || drk_eng_rounds_seen - quiet.asked_round > QUIET_ROUNDS ||
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
    struct built *b = drk_eng_built_of(t, quiet.id);
    double ms = ms_of(quiet.ns);
    int pending = b && t->cached_pending && drk_eng_is_served(t, b);
    if (quiet.r != CUDA_SUCCESS) {
        drk_log(pending ? DRK_LOG_INFO : DRK_LOG_DEBUG, "evolve: %.80s: the served copy's load at a synchronize "
                "failed: %s (%d)%s", t->rec->name, quiet.what, (int)quiet.r,
                pending ? "; the cached result is withdrawn, searching" : "");
        if (pending) {
            drk_eng_withdraw(t);
            drk_eng_free_built(t, b);
        }
    } else if (b && !b->pfn && !atomic_load(&t->gone)) {
        b->pmodule = quiet.module, b->pfn = quiet.fn;
        drk_eng_totals.served_loads++;
        drk_eng_totals.quiet_loads++;
        drk_eng_totals.served_load_ms_max =
            ms > drk_eng_totals.served_load_ms_max ? ms : drk_eng_totals.served_load_ms_max;
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the served copy loaded into the program's context at its "
                               "synchronize in %.2f ms", t->rec->name, ms);
        if (pending)
            serve_cached(t, b, ms);
    } else {
        drk_eng_bury(quiet.module); /* its build went, or was loaded meanwhile */
    }
    free(quiet.cubin);
    quiet.cubin = NULL;
    atomic_store_explicit(&quiet.state, QUIET_IDLE, memory_order_release);
}

/* A forked child: no request of the parent's is its (no load is in flight there). */
void drk_eng_quiet_after_fork(void)
{
    free(quiet.cubin);
    quiet.cubin = NULL;
    atomic_store(&quiet.state, QUIET_IDLE);
}

/* ---- Earlier runs' results (the cache) ---- */

/* An earlier run's result serves: its copy in the program's context loaded
 * in `load_ms` (at a synchronize, or by drk's thread). */
static void serve_cached(struct target *t, struct built *b, double load_ms)
{
    t->cached_pending = 0;
    drk_registry_serve(t->rec->handle, &t->shape, (uintptr_t)b->pfn);
    t->served = b->pfn;
    drk_eng_served_changed(t);
    double ms = t->pending_read_ms + load_ms;
    drk_eng_totals.cache_serves++;
    drk_eng_totals.cache_serve_ms_sum += ms;
    drk_eng_totals.cache_serve_ms_max = ms > drk_eng_totals.cache_serve_ms_max ? ms : drk_eng_totals.cache_serve_ms_max;
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
void drk_eng_from_cache(struct target *t, const drk_variant *v, double speedup)
{
    drk_eng_totals.cache_hits++;
    char text[96], why[256];
    drk_variant_text(&drk_space_ptx, v, text, sizeof text);
    if (drk_variant_is_default(v)) {
        drk_eng_end_target(t, DRK_TARGET_SETTLED, "an earlier run found nothing faster (the cache)");
        return;
    }
    uint64_t c0 = drk_mono_ns();
    struct built *b = drk_eng_cached_slot(t, v);
    if (!b && drk_eng_build(t, v, NULL, why, sizeof why).fn) /* its cubin not in the cache: compiled */
        b = drk_eng_built_of(t, drk_variant_id(&drk_space_ptx, v));
    if (!b) {
        drk_log(DRK_LOG_INFO, "evolve: %.80s: the cached result %s does not build (%.160s): searching", t->rec->name,
                text, why);
        return;
    }
    t->served_v = *v, t->speedup = speedup, t->from_cache = t->came_from_cache = 1;
    t->cached_pending = 1, t->pending_round = drk_eng_rounds_seen, t->pending_read_ms = ms_of(drk_mono_ns() - c0);
    quiet_ask(t, b);
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the cached %s (%.3fx in an earlier run) serves from the program's next "
                           "synchronize", t->rec->name, text, speedup);
}

/* Earlier runs' results waiting to serve: each asks for its load at a
 * synchronize in turn (one request at a time); one that no synchronize
 * loaded in QUIET_ROUNDS rounds is loaded by drk's thread. */
void drk_eng_serve_pending(void)
{
    for (unsigned i = 0; i < drk_eng_ntargets; i++) {
        struct target *t = &drk_eng_targets[i];
        if (!t->cached_pending)
            continue;
        struct built *b = drk_eng_built_of(t, drk_variant_id(&drk_space_ptx, &t->served_v));
        if (!b || atomic_load(&t->gone)) {
            drk_eng_withdraw(t);
            continue;
        }
        if (drk_eng_rounds_seen - t->pending_round <= QUIET_ROUNDS) {
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
            drk_eng_withdraw(t);
            drk_eng_free_built(t, b);
        }
    }
}

/* ---- The round's decision served ---- */

uint32_t drk_eng_served_id(const struct target *t)
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
        struct built *b = drk_eng_built_of(t, t->choices[i]);
        drk_variant c;
        if (!b || b->proven < DRK_PROOF_LAUNCHES || t->choices[i] == drk_eng_served_id(t) ||
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

void drk_eng_publish(struct target *t, const drk_evo_decision *d)
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
        struct built *b = drk_eng_built_of(t, id);
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
    drk_eng_served_changed(t);
}
