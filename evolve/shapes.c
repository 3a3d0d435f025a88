#include "evolve/shapes.h"

#include <string.h>

static uint64_t field(uint64_t v, unsigned bits)
{
    uint64_t max = ((uint64_t)1 << bits) - 1;
    return v < max ? v : max;
}

uint64_t drk_shape_class(const uint32_t grid[3], const uint32_t block[3], uint32_t dynamic_shared)
{
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    unsigned lg = blocks ? 63u - (unsigned)__builtin_clzll(blocks) : 0;
    return field(block[0], 11) | field(block[1], 11) << 11 | field(block[2], 7) << 22 |
           field(dynamic_shared, 19) << 29 | (uint64_t)lg << 48;
}

drk_shape_parts drk_shape_class_parts(uint64_t cls)
{
    drk_shape_parts p;
    p.block[0] = (uint32_t)(cls & 0x7ff);
    p.block[1] = (uint32_t)(cls >> 11 & 0x7ff);
    p.block[2] = (uint32_t)(cls >> 22 & 0x7f);
    p.dynamic_shared = (uint32_t)(cls >> 29 & 0x7ffff);
    p.grid_log2 = (unsigned)(cls >> 48 & 0x3f);
    return p;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ x >> 31;
}

void drk_shapes_init(drk_shapes *t)
{
    memset(t, 0, sizeof *t);
    t->now.round = 1;
}

/* Open addressing, linear probing; NULL when full. */
static drk_shapes_kernel *kernel_slot(drk_shapes *t, uint64_t kernel, int *fresh)
{
    unsigned mask = DRK_SHAPES_KERNELS - 1, i = (unsigned)mix(kernel) & mask;
    for (unsigned probe = 0; probe < DRK_SHAPES_KERNELS; probe++, i = (i + 1) & mask) {
        drk_shapes_kernel *s = &t->k[i];
        if (s->used && s->kernel == kernel) {
            *fresh = 0;
            return s;
        }
        if (!s->used) {
            if (t->nkernels >= DRK_SHAPES_KERNELS * 3 / 4)
                return NULL;
            s->used = 1;
            s->kernel = kernel;
            t->nkernels++;
            *fresh = 1;
            return s;
        }
    }
    return NULL;
}

/* 1: the pair was new (now kept); 0: known; -1: no room. */
static int class_add(drk_shapes *t, uint64_t kernel, uint64_t cls)
{
    unsigned mask = DRK_SHAPES_CLASSES - 1, i = (unsigned)mix(kernel ^ mix(cls)) & mask;
    for (unsigned probe = 0; probe < DRK_SHAPES_CLASSES; probe++, i = (i + 1) & mask) {
        drk_shapes_class *s = &t->c[i];
        if (s->used && s->kernel == kernel && s->cls == cls)
            return 0;
        if (!s->used) {
            if (t->nclasses >= DRK_SHAPES_CLASSES * 3 / 4)
                return -1;
            s->used = 1;
            s->kernel = kernel;
            s->cls = cls;
            t->nclasses++;
            return 1;
        }
    }
    return -1;
}

int drk_shapes_note(drk_shapes *t, uint64_t kernel, uint64_t cls)
{
    int fresh = 0;
    drk_shapes_kernel *k = kernel_slot(t, kernel, &fresh);
    if (!k) {
        t->untracked++;
        return DRK_SHAPE_KNOWN;
    }
    if (k->seen_round != t->now.round) {
        k->seen_round = t->now.round;
        t->now.kernels++;
        t->now.fresh += (unsigned)fresh;
    }
    int added = class_add(t, kernel, cls);
    if (added < 0) {
        t->untracked++;
        return DRK_SHAPE_KNOWN;
    }
    if (!added)
        return DRK_SHAPE_KNOWN;
    if (fresh)
        return DRK_SHAPE_NEW_KERNEL;
    if (k->researched_round != t->now.round) {
        k->researched_round = t->now.round;
        t->now.researched++;
    }
    return DRK_SHAPE_NEW_CLASS;
}

drk_shapes_round drk_shapes_round_end(drk_shapes *t)
{
    drk_shapes_round r = t->now;
    r.share = r.kernels ? (double)r.researched / r.kernels : 0;
    memset(&t->now, 0, sizeof t->now);
    t->now.round = r.round + 1;
    return r;
}
