/* fakecuda, the stand-in libcuda.so.1: streams and events. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <stdlib.h>

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
    CUresult rc = h_publish(s);
    if (rc != CUDA_SUCCESS)
        return rc;
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream h)
{
    return h_retire(h, MAGIC_STREAM) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
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

/* Everything already ran: synchronizing and querying only validate
 * (synchronizing waits as long as fakecuda_set_sync_ns says). */
FC_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    ENTER_INIT(cuStreamSynchronize);
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    fc_sync_wait();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    ENTER_INIT(cuStreamSynchronize_ptsz);
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    fc_sync_wait();
    return CUDA_SUCCESS;
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

/* ------------------------------------------------------------------------ */
/* Events: work runs synchronously here, so a recorded event has completed. */
/* An event is a heap object in the table of live handles, checked there    */
/* before use, so a destroyed event is refused without being touched.       */
/* ------------------------------------------------------------------------ */

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
    CUresult rc = h_publish(e);
    if (rc != CUDA_SUCCESS)
        return rc;
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

static unsigned long long captured_records;

FC_EXPORT unsigned long long fakecuda_captured_event_records(void)
{
    LOCK();
    unsigned long long n = captured_records;
    UNLOCK();
    return n;
}

FC_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream)
{
    ENTER_INIT(cuEventRecord);
    LOCK();
    fc_event *e = h_get(event, MAGIC_EVENT);
    CUresult rc = e && stream_ok_locked(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS) {
        e->recorded = 1, e->gpu_ns = g_gpu_ns;
        int *capturing = stream ? capture_slot_locked(stream) : NULL;
        captured_records += capturing && *capturing != CU_STREAM_CAPTURE_STATUS_NONE;
    }
    UNLOCK();
    return rc;
}

FC_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
    ENTER_INIT(cuEventElapsedTime_v2);
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    fc_event *a = h_get(start, MAGIC_EVENT), *b = h_get(end, MAGIC_EVENT);
    CUresult rc = !a || !b ? CUDA_ERROR_INVALID_HANDLE : !a->recorded || !b->recorded ? CUDA_ERROR_INVALID_HANDLE
                                                                                       : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        *ms = (float)((double)((long long)(b->gpu_ns - a->gpu_ns)) / 1e6);
    UNLOCK();
    return rc;
}

/* Work runs synchronously: an event waited on has completed. */
FC_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    ENTER_INIT(cuStreamWaitEvent);
    if (flags & ~1u)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    CUresult rc = h_get(event, MAGIC_EVENT) && stream_ok_locked(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
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
