/* The variant space of twelve ordinary kernels, measured exhaustively on the
 * GPU: the data the search is judged against (tests/evolve/spaces/, replayed
 * on the CPU by the search's simulator) and the "exhaustive best" column of
 * the evolution benchmark.
 *
 * Each kernel's PTX (evolve_kernels.cu, compute_90) is JIT'd with every
 * combination of the knobs drk's PTX source varies -- register budget
 * (CU_JIT_MAX_REGISTERS), minimum CTAs per SM (CU_JIT_MIN_CTA_PER_SM with
 * CU_JIT_MAX_THREADS_PER_BLOCK = the launch's block), optimization level,
 * cache mode -- and each build is launched at every shared-memory carveout
 * the attribute source tries. Per build: one launch on restored inputs whose
 * outputs must equal the default build's byte for byte; per (build,
 * carveout): the median over 3 repetitions of 10 launches timed with events.
 * Prints one JSON object a kernel, then a summary table (default, best,
 * best/default, the best variant, variants that differed).
 *
 *   evolve_space PTX_FILE [KERNEL]
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "evolve_space"
#include "bench_cuda.h"

#include "evolve_specs.h"

static const unsigned regs_choices[] = {0, 32, 40, 48, 56, 64, 80, 96, 128, 168, 255};
static const unsigned minctas_choices[] = {0, 2, 4};
static const unsigned opt_choices[] = {4, 3};
static const int cache_choices[] = {-1, CU_JIT_CACHE_OPTION_CG, CU_JIT_CACHE_OPTION_CA};
static const int carveout_choices[] = {-1, 25, 50, 100};
#define COUNT(a) (sizeof a / sizeof *a)

typedef struct {
    unsigned regs, minctas, opt;
    int cache;
} build;

static CUresult compile(const char *ptx, const char *name, const kernel_spec *k, const build *b, CUmodule *mod,
                        CUfunction *fn, double *ms)
{
    CUjit_option o[8];
    void *v[8];
    int n = 0;
    unsigned threads = k->block[0] * k->block[1] * k->block[2];
    if (b->regs)
        o[n] = CU_JIT_MAX_REGISTERS, v[n++] = (void *)(uintptr_t)b->regs;
    if (b->minctas) {
        o[n] = CU_JIT_MIN_CTA_PER_SM, v[n++] = (void *)(uintptr_t)b->minctas;
        o[n] = CU_JIT_MAX_THREADS_PER_BLOCK, v[n++] = (void *)(uintptr_t)threads;
    }
    o[n] = CU_JIT_OPTIMIZATION_LEVEL, v[n++] = (void *)(uintptr_t)b->opt;
    if (b->cache >= 0)
        o[n] = CU_JIT_CACHE_MODE, v[n++] = (void *)(uintptr_t)b->cache;
    double t0 = now_ms();
    CUresult r = cuModuleLoadDataEx(mod, ptx, (unsigned)n, o, v);
    if (r == CUDA_SUCCESS)
        r = cuModuleGetFunction(fn, *mod, name);
    *ms = now_ms() - t0;
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: evolve_space PTX_FILE [KERNEL]\n");
        return 2;
    }
    CUdevice dev;
    char *ptx = bench_ptx_program(argv[1], &dev);
    if (!ptx)
        return 1;
    CUevent e0, e1;
    CHECK(cuEventCreate(&e0, 0));
    CHECK(cuEventCreate(&e1, 0));
    struct summary {
        const char *name;
        double def, best;
        char best_text[96];
        int differed, builds;
    } sums[NKERNELS];
    int nsum = 0;
    for (size_t ki = 0; ki < NKERNELS; ki++) {
        const kernel_spec *k = &kernels[ki];
        if (argc > 2 && strcmp(argv[2], k->name) != 0)
            continue;
        CUdeviceptr d[6];
        void *h[6], *ref[6] = {0}, *got[6];
        for (int i = 0; i < k->nbufs; i++) {
            h[i] = malloc(k->bufs[i].bytes);
            got[i] = malloc(k->bufs[i].bytes);
            if (!h[i] || !got[i])
                return 1;
            fill_host(h[i], &k->bufs[i]);
            CHECK(cuMemAlloc(&d[i], k->bufs[i].bytes));
        }
        uint64_t words[8];
        void *params[8];
        kernel_params(k, d, words, params);
        printf("{\"kernel\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"variants\": [", k->name,
               k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2]);
        struct summary *sm = &sums[nsum++];
        memset(sm, 0, sizeof *sm);
        sm->name = k->name;
        int first = 1;
        for (size_t ri = 0; ri < COUNT(regs_choices); ri++)
            for (size_t mi = 0; mi < COUNT(minctas_choices); mi++)
                for (size_t oi = 0; oi < COUNT(opt_choices); oi++)
                    for (size_t ci = 0; ci < COUNT(cache_choices); ci++) {
                        build b = {regs_choices[ri], minctas_choices[mi], opt_choices[oi], cache_choices[ci]};
                        CUmodule mod;
                        CUfunction fn;
                        double cms;
                        CUresult cr = compile(ptx, k->name, k, &b, &mod, &fn, &cms);
                        if (cr != CUDA_SUCCESS) {
                            const char *s = NULL;
                            cuGetErrorName(cr, &s);
                            printf("%s\n  {\"regs\": %u, \"minctas\": %u, \"opt\": %u, \"cache\": %d, \"error\": \"%s\"}",
                                   first ? "" : ",", b.regs, b.minctas, b.opt, b.cache, s ? s : "?");
                            first = 0;
                            continue;
                        }
                        int used = 0, local = 0;
                        CHECK(cuFuncGetAttribute(&used, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
                        CHECK(cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn));
                        /* One launch on the initial inputs: its outputs are
                         * the default build's, byte for byte. */
                        for (int i = 0; i < k->nbufs; i++)
                            CHECK(cuMemcpyHtoD(d[i], h[i], k->bufs[i].bytes));
                        CHECK(cuLaunchKernel(fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                                             k->block[2], 0, NULL, params, NULL));
                        CHECK(cuCtxSynchronize());
                        int equal = 1;
                        for (int i = 0; i < k->nbufs; i++) {
                            if (!k->bufs[i].out)
                                continue;
                            void *dst = ref[i] ? got[i] : (ref[i] = malloc(k->bufs[i].bytes));
                            CHECK(cuMemcpyDtoH(dst, d[i], k->bufs[i].bytes));
                            if (dst == got[i] && memcmp(got[i], ref[i], k->bufs[i].bytes) != 0)
                                equal = 0;
                        }
                        sm->builds++;
                        sm->differed += !equal;
                        for (size_t vi = 0; vi < COUNT(carveout_choices); vi++) {
                            int cv = carveout_choices[vi];
                            if (cv >= 0)
                                CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, cv));
                            for (int w = 0; w < 2; w++)
                                CHECK(cuLaunchKernel(fn, k->grid[0], k->grid[1], k->grid[2], k->block[0],
                                                     k->block[1], k->block[2], 0, NULL, params, NULL));
                            double reps[3];
                            for (int rep = 0; rep < 3; rep++) {
                                CHECK(cuEventRecord(e0, NULL));
                                for (int l = 0; l < 10; l++)
                                    CHECK(cuLaunchKernel(fn, k->grid[0], k->grid[1], k->grid[2], k->block[0],
                                                         k->block[1], k->block[2], 0, NULL, params, NULL));
                                CHECK(cuEventRecord(e1, NULL));
                                CHECK(cuEventSynchronize(e1));
                                float ms;
                                CHECK(cuEventElapsedTime(&ms, e0, e1));
                                reps[rep] = ms / 10;
                            }
                            qsort(reps, 3, sizeof *reps, cmp_double);
                            double ms = reps[1];
                            int is_default = !b.regs && !b.minctas && b.opt == 4 && b.cache < 0 && cv < 0;
                            if (is_default)
                                sm->def = ms;
                            if (equal && (sm->best == 0 || ms < sm->best)) {
                                sm->best = ms;
                                snprintf(sm->best_text, sizeof sm->best_text, "regs %u minctas %u O%u cache %d carveout %d",
                                         b.regs, b.minctas, b.opt, b.cache, cv);
                            }
                            printf("%s\n  {\"regs\": %u, \"minctas\": %u, \"opt\": %u, \"cache\": %d, \"carveout\": %d, "
                                   "\"ms\": %.6f, \"regs_used\": %d, \"local_bytes\": %d, \"equal\": %s, "
                                   "\"compile_ms\": %.3f}",
                                   first ? "" : ",", b.regs, b.minctas, b.opt, b.cache, cv, ms, used, local,
                                   equal ? "true" : "false", cms);
                            first = 0;
                        }
                        CHECK(cuModuleUnload(mod));
                    }
        printf("\n]}\n");
        fflush(stdout);
        for (int i = 0; i < k->nbufs; i++) {
            CHECK(cuMemFree(d[i]));
            free(h[i]);
            free(got[i]);
            free(ref[i]);
        }
    }
    fprintf(stderr, "%-16s %10s %10s %8s  %-44s %s\n", "kernel", "default", "best", "speedup", "best variant",
            "differed");
    for (int i = 0; i < nsum; i++)
        fprintf(stderr, "%-16s %8.4f ms %8.4f ms %7.3fx  %-44s %d of %d builds\n", sums[i].name, sums[i].def,
                sums[i].best, sums[i].def / sums[i].best, sums[i].best_text, sums[i].differed, sums[i].builds);
    return 0;
}
