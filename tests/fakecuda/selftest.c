/* The stand-in driver's own test: links libcuda.so.1 (the fake) directly, no
 * drk, and checks what drk's tests will rely on: every hooked name exported
 * and counted under its own name, every entry of drk's driver table
 * exported, cuGetProcAddress's version and per-thread choices, handles,
 * memory, kernels computing the right results, bad inputs, and many threads
 * at once. Prints one line per failed check; exits 1 if any. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include "base/driver.h"     /* base/: the driver table, whose entries the fake must export too */
#include "interpose/hooks.h" /* interpose/: the names drk hooks, which the fake must export */
#include "tests/fakecuda/fakecuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failures++;                                                        \
        }                                                                      \
    } while (0)

#define EXPECT(call, want)                                                     \
    do {                                                                       \
        CUresult got_ = (call);                                                \
        if (got_ != (want)) {                                                  \
            fprintf(stderr, "FAIL %s:%d: %s returned %d, expected %s (%d)\n",  \
                    __FILE__, __LINE__, #call, (int)got_, #want, (int)(want)); \
            failures++;                                                        \
        }                                                                      \
    } while (0)

#define OK(call) EXPECT(call, CUDA_SUCCESS)

static void *g_lib; /* this process's handle on the fake */

static void *sym(const char *name) { return dlsym(g_lib, name); }

static const char *const hook_names[] = {
#define HOOK_NAME_(name, body, family) #name,
    DRK_HOOKS(HOOK_NAME_)
#undef HOOK_NAME_
};
#define NHOOKS (sizeof hook_names / sizeof *hook_names)

/* Generated from the table's list, so a new entry is checked at once; the
 * name only with #, as some are macros in cuda.h. */
static const char *const driver_names[] = {
#define DRIVER_NAME_(member, name, params) #name,
    DRK_DRIVER_ENTRIES(DRIVER_NAME_)
#undef DRIVER_NAME_
};
#define NDRIVER (sizeof driver_names / sizeof *driver_names)

static unsigned long long hook_calls_total(void)
{
    unsigned long long n = 0;
    for (size_t i = 0; i < NHOOKS; i++)
        n += fakecuda_calls(hook_names[i]);
    return n;
}

/* ------------------------------------------------------------------------ */

static void test_before_init(void)
{
    int n = -1;
    EXPECT(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CUdeviceptr p;
    EXPECT(cuMemAlloc_v2(&p, 64), CUDA_ERROR_NOT_INITIALIZED);
    CUstream s;
    EXPECT(cuStreamCreate(&s, 0), CUDA_ERROR_NOT_INITIALIZED);
    int v = 0;
    OK(cuDriverGetVersion(&v));
    CHECK(v == 13000, "driver version %d", v);
    /* cudart resolves cuInit itself through cuGetProcAddress before cuInit. */
    void *fn = NULL;
    OK(cuGetProcAddress_v2("cuInit", &fn, 2000, 0, NULL));
    CHECK(fn == sym("cuInit"), "cuInit pointer before init");
    const char *name = NULL;
    OK(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name));
    CHECK(name && strcmp(name, "CUDA_ERROR_NOT_INITIALIZED") == 0, "error name %s", name ? name : "(null)");
    EXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    CHECK(n == 1, "device count %d", n);
}

/* Every name drk hooks is exported and known to the call counter; every
 * entry of drk's driver table (what alloc/ and evolve/ call) is exported. */
static void test_exports(void)
{
    for (size_t i = 0; i < NHOOKS; i++) {
        CHECK(sym(hook_names[i]) != NULL, "%s not exported", hook_names[i]);
        CHECK(fakecuda_inject_error(hook_names[i], CUDA_SUCCESS, 0) == 0, "%s not counted", hook_names[i]);
    }
    for (size_t i = 0; i < NDRIVER; i++)
        CHECK(sym(driver_names[i]) != NULL, "%s (driver table) not exported", driver_names[i]);
    CHECK(fakecuda_inject_error("cuNoSuchFunction", CUDA_SUCCESS, 0) == -1, "unknown name accepted");
    CHECK(fakecuda_calls("cuNoSuchFunction") == 0, "unknown name counted");
    /* Helpers are exported under fakecuda_ names only. */
    CHECK(sym("fakecuda_calls") != NULL && sym("fakecuda_reset_calls") != NULL, "helpers not exported");
}

/* Each hooked form, called once with arguments it must refuse, counts
 * under its own exact name and nothing else. */
static CUgraphExec no_graph;
static CUipcMemHandle no_ipc;

#define BAD_CALLS(X)                                                                                     \
    X(cuLaunchKernel, CUDA_ERROR_INVALID_HANDLE, NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)            \
    X(cuLaunchKernel_ptsz, CUDA_ERROR_INVALID_HANDLE, NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)       \
    X(cuLaunchKernelEx, CUDA_ERROR_INVALID_VALUE, NULL, NULL, NULL, NULL)                                \
    X(cuLaunchKernelEx_ptsz, CUDA_ERROR_INVALID_VALUE, NULL, NULL, NULL, NULL)                           \
    X(cuLaunchCooperativeKernel, CUDA_ERROR_INVALID_HANDLE, NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL)       \
    X(cuLaunchCooperativeKernel_ptsz, CUDA_ERROR_INVALID_HANDLE, NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL)  \
    X(cuGraphLaunch, CUDA_ERROR_INVALID_VALUE, no_graph, NULL)                                           \
    X(cuGraphLaunch_ptsz, CUDA_ERROR_INVALID_VALUE, no_graph, NULL)                                      \
    X(cuModuleLoad, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                                \
    X(cuModuleLoadData, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                            \
    X(cuModuleLoadDataEx, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0, NULL, NULL)                           \
    X(cuModuleLoadFatBinary, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                       \
    X(cuLibraryLoadData, CUDA_ERROR_INVALID_VALUE, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0)             \
    X(cuLibraryLoadFromFile, CUDA_ERROR_INVALID_VALUE, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0)         \
    X(cuModuleGetFunction, CUDA_ERROR_INVALID_VALUE, NULL, NULL, NULL)                                   \
    X(cuLibraryGetKernel, CUDA_ERROR_INVALID_VALUE, NULL, NULL, NULL)                                    \
    X(cuKernelGetFunction, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                         \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0, 0)           \
    X(cuCtxPushCurrent_v2, CUDA_ERROR_INVALID_VALUE, NULL)                                               \
    X(cuModuleUnload, CUDA_ERROR_INVALID_HANDLE, NULL)                                                   \
    X(cuLibraryUnload, CUDA_ERROR_INVALID_HANDLE, NULL)                                                  \
    X(cuMemAlloc, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                                     \
    X(cuMemAlloc_v2, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                                  \
    X(cuMemAllocPitch, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0, 0, 0)                                    \
    X(cuMemAllocPitch_v2, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0, 0, 0)                                 \
    X(cuMemFree, CUDA_ERROR_INVALID_VALUE, 0)                                                            \
    X(cuMemFree_v2, CUDA_ERROR_INVALID_VALUE, 0)                                                         \
    X(cuMemAllocAsync, CUDA_ERROR_INVALID_VALUE, NULL, 0, NULL)                                          \
    X(cuMemAllocAsync_ptsz, CUDA_ERROR_INVALID_VALUE, NULL, 0, NULL)                                     \
    X(cuMemAllocFromPoolAsync, CUDA_ERROR_INVALID_VALUE, NULL, 0, NULL, NULL)                            \
    X(cuMemAllocFromPoolAsync_ptsz, CUDA_ERROR_INVALID_VALUE, NULL, 0, NULL, NULL)                       \
    X(cuMemFreeAsync, CUDA_ERROR_INVALID_VALUE, 0, NULL)                                                 \
    X(cuMemFreeAsync_ptsz, CUDA_ERROR_INVALID_VALUE, 0, NULL)                                            \
    X(cuMemGetInfo, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                                \
    X(cuMemGetInfo_v2, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                             \
    X(cuMemGetAddressRange, CUDA_ERROR_NOT_FOUND, NULL, NULL, 0)                                         \
    X(cuMemGetAddressRange_v2, CUDA_ERROR_NOT_FOUND, NULL, NULL, 0)                                      \
    X(cuPointerGetAttribute, CUDA_ERROR_INVALID_VALUE, NULL, CU_POINTER_ATTRIBUTE_CONTEXT, 0)            \
    X(cuPointerGetAttributes, CUDA_ERROR_INVALID_VALUE, 0, NULL, NULL, 0)                                \
    X(cuIpcGetMemHandle, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                              \
    X(cuIpcOpenMemHandle, CUDA_ERROR_INVALID_VALUE, NULL, no_ipc, 0)                                     \
    X(cuIpcOpenMemHandle_v2, CUDA_ERROR_INVALID_VALUE, NULL, no_ipc, 0)                                  \
    X(cuIpcCloseMemHandle, CUDA_ERROR_INVALID_VALUE, 0)                                                  \
    X(cuCtxEnablePeerAccess, CUDA_ERROR_INVALID_CONTEXT, NULL, 0)                                        \
    X(cuMemHostAlloc, CUDA_ERROR_INVALID_VALUE, NULL, 0, 0)                                              \
    X(cuMemAllocHost, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                                 \
    X(cuMemAllocHost_v2, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                              \
    X(cuMemFreeHost, CUDA_ERROR_INVALID_VALUE, NULL)                                                     \
    X(cuMemHostGetDevicePointer, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0)                                \
    X(cuMemHostGetDevicePointer_v2, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0)                             \
    X(cuMemHostGetFlags, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                           \
    X(cuStreamIsCapturing, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                         \
    X(cuStreamIsCapturing_ptsz, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                    \
    X(cuStreamBeginCapture, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc)                                \
    X(cuStreamBeginCapture_ptsz, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc)                           \
    X(cuStreamBeginCapture_v2, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc, CU_STREAM_CAPTURE_MODE_GLOBAL) \
    X(cuStreamBeginCapture_v2_ptsz, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc, CU_STREAM_CAPTURE_MODE_GLOBAL) \
    X(cuStreamBeginCaptureToGraph, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc, NULL, NULL, NULL, 0,       \
      CU_STREAM_CAPTURE_MODE_GLOBAL)                                                                     \
    X(cuStreamBeginCaptureToGraph_ptsz, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc, NULL, NULL, NULL, 0,  \
      CU_STREAM_CAPTURE_MODE_GLOBAL)                                                                     \
    X(cuStreamEndCapture, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                          \
    X(cuStreamEndCapture_ptsz, CUDA_ERROR_INVALID_VALUE, NULL, NULL)                                     \
    X(cuMemExportToShareableHandle, CUDA_ERROR_INVALID_VALUE, NULL, 0, 0, 0)                             \
    X(cuMemImportFromShareableHandle, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0)                           \
    X(cuGreenCtxCreate, CUDA_ERROR_INVALID_VALUE, NULL, (CUdevResourceDesc)NULL, 0, 0)                   \
    X(cuStreamCreate, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                                 \
    X(cuStreamCreateWithPriority, CUDA_ERROR_INVALID_VALUE, NULL, 0, 0)                                  \
    X(cuStreamDestroy, CUDA_ERROR_INVALID_HANDLE, NULL)                                                  \
    X(cuStreamDestroy_v2, CUDA_ERROR_INVALID_HANDLE, NULL)                                               \
    X(cuStreamSynchronize, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc)                                 \
    X(cuStreamSynchronize_ptsz, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc)                            \
    X(cuStreamQuery, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc)                                       \
    X(cuStreamQuery_ptsz, CUDA_ERROR_INVALID_HANDLE, (CUstream)&no_ipc)                                  \
    X(cuCtxSynchronize, CUDA_ERROR_INVALID_CONTEXT)                                                      \
    X(cuProfilerStart, CUDA_ERROR_INVALID_CONTEXT)                                                       \
    X(cuProfilerStop, CUDA_ERROR_INVALID_CONTEXT)                                                        \
    X(cuCtxDestroy, CUDA_ERROR_INVALID_CONTEXT, NULL)                                                    \
    X(cuCtxDestroy_v2, CUDA_ERROR_INVALID_CONTEXT, NULL)                                                 \
    X(cuDevicePrimaryCtxRetain, CUDA_ERROR_INVALID_VALUE, NULL, 0)                                       \
    X(cuDevicePrimaryCtxRelease, CUDA_ERROR_INVALID_DEVICE, 1)                                           \
    X(cuDevicePrimaryCtxRelease_v2, CUDA_ERROR_INVALID_DEVICE, 1)                                        \
    X(cuDevicePrimaryCtxReset, CUDA_ERROR_INVALID_DEVICE, 1)                                             \
    X(cuDevicePrimaryCtxReset_v2, CUDA_ERROR_INVALID_DEVICE, 1)                                          \
    X(cuDevicePrimaryCtxGetState, CUDA_ERROR_INVALID_VALUE, 0, NULL, NULL)                               \
    X(cuCtxSynchronize_v2, CUDA_ERROR_INVALID_CONTEXT, (CUcontext)&no_ipc)                               \
    X(cuEventSynchronize, CUDA_ERROR_INVALID_HANDLE, (CUevent)&no_ipc)                                   \
    X(cuCtxGetLimit, CUDA_ERROR_INVALID_VALUE, NULL, CU_LIMIT_STACK_SIZE)                                \
    X(cuCtxSetLimit, CUDA_ERROR_INVALID_VALUE, CU_LIMIT_MAX, 0)                                          \
    X(cuFuncLoad, CUDA_ERROR_INVALID_HANDLE, NULL)                                                       \
    X(cuMemcpyPeer, CUDA_ERROR_INVALID_CONTEXT, 0, NULL, 0, NULL, 0)                                     \
    X(cuMemcpyPeerAsync, CUDA_ERROR_INVALID_CONTEXT, 0, NULL, 0, NULL, 0, NULL)                          \
    X(cuGetProcAddress, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0, 0)                                      \
    X(cuGetProcAddress_v2, CUDA_ERROR_INVALID_VALUE, NULL, NULL, 0, 0, NULL)

#define BAD_CALL_FN_(name, want, ...) static CUresult bad_##name(void) { return name(__VA_ARGS__); }
BAD_CALLS(BAD_CALL_FN_)
#undef BAD_CALL_FN_

static const struct {
    const char *name;
    CUresult (*call)(void);
    CUresult want;
} bad_calls[] = {
#define BAD_CALL_ROW_(name, want, ...) {#name, bad_##name, want},
    BAD_CALLS(BAD_CALL_ROW_)
#undef BAD_CALL_ROW_
};

static int is_hooked(const char *name)
{
    for (size_t h = 0; h < NHOOKS; h++)
        if (strcmp(hook_names[h], name) == 0)
            return 1;
    return 0;
}

/* The table also holds forms drk does not hook (yet): they count under
 * their own name and add nothing to the hooked total. */
static void test_each_hook_counts_itself(void)
{
    for (size_t i = 0; i < sizeof bad_calls / sizeof *bad_calls; i++) {
        fakecuda_reset_calls();
        CUresult rc = bad_calls[i].call();
        CHECK(rc == bad_calls[i].want, "%s returned %d, expected %d", bad_calls[i].name, (int)rc,
              (int)bad_calls[i].want);
        CHECK(fakecuda_calls(bad_calls[i].name) == 1, "%s counted %llu", bad_calls[i].name,
              fakecuda_calls(bad_calls[i].name));
        unsigned long long want_total = (unsigned long long)is_hooked(bad_calls[i].name);
        CHECK(hook_calls_total() == want_total, "%s: %llu hooked calls counted in all", bad_calls[i].name,
              hook_calls_total());
    }
    /* Every hooked name is covered above. */
    for (size_t h = 0; h < NHOOKS; h++) {
        int seen = 0;
        for (size_t i = 0; i < sizeof bad_calls / sizeof *bad_calls; i++)
            seen |= strcmp(bad_calls[i].name, hook_names[h]) == 0;
        CHECK(seen, "hook %s has no call in the count test", hook_names[h]);
    }
    fakecuda_reset_calls();
    CHECK(fakecuda_calls("cuMemAlloc_v2") == 0, "reset");
}

/* ------------------------------------------------------------------------ */

#define PT CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define LEG CU_GET_PROC_ADDRESS_LEGACY_STREAM

static const struct {
    const char *symbol;
    int version;
    cuuint64_t flags;
    const char *expect; /* NULL: *pfn must be NULL */
    CUdriverProcAddressQueryResult status;
} proc_cases[] = {
    {"cuInit", 2000, 0, "cuInit", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDriverGetVersion", 2020, 0, "cuDriverGetVersion", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc", 1000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemAlloc", 2000, 0, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc", 3010, 0, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc", 13000, PT, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemFree", 2000, 0, "cuMemFree", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemFree", 12000, 0, "cuMemFree_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocPitch", 2000, 0, "cuMemAllocPitch", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemGetInfo", 2000, 0, "cuMemGetInfo", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemGetAddressRange", 2000, 0, "cuMemGetAddressRange", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemGetAddressRange", 3020, 0, "cuMemGetAddressRange_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocHost", 2000, 0, "cuMemAllocHost", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocHost", 3020, 0, "cuMemAllocHost_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemHostAlloc", 2020, 0, "cuMemHostAlloc", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemHostAlloc", 2010, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemFreeHost", 2000, 0, "cuMemFreeHost", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamDestroy", 2000, 0, "cuStreamDestroy", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamDestroy", 3020, 0, "cuStreamDestroy", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamCreate", 2000, 0, "cuStreamCreate", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGreenCtxCreate", 12040, 0, "cuGreenCtxCreate", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGreenCtxCreate", 12030, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuStreamCreateWithPriority", 5050, 0, "cuStreamCreateWithPriority", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamCreateWithPriority", 5000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuLaunchKernel", 3020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuLaunchKernel", 4000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 4000, PT, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 7000, PT, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 13000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 13000, LEG, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 13000, PT, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernelEx", 11050, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuLaunchKernelEx", 11060, 0, "cuLaunchKernelEx", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernelEx", 12000, PT, "cuLaunchKernelEx_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchCooperativeKernel", 8000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuLaunchCooperativeKernel", 9000, 0, "cuLaunchCooperativeKernel", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchCooperativeKernel", 9000, PT, "cuLaunchCooperativeKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGraphLaunch", 10000, 0, "cuGraphLaunch", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGraphLaunch", 10000, PT, "cuGraphLaunch_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGraphLaunch", 9020, PT, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemAllocAsync", 11010, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocAsync", 11020, PT, "cuMemAllocAsync_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemFreeAsync", 11020, 0, "cuMemFreeAsync", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemFreeAsync", 12000, PT, "cuMemFreeAsync_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocFromPoolAsync", 11020, PT, "cuMemAllocFromPoolAsync_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuModuleLoad", 2000, 0, "cuModuleLoad", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuModuleLoadData", 2000, 0, "cuModuleLoadData", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuModuleLoadDataEx", 2000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuModuleLoadDataEx", 2010, 0, "cuModuleLoadDataEx", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuModuleLoadFatBinary", 2000, 0, "cuModuleLoadFatBinary", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuModuleGetFunction", 12000, PT, "cuModuleGetFunction", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuModuleUnload", 2000, 0, "cuModuleUnload", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLibraryLoadData", 11080, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuLibraryLoadData", 12000, 0, "cuLibraryLoadData", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLibraryLoadFromFile", 12000, 0, "cuLibraryLoadFromFile", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLibraryGetKernel", 12000, 0, "cuLibraryGetKernel", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLibraryUnload", 12000, 0, "cuLibraryUnload", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuKernelGetFunction", 12000, 0, "cuKernelGetFunction", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuPointerGetAttribute", 4000, 0, "cuPointerGetAttribute", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuPointerGetAttributes", 6050, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuPointerGetAttributes", 7000, 0, "cuPointerGetAttributes", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcGetMemHandle", 4010, 0, "cuIpcGetMemHandle", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcOpenMemHandle", 4000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcOpenMemHandle", 10020, 0, "cuIpcOpenMemHandle", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcOpenMemHandle", 13000, PT, "cuIpcOpenMemHandle_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcCloseMemHandle", 4010, 0, "cuIpcCloseMemHandle", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcCloseMemHandle", 4000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuCtxEnablePeerAccess", 3020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuCtxEnablePeerAccess", 4000, 0, "cuCtxEnablePeerAccess", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemHostGetDevicePointer", 2010, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemHostGetDevicePointer", 2020, 0, "cuMemHostGetDevicePointer", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemHostGetDevicePointer", 3020, 0, "cuMemHostGetDevicePointer_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemHostGetFlags", 2020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemHostGetFlags", 2030, 0, "cuMemHostGetFlags", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamIsCapturing", 9020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuStreamIsCapturing", 10000, 0, "cuStreamIsCapturing", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamIsCapturing", 12000, PT, "cuStreamIsCapturing_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemExportToShareableHandle", 10010, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemExportToShareableHandle", 10020, 0, "cuMemExportToShareableHandle", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemImportFromShareableHandle", 10020, 0, "cuMemImportFromShareableHandle", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGetProcAddress", 11020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxGetDevice", 12080, 0, "cuCtxGetDevice", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxDestroy", 2000, 0, "cuCtxDestroy", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxRetain", 7000, 0, "cuDevicePrimaryCtxRetain", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxReset", 6050, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuDevicePrimaryCtxReset", 7000, 0, "cuDevicePrimaryCtxReset", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxReset", 10020, PT, "cuDevicePrimaryCtxReset", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxReset", 13000, PT, "cuDevicePrimaryCtxReset_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxReset_v2", 13000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
    {"cuDevicePrimaryCtxGetState", 6050, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuDevicePrimaryCtxGetState", 7000, 0, "cuDevicePrimaryCtxGetState", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuDevicePrimaryCtxGetState", 13000, 0, "cuDevicePrimaryCtxGetState", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxSynchronize", 2000, 0, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxSynchronize", 12080, PT, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamSynchronize", 2000, 0, "cuStreamSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuEventSynchronize", 2000, 0, "cuEventSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamBeginCapture", 10000, PT, "cuStreamBeginCapture_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamBeginCapture", 10010, PT, "cuStreamBeginCapture_v2_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamBeginCaptureToGraph", 12030, 0, "cuStreamBeginCaptureToGraph", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamBeginCaptureToGraph", 12030, PT, "cuStreamBeginCaptureToGraph_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamEndCapture", 10000, 0, "cuStreamEndCapture", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamEndCapture", 10000, PT, "cuStreamEndCapture_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamSynchronize", 13000, 0, "cuStreamSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamQuery", 2000, 0, "cuStreamQuery", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamQuery", 7000, PT, "cuStreamQuery_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemcpyHtoD", 12000, PT, "cuMemcpyHtoD_v2_ptds", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemcpyHtoD", 12000, 0, "cuMemcpyHtoD_v2", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamSynchronize", 12000, PT, "cuStreamSynchronize_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuProfilerStart", 12000, 0, "cuProfilerStart", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuProfilerStop", 12000, 0, "cuProfilerStop", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemcpyPeer", 3020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemcpyPeer", 4000, 0, "cuMemcpyPeer", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemcpyPeerAsync", 3020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuMemcpyPeerAsync", 13000, 0, "cuMemcpyPeerAsync", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxGetLimit", 3000, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuCtxGetLimit", 3010, 0, "cuCtxGetLimit", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxSetLimit", 12000, 0, "cuCtxSetLimit", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuFuncLoad", 12030, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuFuncLoad", 12040, 0, "cuFuncLoad", CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc_v2", 12000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND}, /* base names only */
    {"cuNoSuchFunction", 12000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
};

static void test_proc_address(void)
{
    static const char *seen[256];
    size_t nseen = 0;
    for (size_t i = 0; i < sizeof proc_cases / sizeof *proc_cases; i++) {
        void *fn = (void *)&test_proc_address; /* must be overwritten */
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
        CUresult rc = cuGetProcAddress_v2(proc_cases[i].symbol, &fn, proc_cases[i].version, proc_cases[i].flags,
                                          &st);
        void *want = proc_cases[i].expect ? sym(proc_cases[i].expect) : NULL;
        CHECK(rc == CUDA_SUCCESS, "%s@%d: rc %d", proc_cases[i].symbol, proc_cases[i].version, (int)rc);
        CHECK(fn == want && (!proc_cases[i].expect || want), "%s@%d flags %llu: got %p, expected %s (%p)",
              proc_cases[i].symbol, proc_cases[i].version, (unsigned long long)proc_cases[i].flags, fn,
              proc_cases[i].expect ? proc_cases[i].expect : "NULL", want);
        CHECK(st == proc_cases[i].status, "%s@%d: status %d, expected %d", proc_cases[i].symbol,
              proc_cases[i].version, (int)st, (int)proc_cases[i].status);
        /* The same answer without a status pointer. */
        void *fn2 = (void *)&test_proc_address;
        OK(cuGetProcAddress_v2(proc_cases[i].symbol, &fn2, proc_cases[i].version, proc_cases[i].flags, NULL));
        CHECK(fn2 == fn, "%s: NULL symbolStatus changed the answer", proc_cases[i].symbol);
        /* The legacy 4-argument form: same pointer, CUDA_ERROR_NOT_FOUND on a miss. */
        void *fn3 = (void *)&test_proc_address;
        rc = cuGetProcAddress(proc_cases[i].symbol, &fn3, proc_cases[i].version, proc_cases[i].flags);
        CHECK(rc == (want ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND) && fn3 == want, "legacy %s@%d: rc %d fn %p",
              proc_cases[i].symbol, proc_cases[i].version, (int)rc, fn3);
        if (proc_cases[i].expect && nseen < 256)
            seen[nseen++] = proc_cases[i].expect;
    }
    /* Every hooked form is reachable through cuGetProcAddress. */
    for (size_t h = 0; h < NHOOKS; h++) {
        int found = 0;
        for (size_t i = 0; i < nseen; i++)
            found |= strcmp(seen[i], hook_names[h]) == 0;
        CHECK(found, "hooked %s not reached by any cuGetProcAddress case", hook_names[h]);
    }

    void *fn = (void *)&test_proc_address;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    EXPECT(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK(fn == NULL, "pfn not cleared on a too-new version");
    EXPECT(cuGetProcAddress("cuLaunchKernel", &fn, 13010, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGetProcAddress_v2("cuLaunchKernel", NULL, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGetProcAddress_v2(NULL, &fn, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);

    /* The pointer handed out is the exact form: calling it counts that name. */
    fakecuda_reset_calls();
    OK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000, PT, NULL));
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **) = (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                        unsigned, unsigned, CUstream, void **, void **))fn;
    EXPECT(launch(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK(fakecuda_calls("cuLaunchKernel_ptsz") == 1 && fakecuda_calls("cuLaunchKernel") == 0,
          "ptsz pointer counted %llu/%llu", fakecuda_calls("cuLaunchKernel_ptsz"), fakecuda_calls("cuLaunchKernel"));
    CHECK(fakecuda_calls("cuGetProcAddress_v2") == 1, "cuGetProcAddress_v2 counted %llu",
          fakecuda_calls("cuGetProcAddress_v2"));
    OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, NULL));
    CUresult (*alloc_v2)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))fn;
    CUdeviceptr p = 0;
    OK(alloc_v2(&p, 100));
    CHECK(fakecuda_calls("cuMemAlloc_v2") == 1 && fakecuda_calls("cuMemAlloc") == 0, "_v2 pointer counted");
    OK(cuMemFree_v2(p));
}

/* ------------------------------------------------------------------------ */

static void test_memory(void)
{
    size_t free0, total;
    OK(cuMemGetInfo_v2(&free0, &total));
    CHECK(total == (size_t)1 << 30, "total %zu", total);
    CHECK(free0 == total, "free %zu at start", free0);

    CUdeviceptr a = 0, b = 0;
    OK(cuMemAlloc_v2(&a, 1000));
    OK(cuMemAlloc_v2(&b, 3));
    CHECK(a % 256 == 0 && b % 256 == 0, "alignment %llx %llx", a, b);
    CHECK(a > UINT32_MAX, "_v2 pointers are not confined to 32 bits (%llx)", a);
    size_t fr;
    OK(cuMemGetInfo_v2(&fr, &total));
    CHECK(fr == total - 1003, "free %zu after 1003 bytes", fr);
    CHECK(fakecuda_live_device_allocations() == 2 && fakecuda_live_device_bytes() == 1003, "live counters");

    CUdeviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange_v2(&base, &size, a + 999));
    CHECK(base == a && size == 1000, "range of interior pointer: %llx %zu", base, size);
    OK(cuMemGetAddressRange_v2(NULL, &size, a));
    EXPECT(cuMemGetAddressRange_v2(&base, &size, a + 1000), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuMemAlloc_v2(&base, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(&base, (size_t)2 << 30), CUDA_ERROR_OUT_OF_MEMORY);

    /* Interior, unknown and double frees are refused without harm. */
    EXPECT(cuMemFree_v2(a + 8), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree_v2(0x1234), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(b));
    EXPECT(cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemGetAddressRange_v2(&base, &size, a));
    CHECK(base == a, "a survived the bad frees");

    /* Copies and sets, bounds-checked. */
    float host[250], back[250];
    for (int i = 0; i < 250; i++)
        host[i] = (float)i;
    OK(cuMemcpyHtoD_v2(a, host, sizeof host));
    memset(back, 0, sizeof back);
    OK(cuMemcpyDtoH_v2(back, a, sizeof back));
    CHECK(memcmp(host, back, sizeof host) == 0, "HtoD/DtoH round trip");
    EXPECT(cuMemcpyHtoD_v2(a + 8, host, sizeof host), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyDtoH_v2(back, 0x1000, 4), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr c;
    OK(cuMemAlloc_v2(&c, 1000));
    OK(cuMemcpyDtoD_v2(c, a, 1000));
    OK(cuMemcpyDtoH_v2_ptds(back, c, sizeof back));
    CHECK(memcmp(host, back, sizeof host) == 0, "DtoD copy");
    OK(cuMemsetD32_v2(c, 0x3f800000u, 250)); /* 1.0f */
    OK(cuMemcpyDtoH_v2(back, c, sizeof back));
    CHECK(back[0] == 1.0f && back[249] == 1.0f, "memsetD32");
    EXPECT(cuMemsetD32_v2(c + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD32_v2(c, 0, 251), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemsetD8_v2(c, 0, 1000));
    OK(cuMemcpyDtoH_v2(back, c, 4));
    CHECK(back[0] == 0.0f, "memsetD8");

    /* Pointer attributes. */
    CUcontext ctx = (CUcontext)1;
    unsigned int mt = 0, flag = 7;
    CUdeviceptr dp = 0, start = 0;
    unsigned long long id_a = 0, id_c = 0;
    int ordinal = -1;
    size_t rsize = 0;
    void *hp = (void *)1;
    OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, a + 5));
    CHECK(ctx != NULL, "context attribute");
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 5));
    CHECK(mt == CU_MEMORYTYPE_DEVICE, "memory type %u", mt);
    OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 5));
    CHECK(dp == a + 5, "device pointer");
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 5));
    OK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 5));
    CHECK(start == a && rsize == 1000, "range attributes %llx %zu", start, rsize);
    OK(cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    OK(cuPointerGetAttribute(&id_c, CU_POINTER_ATTRIBUTE_BUFFER_ID, c));
    CHECK(id_a && id_c && id_a != id_c, "buffer ids %llu %llu", id_a, id_c);
    OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    CHECK(ordinal == 0, "ordinal");
    OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
    CHECK(flag == 0, "is_managed");
    OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_MAPPED, a));
    CHECK(flag == 1, "mapped");
    EXPECT(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0x1000), CUDA_ERROR_INVALID_VALUE);

    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    mt = 99, id_a = 99, hp = (void *)1, rsize = 99;
    void *data[] = {&mt, &id_a, &hp, &rsize};
    OK(cuPointerGetAttributes(4, attrs, data, 0x1000)); /* unknown: defaults, success */
    CHECK(mt == 0 && id_a == 0 && hp == NULL && rsize == 0, "defaults for an unknown pointer");
    OK(cuPointerGetAttributes(4, attrs, data, c + 1));
    CHECK(mt == CU_MEMORYTYPE_DEVICE && id_a == id_c && hp == NULL && rsize == 1000, "attributes of c");

    /* IPC handles carry the allocation's base. */
    CUipcMemHandle ipc;
    OK(cuIpcGetMemHandle(&ipc, c + 10));
    unsigned long long ipc_base;
    memcpy(&ipc_base, ipc.reserved, sizeof ipc_base);
    CHECK(ipc_base == c, "ipc handle base %llx", ipc_base);
    EXPECT(cuIpcGetMemHandle(&ipc, 0x1000), CUDA_ERROR_INVALID_VALUE);

    OK(cuMemFree_v2(a));
    OK(cuMemFree_v2(c));
    EXPECT(cuMemGetAddressRange_v2(&base, &size, a), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a), CUDA_ERROR_INVALID_VALUE);

    /* The legacy 32-bit forms really work. */
    CUdeviceptr_v1 l = 0, lbase = 0;
    unsigned int lsize = 0, lfree = 0, ltotal = 0;
    OK(cuMemAlloc(&l, 4096));
    CHECK(l != 0 && l % 256 == 0, "legacy pointer %x", l);
    memset((void *)(uintptr_t)l, 0xab, 4096); /* the 32-bit value is the address */
    OK(cuMemGetAddressRange(&lbase, &lsize, l + 100));
    CHECK(lbase == l && lsize == 4096, "legacy range %x %u", lbase, lsize);
    OK(cuMemGetInfo(&lfree, &ltotal));
    CHECK(ltotal == 1u << 30 && lfree == ltotal - 4096, "legacy info %u %u", lfree, ltotal);
    unsigned char byte = 0;
    OK(cuMemcpyDtoH(&byte, l + 7, 1));
    CHECK(byte == 0xab, "legacy copy");
    OK(cuMemFree(l));
    EXPECT(cuMemFree(l), CUDA_ERROR_INVALID_VALUE);

    unsigned int lpitch = 0;
    OK(cuMemAllocPitch(&l, &lpitch, 100, 3, 4));
    CHECK(lpitch == 512, "legacy pitch %u", lpitch);
    OK(cuMemGetAddressRange(NULL, &lsize, l));
    CHECK(lsize == 512 * 3, "pitched size %u", lsize);
    OK(cuMemFree(l));
    CUdeviceptr pp;
    size_t pitch = 0;
    OK(cuMemAllocPitch_v2(&pp, &pitch, 513, 2, 16));
    CHECK(pitch == 1024, "pitch %zu", pitch);
    OK(cuMemFree_v2(pp));
    EXPECT(cuMemAllocPitch_v2(&pp, &pitch, 100, 2, 3), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAllocPitch_v2(&pp, &pitch, 0, 2, 4), CUDA_ERROR_INVALID_VALUE);

    /* Stream-ordered allocation validates the stream and the pool. */
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuMemAllocAsync(&a, 64, s));
    OK(cuMemAllocAsync_ptsz(&b, 64, CU_STREAM_PER_THREAD));
    EXPECT(cuMemAllocAsync(&c, 64, (CUstream)&s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuMemAllocFromPoolAsync(&c, 64, NULL, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocFromPoolAsync_ptsz(&c, 64, (CUmemoryPool)&s, NULL));
    OK(cuMemFreeAsync(c, CU_STREAM_LEGACY));
    OK(cuMemFreeAsync_ptsz(b, NULL));
    OK(cuStreamDestroy_v2(s));
    EXPECT(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFreeAsync(a, NULL));

    /* Out of memory on demand. */
    fakecuda_set_total_memory(4096);
    EXPECT(cuMemAlloc_v2(&a, 4097), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc_v2(&a, 4096));
    EXPECT(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFree_v2(a));
    fakecuda_set_total_memory((size_t)1 << 30);

    /* Pinned host memory. */
    void *h1 = NULL, *h2 = NULL, *h3 = NULL;
    OK(cuMemHostAlloc(&h1, 100, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    OK(cuMemAllocHost(&h2, 100));
    OK(cuMemAllocHost_v2(&h3, 100));
    CHECK(h1 && h2 && h3, "host pointers");
    memset(h1, 1, 100);
    EXPECT(cuMemHostAlloc(&h1, 100, 0x80), CUDA_ERROR_INVALID_VALUE);
    CHECK(fakecuda_live_host_allocations() == 3, "live host %llu", fakecuda_live_host_allocations());
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h2 + 3));
    CHECK(mt == CU_MEMORYTYPE_HOST, "host memory type %u", mt);
    OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(uintptr_t)h2));
    CHECK(hp == h2, "host pointer attribute");
    EXPECT(cuMemFree_v2((CUdeviceptr)(uintptr_t)h1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeHost(&hp), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAlloc_v2(&a, 16));
    EXPECT(cuMemFreeHost((void *)(uintptr_t)a), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(a));
    OK(cuMemFreeHost(h1));
    OK(cuMemFreeHost(h2));
    OK(cuMemFreeHost(h3));
    EXPECT(cuMemFreeHost(h3), CUDA_ERROR_INVALID_VALUE);

    CHECK(fakecuda_live_device_allocations() == 0 && fakecuda_live_device_bytes() == 0 &&
              fakecuda_live_host_allocations() == 0,
          "leaks: %llu device, %zu bytes, %llu host", fakecuda_live_device_allocations(),
          fakecuda_live_device_bytes(), fakecuda_live_host_allocations());
    OK(cuMemGetInfo_v2(&fr, &total));
    CHECK(fr == total, "free %zu at end", fr);
}

/* ------------------------------------------------------------------------ */

/* Writes 1 + its linear (block, thread) index into out[], counting visits. */
static void k_index3d(const fakecuda_thread *t)
{
    unsigned int *out = *(unsigned int **)t->params[0];
    unsigned long long block = t->blockIdx.x + (unsigned long long)t->gridDim.x * (t->blockIdx.y + (unsigned long long)t->gridDim.y * t->blockIdx.z);
    unsigned long long thread = t->threadIdx.x + (unsigned long long)t->blockDim.x * (t->threadIdx.y + (unsigned long long)t->blockDim.y * t->threadIdx.z);
    unsigned long long per_block = (unsigned long long)t->blockDim.x * t->blockDim.y * t->blockDim.z;
    out[block * per_block + thread] += 1;
    /* Dynamic shared memory is per launch and writable. */
    if (t->shared)
        ((unsigned char *)t->shared)[thread % t->sharedMemBytes] = 1;
}

/* Sums its three layout-checked arguments: (char c, float4-like v, double d). */
struct f4 {
    float x, y, z, w;
} __attribute__((aligned(16)));

static void k_layout(const fakecuda_thread *t)
{
    char c = *(char *)t->params[0];
    struct f4 v = *(struct f4 *)t->params[1];
    double *out = *(double **)t->params[2];
    *out = c + v.x + v.y + v.z + v.w;
}

static void k_nolayout(const fakecuda_thread *t)
{
    if (t->params && t->nparams == 0)
        (**(int **)t->params[0])++;
}

static const char image[] = "DRKFAKE1\nvec_add\n\n  scale  \r\nfill\nempty\n";

static void run_vec_add(CUfunction f, int n)
{
    size_t bytes = (size_t)n * sizeof(float);
    float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    for (int i = 0; i < n; i++)
        ha[i] = (float)i, hb[i] = 2.0f * (float)i, hc[i] = -1.0f;
    CUdeviceptr da, db, dc;
    OK(cuMemAlloc_v2(&da, bytes));
    OK(cuMemAlloc_v2(&db, bytes));
    OK(cuMemAlloc_v2(&dc, bytes));
    OK(cuMemcpyHtoD_v2(da, ha, bytes));
    OK(cuMemcpyHtoD_v2(db, hb, bytes));
    void *args[] = {&da, &db, &dc, &n};
    unsigned int blocks = (unsigned int)(n + 127) / 128;
    OK(cuLaunchKernel(f, blocks, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH_v2(hc, dc, bytes));
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += hc[i] != 3.0f * (float)i;
    CHECK(bad == 0, "vec_add: %d wrong of %d", bad, n);
    OK(cuMemFree_v2(da));
    OK(cuMemFree_v2(db));
    OK(cuMemFree_v2(dc));
    free(ha), free(hb), free(hc);
}

static void test_modules(void)
{
    CUmodule m;
    OK(cuModuleLoadData(&m, image));
    CUfunction f, f2, fs;
    OK(cuModuleGetFunction(&f, m, "vec_add"));
    OK(cuModuleGetFunction(&f2, m, "vec_add"));
    CHECK(f == f2, "same function twice");
    OK(cuModuleGetFunction(&fs, m, "scale"));
    EXPECT(cuModuleGetFunction(&f2, m, "nope"), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuModuleGetFunction(&f2, NULL, "vec_add"), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuModuleGetFunction(&f2, (CUmodule)f, "vec_add"), CUDA_ERROR_INVALID_HANDLE);
    const char *name = NULL;
    OK(cuFuncGetName(&name, f));
    CHECK(name && strcmp(name, "vec_add") == 0, "function name");
    EXPECT(cuKernelGetName(&name, (CUkernel)f), CUDA_ERROR_INVALID_HANDLE);
    run_vec_add(f, 1000);
    run_vec_add(f, 1);

    /* Bad images. */
    CUmodule bad;
    EXPECT(cuModuleLoadData(&bad, "DRKFAKE2\nvec_add\n"), CUDA_ERROR_INVALID_IMAGE);
    EXPECT(cuModuleLoadData(&bad, "DRKFAKE1\nno_such_kernel\n"), CUDA_ERROR_INVALID_IMAGE);
    EXPECT(cuModuleLoadData(&bad, "DRKFAKE1\nvec_add\nvec_add\n"), CUDA_ERROR_INVALID_IMAGE);
    EXPECT(cuModuleLoadData(&bad, "\x7f" "ELF"), CUDA_ERROR_INVALID_IMAGE);
    CUmodule empty_mod;
    OK(cuModuleLoadData(&empty_mod, "DRKFAKE1"));
    OK(cuModuleUnload(empty_mod));
    EXPECT(cuModuleLoad(&bad, "/nonexistent/drk/fake.img"), CUDA_ERROR_FILE_NOT_FOUND);

    /* Every load form takes the same text. */
    char path[] = "/tmp/fakecuda_selftest_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        CHECK(write(fd, image, sizeof image - 1) == (ssize_t)(sizeof image - 1), "write image");
        close(fd);
        CUmodule mf;
        OK(cuModuleLoad(&mf, path));
        CUfunction ff;
        OK(cuModuleGetFunction(&ff, mf, "fill"));
        CHECK(ff != f, "fresh objects per load");
        OK(cuModuleUnload(mf));
        CUlibrary lf;
        OK(cuLibraryLoadFromFile(&lf, path, NULL, NULL, 0, NULL, NULL, 0));
        OK(cuLibraryUnload(lf));
        unlink(path);
    }
    EXPECT(cuLibraryLoadFromFile(&(CUlibrary){0}, "/nonexistent/x", NULL, NULL, 0, NULL, NULL, 0),
           CUDA_ERROR_FILE_NOT_FOUND);
    CUmodule mfat, mex;
    OK(cuModuleLoadFatBinary(&mfat, image));
    CUjit_option opt = CU_JIT_OPTIMIZATION_LEVEL;
    void *optval = (void *)(uintptr_t)3;
    OK(cuModuleLoadDataEx(&mex, image, 1, &opt, &optval));
    EXPECT(cuModuleLoadDataEx(&bad, image, 1, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuModuleUnload(mfat));
    OK(cuModuleUnload(mex));

    /* Libraries and kernels: distinct handle types. */
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k, k2;
    OK(cuLibraryGetKernel(&k, lib, "vec_add"));
    OK(cuLibraryGetKernel(&k2, lib, "vec_add"));
    CHECK(k == k2, "same kernel twice");
    EXPECT(cuLibraryGetKernel(&k2, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuLibraryGetKernel(&k2, (CUlibrary)m, "vec_add"), CUDA_ERROR_INVALID_HANDLE);
    OK(cuKernelGetName(&name, k));
    CHECK(name && strcmp(name, "vec_add") == 0, "kernel name");
    EXPECT(cuFuncGetName(&name, (CUfunction)k), CUDA_ERROR_INVALID_HANDLE);
    CUfunction kf, kf2;
    OK(cuKernelGetFunction(&kf, k));
    OK(cuKernelGetFunction(&kf2, k));
    CHECK(kf == kf2 && (void *)kf != (void *)k, "kernel's function");
    OK(cuFuncGetName(&name, kf));
    CHECK(name && strcmp(name, "vec_add") == 0, "kernel function name");
    EXPECT(cuKernelGetFunction(&kf2, (CUkernel)f), CUDA_ERROR_INVALID_HANDLE);
    run_vec_add(kf, 300);
    run_vec_add((CUfunction)k, 300); /* a CUkernel launches as a CUfunction */

    /* Parameter layouts and attributes. */
    size_t off = 99, sz = 99;
    OK(cuFuncGetParamInfo(f, 3, &off, &sz));
    CHECK(off == 24 && sz == 4, "vec_add param 3: %zu %zu", off, sz);
    EXPECT(cuFuncGetParamInfo(f, 4, &off, &sz), CUDA_ERROR_INVALID_VALUE);
    OK(cuKernelGetParamInfo(k, 1, &off, &sz));
    CHECK(off == 8 && sz == 8, "kernel param 1: %zu %zu", off, sz);
    EXPECT(cuKernelGetParamInfo((CUkernel)f, 1, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
    int attr = 0;
    OK(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CHECK(attr == 1024, "max threads %d", attr);
    OK(cuKernelGetAttribute(&attr, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0));
    EXPECT(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)k), CUDA_ERROR_INVALID_HANDLE);

    /* Launch validation. */
    float *buf;
    CUdeviceptr dbuf;
    OK(cuMemAlloc_v2(&dbuf, 64 * sizeof(float)));
    buf = (float *)(uintptr_t)dbuf;
    float v = 5.0f;
    int n = 64;
    void *fill_args[] = {&dbuf, &v, &n};
    CUfunction ffill;
    OK(cuModuleGetFunction(&ffill, m, "fill"));
    EXPECT(cuLaunchKernel(ffill, 0, 1, 1, 64, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(ffill, 1, 1, 1, 64, 0, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(ffill, 1, 1, 1, 1025, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(ffill, 1, 1, 1, 32, 32, 2, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel(ffill, 1, 1, 1, 64, 1, 1, 0, (CUstream)&v, fill_args, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchKernel((CUfunction)&v, 1, 1, 1, 64, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchKernel((CUfunction)m, 1, 1, 1, 64, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchKernel(ffill, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK(buf[0] == 0.0f, "refused launches ran nothing");
    OK(cuLaunchKernel(ffill, 1, 1, 1, 64, 1, 1, 0, CU_STREAM_LEGACY, fill_args, NULL));
    CHECK(buf[0] == 5.0f && buf[63] == 5.0f, "fill");

    /* Arguments through `extra`, packed as nvcc lays them out. */
    struct {
        CUdeviceptr x;
        float s;
        int n;
    } packed = {dbuf, 3.0f, 64};
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    OK(cuLaunchKernel(fs, 2, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    CHECK(buf[0] == 15.0f && buf[63] == 15.0f, "scale through extra: %f", buf[0]);
    EXPECT(cuLaunchKernel(fs, 2, 1, 1, 32, 1, 1, 0, NULL, fill_args, extra), CUDA_ERROR_INVALID_VALUE);
    size_t small = 8;
    void *short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                           CU_LAUNCH_PARAM_END};
    EXPECT(cuLaunchKernel(fs, 2, 1, 1, 32, 1, 1, 0, NULL, NULL, short_extra), CUDA_ERROR_INVALID_VALUE);

    /* cuLaunchKernelEx and the per-thread and cooperative forms. */
    float s2 = 2.0f;
    void *scale_args[] = {&dbuf, &s2, &n};
    CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                          .blockDimZ = 1, .hStream = CU_STREAM_PER_THREAD};
    OK(cuLaunchKernelEx(&cfg, fs, scale_args, NULL));
    OK(cuLaunchKernelEx_ptsz(&cfg, fs, scale_args, NULL));
    CHECK(buf[5] == 60.0f, "scale via Ex: %f", buf[5]);
    cfg.blockDimX = 0;
    EXPECT(cuLaunchKernelEx(&cfg, fs, scale_args, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernelEx(NULL, fs, scale_args, NULL), CUDA_ERROR_INVALID_VALUE);
    cfg.blockDimX = 64;
    cfg.numAttrs = 1;
    EXPECT(cuLaunchKernelEx(&cfg, fs, scale_args, NULL), CUDA_ERROR_INVALID_VALUE); /* attrs NULL */
    CUlaunchAttribute coop = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1};
    cfg.attrs = &coop;
    cfg.gridDimX = 100000;
    EXPECT(cuLaunchKernelEx(&cfg, fs, scale_args, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    OK(cuLaunchCooperativeKernel(ffill, 1, 1, 1, 64, 1, 1, 0, NULL, fill_args));
    OK(cuLaunchCooperativeKernel_ptsz(ffill, 132, 1, 1, 1024, 1, 1, 0, NULL, fill_args));
    EXPECT(cuLaunchCooperativeKernel(ffill, 265, 1, 1, 1024, 1, 1, 0, NULL, fill_args),
           CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    OK(cuLaunchKernel_ptsz(ffill, 1, 1, 1, 64, 1, 1, 0, CU_STREAM_PER_THREAD, fill_args, NULL));
    CUfunction fe;
    OK(cuModuleGetFunction(&fe, m, "empty"));
    OK(cuLaunchKernel(fe, 4, 4, 4, 8, 8, 8, 0, NULL, NULL, NULL));

    /* A registered kernel sees every (block, thread) of a 3-D grid once. */
    static const size_t one_ptr[] = {8};
    CHECK(fakecuda_register_kernel_params("index3d", k_index3d, 1, one_ptr) == 0, "register index3d");
    CHECK(fakecuda_register_kernel(NULL, k_index3d) == -1, "NULL name refused");
    CHECK(fakecuda_register_kernel("x", NULL) == -1, "NULL fn refused");
    static const size_t layout[] = {1, 16, 8};
    CHECK(fakecuda_register_kernel_params("layout", k_layout, 3, layout) == 0, "register layout");
    CUmodule mi;
    OK(cuModuleLoadData(&mi, "DRKFAKE1\nindex3d\nlayout\n"));
    CUfunction fi, fl;
    OK(cuModuleGetFunction(&fi, mi, "index3d"));
    unsigned int gx = 3, gy = 2, gz = 2, bx = 4, by = 3, bz = 2;
    size_t cells = (size_t)gx * gy * gz * bx * by * bz;
    CUdeviceptr dout;
    OK(cuMemAlloc_v2(&dout, cells * sizeof(unsigned int)));
    OK(cuMemsetD32_v2(dout, 0, cells));
    void *iargs[] = {&dout};
    unsigned long long before = fakecuda_kernel_launches("index3d");
    OK(cuLaunchKernel(fi, gx, gy, gz, bx, by, bz, 100, NULL, iargs, NULL));
    CHECK(fakecuda_kernel_launches("index3d") == before + 1, "kernel launch count");
    unsigned int *out = (unsigned int *)(uintptr_t)dout;
    int wrong = 0;
    for (size_t i = 0; i < cells; i++)
        wrong += out[i] != 1;
    CHECK(wrong == 0, "index3d: %d cells not visited exactly once", wrong);
    OK(cuMemFree_v2(dout));
    OK(cuModuleGetFunction(&fl, mi, "layout"));
    OK(cuFuncGetParamInfo(fl, 1, &off, &sz));
    CHECK(off == 16 && sz == 16, "float4 param at %zu", off);
    OK(cuFuncGetParamInfo(fl, 2, &off, &sz));
    CHECK(off == 32 && sz == 8, "double* param at %zu", off);
    double result = 0;
    double *presult = &result;
    struct {
        char c;
        struct f4 v;
        double *out;
    } lp = {1, {2, 3, 4, 5}, presult};
    size_t lps = sizeof lp;
    void *lextra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &lp, CU_LAUNCH_PARAM_BUFFER_SIZE, &lps, CU_LAUNCH_PARAM_END};
    OK(cuLaunchKernel(fl, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, lextra));
    CHECK(result == 15.0, "layout kernel through extra: %f", result);
    /* Without a layout, `extra` cannot be unpacked; kernelParams pass through. */
    CHECK(fakecuda_register_kernel("nolayout", k_nolayout) == 0, "register nolayout");
    CUmodule mn;
    OK(cuModuleLoadData(&mn, "DRKFAKE1\nnolayout\n"));
    CUfunction fn;
    OK(cuModuleGetFunction(&fn, mn, "nolayout"));
    EXPECT(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, lextra), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuFuncGetParamInfo(fn, 0, &off, &sz), CUDA_ERROR_INVALID_VALUE);
    int hits = 0;
    int *phits = &hits;
    void *nargs[] = {&phits};
    OK(cuLaunchKernel(fn, 2, 1, 1, 3, 1, 1, 0, NULL, nargs, NULL));
    CHECK(hits == 6, "nolayout kernel ran %d times", hits);
    OK(cuModuleUnload(mn));

    /* Unloading invalidates functions and kernels; handles never crash. */
    OK(cuModuleUnload(m));
    EXPECT(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchKernel(ffill, 1, 1, 1, 64, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuModuleGetFunction(&f2, m, "vec_add"), CUDA_ERROR_INVALID_HANDLE);
    OK(cuLibraryUnload(lib));
    EXPECT(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuLaunchKernel(kf, 1, 1, 1, 1, 1, 1, 0, NULL, fill_args, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuKernelGetName(&name, k), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuKernelGetFunction(&kf2, k), CUDA_ERROR_INVALID_HANDLE);
    OK(cuModuleUnload(mi));
    OK(cuMemFree_v2(dbuf));
}

/* ------------------------------------------------------------------------ */

static void test_streams_contexts(void)
{
    CUstream s, s2;
    EXPECT(cuStreamCreate(&s, 4), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreateWithPriority(&s2, 0, -3));
    OK(cuStreamSynchronize(s));
    OK(cuStreamSynchronize_ptsz(CU_STREAM_PER_THREAD));
    OK(cuStreamQuery(CU_STREAM_LEGACY));
    EXPECT(cuStreamSynchronize((CUstream)&s), CUDA_ERROR_INVALID_HANDLE);
    OK(cuGraphLaunch((CUgraphExec)&s, s));
    OK(cuGraphLaunch_ptsz((CUgraphExec)&s, NULL));
    EXPECT(cuGraphLaunch(NULL, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphLaunch((CUgraphExec)&s, (CUstream)&s), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy(s));
    EXPECT(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy_v2(s2));
    EXPECT(cuStreamDestroy_v2(s2), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamDestroy_v2(CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamDestroy_v2(NULL), CUDA_ERROR_INVALID_HANDLE);

    /* Device queries. */
    CUdevice dev = -1;
    OK(cuDeviceGet(&dev, 0));
    CHECK(dev == 0, "device");
    EXPECT(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    char name[128] = "";
    OK(cuDeviceGetName(name, sizeof name, 0));
    CHECK(strstr(name, "fakecuda") != NULL, "device name %s", name);
    int v = 0;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    CHECK(v == 132, "SMs %d", v);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    CHECK(v == 9, "cc major %d", v);
    EXPECT(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
    size_t total = 0;
    OK(cuDeviceTotalMem_v2(&total, 0));
    CHECK(total == (size_t)1 << 30, "total mem");

    /* Contexts. */
    CUcontext cur = (CUcontext)1, primary, created;
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == NULL, "no context at start");
    EXPECT(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    OK(cuCtxSetCurrent(primary));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary, "primary current");
    OK(cuCtxGetDevice(&dev));
    OK(cuCtxGetDevice_v2(&dev, primary));
    OK(cuCtxSynchronize());
    OK(cuCtxSynchronize_v2(NULL));
    EXPECT(cuCtxSetCurrent((CUcontext)&v), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxCreate_v4(&created, NULL, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == created && created != primary, "created context current");
    CUdeviceptr p;
    OK(cuMemAlloc_v2(&p, 8));
    OK(cuPointerGetAttribute(&cur, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    CHECK(cur == created, "allocation records its context");
    OK(cuMemFree_v2(p));
    EXPECT(cuCtxDestroy_v2(primary), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxDestroy_v2(created));
    EXPECT(cuCtxDestroy_v2(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxSetCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == NULL, "destroyed context no longer current");
    OK(cuCtxSetCurrent(primary));
    OK(cuDevicePrimaryCtxRelease_v2(0));
    OK(cuDevicePrimaryCtxRelease(0));

    /* Errors. */
    const char *s_name = NULL, *s_str = NULL;
    OK(cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &s_name));
    OK(cuGetErrorString(CUDA_ERROR_INVALID_HANDLE, &s_str));
    CHECK(s_name && strcmp(s_name, "CUDA_ERROR_INVALID_HANDLE") == 0, "error name");
    CHECK(s_str && strcmp(s_str, "invalid resource handle") == 0, "error string");
    EXPECT(cuGetErrorName((CUresult)12345, &s_name), CUDA_ERROR_INVALID_VALUE);
    CHECK(s_name == NULL, "unknown code gives NULL");
}

/* ------------------------------------------------------------------------ */

static void test_inject(void)
{
    fakecuda_reset_calls();
    CHECK(fakecuda_inject_error("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 2) == 0, "inject");
    CUdeviceptr p;
    EXPECT(cuMemAlloc_v2(&p, 16), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(cuMemAlloc_v2(&p, 16), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc_v2(&p, 16));
    OK(cuMemFree_v2(p));
    CHECK(fakecuda_calls("cuMemAlloc_v2") == 3, "injected calls still counted");
    CHECK(fakecuda_live_device_allocations() == 0, "injected failures allocated nothing");
}

/* ------------------------------------------------------------------------ */

#define GRAN ((size_t)2 << 20)

static CUmemAllocationProp vmm_prop(CUmemAllocationHandleType types)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = types;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

static CUmemAccessDesc vmm_access(CUmemAccess_flags flags)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = flags;
    return d;
}

/* Memory mapped with access set is device memory everywhere; reserved or
 * mapped without access it is not. */
static void test_vmm(void)
{
    int v = 0;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    CHECK(v == 1, "VMM supported %d", v);
    CUcontext primary;
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    size_t gran = 0, free0, free1, total;
    OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran == GRAN, "granularity %zu", gran);
    OK(cuMemGetInfo_v2(&free0, &total));
    size_t live0 = fakecuda_live_device_bytes();

    /* Two pages (one of two granules), mapped end to end, a third spare. */
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 4 * GRAN, 0, 0, 0));
    CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    OK(cuMemCreate(&h1, 2 * GRAN, &prop, 0));
    OK(cuMemCreate(&h2, GRAN, &prop, 0));
    OK(cuMemGetInfo_v2(&free1, &total));
    CHECK(free1 == free0 - 3 * GRAN, "free %zu after creating 3 granules (was %zu)", free1, free0);
    CHECK(fakecuda_live_device_bytes() == live0 + 3 * GRAN, "live bytes count created memory");
    CHECK(fakecuda_live_device_allocations() == 0, "VMM memory is not a cuMemAlloc allocation");
    EXPECT(cuMemCreate(&h2, GRAN, &prop, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemCreate(&h2, GRAN + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);

    /* Mapping: inside a reservation, whole allocations, nothing mapped under. */
    EXPECT(cuMemMap(va, GRAN, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);             /* not the whole allocation */
    EXPECT(cuMemMap(va + 3 * GRAN, 2 * GRAN, 0, h1, 0), CUDA_ERROR_INVALID_VALUE); /* past the reservation */
    EXPECT(cuMemMap(va, GRAN, 0, (CUmemGenericAllocationHandle)42, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemMap(va, 2 * GRAN, 0, h1, 0));
    EXPECT(cuMemMap(va + GRAN, GRAN, 0, h2, 0), CUDA_ERROR_INVALID_VALUE); /* over a mapping */
    OK(cuMemMap(va + 2 * GRAN, GRAN, 0, h2, 0));

    /* Mapped without access: not device memory. */
    unsigned char hostbuf[64] = {0};
    unsigned int mt = 7;
    CUdeviceptr base = 0;
    size_t size = 0;
    EXPECT(cuMemcpyHtoD_v2(va, hostbuf, sizeof hostbuf), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD8_v2(va, 1, 8), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemGetAddressRange_v2(&base, &size, va), CUDA_ERROR_NOT_FOUND);
    CUpointer_attribute one[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *one_data[] = {&mt};
    OK(cuPointerGetAttributes(1, one, one_data, va));
    CHECK(mt == 0, "unknown memory type for a mapping without access: %u", mt);

    /* Access: whole mappings end to end only. */
    CUmemAccessDesc rw = vmm_access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    EXPECT(cuMemSetAccess(va, GRAN, &rw, 1), CUDA_ERROR_INVALID_VALUE);         /* half a mapping */
    EXPECT(cuMemSetAccess(va, 4 * GRAN, &rw, 1), CUDA_ERROR_INVALID_VALUE);     /* runs past the mappings */
    EXPECT(cuMemSetAccess(va + 3 * GRAN, GRAN, &rw, 1), CUDA_ERROR_INVALID_VALUE); /* reserved only */
    CUmemAccessDesc odd = vmm_access((CUmemAccess_flags)2);
    EXPECT(cuMemSetAccess(va, 3 * GRAN, &odd, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemSetAccess(va, 3 * GRAN, &rw, 1));

    /* Copies and sets, across the two mappings too. */
    size_t n = 3 * GRAN;
    unsigned char *src = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    OK(cuMemcpyHtoD_v2(va, src, n));
    memset(dst, 0, n);
    OK(cuMemcpyDtoH_v2(dst, va, n));
    CHECK(memcmp(src, dst, n) == 0, "HtoD/DtoH over two mappings");
    OK(cuMemcpyHtoD_v2_ptds(va + 2 * GRAN - 8, src, 16)); /* straddles the seam */
    OK(cuMemcpyDtoH_v2_ptds(dst, va + 2 * GRAN - 8, 16));
    CHECK(memcmp(src, dst, 16) == 0, "copy across the seam");
    EXPECT(cuMemcpyHtoD_v2(va + 2 * GRAN, src, GRAN + 1), CUDA_ERROR_INVALID_VALUE); /* into reserved only */
    EXPECT(cuMemcpyDtoH_v2(dst, va + 3 * GRAN, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyDtoD_v2(va + 2 * GRAN, va, 4096));
    OK(cuMemcpyDtoD_v2_ptds(va + 2 * GRAN + 4096, va + 4096, 4096));
    OK(cuMemcpyDtoH_v2(dst, va + 2 * GRAN, 8192));
    CHECK(memcmp(src, dst, 8192) == 0, "DtoD between mappings");
    CUdeviceptr d = 0;
    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuMemcpyDtoD_v2(d, va + 100, 4096)); /* VMM to cuMemAlloc memory and back */
    OK(cuMemcpyDtoD_v2(va + 2 * GRAN, d, 4096));
    OK(cuMemcpyDtoH_v2(dst, va + 2 * GRAN, 4096));
    CHECK(memcmp(src + 100, dst, 4096) == 0, "DtoD with cuMemAlloc memory");
    OK(cuMemsetD8_v2(va + 2 * GRAN - 4, 0xab, 8));
    OK(cuMemsetD8_v2_ptds(va, 0x11, 4));
    OK(cuMemsetD32_v2(va + 16, 0xdeadbeefu, 4));
    OK(cuMemsetD32_v2_ptds(va + 2 * GRAN - 8, 0x01020304u, 4)); /* straddles the seam */
    unsigned char *hv = (unsigned char *)(uintptr_t)va;
    unsigned int w = 0;
    memcpy(&w, hv + 16, 4);
    CHECK(hv[0] == 0x11 && hv[3] == 0x11 && w == 0xdeadbeefu, "sets on VMM memory");
    memcpy(&w, hv + 2 * GRAN + 4, 4);
    CHECK(w == 0x01020304u, "memsetD32 across the seam: %x", w);
    EXPECT(cuMemsetD32_v2(va + 3 * GRAN - 4, 0, 2), CUDA_ERROR_INVALID_VALUE);

    /* Kernels touch it. */
    CUmodule m;
    CUfunction ffill;
    OK(cuModuleLoadData(&m, "DRKFAKE1\nfill\n"));
    OK(cuModuleGetFunction(&ffill, m, "fill"));
    CUdeviceptr x = va + 2 * GRAN - 128;
    float val = 2.5f;
    int cnt = 64;
    void *args[] = {&x, &val, &cnt};
    OK(cuLaunchKernel(ffill, 2, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    float back[64];
    OK(cuMemcpyDtoH_v2(back, x, sizeof back));
    CHECK(back[0] == 2.5f && back[63] == 2.5f, "kernel on VMM memory: %f %f", back[0], back[63]);
    OK(cuModuleUnload(m));

    /* Pointer queries: the one mapping containing the pointer. */
    OK(cuMemGetAddressRange_v2(&base, &size, va + GRAN + 5));
    CHECK(base == va && size == 2 * GRAN, "range of the first mapping %llx %zu", base, size);
    OK(cuMemGetAddressRange_v2(&base, &size, va + 2 * GRAN));
    CHECK(base == va + 2 * GRAN && size == GRAN, "range of the second mapping %llx %zu", base, size);
    EXPECT(cuMemGetAddressRange_v2(&base, &size, va + 3 * GRAN), CUDA_ERROR_NOT_FOUND);
    CUcontext ctx = NULL;
    int ordinal = -1;
    unsigned long long id1 = 0, id2 = 0;
    unsigned int ipc = 9, mapped = 9, managed = 9;
    CUdeviceptr start = 0;
    size_t rsize = 0;
    void *hp = (void *)1;
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 3));
    CHECK(mt == CU_MEMORYTYPE_DEVICE, "VMM memory type %u", mt);
    OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va));
    CHECK(ordinal == 0, "VMM ordinal %d", ordinal);
    OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, va));
    CHECK(ctx == primary, "VMM context %p, primary %p", (void *)ctx, (void *)primary);
    OK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, va + GRAN));
    OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, va + 2 * GRAN));
    CHECK(id1 && id2 && id1 != id2, "buffer ids per mapping %llu %llu", id1, id2);
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 2 * GRAN + 9));
    OK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + 2 * GRAN + 9));
    CHECK(start == va + 2 * GRAN && rsize == GRAN, "range attributes %llx %zu", start, rsize);
    OK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va));
    OK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va));
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, va));
    CHECK(ipc == 0 && mapped == 1 && managed == 0, "ipc %u mapped %u managed %u", ipc, mapped, managed);
    EXPECT(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, va), CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CU_POINTER_ATTRIBUTE_HOST_POINTER};
    mt = 0, id1 = 0, start = 0, rsize = 0, ipc = 9, hp = (void *)1;
    void *data[] = {&mt, &id1, &start, &rsize, &ipc, &hp};
    OK(cuPointerGetAttributes(6, attrs, data, va + 7));
    CHECK(mt == CU_MEMORYTYPE_DEVICE && id1 && id1 != id2 && start == va && rsize == 2 * GRAN && ipc == 0 && !hp,
          "attributes of the first mapping");
    OK(cuPointerGetAttributes(6, attrs, data, va + 3 * GRAN)); /* reserved only: unknown */
    CHECK(mt == 0 && id1 == 0 && start == 0 && rsize == 0 && ipc == 0 && !hp, "defaults for reserved memory");

    /* Not cuMemAlloc memory: no legacy IPC handle, no cuMemFree. */
    CUipcMemHandle ih;
    EXPECT(cuIpcGetMemHandle(&ih, va), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree_v2(va), CUDA_ERROR_INVALID_VALUE);

    /* Read-only: reads work, writes are refused. */
    CUmemAccessDesc ro = vmm_access(CU_MEM_ACCESS_FLAGS_PROT_READ);
    OK(cuMemSetAccess(va + 2 * GRAN, GRAN, &ro, 1));
    OK(cuMemcpyDtoH_v2(dst, va + 2 * GRAN, 64));
    EXPECT(cuMemcpyHtoD_v2(va + 2 * GRAN, src, 64), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD8_v2(va + 2 * GRAN, 0, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD_v2(va + 2 * GRAN - 4, src, 8), CUDA_ERROR_INVALID_VALUE); /* runs into it */
    OK(cuMemcpyDtoD_v2(va, va + 2 * GRAN, 64));
    /* Access taken away: unknown memory again. */
    CUmemAccessDesc none = vmm_access(CU_MEM_ACCESS_FLAGS_PROT_NONE);
    OK(cuMemSetAccess(va + 2 * GRAN, GRAN, &none, 1));
    EXPECT(cuMemcpyDtoH_v2(dst, va + 2 * GRAN, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemGetAddressRange_v2(&base, &size, va + 2 * GRAN), CUDA_ERROR_NOT_FOUND);

    /* One allocation at two addresses shows the same bytes. */
    OK(cuMemUnmap(va + 2 * GRAN, GRAN));
    CUdeviceptr va2 = 0;
    OK(cuMemAddressReserve(&va2, 2 * GRAN, 0, 0, 0));
    OK(cuMemMap(va2, 2 * GRAN, 0, h1, 0));
    OK(cuMemSetAccess(va2, 2 * GRAN, &rw, 1));
    OK(cuMemsetD8_v2(va + 77, 0x5c, 1));
    unsigned char byte = 0;
    OK(cuMemcpyDtoH_v2(&byte, va2 + 77, 1));
    CHECK(byte == 0x5c, "alias shows the same byte: %x", byte);
    OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, va2));
    OK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, va));
    CHECK(id1 != id2, "each mapping its own buffer id");

    /* Unmap whole mappings only; free whole, empty reservations only. */
    EXPECT(cuMemUnmap(va, GRAN), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemUnmap(va + 2 * GRAN, GRAN), CUDA_ERROR_INVALID_VALUE); /* nothing mapped there */
    EXPECT(cuMemAddressFree(va, 4 * GRAN), CUDA_ERROR_INVALID_VALUE);  /* still mapped */
    EXPECT(cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);  /* not the whole reservation */
    OK(cuMemRelease(h1)); /* the mappings keep the memory */
    EXPECT(cuMemRelease(h1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyDtoH_v2(&byte, va2 + 77, 1));
    CHECK(byte == 0x5c, "memory outlives its released handle while mapped");
    OK(cuMemUnmap(va, 2 * GRAN));
    EXPECT(cuMemcpyDtoH_v2(&byte, va + 77, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(va2, 2 * GRAN));
    OK(cuMemAddressFree(va, 4 * GRAN));
    EXPECT(cuMemAddressFree(va, 4 * GRAN), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(va2, 2 * GRAN));
    EXPECT(cuMemMap(va, GRAN, 0, h2, 0), CUDA_ERROR_INVALID_VALUE); /* the reservation is gone */
    OK(cuMemRelease(h2));
    OK(cuMemFree_v2(d));
    OK(cuMemGetInfo_v2(&free1, &total));
    CHECK(free1 == free0 && fakecuda_live_device_bytes() == live0, "free %zu after releasing (was %zu)", free1,
          free0);
    /* Creating is held to the total like any allocation. */
    fakecuda_set_total_memory(live0 + GRAN);
    EXPECT(cuMemCreate(&h1, 2 * GRAN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    fakecuda_set_total_memory((size_t)1 << 30);
    free(src);
    free(dst);
    OK(cuDevicePrimaryCtxRelease_v2(0));
}

/* Sharing a physical allocation through a file descriptor. */
static void test_vmm_sharing(void)
{
    int v = 0;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
    CHECK(v == 1, "POSIX fd handles supported %d", v);
    CUmemAllocationProp fdprop = vmm_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemAllocationProp plain = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemAllocationProp fabric = vmm_prop(CU_MEM_HANDLE_TYPE_FABRIC);
    CUmemGenericAllocationHandle h = 0, hp = 0, hi = 0, hx = 0;
    EXPECT(cuMemCreate(&hx, GRAN, &fabric, 0), CUDA_ERROR_NOT_SUPPORTED);
    OK(cuMemCreate(&h, GRAN, &fdprop, 0));
    OK(cuMemCreate(&hp, GRAN, &plain, 0));
    size_t live = fakecuda_live_device_bytes();

    int fd = -1;
    EXPECT(cuMemExportToShareableHandle(&fd, hp, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE); /* not requested at creation */
    EXPECT(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_WIN32, 0), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemExportToShareableHandle(NULL, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemExportToShareableHandle(&fd, (CUmemGenericAllocationHandle)7, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                        0),
           CUDA_ERROR_INVALID_VALUE);
    CHECK(fd == -1, "failed exports wrote nothing");
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0, "exported fd %d", fd);

    /* Bad descriptors: closed, not a file of ours, wrong type. */
    int pipefd[2];
    CHECK(pipe(pipefd) == 0, "pipe");
    int devnull = open("/dev/null", O_RDONLY);
    EXPECT(cuMemImportFromShareableHandle(&hi, (void *)(intptr_t)-1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemImportFromShareableHandle(&hi, (void *)(intptr_t)pipefd[0], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemImportFromShareableHandle(&hi, (void *)(intptr_t)devnull, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemImportFromShareableHandle(&hi, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_FABRIC),
           CUDA_ERROR_NOT_SUPPORTED);
    EXPECT(cuMemImportFromShareableHandle(NULL, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
           CUDA_ERROR_INVALID_VALUE);
    close(pipefd[0]);
    close(pipefd[1]);
    close(devnull);

    OK(cuMemImportFromShareableHandle(&hi, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd); /* the imported handle holds its own */
    CHECK(hi != h, "a new handle");
    CHECK(fakecuda_live_device_bytes() == live, "import counted again: %zu, was %zu", fakecuda_live_device_bytes(),
          live);

    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0));
    OK(cuMemMap(va, GRAN, 0, h, 0));
    OK(cuMemMap(va + GRAN, GRAN, 0, hi, 0));
    CUmemAccessDesc rw = vmm_access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemSetAccess(va, 2 * GRAN, &rw, 1));
    const char msg[] = "shared bytes";
    OK(cuMemcpyHtoD_v2(va + 1000, msg, sizeof msg));
    char got[sizeof msg] = "";
    OK(cuMemcpyDtoH_v2(got, va + GRAN + 1000, sizeof got));
    CHECK(memcmp(got, msg, sizeof msg) == 0, "imported handle maps the same memory: %s", got);

    /* The imported handle can be exported again. */
    int fd2 = -1;
    OK(cuMemExportToShareableHandle(&fd2, hi, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd2 >= 0, "re-export");
    close(fd2);

    OK(cuMemUnmap(va, 2 * GRAN));
    OK(cuMemAddressFree(va, 2 * GRAN));
    OK(cuMemRelease(hi));
    CHECK(fakecuda_live_device_bytes() == live, "releasing the import took nothing off");
    OK(cuMemRelease(h));
    OK(cuMemRelease(hp));
    CHECK(fakecuda_live_device_bytes() == live - 2 * GRAN, "live bytes after release %zu",
          fakecuda_live_device_bytes());
}

/* IPC handles opened in this same process; peer access with one device. */
static void test_ipc_peer(void)
{
    CUdeviceptr a = 0, p = 0, q = 0;
    OK(cuMemAlloc_v2(&a, 1024));
    CUipcMemHandle h;
    OK(cuIpcGetMemHandle(&h, a + 10));
    unsigned long long open0 = fakecuda_ipc_open_count();
    EXPECT(cuIpcOpenMemHandle_v2(&p, h, 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcOpenMemHandle_v2(NULL, h, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcOpenMemHandle_v2(&p, no_ipc, 0), CUDA_ERROR_INVALID_VALUE);
    CUipcMemHandle forged = h;
    forged.reserved[8] ^= 1; /* same base, another buffer id */
    EXPECT(cuIpcOpenMemHandle_v2(&p, forged, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK(fakecuda_ipc_open_count() == open0, "failed opens counted");
    OK(cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(cuIpcOpenMemHandle(&q, h, 0));
    CHECK(p == a && q == a, "opened at the base %llx %llx (base %llx)", p, q, a);
    CHECK(fakecuda_ipc_open_count() == open0 + 2, "two opens counted: %llu", fakecuda_ipc_open_count());
    EXPECT(cuIpcCloseMemHandle(a + 10), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcCloseMemHandle(p));
    OK(cuIpcCloseMemHandle(q));
    EXPECT(cuIpcCloseMemHandle(p), CUDA_ERROR_INVALID_VALUE);
    CHECK(fakecuda_ipc_open_count() == open0, "closes counted");
    OK(cuMemFree_v2(a));
    EXPECT(cuIpcOpenMemHandle_v2(&p, h, 0), CUDA_ERROR_INVALID_VALUE); /* stale */

    /* One device: never a peer of itself. */
    CUcontext primary, cur = NULL;
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    OK(cuCtxGetCurrent(&cur));
    OK(cuCtxSetCurrent(NULL));
    EXPECT(cuCtxEnablePeerAccess(primary, 0), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
    OK(cuCtxSetCurrent(primary));
    EXPECT(cuCtxEnablePeerAccess(primary, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxEnablePeerAccess((CUcontext)&cur, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxEnablePeerAccess(NULL, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxEnablePeerAccess(primary, 0), CUDA_ERROR_INVALID_DEVICE);
    CUcontext other;
    OK(cuCtxCreate_v4(&other, NULL, 0, 0));
    EXPECT(cuCtxEnablePeerAccess(primary, 0), CUDA_ERROR_INVALID_DEVICE);
    OK(cuCtxDestroy_v2(other));
    OK(cuCtxSetCurrent(cur));
    OK(cuDevicePrimaryCtxRelease_v2(0));
}

/* Pinned memory: device pointers (unified addressing) and flags. */
static void test_host_pointers(void)
{
    void *h1 = NULL, *h2 = NULL, *h3 = NULL;
    unsigned int fl = 99;
    OK(cuMemHostAlloc(&h1, 1000, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED));
    OK(cuMemAllocHost_v2(&h2, 100));
    OK(cuMemAllocHost(&h3, 100));
    CHECK((uintptr_t)h3 + 100 <= ((uintptr_t)1 << 32), "legacy pinned memory under 4 GiB: %p", h3);
    OK(cuMemHostGetFlags(&fl, (char *)h1 + 999));
    CHECK(fl == (CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED), "flags %x", fl);
    OK(cuMemHostGetFlags(&fl, h2));
    CHECK(fl == 0, "cuMemAllocHost flags %x", fl);
    OK(cuMemHostGetFlags(&fl, h3));
    CHECK(fl == 0, "legacy cuMemAllocHost flags %x", fl);
    EXPECT(cuMemHostGetFlags(&fl, (char *)h1 + 1000), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(NULL, h1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(&fl, &fl), CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr d = 0;
    OK(cuMemHostGetDevicePointer_v2(&d, (char *)h1 + 5, 0));
    CHECK(d == (CUdeviceptr)(uintptr_t)h1 + 5, "device pointer of an interior host pointer");
    OK(cuMemHostGetDevicePointer_v2(&d, h2, 0));
    CHECK(d == (CUdeviceptr)(uintptr_t)h2, "device pointer of cuMemAllocHost memory");
    OK(cuMemcpyHtoD_v2(d, "pinned", 7)); /* usable as device memory */
    CHECK(strcmp(h2, "pinned") == 0, "copy through the device pointer");
    EXPECT(cuMemHostGetDevicePointer_v2(&d, h1, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetDevicePointer_v2(&d, &d, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetDevicePointer_v2(NULL, h1, 0), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr dev = 0;
    OK(cuMemAlloc_v2(&dev, 64));
    EXPECT(cuMemHostGetDevicePointer_v2(&d, (void *)(uintptr_t)dev, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(&fl, (void *)(uintptr_t)dev), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(dev));

    CUdeviceptr_v1 d32 = 0;
    OK(cuMemHostGetDevicePointer(&d32, (char *)h3 + 8, 0));
    CHECK(d32 == (CUdeviceptr_v1)(uintptr_t)h3 + 8, "legacy device pointer %x", d32);
    if ((uintptr_t)h1 > UINT32_MAX)
        EXPECT(cuMemHostGetDevicePointer(&d32, h1, 0), CUDA_ERROR_INVALID_VALUE); /* does not fit */
    EXPECT(cuMemHostGetDevicePointer(&d32, h3, 4), CUDA_ERROR_INVALID_VALUE);

    OK(cuMemFreeHost(h1));
    OK(cuMemFreeHost(h2));
    OK(cuMemFreeHost(h3));
    EXPECT(cuMemHostGetDevicePointer_v2(&d, h1, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(&fl, h2), CUDA_ERROR_INVALID_VALUE);
    CHECK(fakecuda_live_host_allocations() == 0, "host leaks");
}

/* Is the page at p gone from the address space (not merely freed)? */
static int unmapped(uintptr_t p)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char vec = 0;
    return mincore((void *)(p & ~(uintptr_t)(page - 1)), (size_t)page, &vec) == -1 && errno == ENOMEM;
}

static void expect_state(int want_active, int line)
{
    unsigned int flags = 99;
    int active = -1;
    CUresult rc = cuDevicePrimaryCtxGetState(0, &flags, &active);
    if (rc != CUDA_SUCCESS || flags != 0 || active != want_active) {
        fprintf(stderr, "FAIL %s:%d: primary state rc %d flags %u active %d, expected active %d\n", __FILE__, line,
                (int)rc, flags, active, want_active);
        failures++;
    }
}
#define EXPECT_STATE(active) expect_state(active, __LINE__)

/* cuDevicePrimaryCtxReset destroys what the primary context holds but keeps
 * the retain count and the handle; the next retain makes it active again.
 * The last release destroys the same. A created context's things survive. */
static void test_primary_reset(void)
{
    unsigned int flags = 0;
    int active = 0;
    EXPECT(cuDevicePrimaryCtxGetState(0, NULL, &active), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDevicePrimaryCtxGetState(0, &flags, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuDevicePrimaryCtxGetState(1, &flags, &active), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDevicePrimaryCtxReset(-1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDevicePrimaryCtxReset_v2(1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_STATE(0); /* not retained */

    CUcontext cur0 = NULL, primary = NULL, again = NULL, created = NULL, cur = NULL;
    OK(cuCtxGetCurrent(&cur0));
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    EXPECT_STATE(1);
    unsigned long long dev0 = fakecuda_live_device_allocations(), host0 = fakecuda_live_host_allocations(),
                       ipc0 = fakecuda_ipc_open_count();
    size_t bytes0 = fakecuda_live_device_bytes();

    /* Things of a created context, which the primary's reset leaves alone. */
    CUdeviceptr keep = 0;
    CUstream keep_s = NULL;
    CUevent keep_e = NULL;
    OK(cuCtxCreate_v4(&created, NULL, 0, 0));
    OK(cuMemAlloc_v2(&keep, 64));
    OK(cuStreamCreate(&keep_s, 0));
    OK(cuEventCreate(&keep_e, 0));

    /* Things of the primary context. */
    OK(cuCtxSetCurrent(primary));
    CUdeviceptr d = 0, da = 0, opened = 0;
    CUdeviceptr_v1 d32 = 0;
    void *h = NULL, *h2 = NULL;
    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuMemAlloc(&d32, 100));
    OK(cuMemAllocAsync(&da, 256, NULL));
    OK(cuMemHostAlloc(&h, 8192, CU_MEMHOSTALLOC_PORTABLE));
    OK(cuMemAllocHost_v2(&h2, 100));
    memset(h, 1, 8192);
    CUipcMemHandle ih;
    OK(cuIpcGetMemHandle(&ih, d));
    OK(cuIpcOpenMemHandle_v2(&opened, ih, 0));
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemAccessDesc rw = vmm_access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUmemGenericAllocationHandle hv = 0, hv2 = 0;
    CUdeviceptr va = 0;
    OK(cuMemCreate(&hv, GRAN, &prop, 0));
    OK(cuMemCreate(&hv2, GRAN, &prop, 0)); /* created, never mapped */
    OK(cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0));
    OK(cuMemMap(va, GRAN, 0, hv, 0));
    OK(cuMemSetAccess(va, GRAN, &rw, 1));
    OK(cuMemsetD8_v2(va, 7, GRAN));
    CUstream s = NULL;
    CUevent e = NULL;
    OK(cuStreamCreate(&s, 0));
    OK(cuEventCreate(&e, 0));
    OK(cuEventRecord(e, s));
    CHECK(fakecuda_set_capturing(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_STATUS_ACTIVE) == 0, "set capturing");
    CHECK(fakecuda_live_device_allocations() == dev0 + 4 && fakecuda_live_host_allocations() == host0 + 2 &&
              fakecuda_ipc_open_count() == ipc0 + 1,
          "live before reset");

    OK(cuDevicePrimaryCtxReset(0));
    /* Unmapped, so a caller still using the memory faults. */
    CHECK(unmapped(d) && unmapped(d32) && unmapped(da) && unmapped((uintptr_t)h) && unmapped((uintptr_t)h2) &&
              unmapped(va) && unmapped(va + GRAN),
          "memory still mapped after reset");
    EXPECT_STATE(0);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary, "the reset primary context stays current (%p)", (void *)cur);
    CHECK(fakecuda_live_device_allocations() == dev0 + 1 && fakecuda_live_device_bytes() == bytes0 + 64 &&
              fakecuda_live_host_allocations() == host0 && fakecuda_ipc_open_count() == ipc0,
          "live after reset: %llu allocations, %zu bytes, %llu host, %llu ipc", fakecuda_live_device_allocations(),
          fakecuda_live_device_bytes(), fakecuda_live_host_allocations(), fakecuda_ipc_open_count());

    /* Everything destroyed answers as unknown. */
    EXPECT(cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFree(d32), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeAsync(da, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemFreeHost(h2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemHostGetFlags(&flags, h), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyHtoD_v2(d, "x", 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemGetAddressRange_v2(NULL, NULL, d), CUDA_ERROR_NOT_FOUND);
    EXPECT(cuPointerGetAttribute(&cur, CU_POINTER_ATTRIBUTE_CONTEXT, d), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcCloseMemHandle(opened), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuIpcOpenMemHandle_v2(&opened, ih, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemsetD8_v2(va, 0, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemUnmap(va, GRAN), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemRelease(hv), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemRelease(hv2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventDestroy_v2(e), CUDA_ERROR_INVALID_HANDLE);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(cuStreamIsCapturing(CU_STREAM_LEGACY, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "capture ended by the reset: %d", (int)st);
    /* The created context's things are still there. */
    OK(cuMemGetAddressRange_v2(NULL, NULL, keep));
    OK(cuStreamQuery(keep_s));
    OK(cuEventQuery(keep_e));

    /* A new retain makes the same handle active again; allocating works. */
    OK(cuDevicePrimaryCtxRetain(&again, 0));
    CHECK(again == primary, "retain after reset: %p, was %p", (void *)again, (void *)primary);
    EXPECT_STATE(1);
    OK(cuCtxSetCurrent(again));
    CUdeviceptr d2 = 0;
    void *h3 = NULL;
    char back[6] = "";
    OK(cuMemAlloc_v2(&d2, 4096));
    OK(cuMemcpyHtoD_v2(d2, "again", 6));
    OK(cuMemcpyDtoH_v2(back, d2, 6));
    CHECK(strcmp(back, "again") == 0, "copy after reset: %s", back);
    OK(cuPointerGetAttribute(&cur, CU_POINTER_ATTRIBUTE_CONTEXT, d2));
    CHECK(cur == primary, "new allocation in the primary context");
    OK(cuMemHostAlloc(&h3, 100, 0));
    memset(h3, 2, 100);
    OK(cuMemCreate(&hv, GRAN, &prop, 0));
    OK(cuMemAddressReserve(&va, GRAN, 0, 0, 0));
    OK(cuMemMap(va, GRAN, 0, hv, 0));
    OK(cuMemSetAccess(va, GRAN, &rw, 1));
    OK(cuMemsetD32_v2(va, 0x01020304u, GRAN / 4));
    OK(cuStreamCreate(&s, 0));
    OK(cuEventCreate(&e, 0));
    OK(cuEventRecord(e, s));
    OK(cuMemUnmap(va, GRAN));
    OK(cuMemAddressFree(va, GRAN));
    OK(cuMemRelease(hv));
    OK(cuEventDestroy_v2(e));
    OK(cuStreamDestroy_v2(s));
    OK(cuMemFreeHost(h3));

    /* Reset kept the first retain: two releases, and the last destroys. */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    EXPECT_STATE(1);
    OK(cuEventCreate(&e, 0));
    OK(cuDevicePrimaryCtxRelease(0));
    EXPECT_STATE(0);
    CHECK(unmapped(d2), "last release left the memory mapped");
    EXPECT(cuMemFree_v2(d2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuEventDestroy_v2(e), CUDA_ERROR_INVALID_HANDLE);
    OK(cuDevicePrimaryCtxRelease(0)); /* nothing retained: nothing happens */
    OK(cuDevicePrimaryCtxReset(0));   /* nor resetting what is not active */
    EXPECT_STATE(0);

    OK(cuMemFree_v2(keep));
    OK(cuStreamDestroy_v2(keep_s));
    OK(cuEventDestroy_v2(keep_e));
    OK(cuCtxDestroy(created)); /* the legacy form */
    OK(cuCtxSetCurrent(cur0));
    CHECK(fakecuda_live_device_allocations() == dev0 && fakecuda_live_device_bytes() == bytes0 &&
              fakecuda_live_host_allocations() == host0,
          "leaks after the reset test");
}

/* Capture status: none unless a test says so. */
static void test_capture(void)
{
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    CUstreamCaptureStatus st = (CUstreamCaptureStatus)9;
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "new stream capturing %d", (int)st);
    CUstream builtin[] = {NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
    for (int i = 0; i < 3; i++) {
        st = (CUstreamCaptureStatus)9;
        OK(cuStreamIsCapturing_ptsz(builtin[i], &st));
        CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "built-in stream %d capturing %d", i, (int)st);
    }
    CHECK(fakecuda_set_capturing(s, CU_STREAM_CAPTURE_STATUS_ACTIVE) == 0, "set capturing");
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing %d", (int)st);
    OK(cuStreamIsCapturing_ptsz(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing (ptsz) %d", (int)st);
    OK(cuStreamIsCapturing(NULL, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "other streams unaffected");
    CHECK(fakecuda_set_capturing(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_STATUS_INVALIDATED) == 0, "per-thread");
    OK(cuStreamIsCapturing_ptsz(CU_STREAM_PER_THREAD, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "per-thread status %d", (int)st);
    CHECK(fakecuda_set_capturing(CU_STREAM_PER_THREAD, 0) == 0, "per-thread reset");
    CHECK(fakecuda_set_capturing(s, 3) == -1, "bad status refused");
    CHECK(fakecuda_set_capturing((CUstream)&st, 1) == -1, "invalid stream refused");
    EXPECT(cuStreamIsCapturing((CUstream)&st, &st), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamIsCapturing(s, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK(fakecuda_set_capturing(s, 0) == 0, "set back");
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "not capturing again");
    OK(cuStreamDestroy_v2(s));
    EXPECT(cuStreamIsCapturing_ptsz(s, &st), CUDA_ERROR_INVALID_HANDLE);
    CHECK(fakecuda_set_capturing(s, 1) == -1, "destroyed stream refused");
    /* The helpers are there for programs that reach the fake through dlsym. */
    CHECK(sym("fakecuda_set_capturing") && sym("fakecuda_ipc_open_count"), "helpers exported");
}

/* ------------------------------------------------------------------------ */

#define NTHREADS 8
#define NITER 200

static CUmodule g_shared_mod;
static int thread_errors[NTHREADS];

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    CUfunction f;
    if (cuModuleGetFunction(&f, g_shared_mod, "vec_add") != CUDA_SUCCESS) {
        thread_errors[id]++;
        return NULL;
    }
    CUstream s;
    if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
        thread_errors[id]++;
        return NULL;
    }
    int n = 257 + id;
    size_t bytes = (size_t)n * sizeof(float);
    float *h = malloc(bytes), *r = malloc(bytes);
    for (int i = 0; i < n; i++)
        h[i] = (float)(i + id);
    for (int it = 0; it < NITER; it++) {
        CUdeviceptr a, b, c;
        int e = 0;
        e |= cuMemAlloc_v2(&a, bytes) != CUDA_SUCCESS;
        e |= cuMemAllocAsync_ptsz(&b, bytes, s) != CUDA_SUCCESS;
        e |= cuMemAlloc_v2(&c, bytes) != CUDA_SUCCESS;
        if (e) {
            thread_errors[id]++;
            continue;
        }
        e |= cuMemcpyHtoD_v2(a, h, bytes) != CUDA_SUCCESS;
        e |= cuMemcpyHtoD_v2(b, h, bytes) != CUDA_SUCCESS;
        void *args[] = {&a, &b, &c, &n};
        e |= cuLaunchKernel_ptsz(f, (unsigned int)(n + 63) / 64, 1, 1, 64, 1, 1, 0, s, args, NULL) != CUDA_SUCCESS;
        e |= cuMemcpyDtoH_v2(r, c, bytes) != CUDA_SUCCESS;
        for (int i = 0; i < n; i++)
            e |= r[i] != 2.0f * h[i];
        e |= cuMemFree_v2(a) != CUDA_SUCCESS;
        e |= cuMemFreeAsync_ptsz(b, s) != CUDA_SUCCESS;
        e |= cuMemFree_v2(c) != CUDA_SUCCESS;
        thread_errors[id] += e;
    }
    free(h), free(r);
    if (cuStreamDestroy_v2(s) != CUDA_SUCCESS)
        thread_errors[id]++;
    return NULL;
}

/* Loads and unloads modules while the workers launch from another one. */
static atomic_int churn_stop;
static int churn_errors;

static void *churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_stop)) {
        CUmodule m;
        CUfunction f;
        if (cuModuleLoadData(&m, image) != CUDA_SUCCESS || cuModuleGetFunction(&f, m, "empty") != CUDA_SUCCESS ||
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS ||
            cuModuleUnload(m) != CUDA_SUCCESS) {
            churn_errors++;
            break;
        }
    }
    return NULL;
}

static void test_threads(void)
{
    OK(cuModuleLoadData(&g_shared_mod, image));
    fakecuda_reset_calls();
    pthread_t t[NTHREADS], c;
    pthread_create(&c, NULL, churn, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&churn_stop, 1);
    pthread_join(c, NULL);
    for (int i = 0; i < NTHREADS; i++)
        CHECK(thread_errors[i] == 0, "thread %d: %d errors", i, thread_errors[i]);
    CHECK(churn_errors == 0, "module churn errors");
    CHECK(fakecuda_calls("cuLaunchKernel_ptsz") == NTHREADS * NITER, "ptsz launches %llu",
          fakecuda_calls("cuLaunchKernel_ptsz"));
    CHECK(fakecuda_calls("cuMemAlloc_v2") == 2 * NTHREADS * NITER, "allocs %llu", fakecuda_calls("cuMemAlloc_v2"));
    CHECK(fakecuda_calls("cuMemAllocAsync_ptsz") == NTHREADS * NITER, "async allocs");
    CHECK(fakecuda_calls("cuMemAlloc") == 0 && fakecuda_calls("cuMemAllocAsync") == 0, "no other forms counted");
    CHECK(fakecuda_live_device_allocations() == 0, "leaked %llu allocations", fakecuda_live_device_allocations());
    OK(cuModuleUnload(g_shared_mod));
}

/* The context stack, a function's resources and the occupancy calculator,
 * on a thread of its own (its stack starts empty). */
static void *occupancy_thread(void *arg)
{
    (void)arg;
    CUcontext primary, top, created;
    EXPECT(cuCtxPopCurrent_v2(&top), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxPushCurrent_v2(NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxPushCurrent_v2((CUcontext)&top), CUDA_ERROR_INVALID_CONTEXT);
    CUmodule m, m128;
    CUfunction f, f128;
    OK(cuModuleLoadData(&m, "DRKFAKE1\nempty\n"));
    OK(cuModuleGetFunction(&f, m, "empty"));
    int blocks = -1, v = 0;
    EXPECT(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    OK(cuCtxPushCurrent_v2(primary));
    OK(cuCtxGetCurrent(&top));
    CHECK(top == primary, "pushed context current");

    /* 32 registers: blocks by warps (64 an SM), the SM's 32 blocks, shared
     * memory (228 KiB an SM, 1 KiB reserved a block). */
    static const struct {
        int threads;
        size_t dyn;
        int want;
    } cases[] = {{256, 0, 8}, {768, 0, 2}, {32, 0, 32}, {1024, 0, 2}, {1025, 0, 0},
                 {256, 40960, 5}, {256, 49152, 4}, {256, 49153, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, cases[i].threads, cases[i].dyn));
        CHECK(blocks == cases[i].want, "%d threads, %zu dynamic: %d blocks, want %d", cases[i].threads,
              cases[i].dyn, blocks, cases[i].want);
    }
    EXPECT(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuOccupancyMaxActiveBlocksPerMultiprocessor(NULL, f, 256, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)m, 256, 0), CUDA_ERROR_INVALID_HANDLE);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 0));
    CHECK(v == 1024, "reserved shared memory %d", v);

    /* Rebuilt with 128 registers and 1 KiB of static shared memory: loads
     * from now on; the function loaded before keeps its 32. */
    CHECK(fakecuda_set_kernel_resources("nope", 32, 0) == -1 && fakecuda_set_kernel_resources("empty", 0, 0) == -1 &&
          fakecuda_set_kernel_resources("empty", 256, 0) == -1, "resources out of range refused");
    CHECK(fakecuda_set_kernel_resources("empty", 128, 1024) == 0, "resources set");
    OK(cuModuleLoadData(&m128, "DRKFAKE1\nempty\n"));
    OK(cuModuleGetFunction(&f128, m128, "empty"));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f128));
    CHECK(v == 128, "registers %d", v);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f128));
    CHECK(v == 1024, "static shared %d", v);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f128));
    CHECK(v == 512, "max threads %d", v);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    CHECK(v == 32, "the earlier load keeps its registers: %d", v);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f128, 256, 0));
    CHECK(blocks == 2, "128 registers, 256 threads: %d blocks", blocks);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f128, 1024, 0));
    CHECK(blocks == 0, "over its maximum threads: %d blocks", blocks);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f128, 64, 48128));
    CHECK(blocks == 4, "static and dynamic shared memory together: %d blocks", blocks);

    /* A CUkernel, as such and through its function. */
    CUlibrary lib;
    CUkernel k;
    CUfunction kf;
    OK(cuLibraryLoadData(&lib, "DRKFAKE1\nempty\n", NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "empty"));
    OK(cuKernelGetFunction(&kf, k));
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)k, 256, 0));
    CHECK(blocks == 2, "a CUkernel: %d blocks", blocks);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kf, 256, 0));
    CHECK(blocks == 2, "its function: %d blocks", blocks);
    CHECK(fakecuda_set_kernel_resources("empty", 32, 0) == 0, "resources back");

    /* The stack: push over a context, pop back to it; NULL pops. */
    OK(cuCtxCreate_v4(&created, NULL, 0, 0)); /* replaces the top: primary */
    OK(cuCtxPushCurrent_v2(primary));
    OK(cuCtxPopCurrent_v2(&top));
    CHECK(top == primary, "popped what was pushed");
    OK(cuCtxGetCurrent(&top));
    CHECK(top == created, "the one below current again");
    OK(cuCtxPushCurrent_v2(primary));
    OK(cuCtxSetCurrent(NULL));
    OK(cuCtxGetCurrent(&top));
    CHECK(top == created, "NULL pops the top");
    OK(cuCtxDestroy_v2(created)); /* current: popped as it goes */
    OK(cuCtxGetCurrent(&top));
    CHECK(top == NULL, "stack empty");
    EXPECT(cuCtxPopCurrent_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuLibraryUnload(lib));
    OK(cuModuleUnload(m128));
    OK(cuModuleUnload(m));
    OK(cuDevicePrimaryCtxRelease_v2(0));
    return NULL;
}

static void test_occupancy(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, occupancy_thread, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
}

/* ------------------------------------------------------------------------ */

/* fill(x, v, 64) on f in the current context, through each launch form. */
static CUresult launch_fill(CUfunction f, CUdeviceptr x, float v, int form)
{
    int n = 64;
    void *args[] = {&x, &v, &n};
    CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                          .blockDimZ = 1};
    switch (form) {
    case 0: return cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL);
    case 1: return cuLaunchKernel_ptsz(f, 1, 1, 1, 64, 1, 1, 0, CU_STREAM_PER_THREAD, args, NULL);
    case 2: return cuLaunchKernelEx(&cfg, f, args, NULL);
    case 3: return cuLaunchKernelEx_ptsz(&cfg, f, args, NULL);
    default: return cuLaunchCooperativeKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, args);
    }
}
#define NFORMS 5

/* Whether `fill` function f runs in the current context: every launch form
 * either runs it or refuses it with CUDA_ERROR_INVALID_HANDLE having run
 * nothing, all the same way. x: 64 floats. */
static int runs_here(CUfunction f, CUdeviceptr x, int line)
{
    float *h = (float *)(uintptr_t)x;
    int ran = -1;
    for (int form = 0; form < NFORMS; form++) {
        h[0] = h[63] = 0.0f;
        float v = (float)(form + 1);
        CUresult rc = launch_fill(f, x, v, form);
        int ok = rc == CUDA_SUCCESS && h[0] == v && h[63] == v;
        int refused = rc == CUDA_ERROR_INVALID_HANDLE && h[0] == 0.0f && h[63] == 0.0f;
        if ((!ok && !refused) || (ran >= 0 && ran != ok)) {
            fprintf(stderr, "FAIL %s:%d: launch form %d: rc %d, x[0] %g: %s\n", __FILE__, line, form, (int)rc,
                    (double)h[0], ok || refused ? "forms disagree" : "neither ran nor refused cleanly");
            failures++;
        }
        ran = ok;
    }
    return ran == 1;
}
#define RUNS(f) runs_here(f, x, __LINE__)

/* Functions belong to contexts; limits are per context; peer copies.
 * On a thread of its own: its context stack starts empty. */
static void *contexts_thread(void *arg)
{
    (void)arg;
    CUcontext primary = NULL, b = NULL, c = NULL, d = NULL, cur = (CUcontext)1;
    CUdeviceptr x = 0, y = 0;
    int v = 0;
    const char *name = NULL;
    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    OK(cuMemAlloc_v2(&x, 64 * sizeof(float)));

    /* A module loaded with none current is the primary's; one loaded in B is B's. */
    CUmodule mp, mb;
    CUfunction fp, fb, f2;
    OK(cuModuleLoadData(&mp, "DRKFAKE1\nfill\n"));
    OK(cuModuleGetFunction(&fp, mp, "fill"));
    OK(cuCtxCreate_v4(&b, NULL, 0, 0));
    OK(cuModuleLoadData(&mb, "DRKFAKE1\nfill\n"));
    OK(cuModuleGetFunction(&fb, mb, "fill"));
    OK(cuModuleGetFunction(&f2, mb, "fill"));
    CHECK(f2 == fb && fb != fp, "module functions");
    unsigned long long in_p = fakecuda_launches_in(primary), in_b = fakecuda_launches_in(b),
                       other = fakecuda_launches_in(NULL), fills = fakecuda_kernel_launches("fill");
    CHECK(in_b == 0, "a new context has %llu launches", in_b);
    CHECK(RUNS(fb), "B's function in B");
    CHECK(!RUNS(fp), "the primary's function ran in B");
    OK(cuCtxSetCurrent(primary));
    CHECK(!RUNS(fb), "B's function ran in the primary context");
    CHECK(RUNS(fp), "the primary's function in the primary context");
    OK(cuCtxSetCurrent(NULL));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == NULL, "none current");
    CHECK(!RUNS(fb), "B's function ran with none current");
    CHECK(RUNS(fp), "the primary's function with none current");
    CHECK(fakecuda_launches_in(primary) == in_p + 2 * NFORMS && fakecuda_launches_in(b) == in_b + NFORMS &&
              fakecuda_launches_in(NULL) == other + NFORMS && fakecuda_kernel_launches("fill") == fills + 3 * NFORMS,
          "launches: primary %llu, B %llu, others %llu", fakecuda_launches_in(primary) - in_p,
          fakecuda_launches_in(b) - in_b, fakecuda_launches_in(NULL) - other);
    CHECK(fakecuda_launches_in((CUcontext)&v) == 0, "launches of a non-context");
    /* Attribute calls take any context's function. */
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, fb));
    CHECK(v == 32, "B's function: %d registers", v);
    OK(cuFuncSetAttribute(fb, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 25));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fb));
    CHECK(v == 25, "B's function carveout %d", v);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fp));
    CHECK(v == -1, "the primary's function carveout %d", v);
    OK(cuFuncGetName(&name, fb));
    CHECK(name && strcmp(name, "fill") == 0, "B's function name");

    /* A kernel's function: one per context, each launchable only there; the
     * CUkernel itself runs anywhere. */
    CUlibrary lib;
    CUkernel k;
    CUfunction kp, kp2, kb, kb2, kc;
    OK(cuLibraryLoadData(&lib, "DRKFAKE1\nfill\n", NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "fill"));
    OK(cuKernelGetFunction(&kp, k)); /* none current: the primary's */
    OK(cuCtxSetCurrent(primary));
    OK(cuKernelGetFunction(&kp2, k));
    CHECK(kp2 == kp, "the primary's function of the kernel, twice");
    OK(cuCtxSetCurrent(b));
    OK(cuKernelGetFunction(&kb, k));
    OK(cuKernelGetFunction(&kb2, k));
    CHECK(kb == kb2 && kb != kp && (void *)kb != (void *)k, "B's function of the kernel: %p %p, primary's %p",
          (void *)kb, (void *)kb2, (void *)kp);
    CHECK(RUNS(kb), "B's kernel function in B");
    CHECK(!RUNS(kp), "the primary's kernel function ran in B");
    CHECK(RUNS((CUfunction)k), "the CUkernel in B");
    OK(cuCtxSetCurrent(primary));
    CHECK(!RUNS(kb), "B's kernel function ran in the primary context");
    CHECK(RUNS(kp), "the primary's kernel function in the primary context");
    CHECK(RUNS((CUfunction)k), "the CUkernel in the primary context");
    OK(cuFuncSetAttribute(kb, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, kb));
    CHECK(v == 50, "B's kernel function carveout %d", v);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, kp));
    CHECK(v == -1, "its own attributes: the primary's carveout %d", v);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, kb));
    CHECK(v == 32, "B's kernel function: %d registers", v);
    size_t off = 0, sz = 0;
    OK(cuFuncGetParamInfo(kb, 2, &off, &sz));
    CHECK(off == 12 && sz == 4, "B's kernel function param 2: %zu %zu", off, sz);
    OK(cuFuncGetName(&name, kb));
    CHECK(name && strcmp(name, "fill") == 0, "B's kernel function name");

    /* cuFuncLoad: any context's function, or a CUkernel as one; counted. */
    unsigned long long loads = fakecuda_func_loads();
    OK(cuFuncLoad(fb));
    OK(cuFuncLoad(fp));
    OK(cuFuncLoad(kb));
    OK(cuFuncLoad((CUfunction)k));
    EXPECT(cuFuncLoad(NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuFuncLoad((CUfunction)mb), CUDA_ERROR_INVALID_HANDLE);
    CHECK(fakecuda_func_loads() == loads + 4, "function loads %llu", fakecuda_func_loads() - loads);
    CHECK(fakecuda_inject_error("cuFuncLoad", CUDA_ERROR_NOT_FOUND, 1) == 0, "inject into cuFuncLoad");
    EXPECT(cuFuncLoad(fp), CUDA_ERROR_NOT_FOUND); /* as a driver without it */
    OK(cuFuncLoad(fp));
    CHECK(fakecuda_func_loads() == loads + 5, "function loads %llu", fakecuda_func_loads() - loads);

    /* B destroyed: its functions never run again, not even in a context
     * made next (perhaps at its address), which gets a function of its own. */
    OK(cuCtxDestroy_v2(b));
    OK(cuCtxCreate_v4(&c, NULL, 0, 0));
    CHECK(!RUNS(fb), "a destroyed context's function ran");
    CHECK(!RUNS(kb), "a destroyed context's kernel function ran");
    CHECK(!RUNS(fp), "the primary's function ran in C");
    OK(cuKernelGetFunction(&kc, k));
    CHECK(kc != kb && kc != kp, "C's kernel function is its own");
    CHECK(RUNS(kc), "C's kernel function in C");
    CHECK(RUNS((CUfunction)k), "the CUkernel in C");
    CHECK(fakecuda_launches_in(c) == 2 * NFORMS, "C's launches %llu", fakecuda_launches_in(c));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, kc));
    CHECK(v == -1, "C's kernel function carveout %d", v);

    /* Limits: defaults, kept per context. */
    static const struct {
        CUlimit limit;
        size_t value;
    } defaults[] = {{CU_LIMIT_STACK_SIZE, 1024}, {CU_LIMIT_PRINTF_FIFO_SIZE, 1048576},
                    {CU_LIMIT_MALLOC_HEAP_SIZE, 8388608}, {CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH, 0},
                    {CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0}};
    size_t lim = 0;
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++) {
        lim = 99;
        OK(cuCtxGetLimit(&lim, defaults[i].limit));
        CHECK(lim == defaults[i].value, "limit %d: %zu", (int)defaults[i].limit, lim);
    }
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    OK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    CHECK(lim == 4096, "stack size set: %zu", lim);
    OK(cuCtxSetCurrent(primary));
    OK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    CHECK(lim == 1024, "another context's stack size: %zu", lim);
    OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)1 << 26));
    OK(cuCtxSetCurrent(c));
    OK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    CHECK(lim == 4096, "stack size kept: %zu", lim);
    OK(cuCtxGetLimit(&lim, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(lim == 8388608, "another context's heap: %zu", lim);
    EXPECT(cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxGetLimit(&lim, CU_LIMIT_MAX), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxSetLimit(CU_LIMIT_MAX, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxSetLimit((CUlimit)-1, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAlloc_v2(&y, 64 * sizeof(float))); /* C's memory */
    OK(cuCtxSetCurrent(NULL));
    EXPECT(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1), CUDA_ERROR_INVALID_CONTEXT);

    /* Peer copies between the primary's memory and C's. */
    OK(cuCtxCreate_v4(&d, NULL, 0, 0));
    OK(cuCtxDestroy_v2(d)); /* a dead handle that is surely not C */
    OK(cuCtxSetCurrent(primary));
    float *hx = (float *)(uintptr_t)x, *hy = (float *)(uintptr_t)y;
    for (int i = 0; i < 64; i++)
        hx[i] = (float)i, hy[i] = -1.0f;
    OK(cuMemcpyPeer(y, c, x, primary, 64 * sizeof(float)));
    CHECK(hy[0] == 0.0f && hy[63] == 63.0f, "peer copy: %g %g", (double)hy[0], (double)hy[63]);
    for (int i = 0; i < 64; i++)
        hy[i] = -1.0f;
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuMemcpyPeerAsync(y + 4, c, x, primary, 32 * sizeof(float), s));
    CHECK(hy[0] == -1.0f && hy[1] == 0.0f && hy[32] == 31.0f && hy[33] == -1.0f, "async peer copy: %g %g %g %g",
          (double)hy[0], (double)hy[1], (double)hy[32], (double)hy[33]);
    OK(cuMemcpyPeerAsync(x, primary, y, c, sizeof(float), CU_STREAM_PER_THREAD));
    CHECK(hx[0] == -1.0f, "peer copy back: %g", (double)hx[0]);
    OK(cuMemcpyPeer(y, c, y + 4, c, sizeof(float))); /* within one context */
    OK(cuMemcpyPeer(y, c, x, primary, 0));
    EXPECT(cuMemcpyPeer(y, (CUcontext)&lim, x, primary, 4), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyPeer(y, c, x, NULL, 4), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyPeer(y, c, x, d, 4), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyPeerAsync(y, d, x, primary, 4, s), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyPeerAsync(y, c, x, (CUcontext)mp, 4, s), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyPeerAsync(y, c, x, primary, 4, (CUstream)&lim), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuMemcpyPeer(y, c, 16, primary, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyPeer(16, c, x, primary, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyPeer(y, c, x, primary, 65 * sizeof(float)), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemcpyPeerAsync(y, c, 16, primary, 4, s), CUDA_ERROR_INVALID_VALUE);
    CHECK(hy[0] == 0.0f, "refused copies copied nothing: %g", (double)hy[0]);
    OK(cuStreamDestroy_v2(s));

    /* The primary while reset: not a live context for a copy; its limits
     * go back to the defaults. */
    OK(cuMemFree_v2(x));
    OK(cuDevicePrimaryCtxReset(0));
    EXPECT(cuMemcpyPeer(y, c, y + 4, primary, 4), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuMemcpyPeerAsync(y, primary, y + 4, c, 4, NULL), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuMemcpyPeer(y, c, y + 4, c, 4));
    OK(cuDevicePrimaryCtxRetain(&cur, 0));
    CHECK(cur == primary, "the same primary handle");
    OK(cuMemcpyPeer(y, c, y + 4, primary, 4));
    OK(cuCtxGetLimit(&lim, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(lim == 8388608, "the primary's heap after its reset: %zu", lim);

    OK(cuMemFree_v2(y));
    OK(cuLibraryUnload(lib));
    EXPECT(cuLaunchKernel(kc, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuFuncLoad(kb), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuFuncGetName(&name, kc), CUDA_ERROR_INVALID_HANDLE);
    OK(cuModuleUnload(mb));
    OK(cuModuleUnload(mp));
    OK(cuCtxDestroy_v2(c));
    OK(cuCtxSetCurrent(NULL));
    OK(cuDevicePrimaryCtxRelease_v2(0));
    OK(cuDevicePrimaryCtxRelease_v2(0));
    EXPECT_STATE(0);
    return NULL;
}
#undef RUNS

static void test_contexts(void)
{
    unsigned long long dev0 = fakecuda_live_device_allocations();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, contexts_thread, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
    CHECK(fakecuda_live_device_allocations() == dev0, "leaks after the contexts test");
    CHECK(sym("fakecuda_launches_in") && sym("fakecuda_func_loads"), "helpers exported");
}

int main(void)
{
    Dl_info info;
    if (!dladdr((void *)&cuInit, &info) || !(g_lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD))) {
        fprintf(stderr, "FAIL: cannot find the loaded fake driver\n");
        return 1;
    }
    test_before_init();
    test_exports();
    test_each_hook_counts_itself();
    test_proc_address();
    test_memory();
    test_modules();
    test_streams_contexts();
    test_inject();
    test_vmm();
    test_vmm_sharing();
    test_ipc_peer();
    test_host_pointers();
    test_primary_reset();
    test_capture();
    test_threads();
    test_occupancy();
    test_contexts();
    if (failures) {
        fprintf(stderr, "fakecuda_selftest: %d check(s) failed\n", failures);
        return 1;
    }
    printf("fakecuda_selftest: all checks passed (%s)\n", info.dli_fname);
    return 0;
}
