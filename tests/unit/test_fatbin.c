/* The fatbin container reader on containers built here: back to back with
 * padding, PTX and ELF entries, LZ4 and ZSTD payloads, wrappers v1 and v2;
 * then every truncation, lying sizes and corrupt payloads, which must give
 * errors and never read past the bytes given (the ASan build checks). */
#include <lz4.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "evolve/image/fatbin.h"
#include "tests/unit/check.h"

/* ---- Building containers ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (!n)
        return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_zeros(buf *b, size_t n)
{
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        put(b, z, k);
        n -= k;
    }
}

static void put16(buf *b, uint16_t v) { put(b, &v, 2); }
static void put32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put64(buf *b, uint64_t v) { put(b, &v, 8); }

typedef struct spec {
    unsigned kind, arch, major, minor;
    uint64_t flags; /* codec bits choose the compression */
    const void *data;
    size_t len;
    const char *ident;
} spec;

/* One entry: header (64 bytes, plus the identifier), payload padded to 8. */
static void put_entry(buf *b, const spec *s)
{
    uint8_t *stored = (uint8_t *)s->data;
    size_t slen = s->len, csize = 0, dsize = 0;
    if (s->flags & 0x2000) {
        stored = malloc((size_t)LZ4_compressBound((int)s->len));
        slen = (size_t)LZ4_compress_default(s->data, (char *)stored, (int)s->len, LZ4_compressBound((int)s->len));
        csize = slen;
        dsize = s->len;
    } else if (s->flags & 0x8000) {
        stored = malloc(ZSTD_compressBound(s->len));
        slen = ZSTD_compress(stored, ZSTD_compressBound(s->len), s->data, s->len, 3);
        csize = slen;
        dsize = s->len;
    }
    size_t ilen = s->ident ? strlen(s->ident) : 0, hsize = 64 + ((ilen + 7) & ~(size_t)7);
    size_t padded = (slen + 7) & ~(size_t)7;
    put16(b, (uint16_t)s->kind);
    put16(b, 0x0101);
    put32(b, (uint32_t)hsize);
    put64(b, padded);
    put32(b, (uint32_t)csize);
    put32(b, 0);
    put16(b, (uint16_t)s->minor);
    put16(b, (uint16_t)s->major);
    put32(b, s->arch);
    put32(b, ilen ? 64 : 0);
    put32(b, (uint32_t)ilen);
    put64(b, s->flags | 0x11);
    put64(b, 0);
    put64(b, dsize);
    if (ilen) {
        put(b, s->ident, ilen);
        put_zeros(b, hsize - 64 - ilen);
    }
    put(b, stored, slen);
    put_zeros(b, padded - slen);
    if (stored != s->data)
        free(stored);
}

static void put_container(buf *b, const spec *s, int n)
{
    buf body = {0};
    for (int i = 0; i < n; i++)
        put_entry(&body, &s[i]);
    put32(b, 0xBA55ED50u);
    put16(b, 1);
    put16(b, 16);
    put64(b, body.n);
    put(b, body.p, body.n);
    free(body.p);
}

/* ---- Fixtures ---- */

static const char ptx_text[] = "//\n.version 9.0\n.target sm_90\n.address_size 64\n\n"
                               ".visible .entry k(\n\t.param .u64 .ptr .align 1 k_param_0\n)\n{\n\tret;\n}\n";
static uint8_t elf_bytes[3000];

static void make_elf_bytes(void)
{
    /* Not a real cubin: the container does not care; compressible but not trivially. */
    for (size_t i = 0; i < sizeof elf_bytes; i++)
        elf_bytes[i] = (uint8_t)((i * 7) ^ (i >> 5));
    memcpy(elf_bytes, "\177ELF", 4);
}

/* Three containers: (ELF sm_80 plain, PTX compute_90 LZ4 with identifier),
 * 24 bytes of zero padding, (ELF sm_90a ZSTD, ELF sm_100f LZ4), 8 bytes of
 * padding, (PTX compute_90 uncompressed), trailing zeros. */
static buf make_sample(void)
{
    buf b = {0};
    spec c1[] = {
        {2, 80, 1, 8, 0, elf_bytes, sizeof elf_bytes, NULL},
        {1, 90, 9, 0, 0x2000, ptx_text, sizeof ptx_text, "x.cu"},
    };
    spec c2[] = {
        {2, 90, 1, 8, 0x8000 | 0x100000, elf_bytes, sizeof elf_bytes, NULL},
        {2, 100, 1, 8, 0x2000 | 0x200000, elf_bytes, 1000, NULL},
    };
    spec c3[] = {{1, 90, 9, 0, 0, ptx_text, sizeof ptx_text, NULL}};
    put_container(&b, c1, 2);
    put_zeros(&b, 24);
    put_container(&b, c2, 2);
    put_zeros(&b, 8);
    put_container(&b, c3, 1);
    put_zeros(&b, 16);
    return b;
}

/* Walks everything; returns entries seen, or the error. Each payload is
 * decompressed and checked against what went in when `verify`. */
static int walk(const uint8_t *p, size_t n, int verify, drk_fatbin_entry *seen, int max)
{
    drk_fatbin_iter it;
    drk_fatbin_iter_init(&it, p, n);
    drk_fatbin_entry e;
    int count = 0, rc;
    while ((rc = drk_fatbin_next(&it, &e)) == 1) {
        if (count < max)
            seen[count] = e;
        count++;
        uint8_t *out;
        size_t len;
        int prc = drk_fatbin_payload(&e, &out, &len);
        if (verify) {
            CHECK(prc == 0);
            if (prc == 0 && e.kind == DRK_FATBIN_PTX) {
                CHECK(len == strlen(ptx_text));
                CHECK(memcmp(out, ptx_text, len + 1) == 0);
            } else if (prc == 0) {
                size_t want = e.arch == 100 ? 1000 : sizeof elf_bytes;
                CHECK(len == (e.compressed_size ? want : (want + 7) / 8 * 8));
                CHECK(memcmp(out, elf_bytes, want) == 0);
                CHECK(out[len] == 0);
            }
        }
        if (prc == 0)
            free(out);
    }
    CHECK(drk_fatbin_next(&it, &e) == rc); /* the end (or the error) stays */
    return rc < 0 ? rc : count;
}

static void test_sample(void)
{
    buf b = make_sample();
    drk_fatbin_entry seen[8];
    CHECK(walk(b.p, b.n, 1, seen, 8) == 5);
    CHECK(seen[0].kind == DRK_FATBIN_ELF && seen[0].arch == 80 && seen[0].arch_suffix == 0);
    CHECK(seen[0].compressed_size == 0 && seen[0].decompressed_size == 0 && seen[0].identifier == NULL);
    CHECK(seen[1].kind == DRK_FATBIN_PTX && seen[1].major == 9 && seen[1].minor == 0);
    CHECK(seen[1].identifier_len == 4 && memcmp(seen[1].identifier, "x.cu", 4) == 0);
    CHECK((seen[1].flags & DRK_FATBIN_FLAG_LZ4) && seen[1].decompressed_size == sizeof ptx_text);
    CHECK(seen[2].arch == 90 && seen[2].arch_suffix == 'a' && (seen[2].flags & DRK_FATBIN_FLAG_ZSTD));
    CHECK(seen[3].arch == 100 && seen[3].arch_suffix == 'f');
    CHECK(seen[4].kind == DRK_FATBIN_PTX && seen[4].compressed_size == 0);

    size_t csize;
    CHECK(drk_fatbin_container_size(b.p, b.n, &csize) == 0);
    CHECK(seen[2].offset > csize + 24 - 1); /* past the padding */
    CHECK(drk_fatbin_container_size(b.p, csize, &csize) == 0);
    CHECK(drk_fatbin_container_size(b.p, csize - 1, &csize) == DRK_FATBIN_TRUNCATED);
    CHECK(drk_fatbin_container_size(b.p + 1, b.n - 1, &csize) == DRK_FATBIN_BAD_MAGIC);
    free(b.p);
}

/* Every prefix of the sample: an error or fewer entries, never a crash or
 * an overread (the prefix is copied to a buffer of exactly that size). */
static void test_truncation(void)
{
    buf b = make_sample();
    drk_fatbin_entry seen[8];
    int errors = 0;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, b.p, n);
        int rc = walk(p, n, 0, seen, 8);
        CHECK(rc < 0 || rc <= 5);
        errors += rc < 0;
        free(p);
    }
    CHECK(errors > 0);
    /* Cut inside the first container's header or entries: always an error. */
    size_t csize;
    drk_fatbin_container_size(b.p, b.n, &csize);
    for (size_t n = 1; n < csize; n++)
        CHECK(walk(b.p, n, 0, seen, 8) < 0);
    free(b.p);
}

static uint8_t *entry_at(buf *b, int nth)
{
    drk_fatbin_iter it;
    drk_fatbin_entry e;
    drk_fatbin_iter_init(&it, b->p, b->n);
    for (int i = 0; i <= nth; i++)
        if (drk_fatbin_next(&it, &e) != 1)
            return NULL;
    return b->p + e.offset;
}

static int first_error(buf *b)
{
    drk_fatbin_entry seen[8];
    int rc = walk(b->p, b->n, 0, seen, 8);
    return rc < 0 ? rc : 0;
}

/* One entry's payload after an edit to its header. */
static int payload_rc(buf *b, int nth)
{
    drk_fatbin_iter it;
    drk_fatbin_entry e;
    drk_fatbin_iter_init(&it, b->p, b->n);
    for (int i = 0; i <= nth; i++) {
        int rc = drk_fatbin_next(&it, &e);
        if (rc != 1)
            return rc;
    }
    uint8_t *out;
    size_t len;
    int rc = drk_fatbin_payload(&e, &out, &len);
    if (rc == 0)
        free(out);
    return rc;
}

static void test_lies(void)
{
    buf b = make_sample();
    uint64_t v64;
    uint32_t v32;

    /* fatSize past the end. */
    memcpy(&v64, b.p + 8, 8);
    uint64_t fat = v64;
    v64 = UINT64_MAX - 3;
    memcpy(b.p + 8, &v64, 8);
    CHECK(first_error(&b) == DRK_FATBIN_TRUNCATED);
    v64 = b.n;
    memcpy(b.p + 8, &v64, 8);
    CHECK(first_error(&b) == DRK_FATBIN_TRUNCATED);
    memcpy(b.p + 8, &fat, 8);
    CHECK(first_error(&b) == 0);

    /* Container header version and size. */
    b.p[4] = 2;
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    b.p[4] = 1;
    b.p[6] = 24;
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    b.p[6] = 16;

    uint8_t *e = entry_at(&b, 1), save[64];
    memcpy(save, e, 64);
    /* Entry size past the container; entry header size below 64 or huge. */
    v64 = UINT64_MAX;
    memcpy(e + 8, &v64, 8);
    CHECK(first_error(&b) == DRK_FATBIN_TRUNCATED);
    memcpy(e, save, 64);
    v32 = 8;
    memcpy(e + 4, &v32, 4);
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    v32 = UINT32_MAX;
    memcpy(e + 4, &v32, 4);
    CHECK(first_error(&b) == DRK_FATBIN_TRUNCATED);
    memcpy(e, save, 64);
    /* compressed_size beyond the stored bytes, or 0. */
    memcpy(&v64, e + 8, 8);
    v32 = (uint32_t)v64 + 1;
    memcpy(e + 0x10, &v32, 4);
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    v32 = 0;
    memcpy(e + 0x10, &v32, 4);
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    memcpy(e, save, 64);
    /* Both codecs at once. */
    e[0x29] |= 0x80;
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    memcpy(e, save, 64);
    /* Identifier out of the entry. */
    v32 = UINT32_MAX - 1;
    memcpy(e + 0x20, &v32, 4);
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    memcpy(e, save, 64);
    /* decompressed_size huge, a little off, or 0. */
    v64 = 1ull << 40;
    memcpy(e + 0x38, &v64, 8);
    CHECK(payload_rc(&b, 1) == DRK_FATBIN_TOO_LARGE);
    v64 = sizeof ptx_text + 1;
    memcpy(e + 0x38, &v64, 8);
    CHECK(payload_rc(&b, 1) == DRK_FATBIN_CORRUPT);
    v64 = sizeof ptx_text - 1;
    memcpy(e + 0x38, &v64, 8);
    CHECK(payload_rc(&b, 1) == DRK_FATBIN_CORRUPT);
    v64 = 0;
    memcpy(e + 0x38, &v64, 8);
    CHECK(first_error(&b) == DRK_FATBIN_BAD_HEADER);
    memcpy(e, save, 64);
    CHECK(payload_rc(&b, 1) == 0);
    /* The old codec flag alone. */
    e[0x29] &= (uint8_t)~0x20;
    e[0x29] |= 0x10;
    CHECK(payload_rc(&b, 1) == DRK_FATBIN_NO_CODEC);
    memcpy(e, save, 64);

    /* Garbage where the second container should start. */
    size_t csize;
    drk_fatbin_container_size(b.p, b.n, &csize);
    b.p[csize + 3] = 0x42;
    CHECK(first_error(&b) == DRK_FATBIN_BAD_MAGIC);
    free(b.p);
}

/* Corrupt compressed bytes: an error from the codec, no overread. */
static void test_corrupt_payloads(void)
{
    buf b = make_sample();
    for (int nth = 1; nth <= 3; nth++) {
        drk_fatbin_iter it;
        drk_fatbin_entry e;
        drk_fatbin_iter_init(&it, b.p, b.n);
        for (int i = 0; i <= nth; i++)
            drk_fatbin_next(&it, &e);
        uint8_t *pay = (uint8_t *)(uintptr_t)e.payload;
        int bad = 0;
        for (size_t i = 0; i < e.compressed_size; i += 7) {
            uint8_t old = pay[i];
            pay[i] ^= 0x5a;
            uint8_t *out;
            size_t len;
            int rc = drk_fatbin_payload(&e, &out, &len);
            if (rc == 0)
                free(out);
            else
                bad++;
            CHECK(rc == 0 || rc == DRK_FATBIN_CORRUPT);
            pay[i] = old;
        }
        CHECK(bad > 0);
    }
    free(b.p);
}

static void test_wrappers(void)
{
    buf a = make_sample(), c = {0};
    spec one[] = {{1, 90, 9, 0, 0, ptx_text, sizeof ptx_text, NULL}};
    put_container(&c, one, 1);
    const void *list[] = {c.p, a.p, c.p, NULL};
    struct {
        uint32_t magic, version;
        const void *data, *extra;
    } w1 = {0x466243B1u, 1, a.p, "file.cu"}, w2 = {0x466243B1u, 2, a.p, list}, w3 = {0x466243B1u, 3, a.p, NULL},
      w4 = {0x466243B1u, 2, NULL, list};
    _Static_assert(sizeof w1 == DRK_FATBIN_WRAPPER_SIZE, "wrapper layout");
    const void *out[4];
    CHECK(drk_fatbin_wrapper_containers(&w1, out, 4) == 1 && out[0] == a.p);
    CHECK(drk_fatbin_wrapper_containers(&w2, out, 4) == 3 && out[0] == a.p && out[1] == c.p && out[2] == c.p);
    CHECK(drk_fatbin_wrapper_containers(&w2, out, 1) == 3 && out[0] == a.p);
    CHECK(drk_fatbin_wrapper_containers(&w4, out, 4) == 3 && out[0] == c.p && out[1] == a.p);
    CHECK(drk_fatbin_wrapper_containers(&w3, out, 4) == DRK_FATBIN_BAD_HEADER);
    w1.magic = 0xBA55ED50u;
    CHECK(drk_fatbin_wrapper_containers(&w1, out, 4) == DRK_FATBIN_BAD_MAGIC);
    /* An array without its NULL is cut at the bound. */
    const void **many = malloc((DRK_FATBIN_MAX_PRELINKED + 1) * sizeof *many);
    for (int i = 0; i <= DRK_FATBIN_MAX_PRELINKED; i++)
        many[i] = c.p;
    w2.extra = many;
    CHECK(drk_fatbin_wrapper_containers(&w2, out, 4) == DRK_FATBIN_BAD_HEADER);
    many[DRK_FATBIN_MAX_PRELINKED - 1] = NULL;
    CHECK(drk_fatbin_wrapper_containers(&w2, out, 4) == DRK_FATBIN_MAX_PRELINKED);
    free(many);
    free(a.p);
    free(c.p);
}

static void test_edges(void)
{
    drk_fatbin_iter it;
    drk_fatbin_entry e;
    drk_fatbin_iter_init(&it, NULL, 100);
    CHECK(drk_fatbin_next(&it, &e) == 0);
    uint8_t zeros[40] = {0};
    drk_fatbin_iter_init(&it, zeros, sizeof zeros);
    CHECK(drk_fatbin_next(&it, &e) == 0);
    /* An empty container, then an entry whose payload is empty. */
    buf b = {0};
    put_container(&b, NULL, 0);
    spec s[] = {{2, 75, 1, 8, 0, "", 0, NULL}};
    put_container(&b, s, 1);
    drk_fatbin_iter_init(&it, b.p, b.n);
    CHECK(drk_fatbin_next(&it, &e) == 1 && e.arch == 75 && e.stored_size == 0);
    uint8_t *out;
    size_t len;
    CHECK(drk_fatbin_payload(&e, &out, &len) == 0 && len == 0 && out[0] == 0);
    free(out);
    CHECK(drk_fatbin_next(&it, &e) == 0);
    free(b.p);
    for (int err = 0; err >= -8; err--)
        CHECK(drk_fatbin_strerror(err) && drk_fatbin_strerror(err)[0]);
}

int main(void)
{
    make_elf_bytes();
    test_sample();
    test_truncation();
    test_lies();
    test_corrupt_payloads();
    test_wrappers();
    test_edges();
    return CHECK_DONE();
}
