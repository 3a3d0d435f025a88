/* How far ahead of demand the device pool maps pages (docs/memory.md,
 * "Growth ahead of demand"): watermarks from the pages a heap's
 * allocations took for growth recently. Pure arithmetic on observations,
 * so the grower thread (device.c, real time) and the trace replayer
 * (tools/trace_grow.c, a trace's times) follow the same policy. */
#ifndef DRK_ALLOC_GROWTH_H
#define DRK_ALLOC_GROWTH_H

#include <stddef.h>
#include <stdint.h>

#include "alloc/heap.h"

/* Growth is remembered over about this long (half of it after one window,
 * a tenth after nine): what the recent past took, the near future is
 * expected to take. */
#define DRK_GROWTH_WINDOW_NS 100000000ull
/* Pages mapped ahead at most, and at most this share of the pages under
 * live data (pages ahead that a program never takes are held for nothing). */
#define DRK_GROWTH_MAX_PAGES 512u
#define DRK_GROWTH_LIVE_SHARE 32u
/* ...but the share never caps below this many pages. */
#define DRK_GROWTH_MIN_PAGES 2u

typedef struct drk_growth {
    uint64_t t_ns;   /* the last observation */
    uint64_t grown;  /* the heap's count then (drk_heap_grown) */
    double recent;   /* pages grown, decayed over the window */
    size_t low, high; /* map ahead when fewer than low are ready, up to high */
} drk_growth;

/* An observation at `t_ns` of the heap's grown count `grown`, with
 * `live_pages` pages under live data and room for `room` more idle pages
 * within the reserve (pages ahead are idle pages): sets low and high. */
void drk_growth_observe(drk_growth *g, uint64_t t_ns, uint64_t grown, size_t live_pages, size_t room);

/* The grower's turn at heap `h` at `t_ns` (its caller holds what guards
 * the heap): observes the heap's growth with `keep_pages` idle pages allowed
 * (the reserve) and, while fewer than the low watermark are ready at the
 * frontier, claims up to `max` pages toward the high one (heap.h). Returns
 * how many it claimed, the first at *va; 0: nothing to do now. */
size_t drk_growth_claim(drk_growth *g, drk_heap *h, uint64_t t_ns, size_t keep_pages, size_t max, uintptr_t *va);

#endif
