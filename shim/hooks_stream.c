/* Stream hooks: created and destroyed streams are told to the device pool
 * (frees without a stream wait for work on each of them); a program waiting
 * for a stream or the device (cuStreamSynchronize, cuCtxSynchronize) is a
 * quiet moment for the pool to give back idle pages, and for evolution to
 * load a served copy while the queue is empty. How long the program waits
 * for the GPU there and in cuEventSynchronize tells drk's thread whether its
 * launch calls have time to spare (shim/worker.h). */
#include "shim/hook.h"

#include "alloc/device.h"
#include "evolve/engine.h"
#include "shim/worker.h"

/* A created stream is told to the pool: frees without a stream must wait
 * for its work, also in a pool that starts later. */
static inline __attribute__((always_inline)) CUresult stream_made(drk_sym sym, CUresult r, CUstream *stream)
{
    if (r == CUDA_SUCCESS && stream && drk_pooling())
        drk_dpool_stream_created(*stream);
    return drk_counted(sym, r);
}

DRK_BODY drk_body_stream_create(drk_sym sym, CUstream *stream, unsigned int flags)
{
    DRK_REAL_OR_MISSING(stream_create);
    return stream_made(sym, real(stream, flags), stream);
}

DRK_BODY drk_body_stream_create_priority(drk_sym sym, CUstream *stream, unsigned int flags, int priority)
{
    DRK_REAL_OR_MISSING(stream_create_priority);
    return stream_made(sym, real(stream, flags, priority), stream);
}

DRK_BODY drk_body_stream_destroy(drk_sym sym, CUstream stream)
{
    DRK_REAL_OR_MISSING(stream_destroy);
    /* Its pending frees are settled while its events can still be waited for. */
    if (drk_pooling())
        drk_dpool_stream_destroyed(stream);
    return drk_counted(sym, real(stream));
}

static inline __attribute__((always_inline)) CUresult waited(drk_sym sym, CUresult r, uint64_t since)
{
    drk_worker_wait_ends(since);
    if (r == CUDA_SUCCESS && drk_pooling())
        drk_dpool_quiet();
    if (r == CUDA_SUCCESS)
        drk_engine_quiet();
    return drk_counted(sym, r);
}

/* A wait for a whole context also settles, in a pool whose seals stopped,
 * the frees made before it (alloc/device.h). */
static inline __attribute__((always_inline)) uint64_t ctx_wait_begins(CUcontext ctx)
{
    return drk_pooling() ? drk_dpool_sync_begin(ctx) : 0;
}

static inline __attribute__((always_inline)) CUresult ctx_waited(drk_sym sym, CUresult r, CUcontext ctx,
                                                                 uint64_t mark, uint64_t since)
{
    if (r == CUDA_SUCCESS && mark)
        drk_dpool_sync_end(ctx, mark);
    return waited(sym, r, since);
}

DRK_BODY drk_body_ctx_synchronize(drk_sym sym)
{
    DRK_REAL_OR_MISSING(ctx_synchronize);
    uint64_t mark = ctx_wait_begins(NULL);
    uint64_t t0 = drk_worker_wait_begins();
    return ctx_waited(sym, real(), NULL, mark, t0);
}

DRK_BODY drk_body_stream_synchronize(drk_sym sym, CUstream stream)
{
    DRK_REAL_OR_MISSING(stream_synchronize);
    uint64_t t0 = drk_worker_wait_begins();
    return waited(sym, real(stream), t0);
}

/* CUDA 13's form, which names the context. */
DRK_BODY drk_body_ctx_synchronize_v2(drk_sym sym, CUcontext ctx)
{
    DRK_REAL_OR_MISSING(ctx_synchronize_v2);
    uint64_t mark = ctx_wait_begins(ctx);
    uint64_t t0 = drk_worker_wait_begins();
    return ctx_waited(sym, real(ctx), ctx, mark, t0);
}

/* Only timed: work after the event may still be queued, so not a quiet
 * moment. */
DRK_BODY drk_body_event_synchronize(drk_sym sym, CUevent event)
{
    DRK_REAL_OR_MISSING(event_synchronize);
    uint64_t t0 = drk_worker_wait_begins();
    CUresult r = real(event);
    drk_worker_wait_ends(t0);
    return drk_counted(sym, r);
}

DRK_HOOKS_STREAM(DRK_EXPORT)
