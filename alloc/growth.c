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

size_t drk_growth_claim(drk_growth *g, drk_heap *h, uint64_t t_ns, size_t keep_pages, size_t max, uintptr_t *va)
{
    drk_heap_stats hs = drk_heap_get_stats(h);
    uint64_t held = hs.idle_pages + hs.spare_pages;
    size_t room = keep_pages > held ? keep_pages - (size_t)held : 0;
    size_t ready = drk_heap_ahead_ready(h);
    drk_growth_observe(g, t_ns, drk_heap_grown(h), (size_t)(hs.pages - held), room + ready);
    if (ready >= g->low)
        return 0;
    size_t want = g->high - ready;
    return drk_heap_claim_ahead(h, want < max ? want : max, va);
}
