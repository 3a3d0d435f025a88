/* Graph hooks: graph launches are counted (the kernels inside a graph never
 * pass the launch hooks); captures are told to the device pool. */
#include "shim/hook.h"

#include "alloc/device.h"

DRK_BODY drk_body_graph_launch(drk_sym sym, CUgraphExec exec, CUstream stream)
{
    DRK_REAL_OR_MISSING(graph_launch);
    return drk_counted(sym, real(exec, stream));
}

/* Graph captures: while any is under way an async allocation asks whether
 * its stream captures (the driver must take it then); with none, it need
 * not ask. Counted before a capture begins, so no allocation can slip in
 * between; uncounted when one ends (successfully or invalidated). */
static inline __attribute__((always_inline)) CUresult capture_began(drk_sym sym, CUresult r)
{
    if (r != CUDA_SUCCESS)
        drk_dpool_capture_ends();
    return drk_counted(sym, r);
}

DRK_BODY drk_body_begin_capture_v1(drk_sym sym, CUstream stream)
{
    DRK_REAL_OR_MISSING(begin_capture_v1);
    drk_dpool_capture_begins();
    return capture_began(sym, real(stream));
}

DRK_BODY drk_body_begin_capture(drk_sym sym, CUstream stream, CUstreamCaptureMode mode)
{
    DRK_REAL_OR_MISSING(begin_capture);
    drk_dpool_capture_begins();
    return capture_began(sym, real(stream, mode));
}

DRK_BODY drk_body_begin_capture_to_graph(drk_sym sym, CUstream stream, CUgraph graph, const CUgraphNode *deps,
                                         const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode)
{
    DRK_REAL_OR_MISSING(begin_capture_to_graph);
    drk_dpool_capture_begins();
    return capture_began(sym, real(stream, graph, deps, edges, ndeps, mode));
}

DRK_BODY drk_body_end_capture(drk_sym sym, CUstream stream, CUgraph *graph)
{
    DRK_REAL_OR_MISSING(end_capture);
    CUresult r = real(stream, graph);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        drk_dpool_capture_ends();
    return drk_counted(sym, r);
}

DRK_HOOKS_GRAPH(DRK_EXPORT)
