/* The data flow of ptx_ir.h's rules, per kernel: a taint set per node (a
 * bitset: ptx_ir.h's fixed bits, then one bit per unit of the parameter
 * buffer), grown to a fixed point by a worklist over the instructions of the
 * kernel and of every module function it reaches through calls. Sets only
 * grow, so it ends; a budget in word operations bounds it anyway. Then the
 * sinks: every global or generic address says which units are pointers, and
 * whether an address comes from memory. */
#include "evolve/image/ptx_flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/ptx_ir.h"

/* One kernel's taint sets may take this much memory. */
#define MAX_TAINT_BYTES ((size_t)64 << 20)
/* The work for a module, in 64-bit word operations: this much plus a
 * multiple of its length, so a text costs time in proportion to its size. */
#define BUDGET_BASE ((uint64_t)1 << 24)
#define BUDGET_PER_BYTE 16u

typedef struct flow {
    const drk_ir *ir;
    uint8_t *reach;     /* by function: reached from the kernel */
    uint32_t *row_base; /* by function: its first row */
    uint32_t *order;    /* the reached functions, the kernel first */
    size_t norder;
    uint8_t *inq;       /* by instruction: in the queue */
    uint32_t *queue;
    size_t qcap, qhead, qlen;
    uint64_t *T, *tmp, *ptrs; /* rows; a scratch set; the units found to be pointers */
    size_t W;
    uint64_t budget;
    uint32_t flags; /* the kernel's own findings (the functions' are in the IR) */
    drk_ir_why why[DRK_FLOW_NFLAGS];
} flow;

static uint64_t *row(const flow *fl, uint32_t node)
{
    const drk_ir *ir = fl->ir;
    uint32_t f = ir->node_fn[node];
    return fl->T + ((size_t)fl->row_base[f] + (node - ir->fns[f].node_base)) * fl->W;
}

/* Any base an address can be traced to: a unit, memory, %envreg, a symbol. */
static int has_base(const uint64_t *t, size_t W)
{
    if (t[0] & ~(uint64_t)IR_ADDR)
        return 1;
    for (size_t w = 1; w < W; w++)
        if (t[w])
            return 1;
    return 0;
}

static void or_into(uint64_t *d, const uint64_t *s, size_t W)
{
    for (size_t w = 0; w < W; w++)
        d[w] |= s[w];
}

static void set_bits(uint64_t *t, uint32_t lo, uint32_t hi)
{
    for (uint32_t b = lo; b < hi; b++)
        t[b / 64] |= 1ull << (b % 64);
}

static void note(flow *fl, uint32_t flag, const char *what, uint32_t at)
{
    unsigned b = (unsigned)__builtin_ctz(flag);
    fl->flags |= flag;
    if (!fl->why[b].what)
        fl->why[b] = (drk_ir_why){what, NULL, 0, at};
}

static void push(flow *fl, uint32_t i)
{
    fl->inq[i] = 1;
    fl->queue[(fl->qhead + fl->qlen++) % fl->qcap] = i;
}

/* Applies instruction i once; queues the readers of what changed. */
static void apply(flow *fl, uint32_t i)
{
    const drk_ir *ir = fl->ir;
    const drk_ir_ins *in = &ir->ins[i];
    size_t W = fl->W;
    uint64_t *t = fl->tmp;
    memset(t, 0, W * sizeof *t);
    t[0] = in->gen;
    set_bits(t, IR_UNIT0 + in->ulo, IR_UNIT0 + in->uhi);
    const uint32_t *src = ir->ids + in->ops + in->nd;
    if (in->rule == IR_OFFSET && in->ns == 2) {
        const uint64_t *a = row(fl, src[0]), *b = row(fl, src[1]);
        int da = (a[0] & IR_ADDR) != 0, db = (b[0] & IR_ADDR) != 0;
        /* address + offset: the offset is no base (a 64-bit count added to
         * a cvta'd pointer); otherwise either may be the base */
        if (da || !db)
            or_into(t, a, W);
        if (db || !da)
            or_into(t, b, W);
    } else if (in->rule == IR_WIDEN) {
        for (uint32_t s = 0; s < in->ns; s++)
            t[0] |= row(fl, src[s])[0] & IR_WIDENS;
    } else if (in->rule != IR_ACCESS) {
        for (uint32_t s = 0; s < in->ns; s++)
            or_into(t, row(fl, src[s]), W);
        if (in->rule == IR_DIFF && in->ns == 2 && has_base(row(fl, src[0]), W) && has_base(row(fl, src[1]), W))
            t[0] |= IR_ADDR; /* p + (q - p) must keep q */
    }
    uint64_t cost = (uint64_t)(in->nd + in->ns + 1) * W;
    fl->budget -= cost < fl->budget ? cost : fl->budget;
    for (uint32_t d = 0; d < in->nd; d++) {
        uint32_t node = ir->ids[in->ops + d];
        uint64_t *r = row(fl, node);
        int changed = 0;
        for (size_t w = 0; w < W; w++)
            if ((r[w] | t[w]) != r[w]) {
                r[w] |= t[w];
                changed = 1;
            }
        if (!changed)
            continue;
        for (uint32_t k = ir->use_start[node]; k < ir->use_start[node + 1]; k++) {
            uint32_t u = ir->uses[k];
            if (!fl->inq[u] && fl->reach[ir->ins[u].fn])
                push(fl, u);
        }
    }
}

static void queue_fn(flow *fl, const drk_ir_fn *f)
{
    for (uint32_t i = 0; i < f->nins; i++)
        push(fl, f->ins_first + i);
    for (uint32_t i = 0; i < f->nedges; i++)
        push(fl, f->edge_first + i);
}

/* The sinks: which units are pointers; loads of pointers; addresses of no
 * base. Then stores of pointers, now that the pointers are known. */
static void sinks(flow *fl)
{
    const drk_ir *ir = fl->ir;
    size_t W = fl->W;
    for (size_t k = 0; k < fl->norder; k++) {
        const drk_ir_fn *f = &ir->fns[fl->order[k]];
        for (uint32_t i = f->ins_first; i < f->ins_first + f->nins; i++) {
            const drk_ir_ins *in = &ir->ins[i];
            for (uint32_t a = 0; a < in->na; a++) {
                const drk_ir_addr *ad = &ir->addrs[in->addrs + a];
                uint64_t *t = fl->tmp;
                memset(t, 0, W * sizeof *t);
                t[0] = ad->gen;
                for (uint32_t n = 0; n < ad->n; n++)
                    or_into(t, row(fl, ir->ids[ad->ops + n]), W);
                if (!has_base(t, W))
                    note(fl, DRK_FLOW_UNPARSED, "an address traced to no parameter", in->at);
                if (t[0] & IR_MEM)
                    note(fl, DRK_FLOW_LOADS_POINTERS, "loads pointers from memory", in->at);
                t[0] &= ~(uint64_t)((1u << IR_UNIT0) - 1);
                or_into(fl->ptrs, t, W);
            }
        }
    }
    for (size_t k = 0; k < fl->norder; k++) {
        const drk_ir_fn *f = &ir->fns[fl->order[k]];
        for (uint32_t i = f->ins_first; i < f->ins_first + f->nins; i++) {
            const drk_ir_ins *in = &ir->ins[i];
            if (in->rule != IR_ACCESS || !in->na)
                continue;
            for (uint32_t s = 0; s < in->ns; s++) {
                const uint64_t *r = row(fl, ir->ids[in->ops + in->nd + s]);
                for (size_t w = 0; w < W; w++)
                    if (r[w] & fl->ptrs[w]) {
                        note(fl, DRK_FLOW_STORES_POINTERS, "stores a pointer to memory", in->at);
                        break;
                    }
            }
        }
    }
}

/* ------------------------------------------------------------ words */

/* "ld.global.f32 %f1, [%rd8]": the statement at `at`, blanks folded, cut
 * with "..." to fit `n` bytes. */
static void statement(const drk_ir *ir, uint32_t at, char *out, size_t n)
{
    size_t o = 0;
    int blank = 0;
    for (size_t i = at; i < ir->len && ir->text[i] != ';' && ir->text[i]; i++) {
        unsigned char c = (unsigned char)ir->text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            blank = o > 0;
            continue;
        }
        if (o + (blank ? 2 : 1) + 4 > n) { /* this, "..." and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (blank)
            out[o++] = ' ';
        blank = 0;
        out[o++] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    out[o] = 0;
}

static void describe(const drk_ir *ir, uint32_t flag, const drk_ir_why *w, char *out, size_t n)
{
    char stmt[80] = "";
    if (w->at != IR_NONE && w->at < ir->len)
        statement(ir, w->at, stmt, sizeof stmt);
    const char *what = w->what ? w->what : "?", *hole = w->name ? strstr(what, "%s") : NULL;
    int pre = hole ? (int)(hole - what) : (int)strlen(what), nlen = w->nlen > 64 ? 64 : (int)w->nlen;
    snprintf(out, n, "%s%.*s%.*s%s%s%s%s%s", flag == DRK_FLOW_UNPARSED ? "cannot follow: " : "", pre, what,
             hole ? nlen : 0, hole ? w->name : "", hole && w->nlen > 64 ? "..." : "", hole ? hole + 2 : "",
             stmt[0] ? ": `" : "", stmt, stmt[0] ? "`" : "");
}

/* The reason shown first: what a user can act on before what drk could not read. */
static const uint32_t priority[] = {DRK_FLOW_COOPERATIVE, DRK_FLOW_PRINTF,       DRK_FLOW_MODULE_GLOBALS,
                                    DRK_FLOW_CALLS_UNKNOWN, DRK_FLOW_INDIRECT,  DRK_FLOW_HANDLES,
                                    DRK_FLOW_PARAM_ADDRESS, DRK_FLOW_LOADS_POINTERS, DRK_FLOW_STORES_POINTERS,
                                    DRK_FLOW_UNPARSED};

static drk_ptx_flow *new_result(uint32_t nwords)
{
    drk_ptx_flow *r = calloc(1, sizeof *r + (size_t)nwords * sizeof r->words[0]);
    if (r)
        r->nwords = nwords;
    return r;
}

static drk_ptx_flow *cannot(const char *why)
{
    drk_ptx_flow *r = new_result(0);
    if (r) {
        r->flags = DRK_FLOW_UNPARSED;
        snprintf(r->reason, sizeof r->reason, "cannot follow: %s", why);
    }
    return r;
}

/* The verdict from the functions' flags and the kernel's own. */
static void verdict(flow *fl, drk_ptx_flow *r)
{
    const drk_ir *ir = fl->ir;
    r->flags = fl->flags;
    for (size_t k = 0; k < fl->norder; k++)
        r->flags |= ir->fns[fl->order[k]].flags;
    r->evolvable = !(r->flags & DRK_FLOW_BLOCKING);
    for (size_t p = 0; p < sizeof priority / sizeof priority[0] && !r->reason[0]; p++) {
        if (!(r->flags & priority[p]))
            continue;
        unsigned b = (unsigned)__builtin_ctz(priority[p]);
        const drk_ir_why *w = NULL;
        for (size_t k = 0; k < fl->norder && !w; k++)
            if (ir->fns[fl->order[k]].why[b].what)
                w = &ir->fns[fl->order[k]].why[b];
        if (!w)
            w = &fl->why[b];
        describe(ir, priority[p], w, r->reason, sizeof r->reason);
    }
}

/* ------------------------------------------------------------ one kernel */

static void unreach(flow *fl)
{
    for (size_t k = 0; k < fl->norder; k++)
        fl->reach[fl->order[k]] = 0;
    fl->norder = 0;
}

static drk_ptx_flow *analyse(flow *fl, uint32_t fi)
{
    const drk_ir *ir = fl->ir;
    const drk_ir_fn *e = &ir->fns[fi];
    drk_ptx_flow *r = new_result(e->nunits);
    if (!r)
        return NULL;
    for (uint32_t u = 0; u < e->nunits; u++) {
        const drk_ir_unit *un = &ir->units[e->units + u];
        r->words[u] = (drk_flow_word){un->offset, un->size, un->param, un->read ? DRK_FLOW_VALUE : DRK_FLOW_UNUSED};
    }
    memset(fl->why, 0, sizeof fl->why);
    fl->flags = 0;
    /* The functions it reaches, and a row for each of their nodes. */
    fl->order[fl->norder++] = fi;
    fl->reach[fi] = 1;
    size_t rows = 0, nq = 0;
    for (size_t k = 0; k < fl->norder; k++) {
        const drk_ir_fn *f = &ir->fns[fl->order[k]];
        fl->row_base[fl->order[k]] = (uint32_t)rows;
        rows += f->nnodes;
        nq += (size_t)f->nins + f->nedges;
        for (uint32_t c = f->calls; c < f->calls + f->ncalls; c++)
            if (!fl->reach[ir->calls[c].callee]) {
                fl->reach[ir->calls[c].callee] = 1;
                fl->order[fl->norder++] = ir->calls[c].callee;
            }
    }
    fl->W = (IR_UNIT0 + e->nunits + 63) / 64;
    if (rows > UINT32_MAX || rows * fl->W > MAX_TAINT_BYTES / sizeof(uint64_t)) {
        note(fl, DRK_FLOW_UNPARSED, "too many registers to analyse", IR_NONE);
        verdict(fl, r);
        unreach(fl);
        return r;
    }
    /* Clearing the rows and queueing every instruction once are work too. */
    if (fl->budget < rows * fl->W + nq) {
        fl->budget = 0;
        note(fl, DRK_FLOW_UNPARSED, "the module is too costly to analyse", IR_NONE);
        verdict(fl, r);
        unreach(fl);
        return r;
    }
    fl->budget -= rows * fl->W + nq;
    fl->T = calloc(rows * fl->W + 1, sizeof *fl->T);
    fl->tmp = calloc(fl->W, sizeof *fl->tmp);
    fl->ptrs = calloc(fl->W, sizeof *fl->ptrs);
    if (!fl->T || !fl->tmp || !fl->ptrs) {
        free(fl->T), free(fl->tmp), free(fl->ptrs);
        fl->T = fl->tmp = fl->ptrs = NULL;
        unreach(fl);
        free(r);
        return NULL;
    }
    fl->qcap = nq ? nq : 1;
    fl->qhead = fl->qlen = 0;
    for (size_t k = 0; k < fl->norder; k++)
        queue_fn(fl, &ir->fns[fl->order[k]]);
    while (fl->qlen) {
        uint32_t i = fl->queue[fl->qhead];
        fl->qhead = (fl->qhead + 1) % fl->qcap;
        fl->qlen--;
        fl->inq[i] = 0;
        if (!fl->budget)
            continue; /* drained: the queue's flags must be cleared */
        apply(fl, i);
    }
    if (!fl->budget) {
        note(fl, DRK_FLOW_UNPARSED, "the module is too costly to analyse", IR_NONE);
    } else {
        sinks(fl);
        for (uint32_t u = 0; u < e->nunits; u++)
            if (fl->ptrs[(IR_UNIT0 + u) / 64] >> ((IR_UNIT0 + u) % 64) & 1)
                r->words[u].cls = DRK_FLOW_POINTER;
    }
    verdict(fl, r);
    free(fl->T), free(fl->tmp), free(fl->ptrs);
    fl->T = fl->tmp = fl->ptrs = NULL;
    unreach(fl);
    return r;
}

drk_ptx_flow **drk_ptx_flows(const char *text, size_t len, const drk_ptx *ptx)
{
    drk_ptx_flow **out = calloc(ptx->nkernels ? ptx->nkernels : 1, sizeof *out);
    if (!out)
        return NULL;
    drk_ir ir;
    if (drk_ir_build(&ir, text, len, ptx)) {
        drk_ir_free(&ir);
        free(out);
        return NULL;
    }
    flow fl = {.ir = &ir};
    uint64_t budget = BUDGET_BASE + (uint64_t)len * BUDGET_PER_BYTE;
    fl.budget = budget;
    size_t nf = ir.nfns ? ir.nfns : 1, ni = ir.nins ? ir.nins : 1;
    fl.reach = calloc(nf, 1);
    fl.row_base = calloc(nf, sizeof *fl.row_base);
    fl.order = calloc(nf, sizeof *fl.order);
    fl.inq = calloc(ni, 1);
    fl.queue = calloc(ni, sizeof *fl.queue);
    long *fn_of = calloc(ptx->nkernels ? ptx->nkernels : 1, sizeof *fn_of);
    int ok = fl.reach && fl.row_base && fl.order && fl.inq && fl.queue && fn_of;
    for (size_t k = 0; ok && k < ptx->nkernels; k++)
        fn_of[k] = -1;
    for (size_t f = 0; ok && f < ir.nfns; f++)
        if (ir.fns[f].kernel >= 0 && (size_t)ir.fns[f].kernel < ptx->nkernels)
            fn_of[ir.fns[f].kernel] = (long)f;
    for (size_t k = 0; ok && k < ptx->nkernels; k++) {
        if (ir.broken[0])
            out[k] = cannot(ir.broken);
        else if (fn_of[k] < 0)
            out[k] = cannot("the kernel's body is not found");
        else
            out[k] = analyse(&fl, (uint32_t)fn_of[k]);
    }
    free(fn_of);
    free(fl.reach);
    free(fl.row_base);
    free(fl.order);
    free(fl.inq);
    free(fl.queue);
    drk_ir_free(&ir);
    if (!ok) {
        drk_ptx_flows_free(out, ptx->nkernels);
        return NULL;
    }
    return out;
}

void drk_ptx_flows_free(drk_ptx_flow **flows, size_t n)
{
    if (!flows)
        return;
    for (size_t i = 0; i < n; i++)
        free(flows[i]);
    free(flows);
}

size_t drk_ptx_flow_size(const drk_ptx_flow *f)
{
    return sizeof *f + (size_t)f->nwords * sizeof f->words[0];
}

const char *drk_flow_class_name(uint32_t cls)
{
    return cls == DRK_FLOW_POINTER ? "pointer" : cls == DRK_FLOW_VALUE ? "value" : "unused";
}

const char *drk_flow_flag_name(uint32_t flag)
{
    static const char *const names[DRK_FLOW_NFLAGS] = {
        "loads_pointers", "stores_pointers", "module_globals", "printf",   "cooperative", "calls_unknown",
        "indirect",       "handles",         "param_address",  "unparsed", "calls",       "traps"};
    if (!flag || (flag & (flag - 1)) || flag >= (1u << DRK_FLOW_NFLAGS))
        return NULL;
    return names[__builtin_ctz(flag)];
}
