/* Targets: a kernel-shape made one (whether it may be, its PTX copied,
 * its search begun or an earlier run's result taken up), armed for its
 * next capture, let go, rested and ended; what its builds were proven on;
 * the served modules kept until exit; its result between runs. The
 * engine's other parts: evolve/engine.c. */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fnv.h"
#include "base/log.h"
#include "evolve/facts.h"
#include "evolve/image/ptx_entry.h"
#include "evolve/jitlink.h"
#include "evolve/loaded.h"
#include "evolve/shapes.h"

/* ---- Targets ---- */

/* Served modules in the program's context are unloaded at exit, not when
 * dropped: on the H200 an unload there can wait for the device to drain,
 * holding the program's context (and its launches) meanwhile. Past GRAVES,
 * the oldest is unloaded at once. drk's own context unloads at once. */
#define GRAVES 256
static CUmodule graves[GRAVES];
static unsigned ngraves, next_grave;

void drk_eng_bury(CUmodule m)
{
    if (ngraves == GRAVES) {
        drk_eng_drv.module_unload(graves[next_grave]);
        graves[next_grave] = m;
        next_grave = (next_grave + 1) % GRAVES;
    } else {
        graves[ngraves++] = m;
    }
}

void drk_eng_unload_graves(void)
{
    for (unsigned i = 0; i < ngraves; i++)
        drk_eng_drv.module_unload(graves[i]);
    ngraves = next_grave = 0;
}

/* Served modules buried and not unloaded yet. */
unsigned drk_eng_graves(void) { return ngraves; }

/* A forked child: the parent's served modules are not its to unload. */
void drk_eng_graves_after_fork(void) { ngraves = next_grave = 0; }

/* The program's context is current (pushed). A module other slots of `t`
 * borrow goes to one of them rather than away. */
void drk_eng_free_built(struct target *t, struct built *b)
{
    for (unsigned i = 0; i < BUILT && b->jit.module && !b->borrowed; i++)
        if (&t->b[i] != b && t->b[i].borrowed && t->b[i].jit.module == b->jit.module) {
            t->b[i].borrowed = 0;
            b->borrowed = 1;
        }
    if (b->jit.module && !b->borrowed && drk_eng_push_own() == 0) {
        drk_build_in in = {.drv = &drk_eng_drv};
        drk_source_ptx.unload(&in, &b->jit);
        drk_eng_pop_own();
    }
    if (b->pmodule)
        drk_eng_bury(b->pmodule);
    free(b->cubin);
    memset(b, 0, sizeof *b);
    b->id = DRK_VARIANT_NONE;
}

/* A build of t's (NULL: none) that still wants a proof on this capture: not
 * built, or proven on too few launches and not on this one. */
int drk_eng_wants_proof(const struct target *t, const struct built *b)
{
    return !b || (b->proven < DRK_PROOF_LAUNCHES && !proven_at(b, t->captures));
}

/* b proven on capture `capture`: counted once a launch. 1 if it was not yet. */
int drk_eng_count_proof(struct built *b, unsigned capture)
{
    if (proven_at(b, capture))
        return 0;
    b->proven_on |= 1ull << (capture & 63);
    b->proven++;
    return 1;
}

/* What serves, or an earlier run's result that will once its copy is in
 * the program's context. */
int drk_eng_is_served(const struct target *t, const struct built *b)
{
    return (t->served && b->pfn == t->served) ||
           (t->cached_pending && b->id == drk_variant_id(&drk_space_ptx, &t->served_v));
}

void drk_eng_free_snapshot(struct target *t)
{
    for (unsigned i = 0; i < t->plan.n; i++)
        if (t->plan.snap[i])
            drk_trial_buf_put(&drk_eng_env, t->plan.snap[i], t->plan.alloc[i].size);
    if (t->plan.done)
        drk_eng_drv.event_destroy(t->plan.done);
    t->plan.n = 0;
    t->plan.done = NULL;
}

/* What `t` serves changed: the rounds that ran it whole start after the next. */
void drk_eng_served_changed(struct target *t)
{
    t->changed_at = drk_eng_rounds_seen;
    t->run_served_ns = 0;
}

/* Withdraws what `t` serves: the program's own function from its next launch. */
void drk_eng_withdraw(struct target *t)
{
    drk_registry_serve(t->rec->handle, &t->shape, 0);
    t->served = NULL, t->from_cache = t->came_from_cache = t->cached_pending = 0, t->speedup = 1;
    drk_eng_served_changed(t);
}

/* The served variant's speedup in the program: the original's median
 * launch over the variant's, each in a round that ran it throughout; 0
 * until both were timed. Replays in drk's context measure it only while
 * the GPU is not shared with a busy program (on the H200 the n-body's
 * replays said 5.4-5.7x of a variant the program ran 2.05x faster). */
double drk_eng_run_speedup(const struct target *t)
{
    return t->served && t->run_default_ns > 0 && t->run_served_ns > 0 ? t->run_default_ns / t->run_served_ns : 0;
}

/* What the served variant is taken to win: the program's timing, else the
 * replays'. */
double drk_eng_best_speedup(const struct target *t)
{
    double x = drk_eng_run_speedup(t);
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
    if (drk_eng_active == t) {
        drk_capture_disarm();
        drk_eng_active = NULL;
        drk_eng_want_choice = 1;
    }
    drk_eng_free_snapshot(t);
    t->await_round = 0;
}

/* Its builds but the served one's. */
static void free_unserved(struct target *t)
{
    for (unsigned i = 0; i < BUILT; i++)
        if (t->b[i].id != DRK_VARIANT_NONE && !drk_eng_is_served(t, &t->b[i]))
            drk_eng_free_built(t, &t->b[i]);
}

void drk_eng_end_target(struct target *t, drk_target_state st, const char *fmt, ...)
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
    drk_eng_aheads_forget(t);
    drk_eng_kept_forget(t);
    if ((t->served || t->cached_pending) && t->from_cache && (st == DRK_TARGET_REFUSED || st == DRK_TARGET_FAILED)) {
        /* An earlier run's result not yet proven again here: withdrawn. */
        drk_eng_withdraw(t);
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
void drk_eng_rest(struct target *t, const char *why)
{
    t->recheck_every = RECHECK;
    snprintf(t->why, sizeof t->why, "%s", why);
    t->state = DRK_TARGET_SETTLED;
    let_go(t);
    drop_ptx(t);
    drk_eng_aheads_forget(t);
    drk_eng_kept_forget(t);
    free_unserved(t);
    t->rested_at = drk_eng_rounds_seen;
}

/* A settled variant due to be measured against the original again (one
 * settled other than by rest() at RECHECK). */
int drk_eng_recheck_due(const struct target *t)
{
    return t->state == DRK_TARGET_SETTLED && t->served && !t->from_cache && !atomic_load(&t->gone) &&
           drk_eng_rounds_seen - t->rested_at >= (t->recheck_every ? t->recheck_every : RECHECK);
}

/* A reference that is not EQUAL ends `t`: an original that differs from
 * itself refuses it; a failure fails it. */
void drk_eng_end_by_ref(struct target *t, const drk_proof_ref *ref)
{
    drk_eng_end_target(t, ref->state == DRK_PROOF_NONDETERMINISTIC ? DRK_TARGET_REFUSED : DRK_TARGET_FAILED, "%s",
                       ref->why);
}

/* Its turn passes mid-search: a kernel-shape that never had one goes
 * first (searched one after another, the hottest's 20-40 rounds left a
 * program's fifth kernel no turn in 60 rounds on the H200). Its search
 * keeps its memory, center, builds (with the launches they were proven
 * on) and what it serves; only the snapshot buffers go. */
void drk_eng_yield_turn(struct target *t)
{
    snprintf(t->why, sizeof t->why, "its turn passed after %u round%s of search: another kernel has its first",
             t->turn_rounds, t->turn_rounds == 1 ? "" : "s");
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s (round %u)", t->rec->name, t->why, drk_eng_rounds_seen);
    let_go(t);
    t->yielded = 1;
}

struct target *drk_eng_find_target(const drk_kernel_record *r, int slot)
{
    for (unsigned i = 0; i < drk_eng_ntargets; i++)
        if (drk_eng_targets[i].rec == r && drk_eng_targets[i].slot == slot)
            return &drk_eng_targets[i];
    return NULL;
}

void drk_eng_features_of(const struct target *t, drk_kernel_features *f)
{
    const drk_image_facts *im = t->sk.facts;
    *f = (drk_kernel_features){
        .regs = im && im->regs != DRK_UNKNOWN_U32 ? im->regs : 0,
        .shared_bytes = (im && im->shared_bytes != DRK_UNKNOWN_U32 ? im->shared_bytes : 0) + t->shape.shared_bytes,
        .block_threads = t->shape.block[0] * t->shape.block[1] * t->shape.block[2],
        .param_bytes = im ? im->params_size : 0,
    };
}

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

/* Whether the kernel may be evolved at all, whatever its launches; the
 * reason when not. */
static int eligible_kernel(const drk_kernel_record *r, char *why, size_t len)
{
    if (!r->name)
        return snprintf(why, len, "unnamed"), 0;
    if (*drk_eng_cfg.only && !matches(drk_eng_cfg.only, r->name))
        return snprintf(why, len, "not in DRK_EVOLVE_ONLY"), 0;
    if (*drk_eng_cfg.skip && matches(drk_eng_cfg.skip, r->name))
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
    if (s->entry < 32 && (drk_eng_cfg.cooperative_entries >> s->entry & 1))
        return snprintf(why, len, "launched cooperatively"), 0;
    return eligible_kernel(r, why, len);
}

/* The first launched kernel evolution could take up (`on_device`: whose
 * device is known): its device (-1 when unknown), or -2 when there is none. */
int drk_eng_first_evolvable(int on_device)
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
    return drk_eng_on && drk_eng_first_evolvable(0) != -2;
}

/* ---- Results between runs ---- */

#define RESULT_KIND "result"

/* The key of a target's result: its PTX, the device and driver, and the
 * kernel and shape class it is for. */
/* A cache key for `t` on device `dev`: its PTX, the device, the driver,
 * and what `extra` distinguishes. 0, or -1 without a cache or a device. */
int drk_eng_key_of(const struct target *t, int dev, const char *extra, drk_cache_key *out)
{
    char name[256] = "";
    int major = 0, minor = 0, version = 0;
    if (!drk_eng_cfg.cache || !t->sk.ptx || !drk_eng_drv.device_get_name ||
        drk_eng_drv.device_get_name(name, sizeof name, dev) != CUDA_SUCCESS ||
        drk_eng_drv.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        drk_eng_drv.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
        drk_eng_drv.driver_get_version(&version) != CUDA_SUCCESS)
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
    t->keyed = drk_eng_key_of(t, dev, extra, &t->key) == 0;
}

/* An earlier run's result for `t`: 1 and the variant (the default: nothing
 * won), 0 if none; *partial: a search the run ended before it settled, and
 * the variant its best so far (a start, not a result): PARTIAL_SERVING
 * where that variant served there, proven (served again here once loaded,
 * and the search goes on from it once proven again). */
static int result_get(struct target *t, drk_variant *v, double *speedup, int *partial)
{
    drk_cache_blob b;
    if (!t->keyed || drk_cache_get(drk_eng_cfg.cache, &t->key, RESULT_KIND, &b) != 0)
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
int drk_eng_result_put(struct target *t, const drk_variant *v, double speedup, int partial)
{
    if (!t->keyed)
        return -1;
    char text[128];
    int n = snprintf(text, sizeof text, "variant %u speedup %.4f%s\n", drk_variant_id(&drk_space_ptx, v), speedup,
                     partial == PARTIAL_SERVING ? " partial serving" : partial ? " partial" : "");
    return n > 0 && drk_cache_put(drk_eng_cfg.cache, &t->key, RESULT_KIND, text, (size_t)n, t->rec->name) == 0 ? 0 : -1;
}

/* The search's random stream for a kernel and shape class: from its name,
 * not its record's address, so that a run proposes what the last run of the
 * same program did (the address moves with the process's layout). */
static uint64_t search_seed(const drk_kernel_record *r, uint64_t cls)
{
    return drk_fnv(DRK_FNV_OFFSET, r->name, r->name ? strlen(r->name) : 0) ^ cls;
}

struct target *drk_eng_make_target(const drk_kernel_record *r, int slot, const drk_time_row *row)
{
    unsigned n = atomic_load(&drk_eng_ntargets);
    if (n == TARGETS)
        return NULL;
    struct target *t = &drk_eng_targets[n];
    memset(t, 0, sizeof *t);
    t->rec = r;
    atomic_store(&drk_eng_ntargets, n + 1); /* after rec: drk_engine_unloading reads it */
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
        drk_eng_end_target(t, DRK_TARGET_REFUSED, "%s", why);
        return t;
    }
    if (!drk_source_ptx.applies(&t->sk, why, sizeof why)) {
        drk_eng_end_target(t, DRK_TARGET_REFUSED, "%s", why);
        return t;
    }
    if (drk_jitlink_ready(why, sizeof why) != 0) {
        static int told;
        if (!told++)
            drk_log(DRK_LOG_INFO, "evolve: no kernel is rebuilt: %s", why);
        drk_eng_end_target(t, DRK_TARGET_REFUSED, "%s", why);
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
        drk_eng_end_target(t, DRK_TARGET_FAILED, "memory ran out for a copy of its PTX");
        return t;
    }
    t->ptx = *t->sk.ptx;
    t->ptx.text = copy, t->ptx.len = cut;
    t->sk.ptx = &t->ptx;
    drk_kernel_features f;
    drk_eng_features_of(t, &f);
    drk_variant start;
    double distance;
    uint64_t from;
    drk_predictor_guess(&drk_eng_predictor, (uint64_t)(uintptr_t)r, t->cls, &f, &start, &distance, &from);
    drk_evolution_init(&t->evo, &drk_space_ptx, search_seed(r, t->cls), &start);
    t->state = DRK_TARGET_CAPTURING;
    snprintf(t->why, sizeof t->why, "waiting for a launch");
    if (drk_eng_cfg.open_cache) { /* with the first target: once */
        drk_eng_cfg.cache = drk_eng_cfg.open_cache();
        drk_eng_cfg.open_cache = NULL;
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
        drk_eng_totals.partial_hits++;
        drk_log(DRK_LOG_INFO, "evolve: %.80s: an earlier run's search ended %s %s (%.3fx, not yet proven here): %s",
                r->name, partial == PARTIAL_SERVING ? "serving" : "at",
                drk_variant_text(&drk_space_ptx, &cached, text, sizeof text), speedup,
                partial == PARTIAL_SERVING ? "served again, and searched on from it once proven again"
                                           : "searching on from it");
        if (partial == PARTIAL_SERVING) {
            t->search_on = 1;
            drk_eng_from_cache(t, &cached, speedup);
        }
    } else if (got) {
        drk_eng_from_cache(t, &cached, speedup);
    }
    return t;
}

/* Arms the capture of the active target: its bytes only, or with the
 * snapshot of what they reached last time. */
void drk_eng_arm(struct target *t)
{
    drk_eng_arms++;
    const drk_image_facts *im = t->sk.facts;
    t->plan.handle = t->rec->handle;
    memcpy(t->plan.grid, t->shape.grid, sizeof t->plan.grid);
    memcpy(t->plan.block, t->shape.block, sizeof t->plan.block);
    t->plan.shared_bytes = t->shape.shared_bytes;
    t->plan.params = im->params, t->plan.nparams = im->nparams;
    t->plan.flow = im->flow;
    t->plan.ctx = drk_eng_prog_ctx;
    t->plan.snap_ctx = drk_eng_own_ctx;
    if (drk_capture_arm(&t->plan) != 0)
        drk_eng_end_target(t, DRK_TARGET_FAILED, "its capture could not be armed");
    t->waited = 0;
}
