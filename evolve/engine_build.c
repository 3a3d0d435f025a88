/* Variants built: a point of the search mapped onto the sources, its
 * cubin compiled (or read from the cache, or compiled ahead with the
 * batch's others on several threads at once) and loaded into drk's
 * context, in one of its target's build slots. The engine's other parts:
 * evolve/engine.c. */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "evolve/image/cubin.h"
#include "evolve/jitlink.h"

#define CUBIN_KIND "cubin" /* the cache's kind of a build's cubin */

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

struct built *drk_eng_built_of(struct target *t, uint32_t id)
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
        if (!drk_eng_is_served(t, b) && !b->busy && (!best || rank < best_rank))
            best = b, best_rank = rank;
    }
    if (best)
        drk_eng_free_built(t, best);
    return best;
}

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
    return (drk_build_in){.drv = &drk_eng_drv, .ctx = drk_eng_own_ctx, .k = &t->sk,
                          .block_threads = t->shape.block[0] * t->shape.block[1] * t->shape.block[2],
                          .sm = drk_eng_env.sm > 0 ? (unsigned)drk_eng_env.sm : 0};
}

/* The cache's key of `t`'s cubin built with the PTX source's variant
 * `jit`: the PTX, the compile's options, the device and nvJitLink. 0 or -1. */
static int cubin_key(struct target *t, const drk_build_in *in, const drk_variant *jit, drk_cache_key *ck)
{
    char extra[320], opts[160];
    drk_source_variant_text(&drk_source_ptx, jit, in->block_threads, opts, sizeof opts);
    snprintf(extra, sizeof extra, "cubin 1|sm %u|nvjitlink %u|%s", in->sm, drk_jitlink_version(), opts);
    return drk_eng_key_of(t, drk_eng_env_device, extra, ck);
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
            drk_eng_totals.borrowed_loads++;
            return trial_fn(b);
        }
    }
    if (drk_source_ptx.build(in, jit, &b->jit) != 0)
        return snprintf(why, len, "build failed: %.220s", b->jit.why), (drk_trial_fn){NULL, -1};
    t->builds++;
    drk_eng_totals.builds_made++;
    drk_eng_totals.build_wall_ns += b->jit.build_ns;
    return trial_fn(b);
}

static void cubin_hit(double ms, double read_ms)
{
    drk_eng_totals.cubin_hits++;
    drk_eng_totals.cubin_hit_ms_sum += ms;
    drk_eng_totals.cubin_read_ms_sum += read_ms;
    drk_eng_totals.cubin_hit_ms_max = ms > drk_eng_totals.cubin_hit_ms_max ? ms : drk_eng_totals.cubin_hit_ms_max;
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
drk_evolution drk_eng_peek; /* compile_ahead's copy of a search (large: static) */

static void *compile_jobs(void *arg)
{
    (void)arg;
    for (unsigned i; (i = atomic_fetch_add(&ahead_next, 1) + aheads_made) < naheads;)
        aheads[i].rc = drk_source_ptx.compile(&ahead_in, &aheads[i].jit, &aheads[i].c);
    return NULL;
}

/* Lets the compiles made ahead go: those never taken to the cubin cache
 * (a later round or run loads them instead of compiling). */
void drk_eng_aheads_clear(void)
{
    for (unsigned i = 0; i < naheads; i++) {
        if (aheads[i].c.cubin && aheads[i].rc == 0 && aheads[i].keyed && drk_eng_cfg.cache &&
            drk_cache_put(drk_eng_cfg.cache, &aheads[i].ck, CUBIN_KIND, aheads[i].c.cubin, aheads[i].c.cubin_len,
                          ahead_owner ? ahead_owner->rec->name : "") == 0)
            drk_eng_totals.cubins_stored++;
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
void drk_eng_aheads_forget(const struct target *t)
{
    if (ahead_owner == t)
        drk_eng_aheads_clear();
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
    if (naheads >= AHEADS || drk_variant_is_default(v) || drk_eng_built_of(t, id) ||
        (*drk_eng_cfg.plant && strcmp(drk_eng_cfg.plant, drk_variant_text(&drk_space_ptx, v, text, sizeof text)) == 0))
        return 0;
    drk_variant jit, attr;
    to_sources(v, &jit, &attr);
    for (unsigned k = 0; k < naheads; k++)
        if (drk_variant_equal(&aheads[k].jit, &jit))
            return 0; /* another carveout of the same code, or compiled ahead already */
    struct ahead a = {.jit = jit};
    drk_cache_blob hit = {0};
    if (drk_eng_cfg.cache && cubin_key(t, in, &jit, &a.ck) == 0) {
        if (drk_cache_get(drk_eng_cfg.cache, &a.ck, CUBIN_KIND, &hit) == 0) {
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
void drk_eng_compile_ahead(struct target *t, const drk_variant *cand, unsigned n, const drk_evolution *from)
{
    if (drk_eng_compile_threads < 2 || !t->sk.ptx || !drk_eng_own_ctx)
        return;
    if (ahead_owner != t)
        drk_eng_aheads_clear();
    else
        aheads_compact();
    ahead_owner = t;
    drk_build_in in = own_build_in(t);
    for (unsigned i = 0; i < n; i++)
        ahead_add(t, &in, &cand[i]);
    unsigned more = 0;
    if (from) {
        if (from != &drk_eng_peek)
            drk_eng_peek = *from;
        for (unsigned i = 0; i < n; i++)
            drk_evolution_same(&drk_eng_peek, &cand[i]);
        drk_variant next[BATCH];
        /* At most 4 batches' proposals looked at: those already built or
         * in the cache add nothing, and each costs a look in the cache. */
        for (unsigned k, asks = 0;
             asks < 4 && more < LOOKAHEAD && naheads < AHEADS && (k = drk_evolution_next(&drk_eng_peek, next, BATCH));
             asks++)
            for (unsigned i = 0; i < k; i++) {
                more += ahead_add(t, &in, &next[i]);
                drk_evolution_same(&drk_eng_peek, &next[i]);
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
    while (started + 1 < drk_eng_compile_threads && started + 1 < todo &&
           drk_thread_start(&th[started], compile_jobs, NULL) == 0)
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
drk_trial_fn drk_eng_build(struct target *t, const drk_variant *v, int *same, char *why, size_t len)
{
    const drk_trial_fn none = {NULL, -1};
    uint32_t id = drk_variant_id(&drk_space_ptx, v);
    struct built *b = drk_eng_built_of(t, id);
    if (same)
        *same = 0;
    if (b && b->jit.fn)
        return trial_fn(b);
    drk_variant jit, attr;
    to_sources(v, &jit, &attr);
    if (!drk_eng_own_ctx)
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
    if (*drk_eng_cfg.plant && strcmp(drk_eng_cfg.plant, text) == 0 && (edited = planted(t->sk.ptx, &nedits))) {
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
    if (!edited && drk_eng_cfg.cache) {
        cached = cubin_key(t, &in, &jit, &ck) == 0;
        if (cached && drk_cache_get(drk_eng_cfg.cache, &ck, CUBIN_KIND, &hit) == 0)
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
        if (cached && drk_cache_put(drk_eng_cfg.cache, &ck, CUBIN_KIND, code, code_len, t->rec->name) == 0)
            drk_eng_totals.cubins_stored++;
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
        drk_eng_free_built(t, b);
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
        drk_eng_totals.build_wall_ns += compiled.build_ns;
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

/* Variant `v` of `t` read from the cache into a build slot, not loaded in
 * any context yet (load_cached_own loads it into drk's for proofs), or
 * NULL if its cubin is not in the cache. */
struct built *drk_eng_cached_slot(struct target *t, const drk_variant *v)
{
    if (!drk_eng_cfg.cache)
        return NULL;
    drk_variant jit, attr;
    to_sources(v, &jit, &attr);
    drk_build_in in = own_build_in(t);
    drk_cache_key ck;
    drk_cache_blob hit = {0};
    if (cubin_key(t, &in, &jit, &ck) != 0 || drk_cache_get(drk_eng_cfg.cache, &ck, CUBIN_KIND, &hit) != 0)
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
