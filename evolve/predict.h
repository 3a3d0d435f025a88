/* The predictor: the first candidate for a kernel at a shape class not
 * searched yet, from what was learned elsewhere -- a new shape starts near
 * the best known solution, not from scratch.
 *
 * The model, in order:
 *  1. The same kernel at other classes: the best of the class nearest to
 *     this one (the fewest powers of two of grid apart; the same block and
 *     shared memory before others); its default if that class kept the
 *     default. The register budget, the big lever, belongs to the code, so
 *     it carries over between shapes of one kernel.
 *  2. Else a similar kernel: the nearest solved (kernel, class) by
 *         2 |log2 (regs_a / regs_b)|
 *       +   |log2 ((shared_a + 1 KiB) / (shared_b + 1 KiB))|
 *       +   |log2 (block_a / block_b)|
 *       + 0.5 |log2 ((params_a + 8) / (params_b + 8))|
 *     over the registers its default build uses, its shared memory a block
 *     (static and dynamic), its block's threads and its parameter bytes; at
 *     most 1.5 away (32 and 40 registers with all else equal: 0.64; 32 and
 *     64: 2, too far). Registers weigh most: whether a larger register
 *     budget pays depends on what the default build already uses (n-body:
 *     32 used, 2x faster at 56). Ties: the one that gained most.
 *  3. Else nothing: the search starts at the default.
 * A guess is only a first candidate: it is measured like any other, and the
 * search's margin decides. Fixed size (DRK_PREDICT_ENTRIES solved classes,
 * the oldest forgotten). */
#ifndef DRK_EVOLVE_PREDICT_H
#define DRK_EVOLVE_PREDICT_H

#include <stdint.h>

#include "evolve/space.h"

#define DRK_PREDICT_ENTRIES 256
#define DRK_PREDICT_NEAR 1.5     /* the farthest a similar kernel may be */

typedef struct drk_kernel_features {
    uint32_t regs;               /* registers a thread of the default build */
    uint32_t shared_bytes;       /* static + dynamic shared memory a block */
    uint32_t block_threads;
    uint32_t param_bytes;
} drk_kernel_features;

typedef struct drk_predict_entry {
    uint64_t kernel, cls;        /* the engine's kernel key; drk_shape_class */
    drk_kernel_features f;
    drk_variant best;            /* what the search serves there (the default: nothing won) */
    double speedup;              /* its median over the default */
    uint64_t when;               /* learned at (an order) */
    int used;
} drk_predict_entry;

typedef struct drk_predictor {
    drk_predict_entry e[DRK_PREDICT_ENTRIES];
    uint64_t clock;
} drk_predictor;

typedef enum drk_predict_source {
    DRK_PREDICT_NONE,            /* start at the default */
    DRK_PREDICT_SAME_KERNEL,     /* another class of the same kernel */
    DRK_PREDICT_SIMILAR,         /* a similar kernel */
} drk_predict_source;

void drk_predictor_init(drk_predictor *p);

/* Kernel `kernel` at class `cls` is solved: it serves `best` (NULL: the
 * default) at `speedup`. Learned again, the entry is replaced. */
void drk_predictor_learn(drk_predictor *p, uint64_t kernel, uint64_t cls, const drk_kernel_features *f,
                         const drk_variant *best, double speedup);

/* The first candidate for `kernel` at `cls`, into *out (the default when
 * none); which rule gave it, and for DRK_PREDICT_SIMILAR the distance and
 * the kernel it came from. */
drk_predict_source drk_predictor_guess(const drk_predictor *p, uint64_t kernel, uint64_t cls,
                                       const drk_kernel_features *f, drk_variant *out, double *distance,
                                       uint64_t *from_kernel);

/* The model's distance between two kernels' features. */
double drk_kernel_distance(const drk_kernel_features *a, const drk_kernel_features *b);

#endif
