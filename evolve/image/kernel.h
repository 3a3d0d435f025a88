/* What a device image says about one kernel: its parameter layout and its
 * resources. Filled by the cubin reader (SASS: the truth for one SM) or the
 * PTX reader (declared parameters, no resources). */
#ifndef DRK_EVOLVE_KERNEL_H
#define DRK_EVOLVE_KERNEL_H

#include <stdint.h>

enum { DRK_PARAM_SCALAR = 0, DRK_PARAM_POINTER = 1, DRK_PARAM_KIND_UNKNOWN = 2 };

typedef struct drk_param {
    uint32_t offset;     /* from the start of the parameter buffer (kernelParams layout) */
    uint32_t size;       /* bytes */
    uint8_t align_log2;  /* of the parameter (PTX) or of its pointee (cubin); 0 if unknown */
    uint8_t kind;        /* DRK_PARAM_* */
} drk_param;

#define DRK_UNKNOWN_U32 UINT32_MAX

typedef struct drk_kernel_info {
    char *name;             /* as in the image: mangled */
    uint32_t nparams;
    drk_param *params;      /* by ordinal */
    uint32_t params_size;   /* bytes of the parameter buffer (CBANK_PARAM_SIZE, or PTX's end of last) */
    uint32_t regs;          /* registers per thread; DRK_UNKNOWN_U32 for PTX */
    uint32_t shared_bytes;  /* static shared memory; DRK_UNKNOWN_U32 for PTX */
    uint32_t local_bytes;   /* per-thread local memory (stack frame); DRK_UNKNOWN_U32 if unknown */
    uint32_t const_bytes;   /* constant bank 0 size in the cubin; DRK_UNKNOWN_U32 for PTX */
    uint32_t max_threads;   /* MAX_THREADS / .maxntid product; 0 if none declared */
    uint32_t reqntid[3];    /* required block size (REQNTID / .reqntid); 0s if none */
    uint32_t maxnreg;       /* PTX .maxnreg; 0 if none declared (cubins: 0, their REGCOUNT is in regs) */
} drk_kernel_info;

/* Frees what the readers allocated inside `k` (name, params), not `k`. */
void drk_kernel_info_clear(drk_kernel_info *k);

#endif
