/* The bitwise proof (evolve/proof.c) on the CPU: buffer sets in host
 * memory and planted kernels as C functions. A pure output kernel with a
 * right variant and wrong ones (writes skipped, caught by the poison even
 * where the snapshot already held the answer; a wrong value; a write
 * outside what the original writes); an in-place and an accumulating
 * kernel (W read: unpoisoned); a nondeterministic original; an original
 * that writes what was there; one that writes nothing; disjoint partial
 * writes; three allocations of which one differs; the reference queued
 * with the variants for one wait, from the launch before's (poison
 * confirmed, or found not to stand and the proofs made again, a
 * nondeterministic original, a launch before that does not fit); and
 * every failure of the operations, at every call, ending in an error and
 * never in "equal". */
#include "tests/unit/proof_host.h"

#include "tests/unit/check.h"

/* The second pass of every test: runs prepared by restoring only what may
 * differ (drk_proof_work), every verdict as with whole copies. */
static int spans;

static drk_proof_ops ops_of(host *h)
{
    return (drk_proof_ops){h,          h->n,        op_size,    op_copy,
                           op_poison,  op_run,      op_compare, op_wait,
                           spans ? op_copy_part : NULL, spans ? &h->work : NULL};
}

static drk_proof_result prove(host *h, const drk_proof_ref *ref, kernel variant)
{
    h->variant = variant;
    drk_proof_ops ops = ops_of(h);
    return drk_proof_variant(&ops, ref);
}

static void reference(host *h, drk_proof_ref *ref)
{
    drk_proof_ops ops = ops_of(h);
    drk_proof_reference(&ops, ref);
}

/* ---- the pure output kernel: out (alloc 1) = 3 * in (alloc 0) + 10 ---- */

static uint32_t f(uint32_t x) { return 3 * x + 10; }
/* in[i] = i + 1; out stale (0xffffffff), but word 5 already the answer
 * (an earlier launch wrote it): only the poison shows a skipped write there. */
static uint32_t init_pure(unsigned a, unsigned i) { return a == 0 ? i + 1 : i == 5 ? f(6) : 0xffffffffu; }

static void pure(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS; i++)
        u32(m[1])[i] = f(u32(m[0])[i]);
}
static void pure_skip_tail(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < 12; i++)
        u32(m[1])[i] = f(u32(m[0])[i]);
}
static void pure_skip_5(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS; i++)
        if (i != 5)
            u32(m[1])[i] = f(u32(m[0])[i]);
}
static void pure_wrong_7(host *h, uint8_t *const *m)
{
    pure(h, m);
    u32(m[1])[7] += 1;
}
static void pure_writes_input(host *h, uint8_t *const *m)
{
    pure(h, m);
    u32(m[0])[3] = 0;
}
static void pure_even_only(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS; i += 2)
        u32(m[1])[i] = f(u32(m[0])[i]);
}

static void test_pure(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, pure, init_pure);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned == 1 && ref.runs == 3 && ref.written == 1);
    /* W: every byte of out but word 5 (bytes 20..23), which S already held. */
    CHECK(ref.first[0] == UINT64_MAX && ref.last[0] == UINT64_MAX && ref.first[1] == 0 && ref.last[1] == 63);
    CHECK(memcmp(h.mem[DRK_SET_REFERENCE][1], h.mem[DRK_SET_SNAPSHOT][1], 64) != 0 &&
          u32(h.mem[DRK_SET_REFERENCE][1])[15] == f(16)); /* set 1 holds O1 */

    drk_proof_result r = prove(&h, &ref, pure);
    CHECK(r.verdict == DRK_PROOF_EQUAL && r.diff.ndiff == 0 && r.why[0] == '\0');
    /* Set 1 is still O1 after a variant: another proves against it. */
    CHECK(u32(h.mem[DRK_SET_REFERENCE][1])[15] == f(16));

    /* (a) The last four words skipped: poison (and S) there. */
    r = prove(&h, &ref, pure_skip_tail);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.ndiff == 16 && r.diff.first == 48 &&
          r.diff.last == 63);
    CHECK(strstr(r.why, "allocation 1 (16 bytes, offsets 48..63)") && strstr(r.why, "within the span of bytes the original changed"));
    /* Poison itself in set 2 where the variant did not write. */
    uint64_t p;
    memcpy(&p, h.mem[DRK_SET_WORK][1] + 48, 8);
    CHECK(p == DRK_PROOF_POISON);

    /* Word 5 skipped: S held the answer there, so only the poison shows it. */
    r = prove(&h, &ref, pure_skip_5);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.ndiff == 4 && r.diff.first == 20 &&
          r.diff.last == 23);
    h.poison_noop = 1;
    r = prove(&h, &ref, pure_skip_5);
    CHECK(r.verdict == DRK_PROOF_EQUAL); /* what the poison is for */
    h.poison_noop = 0;

    /* (b) One wrong value: one byte (the low one) differs. */
    r = prove(&h, &ref, pure_wrong_7);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.ndiff == 1 && r.diff.first == 28 &&
          r.diff.last == 28 && strstr(r.why, "(1 byte, offsets 28..28)"));

    /* (c) A write into the input, which the original leaves alone. */
    r = prove(&h, &ref, pure_writes_input);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 0 && r.diff.first == 12 && r.diff.last == 12 &&
          r.diff.ndiff == 1 && strstr(r.why, "allocation 0") && strstr(r.why, "beyond the span of bytes the original changed"));

    /* Disjoint partial writes: only the even words. The odd ones are stale
     * or poison, word 5 poison: all 8 odd words differ, every byte. */
    r = prove(&h, &ref, pure_even_only);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.ndiff == 32 && r.diff.first == 4 &&
          r.diff.last == 63);

    /* A reference's answers do not change with the variants tried. */
    drk_proof_ref again;
    reference(&h, &again);
    CHECK(again.state == ref.state && again.poisoned == ref.poisoned && again.first[1] == ref.first[1] &&
          again.last[1] == ref.last[1]);
}

/* Disjoint partial writes where S already holds the odd words' answers (a
 * launch again on the same inputs): W spans words 0..14 (bytes 0..59), so
 * odd words 1..13 are poisoned and caught; word 15 lies past W and the
 * skip there is invisible, which is why trust needs distinct launches. */
static uint32_t init_odd_right(unsigned a, unsigned i) { return a == 0 ? i + 1 : i % 2 ? f(i + 1) : 0xffffffffu; }

static void test_disjoint(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, pure, init_odd_right);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned == 1 && ref.first[1] == 0 && ref.last[1] == 59);
    drk_proof_result r = prove(&h, &ref, pure_even_only);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.ndiff == 28 && r.diff.first == 4 &&
          r.diff.last == 55);
    h.poison_noop = 1;
    CHECK(prove(&h, &ref, pure_even_only).verdict == DRK_PROOF_EQUAL);
}

/* The original writes what was there: W is empty, nothing is poisoned. */
static uint32_t init_answered(unsigned a, unsigned i) { return a == 0 ? i + 1 : f(i + 1); }

static void test_same_value(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, pure, init_answered);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.written == 0 && ref.poisoned == 0 && ref.runs == 2 &&
          ref.first[1] == UINT64_MAX && ref.last[1] == UINT64_MAX);
    /* A variant skipping every write is not seen on this launch (the
     * documented limit); a wrong one is. */
    CHECK(prove(&h, &ref, pure_skip_tail).verdict == DRK_PROOF_EQUAL);
    drk_proof_result r = prove(&h, &ref, pure_wrong_7);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.diff.first == 28 && strstr(r.why, "beyond the span"));
}

/* ---- in place: x = 2x + 1 ---- */

static uint32_t init_x(unsigned a, unsigned i) { return a == 0 ? i + 1 : 0; }
static void inplace(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS; i++)
        u32(m[0])[i] = 2 * u32(m[0])[i] + 1;
}
static void inplace_half(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS / 2; i++)
        u32(m[0])[i] = 2 * u32(m[0])[i] + 1;
}

static void test_inplace(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 1, inplace, init_x);
    reference(&h, &ref);
    /* Only the low byte of each word changes (small values). */
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned == 0 && ref.runs == 3 && ref.written == 1 &&
          ref.first[0] == 0 && ref.last[0] == 60);
    CHECK(prove(&h, &ref, inplace).verdict == DRK_PROOF_EQUAL);
    /* Unpoisoned, a skipped write leaves S, which differs from O1 in W. */
    drk_proof_result r = prove(&h, &ref, inplace_half);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 0 && r.diff.ndiff == 8 && r.diff.first == 32 &&
          r.diff.last == 60);
    /* Run poisoned, the original itself would fail its proof. */
    drk_proof_ref forced = ref;
    forced.poisoned = 1;
    CHECK(prove(&h, &forced, inplace).verdict == DRK_PROOF_DIFFERS);
}

/* ---- accumulating: y (alloc 1) += x (alloc 0) ---- */

static uint32_t init_acc(unsigned a, unsigned i) { return a == 0 ? i + 1 : 100 * i; }
static void accumulate(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS; i++)
        u32(m[1])[i] += u32(m[0])[i];
}
static void assign(host *h, uint8_t *const *m)
{
    (void)h;
    for (unsigned i = 0; i < ELEMS; i++)
        u32(m[1])[i] = u32(m[0])[i];
}

static void test_accumulate(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, accumulate, init_acc);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned == 0 && ref.written == 1 && ref.first[0] == UINT64_MAX &&
          ref.first[1] == 0);
    CHECK(prove(&h, &ref, accumulate).verdict == DRK_PROOF_EQUAL);
    drk_proof_result r = prove(&h, &ref, assign);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.first == 4); /* word 0: 0 + 1 == 1 either way */
}

/* ---- nondeterministic: word 3 of out counts the runs ---- */

static void racy(host *h, uint8_t *const *m)
{
    pure(h, m);
    u32(m[1])[3] = h->runs;
}

static void test_nondeterministic(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, racy, init_pure);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_NONDETERMINISTIC && ref.runs == 2);
    CHECK(strstr(ref.why, "the original differs from itself in allocation 1 (1 byte, offsets 12..12)") &&
          strstr(ref.why, "nondeterministic"));
    kernel tries[] = {racy, pure, pure_skip_tail};
    for (size_t i = 0; i < sizeof tries / sizeof *tries; i++) {
        unsigned runs = h.runs;
        drk_proof_result r = prove(&h, &ref, tries[i]);
        CHECK(r.verdict == DRK_PROOF_NONDETERMINISTIC && strstr(r.why, "differs from itself"));
        CHECK(h.runs == runs); /* nothing run for it */
    }
}

/* ---- writes nothing ---- */

static void nothing(host *h, uint8_t *const *m) { (void)h, (void)m; }

static void test_nothing(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, nothing, init_pure);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.written == 0 && ref.poisoned == 0 && ref.runs == 2);
    CHECK(prove(&h, &ref, nothing).verdict == DRK_PROOF_EQUAL);
    drk_proof_result r = prove(&h, &ref, pure);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 1 && r.diff.first == 0 && r.diff.last == 63 &&
          r.diff.ndiff == 60 && strstr(r.why, "beyond the span")); /* word 5 was already f(6) */
}

/* ---- three allocations, one differs: in, out1 = f(in), out2 = in ^ 0x55 ---- */

static uint32_t init_three(unsigned a, unsigned i) { return a == 0 ? i + 1 : 0; }
static void three(host *h, uint8_t *const *m)
{
    pure(h, m);
    for (unsigned i = 0; i < ELEMS; i++)
        u32(m[2])[i] = u32(m[0])[i] ^ 0x55u;
}
static void three_bad2(host *h, uint8_t *const *m)
{
    three(h, m);
    u32(m[2])[9] ^= 0x100u;
}

static void test_three(void)
{
    host h;
    drk_proof_ref ref;
    host_init(&h, 3, three, init_three);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.written == 2 && ref.poisoned == 1 && ref.first[0] == UINT64_MAX &&
          ref.first[1] == 0 && ref.first[2] == 0);
    CHECK(prove(&h, &ref, three).verdict == DRK_PROOF_EQUAL);
    drk_proof_result r = prove(&h, &ref, three_bad2);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 2 && r.diff.ndiff == 1 && r.diff.first == 37 &&
          r.diff.last == 37 && strstr(r.why, "allocation 2"));
}

/* ---- the reference queued with the variants' proofs, one wait ---- */

/* Proves `variants` on a queued reference from `prev`, in one wait:
 * settle's answer, the verdicts in r[] (when it stood). */
static int queued(host *h, const drk_proof_ref *prev, drk_proof_ref *ref, kernel *variants, unsigned nv,
                  drk_proof_result *r)
{
    drk_proof_ops ops = ops_of(h);
    unsigned waits = h->calls[OP_WAIT];
    if (drk_proof_reference_queue(&ops, prev, ref) != 0)
        return -2;
    unsigned base = ref->queued;
    for (unsigned k = 0; k < nv; k++) {
        h->variant = variants[k];
        CHECK(drk_proof_variant_queue(&ops, ref, base + k * h->n, &r[k]) == 0);
    }
    static drk_diff d[DRK_PROOF_SLOTS];
    CHECK(ops.wait(ops.self, d, base + nv * h->n) == 0);
    CHECK(h->calls[OP_WAIT] == waits + 1);
    int stands = drk_proof_reference_settle(&ops, ref, d);
    for (unsigned k = 0; stands == 1 && k < nv; k++)
        r[k] = drk_proof_variant_check(&ops, ref, d + base + k * h->n);
    return stands;
}

static uint32_t init_pure2(unsigned a, unsigned i) { return a == 0 ? 2 * i + 7 : i == 5 ? f(17) : 0xeeeeeeeeu; }

static void test_queued(void)
{
    host h;
    drk_proof_ref prev, ref;
    drk_proof_result r[4];
    /* The pure kernel: a launch's reference, then the next launch's (new
     * inputs, word 5 again already the answer) queued with four variants:
     * poison confirmed there, the right one equal, the skips caught. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &prev);
    CHECK(prev.state == DRK_PROOF_EQUAL && prev.poisoned && !prev.reads_written && prev.seen_first[1] == 0 &&
          prev.seen_last[1] == 63);
    host_init(&h, 2, pure, init_pure2);
    kernel v[4] = {pure, pure_skip_5, pure_skip_tail, pure_wrong_7};
    CHECK(queued(&h, &prev, &ref, v, 4, r) == 1);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned && ref.queued == 0 && ref.runs == 3);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_DIFFERS && r[1].diff.first == 20 &&
          r[1].diff.last == 23 && r[2].verdict == DRK_PROOF_DIFFERS && r[3].verdict == DRK_PROOF_DIFFERS);
    /* What this launch showed, for the next. */
    CHECK(ref.seen_written == 1 && ref.seen_first[1] == 0 && ref.seen_last[1] == 63);
    /* A variant proven after the settled reference (a later batch): as ever. */
    CHECK(prove(&h, &ref, pure).verdict == DRK_PROOF_EQUAL);
    CHECK(prove(&h, &ref, pure_skip_5).verdict == DRK_PROOF_DIFFERS);

    /* In place: the launch before found O3 != O1, so nothing is poisoned
     * and no O3 queued (2 compares an allocation); a skipped half caught. */
    host_init(&h, 1, inplace, init_x);
    reference(&h, &prev);
    CHECK(prev.reads_written && !prev.poisoned);
    kernel vi[2] = {inplace, inplace_half};
    CHECK(queued(&h, &prev, &ref, vi, 2, r) == 1);
    CHECK(ref.runs == 2 && !ref.poisoned && ref.reads_written && r[0].verdict == DRK_PROOF_EQUAL &&
          r[1].verdict == DRK_PROOF_DIFFERS && r[1].diff.first == 32);

    /* Poison from the launch before that does not stand on this one (the
     * kernel now reads what it writes): nothing of the batch stands, the
     * reference is unpoisoned from now on, and proofs made again agree. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &prev);
    host_init(&h, 2, accumulate, init_acc);
    kernel va[2] = {accumulate, assign};
    CHECK(queued(&h, &prev, &ref, va, 2, r) == 0);
    CHECK(ref.state == DRK_PROOF_EQUAL && !ref.poisoned && ref.reads_written && ref.written == 1 &&
          ref.first[1] == 0);
    CHECK(prove(&h, &ref, accumulate).verdict == DRK_PROOF_EQUAL);
    CHECK(prove(&h, &ref, assign).verdict == DRK_PROOF_DIFFERS);
    drk_proof_ref next;
    CHECK(queued(&h, &ref, &next, va, 2, r) == 1 && next.runs == 2 && !next.poisoned); /* never poisoned again */

    /* A nondeterministic original on the queued launch: no verdict stands. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &prev);
    host_init(&h, 2, racy, init_pure);
    kernel vr[1] = {pure};
    CHECK(queued(&h, &prev, &ref, vr, 1, r) == -1);
    CHECK(ref.state == DRK_PROOF_NONDETERMINISTIC && strstr(ref.why, "differs from itself"));

    /* The first launch, queued with its variants (no launch before): O1
     * and O2 only, the variants unpoisoned -- a skip where S held the
     * answer passes there (word 5), as for an in-place kernel; one that
     * leaves S's stale bytes does not. */
    host_init(&h, 2, pure, init_pure);
    memset(h.calls, 0, sizeof h.calls);
    kernel vf[3] = {pure, pure_skip_5, pure_skip_tail};
    drk_proof_ref first;
    CHECK(queued(&h, NULL, &first, vf, 3, r) == 1 && h.calls[OP_WAIT] == 1);
    CHECK(first.state == DRK_PROOF_EQUAL && !first.poisoned && !first.read_known && first.runs == 2 &&
          first.written == 1 && first.first[1] == 0 && first.last[1] == 63);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_EQUAL && r[2].verdict == DRK_PROOF_DIFFERS);
    /* The next launch probes: O3 queued on the first's W, the variants
     * still unpoisoned (their verdicts stand either way); O3 == O1 learnt,
     * so the launch after is poisoned and catches the skip. */
    host_init(&h, 2, pure, init_pure2);
    drk_proof_ref second, third;
    CHECK(queued(&h, &first, &second, vf, 3, r) == 1);
    CHECK(second.read_known && !second.reads_written && !second.poisoned && !second.probe && second.runs == 3);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_EQUAL && r[2].verdict == DRK_PROOF_DIFFERS);
    host_init(&h, 2, pure, init_pure);
    CHECK(queued(&h, &second, &third, vf, 3, r) == 1 && third.poisoned);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_DIFFERS && r[1].diff.first == 20);
    /* In place: the probe finds O3 != O1; nothing is made again (the
     * variants ran unpoisoned), and no launch after is poisoned. */
    host_init(&h, 1, inplace, init_x);
    CHECK(queued(&h, NULL, &first, vi, 2, r) == 1 && r[0].verdict == DRK_PROOF_EQUAL &&
          r[1].verdict == DRK_PROOF_DIFFERS);
    CHECK(queued(&h, &first, &second, vi, 2, r) == 1 && second.read_known && second.reads_written);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_DIFFERS);
    CHECK(queued(&h, &second, &third, vi, 2, r) == 1 && !third.poisoned && third.runs == 2);
    /* A nondeterministic original on its first launch: no verdict stands. */
    host_init(&h, 2, racy, init_pure);
    CHECK(queued(&h, NULL, &first, vr, 1, r) == -1 && first.state == DRK_PROOF_NONDETERMINISTIC);

    /* A launch before that does not fit: nothing queued. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &prev);
    drk_proof_ref bad = prev;
    bad.n = 3;
    memset(h.calls, 0, sizeof h.calls);
    CHECK(queued(&h, &bad, &ref, vr, 1, r) == -2 && h.calls[OP_COPY] == 0 && h.calls[OP_RUN] == 0);
    bad = prev;
    bad.seen_last[1] = 64; /* past the allocation */
    CHECK(queued(&h, &bad, &ref, vr, 1, r) == -2);
    bad = prev;
    bad.state = DRK_PROOF_NONDETERMINISTIC;
    CHECK(queued(&h, &bad, &ref, vr, 1, r) == -2);

    /* A compare's span past the allocation: not believed, an error. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &prev);
    h.compare_lies = 1;
    CHECK(queued(&h, &prev, &ref, vr, 1, r) == -1 && ref.state == DRK_PROOF_ERROR);
    /* A failed operation while queuing: an error, never equal. */
    for (int op = OP_COPY; op <= OP_COMPARE; op++) {
        host_init(&h, 2, pure, init_pure);
        reference(&h, &prev);
        memset(h.calls, 0, sizeof h.calls);
        h.fail_op = op, h.fail_at = 1;
        drk_proof_ops ops = ops_of(&h);
        CHECK(drk_proof_reference_queue(&ops, &prev, &ref) == 0 && ref.state == DRK_PROOF_ERROR && !ref.queued);
        CHECK(drk_proof_variant_queue(&ops, &ref, 0, &r[0]) == -1 && r[0].verdict == DRK_PROOF_ERROR);
    }
}

/* ---- restoring only what may differ (drk_proof_work) ---- */

/* out (alloc 1) = f(in); alloc 2 word 0 := 7 only when in[0] == 100. */
static uint32_t init_low(unsigned a, unsigned i) { return a == 0 ? i + 1 : 0; }
static uint32_t init_high(unsigned a, unsigned i) { return a == 0 ? i + 100 : 0; }
static void maybe_flag(host *h, uint8_t *const *m)
{
    pure(h, m);
    if (u32(m[0])[0] == 100)
        u32(m[2])[0] = 7;
}
static void flag_skipped(host *h, uint8_t *const *m) { pure(h, m); }

/* pure, but from its fourth run on word 3 counts the runs. */
static void racy_late(host *h, uint8_t *const *m)
{
    pure(h, m);
    if (h->runs >= 3)
        u32(m[1])[3] = h->runs;
}

/* A timed run as drk's trial queues one: prepared, run, told to the work
 * set, checked against O1 into slots base.. */
static int timed_checked(host *h, const drk_proof_ops *ops, const drk_proof_ref *ref, int variant, unsigned base)
{
    if (drk_proof_fresh(ops, ref, DRK_SET_WORK, ref->poisoned) != 0 || op_run(h, DRK_SET_WORK, variant) != 0)
        return -1;
    drk_proof_work_ran(ops, ref, variant);
    return drk_proof_check_work(ops, ref, base);
}

/* On a fresh launch of `original`: a timed run of it, then one of
 * `variant` (named `tag`), both checked, and the wait. */
static void original_then_variant(host *h, drk_proof_ops *ops, drk_proof_ref *ref, kernel original, kernel variant,
                                  unsigned tag)
{
    drk_diff d[1];
    host_init(h, 2, original, init_pure);
    reference(h, ref);
    *ops = ops_of(h);
    h->variant = variant;
    CHECK(timed_checked(h, ops, ref, 0, 0) == 0);
    h->work.tag = tag;
    CHECK(timed_checked(h, ops, ref, 1, 2) == 0);
    h->work.tag = 0;
    CHECK(ops->wait(ops->self, d, 0) == 0);
}

static void test_spans(void)
{
    host h;
    drk_proof_ref prev, ref;
    drk_proof_result r[3];
    spans = 1;
    /* Bytes: a reference and four proofs. Whole copies: 7. Restoring what
     * may differ: O1's and O2's sets whole, and the run after the rejected
     * skip (nothing rested on it, but its changes are unknown); out, W
     * throughout, is poisoned, never copied. */
    uint64_t copied[2];
    for (int k = 0; k < 2; k++) {
        spans = k;
        host_init(&h, 2, pure, init_pure);
        reference(&h, &ref);
        kernel v[4] = {pure, pure_skip_5, pure, pure_wrong_7};
        for (unsigned i = 0; i < 4; i++)
            CHECK(prove(&h, &ref, v[i]).verdict == (i % 2 ? DRK_PROOF_DIFFERS : DRK_PROOF_EQUAL));
        copied[k] = h.copied;
    }
    CHECK(copied[0] == 7 * 128 && copied[1] == 3 * 128);
    spans = 1;

    /* A variant that writes the input, then a right one, in one wait: the
     * second ran on a changed input; the wait is tainted, and only whole
     * copies decide. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &prev);
    host_init(&h, 2, pure, init_pure2);
    kernel bad_first[2] = {pure_writes_input, pure};
    CHECK(queued(&h, &prev, &ref, bad_first, 2, r) == 1);
    CHECK(h.work.tainted && h.work.failed && !h.work.known);
    CHECK(r[0].verdict == DRK_PROOF_DIFFERS && r[0].alloc == 0);
    h.work.spans = 0; /* what the engine does: the batch again, whole */
    drk_proof_ref again;
    CHECK(queued(&h, &prev, &again, bad_first, 2, r) == 1 && !h.work.tainted);
    CHECK(r[0].verdict == DRK_PROOF_DIFFERS && r[1].verdict == DRK_PROOF_EQUAL);
    /* The bad one last: nothing rested on it; not tainted, state unknown. */
    host_init(&h, 2, pure, init_pure2);
    kernel bad_last[2] = {pure, pure_writes_input};
    CHECK(queued(&h, &prev, &ref, bad_last, 2, r) == 1);
    CHECK(!h.work.tainted && h.work.failed && !h.work.known);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_DIFFERS);
    uint64_t before = h.copied;
    CHECK(prove(&h, &ref, pure).verdict == DRK_PROOF_EQUAL && h.copied - before == 128); /* whole again */
    before = h.copied;
    CHECK(prove(&h, &ref, pure).verdict == DRK_PROOF_EQUAL && h.copied == before); /* then nothing */

    /* This launch writes an allocation the one before did not: runs
     * restored as the launch before wrote would see its write already
     * there, and a variant that skips it would pass. The condition on
     * O1 == S there taints the wait; with whole copies the skip is caught. */
    host_init(&h, 3, maybe_flag, init_low);
    reference(&h, &prev);
    CHECK(prev.seen_written == 1 && prev.seen_first[2] == UINT64_MAX);
    host_init(&h, 3, maybe_flag, init_high);
    kernel flags[2] = {maybe_flag, flag_skipped};
    CHECK(queued(&h, &prev, &ref, flags, 2, r) == 1);
    CHECK(h.work.tainted);
    h.work.spans = 0;
    CHECK(queued(&h, &prev, &again, flags, 2, r) == 1 && !h.work.tainted);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL && r[1].verdict == DRK_PROOF_DIFFERS && r[1].alloc == 2);

    /* The same launch, but a whole copy between (a variant's run left
     * unchecked: its wait's check slots ran out), then the original, then
     * the skipping variant: what counts as written still rests on the
     * launch before's W, so the wait is tainted all the same (relied on
     * from the start, and by O3's run before the copy). */
    host_init(&h, 3, maybe_flag, init_high);
    drk_proof_ops fops = ops_of(&h);
    CHECK(drk_proof_reference_queue(&fops, &prev, &ref) == 0 && ref.queued == 9);
    h.variant = maybe_flag;
    CHECK(drk_proof_fresh(&fops, &ref, DRK_SET_WORK, ref.poisoned) == 0 && op_run(&h, DRK_SET_WORK, 1) == 0);
    drk_proof_work_ran(&fops, &ref, 1); /* not checked */
    CHECK(drk_proof_fresh(&fops, &ref, DRK_SET_WORK, ref.poisoned) == 0 && op_run(&h, DRK_SET_WORK, 0) == 0);
    drk_proof_work_ran(&fops, &ref, 0);
    h.variant = flag_skipped;
    CHECK(drk_proof_variant_queue(&fops, &ref, 9, &r[0]) == 0);
    static drk_diff dq[12];
    CHECK(fops.wait(fops.self, dq, 12) == 0 && h.work.tainted);

    /* A timed run checked (drk_proof_check_work) that differs from O1 (a
     * variant that changes from run to run): failed, and tainted once a
     * run was prepared after it. */
    host_init(&h, 2, pure, init_pure);
    reference(&h, &ref);
    drk_proof_ops ops = ops_of(&h);
    h.variant = pure_wrong_7;
    h.work.tag = 5; /* the caller's name for the variant: the check that fails first gives it back */
    CHECK(drk_proof_fresh(&ops, &ref, DRK_SET_WORK, ref.poisoned) == 0 && op_run(&h, DRK_SET_WORK, 1) == 0);
    drk_proof_work_ran(&ops, &ref, 1);
    CHECK(h.work.pending);
    CHECK(drk_proof_check_work(&ops, &ref, 0) == 0 && !h.work.pending);
    h.work.tag = 0;
    CHECK(drk_proof_fresh(&ops, &ref, DRK_SET_WORK, ref.poisoned) == 0 && op_run(&h, DRK_SET_WORK, 0) == 0);
    drk_diff d[2];
    CHECK(ops.wait(ops.self, d, 2) == 0 && d[1].ndiff == 1 && h.work.failed && h.work.tainted);
    CHECK(!h.work.nondeterministic); /* the first to differ was a variant's */
    CHECK(h.work.differed == 5);

    /* Two variants whose timed runs differ: only the first is named (the
     * second's input was the first's doing); the next wait names none. */
    ops = ops_of(&h);
    h.work.tag = 1;
    CHECK(timed_checked(&h, &ops, &ref, 1, 0) == 0);
    h.work.tag = 2;
    CHECK(timed_checked(&h, &ops, &ref, 1, 2) == 0);
    CHECK(ops.wait(ops.self, d, 0) == 0 && h.work.failed && h.work.differed == 1);
    h.work.tag = 3;
    CHECK(timed_checked(&h, &ops, &ref, 0, 0) == 0);
    CHECK(ops.wait(ops.self, d, 0) == 0 && !h.work.failed && h.work.differed == 0);
    h.work.tag = 0;

    /* A timed run of the original checked too: one that differs from O1
     * on an input every check before vouched for is the original differing
     * from itself (racy after its first three runs, which the reference
     * took); after a variant that differed first, nothing is said of the
     * original (its input was the variant's doing). */
    host_init(&h, 2, racy_late, init_pure);
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.runs == 3);
    ops = ops_of(&h);
    CHECK(timed_checked(&h, &ops, &ref, 0, 0) == 0);
    CHECK(ops.wait(ops.self, d, 0) == 0 && h.work.failed && h.work.nondeterministic);
    host_init(&h, 2, racy_late, init_pure);
    reference(&h, &ref);
    ops = ops_of(&h);
    h.variant = pure_writes_input;
    h.work.tag = 4;
    CHECK(timed_checked(&h, &ops, &ref, 1, 0) == 0);
    h.work.tag = 0;
    CHECK(timed_checked(&h, &ops, &ref, 0, 2) == 0);
    CHECK(ops.wait(ops.self, d, 0) == 0 && h.work.failed && !h.work.nondeterministic && h.work.tainted);
    CHECK(h.work.differed == 4);
    /* Deterministic, with a variant that differs after it: not said
     * either; the variant is named. */
    original_then_variant(&h, &ops, &ref, pure, pure_wrong_7, 6);
    CHECK(h.work.failed && !h.work.nondeterministic && h.work.differed == 6);
    /* An original that differs from itself first: no variant is named. */
    original_then_variant(&h, &ops, &ref, racy_late, pure_wrong_7, 7);
    CHECK(h.work.nondeterministic && h.work.differed == 0);

    /* A variant's run not compared: the next run gets the whole snapshot. */
    CHECK(drk_proof_fresh(&ops, &ref, DRK_SET_WORK, ref.poisoned) == 0 && op_run(&h, DRK_SET_WORK, 1) == 0);
    drk_proof_work_ran(&ops, &ref, 1);
    before = h.copied;
    CHECK(drk_proof_fresh(&ops, &ref, DRK_SET_WORK, ref.poisoned) == 0 && h.copied - before == 128);
    spans = 0;
}

/* ---- failures: every call of every operation, in turn ---- */

static void test_failures(void)
{
    static const char *const names[OPS] = {"copy", "poison", "run", "compare", "wait"};
    kernel originals[] = {pure, inplace};
    for (size_t k = 0; k < sizeof originals / sizeof *originals; k++) {
        for (int op = 0; op < OPS; op++) {
            unsigned fired = 0;
            for (int at = 1; at <= 12; at++) {
                host h;
                drk_proof_ref ref;
                host_init(&h, 2, originals[k], init_pure);
                h.fail_op = op, h.fail_at = at;
                reference(&h, &ref);
                int in_ref = h.fired;
                drk_proof_result r = prove(&h, &ref, originals[k]);
                if (!h.fired) {
                    CHECK(ref.state == DRK_PROOF_EQUAL && r.verdict == DRK_PROOF_EQUAL);
                    continue;
                }
                fired++;
                CHECK(r.verdict == DRK_PROOF_ERROR);
                CHECK(in_ref ? ref.state == DRK_PROOF_ERROR && ref.why[0] : ref.state == DRK_PROOF_EQUAL);
                if (r.verdict != DRK_PROOF_ERROR || !r.why[0])
                    fprintf(stderr, "  %s failing at call %d: %s (%s)\n", names[op], at,
                            drk_proof_verdict_name(r.verdict), r.why);
            }
            /* Calls of each (reference + variant). pure: copies 3 + 1,
             * poisons 1 + 1, runs 3 + 1, compares 6 + 2, waits 2 + 1;
             * inplace: the variant runs unpoisoned. */
            static const unsigned want[2][OPS] = {{4, 2, 4, 8, 3}, {4, 1, 4, 8, 3}};
            CHECK(fired == want[k][op]);
        }
    }
    /* A compare's span past the allocation is not believed (poison there
     * would write past the buffer). */
    host h;
    drk_proof_ref ref;
    host_init(&h, 2, pure, init_pure);
    h.compare_lies = 1;
    reference(&h, &ref);
    CHECK(ref.state == DRK_PROOF_ERROR);
    /* Too many allocations. */
    host_init(&h, 2, pure, init_pure);
    drk_proof_ops ops = ops_of(&h);
    ops.n = DRK_REACH_MAX + 1;
    drk_proof_reference(&ops, &ref);
    CHECK(ref.state == DRK_PROOF_ERROR && h.calls[OP_COPY] == 0);
}

int main(void)
{
    CHECK(strcmp(drk_proof_verdict_name(DRK_PROOF_EQUAL), "equal") == 0 &&
          strcmp(drk_proof_verdict_name(DRK_PROOF_DIFFERS), "differs") == 0 &&
          strcmp(drk_proof_verdict_name(DRK_PROOF_NONDETERMINISTIC), "nondeterministic") == 0 &&
          strcmp(drk_proof_verdict_name(DRK_PROOF_ERROR), "error") == 0);
    for (spans = 0; spans < 2; spans++) {
        test_pure();
        test_disjoint();
        test_same_value();
        test_inplace();
        test_accumulate();
        test_nondeterministic();
        test_nothing();
        test_three();
        test_queued();
    }
    test_spans();
    test_failures();
    /* Failures with runs restored in part: never equal. */
    spans = 1;
    for (int op = 0; op < OPS; op++)
        for (int at = 1; at <= 14; at++) {
            host h;
            drk_proof_ref prev, ref;
            drk_proof_result r[2];
            host_init(&h, 2, pure, init_pure);
            reference(&h, &prev);
            host_init(&h, 2, pure, init_pure2);
            h.fail_op = op, h.fail_at = at;
            kernel v[2] = {pure, pure};
            drk_proof_ops ops = ops_of(&h);
            if (drk_proof_reference_queue(&ops, &prev, &ref) != 0 || ref.state != DRK_PROOF_EQUAL)
                continue;
            int err = 0;
            unsigned base = ref.queued;
            for (unsigned k = 0; k < 2; k++) {
                h.variant = v[k];
                err |= drk_proof_variant_queue(&ops, &ref, base + k * 2, &r[k]) != 0;
            }
            static drk_diff d[DRK_PROOF_SLOTS];
            if (err || ops.wait(ops.self, d, base + 4) != 0) {
                CHECK(h.fired);
                continue;
            }
            int stands = drk_proof_reference_settle(&ops, &ref, d);
            for (unsigned k = 0; stands == 1 && !h.work.tainted && k < 2; k++) {
                r[k] = drk_proof_variant_check(&ops, &ref, d + base + k * 2);
                CHECK(r[k].verdict == DRK_PROOF_EQUAL && !h.fired);
            }
        }
    spans = 0;
    return CHECK_DONE();
}
