/* fakecuda, the stand-in libcuda.so.1: graph launches and stream capture. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

/* ------------------------------------------------------------------------ */
/* Graphs and stream capture                                                */
/* ------------------------------------------------------------------------ */

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
