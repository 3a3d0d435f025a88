#include "evolve/search.h"

#include <string.h>

#include "evolve/robust.h"

/* Samples a statistic looks at: a variant's whole memory. */
#define POOL (DRK_EVO_ROUNDS * DRK_EVO_SAMPLES)
_Static_assert(POOL + DRK_EVO_SAMPLES <= DRK_RATIO_MAX, "a variant's samples fit a statistic");
/* Distinct variants the memory can hold. */
#define KNOWN (DRK_EVO_ROUNDS * DRK_EVO_TRIALS)

/* ---- Random stream: xorshift64*, deterministic for a seed ---- */

static uint64_t next_u64(drk_evolution *e)
{
    e->rng ^= e->rng >> 12;
    e->rng ^= e->rng << 25;
    e->rng ^= e->rng >> 27;
    return e->rng * 0x2545f4914f6cdd1dull;
}

static double unit(drk_evolution *e)
{
    return (double)(next_u64(e) >> 11) * (1.0 / 9007199254740992.0);
}

static unsigned below(drk_evolution *e, unsigned n)
{
    return (unsigned)((next_u64(e) >> 32) % n);
}

/* ---- The memory ---- */

static drk_evo_round *mem_at(drk_evolution *e, unsigned i)
{
    return &e->mem[(e->head + i) % DRK_EVO_ROUNDS];
}

static const drk_evo_round *mem_at_c(const drk_evolution *e, unsigned i)
{
    return &e->mem[(e->head + i) % DRK_EVO_ROUNDS];
}

/* The open round's entry; made (the oldest forgotten) when `make`. */
static drk_evo_round *mem_now(drk_evolution *e, int make)
{
    if (e->count && mem_at(e, e->count - 1)->round == e->round)
        return mem_at(e, e->count - 1);
    if (!make)
        return NULL;
    if (e->count == DRK_EVO_ROUNDS) {
        e->head = (e->head + 1) % DRK_EVO_ROUNDS;
        e->count--;
    }
    drk_evo_round *r = mem_at(e, e->count++);
    memset(r, 0, sizeof *r);
    r->round = e->round;
    return r;
}

static drk_evo_trial *trial_in(drk_evo_round *r, uint32_t id)
{
    for (unsigned i = 0; r && i < r->ntrials; i++)
        if (r->t[i].id == id)
            return &r->t[i];
    return NULL;
}

/* The samples of `id`'s trials number from..to-1 (oldest first) in the
 * memory, into a (POOL); the trials it has in all. */
static unsigned gather(const drk_evolution *e, uint32_t id, unsigned from, unsigned to, float *a, unsigned *trials)
{
    unsigned n = 0, t = 0;
    for (unsigned i = 0; i < e->count; i++) {
        const drk_evo_round *r = mem_at_c(e, i);
        for (unsigned j = 0; j < r->ntrials; j++)
            if (r->t[j].id == id) {
                if (t >= from && t < to) {
                    memcpy(a + n, r->t[j].s, r->t[j].n * sizeof *a);
                    n += r->t[j].n;
                }
                t++;
            }
    }
    if (trials)
        *trials = t;
    return n;
}

/* The kernel's measurement noise, relative (a standard deviation of one
 * sample over its value): every trial's deviations from its own median,
 * scaled, pooled, their median. One variant's few samples can agree by
 * luck (five samples' spread is off by half now and then); all trials
 * together say how noisy this kernel's timing is. 0 until
 * DRK_EVO_NOISE_TRIALS trials of 3 samples or more are in the memory. */
static double noise_of(const drk_evolution *e)
{
    float dev[KNOWN * DRK_EVO_SAMPLES];
    unsigned n = 0, trials = 0;
    for (unsigned i = 0; i < e->count; i++) {
        const drk_evo_round *r = mem_at_c(e, i);
        for (unsigned j = 0; j < r->ntrials; j++) {
            const drk_evo_trial *t = &r->t[j];
            if (t->n < 3)
                continue;
            float a[DRK_EVO_SAMPLES];
            memcpy(a, t->s, t->n * sizeof *a);
            drk_sort_floats(a, t->n);
            double m = drk_median_sorted(a, t->n);
            if (m <= 0)
                continue;
            for (unsigned k = 0; k < t->n; k++)
                dev[n++] = (float)(drk_dev_factor(t->n) * (a[k] > m ? a[k] - m : m - a[k]) / m);
            trials++;
        }
    }
    if (trials < DRK_EVO_NOISE_TRIALS)
        return 0;
    /* Their median; both middles when n is even. */
    double hi = drk_select_kth(dev, n, n / 2);
    if (n % 2 == 0) {
        float lo = dev[0];
        for (unsigned i = 1; i < n / 2; i++)
            if (dev[i] > lo)
                lo = dev[i];
        hi = 0.5 * (hi + lo);
    }
    return hi;
}

typedef struct known {
    uint32_t id;
    unsigned trials;
    drk_ratio_stats st;          /* every sample in the memory */
    drk_ratio_stats fresh;       /* all but its first trial's: not the luck that made it look good
                                  * (the predictor's start: all, it was chosen before any trial) */
    double z;                    /* standard errors its fresh median must be above 1 to be trusted */
} known;

typedef struct view {
    known k[KNOWN];
    unsigned n;
    double noise;
} view;

/* Every variant in the memory with its statistics. */
static void look(const drk_evolution *e, view *v)
{
    v->n = 0;
    v->noise = noise_of(e);
    for (unsigned i = 0; i < e->count; i++) {
        const drk_evo_round *r = mem_at_c(e, i);
        for (unsigned j = 0; j < r->ntrials; j++) {
            uint32_t id = r->t[j].id;
            unsigned k = 0;
            while (k < v->n && v->k[k].id != id)
                k++;
            if (k < v->n)
                continue;
            known *x = &v->k[v->n++];
            float a[POOL];
            x->id = id;
            unsigned m = gather(e, id, 0, UINT32_MAX, a, &x->trials);
            x->st = drk_ratio_stats_sorted(a, m, v->noise, DRK_SE_KERNEL);
            int start = id == e->start;
            m = gather(e, id, start ? 0 : 1, UINT32_MAX, a, NULL);
            x->fresh = drk_ratio_stats_sorted(a, m, v->noise, DRK_SE_CAREFUL);
            x->z = start ? DRK_EVO_START_Z : DRK_EVO_TRUST_Z;
        }
    }
}

/* `id`'s latest `last` trials. */
static drk_ratio_stats recent(const drk_evolution *e, uint32_t id, unsigned last, double noise, unsigned *found)
{
    float a[POOL];
    unsigned trials;
    gather(e, id, 0, 0, a, &trials);
    unsigned from = trials > last ? trials - last : 0;
    unsigned n = gather(e, id, from, trials, a, NULL);
    *found = trials - from;
    return drk_ratio_stats_sorted(a, n, noise, DRK_SE_CAREFUL);
}

static const known *find_known(const view *v, uint32_t id)
{
    for (unsigned i = 0; i < v->n; i++)
        if (v->k[i].id == id)
            return &v->k[i];
    return NULL;
}

/* ---- The rules ---- */

/* Trusted: measured in 2 trials or more, 1% faster over all of them, and
 * beyond noise on the samples after the first trial: three standard errors,
 * not two, and not the trial that made it look good -- many variants are
 * tried, and the best looking of many is partly luck. The predictor's start
 * was picked before this search measured anything: all its samples count,
 * and two standard errors do. */
static int trusted(const known *k)
{
    return k && k->trials >= DRK_EVO_TRUST_TRIALS && k->st.median >= 1 + DRK_EVO_MARGIN &&
           k->fresh.median >= 1 + DRK_EVO_MARGIN && k->fresh.median - k->z * k->fresh.se > 1;
}

/* Likely faster than the default: a center for exploration (one trial will do). */
static int qualifies(const known *k)
{
    return k && k->st.median >= 1 + DRK_EVO_MARGIN && k->st.lower > 1;
}

/* Slower than the default by the margin, beyond noise (one sample will do
 * once the kernel's noise is known: a trial cut short after one launch
 * twice as slow). */
static int slower(const drk_ratio_stats *s)
{
    return s->n >= 1 && s->median <= 1 - DRK_EVO_MARGIN && s->upper < 1;
}

/* Faster than the default by the margin, beyond noise. */
static int surely_faster(const drk_ratio_stats *s)
{
    return s->n >= 1 && s->median >= 1 + DRK_EVO_MARGIN && s->lower > 1;
}

static double served_median(const drk_evolution *e, const view *v)
{
    const known *s = e->served != DRK_VARIANT_NONE ? find_known(v, e->served) : NULL;
    return s ? s->st.median : 1.0;
}

/* What a promising variant must be able to beat by the margin: the served
 * variant and the center (or the default). */
static double to_beat(const drk_evolution *e, const view *v, uint32_t id)
{
    double ref = served_median(e, v);
    const known *c = e->center && e->center != id ? find_known(v, e->center) : NULL;
    return c && c->st.median > ref ? c->st.median : ref;
}

/* Worth another trial: promising, and its range says it could beat the
 * served variant and the center by the margin (a variant measured just
 * under the center may be the better one; a trusted one not served may be
 * better than the served one: more samples of it decide). */
static int confirmable(const drk_evolution *e, const view *v, const known *x)
{
    return x->id != e->served && x->st.median >= 1 + DRK_EVO_MARGIN && x->trials < DRK_EVO_CONFIRM_MAX &&
           x->st.upper >= to_beat(e, v, x->id) * (1 + DRK_EVO_MARGIN);
}

static int is_banned(const drk_evolution *e, uint32_t id)
{
    for (unsigned i = 0; i < e->nbanned; i++)
        if (e->banned[i] == id)
            return 1;
    return 0;
}

static void ban(drk_evolution *e, uint32_t id)
{
    if (is_banned(e, id))
        return;
    e->banned[e->ban_next] = id;
    e->ban_next = (e->ban_next + 1) % DRK_EVO_BANNED;
    if (e->nbanned < DRK_EVO_BANNED)
        e->nbanned++;
}

static int is_same(const drk_evolution *e, uint32_t id)
{
    for (unsigned i = 0; i < e->nsame; i++)
        if (e->same[i] == id)
            return 1;
    return 0;
}

static int is_pending(const drk_evolution *e, uint32_t id)
{
    for (unsigned i = 0; i < e->npending; i++)
        if (e->pending[i] == id)
            return 1;
    return 0;
}

static int in_memory(const drk_evolution *e, uint32_t id)
{
    for (unsigned i = 0; i < e->count; i++)
        if (trial_in((drk_evo_round *)mem_at_c(e, i), id))
            return 1;
    return 0;
}

/* Proposed or measured this round already. */
static int busy(drk_evolution *e, uint32_t id)
{
    return is_pending(e, id) || trial_in(mem_now(e, 0), id);
}

/* Nothing more to learn from trying it (now). */
static int tried(drk_evolution *e, uint32_t id)
{
    return id == 0 || is_banned(e, id) || is_same(e, id) || is_pending(e, id) || in_memory(e, id);
}

/* Clearly better than `than` (NULL: the default): by `margin`, and by two
 * standard errors of the difference. */
static int beats(const known *x, const known *than, double margin)
{
    double m = than ? than->st.median : 1.0, se = than ? than->st.se : 0.0;
    return x->st.median >= m * (1 + margin) && x->st.median - m > 2 * drk_root(x->st.se * x->st.se + se * se);
}

static int was_center(const drk_evolution *e, uint32_t id)
{
    for (unsigned i = 0; i < e->nvisited; i++)
        if (e->visited[i] == id)
            return 1;
    return 0;
}

/* The center follows the best variant that qualifies once it is clearly
 * better than the center (not on noise: a plateau of near equals would
 * keep it wandering), or the center no longer qualifies; never back to a
 * center whose neighbourhood was searched (a hop left it for good). */
static void update_center(drk_evolution *e, const view *v)
{
    const known *cur = e->center ? find_known(v, e->center) : NULL;
    if (e->center && !qualifies(cur))
        cur = NULL; /* fallen back: any qualifying one will do */
    const known *best = NULL;
    for (unsigned i = 0; i < v->n; i++) {
        const known *x = &v->k[i];
        if (x != cur && qualifies(x) && !is_banned(e, x->id) && !was_center(e, x->id) &&
            beats(x, cur, DRK_EVO_MARGIN) && (!best || x->st.median > best->st.median))
            best = x;
    }
    uint32_t to = best ? best->id : cur ? cur->id : 0;
    if (to != e->center) {
        e->center = to;
        e->cycle_moves++;
        e->exhausted = 0;
        /* A new center has a neighbourhood not searched yet. */
        if (e->state == DRK_EVO_SETTLED && e->search_rounds < DRK_EVO_SEARCH_ROUNDS)
            e->state = DRK_EVO_SEARCHING;
    }
}

/* ---- Proposals ---- */

static drk_variant decode(const drk_evolution *e, uint32_t id)
{
    drk_variant v;
    drk_variant_from_id(e->space, id, &v);
    return v;
}

/* Knob values of `id` that no center searched so far had: how much of its
 * neighbourhood is new. */
static unsigned novelty(const drk_evolution *e, uint32_t id)
{
    drk_variant x = decode(e, id);
    unsigned n = 0;
    for (unsigned d = 0; d < e->space->ndims; d++) {
        unsigned seen = 0;
        for (unsigned i = 0; i < e->nvisited && !seen; i++)
            seen = decode(e, e->visited[i]).k[d] == x.k[d];
        n += !seen;
    }
    return n;
}

/* A whole cycle around the center moved nothing: of the variants that
 * qualify, measured within DRK_EVO_HOP_SPAN of the center's median and
 * never a center, the one with the most knob values no center had (then
 * the best median) becomes the center (1); 0 when there is none, the
 * center measured under twice the margin (the default, or a flat space:
 * hops would spend its budget on noise), or the hops are spent. Novelty
 * first: near equals crowd around the center (the same carveout with every
 * cache mode), and hopping among them searches lines much like the ones
 * searched. */
static int hop(drk_evolution *e, const view *v)
{
    const known *c = e->center ? find_known(v, e->center) : NULL;
    if (!c || c->st.median < 1 + 2 * DRK_EVO_MARGIN)
        return 0;
    if (!was_center(e, e->center)) {
        if (e->nvisited == DRK_EVO_HOPS + 1)
            return 0;
        e->visited[e->nvisited++] = e->center;
    }
    if (e->nvisited > DRK_EVO_HOPS)
        return 0;
    const known *best = NULL;
    unsigned best_new = 0;
    for (unsigned i = 0; i < v->n; i++) {
        const known *x = &v->k[i];
        if (!qualifies(x) || is_banned(e, x->id) || was_center(e, x->id) ||
            x->st.median < c->st.median * (1 - DRK_EVO_HOP_SPAN))
            continue;
        unsigned fresh = novelty(e, x->id);
        if (!best || fresh > best_new || (fresh == best_new && x->st.median > best->st.median))
            best = x, best_new = fresh;
    }
    if (!best)
        return 0;
    e->center = best->id;
    e->dim = 0;
    e->cycle_moves = 0;
    e->hops++;
    return 1;
}

/* The next untried variant of cyclic coordinate search: along dimension
 * e->dim (the space's order: the register budget first) every value of the
 * line through the center, the nearest first (+ before -); then the next
 * dimension. The position survives a move of the center (a move is cheap:
 * the scan goes on from there, along the line through the new center); a
 * whole cycle over the dimensions without a move hops (above) or exhausts
 * the search. */
static uint32_t next_coordinate(drk_evolution *e, const view *v)
{
    const drk_space *s = e->space;
    for (unsigned guard = 0; !e->exhausted && guard < 2 * s->ndims + 2; guard++) {
        drk_variant c = decode(e, e->center);
        unsigned d = drk_space_scan(s, e->dim), count = s->dims[d].count;
        for (unsigned step = 1; step < count; step++)
            for (int sign = 1; sign >= -1; sign -= 2) {
                int idx = (int)c.k[d] + sign * (int)step;
                if (idx < 0 || idx >= (int)count)
                    continue;
                drk_variant v = c;
                v.k[d] = (uint8_t)idx;
                uint32_t id = drk_variant_id(s, &v);
                if (!tried(e, id))
                    return id;
            }
        e->dim = (e->dim + 1) % s->ndims;
        if (e->dim == 0) {
            if (!e->cycle_moves && hop(e, v))
                guard = 0; /* a new neighbourhood: a whole cycle more */
            else if (!e->cycle_moves)
                e->exhausted = 1;
            e->cycle_moves = 0;
        }
    }
    return DRK_VARIANT_NONE;
}

/* A random variant 1..DRK_EVO_MUTATION_STEPS index steps from the center. */
static uint32_t mutation(drk_evolution *e)
{
    const drk_space *s = e->space;
    unsigned dims[DRK_SPACE_DIMS], nd = 0;
    for (unsigned d = 0; d < s->ndims; d++)
        if (s->dims[d].count > 1)
            dims[nd++] = d;
    if (!nd)
        return DRK_VARIANT_NONE;
    for (int attempt = 0; attempt < 16; attempt++) {
        drk_variant v = decode(e, e->center);
        unsigned steps = 1 + below(e, DRK_EVO_MUTATION_STEPS);
        for (unsigned i = 0; i < steps; i++) {
            unsigned d = dims[below(e, nd)];
            int dir = below(e, 2) ? 1 : -1, idx = (int)v.k[d] + dir;
            if (idx < 0 || idx >= (int)s->dims[d].count)
                idx = (int)v.k[d] - dir; /* reflect at the edge */
            v.k[d] = (uint8_t)idx;
        }
        uint32_t id = drk_variant_id(s, &v);
        if (id != e->center && !tried(e, id))
            return id;
    }
    return DRK_VARIANT_NONE;
}

static double estimate(const drk_evolution *e, uint32_t id, const view *v);

/* Rounds since `id`'s latest trial in the memory (UINT64_MAX: none). */
static uint64_t rounds_since(const drk_evolution *e, uint32_t id)
{
    for (unsigned i = e->count; i-- > 0;) {
        const drk_evo_round *r = mem_at_c(e, i);
        for (unsigned k = 0; k < r->ntrials; k++)
            if (r->t[k].id == id)
                return e->round - r->round;
    }
    return UINT64_MAX;
}

/* The served variant measured again this round: always when the budget
 * left pays for it and an untried candidate besides; otherwise, while
 * searching, every DRK_EVO_SERVED_EVERY rounds, so exploration goes on
 * (measured again every round, it took a budget that paid for one trial a
 * round whole, and the search never moved past its first choice). */
static int served_due(drk_evolution *e, const view *v)
{
    if (e->served == DRK_VARIANT_NONE || busy(e, e->served))
        return 0;
    double left = e->credit_ns - e->reserved_ns;
    return e->state != DRK_EVO_SEARCHING || left >= estimate(e, e->served, v) + e->launches * e->default_ns ||
           rounds_since(e, e->served) >= DRK_EVO_SERVED_EVERY;
}

static uint32_t pick(drk_evolution *e, const view *v)
{
    /* The served variant again: it must stay faster. */
    if (served_due(e, v))
        return e->served;
    /* The predictor's start: a new shape begins near the best known. */
    if (e->start != DRK_VARIANT_NONE && !tried(e, e->start))
        return e->start;
    /* Promising ones again, the highest upper end first (the one that may
     * be best), to trust them or let them fall back. */
    if (e->confirms < DRK_EVO_CONFIRM) {
        const known *best = NULL;
        for (unsigned i = 0; i < v->n; i++) {
            const known *x = &v->k[i];
            if (confirmable(e, v, x) && !busy(e, x->id) && !is_banned(e, x->id) && (!best || x->st.upper > best->st.upper))
                best = x;
        }
        if (best) {
            e->confirms++;
            return best->id;
        }
    }
    if (e->state != DRK_EVO_SEARCHING || e->explore_done)
        return DRK_VARIANT_NONE;
    /* Exploration: a mutation with probability T, else the next coordinate
     * candidate; with none left, a mutation with probability T, else done. */
    if (unit(e) < DRK_EVO_TEMPERATURE) {
        uint32_t id = mutation(e);
        if (id != DRK_VARIANT_NONE) {
            e->mutations++;
            e->explorations++;
            return id;
        }
    }
    uint32_t id = next_coordinate(e, v);
    if (id == DRK_VARIANT_NONE)
        e->explore_done = 1;
    else
        e->explorations++;
    return id;
}

/* launches x the variant's expected time. */
static double estimate(const drk_evolution *e, uint32_t id, const view *v)
{
    const known *x = find_known(v, id);
    double speedup = x ? x->st.median : 1.0;
    speedup = speedup < 0.25 ? 0.25 : speedup > 4 ? 4 : speedup;
    return e->launches * e->default_ns / speedup;
}

/* ---- The interface ---- */

void drk_evolution_init(drk_evolution *e, const drk_space *s, uint64_t seed, const drk_variant *start)
{
    memset(e, 0, sizeof *e);
    e->space = s;
    e->rng = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    if (!e->rng)
        e->rng = 1;
    e->start = DRK_VARIANT_NONE;
    if (start && !drk_variant_is_default(start))
        e->start = drk_variant_id(s, start);
    e->served = DRK_VARIANT_NONE;
    e->state = DRK_EVO_SEARCHING;
}

void drk_evolution_begin_round(drk_evolution *e, double budget_ns, double default_ns, unsigned launches)
{
    if (e->open)
        drk_evolution_end_round(e);
    e->round++;
    e->open = 1;
    e->npending = 0;
    e->proposed = 0;
    e->confirms = 0;
    e->explore_done = 0;
    e->reserved_ns = 0;
    e->default_ns = default_ns > 0 ? default_ns : 0;
    e->launches = launches ? launches : 1;
    if (budget_ns < 0)
        budget_ns = 0;
    e->granted_ns += budget_ns;
    e->credit_ns += budget_ns;
    double cap = DRK_EVO_CARRY_ROUNDS * budget_ns, two = 2 * e->launches * e->default_ns;
    if (cap < two)
        cap = two;
    if (e->credit_ns > cap)
        e->credit_ns = cap;
}

unsigned drk_evolution_next(drk_evolution *e, drk_variant *out, unsigned max)
{
    if (!e->open || e->default_ns <= 0)
        return 0;
    view v;
    look(e, &v);
    update_center(e, &v);
    unsigned n = 0;
    while (n < max && e->proposed < DRK_EVO_TRIALS && e->npending < DRK_EVO_TRIALS) {
        uint32_t id = pick(e, &v);
        if (id == DRK_VARIANT_NONE)
            break;
        double est = estimate(e, id, &v);
        if (e->credit_ns - e->reserved_ns < est)
            break; /* the budget is spent: this one comes first next round */
        e->pending[e->npending] = id;
        e->pending_ns[e->npending++] = est;
        e->reserved_ns += est;
        e->proposed++;
        out[n++] = decode(e, id);
    }
    return n;
}

static void unpend(drk_evolution *e, uint32_t id)
{
    for (unsigned i = 0; i < e->npending; i++)
        if (e->pending[i] == id) {
            e->reserved_ns -= e->pending_ns[i];
            e->npending--;
            e->pending[i] = e->pending[e->npending];
            e->pending_ns[i] = e->pending_ns[e->npending];
            return;
        }
}

void drk_evolution_record(drk_evolution *e, const drk_variant *v, const float *speedups, unsigned n)
{
    uint32_t id = drk_variant_id(e->space, v);
    if (!e->open || id == DRK_VARIANT_NONE || id == 0)
        return;
    unpend(e, id);
    if (!n)
        return;
    double cost = 0;
    for (unsigned i = 0; i < n; i++)
        cost += e->default_ns / (speedups[i] > 0.01f ? speedups[i] : 0.01f);
    e->credit_ns -= cost;
    e->spent_ns += cost;
    e->samples += n;

    drk_evo_round *r = mem_now(e, 1);
    drk_evo_trial *t = trial_in(r, id);
    if (!t) {
        if (r->ntrials == DRK_EVO_TRIALS)
            return; /* more than a round holds: measured and paid, not kept */
        t = &r->t[r->ntrials++];
        t->id = id;
        t->n = 0;
        e->trials++;
    }
    if (t->n + n <= DRK_EVO_SAMPLES) {
        memcpy(t->s + t->n, speedups, n * sizeof *speedups);
        t->n += n;
        return;
    }
    /* Too many to keep: 8 evenly spaced order statistics of them all (the
     * median and the spread survive). */
    float a[POOL + DRK_EVO_SAMPLES];
    unsigned m = t->n;
    memcpy(a, t->s, m * sizeof *a);
    unsigned take = n < POOL ? n : POOL;
    for (unsigned i = 0; i < take; i++)
        a[m++] = speedups[take == n ? i : (unsigned)((uint64_t)i * n / take)];
    drk_sort_floats(a, m);
    for (unsigned i = 0; i < DRK_EVO_SAMPLES; i++)
        t->s[i] = a[(2 * i + 1) * m / (2 * DRK_EVO_SAMPLES)];
    t->n = DRK_EVO_SAMPLES;
}

void drk_evolution_reject(drk_evolution *e, const drk_variant *v)
{
    uint32_t id = drk_variant_id(e->space, v);
    if (id == DRK_VARIANT_NONE || id == 0)
        return;
    unpend(e, id);
    ban(e, id);
    if (e->served == id)
        e->served = DRK_VARIANT_NONE;
}

void drk_evolution_same(drk_evolution *e, const drk_variant *v)
{
    uint32_t id = drk_variant_id(e->space, v);
    if (id == DRK_VARIANT_NONE || id == 0 || is_same(e, id))
        return;
    if (is_pending(e, id) && e->proposed)
        e->proposed--; /* its place in the round goes to the next candidate */
    unpend(e, id);
    e->same[e->same_next] = id;
    e->same_next = (e->same_next + 1) % DRK_EVO_SAME;
    if (e->nsame < DRK_EVO_SAME)
        e->nsame++;
    e->sames++;
}

int drk_evolution_worth_serving(const drk_evolution *e, const drk_variant *v, drk_ratio_stats *st)
{
    *st = drk_evolution_stats(e, v);
    return !is_banned(e, drk_variant_id(e->space, v)) && surely_faster(st);
}

double drk_evolution_promise(const drk_evolution *e, const drk_variant *running)
{
    view v;
    look(e, &v);
    uint32_t run = running ? drk_variant_id(e->space, running) : 0;
    const known *r = run ? find_known(&v, run) : NULL;
    double base = r ? r->st.median : 1.0, best = 1.0;
    for (unsigned i = 0; i < v.n; i++) {
        const known *x = &v.k[i];
        if (x->id != run && !is_banned(e, x->id) && surely_faster(&x->st) && x->st.lower / base > best)
            best = x->st.lower / base;
    }
    return best;
}

/* The served variant measured slower than the default, or slower than it
 * used to and no longer surely faster than the default: the world changed
 * (another input, another driver, another neighbour on the GPU); what the
 * memory says is stale. Start again from
 * the default. Slower than the default: never tried again; merely slower
 * than before: the first candidate of the new search. */
static void restart(drk_evolution *e, int slower_than_default)
{
    uint32_t was = e->served;
    if (slower_than_default)
        ban(e, was);
    e->served = DRK_VARIANT_NONE;
    e->count = e->head = 0;
    e->center = 0;
    e->dim = 0;
    e->cycle_moves = 0;
    e->exhausted = 0;
    e->nvisited = 0;
    e->start = slower_than_default ? DRK_VARIANT_NONE : was;
    e->state = DRK_EVO_SEARCHING;
    e->search_rounds = e->measured_rounds = 0;
    e->drops++;
}

/* The served `id`'s trials in the memory (the return), and in *first the
 * index of the first measured after the round that chose it: those were
 * measured while it served. */
static unsigned serving_trials(const drk_evolution *e, uint32_t id, unsigned *first)
{
    unsigned t = 0;
    *first = 0;
    for (unsigned i = 0; i < e->count; i++) {
        const drk_evo_round *r = mem_at_c(e, i);
        for (unsigned j = 0; j < r->ntrials; j++)
            if (r->t[j].id == id) {
                t++;
                if (r->round <= e->served_round)
                    *first = t;
            }
    }
    return t;
}

/* The latest trial of the served `id` below the rest of its history since
 * it began serving by DRK_EVO_CHANGE_Z standard errors of the difference.
 * Not its trials before: replays share the GPU with the program's kernels,
 * so their ratios move when the program's kernels do, and they do once a
 * variant serves (H200, 2026-12-03: the n-body's regs=56 cache=1 measured
 * 5.8x on replays before it served and 2.0x after, its true speedup;
 * held against the 5.8x it was dropped, and the default served again). */
static int changed(const drk_evolution *e, uint32_t id, double noise)
{
    float a[POOL];
    unsigned first, trials = serving_trials(e, id, &first);
    if (trials < first + 2)
        return 0;
    unsigned n = gather(e, id, trials - 1, trials, a, NULL);
    drk_ratio_stats last = drk_ratio_stats_sorted(a, n, noise, DRK_SE_CAREFUL);
    n = gather(e, id, first, trials - 1, a, NULL);
    drk_ratio_stats before = drk_ratio_stats_sorted(a, n, noise, DRK_SE_CAREFUL);
    return last.n >= 3 && before.n >= 3 &&
           last.median < before.median - DRK_EVO_CHANGE_Z * drk_root(last.se * last.se + before.se * before.se);
}

/* The served `id`'s trials since it began serving, together, surely
 * faster than the default (none: no). Its memory from before can mix two
 * ways of timing (a candidate against the original's runs, the served
 * variant in pairs) that a shared GPU moves apart; what it measured while
 * serving is one of them. */
static int surely_faster_serving(const drk_evolution *e, uint32_t id, double noise)
{
    float a[POOL];
    unsigned first, trials = serving_trials(e, id, &first);
    if (trials <= first)
        return 0;
    unsigned n = gather(e, id, first, trials, a, NULL);
    drk_ratio_stats st = drk_ratio_stats_sorted(a, n, noise, DRK_SE_CAREFUL);
    return surely_faster(&st);
}

drk_evo_decision drk_evolution_end_round(drk_evolution *e)
{
    drk_evo_decision d;
    memset(&d, 0, sizeof d);
    uint32_t before = e->served;
    if (e->open) {
        view v;
        look(e, &v);
        if (e->served != DRK_VARIANT_NONE) {
            unsigned found;
            drk_ratio_stats last = recent(e, e->served, 1, v.noise, &found);
            drk_ratio_stats two = recent(e, e->served, 2, v.noise, &found);
            int measured_now = trial_in(mem_now(e, 0), e->served) != NULL;
            if (measured_now && (slower(&last) || (found == 2 && slower(&two)))) {
                restart(e, 1);
                d.dropped = 1;
                v.n = 0;
            } else if (measured_now && changed(e, e->served, v.noise) && !surely_faster(&last)) {
                /* Slower than it was and no longer surely faster than the
                 * default. One still surely faster stays: a restart would
                 * serve the default, slower still, for the rounds the new
                 * search takes (trials share the GPU with the program, so
                 * their ratios move when its kernels do). */
                restart(e, 0);
                d.dropped = 1;
                v.n = 0;
            } else if (!trusted(find_known(&v, e->served)) && !surely_faster_serving(e, e->served, v.noise)) {
                e->served = DRK_VARIANT_NONE; /* lost trust: not slower, no longer surely faster */
            }
        }
        const known *best = NULL;
        for (unsigned i = 0; i < v.n; i++)
            if (trusted(&v.k[i]) && !is_banned(e, v.k[i].id) && (!best || v.k[i].st.median > best->st.median))
                best = &v.k[i];
        /* Switch to another trusted one faster by the margin (both are
         * safe; noise between near equals costs nothing). */
        const known *now = e->served != DRK_VARIANT_NONE ? find_known(&v, e->served) : NULL;
        if (best && best->id != e->served && (!now || best->st.median >= now->st.median * (1 + DRK_EVO_MARGIN))) {
            e->served = best->id;
            e->served_round = e->round;
        }
        update_center(e, &v);
        if (e->state == DRK_EVO_SEARCHING && !d.dropped) {
            e->search_rounds++;
            e->measured_rounds += mem_now(e, 0) != NULL;
            int confirming = 0;
            for (unsigned i = 0; i < v.n; i++)
                confirming |= confirmable(e, &v, &v.k[i]) && !is_banned(e, v.k[i].id);
            int start_left = e->start != DRK_VARIANT_NONE && !tried(e, e->start);
            /* Barren: after DRK_EVO_BARREN_ROUNDS nothing serves that wins
             * twice the margin. Every search round costs the program more
             * than its trials (H200: +2-23% in such a round), which a space
             * this flat cannot pay back. */
            const known *sv = e->served != DRK_VARIANT_NONE ? find_known(&v, e->served) : NULL;
            int barren = e->measured_rounds >= DRK_EVO_BARREN_ROUNDS &&
                         (!sv || sv->st.median < 1 + 2 * DRK_EVO_MARGIN);
            if ((e->exhausted && !confirming && !start_left) || barren || e->search_rounds >= DRK_EVO_SEARCH_ROUNDS)
                e->state = DRK_EVO_SETTLED;
        }
        e->open = 0;
        e->npending = 0;
        e->reserved_ns = 0;
    }
    if (e->served != before && before != DRK_VARIANT_NONE && e->served != DRK_VARIANT_NONE)
        e->switches++;
    d.serve = e->served != DRK_VARIANT_NONE;
    if (d.serve) {
        d.variant = decode(e, e->served);
        d.stats = drk_evolution_stats(e, &d.variant);
    } else {
        d.stats = drk_ratio_stats_of(NULL, 0);
    }
    d.changed = e->served != before;
    d.state = e->state;
    return d;
}

int drk_evolution_serving(const drk_evolution *e, drk_variant *out)
{
    if (e->served == DRK_VARIANT_NONE)
        return 0;
    drk_variant_from_id(e->space, e->served, out);
    return 1;
}

int drk_evolution_served_due(drk_evolution *e)
{
    if (!e->open || e->default_ns <= 0 || e->proposed)
        return 0;
    view v;
    look(e, &v);
    return served_due(e, &v) && e->credit_ns - e->reserved_ns >= estimate(e, e->served, &v);
}

drk_ratio_stats drk_evolution_stats(const drk_evolution *e, const drk_variant *v)
{
    float a[POOL];
    unsigned n = gather(e, drk_variant_id(e->space, v), 0, UINT32_MAX, a, NULL);
    return drk_ratio_stats_sorted(a, n, noise_of(e), DRK_SE_KERNEL);
}

unsigned drk_evolution_trials_of(const drk_evolution *e, const drk_variant *v)
{
    float a[POOL];
    unsigned t;
    gather(e, drk_variant_id(e->space, v), 0, 0, a, &t);
    return t;
}

double drk_evolution_noise(const drk_evolution *e)
{
    return noise_of(e);
}
