#include "evolve/proof.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NONE UINT64_MAX

const char *drk_proof_verdict_name(drk_proof_verdict v)
{
    switch (v) {
    case DRK_PROOF_EQUAL:
        return "equal";
    case DRK_PROOF_DIFFERS:
        return "differs";
    case DRK_PROOF_NONDETERMINISTIC:
        return "nondeterministic";
    case DRK_PROOF_ERROR:
        return "error";
    }
    return "unknown";
}

/* A line of `why`: cut at the field's end (only for offsets of many digits). */
static void say(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

/* "allocation 1 (12 bytes, offsets 0..44)": where a compare found bytes
 * differing, in the words of every report line below. */
static void where(char *out, size_t cap, unsigned alloc, const drk_diff *d)
{
    snprintf(out, cap, "allocation %u (%" PRIu64 " byte%s, offsets %" PRIu64 "..%" PRIu64 ")", alloc, d->ndiff,
             d->ndiff == 1 ? "" : "s", d->first, d->last);
}

/* A compare's answer, checked before it is believed: a span outside the
 * allocation would send the poison past drk's own buffer. */
static int believable(const drk_proof_ops *ops, unsigned alloc, const drk_diff *d)
{
    if (d->ndiff == 0)
        return d->first == NONE && d->last == NONE;
    size_t size = ops->size(ops->self, alloc);
    return d->first <= d->last && d->last < size && d->ndiff <= d->last - d->first + 1;
}

/* Queues allocation i of a against b into slot base + i, every i. */
static int compare_all(const drk_proof_ops *ops, unsigned a, unsigned b, unsigned base)
{
    for (unsigned i = 0; i < ops->n; i++)
        if (ops->compare(ops->self, a, b, i, base + i) != 0)
            return -1;
    return 0;
}

/* Waits for `nslots` results, each believable (slot k is allocation k % n). */
static int wait_all(const drk_proof_ops *ops, drk_diff *out, unsigned nslots)
{
    if (ops->wait(ops->self, out, nslots) != 0)
        return -1;
    for (unsigned k = 0; k < nslots; k++)
        if (!believable(ops, k % ops->n, &out[k]))
            return -1;
    return 0;
}

/* ---- the work set's state (drk_proof_work) ---- */

static uint32_t all_of(unsigned n) { return n >= 32 ? 0xffffffffu : (1u << n) - 1; }

/* The allocations ref's W covers (its spans); all while W is unknown. */
static uint32_t written_mask(const drk_proof_ref *ref, unsigned n)
{
    if (ref->blind)
        return all_of(n);
    uint32_t m = 0;
    for (unsigned i = 0; i < n && i < 32; i++)
        if (ref->first[i] != NONE)
            m |= 1u << i;
    return m;
}

void drk_proof_work_init(drk_proof_work *w, int spans)
{
    memset(w, 0, sizeof *w);
    w->spans = spans;
}

/* Slots base + i (bit i of mask) must read equal for what follows to
 * stand: its place among the conditions, or -1 (none needed, or no room). */
static int work_cond(drk_proof_work *w, unsigned base, uint32_t mask)
{
    if (!w || !mask)
        return -1;
    if (w->nconds == DRK_PROOF_CONDS) {
        w->known = 0; /* no room to hold it: nothing may rest on it */
        w->lost = 1;  /* nor say which failed first */
        return -1;
    }
    w->cond[w->nconds].base = base, w->cond[w->nconds].mask = mask;
    w->cond[w->nconds].relied = w->cond[w->nconds].original = 0;
    w->cond[w->nconds].tag = w->tag;
    return (int)w->nconds++;
}

void drk_proof_work_waited(drk_proof_work *w, const unsigned char *equal, unsigned nslots)
{
    w->tainted = w->failed = w->nondeterministic = 0;
    w->differed = 0;
    for (unsigned c = 0; c < w->nconds; c++) {
        int holds = 1;
        for (unsigned i = 0; i < 32; i++)
            if (w->cond[c].mask >> i & 1) {
                unsigned k = w->cond[c].base + i;
                holds &= k < nslots && equal[k];
            }
        if (!holds) {
            /* The first false condition's run had S for its input: what
             * it checked differs on S itself. */
            int vouched = !w->failed && !w->lost;
            w->known = 0;
            w->nondeterministic |= vouched && w->cond[c].original;
            if (vouched && !w->cond[c].original)
                w->differed = w->cond[c].tag;
            w->failed = 1;
            w->tainted |= w->cond[c].relied;
        }
    }
    w->nconds = w->chain = 0;
    w->lost = 0;
}

void drk_proof_work_ran(const drk_proof_ops *ops, const drk_proof_ref *ref, int variant)
{
    drk_proof_work *w = ops->work;
    if (!w)
        return;
    w->ran_variant = variant;
    if (variant)
        w->pending = 1;
    else
        w->dirty |= written_mask(ref, ops->n); /* no more: the conditions on ref's W say so */
}

/* A run on `set`, and what it leaves in the work set. */
static int run_on(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned set, int variant)
{
    if (ops->run(ops->self, set, variant) != 0)
        return -1;
    if (set == DRK_SET_WORK)
        drk_proof_work_ran(ops, ref, variant);
    return 0;
}

/* The work set was compared with O1 into slots [base, base + n): equal,
 * it is O1, which differs from S only in ref's W (a condition). Its
 * place among the conditions, or -1. */
static int work_compared(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned base)
{
    drk_proof_work *w = ops->work;
    if (!w)
        return -1;
    int c = work_cond(w, base, all_of(ops->n));
    w->pending = 0;
    w->dirty |= written_mask(ref, ops->n);
    return c;
}

/* The work set := S, with W poisoned where asked, restoring only the
 * allocations that may differ from S. Each of those is restored whole:
 * copied outside its span and poisoned within it, or copied. */
static int restore_spans(const drk_proof_ops *ops, const drk_proof_ref *ref, int poison)
{
    drk_proof_work *w = ops->work;
    uint32_t restore = w->dirty | written_mask(ref, ops->n), poisoned = 0;
    w->known = 0; /* until done */
    for (unsigned i = 0; i < ops->n; i++) {
        if (!(restore >> i & 1))
            continue;
        size_t size = ops->size(ops->self, i);
        if (!poison || ref->first[i] == NONE) {
            if (ops->copy_part(ops->self, DRK_SET_WORK, DRK_SET_SNAPSHOT, i, 0, size) != 0)
                return -1;
            continue;
        }
        size_t off = (size_t)ref->first[i], len = (size_t)(ref->last[i] - ref->first[i] + 1);
        if ((off && ops->copy_part(ops->self, DRK_SET_WORK, DRK_SET_SNAPSHOT, i, 0, off) != 0) ||
            (off + len < size &&
             ops->copy_part(ops->self, DRK_SET_WORK, DRK_SET_SNAPSHOT, i, off + len, size - off - len) != 0) ||
            ops->poison(ops->self, DRK_SET_WORK, i, off, len, DRK_PROOF_POISON) != 0)
            return -1;
        poisoned |= 1u << i;
    }
    for (unsigned c = w->chain; c < w->nconds; c++)
        w->cond[c].relied = 1;
    w->dirty = poisoned;
    w->known = 1;
    return 0;
}

int drk_proof_fresh(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned set, int poison)
{
    drk_proof_work *w = set == DRK_SET_WORK ? ops->work : NULL;
    if (w && w->spans && w->known && !w->pending && ref && ops->copy_part && ops->n <= 32)
        return restore_spans(ops, ref, poison);
    if (w)
        w->known = 0; /* until done */
    if (ops->copy(ops->self, set, DRK_SET_SNAPSHOT) != 0)
        return -1;
    uint32_t poisoned = 0;
    for (unsigned i = 0; poison && ref && i < ops->n; i++) {
        if (ref->first[i] == NONE)
            continue;
        if (ops->poison(ops->self, set, i, (size_t)ref->first[i], (size_t)(ref->last[i] - ref->first[i] + 1),
                        DRK_PROOF_POISON) != 0)
            return -1;
        poisoned |= i < 32 ? 1u << i : 0;
    }
    if (w) {
        /* A fresh chain: what follows rests on no condition queued before. */
        w->known = 1, w->pending = 0, w->dirty = poisoned, w->chain = w->nconds;
    }
    return 0;
}

int drk_proof_check_work(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned base)
{
    if (compare_all(ops, DRK_SET_WORK, DRK_SET_REFERENCE, base) != 0)
        return -1;
    int c = work_compared(ops, ref, base);
    /* A run of the original as prepared for a timed run (poisoned only as
     * O3 confirmed, or confirms in this wait, before it): unlike O3 it may
     * not differ from O1 but by differing from itself. */
    if (c >= 0 && !ops->work->ran_variant)
        ops->work->cond[c].original = 1;
    return 0;
}

static void ref_error(drk_proof_ref *ref, const char *why)
{
    ref->state = DRK_PROOF_ERROR;
    snprintf(ref->why, sizeof ref->why, "%s", why);
}

static void ref_init(drk_proof_ref *ref, unsigned n)
{
    memset(ref, 0, sizeof *ref);
    for (unsigned i = 0; i < DRK_REACH_MAX; i++)
        ref->first[i] = ref->last[i] = ref->seen_first[i] = ref->seen_last[i] = NONE;
    ref->n = n;
}

/* 1-2 queued: O1 in set 1, O2 in set 2; O1 against O2 (slots 0..n-1) and
 * against S (slots n..2n-1, W; read only if O1 == O2). */
static int queue_twice(const drk_proof_ops *ops, drk_proof_ref *ref)
{
    if (drk_proof_fresh(ops, ref, DRK_SET_REFERENCE, 0) != 0 || drk_proof_fresh(ops, ref, DRK_SET_WORK, 0) != 0) {
        ref_error(ref, "copying the snapshot failed");
        return -1;
    }
    for (unsigned s = DRK_SET_REFERENCE; s <= DRK_SET_WORK; s++) {
        if (run_on(ops, ref, s, 0) != 0) {
            ref_error(ref, "the original's run failed");
            return -1;
        }
        ref->runs++;
    }
    if (compare_all(ops, DRK_SET_REFERENCE, DRK_SET_WORK, 0) != 0 ||
        compare_all(ops, DRK_SET_REFERENCE, DRK_SET_SNAPSHOT, ops->n) != 0) {
        ref_error(ref, "comparing the original's runs failed");
        return -1;
    }
    return 0;
}

/* 1-2's results: -1 and NONDETERMINISTIC when O1 != O2; else W, as seen. */
static int read_twice(const drk_proof_ops *ops, drk_proof_ref *ref, const drk_diff *d)
{
    unsigned n = ops->n;
    for (unsigned i = 0; i < n; i++)
        if (d[i].ndiff) {
            char at[96];
            where(at, sizeof at, i, &d[i]);
            ref->state = DRK_PROOF_NONDETERMINISTIC;
            say(ref->why, sizeof ref->why, "the original differs from itself in %s: nondeterministic", at);
            return -1;
        }
    for (unsigned i = 0; i < n; i++)
        if (d[n + i].ndiff) {
            ref->seen_first[i] = d[n + i].first, ref->seen_last[i] = d[n + i].last;
            ref->seen_written++;
        }
    return 0;
}

/* 3 queued: O3 on S with W (ref's spans) poisoned, against O1 into slots
 * base..base+n-1. A probe's O3 (ref->probe) only learns whether poison
 * may stand: no run rests on it, and what it left in the work set is
 * unknown. */
static int queue_poisoned(const drk_proof_ops *ops, drk_proof_ref *ref, unsigned base)
{
    if (drk_proof_fresh(ops, ref, DRK_SET_WORK, 1) != 0) {
        ref_error(ref, "poisoning the written bytes failed");
        return -1;
    }
    if (run_on(ops, ref, DRK_SET_WORK, 0) != 0) {
        ref_error(ref, "the original's run on poisoned memory failed");
        return -1;
    }
    ref->runs++;
    if (compare_all(ops, DRK_SET_WORK, DRK_SET_REFERENCE, base) != 0) {
        ref_error(ref, "comparing the original's run on poisoned memory failed");
        return -1;
    }
    /* O3 == O1 is what the runs after it rest on (poison standing in). */
    if (!ref->probe)
        work_compared(ops, ref, base);
    else if (ops->work)
        ops->work->known = 0;
    return 0;
}

static int all_equal(const drk_diff *d, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (d[i].ndiff)
            return 0;
    return 1;
}

void drk_proof_reference(const drk_proof_ops *ops, drk_proof_ref *ref)
{
    ref_init(ref, ops->n);
    if (ops->n > DRK_REACH_MAX) {
        ref_error(ref, "more allocations than a proof holds");
        return;
    }
    unsigned n = ops->n;
    drk_diff d[2 * DRK_REACH_MAX];
    /* 1-2, one wait. */
    if (queue_twice(ops, ref) != 0)
        return;
    if (wait_all(ops, d, 2 * n) != 0) {
        ref_error(ref, "comparing the original's runs failed");
        return;
    }
    if (read_twice(ops, ref, d) != 0)
        return;
    memcpy(ref->first, ref->seen_first, sizeof ref->first);
    memcpy(ref->last, ref->seen_last, sizeof ref->last);
    ref->written = ref->seen_written;
    if (ops->work)
        ops->work->dirty |= written_mask(ref, n); /* O2's writes, now known */
    /* 3. O3 on S with W poisoned, one wait. Nothing written: nothing to
     * poison, and S unpoisoned is what the variant runs on anyway. */
    if (ref->written) {
        if (queue_poisoned(ops, ref, 0) != 0)
            return;
        if (wait_all(ops, d, n) != 0) {
            ref_error(ref, "comparing the original's run on poisoned memory failed");
            return;
        }
        /* O3 == O1: W's old contents are never read, so poison may stand
         * in for them and shows any write a variant skips. */
        ref->poisoned = all_equal(d, n);
        ref->reads_written = !ref->poisoned;
        ref->read_known = 1;
    }
    ref->state = DRK_PROOF_EQUAL;
}

int drk_proof_reference_queue(const drk_proof_ops *ops, const drk_proof_ref *prev, drk_proof_ref *ref)
{
    unsigned n = ops->n;
    if (!prev && n <= DRK_REACH_MAX) {
        /* The first launch: W unknown until the wait, so nothing poisoned
         * (the variants' proofs as an in-place kernel's) and no O3 (the
         * next launch probes for it); two waits of its own saved. */
        ref_init(ref, n);
        ref->state = DRK_PROOF_EQUAL;
        ref->blind = 1; /* every run restores every allocation until the wait says what is written */
        if (queue_twice(ops, ref) != 0)
            return 0;
        ref->queued = 2 * n;
        return 0;
    }
    if (!prev || prev->state != DRK_PROOF_EQUAL || prev->queued || prev->n != n || n > DRK_REACH_MAX)
        return -1;
    for (unsigned i = 0; i < n; i++)
        if (prev->seen_first[i] != NONE && prev->seen_last[i] >= ops->size(ops->self, i))
            return -1;
    ref_init(ref, n);
    ref->reads_written = prev->reads_written;
    ref->read_known = prev->read_known;
    /* The launch before's W, poisoned (and step 3 queued to confirm it)
     * unless the original read W then: whether it reads W is the code's,
     * rarely the data's. Never seen either way (the launch before was
     * the first): step 3 as a probe, the variants unpoisoned. */
    memcpy(ref->first, prev->seen_first, sizeof ref->first);
    memcpy(ref->last, prev->seen_last, sizeof ref->last);
    ref->written = prev->seen_written;
    ref->probe = ref->written && !ref->read_known;
    ref->poisoned = ref->written && ref->read_known && !ref->reads_written;
    ref->state = DRK_PROOF_EQUAL; /* until settled: no verdict on it stands before */
    if (queue_twice(ops, ref) != 0)
        return 0;
    /* Every run after rests on this launch writing no allocation the
     * launch before did not: O1 == S there (slots n..2n-1). Relied on at
     * once: what the work set counts as written rests on it even across
     * a whole copy. */
    int c = work_cond(ops->work, n, all_of(n) & ~written_mask(ref, n));
    if (c >= 0 && ops->work->spans)
        ops->work->cond[c].relied = 1;
    if ((ref->poisoned || ref->probe) && queue_poisoned(ops, ref, 2 * n) != 0)
        return 0;
    ref->queued = (ref->poisoned || ref->probe ? 3 : 2) * n;
    return 0;
}

int drk_proof_reference_settle(const drk_proof_ops *ops, drk_proof_ref *ref, const drk_diff *diffs)
{
    unsigned n = ops->n, q = ref->queued;
    ref->queued = 0;
    ref->blind = 0;
    if (ref->state != DRK_PROOF_EQUAL || !q)
        return ref->state == DRK_PROOF_EQUAL ? 1 : -1;
    for (unsigned k = 0; k < q; k++)
        if (!believable(ops, k % n, &diffs[k])) {
            ref_error(ref, "comparing the original's runs failed");
            return -1;
        }
    if (read_twice(ops, ref, diffs) != 0)
        return -1;
    if (ref->probe) {
        /* Learnt for the launches after; the variants ran unpoisoned. */
        ref->probe = 0;
        ref->read_known = 1;
        ref->reads_written = !all_equal(diffs + 2 * n, n);
        memcpy(ref->first, ref->seen_first, sizeof ref->first);
        memcpy(ref->last, ref->seen_last, sizeof ref->last);
        ref->written = ref->seen_written;
        return 1;
    }
    if (q == 3 * n && all_equal(diffs + 2 * n, n))
        return 1; /* poisoned as the launch before saw W, and that stood */
    /* Unpoisoned: W as seen, for the messages; O3 != O1 means the
     * original reads W, and poison never stands in for it again. */
    int redo = ref->poisoned;
    ref->reads_written |= redo;
    ref->read_known |= redo;
    ref->poisoned = 0;
    memcpy(ref->first, ref->seen_first, sizeof ref->first);
    memcpy(ref->last, ref->seen_last, sizeof ref->last);
    ref->written = ref->seen_written;
    return redo ? 0 : 1;
}

static drk_proof_result result_error(const char *why)
{
    drk_proof_result r = {.verdict = DRK_PROOF_ERROR, .diff = {0, NONE, NONE}};
    snprintf(r.why, sizeof r.why, "%s", why);
    return r;
}

int drk_proof_variant_queue(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned base,
                            drk_proof_result *r)
{
    if (ref->state != DRK_PROOF_EQUAL) {
        /* No reference, no verdict but the reference's own. */
        *r = (drk_proof_result){.verdict = ref->state == DRK_PROOF_NONDETERMINISTIC ? DRK_PROOF_NONDETERMINISTIC
                                                                                    : DRK_PROOF_ERROR,
                                .diff = {0, NONE, NONE}};
        snprintf(r->why, sizeof r->why, "%s", ref->why[0] ? ref->why : "no reference for the proof");
        return -1;
    }
    if (ops->n > DRK_REACH_MAX || base > DRK_PROOF_SLOTS - ops->n) {
        *r = result_error("more allocations than a proof holds");
        return -1;
    }
    if (drk_proof_fresh(ops, ref, DRK_SET_WORK, ref->poisoned) != 0) {
        *r = result_error(ref->poisoned ? "poisoning the written bytes failed" : "copying the snapshot failed");
        return -1;
    }
    if (run_on(ops, ref, DRK_SET_WORK, 1) != 0) {
        *r = result_error("the variant's run failed");
        return -1;
    }
    if (drk_proof_check_work(ops, ref, base) != 0) {
        *r = result_error("comparing the variant's output with the original's failed");
        return -1;
    }
    return 0;
}

drk_proof_result drk_proof_variant_check(const drk_proof_ops *ops, const drk_proof_ref *ref, const drk_diff *diffs)
{
    for (unsigned i = 0; i < ops->n; i++) {
        const drk_diff *d = &diffs[i];
        if (!believable(ops, i, d))
            return result_error("comparing the variant's output with the original's failed");
        if (!d->ndiff)
            continue;
        drk_proof_result r = {.verdict = DRK_PROOF_DIFFERS, .alloc = i, .diff = *d};
        char at[96];
        where(at, sizeof at, i, d);
        /* Whether the variant touched bytes the original leaves alone, or
         * got the original's own writes wrong (or skipped them). */
        int inside = ref->first[i] != NONE && d->first >= ref->first[i] && d->last <= ref->last[i];
        say(r.why, sizeof r.why, "the variant differs from the original in %s, %s", at,
            inside ? "within the span of bytes the original changed" : "beyond the span of bytes the original changed");
        return r;
    }
    return (drk_proof_result){.verdict = DRK_PROOF_EQUAL, .diff = {0, NONE, NONE}};
}

drk_proof_result drk_proof_variant(const drk_proof_ops *ops, const drk_proof_ref *ref)
{
    drk_proof_result r;
    if (drk_proof_variant_queue(ops, ref, 0, &r) != 0)
        return r;
    drk_diff d[DRK_REACH_MAX];
    if (ops->wait(ops->self, d, ops->n) != 0)
        return result_error("comparing the variant's output with the original's failed");
    return drk_proof_variant_check(ops, ref, d);
}
