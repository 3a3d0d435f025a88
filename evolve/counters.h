/* Hardware counters of the hottest kernels (DRK_PROFILE=counters): DRAM
 * throughput, achieved occupancy and global sectors per request
 * (coalescing), from CUPTI's range profiler.
 *
 * The range profiler replays a kernel once per pass to collect its counters
 * (3 passes for these metrics on an H200), saving and restoring the memory
 * it touches: a sampled launch costs ~230 ms there (PPO's kernels) and is
 * serialized.
 * So drk samples one launch at a time, of one kernel-shape it chose, within
 * a budget (a share of wall time), never in stream capture:
 *  - the worker thread, as a round closes, picks the hottest kernel-shape of
 *    that round without fresh counters and arms its handle;
 *  - the next launch of that handle and shape (any thread) is sampled in the
 *    launching thread's call: profiler started, the launch, profiler
 *    stopped and evaluated; then disarmed. Other launches compare one
 *    atomic word and go on.
 * The activity record of a sampled launch is not timed (evolve/gputime.h's
 * excluded windows): its replays are not the program's time.
 *
 * Everything is CUPTI's through the library evolve/cupti.c opened; drk's
 * timing stepping aside for another CUPTI client stops the counters too. */
#ifndef DRK_EVOLVE_COUNTERS_H
#define DRK_EVOLVE_COUNTERS_H

#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/driver.h"
#include "evolve/gputime.h"

#define DRK_COUNTERS_KEYS 256      /* kernel-shapes with counters kept */
#define DRK_COUNTERS_REFRESH 20    /* rounds after which a kernel-shape's counters are taken again */
#define DRK_COUNTERS_PATIENCE 3    /* rounds an armed kernel-shape waits for its launch */
#define DRK_COUNTERS_TOP 16        /* the round's hottest kernel-shapes considered */

typedef struct drk_counter_values {
    double dram_pct;          /* dram__throughput.avg.pct_of_peak_sustained_elapsed */
    double occupancy_pct;     /* sm__warps_active.avg.pct_of_peak_sustained_active: achieved occupancy */
    double ld_sectors_per_request, st_sectors_per_request; /* global loads, stores; -1: none made */
} drk_counter_values;

typedef struct drk_counters_row {
    drk_time_key key;
    drk_counter_values v;     /* the latest sample's */
    uint64_t samples;
    uint64_t round;           /* the round the latest sample was armed in */
} drk_counters_row;

typedef struct drk_counters_state {
    int on;                   /* started and not stopped */
    const char *off;          /* why not, or NULL */
    uint64_t samples, discarded; /* taken; given up (another launch in the window, an error) */
    uint64_t cost_ns;         /* wall time of the sampled launches, in the program's calls (setup, release included) */
    uint64_t passes;          /* replay passes a sample needs */
    double budget;            /* share of wall time samples may take */
} drk_counters_state;

/* Once, at configure: the driver table (copied). */
void drk_counters_configure(const drk_driver *drv);

/* On the worker, after timing started (evolve/cupti.h): counters from now
 * on, samples taking at most `budget` (0..1) of wall time. 0, or -1 with the
 * reason in `why` (the CUPTI in use lacks the range profiler). */
int drk_counters_start(double budget, char *why, size_t whylen);

/* On the worker, when round `r` closed: arms the next kernel-shape to
 * sample, if the budget allows. */
void drk_counters_round(const drk_round *r);

/* Stops for good (timing stepped aside: `why`; exit: NULL, the report still
 * says counters were on); waits for a sample under way. */
void drk_counters_stop(const char *why);

/* The launch path. `drk_counters_armed` is the handle armed (0: none);
 * hidden, so the hooks read it directly, not through the GOT. */
extern __attribute__((visibility("hidden"))) _Atomic uintptr_t drk_counters_armed;

/* Before the real launch of `f`: 1 when this launch is the one to sample
 * (the profiler is running; call drk_counters_end with the launch's result),
 * else 0 and nothing happened. */
int drk_counters_begin(uintptr_t f, const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes,
                       CUstream stream);
void drk_counters_end(CUresult launched);

static inline int drk_counters_wanted(uintptr_t f)
{
    return __builtin_expect(atomic_load_explicit(&drk_counters_armed, memory_order_relaxed) == f, 0);
}

/* Whether a sample was ever taken: CUPTI's activity buffers then complete
 * only on a forced flush (measured on the H200: without one, records came
 * late or were dropped for want of buffers), so the worker forces each. */
int drk_counters_used(void);

/* For the report: the state, and the kernel-shapes with counters (most
 * samples' order: as first taken) into `out`; the number written. */
drk_counters_state drk_counters_state_get(void);
size_t drk_counters_rows(drk_counters_row *out, size_t max);

/* In a fork child: no profiler follows; nothing is armed. */
void drk_counters_after_fork_child(void);

#endif
