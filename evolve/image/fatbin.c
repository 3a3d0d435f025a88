#include "evolve/image/fatbin.h"

#include <stdlib.h>
#include <string.h>

#include "evolve/image/bytes.h"
#include "evolve/image/libs.h"

const char *drk_fatbin_strerror(int err)
{
    switch (err) {
    case DRK_FATBIN_OK: return "ok";
    case DRK_FATBIN_TRUNCATED: return "truncated fatbin: a header or payload runs past the end";
    case DRK_FATBIN_BAD_MAGIC: return "not a fatbin (bad magic)";
    case DRK_FATBIN_BAD_HEADER: return "malformed fatbin header";
    case DRK_FATBIN_NO_CODEC: return "the payload's codec is not available";
    case DRK_FATBIN_CORRUPT: return "a payload does not decompress to its stated size";
    case DRK_FATBIN_NOMEM: return "out of memory";
    case DRK_FATBIN_TOO_LARGE: return "a stated size is beyond drk's limit";
    default: return "unknown fatbin error";
    }
}

int drk_fatbin_container_size(const void *p, size_t avail, size_t *size)
{
    const uint8_t *b = p;
    if (avail < DRK_FATBIN_HEADER_SIZE)
        return DRK_FATBIN_TRUNCATED;
    if (drk_ld32(b) != DRK_FATBIN_MAGIC)
        return DRK_FATBIN_BAD_MAGIC;
    if (drk_ld16(b + 4) != 1 || drk_ld16(b + 6) != DRK_FATBIN_HEADER_SIZE)
        return DRK_FATBIN_BAD_HEADER;
    uint64_t fat = drk_ld64(b + 8);
    if (fat > avail - DRK_FATBIN_HEADER_SIZE)
        return DRK_FATBIN_TRUNCATED;
    *size = DRK_FATBIN_HEADER_SIZE + (size_t)fat;
    return 0;
}

void drk_fatbin_iter_init(drk_fatbin_iter *it, const void *data, size_t size)
{
    memset(it, 0, sizeof *it);
    it->data = data;
    it->size = data ? size : 0;
}

static int iter_fail(drk_fatbin_iter *it, int err)
{
    it->error = err;
    return err;
}

/* Moves to the next container after zero padding; 1 when there is one, 0 at
 * the end of the bytes, or an error. */
static int next_container(drk_fatbin_iter *it)
{
    size_t pos = it->container_end;
    while (pos < it->size && it->data[pos] == 0)
        pos++;
    if (pos >= it->size) {
        it->container = it->container_end = it->next = it->size;
        return 0;
    }
    size_t csize;
    int rc = drk_fatbin_container_size(it->data + pos, it->size - pos, &csize);
    if (rc)
        return iter_fail(it, rc);
    it->container = pos;
    it->container_end = pos + csize;
    it->next = pos + DRK_FATBIN_HEADER_SIZE;
    return 1;
}

static char arch_suffix(uint64_t flags)
{
    if (flags & DRK_FATBIN_FLAG_ARCH_SPECIFIC)
        return 'a';
    if (flags & DRK_FATBIN_FLAG_ARCH_FAMILY)
        return 'f';
    return 0;
}

/* Fills `e` from the entry header at it->next, every field checked against
 * the container's end. */
static int read_entry(drk_fatbin_iter *it, drk_fatbin_entry *e)
{
    size_t off = it->next, room = it->container_end - off;
    const uint8_t *h = it->data + off;
    if (room < 64)
        return iter_fail(it, DRK_FATBIN_TRUNCATED);
    uint32_t hsize = drk_ld32(h + 4);
    uint64_t size = drk_ld64(h + 8), flags = drk_ld64(h + 0x28);
    if (hsize < 64)
        return iter_fail(it, DRK_FATBIN_BAD_HEADER);
    if (hsize > room || size > room - hsize)
        return iter_fail(it, DRK_FATBIN_TRUNCATED);
    int lz4 = (flags & DRK_FATBIN_FLAG_LZ4) != 0, zstd = (flags & DRK_FATBIN_FLAG_ZSTD) != 0;
    uint32_t csize = drk_ld32(h + 0x10);
    uint64_t dsize = drk_ld64(h + 0x38);
    if (lz4 && zstd)
        return iter_fail(it, DRK_FATBIN_BAD_HEADER);
    if ((lz4 || zstd) && (csize == 0 || csize > size || dsize == 0))
        return iter_fail(it, DRK_FATBIN_BAD_HEADER);
    uint32_t ioff = drk_ld32(h + 0x20), ilen = drk_ld32(h + 0x24);
    uint64_t extent = (uint64_t)hsize + size;
    if (ilen && (ioff > extent || ilen > extent - ioff))
        return iter_fail(it, DRK_FATBIN_BAD_HEADER);

    memset(e, 0, sizeof *e);
    e->kind = drk_ld16(h);
    e->version = drk_ld16(h + 2);
    e->minor = drk_ld16(h + 0x18);
    e->major = drk_ld16(h + 0x1a);
    e->arch = drk_ld32(h + 0x1c);
    e->arch_suffix = arch_suffix(flags);
    e->flags = flags;
    e->payload = h + hsize;
    e->stored_size = (size_t)size;
    if (lz4 || zstd) {
        e->compressed_size = csize;
        e->decompressed_size = (size_t)dsize;
    }
    if (ilen) {
        e->identifier = (const char *)h + ioff;
        e->identifier_len = ilen;
    }
    e->offset = off;
    it->next = off + (size_t)extent;
    return 1;
}

int drk_fatbin_next(drk_fatbin_iter *it, drk_fatbin_entry *e)
{
    if (it->error)
        return it->error;
    while (it->next >= it->container_end) {
        int rc = next_container(it);
        if (rc <= 0)
            return rc;
    }
    return read_entry(it, e);
}

/* Decodes a compressed payload into `buf` (decompressed_size bytes). */
static int decompress(const drk_fatbin_entry *e, uint8_t *buf)
{
    long n = (e->flags & DRK_FATBIN_FLAG_LZ4)
                 ? drk_lz4_decompress(e->payload, e->compressed_size, buf, e->decompressed_size)
                 : drk_zstd_decompress(e->payload, e->compressed_size, buf, e->decompressed_size);
    if (n == DRK_CODEC_MISSING)
        return DRK_FATBIN_NO_CODEC;
    return n < 0 || (size_t)n != e->decompressed_size ? DRK_FATBIN_CORRUPT : 0;
}

int drk_fatbin_payload(const drk_fatbin_entry *e, uint8_t **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    int compressed = (e->flags & (DRK_FATBIN_FLAG_LZ4 | DRK_FATBIN_FLAG_ZSTD)) != 0;
    if (!compressed && (e->flags & DRK_FATBIN_FLAG_OLD_COMPRESS))
        return DRK_FATBIN_NO_CODEC;
    if (compressed && (e->compressed_size == 0 || e->compressed_size > e->stored_size))
        return DRK_FATBIN_BAD_HEADER;
    size_t n = compressed ? e->decompressed_size : e->stored_size;
    if (n > DRK_FATBIN_MAX_PAYLOAD)
        return DRK_FATBIN_TOO_LARGE;
    uint8_t *buf = malloc(n + 1);
    if (!buf)
        return DRK_FATBIN_NOMEM;
    int rc = 0;
    if (compressed)
        rc = decompress(e, buf);
    else if (n)
        memcpy(buf, e->payload, n);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = 0;
    /* PTX is NUL-terminated and zero-padded to the entry's alignment. */
    if (e->kind == DRK_FATBIN_PTX)
        while (n && buf[n - 1] == 0)
            n--;
    *out = buf;
    *size = n;
    return 0;
}

static void put(const void **out, int max, int *n, const void *p)
{
    if (*n < max)
        out[*n] = p;
    (*n)++;
}

int drk_fatbin_wrapper_containers(const void *wrapper, const void **out, int max)
{
    const uint8_t *w = wrapper;
    if (!w)
        return DRK_FATBIN_TRUNCATED;
    if (drk_ld32(w) != DRK_FATBIN_WRAPPER_MAGIC)
        return DRK_FATBIN_BAD_MAGIC;
    uint32_t version = drk_ld32(w + 4);
    const void *data, *extra;
    memcpy(&data, w + 8, sizeof data);
    memcpy(&extra, w + 16, sizeof extra);
    if (version != 1 && version != 2)
        return DRK_FATBIN_BAD_HEADER;
    int n = 0;
    if (data)
        put(out, max, &n, data);
    /* v1's fourth field is an offline file name, not containers. */
    if (version == 1 || !extra)
        return n;
    const void *const *list = extra;
    for (int i = 0;; i++) {
        if (i == DRK_FATBIN_MAX_PRELINKED)
            return DRK_FATBIN_BAD_HEADER;
        const void *p = list[i];
        if (!p)
            break;
        if (p != data)
            put(out, max, &n, p);
    }
    return n;
}
