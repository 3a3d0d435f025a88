/* The cubin reader on nvcc's output (kernels/params.cu for sm_80, sm_90,
 * sm_100 and -rdc; kernels/hand.ptx through ptxas), then on truncated and
 * corrupted copies: an error or a sane result, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/cubin.h"
#include "tests/unit/check.h"
#include "tests/unit/kernels/expected.h"

static const char *const fx_files[FX_N] = {"sm80.cubin", "sm90.cubin", "sm100.cubin", "rdc.cubin"};
static const unsigned fx_sm[FX_N] = {80, 90, 100, 90};

static const drk_kernel_info *find(const drk_cubin *c, const char *name)
{
    for (size_t i = 0; i < c->nkernels; i++)
        if (strcmp(c->kernels[i].name, name) == 0)
            return &c->kernels[i];
    return NULL;
}

static void check_kernel(const drk_cubin *c, const fx_kernel *x, int v)
{
    const drk_kernel_info *k = find(c, x->name);
    CHECK(k != NULL);
    if (!k) {
        fprintf(stderr, "  %s missing from %s\n", x->name, fx_files[v]);
        return;
    }
    CHECK(k->nparams == x->nparams);
    CHECK(k->params_size == x->params_size);
    for (uint32_t i = 0; i < x->nparams && i < k->nparams; i++) {
        CHECK(k->params[i].offset == x->params[i].offset);
        CHECK(k->params[i].size == x->params[i].size);
        /* Only sm_100 marks pointers (KPARAM space 5); nothing is ever
         * called a scalar, since a cubin cannot tell. */
        int want = v == FX_SM100 && x->params[i].pointer ? DRK_PARAM_POINTER : DRK_PARAM_KIND_UNKNOWN;
        CHECK(k->params[i].kind == want);
    }
    CHECK(k->regs == x->regs[v]);
    CHECK(k->shared_bytes == x->shared[v]);
    CHECK(k->const_bytes == x->cbank0[v]);
    CHECK(k->local_bytes == x->stack);
    CHECK(k->max_threads == x->max_threads);
    CHECK(k->reqntid[0] == 0 && k->reqntid[1] == 0 && k->reqntid[2] == 0);
}

static void test_fixture(int v)
{
    size_t size;
    unsigned char *buf = check_load(DRK_UNIT_KERNELS, fx_files[v], &size);
    CHECK(drk_is_cubin(buf, size));
    size_t ext = 0;
    CHECK(drk_elf_extent(buf, size, &ext) == 0 && ext == size);
    CHECK(drk_elf_extent(buf, size - 1, &ext) == -1);
    char err[256] = "";
    drk_cubin c;
    int rc = drk_cubin_read(buf, size, &c, err, sizeof err);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  %s: %s\n", fx_files[v], err);
        free(buf);
        return;
    }
    CHECK(c.sm == fx_sm[v]);
    CHECK(c.abi == 8);
    CHECK(c.elf_type == (v == FX_RDC ? 1u : 2u)); /* ET_REL, ET_EXEC */
    CHECK(c.nkernels == FX_NKERNELS);             /* helper() is a device function */
    CHECK(find(&c, "_Z6helperf") == NULL);
    for (size_t i = 0; i < FX_NKERNELS; i++)
        check_kernel(&c, &fx_kernels[i], v);
    drk_cubin_free(&c);
    free(buf);
}

/* hand.ptx through ptxas: .ptr parameters (space 4 .global, 5 generic,
 * pointee alignment in the low byte), .reqntid, .maxntid, LOCAL (.entry
 * without .visible) and WEAK entries. */
static void test_hand(void)
{
    size_t size;
    unsigned char *buf = check_load(DRK_UNIT_KERNELS, "hand.cubin", &size);
    char err[256] = "";
    drk_cubin c;
    CHECK(drk_cubin_read(buf, size, &c, err, sizeof err) == 0);
    CHECK(c.nkernels == 3);
    const drk_kernel_info *k = find(&c, "ptrs");
    CHECK(k && k->nparams == 6 && k->params_size == 66);
    if (k && k->nparams == 6) {
        static const uint32_t off[6] = {0, 8, 16, 32, 56, 64}, sz[6] = {1, 8, 2, 20, 8, 2};
        for (int i = 0; i < 6; i++)
            CHECK(k->params[i].offset == off[i] && k->params[i].size == sz[i]);
        CHECK(k->params[1].kind == DRK_PARAM_POINTER && k->params[1].align_log2 == 3);
        CHECK(k->params[4].kind == DRK_PARAM_POINTER && k->params[4].align_log2 == 2);
        CHECK(k->params[0].kind == DRK_PARAM_KIND_UNKNOWN && k->params[3].kind == DRK_PARAM_KIND_UNKNOWN);
        CHECK(k->reqntid[0] == 64 && k->reqntid[1] == 2 && k->reqntid[2] == 1);
    }
    k = find(&c, "weak_one");
    CHECK(k && k->nparams == 4 && k->params_size == 21 && k->max_threads == 128);
    k = find(&c, "plain");
    CHECK(k && k->nparams == 0 && k->params_size == 0 && k->max_threads == 256);
    CHECK(find(&c, "helper") == NULL);
    drk_cubin_free(&c);
    free(buf);
}

static void test_not_cubin(void)
{
    char err[128];
    drk_cubin c;
    static const char text[] = ".version 8.0\n.target sm_90\n";
    CHECK(!drk_is_cubin(text, sizeof text));
    CHECK(drk_cubin_read(text, sizeof text, &c, err, sizeof err) == -1 && strstr(err, "cubin"));
    CHECK(drk_cubin_read(text, 0, &c, err, sizeof err) == -1);
    size_t ext;
    CHECK(drk_elf_extent(text, sizeof text, &ext) == -1);
}

/* A successful read of a damaged file must still make sense. */
static void check_sane(const drk_cubin *c)
{
    CHECK(c->nkernels <= FX_NKERNELS);
    for (size_t i = 0; i < c->nkernels; i++) {
        const drk_kernel_info *k = &c->kernels[i];
        CHECK(k->name != NULL && (k->nparams == 0 || k->params != NULL));
        for (uint32_t j = 0; j < k->nparams; j++)
            CHECK((uint64_t)k->params[j].offset + k->params[j].size <= k->params_size);
    }
}

static void test_truncated(const unsigned char *buf, size_t size)
{
    /* The section table is at the end, so any cut is an error. */
    for (size_t n = 0; n < size; n++) {
        unsigned char *cut = malloc(n ? n : 1); /* exact size: ASan sees overreads */
        memcpy(cut, buf, n);
        char err[256];
        drk_cubin c;
        int rc = drk_cubin_read(cut, n, &c, err, sizeof err);
        CHECK(rc == -1);
        if (rc == 0)
            drk_cubin_free(&c);
        free(cut);
    }
}

/* The .nv.info sections, by a separate reading of the section table. */
static void for_each_info_byte(const unsigned char *buf, size_t size, void (*fn)(const unsigned char *, size_t, size_t))
{
    uint64_t shoff;
    uint16_t shnum, shstrndx;
    memcpy(&shoff, buf + 0x28, 8);
    memcpy(&shnum, buf + 0x3c, 2);
    memcpy(&shstrndx, buf + 0x3e, 2);
    uint64_t stroff;
    memcpy(&stroff, buf + shoff + shstrndx * 64 + 0x18, 8);
    for (unsigned i = 1; i < shnum; i++) {
        const unsigned char *sh = buf + shoff + i * 64;
        uint32_t name;
        uint64_t off, sz;
        memcpy(&name, sh, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&sz, sh + 0x20, 8);
        if (strncmp((const char *)buf + stroff + name, ".nv.info", 8) == 0)
            for (uint64_t b = off; b < off + sz; b++)
                fn(buf, size, (size_t)b);
    }
}

static unsigned flips_ok, flips_failed;

static void try_copy(unsigned char *copy, size_t size)
{
    char err[256];
    drk_cubin c;
    if (drk_cubin_read(copy, size, &c, err, sizeof err) == 0) {
        flips_ok++;
        check_sane(&c);
        drk_cubin_free(&c);
    } else {
        flips_failed++;
        CHECK(err[0] != '\0');
    }
}

static void flip_info_byte(const unsigned char *buf, size_t size, size_t at)
{
    static const unsigned char values[] = {0x00, 0xff, 0x04, 0x7f, 0x80, 0x10};
    unsigned char *copy = malloc(size);
    memcpy(copy, buf, size);
    for (size_t v = 0; v < sizeof values; v++) {
        copy[at] = values[v];
        try_copy(copy, size);
        copy[at] = buf[at] ^ (unsigned char)(1u << v);
        try_copy(copy, size);
    }
    free(copy);
}

/* Random bytes anywhere (headers, tables, symbols, strings). */
static void test_random_flips(const unsigned char *buf, size_t size)
{
    unsigned seed = 12345;
    unsigned char *copy = malloc(size);
    for (int round = 0; round < 4000; round++) {
        memcpy(copy, buf, size);
        for (int j = 0; j < 1 + round % 4; j++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % size;
            /* Half the time aim at the first 64 bytes or the section table. */
            if (round & 1) {
                uint64_t shoff;
                memcpy(&shoff, buf + 0x28, 8);
                at = (seed >> 4) & 1 ? (seed >> 9) % 64 : shoff + (seed >> 9) % (size - shoff);
            }
            copy[at] = (unsigned char)(seed >> 20);
        }
        try_copy(copy, size);
    }
    free(copy);
}

int main(void)
{
    for (int v = 0; v < FX_N; v++)
        test_fixture(v);
    test_hand();
    test_not_cubin();
    for (int v = 0; v < FX_N; v++) {
        size_t size;
        unsigned char *buf = check_load(DRK_UNIT_KERNELS, fx_files[v], &size);
        if (v == FX_SM90 || v == FX_RDC)
            test_truncated(buf, size);
        for_each_info_byte(buf, size, flip_info_byte);
        test_random_flips(buf, size);
        free(buf);
    }
    printf("corrupted copies: %u read, %u rejected\n", flips_ok, flips_failed);
    return CHECK_DONE();
}
