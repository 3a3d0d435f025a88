/* The host harness of the bitwise proof's tests (test_proof.c,
 * test_proof_random.c): buffer sets in host memory, operations done at once
 * in the order queued (as drk's stream does them), a failure armed on any
 * call of any operation, and, for the random test, a watch on what each run
 * of set 2 starts from and whether it ends as O1 (`track`). */
#ifndef DRK_TESTS_UNIT_PROOF_HOST_H
#define DRK_TESTS_UNIT_PROOF_HOST_H

#include "evolve/proof.h"

#include <stdio.h>
#include <string.h>

#define MAXA 3
#define ELEMS 16

typedef struct host host;
typedef void (*kernel)(host *h, uint8_t *const *m);

enum { OP_COPY, OP_POISON, OP_RUN, OP_COMPARE, OP_WAIT, OPS };

struct host {
    unsigned n;
    size_t size[MAXA];
    uint8_t mem[DRK_SETS][MAXA][ELEMS * 4];
    kernel original, variant;
    unsigned runs;          /* of either, for the nondeterministic one */
    unsigned calls[OPS];    /* per operation, since the failure was armed */
    int fail_op, fail_at;   /* the fail_at-th call of fail_op fails (0: none) */
    int fired;
    int poison_noop;        /* poison writes nothing (to show what it catches) */
    int compare_lies;       /* compare answers a span past the allocation */
    drk_diff slot[DRK_PROOF_SLOTS]; /* compares' results, read at the wait */
    int queued[DRK_PROOF_SLOTS];
    drk_proof_work work;    /* with `spans`: what set 2 holds between runs */
    uint64_t copied;        /* bytes copy and copy_part wrote */
    struct track *track;    /* the random test's watch, or NULL */
};

/* What the random test watches in set 2 (test_proof_random.c): for each
 * byte, whether poison or S was last written there by the protocol's own
 * copies and poison; a run that starts from anything else; and the first
 * run since the last wait that ended other than O1 (set 1). */
struct track {
    uint8_t poisoned[MAXA][ELEMS * 4], value[MAXA][ELEMS * 4];
    int who;                /* the run being queued: 0 the original, k + 1 candidate k */
    int unclean;            /* a run since the last wait started from bytes that were neither S nor poison */
    int first_wrong;        /* the first run since the last wait to end other than O1: its who + 1; 0 none */
    unsigned runs;          /* runs of set 2 since the last wait */
    int poisoned_input;     /* the run being made started from poison somewhere */
    int ambiguous;          /* the first run to end other than O1 was the original's on poison: O3 finding
                             * that poison may not stand, or (in a timed run) the original differing from
                             * itself; which, only the protocol says */
    int was_unclean, was_first_wrong, was_ambiguous; /* the above as the last wait left them */
    unsigned were_runs;
};

/* The protocol wrote bytes [off, off + len) of set 2's allocation `alloc`:
 * from set `src` (the snapshot: S), or poison. A copy from another set
 * leaves them neither. */
static void track_wrote(host *h, unsigned alloc, size_t off, size_t len, unsigned src, int poison)
{
    for (size_t b = off; b < off + len; b++) {
        h->track->poisoned[alloc][b] = (uint8_t)(poison ? 1 : src == DRK_SET_SNAPSHOT ? 0 : 2);
        h->track->value[alloc][b] = h->mem[DRK_SET_WORK][alloc][b];
    }
}

/* A run of set 2 must start from S, with poison where the protocol put it
 * since (a byte a run changed and nothing restored is neither). */
static void track_before(host *h)
{
    h->track->poisoned_input = 0;
    for (unsigned a = 0; a < h->n; a++)
        for (size_t b = 0; b < h->size[a]; b++) {
            uint8_t now = h->mem[DRK_SET_WORK][a][b], p = h->track->poisoned[a][b];
            if (p == 2 || (p == 1 ? now != h->track->value[a][b] : now != h->mem[DRK_SET_SNAPSHOT][a][b]))
                h->track->unclean = 1;
            h->track->poisoned_input |= p == 1;
        }
}

static void track_after(host *h)
{
    struct track *t = h->track;
    t->runs++;
    if (t->first_wrong || t->ambiguous)
        return;
    for (unsigned a = 0; a < h->n; a++)
        if (memcmp(h->mem[DRK_SET_WORK][a], h->mem[DRK_SET_REFERENCE][a], h->size[a]) != 0) {
            if (t->who == 0 && t->poisoned_input)
                t->ambiguous = 1;
            else
                t->first_wrong = t->who + 1;
            return;
        }
}

static int fails(host *h, int op)
{
    h->calls[op]++;
    if (h->fail_at && h->fail_op == op && (int)h->calls[op] == h->fail_at) {
        h->fired = 1;
        return 1;
    }
    return 0;
}

static size_t op_size(void *self, unsigned alloc) { return ((host *)self)->size[alloc]; }

static int op_copy(void *self, unsigned dst, unsigned src)
{
    host *h = self;
    if (fails(h, OP_COPY))
        return -1;
    for (unsigned i = 0; i < h->n; i++) {
        memcpy(h->mem[dst][i], h->mem[src][i], h->size[i]);
        h->copied += h->size[i];
        if (h->track && dst == DRK_SET_WORK)
            track_wrote(h, i, 0, h->size[i], src, 0);
    }
    return 0;
}

/* Counted as a copy (a failure armed on copies hits these too). */
static int op_copy_part(void *self, unsigned dst, unsigned src, unsigned alloc, size_t off, size_t len)
{
    host *h = self;
    if (fails(h, OP_COPY) || alloc >= h->n || off + len > h->size[alloc] || dst == DRK_SET_SNAPSHOT)
        return -1;
    memcpy(h->mem[dst][alloc] + off, h->mem[src][alloc] + off, len);
    h->copied += len;
    if (h->track && dst == DRK_SET_WORK)
        track_wrote(h, alloc, off, len, src, 0);
    return 0;
}

static int op_poison(void *self, unsigned set, unsigned alloc, size_t off, size_t len, uint64_t pattern)
{
    host *h = self;
    if (fails(h, OP_POISON) || off + len > h->size[alloc])
        return -1;
    for (size_t i = 0; i < len && !h->poison_noop; i++)
        h->mem[set][alloc][off + i] = (uint8_t)(pattern >> (8 * (i % 8)));
    if (h->track && set == DRK_SET_WORK)
        track_wrote(h, alloc, off, len, DRK_SETS, 1);
    return 0;
}

static int op_run(void *self, unsigned set, int variant)
{
    host *h = self;
    if (fails(h, OP_RUN))
        return -1;
    uint8_t *m[MAXA];
    for (unsigned i = 0; i < MAXA; i++)
        m[i] = h->mem[set][i];
    if (h->track && set == DRK_SET_WORK)
        track_before(h);
    (variant ? h->variant : h->original)(h, m);
    h->runs++;
    if (h->track && set == DRK_SET_WORK)
        track_after(h);
    return 0;
}

/* Done at once (the operations before it have been): the result waits in
 * its slot for the wait, as drk's compare kernel's does on the GPU. */
static int op_compare(void *self, unsigned a, unsigned b, unsigned alloc, unsigned slot)
{
    host *h = self;
    if (fails(h, OP_COMPARE) || slot >= DRK_PROOF_SLOTS)
        return -1;
    drk_diff *out = &h->slot[slot];
    *out = (drk_diff){0, UINT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < h->size[alloc]; i++)
        if (h->mem[a][alloc][i] != h->mem[b][alloc][i]) {
            if (!out->ndiff)
                out->first = i;
            out->last = i;
            out->ndiff++;
        }
    if (h->compare_lies && out->ndiff)
        out->last = h->size[alloc];
    h->queued[slot] = 1;
    return 0;
}

static int op_wait(void *self, drk_diff *out, unsigned nslots)
{
    host *h = self;
    static unsigned char equal[DRK_PROOF_SLOTS];
    int bad = fails(h, OP_WAIT);
    for (unsigned i = 0; i < DRK_PROOF_SLOTS; i++)
        equal[i] = h->queued[i] && h->slot[i].ndiff == 0;
    drk_proof_work_waited(&h->work, equal, bad ? 0 : DRK_PROOF_SLOTS);
    if (bad)
        return -1;
    for (unsigned i = 0; i < nslots; i++) {
        if (!h->queued[i])
            return -1; /* read before it was compared: the protocol's bug */
        out[i] = h->slot[i];
    }
    memset(h->queued, 0, sizeof h->queued);
    if (h->track) {
        struct track *t = h->track;
        t->was_unclean = t->unclean, t->was_first_wrong = t->first_wrong, t->were_runs = t->runs;
        t->was_ambiguous = t->ambiguous;
        t->unclean = t->first_wrong = t->ambiguous = 0, t->runs = 0;
    }
    return 0;
}

static uint32_t *u32(uint8_t *p) { return (uint32_t *)(void *)p; }

/* Allocations of ELEMS words each; S's words: alloc a, word i = init(a, i). */
static inline void host_init(host *h, unsigned n, kernel original, uint32_t (*init)(unsigned a, unsigned i))
{
    memset(h, 0, sizeof *h);
    h->n = n;
    h->original = original;
    drk_proof_work_init(&h->work, 1);
    for (unsigned a = 0; a < n; a++) {
        h->size[a] = ELEMS * 4;
        for (unsigned i = 0; i < ELEMS; i++)
            u32(h->mem[DRK_SET_SNAPSHOT][a])[i] = init(a, i);
    }
}

#endif
