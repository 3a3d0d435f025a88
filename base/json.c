#include "base/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(drk_json *j, const char *s, size_t n)
{
    if (j->failed)
        return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (cap < j->len + n + 1)
            cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            j->failed = 1;
            return;
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(drk_json *j, const char *s) { put(j, s, strlen(s)); }

static void put_string(drk_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            put(j, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            put(j, esc, 6);
        } else {
            put(j, (const char *)p, 1);
        }
    }
    put(j, "\"", 1);
}

/* Comma, then a newline and indentation where the level has an item per
 * line (a space after the comma where it has them on one line), then the key. */
static void item(drk_json *j, const char *key)
{
    if (j->depth > 0) {
        int more = j->has_items[j->depth];
        j->has_items[j->depth] = 1;
        if (more)
            put(j, ",", 1);
        if (!j->one_line[j->depth]) {
            put(j, "\n", 1);
            for (int i = 0; i < j->lines; i++)
                put(j, "  ", 2);
        } else if (more && !j->compact) {
            put(j, " ", 1);
        }
    }
    if (key) {
        put_string(j, key);
        put(j, j->compact ? ":" : ": ", j->compact ? 1 : 2);
    }
}

static void open_level(drk_json *j, const char *key, char bracket, int one_line)
{
    item(j, key);
    put(j, &bracket, 1);
    if (j->depth + 1 >= (int)sizeof j->has_items) {
        j->failed = 1;
        return;
    }
    j->depth++;
    j->has_items[j->depth] = 0;
    j->one_line[j->depth] = (unsigned char)one_line;
    if (!one_line)
        j->lines++;
}

void drk_json_open(drk_json *j, const char *key, char bracket) { open_level(j, key, bracket, 0); }

void drk_json_open_inline(drk_json *j, const char *key, char bracket) { open_level(j, key, bracket, 1); }

void drk_json_close(drk_json *j, char bracket)
{
    /* More closes than opens (or the closes of levels refused as too deep):
     * the document is wrong already, and the level arrays must not be read
     * below 0. */
    if (j->depth <= 0) {
        j->failed = 1;
        return;
    }
    int had = j->has_items[j->depth];
    if (!j->one_line[j->depth]) {
        j->lines--;
        if (had) {
            put(j, "\n", 1);
            for (int i = 0; i < j->lines; i++)
                put(j, "  ", 2);
        }
    }
    j->depth--;
    put(j, &bracket, 1);
    if (j->depth == 0)
        put(j, "\n", 1);
}

void drk_json_str(drk_json *j, const char *key, const char *value)
{
    item(j, key);
    if (value)
        put_string(j, value);
    else
        puts_(j, "null");
}

void drk_json_u64(drk_json *j, const char *key, uint64_t value)
{
    char b[24];
    item(j, key);
    snprintf(b, sizeof b, "%" PRIu64, value);
    puts_(j, b);
}

void drk_json_f64(drk_json *j, const char *key, double value)
{
    char b[32];
    item(j, key);
    snprintf(b, sizeof b, "%.6g", value == value ? value : 0.0);
    puts_(j, b);
}

void drk_json_i64(drk_json *j, const char *key, int64_t value)
{
    char b[24];
    item(j, key);
    snprintf(b, sizeof b, "%" PRId64, value);
    puts_(j, b);
}

void drk_json_null(drk_json *j, const char *key)
{
    item(j, key);
    puts_(j, "null");
}

void drk_json_bool(drk_json *j, const char *key, int value)
{
    item(j, key);
    puts_(j, value ? "true" : "false");
}

void drk_json_u32s(drk_json *j, const char *key, const uint32_t *v, size_t n)
{
    drk_json_open(j, key, '[');
    for (size_t i = 0; i < n; i++)
        drk_json_u64(j, NULL, v[i]);
    drk_json_close(j, ']');
}

int drk_json_flush(drk_json *j, FILE *f)
{
    if (j->failed)
        return -1;
    if (j->len && fwrite(j->buf, 1, j->len, f) != j->len)
        return -1;
    j->len = 0;
    if (j->buf)
        j->buf[0] = '\0';
    return 0;
}

void drk_json_free(drk_json *j)
{
    free(j->buf);
    j->buf = NULL;
    j->len = j->cap = 0;
}
