/* The bitwise proof driven as the engine drives it (evolve/engine_round.c's
 * run_batch over evolve/trial.c), on random kernels, launches and batches,
 * both ways: whole copies before every run, and runs restored in part
 * (drk_proof_work). Each seed is a kernel -- pure output, in place,
 * accumulating, or writing only where its input says, over 2 or 3
 * allocations; now and then one that starts to differ from itself after
 * some runs -- with six candidates: one right, the others each with one
 * fault (a write skipped, a wrong value, a write outside what the original
 * writes, its input written, wrong in one run only, wrong in every other
 * run). Five launches of new inputs (some already holding part of the
 * answer), each a capture: the reference queued from the launch before's
 * (blind on the first), the candidates in batches of up to four, timed or
 * not, all runs at once or the further runs after a second wait, the
 * timed runs' checks sometimes running out. What must hold, at every
 * wait:
 *  - every run of set 2 started from S (with poison where the protocol
 *    put it), unless the wait is tainted (the engine then makes the batch
 *    again from whole copies);
 *  - no candidate whose output on this launch's S differs from the
 *    original's is ever found equal;
 *  - a right candidate is never rejected (the original deterministic);
 *  - restoring in part, when every run was checked and the reference's
 *    own condition held, the first run to end other than O1 is the one the
 *    wait names: the original's (nondeterministic) or that candidate's
 *    (drk_proof_work's differed), so a candidate wrong in one timed run
 *    only is rejected at that wait. */
#include "tests/unit/proof_host.h"

#include <stdlib.h>

#include "tests/unit/check.h"

#define SEEDS 10000
#define CANDS 6
#define CAPTURES 5
#define PAIRS 4

enum { RK_PURE, RK_INPLACE, RK_ACCUM, RK_DATADEP, RK_KINDS };
enum { RF_NONE, RF_SKIP, RF_WRONG, RF_OUTSIDE, RF_INPUT, RF_FLAKY, RF_NONDET, RF_FAULTS };

typedef struct rspec {
    int kind, fault;
    unsigned in, out;       /* allocations (the same one in place) */
    uint16_t mask;          /* the words it writes (RK_DATADEP: where its input is odd, of these) */
    uint32_t salt;
    unsigned j, alloc, k;   /* the fault's word, allocation (RF_OUTSIDE) and run (RF_FLAKY) */
    unsigned runs;
    unsigned racy_from;     /* the original: from this run on it differs from run to run (0: never) */
} rspec;

static rspec orig, cand[CANDS];
static rspec *running; /* the candidate h->variant runs */

static uint64_t state;
static uint32_t rnd(void)
{
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return (uint32_t)(state >> 16);
}
static unsigned below(unsigned n) { return rnd() % n; }

static uint32_t rg(const rspec *s, uint32_t x) { return x * 2654435761u + s->salt; }

static void rapply(const rspec *s, uint8_t *const *m, int skip)
{
    uint32_t *in = u32(m[s->in]), *out = u32(m[s->out]);
    for (unsigned i = 0; i < ELEMS; i++) {
        if (!(s->mask >> i & 1) || (int)i == skip)
            continue;
        switch (s->kind) {
        case RK_PURE: out[i] = rg(s, in[i]); break;
        case RK_INPLACE: out[i] = rg(s, out[i]); break;
        case RK_ACCUM: out[i] += in[i]; break;
        default:
            if (in[i] & 1)
                out[i] = rg(s, in[i]);
        }
    }
}

/* A candidate's run: its fault, the run-dependent ones only when `counted`. */
static void cand_run(const rspec *s, uint8_t *const *m, int counted)
{
    rapply(s, m, s->fault == RF_SKIP ? (int)s->j : -1);
    uint32_t *out = u32(m[s->out]);
    switch (s->fault) {
    case RF_WRONG: out[s->j] ^= 0x100; break;
    case RF_OUTSIDE: u32(m[s->alloc])[s->j] ^= 0x100; break;
    case RF_INPUT: u32(m[s->in])[s->j] ^= 1; break;
    case RF_FLAKY:
        if (counted && s->runs == s->k)
            out[s->j] ^= 0x100;
        break;
    case RF_NONDET:
        if (counted && s->runs % 2 == 0)
            out[s->j] ^= 0x100;
        break;
    default: break;
    }
}

static void k_original(host *h, uint8_t *const *m)
{
    (void)h;
    orig.runs++;
    rapply(&orig, m, -1);
    if (orig.racy_from && orig.runs >= orig.racy_from)
        u32(m[orig.out])[__builtin_ctz(orig.mask)] += orig.runs % 2 + 1;
}

static void k_variant(host *h, uint8_t *const *m)
{
    (void)h;
    running->runs++;
    cand_run(running, m, 1);
}

/* Whether candidate s, faults that depend on the run left out, computes
 * other than the original (its deterministic part) from S. */
static int wrong_on(const host *h, const rspec *s)
{
    static uint8_t a[MAXA][ELEMS * 4], b[MAXA][ELEMS * 4];
    uint8_t *ma[MAXA], *mb[MAXA];
    for (unsigned i = 0; i < MAXA; i++) {
        memcpy(a[i], h->mem[DRK_SET_SNAPSHOT][i], sizeof a[i]);
        memcpy(b[i], h->mem[DRK_SET_SNAPSHOT][i], sizeof b[i]);
        ma[i] = a[i], mb[i] = b[i];
    }
    rapply(&orig, ma, -1);
    cand_run(s, mb, 0);
    return memcmp(a, b, sizeof a) != 0;
}

static unsigned bit_in(uint16_t mask)
{
    unsigned n = (unsigned)__builtin_popcount(mask), pick = below(n);
    for (unsigned i = 0; i < ELEMS; i++)
        if (mask >> i & 1 && pick-- == 0)
            return i;
    return 0;
}

static void make_kernel(unsigned n)
{
    memset(&orig, 0, sizeof orig);
    orig.kind = (int)below(RK_KINDS);
    orig.in = 0;
    orig.out = orig.kind == RK_INPLACE ? 0 : 1 + below(n - 1);
    orig.mask = 0xffff;
    if (below(3)) {
        uint32_t some = rnd(); /* and one word at least */
        orig.mask = (uint16_t)(some | 1u << below(16));
    }
    orig.salt = rnd();
    orig.racy_from = below(8) == 0 ? 4 + below(24) : 0;
    for (unsigned c = 0; c < CANDS; c++) {
        rspec *s = &cand[c];
        *s = orig;
        s->racy_from = 0;
        s->fault = c == 0 ? RF_NONE : (int)(1 + below(RF_FAULTS - 1));
        s->j = bit_in(orig.mask);
        if (s->fault == RF_OUTSIDE) {
            if (orig.mask != 0xffff) {
                s->alloc = orig.out;
                do
                    s->j = below(ELEMS);
                while (orig.mask >> s->j & 1);
            } else if (n == 3 && orig.kind != RK_INPLACE) {
                s->alloc = 3 - orig.out; /* the allocation neither read nor written */
                s->j = below(ELEMS);
            } else {
                s->fault = RF_WRONG;
            }
        }
        if (s->fault == RF_INPUT) {
            if (orig.in == orig.out)
                s->fault = RF_WRONG;
            else
                s->j = below(ELEMS);
        }
        s->k = 1 + below(8);
    }
}

/* A launch's S: random words; where the kernel writes, now and then the
 * answer already (an earlier launch's), so only poison shows a skip. */
static void make_launch(host *h, unsigned n, int mode, struct track *tk)
{
    memset(h, 0, sizeof *h);
    memset(tk, 0, sizeof *tk);
    h->n = n;
    h->original = k_original, h->variant = k_variant;
    h->track = tk;
    drk_proof_work_init(&h->work, mode);
    for (unsigned a = 0; a < n; a++) {
        h->size[a] = ELEMS * 4;
        for (unsigned i = 0; i < ELEMS; i++)
            u32(h->mem[DRK_SET_SNAPSHOT][a])[i] = below(4) ? rnd() : below(4);
    }
    if (orig.kind == RK_PURE && below(2)) {
        uint32_t *in = u32(h->mem[DRK_SET_SNAPSHOT][orig.in]), *out = u32(h->mem[DRK_SET_SNAPSHOT][orig.out]);
        for (unsigned i = 0; i < ELEMS; i++)
            if (below(3) == 0)
                out[i] = rg(&orig, in[i]);
    }
}

static struct counts {
    unsigned waits, tainted, redone, unpoisoned, equal, rejected, refused, named, flaky_named;
} counts[2];

/* The state of one capture's trials, as drk_trial holds it. */
typedef struct cap {
    host *h;
    drk_proof_ops ops;
    drk_proof_ref *ref;
    unsigned slot;           /* the next check's compares */
    unsigned checks, checks_max;
    int skipped;             /* a timed run went unchecked in this wait (its slots ran out) */
    int check_whole;         /* after a tainted wait: whole copies, timed runs still checked (drk_trial's) */
    int mode;
} cap;

/* A timed run on the work set, as drk_trial_queue_timed makes it. */
static void timed_run(cap *c, int variant)
{
    host *h = c->h;
    CHECK(drk_proof_fresh(&c->ops, c->ref, DRK_SET_WORK, c->ref->poisoned) == 0);
    CHECK(op_run(h, DRK_SET_WORK, variant) == 0);
    drk_proof_work_ran(&c->ops, c->ref, variant);
    if (!h->work.spans && !c->check_whole)
        return;
    if (c->checks >= c->checks_max) {
        c->skipped = 1;
        return;
    }
    c->checks++;
    CHECK(drk_proof_check_work(&c->ops, c->ref, c->slot) == 0);
    c->slot += h->n;
}

/* The queued reference's own condition: this launch wrote no allocation
 * the launch before left alone. */
static int ref_condition_held(const host *h, const drk_proof_ref *prev)
{
    if (!prev)
        return 1;
    for (unsigned a = 0; a < h->n; a++)
        if (prev->seen_first[a] == UINT64_MAX &&
            memcmp(h->mem[DRK_SET_REFERENCE][a], h->mem[DRK_SET_SNAPSHOT][a], h->size[a]) != 0)
            return 0;
    return 1;
}

/* After a wait: the invariants on what its runs started from and which one
 * it names. 1 when the target ended (the original found nondeterministic). */
static int after_wait(cap *c, int refheld, const int *idx)
{
    host *h = c->h;
    struct counts *k = &counts[c->mode];
    k->waits++;
    k->tainted += h->work.tainted;
    if (h->track->was_unclean && !h->work.tainted) {
        fprintf(stderr, "  a run started from bytes that were neither S nor poison in a wait not tainted\n");
        CHECK(0);
    }
    int fw = h->track->was_first_wrong;
    if (c->mode && fw && refheld && !c->skipped && !h->track->was_ambiguous && (h->work.spans || c->check_whole)) {
        if (fw == 1) {
            CHECK(h->work.nondeterministic);
        } else {
            CHECK(h->work.differed == (unsigned)(fw - 1));
            k->named++;
            k->flaky_named += cand[idx[fw - 2]].fault == RF_FLAKY || cand[idx[fw - 2]].fault == RF_NONDET;
        }
    }
    if (h->work.nondeterministic) {
        CHECK(orig.racy_from != 0); /* only an original that differs from itself */
        k->refused++;
        return 1;
    }
    return 0;
}

static int alive[CANDS];

static void reject(const cap *c, int ci)
{
    alive[ci] = 0;
    counts[c->mode].rejected++;
    if (cand[ci].fault == RF_NONE && !orig.racy_from) {
        fprintf(stderr, "  the right candidate rejected (kind %d)\n", orig.kind);
        CHECK(0);
    }
}

/* One batch, as run_batch: 0 done, 1 made again, -1 the target ended. */
static int batch(cap *c, const drk_proof_ref *prev, int *queue_ref, int *idx, unsigned *nqp, int timed, int eager)
{
    host *h = c->h;
    struct counts *cn = &counts[c->mode];
    unsigned nq = *nqp, n = h->n;
    drk_proof_result pr[CANDS];
    h->work.tag = 0, h->track->who = 0;
    const drk_proof_ref *queued_prev = NULL;
    if (*queue_ref) {
        *queue_ref = 0;
        queued_prev = prev;
        if (drk_proof_reference_queue(&c->ops, prev, c->ref) != 0) {
            drk_proof_reference(&c->ops, c->ref);
            queued_prev = NULL;
        }
        if (c->ref->state != DRK_PROOF_EQUAL) {
            CHECK(c->ref->state == DRK_PROOF_NONDETERMINISTIC && orig.racy_from);
            cn->refused++;
            return -1;
        }
    }
    unsigned base = c->ref->queued;
    c->slot = base + nq * n, c->checks = 0, c->skipped = 0;
    unsigned norig = 0;
    int need_orig = timed;
    if (timed)
        timed_run(c, 0); /* untimed, after the switch */
    for (unsigned k = 0; k < nq; k++) {
        h->work.tag = 0, h->track->who = 0;
        if (need_orig && norig < PAIRS)
            timed_run(c, 0), norig++;
        running = &cand[idx[k]];
        h->work.tag = k + 1, h->track->who = (int)k + 1;
        CHECK(drk_proof_variant_queue(&c->ops, c->ref, base + k * n, &pr[k]) == 0);
        if (timed && eager)
            for (unsigned r = 0; r < PAIRS - 1; r++)
                timed_run(c, 1);
    }
    h->work.tag = 0, h->track->who = 0;
    while (need_orig && norig < PAIRS)
        timed_run(c, 0), norig++;
    static drk_diff d[DRK_PROOF_SLOTS];
    CHECK(c->ops.wait(c->ops.self, d, base + nq * n) == 0);
    int stands = base ? drk_proof_reference_settle(&c->ops, c->ref, d) : 1;
    if (stands < 0) {
        CHECK(c->ref->state == DRK_PROOF_NONDETERMINISTIC && orig.racy_from);
        cn->refused++;
        return -1;
    }
    if (!stands) {
        cn->unpoisoned++;
        return 1;
    }
    if (after_wait(c, ref_condition_held(h, queued_prev), idx))
        return -1;
    int odd = -1;
    if (h->work.differed && h->work.differed <= nq) {
        odd = (int)h->work.differed - 1;
        reject(c, idx[odd]);
    }
    if (h->work.tainted) {
        h->work.spans = 0, c->check_whole = 1; /* whole_copies */
        cn->redone++;
        if (odd >= 0) {
            int t = idx[odd];
            idx[odd] = idx[nq - 1], idx[nq - 1] = t;
            (*nqp)--;
        }
        return 1;
    }
    int more[CANDS] = {0}, any = 0;
    for (unsigned k = 0; k < nq; k++) {
        if ((int)k == odd)
            continue;
        const rspec *s = &cand[idx[k]];
        pr[k] = drk_proof_variant_check(&c->ops, c->ref, d + base + k * n);
        CHECK(pr[k].verdict == DRK_PROOF_EQUAL || pr[k].verdict == DRK_PROOF_DIFFERS);
        if (pr[k].verdict == DRK_PROOF_EQUAL) {
            if (wrong_on(h, s)) {
                fprintf(stderr, "  kind %d fault %d (word %u, allocation %u) found equal, but wrong on S\n", orig.kind,
                        s->fault, s->j, s->alloc);
                CHECK(0);
            }
            cn->equal++;
            more[k] = timed && !eager && below(2);
            any |= more[k];
        } else {
            reject(c, idx[k]);
        }
    }
    if (any) {
        /* The further runs of those that look faster, after a second wait. */
        c->slot = 0, c->checks = 0, c->skipped = 0;
        h->work.tag = 0, h->track->who = 0;
        timed_run(c, 0);
        for (unsigned k = 0; k < nq; k++)
            if (more[k]) {
                running = &cand[idx[k]];
                h->work.tag = k + 1, h->track->who = (int)k + 1;
                for (unsigned r = 0; r < PAIRS - 1; r++)
                    timed_run(c, 1);
            }
        h->work.tag = 0;
        CHECK(c->ops.wait(c->ops.self, d, 0) == 0);
        if (after_wait(c, 1, idx))
            return -1;
        if (h->work.differed && h->work.differed <= nq && alive[idx[h->work.differed - 1]])
            reject(c, idx[h->work.differed - 1]);
        if (h->work.tainted)
            h->work.spans = 0, c->check_whole = 1;
    }
    return 0;
}

static void scenario(unsigned seed, int mode)
{
    state = (uint64_t)seed * 0x9e3779b97f4a7c15ull + 0x1234567ull;
    unsigned n = 2 + below(2);
    make_kernel(n);
    for (unsigned ci = 0; ci < CANDS; ci++)
        alive[ci] = 1;
    static host h;
    struct track tk;
    drk_proof_ref prev, ref;
    int have_prev = 0;
    for (unsigned capture = 0; capture < CAPTURES; capture++) {
        make_launch(&h, n, mode, &tk);
        cap c = {.h = &h, .ref = &ref, .mode = mode, .checks_max = below(4) ? 64 : below(4)};
        c.ops = (drk_proof_ops){&h, n, op_size, op_copy, op_poison, op_run, op_compare, op_wait, op_copy_part, &h.work};
        memset(&ref, 0, sizeof ref);
        int queue_ref = 1;
        const drk_proof_ref *p = have_prev ? &prev : NULL;
        /* The live candidates in a random order, in batches of up to four. */
        int order[CANDS], live = 0;
        for (unsigned ci = 0; ci < CANDS; ci++)
            if (alive[ci])
                order[live++] = (int)ci;
        for (int i = live - 1; i > 0; i--) {
            int j = (int)below((unsigned)i + 1), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        int ended = 0;
        for (int from = 0; from < live && !ended;) {
            unsigned nq = 1 + below(4);
            if (nq > (unsigned)(live - from))
                nq = (unsigned)(live - from);
            int idx[CANDS];
            memcpy(idx, order + from, nq * sizeof *idx);
            from += (int)nq;
            int timed = below(4) != 0, eager = below(2);
            unsigned left = nq;
            int rc;
            while ((rc = batch(&c, p, &queue_ref, idx, &left, timed, eager)) == 1 && left)
                ;
            ended = rc < 0;
        }
        if (ended)
            return;
        if (!live) {
            /* Nothing left to prove: the reference alone, as a capture's. */
            int idx[1];
            unsigned zero = 0;
            if (batch(&c, p, &queue_ref, idx, &zero, 1, 0) < 0)
                return;
        }
        if (ref.state == DRK_PROOF_EQUAL && !ref.queued && ref.runs) {
            prev = ref;
            have_prev = 1;
        }
    }
}

/* test_proof_random [SEEDS [SEED]]: SEED alone, restoring in part (to
 * look into one). */
int main(int argc, char **argv)
{
    unsigned seeds = argc > 1 ? (unsigned)atoi(argv[1]) : SEEDS;
    if (argc > 2) {
        scenario((unsigned)atoi(argv[2]), 1);
        return CHECK_DONE();
    }
    for (int mode = 0; mode < 2; mode++)
        for (unsigned s = 1; s <= seeds; s++) {
            int before = check_failures;
            scenario(s, mode);
            if (check_failures != before)
                fprintf(stderr, "  (seed %u, %s)\n", s, mode ? "restored in part" : "whole copies");
        }
    static const char *const names[2] = {"whole copies", "restored in part"};
    for (int mode = 0; mode < 2; mode++) {
        const struct counts *k = &counts[mode];
        printf("%s: %u seeds, %u waits (%u tainted, %u batches made again, %u unpoisoned), %u proofs equal, %u "
               "candidates rejected, %u targets refused",
               names[mode], seeds, k->waits, k->tainted, k->redone, k->unpoisoned, k->equal, k->rejected, k->refused);
        if (mode)
            printf("; %u waits named the first run to differ (%u of a candidate wrong in some runs only)", k->named,
                   k->flaky_named);
        printf("\n");
    }
    /* Each way met what the test is for. */
    CHECK(counts[0].equal > 1000 && counts[0].rejected > 1000 && counts[0].refused > 0);
    CHECK(counts[1].tainted > 100 && counts[1].named > 100 && counts[1].flaky_named > 20);
    return CHECK_DONE();
}
