/* GPU time per kernel-shape and per round (evolve/gputime.c), fed timed
 * records directly: bucket accuracy, attribution by name and geometry, busy
 * time as the union of intervals, idle gaps and what bounds them, records
 * arriving after their round, the kept and merged rounds over 100,000 rounds,
 * the table's limit, and the findings: quiet on a steady workload, each
 * planted case found in its round (occupancy_drop by the build the records
 * say ran). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "evolve/findings.h"
#include "evolve/gputime.h"
#include "tests/unit/check.h"

static drk_time_key key(const char *name, unsigned gx, unsigned bx)
{
    return (drk_time_key){name, {gx, 1, 1}, {bx, 1, 1}, 0};
}

static int near(uint64_t got, uint64_t want, double rel)
{
    return fabs((double)got - (double)want) <= rel * (double)want;
}

static void test_hist(void)
{
    /* Each bucket is under 1/16 of its doubling: a quantile is within 3.2%
     * (half a bucket) of a sample in its bucket. */
    for (uint64_t base = 1; base * 100 < ((uint64_t)1 << 37); base = base * 7 + 3) {
        drk_time_hist h;
        memset(&h, 0, sizeof h);
        for (uint64_t i = 1; i <= 100; i++)
            drk_time_hist_add(&h, base * i);
        drk_time_stats s = drk_time_hist_stats(&h);
        CHECK(s.n == 100 && s.min_ns == base && s.max_ns == base * 100 && s.total_ns == base * 5050);
        CHECK(near(s.median_ns, base * 51, 0.07));
        CHECK(near(s.p95_ns, base * 96, 0.07));
    }
    drk_time_hist a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    drk_time_hist_add(&a, 10);
    drk_time_hist_add(&b, 1000);
    drk_time_hist_add(&b, 0);
    drk_time_hist_merge(&a, &b);
    CHECK(a.n == 3 && a.min_ns == 0 && a.max_ns == 1000 && a.total_ns == 1010);
    drk_time_hist e;
    memset(&e, 0, sizeof e);
    CHECK(drk_time_hist_quantile(&e, 0.5) == 0);
    /* Far past the last bucket: still counted, max exact. */
    drk_time_hist_add(&e, (uint64_t)1 << 62);
    CHECK(e.max_ns == (uint64_t)1 << 62 && drk_time_hist_quantile(&e, 0.5) == (uint64_t)1 << 62);
}

static void test_attribution(void)
{
    drk_gputime_reset(1000);
    drk_time_key a = key("gemm", 64, 256), a2 = key("gemm", 128, 256), b = key("relu", 64, 256);
    for (int i = 0; i < 10; i++) {
        drk_gputime_kernel(&a, 2000 + i * 100, 2050 + i * 100);   /* 50 ns */
        drk_gputime_kernel(&a2, 5000 + i * 100, 5080 + i * 100);  /* 80 ns */
        drk_gputime_kernel(&b, 9000 + i * 100, 9010 + i * 100);   /* 10 ns */
    }
    drk_gputime_copy(DRK_COPY_MEMCPY, 4096, 20000, 20400);
    drk_time_row rows[8];
    size_t n = drk_gputime_rows(rows, 8);
    CHECK(n == 3);
    CHECK(strcmp(rows[0].key.name, "gemm") == 0 && rows[0].key.grid[0] == 128 && rows[0].stats.total_ns == 800);
    CHECK(strcmp(rows[1].key.name, "gemm") == 0 && rows[1].key.grid[0] == 64 && rows[1].stats.n == 10);
    CHECK(strcmp(rows[2].key.name, "relu") == 0 && rows[2].stats.min_ns == 10 && rows[2].stats.max_ns == 10);
    drk_gputime_totals t = drk_gputime_totals_get();
    CHECK(t.kernels == 30 && t.kernel_ns == 1400 && t.copies == 1 && t.copy_ns == 400 && t.copy_bytes == 4096);
    CHECK(t.entries == 3 && t.untracked == 0 && t.late == 0);
}

static void test_rounds(void)
{
    drk_gputime_reset(0);
    drk_time_key a = key("attn", 1, 1), b = key("mlp", 1, 1);
    /* Round 0, [0, 1000): a 100..300, b 200..400 (overlap), copy 700..800:
     * busy 400 ns; gaps 0..100 (edge), 400..700 (mlp -> memcpy), 800..1000. */
    drk_gputime_kernel(&a, 100, 300);
    drk_gputime_kernel(&b, 200, 400);
    drk_gputime_copy(DRK_COPY_MEMSET, 8, 700, 800);
    drk_round_memory mem = {.live_bytes = 10, .reserved_bytes = 20, .pages_moved = 3};
    CHECK(drk_gputime_round_end(1000, "nvtx", &mem) == 1);
    CHECK(drk_gputime_round_end(1000, "nvtx", &mem) == 0); /* an empty round is none */
    const drk_round *r[DRK_ROUNDS_KEPT];
    CHECK(drk_gputime_rounds(r, DRK_ROUNDS_KEPT) == 1);
    CHECK(r[0]->index == 0 && strcmp(r[0]->why, "nvtx") == 0 && r[0]->start_ns == 0 && r[0]->end_ns == 1000);
    CHECK(r[0]->busy_ns == 400 && r[0]->kernel_ns == 400 && r[0]->copy_ns == 100);
    CHECK(r[0]->kernels == 2 && r[0]->copies == 1 && r[0]->memory.reserved_bytes == 20);
    CHECK(r[0]->ngaps == 3);
    CHECK(r[0]->gaps[0].ns == 300 && strcmp(r[0]->gaps[0].after, "mlp") == 0 &&
          strcmp(r[0]->gaps[0].before, "memset") == 0);
    CHECK(r[0]->gaps[1].ns == 200 && strcmp(r[0]->gaps[1].after, "memset") == 0 && r[0]->gaps[1].before == NULL);
    CHECK(r[0]->gaps[2].ns == 100 && r[0]->gaps[2].after == NULL && strcmp(r[0]->gaps[2].before, "attn") == 0);
    CHECK(r[0]->ntop == 2 && r[0]->top[0].stats.total_ns == 200 && r[0]->top[1].stats.total_ns == 200);

    /* Round 1, [1000, 2000): a kernel spanning the boundary counts in the
     * round it started in, its busy time split at the boundary; a record of
     * round 0 arriving now is late and counts here. */
    drk_gputime_kernel(&a, 1900, 2100);
    drk_gputime_kernel(&b, 500, 600);
    CHECK(drk_gputime_round_end(2000, "cuProfilerStop", NULL) == 1);
    CHECK(drk_gputime_rounds(r, DRK_ROUNDS_KEPT) == 2);
    CHECK(r[1]->index == 1 && r[1]->kernels == 2 && r[1]->busy_ns == 100 && r[1]->kernel_ns == 300);
    CHECK(drk_gputime_totals_get().late == 1);
    CHECK(drk_gputime_round_end(3000, "period", NULL) == 1);
    CHECK(drk_gputime_rounds(r, DRK_ROUNDS_KEPT) == 3);
    CHECK(r[2]->busy_ns == 100 && r[2]->kernels == 0); /* the rest of the spanning kernel */

    /* 100,000 rounds: the last DRK_ROUNDS_KEPT kept whole, the rest merged;
     * nothing grows with the number of rounds. */
    size_t entries = drk_gputime_totals_get().entries;
    for (uint64_t i = 3; i < 100000; i++) {
        uint64_t s = i * 1000;
        drk_gputime_kernel(&a, s + 10, s + 110);
        drk_gputime_kernel(&b, s + 200, s + 250);
        drk_gputime_round_end(s + 1000, "period", NULL);
    }
    CHECK(drk_gputime_rounds_closed() == 100000);
    size_t kept = drk_gputime_rounds(r, DRK_ROUNDS_KEPT);
    CHECK(kept == DRK_ROUNDS_KEPT && r[0]->index == 100000 - DRK_ROUNDS_KEPT && r[kept - 1]->index == 99999);
    CHECK(r[kept - 1]->busy_ns == 150 && r[kept - 1]->top[0].stats.total_ns == 100);
    drk_rounds_merged m = drk_gputime_merged();
    CHECK(m.rounds == 100000 - DRK_ROUNDS_KEPT && m.wall_ns == m.rounds * 1000);
    CHECK(drk_gputime_totals_get().entries == entries);
    CHECK(drk_gputime_open_since() == 100000ull * 1000);
}

static void test_limits(void)
{
    drk_gputime_reset(0);
    char name[32];
    for (int i = 0; i < DRK_TIME_ENTRIES + 10; i++) {
        snprintf(name, sizeof name, "k%d", i);
        drk_time_key k = key(name, 1, 1);
        drk_gputime_kernel(&k, 10, 20);
    }
    drk_time_key unnamed = {NULL, {1, 1, 1}, {1, 1, 1}, 0};
    drk_gputime_kernel(&unnamed, 10, 20);
    drk_gputime_totals t = drk_gputime_totals_get();
    CHECK(t.entries == DRK_TIME_ENTRIES && t.untracked == 11 && t.kernels == DRK_TIME_ENTRIES + 11);
    /* A round with more kernel-shapes than it keeps: the rest summed. */
    CHECK(drk_gputime_round_end(100, "period", NULL) == 1);
    const drk_round *r[1];
    CHECK(drk_gputime_rounds(r, 1) == 1);
    CHECK(r[0]->ntop == DRK_ROUND_TOP && r[0]->other_kernels == DRK_TIME_ENTRIES - DRK_ROUND_TOP);
    CHECK(r[0]->busy_ns == 10);
    drk_gputime_dropped(5);
    CHECK(drk_gputime_totals_get().dropped == 5);
    drk_gputime_reset(0);
}

/* One round of `us` long: kernel `a` 10 times, `b` 5 times at `b_ns` each,
 * back to back from the start (so busy is their sum). */
static void steady_round(uint64_t r, uint64_t us, uint64_t b_ns, unsigned a_grid, const drk_round_memory *mem)
{
    uint64_t t = r * us * 1000, s = t;
    drk_time_key a = key("gemm", a_grid, 256), b = key("softmax", 8, 128);
    for (int i = 0; i < 10; i++, s += 50000)
        drk_gputime_kernel(&a, s, s + 50000);
    for (int i = 0; i < 5; i++, s += b_ns)
        drk_gputime_kernel(&b, s, s + b_ns);
    drk_gputime_round_end(t + us * 1000, "nvtx", mem);
}

static const drk_finding *finding(const char *name)
{
    const drk_finding *f[DRK_FINDINGS_MAX];
    size_t n = drk_gputime_findings(f, DRK_FINDINGS_MAX);
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i]->name, name) == 0)
            return f[i];
    return NULL;
}

static void test_findings(void)
{
    /* Steady: busy 600 of 620 us a round, same times, same memory: quiet. */
    drk_round_memory mem = {.live_bytes = 900u << 20, .reserved_bytes = 1000u << 20};
    drk_gputime_reset(0);
    for (uint64_t r = 0; r < 30; r++)
        steady_round(r, 620, 20000, 64, &mem);
    const drk_finding *all[DRK_FINDINGS_MAX];
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 0);

    /* Planted, each from its own round on: softmax 30% slower from round 5;
     * gemm at a new grid in round 7; live memory halves in round 8 (the
     * pool's reserve stays); out of memory in round 9; then the GPU idles. */
    drk_gputime_reset(0);
    for (uint64_t r = 0; r < 14; r++) {
        if (r == 8)
            mem.live_bytes = 500u << 20;
        if (r == 9)
            mem.out_of_memory = 2;
        steady_round(r, r >= 11 ? 6000 : 700, r >= 5 ? 26000 : 20000, r == 7 ? 128 : 64, &mem);
    }
    const drk_finding *f = finding("kernel_slower");
    CHECK(f && f->first_round == 5 && f->rounds >= 1 && strcmp(f->key.name, "softmax") == 0);
    CHECK(f && near((uint64_t)f->value, 26000, 0.04) && near((uint64_t)f->reference, 20000, 0.04));
    CHECK(f && strstr(f->evidence, "round 5: softmax") && strstr(f->evidence, "+30%"));
    f = finding("new_shape");
    CHECK(f && f->first_round == 7 && strcmp(f->key.name, "gemm") == 0 && f->key.grid[0] == 128);
    f = finding("fragmentation");
    CHECK(f && f->first_round == 8 && near((uint64_t)(f->value * 100), 50, 0.03));
    f = finding("out_of_memory");
    CHECK(f && f->first_round == 9 && f->rounds == 1);
    f = finding("gpu_idle");
    CHECK(f && f->first_round == 11 && f->last_round == 13 && f->rounds == 3 && f->value < 0.11);
    CHECK(f && strstr(f->evidence, "largest gaps: idle") && strstr(f->evidence, "after softmax before (round end)"));
    /* Nothing else fired: a new shape does not make its kernel slower. */
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 5);
    /* A kernel at a new shape every round (a sequence length that varies):
     * one entry, counting its new shapes, naming the latest; round 1's is
     * warm-up (DRK_WARMUP_ROUNDS), as a trainer's second step. */
    mem = (drk_round_memory){.live_bytes = 900u << 20, .reserved_bytes = 1000u << 20};
    drk_gputime_reset(0);
    for (uint64_t r = 0; r < 6; r++)
        steady_round(r, 620, 20000, 10 + (unsigned)r, &mem);
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 1);
    f = finding("new_shape");
    CHECK(f && f->first_round == 2 && f->last_round == 5 && f->rounds == 4 && f->value == 4 && f->key.grid[0] == 15);
    CHECK(f && strstr(f->evidence, "(4 new shapes of it so far)"));
    drk_gputime_reset(0);
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 0);
}

static drk_occupancy occ(double theoretical, uint32_t regs, uint32_t dyn, uint32_t limit)
{
    /* Blocks of 8 warps, an SM of 64. */
    return (drk_occupancy){.theoretical = theoretical, .blocks_per_sm = (uint32_t)(theoretical * 8),
                           .warps_per_block = 8, .max_warps_per_sm = 64, .regs = regs, .dynamic_shared = dyn,
                           .block_threads = 256, .limit = limit};
}

/* One round of 620 us: `gemm` at block 256 (dynamic shared memory `dyn`)
 * 10 times 50 us, its records saying `regs` registers (0: they do not say);
 * `softmax` 5 times 20 us; `tiny` once 100 ns. */
static void occ_round(uint64_t r, uint32_t regs, uint32_t dyn)
{
    uint64_t t = r * 620000, s = t;
    drk_time_key a = key("gemm", 64, 256), b = key("softmax", 8, 256), c = key("tiny", 1, 256);
    a.shared_bytes = dyn;
    for (int i = 0; i < 10; i++, s += 50000)
        drk_gputime_kernel_built(&a, regs, 0, s, s + 50000);
    for (int i = 0; i < 5; i++, s += 20000)
        drk_gputime_kernel_built(&b, 32, 0, s, s + 20000);
    drk_gputime_kernel_built(&c, 32, 0, s, s + 100);
    drk_round_memory mem = {.live_bytes = 900u << 20, .reserved_bytes = 1000u << 20};
    drk_gputime_round_end(t + 620000, "nvtx", &mem);
}

static void test_occupancy(void)
{
    drk_time_key gemm = key("gemm", 64, 256), softmax = key("softmax", 8, 256), tiny = key("tiny", 1, 256);
    drk_occupancy full = occ(1.0, 32, 0, DRK_OCC_LIMIT_NONE), half = occ(0.5, 32, 0, DRK_OCC_LIMIT_WARPS),
                  regs128 = occ(0.25, 128, 0, DRK_OCC_LIMIT_REGISTERS), low_tiny = occ(0.125, 32, 0, DRK_OCC_LIMIT_BLOCKS);
    const drk_finding *all[DRK_FINDINGS_MAX];

    /* Steady: every shape at its occupancy, a low one too (softmax at
     * 50%), and the 128-register build known but never run: quiet. */
    drk_gputime_reset(0);
    drk_gputime_occupancy(&gemm, &full);
    drk_gputime_occupancy(&softmax, &half);
    drk_gputime_occupancy(&gemm, &regs128);
    for (uint64_t r = 0; r < 30; r++)
        occ_round(r, 32, 0);
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 0);
    drk_occupancy got;
    CHECK(drk_gputime_occupancy_of(&gemm, &got) && got.regs == 128); /* the latest handed in */

    /* Planted: the same kernel and shape, from round 5 a build of 128
     * registers (its occupancy worked out in round 2, before it ran): found
     * in round 5, one entry however long it lasts. A tiny kernel's drop (it
     * is under 5% of the kernel time) says nothing. */
    drk_gputime_reset(0);
    drk_gputime_occupancy(&gemm, &full);
    drk_gputime_occupancy(&softmax, &half);
    drk_gputime_occupancy(&tiny, &full);
    for (uint64_t r = 0; r < 12; r++) {
        if (r == 2) {
            drk_gputime_occupancy(&gemm, &regs128);
            drk_gputime_occupancy(&tiny, &low_tiny);
        }
        occ_round(r, r >= 5 ? 128 : 32, 0);
    }
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 1);
    const drk_finding *f = finding("occupancy_drop");
    CHECK(f && f->first_round == 5 && f->last_round == 11 && f->rounds == 7 && strcmp(f->key.name, "gemm") == 0);
    CHECK(f && f->value == 0.25 && f->reference == 1.0);
    CHECK(f && strstr(f->evidence, "round 5: gemm at block (256,1,1), dyn smem 0: theoretical occupancy 25% (16 of 64 "
                                   "warps an SM, limited by registers: 128 a thread), was 100% at block (256,1,1), "
                                   "dyn smem 0 in round 4 (32 registers a thread"));

    /* Planted: from round 6 gemm takes 40 KiB of dynamic shared memory, a
     * new shape at half the occupancy of its kernel's best: found in round
     * 6 (as is the new shape). */
    drk_gputime_reset(0);
    drk_time_key gemm_smem = gemm;
    gemm_smem.shared_bytes = 40960;
    drk_occupancy smem = occ(0.5, 32, 40960, DRK_OCC_LIMIT_SHARED);
    drk_gputime_occupancy(&gemm, &full);
    drk_gputime_occupancy(&softmax, &half);
    drk_gputime_occupancy(&gemm_smem, &smem);
    for (uint64_t r = 0; r < 9; r++)
        occ_round(r, 32, r >= 6 ? 40960 : 0);
    f = finding("occupancy_drop");
    CHECK(f && f->first_round == 6 && f->rounds == 3 && f->key.shared_bytes == 40960);
    CHECK(f && strstr(f->evidence, "round 6: gemm at block (256,1,1), dyn smem 40960: theoretical occupancy 50%") &&
          strstr(f->evidence, "limited by shared memory: 40960 bytes a block, 0 static and 40960 dynamic), was 100% "
                              "at block (256,1,1), dyn smem 0 in round 5"));
    CHECK(finding("new_shape") && drk_gputime_findings(all, DRK_FINDINGS_MAX) == 2);

    /* Records that do not say how the function was built: the latest
     * occupancy handed in counts. A drop under 1/8 of the SM's warps
     * (100% to 93.75%) is not worth a finding; to 75% it is. */
    drk_gputime_reset(0);
    drk_gputime_occupancy(&gemm, &full);
    drk_gputime_occupancy(&softmax, &half);
    for (uint64_t r = 0; r < 8; r++) {
        if (r == 3) {
            drk_occupancy o = occ(0.9375, 40, 0, DRK_OCC_LIMIT_REGISTERS);
            drk_gputime_occupancy(&gemm, &o);
        }
        if (r == 5) {
            drk_occupancy o = occ(0.75, 64, 0, DRK_OCC_LIMIT_REGISTERS);
            drk_gputime_occupancy(&gemm, &o);
        }
        occ_round(r, 0, 0);
    }
    f = finding("occupancy_drop");
    CHECK(f && f->first_round == 5 && f->value == 0.75 && f->reference == 1.0);
    CHECK(drk_gputime_findings(all, DRK_FINDINGS_MAX) == 1);

    /* An occupancy of a shape that never ran makes no row. */
    drk_gputime_reset(0);
    drk_gputime_occupancy(&gemm, &full);
    drk_time_row rows[4];
    CHECK(drk_gputime_rows(rows, 4) == 0 && drk_gputime_totals_get().entries == 0);
    CHECK(drk_gputime_occupancy_of(&gemm, &got) && got.theoretical == 1.0 && !drk_gputime_occupancy_of(&tiny, &got));
    drk_gputime_reset(0);
}

/* drk's own records (its trials, in its own context): not the program's
 * busy time, but each round and each gap says what of it they took, the
 * one running past a round's end in the next round too, and gpu_idle's
 * evidence says so. */
static void test_own(void)
{
    drk_round_memory mem = {0};
    drk_time_key a = key("gemm", 64, 256);
    drk_gputime_reset(0);
    /* Round 0, 0-10 ms: gemm 0-1 and 6-7; drk 2-4 and 3-5 (3 ms in all),
     * and 8-12. Round 1, 10-20 ms: gemm 15-16. */
    drk_gputime_kernel(&a, 0, 1000000);
    drk_gputime_own(2000000, 4000000);
    drk_gputime_own(3000000, 5000000);
    drk_gputime_kernel(&a, 6000000, 7000000);
    drk_gputime_own(8000000, 12000000);
    drk_gputime_round_end(10000000, "nvtx", &mem);
    drk_gputime_kernel(&a, 15000000, 16000000);
    drk_gputime_round_end(20000000, "nvtx", &mem);
    drk_gputime_close(UINT64_MAX);
    const drk_round *r[DRK_ROUNDS_KEPT];
    CHECK(drk_gputime_rounds(r, DRK_ROUNDS_KEPT) == 2);
    CHECK(r[0]->busy_ns == 2000000 && r[0]->drk_ns == 5000000 && r[1]->busy_ns == 1000000 && r[1]->drk_ns == 2000000);
    CHECK(r[0]->ngaps == 2 && r[0]->gaps[0].ns == 5000000 && r[0]->gaps[0].drk_ns == 3000000 &&
          r[0]->gaps[1].ns == 3000000 && r[0]->gaps[1].drk_ns == 2000000);
    CHECK(r[1]->ngaps == 2 && r[1]->gaps[0].ns == 5000000 && r[1]->gaps[0].drk_ns == 2000000 &&
          r[1]->gaps[1].ns == 4000000 && r[1]->gaps[1].drk_ns == 0);
    CHECK(drk_gputime_totals_get().own == 3 && drk_gputime_totals_get().own_ns == 8000000);
    const drk_finding *f = finding("gpu_idle");
    CHECK(f && f->last_round == 1 &&
          strstr(f->evidence, "round 1: GPU busy 10.0% of 10.0 ms, and 2000 us of drk's own trials; largest gaps: idle "
                              "5000 us after (round start) before gemm (drk's trials 2000 us of it); idle 4000 us after gemm "
                              "before (round end)"));
    drk_gputime_reset(0);
}

int main(void)
{
    test_hist();
    test_attribution();
    test_rounds();
    test_limits();
    test_findings();
    test_own();
    test_occupancy();
    return CHECK_DONE();
}
