/* drk's own thread, for the work no program call may wait for: it starts
 * GPU timing (evolve/cupti.h; or drk_worker_start's caller does, see
 * start_here), ends rounds (evolve/gputime.h) at the marks
 * the program makes and by the period when it makes none, and hands each
 * round the memory figures of that moment; with DRK_PROFILE=counters it
 * arms each closed round's next counter sample (evolve/counters.h). It runs
 * only with DRK_PROFILE on while observing; it ends at exit, after the last
 * round. */
#ifndef DRK_SHIM_WORKER_H
#define DRK_SHIM_WORKER_H

#include <stdint.h>

typedef struct drk_worker_settings {
    const char *cupti_library; /* DRK_CUPTI_LIBRARY */
    long round_ms;             /* DRK_ROUND_SECONDS, in ms; 0: rounds only at marks */
    int counters;              /* DRK_PROFILE=counters */
    double counters_budget;    /* DRK_COUNTERS_BUDGET, 0..1 */
    int profile;               /* DRK_PROFILE set: every round timed; else (evolution's
                                * timing only) kernel records rest while it has nothing
                                * to search, one round timed in DRK_REST_SAMPLE */
    double records_share;      /* evolution's timing alone: what kernel records may cost the
                                * program, a share of its run time (evolve/records_cost.h) */
    int evolve_waits;          /* evolution's timing alone: CUPTI is started (its library
                                * loaded, its cost paid) only once the program has launched
                                * a kernel evolution could take up */
    int start_here;            /* CUPTI started by drk_worker_start's caller (a context is
                                * current there: the program may launch next), not by the
                                * thread (no context yet: it starts while one is made) */
} drk_worker_settings;

/* Starts the thread (once). */
void drk_worker_start(const drk_worker_settings *s);

/* The program marked the end of a round (`why`: a static text). Any thread;
 * takes no lock, never waits; a mark made while 64 are pending is lost. */
void drk_worker_mark(const char *why);

/* A program call begins, and ends, waiting for the GPU
 * (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize): time in
 * which slower launch calls would not have lengthened its run. Any thread;
 * a short lock each while drk's thread weighs attaching CUPTI, one atomic
 * load otherwise (never on a launch or allocation path). begins returns
 * what ends is given (0: not timed). */
uint64_t drk_worker_wait_begins(void);
void drk_worker_wait_ends(uint64_t began);

/* At exit: the thread stops, the last records are taken and the open round
 * ends. Before the report is written. */
void drk_worker_at_exit(void);

/* In a fork child: no thread, and no GPU times (CUPTI does not follow a fork). */
void drk_worker_after_fork_child(void);

/* Why the report has no GPU times (profiling off, CUPTI missing, ...), or
 * NULL when it has them. */
const char *drk_worker_timing_off(void);

/* Rounds ended by the program's marks, and by the period. */
uint64_t drk_worker_marks(void);

#endif
