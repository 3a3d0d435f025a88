/* The PTX reader on nvcc's PTX for kernels/params.cu and on kernels/hand.ptx,
 * checked against the source's layout and against the cubins ptxas makes
 * from the same code; then on inline texts and truncated copies. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/cubin.h"
#include "evolve/image/ptx.h"
#include "evolve/image/ptx_entry.h"
#include "tests/unit/check.h"
#include "tests/unit/kernels/expected.h"

static const drk_kernel_info *find(const drk_kernel_info *ks, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ks[i].name, name) == 0)
            return &ks[i];
    return NULL;
}

/* Same parameter layout as the cubin ptxas made from the same code. */
static void check_same_layout(const drk_kernel_info *p, const drk_kernel_info *c)
{
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(p->nparams == c->nparams && p->params_size == c->params_size);
    for (uint32_t i = 0; i < p->nparams && i < c->nparams; i++)
        CHECK(p->params[i].offset == c->params[i].offset && p->params[i].size == c->params[i].size);
}

static void test_nvcc_ptx(void)
{
    size_t size, csize;
    char *text = (char *)check_load(DRK_UNIT_KERNELS, "compute90.ptx", &size);
    unsigned char *bin = check_load(DRK_UNIT_KERNELS, "sm90.cubin", &csize);
    CHECK(drk_is_ptx(text, size));
    CHECK(!drk_is_ptx(bin, csize));
    char err[256] = "";
    drk_ptx p;
    drk_cubin c;
    int rc = drk_ptx_read(text, size, &p, err, sizeof err);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  compute90.ptx: %s\n", err);
        exit(1);
    }
    CHECK(drk_cubin_read(bin, csize, &c, err, sizeof err) == 0);
    CHECK(p.version_major * 10 + p.version_minor >= 80); /* nvcc 13.0: 9.0 */
    CHECK(p.target == 90 && strcmp(p.target_name, "sm_90") == 0);
    CHECK(p.nkernels == FX_NKERNELS); /* .func _Z6helperf is not one */
    for (size_t i = 0; i < FX_NKERNELS; i++) {
        const fx_kernel *x = &fx_kernels[i];
        const drk_kernel_info *k = find(p.kernels, p.nkernels, x->name);
        CHECK(k != NULL);
        if (!k)
            continue;
        CHECK(k->nparams == x->nparams && k->params_size == x->params_size);
        for (uint32_t j = 0; j < x->nparams && j < k->nparams; j++) {
            CHECK(k->params[j].offset == x->params[j].offset && k->params[j].size == x->params[j].size);
            /* nvcc declares pointers as plain .u64: unknown, not a scalar */
            if (x->params[j].pointer)
                CHECK(k->params[j].kind == DRK_PARAM_KIND_UNKNOWN);
        }
        CHECK(k->max_threads == x->max_threads);
        CHECK(k->regs == DRK_UNKNOWN_U32 && k->shared_bytes == DRK_UNKNOWN_U32 && k->const_bytes == DRK_UNKNOWN_U32);
        check_same_layout(k, find(c.kernels, c.nkernels, x->name));
    }
    /* char, short, double, __half: scalars by their PTX types */
    const drk_kernel_info *g = find(p.kernels, p.nkernels, "_Z4gapsc3Gaps4Wided6__halfPf");
    if (g && g->nparams == 7) {
        CHECK(g->params[0].kind == DRK_PARAM_SCALAR && g->params[2].kind == DRK_PARAM_SCALAR);
        CHECK(g->params[4].kind == DRK_PARAM_SCALAR && g->params[5].kind == DRK_PARAM_SCALAR);
        CHECK(g->params[1].align_log2 == 3 && g->params[3].align_log2 == 4 && g->params[5].align_log2 == 1);
    }
    /* Every truncation: an error or a result, never a read past len. */
    for (size_t n = 0; n < size; n += (n < 2048 ? 1 : 13)) {
        char *cut = malloc(n ? n : 1);
        memcpy(cut, text, n);
        drk_ptx q;
        if (drk_ptx_read(cut, n, &q, err, sizeof err) == 0)
            drk_ptx_free(&q);
        free(cut);
    }
    drk_ptx_free(&p);
    drk_cubin_free(&c);
    free(text);
    free(bin);
}

static void test_hand_ptx(void)
{
    size_t size, csize;
    char *text = (char *)check_load(DRK_UNIT_KERNELS_SRC, "hand.ptx", &size);
    unsigned char *bin = check_load(DRK_UNIT_KERNELS, "hand.cubin", &csize);
    char err[256] = "";
    drk_ptx p;
    drk_cubin c;
    CHECK(drk_is_ptx(text, size));
    int rc = drk_ptx_read(text, size, &p, err, sizeof err);
    CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "  hand.ptx: %s\n", err);
        exit(1);
    }
    CHECK(drk_cubin_read(bin, csize, &c, err, sizeof err) == 0);
    CHECK(p.version_major == 8 && p.version_minor == 0 && p.target == 90);
    CHECK(p.nkernels == 3); /* not the .func, nor the entries in comments */
    CHECK(p.nkernels == 3 && strcmp(p.kernels[0].name, "ptrs") == 0 && strcmp(p.kernels[1].name, "weak_one") == 0 &&
          strcmp(p.kernels[2].name, "plain") == 0);
    for (size_t i = 0; i < p.nkernels; i++)
        check_same_layout(&p.kernels[i], find(c.kernels, c.nkernels, p.kernels[i].name));
    const drk_kernel_info *k = find(p.kernels, p.nkernels, "ptrs");
    CHECK(k && k->nparams == 6 && k->params_size == 66);
    if (k && k->nparams == 6) {
        static const uint32_t off[6] = {0, 8, 16, 32, 56, 64}, sz[6] = {1, 8, 2, 20, 8, 2};
        for (int i = 0; i < 6; i++)
            CHECK(k->params[i].offset == off[i] && k->params[i].size == sz[i]);
        CHECK(k->params[1].kind == DRK_PARAM_POINTER && k->params[1].align_log2 == 3);
        CHECK(k->params[4].kind == DRK_PARAM_POINTER && k->params[4].align_log2 == 3);
        CHECK(k->params[3].kind == DRK_PARAM_SCALAR && k->params[3].align_log2 == 4);
        CHECK(k->reqntid[0] == 64 && k->reqntid[1] == 2 && k->reqntid[2] == 1);
        CHECK(k->maxnreg == 32 && k->max_threads == 0);
    }
    k = find(p.kernels, p.nkernels, "weak_one");
    CHECK(k && k->nparams == 4 && k->params_size == 21 && k->max_threads == 128);
    k = find(p.kernels, p.nkernels, "plain");
    CHECK(k && k->nparams == 0 && k->max_threads == 256 && k->maxnreg == 0);
    drk_ptx_free(&p);
    drk_cubin_free(&c);
    free(text);
    free(bin);
}

/* Reads `text` (without its NUL); returns rc, err filled. */
static int read_text(const char *text, drk_ptx *p, char *err, size_t errlen)
{
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    int rc = drk_ptx_read(copy, n, p, err, errlen);
    free(copy);
    return rc;
}

static void test_inline(void)
{
    char err[256];
    drk_ptx p;
    /* texture handles are 8 bytes; comments and strings inside headers */
    CHECK(read_text(".version 7.0\n.target sm_50, texmode_independent\n"
                    ".entry t(.param .texref tx, /* ) { */ .param .u32 n, .param .samplerref s)\n"
                    "{ .pragma \"}\"; }\n",
                    &p, err, sizeof err) == 0);
    CHECK(p.nkernels == 1 && p.target == 50 && p.kernels[0].nparams == 3 && p.kernels[0].params_size == 24);
    if (p.nkernels == 1 && p.kernels[0].nparams == 3)
        CHECK(p.kernels[0].params[1].offset == 8 && p.kernels[0].params[2].offset == 16);
    drk_ptx_free(&p);
    /* sm_90a; multi-line directives, a prototype without a body */
    CHECK(read_text("// c\n.version 8.8\n.target sm_90a\n.extern .entry proto(.param .b32 a);\n"
                    ".visible .entry k(\n.param .f64 d,\n.param .u8 c\n)\n.maxntid 64,\n 2\n{\n}\n",
                    &p, err, sizeof err) == 0);
    CHECK(p.version_minor == 8 && p.target == 90 && strcmp(p.target_name, "sm_90a") == 0 && p.nkernels == 1);
    if (p.nkernels == 1)
        CHECK(strcmp(p.kernels[0].name, "k") == 0 && p.kernels[0].params_size == 9 && p.kernels[0].max_threads == 128);
    drk_ptx_free(&p);
    /* errors name the line */
    CHECK(read_text(".version 8.0\n.target sm_90\n.entry k(\n.param .v2 .u32 x\n)\n{\n}\n", &p, err, sizeof err) == -1);
    CHECK(strstr(err, "line 4") != NULL);
    CHECK(read_text(".version 8.0\n.entry k(.param .u32 x[0]) {}\n", &p, err, sizeof err) == -1);
    CHECK(read_text(".version 8.0\n/* open\n", &p, err, sizeof err) == -1 && strstr(err, "line 2"));
    CHECK(read_text(".version 8.0\n.entry k() {\n", &p, err, sizeof err) == -1);
    CHECK(read_text(".version 8.0\n.entry k() { .pragma \"x; }\n", &p, err, sizeof err) == -1);
    CHECK(read_text("int main(void) { return 0; }\n", &p, err, sizeof err) == -1);
    CHECK(read_text("", &p, err, sizeof err) == -1);
    CHECK(!drk_is_ptx("hello", 5));
    CHECK(!drk_is_ptx("", 0));
    CHECK(drk_is_ptx("// x\n/* y */\n.version 8.0", 25));
    CHECK(drk_is_ptx("\n.target sm_90", 14));
    CHECK(!drk_is_ptx(".entry", 6));
}

/* The PTX of one kernel: read again, it holds that kernel alone, with the
 * layout the whole module gave it, and the header and helper functions. */
static void test_only_entry(void)
{
    size_t size;
    char *text = (char *)check_load(DRK_UNIT_KERNELS, "compute90.ptx", &size);
    char err[256] = "";
    drk_ptx all;
    CHECK(drk_ptx_read(text, size, &all, err, sizeof err) == 0 && all.nkernels > 1);
    for (size_t i = 0; i < all.nkernels; i++) {
        size_t n = 0;
        char *one = drk_ptx_only_entry(text, size, all.kernels[i].name, &n);
        CHECK(one != NULL && n < size && strlen(one) == n);
        if (!one)
            continue;
        drk_ptx p;
        CHECK(drk_ptx_read(one, n, &p, err, sizeof err) == 0);
        CHECK(p.nkernels == 1 && strcmp(p.kernels[0].name, all.kernels[i].name) == 0);
        if (p.nkernels == 1)
            check_same_layout(&p.kernels[0], &all.kernels[i]);
        CHECK(p.target == all.target && strstr(one, ".version") && strstr(one, ".func"));
        drk_ptx_free(&p);
        free(one);
    }
    drk_ptx_free(&all);
    size_t n;
    CHECK(drk_ptx_only_entry(text, size, "no_such_kernel", &n) == NULL);
    free(text);

    /* Braces and ".entry" inside comments and strings, a declaration, a
     * function in between: only real entries go. */
    static const char tricky[] =
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        "// .entry fake { not one }\n"
        ".visible .entry a(.param .u64 p) /* { */ { ret; }\n"
        ".extern .func (.param .b32 r) g(.param .b32 x);\n"
        ".weak .entry b(.param .u32 q);\n"
        ".func h() { // }\n ret; }\n"
        ".visible .entry c() { ret; }\n";
    char *one = drk_ptx_only_entry(tricky, sizeof tricky - 1, "c", &n);
    CHECK(one && strstr(one, "// .entry fake { not one }") && !strstr(one, ".entry a") && !strstr(one, ".entry b") &&
          strstr(one, ".func h()") && strstr(one, ".extern .func") && strstr(one, ".visible .entry c()") &&
          strstr(one, ".address_size 64"));
    free(one);
    CHECK(drk_ptx_only_entry(tricky, sizeof tricky - 1, "b", &n) == NULL); /* a declaration has no body */
    CHECK(drk_ptx_only_entry(tricky, 60, "c", &n) == NULL);                 /* cut short */
}

int main(void)
{
    test_nvcc_ptx();
    test_only_entry();
    test_hand_ptx();
    test_inline();
    return CHECK_DONE();
}
