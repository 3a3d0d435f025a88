/* fakecuda: a stand-in CUDA driver (libcuda.so.1) for drk's CPU tests.
 *
 * The library exports driver entry points under their real names and ABI
 * forms (legacy, _v2, _ptsz/_ptds ...), runs "kernels" as host functions and
 * hands out host memory as device memory. It is a test fixture: never
 * installed, never shipped. This header is what test programs use to steer
 * and observe it; the cu* functions themselves are declared by cuda.h.
 *
 * Behaviour in brief (the driver's own semantics unless noted):
 *  - One device (ordinal 0, "sm_90", 132 SMs), driver version 13000. Every
 *    cu* call but cuDriverGetVersion, cuGetErrorName/String and
 *    cuGetProcAddress(_v2) returns CUDA_ERROR_NOT_INITIALIZED before cuInit(0).
 *  - Contexts exist (primary context, cuCtxCreate_v4) but memory, module and
 *    launch calls do not require a current one (deviation: the driver would
 *    return CUDA_ERROR_INVALID_CONTEXT). cuCtxGetDevice/cuCtxSynchronize and
 *    cuOccupancyMaxActiveBlocksPerMultiprocessor do. Each thread has a
 *    context stack: cuCtxPushCurrent_v2 (at most 16 deep, else
 *    CUDA_ERROR_OUT_OF_MEMORY) and cuCtxPopCurrent_v2 (empty:
 *    CUDA_ERROR_INVALID_CONTEXT); cuCtxSetCurrent replaces the top, NULL pops
 *    it; cuCtxCreate_v4 replaces the top too (deviation: the driver pushes).
 *    cuCtxDestroy(_v2) ends the context handle only; what was made in it
 *    stays (deviation).
 *  - Functions belong to a context, as the driver's do: a module's
 *    (cuModuleGetFunction) to the context current when the module was
 *    loaded (none current: the primary). cuKernelGetFunction gives the
 *    kernel's function in the current context (none current: the primary's,
 *    deviation): another context gets a function of its own, made on its
 *    first ask and the same handle after (same code and resources, its own
 *    attributes such as the carveout). cuLaunchKernel(Ex), their _ptsz and
 *    cooperative forms run a function only in its own context: launched
 *    with another one current (none current counts as the primary) they
 *    return CUDA_ERROR_INVALID_HANDLE and run nothing. A CUkernel passed as
 *    the CUfunction runs in whatever context is current. Attribute and
 *    occupancy calls take a function of any context. A destroyed context's
 *    functions are never launchable again, even by a context made later at
 *    the same address.
 *  - cuFuncLoad: CUDA_SUCCESS for a live function of any context (or a
 *    CUkernel passed as one), else CUDA_ERROR_INVALID_HANDLE; successful
 *    calls are counted (fakecuda_func_loads). To look like a driver older
 *    than 12.4, which lacks it: fakecuda_inject_error("cuFuncLoad",
 *    CUDA_ERROR_NOT_FOUND, UINT_MAX), or a NULL entry in a test's own table.
 *  - cuCtxGetLimit/cuCtxSetLimit keep a value per context and CUlimit:
 *    STACK_SIZE 1024, PRINTF_FIFO_SIZE 1048576, MALLOC_HEAP_SIZE 8388608,
 *    the others 0 (deviation) until set; any value is taken as given, every
 *    limit may be set (deviation). No live current context:
 *    CUDA_ERROR_INVALID_CONTEXT; a NULL value pointer or a limit >=
 *    CU_LIMIT_MAX: CUDA_ERROR_INVALID_VALUE. The primary context's go back to
 *    the defaults when it is reset or released to 0.
 *  - cuMemcpyPeer/cuMemcpyPeerAsync copy as cuMemcpyDtoD(Async) (one device,
 *    one address space across its contexts; unknown or too short memory:
 *    CUDA_ERROR_INVALID_VALUE) once both contexts are live (a created one
 *    not destroyed, or the primary while active: retained and not reset or
 *    released to 0 since), else CUDA_ERROR_INVALID_CONTEXT; the async form's
 *    stream is validated as for other async calls (CUDA_ERROR_INVALID_HANDLE).
 *  - Primary context teardown: cuDevicePrimaryCtxReset(_v2), and the
 *    cuDevicePrimaryCtxRelease(_v2) that drops the retain count to 0,
 *    destroy what belongs to the primary context (allocations, streams and
 *    events record the context current when made, the primary when none
 *    was): device memory and pinned host memory (unmapped: touching it
 *    faults; frees and queries answer as for an unknown pointer, e.g.
 *    cuMemFree/cuMemFreeHost CUDA_ERROR_INVALID_VALUE), IPC opens of it,
 *    all VMM state (mappings, reservations, cuMemCreate/imported handles),
 *    streams and events (then CUDA_ERROR_INVALID_HANDLE). Modules and
 *    libraries survive (deviation). Reset keeps the retain count; the
 *    primary context stays current where it was but is inactive
 *    (cuDevicePrimaryCtxGetState: active 0, flags always 0) until the next
 *    cuDevicePrimaryCtxRetain, which gives back the same handle. Calls made
 *    while it is inactive behave as if it were active (deviation).
 *  - Handles (context, module, function, library, kernel, stream, event)
 *    are checked against a table of live objects, never dereferenced
 *    blindly: stale, foreign, NULL or wrong-type handles give
 *    CUDA_ERROR_INVALID_HANDLE (CUDA_ERROR_INVALID_CONTEXT for contexts).
 *    Each load makes fresh objects, so a handle value may come back after an
 *    unload, as with the driver.
 *  - Device memory is host memory from mmap. _v2 and async allocations lie
 *    anywhere in the address space; the legacy 32-bit forms (cuMemAlloc,
 *    cuMemAllocPitch) use MAP_32BIT so their pointers fit in 32 bits. Total
 *    memory is 1 GiB (settable); free = total - live requested bytes;
 *    exceeding it gives CUDA_ERROR_OUT_OF_MEMORY. Pitch is width rounded up
 *    to 512. cuMemGetAddressRange and the pointer attributes accept interior
 *    pointers; frees need the base pointer.
 *  - Pinned host memory (cuMemHostAlloc keeps its flags for
 *    cuMemHostGetFlags; cuMemAllocHost: 0). Unified addressing:
 *    cuMemHostGetDevicePointer(_v2) gives back p itself for any p inside a
 *    live pinned allocation (flags must be 0). The legacy form writes 32
 *    bits: CUDA_ERROR_INVALID_VALUE for memory above 4 GiB; the legacy
 *    cuMemAllocHost places its memory below, so that form can succeed.
 *  - cuPointerGetAttribute writes booleans (IS_MANAGED, MAPPED,
 *    IS_LEGACY_CUDA_IPC_CAPABLE, SYNC_MEMOPS) as unsigned int, MEMORY_TYPE as
 *    unsigned int, DEVICE_ORDINAL as int, BUFFER_ID as unsigned long long,
 *    RANGE_SIZE as size_t. Other attributes: CUDA_ERROR_INVALID_VALUE.
 *    cuPointerGetAttributes on an unknown pointer writes zero/NULL for every
 *    attribute and returns CUDA_SUCCESS, as the driver documents.
 *  - IPC: cuIpcGetMemHandle works on cuMemAlloc* memory (not VMM memory:
 *    CUDA_ERROR_INVALID_VALUE, as the driver). The stand-in is one process,
 *    so cuIpcOpenMemHandle(_v2) opens handles of its own process and gives
 *    back the allocation's base while it is live (deviation: the driver
 *    refuses its own process's handles); opening twice counts twice, and
 *    each open needs its cuIpcCloseMemHandle. Flags other than 0 or
 *    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, an unknown or stale handle, or a
 *    close of a pointer not open: CUDA_ERROR_INVALID_VALUE.
 *    cuCtxEnablePeerAccess: flags != 0 -> CUDA_ERROR_INVALID_VALUE; an
 *    invalid peer or no current context -> CUDA_ERROR_INVALID_CONTEXT; else
 *    CUDA_ERROR_INVALID_DEVICE (one device, no peer).
 *  - cuGetProcAddress_v2 follows cuda.h: newest form whose version <=
 *    cudaVersion; the _ptsz/_ptds form with
 *    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM; cudaVersion > 13000 ->
 *    CUDA_ERROR_INVALID_VALUE; unknown symbol or too old a version ->
 *    CUDA_SUCCESS, *pfn = NULL and the status (symbolStatus may be NULL).
 *    The legacy 4-argument cuGetProcAddress keeps the CUDA 11.x contract it
 *    was introduced with: in those two cases it returns CUDA_ERROR_NOT_FOUND
 *    (with *pfn = NULL). Each answer is the address of this library's own
 *    exported function of that exact name (same as dlsym).
 *  - Module/library images are text: the first line "DRKFAKE1", then one
 *    registered kernel name per line (blank lines ignored). A wrong header,
 *    an unknown or repeated name gives CUDA_ERROR_INVALID_IMAGE; a missing
 *    file CUDA_ERROR_FILE_NOT_FOUND. Every module/library load call, including
 *    cuModuleLoadFatBinary, accepts that text. PTX text (with .version and
 *    .entry) is accepted too and stands for the registered kernels its
 *    .entry names, so drk's image reader can be tested on a real PTX image.
 *  - Virtual memory management (cuMemAddressReserve/Free, cuMemCreate/
 *    Release, cuMemMap/Unmap, cuMemSetAccess, granularity 2 MiB, device 0
 *    pinned memory only; VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 1): a
 *    reservation is a PROT_NONE host range, a physical allocation a memfd
 *    (counted as device memory in use, in cuMemGetInfo and
 *    fakecuda_live_device_bytes, until released), cuMemMap maps a whole
 *    allocation (offset 0) inside a reservation over nothing mapped, so one
 *    allocation shows at every address it is mapped at. cuMemUnmap and
 *    cuMemSetAccess take whole mappings end to end; cuMemAddressFree the
 *    whole reservation with nothing mapped in it (else
 *    CUDA_ERROR_INVALID_VALUE). Once cuMemSetAccess grants access, mapped
 *    memory is device memory everywhere: copies and sets (also across
 *    mappings end to end; writes into a read-only mapping:
 *    CUDA_ERROR_INVALID_VALUE), kernels, cuMemGetAddressRange and the
 *    pointer attributes, which answer as for VMM memory on the driver:
 *    device memory of device 0 in the primary context, the range is the one
 *    cuMemMap call containing the pointer, BUFFER_ID unique per mapping,
 *    IS_LEGACY_CUDA_IPC_CAPABLE 0. Reserved but unmapped memory, or mapped
 *    without access, is unknown memory to those calls.
 *  - Sharing (POSIX file descriptors only): cuMemCreate accepts
 *    requestedHandleTypes 0 or CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
 *    (others: CUDA_ERROR_NOT_SUPPORTED). cuMemExportToShareableHandle writes
 *    an int fd (a dup of the allocation's memfd; the caller closes it) for
 *    handles created with that type requested, else
 *    CUDA_ERROR_INVALID_VALUE; another handle type:
 *    CUDA_ERROR_NOT_SUPPORTED. cuMemImportFromShareableHandle((void
 *    *)(uintptr_t)fd) gives a new handle on the same memory, not counted as
 *    device memory again; an fd that is not such an export:
 *    CUDA_ERROR_INVALID_VALUE.
 *  - Events (cuEventCreate/Record/Query/Synchronize/Destroy_v2): work is
 *    synchronous, so a recorded event has always completed.
 *  - Function attributes and occupancy: a function is built with
 *    FC_DEFAULT_REGS (32) registers a thread and no static shared memory, or
 *    what fakecuda_set_kernel_resources set for its kernel before the load
 *    that made it (a CUkernel's function, and what cuKernelGetAttribute
 *    says, likewise); CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK is what the
 *    SM's 65536 registers hold (1024 at most: 512 at 128 registers). The
 *    occupancy calculator (cuOccupancyMaxActiveBlocksPerMultiprocessor, a
 *    CUfunction or a CUkernel passed as one) models sm_90: blocks an SM holds
 *    are the fewest its 64 warps, 32 blocks, 65536 registers (per warp in
 *    units of 256) and 233472 bytes of shared memory (a block's static and
 *    dynamic bytes and 1 KiB reserved, in units of 128) allow; 0 for a block
 *    over the function's maximum threads or dynamic shared memory over 48
 *    KiB less its static bytes. The device attributes say the same limits.
 *  - Launches run the kernel synchronously on the calling thread, once per
 *    (block, thread), blocks in x-fastest order. A CUfunction or a CUkernel
 *    may be launched. Streams are only validated: NULL, CU_STREAM_LEGACY,
 *    CU_STREAM_PER_THREAD or a live created stream (else
 *    CUDA_ERROR_INVALID_HANDLE). No stream ever captures:
 *    cuStreamIsCapturing(_ptsz) says CU_STREAM_CAPTURE_STATUS_NONE unless a
 *    test set another status with fakecuda_set_capturing; nothing else
 *    changes while a stream "captures".
 *  - Every exported cu* function counts its calls under its exact exported
 *    name, whatever the outcome (also when it fails).
 *  - Thread-safe: many threads may allocate, load and launch at once.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernels -------------------------------------------------------------- */

typedef struct fakecuda_dim3 {
    unsigned int x, y, z;
} fakecuda_dim3;

/* What a kernel sees for one (block, thread). params is the launch's
 * kernelParams array: params[i] points at the value of argument i (for
 * vec_add, *(float **)t->params[0] is a). When the launch passed its
 * arguments through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER), params points
 * into that buffer at the offsets of the kernel's registered layout.
 * nparams is the registered parameter count, or 0 when the kernel was
 * registered without a layout. shared is the block's dynamic shared memory
 * (sharedMemBytes bytes, zeroed at launch, shared by all threads of a block;
 * threads run one after another, so there is no __syncthreads). */
typedef struct fakecuda_thread {
    fakecuda_dim3 blockIdx, threadIdx, gridDim, blockDim;
    void **params;
    unsigned int nparams;
    void *shared;
    unsigned int sharedMemBytes;
    unsigned int regs; /* the launched function's registers (a JIT register budget lowers them) */
    int ptx_rz;        /* its module's PTX rounds float arithmetic toward zero (".rz.f32" in it) */
    int carveout;      /* the launch's shared-memory carveout (its attribute, else the function's; -1: none) */
} fakecuda_thread;

typedef void (*fakecuda_kernel_fn)(const fakecuda_thread *t);

/* Built-in kernels (1-D: i = blockIdx.x * blockDim.x + threadIdx.x, i < n):
 *   vec_add(float *a, float *b, float *c, int n)   c[i] = a[i] + b[i]
 *   scale(float *x, float s, int n)                x[i] *= s
 *   fill(float *x, float v, int n)                 x[i] = v
 *   empty()                                        nothing
 * All have registered layouts (8-byte pointers, 4-byte float/int). */

/* Registers (or replaces) kernel `name` (at most 127 bytes). Images loaded
 * later may list it. Without a layout the kernel cannot be launched through
 * `extra` (CUDA_ERROR_INVALID_VALUE) and cuFuncGetParamInfo reports no
 * parameters. Returns 0, or -1 for a NULL/too long name, NULL fn or a full
 * table (256 kernels). Safe before cuInit and from any thread. */
int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn);

/* Same, with a parameter layout: nparams sizes in bytes (at most 64). Each
 * parameter is aligned to the largest power of two <= 16 that divides its
 * size (pointers 8, float/int 4, float4 16, float3 4), as nvcc lays them out
 * for the common types. */
int fakecuda_register_kernel_params(const char *name, fakecuda_kernel_fn fn, unsigned int nparams,
                                    const size_t *param_sizes);

/* Functions of kernel `name` that images loaded from now on make have `regs`
 * registers a thread (1..255) and `static_shared` bytes of static shared
 * memory (at most 48 KiB): a kernel rebuilt with more registers, as a JIT
 * with other options would. Functions already loaded keep theirs. Returns
 * 0, or -1 for an unknown kernel or a value out of range. */
int fakecuda_set_kernel_resources(const char *name, unsigned int regs, unsigned int static_shared);

/* ---- JIT options ----------------------------------------------------------- */

/* cuModuleLoadDataEx records its JIT options on the module it makes, and
 * CU_JIT_MAX_REGISTERS caps its functions' registers (NUM_REGS is the
 * kernel's registers or the budget, the fewer), so a test sees a budget
 * take effect. CU_JIT_WALL_TIME reads 0.5 (ms); the info log buffer gets
 * one line. A load passing `option` with `value` fails from now on with
 * CUDA_ERROR_INVALID_PTX and one "ptxas fatal" line in the error log
 * buffer (option (CUjit_option)-1: none fails). Returns 0. */
int fakecuda_fail_jit(CUjit_option option, unsigned long long value);
/* The options module `module` was loaded with, at most `max` of them
 * copied; their count, or -1 for a handle that is no live module. */
int fakecuda_module_jit_options(CUmodule module, CUjit_option *options, unsigned long long *values,
                                unsigned int max);
/* The stand-in nvJitLink (fake_jitlink.c: drk finds it with DRK_NVJITLINK
 * set to this library) makes a cubin of PTX that cuModuleLoadData* loads as
 * that PTX within the -maxrregcount it was given; a planted
 * fakecuda_fail_jit(CU_JIT_MAX_REGISTERS, n) fails the link given
 * -maxrregcount=n. The options of its last link, space-separated, into
 * `out`: 0, or -1 for no buffer. */
int fakecuda_jitlink_last_options(char *out, size_t len);
/* Modules loaded and not unloaded. */
unsigned long long fakecuda_live_modules(void);
/* cuFuncSetAttribute remembers a function's
 * CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (-1..100), which
 * cuFuncGetAttribute then reads (-1 until set). */

/* How many launches of kernel `name` completed (any launch API). */
unsigned long long fakecuda_kernel_launches(const char *name);
/* How many kernel launches completed in context `ctx` (a live handle; the
 * primary's count lasts across its resets); NULL: in every context but the
 * primary, destroyed ones included; 0 for another handle. So a test sees
 * that drk's trials ran in a context of drk's own and not the program's. */
unsigned long long fakecuda_launches_in(CUcontext ctx);
/* Successful cuFuncLoad calls (fakecuda_calls("cuFuncLoad") counts every
 * call, failed ones too). */
unsigned long long fakecuda_func_loads(void);

/* The GPU's clock: each completed launch advances it by its kernel's time
 * (1000 ns unless set), and cuEventRecord reads it, so cuEventElapsedTime
 * between events around launches is their summed time. The clock is the
 * calling thread's: as if each thread launched on a stream of its own, so
 * one thread's timing is not disturbed by another's launches. A kernel's time is
 * `ns` for its functions with `regs` registers (0: any other), so a test
 * plants a variant built with a register budget that runs faster or slower.
 * Up to 4 register counts a kernel. Returns 0, or -1 (unknown kernel, full). */
int fakecuda_set_kernel_time(const char *name, unsigned int regs, unsigned long long ns);
/* A launch of kernel `name` that runs at shared-memory carveout `carveout`
 * -- its launch's CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
 * (cuLaunchKernelEx), which takes precedence, else its function's
 * attribute (-1 unset) -- takes `ns` instead (0: no such time); one
 * carveout a kernel. 0, or -1 (unknown kernel, a carveout out of range).
 * _launches: its launches that ran at `carveout`. */
int fakecuda_set_carveout_time(const char *name, int carveout, unsigned long long ns);
unsigned long long fakecuda_carveout_launches(const char *name, int carveout);
unsigned long long fakecuda_gpu_ns(void);

/* Synchronizing (cuCtxSynchronize, cuStreamSynchronize) sleeps `ns`, as a
 * program waiting for a GPU busy with its long kernels (0, the default: it
 * returns at once, everything having run already). */
void fakecuda_set_sync_ns(unsigned long long ns);

/* ---- call counting -------------------------------------------------------- */

/* Calls so far of the exported function named exactly exported_name
 * ("cuMemAlloc_v2", "cuLaunchKernel_ptsz", ...); 0 for a name the library
 * does not export. */
unsigned long long fakecuda_calls(const char *exported_name);
void fakecuda_reset_calls(void);
/* Successful cuEventRecord calls on a stream that was capturing a graph (a
 * real driver makes each a node of the program's graph). */
unsigned long long fakecuda_captured_event_records(void);

/* ---- fault injection ------------------------------------------------------ */

/* The next `count` calls of exported_name return `result` and do nothing
 * else (they are still counted). result == CUDA_SUCCESS or count == 0 clears
 * it. Returns 0, or -1 for a name the library does not export. */
int fakecuda_inject_error(const char *exported_name, CUresult result, unsigned int count);

/* ---- memory --------------------------------------------------------------- */

/* Live device allocations (all cuMemAlloc* forms, including async); device
 * bytes in use: their requested bytes plus those of unreleased cuMemCreate
 * handles; live pinned host allocations. For leak checks. */
unsigned long long fakecuda_live_device_allocations(void);
size_t fakecuda_live_device_bytes(void);
unsigned long long fakecuda_live_host_allocations(void);

/* Total device memory reported by cuMemGetInfo/cuDeviceTotalMem and the
 * limit allocations are held to (default 1 GiB; FAKECUDA_TOTAL_MIB in the
 * environment sets it at cuInit, e.g. 143771 for an H200). For
 * out-of-memory tests.
 * (FAKECUDA_VMM_COSTS=h200 in the environment makes the VMM calls take the
 * CPU time they took on an H200: fake_vmm.c.) */
void fakecuda_set_total_memory(size_t bytes);

/* Successful cuIpcOpenMemHandle(_v2) calls not yet closed by
 * cuIpcCloseMemHandle. */
unsigned long long fakecuda_ipc_open_count(void);

/* ---- streams -------------------------------------------------------------- */

/* What cuStreamIsCapturing reports for `stream` from now on: a
 * CUstreamCaptureStatus (0 none, 1 active, 2 invalidated). Returns 0, or -1
 * for an invalid stream or status. */
int fakecuda_set_capturing(CUstream stream, int capturing);

/* Function pointer types, for programs that reach the fake only through drk
 * (DRK_CUDA_LIBRARY) and look the helpers up with dlsym on FAKECUDA_LIBRARY
 * (a compile definition that CMake target fakecuda_headers provides). */
typedef int (*fakecuda_register_kernel_fn)(const char *, fakecuda_kernel_fn);
typedef int (*fakecuda_register_kernel_params_fn)(const char *, fakecuda_kernel_fn, unsigned int, const size_t *);
typedef int (*fakecuda_set_kernel_resources_fn)(const char *, unsigned int, unsigned int);
typedef unsigned long long (*fakecuda_kernel_launches_fn)(const char *);
typedef unsigned long long (*fakecuda_launches_in_fn)(CUcontext);
typedef unsigned long long (*fakecuda_func_loads_fn)(void);
typedef unsigned long long (*fakecuda_calls_fn)(const char *);
typedef void (*fakecuda_reset_calls_fn)(void);
typedef int (*fakecuda_inject_error_fn)(const char *, CUresult, unsigned int);
typedef unsigned long long (*fakecuda_live_device_allocations_fn)(void);
typedef size_t (*fakecuda_live_device_bytes_fn)(void);
typedef unsigned long long (*fakecuda_live_host_allocations_fn)(void);
typedef void (*fakecuda_set_total_memory_fn)(size_t);
typedef unsigned long long (*fakecuda_ipc_open_count_fn)(void);
typedef int (*fakecuda_set_capturing_fn)(CUstream, int);
typedef int (*fakecuda_set_kernel_time_fn)(const char *, unsigned int, unsigned long long);

#define FAKECUDA_IMAGE_MAGIC "DRKFAKE1"
#define FAKECUDA_CUBIN_MAGIC "DRKFAKECUBIN1"
#define FAKECUDA_DRIVER_VERSION 13000

#ifdef __cplusplus
}
#endif

#endif
