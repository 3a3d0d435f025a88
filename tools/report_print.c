/* What `drk report` prints: a section per process (header, kernels, GPU
 * times and rounds, findings, calls, memory, the pools, evolved kernels), a
 * combined section, or the combined numbers as JSON; and --compare's two
 * sides. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tools/report.h"
#include "tools/table.h"

/* Kernel names wider than this are cut (mangled names run to hundreds of
 * characters; the start says which kernel it is). */
#define NAME_COLUMN 64

static const char *u64s(uint64_t v, char *buf, size_t n)
{
    snprintf(buf, n, "%" PRIu64, v);
    return buf;
}


static void shape_text(const rep_shape *s, char *buf, size_t n)
{
    snprintf(buf, n, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " / %" PRIu64 "x%" PRIu64 "x%" PRIu64 " / %" PRIu64,
             s->grid[0], s->grid[1], s->grid[2], s->block[0], s->block[1], s->block[2], s->shared_bytes);
}

static void print_kernels(FILE *f, const rep_totals *t, size_t top)
{
    char a[32], b[32], c[32];
    fprintf(f, "kernels: %s launches (%s failed, %s untracked), %zu distinct\n", u64s(t->launches, a, sizeof a),
            u64s(t->failed_launches, b, sizeof b), u64s(t->untracked_launches, c, sizeof c), t->nkernels);
    if (!t->nkernels) {
        fputc('\n', f);
        return;
    }
    size_t shown = top && top < t->nkernels ? top : t->nkernels;
    table tb;
    table_init(&tb, "lrrrrl");
    table_row(&tb, (const char *const[]){"kernel", "launches", "%", "handles", "shapes", "top shape: grid / block / shared"});
    for (size_t i = 0; i < shown; i++) {
        const rep_kernel *k = &t->kernels[i];
        char name[4 * NAME_COLUMN + 1], launches[32], pct[32], handles[32], shapes[40], shape[256];
        text_fit(k->name, NAME_COLUMN, name, sizeof name);
        if (t->launches)
            snprintf(pct, sizeof pct, "%.1f", 100.0 * (double)k->launches / (double)t->launches);
        else
            snprintf(pct, sizeof pct, "-");
        /* "8+": more shapes were launched than the shim kept. */
        snprintf(shapes, sizeof shapes, "%zu%s", k->nshapes, k->other_shape_launches ? "+" : "");
        if (k->nshapes)
            shape_text(&k->shapes[0], shape, sizeof shape);
        else
            snprintf(shape, sizeof shape, "-");
        table_row(&tb, (const char *const[]){name, u64s(k->launches, launches, sizeof launches), pct,
                                             u64s(k->handles, handles, sizeof handles), shapes, shape});
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
    if (shown < t->nkernels) {
        uint64_t rest = 0;
        for (size_t i = shown; i < t->nkernels; i++)
            rest += t->kernels[i].launches;
        fprintf(f, "  ... %zu more kernels, %s launches\n", t->nkernels - shown, u64s(rest, a, sizeof a));
    }
    fputc('\n', f);
}

static void print_calls(FILE *f, const rep_totals *t)
{
    fprintf(f, "calls by family:\n");
    table tb;
    table_init(&tb, "lr");
    table_row(&tb, (const char *const[]){"family / name", "calls"});
    for (size_t i = 0; i < t->nfamilies; i++) {
        const rep_family *fam = &t->families[i];
        char n[32];
        table_row(&tb, (const char *const[]){fam->name, u64s(fam->total, n, sizeof n)});
        for (size_t j = 0; j < fam->nnames; j++) {
            if (!fam->names[j].calls)
                continue;
            char name[512];
            snprintf(name, sizeof name, "  %s", fam->names[j].name);
            table_row(&tb, (const char *const[]){name, u64s(fam->names[j].calls, n, sizeof n)});
        }
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
    fputc('\n', f);
}

static void print_memory(FILE *f, const rep_totals *t)
{
    fprintf(f, "allocations by kind:\n");
    table tb;
    table_init(&tb, "lrrrr");
    table_row(&tb, (const char *const[]){"kind", "allocs", "failed", "bytes", "frees"});
    for (size_t i = 0; i < t->nmemory; i++) {
        const rep_memkind *k = &t->memory[i];
        char allocs[32], failed[32], bytes[32], frees[32];
        table_row(&tb, (const char *const[]){k->name, u64s(k->allocs, allocs, sizeof allocs),
                                             u64s(k->failed, failed, sizeof failed),
                                             human_bytes(k->bytes, bytes, sizeof bytes),
                                             u64s(k->frees, frees, sizeof frees)});
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
}

/* One line: how much of the launched kernels drk knows, and can recompile. */
static void print_facts(FILE *f, const rep_facts *x)
{
    if (!x->present)
        return;
    char sm[32] = "the device";
    if (x->device_sm)
        snprintf(sm, sizeof sm, "sm_%" PRIu64, x->device_sm);
    fprintf(f,
            "kernel facts: %" PRIu64 " launched kernels, %" PRIu64 " with a parameter layout (%" PRIu64
            " read from their image: %" PRIu64 " equal to the driver's, %" PRIu64 " differ); PTX for %s: %" PRIu64
            " (any PTX: %" PRIu64 ")\n\n",
            x->launched, x->with_layout, x->from_image, x->equal, x->differs, sm, x->ptx_for_device, x->with_ptx);
}

static uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t samples_of(const uint64_t *hist)
{
    uint64_t n = 0;
    for (int b = 0; b < REP_LATENCY_BUCKETS; b++)
        n = add(n, hist[b]);
    return n;
}

/* The bucket holding the median sample (the lower middle one of an even
 * count), as "256–511 ns": the histogram says no more than that. */
static const char *median_text(const uint64_t *hist, char *buf, size_t n)
{
    uint64_t total = samples_of(hist), seen = 0;
    snprintf(buf, n, "-");
    for (int b = 0; b < REP_LATENCY_BUCKETS && total; b++) {
        seen = add(seen, hist[b]);
        if (seen >= total / 2 + total % 2) {
            /* The shim's first bucket also holds 0 ns. */
            uint64_t lo = b ? (uint64_t)1 << b : 0, hi = b == 63 ? UINT64_MAX : ((uint64_t)2 << b) - 1;
            snprintf(buf, n, "%" PRIu64 "\u2013%" PRIu64 " ns", lo, hi);
            break;
        }
    }
    return buf;
}

/* `nprocs`: 0 for one process's section, else the combined one's count,
 * where peaks are sums of per-process peaks. */
static void print_device_pool(FILE *f, const rep_dpool *d, size_t nprocs)
{
    if (!d->allocs)
        return;
    char live[32], reserved[32], am[64], fm[64];
    fprintf(f, "\ndevice pool");
    if (nprocs)
        fprintf(f, " (%" PRIu64 " of %zu processes)", d->processes, nprocs);
    fprintf(f, ": %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " out of memory, %" PRIu64 " bad frees\n",
            d->allocs, d->frees, d->out_of_memory, d->bad_frees);
    double frag = d->peak_reserved_bytes ? 1.0 - (double)d->peak_live_bytes / (double)d->peak_reserved_bytes : 0.0;
    fprintf(f, "  %s %s, %s %s: fragmentation %.2f%%\n", nprocs ? "sum of per-process peaks: live" : "peak live",
            human_bytes(d->peak_live_bytes, live, sizeof live), nprocs ? "reserved" : "peak reserved",
            human_bytes(d->peak_reserved_bytes, reserved, sizeof reserved), 100.0 * frag);
    fprintf(f, "  pages: %" PRIu64 " created, %" PRIu64 " moved, %" PRIu64 " released; %" PRIu64 " defrag event%s\n",
            d->pages_created, d->pages_moved, d->pages_released, d->defrag_events, d->defrag_events == 1 ? "" : "s");
    if (d->handles_created || d->handles_moved)
        fprintf(f, "  driver handles: %" PRIu64 " made, %" PRIu64 " moved (runs of pages: each one call)\n",
                d->handles_created, d->handles_moved);
    if (d->pages_made_ahead)
        fprintf(f, "  grown ahead: %" PRIu64 " pages made by drk's grower, %" PRIu64 " of them taken; %" PRIu64
                   " made inside allocation calls; %" PRIu64 " wait%s for pages being made\n",
                d->pages_made_ahead, d->pages_taken_ahead, d->pages_created_in_calls, d->growth_waits,
                d->growth_waits == 1 ? "" : "s");
    if (d->thread_shards)
        fprintf(f, "  %" PRIu64 " thread%s allocating alongside others got a shard of %s own\n", d->thread_shards,
                d->thread_shards == 1 ? "" : "s", d->thread_shards == 1 ? "its" : "their");
    fprintf(f, "  latency, sampled: alloc median %s (%" PRIu64 " samples), free median %s (%" PRIu64 " samples)\n",
            median_text(d->alloc_ns, am, sizeof am), samples_of(d->alloc_ns), median_text(d->free_ns, fm, sizeof fm),
            samples_of(d->free_ns));
}

static void print_host_pool(FILE *f, const rep_hpool *h, size_t nprocs, int after_device)
{
    if (!h->allocs)
        return;
    char live[32], pinned[32];
    fprintf(f, "%shost pool", after_device ? "" : "\n");
    if (nprocs)
        fprintf(f, " (%" PRIu64 " of %zu processes)", h->processes, nprocs);
    fprintf(f, ": %" PRIu64 " allocs, %" PRIu64 " frees, peak live %s%s, pinned %s in %" PRIu64 " chunk%s, %" PRIu64
               " driver fallback%s",
            h->allocs, h->frees, human_bytes(h->peak_live_bytes, live, sizeof live),
            nprocs ? " (sum of per-process peaks)" : "", human_bytes(h->pinned_bytes, pinned, sizeof pinned),
            h->chunks, h->chunks == 1 ? "" : "s", h->driver_fallbacks, h->driver_fallbacks == 1 ? "" : "s");
    /* Allocations after frees wait for the device: a freed block may still
     * be used by work queued before its free. */
    if (h->reuse_waits)
        fprintf(f, ", %" PRIu64 " wait%s for the device before reusing freed memory (%.1f ms)", h->reuse_waits,
                h->reuse_waits == 1 ? "" : "s", (double)h->reuse_wait_us / 1000.0);
    fputc('\n', f);
}


static void row_shape_text(const rep_time_row *r, char *buf, size_t n)
{
    rep_shape s = {.shared_bytes = r->shared_bytes};
    memcpy(s.grid, r->grid, sizeof s.grid);
    memcpy(s.block, r->block, sizeof s.block);
    shape_text(&s, buf, n);
}

static void print_gpu_rows(FILE *f, const rep_gpu *g, size_t top, size_t nprocs)
{
    fprintf(f, "top kernels by GPU time");
    if (nprocs)
        fprintf(f, " (%" PRIu64 " of %zu processes timed)", g->processes, nprocs);
    else if (g->source)
        fprintf(f, " (CUPTI: %s)", g->source);
    fprintf(f, ":\n");
    if (!g->nrows) {
        fprintf(f, "  (no kernel was timed)\n");
        return;
    }
    /* Shares of all kernel time, timed rows or not (kernel_ns counts
     * untracked kernel-shapes too). */
    uint64_t all = gpu_kernel_total(g);
    size_t shown = top && top < g->nrows ? top : g->nrows;
    table tb;
    table_init(&tb, "rllrrrrrr");
    table_row(&tb, (const char *const[]){"#", "kernel", "shape: grid / block / shared", "launches", "GPU time", "%",
                                         "median", "p95", "mean"});
    for (size_t i = 0; i < shown; i++) {
        const rep_time_row *r = &g->rows[i];
        char rank[32], name[4 * NAME_COLUMN + 1], shape[256], launches[32], total[32], pct[32], med[32], p95[32],
            mean[32];
        snprintf(rank, sizeof rank, "%zu", i + 1);
        text_fit(r->name, NAME_COLUMN, name, sizeof name);
        row_shape_text(r, shape, sizeof shape);
        if (r->launches)
            human_ns(r->total_ns / r->launches, mean, sizeof mean);
        else
            snprintf(mean, sizeof mean, "-");
        table_row(&tb, (const char *const[]){rank, name, shape, u64s(r->launches, launches, sizeof launches),
                                             human_ns(r->total_ns, total, sizeof total),
                                             percent_text(r->total_ns, all, 0, pct, sizeof pct),
                                             human_ns(r->median_ns, med, sizeof med),
                                             human_ns(r->p95_ns, p95, sizeof p95), mean});
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
    if (shown < g->nrows) {
        uint64_t rest = 0;
        char a[32];
        for (size_t i = shown; i < g->nrows; i++)
            rest = add(rest, g->rows[i].total_ns);
        fprintf(f, "  ... %zu more kernel-shape%s, %s\n", g->nrows - shown, g->nrows - shown == 1 ? "" : "s",
                human_ns(rest, a, sizeof a));
    }
}

/* Busy over wall, the totals, and what the source lost. */
static void print_gpu_summary(FILE *f, const rep_gpu *g, size_t nprocs)
{
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "  ");
    if (g->rounds)
        fprintf(f, "GPU busy %s of %s (%s%%) over %" PRIu64 " round%s%s; ", human_ns(g->busy_ns, a, sizeof a),
                human_ns(g->wall_ns, b, sizeof b), percent_text(g->busy_ns, g->wall_ns, 0, c, sizeof c), g->rounds,
                g->rounds == 1 ? "" : "s", nprocs ? " (sums over processes)" : "");
    fprintf(f, "kernel time %s in %" PRIu64 " kernel%s, copy time %s in %" PRIu64 " cop%s (%s)",
            human_ns(g->kernel_ns, d, sizeof d), g->kernels, g->kernels == 1 ? "" : "s",
            human_ns(g->copy_ns, e, sizeof e), g->copies, g->copies == 1 ? "y" : "ies",
            human_bytes(g->copy_bytes, a, sizeof a));
    if (g->dropped)
        fprintf(f, "; %" PRIu64 " record%s dropped", g->dropped, g->dropped == 1 ? "" : "s");
    if (g->late)
        fprintf(f, "; %" PRIu64 " late record%s", g->late, g->late == 1 ? "" : "s");
    if (g->untracked)
        fprintf(f, "; %" PRIu64 " untracked record%s", g->untracked, g->untracked == 1 ? "" : "s");
    if (g->excluded)
        fprintf(f, "; %" PRIu64 " launch%s sampled for counters, not timed", g->excluded,
                g->excluded == 1 ? "" : "es");
    if (g->unsampled)
        fprintf(f, "; %" PRIu64 " round%s not timed (kernel records rested: evolution had nothing to search)",
                g->unsampled, g->unsampled == 1 ? "" : "s");
    if (g->drk_records) {
        char o[32];
        fprintf(f, "; drk's own trials %s in %" PRIu64 " record%s, not counted", human_ns(g->drk_ns, o, sizeof o),
                g->drk_records, g->drk_records == 1 ? "" : "s");
    }
    fputc('\n', f);
    if (g->stopped && nprocs)
        fprintf(f, "  timing stopped before exit in %" PRIu64 " process%s (first: %s)\n", g->stopped_processes,
                g->stopped_processes == 1 ? "" : "es", g->stopped);
    else if (g->stopped)
        fprintf(f, "  timing stopped before exit: %s\n", g->stopped);
}

/* A gap's edge: what ran there, or the round's start or end. */
static const char *edge_text(const char *name, const char *edge, char *buf, size_t n)
{
    if (!name)
        return edge;
    return text_fit(name, 32, buf, n);
}

static void print_rounds(FILE *f, const rep_rounds *rs, size_t top)
{
    if (!rs->present || (!rs->nlist && !rs->merged_rounds))
        return;
    size_t shown = top && top < rs->nlist ? top : rs->nlist;
    fprintf(f, "rounds: %" PRIu64 " closed (%" PRIu64 " marked by the program)", rs->closed, rs->marked);
    if (shown < rs->nlist || rs->merged_rounds)
        fprintf(f, ", the last %zu listed", shown);
    fprintf(f, ":\n");
    table tb;
    table_init(&tb, "rlrrrrrlll");
    table_row(&tb, (const char *const[]){"round", "ended by", "wall", "busy", "kernel time", "copy time", "kernels",
                                         "top kernel-shape (% of kernel time)", "largest gap",
                                         "live / reserved"});
    for (size_t i = rs->nlist - shown; i < rs->nlist; i++) {
        const rep_round *r = &rs->list[i];
        char idx[32], wall[32], busy[40], kt[32], ct[32], kernels[32], topk[4 * 32 + 320], gap[4 * 64 + 112],
            mem[80];
        char pct[32], name[4 * 32 + 1], shape[256], t1[32], t2[32], t3[32], after[4 * 32 + 1],
            before[4 * 32 + 1];
        if (r->wall_ns)
            snprintf(busy, sizeof busy, "%s%%", percent_text(r->busy_ns, r->wall_ns, 0, pct, sizeof pct));
        else
            snprintf(busy, sizeof busy, "-");
        if (r->ntop) {
            row_shape_text(&r->top[0], shape, sizeof shape);
            snprintf(topk, sizeof topk, "%s %s (%s%%)", text_fit(r->top[0].name, 32, name, sizeof name), shape,
                     percent_text(r->top[0].total_ns, r->kernel_ns, 0, pct, sizeof pct));
        } else {
            snprintf(topk, sizeof topk, "-");
        }
        if (r->ngaps) {
            /* drk's trials ran in it: said, not laid at the program's door */
            char ours[64] = "";
            if (r->gaps[0].drk_ns)
                snprintf(ours, sizeof ours, " (drk's trials %s of it)", human_ns(r->gaps[0].drk_ns, t3, sizeof t3));
            snprintf(gap, sizeof gap, "%s %s \u2192 %s%s", human_ns(r->gaps[0].ns, t1, sizeof t1),
                     edge_text(r->gaps[0].after, "(start)", after, sizeof after),
                     edge_text(r->gaps[0].before, "(end)", before, sizeof before), ours);
        } else
            snprintf(gap, sizeof gap, "-");
        snprintf(mem, sizeof mem, "%s / %s", human_bytes(r->live_bytes, t1, sizeof t1),
                 human_bytes(r->reserved_bytes, t2, sizeof t2));
        table_row(&tb, (const char *const[]){u64s(r->index, idx, sizeof idx), r->ended_by,
                                             human_ns(r->wall_ns, wall, sizeof wall), busy,
                                             human_ns(r->kernel_ns, kt, sizeof kt),
                                             human_ns(r->copy_ns, ct, sizeof ct),
                                             u64s(r->kernels, kernels, sizeof kernels), topk, gap, mem});
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
    /* Rounds not listed: the older kept ones, and those the report merged. */
    uint64_t n = rs->merged_rounds, wall = rs->merged_wall_ns, busy = rs->merged_busy_ns, kns = rs->merged_kernel_ns,
             cns = rs->merged_copy_ns, kernels = rs->merged_kernels;
    for (size_t i = 0; i < rs->nlist - shown; i++) {
        const rep_round *r = &rs->list[i];
        n = add(n, 1);
        wall = add(wall, r->wall_ns);
        busy = add(busy, r->busy_ns);
        kns = add(kns, r->kernel_ns);
        cns = add(cns, r->copy_ns);
        kernels = add(kernels, r->kernels);
    }
    if (n) {
        char a[32], b[32], c[32], d[32], e[32];
        fprintf(f, "  ... %" PRIu64 " earlier round%s (%" PRIu64 " merged by drk): wall %s, busy %s (%s%%), "
                   "kernel time %s, copy time %s, %" PRIu64 " kernel%s\n",
                n, n == 1 ? "" : "s", rs->merged_rounds, human_ns(wall, a, sizeof a), human_ns(busy, b, sizeof b),
                percent_text(busy, wall, 0, c, sizeof c), human_ns(kns, d, sizeof d), human_ns(cns, e, sizeof e), kernels,
                kernels == 1 ? "" : "s");
    }
}

static const char *dim3_text(const uint64_t v[3], char *buf, size_t n)
{
    snprintf(buf, n, "%" PRIu64 "x%" PRIu64 "x%" PRIu64, v[0], v[1], v[2]);
    return buf;
}



/* Prints and frees a table of kernel-shapes, and says how many `--top` left out. */
static void shapes_table_end(table *tb, FILE *f, size_t shown, size_t total)
{
    table_print(tb, f, "  ");
    table_free(tb);
    if (shown < total)
        fprintf(f, "  ... %zu more kernel-shape%s\n", total - shown, total - shown == 1 ? "" : "s");
}
/* The table of gpu_time.counters' rows (`nprocs`: as print_gpu_rows). */
static void print_counter_rows(FILE *f, const rep_counters *k, size_t top, size_t nprocs)
{
    if (nprocs)
        fprintf(f, "counters by kernel-shape (%" PRIu64 " of %zu processes sampled; the mean of their latest "
                   "samples):\n",
                k->processes, nprocs);
    else
        fprintf(f, "counters by kernel-shape (the latest sample of each):\n");
    size_t shown = top && top < k->nrows ? top : k->nrows;
    table tb;
    table_init(&tb, "lllrrrrrrr");
    table_row(&tb, (const char *const[]){"kernel", "grid", "block", "shared", "DRAM %", "occupancy %",
                                         "ld sectors/req", "st sectors/req", "round", "samples"});
    for (size_t i = 0; i < shown; i++) {
        const rep_counter_row *r = &k->rows[i];
        char name[4 * NAME_COLUMN + 1], grid[72], block[72], shared[32], dram[32], occ[32], ld[32], st[32],
            round[32], samples[32];
        text_fit(r->name, NAME_COLUMN, name, sizeof name);
        snprintf(dram, sizeof dram, "%.1f", r->dram_pct);
        snprintf(occ, sizeof occ, "%.1f", r->occupancy_pct);
        table_row(&tb, (const char *const[]){name, dim3_text(r->grid, grid, sizeof grid),
                                             dim3_text(r->block, block, sizeof block),
                                             u64s(r->shared_bytes, shared, sizeof shared), dram, occ,
                                             sectors_text(r->ld_sectors_per_request, ld, sizeof ld),
                                             sectors_text(r->st_sectors_per_request, st, sizeof st),
                                             u64s(r->round, round, sizeof round),
                                             u64s(r->samples, samples, sizeof samples)});
    }
    shapes_table_end(&tb, f, shown, k->nrows);
}

/* gpu_time.counters: nothing unless DRK_PROFILE=counters was asked for
 * (older reports have none); why they were off; else the table and what
 * the samples cost. Returns whether it printed. */
static int print_counters(FILE *f, const rep_counters *k, size_t top, size_t nprocs)
{
    if (!k->present || !k->asked)
        return 0;
    const char *why = k->off_reason ? k->off_reason : "no reason given";
    if (!k->processes) {
        if (nprocs)
            fprintf(f, "counters: off in %" PRIu64 " of %zu processes (first reason: %s)\n", k->asked, nprocs, why);
        else
            fprintf(f, "counters: off (%s)\n", why);
        return 1;
    }
    if (k->nrows)
        print_counter_rows(f, k, top, nprocs);
    char cost[32];
    fprintf(f, "%scounters: %" PRIu64 " sample%s (%" PRIu64 " given up), %" PRIu64 " pass%s each, %s in sampled "
               "launches (budget %.3g%%)",
            k->nrows ? "  " : "", k->samples, k->samples == 1 ? "" : "s", k->discarded, k->passes,
            k->passes == 1 ? "" : "es", human_ns(k->cost_ns, cost, sizeof cost), 100 * k->budget);
    if (nprocs && k->asked > k->processes)
        fprintf(f, "; off in %" PRIu64 " process%s (first reason: %s)", k->asked - k->processes,
                k->asked - k->processes == 1 ? "" : "es", why);
    fputc('\n', f);
    return 1;
}

/* `rounds`: the process's, NULL in the combined section. */
static void print_gpu(FILE *f, const rep_gpu *g, const rep_rounds *rounds, size_t top, size_t nprocs)
{
    if (!g->present)
        return;
    if (!g->processes) {
        if (nprocs)
            fprintf(f, "GPU times: off in %" PRIu64 " of %zu processes, none timed (first reason: %s)\n",
                    g->reports, nprocs, g->off_reason ? g->off_reason : "none given");
        else if (g->off_reason)
            fprintf(f, "GPU times: off (%s)\n", g->off_reason);
        else
            fprintf(f, "GPU times: off\n");
        print_counters(f, &g->counters, top, nprocs); /* asked for: why they are off too */
        fputc('\n', f);
        return;
    }
    print_gpu_rows(f, g, top, nprocs);
    print_gpu_summary(f, g, nprocs);
    fputc('\n', f);
    if (print_counters(f, &g->counters, top, nprocs))
        fputc('\n', f);
    if (rounds && rounds->present && (rounds->nlist || rounds->merged_rounds)) {
        print_rounds(f, rounds, top);
        fputc('\n', f);
    }
}

/* Evidence runs to 2 KB: a line keeps its first EVIDENCE_COLUMN characters
 * (--json has all of it). */
#define EVIDENCE_COLUMN 160

/* `s` cut to `width` characters, the last one "\u2026" when cut (a
 * sentence, where text_fit's "..." could read as its own); control bytes
 * (a kernel name may hold any) become blanks, so a finding stays one line.
 * `buf`: at least 4 * width + 4 bytes. */
static const char *line_fit(const char *s, size_t width, char *buf, size_t n)
{
    size_t chars = 0, o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < n; p++) { /* room for "\u2026" and the NUL */
        int starts = (*p & 0xc0) != 0x80;
        if (starts && chars == width - 1 && text_width((const char *)p) > 1) {
            o += (size_t)snprintf(buf + o, n - o, "\u2026");
            break;
        }
        chars += starts;
        buf[o++] = *p < 0x20 || *p == 0x7f ? ' ' : (char)*p;
    }
    buf[o] = 0;
    return buf;
}

/* "0\u20133 (4 rounds)": first and last round, and the rounds it was seen in. */
static const char *finding_rounds(const rep_finding *x, char *buf, size_t n)
{
    if (x->first_round == x->last_round)
        snprintf(buf, n, "%" PRIu64, x->first_round);
    else
        snprintf(buf, n, "%" PRIu64 "\u2013%" PRIu64, x->first_round, x->last_round);
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, " (%" PRIu64 " round%s)", x->rounds, x->rounds == 1 ? "" : "s");
    return buf;
}

/* The findings of `n` processes, after their GPU times: per process (one
 * of them), or all with their pid (`combined`). Nothing for reports
 * without findings (an older drk); "none" when some were timed. */
static void print_findings(FILE *f, const rep_process *const *procs, size_t n, int combined)
{
    size_t total = 0, with = 0, timed = 0;
    for (size_t i = 0; i < n; i++) {
        const rep_findings *fs = &procs[i]->findings;
        timed += fs->present && procs[i]->t.gpu.processes;
        total += fs->n;
        with += fs->n > 0;
    }
    if (!total) {
        if (timed)
            fprintf(f, "findings: none\n\n");
        return;
    }
    if (combined)
        fprintf(f, "findings: %zu in %zu of %zu processes:\n", total, with, n);
    else
        fprintf(f, "findings: %zu\n", total);
    table tb;
    if (combined) {
        table_init(&tb, "rllll");
        table_row(&tb, (const char *const[]){"pid", "finding", "rounds", "kernel-shape", "evidence"});
    } else {
        table_init(&tb, "llll");
        table_row(&tb, (const char *const[]){"finding", "rounds", "kernel-shape", "evidence"});
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < procs[i]->findings.n; k++) {
            const rep_finding *x = &procs[i]->findings.list[k];
            char pid[32], rounds[80], name[4 * 32 + 1], shape[256], kernel[4 * 32 + 260],
                evidence[4 * EVIDENCE_COLUMN + 4];
            if (x->kernel) {
                rep_shape s = {.shared_bytes = x->shared_bytes};
                memcpy(s.grid, x->grid, sizeof s.grid);
                memcpy(s.block, x->block, sizeof s.block);
                shape_text(&s, shape, sizeof shape);
                snprintf(kernel, sizeof kernel, "%s %s", text_fit(x->kernel, 32, name, sizeof name), shape);
            } else {
                snprintf(kernel, sizeof kernel, "-");
            }
            const char *cells[] = {u64s(procs[i]->pid, pid, sizeof pid), x->name,
                                   finding_rounds(x, rounds, sizeof rounds), kernel,
                                   line_fit(x->evidence, EVIDENCE_COLUMN, evidence, sizeof evidence)};
            table_row(&tb, combined ? cells : cells + 1);
        }
    table_print(&tb, f, "  ");
    table_free(&tb);
    fputc('\n', f);
}

/* The table of evolve's rows (`nprocs`: as print_gpu_rows; the combined
 * section lists every process's rows, with their pid). */
static void print_evolve_rows(FILE *f, const rep_evolve *e, size_t top, size_t nprocs)
{
    size_t shown = top && top < e->nrows ? top : e->nrows;
    table tb;
    static const char align[] = "rlllrllrrrl"; /* the pid's column first */
    table_init(&tb, nprocs ? align : align + 1);
    const char *head[] = {"pid",     "kernel",  "grid",    "block", "shared", "state",
                          "serving", "speedup", "tried / proven / rejected", "builds", "why"};
    table_row(&tb, nprocs ? head : head + 1);
    for (size_t i = 0; i < shown; i++) {
        const rep_evolve_row *r = &e->rows[i];
        char pid[32], name[4 * NAME_COLUMN + 1], grid[72], block[72], shared[32], serving[4 * 48 + 1], speedup[32],
            tried[96], builds[96], total[32], max[32], why[4 * EVIDENCE_COLUMN + 4];
        text_fit(r->name, NAME_COLUMN, name, sizeof name);
        text_fit(r->serving, 48, serving, sizeof serving);
        speedup_text(strcmp(r->serving, "default") != 0, r->speedup, r->run_speedup > 0, speedup, sizeof speedup);
        snprintf(tried, sizeof tried, "%" PRIu64 " / %" PRIu64 " / %" PRIu64, r->tried, r->proven, r->rejected);
        if (r->builds)
            snprintf(builds, sizeof builds, "%" PRIu64 " (%s in all, max %s)", r->builds,
                     human_ms(r->build_ms, total, sizeof total), human_ms(r->build_ms_max, max, sizeof max));
        else
            snprintf(builds, sizeof builds, "0");
        if (r->why && *r->why)
            line_fit(r->why, EVIDENCE_COLUMN, why, sizeof why);
        else
            snprintf(why, sizeof why, "-");
        const char *cells[] = {u64s(r->pid, pid, sizeof pid), name, dim3_text(r->grid, grid, sizeof grid),
                               dim3_text(r->block, block, sizeof block), u64s(r->shared_bytes, shared, sizeof shared),
                               r->state, serving, speedup, tried, builds, why};
        table_row(&tb, nprocs ? cells : cells + 1);
    }
    shapes_table_end(&tb, f, shown, e->nrows);
}

/* evolve: nothing unless DRK_EVOLVE=1 was asked for (older reports have
 * none); why it was off; else a line of totals and the table, most evolved
 * first. After the pools, so the text of a report without it is as it was. */
static void print_evolve(FILE *f, const rep_evolve *e, size_t top, size_t nprocs)
{
    if (!e->present || !e->asked)
        return;
    const char *why = e->off_reason ? e->off_reason : "no reason given";
    fputc('\n', f);
    if (!e->processes) {
        if (nprocs)
            fprintf(f, "evolve: off in %" PRIu64 " of %zu processes (first reason: %s)\n", e->asked, nprocs, why);
        else
            fprintf(f, "evolve: off (%s)\n", why);
        return;
    }
    char trial[32], program[32], share[32];
    fprintf(f, "evolved kernels");
    if (nprocs)
        fprintf(f, " (%" PRIu64 " of %zu processes)", e->processes, nprocs);
    fprintf(f, ": %" PRIu64 " kernel-shape%s looked at, %" PRIu64 " evolved, %" PRIu64 " refused, %" PRIu64
               " failed; trials %s of GPU time",
            e->kernels, e->kernels == 1 ? "" : "s", e->evolved, e->refused, e->failed,
            human_ns(e->trial_ns, trial, sizeof trial));
    if (e->program_kernel_ns)
        fprintf(f, ", %s of the program's kernel time (%s)",
                percent_text(e->trial_ns, e->program_kernel_ns, 1, share, sizeof share),
                human_ns(e->program_kernel_ns, program, sizeof program));
    if (e->trial_bytes) {
        char bytes[32];
        fprintf(f, ", %s copied and compared", human_bytes(e->trial_bytes, bytes, sizeof bytes));
    }
    fprintf(f, ", budget %.3g%%; %.1f%% of kernels re-searched per round (%" PRIu64 " round%s)", 100 * e->budget,
            100 * e->researched_share, e->rounds, e->rounds == 1 ? "" : "s");
    if (e->own_context_mib)
        fprintf(f, "; trials in a context of drk's own (%" PRIu64 " MiB of device memory)", e->own_context_mib);
    if (e->gave_back)
        fprintf(f, "; trials ended where the program ran out of device memory, drk's given back (%" PRIu64
                   " process%s)", e->gave_back, e->gave_back == 1 ? "" : "es");
    if (e->saved_ns) {
        char saved[32];
        fprintf(f, "; GPU time saved by served variants ~%s (estimated)", human_ns(e->saved_ns, saved, sizeof saved));
    }
    if (nprocs && e->asked > e->processes)
        fprintf(f, "; off in %" PRIu64 " process%s (first reason: %s)", e->asked - e->processes,
                e->asked - e->processes == 1 ? "" : "es", why);
    fputc('\n', f);
    if (e->nrows)
        print_evolve_rows(f, e, top, nprocs);
}

/* `procs`: the `nfind` processes whose findings are listed. */
static void print_totals(FILE *f, const rep_totals *t, const rep_rounds *rounds, const rep_process *const *procs,
                         size_t nfind, size_t top, size_t nprocs)
{
    print_kernels(f, t, top);
    print_facts(f, &t->facts);
    print_gpu(f, &t->gpu, rounds, top, nprocs);
    print_findings(f, procs, nfind, nprocs > 0);
    print_calls(f, t);
    print_memory(f, t);
    print_device_pool(f, &t->dpool, nprocs);
    print_host_pool(f, &t->hpool, nprocs, t->dpool.allocs > 0);
    print_evolve(f, &t->evolve, top, nprocs);
}

static void print_duration(FILE *f, const char *label, uint64_t start, uint64_t end)
{
    if (end >= start)
        fprintf(f, "  %-9s %.3f s\n", label, (double)(end - start) / 1e9);
    else
        fprintf(f, "  %-9s ? (ends before it starts)\n", label);
}

void print_process(FILE *f, const rep_process *p, size_t top)
{
    char a[32], b[32];
    fprintf(f, "== %s (pid %s", p->program, u64s(p->pid, a, sizeof a));
    if (p->forked_from)
        fprintf(f, ", forked from %s", u64s(p->forked_from, b, sizeof b));
    fprintf(f, ") ==\n");
    fprintf(f, "  report    %s\n", p->path);
    fprintf(f, "  exe       %s\n", p->exe);
    fprintf(f, "  driver    %s", p->driver_path ? p->driver_path : "(not opened)");
    if (p->has_driver_version)
        fprintf(f, ", version %" PRId64 " (CUDA %" PRId64 ".%" PRId64 ")", p->driver_version,
                p->driver_version / 1000, p->driver_version % 1000 / 10);
    else
        fprintf(f, ", version unknown");
    if (strcmp(p->driver_library, "libcuda.so.1") != 0)
        fprintf(f, " [DRK_CUDA_LIBRARY=%s]", p->driver_library);
    fputc('\n', f);
    print_duration(f, "duration", p->start_ns, p->end_ns);
    fprintf(f, "  drk       %s\n\n", p->drk_version);
    print_totals(f, &p->t, &p->rounds, &p, 1, top, 0);
}

void print_combined(FILE *f, const rep_process *const *procs, size_t n, const rep_totals *t, size_t top)
{
    fprintf(f, "== combined: %zu processes ==\n", n);
    fprintf(f, "  processes ");
    size_t listed = n < 8 ? n : 8;
    uint64_t start = UINT64_MAX, end = 0;
    for (size_t i = 0; i < n; i++) {
        char a[32];
        if (i < listed)
            fprintf(f, "%s%s %s", i ? ", " : "", procs[i]->program, u64s(procs[i]->pid, a, sizeof a));
        if (procs[i]->start_ns < start)
            start = procs[i]->start_ns;
        if (procs[i]->end_ns > end)
            end = procs[i]->end_ns;
    }
    if (listed < n)
        fprintf(f, ", and %zu more", n - listed);
    fputc('\n', f);
    print_duration(f, "span", start, end);
    fputc('\n', f);
    print_totals(f, t, NULL, procs, n, top, n);
}

/* A grid or block: [x, y, z] on one line. */
static void json_dim3(drk_json *j, const char *key, const uint64_t v[3])
{
    drk_json_open_inline(j, key, '[');
    for (int d = 0; d < 3; d++)
        drk_json_u64(j, NULL, v[d]);
    drk_json_close(j, ']');
}

/* A kernel-shape's keys, as every section writes them. */
static void json_shape(drk_json *j, const char *name, const uint64_t grid[3], const uint64_t block[3],
                       uint64_t shared_bytes)
{
    drk_json_str(j, "name", name);
    json_dim3(j, "grid", grid);
    json_dim3(j, "block", block);
    drk_json_u64(j, "shared_bytes", shared_bytes);
}

static void json_histogram(drk_json *j, const char *key, const uint64_t *hist)
{
    drk_json_open(j, key, '{');
    for (int b = 0; b < REP_LATENCY_BUCKETS; b++)
        if (hist[b]) {
            char floor[24];
            snprintf(floor, sizeof floor, "%" PRIu64, (uint64_t)1 << b);
            drk_json_u64(j, floor, hist[b]);
        }
    drk_json_close(j, '}');
}

/* Sums over the reports that have the object; peaks are sums of
 * per-process peaks. */
static void json_device_pool(drk_json *j, const rep_dpool *d)
{
    drk_json_open(j, "device_pool", '{');
    drk_json_u64(j, "processes", d->processes);
    drk_json_u64(j, "allocs", d->allocs);
    drk_json_u64(j, "frees", d->frees);
    drk_json_u64(j, "failed_allocs", d->failed_allocs);
    drk_json_u64(j, "out_of_memory", d->out_of_memory);
    drk_json_u64(j, "bad_frees", d->bad_frees);
    drk_json_u64(j, "driver_allocs", d->driver_allocs);
    drk_json_u64(j, "peak_live_bytes", d->peak_live_bytes);
    drk_json_u64(j, "peak_reserved_bytes", d->peak_reserved_bytes);
    drk_json_u64(j, "pages_created", d->pages_created);
    drk_json_u64(j, "pages_moved", d->pages_moved);
    drk_json_u64(j, "pages_released", d->pages_released);
    drk_json_u64(j, "defrag_events", d->defrag_events);
    drk_json_u64(j, "pages_made_ahead", d->pages_made_ahead);
    drk_json_u64(j, "pages_taken_ahead", d->pages_taken_ahead);
    drk_json_u64(j, "pages_created_in_calls", d->pages_created_in_calls);
    drk_json_u64(j, "growth_waits", d->growth_waits);
    drk_json_u64(j, "thread_shards", d->thread_shards);
    drk_json_u64(j, "handles_created", d->handles_created);
    drk_json_u64(j, "handles_moved", d->handles_moved);
    drk_json_open(j, "latency_ns", '{');
    drk_json_u64(j, "samples", d->latency_samples);
    json_histogram(j, "alloc", d->alloc_ns);
    json_histogram(j, "free", d->free_ns);
    drk_json_close(j, '}');
    drk_json_close(j, '}');
}

static void json_host_pool(drk_json *j, const rep_hpool *h)
{
    drk_json_open(j, "host_pool", '{');
    drk_json_u64(j, "processes", h->processes);
    drk_json_u64(j, "allocs", h->allocs);
    drk_json_u64(j, "frees", h->frees);
    drk_json_u64(j, "bad_frees", h->bad_frees);
    drk_json_u64(j, "peak_live_bytes", h->peak_live_bytes);
    drk_json_u64(j, "pinned_bytes", h->pinned_bytes);
    drk_json_u64(j, "chunks", h->chunks);
    drk_json_u64(j, "driver_fallbacks", h->driver_fallbacks);
    drk_json_u64(j, "driver_direct", h->driver_direct);
    drk_json_u64(j, "reuse_waits", h->reuse_waits);
    drk_json_u64(j, "reuse_wait_us", h->reuse_wait_us);
    drk_json_close(j, '}');
}

/* gpu_time.counters as in a report, with sums over the reports that have
 * it (reports, processes: those with counters on); rows most GPU time
 * first, merged by kernel-shape as rep_counter_row says. */
static void json_counters(drk_json *j, FILE *f, const rep_counters *k, size_t top)
{
    drk_json_open(j, "counters", '{');
    drk_json_bool(j, "enabled", k->processes > 0);
    drk_json_u64(j, "reports", k->reports);
    drk_json_u64(j, "processes", k->processes);
    drk_json_str(j, "off_reason", k->off_reason);
    drk_json_u64(j, "samples", k->samples);
    drk_json_u64(j, "discarded", k->discarded);
    drk_json_u64(j, "cost_ns", k->cost_ns);
    drk_json_u64(j, "passes", k->passes);
    drk_json_f64(j, "budget", k->budget);
    drk_json_u64(j, "distinct", k->nrows);
    drk_json_open(j, "by_kernel", '[');
    size_t shown = top && top < k->nrows ? top : k->nrows;
    for (size_t i = 0; i < shown; i++) {
        const rep_counter_row *r = &k->rows[i];
        drk_json_open(j, NULL, '{');
        json_shape(j, r->name, r->grid, r->block, r->shared_bytes);
        drk_json_f64(j, "dram_pct", r->dram_pct);
        drk_json_f64(j, "occupancy_pct", r->occupancy_pct);
        drk_json_f64(j, "ld_sectors_per_request", r->ld_sectors_per_request);
        drk_json_f64(j, "st_sectors_per_request", r->st_sectors_per_request);
        drk_json_u64(j, "samples", r->samples);
        drk_json_u64(j, "round", r->round);
        drk_json_close(j, '}');
        drk_json_flush(j, f);
    }
    drk_json_close(j, ']');
    drk_json_close(j, '}');
}

/* Sums over the reports that have gpu_time; rows by kernel-shape, their
 * median and p95 from the process with the most launches of it. */
static void json_gpu_time(drk_json *j, FILE *f, const rep_gpu *g, size_t top)
{
    drk_json_open(j, "gpu_time", '{');
    drk_json_bool(j, "enabled", g->processes > 0);
    drk_json_u64(j, "reports", g->reports);
    drk_json_u64(j, "processes", g->processes);
    drk_json_str(j, "off_reason", g->off_reason);
    drk_json_u64(j, "stopped_processes", g->stopped_processes);
    drk_json_u64(j, "kernels", g->kernels);
    drk_json_u64(j, "kernel_ns", g->kernel_ns);
    drk_json_u64(j, "copies", g->copies);
    drk_json_u64(j, "copy_ns", g->copy_ns);
    drk_json_u64(j, "copy_bytes", g->copy_bytes);
    drk_json_u64(j, "dropped", g->dropped);
    drk_json_u64(j, "untracked", g->untracked);
    drk_json_u64(j, "late", g->late);
    if (g->has_excluded)
        drk_json_u64(j, "excluded", g->excluded);
    if (g->has_unsampled)
        drk_json_u64(j, "unsampled_rounds", g->unsampled);
    if (g->has_drk) {
        drk_json_u64(j, "drk_records", g->drk_records);
        drk_json_u64(j, "drk_ns", g->drk_ns);
    }
    drk_json_u64(j, "rounds", g->rounds);
    drk_json_u64(j, "wall_ns", g->wall_ns);
    drk_json_u64(j, "busy_ns", g->busy_ns);
    drk_json_u64(j, "distinct", g->nrows);
    drk_json_open(j, "by_kernel", '[');
    size_t shown = top && top < g->nrows ? top : g->nrows;
    for (size_t i = 0; i < shown; i++) {
        const rep_time_row *r = &g->rows[i];
        drk_json_open(j, NULL, '{');
        json_shape(j, r->name, r->grid, r->block, r->shared_bytes);
        drk_json_u64(j, "launches", r->launches);
        drk_json_u64(j, "total_ns", r->total_ns);
        drk_json_u64(j, "min_ns", r->min_ns);
        drk_json_u64(j, "median_ns", r->median_ns);
        drk_json_u64(j, "p95_ns", r->p95_ns);
        drk_json_u64(j, "max_ns", r->max_ns);
        drk_json_close(j, '}');
        drk_json_flush(j, f);
    }
    drk_json_close(j, ']');
    if (g->counters.present)
        json_counters(j, f, &g->counters, top);
    drk_json_close(j, '}');
}

/* evolve as in a report, with sums over the reports that have it
 * (reports, processes: those with evolve on); every process's rows, most
 * evolved first, each with its pid. */
static void json_evolve(drk_json *j, FILE *f, const rep_evolve *e, size_t top)
{
    drk_json_open(j, "evolve", '{');
    drk_json_bool(j, "enabled", e->processes > 0);
    drk_json_u64(j, "reports", e->reports);
    drk_json_u64(j, "processes", e->processes);
    drk_json_str(j, "off_reason", e->off_reason);
    drk_json_f64(j, "budget", e->budget);
    drk_json_u64(j, "rounds", e->rounds);
    drk_json_u64(j, "trial_ns", e->trial_ns);
    drk_json_u64(j, "trial_bytes", e->trial_bytes);
    drk_json_u64(j, "program_kernel_ns", e->program_kernel_ns);
    drk_json_u64(j, "own_context_mib", e->own_context_mib);
    drk_json_u64(j, "gave_back_memory", e->gave_back);
    drk_json_u64(j, "saved_ns", e->saved_ns);
    drk_json_f64(j, "trial_share", e->trial_share);
    drk_json_f64(j, "researched_share", e->researched_share);
    drk_json_u64(j, "kernels", e->kernels);
    drk_json_u64(j, "evolved", e->evolved);
    drk_json_u64(j, "refused", e->refused);
    drk_json_u64(j, "failed", e->failed);
    drk_json_open(j, "captures", '{');
    drk_json_u64(j, "captured", e->captured);
    drk_json_u64(j, "snapped", e->snapped);
    drk_json_u64(j, "moved", e->moved);
    drk_json_u64(j, "busy", e->busy);
    drk_json_u64(j, "mismatched", e->mismatched);
    drk_json_close(j, '}');
    drk_json_u64(j, "distinct", e->nrows);
    drk_json_open(j, "by_kernel", '[');
    size_t shown = top && top < e->nrows ? top : e->nrows;
    for (size_t i = 0; i < shown; i++) {
        const rep_evolve_row *r = &e->rows[i];
        drk_json_open(j, NULL, '{');
        drk_json_u64(j, "pid", r->pid);
        json_shape(j, r->name, r->grid, r->block, r->shared_bytes);
        drk_json_str(j, "state", r->state);
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
        drk_json_close(j, '}');
        drk_json_flush(j, f);
    }
    drk_json_close(j, ']');
    drk_json_close(j, '}');
}

/* A process's findings as in its report, evidence whole. */
static void json_findings(drk_json *j, FILE *f, const rep_findings *fs)
{
    drk_json_open(j, "findings", '[');
    for (size_t i = 0; i < fs->n; i++) {
        const rep_finding *x = &fs->list[i];
        drk_json_open(j, NULL, '{');
        drk_json_str(j, "name", x->name);
        drk_json_u64(j, "first_round", x->first_round);
        drk_json_u64(j, "last_round", x->last_round);
        drk_json_u64(j, "rounds", x->rounds);
        if (x->kernel) {
            drk_json_open(j, "kernel", '{');
            json_shape(j, x->kernel, x->grid, x->block, x->shared_bytes);
            drk_json_close(j, '}');
        } else {
            drk_json_null(j, "kernel");
        }
        drk_json_f64(j, "value", x->value);
        drk_json_f64(j, "reference", x->reference);
        drk_json_str(j, "evidence", x->evidence);
        drk_json_close(j, '}');
        drk_json_flush(j, f); /* evidence runs to 2 KB a finding */
    }
    drk_json_close(j, ']');
}

void print_json(FILE *f, const rep_process *const *procs, size_t n, const rep_totals *t, size_t top)
{
    drk_json j = {0};
    drk_json_open(&j, NULL, '{');
    drk_json_str(&j, "schema", "drk-report-summary");
    drk_json_u64(&j, "version", 1);
    drk_json_open(&j, "processes", '[');
    for (size_t i = 0; i < n; i++) {
        const rep_process *p = procs[i];
        drk_json_open(&j, NULL, '{');
        drk_json_str(&j, "report", p->path);
        drk_json_str(&j, "program", p->program);
        drk_json_u64(&j, "pid", p->pid);
        drk_json_u64(&j, "forked_from", p->forked_from);
        drk_json_u64(&j, "start_unix_ns", p->start_ns);
        drk_json_u64(&j, "end_unix_ns", p->end_ns);
        if (p->t.gpu.present) {
            /* The rounds themselves stay in the process's own report. */
            const rep_gpu *g = &p->t.gpu;
            drk_json_open(&j, "gpu_time", '{');
            drk_json_bool(&j, "enabled", g->processes > 0);
            drk_json_str(&j, "off_reason", g->off_reason);
            drk_json_str(&j, "stopped", g->stopped);
            drk_json_u64(&j, "rounds", g->rounds);
            drk_json_u64(&j, "wall_ns", g->wall_ns);
            drk_json_u64(&j, "busy_ns", g->busy_ns);
            drk_json_close(&j, '}');
        }
        if (p->t.evolve.present) {
            const rep_evolve *e = &p->t.evolve;
            drk_json_open(&j, "evolve", '{');
            drk_json_bool(&j, "enabled", e->processes > 0);
            drk_json_str(&j, "off_reason", e->off_reason);
            drk_json_u64(&j, "kernels", e->kernels);
            drk_json_u64(&j, "evolved", e->evolved);
            drk_json_close(&j, '}');
        }
        if (p->findings.present)
            json_findings(&j, f, &p->findings);
        drk_json_close(&j, '}');
    }
    drk_json_close(&j, ']');

    drk_json_open(&j, "kernels", '{');
    drk_json_u64(&j, "launches", t->launches);
    drk_json_u64(&j, "failed_launches", t->failed_launches);
    drk_json_u64(&j, "untracked_launches", t->untracked_launches);
    drk_json_u64(&j, "distinct", t->nkernels);
    if (t->facts.present) {
        const rep_facts *x = &t->facts;
        drk_json_open(&j, "facts", '{');
        drk_json_u64(&j, "launched_kernels", x->launched);
        drk_json_u64(&j, "with_layout", x->with_layout);
        drk_json_u64(&j, "layout_from_image", x->from_image);
        drk_json_u64(&j, "layout_equal_to_driver", x->equal);
        drk_json_u64(&j, "layout_differs_from_driver", x->differs);
        drk_json_u64(&j, "with_ptx", x->with_ptx);
        drk_json_u64(&j, "ptx_for_device", x->ptx_for_device);
        drk_json_close(&j, '}');
    }
    drk_json_open(&j, "list", '[');
    size_t shown = top && top < t->nkernels ? top : t->nkernels;
    for (size_t i = 0; i < shown; i++) {
        const rep_kernel *k = &t->kernels[i];
        drk_json_open(&j, NULL, '{');
        drk_json_str(&j, "name", k->name);
        drk_json_u64(&j, "handles", k->handles);
        drk_json_u64(&j, "launches", k->launches);
        drk_json_open(&j, "shapes", '[');
        for (size_t s = 0; s < k->nshapes; s++) {
            drk_json_open(&j, NULL, '{');
            json_dim3(&j, "grid", k->shapes[s].grid);
            json_dim3(&j, "block", k->shapes[s].block);
            drk_json_u64(&j, "shared_bytes", k->shapes[s].shared_bytes);
            drk_json_u64(&j, "launches", k->shapes[s].launches);
            drk_json_close(&j, '}');
        }
        drk_json_close(&j, ']');
        drk_json_u64(&j, "other_shape_launches", k->other_shape_launches);
        drk_json_u64(&j, "gpu_ns", k->gpu_ns);
        drk_json_u64(&j, "gpu_launches", k->gpu_launches);
        drk_json_close(&j, '}');
        drk_json_flush(&j, f); /* a kernel at a time: the buffer stays small */
    }
    drk_json_close(&j, ']');
    drk_json_close(&j, '}');

    drk_json_open(&j, "calls", '{');
    for (size_t i = 0; i < t->nfamilies; i++) {
        drk_json_open(&j, t->families[i].name, '{');
        drk_json_u64(&j, "total", t->families[i].total);
        drk_json_open(&j, "by_name", '{');
        for (size_t m = 0; m < t->families[i].nnames; m++)
            drk_json_u64(&j, t->families[i].names[m].name, t->families[i].names[m].calls);
        drk_json_close(&j, '}');
        drk_json_close(&j, '}');
    }
    drk_json_close(&j, '}');

    drk_json_open(&j, "memory", '{');
    for (size_t i = 0; i < t->nmemory; i++) {
        const rep_memkind *k = &t->memory[i];
        drk_json_open(&j, k->name, '{');
        drk_json_u64(&j, "allocs", k->allocs);
        drk_json_u64(&j, "failed", k->failed);
        drk_json_u64(&j, "bytes", k->bytes);
        drk_json_u64(&j, "frees", k->frees);
        drk_json_u64(&j, "failed_frees", k->failed_frees);
        drk_json_close(&j, '}');
    }
    drk_json_close(&j, '}');
    if (t->dpool.present)
        json_device_pool(&j, &t->dpool);
    if (t->hpool.present)
        json_host_pool(&j, &t->hpool);
    if (t->gpu.present)
        json_gpu_time(&j, f, &t->gpu, top);
    if (t->evolve.present)
        json_evolve(&j, f, &t->evolve, top);
    drk_json_close(&j, '}');
    /* Write errors show in ferror(f), which drk checks before it exits. */
    if (drk_json_flush(&j, f) != 0 && j.failed)
        fputs("drk report: out of memory: the JSON is incomplete\n", stderr);
    drk_json_free(&j);
}

/* --compare: B over A as "1.500"; "-" when A has nothing to divide. */
static const char *ratio_text(uint64_t b, uint64_t a, char *buf, size_t n)
{
    if (a)
        snprintf(buf, n, "%.3f", (double)b / (double)a);
    else
        snprintf(buf, n, "-");
    return buf;
}

/* A side's headline: what was read, its busy share and kernel time, or why
 * it has no times. */
static void print_side(FILE *f, const char *label, const rep_side *s)
{
    const rep_gpu *g = &s->t->gpu;
    char a[32], b[32], c[32], d[32];
    fprintf(f, "  %s  %s (%zu process%s): ", label, s->path, s->n, s->n == 1 ? "" : "es");
    if (g->processes) {
        if (g->rounds)
            fprintf(f, "GPU busy %s of %s (%s%%) over %" PRIu64 " round%s, ", human_ns(g->busy_ns, a, sizeof a),
                    human_ns(g->wall_ns, b, sizeof b), percent_text(g->busy_ns, g->wall_ns, 0, c, sizeof c), g->rounds,
                    g->rounds == 1 ? "" : "s");
        fprintf(f, "kernel time %s", human_ns(g->kernel_ns, d, sizeof d));
        if (g->processes < s->n)
            fprintf(f, " (%" PRIu64 " of %zu processes timed)", g->processes, s->n);
        fprintf(f, ", ");
    } else if (g->present) {
        fprintf(f, "no GPU times (off: %s), ", g->off_reason ? g->off_reason : "no reason given");
    } else {
        fprintf(f, "no GPU times (no gpu_time: an older drk), ");
    }
    fprintf(f, "%" PRIu64 " launch%s\n", s->t->launches, s->t->launches == 1 ? "" : "es");
}

static int double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The per-round kernel time ratios of rounds [from, to): their median
 * (the mean of the middle two of an even count) and range, over the rounds
 * with kernel time in A. Returns how many rounds had a ratio. */
static size_t round_ratios(const rep_compare *c, size_t from, size_t to, double *median, double *lo, double *hi)
{
    double *r = malloc((to - from + 1) * sizeof *r);
    size_t n = 0;
    if (!r)
        return 0; /* out of memory: no summary, the table stands */
    for (size_t i = from; i < to; i++)
        if (c->rounds[i].a.kernel_ns)
            r[n++] = (double)c->rounds[i].b.kernel_ns / (double)c->rounds[i].a.kernel_ns;
    if (n) {
        qsort(r, n, sizeof *r, double_cmp);
        *median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
        *lo = r[0], *hi = r[n - 1];
    }
    free(r);
    return n;
}

/* A kernel's count on one side: its GPU time or launches, "-" when the
 * side has none of it. */
static const char *count_text(const rep_cmp_count *x, int by_time, char *buf, size_t n)
{
    if (x->present)
        return by_time ? human_ns(x->ns, buf, n) : u64s(x->launches, buf, n);
    snprintf(buf, n, "-");
    return buf;
}

static void print_compare_kernels(FILE *f, const rep_compare *c, size_t top)
{
    int t = c->by_time;
    fprintf(f, "kernels by %s, B against A:\n", t ? "GPU time (all shapes)" : "launches");
    if (!c->nkernels) {
        fprintf(f, "  (no kernels on either side)\n\n");
        return;
    }
    size_t shown = top && top < c->nkernels ? top : c->nkernels;
    table tb;
    table_init(&tb, t ? "lrrrrr" : "lrrr");
    if (t)
        table_row(&tb, (const char *const[]){"kernel", "A GPU time", "B GPU time", "B/A", "A launches", "B launches"});
    else
        table_row(&tb, (const char *const[]){"kernel", "A launches", "B launches", "B/A"});
    for (size_t i = 0; i < shown; i++) {
        const rep_cmp_kernel *k = &c->kernels[i];
        char name[4 * NAME_COLUMN + 1], va[32], vb[32], ratio[32], la[32], lb[32];
        text_fit(k->name, NAME_COLUMN, name, sizeof name);
        if (!k->a.present)
            snprintf(ratio, sizeof ratio, "(B only)");
        else if (!k->b.present)
            snprintf(ratio, sizeof ratio, "(A only)");
        else if (t)
            ratio_text(k->b.ns, k->a.ns, ratio, sizeof ratio);
        else
            ratio_text(k->b.launches, k->a.launches, ratio, sizeof ratio);
        count_text(&k->a, 0, la, sizeof la);
        count_text(&k->b, 0, lb, sizeof lb);
        if (t)
            table_row(&tb, (const char *const[]){name, count_text(&k->a, 1, va, sizeof va),
                                                 count_text(&k->b, 1, vb, sizeof vb), ratio, la, lb});
        else
            table_row(&tb, (const char *const[]){name, la, lb, ratio});
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
    if (shown < c->nkernels) {
        uint64_t ra = 0, rb = 0;
        char a[32], b[32];
        for (size_t i = shown; i < c->nkernels; i++) {
            ra = add(ra, t ? c->kernels[i].a.ns : c->kernels[i].a.launches);
            rb = add(rb, t ? c->kernels[i].b.ns : c->kernels[i].b.launches);
        }
        fprintf(f, "  ... %zu more kernel%s: A %s, B %s\n", c->nkernels - shown, c->nkernels - shown == 1 ? "" : "s",
                t ? human_ns(ra, a, sizeof a) : u64s(ra, a, sizeof a),
                t ? human_ns(rb, b, sizeof b) : u64s(rb, b, sizeof b));
    }
    fputc('\n', f);
}

static void print_compare_rounds(FILE *f, const rep_compare *c, size_t top)
{
    if (!c->by_time || !c->nrounds) {
        fprintf(f, "rounds: %s\n",
                c->by_time ? "none that both have" : "not compared, without GPU times on both sides");
        return;
    }
    size_t shown = top && top < c->nrounds ? top : c->nrounds, from = c->nrounds - shown;
    fprintf(f, "rounds both have (by index): %zu", c->nrounds);
    if (shown < c->nrounds)
        fprintf(f, ", the last %zu listed", shown);
    fprintf(f, "; B against A:\n");
    table tb;
    table_init(&tb, "rrrrrrrrrr");
    table_row(&tb, (const char *const[]){"round", "A wall", "B wall", "B/A", "A busy", "B busy", "B/A",
                                         "A kernel time", "B kernel time", "B/A"});
    for (size_t i = from; i < c->nrounds; i++) {
        const rep_cmp_round *r = &c->rounds[i];
        char idx[32], aw[32], bw[32], rw[32], ab[32], bb[32], rbusy[32], ak[32], bk[32], rk[32];
        table_row(&tb, (const char *const[]){
                           u64s(r->index, idx, sizeof idx), human_ns(r->a.wall_ns, aw, sizeof aw),
                           human_ns(r->b.wall_ns, bw, sizeof bw), ratio_text(r->b.wall_ns, r->a.wall_ns, rw, sizeof rw),
                           human_ns(r->a.busy_ns, ab, sizeof ab), human_ns(r->b.busy_ns, bb, sizeof bb),
                           ratio_text(r->b.busy_ns, r->a.busy_ns, rbusy, sizeof rbusy),
                           human_ns(r->a.kernel_ns, ak, sizeof ak), human_ns(r->b.kernel_ns, bk, sizeof bk),
                           ratio_text(r->b.kernel_ns, r->a.kernel_ns, rk, sizeof rk)});
    }
    table_print(&tb, f, "  ");
    table_free(&tb);
    double median = 0, lo = 0, hi = 0;
    size_t n = round_ratios(c, from, c->nrounds, &median, &lo, &hi);
    if (!n) {
        fprintf(f, "  kernel time B/A per round: none (no round listed has kernel time in A)\n");
        return;
    }
    fprintf(f, "  kernel time B/A per round: median %.3f, range %.3f..%.3f over %zu round%s", median, lo, hi, n,
            n == 1 ? "" : "s");
    if (n < shown)
        fprintf(f, " (%zu without kernel time in A left out)", shown - n);
    fprintf(f, ": the noise of the rounds shown\n");
}

void print_compare(FILE *f, const rep_side *a, const rep_side *b, const rep_compare *c, size_t top)
{
    const rep_totals *ta = a->t, *tb = b->t;
    char w[32], x[32], y[32], z[32];
    fprintf(f, "== compare: B against A ==\n");
    print_side(f, "A", a);
    print_side(f, "B", b);
    if (c->by_time)
        fprintf(f, "  B/A: wall %s, busy %s, kernel time %s, launches %s\n",
                ratio_text(tb->gpu.wall_ns, ta->gpu.wall_ns, w, sizeof w),
                ratio_text(tb->gpu.busy_ns, ta->gpu.busy_ns, x, sizeof x),
                ratio_text(tb->gpu.kernel_ns, ta->gpu.kernel_ns, y, sizeof y),
                ratio_text(tb->launches, ta->launches, z, sizeof z));
    else
        fprintf(f, "  %s no GPU times: kernels compared by launches; B/A: launches %s\n",
                !ta->gpu.processes && !tb->gpu.processes ? "neither has"
                : !ta->gpu.processes                     ? "A has"
                                                         : "B has",
                ratio_text(tb->launches, ta->launches, z, sizeof z));
    fputc('\n', f);
    print_compare_kernels(f, c, top);
    print_compare_rounds(f, c, top);
}

static void json_side(drk_json *j, const char *key, const rep_side *s)
{
    const rep_gpu *g = &s->t->gpu;
    drk_json_open(j, key, '{');
    drk_json_str(j, "path", s->path);
    drk_json_u64(j, "processes", s->n);
    drk_json_u64(j, "timed_processes", g->processes);
    drk_json_u64(j, "launches", s->t->launches);
    drk_json_u64(j, "rounds", g->rounds);
    drk_json_u64(j, "wall_ns", g->wall_ns);
    drk_json_u64(j, "busy_ns", g->busy_ns);
    drk_json_u64(j, "kernel_ns", g->kernel_ns);
    drk_json_close(j, '}');
}

/* B over A, null when A has nothing to divide. */
static void json_ratio(drk_json *j, const char *key, uint64_t b, uint64_t a)
{
    if (a)
        drk_json_f64(j, key, (double)b / (double)a);
    else
        drk_json_null(j, key);
}

static void json_count(drk_json *j, const char *key, const rep_cmp_count *x, int by_time)
{
    if (!x->present) {
        drk_json_null(j, key);
        return;
    }
    drk_json_open_inline(j, key, '{');
    if (by_time)
        drk_json_u64(j, "gpu_ns", x->ns);
    drk_json_u64(j, "launches", x->launches);
    drk_json_close(j, '}');
}

static void json_round_sum(drk_json *j, const char *key, const rep_round_sum *s)
{
    drk_json_open_inline(j, key, '{');
    drk_json_u64(j, "wall_ns", s->wall_ns);
    drk_json_u64(j, "busy_ns", s->busy_ns);
    drk_json_u64(j, "kernel_ns", s->kernel_ns);
    drk_json_close(j, '}');
}

void print_compare_json(FILE *f, const rep_side *a, const rep_side *b, const rep_compare *c, size_t top)
{
    drk_json j = {0};
    drk_json_open(&j, NULL, '{');
    drk_json_str(&j, "schema", "drk-report-compare");
    drk_json_u64(&j, "version", 1);
    drk_json_str(&j, "by", c->by_time ? "gpu_time" : "launches");
    json_side(&j, "a", a);
    json_side(&j, "b", b);
    drk_json_u64(&j, "distinct", c->nkernels);
    drk_json_open(&j, "kernels", '[');
    size_t shown = top && top < c->nkernels ? top : c->nkernels;
    for (size_t i = 0; i < shown; i++) {
        const rep_cmp_kernel *k = &c->kernels[i];
        drk_json_open(&j, NULL, '{');
        drk_json_str(&j, "name", k->name);
        json_count(&j, "a", &k->a, c->by_time);
        json_count(&j, "b", &k->b, c->by_time);
        if (k->a.present && k->b.present)
            json_ratio(&j, "ratio", c->by_time ? k->b.ns : k->b.launches, c->by_time ? k->a.ns : k->a.launches);
        else
            drk_json_null(&j, "ratio");
        drk_json_close(&j, '}');
        drk_json_flush(&j, f);
    }
    drk_json_close(&j, ']');
    drk_json_u64(&j, "common_rounds", c->nrounds);
    drk_json_open(&j, "rounds", '[');
    size_t rshown = top && top < c->nrounds ? top : c->nrounds, from = c->nrounds - rshown;
    for (size_t i = from; i < c->nrounds; i++) {
        const rep_cmp_round *r = &c->rounds[i];
        drk_json_open(&j, NULL, '{');
        drk_json_u64(&j, "index", r->index);
        json_round_sum(&j, "a", &r->a);
        json_round_sum(&j, "b", &r->b);
        json_ratio(&j, "wall_ratio", r->b.wall_ns, r->a.wall_ns);
        json_ratio(&j, "busy_ratio", r->b.busy_ns, r->a.busy_ns);
        json_ratio(&j, "kernel_ratio", r->b.kernel_ns, r->a.kernel_ns);
        drk_json_close(&j, '}');
        drk_json_flush(&j, f);
    }
    drk_json_close(&j, ']');
    double median = 0, lo = 0, hi = 0;
    size_t n = round_ratios(c, from, c->nrounds, &median, &lo, &hi);
    if (n) {
        drk_json_open(&j, "kernel_ratio", '{');
        drk_json_u64(&j, "rounds", n);
        drk_json_f64(&j, "median", median);
        drk_json_f64(&j, "min", lo);
        drk_json_f64(&j, "max", hi);
        drk_json_close(&j, '}');
    } else {
        drk_json_null(&j, "kernel_ratio");
    }
    drk_json_close(&j, '}');
    if (drk_json_flush(&j, f) != 0 && j.failed)
        fputs("drk report: out of memory: the JSON is incomplete\n", stderr);
    drk_json_free(&j);
}
