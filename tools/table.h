/* Plain-text tables: rows of cells, columns as wide as their widest cell,
 * widths counted in characters (UTF-8 aware) so names line up. */
#ifndef DRK_TOOLS_TABLE_H
#define DRK_TOOLS_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TABLE_MAX_COLS 12

typedef struct table {
    size_t ncols;
    char align[TABLE_MAX_COLS]; /* 'l' or 'r' per column */
    char **cells;               /* nrows * ncols, copied */
    size_t nrows, cap;
    int failed;                 /* out of memory: print what fitted */
} table;

/* `align`: one 'l' or 'r' per column, e.g. "lrr". */
void table_init(table *t, const char *align);
/* Append a row of t->ncols cells (copied; NULL prints as empty). */
void table_row(table *t, const char *const *cells);
/* Print every row, each prefixed by `indent`, columns two spaces apart. */
void table_print(const table *t, FILE *f, const char *indent);
void table_free(table *t);

/* Characters in a UTF-8 string (bytes that do not continue a sequence). */
size_t text_width(const char *s);
/* `s` cut to `width` characters, the last three of them "..." when cut;
 * writes into `buf` (at least 4 * width + 1 bytes) and returns it. */
const char *text_fit(const char *s, size_t width, char *buf, size_t buflen);

/* 1536 -> "1.50 KiB": three significant digits, binary units; into buf. */
const char *human_bytes(uint64_t b, char *buf, size_t n);

/* 1500 -> "1.50 \u00b5s": three significant digits, ns to s; into buf. */
const char *human_ns(uint64_t ns, char *buf, size_t n);

/* The same for milliseconds (evolve's build times); 0 when not positive. */
const char *human_ms(double ms, char *buf, size_t n);

/* Sectors per request (counters): "-" when the kernel made no such requests (-1). */
const char *sectors_text(double v, char *buf, size_t n);

/* A served variant's speedup: "2.00x", "2.00x (replays)" when only replays
 * measured it (not timed in the program); "-" when the default serves. */
const char *speedup_text(int served, double speedup, int in_program, char *buf, size_t n);

/* part of whole in percent, one decimal ("12.5", or "12.5%" with `sign`);
 * "-" when there is no whole. */
const char *percent_text(uint64_t part, uint64_t whole, int sign, char *buf, size_t n);

#endif
