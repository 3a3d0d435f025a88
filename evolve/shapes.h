/* Shape classes, and which kernels must be searched again.
 *
 * A kernel is searched per shape class, not per launch shape: launches
 * whose shape differs in ways that do not move the best variant share one
 * search. A class is the block exactly (its size sets occupancy, which the
 * register budget and minimum CTAs trade against), the dynamic shared memory
 * exactly (it sets how many blocks fit, which the carveout trades against),
 * and the grid's total blocks by power of two (waves over the SMs: 1000 and
 * 1024 blocks behave alike, 1024 and 4096 need not).
 *
 * The tracker counts, per round, the kernels launched and those whose class
 * is new to them: a kernel's first class starts its first search; a class
 * the kernel had not used is searched again ("re-searched"). Only those are
 * searched; a kernel back at a class it used before keeps that class's
 * result. Fixed size; one thread (drk's worker) drives it. */
#ifndef DRK_EVOLVE_SHAPES_H
#define DRK_EVOLVE_SHAPES_H

#include <stdint.h>

/* Packed: block x (11 bits), y (11), z (7), dynamic shared bytes (19),
 * log2 of the grid's blocks (6); fields beyond their width saturate (no
 * launch has them). */
uint64_t drk_shape_class(const uint32_t grid[3], const uint32_t block[3], uint32_t dynamic_shared);

typedef struct drk_shape_parts {
    uint32_t block[3], dynamic_shared;
    unsigned grid_log2;          /* floor(log2(blocks)) */
} drk_shape_parts;
drk_shape_parts drk_shape_class_parts(uint64_t cls);

#define DRK_SHAPES_KERNELS 1024  /* kernels tracked (a power of 2) */
#define DRK_SHAPES_CLASSES 4096  /* (kernel, class) pairs tracked (a power of 2) */

enum {
    DRK_SHAPE_KNOWN = 0,         /* searched before (or past the tables: not searched) */
    DRK_SHAPE_NEW_KERNEL = 1,    /* the kernel's first class: its first search */
    DRK_SHAPE_NEW_CLASS = 2,     /* a class the kernel had not used: searched again */
};

typedef struct drk_shapes_kernel {
    uint64_t kernel;
    uint64_t seen_round, researched_round; /* rounds it last counted in; 0: never */
    uint32_t used;
} drk_shapes_kernel;

typedef struct drk_shapes_class {
    uint64_t kernel, cls;
    uint32_t used;
} drk_shapes_class;

typedef struct drk_shapes_round {
    uint64_t round;              /* 1, 2, ... */
    unsigned kernels;            /* launched this round */
    unsigned fresh;              /* of them, seen for the first time */
    unsigned researched;         /* of them, at a class new to them */
    double share;                /* researched / kernels (0 when none ran) */
} drk_shapes_round;

typedef struct drk_shapes {
    drk_shapes_kernel k[DRK_SHAPES_KERNELS];
    drk_shapes_class c[DRK_SHAPES_CLASSES];
    unsigned nkernels, nclasses;
    uint64_t untracked;          /* notes past the tables */
    drk_shapes_round now;        /* the open round */
} drk_shapes;

void drk_shapes_init(drk_shapes *t);

/* Kernel `kernel` (the engine's key for it, e.g. its registry record's)
 * launched at class `cls` in the open round: DRK_SHAPE_*. */
int drk_shapes_note(drk_shapes *t, uint64_t kernel, uint64_t cls);

/* Closes the open round: its counts, the share re-searched; opens the next. */
drk_shapes_round drk_shapes_round_end(drk_shapes *t);

#endif
