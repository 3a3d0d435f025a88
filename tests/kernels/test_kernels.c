/* drk's own kernels as the library embeds them (kernels/kernels.h), read
 * with drk's image reader: the array is the fatbin nvcc built, 64-byte
 * aligned and exactly one fatbin long; it has the three kernels with SASS
 * for every arch built and PTX for the lowest; the entry the driver would
 * pick for each SM is the expected one (SASS of the same major, else PTX);
 * and every kernel's parameter layout, from SASS and from PTX, is its
 * *_params struct's, field by field. Prints the fatbin's size and entries
 * and each kernel's resources per arch. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/image.h"
#include "kernels/kernels.h"
#include "tests/unit/check.h"

/* A kernel's name and its parameter struct's fields, as offsets and sizes. */
typedef struct {
    const char *name;
    size_t struct_size;
    unsigned nparams;
    size_t offset[4], size[4];
} expected_kernel;

#define FIELD(type, f) offsetof(type, f)
#define SIZE(type, f) sizeof(((type *)0)->f)

static const expected_kernel expected[] = {
    {DRK_KERNEL_COMPARE, sizeof(drk_compare_params), 4,
     {FIELD(drk_compare_params, a), FIELD(drk_compare_params, b), FIELD(drk_compare_params, n),
      FIELD(drk_compare_params, result)},
     {SIZE(drk_compare_params, a), SIZE(drk_compare_params, b), SIZE(drk_compare_params, n),
      SIZE(drk_compare_params, result)}},
    {DRK_KERNEL_HASH, sizeof(drk_hash_params), 3,
     {FIELD(drk_hash_params, src), FIELD(drk_hash_params, n), FIELD(drk_hash_params, result)},
     {SIZE(drk_hash_params, src), SIZE(drk_hash_params, n), SIZE(drk_hash_params, result)}},
    {DRK_KERNEL_POISON, sizeof(drk_poison_params), 3,
     {FIELD(drk_poison_params, dst), FIELD(drk_poison_params, n), FIELD(drk_poison_params, pattern)},
     {SIZE(drk_poison_params, dst), SIZE(drk_poison_params, n), SIZE(drk_poison_params, pattern)}},
};
#define NKERNELS (sizeof expected / sizeof expected[0])

static drk_image read_at(unsigned sm)
{
    drk_image img;
    drk_image_options opt = {.sm = sm};
    char err[200];
    memset(&img, 0, sizeof img);
    int rc = drk_image_read(drk_kernels_fatbin, drk_kernels_fatbin_size, &opt, &img, err, sizeof err);
    if (rc)
        fprintf(stderr, "drk_image_read (sm %u): %s\n", sm, err);
    CHECK(rc == 0);
    CHECK(img.stats.errors == 0);
    return img;
}

/* The layout the image gives `k` against its struct. */
static void check_layout(const drk_image_kernel *k, const expected_kernel *e, unsigned sm)
{
    const drk_kernel_info *in = &k->info;
    int ok = in->nparams == e->nparams && in->params_size == e->struct_size;
    for (unsigned i = 0; ok && i < e->nparams; i++)
        ok = in->params[i].offset == e->offset[i] && in->params[i].size == e->size[i];
    if (!ok) {
        fprintf(stderr, "sm %u %s (%s %u): %u params in %u bytes:", sm, e->name,
                k->source == DRK_INFO_SASS ? "sass" : "ptx", k->source_arch, in->nparams, in->params_size);
        for (unsigned i = 0; i < in->nparams; i++)
            fprintf(stderr, " (%u, %u)", in->params[i].offset, in->params[i].size);
        fprintf(stderr, "; kernels.h: %u in %zu bytes\n", e->nparams, e->struct_size);
    }
    CHECK(ok);
}

static void arch_lists(const drk_image_kernel *k, char *sass, char *ptx, size_t len)
{
    sass[0] = ptx[0] = 0;
    for (unsigned i = 0; i < k->nsass; i++)
        snprintf(sass + strlen(sass), len - strlen(sass), "%s%u%.1s", i ? "," : "", k->sass[i], &k->sass_suffix[i]);
    for (unsigned i = 0; i < k->nptx; i++)
        snprintf(ptx + strlen(ptx), len - strlen(ptx), "%s%u%.1s", i ? "," : "", k->ptx[i], &k->ptx_suffix[i]);
}

/* The SASS arch the driver would load on `sm` (the highest built of the
 * same major, not above sm), or 0: PTX then. */
static unsigned sass_for(unsigned sm)
{
    static const char list[] = DRK_KERNELS_SASS_LIST;
    unsigned best = 0;
    for (const char *p = list; *p;) {
        unsigned a = (unsigned)strtoul(p, (char **)&p, 10);
        if (a / 10 == sm / 10 && a <= sm && a > best)
            best = a;
        if (*p == ',')
            p++;
    }
    return best;
}

static unsigned count_list(const char *list)
{
    unsigned n = 1;
    for (; *list; list++)
        n += *list == ',';
    return n;
}

int main(void)
{
    /* The array: aligned, the built file byte for byte, one fatbin long. */
    size_t fsize = 0;
    unsigned char *file = check_load(DRK_KERNELS_DIR, DRK_KERNELS_FILE, &fsize);
    CHECK(((uintptr_t)drk_kernels_fatbin & 63) == 0);
    CHECK(fsize == drk_kernels_fatbin_size && memcmp(file, drk_kernels_fatbin, fsize) == 0);
    free(file);
    CHECK(drk_image_classify(drk_kernels_fatbin, drk_kernels_fatbin_size) == DRK_IMAGE_FATBIN);
    size_t extent = 0;
    CHECK(drk_image_extent(drk_kernels_fatbin, drk_kernels_fatbin_size, &extent) == 0);
    CHECK(extent == drk_kernels_fatbin_size);

    /* All of it: three kernels, SASS for each arch built, PTX for the lowest. */
    drk_image all = read_at(0);
    CHECK(all.format == DRK_IMAGE_FATBIN);
    CHECK(all.nkernels == NKERNELS);
    unsigned nsass = count_list(DRK_KERNELS_SASS_LIST);
    CHECK(all.stats.sass_entries == nsass && all.stats.ptx_entries == 1 && all.stats.other_entries == 0);
    char want_ptx[16];
    snprintf(want_ptx, sizeof want_ptx, "%u", (unsigned)DRK_KERNELS_PTX_ARCH);
    for (size_t i = 0; i < NKERNELS; i++) {
        const drk_image_kernel *k = drk_image_find(&all, expected[i].name);
        CHECK(k != NULL);
        if (!k)
            continue;
        char sass[128], ptx[128];
        arch_lists(k, sass, ptx, sizeof sass);
        if (strcmp(sass, DRK_KERNELS_SASS_LIST) || strcmp(ptx, want_ptx))
            fprintf(stderr, "%s: sass [%s] ptx [%s], expected [%s] [%s]\n", expected[i].name, sass, ptx,
                    DRK_KERNELS_SASS_LIST, want_ptx);
        CHECK(strcmp(sass, DRK_KERNELS_SASS_LIST) == 0 && strcmp(ptx, want_ptx) == 0);
    }
    printf("kernels fatbin: %zu bytes (archs: %s), %u entries: %u SASS, %u PTX, %u compressed (LZ4 %u, ZSTD %u), "
           "%llu bytes stored, %llu decompressed\n",
           drk_kernels_fatbin_size, drk_kernels_fatbin_archs, all.stats.entries, all.stats.sass_entries,
           all.stats.ptx_entries, all.stats.lz4 + all.stats.zstd, all.stats.lz4, all.stats.zstd,
           (unsigned long long)all.stats.stored_bytes, (unsigned long long)all.stats.decompressed_bytes);
    drk_image_free(&all);

    /* Per SM: the entry the driver would take, its layout, its resources.
     * sm_110 has no SASS of its major here: the PTX (JIT) must serve it. */
    static const unsigned sms[] = {80, 86, 89, 90, 100, 103, 110, 120, 121};
    for (size_t s = 0; s < sizeof sms / sizeof sms[0]; s++) {
        unsigned sm = sms[s], want = sass_for(sm);
        if (sm < DRK_KERNELS_PTX_ARCH)
            continue;
        drk_image img = read_at(sm);
        CHECK(img.nkernels == NKERNELS);
        printf("sm_%u:", sm);
        for (size_t i = 0; i < NKERNELS; i++) {
            const drk_image_kernel *k = drk_image_find(&img, expected[i].name);
            CHECK(k != NULL);
            if (!k)
                continue;
            if (want) {
                CHECK(k->source == DRK_INFO_SASS && k->source_arch == want && k->source_suffix == 0);
                CHECK(drk_image_kernel_sass_for(k, sm));
                /* No spills, no stack: nothing slows the loop down. */
                CHECK(k->info.local_bytes == 0);
                printf(" %s sass_%u regs %u shared %u local %u;", expected[i].name, k->source_arch, k->info.regs,
                       k->info.shared_bytes, k->info.local_bytes);
            } else {
                CHECK(k->source == DRK_INFO_PTX && k->source_arch == DRK_KERNELS_PTX_ARCH);
                printf(" %s ptx compute_%u;", expected[i].name, k->source_arch);
            }
            CHECK(drk_image_kernel_ptx_for(k, sm));
            /* No launch bounds: the block size is the caller's. */
            CHECK(k->info.max_threads == 0 && k->info.reqntid[0] == 0);
            check_layout(k, &expected[i], sm);
        }
        printf("\n");
        drk_image_free(&img);
    }

    /* A GPU older than the PTX: nothing to run (validation is off there). */
    drk_image old = read_at(75);
    for (size_t i = 0; i < old.nkernels; i++)
        CHECK(!drk_image_kernel_sass_for(&old.kernels[i], 75) && !drk_image_kernel_ptx_for(&old.kernels[i], 75));
    drk_image_free(&old);
    return CHECK_DONE();
}
