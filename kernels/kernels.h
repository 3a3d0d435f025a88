/* drk's own device code: the kernels the evolution engine's validation needs
 * (bitwise compare of two buffers, poison fill, hash), built from the .cu
 * files beside this header into one fatbin embedded in the library
 * (kernels/README.md).
 *
 * This header is the kernels' whole interface, for the host code that loads
 * the fatbin (cuModuleLoadData / cuLibraryLoadData) and launches them, and for
 * the device code itself (the result structs are shared). It is C11 and CUDA
 * C++, and includes nothing of drk.
 *
 * The ABI, kept simple so that a caller that may not include this header
 * (evolve/, which gets the fatbin bytes from shim/ at configure) can mirror
 * it and check its mirror against the image's own parameter layouts:
 *  - every kernel parameter is one 64-bit value (a device address, a length
 *    or a pattern), in the order of the fields of its *_params struct, whose
 *    layout is therefore the parameter buffer's: kernelParams[i] =
 *    &((drk_kernels_u64 *)&params)[i], or the whole struct as
 *    CU_LAUNCH_PARAM_BUFFER_POINTER;
 *  - any grid and block shape (1-, 2- or 3-D; partial warps too); the launch
 *    geometry is the caller's and never changes a result;
 *  - any length (0 included) and any alignment of every pointer; no kernel
 *    reads or writes a byte outside the [pointer, pointer + n) ranges it is
 *    given;
 *  - a result struct must be zeroed (cuMemsetD8Async on the launch's stream)
 *    before each launch and is valid once the launch has completed and its
 *    `done` is 1 (0: the kernel did not run to its end; never trust the
 *    other fields then).
 * DRK_KERNELS_ABI changes whenever a name, a parameter or a result field
 * does. */
#ifndef DRK_KERNELS_KERNELS_H
#define DRK_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define DRK_KERNELS_ABI 1

/* Every field below: 64 bits as CUDA's 64-bit atomics take them (and as
 * CUdeviceptr is), so the device code uses these structs as they are. */
typedef unsigned long long drk_kernels_u64;

#define DRK_KERNEL_COMPARE "drk_compare"
#define DRK_KERNEL_POISON "drk_poison"
#define DRK_KERNEL_HASH "drk_hash"

/* Recommended geometry: 256 threads a block, and a grid of
 * min(ceil(n / (16 * 256)), DRK_KERNELS_BLOCKS_PER_SM * SMs), at least 1
 * block (each thread takes 16 bytes at a time, in a grid-stride loop). */
#define DRK_KERNELS_BLOCK 256
#define DRK_KERNELS_BLOCKS_PER_SM 8
#define DRK_KERNELS_BYTES_PER_THREAD 16

/* drk_compare(a, b, n, result): compares the n bytes at a with the n bytes
 * at b, bitwise. Exact for any n and alignments: ndiff counts every
 * differing byte; first and last are the lowest and highest offsets of a
 * differing byte (both UINT64_MAX when ndiff is 0), so [first, last] spans
 * all differences (one contiguous run when ndiff == last - first + 1). The
 * differing bytes themselves are the caller's to fetch. */
typedef struct drk_compare_params {
    drk_kernels_u64 a;      /* device address */
    drk_kernels_u64 b;      /* device address */
    drk_kernels_u64 n;      /* bytes */
    drk_kernels_u64 result; /* device address of a zeroed drk_compare_result */
} drk_compare_params;

typedef struct drk_compare_result {
    drk_kernels_u64 ndiff;  /* differing bytes */
    drk_kernels_u64 first;  /* lowest differing offset; UINT64_MAX if none */
    drk_kernels_u64 last;   /* highest differing offset; UINT64_MAX if none */
    drk_kernels_u64 blocks; /* blocks that ran: the grid's size once done */
    uint32_t done;          /* 1: the fields above are final */
    uint32_t reserved;
    /* The kernel's accumulators, zeroed with the rest; not for the caller. */
    drk_kernels_u64 acc_ndiff, acc_first_inv, acc_last_end, acc_blocks;
} drk_compare_result;

/* drk_poison(dst, n, pattern): byte i of [dst, dst + n) becomes byte (i mod 8)
 * of the little-endian 64-bit pattern, i.e. the pattern repeats from the
 * buffer's start whatever dst's alignment. A byte b: pattern
 * b * 0x0101010101010101; a 32-bit word w: w * 0x100000001. No result. */
typedef struct drk_poison_params {
    drk_kernels_u64 dst;     /* device address */
    drk_kernels_u64 n;       /* bytes */
    drk_kernels_u64 pattern; /* 8 bytes, little-endian, from dst on */
} drk_poison_params;

/* drk_hash(src, n, result): a 64-bit hash of the n bytes at src, the same for
 * the same bytes whatever the grid, block or src's alignment:
 *
 *   w[i] = the little-endian 64-bit word of bytes [8i, 8i + 8), bytes past n
 *          taken as 0, for i < ceil(n / 8)
 *   S    = sum over i of fmix64(w[i] + (i + 1) * G)     (mod 2^64)
 *   hash = fmix64(S + fmix64(n + G))
 *
 * with G = 0x9e3779b97f4a7c15 and fmix64 MurmurHash3's finalizer (x ^= x >>
 * 33; x *= 0xff51afd7ed558ccd; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53; x ^= x
 * >> 33), a bijection. A sum is order-independent, so blocks add their parts
 * with atomics in any order and the result is exact. Buffers that differ in
 * one word always hash differently (each term is a bijection of its word);
 * otherwise collisions are as for a random 64-bit function: a check that
 * the bytes are as expected, not a proof against an adversary. */
typedef struct drk_hash_params {
    drk_kernels_u64 src;    /* device address */
    drk_kernels_u64 n;      /* bytes */
    drk_kernels_u64 result; /* device address of a zeroed drk_hash_result */
} drk_hash_params;

typedef struct drk_hash_result {
    drk_kernels_u64 hash;
    drk_kernels_u64 n;      /* the length hashed */
    drk_kernels_u64 blocks; /* blocks that ran: the grid's size once done */
    uint32_t done;          /* 1: the fields above are final */
    uint32_t reserved;
    /* The kernel's accumulators, zeroed with the rest; not for the caller. */
    drk_kernels_u64 acc_sum, acc_blocks;
} drk_hash_result;

#define DRK_HASH_G 0x9e3779b97f4a7c15ull

#ifdef __cplusplus
#define DRK_KERNELS_ASSERT(c, m) static_assert(c, m)
#else
#define DRK_KERNELS_ASSERT(c, m) _Static_assert(c, m)
#endif
DRK_KERNELS_ASSERT(sizeof(drk_compare_params) == 32 && sizeof(drk_poison_params) == 24 &&
                       sizeof(drk_hash_params) == 24,
                   "kernel parameters: one 64-bit value each");
DRK_KERNELS_ASSERT(sizeof(drk_compare_result) == 72 && offsetof(drk_compare_result, done) == 32,
                   "drk_compare_result layout");
DRK_KERNELS_ASSERT(sizeof(drk_hash_result) == 48 && offsetof(drk_hash_result, done) == 24,
                   "drk_hash_result layout");

#if !defined(__CUDACC__)
#ifdef __cplusplus
extern "C" {
#endif
/* The embedded fatbin (generated from the .cu files at build time; hidden in
 * the library): SASS for the archs kernels/kernels.cmake lists and PTX for
 * the lowest, 64-byte aligned, for cuModuleLoadData / cuLibraryLoadData. */
extern const unsigned char drk_kernels_fatbin[];
extern const size_t drk_kernels_fatbin_size;
/* The nvcc -gencode list it was built with, e.g. "sm_80 sm_90 ... compute_80". */
extern const char drk_kernels_fatbin_archs[];
#ifdef __cplusplus
}
#endif
#endif

#endif
