/* The image reader on nvcc-built fixtures (tests/unit/images, built by
 * CMake): kernel names, arch lists, and the entry chosen for an SM (exact
 * SASS, same-major SASS, PTX JIT, arch-specific "a" and family "f"
 * targets); fatbins, wrappers v1 and v2, cubin, PTX, host executables,
 * -rdc objects and executables; truncated and corrupt images. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/cubin.h"
#include "evolve/image/fatbin.h"
#include "evolve/image/image.h"
#include "tests/unit/check.h"

#define AXPY "_Z4axpyPfPKffi"
#define FILL "_Z4fillPxx"
#define MAIN "_Z9from_mainPi"

static char *path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", DRK_UNIT_IMAGES, name);
    return buf;
}

static drk_image read_mem(const void *p, size_t n, unsigned sm)
{
    drk_image img;
    drk_image_options opt = {.sm = sm};
    char err[200];
    int rc = drk_image_read(p, n, &opt, &img, err, sizeof err);
    if (rc)
        fprintf(stderr, "drk_image_read (sm %u): %s\n", sm, err);
    CHECK(rc == 0);
    return img;
}

static drk_image read_path(const char *name, unsigned sm)
{
    drk_image img;
    drk_image_options opt = {.sm = sm};
    char err[200];
    int rc = drk_image_read_file(path(name), &opt, &img, err, sizeof err);
    if (rc)
        fprintf(stderr, "drk_image_read_file %s (sm %u): %s\n", name, sm, err);
    CHECK(rc == 0);
    return img;
}

/* The kernel's info came from `src` for `arch` with `suffix`. */
static int from(const drk_image *img, const char *name, int src, unsigned arch, char suffix)
{
    const drk_image_kernel *k = drk_image_find(img, name);
    if (!k)
        return 0;
    return (int)k->source == src && k->source_arch == arch && k->source_suffix == suffix;
}

static int lists(const drk_image_kernel *k, const char *sass, const char *ptx)
{
    char s[128] = "", p[128] = "";
    for (unsigned i = 0; i < k->nsass; i++)
        snprintf(s + strlen(s), sizeof s - strlen(s), "%s%u%.1s", i ? "," : "", k->sass[i], &k->sass_suffix[i]);
    for (unsigned i = 0; i < k->nptx; i++)
        snprintf(p + strlen(p), sizeof p - strlen(p), "%s%u%.1s", i ? "," : "", k->ptx[i], &k->ptx_suffix[i]);
    if (strcmp(s, sass) || strcmp(p, ptx))
        fprintf(stderr, "%s: sass [%s] ptx [%s], expected [%s] [%s]\n", k->info.name, s, p, sass, ptx);
    return strcmp(s, sass) == 0 && strcmp(p, ptx) == 0;
}

static void check_axpy_params(const drk_image_kernel *k)
{
    CHECK(k->info.nparams == 4);
    if (k->info.nparams != 4)
        return;
    static const uint32_t off[] = {0, 8, 16, 20}, size[] = {8, 8, 4, 4};
    for (int i = 0; i < 4; i++) {
        CHECK(k->info.params[i].offset == off[i]);
        CHECK(k->info.params[i].size == size[i]);
    }
    /* The float and the int are scalars by the PTX (the cubin does not
     * say); nvcc's PTX writes no .ptr, so the .u64 pointers may stay
     * unknown, but never scalars. */
    CHECK(k->info.params[0].kind != DRK_PARAM_SCALAR && k->info.params[1].kind != DRK_PARAM_SCALAR);
    CHECK(k->info.params[2].kind == DRK_PARAM_SCALAR && k->info.params[3].kind == DRK_PARAM_SCALAR);
}

/* sm_80 SASS, sm_90 SASS and compute_90 PTX, all compressed. */
static void test_two_archs(void)
{
    size_t n, ext;
    uint8_t *p = check_load(DRK_UNIT_IMAGES, "two.fatbin", &n);
    CHECK(drk_image_classify(p, n) == DRK_IMAGE_FATBIN);
    CHECK(drk_image_extent(p, n, &ext) == 0 && ext <= n && ext + 16 > n);

    drk_image img = read_mem(p, n, 0);
    CHECK(img.format == DRK_IMAGE_FATBIN && img.nkernels == 2);
    CHECK(img.stats.containers == 1 && img.stats.entries == 3 && img.stats.sass_entries == 2);
    CHECK(img.stats.ptx_entries == 1 && img.stats.lz4 + img.stats.zstd == 3 && img.stats.entries_read == 3);
    CHECK(img.stats.errors == 0 && img.first_error[0] == 0);
    CHECK(img.stats.decompressed_bytes > img.stats.stored_bytes);
    const drk_image_kernel *k = drk_image_find(&img, AXPY);
    CHECK(k && lists(k, "80,90", "90") && k->ptx_isa[0] >= 90);
    CHECK(from(&img, AXPY, DRK_INFO_SASS, 90, 0) && from(&img, FILL, DRK_INFO_SASS, 90, 0));
    if (k) {
        check_axpy_params(k);
        CHECK(k->info.regs != DRK_UNKNOWN_U32 && k->info.regs > 0);
        CHECK(drk_image_kernel_sass_for(k, 89) && !drk_image_kernel_sass_for(k, 100));
        CHECK(drk_image_kernel_ptx_for(k, 90) && drk_image_kernel_ptx_for(k, 120) && !drk_image_kernel_ptx_for(k, 89));
    }
    CHECK(drk_image_find(&img, "_Z4axpy") == NULL && drk_image_find(&img, "zzz") == NULL);
    CHECK(strcmp(img.kernels[0].info.name, img.kernels[1].info.name) < 0);
    drk_image_free(&img);

    img = read_mem(p, n, 90);
    CHECK(from(&img, AXPY, DRK_INFO_SASS, 90, 0) && img.stats.entries_read == 2);
    k = drk_image_find(&img, AXPY);
    CHECK(k && lists(k, "80,90", "90"));
    if (k)
        check_axpy_params(k);
    drk_image_free(&img);

    img = read_mem(p, n, 89);
    CHECK(from(&img, AXPY, DRK_INFO_SASS, 80, 0) && img.stats.entries_read == 1);
    CHECK(img.stats.entries == 3); /* every header is still read */
    drk_image_free(&img);
    img = read_mem(p, n, 86);
    CHECK(from(&img, FILL, DRK_INFO_SASS, 80, 0));
    drk_image_free(&img);

    img = read_mem(p, n, 100);
    CHECK(from(&img, AXPY, DRK_INFO_PTX, 90, 0) && img.stats.entries_read == 1);
    k = drk_image_find(&img, AXPY);
    CHECK(k && k->info.regs == DRK_UNKNOWN_U32);
    if (k)
        check_axpy_params(k);
    drk_image_free(&img);
    img = read_mem(p, n, 120);
    CHECK(from(&img, AXPY, DRK_INFO_PTX, 90, 0));
    drk_image_free(&img);

    img = read_mem(p, n, 75); /* nothing runs on sm_75 */
    CHECK(img.nkernels == 0 && img.stats.entries == 3 && img.stats.entries_read == 0 && img.stats.errors == 0);
    drk_image_free(&img);

    /* The same file from disk. */
    img = read_path("two.fatbin", 89);
    CHECK(img.format == DRK_IMAGE_FATBIN && from(&img, AXPY, DRK_INFO_SASS, 80, 0));
    drk_image_free(&img);
    free(p);
}

/* sm_90a + compute_90a, sm_100f + compute_100f, compute_80. */
static void test_suffixes(void)
{
    size_t n;
    uint8_t *p = check_load(DRK_UNIT_IMAGES, "suffix.fatbin", &n);
    drk_image img = read_mem(p, n, 0);
    const drk_image_kernel *k = drk_image_find(&img, AXPY);
    CHECK(k && lists(k, "90a,100f", "80,90a,100f"));
    CHECK(from(&img, AXPY, DRK_INFO_SASS, 100, 'f'));
    if (k) {
        CHECK(drk_image_kernel_ptx_for(k, 120) && drk_image_kernel_ptx_for(k, 80) && !drk_image_kernel_ptx_for(k, 75));
        CHECK(drk_image_kernel_sass_for(k, 90) && drk_image_kernel_sass_for(k, 103));
        CHECK(!drk_image_kernel_sass_for(k, 120) && !drk_image_kernel_sass_for(k, 89));
    }
    drk_image_free(&img);

    static const struct {
        unsigned sm;
        int src;
        unsigned arch;
        char suffix;
    } want[] = {
        {90, DRK_INFO_SASS, 90, 'a'},  {100, DRK_INFO_SASS, 100, 'f'}, {103, DRK_INFO_SASS, 100, 'f'},
        {110, DRK_INFO_PTX, 80, 0},    {120, DRK_INFO_PTX, 80, 0},     {89, DRK_INFO_PTX, 80, 0},
        {80, DRK_INFO_PTX, 80, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        img = read_mem(p, n, want[i].sm);
        int ok = from(&img, FILL, want[i].src, want[i].arch, want[i].suffix);
        if (!ok)
            fprintf(stderr, "suffix.fatbin on sm %u: wrong entry\n", want[i].sm);
        CHECK(ok);
        drk_image_free(&img);
    }
    free(p);

    CHECK(drk_image_sass_runs_on(90, 'a', 90) && !drk_image_sass_runs_on(90, 'a', 100));
    CHECK(drk_image_sass_runs_on(100, 'f', 103) && !drk_image_sass_runs_on(100, 'f', 110));
    CHECK(drk_image_sass_runs_on(80, 0, 89) && !drk_image_sass_runs_on(80, 0, 90) && !drk_image_sass_runs_on(86, 0, 80));
    CHECK(drk_image_ptx_runs_on(80, 0, 120) && !drk_image_ptx_runs_on(90, 'a', 100) && drk_image_ptx_runs_on(90, 'a', 90));
    CHECK(drk_image_ptx_runs_on(100, 'f', 103) && !drk_image_ptx_runs_on(100, 'f', 120) && !drk_image_ptx_runs_on(90, 0, 89));
}

static void test_cubin_and_ptx(void)
{
    size_t n, ext;
    uint8_t *p = check_load(DRK_UNIT_IMAGES, "sm90.cubin", &n);
    CHECK(drk_image_classify(p, n) == DRK_IMAGE_CUBIN);
    CHECK(drk_image_extent(p, n, &ext) == 0 && ext <= n);
    drk_image img = read_mem(p, n, 0);
    CHECK(img.format == DRK_IMAGE_CUBIN && img.nkernels == 2 && from(&img, AXPY, DRK_INFO_SASS, 90, 0));
    const drk_image_kernel *k = drk_image_find(&img, FILL);
    CHECK(k && lists(k, "90", ""));
    drk_image_free(&img);
    img = read_path("sm90.cubin", 90);
    CHECK(img.nkernels == 2 && from(&img, FILL, DRK_INFO_SASS, 90, 0));
    drk_image_free(&img);
    free(p);

    p = check_load(DRK_UNIT_IMAGES, "c90.ptx", &n);
    CHECK(drk_image_classify(p, n) == DRK_IMAGE_PTX);
    /* As a program hands PTX to the driver: NUL-terminated. */
    uint8_t *text = realloc(p, n + 1);
    if (!text)
        exit(1);
    p = text;
    p[n] = 0;
    CHECK(drk_image_extent(p, n + 1, &ext) == 0 && ext == n);
    img = read_mem(p, n, 0);
    CHECK(img.format == DRK_IMAGE_PTX && img.nkernels == 2 && from(&img, AXPY, DRK_INFO_PTX, 90, 0));
    k = drk_image_find(&img, AXPY);
    CHECK(k && lists(k, "", "90") && k->ptx_isa[0] >= 90);
    if (k)
        check_axpy_params(k);
    drk_image_free(&img);
    img = read_path("c90.ptx", 0);
    CHECK(img.format == DRK_IMAGE_PTX && img.nkernels == 2);
    drk_image_free(&img);
    free(p);
}

/* A kernel's code digest: the same for builds that differ only in the
 * register cap they record, another for other code; a kernel that is not
 * there and damaged bytes are errors. */
static void test_code_digest(void)
{
    size_t n[3];
    uint8_t *p[3] = {check_load(DRK_UNIT_IMAGES, "sm90_r128.cubin", &n[0]),
                     check_load(DRK_UNIT_IMAGES, "sm90_r255.cubin", &n[1]),
                     check_load(DRK_UNIT_IMAGES, "sm90_O0.cubin", &n[2])};
    CHECK(n[0] != n[1] || memcmp(p[0], p[1], n[0]) != 0); /* the files differ: each records its cap */
    const char *names[2] = {AXPY, FILL};
    uint64_t d[3][2] = {{0}};
    char err[200];
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 2; k++)
            CHECK(drk_cubin_code_digest(p[f], n[f], names[k], &d[f][k], err, sizeof err) == 0);
    CHECK(d[0][0] == d[1][0] && d[0][1] == d[1][1]);
    CHECK(d[0][0] != d[2][0] && d[0][0] != d[0][1]);
    CHECK(drk_cubin_code_digest(p[0], n[0], "_Z6absentv", &d[0][0], err, sizeof err) == -1 && strstr(err, "absent"));
    CHECK(drk_cubin_code_digest(p[0], 64, AXPY, &d[0][0], err, sizeof err) == -1 && *err);
    CHECK(drk_cubin_code_digest("not a cubin", 11, AXPY, &d[0][0], err, sizeof err) == -1);
    for (int f = 0; f < 3; f++)
        free(p[f]);
}

/* Host files: an executable (.nv_fatbin), a -rdc object (__nv_relfatbin)
 * and a device-linked -rdc executable (both). */
static void test_host_files(void)
{
    drk_image img = read_path("exe", 0);
    CHECK(img.format == DRK_IMAGE_HOST_ELF && img.stats.errors == 0);
    const drk_image_kernel *k = drk_image_find(&img, AXPY);
    CHECK(k && lists(k, "80,90", "90") && drk_image_find(&img, MAIN) && drk_image_find(&img, FILL));
    CHECK(from(&img, MAIN, DRK_INFO_SASS, 90, 0));
    size_t nk = img.nkernels;
    drk_image_free(&img);

    img = read_path("exe", 89);
    CHECK(from(&img, AXPY, DRK_INFO_SASS, 80, 0) && from(&img, MAIN, DRK_INFO_SASS, 80, 0));
    drk_image_free(&img);

    size_t n;
    uint8_t *p = check_load(DRK_UNIT_IMAGES, "exe", &n);
    CHECK(drk_image_classify(p, n) == DRK_IMAGE_HOST_ELF);
    img = read_mem(p, n, 0);
    CHECK(img.format == DRK_IMAGE_HOST_ELF && img.nkernels == nk);
    drk_image_free(&img);
    /* Cut anywhere: no crash, the sections past the end are errors. */
    for (size_t cut = 0; cut < n; cut += n / 97 + 1) {
        drk_image_options opt = {.sm = 0};
        char err[160];
        if (drk_image_read(p, cut, &opt, &img, err, sizeof err) == 0)
            drk_image_free(&img);
    }
    free(p);

    img = read_path("rdc.o", 0);
    CHECK(img.format == DRK_IMAGE_HOST_ELF && img.nkernels == 2);
    k = drk_image_find(&img, FILL);
    CHECK(k && lists(k, "80,90", "90"));
    drk_image_free(&img);

    /* A device-linked program: what the runtime loads is the linked image
     * (as cuobjdump lists it), where nvlink kept only the kernels the
     * program can launch; nvlink's inputs in __nv_relfatbin are left out. */
    img = read_path("rdc_exe", 90);
    CHECK(from(&img, MAIN, DRK_INFO_SASS, 90, 0) && !drk_image_find(&img, AXPY) && img.nkernels == 1);
    k = drk_image_find(&img, MAIN);
    CHECK(k && lists(k, "80,90", ""));
    drk_image_free(&img);
    img = read_path("rdc_exe", 100);
    CHECK(img.nkernels == 0);
    drk_image_free(&img);
}

static void test_wrappers(void)
{
    size_t n2, ns;
    uint8_t *two = check_load(DRK_UNIT_IMAGES, "two.fatbin", &n2), *sfx = check_load(DRK_UNIT_IMAGES, "suffix.fatbin", &ns);
    const void *list[] = {sfx, two, NULL};
    struct {
        uint32_t magic, version;
        const void *data, *extra;
    } w1 = {DRK_FATBIN_WRAPPER_MAGIC, 1, two, "kernels.cu"}, w2 = {DRK_FATBIN_WRAPPER_MAGIC, 2, NULL, list};
    size_t ext;
    CHECK(drk_image_extent(&w1, sizeof w1, &ext) == 0 && ext == 24);
    drk_image img = read_mem(&w1, sizeof w1, 90);
    CHECK(img.format == DRK_IMAGE_WRAPPER && img.nkernels == 2 && from(&img, AXPY, DRK_INFO_SASS, 90, 0));
    drk_image_free(&img);
    img = read_mem(&w2, sizeof w2, 0);
    const drk_image_kernel *k = drk_image_find(&img, AXPY);
    CHECK(img.stats.containers == 2 && k && lists(k, "80,90,90a,100f", "80,90,90a,100f"));
    drk_image_free(&img);
    img = read_mem(&w2, sizeof w2, 90); /* sm_90a wins over sm_90 */
    CHECK(from(&img, AXPY, DRK_INFO_SASS, 90, 'a'));
    drk_image_free(&img);
    free(two);
    free(sfx);
}

/* Every prefix, and flipped bytes: an error or a partial table, no crash;
 * a bad entry is counted and the others are still read. */
static void test_damage(void)
{
    size_t n, ext = 0;
    uint8_t *p = check_load(DRK_UNIT_IMAGES, "two.fatbin", &n);
    CHECK(drk_image_extent(p, n, &ext) == 0);
    drk_image img;
    drk_image_options opt = {.sm = 0};
    char err[160];
    for (size_t cut = 0; cut < n; cut += cut < 300 ? 1 : 13) {
        uint8_t *q = malloc(cut ? cut : 1);
        memcpy(q, p, cut);
        int rc = drk_image_read(q, cut, &opt, &img, err, sizeof err);
        if (rc == 0) {
            CHECK(img.stats.errors > 0 || cut >= ext);
            drk_image_free(&img);
        } else {
            CHECK(err[0] != 0);
        }
        free(q);
    }
    for (size_t at = 0; at < n; at += 5) {
        p[at] ^= 0xa5;
        if (drk_image_read(p, n, &opt, &img, err, sizeof err) == 0)
            drk_image_free(&img);
        p[at] ^= 0xa5;
    }

    /* Spoil the sm_80 entry's compressed payload. */
    drk_fatbin_iter it;
    drk_fatbin_entry e;
    drk_fatbin_iter_init(&it, p, n);
    while (drk_fatbin_next(&it, &e) == 1 && !(e.kind == DRK_FATBIN_ELF && e.arch == 80))
        ;
    CHECK(e.arch == 80 && e.compressed_size > 16);
    memset(p + (e.payload - p), 0xff, 16);
    CHECK(drk_image_read(p, n, &opt, &img, err, sizeof err) == 0);
    CHECK(img.stats.errors == 1 && img.stats.entries_read == 2 && strstr(img.first_error, "arch 80"));
    CHECK(img.nkernels == 2 && from(&img, AXPY, DRK_INFO_SASS, 90, 0));
    drk_image_free(&img);
    opt.sm = 89; /* the only entry that matters is bad: nothing read */
    CHECK(drk_image_read(p, n, &opt, &img, err, sizeof err) == -1 && strstr(err, "arch 80"));
    free(p);

    CHECK(drk_image_read("garbage!", 8, &opt, &img, err, sizeof err) == -1 && err[0]);
    CHECK(drk_image_read_file(path("missing"), &opt, &img, err, sizeof err) == -1 && strstr(err, "missing"));
    CHECK(drk_image_classify("\177ELF", 4) == DRK_IMAGE_UNKNOWN);
    CHECK(drk_image_extent("xyz", 3, &n) == -1);
}

int main(void)
{
    test_two_archs();
    test_suffixes();
    test_cubin_and_ptx();
    test_code_digest();
    test_host_files();
    test_wrappers();
    test_damage();
    return CHECK_DONE();
}
