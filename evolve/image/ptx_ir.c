/* PTX text into the transfer rules of ptx_ir.h, in two passes: the module
 * scope (variables, functions, their parameter names, where their bodies
 * are), then every body, statement by statement. What it does not know it
 * does not guess: an unknown directive, name or operand form marks the
 * function UNPARSED (the whole module, at module scope). No recursion; every
 * loop advances the lexer, so time is linear in the text. */
#include "evolve/image/ptx_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/ptx_lex.h"

/* Counts beyond this (nodes, instructions, ids, names) are not believed:
 * such a module is too large to analyse. */
#define IR_MAX ((size_t)1 << 28)
/* Units of one kernel's parameter buffer: 64 KiB, twice the driver's limit. */
#define MAX_UNITS 8192u
#define MAX_OPS 32
#define MAX_MODS 24
/* Registers named %<letters><number> (%r12, %rd3, %f7, %p1: nvcc's and
 * LLVM's) are found by number in a per-function map, not hashed. */
#define FAST_PREFIXES 16
#define FAST_MAX_NUMBER (1u << 18)

/* What a declared name stands for. */
enum { NK_REG, NK_CELL, NK_KPARAM, NK_VAR, NK_GVAR, NK_FUNC };

/* A name as an operand resolves it. */
enum { R_NONE, R_NODE, R_CELL, R_KPARAM, R_SYM, R_GVAR, R_FUNC, R_ENV, R_UNKNOWN };

typedef struct ref {
    uint32_t kind, id; /* id: a node, a parameter's ordinal, a function */
    uint32_t elem;     /* its element in a {..} or (..) list */
    const char *s;
    uint32_t n;
} ref;

enum { O_PLAIN, O_ADDR, O_LIST };

typedef struct opnd {
    int kind;
    uint32_t first, n; /* refs[first..] */
    uint32_t nelems;   /* elements of a {..} or (..) list (0 if empty); 1 otherwise */
    int64_t disp;      /* O_ADDR: the sum of its numbers */
    int bad_disp;
} opnd;

typedef struct regmap {
    const char *s; /* the prefix, with its % */
    uint32_t n;
    uint32_t *node; /* by number: the node, or IR_NONE */
    uint32_t cap, hi;
} regmap;

typedef struct parser {
    drk_ir *ir;
    const drk_ptx *ptx;
    drk_ptx_lexer L;
    int lexfail;
    uint32_t fn; /* the function whose body is read */
    uint32_t at; /* the statement's offset */
    ref *refs;
    size_t nrefs, refcap;
    opnd ops[MAX_OPS];
    unsigned nops;
    drk_ir_name op, mods[MAX_MODS];
    unsigned nmods;
    regmap pre[FAST_PREFIXES];
    unsigned npre;
} parser;

/* ------------------------------------------------------------ storage */

static int grow_(drk_ir *ir, void *pp, size_t *cap, size_t n, size_t add, size_t elem)
{
    if (n + add <= *cap)
        return 0;
    if (ir->nomem)
        return -1;
    if (n + add > IR_MAX) {
        if (!ir->broken[0])
            snprintf(ir->broken, sizeof ir->broken, "the module is too large to analyse");
        return -1;
    }
    size_t c = *cap ? *cap : 16;
    while (c < n + add)
        c *= 2;
    void *p;
    memcpy(&p, pp, sizeof p);
    void *q = realloc(p, c * elem);
    if (!q) {
        ir->nomem = 1;
        return -1;
    }
    memcpy(pp, &q, sizeof q);
    *cap = c;
    return 0;
}
#define GROW(ir, arr, n, cap, add) grow_((ir), &(arr), &(cap), (n), (add), sizeof *(arr))

static uint64_t name_hash(const char *s, uint32_t n, uint32_t fn)
{
    uint64_t h = 1469598103934665603ull ^ fn;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 31);
}

static drk_ir_slot *slot_find(const drk_ir *ir, const char *s, uint32_t n, uint32_t fn)
{
    if (!ir->slotcap)
        return NULL;
    uint64_t h = name_hash(s, n, fn);
    size_t mask = ir->slotcap - 1;
    for (size_t j = h & mask;; j = (j + 1) & mask) {
        drk_ir_slot *e = &ir->slots[j];
        if (!e->s)
            return NULL;
        if (e->hash == (uint32_t)h && e->fn == fn && e->n == n && memcmp(e->s, s, n) == 0)
            return e;
    }
}

static int slots_grow(drk_ir *ir)
{
    size_t cap = ir->slotcap ? ir->slotcap * 2 : 1024;
    if (cap > 2 * IR_MAX) {
        snprintf(ir->broken, sizeof ir->broken, "the module is too large to analyse");
        return -1;
    }
    drk_ir_slot *v = calloc(cap, sizeof *v);
    if (!v) {
        ir->nomem = 1;
        return -1;
    }
    for (size_t i = 0; i < ir->slotcap; i++) {
        drk_ir_slot *e = &ir->slots[i];
        if (!e->s)
            continue;
        size_t j = e->hash & (cap - 1);
        while (v[j].s)
            j = (j + 1) & (cap - 1);
        v[j] = *e;
    }
    free(ir->slots);
    ir->slots = v;
    ir->slotcap = cap;
    return 0;
}

/* The name's slot, added with kind and id if new (*fresh then 1); NULL when
 * memory ran out. */
static drk_ir_slot *slot_add(drk_ir *ir, const char *s, uint32_t n, uint32_t fn, uint32_t kind, uint32_t id,
                             int *fresh)
{
    if ((ir->nslots + 1) * 2 > ir->slotcap && slots_grow(ir))
        return NULL;
    uint64_t h = name_hash(s, n, fn);
    size_t mask = ir->slotcap - 1, j = h & mask;
    for (;; j = (j + 1) & mask) {
        drk_ir_slot *e = &ir->slots[j];
        if (!e->s)
            break;
        if (e->hash == (uint32_t)h && e->fn == fn && e->n == n && memcmp(e->s, s, n) == 0) {
            *fresh = 0;
            return e;
        }
    }
    ir->slots[j] = (drk_ir_slot){s, n, fn, (uint32_t)h, kind, id};
    ir->nslots++;
    *fresh = 1;
    return &ir->slots[j];
}

static uint32_t new_node(drk_ir *ir, uint32_t fn)
{
    if (GROW(ir, ir->node_fn, ir->nnodes, ir->nodecap, 1))
        return IR_NONE;
    ir->node_fn[ir->nnodes] = fn;
    return (uint32_t)ir->nnodes++;
}

/* The number of a name of the form %<letters><number> (no leading zero),
 * and its prefix's length; 0 for other names. */
static int fast_name(const char *s, uint32_t n, uint32_t *plen, uint32_t *num)
{
    uint32_t i = 1, v = 0;
    if (n < 3 || s[0] != '%')
        return 0;
    while (i < n && i <= 8 && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
        i++;
    if (i == 1 || i == n || (s[i] == '0' && i + 1 < n))
        return 0;
    for (uint32_t k = i; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return 0;
        v = v * 10 + (uint32_t)(s[k] - '0');
        if (v >= FAST_MAX_NUMBER)
            return 0;
    }
    *plen = i;
    *num = v;
    return 1;
}

/* The register's node in the current function's map (made when new): 1,
 * or 0 when the name is not of the map's form (or its prefix has no room),
 * -1 when memory ran out. A prefix is in the map from its first use on, or
 * never, so a name is always found the same way. */
static int fast_reg(parser *P, const char *s, uint32_t n, uint32_t *node)
{
    uint32_t plen, num;
    if (!fast_name(s, n, &plen, &num))
        return 0;
    regmap *m = NULL;
    for (unsigned k = 0; k < P->npre && !m; k++)
        if (P->pre[k].n == plen && memcmp(P->pre[k].s, s, plen) == 0)
            m = &P->pre[k];
    if (!m) {
        if (P->npre == FAST_PREFIXES)
            return 0;
        m = &P->pre[P->npre++];
        m->s = s;
        m->n = plen;
    }
    if (num >= m->cap) {
        uint32_t cap = m->cap ? m->cap : 64;
        while (cap <= num)
            cap *= 2;
        uint32_t *v = realloc(m->node, cap * sizeof *v);
        if (!v) {
            P->ir->nomem = 1;
            return -1;
        }
        memset(v + m->cap, 0xff, (cap - m->cap) * sizeof *v);
        m->node = v;
        m->cap = cap;
    }
    if (num >= m->hi)
        m->hi = num + 1;
    if (m->node[num] == IR_NONE && (m->node[num] = new_node(P->ir, P->fn)) == IR_NONE)
        return -1;
    *node = m->node[num];
    return 1;
}

/* A new function: the map empties (its arrays stay for the next). */
static void fast_reset(parser *P)
{
    for (unsigned k = 0; k < P->npre; k++) {
        memset(P->pre[k].node, 0xff, P->pre[k].hi * sizeof *P->pre[k].node);
        P->pre[k].hi = 0;
    }
    P->npre = 0;
}

/* ------------------------------------------------------------ tokens */

static drk_ptx_tok *cur(parser *P) { return &P->L.cur; }

/* The next token; a lexical error reads as the end (P->lexfail says which). */
static void adv(parser *P)
{
    if (drk_ptx_next(&P->L)) {
        P->lexfail = 1;
        P->L.cur.kind = DRK_TOK_END;
        P->L.cur.s = P->L.p;
        P->L.cur.n = 0;
    }
}

static int at_end(parser *P) { return cur(P)->kind == DRK_TOK_END; }
static int punct(parser *P, char c) { return drk_ptx_is_punct(cur(P), c); }
static int is_tok(parser *P, const char *s) { return drk_ptx_is(cur(P), s); }

static int name_is(const drk_ir_name *m, const char *s)
{
    size_t n = strlen(s);
    return m->n == n && memcmp(m->s, s, n) == 0;
}

static int name_starts(const drk_ir_name *m, const char *s)
{
    size_t n = strlen(s);
    return m->n >= n && memcmp(m->s, s, n) == 0;
}

static drk_ir_name tok_name(const drk_ptx_tok *t) { return (drk_ir_name){t->s, (uint32_t)t->n, 0}; }

static int broken(parser *P, const char *what)
{
    drk_ir *ir = P->ir;
    if (!ir->broken[0]) {
        const drk_ptx_tok *t = cur(P);
        if (P->lexfail)
            snprintf(ir->broken, sizeof ir->broken, "a lexical error near line %u", P->L.line);
        else if (t->kind == DRK_TOK_END)
            snprintf(ir->broken, sizeof ir->broken, "%s at the end of the text", what);
        else
            snprintf(ir->broken, sizeof ir->broken, "%s `%.*s` (line %u)", what, (int)(t->n > 40 ? 40 : t->n), t->s,
                     t->line);
    }
    return -1;
}

/* Past the ';' that ends the statement; stops before a '}' or at the end. */
static void skip_statement(parser *P)
{
    while (!at_end(P) && !punct(P, ';') && !punct(P, '}'))
        adv(P);
    if (punct(P, ';'))
        adv(P);
}

/* cur is `open`: past its balanced `close`; -1 at the end of the text. */
static int skip_balanced(parser *P, char open, char close)
{
    size_t depth = 0;
    do {
        if (at_end(P))
            return -1;
        if (punct(P, open))
            depth++;
        else if (punct(P, close))
            depth--;
        adv(P);
    } while (depth);
    return 0;
}

/* ------------------------------------------------------------ flags */

static void flag_fn(drk_ir_fn *f, uint32_t flag, const char *what, const char *name, uint32_t n, uint32_t at)
{
    unsigned b = (unsigned)__builtin_ctz(flag);
    f->flags |= flag;
    if (!f->why[b].what)
        f->why[b] = (drk_ir_why){what, name, n, at};
}

static void flag(parser *P, uint32_t flag, const char *what, const char *name, uint32_t n)
{
    flag_fn(&P->ir->fns[P->fn], flag, what, name, n, P->at);
}

static void unparsed(parser *P, const char *what)
{
    flag(P, DRK_FLOW_UNPARSED, what, NULL, 0);
}

/* ------------------------------------------------------------ declarations */

/* A name declared in `scope` (IR_NONE: module scope) as `kind`. A name
 * declared again keeps its first meaning; with another kind it cannot be
 * followed. -1 when memory ran out. */
static int declare(parser *P, const drk_ptx_tok *t, uint32_t kind, uint32_t scope)
{
    drk_ir *ir = P->ir;
    uint32_t plen, num, node;
    int fresh;
    if (fast_name(t->s, (uint32_t)t->n, &plen, &num)) {
        /* Register-shaped names are registers (the map finds them first). */
        if (scope == IR_NONE)
            return broken(P, "a module name of a register's form");
        if (kind != NK_REG) {
            flag(P, DRK_FLOW_UNPARSED, "the name `%s` of a register's form declared as no register", t->s,
                 (uint32_t)t->n);
            return 0;
        }
        int r = fast_reg(P, t->s, (uint32_t)t->n, &node);
        if (r)
            return r < 0 ? -1 : 0;
    }
    drk_ir_slot *s = slot_add(ir, t->s, (uint32_t)t->n, scope, kind, 0, &fresh);
    if (!s)
        return -1;
    if (!fresh) {
        if (s->kind != kind) {
            if (scope == IR_NONE)
                return broken(P, "a name declared twice");
            flag(P, DRK_FLOW_UNPARSED, "the name `%s` declared twice", t->s, (uint32_t)t->n);
        }
        return 0;
    }
    if (kind == NK_REG || kind == NK_CELL) {
        uint32_t id = new_node(ir, scope);
        if (id == IR_NONE)
            return -1;
        s->id = id; /* new_node leaves the slots where they are */
    }
    return 0;
}

/* `.space ... name[N] <N>, name2 = init;` with cur on the space. */
static int var_decl(parser *P, uint32_t kind, uint32_t scope)
{
    adv(P);
    for (;;) {
        if (at_end(P) || punct(P, '}')) {
            if (scope == IR_NONE)
                return broken(P, "a declaration without ;");
            unparsed(P, "a declaration without ;");
            return 0;
        }
        if (punct(P, ';')) {
            adv(P);
            return 0;
        }
        if (punct(P, '=')) { /* initializers: numbers, names, {..}: none declares */
            while (!at_end(P) && !punct(P, ';'))
                adv(P);
            continue;
        }
        if (punct(P, '(') || punct(P, '[') || punct(P, '<')) { /* .attribute(..), [N], <N> */
            char close = punct(P, '(') ? ')' : punct(P, '[') ? ']' : '>';
            skip_balanced(P, cur(P)->s[0], close);
            continue;
        }
        if (cur(P)->kind == DRK_TOK_IDENT && declare(P, cur(P), kind, scope))
            return -1;
        adv(P);
    }
}

/* `( .param .u64 name, .reg .b32 r, ... )` with cur on '(': the first name
 * of each element, in order, into fnames. */
static int formal_list(parser *P, uint32_t *count)
{
    drk_ir *ir = P->ir;
    drk_ir_name nm = {0};
    int started = 0, have = 0;
    size_t depth = 0;
    *count = 0;
    adv(P);
    for (;;) {
        if (at_end(P))
            return broken(P, "a parameter list without )");
        if (depth == 0 && (punct(P, ',') || punct(P, ')'))) {
            int close = punct(P, ')');
            if (started) {
                if (GROW(ir, ir->fnames, ir->nfnames, ir->fnamecap, 1))
                    return -1;
                ir->fnames[ir->nfnames++] = nm;
                (*count)++;
            }
            nm = (drk_ir_name){0};
            started = have = 0;
            adv(P);
            if (close)
                return 0;
            continue;
        }
        if (punct(P, '('))
            depth++;
        else if (punct(P, ')'))
            depth--;
        else if (depth == 0 && is_tok(P, ".reg"))
            nm.reg = 1;
        else if (depth == 0 && !have && cur(P)->kind == DRK_TOK_IDENT) {
            nm.s = cur(P)->s;
            nm.n = (uint32_t)cur(P)->n;
            have = 1;
        }
        started = 1;
        adv(P);
    }
}

/* `.entry name (params) directives { body }` or `.func (rets) name (params)
 * ...`, or their declarations ending in ';'; cur on .entry / .func. */
static int function_decl(parser *P, int entry)
{
    drk_ir *ir = P->ir;
    drk_ir_name name = {0};
    uint32_t f0 = (uint32_t)ir->nfnames, nrets = 0, nparams = 0;
    int have_name = 0, have_rets = 0, have_params = 0;
    const char *body = NULL, *body_end = NULL;
    unsigned body_line = 0;
    adv(P);
    for (;;) {
        if (at_end(P))
            return broken(P, "a function header without a body or ;");
        if (punct(P, '(')) {
            if (!have_name && !entry && !have_rets) {
                if (formal_list(P, &nrets))
                    return -1;
                have_rets = 1;
            } else if (have_name && !have_params) {
                if (formal_list(P, &nparams))
                    return -1;
                have_params = 1;
            } else {
                return broken(P, "an unexpected ( in a function header");
            }
        } else if (cur(P)->kind == DRK_TOK_IDENT && !have_name) {
            name = tok_name(cur(P));
            have_name = 1;
            adv(P);
        } else if (is_tok(P, ".attribute")) {
            adv(P);
            if (punct(P, '(') && skip_balanced(P, '(', ')'))
                return broken(P, "an .attribute without )");
        } else if (is_tok(P, ".pragma")) {
            skip_statement(P);
        } else if (punct(P, '{')) {
            body = P->L.p;
            body_line = P->L.line;
            if (drk_ptx_skip_block(&P->L, &body_end)) { /* read in the second pass */
                P->lexfail = P->L.failed;
                return broken(P, "a function body without }");
            }
            break;
        } else if (punct(P, ';')) {
            adv(P);
            break;
        } else if (punct(P, '}')) {
            return broken(P, "an unexpected }");
        } else {
            adv(P); /* .maxntid 128, 1, 1 and the like */
        }
    }
    if (!have_name)
        return broken(P, "a function without a name");
    int fresh;
    drk_ir_slot *s = slot_add(ir, name.s, name.n, IR_NONE, NK_FUNC, (uint32_t)ir->nfns, &fresh);
    if (!s)
        return -1;
    if (!fresh && s->kind != NK_FUNC)
        return broken(P, "a function named like a variable");
    drk_ir_fn *f;
    if (fresh) {
        if (GROW(ir, ir->fns, ir->nfns, ir->fncap, 1))
            return -1;
        f = &ir->fns[ir->nfns++];
        memset(f, 0, sizeof *f);
        f->name = name;
        f->kernel = -1;
    } else {
        f = &ir->fns[s->id];
    }
    if (body) {
        if (f->has_body)
            return broken(P, "a function defined twice");
        f->has_body = 1;
        f->body = body;
        f->body_end = body_end;
        f->body_line = body_line;
    }
    if (body || fresh) { /* a definition's names are the ones its body uses */
        f->entry = entry;
        f->formals = f0;
        f->nrets = nrets;
        f->nparams = nparams;
    }
    return 0;
}

static int module_scope(parser *P)
{
    drk_ir *ir = P->ir;
    adv(P);
    while (!at_end(P)) {
        if (ir->nomem || ir->broken[0])
            return -1;
        if (cur(P)->kind != DRK_TOK_DIR) {
            if (punct(P, ';')) {
                adv(P);
                continue;
            }
            return broken(P, "an unexpected token at module scope");
        }
        if (is_tok(P, ".version") || is_tok(P, ".address_size")) {
            adv(P);
            adv(P);
        } else if (is_tok(P, ".target")) {
            do
                adv(P);
            while (cur(P)->kind == DRK_TOK_IDENT || punct(P, ','));
        } else if (is_tok(P, ".file")) { /* .file 1 "name"[, time, size] */
            adv(P);
            adv(P);
            adv(P);
            while (punct(P, ',')) {
                adv(P);
                adv(P);
            }
        } else if (is_tok(P, ".section")) { /* debug sections: .section .debug_info { ... } */
            const char *close;
            while (!at_end(P) && !punct(P, '{'))
                adv(P);
            if (at_end(P) || drk_ptx_skip_block(&P->L, &close)) {
                P->lexfail |= P->L.failed;
                return broken(P, "a .section without }");
            }
        } else if (is_tok(P, ".pragma") || is_tok(P, ".alias")) {
            skip_statement(P);
        } else if (is_tok(P, ".visible") || is_tok(P, ".extern") || is_tok(P, ".weak") || is_tok(P, ".common")) {
            adv(P);
        } else if (is_tok(P, ".entry") || is_tok(P, ".func")) {
            if (function_decl(P, is_tok(P, ".entry")))
                return -1;
        } else if (is_tok(P, ".global") || is_tok(P, ".const") || is_tok(P, ".tex")) {
            if (var_decl(P, NK_GVAR, IR_NONE))
                return -1;
        } else if (is_tok(P, ".shared") || is_tok(P, ".local")) {
            if (var_decl(P, NK_VAR, IR_NONE))
                return -1;
        } else {
            return broken(P, "an unknown directive at module scope");
        }
    }
    return P->lexfail ? broken(P, "") : 0;
}

/* Each kernel of `ptx` gets its function, and its parameter buffer in units. */
static int map_kernels(parser *P)
{
    drk_ir *ir = P->ir;
    for (size_t i = 0; i < P->ptx->nkernels; i++) {
        const drk_kernel_info *k = &P->ptx->kernels[i];
        drk_ir_slot *s = k->name ? slot_find(ir, k->name, (uint32_t)strlen(k->name), IR_NONE) : NULL;
        if (!s || s->kind != NK_FUNC)
            continue;
        drk_ir_fn *f = &ir->fns[s->id];
        if (!f->entry || !f->has_body || f->kernel >= 0)
            continue;
        f->kernel = (long)i;
        if (k->nparams != f->nparams) {
            flag_fn(f, DRK_FLOW_UNPARSED, "its parameters differ from the PTX reader's", NULL, 0, IR_NONE);
            continue;
        }
        uint64_t n = 0;
        for (uint32_t j = 0; j < k->nparams; j++)
            n += k->params[j].size <= 8 ? 1 : (k->params[j].size + 7u) / 8u;
        if (n > MAX_UNITS) {
            flag_fn(f, DRK_FLOW_UNPARSED, "a parameter buffer too large to analyse", NULL, 0, IR_NONE);
            continue;
        }
        if (GROW(ir, ir->units, ir->nunits, ir->unitcap, (size_t)n))
            return -1;
        f->units = (uint32_t)ir->nunits;
        for (uint32_t j = 0; j < k->nparams; j++) {
            const drk_param *p = &k->params[j];
            uint32_t words = p->size <= 8 ? 1 : (p->size + 7u) / 8u;
            for (uint32_t w = 0; w < words; w++) {
                uint32_t size = p->size <= 8 ? p->size : (w + 1 < words ? 8 : p->size - 8 * w);
                ir->units[ir->nunits++] = (drk_ir_unit){p->offset + 8 * w, size, j, 0};
            }
        }
        f->nunits = (uint32_t)n;
    }
    return 0;
}

/* ------------------------------------------------------------ emitting */

static int push_ins(parser *P, uint8_t rule, uint8_t gen, uint32_t ops, uint32_t nd, uint32_t ns, uint32_t addrs,
                    uint32_t na, uint32_t ulo, uint32_t uhi)
{
    drk_ir *ir = P->ir;
    if (nd > UINT16_MAX || ns > UINT16_MAX || na > UINT16_MAX) {
        unparsed(P, "an instruction with too many operands");
        return 0;
    }
    if (GROW(ir, ir->ins, ir->nins, ir->inscap, 1))
        return -1;
    ir->ins[ir->nins++] = (drk_ir_ins){P->fn, P->at, rule, gen, (uint16_t)nd, (uint16_t)ns, (uint16_t)na,
                                       ops, addrs, ulo, uhi};
    return 0;
}

/* Appends the nodes among refs of operand o (elements to one id each). */
static int push_nodes(parser *P, const opnd *o, uint32_t *count)
{
    drk_ir *ir = P->ir;
    if (GROW(ir, ir->ids, ir->nids, ir->idscap, o->n))
        return -1;
    for (uint32_t i = 0; i < o->n; i++) {
        const ref *r = &P->refs[o->first + i];
        if (r->kind == R_NODE || r->kind == R_CELL) {
            ir->ids[ir->nids++] = r->id;
            (*count)++;
        }
    }
    return 0;
}

/* The fixed bits the names of operand o bring: addresses of variables,
 * functions and parameters; %envreg. */
static uint8_t ref_gen(const parser *P, const opnd *o)
{
    uint8_t g = 0;
    for (uint32_t i = 0; i < o->n; i++) {
        uint32_t k = P->refs[o->first + i].kind;
        if (k == R_SYM || k == R_GVAR || k == R_FUNC || k == R_KPARAM)
            g |= IR_SYM | IR_ADDR;
        else if (k == R_ENV)
            g |= IR_ENV;
    }
    return g;
}

/* dests <- rule(sources): the nodes of operand 0 (when `dests`) and of
 * operands [s0, s1). */
static int emit_alu(parser *P, uint8_t rule, uint8_t gen, unsigned s0, unsigned s1)
{
    drk_ir *ir = P->ir;
    uint32_t ops = (uint32_t)ir->nids, nd = 0, ns = 0;
    if (push_nodes(P, &P->ops[0], &nd))
        return -1;
    if (!nd) {
        ir->nids = ops;
        return 0;
    }
    for (unsigned i = s0; i < s1 && i < P->nops; i++) {
        if (push_nodes(P, &P->ops[i], &ns))
            return -1;
        gen |= ref_gen(P, &P->ops[i]);
    }
    /* The offset rules need two nodes; with a name among the sources, unite. */
    if ((rule == IR_OFFSET || rule == IR_DIFF) && (ns != 2 || (gen & ~IR_ADDR)))
        rule = IR_UNITE;
    return push_ins(P, rule, gen, ops, nd, ns, 0, 0, 0, 0);
}

/* ------------------------------------------------------------ operands */

static int add_ref(parser *P, ref r)
{
    if (GROW(P->ir, P->refs, P->nrefs, P->refcap, 1))
        return -1;
    P->refs[P->nrefs++] = r;
    return 0;
}

static ref resolve(parser *P, const drk_ptx_tok *t, uint32_t elem)
{
    drk_ir *ir = P->ir;
    ref r = {R_UNKNOWN, 0, elem, t->s, (uint32_t)t->n};
    if ((t->n == 1 && t->s[0] == '_') || drk_ptx_is(t, "WARP_SZ")) { /* a result not wanted; a constant */
        r.kind = R_NONE;
        return r;
    }
    if (t->s[0] == '%' && !(t->n >= 7 && memcmp(t->s, "%envreg", 7) == 0)) {
        int f = fast_reg(P, t->s, (uint32_t)t->n, &r.id);
        if (f) {
            r.kind = f > 0 ? R_NODE : R_NONE;
            return r;
        }
    }
    const drk_ir_slot *s = slot_find(ir, t->s, (uint32_t)t->n, P->fn);
    if (!s)
        s = slot_find(ir, t->s, (uint32_t)t->n, IR_NONE);
    if (s) {
        static const uint32_t as_ref[] = {[NK_REG] = R_NODE, [NK_CELL] = R_CELL, [NK_KPARAM] = R_KPARAM,
                                          [NK_VAR] = R_SYM, [NK_GVAR] = R_GVAR, [NK_FUNC] = R_FUNC};
        r.kind = as_ref[s->kind];
        r.id = s->id;
        return r;
    }
    if (t->s[0] != '%')
        return r; /* a label, or a name nothing declared */
    if (t->n >= 7 && memcmp(t->s, "%envreg", 7) == 0) {
        r.kind = R_ENV;
        return r;
    }
    /* %r5 of `.reg .b32 %r<9>`, %tid, %clock64...: registers by their names. */
    if (declare(P, t, NK_REG, P->fn)) {
        r.kind = R_NONE;
        return r;
    }
    s = slot_find(ir, t->s, (uint32_t)t->n, P->fn);
    r.kind = s && s->kind == NK_REG ? R_NODE : R_NONE;
    r.id = s ? s->id : 0;
    return r;
}

/* One operand, through the ',' or ';' after it (not consumed). -1: the
 * instruction cannot be read (flagged), or memory ran out. */
static int operand(parser *P, opnd *o)
{
    *o = (opnd){O_PLAIN, (uint32_t)P->nrefs, 0, 1, 0, 0};
    size_t depth = 0;
    int sign = 1, started = 0, inner = 0;
    uint32_t elem = 0;
    for (;; adv(P)) {
        const drk_ptx_tok *t = cur(P);
        if (t->kind == DRK_TOK_END) {
            unparsed(P, "an instruction without ;");
            return -1;
        }
        if (depth == 0 && (punct(P, ',') || punct(P, ';')))
            break;
        if (punct(P, '[') || punct(P, '(') || punct(P, '{')) {
            if (depth == 0 && !started)
                o->kind = punct(P, '[') ? O_ADDR : punct(P, '(') ? O_LIST : O_PLAIN;
            depth++;
        } else if (punct(P, ']') || punct(P, ')') || punct(P, '}')) {
            if (depth == 0) {
                unparsed(P, "an instruction it cannot read");
                return -1;
            }
            depth--;
        } else if (punct(P, ',')) {
            if (depth == 1)
                elem++;
        } else if (t->kind == DRK_TOK_IDENT) {
            if (add_ref(P, resolve(P, t, elem)))
                return -1;
            o->n++;
        } else if (t->kind == DRK_TOK_NUM) {
            uint64_t v;
            if (o->kind == O_ADDR && drk_ptx_tok_uint(t, (uint64_t)1 << 40, &v))
                o->disp += sign * (int64_t)v;
            else
                o->bad_disp = 1;
            sign = 1;
        } else if (punct(P, '-')) {
            sign = -sign;
        } else if (!punct(P, '+')) {
            o->bad_disp = 1;
        }
        if (depth >= 1 && !(depth == 1 && (punct(P, '{') || punct(P, '('))))
            inner = 1;
        started = 1;
    }
    if (depth) {
        unparsed(P, "an instruction it cannot read");
        return -1;
    }
    o->nelems = inner ? elem + 1 : o->kind == O_LIST ? 0 : 1;
    return P->ir->nomem ? -1 : 0;
}

/* ------------------------------------------------------------ instructions */

static int op_is(const parser *P, const char *s) { return name_is(&P->op, s); }

static int op_in(const parser *P, const char *const *list)
{
    for (; *list; list++)
        if (P->op.s[0] == (*list)[0] && op_is(P, *list)) /* the first letter, before a strlen */
            return 1;
    return 0;
}

static int has_mod(const parser *P, const char *s)
{
    for (unsigned i = 0; i < P->nmods; i++)
        if (name_is(&P->mods[i], s))
            return 1;
    return 0;
}

static int has_mod_prefix(const parser *P, const char *s)
{
    for (unsigned i = 0; i < P->nmods; i++)
        if (name_starts(&P->mods[i], s))
            return 1;
    return 0;
}

/* Bytes of a type modifier (0: not a type); *is_float for floating types. */
static unsigned type_bytes(const drk_ir_name *m, int *is_float)
{
    static const struct {
        const char *name;
        unsigned size, fl;
    } types[] = {
        {".b8", 1, 0},     {".u8", 1, 0},      {".s8", 1, 0},      {".b16", 2, 0},    {".u16", 2, 0},
        {".s16", 2, 0},    {".b32", 4, 0},     {".u32", 4, 0},     {".s32", 4, 0},    {".b64", 8, 0},
        {".u64", 8, 0},    {".s64", 8, 0},     {".b128", 16, 0},   {".pred", 1, 0},   {".f16", 2, 1},
        {".bf16", 2, 1},   {".f16x2", 4, 1},   {".bf16x2", 4, 1},  {".f32", 4, 1},    {".f64", 8, 1},
        {".tf32", 4, 1},   {".e4m3", 1, 1},    {".e5m2", 1, 1},    {".e4m3x2", 2, 1}, {".e5m2x2", 2, 1},
        {".f32x2", 8, 1},  {".e2m1x2", 1, 1},  {".e3m2x2", 2, 1},  {".e2m3x2", 2, 1}, {".ue8m0x2", 2, 1},
        {".e4m3x4", 4, 1}, {".e5m2x4", 4, 1},  {".f16x4", 8, 1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (name_is(m, types[i].name)) {
            if (is_float)
                *is_float = (int)types[i].fl;
            return types[i].size;
        }
    return 0;
}

static int any_float(const parser *P)
{
    for (unsigned i = 0; i < P->nmods; i++) {
        int fl = 0;
        if (type_bytes(&P->mods[i], &fl) && fl)
            return 1;
    }
    return 0;
}

/* Flags of the names an instruction uses. `param_addr`: the operand that
 * may name a parameter (ld.param, st.param), or -1. `call`: names in a
 * call's lists are its cells. */
static void scan_refs(parser *P, int param_addr, int call)
{
    for (unsigned i = 0; i < P->nops; i++) {
        const opnd *o = &P->ops[i];
        for (uint32_t j = 0; j < o->n; j++) {
            const ref *r = &P->refs[o->first + j];
            if (r->kind == R_GVAR)
                flag(P, DRK_FLOW_MODULE_GLOBALS, "uses module global `%s`", r->s, r->n);
            else if (r->kind == R_ENV)
                flag(P, DRK_FLOW_COOPERATIVE, "grid sync (cooperative launch): reads `%s`", r->s, r->n);
            else if (r->kind == R_FUNC && !call)
                flag(P, DRK_FLOW_INDIRECT, "takes the address of function `%s`", r->s, r->n);
            else if (r->kind == R_UNKNOWN && !call)
                flag(P, DRK_FLOW_UNPARSED, "an unknown name `%s`", r->s, r->n);
            else if ((r->kind == R_KPARAM || (r->kind == R_CELL && !call)) && (int)i != param_addr)
                flag(P, DRK_FLOW_PARAM_ADDRESS, "takes the address of parameter `%s`", r->s, r->n);
        }
    }
}

/* ld.param: each element of the destination gets the units its bytes lie
 * in (a kernel's parameter) or the cell's taint (a function's). */
static int param_load(parser *P)
{
    drk_ir *ir = P->ir;
    drk_ir_fn *f = &ir->fns[P->fn];
    if (P->nops < 2 || P->ops[0].kind == O_ADDR || P->ops[1].kind != O_ADDR) {
        unparsed(P, "a parameter load it cannot read");
        return 0;
    }
    const opnd *d = &P->ops[0], *a = &P->ops[1];
    const ref *pr = a->n == 1 ? &P->refs[a->first] : NULL;
    if (!pr || a->bad_disp || (pr->kind != R_KPARAM && pr->kind != R_CELL)) {
        flag(P, DRK_FLOW_PARAM_ADDRESS, "reads a parameter through a computed address", NULL, 0);
        return 0;
    }
    if (pr->kind == R_CELL) {
        uint32_t ops = (uint32_t)ir->nids, nd = 0;
        if (push_nodes(P, d, &nd) || GROW(ir, ir->ids, ir->nids, ir->idscap, 1))
            return -1;
        if (!nd)
            return 0;
        ir->ids[ir->nids++] = pr->id;
        return push_ins(P, IR_UNITE, 0, ops, nd, 1, 0, 0, 0, 0);
    }
    if (f->kernel < 0 || !f->nunits || pr->id >= P->ptx->kernels[f->kernel].nparams)
        return 0; /* no layout: the kernel is UNPARSED already */
    const drk_param *p = &P->ptx->kernels[f->kernel].params[pr->id];
    unsigned esize = 0;
    for (unsigned i = P->nmods; i-- > 0 && !esize;)
        esize = type_bytes(&P->mods[i], NULL);
    uint32_t nvec = has_mod(P, ".v2") ? 2 : has_mod(P, ".v4") ? 4 : has_mod(P, ".v8") ? 8 : 1;
    if (!esize) {
        unparsed(P, "a parameter load of no known size");
        return 0;
    }
    if (a->disp < 0 || (uint64_t)a->disp + (uint64_t)esize * nvec > p->size) {
        flag(P, DRK_FLOW_UNPARSED, "a load past the end of parameter `%s`", pr->s, pr->n);
        return 0;
    }
    const drk_ir_unit *u = &ir->units[f->units];
    for (uint32_t i = 0; i < d->n; i++) {
        const ref *r = &P->refs[d->first + i];
        if (r->kind != R_NODE || r->elem >= nvec)
            continue;
        uint64_t lo = p->offset + (uint64_t)a->disp + (uint64_t)r->elem * esize, hi = lo + esize;
        uint32_t ulo = f->nunits, uhi = 0;
        for (uint32_t k = 0; k < f->nunits; k++)
            if (u[k].offset < hi && u[k].offset + u[k].size > lo) {
                ulo = k < ulo ? k : ulo;
                uhi = k + 1;
                ir->units[f->units + k].read = 1;
            }
        if (uhi <= ulo)
            continue;
        uint32_t ops = (uint32_t)ir->nids;
        if (GROW(ir, ir->ids, ir->nids, ir->idscap, 1))
            return -1;
        ir->ids[ir->nids++] = r->id;
        if (push_ins(P, IR_UNITE, 0, ops, 1, 0, 0, 0, ulo, uhi))
            return -1;
    }
    return 0;
}

/* st.param into a call's cell (or a function's return cell). */
static int param_store(parser *P)
{
    drk_ir *ir = P->ir;
    const opnd *a = &P->ops[0];
    const ref *pr = P->nops >= 2 && a->kind == O_ADDR && a->n == 1 ? &P->refs[a->first] : NULL;
    if (!pr || (pr->kind != R_CELL && pr->kind != R_KPARAM)) {
        flag(P, DRK_FLOW_PARAM_ADDRESS, "writes a parameter through a computed address", NULL, 0);
        return 0;
    }
    if (pr->kind == R_KPARAM) {
        flag(P, DRK_FLOW_UNPARSED, "writes kernel parameter `%s`", pr->s, pr->n);
        return 0;
    }
    uint32_t ops = (uint32_t)ir->nids, ns = 0;
    uint8_t gen = 0;
    if (GROW(ir, ir->ids, ir->nids, ir->idscap, 1))
        return -1;
    ir->ids[ir->nids++] = pr->id;
    for (unsigned i = 1; i < P->nops; i++) {
        if (push_nodes(P, &P->ops[i], &ns))
            return -1;
        gen |= ref_gen(P, &P->ops[i]);
    }
    return push_ins(P, IR_UNITE, gen, ops, 1, ns, 0, 0, 0, 0);
}

/* Whether an instruction with these modifiers addresses memory where
 * pointers are found: global, const, or generic (no space named); not when
 * it names only shared or local spaces, nor tensor memory (tcgen05: the
 * CTA's own, as shared memory is). */
static int sink_space(const parser *P)
{
    int named = 0, private_only = 1;
    if (op_is(P, "tcgen05"))
        return 0;
    for (unsigned i = 0; i < P->nmods; i++) {
        const drk_ir_name *m = &P->mods[i];
        if (name_is(m, ".global") || name_is(m, ".const") || name_starts(m, ".param")) {
            named = 1;
            private_only = 0;
        } else if (name_starts(m, ".shared") || name_is(m, ".local")) {
            named = 1;
        }
    }
    return !named || !private_only;
}

/* Opcodes whose first operand is never a destination. */
static const char *const no_dest[] = {"st", "red", "bra", "brx", "call", "ret", "exit", "trap", "cp", "prefetch",
                                      "prefetchu", "discard", "applypriority", "pmevent", "nanosleep", "stmatrix",
                                      "membar", "fence", "griddepcontrol", "setmaxnreg", "brkpt", "tensormap", NULL};

static int first_is_dest(const parser *P)
{
    if ((op_is(P, "bar") || op_is(P, "barrier")) && !has_mod(P, ".red"))
        return 0;
    return P->nops && P->ops[0].kind == O_PLAIN && !op_in(P, no_dest);
}

/* A memory access: the destination gets IR_MEM; stored values are kept for
 * the stores check; each address operand is a sink or not. */
static int mem_ins(parser *P)
{
    drk_ir *ir = P->ir;
    static const char *const storing[] = {"st", "red", "atom", "multimem", NULL};
    int sink = sink_space(P), stores = op_in(P, storing), dest = first_is_dest(P);
    uint32_t ops = (uint32_t)ir->nids, nd = 0, ns = 0;
    if (dest && push_nodes(P, &P->ops[0], &nd))
        return -1;
    for (unsigned i = dest ? 1 : 0; stores && i < P->nops; i++)
        if (P->ops[i].kind != O_ADDR && push_nodes(P, &P->ops[i], &ns))
            return -1;
    uint32_t addrs = (uint32_t)ir->naddrs, na = 0;
    for (unsigned i = 0; sink && i < P->nops; i++) {
        const opnd *o = &P->ops[i];
        if (o->kind != O_ADDR)
            continue;
        uint32_t aops = (uint32_t)ir->nids, n = 0;
        if (push_nodes(P, o, &n) || GROW(ir, ir->addrs, ir->naddrs, ir->addrcap, 1))
            return -1;
        ir->addrs[ir->naddrs++] = (drk_ir_addr){aops, n, ref_gen(P, o), 1};
        na++;
    }
    if (!nd && !na) {
        ir->nids = ops;
        return 0;
    }
    return push_ins(P, IR_ACCESS, IR_MEM, ops, nd, ns, addrs, na, 0, 0);
}

/* call [(rets),] target[, (args)][, prototype]: a known name, a module
 * function (its edges are made once every body is read), or else. */
static int call_ins(parser *P)
{
    drk_ir *ir = P->ir;
    unsigned i = 0;
    const opnd *rets = NULL, *args = NULL;
    if (i < P->nops && P->ops[i].kind == O_LIST)
        rets = &P->ops[i++];
    if (i >= P->nops || P->ops[i].kind != O_PLAIN || P->ops[i].n != 1) {
        unparsed(P, "a call it cannot read");
        return 0;
    }
    const ref *tg = &P->refs[P->ops[i++].first];
    if (i < P->nops && P->ops[i].kind == O_LIST)
        args = &P->ops[i++];
    const opnd *lists[2] = {rets, args};
    scan_refs(P, -1, 1);
    for (int l = 0; l < 2; l++)
        for (uint32_t j = 0; lists[l] && j < lists[l]->n; j++) {
            const ref *r = &P->refs[lists[l]->first + j];
            if (r->kind == R_UNKNOWN)
                flag(P, DRK_FLOW_UNPARSED, "an unknown name `%s`", r->s, r->n);
        }
    if (tg->kind == R_NODE) {
        flag(P, DRK_FLOW_INDIRECT, "an indirect call", NULL, 0);
        return 0;
    }
    if (tg->kind != R_FUNC) {
        flag(P, DRK_FLOW_UNPARSED, "a call of the unknown name `%s`", tg->s, tg->n);
        return 0;
    }
    const drk_ir_fn *c = &ir->fns[tg->id];
    if (name_is(&c->name, "vprintf")) {
        flag(P, DRK_FLOW_PRINTF, "device printf", NULL, 0);
        return 0;
    }
    if (name_is(&c->name, "__assertfail") || name_is(&c->name, "__assert_fail")) {
        flag(P, DRK_FLOW_TRAPS, "device assert", NULL, 0);
        return 0;
    }
    if (name_starts(&c->name, "cudaCG")) {
        flag(P, DRK_FLOW_COOPERATIVE, "grid sync (cooperative launch): calls `%s`", c->name.s, c->name.n);
        return 0;
    }
    if (!c->has_body) {
        flag(P, DRK_FLOW_CALLS_UNKNOWN, "calls `%s`, which is not in the module", c->name.s, c->name.n);
        return 0;
    }
    uint32_t nr = rets ? rets->nelems : 0, na = args ? args->nelems : 0;
    if (nr != c->nrets || na != c->nparams) {
        flag(P, DRK_FLOW_UNPARSED, "a call of `%s` whose arguments do not match its parameters", c->name.s, c->name.n);
        return 0;
    }
    if (GROW(ir, ir->calls, ir->ncalls, ir->callcap, 1) || GROW(ir, ir->ids, ir->nids, ir->idscap, nr + na))
        return -1;
    drk_ir_call *cl = &ir->calls[ir->ncalls++];
    *cl = (drk_ir_call){P->fn, tg->id, P->at, (uint32_t)ir->nids, nr, (uint32_t)ir->nids + nr, na};
    for (uint32_t j = 0; j < nr + na; j++)
        ir->ids[ir->nids + j] = IR_NONE;
    for (int l = 0; l < 2; l++)
        for (uint32_t j = 0; lists[l] && j < lists[l]->n; j++) {
            const ref *r = &P->refs[lists[l]->first + j];
            uint32_t base = l ? cl->args : cl->rets, max = l ? na : nr;
            if ((r->kind == R_NODE || r->kind == R_CELL) && r->elem < max)
                ir->ids[base + r->elem] = r->id;
        }
    ir->nids += nr + na;
    flag(P, DRK_FLOW_CALLS, "calls `%s`", c->name.s, c->name.n);
    return 0;
}

/* Register arithmetic. The rules that matter: a pointer keeps its taint
 * through moves, adds, logic and selects; an offset scaled (mul, shl, a
 * 32-bit value widened) or float arithmetic is no base; an unknown opcode
 * passes every source on (never loses a pointer). */
static int alu_ins(parser *P)
{
    static const char *const drops[] = {"mul", "mul24", "shl", "shr", "shf", "div", "rem", "setp", "set", "testp",
                                        "popc", "clz", "bfind", "brev", "fns", "sad", "dp4a", "dp2a", "fma", "sqrt",
                                        "rsqrt", "rcp", "sin", "cos", "lg2", "ex2", "tanh", "copysign", "cnot",
                                        "isspacep", "istypep", "getctarank", NULL};
    static const char *const float_ok[] = {"mov", "selp", "slct", "shfl", "prmt", "vote", "match", "redux", NULL};
    if (!first_is_dest(P))
        return 0;
    if (op_is(P, "mov"))
        return emit_alu(P, IR_UNITE, 0, 1, P->nops);
    if (op_is(P, "cvta"))
        return emit_alu(P, IR_UNITE, IR_ADDR, 1, P->nops);
    if (op_is(P, "alloca") || op_is(P, "stacksave"))
        return emit_alu(P, IR_UNITE, IR_SYM | IR_ADDR, 0, 0);
    if (op_is(P, "cvt")) {
        unsigned sz[2] = {0, 0}, n = 0;
        for (unsigned i = 0; i < P->nmods && n < 2; i++) {
            int fl = 0;
            unsigned b = type_bytes(&P->mods[i], &fl);
            if (b && fl)
                return 0;
            if (b)
                sz[n++] = b;
        }
        if (n == 2 && sz[0] == 8 && sz[1] <= 4)
            return emit_alu(P, IR_WIDEN, 0, 1, P->nops); /* a 32-bit value widened: an index */
        return emit_alu(P, IR_UNITE, 0, 1, P->nops);
    }
    if (op_in(P, drops) || (any_float(P) && !op_in(P, float_ok)))
        return 0;
    if (op_is(P, "add") || op_is(P, "and") || op_is(P, "or") || op_is(P, "xor"))
        return emit_alu(P, IR_OFFSET, 0, 1, P->nops);
    if (op_is(P, "sub"))
        return emit_alu(P, IR_DIFF, 0, 1, P->nops);
    if (op_is(P, "mad") || op_is(P, "mad24") || op_is(P, "madc"))
        return emit_alu(P, IR_UNITE, 0, 3, 4); /* the addend only: a*b is scaled */
    if (op_is(P, "selp") || op_is(P, "slct"))
        return emit_alu(P, IR_UNITE, 0, 1, 3);
    return emit_alu(P, IR_UNITE, 0, 1, P->nops);
}

static int dispatch(parser *P)
{
    static const char *const handles[] = {"tex", "tld4", "txq", "suld", "sust", "sured", "suq", "istypep",
                                          "tensormap", NULL};
    if (op_is(P, "bra") || op_is(P, "ret") || op_is(P, "exit"))
        return 0;
    if (op_is(P, "trap")) {
        flag(P, DRK_FLOW_TRAPS, "traps", NULL, 0);
        return 0;
    }
    if (op_is(P, "brx")) {
        flag(P, DRK_FLOW_INDIRECT, "an indirect branch", NULL, 0);
        return 0;
    }
    if (op_is(P, "call"))
        return call_ins(P);
    int param = (op_is(P, "ld") || op_is(P, "ldu") || op_is(P, "st")) && has_mod_prefix(P, ".param");
    scan_refs(P, param ? (op_is(P, "st") ? 0 : 1) : -1, 0);
    if (op_in(P, handles) || (op_is(P, "prefetch") && has_mod(P, ".tensormap")) ||
        (op_is(P, "cp") && has_mod(P, ".tensor")))
        flag(P, DRK_FLOW_HANDLES, "uses a texture, surface or tensor map", NULL, 0);
    if (param)
        return op_is(P, "st") ? param_store(P) : param_load(P);
    for (unsigned i = 0; i < P->nops; i++)
        if (P->ops[i].kind == O_ADDR)
            return mem_ins(P);
    return alu_ins(P);
}

/* `[@[!]p] opcode.mods operands;` */
static int instruction(parser *P)
{
    if (punct(P, '@')) {
        adv(P);
        if (punct(P, '!'))
            adv(P);
        adv(P);
    }
    if (cur(P)->kind != DRK_TOK_IDENT) {
        flag(P, DRK_FLOW_UNPARSED, "a statement it cannot read, `%s`", cur(P)->s, (uint32_t)cur(P)->n);
        skip_statement(P);
        return 0;
    }
    P->op = tok_name(cur(P));
    P->nmods = 0;
    adv(P);
    int too_many = 0;
    for (;;) {
        const drk_ptx_tok *t = cur(P);
        drk_ir_name m = tok_name(t);
        if (t->kind == DRK_TOK_DIR) {
            adv(P);
        } else if (punct(P, '.') && t->s + 1 < P->L.end && t->s[1] >= '0' && t->s[1] <= '9') {
            adv(P); /* tex.2d: '.' then the number 2d */
            m.n = (uint32_t)(cur(P)->s + cur(P)->n - m.s);
            adv(P);
        } else {
            break;
        }
        /* .shared::cta, .L2::cache_hint, .mbarrier::complete_tx::bytes */
        while (punct(P, ':') && cur(P)->s == m.s + m.n && cur(P)->s + 1 < P->L.end && cur(P)->s[1] == ':') {
            adv(P);
            adv(P);
            if (cur(P)->kind == DRK_TOK_END || cur(P)->s != m.s + m.n + 2)
                break;
            m.n = (uint32_t)(cur(P)->s + cur(P)->n - m.s);
            adv(P);
        }
        if (P->nmods < MAX_MODS)
            P->mods[P->nmods++] = m;
        else
            too_many = 1;
    }
    P->nops = 0;
    P->nrefs = 0;
    while (!punct(P, ';')) {
        if (at_end(P) || punct(P, '}')) {
            unparsed(P, "an instruction without ;");
            return P->ir->nomem ? -1 : 0;
        }
        if (P->nops == MAX_OPS) {
            unparsed(P, "an instruction with too many operands");
            skip_statement(P);
            return 0;
        }
        if (operand(P, &P->ops[P->nops++])) {
            skip_statement(P);
            return P->ir->nomem ? -1 : 0;
        }
        if (punct(P, ','))
            adv(P);
    }
    adv(P);
    if (too_many) {
        unparsed(P, "an instruction with too many modifiers");
        return 0;
    }
    return dispatch(P);
}

static int body_directive(parser *P)
{
    uint32_t fn = P->fn;
    if (is_tok(P, ".reg"))
        return var_decl(P, NK_REG, fn);
    if (is_tok(P, ".param"))
        return var_decl(P, NK_CELL, fn);
    if (is_tok(P, ".local") || is_tok(P, ".shared"))
        return var_decl(P, NK_VAR, fn);
    if (is_tok(P, ".global") || is_tok(P, ".const"))
        return var_decl(P, NK_GVAR, fn);
    if (is_tok(P, ".loc") || is_tok(P, ".file")) { /* to the end of its line: no ';' */
        unsigned line = cur(P)->line;
        do
            adv(P);
        while (!at_end(P) && cur(P)->line == line);
        return 0;
    }
    if (!is_tok(P, ".pragma") && !is_tok(P, ".callprototype") && !is_tok(P, ".branchtargets") &&
        !is_tok(P, ".calltargets"))
        flag(P, DRK_FLOW_UNPARSED, "an unknown directive `%s`", cur(P)->s, (uint32_t)cur(P)->n);
    skip_statement(P);
    return 0;
}

static int read_body(parser *P, uint32_t fi)
{
    drk_ir *ir = P->ir;
    drk_ir_fn *f = &ir->fns[fi]; /* fns no longer grows */
    P->fn = fi;
    P->at = IR_NONE;
    fast_reset(P);
    f->node_base = (uint32_t)ir->nnodes;
    f->ins_first = (uint32_t)ir->nins;
    f->calls = (uint32_t)ir->ncalls;
    for (uint32_t k = 0; k < f->nrets + f->nparams; k++) {
        const drk_ir_name *nm = &ir->fnames[f->formals + k];
        drk_ptx_tok t = {DRK_TOK_IDENT, nm->s, nm->n, 0};
        uint32_t plen, num;
        if (f->entry) {
            int fresh;
            if (!nm->n)
                continue;
            if (fast_name(nm->s, nm->n, &plen, &num)) {
                unparsed(P, "a parameter named like a register");
                continue;
            }
            drk_ir_slot *s = slot_add(ir, nm->s, nm->n, fi, NK_KPARAM, k, &fresh);
            if (!s)
                return -1;
            if (!fresh)
                unparsed(P, "two parameters of one name");
        } else {
            size_t before = ir->nnodes;
            if (nm->n && !nm->reg && fast_name(nm->s, nm->n, &plen, &num))
                unparsed(P, "a parameter named like a register");
            else if (nm->n && !slot_find(ir, nm->s, nm->n, fi) && declare(P, &t, nm->reg ? NK_REG : NK_CELL, fi))
                return -1;
            if (ir->nnodes == before) { /* unnamed, or a name again: a node still, so formal k is node_base + k */
                if (new_node(ir, fi) == IR_NONE)
                    return -1;
                if (nm->n)
                    unparsed(P, "two parameters of one name");
            }
        }
    }
    /* The body only, to the '}' the first pass found: a statement that
     * cannot be read never runs on into the next function. */
    P->L = (drk_ptx_lexer){.p = f->body, .end = f->body_end, .line = f->body_line};
    P->lexfail = 0;
    adv(P);
    size_t depth = 0;
    for (;;) {
        if (ir->nomem || ir->broken[0])
            return -1;
        const drk_ptx_tok *t = cur(P);
        if (t->kind == DRK_TOK_END) {
            P->at = IR_NONE;
            if (P->lexfail || depth)
                unparsed(P, P->lexfail ? "a lexical error" : "unbalanced braces");
            break;
        }
        if (punct(P, '{') || punct(P, '}') || punct(P, ';')) {
            if (punct(P, '}') && depth == 0) {
                unparsed(P, "unbalanced braces");
                break;
            }
            if (punct(P, '{'))
                depth++;
            else if (punct(P, '}'))
                depth--;
            adv(P);
            continue;
        }
        P->at = (uint32_t)(t->s - ir->text);
        if (t->kind == DRK_TOK_IDENT) { /* a label? */
            drk_ptx_lexer save = P->L;
            adv(P);
            if (punct(P, ':')) {
                adv(P);
                continue;
            }
            P->L = save;
            P->lexfail = 0;
        }
        if ((t->kind == DRK_TOK_DIR ? body_directive(P) : instruction(P)) != 0)
            return -1;
    }
    f->nnodes = (uint32_t)(ir->nnodes - f->node_base);
    f->nins = (uint32_t)(ir->nins - f->ins_first);
    f->ncalls = (uint32_t)(ir->ncalls - f->calls);
    return 0;
}

/* ------------------------------------------------------------ finishing */

/* Call edges (a callee's formal gets the caller's argument; the caller's
 * result cell gets the callee's return cell), then who reads each node. */
static int finish(parser *P)
{
    drk_ir *ir = P->ir;
    for (size_t fi = 0; fi < ir->nfns; fi++) {
        drk_ir_fn *f = &ir->fns[fi];
        f->edge_first = (uint32_t)ir->nins;
        P->fn = (uint32_t)fi;
        for (uint32_t c = f->calls; c < f->calls + f->ncalls; c++) {
            const drk_ir_call *cl = &ir->calls[c];
            const drk_ir_fn *g = &ir->fns[cl->callee];
            P->at = cl->at;
            for (uint32_t j = 0; j < cl->nrets + cl->nargs; j++) {
                uint32_t actual = ir->ids[cl->rets + j], formal = g->node_base + j;
                if (actual == IR_NONE)
                    continue;
                if (GROW(ir, ir->ids, ir->nids, ir->idscap, 2))
                    return -1;
                uint32_t ops = (uint32_t)ir->nids;
                /* rets: the caller's cell <- the callee's; args: the other way */
                ir->ids[ir->nids++] = j < cl->nrets ? actual : formal;
                ir->ids[ir->nids++] = j < cl->nrets ? formal : actual;
                if (push_ins(P, IR_UNITE, 0, ops, 1, 1, 0, 0, 0, 0))
                    return -1;
            }
        }
        f->nedges = (uint32_t)(ir->nins - f->edge_first);
    }
    ir->use_start = calloc(ir->nnodes + 1, sizeof *ir->use_start);
    if (!ir->use_start)
        return ir->nomem = 1, -1;
    size_t total = 0;
    for (size_t i = 0; i < ir->nins; i++) {
        const drk_ir_ins *in = &ir->ins[i];
        if (in->rule == IR_ACCESS)
            continue;
        for (uint32_t s = 0; s < in->ns; s++)
            ir->use_start[ir->ids[in->ops + in->nd + s] + 1]++;
        total += in->ns;
    }
    for (size_t n = 0; n < ir->nnodes; n++)
        ir->use_start[n + 1] += ir->use_start[n];
    ir->uses = malloc((total ? total : 1) * sizeof *ir->uses);
    uint32_t *at = malloc((ir->nnodes + 1) * sizeof *at);
    if (!ir->uses || !at) {
        free(at);
        return ir->nomem = 1, -1;
    }
    memcpy(at, ir->use_start, (ir->nnodes + 1) * sizeof *at);
    for (size_t i = 0; i < ir->nins; i++) {
        const drk_ir_ins *in = &ir->ins[i];
        if (in->rule == IR_ACCESS)
            continue;
        for (uint32_t s = 0; s < in->ns; s++)
            ir->uses[at[ir->ids[in->ops + in->nd + s]]++] = (uint32_t)i;
    }
    free(at);
    return 0;
}

int drk_ir_build(drk_ir *ir, const char *text, size_t len, const drk_ptx *ptx)
{
    memset(ir, 0, sizeof *ir);
    ir->text = text;
    ir->len = len;
    if (len >= UINT32_MAX) { /* statement offsets are 32-bit */
        snprintf(ir->broken, sizeof ir->broken, "the module is too large to analyse");
        return 0;
    }
    parser P = {.ir = ir, .ptx = ptx, .fn = IR_NONE, .at = IR_NONE};
    P.L = (drk_ptx_lexer){.p = text, .end = text + len, .line = 1};
    int rc = module_scope(&P);
    if (rc == 0)
        rc = map_kernels(&P);
    for (size_t fi = 0; rc == 0 && fi < ir->nfns; fi++)
        if (ir->fns[fi].has_body)
            rc = read_body(&P, (uint32_t)fi);
    if (rc == 0)
        rc = finish(&P);
    free(P.refs);
    for (unsigned k = 0; k < FAST_PREFIXES; k++)
        free(P.pre[k].node);
    return ir->nomem ? -1 : 0;
}

void drk_ir_free(drk_ir *ir)
{
    free(ir->fns);
    free(ir->ins);
    free(ir->ids);
    free(ir->addrs);
    free(ir->units);
    free(ir->fnames);
    free(ir->calls);
    free(ir->node_fn);
    free(ir->use_start);
    free(ir->uses);
    free(ir->slots);
    memset(ir, 0, sizeof *ir);
}
