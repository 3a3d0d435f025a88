/* Variant sources (evolve/source.h) on the stand-in driver: the PTX drk
 * keeps at load (for an evolvable kernel, not for one using a module
 * global, one without PTX for the device, or a SASS-only one; one copy per
 * text; the cap), the PTX source's knobs and reasons, every PTX variant of
 * a kernel built with exactly its options (registers seen, unloads
 * balanced, never-passed options absent), a failing build with its log,
 * the attribute source on a function, and what loading a module's image
 * again takes (drk_images_again_of). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/jitlink.h"
#include "evolve/loaded.h"
#include "evolve/source.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/unit/check.h"

static drk_driver table;

static void fill(void)
{
#define FILL_(member, name, params) table.member = (__typeof__(table.member))dlsym(RTLD_DEFAULT, #name);
    DRK_DRIVER_ENTRIES(FILL_)
#undef FILL_
}

#define HEAD ".version 8.0\n.target sm_90\n.address_size 64\n\n"

/* Evolvable: pointers through cvta, nothing else. `empty` declares its block. */
static const char ptx_a[] = HEAD
    ".visible .entry vec_add(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\t.reg .f32 %f<4>;\n\t.reg .b64 %rd<11>;\n"
    "\tld.param.u64 %rd1, [a];\n\tld.param.u64 %rd2, [b];\n\tld.param.u64 %rd3, [c];\n\tld.param.u32 %r2, [n];\n"
    "\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %ntid.x;\n\tmov.u32 %r5, %tid.x;\n"
    "\tmad.lo.s32 %r1, %r3, %r4, %r5;\n\tsetp.ge.s32 %p1, %r1, %r2;\n\t@%p1 bra DONE;\n"
    "\tcvta.to.global.u64 %rd4, %rd1;\n\tcvta.to.global.u64 %rd5, %rd2;\n\tcvta.to.global.u64 %rd6, %rd3;\n"
    "\tmul.wide.s32 %rd7, %r1, 4;\n\tadd.s64 %rd8, %rd4, %rd7;\n\tld.global.f32 %f1, [%rd8];\n"
    "\tadd.s64 %rd9, %rd5, %rd7;\n\tld.global.f32 %f2, [%rd9];\n\tadd.f32 %f3, %f1, %f2;\n"
    "\tadd.s64 %rd10, %rd6, %rd7;\n\tst.global.f32 [%rd10], %f3;\nDONE:\n\tret;\n}\n\n"
    ".visible .entry empty()\n.maxntid 128, 1, 1\n{\n\tret;\n}\n";

/* Not evolvable: reads a module global. */
static const char ptx_global[] = HEAD
    ".global .align 4 .f32 bias;\n\n"
    ".visible .entry fill(.param .u64 x, .param .f32 v, .param .u32 n)\n{\n"
    "\t.reg .f32 %f<3>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [x];\n\tld.global.f32 %f2, [bias];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.f32 [%rd2], %f2;\n\tret;\n}\n";

/* No PTX an sm_90 device can JIT. */
static const char ptx_newer[] = ".version 8.8\n.target sm_100\n.address_size 64\n\n"
    ".visible .entry later()\n{\n\tret;\n}\n";

/* Evolvable, another text: for the cap. */
static const char ptx_other[] = HEAD ".visible .entry scale(.param .u64 x, .param .f32 s, .param .u32 n)\n{\n"
    "\t.reg .f32 %f<3>;\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [x];\n\tld.param.f32 %f1, [s];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tld.global.f32 %f2, [%rd2];\n\tmul.f32 %f2, %f2, %f1;\n"
    "\tst.global.f32 [%rd2], %f2;\n\tret;\n}\n";

static int contains(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static drk_source_kernel kernel_of(uintptr_t owner, const char *name)
{
    return (drk_source_kernel){name, drk_images_facts(owner, name, 0), drk_images_ptx(owner, name), 0};
}

static void test_kept(void)
{
    drk_images_set_sm(90);
    /* Off by default: nothing kept. */
    CHECK(drk_images_loaded(0x101, "cuModuleLoadData", ptx_a, NULL) == 2); /* both JIT-compiled by the driver */
    CHECK(drk_images_facts(0x101, "vec_add", 0) && drk_images_ptx(0x101, "vec_add") == NULL);

    drk_images_keep_ptx(DRK_IMAGES_PTX_CAP);
    drk_images_loaded(0x102, "cuModuleLoadData", ptx_a, NULL);
    const drk_ptx_text *p = drk_images_ptx(0x102, "vec_add");
    CHECK(p && p->len == strlen(ptx_a) && strcmp(p->text, ptx_a) == 0);
    unsigned char d[DRK_SHA256_BYTES];
    drk_sha256(ptx_a, strlen(ptx_a), d);
    CHECK(p && memcmp(p->sha256, d, sizeof d) == 0);
    /* One copy for the module's kernels, and for a second load of the text. */
    CHECK(drk_images_ptx(0x102, "empty") == p);
    drk_images_loaded(0x103, "cuModuleLoadDataEx", ptx_a, NULL);
    CHECK(drk_images_ptx(0x103, "vec_add") == p);
    drk_images_stats s = drk_images_stats_get();
    CHECK(s.ptx_kept == 1 && s.ptx_kept_bytes == strlen(ptx_a));
    /* Kept past the owner's unload for whoever holds it; not found by it. */
    drk_images_unloaded(0x103);
    CHECK(drk_images_ptx(0x103, "vec_add") == NULL && strcmp(p->text, ptx_a) == 0);

    /* A module global, PTX for a newer device only: not kept. */
    drk_images_loaded(0x104, "cuModuleLoadData", ptx_global, NULL);
    const drk_image_facts *f = drk_images_facts(0x104, "fill", 0);
    CHECK(f && f->flow && !f->flow->evolvable && (f->flow->flags & DRK_FLOW_MODULE_GLOBALS));
    CHECK(drk_images_ptx(0x104, "fill") == NULL);
    drk_images_loaded(0x105, "cuModuleLoadData", ptx_newer, NULL);
    f = drk_images_facts(0x105, "later", 0);
    CHECK(f && !f->ptx_for_device && drk_images_ptx(0x105, "later") == NULL);
    CHECK(drk_images_stats_get().ptx_kept == 1);
#ifdef DRK_UNIT_IMAGES
    /* SASS only: nothing to rebuild from. */
    drk_images_loaded(0x106, "cuModuleLoad", NULL, DRK_UNIT_IMAGES "/sm90.cubin");
    drk_image img;
    char err[160];
    drk_image_options opt = {90, 0};
    CHECK(drk_image_read_file(DRK_UNIT_IMAGES "/sm90.cubin", &opt, &img, err, sizeof err) == 0 && img.nkernels);
    for (size_t i = 0; i < img.nkernels; i++) {
        f = drk_images_facts(0x106, img.kernels[i].info.name, 0);
        CHECK(f && !f->ptx_for_device && drk_images_ptx(0x106, img.kernels[i].info.name) == NULL);
    }
    drk_image_free(&img);
#endif

    /* The cap: a text past it is not kept, and said so once. */
    drk_images_keep_ptx(s.ptx_kept_bytes + 10);
    drk_images_loaded(0x107, "cuModuleLoadData", ptx_other, NULL);
    CHECK(drk_images_ptx(0x107, "scale") == NULL);
    s = drk_images_stats_get();
    CHECK(s.ptx_kept == 1 && s.ptx_over_cap == 1);
    drk_images_keep_ptx(DRK_IMAGES_PTX_CAP);
    drk_images_loaded(0x108, "cuModuleLoadData", ptx_other, NULL);
    CHECK(drk_images_ptx(0x108, "scale") != NULL && drk_images_stats_get().ptx_kept == 2);
}

static void test_applies(void)
{
    char why[200];
    drk_source_kernel k = kernel_of(0x102, "vec_add");
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 1);
    k.cooperative = 1;
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 0 && contains(why, "cooperatively"));
    k = kernel_of(0x101, "vec_add"); /* loaded while keeping was off */
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 0 && contains(why, "not kept"));
    k = kernel_of(0x104, "fill");
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 0 && contains(why, "not evolvable") &&
          contains(why, "global"));
    k = kernel_of(0x105, "later");
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 0 && contains(why, "no PTX the device can JIT"));
    drk_image_facts sass = {.nsass = 1, .sass = {90}};
    k = (drk_source_kernel){"sass_only", &sass, NULL, 0};
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 0 && contains(why, "SASS only"));
    k.facts = NULL;
    CHECK(drk_source_ptx.applies(&k, why, sizeof why) == 0 && contains(why, "no image facts"));
    /* Attributes: every kernel, SASS only too, but not a cooperative one. */
    k = (drk_source_kernel){"sass_only", &sass, NULL, 0};
    CHECK(drk_source_attr.applies(&k, why, sizeof why) == 1);
    k.cooperative = 1;
    CHECK(drk_source_attr.applies(&k, why, sizeof why) == 0 && contains(why, "cooperatively"));

    /* Knobs: index 0 the driver's default; which ones rebuild. */
    const drk_source *s = &drk_source_ptx;
    CHECK(s->nknobs == 5 && strcmp(s->knobs[0].name, "max_registers") == 0 && s->knobs[0].nvalues == 11 &&
          s->knobs[0].values[10] == 255 && s->knobs[3].values[0] == 4 && s->knobs[3].values[1] == 3);
    CHECK(drk_source_variants(s) == 11 * 2 * 3 * 2 * 3 && drk_source_variants(&drk_source_attr) == 4);
    drk_variant v0 = drk_source_variant_at(s, 0), v = {{5, 0, 1, 1, 0}};
    CHECK(!drk_variant_rebuilds(s, &v0) && drk_variant_rebuilds(s, &v));
    drk_variant carve = {{2}};
    CHECK(!drk_variant_rebuilds(&drk_source_attr, &carve));
    char text[128];
    drk_source_variant_text(s, &v, 256, text, sizeof text);
    CHECK(strcmp(text, "max_registers=64 min_ctas_per_sm=2 opt_level=3") == 0);
    drk_source_variant_text(s, &v0, 0, text, sizeof text);
    CHECK(strcmp(text, "default") == 0);
    drk_variant t = {{0, 1, 0, 0, 0}};
    drk_source_variant_text(s, &t, 0, text, sizeof text);
    CHECK(strcmp(text, "threads_per_block=block") == 0);
    drk_source_variant_text(s, &t, 96, text, sizeof text);
    CHECK(strcmp(text, "threads_per_block=96") == 0);
    /* MIN_CTA is ignored with a budget; a declared block beats a target. */
    k = kernel_of(0x102, "vec_add");
    CHECK(s->redundant(&k, &v) && !s->redundant(&k, &t) && !s->redundant(&k, &v0));
    drk_source_kernel e = kernel_of(0x102, "empty");
    CHECK(e.facts && e.facts->max_threads == 128 && s->redundant(&e, &t));
}

/* No option of the space-separated list starts with a never-passed one. */
static int never_passed(const char *opts)
{
    char copy[512], *save = NULL;
    snprintf(copy, sizeof copy, "%s", opts);
    for (char *o = strtok_r(copy, " ", &save); o; o = strtok_r(NULL, " ", &save))
        for (const char *const *n = drk_source_ptx_never; *n; n++)
            if (strncmp(o, *n, strlen(*n)) == 0 && (o[strlen(*n)] == '\0' || o[strlen(*n)] == '='))
                return 0;
    return 1;
}

static void test_build_ptx(CUcontext ctx)
{
    const drk_source *s = &drk_source_ptx;
    CHECK(fakecuda_set_kernel_resources("vec_add", 100, 0) == 0);
    drk_source_kernel k = kernel_of(0x102, "vec_add");
    drk_build_in in = {&table, ctx, &k, 256, NULL, 90, NULL, 0};
    unsigned long long live = fakecuda_live_modules();
    static const int32_t regs[] = {0, 32, 40, 48, 56, 64, 80, 96, 128, 168, 255};
    static const uintptr_t ctas[] = {0, 2, 4}, cache[] = {0, CU_JIT_CACHE_OPTION_CG, CU_JIT_CACHE_OPTION_CA};
    unsigned built = 0;
    for (uint32_t i = 0; i < drk_source_variants(s); i++) {
        drk_variant v = drk_source_variant_at(s, i);
        drk_built b;
        if (s->build(&in, &v, &b) != 0) {
            fprintf(stderr, "variant %u: %s\n", i, b.why);
            CHECK(0);
            continue;
        }
        built++;
        CHECK(b.module && b.fn && b.rc == CUDA_SUCCESS && b.jit_ms >= 0 && contains(b.log, "compiled"));
        CHECK(fakecuda_live_modules() == live + 1);
        /* Exactly: the device and the info log, then each knob off its
         * default as ptxas takes it. */
        char want[256], got[512];
        int w = snprintf(want, sizeof want, "-arch=sm_90 -verbose");
        if (v.k[0])
            w += snprintf(want + w, sizeof want - (size_t)w, " -maxrregcount=%d", (int)regs[v.k[0]]);
        if (v.k[1] || v.k[2])
            w += snprintf(want + w, sizeof want - (size_t)w, " -Xptxas=--maxntid=256");
        if (v.k[2])
            w += snprintf(want + w, sizeof want - (size_t)w, " -Xptxas=--minnctapersm=%d", (int)ctas[v.k[2]]);
        if (v.k[3])
            w += snprintf(want + w, sizeof want - (size_t)w, " -Xptxas=-O2");
        if (v.k[4])
            snprintf(want + w, sizeof want - (size_t)w, " -Xptxas=-dlcm=%s",
                     cache[v.k[4]] == CU_JIT_CACHE_OPTION_CG ? "cg" : "ca");
        CHECK(fakecuda_jitlink_last_options(got, sizeof got) == 0);
        if (strcmp(got, want) != 0)
            fprintf(stderr, "variant %u: options \"%s\", want \"%s\"\n", i, got, want);
        CHECK(strcmp(got, want) == 0 && never_passed(got));
        /* The cubin is loaded with no JIT options: nothing to compile. */
        CUjit_option jo[4];
        unsigned long long jv[4];
        CHECK(fakecuda_module_jit_options(b.module, jo, jv, 4) == 0);
        int r = 0;
        CHECK(table.func_get_attribute(&r, CU_FUNC_ATTRIBUTE_NUM_REGS, b.fn) == CUDA_SUCCESS);
        int budget = v.k[0] ? regs[v.k[0]] : 0;
        CHECK(r == (budget && budget < 100 ? budget : 100));
        CHECK(s->unload(&in, &b) == CUDA_SUCCESS && b.module == NULL);
        CHECK(fakecuda_live_modules() == live);
    }
    CHECK(built == drk_source_variants(s));

    /* A compiled cubin handed back, then loaded in place of a compile. */
    drk_variant r56 = {{4}};
    drk_built kb, cb;
    in.keep_cubin = 1;
    CHECK(s->build(&in, &r56, &kb) == 0 && kb.cubin && kb.cubin_len > 0);
    in.keep_cubin = 0;
    in.cubin = kb.cubin;
    fakecuda_fail_jit(CU_JIT_MAX_REGISTERS, 56); /* a compile now would fail */
    CHECK(s->build(&in, &r56, &cb) == 0 && !cb.cubin);
    int cr = 0;
    CHECK(table.func_get_attribute(&cr, CU_FUNC_ATTRIBUTE_NUM_REGS, cb.fn) == CUDA_SUCCESS && cr == 56);
    fakecuda_fail_jit((CUjit_option)-1, 0);
    in.cubin = NULL;
    free(kb.cubin);
    CHECK(s->unload(&in, &kb) == CUDA_SUCCESS && s->unload(&in, &cb) == CUDA_SUCCESS);
    CHECK(fakecuda_live_modules() == live);
    CUcontext cur = NULL;
    CHECK(table.ctx_get_current(&cur) == CUDA_SUCCESS && cur == NULL); /* pushed and popped */

    /* A failing build: the JIT's log in words, nothing left loaded. */
    fakecuda_fail_jit(CU_JIT_MAX_REGISTERS, 40);
    drk_variant v = {{2}};
    drk_built b;
    CHECK(s->build(&in, &v, &b) == -1 && b.rc == CUDA_ERROR_INVALID_PTX && !b.module);
    CHECK(contains(b.why, "nvJitLink") && contains(b.why, "nvJitLinkComplete") && contains(b.why, "ptxas fatal") &&
          contains(b.why, "planted"));
    CHECK(fakecuda_live_modules() == live);
    fakecuda_fail_jit((CUjit_option)-1, 0);
    /* A block-dependent knob needs the block; a kernel it does not apply to is refused. */
    in.block_threads = 0;
    drk_variant tb = {{0, 1}};
    CHECK(s->build(&in, &tb, &b) == -1 && contains(b.why, "block"));
    drk_source_kernel g = kernel_of(0x104, "fill");
    drk_build_in gin = {&table, ctx, &g, 256, NULL, 90, NULL, 0};
    CHECK(s->build(&gin, &v, &b) == -1 && contains(b.why, "does not apply"));
    CHECK(fakecuda_live_modules() == live);
}

static void test_attr(void)
{
    const drk_source *s = &drk_source_attr;
    CUmodule m;
    CUfunction fn;
    CHECK(cuModuleLoadData(&m, "DRKFAKE1\nvec_add\n") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&fn, m, "vec_add") == CUDA_SUCCESS);
    unsigned long long live = fakecuda_live_modules();
    drk_source_kernel k = {"vec_add", NULL, NULL, 0};
    drk_build_in in = {&table, NULL, &k, 256, fn, 90, NULL, 0};
    static const int want[] = {-1, 25, 50, 100};
    for (uint32_t i = 0; i < drk_source_variants(s); i++) {
        drk_variant v = drk_source_variant_at(s, i);
        drk_built b;
        CHECK(s->build(&in, &v, &b) == 0 && b.fn == fn && b.module == NULL);
        int c = 7;
        CHECK(cuFuncGetAttribute(&c, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fn) == CUDA_SUCCESS);
        CHECK(c == want[i]);
        CHECK(fakecuda_live_modules() == live); /* loads nothing */
        CHECK(s->unload(&in, &b) == CUDA_SUCCESS);
        CHECK(cuFuncGetAttribute(&c, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fn) == CUDA_SUCCESS &&
              c == -1);
    }
    for (unsigned i = 0; i < s->knobs[0].nvalues; i++)
        CHECK(s->knobs[0].values[i] != 0); /* all-L1 is never tried */
    drk_built b;
    drk_variant v = {{1}};
    in.fn = NULL;
    CHECK(s->build(&in, &v, &b) == -1 && contains(b.why, "no function"));
    in.fn = (CUfunction)m; /* not a function: the driver's answer, in words */
    CHECK(s->build(&in, &v, &b) == -1 && b.rc == CUDA_ERROR_INVALID_HANDLE && contains(b.why, "cuFuncSetAttribute"));
    CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
}

/* What loading a module again takes (drk_images_again_of): its image byte
 * for byte and the options that shape its code, kept only with PTX kept
 * for one of its kernels and within the cap; a library's is the driver's. */
static void test_again(void)
{
    drk_images_keep_ptx(DRK_IMAGES_PTX_CAP);
    drk_images_stats s0 = drk_images_stats_get();
    char info[64], err[64];
    CUjit_option o[] = {CU_JIT_MAX_REGISTERS,   CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                        CU_JIT_THREADS_PER_BLOCK, CU_JIT_WALL_TIME,     CU_JIT_ERROR_LOG_BUFFER,
                        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE, CU_JIT_CACHE_MODE};
    void *v[] = {(void *)(uintptr_t)64, info, (void *)(uintptr_t)sizeof info, (void *)(uintptr_t)128, NULL, err,
                 (void *)(uintptr_t)sizeof err, (void *)(uintptr_t)1, (void *)(uintptr_t)CU_JIT_CACHE_OPTION_CG};
    drk_images_load ld = {0, 9, o, v};
    drk_images_loaded_ex(0x201, "cuModuleLoadDataEx", ptx_a, NULL, &ld);
    drk_images_again a, b;
    CHECK(drk_images_again_of(0x201, &a) == 0 && !a.library && a.why[0] == 0);
    CHECK(a.image && a.size == strlen(ptx_a) && memcmp(a.image, ptx_a, a.size) == 0 &&
          ((char *)a.image)[a.size] == 0);
    /* The code-shaping ones, in order, as passed; no log, no wall time. */
    CHECK(a.nopts == 3 && a.opts[0] == CU_JIT_MAX_REGISTERS && a.vals[0] == (void *)(uintptr_t)64 &&
          a.opts[1] == CU_JIT_THREADS_PER_BLOCK && a.vals[1] == (void *)(uintptr_t)128 &&
          a.opts[2] == CU_JIT_CACHE_MODE && a.vals[2] == (void *)(uintptr_t)CU_JIT_CACHE_OPTION_CG);
    /* Each caller its own copy. */
    CHECK(drk_images_again_of(0x201, &b) == 0 && b.image && b.image != a.image);
    drk_images_again_free(&b);
    CHECK(b.image == NULL);
    drk_images_stats s = drk_images_stats_get();
    CHECK(s.images_kept == s0.images_kept + 1 && s.images_kept_bytes == s0.images_kept_bytes + strlen(ptx_a));
    /* A handle value reused after an unload drk missed: the old copy goes. */
    drk_images_loaded(0x201, "cuModuleLoadData", ptx_a, NULL);
    s = drk_images_stats_get();
    CHECK(s.images_kept == s0.images_kept + 1 && s.images_kept_bytes == s0.images_kept_bytes + strlen(ptx_a));
    CHECK(drk_images_again_of(0x201, &b) == 0 && b.nopts == 0 && b.size == strlen(ptx_a));
    drk_images_again_free(&b);
    /* Unloaded: none, and its bytes back under the cap; a copy handed out stays whole. */
    drk_images_unloaded(0x201);
    CHECK(drk_images_again_of(0x201, &b) == -1 && contains(b.why, "no image") && !b.image);
    s = drk_images_stats_get();
    CHECK(s.images_kept == s0.images_kept && s.images_kept_bytes == s0.images_kept_bytes);
    CHECK(memcmp(a.image, ptx_a, a.size) == 0);
    drk_images_again_free(&a);
    CHECK(drk_images_again_of(0x2ff, &b) == -1 && contains(b.why, "no image"));
    CHECK(drk_images_again_of(0, &b) == -1);

    /* A library: the driver keeps its image; its options are not looked at. */
    CUjit_option fast = CU_JIT_FAST_COMPILE;
    void *one = (void *)(uintptr_t)1;
    drk_images_load lib = {1, 1, &fast, &one};
    drk_images_loaded_ex(0x202, "cuLibraryLoadData", ptx_a, NULL, &lib);
    CHECK(drk_images_again_of(0x202, &b) == 0 && b.library == 1 && b.image == NULL && b.size == 0);
    drk_images_unloaded(0x202);
    CHECK(drk_images_again_of(0x202, &b) == -1);

    /* An option drk does not repeat; more options than it holds. */
    drk_images_load bad = {0, 1, &fast, &one};
    drk_images_loaded_ex(0x203, "cuModuleLoadDataEx", ptx_a, NULL, &bad);
    CHECK(drk_images_again_of(0x203, &b) == -1 && contains(b.why, "JIT option 16") &&
          contains(b.why, "does not repeat") && !b.image);
    CUjit_option many[DRK_IMAGES_AGAIN_OPTS + 1];
    void *manyv[DRK_IMAGES_AGAIN_OPTS + 1];
    for (unsigned i = 0; i <= DRK_IMAGES_AGAIN_OPTS; i++)
        many[i] = CU_JIT_MAX_REGISTERS, manyv[i] = (void *)(uintptr_t)64;
    drk_images_load lots = {0, DRK_IMAGES_AGAIN_OPTS + 1, many, manyv};
    drk_images_loaded_ex(0x204, "cuModuleLoadDataEx", ptx_a, NULL, &lots);
    CHECK(drk_images_again_of(0x204, &b) == -1 && contains(b.why, "more than drk repeats"));
    /* No kernel with PTX kept (a module global); keeping off. */
    drk_images_loaded(0x205, "cuModuleLoadData", ptx_global, NULL);
    CHECK(drk_images_again_of(0x205, &b) == -1 && contains(b.why, "none of its kernels had PTX kept"));
    drk_images_keep_ptx(0);
    drk_images_loaded(0x206, "cuModuleLoadData", ptx_a, NULL);
    CHECK(drk_images_again_of(0x206, &b) == -1 && contains(b.why, "keeping is off"));
    /* Past the cap: not kept, and the cap is where it was. */
    s = drk_images_stats_get();
    drk_images_keep_ptx(s.ptx_kept_bytes + s.images_kept_bytes + strlen(ptx_a) - 1);
    drk_images_loaded(0x207, "cuModuleLoadData", ptx_a, NULL);
    CHECK(drk_images_again_of(0x207, &b) == -1 && contains(b.why, "cap"));
    drk_images_keep_ptx(DRK_IMAGES_PTX_CAP);
    CHECK(drk_images_stats_get().images_kept_bytes == s.images_kept_bytes);
    for (uintptr_t o2 = 0x203; o2 <= 0x207; o2++)
        drk_images_unloaded(o2);

#ifdef DRK_UNIT_IMAGES
    /* A file: its bytes; a fatbin, and one behind a wrapper: its container. */
    size_t n;
    unsigned char *ptx = check_load(DRK_UNIT_IMAGES, "c90.ptx", &n);
    drk_images_loaded(0x208, "cuModuleLoad", NULL, DRK_UNIT_IMAGES "/c90.ptx");
    CHECK(drk_images_ptx(0x208, "_Z4axpyPfPKffi") != NULL);
    CHECK(drk_images_again_of(0x208, &b) == 0 && b.size == n && memcmp(b.image, ptx, n) == 0);
    drk_images_again_free(&b);
    free(ptx);
    unsigned char *fat = check_load(DRK_UNIT_IMAGES, "two.fatbin", &n);
    drk_images_loaded(0x209, "cuModuleLoadData", fat, NULL);
    CHECK(drk_images_again_of(0x209, &b) == 0 && b.size == n && memcmp(b.image, fat, n) == 0);
    drk_images_again_free(&b);
    struct {
        uint32_t magic, version;
        const void *data, *extra;
    } wrapper = {0x466243B1u, 1, fat, NULL};
    drk_images_loaded(0x20a, "cuModuleLoadFatBinary", &wrapper, NULL);
    CHECK(drk_images_again_of(0x20a, &b) == 0 && b.size == n && memcmp(b.image, fat, n) == 0);
    drk_images_again_free(&b);
    /* SASS only: no PTX kept, no image. */
    drk_images_loaded(0x20b, "cuModuleLoad", NULL, DRK_UNIT_IMAGES "/sm90.cubin");
    CHECK(drk_images_again_of(0x20b, &b) == -1 && contains(b.why, "none of its kernels had PTX kept"));
    for (uintptr_t o2 = 0x208; o2 <= 0x20b; o2++)
        drk_images_unloaded(o2);
    free(fat);
#endif
    s = drk_images_stats_get();
    CHECK(s.images_kept == s0.images_kept && s.images_kept_bytes == s0.images_kept_bytes);
}

int main(void)
{
    fill();
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CUdevice dev;
    CUcontext ctx = NULL;
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    Dl_info self;
    CHECK(dladdr((void *)cuInit, &self) && self.dli_fname); /* the stand-in's nvJitLink is in its library */
    drk_jitlink_configure(self.dli_fname, "");
    test_kept();
    test_applies();
    test_build_ptx(ctx);
    test_attr();
    test_again();
    CHECK(cuDevicePrimaryCtxRelease(dev) == CUDA_SUCCESS);
    return CHECK_DONE();
}
