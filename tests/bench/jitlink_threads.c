/* Whether nvJitLink compiles on several threads at once, and what that
 * buys: what a capture's builds would take if drk compiled its candidates
 * together (on the H200 one search round of naive matmul had compiled 16
 * variants one after another, 28-30 ms each: docs/evolve.md, "What a
 * switch costs"; since the eighth session drk compiles a batch's on
 * DRK_EVOLVE_COMPILE_THREADS threads, on this measurement). It calls
 * nvJitLink itself, not through drk, so it measures nvJitLink alone.
 * Needs no GPU: nvJitLink works on the CPU.
 *
 * It compiles PTX_FILE (every kernel in it, as drk rebuilds a module) with
 * SETS option sets (register caps, then with -dlcm=cg), first one after
 * another, then ROUNDS times on THREADS threads taking the sets in turn,
 * and checks every cubin of the threaded rounds byte for byte against the
 * serial one of its set. Prints the serial and threaded wall times and
 * their ratio. Exit 0 when every compile succeeded and matched; 1 when one
 * differed or failed; 2 on bad arguments or no nvJitLink.
 *
 *   jitlink_threads PTX_FILE [THREADS [ROUNDS [NVJITLINK_SO]]]   (4 3 libnvJitLink.so.13) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "bench_nvjitlink.h"

enum { SETS = 16, THREADS_MAX = 64 };
static const int regs[SETS / 2] = {32, 40, 48, 56, 64, 80, 96, 128};

static const char *ptx;
static size_t ptx_len;

struct out {
    void *cubin;
    size_t len;
};
static struct out serial[SETS];

/* Set k's cubin into *o: 0, or -1 (said on stderr). The PTX gets a
 * comment of its own each time (`tag`): on the H200 host repeats of the
 * same input came back hundreds of times faster, from a cache. */
static int compile(int k, int tag, struct out *o)
{
    size_t n = ptx_len + 64;
    char *text = malloc(n);
    if (!text)
        return -1;
    int len = snprintf(text, n, "%s\n// jitlink_threads %d %d %d\n", ptx, (int)getpid(), tag, k);
    char rr[32];
    snprintf(rr, sizeof rr, "-maxrregcount=%d", regs[k % (SETS / 2)]);
    const char *opts[3] = {"-arch=sm_90", rr, "-Xptxas=-dlcm=cg"};
    jl_handle h = NULL;
    int r = jl.create(&h, k < SETS / 2 ? 2 : 3, opts);
    if (r == 0)
        r = jl.add(h, NVJITLINK_INPUT_PTX, text, (size_t)len + 1, "jitlink_threads");
    if (r == 0)
        r = jl.complete(h);
    if (r == 0)
        r = jl.cubin_size(h, &o->len);
    if (r == 0 && !(o->cubin = malloc(o->len)))
        r = -1;
    if (r == 0)
        r = jl.cubin(h, o->cubin);
    if (h)
        jl.destroy(&h);
    free(text);
    if (r != 0)
        fprintf(stderr, "jitlink_threads: set %d: nvJitLink error %d\n", k, r);
    return r == 0 ? 0 : -1;
}

static atomic_int next, bad, round_no;

static void *worker(void *arg)
{
    (void)arg;
    for (int k; (k = atomic_fetch_add(&next, 1)) < SETS;) {
        struct out o = {0};
        if (compile(k, 1 + atomic_load(&round_no), &o) != 0 || o.len != serial[k].len || memcmp(o.cubin, serial[k].cubin, o.len) != 0) {
            if (o.cubin)
                fprintf(stderr, "jitlink_threads: set %d: its cubin differs from the serial one\n", k);
            atomic_fetch_add(&bad, 1);
        }
        free(o.cubin);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 2 ? atoi(argv[2]) : 4, rounds = argc > 3 ? atoi(argv[3]) : 3;
    const char *so = argc > 4 ? argv[4] : "libnvJitLink.so.13";
    if (argc < 2 || threads < 1 || threads > THREADS_MAX || rounds < 1) {
        fprintf(stderr, "usage: jitlink_threads PTX_FILE [THREADS (1-%d) [ROUNDS [NVJITLINK_SO]]]\n", THREADS_MAX);
        return 2;
    }
    if (!(ptx = read_all(argv[1], &ptx_len))) {
        fprintf(stderr, "jitlink_threads: %s: cannot read it\n", argv[1]);
        return 2;
    }
    if (bench_nvjitlink_open("jitlink_threads", so) != 0)
        return 2;
    /* nvJitLink's first compile in a process pays its start: not counted. */
    struct out warm = {0};
    if (compile(0, -1, &warm) != 0)
        return 1;
    free(warm.cubin);
    double t0 = now_ms();
    for (int k = 0; k < SETS; k++)
        if (compile(k, 0, &serial[k]) != 0)
            return 1;
    double one = now_ms() - t0;
    printf("jitlink_threads: %s, %zu bytes of PTX, %d option sets: one after another %.1f ms (%.1f ms each)\n",
           argv[1], ptx_len, SETS, one, one / SETS);
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_t th[THREADS_MAX];
        atomic_store(&next, 0);
        atomic_store(&round_no, r);
        t0 = now_ms();
        int made = 0;
        for (; made < threads; made++)
            if (pthread_create(&th[made], NULL, worker, NULL) != 0)
                break;
        for (int i = 0; i < made; i++)
            pthread_join(th[i], NULL);
        double ms = now_ms() - t0;
        best = r == 0 || ms < best ? ms : best;
        printf("  round %d: %d threads %.1f ms (%.2fx the serial time)\n", r + 1, made, ms, one / ms);
        if (!made) {
            fprintf(stderr, "jitlink_threads: no thread could be made\n");
            return 1;
        }
    }
    int b = atomic_load(&bad);
    printf("threads %d: best %.1f ms, %.2fx; %d of %d cubins differed or failed\n", threads, best, one / best, b,
           SETS * rounds);
    return b ? 1 : 0;
}
