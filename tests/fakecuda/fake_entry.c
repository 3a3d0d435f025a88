/* fakecuda, the stand-in libcuda.so.1: cuGetProcAddress, over every exported
 * form. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <string.h>

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
    P_(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000, 0)
    P_(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000, 0)
    P_(cuCtxGetDevice, cuCtxGetDevice, 2000, 0)
    P_(cuCtxGetDevice, cuCtxGetDevice_v2, 13000, 0)
    P_(cuCtxSynchronize, cuCtxSynchronize, 2000, 0)
    P_(cuCtxSynchronize, cuCtxSynchronize_v2, 13000, 0)
    P_(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000, 0)
    P_(cuGreenCtxCreate, cuGreenCtxCreate, 12040, 0)
    P_(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040, 0)
    P_(cuProfilerStart, cuProfilerStart, 4000, 0)
    P_(cuProfilerStop, cuProfilerStop, 4000, 0)
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
    P_(cuFuncSetAttribute, cuFuncSetAttribute, 9000, 0)
    P_(cuKernelGetAttribute, cuKernelGetAttribute, 12000, 0)
    P_(cuFuncGetParamInfo, cuFuncGetParamInfo, 12040, 0)
    P_(cuKernelGetParamInfo, cuKernelGetParamInfo, 12040, 0)
    P_(cuOccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050, 0)
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
    P_(cuEventElapsedTime, cuEventElapsedTime_v2, 12080, 0)
    P_(cuStreamWaitEvent, cuStreamWaitEvent, 3020, 0)
    P_(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 3020, 0)
    P_(cuMemsetD8Async, cuMemsetD8Async, 3020, 0)
    P_(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 3020, 0)
    P_(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, 3020, 0)
    P_(cuMemcpyPeer, cuMemcpyPeer, 4000, 0)
    P_(cuMemcpyPeerAsync, cuMemcpyPeerAsync, 4000, 0)
    P_(cuCtxGetLimit, cuCtxGetLimit, 3010, 0)
    P_(cuCtxSetLimit, cuCtxSetLimit, 3010, 0)
    P_(cuFuncLoad, cuFuncLoad, 12040, 0)
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
