#include "evolve/records_cost.h"

/* What a long stretch without records banks at most, beyond two rounds'
 * cost: a program that turns launch-bound after an hour of long kernels
 * pays for a minute's share, not an hour's. */
#define BANK_SPAN_NS 60e9
/* Over by this much of a second's share (besides a round's cost), records
 * rest at once. */
#define OVER_SPAN_NS 1e9

void drk_records_cost_init(drk_records_cost *c, double share, uint64_t now_ns, uint64_t launches)
{
    *c = (drk_records_cost){.share = share > 0 ? share : 0, .at_ns = now_ns, .launches = launches,
                            .round_from = launches, .since_ns = now_ns};
}

void drk_records_cost_reckon(drk_records_cost *c, uint64_t now_ns, uint64_t launches, int on, unsigned rounds_ended)
{
    if (now_ns > c->at_ns)
        c->bank_ns += c->share * (double)(now_ns - c->at_ns);
    c->at_ns = now_ns > c->at_ns ? now_ns : c->at_ns;
    uint64_t made = launches > c->launches ? launches - c->launches : 0;
    if (on) {
        c->charged += made;
        c->bank_ns -= DRK_RECORD_NS * (double)made;
    }
    c->launches = launches > c->launches ? launches : c->launches;
    if (rounds_ended) {
        /* Rounds ended between two reckonings share its launches alike. */
        c->round_launches = (double)(c->launches - c->round_from) / rounds_ended;
        c->round_from = c->launches;
    }
    double cap = 2 * drk_records_cost_round(c) + c->share * BANK_SPAN_NS;
    if (c->bank_ns > cap)
        c->bank_ns = cap;
}

double drk_records_cost_round(const drk_records_cost *c)
{
    double open = (double)(c->launches - c->round_from);
    return DRK_RECORD_NS * (open > c->round_launches ? open : c->round_launches);
}

int drk_records_cost_affords(const drk_records_cost *c) { return c->bank_ns >= drk_records_cost_round(c); }

int drk_records_cost_over(const drk_records_cost *c)
{
    /* By the rounds that ended: the open round's launches are what is
     * being charged. */
    return c->bank_ns < -(DRK_RECORD_NS * c->round_launches + c->share * OVER_SPAN_NS);
}

double drk_attach_cost_ns(uint64_t launches, uint64_t waited_ns)
{
    double cost = DRK_ATTACHED_NS * (double)launches - (double)waited_ns;
    return cost > 0 ? cost : 0;
}

int drk_attach_affordable(double share, uint64_t span_ns, uint64_t launches, uint64_t waited_ns)
{
    return span_ns > 0 && drk_attach_cost_ns(launches, waited_ns) <= share * (double)span_ns;
}

double drk_records_cost_charged_ns(const drk_records_cost *c) { return DRK_RECORD_NS * (double)c->charged; }

double drk_records_cost_charged_share(const drk_records_cost *c)
{
    return c->at_ns > c->since_ns ? drk_records_cost_charged_ns(c) / (double)(c->at_ns - c->since_ns) : 0;
}
