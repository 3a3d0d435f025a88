/* `drk trace synth`: deterministic synthetic allocation traces for tests
 * and CI. The same seed, kind and op count give the same bytes on every
 * machine (integer arithmetic and our own generator only). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/trace.h"
#include "tools/commands.h"

/* ------------------------------------------------------------ output */

/* xoshiro256**, seeded by splitmix64. */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(rng *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return out;
}

/* Uniform in [0, n); the tiny modulo bias does not matter here. */
static uint64_t below(rng *r, uint64_t n) { return next_u64(r) % n; }

typedef struct synth {
    rng r;
    FILE *out;
    uint64_t t, next_id, ops, max_ops;
    int failed;
} synth;

/* Ops past max_ops are dropped, whole: a dropped alloc's free is dropped too
 * because every later op is. */
static int done(const synth *s) { return s->ops >= s->max_ops || s->failed; }

static void emit(synth *s, char kind, uint64_t id, uint64_t size, uint32_t stream)
{
    if (done(s))
        return;
    s->t += 200 + below(&s->r, 1800);
    drk_trace_op op = {.t_ns = s->t, .id = id, .size = size, .stream = stream, .kind = kind};
    if (drk_trace_write_op(s->out, &op) != 0)
        s->failed = 1;
    s->ops++;
}

/* An allocation on `stream` (DRK_TRACE_NO_STREAM: cuMemAlloc); returns its id. */
static uint64_t alloc_on(synth *s, uint64_t size, uint32_t stream)
{
    uint64_t id = ++s->next_id;
    emit(s, stream == DRK_TRACE_NO_STREAM ? 'a' : 'A', id, size, stream);
    return id;
}

static void free_on(synth *s, uint64_t id, uint32_t stream)
{
    emit(s, stream == DRK_TRACE_NO_STREAM ? 'f' : 'F', id, 0, stream);
}

/* ------------------------------------------------------------ random */

#define RANDOM_MAX_LIVE 128
#define RANDOM_ALLOC_PERCENT 73 /* RMM's random_allocations benchmark */

typedef struct live_alloc {
    uint64_t id;
    uint32_t stream;
} live_alloc;

/* Sizes log-uniform from 2^8 to 2^28 bytes (256 B - 256 MiB); half on
 * cuMemAlloc, half async on streams 0-3; frees of a random live one; at the
 * end everything is freed, within max_ops. */
static void gen_random(synth *s)
{
    live_alloc live[RANDOM_MAX_LIVE];
    size_t n = 0;
    while (!done(s)) {
        uint64_t left = s->max_ops - s->ops;
        int can_alloc = n == 0 || (n < RANDOM_MAX_LIVE && n + 2 <= left);
        if (can_alloc && (n == 0 || below(&s->r, 100) < RANDOM_ALLOC_PERCENT)) {
            /* 2^(8 + k/64) for k in [0, 20*64]: a fine log-uniform grid */
            uint64_t k = below(&s->r, 20 * 64 + 1), base = 1ULL << (8 + k / 64);
            uint64_t size = base + base * (k % 64) / 64 + below(&s->r, base / 64 + 1);
            uint32_t stream = below(&s->r, 2) ? DRK_TRACE_NO_STREAM : (uint32_t)below(&s->r, 4);
            live[n].stream = stream;
            live[n++].id = alloc_on(s, size, stream);
        } else if (n) {
            size_t i = (size_t)below(&s->r, n);
            free_on(s, live[i].id, live[i].stream);
            live[i] = live[--n];
        } else {
            break; /* one op left and nothing live */
        }
    }
}

/* --------------------------------------------------------------- gpt */

/* A decoder-only transformer in bf16 trained with Adam, one micro-batch a
 * step, the sequence length drawn per step (RL rollouts vary): the pattern
 * where activations of one step's sizes leave holes the next step's sizes
 * do not fit. */
#define GPT_HIDDEN 2048ULL
#define GPT_LAYERS 16
#define GPT_VOCAB 32000ULL
#define GPT_BATCH 4ULL
#define GPT_SEQ_STEP 128ULL   /* seq_len is a multiple of this */
#define GPT_SEQ_STEPS 32ULL   /* ... up to 32 * 128 = 4096 */
#define GPT_BUCKET (25ULL << 20) /* gradient all-reduce bucket, on stream 1 */
#define BF16 2ULL
#define FP32 4ULL
#define COMPUTE 0u
#define COMM 1u

enum { W_QKV, W_PROJ, W_FC1, W_FC2, W_LN1, W_LN2, W_PER_LAYER };

static uint64_t weight_bytes(int w)
{
    static const uint64_t h2[W_PER_LAYER] = {3, 1, 4, 4, 0, 0};
    return h2[w] ? h2[w] * GPT_HIDDEN * GPT_HIDDEN * BF16 : GPT_HIDDEN * BF16;
}

/* Saved activations of one layer, in forward order. */
enum { A_LN1, A_LN1_STATS, A_QKV, A_ATTN, A_PROJ, A_LN2, A_LN2_STATS, A_FC1, A_GELU, A_FC2, A_PER_LAYER };

static uint64_t activation_bytes(int a, uint64_t tok)
{
    static const uint64_t h[A_PER_LAYER] = {1, 0, 3, 1, 1, 1, 0, 4, 4, 1};
    return h[a] ? tok * h[a] * GPT_HIDDEN * BF16 : tok * 2 * FP32; /* LayerNorm mean and rstd */
}

static void gen_gpt(synth *s)
{
    uint64_t weights[GPT_LAYERS][W_PER_LAYER], embedding;
    uint64_t adam[GPT_LAYERS][W_PER_LAYER][2], wgrad[GPT_LAYERS][W_PER_LAYER];
    embedding = alloc_on(s, GPT_VOCAB * GPT_HIDDEN * BF16, DRK_TRACE_NO_STREAM);
    for (int l = 0; l < GPT_LAYERS; l++)
        for (int w = 0; w < W_PER_LAYER; w++)
            weights[l][w] = alloc_on(s, weight_bytes(w), DRK_TRACE_NO_STREAM);
    (void)embedding, (void)weights;

    uint64_t prev_staged = 0;
    for (uint64_t step = 0; !done(s); step++) {
        uint64_t seq = GPT_SEQ_STEP * (1 + below(&s->r, GPT_SEQ_STEPS)), tok = GPT_BATCH * seq;
        s->t += 100000; /* the data loader */
        uint64_t saved[GPT_LAYERS][A_PER_LAYER];
        /* The next step's batch is staged while this one runs: its buffer
         * outlives this step's first half, so lifetimes cross steps. */
        uint64_t staged = alloc_on(s, tok * GPT_HIDDEN * BF16 * 2, COMPUTE);
        uint64_t x = alloc_on(s, tok * GPT_HIDDEN * BF16, COMPUTE); /* embedded tokens */
        for (int l = 0; l < GPT_LAYERS; l++) {
            if (l == GPT_LAYERS / 2 && prev_staged)
                free_on(s, prev_staged, COMPUTE);
            for (int a = 0; a < A_PER_LAYER; a++) {
                saved[l][a] = alloc_on(s, activation_bytes(a, tok), COMPUTE);
                if (a == A_QKV) { /* attention's workspace, gone once the output exists */
                    uint64_t ws = alloc_on(s, tok * GPT_HIDDEN * BF16, COMPUTE);
                    free_on(s, ws, COMPUTE);
                }
            }
        }
        uint64_t logits = alloc_on(s, tok * GPT_VOCAB * BF16, COMPUTE);
        uint64_t loss = alloc_on(s, tok * FP32, COMPUTE);
        uint64_t dlogits = alloc_on(s, tok * GPT_VOCAB * BF16, COMPUTE);
        free_on(s, logits, COMPUTE);
        free_on(s, loss, COMPUTE);
        uint64_t grad = alloc_on(s, tok * GPT_HIDDEN * BF16, COMPUTE);
        free_on(s, dlogits, COMPUTE);

        uint64_t bucket = 0;
        for (int l = GPT_LAYERS - 1; l >= 0; l--) {
            if (step == 0) /* .grad is created by the first backward, between activation frees */
                for (int w = 0; w < W_PER_LAYER; w++)
                    wgrad[l][w] = alloc_on(s, weight_bytes(w), COMPUTE);
            for (int a = A_PER_LAYER - 1; a >= 0; a--) {
                if (a == A_FC1 || a == A_QKV) { /* a matmul's input gradient replaces the running one */
                    uint64_t g = alloc_on(s, tok * GPT_HIDDEN * BF16, COMPUTE);
                    free_on(s, grad, COMPUTE);
                    grad = g;
                }
                free_on(s, saved[l][a], COMPUTE);
            }
            if (l % 4 == 0) { /* a bucket of gradients is all-reduced on the comm stream */
                uint64_t b = alloc_on(s, GPT_BUCKET, COMM);
                if (bucket)
                    free_on(s, bucket, COMM);
        prev_staged = staged;
                bucket = b;
            }
        }
        free_on(s, grad, COMPUTE);
        free_on(s, x, COMPUTE);
        free_on(s, bucket, COMM);
        prev_staged = staged;

        /* Adam: its state is created at the first step (PyTorch's lazy
         * init), when the step's holes are already there. */
        for (int l = 0; l < GPT_LAYERS; l++) {
            for (int w = 0; w < W_PER_LAYER; w++) {
                if (step == 0)
                    for (int k = 0; k < 2; k++)
                        adam[l][w][k] = alloc_on(s, weight_bytes(w) / BF16 * FP32, COMPUTE);
            }
            uint64_t tmp = alloc_on(s, weight_bytes(W_FC1) / BF16 * FP32, COMPUTE); /* foreach temporaries */
            free_on(s, tmp, COMPUTE);
        }
    }
    (void)adam, (void)wgrad;
}

/* ----------------------------------------------------------- command */

#define synth_usage_error(...) usage_fail("trace synth", "usage: drk trace synth [--seed N] [--ops N] [--kind gpt|random] > FILE\n", __VA_ARGS__)

static int parse_u64(const char *s, uint64_t *v)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *v = x;
    return 0;
}

int cmd_trace_synth(int argc, char **argv)
{
    uint64_t seed = 1, ops = 100000;
    const char *kind = "gpt";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_trace(stdout);
            return 0;
        }
        int known = 0;
        static const char *const names[] = {"--seed", "--ops", "--kind"};
        for (size_t k = 0; k < 3; k++)
            known |= name_len == strlen(names[k]) && strncmp(a, names[k], name_len) == 0;
        if (!known)
            return synth_usage_error("unknown argument '%s'", a);
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v)
            return synth_usage_error("%.*s needs a value", (int)name_len, a);
        if (strncmp(a, "--seed", name_len) == 0) {
            if (parse_u64(v, &seed) != 0)
                return synth_usage_error("--seed %s: not a number", v);
        } else if (strncmp(a, "--ops", name_len) == 0) {
            if (parse_u64(v, &ops) != 0)
                return synth_usage_error("--ops %s: not a number", v);
        } else if (strcmp(v, "gpt") == 0 || strcmp(v, "random") == 0) {
            kind = v;
        } else {
            return synth_usage_error("--kind %s: expected gpt or random", v);
        }
    }

    synth s = {.out = stdout, .max_ops = ops};
    uint64_t x = seed;
    for (int k = 0; k < 4; k++)
        s.r.s[k] = splitmix(&x);
    static char buf[1 << 16];
    setvbuf(stdout, buf, _IOFBF, sizeof buf);
    drk_trace_header h = {.page_size = 2u << 20};
    snprintf(h.program, sizeof h.program, "synthetic %s", kind);
    snprintf(h.recorded_by, sizeof h.recorded_by, "drk trace synth --kind %s --seed %llu --ops %llu", kind,
             (unsigned long long)seed, (unsigned long long)ops);
    if (drk_trace_write_header(stdout, &h) != 0)
        s.failed = 1;
    if (strcmp(kind, "gpt") == 0)
        gen_gpt(&s);
    else
        gen_random(&s);
    if (fflush(stdout) != 0 || s.failed) {
        perror("drk trace synth: standard output");
        return 1;
    }
    return 0;
}
