/* The account that bounds what kernel records cost the program
 * (evolve/records_cost.h), driven as drk's thread drives it: a reckoning a
 * 50 ms tick, records on (or kept on) at a round's start when the account
 * holds the round, resting there otherwise, and at once when over; and the
 * rule for attaching CUPTI at all. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "evolve/records_cost.h"

#define TICK 50000000ull
#define SHARE 0.005

typedef struct sim {
    drk_records_cost c;
    uint64_t now, launches;
    int on;
    uint64_t on_ns;       /* time with records on */
    unsigned timed, cuts; /* rounds timed whole; rounds cut short */
} sim;

/* `seconds` of a program launching `rate` kernels a second, its rounds
 * `round_ns` long (ending on ticks). */
static void run(sim *s, double seconds, double rate, uint64_t round_ns)
{
    uint64_t end = s->now + (uint64_t)(seconds * 1e9), round_start = s->now;
    int timing = s->on; /* the open round is timed whole so far */
    while (s->now < end) {
        s->now += TICK;
        s->launches += (uint64_t)(rate * (double)TICK / 1e9);
        if (s->on)
            s->on_ns += TICK;
        unsigned ended = s->now - round_start >= round_ns;
        drk_records_cost_reckon(&s->c, s->now, s->launches, s->on, ended);
        if (ended) {
            round_start = s->now;
            s->timed += timing && s->on;
            s->on = drk_records_cost_affords(&s->c);
            timing = s->on;
        } else if (s->on && drk_records_cost_over(&s->c)) {
            s->on = timing = 0;
            s->cuts++;
        }
    }
}

static void start(sim *s, int on)
{
    *s = (sim){.now = 1000000000ull, .on = on};
    drk_records_cost_init(&s->c, SHARE, s->now, 0);
}

int main(void)
{
    sim s;

    /* Long kernels, few launches (200 a second: 0.04% of the time): the
     * records stay on, every round timed. */
    start(&s, 1);
    run(&s, 600, 200, 100000000ull);
    CHECK(s.on && s.cuts == 0 && s.timed >= 5990);
    CHECK(drk_records_cost_charged_share(&s.c) < 0.0005);

    /* Launch-bound (270,000 launches a second, 54% of the time while
     * records are on), marked rounds of 50 ms: cut in the first tick, then
     * a timed round about every 54/0.5 rounds, the cost within the share. */
    start(&s, 1);
    run(&s, 0.05, 270000, TICK);
    CHECK(!s.on);
    run(&s, 3600, 270000, TICK);
    double share = drk_records_cost_charged_share(&s.c);
    CHECK(share <= SHARE * 1.05 && share >= SHARE * 0.8);
    CHECK(s.timed >= 500 && s.timed <= 800);
    printf("launch-bound, 50 ms rounds: %.3f%% of the time, %u rounds timed of 72000\n", 100 * share, s.timed);

    /* The same with 10 s rounds (no marks, the period's): the first round
     * is cut, then whole rounds, each paid for before it starts. */
    start(&s, 1);
    run(&s, 3600, 270000, 10000000000ull);
    share = drk_records_cost_charged_share(&s.c);
    CHECK(s.cuts == 1 && s.timed >= 2 && s.timed <= 5);
    CHECK(share <= SHARE * 1.05);
    printf("launch-bound, 10 s rounds: %.3f%% of the time, %u rounds timed of 360\n", 100 * share, s.timed);

    /* An hour without launches banks a minute's share and two rounds, not
     * an hour's: once launch-bound, the next minute pays about that. */
    start(&s, 0);
    run(&s, 3600, 0, TICK);
    uint64_t before = s.c.charged;
    run(&s, 60, 270000, TICK);
    double paid = DRK_RECORD_NS * (double)(s.c.charged - before);
    CHECK(paid <= SHARE * 120e9 + 3 * DRK_RECORD_NS * 270000 * 0.05);
    CHECK(paid >= SHARE * 60e9 * 0.8);

    /* Between the two: 3,000 launches a second (0.6%): records on most of
     * the time, resting now and then. */
    start(&s, 1);
    run(&s, 3600, 3000, 100000000ull);
    share = drk_records_cost_charged_share(&s.c);
    CHECK(share <= SHARE * 1.05 && s.timed > 25000 && s.timed < 36000);
    printf("3000 launches/s, 100 ms rounds: %.3f%% of the time, %u rounds timed of 36000\n", 100 * share, s.timed);

    /* No share: records never afford a round with launches in it. */
    start(&s, 0);
    drk_records_cost_init(&s.c, 0, s.now, 0);
    run(&s, 60, 1000, TICK);
    CHECK(s.timed == 0 && s.c.charged == 0);

    /* Attaching CUPTI at all, judged over drk's 200 ms looks: */
    const uint64_t look = 200000000ull;
    /* launch_bench on the H200 (250,000 launches a second, no waits):
     * 50 ms of launch calls a look against 1 ms of share: never. */
    CHECK(!drk_attach_affordable(SHARE, look, 50000, 0));
    CHECK(drk_attach_cost_ns(50000, 0) == 50000 * DRK_ATTACHED_NS);
    /* The same launches while the program waits 150 ms of the look for the
     * GPU (its kernels long): the waits absorb them. */
    CHECK(drk_attach_affordable(SHARE, look, 50000, 150000000ull));
    CHECK(drk_attach_cost_ns(50000, 150000000ull) == 0);
    /* The n-body of evolve_bench, 1,500 launches a second with no wait
     * drk saw: 0.3 ms of 200 against 1 ms. */
    CHECK(drk_attach_affordable(SHARE, look, 300, 0));
    /* At the edge: 1,000 launches are the share of 200 ms exactly, one
     * more is over, and a wait of 1 us brings it back. */
    CHECK(drk_attach_affordable(SHARE, look, 1000, 0));
    CHECK(!drk_attach_affordable(SHARE, look, 1001, 0));
    CHECK(drk_attach_affordable(SHARE, look, 1001, 1000));
    /* No time passed, or no share: never. */
    CHECK(!drk_attach_affordable(SHARE, 0, 0, 0));
    CHECK(!drk_attach_affordable(0, look, 1, 0));
    CHECK(drk_attach_affordable(0, look, 0, 0));
    return CHECK_DONE();
}
