/* A small JSON reader for drk's tools: the whole document becomes a tree of
 * json_value nodes. Strict RFC 8259 grammar, except that bytes >= 0x80 in
 * strings are taken as they are (the shim writes kernel names byte for byte,
 * and a name need not be valid UTF-8). */
#ifndef DRK_TOOLS_JSON_READ_H
#define DRK_TOOLS_JSON_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Deeper documents are refused: the parser recurses once per level. */
#define JSON_MAX_DEPTH 512

typedef enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
typedef struct json_member json_member;

struct json_value {
    json_type type;
    union {
        struct {
            double d;
            uint64_t u;   /* the exact value when is_u64 */
            int is_u64;   /* a non-negative integer that fits 64 bits */
        } num;
        struct {
            char *s;      /* NUL-terminated; may also hold NULs (\u0000) */
            size_t len;
        } str;
        struct {
            json_value *items;
            size_t count;
        } arr;
        struct {
            json_member *members; /* in document order */
            size_t count;
        } obj;
    } u;
};

struct json_member {
    char *key;
    size_t key_len;
    json_value value;
};

typedef struct json_error {
    size_t line, column; /* 1-based; column counts bytes */
    char msg[160];
} json_error;

/* Parse `len` bytes. Returns 0 and fills `*out`, or -1 and fills `*err`
 * (out of memory is reported the same way, at the place it happened). */
int json_parse(const char *text, size_t len, json_value *out, json_error *err);

/* Free what json_parse allocated under `v` (not `v` itself). */
void json_free(json_value *v);

/* The member `key` of an object (the first if repeated), or NULL when `obj`
 * is not an object or has no such member. */
const json_value *json_get(const json_value *obj, const char *key);

/* "object", "string", ...: for messages. */
const char *json_type_name(json_type t);

/* Writes `s` as a JSON string (null for NULL): quotes and backslashes
 * escaped, control bytes as \u00XX, other bytes as they are (UTF-8 passes). */
void json_put_string(FILE *f, const char *s);

#endif
