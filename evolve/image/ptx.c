/* PTX reader: a tokenizer that knows comments and strings, and a parser for
 * the top level only (.version, .target, .entry headers); bodies are
 * skipped by brace depth. Parameters are laid out as the driver lays out
 * kernelParams: each at the next multiple of its alignment (natural for
 * scalars, .align N for arrays), the buffer ending at the last one's end —
 * the offsets and CBANK_PARAM_SIZE ptxas writes for the same PTX. */
#include "evolve/image/ptx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/bytes.h"

enum { TOK_END = 0, TOK_DIR, TOK_IDENT, TOK_NUM, TOK_STR, TOK_PUNCT };

typedef struct tok {
    int kind;
    const char *s;
    size_t n;
    unsigned line;
} tok;

typedef struct lexer {
    const char *p, *end;
    unsigned line;
    tok cur;
    char *err;
    size_t errlen;
    int failed;
} lexer;

static int is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

static int is_ident_char(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Skips blanks and comments; 0, or -1 for an unterminated comment. */
static int skip_space(lexer *L)
{
    while (L->p < L->end) {
        char c = *L->p;
        if (c == '\n') {
            L->line++;
            L->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            L->p++;
        } else if (c == '/' && L->end - L->p >= 2 && L->p[1] == '/') {
            while (L->p < L->end && *L->p != '\n')
                L->p++;
        } else if (c == '/' && L->end - L->p >= 2 && L->p[1] == '*') {
            unsigned start = L->line;
            L->p += 2;
            while (L->p < L->end && !(*L->p == '*' && L->end - L->p >= 2 && L->p[1] == '/'))
                L->line += *L->p++ == '\n';
            if (L->p >= L->end)
                return drk_fail(L->err, L->errlen, "ptx: line %u: unterminated comment", start);
            L->p += 2;
        } else {
            return 0;
        }
    }
    return 0;
}

static int lex_string(lexer *L)
{
    L->p++;
    while (L->p < L->end && *L->p != '"' && *L->p != '\n' && *L->p != '\0')
        L->p += (*L->p == '\\' && L->end - L->p >= 2) ? 2 : 1;
    if (L->p >= L->end || *L->p != '"')
        return drk_fail(L->err, L->errlen, "ptx: line %u: unterminated string", L->line);
    L->p++;
    return 0;
}

/* Reads the next token into L->cur; TOK_END at the end (or a NUL, which
 * ends PTX stored in fatbins). -1 on a lexical error. */
static int next(lexer *L)
{
    if (L->failed)
        return -1;
    if (skip_space(L)) {
        L->failed = 1;
        return -1;
    }
    tok *t = &L->cur;
    t->s = L->p;
    t->line = L->line;
    if (L->p >= L->end || *L->p == '\0') {
        t->kind = TOK_END;
        t->n = 0;
        return 0;
    }
    char c = *L->p;
    if (c == '.' && L->end - L->p >= 2 && is_ident_start(L->p[1])) {
        t->kind = TOK_DIR;
        for (L->p++; L->p < L->end && is_ident_char(*L->p); L->p++)
            ;
    } else if (is_ident_start(c)) {
        t->kind = TOK_IDENT;
        while (L->p < L->end && is_ident_char(*L->p))
            L->p++;
    } else if (c >= '0' && c <= '9') {
        t->kind = TOK_NUM;
        while (L->p < L->end && (is_ident_char(*L->p) || *L->p == '.'))
            L->p++;
    } else if (c == '"') {
        t->kind = TOK_STR;
        if (lex_string(L)) {
            L->failed = 1;
            return -1;
        }
    } else {
        t->kind = TOK_PUNCT;
        L->p++;
    }
    t->n = (size_t)(L->p - t->s);
    return 0;
}

static int is(const tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->n == n && memcmp(t->s, s, n) == 0;
}

static int is_punct(const tok *t, char c)
{
    return t->kind == TOK_PUNCT && t->s[0] == c;
}

/* A decimal (or 0x hex) number token, at most `max`. */
static int tok_uint(const tok *t, uint64_t max, uint64_t *v)
{
    if (t->kind != TOK_NUM)
        return 0;
    uint64_t x = 0;
    size_t i = 0;
    unsigned base = 10;
    if (t->n > 2 && t->s[0] == '0' && (t->s[1] == 'x' || t->s[1] == 'X')) {
        base = 16;
        i = 2;
    }
    for (; i < t->n; i++) {
        char c = t->s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : base == 16 && c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : base == 16 && c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                          : 99;
        if (d >= base || x > (max - d) / base)
            return 0;
        x = x * base + d;
    }
    *v = x;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Parameters                                                         */

/* The scalar types a kernel parameter may have, and their sizes. */
static unsigned scalar_size(const tok *t, int *maybe_pointer)
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
        if (is(t, types[i].name)) {
            *maybe_pointer = types[i].int64;
            return types[i].size;
        }
    return 0;
}

static int is_state_space(const tok *t)
{
    return is(t, ".global") || is(t, ".const") || is(t, ".local") || is(t, ".shared");
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

static int bad_param(lexer *L, const char *what)
{
    return drk_fail(L->err, L->errlen, "ptx: line %u: unsupported .param syntax (%s at '%.*s')", L->cur.line, what,
                (int)(L->cur.n > 40 ? 40 : L->cur.n), L->cur.s);
}

/* `[N]` after the name, possibly repeated; L->cur is the '['. */
static int param_dims(lexer *L, pdecl *d)
{
    while (is_punct(&L->cur, '[')) {
        uint64_t n;
        if (next(L) || !tok_uint(&L->cur, UINT32_MAX, &n) || n == 0)
            return L->failed ? -1 : bad_param(L, "array size");
        if (next(L) || !is_punct(&L->cur, ']'))
            return L->failed ? -1 : bad_param(L, "expected ]");
        d->count *= n;
        if (d->count > UINT32_MAX)
            return bad_param(L, "array too large");
        if (next(L))
            return -1;
    }
    return 0;
}

/* One declaration after `.param`, through its name and dimensions; L->cur
 * is then the ',' or ')' after it. */
static int param_decl(lexer *L, pdecl *d)
{
    memset(d, 0, sizeof *d);
    d->count = 1;
    for (;;) {
        if (next(L))
            return -1;
        tok *t = &L->cur;
        int mp;
        unsigned sz;
        if (t->kind == TOK_IDENT)
            break;
        if (t->kind != TOK_DIR)
            return bad_param(L, "expected a type or a name");
        if ((sz = scalar_size(t, &mp)) != 0) {
            if (d->elem)
                return bad_param(L, "second type");
            d->elem = sz;
            d->maybe_pointer = mp;
        } else if (is(t, ".ptr")) {
            d->ptr = 1;
        } else if (d->ptr && is_state_space(t)) {
            continue;
        } else if (is(t, ".align")) {
            uint64_t a;
            if (next(L) || !tok_uint(&L->cur, 1u << 20, &a) || !is_pow2(a))
                return L->failed ? -1 : bad_param(L, "alignment");
            if (!d->ptr) /* after .ptr it is the pointee's alignment */
                d->align = (unsigned)a;
        } else {
            return bad_param(L, "unknown directive");
        }
    }
    if (!d->elem)
        return bad_param(L, "no type");
    if (next(L) || param_dims(L, d))
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

static int add_param(lexer *L, drk_kernel_info *k, const pdecl *d, uint64_t *end)
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
static int param_list(lexer *L, drk_kernel_info *k)
{
    uint64_t end = 0;
    if (next(L))
        return -1;
    if (is_punct(&L->cur, ')'))
        return next(L);
    for (;;) {
        if (!is(&L->cur, ".param"))
            return bad_param(L, "expected .param");
        pdecl d;
        if (param_decl(L, &d) || add_param(L, k, &d, &end))
            return -1;
        if (is_punct(&L->cur, ')'))
            break;
        if (!is_punct(&L->cur, ','))
            return bad_param(L, "expected , or )");
        if (next(L))
            return -1;
    }
    k->params_size = (uint32_t)end;
    return next(L);
}

/* ------------------------------------------------------------------ */
/* Performance directives between the parameter list and the body      */

/* Up to three numbers separated by commas; L->cur is the directive. */
static int dims(lexer *L, uint32_t out[3], unsigned *n)
{
    *n = 0;
    out[0] = out[1] = out[2] = 1;
    do {
        uint64_t v;
        if (next(L) || !tok_uint(&L->cur, UINT32_MAX, &v))
            return L->failed ? -1 : drk_fail(L->err, L->errlen, "ptx: line %u: expected a number", L->cur.line);
        out[(*n)++] = (uint32_t)v;
        if (next(L))
            return -1;
    } while (*n < 3 && is_punct(&L->cur, ','));
    return 0;
}

static int perf_directive(lexer *L, drk_kernel_info *k)
{
    uint32_t d[3];
    unsigned n;
    if (is(&L->cur, ".maxntid") || is(&L->cur, ".reqntid")) {
        int req = is(&L->cur, ".reqntid");
        if (dims(L, d, &n))
            return -1;
        uint64_t prod = (uint64_t)d[0] * d[1] * d[2];
        if (req)
            memcpy(k->reqntid, d, sizeof d);
        else
            k->max_threads = prod > UINT32_MAX ? UINT32_MAX : (uint32_t)prod;
        return 0;
    }
    if (is(&L->cur, ".maxnreg")) {
        if (dims(L, d, &n))
            return -1;
        k->maxnreg = d[0];
        return 0;
    }
    if (is(&L->cur, ".pragma")) { /* .pragma "..."; */
        while (!is_punct(&L->cur, ';') && L->cur.kind != TOK_END)
            if (next(L))
                return -1;
        return next(L);
    }
    /* Others (.minnctapersm, .maxclusterrank, .reqnctapercluster,
     * .explicitcluster, .noreturn, ...): the directive and its numbers. */
    do {
        if (next(L))
            return -1;
    } while (L->cur.kind == TOK_NUM || is_punct(&L->cur, ','));
    return 0;
}

/* ------------------------------------------------------------------ */
/* Top level                                                          */

static int add_kernel(drk_ptx *out, lexer *L, drk_kernel_info **k)
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
static int entry(lexer *L, drk_ptx *out)
{
    unsigned line = L->cur.line;
    drk_kernel_info *k = NULL;
    if (next(L) || L->cur.kind != TOK_IDENT)
        return L->failed ? -1 : drk_fail(L->err, L->errlen, "ptx: line %u: .entry without a name", line);
    if (add_kernel(out, L, &k) || next(L))
        return -1;
    if (is_punct(&L->cur, '(') && param_list(L, k))
        return -1;
    while (L->cur.kind == TOK_DIR && !is(&L->cur, ".entry") && !is(&L->cur, ".func") &&
           !is(&L->cur, ".visible") && !is(&L->cur, ".weak") && !is(&L->cur, ".extern"))
        if (perf_directive(L, k))
            return -1;
    if (!is_punct(&L->cur, '{')) { /* a declaration (.extern .entry ...;): no kernel here */
        drk_kernel_info_clear(k);
        out->nkernels--;
    }
    return 0;
}

/* "X.Y" */
static int version(lexer *L, drk_ptx *out)
{
    unsigned line = L->cur.line;
    if (next(L))
        return -1;
    const tok *t = &L->cur;
    const char *dot = t->kind == TOK_NUM ? memchr(t->s, '.', t->n) : NULL;
    uint64_t maj, min;
    tok a = *t, b = *t;
    if (dot) {
        a.n = (size_t)(dot - t->s);
        b.s = dot + 1;
        b.n = t->n - a.n - 1;
    }
    if (!dot || !tok_uint(&a, 999, &maj) || !tok_uint(&b, 999, &min))
        return drk_fail(L->err, L->errlen, "ptx: line %u: bad .version", line);
    out->version_major = (unsigned)maj;
    out->version_minor = (unsigned)min;
    return next(L);
}

/* `sm_90a[, texmode_..., debug]`: the first name is the SM. */
static int target(lexer *L, drk_ptx *out)
{
    unsigned line = L->cur.line;
    if (next(L))
        return -1;
    const tok *t = &L->cur;
    if (t->kind != TOK_IDENT || t->n >= sizeof out->target_name)
        return drk_fail(L->err, L->errlen, "ptx: line %u: bad .target", line);
    memcpy(out->target_name, t->s, t->n);
    out->target_name[t->n] = '\0';
    const char *u = memchr(out->target_name, '_', t->n);
    out->target = u ? (unsigned)strtoul(u + 1, NULL, 10) : 0;
    do {
        if (next(L))
            return -1;
    } while (L->cur.kind == TOK_IDENT || is_punct(&L->cur, ','));
    return 0;
}

static int parse(lexer *L, drk_ptx *out)
{
    unsigned depth = 0;
    if (next(L))
        return -1;
    if (L->cur.kind != TOK_DIR)
        return drk_fail(L->err, L->errlen, "ptx: line %u: not PTX (no directive first)", L->cur.line);
    while (L->cur.kind != TOK_END) {
        tok *t = &L->cur;
        int rc = 0;
        if (is_punct(t, '{')) {
            depth++;
            rc = next(L);
        } else if (is_punct(t, '}')) {
            if (depth == 0)
                return drk_fail(L->err, L->errlen, "ptx: line %u: unbalanced }", t->line);
            depth--;
            rc = next(L);
        } else if (depth == 0 && is(t, ".entry")) {
            rc = entry(L, out);
        } else if (depth == 0 && is(t, ".version")) {
            rc = version(L, out);
        } else if (depth == 0 && is(t, ".target")) {
            rc = target(L, out);
        } else {
            rc = next(L);
        }
        if (rc)
            return -1;
    }
    if (depth)
        return drk_fail(L->err, L->errlen, "ptx: the text ends inside a body ({ without })");
    return 0;
}

int drk_ptx_read(const char *text, size_t len, drk_ptx *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return drk_fail(err, errlen, "ptx: no text");
    lexer L = {.p = text, .end = text + len, .line = 1, .err = err, .errlen = errlen};
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
    lexer L = {.p = data, .end = (const char *)data + (size > 4096 ? 4096 : size), .line = 1};
    if (next(&L) || L.cur.kind != TOK_DIR)
        return 0;
    return is(&L.cur, ".version") || is(&L.cur, ".target") || is(&L.cur, ".address_size");
}
