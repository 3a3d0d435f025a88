/* The evolution engine (evolve/engine.h): its settings, the state its
 * parts share, the rounds that drive it (the next target, a search's
 * budget and turn, its next capture), drk's thread's tick, the exit, a
 * forked child and the report. Its parts, sharing
 * evolve/engine_internal.h: drk's own context (engine_ctx.c), targets
 * (engine_target.c), variants built (engine_build.c), what serves
 * (engine_serve.c), a captured launch and its trials (engine_capture.c)
 * and the search round on it (engine_round.c). */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "evolve/facts.h"
#include "evolve/shapes.h"

#define HOT_SHARE 0.01      /* a kernel-shape below this share of a round's kernel time is not worth it */
#define PATIENCE 3          /* rounds an armed capture may wait before the next target is tried */
#define TURN_DEFAULT 10     /* DRK_EVOLVE_TURN's, for settings that leave it 0 */
#define KEEP_BYTES (64u << 20) /* trial buffers kept between targets (a free can hold the program's launches) */

drk_driver drk_eng_drv;
drk_engine_settings drk_eng_cfg;
static char only[512], skip[512], plant[96];
int drk_eng_on, drk_eng_started; /* on: working; started: it ran (the report's) */
static char off_why[160] = "DRK_EVOLVE=0";

struct target drk_eng_targets[TARGETS];
_Atomic unsigned drk_eng_ntargets; /* read by drk_engine_unloading on a program thread */
struct target *drk_eng_active;   /* the one being captured and searched */
static unsigned idle_rounds; /* rounds in a row that ended with no target active */
drk_predictor drk_eng_predictor;
static drk_shapes shapes;
unsigned drk_eng_rounds_seen;
unsigned drk_eng_arms;
struct drk_eng_totals drk_eng_totals;

/* A capture with its snapshot, held until the program is quiet (its GPU
 * idle: drk_engine_tick's `quiet`), so that its trials, which run in drk's
 * context, take no time slices from the program's kernels. On the H100 a
 * naive matmul's recheck (0.7 ms of replays, 100 MiB restored, in 4
 * waits) run while the program's round ran made that round 3% slower, and
 * its search's captures 6-8% (held: 0.5-1.7%). At most HOLD_NS, or until
 * HOLD_ROUNDS rounds closed: a program that never pauses gets its trials
 * as before. */
#define HOLD_NS 2000000000ull
#define HOLD_ROUNDS 2
static struct hold {
    struct target *t;           /* NULL: none held */
    drk_capture_got got;
    unsigned arms, round;       /* drk_eng_arms when taken; drk_eng_rounds_seen at the first look */
    int looked;                 /* round set: the rounds counted in the tick of the take are not its */
    uint64_t since;
    int closed;                 /* a round of its target's closed meanwhile (target_round): */
    double grant;               /* its grant, for next_capture after the trials */
} held;
static void next_capture(struct target *t, double grant);

/* ---- Settings ---- */

void drk_engine_configure(const drk_driver *d) { drk_eng_drv = *d; }

int drk_engine_on(void) { return drk_eng_on; }

/* Threads a batch's compiles run on at once (compile_ahead). */
unsigned drk_eng_compile_threads = 1;

void drk_engine_start(const drk_engine_settings *s)
{
    drk_eng_cfg = *s;
    snprintf(only, sizeof only, "%s", s->only ? s->only : "");
    snprintf(skip, sizeof skip, "%s", s->skip ? s->skip : "");
    snprintf(plant, sizeof plant, "%s", s->plant ? s->plant : "");
    drk_eng_cfg.only = only, drk_eng_cfg.skip = skip, drk_eng_cfg.plant = plant;
    if (*plant)
        drk_log(DRK_LOG_WARN, "evolve: DRK_EVOLVE_PLANT=%s: that variant is built wrong on purpose (testing)", plant);
    drk_predictor_init(&drk_eng_predictor);
    drk_shapes_init(&shapes);
    drk_eng_compile_threads = s->compile_threads < BATCH ? s->compile_threads : BATCH;
    drk_eng_on = drk_eng_started = 1;
}

/* ---- Driving ---- */

static void target_round(struct target *t, uint64_t kernel_ns);
static const drk_time_row *row_of(const drk_round *r, const struct target *t);
static void saved(struct target *t);

static uint64_t last_kernel_ns; /* the latest timed round's kernel time: an untimed round is granted as much */
int drk_eng_want_choice;        /* a target ended since the latest timed round: the next is chosen from one */
static unsigned never_chosen;   /* hot kernel-shapes of the latest timed round that are no target yet */
/* At the latest timed round: kernel-shapes recorded, and launches of all
 * but the targets' (others_launched). */
static uint64_t shapes_at_timed, others_at_timed;

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
    for (int again = 0; again < 2 && !drk_eng_active; again++)
        for (unsigned i = 0; i < r->ntop && !drk_eng_active; i++) {
            int slot;
            const drk_kernel_record *rec = hot_row(r, i, &slot);
            struct target *had = rec ? drk_eng_find_target(rec, slot) : NULL;
            if (!rec || (again ? !had || !had->yielded || atomic_load(&had->gone) : had != NULL))
                continue;
            const drk_driver_facts *f = atomic_load_explicit(&rec->driver, memory_order_acquire);
            if (!f || f->device < 0)
                continue;
            if (!drk_eng_push(f->device)) {
                drk_log(DRK_LOG_DEBUG, "evolve: %.80s: device %d's primary context is not active", rec->name,
                        (int)f->device);
                continue;
            }
            if (!drk_eng_ensure_env(f->device)) {
                drk_eng_pop();
                continue;
            }
            struct target *t = had ? had : drk_eng_make_target(rec, slot, &r->top[i]);
            if (!t || (!had && t->state != DRK_TARGET_CAPTURING)) {
                drk_eng_pop();
                continue;
            }
            if (had) {
                had->yielded = 0;
                snprintf(had->why, sizeof had->why, "its search goes on: waiting for a launch");
                drk_log(DRK_LOG_DEBUG, "evolve: %.80s: its turn again after %u round%s of search (round %u)",
                        rec->name, had->rounds, had->rounds == 1 ? "" : "s", drk_eng_rounds_seen);
            }
            if (!had) {
                /* The budget the rounds before it earned and nothing spent
                 * (the kernel ran meanwhile), up to the carry's cap: a
                 * kernel that runs from the start begins its search with
                 * credit, as one searched for a while keeps what it left. */
                double cap = DRK_EVO_CARRY_ROUNDS * drk_eng_cfg.budget * (double)r->kernel_ns;
                double earned = drk_eng_cfg.budget * (double)drk_eng_totals.program_ns - drk_eng_totals.charged;
                t->ledger_ns = t->credit_ns = earned < 0 ? 0 : earned < cap ? earned : cap;
                drk_log(DRK_LOG_DEBUG, "evolve: %.80s: chosen in round %u, with %.1f ms of credit the rounds before "
                        "earned (a round grants %.1f ms)", rec->name, drk_eng_rounds_seen, t->ledger_ns / 1e6,
                        drk_eng_cfg.budget * (double)r->kernel_ns / 1e6);
            }
            t->turn_rounds = 0;
            drk_eng_active = t;
            drk_eng_arm(t);
            if (!had)
                drk_eng_load_original_ahead(t);
            drk_eng_pop();
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
        n += f && f->device >= 0 && (drk_eng_env_device < 0 || f->device == drk_eng_env_device) &&
             !drk_eng_find_target(rec, slot);
    }
    return n;
}

/* Launches of every kernel-shape that is no target (those beyond a
 * record's first 8 shapes and untracked ones included). Each counter only
 * grows, so the sum is unchanged only if none of them moved. */
static uint64_t others_launched(void)
{
    uint64_t n = drk_registry_untracked();
    size_t size = drk_registry_size();
    for (size_t i = 0; i < size; i++) {
        const drk_kernel_record *rec = drk_registry_at(i);
        if (!rec)
            continue;
        n += drk_record_other_launches(rec);
        for (int s = 0; s < DRK_SHAPES_PER_KERNEL; s++) {
            uint64_t l = drk_record_shape_launches(rec, s);
            if (l && !drk_eng_find_target(rec, s)) /* the targets looked up only for shapes launched */
                n += l;
        }
    }
    return n;
}

/* A timed round now could give the engine a target: a hot kernel-shape of
 * the latest timed round is no target yet, a target whose turn passed
 * waits, or a kernel-shape was launched for the first time since. */
static int may_choose(void)
{
    if (never_chosen || drk_registry_shapes_added() != shapes_at_timed)
        return 1;
    for (unsigned i = 0; i < drk_eng_ntargets; i++)
        if (drk_eng_targets[i].yielded && !atomic_load(&drk_eng_targets[i].gone))
            return 1;
    return 0;
}

/* The active target's turn is over: it has searched DRK_EVOLVE_TURN rounds
 * in a row and a hot kernel-shape never had a turn. */
static int turn_over(const struct target *t)
{
    return never_chosen && t->state == DRK_TARGET_SEARCHING && !t->rechecking && !t->from_cache &&
           t->turn_rounds >= (drk_eng_cfg.turn ? drk_eng_cfg.turn : TURN_DEFAULT);
}

void drk_engine_round(const drk_round *r)
{
    if (!drk_eng_on || !r)
        return;
    drk_eng_rounds_seen++;
    drk_eng_totals.program_ns += r->kernel_ns;
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
    drk_eng_totals.researched_sum += drk_shapes_round_end(&shapes).share;
    last_kernel_ns = r->kernel_ns;
    for (unsigned n = 0; n < drk_eng_ntargets; n++) {
        struct target *t = &drk_eng_targets[n];
        const drk_time_row *row = row_of(r, t);
        if (t == drk_eng_active && row)
            t->default_ns = (double)row->stats.median_ns;
        /* A round that ran one function throughout (what serves changed
         * before the round before closed) times it in the program. */
        if (row && row->stats.median_ns && t->changed_at + 1 < drk_eng_rounds_seen) {
            if (t->served)
                t->run_served_ns = (double)row->stats.median_ns;
            else
                t->run_default_ns = (double)row->stats.median_ns;
            /* A settled result went to the cache with the replays' speedup
             * (settled before the program timed it): now the program's. */
            if (t->stored == 1 && t->state == DRK_TARGET_SETTLED && drk_eng_run_speedup(t) > 0) {
                drk_eng_result_put(t, &t->served_v, drk_eng_run_speedup(t), 0); /* the same result: not counted again */
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
            drk_eng_end_target(t, DRK_TARGET_FAILED, "its module was unloaded by the program");
        }
    }
    never_chosen = count_never_chosen(r);
    if (drk_eng_active && turn_over(drk_eng_active))
        drk_eng_yield_turn(drk_eng_active); /* before another capture is armed */
    if (drk_eng_active)
        target_round(drk_eng_active, r->kernel_ns);
    if (!drk_eng_active)
        choose(r);
    never_chosen = count_never_chosen(r); /* for the untimed rounds to come */
    drk_eng_want_choice = 0;
    shapes_at_timed = drk_registry_shapes_added();
    others_at_timed = others_launched();
    /* Nothing new to search: a rested variant is measured again (on
     * replays in drk's context: none once drk gave its memory back). */
    for (unsigned i = 0; i < drk_eng_ntargets && !drk_eng_active && !drk_eng_memory_out; i++) {
        struct target *t = &drk_eng_targets[i];
        if (drk_eng_recheck_due(t)) {
            snprintf(t->why, sizeof t->why, "measured again against the original");
            drk_log(DRK_LOG_DEBUG, "evolve: %.80s: measured again against the original (round %u)", t->rec->name,
                    drk_eng_rounds_seen);
            drk_eng_active = t;
            t->rechecking = 1;
            drk_eng_arm(t);
        }
    }
    idle_rounds = drk_eng_active ? 0 : idle_rounds + 1;
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
    double x = drk_eng_best_speedup(t);
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
    double grant = drk_eng_cfg.budget * (double)kernel_ns;
    t->credit_ns += grant;
    t->ledger_ns += grant;
    if (held.t == t) {
        /* Its capture's trials come first; the next capture after them. */
        held.closed = 1, held.grant = grant;
        return;
    }
    next_capture(t, grant);
}

/* After a round's grant (or a held capture's trials, when a round closed
 * meanwhile): the next capture is armed once the search round is done and
 * the budget allows. */
static void next_capture(struct target *t, double grant)
{
    double ahead = t->await_round ? spend_ahead(t, grant) : 0;
    if (atomic_load(&t->gone)) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "its module was unloaded by the program");
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
        drk_eng_arm(t); /* this round's search is done: the next launch */
    } else if (++t->waited > PATIENCE) {
        /* Waiting on a capture that does not come (the kernel ran out of
         * use, or its pointers keep moving): let it go, keeping what it
         * serves, so other kernels get their turn. */
        drk_eng_end_target(t, t->served || t->rounds ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED,
                           "not captured again at its shape within %d rounds", PATIENCE);
    }
}

unsigned drk_engine_idle_rounds(void) { return drk_eng_on ? idle_rounds : 0; }

unsigned drk_engine_targets(void) { return drk_eng_on ? atomic_load(&drk_eng_ntargets) : 0; }

int drk_engine_searching(void)
{
    return drk_eng_on && drk_eng_active && !drk_eng_want_choice && drk_eng_active->default_ns > 0 && last_kernel_ns > 0;
}

/* What `t` serves was never timed in the program since it changed, and a
 * round has run it whole: 1 the first time (a timed round is wanted). A
 * cached result settles within a few rounds, and the records then rested
 * for 20, so the H200's warm runs reported the replays' 5.7x for a 2.0x
 * n-body; and a search's untimed rounds are granted the latest timed
 * round's kernel time, which the change moved. */
static int time_what_serves(struct target *t)
{
    if (!t->served || t->run_served_ns || t->changed_at + 1 >= drk_eng_rounds_seen ||
        t->timed_ask == t->changed_at + 1)
        return 0;
    t->timed_ask = t->changed_at + 1;
    return 1;
}

int drk_engine_round_untimed(void)
{
    if (!drk_eng_on)
        return 0;
    drk_eng_rounds_seen++;
    /* The program ran its kernels all the same, about as long as in the
     * latest timed round: what a search chosen later begins with counts
     * it (on the H200 the records rested for the rounds before naive
     * matmul's choice, which then began with one round's credit). */
    drk_eng_totals.program_ns += last_kernel_ns;
    for (unsigned n = 0; n < drk_eng_ntargets; n++)
        saved(&drk_eng_targets[n]);
    if (drk_eng_active && turn_over(drk_eng_active)) {
        /* Its turn is over (by the latest timed round's count of those
         * waiting): it passes now, before another capture is armed, and
         * the next is chosen from a timed round. */
        drk_eng_yield_turn(drk_eng_active);
        return 1;
    }
    if (drk_eng_active) {
        /* A search goes on through untimed rounds, granted the latest
         * timed round's kernel time: once what it serves changed that
         * time, one round times it again. */
        struct target *t = drk_eng_active;
        target_round(t, last_kernel_ns);
        return drk_eng_want_choice || time_what_serves(t);
    }
    if (drk_eng_want_choice && may_choose())
        return 1; /* the next target is chosen from a timed round */
    for (unsigned i = 0; i < drk_eng_ntargets; i++) {
        struct target *t = &drk_eng_targets[i];
        if (time_what_serves(t) || drk_eng_recheck_due(t))
            return 1;
    }
    return 0;
}

unsigned drk_engine_budget_rounds(void)
{
    struct target *t = drk_eng_on ? drk_eng_active : NULL;
    double grant = t ? drk_eng_cfg.budget * (double)last_kernel_ns : 0;
    if (!t || !t->await_round || held.t == t || grant <= 0)
        return 0;
    double owed = -spend_ahead(t, grant) - t->ledger_ns;
    return owed <= 0 ? 0 : owed >= 1e6 * grant ? 1000000u : (unsigned)(owed / grant) + 1;
}

int drk_engine_nothing_to_choose(void) { return drk_eng_on && !drk_eng_active && !may_choose(); }

int drk_engine_nothing_new(void) { return drk_eng_on && !may_choose() && others_launched() == others_at_timed; }

int drk_engine_holding(void) { return held.t != NULL; }

/* The capture to work on now: one just taken (unless held), or the one
 * held once the program is quiet or it waited long enough (*closed: a
 * round of its target's closed meanwhile); NULL: none. */
static const drk_capture_got *capture_now(int (*quiet)(void), int *closed)
{
    struct target *t = drk_eng_active;
    *closed = 0;
    if (held.t && (held.t != t || held.arms != drk_eng_arms || drk_eng_memory_out)) {
        /* Its target let go meanwhile (a turn passed, it ended, drk's
         * memory went back): its snapshot's buffers went with it. */
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: the capture held for a quiet moment is dropped: its target was let go",
                held.t->rec->name);
        held.t = NULL;
        return NULL;
    }
    if (!held.t) {
        if (!drk_capture_take(&held.got))
            return NULL;
        if (!held.got.snapped || !quiet || quiet())
            return &held.got; /* at once: nothing held */
        held.t = t, held.arms = drk_eng_arms, held.since = drk_mono_ns();
        held.closed = 0, held.looked = 0;
        return NULL;
    }
    if (!held.looked) {
        /* Rounds are counted from the first look: the tick that took the
         * capture counts after it the untimed rounds that closed before
         * (on the H100 a layernorm's hold ran out after 1.1 ms so). */
        held.round = drk_eng_rounds_seen, held.looked = 1;
    }
    uint64_t waited = drk_mono_ns() - held.since;
    int late = waited >= HOLD_NS || drk_eng_rounds_seen - held.round >= HOLD_ROUNDS;
    if (!quiet() && !late)
        return NULL;
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: a capture's trials begin after %.1f ms, %s", t->rec->name, waited / 1e6,
            late ? "the program not quiet meanwhile" : "the program quiet");
    drk_eng_totals.held++;
    drk_eng_totals.held_busy += late != 0;
    if (waited / 1e6 > drk_eng_totals.held_ms_max)
        drk_eng_totals.held_ms_max = waited / 1e6;
    held.t = NULL;
    *closed = held.closed;
    return &held.got;
}

void drk_engine_tick(int (*quiet)(void))
{
    if (!drk_eng_on)
        return;
    drk_eng_quiet_take(0);
    drk_eng_serve_pending();
    if (!drk_eng_active) {
        held.t = NULL; /* let go with its target */
        return;
    }
    int closed;
    const drk_capture_got *got = capture_now(quiet, &closed);
    if (!got)
        return;
    struct target *t = drk_eng_active;
    if (atomic_load(&t->gone)) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "its module was unloaded by the program");
        return;
    }
    if (!drk_eng_push(drk_eng_env_device)) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "the device's primary context is gone");
        return;
    }
    drk_eng_captured(t, got);
    if (closed && drk_eng_active == t)
        next_capture(t, held.grant);
    if (!drk_eng_active && drk_eng_push_own() == 0) {
        drk_trial_env_trim(&drk_eng_env, KEEP_BYTES); /* the target ended: big buffers go */
        drk_eng_pop_own();
    }
    drk_eng_pop();
}

void drk_engine_stop(void)
{
    if (!drk_eng_on)
        return;
    drk_eng_own_join();
    drk_capture_disarm();
    held.t = NULL;
    /* Searches the exit ends: their best so far, for the next run to go
     * on from (a start: proven and measured again there). */
    for (unsigned i = 0; i < drk_eng_ntargets; i++) {
        struct target *t = &drk_eng_targets[i];
        drk_variant best;
        if (t->stored || t->from_cache || !t->rounds || (t->state == DRK_TARGET_SETTLED && t->came_from_cache))
            continue; /* nothing searched here, or its result is in the cache already */
        /* A module the program unloaded (cudart unregisters its modules at
         * exit, before this runs) leaves what was found in its PTX good. */
        if (t->served) {
            /* Proven and serving: the next run serves it at once. */
            drk_eng_totals.cache_stored +=
                drk_eng_result_put(t, &t->served_v, drk_eng_best_speedup(t), PARTIAL_SERVING) == 0;
            t->stored = 1;
            drk_eng_totals.partial_stored++;
            continue;
        }
        if (drk_variant_from_id(&drk_space_ptx, t->evo.center, &best) != 0 || drk_variant_is_default(&best))
            continue;
        drk_ratio_stats st = drk_evolution_stats(&t->evo, &best);
        if (st.n && st.median >= 1 + DRK_EVO_MARGIN) {
            drk_eng_totals.cache_stored += drk_eng_result_put(t, &best, st.median, PARTIAL_BEST) == 0;
            t->stored = 1;
            drk_eng_totals.partial_stored++;
        }
    }
    drk_eng_quiet_take(1);
    if ((drk_eng_active || drk_eng_graves()) && drk_eng_push(drk_eng_env_device)) {
        if (drk_eng_active)
            drk_eng_free_snapshot(drk_eng_active);
        drk_eng_unload_graves();
        drk_eng_pop();
    }
    drk_eng_close_own();
    drk_eng_active = NULL;
    drk_eng_on = 0;
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
    drk_eng_capture_after_fork();
    drk_eng_ctx_after_fork();
    drk_eng_quiet_after_fork();
    atomic_store(&drk_eng_ntargets, 0);
    drk_eng_active = NULL;
    held.t = NULL;
    drk_eng_on = drk_eng_started = 0;
    snprintf(off_why, sizeof off_why, "a forked child: evolution stays with the parent");
    drk_eng_graves_after_fork();
    idle_rounds = drk_eng_rounds_seen = 0;
    memset(&drk_eng_totals, 0, sizeof drk_eng_totals);
}

/* ---- Report ---- */

size_t drk_engine_rows(drk_engine_row *out, size_t max)
{
    size_t n = 0;
    for (unsigned i = 0; i < drk_eng_ntargets && n < max; i++) {
        const struct target *t = &drk_eng_targets[i];
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
        o->hops = (unsigned)t->evo.hops;
        if (t->served)
            drk_variant_text(&drk_space_ptx, &t->served_v, o->serving, sizeof o->serving);
        else
            snprintf(o->serving, sizeof o->serving, "default");
        o->replay_speedup = t->served ? t->speedup : 1.0;
        o->run_speedup = drk_eng_run_speedup(t);
        o->speedup = t->served ? drk_eng_best_speedup(t) : 1.0;
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
    drk_engine_totals s = {.on = drk_eng_started, .off = drk_eng_started ? NULL : off_why,
                           .budget = drk_eng_cfg.budget};
    s.kernels = drk_eng_ntargets;
    for (unsigned i = 0; i < drk_eng_ntargets; i++) {
        s.evolved += drk_eng_targets[i].served != NULL;
        s.refused += drk_eng_targets[i].state == DRK_TARGET_REFUSED;
        s.failed += drk_eng_targets[i].state == DRK_TARGET_FAILED;
    }
    s.trial_ns = drk_eng_totals.trial_ns, s.program_ns = drk_eng_totals.program_ns,
        s.trial_bytes = drk_eng_totals.trial_bytes;
    s.rounds = drk_eng_rounds_seen;
    s.researched_share = drk_eng_rounds_seen ? drk_eng_totals.researched_sum / drk_eng_rounds_seen : 0;
    s.cache_hits = drk_eng_totals.cache_hits, s.cache_stored = drk_eng_totals.cache_stored;
    s.partial_hits = drk_eng_totals.partial_hits, s.partial_stored = drk_eng_totals.partial_stored;
    s.cubin_hits = drk_eng_totals.cubin_hits, s.cubins_stored = drk_eng_totals.cubins_stored,
        s.borrowed_loads = drk_eng_totals.borrowed_loads;
    s.cubin_hit_ms_mean = drk_eng_totals.cubin_hits ? drk_eng_totals.cubin_hit_ms_sum / drk_eng_totals.cubin_hits : 0,
        s.cubin_hit_ms_max = drk_eng_totals.cubin_hit_ms_max;
    s.cubin_read_ms_mean = drk_eng_totals.cubin_hits ? drk_eng_totals.cubin_read_ms_sum / drk_eng_totals.cubin_hits : 0;
    s.own_ctx_bytes = drk_eng_totals.own_ctx_bytes;
    s.gave_back = drk_eng_memory_out;
    for (unsigned i = 0; i < drk_eng_ntargets; i++)
        s.saved_ns += (uint64_t)(drk_eng_targets[i].saved_ns + 0.5);
    s.served_loads = drk_eng_totals.served_loads, s.served_load_ms_max = drk_eng_totals.served_load_ms_max;
    s.cache_serves = drk_eng_totals.cache_serves, s.cache_serve_ms_max = drk_eng_totals.cache_serve_ms_max;
    s.cache_serve_ms_mean =
        drk_eng_totals.cache_serves ? drk_eng_totals.cache_serve_ms_sum / drk_eng_totals.cache_serves : 0;
    s.quiet_loads = drk_eng_totals.quiet_loads;
    s.held_trials = drk_eng_totals.held, s.held_busy = drk_eng_totals.held_busy,
    s.held_ms_max = drk_eng_totals.held_ms_max;
    return s;
}
