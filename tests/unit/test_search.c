/* The search (evolve/search.c, predict.c, shapes.c, space.c): the space's
 * ids and distances, the robust statistics, the budget, rejection,
 * determinism, the temperature and the trust/switch/drop rules on made-up
 * answers; shape classes and the share of kernels re-searched a round; then
 * the search replayed on the recorded H200 spaces (tests/evolve/sim.h) at
 * 1% and 3% noise, SEEDS seeds each: every kernel within 2% of its
 * exhaustive best in at most 10 rounds (at 3%: most seeds, every one by the
 * end), never served slower than 0.99x of the default, at most 2% of GPU
 * time on trials; a new shape of a solved kernel, started by the predictor,
 * within 2% in at most 2 rounds; the predictor's guesses between kernels
 * (leave one out), searched from; a served variant that turns slower
 * dropped within 2 rounds; a plateau whose best point is a dead end left by
 * plateau hops; a kernel with nothing to win kept at the default or within
 * noise, settled. Prints the tables docs/evolve.md quotes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/predict.h"
#include "evolve/search.h"
#include "evolve/shapes.h"
#include "evolve/space.h"
#include "tests/evolve/sim.h"
#include "tests/unit/check.h"

#define SEEDS 20
#define ROUNDS 30           /* the steady state the 10-round bound must last to */
#define WITHIN_ROUNDS 10
#define NEW_SHAPE_ROUNDS 2
#define DROP_ROUNDS 2       /* a served variant that turned slower: dropped at the end of the round it turned, or the next */

static sim_kernel kernels[16];
static unsigned nkernels;

static const sim_kernel *kernel_named(const char *name)
{
    for (unsigned i = 0; i < nkernels; i++)
        if (!strcmp(kernels[i].name, name))
            return &kernels[i];
    return NULL;
}

static drk_variant variant_of(uint32_t id)
{
    drk_variant v;
    drk_variant_from_id(&drk_space_ptx, id, &v);
    return v;
}

static const char *text_of(uint32_t id, char *buf, size_t n)
{
    drk_variant v = variant_of(id);
    return drk_variant_text(&drk_space_ptx, &v, buf, n);
}

/* ---- The space ---- */

static void test_space(void)
{
    const drk_space *s = &drk_space_ptx;
    CHECK(drk_space_check(s) == 0);
    CHECK(drk_space_size(s) == SIM_VARIANTS);
    for (uint32_t id = 0; id < SIM_VARIANTS; id++) {
        drk_variant v;
        CHECK(drk_variant_from_id(s, id, &v) == 0);
        CHECK(drk_variant_valid(s, &v));
        CHECK(drk_variant_id(s, &v) == id);
    }
    drk_variant v;
    CHECK(drk_variant_from_id(s, SIM_VARIANTS, &v) == -1 && drk_variant_is_default(&v));
    CHECK(drk_variant_id(s, &v) == 0);
    /* The recorded order: carveout fastest, regs slowest. */
    drk_variant last = {{10, 2, 1, 2, 3}};
    CHECK(drk_variant_id(s, &last) == SIM_VARIANTS - 1);
    drk_variant one = {{0, 0, 0, 0, 1}}, nbody = {{4, 2, 0, 1, 0}};
    CHECK(drk_variant_id(s, &one) == 1);
    CHECK(drk_variant_id(s, &nbody) == ((4 * 3 + 2) * 2 * 3 + 1) * 4);
    char buf[96];
    CHECK(!strcmp(drk_variant_text(s, &nbody, buf, sizeof buf), "regs=56 minctas=4 cache=1"));
    CHECK(!strcmp(drk_variant_text(s, &v, buf, sizeof buf), "default"));
    CHECK(drk_variant_value(s, &nbody, DRK_PTX_REGS) == 56 && drk_variant_value(s, &v, DRK_PTX_CACHE) == -1);
    CHECK(drk_variant_distance(s, &v, &nbody) == 7 && drk_variant_distance(s, &nbody, &nbody) == 0);
    drk_variant bad = {{11, 0, 0, 0, 0}}, stray = {{0, 0, 0, 0, 0, 1}};
    CHECK(!drk_variant_valid(s, &bad) && drk_variant_id(s, &bad) == DRK_VARIANT_NONE);
    CHECK(!drk_variant_valid(s, &stray));
    /* Another source declares its own: a cuBLASLt algorithm index. */
    drk_space algo = {.name = "cublaslt", .ndims = 1, .dims = {{"algo", 12, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}}};
    CHECK(drk_space_check(&algo) == 0 && drk_space_size(&algo) == 12);
    drk_space empty = {.name = "none"}, wide = {.name = "wide", .ndims = 1, .dims = {{"x", 17, {0}}}};
    CHECK(drk_space_check(&empty) == -1 && drk_space_check(&wide) == -1);
    drk_space huge = {.name = "huge", .ndims = 8, .dims = {{"a", 16, {0}}, {"b", 16, {0}}, {"c", 16, {0}}, {"d", 16, {0}},
                                                        {"e", 16, {0}}, {"f", 16, {0}}, {"g", 16, {0}}, {"h", 16, {0}}}};
    CHECK(drk_space_check(&huge) == -1); /* 2^32 points: one would be DRK_VARIANT_NONE */
    /* The scan order: a permutation, the register budget first. */
    CHECK(drk_space_scan(s, 0) == DRK_PTX_REGS && drk_space_scan(s, 2) == DRK_PTX_CARVEOUT);
    CHECK(drk_space_scan(&algo, 0) == 0);
    drk_space twice = drk_space_ptx;
    twice.scan[1] = DRK_PTX_REGS;
    CHECK(drk_space_check(&twice) == -1);
}

/* ---- Robust statistics ---- */

static void test_stats(void)
{
    float a[] = {1.05f, 0.95f, 1.0f, 1.10f, 0.90f};
    drk_ratio_stats s = drk_ratio_stats_of(a, 5);
    CHECK(s.n == 5 && fabs(s.median - 1.0) < 1e-6);
    CHECK(fabs(s.scale - 1.4826 * 0.05) < 1e-6);
    CHECK(fabs(s.se - 1.2533 * 1.4826 * 0.05 / sqrt(5)) < 1e-6);
    CHECK(fabs(s.lower - (1 - 2 * s.se)) < 1e-9 && fabs(s.upper - (1 + 2 * s.se)) < 1e-9);
    CHECK(a[0] == 1.05f); /* not reordered */
    /* One wild sample moves nothing much: robust. */
    float w[] = {1.01f, 1.02f, 1.00f, 9.0f, 1.01f};
    s = drk_ratio_stats_of(w, 5);
    CHECK(fabs(s.median - 1.01) < 1e-6 && s.scale < 0.02);
    /* Identical samples: the floor. Too few: unknown. None: the default's. */
    float same[] = {1.2f, 1.2f, 1.2f, 1.2f};
    s = drk_ratio_stats_of(same, 4);
    CHECK(s.se == DRK_EVO_SE_FLOOR && fabs(s.lower - (1.2 - 2 * DRK_EVO_SE_FLOOR)) < 1e-6);
    s = drk_ratio_stats_of(same, 2);
    CHECK(s.se == 1.0 && s.lower < 0);
    s = drk_ratio_stats_of(NULL, 0);
    CHECK(s.n == 0 && s.median == 1.0);
    /* More than a pool: evenly spaced ones. */
    static float many[1000];
    for (unsigned i = 0; i < 1000; i++)
        many[i] = 1.0f + (float)(i % 10) / 100;
    s = drk_ratio_stats_of(many, 1000);
    CHECK(s.n == 1000 && s.median > 1.03 && s.median < 1.06);
}

/* ---- The search's mechanics, on answers the test makes up ---- */

static void answer(drk_evolution *e, const drk_variant *v, float speedup, unsigned n)
{
    float s[16];
    for (unsigned i = 0; i < n; i++)
        s[i] = speedup * (1.0f + 0.002f * (float)((int)i - (int)n / 2));
    drk_evolution_record(e, v, s, n);
}

static void test_budget(void)
{
    /* Bounded: one fixed struct a (kernel, shape class). */
    printf("sizeof(drk_evolution) = %zu bytes\n", sizeof(drk_evolution));
    CHECK(sizeof(drk_evolution) < 8192);
    drk_evolution e;
    drk_variant c[8];
    /* Nothing granted: nothing proposed; the default unknown: neither. */
    drk_evolution_init(&e, &drk_space_ptx, 1, NULL);
    drk_evolution_begin_round(&e, 0, 1000, 5);
    CHECK(drk_evolution_next(&e, c, 8) == 0);
    drk_evolution_end_round(&e);
    drk_evolution_begin_round(&e, 1e9, 0, 5);
    CHECK(drk_evolution_next(&e, c, 8) == 0);
    drk_evolution_end_round(&e);
    /* Exactly two trials' worth (5 launches at 1000 ns): two. */
    drk_evolution_init(&e, &drk_space_ptx, 1, NULL);
    drk_evolution_begin_round(&e, 10000, 1000, 5);
    CHECK(drk_evolution_next(&e, c, 8) == 2);
    CHECK(drk_evolution_next(&e, c, 8) == 0);
    drk_evolution_end_round(&e);
    /* Unproposed ones come back first next round, in the same order; half a
     * trial a round adds up to one every second round. */
    drk_evolution_init(&e, &drk_space_ptx, 1, NULL);
    drk_variant first[8];
    drk_evolution_begin_round(&e, 2500, 1000, 5);
    CHECK(drk_evolution_next(&e, first, 8) == 0);
    drk_evolution_end_round(&e);
    drk_evolution_begin_round(&e, 2500, 1000, 5);
    CHECK(drk_evolution_next(&e, c, 8) == 1);
    CHECK(drk_variant_id(&drk_space_ptx, &c[0]) == 36 * 2); /* regs=32: the register budget first */
    answer(&e, &c[0], 1.0f, 5);
    drk_evolution_end_round(&e);
    CHECK(e.spent_ns > 4900 && e.spent_ns < 5100 && e.granted_ns == 5000);
    /* Idle rounds carry at most 4 rounds of grant. */
    drk_evolution_init(&e, &drk_space_ptx, 1, NULL);
    for (int i = 0; i < 10; i++) {
        drk_evolution_begin_round(&e, 20000, 1000, 5);
        drk_evolution_end_round(&e);
    }
    drk_evolution_begin_round(&e, 20000, 1000, 5);
    CHECK(e.credit_ns == 80000);
    CHECK(drk_evolution_next(&e, c, 8) == DRK_EVO_TRIALS); /* 16 trials' worth; a round holds 8 */
    /* An overrun is paid from the next round: a variant 4x slower than
     * estimated costs 4 trials. */
    drk_evolution_init(&e, &drk_space_ptx, 1, NULL);
    drk_evolution_begin_round(&e, 5000, 1000, 5);
    CHECK(drk_evolution_next(&e, c, 8) == 1);
    answer(&e, &c[0], 0.25f, 5);
    drk_evolution_end_round(&e);
    drk_evolution_begin_round(&e, 5000, 1000, 5);
    CHECK(drk_evolution_next(&e, c, 8) == 0);
    drk_evolution_end_round(&e);
}

static void test_reject_and_order(void)
{
    drk_evolution e;
    drk_evolution_init(&e, &drk_space_ptx, 7, NULL);
    drk_variant c[8], seen[64];
    unsigned nseen = 0;
    /* Every proposal rejected: none comes twice. */
    for (int round = 0; round < 6; round++) {
        drk_evolution_begin_round(&e, 1e6, 1000, 5);
        unsigned n = drk_evolution_next(&e, c, 8);
        for (unsigned i = 0; i < n; i++) {
            for (unsigned j = 0; j < nseen; j++)
                CHECK(!drk_variant_equal(&seen[j], &c[i]));
            if (nseen < 64)
                seen[nseen++] = c[i];
            CHECK(!drk_variant_is_default(&c[i]));
            drk_evolution_reject(&e, &c[i]);
        }
        drk_evolution_end_round(&e);
    }
    CHECK(nseen >= 18); /* every coordinate line through the default */
    CHECK(e.state == DRK_EVO_SETTLED);
    drk_variant v;
    CHECK(!drk_evolution_serving(&e, &v));
    /* The default is never a trial; recording it changes nothing. */
    drk_evolution_init(&e, &drk_space_ptx, 7, NULL);
    drk_evolution_begin_round(&e, 1e6, 1000, 5);
    drk_variant def = {{0}};
    answer(&e, &def, 1.0f, 5);
    CHECK(e.trials == 0 && e.count == 0);
    drk_evolution_end_round(&e);
}

/* A proposal found to build another's code: never proposed again, its place
 * in the round goes to the next candidate, and nothing is charged. */
static void test_same_code(void)
{
    drk_evolution e;
    drk_evolution_init(&e, &drk_space_ptx, 7, NULL);
    drk_evolution_begin_round(&e, 1e9, 1000, 5);
    drk_variant c[8], more[8];
    unsigned n = drk_evolution_next(&e, c, 8);
    CHECK(n == DRK_EVO_TRIALS);
    CHECK(drk_evolution_next(&e, more, 8) == 0); /* the round's trials are all proposed */
    double credit = e.credit_ns;
    for (unsigned i = 0; i < 3; i++)
        drk_evolution_same(&e, &c[i]);
    CHECK(e.sames == 3 && e.npending == n - 3 && e.credit_ns == credit && e.trials == 0);
    unsigned m = drk_evolution_next(&e, more, 8);
    CHECK(m == 3);
    for (unsigned i = 0; i < m; i++)
        for (unsigned j = 0; j < n; j++)
            CHECK(!drk_variant_equal(&more[i], &c[j]));
    drk_evolution_same(&e, &c[0]); /* twice: counted once */
    CHECK(e.sames == 3);
    drk_evolution_end_round(&e);
    /* Never again, over later rounds. */
    for (int round = 0; round < 6; round++) {
        drk_evolution_begin_round(&e, 1e9, 1000, 5);
        while ((m = drk_evolution_next(&e, more, 8)) > 0)
            for (unsigned i = 0; i < m; i++) {
                for (unsigned j = 0; j < 3; j++)
                    CHECK(!drk_variant_equal(&more[i], &c[j]));
                answer(&e, &more[i], 1.0f, 5);
            }
        drk_evolution_end_round(&e);
    }
}

/* The same seed and answers: the same proposals; another seed: others. */
static unsigned proposals(uint64_t seed, uint32_t *ids, unsigned max)
{
    drk_evolution e;
    drk_evolution_init(&e, &drk_space_ptx, seed, NULL);
    unsigned n = 0;
    for (int round = 0; round < 8; round++) {
        drk_evolution_begin_round(&e, 1e6, 1000, 5);
        drk_variant c[8];
        unsigned got = drk_evolution_next(&e, c, 8);
        for (unsigned i = 0; i < got; i++) {
            uint32_t id = drk_variant_id(&drk_space_ptx, &c[i]);
            if (n < max)
                ids[n++] = id;
            answer(&e, &c[i], 1.0f + (float)(id % 7) / 1000, 5);
        }
        drk_evolution_end_round(&e);
    }
    return n;
}

static void test_determinism(void)
{
    uint32_t a[128], b[128], c[128];
    unsigned na = proposals(42, a, 128), nb = proposals(42, b, 128), nc = proposals(43, c, 128);
    CHECK(na == nb && na > 20 && memcmp(a, b, na * sizeof *a) == 0);
    CHECK(na != nc || memcmp(a, c, na * sizeof *a) != 0);
}

/* Temperature 0.2: a fifth of exploration slots are mutations, each 1 or 2
 * index steps from the center (here the start, the middle of the space:
 * the only variant faster than the default). */
static void test_temperature(void)
{
    drk_space big = {.name = "big", .ndims = 4, .dims = {{"a", 16, {0}}, {"b", 16, {0}}, {"c", 16, {0}}, {"d", 16, {0}}}};
    drk_variant mid = {{8, 8, 8, 8}};
    uint64_t mutations = 0, explorations = 0, far = 0;
    static unsigned char seen[1 << 16];
    for (uint64_t seed = 1; seed <= 40; seed++) {
        drk_evolution e;
        drk_evolution_init(&e, &big, seed, &mid);
        memset(seen, 0, sizeof seen);
        seen[drk_variant_id(&big, &mid)] = 1;
        for (int round = 0; round < 7; round++) { /* the 60 coordinate candidates last */
            drk_evolution_begin_round(&e, 1e9, 1000, 5);
            drk_variant c[8];
            unsigned n = drk_evolution_next(&e, c, 8);
            drk_variant center;
            drk_variant_from_id(&big, e.center, &center);
            for (unsigned i = 0; i < n; i++) {
                /* A first proposal is on a coordinate line through the
                 * center, or a mutation near it. */
                unsigned dims = 0, id = drk_variant_id(&big, &c[i]);
                for (unsigned d = 0; d < 4; d++)
                    dims += c[i].k[d] != center.k[d];
                if (!seen[id] && dims > 1 && drk_variant_distance(&big, &c[i], &center) > DRK_EVO_MUTATION_STEPS)
                    far++;
                seen[id] = 1;
                answer(&e, &c[i], drk_variant_equal(&c[i], &mid) ? 1.5f : 1.0f, 5);
            }
            drk_evolution_end_round(&e);
        }
        CHECK(e.center == drk_variant_id(&big, &mid));
        mutations += e.mutations;
        explorations += e.explorations;
    }
    double share = (double)mutations / (double)explorations;
    printf("temperature: %llu of %llu exploration slots were mutations (%.3f; T = %.2f)\n",
           (unsigned long long)mutations, (unsigned long long)explorations, share, DRK_EVO_TEMPERATURE);
    CHECK(share > DRK_EVO_TEMPERATURE - 0.03 && share < DRK_EVO_TEMPERATURE + 0.03);
    CHECK(far == 0);
}

/* The rules on made-up answers: trust after two trials, a switch to a
 * clearly better one, a drop when the served one turns slower. */
static void test_rules(void)
{
    drk_space algo = {.name = "cublaslt", .ndims = 1, .dims = {{"algo", 6, {0, 1, 2, 3, 4, 5}}}};
    const float truth[6] = {1.0f, 0.97f, 1.004f, 1.25f, 0.80f, 1.30f};
    drk_evolution e;
    drk_evolution_init(&e, &algo, 3, NULL);
    drk_evo_decision d = {0};
    unsigned trusted_round = 0, dropped_round = 0;
    for (unsigned round = 1; round <= 14; round++) {
        drk_evolution_begin_round(&e, 1e6, 1000, 5);
        drk_variant c[8];
        unsigned n = drk_evolution_next(&e, c, 2); /* two trials a round */
        for (unsigned i = 0; i < n; i++) {
            float t = truth[c[i].k[0]];
            if (round >= 9 && c[i].k[0] == 5)
                t = 0.9f; /* algo 5 turned slower */
            answer(&e, &c[i], t, 5);
        }
        d = drk_evolution_end_round(&e);
        if (d.serve && !trusted_round)
            trusted_round = round;
        if (d.dropped)
            dropped_round = round;
        if (round == 8)
            CHECK(d.serve && d.variant.k[0] == 5);
    }
    CHECK(trusted_round >= 2 && trusted_round <= 4);
    CHECK(dropped_round == 9);
    CHECK(e.drops == 1);
    /* After the drop: algo 5 never again; 3 is the best left. */
    CHECK(d.serve && d.variant.k[0] == 3);
}

/* What a budget may spend ahead for (drk_evolution_promise): nothing
 * before a trial, nor for a variant within noise or slower; a variant
 * faster beyond noise gives its range's lower end over what runs; what
 * runs is never its own promise, and a rejected variant is none. */
static void test_promise(void)
{
    drk_space algo = {.name = "algo", .ndims = 1, .dims = {{"algo", 4, {0, 1, 2, 3}}}};
    drk_evolution e;
    drk_evolution_init(&e, &algo, 5, NULL);
    drk_variant v1 = {{1}}, v2 = {{2}}, v3 = {{3}};
    CHECK(drk_evolution_promise(&e, NULL) == 1.0);
    drk_evolution_begin_round(&e, 1e6, 1000, 5);
    answer(&e, &v1, 1.005f, 5); /* within the margin */
    answer(&e, &v2, 0.90f, 5);  /* slower */
    CHECK(drk_evolution_promise(&e, NULL) == 1.0);
    answer(&e, &v3, 1.20f, 5);
    double p = drk_evolution_promise(&e, NULL);
    drk_ratio_stats st = drk_evolution_stats(&e, &v3);
    CHECK(p > 1.1 && p < 1.2 && fabs(p - st.lower) < 1e-9);
    /* What runs is v3: nothing beyond it in sight. */
    CHECK(drk_evolution_promise(&e, &v3) == 1.0);
    /* What runs is v1 (1.005x): v3's lower end over v1's median. */
    double p1 = drk_evolution_promise(&e, &v1);
    CHECK(p1 > 1.1 && fabs(p1 - st.lower / drk_evolution_stats(&e, &v1).median) < 1e-9);
    drk_evolution_reject(&e, &v3);
    CHECK(drk_evolution_promise(&e, NULL) == 1.0);
}

/* A served variant whose trials fall but stay surely faster than the
 * default keeps serving (on the H200 an n-body variant's trials fell from
 * 2.0x to ~1.5x once it served); one that falls to about the default is
 * dropped by the change and the search starts again. */
static void run_fall(float fall, unsigned *drops, int *last_served)
{
    drk_space algo = {.name = "cublaslt", .ndims = 1, .dims = {{"algo", 6, {0, 1, 2, 3, 4, 5}}}};
    const float truth[6] = {1.0f, 0.97f, 1.004f, 1.25f, 0.80f, 2.0f};
    drk_evolution e;
    drk_evolution_init(&e, &algo, 3, NULL);
    drk_evo_decision d = {0};
    int served_8 = -1;
    for (unsigned round = 1; round <= 16; round++) {
        drk_evolution_begin_round(&e, 1e6, 1000, 5);
        drk_variant c[8];
        unsigned n = drk_evolution_next(&e, c, 2);
        for (unsigned i = 0; i < n; i++)
            answer(&e, &c[i], round >= 9 && c[i].k[0] == 5 ? fall : truth[c[i].k[0]], 5);
        d = drk_evolution_end_round(&e);
        if (round == 8)
            served_8 = d.serve ? (int)d.variant.k[0] : -1;
    }
    CHECK(served_8 == 5);
    *drops = e.drops;
    *last_served = d.serve ? (int)d.variant.k[0] : -1;
}

/* As the H200's replays measured the n-body (2026-12-03): the winner 5.8x
 * as a candidate (timed against the original's runs), and in pairs once it
 * served, which a shared GPU spreads (about 1.5x here, with its default
 * faster than 1 in one sample of five). From round `fall` on (0: never) it
 * measures 1.005x: the world changed. The rounds after the first served
 * variant that served the default go to *to_default. */
static void run_regime(unsigned fall, unsigned *drops, int *last_served, unsigned *to_default)
{
    drk_space algo = {.name = "cublaslt", .ndims = 1, .dims = {{"algo", 6, {0, 1, 2, 3, 4, 5}}}};
    const float truth[6] = {1.0f, 0.97f, 1.004f, 1.25f, 0.80f, 5.8f};
    static const float paired[5] = {0.9f, 1.2f, 1.5f, 2.0f, 2.6f};
    drk_evolution e;
    drk_evolution_init(&e, &algo, 3, NULL);
    drk_evo_decision d = {0};
    int ever = 0;
    *to_default = 0;
    for (unsigned round = 1; round <= 16; round++) {
        drk_evolution_begin_round(&e, 1e6, 1000, 5);
        drk_variant c[8];
        unsigned n = drk_evolution_next(&e, c, 2);
        int serving5 = d.serve && d.variant.k[0] == 5;
        for (unsigned i = 0; i < n; i++) {
            if (c[i].k[0] == 5 && fall && round >= fall)
                answer(&e, &c[i], 1.005f, 5);
            else if (c[i].k[0] == 5 && serving5)
                drk_evolution_record(&e, &c[i], paired, 5);
            else
                answer(&e, &c[i], truth[c[i].k[0]], 5);
        }
        d = drk_evolution_end_round(&e);
        ever |= d.serve;
        *to_default += ever && !d.serve;
    }
    *drops = e.drops;
    *last_served = d.serve ? (int)d.variant.k[0] : -1;
}

static void test_served_falls(void)
{
    unsigned drops;
    int served;
    run_fall(1.5f, &drops, &served);
    CHECK(drops == 0 && served == 5);
    run_fall(1.005f, &drops, &served);
    CHECK(drops >= 1 && served == 3);
    /* Measured another way once it serves: held against its own pairs, not
     * its candidate's 5.8x, it is never dropped, the search never starts
     * again and the default never serves (before: dropped in the first
     * round it served, the memory cleared, the default served). Where its
     * pairs are not surely faster the other trusted variant serves, until
     * it is measured as a candidate again. Measured 1.005x from round 12:
     * the other serves at the end. */
    unsigned to_default;
    run_regime(0, &drops, &served, &to_default);
    CHECK(drops == 0 && to_default == 0 && (served == 5 || served == 3));
    run_regime(12, &drops, &served, &to_default);
    CHECK(to_default == 0 && served == 3);
}

/* drk_evolution_served_due says whether a round measures what serves,
 * before anything is proposed: the engine proves the search's choice on
 * a capture that does not (on a tight budget, every few rounds). */
static void test_served_due(void)
{
    drk_evolution e;
    drk_variant c[8], served;
    drk_evolution_init(&e, &drk_space_ptx, 3, NULL);
    CHECK(!drk_evolution_served_due(&e)); /* no round open */
    /* Two rounds of ample budget: regs=32 1.3x (trusted once measured
     * twice), every other proposal 1.0x. */
    for (int r = 0; r < 2; r++) {
        drk_evolution_begin_round(&e, 1e6, 1000, 5);
        CHECK(!drk_evolution_served_due(&e));
        unsigned n = drk_evolution_next(&e, c, 8);
        for (unsigned i = 0; i < n; i++)
            answer(&e, &c[i], drk_variant_id(&drk_space_ptx, &c[i]) == 36 * 2 ? 1.3f : 1.0f, 5);
        drk_evolution_end_round(&e);
    }
    CHECK(drk_evolution_serving(&e, &served) && drk_variant_id(&drk_space_ptx, &served) == 36 * 2);
    CHECK(e.state == DRK_EVO_SEARCHING);
    /* A budget that pays for one trial a round, the carry spent: not due
     * the rounds after it was measured, and the round's proposal is
     * another (exploration goes on). */
    for (int r = 0; r < DRK_EVO_SERVED_EVERY - 1; r++) {
        drk_evolution_begin_round(&e, 5000, 1000, 5);
        e.credit_ns = 5000;
        CHECK(!drk_evolution_served_due(&e));
        CHECK(drk_evolution_next(&e, c, 8) == 1 &&
              drk_variant_id(&drk_space_ptx, &c[0]) != drk_variant_id(&drk_space_ptx, &served));
        answer(&e, &c[0], 1.0f, 5);
        drk_evolution_end_round(&e);
    }
    CHECK(e.state == DRK_EVO_SEARCHING);
    /* Due, but the budget does not pay for it this round: not measured. */
    drk_evolution_begin_round(&e, 0, 1000, 5);
    e.credit_ns = 1000;
    CHECK(!drk_evolution_served_due(&e));
    CHECK(drk_evolution_next(&e, c, 8) == 0);
    drk_evolution_end_round(&e);
    /* DRK_EVO_SERVED_EVERY rounds on, paid for: due, and the first proposal
     * is what serves; asked once proposals were made, too late: 0. */
    drk_evolution_begin_round(&e, 5000, 1000, 5);
    e.credit_ns = 5000;
    CHECK(drk_evolution_served_due(&e));
    CHECK(drk_evolution_next(&e, c, 8) == 1 &&
          drk_variant_id(&drk_space_ptx, &c[0]) == drk_variant_id(&drk_space_ptx, &served));
    CHECK(!drk_evolution_served_due(&e));
    drk_evolution_end_round(&e);
}

/* ---- The recorded spaces ---- */

/* What a kernel's runs over SEEDS seeds came to. */
typedef struct row {
    unsigned within[SEEDS + 1];  /* per seed: the round from which served is within 2% of the best */
    unsigned trials_to[SEEDS + 1]; /* per seed: trials run by then */
    unsigned on_time;            /* seeds within 2% by round WITHIN_ROUNDS */
    unsigned late;               /* seeds never within 2% to the end */
    double final_seed1, final_min, vs_best_max, lowest, trials_mean, share_max;
    uint32_t served_seed1;
} row;

static row rows[2][16];
static const double sigmas[2] = {0.01, 0.03};
/* At 3% noise a trial of 5 launches measures a ratio to +/-2.4%: telling
 * matmul_naive's 1.06x plateau from its 1.10x corner takes ~25 samples of
 * each, now and then longer than 10 rounds. So at 3%: most seeds
 * (ON_TIME_3) on time and every one by the end; at 1%: every seed on time. */
#define ON_TIME_3 (SEEDS * 8 / 10)

static void row_add(row *w, uint64_t seed, const sim_result *r)
{
    double fin = r->speedup[ROUNDS], share = r->spent_ns / r->gpu_ns;
    w->within[seed] = r->within;
    w->trials_to[seed] = r->within <= ROUNDS ? (unsigned)r->trials_at[r->within] : UINT32_MAX;
    w->on_time += r->within <= WITHIN_ROUNDS;
    w->late += r->within > ROUNDS;
    if (seed == 1) {
        w->final_seed1 = fin;
        w->served_seed1 = r->served[ROUNDS];
    }
    w->final_min = seed == 1 || fin < w->final_min ? fin : w->final_min;
    w->vs_best_max = r->vs_best[ROUNDS] > w->vs_best_max ? r->vs_best[ROUNDS] : w->vs_best_max;
    w->lowest = seed == 1 || r->worst_speedup < w->lowest ? r->worst_speedup : w->lowest;
    w->share_max = share > w->share_max ? share : w->share_max;
    w->trials_mean += (double)r->trials / SEEDS;
}

/* The checks every search on a recorded space must pass. */
static void row_check(const row *w, const char *name, double sigma)
{
    int ok = sigma < 0.02 ? w->on_time == SEEDS : w->on_time >= ON_TIME_3 && w->late == 0;
    CHECK(ok);
    CHECK(w->lowest >= 0.99);
    CHECK(w->share_max <= SIM_BUDGET * 1.02);
    if (!ok || w->lowest < 0.99 || w->share_max > SIM_BUDGET * 1.02)
        fprintf(stderr, "%s sigma %.2f: %u of %d seeds within 2%% by round %d, %u never; lowest served %.4fx, budget %.4f\n",
                name, sigma, w->on_time, SEEDS, WITHIN_ROUNDS, w->late, w->lowest, w->share_max);
}

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* The median and the worst of per-seed values over the seeds. */
static void median_worst(const unsigned *per_seed, unsigned *median, unsigned *worst)
{
    unsigned v[SEEDS];
    memcpy(v, per_seed + 1, sizeof v);
    qsort(v, SEEDS, sizeof *v, cmp_unsigned);
    *median = v[SEEDS / 2];
    *worst = v[SEEDS - 1];
}

/* The median and the worst round to within 2% over the seeds. */
static void rounds_of(const row *w, unsigned *median, unsigned *worst)
{
    median_worst(w->within, median, worst);
}

static void print_round(unsigned r)
{
    if (r > ROUNDS)
        printf("  never");
    else
        printf(" %6u", r);
}

/* SEEDS runs of kernel `ki` as the engine pays (timing `mode`, `wait_ns`
 * charged a wait and `load_ns` a first load) into *w: never a loss served
 * in any. The most GPU share a run spent. */
static double engine_seeds(unsigned ki, double sigma, int mode, double wait_ns, double load_ns, unsigned start_rounds,
                           int start_credit, int ahead, row *w)
{
    memset(w, 0, sizeof *w);
    double share = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        sim_kernel k = kernels[ki];
        sim_opts o = {.sigma = sigma, .seed = seed, .rounds = ROUNDS, .engine = mode, .wait_ns = wait_ns,
                      .load_ns = load_ns, .start_rounds = start_rounds, .start_credit = start_credit,
                      .ahead_rounds = ahead ? DRK_EVO_AHEAD_ROUNDS : 0, .ahead_payback = DRK_EVO_AHEAD_PAYBACK};
        static sim_result r;
        sim_run(&k, &o, &r);
        row_add(w, seed, &r);
        double s = r.engine_ns / r.gpu_ns;
        share = s > share ? s : share;
        CHECK(r.worst_speedup >= 0.99);
    }
    return share;
}

static void test_recorded(void)
{
    for (unsigned si = 0; si < 2; si++) {
        double sigma = sigmas[si];
        for (unsigned ki = 0; ki < nkernels; ki++) {
            row *w = &rows[si][ki];
            memset(w, 0, sizeof *w);
            for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                sim_kernel k = kernels[ki];
                sim_opts o = {.sigma = sigma, .seed = seed, .rounds = ROUNDS};
                static sim_result r;
                sim_run(&k, &o, &r);
                row_add(w, seed, &r);
            }
            row_check(w, kernels[ki].name, sigma);
        }
        printf("\nrecorded spaces (H200), noise sigma %.0f%% a launch, %d seeds of %d rounds; a round's budget: 2%% of its GPU "
               "time, %d trials of %d launches at the default's speed\n"
               "within 2%% of the best: seeds by round %d, median and worst round, median trials by then; at the end: "
               "speedup (seed 1, lowest), served/best (worst); lowest speedup ever served; trials (mean), GPU share (most)\n",
               sigma * 100, SEEDS, ROUNDS, (int)(SIM_BUDGET * SIM_ROUND_LAUNCHES / SIM_TRIAL_LAUNCHES), SIM_TRIAL_LAUNCHES,
               WITHIN_ROUNDS);
        printf("%-16s %8s %8s %7s | %8s %6s %6s %6s | %7s %7s %7s %7s | %6s %6s | %s\n", "kernel", "default", "best", "best x",
               "<=10 rds", "median", "worst", "trials", "final x", "min", "vs best", "lowest", "all", "budget",
               "served at the end (seed 1)");
        for (unsigned ki = 0; ki < nkernels; ki++) {
            const row *w = &rows[si][ki];
            const sim_kernel *k = &kernels[ki];
            unsigned median, worst;
            rounds_of(w, &median, &worst);
            char buf[96];
            printf("%-16s %8.4f %8.4f %6.3fx | %5u/%-2d", k->name, k->ms[0], k->best_ms, k->ms[0] / k->best_ms, w->on_time,
                   SEEDS);
            print_round(median);
            print_round(worst);
            unsigned tmed, tworst;
            median_worst(w->trials_to, &tmed, &tworst);
            if (tmed == UINT32_MAX)
                printf("  never");
            else
                printf(" %6u", tmed);
            printf(" | %6.3fx %6.3fx %7.4f %6.3fx | %6.1f %5.2f%% | %s\n", w->final_seed1, w->final_min, w->vs_best_max,
                   w->lowest, w->trials_mean, 100 * w->share_max, text_of(w->served_seed1, buf, sizeof buf));
        }
    }
}

/* A new shape class of a solved kernel: the predictor starts it at that
 * kernel's best; within 2% in at most 2 rounds. The new shape's space: the
 * recorded one 3.7x slower (a bigger problem), each variant moved by 0.1%. */
static void test_new_shape(void)
{
    printf("\nnew shape of a solved kernel (grid 4x: another class), started at its best; rounds to within 2%%, worst of %d seeds\n",
           SEEDS);
    for (unsigned si = 0; si < 2; si++)
        for (unsigned ki = 0; ki < nkernels; ki++) {
            const sim_kernel *k = &kernels[ki];
            uint32_t grid2[3] = {k->grid[0] * 4, k->grid[1], k->grid[2]};
            uint64_t cls = drk_shape_class(k->grid, k->block, 0), cls2 = drk_shape_class(grid2, k->block, 0);
            CHECK(cls != cls2);
            unsigned worst = 0;
            double lowest = 1e9;
            int started = 0;
            for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                static sim_result r;
                sim_kernel a = *k;
                sim_opts o = {.sigma = sigmas[si], .seed = seed, .rounds = ROUNDS};
                sim_run(&a, &o, &r);
                drk_predictor p;
                drk_predictor_init(&p);
                drk_variant best = variant_of(r.served[ROUNDS]);
                drk_predictor_learn(&p, ki, cls, &k->f, &best, r.speedup[ROUNDS]);
                drk_variant start;
                CHECK(drk_predictor_guess(&p, ki, cls2, &k->f, &start, NULL, NULL) == DRK_PREDICT_SAME_KERNEL);
                CHECK(drk_variant_equal(&start, &best));
                sim_kernel b = *k;
                uint64_t z = seed * 977 + ki;
                for (unsigned v = 0; v < SIM_VARIANTS; v++) {
                    z = z * 6364136223846793005ull + 1442695040888963407ull;
                    b.ms[v] *= 3.7 * (1 + 0.001 * ((double)(z >> 40) / (double)(1u << 24) - 0.5));
                }
                sim_best(&b);
                sim_opts o2 = {.sigma = sigmas[si], .seed = seed + 1000, .rounds = ROUNDS, .start = &start};
                sim_run(&b, &o2, &r);
                if (!drk_variant_is_default(&start)) {
                    started++;
                    if (r.within > worst)
                        worst = r.within;
                }
                if (r.worst_speedup < lowest)
                    lowest = r.worst_speedup;
                CHECK(r.worst_speedup >= 0.99);
                if (!drk_variant_is_default(&start) && k->ms[0] / k->best_ms > 1.05) {
                    if (r.within > NEW_SHAPE_ROUNDS) {
                        char buf[96];
                        fprintf(stderr, "new shape: %s sigma %.2f seed %llu started at %s (%.3fx there): within 2%% from round %u\n",
                                k->name, sigmas[si], (unsigned long long)seed,
                                drk_variant_text(&drk_space_ptx, &start, buf, sizeof buf),
                                b.ms[0] / b.ms[drk_variant_id(&drk_space_ptx, &start)], r.within);
                    }
                    CHECK(r.within <= NEW_SHAPE_ROUNDS);
                }
            }
            if (started)
                printf("  sigma %.0f%% %-16s started at a variant in %2d of %d seeds: within 2%% by round %u (worst); lowest served %.3fx\n",
                       sigmas[si] * 100, k->name, started, SEEDS, worst, lowest);
        }
}

/* Leave one out: each kernel guessed from the other eleven (what each
 * serves at 1%, seed 1), then searched from that guess. */
static void test_predictor(void)
{
    drk_kernel_features a = {32, 0, 256, 20}, b = {40, 0, 256, 20}, c = {64, 0, 256, 20};
    CHECK(fabs(drk_kernel_distance(&a, &b) - 2 * log2(40.0 / 32)) < 1e-4);
    CHECK(fabs(drk_kernel_distance(&a, &c) - 2.0) < 1e-4);
    CHECK(drk_kernel_distance(&a, &a) == 0);

    printf("\npredictor, leave one out (from what the other eleven serve at 1%%, seed 1); then searched from the guess:\n"
           "seeds within 2%% by round %d, median and worst rounds, lowest speedup served\n", WITHIN_ROUNDS);
    for (unsigned ki = 0; ki < nkernels; ki++) {
        drk_predictor p;
        drk_predictor_init(&p);
        for (unsigned kj = 0; kj < nkernels; kj++) {
            if (kj == ki)
                continue;
            const sim_kernel *o = &kernels[kj];
            drk_variant best = variant_of(rows[0][kj].served_seed1);
            drk_predictor_learn(&p, kj, drk_shape_class(o->grid, o->block, 0), &o->f, &best, rows[0][kj].final_seed1);
        }
        const sim_kernel *k = &kernels[ki];
        drk_variant guess;
        double dist = 0;
        uint64_t from = 0;
        drk_predict_source src =
            drk_predictor_guess(&p, ki, drk_shape_class(k->grid, k->block, 0), &k->f, &guess, &dist, &from);
        uint32_t gid = drk_variant_id(&drk_space_ptx, &guess);
        char buf[96];
        printf("  %-16s %-8s %-16s d %.2f  guess %-30s (%.3fx here) ->", k->name,
               src == DRK_PREDICT_SIMILAR ? "similar" : src == DRK_PREDICT_SAME_KERNEL ? "same" : "none",
               src == DRK_PREDICT_NONE ? "-" : kernels[from].name, dist, text_of(gid, buf, sizeof buf), k->ms[0] / k->ms[gid]);
        for (unsigned si = 0; si < 2; si++) {
            static row w;
            memset(&w, 0, sizeof w);
            for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                static sim_result r;
                sim_kernel x = *k;
                sim_opts o = {.sigma = sigmas[si], .seed = seed, .rounds = ROUNDS, .start = &guess};
                sim_run(&x, &o, &r);
                row_add(&w, seed, &r);
            }
            row_check(&w, k->name, sigmas[si]);
            unsigned median, worst;
            rounds_of(&w, &median, &worst);
            printf("  %.0f%%: %2u/%d, rounds", sigmas[si] * 100, w.on_time, SEEDS);
            print_round(median);
            print_round(worst);
            printf(", lowest %.3fx", w.lowest);
        }
        printf("\n");
    }
    /* The same kernel's nearest class wins over a similar kernel; the
     * farthest similar kernel allowed is DRK_PREDICT_NEAR away. */
    drk_predictor p;
    drk_predictor_init(&p);
    uint32_t g1[3] = {64, 1, 1}, g2[3] = {4096, 1, 1}, g3[3] = {128, 1, 1}, blk[3] = {256, 1, 1};
    drk_variant v1 = {{4, 0, 0, 1, 0}}, v2 = {{8, 0, 0, 0, 0}}, v3 = {{1, 0, 0, 0, 0}}, out;
    drk_predictor_learn(&p, 1, drk_shape_class(g1, blk, 0), &a, &v1, 2.0);
    drk_predictor_learn(&p, 1, drk_shape_class(g2, blk, 0), &a, &v2, 1.5);
    drk_predictor_learn(&p, 2, drk_shape_class(g3, blk, 0), &a, &v3, 3.0);
    CHECK(drk_predictor_guess(&p, 1, drk_shape_class(g3, blk, 0), &a, &out, NULL, NULL) == DRK_PREDICT_SAME_KERNEL);
    CHECK(drk_variant_equal(&out, &v1));
    CHECK(drk_predictor_guess(&p, 3, drk_shape_class(g3, blk, 0), &b, &out, NULL, NULL) == DRK_PREDICT_SIMILAR);
    CHECK(drk_variant_equal(&out, &v3)); /* ties between kernel 1 and 2: the one that gained most */
    CHECK(drk_predictor_guess(&p, 3, drk_shape_class(g3, blk, 0), &c, &out, NULL, NULL) == DRK_PREDICT_NONE);
    CHECK(drk_variant_is_default(&out));
    /* Learned again: replaced, not added. */
    drk_predictor_learn(&p, 1, drk_shape_class(g1, blk, 0), &a, NULL, 1.0);
    unsigned used = 0;
    for (unsigned i = 0; i < DRK_PREDICT_ENTRIES; i++)
        used += (unsigned)p.e[i].used;
    CHECK(used == 3);
    /* Full: the oldest goes. */
    for (uint64_t kk = 10; kk < 10 + DRK_PREDICT_ENTRIES; kk++)
        drk_predictor_learn(&p, kk, 0, &a, NULL, 1.0);
    CHECK(drk_predictor_guess(&p, 2, 1, &c, &out, NULL, NULL) == DRK_PREDICT_NONE);
}

/* Planted: a plateau whose best point is a dead end. The n-body's space
 * rewritten as an H100 run suggested (2026-12-06): the cache line wins
 * only beside carveout 50 or 100 (regs=56 cache=1 carveout=50 is the
 * recorded best), and regs=56 carveout=25 alone runs 1.5% faster than
 * regs=56: a center that, once reached, has nothing better one step away,
 * the win two steps off. Plateau hops (search.h) find it: at 1% noise every
 * seed within 2% by round WITHIN_ROUNDS, at 3% most (ON_TIME_3) and every
 * one by the end, none served below 0.99x. Without hops (DRK_EVO_HOPS 0),
 * 4 of 20 seeds at 1% and 8 at 3% got there at all. */
static void test_plateau_hop(void)
{
    const sim_kernel *k0 = kernel_named("nbody");
    CHECK(k0 != NULL);
    if (!k0)
        return;
    sim_kernel trap = *k0;
    const drk_space *s = &drk_space_ptx;
    drk_variant r56 = {{4, 0, 0, 0, 0}}, dead_end = {{4, 0, 0, 0, 1}};
    double plain = trap.ms[drk_variant_id(s, &r56)];
    for (uint32_t id = 0; id < SIM_VARIANTS; id++) {
        drk_variant v = variant_of(id);
        if (v.k[DRK_PTX_REGS] == 4 && v.k[DRK_PTX_CACHE] == 1 && v.k[DRK_PTX_CARVEOUT] <= 1)
            trap.ms[id] = plain; /* no cache win beside the default carveout or 25 */
    }
    trap.ms[drk_variant_id(s, &dead_end)] = plain / 1.015;
    sim_best(&trap);
    drk_variant best = variant_of(trap.best_id);
    CHECK(best.k[DRK_PTX_CACHE] == 1 && best.k[DRK_PTX_CARVEOUT] >= 2);
    printf("\nplanted plateau (the n-body; cache=1 wins only beside carveout 50/100, regs=56 carveout=25 a dead end "
           "1.5%% up): within 2%% of the best (%.3fx), median and worst round of %d seeds; plateau hops (mean)\n",
           trap.ms[0] / trap.best_ms, SEEDS);
    for (unsigned si = 0; si < 2; si++) {
        unsigned within[SEEDS], on_time = 0, never = 0;
        double hops = 0;
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
            static sim_result r;
            sim_kernel k = trap;
            sim_opts o = {.sigma = sigmas[si], .seed = seed, .rounds = ROUNDS, .engine = SIM_ENGINE,
                          .ahead_rounds = DRK_EVO_AHEAD_ROUNDS, .ahead_payback = DRK_EVO_AHEAD_PAYBACK};
            sim_run(&k, &o, &r);
            CHECK(r.worst_speedup >= 0.99);
            within[seed - 1] = r.within;
            on_time += r.within <= WITHIN_ROUNDS;
            never += r.within > ROUNDS;
            hops += (double)r.e.hops / SEEDS;
        }
        qsort(within, SEEDS, sizeof *within, cmp_unsigned);
        printf("  sigma %.0f%%", sigmas[si] * 100);
        print_round(within[SEEDS / 2]);
        print_round(within[SEEDS - 1]);
        printf("  %.2f\n", hops);
        int ok = si == 0 ? on_time == SEEDS : on_time >= ON_TIME_3 && never == 0;
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "planted plateau sigma %.2f: %u of %d seeds within 2%% by round %d, %u never\n", sigmas[si],
                    on_time, SEEDS, WITHIN_ROUNDS, never);
    }
}

/* Planted: the served variant's and the default's recorded times swap at
 * round 16 (the variant is now the slow one): dropped (or left for another
 * trusted one) within DROP_ROUNDS, never served again, and what is served
 * after is not slower than 0.99x. */
static void test_planted_drop(void)
{
    const char *names[] = {"nbody", "matmul_naive"};
    for (unsigned si = 0; si < 2; si++)
        for (unsigned ni = 0; ni < 2; ni++) {
            const sim_kernel *k0 = kernel_named(names[ni]);
            CHECK(k0 != NULL);
            if (!k0)
                continue;
            unsigned worst = 0;
            for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                static sim_result r;
                sim_kernel k = *k0;
                sim_opts o = {.sigma = sigmas[si], .seed = seed, .rounds = 40, .swap_round = 16};
                sim_run(&k, &o, &r);
                CHECK(r.served[15] != 0); /* served before the swap */
                CHECK(r.drop_round >= 16 && r.drop_round < 16 + DROP_ROUNDS);
                CHECK(!r.banned_served_again);
                CHECK(r.worst_speedup >= 0.99);
                if (r.drop_round - 15 > worst)
                    worst = r.drop_round - 15;
            }
            printf("planted slower at round 16, sigma %.0f%%: %s dropped within %u round(s) (worst of %d seeds)\n",
                   sigmas[si] * 100, names[ni], worst, SEEDS);
        }
}

/* Nothing to win: conv1d_15 (best 1.002x) ends at the default or a variant
 * within noise, never below 0.99x, and settles. */
static void test_nothing_to_win(void)
{
    const sim_kernel *k0 = kernel_named("conv1d_15");
    CHECK(k0 != NULL);
    if (!k0)
        return;
    for (unsigned si = 0; si < 2; si++)
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
            static sim_result r;
            sim_kernel k = *k0;
            sim_opts o = {.sigma = sigmas[si], .seed = seed, .rounds = ROUNDS};
            sim_run(&k, &o, &r);
            CHECK(r.worst_speedup >= 0.99);
            CHECK(r.speedup[ROUNDS] >= 0.99 && r.speedup[ROUNDS] <= k.ms[0] / k.best_ms + 1e-9);
            CHECK(r.state == DRK_EVO_SETTLED);
        }
}

/* Flat spaces settle soon, as the engine runs the search: every kernel
 * whose recorded best is within 2% of its default settles by
 * FLAT_SETTLED rounds in the median seed, at both noises
 * (before the barren rule, at 3% most ran the whole 20 rounds: their
 * centers wandered on noise), never serving below 0.99x. */
#define FLAT_SETTLED 14

static void test_flat_settles(void)
{
    printf("\nflat spaces as the engine runs them (%d seeds of %d rounds): the round the search settled, median and "
           "worst\n", SEEDS, ROUNDS);
    for (unsigned si = 0; si < 2; si++)
        for (unsigned ki = 0; ki < nkernels; ki++) {
            if (kernels[ki].ms[0] / kernels[ki].best_ms > 1.02)
                continue;
            unsigned at[SEEDS];
            for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                static sim_result r;
                sim_kernel k = kernels[ki];
                sim_opts o = {.sigma = sigmas[si], .seed = seed, .rounds = ROUNDS, .engine = SIM_ENGINE};
                sim_run(&k, &o, &r);
                CHECK(r.worst_speedup >= 0.99);
                at[seed - 1] = r.settled_at ? r.settled_at : UINT32_MAX;
            }
            for (unsigned i = 1; i < SEEDS; i++)
                for (unsigned j = i; j > 0 && at[j] < at[j - 1]; j--) {
                    unsigned t = at[j];
                    at[j] = at[j - 1];
                    at[j - 1] = t;
                }
            printf("  sigma %.0f%% %-16s", sigmas[si] * 100, kernels[ki].name);
            print_round(at[SEEDS / 2]);
            print_round(at[SEEDS - 1]);
            printf("\n");
            CHECK(at[SEEDS / 2] <= FLAT_SETTLED);
        }
}

/* ---- Shape classes and the share re-searched ---- */

static void test_shapes(void)
{
    uint32_t g[3] = {1000, 1, 1}, g2[3] = {1023, 1, 1}, g3[3] = {1024, 1, 1}, b[3] = {256, 1, 1}, b2[3] = {128, 2, 1};
    uint64_t c = drk_shape_class(g, b, 0);
    CHECK(c == drk_shape_class(g2, b, 0));  /* 1000 and 1023 blocks: one power of two */
    CHECK(c != drk_shape_class(g3, b, 0));
    CHECK(c != drk_shape_class(g, b2, 0));  /* the block exactly */
    CHECK(c != drk_shape_class(g, b, 16));  /* dynamic shared memory exactly */
    drk_shape_parts p = drk_shape_class_parts(drk_shape_class(g3, b2, 49152));
    CHECK(p.block[0] == 128 && p.block[1] == 2 && p.block[2] == 1 && p.dynamic_shared == 49152 && p.grid_log2 == 10);
    uint32_t gbig[3] = {65535, 65535, 64}, bbig[3] = {1024, 1024, 64};
    p = drk_shape_class_parts(drk_shape_class(gbig, bbig, 600000));
    CHECK(p.grid_log2 == 37 && p.block[0] == 1024 && p.dynamic_shared == 0x7ffff);

    /* 20 kernels a round for 30 rounds; at round 10 three move to a new
     * grid bucket (15%), at 20 one more, and one of the three goes back to
     * its old class (known: not searched); a grid change inside its power
     * of two is no change. */
    static drk_shapes t;
    drk_shapes_init(&t);
    printf("\nre-searched per round (20 kernels):");
    for (unsigned round = 1; round <= 30; round++) {
        unsigned searched = 0;
        for (uint64_t kk = 0; kk < 20; kk++) {
            uint32_t grid[3] = {256 + (uint32_t)round, 1, 1}; /* 257..286: one bucket */
            if (round >= 10 && kk < 3)
                grid[0] = 4096;
            if (round >= 20 && kk == 3)
                grid[0] = 64;
            if (round >= 20 && kk == 0)
                grid[0] = 300;
            int s = drk_shapes_note(&t, kk * 7919, drk_shape_class(grid, b, 0));
            searched += s != DRK_SHAPE_KNOWN;
            drk_shapes_note(&t, kk * 7919, drk_shape_class(grid, b, 0)); /* twice a round: counted once */
        }
        drk_shapes_round r = drk_shapes_round_end(&t);
        CHECK(r.round == round && r.kernels == 20);
        if (round == 1)
            CHECK(r.fresh == 20 && r.researched == 0 && searched == 20);
        else if (round == 10)
            CHECK(r.fresh == 0 && r.researched == 3 && fabs(r.share - 0.15) < 1e-9);
        else if (round == 20)
            CHECK(r.researched == 1 && fabs(r.share - 0.05) < 1e-9);
        else
            CHECK(r.researched == 0 && searched == 0);
        if (round == 1 || round == 10 || round == 20)
            printf(" round %u: %u first searches, %u re-searched (%.0f%%);", round, r.fresh, r.researched, 100 * r.share);
    }
    printf(" the other rounds none\n");
}

/* The search as the engine runs it (sim_opts.engine): every replay paid
 * from the budget, serving after 3 proven captures, rounds skipped while
 * the ledger is below zero; with the one-pair screen and without it. */
static void test_engine_costs(void)
{
    printf("\nas the engine pays (reference, proofs, both sides of each pair; served after %d proven captures), %d "
           "seeds of %d rounds: within 2%% of the best by round %d, median and worst round; GPU share (most)\n",
           SIM_PROOF_CAPTURES, SEEDS, ROUNDS, WITHIN_ROUNDS);
    printf("%-16s %7s | %-30s | %-30s | %-30s\n", "kernel", "best x", "  the engine's: shared original",
           "  pairs, one first", "  every pair");
    for (unsigned si = 0; si < 2; si++) {
        printf("noise sigma %.0f%%\n", sigmas[si] * 100);
        for (unsigned ki = 0; ki < nkernels; ki++) {
            printf("%-16s %6.3fx", kernels[ki].name, kernels[ki].ms[0] / kernels[ki].best_ms);
            unsigned on_time[SIM_ENGINE_EVERY_PAIR + 1] = {0};
            for (int mode = SIM_ENGINE; mode <= SIM_ENGINE_EVERY_PAIR; mode++) {
                row w;
                double share = engine_seeds(ki, sigmas[si], mode, 0, 0, 0, 0, 0, &w);
                /* Never a loss served (engine_seeds), and the ledger holds the budget over the run (a round's
                 * overrun waits for the next rounds' grants). */
                CHECK(share <= SIM_BUDGET * 1.25);
                unsigned median, worst;
                rounds_of(&w, &median, &worst);
                printf(" | %5u/%-2d", w.on_time, SEEDS);
                print_round(median);
                print_round(worst);
                printf(" %5.2f%%", 100 * share);
                on_time[mode] = w.on_time;
            }
            printf("\n");
            /* The engine's timing reaches the best on time about as often as every pair did (one seed of
             * 20 apart: since same-code builds are skipped, both reach matmul_naive's corner in 19-20 seeds
             * at 1%, the engine's by round 4 in the median, every pair's by round 7), and at 1% noise in
             * most seeds (matmul_naive's 1.06x plateau against its 1.10x corner is the hardest: 16 of 20
             * when this was written, 19 since). */
            CHECK(on_time[SIM_ENGINE] + 1 >= on_time[SIM_ENGINE_EVERY_PAIR]);
            if (si == 0)
                CHECK(on_time[SIM_ENGINE] >= SEEDS * 3 / 4);
            /* The n-body's 2.05x needs a register cap of exactly 56; every cap from 64 up builds the same
             * 56-register code. Skipping those builds gets there in most seeds even at 3% noise (13 of 20
             * before, by round 9 in the median; 18 since, by round 4). */
            if (!strcmp(kernels[ki].name, "nbody"))
                CHECK(on_time[SIM_ENGINE] >= SEEDS * 4 / 5);
        }
    }
}

/* As the engine pays, with its ledger's charges for the GPU's switches
 * to drk's context (DRK_EVO_WAIT_NS a wait, DRK_EVO_LOAD_NS a first load)
 * besides the GPU time: what the H200 runs see (2026-12-02: the n-body
 * served from round 11, naive matmul's corner not found in 16 rounds).
 * Printed for the next policy to be judged by; checked for what must hold
 * under any costs: nothing served below 0.99x. The share printed counts
 * the charges with the GPU time, and a run's last capture may overrun what
 * its rounds granted (paid back by rounds the run no longer has). At the
 * bare switches' measured prices (0.3 ms a wait, 0.5 ms a load:
 * search.h) naive matmul at 1% noise would reach its corner by round 10
 * in 13 of 20 seeds, none at 1 ms; on the H200 it did not (search.h says why).
 *
 * Then as evolve_bench.py's programs meet it: the kernel chosen after
 * START rounds (CUPTI's start, a timed round), its search beginning from
 * nothing (the engine before 2026-12-03) or with what those rounds earned
 * (up to DRK_EVO_CARRY_ROUNDS rounds' grant), and with that and spending
 * ahead for a variant in sight (DRK_EVO_AHEAD_*: the engine's now). The
 * earned start must reach the best by round 16 in at least as many
 * seeds as from nothing, over all twelve kernels and both noises;
 * spending ahead at least as many by round 10 as the earned start without
 * it, and by 16 within 2 seeds of it (nearly all of 480 reach it by then
 * either way), naive matmul at 1% noise by round 10 in 3 of 4 seeds,
 * and no run's share (charges included) past 3.1% of its GPU time: a
 * capture of the smallest kernel (gather_rows, 15.6 ms a round) is charged
 * ~20 rounds' grant, and a run that ends just after one has spent past the
 * budget by that; since carveout siblings borrow a loaded module (no load
 * charged), captures come oftener and one seed of 20 at 3% noise ended at
 * 3.06% (3% was the cap before, in every mode alike). */
#define START 2

/* One row of the tables below: kernel `ki` at sigma `si`, the search chosen
 * in round 1 (`how` 0) or after START rounds from nothing (1) or with what
 * they earned (2), and spending ahead (3), charged `wait_ns` a wait and
 * `load_ns` a first load; printed unless the kernel is flat. Its seeds
 * within 2% by round WITHIN_ROUNDS and by round 16 added to *on_time and
 * *by16; the most share a run spent. */
static const char *const hows[] = {"round 1", "nothing", "earned", "ahead"};

static double charged_row(unsigned ki, unsigned si, double wait_ns, double load_ns, int how, unsigned *on_time,
                          unsigned *by16)
{
    row w;
    double share =
        engine_seeds(ki, sigmas[si], SIM_ENGINE, wait_ns, load_ns, how ? START : 0, how >= 2, how == 3, &w);
    unsigned late = 0;
    for (unsigned seed = 1; seed <= SEEDS; seed++)
        late += w.within[seed] <= 16;
    *by16 += late;
    *on_time += w.on_time;
    if (kernels[ki].ms[0] / kernels[ki].best_ms < 1.02)
        return share; /* the flat ones: checked, not printed */
    unsigned median, worst;
    rounds_of(&w, &median, &worst);
    printf("  sigma %.0f%% %-14s %6.3fx %-8s | %2u/%d by round %d, %2u/%d by 16 |", sigmas[si] * 100,
           kernels[ki].name, kernels[ki].ms[0] / kernels[ki].best_ms, hows[how], w.on_time, SEEDS, WITHIN_ROUNDS,
           late, SEEDS);
    print_round(median);
    print_round(worst);
    printf(" | lowest %.3fx | %5.2f%%\n", w.lowest, 100 * share);
    if (how == 3 && si == 0 && !strcmp(kernels[ki].name, "matmul_naive"))
        CHECK(w.on_time >= SEEDS * 3 / 4);
    return share;
}

static void test_switch_charged(void)
{
    printf("\nas the engine pays, with %.1f ms charged a wait and %.1f ms a first load (DRK_EVO_WAIT_NS, LOAD_NS), %d "
           "seeds of %d rounds: "
           "within 2%% of the best by round %d and by round 16 (median, worst round); lowest served; GPU share (most);"
           " chosen in round 1 / after %d rounds from nothing / after %d rounds with what they earned / the same, "
           "spending up to %.0f rounds' grant ahead for a variant in sight\n",
           DRK_EVO_WAIT_NS / 1e6, DRK_EVO_LOAD_NS / 1e6, SEEDS, ROUNDS, WITHIN_ROUNDS, START, START,
           DRK_EVO_AHEAD_ROUNDS);
    unsigned late[4] = {0, 0, 0, 0}, ontime[4] = {0, 0, 0, 0};
    double share[4] = {0, 0, 0, 0};
    for (unsigned si = 0; si < 2; si++)
        for (unsigned ki = 0; ki < nkernels; ki++)
            for (int how = 0; how < 4; how++) {
                double s = charged_row(ki, si, DRK_EVO_WAIT_NS, DRK_EVO_LOAD_NS, how, &ontime[how], &late[how]);
                share[how] = s > share[how] ? s : share[how];
            }
    /* 2026-12-03: 456 seeds earned against 446 from nothing (naive matmul 11 and 7 of 20 against 3 and 4;
     * the n-body 20 and 18 against 20 and 19: its pace is the search's noise more than the ledger's).
     * 2026-12-04: spending ahead 462 by round 10 against 435 earned, 468 by round 16 against 456 (naive
     * matmul 20 and 7 of 20 by round 10 against 0 and 0). Once carveout siblings were charged no load of
     * their own (the engine borrows the loaded module): spending ahead 465 and 469, earned 438 and 462
     * (naive matmul 20 and 10 of 20 by round 10 spending ahead, 1 and 2 earned). With the choice proven on
     * the launches kept from the captures before (SIM_KEPT): spending ahead 475 and 476, earned 451 and
     * 477 (naive matmul 20 and 16 of 20 by round 10 spending ahead, 4 and 8 earned): by round 16 nearly
     * every seed of both, one fewer spending ahead (naive matmul at 3%, 17 against 18). 2026-12-05: the first
     * capture's reference queued with its first batch, blind, as the engine now does (no waits of its own):
     * spending ahead 475 and 477, earned 462 and 477 (naive matmul 20 and 16 of 20 by round 10 spending
     * ahead, 11 and 12 earned). */
    printf("  seeds within 2%% by round %d / 16, all kernels and both sigmas (most share a run spent): %u / %u chosen "
           "in round 1 (%.2f%%), %u / %u after %d rounds from nothing (%.2f%%), %u / %u with what they earned "
           "(%.2f%%), %u / %u spending ahead (%.2f%%)\n",
           WITHIN_ROUNDS, ontime[0], late[0], 100 * share[0], ontime[1], late[1], START, 100 * share[1], ontime[2],
           late[2], 100 * share[2], ontime[3], late[3], 100 * share[3]);
    CHECK(late[2] >= late[1]);
    CHECK(ontime[3] >= ontime[2] && late[3] + 2 >= late[2]);
    CHECK(share[3] <= 0.031);
    /* At the bare switches' prices (tests/bench/switch_cost.c on the H200), which the engine does not charge
     * (search.h says why): the search alone would be paced faster. */
    printf("  at the bare switches' prices (0.3 ms a wait, 0.5 ms a first load):\n");
    unsigned bare_on_time = 0, bare_by16 = 0;
    for (unsigned si = 0; si < 2; si++)
        for (unsigned ki = 0; ki < nkernels; ki++)
            if (kernels[ki].ms[0] / kernels[ki].best_ms >= 1.02)
                charged_row(ki, si, 3e5, 5e5, 2, &bare_on_time, &bare_by16);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* tables and failures in order */
    test_space();
    test_stats();
    test_budget();
    test_reject_and_order();
    test_same_code();
    test_determinism();
    test_temperature();
    test_rules();
    test_promise();
    test_served_falls();
    test_served_due();
    test_shapes();
    nkernels = sim_load(DRK_SPACES_DIR "/h200-2026-12-01.json", kernels, 16);
    CHECK(nkernels == 12);
    test_recorded();
    test_switch_charged();
    test_new_shape();
    test_predictor();
    test_planted_drop();
    test_plateau_hop();
    test_nothing_to_win();
    test_flat_settles();
    test_engine_costs();
    return CHECK_DONE();
}
