/* `drk report --html FILE`: one self-contained page of a run's GPU times,
 * per process: the top kernels' time per round (stacked), GPU busy per
 * round against drk's 80% line, device memory per round, the findings, the
 * top kernels, their hardware counters and the evolved kernels. Charts are
 * inline SVG, no script: the page opens offline and with scripts off; its
 * Content-Security-Policy forbids any load. Every string from a report is
 * HTML-escaped (kernel names hold < > & and quotes). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/report.h"
#include "tools/table.h"

/* The busy share under which drk finds a round idle (gpu_idle): the
 * library's DRK_BUSY_LOW (evolve/findings.h, which tools/ may not include);
 * a report's gpu_idle finding carries it as its reference. */
#define BUSY_LOW 0.80

/* Kernel-shapes given a colour of their own in the stacked chart; the
 * rest of a round's kernel time is "other". */
#define STACK_SERIES 8
#define LEGEND_NAME 60  /* characters of a kernel name in the legend */
#define LEGEND_SHAPE_X 470.0 /* where the legend's shapes start, after the names */
#define TABLE_NAME 96   /* and in the top-kernels table (the full one in a tooltip) */

/* Chart geometry, in SVG user units (the SVG scales to the page width). */
#define CW 920.0
#define CH 250.0
#define CL 70.0 /* left margin: y tick labels and the axis title */
#define CR 16.0
#define CT 14.0
#define CB 44.0 /* bottom: x tick labels and the axis title */
#define PW (CW - CL - CR)
#define PH (CH - CT - CB)

static const char *const palette[STACK_SERIES] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                  "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
#define OTHER_COLOUR "#bab0ac"

/* Text from a report, escaped for HTML text and attribute values alike.
 * Control bytes become U+FFFD: they have no business in a page. */
static void esc(FILE *f, const char *s)
{
    if (!s)
        return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fputs("\xef\xbf\xbd", f);
            else
                fputc(*p, f);
        }
    }
}

/* `s` cut to `width` characters (whole UTF-8 sequences), escaped. */
static void esc_fit(FILE *f, const char *s, size_t width)
{
    size_t len = 4 * width + 1;
    char *buf = malloc(len);
    if (!buf) {
        esc(f, s);
        return;
    }
    esc(f, text_fit(s ? s : "", width, buf, len));
    free(buf);
}

static uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }


static void shape_text(const rep_time_row *r, char *buf, size_t n)
{
    snprintf(buf, n, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " / %" PRIu64 "x%" PRIu64 "x%" PRIu64 " / %" PRIu64,
             r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->shared_bytes);
}

static int same_shape(const rep_time_row *a, const rep_time_row *b)
{
    return a->shared_bytes == b->shared_bytes && !memcmp(a->grid, b->grid, sizeof a->grid) &&
           !memcmp(a->block, b->block, sizeof a->block) && strcmp(a->name, b->name) == 0;
}

/* ---- axes ---------------------------------------------------------------- */

/* A tick step of 1, 2 or 5 times a power of ten, about `ticks` of them up
 * to `max`; `*top` is the axis's end (a whole number of steps). */
static double nice_step(double max, int ticks, double *top)
{
    if (!(max > 0))
        max = 1;
    double raw = max / ticks, p = 1;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw)
        p /= 10;
    double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    double steps = (double)(uint64_t)(max / step);
    if (steps * step < max * (1 - 1e-9))
        steps += 1;
    *top = steps * step;
    return step;
}

static int decimals_of(double step)
{
    int d = 0;
    while (step < 0.999 && d < 6)
        step *= 10, d++;
    return d;
}

static double x_center(size_t i, size_t n) { return CL + ((double)i + 0.5) * PW / (double)n; }

static double y_of(double v, double top)
{
    if (v > top)
        v = top;
    if (v < 0)
        v = 0;
    return CT + PH - v / top * PH;
}

static void svg_open(FILE *f, const char *cls, const char *label)
{
    fprintf(f, "<svg class=\"chart %s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"", cls, CW, CH);
    esc(f, label);
    fprintf(f, "\">\n");
}

/* Grid lines and tick labels on y (values in the axis's unit, `suffix`
 * after each), round indices on x (thinned to about 16 labels), titles. */
static void axes(FILE *f, const rep_round *list, size_t n, double top, double step, const char *suffix,
                 const char *ytitle)
{
    int dec = decimals_of(step);
    fprintf(f, "<g class=\"axis y\">\n");
    for (int k = 0;; k++) {
        double v = step * k;
        if (v > top * (1 + 1e-9))
            break;
        double y = y_of(v, top);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", CL, CL + PW, y, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%.*f%s</text>\n",
                CL - 6, y, dec, v, suffix);
    }
    fprintf(f, "<text class=\"title\" transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\">", CT + PH / 2);
    esc(f, ytitle);
    fprintf(f, "</text>\n</g>\n<g class=\"axis x\">\n");
    fprintf(f, "<line class=\"base\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", CL, CL + PW, CT + PH,
            CT + PH);
    size_t every = (n + 15) / 16;
    for (size_t i = 0; i < n; i++) {
        if (i % every && i + 1 != n)
            continue;
        /* The last round is always labelled; drop its neighbour's label if
         * they would overlap. */
        if (i + 1 != n && every > 1 && n - 1 - i < every / 2 + 1)
            continue;
        double x = x_center(i, n);
        fprintf(f, "<line class=\"tick\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", x, x, CT + PH,
                CT + PH + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%" PRIu64 "</text>\n", x, CT + PH + 16,
                list[i].index);
    }
    fprintf(f, "<text class=\"title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">round</text>\n</g>\n", CL + PW / 2,
            CH - 6);
}

/* A unit for times up to `max_ns`: its name and its size in ns. */
static double time_unit(double max_ns, const char **name)
{
    if (max_ns >= 1e9)
        return *name = "s", 1e9;
    if (max_ns >= 1e6)
        return *name = "ms", 1e6;
    if (max_ns >= 1e3)
        return *name = "\u00b5s", 1e3;
    return *name = "ns", 1;
}

/* ---- 1. stacked kernel time per round ------------------------------------ */

typedef struct series {
    const rep_time_row *key; /* the first row seen of this kernel-shape */
    uint64_t total_ns;       /* over the kept rounds */
    size_t seq;              /* first seen: ties keep the rounds' order */
} series;

static int by_total(const void *a, const void *b)
{
    const series *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Which series a round's row belongs to: 0..nsel-1, or -1 for "other". */
static int series_of(const series *sel, size_t nsel, const rep_time_row *r)
{
    for (size_t s = 0; s < nsel; s++)
        if (same_shape(sel[s].key, r))
            return (int)s;
    return -1;
}

/* A legend row: swatch, name, shape and share in columns (a row each:
 * names and shapes are too long for two legends side by side). */
static void legend_item(FILE *f, double y, const char *colour, const rep_time_row *key, uint64_t ns, uint64_t all)
{
    char shape[256], t[32], p[32];
    fprintf(f, "<g class=\"legend-item\"><title>");
    if (key) {
        shape_text(key, shape, sizeof shape);
        esc(f, key->name);
        fprintf(f, "\nshape (grid / block / shared): %s", shape);
    } else {
        fprintf(f, "other kernel-shapes");
    }
    fprintf(f, "\n%s in the kept rounds (%s of their kernel time)</title>", human_ns(ns, t, sizeof t),
            percent_text(ns, all, 1, p, sizeof p));
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>", CL, y - 10, colour);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", CL + 18, y);
    if (key)
        esc_fit(f, key->name, LEGEND_NAME);
    else
        fprintf(f, "other");
    fprintf(f, "</text>");
    if (key)
        fprintf(f, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\">%s</text>", CL + LEGEND_SHAPE_X, y, shape);
    fprintf(f, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s &middot; %s</text></g>\n",
            CL + PW, y, t, p);
}

static int chart_stacked(FILE *f, const rep_rounds *rs)
{
    const rep_round *list = rs->list;
    size_t n = rs->nlist, cap = 0, nser = 0;
    for (size_t i = 0; i < n; i++)
        cap += list[i].ntop;
    series *ser = calloc(cap + 1, sizeof *ser);
    uint64_t *other = calloc(n + 1, sizeof *other), *stack = calloc(n + 1, sizeof *stack);
    if (!ser || !other || !stack) {
        free(ser), free(other), free(stack);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < list[i].ntop; j++) {
            const rep_time_row *r = &list[i].top[j];
            int s = series_of(ser, nser, r);
            if (s < 0)
                ser[nser] = (series){r, r->total_ns, nser}, nser++;
            else
                ser[s].total_ns = add(ser[s].total_ns, r->total_ns);
        }
    qsort(ser, nser, sizeof *ser, by_total);
    size_t nsel = nser < STACK_SERIES ? nser : STACK_SERIES;

    /* A round's stack: its chosen shapes, and "other" = the rows of the
     * rest plus what the round's top did not list. */
    uint64_t max = 0, all = 0, other_all = 0;
    for (size_t i = 0; i < n; i++) {
        other[i] = list[i].other_ns;
        stack[i] = list[i].other_ns;
        for (size_t j = 0; j < list[i].ntop; j++) {
            const rep_time_row *r = &list[i].top[j];
            if (series_of(ser, nsel, r) < 0)
                other[i] = add(other[i], r->total_ns);
            stack[i] = add(stack[i], r->total_ns);
        }
        max = stack[i] > max ? stack[i] : max;
        all = add(all, stack[i]);
        other_all = add(other_all, other[i]);
    }

    const char *unit;
    double per = time_unit((double)max, &unit), top;
    double step = nice_step(1.04 * (double)max / per, 6, &top);
    char ytitle[64];
    snprintf(ytitle, sizeof ytitle, "GPU kernel time (%s)", unit);
    fprintf(f, "<h3>GPU kernel time per round, top kernel-shapes</h3>\n");
    svg_open(f, "stacked", "GPU kernel time per round, stacked by kernel-shape");
    axes(f, list, n, top, step, "", ytitle);
    double slot = PW / (double)n, w = slot * 0.8 > 80 ? 80 : slot * 0.8;
    if (w < 1)
        w = 1;
    fprintf(f, "<g class=\"bars\">\n");
    for (size_t i = 0; i < n; i++) {
        double x = x_center(i, n) - w / 2, base = 0;
        char t[32], p[32], shape[256];
        /* Bottom up in series order, so a colour sits at the same level in
         * every round; "other" on top. */
        for (size_t s = 0; s <= nsel; s++) {
            uint64_t ns = 0, launches = 0;
            const rep_time_row *key = s < nsel ? ser[s].key : NULL;
            if (key) {
                for (size_t j = 0; j < list[i].ntop; j++)
                    if (same_shape(key, &list[i].top[j])) {
                        ns = list[i].top[j].total_ns;
                        launches = list[i].top[j].launches;
                        break;
                    }
            } else {
                ns = other[i];
            }
            if (!ns)
                continue;
            double y0 = y_of(base / per, top), y1 = y_of((base + (double)ns) / per, top);
            fprintf(f,
                    "<rect class=\"seg\" data-round=\"%" PRIu64 "\" data-series=\"%s%zu\" x=\"%.2f\" y=\"%.2f\" "
                    "width=\"%.2f\" height=\"%.2f\" fill=\"%s\"><title>round %" PRIu64 ": ",
                    list[i].index, key ? "k" : "other", key ? s : (size_t)0, x, y1, w, y0 - y1,
                    key ? palette[s] : OTHER_COLOUR, list[i].index);
            if (key) {
                shape_text(key, shape, sizeof shape);
                esc(f, key->name);
                fprintf(f, " (%s)\n%s in %" PRIu64 " launch%s", shape, human_ns(ns, t, sizeof t), launches,
                        launches == 1 ? "" : "es");
            } else {
                fprintf(f, "other kernel-shapes\n%s", human_ns(ns, t, sizeof t));
            }
            fprintf(f, ", %s of the round's kernel time</title></rect>\n", percent_text(ns, stack[i], 1, p, sizeof p));
            base += (double)ns;
        }
    }
    fprintf(f, "</g>\n</svg>\n");

    /* The legend, under the chart. */
    size_t items = nsel + (other_all > 0);
    if (items) {
        fprintf(f, "<svg class=\"legend\" viewBox=\"0 0 %.0f %.0f\" role=\"list\">\n", CW, 18.0 * (double)items + 6);
        for (size_t k = 0; k < items; k++) {
            double y = 15 + 18.0 * (double)k;
            if (k < nsel)
                legend_item(f, y, palette[k], ser[k].key, ser[k].total_ns, all);
            else
                legend_item(f, y, OTHER_COLOUR, NULL, other_all, all);
        }
        fprintf(f, "</svg>\n");
    }
    free(ser), free(other), free(stack);
    return 0;
}

/* ---- 2. GPU busy per round ------------------------------------------------ */

static void chart_busy(FILE *f, const rep_rounds *rs)
{
    const rep_round *list = rs->list;
    size_t n = rs->nlist;
    double top = 100, step = 20;
    fprintf(f, "<h3>GPU busy per round</h3>\n<p class=\"caption\">Busy time over the round's wall time. Dashed "
               "line: %.0f%%; drk finds <b>gpu_idle</b> in rounds below it (red points).</p>\n",
            100 * BUSY_LOW);
    svg_open(f, "busy", "GPU busy time as a share of each round's wall time");
    axes(f, list, n, top, step, "%", "GPU busy (% of wall time)");
    double y80 = y_of(100 * BUSY_LOW, top);
    fprintf(f, "<line class=\"threshold\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"><title>%.0f%%: below "
               "it drk finds gpu_idle</title></line>\n",
            CL, CL + PW, y80, y80, 100 * BUSY_LOW);
    fprintf(f, "<polyline class=\"busy-line\" points=\"");
    for (size_t i = 0; i < n; i++) {
        double b = list[i].wall_ns ? 100.0 * (double)list[i].busy_ns / (double)list[i].wall_ns : 0;
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", x_center(i, n), y_of(b, top));
    }
    fprintf(f, "\"/>\n<g class=\"points\">\n");
    for (size_t i = 0; i < n; i++) {
        const rep_round *r = &list[i];
        double b = r->wall_ns ? 100.0 * (double)r->busy_ns / (double)r->wall_ns : 0;
        char bt[32], wt[32];
        fprintf(f,
                "<circle class=\"busy-point%s\" data-round=\"%" PRIu64 "\" cx=\"%.2f\" cy=\"%.2f\" r=\"%s\">"
                "<title>round %" PRIu64 " (ended by ",
                b < 100 * BUSY_LOW ? " low" : "", r->index, x_center(i, n), y_of(b, top), n > 32 ? "3" : "4",
                r->index);
        esc(f, r->ended_by);
        fprintf(f, "): busy %.1f%%, %s of %s</title></circle>\n", b, human_ns(r->busy_ns, bt, sizeof bt),
                human_ns(r->wall_ns, wt, sizeof wt));
    }
    fprintf(f, "</g>\n</svg>\n");
}

/* ---- 3. device memory per round ------------------------------------------- */

static void mem_line(FILE *f, const rep_rounds *rs, int reserved, double per, double top, const char *unit)
{
    size_t n = rs->nlist;
    const char *what = reserved ? "reserved" : "live";
    fprintf(f, "<polyline class=\"mem-line mem-%s\" points=\"", what);
    for (size_t i = 0; i < n; i++) {
        uint64_t b = reserved ? rs->list[i].reserved_bytes : rs->list[i].live_bytes;
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", x_center(i, n), y_of((double)b / per, top));
    }
    fprintf(f, "\"/>\n<g class=\"points mem-%s\">\n", what);
    for (size_t i = 0; i < n; i++) {
        const rep_round *r = &rs->list[i];
        uint64_t b = reserved ? r->reserved_bytes : r->live_bytes;
        char hb[32];
        fprintf(f,
                "<circle class=\"mem-point\" data-round=\"%" PRIu64 "\" cx=\"%.2f\" cy=\"%.2f\" r=\"%s\"><title>"
                "round %" PRIu64 ": %s %s (%.3f %s)</title></circle>\n",
                r->index, x_center(i, n), y_of((double)b / per, top), n > 32 ? "2.5" : "3.5", r->index, what,
                human_bytes(b, hb, sizeof hb), (double)b / per, unit);
    }
    fprintf(f, "</g>\n");
}

static void chart_memory(FILE *f, const rep_rounds *rs)
{
    uint64_t max = 0, oom = 0;
    for (size_t i = 0; i < rs->nlist; i++) {
        const rep_round *r = &rs->list[i];
        max = r->live_bytes > max ? r->live_bytes : max;
        max = r->reserved_bytes > max ? r->reserved_bytes : max;
        oom = add(oom, r->out_of_memory);
    }
    int gib = max >= (uint64_t)1 << 30;
    const char *unit = gib ? "GiB" : "MiB";
    double per = gib ? (double)((uint64_t)1 << 30) : (double)(1 << 20), top;
    double step = nice_step(1.04 * (double)max / per, 6, &top);
    char ytitle[64];
    snprintf(ytitle, sizeof ytitle, "device memory (%s)", unit);
    fprintf(f, "<h3>Device memory at each round's end</h3>\n<p class=\"caption\">drk's device pool: "
               "<span class=\"swatch mem-live\"></span>live (allocated blocks) and <span class=\"swatch "
               "mem-reserved\"></span>reserved (pages held); a widening gap is memory held but not used.</p>\n");
    if (!max)
        fprintf(f, "<p class=\"note\">drk's device pool held no memory at any round's end (the program's "
                   "memory did not come from drk's pool, or was freed).</p>\n");
    svg_open(f, "memory", "live and reserved device memory of drk's pool at each round's end");
    axes(f, rs->list, rs->nlist, top, step, "", ytitle);
    mem_line(f, rs, 1, per, top, unit);
    mem_line(f, rs, 0, per, top, unit);
    fprintf(f, "</svg>\n");
    if (oom)
        fprintf(f, "<p class=\"note warn\">The device pool answered out of memory %" PRIu64 " time%s in these "
                   "rounds.</p>\n",
                oom, oom == 1 ? "" : "s");
}

/* ---- 4. findings ------------------------------------------------------------ */

/* The report's findings (rep_findings, read by report_read.c). */
static void findings(FILE *f, const rep_process *p)
{
    const rep_findings *fs = &p->findings;
    fprintf(f, "<h3>Findings</h3>\n");
    if (!fs->present) {
        fprintf(f, "<p class=\"note\">This report has no findings (written by a drk before it judged rounds).</p>\n");
        return;
    }
    if (!fs->n) {
        fprintf(f, "<p class=\"note ok\">No findings: nothing drk judges went wrong in these rounds.</p>\n");
        return;
    }
    fprintf(f, "<ol class=\"findings\">\n");
    for (size_t i = 0; i < fs->n; i++) {
        const rep_finding *x = &fs->list[i];
        fprintf(f, "<li class=\"finding\"><span class=\"finding-name\">");
        esc(f, x->name);
        if (x->first_round == x->last_round)
            fprintf(f, "</span> <span class=\"finding-rounds\">round %" PRIu64, x->first_round);
        else
            fprintf(f, "</span> <span class=\"finding-rounds\">rounds %" PRIu64 "\u2013%" PRIu64, x->first_round,
                    x->last_round);
        fprintf(f, ", seen in %" PRIu64 " round%s</span>", x->rounds, x->rounds == 1 ? "" : "s");
        if (x->kernel) {
            fprintf(f, "<div class=\"finding-kernel\" title=\"");
            esc(f, x->kernel);
            fprintf(f, "\">kernel <code>");
            esc_fit(f, x->kernel, TABLE_NAME);
            fprintf(f,
                    "</code> <span class=\"dim\">%" PRIu64 "x%" PRIu64 "x%" PRIu64 " / %" PRIu64 "x%" PRIu64
                    "x%" PRIu64 " / %" PRIu64 "</span></div>",
                    x->grid[0], x->grid[1], x->grid[2], x->block[0], x->block[1], x->block[2], x->shared_bytes);
        }
        fprintf(f, "<div class=\"evidence\">");
        esc(f, x->evidence);
        fprintf(f, "</div></li>\n");
    }
    fprintf(f, "</ol>\n");
}

/* ---- 5. top kernels ----------------------------------------------------------- */

static void kernel_table(FILE *f, const rep_gpu *g, size_t top)
{
    fprintf(f, "<h3>Top kernels by GPU time</h3>\n");
    if (!g->nrows) {
        fprintf(f, "<p class=\"note\">No kernel was timed.</p>\n");
        return;
    }
    /* Shares of all kernel time, as the text report's. */
    uint64_t all = gpu_kernel_total(g);
    size_t shown = top && top < g->nrows ? top : g->nrows;
    fprintf(f, "<table class=\"kernels\">\n<thead><tr><th>#</th><th>kernel</th><th>shape: grid / block / shared</th>"
               "<th>launches</th><th>GPU time</th><th>share</th><th>median</th><th>p95</th></tr></thead>\n<tbody>\n");
    for (size_t i = 0; i < shown; i++) {
        const rep_time_row *r = &g->rows[i];
        char shape[256], t[32], p[32], med[32], p95[32];
        shape_text(r, shape, sizeof shape);
        fprintf(f, "<tr><td>%zu</td><td class=\"name\" title=\"", i + 1);
        esc(f, r->name);
        fprintf(f, "\">");
        esc_fit(f, r->name, TABLE_NAME);
        fprintf(f,
                "</td><td class=\"shape\">%s</td><td>%" PRIu64 "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                "</tr>\n",
                shape, r->launches, human_ns(r->total_ns, t, sizeof t), percent_text(r->total_ns, all, 1, p, sizeof p),
                human_ns(r->median_ns, med, sizeof med), human_ns(r->p95_ns, p95, sizeof p95));
    }
    fprintf(f, "</tbody>\n</table>\n");
    if (shown < g->nrows) {
        uint64_t rest = 0;
        char a[32];
        for (size_t i = shown; i < g->nrows; i++)
            rest = add(rest, g->rows[i].total_ns);
        fprintf(f, "<p class=\"note\">%zu more kernel-shape%s, %s (--top N shows more; 0: all).</p>\n",
                g->nrows - shown, g->nrows - shown == 1 ? "" : "s", human_ns(rest, a, sizeof a));
    }
}

/* ---- 6. hardware counters -------------------------------------------------------- */


/* gpu_time.counters, as the text report's table: nothing unless
 * DRK_PROFILE=counters was asked for. Rows with their kernel-shape's GPU
 * time first, so the table's columns line up as the top kernels'. */
static void counters_table(FILE *f, const rep_counters *k, size_t top)
{
    if (!k->present || !k->asked)
        return;
    fprintf(f, "<h3>Hardware counters of the hottest kernel-shapes</h3>\n");
    if (!k->processes) {
        fprintf(f, "<p class=\"note off\">Counters (DRK_PROFILE=counters): off (");
        esc(f, k->off_reason ? k->off_reason : "no reason given");
        fprintf(f, ").</p>\n");
        return;
    }
    char cost[32];
    fprintf(f, "<p class=\"caption\">The latest sample of each kernel-shape: DRAM throughput (%% of peak), "
               "achieved occupancy (active warps, %% of the SM's maximum), and the 32-byte sectors a global load "
               "or store request touched (4 for coalesced 4-byte accesses, up to 32; - when it made none). "
               "%" PRIu64 " sample%s (%" PRIu64 " given up), %" PRIu64 " pass%s each, %s in sampled launches "
               "(budget %.3g%%).</p>\n",
            k->samples, k->samples == 1 ? "" : "s", k->discarded, k->passes, k->passes == 1 ? "" : "es",
            human_ns(k->cost_ns, cost, sizeof cost), 100 * k->budget);
    if (!k->nrows) {
        fprintf(f, "<p class=\"note\">No kernel-shape was sampled.</p>\n");
        return;
    }
    size_t shown = top && top < k->nrows ? top : k->nrows;
    fprintf(f, "<table class=\"kernels counters\">\n<thead><tr><th>GPU time</th><th>kernel</th>"
               "<th>shape: grid / block / shared</th><th>DRAM %%</th><th>occupancy %%</th>"
               "<th>ld sectors/request</th><th>st sectors/request</th><th>round</th><th>samples</th></tr></thead>\n"
               "<tbody>\n");
    for (size_t i = 0; i < shown; i++) {
        const rep_counter_row *r = &k->rows[i];
        rep_time_row key = {.name = r->name, .shared_bytes = r->shared_bytes};
        memcpy(key.grid, r->grid, sizeof key.grid);
        memcpy(key.block, r->block, sizeof key.block);
        char shape[256], t[32], ld[32], st[32];
        shape_text(&key, shape, sizeof shape);
        fprintf(f, "<tr><td>%s</td><td class=\"name\" title=\"", r->gpu_ns ? human_ns(r->gpu_ns, t, sizeof t) : "-");
        esc(f, r->name);
        fprintf(f, "\">");
        esc_fit(f, r->name, TABLE_NAME);
        fprintf(f,
                "</td><td class=\"shape\">%s</td><td>%.1f</td><td>%.1f</td><td>%s</td><td>%s</td><td>%" PRIu64
                "</td><td>%" PRIu64 "</td></tr>\n",
                shape, r->dram_pct, r->occupancy_pct, sectors_text(r->ld_sectors_per_request, ld, sizeof ld),
                sectors_text(r->st_sectors_per_request, st, sizeof st), r->round, r->samples);
    }
    fprintf(f, "</tbody>\n</table>\n");
    if (shown < k->nrows)
        fprintf(f, "<p class=\"note\">%zu more kernel-shape%s with counters (--top N shows more; 0: all).</p>\n",
                k->nrows - shown, k->nrows - shown == 1 ? "" : "s");
}

/* ---- 7. evolved kernels ------------------------------------------------------------ */

/* evolve, as the text report's table: nothing unless DRK_EVOLVE=1 was
 * asked for; why it was off; else its totals and a row per kernel-shape,
 * most evolved first. */
static void evolve_table(FILE *f, const rep_evolve *e, size_t top)
{
    if (!e->present || !e->asked)
        return;
    fprintf(f, "<h3>Evolved kernels</h3>\n");
    if (!e->processes) {
        fprintf(f, "<p class=\"note off\">Evolve (DRK_EVOLVE=1): off (");
        esc(f, e->off_reason ? e->off_reason : "no reason given");
        fprintf(f, ").</p>\n");
        return;
    }
    char trial[32], program[32], share[32];
    fprintf(f, "<p class=\"caption\">Kernel-shapes drk looked at: %" PRIu64 ", evolved %" PRIu64 ", refused %" PRIu64
               ", failed %" PRIu64 ". Trials took %s of GPU time",
            e->kernels, e->evolved, e->refused, e->failed, human_ns(e->trial_ns, trial, sizeof trial));
    if (e->program_kernel_ns)
        fprintf(f, ", %s of the program's kernel time (%s)",
                percent_text(e->trial_ns, e->program_kernel_ns, 1, share, sizeof share),
                human_ns(e->program_kernel_ns, program, sizeof program));
    if (e->trial_bytes) {
        char bytes[32];
        fprintf(f, ", %s copied and compared", human_bytes(e->trial_bytes, bytes, sizeof bytes));
    }
    fprintf(f, ", budget %.3g%%; %.1f%% of kernels re-searched per round over %" PRIu64 " round%s. A variant is "
               "served only once proven bitwise equal to the original; speedup: the original's median launch in the "
               "program over the variant's, or marked (replays), until both were timed, an estimate from replays in "
               "drk's context (too high while the program keeps the GPU busy).</p>\n",
            100 * e->budget, 100 * e->researched_share, e->rounds, e->rounds == 1 ? "" : "s");
    if (!e->nrows)
        return;
    size_t shown = top && top < e->nrows ? top : e->nrows;
    fprintf(f, "<table class=\"kernels evolve\">\n<thead><tr><th>speedup</th><th>kernel</th>"
               "<th>shape: grid / block / shared</th><th>state</th><th>serving</th>"
               "<th>tried / proven / rejected</th><th>builds</th><th>why</th></tr></thead>\n<tbody>\n");
    for (size_t i = 0; i < shown; i++) {
        const rep_evolve_row *r = &e->rows[i];
        rep_time_row key = {.name = r->name, .shared_bytes = r->shared_bytes};
        memcpy(key.grid, r->grid, sizeof key.grid);
        memcpy(key.block, r->block, sizeof key.block);
        char shape[256], total[32], max[32], speedup[48];
        shape_text(&key, shape, sizeof shape);
        fprintf(f, "<tr><td>%s</td>",
                speedup_text(strcmp(r->serving, "default") != 0, r->speedup, r->run_speedup > 0, speedup,
                             sizeof speedup));
        fprintf(f, "<td class=\"name\" title=\"");
        esc(f, r->name);
        fprintf(f, "\">");
        esc_fit(f, r->name, TABLE_NAME);
        fprintf(f, "</td><td class=\"shape\">%s</td><td class=\"text state\">", shape);
        esc(f, r->state);
        fprintf(f, "</td><td class=\"text serving\">");
        esc(f, r->serving);
        fprintf(f, "</td><td>%" PRIu64 " / %" PRIu64 " / %" PRIu64 "</td><td>", r->tried, r->proven, r->rejected);
        if (r->builds)
            fprintf(f, "%" PRIu64 " (%s in all, max %s)", r->builds, human_ms(r->build_ms, total, sizeof total),
                    human_ms(r->build_ms_max, max, sizeof max));
        else
            fprintf(f, "0");
        fprintf(f, "</td><td class=\"why\">");
        esc(f, r->why && *r->why ? r->why : "-");
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</tbody>\n</table>\n");
    if (shown < e->nrows)
        fprintf(f, "<p class=\"note\">%zu more kernel-shape%s looked at (--top N shows more; 0: all).</p>\n",
                e->nrows - shown, e->nrows - shown == 1 ? "" : "s");
}

/* ---- the page --------------------------------------------------------------- */

static void process_header(FILE *f, const rep_process *p, size_t i)
{
    fprintf(f, "<section class=\"process\" id=\"p%zu\">\n<h2>", i);
    esc(f, p->program);
    fprintf(f, " <span class=\"dim\">pid %" PRIu64 "</span></h2>\n<p class=\"meta\">", p->pid);
    esc(f, p->exe);
    if (p->forked_from)
        fprintf(f, " &middot; forked from pid %" PRIu64, p->forked_from);
    if (p->end_ns >= p->start_ns)
        fprintf(f, " &middot; ran %.3f s", (double)(p->end_ns - p->start_ns) / 1e9);
    fprintf(f, " &middot; driver ");
    esc(f, p->driver_path ? p->driver_path : "(not opened)");
    if (p->has_driver_version)
        fprintf(f, " (%" PRId64 ")", p->driver_version);
    fprintf(f, " &middot; drk ");
    esc(f, p->drk_version);
    fprintf(f, " &middot; <code>");
    esc(f, p->path);
    fprintf(f, "</code></p>\n");
}

static void gpu_summary(FILE *f, const rep_process *p)
{
    const rep_gpu *g = &p->t.gpu;
    const rep_rounds *rs = &p->rounds;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "<p class=\"summary\">");
    if (g->rounds)
        fprintf(f, "GPU busy <b>%s</b> (%s of %s) over %" PRIu64 " round%s &middot; ",
                percent_text(g->busy_ns, g->wall_ns, 1, c, sizeof c), human_ns(g->busy_ns, a, sizeof a),
                human_ns(g->wall_ns, b, sizeof b), g->rounds, g->rounds == 1 ? "" : "s");
    fprintf(f, "kernel time %s in %" PRIu64 " kernel%s &middot; copy time %s in %" PRIu64 " cop%s (%s)",
            human_ns(g->kernel_ns, d, sizeof d), g->kernels, g->kernels == 1 ? "" : "s",
            human_ns(g->copy_ns, e, sizeof e), g->copies, g->copies == 1 ? "y" : "ies",
            human_bytes(g->copy_bytes, a, sizeof a));
    if (g->dropped)
        fprintf(f, " &middot; %" PRIu64 " record%s dropped", g->dropped, g->dropped == 1 ? "" : "s");
    if (g->excluded)
        fprintf(f, " &middot; %" PRIu64 " launch%s sampled for counters, not timed", g->excluded,
                g->excluded == 1 ? "" : "es");
    if (g->source) {
        fprintf(f, " &middot; CUPTI: ");
        esc(f, g->source);
    }
    fprintf(f, "</p>\n");
    if (g->stopped) {
        fprintf(f, "<p class=\"note warn\">Timing stopped before exit: ");
        esc(f, g->stopped);
        fprintf(f, "</p>\n");
    }
    if (rs->present && (rs->nlist || rs->merged_rounds)) {
        fprintf(f, "<p class=\"note\">Rounds: %" PRIu64 " closed (%" PRIu64 " marked by the program), the last %zu "
                   "drawn",
                rs->closed, rs->marked, rs->nlist);
        if (rs->merged_rounds)
            fprintf(f, "; %" PRIu64 " earlier round%s merged by drk, not drawn", rs->merged_rounds,
                    rs->merged_rounds == 1 ? "" : "s");
        fprintf(f, ".</p>\n");
    }
}

static int process_section(FILE *f, const rep_process *p, size_t i, size_t top)
{
    const rep_gpu *g = &p->t.gpu;
    process_header(f, p, i);
    if (!g->present) {
        fprintf(f, "<p class=\"note off\">No GPU times: this report has no gpu_time (written by a drk before it "
                   "timed kernels).</p>\n</section>\n");
        return 0;
    }
    if (!g->processes) {
        fprintf(f, "<p class=\"note off\">No GPU times: off (");
        esc(f, g->off_reason ? g->off_reason : "no reason given");
        fprintf(f, ").</p>\n");
        counters_table(f, &g->counters, top);
        evolve_table(f, &p->t.evolve, top);
        fprintf(f, "</section>\n");
        return 0;
    }
    gpu_summary(f, p);
    const rep_rounds *rs = &p->rounds;
    if (rs->present && rs->nlist) {
        if (chart_stacked(f, rs) != 0)
            return -1;
        chart_busy(f, rs);
        chart_memory(f, rs);
    } else {
        fprintf(f, "<p class=\"note\">No rounds %s: the per-round charts need rounds (a cudaProfilerStop, an NVTX "
                   "range or mark named like DRK_ROUND, or the process's exit ends one).</p>\n",
                rs->present ? "were kept" : "in this report");
    }
    findings(f, p);
    kernel_table(f, g, top);
    counters_table(f, &g->counters, top);
    evolve_table(f, &p->t.evolve, top);
    fprintf(f, "</section>\n");
    return 0;
}

static const char style[] =
    ":root{color-scheme:light}"
    "body{margin:0 auto;max-width:1000px;padding:16px 24px 48px;font:14px/1.45 system-ui,-apple-system,\"Segoe UI\","
    "Roboto,\"DejaVu Sans\",sans-serif;color:#1d232a;background:#fff}"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:19px;margin:0 0 2px}"
    "h3{font-size:15px;margin:22px 0 4px;color:#333}"
    "code,.shape{font-family:ui-monospace,\"DejaVu Sans Mono\",Menlo,Consolas,monospace;font-size:12.5px}"
    ".dim{color:#6b7480;fill:#6b7480}.meta{color:#555;margin:0 0 8px;overflow-wrap:anywhere}"
    ".process{border-top:2px solid #d8dde3;margin-top:28px;padding-top:14px}"
    ".note,.caption{color:#555;margin:4px 0}.caption{font-size:13px}.note.off{font-style:italic}.note.warn{color:#a33}.note.ok{color:#2d6a31}"
    ".toc{padding-left:20px}"
    "svg.chart{display:block;width:100%;height:auto;max-height:300px}"
    "svg.legend{display:block;width:100%;height:auto}"
    "svg text{font-size:12px;fill:#333}svg text.title{font-size:12.5px;fill:#444}"
    ".grid{stroke:#e3e7ec;stroke-width:1}.base,.tick{stroke:#8a939c;stroke-width:1}"
    ".seg{stroke:#fff;stroke-width:0.5}.seg:hover,.legend-item:hover rect{opacity:.8}"
    ".threshold{stroke:#c62828;stroke-width:1.5;stroke-dasharray:6 4}"
    ".busy-line{fill:none;stroke:#4e79a7;stroke-width:2}"
    ".busy-point{fill:#4e79a7;stroke:#fff;stroke-width:1}.busy-point.low{fill:#e15759}"
    ".mem-line{fill:none;stroke-width:2}"
    ".swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin:0 5px 0 3px}"
    ".swatch.mem-live{border-color:#4e79a7}.swatch.mem-reserved{border-color:#f28e2b}"
    ".mem-live{stroke:#4e79a7}.mem-live .mem-point{fill:#4e79a7}"
    ".mem-reserved{stroke:#f28e2b}.mem-reserved .mem-point{fill:#f28e2b}"
    ".findings{padding-left:22px}.finding{margin:6px 0}"
    ".finding-name{font-weight:600;background:#fdecea;color:#8e1b1b;border-radius:3px;padding:0 5px}"
    ".finding-rounds{color:#555}.evidence{color:#333;overflow-wrap:anywhere}"
    ".finding-kernel{overflow-wrap:anywhere}"
    "table.kernels{border-collapse:collapse;width:100%;font-size:13px}"
    ".kernels th,.kernels td{padding:3px 6px;border-bottom:1px solid #e3e7ec;text-align:right;vertical-align:top}"
    ".kernels th{background:#f4f6f8;font-weight:600;white-space:nowrap}"
    ".kernels td.name,.kernels th:nth-child(2){text-align:left}"
    ".kernels td{white-space:nowrap}.kernels td.name{white-space:normal;overflow-wrap:anywhere;word-break:break-all}"
    ".kernels td.shape,.kernels th:nth-child(3){text-align:left;white-space:nowrap}"
    ".kernels td.text{text-align:left}"
    ".kernels td.why{text-align:left;white-space:normal;overflow-wrap:anywhere;min-width:16em}";

static int print_html(FILE *f, const char *path, const rep_process *const *procs, size_t n, size_t top)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
               "'unsafe-inline'\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>drk report: ");
    esc(f, path);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>drk report</h1>\n<p class=\"meta\"><code>", style);
    esc(f, path);
    fprintf(f, "</code> &middot; %zu process%s &middot; written by drk " DRK_VERSION "</p>\n", n, n == 1 ? "" : "es");
    if (n > 1) {
        fprintf(f, "<ul class=\"toc\">\n");
        for (size_t i = 0; i < n; i++) {
            const rep_gpu *g = &procs[i]->t.gpu;
            fprintf(f, "<li><a href=\"#p%zu\">", i);
            esc(f, procs[i]->program);
            fprintf(f, " (pid %" PRIu64 ")</a> <span class=\"dim\">%s</span></li>\n", procs[i]->pid,
                    !g->present ? "no GPU times" : !g->processes ? "GPU times off" : "");
        }
        fprintf(f, "</ul>\n");
    }
    for (size_t i = 0; i < n; i++)
        if (process_section(f, procs[i], i, top) != 0)
            return -1;
    fprintf(f, "</body>\n</html>\n");
    return 0;
}

int report_html(const char *file, const char *path, const rep_process *const *procs, size_t n, size_t top)
{
    int to_stdout = strcmp(file, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(file, "w");
    if (!f) {
        fprintf(stderr, "drk report: %s: %s\n", file, strerror(errno));
        return 1;
    }
    int r = print_html(f, path, procs, n, top);
    if (r != 0)
        fprintf(stderr, "drk report: out of memory\n");
    int failed = ferror(f), e = errno;
    if ((to_stdout ? fflush(f) : fclose(f)) != 0)
        failed = 1, e = errno;
    if (failed && r == 0) {
        fprintf(stderr, "drk report: %s: %s\n", to_stdout ? "standard output" : file, strerror(e ? e : EIO));
        r = -1;
    }
    return r ? 1 : 0;
}
