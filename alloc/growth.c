#include "alloc/growth.h"

void drk_growth_observe(drk_growth *g, uint64_t t_ns, uint64_t grown, size_t live_pages, size_t room)
{
    uint64_t took = grown >= g->grown ? grown - g->grown : 0;
    double dt = g->t_ns && t_ns > g->t_ns ? (double)(t_ns - g->t_ns) : 0.0;
    /* Older growth fades: by half over one window, to a tenth over nine. */
    const double w = (double)DRK_GROWTH_WINDOW_NS;
    g->recent = g->recent * w / (w + dt) + (double)took;
    g->t_ns = t_ns, g->grown = grown;
    size_t cap = live_pages / DRK_GROWTH_LIVE_SHARE;
    if (cap < DRK_GROWTH_MIN_PAGES)
        cap = DRK_GROWTH_MIN_PAGES;
    if (cap > DRK_GROWTH_MAX_PAGES)
        cap = DRK_GROWTH_MAX_PAGES;
    if (cap > room)
        cap = room;
    size_t want = g->recent < 0.5 ? 0 : (size_t)(g->recent + 0.5);
    g->high = want < cap ? want : cap;
    g->low = (g->high + 1) / 2;
}
