// CUDA's device built-ins on the host, enough to run drk's kernels (the .cu
// files of kernels/, compiled as C++) on the CPU: each block's threads are
// OS threads, __syncthreads a barrier, a warp shuffle an exchange between
// two warp barriers, atomics GCC's; blocks run one after another, so
// __shared__ (function-local statics) is the running block's. Only what
// the kernels use; a shuffle by a partial warp, which real hardware leaves
// undefined, aborts.
#ifndef DRK_TESTS_KERNELS_EMULATE_H
#define DRK_TESTS_KERNELS_EMULATE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct emu_dim3 {
    unsigned x, y, z;
};
static emu_dim3 gridDim, blockDim, blockIdx; // one block runs at a time
static thread_local emu_dim3 threadIdx;

struct alignas(16) ulonglong2 {
    unsigned long long x, y;
};
static inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y)
{
    return ulonglong2{x, y};
}

template <class T> static inline T __ldcs(const T *p)
{
    return *p;
}

static inline int __popcll(unsigned long long x)
{
    return __builtin_popcountll(x);
}
static inline int __ffsll(long long x)
{
    return __builtin_ffsll(x);
}
static inline int __clzll(long long x)
{
    return x ? __builtin_clzll((unsigned long long)x) : 64;
}

static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
static inline void __threadfence()
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static pthread_barrier_t emu_block_barrier, emu_warp_barrier[32];
static unsigned long long emu_exchange[32][32];

static inline unsigned emu_thread()
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

static inline void __syncthreads()
{
    pthread_barrier_wait(&emu_block_barrier);
}

static inline unsigned long long __shfl_xor_sync(unsigned mask, unsigned long long v, unsigned d)
{
    unsigned t = emu_thread(), w = t / 32, lane = t % 32;
    if (mask != 0xffffffffu || (w + 1) * 32 > blockDim.x * blockDim.y * blockDim.z) {
        fprintf(stderr, "emulate: shuffle with mask %08x in warp %u of a %u-thread block\n", mask, w,
                blockDim.x * blockDim.y * blockDim.z);
        abort();
    }
    emu_exchange[w][lane] = v;
    pthread_barrier_wait(&emu_warp_barrier[w]);
    unsigned long long r = emu_exchange[w][lane ^ d];
    pthread_barrier_wait(&emu_warp_barrier[w]);
    return r;
}

struct emu_shape {
    unsigned gx, gy, gz, bx, by, bz;
};

template <class F> struct emu_job {
    F *body;
    emu_dim3 tid;
};

template <class F> static void *emu_thread_main(void *arg)
{
    emu_job<F> *job = (emu_job<F> *)arg;
    threadIdx = job->tid;
    (*job->body)();
    return nullptr;
}

// Runs body() as every thread of the grid, block after block.
template <class F> static void emu_launch(emu_shape s, F body)
{
    gridDim = {s.gx, s.gy, s.gz};
    blockDim = {s.bx, s.by, s.bz};
    unsigned nt = s.bx * s.by * s.bz;
    if (nt == 0 || nt > 1024) {
        fprintf(stderr, "emulate: block of %u threads\n", nt);
        abort();
    }
    pthread_barrier_init(&emu_block_barrier, nullptr, nt);
    for (unsigned w = 0; w < nt / 32; w++)
        pthread_barrier_init(&emu_warp_barrier[w], nullptr, 32);
    pthread_attr_t attr; // small stacks: thousands of threads are made and joined
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_t *threads = (pthread_t *)malloc(nt * sizeof(pthread_t));
    emu_job<F> *jobs = (emu_job<F> *)malloc(nt * sizeof(emu_job<F>));
    for (unsigned z = 0; z < s.gz; z++)
        for (unsigned y = 0; y < s.gy; y++)
            for (unsigned x = 0; x < s.gx; x++) {
                blockIdx = {x, y, z};
                for (unsigned t = 0; t < nt; t++) {
                    jobs[t].body = &body;
                    jobs[t].tid = {t % s.bx, t / s.bx % s.by, t / (s.bx * s.by)};
                    if (pthread_create(&threads[t], &attr, emu_thread_main<F>, &jobs[t])) {
                        fprintf(stderr, "emulate: pthread_create failed\n");
                        abort();
                    }
                }
                for (unsigned t = 0; t < nt; t++)
                    pthread_join(threads[t], nullptr);
            }
    pthread_attr_destroy(&attr);
    free(threads);
    free(jobs);
    pthread_barrier_destroy(&emu_block_barrier);
    for (unsigned w = 0; w < nt / 32; w++)
        pthread_barrier_destroy(&emu_warp_barrier[w]);
}

#endif
