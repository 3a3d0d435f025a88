#include "evolve/capture.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

_Atomic uintptr_t drk_capture_armed;

static drk_driver drv;
/* Serializes the plan, the result and the stats below; a launch only tries it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static drk_capture_plan plan; /* under lock, like everything below */
static int armed;             /* plan waits for its launch */
static int done;              /* got holds a capture not yet taken */
static drk_capture_got got;
static drk_reach scratch;     /* the pointer check's, static to spare the program thread's stack */
static drk_capture_stats st;  /* busy aside: counted without the lock */
static _Atomic uint64_t busy;

void drk_capture_configure(const drk_driver *d) { drv = *d; }

int drk_capture_arm(const drk_capture_plan *p)
{
    if (!p || !p->handle || !p->params || !p->nparams || p->n > DRK_REACH_MAX || (p->n && (!p->done || !p->flow)))
        return -1;
    for (unsigned i = 0; i < p->n; i++)
        if (!p->alloc[i].size || !p->snap[i])
            return -1;
    pthread_mutex_lock(&lock);
    plan = *p;
    armed = 1;
    done = 0;
    pthread_mutex_unlock(&lock);
    /* Last: a launch that sees the handle finds the plan in place (it
     * re-checks under the lock anyway). */
    atomic_store_explicit(&drk_capture_armed, p->handle, memory_order_release);
    return 0;
}

int drk_capture_take(drk_capture_got *out)
{
    pthread_mutex_lock(&lock);
    int had = done;
    if (had) {
        *out = got;
        done = 0;
        armed = 0;
        atomic_store_explicit(&drk_capture_armed, 0, memory_order_relaxed);
    }
    pthread_mutex_unlock(&lock);
    return had;
}

void drk_capture_disarm(void)
{
    atomic_store_explicit(&drk_capture_armed, 0, memory_order_relaxed);
    /* Taking the lock waits for a launch inside a capture; one that comes
     * after finds nothing armed. */
    pthread_mutex_lock(&lock);
    armed = 0;
    done = 0;
    pthread_mutex_unlock(&lock);
}

/* cuLaunchKernel's `extra`: the packed buffer and its size, in
 * BUFFER_POINTER/BUFFER_SIZE pairs ended by END. -1 for anything else (an
 * unknown key, a pair missing, a list that does not end within a few
 * pairs), which the driver refuses too. */
static int extra_buffer(void **extra, const void **buf, size_t *size)
{
    const void *p = NULL;
    const size_t *psize = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (i >= 16)
            return -1;
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            p = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            psize = extra[i + 1];
        else
            return -1;
    }
    if (!p || !psize)
        return -1;
    *buf = p;
    *size = *psize;
    return 0;
}

/* The pointer check's resolver: the planned allocations only (called under
 * the lock, from drk_reach_of). */
static int planned(CUdeviceptr p, drk_extent *out)
{
    for (unsigned i = 0; i < plan.n; i++)
        if (p >= plan.alloc[i].base && p - plan.alloc[i].base < plan.alloc[i].size) {
            *out = plan.alloc[i];
            return 0;
        }
    return -1;
}

/* Queues the plan's copies and its event on `stream`: CUDA_SUCCESS or the
 * first failure, with `what` the call that failed. Buffers of another
 * context (drk's own, where the trials run) are filled by peer copies. */
static CUresult snapshot(CUstream stream, const char **what)
{
    int peer = plan.snap_ctx && plan.snap_ctx != plan.ctx;
    *what = peer ? "cuMemcpyPeerAsync" : "cuMemcpyDtoDAsync_v2";
    if ((peer ? !drv.memcpy_peer_async : !drv.memcpy_dtod_async) || !drv.event_record)
        return CUDA_ERROR_NOT_FOUND;
    for (unsigned i = 0; i < plan.n; i++) {
        CUresult r = peer ? drv.memcpy_peer_async(plan.snap[i], plan.snap_ctx, plan.alloc[i].base, plan.ctx,
                                                  plan.alloc[i].size, stream)
                          : drv.memcpy_dtod_async(plan.snap[i], plan.alloc[i].base, plan.alloc[i].size, stream);
        if (r != CUDA_SUCCESS)
            return r;
    }
    *what = "cuEventRecord";
    return drv.event_record(plan.done, stream);
}

void drk_capture_launch(uintptr_t f, const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes,
                        CUstream stream, void **params, void **extra)
{
    if (pthread_mutex_trylock(&lock) != 0) {
        atomic_fetch_add_explicit(&busy, 1, memory_order_relaxed);
        return;
    }
    if (!armed || plan.handle != f) /* taken or disarmed since the load */
        goto out;
    if (memcmp(plan.grid, grid, sizeof plan.grid) != 0 || memcmp(plan.block, block, sizeof plan.block) != 0 ||
        plan.shared_bytes != shared_bytes)
        goto mismatched;
    CUcontext ctx = NULL;
    if (plan.ctx && (!drv.ctx_get_current || drv.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx != plan.ctx))
        goto mismatched;
    /* In capture the launch becomes a graph node, not work: a later launch
     * will do. A failed query is taken as capturing. */
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!drv.stream_is_capturing || drv.stream_is_capturing(stream, &cap) != CUDA_SUCCESS ||
        cap != CU_STREAM_CAPTURE_STATUS_NONE)
        goto mismatched;
    const void *packed = NULL;
    size_t packed_size = 0;
    if (params ? extra != NULL : !extra || extra_buffer(extra, &packed, &packed_size) != 0)
        goto mismatched; /* both, neither or a malformed `extra`: the driver refuses the launch */
    if (drk_params_pack(plan.params, plan.nparams, params, packed, packed_size, got.params, sizeof got.params,
                        &got.len) != 0)
        goto mismatched;
    got.stream = stream;
    got.snapped = 0;
    got.rc = CUDA_SUCCESS;
    got.why[0] = 0;
    if (plan.n) {
        if (drk_reach_of(plan.flow, got.params, got.len, planned, SIZE_MAX, &scratch) != 0) {
            snprintf(got.why, sizeof got.why, "a pointer left the planned allocations (%.80s)", scratch.why);
            st.moved++;
        } else {
            const char *what;
            got.rc = snapshot(stream, &what);
            if (got.rc == CUDA_SUCCESS)
                got.snapped = 1;
            else
                snprintf(got.why, sizeof got.why, "%s failed (error %d)", what, (int)got.rc);
        }
    }
    st.captured++;
    st.snapped += (uint64_t)got.snapped;
    armed = 0;
    done = 1;
    /* Later launches of the handle pay only the compare. */
    atomic_store_explicit(&drk_capture_armed, 0, memory_order_relaxed);
    goto out;
mismatched:
    st.mismatched++;
out:
    pthread_mutex_unlock(&lock);
}

drk_capture_stats drk_capture_stats_get(void)
{
    pthread_mutex_lock(&lock);
    drk_capture_stats s = st;
    pthread_mutex_unlock(&lock);
    s.busy = atomic_load_explicit(&busy, memory_order_relaxed);
    return s;
}

void drk_capture_after_fork_child(void)
{
    /* The lock may have been held by a parent's thread mid-capture. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
    atomic_store(&drk_capture_armed, 0);
    armed = 0;
    done = 0;
    /* The parent's captures are the parent's (the child's report). */
    memset(&st, 0, sizeof st);
    atomic_store(&busy, 0);
}
