/* fakecuda, the stand-in libcuda.so.1: exported names, call counts, fault
 * injection, global state, live handles, contexts and streams bookkeeping;
 * init, device, context; errors. fake_internal.h: what the files share. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Exported names, call counts, fault injection                             */
/* ------------------------------------------------------------------------ */

static const char *const fc_names[FC_COUNT] = {
#define FC_NAME_(name) #name,
    FC_API(FC_NAME_)
#undef FC_NAME_
};

FC_HIDDEN _Atomic unsigned long long fc_calls[FC_COUNT];

/* Injected failures: left > 0 means the next calls return result. The
 * global flag keeps the common path to one relaxed load. */
static struct {
    atomic_uint left;
    atomic_int result;
} fc_inject[FC_COUNT];
FC_HIDDEN atomic_int fc_inject_any;

FC_HIDDEN CUresult inject_take(int id)
{
    unsigned int left = atomic_load(&fc_inject[id].left);
    while (left > 0) {
        if (atomic_compare_exchange_weak(&fc_inject[id].left, &left, left - 1))
            return (CUresult)atomic_load(&fc_inject[id].result);
    }
    return CUDA_SUCCESS;
}

FC_HIDDEN atomic_int g_inited;

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
FC_HIDDEN pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* Held across a fork, so that a child never inherits it locked by a thread
 * it does not have (engine_fork: a child in a few hundred hung in
 * cuDeviceTotalMem_v2, the lock taken by a thread of drk's at the fork). */
static void fork_prepare(void) { LOCK(); }
static void fork_release(void) { UNLOCK(); }

FC_HIDDEN size_t g_total_mem = (size_t)1 << 30;
FC_HIDDEN size_t g_live_bytes;
FC_HIDDEN unsigned long long g_live_dev, g_live_host;
FC_HIDDEN atomic_ullong g_next_buffer_id = 1;

/* ------------------------------------------------------------------------ */
/* Live handles: a sorted array of object addresses                         */
/* ------------------------------------------------------------------------ */

FC_HIDDEN void **h_items;
FC_HIDDEN size_t h_n;
static size_t h_cap;

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

FC_HIDDEN int h_add(void *p)
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

FC_HIDDEN CUresult h_publish(void *p)
{
    LOCK();
    int rc = h_add(p);
    UNLOCK();
    if (rc == 0)
        return CUDA_SUCCESS;
    free(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The handle `h` of kind `magic` taken off the list and freed: 1, or 0
 * when it is no such handle. */
FC_HIDDEN int h_retire(const void *h, uint32_t magic)
{
    LOCK();
    void *p = h_get(h, magic);
    if (p)
        h_del(p);
    UNLOCK();
    free(p);
    return p != NULL;
}

FC_HIDDEN void h_del(void *p)
{
    size_t i = sorted_lower(h_items, h_n, (uintptr_t)p);
    if (i < h_n && h_items[i] == p) {
        memmove(h_items + i, h_items + i + 1, (h_n - i - 1) * sizeof *h_items);
        h_n--;
    }
    ((struct hdr *)p)->magic = 0;
}

/* Caller holds the lock. */
FC_HIDDEN void *h_get(const void *p, uint32_t magic)
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

FC_HIDDEN struct ctx g_primary = {.magic = MAGIC_CTX, .primary = 1}; /* limits set by cuInit */
FC_HIDDEN unsigned long long g_launches_other;
static unsigned long long g_ctx_serial; /* the last serial handed out, under the lock */
FC_HIDDEN unsigned int g_primary_refs;
/* Active: retained (refs > 0) and not reset or released to 0 since the
 * last retain. The handle stays valid (and current where it was) while
 * inactive; the next retain makes it active again under the same value. */
FC_HIDDEN int g_primary_active;
static __thread struct ctx *t_current;
/* The thread's context stack below t_current (cuCtxPushCurrent_v2),
 * innermost last. */
#define FC_CTX_STACK 16
static __thread struct ctx *t_below[FC_CTX_STACK];
static __thread unsigned int t_depth;

/* The top of the stack goes; the one below becomes current. */
static struct ctx *ctx_pop(void)
{
    struct ctx *top = t_current;
    t_current = t_depth ? t_below[--t_depth] : NULL;
    return top;
}

/* Capture status of the NULL, legacy and per-thread streams. */
FC_HIDDEN int g_capture_builtin[3];

/* Where stream s keeps its capture status, or NULL for an invalid stream.
 * Caller holds the lock. */
FC_HIDDEN int *capture_slot_locked(CUstream s)
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
FC_HIDDEN int stream_ok_locked(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || h_get(s, MAGIC_STREAM);
}

FC_HIDDEN int stream_ok(CUstream s)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return 1;
    LOCK();
    int ok = h_get(s, MAGIC_STREAM) != NULL;
    UNLOCK();
    return ok;
}

/* The context current on this thread if it is still alive, else NULL. */
FC_HIDDEN struct ctx *current_ctx(void)
{
    struct ctx *c = t_current;
    if (c == &g_primary || !c)
        return c;
    LOCK();
    c = h_get(c, MAGIC_CTX);
    UNLOCK();
    return c;
}

/* Same; caller holds the lock. */
FC_HIDDEN struct ctx *current_ctx_locked(void)
{
    struct ctx *c = t_current;
    return c == &g_primary || !c ? c : h_get(c, MAGIC_CTX);
}

/* The driver's defaults on sm_90 for the three that programs set; 0 for
 * the others (deviation: the driver has its own for some). */
FC_HIDDEN void ctx_limits_default(struct ctx *c)
{
    memset(c->limits, 0, sizeof c->limits);
    c->limits[CU_LIMIT_STACK_SIZE] = 1024;
    c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576;
    c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608;
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
        ctx_limits_default(&g_primary);
        if (pthread_atfork(fork_prepare, fork_release, fork_release) != 0)
            fprintf(stderr, "fakecuda: cannot register fork handlers; a child may find the stand-in's lock held\n");
        /* A device of another size for a whole program (FAKECUDA_TOTAL_MIB):
         * the allocation benchmarks' real sizes need an H200's 140 GB. */
        const char *mib = getenv("FAKECUDA_TOTAL_MIB");
        char *end;
        unsigned long long m = mib ? strtoull(mib, &end, 10) : 0;
        if (mib && *mib && !*end && m > 0 && m < (1ull << 34))
            g_total_mem = (size_t)m << 20;
        else if (mib && *mib)
            fprintf(stderr, "fakecuda: FAKECUDA_TOTAL_MIB=%s: not a size in MiB; the device stays %zu MiB\n", mib,
                    g_total_mem >> 20);
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
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = FC_SHARED_PER_BLOCK; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = FC_MAX_DYN_SHARED; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = FC_SHARED_PER_SM; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = FC_REGS_PER_SM; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = FC_REGS_PER_SM; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: v = FC_RESERVED_SHARED; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = FC_SM_COUNT; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = FC_MAX_THREADS_PER_SM; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = FC_MAX_BLOCKS_PER_SM; break;
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
    struct ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->magic = MAGIC_CTX;
    ctx_limits_default(c);
    LOCK();
    c->serial = ++g_ctx_serial;
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
        ctx_pop(); /* a current context is popped as it goes, as the driver does */
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
        ctx_pop(); /* NULL pops the stack's top (none: nothing happens) */
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

FC_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    ENTER_INIT(cuCtxPushCurrent_v2);
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct ctx *c = h_get(ctx, MAGIC_CTX);
    UNLOCK();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (t_current) {
        if (t_depth == FC_CTX_STACK)
            return CUDA_ERROR_OUT_OF_MEMORY; /* deviation: the driver's stack is deeper */
        t_below[t_depth++] = t_current;
    }
    t_current = c;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    ENTER_INIT(cuCtxPopCurrent_v2);
    if (!t_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct ctx *top = ctx_pop();
    if (pctx)
        *pctx = (CUcontext)top;
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

static _Atomic unsigned long long sync_ns;

FC_EXPORT void fakecuda_set_sync_ns(unsigned long long ns) { atomic_store(&sync_ns, ns); }

void fc_sync_wait(void)
{
    unsigned long long ns = atomic_load(&sync_ns);
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (ns && nanosleep(&ts, &ts) != 0)
        ;
}

FC_EXPORT CUresult cuCtxSynchronize(void)
{
    ENTER_INIT(cuCtxSynchronize);
    if (!current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    fc_sync_wait();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    ENTER_INIT(cuCtxSynchronize_v2);
    CUdevice dev;
    CUresult r = ctx_device(&dev, ctx);
    if (r == CUDA_SUCCESS)
        fc_sync_wait();
    return r;
}

/* A green context: a handle on device 0, nothing more (no streams of its
 * own); what drk does when a program makes one is what tests look at. */
struct green {
    struct hdr h;
};

FC_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
    ENTER_INIT(cuGreenCtxCreate);
    (void)desc;
    if (!phCtx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (flags & ~(unsigned)CU_GREEN_CTX_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    struct green *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->h.magic = MAGIC_GREEN;
    CUresult rc = h_publish(g);
    if (rc != CUDA_SUCCESS)
        return rc;
    *phCtx = (CUgreenCtx)g;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    ENTER_INIT(cuGreenCtxDestroy);
    return h_retire(hCtx, MAGIC_GREEN) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
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

/* Per context, every CUlimit (none is refused as unsupported; deviation:
 * the driver refuses to set the query-only ones). Values are kept as given,
 * not rounded. */
FC_EXPORT CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    ENTER_INIT(cuCtxGetLimit);
    if (!pvalue || (unsigned int)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct ctx *c = current_ctx_locked();
    if (c)
        *pvalue = c->limits[limit];
    UNLOCK();
    return c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    ENTER_INIT(cuCtxSetLimit);
    if ((unsigned int)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct ctx *c = current_ctx_locked();
    if (c)
        c->limits[limit] = value;
    UNLOCK();
    return c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_EXPORT unsigned long long fakecuda_launches_in(CUcontext ctx)
{
    LOCK();
    struct ctx *c = ctx ? h_get(ctx, MAGIC_CTX) : NULL;
    unsigned long long n = ctx ? (c ? c->launches : 0) : g_launches_other;
    UNLOCK();
    return n;
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
