/* Fixed-size records from mmap'd slabs, on a free list: what the heap's
 * blocks and the pool's pending frees are made of, so that allocating and
 * freeing device memory never calls malloc. Not thread-safe: its owner
 * serializes calls. */
#ifndef DRK_ALLOC_SLAB_H
#define DRK_ALLOC_SLAB_H

#include <stddef.h>

typedef struct drk_slab {
    size_t size;   /* of a record, at least a pointer */
    size_t per;    /* records a slab holds */
    void *slabs;   /* mapped, each starting with its successor */
    void *spare;   /* free records, each starting with the next */
} drk_slab;

/* Records of `size` bytes, `per` to a slab. */
void drk_slab_init(drk_slab *s, size_t size, size_t per);
/* A zeroed record, or NULL when no memory can be mapped. */
void *drk_slab_get(drk_slab *s);
void drk_slab_put(drk_slab *s, void *record);
/* Unmaps every slab; their records are gone. */
void drk_slab_fini(drk_slab *s);

#endif
