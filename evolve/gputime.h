/* GPU time per kernel and launch shape, and per round, from timed records
 * of what ran on the GPU (CUPTI's activity records, evolve/cupti.h; any
 * source of start and end times will do, which is how the tests feed it).
 *
 * A kernel-shape is a kernel's name with its grid, block and dynamic shared
 * memory: the launch shape drk's registry counts launches by, less the entry
 * point. Its times go into log buckets (DRK_TIME_SUB a doubling, at most 6%
 * wide), so launches, total, min, median, p95 and max cost no per-launch
 * storage. Nothing here runs on a launch: records arrive on CUPTI's thread
 * (or whoever flushes it), rounds close on drk's worker thread, and one lock
 * serializes them.
 *
 * A round is the time between two boundaries (an NVTX range or mark the
 * program names, cuProfilerStop, or a period). Per round: wall time, GPU busy
 * time (the union of kernel and copy intervals) and its largest idle gaps,
 * kernel and copy time, the top kernel-shapes by time, and the memory
 * figures the caller hands in at the boundary. The last DRK_ROUNDS_KEPT
 * rounds are kept whole; older ones are merged into one summary, so a
 * week-long run holds a bounded amount (about 100 KiB of rounds). A record
 * counts in the round its start time falls in: a round's end is marked
 * first, and it closes once the records made before the mark have come in;
 * one arriving after its round closed counts in the oldest open one (late).
 *
 * A kernel-shape also keeps its theoretical occupancy, handed in from drk's
 * thread (evolve/occupancy.h), one a build of its function; each round
 * takes the build its records say ran, for the occupancy_drop finding. */
#ifndef DRK_EVOLVE_GPUTIME_H
#define DRK_EVOLVE_GPUTIME_H

#include <stddef.h>
#include <stdint.h>

#define DRK_TIME_SUB 16                         /* buckets per doubling: under 6.3% wide */
#define DRK_TIME_BUCKETS (38 * DRK_TIME_SUB)    /* 1 ns to ~4.6 minutes */
#define DRK_TIME_ENTRIES 4096                   /* kernel-shapes timed; later ones are counted as untracked */
#define DRK_ROUNDS_KEPT 64
#define DRK_ROUND_TOP 32                        /* kernel-shapes kept per round */
#define DRK_ROUND_GAPS 4                        /* largest idle gaps kept per round */

typedef struct drk_time_hist {
    uint64_t n, total_ns, min_ns, max_ns;
    uint32_t bucket[DRK_TIME_BUCKETS];
} drk_time_hist;

void drk_time_hist_add(drk_time_hist *h, uint64_t ns);
void drk_time_hist_merge(drk_time_hist *into, const drk_time_hist *from);
/* The time below which a share `q` (0..1) of the samples lie, to within a
 * bucket (the bucket's middle); 0 when empty. */
uint64_t drk_time_hist_quantile(const drk_time_hist *h, double q);

typedef struct drk_time_stats {
    uint64_t n, total_ns, min_ns, median_ns, p95_ns, max_ns;
} drk_time_stats;
drk_time_stats drk_time_hist_stats(const drk_time_hist *h);

/* A kernel-shape: its name and geometry. */
typedef struct drk_time_key {
    const char *name;
    uint32_t grid[3], block[3], shared_bytes;
} drk_time_key;

/* ---- Feeding it (any thread) ---- */

/* Starts a fresh accounting whose first round opens at `start_ns` (the
 * records' clock). Called once before records arrive; again in a test. */
void drk_gputime_reset(uint64_t start_ns);
/* In a fork's child: the same, never waiting on a lock a parent's thread
 * held at the fork, nor freeing what it was changing. */
void drk_gputime_after_fork_child(void);

void drk_gputime_kernel(const drk_time_key *k, uint64_t start_ns, uint64_t end_ns);
/* The same, with what the record says the launched function was built with
 * (CUPTI's registers a thread and static shared memory; 0 and 0: unknown):
 * which of the shape's occupancies below the round ran at. */
void drk_gputime_kernel_built(const drk_time_key *k, uint32_t regs, uint32_t static_shared, uint64_t start_ns,
                              uint64_t end_ns);
enum { DRK_COPY_MEMCPY, DRK_COPY_MEMSET };
void drk_gputime_copy(int kind, uint64_t bytes, uint64_t start_ns, uint64_t end_ns);
/* Kernel records starting in [from_ns, to_ns] are not timed (counted as
 * excluded): launches sampled for counters (evolve/counters.h), whose
 * replays are not the program's time. A window from the same `from_ns`
 * again updates its end (opened with UINT64_MAX, closed when known). The
 * last 8 are kept. */
void drk_gputime_exclude(uint64_t from_ns, uint64_t to_ns);
/* Records the source lost (CUPTI's dropped records). */
void drk_gputime_dropped(uint64_t n);
/* Kernel records stop (`on` 0) or start again (1) at `at_ns`: a round that
 * overlaps a stretch without them is not a round of the program's time (it
 * would read as an idle GPU) and closes unkept: no findings, not in the
 * rounds, counted as unsampled. */
void drk_gputime_sampling(int on, uint64_t at_ns);
/* A record of drk's own work on the GPU (its trials, on its own stream):
 * counted apart, in no kernel's row and not in a round's busy time; a
 * round and each of its gaps say how much of them it took (drk_ns), so
 * that an idle gap drk's trials filled is not laid at the program's door
 * unsaid. */
void drk_gputime_own(uint64_t start_ns, uint64_t end_ns);

/* What the caller knows of memory at a boundary. */
typedef struct drk_round_memory {
    uint64_t live_bytes, reserved_bytes, pages_moved, out_of_memory;
} drk_round_memory;

/* The newest round ends at `end_ns` for `why` (a short static text: "nvtx",
 * "cuProfilerStop", "period", "exit"), with the memory of that moment; a new
 * one opens there. The ended round stays open to records that started in
 * it until drk_gputime_close (at most 64 wait; a 65th mark closes the
 * oldest). A boundary at or before the newest round's start is ignored (0
 * returned); else 1. */
int drk_gputime_mark(uint64_t end_ns, const char *why, const drk_round_memory *mem);

/* Closes the ended rounds whose end is at or before `through_ns`, their
 * records in (the caller flushed the source after their marks); the number
 * closed and kept (not unsampled). UINT64_MAX closes every ended round. */
unsigned drk_gputime_close(uint64_t through_ns);
/* Whether drk_gputime_close(through_ns) would close a round. */
int drk_gputime_closable(uint64_t through_ns);

/* drk_gputime_mark and drk_gputime_close at once. */
int drk_gputime_round_end(uint64_t end_ns, const char *why, const drk_round_memory *mem);

/* ---- Occupancy (evolve/occupancy.c hands it in, from drk's thread) ---- */

/* What bounds the blocks an SM holds at once, by drk's reckoning of the
 * function's attributes against the device's limits. */
typedef enum drk_occ_limit {
    DRK_OCC_LIMIT_UNKNOWN,
    DRK_OCC_LIMIT_REGISTERS, /* registers a thread */
    DRK_OCC_LIMIT_SHARED,    /* static and dynamic shared memory a block */
    DRK_OCC_LIMIT_WARPS,     /* block size: the SM's warps */
    DRK_OCC_LIMIT_BLOCKS,    /* the SM's blocks */
    DRK_OCC_LIMIT_NONE,      /* every warp of the SM is taken */
} drk_occ_limit;

/* A kernel-shape's theoretical occupancy: active warps an SM (blocks the
 * driver's calculator says fit, times warps a block) over the SM's warps.
 * max_warps_per_sm 0: unknown. */
typedef struct drk_occupancy {
    double theoretical;                              /* 0..1 */
    uint32_t blocks_per_sm, warps_per_block, max_warps_per_sm;
    uint32_t regs, static_shared, dynamic_shared;    /* the function's registers a thread; bytes a block */
    uint32_t block_threads;
    uint32_t limit;                                  /* drk_occ_limit */
} drk_occupancy;

#define DRK_OCC_VARIANTS 4 /* occupancies kept a kernel-shape: functions of other registers or static shared memory */

/* Kernel-shape `k` has occupancy `o` when launched as a function of o->regs
 * registers and o->static_shared bytes of static shared memory; a kernel
 * reloaded with more registers is another such variant of the same shape.
 * A round takes the variants its records say ran (the lowest of them), or
 * the latest handed in when its records do not say. */
void drk_gputime_occupancy(const drk_time_key *k, const drk_occupancy *o);

/* The latest occupancy handed in for `k`; 0 if none. */
int drk_gputime_occupancy_of(const drk_time_key *k, drk_occupancy *out);

/* Words for o's limit: "registers: 128 a thread", ...; into buf. */
const char *drk_occupancy_limit_text(const drk_occupancy *o, char *buf, size_t n);
/* "registers", "shared_memory", "block_size", "blocks", "none"; NULL: unknown. */
const char *drk_occupancy_limit_name(uint32_t limit);

/* ---- Reading it (the report; one caller at a time) ---- */

typedef struct drk_time_row {
    drk_time_key key;
    drk_time_stats stats;
} drk_time_row;

typedef struct drk_round_gap {
    uint64_t ns;                    /* idle time */
    const char *after, *before;     /* what ran before and after it: a kernel's name, or "memcpy"/"memset"; NULL at the round's edges */
    uint64_t drk_ns;                /* of it, drk's own work on the GPU (its trials, in its own context) */
} drk_round_gap;

typedef struct drk_round {
    uint64_t index;                 /* 0, 1, ... over the whole run */
    const char *why;                /* what ended it */
    uint64_t start_ns, end_ns;
    uint64_t busy_ns;               /* union of kernel and copy intervals, within the round */
    uint64_t drk_ns;                /* union of drk's own records' intervals (drk_gputime_own) within it, not in busy_ns */
    uint64_t kernel_ns, copy_ns;    /* sums */
    uint64_t kernels, copies;       /* records */
    drk_round_gap gaps[DRK_ROUND_GAPS];
    unsigned ngaps;
    drk_round_memory memory;
    drk_time_row top[DRK_ROUND_TOP]; /* by total time, most first */
    unsigned ntop;
    uint64_t other_ns, other_kernels; /* the kernel-shapes past the top */
} drk_round;

/* Rounds merged into one summary once DRK_ROUNDS_KEPT newer ones closed. */
typedef struct drk_rounds_merged {
    uint64_t rounds, wall_ns, busy_ns, kernel_ns, copy_ns, kernels, copies;
} drk_rounds_merged;

typedef struct drk_gputime_totals {
    uint64_t kernels, copies;        /* records */
    uint64_t kernel_ns, copy_ns, copy_bytes;
    uint64_t untracked;              /* kernel records past DRK_TIME_ENTRIES kernel-shapes */
    uint64_t dropped;
    uint64_t late;                   /* records that came after their round closed */
    uint64_t excluded;               /* kernel records in excluded windows, or of no duration: not timed */
    uint64_t unsampled;              /* rounds closed unkept: kernel records were off in them */
    uint64_t own, own_ns;            /* records of drk's own stream, and their time */
    size_t entries;                  /* kernel-shapes timed */
} drk_gputime_totals;

drk_gputime_totals drk_gputime_totals_get(void);

/* Kernel-shapes, most total time first, into `out` (at most `max`); the
 * number written. The names stay valid until the next reset. */
size_t drk_gputime_rows(drk_time_row *out, size_t max);

/* Closed rounds, oldest kept first, and the summary of older ones. */
size_t drk_gputime_rounds(const drk_round **out, size_t max);
drk_rounds_merged drk_gputime_merged(void);
/* A load at `at_ns` (the records' clock) whose `kernels` kernels the driver
 * compiled from PTX, taking `load_ns`: a finding of the round it falls in,
 * judged when that round closes. */
void drk_gputime_jit(uint64_t at_ns, const char *how, unsigned kernels, uint64_t load_ns);

/* The findings so far (evolve/findings.h), in the order they appeared. */
struct drk_finding;
size_t drk_gputime_findings(const struct drk_finding **out, size_t max);

/* The open round's start, and the number of rounds closed so far. */
uint64_t drk_gputime_open_since(void);
uint64_t drk_gputime_rounds_closed(void);

#endif
