/* Findings: named things that went wrong, each with its evidence and the
 * round it appeared in, following the diagnosis guide a user would: is the
 * GPU idle (and where), did a kernel get slower than its own recent best, is
 * a hot kernel running at a new launch shape (a new access pattern) or at a
 * lower theoretical occupancy, is memory fragmenting or running out. Judged as each round closes
 * (evolve/gputime.c hands each closed round in); quiet on a steady workload:
 * a finding is one entry however many rounds it lasts (first and last round,
 * rounds seen, and the evidence: the worst round's, or for gpu_idle the
 * latest's, the steady state rather than the start-up). Bounded:
 * DRK_FINDINGS_MAX entries. */
#ifndef DRK_EVOLVE_FINDINGS_H
#define DRK_EVOLVE_FINDINGS_H

#include <stdint.h>

#include "evolve/gputime.h"

#define DRK_FINDINGS_MAX 64
#define DRK_BUSY_LOW 0.80          /* GPU busy below this share of a round's wall time */
#define DRK_SLOWER 1.10            /* a kernel-shape's median this much above its recent best */
#define DRK_RECENT_ROUNDS 20       /* "recent": the last this many rounds it ran in */
#define DRK_HOT_SHARE 0.01         /* a kernel-shape of at least this share of a round's kernel time */
/* A slower kernel worth a finding: this share of the round's kernel time,
 * and slower by at least this much in absolute terms (microsecond kernels
 * jitter by more than 10% on an H200: +13% of 1.4 us seen on a steady PPO). */
#define DRK_SLOWER_SHARE 0.05
/* A new shape worth a finding: of a kernel that ran before, this share of
 * the round's kernel time. Keyed by the kernel, not the shape. */
#define DRK_NEW_SHAPE_SHARE 0.05
/* New shapes count from this round on: a trainer's first steps choose
 * their own (cuBLAS picked a GEMM shape in PPO's second step on the H200). */
#define DRK_WARMUP_ROUNDS 2
#define DRK_SLOWER_MIN_NS 1000
#define DRK_FRAG_RISE 0.10         /* fragmentation (1 - live/reserved) up by this much */
/* An occupancy drop worth a finding: a kernel-shape of this share of the
 * round's kernel time (below it, even halving its speed moves the round by
 * little), whose theoretical occupancy is below its best of earlier rounds
 * (a new shape: its kernel's best at other shapes) by at least this much of
 * the SM's warps: 1/8, 8 warps of an H200's 64, about what one block fewer
 * costs at common block sizes; a register or two more moves it less or not
 * at all. Theoretical occupancy has no noise: the margin is for what is
 * worth saying. */
#define DRK_OCC_SHARE 0.05
#define DRK_OCC_DROP 0.125

typedef enum drk_finding_kind {
    DRK_FINDING_GPU_IDLE,      /* busy < 80%: the program keeps the GPU waiting (CPU-bound, sync, gaps) */
    DRK_FINDING_KERNEL_SLOWER, /* a kernel-shape's median >= 10% (and 1 us) above its best of the last 20 rounds */
    DRK_FINDING_NEW_SHAPE,     /* a hot kernel launched at a shape it had not used before (one entry a kernel) */
    DRK_FINDING_FRAGMENTATION, /* reserved memory grows away from live memory */
    DRK_FINDING_OUT_OF_MEMORY, /* the device pool answered out of memory (retries rising) */
    DRK_FINDING_JIT_COMPILES,  /* loads the driver had to compile PTX for (no SASS for the device) */
    DRK_FINDING_OCCUPANCY_DROP, /* a hot kernel-shape's theoretical occupancy 1/8 of the SM below its kernel's best before (one entry a kernel) */
    DRK_FINDING_KINDS
} drk_finding_kind;

/* What a closed round's kernel-shape is, for the judging. */
typedef struct drk_finding_shape {
    drk_time_key key;
    uint64_t launches, total_ns, median_ns;
    uint64_t best_recent_ns;   /* its best median over the last rounds it ran in; 0: none */
    uint64_t rounds_before;    /* rounds it ran in before this one */
    int name_seen_before;      /* another shape of the same kernel ran in an earlier round */
    drk_occupancy occ;         /* its theoretical occupancy in this round; max_warps_per_sm 0: unknown */
    /* What that is held against: the better of its own best in earlier
     * rounds and its kernel's best at other shapes before this shape first
     * ran; the shape and the last round of that best. Unknown: nothing to
     * hold it to. */
    drk_occupancy occ_before;
    drk_time_key occ_before_key;
    uint64_t occ_before_round;
} drk_finding_shape;

typedef struct drk_finding {
    drk_finding_kind kind;
    const char *name;          /* "gpu_idle", "kernel_slower", ... */
    uint64_t first_round, last_round, rounds;
    drk_time_key key;          /* the kernel-shape, for kernel findings (name NULL otherwise) */
    double value, reference;   /* the evidence: e.g. busy share and 0.80; median and best, in ns */
    char evidence[2048];       /* the same, in words */
} drk_finding;

/* Starts afresh (with gputime's reset). */
void drk_findings_reset(void);

/* Round `r` closed with these kernel-shapes. Called under gputime's lock:
 * the names stay valid until gputime's reset. */
void drk_findings_round(const drk_round *r, const drk_finding_shape *shapes, size_t n);

/* A load in round `round` (`how`: the call and its number) had `kernels`
 * kernels compiled from PTX by the driver and took `load_ns`. Under
 * gputime's lock. */
void drk_findings_jit(uint64_t round, const char *how, unsigned kernels, uint64_t load_ns);

/* Findings so far, in the order they first appeared. */
size_t drk_findings_get(const drk_finding **out, size_t max);

#endif
