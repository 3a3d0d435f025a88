#include "evolve/records_cost.h"

/* What a long stretch without records banks at most, beyond two rounds'
 * cost: a program that turns launch-bound after an hour of long kernels
 * pays for a minute's share, not an hour's. */
#define BANK_SPAN_NS 60e9
/* Over by this much of a second's share (besides a round's cost), records
 * rest at once. */
#define OVER_SPAN_NS 1e9

void drk_records_cost_init(drk_records_cost *c, double share, uint64_t now_ns, uint64_t launches, uint64_t waited)
{
    *c = (drk_records_cost){.share = share > 0 ? share : 0, .at_ns = now_ns, .launches = launches,
                            .waited = waited, .round_from = launches, .waited_from = waited, .since_ns = now_ns};
}

double drk_records_cost_of(double on, double launches, double waited_ns)
{
    double spare = waited_ns - DRK_ATTACHED_NS * launches, cost = DRK_RECORD_NS * on - (spare > 0 ? spare : 0);
    return cost > 0 ? cost : 0;
}

static double max_d(double a, double b) { return a > b ? a : b; }

/* The open round's launches and waits so far. */
static double open_launches(const drk_records_cost *c) { return (double)(c->launches - c->round_from); }
static double open_waited(const drk_records_cost *c) { return (double)(c->waited - c->waited_from); }

void drk_records_cost_prior(drk_records_cost *c, uint64_t launches, uint64_t waited_ns)
{
    c->prior_wait = launches ? (double)waited_ns / (double)launches : 0;
}

/* The open round's waits as expected: the latest rounds', or before any
 * ended the prior's for its launches so far, or what it waited already. */
static double open_waits(const drk_records_cost *c)
{
    double w = max_d(open_waited(c), c->round_waited);
    return c->rounds ? w : max_d(w, c->prior_wait * open_launches(c));
}

/* The open round's charge as it stands, its waits to come as expected. */
static double open_cost(const drk_records_cost *c)
{
    return drk_records_cost_of((double)c->open_on, open_launches(c), open_waits(c));
}

void drk_records_cost_reckon(drk_records_cost *c, uint64_t now_ns, uint64_t launches, uint64_t waited, int on,
                             unsigned rounds_ended)
{
    if (now_ns > c->at_ns)
        c->bank_ns += c->share * (double)(now_ns - c->at_ns);
    c->at_ns = now_ns > c->at_ns ? now_ns : c->at_ns;
    uint64_t made = launches > c->launches ? launches - c->launches : 0;
    if (on) {
        c->charged += made;
        c->open_on += made;
    }
    c->launches = launches > c->launches ? launches : c->launches;
    c->waited = waited > c->waited ? waited : c->waited;
    if (rounds_ended) {
        /* Rounds ended between two reckonings share its launches and
         * waits alike; each pays for its own. */
        double l = open_launches(c), w = open_waited(c);
        double cost = drk_records_cost_of((double)c->open_on, l, w);
        c->bank_ns -= cost;
        c->charged_ns += cost;
        c->round_launches = l / rounds_ended;
        c->round_waited = w / rounds_ended;
        c->round_from = c->launches;
        c->waited_from = c->waited;
        c->open_on = 0;
        c->rounds += rounds_ended;
    }
    double cap = 2 * drk_records_cost_round(c) + c->share * BANK_SPAN_NS;
    if (c->bank_ns > cap)
        c->bank_ns = cap;
}

double drk_records_cost_round(const drk_records_cost *c)
{
    double l = max_d(open_launches(c), c->round_launches);
    return drk_records_cost_of(l, l, open_waits(c));
}

int drk_records_cost_affords(const drk_records_cost *c)
{
    if (!c->rounds)
        return !drk_records_cost_over(c);
    return c->bank_ns - open_cost(c) >= drk_records_cost_round(c);
}

int drk_records_cost_over(const drk_records_cost *c)
{
    /* By the rounds that ended: the open round is what is being charged. */
    double round = drk_records_cost_of(c->round_launches, c->round_launches, c->round_waited);
    return c->bank_ns - open_cost(c) < -(round + c->share * OVER_SPAN_NS);
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

double drk_records_cost_charged_ns(const drk_records_cost *c) { return c->charged_ns + open_cost(c); }

double drk_records_cost_charged_share(const drk_records_cost *c)
{
    return c->at_ns > c->since_ns ? drk_records_cost_charged_ns(c) / (double)(c->at_ns - c->since_ns) : 0;
}

unsigned drk_rest_backoff_next(drk_rest_backoff *b, uint64_t marker, unsigned base, unsigned max)
{
    if (!b->next || marker != b->marker || b->next < base)
        b->next = base;
    unsigned now = b->next > max ? max : b->next;
    b->next = now > max / 2 ? max : 2 * now;
    b->marker = marker;
    return now;
}
