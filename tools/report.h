/* `drk report`: the numbers of one report (docs/report.md, version 1), or of
 * several merged. Strings point into the parsed documents, which live until
 * the command ends. */
#ifndef DRK_TOOLS_REPORT_H
#define DRK_TOOLS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/json_read.h"

/* The report version this reader understands. */
#define REPORT_VERSION 1

typedef struct rep_shape {
    uint64_t grid[3], block[3], shared_bytes, launches;
} rep_shape;

typedef struct rep_kernel {
    const char *name;
    uint64_t handles, launches, other_shape_launches;
    uint64_t gpu_ns, gpu_launches; /* 0 without GPU times (and in older reports) */
    rep_shape *shapes; /* most launched first */
    size_t nshapes;
} rep_kernel;

typedef struct rep_count {
    const char *name;
    uint64_t calls;
} rep_count;

typedef struct rep_family {
    const char *name;
    uint64_t total;
    rep_count *names; /* in document order */
    size_t nnames;
} rep_family;

typedef struct rep_memkind {
    const char *name;
    uint64_t allocs, failed, bytes, frees, failed_frees;
} rep_memkind;

/* What the report says drk knows of the launched kernels (kernels.facts,
 * absent from reports of drk before it read images). */
typedef struct rep_facts {
    int present;
    uint64_t launched, with_layout, from_image, equal, differs, with_ptx, ptx_for_device;
    uint64_t device_sm; /* 0 if unknown; when processes differ, the first */
} rep_facts;

/* Latency histograms: bucket b counts samples in [2^b, 2^(b+1)) ns. */
#define REP_LATENCY_BUCKETS 64

/* drk's device pool (device_pool, absent from reports of drk before it had
 * one). Added up over processes, peaks are sums of per-process peaks. */
typedef struct rep_dpool {
    int present;
    uint64_t processes; /* reports whose pool served allocations */
    uint64_t allocs, frees, failed_allocs, out_of_memory, bad_frees, driver_allocs;
    uint64_t peak_live_bytes, peak_reserved_bytes;
    uint64_t pages_created, pages_moved, pages_released, defrag_events;
    /* Absent from reports of an older drk (0): the page grower's counts and
     * threads' own shards. */
    uint64_t pages_made_ahead, pages_taken_ahead, pages_created_in_calls, growth_waits, thread_shards;
    uint64_t handles_created, handles_moved; /* the driver handles those pages were (0: an older drk) */
    uint64_t latency_samples, alloc_ns[REP_LATENCY_BUCKETS], free_ns[REP_LATENCY_BUCKETS];
} rep_dpool;

/* The pinned host pool (host_pool, likewise optional). */
typedef struct rep_hpool {
    int present;
    uint64_t processes; /* reports whose pool served allocations */
    uint64_t allocs, frees, bad_frees, peak_live_bytes, pinned_bytes, chunks, driver_fallbacks, driver_direct;
    uint64_t reuse_waits, reuse_wait_us; /* 0 in reports before 2026-12-05 */
} rep_hpool;

/* A kernel-shape's GPU times: a row of gpu_time.by_kernel or of a round's
 * top. Added up over processes, median and p95 are those of the process
 * with the most launches of the shape (log buckets do not add up from
 * quantiles). */
typedef struct rep_time_row {
    const char *name;
    uint64_t grid[3], block[3], shared_bytes;
    uint64_t launches, total_ns, min_ns, median_ns, p95_ns, max_ns; /* max_ns: 0 in a round's top */
    uint64_t quantile_launches; /* launches of the process median_ns and p95_ns are from */
    size_t seq;                 /* totals_merge's scratch: the row's place in its input */
} rep_time_row;

/* A kernel-shape's hardware counters: a row of gpu_time.counters.by_kernel,
 * the latest sample's values. Added up over processes: the mean of the
 * processes' values (each process once: its row holds one sample's
 * values), sectors per request over the processes that made such requests;
 * samples summed, round the largest. */
typedef struct rep_counter_row {
    const char *name;
    uint64_t grid[3], block[3], shared_bytes;
    double dram_pct, occupancy_pct;
    double ld_sectors_per_request, st_sectors_per_request; /* < 0: no such requests */
    uint64_t samples, round;
    uint64_t gpu_ns; /* totals_merge's: the shape's GPU time in gpu_time's rows, for the order */
    size_t seq;      /* totals_merge's scratch: the row's place in its input */
} rep_counter_row;

/* The text of gpu_time.counters.off_reason when counters were not asked
 * for (shim/report_time.c). */
#define REP_COUNTERS_NOT_ASKED "DRK_PROFILE is not counters"

/* Hardware counters (gpu_time.counters, absent from reports of drk before
 * DRK_PROFILE=counters); added up over processes. */
typedef struct rep_counters {
    int present;
    uint64_t reports;   /* reports with gpu_time.counters */
    uint64_t processes; /* those with counters on (enabled) */
    uint64_t asked;     /* those with DRK_PROFILE=counters: on, or off for a reason other than not being asked */
    const char *off_reason; /* the first report's that asked and has one (else the first's) */
    uint64_t samples, discarded, cost_ns, passes; /* passes: the largest */
    double budget;      /* the first report's with counters on (else the first's) */
    rep_counter_row *rows; /* most GPU time first (gpu_time's rows), then as first sampled */
    size_t nrows;
} rep_counters;

/* GPU times (gpu_time, absent from reports of drk before it timed kernels)
 * with the sums over its process's rounds; added up over processes. */
typedef struct rep_gpu {
    int present;
    uint64_t reports;   /* reports with gpu_time */
    uint64_t processes; /* those with times (gpu_time.enabled) */
    uint64_t stopped_processes;
    const char *off_reason, *source, *stopped; /* the first report's that has one */
    uint64_t kernels, kernel_ns, copies, copy_ns, copy_bytes, dropped, untracked, late;
    uint64_t rounds, wall_ns, busy_ns; /* rounds.list and rounds.merged together */
    int has_excluded;   /* gpu_time.excluded is in a report (absent from older ones) */
    uint64_t excluded;  /* launches sampled for counters, not timed */
    int has_unsampled;  /* gpu_time.unsampled_rounds is in a report */
    uint64_t unsampled; /* rounds closed while kernel records rested (evolution only) */
    int has_drk;        /* gpu_time.drk_records is in a report */
    uint64_t drk_records, drk_ns; /* drk's own stream's records (its trials), counted apart */
    rep_time_row *rows; /* most total time first */
    size_t nrows;
    rep_counters counters;
} rep_gpu;

typedef struct rep_gap {
    uint64_t ns;
    const char *after, *before; /* NULL at the round's edges */
    uint64_t drk_ns;            /* of it, drk's own trials (0 in reports of an older drk) */
} rep_gap;

typedef struct rep_round {
    uint64_t index;
    const char *ended_by;
    uint64_t start_ns, end_ns, wall_ns, busy_ns, kernel_ns, copy_ns, kernels, copies;
    uint64_t drk_ns; /* drk's own trials in the round (0 in reports of an older drk) */
    uint64_t live_bytes, reserved_bytes, pages_moved, out_of_memory;
    rep_gap *gaps; /* largest first */
    size_t ngaps;
    rep_time_row *top; /* most time first */
    size_t ntop;
    uint64_t other_kernels, other_ns;
} rep_round;

/* A process's rounds (rounds, optional like gpu_time); never merged. */
typedef struct rep_rounds {
    int present;
    uint64_t closed, kept, marked;
    uint64_t merged_rounds, merged_wall_ns, merged_busy_ns, merged_kernel_ns, merged_copy_ns, merged_kernels,
        merged_copies;
    rep_round *list; /* oldest first */
    size_t nlist;
} rep_rounds;

/* A kernel-shape the evolution engine looked at: a row of
 * evolve.by_kernel. Never merged: the combined view lists every
 * process's rows, each with its pid. */
typedef struct rep_evolve_row {
    const char *name;
    uint64_t grid[3], block[3], shared_bytes;
    const char *state;   /* capturing, searching, settled, refused, failed; a newer drk may add states */
    const char *why;     /* refused, failed, or the last rejection; NULL or "": none */
    const char *serving; /* the served variant, "default" if none */
    uint64_t captures, rounds, tried, proven, rejected, trusted, builds, trial_ns, snapshot_bytes;
    uint64_t same_code; /* 0 in reports before it */
    uint64_t hops;      /* the search's plateau hops (0 in reports before it) */
    uint64_t saved_ns; /* GPU time its served variant saved, estimated (0 in reports of an older drk) */
    uint64_t trial_bytes; /* bytes its trials copied, poisoned and compared (0 in reports of an older drk) */
    double speedup, build_ms, build_ms_max; /* speedup: 1 serving the default */
    double run_speedup;    /* timed on the program's own launches; 0: not (then speedup is replay_speedup) */
    double replay_speedup; /* on replays in drk's context; the speedup of older reports */
    uint64_t pid;        /* its process's */
    size_t seq;          /* totals_merge's scratch: the row's place in its input */
} rep_evolve_row;

/* The text of evolve.off_reason when DRK_EVOLVE was not asked for
 * (shim/report_evolve.c). */
#define REP_EVOLVE_NOT_ASKED "DRK_EVOLVE=0"

/* The evolution engine (evolve, absent from reports of drk before
 * DRK_EVOLVE); added up over processes: counts summed, trial_share
 * recomputed from the sums, researched_share the mean over the processes
 * with evolve on weighted by their rounds. */
typedef struct rep_evolve {
    int present;
    uint64_t reports;   /* reports with evolve */
    uint64_t processes; /* those with evolve on (enabled) */
    uint64_t asked;     /* those with DRK_EVOLVE=1: on, or off for a reason other than not being asked */
    const char *off_reason; /* the first report's that asked and has one (else the first's) */
    double budget;      /* the first report's with evolve on (else the first's) */
    uint64_t rounds, trial_ns, program_kernel_ns;
    uint64_t own_context_mib; /* device memory of drk's context for trials (the largest of the processes') */
    uint64_t gave_back;       /* processes whose evolution gave its device memory back (the program ran out) */
    uint64_t saved_ns;        /* GPU time served variants saved, estimated (summed) */
    uint64_t trial_bytes;     /* bytes the trials copied, poisoned and compared (summed; 0 before it) */
    double trial_share, researched_share;
    uint64_t kernels, evolved, refused, failed;
    uint64_t captured, snapped, moved, busy, mismatched; /* evolve.captures */
    rep_evolve_row *rows; /* most evolved first (report_merge.c's evolve_row_order), then as listed */
    size_t nrows;
} rep_evolve;

/* The counters of a process, or of several processes added up. */
typedef struct rep_totals {
    uint64_t launches, failed_launches, untracked_launches;
    rep_facts facts;
    rep_dpool dpool;
    rep_hpool hpool;
    rep_gpu gpu;
    rep_evolve evolve;
    rep_kernel *kernels; /* most launched first */
    size_t nkernels;
    rep_family *families;
    size_t nfamilies;
    rep_memkind *memory;
    size_t nmemory;
} rep_totals;

/* A finding (findings, absent from reports of drk before it judged
 * rounds): what went wrong, in which rounds, with the evidence in words. */
typedef struct rep_finding {
    const char *name;                            /* "gpu_idle", ...; a newer drk may add names */
    uint64_t first_round, last_round, rounds;    /* rounds: those it was seen in */
    const char *kernel;                          /* NULL: not about a kernel-shape */
    uint64_t grid[3], block[3], shared_bytes;
    double value, reference;
    const char *evidence;
} rep_finding;

typedef struct rep_findings {
    int present;
    rep_finding *list; /* in the order they first appeared */
    size_t n;
} rep_findings;

typedef struct rep_process {
    char *path;
    json_value doc;
    const char *program, *exe, *drk_version, *driver_library;
    const char *driver_path; /* NULL: drk never opened the driver */
    uint64_t pid, forked_from, start_ns, end_ns;
    int has_driver_version;
    int64_t driver_version;
    rep_rounds rounds;
    rep_findings findings; /* never merged, like rounds */
    rep_totals t;
} rep_process;

enum { REPORT_OK = 0, REPORT_NOT_A_REPORT = 1, REPORT_ERROR = -1 };

/* Read the report at `path`. REPORT_NOT_A_REPORT: valid JSON whose top level
 * is not {"schema": "drk-report", ...}; `why` says what it is. REPORT_ERROR:
 * the reason is in `why` (prefixed with the path). */
int report_load(const char *path, rep_process *out, char *why, size_t whylen);
void report_release(rep_process *p);

/* Add up `n` sets of counters: kernels merged by name (their shapes by
 * grid, block and shared bytes), call names and memory kinds by name, GPU
 * time rows and gpu_time.counters' rows by kernel-shape (name, grid,
 * block, shared bytes); evolve's rows of every part, most evolved first.
 * With
 * n == 1 this puts one report in order. Returns -1 when out of memory. */
int totals_merge(const rep_totals *const *parts, size_t n, rep_totals *out);

/* All kernel time of `g`, for shares: kernel_ns (which counts untracked
 * kernel-shapes too), else the rows' sum (a report that lacks it). */
uint64_t gpu_kernel_total(const rep_gpu *g);
void totals_release(rep_totals *t);

/* One side of `drk report --compare A B`: the reports at a path (a file or
 * a directory), parents first, and their sum. */
typedef struct rep_side {
    const char *path;
    const rep_process *const *procs;
    size_t n;
    const rep_totals *t;
} rep_side;

/* A kernel on one side of a comparison, over all its shapes. */
typedef struct rep_cmp_count {
    int present;
    uint64_t ns, launches; /* ns: GPU time, 0 unless both sides have times */
} rep_cmp_count;

typedef struct rep_cmp_kernel {
    const char *name;
    rep_cmp_count a, b;
} rep_cmp_kernel;

/* A round index both sides have: the sums over a side's processes that
 * have a round of that index. */
typedef struct rep_round_sum {
    uint64_t wall_ns, busy_ns, kernel_ns;
} rep_round_sum;

typedef struct rep_cmp_round {
    uint64_t index;
    rep_round_sum a, b;
} rep_cmp_round;

typedef struct rep_compare {
    int by_time;             /* both sides have GPU times: kernels by time (rows of gpu_time), else launches */
    rep_cmp_kernel *kernels; /* the larger side's count first */
    size_t nkernels;
    rep_cmp_round *rounds; /* by index */
    size_t nrounds;
} rep_compare;

/* Kernels matched by name, rounds by index. Returns -1 when out of memory. */
int compare_build(const rep_side *a, const rep_side *b, rep_compare *out);
void compare_release(rep_compare *c);

/* Output. `top`: kernels listed per table (and the last rounds listed), 0
 * for all. */
void print_process(FILE *f, const rep_process *p, size_t top);
void print_combined(FILE *f, const rep_process *const *procs, size_t n, const rep_totals *t, size_t top);
void print_json(FILE *f, const rep_process *const *procs, size_t n, const rep_totals *t, size_t top);
/* --compare: `top` kernels, and the last `top` rounds both sides have. */
void print_compare(FILE *f, const rep_side *a, const rep_side *b, const rep_compare *c, size_t top);
void print_compare_json(FILE *f, const rep_side *a, const rep_side *b, const rep_compare *c, size_t top);
/* `drk report --html FILE` (report_html.c): one self-contained page of the
 * processes' GPU times written to `file` ("-": standard output); `path`
 * names what was read. Returns the exit status, errors said on stderr. */
int report_html(const char *file, const char *path, const rep_process *const *procs, size_t n, size_t top);

#endif
