/* What a context of drk's own on the program's device isolates, measured
 * with the driver API, no drk (run by hand on a GPU: build/tests/bench/ctx_fault):
 *   1. the program's context (the primary) holds a buffer A; a second
 *      context on the same device (drk's) writes through A's address: does
 *      it fault?
 *   2. the second context writes to an address mapped nowhere (a range it
 *      allocated and freed): does it fault there?
 *   3. does the program's context go on untouched: A intact, kernels and
 *      copies working; can the faulted context be destroyed and a fresh one
 *      made; does the program's context work after that?
 * Measured on the H200 (driver 580.159.04), 2026-12-01: 1. no fault -- the
 * contexts of one device share the address space and its mappings, the
 * write lands in A; 2. yes, CUDA_ERROR_ILLEGAL_ADDRESS; 3. no -- the error
 * is sticky for the whole device: the program's context answers
 * CUDA_ERROR_ILLEGAL_ADDRESS to every call after, and no fresh context can
 * be made. So a context of drk's own protects nothing: a trial that faults
 * ends the program's CUDA, and drk's trials are kept safe by the pointer
 * rules alone (docs/evolve.md). Prints the answers and a last line
 * "measured: ..."; exit 0 unless a call the probe relies on failed before
 * the fault. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry fill(.param .u64 p, .param .u32 v, .param .u32 n)\n{\n"
                          " .reg .b32 %r<6>; .reg .b64 %rd<5>; .reg .pred %p;\n"
                          " ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [v]; ld.param.u32 %r2, [n];\n"
                          " mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x;\n"
                          " mad.lo.s32 %r3, %r3, %r4, %r5; setp.ge.u32 %p, %r3, %r2; @%p ret;\n"
                          " cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r3, 4; add.s64 %rd4, %rd2, %rd3;\n"
                          " st.global.u32 [%rd4], %r1; ret;\n}\n";

static int fails;
static int ok(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        const char *s = NULL;
        cuGetErrorName(r, &s);
        printf("call failed: %s: %s\n", what, s ? s : "?");
        fails++;
    }
    return r == CUDA_SUCCESS;
}

static CUresult fill(CUfunction f, CUdeviceptr p, uint32_t v, uint32_t n)
{
    void *args[] = {&p, &v, &n};
    return cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
}

static int all_are(CUdeviceptr p, uint32_t v, uint32_t n)
{
    static uint32_t h[1 << 16];
    if (!ok(cuMemcpyDtoH(h, p, n * 4), "read back"))
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (h[i] != v)
            return 0;
    return 1;
}

int main(void)
{
    const uint32_t n = 1 << 16;
    CUdevice dev;
    CUcontext prog, mine, fresh;
    CUmodule mp, mm;
    CUfunction fp, fm;
    CUdeviceptr a;
    if (!ok(cuInit(0), "cuInit") || !ok(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !ok(cuDevicePrimaryCtxRetain(&prog, dev), "retain") || !ok(cuCtxSetCurrent(prog), "set") ||
        !ok(cuModuleLoadData(&mp, ptx), "load") || !ok(cuModuleGetFunction(&fp, mp, "fill"), "get") ||
        !ok(cuMemAlloc(&a, n * 4), "alloc") || !ok(fill(fp, a, 7, n), "fill 7") || !ok(cuCtxSynchronize(), "sync"))
        return 1;
    CUctxCreateParams cp;
    memset(&cp, 0, sizeof cp);
    if (!ok(cuCtxCreate(&mine, &cp, 0, dev), "cuCtxCreate") || !ok(cuModuleLoadData(&mm, ptx), "load 2") ||
        !ok(cuModuleGetFunction(&fm, mm, "fill"), "get 2"))
        return 1;
    /* drk's context writes through the program's pointer: a fact to report. */
    CUresult launch = fill(fm, a, 99, n), sync = cuCtxSynchronize();
    const char *ls = NULL, *ss = NULL;
    cuGetErrorName(launch, &ls);
    cuGetErrorName(sync, &ss);
    int shared = launch == CUDA_SUCCESS && sync == CUDA_SUCCESS;
    printf("second context writing the program's buffer: launch %s, sync %s: %s\n", ls, ss,
           shared ? "no fault, the address space is shared" : "faulted in the second context");
    if (shared && !(ok(cuCtxSetCurrent(prog), "to the program") && ok(fill(fp, a, 7, n), "refill 7") &&
                    ok(cuCtxSynchronize(), "sync") && ok(cuCtxSetCurrent(mine), "to the second")))
        return 1;
    /* drk's context writes where nothing is mapped: it must fault there. */
    CUdeviceptr gone;
    if (!ok(cuMemAlloc(&gone, n * 4), "alloc in the second") || !ok(cuMemFree(gone), "free in the second"))
        return 1;
    launch = fill(fm, gone, 99, n), sync = cuCtxSynchronize();
    cuGetErrorName(launch, &ls);
    cuGetErrorName(sync, &ss);
    int faulted = launch != CUDA_SUCCESS || sync != CUDA_SUCCESS;
    printf("second context writing an unmapped range: launch %s, sync %s: %s\n", ls, ss,
           faulted ? "faulted in the second context" : "NO FAULT");
    CUresult again = cuCtxSynchronize();
    const char *as = NULL;
    cuGetErrorName(again, &as);
    printf("second context afterwards: %s (sticky: %s)\n", as, again != CUDA_SUCCESS ? "yes" : "no");
    /* The program's side. */
    if (!ok(cuCtxSetCurrent(prog), "back to the program"))
        return 1;
    CUresult ps = cuCtxSynchronize();
    const char *pss = NULL;
    cuGetErrorName(ps, &pss);
    int intact = ps == CUDA_SUCCESS && all_are(a, 7, n);
    printf("program's context after the fault: sync %s, its buffer %s\n", pss, intact ? "unchanged (all 7)" : "CHANGED");
    int works = ok(fill(fp, a, 8, n), "program fill 8") && ok(cuCtxSynchronize(), "program sync") && all_are(a, 8, n);
    printf("program's context runs kernels and copies after the fault: %s\n", works ? "yes" : "NO");
    CUresult d = cuCtxDestroy(mine);
    const char *ds = NULL;
    cuGetErrorName(d, &ds);
    int renewed = d == CUDA_SUCCESS && ok(cuCtxCreate(&fresh, &cp, 0, dev), "fresh context") &&
                  ok(cuCtxDestroy(fresh), "destroy fresh");
    printf("faulted context destroyed (%s), a fresh one made: %s\n", ds, renewed ? "yes" : "NO");
    cuCtxSetCurrent(prog);
    int still = ok(fill(fp, a, 9, n), "program fill 9") && ok(cuCtxSynchronize(), "program sync 2") && all_are(a, 9, n);
    printf("program's context after drk's context was destroyed: %s\n", still ? "works" : "BROKEN");
    printf("measured: contexts of one device %s; a fault in a second context %s\n",
           shared ? "share one address space (a missed pointer is not caught)" : "are isolated",
           faulted && intact && works && renewed && still ? "stays there" : "reaches the program's context");
    return 0;
}
