/* GPU times from CUPTI's activity API: the concurrent-kernel, memcpy and
 * memset records of everything the program runs, handed to evolve/gputime.h.
 * libcupti.so.13 is opened with dlopen when timing starts (on drk's worker
 * thread, never on a program's call), found in this order: a copy already
 * loaded in the process (one CUPTI per process), DRK_CUPTI_LIBRARY, the CUDA
 * toolkit, NVIDIA's nvidia-cuda-cupti wheel in a Python site-packages (PyTorch
 * ships it), the loader's path. Records go into buffers drk mapped at start;
 * the launch path gains only what CUPTI itself does there.
 *
 * drk subscribes to nothing (CUPTI allows one subscriber a process, and
 * profilers need it); it only registers activity buffers, which a profiler
 * taking over the activity API replaces: drk's timing then steps aside. */
#ifndef DRK_EVOLVE_CUPTI_H
#define DRK_EVOLVE_CUPTI_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

typedef struct drk_cupti_settings {
    const char *library; /* DRK_CUPTI_LIBRARY: tried first after a loaded copy; "" for none */
    const char *exe;     /* the program, for a site-packages beside its interpreter */
} drk_cupti_settings;

/* Opens CUPTI and enables the records. 0 on success; -1 with the reason in
 * `why` (CUPTI not found, or an error of its own), drk going on without
 * times. */
int drk_cupti_start(const drk_cupti_settings *s, char *why, size_t whylen);
/* What drk_cupti_start does before its first call into CUPTI (opening the
 * library, its entry points, the buffers), ahead of it: a start that
 * follows makes only the calls that attach CUPTI. 0, or -1 with `why` (the
 * start then fails the same way). */
int drk_cupti_load(const drk_cupti_settings *s, char *why, size_t whylen);

/* Hands every completed record to gputime (forced: also the buffers CUPTI
 * is still filling, at exit). */
void drk_cupti_flush(int forced);

/* Now on the records' clock (CUPTI's), or 0 when CUPTI is not running. */
uint64_t drk_cupti_now(void);

/* Stops drk's records: flushes, disables them. `why` says why (the program
 * began to use CUPTI itself, the process exits). Idempotent. */
void drk_cupti_stop(const char *why);

/* Kernel records on or off (the other kinds stay): CUPTI instruments every
 * kernel launched while they are on, which cost short kernels up to 6% on
 * the H200 (evolve_bench.py's kernels with nothing to win). 0, or -1 when
 * CUPTI is not running or refused. */
int drk_cupti_kernels(int on);

/* The stream drk's trials run on (in `ctx`): its kernels, copies and
 * memsets are drk's own time, counted apart (drk_gputime_own), never the
 * program's rounds or kernels. 0, or -1 when CUPTI cannot name it. */
int drk_cupti_own_stream(CUcontext ctx, CUstream stream);

/* The program (or a tool in it) is starting to use CUPTI itself: drk's
 * records are disabled and its buffers taken back, so no other client ever
 * gets one, and drk never starts them after this. `why` says how it was seen.
 * Any thread; idempotent; waits only for a start under way. */
void drk_cupti_step_aside(const char *why);

/* In a fork child: CUPTI does not follow a fork; no records come. */
void drk_cupti_after_fork_child(void);

/* The library in use, or NULL; the reason timing stopped or never ran, or NULL. */
const char *drk_cupti_path(void);
/* The dlopen handle of the CUPTI timing uses (for evolve/counters.c), or NULL. */
void *drk_cupti_handle(void);
const char *drk_cupti_stopped(void);
int drk_cupti_running(void);

#endif
