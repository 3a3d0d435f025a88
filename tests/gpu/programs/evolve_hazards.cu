// The hazards of evolving kernels (research/evolve.md §6), in one runtime-API
// program built as compute_90 PTX only (no SASS: the driver JITs it, so drk
// keeps the PTX and may rebuild it). Rounds, each ended by cudaProfilerStop,
// of nine kernels:
//
//   ev_inplace   (a) in place: x = x*1.0001f + 1 (one rounding, fma)
//   ev_count     (b) an accumulating integer atomicAdd into 65536 bins
//   ev_fsum      (c) a float atomicAdd reduction into 64 cells: the order of
//                    the additions differs run to run, so its bytes do, even
//                    natively (checked within a tolerance)
//   ev_half_lo,  (d) disjoint partial writes: each block writes one half of
//   ev_half_hi       its 256-element tile of one buffer; the other half is
//                    the other kernel's
//   ev_struct    (e) its pointers inside a by-value struct {a, b, n}
//   ev_global    (f) a module-scope __device__ counter: drk must refuse it
//   ev_table     (g) a pointer table (float **): drk must refuse it
//   ev_nbody     (h) evolve_kernels.cu's n-body at its recorded shape (grid
//                    32, block 256, 8192 bodies), 2.05x faster with a
//                    register budget of 56 on an H200: something to serve
//
// A round is STEPS steps, each launching every kernel (the small ones 8
// times) and then sleeping STEP_MS, so drk's thread (50 ms ticks) captures
// several launches a round; after the round the program checks every result
// on the host, calls cudaProfilerStop and pauses PAUSE_MS for drk to close the
// round. Checks: (a) a strided sample of x mirrored launch by launch with
// fmaf, bit for bit; (b) every bin == launches x the host's histogram; (c) each
// cell within 1e-3 (relative) of the host's double sum; (d), (e) every element
// bit for bit (fmaf); (f) every element and the counter (blocks x launches,
// read with cudaMemcpyFromSymbol); (g) every element; (h) every step's output
// bit for bit equal to the round's first of the same inputs (the two position
// sets alternate, so consecutive launches write new bytes), and a sample of
// bodies within a tolerance of the host's double-precision sum.
//
//   evolve_hazards [ROUNDS [STEPS [STEP_MS [PAUSE_MS [ITERS]]]]]
//                  (defaults 12 8 25 150 600000; ITERS: the chain length of
//                  (f) and (g), which makes them hotter than the n-body)
//
// Prints "evolve_hazards: R rounds, W wrong", one "checksum KERNEL 0x..." line
// a kernel (FNV-1a 64 of its final bytes; for ev_nbody of every round's
// output; for ev_fsum "sum" and its value, which is not comparable), and the
// n-body's GPU time a launch by round. Exit status 1 on a CUDA error, 2 when
// any round was wrong.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t err_ = (call);                                                   \
        if (err_ != cudaSuccess) {                                                   \
            fprintf(stderr, "evolve_hazards: %s failed: %s (%d) at line %d\n", #call, \
                    cudaGetErrorString(err_), (int)err_, __LINE__);                  \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#define LAUNCHED() CHECK(cudaGetLastError())

#define N (1 << 22)        // elements of (a), (b), (e)
#define NHALF (1 << 23)    // elements of (d)
#define NSUM (1 << 20)     // terms of (c)
#define CELLS 64
#define BINS 65536
#define TILE 256
#define NCHAIN (264 * 256) // threads of (f) and (g): two blocks an SM of an H200
#define NBODY 8192
#define SMALL 8            // launches of each small kernel a step
#define SAMPLE 61          // (a): every 61st element mirrored on the host

struct ev_pair {
    const float *a;
    float *b;
    int n;
};

__device__ unsigned ev_counter;

__device__ __forceinline__ float chain(float y, int iters)
{
    for (int k = 0; k < iters; k++)
        y = __fmaf_rn(y, 0.999f, 0.001f);
    return y;
}

extern "C" {

__global__ void ev_inplace(float *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = __fmaf_rn(x[i], 1.0001f, 1.0f); // x*1.0001f + 1, as nvcc contracts it
}

__global__ void ev_count(unsigned *bins, const unsigned *idx, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&bins[idx[i]], (idx[i] & 7u) + 1u);
}

__global__ void ev_fsum(float *cells, const float *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&cells[i & (CELLS - 1)], x[i]);
}

// Block b writes the low half of tile b (blockDim.x == TILE / 2).
__global__ void ev_half_lo(float *out, const float *in, float step, int tiles)
{
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int j = t * TILE + threadIdx.x;
        out[j] = __fmaf_rn(in[j], 2.0f, step);
    }
}

__global__ void ev_half_hi(float *out, const float *in, float step, int tiles)
{
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int j = t * TILE + TILE / 2 + threadIdx.x;
        out[j] = __fmaf_rn(in[j], 3.0f, step);
    }
}

__global__ void ev_struct(ev_pair p, float s)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x)
        p.b[i] = __fmaf_rn(p.a[i], s, 0.5f);
}

__global__ void ev_global(float *out, const float *in, int n, int iters)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = chain(in[i], iters);
    if (threadIdx.x == 0)
        atomicAdd(&ev_counter, 1u);
}

__global__ void ev_table(float *out, float *const *ptrs, int n, int iters)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float *src = ptrs[blockIdx.x & 3];
    if (i < n)
        out[i] = chain(src[i], iters);
}

// evolve_kernels.cu's nbody, unchanged but for its name.
__global__ void ev_nbody(float4 *acc, const float4 *pos, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float4 p = pos[i];
    float ax = 0, ay = 0, az = 0;
#pragma unroll 8
    for (int j = 0; j < n; j++) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float r2 = dx * dx + dy * dy + dz * dz + 1e-3f;
        float inv = rsqrtf(r2);
        float s = q.w * inv * inv * inv;
        ax += dx * s, ay += dy * s, az += dz * s;
    }
    acc[i] = make_float4(ax, ay, az, 0);
}
}

static uint32_t rng_state = 12345u;
static uint32_t rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}
static float unit(void) { return (float)(rnd() & 0xffff) / 65536.0f; } // [0, 1)

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static float host_chain(float y, int iters)
{
    for (int k = 0; k < iters; k++)
        y = fmaf(y, 0.999f, 0.001f);
    return y;
}

static int wrong_now; // the current round's failures
__attribute__((format(printf, 3, 4)))
static void wrong(int round, const char *kernel, const char *fmt, ...)
{
    if (wrong_now++ > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "evolve_hazards: round %d: %s wrong: ", round, kernel);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void new_positions(float4 *p)
{
    for (int i = 0; i < NBODY; i++)
        p[i] = make_float4(unit() * 2 - 1, unit() * 2 - 1, unit() * 2 - 1, 0.5f + unit());
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 12;
    const int steps = argc > 2 ? atoi(argv[2]) : 8;
    const int step_ms = argc > 3 ? atoi(argv[3]) : 25;
    const int pause_ms = argc > 4 ? atoi(argv[4]) : 150;
    const int iters = argc > 5 ? atoi(argv[5]) : 600000;
    if (rounds < 1 || steps < 1 || step_ms < 0 || pause_ms < 0 || iters < 1) {
        fprintf(stderr, "usage: evolve_hazards [ROUNDS [STEPS [STEP_MS [PAUSE_MS [ITERS]]]]]\n");
        return 1;
    }
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    sleep_ms(300); // drk's GPU times start a little after the context does

    // ---- host inputs and mirrors ----
    float *hx = (float *)malloc(N * sizeof(float)), *hin = (float *)malloc(NHALF * sizeof(float));
    float *ha = (float *)malloc(N * sizeof(float)), *hout = (float *)malloc(NHALF * sizeof(float));
    unsigned *hidx = (unsigned *)malloc(N * sizeof(unsigned)), *hbins = (unsigned *)malloc(BINS * sizeof(unsigned));
    unsigned *hist = (unsigned *)calloc(BINS, sizeof(unsigned));
    float *hsum = (float *)malloc(NSUM * sizeof(float));
    float *hchain_in = (float *)malloc(NCHAIN * sizeof(float));
    float *mirror = (float *)malloc((N / SAMPLE + 1) * sizeof(float));
    float4 *hpos[2] = {(float4 *)malloc(NBODY * sizeof(float4)), (float4 *)malloc(NBODY * sizeof(float4))};
    float4 *hacc = (float4 *)malloc(NBODY * sizeof(float4)), *first[2] = {
        (float4 *)malloc(NBODY * sizeof(float4)), (float4 *)malloc(NBODY * sizeof(float4))};
    if (!hx || !hin || !ha || !hout || !hidx || !hbins || !hist || !hsum || !hchain_in || !mirror || !hpos[0] ||
        !hpos[1] || !hacc || !first[0] || !first[1])
        return fprintf(stderr, "evolve_hazards: out of host memory\n"), 1;
    for (int i = 0; i < NHALF; i++)
        hin[i] = unit() * 8 - 4;
    for (int i = 0; i < N; i++) {
        hx[i] = unit() * 4 - 2;
        ha[i] = unit() * 2 - 1;
        hidx[i] = rnd() % BINS;
        hist[hidx[i]] += (hidx[i] & 7u) + 1u;
    }
    for (int i = 0, k = 0; i < N; i += SAMPLE)
        mirror[k++] = hx[i];
    double cell_want[CELLS] = {0};
    for (int i = 0; i < NSUM; i++) {
        // Magnitudes 2^-8 .. 2^7: the order of the additions changes the rounding.
        hsum[i] = (0.5f + unit()) * ldexpf(1.0f, (int)(rnd() % 16) - 8);
        cell_want[i & (CELLS - 1)] += hsum[i];
    }
    static const float seeds[8] = {0.125f, -3.5f, 7.25f, 0.0f, 100.0f, -0.875f, 2.0f, 42.5f};
    float chain_want[8];
    for (int k = 0; k < 8; k++)
        chain_want[k] = host_chain(seeds[k], iters);
    for (int i = 0; i < NCHAIN; i++)
        hchain_in[i] = seeds[i % 8];

    // ---- device buffers ----
    float *dx, *din, *da, *db, *dhalf, *dsum, *dcells, *dgout, *dgin, *dtout, *dtsrc[4];
    unsigned *didx, *dbins;
    float **dtable;
    float4 *dpos[2], *dacc;
    CHECK(cudaMalloc(&dx, N * sizeof(float)));
    CHECK(cudaMalloc(&din, NHALF * sizeof(float)));
    CHECK(cudaMalloc(&da, N * sizeof(float)));
    CHECK(cudaMalloc(&db, N * sizeof(float)));
    CHECK(cudaMalloc(&dhalf, NHALF * sizeof(float)));
    CHECK(cudaMalloc(&didx, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&dbins, BINS * sizeof(unsigned)));
    CHECK(cudaMalloc(&dsum, NSUM * sizeof(float)));
    CHECK(cudaMalloc(&dcells, CELLS * sizeof(float)));
    CHECK(cudaMalloc(&dgout, NCHAIN * sizeof(float)));
    CHECK(cudaMalloc(&dgin, NCHAIN * sizeof(float)));
    CHECK(cudaMalloc(&dtout, NCHAIN * sizeof(float)));
    for (int k = 0; k < 4; k++)
        CHECK(cudaMalloc(&dtsrc[k], NCHAIN * sizeof(float)));
    CHECK(cudaMalloc(&dtable, 4 * sizeof(float *)));
    CHECK(cudaMalloc(&dpos[0], NBODY * sizeof(float4)));
    CHECK(cudaMalloc(&dpos[1], NBODY * sizeof(float4)));
    CHECK(cudaMalloc(&dacc, NBODY * sizeof(float4)));
    CHECK(cudaMemcpy(dx, hx, N * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(din, hin, NHALF * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(da, ha, N * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(db, 0, N * sizeof(float)));
    CHECK(cudaMemset(dhalf, 0, NHALF * sizeof(float)));
    CHECK(cudaMemcpy(didx, hidx, N * sizeof(unsigned), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dbins, 0, BINS * sizeof(unsigned)));
    CHECK(cudaMemcpy(dsum, hsum, NSUM * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dgin, hchain_in, NCHAIN * sizeof(float), cudaMemcpyHostToDevice));
    for (int k = 0; k < 4; k++) {
        // Source k holds seed (i + k) % 8 at i: ev_table's block b reads source b & 3.
        float *t = (float *)malloc(NCHAIN * sizeof(float));
        if (!t)
            return fprintf(stderr, "evolve_hazards: out of host memory\n"), 1;
        for (int i = 0; i < NCHAIN; i++)
            t[i] = seeds[(i + k) % 8];
        CHECK(cudaMemcpy(dtsrc[k], t, NCHAIN * sizeof(float), cudaMemcpyHostToDevice));
        free(t);
    }
    CHECK(cudaMemcpy(dtable, dtsrc, 4 * sizeof(float *), cudaMemcpyHostToDevice));
    unsigned zero = 0;
    CHECK(cudaMemcpyToSymbol(ev_counter, &zero, sizeof zero));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));

    const int grid = 1024, block = 256, tiles = NHALF / TILE;
    const ev_pair pair = {da, db, N};
    unsigned long long inplace_launches = 0, count_launches = 0, global_blocks = 0;
    float step_lo = 0, step_hi = 0, s_struct = 0;
    uint64_t nbody_hash = FNV0;
    double *nbody_ms = (double *)calloc((size_t)rounds, sizeof(double));
    int wrong_rounds = 0;
    float last_cells[CELLS];
    if (!nbody_ms)
        return 1;

    for (int r = 0; r < rounds; r++) {
        wrong_now = 0;
        new_positions(hpos[0]);
        new_positions(hpos[1]);
        CHECK(cudaMemcpy(dpos[0], hpos[0], NBODY * sizeof(float4), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dpos[1], hpos[1], NBODY * sizeof(float4), cudaMemcpyHostToDevice));
        float nbody_total = 0;
        for (int s = 0; s < steps; s++) {
            ev_global<<<NCHAIN / 256, 256>>>(dgout, dgin, NCHAIN, iters);
            LAUNCHED();
            global_blocks += NCHAIN / 256;
            ev_table<<<NCHAIN / 256, 256>>>(dtout, dtable, NCHAIN, iters);
            LAUNCHED();
            CHECK(cudaEventRecord(e0));
            ev_nbody<<<NBODY / 256, 256>>>(dacc, dpos[s & 1], NBODY);
            LAUNCHED();
            CHECK(cudaEventRecord(e1));
            for (int k = 0; k < 2; k++) {
                CHECK(cudaMemsetAsync(dcells, 0, CELLS * sizeof(float)));
                ev_fsum<<<grid, block>>>(dcells, dsum, NSUM);
                LAUNCHED();
            }
            for (int k = 0; k < SMALL; k++) {
                ev_inplace<<<grid, block>>>(dx, N);
                LAUNCHED();
                ev_count<<<grid, block>>>(dbins, didx, N);
                LAUNCHED();
                step_lo += 1.0f;
                ev_half_lo<<<grid * 4, TILE / 2>>>(dhalf, din, step_lo, tiles);
                LAUNCHED();
                step_hi += 0.5f;
                ev_half_hi<<<grid * 4, TILE / 2>>>(dhalf, din, step_hi, tiles);
                LAUNCHED();
                s_struct = 1.0f + (float)(count_launches % 1000) * 0.001f;
                ev_struct<<<grid, block>>>(pair, s_struct);
                LAUNCHED();
                count_launches++, inplace_launches++;
                for (int i = 0, j = 0; i < N; i += SAMPLE)
                    mirror[j] = fmaf(mirror[j], 1.0001f, 1.0f), j++;
            }
            CHECK(cudaDeviceSynchronize());
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            nbody_total += ms;
            // (h): every step's bytes equal the round's first of the same inputs.
            CHECK(cudaMemcpy(hacc, dacc, NBODY * sizeof(float4), cudaMemcpyDeviceToHost));
            if (s < 2)
                memcpy(first[s & 1], hacc, NBODY * sizeof(float4));
            else if (memcmp(first[s & 1], hacc, NBODY * sizeof(float4)) != 0)
                wrong(r, "ev_nbody", "step %d differs from step %d of the same inputs", s, s & 1);
            if (s < 2)
                nbody_hash = fnv(nbody_hash, hacc, NBODY * sizeof(float4));
            sleep_ms(step_ms);
        }
        nbody_ms[r] = nbody_total / steps;

        // (a) the sample, bit for bit.
        CHECK(cudaMemcpy(hout, dx, N * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0, j = 0; i < N; i += SAMPLE, j++)
            if (memcmp(&hout[i], &mirror[j], sizeof(float)) != 0) {
                wrong(r, "ev_inplace", "x[%d] = %a, want %a", i, hout[i], mirror[j]);
                break;
            }
        // (b) every bin.
        CHECK(cudaMemcpy(hbins, dbins, BINS * sizeof(unsigned), cudaMemcpyDeviceToHost));
        for (int i = 0; i < BINS; i++)
            if (hbins[i] != (unsigned)(count_launches * hist[i])) {
                wrong(r, "ev_count", "bin %d = %u, want %llu", i, hbins[i], count_launches * hist[i]);
                break;
            }
        // (c) within a tolerance.
        CHECK(cudaMemcpy(last_cells, dcells, sizeof last_cells, cudaMemcpyDeviceToHost));
        for (int c = 0; c < CELLS; c++)
            if (!(fabs(last_cells[c] - cell_want[c]) <= 1e-3 * fabs(cell_want[c]))) {
                wrong(r, "ev_fsum", "cell %d = %.9g, want %.9g", c, last_cells[c], cell_want[c]);
                break;
            }
        // (d) both halves, bit for bit.
        CHECK(cudaMemcpy(hout, dhalf, NHALF * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < NHALF; i++) {
            float want = (i % TILE) < TILE / 2 ? fmaf(hin[i], 2.0f, step_lo) : fmaf(hin[i], 3.0f, step_hi);
            if (memcmp(&hout[i], &want, sizeof want) != 0) {
                wrong(r, (i % TILE) < TILE / 2 ? "ev_half_lo" : "ev_half_hi", "out[%d] = %a, want %a", i, hout[i],
                      want);
                break;
            }
        }
        // (e) every element.
        CHECK(cudaMemcpy(hout, db, N * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < N; i++) {
            float want = fmaf(ha[i], s_struct, 0.5f);
            if (memcmp(&hout[i], &want, sizeof want) != 0) {
                wrong(r, "ev_struct", "b[%d] = %a, want %a", i, hout[i], want);
                break;
            }
        }
        // (f) every element, and the module's counter.
        CHECK(cudaMemcpy(hout, dgout, NCHAIN * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < NCHAIN; i++)
            if (memcmp(&hout[i], &chain_want[i % 8], sizeof(float)) != 0) {
                wrong(r, "ev_global", "out[%d] = %a, want %a", i, hout[i], chain_want[i % 8]);
                break;
            }
        unsigned counter;
        CHECK(cudaMemcpyFromSymbol(&counter, ev_counter, sizeof counter));
        if (counter != (unsigned)global_blocks)
            wrong(r, "ev_global", "counter %u, want %llu", counter, global_blocks);
        // (g) every element: block b read source b & 3, holding seed (i + b & 3) % 8.
        CHECK(cudaMemcpy(hout, dtout, NCHAIN * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < NCHAIN; i++) {
            int k = (i + ((i / 256) & 3)) % 8;
            if (memcmp(&hout[i], &chain_want[k], sizeof(float)) != 0) {
                wrong(r, "ev_table", "out[%d] = %a, want %a", i, hout[i], chain_want[k]);
                break;
            }
        }
        // (h) a sample of bodies against the host's double sum (the last step's inputs).
        const float4 *pp = hpos[(steps - 1) & 1];
        for (int i = 0; i < NBODY; i += 64) {
            double ax = 0, ay = 0, az = 0, scale = 0;
            for (int j = 0; j < NBODY; j++) {
                double dx_ = (double)pp[j].x - pp[i].x, dy_ = (double)pp[j].y - pp[i].y, dz_ = (double)pp[j].z - pp[i].z;
                double r2 = dx_ * dx_ + dy_ * dy_ + dz_ * dz_ + 1e-3;
                double s_ = pp[j].w / (r2 * sqrt(r2));
                ax += dx_ * s_, ay += dy_ * s_, az += dz_ * s_;
                scale += (fabs(dx_) + fabs(dy_) + fabs(dz_)) * s_;
            }
            double tol = 1e-4 * scale + 1e-6;
            if (!(fabs(hacc[i].x - ax) <= tol && fabs(hacc[i].y - ay) <= tol && fabs(hacc[i].z - az) <= tol &&
                  hacc[i].w == 0.0f)) {
                wrong(r, "ev_nbody", "body %d = (%.7g, %.7g, %.7g), want (%.7g, %.7g, %.7g)", i, hacc[i].x,
                      hacc[i].y, hacc[i].z, ax, ay, az);
                break;
            }
        }
        wrong_rounds += wrong_now > 0;
        CHECK(cudaProfilerStop()); // the round's end, for drk
        sleep_ms(pause_ms);
    }

    printf("evolve_hazards: %d rounds, %d wrong\n", rounds, wrong_rounds);
    CHECK(cudaMemcpy(hout, dx, N * sizeof(float), cudaMemcpyDeviceToHost));
    printf("checksum ev_inplace 0x%016llx\n", (unsigned long long)fnv(FNV0, hout, N * sizeof(float)));
    CHECK(cudaMemcpy(hbins, dbins, BINS * sizeof(unsigned), cudaMemcpyDeviceToHost));
    printf("checksum ev_count 0x%016llx\n", (unsigned long long)fnv(FNV0, hbins, BINS * sizeof(unsigned)));
    CHECK(cudaMemcpy(hout, dhalf, NHALF * sizeof(float), cudaMemcpyDeviceToHost));
    printf("checksum ev_half 0x%016llx\n", (unsigned long long)fnv(FNV0, hout, NHALF * sizeof(float)));
    CHECK(cudaMemcpy(hout, db, N * sizeof(float), cudaMemcpyDeviceToHost));
    printf("checksum ev_struct 0x%016llx\n", (unsigned long long)fnv(FNV0, hout, N * sizeof(float)));
    CHECK(cudaMemcpy(hout, dgout, NCHAIN * sizeof(float), cudaMemcpyDeviceToHost));
    unsigned counter;
    CHECK(cudaMemcpyFromSymbol(&counter, ev_counter, sizeof counter));
    printf("checksum ev_global 0x%016llx\n",
           (unsigned long long)fnv(fnv(FNV0, hout, NCHAIN * sizeof(float)), &counter, sizeof counter));
    CHECK(cudaMemcpy(hout, dtout, NCHAIN * sizeof(float), cudaMemcpyDeviceToHost));
    printf("checksum ev_table 0x%016llx\n", (unsigned long long)fnv(FNV0, hout, NCHAIN * sizeof(float)));
    printf("checksum ev_nbody 0x%016llx\n", (unsigned long long)nbody_hash);
    double total = 0;
    for (int c = 0; c < CELLS; c++)
        total += last_cells[c];
    printf("sum ev_fsum %.9g (not comparable: its order of additions differs run to run)\n", total);
    printf("ev_nbody ms a launch by round:");
    for (int r = 0; r < rounds; r++)
        printf(" %.4f", nbody_ms[r]);
    printf("\n");

    CHECK(cudaFree(dx));
    CHECK(cudaFree(din));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dhalf));
    CHECK(cudaFree(didx));
    CHECK(cudaFree(dbins));
    CHECK(cudaFree(dsum));
    CHECK(cudaFree(dcells));
    CHECK(cudaFree(dgout));
    CHECK(cudaFree(dgin));
    CHECK(cudaFree(dtout));
    for (int k = 0; k < 4; k++)
        CHECK(cudaFree(dtsrc[k]));
    CHECK(cudaFree(dtable));
    CHECK(cudaFree(dpos[0]));
    CHECK(cudaFree(dpos[1]));
    CHECK(cudaFree(dacc));
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    return wrong_rounds ? 2 : 0;
}
