#include "shim/report_evolve.h"

#include "evolve/capture.h"
#include "evolve/engine.h"
#include "shim/evolve_wiring.h"

static const char *state_name(drk_target_state s)
{
    switch (s) {
    case DRK_TARGET_CAPTURING: return "capturing";
    case DRK_TARGET_SEARCHING: return "searching";
    case DRK_TARGET_SETTLED: return "settled";
    case DRK_TARGET_REFUSED: return "refused";
    case DRK_TARGET_FAILED: return "failed";
    }
    return "?";
}


void drk_report_evolve(drk_json *j)
{
    drk_engine_totals t = drk_engine_totals_get();
    int wanted = drk_evolve_wanted();
    drk_json_open(j, "evolve", '{');
    drk_json_bool(j, "enabled", wanted && t.on);
    drk_json_str(j, "off_reason", !wanted ? "DRK_EVOLVE=0" : t.on ? NULL : "no GPU times (see gpu_time.off_reason)");
    drk_json_f64(j, "budget", t.budget);
    drk_json_u64(j, "rounds", t.rounds);
    drk_json_u64(j, "trial_ns", t.trial_ns);
    drk_json_u64(j, "trial_bytes", t.trial_bytes);
    drk_json_u64(j, "program_kernel_ns", t.program_ns);
    drk_json_f64(j, "trial_share", t.program_ns ? (double)t.trial_ns / (double)t.program_ns : 0);
    drk_json_f64(j, "researched_share", t.researched_share);
    drk_json_u64(j, "kernels", t.kernels);
    drk_json_u64(j, "evolved", t.evolved);
    drk_json_u64(j, "refused", t.refused);
    drk_json_u64(j, "failed", t.failed);
    drk_json_u64(j, "cache_hits", t.cache_hits);
    drk_json_u64(j, "cache_stored", t.cache_stored);
    drk_json_u64(j, "cubin_hits", t.cubin_hits);
    drk_json_u64(j, "cubins_stored", t.cubins_stored);
    drk_json_u64(j, "borrowed_loads", t.borrowed_loads);
    drk_json_f64(j, "cubin_hit_ms_mean", t.cubin_hit_ms_mean);
    drk_json_f64(j, "cubin_hit_ms_max", t.cubin_hit_ms_max);
    drk_json_f64(j, "cubin_read_ms_mean", t.cubin_read_ms_mean);
    drk_json_u64(j, "own_context_mib", t.own_ctx_bytes >> 20);
    drk_json_u64(j, "gave_back_memory", (uint64_t)t.gave_back);
    drk_json_u64(j, "saved_ns", t.saved_ns);
    drk_json_u64(j, "partial_hits", t.partial_hits);
    drk_json_u64(j, "partial_stored", t.partial_stored);
    drk_json_u64(j, "served_loads", t.served_loads);
    drk_json_u64(j, "quiet_loads", t.quiet_loads);
    drk_json_f64(j, "served_load_ms_max", t.served_load_ms_max);
    drk_json_u64(j, "held_trials", t.held_trials);
    drk_json_u64(j, "held_busy", t.held_busy);
    drk_json_f64(j, "held_ms_max", t.held_ms_max);
    drk_json_u64(j, "cache_serves", t.cache_serves);
    drk_json_f64(j, "cache_serve_ms_mean", t.cache_serve_ms_mean);
    drk_json_f64(j, "cache_serve_ms_max", t.cache_serve_ms_max);
    drk_capture_stats c = drk_capture_stats_get();
    drk_json_open(j, "captures", '{');
    drk_json_u64(j, "captured", c.captured);
    drk_json_u64(j, "snapped", c.snapped);
    drk_json_u64(j, "moved", c.moved);
    drk_json_u64(j, "busy", c.busy);
    drk_json_u64(j, "mismatched", c.mismatched);
    drk_json_close(j, '}');
    static drk_engine_row rows[64];
    size_t n = drk_engine_rows(rows, sizeof rows / sizeof rows[0]);
    drk_json_open(j, "by_kernel", '[');
    for (size_t i = 0; i < n; i++) {
        const drk_engine_row *r = &rows[i];
        drk_json_open(j, NULL, '{');
        drk_json_str(j, "name", r->name);
        drk_json_u32s(j, "grid", r->grid, 3);
        drk_json_u32s(j, "block", r->block, 3);
        drk_json_u64(j, "shared_bytes", r->shared_bytes);
        drk_json_str(j, "state", state_name(r->state));
        drk_json_str(j, "why", r->why);
        drk_json_u64(j, "captures", r->captures);
        drk_json_u64(j, "rounds", r->rounds);
        drk_json_u64(j, "tried", r->tried);
        drk_json_u64(j, "proven", r->proven);
        drk_json_u64(j, "rejected", r->rejected);
        drk_json_u64(j, "trusted", r->trusted);
        drk_json_u64(j, "same_code", r->same_code);
        drk_json_u64(j, "hops", r->hops);
        drk_json_str(j, "serving", r->serving);
        drk_json_f64(j, "speedup", r->speedup);
        drk_json_f64(j, "run_speedup", r->run_speedup);
        drk_json_f64(j, "replay_speedup", r->replay_speedup);
        drk_json_u64(j, "builds", r->builds);
        drk_json_f64(j, "build_ms", r->build_ms);
        drk_json_f64(j, "build_ms_max", r->build_ms_max);
        drk_json_u64(j, "trial_ns", r->trial_ns);
        drk_json_u64(j, "trial_bytes", r->trial_bytes);
        drk_json_u64(j, "saved_ns", r->saved_ns);
        drk_json_u64(j, "snapshot_bytes", r->snapshot_bytes);
        drk_json_bool(j, "from_cache", r->from_cache);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_close(j, '}');
}
