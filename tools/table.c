#include "tools/table.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void table_init(table *t, const char *align)
{
    memset(t, 0, sizeof *t);
    t->ncols = strlen(align);
    if (t->ncols > TABLE_MAX_COLS)
        t->ncols = TABLE_MAX_COLS;
    memcpy(t->align, align, t->ncols);
}

void table_row(table *t, const char *const *cells)
{
    if (t->failed)
        return;
    if ((t->nrows + 1) * t->ncols > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : t->ncols * 16;
        char **n = realloc(t->cells, cap * sizeof *n);
        if (!n) {
            t->failed = 1;
            return;
        }
        t->cells = n, t->cap = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t c = 0; c < t->ncols; c++) {
        row[c] = strdup(cells[c] ? cells[c] : "");
        if (!row[c]) {
            while (c--)
                free(row[c]);
            t->failed = 1;
            return;
        }
    }
    t->nrows++;
}

static void pad(FILE *f, size_t n)
{
    while (n--)
        fputc(' ', f);
}

void table_print(const table *t, FILE *f, const char *indent)
{
    size_t width[TABLE_MAX_COLS] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t w = text_width(t->cells[r * t->ncols + c]);
            if (w > width[c])
                width[c] = w;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        fputs(indent, f);
        for (size_t c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            size_t gap = width[c] - text_width(cell);
            int last = c + 1 == t->ncols;
            if (c)
                fputs("  ", f);
            if (t->align[c] == 'r')
                pad(f, gap);
            fputs(cell, f);
            if (t->align[c] != 'r' && !last) /* no trailing blanks */
                pad(f, gap);
        }
        fputc('\n', f);
    }
}

void table_free(table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

static int continues(unsigned char b) { return (b & 0xc0) == 0x80; }

size_t text_width(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += !continues(*p);
    return n;
}

const char *text_fit(const char *s, size_t width, char *buf, size_t buflen)
{
    if (text_width(s) <= width || width < 4) {
        snprintf(buf, buflen, "%s", s);
        return buf;
    }
    /* Keep width - 3 characters, whole: stop before the byte that would
     * start character width - 2. */
    size_t keep = width - 3, chars = 0, end = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, end++) {
        if (!continues(*p) && chars++ == keep)
            break;
    }
    snprintf(buf, buflen, "%.*s...", (int)end, s);
    return buf;
}

const char *human_bytes(uint64_t b, char *buf, size_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (b < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", b);
        return buf;
    }
    double v = (double)b / 1024;
    int u = 0;
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    snprintf(buf, n, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

const char *human_ns(uint64_t ns, char *buf, size_t n)
{
    static const char *const units[] = {"\u00b5s", "ms", "s"};
    if (ns < 1000) {
        snprintf(buf, n, "%" PRIu64 " ns", ns);
        return buf;
    }
    double v = (double)ns / 1000;
    int u = 0;
    while (v >= 999.5 && u < 2)
        v /= 1000, u++;
    snprintf(buf, n, v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

const char *human_ms(double ms, char *buf, size_t n)
{
    double ns = ms * 1e6;
    return human_ns(!(ns > 0) ? 0 : ns >= 1.8e19 ? UINT64_MAX : (uint64_t)ns, buf, n);
}

const char *sectors_text(double v, char *buf, size_t n)
{
    if (v < 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.2f", v);
    return buf;
}

const char *speedup_text(int served, double speedup, int in_program, char *buf, size_t n)
{
    if (served)
        snprintf(buf, n, in_program ? "%.2fx" : "%.2fx (replays)", speedup);
    else
        snprintf(buf, n, "-");
    return buf;
}

const char *percent_text(uint64_t part, uint64_t whole, int sign, char *buf, size_t n)
{
    if (whole)
        snprintf(buf, n, sign ? "%.1f%%" : "%.1f", 100.0 * (double)part / (double)whole);
    else
        snprintf(buf, n, "-");
    return buf;
}
