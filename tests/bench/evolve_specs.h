/* The twelve kernels of evolve_kernels.cu as launched by the evolution
 * benchmarks (evolve_space.c, evolve_run.c): each one's grid, block, buffers
 * (size, how they are filled, which are outputs) and arguments, and the
 * filling. Static definitions: one program includes it once, after
 * bench_cuda.h (read_file). */
#ifndef DRK_BENCH_EVOLVE_SPECS_H
#define DRK_BENCH_EVOLVE_SPECS_H

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ZERO, RAND, BYTES, INDEX, POS };
typedef struct {
    size_t bytes;
    int init, out; /* out: compared after a launch (written by the kernel) */
    unsigned range; /* INDEX: values below it */
} buf_spec;
typedef struct {
    char kind; /* 'b' buffer, 'i' int, 'f' float */
    int i;
    float f;
} arg_spec;
typedef struct {
    const char *name;
    unsigned grid[3], block[3];
    buf_spec bufs[6];
    int nbufs;
    arg_spec args[8];
    int nargs;
} kernel_spec;

#define B(k) {'b', k, 0}
#define I(v) {'i', v, 0}
#define F(v) {'f', 0, v}
#define N24 (1 << 24)
#define N22 (1 << 22)

static const kernel_spec kernels[] = {
    {"saxpy", {4096, 1, 1}, {256, 1, 1}, {{4u * N24, RAND, 1, 0}, {4u * N24, RAND, 0, 0}}, 2,
     {B(0), B(1), F(2.0f), I(N24)}, 4},
    {"matmul_naive", {32, 32, 1}, {16, 16, 1}, {{4u << 18, ZERO, 1, 0}, {4u << 18, RAND, 0, 0}, {4u << 18, RAND, 0, 0}},
     3, {B(0), B(1), B(2), I(512)}, 4},
    {"matmul_tiled", {64, 64, 1}, {16, 16, 1}, {{4u << 20, ZERO, 1, 0}, {4u << 20, RAND, 0, 0}, {4u << 20, RAND, 0, 0}},
     3, {B(0), B(1), B(2), I(1024)}, 4},
    {"stencil5", {256, 256, 1}, {16, 16, 1}, {{4u << 24, ZERO, 1, 0}, {4u << 24, RAND, 0, 0}}, 2,
     {B(0), B(1), I(4096), I(4096)}, 4},
    {"softmax_rows", {4096, 1, 1}, {256, 1, 1}, {{4u << 22, ZERO, 1, 0}, {4u << 22, RAND, 0, 0}}, 2,
     {B(0), B(1), I(1024)}, 3},
    {"transpose_naive", {256, 256, 1}, {16, 16, 1}, {{4u << 24, ZERO, 1, 0}, {4u << 24, RAND, 0, 0}}, 2,
     {B(0), B(1), I(4096)}, 3},
    {"histogram256", {1024, 1, 1}, {256, 1, 1}, {{1024, ZERO, 1, 0}, {N24, BYTES, 0, 0}}, 2, {B(0), B(1), I(N24)}, 3},
    {"nbody", {32, 1, 1}, {256, 1, 1}, {{16u * 8192, ZERO, 1, 0}, {16u * 8192, POS, 0, 0}}, 2, {B(0), B(1), I(8192)}, 3},
    {"black_scholes", {1024, 1, 1}, {256, 1, 1},
     {{4u * N22, ZERO, 1, 0}, {4u * N22, ZERO, 1, 0}, {4u * N22, RAND, 0, 0}, {4u * N22, RAND, 0, 0},
      {4u * N22, RAND, 0, 0}},
     5, {B(0), B(1), B(2), B(3), B(4), F(0.02f), F(0.30f), I(N22)}, 8},
    {"layernorm", {4096, 1, 1}, {256, 1, 1},
     {{4u << 22, ZERO, 1, 0}, {4u << 22, RAND, 0, 0}, {4096, RAND, 0, 0}, {4096, RAND, 0, 0}}, 4,
     {B(0), B(1), B(2), B(3), I(1024)}, 5},
    {"gather_rows", {4096, 1, 1}, {256, 1, 1},
     {{4u << 22, ZERO, 1, 0}, {4u << 21, RAND, 0, 0}, {4u << 14, INDEX, 0, 8192}}, 3,
     {B(0), B(1), B(2), I(1 << 14), I(256)}, 5},
    {"conv1d_15", {65536, 1, 1}, {256, 1, 1}, {{4u * N24, ZERO, 1, 0}, {4u * N24, RAND, 0, 0}, {60, RAND, 0, 0}}, 3,
     {B(0), B(1), B(2), I(N24)}, 4},
};
#define NKERNELS (sizeof kernels / sizeof *kernels)

/* Kernel k's launch parameters, its buffers at d: each argument's word in
 * words[], params[] pointing at them. */
static inline void kernel_params(const kernel_spec *k, const CUdeviceptr *d, uint64_t words[8], void *params[8])
{
    for (int a = 0; a < k->nargs; a++) {
        const arg_spec *s = &k->args[a];
        words[a] = 0;
        if (s->kind == 'b')
            memcpy(&words[a], &d[s->i], sizeof(CUdeviceptr));
        else if (s->kind == 'i')
            memcpy(&words[a], &s->i, 4);
        else
            memcpy(&words[a], &s->f, 4);
        params[a] = &words[a];
    }
}

/* The kernel named `name`; NULL when none is. */
static inline const kernel_spec *find_kernel(const char *name)
{
    for (size_t i = 0; i < NKERNELS; i++)
        if (strcmp(kernels[i].name, name) == 0)
            return &kernels[i];
    return NULL;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void fill_host(void *p, const buf_spec *b)
{
    size_t n4 = b->bytes / 4;
    float *f = p;
    unsigned *u = p;
    switch (b->init) {
    case ZERO: memset(p, 0, b->bytes); break;
    case RAND:
        for (size_t i = 0; i < n4; i++)
            f[i] = 0.5f + (float)(next32() % 100000) / 100000.0f;
        break;
    case BYTES:
        for (size_t i = 0; i < b->bytes; i++)
            ((unsigned char *)p)[i] = (unsigned char)(next32() % 251);
        break;
    case INDEX:
        for (size_t i = 0; i < n4; i++)
            u[i] = next32() % b->range;
        break;
    case POS:
        for (size_t i = 0; i < n4; i++)
            f[i] = (i % 4 == 3 ? 1.0f : -1.0f) + (float)(next32() % 100000) / 50000.0f;
        break;
    }
}

#endif
