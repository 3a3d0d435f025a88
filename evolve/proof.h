/* The proof that a variant computes what the original computes, bit for
 * bit, on one captured launch (docs/evolve.md, "The proof").
 *
 * Pure protocol over buffer sets an implementation provides (evolve/trial.h
 * on the GPU; a test's on the CPU). A set is a copy of each allocation the
 * launch reaches: set 0 is the snapshot S (taken before the program's
 * launch ran; never written), set 1 the reference O1, set 2 work. On one
 * launch:
 *   1. O1: the original on a copy of S; O2: again on another. O1 != O2 in
 *      any byte: nondeterministic (float atomics, races): no variants.
 *   2. W: per allocation, the span [first, last] of bytes where O1 differs
 *      from S (what the original wrote, or a span covering it).
 *   3. O3: the original on S with W poisoned. O3 == O1: the original does
 *      not read W's old contents, so variants run on S with W poisoned (a
 *      write the variant skips shows as poison); else on S as it is (a
 *      skipped write then shows S's bytes, which differ from O1 in W).
 *   4. A variant: on a fresh copy of S (poisoned or not, by step 3), then
 *      every byte of every allocation compared with O1. "Fresh" may be a
 *      restore of only the allocations a run may have changed
 *      (drk_proof_work), never a weaker input: the variant runs on S.
 * Steps 1-3 are done once per launch (drk_proof_reference) and serve every
 * variant tried on it (drk_proof_variant); on a later launch of the same
 * kernel they can be queued with the variants' proofs, for one wait, with
 * W and the poisoning taken from the launch before (drk_proof_reference_
 * queue): no verdict stands until step 3 has confirmed that poisoning on
 * this launch. Poisoning a span wider than the
 * bytes written is safe: at worst step 3 finds O3 != O1 and variants run
 * unpoisoned. Bytes the original wrote with the value they had are
 * invisible to W; the engine trusts a variant only after distinct launches
 * (DRK_PROOF_LAUNCHES). */
#ifndef DRK_EVOLVE_PROOF_H
#define DRK_EVOLVE_PROOF_H

#include <stddef.h>
#include <stdint.h>

#include "evolve/reach.h"

#define DRK_PROOF_LAUNCHES 3                 /* distinct real launches proven before a variant is trusted */
#define DRK_PROOF_POISON 0xa55a5aa5c33c3cc3ull /* the poison pattern, from each span's start */

enum { DRK_SET_SNAPSHOT = 0, DRK_SET_REFERENCE = 1, DRK_SET_WORK = 2, DRK_SETS = 3 };

typedef struct drk_diff {
    uint64_t ndiff;                          /* differing bytes */
    uint64_t first, last;                    /* offsets of the lowest and highest; UINT64_MAX when none */
} drk_diff;

/* Compare results one wait reads at most: a queued reference's (3 per
 * allocation) and a batch of 8 variants' proofs, of DRK_REACH_MAX
 * allocations each (the engine's candidates a batch). */
#define DRK_PROOF_SLOTS (11 * DRK_REACH_MAX)

/* Conditions a wait may have to check (drk_proof_work). */
#define DRK_PROOF_CONDS 64

/* What the work set (set 2) holds between runs, so that a run is prepared
 * by restoring only the allocations that may differ from S, not by copying
 * the whole snapshot (docs/evolve.md, "Copies a run needs"). The
 * allocations the original does not write stay S's across runs: every run
 * on the work set is followed by a compare with O1 in every allocation (a
 * run of the original without one, where an implementation's check slots
 * ran out, rests on its determinism, O1 == O2). Such a compare's answer
 * comes only at the wait, so a run prepared after it relies on it: a
 * *condition*. At the wait (drk_proof_work_waited) a
 * condition found false marks the state unknown (the next run gets the
 * whole snapshot) and, if a run relied on it, the wait *tainted*: no
 * verdict or time read from that wait stands (the caller makes its batch
 * again, with whole copies). The same holds for the allocations a queued
 * reference assumes unwritten (the launch before's): O1 == S there is a
 * condition too. A variant's run not compared leaves the state unknown. */
typedef struct drk_proof_work {
    int spans;                               /* 1: restore what may differ; 0: copy the whole snapshot */
    int known;                               /* set 2 == S outside `dirty`, if every condition holds */
    int pending;                             /* a variant ran on set 2, its compare not yet queued */
    uint32_t dirty;                          /* allocations that may differ from S (bit i: allocation i) */
    unsigned nconds, chain;                  /* conditions; those from `chain` on are what set 2 rests on */
    struct {
        unsigned base;                       /* slots base + i, for each bit i of mask, must be equal */
        uint32_t mask;
        int relied;                          /* a run was prepared on it */
        int original;                        /* it checks a timed run of the original */
        unsigned tag;                        /* `tag` when it was queued */
    } cond[DRK_PROOF_CONDS];
    unsigned tag;                            /* the caller's name for the runs checked from now on (0: none) */
    int ran_variant;                         /* the latest run on set 2 was a variant's */
    int lost;                                /* a condition found no room since the last wait */
    int tainted;                             /* the last wait: a condition a run relied on was false */
    int failed;                              /* the last wait: any condition was false */
    int nondeterministic;                    /* the last wait: the first false condition checked a run of the
                                              * original, on an input every condition before it held for: the
                                              * original differs from itself */
    unsigned differed;                       /* the last wait: the tag of the first false condition when it
                                              * checked a variant's run on such an input (that variant differs
                                              * from the original, whichever of its runs it was); else 0 */
} drk_proof_work;

/* The work set's state for a new trial: nothing known (the first run gets
 * the whole snapshot); `spans` as asked. */
void drk_proof_work_init(drk_proof_work *w, int spans);
/* At a wait, with every slot's result (equal[k]: slot k was compared and
 * found equal, for k < nslots): checks the conditions, sets w->tainted,
 * w->failed, w->nondeterministic and w->differed, and forgets them. */
void drk_proof_work_waited(drk_proof_work *w, const unsigned char *equal, unsigned nslots);

/* What the protocol needs of the buffers. The operations are queued, in
 * order (each sees what the ones before it did), and only `wait` waits:
 * on the GPU every wait is a switch between drk's context and the
 * program's (docs/evolve.md, "Trials in batches"), so the protocol waits
 * twice for a reference and once for a variant, whatever n is. Each
 * returns 0, or -1 when the device or driver failed (the proof then ends:
 * DRK_PROOF_ERROR). */
typedef struct drk_proof_ops {
    void *self;
    unsigned n;                              /* allocations in a set */
    size_t (*size)(void *self, unsigned alloc);
    /* Set dst := set src, every allocation. */
    int (*copy)(void *self, unsigned dst, unsigned src);
    /* Bytes [off, off + len) of allocation `alloc` of `set` := the pattern
     * (byte i of the span is byte i % 8 of the little-endian pattern). */
    int (*poison)(void *self, unsigned set, unsigned alloc, size_t off, size_t len, uint64_t pattern);
    /* Runs the original (variant 0) or the variant under proof (1) on `set`. */
    int (*run)(void *self, unsigned set, int variant);
    /* Allocation `alloc` of set a against set b, every byte, into result
     * slot `slot` (< DRK_PROOF_SLOTS; an implementation may keep slots of
     * its own past them for drk_proof_check_work), read by the next wait. */
    int (*compare)(void *self, unsigned a, unsigned b, unsigned alloc, unsigned slot);
    /* Waits for everything queued: out[i] := slot i's result for i <
     * nslots, each of which was compared since the last wait (-1 if not).
     * With `work`, it calls drk_proof_work_waited with every slot's. */
    int (*wait)(void *self, drk_diff *out, unsigned nslots);
    /* Optional (NULL: every run is prepared from the whole snapshot):
     * bytes [off, off + len) of allocation `alloc` of set dst := set src's,
     * and the work set's state. */
    int (*copy_part)(void *self, unsigned dst, unsigned src, unsigned alloc, size_t off, size_t len);
    drk_proof_work *work;
} drk_proof_ops;

typedef enum drk_proof_verdict {
    DRK_PROOF_EQUAL,                         /* the variant's bytes are O1's, everywhere */
    DRK_PROOF_DIFFERS,                       /* a byte differs: the variant is wrong */
    DRK_PROOF_NONDETERMINISTIC,              /* the original differs from itself: no variants */
    DRK_PROOF_ERROR,                         /* a device or driver failure: no conclusion */
} drk_proof_verdict;

/* One launch's reference, from steps 1-3. */
typedef struct drk_proof_ref {
    drk_proof_verdict state;                 /* EQUAL once ready; NONDETERMINISTIC or ERROR otherwise */
    int poisoned;                            /* variants run with W poisoned */
    unsigned written;                        /* allocations the original changed */
    uint64_t first[DRK_REACH_MAX], last[DRK_REACH_MAX]; /* W per allocation; UINT64_MAX: unwritten */
    unsigned runs;                           /* runs of the original it took */
    char why[160];                           /* NONDETERMINISTIC or ERROR, in words */
    unsigned n;                              /* allocations it covers */
    unsigned queued;                         /* queued, not yet settled: its compares are slots [0, queued) */
    int reads_written;                       /* O3 != O1 seen, on this launch or one before: never poisoned */
    int read_known;                          /* O3 ran on a launch that wrote: reads_written says what it saw */
    int probe;                               /* queued: O3 runs to learn reads_written, the variants unpoisoned */
    int blind;                               /* queued for a first launch: W unknown until settled (every
                                              * allocation counts as written) */
    unsigned seen_written;                   /* W as this launch's O1 showed it (first/last may be the */
    uint64_t seen_first[DRK_REACH_MAX], seen_last[DRK_REACH_MAX]; /* launch before's, poisoned) */
} drk_proof_ref;

/* What a variant's proof found. */
typedef struct drk_proof_result {
    drk_proof_verdict verdict;
    unsigned alloc;                          /* DIFFERS: the first allocation that differs */
    drk_diff diff;                           /* and how */
    char why[160];                           /* in words, for the report's "rejected" */
} drk_proof_result;

/* Steps 1-3 on `ops` (n <= DRK_REACH_MAX): set 1 holds O1 after it. */
void drk_proof_reference(const drk_proof_ops *ops, drk_proof_ref *ref);

/* Steps 1-3 queued, not waited for, for a later launch of a kernel whose
 * reference `prev` (EQUAL, on as many allocations) an earlier launch
 * made: W is poisoned as prev saw it, unless the original was seen
 * reading W (then nothing is). Its compares take slots [0, ref->queued);
 * variants queued after it (drk_proof_variant_queue, from that slot on)
 * share its wait. `prev` NULL: the kernel's first launch, steps 1-2 only,
 * the variants unpoisoned (nothing is known of W before the wait); a
 * launch after one whose O3 never ran (read_known 0) queues O3 as a
 * probe: the variants unpoisoned, O3 == O1 learnt for the launches after.
 * 0; -1 (nothing queued) when prev does not fit `ops`; ref->state ERROR
 * when an operation failed. */
int drk_proof_reference_queue(const drk_proof_ops *ops, const drk_proof_ref *prev, drk_proof_ref *ref);

/* After that wait (`diffs`: slot 0's first): 1, the reference stands
 * (EQUAL) and so do the verdicts of variants queued on it; 0, it stands
 * but poisoning did not (O3 != O1): ref->poisoned is now 0 and those
 * variants must be proven again; -1, it is NONDETERMINISTIC or ERROR
 * (ref->why), and no verdict on it stands. */
int drk_proof_reference_settle(const drk_proof_ops *ops, drk_proof_ref *ref, const drk_diff *diffs);

/* Step 4 for the variant behind ops->run(.., 1), against a ready `ref`
 * (set 1 still O1), waited for. Uses set 2. */
drk_proof_result drk_proof_variant(const drk_proof_ops *ops, const drk_proof_ref *ref);

/* Step 4 in two halves, so that several variants (and their timed runs)
 * share one wait: _queue queues it on slots [base, base + n) (0; or -1
 * with *r the verdict: an error, or the reference's own state), and after
 * the wait _check reads those slots' results (`diffs`: slot base's first). */
int drk_proof_variant_queue(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned base,
                            drk_proof_result *r);
drk_proof_result drk_proof_variant_check(const drk_proof_ops *ops, const drk_proof_ref *ref, const drk_diff *diffs);

/* Queues set `set` := S, with W (ref's spans) poisoned when `poison`:
 * how a variant's run is prepared, and (evolve/trial.h) every timed run.
 * The work set, with ops->work in span mode and known, is restored only
 * where it may differ from S (the allocations written or dirty). */
int drk_proof_fresh(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned set, int poison);

/* What a run queued on the work set leaves there: the original's (0) what
 * it writes, ref's allocations; a variant's (1) nothing known until
 * drk_proof_check_work queues its compare. */
void drk_proof_work_ran(const drk_proof_ops *ops, const drk_proof_ref *ref, int variant);

/* Queues the work set against O1 (set 1), every allocation, into slots
 * [base, base + n), as a condition: after a timed run (the original's or a
 * variant's) that no proof compares, so that the next run needs no whole
 * copy. 0, or -1. */
int drk_proof_check_work(const drk_proof_ops *ops, const drk_proof_ref *ref, unsigned base);

const char *drk_proof_verdict_name(drk_proof_verdict v); /* "equal", "differs", ... */

#endif
