/* The cache's entry files: their names and their bytes (layout in
 * docs/cache.md). Pure functions over buffers, shared by the store
 * (base/cache.c), the directory's walks (base/cache_dir.c) and the tests. */
#ifndef DRK_BASE_CACHE_ENTRY_H
#define DRK_BASE_CACHE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "base/cache.h"

#define DRK_CACHE_HEADER 128 /* header bytes; the meta area follows, then the payload */
#define DRK_CACHE_SUM_AT 96  /* the checksum's offset: it covers all bytes but its own 32 */
#define DRK_CACHE_VDIR "v1"  /* DIR/v1: this format's entries */
#define DRK_CACHE_NAME_MAX 160 /* an entry's or temporary file's name under v1 */

typedef struct drk_cache_header {
    char kind[DRK_CACHE_KIND_MAX + 1];
    drk_cache_key key;
    uint64_t payload;
    int64_t created_ns;
    uint32_t meta_bytes; /* the meta area: a multiple of 16 with the text's NUL */
} drk_cache_header;

/* The meta area's size for `meta` (NULL: none), its text cut to fit. */
size_t drk_cache_meta_area(const char *meta);
/* Fills `head` (DRK_CACHE_HEADER + meta_area bytes) for the payload: the
 * header, the meta area, and the checksum over both and the payload. */
void drk_cache_entry_head(unsigned char *head, const drk_cache_key *key, const char *kind, const char *meta,
                          size_t meta_area, const void *payload, uint64_t len, int64_t created_ns);
/* The header's own fields (magic, format, sizes, kind), from `avail` bytes
 * at `buf`. 0, or -1 and why. */
int drk_cache_entry_header(const unsigned char *buf, size_t avail, drk_cache_header *h, char *why, size_t n);
/* A whole entry file of `size` bytes: its header, its exact size, the key
 * and kind asked (NULL: any), the meta text's end and the checksum. 0, or
 * -1 and why. */
int drk_cache_entry_check(const unsigned char *file, size_t size, const drk_cache_key *key, const char *kind,
                          drk_cache_header *h, char *why, size_t n);

/* "a/b" into `out`: 0, or -1 (ENAMETOOLONG) when it does not fit. */
int drk_cache_join(char *out, size_t n, const char *a, const char *b);

/* "ab/<key hex>.<kind>": an entry's path under DIR/v1. */
void drk_cache_entry_name(const drk_cache_key *key, const char *kind, char out[DRK_CACHE_NAME_MAX]);

enum { DRK_CACHE_NAME_FOREIGN, DRK_CACHE_NAME_ENTRY, DRK_CACHE_NAME_TEMP };
/* What file `name` in fan-out directory `fan` (two hex digits) is: an
 * entry (its key and kind filled), a temporary file of one (named
 * "<entry>.tmp.<pid>.<n>"), or not drk's. */
int drk_cache_name_class(const char *fan, const char *name, drk_cache_key *key, char kind[DRK_CACHE_KIND_MAX + 1]);
/* 1 when `name` is a fan-out directory's: two lowercase hex digits. */
int drk_cache_fan_name(const char *name);

#endif
