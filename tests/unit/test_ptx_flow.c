/* The PTX data-flow analysis (evolve/image/ptx_flow.h): every parameter
 * word's class and the kernel's flags, exactly, on nvcc's PTX for
 * flow/flow.cu, on hand-written PTX (flow/triton.ptx in Triton's form,
 * flow/hand.ptx for generic addressing and the rules' edges), through the
 * image reader (PTX alone, and PTX beside SASS in a fatbin), on texts made
 * to be hard (truncated, mismatched, huge, costly, odd tokens), and its time
 * on flow/big.cu's PTX, printed. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evolve/image/image.h"
#include "evolve/image/ptx.h"
#include "evolve/image/ptx_flow.h"
#include "tests/unit/check.h"

enum {
    LOADS = DRK_FLOW_LOADS_POINTERS,
    STORES = DRK_FLOW_STORES_POINTERS,
    GLOBALS = DRK_FLOW_MODULE_GLOBALS,
    PRINTF = DRK_FLOW_PRINTF,
    COOP = DRK_FLOW_COOPERATIVE,
    UNKNOWN = DRK_FLOW_CALLS_UNKNOWN,
    INDIRECT = DRK_FLOW_INDIRECT,
    HANDLES = DRK_FLOW_HANDLES,
    PADDR = DRK_FLOW_PARAM_ADDRESS,
    UNPARSED = DRK_FLOW_UNPARSED,
    CALLS = DRK_FLOW_CALLS,
    TRAPS = DRK_FLOW_TRAPS,
};

typedef struct expect {
    const char *kernel;
    const char *words;  /* a letter per word: P pointer, v value, - unused */
    uint32_t flags;     /* exactly */
    const char *reason; /* in the reason; NULL: evolvable */
    const char *needle; /* in the kernel's PTX, so the case tests what it says; NULL: none */
} expect;

/* flow/flow.cu, as nvcc -ptx -arch=compute_90 compiles it. */
static const expect nvcc_cases[] = {
    {"vadd", "PPPv", 0, NULL, "cvta.to.global"},
    {"saxpy", "vvPP", 0, NULL, "fma.rn.f32"},
    {"inplace", "Pv", 0, NULL, NULL},
    {"pair", "PPv", 0, NULL, "[pair_param_0+8]"},
    {"table", "Pv", LOADS, "loads pointers from memory: `ld.global.f32", "ld.global.u64"},
    {"list", "PP", LOADS, "loads pointers from memory", "[%rd5+8]"},
    {"device_var", "P", GLOBALS, "uses module global `flow_counter`", "atom.global.add.u32"},
    {"const_array", "P", GLOBALS, "uses module global `flow_weights`", "ld.const"},
    {"print", "P", PRINTF | GLOBALS, "device printf", "vprintf"},
    {"grid_sync", "P", COOP | TRAPS, "grid sync (cooperative launch): reads `%envreg", "%envreg"},
    {"atomics", "PPv", 0, NULL, "atom.global.add.f32"},
    {"noinline", "PPPv", CALLS, NULL, "call.uni"},
    {"index64", "Pvv", 0, NULL, "mul.lo.s64"},
    {"ldg", "PP", 0, NULL, "ld.global.nc.f32"},
    {"vec4", "PP", 0, NULL, "ld.global.v4.f32"},
    {"shared_size", "Pv", 0, NULL, "st.shared.f32"},
    {"unused_ptr", "P-v", 0, NULL, NULL},
    {"gather", "PPP", 0, NULL, "shl.b64"},
    {"byte_offset", "PPv", 0, NULL, "ld.global.u8"},
    {"select_ptr", "PPv", 0, NULL, "selp.b64"},
    {"store_ptr", "PPv", STORES, "stores a pointer to memory", "st.global.u64"},
    {"fn_pointer", "Pv", INDIRECT, "takes the address of function `_Z6thricef`", NULL},
    {"device_malloc", "P", UNKNOWN | UNPARSED, "calls `malloc`, which is not in the module", "malloc"},
    {"texture", "PP", HANDLES, "uses a texture, surface or tensor map", "tex.1d"},
    {"dynamic_index", "vvvvv", LOADS, "loads pointers from memory", "ld.local.u64"},
    {"grid_constant", "----v", PADDR | UNPARSED, "takes the address of parameter `grid_constant_param_0`",
     "mov.b64"},
};

static const expect triton_cases[] = {
    {"add_kernel", "PPPv-", 0, NULL, "ld.global.L1::evict_last.L2::cache_hint.v4.b32"},
    {"sum_kernel", "PPvv-", 0, NULL, "st.shared.b32"},
};

static const expect hand_cases[] = {
    {"generic_copy", "PPv", 0, NULL, "ld.u32 %r3, [%rd4]"},
    {"pointer_diff", "PP", 0, NULL, "sub.s64"},
    {"recursion", "PvP", CALLS, NULL, NULL},
    {"async_copy", "PPPv", 0, NULL, "cp.async.cg.shared.global"},
    {"cas_pointer", "PP", STORES, "stores a pointer to memory: `atom.global.cas.b64", NULL},
    {"absolute", "P", UNPARSED, "cannot follow: an address traced to no parameter: `ld.global.u32", NULL},
    {"shifted", "v", UNPARSED, "cannot follow: an address traced to no parameter: `st.u32 [%rd3], 0`", NULL},
    {"halves", "P", 0, NULL, NULL},
    {"branch_table", "vP", INDIRECT, "an indirect branch: `brx.idx", NULL},
    {"param_address", "--v", PADDR | UNPARSED, "takes the address of parameter `pa_s`", NULL},
    {"extern_call", "v", UNKNOWN, "calls `unknown_fn`, which is not in the module", NULL},
    {"via_shared", "v", LOADS, "loads pointers from memory", NULL},
    {"vector_param", "vP", 0, NULL, NULL},
    {"generic_shared", "v", 0, NULL, NULL},
};

/* ------------------------------------------------------------ helpers */

typedef struct module {
    char *text;
    size_t size;
    drk_ptx ptx;
    drk_ptx_flow **flows;
} module;

static int read_module(char *text, size_t size, module *m)
{
    char err[256] = "";
    m->text = text;
    m->size = size;
    m->flows = NULL;
    if (drk_ptx_read(text, size, &m->ptx, err, sizeof err) != 0) {
        fprintf(stderr, "  drk_ptx_read: %s\n", err);
        return -1;
    }
    m->flows = drk_ptx_flows(text, size, &m->ptx);
    CHECK(m->flows != NULL);
    return m->flows ? 0 : -1;
}

static void load_module(const char *dir, const char *name, module *m)
{
    size_t size;
    char *text = (char *)check_load(dir, name, &size);
    if (read_module(text, size, m)) {
        fprintf(stderr, "  %s/%s cannot be analysed\n", dir, name);
        exit(1);
    }
}

static void free_module(module *m)
{
    drk_ptx_flows_free(m->flows, m->ptx.nkernels);
    drk_ptx_free(&m->ptx);
    free(m->text);
}

static const drk_ptx_flow *flow_of(const module *m, const char *kernel)
{
    for (size_t i = 0; i < m->ptx.nkernels; i++)
        if (strcmp(m->ptx.kernels[i].name, kernel) == 0)
            return m->flows[i];
    return NULL;
}

static void words_of(const drk_ptx_flow *f, char *out, size_t n)
{
    size_t i = 0;
    for (; f && i < f->nwords && i + 1 < n; i++)
        out[i] = f->words[i].cls == DRK_FLOW_POINTER ? 'P' : f->words[i].cls == DRK_FLOW_VALUE ? 'v' : '-';
    out[i] = 0;
}

/* The text of `kernel`'s .entry, from its name to the "\n}" that ends it. */
static int body_has(const module *m, const char *kernel, const char *needle)
{
    char head[160];
    snprintf(head, sizeof head, ".entry %s(", kernel);
    char *copy = malloc(m->size + 1);
    memcpy(copy, m->text, m->size);
    copy[m->size] = 0;
    const char *b = strstr(copy, head), *e = b ? strstr(b, "\n}") : NULL;
    int found = 0;
    if (b && e) {
        const char *at = strstr(b, needle);
        found = at && at < e;
    }
    free(copy);
    return found;
}

static void check_cases(const module *m, const char *file, const expect *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const expect *x = &cases[i];
        const drk_ptx_flow *f = flow_of(m, x->kernel);
        char words[256];
        words_of(f, words, sizeof words);
        int ok = f && strcmp(words, x->words) == 0 && f->flags == x->flags && f->evolvable == !x->reason &&
                 (x->reason ? strstr(f->reason, x->reason) != NULL : f->reason[0] == 0) &&
                 (!x->needle || body_has(m, x->kernel, x->needle));
        if (!ok) {
            fprintf(stderr, "%s %s: words %s (want %s), flags 0x%x (want 0x%x), %s: \"%s\"%s\n", file, x->kernel,
                    words, x->words, f ? f->flags : 0, x->flags, f && f->evolvable ? "evolvable" : "not",
                    f ? f->reason : "(no flow)",
                    x->needle && !body_has(m, x->kernel, x->needle) ? " (its PTX lacks the needle)" : "");
            check_failures++;
        }
    }
}

/* ------------------------------------------------------------ fixtures */

static void test_nvcc(void)
{
    module m;
    load_module(DRK_UNIT_FLOW, "flow.ptx", &m);
    CHECK(m.ptx.nkernels == sizeof nvcc_cases / sizeof nvcc_cases[0]);
    check_cases(&m, "flow.ptx", nvcc_cases, sizeof nvcc_cases / sizeof nvcc_cases[0]);
    /* The layout of a by-value struct: {a, b, n} in 24 bytes, word by word;
     * scalars of 4 bytes are one word each. */
    const drk_ptx_flow *p = flow_of(&m, "pair"), *s = flow_of(&m, "saxpy");
    CHECK(p && p->nwords == 3);
    for (uint32_t i = 0; p && i < p->nwords && i < 3; i++)
        CHECK(p->words[i].param == 0 && p->words[i].offset == 8 * i && p->words[i].size == 8);
    CHECK(s && s->nwords == 4);
    if (s && s->nwords == 4) {
        static const uint32_t off[4] = {0, 4, 8, 16}, size[4] = {4, 4, 8, 8};
        for (uint32_t i = 0; i < 4; i++)
            CHECK(s->words[i].param == i && s->words[i].offset == off[i] && s->words[i].size == size[i]);
    }
    /* Every flag and class has a name, and drk_ptx_flow_size counts the words. */
    for (unsigned b = 0; b < DRK_FLOW_NFLAGS; b++)
        CHECK(drk_flow_flag_name(1u << b) != NULL);
    CHECK(!drk_flow_flag_name(0) && !drk_flow_flag_name(3) && !drk_flow_flag_name(1u << DRK_FLOW_NFLAGS));
    CHECK(strcmp(drk_flow_class_name(DRK_FLOW_POINTER), "pointer") == 0 &&
          strcmp(drk_flow_class_name(DRK_FLOW_UNUSED), "unused") == 0);
    CHECK(p && drk_ptx_flow_size(p) == sizeof *p + 3 * sizeof p->words[0]);
    free_module(&m);
}

static void test_hand(void)
{
    module m;
    load_module(DRK_UNIT_FLOW_SRC, "triton.ptx", &m);
    check_cases(&m, "triton.ptx", triton_cases, sizeof triton_cases / sizeof triton_cases[0]);
    free_module(&m);
    load_module(DRK_UNIT_FLOW_SRC, "hand.ptx", &m);
    CHECK(m.ptx.nkernels == sizeof hand_cases / sizeof hand_cases[0]);
    check_cases(&m, "hand.ptx", hand_cases, sizeof hand_cases / sizeof hand_cases[0]);
    free_module(&m);
}

/* The image reader keeps each kernel's flow: from PTX text, and from the
 * PTX beside the SASS of a fatbin (the numbers from SASS, the flow from
 * the PTX). */
static void test_image(void)
{
    static const char *const files[] = {"flow.ptx", "flow.fatbin"};
    for (int fi = 0; fi < 2; fi++) {
        for (unsigned sm = 0; sm <= 90; sm += 90) {
            size_t size;
            unsigned char *bytes = check_load(DRK_UNIT_FLOW, files[fi], &size);
            drk_image img;
            drk_image_options opt = {.sm = sm};
            char err[256];
            CHECK(drk_image_read(bytes, size, &opt, &img, err, sizeof err) == 0);
            const drk_image_kernel *v = drk_image_find(&img, "vadd"), *t = drk_image_find(&img, "table");
            CHECK(v && v->flow && v->flow->evolvable && v->flow->nwords == 4 &&
                  v->flow->words[0].cls == DRK_FLOW_POINTER && v->flow->words[3].cls == DRK_FLOW_VALUE);
            CHECK(t && t->flow && !t->flow->evolvable && (t->flow->flags & DRK_FLOW_LOADS_POINTERS));
            if (fi == 1)
                CHECK(v && v->source == DRK_INFO_SASS);
            for (size_t i = 0; i < img.nkernels; i++)
                CHECK(img.kernels[i].flow != NULL);
            drk_image_free(&img);
            free(bytes);
        }
    }
}

/* ------------------------------------------------------------ hard texts */

/* Analyses `src` (drk_ptx_read must take it); the flow of its first kernel
 * is checked against want_flags (exactly) and a reason substring. */
static void check_text(const char *what, const char *src, uint32_t want_flags, const char *reason,
                       const char *words)
{
    size_t n = strlen(src);
    char *text = malloc(n ? n : 1); /* no NUL: a read past the end shows under ASan */
    memcpy(text, src, n);
    module m;
    if (read_module(text, n, &m)) {
        fprintf(stderr, "%s: not read\n", what);
        check_failures++;
        free(text);
        return;
    }
    const drk_ptx_flow *f = m.ptx.nkernels ? m.flows[0] : NULL;
    char w[128];
    words_of(f, w, sizeof w);
    if (!f || f->flags != want_flags || (reason && !strstr(f->reason, reason)) || (words && strcmp(w, words))) {
        fprintf(stderr, "%s: flags 0x%x (want 0x%x), words %s, \"%s\"\n", what, f ? f->flags : 0, want_flags, w,
                f ? f->reason : "(none)");
        check_failures++;
    }
    free_module(&m);
}

#define HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"

static void test_odd_texts(void)
{
    check_text("empty body", HEAD ".entry k() { }", 0, NULL, "");
    check_text("labels only", HEAD ".entry k(.param .u64 p) { L1: L2: ret; }", 0, NULL, "-");
    check_text("unknown directive", HEAD ".entry k(.param .u64 p) { .frob 1; ret; }", UNPARSED,
               "cannot follow: an unknown directive `.frob`", "-");
    check_text("unknown name", HEAD ".entry k(.param .u64 p) { .reg .b64 %rd1; mov.u64 %rd1, nowhere; ret; }",
               UNPARSED, "an unknown name `nowhere`", "-");
    check_text("past the end", HEAD ".entry k(.param .u64 p) { .reg .b64 %rd1; ld.param.u64 %rd1, [p+8]; ret; }",
               UNPARSED, "a load past the end of parameter `p`", "-");
    check_text("writes a parameter", HEAD ".entry k(.param .u64 p) { st.param.u64 [p], 0; ret; }", UNPARSED,
               "writes kernel parameter `p`", "-");
    check_text("no ;", HEAD ".entry k(.param .u64 p) { ret }", UNPARSED, "an instruction without ;", "-");
    check_text("odd tokens", HEAD ".entry k(.param .u64 p) { [[[ ; ]]] ; @ ; ! ; 12 ; %r1 %r2 ; ::: ; }",
               UNPARSED, NULL, "-");
    check_text("unbalanced operand", HEAD ".entry k(.param .u64 p) { .reg .b64 %rd1; ld.param.u64 %rd1, [p; ret; }",
               UNPARSED, NULL, "-");
    char ops[2048] = HEAD ".entry k(.param .u64 p) { .reg .b32 %r<64>; add.s32 %r0";
    for (int i = 1; i < 40; i++)
        snprintf(ops + strlen(ops), sizeof ops - strlen(ops), ", %%r%d", i);
    strcat(ops, "; ret; }");
    check_text("40 operands", ops, UNPARSED, "too many operands", "-");
    char mods[2048] = HEAD ".entry k(.param .u64 p) { .reg .b32 %r1; mov";
    for (int i = 0; i < 30; i++)
        strcat(mods, ".b32");
    strcat(mods, " %r1, 0; ret; }");
    check_text("30 modifiers", mods, UNPARSED, "too many modifiers", "-");
    check_text("module directive", HEAD ".frob 3;\n.entry k(.param .u64 p) { ret; }", UNPARSED,
               "cannot follow: an unknown directive at module scope `.frob`", "");
    check_text("defined twice", HEAD ".func f() { ret; }\n.func f() { ret; }\n.entry k() { ret; }", UNPARSED,
               "a function defined twice", "");
    check_text("call of nothing", HEAD ".entry k() { call.uni nothing, (); ret; }", UNPARSED,
               "a call of the unknown name `nothing`", "");
    check_text("call mismatch",
               HEAD ".func f(.param .b64 a) { ret; }\n.entry k(.param .u64 p) { .reg .b64 %rd1;\n"
                    "ld.param.u64 %rd1, [p]; { .param .b64 q; st.param.b64 [q], %rd1; call.uni f, (q, q); } ret; }",
               UNPARSED, "a call of `f` whose arguments do not match its parameters", "v");
    check_text("indirect call",
               HEAD ".entry k(.param .u64 p) { .reg .b64 %rd1; ld.param.u64 %rd1, [p];\n"
                    "proto: .callprototype _ (.param .b64 _);\n{ .param .b64 q; st.param.b64 [q], %rd1;\n"
                    "call %rd1, (q), proto; } ret; }",
               INDIRECT, "an indirect call", "v");
    check_text("a .section and .loc",
               HEAD ".file 1 \"a.cu\"\n.entry k(.param .u64 p) { .reg .b64 %rd1;\n.loc 1 2 3\n"
                    "ld.param.u64 %rd1, [p];\n.loc 1 4 5 // x\nst.u32 [%rd1], 0; ret; }\n"
                    ".section .debug_str { $L__info_string0: .b8 107,0 }\n",
               0, NULL, "P");
    check_text("huge parameter", HEAD ".entry k(.param .align 8 .b8 s[70000]) { ret; }", UNPARSED,
               "a parameter buffer too large to analyse", "");
    /* A reason quoting a long statement is cut to fit, blanks and all
     * (the fuzzer found the cut one byte off). */
    char lng[2048] = HEAD ".entry k() { .reg .b32 %r1; mov.u32 %r1, nowhere";
    for (int i = 0; i < 60; i++)
        strcat(lng, " +  1");
    strcat(lng, "; ret; }");
    for (size_t cut = 40; cut < 140; cut++) { /* every alignment of blank and cut */
        char t[2048];
        snprintf(t, sizeof t, "%.*s; ret; }", (int)(strstr(lng, "nowhere") - lng + cut), lng);
        check_text("a long statement", t, UNPARSED, "an unknown name `nowhere`", "");
    }
    check_text("a long statement", lng, UNPARSED, "...`", "");
    /* Names of a register's form are registers: as anything else they
     * cannot be followed; two formals of one name neither. */
    check_text("a cell named like a register",
               HEAD ".entry k(.param .u64 p) { .reg .b64 %rd1; .param .b64 %q1; ld.param.u64 %rd1, [p];\n"
                    "st.u32 [%rd1], 0; ret; }",
               UNPARSED, "the name `%q1` of a register's form declared as no register", "P");
    check_text("a module variable named like a register", HEAD ".global .u32 %g1;\n.entry k() { ret; }", UNPARSED,
               "a module name of a register's form", "");
    check_text("a parameter named like a register", HEAD ".entry k(.param .u64 %p1) { ret; }", UNPARSED,
               "a parameter named like a register", "-");
    check_text("formals of one name",
               HEAD ".func f(.reg .b64 %a1, .reg .b64 %a1) { st.u32 [%a1], 0; ret; }\n"
                    ".entry k(.param .u64 p) { .reg .b64 %rd1; ld.param.u64 %rd1, [p]; call.uni f, (%rd1, %rd1); ret; }",
               UNPARSED | CALLS, "two parameters of one name", "P");
    check_text(".reg parameters",
               HEAD ".func g(.reg .b64 %a1, .reg .b32 %b1) { st.u32 [%a1], %b1; ret; }\n"
                    ".entry k(.param .u64 p, .param .u32 n) { .reg .b64 %rd1; .reg .b32 %r1;\n"
                    "ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n]; call.uni g, (%rd1, %r1); ret; }",
               CALLS, NULL, "Pv");
    /* Tensor memory (sm_100): its address, kept in shared memory, is no
     * pointer the kernel loads. */
    check_text("tensor memory",
               ".version 8.7\n.target sm_100a\n.address_size 64\n.shared .align 4 .b8 slot[4];\n"
               ".entry k(.param .u64 p) { .reg .b32 %r<4>; .reg .b64 %rd1; mov.u32 %r1, slot;\n"
               "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;\nld.shared.b32 %r2, [%r1];\n"
               "tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r3}, [%r2];\nld.param.u64 %rd1, [p];\n"
               "st.global.u32 [%rd1], %r3; ret; }",
               0, NULL, "P");
    check_text("absolute address", HEAD ".entry k() { .reg .b32 %r1; ld.global.u32 %r1, [4096]; ret; }", UNPARSED,
               "an address traced to no parameter", "");
}

/* Every prefix of a fixture, and the fixture against another text's kernel
 * list: an answer (or an error from drk_ptx_read), never a read out of
 * bounds; kernels the text lacks cannot be followed. */
static void test_truncated(void)
{
    module full;
    load_module(DRK_UNIT_FLOW_SRC, "hand.ptx", &full);
    for (size_t n = 0; n < full.size; n += n < 1024 ? 1 : 7) {
        char *cut = malloc(n ? n : 1);
        memcpy(cut, full.text, n);
        drk_ptx p;
        char err[256];
        if (drk_ptx_read(cut, n, &p, err, sizeof err) == 0) {
            drk_ptx_flow **f = drk_ptx_flows(cut, n, &p);
            CHECK(f != NULL);
            drk_ptx_flows_free(f, p.nkernels);
            drk_ptx_free(&p);
        }
        /* The whole module's kernel list on a prefix of its text. */
        drk_ptx_flow **f = drk_ptx_flows(cut, n, &full.ptx);
        CHECK(f != NULL);
        for (size_t i = 0; f && i < full.ptx.nkernels; i++)
            CHECK(f[i] && (f[i]->evolvable || f[i]->reason[0]));
        if (f && n < 200)
            CHECK(f[0] && !f[0]->evolvable && (f[0]->flags & DRK_FLOW_UNPARSED));
        drk_ptx_flows_free(f, full.ptx.nkernels);
        free(cut);
    }
    /* A layout that is not the text's: a parameter count that differs. */
    drk_ptx other = full.ptx;
    drk_kernel_info k = full.ptx.kernels[0];
    k.nparams = 1;
    other.kernels = &k;
    other.nkernels = 1;
    drk_ptx_flow **f = drk_ptx_flows(full.text, full.size, &other);
    CHECK(f && f[0] && (f[0]->flags & DRK_FLOW_UNPARSED) && strstr(f[0]->reason, "parameters differ") &&
          f[0]->nwords == 0);
    drk_ptx_flows_free(f, 1);
    free_module(&full);
}

/* CPU time: the machines that run the tests are often busy. */
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Text that grows as the test builds it. */
typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap ? b->cap * 2 : 1 << 16;
        b->s = realloc(b->s, b->cap);
        if (!b->s)
            exit(1);
    }
}

/* A pointer carried through 100k moves written in the reverse of their
 * order (each pass in text order would move it one step): the worklist
 * follows it in linear time. */
static void test_long_chain(void)
{
    enum { N = 100000 };
    buf b = {0};
    put(&b, HEAD ".entry chain(.param .u64 p, .param .u64 q) {\n.reg .b64 %%rd<%d>;\n", N + 2);
    put(&b, "st.u32 [%%rd0], 0;\n");
    for (int i = 0; i < N; i++)
        put(&b, "mov.b64 %%rd%d, %%rd%d;\n", i, i + 1);
    put(&b, "ld.param.u64 %%rd%d, [p];\nret;\n}\n", N);
    module m;
    double t0 = now_ms();
    CHECK(read_module(b.s, b.n, &m) == 0);
    double t1 = now_ms();
    char w[8];
    words_of(m.flows[0], w, sizeof w);
    CHECK(strcmp(w, "P-") == 0 && m.flows[0]->evolvable);
    printf("  a 100k-move chain (%.1f MB): read and analysed in %.1f ms of CPU\n", b.n / 1e6, t1 - t0);
    free_module(&m);
}

/* Many kernels each calling one large function: the work is bounded by the
 * module's budget (some kernels are then too costly), not by their count. */
static void test_budget(void)
{
    enum { BODY = 20000, KERNELS = 3000 };
    buf b = {0};
    put(&b, HEAD ".func f(.param .b64 a) {\n.reg .b64 %%rd<%d>;\nld.param.b64 %%rd0, [a];\n", BODY + 2);
    for (int i = 0; i < BODY; i++)
        put(&b, "add.s64 %%rd%d, %%rd%d, 4;\n", i + 1, i);
    put(&b, "st.u32 [%%rd%d], 0;\nret;\n}\n", BODY);
    for (int k = 0; k < KERNELS; k++)
        put(&b, ".entry k%d(.param .u64 p) { .reg .b64 %%rd1; ld.param.u64 %%rd1, [p];\n"
                "{ .param .b64 q; st.param.b64 [q], %%rd1; call.uni f, (q); } ret; }\n", k);
    module m;
    double t0 = now_ms();
    CHECK(read_module(b.s, b.n, &m) == 0);
    double t1 = now_ms();
    size_t ok = 0, costly = 0;
    for (size_t i = 0; i < m.ptx.nkernels; i++) {
        const drk_ptx_flow *f = m.flows[i];
        if (f->evolvable && f->nwords == 1 && f->words[0].cls == DRK_FLOW_POINTER)
            ok++;
        else if (strstr(f->reason, "too costly"))
            costly++;
    }
    CHECK(ok > 0 && costly > 0 && ok + costly == KERNELS);
    printf("  %d kernels calling a %d-instruction function (%.1f MB): %zu analysed, %zu over the budget, %.0f ms of CPU\n",
           KERNELS, BODY, b.n / 1e6, ok, costly, t1 - t0);
    free_module(&m);
}

/* The time on the largest PTX made here: flow/big.cu (unrolled GEMMs). */
static void test_big(void)
{
    module m;
    size_t size;
    char *text = (char *)check_load(DRK_UNIT_FLOW, "big.ptx", &size);
    char err[256];
    CHECK(drk_ptx_read(text, size, &m.ptx, err, sizeof err) == 0);
    m.text = text;
    m.size = size;
    unsigned statements = 0;
    for (size_t i = 0; i < size; i++)
        statements += text[i] == ';';
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double t0 = now_ms();
        drk_ptx_flow **f = drk_ptx_flows(text, size, &m.ptx);
        double t = now_ms() - t0;
        best = t < best ? t : best;
        if (r < 4)
            drk_ptx_flows_free(f, m.ptx.nkernels);
        else
            m.flows = f;
    }
    CHECK(m.flows != NULL);
    for (size_t i = 0; m.flows && i < m.ptx.nkernels; i++) {
        char w[64];
        words_of(m.flows[i], w, sizeof w);
        int gemm = strncmp(m.ptx.kernels[i].name, "_Z12blocked_gemm", 16) == 0;
        CHECK(m.flows[i]->evolvable);
        CHECK(strcmp(w, gemm ? "PPPvvvvvvvv" : "PPPPPPPPPPPPPPPPPPPPPPPPPv") == 0);
    }
    printf("  big.ptx: %zu kernels, %.2f MB, %u statements: analysed in %.1f ms of CPU (best of 5; %.0f MB/s)\n",
           m.ptx.nkernels, size / 1e6, statements, best, size / 1e3 / best);
    free_module(&m);
}

int main(void)
{
    test_nvcc();
    test_hand();
    test_image();
    test_odd_texts();
    test_truncated();
    test_long_chain();
    test_budget();
    test_big();
    return CHECK_DONE();
}
