/* The monotonic clock in nanoseconds, for durations (not CUPTI's clock,
 * which the rounds use). */
#ifndef DRK_BASE_CLOCK_H
#define DRK_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t drk_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
