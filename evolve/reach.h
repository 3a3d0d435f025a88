/* What a launch's pointers reach: the allocations a replay must copy.
 *
 * A kernel is replayed on copies of every allocation its pointer words
 * (evolve/image/ptx_flow.h) point into, each copy whole, so that an access
 * the program's launch made in bounds is in bounds on the copy. On the H200
 * a fault in any context is sticky for the whole device (tests/bench/
 * ctx_fault.c), so these rules are the trials' only safety: a pointer word
 * that no allocation holds, that points at host memory, or a launch whose
 * copies would pass the copy budget, is refused -- the kernel's launch is
 * not replayed. A null pointer word stays null: the program's own launch
 * did not dereference it (it ran without a fault), and a replay runs the
 * same code on the same values.
 *
 * Where an address lies comes from a resolver the wiring hands in (the
 * device pool's own records first, then the driver's range query), so the
 * rules run on the CPU against any table a test gives. Nothing here runs on
 * a launch; the engine calls it on its own thread with the parameter bytes
 * it captured. */
#ifndef DRK_EVOLVE_REACH_H
#define DRK_EVOLVE_REACH_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "evolve/image/kernel.h"
#include "evolve/image/ptx_flow.h"

#define DRK_REACH_MAX 32          /* distinct allocations a replay copies at most */
#define DRK_PARAMS_MAX 4096       /* a launch's parameter bytes (the driver's limit is 4 KiB, 32 KiB on sm_90 with opt-in) */

/* An allocation: its base and size; `device` 0 for host memory (pinned,
 * mapped), which replays never copy. */
typedef struct drk_extent {
    CUdeviceptr base;
    size_t size;
    int device;
} drk_extent;

/* Places an address: 0 and *out when an allocation holds it, else -1. */
typedef int (*drk_extent_fn)(CUdeviceptr p, drk_extent *out);

typedef struct drk_reach {
    unsigned n;                   /* distinct allocations, by base */
    drk_extent alloc[DRK_REACH_MAX];
    size_t bytes;                 /* their sizes summed: what a replay copies */
    unsigned pointers, nulls;     /* pointer words, of which null */
    char why[192];                /* when refused: the first reason, in words */
} drk_reach;

/* The launch's parameter buffer in the kernel's own layout (`params`, from
 * its image), packed into `out` (cap bytes): from kernelParams (one pointer
 * a parameter) or, when that is NULL, from the buffer cuLaunchKernel's
 * `extra` passed (CU_LAUNCH_PARAM_BUFFER_POINTER, `packed`, `packed_size`
 * bytes). 0 and *len; -1 when the layout cannot be packed (no parameters
 * known, a buffer shorter than the layout, over cap). */
int drk_params_pack(const drk_param *params, uint32_t nparams, void *const *kernel_params, const void *packed,
                    size_t packed_size, uint8_t *out, size_t cap, size_t *len);

/* The allocations the pointer words of `flow` reach in the packed buffer
 * `buf` (len bytes), placed by `resolve`; refused (-1, why set) past
 * DRK_REACH_MAX allocations or `copy_max` bytes, for a pointer word no
 * allocation holds, one in host memory, one that is not 8 bytes, or a word
 * past the buffer. 0 otherwise. */
int drk_reach_of(const drk_ptx_flow *flow, const uint8_t *buf, size_t len, drk_extent_fn resolve, size_t copy_max,
                 drk_reach *out);

/* Rewrites each non-null pointer word of `buf` to the same offset in the
 * copy of its allocation: alloc[i] copied at bases[i]. The buffer then
 * launches the kernel on the copies. */
void drk_reach_rewrite(const drk_ptx_flow *flow, const drk_reach *r, const CUdeviceptr *bases, uint8_t *buf,
                       size_t len);

#endif
