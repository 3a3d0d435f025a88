/* fakecuda: the stand-in libcuda.so.1 behind drk's CPU tests. See fakecuda.h
 * for what it does and where it knowingly differs from the driver.
 *
 * cuda.h is read in its internal mode, which declares every ABI form under
 * its own name (the legacy 32-bit forms under the bare names, _v2, _ptsz,
 * _ptds), so every definition below is checked against the driver's own
 * prototype. Exported functions never call each other: a call counts under
 * exactly one name. The library is linked -Bsymbolic, so the addresses that
 * cuGetProcAddress hands out are this library's own, even with drk preloaded
 * and exporting the same names. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "tests/fakecuda/fakecuda.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FC_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* Exported names, call counts, fault injection                             */
/* ------------------------------------------------------------------------ */

#define FC_API(X)                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount)         \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2)          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                   \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset)                 \
    X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxGetState)                \
    X(cuCtxCreate_v4) X(cuCtxDestroy) X(cuCtxDestroy_v2)                       \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice)                    \
    X(cuCtxGetDevice_v2) X(cuCtxSynchronize) X(cuCtxSynchronize_v2)            \
    X(cuGetErrorName) X(cuGetErrorString)                                      \
    X(cuGetProcAddress) X(cuGetProcAddress_v2)                                 \
    X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleLoadDataEx)                  \
    X(cuModuleLoadFatBinary) X(cuModuleGetFunction) X(cuModuleUnload)          \
    X(cuLibraryLoadData) X(cuLibraryLoadFromFile) X(cuLibraryGetKernel)        \
    X(cuLibraryUnload) X(cuKernelGetFunction) X(cuFuncGetName)                 \
    X(cuKernelGetName) X(cuFuncGetAttribute) X(cuKernelGetAttribute)           \
    X(cuFuncGetParamInfo) X(cuKernelGetParamInfo)                              \
    X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx)               \
    X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                      \
    X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz)   \
    X(cuMemAlloc) X(cuMemAlloc_v2) X(cuMemAllocPitch) X(cuMemAllocPitch_v2)    \
    X(cuMemFree) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)    \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz)                 \
    X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuMemGetInfo)                   \
    X(cuMemGetInfo_v2) X(cuMemGetAddressRange) X(cuMemGetAddressRange_v2)      \
    X(cuPointerGetAttribute) X(cuPointerGetAttributes) X(cuIpcGetMemHandle)    \
    X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcCloseMemHandle)      \
    X(cuCtxEnablePeerAccess)                                                   \
    X(cuMemHostAlloc) X(cuMemAllocHost) X(cuMemAllocHost_v2) X(cuMemFreeHost)  \
    X(cuMemHostGetDevicePointer) X(cuMemHostGetDevicePointer_v2)               \
    X(cuMemHostGetFlags)                                                       \
    X(cuMemcpyHtoD) X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds)                 \
    X(cuMemcpyDtoH) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds)                 \
    X(cuMemcpyDtoD) X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds)                 \
    X(cuMemsetD8) X(cuMemsetD8_v2) X(cuMemsetD8_v2_ptds)                       \
    X(cuMemsetD32) X(cuMemsetD32_v2) X(cuMemsetD32_v2_ptds)                    \
    X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy)         \
    X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz)   \
    X(cuStreamQuery) X(cuStreamQuery_ptsz)                                     \
    X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz)                         \
    X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz)                       \
    X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz)                 \
    X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz)         \
    X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)                           \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)  \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)           \
    X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize)     \
    X(cuEventDestroy_v2)

enum {
#define FC_ID_(name) FC_##name,
    FC_API(FC_ID_)
#undef FC_ID_
    FC_COUNT
};

static const char *const fc_names[FC_COUNT] = {
#define FC_NAME_(name) #name,
    FC_API(FC_NAME_)
#undef FC_NAME_
};

static _Atomic unsigned long long fc_calls[FC_COUNT];

/* Injected failures: left > 0 means the next calls return result. The
 * global flag keeps the common path to one relaxed load. */
static struct {
    atomic_uint left;
    atomic_int result;
} fc_inject[FC_COUNT];
static atomic_int fc_inject_any;

static CUresult inject_take(int id)
{
    unsigned int left = atomic_load(&fc_inject[id].left);
    while (left > 0) {
        if (atomic_compare_exchange_weak(&fc_inject[id].left, &left, left - 1))
            return (CUresult)atomic_load(&fc_inject[id].result);
    }
    return CUDA_SUCCESS;
}

static inline CUresult fc_enter(int id)
{
    atomic_fetch_add_explicit(&fc_calls[id], 1, memory_order_relaxed);
    if (__builtin_expect(atomic_load_explicit(&fc_inject_any, memory_order_relaxed), 0))
        return inject_take(id);
    return CUDA_SUCCESS;
}

static atomic_int g_inited;

/* Count the call; return an injected failure; then the init check that
 * nearly every driver call makes. */
#define ENTER(name)                                                            \
    do {                                                                       \
        CUresult r_ = fc_enter(FC_##name);                                     \
        if (r_ != CUDA_SUCCESS)                                                \
            return r_;                                                         \
    } while (0)
#define ENTER_INIT(name)                                                       \
    do {                                                                       \
        ENTER(name);                                                           \
        if (!atomic_load_explicit(&g_inited, memory_order_acquire))            \
            return CUDA_ERROR_NOT_INITIALIZED;                                 \
    } while (0)

static int name_id(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < FC_COUNT; i++)
        if (strcmp(fc_names[i], name) == 0)
            return i;
    return -1;
}

FC_EXPORT unsigned long long fakecuda_calls(const char *exported_name)
{
    int id = name_id(exported_name);
    return id < 0 ? 0 : atomic_load(&fc_calls[id]);
}

FC_EXPORT void fakecuda_reset_calls(void)
{
    for (int i = 0; i < FC_COUNT; i++)
        atomic_store(&fc_calls[i], 0);
}

FC_EXPORT int fakecuda_inject_error(const char *exported_name, CUresult result, unsigned int count)
{
    int id = name_id(exported_name);
    if (id < 0)
        return -1;
    if (result == CUDA_SUCCESS)
        count = 0;
    atomic_store(&fc_inject[id].left, 0);
    atomic_store(&fc_inject[id].result, (int)result);
    atomic_store(&fc_inject[id].left, count);
    if (count)
        atomic_store(&fc_inject_any, 1);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Global state                                                             */
/* ------------------------------------------------------------------------ */

/* One lock for every table: a test fixture needs correctness, not scale.
 * Kernels run and memory is copied outside it. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&g_lock)
#define UNLOCK() pthread_mutex_unlock(&g_lock)

enum {
    MAGIC_CTX = 0x43545846u,    /* "FXTC" */
    MAGIC_MODULE = 0x444f4d46u, /* "FMOD" */
    MAGIC_FUNC = 0x434e5546u,   /* "FUNC" */
    MAGIC_LIB = 0x42494c46u,    /* "FLIB" */
    MAGIC_KERN = 0x4e524b46u,   /* "FKRN" */
    MAGIC_STREAM = 0x4d525346u, /* "FSRM" */
    MAGIC_EVENT = 0x544e5645u,  /* "EVNT" */
};

#define FC_DEVICE_NAME "fakecuda GPU (drk test stand-in, sm_90)"
#define FC_SM_COUNT 132
#define FC_MAX_THREADS_PER_SM 2048
#define FC_MAX_DYN_SHARED 232448 /* the opt-in per-block maximum of sm_90 */
#define FC_PITCH_ALIGN 512

static size_t g_total_mem = (size_t)1 << 30;
static size_t g_live_bytes;
static unsigned long long g_live_dev, g_live_host;
static atomic_ullong g_next_buffer_id = 1;

/* ------------------------------------------------------------------------ */
/* Live handles: a sorted array of object addresses                         */
/* ------------------------------------------------------------------------ */

/* Validation looks the handle up here before touching it, so a stale or
 * foreign pointer is rejected without being dereferenced. Every object
 * starts with its magic; the lookup also checks the type. */
struct hdr {
    uint32_t magic;
};

static void **h_items;
static size_t h_n, h_cap;

static size_t sorted_lower(void *const *items, size_t n, uintptr_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)items[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int h_add(void *p)
{
    if (h_n == h_cap) {
        size_t cap = h_cap ? h_cap * 2 : 64;
        void **items = realloc(h_items, cap * sizeof *items);
        if (!items)
            return -1;
        h_items = items, h_cap = cap;
    }
    size_t i = sorted_lower(h_items, h_n, (uintptr_t)p);
    memmove(h_items + i + 1, h_items + i, (h_n - i) * sizeof *h_items);
    h_items[i] = p;
    h_n++;
    return 0;
}

static void h_del(void *p)
{
    size_t i = sorted_lower(h_items, h_n, (uintptr_t)p);
    if (i < h_n && h_items[i] == p) {
        memmove(h_items + i, h_items + i + 1, (h_n - i - 1) * sizeof *h_items);
        h_n--;
    }
    ((struct hdr *)p)->magic = 0;
}

/* Caller holds the lock. */
static void *h_get(const void *p, uint32_t magic)
{
    if (!p)
        return NULL;
    size_t i = sorted_lower(h_items, h_n, (uintptr_t)p);
    if (i < h_n && h_items[i] == p && ((const struct hdr *)p)->magic == magic)
        return (void *)p;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Contexts and streams                                                     */
/* ------------------------------------------------------------------------ */

struct ctx {
    uint32_t magic;
    int primary;
};

static struct ctx g_primary = {MAGIC_CTX, 1};
static unsigned int g_primary_refs;
/* Active: retained (refs > 0) and not reset or released to 0 since the
 * last retain. The handle stays valid (and current where it was) while
 * inactive; the next retain makes it active again under the same value. */
static int g_primary_active;
static __thread struct ctx *t_current;

struct stream {
    uint32_t magic;
    unsigned int flags;
    int priority;
    int capture;     /* CUstreamCaptureStatus, set by fakecuda_set_capturing */
    struct ctx *ctx; /* current at creation, else the primary */
};

/* Capture status of the NULL, legacy and per-thread streams. */
static int g_capture_builtin[3];

/* Where stream s keeps its capture status, or NULL for an invalid stream.
 * Caller holds the lock. */
static int *capture_slot_locked(CUstream s)
{
    if (s == NULL)
        return &g_capture_builtin[0];
    if (s == CU_STREAM_LEGACY)
        return &g_capture_builtin[1];
    if (s == CU_STREAM_PER_THREAD)
        return &g_capture_builtin[2];
    struct stream *st = h_get(s, MAGIC_STREAM);
    return st ? &st->capture : NULL;
}

/* Caller holds the lock. */
static int stream_ok_locked(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || h_get(s, MAGIC_STREAM);
}

static int stream_ok(CUstream s)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return 1;
    LOCK();
    int ok = h_get(s, MAGIC_STREAM) != NULL;
    UNLOCK();
    return ok;
}

/* The context current on this thread if it is still alive, else NULL. */
static struct ctx *current_ctx(void)
{
    struct ctx *c = t_current;
    if (c == &g_primary || !c)
        return c;
    LOCK();
    c = h_get(c, MAGIC_CTX);
    UNLOCK();
    return c;
}

/* ------------------------------------------------------------------------ */
/* Init, device, context                                                    */
/* ------------------------------------------------------------------------ */

FC_EXPORT CUresult cuInit(unsigned int Flags)
{
    ENTER(cuInit);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    if (!atomic_load(&g_inited)) {
        if (h_add(&g_primary) != 0) {
            UNLOCK();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        atomic_store_explicit(&g_inited, 1, memory_order_release);
    }
    UNLOCK();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    ENTER(cuDriverGetVersion);
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FAKECUDA_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    ENTER_INIT(cuDeviceGet);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGetCount(int *count)
{
    ENTER_INIT(cuDeviceGetCount);
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    ENTER_INIT(cuDeviceGetName);
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", FC_DEVICE_NAME);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    ENTER_INIT(cuDeviceGetAttribute);
    if (!pi || (int)attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    int v = 0; /* attributes not listed: 0 (unsupported feature) */
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = FC_MAX_DYN_SHARED; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = FC_SM_COUNT; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = FC_MAX_THREADS_PER_SM; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 1; break;
    default: break;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    ENTER_INIT(cuDeviceTotalMem_v2);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    *bytes = g_total_mem;
    UNLOCK();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    g_primary_refs++;
    g_primary_active = 1;
    UNLOCK();
    *pctx = (CUcontext)&g_primary;
    return CUDA_SUCCESS;
}

static void primary_teardown_locked(void);

/* The last release destroys the context, as the driver does: the same
 * teardown as cuDevicePrimaryCtxReset. A release with nothing retained does
 * nothing. */
static CUresult primary_release(CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    if (g_primary_refs > 0 && --g_primary_refs == 0)
        primary_teardown_locked();
    UNLOCK();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxRelease);
    return primary_release(dev);
}

FC_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev);
}

FC_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                  CUdevice dev)
{
    ENTER_INIT(cuCtxCreate_v4);
    (void)ctxCreateParams;
    (void)flags;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    struct ctx *c = malloc(sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->magic = MAGIC_CTX;
    c->primary = 0;
    LOCK();
    int rc = h_add(c);
    UNLOCK();
    if (rc != 0) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    t_current = c; /* a new context is made current, as the driver does */
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult ctx_destroy(CUcontext ctx)
{
    LOCK();
    struct ctx *c = h_get(ctx, MAGIC_CTX);
    if (!c || c->primary) {
        UNLOCK();
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    h_del(c);
    UNLOCK();
    if (t_current == c)
        t_current = NULL;
    free(c);
    return CUDA_SUCCESS;
}

/* The legacy form (CUDA 2.0) and the _v2 one do the same. */
FC_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    ENTER_INIT(cuCtxDestroy);
    return ctx_destroy(ctx);
}

FC_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    ENTER_INIT(cuCtxDestroy_v2);
    return ctx_destroy(ctx);
}

FC_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    ENTER_INIT(cuCtxSetCurrent);
    if (!ctx) {
        t_current = NULL;
        return CUDA_SUCCESS;
    }
    LOCK();
    struct ctx *c = h_get(ctx, MAGIC_CTX);
    UNLOCK();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    t_current = c;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    ENTER_INIT(cuCtxGetCurrent);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)t_current;
    return CUDA_SUCCESS;
}

static CUresult ctx_device(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c;
    if (ctx) {
        LOCK();
        c = h_get(ctx, MAGIC_CTX);
        UNLOCK();
    } else {
        c = current_ctx();
    }
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    ENTER_INIT(cuCtxGetDevice);
    return ctx_device(device, NULL);
}

FC_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    ENTER_INIT(cuCtxGetDevice_v2);
    return ctx_device(device, ctx);
}

FC_EXPORT CUresult cuCtxSynchronize(void)
{
    ENTER_INIT(cuCtxSynchronize);
    return current_ctx() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    ENTER_INIT(cuCtxSynchronize_v2);
    CUdevice dev;
    return ctx_device(&dev, ctx);
}

/* One device: every context lives on device 0, and a device cannot be its
 * own peer. */
FC_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    ENTER_INIT(cuCtxEnablePeerAccess);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct ctx *peer = h_get(peerContext, MAGIC_CTX);
    UNLOCK();
    if (!peer || !current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_ERROR_INVALID_DEVICE;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

#define FC_ERRORS(X)                                                           \
    X(CUDA_SUCCESS, "no error")                                                \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                            \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                               \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                      \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                        \
    X(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled")                       \
    X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "profiler not initialized")         \
    X(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started")         \
    X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped")         \
    X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")                \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "call requires newer driver")     \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, "device unavailable")                     \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")              \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                     \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED, "device not licensed")                   \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")              \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                    \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")           \
    X(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed")                \
    X(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed")            \
    X(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped")                           \
    X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")                    \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
    X(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired")                \
    X(CUDA_ERROR_NOT_MAPPED, "resource not mapped")                            \
    X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array")          \
    X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer")      \
    X(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered")     \
    X(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture") \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "exclusive-thread device already in use by a different thread") \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices") \
    X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")                  \
    X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context") \
    X(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error detected")  \
    X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found") \
    X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain.") \
    X(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled") \
    X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "the provided execution affinity is not supported") \
    X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "device-side synchronization is not supported") \
    X(CUDA_ERROR_CONTAINED, "contained error")                                 \
    X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid")             \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                             \
    X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found") \
    X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed") \
    X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS") \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                    \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
    X(CUDA_ERROR_LOSSY_QUERY, "attempted introspection would be semantically lossy") \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                          \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")  \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")    \
    X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "launch uses incompatible texturing mode") \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled") \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled")  \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process") \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                 \
    X(CUDA_ERROR_ASSERT, "device-side assert triggered")                       \
    X(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted")           \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error")                 \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered") \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")                     \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space") \
    X(CUDA_ERROR_INVALID_PC, "invalid program counter")                        \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                  \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch") \
    X(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed")     \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                     \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                     \
    X(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized")               \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination") \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility was attempted on non supported HW") \
    X(CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS client failed to connect to the MPS control daemon or the MPS server") \
    X(CUDA_ERROR_MPS_RPC_FAILURE, "the remote procedural call between the MPS server and the MPS client failed") \
    X(CUDA_ERROR_MPS_SERVER_NOT_READY, "MPS server is not ready to accept new MPS client requests") \
    X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "the hardware resources required to create MPS client have been exhausted") \
    X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "the hardware resources required to support device connections have been exhausted") \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED, "the MPS client has been terminated by the server") \
    X(CUDA_ERROR_CDP_NOT_SUPPORTED, "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it") \
    X(CUDA_ERROR_CDP_VERSION_MISMATCH, "unsupported interaction between different versions of CUDA Dynamic Parallelism") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work") \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing blocking stream") \
    X(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from another thread") \
    X(CUDA_ERROR_TIMEOUT, "wait operation timed out")                          \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
    X(CUDA_ERROR_EXTERNAL_DEVICE, "an async error has occurred in an external entity outside of CUDA") \
    X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "a kernel launch error has occurred due to cluster misconfiguration") \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, "the function handle is not loaded when calling an API that requires a loaded function") \
    X(CUDA_ERROR_INVALID_RESOURCE_TYPE, "one or more resources passed in are not valid resource types for the operation") \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "one or more resources are insufficient or non-applicable for the operation") \
    X(CUDA_ERROR_KEY_ROTATION, "an error happened during the key rotation sequence") \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

static int error_text(CUresult error, const char **name, const char **desc)
{
    switch (error) {
#define FC_ERR_CASE_(code, text)                                               \
    case code:                                                                 \
        *name = #code;                                                         \
        *desc = text;                                                          \
        return 1;
        FC_ERRORS(FC_ERR_CASE_)
#undef FC_ERR_CASE_
    default:
        return 0;
    }
}

FC_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    ENTER(cuGetErrorName);
    const char *name, *desc;
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!error_text(error, &name, &desc)) {
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pStr = name;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    ENTER(cuGetErrorString);
    const char *name, *desc;
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!error_text(error, &name, &desc)) {
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pStr = desc;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Kernel registry                                                          */
/* ------------------------------------------------------------------------ */

#define FC_MAX_KERNELS 256
#define FC_MAX_PARAMS 64
#define FC_MAX_NAME 128

/* Entries are never removed, so functions and kernels may point at them and
 * the names handed out by cuFuncGetName stay valid for the process. */
struct kentry {
    char name[FC_MAX_NAME];
    fakecuda_kernel_fn fn;
    int has_layout;
    unsigned int nparams;
    size_t size[FC_MAX_PARAMS];
    size_t off[FC_MAX_PARAMS];
    size_t argbytes;
    atomic_ullong launches;
};

static struct kentry g_kernels[FC_MAX_KERNELS];
static unsigned int g_nkernels;
static pthread_once_t g_builtins_once = PTHREAD_ONCE_INIT;

static unsigned long long global_x(const fakecuda_thread *t)
{
    return (unsigned long long)t->blockIdx.x * t->blockDim.x + t->threadIdx.x;
}

static void k_vec_add(const fakecuda_thread *t)
{
    float *a = *(float **)t->params[0], *b = *(float **)t->params[1], *c = *(float **)t->params[2];
    int n = *(int *)t->params[3];
    unsigned long long i = global_x(t);
    if (n > 0 && i < (unsigned long long)n)
        c[i] = a[i] + b[i];
}

static void k_scale(const fakecuda_thread *t)
{
    float *x = *(float **)t->params[0];
    float s = *(float *)t->params[1];
    int n = *(int *)t->params[2];
    unsigned long long i = global_x(t);
    if (n > 0 && i < (unsigned long long)n)
        x[i] *= s;
}

static void k_fill(const fakecuda_thread *t)
{
    float *x = *(float **)t->params[0];
    float v = *(float *)t->params[1];
    int n = *(int *)t->params[2];
    unsigned long long i = global_x(t);
    if (n > 0 && i < (unsigned long long)n)
        x[i] = v;
}

static void k_empty(const fakecuda_thread *t) { (void)t; }

/* Caller holds the lock. */
static int kentry_find(const char *name)
{
    for (unsigned int i = 0; i < g_nkernels; i++)
        if (strcmp(g_kernels[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The largest power of two <= 16 dividing the size: what nvcc uses for the
 * scalar and vector types tests pass. */
static size_t param_align(size_t size)
{
    size_t a = 16;
    while (a > 1 && size % a != 0)
        a /= 2;
    return a;
}

/* Caller holds the lock. nparams == (unsigned)-1: no layout. */
static int kentry_set(const char *name, fakecuda_kernel_fn fn, unsigned int nparams, const size_t *sizes)
{
    if (!name || !fn || strlen(name) >= FC_MAX_NAME || !name[0])
        return -1;
    int has_layout = nparams != (unsigned int)-1;
    if (has_layout && (nparams > FC_MAX_PARAMS || (nparams && !sizes)))
        return -1;
    if (has_layout)
        for (unsigned int i = 0; i < nparams; i++)
            if (sizes[i] == 0)
                return -1;
    int i = kentry_find(name);
    if (i < 0) {
        if (g_nkernels == FC_MAX_KERNELS)
            return -1;
        i = (int)g_nkernels++;
        snprintf(g_kernels[i].name, FC_MAX_NAME, "%s", name);
    }
    struct kentry *e = &g_kernels[i];
    e->fn = fn;
    e->has_layout = has_layout;
    e->nparams = has_layout ? nparams : 0;
    size_t off = 0;
    for (unsigned int p = 0; p < e->nparams; p++) {
        size_t a = param_align(sizes[p]);
        off = (off + a - 1) & ~(a - 1);
        e->size[p] = sizes[p];
        e->off[p] = off;
        off += sizes[p];
    }
    e->argbytes = off;
    return 0;
}

static void builtins_register(void)
{
    static const size_t vec_add[] = {8, 8, 8, 4}, one_ptr_two_words[] = {8, 4, 4};
    LOCK();
    kentry_set("vec_add", k_vec_add, 4, vec_add);
    kentry_set("scale", k_scale, 3, one_ptr_two_words);
    kentry_set("fill", k_fill, 3, one_ptr_two_words);
    kentry_set("empty", k_empty, 0, NULL);
    UNLOCK();
}

static void builtins_once(void) { pthread_once(&g_builtins_once, builtins_register); }

FC_EXPORT int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn)
{
    builtins_once();
    LOCK();
    int rc = kentry_set(name, fn, (unsigned int)-1, NULL);
    UNLOCK();
    return rc;
}

FC_EXPORT int fakecuda_register_kernel_params(const char *name, fakecuda_kernel_fn fn, unsigned int nparams,
                                              const size_t *param_sizes)
{
    if (nparams == (unsigned int)-1)
        return -1;
    builtins_once();
    LOCK();
    int rc = kentry_set(name, fn, nparams, param_sizes);
    UNLOCK();
    return rc;
}

FC_EXPORT unsigned long long fakecuda_kernel_launches(const char *name)
{
    if (!name)
        return 0;
    builtins_once();
    LOCK();
    int i = kentry_find(name);
    UNLOCK();
    return i < 0 ? 0 : atomic_load(&g_kernels[i].launches);
}

/* ------------------------------------------------------------------------ */
/* Modules, libraries, functions, kernels                                   */
/* ------------------------------------------------------------------------ */

struct module;
struct library;
struct kern;

struct func {
    uint32_t magic;
    unsigned int entry;
    struct module *mod; /* NULL for a kernel's function */
};

struct module {
    uint32_t magic;
    unsigned int n;
    struct func **funcs;
};

struct kern {
    uint32_t magic;
    unsigned int entry;
    struct library *lib;
    struct func *fn; /* what cuKernelGetFunction returns */
};

struct library {
    uint32_t magic;
    unsigned int n;
    struct kern **kerns;
};

#define FC_MAX_IMAGE ((size_t)16 << 20)

static CUresult parse_image(const char *text, unsigned int **out, unsigned int *nout);

/* PTX text stands for the registered kernels its .entry lines name, so
 * tests can hand drk a real PTX image. Caller holds the lock. */
static CUresult parse_ptx(const char *text, unsigned int **out, unsigned int *nout)
{
    size_t cap = strlen(FAKECUDA_IMAGE_MAGIC) + 2, len = 0;
    for (const char *p = text; (p = strstr(p, ".entry")) != NULL; p += 6)
        cap += FC_MAX_NAME + 1;
    char *list = malloc(cap);
    if (!list)
        return CUDA_ERROR_OUT_OF_MEMORY;
    len = (size_t)snprintf(list, cap, "%s\n", FAKECUDA_IMAGE_MAGIC);
    for (const char *p = text; (p = strstr(p, ".entry")) != NULL;) {
        p += 6;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, " \t\r\n(");
        if (n == 0 || n >= FC_MAX_NAME) {
            free(list);
            return CUDA_ERROR_INVALID_IMAGE;
        }
        memcpy(list + len, p, n);
        len += n;
        list[len++] = '\n';
        list[len] = '\0';
    }
    CUresult rc = parse_image(list, out, nout);
    free(list);
    return rc;
}

/* Parses "DRKFAKE1\n<name>\n..." (or PTX) into registry indices. Caller
 * holds the lock. */
static CUresult parse_image(const char *text, unsigned int **out, unsigned int *nout)
{
    *out = NULL;
    *nout = 0;
    size_t hl = strlen(FAKECUDA_IMAGE_MAGIC);
    if (strncmp(text, FAKECUDA_IMAGE_MAGIC, hl) != 0)
        return strstr(text, ".version") && strstr(text, ".entry") ? parse_ptx(text, out, nout)
                                                                  : CUDA_ERROR_INVALID_IMAGE;
    const char *p = text + hl;
    while (*p == '\r' || *p == ' ' || *p == '\t')
        p++;
    if (*p != '\n' && *p != '\0')
        return CUDA_ERROR_INVALID_IMAGE;
    unsigned int *ids = NULL, n = 0, cap = 0;
    while (*p) {
        p++; /* past '\n' */
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        while (len && (*s == ' ' || *s == '\t' || *s == '\r'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
            len--;
        p = end ? end : p + strlen(p);
        if (!len)
            continue;
        char name[FC_MAX_NAME];
        if (len >= sizeof name)
            goto bad;
        memcpy(name, s, len);
        name[len] = '\0';
        int id = kentry_find(name);
        if (id < 0)
            goto bad;
        for (unsigned int i = 0; i < n; i++)
            if (ids[i] == (unsigned int)id)
                goto bad;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            unsigned int *grown = realloc(ids, cap * sizeof *ids);
            if (!grown) {
                free(ids);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            ids = grown;
        }
        ids[n++] = (unsigned int)id;
    }
    *out = ids;
    *nout = n;
    return CUDA_SUCCESS;
bad:
    free(ids);
    return CUDA_ERROR_INVALID_IMAGE;
}

static void module_free(struct module *m)
{
    for (unsigned int i = 0; i < m->n; i++)
        free(m->funcs[i]);
    free(m->funcs);
    free(m);
}

static CUresult module_from_text(CUmodule *module, const char *text)
{
    if (!module || !text)
        return CUDA_ERROR_INVALID_VALUE;
    builtins_once();
    unsigned int *ids, n;
    LOCK();
    CUresult rc = parse_image(text, &ids, &n);
    UNLOCK();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct module *m = calloc(1, sizeof *m);
    if (m && n)
        m->funcs = calloc(n, sizeof *m->funcs);
    if (!m || (n && !m->funcs))
        goto oom;
    m->magic = MAGIC_MODULE;
    for (; m->n < n; m->n++) {
        struct func *f = malloc(sizeof *f);
        if (!f)
            goto oom;
        f->magic = MAGIC_FUNC;
        f->entry = ids[m->n];
        f->mod = m;
        m->funcs[m->n] = f;
    }
    free(ids);
    ids = NULL;
    LOCK();
    int ok = h_add(m) == 0;
    for (unsigned int i = 0; ok && i < m->n; i++)
        ok = h_add(m->funcs[i]) == 0;
    if (!ok) {
        /* h_del ignores objects that never made it into the table. */
        for (unsigned int i = 0; i < m->n; i++)
            h_del(m->funcs[i]);
        h_del(m);
        UNLOCK();
        module_free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    UNLOCK();
    *module = (CUmodule)m;
    return CUDA_SUCCESS;
oom:
    free(ids);
    if (m)
        module_free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void library_free(struct library *l)
{
    for (unsigned int i = 0; i < l->n; i++) {
        free(l->kerns[i]->fn);
        free(l->kerns[i]);
    }
    free(l->kerns);
    free(l);
}

static CUresult library_from_text(CUlibrary *library, const char *text)
{
    if (!library || !text)
        return CUDA_ERROR_INVALID_VALUE;
    builtins_once();
    unsigned int *ids, n;
    LOCK();
    CUresult rc = parse_image(text, &ids, &n);
    UNLOCK();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct library *l = calloc(1, sizeof *l);
    if (l && n)
        l->kerns = calloc(n, sizeof *l->kerns);
    if (!l || (n && !l->kerns))
        goto oom;
    l->magic = MAGIC_LIB;
    for (; l->n < n; l->n++) {
        struct kern *k = malloc(sizeof *k);
        struct func *f = malloc(sizeof *f);
        if (!k || !f) {
            free(k);
            free(f);
            goto oom;
        }
        f->magic = MAGIC_FUNC;
        f->entry = ids[l->n];
        f->mod = NULL;
        k->magic = MAGIC_KERN;
        k->entry = ids[l->n];
        k->lib = l;
        k->fn = f;
        l->kerns[l->n] = k;
    }
    free(ids);
    ids = NULL;
    LOCK();
    int ok = h_add(l) == 0;
    for (unsigned int i = 0; ok && i < l->n; i++)
        ok = h_add(l->kerns[i]) == 0 && h_add(l->kerns[i]->fn) == 0;
    if (!ok) {
        for (unsigned int i = 0; i < l->n; i++) {
            h_del(l->kerns[i]->fn);
            h_del(l->kerns[i]);
        }
        h_del(l);
        UNLOCK();
        library_free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    UNLOCK();
    *library = (CUlibrary)l;
    return CUDA_SUCCESS;
oom:
    free(ids);
    if (l)
        library_free(l);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Reads a whole image file, NUL-terminated. */
static CUresult read_file(const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap >= FC_MAX_IMAGE) {
                free(buf);
                fclose(f);
                return CUDA_ERROR_INVALID_IMAGE;
            }
            cap = cap ? cap * 2 : 8192;
            char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    buf[len] = '\0';
    *out = buf;
    return CUDA_SUCCESS;
}

static int jit_options_ok(unsigned int n, const void *opts, const void *vals)
{
    return n == 0 || (opts && vals);
}

FC_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    ENTER_INIT(cuModuleLoad);
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    char *text;
    CUresult rc = read_file(fname, &text);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = module_from_text(module, text);
    free(text);
    return rc;
}

FC_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    ENTER_INIT(cuModuleLoadData);
    return module_from_text(module, image);
}

FC_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
    ENTER_INIT(cuModuleLoadDataEx);
    if (!jit_options_ok(numOptions, options, optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return module_from_text(module, image);
}

FC_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    ENTER_INIT(cuModuleLoadFatBinary);
    return module_from_text(module, fatCubin);
}

FC_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    ENTER_INIT(cuModuleGetFunction);
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct module *m = h_get(hmod, MAGIC_MODULE);
    if (!m) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < m->n; i++) {
        if (strcmp(g_kernels[m->funcs[i]->entry].name, name) == 0) {
            *hfunc = (CUfunction)m->funcs[i];
            UNLOCK();
            return CUDA_SUCCESS;
        }
    }
    UNLOCK();
    return CUDA_ERROR_NOT_FOUND;
}

FC_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    ENTER_INIT(cuModuleUnload);
    LOCK();
    struct module *m = h_get(hmod, MAGIC_MODULE);
    if (!m) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < m->n; i++)
        h_del(m->funcs[i]);
    h_del(m);
    UNLOCK();
    module_free(m);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                     void **jitOptionsValues, unsigned int numJitOptions,
                                     CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                     unsigned int numLibraryOptions)
{
    ENTER_INIT(cuLibraryLoadData);
    if (!jit_options_ok(numJitOptions, jitOptions, jitOptionsValues) ||
        !jit_options_ok(numLibraryOptions, libraryOptions, libraryOptionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return library_from_text(library, code);
}

FC_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                         void **jitOptionsValues, unsigned int numJitOptions,
                                         CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                         unsigned int numLibraryOptions)
{
    ENTER_INIT(cuLibraryLoadFromFile);
    if (!library || !fileName || !jit_options_ok(numJitOptions, jitOptions, jitOptionsValues) ||
        !jit_options_ok(numLibraryOptions, libraryOptions, libraryOptionValues))
        return CUDA_ERROR_INVALID_VALUE;
    char *text;
    CUresult rc = read_file(fileName, &text);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = library_from_text(library, text);
    free(text);
    return rc;
}

FC_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    ENTER_INIT(cuLibraryGetKernel);
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct library *l = h_get(library, MAGIC_LIB);
    if (!l) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < l->n; i++) {
        if (strcmp(g_kernels[l->kerns[i]->entry].name, name) == 0) {
            *pKernel = (CUkernel)l->kerns[i];
            UNLOCK();
            return CUDA_SUCCESS;
        }
    }
    UNLOCK();
    return CUDA_ERROR_NOT_FOUND;
}

FC_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    ENTER_INIT(cuLibraryUnload);
    LOCK();
    struct library *l = h_get(library, MAGIC_LIB);
    if (!l) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < l->n; i++) {
        h_del(l->kerns[i]->fn);
        h_del(l->kerns[i]);
    }
    h_del(l);
    UNLOCK();
    library_free(l);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    ENTER_INIT(cuKernelGetFunction);
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct kern *k = h_get(kernel, MAGIC_KERN);
    if (k)
        *pFunc = (CUfunction)k->fn;
    UNLOCK();
    return k ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The registry entry behind a live CUfunction (kinds & 1) or CUkernel
 * (kinds & 2), or -1. Caller holds the lock. */
static int handle_entry(const void *h, int kinds)
{
    struct func *f = (kinds & 1) ? h_get(h, MAGIC_FUNC) : NULL;
    if (f)
        return (int)f->entry;
    struct kern *k = (kinds & 2) ? h_get(h, MAGIC_KERN) : NULL;
    return k ? (int)k->entry : -1;
}

static CUresult entry_name(const char **name, const void *h, int kinds)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    int e = handle_entry(h, kinds);
    UNLOCK();
    if (e < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = g_kernels[e].name;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    ENTER_INIT(cuFuncGetName);
    return entry_name(name, hfunc, 1);
}

FC_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    ENTER_INIT(cuKernelGetName);
    return entry_name(name, hfunc, 2);
}

static CUresult func_attribute(int *pi, CUfunction_attribute attrib, const void *h, int kinds)
{
    if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    int e = handle_entry(h, kinds);
    UNLOCK();
    if (e < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    int v = 0;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: v = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: v = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: v = 49152; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: v = -1; break;
    default: break; /* static shared/const/local sizes, cluster settings: 0 */
    }
    *pi = v;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    ENTER_INIT(cuFuncGetAttribute);
    return func_attribute(pi, attrib, hfunc, 1);
}

FC_EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    ENTER_INIT(cuKernelGetAttribute);
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return func_attribute(pi, attrib, kernel, 2);
}

static CUresult param_info(const void *h, int kinds, size_t index, size_t *offset, size_t *size)
{
    LOCK();
    int e = handle_entry(h, kinds);
    if (e < 0) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    const struct kentry *k = &g_kernels[e];
    int ok = index < k->nparams;
    if (ok && offset)
        *offset = k->off[index];
    if (ok && size)
        *size = k->size[index];
    UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    ENTER_INIT(cuFuncGetParamInfo);
    return param_info(func, 1, paramIndex, paramOffset, paramSize);
}

FC_EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                        size_t *paramSize)
{
    ENTER_INIT(cuKernelGetParamInfo);
    return param_info(kernel, 2, paramIndex, paramOffset, paramSize);
}

/* ------------------------------------------------------------------------ */
/* Launch                                                                   */
/* ------------------------------------------------------------------------ */

struct launch {
    const void *f;
    unsigned int gx, gy, gz, bx, by, bz, shmem;
    CUstream stream;
    void **params;
    void **extra;
    int coop;
};

/* `extra`: BUFFER_POINTER and BUFFER_SIZE pairs, ended by NULL/END. */
static CUresult parse_extra(void **extra, char **buf, size_t *size)
{
    void *p = NULL;
    const size_t *psize = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (i >= 16) /* an unterminated list: refuse rather than read on */
            return CUDA_ERROR_INVALID_VALUE;
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            p = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            psize = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!p || !psize)
        return CUDA_ERROR_INVALID_VALUE;
    *buf = p;
    *size = *psize;
    return CUDA_SUCCESS;
}

static CUresult do_launch(const struct launch *L)
{
    if (L->gx == 0 || L->gy == 0 || L->gz == 0 || L->bx == 0 || L->by == 0 || L->bz == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->bx > 1024 || L->by > 1024 || L->bz > 64 || (unsigned long long)L->bx * L->by * L->bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->gx > 2147483647u || L->gy > 65535 || L->gz > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->shmem > FC_MAX_DYN_SHARED)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->params && L->extra)
        return CUDA_ERROR_INVALID_VALUE;

    LOCK();
    int e = handle_entry(L->f, 3);
    if (e < 0) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!stream_ok_locked(L->stream)) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct kentry *k = &g_kernels[e];
    fakecuda_kernel_fn fn = k->fn;
    int has_layout = k->has_layout;
    unsigned int nparams = k->nparams;
    size_t off[FC_MAX_PARAMS], argbytes = k->argbytes;
    memcpy(off, k->off, nparams * sizeof *off);
    UNLOCK();

    unsigned long long threads = (unsigned long long)L->bx * L->by * L->bz;
    if (L->coop) {
        /* All blocks must be co-resident: at most 32 blocks and 2048
         * threads per SM. */
        unsigned long long per_sm = FC_MAX_THREADS_PER_SM / threads;
        if (per_sm > 32)
            per_sm = 32;
        if ((unsigned long long)L->gx * L->gy * L->gz > per_sm * FC_SM_COUNT)
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }

    void *unpacked[FC_MAX_PARAMS];
    void **params = L->params;
    if (L->extra) {
        char *buf;
        size_t size;
        CUresult rc = parse_extra(L->extra, &buf, &size);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!has_layout || size < argbytes)
            return CUDA_ERROR_INVALID_VALUE;
        for (unsigned int i = 0; i < nparams; i++)
            unpacked[i] = buf + off[i];
        params = unpacked;
    } else if (!params && nparams > 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    void *shared = NULL;
    if (L->shmem && !(shared = calloc(1, L->shmem)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    fakecuda_thread t = {
        .gridDim = {L->gx, L->gy, L->gz},
        .blockDim = {L->bx, L->by, L->bz},
        .params = params,
        .nparams = nparams,
        .shared = shared,
        .sharedMemBytes = L->shmem,
    };
    for (t.blockIdx.z = 0; t.blockIdx.z < L->gz; t.blockIdx.z++)
        for (t.blockIdx.y = 0; t.blockIdx.y < L->gy; t.blockIdx.y++)
            for (t.blockIdx.x = 0; t.blockIdx.x < L->gx; t.blockIdx.x++)
                for (t.threadIdx.z = 0; t.threadIdx.z < L->bz; t.threadIdx.z++)
                    for (t.threadIdx.y = 0; t.threadIdx.y < L->by; t.threadIdx.y++)
                        for (t.threadIdx.x = 0; t.threadIdx.x < L->bx; t.threadIdx.x++)
                            fn(&t);
    free(shared);
    atomic_fetch_add(&k->launches, 1);
    return CUDA_SUCCESS;
}

static CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                              unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,
                              void **params, void **extra, int coop)
{
    struct launch L = {f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra, coop};
    return do_launch(&L);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    if (config->numAttrs && !config->attrs)
        return CUDA_ERROR_INVALID_VALUE;
    int coop = 0;
    for (unsigned int i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && config->attrs[i].value.cooperative)
            coop = 1;
    struct launch L = {f,
                       config->gridDimX,
                       config->gridDimY,
                       config->gridDimZ,
                       config->blockDimX,
                       config->blockDimY,
                       config->blockDimZ,
                       config->sharedMemBytes,
                       config->hStream,
                       params,
                       extra,
                       coop};
    return do_launch(&L);
}

FC_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                  unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    ENTER_INIT(cuLaunchKernel);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, extra, 0);
}

FC_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams, void **extra)
{
    ENTER_INIT(cuLaunchKernel_ptsz);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, extra, 0);
}

FC_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    ENTER_INIT(cuLaunchKernelEx);
    return launch_ex(config, f, kernelParams, extra);
}

FC_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                         void **extra)
{
    ENTER_INIT(cuLaunchKernelEx_ptsz);
    return launch_ex(config, f, kernelParams, extra);
}

FC_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                             void **kernelParams)
{
    ENTER_INIT(cuLaunchCooperativeKernel);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, NULL, 1);
}

FC_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                  unsigned int gridDimZ, unsigned int blockDimX,
                                                  unsigned int blockDimY, unsigned int blockDimZ,
                                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    ENTER_INIT(cuLaunchCooperativeKernel_ptsz);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, NULL, 1);
}

/* Graphs are not modelled: any non-NULL executable graph "runs". */
static CUresult graph_launch(CUgraphExec exec, CUstream stream)
{
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_ok(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    ENTER_INIT(cuGraphLaunch);
    return graph_launch(hGraphExec, hStream);
}

FC_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    ENTER_INIT(cuGraphLaunch_ptsz);
    return graph_launch(hGraphExec, hStream);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

enum {
    A_DEVICE, /* cuMemAlloc* */
    A_HOST,   /* pinned host memory */
    A_VMM,    /* one cuMemMap'd range: device memory once access is set */
};

struct alloc {
    uintptr_t base;
    size_t size;   /* requested bytes (A_VMM: the mapped range) */
    size_t maplen; /* mmapped bytes */
    unsigned long long id;
    int kind;
    int prot;           /* A_VMM: PROT_* granted by cuMemSetAccess, 0 until then */
    unsigned int flags; /* A_HOST: the cuMemHostAlloc flags */
    CUcontext ctx;      /* the context current at allocation, else the primary */
};

/* Live allocations sorted by base, for containing-pointer lookups. */
static struct alloc **a_items;
static size_t a_n, a_cap;

static size_t a_lower(uintptr_t key)
{
    size_t lo = 0, hi = a_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a_items[mid]->base < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Caller holds the lock. Any record containing p, VMM mappings without
 * access included. */
static struct alloc *a_containing_any(uintptr_t p)
{
    size_t i = a_lower(p + 1); /* first base > p */
    if (i == 0)
        return NULL;
    struct alloc *a = a_items[i - 1];
    return p - a->base < a->size ? a : NULL;
}

/* Caller holds the lock. The memory containing p as the driver sees it: a
 * mapping nobody may access yet is not device memory. */
static struct alloc *a_containing(uintptr_t p)
{
    struct alloc *a = a_containing_any(p);
    return a && a->kind == A_VMM && !a->prot ? NULL : a;
}

static struct alloc *a_exact(uintptr_t p)
{
    size_t i = a_lower(p);
    return i < a_n && a_items[i]->base == p ? a_items[i] : NULL;
}

static int a_add(struct alloc *a)
{
    if (a_n == a_cap) {
        size_t cap = a_cap ? a_cap * 2 : 256;
        struct alloc **items = realloc(a_items, cap * sizeof *items);
        if (!items)
            return -1;
        a_items = items, a_cap = cap;
    }
    size_t i = a_lower(a->base);
    memmove(a_items + i + 1, a_items + i, (a_n - i) * sizeof *a_items);
    a_items[i] = a;
    a_n++;
    return 0;
}

static void a_del(struct alloc *a)
{
    size_t i = a_lower(a->base);
    if (i < a_n && a_items[i] == a) {
        memmove(a_items + i, a_items + i + 1, (a_n - i - 1) * sizeof *a_items);
        a_n--;
    }
}

/* Device (host == 0) or pinned host memory (with its cuMemHostAlloc
 * flags). low32: under 4 GiB for the legacy forms' 32-bit pointers. */
static CUresult mem_alloc(uintptr_t *out, size_t size, int host, int low32, unsigned int flags)
{
    if (!out || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    long page = sysconf(_SC_PAGESIZE);
    LOCK();
    if (!host) {
        if (size > g_total_mem - g_live_bytes) {
            UNLOCK();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_live_bytes += size; /* reserved before mapping, so racing threads see it */
    }
    UNLOCK();
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc *a = NULL;
    size_t maplen = size + (size_t)page - 1;
    if (maplen < size)
        goto fail;
    maplen &= ~((size_t)page - 1);
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (low32 ? MAP_32BIT : 0), -1, 0);
    if (p == MAP_FAILED)
        goto fail;
    if (low32 && (uintptr_t)p + maplen > ((uintptr_t)1 << 32)) {
        munmap(p, maplen);
        goto fail;
    }
    a = malloc(sizeof *a);
    if (!a) {
        munmap(p, maplen);
        goto fail;
    }
    struct ctx *c = current_ctx();
    *a = (struct alloc){(uintptr_t)p, size, maplen, atomic_fetch_add(&g_next_buffer_id, 1), host ? A_HOST : A_DEVICE,
                        0, flags, (CUcontext)(c ? c : &g_primary)};
    LOCK();
    if (a_add(a) != 0) {
        UNLOCK();
        munmap(p, maplen);
        free(a);
        goto fail;
    }
    if (host)
        g_live_host++;
    else
        g_live_dev++;
    UNLOCK();
    *out = (uintptr_t)p;
    return CUDA_SUCCESS;
fail:
    if (!host) {
        LOCK();
        g_live_bytes -= size;
        UNLOCK();
    }
    return rc;
}

/* Frees the allocation based exactly at p, if it is of the right kind. */
static CUresult mem_free(uintptr_t p, int host)
{
    LOCK();
    struct alloc *a = a_exact(p);
    if (!a || a->kind != (host ? A_HOST : A_DEVICE)) {
        UNLOCK();
        return CUDA_ERROR_INVALID_VALUE;
    }
    a_del(a);
    if (host) {
        g_live_host--;
    } else {
        g_live_dev--;
        g_live_bytes -= a->size;
    }
    UNLOCK();
    munmap((void *)a->base, a->maplen);
    free(a);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    ENTER_INIT(cuMemAlloc);
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 0, 1, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return rc;
}

FC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    ENTER_INIT(cuMemAlloc_v2);
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 0, 0, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return rc;
}

static CUresult pitch_of(size_t width, size_t height, unsigned int elem, size_t *pitch, size_t *bytes)
{
    if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (width > SIZE_MAX - FC_PITCH_ALIGN)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pitch = (width + FC_PITCH_ALIGN - 1) / FC_PITCH_ALIGN * FC_PITCH_ALIGN;
    if (height > SIZE_MAX / *pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *bytes = *pitch * height;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                   unsigned int Height, unsigned int ElementSizeBytes)
{
    ENTER_INIT(cuMemAllocPitch);
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch, bytes;
    CUresult rc = pitch_of(WidthInBytes, Height, ElementSizeBytes, &pitch, &bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pitch > UINT32_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t p;
    rc = mem_alloc(&p, bytes, 0, 1, 0);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return rc;
}

FC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes)
{
    ENTER_INIT(cuMemAllocPitch_v2);
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch, bytes;
    CUresult rc = pitch_of(WidthInBytes, Height, ElementSizeBytes, &pitch, &bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    uintptr_t p;
    rc = mem_alloc(&p, bytes, 0, 0, 0);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr)p;
        *pPitch = pitch;
    }
    return rc;
}

FC_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    ENTER_INIT(cuMemFree);
    return mem_free(dptr, 0);
}

FC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    ENTER_INIT(cuMemFree_v2);
    return mem_free((uintptr_t)dptr, 0);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_ok(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, size, 0, 0, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream stream)
{
    if (!stream_ok(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    return mem_free((uintptr_t)dptr, 0);
}

FC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    ENTER_INIT(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, hStream);
}

FC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    ENTER_INIT(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, hStream);
}

/* Pools are not modelled: any non-NULL pool allocates like the default. */
FC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    ENTER_INIT(cuMemAllocFromPoolAsync);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, hStream);
}

FC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream)
{
    ENTER_INIT(cuMemAllocFromPoolAsync_ptsz);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, hStream);
}

FC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    ENTER_INIT(cuMemFreeAsync);
    return free_async(dptr, hStream);
}

FC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    ENTER_INIT(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream);
}

static void mem_info(size_t *free_bytes, size_t *total)
{
    LOCK();
    *total = g_total_mem;
    *free_bytes = g_total_mem - g_live_bytes;
    UNLOCK();
}

FC_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes)
{
    ENTER_INIT(cuMemGetInfo);
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    size_t f, t;
    mem_info(&f, &t);
    *free_bytes = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
    *total_bytes = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    ENTER_INIT(cuMemGetInfo_v2);
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    mem_info(free_bytes, total_bytes);
    return CUDA_SUCCESS;
}

/* Device allocations only, as documented for cuMemAlloc/cuMemAllocPitch;
 * for VMM memory the one mapping (cuMemMap call) containing p. */
static CUresult address_range(uintptr_t p, uintptr_t *base, size_t *size)
{
    LOCK();
    struct alloc *a = a_containing(p);
    if (!a || a->kind == A_HOST) {
        UNLOCK();
        return CUDA_ERROR_NOT_FOUND;
    }
    *base = a->base;
    *size = a->size;
    UNLOCK();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    ENTER_INIT(cuMemGetAddressRange);
    uintptr_t base;
    size_t size;
    CUresult rc = address_range(dptr, &base, &size);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pbase)
        *pbase = (CUdeviceptr_v1)base;
    if (psize)
        *psize = (unsigned int)size;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    ENTER_INIT(cuMemGetAddressRange_v2);
    uintptr_t base;
    size_t size;
    CUresult rc = address_range((uintptr_t)dptr, &base, &size);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pbase)
        *pbase = (CUdeviceptr)base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

/* One attribute of allocation a (NULL: an unknown pointer, written as the
 * zero/NULL default cuPointerGetAttributes documents). */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, uintptr_t p, const struct alloc *a)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a ? a->ctx : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !a ? 0u : a->kind == A_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = a ? (CUdeviceptr)p : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a && a->kind != A_HOST)
            return CUDA_ERROR_INVALID_VALUE; /* device memory has no host address */
        *(void **)data = a ? (void *)p : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = a ? a->id : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(unsigned int *)data = a && a->kind == A_DEVICE; /* not VMM memory, not host */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a ? (CUdeviceptr)a->base : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a ? a->size : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = a != NULL;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

FC_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    ENTER_INIT(cuPointerGetAttribute);
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct alloc *a = a_containing((uintptr_t)ptr);
    struct alloc copy;
    if (a)
        copy = *a;
    UNLOCK();
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, (uintptr_t)ptr, &copy);
}

FC_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                          CUdeviceptr ptr)
{
    ENTER_INIT(cuPointerGetAttributes);
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < numAttributes; i++)
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct alloc *a = a_containing((uintptr_t)ptr);
    struct alloc copy;
    if (a)
        copy = *a;
    UNLOCK();
    for (unsigned int i = 0; i < numAttributes; i++) {
        CUresult rc = pointer_attribute(data[i], attributes[i], (uintptr_t)ptr, a ? &copy : NULL);
        if (rc != CUDA_SUCCESS) {
            if (attributes[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER)
                return rc;
            *(void **)data[i] = NULL; /* device memory has no host pointer; not an error here */
        }
    }
    return CUDA_SUCCESS;
}

/* The handle holds the allocation's base address (bytes 0-7) and buffer id
 * (bytes 8-15), so a reused address gives a new handle. VMM memory has no
 * legacy IPC handle. */
FC_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    ENTER_INIT(cuIpcGetMemHandle);
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct alloc *a = a_containing((uintptr_t)dptr);
    unsigned long long words[2] = {0, 0};
    if (a && a->kind == A_DEVICE)
        words[0] = a->base, words[1] = a->id;
    UNLOCK();
    if (!words[0])
        return CUDA_ERROR_INVALID_VALUE;
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, words, sizeof words);
    return CUDA_SUCCESS;
}

/* Handles opened in this process (the stand-in is its own peer): base, id
 * and how many opens are not yet closed. */
struct ipc_open {
    uintptr_t base;
    unsigned long long id;
    unsigned int refs;
};

static struct ipc_open *g_ipc;
static size_t g_ipc_n, g_ipc_cap;
static unsigned long long g_ipc_live;

/* Caller holds the lock. */
static struct ipc_open *ipc_find(uintptr_t base, const unsigned long long *id)
{
    for (size_t i = 0; i < g_ipc_n; i++)
        if (g_ipc[i].base == base && (!id || g_ipc[i].id == *id))
            return &g_ipc[i];
    return NULL;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    if (!pdptr || (flags & ~(unsigned int)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long words[2];
    memcpy(words, handle.reserved, sizeof words);
    LOCK();
    struct alloc *a = words[0] ? a_exact((uintptr_t)words[0]) : NULL;
    if (!a || a->kind != A_DEVICE || a->id != words[1]) {
        UNLOCK();
        return CUDA_ERROR_INVALID_VALUE; /* unknown, or its allocation is gone */
    }
    struct ipc_open *o = ipc_find(a->base, &a->id);
    if (!o) {
        if (g_ipc_n == g_ipc_cap) {
            size_t cap = g_ipc_cap ? g_ipc_cap * 2 : 16;
            struct ipc_open *items = realloc(g_ipc, cap * sizeof *items);
            if (!items) {
                UNLOCK();
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            g_ipc = items, g_ipc_cap = cap;
        }
        o = &g_ipc[g_ipc_n++];
        *o = (struct ipc_open){a->base, a->id, 0};
    }
    o->refs++;
    g_ipc_live++;
    UNLOCK();
    *pdptr = (CUdeviceptr)words[0];
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    ENTER_INIT(cuIpcOpenMemHandle);
    return ipc_open(pdptr, handle, Flags);
}

FC_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    ENTER_INIT(cuIpcOpenMemHandle_v2);
    return ipc_open(pdptr, handle, Flags);
}

FC_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    ENTER_INIT(cuIpcCloseMemHandle);
    LOCK();
    struct ipc_open *o = dptr ? ipc_find((uintptr_t)dptr, NULL) : NULL;
    if (o) {
        g_ipc_live--;
        if (--o->refs == 0)
            *o = g_ipc[--g_ipc_n];
    }
    UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_EXPORT unsigned long long fakecuda_ipc_open_count(void)
{
    LOCK();
    unsigned long long n = g_ipc_live;
    UNLOCK();
    return n;
}

FC_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    ENTER_INIT(cuMemHostAlloc);
    if (!pp || (Flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                        CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 1, 0, Flags);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

/* The legacy form's memory lies under 4 GiB, like cuMemAlloc's, so the
 * legacy cuMemHostGetDevicePointer can hand out its 32-bit address. */
FC_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    ENTER_INIT(cuMemAllocHost);
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 1, 1, 0);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

FC_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    ENTER_INIT(cuMemAllocHost_v2);
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 1, 0, 0);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

FC_EXPORT CUresult cuMemFreeHost(void *p)
{
    ENTER_INIT(cuMemFreeHost);
    return mem_free((uintptr_t)p, 1);
}

/* The live pinned allocation containing p, copied; 0 if there is none. */
static int host_alloc_of(const void *p, struct alloc *out)
{
    LOCK();
    struct alloc *a = a_containing((uintptr_t)p);
    int ok = a && a->kind == A_HOST;
    if (ok)
        *out = *a;
    UNLOCK();
    return ok;
}

/* Unified addressing: the device pointer of pinned memory is its host
 * address, interior pointers included. */
FC_EXPORT CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    ENTER_INIT(cuMemHostGetDevicePointer);
    struct alloc a;
    if (!pdptr || Flags != 0 || !host_alloc_of(p, &a) || (uintptr_t)p > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr_v1)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    ENTER_INIT(cuMemHostGetDevicePointer_v2);
    struct alloc a;
    if (!pdptr || Flags != 0 || !host_alloc_of(p, &a))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    ENTER_INIT(cuMemHostGetFlags);
    struct alloc a;
    if (!pFlags || !host_alloc_of(p, &a))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = a.flags;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Virtual memory management: a reservation is a PROT_NONE host range, a    */
/* physical allocation a memfd, mapping is mmap MAP_FIXED of it (no access  */
/* until cuMemSetAccess), so one allocation shows at every address it is    */
/* mapped at, as on a GPU. Each cuMemMap is a record among the allocations  */
/* (A_VMM), so copies, sets and pointer queries see it once access is set.  */
/* Created bytes count as device memory in use from cuMemCreate to          */
/* cuMemRelease; imported handles do not count them again.                  */
/* ------------------------------------------------------------------------ */

#define FC_VMM_GRANULARITY ((size_t)2 << 20)
#define FC_VMM_HANDLES 4096
#define FC_VMM_FD_NAME "fakecuda-vmm"

typedef struct vmm_alloc {
    int fd; /* -1: slot free */
    size_t size;
    unsigned int handle_types; /* CUmemAllocationHandleType bits it may be exported as */
    int imported;              /* from cuMemImportFromShareableHandle: not counted */
} vmm_alloc;

static vmm_alloc g_vmm[FC_VMM_HANDLES];
static int g_vmm_init;

/* Live reservations: few, searched linearly. */
struct resv {
    uintptr_t base;
    size_t size;
};

static struct resv *g_resv;
static size_t g_resv_n, g_resv_cap;

/* Handles are slot + 1 with a tag, so 0 and stray values are refused. */
#define VMM_TAG 0x5a5a000000000000ull

/* Caller holds the lock. */
static vmm_alloc *vmm_of(CUmemGenericAllocationHandle h)
{
    if (!g_vmm_init || (h & 0xffff000000000000ull) != VMM_TAG || (h & 0xffffffffull) == 0 ||
        (h & 0xffffffffull) > FC_VMM_HANDLES)
        return NULL;
    vmm_alloc *a = &g_vmm[(h & 0xffffffffull) - 1];
    return a->fd >= 0 ? a : NULL;
}

/* Caller holds the lock. A free handle slot, or -1. */
static int vmm_free_slot(void)
{
    if (!g_vmm_init) {
        for (int i = 0; i < FC_VMM_HANDLES; i++)
            g_vmm[i].fd = -1;
        g_vmm_init = 1;
    }
    for (int i = 0; i < FC_VMM_HANDLES; i++)
        if (g_vmm[i].fd < 0)
            return i;
    return -1;
}

static int vmm_prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           prop->location.id == 0;
}

/* Caller holds the lock. The reservation holding all of [p, p + size)? */
static int resv_holds(uintptr_t p, size_t size)
{
    for (size_t i = 0; i < g_resv_n; i++)
        if (p >= g_resv[i].base && p - g_resv[i].base < g_resv[i].size &&
            size <= g_resv[i].size - (p - g_resv[i].base))
            return 1;
    return 0;
}

/* Caller holds the lock. Does any record overlap [p, p + size)? */
static int a_overlaps(uintptr_t p, size_t size)
{
    size_t i = a_lower(p + size); /* first base at or past the end */
    return i > 0 && a_items[i - 1]->base + a_items[i - 1]->size > p;
}

/* Caller holds the lock. [p, p + size) as whole mappings end to end: the
 * index of the first and, in *count, how many; -1 if it is not that. */
static long vmm_tiles(uintptr_t p, size_t size, size_t *count)
{
    size_t i = a_lower(p), j = i;
    uintptr_t at = p;
    while (at - p < size && j < a_n && a_items[j]->kind == A_VMM && a_items[j]->base == at)
        at += a_items[j++]->size;
    if (at - p != size)
        return -1;
    *count = j - i;
    return (long)i;
}

FC_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option)
{
    ENTER_INIT(cuMemGetAllocationGranularity);
    (void)option;
    if (!granularity || !vmm_prop_ok(prop))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = FC_VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                       unsigned long long flags)
{
    ENTER_INIT(cuMemAddressReserve);
    size_t align = alignment ? alignment : FC_VMM_GRANULARITY;
    if (!ptr || !size || size % FC_VMM_GRANULARITY || (align & (align - 1)) || addr || flags)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t raw = (uintptr_t)p, at = (raw + align - 1) & ~(uintptr_t)(align - 1);
    if (at > raw)
        munmap(p, at - raw);
    if (raw + size + align > at + size)
        munmap((void *)(at + size), raw + size + align - (at + size));
    LOCK();
    int ok = 1;
    if (g_resv_n == g_resv_cap) {
        size_t cap = g_resv_cap ? g_resv_cap * 2 : 16;
        struct resv *items = realloc(g_resv, cap * sizeof *items);
        if (items)
            g_resv = items, g_resv_cap = cap;
        else
            ok = 0;
    }
    if (ok)
        g_resv[g_resv_n++] = (struct resv){at, size};
    UNLOCK();
    if (!ok) {
        munmap((void *)at, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)at;
    return CUDA_SUCCESS;
}

/* The whole reservation, as reserved, with nothing mapped in it any more. */
FC_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    ENTER_INIT(cuMemAddressFree);
    if (!ptr || !size || ptr % FC_VMM_GRANULARITY || size % FC_VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    for (size_t i = 0; i < g_resv_n; i++) {
        if (g_resv[i].base != (uintptr_t)ptr || g_resv[i].size != size)
            continue;
        if (!a_overlaps((uintptr_t)ptr, size) && munmap((void *)(uintptr_t)ptr, size) == 0) {
            g_resv[i] = g_resv[--g_resv_n];
            rc = CUDA_SUCCESS;
        }
        break;
    }
    UNLOCK();
    return rc;
}

FC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    ENTER_INIT(cuMemCreate);
    if (!handle || !size || size % FC_VMM_GRANULARITY || !vmm_prop_ok(prop) || flags)
        return CUDA_ERROR_INVALID_VALUE;
    /* Only file descriptors can be shared here (no Win32, no fabric). */
    if (prop->requestedHandleTypes & ~(unsigned int)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    LOCK();
    int slot = vmm_free_slot();
    CUresult rc = CUDA_SUCCESS;
    if (slot < 0 || size > g_total_mem - g_live_bytes) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        int fd = memfd_create(FC_VMM_FD_NAME, MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
            if (fd >= 0)
                close(fd);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            g_vmm[slot] = (vmm_alloc){fd, size, (unsigned int)prop->requestedHandleTypes, 0};
            g_live_bytes += size;
            *handle = VMM_TAG | (CUmemGenericAllocationHandle)(slot + 1);
        }
    }
    UNLOCK();
    return rc;
}

/* Memory stays where it is mapped (the mappings hold the file) until
 * unmapped, as the driver documents; the handle is gone at once. */
FC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    ENTER_INIT(cuMemRelease);
    LOCK();
    vmm_alloc *a = vmm_of(handle);
    if (a) {
        close(a->fd);
        a->fd = -1;
        if (!a->imported)
            g_live_bytes -= a->size;
    }
    UNLOCK();
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Whole allocations only (offset 0, size = the allocation's), inside a
 * reservation, over nothing already mapped. */
FC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags)
{
    ENTER_INIT(cuMemMap);
    uintptr_t at = (uintptr_t)ptr;
    LOCK();
    vmm_alloc *a = vmm_of(handle);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (a && at && at % FC_VMM_GRANULARITY == 0 && offset == 0 && size == a->size && !flags && resv_holds(at, size) &&
        !a_overlaps(at, size)) {
        struct alloc *m = malloc(sizeof *m);
        if (!m) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else if (mmap((void *)at, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, 0) == MAP_FAILED) {
            free(m);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *m = (struct alloc){at, size, size, atomic_fetch_add(&g_next_buffer_id, 1), A_VMM, 0, 0,
                                (CUcontext)&g_primary};
            if (a_add(m) == 0) {
                rc = CUDA_SUCCESS;
            } else {
                mmap((void *)at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
                free(m);
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
    }
    UNLOCK();
    return rc;
}

/* Whole mappings only (one or several end to end); the range goes back to
 * being reserved. */
FC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    ENTER_INIT(cuMemUnmap);
    if (!ptr || !size || ptr % FC_VMM_GRANULARITY || size % FC_VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    size_t n;
    long i = vmm_tiles((uintptr_t)ptr, size, &n);
    if (i >= 0 && mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                       -1, 0) != MAP_FAILED) {
        for (size_t k = 0; k < n; k++)
            free(a_items[(size_t)i + k]);
        memmove(a_items + i, a_items + (size_t)i + n, (a_n - (size_t)i - n) * sizeof *a_items);
        a_n -= n;
        rc = CUDA_SUCCESS;
    }
    UNLOCK();
    return rc;
}

/* A range of whole mappings end to end, as the driver documents. */
FC_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    ENTER_INIT(cuMemSetAccess);
    if (!ptr || !size || !desc || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        desc->location.id != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot;
    switch (desc->flags) {
    case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot = PROT_NONE; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READ: prot = PROT_READ; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot = PROT_READ | PROT_WRITE; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    size_t n;
    long i = vmm_tiles((uintptr_t)ptr, size, &n);
    if (i >= 0 && mprotect((void *)(uintptr_t)ptr, size, prot) == 0) {
        for (size_t k = 0; k < n; k++)
            a_items[(size_t)i + k]->prot = prot;
        rc = CUDA_SUCCESS;
    }
    UNLOCK();
    return rc;
}

/* A file descriptor (a dup of the allocation's memfd; the caller closes
 * it), for handles created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
 * requested. */
FC_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                CUmemAllocationHandleType handleType, unsigned long long flags)
{
    ENTER_INIT(cuMemExportToShareableHandle);
    if (!shareableHandle || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    vmm_alloc *a = vmm_of(handle);
    if (a && (a->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        int fd = dup(a->fd);
        if (fd >= 0) {
            *(int *)shareableHandle = fd;
            rc = CUDA_SUCCESS;
        } else {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    UNLOCK();
    return rc;
}

/* Is fd one of this library's allocation memfds? Its size in *size. */
static int vmm_fd_size(intptr_t fd, size_t *size)
{
    struct stat st;
    char link[64], target[64];
    if (fd < 0 || fd > INT_MAX || fstat((int)fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (size_t)st.st_size % FC_VMM_GRANULARITY)
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", (int)fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        return 0;
    target[n] = '\0';
    if (strncmp(target, "/memfd:" FC_VMM_FD_NAME, strlen("/memfd:" FC_VMM_FD_NAME)) != 0)
        return 0;
    *size = (size_t)st.st_size;
    return 1;
}

/* A new handle on the same memory (its own dup of the fd): mapping it shows
 * the same bytes. Not counted as device memory again. */
FC_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    ENTER_INIT(cuMemImportFromShareableHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t size;
    if (!vmm_fd_size((intptr_t)osHandle, &size))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    LOCK();
    int slot = vmm_free_slot();
    int fd = slot < 0 ? -1 : fcntl((int)(intptr_t)osHandle, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0) {
        g_vmm[slot] = (vmm_alloc){fd, size, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1};
        *handle = VMM_TAG | (CUmemGenericAllocationHandle)(slot + 1);
        rc = CUDA_SUCCESS;
    }
    UNLOCK();
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Copies and sets (checked against live allocations, device or pinned)     */
/* ------------------------------------------------------------------------ */

/* Is [p, p + n) memory a copy may read (write: and write)? One allocation,
 * or VMM mappings end to end (a pool's block spans several pages), each
 * with access set; a read-only mapping refuses writes. */
static int range_ok(uintptr_t p, size_t n, int write)
{
    LOCK();
    struct alloc *a = a_containing(p);
    int ok = 0;
    if (a && a->kind != A_VMM) {
        ok = n <= a->size - (p - a->base);
    } else if (a) {
        size_t i = a_lower(a->base), left = n;
        uintptr_t at = p;
        while (i < a_n && (a = a_items[i])->kind == A_VMM && a->base <= at && a->prot &&
               (!write || (a->prot & PROT_WRITE))) {
            size_t room = a->size - (at - a->base);
            if (left <= room) {
                ok = 1;
                break;
            }
            left -= room;
            at = a->base + a->size;
            if (++i < a_n && a_items[i]->base != at)
                break;
        }
    }
    UNLOCK();
    return ok;
}

static CUresult copy_htod(uintptr_t dst, const void *src, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!src || !range_ok(dst, n, 1))
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)dst, src, n);
    return CUDA_SUCCESS;
}

static CUresult copy_dtoh(void *dst, uintptr_t src, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!dst || !range_ok(src, n, 0))
        return CUDA_ERROR_INVALID_VALUE;
    memmove(dst, (const void *)src, n);
    return CUDA_SUCCESS;
}

static CUresult copy_dtod(uintptr_t dst, uintptr_t src, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!range_ok(dst, n, 1) || !range_ok(src, n, 0))
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)dst, (const void *)src, n);
    return CUDA_SUCCESS;
}

static CUresult set_d8(uintptr_t dst, unsigned char v, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!range_ok(dst, n, 1))
        return CUDA_ERROR_INVALID_VALUE;
    memset((void *)dst, v, n);
    return CUDA_SUCCESS;
}

static CUresult set_d32(uintptr_t dst, unsigned int v, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (dst % 4 != 0 || n > SIZE_MAX / 4 || !range_ok(dst, n * 4, 1))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int *d = (unsigned int *)dst;
    for (size_t i = 0; i < n; i++)
        d[i] = v;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    ENTER_INIT(cuMemcpyHtoD);
    return copy_htod(dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyHtoD_v2);
    return copy_htod((uintptr_t)dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyHtoD_v2_ptds);
    return copy_htod((uintptr_t)dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    ENTER_INIT(cuMemcpyDtoH);
    return copy_dtoh(dstHost, srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoH_v2);
    return copy_dtoh(dstHost, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoH_v2_ptds);
    return copy_dtoh(dstHost, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    ENTER_INIT(cuMemcpyDtoD);
    return copy_dtod(dstDevice, srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoD_v2);
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoD_v2_ptds);
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
    ENTER_INIT(cuMemsetD8);
    return set_d8(dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    ENTER_INIT(cuMemsetD8_v2);
    return set_d8((uintptr_t)dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    ENTER_INIT(cuMemsetD8_v2_ptds);
    return set_d8((uintptr_t)dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N)
{
    ENTER_INIT(cuMemsetD32);
    return set_d32(dstDevice, ui, N);
}

FC_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    ENTER_INIT(cuMemsetD32_v2);
    return set_d32((uintptr_t)dstDevice, ui, N);
}

FC_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    ENTER_INIT(cuMemsetD32_v2_ptds);
    return set_d32((uintptr_t)dstDevice, ui, N);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                  */
/* ------------------------------------------------------------------------ */

static CUresult stream_create(CUstream *ph, unsigned int flags, int priority)
{
    if (!ph || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    /* The H200's range: 0 (lowest) to -5 (highest); others are clamped. */
    if (priority > 0)
        priority = 0;
    if (priority < -5)
        priority = -5;
    struct ctx *c = current_ctx();
    struct stream *s = malloc(sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *s = (struct stream){MAGIC_STREAM, flags, priority, CU_STREAM_CAPTURE_STATUS_NONE, c ? c : &g_primary};
    LOCK();
    int rc = h_add(s);
    UNLOCK();
    if (rc != 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream h)
{
    LOCK();
    struct stream *s = h_get(h, MAGIC_STREAM);
    if (s)
        h_del(s);
    UNLOCK();
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    free(s);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    ENTER_INIT(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

FC_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    ENTER_INIT(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

FC_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
    ENTER_INIT(cuStreamDestroy);
    return stream_destroy(hStream);
}

FC_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    ENTER_INIT(cuStreamDestroy_v2);
    return stream_destroy(hStream);
}

/* Everything already ran: synchronizing and querying only validate. */
FC_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    ENTER_INIT(cuStreamSynchronize);
    return stream_ok(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    ENTER_INIT(cuStreamSynchronize_ptsz);
    return stream_ok(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    ENTER_INIT(cuStreamQuery);
    return stream_ok(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    ENTER_INIT(cuStreamQuery_ptsz);
    return stream_ok(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_is_capturing(CUstream h, CUstreamCaptureStatus *status)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    int *slot = capture_slot_locked(h);
    if (slot)
        *status = (CUstreamCaptureStatus)*slot;
    UNLOCK();
    return slot ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    ENTER_INIT(cuStreamIsCapturing);
    return stream_is_capturing(hStream, captureStatus);
}

FC_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    ENTER_INIT(cuStreamIsCapturing_ptsz);
    return stream_is_capturing(hStream, captureStatus);
}

/* Capture only marks the stream (nothing is recorded into a graph): begin
 * on a stream already capturing is CUDA_ERROR_ILLEGAL_STATE, end on one
 * that is not CUDA_ERROR_ILLEGAL_STATE; end of an invalidated capture gives
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and ends it. The graph end returns
 * is a stand-in value, not a graph. */
static CUresult begin_capture(CUstream s)
{
    LOCK();
    int *slot = capture_slot_locked(s);
    CUresult r = !slot ? CUDA_ERROR_INVALID_HANDLE
                 : *slot != CU_STREAM_CAPTURE_STATUS_NONE ? CUDA_ERROR_ILLEGAL_STATE
                                                          : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        *slot = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    UNLOCK();
    return r;
}

static CUresult end_capture(CUstream s, CUgraph *graph)
{
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    int *slot = capture_slot_locked(s);
    CUresult r = !slot ? CUDA_ERROR_INVALID_HANDLE
                 : *slot == CU_STREAM_CAPTURE_STATUS_NONE        ? CUDA_ERROR_ILLEGAL_STATE
                 : *slot == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                                 : CUDA_SUCCESS;
    if (slot && *slot != CU_STREAM_CAPTURE_STATUS_NONE)
        *slot = CU_STREAM_CAPTURE_STATUS_NONE;
    UNLOCK();
    *graph = r == CUDA_SUCCESS ? (CUgraph)(uintptr_t)0x3000 : NULL;
    return r;
}

FC_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    ENTER_INIT(cuStreamBeginCapture);
    return begin_capture(hStream);
}

FC_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    ENTER_INIT(cuStreamBeginCapture_ptsz);
    return begin_capture(hStream);
}

FC_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    ENTER_INIT(cuStreamBeginCapture_v2);
    (void)mode;
    return begin_capture(hStream);
}

FC_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    ENTER_INIT(cuStreamBeginCapture_v2_ptsz);
    (void)mode;
    return begin_capture(hStream);
}

FC_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                               const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                               CUstreamCaptureMode mode)
{
    ENTER_INIT(cuStreamBeginCaptureToGraph);
    (void)hGraph, (void)dependencies, (void)dependencyData, (void)numDependencies, (void)mode;
    return begin_capture(hStream);
}

FC_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                    const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                    CUstreamCaptureMode mode)
{
    ENTER_INIT(cuStreamBeginCaptureToGraph_ptsz);
    (void)hGraph, (void)dependencies, (void)dependencyData, (void)numDependencies, (void)mode;
    return begin_capture(hStream);
}

FC_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    ENTER_INIT(cuStreamEndCapture);
    return end_capture(hStream, phGraph);
}

FC_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    ENTER_INIT(cuStreamEndCapture_ptsz);
    return end_capture(hStream, phGraph);
}

FC_EXPORT int fakecuda_set_capturing(CUstream stream, int capturing)
{
    if (capturing != CU_STREAM_CAPTURE_STATUS_NONE && capturing != CU_STREAM_CAPTURE_STATUS_ACTIVE &&
        capturing != CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return -1;
    LOCK();
    int *slot = capture_slot_locked(stream);
    if (slot)
        *slot = capturing;
    UNLOCK();
    return slot ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Events: work runs synchronously here, so a recorded event has completed. */
/* An event is a heap object in the table of live handles, checked there    */
/* before use, so a destroyed event is refused without being touched.       */
/* ------------------------------------------------------------------------ */

typedef struct fc_event {
    uint32_t magic;
    int recorded;
    struct ctx *ctx; /* current at creation, else the primary */
} fc_event;

FC_EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
    ENTER_INIT(cuEventCreate);
    if (!event || (flags & ~0xfu))
        return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c = current_ctx();
    fc_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = MAGIC_EVENT;
    e->ctx = c ? c : &g_primary;
    LOCK();
    int rc = h_add(e);
    UNLOCK();
    if (rc != 0) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *event = (CUevent)e;
    return CUDA_SUCCESS;
}

static int event_ok(CUevent event)
{
    LOCK();
    int ok = h_get(event, MAGIC_EVENT) != NULL;
    UNLOCK();
    return ok;
}

FC_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream)
{
    ENTER_INIT(cuEventRecord);
    LOCK();
    fc_event *e = h_get(event, MAGIC_EVENT);
    CUresult rc = e && stream_ok_locked(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        e->recorded = 1;
    UNLOCK();
    return rc;
}

FC_EXPORT CUresult cuEventQuery(CUevent event)
{
    ENTER_INIT(cuEventQuery);
    return event_ok(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuEventSynchronize(CUevent event)
{
    ENTER_INIT(cuEventSynchronize);
    return event_ok(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_EXPORT CUresult cuEventDestroy_v2(CUevent event)
{
    ENTER_INIT(cuEventDestroy_v2);
    LOCK();
    fc_event *e = h_get(event, MAGIC_EVENT);
    if (e)
        h_del(e);
    UNLOCK();
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    free(e);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Primary context teardown (cuDevicePrimaryCtxReset, last release)         */
/* ------------------------------------------------------------------------ */

/* What dies with the primary context. Allocations, streams and events
 * record the context current when they were made (the primary when none
 * was), so those of a context made by cuCtxCreate survive. Destroyed:
 *  - device memory (cuMemAlloc*, async and pool allocations) and pinned
 *    host memory (cuMemHostAlloc, cuMemAllocHost*) of the primary context:
 *    unmapped, so a later touch of such a pointer faults, and frees, copies
 *    and queries on it answer as for an unknown pointer; IPC opens of that
 *    memory are closed with it;
 *  - all virtual memory state: every mapping, reservation (unmapped) and
 *    cuMemCreate/imported handle (closed). VMM state carries no context in
 *    the fake and its memory already counts as the primary context's (see
 *    the pointer attributes), so all of it goes;
 *  - streams and events of the primary context (later use:
 *    CUDA_ERROR_INVALID_HANDLE), and any capture status of the NULL,
 *    legacy and per-thread streams.
 * Kept (deviation: the driver unloads a context's modules): modules,
 * libraries and their functions and kernels. Caller holds the lock. */
static void primary_teardown_locked(void)
{
    CUcontext primary = (CUcontext)&g_primary;
    g_primary_active = 0;

    /* Allocations and mappings; survivors keep their order. */
    size_t kept = 0;
    for (size_t i = 0; i < a_n; i++) {
        struct alloc *a = a_items[i];
        if (a->kind != A_VMM && a->ctx != primary) {
            a_items[kept++] = a;
            continue;
        }
        if (a->kind == A_HOST) {
            g_live_host--;
        } else if (a->kind == A_DEVICE) {
            g_live_dev--;
            g_live_bytes -= a->size;
            struct ipc_open *o = ipc_find(a->base, &a->id);
            if (o) {
                g_ipc_live -= o->refs;
                *o = g_ipc[--g_ipc_n];
            }
        }
        if (a->kind != A_VMM) /* mappings go with their reservations below */
            munmap((void *)a->base, a->maplen);
        free(a);
    }
    a_n = kept;

    for (size_t i = 0; i < g_resv_n; i++)
        munmap((void *)g_resv[i].base, g_resv[i].size);
    g_resv_n = 0;
    for (int i = 0; g_vmm_init && i < FC_VMM_HANDLES; i++) {
        vmm_alloc *v = &g_vmm[i];
        if (v->fd < 0)
            continue;
        close(v->fd);
        v->fd = -1;
        if (!v->imported)
            g_live_bytes -= v->size;
    }

    /* Streams and events: h_del shifts the table, so look again at i. */
    for (size_t i = 0; i < h_n;) {
        struct hdr *h = h_items[i];
        if ((h->magic == MAGIC_STREAM && ((struct stream *)h)->ctx == &g_primary) ||
            (h->magic == MAGIC_EVENT && ((fc_event *)h)->ctx == &g_primary)) {
            h_del(h);
            free(h);
        } else {
            i++;
        }
    }
    memset(g_capture_builtin, 0, sizeof g_capture_builtin);
}

static CUresult primary_reset(CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    primary_teardown_locked();
    UNLOCK();
    return CUDA_SUCCESS;
}

/* Resetting keeps the retain count: the context stays inactive until the
 * next cuDevicePrimaryCtxRetain. Threads that had it current keep it
 * current; calls made meanwhile behave as with an active context (memory,
 * module and launch calls need no context here anyway; deviation: the
 * driver may answer CUDA_ERROR_CONTEXT_IS_DESTROYED), and what they create
 * belongs to the primary context. */
FC_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxReset);
    return primary_reset(dev);
}

FC_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxReset_v2);
    return primary_reset(dev);
}

/* Flags are always 0: cuDevicePrimaryCtxSetFlags is not modelled. */
FC_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    ENTER_INIT(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    *active = g_primary_refs > 0 && g_primary_active;
    UNLOCK();
    *flags = 0;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Test-side memory helpers                                                 */
/* ------------------------------------------------------------------------ */

FC_EXPORT unsigned long long fakecuda_live_device_allocations(void)
{
    LOCK();
    unsigned long long n = g_live_dev;
    UNLOCK();
    return n;
}

FC_EXPORT size_t fakecuda_live_device_bytes(void)
{
    LOCK();
    size_t n = g_live_bytes;
    UNLOCK();
    return n;
}

FC_EXPORT unsigned long long fakecuda_live_host_allocations(void)
{
    LOCK();
    unsigned long long n = g_live_host;
    UNLOCK();
    return n;
}

FC_EXPORT void fakecuda_set_total_memory(size_t bytes)
{
    LOCK();
    /* Never below what is live, so free never goes negative. */
    g_total_mem = bytes < g_live_bytes ? g_live_bytes : bytes;
    UNLOCK();
}

/* ------------------------------------------------------------------------ */
/* cuGetProcAddress                                                         */
/* ------------------------------------------------------------------------ */

/* {base name, exported name, CUDA version that introduced the form,
 * per-thread-default-stream form?}, versions as cudaTypedefs.h has them. */
struct proc {
    const char *base;
    const char *exported;
    int version;
    int per_thread;
    void *fn;
};

#define P_(base, exported, version, pt) {#base, #exported, version, pt, (void *)&exported},
static const struct proc fc_procs[] = {
    P_(cuInit, cuInit, 2000, 0)
    P_(cuDriverGetVersion, cuDriverGetVersion, 2020, 0)
    P_(cuDeviceGet, cuDeviceGet, 2000, 0)
    P_(cuDeviceGetCount, cuDeviceGetCount, 2000, 0)
    P_(cuDeviceGetName, cuDeviceGetName, 2000, 0)
    P_(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0)
    P_(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, 0)
    P_(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)
    P_(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0)
    P_(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000, 0)
    P_(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0)
    P_(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000, 0)
    P_(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, 0)
    P_(cuCtxCreate, cuCtxCreate_v4, 12050, 0)
    P_(cuCtxDestroy, cuCtxDestroy, 2000, 0)
    P_(cuCtxDestroy, cuCtxDestroy_v2, 4000, 0)
    P_(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0)
    P_(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0)
    P_(cuCtxGetDevice, cuCtxGetDevice, 2000, 0)
    P_(cuCtxGetDevice, cuCtxGetDevice_v2, 13000, 0)
    P_(cuCtxSynchronize, cuCtxSynchronize, 2000, 0)
    P_(cuCtxSynchronize, cuCtxSynchronize_v2, 13000, 0)
    P_(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000, 0)
    P_(cuGetErrorName, cuGetErrorName, 6000, 0)
    P_(cuGetErrorString, cuGetErrorString, 6000, 0)
    P_(cuGetProcAddress, cuGetProcAddress, 11030, 0)
    P_(cuGetProcAddress, cuGetProcAddress_v2, 12000, 0)
    P_(cuModuleLoad, cuModuleLoad, 2000, 0)
    P_(cuModuleLoadData, cuModuleLoadData, 2000, 0)
    P_(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010, 0)
    P_(cuModuleLoadFatBinary, cuModuleLoadFatBinary, 2000, 0)
    P_(cuModuleGetFunction, cuModuleGetFunction, 2000, 0)
    P_(cuModuleUnload, cuModuleUnload, 2000, 0)
    P_(cuLibraryLoadData, cuLibraryLoadData, 12000, 0)
    P_(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 12000, 0)
    P_(cuLibraryGetKernel, cuLibraryGetKernel, 12000, 0)
    P_(cuLibraryUnload, cuLibraryUnload, 12000, 0)
    P_(cuKernelGetFunction, cuKernelGetFunction, 12000, 0)
    P_(cuFuncGetName, cuFuncGetName, 12030, 0)
    P_(cuKernelGetName, cuKernelGetName, 12030, 0)
    P_(cuFuncGetAttribute, cuFuncGetAttribute, 2020, 0)
    P_(cuKernelGetAttribute, cuKernelGetAttribute, 12000, 0)
    P_(cuFuncGetParamInfo, cuFuncGetParamInfo, 12040, 0)
    P_(cuKernelGetParamInfo, cuKernelGetParamInfo, 12040, 0)
    P_(cuLaunchKernel, cuLaunchKernel, 4000, 0)
    P_(cuLaunchKernel, cuLaunchKernel_ptsz, 7000, 1)
    P_(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0)
    P_(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060, 1)
    P_(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0)
    P_(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000, 1)
    P_(cuGraphLaunch, cuGraphLaunch, 10000, 0)
    P_(cuGraphLaunch, cuGraphLaunch_ptsz, 10000, 1)
    P_(cuMemAlloc, cuMemAlloc, 2000, 0)
    P_(cuMemAlloc, cuMemAlloc_v2, 3020, 0)
    P_(cuMemAllocPitch, cuMemAllocPitch, 2000, 0)
    P_(cuMemAllocPitch, cuMemAllocPitch_v2, 3020, 0)
    P_(cuMemFree, cuMemFree, 2000, 0)
    P_(cuMemFree, cuMemFree_v2, 3020, 0)
    P_(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)
    P_(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020, 1)
    P_(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)
    P_(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020, 1)
    P_(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)
    P_(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020, 1)
    P_(cuMemGetInfo, cuMemGetInfo, 2000, 0)
    P_(cuMemGetInfo, cuMemGetInfo_v2, 3020, 0)
    P_(cuMemGetAddressRange, cuMemGetAddressRange, 2000, 0)
    P_(cuMemGetAddressRange, cuMemGetAddressRange_v2, 3020, 0)
    P_(cuPointerGetAttribute, cuPointerGetAttribute, 4000, 0)
    P_(cuPointerGetAttributes, cuPointerGetAttributes, 7000, 0)
    P_(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, 0)
    P_(cuIpcOpenMemHandle, cuIpcOpenMemHandle, 4010, 0)
    P_(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2, 11000, 0)
    P_(cuIpcCloseMemHandle, cuIpcCloseMemHandle, 4010, 0)
    P_(cuMemHostAlloc, cuMemHostAlloc, 2020, 0)
    P_(cuMemAllocHost, cuMemAllocHost, 2000, 0)
    P_(cuMemAllocHost, cuMemAllocHost_v2, 3020, 0)
    P_(cuMemFreeHost, cuMemFreeHost, 2000, 0)
    P_(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer, 2020, 0)
    P_(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, 3020, 0)
    P_(cuMemHostGetFlags, cuMemHostGetFlags, 2030, 0)
    P_(cuMemcpyHtoD, cuMemcpyHtoD, 2000, 0)
    P_(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020, 0)
    P_(cuMemcpyHtoD, cuMemcpyHtoD_v2_ptds, 7000, 1)
    P_(cuMemcpyDtoH, cuMemcpyDtoH, 2000, 0)
    P_(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020, 0)
    P_(cuMemcpyDtoH, cuMemcpyDtoH_v2_ptds, 7000, 1)
    P_(cuMemcpyDtoD, cuMemcpyDtoD, 2000, 0)
    P_(cuMemcpyDtoD, cuMemcpyDtoD_v2, 3020, 0)
    P_(cuMemcpyDtoD, cuMemcpyDtoD_v2_ptds, 7000, 1)
    P_(cuMemsetD8, cuMemsetD8, 2000, 0)
    P_(cuMemsetD8, cuMemsetD8_v2, 3020, 0)
    P_(cuMemsetD8, cuMemsetD8_v2_ptds, 7000, 1)
    P_(cuMemsetD32, cuMemsetD32, 2000, 0)
    P_(cuMemsetD32, cuMemsetD32_v2, 3020, 0)
    P_(cuMemsetD32, cuMemsetD32_v2_ptds, 7000, 1)
    P_(cuStreamCreate, cuStreamCreate, 2000, 0)
    P_(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050, 0)
    P_(cuStreamDestroy, cuStreamDestroy, 2000, 0)
    P_(cuStreamDestroy, cuStreamDestroy_v2, 4000, 0)
    P_(cuStreamSynchronize, cuStreamSynchronize, 2000, 0)
    P_(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000, 1)
    P_(cuStreamQuery, cuStreamQuery, 2000, 0)
    P_(cuStreamQuery, cuStreamQuery_ptsz, 7000, 1)
    P_(cuStreamIsCapturing, cuStreamIsCapturing, 10000, 0)
    P_(cuStreamIsCapturing, cuStreamIsCapturing_ptsz, 10000, 1)
    P_(cuStreamBeginCapture, cuStreamBeginCapture, 10000, 0)
    P_(cuStreamBeginCapture, cuStreamBeginCapture_ptsz, 10000, 1)
    P_(cuStreamBeginCapture, cuStreamBeginCapture_v2, 10010, 0)
    P_(cuStreamBeginCapture, cuStreamBeginCapture_v2_ptsz, 10010, 1)
    P_(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, 0)
    P_(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph_ptsz, 12030, 1)
    P_(cuStreamEndCapture, cuStreamEndCapture, 10000, 0)
    P_(cuStreamEndCapture, cuStreamEndCapture_ptsz, 10000, 1)
    P_(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020, 0)
    P_(cuMemAddressReserve, cuMemAddressReserve, 10020, 0)
    P_(cuMemAddressFree, cuMemAddressFree, 10020, 0)
    P_(cuMemCreate, cuMemCreate, 10020, 0)
    P_(cuMemRelease, cuMemRelease, 10020, 0)
    P_(cuMemMap, cuMemMap, 10020, 0)
    P_(cuMemUnmap, cuMemUnmap, 10020, 0)
    P_(cuMemSetAccess, cuMemSetAccess, 10020, 0)
    P_(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 10020, 0)
    P_(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020, 0)
    P_(cuEventCreate, cuEventCreate, 2000, 0)
    P_(cuEventRecord, cuEventRecord, 2000, 0)
    P_(cuEventQuery, cuEventQuery, 2000, 0)
    P_(cuEventSynchronize, cuEventSynchronize, 2000, 0)
    P_(cuEventDestroy, cuEventDestroy_v2, 4000, 0)
};
#undef P_

enum { PROC_FOUND, PROC_UNKNOWN, PROC_TOO_OLD, PROC_BAD_ARGS };

static int proc_lookup(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (pfn)
        *pfn = NULL;
    if (!symbol || !pfn || version > FAKECUDA_DRIVER_VERSION)
        return PROC_BAD_ARGS;
    const struct proc *best = NULL, *best_pt = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof fc_procs / sizeof *fc_procs; i++) {
        const struct proc *p = &fc_procs[i];
        if (strcmp(p->base, symbol) != 0)
            continue;
        known = 1;
        if (p->version > version)
            continue;
        const struct proc **slot = p->per_thread ? &best_pt : &best;
        if (!*slot || p->version > (*slot)->version)
            *slot = p;
    }
    /* Per-thread form when asked for and there is one; else the legacy. */
    const struct proc *pick = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best_pt ? best_pt : best;
    if (!known)
        return PROC_UNKNOWN;
    if (!pick)
        return PROC_TOO_OLD;
    *pfn = pick->fn;
    return PROC_FOUND;
}

FC_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    ENTER(cuGetProcAddress_v2);
    switch (proc_lookup(symbol, pfn, cudaVersion, flags)) {
    case PROC_FOUND:
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    case PROC_UNKNOWN:
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_SUCCESS;
    case PROC_TOO_OLD:
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The 11.x ABI: a miss is CUDA_ERROR_NOT_FOUND (there is no status). */
FC_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    ENTER(cuGetProcAddress);
    switch (proc_lookup(symbol, pfn, cudaVersion, flags)) {
    case PROC_FOUND:
        return CUDA_SUCCESS;
    case PROC_UNKNOWN:
    case PROC_TOO_OLD:
        return CUDA_ERROR_NOT_FOUND;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}
