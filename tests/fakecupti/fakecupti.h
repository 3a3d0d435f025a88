/* fakecupti: a stand-in CUPTI (libcupti.so.13) for the CPU tests of drk's
 * GPU-time measurement, which reads CUPTI's Activity API.
 *
 * The library exports the few cupti* entry points drk resolves (with the
 * prototypes of the CUDA 13 headers) and delivers activity records that a
 * test queues with the fakecupti_* functions below, as if the GPU had run
 * that work. It is a test fixture: never installed, never shipped. Tests
 * point drk at it with DRK_CUPTI_LIBRARY=$<TARGET_FILE:fakecupti> (the
 * FAKECUPTI_LIBRARY definition of CMake target fakecupti_headers) or link it
 * directly.
 *
 * Behaviour in brief (CUPTI's own semantics unless noted):
 *  - Exported: cuptiActivityRegisterCallbacks, cuptiActivityEnable,
 *    cuptiActivityDisable, cuptiActivityFlushAll, cuptiActivityGetNextRecord,
 *    cuptiActivityGetNumDroppedRecords, cuptiGetTimestamp,
 *    cuptiGetResultString, cuptiFinalize, cuptiGetVersion (CUPTI_API_VERSION
 *    of the headers it was built with), cuptiSubscribe, cuptiUnsubscribe,
 *    and the range profiler's entry points (below). Nothing else: dlsym of any other cupti* name gives NULL. Each counts
 *    its calls under its name (fakecupti_calls), whatever the outcome.
 *  - Records: a kernel is a CUpti_ActivityKernel10 of kind
 *    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL when that kind is enabled, else
 *    of kind CUPTI_ACTIVITY_KIND_KERNEL when that one is; a copy a
 *    CUpti_ActivityMemcpy6 (CUPTI_ACTIVITY_KIND_MEMCPY); a set a
 *    CUpti_ActivityMemset4 (CUPTI_ACTIVITY_KIND_MEMSET). Whether the kind is
 *    enabled is decided when the test queues the work, as the real one
 *    decides when the GPU runs it: work of a kind not enabled makes no record
 *    (not counted as dropped); a record made before its kind was disabled is
 *    still delivered. cuptiActivityEnable/Disable accept any kind between
 *    CUPTI_ACTIVITY_KIND_INVALID and CUPTI_ACTIVITY_KIND_COUNT (exclusive;
 *    else CUPTI_ERROR_INVALID_KIND) and only remember it: no other kind ever
 *    makes a record.
 *  - Fields: those below carry what the test gave; deviceId 0, contextId 1
 *    (FAKECUPTI_CONTEXT_ID), correlationId from one counter shared by all
 *    records, starting at 1. Kernel: gridX..Z, blockX..Z,
 *    dynamicSharedMemory (also sharedMemoryExecuted),
 *    registersPerThread 32 (FAKECUPTI_REGISTERS_PER_THREAD) and
 *    staticSharedMemory 0 unless fakecupti_kernel_resources set others for
 *    the name (records queued after it; until cuptiFinalize), completed = end,
 *    gridId from its own counter (from 1), launchType REGULAR, queued and
 *    submitted CUPTI_TIMESTAMP_UNKNOWN, name (NULL when the test gave NULL;
 *    else a copy owned by the fake, the same pointer for the same name,
 *    valid until cuptiFinalize or process exit). Memcpy: copyKind HTOD,
 *    srcKind PINNED, dstKind DEVICE, copyCount 1. Memset: value 0,
 *    memoryKind DEVICE. Every other field is 0.
 *  - Delivery (cuptiActivityFlushAll, any flag): until nothing is pending,
 *    the request callback is asked for a buffer; records go into it back to
 *    back in the order they were queued, each sizeof its struct (all
 *    multiples of 8), up to its size and to maxNumRecords when that is not
 *    0; it goes to the complete callback with context NULL, streamId 0, the
 *    size given and validSize. When not one record fits (NULL buffer, too
 *    small, or, stricter than documented, not 8-byte aligned), the next
 *    pending record is dropped, and a non-NULL buffer still comes back
 *    through the complete callback, with validSize 0, so the test's buffer
 *    is not lost. Without registered callbacks, cuptiActivityFlushAll
 *    returns CUPTI_ERROR_INVALID_OPERATION and records stay pending.
 *    Callbacks run on the thread that flushes (or queues, below), never
 *    under the fake's lock; deliveries are one at a time (a second thread's
 *    flush waits for the first, then delivers what is left). A callback may
 *    call any cupti* function; a flush or queueing from inside a callback
 *    delivers nothing itself: the delivery under way takes those records.
 *  - Auto-delivery: when a queued record leaves more than
 *    FAKECUPTI_AUTO_DELIVER (256) pending and callbacks are registered, the
 *    queueing call delivers everything pending from the calling thread, as
 *    the real CUPTI does from its own thread when a buffer fills. At most
 *    FAKECUPTI_MAX_PENDING records wait (without callbacks); past that they
 *    are dropped.
 *  - cuptiActivityGetNextRecord: *record NULL gives the first record, else
 *    the one after *record (the size of *record's kind). At the end of
 *    validBufferSizeBytes: CUPTI_ERROR_MAX_LIMIT_REACHED; a kind the fake
 *    does not make, or a record cut off by the end: CUPTI_ERROR_INVALID_KIND;
 *    NULL buffer or record, or *record outside the buffer:
 *    CUPTI_ERROR_INVALID_PARAMETER. *record is only written on success.
 *  - cuptiActivityGetNumDroppedRecords: the records dropped since its last
 *    call (then 0), whatever the context and stream (all buffers are global,
 *    as since CUDA 6).
 *  - cuptiGetTimestamp: CLOCK_MONOTONIC in ns, or the time set with
 *    fakecupti_set_time.
 *  - cuptiSubscribe: CUPTI_SUCCESS and a handle for the first subscriber,
 *    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED while one is subscribed;
 *    the callback is never called (the fake has no callback API).
 *    cuptiUnsubscribe of anything but that handle: INVALID_PARAMETER.
 *  - cuptiFinalize: unregisters callbacks, unsubscribes, disables every
 *    kind, discards pending records (not counted as dropped) and frees the
 *    names (not when called from inside a callback: the buffer being read
 *    may point at them; they are then kept until process exit). The test's
 *    counters (fakecupti_calls/delivered/dropped) carry on.
 *  - fakecupti_fail_all: every cupti* entry point counts its call and
 *    returns the result, doing nothing else. Queueing, and the auto-delivery
 *    through callbacks registered earlier, go on.
 *  - Thread-safe: one lock over all state.
 */
#ifndef FAKECUPTI_H
#define FAKECUPTI_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKECUPTI_AUTO_DELIVER 256
#define FAKECUPTI_MAX_PENDING (1u << 20)
#define FAKECUPTI_CONTEXT_ID 1
#define FAKECUPTI_REGISTERS_PER_THREAD 32

/* ---- work, as if the GPU had run it --------------------------------------- */

/* Queue one record (if its kind is enabled; see above). Times in ns, on the
 * clock of cuptiGetTimestamp if the test wants them to match. */
void fakecupti_kernel(const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                      unsigned bz, unsigned dynamic_shared, uint64_t start_ns, uint64_t end_ns, uint32_t stream);
/* Kernel records of `name` queued from now on carry `regs` registers a thread
 * and `static_shared` bytes of static shared memory, as CUPTI says what the
 * launched function was built with (a kernel reloaded with more registers). */
void fakecupti_kernel_resources(const char *name, unsigned regs, unsigned static_shared);
void fakecupti_memcpy(uint64_t bytes, uint64_t start_ns, uint64_t end_ns, uint32_t stream);
void fakecupti_memset(uint64_t bytes, uint64_t start_ns, uint64_t end_ns, uint32_t stream);

/* ---- clock and faults ----------------------------------------------------- */

/* cuptiGetTimestamp returns ns from now on; 0 returns to CLOCK_MONOTONIC. */
void fakecupti_set_time(uint64_t ns);
/* cuptiGetStreamIdEx answers `id` for every stream from now on (0, the
 * default: CUPTI_ERROR_NOT_SUPPORTED); cuptiGetContextId answers
 * FAKECUPTI_CONTEXT_ID. */
void fakecupti_set_stream_id(uint32_t id);

/* Every cupti* entry point returns r from now on; CUPTI_SUCCESS ends it. */
void fakecupti_fail_all(CUptiResult r);

/* One entry point (named exactly) returns r from now on; CUPTI_SUCCESS ends it. */
void fakecupti_fail_one(const char *entry, CUptiResult r);

/* ---- range profiler --------------------------------------------------------
 * cuptiProfilerInitialize, cuptiProfilerDeInitialize (refused while a host or
 * range profiler object lives), cuptiDeviceGetChipName (device 0 only: FAKECUPTI_CHIP),
 * cuptiProfilerGetCounterAvailability, the profiler host (one object at a
 * time; the metrics below only, else CUPTI_ERROR_INVALID_METRIC_NAME; a pass
 * per metric) and the range profiler (one object; auto range only): each
 * Start..Stop window decodes into the counter data image as `ranges` ranges
 * (1 unless set), every range with the values set here, which
 * cuptiProfilerHostEvaluateToGpuValues reads back from the image. The
 * metrics: dram__throughput.avg.pct_of_peak_sustained_elapsed (42.5),
 * sm__warps_active.avg.pct_of_peak_sustained_active (61.25),
 * l1tex__t_{sectors,requests}_pipe_lsu_mem_global_op_{ld,st}.sum (400, 100,
 * 128, 32), gpu__time_duration.sum (5000). */
#define FAKECUPTI_CHIP "FAKE100"
void fakecupti_set_metric(const char *name, double value);
void fakecupti_set_ranges(size_t n);
/* Real time cuptiRangeProfilerStop takes, as the H200's replay passes do
 * inside the sampled launch (0 by default). */
void fakecupti_set_stop_delay(unsigned ms);
/* 1: cuptiActivityFlushAll without CUPTI_ACTIVITY_FLAG_FLUSH_FORCED hands
 * over nothing (records wait for a forced flush or the auto-delivery of a
 * full buffer), as CUDA 13's CUPTI does with its partly filled buffers on
 * the H200. 0 (the default): every flush delivers everything. */
void fakecupti_hold_unforced(int on);
/* Start..Stop windows so far. */
unsigned long long fakecupti_profiler_windows(void);

/* ---- observation ---------------------------------------------------------- */

/* Calls so far of the exported cupti* function named exactly entry; 0 for a
 * name the library does not export. */
unsigned long long fakecupti_calls(const char *entry);
/* Records handed to complete callbacks, dropped records (both since the
 * start of the process), records now waiting for a delivery. */
size_t fakecupti_delivered(void);
size_t fakecupti_dropped(void);
size_t fakecupti_pending(void);
/* 1 while kind is enabled (cuptiActivityEnable, not yet disabled), else 0. */
int fakecupti_enabled(CUpti_ActivityKind kind);
/* CLOCK_MONOTONIC (ns; the real clock, whatever fakecupti_set_time set)
 * when cuptiActivityRegisterCallbacks was first called: when a tool
 * attached. 0 before. */
uint64_t fakecupti_registered_ns(void);

/* Function pointer types, for programs that reach the fake only through drk
 * (DRK_CUPTI_LIBRARY) and look the helpers up with dlsym on
 * FAKECUPTI_LIBRARY. */
typedef void (*fakecupti_kernel_fn)(const char *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, uint64_t, uint64_t, uint32_t);
typedef void (*fakecupti_kernel_resources_fn)(const char *, unsigned, unsigned);
typedef void (*fakecupti_memcpy_fn)(uint64_t, uint64_t, uint64_t, uint32_t);
typedef void (*fakecupti_memset_fn)(uint64_t, uint64_t, uint64_t, uint32_t);
typedef void (*fakecupti_set_time_fn)(uint64_t);
typedef void (*fakecupti_fail_all_fn)(CUptiResult);
typedef unsigned long long (*fakecupti_calls_fn)(const char *);
typedef size_t (*fakecupti_delivered_fn)(void);
typedef size_t (*fakecupti_dropped_fn)(void);
typedef size_t (*fakecupti_pending_fn)(void);
typedef int (*fakecupti_enabled_fn)(CUpti_ActivityKind);
typedef void (*fakecupti_fail_one_fn)(const char *, CUptiResult);

#ifdef __cplusplus
}
#endif

#endif
