/* What a variant source can vary, and one point of it: a variant is a small
 * fixed struct of knob indices, one a dimension, index 0 the driver's own
 * choice (so the all-zero variant is the program's function as it is).
 *
 * A source declares its dimensions (a drk_space): the PTX JIT source's are
 * below; another (function attributes only, a cuBLASLt algorithm index)
 * declares its own. Dimensions are declared most promising first: the
 * search (evolve/search.h) scans them in that order. The values are what
 * each index means to the source that builds it (registers, a
 * CU_JIT_CACHE_OPTION_*, a percent); the search only moves indices.
 *
 * Pure data: no driver calls, no allocation. */
#ifndef DRK_EVOLVE_SPACE_H
#define DRK_EVOLVE_SPACE_H

#include <stddef.h>
#include <stdint.h>

#define DRK_SPACE_DIMS 8    /* dimensions a space declares at most */
#define DRK_SPACE_VALUES 16 /* values a dimension has at most (index 0 the default) */
#define DRK_VARIANT_NONE UINT32_MAX /* no variant: an id no space reaches */

typedef struct drk_space_dim {
    const char *name;                /* "regs": also the key the recorded spaces use */
    unsigned count;                  /* values, 1..DRK_SPACE_VALUES */
    int values[DRK_SPACE_VALUES];    /* values[0] stands for "the driver's default" */
} drk_space_dim;

typedef struct drk_space {
    const char *name;                /* the source: "ptx" */
    unsigned ndims;                  /* 1..DRK_SPACE_DIMS */
    drk_space_dim dims[DRK_SPACE_DIMS];
    /* The order the search scans the dimensions in, most promising first
     * (nscan 0: as declared). */
    unsigned nscan;
    uint8_t scan[DRK_SPACE_DIMS];
} drk_space;

/* One point: k[d] indexes dims[d].values; dimensions past ndims stay 0. */
typedef struct drk_variant {
    uint8_t k[DRK_SPACE_DIMS];
} drk_variant;

/* The PTX JIT source as tests/evolve/spaces/ recorded it, in the recorded
 * order (its ids are the indices into a recorded kernel's "ms"):
 *   regs     CU_JIT_MAX_REGISTERS  0 (default), 32, 40, 48, 56, 64, 80, 96, 128, 168, 255
 *   minctas  CU_JIT_MIN_CTA_PER_SM 0 (default), 2, 4 (with THREADS_PER_BLOCK = the block)
 *   opt      CU_JIT_OPTIMIZATION_LEVEL 4 (default), 3
 *   cache    CU_JIT_CACHE_MODE     -1 (default), 1 (CG), 2 (CA)
 *   carveout the function's preferred shared-memory carveout, percent: -1 (default), 25, 50, 100
 * The register budget first: it is the one big lever in the recorded data
 * (n-body 2.05x at 56, four steps from the default); carveout is an
 * attribute of the same build. */
extern const drk_space drk_space_ptx;

enum { DRK_PTX_REGS, DRK_PTX_MINCTAS, DRK_PTX_OPT, DRK_PTX_CACHE, DRK_PTX_CARVEOUT };

/* 0 when `s` is well formed: dimension and value counts in range, and
 * fewer than DRK_VARIANT_NONE points (ids fit 32 bits); -1 if not. */
int drk_space_check(const drk_space *s);
/* The number of points, the default included. */
uint32_t drk_space_size(const drk_space *s);
/* The dimension scanned i-th (i < ndims). */
unsigned drk_space_scan(const drk_space *s, unsigned i);

/* 1 when every index is inside its dimension (and the unused ones are 0). */
int drk_variant_valid(const drk_space *s, const drk_variant *v);
int drk_variant_is_default(const drk_variant *v);
int drk_variant_equal(const drk_variant *a, const drk_variant *b);

/* A compact id: mixed radix over the dimensions, the last fastest; the
 * default is 0. DRK_VARIANT_NONE for an invalid variant. */
uint32_t drk_variant_id(const drk_space *s, const drk_variant *v);
/* Back from an id: 0, or -1 (and the default in *out) when out of range. */
int drk_variant_from_id(const drk_space *s, uint32_t id, drk_variant *out);

/* Index steps between two variants, summed over the dimensions (an L1
 * distance): 1 is a neighbour along one dimension. */
unsigned drk_variant_distance(const drk_space *s, const drk_variant *a, const drk_variant *b);

/* The value dimension `d` has at `v` (what the source builds with). */
int drk_variant_value(const drk_space *s, const drk_variant *v, unsigned d);

/* "default", or the non-default knobs: "regs=56 cache=1". Returns buf. */
const char *drk_variant_text(const drk_space *s, const drk_variant *v, char *buf, size_t n);

#endif
