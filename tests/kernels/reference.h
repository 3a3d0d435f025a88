/* CPU references of drk's kernels (kernels/kernels.h), for the GPU suite's
 * kernels_check and the CPU emulation of the device code: byte by byte,
 * written from the header's definitions alone. */
#ifndef DRK_TESTS_KERNELS_REFERENCE_H
#define DRK_TESTS_KERNELS_REFERENCE_H

#include <stdint.h>

#include "kernels/kernels.h"

static inline drk_kernels_u64 ref_fmix64(drk_kernels_u64 x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline drk_kernels_u64 ref_hash(const unsigned char *p, drk_kernels_u64 n)
{
    drk_kernels_u64 s = 0;
    for (drk_kernels_u64 i = 0; i * 8 < n; i++) {
        drk_kernels_u64 w = 0;
        for (drk_kernels_u64 k = 0; k < 8 && i * 8 + k < n; k++)
            w |= (drk_kernels_u64)p[i * 8 + k] << (8 * k);
        s += ref_fmix64(w + (i + 1) * DRK_HASH_G);
    }
    return ref_fmix64(s + ref_fmix64(n + DRK_HASH_G));
}

typedef struct {
    drk_kernels_u64 ndiff, first, last;
} ref_diff;

static inline ref_diff ref_compare(const unsigned char *a, const unsigned char *b, drk_kernels_u64 n)
{
    ref_diff r = {0, ~0ull, ~0ull};
    for (drk_kernels_u64 i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (!r.ndiff)
                r.first = i;
            r.last = i;
            r.ndiff++;
        }
    return r;
}

/* What drk_poison leaves at byte i of its range. */
static inline unsigned char ref_poison_byte(drk_kernels_u64 pattern, drk_kernels_u64 i)
{
    return (unsigned char)(pattern >> (8 * (i & 7)));
}

#endif
