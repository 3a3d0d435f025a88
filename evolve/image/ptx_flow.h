/* Which kernel parameters are pointers, from the PTX's data flow, and
 * whether drk can evolve the kernel: replay it on private copies of every
 * allocation its pointers reach and compare bit for bit. For that drk must
 * know every pointer, so the analysis is a may-analysis that errs one way:
 * a word it calls VALUE or UNUSED never becomes a global address, and a
 * kernel it cannot follow is not evolvable. docs/evolve.md has the rules. */
#ifndef DRK_EVOLVE_PTX_FLOW_H
#define DRK_EVOLVE_PTX_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "evolve/image/ptx.h"

/* The class of one word of the parameter buffer. */
enum {
    DRK_FLOW_UNUSED = 0,  /* never read */
    DRK_FLOW_VALUE = 1,   /* read, never the base of a global or generic address */
    DRK_FLOW_POINTER = 2, /* may be the base of a global or generic address */
};

/* What a kernel does that the evolution engine must know. The first ten stop
 * evolution; the last two are facts only. */
enum {
    DRK_FLOW_LOADS_POINTERS = 1u << 0,  /* dereferences an address loaded from memory (tables, lists) */
    DRK_FLOW_STORES_POINTERS = 1u << 1, /* stores a parameter pointer to global memory */
    DRK_FLOW_MODULE_GLOBALS = 1u << 2,  /* uses a module-scope .global or .const variable */
    DRK_FLOW_PRINTF = 1u << 3,          /* calls vprintf */
    DRK_FLOW_COOPERATIVE = 1u << 4,     /* grid sync: reads %envreg (cg::this_grid()), calls cudaCG* */
    DRK_FLOW_CALLS_UNKNOWN = 1u << 5,   /* calls a function whose body is not in the module */
    DRK_FLOW_INDIRECT = 1u << 6,        /* brx.idx, a call through a register, a function's address */
    DRK_FLOW_HANDLES = 1u << 7,         /* textures, surfaces or tensor maps: memory behind a handle */
    DRK_FLOW_PARAM_ADDRESS = 1u << 8,   /* takes a parameter's address (cvta.param, mov of its name) */
    DRK_FLOW_UNPARSED = 1u << 9,        /* something the analysis cannot follow */
    DRK_FLOW_CALLS = 1u << 10,          /* calls module functions (followed through their parameters) */
    DRK_FLOW_TRAPS = 1u << 11,          /* may trap: trap, __assertfail */
};
#define DRK_FLOW_BLOCKING 0x3ffu
#define DRK_FLOW_NFLAGS 12

typedef struct drk_flow_word {
    uint32_t offset; /* in the parameter buffer (kernelParams layout) */
    uint32_t size;   /* bytes: the parameter's, or at most 8 of a larger one */
    uint32_t param;  /* the parameter's ordinal */
    uint32_t cls;    /* DRK_FLOW_UNUSED, _VALUE or _POINTER */
} drk_flow_word;

/* One kernel's result. Words: each parameter of at most 8 bytes is one
 * word; a larger one (a by-value struct, .align N .b8 name[M]) is one word
 * per 8 bytes from its start, the last maybe shorter. In offset order. */
typedef struct drk_ptx_flow {
    uint32_t flags;      /* DRK_FLOW_* */
    int evolvable;       /* no blocking flag */
    char reason[192];    /* why not, in words, the weightiest reason first; "" when evolvable */
    uint32_t nwords;
    drk_flow_word words[];
} drk_ptx_flow;

/* Analyses every kernel of `ptx`, which drk_ptx_read made from the same
 * text: result[i] is ptx->kernels[i]'s (malloc'd, free() it), NULL only if
 * memory ran out. The array is malloc'd (drk_ptx_flows_free frees both);
 * NULL if memory ran out. Time and memory are bounded by the text's length:
 * a kernel beyond the bounds is UNPARSED. */
drk_ptx_flow **drk_ptx_flows(const char *text, size_t len, const drk_ptx *ptx);
void drk_ptx_flows_free(drk_ptx_flow **flows, size_t n);

/* Bytes of `f`, words included (for copies). */
size_t drk_ptx_flow_size(const drk_ptx_flow *f);

/* "pointer", "value", "unused". */
const char *drk_flow_class_name(uint32_t cls);
/* "loads_pointers", ... for one DRK_FLOW_* bit; NULL for others. */
const char *drk_flow_flag_name(uint32_t flag);

#endif
