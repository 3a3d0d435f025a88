#include "evolve/space.h"

#include <stdio.h>
#include <string.h>

const drk_space drk_space_ptx = {
    "ptx",
    5,
    {
        {"regs", 11, {0, 32, 40, 48, 56, 64, 80, 96, 128, 168, 255}},
        {"minctas", 3, {0, 2, 4}},
        {"opt", 2, {4, 3}},
        {"cache", 3, {-1, 1, 2}},
        {"carveout", 4, {-1, 25, 50, 100}},
    },
    5,
    {DRK_PTX_REGS, DRK_PTX_MINCTAS, DRK_PTX_CARVEOUT, DRK_PTX_CACHE, DRK_PTX_OPT},
};

int drk_space_check(const drk_space *s)
{
    if (!s || s->ndims < 1 || s->ndims > DRK_SPACE_DIMS)
        return -1;
    if (s->nscan) {
        /* A permutation of the dimensions. */
        unsigned seen = 0;
        if (s->nscan != s->ndims)
            return -1;
        for (unsigned i = 0; i < s->nscan; i++) {
            if (s->scan[i] >= s->ndims || (seen >> s->scan[i] & 1))
                return -1;
            seen |= 1u << s->scan[i];
        }
    }
    uint64_t size = 1;
    for (unsigned d = 0; d < s->ndims; d++) {
        if (s->dims[d].count < 1 || s->dims[d].count > DRK_SPACE_VALUES)
            return -1;
        size *= s->dims[d].count;
    }
    return size < DRK_VARIANT_NONE ? 0 : -1;
}

uint32_t drk_space_size(const drk_space *s)
{
    uint64_t size = 1;
    for (unsigned d = 0; d < s->ndims; d++)
        size *= s->dims[d].count;
    return size < DRK_VARIANT_NONE ? (uint32_t)size : DRK_VARIANT_NONE;
}

int drk_variant_valid(const drk_space *s, const drk_variant *v)
{
    for (unsigned d = 0; d < DRK_SPACE_DIMS; d++)
        if (d < s->ndims ? v->k[d] >= s->dims[d].count : v->k[d] != 0)
            return 0;
    return 1;
}

int drk_variant_is_default(const drk_variant *v)
{
    for (unsigned d = 0; d < DRK_SPACE_DIMS; d++)
        if (v->k[d])
            return 0;
    return 1;
}

int drk_variant_equal(const drk_variant *a, const drk_variant *b)
{
    return memcmp(a->k, b->k, sizeof a->k) == 0;
}

uint32_t drk_variant_id(const drk_space *s, const drk_variant *v)
{
    if (!drk_variant_valid(s, v))
        return DRK_VARIANT_NONE;
    uint32_t id = 0;
    for (unsigned d = 0; d < s->ndims; d++)
        id = id * s->dims[d].count + v->k[d];
    return id;
}

int drk_variant_from_id(const drk_space *s, uint32_t id, drk_variant *out)
{
    memset(out, 0, sizeof *out);
    if (id >= drk_space_size(s))
        return -1;
    for (unsigned d = s->ndims; d-- > 0;) {
        out->k[d] = (uint8_t)(id % s->dims[d].count);
        id /= s->dims[d].count;
    }
    return 0;
}

unsigned drk_variant_distance(const drk_space *s, const drk_variant *a, const drk_variant *b)
{
    unsigned steps = 0;
    for (unsigned d = 0; d < s->ndims; d++)
        steps += a->k[d] > b->k[d] ? (unsigned)(a->k[d] - b->k[d]) : (unsigned)(b->k[d] - a->k[d]);
    return steps;
}

unsigned drk_space_scan(const drk_space *s, unsigned i)
{
    return s->nscan ? s->scan[i % s->nscan] : i % s->ndims;
}

int drk_variant_value(const drk_space *s, const drk_variant *v, unsigned d)
{
    return d < s->ndims && v->k[d] < s->dims[d].count ? s->dims[d].values[v->k[d]] : 0;
}

const char *drk_variant_text(const drk_space *s, const drk_variant *v, char *buf, size_t n)
{
    if (!n)
        return buf;
    buf[0] = 0;
    size_t len = 0;
    for (unsigned d = 0; d < s->ndims && len < n; d++) {
        if (!v->k[d])
            continue;
        int w = snprintf(buf + len, n - len, "%s%s=%d", len ? " " : "", s->dims[d].name, drk_variant_value(s, v, d));
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (!buf[0])
        snprintf(buf, n, "default");
    return buf;
}
