/* The cache's keys, kinds and settings (base/cache.h). */
#include "base/cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "base/options.h"

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A tagged, length-prefixed field, so no two different lists of parts
 * hash the same bytes. */
static void field(drk_sha256_ctx *s, unsigned tag, const void *data, size_t len)
{
    unsigned char head[9];
    head[0] = (unsigned char)tag;
    put_le(head + 1, len, 8);
    drk_sha256_update(s, head, sizeof head);
    if (len)
        drk_sha256_update(s, data, len);
}

void drk_cache_key_make(const drk_cache_key_parts *p, drk_cache_key *out)
{
    drk_sha256_ctx s;
    drk_sha256_init(&s);
    static const char magic[] = "drk-cache-key"; /* its NUL too */
    drk_sha256_update(&s, magic, sizeof magic);
    unsigned char u[12];
    put_le(u, DRK_CACHE_FORMAT, 4);
    drk_sha256_update(&s, u, 4);
    field(&s, 1, p->ptx, p->ptx ? p->ptx_len : 0);
    /* Options as 12-byte records (id, value), in the caller's order. */
    size_t nopt = p->options ? p->noptions : 0;
    unsigned char head[9];
    head[0] = 2;
    put_le(head + 1, 12 * (uint64_t)nopt, 8);
    drk_sha256_update(&s, head, sizeof head);
    for (size_t i = 0; i < nopt; i++) {
        put_le(u, (uint32_t)p->options[i].id, 4);
        put_le(u + 4, (uint64_t)p->options[i].value, 8);
        drk_sha256_update(&s, u, 12);
    }
    const char *name = p->device_name ? p->device_name : "";
    field(&s, 3, name, strlen(name));
    field(&s, 4, p->device_uuid, sizeof p->device_uuid);
    put_le(u, (uint32_t)p->cc_major, 4);
    put_le(u + 4, (uint32_t)p->cc_minor, 4);
    field(&s, 5, u, 8);
    put_le(u, (uint32_t)p->driver_version, 4);
    field(&s, 6, u, 4);
    field(&s, 7, p->extra, p->extra ? p->extra_len : 0);
    drk_sha256_final(&s, out->digest);
}

void drk_cache_key_hex(const drk_cache_key *key, char out[2 * DRK_SHA256_BYTES + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < DRK_SHA256_BYTES; i++) {
        out[2 * i] = digits[key->digest[i] >> 4];
        out[2 * i + 1] = digits[key->digest[i] & 15];
    }
    out[2 * DRK_SHA256_BYTES] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* uppercase too: names are lowercase, one spelling per key */
}

int drk_cache_key_parse(const char *hex, drk_cache_key *out)
{
    drk_cache_key k;
    for (int i = 0; i < DRK_SHA256_BYTES; i++) {
        int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        k.digest[i] = (unsigned char)(hi << 4 | lo);
    }
    if (hex[2 * DRK_SHA256_BYTES] != '\0')
        return -1;
    *out = k;
    return 0;
}

int drk_cache_kind_valid(const char *kind)
{
    size_t n = 0;
    for (; kind && kind[n]; n++) {
        char c = kind[n];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') || n >= DRK_CACHE_KIND_MAX)
            return 0;
    }
    return n > 0;
}

int drk_cache_dir_choose(const char *setting, const char *xdg, const char *home, char *out, size_t n)
{
    int len;
    if (setting && *setting)
        len = snprintf(out, n, "%s", setting);
    else if (xdg && xdg[0] == '/')
        len = snprintf(out, n, "%s/drk", xdg);
    else if (home && *home)
        len = snprintf(out, n, "%s/.cache/drk", home);
    else
        return -1;
    return len > 0 && (size_t)len < n ? 0 : -1;
}

uint64_t drk_cache_cap_bytes(long size_option, const char *dir)
{
    if (size_option >= 0)
        return (uint64_t)size_option;
    /* A share: of the file system of `dir`, or of its nearest existing
     * ancestor when the cache is yet to be made. */
    char path[DRK_OPTION_PATH_MAX];
    snprintf(path, sizeof path, "%s", dir && *dir ? dir : ".");
    struct statvfs fs;
    for (int depth = 0; depth < 256; depth++) {
        if (statvfs(path, &fs) == 0)
            return (uint64_t)drk_option_amount(size_option, (size_t)fs.f_blocks * fs.f_frsize);
        char *slash = strrchr(path, '/');
        if (errno != ENOENT || strcmp(path, "/") == 0 || strcmp(path, ".") == 0)
            break;
        if (!slash)
            strcpy(path, ".");
        else if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    return 1ull << 30;
}
