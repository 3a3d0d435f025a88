/* fakecuda, the stand-in libcuda.so.1: primary context teardown, reset and
 * state. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Primary context teardown (cuDevicePrimaryCtxReset, last release)         */
/* ------------------------------------------------------------------------ */

/* What dies with the primary context. Allocations, streams and events
 * record the context current when they were made (the primary when none
 * was), so those of a context made by cuCtxCreate survive. Destroyed:
 *  - device memory (cuMemAlloc*, async and pool allocations) and pinned
 *    host memory (cuMemHostAlloc, cuMemAllocHost*) of the primary context:
 *    unmapped, so a later touch of such a pointer faults, and frees, copies
 *    and queries on it answer as for an unknown pointer; IPC opens of that
 *    memory are closed with it;
 *  - all virtual memory state: every mapping, reservation (unmapped) and
 *    cuMemCreate/imported handle (closed). VMM state carries no context in
 *    the fake and its memory already counts as the primary context's (see
 *    the pointer attributes), so all of it goes;
 *  - streams and events of the primary context (later use:
 *    CUDA_ERROR_INVALID_HANDLE), and any capture status of the NULL,
 *    legacy and per-thread streams;
 *  - its limits (cuCtxSetLimit): back to the defaults.
 * Kept (deviation: the driver unloads a context's modules): modules,
 * libraries and their functions and kernels. Caller holds the lock. */
FC_HIDDEN void primary_teardown_locked(void)
{
    CUcontext primary = (CUcontext)&g_primary;
    g_primary_active = 0;
    ctx_limits_default(&g_primary);

    /* Allocations and mappings; survivors keep their order. */
    size_t kept = 0;
    for (size_t i = 0; i < a_n; i++) {
        struct alloc *a = a_items[i];
        if (a->kind != A_VMM && a->ctx != primary) {
            a_items[kept++] = a;
            continue;
        }
        if (a->kind == A_HOST) {
            g_live_host--;
        } else if (a->kind == A_DEVICE) {
            g_live_dev--;
            g_live_bytes -= a->size;
            struct ipc_open *o = ipc_find(a->base, &a->id);
            if (o) {
                g_ipc_live -= o->refs;
                *o = g_ipc[--g_ipc_n];
            }
        }
        if (a->kind != A_VMM) /* mappings go with their reservations below */
            munmap((void *)a->base, a->maplen);
        free(a);
    }
    a_n = kept;

    for (size_t i = 0; i < g_resv_n; i++)
        munmap((void *)g_resv[i].base, g_resv[i].size);
    g_resv_n = 0;
    for (int i = 0; g_vmm_init && i < FC_VMM_HANDLES; i++) {
        vmm_alloc *v = &g_vmm[i];
        if (v->fd < 0)
            continue;
        close(v->fd);
        v->fd = -1;
        if (!v->imported)
            g_live_bytes -= v->size;
    }

    /* Streams and events: h_del shifts the table, so look again at i. */
    for (size_t i = 0; i < h_n;) {
        struct hdr *h = h_items[i];
        if ((h->magic == MAGIC_STREAM && ((struct stream *)h)->ctx == &g_primary) ||
            (h->magic == MAGIC_EVENT && ((fc_event *)h)->ctx == &g_primary)) {
            h_del(h);
            free(h);
        } else {
            i++;
        }
    }
    memset(g_capture_builtin, 0, sizeof g_capture_builtin);
}

static CUresult primary_reset(CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    primary_teardown_locked();
    UNLOCK();
    return CUDA_SUCCESS;
}

/* Resetting keeps the retain count: the context stays inactive until the
 * next cuDevicePrimaryCtxRetain. Threads that had it current keep it
 * current; calls made meanwhile behave as with an active context (memory,
 * module and launch calls need no context here anyway; deviation: the
 * driver may answer CUDA_ERROR_CONTEXT_IS_DESTROYED), and what they create
 * belongs to the primary context. */
FC_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxReset);
    return primary_reset(dev);
}

FC_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    ENTER_INIT(cuDevicePrimaryCtxReset_v2);
    return primary_reset(dev);
}

/* Flags are always 0: cuDevicePrimaryCtxSetFlags is not modelled. */
FC_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    ENTER_INIT(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    *active = g_primary_refs > 0 && g_primary_active;
    UNLOCK();
    *flags = 0;
    return CUDA_SUCCESS;
}
