#include "evolve/findings.h"

#include <stdio.h>
#include <string.h>

/* Under gputime's lock, which serializes every call here. */
static drk_finding list[DRK_FINDINGS_MAX];
static size_t nlist;
static double frag_recent[DRK_RECENT_ROUNDS];
static unsigned nfrag;
static uint64_t last_oom;
static uint64_t dropped; /* findings past DRK_FINDINGS_MAX */

static const char *const names[DRK_FINDING_KINDS] = {
    [DRK_FINDING_GPU_IDLE] = "gpu_idle",
    [DRK_FINDING_KERNEL_SLOWER] = "kernel_slower",
    [DRK_FINDING_NEW_SHAPE] = "new_shape",
    [DRK_FINDING_FRAGMENTATION] = "fragmentation",
    [DRK_FINDING_OUT_OF_MEMORY] = "out_of_memory",
    [DRK_FINDING_JIT_COMPILES] = "jit_compiles",
    [DRK_FINDING_OCCUPANCY_DROP] = "occupancy_drop",
};
static uint64_t jit_loads, jit_kernels;

void drk_findings_reset(void)
{
    memset(list, 0, sizeof list);
    nlist = nfrag = 0;
    last_oom = dropped = 0;
    jit_loads = jit_kernels = 0;
}

static int same_key(const drk_time_key *a, const drk_time_key *b)
{
    if (!a->name || !b->name)
        return a->name == b->name;
    return strcmp(a->name, b->name) == 0 && memcmp(a->grid, b->grid, sizeof a->grid) == 0 &&
           memcmp(a->block, b->block, sizeof a->block) == 0 && a->shared_bytes == b->shared_bytes;
}

/* Kinds with one entry a kernel, whatever its shape. */
static int by_kernel(drk_finding_kind kind)
{
    return kind == DRK_FINDING_NEW_SHAPE || kind == DRK_FINDING_OCCUPANCY_DROP;
}

/* The entry of `kind` (and kernel-shape `key`), seen in round `round`; NULL
 * when the list is full. `worse` says whether this round's evidence is worse
 * than what the entry holds (a new entry takes it). */
static drk_finding *note(drk_finding_kind kind, const drk_time_key *key, uint64_t round, int *fresh)
{
    static const drk_time_key none;
    if (!key)
        key = &none;
    for (size_t i = 0; i < nlist; i++)
        if (list[i].kind == kind && (by_kernel(kind) ? list[i].key.name && key->name &&
                                     strcmp(list[i].key.name, key->name) == 0 : same_key(&list[i].key, key))) {
            if (list[i].last_round != round)
                list[i].rounds++;
            list[i].last_round = round;
            *fresh = 0;
            return &list[i];
        }
    if (nlist == DRK_FINDINGS_MAX) {
        dropped++;
        return NULL;
    }
    drk_finding *f = &list[nlist++];
    *f = (drk_finding){.kind = kind, .name = names[kind], .first_round = round, .last_round = round, .rounds = 1,
                       .key = *key};
    *fresh = 1;
    return f;
}

static void shape_text(char *buf, size_t n, const drk_time_key *k)
{
    snprintf(buf, n, "grid (%u,%u,%u) block (%u,%u,%u) shared %u", k->grid[0], k->grid[1], k->grid[2], k->block[0],
             k->block[1], k->block[2], k->shared_bytes);
}

static void gpu_idle(const drk_round *r)
{
    uint64_t wall = r->end_ns - r->start_ns;
    /* A round that ran no kernel says nothing of how the GPU is fed, nor
     * does the program's teardown after its last mark. */
    if (!r->kernels || wall < 1000000 || (r->why && strcmp(r->why, "exit") == 0))
        return;
    double busy = (double)r->busy_ns / (double)wall;
    if (busy >= DRK_BUSY_LOW)
        return;
    /* The latest round's evidence: the steady state, not the start-up. */
    int fresh;
    drk_finding *f = note(DRK_FINDING_GPU_IDLE, NULL, r->index, &fresh);
    if (!f)
        return;
    f->value = busy, f->reference = DRK_BUSY_LOW;
    int n = snprintf(f->evidence, sizeof f->evidence, "round %llu: GPU busy %.1f%% of %.1f ms",
                     (unsigned long long)r->index, 100 * busy, (double)wall / 1e6);
    /* drk's own trials ran in the round (its own context: the program's
     * kernels wait meanwhile, or the GPU was idle anyway): said, so that
     * the idle is not laid at the program's door unsaid. */
    if (r->drk_ns && n > 0 && (size_t)n < sizeof f->evidence)
        n += snprintf(f->evidence + n, sizeof f->evidence - (size_t)n, ", and %.0f us of drk's own trials",
                      (double)r->drk_ns / 1e3);
    for (unsigned g = 0; g < r->ngaps && g < 2 && n > 0 && (size_t)n < sizeof f->evidence; g++) {
        n += snprintf(f->evidence + n, sizeof f->evidence - (size_t)n, "%s idle %.0f us after %.40s before %.40s",
                      g ? ";" : "; largest gaps:", (double)r->gaps[g].ns / 1e3,
                      r->gaps[g].after ? r->gaps[g].after : "(round start)",
                      r->gaps[g].before ? r->gaps[g].before : "(round end)");
        if (r->gaps[g].drk_ns && n > 0 && (size_t)n < sizeof f->evidence)
            n += snprintf(f->evidence + n, sizeof f->evidence - (size_t)n, " (drk's trials %.0f us of it)",
                          (double)r->gaps[g].drk_ns / 1e3);
    }
}

/* A hot kernel-shape whose theoretical occupancy fell 1/8 of the SM's warps
 * below its best before (or, new, its kernel's best): one entry a kernel,
 * with the largest drop's evidence. */
static void occupancy(const drk_round *r, const drk_finding_shape *k, double share)
{
    const drk_occupancy *now = &k->occ, *was = &k->occ_before;
    if (share < DRK_OCC_SHARE || !now->max_warps_per_sm || !was->max_warps_per_sm)
        return;
    double drop = was->theoretical - now->theoretical;
    if (drop < DRK_OCC_DROP - 1e-9)
        return;
    int fresh;
    drk_finding *f = note(DRK_FINDING_OCCUPANCY_DROP, &k->key, r->index, &fresh);
    if (!f || (!fresh && drop <= f->reference - f->value))
        return;
    f->key = k->key;
    f->value = now->theoretical, f->reference = was->theoretical;
    char limit[160];
    const drk_time_key *b = &k->occ_before_key;
    snprintf(f->evidence, sizeof f->evidence,
             "round %llu: %.60s at block (%u,%u,%u), dyn smem %u: theoretical occupancy %.3g%% (%u of %u warps an "
             "SM, limited by %s), was %.3g%% at block (%u,%u,%u), dyn smem %u in round %llu (%u registers a thread, "
             "%u bytes of static shared memory); %.0f%% of the round's kernel time",
             (unsigned long long)r->index, k->key.name, k->key.block[0], k->key.block[1], k->key.block[2],
             k->key.shared_bytes, 100 * now->theoretical, now->blocks_per_sm * now->warps_per_block,
             now->max_warps_per_sm, drk_occupancy_limit_text(now, limit, sizeof limit), 100 * was->theoretical,
             b->block[0], b->block[1], b->block[2], b->shared_bytes, (unsigned long long)k->occ_before_round,
             was->regs, was->static_shared, 100 * share);
}

static void kernels(const drk_round *r, const drk_finding_shape *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const drk_finding_shape *k = &s[i];
        int hot = r->kernel_ns && (double)k->total_ns >= DRK_HOT_SHARE * (double)r->kernel_ns;
        if (!hot)
            continue;
        char shape[96];
        shape_text(shape, sizeof shape, &k->key);
        int fresh;
        if (k->launches >= 3 && k->best_recent_ns && (double)k->median_ns >= DRK_SLOWER * (double)k->best_recent_ns &&
            k->median_ns - k->best_recent_ns >= DRK_SLOWER_MIN_NS &&
            (double)k->total_ns >= DRK_SLOWER_SHARE * (double)r->kernel_ns) {
            double ratio = (double)k->median_ns / (double)k->best_recent_ns;
            drk_finding *f = note(DRK_FINDING_KERNEL_SLOWER, &k->key, r->index, &fresh);
            if (f && (fresh || ratio > f->value / f->reference)) {
                f->value = (double)k->median_ns, f->reference = (double)k->best_recent_ns;
                snprintf(f->evidence, sizeof f->evidence,
                         "round %llu: %.60s at %s: median %.1f us, its best of the last %d rounds it ran in %.1f us "
                         "(+%.0f%%), %llu launches, %.0f%% of the round's kernel time",
                         (unsigned long long)r->index, k->key.name, shape, (double)k->median_ns / 1e3,
                         DRK_RECENT_ROUNDS, (double)k->best_recent_ns / 1e3, 100 * (ratio - 1),
                         (unsigned long long)k->launches, 100.0 * (double)k->total_ns / (double)r->kernel_ns);
            }
        }
        double share = (double)k->total_ns / (double)r->kernel_ns;
        occupancy(r, k, share);
        /* One entry a kernel, however many shapes it adds (a trainer whose
         * sequence length varies adds shapes every step): the latest said. */
        if (r->index >= DRK_WARMUP_ROUNDS && k->rounds_before == 0 && k->name_seen_before && share >= DRK_NEW_SHAPE_SHARE) {
            drk_finding *f = note(DRK_FINDING_NEW_SHAPE, &k->key, r->index, &fresh);
            if (f) {
                f->key = k->key; /* the latest shape */
                f->value = fresh ? 1 : f->value + 1, f->reference = DRK_NEW_SHAPE_SHARE;
                snprintf(f->evidence, sizeof f->evidence,
                         "round %llu: %.60s first ran at %s, %llu launches, %.0f%% of the round's kernel time (%.0f "
                         "new shape%s of it so far)",
                         (unsigned long long)r->index, k->key.name, shape, (unsigned long long)k->launches,
                         100 * share, f->value, f->value == 1 ? "" : "s");
            }
        }
    }
}

static void memory(const drk_round *r)
{
    const drk_round_memory *m = &r->memory;
    int fresh;
    if (m->out_of_memory > last_oom) {
        drk_finding *f = note(DRK_FINDING_OUT_OF_MEMORY, NULL, r->index, &fresh);
        if (f) {
            f->value = (double)m->out_of_memory, f->reference = (double)last_oom;
            snprintf(f->evidence, sizeof f->evidence,
                     "round %llu: the device pool answered out of memory %llu times so far (%llu before the round); "
                     "live %.1f MiB, reserved %.1f MiB",
                     (unsigned long long)r->index, (unsigned long long)m->out_of_memory,
                     (unsigned long long)last_oom, (double)m->live_bytes / 1048576, (double)m->reserved_bytes / 1048576);
        }
        last_oom = m->out_of_memory;
    }
    /* Fragmentation of a pool big enough to matter: 64 MiB reserved. */
    if (m->reserved_bytes < ((uint64_t)64 << 20))
        return;
    double frag = 1.0 - (double)m->live_bytes / (double)m->reserved_bytes;
    double best = 1;
    for (unsigned i = 0; i < nfrag && i < DRK_RECENT_ROUNDS; i++)
        best = frag_recent[i] < best ? frag_recent[i] : best;
    frag_recent[nfrag++ % DRK_RECENT_ROUNDS] = frag;
    if (nfrag < 2 || frag < best + DRK_FRAG_RISE)
        return;
    drk_finding *f = note(DRK_FINDING_FRAGMENTATION, NULL, r->index, &fresh);
    if (f && (fresh || frag > f->value)) {
        f->value = frag, f->reference = best;
        snprintf(f->evidence, sizeof f->evidence,
                 "round %llu: %.0f%% of reserved device memory holds no live allocation (live %.1f MiB, reserved "
                 "%.1f MiB, %llu pages moved so far); the best of the last %d rounds was %.0f%%",
                 (unsigned long long)r->index, 100 * frag, (double)m->live_bytes / 1048576,
                 (double)m->reserved_bytes / 1048576, (unsigned long long)m->pages_moved, DRK_RECENT_ROUNDS, 100 * best);
    }
}

void drk_findings_round(const drk_round *r, const drk_finding_shape *shapes, size_t n)
{
    gpu_idle(r);
    kernels(r, shapes, n);
    memory(r);
}

void drk_findings_jit(uint64_t round, const char *how, unsigned kernels, uint64_t load_ns)
{
    int fresh;
    drk_finding *f = note(DRK_FINDING_JIT_COMPILES, NULL, round, &fresh);
    if (!f)
        return;
    jit_loads++, jit_kernels += kernels;
    f->value = (fresh ? 0 : f->value) + (double)load_ns, f->reference = (double)jit_loads;
    snprintf(f->evidence, sizeof f->evidence,
             "round %llu: %.80s had %u kernels compiled from PTX by the driver (no SASS for this GPU) and took "
             "%.1f ms; %llu such loads, %llu kernels, %.1f ms of loading so far",
             (unsigned long long)round, how, kernels, (double)load_ns / 1e6, (unsigned long long)jit_loads,
             (unsigned long long)jit_kernels, f->value / 1e6);
}

size_t drk_findings_get(const drk_finding **out, size_t max)
{
    size_t n = 0;
    for (; n < nlist && n < max; n++)
        out[n] = &list[n];
    return n;
}
