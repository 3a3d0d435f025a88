/* Robust statistics of paired ratios, for the search (evolve/search.h):
 * median, spread from the median absolute deviation, the standard error of
 * the median, a range of -/+ 2 standard errors. No libm (the library does
 * not link it): square roots by Newton, sorting by insertion (a few hundred
 * samples at most), medians of larger pools by quickselect. */
#ifndef DRK_EVOLVE_ROBUST_H
#define DRK_EVOLVE_ROBUST_H

#include <stdint.h>

#define DRK_RATIO_MAX 256        /* samples a statistic looks at; more: evenly spaced ones */
#define DRK_EVO_SE_FLOOR 0.0025  /* the standard error of a median is never taken below this */

typedef struct drk_ratio_stats {
    unsigned n;                  /* samples */
    double median;
    double scale;                /* 1.4826 x the median absolute deviation: a robust standard deviation */
    double se;                   /* the median's standard error (>= DRK_EVO_SE_FLOOR; 1 when unknown) */
    double lower, upper;         /* median -/+ 2 se */
} drk_ratio_stats;

/* Of `n` samples (not reordered), from their own spread; fewer than 3:
 * spread unknown (se 1). n = 0: median 1, se 1. */
drk_ratio_stats drk_ratio_stats_of(const float *s, unsigned n);

/* How a standard error takes a kernel's noise into account. */
enum {
    DRK_SE_OWN,      /* the samples' own spread only */
    DRK_SE_CAREFUL,  /* the larger of their own spread and the kernel's noise: for trust and drops */
    DRK_SE_KERNEL,   /* the kernel's noise once known (steadier than a few samples' spread:
                      * twenty samples' MAD is off by 2x now and then): for exploration */
};

/* The statistics of a[0..n) (sorted in place; n <= DRK_RATIO_MAX), the
 * standard error 1.2533 x sigma / sqrt(n) with sigma from their spread or
 * `noise` x their median (the kernel's relative noise; 0: unknown), as
 * `how` says. Fewer than 3 samples: sigma is the kernel's noise if known. */
drk_ratio_stats drk_ratio_stats_sorted(float *a, unsigned n, double noise, int how);

void drk_sort_floats(float *a, unsigned n);
/* Of a sorted array; n >= 1. */
double drk_median_sorted(const float *a, unsigned n);
/* The median absolute deviation of sorted a[0..n) (n <= DRK_RATIO_MAX) about `median`. */
double drk_mad_sorted(const float *a, unsigned n, double median);
/* The k-th smallest of a[0..n) (reordered so that a[0..k) <= a[k]); k < n. */
float drk_select_kth(float *a, unsigned n, unsigned k);
/* What makes the absolute deviations of n samples (3..8) from their own
 * median, biased low when n is small, a standard deviation: 1 / their
 * median for normal samples (by simulation); 0 outside 3..8. */
double drk_dev_factor(unsigned n);
double drk_root(double x);

#endif
