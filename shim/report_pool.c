#include "shim/report_pool.h"

#include <stdio.h>

#include "alloc/device.h"
#include "alloc/host_pool.h"
#include "shim/state.h"

static void histogram(drk_json *j, const char *key, const uint64_t *ns)
{
    drk_json_open(j, key, '{');
    for (int b = 0; b < 32; b++)
        if (ns[b]) {
            char k[24];
            snprintf(k, sizeof k, "%llu", 1ull << b); /* bucket [2^b, 2^(b+1)) ns, named by its floor */
            drk_json_u64(j, k, ns[b]);
        }
    drk_json_close(j, '}');
}

void drk_report_device_pool(drk_json *j)
{
    drk_dpool_report r;
    drk_dpool_get_report(&r);
    drk_json_open(j, "device_pool", '{');
    drk_json_bool(j, "enabled", drk_pooling());
    drk_json_u64(j, "devices", (uint64_t)r.started);
    drk_json_u64(j, "page_bytes", r.page_bytes);
    drk_json_u64(j, "allocs", r.allocs);
    drk_json_u64(j, "frees", r.frees);
    drk_json_u64(j, "failed_allocs", r.failed_allocs);
    drk_json_u64(j, "out_of_memory", r.out_of_memory);
    drk_json_u64(j, "bad_frees", r.bad_frees);
    drk_json_u64(j, "driver_allocs", r.driver_allocs);
    drk_json_u64(j, "switched_off_allocs", r.switched_off_allocs);
    drk_json_u64(j, "green_devices", r.green_devices);
    drk_json_u64(j, "green_allocs", r.green_allocs);
    drk_json_u64(j, "sync_reclaims", r.sync_reclaims);
    drk_json_u64(j, "live_bytes", r.live_bytes);
    drk_json_u64(j, "live_blocks", r.live_blocks);
    drk_json_u64(j, "peak_live_bytes", r.peak_live_bytes);
    drk_json_u64(j, "reserved_bytes", r.reserved_bytes);
    drk_json_u64(j, "peak_reserved_bytes", r.peak_reserved_bytes);
    drk_json_u64(j, "virtual_bytes", r.va_bytes);
    drk_json_u64(j, "pages_created", r.pages_created);
    drk_json_u64(j, "pages_released", r.pages_released);
    drk_json_u64(j, "pages_moved", r.pages_moved);
    drk_json_u64(j, "handles_created", r.handles_created);
    drk_json_u64(j, "handles_moved", r.handles_moved);
    drk_json_u64(j, "pages_created_in_calls", r.pages_created_in_calls);
    drk_json_u64(j, "pages_made_ahead", r.pages_made_ahead);
    drk_json_u64(j, "pages_taken_ahead", r.pages_taken_ahead);
    drk_json_u64(j, "ahead_pages", r.ahead_pages);
    drk_json_u64(j, "growth_waits", r.growth_waits);
    drk_json_u64(j, "idle_pages", r.idle_pages);
    drk_json_u64(j, "spare_pages", r.spare_pages);
    drk_json_u64(j, "map_calls", r.map_calls);
    drk_json_u64(j, "unmap_calls", r.unmap_calls);
    drk_json_u64(j, "defrag_events", r.defrag_events);
    drk_json_u64(j, "quiet_trims", r.quiet_trims);
    drk_json_u64(j, "oom_waits", r.oom_waits);
    drk_json_u64(j, "same_stream_reuses", r.same_stream_reuses);
    drk_json_u64(j, "events_recorded", r.events);
    drk_json_u64(j, "pending_free_bytes", r.pending_bytes);
    drk_json_u64(j, "pressure_steals", r.steals);
    drk_json_u64(j, "streams_alive", r.streams);
    drk_json_u64(j, "contexts_ended", r.contexts_ended);
    drk_json_u64(j, "thread_shards", r.thread_shards);
    /* GMLake's measure (peak live against peak reserved) and the free
     * space's: how much of it the largest hole is. */
    drk_json_open(j, "fragmentation", '{');
    drk_json_f64(j, "peak", r.peak_reserved_bytes ? 1.0 - (double)r.peak_live_bytes / (double)r.peak_reserved_bytes
                                                  : 0.0);
    drk_json_f64(j, "free", r.free_total ? 1.0 - (double)r.free_largest / (double)r.free_total : 0.0);
    drk_json_close(j, '}');
    /* Per shard: the device's shared one (stream null), threads' own (stream
     * null, thread true) and each stream's own. */
    drk_json_open(j, "streams", '[');
    for (int i = 0; i < r.nshards; i++) {
        const drk_dpool_shard_report *s = &r.shards[i];
        char h[24];
        snprintf(h, sizeof h, "0x%llx", (unsigned long long)s->stream);
        drk_json_open(j, NULL, '{');
        drk_json_i64(j, "device", s->device);
        if (s->stream)
            drk_json_str(j, "stream", h);
        else
            drk_json_null(j, "stream");
        drk_json_bool(j, "thread", s->thread);
        drk_json_u64(j, "allocs", s->allocs);
        drk_json_u64(j, "frees", s->frees);
        drk_json_u64(j, "live_bytes", s->live_bytes);
        drk_json_u64(j, "peak_live_bytes", s->peak_live_bytes);
        drk_json_u64(j, "reserved_bytes", s->reserved_bytes);
        drk_json_u64(j, "peak_reserved_bytes", s->peak_reserved_bytes);
        drk_json_u64(j, "idle_bytes", s->idle_bytes);
        drk_json_u64(j, "same_stream_reuses", s->same_stream_reuses);
        drk_json_u64(j, "pages_moved", s->pages_moved);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_open(j, "latency_ns", '{');
    drk_json_u64(j, "samples", r.latency_samples);
    histogram(j, "alloc", r.alloc_ns);
    histogram(j, "free", r.free_ns);
    drk_json_close(j, '}');
    drk_json_close(j, '}');
}

static void host_counts(drk_json *j, const char *key, const drk_host_pool_counts *c)
{
    drk_json_open(j, key, '{');
    drk_json_u64(j, "allocs", c->allocs);
    drk_json_u64(j, "frees", c->frees);
    drk_json_u64(j, "live_bytes", c->live_bytes);
    drk_json_u64(j, "peak_live_bytes", c->peak_live_bytes);
    drk_json_u64(j, "pinned_bytes", c->chunk_bytes);
    drk_json_u64(j, "chunks", c->chunks);
    drk_json_u64(j, "driver_fallbacks", c->fallbacks);
    drk_json_u64(j, "driver_direct", c->direct);
    drk_json_close(j, '}');
}

void drk_report_host_pool(drk_json *j)
{
    drk_host_pool_stats st;
    drk_host_pool_get_stats(&st);
    drk_json_open(j, "host_pool", '{');
    drk_json_bool(j, "built", st.built);
    drk_json_bool(j, "enabled", st.on);
    drk_json_u64(j, "allocs", st.total.allocs);
    drk_json_u64(j, "frees", st.total.frees);
    drk_json_u64(j, "bad_frees", st.invalid_frees);
    drk_json_u64(j, "live_bytes", st.total.live_bytes);
    drk_json_u64(j, "peak_live_bytes", st.total.peak_live_bytes);
    drk_json_u64(j, "pinned_bytes", st.total.chunk_bytes);
    drk_json_u64(j, "chunks", st.total.chunks);
    drk_json_u64(j, "driver_fallbacks", st.total.fallbacks);
    drk_json_u64(j, "driver_direct", st.total.direct);
    drk_json_u64(j, "contexts_ended", st.contexts_ended);
    drk_json_u64(j, "large_reused", st.large_reused);
    drk_json_u64(j, "reuse_waits", st.waits);
    drk_json_u64(j, "reuse_wait_us", st.wait_ns / 1000);
    /* Per flag set that was used, keyed by its CU_MEMHOSTALLOC_* bits. */
    drk_json_open(j, "by_flags", '{');
    for (int f = 0; f < DRK_HOST_FLAG_SETS; f++)
        if (st.by_flags[f].allocs || st.by_flags[f].chunks) {
            char k[8];
            snprintf(k, sizeof k, "%d", f);
            host_counts(j, k, &st.by_flags[f]);
        }
    drk_json_close(j, '}');
    drk_json_close(j, '}');
}
