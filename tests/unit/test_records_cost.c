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
    uint64_t now, launches, waited;
    int on;
    uint64_t on_ns;       /* time with records on */
    unsigned timed, cuts; /* rounds timed whole; rounds cut short */
} sim;

/* drk's thread at a tick, after the program's launches and waits in it:
 * the reckoning, then at a round's end records on for the next round if
 * the account affords it; mid-round cut when over, or (with `whole`
 * followed: a round timed whole since they came on) when spent. */
static void tick(sim *s, unsigned ended, int *timing, int *whole)
{
    s->now += TICK;
    if (s->on)
        s->on_ns += TICK;
    drk_records_cost_reckon(&s->c, s->now, s->launches, s->waited, s->on, ended);
    if (ended) {
        s->timed += *timing && s->on;
        if (whole)
            *whole = s->on && (*whole || *timing);
        s->on = *timing = drk_records_cost_affords(&s->c);
        if (whole)
            *whole &= s->on;
    } else if (s->on &&
               (drk_records_cost_over(&s->c) || (whole && *whole && !drk_records_cost_affords(&s->c)))) {
        s->on = *timing = 0;
        if (whole)
            *whole = 0;
        s->cuts++;
    }
}

/* `seconds` of a program launching `rate` kernels a second, its rounds
 * `round_ns` long (ending on ticks). */
static void run(sim *s, double seconds, double rate, uint64_t round_ns)
{
    uint64_t end = s->now + (uint64_t)(seconds * 1e9), round_start = s->now;
    int timing = s->on; /* the open round is timed whole so far */
    while (s->now < end) {
        s->launches += (uint64_t)(rate * (double)TICK / 1e9);
        unsigned ended = s->now + TICK - round_start >= round_ns;
        tick(s, ended, &timing, NULL);
        if (ended)
            round_start = s->now;
    }
}

static void start(sim *s, int on)
{
    *s = (sim){.now = 1000000000ull, .on = on};
    drk_records_cost_init(&s->c, SHARE, s->now, 0, 0);
}

/* `rounds` rounds of a program that launches `launches` kernels in a burst
 * at each round's start (its first tick), then waits for the GPU `wait_ns`
 * in a synchronize over its other ticks (the round `ticks` ticks long), as
 * evolve_bench's programs and a trainer's steps do. */
static void run_bursts(sim *s, unsigned rounds, uint64_t launches, uint64_t wait_ns, unsigned ticks)
{
    /* A round timed whole since the records came on: as on the H200, the
     * one before the account started (CUPTI's start takes a while). */
    int whole = s->on;
    for (unsigned r = 0; r < rounds; r++) {
        int timing = s->on;
        for (unsigned t = 0; t < ticks; t++) {
            if (t == 0)
                s->launches += launches;
            else
                s->waited += wait_ns / (ticks - 1);
            tick(s, t == ticks - 1, &timing, &whole);
        }
    }
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

    /* Naive matmul in evolve_bench on the H200: 1,500 launches a round, 3 ms
     * of records, then ~80 ms waiting for the GPU. Charged by launches
     * alone, one round in seven was timed; the waits absorb the records'
     * cost, so every round is, from the first, none cut mid-round (not
     * even the account's first, whose burst comes before any wait). */
    start(&s, 1);
    run_bursts(&s, 2000, 1500, 80000000ull, 2);
    CHECK(s.timed == 2000 && s.cuts == 0 && s.c.charged == 2000 * 1500ull);
    CHECK(drk_records_cost_charged_ns(&s.c) == 0);
    printf("1500 launches then 80 ms of waits a round: %u rounds timed of 2000, %.1f ms charged\n", s.timed,
           drk_records_cost_charged_ns(&s.c) / 1e6);
    /* A burst longer than the share can carry before its first wait
     * (engine_busy's `waits` under ASan: 4,287 launches caught by the
     * account's first reckoning, 150 ms of waits to come): without a
     * prior it looks launch-bound and the first round is cut; with the
     * window that let CUPTI attach (the same launches and waits), it is
     * timed, and so are the rounds after. */
    start(&s, 1);
    run_bursts(&s, 1, 5000, 150000000ull, 4);
    CHECK(s.cuts == 1 && s.timed == 0);
    start(&s, 1);
    drk_records_cost_prior(&s.c, 5000, 150000000ull);
    run_bursts(&s, 200, 5000, 150000000ull, 4);
    CHECK(s.cuts == 0 && s.timed == 200 && drk_records_cost_charged_ns(&s.c) == 0);
    /* The prior holds until a round ends: a program that stops waiting
     * then is cut within a round, as without it. */
    start(&s, 1);
    drk_records_cost_prior(&s.c, 5000, 150000000ull);
    run_bursts(&s, 1, 5000, 150000000ull, 4);
    run_bursts(&s, 2, 150000, 0, 4);
    CHECK(!s.on && s.cuts == 1);
    /* Waits that absorb CUPTI's attached cost and part of the records':
     * 10,000 launches a 150 ms round (10 ms attached, 20 ms of records)
     * against 25 ms of waits cost 5 ms a round net, the share pays 0.75:
     * one round in about 7 timed (one in 27 by launches alone), within the
     * share. */
    start(&s, 1);
    run_bursts(&s, 4000, 10000, 25000000ull, 3);
    share = drk_records_cost_charged_share(&s.c);
    CHECK(share <= SHARE * 1.05 && share >= SHARE * 0.8 && s.timed >= 500 && s.timed <= 700);
    printf("10000 launches then 25 ms of waits a round: %.3f%% of the time, %u rounds timed of 4000\n", 100 * share,
           s.timed);
    /* A program that stops waiting (its kernels now short, its launches
     * the same): within a round or two the records rest, and from then on
     * it is the launch-bound case. */
    start(&s, 1);
    run_bursts(&s, 100, 1500, 80000000ull, 2);
    CHECK(s.timed == 100 && s.on);
    unsigned before_t = s.timed;
    run_bursts(&s, 3, 15000, 0, 2);
    CHECK(!s.on && s.timed - before_t <= 1);
    run_bursts(&s, 3000, 15000, 0, 2);
    share = drk_records_cost_charged_share(&s.c);
    CHECK(share <= SHARE * 1.05);
    CHECK(drk_records_cost_of(1500, 1500, 0) == 1500 * DRK_RECORD_NS);
    CHECK(drk_records_cost_of(1500, 1500, 80e6) == 0);
    CHECK(drk_records_cost_of(1000, 1000, 1.5e6) == 1000 * DRK_RECORD_NS - 0.5e6);
    CHECK(drk_records_cost_of(0, 1000, 0) == 0);

    /* No share: records never afford a round with launches in it. */
    start(&s, 0);
    drk_records_cost_init(&s.c, 0, s.now, 0, 0);
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

    /* Rests while evolution has nothing to search: 20, 40, 80, 160, then
     * 320 for ever while nothing is new; 20 again once the marker moved
     * (a new kernel-shape launched, a new target chosen), and doubling
     * from there. */
    drk_rest_backoff b = {0, 0};
    static const unsigned want[] = {20, 40, 80, 160, 320, 320, 320};
    for (unsigned i = 0; i < sizeof want / sizeof *want; i++)
        CHECK(drk_rest_backoff_next(&b, 7, 20, 320) == want[i]);
    CHECK(drk_rest_backoff_next(&b, 8, 20, 320) == 20 && drk_rest_backoff_next(&b, 8, 20, 320) == 40);
    CHECK(drk_rest_backoff_next(&b, 9, 20, 320) == 20);
    /* A cap that is no power of two of the start, or below it: never past it. */
    drk_rest_backoff c = {0, 0};
    CHECK(drk_rest_backoff_next(&c, 0, 20, 100) == 20 && drk_rest_backoff_next(&c, 0, 20, 100) == 40 &&
          drk_rest_backoff_next(&c, 0, 20, 100) == 80 && drk_rest_backoff_next(&c, 0, 20, 100) == 100 &&
          drk_rest_backoff_next(&c, 0, 20, 100) == 100);
    drk_rest_backoff d = {0, 0};
    CHECK(drk_rest_backoff_next(&d, 0, 20, 5) == 5 && drk_rest_backoff_next(&d, 0, 20, 5) == 5);
    return CHECK_DONE();
}
