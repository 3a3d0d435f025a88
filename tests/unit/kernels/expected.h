/* What the fixtures built from params.cu hold, for test_cubin.c and
 * test_ptx.c. Parameter offsets and sizes follow from the CUDA source
 * (sizeof/alignof, kernelParams layout); registers, shared, constant bank 0
 * sizes are cuobjdump --dump-resource-usage's figures for nvcc 13.0; the
 * parameter records were checked with cuobjdump --dump-elf. */
#ifndef DRK_TESTS_UNIT_KERNELS_EXPECTED_H
#define DRK_TESTS_UNIT_KERNELS_EXPECTED_H

#include <stdint.h>

enum { FX_SM80, FX_SM90, FX_SM100, FX_RDC, FX_N };

typedef struct fx_param {
    uint32_t offset, size;
    int pointer; /* a pointer in the source */
} fx_param;

typedef struct fx_kernel {
    const char *name;
    uint32_t nparams;
    fx_param params[8];
    uint32_t params_size;
    uint32_t max_threads;
    uint32_t regs[FX_N], shared[FX_N], cbank0[FX_N];
    uint32_t stack; /* FRAME_SIZE; cuobjdump's STACK for executables (in -rdc objects it prints 0 until linked) */
} fx_kernel;

static const fx_kernel fx_kernels[] = {
    /* tmpl<float, 4>(float *, float) */
    {"_Z4tmplIfLi4EEvPT_S0_", 2, {{0, 8, 1}, {8, 4, 0}}, 12, 0, {8, 8, 8, 8}, {0, 0, 0, 0}, {364, 540, 908, 540}, 0},
    /* tmpl<double, 2>(double *, double) */
    {"_Z4tmplIdLi2EEvPT_S0_", 2, {{0, 8, 1}, {8, 8, 0}}, 16, 0, {8, 8, 8, 8}, {0, 0, 0, 0}, {368, 544, 912, 544}, 0},
    /* gaps(char, Gap: 16 B align 8, short, Wide: 16 B align 16, double, __half, float *) */
    {"_Z4gapsc3Gaps4Wided6__halfPf",
     7,
     {{0, 1, 0}, {8, 16, 0}, {24, 2, 0}, {32, 16, 0}, {48, 8, 0}, {56, 2, 0}, {64, 8, 1}},
     72,
     0,
     {10, 10, 10, 24},
     {0, 0, 0, 0},
     {424, 600, 968, 600},
     0},
    /* big(Big: 4400 B align 4, int *): the KPARAM_INFO_V2 form */
    {"_Z3big3BigPi", 2, {{0, 4400, 0}, {4400, 8, 1}}, 4408, 0, {8, 8, 8, 8}, {0, 0, 0, 0}, {11192, 4936, 5304, 4936}, 0},
    {"_Z8noparamsv", 0, {{0, 0, 0}}, 0, 0, {4, 4, 4, 4}, {0, 0, 0, 0}, {352, 528, 896, 528}, 0},
    /* __launch_bounds__(256, 2) */
    {"_Z7boundedPf", 1, {{0, 8, 1}}, 8, 256, {8, 8, 8, 8}, {0, 0, 0, 0}, {360, 536, 904, 536}, 0},
    /* 4096 + 132 bytes declared; sm_90 and sm_100 executables add 1 KiB */
    {"_Z6sharedPf", 1, {{0, 8, 1}}, 8, 0, {12, 12, 12, 14}, {4228, 5252, 5252, 4228}, {360, 536, 904, 536}, 0},
    /* stack(int *, int): int a[1024] on the stack */
    {"_Z5stackPii", 2, {{0, 8, 1}, {8, 4, 0}}, 12, 0, {30, 30, 28, 30}, {0, 0, 0, 0}, {364, 540, 908, 540}, 4096},
};

#define FX_NKERNELS (sizeof fx_kernels / sizeof fx_kernels[0])

#endif
