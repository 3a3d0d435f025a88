/* PTX reader: a tokenizer that knows comments and strings, and a parser for
 * the top level only (.version, .target, .entry headers); bodies are
 * skipped unread (ptx_ir.c reads them). Parameters are laid out as the driver lays out
 * kernelParams: each at the next multiple of its alignment (natural for
 * scalars, .align N for arrays), the buffer ending at the last one's end —
 * the offsets and CBANK_PARAM_SIZE ptxas writes for the same PTX. */
#include "evolve/image/ptx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/bytes.h"
#include "evolve/image/ptx_lex.h"

/* ------------------------------------------------------------------ */
/* Parameters                                                         */

/* The scalar types a kernel parameter may have, and their sizes. */
static unsigned scalar_size(const drk_ptx_tok *t, int *maybe_pointer)
{
    static const struct {
        const char *name;
        unsigned size;
        int int64;
    } types[] = {
        {".b8", 1, 0},   {".b16", 2, 0},  {".b32", 4, 0},  {".b64", 8, 1},        {".b128", 16, 0},
        {".u8", 1, 0},   {".u16", 2, 0},  {".u32", 4, 0},  {".u64", 8, 1},        {".s8", 1, 0},
        {".s16", 2, 0},  {".s32", 4, 0},  {".s64", 8, 1},  {".f16", 2, 0},        {".f16x2", 4, 0},
        {".bf16", 2, 0}, {".bf16x2", 4, 0}, {".f32", 4, 0}, {".f64", 8, 0},       {".pred", 1, 0},
        {".texref", 8, 1}, {".samplerref", 8, 1}, {".surfref", 8, 1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (drk_ptx_is(t, types[i].name)) {
            *maybe_pointer = types[i].int64;
            return types[i].size;
        }
    return 0;
}

static int is_state_space(const drk_ptx_tok *t)
{
    return drk_ptx_is(t, ".global") || drk_ptx_is(t, ".const") || drk_ptx_is(t, ".local") || drk_ptx_is(t, ".shared");
}

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

typedef struct pdecl {
    unsigned elem, align; /* element size; .align N (0 if none) */
    uint64_t count;       /* array elements (1 for a scalar) */
    int ptr, maybe_pointer;
} pdecl;

static int bad_param(drk_ptx_lexer *L, const char *what)
{
    return drk_fail(L->err, L->errlen, "ptx: line %u: unsupported .param syntax (%s at '%.*s')", L->cur.line, what,
                (int)(L->cur.n > 40 ? 40 : L->cur.n), L->cur.s);
}

/* `[N]` after the name, possibly repeated; L->cur is the '['. */
static int param_dims(drk_ptx_lexer *L, pdecl *d)
{
    while (drk_ptx_is_punct(&L->cur, '[')) {
        uint64_t n;
        if (drk_ptx_next(L) || !drk_ptx_tok_uint(&L->cur, UINT32_MAX, &n) || n == 0)
            return L->failed ? -1 : bad_param(L, "array size");
        if (drk_ptx_next(L) || !drk_ptx_is_punct(&L->cur, ']'))
            return L->failed ? -1 : bad_param(L, "expected ]");
        d->count *= n;
        if (d->count > UINT32_MAX)
            return bad_param(L, "array too large");
        if (drk_ptx_next(L))
            return -1;
    }
    return 0;
}

/* One declaration after `.param`, through its name and dimensions; L->cur
 * is then the ',' or ')' after it. */
static int param_decl(drk_ptx_lexer *L, pdecl *d)
{
    memset(d, 0, sizeof *d);
    d->count = 1;
    for (;;) {
        if (drk_ptx_next(L))
            return -1;
        drk_ptx_tok *t = &L->cur;
        int mp;
        unsigned sz;
        if (t->kind == DRK_TOK_IDENT)
            break;
        if (t->kind != DRK_TOK_DIR)
            return bad_param(L, "expected a type or a name");
        if ((sz = scalar_size(t, &mp)) != 0) {
            if (d->elem)
                return bad_param(L, "second type");
            d->elem = sz;
            d->maybe_pointer = mp;
        } else if (drk_ptx_is(t, ".ptr")) {
            d->ptr = 1;
        } else if (d->ptr && is_state_space(t)) {
            continue;
        } else if (drk_ptx_is(t, ".align")) {
            uint64_t a;
            if (drk_ptx_next(L) || !drk_ptx_tok_uint(&L->cur, 1u << 20, &a) || !is_pow2(a))
                return L->failed ? -1 : bad_param(L, "alignment");
            if (!d->ptr) /* after .ptr it is the pointee's alignment */
                d->align = (unsigned)a;
        } else {
            return bad_param(L, "unknown directive");
        }
    }
    if (!d->elem)
        return bad_param(L, "no type");
    if (drk_ptx_next(L) || param_dims(L, d))
        return -1;
    return 0;
}

static unsigned log2u(unsigned v)
{
    unsigned l = 0;
    while (v > 1) {
        v >>= 1;
        l++;
    }
    return l;
}

static int add_param(drk_ptx_lexer *L, drk_kernel_info *k, const pdecl *d, uint64_t *end)
{
    unsigned align = d->align ? d->align : d->elem;
    uint64_t off = (*end + align - 1) / align * align;
    uint64_t size = d->elem * d->count;
    if (off + size > UINT32_MAX)
        return bad_param(L, "parameters too large");
    drk_param *np = realloc(k->params, (k->nparams + 1) * sizeof *np);
    if (!np)
        return drk_fail(L->err, L->errlen, "ptx: out of memory");
    k->params = np;
    drk_param *p = &np[k->nparams++];
    p->offset = (uint32_t)off;
    p->size = (uint32_t)size;
    p->align_log2 = (uint8_t)log2u(align);
    /* A .u64 may hold a pointer (nvcc writes no .ptr); other types cannot. */
    p->kind = d->ptr ? DRK_PARAM_POINTER
              : (d->maybe_pointer && d->count == 1) ? DRK_PARAM_KIND_UNKNOWN
                                                     : DRK_PARAM_SCALAR;
    *end = off + size;
    return 0;
}

/* `( .param ..., ... )`; L->cur is the '('. Leaves L->cur after ')'. */
static int param_list(drk_ptx_lexer *L, drk_kernel_info *k)
{
    uint64_t end = 0;
    if (drk_ptx_next(L))
        return -1;
    if (drk_ptx_is_punct(&L->cur, ')'))
        return drk_ptx_next(L);
    for (;;) {
        if (!drk_ptx_is(&L->cur, ".param"))
            return bad_param(L, "expected .param");
        pdecl d;
        if (param_decl(L, &d) || add_param(L, k, &d, &end))
            return -1;
        if (drk_ptx_is_punct(&L->cur, ')'))
            break;
        if (!drk_ptx_is_punct(&L->cur, ','))
            return bad_param(L, "expected , or )");
        if (drk_ptx_next(L))
            return -1;
    }
    k->params_size = (uint32_t)end;
    return drk_ptx_next(L);
}

/* ------------------------------------------------------------------ */
/* Performance directives between the parameter list and the body      */

/* Up to three numbers separated by commas; L->cur is the directive. */
static int dims(drk_ptx_lexer *L, uint32_t out[3], unsigned *n)
{
    *n = 0;
    out[0] = out[1] = out[2] = 1;
    do {
        uint64_t v;
        if (drk_ptx_next(L) || !drk_ptx_tok_uint(&L->cur, UINT32_MAX, &v))
            return L->failed ? -1 : drk_fail(L->err, L->errlen, "ptx: line %u: expected a number", L->cur.line);
        out[(*n)++] = (uint32_t)v;
        if (drk_ptx_next(L))
            return -1;
    } while (*n < 3 && drk_ptx_is_punct(&L->cur, ','));
    return 0;
}

static int perf_directive(drk_ptx_lexer *L, drk_kernel_info *k)
{
    uint32_t d[3];
    unsigned n;
    if (drk_ptx_is(&L->cur, ".maxntid") || drk_ptx_is(&L->cur, ".reqntid")) {
        int req = drk_ptx_is(&L->cur, ".reqntid");
        if (dims(L, d, &n))
            return -1;
        uint64_t prod = (uint64_t)d[0] * d[1] * d[2];
        if (req)
            memcpy(k->reqntid, d, sizeof d);
        else
            k->max_threads = prod > UINT32_MAX ? UINT32_MAX : (uint32_t)prod;
        return 0;
    }
    if (drk_ptx_is(&L->cur, ".maxnreg")) {
        if (dims(L, d, &n))
            return -1;
        k->maxnreg = d[0];
        return 0;
    }
    if (drk_ptx_is(&L->cur, ".pragma")) { /* .pragma "..."; */
        while (!drk_ptx_is_punct(&L->cur, ';') && L->cur.kind != DRK_TOK_END)
            if (drk_ptx_next(L))
                return -1;
        return drk_ptx_next(L);
    }
    /* Others (.minnctapersm, .maxclusterrank, .reqnctapercluster,
     * .explicitcluster, .noreturn, ...): the directive and its numbers. */
    do {
        if (drk_ptx_next(L))
            return -1;
    } while (L->cur.kind == DRK_TOK_NUM || drk_ptx_is_punct(&L->cur, ','));
    return 0;
}

/* ------------------------------------------------------------------ */
/* Top level                                                          */

static int add_kernel(drk_ptx *out, drk_ptx_lexer *L, drk_kernel_info **k)
{
    drk_kernel_info *nk = realloc(out->kernels, (out->nkernels + 1) * sizeof *nk);
    if (!nk)
        return drk_fail(L->err, L->errlen, "ptx: out of memory");
    out->kernels = nk;
    *k = &nk[out->nkernels++];
    memset(*k, 0, sizeof **k);
    (*k)->regs = (*k)->shared_bytes = (*k)->local_bytes = (*k)->const_bytes = DRK_UNKNOWN_U32;
    (*k)->name = strndup(L->cur.s, L->cur.n);
    return (*k)->name ? 0 : drk_fail(L->err, L->errlen, "ptx: out of memory");
}

/* `.entry name (params) directives {`; L->cur is `.entry`. Leaves L->cur on
 * the body's '{', or after a declaration, which is dropped. */
static int entry(drk_ptx_lexer *L, drk_ptx *out)
{
    unsigned line = L->cur.line;
    drk_kernel_info *k = NULL;
    if (drk_ptx_next(L) || L->cur.kind != DRK_TOK_IDENT)
        return L->failed ? -1 : drk_fail(L->err, L->errlen, "ptx: line %u: .entry without a name", line);
    if (add_kernel(out, L, &k) || drk_ptx_next(L))
        return -1;
    if (drk_ptx_is_punct(&L->cur, '(') && param_list(L, k))
        return -1;
    while (L->cur.kind == DRK_TOK_DIR && !drk_ptx_is(&L->cur, ".entry") && !drk_ptx_is(&L->cur, ".func") &&
           !drk_ptx_is(&L->cur, ".visible") && !drk_ptx_is(&L->cur, ".weak") && !drk_ptx_is(&L->cur, ".extern"))
        if (perf_directive(L, k))
            return -1;
    if (!drk_ptx_is_punct(&L->cur, '{')) { /* a declaration (.extern .entry ...;): no kernel here */
        drk_kernel_info_clear(k);
        out->nkernels--;
    }
    return 0;
}

/* "X.Y" */
static int version(drk_ptx_lexer *L, drk_ptx *out)
{
    unsigned line = L->cur.line;
    if (drk_ptx_next(L))
        return -1;
    const drk_ptx_tok *t = &L->cur;
    const char *dot = t->kind == DRK_TOK_NUM ? memchr(t->s, '.', t->n) : NULL;
    uint64_t maj, min;
    drk_ptx_tok a = *t, b = *t;
    if (dot) {
        a.n = (size_t)(dot - t->s);
        b.s = dot + 1;
        b.n = t->n - a.n - 1;
    }
    if (!dot || !drk_ptx_tok_uint(&a, 999, &maj) || !drk_ptx_tok_uint(&b, 999, &min))
        return drk_fail(L->err, L->errlen, "ptx: line %u: bad .version", line);
    out->version_major = (unsigned)maj;
    out->version_minor = (unsigned)min;
    return drk_ptx_next(L);
}

/* `sm_90a[, texmode_..., debug]`: the first name is the SM. */
static int target(drk_ptx_lexer *L, drk_ptx *out)
{
    unsigned line = L->cur.line;
    if (drk_ptx_next(L))
        return -1;
    const drk_ptx_tok *t = &L->cur;
    if (t->kind != DRK_TOK_IDENT || t->n >= sizeof out->target_name)
        return drk_fail(L->err, L->errlen, "ptx: line %u: bad .target", line);
    memcpy(out->target_name, t->s, t->n);
    out->target_name[t->n] = '\0';
    const char *u = memchr(out->target_name, '_', t->n);
    out->target = u ? (unsigned)strtoul(u + 1, NULL, 10) : 0;
    do {
        if (drk_ptx_next(L))
            return -1;
    } while (L->cur.kind == DRK_TOK_IDENT || drk_ptx_is_punct(&L->cur, ','));
    return 0;
}

static int parse(drk_ptx_lexer *L, drk_ptx *out)
{
    if (drk_ptx_next(L))
        return -1;
    if (L->cur.kind != DRK_TOK_DIR)
        return drk_fail(L->err, L->errlen, "ptx: line %u: not PTX (no directive first)", L->cur.line);
    while (L->cur.kind != DRK_TOK_END) {
        drk_ptx_tok *t = &L->cur;
        int rc = 0;
        if (drk_ptx_is_punct(t, '{')) {
            /* A body (or any block): nothing in it is read here. */
            const char *close;
            if (drk_ptx_skip_block(L, &close))
                return L->failed ? -1 : drk_fail(L->err, L->errlen, "ptx: the text ends inside a body ({ without })");
        } else if (drk_ptx_is_punct(t, '}')) {
            return drk_fail(L->err, L->errlen, "ptx: line %u: unbalanced }", t->line);
        } else if (drk_ptx_is(t, ".entry")) {
            rc = entry(L, out);
        } else if (drk_ptx_is(t, ".version")) {
            rc = version(L, out);
        } else if (drk_ptx_is(t, ".target")) {
            rc = target(L, out);
        } else {
            rc = drk_ptx_next(L);
        }
        if (rc)
            return -1;
    }
    return 0;
}

int drk_ptx_read(const char *text, size_t len, drk_ptx *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return drk_fail(err, errlen, "ptx: no text");
    drk_ptx_lexer L = {.p = text, .end = text + len, .line = 1, .err = err, .errlen = errlen};
    if (parse(&L, out)) {
        drk_ptx_free(out);
        return -1;
    }
    return 0;
}

void drk_ptx_free(drk_ptx *p)
{
    for (size_t i = 0; i < p->nkernels; i++)
        drk_kernel_info_clear(&p->kernels[i]);
    free(p->kernels);
    p->kernels = NULL;
    p->nkernels = 0;
}

int drk_is_ptx(const void *data, size_t size)
{
    if (!data)
        return 0;
    /* The first token, after comments, within the first 4 KiB. */
    drk_ptx_lexer L = {.p = data, .end = (const char *)data + (size > 4096 ? 4096 : size), .line = 1};
    if (drk_ptx_next(&L) || L.cur.kind != DRK_TOK_DIR)
        return 0;
    return drk_ptx_is(&L.cur, ".version") || drk_ptx_is(&L.cur, ".target") || drk_ptx_is(&L.cur, ".address_size");
}
