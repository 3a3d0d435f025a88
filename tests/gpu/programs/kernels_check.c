/* drk's own kernels (kernels/kernels.h) on a real GPU, loaded the way the
 * engine will load them: the fatbin embedded in the library
 * (drk_kernels_fatbin) through the driver API's cuModuleLoadData, launched
 * with cuLaunchKernel. Every result is held against a CPU reference:
 *
 *  - drk_compare on lengths 0 .. 1 MiB + 5 at every pair of offsets 0..15
 *    of both buffers (fewer pairs for the large lengths), with no, one, a
 *    few, a run of and all bytes differing: ndiff, first and last exact.
 *    The bytes around both windows differ between the buffers, so a kernel
 *    that reads one byte outside its range counts it;
 *  - drk_hash at offsets 0..15 of random bytes framed by random bytes: the
 *    reference function (kernels.h) for every grid, and the same whatever
 *    the alignment;
 *  - drk_poison at offsets 0..15 with an 8-byte and a 1-byte pattern: the
 *    window holds the pattern from its start, the bytes around it are
 *    untouched;
 *  - launch shapes: one thread, partial warps (33, 96 threads), 2-D and
 *    3-D grids and blocks, 1024-thread blocks, grids far larger than the
 *    work, the recommended one; parameters as kernelParams and as one
 *    CU_LAUNCH_PARAM_BUFFER_POINTER buffer;
 *  - buffers that end where their allocation ends (for compute-sanitizer's
 *    memcheck to see any read or write past the end);
 *  - the bandwidth of each kernel on 256 MiB, aligned and misaligned.
 * The references are tests/kernels/reference.h's.
 *
 *   kernels_check [--ptx] [--quick]
 *
 * --ptx sets CUDA_FORCE_PTX_JIT=1 before cuInit, so the driver JITs the
 * fatbin's PTX instead of loading its SASS (checked: the functions' PTX
 * version is then the lowest arch's). --quick runs fewer cases (for
 * memcheck, which slows every launch). Prints "ok ..." and exits 0, or the
 * first failures and exits 1. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU_CHECK_PROGRAM "kernels_check"
#include "kernels/kernels.h"
#include "tests/gpu/programs/cu_check.h"
#include "tests/kernels/reference.h"

typedef unsigned long long u64;

static CUfunction f_compare, f_hash, f_poison;
static long failures, checks;

#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            if (failures++ < 20) {                                                                                     \
                fprintf(stderr, "kernels_check: line %d: %s: ", __LINE__, #cond);                                     \
                fprintf(stderr, __VA_ARGS__);                                                                          \
                fprintf(stderr, "\n");                                                                                 \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

/* ------------------------------------------------------------------- inputs */

static uint64_t rng = 0x243f6a8885a308d3ull;
static u64 next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void fill_random(unsigned char *p, u64 n)
{
    for (u64 i = 0; i < n; i++)
        p[i] = (unsigned char)next_rand();
}

/* ------------------------------------------------------------------ launches */

typedef struct {
    unsigned gx, gy, gz, bx, by, bz;
} shape;

static int sms;

static shape recommended(u64 n)
{
    u64 per_block = (u64)DRK_KERNELS_BYTES_PER_THREAD * DRK_KERNELS_BLOCK;
    u64 g = (n + per_block - 1) / per_block, cap = (u64)DRK_KERNELS_BLOCKS_PER_SM * (u64)sms;
    g = g < cap ? g : cap;
    return (shape){g ? (unsigned)g : 1, 1, 1, DRK_KERNELS_BLOCK, 1, 1};
}

/* The shapes every case cycles through; index 0 is the recommended one. */
static const shape shapes[] = {
    {0, 0, 0, 0, 0, 0},    {1, 1, 1, 1, 1, 1},       {1, 1, 1, 32, 1, 1},   {7, 1, 1, 33, 1, 1},
    {3, 1, 1, 96, 1, 1},   {2, 3, 1, 8, 4, 2},       {3, 2, 2, 5, 3, 3},    {64, 1, 1, 1024, 1, 1},
    {5000, 1, 1, 256, 1, 1}, {1, 1, 1, 1024, 1, 1}, {11, 1, 1, 1000, 1, 1}, {2, 1, 1, 64, 2, 1},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static shape shape_for(unsigned i, u64 n)
{
    shape s = shapes[i % NSHAPES];
    return s.gx ? s : recommended(n);
}

static u64 blocks_of(shape s)
{
    return (u64)s.gx * s.gy * s.gz;
}

/* kernelParams from a *_params struct: every parameter is one 64-bit field. */
static void launch(CUfunction f, shape s, void *params, unsigned nparams, int as_buffer)
{
    if (as_buffer) {
        size_t size = nparams * sizeof(u64);
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        CU_CHECK(cuLaunchKernel(f, s.gx, s.gy, s.gz, s.bx, s.by, s.bz, 0, NULL, NULL, extra));
    } else {
        void *kp[4];
        for (unsigned i = 0; i < nparams; i++)
            kp[i] = (u64 *)params + i;
        CU_CHECK(cuLaunchKernel(f, s.gx, s.gy, s.gz, s.bx, s.by, s.bz, 0, NULL, kp, NULL));
    }
}

static CUdeviceptr d_result;

static drk_compare_result run_compare(CUdeviceptr a, CUdeviceptr b, u64 n, shape s, int as_buffer)
{
    drk_compare_result r;
    CU_CHECK(cuMemsetD8(d_result, 0, sizeof r));
    drk_compare_params p = {a, b, n, d_result};
    launch(f_compare, s, &p, 4, as_buffer);
    CU_CHECK(cuMemcpyDtoH(&r, d_result, sizeof r));
    return r;
}

static drk_hash_result run_hash(CUdeviceptr src, u64 n, shape s, int as_buffer)
{
    drk_hash_result r;
    CU_CHECK(cuMemsetD8(d_result, 0, sizeof r));
    drk_hash_params p = {src, n, d_result};
    launch(f_hash, s, &p, 3, as_buffer);
    CU_CHECK(cuMemcpyDtoH(&r, d_result, sizeof r));
    return r;
}

static void run_poison(CUdeviceptr dst, u64 n, u64 pattern, shape s, int as_buffer)
{
    drk_poison_params p = {dst, n, pattern};
    launch(f_poison, s, &p, 3, as_buffer);
    CU_CHECK(cuCtxSynchronize());
}

/* ---------------------------------------------------------------------- cases */

#define MAXN ((1ull << 20) + 5)
#define FRAME (16 + MAXN + 32) /* offset, window, guard after it */

static const u64 lengths[] = {0,   1,   2,    3,    7,    8,    9,     15,    16,       17,  31,
                              32,  33,  47,   63,   64,   65,   255,   256,   257,      4095, 4096,
                              4097, 65535, 65536 + 13, MAXN};
#define NLENGTHS (sizeof lengths / sizeof lengths[0])

static unsigned char *ha, *hb, *hc;
static CUdeviceptr da, db;
static unsigned case_no;

/* The bytes before and after each window differ between a and b. */
static void frame(unsigned char *h, u64 off, u64 n, unsigned char guard)
{
    memset(h, guard, off);
    memset(h + off + n, guard, 32);
}

/* One compare case: b's window is a's with `pattern`'s differences. */
static void compare_case(u64 n, unsigned oa, unsigned ob, int pattern)
{
    unsigned char *wa = ha + oa, *wb = hb + ob;
    memcpy(wb, wa, n);
    switch (pattern) {
    case 1: /* the first byte */
        if (n)
            wb[0] ^= 0x80;
        break;
    case 2: /* the last byte */
        if (n)
            wb[n - 1] ^= 1;
        break;
    case 3: /* a few anywhere */
        for (int k = 0; n && k < 5; k++)
            wb[next_rand() % n] ^= (unsigned char)(1 + next_rand() % 255);
        break;
    case 4: /* a run */
        if (n) {
            u64 from = next_rand() % n, len = 1 + next_rand() % (n - from);
            for (u64 i = from; i < from + len; i++)
                wb[i] = (unsigned char)~wb[i];
        }
        break;
    case 5: /* all */
        for (u64 i = 0; i < n; i++)
            wb[i] = (unsigned char)~wa[i];
        break;
    }
    frame(hb, ob, n, 0x5a);
    CU_CHECK(cuMemcpyHtoD(db, hb, ob + n + 32));
    ref_diff want = ref_compare(wa, wb, n);
    shape s = shape_for(case_no, n);
    drk_compare_result r = run_compare(da + oa, db + ob, n, s, case_no % 5 == 4);
    case_no++;
    EXPECT(r.done == 1 && r.blocks == blocks_of(s) && r.ndiff == want.ndiff && r.first == want.first &&
               r.last == want.last,
           "compare n %llu a+%u b+%u pattern %d shape %ux%ux%u/%ux%ux%u: done %u blocks %llu ndiff %llu first %llu "
           "last %llu, expected ndiff %llu first %llu last %llu",
           n, oa, ob, pattern, s.gx, s.gy, s.gz, s.bx, s.by, s.bz, r.done, r.blocks, r.ndiff, r.first, r.last,
           want.ndiff, want.first, want.last);
}

static void compare_cases(int quick)
{
    long before = checks;
    for (size_t li = 0; li < NLENGTHS; li++) {
        u64 n = lengths[li];
        if (quick && li % 3)
            continue;
        for (unsigned oa = 0; oa < 16; oa++) {
            if (quick && oa != 0 && oa != 1 && oa != 8 && oa != 15)
                continue;
            fill_random(ha + oa, n);
            frame(ha, oa, n, 0xa5);
            CU_CHECK(cuMemcpyHtoD(da, ha, oa + n + 32));
            for (unsigned ob = 0; ob < 16; ob++) {
                /* Large lengths: b as aligned as a, 8 off, and odd. */
                if ((n > 8192 || quick) && ob != oa && ob != ((oa + 8) & 15) && ob != ((oa + 3) & 15))
                    continue;
                for (int pattern = 0; pattern < 6; pattern++)
                    if (!quick || pattern == 0 || pattern == 3 || pattern == 5)
                        compare_case(n, oa, ob, pattern);
            }
        }
    }
    printf("compare: %ld cases\n", checks - before);
}

static void hash_cases(int quick)
{
    long before = checks;
    /* The same bytes at each offset: one reference hash per length. */
    for (size_t li = 0; li < NLENGTHS; li++) {
        u64 n = lengths[li];
        if (quick && li % 3)
            continue;
        fill_random(hc, n);
        u64 want = ref_hash(hc, n);
        for (unsigned off = 0; off < 16; off++) {
            if (quick && off != 0 && off != 5 && off != 8)
                continue;
            fill_random(ha, off + n + 32); /* a random frame: a byte read outside the window changes the sum */
            memcpy(ha + off, hc, n);
            CU_CHECK(cuMemcpyHtoD(da, ha, off + n + 32));
            for (unsigned k = 0; k < (quick ? 1u : 3u); k++) {
                shape s = shape_for(case_no++, n);
                drk_hash_result r = run_hash(da + off, n, s, case_no % 4 == 1);
                EXPECT(r.done == 1 && r.hash == want && r.n == n && r.blocks == blocks_of(s),
                       "hash n %llu +%u shape %ux%ux%u/%ux%ux%u: done %u hash %016llx n %llu blocks %llu, "
                       "expected %016llx",
                       n, off, s.gx, s.gy, s.gz, s.bx, s.by, s.bz, r.done, r.hash, r.n, r.blocks, want);
            }
        }
    }
    /* Known values, so the function itself is pinned, not only its two implementations. */
    static const unsigned char abc[3] = {'a', 'b', 'c'};
    printf("hash: %ld cases; hash(\"\") = %016llx, hash(\"abc\") = %016llx\n", checks - before, ref_hash(abc, 0),
           ref_hash(abc, 3));
}

static void poison_cases(int quick)
{
    long before = checks;
    static const u64 patterns[] = {0x0123456789abcdefull, 0xffffffffffffffffull, 0x7fc000007fc00000ull};
    for (size_t li = 0; li < NLENGTHS; li++) {
        u64 n = lengths[li];
        if (quick && li % 3)
            continue;
        for (unsigned off = 0; off < 16; off++) {
            if (quick && off != 0 && off != 7 && off != 8)
                continue;
            for (size_t pi = 0; pi < sizeof patterns / sizeof patterns[0]; pi++) {
                u64 pat = patterns[pi];
                memset(ha, 0x33, off + n + 32);
                CU_CHECK(cuMemcpyHtoD(da, ha, off + n + 32));
                shape s = shape_for(case_no, n);
                run_poison(da + off, n, pat, s, case_no % 3 == 2);
                case_no++;
                CU_CHECK(cuMemcpyDtoH(hb, da, off + n + 32));
                u64 bad = ~0ull;
                for (u64 i = 0; i < off + n + 32 && bad == ~0ull; i++) {
                    unsigned char want = i < off || i >= off + n ? 0x33 : ref_poison_byte(pat, i - off);
                    if (hb[i] != want)
                        bad = i;
                }
                EXPECT(bad == ~0ull, "poison n %llu +%u pattern %016llx shape %ux%ux%u/%ux%ux%u: byte %lld is %02x",
                       n, off, pat, s.gx, s.gy, s.gz, s.bx, s.by, s.bz, (long long)bad - (long long)off,
                       bad == ~0ull ? 0 : hb[bad]);
            }
        }
    }
    printf("poison: %ld cases\n", checks - before);
}

/* Windows that end where their allocation ends: memcheck sees any access
 * past them. Equal buffers, then the last byte changed. */
static void edge_cases(void)
{
    long before = checks;
    static const u64 ns[] = {1, 3, 8, 15, 16, 17, 31, 33, 4095, 65537};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (unsigned off = 0; off < 16; off += 5) {
            u64 n = ns[i];
            CUdeviceptr a, b;
            CU_CHECK(cuMemAlloc(&a, off + n));
            CU_CHECK(cuMemAlloc(&b, off + n));
            fill_random(ha, off + n);
            CU_CHECK(cuMemcpyHtoD(a, ha, off + n));
            CU_CHECK(cuMemcpyHtoD(b, ha, off + n));
            shape s = shape_for(case_no++, n);
            drk_compare_result r = run_compare(a + off, b + off, n, s, 0);
            EXPECT(r.done == 1 && r.ndiff == 0, "edge compare n %llu +%u: ndiff %llu", n, off, r.ndiff);
            unsigned char last = (unsigned char)~ha[off + n - 1];
            CU_CHECK(cuMemcpyHtoD(b + off + n - 1, &last, 1));
            r = run_compare(a + off, b + off, n, s, 0);
            EXPECT(r.done == 1 && r.ndiff == 1 && r.first == n - 1, "edge compare n %llu +%u: ndiff %llu first %llu",
                   n, off, r.ndiff, r.first);
            drk_hash_result h = run_hash(a + off, n, s, 0);
            EXPECT(h.done == 1 && h.hash == ref_hash(ha + off, n), "edge hash n %llu +%u", n, off);
            run_poison(b + off, n, 0x0101010101010101ull, s, 0);
            CU_CHECK(cuMemcpyDtoH(hb, b + off, n));
            u64 ones = 0;
            for (u64 k = 0; k < n; k++)
                ones += hb[k] == 1;
            EXPECT(ones == n, "edge poison n %llu +%u: %llu bytes poisoned", n, off, ones);
            CU_CHECK(cuMemFree(a));
            CU_CHECK(cuMemFree(b));
        }
    printf("edges: %ld cases\n", checks - before);
}

/* GB/s of each kernel over `n` bytes (read, or written, once per byte per buffer). */
static void bandwidth(char *out, size_t outlen)
{
    const u64 n = 256ull << 20;
    CUdeviceptr a, b;
    CU_CHECK(cuMemAlloc(&a, n + 64));
    CU_CHECK(cuMemAlloc(&b, n + 64));
    CU_CHECK(cuMemsetD8(a, 0x11, n + 64));
    CU_CHECK(cuMemsetD8(b, 0x11, n + 64));
    CUevent e0, e1;
    CU_CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU_CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    const char *what[] = {"compare", "compare+1/+2", "hash", "hash+3", "poison", "poison+5"};
    out[0] = 0;
    for (int k = 0; k < 6; k++) {
        unsigned oa = k == 1 ? 1 : k == 3 ? 3 : k == 5 ? 5 : 0, ob = k == 1 ? 2 : 0;
        shape s = recommended(n);
        float best = 1e30f;
        for (int rep = 0; rep < 6; rep++) {
            CU_CHECK(cuMemsetD8(d_result, 0, sizeof(drk_compare_result)));
            CU_CHECK(cuEventRecord(e0, NULL));
            if (k < 2) {
                drk_compare_params p = {a + oa, b + ob, n, d_result};
                launch(f_compare, s, &p, 4, 0);
            } else if (k < 4) {
                drk_hash_params p = {a + oa, n, d_result};
                launch(f_hash, s, &p, 3, 0);
            } else {
                drk_poison_params p = {a + oa, n, 0x1111111111111111ull};
                launch(f_poison, s, &p, 3, 0);
            }
            CU_CHECK(cuEventRecord(e1, NULL));
            CU_CHECK(cuEventSynchronize(e1));
            float ms = 0;
            CU_CHECK(cuEventElapsedTime(&ms, e0, e1));
            if (rep > 0 && ms < best) /* the first run warms up */
                best = ms;
        }
        double bytes = (double)n * (k < 2 ? 2 : 1);
        snprintf(out + strlen(out), outlen - strlen(out), "%s%s %.0f GB/s", k ? ", " : "", what[k],
                 bytes / (best * 1e-3) / 1e9);
        if (k < 2) { /* and it is still right at this size */
            drk_compare_result r;
            CU_CHECK(cuMemcpyDtoH(&r, d_result, sizeof r));
            EXPECT(r.done == 1 && r.ndiff == 0, "256 MiB compare: ndiff %llu", r.ndiff);
        }
    }
    /* One differing byte at the very end of 256 MiB. */
    unsigned char x = 0x12;
    CU_CHECK(cuMemcpyHtoD(b + n - 1, &x, 1));
    drk_compare_result r = run_compare(a, b, n, recommended(n), 0);
    EXPECT(r.done == 1 && r.ndiff == 1 && r.first == n - 1 && r.last == n - 1, "256 MiB, last byte: ndiff %llu first %llu",
           r.ndiff, r.first);
    CU_CHECK(cuEventDestroy(e0));
    CU_CHECK(cuEventDestroy(e1));
    CU_CHECK(cuMemFree(a));
    CU_CHECK(cuMemFree(b));
}

int main(int argc, char **argv)
{
    int ptx = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ptx"))
            ptx = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else
            return fprintf(stderr, "usage: kernels_check [--ptx] [--quick]\n"), 2;
    }
    if (ptx)
        setenv("CUDA_FORCE_PTX_JIT", "1", 1); /* read by the driver at cuInit */

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    int major = 0, minor = 0;
    CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CU_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CU_CHECK(cuModuleLoadData(&mod, drk_kernels_fatbin));
    CU_CHECK(cuModuleGetFunction(&f_compare, mod, DRK_KERNEL_COMPARE));
    CU_CHECK(cuModuleGetFunction(&f_hash, mod, DRK_KERNEL_HASH));
    CU_CHECK(cuModuleGetFunction(&f_poison, mod, DRK_KERNEL_POISON));
    int bin = 0, ptxv = 0, regs = 0;
    CU_CHECK(cuFuncGetAttribute(&bin, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f_compare));
    CU_CHECK(cuFuncGetAttribute(&ptxv, CU_FUNC_ATTRIBUTE_PTX_VERSION, f_compare));
    CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f_compare));
    printf("sm_%d%d, %d SMs; fatbin %zu bytes (%s); drk_compare: binary %d, ptx %d, %d registers\n", major, minor,
           sms, drk_kernels_fatbin_size, drk_kernels_fatbin_archs, bin, ptxv, regs);
    if (ptx && ptxv != DRK_KERNELS_PTX_ARCH) {
        fprintf(stderr, "kernels_check: --ptx: the function's PTX version is %d, not %d: no JIT of the PTX?\n", ptxv,
                DRK_KERNELS_PTX_ARCH);
        return 1;
    }

    ha = malloc(FRAME);
    hb = malloc(FRAME);
    hc = malloc(FRAME);
    if (!ha || !hb || !hc)
        return fprintf(stderr, "kernels_check: out of host memory\n"), 1;
    CU_CHECK(cuMemAlloc(&da, FRAME));
    CU_CHECK(cuMemAlloc(&db, FRAME));
    CU_CHECK(cuMemAlloc(&d_result, sizeof(drk_compare_result)));

    compare_cases(quick);
    hash_cases(quick);
    poison_cases(quick);
    edge_cases();
    char bw[512] = "";
    if (!quick)
        bandwidth(bw, sizeof bw);

    CU_CHECK(cuMemFree(da));
    CU_CHECK(cuMemFree(db));
    CU_CHECK(cuMemFree(d_result));
    CU_CHECK(cuModuleUnload(mod));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    free(ha);
    free(hb);
    free(hc);
    if (failures) {
        printf("FAILED: %ld of %ld checks\n", failures, checks);
        return 1;
    }
    printf("ok %ld checks, %s code (binary %d, ptx %d)%s%s\n", checks, ptx ? "JIT'd PTX" : "SASS", bin, ptxv,
           quick ? "" : "; ", bw);
    return 0;
}
