/* What a variant's compile costs with other optimization levels, and what
 * nvJitLink's own cache of intermediate steps saves: the two compile tips
 * issue 12 asks to measure before adopting ("a lower optimization level
 * for blocks under 128 threads compiles faster"; "keep intermediates").
 * Needs no GPU: nvJitLink works on the CPU. It calls nvJitLink itself, as
 * jitlink_threads does, on each kernel of PTX_FILE cut to its own entry as
 * drk cuts it (evolve/image/ptx_entry.h).
 *
 * Per kernel, REPS compiles each (median ms):
 *   O3 .. O0   ptxas's level (-Xptxas=-O3 is the default and drk's default
 *              variant; drk's opt_level=3 is -O2), every compile's PTX with
 *              a comment of its own, so that no cache answers;
 *   same       the O3 text compiled again unchanged, as drk's copy of a
 *              kernel's PTX is for each of its variants (a cache may answer);
 *   regs       that same unchanged text with -maxrregcount=64 (does a cache
 *              of intermediate steps serve other options?);
 *   nocache    "same" with -no-cache;
 * and the registers each level gives (ptxas's info, -verbose).
 * Run it with CUDA_CACHE_DISABLE=1 unless the driver's compute cache is what
 * is measured (it serves nvJitLink's repeats across processes).
 *
 *   jit_opts PTX_FILE [REPS [NVJITLINK_SO]]   (5 libnvJitLink.so.13)
 * Exit 0 when every compile succeeded; 1 when one failed; 2 on bad
 * arguments or unreadable PTX; 77 (a skip to ctest) when there is no
 * nvJitLink 13. */
#define _GNU_SOURCE
#include <unistd.h>

#include "bench_nvjitlink.h"
#include "evolve/image/ptx_entry.h"

enum { REPS_MAX = 64, MODES = 7 };
static const char *const mode_name[MODES] = {"O3", "O2", "O1", "O0", "same", "regs", "nocache"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Registers from ptxas's info ("Used 40 registers"), -1 if not said. */
static int registers_of(const char *log)
{
    const char *p = strstr(log, "Used ");
    return p ? atoi(p + 5) : -1;
}

/* One compile of `text` (NUL-terminated) with `opts`: its wall time in ms,
 * or -1 (said on stderr). *regs gets the registers when asked. */
static double compile(const char *text, size_t len, const char **opts, unsigned nopts, int *regs)
{
    jl_handle h = NULL;
    double t0 = now_ms();
    int r = jl.create(&h, nopts, opts);
    if (r == 0)
        r = jl.add(h, NVJITLINK_INPUT_PTX, text, len + 1, "jit_opts");
    if (r == 0)
        r = jl.complete(h);
    double ms = now_ms() - t0;
    size_t n = 0;
    if (r == 0 && regs && jl.info_size(h, &n) == 0 && n) {
        char *log = malloc(n + 1);
        if (log && jl.info(h, log) == 0) {
            log[n] = 0;
            *regs = registers_of(log);
        }
        free(log);
    }
    if (h)
        jl.destroy(&h);
    if (r != 0) {
        fprintf(stderr, "jit_opts: nvJitLink error %d\n", r);
        return -1;
    }
    return ms;
}

/* The entries' names, in order ("\n.entry NAME(" or ".visible .entry"). */
static int entries(const char *ptx, char names[][128], int max)
{
    int n = 0;
    for (const char *p = ptx; n < max && (p = strstr(p, ".entry ")) != NULL; p += 7) {
        const char *s = p + 7, *e = s;
        while (*e && *e != '(' && *e != ' ' && *e != '\n')
            e++;
        if (e - s <= 0 || e - s >= 128)
            continue;
        memcpy(names[n], s, (size_t)(e - s));
        names[n][e - s] = 0;
        n++;
    }
    return n;
}

/* `text` with a comment of its own (so no cache has seen it), malloc'd. */
static char *tagged(const char *text, size_t len, int tag, size_t *out)
{
    char *t = malloc(len + 64);
    if (t)
        *out = (size_t)snprintf(t, len + 64, "%s\n// jit_opts %d %d\n", text, (int)getpid(), tag);
    return t;
}

int main(int argc, char **argv)
{
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    const char *so = argc > 3 ? argv[3] : "libnvJitLink.so.13";
    if (argc < 2 || reps < 1 || reps > REPS_MAX) {
        fprintf(stderr, "usage: jit_opts PTX_FILE [REPS (1-%d) [NVJITLINK_SO]]\n", REPS_MAX);
        return 2;
    }
    size_t ptx_len;
    char *ptx = read_all(argv[1], &ptx_len);
    if (!ptx) {
        fprintf(stderr, "jit_opts: %s: cannot read it\n", argv[1]);
        return 2;
    }
    if (bench_nvjitlink_open("jit_opts", so) != 0)
        return 77;
    char names[64][128];
    int nk = entries(ptx, names, 64);
    if (!nk) {
        fprintf(stderr, "jit_opts: %s: no .entry\n", argv[1]);
        return 2;
    }
    const char *arch = "-arch=sm_90", *verbose = "-verbose";
    const char *level[4] = {"-Xptxas=-O3", "-Xptxas=-O2", "-Xptxas=-O1", "-Xptxas=-O0"};
    /* nvJitLink's first compile in a process pays its start: not counted. */
    {
        size_t n;
        char *t = tagged(ptx, ptx_len, -1, &n);
        const char *o[1] = {arch};
        if (!t || compile(t, n, o, 1, NULL) < 0)
            return 1;
        free(t);
    }
    printf("jit_opts: %s, %d kernels, %d compiles each way, median ms (registers)\n", argv[1], nk, reps);
    printf("| kernel | PTX bytes |");
    for (int m = 0; m < MODES; m++)
        printf(" %s |", mode_name[m]);
    printf("\n|---|---|");
    for (int m = 0; m < MODES; m++)
        printf("---|");
    printf("\n");
    double sum[MODES] = {0};
    int failed = 0, tag = 0;
    for (int k = 0; k < nk; k++) {
        size_t len = 0;
        char *one = drk_ptx_only_entry(ptx, ptx_len, names[k], &len);
        if (!one) {
            fprintf(stderr, "jit_opts: %s: cannot cut its entry\n", names[k]);
            failed = 1;
            continue;
        }
        double med[MODES];
        int regs[4] = {-1, -1, -1, -1};
        for (int m = 0; m < MODES; m++) {
            double t[REPS_MAX];
            for (int r = 0; r < reps; r++) {
                const char *o[4] = {arch, verbose, NULL, NULL};
                unsigned no = 2;
                size_t n = len;
                char *text = NULL;
                if (m < 4) {
                    o[no++] = level[m];
                    text = tagged(one, len, ++tag, &n);
                } else if (m == 5) {
                    o[no++] = "-maxrregcount=64";
                } else if (m == 6) {
                    o[no++] = "-no-cache";
                }
                /* "same" and its kin: the unchanged text, first compiled
                 * once (untimed) as drk's default variant is. */
                if (m >= 4 && r == 0) {
                    const char *d[2] = {arch, verbose};
                    if (compile(one, len, d, 2, NULL) < 0)
                        failed = 1;
                }
                t[r] = compile(text ? text : one, n, o, no, m < 4 && r == 0 ? &regs[m] : NULL);
                free(text);
                if (t[r] < 0)
                    failed = 1;
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            med[m] = t[reps / 2];
            sum[m] += med[m];
        }
        printf("| %s | %zu |", names[k], len);
        for (int m = 0; m < MODES; m++) {
            if (m < 4)
                printf(" %.1f (%d) |", med[m], regs[m]);
            else
                printf(" %.2f |", med[m]);
        }
        printf("\n");
        free(one);
    }
    printf("sum of medians:");
    for (int m = 0; m < MODES; m++)
        printf(" %s %.1f ms%s", mode_name[m], sum[m], m + 1 < MODES ? "," : "");
    printf("\nratios to O3: O2 %.2f, O1 %.2f, O0 %.2f, same %.3f, regs %.3f, nocache %.3f\n", sum[1] / sum[0],
           sum[2] / sum[0], sum[3] / sum[0], sum[4] / sum[0], sum[5] / sum[0], sum[6] / sum[0]);
    free(ptx);
    return failed;
}
