#include "alloc/pool_events.h"

#include <stdlib.h>

/* The legacy default stream (CU_STREAM_LEGACY): never captured. */
#define LEGACY_STREAM ((uintptr_t)0x1)

struct drk_cuda_events {
    const drk_driver *drv;
    CUevent *ev;
    size_t n, cap;
    uint32_t *spare; /* released numbers, reused first */
    size_t nspare;
};

static int take(drk_cuda_events *e, uint32_t *id)
{
    if (e->nspare) {
        *id = e->spare[--e->nspare];
        return 0;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        CUevent *ev = realloc(e->ev, cap * sizeof *ev);
        uint32_t *spare = ev ? realloc(e->spare, cap * sizeof *spare) : NULL;
        if (ev)
            e->ev = ev;
        if (!spare)
            return -1;
        e->spare = spare, e->cap = cap;
    }
    if (e->drv->event_create(&e->ev[e->n], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return -1;
    *id = (uint32_t)e->n++;
    return 0;
}

/* A stream capturing a graph takes no event of the pool's: the record
 * would become a node of the program's graph (and the work queued there
 * before the capture is not behind it). The seal fails, and its frees wait
 * for a seal after the capture. */
static int capturing(const drk_cuda_events *e, uintptr_t stream)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return stream != LEGACY_STREAM && e->drv->stream_is_capturing &&
           e->drv->stream_is_capturing((CUstream)stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int ev_record(void *ctx, uintptr_t stream, uint64_t *event)
{
    drk_cuda_events *e = ctx;
    uint32_t id;
    if (capturing(e, stream) || take(e, &id) != 0)
        return -1;
    if (e->drv->event_record(e->ev[id], (CUstream)stream) != CUDA_SUCCESS) {
        e->spare[e->nspare++] = id;
        return -1;
    }
    *event = id;
    return 0;
}

static int ev_query(void *ctx, uint64_t event)
{
    drk_cuda_events *e = ctx;
    CUresult r = e->drv->event_query(e->ev[event]);
    return r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : -1;
}

static int ev_wait(void *ctx, uint64_t event)
{
    drk_cuda_events *e = ctx;
    return e->drv->event_synchronize(e->ev[event]) == CUDA_SUCCESS ? 0 : -1;
}

/* A released number always fits: the spare array is as large as the table. */
static void ev_release(void *ctx, uint64_t event)
{
    drk_cuda_events *e = ctx;
    e->spare[e->nspare++] = (uint32_t)event;
}

drk_cuda_events *drk_cuda_events_new(const drk_driver *drv)
{
    if (!drv || !drv->event_create || !drv->event_record || !drv->event_query || !drv->event_synchronize ||
        !drv->event_destroy)
        return NULL;
    drk_cuda_events *e = calloc(1, sizeof *e);
    if (e)
        e->drv = drv;
    return e;
}

void drk_cuda_events_delete(drk_cuda_events *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++)
        e->drv->event_destroy(e->ev[i]);
    free(e->ev);
    free(e->spare);
    free(e);
}

drk_pool_events drk_cuda_events_table(drk_cuda_events *e)
{
    return (drk_pool_events){e, ev_record, ev_query, ev_wait, ev_release};
}
