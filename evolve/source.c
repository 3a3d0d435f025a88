/* What every variant source shares: counting, naming and classing variants. */
#include "evolve/source.h"

#include <stdio.h>

int drk_variant_rebuilds(const drk_source *s, const drk_variant *v)
{
    for (unsigned i = 0; i < s->nknobs; i++)
        if (s->knobs[i].rebuilds && v->k[i] != 0)
            return 1;
    return 0;
}

uint32_t drk_source_variants(const drk_source *s)
{
    uint32_t n = 1;
    for (unsigned i = 0; i < s->nknobs; i++)
        n *= s->knobs[i].nvalues;
    return n;
}

drk_variant drk_source_variant_at(const drk_source *s, uint32_t i)
{
    drk_variant v = {{0}};
    for (unsigned k = 0; k < s->nknobs; k++) {
        v.k[k] = (uint8_t)(i % s->knobs[k].nvalues);
        i /= s->knobs[k].nvalues;
    }
    return v;
}

int drk_source_variant_text(const drk_source *s, const drk_variant *v, uint32_t block_threads, char *buf, size_t len)
{
    int n = 0;
    if (len)
        buf[0] = 0;
    for (unsigned k = 0; k < s->nknobs; k++) {
        if (v->k[k] == 0 || v->k[k] >= s->knobs[k].nvalues)
            continue;
        int32_t val = s->knobs[k].values[v->k[k]];
        size_t at = (size_t)n < len ? (size_t)n : len;
        if (val == DRK_KNOB_BLOCK && !block_threads)
            n += snprintf(buf + at, len - at, "%s%s=block", n ? " " : "", s->knobs[k].name);
        else
            n += snprintf(buf + at, len - at, "%s%s=%ld", n ? " " : "", s->knobs[k].name,
                          (long)(val == DRK_KNOB_BLOCK ? (int32_t)block_threads : val));
    }
    if (n == 0)
        n = snprintf(buf, len, "default");
    return n;
}
