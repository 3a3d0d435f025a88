/* PTX text: .version, .target and every .entry with its parameter list
 * (types, .align, arrays; offsets laid out as the driver lays out the
 * parameter buffer) and its .maxntid / .reqntid. Bounded by the text's
 * length, which need not be NUL-terminated. */
#ifndef DRK_EVOLVE_PTX_H
#define DRK_EVOLVE_PTX_H

#include <stddef.h>

#include "evolve/image/kernel.h"

typedef struct drk_ptx {
    unsigned version_major, version_minor; /* .version 8.8 -> 8, 8; 0 if absent */
    unsigned target;                       /* .target sm_90 -> 90 (sm_90a -> 90) */
    char target_name[16];                  /* as written: "sm_90a" */
    size_t nkernels;
    drk_kernel_info *kernels;              /* .entry only, in text order; regs etc. unknown */
} drk_ptx;

/* 0, or -1 with a message in err. Text that is not PTX is an error. */
int drk_ptx_read(const char *text, size_t len, drk_ptx *out, char *err, size_t errlen);
void drk_ptx_free(drk_ptx *p);

/* Whether the bytes look like PTX text (a PTX directive early on). */
int drk_is_ptx(const void *data, size_t size);

#endif
