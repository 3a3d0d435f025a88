#include "shim/report_time.h"

#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "evolve/counters.h"
#include "evolve/cupti.h"
#include "evolve/findings.h"
#include "evolve/gputime.h"
#include "shim/evolve_wiring.h"
#include "shim/worker.h"

static void u64_triple(drk_json *j, const char *key, const uint32_t v[3]) { drk_json_u32s(j, key, v, 3); }

/* The latest theoretical occupancy worked out for the shape, or null. */
static void write_occupancy(drk_json *j, const drk_time_key *k)
{
    drk_occupancy o;
    if (!drk_gputime_occupancy_of(k, &o)) {
        drk_json_null(j, "occupancy");
        return;
    }
    drk_json_open(j, "occupancy", '{');
    drk_json_f64(j, "theoretical", o.theoretical);
    drk_json_u64(j, "blocks_per_sm", o.blocks_per_sm);
    drk_json_u64(j, "warps_per_block", o.warps_per_block);
    drk_json_u64(j, "max_warps_per_sm", o.max_warps_per_sm);
    drk_json_str(j, "limited_by", drk_occupancy_limit_name(o.limit));
    drk_json_u64(j, "registers", o.regs);
    drk_json_u64(j, "static_shared_bytes", o.static_shared);
    drk_json_close(j, '}');
}

static void write_row(drk_json *j, const drk_time_row *r, int with_max)
{
    drk_json_open(j, NULL, '{');
    drk_json_str(j, "name", r->key.name);
    u64_triple(j, "grid", r->key.grid);
    u64_triple(j, "block", r->key.block);
    drk_json_u64(j, "shared_bytes", r->key.shared_bytes);
    drk_json_u64(j, "launches", r->stats.n);
    drk_json_u64(j, "total_ns", r->stats.total_ns);
    drk_json_u64(j, "min_ns", r->stats.min_ns);
    drk_json_u64(j, "median_ns", r->stats.median_ns);
    drk_json_u64(j, "p95_ns", r->stats.p95_ns);
    if (with_max) {
        drk_json_u64(j, "max_ns", r->stats.max_ns);
        write_occupancy(j, &r->key);
    }
    drk_json_close(j, '}');
}

/* Time rows, most first; `*n` of them; NULL when there are none. */
static drk_time_row *all_rows(size_t *n)
{
    drk_gputime_totals t = drk_gputime_totals_get();
    drk_time_row *rows = t.entries ? malloc(t.entries * sizeof *rows) : NULL;
    *n = rows ? drk_gputime_rows(rows, t.entries) : 0;
    return rows;
}

uint64_t drk_report_kernel_gpu_ns(const char *name, uint64_t *launches)
{
    /* Called once a kernel name by the report: a scan of the rows is fine. */
    static drk_time_row *rows;
    static size_t n = (size_t)-1;
    if (n == (size_t)-1)
        rows = all_rows(&n);
    uint64_t ns = 0, l = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].key.name, name) == 0)
            ns += rows[i].stats.total_ns, l += rows[i].stats.n;
    *launches = l;
    return ns;
}

static void write_counters(drk_json *j)
{
    drk_counters_state s = drk_counters_state_get();
    int asked = drk_opt_num(DRK_OPT_PROFILE) == DRK_PROFILE_COUNTERS;
    const char *off = !asked ? "DRK_PROFILE is not counters" : drk_worker_timing_off() ? drk_worker_timing_off() : s.off;
    drk_json_open(j, "counters", '{');
    drk_json_bool(j, "enabled", asked && !off);
    drk_json_str(j, "off_reason", off);
    drk_json_u64(j, "samples", s.samples);
    drk_json_u64(j, "discarded", s.discarded);
    drk_json_u64(j, "cost_ns", s.cost_ns);
    drk_json_u64(j, "passes", s.passes);
    drk_json_f64(j, "budget", s.budget);
    static drk_counters_row rows[DRK_COUNTERS_KEYS];
    size_t n = drk_counters_rows(rows, DRK_COUNTERS_KEYS);
    drk_json_open(j, "by_kernel", '[');
    for (size_t i = 0; i < n; i++) {
        drk_json_open(j, NULL, '{');
        drk_json_str(j, "name", rows[i].key.name);
        u64_triple(j, "grid", rows[i].key.grid);
        u64_triple(j, "block", rows[i].key.block);
        drk_json_u64(j, "shared_bytes", rows[i].key.shared_bytes);
        drk_json_f64(j, "dram_pct", rows[i].v.dram_pct);
        drk_json_f64(j, "occupancy_pct", rows[i].v.occupancy_pct);
        drk_json_f64(j, "ld_sectors_per_request", rows[i].v.ld_sectors_per_request);
        drk_json_f64(j, "st_sectors_per_request", rows[i].v.st_sectors_per_request);
        drk_json_u64(j, "samples", rows[i].samples);
        drk_json_u64(j, "round", rows[i].round);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_close(j, '}');
}

void drk_report_gpu_time(drk_json *j)
{
    const char *off = drk_opt_num(DRK_OPT_PROFILE) || drk_evolve_wanted() ? drk_worker_timing_off() : "DRK_PROFILE=0";
    drk_gputime_totals t = drk_gputime_totals_get();
    drk_json_open(j, "gpu_time", '{');
    drk_json_bool(j, "enabled", off == NULL);
    drk_json_str(j, "off_reason", off);
    drk_json_str(j, "source", drk_cupti_path());
    const char *stopped = drk_cupti_stopped();
    drk_json_str(j, "stopped", stopped && strcmp(stopped, "the process exited") != 0 ? stopped : NULL);
    drk_json_u64(j, "kernels", t.kernels);
    drk_json_u64(j, "kernel_ns", t.kernel_ns);
    drk_json_u64(j, "copies", t.copies);
    drk_json_u64(j, "copy_ns", t.copy_ns);
    drk_json_u64(j, "copy_bytes", t.copy_bytes);
    drk_json_u64(j, "dropped", t.dropped);
    drk_json_u64(j, "untracked", t.untracked);
    drk_json_u64(j, "late", t.late);
    drk_json_u64(j, "excluded", t.excluded);
    drk_json_u64(j, "unsampled_rounds", t.unsampled);
    drk_json_u64(j, "drk_records", t.own);
    drk_json_u64(j, "drk_ns", t.own_ns);
    size_t n;
    drk_time_row *rows = all_rows(&n);
    drk_json_open(j, "by_kernel", '[');
    for (size_t i = 0; i < n; i++)
        write_row(j, &rows[i], 1);
    drk_json_close(j, ']');
    free(rows);
    write_counters(j);
    drk_json_close(j, '}');
}

static void write_round(drk_json *j, const drk_round *r)
{
    drk_json_open(j, NULL, '{');
    drk_json_u64(j, "index", r->index);
    drk_json_str(j, "ended_by", r->why);
    drk_json_u64(j, "start_ns", r->start_ns);
    drk_json_u64(j, "end_ns", r->end_ns);
    drk_json_u64(j, "wall_ns", r->end_ns - r->start_ns);
    drk_json_u64(j, "busy_ns", r->busy_ns);
    drk_json_u64(j, "drk_ns", r->drk_ns);
    drk_json_u64(j, "kernel_ns", r->kernel_ns);
    drk_json_u64(j, "copy_ns", r->copy_ns);
    drk_json_u64(j, "kernels", r->kernels);
    drk_json_u64(j, "copies", r->copies);
    drk_json_open(j, "memory", '{');
    drk_json_u64(j, "live_bytes", r->memory.live_bytes);
    drk_json_u64(j, "reserved_bytes", r->memory.reserved_bytes);
    drk_json_u64(j, "pages_moved", r->memory.pages_moved);
    drk_json_u64(j, "out_of_memory", r->memory.out_of_memory);
    drk_json_close(j, '}');
    drk_json_open(j, "gaps", '[');
    for (unsigned g = 0; g < r->ngaps; g++) {
        drk_json_open(j, NULL, '{');
        drk_json_u64(j, "ns", r->gaps[g].ns);
        drk_json_str(j, "after", r->gaps[g].after);
        drk_json_str(j, "before", r->gaps[g].before);
        drk_json_u64(j, "drk_ns", r->gaps[g].drk_ns);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_open(j, "top", '[');
    for (unsigned k = 0; k < r->ntop; k++)
        write_row(j, &r->top[k], 0);
    drk_json_close(j, ']');
    drk_json_open(j, "other", '{');
    drk_json_u64(j, "kernels", r->other_kernels);
    drk_json_u64(j, "ns", r->other_ns);
    drk_json_close(j, '}');
    drk_json_close(j, '}');
}

void drk_report_findings(drk_json *j)
{
    const drk_finding *f[DRK_FINDINGS_MAX];
    size_t n = drk_gputime_findings(f, DRK_FINDINGS_MAX);
    drk_json_open(j, "findings", '[');
    for (size_t i = 0; i < n; i++) {
        drk_json_open(j, NULL, '{');
        drk_json_str(j, "name", f[i]->name);
        drk_json_u64(j, "first_round", f[i]->first_round);
        drk_json_u64(j, "last_round", f[i]->last_round);
        drk_json_u64(j, "rounds", f[i]->rounds);
        if (f[i]->key.name) {
            drk_json_open(j, "kernel", '{');
            drk_json_str(j, "name", f[i]->key.name);
            u64_triple(j, "grid", f[i]->key.grid);
            u64_triple(j, "block", f[i]->key.block);
            drk_json_u64(j, "shared_bytes", f[i]->key.shared_bytes);
            drk_json_close(j, '}');
        } else {
            drk_json_null(j, "kernel");
        }
        drk_json_f64(j, "value", f[i]->value);
        drk_json_f64(j, "reference", f[i]->reference);
        drk_json_str(j, "evidence", f[i]->evidence);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
}

void drk_report_rounds(drk_json *j)
{
    static const drk_round *kept[DRK_ROUNDS_KEPT];
    size_t n = drk_gputime_rounds(kept, DRK_ROUNDS_KEPT);
    drk_rounds_merged m = drk_gputime_merged();
    drk_json_open(j, "rounds", '{');
    drk_json_u64(j, "closed", drk_gputime_rounds_closed());
    drk_json_u64(j, "kept", n);
    drk_json_u64(j, "marked", drk_worker_marks());
    drk_json_open(j, "merged", '{');
    drk_json_u64(j, "rounds", m.rounds);
    drk_json_u64(j, "wall_ns", m.wall_ns);
    drk_json_u64(j, "busy_ns", m.busy_ns);
    drk_json_u64(j, "kernel_ns", m.kernel_ns);
    drk_json_u64(j, "copy_ns", m.copy_ns);
    drk_json_u64(j, "kernels", m.kernels);
    drk_json_u64(j, "copies", m.copies);
    drk_json_close(j, '}');
    drk_json_open(j, "list", '[');
    for (size_t i = 0; i < n; i++)
        write_round(j, kept[i]);
    drk_json_close(j, ']');
    drk_json_close(j, '}');
}
