// drk_poison: fills a buffer with a repeating 8-byte pattern before a
// variant runs, so that a byte the variant fails to write cannot pass for
// one the original wrote (kernels/kernels.h has the contract). Head bytes up
// to the first 16-aligned address, then 16-byte stores, then the tail.
#include "kernels/device.cuh"

namespace {

__device__ __forceinline__ unsigned char pattern_byte(u64 pattern, u64 i)
{
    return (unsigned char)(pattern >> (8 * (i & 7)));
}

} // namespace

extern "C" __global__ void drk_poison(unsigned char *dst, unsigned long long n, unsigned long long pattern)
{
    u64 g = global_thread(), stride = grid_threads();
    u64 head = (16 - ((uintptr_t)dst & 15)) & 15;
    head = head < n ? head : n;
    for (u64 i = g; i < head; i += stride) // a grid may have fewer threads than head bytes
        dst[i] = pattern_byte(pattern, i);

    // Every unit starts at an offset = head (mod 16): the pattern rotated
    // by head bytes is what both of its 8-byte halves hold.
    unsigned s = (unsigned)(head & 7) * 8;
    u64 word = s ? (pattern >> s) | (pattern << (64 - s)) : pattern;
    ulonglong2 v = make_ulonglong2(word, word);
    u64 units = (n - head + 15) / 16;
    for (u64 j = g; j < units; j += stride) {
        u64 off = head + 16 * j;
        if (off + 16 <= n) {
            *(ulonglong2 *)(dst + off) = v;
        } else {
#pragma unroll 1 // a rare path: kept small
            for (u64 i = off; i < n; i++)
                dst[i] = pattern_byte(pattern, i);
        }
    }
}
