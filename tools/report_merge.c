/* Adding up reports: kernels by name, shapes by (grid, block, shared
 * bytes), call names and memory kinds by name, the pools' counters, GPU
 * time rows and hardware counters' rows by kernel-shape, evolve's counts
 * (its rows listed, most evolved first). And matching two
 * sets of reports for --compare: kernels by name, rounds by index.
 * Counters saturate rather than wrap, so an absurd sum never prints as a
 * small one. */
#include <stdlib.h>
#include <string.h>

#include "tools/report.h"

static uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static int kernel_ptr_by_name(const void *a, const void *b)
{
    return strcmp((*(const rep_kernel *const *)a)->name, (*(const rep_kernel *const *)b)->name);
}

static int kernel_by_launches_desc(const void *a, const void *b)
{
    const rep_kernel *x = a, *y = b;
    if (x->launches != y->launches)
        return x->launches < y->launches ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int shape_key_cmp(const rep_shape *x, const rep_shape *y)
{
    for (int d = 0; d < 3; d++) {
        if (x->grid[d] != y->grid[d])
            return x->grid[d] < y->grid[d] ? -1 : 1;
        if (x->block[d] != y->block[d])
            return x->block[d] < y->block[d] ? -1 : 1;
    }
    if (x->shared_bytes != y->shared_bytes)
        return x->shared_bytes < y->shared_bytes ? -1 : 1;
    return 0;
}

static int shape_by_key(const void *a, const void *b) { return shape_key_cmp(a, b); }

static int shape_by_launches_desc(const void *a, const void *b)
{
    const rep_shape *x = a, *y = b;
    if (x->launches != y->launches)
        return x->launches < y->launches ? 1 : -1;
    return shape_key_cmp(x, y);
}

/* One kernel from the `count` same-named ones at `group`. */
static int merge_kernel(const rep_kernel *const *group, size_t count, rep_kernel *out)
{
    size_t ns = 0;
    for (size_t i = 0; i < count; i++)
        ns += group[i]->nshapes;
    out->name = group[0]->name;
    out->shapes = malloc((ns + 1) * sizeof *out->shapes);
    if (!out->shapes)
        return -1;
    for (size_t i = 0; i < count; i++) {
        const rep_kernel *k = group[i];
        out->handles = add(out->handles, k->handles);
        out->launches = add(out->launches, k->launches);
        out->other_shape_launches = add(out->other_shape_launches, k->other_shape_launches);
        out->gpu_ns = add(out->gpu_ns, k->gpu_ns);
        out->gpu_launches = add(out->gpu_launches, k->gpu_launches);
        memcpy(out->shapes + out->nshapes, k->shapes, k->nshapes * sizeof *k->shapes);
        out->nshapes += k->nshapes;
    }
    if (out->nshapes > 1) {
        qsort(out->shapes, out->nshapes, sizeof *out->shapes, shape_by_key);
        size_t u = 0;
        for (size_t i = 0; i < out->nshapes; i++) {
            if (u && shape_key_cmp(&out->shapes[u - 1], &out->shapes[i]) == 0)
                out->shapes[u - 1].launches = add(out->shapes[u - 1].launches, out->shapes[i].launches);
            else
                out->shapes[u++] = out->shapes[i];
        }
        out->nshapes = u;
        qsort(out->shapes, out->nshapes, sizeof *out->shapes, shape_by_launches_desc);
    }
    return 0;
}

static int merge_kernels(const rep_totals *const *parts, size_t n, rep_totals *out)
{
    size_t total = 0;
    for (size_t p = 0; p < n; p++)
        total += parts[p]->nkernels;
    const rep_kernel **all = malloc((total + 1) * sizeof *all);
    out->kernels = calloc(total + 1, sizeof *out->kernels);
    if (!all || !out->kernels) {
        free(all);
        return -1;
    }
    size_t k = 0;
    for (size_t p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p]->nkernels; i++)
            all[k++] = &parts[p]->kernels[i];
    if (total > 1)
        qsort(all, total, sizeof *all, kernel_ptr_by_name);
    for (size_t i = 0; i < total;) {
        size_t j = i + 1;
        while (j < total && strcmp(all[j]->name, all[i]->name) == 0)
            j++;
        if (merge_kernel(all + i, j - i, &out->kernels[out->nkernels++]) != 0) {
            free(all);
            return -1;
        }
        i = j;
    }
    free(all);
    if (out->nkernels > 1)
        qsort(out->kernels, out->nkernels, sizeof *out->kernels, kernel_by_launches_desc);
    return 0;
}

/* Families, their names and memory kinds are few (tens): a linear search
 * keeps the first report's order, which is the order the shim writes. */
static int add_count(rep_family *f, const rep_count *c)
{
    for (size_t i = 0; i < f->nnames; i++)
        if (strcmp(f->names[i].name, c->name) == 0) {
            f->names[i].calls = add(f->names[i].calls, c->calls);
            return 0;
        }
    rep_count *n = realloc(f->names, (f->nnames + 1) * sizeof *n);
    if (!n)
        return -1;
    f->names = n;
    f->names[f->nnames++] = *c;
    return 0;
}

static int merge_families(const rep_totals *const *parts, size_t n, rep_totals *out)
{
    size_t total = 0;
    for (size_t p = 0; p < n; p++)
        total += parts[p]->nfamilies;
    out->families = calloc(total + 1, sizeof *out->families);
    if (!out->families)
        return -1;
    for (size_t p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p]->nfamilies; i++) {
            const rep_family *src = &parts[p]->families[i];
            rep_family *f = NULL;
            for (size_t j = 0; j < out->nfamilies && !f; j++)
                if (strcmp(out->families[j].name, src->name) == 0)
                    f = &out->families[j];
            if (!f) {
                f = &out->families[out->nfamilies++];
                f->name = src->name;
            }
            f->total = add(f->total, src->total);
            for (size_t j = 0; j < src->nnames; j++)
                if (add_count(f, &src->names[j]) != 0)
                    return -1;
        }
    return 0;
}

static int merge_memory(const rep_totals *const *parts, size_t n, rep_totals *out)
{
    size_t total = 0;
    for (size_t p = 0; p < n; p++)
        total += parts[p]->nmemory;
    out->memory = calloc(total + 1, sizeof *out->memory);
    if (!out->memory)
        return -1;
    for (size_t p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p]->nmemory; i++) {
            const rep_memkind *src = &parts[p]->memory[i];
            rep_memkind *k = NULL;
            for (size_t j = 0; j < out->nmemory && !k; j++)
                if (strcmp(out->memory[j].name, src->name) == 0)
                    k = &out->memory[j];
            if (!k) {
                k = &out->memory[out->nmemory++];
                k->name = src->name;
            }
            k->allocs = add(k->allocs, src->allocs);
            k->failed = add(k->failed, src->failed);
            k->bytes = add(k->bytes, src->bytes);
            k->frees = add(k->frees, src->frees);
            k->failed_frees = add(k->failed_frees, src->failed_frees);
        }
    return 0;
}

/* Peaks add up too: the sum of per-process peaks, an upper bound of the
 * processes' peak together (they need not peak at once). */
static void merge_dpool(rep_dpool *o, const rep_dpool *d)
{
    if (!d->present)
        return;
    o->present = 1;
    o->processes = add(o->processes, d->processes);
    o->allocs = add(o->allocs, d->allocs);
    o->frees = add(o->frees, d->frees);
    o->failed_allocs = add(o->failed_allocs, d->failed_allocs);
    o->out_of_memory = add(o->out_of_memory, d->out_of_memory);
    o->bad_frees = add(o->bad_frees, d->bad_frees);
    o->driver_allocs = add(o->driver_allocs, d->driver_allocs);
    o->peak_live_bytes = add(o->peak_live_bytes, d->peak_live_bytes);
    o->peak_reserved_bytes = add(o->peak_reserved_bytes, d->peak_reserved_bytes);
    o->pages_created = add(o->pages_created, d->pages_created);
    o->pages_moved = add(o->pages_moved, d->pages_moved);
    o->pages_released = add(o->pages_released, d->pages_released);
    o->defrag_events = add(o->defrag_events, d->defrag_events);
    o->pages_made_ahead = add(o->pages_made_ahead, d->pages_made_ahead);
    o->pages_taken_ahead = add(o->pages_taken_ahead, d->pages_taken_ahead);
    o->pages_created_in_calls = add(o->pages_created_in_calls, d->pages_created_in_calls);
    o->growth_waits = add(o->growth_waits, d->growth_waits);
    o->thread_shards = add(o->thread_shards, d->thread_shards);
    o->handles_created = add(o->handles_created, d->handles_created);
    o->handles_moved = add(o->handles_moved, d->handles_moved);
    o->latency_samples = add(o->latency_samples, d->latency_samples);
    for (int b = 0; b < REP_LATENCY_BUCKETS; b++) {
        o->alloc_ns[b] = add(o->alloc_ns[b], d->alloc_ns[b]);
        o->free_ns[b] = add(o->free_ns[b], d->free_ns[b]);
    }
}

static void merge_hpool(rep_hpool *o, const rep_hpool *h)
{
    if (!h->present)
        return;
    o->present = 1;
    o->processes = add(o->processes, h->processes);
    o->allocs = add(o->allocs, h->allocs);
    o->frees = add(o->frees, h->frees);
    o->bad_frees = add(o->bad_frees, h->bad_frees);
    o->peak_live_bytes = add(o->peak_live_bytes, h->peak_live_bytes);
    o->pinned_bytes = add(o->pinned_bytes, h->pinned_bytes);
    o->chunks = add(o->chunks, h->chunks);
    o->driver_fallbacks = add(o->driver_fallbacks, h->driver_fallbacks);
    o->driver_direct = add(o->driver_direct, h->driver_direct);
    o->reuse_waits = add(o->reuse_waits, h->reuse_waits);
    o->reuse_wait_us = add(o->reuse_wait_us, h->reuse_wait_us);
}

/* Kernel-shapes in order: name, then grid, block, shared bytes. */
static int kernel_shape_cmp(const char *xname, const uint64_t xgrid[3], const uint64_t xblock[3], uint64_t xshared,
                            const char *yname, const uint64_t ygrid[3], const uint64_t yblock[3], uint64_t yshared)
{
    int c = strcmp(xname, yname);
    if (c)
        return c;
    for (int d = 0; d < 3; d++) {
        if (xgrid[d] != ygrid[d])
            return xgrid[d] < ygrid[d] ? -1 : 1;
        if (xblock[d] != yblock[d])
            return xblock[d] < yblock[d] ? -1 : 1;
    }
    if (xshared != yshared)
        return xshared < yshared ? -1 : 1;
    return 0;
}

static int time_row_key_cmp(const rep_time_row *x, const rep_time_row *y)
{
    return kernel_shape_cmp(x->name, x->grid, x->block, x->shared_bytes, y->name, y->grid, y->block, y->shared_bytes);
}

/* Equal kernel-shapes in input order, so the first process wins a tie. */
static int time_row_by_key(const void *a, const void *b)
{
    const rep_time_row *x = a, *y = b;
    int c = time_row_key_cmp(x, y);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int time_row_by_total_desc(const void *a, const void *b)
{
    const rep_time_row *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns < y->total_ns ? 1 : -1;
    if (x->launches != y->launches)
        return x->launches < y->launches ? 1 : -1;
    return time_row_key_cmp(x, y);
}

static int counter_row_key_cmp(const rep_counter_row *x, const rep_counter_row *y)
{
    return kernel_shape_cmp(x->name, x->grid, x->block, x->shared_bytes, y->name, y->grid, y->block, y->shared_bytes);
}

/* Equal kernel-shapes in input order, as time_row_by_key. */
static int counter_row_by_key(const void *a, const void *b)
{
    const rep_counter_row *x = a, *y = b;
    int c = counter_row_key_cmp(x, y);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* For bsearch: a counters row against a time row. */
static int counter_row_vs_time_row(const void *key, const void *elem)
{
    const rep_counter_row *x = key;
    const rep_time_row *y = elem;
    return kernel_shape_cmp(x->name, x->grid, x->block, x->shared_bytes, y->name, y->grid, y->block, y->shared_bytes);
}

/* The order of the text report's table: most GPU time first, then as
 * first sampled (the report's order, the first process's first). */
static int counter_row_by_gpu_desc(const void *a, const void *b)
{
    const rep_counter_row *x = a, *y = b;
    if (x->gpu_ns != y->gpu_ns)
        return x->gpu_ns < y->gpu_ns ? 1 : -1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One row from the `count` rows of a kernel-shape at `group` (one per
 * process): each value the mean of the processes' (a row holds its
 * process's latest sample, so each process counts once), sectors per
 * request over those that made such requests (-1 when none did); samples
 * summed, the largest round. */
static void merge_counter_group(const rep_counter_row *group, size_t count, rep_counter_row *out)
{
    double dram = 0, occ = 0, ld = 0, st = 0;
    size_t nld = 0, nst = 0;
    *out = group[0];
    out->samples = 0;
    for (size_t i = 0; i < count; i++) {
        const rep_counter_row *r = &group[i];
        dram += r->dram_pct;
        occ += r->occupancy_pct;
        if (r->ld_sectors_per_request >= 0)
            ld += r->ld_sectors_per_request, nld++;
        if (r->st_sectors_per_request >= 0)
            st += r->st_sectors_per_request, nst++;
        out->samples = add(out->samples, r->samples);
        if (r->round > out->round)
            out->round = r->round;
    }
    out->dram_pct = dram / (double)count;
    out->occupancy_pct = occ / (double)count;
    out->ld_sectors_per_request = nld ? ld / (double)nld : -1;
    out->st_sectors_per_request = nst ? st / (double)nst : -1;
}

/* gpu_time.counters of `n` parts into `g`, whose rows are in key order
 * (merge_gpu's, before it orders them by time): sums, and rows by
 * kernel-shape (merge_counter_group), each with its GPU time for the
 * order. */
static int merge_counters(const rep_totals *const *parts, size_t n, rep_gpu *g)
{
    rep_counters *o = &g->counters;
    size_t total = 0;
    int budget_on = 0, reason_asked = 0; /* budget and off_reason are from a report with counters on, asked */
    for (size_t p = 0; p < n; p++) {
        const rep_counters *k = &parts[p]->gpu.counters;
        if (!k->present)
            continue;
        if (!o->present || (k->processes && !budget_on))
            o->budget = k->budget;
        budget_on |= k->processes > 0;
        if (k->off_reason && (!o->off_reason || (k->asked && !reason_asked))) {
            o->off_reason = k->off_reason;
            reason_asked = k->asked > 0;
        }
        o->present = 1;
        o->reports = add(o->reports, k->reports);
        o->processes = add(o->processes, k->processes);
        o->asked = add(o->asked, k->asked);
        o->samples = add(o->samples, k->samples);
        o->discarded = add(o->discarded, k->discarded);
        o->cost_ns = add(o->cost_ns, k->cost_ns);
        if (k->passes > o->passes)
            o->passes = k->passes;
        total += k->nrows;
    }
    rep_counter_row *all = malloc((total + 1) * sizeof *all);
    o->rows = malloc((total + 1) * sizeof *o->rows);
    if (!all || !o->rows) {
        free(all);
        return -1;
    }
    size_t m = 0;
    for (size_t p = 0; p < n; p++) {
        const rep_counters *k = &parts[p]->gpu.counters;
        for (size_t i = 0; i < k->nrows; i++) {
            all[m] = k->rows[i];
            all[m].seq = m;
            m++;
        }
    }
    if (m > 1)
        qsort(all, m, sizeof *all, counter_row_by_key);
    for (size_t i = 0; i < m;) {
        size_t j = i + 1;
        while (j < m && counter_row_key_cmp(&all[i], &all[j]) == 0)
            j++;
        rep_counter_row *r = &o->rows[o->nrows++];
        merge_counter_group(all + i, j - i, r);
        const rep_time_row *t = bsearch(r, g->rows, g->nrows, sizeof *g->rows, counter_row_vs_time_row);
        r->gpu_ns = t ? t->total_ns : 0;
        i = j;
    }
    free(all);
    if (o->nrows > 1)
        qsort(o->rows, o->nrows, sizeof *o->rows, counter_row_by_gpu_desc);
    return 0;
}

/* GPU times: counters and the rounds' wall and busy time add up, rows by
 * kernel-shape. A row's median and p95 cannot be recomputed from other
 * quantiles: they are taken from the process with the most launches of
 * the shape (the first such on a tie). */
static int merge_gpu(const rep_totals *const *parts, size_t n, rep_gpu *o)
{
    size_t total = 0;
    for (size_t p = 0; p < n; p++) {
        const rep_gpu *g = &parts[p]->gpu;
        o->rounds = add(o->rounds, g->rounds);
        o->wall_ns = add(o->wall_ns, g->wall_ns);
        o->busy_ns = add(o->busy_ns, g->busy_ns);
        if (!g->present)
            continue;
        o->present = 1;
        o->reports = add(o->reports, g->reports);
        o->processes = add(o->processes, g->processes);
        o->stopped_processes = add(o->stopped_processes, g->stopped_processes);
        if (!o->off_reason)
            o->off_reason = g->off_reason;
        if (!o->source)
            o->source = g->source;
        if (!o->stopped)
            o->stopped = g->stopped;
        o->kernels = add(o->kernels, g->kernels);
        o->kernel_ns = add(o->kernel_ns, g->kernel_ns);
        o->copies = add(o->copies, g->copies);
        o->copy_ns = add(o->copy_ns, g->copy_ns);
        o->copy_bytes = add(o->copy_bytes, g->copy_bytes);
        o->dropped = add(o->dropped, g->dropped);
        o->untracked = add(o->untracked, g->untracked);
        o->late = add(o->late, g->late);
        o->has_excluded |= g->has_excluded;
        o->has_unsampled |= g->has_unsampled;
        o->excluded = add(o->excluded, g->excluded);
        o->unsampled = add(o->unsampled, g->unsampled);
        o->has_drk |= g->has_drk;
        o->drk_records = add(o->drk_records, g->drk_records);
        o->drk_ns = add(o->drk_ns, g->drk_ns);
        total += g->nrows;
    }
    o->rows = malloc((total + 1) * sizeof *o->rows);
    if (!o->rows)
        return -1;
    for (size_t p = 0; p < n; p++) {
        const rep_gpu *g = &parts[p]->gpu;
        for (size_t i = 0; i < g->nrows; i++) {
            o->rows[o->nrows] = g->rows[i];
            o->rows[o->nrows].seq = o->nrows;
            o->nrows++;
        }
    }
    if (o->nrows > 1) {
        qsort(o->rows, o->nrows, sizeof *o->rows, time_row_by_key);
        size_t u = 0;
        for (size_t i = 0; i < o->nrows; i++) {
            rep_time_row *r = &o->rows[i], *m = u ? &o->rows[u - 1] : NULL;
            if (!m || time_row_key_cmp(m, r) != 0) {
                o->rows[u++] = *r;
                continue;
            }
            if (r->quantile_launches > m->quantile_launches) {
                m->median_ns = r->median_ns;
                m->p95_ns = r->p95_ns;
                m->quantile_launches = r->quantile_launches;
            }
            if (r->min_ns < m->min_ns)
                m->min_ns = r->min_ns;
            if (r->max_ns > m->max_ns)
                m->max_ns = r->max_ns;
            m->launches = add(m->launches, r->launches);
            m->total_ns = add(m->total_ns, r->total_ns);
        }
        o->nrows = u;
    }
    /* The rows in key order still: the counters' rows find their time. */
    if (merge_counters(parts, n, o) != 0)
        return -1;
    if (o->nrows > 1)
        qsort(o->rows, o->nrows, sizeof *o->rows, time_row_by_total_desc);
    return 0;
}

/* The order "most evolved" means: serving a variant first, the fastest
 * first; then by how far the engine got (settled, searching, capturing,
 * failed, refused, then states a newer drk may add); more proven, more
 * tried; then as listed. */
static int state_rank(const char *state)
{
    static const char *const order[] = {"settled", "searching", "capturing", "failed", "refused"};
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (strcmp(state, order[i]) == 0)
            return i;
    return (int)(sizeof order / sizeof order[0]);
}

static int serves_variant(const rep_evolve_row *r) { return strcmp(r->serving, "default") != 0; }

static int evolve_row_order(const void *a, const void *b)
{
    const rep_evolve_row *x = a, *y = b;
    int sx = serves_variant(x), sy = serves_variant(y);
    if (sx != sy)
        return sx ? -1 : 1;
    if (sx && x->speedup != y->speedup)
        return x->speedup > y->speedup ? -1 : 1;
    int rx = state_rank(x->state), ry = state_rank(y->state);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    if (x->proven != y->proven)
        return x->proven > y->proven ? -1 : 1;
    if (x->tried != y->tried)
        return x->tried > y->tried ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* evolve of `n` parts: counts summed, budget and off_reason as counters'
 * (merge_counters); unless one report has evolve (its shares kept),
 * trial_share recomputed from the sums and researched_share the mean of the
 * processes with evolve on weighted by their rounds (plain when none has
 * rounds); every part's rows, most evolved first. */
static int merge_evolve(const rep_totals *const *parts, size_t n, rep_evolve *o)
{
    size_t total = 0;
    int budget_on = 0, reason_asked = 0;
    double share_sum = 0, share_plain = 0;
    uint64_t share_rounds = 0;
    for (size_t p = 0; p < n; p++) {
        const rep_evolve *e = &parts[p]->evolve;
        if (!e->present)
            continue;
        if (!o->present || (e->processes && !budget_on))
            o->budget = e->budget;
        budget_on |= e->processes > 0;
        if (e->off_reason && (!o->off_reason || (e->asked && !reason_asked))) {
            o->off_reason = e->off_reason;
            reason_asked = e->asked > 0;
        }
        if (e->processes) {
            share_sum += e->researched_share * (double)e->rounds;
            share_plain += e->researched_share;
            share_rounds = add(share_rounds, e->rounds);
        }
        o->trial_share = e->trial_share; /* both kept when this is the only report */
        o->researched_share = e->researched_share;
        o->present = 1;
        o->reports = add(o->reports, e->reports);
        o->processes = add(o->processes, e->processes);
        o->asked = add(o->asked, e->asked);
        o->rounds = add(o->rounds, e->rounds);
        o->trial_ns = add(o->trial_ns, e->trial_ns);
        o->trial_bytes = add(o->trial_bytes, e->trial_bytes);
        o->program_kernel_ns = add(o->program_kernel_ns, e->program_kernel_ns);
        o->own_context_mib = e->own_context_mib > o->own_context_mib ? e->own_context_mib : o->own_context_mib;
        o->gave_back = add(o->gave_back, e->gave_back);
        o->saved_ns = add(o->saved_ns, e->saved_ns);
        o->kernels = add(o->kernels, e->kernels);
        o->evolved = add(o->evolved, e->evolved);
        o->refused = add(o->refused, e->refused);
        o->failed = add(o->failed, e->failed);
        o->captured = add(o->captured, e->captured);
        o->snapped = add(o->snapped, e->snapped);
        o->moved = add(o->moved, e->moved);
        o->busy = add(o->busy, e->busy);
        o->mismatched = add(o->mismatched, e->mismatched);
        total += e->nrows;
    }
    if (o->reports > 1) {
        o->trial_share = o->program_kernel_ns ? (double)o->trial_ns / (double)o->program_kernel_ns : 0;
        o->researched_share = !o->processes ? 0
                              : share_rounds ? share_sum / (double)share_rounds
                                             : share_plain / (double)o->processes;
    }
    o->rows = malloc((total + 1) * sizeof *o->rows);
    if (!o->rows)
        return -1;
    for (size_t p = 0; p < n; p++) {
        const rep_evolve *e = &parts[p]->evolve;
        for (size_t i = 0; i < e->nrows; i++) {
            o->rows[o->nrows] = e->rows[i];
            o->rows[o->nrows].seq = o->nrows;
            o->nrows++;
        }
    }
    if (o->nrows > 1)
        qsort(o->rows, o->nrows, sizeof *o->rows, evolve_row_order);
    return 0;
}

int totals_merge(const rep_totals *const *parts, size_t n, rep_totals *out)
{
    memset(out, 0, sizeof *out);
    for (size_t p = 0; p < n; p++) {
        out->launches = add(out->launches, parts[p]->launches);
        out->failed_launches = add(out->failed_launches, parts[p]->failed_launches);
        out->untracked_launches = add(out->untracked_launches, parts[p]->untracked_launches);
        merge_dpool(&out->dpool, &parts[p]->dpool);
        merge_hpool(&out->hpool, &parts[p]->hpool);
        const rep_facts *f = &parts[p]->facts;
        if (!f->present)
            continue;
        rep_facts *o = &out->facts;
        o->present = 1;
        o->launched = add(o->launched, f->launched);
        o->with_layout = add(o->with_layout, f->with_layout);
        o->from_image = add(o->from_image, f->from_image);
        o->equal = add(o->equal, f->equal);
        o->differs = add(o->differs, f->differs);
        o->with_ptx = add(o->with_ptx, f->with_ptx);
        o->ptx_for_device = add(o->ptx_for_device, f->ptx_for_device);
        if (!o->device_sm)
            o->device_sm = f->device_sm;
    }
    if (merge_kernels(parts, n, out) != 0 || merge_families(parts, n, out) != 0 || merge_memory(parts, n, out) != 0 ||
        merge_gpu(parts, n, &out->gpu) != 0 || merge_evolve(parts, n, &out->evolve) != 0) {
        totals_release(out);
        return -1;
    }
    return 0;
}

void totals_release(rep_totals *t)
{
    for (size_t i = 0; i < t->nkernels; i++)
        free(t->kernels[i].shapes);
    for (size_t i = 0; i < t->nfamilies; i++)
        free(t->families[i].names);
    free(t->kernels);
    free(t->families);
    free(t->memory);
    free(t->gpu.rows);
    free(t->gpu.counters.rows);
    free(t->evolve.rows);
    memset(t, 0, sizeof *t);
}

/* --compare: a kernel-shape's (or kernel's) count on one side, before the
 * sides are matched by name. */
typedef struct side_count {
    const char *name;
    int side; /* 0: A, 1: B */
    uint64_t ns, launches;
} side_count;

static int side_count_by_name(const void *a, const void *b)
{
    const side_count *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->side - y->side;
}

/* GPU time rows when both sides have times (a kernel timed but never seen
 * launched has rows too), else the kernels' launches. */
static size_t side_counts(const rep_totals *t, int side, int by_time, side_count *out)
{
    size_t n = 0;
    if (by_time)
        for (size_t i = 0; i < t->gpu.nrows; i++)
            out[n++] = (side_count){t->gpu.rows[i].name, side, t->gpu.rows[i].total_ns, t->gpu.rows[i].launches};
    else
        for (size_t i = 0; i < t->nkernels; i++)
            out[n++] = (side_count){t->kernels[i].name, side, 0, t->kernels[i].launches};
    return n;
}

static uint64_t larger(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* The larger side first: a kernel that went away ranks as high as one
 * that came. */
static int cmp_kernel_by_ns_desc(const void *a, const void *b)
{
    const rep_cmp_kernel *x = a, *y = b;
    uint64_t u = larger(x->a.ns, x->b.ns), v = larger(y->a.ns, y->b.ns);
    if (u != v)
        return u < v ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int cmp_kernel_by_launches_desc(const void *a, const void *b)
{
    const rep_cmp_kernel *x = a, *y = b;
    uint64_t u = larger(x->a.launches, x->b.launches), v = larger(y->a.launches, y->b.launches);
    if (u != v)
        return u < v ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int cmp_kernels(const rep_side *a, const rep_side *b, rep_compare *out)
{
    size_t na = out->by_time ? a->t->gpu.nrows : a->t->nkernels, nb = out->by_time ? b->t->gpu.nrows : b->t->nkernels;
    side_count *all = malloc((na + nb + 1) * sizeof *all);
    out->kernels = calloc(na + nb + 1, sizeof *out->kernels);
    if (!all || !out->kernels) {
        free(all);
        return -1;
    }
    size_t n = side_counts(a->t, 0, out->by_time, all);
    n += side_counts(b->t, 1, out->by_time, all + n);
    if (n > 1)
        qsort(all, n, sizeof *all, side_count_by_name);
    for (size_t i = 0; i < n;) {
        rep_cmp_kernel *k = &out->kernels[out->nkernels++];
        k->name = all[i].name;
        for (; i < n && strcmp(all[i].name, k->name) == 0; i++) {
            rep_cmp_count *c = all[i].side ? &k->b : &k->a;
            c->present = 1;
            c->ns = add(c->ns, all[i].ns);
            c->launches = add(c->launches, all[i].launches);
        }
    }
    free(all);
    if (out->nkernels > 1)
        qsort(out->kernels, out->nkernels, sizeof *out->kernels,
              out->by_time ? cmp_kernel_by_ns_desc : cmp_kernel_by_launches_desc);
    return 0;
}

typedef struct round_at {
    uint64_t index;
    rep_round_sum s;
} round_at;

static int round_at_by_index(const void *a, const void *b)
{
    const round_at *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A side's kept rounds by index, summed over its processes (ranks of one
 * job count their steps alike). NULL when out of memory. */
static round_at *side_rounds(const rep_side *s, size_t *count)
{
    size_t total = 0, n = 0;
    for (size_t p = 0; p < s->n; p++)
        total += s->procs[p]->rounds.nlist;
    round_at *r = malloc((total + 1) * sizeof *r);
    if (!r)
        return NULL;
    for (size_t p = 0; p < s->n; p++)
        for (size_t i = 0; i < s->procs[p]->rounds.nlist; i++) {
            const rep_round *x = &s->procs[p]->rounds.list[i];
            r[n++] = (round_at){x->index, {x->wall_ns, x->busy_ns, x->kernel_ns}};
        }
    if (n > 1)
        qsort(r, n, sizeof *r, round_at_by_index);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u && r[u - 1].index == r[i].index) {
            rep_round_sum *m = &r[u - 1].s;
            m->wall_ns = add(m->wall_ns, r[i].s.wall_ns);
            m->busy_ns = add(m->busy_ns, r[i].s.busy_ns);
            m->kernel_ns = add(m->kernel_ns, r[i].s.kernel_ns);
        } else {
            r[u++] = r[i];
        }
    }
    *count = u;
    return r;
}

static int cmp_rounds(const rep_side *a, const rep_side *b, rep_compare *out)
{
    size_t na = 0, nb = 0;
    round_at *ra = side_rounds(a, &na), *rb = side_rounds(b, &nb);
    out->rounds = calloc((na < nb ? na : nb) + 1, sizeof *out->rounds);
    if (!ra || !rb || !out->rounds) {
        free(ra);
        free(rb);
        return -1;
    }
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        if (ra[i].index < rb[j].index) {
            i++;
        } else if (ra[i].index > rb[j].index) {
            j++;
        } else {
            out->rounds[out->nrounds++] = (rep_cmp_round){ra[i].index, ra[i].s, rb[j].s};
            i++, j++;
        }
    }
    free(ra);
    free(rb);
    return 0;
}

int compare_build(const rep_side *a, const rep_side *b, rep_compare *out)
{
    memset(out, 0, sizeof *out);
    out->by_time = a->t->gpu.processes > 0 && b->t->gpu.processes > 0;
    /* A side without times has no rounds. */
    if (cmp_kernels(a, b, out) != 0 || (out->by_time && cmp_rounds(a, b, out) != 0)) {
        compare_release(out);
        return -1;
    }
    return 0;
}

void compare_release(rep_compare *c)
{
    free(c->kernels);
    free(c->rounds);
    memset(c, 0, sizeof *c);
}

uint64_t gpu_kernel_total(const rep_gpu *g)
{
    uint64_t all = g->kernel_ns;
    if (!all)
        for (size_t i = 0; i < g->nrows; i++)
            all = add(all, g->rows[i].total_ns);
    return all;
}
