/* The evolution engine end to end on the stand-in driver and CUPTI, under
 * drk with DRK_EVOLVE=1 (tests/engine/check_engine.py runs it):
 *
 *   engine_route evolve   rounds of `axpy` (y = a x + y, in place, its PTX
 *                         loaded as the program's module), each ended by
 *                         cuProfilerStop with a pause for drk's thread. The
 *                         stand-in builds it with 64 registers; a build with
 *                         a 32-register budget runs twice as fast on the
 *                         GPU clock, and one with 40 computes a wrong y (a
 *                         planted bad variant: y = a x, the add lost).
 *                         After each round the program checks y bit for bit
 *                         against the host's own arithmetic; it prints how
 *                         many launches ran a 32- or 40-register build.
 *                         With DRK_EVOLVE_PLANT=regs=32 the 32-register
 *                         build's PTX rounds toward zero (the stand-in
 *                         marks functions of PTX with ".rz.f32"): wrong,
 *                         so never served.
 *   engine_route regress  28 rounds; from round 14 the 32-register build
 *                         runs 3x slower than the default (the world
 *                         changed): the served variant, measured again
 *                         after resting, must be dropped.
 *   engine_route ladder   36 rounds; the 32-register build runs 1.1x as
 *                         fast as the default, 48 1.4x, any at carveout
 *                         100 2x (the carveout line comes after the
 *                         registers'): on a tight budget the search finds
 *                         them one after another. It prints which builds
 *                         ran after each round.
 *   engine_route keptbad  the ladder, but a launch at carveout 100 computes
 *                         y = a x (the add lost) on the inputs of rounds
 *                         0-3 only: a planted variant wrong on an early
 *                         launch alone, which the search meets later and
 *                         must find wrong on the launch kept from then.
 *   engine_route nondet   the same, but the kernel adds a count of its own
 *                         launches' blocks seen so far to one element (as a
 *                         float atomic's order would): it differs from
 *                         itself, so drk must refuse it.
 *   engine_route rare     the evolve rounds, the kernel wrong once: in the
 *                         fourth run of the program's own build in drk's
 *                         context (its first timed run, the reference's
 *                         three before it alike), never in the program's:
 *                         a nondeterminism O1 == O2 missed, which the
 *                         check of that run must catch (refused).
 *   engine_route flaky    the short rounds (below), the 32-register build
 *                         wrong once: in its second run in drk's context,
 *                         the first of its timed runs after its proof's
 *                         (a variant that differs from run to run, which
 *                         the check of that run must catch: rejected). The
 *                         planted 40-register build is right here, so that
 *                         no other candidate's difference comes first.
 *                         With ENGINE_ROUTE_LONG=1, the evolve rounds: its
 *                         further runs come after a second wait.
 *   engine_route late     the evolve rounds, the kernel nondeterministic as
 *                         in nondet from round 3 on, when drk's reference
 *                         of a capture is queued with its variants' proofs
 *                         (after the first capture's): still refused.
 *   engine_route short    the evolve rounds with 200 launches of 20 us each
 *                         (on the fake CUPTI's clock) a round: a kernel so
 *                         short that each candidate's four timed runs cost
 *                         less than a second wait for them.
 *   engine_route noctx    the evolve rounds, with every cuCtxCreate_v4
 *                         failing: drk cannot make its context for trials,
 *                         so nothing is tried and nothing served, said once.
 *   engine_route turns    32 rounds of axpy and of `axpyb` (the same
 *                         kernel in a module of its own, on z = a x + z,
 *                         its launches half as long): run with
 *                         DRK_EVOLVE_TURN=1, axpy's search passes its turn
 *                         to axpyb after 1 round and goes on after it (32
 *                         rounds: both searches settle, plateau hops too).
 *   engine_route idle     120 evolve rounds; from round 90 on, axpyb too
 *                         (as in turns): a new kernel-shape while axpy's
 *                         search has long ended and records rest.
 *   engine_route flat     64 evolve rounds, the 32-register build no faster
 *                         than the default (nothing to win), and axpyb
 *                         launched once at 1 block with nothing to do (no
 *                         record: never hot) in rounds 0-2 and from round
 *                         48 on: once axpy's search has settled, nothing
 *                         runs but what evolution took up until axpyb runs
 *                         again.
 *   engine_route nosync   the evolve rounds without the cuCtxSynchronize
 *                         each round makes: drk's thread loads the served
 *                         copy itself when it is to serve.
 *   engine_route untimed  4 evolve rounds, run where evolution may take up
 *                         no kernel (DRK_EVOLVE_SKIP=axpy): it must not
 *                         start CUPTI at all. It prints the CUPTI calls
 *                         drk made.
 *   engine_route oom      the evolve rounds; after round 8 (drk serving and
 *                         searching on) the program allocates all the
 *                         device memory cuMemGetInfo says is free, as a
 *                         trainer filling the device would, and frees it:
 *                         the allocation must succeed (drk gives back what
 *                         its trials held), and the rounds after still
 *                         run the served variant, bit for bit.
 *   engine_route flood    the evolve rounds, each also launching `axpyb`
 *                         FLOOD times with nothing to do (no record on the
 *                         fake CUPTI): a launch-bound program, for which
 *                         kernel records would cost more than the budget
 *                         pays in: drk must keep them off.
 *   engine_route busy     from its first launch on, LOOKS rounds of FLOOD
 *                         launches of `axpyb` with nothing to do and a
 *                         pause drk does not see as a wait (host work):
 *                         launch-bound from the start, so CUPTI attached
 *                         would cost more than the budget allows: drk must
 *                         never attach it. Prints how often it was enabled.
 *   engine_route waits    the same launches, each round ending in a
 *                         cuCtxSynchronize that waits as long as busy's
 *                         pause (a GPU busy with long kernels): the waits
 *                         absorb CUPTI's cost, and drk attaches it.
 *   engine_route quiet    like waits, but after a random 0-199 ms each
 *                         round launches `axpyb` every ~0.1 ms for
 *                         QUIET_BURST_MS, then waits 10 ms in
 *                         cuCtxSynchronize: CUPTI's attach, which on a GPU
 *                         holds a launch made meanwhile, must come in a
 *                         wait, not among the launches (an attach at any
 *                         moment would come there 1 time in 20). Prints how
 *                         long after the program's last launch it came,
 *                         and the launches of the 50 ms before it.
 *   engine_route hold     the evolve rounds, their launches 4 ms apart on
 *                         the wall clock (an 80 ms burst, longer than a
 *                         tick of drk's), then the synchronize and the
 *                         pause: a capture taken mid-burst must wait for
 *                         the pause before its trials, which on a GPU take
 *                         time slices from the program's kernels. Prints
 *                         each round's burst (its first and last launch,
 *                         CLOCK_MONOTONIC). With ENGINE_ROUTE_NOPAUSE set
 *                         it launches through the pause too (4 ms apart)
 *                         and skips the synchronize: never quiet, the
 *                         trials must come all the same.
 *   engine_route unload   the evolve rounds, but after round 2 (drk is
 *                         searching) the program unloads its module and
 *                         loads it again: drk's work on the old module ends
 *                         saying so, no trial launches its gone function,
 *                         every result stays bit for bit.
 *   engine_route fork     the evolve rounds, every wait 20 ms long; in
 *                         rounds 2-12, while drk's threads search
 *                         (compiles, captures, trials), the program forks
 *                         right after the round's launches and 6 times
 *                         through its pause (77 children), as a trainer's
 *                         data loader forks its workers. A
 *                         child launches nothing (CUDA does not follow a
 *                         fork; but one forked after a round's launches
 *                         launches axpy once, which the stand-in runs: the
 *                         program's own build must, not the parent's
 *                         variant), allocates (and, out of memory, gets
 *                         the driver's answer at once: drk's context is
 *                         the parent's, not the child's to give back),
 *                         unloads the program's module
 *                         (as cudart's exit handlers unregister theirs) and
 *                         exits through exit(): drk's exit runs in it. Each must end within 20 s (one
 *                         that does not is killed and counted hung); the
 *                         parent's rounds stay bit for bit and its search
 *                         goes on. It prints the children's count, how
 *                         many exited 0 and how many hung. */
#include <cuda.h>
#include <cudaProfiler.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/fakecuda/fakecuda.h"
#include "tests/fakecupti/fakecupti.h"

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define N 4096
#define BLOCK 256
#define ROUNDS 16
#define IDLE_B 90 /* idle: the round axpyb's launches begin */
#define FLAT_B 48 /* flat: the round axpyb's launches begin again */
#define LAUNCHES 20
#define FLOOD 5000 /* flood: launches of nothing a round, at the H200's ~2 us of records each 10 ms */
#define LOOKS 12  /* busy, waits: rounds, each about one of drk's looks (200 ms) */
#define QUIET_BURST_MS 190 /* quiet: a round's launches, then a 10 ms wait */
#define QUIET_LAUNCHES (LOOKS * 1000)
/* oom: x and y in allocations this large, which drk's snapshots copy whole. */
#define OOM_ARRAY ((size_t)64 << 20)
#define FORKS_PAUSED 6 /* fork: children forked through a round's pause, besides the one after its launches */
#define KEPTBAD_ROUNDS 4 /* keptbad: carveout 100 is wrong on the inputs of rounds 0-3 */
#define OWN_STREAM 99 /* what the fake CUPTI calls drk's stream */
#define ROUND_NS 200000000ull /* a round on the fake CUPTI's clock; rounds start 2 apart */

static const char ptx[] = ".version 9.0\n.target sm_90\n.address_size 64\n\n"
                          ".visible .entry axpy(\n\t.param .u64 axpy_param_0,\n\t.param .u64 axpy_param_1,\n"
                          "\t.param .f32 axpy_param_2,\n\t.param .u32 axpy_param_3\n)\n{\n"
                          "\t.reg .pred %p<2>;\n\t.reg .f32 %f<5>;\n\t.reg .b32 %r<6>;\n\t.reg .b64 %rd<8>;\n"
                          "\tld.param.u64 %rd1, [axpy_param_0];\n\tld.param.u64 %rd2, [axpy_param_1];\n"
                          "\tld.param.f32 %f1, [axpy_param_2];\n\tld.param.u32 %r2, [axpy_param_3];\n"
                          "\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %ntid.x;\n\tmov.u32 %r5, %tid.x;\n"
                          "\tmad.lo.s32 %r1, %r3, %r4, %r5;\n\tsetp.ge.s32 %p1, %r1, %r2;\n\t@%p1 bra $L__BB0_2;\n"
                          "\tcvta.to.global.u64 %rd3, %rd2;\n\tcvta.to.global.u64 %rd4, %rd1;\n"
                          "\tmul.wide.s32 %rd5, %r1, 4;\n\tadd.s64 %rd6, %rd4, %rd5;\n\tld.global.f32 %f2, [%rd6];\n"
                          "\tadd.s64 %rd7, %rd3, %rd5;\n\tld.global.f32 %f3, [%rd7];\n"
                          /* Unindented, as nvcc embeds PTX in a fatbin: the plant must still find it. */
                          "fma.rn.f32 %f4, %f2, %f1, %f3;\n\tst.global.f32 [%rd7], %f4;\n$L__BB0_2:\n\tret;\n}\n";

static int nondet;
static int rare;                 /* rare: the kernel is wrong in drk's fourth run of the original */
static CUdeviceptr program_y;    /* the program's own y (rare's runs elsewhere are drk's) */
static unsigned rare_runs;
static int flaky;                /* flaky: the 32-register build is wrong in its second run in drk's context */
static unsigned flaky_runs;
static float bad_below = -1e30f; /* keptbad: a launch at carveout 100 with a below this computes y = a x */
static unsigned long long by_regs[256];   /* every launch of axpy (drk's trials too) by registers */
static unsigned long long prog_regs[256]; /* the program's own launches (on its y or z) */
static CUdeviceptr program_z;
static unsigned long long blocks_seen;

static void axpy(const fakecuda_thread *t)
{
    const float *x = *(float *const *)t->params[0];
    float *y = *(float *const *)t->params[1];
    float a = *(const float *)t->params[2];
    int n = *(const int *)t->params[3];
    unsigned i = t->blockIdx.x * t->blockDim.x + t->threadIdx.x;
    if (i == 0) {
        by_regs[t->regs & 255]++;
        if ((CUdeviceptr)(uintptr_t)y == program_y || (program_z && (CUdeviceptr)(uintptr_t)y == program_z))
            prog_regs[t->regs & 255]++;
    }
    if (t->threadIdx.x == 0)
        blocks_seen++;
    if ((int)i >= n)
        return;
    if ((t->regs == 40 && !flaky) || (t->carveout == 100 && a < bad_below)) {
        y[i] = a * x[i]; /* the planted bad build */
        return;
    }
    float v = __builtin_fmaf(x[i], a, y[i]);
    if (t->ptx_rz && v != 0) /* PTX rounding toward zero: one ulp nearer 0 when inexact, as hardware would be */
        v = __builtin_nextafterf(v, 0.0f);
    y[i] = v;
    if (nondet && i == 0)
        y[0] += (float)(blocks_seen % 5); /* how many blocks ran before: differs run to run */
    if (rare && i == 0 && (CUdeviceptr)(uintptr_t)y != program_y && t->regs == 64 && t->carveout < 0 &&
        ++rare_runs == 4)
        y[0] += 1.0f;
    if (flaky && i == 0 && (CUdeviceptr)(uintptr_t)y != program_y && t->regs == 32 && ++flaky_runs == 2)
        y[0] += 1.0f;
}

static int check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS)
        fprintf(stderr, "engine_route: %s failed: %d\n", what, (int)r);
    return r == CUDA_SUCCESS;
}

/* fork: a child of the program's, forked while drk's threads work: no
 * launch (but one after a round's launches: the program's own function
 * must run, not the parent's variant), some allocation, the module
 * unloaded, then exit() (drk's exit handlers run). The parent waits for it 20 s at most. 0 exited 0, 1
 * exited otherwise, 2 hung (killed). */
static int fork_child(CUmodule mod, CUfunction fn)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        size_t sum = 0;
        for (int i = 0; i < 1000; i++) {
            char *p = malloc((size_t)(i % 64 + 1) * 1024);
            if (!p)
                _exit(3);
            p[0] = (char)i;
            sum += (size_t)p[0];
            free(p);
        }
        /* A launch (which CUDA would refuse in a child; the stand-in runs
         * it), on memory of the child's own (the stand-in's device memory
         * under drk is shared pages: the parent's would be written): the
         * program's own function, never the parent's variant. */
        unsigned long long v32 = by_regs[32], v64 = by_regs[64];
        CUdeviceptr cx, cy;
        float a = 1.0f;
        int n = N;
        void *params[] = {&cx, &cy, &a, &n};
        if (fn && (cuMemAlloc(&cx, N * sizeof(float)) != CUDA_SUCCESS ||
                   cuMemAlloc(&cy, N * sizeof(float)) != CUDA_SUCCESS ||
                   cuLaunchKernel(fn, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS ||
                   cuCtxSynchronize() != CUDA_SUCCESS))
            _exit(6);
        if (fn && (by_regs[32] != v32 || by_regs[64] != v64 + 1))
            _exit(7);
        /* Out of memory, the child asks drk for its context back: none is
         * the child's, so the answer comes at once (it waited 500 ms for a
         * thread of drk's that only the parent has). */
        CUdeviceptr huge;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CUresult oom = cuMemAlloc(&huge, (size_t)1 << 40);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (oom != CUDA_ERROR_OUT_OF_MEMORY ||
            (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > 250)
            _exit(8);
        exit(sum == 0 ? 4 : cuModuleUnload(mod) != CUDA_SUCCESS ? 5 : 0);
    }
    int status;
    for (int w = 0; w < 2000; w++) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
        if (got < 0)
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 2;
}

static int cupti_on(void)
{
    for (int i = 0; i < 500; i++) {
        if (fakecupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "evolve";
    nondet = strcmp(mode, "nondet") == 0;
    rare = strcmp(mode, "rare") == 0;
    flaky = strcmp(mode, "flaky") == 0;
    int late = strcmp(mode, "late") == 0, shorter = strcmp(mode, "short") == 0 || (flaky && !getenv("ENGINE_ROUTE_LONG"));
    int nosync = strcmp(mode, "nosync") == 0;
    int hold = strcmp(mode, "hold") == 0, nopause = hold && getenv("ENGINE_ROUTE_NOPAUSE") != NULL;
    nosync |= nopause; /* its synchronize would end in a moment without launches */
    /* 2 ms a launch on the fake clock: a round's kernel time (40 ms) pays
     * for the trials' wall time on this machine's CPU; short: 4 ms. */
    int launches = shorter ? 200 : LAUNCHES;
    uint64_t spacing = shorter ? 100000 : 5000000, length = shorter ? 20000 : 2000000;
    int regress = strcmp(mode, "regress") == 0, rounds = regress ? 28 : ROUNDS;
    int reload = strcmp(mode, "unload") == 0, turns = strcmp(mode, "turns") == 0;
    int idle = strcmp(mode, "idle") == 0;
    if (idle)
        rounds = 120;
    int flat = strcmp(mode, "flat") == 0;
    if (flat)
        rounds = 64;
    /* switch: two budgets faster than the default, 32 (2x) and 48 (2.5x). */
    int sw = strcmp(mode, "switch") == 0;
    int carve = strcmp(mode, "carveout") == 0;
    if (sw)
        rounds = 24;
    /* ladder: three variants each faster than the last (32 1.1x, 48 1.4x,
     * carveout 100 2x), found one after another: the search's choice moves
     * on. */
    int ladder = strcmp(mode, "ladder") == 0, keptbad = strcmp(mode, "keptbad") == 0;
    if (keptbad)
        bad_below = 0.5f + (float)KEPTBAD_ROUNDS * 0.125f; /* the rounds' a: 0.5 + r / 8 */
    ladder |= keptbad;
    if (ladder)
        rounds = 36;
    if (turns)
        rounds = 32;
    int untimed = strcmp(mode, "untimed") == 0, oom = strcmp(mode, "oom") == 0;
    int flood = strcmp(mode, "flood") == 0;
    int busy = strcmp(mode, "busy") == 0, waits = strcmp(mode, "waits") == 0, quiet = strcmp(mode, "quiet") == 0;
    int forks = strcmp(mode, "fork") == 0, children = 0, children_ok = 0, children_hung = 0;
    if (forks)
        fakecuda_set_sync_ns(20000000); /* each wait 20 ms: drk's trials hold their fence as long */
    if (untimed)
        rounds = 4;
    if (argc > 2)
        rounds = atoi(argv[2]); /* fewer: the program exits mid-search */
    if (strcmp(mode, "noctx") == 0 && fakecuda_inject_error("cuCtxCreate_v4", CUDA_ERROR_OUT_OF_MEMORY, 1000000) != 0)
        return 1;
    /* As CUDA 13's CUPTI: a flush that is not forced hands over no partly
     * filled buffer, so a round's records come in only when drk forces one. */
    fakecupti_hold_unforced(1);
    uint64_t base = 1000000000ull;
    fakecupti_set_time(base - 1000);
    /* drk's own stream, as CUPTI names it: records on it are drk's trials
     * (one a round from round 6 below, as the GPU's would be), never the
     * program's. */
    fakecupti_set_stream_id(OWN_STREAM);
    static const size_t sizes[] = {8, 8, 4, 4};
    if (fakecuda_register_kernel_params("axpy", axpy, 4, sizes) != 0 ||
        fakecuda_set_kernel_resources("axpy", 64, 0) != 0 || fakecuda_set_kernel_time("axpy", 0, 2000) != 0 ||
        fakecuda_set_kernel_time("axpy", 32, 1000) != 0 ||
        fakecuda_register_kernel_params("axpyb", axpy, 4, sizes) != 0 ||
        fakecuda_set_kernel_resources("axpyb", 64, 0) != 0 || fakecuda_set_kernel_time("axpyb", 0, 2000) != 0 ||
        fakecuda_set_kernel_time("axpyb", 32, 1000) != 0 || (sw && fakecuda_set_kernel_time("axpy", 48, 800) != 0) ||
        (ladder && (fakecuda_set_kernel_time("axpy", 32, 1800) != 0 || fakecuda_set_kernel_time("axpy", 48, 1400) != 0 ||
                    fakecuda_set_carveout_time("axpy", 100, 1000) != 0)) ||
        (carve && fakecuda_set_carveout_time("axpy", 100, 500) != 0) ||
        (flat && fakecuda_set_kernel_time("axpy", 32, 2000) != 0))
        return 1;
    /* axpyb's module: axpy's PTX with every "axpy" named "axpyb". */
    static char ptxb[sizeof ptx + 64];
    for (const char *p = ptx; *p;) {
        size_t len = strlen(ptxb);
        ptxb[len] = *p;
        if (strncmp(p, "axpy", 4) == 0) {
            memcpy(ptxb + len, "axpyb", 5);
            p += 4;
        } else {
            p++;
        }
    }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod, modb = NULL;
    CUfunction fn, fnb = NULL;
    CUdeviceptr dx, dy, dz = 0;
    if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") || !check(cuCtxSetCurrent(ctx), "set") ||
        !check(cuModuleLoadData(&mod, ptx), "load") || !check(cuModuleGetFunction(&fn, mod, "axpy"), "get") ||
        !check(cuMemAlloc(&dx, oom ? OOM_ARRAY : N * sizeof(float)), "alloc x") ||
        !check(cuMemAlloc(&dy, oom ? OOM_ARRAY : N * sizeof(float)), "alloc y"))
        return 1;
    program_y = dy;
    if ((turns || flood || busy || waits || quiet || idle || hold || flat) &&
        (!check(cuModuleLoadData(&modb, ptxb), "load b") || !check(cuModuleGetFunction(&fnb, modb, "axpyb"), "get b") ||
         !check(cuMemAlloc(&dz, N * sizeof(float)), "alloc z")))
        return 1;
    program_z = dz;
    /* As a program starts: a first launch (here one with nothing to do)
     * before any GPU time is taken; evolution starts CUPTI only once a
     * kernel it could take up was launched. */
    int none = 0;
    float a0 = 1.0f;
    void *params0[] = {&dx, &dy, &a0, &none};
    if (!check(cuLaunchKernel(fn, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params0, NULL), "first launch") ||
        !check(cuCtxSynchronize(), "first synchronize"))
        return 1;
    if (busy || waits || quiet) {
        void *paramsf[] = {&dx, &dz, &a0, &none};
        static uint64_t launched_at[QUIET_LAUNCHES];
        unsigned nlaunched = 0;
        fakecuda_set_sync_ns(waits ? 150000000ull : quiet ? 10000000ull : 0);
        if (quiet) {
            /* drk's looks come every 200 ms from its start: a phase of the
             * rounds the same in every run would decide the test alone. */
            struct timespec ts = {0, (long)(mono_ns() % 200) * 1000000L};
            nanosleep(&ts, NULL);
        }
        for (int r = 0; r < LOOKS; r++) {
            for (int l = 0; !quiet && l < FLOOD; l++)
                if (!check(cuLaunchKernel(fnb, 1, 1, 1, BLOCK, 1, 1, 0, NULL, paramsf, NULL), "flood launch"))
                    return 1;
            for (uint64_t t0 = mono_ns(), t = t0; quiet && t - t0 < QUIET_BURST_MS * 1000000ull; t = mono_ns()) {
                if (nlaunched < QUIET_LAUNCHES)
                    launched_at[nlaunched++] = t;
                if (!check(cuLaunchKernel(fnb, 1, 1, 1, BLOCK, 1, 1, 0, NULL, paramsf, NULL), "burst launch"))
                    return 1;
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
            if (busy) {
                struct timespec ts = {0, 150000000};
                nanosleep(&ts, NULL);
            }
            if (!check(cuCtxSynchronize(), "cuCtxSynchronize"))
                return 1;
        }
        fakecuda_set_sync_ns(0);
        printf("%s: CUPTI's kernel records enabled %llu times\n", mode, fakecupti_calls("cuptiActivityEnable"));
        if (quiet) {
            uint64_t attached = fakecupti_registered_ns(), before = 0;
            for (unsigned i = 0; i < nlaunched; i++)
                if (launched_at[i] <= attached && launched_at[i] > before)
                    before = launched_at[i];
            printf("quiet: CUPTI attached %.3f ms after the program's last launch before it\n",
                   attached && before ? (attached - before) / 1e6 : -1.0);
            /* drk decides a moment before it attaches, and the program may
             * launch in between (a thread of drk's preempted): the launches
             * of the 50 ms before the attach, for the test to set against
             * that decision's time. */
            printf("quiet: attached at %.6f s, launches at", attached / 1e9);
            for (unsigned i = 0; i < nlaunched; i++)
                if (launched_at[i] <= attached && attached - launched_at[i] <= 50000000u)
                    printf(" %.6f", launched_at[i] / 1e9);
            printf("\n");
        }
        return check(cuModuleUnload(modb), "unload b") && check(cuModuleUnload(mod), "unload") ? 0 : 1;
    }
    if (untimed) {
        struct timespec ts = {0, 300000000}; /* six of drk's ticks, for it to look */
        nanosleep(&ts, NULL);
    } else if (!cupti_on()) {
        fprintf(stderr, "engine_route: drk never enabled CUPTI's records\n");
        return 1;
    }
    static float x[N], y[N], want[N], z[N], wantz[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 97) * 0.25f - 3.0f;
        y[i] = want[i] = (float)(i % 13) * 0.5f;
        z[i] = wantz[i] = (float)(i % 7) * 0.75f;
    }
    if (!check(cuMemcpyHtoD(dx, x, sizeof x), "copy x") || !check(cuMemcpyHtoD(dy, y, sizeof y), "copy y") ||
        ((turns || idle) && !check(cuMemcpyHtoD(dz, z, sizeof z), "copy z")))
        return 1;
    int n = N, wrong_rounds = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = base + (uint64_t)r * 2 * ROUND_NS;
        int with_b = turns || (idle && r >= IDLE_B); /* axpyb's launches too */
        if (regress && r == 14 && fakecuda_set_kernel_time("axpy", 32, 6000) != 0)
            return 1;
        if (reload && r == 3 &&
            (!check(cuModuleUnload(mod), "unload") || !check(cuModuleLoadData(&mod, ptx), "load again") ||
             !check(cuModuleGetFunction(&fn, mod, "axpy"), "get again")))
            return 1;
        if (late && r == 3)
            nondet = 1;
        if (oom && r == 8) {
            /* All but its own arrays and a little, as sized on a run
             * without drk. */
            size_t free_b = 0, total_b = 0, want;
            CUdeviceptr big;
            if (!check(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo"))
                return 1;
            want = total_b - 2 * OOM_ARRAY - ((size_t)16 << 20);
            printf("oom: all the device memory the program would have without drk, %zu MiB of %zu (%zu MiB free "
                   "now): ", want >> 20, total_b >> 20, free_b >> 20);
            if (!check(cuMemAlloc(&big, want), "the allocation of all free memory") ||
                !check(cuMemFree(big), "its free"))
                return 1;
            printf("allocated\n");
        }
        float a = 0.5f + (float)r * 0.125f; /* new inputs each round */
        uint64_t burst0 = mono_ns();
        for (int l = 0; l < launches; l++) {
            if (hold && l) {
                struct timespec ts = {0, 4000000};
                nanosleep(&ts, NULL);
            }
            uint64_t s = t0 + 1000 + (uint64_t)l * spacing;
            fakecupti_set_time(s);
            void *params[] = {&dx, &dy, &a, &n};
            unsigned long long gpu0 = fakecuda_gpu_ns();
            if (!check(cuLaunchKernel(fn, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL), "launch"))
                return 1;
            /* Its record lasts as the function that ran took (a variant drk
             * serves at 32 registers half the original's 2000 ns), scaled
             * to the round's length. */
            fakecupti_kernel("axpy", N / BLOCK, 1, 1, BLOCK, 1, 1, 0, s,
                             s + length * (fakecuda_gpu_ns() - gpu0) / 2000, 7);
            if (l == 0 && r >= 6) { /* by when drk's trials have begun */
                fakecupti_kernel("drk_compare", 4, 1, 1, 256, 1, 1, 0, s + 3000, s + 3500, OWN_STREAM);
                fakecupti_memcpy(4096, s + 3600, s + 3700, OWN_STREAM);
            }
            for (int i = 0; i < N; i++)
                want[i] = __builtin_fmaf(x[i], a, want[i]);
            if (!with_b)
                continue;
            void *paramsb[] = {&dx, &dz, &a, &n};
            if (!check(cuLaunchKernel(fnb, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, paramsb, NULL), "launch b"))
                return 1;
            fakecupti_kernel("axpyb", N / BLOCK, 1, 1, BLOCK, 1, 1, 0, s + 2500000, s + 3500000, 7);
            for (int i = 0; i < N; i++)
                wantz[i] = __builtin_fmaf(x[i], a, wantz[i]);
        }
        if (forks && r >= 2 && r <= 12) {
            int c = fork_child(mod, fn);
            children++;
            children_ok += c == 0;
            children_hung += c == 2;
        }
        if (hold)
            printf("hold: round %d burst %.6f %.6f\n", r, burst0 / 1e9, mono_ns() / 1e9);
        void *paramsf[] = {&dx, &dz, &a, &none};
        for (int l = 0; flood && l < FLOOD; l++)
            if (!check(cuLaunchKernel(fnb, 1, 1, 1, BLOCK, 1, 1, 0, NULL, paramsf, NULL), "flood launch"))
                return 1;
        if (flat && (r < 3 || r >= FLAT_B) &&
            !check(cuLaunchKernel(fnb, 1, 1, 1, BLOCK, 1, 1, 0, NULL, paramsf, NULL), "flat's launch of axpyb"))
            return 1;
        /* As a trainer waits for its step: a served copy drk asked for is
         * loaded here, while the queue is empty (drk_engine_quiet). */
        if ((!nosync && !check(cuCtxSynchronize(), "cuCtxSynchronize")) ||
            !check(cuMemcpyDtoH(y, dy, sizeof y), "copy back") ||
            (with_b && !check(cuMemcpyDtoH(z, dz, sizeof z), "copy z back")))
            return 1;
        if (!nondet && (memcmp(y, want, sizeof y) != 0 || (with_b && memcmp(z, wantz, sizeof z) != 0)))
            wrong_rounds++;
        if (nondet)
            memcpy(want, y, sizeof y); /* its own drift is not a wrong result */
        if (ladder) /* which build served the round's launches */
            printf("round %d: 64=%llu 32=%llu 48=%llu\n", r, prog_regs[64], prog_regs[32], prog_regs[48]);
        fakecupti_set_time(t0 + ROUND_NS);
        unsigned long long ticks = fakecupti_calls("cuptiActivityFlushAll");
        if (!check(cuProfilerStop(), "cuProfilerStop"))
            return 1;
        fakecupti_set_time(t0 + ROUND_NS + 100000000ull);
        /* fork: more children through the pause, while drk's thread runs
         * the round's trials (holding its fence while it waits for them). */
        for (int f = 0; forks && r >= 2 && r <= 12 && f < FORKS_PAUSED; f++) {
            struct timespec gap = {0, 150000000 / FORKS_PAUSED};
            nanosleep(&gap, NULL);
            int c = fork_child(mod, NULL);
            children++;
            children_ok += c == 0;
            children_hung += c == 2;
        }
        struct timespec ts = {0, forks && r >= 2 && r <= 12 ? 0 : 150000000};
        /* hold with ENGINE_ROUTE_NOPAUSE: launches through the pause too,
         * every 4 ms: the program is never quiet. */
        for (uint64_t p0 = mono_ns(); nopause && mono_ns() - p0 < 150000000u; ts.tv_nsec = 0) {
            struct timespec gap = {0, 4000000};
            nanosleep(&gap, NULL);
            if (!check(cuLaunchKernel(fnb, 1, 1, 1, BLOCK, 1, 1, 0, NULL, paramsf, NULL), "launch through the pause"))
                return 1;
        }
        nanosleep(&ts, NULL);
        /* drk's thread flushes once a tick: three ticks after the round's
         * end it has closed the round and done that tick's work. A loaded
         * machine (CI's two cores, tests in parallel) may take longer than
         * the pause; the search must not see rounds shift under it. */
        for (int w = 0; w < 300 && !untimed && fakecupti_calls("cuptiActivityFlushAll") < ticks + 3; w++) {
            struct timespec p = {0, 10000000};
            nanosleep(&p, NULL);
        }
    }
    printf("engine: %d rounds, %d wrong; launches by registers: 64=%llu 32=%llu 40=%llu 48=%llu\n", rounds,
           wrong_rounds, prog_regs[64], prog_regs[32], prog_regs[40], prog_regs[48]);
    if (forks)
        printf("fork: %d children, %d exited 0, %d hung\n", children, children_ok, children_hung);
    printf("cupti: cuptiSubscribe %llu, cuptiActivityEnable %llu\n", fakecupti_calls("cuptiSubscribe"),
           fakecupti_calls("cuptiActivityEnable"));
    /* drk's trials run in a context of its own: the program's holds its
     * own launches alone. */
    printf("contexts: program %llu of %d launches, other contexts %llu; functions loaded ahead %llu\n",
           fakecuda_launches_in(ctx), rounds * launches + 1, fakecuda_launches_in(NULL), fakecuda_func_loads());
    /* As programs end (cudart unregisters its modules at exit): drk keeps
     * what its searches found all the same. */
    if (!check(cuModuleUnload(mod), "unload at the end") ||
        ((turns || flood || idle || flat) && !check(cuModuleUnload(modb), "unload b")))
        return 1;
    return wrong_rounds ? 2 : 0;
}
