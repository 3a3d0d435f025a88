/* A small JSON writer into a growing buffer, for the report and the drk
 * command's --json output (never on a hot path). Errors (out of memory) stick
 * and are checked once. */
#ifndef DRK_BASE_JSON_H
#define DRK_BASE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct drk_json {
    char *buf;
    size_t len, cap;
    int failed;
    int depth;
    int lines;   /* open levels with an item per line: the indentation */
    int compact; /* set before writing: "," and ":" without spaces */
    unsigned char has_items[32]; /* per open level: needs a comma first */
    unsigned char one_line[32];  /* per open level: items stay on its line */
} drk_json;

/* `key` is NULL inside arrays and for the top-level value. Items go one per
 * line, indented two spaces per such level. */
void drk_json_open(drk_json *j, const char *key, char bracket);
/* Items on the container's own line: [1, 2, 3] ([1,2,3] when compact).
 * Containers opened inside it choose their own layout. */
void drk_json_open_inline(drk_json *j, const char *key, char bracket);
void drk_json_close(drk_json *j, char bracket);
void drk_json_str(drk_json *j, const char *key, const char *value); /* NULL writes null */
void drk_json_u64(drk_json *j, const char *key, uint64_t value);
void drk_json_i64(drk_json *j, const char *key, int64_t value);
void drk_json_null(drk_json *j, const char *key);
void drk_json_f64(drk_json *j, const char *key, double value); /* %.6g; NaN writes 0 */
void drk_json_bool(drk_json *j, const char *key, int value);
/* An array of `n` unsigned numbers (a grid, a block). */
void drk_json_u32s(drk_json *j, const char *key, const uint32_t *v, size_t n);
/* Writes what is buffered to `f` and empties the buffer, so a long document
 * need not be held whole (call it between items). -1 if the writer failed
 * earlier (the document is incomplete) or `f` did. */
int drk_json_flush(drk_json *j, FILE *f);
void drk_json_free(drk_json *j);

#endif
