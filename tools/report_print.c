/* What `drk report` prints: a section per process (header, kernels, calls,
 * memory, the pools), a combined section, or the combined numbers as JSON. */
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
               " driver fallback%s\n",
            h->allocs, h->frees, human_bytes(h->peak_live_bytes, live, sizeof live),
            nprocs ? " (sum of per-process peaks)" : "", human_bytes(h->pinned_bytes, pinned, sizeof pinned),
            h->chunks, h->chunks == 1 ? "" : "s", h->driver_fallbacks, h->driver_fallbacks == 1 ? "" : "s");
}

static void print_totals(FILE *f, const rep_totals *t, size_t top, size_t nprocs)
{
    print_kernels(f, t, top);
    print_facts(f, &t->facts);
    print_calls(f, t);
    print_memory(f, t);
    print_device_pool(f, &t->dpool, nprocs);
    print_host_pool(f, &t->hpool, nprocs, t->dpool.allocs > 0);
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
    print_totals(f, &p->t, top, 0);
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
    print_totals(f, t, top, n);
}

/* A grid or block: [x, y, z] on one line. */
static void json_dim3(drk_json *j, const char *key, const uint64_t v[3])
{
    drk_json_open_inline(j, key, '[');
    for (int d = 0; d < 3; d++)
        drk_json_u64(j, NULL, v[d]);
    drk_json_close(j, ']');
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
    drk_json_close(j, '}');
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
    drk_json_close(&j, '}');
    /* Write errors show in ferror(f), which drk checks before it exits. */
    if (drk_json_flush(&j, f) != 0 && j.failed)
        fputs("drk report: out of memory: the JSON is incomplete\n", stderr);
    drk_json_free(&j);
}
