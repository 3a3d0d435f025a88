// alloc_bench: device and pinned host allocation speed through the CUDA driver
// API. Run natively and under LD_PRELOAD=libdrk_shim.so (tests/bench/alloc.sh
// does both, interleaved) to compare drk's pools with the driver's allocators.
//
// Linked with -lcuda, so the calls take the exported-symbol route: with drk
// preloaded, cuMemAlloc_v2, cuMemAllocAsync, cuMemHostAlloc and their frees
// bind to drk's hooks. No kernel is launched.
//
//   alloc_bench anchor  --api alloc|async [--pairs 20000] [--live 64] [--seed S] [--min B] [--max B]
//   alloc_bench threads --api async|alloc --threads N [--pairs 20000] [--warmup 1000] [--live 64] ...
//   alloc_bench host    --size BYTES [--pairs N] [--flags F]
//
// A "pair" frees one live allocation and allocates a new one into its slot.
// All sizes and slots come from a seeded generator and are drawn before the
// clock starts: the same seed gives the same sequence in every run (the JSON's
// "sequence" is a digest of it). Sizes are log-uniform between --min and
// --max, i.e. every factor of two between them is equally likely, as in the
// RMM-style random benchmarks the driver anchors were measured with: small
// allocations are as common as in real programs while the large ones still
// stress the page cache.
//
// Only the alloc/free loop is timed, in batches of --batch pairs; reported are
// the mean per pair, the median of the batches' per-pair times, and for the
// anchor the first --warm pairs (cold pool) apart from the rest. After the
// loop, a check writes a pattern into every live allocation and reads it back
// ("check": "ok"/"bad"; bad exits 1), so a pool that hands out overlapping or
// unusable memory cannot pass for a fast one. A failed allocation is counted,
// its error named on stderr, and the run exits 3 after its JSON line. The last
// stdout line is one JSON object.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum api { API_ALLOC, API_ASYNC };
enum which { CASE_ANCHOR, CASE_THREADS, CASE_HOST };

static const char *api_name(enum api a) { return a == API_ALLOC ? "alloc" : "async"; }

static const char *err_name(CUresult r) {
    const char *name = NULL;
    // May fail itself (e.g. in the toolkit's stub library).
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        return r == CUDA_ERROR_STUB_LIBRARY ? "CUDA_ERROR_STUB_LIBRARY" : "CUresult";
    return name;
}

// Any failed CUDA call outside the allocations themselves ends the program:
// the numbers would describe work that did not happen.
static void check(CUresult r, const char *call, int line) {
    if (r == CUDA_SUCCESS)
        return;
    fprintf(stderr, "alloc_bench: %s failed: %s (%d) [line %d]\n", call, err_name(r), (int)r, line);
    if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY)
        fprintf(stderr, "alloc_bench: no usable GPU or CUDA driver on this machine; run it where there is one\n");
    exit(1);
}
#define CK(call) check((call), #call, __LINE__)

static void check_pthread(int err, const char *call, int line) {
    if (err == 0)
        return;
    fprintf(stderr, "alloc_bench: %s failed: %s [line %d]\n", call, strerror(err), line);
    exit(1);
}
#define CKP(call) check_pthread((call), #call, __LINE__)

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "alloc_bench: out of host memory\n");
        exit(1);
    }
    return p;
}

static double now_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("alloc_bench: clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void barrier_wait(pthread_barrier_t *b) {
    int rc = pthread_barrier_wait(b);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        check_pthread(rc, "pthread_barrier_wait", __LINE__);
}

// splitmix64: tiny, fast, and the same sequence on every machine.
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t log_uniform(uint64_t *s, size_t lo, size_t hi) {
    double u = (double)(next_u64(s) >> 11) * 0x1p-53; // [0, 1)
    double x = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    size_t n = (size_t)x;
    return n < lo ? lo : n > hi ? hi : n;
}

static uint64_t fnv(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; i++)
        h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    return h;
}

// One thread's allocation sequence, drawn before any timing.
struct plan {
    int live;
    long pairs;     // warm-up pairs (threads) followed by timed ones
    size_t *fill;   // [live] the first allocation of each slot
    uint32_t *slot; // [pairs] the slot pair i frees and refills
    size_t *size;   // [pairs] its new size
    uint64_t digest;
    double bytes_mean;   // over every allocation of the sequence
    size_t peak_live;    // largest sum of live sizes along the sequence
};

static void make_plan(struct plan *p, uint64_t seed, int live, long pairs, size_t lo, size_t hi, int fixed) {
    uint64_t s = seed;
    p->live = live;
    p->pairs = pairs;
    p->fill = xcalloc((size_t)live, sizeof *p->fill);
    p->slot = xcalloc((size_t)pairs, sizeof *p->slot);
    p->size = xcalloc((size_t)pairs, sizeof *p->size);
    uint64_t h = 0xcbf29ce484222325ull;
    double sum = 0;
    size_t cur = 0;
    for (int k = 0; k < live; k++) {
        p->fill[k] = fixed ? lo : log_uniform(&s, lo, hi);
        h = fnv(h, p->fill[k]);
        sum += (double)p->fill[k];
        cur += p->fill[k];
    }
    p->peak_live = cur;
    for (long i = 0; i < pairs; i++) {
        // Multiply-shift picks a slot without a division; its bias is 2^-32.
        uint32_t k = (uint32_t)(((next_u64(&s) >> 32) * (uint64_t)live) >> 32);
        size_t n = fixed ? lo : log_uniform(&s, lo, hi);
        p->slot[i] = k;
        p->size[i] = n;
        h = fnv(fnv(h, k), n);
        sum += (double)n;
    }
    // Peak live bytes along the sequence: what the pool must hold at once.
    size_t *cursz = xcalloc((size_t)live, sizeof *cursz);
    memcpy(cursz, p->fill, (size_t)live * sizeof *cursz);
    for (long i = 0; i < pairs; i++) {
        cur = cur - cursz[p->slot[i]] + p->size[i];
        cursz[p->slot[i]] = p->size[i];
        if (cur > p->peak_live)
            p->peak_live = cur;
    }
    free(cursz);
    p->digest = h;
    p->bytes_mean = sum / (double)((long)live + pairs);
}

static void free_plan(struct plan *p) {
    free(p->fill);
    free(p->slot);
    free(p->size);
}

// The live allocations of one thread and what went wrong with them.
struct slots {
    enum api api;
    CUstream stream;
    int live;
    CUdeviceptr *ptr; // 0: empty (its allocation failed)
    size_t *size;
    void **host;      // host case
    unsigned flags;   // host case: cuMemHostAlloc flags
    long failures;
    CUresult first_error;
};

static void failed(struct slots *sl, CUresult r, size_t n) {
    if (sl->failures++ == 0) {
        sl->first_error = r;
        fprintf(stderr, "alloc_bench: allocation of %zu bytes failed: %s (%d); counted, slot left empty\n", n,
                err_name(r), (int)r);
    }
}

static void dev_alloc(struct slots *sl, int k, size_t n) {
    CUresult r = sl->api == API_ALLOC ? cuMemAlloc(&sl->ptr[k], n) : cuMemAllocAsync(&sl->ptr[k], n, sl->stream);
    if (r == CUDA_SUCCESS) {
        sl->size[k] = n;
    } else {
        sl->ptr[k] = 0;
        failed(sl, r, n);
    }
}

static void dev_free(struct slots *sl, int k) {
    if (!sl->ptr[k])
        return;
    if (sl->api == API_ALLOC)
        CK(cuMemFree(sl->ptr[k]));
    else
        CK(cuMemFreeAsync(sl->ptr[k], sl->stream));
    sl->ptr[k] = 0;
}

static void host_alloc(struct slots *sl, int k, size_t n) {
    CUresult r = cuMemHostAlloc(&sl->host[k], n, sl->flags);
    if (r == CUDA_SUCCESS) {
        sl->size[k] = n;
    } else {
        sl->host[k] = NULL;
        failed(sl, r, n);
    }
}

static void host_free(struct slots *sl, int k) {
    if (!sl->host[k])
        return;
    CK(cuMemFreeHost(sl->host[k]));
    sl->host[k] = NULL;
}

// Pairs [from, to) of the plan, timed per batch of at most `batch` pairs (a
// batch never straddles `split`); each batch's seconds per pair go to
// per_pair[], its seconds to secs[], its pairs to count[] (each optional).
// Returns the number of batches.
static long timed_pairs(struct slots *sl, const struct plan *pl, int host, long from, long to, long split, long batch,
                        double *per_pair, double *secs, long *count) {
    long nb = 0;
    for (long i = from; i < to;) {
        long end = i + batch < to ? i + batch : to;
        if (i < split && end > split)
            end = split;
        long n = end - i;
        double t0 = now_s();
        if (host) {
            for (; i < end; i++) {
                host_free(sl, (int)pl->slot[i]);
                host_alloc(sl, (int)pl->slot[i], pl->size[i]);
            }
        } else {
            for (; i < end; i++) {
                dev_free(sl, (int)pl->slot[i]);
                dev_alloc(sl, (int)pl->slot[i], pl->size[i]);
            }
        }
        double t = now_s() - t0;
        if (secs)
            secs[nb] = t;
        if (per_pair)
            per_pair[nb] = t / (double)n;
        if (count)
            count[nb] = n;
        nb++;
    }
    return nb;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n) {
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --- correctness guard ------------------------------------------------------
// Allocation j gets byte fill_byte(j) over all of it and a 16-byte header
// (magic ^ j, j) at its start; only after every allocation is written are the
// head, middle and tail of each read back. Overlapping allocations, memory the
// driver cannot write, or a header landing in another allocation show up as a
// wrong byte.

#define CHECK_CHUNK 4096
#define CHECK_MAGIC 0x64726b2d616c6c6full

static unsigned char fill_byte(long j) { return (unsigned char)(1 + j % 251); }

static void make_header(long j, unsigned char hdr[16]) {
    uint64_t w[2] = {CHECK_MAGIC ^ (uint64_t)j, (uint64_t)j};
    memcpy(hdr, w, sizeof w);
}

// Is buf (offset off of allocation j, n bytes) what the guard wrote?
static int chunk_ok(const unsigned char *buf, size_t off, size_t n, long j) {
    unsigned char hdr[16];
    make_header(j, hdr);
    for (size_t i = 0; i < n; i++) {
        size_t at = off + i;
        unsigned char want = at < sizeof hdr ? hdr[at] : fill_byte(j);
        if (buf[i] != want)
            return 0;
    }
    return 1;
}

// The three windows read back from an allocation of `size` bytes.
static void windows(size_t size, size_t off[3], size_t len[3]) {
    size_t c = size < CHECK_CHUNK ? size : CHECK_CHUNK;
    off[0] = 0;
    off[1] = (size - c) / 2;
    off[2] = size - c;
    len[0] = len[1] = len[2] = c;
}

// Device allocations: ptr[i] of size[i] bytes, numbered base + i (empty slots
// skipped, counted in *checked). Returns the number that read back wrong.
static long check_device(const CUdeviceptr *ptr, const size_t *size, int n, long base, long *checked) {
    unsigned char hdr[16], buf[CHECK_CHUNK];
    for (int i = 0; i < n; i++) {
        if (!ptr[i])
            continue;
        long j = base + i;
        make_header(j, hdr);
        // Legacy stream: ordered after the memset, and the copies below wait.
        CK(cuMemsetD8(ptr[i], fill_byte(j), size[i]));
        CK(cuMemcpyHtoD(ptr[i], hdr, size[i] < sizeof hdr ? size[i] : sizeof hdr));
    }
    CK(cuCtxSynchronize());
    long bad = 0;
    for (int i = 0; i < n; i++) {
        if (!ptr[i])
            continue;
        ++*checked;
        size_t off[3], len[3];
        windows(size[i], off, len);
        int ok = 1;
        for (int w = 0; w < 3 && ok; w++) {
            CK(cuMemcpyDtoH(buf, ptr[i] + off[w], len[w]));
            ok = chunk_ok(buf, off[w], len[w], base + i);
        }
        if (!ok && bad++ < 3)
            fprintf(stderr, "alloc_bench: check: allocation %ld (%zu bytes at 0x%llx) reads back wrong\n", base + i,
                    size[i], (unsigned long long)ptr[i]);
    }
    return bad;
}

// Pinned host allocations: the same pattern written by the CPU, read in place,
// and one window sent through the device and back (the driver must accept the
// memory for copies); the driver must also see it as host memory.
static long check_host(void *const *ptr, const size_t *size, int n, long *checked) {
    unsigned char hdr[16], *buf = xcalloc(CHECK_CHUNK, 1);
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, CHECK_CHUNK));
    for (int i = 0; i < n; i++) {
        if (!ptr[i])
            continue;
        make_header(i, hdr);
        memset(ptr[i], fill_byte(i), size[i]);
        memcpy(ptr[i], hdr, size[i] < sizeof hdr ? size[i] : sizeof hdr);
    }
    long bad = 0;
    for (int i = 0; i < n; i++) {
        if (!ptr[i])
            continue;
        ++*checked;
        const unsigned char *p = ptr[i];
        size_t off[3], len[3];
        windows(size[i], off, len);
        int ok = 1;
        for (int w = 0; w < 3 && ok; w++)
            ok = chunk_ok(p + off[w], off[w], len[w], i);
        if (ok) {
            CK(cuMemcpyHtoD(dev, p, len[0]));
            memset(buf, 0, CHECK_CHUNK);
            CK(cuMemcpyDtoH(buf, dev, len[0]));
            ok = chunk_ok(buf, 0, len[0], i);
        }
        unsigned int type = 0;
        CUresult r = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
        if (r != CUDA_SUCCESS || type != CU_MEMORYTYPE_HOST) {
            fprintf(stderr, "alloc_bench: check: host allocation %d is not pinned host memory to the driver (%s, type %u)\n",
                    i, r == CUDA_SUCCESS ? "CUDA_SUCCESS" : err_name(r), type);
            ok = 0;
        }
        if (!ok && bad++ < 3)
            fprintf(stderr, "alloc_bench: check: host allocation %d (%zu bytes at %p) reads back wrong\n", i, size[i],
                    ptr[i]);
    }
    CK(cuMemFree(dev));
    free(buf);
    return bad;
}

// --- options and output -----------------------------------------------------

struct opts {
    enum which which;
    enum api api;
    long pairs, warm, warmup, steady, batch;
    int live, threads;
    uint64_t seed;
    size_t min, max, size;
    unsigned flags;
    int have_pairs, have_api, have_min, have_max, have_warm, have_batch;
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: alloc_bench anchor  --api alloc|async [--pairs 20000] [--live 64] [--seed S] [--min 256] [--max 260000000]\n"
            "                           [--warm 1000] [--batch 100]\n"
            "       alloc_bench threads --api async|alloc --threads N [--pairs 20000 (per thread)] [--warmup 1000]\n"
            "                           [--steady 0] [--live 64] [--seed S] [--min 256] [--max 16000000] [--batch 100]\n"
            "       alloc_bench host    --size BYTES | --min B --max B  [--pairs N] [--warm 1] [--flags F] [--seed S]\n"
            "                           [--batch B]\n"
            "  anchor   one thread: fill --live slots, then each pair frees a random slot and allocates a\n"
            "           log-uniform size into it (alloc: cuMemAlloc/cuMemFree; async: cuMemAllocAsync/\n"
            "           cuMemFreeAsync on one created non-blocking stream); --warm first pairs reported apart\n"
            "  threads  N threads, each with its own stream and --live slots, the same pattern after --warmup\n"
            "           untimed pairs, released together; with --steady S, S more untimed pairs each after\n"
            "           that, then --pairs timed again, released together (steady_*: the allocators grown)\n"
            "  host     cuMemHostAlloc/cuMemFreeHost pairs of one size (or log-uniform sizes), 8 live\n"
            "           (pairs default: 400 below 16 MiB, else 10), after --warm pairs timed apart (first_*)\n");
}

static long parse_long(const char *opt, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 0) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "alloc_bench: %s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, v ? v : "");
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, struct opts *o) {
    if (argc < 2) {
        usage(stderr);
        exit(2);
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        exit(0);
    } else if (!strcmp(argv[1], "anchor"))
        o->which = CASE_ANCHOR;
    else if (!strcmp(argv[1], "threads"))
        o->which = CASE_THREADS;
    else if (!strcmp(argv[1], "host"))
        o->which = CASE_HOST;
    else {
        fprintf(stderr, "alloc_bench: unknown case '%s' (anchor, threads or host)\n", argv[1]);
        usage(stderr);
        exit(2);
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--api")) {
            if (v && !strcmp(v, "alloc"))
                o->api = API_ALLOC;
            else if (v && !strcmp(v, "async"))
                o->api = API_ASYNC;
            else {
                fprintf(stderr, "alloc_bench: --api wants alloc or async, got '%s'\n", v ? v : "");
                exit(2);
            }
            o->have_api = 1;
        } else if (!strcmp(a, "--pairs")) {
            o->pairs = parse_long(a, v, 1, 100000000);
            o->have_pairs = 1;
        } else if (!strcmp(a, "--live"))
            o->live = (int)parse_long(a, v, 1, 1 << 16);
        else if (!strcmp(a, "--seed"))
            o->seed = (uint64_t)parse_long(a, v, 0, LONG_MAX);
        else if (!strcmp(a, "--min")) {
            o->min = (size_t)parse_long(a, v, 1, LONG_MAX);
            o->have_min = 1;
        }
        else if (!strcmp(a, "--max")) {
            o->max = (size_t)parse_long(a, v, 1, LONG_MAX);
            o->have_max = 1;
        } else if (!strcmp(a, "--warm")) {
            o->warm = parse_long(a, v, 0, LONG_MAX);
            o->have_warm = 1;
        } else if (!strcmp(a, "--warmup"))
            o->warmup = parse_long(a, v, 0, 100000000);
        else if (!strcmp(a, "--steady"))
            o->steady = parse_long(a, v, 0, 100000000);
        else if (!strcmp(a, "--batch")) {
            o->batch = parse_long(a, v, 1, 1 << 20);
            o->have_batch = 1;
        } else if (!strcmp(a, "--threads"))
            o->threads = (int)parse_long(a, v, 1, 256);
        else if (!strcmp(a, "--size"))
            o->size = (size_t)parse_long(a, v, 1, LONG_MAX);
        else if (!strcmp(a, "--flags"))
            o->flags = (unsigned)parse_long(a, v, 0, UINT_MAX);
        else {
            fprintf(stderr, "alloc_bench: unknown argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
        i++; // every option takes a value
    }
    if (o->which != CASE_HOST && !o->have_api) {
        fprintf(stderr, "alloc_bench: %s needs --api alloc|async\n", argv[1]);
        exit(2);
    }
    if (o->which == CASE_THREADS && !o->have_max)
        o->max = 16000000; // 8 threads x 64 live stay far below device memory
    if (o->which == CASE_HOST) {
        if (o->size) {
            o->min = o->max = o->size;
        } else if (!o->have_min || !o->have_max) {
            fprintf(stderr, "alloc_bench: host needs --size BYTES (or --min and --max for log-uniform sizes)\n");
            exit(2);
        }
        // About 0.5 s at the driver's speed (1.2-1.3 ms a pair up to 1 MiB,
        // 45 ms at 64 MiB); the same count under drk.
        if (!o->have_pairs)
            o->pairs = o->max >= ((size_t)16 << 20) ? 10 : 400;
        if (!o->have_batch)
            o->batch = o->pairs >= 100 ? 10 : 1;
        o->live = 8;
    }
    if (o->min > o->max) {
        fprintf(stderr, "alloc_bench: --min %zu is above --max %zu\n", o->min, o->max);
        exit(2);
    }
    if (o->which == CASE_THREADS || !o->have_warm)
        o->warm = o->which == CASE_ANCHOR ? 1000 : o->which == CASE_HOST ? 1 : 0;
    if (o->which == CASE_ANCHOR && o->warm > o->pairs)
        o->warm = o->pairs;
}

// Which object the program's reference to `fn` resolved to: libdrk_shim.so
// when drk is preloaded, libcuda.so.1 otherwise. Printed so a silently failed
// preload cannot pass for the driver being fast.
static const char *bound_to(void *fn) {
    Dl_info info;
    if (dladdr(fn, &info) == 0 || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static void print_string(const char *s) {
    putchar('"');
    for (const char *c = s; *c; c++) {
        if (*c == '"' || *c == '\\')
            putchar('\\');
        if ((unsigned char)*c >= 0x20)
            putchar(*c);
    }
    putchar('"');
}

struct env {
    CUdevice dev;
    CUcontext ctx;
    int driver;
    char name[256];
};

// Fields every case prints last.
static void print_tail(const struct env *e, const char *bound, long failures, CUresult first_error, long checked,
                       long bad) {
    printf("\"failures\":%ld,\"first_error\":", failures);
    if (failures)
        print_string(err_name(first_error));
    else
        printf("null");
    printf(",\"checked\":%ld,\"check\":\"%s\",\"bound_to\":", checked, bad ? "bad" : "ok");
    print_string(bound);
    printf(",\"driver_version\":%d,\"device\":", e->driver);
    print_string(e->name);
    printf("}\n");
    fflush(stdout);
}

static void print_settings(const struct opts *o, const char *name, const struct plan *pl) {
    printf("{\"case\":\"%s\",", name);
    if (o->which != CASE_HOST)
        printf("\"api\":\"%s\",", api_name(o->api));
    printf("\"pairs\":%ld,\"live\":%d,\"seed\":%llu,\"min\":%zu,\"max\":%zu,\"batch\":%ld,\"sequence\":\"%016llx\","
           "\"bytes_mean\":%.0f,\"peak_live_bytes\":%zu,",
           o->pairs, o->live, (unsigned long long)o->seed, o->min, o->max, o->batch, (unsigned long long)pl->digest,
           pl->bytes_mean, pl->peak_live);
}

// --- cases --------------------------------------------------------------------

static int run_anchor(const struct opts *o, const struct env *e) {
    struct plan pl;
    make_plan(&pl, o->seed, o->live, o->pairs, o->min, o->max, 0);
    struct slots sl = {.api = o->api, .live = o->live};
    sl.ptr = xcalloc((size_t)o->live, sizeof *sl.ptr);
    sl.size = xcalloc((size_t)o->live, sizeof *sl.size);
    if (o->api == API_ASYNC)
        CK(cuStreamCreate(&sl.stream, CU_STREAM_NON_BLOCKING));
    const char *bound = bound_to(o->api == API_ALLOC ? (void *)&cuMemAlloc : (void *)&cuMemAllocAsync);
    fprintf(stderr, "alloc_bench: anchor, %s, api %s, %ld pairs, %d live, sizes %zu..%zu; %s bound to %s\n", e->name,
            api_name(o->api), o->pairs, o->live, o->min, o->max,
            o->api == API_ALLOC ? "cuMemAlloc_v2" : "cuMemAllocAsync", bound);

    double t0 = now_s();
    for (int k = 0; k < o->live; k++)
        dev_alloc(&sl, k, pl.fill[k]);
    double fill_s = now_s() - t0;

    long maxb = o->pairs / o->batch + 2;
    double *per_pair = xcalloc((size_t)maxb, sizeof *per_pair), *secs = xcalloc((size_t)maxb, sizeof *secs);
    long *count = xcalloc((size_t)maxb, sizeof *count);
    long nb = timed_pairs(&sl, &pl, 0, 0, o->pairs, o->warm, o->batch, per_pair, secs, count);
    double total = 0, first = 0;
    for (long b = 0, done = 0; b < nb; b++) {
        // No batch straddles the split, so the first ones end exactly at it.
        if (done < o->warm)
            first += secs[b];
        done += count[b];
        total += secs[b];
    }
    double med = median(per_pair, nb);

    // Outside the timing: the stream's work is done before the check reads.
    if (o->api == API_ASYNC)
        CK(cuStreamSynchronize(sl.stream));
    long checked = 0, bad = check_device(sl.ptr, sl.size, o->live, 0, &checked);
    for (int k = 0; k < o->live; k++)
        dev_free(&sl, k);
    if (o->api == API_ASYNC) {
        CK(cuStreamSynchronize(sl.stream));
        CK(cuStreamDestroy(sl.stream));
    }
    CK(cuCtxSynchronize());

    print_settings(o, "anchor", &pl);
    printf("\"fill_s\":%.6f,\"total_s\":%.6f,\"us_per_pair_mean\":%.4f,\"us_per_pair_median\":%.4f,", fill_s, total,
           total / (double)o->pairs * 1e6, med * 1e6);
    printf("\"first_pairs\":%ld,", o->warm);
    if (o->warm > 0)
        printf("\"first_s\":%.6f,\"first_us_per_pair\":%.4f,", first, first / (double)o->warm * 1e6);
    if (o->pairs > o->warm)
        printf("\"rest_s\":%.6f,\"rest_us_per_pair\":%.4f,", total - first,
               (total - first) / (double)(o->pairs - o->warm) * 1e6);
    print_tail(e, bound, sl.failures, sl.first_error, checked, bad);
    free(per_pair);
    free(secs);
    free(count);
    free(sl.ptr);
    free(sl.size);
    free_plan(&pl);
    return bad ? 1 : sl.failures ? 3 : 0;
}

struct shared {
    const struct opts *o;
    CUcontext ctx;
    pthread_barrier_t ready, start;
};

struct worker {
    struct shared *sh;
    pthread_t tid;
    struct plan plan;
    struct slots sl;
    double t0, t1;      // release and end of the timed loop
    double t2, t3;      // the same for the second timed loop (--steady)
    double *per_pair;   // per batch
    long nb;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    const struct opts *o = w->sh->o;
    // The context is per thread; each thread has its own stream, as a
    // multi-threaded program's workers would.
    CK(cuCtxSetCurrent(w->sh->ctx));
    CK(cuStreamCreate(&w->sl.stream, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < o->live; k++)
        dev_alloc(&w->sl, k, w->plan.fill[k]);
    // Untimed warm-up pairs, so that the timed ones do not see each
    // allocator's cold start (the anchor case reports that); but threads
    // meet only once released together (see --steady below).
    timed_pairs(&w->sl, &w->plan, 0, 0, o->warmup, 0, o->batch, NULL, NULL, NULL);
    if (o->api == API_ASYNC)
        CK(cuStreamSynchronize(w->sl.stream));
    barrier_wait(&w->sh->ready);
    barrier_wait(&w->sh->start);
    w->t0 = now_s();
    w->nb = timed_pairs(&w->sl, &w->plan, 0, o->warmup, o->warmup + o->pairs, 0, o->batch, w->per_pair, NULL, NULL);
    w->t1 = now_s();
    if (o->api == API_ASYNC)
        CK(cuStreamSynchronize(w->sl.stream));
    if (!o->steady)
        return NULL;
    // Threads that met each other in the first loop may have changed how
    // an allocator serves them (drk: a shard of their own, grown from
    // empty); after the steady pairs, the second loop sees it grown.
    long from = o->warmup + o->pairs + o->steady;
    timed_pairs(&w->sl, &w->plan, 0, o->warmup + o->pairs, from, 0, o->batch, NULL, NULL, NULL);
    if (o->api == API_ASYNC)
        CK(cuStreamSynchronize(w->sl.stream));
    barrier_wait(&w->sh->ready);
    barrier_wait(&w->sh->start);
    w->t2 = now_s();
    timed_pairs(&w->sl, &w->plan, 0, from, from + o->pairs, 0, o->batch, NULL, NULL, NULL);
    w->t3 = now_s();
    if (o->api == API_ASYNC)
        CK(cuStreamSynchronize(w->sl.stream));
    return NULL;
}

static int run_threads(const struct opts *o, const struct env *e) {
    struct shared sh = {.o = o, .ctx = e->ctx};
    int n = o->threads;
    CKP(pthread_barrier_init(&sh.ready, NULL, (unsigned)n + 1));
    CKP(pthread_barrier_init(&sh.start, NULL, (unsigned)n + 1));
    struct worker *w = xcalloc((size_t)n, sizeof *w);
    long maxb = o->pairs / o->batch + 2;
    uint64_t digest = 0xcbf29ce484222325ull;
    const char *bound = bound_to(o->api == API_ALLOC ? (void *)&cuMemAlloc : (void *)&cuMemAllocAsync);
    fprintf(stderr, "alloc_bench: threads, %s, api %s, %d thread(s) x %ld pairs (+%ld warm-up; steady: +%ld, %ld more), %d live each, sizes %zu..%zu; bound to %s\n",
            e->name, api_name(o->api), n, o->pairs, o->warmup, o->steady, o->steady ? o->pairs : 0, o->live, o->min, o->max, bound);
    for (int t = 0; t < n; t++) {
        w[t].sh = &sh;
        // Each thread its own sequence, fixed by the seed and its index.
        uint64_t s = o->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(t + 1));
        make_plan(&w[t].plan, s, o->live, o->warmup + o->pairs + (o->steady ? o->steady + o->pairs : 0), o->min, o->max, 0);
        digest = fnv(digest, w[t].plan.digest);
        w[t].sl = (struct slots){.api = o->api, .live = o->live};
        w[t].sl.ptr = xcalloc((size_t)o->live, sizeof *w[t].sl.ptr);
        w[t].sl.size = xcalloc((size_t)o->live, sizeof *w[t].sl.size);
        w[t].per_pair = xcalloc((size_t)maxb, sizeof *w[t].per_pair);
    }
    for (int t = 0; t < n; t++)
        CKP(pthread_create(&w[t].tid, NULL, worker_main, &w[t]));
    // Every thread has filled and warmed up before any starts its clock.
    barrier_wait(&sh.ready);
    barrier_wait(&sh.start);
    if (o->steady) {
        barrier_wait(&sh.ready);
        barrier_wait(&sh.start);
    }
    for (int t = 0; t < n; t++)
        CKP(pthread_join(w[t].tid, NULL));

    double t0 = w[0].t0, t1 = w[0].t1, t2 = w[0].t2, t3 = w[0].t3, per_thread_sum = 0;
    long failures = 0, nball = 0;
    CUresult first_error = CUDA_SUCCESS;
    double *all = xcalloc((size_t)(maxb * n), sizeof *all);
    for (int t = 0; t < n; t++) {
        if (w[t].t0 < t0)
            t0 = w[t].t0;
        if (w[t].t1 > t1)
            t1 = w[t].t1;
        if (w[t].t2 < t2)
            t2 = w[t].t2;
        if (w[t].t3 > t3)
            t3 = w[t].t3;
        per_thread_sum += (w[t].t1 - w[t].t0) / (double)o->pairs;
        if (w[t].sl.failures && !failures)
            first_error = w[t].sl.first_error;
        failures += w[t].sl.failures;
        memcpy(all + nball, w[t].per_pair, (size_t)w[t].nb * sizeof *all);
        nball += w[t].nb;
    }
    double wall = t1 - t0, med = median(all, nball);

    // Streams are synchronized (by their threads); check every thread's
    // allocations together so overlaps across threads show too.
    long bad = 0, checked = 0;
    for (int t = 0; t < n; t++)
        bad += check_device(w[t].sl.ptr, w[t].sl.size, o->live, (long)t * o->live, &checked);
    for (int t = 0; t < n; t++) {
        for (int k = 0; k < o->live; k++)
            dev_free(&w[t].sl, k);
        CK(cuStreamSynchronize(w[t].sl.stream));
        CK(cuStreamDestroy(w[t].sl.stream));
    }
    CK(cuCtxSynchronize());

    // The settings line shows one digest over all threads' sequences, their
    // mean size, and the sum of their peaks (the most all may hold at once).
    struct plan shown = w[0].plan;
    shown.digest = digest;
    shown.bytes_mean = 0;
    shown.peak_live = 0;
    for (int t = 0; t < n; t++) {
        shown.bytes_mean += w[t].plan.bytes_mean / n;
        shown.peak_live += w[t].plan.peak_live;
    }
    print_settings(o, "threads", &shown);
    printf("\"threads\":%d,\"pairs_per_thread\":%ld,\"warmup_per_thread\":%ld,\"wall_s\":%.6f,"
           "\"pairs_per_s_aggregate\":%.1f,\"us_per_pair_aggregate\":%.4f,\"us_per_pair_mean\":%.4f,"
           "\"us_per_pair_median\":%.4f,\"us_per_pair_thread\":[",
           n, o->pairs, o->warmup, wall, (double)n * (double)o->pairs / wall, wall / ((double)n * (double)o->pairs) * 1e6,
           per_thread_sum / n * 1e6, med * 1e6);
    for (int t = 0; t < n; t++)
        printf("%s%.4f", t ? "," : "", (w[t].t1 - w[t].t0) / (double)o->pairs * 1e6);
    printf("],");
    if (o->steady) {
        printf("\"steady_warmup_per_thread\":%ld,\"steady_wall_s\":%.6f,\"steady_pairs_per_s_aggregate\":%.1f,"
               "\"steady_us_per_pair_thread\":[",
               o->steady, t3 - t2, (double)n * (double)o->pairs / (t3 - t2));
        for (int t = 0; t < n; t++)
            printf("%s%.4f", t ? "," : "", (w[t].t3 - w[t].t2) / (double)o->pairs * 1e6);
        printf("],");
    }
    print_tail(e, bound, failures, first_error, checked, bad);
    for (int t = 0; t < n; t++) {
        free_plan(&w[t].plan);
        free(w[t].sl.ptr);
        free(w[t].sl.size);
        free(w[t].per_pair);
    }
    free(all);
    free(w);
    pthread_barrier_destroy(&sh.ready);
    pthread_barrier_destroy(&sh.start);
    return bad ? 1 : failures ? 3 : 0;
}

static int run_host(const struct opts *o, const struct env *e) {
    struct plan pl;
    make_plan(&pl, o->seed, o->live, o->warm + o->pairs, o->min, o->max, o->min == o->max);
    struct slots sl = {.live = o->live, .flags = o->flags};
    sl.host = xcalloc((size_t)o->live, sizeof *sl.host);
    sl.size = xcalloc((size_t)o->live, sizeof *sl.size);
    const char *bound = bound_to((void *)&cuMemHostAlloc);
    fprintf(stderr, "alloc_bench: host, %s, %ld pairs, sizes %zu..%zu, flags 0x%x, %d live; cuMemHostAlloc bound to %s\n",
            e->name, o->pairs, o->min, o->max, o->flags, o->live, bound);

    double t0 = now_s();
    for (int k = 0; k < o->live; k++)
        host_alloc(&sl, k, pl.fill[k]);
    double fill_s = now_s() - t0;
    long maxb = o->pairs / o->batch + 2;
    double *per_pair = xcalloc((size_t)maxb, sizeof *per_pair), *secs = xcalloc((size_t)maxb, sizeof *secs);
    /* The first pairs apart: a process's first wait for the device (the
     * pool's first reuse) costs the driver ~16 us once, cold code ~5 us
     * more (H100, 2026-12-05), which a 40-pair mean would carry. */
    double first_s = now_s();
    timed_pairs(&sl, &pl, 1, 0, o->warm, 0, o->warm ? o->warm : 1, NULL, NULL, NULL);
    first_s = now_s() - first_s;
    long nb = timed_pairs(&sl, &pl, 1, o->warm, o->warm + o->pairs, 0, o->batch, per_pair, secs, NULL);
    /* worst, the slowest batch: a one-off (a first wait, a first chunk)
     * that a short run's mean carries. */
    double total = 0, worst = 0;
    long worst_at = 0;
    for (long b = 0; b < nb; b++) {
        total += secs[b];
        if (per_pair[b] > worst)
            worst = per_pair[b], worst_at = b;
    }
    double med = median(per_pair, nb);

    long checked = 0, bad = check_host(sl.host, sl.size, o->live, &checked);
    for (int k = 0; k < o->live; k++)
        host_free(&sl, k);

    print_settings(o, "host", &pl);
    if (o->min == o->max)
        printf("\"size\":%zu,", o->min);
    printf("\"flags\":%u,\"fill_s\":%.6f,\"first_pairs\":%ld,\"first_us_per_pair\":%.4f,\"total_s\":%.6f,"
           "\"us_per_pair_mean\":%.4f,\"us_per_pair_median\":%.4f,\"us_per_pair_max\":%.4f,\"slowest_batch\":%ld,",
           o->flags, fill_s, o->warm, o->warm ? first_s / (double)o->warm * 1e6 : 0.0, total,
           total / (double)o->pairs * 1e6, med * 1e6, worst * 1e6, worst_at);
    print_tail(e, bound, sl.failures, sl.first_error, checked, bad);
    free(per_pair);
    free(secs);
    free(sl.host);
    free(sl.size);
    free_plan(&pl);
    return bad ? 1 : sl.failures ? 3 : 0;
}

int main(int argc, char **argv) {
    struct opts o = {.pairs = 20000, .live = 64, .seed = 1, .min = 256, .max = 260000000, .batch = 100,
                     .warmup = 1000, .threads = 1};
    parse(argc, argv, &o);

    struct env e;
    CK(cuInit(0));
    CK(cuDriverGetVersion(&e.driver));
    CK(cuDeviceGet(&e.dev, 0));
    CK(cuDeviceGetName(e.name, (int)sizeof e.name, e.dev));
    // The primary context: the one cudart (and so PyTorch) uses.
    CK(cuDevicePrimaryCtxRetain(&e.ctx, e.dev));
    CK(cuCtxSetCurrent(e.ctx));

    int rc = o.which == CASE_ANCHOR ? run_anchor(&o, &e) : o.which == CASE_THREADS ? run_threads(&o, &e) : run_host(&o, &e);
    CK(cuDevicePrimaryCtxRelease(e.dev));
    return rc;
}
