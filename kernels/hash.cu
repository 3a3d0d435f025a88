// drk_hash: a 64-bit hash of a buffer, for cheap "are these still the bytes
// the original wrote?" checks (kernels/kernels.h defines the function). A
// sum of per-word terms: any grid may compute it, blocks add their partial
// sums in any order, and the last block applies the final mix.
#include "kernels/device.cuh"

namespace {

__device__ __forceinline__ u64 fmix64(u64 x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

// Word i's term of the sum.
__device__ __forceinline__ u64 term(u64 w, u64 i)
{
    return fmix64(w + (i + 1) * DRK_HASH_G);
}

} // namespace

extern "C" __global__ void drk_hash(const unsigned char *src, unsigned long long n, drk_hash_result *r)
{
    u64 g = global_thread(), stride = grid_threads();
    u64 sum = 0;
    // Units of 16 bytes from the buffer's start (words 2j and 2j + 1), not
    // from an aligned address: the words are the function's, whatever the
    // alignment.
    u64 units = (n + 15) / 16;
    for (u64 j = g; j < units; j += stride) {
        u64 off = 16 * j, lo, hi;
        if (off + 16 <= n && load16(src, n, off, lo, hi)) {
            sum += term(lo, 2 * j) + term(hi, 2 * j + 1);
        } else {
            u64 end = off + 16 < n ? off + 16 : n;
            lo = 0, hi = 0;
#pragma unroll 1 // a rare path: kept small
            for (u64 i = off; i < end; i++) {
                u64 byte = (u64)src[i] << (8 * ((i - off) & 7));
                if (i - off < 8)
                    lo |= byte;
                else
                    hi |= byte;
            }
            sum += term(lo, 2 * j);
            if (off + 8 < n) // word 2j + 1 has a byte of the buffer
                sum += term(hi, 2 * j + 1);
        }
    }

    u64 unused_min = 0, unused_max = 0;
    block_reduce(sum, unused_min, unused_max);
    if (thread_in_block() != 0)
        return;
    atomicAdd(&r->acc_sum, sum);
    if (last_block(&r->acc_blocks)) {
        r->hash = fmix64(read_acc(&r->acc_sum) + fmix64(n + DRK_HASH_G));
        r->n = n;
        r->blocks = grid_blocks();
        set_done(&r->done);
    }
}
