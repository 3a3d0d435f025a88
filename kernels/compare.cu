// drk_compare: the bitwise comparison of two device buffers that proves a
// variant's output equal to the original's (kernels/kernels.h has the
// contract). Each thread takes 16-byte units in a grid-stride loop and keeps
// its own count and lowest/highest differing offsets; blocks combine them
// with one set of atomics each, and the last block writes the result.
#include "kernels/device.cuh"

namespace {

// Bytes of x that are non-zero: each byte's bits folded into its bit 0.
__device__ __forceinline__ unsigned nonzero_bytes(u64 x)
{
    x |= x >> 4;
    x |= x >> 2;
    x |= x >> 1;
    return __popcll(x & 0x0101010101010101ull);
}

// x: the XOR of the 8 bytes at offset off of both buffers.
__device__ __forceinline__ void diff_word(u64 x, u64 off, u64 &count, u64 &first, u64 &end)
{
    if (!x)
        return;
    count += nonzero_bytes(x);
    u64 lo = off + (unsigned)(__ffsll((long long)x) - 1) / 8; // little-endian: low byte first
    u64 hi = off + (unsigned)(63 - __clzll((long long)x)) / 8;
    first = lo < first ? lo : first;
    end = hi + 1 > end ? hi + 1 : end;
}

__device__ __forceinline__ void diff_bytes(const unsigned char *a, const unsigned char *b, u64 from, u64 to,
                                           u64 &count, u64 &first, u64 &end)
{
#pragma unroll 1 // a rare path: kept small
    for (u64 i = from; i < to; i++)
        if (a[i] != b[i]) {
            count++;
            first = i < first ? i : first;
            end = i + 1 > end ? i + 1 : end;
        }
}

} // namespace

extern "C" __global__ void drk_compare(const unsigned char *a, const unsigned char *b, unsigned long long n,
                                       drk_compare_result *r)
{
    u64 g = global_thread(), stride = grid_threads();
    u64 count = 0, first = ~0ull, end = 0; // end: the highest differing offset + 1, 0 if none

    // Bytes before both pointers are 16-aligned (8-aligned if they differ
    // mod 16) go one by one, so the units after them take plain vector loads
    // on both sides. Pointers that differ mod 8 get no head: load16 shifts.
    uintptr_t ua = (uintptr_t)a, ub = (uintptr_t)b;
    u64 head = 0;
    if (((ua ^ ub) & 15) == 0)
        head = (16 - (ua & 15)) & 15;
    else if (((ua ^ ub) & 7) == 0)
        head = (8 - (ua & 7)) & 7;
    head = head < n ? head : n;
    for (u64 i = g; i < head; i += stride) // a grid may have fewer threads than head bytes
        diff_bytes(a, b, i, i + 1, count, first, end);

    u64 units = (n - head + 15) / 16;
    for (u64 j = g; j < units; j += stride) {
        u64 off = head + 16 * j, alo, ahi, blo, bhi;
        if (off + 16 <= n && load16(a, n, off, alo, ahi) && load16(b, n, off, blo, bhi)) {
            diff_word(alo ^ blo, off, count, first, end);
            diff_word(ahi ^ bhi, off + 8, count, first, end);
        } else {
            diff_bytes(a, b, off, off + 16 < n ? off + 16 : n, count, first, end);
        }
    }

    block_reduce(count, first, end);
    if (thread_in_block() != 0)
        return;
    if (count) {
        atomicAdd(&r->acc_ndiff, count);
        atomicMax(&r->acc_first_inv, ~first); // zeroed accumulators: the max of ~offset is the min offset
        atomicMax(&r->acc_last_end, end);
    }
    if (last_block(&r->acc_blocks)) {
        u64 nd = read_acc(&r->acc_ndiff);
        r->ndiff = nd;
        r->first = nd ? ~read_acc(&r->acc_first_inv) : ~0ull;
        r->last = nd ? read_acc(&r->acc_last_end) - 1 : ~0ull;
        r->blocks = grid_blocks();
        set_done(&r->done);
    }
}
