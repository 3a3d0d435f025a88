/* One search round on a captured launch: what serves proven or measured
 * again, candidates built, proven and timed in batches (one wait each),
 * the search's choices proven, and the round's decision. The engine's
 * other parts: evolve/engine.c. */
#define _GNU_SOURCE
#include "evolve/engine_internal.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "evolve/jitlink.h"

/* ---- One search round on a captured launch ---- */

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
        if (t->choices[i] != drk_eng_served_id(t) && drk_variant_from_id(&drk_space_ptx, t->choices[i], &c) == 0 &&
            drk_evolution_worth_serving(&t->evo, &c, &st))
            median[k] = st.median, t->choices[k++] = t->choices[i];
    }
    t->nchoices = k;
    uint32_t id = d->serve ? drk_variant_id(&drk_space_ptx, &d->variant) : DRK_VARIANT_NONE;
    if (id == DRK_VARIANT_NONE || id == drk_eng_served_id(t))
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
    struct built *b = drk_eng_built_of(t, drk_variant_id(&drk_space_ptx, &t->served_v));
    if (b && drk_eng_is_served(t, b))
        return b;
    drk_eng_withdraw(t);
    drk_eng_end_target(t, DRK_TARGET_FAILED, "the served variant's build was lost");
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
    drk_eng_end_target(t, DRK_TARGET_REFUSED,
                       "the original differed from its own output in a timed run on capture %u: nondeterministic, so "
                       "no variant can be proven equal", t->captures);
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
    if (!(tr->variant = trial_fn(b)).fn && !(tr->variant = drk_eng_build(t, &t->served_v, NULL, why, sizeof why)).fn) {
        drk_eng_withdraw(t);
        drk_eng_free_built(t, b);
        snprintf(t->why, sizeof t->why, "the cached %.40s does not load for its proofs: %.100s", text, why);
        drk_log(DRK_LOG_INFO, "evolve: %.80s: %s; withdrawn, searching", t->rec->name, t->why);
        return;
    }
    drk_proof_result pr = drk_proof_variant(&ops, ref);
    if (pr.verdict == DRK_PROOF_EQUAL) {
        if (b)
            drk_eng_count_proof(b, t->captures);
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
            drk_eng_rest(t, "an earlier run's result (the cache), proven again on 3 launches");
        }
        return;
    }
    /* Withdrawn at once; the search takes over. */
    drk_eng_withdraw(t);
    if (pr.verdict == DRK_PROOF_ERROR) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", pr.why);
        return;
    }
    t->rejected++;
    drk_evolution_reject(&t->evo, &t->served_v);
    snprintf(t->why, sizeof t->why, "the cached %.40s rejected: %.120s", text, pr.why);
    drk_log(DRK_LOG_WARN, "evolve: %.80s: %s; withdrawn, searching", t->rec->name, t->why);
    if (b)
        drk_eng_free_built(t, b);
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
        drk_eng_withdraw(t);
        if (pr.verdict == DRK_PROOF_ERROR) {
            drk_eng_end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", pr.why);
            return;
        }
        t->rejected++;
        drk_log(DRK_LOG_WARN, "evolve: %.80s: %s now differs (%.150s): back to the program's own function",
                t->rec->name, text, pr.why);
        drk_eng_end_target(t, DRK_TARGET_SETTLED, "%.40s differed when measured again", text);
        return;
    }
    float sp[PAIRS];
    double orig_ns = 0;
    tr->full = 1;
    int n = drk_trial_time(tr, PAIRS, sp, &orig_ns);
    if (n < 0) {
        drk_eng_end_target(t, DRK_TARGET_FAILED, "a timed replay failed: %s", tr->why);
        return;
    }
    if (original_differed(t, tr))
        return;
    if (tr->work.failed) {
        /* Its timed runs are compared too (restoring only what may differ):
         * one differed from the original's output, a variant that differs
         * from run to run. */
        drk_eng_withdraw(t);
        t->rejected++;
        drk_log(DRK_LOG_WARN, "evolve: %.80s: %s differed from the original in a timed run: back to the program's "
                              "own function", t->rec->name, text);
        drk_eng_end_target(t, DRK_TARGET_SETTLED, "%.40s differed in a timed run", text);
        return;
    }
    drk_ratio_stats st = drk_ratio_stats_of(sp, (unsigned)n);
    if (n >= 3 && st.median <= 1 - DRK_EVO_MARGIN && st.upper < 1) {
        drk_eng_withdraw(t);
        drk_log(DRK_LOG_INFO, "evolve: %.80s: %s now measures %.3fx: back to the program's own function",
                t->rec->name, text, st.median);
        drk_eng_end_target(t, DRK_TARGET_SETTLED, "%.40s became slower (%.3fx) and was withdrawn", text, st.median);
        return;
    }
    if (n >= 3)
        t->speedup = st.median;
    char why[96];
    snprintf(why, sizeof why, "measured again: %.3fx", st.median);
    unsigned every = t->recheck_every;
    drk_eng_rest(t, why);
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
const drk_proof_ref *drk_eng_ref_prev;
const drk_proof_ref drk_eng_first_launch;

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
void drk_eng_reject(struct target *t, const drk_variant *v, const char *why, const char *where)
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
    drk_eng_reject(t, &c->v, pr.why, "");
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
    if (drk_eng_ref_prev) {
        /* The capture's reference, queued first: its compares take the
         * first slots, and the batch's verdicts wait for it to settle. */
        int rc = drk_proof_reference_queue(&ops, drk_eng_ref_prev == &drk_eng_first_launch ? NULL : drk_eng_ref_prev,
                                           ref);
        drk_eng_ref_prev = NULL;
        if (rc != 0)
            drk_proof_reference(&ops, ref); /* the capture before does not fit this one */
        if (ref->state != DRK_PROOF_EQUAL) {
            drk_eng_end_by_ref(t, ref);
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
            drk_eng_end_target(t, DRK_TARGET_FAILED, "a replay failed: %s (%s)", q[k].pr.why, tr->why);
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
        drk_eng_end_by_ref(t, ref);
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
            drk_eng_end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", c->pr.why);
            return -1;
        }
        if (c->pr.verdict != DRK_PROOF_EQUAL) {
            drk_eng_reject(t, &c->v, c->pr.why, "");
            continue;
        }
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: %s proven bit for bit on capture %u (%u allocations compared)",
                t->rec->name, text, t->captures, ops.n);
        if (drk_eng_count_proof(c->b, t->captures))
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
    drk_eng_end_target(t, DRK_TARGET_FAILED, "a replay failed: %s", tr->why);
    return -1;
failed_timing:
    drk_eng_end_target(t, DRK_TARGET_FAILED, "a timed replay failed: %s", tr->why);
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
    drk_eng_compile_ahead(t, cand, n, look ? &t->evo : NULL);
    for (unsigned i = 0; i < n && *nq < BATCH && rc == 0; i++) {
        const drk_variant *v = &cand[i];
        if (drk_variant_is_default(v))
            continue;
        uint32_t id = drk_variant_id(&drk_space_ptx, v);
        int fresh = !drk_eng_built_of(t, id);
        int same;
        CUfunction fn = drk_eng_build(t, v, &same, why, sizeof why).fn;
        if (same) {
            drk_evolution_same(&t->evo, v);
        } else if (!fn && drk_jitlink_closed()) {
            drk_eng_end_target(t, t->served ? DRK_TARGET_SETTLED : DRK_TARGET_REFUSED,
                               "the program exited before the search ended (%u rounds)", t->rounds);
            rc = -1;
        } else if (!fn) {
            drk_evolution_reject(&t->evo, v);
            t->rejected++;
            snprintf(t->why, sizeof t->why, "%.190s", why);
        } else {
            t->tried += fresh;
            struct built *b = drk_eng_built_of(t, id);
            b->busy = 1;
            q[(*nq)++] = (struct queued){.v = *v, .b = b, .served = timed && drk_eng_is_served(t, b), .first = -1,
                                         .more = -1};
        }
    }
    if (!look)
        drk_eng_aheads_clear();
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
            if (drk_eng_is_served(t, q[k].b))
                drk_eng_withdraw(t);
            drk_eng_free_built(t, q[k].b);
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
    if (now_id != DRK_VARIANT_NONE && now_id != drk_eng_served_id(t) && !measured) {
        unsigned i = 0;
        while (i < k && ids[i] != now_id)
            i++;
        if (i == k)
            ids[k++] = now_id; /* a choice the full list gave up */
    }
    for (unsigned i = 0; i < k; i++) {
        const struct built *b = drk_eng_built_of(t, ids[i]);
        if ((ids[i] != now_id || !measured) &&
            drk_eng_wants_proof(t, b) &&
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
double drk_eng_round_credit(const struct target *t)
{
    double each = t->default_ns > 0 ? t->default_ns : 1000.0, batch = BATCH * PAIRS * each;
    return t->credit_ns > batch ? t->credit_ns : batch;
}

/* The search left a center whose neighbourhood gave nothing better for a
 * near equal's (evolve/search.h, "Plateau hops"): said at debug level. */
static void log_hop(const struct target *t)
{
    drk_variant c;
    char text[96];
    drk_variant_from_id(t->evo.space, t->evo.center, &c);
    drk_log(DRK_LOG_DEBUG, "evolve: %.80s: nothing better around the search's center: it hops to %s, a near equal "
            "whose neighbourhood is not searched yet (hop %llu)", t->rec->name,
            drk_variant_text(t->evo.space, &c, text, sizeof text), (unsigned long long)t->evo.hops);
}

void drk_eng_search_round(struct target *t, drk_trial *tr, drk_proof_ref *ref)
{
    if (t->rechecking) {
        remeasure(t, tr, ref);
        return;
    }
    if (t->from_cache) {
        verify_cached(t, tr, ref);
        return;
    }
    drk_evolution_begin_round(&t->evo, drk_eng_round_credit(t), t->default_ns > 0 ? t->default_ns : 1000.0, PAIRS);
    t->credit_ns = 0;
    drk_variant cand[BATCH];
    unsigned n;
    if (*drk_eng_cfg.plant && !t->plant_tried) {
        /* Testing: the planted variant is tried first, whatever the search
         * would pick, so its rejection is seen on every target. */
        t->plant_tried = 1;
        drk_variant pv;
        char text[96];
        for (uint32_t id = 0; id < drk_space_size(&drk_space_ptx); id++)
            if (drk_variant_from_id(&drk_space_ptx, id, &pv) == 0 &&
                strcmp(drk_variant_text(&drk_space_ptx, &pv, text, sizeof text), drk_eng_cfg.plant) == 0) {
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
        uint64_t hops = t->evo.hops;
        n = drk_evolution_next(&t->evo, cand, BATCH - nq);
        if (t->evo.hops != hops)
            log_hop(t);
        int rc = n ? queue_builds(t, cand, n, q, &nq, 1, 1) : 0;
        if (rc != 0 || (nq && (nq == BATCH || !n))) {
            rc = run_queued(t, tr, ref, q, nq, 1, rc);
            nq = 0;
        }
        if (rc != 0) {
            drk_eng_aheads_clear();
            return;
        }
        if (!n && !nq)
            break;
    }
    drk_eng_aheads_clear();
    drk_evo_decision d = drk_evolution_end_round(&t->evo);
    t->rounds++;
    t->turn_rounds++;
    if (d.serve) {
        char text[96];
        uint32_t id = drk_variant_id(&drk_space_ptx, &d.variant);
        const struct built *b = drk_eng_built_of(t, id);
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: the search chooses %s, %.3fx over %u trials (proven on %u "
                               "of %d launches)%s",
                t->rec->name, t->captures, drk_variant_text(&drk_space_ptx, &d.variant, text, sizeof text),
                d.stats.median, drk_evolution_trials_of(&t->evo, &d.variant), b ? b->proven : 0, DRK_PROOF_LAUNCHES,
                d.state == DRK_EVO_SETTLED ? "; settled" : "");
        /* The choice proven on this capture too, if the round did not
         * (chosen unmeasured, or its build given up to a later one of the
         * round: built again, from the cache), then on the kept ones. */
        if (drk_eng_wants_proof(t, b)) {
            drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: the search's choice, %s, proven on it", t->rec->name,
                    t->captures, b ? "not measured by the round" : "its build given up in the round, built again");
            if (try_batch(t, tr, ref, &d.variant, 1, 0) != 0)
                return;
            b = drk_eng_built_of(t, id);
            if (!b || !proven_at(b, t->captures))
                return; /* rejected, or not built: the round's choice is void, what serves stays */
        }
        if (drk_eng_prove_kept(t, &d.variant) != 0)
            return; /* ended, or its choice rejected on a kept launch */
    } else {
        drk_log(DRK_LOG_DEBUG, "evolve: %.80s: capture %u: the search trusts no variant yet%s", t->rec->name,
                t->captures, d.state == DRK_EVO_SETTLED ? "; settled" : "");
    }
    note_choice(t, &d);
    drk_eng_publish(t, &d);
    /* Settled once its choice was proven (it serves, or cannot: then what
     * serves stays). */
    const struct built *chosen = d.serve ? drk_eng_built_of(t, drk_variant_id(&drk_space_ptx, &d.variant)) : NULL;
    if (d.state == DRK_EVO_SETTLED &&
        (!d.serve || (t->served && chosen && chosen->proven >= DRK_PROOF_LAUNCHES))) {
        if (!t->stored) {
            /* What serves, proven on enough launches: the decision's
             * variant, or the one kept while that was proven (publish). */
            drk_kernel_features f;
            drk_eng_features_of(t, &f);
            drk_predictor_learn(&drk_eng_predictor, (uint64_t)(uintptr_t)t->rec, t->cls, &f,
                                t->served ? &t->served_v : NULL, t->served ? t->speedup : 1.0);
            drk_variant none = {{0}};
            drk_eng_totals.cache_stored += drk_eng_result_put(t, t->served ? &t->served_v : &none,
                                                              t->served ? drk_eng_best_speedup(t) : 1.0, 0) == 0;
            t->stored = 1;
        }
        char why[96];
        snprintf(why, sizeof why, "settled after %u rounds", t->rounds);
        if (t->served)
            drk_eng_rest(t, why);
        else
            drk_eng_end_target(t, DRK_TARGET_SETTLED, "%s", why);
    }
}
