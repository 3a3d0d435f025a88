/* Entry files' bytes and names (base/cache_entry.h). The header, all
 * little-endian:
 *
 *     0   8  magic "drkcache"
 *     8   4  format (DRK_CACHE_FORMAT)
 *    12   4  header bytes (128)
 *    16  16  kind, NUL-padded
 *    32  32  key digest
 *    64   8  payload bytes
 *    72   8  created, ns since the epoch
 *    80   4  meta area bytes (a multiple of 16, 16 to 4096)
 *    84  12  zero
 *    96  32  SHA-256 of bytes [0, 96), the meta area and the payload
 *
 * then the meta area (text, NUL, zeros), then the payload: at a multiple of
 * 16, so a cubin read into an aligned buffer is aligned. */
#include "base/cache_entry.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const unsigned char magic[8] = {'d', 'r', 'k', 'c', 'a', 'c', 'h', 'e'};

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

size_t drk_cache_meta_area(const char *meta)
{
    size_t len = meta ? strnlen(meta, DRK_CACHE_META_MAX - 1) : 0;
    return (len + 1 + 15) & ~(size_t)15;
}

static void checksum(const unsigned char *head, size_t meta_area, const void *payload, uint64_t len,
                     unsigned char out[DRK_SHA256_BYTES])
{
    drk_sha256_ctx s;
    drk_sha256_init(&s);
    drk_sha256_update(&s, head, DRK_CACHE_SUM_AT);
    drk_sha256_update(&s, head + DRK_CACHE_HEADER, meta_area);
    if (len)
        drk_sha256_update(&s, payload, (size_t)len);
    drk_sha256_final(&s, out);
}

void drk_cache_entry_head(unsigned char *head, const drk_cache_key *key, const char *kind, const char *meta,
                          size_t meta_area, const void *payload, uint64_t len, int64_t created_ns)
{
    memset(head, 0, DRK_CACHE_HEADER + meta_area);
    memcpy(head, magic, sizeof magic);
    put_le(head + 8, DRK_CACHE_FORMAT, 4);
    put_le(head + 12, DRK_CACHE_HEADER, 4);
    memcpy(head + 16, kind, strnlen(kind, DRK_CACHE_KIND_MAX));
    memcpy(head + 32, key->digest, DRK_SHA256_BYTES);
    put_le(head + 64, len, 8);
    put_le(head + 72, (uint64_t)created_ns, 8);
    put_le(head + 80, meta_area, 4);
    if (meta)
        memcpy(head + DRK_CACHE_HEADER, meta, strnlen(meta, meta_area - 1));
    checksum(head, meta_area, payload, len, head + DRK_CACHE_SUM_AT);
}

#define FAIL(...) return snprintf(why, n, __VA_ARGS__), -1

int drk_cache_entry_header(const unsigned char *buf, size_t avail, drk_cache_header *h, char *why, size_t n)
{
    if (avail < DRK_CACHE_HEADER)
        FAIL("truncated (%zu bytes, shorter than a header)", avail);
    if (memcmp(buf, magic, sizeof magic) != 0)
        FAIL("not a drk cache entry (bad magic)");
    uint64_t format = get_le(buf + 8, 4);
    if (format != DRK_CACHE_FORMAT)
        FAIL("format %llu, not %d", (unsigned long long)format, DRK_CACHE_FORMAT);
    if (get_le(buf + 12, 4) != DRK_CACHE_HEADER)
        FAIL("bad header size");
    memset(h, 0, sizeof *h);
    memcpy(h->kind, buf + 16, DRK_CACHE_KIND_MAX);
    /* The kind field: a valid kind, then NULs to its end. */
    size_t klen = strnlen((const char *)buf + 16, 16);
    for (size_t i = klen; i < 16; i++)
        if (buf[16 + i])
            FAIL("bad kind field");
    if (klen > DRK_CACHE_KIND_MAX || !drk_cache_kind_valid(h->kind))
        FAIL("bad kind field");
    memcpy(h->key.digest, buf + 32, DRK_SHA256_BYTES);
    h->payload = get_le(buf + 64, 8);
    h->created_ns = (int64_t)get_le(buf + 72, 8);
    uint64_t meta = get_le(buf + 80, 4);
    if (meta < 16 || meta > DRK_CACHE_META_MAX || meta % 16)
        FAIL("bad meta size");
    h->meta_bytes = (uint32_t)meta;
    for (int i = 84; i < DRK_CACHE_SUM_AT; i++)
        if (buf[i])
            FAIL("bad header (reserved bytes set)");
    if (h->payload > DRK_CACHE_ENTRY_MAX)
        FAIL("bad payload size");
    return 0;
}

int drk_cache_entry_check(const unsigned char *file, size_t size, const drk_cache_key *key, const char *kind,
                          drk_cache_header *h, char *why, size_t n)
{
    if (drk_cache_entry_header(file, size, h, why, n) != 0)
        return -1;
    uint64_t want = DRK_CACHE_HEADER + (uint64_t)h->meta_bytes + h->payload;
    if (size < want)
        FAIL("truncated (%zu of %llu bytes)", size, (unsigned long long)want);
    if (size > want)
        FAIL("longer than its header says (%zu, not %llu bytes)", size, (unsigned long long)want);
    if (key && memcmp(key->digest, h->key.digest, DRK_SHA256_BYTES) != 0)
        FAIL("another key's entry");
    if (kind && strcmp(kind, h->kind) != 0)
        FAIL("a %s entry, not %s", h->kind, kind);
    if (file[DRK_CACHE_HEADER + h->meta_bytes - 1] != '\0')
        FAIL("bad meta text");
    unsigned char sum[DRK_SHA256_BYTES];
    checksum(file, h->meta_bytes, file + DRK_CACHE_HEADER + h->meta_bytes, h->payload, sum);
    if (memcmp(sum, file + DRK_CACHE_SUM_AT, sizeof sum) != 0)
        FAIL("bad checksum");
    return 0;
}

int drk_cache_join(char *out, size_t n, const char *a, const char *b)
{
    int len = snprintf(out, n, "%s/%s", a, b);
    return len >= 0 && (size_t)len < n ? 0 : (errno = ENAMETOOLONG, -1);
}

void drk_cache_entry_name(const drk_cache_key *key, const char *kind, char out[DRK_CACHE_NAME_MAX])
{
    char hex[2 * DRK_SHA256_BYTES + 1];
    drk_cache_key_hex(key, hex);
    snprintf(out, DRK_CACHE_NAME_MAX, "%.2s/%s.%s", hex, hex, kind);
}

int drk_cache_fan_name(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return 0;
    return name[2] == '\0';
}

static int digits(const char **p)
{
    const char *s = *p;
    while (**p >= '0' && **p <= '9')
        (*p)++;
    return *p > s && *p - s <= 20;
}

int drk_cache_name_class(const char *fan, const char *name, drk_cache_key *key, char kind[DRK_CACHE_KIND_MAX + 1])
{
    char hex[2 * DRK_SHA256_BYTES + 1];
    if (strlen(name) < sizeof hex + 1 || name[2 * DRK_SHA256_BYTES] != '.' || name[0] != fan[0] ||
        name[1] != fan[1])
        return DRK_CACHE_NAME_FOREIGN;
    memcpy(hex, name, 2 * DRK_SHA256_BYTES);
    hex[2 * DRK_SHA256_BYTES] = '\0';
    drk_cache_key k;
    if (drk_cache_key_parse(hex, &k) != 0)
        return DRK_CACHE_NAME_FOREIGN;
    const char *rest = name + sizeof hex;
    const char *dot = strchr(rest, '.');
    size_t klen = dot ? (size_t)(dot - rest) : strlen(rest);
    char kd[DRK_CACHE_KIND_MAX + 2];
    if (klen > DRK_CACHE_KIND_MAX)
        return DRK_CACHE_NAME_FOREIGN;
    memcpy(kd, rest, klen);
    kd[klen] = '\0';
    if (!drk_cache_kind_valid(kd))
        return DRK_CACHE_NAME_FOREIGN;
    if (!dot) {
        if (key)
            *key = k;
        if (kind)
            memcpy(kind, kd, klen + 1);
        return DRK_CACHE_NAME_ENTRY;
    }
    /* "<entry>.tmp.<pid>.<n>" */
    const char *p = dot;
    if (strncmp(p, ".tmp.", 5) != 0)
        return DRK_CACHE_NAME_FOREIGN;
    p += 5;
    if (!digits(&p) || *p++ != '.' || !digits(&p) || *p)
        return DRK_CACHE_NAME_FOREIGN;
    return DRK_CACHE_NAME_TEMP;
}
