/* Capture of a real launch (evolve/capture.c) on the stand-in driver, the
 * hook simulated by calling drk_capture_launch before the test's own
 * launch: the bytes only (kernelParams and an extra buffer, malformed
 * extras refused), snapshots of two allocations equal to their contents
 * before the launch that then overwrites them, a pointer outside the plan,
 * launches that do not match (shape, handle, context, stream capture),
 * failures of the copy and of the event, a launch finding the capture busy,
 * two threads racing for one capture, disarm and a fork child. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/capture.h"
#include "evolve/image/ptx.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/unit/check.h"

static drk_driver table;

static void fill(void)
{
#define FILL_(member, name, params) table.member = (__typeof__(table.member))dlsym(RTLD_DEFAULT, #name);
    DRK_DRIVER_ENTRIES(FILL_)
#undef FILL_
}

/* out[i] = in[i] * s and in[i] = 0, i < n: pointers at offsets 0 and 8,
 * values at 16 and 20 (the stand-in lays {8, 8, 4, 4} out the same). */
static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry cap(.param .u64 out, .param .u64 in, .param .f32 s, .param .u32 n)\n{\n"
    " .reg .b32 %r<8>; .reg .b64 %rd<16>; .reg .f32 %f<6>; .reg .pred %p;\n"
    " ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in]; ld.param.f32 %f1, [s]; ld.param.u32 %r1, [n];\n"
    " mov.u32 %r2, %tid.x; setp.ge.u32 %p, %r2, %r1; @%p bra DONE;\n"
    " cvta.to.global.u64 %rd4, %rd1; cvta.to.global.u64 %rd5, %rd2;\n"
    " mul.wide.u32 %rd7, %r2, 4; add.s64 %rd8, %rd5, %rd7; ld.global.f32 %f2, [%rd8];\n"
    " mul.f32 %f4, %f2, %f1; add.s64 %rd11, %rd4, %rd7; st.global.f32 [%rd11], %f4;\n"
    " mov.f32 %f5, 0f00000000; st.global.f32 [%rd8], %f5;\n"
    "DONE:\n ret;\n}\n";

static void cap_kernel(const fakecuda_thread *t)
{
    float *out = *(float **)t->params[0], *in = *(float **)t->params[1];
    float s = *(float *)t->params[2];
    unsigned n = *(unsigned *)t->params[3], i = t->blockIdx.x * t->blockDim.x + t->threadIdx.x;
    if (i < n) {
        out[i] = in[i] * s;
        in[i] = 0;
    }
}

#define N 64
static const uint32_t grid[3] = {1, 1, 1}, block[3] = {N, 1, 1};

static CUfunction fn;
static drk_ptx m;
static const drk_ptx_flow *flow;
static CUcontext ctx;
static CUstream stream;
static CUevent done;
static CUdeviceptr out_d, in_d, snap_out, snap_in, other;

static drk_capture_plan bytes_plan(void)
{
    drk_capture_plan p;
    memset(&p, 0, sizeof p);
    p.handle = (uintptr_t)fn;
    memcpy(p.grid, grid, sizeof p.grid);
    memcpy(p.block, block, sizeof p.block);
    p.params = m.kernels[0].params;
    p.nparams = (uint32_t)m.kernels[0].nparams;
    p.flow = flow;
    return p;
}

static drk_capture_plan snap_plan(void)
{
    drk_capture_plan p = bytes_plan();
    p.ctx = ctx;
    p.n = 2;
    p.alloc[0] = (drk_extent){out_d, N * sizeof(float), 1};
    p.alloc[1] = (drk_extent){in_d, N * sizeof(float), 1};
    p.snap[0] = snap_out;
    p.snap[1] = snap_in;
    p.done = done;
    return p;
}

/* The launch's parameters, as the program passes them. */
static uint64_t a_out, a_in;
static float a_s = 3.0f;
static uint32_t a_n = N;
static void *kp[4] = {&a_out, &a_in, &a_s, &a_n};

static void hook(void **params, void **extra)
{
    if (drk_capture_wanted((uintptr_t)fn))
        drk_capture_launch((uintptr_t)fn, grid, block, 0, stream, params, extra);
}

static void fill_host(float *h, float base)
{
    for (int i = 0; i < N; i++)
        h[i] = base + (float)i;
}

static void reset_memory(void)
{
    float h[N];
    fill_host(h, 100);
    cuMemcpyHtoD_v2(in_d, h, sizeof h);
    fill_host(h, -50);
    cuMemcpyHtoD_v2(out_d, h, sizeof h);
    memset(h, 0, sizeof h);
    cuMemcpyHtoD_v2(snap_out, h, sizeof h);
    cuMemcpyHtoD_v2(snap_in, h, sizeof h);
}

static int equal_device(CUdeviceptr d, const float *want)
{
    float h[N];
    return cuMemcpyDtoH_v2(h, d, sizeof h) == CUDA_SUCCESS && memcmp(h, want, sizeof h) == 0;
}

static void check_bytes(const drk_capture_got *g, uint64_t o, uint64_t i)
{
    CHECK(g->len == 24);
    uint64_t w0, w1;
    float s;
    uint32_t n;
    memcpy(&w0, g->params, 8), memcpy(&w1, g->params + 8, 8), memcpy(&s, g->params + 16, 4),
        memcpy(&n, g->params + 20, 4);
    CHECK(w0 == o && w1 == i && s == a_s && n == a_n);
}

/* (h) A copy that waits inside the capture until the main thread's launch
 * has found it busy. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_inside, gate_open;
static CUresult (*real_copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

static CUresult gated_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    pthread_mutex_lock(&gate_lock);
    gate_inside = 1;
    pthread_cond_broadcast(&gate_cond);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    return real_copy(dst, src, bytes, s);
}

static void *capturing_thread(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    hook(kp, NULL);
    return NULL;
}

/* (h') Two threads launching while armed. */
static pthread_barrier_t start;

static void *racer(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    pthread_barrier_wait(&start);
    for (int i = 0; i < 2000; i++)
        hook(kp, NULL);
    return NULL;
}

int main(void)
{
    char err[200];
    if (drk_ptx_read(ptx, sizeof ptx - 1, &m, err, sizeof err) != 0 || m.nkernels != 1) {
        fprintf(stderr, "test_capture: the PTX was not read: %s\n", err);
        return 1;
    }
    drk_ptx_flow **flows = drk_ptx_flows(ptx, sizeof ptx - 1, &m);
    if (!flows || !flows[0] || !flows[0]->evolvable) {
        fprintf(stderr, "test_capture: the PTX was not analysed\n");
        return 1;
    }
    flow = flows[0];
    CHECK(m.kernels[0].nparams == 4 && m.kernels[0].params[3].offset == 20);
    CHECK(flow->nwords == 4 && flow->words[0].cls == DRK_FLOW_POINTER && flow->words[1].cls == DRK_FLOW_POINTER &&
          flow->words[2].cls == DRK_FLOW_VALUE);

    static const size_t sizes[4] = {8, 8, 4, 4};
    CUdevice dev;
    CUmodule mod;
    if (fakecuda_register_kernel_params("cap", cap_kernel, 4, sizes) != 0 || cuInit(0) || cuDeviceGet(&dev, 0) ||
        cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, ptx) ||
        cuModuleGetFunction(&fn, mod, "cap") || cuStreamCreate(&stream, 0) || cuEventCreate(&done, 0) ||
        cuMemAlloc_v2(&out_d, N * sizeof(float)) || cuMemAlloc_v2(&in_d, N * sizeof(float)) ||
        cuMemAlloc_v2(&snap_out, N * sizeof(float)) || cuMemAlloc_v2(&snap_in, N * sizeof(float)) ||
        cuMemAlloc_v2(&other, N * sizeof(float))) {
        fprintf(stderr, "test_capture: stand-in set-up failed\n");
        return 1;
    }
    fill();
    drk_capture_configure(&table);
    drk_capture_got g;
    drk_capture_stats st0, st;

    /* Plans that cannot be armed. */
    drk_capture_plan bad = bytes_plan();
    bad.handle = 0;
    CHECK(drk_capture_arm(&bad) == -1);
    bad = snap_plan();
    bad.n = DRK_REACH_MAX + 1;
    CHECK(drk_capture_arm(&bad) == -1);
    bad = snap_plan();
    bad.done = NULL;
    CHECK(drk_capture_arm(&bad) == -1);
    bad = bytes_plan();
    bad.params = NULL;
    CHECK(drk_capture_arm(&bad) == -1);
    CHECK(!drk_capture_wanted((uintptr_t)fn) && !drk_capture_wanted(0));
    CHECK(drk_capture_take(&g) == 0);

    /* (a) The bytes only, from kernelParams; no copy, no event. Later
     * launches are not wanted. */
    reset_memory();
    a_out = out_d, a_in = in_d + 16; /* an interior pointer */
    drk_capture_plan p = bytes_plan();
    CHECK(drk_capture_arm(&p) == 0);
    CHECK(drk_capture_wanted((uintptr_t)fn));
    CHECK(drk_capture_take(&g) == 0); /* not launched yet */
    fakecuda_reset_calls();
    hook(kp, NULL);
    CHECK(!drk_capture_wanted((uintptr_t)fn));
    CHECK(fakecuda_calls("cuMemcpyDtoDAsync_v2") == 0 && fakecuda_calls("cuEventRecord") == 0);
    memset(&g, 0x5a, sizeof g);
    CHECK(drk_capture_take(&g) == 1);
    check_bytes(&g, out_d, in_d + 16);
    CHECK(g.snapped == 0 && g.why[0] == 0 && g.stream == stream);
    CHECK(drk_capture_take(&g) == 0); /* taken once */
    st = drk_capture_stats_get();
    CHECK(st.captured == 1 && st.snapped == 0 && st.moved == 0 && st.mismatched == 0 && st.busy == 0);

    /* (b) Two allocations snapped before the launch overwrites both. */
    reset_memory();
    a_out = out_d, a_in = in_d;
    float before_in[N], before_out[N], after_out[N], zero[N];
    fill_host(before_in, 100), fill_host(before_out, -50);
    for (int i = 0; i < N; i++)
        after_out[i] = before_in[i] * a_s, zero[i] = 0;
    p = snap_plan();
    CHECK(drk_capture_arm(&p) == 0);
    fakecuda_reset_calls();
    hook(kp, NULL);
    CHECK(cuLaunchKernel(fn, 1, 1, 1, N, 1, 1, 0, stream, kp, NULL) == CUDA_SUCCESS);
    CHECK(fakecuda_calls("cuMemcpyDtoDAsync_v2") == 2 && fakecuda_calls("cuEventRecord") == 1);
    CHECK(drk_capture_take(&g) == 1);
    CHECK(g.snapped == 1 && g.rc == CUDA_SUCCESS && g.why[0] == 0 && g.stream == stream);
    check_bytes(&g, out_d, in_d);
    CHECK(cuEventSynchronize(done) == CUDA_SUCCESS);
    CHECK(equal_device(snap_out, before_out) && equal_device(snap_in, before_in));
    CHECK(equal_device(out_d, after_out) && equal_device(in_d, zero)); /* the launch ran on the program's */
    st = drk_capture_stats_get();
    CHECK(st.captured == 2 && st.snapped == 1);

    /* A null pointer word stays null: snapped. */
    a_in = 0;
    CHECK(drk_capture_arm(&p) == 0);
    hook(kp, NULL);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 1);
    check_bytes(&g, out_d, 0);

    /* (c) A pointer outside the plan: the bytes only, counted moved. */
    a_out = other, a_in = in_d;
    CHECK(drk_capture_arm(&p) == 0);
    fakecuda_reset_calls();
    hook(kp, NULL);
    CHECK(fakecuda_calls("cuMemcpyDtoDAsync_v2") == 0 && fakecuda_calls("cuEventRecord") == 0);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 0 && strstr(g.why, "a pointer left the planned allocations"));
    check_bytes(&g, other, in_d);
    st = drk_capture_stats_get();
    CHECK(st.captured == 4 && st.snapped == 2 && st.moved == 1);
    /* One past the end of an allocation is outside it. */
    a_out = out_d + N * sizeof(float);
    CHECK(drk_capture_arm(&p) == 0);
    hook(kp, NULL);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 0 && drk_capture_stats_get().moved == 2);
    a_out = out_d;

    /* (d) Another shape, another handle, another context: nothing captured,
     * the plan still armed. */
    st0 = drk_capture_stats_get();
    CHECK(drk_capture_arm(&p) == 0);
    drk_capture_launch((uintptr_t)fn, (const uint32_t[3]){2, 1, 1}, block, 0, stream, kp, NULL);
    drk_capture_launch((uintptr_t)fn, grid, (const uint32_t[3]){N, 2, 1}, 0, stream, kp, NULL);
    drk_capture_launch((uintptr_t)fn, grid, block, 16, stream, kp, NULL);
    CHECK(!drk_capture_wanted((uintptr_t)fn + 1));
    drk_capture_launch((uintptr_t)fn + 1, grid, block, 0, stream, kp, NULL); /* not counted: not the plan's */
    CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    hook(kp, NULL);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHECK(drk_capture_take(&g) == 0 && drk_capture_wanted((uintptr_t)fn));
    st = drk_capture_stats_get();
    CHECK(st.captured == st0.captured && st.mismatched == st0.mismatched + 4);
    /* A plan of another context. */
    drk_capture_plan q = snap_plan();
    q.ctx = (CUcontext)&q;
    CHECK(drk_capture_arm(&q) == 0);
    hook(kp, NULL);
    CHECK(drk_capture_take(&g) == 0);
    /* The bytes only, no context named: any context will do. */
    q = bytes_plan();
    CHECK(drk_capture_arm(&q) == 0);
    CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    hook(kp, NULL);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHECK(drk_capture_take(&g) == 1);

    /* (e) A capturing stream, and a capture query that fails: not captured. */
    st0 = drk_capture_stats_get();
    CHECK(drk_capture_arm(&p) == 0);
    CHECK(fakecuda_set_capturing(stream, CU_STREAM_CAPTURE_STATUS_ACTIVE) == 0);
    fakecuda_reset_calls();
    hook(kp, NULL);
    CHECK(fakecuda_set_capturing(stream, CU_STREAM_CAPTURE_STATUS_NONE) == 0);
    CHECK(fakecuda_inject_error("cuStreamIsCapturing", CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 1) == 0);
    hook(kp, NULL);
    CHECK(fakecuda_calls("cuMemcpyDtoDAsync_v2") == 0 && fakecuda_calls("cuStreamIsCapturing") == 2);
    CHECK(drk_capture_take(&g) == 0);
    CHECK(drk_capture_stats_get().mismatched == st0.mismatched + 2);
    hook(kp, NULL); /* out of capture: taken */
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 1);

    /* (f) The packed buffer of `extra`, and extras the driver refuses. */
    uint8_t packed[24];
    memcpy(packed, &a_out, 8), memcpy(packed + 8, &a_in, 8), memcpy(packed + 16, &a_s, 4),
        memcpy(packed + 20, &a_n, 4);
    size_t psize = sizeof packed, short_size = 20;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &psize,
                     CU_LAUNCH_PARAM_END};
    CHECK(drk_capture_arm(&p) == 0);
    hook(NULL, extra);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 1);
    check_bytes(&g, out_d, in_d);
    void *no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_END};
    void *no_pointer[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &psize, CU_LAUNCH_PARAM_END};
    void *unknown[] = {(void *)(uintptr_t)7, packed, CU_LAUNCH_PARAM_END};
    void *too_short[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &short_size,
                         CU_LAUNCH_PARAM_END};
    void *unended[20];
    for (int i = 0; i < 20; i += 2)
        unended[i] = CU_LAUNCH_PARAM_BUFFER_POINTER, unended[i + 1] = packed;
    void *null_param[4] = {&a_out, NULL, &a_s, &a_n};
    st0 = drk_capture_stats_get();
    CHECK(drk_capture_arm(&p) == 0);
    hook(NULL, no_size);
    hook(NULL, no_pointer);
    hook(NULL, unknown);
    hook(NULL, too_short);
    hook(NULL, unended);
    hook(kp, extra); /* both */
    hook(NULL, NULL); /* neither */
    hook(null_param, NULL);
    CHECK(drk_capture_take(&g) == 0 && drk_capture_wanted((uintptr_t)fn));
    CHECK(drk_capture_stats_get().mismatched == st0.mismatched + 8);

    /* (g) A copy, or the event, that fails: the bytes, snapped 0, the error. */
    CHECK(fakecuda_inject_error("cuMemcpyDtoDAsync_v2", CUDA_ERROR_ILLEGAL_ADDRESS, 1) == 0);
    hook(kp, NULL);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 0 && g.rc == CUDA_ERROR_ILLEGAL_ADDRESS &&
          strstr(g.why, "cuMemcpyDtoDAsync_v2"));
    check_bytes(&g, out_d, in_d);
    CHECK(drk_capture_arm(&p) == 0);
    CHECK(fakecuda_inject_error("cuEventRecord", CUDA_ERROR_INVALID_HANDLE, 1) == 0);
    hook(kp, NULL);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 0 && g.rc == CUDA_ERROR_INVALID_HANDLE &&
          strstr(g.why, "cuEventRecord"));

    /* (h) A launch while another thread is inside the capture just launches. */
    st0 = drk_capture_stats_get();
    real_copy = table.memcpy_dtod_async;
    drk_driver gated = table;
    gated.memcpy_dtod_async = gated_copy;
    drk_capture_configure(&gated);
    CHECK(drk_capture_arm(&p) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, capturing_thread, NULL) == 0);
    pthread_mutex_lock(&gate_lock);
    while (!gate_inside)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    hook(kp, NULL); /* still armed: the other thread has not finished (stats would wait for the lock) */
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    pthread_join(t, NULL);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 1);
    st = drk_capture_stats_get();
    CHECK(st.captured == st0.captured + 1 && st.busy == st0.busy + 1);
    drk_capture_configure(&table);

    /* Two threads launching while armed: one capture. */
    st0 = drk_capture_stats_get();
    CHECK(drk_capture_arm(&p) == 0);
    pthread_t r[2];
    pthread_barrier_init(&start, NULL, 2);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&r[i], NULL, racer, NULL) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i], NULL);
    pthread_barrier_destroy(&start);
    st = drk_capture_stats_get();
    CHECK(st.captured == st0.captured + 1 && st.snapped == st0.snapped + 1);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 1);

    /* (i) Disarmed: nothing, and a plan not taken is dropped. */
    CHECK(drk_capture_arm(&p) == 0);
    drk_capture_disarm();
    CHECK(!drk_capture_wanted((uintptr_t)fn));
    drk_capture_launch((uintptr_t)fn, grid, block, 0, stream, kp, NULL);
    CHECK(drk_capture_take(&g) == 0);
    CHECK(drk_capture_arm(&p) == 0);
    hook(kp, NULL);
    drk_capture_disarm();
    CHECK(drk_capture_take(&g) == 0);
    /* A plan armed again replaces one not taken. */
    CHECK(drk_capture_arm(&p) == 0);
    hook(kp, NULL);
    q = bytes_plan();
    CHECK(drk_capture_arm(&q) == 0);
    CHECK(drk_capture_take(&g) == 0);
    hook(kp, NULL);
    CHECK(drk_capture_take(&g) == 1 && g.snapped == 0);

    /* A fork child: nothing armed. */
    CHECK(drk_capture_arm(&p) == 0);
    drk_capture_after_fork_child();
    CHECK(!drk_capture_wanted((uintptr_t)fn));
    drk_capture_launch((uintptr_t)fn, grid, block, 0, stream, kp, NULL);
    CHECK(drk_capture_take(&g) == 0);

    drk_ptx_flows_free(flows, m.nkernels);
    drk_ptx_free(&m);
    return CHECK_DONE();
}
