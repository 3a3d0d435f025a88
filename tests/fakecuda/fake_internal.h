/* fakecuda's private header: what the pieces of the stand-in libcuda.so.1
 * share. One file per family of drk's hook list (interpose/hooks.h) and the
 * shared parts:
 *   fake_core.c     exported names, call counts, fault injection, global
 *                   state, live handles, contexts and streams bookkeeping,
 *                   init, device, context, errors
 *   fake_module.c   kernel registry; modules, libraries, functions, kernels
 *   fake_launch.c   kernel launches
 *   fake_graph.c    graph launches, stream capture
 *   fake_memory.c   device memory, pointer queries, IPC, copies and sets
 *   fake_host.c     pinned host memory
 *   fake_vmm.c      virtual memory management
 *   fake_stream.c   streams, events
 *   fake_context.c  primary context teardown
 *   fake_entry.c    cuGetProcAddress
 * See fakecuda.h for what the fake does and where it knowingly differs from
 * the driver.
 *
 * cuda.h is read in its internal mode, which declares every ABI form under
 * its own name (the legacy 32-bit forms under the bare names, _v2, _ptsz,
 * _ptds), so every definition in these files is checked against the
 * driver's own prototype. Exported functions never call each other: a call
 * counts under exactly one name. The library is linked -Bsymbolic, so the
 * addresses that cuGetProcAddress hands out are this library's own, even
 * with drk preloaded and exporting the same names.
 *
 * Include it first, after defining _GNU_SOURCE. */
#ifndef FAKECUDA_FAKE_INTERNAL_H
#define FAKECUDA_FAKE_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include "tests/fakecuda/fakecuda.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FC_EXPORT __attribute__((visibility("default")))
/* Shared between the files, never exported: the library's default
 * visibility would otherwise put these helpers among the driver's names. */
#define FC_HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------------ */
/* Exported names, call counts, fault injection (fake_core.c)               */
/* ------------------------------------------------------------------------ */

#define FC_API(X)                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount)         \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2)          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                   \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset)                 \
    X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxGetState)                \
    X(cuCtxCreate_v4) X(cuCtxDestroy) X(cuCtxDestroy_v2)                       \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice)                    \
    X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)                               \
    X(cuCtxGetDevice_v2) X(cuCtxSynchronize) X(cuCtxSynchronize_v2)            \
    X(cuGetErrorName) X(cuGetErrorString)                                      \
    X(cuGreenCtxCreate) X(cuGreenCtxDestroy)                                   \
    X(cuGetProcAddress) X(cuGetProcAddress_v2)                                 \
    X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleLoadDataEx)                  \
    X(cuModuleLoadFatBinary) X(cuModuleGetFunction) X(cuModuleUnload)          \
    X(cuLibraryLoadData) X(cuLibraryLoadFromFile) X(cuLibraryGetKernel)        \
    X(cuLibraryUnload) X(cuKernelGetFunction) X(cuFuncGetName)                 \
    X(cuKernelGetName) X(cuFuncGetAttribute) X(cuKernelGetAttribute)           \
    X(cuFuncSetAttribute)                                                      \
    X(cuFuncGetParamInfo) X(cuKernelGetParamInfo)                              \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                             \
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
    X(cuMemHostGetFlags) X(cuProfilerStart) X(cuProfilerStop)                  \
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
    X(cuEventDestroy_v2) X(cuEventElapsedTime_v2) X(cuStreamWaitEvent)          \
    X(cuMemcpyDtoDAsync_v2) X(cuMemsetD8Async) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyHtoDAsync_v2) \
    X(cuMemcpyPeer) X(cuMemcpyPeerAsync) X(cuCtxGetLimit) X(cuCtxSetLimit) X(cuFuncLoad)

enum {
#define FC_ID_(name) FC_##name,
    FC_API(FC_ID_)
#undef FC_ID_
    FC_COUNT
};

FC_HIDDEN extern _Atomic unsigned long long fc_calls[FC_COUNT];
/* Set once any failure is injected: the common path is one relaxed load. */
FC_HIDDEN extern atomic_int fc_inject_any;
FC_HIDDEN CUresult inject_take(int id);

static inline CUresult fc_enter(int id)
{
    atomic_fetch_add_explicit(&fc_calls[id], 1, memory_order_relaxed);
    if (__builtin_expect(atomic_load_explicit(&fc_inject_any, memory_order_relaxed), 0))
        return inject_take(id);
    return CUDA_SUCCESS;
}

FC_HIDDEN extern atomic_int g_inited;

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

/* ------------------------------------------------------------------------ */
/* Global state (fake_core.c)                                               */
/* ------------------------------------------------------------------------ */

/* One lock for every table: a test fixture needs correctness, not scale.
 * Kernels run and memory is copied outside it. */
FC_HIDDEN extern pthread_mutex_t g_lock;
/* fakecuda_fail_jit's planted failure (fake_module.c), under the lock. */
FC_HIDDEN extern CUjit_option g_fail_opt;
FC_HIDDEN extern unsigned long long g_fail_val;
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
    MAGIC_GREEN = 0x4e524746u,  /* "FGRN" */
};

#define FC_DEVICE_NAME "fakecuda GPU (drk test stand-in, sm_90)"
#define FC_SM_COUNT 132
#define FC_MAX_THREADS_PER_SM 2048
#define FC_MAX_DYN_SHARED 232448 /* the opt-in per-block maximum of sm_90 */
#define FC_MAX_BLOCKS_PER_SM 32
#define FC_REGS_PER_SM 65536
#define FC_SHARED_PER_SM 233472
#define FC_SHARED_PER_BLOCK 49152 /* without opting in: a function's dynamic maximum */
#define FC_RESERVED_SHARED 1024   /* the driver's own, of every block */
#define FC_DEFAULT_REGS 32
#define FC_PITCH_ALIGN 512

FC_HIDDEN extern size_t g_total_mem;
FC_HIDDEN extern size_t g_live_bytes;
FC_HIDDEN extern unsigned long long g_live_dev, g_live_host;
FC_HIDDEN extern atomic_ullong g_next_buffer_id;

/* ------------------------------------------------------------------------ */
/* Live handles: a sorted array of object addresses (fake_core.c)           */
/* ------------------------------------------------------------------------ */

/* Validation looks the handle up here before touching it, so a stale or
 * foreign pointer is rejected without being dereferenced. Every object
 * starts with its magic; the lookup also checks the type. */
struct hdr {
    uint32_t magic;
};

FC_HIDDEN extern void **h_items;
FC_HIDDEN extern size_t h_n;

FC_HIDDEN int h_add(void *p);
/* h_add under the lock; on failure frees `p` (malloc'd, nothing else
 * pointing at it) and answers CUDA_ERROR_OUT_OF_MEMORY. */
FC_HIDDEN CUresult h_publish(void *p);
FC_HIDDEN void h_del(void *p);
FC_HIDDEN int h_retire(const void *h, uint32_t magic);
/* Caller holds the lock. */
FC_HIDDEN void *h_get(const void *p, uint32_t magic);

/* ------------------------------------------------------------------------ */
/* Contexts and streams (fake_core.c)                                       */
/* ------------------------------------------------------------------------ */

struct ctx {
    uint32_t magic;
    int primary;
    /* Unique among the contexts of the process (the primary's is 0): what a
     * function remembers of its context, so a context made later at a
     * freed one's address does not own the freed one's functions. */
    unsigned long long serial;
    size_t limits[CU_LIMIT_MAX]; /* cuCtxGetLimit/cuCtxSetLimit */
    unsigned long long launches; /* completed kernel launches in it, under the lock */
};

FC_HIDDEN extern struct ctx g_primary;
/* Completed kernel launches in every context but the primary, destroyed
 * ones included. Under the lock. */
FC_HIDDEN extern unsigned long long g_launches_other;
FC_HIDDEN extern unsigned int g_primary_refs;
/* Active: retained (refs > 0) and not reset or released to 0 since the
 * last retain. The handle stays valid (and current where it was) while
 * inactive; the next retain makes it active again under the same value. */
FC_HIDDEN extern int g_primary_active;

struct stream {
    uint32_t magic;
    unsigned int flags;
    int priority;
    int capture;     /* CUstreamCaptureStatus, set by fakecuda_set_capturing */
    struct ctx *ctx; /* current at creation, else the primary */
};

/* Synchronizing waits what fakecuda_set_sync_ns set (fake_core.c). Not
 * under the lock. */
FC_HIDDEN void fc_sync_wait(void);

/* Capture status of the NULL, legacy and per-thread streams. */
FC_HIDDEN extern int g_capture_builtin[3];

/* Where stream s keeps its capture status, or NULL for an invalid stream.
 * Caller holds the lock. */
FC_HIDDEN int *capture_slot_locked(CUstream s);
/* Caller holds the lock. */
FC_HIDDEN int stream_ok_locked(CUstream s);
FC_HIDDEN int stream_ok(CUstream s);
/* The context current on this thread if it is still alive, else NULL. */
FC_HIDDEN struct ctx *current_ctx(void);
/* Same; caller holds the lock. */
FC_HIDDEN struct ctx *current_ctx_locked(void);
/* A fresh context's limits (cuCtxGetLimit's defaults). */
FC_HIDDEN void ctx_limits_default(struct ctx *c);

/* ------------------------------------------------------------------------ */
/* Kernel registry (fake_module.c)                                          */
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
    /* What functions loaded from now on are built with (fakecuda_set_kernel_resources);
     * 0: FC_DEFAULT_REGS registers, no static shared memory. */
    unsigned int regs, static_shared;
    atomic_ullong launches;
    /* Its time on the GPU clock a launch (fakecuda_set_kernel_time):
     * time_ns[i] for functions of time_regs[i] registers (0: any). */
    unsigned int time_regs[4];
    unsigned long long time_ns[4];
    unsigned int ntimes;
    /* Launches at carveout time_carveout take carveout_ns instead
     * (fakecuda_set_carveout_time; 0: none set); and launches counted by
     * the carveout they ran at, +1 (-1, none, .. 100). */
    int time_carveout;
    unsigned long long carveout_ns;
    atomic_ullong carveout_launches[102];
};

/* The GPU clock (fake_launch.c), advanced by each launch: one a thread,
 * as if each thread had its own stream's timeline (drk's trials are timed
 * on drk's thread, undisturbed by the program's launches). */
FC_HIDDEN extern _Thread_local unsigned long long g_gpu_ns;
/* The registers of the function behind a live CUfunction or CUkernel (0
 * if none). Caller holds the lock. */
FC_HIDDEN unsigned int handle_regs(const void *h, int kinds);
/* Its CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (-1 unset). Caller holds the lock. */
FC_HIDDEN int handle_carveout(const void *h, int kinds);
/* Whether its module's PTX rounds float arithmetic toward zero. Caller holds the lock. */
FC_HIDDEN int handle_rz(const void *h, int kinds);
/* Whether live CUfunction or CUkernel h may be launched in context c (live):
 * a CUkernel anywhere, a function only in the context it belongs to.
 * Caller holds the lock. */
FC_HIDDEN int handle_in_ctx(const void *h, const struct ctx *c);

FC_HIDDEN extern struct kentry g_kernels[FC_MAX_KERNELS];

/* The registry entry behind a live CUfunction (kinds & 1) or CUkernel
 * (kinds & 2), or -1. Caller holds the lock. */
FC_HIDDEN int handle_entry(const void *h, int kinds);

/* ------------------------------------------------------------------------ */
/* Memory (fake_memory.c)                                                   */
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
FC_HIDDEN extern struct alloc **a_items;
FC_HIDDEN extern size_t a_n;

FC_HIDDEN size_t a_lower(uintptr_t key);
/* Caller holds the lock. The memory containing p as the driver sees it: a
 * mapping nobody may access yet is not device memory. */
FC_HIDDEN struct alloc *a_containing(uintptr_t p);
FC_HIDDEN int a_add(struct alloc *a);
/* Device (host == 0) or pinned host memory (with its cuMemHostAlloc
 * flags). low32: under 4 GiB for the legacy forms' 32-bit pointers. */
FC_HIDDEN CUresult mem_alloc(uintptr_t *out, size_t size, int host, int low32, unsigned int flags);
/* Frees the allocation based exactly at p, if it is of the right kind. */
FC_HIDDEN CUresult mem_free(uintptr_t p, int host);

/* Handles opened in this process (the stand-in is its own peer): base, id
 * and how many opens are not yet closed. */
struct ipc_open {
    uintptr_t base;
    unsigned long long id;
    unsigned int refs;
};

FC_HIDDEN extern struct ipc_open *g_ipc;
FC_HIDDEN extern size_t g_ipc_n;
FC_HIDDEN extern unsigned long long g_ipc_live;

/* Caller holds the lock. */
FC_HIDDEN struct ipc_open *ipc_find(uintptr_t base, const unsigned long long *id);

/* ------------------------------------------------------------------------ */
/* Virtual memory management (fake_vmm.c)                                   */
/* ------------------------------------------------------------------------ */

#define FC_VMM_HANDLES 4096

typedef struct vmm_alloc {
    int fd; /* -1: slot free */
    size_t size;
    unsigned int handle_types; /* CUmemAllocationHandleType bits it may be exported as */
    int imported;              /* from cuMemImportFromShareableHandle: not counted */
} vmm_alloc;

FC_HIDDEN extern vmm_alloc g_vmm[FC_VMM_HANDLES];
FC_HIDDEN extern int g_vmm_init;

/* Live reservations: few, searched linearly. */
struct resv {
    uintptr_t base;
    size_t size;
};

FC_HIDDEN extern struct resv *g_resv;
FC_HIDDEN extern size_t g_resv_n;

/* ------------------------------------------------------------------------ */
/* Events (fake_stream.c)                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fc_event {
    uint32_t magic;
    int recorded;
    unsigned long long gpu_ns; /* the GPU clock when recorded */
    struct ctx *ctx; /* current at creation, else the primary */
} fc_event;

/* ------------------------------------------------------------------------ */
/* Primary context teardown (fake_context.c)                                */
/* ------------------------------------------------------------------------ */

/* Everything that dies with the primary context (see there). Caller holds
 * the lock. */
FC_HIDDEN void primary_teardown_locked(void);

#endif
