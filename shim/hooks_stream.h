/* Stream hooks: created and destroyed streams are told to the device pool
 * (frees without a stream wait for work on each of them); a program waiting
 * for a stream or the device (cuStreamSynchronize, cuCtxSynchronize) is a
 * quiet moment for the pool to give back idle pages.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_STREAM_H
#define DRK_SHIM_HOOKS_STREAM_H

#include "alloc/device.h"
#include "shim/hook.h"

/* A created stream is told to the pool: frees without a stream must wait
 * for its work, also in a pool that starts later. */
static inline __attribute__((always_inline)) CUresult stream_made(drk_sym sym, CUresult r, CUstream *stream)
{
    if (r == CUDA_SUCCESS && stream && drk_pooling())
        drk_dpool_stream_created(*stream);
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

DRK_BODY drk_body_stream_create(drk_sym sym, CUstream *stream, unsigned int flags)
{
    drk_fn_stream_create real = DRK_REAL(stream_create);
    return real ? stream_made(sym, real(stream, flags), stream) : drk_missing(sym);
}

DRK_BODY drk_body_stream_create_priority(drk_sym sym, CUstream *stream, unsigned int flags, int priority)
{
    drk_fn_stream_create_priority real = DRK_REAL(stream_create_priority);
    return real ? stream_made(sym, real(stream, flags, priority), stream) : drk_missing(sym);
}

DRK_BODY drk_body_stream_destroy(drk_sym sym, CUstream stream)
{
    drk_fn_stream_destroy real = DRK_REAL(stream_destroy);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    /* Its pending frees are settled while its events can still be waited for. */
    if (drk_pooling())
        drk_dpool_stream_destroyed(stream);
    CUresult r = real(stream);
    if (drk_observing())
        drk_count_call(sym);
    return r;
}


static inline __attribute__((always_inline)) CUresult waited(drk_sym sym, CUresult r)
{
    if (r == CUDA_SUCCESS && drk_pooling())
        drk_dpool_quiet();
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

DRK_BODY drk_body_ctx_synchronize(drk_sym sym)
{
    drk_fn_ctx_synchronize real = DRK_REAL(ctx_synchronize);
    return real ? waited(sym, real()) : drk_missing(sym);
}

DRK_BODY drk_body_stream_synchronize(drk_sym sym, CUstream stream)
{
    drk_fn_stream_synchronize real = DRK_REAL(stream_synchronize);
    return real ? waited(sym, real(stream)) : drk_missing(sym);
}

/* CUDA 13's form, which names the context. */
DRK_BODY drk_body_ctx_synchronize_v2(drk_sym sym, CUcontext ctx)
{
    drk_fn_ctx_synchronize_v2 real = DRK_REAL(ctx_synchronize_v2);
    return real ? waited(sym, real(ctx)) : drk_missing(sym);
}

/* Graph captures: while any is under way an async allocation asks whether
 * its stream captures (the driver must take it then); with none, it need
 * not ask. Counted before a capture begins, so no allocation can slip in
 * between; uncounted when one ends (successfully or invalidated). */
#define DRK_BEGIN_CAPTURE_BODY_(body, params, args)                            \
    DRK_BODY drk_body_##body(drk_sym sym, DRK_UNPAREN params)                  \
    {                                                                          \
        drk_fn_##body real = DRK_REAL(body);                                   \
        if (__builtin_expect(real == NULL, 0))                                 \
            return drk_missing(sym);                                           \
        drk_dpool_capture_begins();                                            \
        CUresult r = real args;                                                \
        if (r != CUDA_SUCCESS)                                                 \
            drk_dpool_capture_ends();                                          \
        if (drk_observing())                                                   \
            drk_count_call(sym);                                               \
        return r;                                                              \
    }
DRK_SIG_begin_capture_v1(DRK_BEGIN_CAPTURE_BODY_, begin_capture_v1)
DRK_SIG_begin_capture(DRK_BEGIN_CAPTURE_BODY_, begin_capture)
DRK_SIG_begin_capture_to_graph(DRK_BEGIN_CAPTURE_BODY_, begin_capture_to_graph)

DRK_BODY drk_body_end_capture(drk_sym sym, CUstream stream, CUgraph *graph)
{
    drk_fn_end_capture real = DRK_REAL(end_capture);
    if (__builtin_expect(real == NULL, 0))
        return drk_missing(sym);
    CUresult r = real(stream, graph);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        drk_dpool_capture_ends();
    if (drk_observing())
        drk_count_call(sym);
    return r;
}

#endif
