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
    uint64_t latency_samples, alloc_ns[REP_LATENCY_BUCKETS], free_ns[REP_LATENCY_BUCKETS];
} rep_dpool;

/* The pinned host pool (host_pool, likewise optional). */
typedef struct rep_hpool {
    int present;
    uint64_t processes; /* reports whose pool served allocations */
    uint64_t allocs, frees, bad_frees, peak_live_bytes, pinned_bytes, chunks, driver_fallbacks, driver_direct;
} rep_hpool;

/* The counters of a process, or of several processes added up. */
typedef struct rep_totals {
    uint64_t launches, failed_launches, untracked_launches;
    rep_facts facts;
    rep_dpool dpool;
    rep_hpool hpool;
    rep_kernel *kernels; /* most launched first */
    size_t nkernels;
    rep_family *families;
    size_t nfamilies;
    rep_memkind *memory;
    size_t nmemory;
} rep_totals;

typedef struct rep_process {
    char *path;
    json_value doc;
    const char *program, *exe, *drk_version, *driver_library;
    const char *driver_path; /* NULL: drk never opened the driver */
    uint64_t pid, forked_from, start_ns, end_ns;
    int has_driver_version;
    int64_t driver_version;
    rep_totals t;
} rep_process;

enum { REPORT_OK = 0, REPORT_NOT_A_REPORT = 1, REPORT_ERROR = -1 };

/* Read the report at `path`. REPORT_NOT_A_REPORT: valid JSON whose top level
 * is not {"schema": "drk-report", ...}; `why` says what it is. REPORT_ERROR:
 * the reason is in `why` (prefixed with the path). */
int report_load(const char *path, rep_process *out, char *why, size_t whylen);
void report_release(rep_process *p);

/* Add up `n` sets of counters: kernels merged by name (their shapes by
 * grid, block and shared bytes), call names and memory kinds by name. With
 * n == 1 this puts one report in order. Returns -1 when out of memory. */
int totals_merge(const rep_totals *const *parts, size_t n, rep_totals *out);
void totals_release(rep_totals *t);

/* Output. `top`: kernels listed per table, 0 for all. */
void print_process(FILE *f, const rep_process *p, size_t top);
void print_combined(FILE *f, const rep_process *const *procs, size_t n, const rep_totals *t, size_t top);
void print_json(FILE *f, const rep_process *const *procs, size_t n, const rep_totals *t, size_t top);

#endif
