/* FNV-1a, 64 bits: a quick fingerprint (build digests, seeds, cache slot
 * tags), never a checksum that guards data. */
#ifndef DRK_BASE_FNV_H
#define DRK_BASE_FNV_H

#include <stddef.h>
#include <stdint.h>

#define DRK_FNV_OFFSET 0xcbf29ce484222325ull

/* `h` (DRK_FNV_OFFSET to begin) carried over `n` bytes of `data`. */
static inline uint64_t drk_fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#endif
