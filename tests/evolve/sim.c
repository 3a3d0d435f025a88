#include "tests/evolve/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/json_read.h"

static void die(const char *path, const char *what)
{
    fprintf(stderr, "sim: %s: %s\n", path, what);
    exit(1);
}

/* What evolve_space.c's kernels are, beyond what the file records: static
 * shared memory (evolve_kernels.cu) and parameter bytes (its arguments). */
static const struct {
    const char *name;
    uint32_t shared, params;
} facts[] = {
    {"saxpy", 0, 24},        {"matmul_naive", 0, 28}, {"matmul_tiled", 2048, 28},  {"stencil5", 0, 24},
    {"softmax_rows", 1024, 20}, {"transpose_naive", 0, 20}, {"histogram256", 1024, 20}, {"nbody", 0, 20},
    {"black_scholes", 0, 52}, {"layernorm", 1024, 36}, {"gather_rows", 0, 32},     {"conv1d_15", 0, 28},
};

static void dims_match(const char *path, const json_value *dims)
{
    const drk_space *s = &drk_space_ptx;
    if (!dims || dims->type != JSON_OBJECT || dims->u.obj.count != s->ndims)
        die(path, "dims are not drk_space_ptx's");
    for (unsigned d = 0; d < s->ndims; d++) {
        const json_member *m = &dims->u.obj.members[d];
        if (strcmp(m->key, s->dims[d].name) || m->value.type != JSON_ARRAY || m->value.u.arr.count != s->dims[d].count)
            die(path, "a dimension differs from drk_space_ptx's");
        for (unsigned i = 0; i < s->dims[d].count; i++)
            if ((int)m->value.u.arr.items[i].u.num.d != s->dims[d].values[i])
                die(path, "a dimension's values differ from drk_space_ptx's");
    }
}

static void triple(const json_value *a, uint32_t out[3])
{
    for (unsigned i = 0; i < 3; i++)
        out[i] = a && a->type == JSON_ARRAY && i < a->u.arr.count ? (uint32_t)a->u.arr.items[i].u.num.d : 1;
}

unsigned sim_load(const char *path, sim_kernel *out, unsigned max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, "cannot open");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size)
        die(path, "cannot read");
    fclose(f);
    json_value doc;
    json_error err;
    if (json_parse(text, (size_t)size, &doc, &err) != 0)
        die(path, err.msg);
    free(text);
    dims_match(path, json_get(&doc, "dims"));
    const json_value *ks = json_get(&doc, "kernels");
    if (!ks || ks->type != JSON_ARRAY)
        die(path, "no kernels");
    unsigned n = 0;
    for (size_t i = 0; i < ks->u.arr.count && n < max; i++) {
        const json_value *k = &ks->u.arr.items[i];
        const json_value *name = json_get(k, "kernel"), *ms = json_get(k, "ms"), *builds = json_get(k, "builds");
        if (!name || name->type != JSON_STRING || !ms || ms->type != JSON_ARRAY || ms->u.arr.count != SIM_VARIANTS ||
            !builds || builds->type != JSON_ARRAY || builds->u.arr.count * 4 != SIM_VARIANTS)
            die(path, "a kernel without name, ms or builds of the space's size");
        sim_kernel *o = &out[n++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", name->u.str.s);
        triple(json_get(k, "grid"), o->grid);
        triple(json_get(k, "block"), o->block);
        for (unsigned v = 0; v < SIM_VARIANTS; v++) {
            const json_value *t = &ms->u.arr.items[v], *b = &builds->u.arr.items[v / 4];
            const json_value *equal = json_get(b, "equal");
            o->ok[v] = t->type == JSON_NUMBER && t->u.num.d > 0 && equal && equal->type == JSON_TRUE;
            o->ms[v] = o->ok[v] ? t->u.num.d : 0;
        }
        for (unsigned b = 0; b < SIM_VARIANTS / 4; b++) {
            const json_value *ru = json_get(&builds->u.arr.items[b], "regs_used");
            const json_value *lb = json_get(&builds->u.arr.items[b], "local_bytes");
            uint32_t used = ru && ru->type == JSON_NUMBER ? (uint32_t)ru->u.num.d : 0;
            uint32_t local = lb && lb->type == JSON_NUMBER ? (uint32_t)lb->u.num.d : 0;
            /* b = ((regs * 3 + minctas) * 2 + opt) * 3 + cache: the
             * optimization level and cache mode stay apart. */
            o->code[b] = (used & 0xff) | (local & 0xffff) << 8 | (b % 6) << 24;
        }
        const json_value *regs = json_get(&builds->u.arr.items[0], "regs_used");
        o->f.regs = regs && regs->type == JSON_NUMBER ? (uint32_t)regs->u.num.d : 0;
        o->f.block_threads = o->block[0] * o->block[1] * o->block[2];
        for (size_t j = 0; j < sizeof facts / sizeof *facts; j++)
            if (!strcmp(facts[j].name, o->name))
                o->f.shared_bytes = facts[j].shared, o->f.param_bytes = facts[j].params;
        if (!o->ok[0])
            die(path, "a kernel whose default did not build");
        sim_best(o);
    }
    json_free(&doc);
    return n;
}

void sim_best(sim_kernel *k)
{
    k->best_id = 0;
    for (uint32_t v = 0; v < SIM_VARIANTS; v++)
        if (k->ok[v] && k->ms[v] < k->ms[k->best_id])
            k->best_id = v;
    k->best_ms = k->ms[k->best_id];
}

/* The simulator's own noise stream: xorshift64*, normals by Box-Muller. */
static uint64_t noise_state;
static double uniform01(void)
{
    noise_state ^= noise_state >> 12;
    noise_state ^= noise_state << 25;
    noise_state ^= noise_state >> 27;
    return ((double)((noise_state * 0x2545f4914f6cdd1dull) >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
    return sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01());
}

static double timed(double ms, double sigma)
{
    return ms * exp(sigma * normal());
}

FILE *sim_trace;

void sim_run(sim_kernel *k, const sim_opts *o, sim_result *r)
{
    memset(r, 0, sizeof *r);
    noise_state = o->seed * 0x9e3779b97f4a7c15ull + 12345;
    drk_evolution *e = &r->e;
    drk_evolution_init(e, &drk_space_ptx, o->seed, o->start);
    unsigned rounds = o->rounds < SIM_MAX_ROUNDS ? o->rounds : SIM_MAX_ROUNDS;
    uint32_t served = 0, swapped = DRK_VARIANT_NONE;
    r->worst_speedup = 1;
    r->speedup[0] = 1;
    r->vs_best[0] = k->ms[0] / k->best_ms;
    unsigned last_bad = r->vs_best[0] > 1.02 ? 1 : 0;
    static unsigned char proven[SIM_VARIANTS];
    static uint64_t proven_on[SIM_VARIANTS]; /* bit c: proven on capture c (c < 64) */
    memset(proven, 0, sizeof proven);
    memset(proven_on, 0, sizeof proven_on);
    /* Codes built so far (with their carveout), for the engine's skip. */
    static uint64_t built[SIM_VARIANTS];
    static uint32_t built_id[SIM_VARIANTS];
    unsigned nbuilt = 0, captures = 0;
    static unsigned char loaded[SIM_VARIANTS];
    memset(loaded, 0, sizeof loaded);
    double ledger = 0, credit = 0;
    for (unsigned round = 1; round <= rounds; round++) {
        if (round == o->swap_round && served) {
            double t = k->ms[served];
            k->ms[served] = k->ms[0];
            k->ms[0] = t;
            swapped = served;
            sim_best(k);
        }
        double gpu = SIM_ROUND_LAUNCHES * k->ms[served] * 1e6; /* ns */
        r->gpu_ns += gpu;
        ledger += SIM_BUDGET * gpu, credit += SIM_BUDGET * gpu;
        if (o->engine && round == o->start_rounds + 1) {
            /* The search begins: with what the rounds before earned, up
             * to the carry's cap, or from nothing. */
            double cap = DRK_EVO_CARRY_ROUNDS * SIM_BUDGET * gpu;
            ledger = credit = !o->start_credit ? SIM_BUDGET * gpu : ledger < cap ? ledger : cap;
        }
        double ahead = 0;
        if (o->engine && o->ahead_rounds > 0) {
            drk_variant run;
            drk_variant_from_id(&drk_space_ptx, served, &run);
            double gain = (drk_evolution_promise(e, &run) - 1) * gpu * o->ahead_payback;
            ahead = o->ahead_rounds * SIM_BUDGET * gpu;
            ahead = gain < ahead ? gain : ahead;
        }
        if (o->engine && (ledger < -ahead || round <= o->start_rounds)) {
            /* No capture this round: the decision stands. */
            r->served[round] = served;
            r->trials_at[round] = e->trials;
            r->speedup[round] = k->ms[0] / k->ms[served];
            r->vs_best[round] = k->ms[served] / k->best_ms;
            if (r->vs_best[round] > 1.02)
                last_bad = round + 1;
            continue;
        }
        double cost = o->engine ? 2 * k->ms[0] * 1e6 : 0; /* the reference */
        /* SIM_ENGINE: the original timed SIM_ENGINE_PAIRS times once a
         * capture, each candidate's runs against their mean. */
        double orig_ms = 0;
        if (o->engine == SIM_ENGINE) {
            for (int i = 0; i < SIM_ENGINE_PAIRS; i++)
                orig_ms += timed(k->ms[0], o->sigma) / SIM_ENGINE_PAIRS;
            cost += SIM_ENGINE_PAIRS * k->ms[0] * 1e6;
        }
        /* The engine grants a capture's round at least a full batch's runs
         * (evolve/engine_round.c, round_credit); the ledger pays what it used. */
        double batch = SIM_ENGINE_BATCH * SIM_ENGINE_PAIRS * k->ms[0] * 1e6;
        drk_evolution_begin_round(e, o->engine ? (credit > batch ? credit : batch) : SIM_BUDGET * gpu,
                                  timed(k->ms[0], o->sigma) * 1e6, o->engine ? SIM_ENGINE_PAIRS : SIM_TRIAL_LAUNCHES);
        credit = 0;
        /* The search's choice, not yet proven on enough launches and not
         * measured this round, proven untimed on this capture (engine_round.c's
         * prove_choices: a wait of its own). */
        drk_variant choice;
        if (o->engine && drk_evolution_serving(e, &choice) && !drk_evolution_served_due(e)) {
            uint32_t c = drk_variant_id(&drk_space_ptx, &choice);
            if (proven[c] < SIM_PROOF_CAPTURES && !(proven_on[c] >> (captures & 63) & 1)) {
                proven_on[c] |= 1ull << (captures & 63);
                proven[c]++;
                cost += o->wait_ns + k->ms[c] * 1e6;
            }
        }
        drk_variant cand[8];
        unsigned n, tried = 0, loads = 0;
        while ((n = drk_evolution_next(e, cand, 8)) > 0)
            for (unsigned i = 0; i < n; i++) {
                uint32_t id = drk_variant_id(&drk_space_ptx, &cand[i]);
                if (o->engine && id % 4 != id) {
                    /* A rebuild (off the default build): skipped when it
                     * makes code built before, before anything runs. */
                    uint64_t key = (uint64_t)k->code[id / 4] << 2 | (id % 4);
                    unsigned j = 0;
                    while (j < nbuilt && built[j] != key)
                        j++;
                    if (j < nbuilt && built_id[j] != id) {
                        drk_evolution_same(e, &cand[i]);
                        continue;
                    }
                    if (j == nbuilt)
                        built[nbuilt] = key, built_id[nbuilt++] = id;
                }
                if (o->engine) {
                    cost += k->ms[id] * 1e6; /* its proof's run */
                    tried++;
                    /* Carveout siblings (id / 4 the same: carveout is
                     * the fastest dimension) run one loaded module. */
                    loads += !loaded[id / 4];
                    loaded[id / 4] = 1;
                }
                if (!k->ok[id]) {
                    drk_evolution_reject(e, &cand[i]);
                    continue;
                }
                if (o->engine) {
                    /* One sample screens (all of them for SIM_ENGINE_EVERY_PAIR);
                     * a 2x slower one ends the timing. */
                    if (!(proven_on[id] >> (captures & 63) & 1))
                        proven[id] += proven[id] < 255;
                    proven_on[id] |= 1ull << (captures & 63);
                    float s[SIM_ENGINE_PAIRS];
                    unsigned m = 0;
                    while (m < SIM_ENGINE_PAIRS &&
                           !(m == 1 && (s[0] < 0.5f || (o->engine != SIM_ENGINE_EVERY_PAIR && s[0] < 1 + DRK_EVO_MARGIN)))) {
                        if (o->engine == SIM_ENGINE) {
                            s[m] = (float)(orig_ms / timed(k->ms[id], o->sigma));
                            cost += k->ms[id] * 1e6;
                        } else {
                            s[m] = (float)(timed(k->ms[0], o->sigma) / timed(k->ms[id], o->sigma));
                            cost += (k->ms[0] + k->ms[id]) * 1e6;
                        }
                        m++;
                    }
                    drk_evolution_record(e, &cand[i], s, m);
                    continue;
                }
                /* A trial whose first launch is 2x slower than the default's
                 * stops there (the engine's early cut): no winner, and the
                 * budget is not spent on it. */
                float s[SIM_TRIAL_LAUNCHES];
                unsigned m = 0;
                while (m < SIM_TRIAL_LAUNCHES && !(m == 1 && s[0] < 0.5f)) {
                    s[m] = (float)(timed(k->ms[0], o->sigma) / timed(k->ms[id], o->sigma));
                    m++;
                }
                drk_evolution_record(e, &cand[i], s, m);
                if (sim_trace) {
                    char buf[96];
                    drk_ratio_stats st = drk_evolution_stats(e, &cand[i]);
                    fprintf(sim_trace, "  r%-2u %-40s true %.3fx  pooled %.3f [%.3f %.3f] n %u scale %.3f\n", round,
                            drk_variant_text(&drk_space_ptx, &cand[i], buf, sizeof buf), k->ms[0] / k->ms[id], st.median,
                            st.lower, st.upper, st.n, st.scale);
                }
            }
        if (o->engine) {
            unsigned waits = tried ? (tried + SIM_ENGINE_BATCH - 1) / SIM_ENGINE_BATCH : 1;
            cost += o->wait_ns * waits + o->load_ns * loads; /* the reference queued with the first batch */
        }
        drk_evo_decision d = drk_evolution_end_round(e);
        served = d.serve ? drk_variant_id(&drk_space_ptx, &d.variant) : 0;
        /* The choice proven on the launches kept from the captures before. */
        for (unsigned j = 1; o->engine && served && j <= SIM_KEPT && j <= captures && proven[served] < SIM_PROOF_CAPTURES;
             j++)
            if (!(proven_on[served] >> ((captures - j) & 63) & 1)) {
                proven_on[served] |= 1ull << ((captures - j) & 63);
                proven[served]++;
                cost += o->wait_ns + k->ms[served] * 1e6;
            }
        captures++;
        if (o->engine && proven[served] < SIM_PROOF_CAPTURES)
            served = 0; /* the original until proven on enough launches */
        ledger -= cost;
        r->engine_ns += cost;
        r->served[round] = served;
        r->trials_at[round] = e->trials;
        if (sim_trace) {
            char buf[96];
            fprintf(sim_trace, "r%-2u serve %s (true %.3fx)%s%s center %u exh %d noise %.4f\n", round,
                    d.serve ? drk_variant_text(&drk_space_ptx, &d.variant, buf, sizeof buf) : "default",
                    k->ms[0] / k->ms[served], d.dropped ? " DROPPED" : "", d.state == DRK_EVO_SETTLED ? " settled" : "",
                    e->center, e->exhausted, drk_evolution_noise(e));
        }
        if (d.state != DRK_EVO_SETTLED)
            r->settled_at = 0;
        else if (!r->settled_at)
            r->settled_at = round;
        r->dropped[round] = d.dropped;
        r->speedup[round] = k->ms[0] / k->ms[served];
        r->vs_best[round] = k->ms[served] / k->best_ms;
        if (served && !r->first_trust)
            r->first_trust = round;
        if (swapped != DRK_VARIANT_NONE && !r->drop_round && (d.dropped || served != swapped))
            r->drop_round = round; /* dropped, or left for another trusted one */
        if (swapped != DRK_VARIANT_NONE && served == swapped && r->drop_round)
            r->banned_served_again = 1;
        /* The planted window (from the swap to its drop) is judged apart. */
        int planted = o->swap_round && round >= o->swap_round && !r->drop_round;
        if (!planted && r->speedup[round] < r->worst_speedup)
            r->worst_speedup = r->speedup[round];
        if (r->vs_best[round] > 1.02)
            last_bad = round + 1;
    }
    r->within = last_bad > rounds ? UINT32_MAX : last_bad;
    r->trials = e->trials;
    r->mutations = e->mutations;
    r->sames = e->sames;
    r->spent_ns = e->spent_ns;
    r->granted_ns = e->granted_ns;
    r->state = e->state;
}
