/* A small JSON writer into a growing buffer, for the report (written at exit,
 * never on a hot path). Errors (out of memory) stick and are checked once. */
#ifndef DRK_BASE_JSON_H
#define DRK_BASE_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct drk_json {
    char *buf;
    size_t len, cap;
    int failed;
    int depth;
    unsigned char has_items[32]; /* per open level: needs a comma first */
} drk_json;

/* `key` is NULL inside arrays and for the top-level value. */
void drk_json_open(drk_json *j, const char *key, char bracket);
void drk_json_close(drk_json *j, char bracket);
void drk_json_str(drk_json *j, const char *key, const char *value); /* NULL writes null */
void drk_json_u64(drk_json *j, const char *key, uint64_t value);
void drk_json_i64(drk_json *j, const char *key, int64_t value);
void drk_json_null(drk_json *j, const char *key);
void drk_json_f64(drk_json *j, const char *key, double value); /* %.6g; NaN writes 0 */
void drk_json_bool(drk_json *j, const char *key, int value);
void drk_json_free(drk_json *j);

#endif
