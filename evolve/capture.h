/* Capture of a real launch, for the engine's trials (docs/evolve.md, "The
 * engine").
 *
 * drk's thread arms one (handle, shape) with a plan. The next launch of it
 * that matches, on any thread and not in stream capture, is captured inside
 * the program's call, before the launch goes to the driver:
 *  - its parameter bytes, packed in the kernel's layout (drk_params_pack);
 *  - with a plan that lists allocations (their extents, and a buffer of
 *    drk's of the same size for each): when every non-null pointer word of
 *    the kernel's flow lies inside one of them, a copy of each into its
 *    buffer, queued on the launch's own stream (so in the program's stream
 *    order, of exactly what the launch will read; buffers in drk's own
 *    context by peer copies), then an event recorded there. The snapshot
 *    is complete once that event has. Otherwise only the bytes: the
 *    pointers moved, and the thread plans again.
 * A plan without allocations (the first look at a kernel) takes the bytes
 * only, so the thread can work out what they reach (evolve/reach.h) and
 * make the buffers; nothing is allocated, resolved or logged in a launch.
 *
 * Every other launch pays one relaxed load and a compare
 * (drk_capture_wanted). One capture at a time; a launch that finds the
 * capture busy (another thread in it) just launches. */
#ifndef DRK_EVOLVE_CAPTURE_H
#define DRK_EVOLVE_CAPTURE_H

#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"
#include "evolve/image/kernel.h"
#include "evolve/image/ptx_flow.h"
#include "evolve/reach.h"

/* The handle armed (0: none); read on every launch. Hidden, so the hooks
 * read it directly, not through the GOT (an instruction a launch). */
extern __attribute__((visibility("hidden"))) _Atomic uintptr_t drk_capture_armed;

static inline int drk_capture_wanted(uintptr_t f)
{
    return __builtin_expect(atomic_load_explicit(&drk_capture_armed, memory_order_relaxed) == f, 0) && f;
}

typedef struct drk_capture_plan {
    uintptr_t handle;               /* the program's CUfunction or CUkernel */
    uint32_t grid[3], block[3], shared_bytes; /* the shape; a launch at another is not captured */
    const drk_param *params;        /* the kernel's layout (its image facts), nparams entries */
    uint32_t nparams;
    const drk_ptx_flow *flow;       /* its pointer words */
    CUcontext ctx;                  /* the launch's context (the event's): a launch in another is not captured */
    CUcontext snap_ctx;             /* the buffers' context, if not ctx (drk's own: peer copies); NULL: ctx */
    unsigned n;                     /* allocations to snapshot; 0: the bytes only */
    drk_extent alloc[DRK_REACH_MAX];
    CUdeviceptr snap[DRK_REACH_MAX]; /* drk's buffer for alloc[i], alloc[i].size bytes */
    CUevent done;                   /* recorded after the copies (required when n > 0) */
} drk_capture_plan;

typedef struct drk_capture_got {
    uint8_t params[DRK_PARAMS_MAX]; /* packed in the kernel's layout, the program's own pointers */
    size_t len;
    CUstream stream;                /* the launch's (the hooks pass a _ptsz entry's NULL as CU_STREAM_PER_THREAD) */
    int snapped;                    /* 1: the plan's copies were queued and `done` recorded after them */
    CUresult rc;                    /* the failing copy or record when snapped is 0 after a plan with n > 0 */
    char why[128];                  /* why only the bytes were taken, in words ("" when snapped or n was 0) */
} drk_capture_got;

/* Once, at configure: the driver table (copied). */
void drk_capture_configure(const drk_driver *drv);

/* drk's thread: arms `plan` (copied), replacing any plan not yet taken.
 * 0, or -1 for a plan that cannot be armed (no handle, no layout, n past
 * DRK_REACH_MAX, n > 0 without an event or a flow, an allocation of no
 * bytes or without its buffer). The layout and flow it points at are not
 * copied: they must live until the capture is taken or disarmed. */
int drk_capture_arm(const drk_capture_plan *plan);

/* drk's thread: takes a finished capture into *out (1) and disarms; 0 while
 * none has happened. It does not wait: a snapshot is read only once the
 * plan's `done` event has completed, which the caller waits for on drk's
 * thread (never the program's). */
int drk_capture_take(drk_capture_got *out);

/* drk's thread: disarms (a plan not taken is dropped). After it returns no
 * launch is inside a capture, so the plan's buffers may be freed. */
void drk_capture_disarm(void);

/* The launch hooks, before the launch goes to the driver, when
 * drk_capture_wanted(f): captures it if it matches the armed plan (shape,
 * context, not in stream capture). `params`/`extra` as the program passed
 * them to cuLaunchKernel or cuLaunchKernelEx. Never fails the launch. */
void drk_capture_launch(uintptr_t f, const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes,
                        CUstream stream, void **params, void **extra);

/* Captures taken (snapped: with the copies queued; moved: bytes only, a
 * pointer outside the plan) and armed-handle launches that found the
 * capture busy or mismatched (another shape or context, a capturing
 * stream, parameters that do not pack), for the report. */
typedef struct drk_capture_stats {
    uint64_t captured, snapped, moved, busy, mismatched;
} drk_capture_stats;
drk_capture_stats drk_capture_stats_get(void);

/* A forked child: nothing armed, the lock fresh (CUDA does not follow a fork). */
void drk_capture_after_fork_child(void);

#endif
