// What drk's kernels share: thread indices for any grid and block shape,
// 16-byte reads that stay inside the buffer whatever its alignment, a block
// reduction for any block size, and the last-block finish that
// makes a result's `done` trustworthy.
#ifndef DRK_KERNELS_DEVICE_CUH
#define DRK_KERNELS_DEVICE_CUH

#include <stdint.h>

#include "kernels/kernels.h"

namespace {

typedef unsigned long long u64;

__device__ __forceinline__ unsigned block_threads()
{
    return blockDim.x * blockDim.y * blockDim.z;
}

// The linear thread index, by which the hardware also forms warps.
__device__ __forceinline__ unsigned thread_in_block()
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ __forceinline__ u64 grid_blocks()
{
    return (u64)gridDim.x * gridDim.y * gridDim.z;
}

__device__ __forceinline__ u64 block_in_grid()
{
    return blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
}

__device__ __forceinline__ u64 global_thread()
{
    return block_in_grid() * block_threads() + thread_in_block();
}

__device__ __forceinline__ u64 grid_threads()
{
    return grid_blocks() * block_threads();
}

// The 16 bytes at p + off (off + 16 <= n) as two little-endian words, read
// with loads that stay inside [p, p + n): one 16-byte load where p + off is
// 16-aligned, two 8-byte loads where it is 8-aligned, else three aligned
// 8-byte words shifted together. False where that last form would reach
// outside the buffer (at most the first and the last unit): the caller then
// reads the bytes one at a time. Streaming loads: each byte is read once.
__device__ __forceinline__ bool load16(const unsigned char *p, u64 n, u64 off, u64 &lo, u64 &hi)
{
    uintptr_t q = (uintptr_t)p + off;
    if ((q & 15) == 0) {
        ulonglong2 v = __ldcs((const ulonglong2 *)q);
        lo = v.x, hi = v.y;
        return true;
    }
    if ((q & 7) == 0) {
        lo = __ldcs((const u64 *)q);
        hi = __ldcs((const u64 *)(q + 8));
        return true;
    }
    uintptr_t w = q & ~(uintptr_t)7;
    if (w < (uintptr_t)p || w + 24 > (uintptr_t)p + n)
        return false;
    unsigned s = (unsigned)(q & 7) * 8; // 8..56: both shifts below are defined
    u64 w0 = __ldcs((const u64 *)w), w1 = __ldcs((const u64 *)(w + 8)), w2 = __ldcs((const u64 *)(w + 16));
    lo = (w0 >> s) | (w1 << (64 - s));
    hi = (w1 >> s) | (w2 << (64 - s));
    return true;
}

// Sum, min and max over a full warp, into every lane.
__device__ __forceinline__ void warp_reduce(u64 &sum, u64 &mn, u64 &mx)
{
#pragma unroll
    for (unsigned d = 16; d; d >>= 1) {
        u64 s = __shfl_xor_sync(0xffffffffu, sum, d), a = __shfl_xor_sync(0xffffffffu, mn, d),
            b = __shfl_xor_sync(0xffffffffu, mx, d);
        sum += s;
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
}

// Sum, min and max over the block, valid in thread 0. Every thread of the
// block must call it (no thread may have returned early). Where every warp
// is full (block sizes that are multiples of 32), warps shuffle, then every
// warp reduces the warps' values again: no branch on the thread index
// before a shuffle, so the compiler sees the warp converged (otherwise it
// wraps each shuffle in a slow collective loop). Other block sizes have a
// partial warp, which may not shuffle with a full mask: shared-memory
// atomics then, slower but only there.
__device__ __forceinline__ void block_reduce(u64 &sum, u64 &mn, u64 &mx)
{
    __shared__ u64 s_sum[32], s_mn[32], s_mx[32];
    unsigned nt = block_threads(), t = thread_in_block(), lane = t & 31, warp = t >> 5;
    if (nt & 31) { // uniform over the block
        if (t == 0)
            s_sum[0] = 0, s_mn[0] = ~0ull, s_mx[0] = 0;
        __syncthreads();
        atomicAdd(&s_sum[0], sum);
        atomicMin(&s_mn[0], mn);
        atomicMax(&s_mx[0], mx);
        __syncthreads();
        sum = s_sum[0], mn = s_mn[0], mx = s_mx[0];
        return;
    }
    warp_reduce(sum, mn, mx);
    unsigned nw = nt / 32;
    if (nw == 1)
        return;
    if (lane == 0)
        s_sum[warp] = sum, s_mn[warp] = mn, s_mx[warp] = mx;
    __syncthreads();
    sum = lane < nw ? s_sum[lane] : 0;
    mn = lane < nw ? s_mn[lane] : ~0ull;
    mx = lane < nw ? s_mx[lane] : 0;
    warp_reduce(sum, mn, mx);
}

// Thread 0 of each block, after its atomics: counts the block done and
// tells whether it is the grid's last, which then sees every other block's
// atomics (the fences order them before each ticket).
__device__ __forceinline__ bool last_block(u64 *acc_blocks)
{
    __threadfence();
    bool last = atomicAdd(acc_blocks, 1ull) == grid_blocks() - 1;
    if (last)
        __threadfence();
    return last;
}

__device__ __forceinline__ u64 read_acc(const u64 *p)
{
    return *(const volatile u64 *)p; // written by other blocks' atomics (L2), not cached in L1
}

// The result's outputs are written; then `done`, after a fence, so whoever
// sees done == 1 sees them.
__device__ __forceinline__ void set_done(uint32_t *done)
{
    __threadfence();
    *(volatile uint32_t *)done = 1;
}

} // namespace

#endif
