/* Trials (evolve/trial.c) on the stand-in driver: a launch captured by
 * hand (the program's buffers, snapshot copies of what its pointers reach
 * by drk's own PTX analysis), proven through drk_trial_ops against the
 * same kernel from another module (equal), planted wrong kernels in a
 * second module (a skipped write, caught by the poison; a wrong value),
 * and the kernel built under a 32-register budget whose planted bug shows
 * only then (differs). An in-place kernel proves unpoisoned. Paired
 * timing on the stand-in's GPU clock (2x faster; 2.5x slower stops at
 * once; the AB/BA order), out of memory at the first and at a later
 * allocation (nothing leaked), an injected launch failure (an error, never
 * "equal"), and both compare paths: on the host (no fatbin, a garbage one,
 * drk's real one, which the stand-in cannot load, one lacking drk_poison)
 * and through kernels standing for drk_compare/drk_poison. Buffers pass 2
 * MiB, so the host path's staging is gone through in several pieces. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "evolve/image/ptx.h"
#include "evolve/image/ptx_flow.h"
#include "evolve/proof.h"
#include "evolve/reach.h"
#include "evolve/trial.h"
#include "kernels/kernels.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/unit/check.h"

/* trial.h's mirror of drk's kernels' ABI, against the header itself. */
#define SAME_FIELD(a, b, f) (offsetof(a, f) == offsetof(b, f) && sizeof(((a *)0)->f) == sizeof(((b *)0)->f))
_Static_assert(sizeof(drk_trial_compare_result) == sizeof(drk_compare_result) &&
                   SAME_FIELD(drk_trial_compare_result, drk_compare_result, ndiff) &&
                   SAME_FIELD(drk_trial_compare_result, drk_compare_result, first) &&
                   SAME_FIELD(drk_trial_compare_result, drk_compare_result, last) &&
                   SAME_FIELD(drk_trial_compare_result, drk_compare_result, blocks) &&
                   SAME_FIELD(drk_trial_compare_result, drk_compare_result, done) &&
                   SAME_FIELD(drk_trial_compare_result, drk_compare_result, acc_blocks),
               "drk_compare_result mirror");
_Static_assert(sizeof(drk_trial_compare_params) == sizeof(drk_compare_params) &&
                   SAME_FIELD(drk_trial_compare_params, drk_compare_params, a) &&
                   SAME_FIELD(drk_trial_compare_params, drk_compare_params, b) &&
                   SAME_FIELD(drk_trial_compare_params, drk_compare_params, n) &&
                   SAME_FIELD(drk_trial_compare_params, drk_compare_params, result),
               "drk_compare_params mirror");
_Static_assert(sizeof(drk_trial_poison_params) == sizeof(drk_poison_params) &&
                   SAME_FIELD(drk_trial_poison_params, drk_poison_params, dst) &&
                   SAME_FIELD(drk_trial_poison_params, drk_poison_params, n) &&
                   SAME_FIELD(drk_trial_poison_params, drk_poison_params, pattern),
               "drk_poison_params mirror");
_Static_assert(DRK_TRIAL_KERNEL_BLOCK == DRK_KERNELS_BLOCK && DRK_TRIAL_KERNEL_BLOCKS_PER_SM == DRK_KERNELS_BLOCKS_PER_SM &&
                   DRK_TRIAL_KERNEL_BYTES == DRK_KERNELS_BYTES_PER_THREAD,
               "drk's kernels' geometry");

static drk_driver table;

static void fill(void)
{
#define FILL_(member, name, params) table.member = (__typeof__(table.member))dlsym(RTLD_DEFAULT, #name);
    DRK_DRIVER_ENTRIES(FILL_)
#undef FILL_
}

#define N 600000u             /* words a buffer: 2.4 MB, past the staging buffer */
#define BLOCK 256u
#define GRID ((N + BLOCK - 1) / BLOCK)

#define HEAD ".version 8.0\n.target sm_90\n.address_size 64\n\n"
/* c[i] = a[i] + b[i]; and x[i] = 2 x[i] + 1. */
static const char ptx[] = HEAD
    ".visible .entry tadd(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<11>;\n"
    "\tld.param.u64 %rd1, [a];\n\tld.param.u64 %rd2, [b];\n\tld.param.u64 %rd3, [c];\n\tld.param.u32 %r2, [n];\n"
    "\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %ntid.x;\n\tmov.u32 %r5, %tid.x;\n"
    "\tmad.lo.s32 %r1, %r3, %r4, %r5;\n\tsetp.ge.u32 %p1, %r1, %r2;\n\t@%p1 bra DONE;\n"
    "\tcvta.to.global.u64 %rd4, %rd1;\n\tcvta.to.global.u64 %rd5, %rd2;\n\tcvta.to.global.u64 %rd6, %rd3;\n"
    "\tmul.wide.u32 %rd7, %r1, 4;\n\tadd.s64 %rd8, %rd4, %rd7;\n\tld.global.u32 %r6, [%rd8];\n"
    "\tadd.s64 %rd9, %rd5, %rd7;\n\tld.global.u32 %r7, [%rd9];\n\tadd.s32 %r8, %r6, %r7;\n"
    "\tadd.s64 %rd10, %rd6, %rd7;\n\tst.global.u32 [%rd10], %r8;\nDONE:\n\tret;\n}\n\n"
    ".visible .entry tinc(.param .u64 x, .param .u32 n)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<5>;\n"
    "\tld.param.u64 %rd1, [x];\n\tld.param.u32 %r2, [n];\n"
    "\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %ntid.x;\n\tmov.u32 %r5, %tid.x;\n"
    "\tmad.lo.s32 %r1, %r3, %r4, %r5;\n\tsetp.ge.u32 %p1, %r1, %r2;\n\t@%p1 bra DONE;\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tmul.wide.u32 %rd3, %r1, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
    "\tld.global.u32 %r6, [%rd4];\n\tshl.b32 %r7, %r6, 1;\n\tadd.s32 %r7, %r7, 1;\n"
    "\tst.global.u32 [%rd4], %r7;\nDONE:\n\tret;\n}\n";

static unsigned gid(const fakecuda_thread *t) { return t->blockIdx.x * t->blockDim.x + t->threadIdx.x; }
#define ARG(t, i, type) (*(type *)(t)->params[i])

/* The order of tadd's launches, by the registers of the function run. */
static unsigned order[64], norder;

static void tadd(const fakecuda_thread *t)
{
    unsigned i = gid(t);
    if (i == 0 && norder < 64)
        order[norder++] = t->regs;
    if (i >= ARG(t, 3, uint32_t))
        return;
    uint32_t v = ARG(t, 0, uint32_t *)[i] + ARG(t, 1, uint32_t *)[i];
    if (t->regs == 32 && i == 5)
        v ^= 1; /* the planted spill bug: only under a 32-register budget */
    ARG(t, 2, uint32_t *)[i] = v;
}
static void tadd_skip(const fakecuda_thread *t)
{
    unsigned i = gid(t);
    if (i < ARG(t, 3, uint32_t) && i % 2 == 0)
        ARG(t, 2, uint32_t *)[i] = ARG(t, 0, uint32_t *)[i] + ARG(t, 1, uint32_t *)[i];
}
static void tadd_wrong(const fakecuda_thread *t)
{
    unsigned i = gid(t);
    if (i < ARG(t, 3, uint32_t))
        ARG(t, 2, uint32_t *)[i] = ARG(t, 0, uint32_t *)[i] + ARG(t, 1, uint32_t *)[i] + (i == 7);
}
static void tinc(const fakecuda_thread *t)
{
    unsigned i = gid(t);
    if (i < ARG(t, 1, uint32_t))
        ARG(t, 0, uint32_t *)[i] = 2 * ARG(t, 0, uint32_t *)[i] + 1;
}
static void tinc_half(const fakecuda_thread *t)
{
    unsigned i = gid(t);
    if (i < ARG(t, 1, uint32_t) / 2)
        ARG(t, 0, uint32_t *)[i] = 2 * ARG(t, 0, uint32_t *)[i] + 1;
}

/* Stand-ins for drk's kernels, by their ABI (kernels/kernels.h): a grid
 * stride of 16 bytes a thread, the accumulators, `done` by the last. */
static unsigned compare_grid, compare_block;

static void fake_compare(const fakecuda_thread *t)
{
    const uint8_t *a = (const uint8_t *)(uintptr_t)ARG(t, 0, uint64_t);
    const uint8_t *b = (const uint8_t *)(uintptr_t)ARG(t, 1, uint64_t);
    uint64_t n = ARG(t, 2, uint64_t);
    drk_compare_result *r = (drk_compare_result *)(uintptr_t)ARG(t, 3, uint64_t);
    uint64_t threads = (uint64_t)t->gridDim.x * t->blockDim.x;
    for (uint64_t off = (uint64_t)gid(t) * 16; off < n; off += threads * 16)
        for (uint64_t i = off; i < off + 16 && i < n; i++)
            if (a[i] != b[i]) {
                r->acc_ndiff++;
                if (~i > r->acc_first_inv)
                    r->acc_first_inv = ~i;
                if (i + 1 > r->acc_last_end)
                    r->acc_last_end = i + 1;
            }
    if (t->threadIdx.x == 0)
        r->acc_blocks++;
    if (t->blockIdx.x == t->gridDim.x - 1 && t->threadIdx.x == t->blockDim.x - 1) {
        r->ndiff = r->acc_ndiff;
        r->first = r->ndiff ? ~r->acc_first_inv : UINT64_MAX;
        r->last = r->ndiff ? r->acc_last_end - 1 : UINT64_MAX;
        r->blocks = r->acc_blocks;
        r->done = 1;
        compare_grid = t->gridDim.x, compare_block = t->blockDim.x;
    }
}
static void fake_poison(const fakecuda_thread *t)
{
    uint8_t *d = (uint8_t *)(uintptr_t)ARG(t, 0, uint64_t);
    uint64_t n = ARG(t, 1, uint64_t), pattern = ARG(t, 2, uint64_t);
    uint64_t threads = (uint64_t)t->gridDim.x * t->blockDim.x;
    for (uint64_t off = (uint64_t)gid(t) * 16; off < n; off += threads * 16)
        for (uint64_t i = off; i < off + 16 && i < n; i++)
            d[i] = (uint8_t)(pattern >> (8 * (i % 8)));
}
/* A compare that never says it finished. */
static void lazy_compare(const fakecuda_thread *t) { (void)t; }

static int resolve(CUdeviceptr p, drk_extent *out)
{
    CUdeviceptr base;
    size_t size;
    if (table.mem_get_address_range(&base, &size, p) != CUDA_SUCCESS)
        return -1;
    *out = (drk_extent){base, size, 1};
    return 0;
}

/* The program's side: a kernel's PTX and flow, its module, its buffers. */
static drk_ptx ptxm;
static drk_ptx_flow **flows;
static CUmodule prog;
static CUfunction f_tadd, f_tinc;
static CUdeviceptr a, b, c;
static uint32_t host_a[N], host_b[N], host_c[N], program_c[N];

/* A capture by hand: the launch's bytes, what they reach, a snapshot of it. */
typedef struct captured {
    uint8_t bytes[DRK_PARAMS_MAX];
    size_t len;
    drk_reach reach;
    CUdeviceptr snap[DRK_REACH_MAX];
    const drk_ptx_flow *flow;
} captured;

static int capture(captured *cap, unsigned kernel, void **kp)
{
    memset(cap, 0, sizeof *cap);
    const drk_kernel_info *k = &ptxm.kernels[kernel];
    cap->flow = flows[kernel];
    if (drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, cap->bytes, sizeof cap->bytes, &cap->len) != 0 ||
        drk_reach_of(cap->flow, cap->bytes, cap->len, resolve, 1u << 30, &cap->reach) != 0)
        return -1;
    for (unsigned i = 0; i < cap->reach.n; i++)
        if (cuMemAlloc(&cap->snap[i], cap->reach.alloc[i].size) != CUDA_SUCCESS ||
            cuMemcpyDtoD(cap->snap[i], cap->reach.alloc[i].base, cap->reach.alloc[i].size) != CUDA_SUCCESS)
            return -1;
    return 0;
}

static const uint32_t grid3[3] = {GRID, 1, 1}, block3[3] = {BLOCK, 1, 1};

static int open_tadd(drk_trial *t, drk_trial_env *env, captured *cap)
{
    uint32_t n = N;
    void *kp[4] = {&a, &b, &c, &n};
    if (capture(cap, 0, kp) != 0)
        return -100;
    return drk_trial_open(t, env, cap->flow, &cap->reach, cap->snap, cap->bytes, cap->len, grid3, block3, 0, f_tadd);
}

static drk_proof_result prove(drk_trial *t, const drk_proof_ref *ref, CUfunction variant)
{
    t->variant = (drk_trial_fn){variant, -1};
    drk_proof_ops ops = drk_trial_ops(t);
    return drk_proof_variant(&ops, ref);
}

static void reference(drk_trial *t, drk_proof_ref *ref)
{
    drk_proof_ops ops = drk_trial_ops(t);
    drk_proof_reference(&ops, ref);
}

static int near(double x, double want) { return x > want * 0.999 && x < want * 1.001; }

/* Bytes of the skip variant's output that differ from O1: the odd words
 * hold the poison, which repeats from offset 0 (W starts there). */
static uint64_t poison_ndiff(uint64_t *last)
{
    uint64_t nd = 0;
    for (unsigned i = 1; i < N; i += 2)
        for (unsigned k = 0; k < 4; k++) {
            uint64_t off = 4ull * i + k;
            if ((uint8_t)(host_c[i] >> (8 * k)) != (uint8_t)(DRK_PROOF_POISON >> (8 * (off % 8))))
                nd++, *last = off;
        }
    return nd;
}

/* Three variants' proofs and a timed run of each, queued together and
 * waited for once: each verdict from its own slots, each time its own;
 * the fence held from the first replay queued to the wait. */
static void test_batch(drk_trial *t, const drk_proof_ref *ref, CUfunction same, CUfunction wrong, CUfunction f32)
{
    static pthread_mutex_t fence = PTHREAD_MUTEX_INITIALIZER;
    static const atomic_int gone = 0;
    t->fence = &fence, t->gone = &gone;
    drk_proof_ops ops = drk_trial_ops(t);
    CUfunction fns[3] = {same, wrong, f32};
    drk_proof_result r[3];
    int ticket[3];
    unsigned long long syncs = fakecuda_calls("cuStreamSynchronize");
    uint64_t before = t->gpu_ns;
    for (unsigned k = 0; k < 3; k++) {
        t->variant = (drk_trial_fn){fns[k], -1};
        CHECK(drk_proof_variant_queue(&ops, ref, k * ops.n, &r[k]) == 0);
        CHECK((ticket[k] = drk_trial_queue_timed(t, t->variant)) >= 0);
    }
    CHECK(pthread_mutex_trylock(&fence) == EBUSY);
    CHECK(drk_trial_ticket_ns(t, ticket[0]) < 0 && strstr(t->why, "no time for replay"));
    static drk_diff d[3 * 3];
    CHECK(ops.wait(ops.self, d, 3 * ops.n) == 0);
    CHECK(!t->env->kernels || fakecuda_calls("cuStreamSynchronize") - syncs == 1);
    CHECK(pthread_mutex_trylock(&fence) == 0 && pthread_mutex_unlock(&fence) == 0);
    for (unsigned k = 0; k < 3; k++)
        r[k] = drk_proof_variant_check(&ops, ref, d + k * ops.n);
    CHECK(r[0].verdict == DRK_PROOF_EQUAL);
    CHECK(r[1].verdict == DRK_PROOF_DIFFERS && r[1].alloc == 2 && r[1].diff.first == 28);
    CHECK(r[2].verdict == DRK_PROOF_DIFFERS && r[2].alloc == 2 && r[2].diff.first == 20);
    CHECK(near(drk_trial_ticket_ns(t, ticket[0]), 2000) && near(drk_trial_ticket_ns(t, ticket[2]), 1000));
    double ns_wrong = drk_trial_ticket_ns(t, ticket[1]);
    CHECK(ns_wrong > 0 && t->gpu_ns - before == 2 * (2000 + 1000) + 2 * (uint64_t)ns_wrong); /* two runs each */
    /* A slot read that nothing was compared into is refused. */
    CHECK(ops.wait(ops.self, d, 1) == -1 && strstr(t->why, "compare slot 0 was not queued"));
    /* The bytes the budget charges: a copy reads and writes every
     * allocation, poison writes its span, a compare reads both sides. */
    uint64_t all = 0, moved = t->moved;
    for (unsigned i = 0; i < ops.n; i++)
        all += ops.size(ops.self, i);
    CHECK(moved > 0 && ops.copy(ops.self, DRK_SET_WORK, DRK_SET_SNAPSHOT) == 0 && t->moved - moved == 2 * all);
    CHECK(ops.poison(ops.self, DRK_SET_WORK, 2, 8, 40, DRK_PROOF_POISON) == 0 && t->moved - moved == 2 * all + 40);
    CHECK(ops.compare(ops.self, DRK_SET_WORK, DRK_SET_REFERENCE, 2, 0) == 0 &&
          t->moved - moved == 2 * all + 40 + 2 * ops.size(ops.self, 2));
    CHECK(ops.wait(ops.self, d, 1) == 0 && d[0].ndiff > 0);
    t->fence = NULL, t->gone = NULL;
}

/* After a tainted wait the engine goes on with whole copies (work.spans
 * 0) and check_whole: a timed run is still compared with O1, and one that
 * differs is named (work.differed), the original's runs not; without
 * check_whole (DRK_EVOLVE_SPANS=0) nothing is compared. */
static void test_check_whole(drk_trial *t, const drk_proof_ref *ref, CUfunction wrong)
{
    drk_proof_ops ops = drk_trial_ops(t);
    const drk_proof_ref *keep = t->ref;
    int spans = t->work.spans;
    t->ref = ref, t->work.spans = 0;
    static drk_diff d[1];
    for (int whole = 0; whole < 2; whole++) {
        t->check_whole = whole;
        uint64_t moved = t->moved;
        CHECK(drk_trial_queue_timed(t, t->original) >= 0);
        t->work.tag = 3;
        CHECK(drk_trial_queue_timed(t, (drk_trial_fn){wrong, -1}) >= 0);
        t->work.tag = 0;
        CHECK(ops.wait(ops.self, d, 0) == 0);
        uint64_t all = 0;
        for (unsigned i = 0; i < ops.n; i++)
            all += ops.size(ops.self, i);
        /* Two whole copies (and W poisoned), and with check_whole two compares of everything. */
        CHECK(t->moved - moved >= (whole ? 8 : 4) * all && t->moved - moved < (whole ? 10 : 6) * all);
        CHECK(whole ? t->work.failed && t->work.differed == 3 && !t->work.nondeterministic
                    : !t->work.failed && t->work.differed == 0);
    }
    t->check_whole = 0, t->work.spans = spans, t->ref = keep;
}

static void test_proof(drk_trial_env *env, CUmodule other, CUmodule bad, CUmodule budget)
{
    CUfunction same, skip, wrong, f32;
    CHECK(cuModuleGetFunction(&same, other, "tadd") == CUDA_SUCCESS &&
          cuModuleGetFunction(&skip, bad, "tadd_skip") == CUDA_SUCCESS &&
          cuModuleGetFunction(&wrong, bad, "tadd_wrong") == CUDA_SUCCESS &&
          cuModuleGetFunction(&f32, budget, "tadd") == CUDA_SUCCESS);
    int regs = 0;
    CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f32) == CUDA_SUCCESS && regs == 32);
    CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, same) == CUDA_SUCCESS && regs == 64);

    unsigned long long live = fakecuda_live_device_allocations();
    captured cap;
    drk_trial t;
    CHECK(open_tadd(&t, env, &cap) == DRK_TRIAL_OK);
    CHECK(cap.reach.n == 3 && cap.reach.alloc[0].base == a && cap.reach.alloc[2].base == c &&
          cap.reach.alloc[2].size == 4ull * N);
    CHECK(fakecuda_live_device_allocations() == live + 9); /* the snapshot and sets 1 and 2 */
    /* Each set's bytes point at its own copies. */
    uint64_t w;
    memcpy(&w, t.params[DRK_SET_WORK] + 16, 8);
    CHECK(w == t.set[DRK_SET_WORK][2] && w != c);

    unsigned long long compares = fakecuda_kernel_launches("drk_compare");
    unsigned long long syncs = fakecuda_calls("cuStreamSynchronize");
    drk_proof_ref ref;
    reference(&t, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned == 1 && ref.runs == 3 && ref.written == 1);
    /* Queued, and waited for twice (the host path's compares wait too). */
    CHECK(!env->kernels || fakecuda_calls("cuStreamSynchronize") - syncs == 2);
    CHECK(ref.first[0] == UINT64_MAX && ref.first[1] == UINT64_MAX && ref.first[2] == 0 &&
          ref.last[2] == 4ull * N - 1);
    CHECK(t.gpu_ns == 3 * 2000); /* three replays of the 64-register original */

    uint64_t all = 0, moved = t.moved;
    for (unsigned i = 0; i < cap.reach.n; i++)
        all += cap.reach.alloc[i].size;
    drk_proof_result r = prove(&t, &ref, same);
    CHECK(r.verdict == DRK_PROOF_EQUAL);
    /* Its run prepared: with whole copies, a copy of all (read and
     * written) and W poisoned; restoring only what may differ, the inputs
     * stay as O3 left them and W (all of c) is poisoned. Then compared. */
    CHECK(t.moved - moved == (env->spans ? 0 : 2 * all) + 4ull * N + 2 * all);
    r = prove(&t, &ref, wrong);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 2 && r.diff.ndiff == 1 && r.diff.first == 28 &&
          r.diff.last == 28);
    r = prove(&t, &ref, f32);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 2 && r.diff.ndiff == 1 && r.diff.first == 20 &&
          r.diff.last == 20 && strstr(r.why, "allocation 2 (1 byte, offsets 20..20)"));
    r = prove(&t, &ref, skip);
    uint64_t last = 0, nd = poison_ndiff(&last);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 2 && r.diff.ndiff == nd && r.diff.first == 4 &&
          r.diff.last == last && last == 4ull * N - 1);
    /* The poison itself, past the staging buffer's size too. */
    static uint32_t got[N];
    CHECK(cuMemcpyDtoH(got, t.set[DRK_SET_WORK][2], sizeof got) == CUDA_SUCCESS);
    unsigned bad_poison = 0;
    for (unsigned i = 1; i < N; i += 2)
        bad_poison += got[i] != (uint32_t)(DRK_PROOF_POISON >> 32); /* odd words: offsets 4 mod 8 */
    CHECK(bad_poison == 0 && got[N - 2] == host_c[N - 2]);
    if (env->kernels) {
        /* 3 compares a step of the reference, 3 a variant. */
        CHECK(fakecuda_kernel_launches("drk_compare") - compares == 9 + 4 * 3);
        CHECK(compare_block == DRK_KERNELS_BLOCK && compare_grid == (4 * N + 4095) / 4096);
    } else {
        CHECK(fakecuda_kernel_launches("drk_compare") == compares);
    }

    test_batch(&t, &ref, same, wrong, f32);
    test_check_whole(&t, &ref, wrong);

    /* Launch failures: the reference's, a variant's. Never "equal". */
    CHECK(fakecuda_inject_error("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED, 1) == 0);
    drk_proof_ref broken;
    reference(&t, &broken);
    CHECK(broken.state == DRK_PROOF_ERROR && strstr(t.why, "cuLaunchKernel") && strstr(t.why, "CUresult 719"));
    CHECK(prove(&t, &broken, same).verdict == DRK_PROOF_ERROR);
    reference(&t, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL);
    /* The variant's first launch (drk_poison's, on the kernel path). */
    CHECK(fakecuda_inject_error("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED, 1) == 0);
    r = prove(&t, &ref, same);
    CHECK(r.verdict == DRK_PROOF_ERROR && strstr(t.why, "cuLaunchKernel") && strstr(t.why, "CUresult 719"));
    CHECK(prove(&t, &ref, same).verdict == DRK_PROOF_EQUAL);

    /* Paired timing: the 32-register build 2x faster (planted times). */
    CHECK(fakecuda_set_kernel_time("tadd", 32, 1000) == 0);
    float sp[8];
    double orig = 0;
    uint64_t before = t.gpu_ns;
    t.variant = (drk_trial_fn){f32, -1};
    norder = 0;
    CHECK(drk_trial_time(&t, 4, sp, &orig) == 4);
    CHECK(near(sp[0], 2.0) && near(sp[1], 2.0) && near(sp[2], 2.0) && near(sp[3], 2.0) && near(orig, 2000));
    CHECK(t.gpu_ns - before == 4 * (2000 + 1000));
    static const unsigned want_order[8] = {64, 32, 32, 64, 64, 32, 32, 64};
    CHECK(norder == 8 && memcmp(order, want_order, sizeof want_order) == 0);
    /* 2.5x slower: the first pair ends it. */
    CHECK(fakecuda_set_kernel_time("tadd", 32, 5000) == 0);
    CHECK(drk_trial_time(&t, 4, sp, &orig) == 1 && near(sp[0], 0.4) && near(orig, 2000));
    /* 1.5x slower: sampled on. */
    CHECK(fakecuda_set_kernel_time("tadd", 32, 3000) == 0);
    CHECK(drk_trial_time(&t, 3, sp, NULL) == 3 && near(sp[2], 2.0 / 3));
    CHECK(fakecuda_inject_error("cuEventElapsedTime_v2", CUDA_ERROR_INVALID_HANDLE, 1) == 0);
    CHECK(drk_trial_time(&t, 2, sp, NULL) == -1 && strstr(t.why, "cuEventElapsedTime_v2 failed: CUresult 400"));
    CHECK(fakecuda_set_kernel_time("tadd", 32, 1000) == 0);

    /* Against the original's mean on the capture: the variant's runs alone. */
    CHECK(drk_trial_time_variant(&t, 1, sp) == -1 && strstr(t.why, "the original was not timed"));
    before = t.gpu_ns;
    norder = 0;
    CHECK(drk_trial_time_original(&t, 4) == 0 && near(t.original_ns, 2000));
    CHECK(drk_trial_time_variant(&t, 3, sp) == 3 && near(sp[0], 2.0) && near(sp[2], 2.0));
    CHECK(t.gpu_ns - before == 4 * 2000 + 3 * 1000);
    static const unsigned want_runs[7] = {64, 64, 64, 64, 32, 32, 32};
    CHECK(norder == 7 && memcmp(order, want_runs, sizeof want_runs) == 0);
    CHECK(fakecuda_set_kernel_time("tadd", 32, 5000) == 0); /* 2.5x slower: one run ends it */
    CHECK(drk_trial_time_variant(&t, 3, sp) == 1 && near(sp[0], 0.4));
    CHECK(fakecuda_set_kernel_time("tadd", 32, 1000) == 0);
    /* The original's median: one run held up does not move it; nor the
     * GPU time charged (each run at its function's quickest: a run held
     * up by the program's time slices is counted as one that was not),
     * while the events' time counts it. */
    int runs[4];
    double charged = drk_trial_gpu_ns(&t);
    before = t.gpu_ns;
    for (int i = 0; i < 4; i++) {
        CHECK(fakecuda_set_kernel_time("tadd", 64, i == 2 ? 20000 : 2000) == 0);
        CHECK((runs[i] = drk_trial_queue_timed(&t, (drk_trial_fn){f_tadd, -1})) >= 0);
    }
    CHECK(fakecuda_set_kernel_time("tadd", 64, 2000) == 0);
    CHECK(drk_trial_wait(&t) == 0 && drk_trial_read_original_at(&t, runs, 4) == 0 && near(t.original_ns, 2000));
    CHECK(drk_trial_read_original_at(&t, runs, 3) == 0 && near(t.original_ns, 2000)); /* odd: the middle one */
    CHECK(t.gpu_ns - before == 3 * 2000 + 20000 && near(drk_trial_gpu_ns(&t) - charged, 4 * 2000));
    /* Every second run held up (the H200's pairs: 9.0, 2.05, 9.5, 2.06 for a
     * 2.05x variant): the median of the runs that were not, for the
     * original's time and in each pair. */
    for (int i = 0; i < 4; i++) {
        CHECK(fakecuda_set_kernel_time("tadd", 64, i % 2 ? 2000 : 9000) == 0);
        CHECK((runs[i] = drk_trial_queue_timed(&t, (drk_trial_fn){f_tadd, -1})) >= 0);
    }
    CHECK(drk_trial_wait(&t) == 0 && drk_trial_read_original_at(&t, runs, 4) == 0 && near(t.original_ns, 2000));
    int first = -1;
    for (unsigned p = 0; p < 4; p++)
        for (int j = 0; j < 2; j++) {
            int v = p % 2 ? 1 - j : j;
            CHECK(fakecuda_set_kernel_time("tadd", 64, !v && p % 2 == 0 ? 9000 : 2000) == 0);
            int k = drk_trial_queue_timed(&t, (drk_trial_fn){v ? f32 : f_tadd, -1});
            CHECK(k >= 0);
            first = first < 0 ? k : first;
        }
    CHECK(drk_trial_wait(&t) == 0 && drk_trial_read_pairs(&t, first, 4, sp, &orig) == 4);
    CHECK(near(sp[0], 2.0) && near(sp[1], 2.0) && near(sp[2], 2.0) && near(sp[3], 2.0) && near(orig, 2000));
    CHECK(fakecuda_set_kernel_time("tadd", 64, 2000) == 0);

    /* Carveout siblings: one function, each launch asking for its own
     * carveout (cuLaunchKernelEx's attribute), none asked for the
     * original; proven and timed apart, each counted at its own quickest
     * run. */
    CHECK(fakecuda_set_carveout_time("tadd", 100, 500) == 0);
    unsigned long long at100 = fakecuda_carveout_launches("tadd", 100);
    drk_trial_fn sib[2] = {{same, 100}, {same, -1}};
    drk_proof_ops cops = drk_trial_ops(&t);
    t.variant = sib[0];
    CHECK(drk_proof_variant(&cops, &ref).verdict == DRK_PROOF_EQUAL);
    CHECK(fakecuda_carveout_launches("tadd", 100) - at100 == 1);
    CHECK(fakecuda_inject_error("cuLaunchKernelEx", CUDA_ERROR_LAUNCH_FAILED, 1) == 0);
    r = drk_proof_variant(&cops, &ref);
    CHECK(r.verdict == DRK_PROOF_ERROR && strstr(t.why, "cuLaunchKernelEx") && strstr(t.why, "CUresult 719"));
    charged = drk_trial_gpu_ns(&t);
    at100 = fakecuda_carveout_launches("tadd", 100);
    for (int i = 0; i < 4; i++)
        CHECK((runs[i] = drk_trial_queue_timed(&t, sib[i % 2])) >= 0);
    CHECK(drk_trial_wait(&t) == 0);
    CHECK(near(drk_trial_ticket_ns(&t, runs[0]), 500) && near(drk_trial_ticket_ns(&t, runs[1]), 2000) &&
          near(drk_trial_ticket_ns(&t, runs[2]), 500) && near(drk_trial_ticket_ns(&t, runs[3]), 2000));
    CHECK(near(drk_trial_gpu_ns(&t) - charged, 2 * 500 + 2 * 2000));
    CHECK(fakecuda_carveout_launches("tadd", 100) - at100 == 2);
    CHECK(drk_trial_time_original(&t, 2) == 0 && near(t.original_ns, 2000));
    float csp[4];
    CHECK(drk_trial_time_variant(&t, 2, csp) == 2 && near(csp[0], 4.0) && near(csp[1], 4.0));
    CHECK(fakecuda_set_carveout_time("tadd", 100, 0) == 0);

    /* Nothing of the program's touched: c is still the program's. */
    static uint32_t now_c[N];
    CHECK(cuMemcpyDtoH(now_c, c, sizeof now_c) == CUDA_SUCCESS && memcmp(now_c, program_c, sizeof now_c) == 0);

    drk_trial_close(&t);
    drk_trial_env_trim(env, 0); /* kept buffers freed: the counts below are exact */
    CHECK(fakecuda_live_device_allocations() == live);
}

/* In place: W is read, so variants run unpoisoned. */
static void test_inplace(drk_trial_env *env, CUmodule other, CUmodule bad)
{
    CUfunction same, half;
    CHECK(cuModuleGetFunction(&same, other, "tinc") == CUDA_SUCCESS &&
          cuModuleGetFunction(&half, bad, "tinc_half") == CUDA_SUCCESS);
    unsigned long long live = fakecuda_live_device_allocations();
    uint32_t n = N;
    void *kp[2] = {&a, &n};
    captured cap;
    drk_trial t;
    CHECK(capture(&cap, 1, kp) == 0 && cap.reach.n == 1);
    CHECK(drk_trial_open(&t, env, cap.flow, &cap.reach, cap.snap, cap.bytes, cap.len, grid3, block3, 0, f_tinc) ==
          DRK_TRIAL_OK);
    drk_proof_ref ref;
    reference(&t, &ref);
    CHECK(ref.state == DRK_PROOF_EQUAL && ref.poisoned == 0 && ref.written == 1 && ref.first[0] == 0);
    CHECK(prove(&t, &ref, same).verdict == DRK_PROOF_EQUAL);
    drk_proof_result r = prove(&t, &ref, half);
    CHECK(r.verdict == DRK_PROOF_DIFFERS && r.alloc == 0 && r.diff.first == 4ull * (N / 2));
    drk_trial_close(&t);
    drk_trial_env_trim(env, 0); /* kept buffers freed: the counts below are exact */
    CHECK(fakecuda_live_device_allocations() == live);
}

/* Buffers a closed trial leaves are kept for the next capture of the same
 * sizes (a cuMemFree can hold the program's launches), and trimmed. */
static void test_kept(drk_trial_env *env)
{
    drk_trial_env_trim(env, 0);
    unsigned long long live = fakecuda_live_device_allocations();
    captured cap;
    drk_trial t;
    CHECK(open_tadd(&t, env, &cap) == DRK_TRIAL_OK && cap.reach.n == 3);
    CHECK(fakecuda_live_device_allocations() == live + 9);
    drk_trial_close(&t);
    CHECK(fakecuda_live_device_allocations() == live + 9 && env->nkept == 9); /* kept, not freed */
    /* The next capture's snapshot (3 buffers of the test's own) and sets from the kept ones. */
    CHECK(open_tadd(&t, env, &cap) == DRK_TRIAL_OK);
    CHECK(fakecuda_live_device_allocations() == live + 12 && env->nkept == 3);
    drk_trial_close(&t);
    CHECK(env->nkept == 12);
    /* A buffer of a size far from any request is not taken for it. */
    CUdeviceptr big;
    CHECK(drk_trial_buf_get(env, &big, 64ull << 20) == CUDA_SUCCESS);
    CHECK(fakecuda_live_device_allocations() == live + 13);
    drk_trial_buf_put(env, big, 64ull << 20);
    drk_trial_env_trim(env, 4ull * N * 3); /* the big one goes first */
    size_t kept = 0;
    for (unsigned i = 0; i < env->nkept; i++) {
        kept += env->kept[i].size;
        CHECK(env->kept[i].size < (64ull << 20));
    }
    CHECK(kept <= 4ull * N * 3);
    drk_trial_env_trim(env, 0);
    CHECK(env->nkept == 0 && fakecuda_live_device_allocations() == live);
}

static void test_memory(drk_trial_env *env)
{
    unsigned long long live = fakecuda_live_device_allocations();
    captured cap;
    drk_trial t;
    /* The first allocation fails. */
    uint32_t n = N;
    void *kp[4] = {&a, &b, &c, &n};
    CHECK(capture(&cap, 0, kp) == 0);
    CHECK(fakecuda_inject_error("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 1) == 0);
    CHECK(drk_trial_open(&t, env, cap.flow, &cap.reach, cap.snap, cap.bytes, cap.len, grid3, block3, 0, f_tadd) ==
          DRK_TRIAL_NO_MEMORY);
    CHECK(strstr(t.why, "cuMemAlloc_v2") && strstr(t.why, "CUresult 2"));
    CHECK(fakecuda_live_device_allocations() == live + 3); /* only the snapshot, the trial's until closed */
    drk_trial_close(&t);
    drk_trial_env_trim(env, 0); /* kept buffers freed: the counts below are exact */
    CHECK(fakecuda_live_device_allocations() == live);
    /* A later one: set 1 made, set 2's second buffer runs out. */
    CHECK(capture(&cap, 0, kp) == 0);
    fakecuda_set_total_memory(fakecuda_live_device_bytes() + 4 * (4ull * N) + 100);
    CHECK(drk_trial_open(&t, env, cap.flow, &cap.reach, cap.snap, cap.bytes, cap.len, grid3, block3, 0, f_tadd) ==
          DRK_TRIAL_NO_MEMORY);
    CHECK(fakecuda_live_device_allocations() == live + 3);
    fakecuda_set_total_memory(1ull << 30);
    drk_trial_close(&t);
    drk_trial_env_trim(env, 0); /* kept buffers freed: the counts below are exact */
    CHECK(fakecuda_live_device_allocations() == live);
    /* Another failure is no shortage of memory. */
    CHECK(capture(&cap, 0, kp) == 0);
    CHECK(fakecuda_inject_error("cuMemAlloc_v2", CUDA_ERROR_INVALID_VALUE, 1) == 0);
    CHECK(drk_trial_open(&t, env, cap.flow, &cap.reach, cap.snap, cap.bytes, cap.len, grid3, block3, 0, f_tadd) ==
          DRK_TRIAL_FAILED);
    drk_trial_close(&t);
    drk_trial_env_trim(env, 0); /* kept buffers freed: the counts below are exact */
    CHECK(fakecuda_live_device_allocations() == live);
}

static void test_env(CUcontext ctx)
{
    unsigned long long live = fakecuda_live_device_allocations(), host = fakecuda_live_host_allocations();
    unsigned long long modules = fakecuda_live_modules();
    drk_trial_env env;
    CHECK(drk_trial_env_open(&env, &table, ctx, "not a fatbin") == 0 && env.kernels == NULL && env.staging &&
          strstr(env.why, "did not load") && strstr(env.why, "CUresult 200") && strstr(env.why, "host"));
    CHECK(env.sm == 90 && env.sms == 132 && env.stream && env.ev[0] && env.ev[1] && env.result);
    drk_trial_env_close(&env);
    if (drk_kernels_fatbin_size) {
        CHECK(drk_trial_env_open(&env, &table, ctx, drk_kernels_fatbin) == 0 && env.kernels == NULL &&
              strstr(env.why, "did not load"));
        drk_trial_env_close(&env);
    }
    CHECK(drk_trial_env_open(&env, &table, ctx, "DRKFAKE1\ndrk_compare\n") == 0 && env.kernels == NULL &&
          strstr(env.why, "lack drk_poison"));
    drk_trial_env_close(&env);
    CHECK(fakecuda_live_modules() == modules); /* the lacking one unloaded */
    /* Failures of open: the call named, nothing left. */
    CHECK(fakecuda_inject_error("cuStreamCreate", CUDA_ERROR_INVALID_VALUE, 1) == 0);
    CHECK(drk_trial_env_open(&env, &table, ctx, NULL) == -1 && strstr(env.why, "cuStreamCreate failed: CUresult 1"));
    CHECK(fakecuda_inject_error("cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY, 1) == 0);
    CHECK(drk_trial_env_open(&env, &table, ctx, NULL) == -1 && strstr(env.why, "cuMemHostAlloc"));
    drk_driver partial = table;
    partial.memcpy_htod_async = NULL;
    CHECK(drk_trial_env_open(&env, &partial, ctx, NULL) == -1 && strstr(env.why, "memcpy_htod_async"));
    CHECK(fakecuda_live_device_allocations() == live && fakecuda_live_host_allocations() == host);
}

/* A compare kernel that never says it finished is not believed. */
static void test_lazy(CUcontext ctx)
{
    CHECK(fakecuda_register_kernel_params("drk_compare", lazy_compare, 4, (const size_t[]){8, 8, 8, 8}) == 0);
    drk_trial_env env;
    CHECK(drk_trial_env_open(&env, &table, ctx, "DRKFAKE1\ndrk_compare\ndrk_poison\n") == 0 && env.kernels);
    captured cap;
    drk_trial t;
    CHECK(open_tadd(&t, &env, &cap) == DRK_TRIAL_OK);
    drk_proof_ref ref;
    reference(&t, &ref);
    CHECK(ref.state == DRK_PROOF_ERROR && strstr(t.why, "drk_compare did not finish"));
    drk_trial_close(&t);
    drk_trial_env_trim(&env, 0); /* kept buffers freed: the counts below are exact */
    drk_trial_env_close(&env);
    CHECK(fakecuda_register_kernel_params("drk_compare", fake_compare, 4, (const size_t[]){8, 8, 8, 8}) == 0);
}

int main(void)
{
    fill();
    CUdevice dev;
    CUcontext ctx = NULL;
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
          cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    static const size_t tadd_sizes[] = {8, 8, 8, 4}, tinc_sizes[] = {8, 4};
    CHECK(fakecuda_register_kernel_params("tadd", tadd, 4, tadd_sizes) == 0 &&
          fakecuda_register_kernel_params("tadd_skip", tadd_skip, 4, tadd_sizes) == 0 &&
          fakecuda_register_kernel_params("tadd_wrong", tadd_wrong, 4, tadd_sizes) == 0 &&
          fakecuda_register_kernel_params("tinc", tinc, 2, tinc_sizes) == 0 &&
          fakecuda_register_kernel_params("tinc_half", tinc_half, 2, tinc_sizes) == 0 &&
          fakecuda_register_kernel_params("drk_compare", fake_compare, 4, (const size_t[]){8, 8, 8, 8}) == 0 &&
          fakecuda_register_kernel_params("drk_poison", fake_poison, 3, (const size_t[]){8, 8, 8}) == 0);
    /* The program's build has 64 registers; a budget of 32 caps them. */
    CHECK(fakecuda_set_kernel_resources("tadd", 64, 0) == 0 && fakecuda_set_kernel_time("tadd", 64, 2000) == 0 &&
          fakecuda_set_kernel_time("tadd", 32, 1000) == 0);

    /* drk's own analysis of the program's PTX: which words are pointers. */
    char err[200];
    CHECK(drk_ptx_read(ptx, sizeof ptx - 1, &ptxm, err, sizeof err) == 0 && ptxm.nkernels == 2);
    flows = drk_ptx_flows(ptx, sizeof ptx - 1, &ptxm);
    if (!flows || !flows[0] || !flows[1] || !flows[0]->evolvable || !flows[1]->evolvable) {
        fprintf(stderr, "test_trial: the PTX was not analysed as evolvable\n");
        return 1;
    }
    CUmodule other, bad, budget;
    CUjit_option opt = CU_JIT_MAX_REGISTERS;
    void *val = (void *)(uintptr_t)32;
    CHECK(cuModuleLoadData(&prog, ptx) == CUDA_SUCCESS && cuModuleGetFunction(&f_tadd, prog, "tadd") == CUDA_SUCCESS &&
          cuModuleGetFunction(&f_tinc, prog, "tinc") == CUDA_SUCCESS);
    CHECK(cuModuleLoadData(&other, ptx) == CUDA_SUCCESS);
    CHECK(cuModuleLoadData(&bad, "DRKFAKE1\ntadd_skip\ntadd_wrong\ntinc_half\n") == CUDA_SUCCESS);
    CHECK(cuModuleLoadDataEx(&budget, ptx, 1, &opt, &val) == CUDA_SUCCESS);

    /* The program's buffers: inputs, a stale output; host_c is O1. */
    for (unsigned i = 0; i < N; i++)
        host_a[i] = i * 2654435761u, host_b[i] = i ^ 0x5a5a5a5au, program_c[i] = 0xffffffffu - i;
    CHECK(cuMemAlloc(&a, sizeof host_a) == CUDA_SUCCESS && cuMemAlloc(&b, sizeof host_b) == CUDA_SUCCESS &&
          cuMemAlloc(&c, sizeof program_c) == CUDA_SUCCESS && cuMemcpyHtoD(a, host_a, sizeof host_a) == CUDA_SUCCESS &&
          cuMemcpyHtoD(b, host_b, sizeof host_b) == CUDA_SUCCESS &&
          cuMemcpyHtoD(c, program_c, sizeof program_c) == CUDA_SUCCESS);
    for (unsigned i = 0; i < N; i++)
        host_c[i] = host_a[i] + host_b[i];

    test_env(ctx);
    unsigned long long live = fakecuda_live_device_allocations(), host = fakecuda_live_host_allocations();
    /* The host path (what runs on the stand-in, which has no drk kernels),
     * then drk's kernels as the stand-ins above. */
    static const char *const fatbins[] = {NULL, "DRKFAKE1\ndrk_compare\ndrk_poison\n"};
    for (int m = 0; m < 4; m++) {
        int k = m / 2;
        drk_trial_env env;
        CHECK(drk_trial_env_open(&env, &table, ctx, fatbins[k]) == 0);
        env.spans = m % 2; /* runs restored in part (drk_proof_work), every answer the same */
        CHECK(k ? env.kernels && env.compare && env.poison && env.staging == NULL && env.why[0] == '\0'
                : !env.kernels && env.staging && strstr(env.why, "no fatbin") && strstr(env.why, "host"));
        test_proof(&env, other, bad, budget);
        test_inplace(&env, other, bad);
        test_kept(&env);
        test_memory(&env);
        drk_trial_env_close(&env);
    }
    CHECK(fakecuda_live_device_allocations() == live && fakecuda_live_host_allocations() == host);
    test_lazy(ctx);

    drk_ptx_flows_free(flows, ptxm.nkernels);
    drk_ptx_free(&ptxm);
    CHECK(cuDevicePrimaryCtxRelease(dev) == CUDA_SUCCESS);
    return CHECK_DONE();
}
