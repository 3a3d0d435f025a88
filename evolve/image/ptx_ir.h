/* A PTX module as ptx_flow.c analyses it: every function body turned into
 * transfer rules over "nodes" (registers and .param cells), without a
 * control-flow graph, since the analysis is flow-insensitive. Internal to
 * evolve/image/ptx_ir.c and ptx_flow.c. */
#ifndef DRK_EVOLVE_PTX_IR_H
#define DRK_EVOLVE_PTX_IR_H

#include <stddef.h>
#include <stdint.h>

#include "evolve/image/ptx.h"
#include "evolve/image/ptx_flow.h"

/* The fixed bits of a taint set (bits of its first 64-bit word); the
 * kernel's parameter units follow from bit IR_UNIT0. */
enum {
    IR_ADDR = 1u << 0, /* may be a definite address: cvta'd, or a variable's address */
    IR_MEM = 1u << 1,  /* may be a value loaded from memory */
    IR_ENV = 1u << 2,  /* may come from %envreg (the cooperative launch's workspace) */
    IR_SYM = 1u << 3,  /* may be the address of a variable (not a parameter) */
    IR_UNIT0 = 4,
};
/* Bits that give an address a base it can be traced to. */
#define IR_BASES (IR_MEM | IR_ENV | IR_SYM)
#define IR_WIDENS (IR_ADDR | IR_ENV | IR_SYM)

/* Transfer rules. */
enum {
    IR_UNITE,  /* dests |= gen | units | sources */
    IR_OFFSET, /* two sources; when only one may be a definite address, dests |= that one (the other is an offset) */
    IR_DIFF,   /* sources united; when both have a base, the difference may be an address too */
    IR_ACCESS, /* a memory access: dests |= gen (IR_MEM); sources are stored values; addresses are checked */
    IR_WIDEN,  /* a 32-bit value widened: an index, not a pointer, not a loaded base; a variable's
                * (shared) address and %envreg's halves stay addresses: only IR_WIDENS passes */
};

#define IR_NONE UINT32_MAX

typedef struct drk_ir_ins {
    uint32_t fn;         /* the function it is in (for call edges: the caller) */
    uint32_t at;         /* byte offset of its statement in the text, for messages */
    uint8_t rule;        /* IR_UNITE, ... */
    uint8_t gen;         /* fixed bits the destinations get */
    uint16_t nd, ns, na; /* destinations, sources, address operands */
    uint32_t ops;        /* ids[ops..]: nd destination nodes, then ns source nodes */
    uint32_t addrs;      /* addrs[addrs..]: na address operands */
    uint32_t ulo, uhi;   /* kernel parameter units [ulo, uhi) the destinations get */
} drk_ir_ins;

typedef struct drk_ir_addr {
    uint32_t ops;  /* ids[ops..]: the n nodes the address is computed from */
    uint32_t n;
    uint8_t gen;   /* fixed bits of the symbols in it */
    uint8_t sink;  /* global, generic or const: pointers are found here */
} drk_ir_addr;

/* Where a flag was first seen, for the reason in words. */
typedef struct drk_ir_why {
    const char *what;  /* a static phrase, `%s` where the name goes; NULL: not seen */
    const char *name;  /* a name from the text, or NULL */
    uint32_t nlen;
    uint32_t at;       /* the statement's byte offset, or IR_NONE */
} drk_ir_why;

/* One unit of a kernel's parameter buffer (drk_flow_word's layout). */
typedef struct drk_ir_unit {
    uint32_t offset, size, param;
    int read; /* some ld.param reads it */
} drk_ir_unit;

typedef struct drk_ir_name {
    const char *s;
    uint32_t n;
    int reg; /* formals: a .reg parameter (used as a register), else a .param cell */
} drk_ir_name;

typedef struct drk_ir_fn {
    drk_ir_name name;
    int entry, has_body;
    long kernel;                /* entries: the index in drk_ptx's kernels, -1 if none */
    const char *body, *body_end; /* just after its '{'; its '}' */
    unsigned body_line;
    uint32_t formals, nrets, nparams; /* fnames[formals..]: nrets return names, then nparams parameter names */
    uint32_t node_base, nnodes; /* its nodes: formals first (not kernels'), then the body's */
    uint32_t ins_first, nins;   /* its body's instructions */
    uint32_t edge_first, nedges;/* the call edges it makes (instructions too) */
    uint32_t calls, ncalls;     /* calls[calls..]: its calls of functions with a body in the module */
    uint32_t units, nunits;     /* entries: units[units..] */
    uint32_t flags;             /* DRK_FLOW_* seen in the body */
    drk_ir_why why[DRK_FLOW_NFLAGS]; /* by flag bit */
} drk_ir_fn;

typedef struct drk_ir_slot {
    const char *s;
    uint32_t n, fn; /* fn IR_NONE: module scope */
    uint32_t hash;  /* of (s, n, fn): most probes end here */
    uint32_t kind : 4, id : 28;
} drk_ir_slot;

typedef struct drk_ir_call {
    uint32_t fn, callee, at;
    uint32_t rets, nrets, args, nargs; /* ids[..]: actual nodes (IR_NONE for immediates) */
} drk_ir_call;

typedef struct drk_ir {
    const char *text;
    size_t len;
    drk_ir_fn *fns;
    size_t nfns, fncap;
    drk_ir_ins *ins;
    size_t nins, inscap;
    uint32_t *ids;
    size_t nids, idscap;
    drk_ir_addr *addrs;
    size_t naddrs, addrcap;
    drk_ir_unit *units;
    size_t nunits, unitcap;
    drk_ir_name *fnames;
    size_t nfnames, fnamecap;
    drk_ir_call *calls;
    size_t ncalls, callcap;
    uint32_t *node_fn; /* by node */
    size_t nnodes, nodecap;
    uint32_t *use_start, *uses; /* by node: the instructions that read it (CSR) */
    drk_ir_slot *slots;         /* names: open addressing */
    size_t nslots, slotcap;
    int nomem;
    char broken[160]; /* why the module cannot be followed at all; "" if it can */
} drk_ir;

/* Builds the IR of the text drk_ptx_read made `ptx` from. 0, or -1 when
 * memory ran out (ir->nomem). A module it cannot follow still gives 0, with
 * ir->broken set; a function it cannot follow has DRK_FLOW_UNPARSED. */
int drk_ir_build(drk_ir *ir, const char *text, size_t len, const drk_ptx *ptx);
void drk_ir_free(drk_ir *ir);

#endif
