/* Variant sources: the ways drk can make another function that computes
 * what a kernel computes, each a small module behind this one interface
 * (DESIGN.md, "Evolving a kernel"). A source says whether it applies to a
 * kernel and why not, lists its knobs, builds the function of one variant
 * (and undoes that), and says which knobs change the code. It decides
 * nothing: which variants to try, and proving and measuring them, are the
 * engine's. Nothing calls a source in a program yet. docs/evolve.md,
 * "Variant sources", has the knobs and what is never passed. */
#ifndef DRK_EVOLVE_SOURCE_H
#define DRK_EVOLVE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"
#include "evolve/facts.h"
#include "evolve/space.h"
#include "evolve/loaded.h"

#define DRK_SOURCE_MAX_KNOBS 8
#define DRK_KNOB_BLOCK (-2) /* a knob value standing for the launch's threads per block */

/* One knob. values[0] is the driver's default: for a JIT option it is not
 * passed at all (the value only names the default); for an attribute it is
 * the value the driver starts with, written back to restore it. */
typedef struct drk_knob {
    const char *name;      /* "max_registers" */
    uint8_t nvalues;
    const int32_t *values; /* DRK_KNOB_BLOCK: the launch's block */
    uint8_t rebuilds;      /* 1: a value other than the default changes the code (a new module) */
} drk_knob;

/* A variant is the search's (evolve/space.h): for each knob of its source,
 * the index of its value (k[i]); all 0: the driver's default, the kernel as
 * the program has it. */
_Static_assert(DRK_SOURCE_MAX_KNOBS == DRK_SPACE_DIMS, "a source's knobs are a space's dimensions");

/* The kernel a source is asked about: what its record knows. */
typedef struct drk_source_kernel {
    const char *name;              /* mangled, as in its image */
    const drk_image_facts *facts;  /* the record's image facts; NULL if none */
    const drk_ptx_text *ptx;       /* drk_images_ptx(owner, name); NULL if none kept */
    int cooperative;               /* launched cooperatively (cuLaunchCooperativeKernel, the attribute) */
} drk_source_kernel;

/* What a build needs. */
typedef struct drk_build_in {
    const drk_driver *drv;
    CUcontext ctx;                 /* pushed for the build and popped after; NULL: the current one */
    const drk_source_kernel *k;
    uint32_t block_threads;        /* the launch's block, x*y*z: the variant serves that block only */
    CUfunction fn;                 /* attribute sources: the function to set (see source_attr.c) */
    unsigned sm;                   /* the device's compute capability (90); 0: drk_images_sm() */
    const void *cubin;             /* PTX source: this variant's cubin from the cache, loaded instead of compiled */
    int keep_cubin;                /* PTX source: hand a compiled cubin back in drk_built (for the cache) */
} drk_build_in;

/* What a build made. */
typedef struct drk_built {
    CUmodule module;               /* loaded by the build; NULL when nothing was loaded */
    CUfunction fn;                 /* the variant's function */
    uint64_t build_ns;             /* wall time of the build, load and lookup */
    uint64_t load_ns;              /* of that, the module's load into the context */
    float jit_ms;                  /* the compile's own time; -1 if unknown, 0 for a cubin given */
    void *cubin;                   /* with keep_cubin: the compiled cubin (malloc'd, the caller's to free) */
    size_t cubin_len;
    CUresult rc;                   /* the failing call's result; CUDA_SUCCESS after a build */
    char why[320];                 /* a failure in words: the call, its result, the JIT's error log */
    char log[256];                 /* the JIT's info log (registers, spills) */
} drk_built;

typedef struct drk_source {
    const char *name;              /* "ptx_jit", "attributes" */
    unsigned nknobs;               /* <= DRK_SOURCE_MAX_KNOBS */
    const drk_knob *knobs;
    /* 1 if variants of `k` can be made; 0 with the reason in `why`. */
    int (*applies)(const drk_source_kernel *k, char *why, size_t whylen);
    /* 1 for a variant that makes the same function as one with fewer knobs
     * set (the driver ignores a knob given with another, or one the
     * kernel's own directives fix): not worth a trial. */
    int (*redundant)(const drk_source_kernel *k, const drk_variant *v);
    /* Builds variant `v`: 0 with *out filled, or -1 with out->why (and
     * out->rc); nothing is left loaded on failure. */
    int (*build)(const drk_build_in *in, const drk_variant *v, drk_built *out);
    /* Undoes a successful build (unloads its module; restores an
     * attribute). CUDA_SUCCESS or the driver's failure; *b is cleared. */
    CUresult (*unload)(const drk_build_in *in, drk_built *b);
    /* Makes variant `v`'s code without loading it, on the CPU: 0 with
     * out->cubin (malloc'd, the caller's), cubin_len, jit_ms, build_ns and
     * log; -1 with out->why. build() loads it given as in->cubin, so the
     * code can be compared with others' before the GPU sees it. NULL for
     * a source that makes no code (attributes). */
    int (*compile)(const drk_build_in *in, const drk_variant *v, drk_built *out);
} drk_source;

extern const drk_source drk_source_ptx;  /* source_ptx.c: JIT options of the kernel's PTX */
extern const drk_source drk_source_attr; /* source_attr.c: attributes of the same code */

/* Whether `v` changes the code (a rebuild: a knob that rebuilds is off its
 * default) or only attributes of the same code. */
int drk_variant_rebuilds(const drk_source *s, const drk_variant *v);

/* How many variants `s` has (the product of its knobs' values). */
uint32_t drk_source_variants(const drk_source *s);
/* The i-th of them (knob 0 varies fastest); i = 0 is the default. */
drk_variant drk_source_variant_at(const drk_source *s, uint32_t i);

/* "max_registers=64 opt_level=3": the knobs off their default, "default"
 * if none; a block value as its number when block_threads is given. For
 * logs and cache keys. Returns snprintf's count. */
int drk_source_variant_text(const drk_source *s, const drk_variant *v, uint32_t block_threads, char *buf, size_t len);

/* Options source_ptx.c never passes to nvJitLink, whatever it is asked,
 * as prefixes: they change what a kernel computes, or what code is made,
 * or make code drk cannot prove. NULL-terminated. */
extern const char *const drk_source_ptx_never[];

#endif
