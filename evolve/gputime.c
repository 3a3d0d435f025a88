#include "evolve/gputime.h"

#include "evolve/findings.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Log buckets: DRK_TIME_SUB equal parts of each doubling ---- */

static unsigned bucket_of(uint64_t ns)
{
    if (ns < 1)
        return 0;
    unsigned oct = 63u - (unsigned)__builtin_clzll(ns);
    /* The bits below the leading one, as a share of the doubling. */
    uint64_t rest = ns - ((uint64_t)1 << oct);
    unsigned sub = oct >= 4 ? (unsigned)(rest >> (oct - 4)) : (unsigned)(rest << (4 - oct));
    unsigned b = oct * DRK_TIME_SUB + sub;
    return b < DRK_TIME_BUCKETS ? b : DRK_TIME_BUCKETS - 1;
}

/* The middle of bucket b, in ns. */
static uint64_t bucket_mid(unsigned b)
{
    unsigned oct = b / DRK_TIME_SUB, sub = b % DRK_TIME_SUB;
    double lo = (double)((uint64_t)1 << oct) * (1.0 + (double)sub / DRK_TIME_SUB);
    double width = (double)((uint64_t)1 << oct) / DRK_TIME_SUB;
    return (uint64_t)(lo + width / 2);
}

_Static_assert(DRK_TIME_SUB == 16, "bucket_of takes four bits below the leading one");

void drk_time_hist_add(drk_time_hist *h, uint64_t ns)
{
    if (h->n == 0 || ns < h->min_ns)
        h->min_ns = ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
    h->n++;
    h->total_ns += ns;
    h->bucket[bucket_of(ns)]++;
}

void drk_time_hist_merge(drk_time_hist *into, const drk_time_hist *from)
{
    if (!from->n)
        return;
    if (into->n == 0 || from->min_ns < into->min_ns)
        into->min_ns = from->min_ns;
    if (from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
    into->n += from->n;
    into->total_ns += from->total_ns;
    for (unsigned b = 0; b < DRK_TIME_BUCKETS; b++)
        into->bucket[b] += from->bucket[b];
}

uint64_t drk_time_hist_quantile(const drk_time_hist *h, double q)
{
    if (!h->n)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->n);
    if (want >= h->n)
        want = h->n - 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < DRK_TIME_BUCKETS; b++) {
        seen += h->bucket[b];
        if (seen > want) {
            uint64_t v = bucket_mid(b);
            return v < h->min_ns ? h->min_ns : v > h->max_ns ? h->max_ns : v;
        }
    }
    return h->max_ns;
}

drk_time_stats drk_time_hist_stats(const drk_time_hist *h)
{
    drk_time_stats s = {h->n, h->total_ns, h->min_ns, 0, 0, h->max_ns};
    s.median_ns = drk_time_hist_quantile(h, 0.5);
    s.p95_ns = drk_time_hist_quantile(h, 0.95);
    return s;
}

/* ---- Kernel-shapes ---- */

typedef struct entry {
    drk_time_key key;   /* key.name: owned */
    uint64_t hash;
    drk_time_hist all;
    /* Its place in the `touched` list of the open round it last ran in (a
     * cache of that list). */
    uint64_t last_round;
    size_t last_touch;
    /* Its medians in the last rounds it ran in, for the findings. */
    uint64_t recent[DRK_RECENT_ROUNDS];
    uint64_t rounds_seen;
    /* Its occupancies, by the function's registers and static shared
     * memory (occ[latest] handed in last), and its best in the rounds
     * closed so far (max_warps_per_sm 0: none) and the last round of it. */
    drk_occupancy occ[DRK_OCC_VARIANTS];
    unsigned nocc, latest;
    drk_occupancy best_occ;
    uint64_t best_occ_round;
    /* Its kernel's best at other shapes before it first ran, that shape
     * and its last round: what a new shape is held to as long as it runs. */
    drk_occupancy inherited;
    drk_time_key inherited_key;
    uint64_t inherited_round;
} entry;

/* Intervals of an open round, for its busy time and gaps. */
typedef struct interval {
    uint64_t start, end;
    const char *first, *last; /* what ran at the start and at the end of it */
} interval;

typedef struct interval_list {
    interval *v;
    size_t n, cap;
} interval_list;

/* A round whose end is marked but whose records may still be coming, or the
 * newest one, still open at its end. Records go to the round their start
 * falls in. */
typedef struct open_round {
    drk_round r;
    interval_list ivs; /* the program's kernels and copies */
    interval_list own; /* drk's own records */
    struct touch {
        entry *e;
        drk_time_hist *h;
        /* What the round's records said the function was built with:
         * registers and static shared memory, distinct pairs. */
        uint32_t built[DRK_OCC_VARIANTS][2];
        unsigned nbuilt;
    } *touched;
    size_t ntouched, touched_cap;
} open_round;

#define TABLE (2 * DRK_TIME_ENTRIES)
#define OPEN_MAX 65 /* the newest round and 64 marked ones */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table[TABLE];
static entry *by_index[DRK_TIME_ENTRIES];
static size_t nentries, ntimed; /* made; those with a record */
static drk_gputime_totals totals;

static open_round open[OPEN_MAX]; /* oldest first; open[nopen - 1] has no end yet */
static unsigned nopen;
static uint64_t opened;           /* rounds opened: the next one's index */
static drk_time_hist *spare_hists; /* histograms of closed rounds, for reuse (linked by their first bucket) */

/* Loads the driver JIT'd, waiting for the round they fall in to close. */
#define JITS_MAX 64
static struct jit {
    uint64_t at_ns;
    char how[96];
    unsigned kernels;
    uint64_t load_ns;
} jits[JITS_MAX];
static unsigned njits;

/* Windows whose kernel records are not timed (sampled for counters). */
#define EXCLUDED 8
static struct window {
    uint64_t from, to;
} excluded[EXCLUDED];
static unsigned nexcluded;

/* Stretches without kernel records (drk_gputime_sampling), the last 8. */
#define UNSAMPLED 8
static struct window unsampled[UNSAMPLED];
static unsigned nunsampled;
static drk_round ring[DRK_ROUNDS_KEPT];
static uint64_t closed; /* rounds closed; ring[closed % KEPT] is the next slot */
static drk_rounds_merged merged;

static uint64_t key_hash(const drk_time_key *k)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *s = (const unsigned char *)k->name; *s; s++)
        h = (h ^ *s) * 1099511628211ull;
    uint32_t g[7] = {k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shared_bytes};
    for (int i = 0; i < 7; i++)
        h = (h ^ g[i]) * 1099511628211ull;
    return h;
}

static int same_key(const drk_time_key *a, const drk_time_key *b)
{
    return memcmp(a->grid, b->grid, sizeof a->grid) == 0 && memcmp(a->block, b->block, sizeof a->block) == 0 &&
           a->shared_bytes == b->shared_bytes && strcmp(a->name, b->name) == 0;
}

/* The entry of `k`, made if new; NULL when the table is full. Locked. */
static entry *find(const drk_time_key *k)
{
    uint64_t h = key_hash(k);
    for (size_t i = h % TABLE;; i = (i + 1) % TABLE) {
        entry *e = table[i];
        if (!e) {
            if (nentries >= DRK_TIME_ENTRIES)
                return NULL;
            e = calloc(1, sizeof *e);
            char *name = e ? strdup(k->name) : NULL;
            if (!name) {
                free(e);
                return NULL;
            }
            e->key = *k;
            e->key.name = name;
            e->hash = h;
            e->last_round = UINT64_MAX;
            by_index[nentries++] = e;
            table[i] = e;
            return e;
        }
        if (e->hash == h && same_key(&e->key, k))
            return e;
    }
}

/* ---- Open rounds ---- */

/* The open round a record starting at `start` belongs to; one that started
 * before every open round goes to the oldest. Locked. */
static open_round *find_round(uint64_t start)
{
    for (unsigned i = nopen; i-- > 1;)
        if (start >= open[i].r.start_ns)
            return &open[i];
    return &open[0];
}

/* find_round for the program's records, counting those late. */
static open_round *round_of(uint64_t start)
{
    if (start < open[0].r.start_ns)
        totals.late++;
    return find_round(start);
}

static drk_time_hist *hist_new(void)
{
    drk_time_hist *h = spare_hists;
    if (h) {
        memcpy(&spare_hists, h->bucket, sizeof spare_hists);
        memset(h, 0, sizeof *h);
        return h;
    }
    return calloc(1, sizeof *h);
}

static void hist_spare(drk_time_hist *h)
{
    memcpy(h->bucket, &spare_hists, sizeof spare_hists);
    spare_hists = h;
}

/* The round's entry of `e` (its histogram and what ran), made if new; NULL
 * if memory ran out. Valid until the next call. */
static struct touch *round_touch(open_round *o, entry *e)
{
    if (e->last_round == o->r.index)
        return &o->touched[e->last_touch];
    size_t at = o->ntouched;
    for (size_t i = 0; i < o->ntouched && at == o->ntouched; i++)
        if (o->touched[i].e == e)
            at = i;
    if (at == o->ntouched) {
        if (o->ntouched == o->touched_cap) {
            size_t cap = o->touched_cap ? o->touched_cap * 2 : 64;
            struct touch *n = realloc(o->touched, cap * sizeof *n);
            if (!n)
                return NULL;
            o->touched = n, o->touched_cap = cap;
        }
        drk_time_hist *h = hist_new();
        if (!h)
            return NULL;
        o->touched[o->ntouched++] = (struct touch){.e = e, .h = h};
    }
    e->last_round = o->r.index, e->last_touch = at;
    return &o->touched[at];
}

static void note_built(struct touch *t, uint32_t regs, uint32_t static_shared)
{
    if (!regs && !static_shared)
        return; /* the record does not say */
    for (unsigned i = 0; i < t->nbuilt; i++)
        if (t->built[i][0] == regs && t->built[i][1] == static_shared)
            return;
    if (t->nbuilt < DRK_OCC_VARIANTS)
        t->built[t->nbuilt][0] = regs, t->built[t->nbuilt][1] = static_shared, t->nbuilt++;
}

static int by_start(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts and merges a list's intervals in place: their union. */
static void merge_intervals(interval_list *l)
{
    if (l->n < 2)
        return;
    qsort(l->v, l->n, sizeof *l->v, by_start);
    size_t w = 0;
    for (size_t r = 1; r < l->n; r++) {
        if (l->v[r].start <= l->v[w].end) {
            if (l->v[r].end > l->v[w].end) {
                l->v[w].end = l->v[r].end;
                l->v[w].last = l->v[r].last;
            }
        } else {
            l->v[++w] = l->v[r];
        }
    }
    l->n = w + 1;
}

/* [start, end) into `l`, from the round's start (`from`) on. */
static void add_to(interval_list *l, uint64_t from, uint64_t start, uint64_t end, const char *what)
{
    if (start < from)
        start = from;
    if (end <= start)
        return;
    if (l->n == l->cap) {
        merge_intervals(l); /* the union needs no more than the merged ones */
        if (l->n * 2 >= l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 1024;
            interval *n = realloc(l->v, cap * sizeof *n);
            if (!n)
                return; /* busy time is then short by this interval */
            l->v = n, l->cap = cap;
        }
    }
    l->v[l->n++] = (interval){start, end, what, what};
}

static void add_interval(open_round *o, uint64_t start, uint64_t end, const char *what)
{
    add_to(&o->ivs, o->r.start_ns, start, end, what);
}

/* Opens a round at `start` as the newest. Locked. */
static void open_new(uint64_t start)
{
    open_round *o = &open[nopen++];
    interval_list ivs = o->ivs, own = o->own;
    struct touch *t = o->touched;
    size_t tc = o->touched_cap;
    memset(o, 0, sizeof *o);
    ivs.n = own.n = 0;
    o->ivs = ivs, o->own = own, o->touched = t, o->touched_cap = tc;
    o->r.start_ns = start;
    o->r.index = opened++;
}

/* ---- Feeding ---- */

static void free_all(void)
{
    for (size_t i = 0; i < nentries; i++) {
        free((char *)by_index[i]->key.name);
        free(by_index[i]);
    }
    for (unsigned i = 0; i < OPEN_MAX; i++) {
        for (size_t k = 0; k < open[i].ntouched; k++)
            free(open[i].touched[k].h);
        free(open[i].ivs.v);
        free(open[i].own.v);
        free(open[i].touched);
    }
    while (spare_hists) {
        drk_time_hist *h = spare_hists;
        memcpy(&spare_hists, h->bucket, sizeof spare_hists);
        free(h);
    }
    memset(table, 0, sizeof table);
    memset(open, 0, sizeof open);
    nentries = ntimed = 0;
}

void drk_gputime_reset(uint64_t start_ns)
{
    pthread_mutex_lock(&lock);
    free_all();
    memset(&totals, 0, sizeof totals);
    memset(ring, 0, sizeof ring);
    memset(&merged, 0, sizeof merged);
    drk_findings_reset();
    njits = 0;
    nexcluded = nunsampled = 0;
    closed = opened = 0;
    nopen = 0;
    open_new(start_ns);
    pthread_mutex_unlock(&lock);
}

void drk_gputime_after_fork_child(void)
{
    /* A thread of the parent's (drk's, feeding records) may have held the
     * lock mid-update at the fork: a fresh lock, and what it guarded
     * dropped rather than freed (the child's copy of the parent's memory;
     * a list may be half made). */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
    memset(table, 0, sizeof table);
    memset(open, 0, sizeof open);
    nentries = ntimed = 0;
    spare_hists = NULL;
    drk_gputime_reset(0);
}

void drk_gputime_exclude(uint64_t from_ns, uint64_t to_ns)
{
    pthread_mutex_lock(&lock);
    struct window *w = nexcluded ? &excluded[(nexcluded - 1) % EXCLUDED] : NULL;
    if (w && w->from == from_ns)
        w->to = to_ns;
    else
        excluded[nexcluded++ % EXCLUDED] = (struct window){from_ns, to_ns};
    pthread_mutex_unlock(&lock);
}

static int is_excluded(uint64_t start_ns)
{
    for (unsigned i = 0; i < nexcluded && i < EXCLUDED; i++)
        if (start_ns >= excluded[i].from && start_ns <= excluded[i].to)
            return 1;
    return 0;
}

void drk_gputime_kernel(const drk_time_key *k, uint64_t start_ns, uint64_t end_ns)
{
    drk_gputime_kernel_built(k, 0, 0, start_ns, end_ns);
}

void drk_gputime_kernel_built(const drk_time_key *k, uint32_t regs, uint32_t static_shared, uint64_t start_ns,
                              uint64_t end_ns)
{
    uint64_t ns = end_ns > start_ns ? end_ns - start_ns : 0;
    pthread_mutex_lock(&lock);
    /* A launch sampled for counters: in its window, or with no duration
     * (CUPTI's record of a replayed launch has none, on the H200). */
    if (__builtin_expect(end_ns <= start_ns, 0) || (__builtin_expect(nexcluded != 0, 0) && is_excluded(start_ns))) {
        totals.excluded++;
        pthread_mutex_unlock(&lock);
        return;
    }
    if (!nopen)
        open_new(start_ns);
    open_round *o = round_of(start_ns);
    totals.kernels++;
    totals.kernel_ns += ns;
    o->r.kernels++;
    o->r.kernel_ns += ns;
    entry *e = k->name ? find(k) : NULL;
    struct touch *t = e ? round_touch(o, e) : NULL;
    if (!e) {
        totals.untracked++;
        add_interval(o, start_ns, end_ns, k->name ? "(untracked kernel)" : "(unnamed kernel)");
    } else {
        ntimed += e->all.n == 0;
        drk_time_hist_add(&e->all, ns);
        if (t) {
            drk_time_hist_add(t->h, ns);
            note_built(t, regs, static_shared);
        }
        add_interval(o, start_ns, end_ns, e->key.name);
    }
    pthread_mutex_unlock(&lock);
}

void drk_gputime_copy(int kind, uint64_t bytes, uint64_t start_ns, uint64_t end_ns)
{
    uint64_t ns = end_ns > start_ns ? end_ns - start_ns : 0;
    pthread_mutex_lock(&lock);
    if (!nopen)
        open_new(start_ns);
    open_round *o = round_of(start_ns);
    totals.copies++;
    totals.copy_ns += ns;
    totals.copy_bytes += bytes;
    o->r.copies++;
    o->r.copy_ns += ns;
    add_interval(o, start_ns, end_ns, kind == DRK_COPY_MEMSET ? "memset" : "memcpy");
    pthread_mutex_unlock(&lock);
}

void drk_gputime_dropped(uint64_t n)
{
    pthread_mutex_lock(&lock);
    totals.dropped += n;
    pthread_mutex_unlock(&lock);
}

/* ---- Closing a round ---- */

static void keep_gap(drk_round *r, uint64_t ns, const char *after, const char *before, uint64_t drk_ns)
{
    if (!ns)
        return;
    unsigned at = r->ngaps < DRK_ROUND_GAPS ? r->ngaps++ : DRK_ROUND_GAPS;
    if (at == DRK_ROUND_GAPS) {
        if (ns <= r->gaps[DRK_ROUND_GAPS - 1].ns)
            return;
        at = DRK_ROUND_GAPS - 1;
    }
    /* Insertion into the list, largest first. */
    while (at > 0 && r->gaps[at - 1].ns < ns) {
        r->gaps[at] = r->gaps[at - 1];
        at--;
    }
    r->gaps[at] = (drk_round_gap){ns, after, before, drk_ns};
}

/* The union of `l`'s intervals within [from, to), `l` merged; *at: the
 * first that may reach past `from`, advanced as the calls go forward. */
static uint64_t overlap(const interval_list *l, size_t *at, uint64_t from, uint64_t to)
{
    while (*at < l->n && l->v[*at].end <= from)
        (*at)++;
    uint64_t ns = 0;
    for (size_t i = *at; i < l->n && l->v[i].start < to; i++) {
        uint64_t s = l->v[i].start > from ? l->v[i].start : from, e = l->v[i].end < to ? l->v[i].end : to;
        ns += e > s ? e - s : 0;
    }
    return ns;
}

/* Busy time and gaps of an open round over [start, end], and what of
 * them drk's own records took; what runs past its end is handed to the
 * next open round. */
static void busy_and_gaps(open_round *o, open_round *next)
{
    drk_round *r = &o->r;
    merge_intervals(&o->ivs);
    merge_intervals(&o->own);
    for (size_t i = 0; i < o->own.n && next; i++)
        if (o->own.v[i].end > r->end_ns)
            add_to(&next->own, next->r.start_ns, o->own.v[i].start, o->own.v[i].end, NULL);
    size_t at = 0;
    r->drk_ns = overlap(&o->own, &at, r->start_ns, r->end_ns);
    at = 0;
    uint64_t busy = 0, prev_end = r->start_ns;
    const char *prev = NULL;
    for (size_t i = 0; i < o->ivs.n; i++) {
        const interval *v = &o->ivs.v[i];
        uint64_t s = v->start, e = v->end < r->end_ns ? v->end : r->end_ns;
        if (v->end > r->end_ns && next)
            add_interval(next, s > r->end_ns ? s : r->end_ns, v->end, v->last);
        if (s >= r->end_ns)
            continue;
        if (s > prev_end)
            keep_gap(r, s - prev_end, prev, v->first, overlap(&o->own, &at, prev_end, s));
        busy += e - s;
        prev_end = e, prev = v->last;
    }
    if (r->end_ns > prev_end)
        keep_gap(r, r->end_ns - prev_end, prev, NULL, overlap(&o->own, &at, prev_end, r->end_ns));
    r->busy_ns = busy;
    o->ivs.n = o->own.n = 0;
}

/* A round's hold on an entry ends: its histogram goes back to the spares. */
static void release_touch(open_round *o, struct touch *t)
{
    if (t->e->last_round == o->r.index)
        t->e->last_round = UINT64_MAX;
    hist_spare(t->h);
}

static int by_round_total(const void *a, const void *b)
{
    const struct touch *x = a, *y = b;
    return x->h->total_ns > y->h->total_ns ? -1 : x->h->total_ns < y->h->total_ns;
}

/* The round's top kernel-shapes; its histograms go back to the spares. */
static void top_rows(open_round *o)
{
    drk_round *r = &o->r;
    if (o->ntouched)
        qsort(o->touched, o->ntouched, sizeof *o->touched, by_round_total);
    for (size_t i = 0; i < o->ntouched; i++) {
        struct touch *t = &o->touched[i];
        if (r->ntop < DRK_ROUND_TOP) {
            r->top[r->ntop].key = t->e->key;
            r->top[r->ntop].stats = drk_time_hist_stats(t->h);
            r->ntop++;
        } else {
            r->other_ns += t->h->total_ns;
            r->other_kernels += t->h->n;
        }
        release_touch(o, t);
    }
    o->ntouched = 0;
}

/* The occupancy a round's entry ran at: the lowest of the variants its
 * records name, else the latest handed in; unknown if none was. */
static drk_occupancy round_occ(const struct touch *t)
{
    const entry *e = t->e;
    drk_occupancy o = {0};
    for (unsigned b = 0; b < t->nbuilt; b++)
        for (unsigned v = 0; v < e->nocc; v++)
            if (e->occ[v].regs == t->built[b][0] && e->occ[v].static_shared == t->built[b][1] &&
                (!o.max_warps_per_sm || e->occ[v].theoretical < o.theoretical))
                o = e->occ[v];
    if (!o.max_warps_per_sm && e->nocc)
        o = e->occ[e->latest];
    return o;
}

/* In a shape's first round: whether its kernel ran before at other shapes,
 * and their best occupancy (the latest round of the best), which the new
 * shape is held to from now on. */
static void name_before(entry *e, drk_finding_shape *f)
{
    for (size_t k = 0; k < nentries; k++) {
        const entry *x = by_index[k];
        if (x == e || !x->rounds_seen || strcmp(x->key.name, e->key.name) != 0)
            continue;
        f->name_seen_before = 1;
        const drk_occupancy *b = &x->best_occ, *held = &e->inherited;
        if (b->max_warps_per_sm && (!held->max_warps_per_sm || b->theoretical > held->theoretical ||
                                    (b->theoretical == held->theoretical && x->best_occ_round > e->inherited_round))) {
            e->inherited = *b;
            e->inherited_key = x->key;
            e->inherited_round = x->best_occ_round;
        }
    }
}

/* What a shape's occupancy this round is held to: the better of its own best
 * in earlier rounds and what it inherited. */
static void occ_before(const entry *e, drk_finding_shape *f)
{
    if (e->inherited.max_warps_per_sm)
        f->occ_before = e->inherited, f->occ_before_key = e->inherited_key, f->occ_before_round = e->inherited_round;
    if (e->best_occ.max_warps_per_sm &&
        (!f->occ_before.max_warps_per_sm || e->best_occ.theoretical >= f->occ_before.theoretical))
        f->occ_before = e->best_occ, f->occ_before_key = e->key, f->occ_before_round = e->best_occ_round;
}

/* What the findings need of the round's kernel-shapes; each entry's history
 * moves on by this round. Before top_rows, which hands the histograms back. */
static size_t finding_shapes(open_round *o, drk_finding_shape *out)
{
    size_t n = 0;
    for (size_t i = 0; i < o->ntouched; i++) {
        entry *e = o->touched[i].e;
        const drk_time_hist *h = o->touched[i].h;
        drk_finding_shape *f = &out[n++];
        *f = (drk_finding_shape){.key = e->key, .launches = h->n, .total_ns = h->total_ns,
                                 .median_ns = drk_time_hist_quantile(h, 0.5), .rounds_before = e->rounds_seen,
                                 .occ = round_occ(&o->touched[i])};
        unsigned kept = e->rounds_seen < DRK_RECENT_ROUNDS ? (unsigned)e->rounds_seen : DRK_RECENT_ROUNDS;
        for (unsigned k = 0; k < kept; k++)
            if (!f->best_recent_ns || e->recent[k] < f->best_recent_ns)
                f->best_recent_ns = e->recent[k];
        if (!e->rounds_seen)
            name_before(e, f);
        occ_before(e, f);
    }
    for (size_t i = 0; i < n; i++) {
        entry *e = o->touched[i].e;
        e->recent[e->rounds_seen++ % DRK_RECENT_ROUNDS] = out[i].median_ns;
        const drk_occupancy *occ = &out[i].occ;
        if (occ->max_warps_per_sm && (!e->best_occ.max_warps_per_sm || occ->theoretical >= e->best_occ.theoretical))
            e->best_occ = *occ, e->best_occ_round = o->r.index;
    }
    return n;
}

/* Closes the oldest open round into the kept ones. Locked; nopen >= 2. */
static int overlaps_unsampled(const drk_round *r)
{
    for (unsigned i = 0; i < nunsampled && i < UNSAMPLED; i++)
        if (r->start_ns < unsampled[i].to && r->end_ns > unsampled[i].from)
            return 1;
    return 0;
}

void drk_gputime_own(uint64_t start_ns, uint64_t end_ns)
{
    pthread_mutex_lock(&lock);
    totals.own++;
    totals.own_ns += end_ns > start_ns ? end_ns - start_ns : 0;
    /* Not counted late: the program's records are what `late` is about. */
    if (nopen) {
        open_round *o = find_round(start_ns);
        add_to(&o->own, o->r.start_ns, start_ns, end_ns, NULL);
    }
    pthread_mutex_unlock(&lock);
}

void drk_gputime_sampling(int on, uint64_t at_ns)
{
    pthread_mutex_lock(&lock);
    struct window *w = nunsampled ? &unsampled[(nunsampled - 1) % UNSAMPLED] : NULL;
    if (!on && (!w || w->to != UINT64_MAX))
        unsampled[nunsampled++ % UNSAMPLED] = (struct window){at_ns, UINT64_MAX};
    else if (on && w && w->to == UINT64_MAX)
        w->to = at_ns;
    pthread_mutex_unlock(&lock);
}

/* The oldest round leaves the open ones; the rest shift down and its
 * buffers move to the free end. */
static void shift_out(void)
{
    open_round done = open[0];
    memmove(&open[0], &open[1], (nopen - 1) * sizeof *open);
    open[--nopen] = done;
}

/* 1 when the round was kept, 0 when it closed unsampled. */
static int close_oldest(void)
{
    static drk_finding_shape shapes[DRK_TIME_ENTRIES]; /* under the lock */
    open_round *o = &open[0];
    if (overlaps_unsampled(&o->r)) {
        totals.unsampled++;
        for (size_t i = 0; i < o->ntouched; i++)
            release_touch(o, &o->touched[i]);
        o->ntouched = 0;
        shift_out();
        return 0;
    }
    busy_and_gaps(o, &open[1]);
    size_t nshapes = finding_shapes(o, shapes);
    top_rows(o);
    drk_findings_round(&o->r, shapes, nshapes);
    unsigned keep = 0;
    for (unsigned i = 0; i < njits; i++) {
        if (jits[i].at_ns < o->r.end_ns)
            drk_findings_jit(o->r.index, jits[i].how, jits[i].kernels, jits[i].load_ns);
        else
            jits[keep++] = jits[i];
    }
    njits = keep;
    drk_round *slot = &ring[closed % DRK_ROUNDS_KEPT];
    if (closed >= DRK_ROUNDS_KEPT) {
        merged.rounds++;
        merged.wall_ns += slot->end_ns - slot->start_ns;
        merged.busy_ns += slot->busy_ns;
        merged.kernel_ns += slot->kernel_ns;
        merged.copy_ns += slot->copy_ns;
        merged.kernels += slot->kernels;
        merged.copies += slot->copies;
    }
    *slot = o->r;
    closed++;
    shift_out();
    return 1;
}

int drk_gputime_mark(uint64_t end_ns, const char *why, const drk_round_memory *mem)
{
    pthread_mutex_lock(&lock);
    open_round *o = nopen ? &open[nopen - 1] : NULL;
    int ok = o && end_ns > o->r.start_ns;
    if (ok) {
        if (nopen == OPEN_MAX)
            close_oldest(); /* its records had their chance */
        o = &open[nopen - 1];
        o->r.end_ns = end_ns;
        o->r.why = why;
        if (mem)
            o->r.memory = *mem;
        open_new(end_ns);
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

unsigned drk_gputime_close(uint64_t through_ns)
{
    pthread_mutex_lock(&lock);
    unsigned n = 0;
    while (nopen > 1 && open[0].r.end_ns <= through_ns)
        n += (unsigned)close_oldest();
    pthread_mutex_unlock(&lock);
    return n;
}

int drk_gputime_closable(uint64_t through_ns)
{
    pthread_mutex_lock(&lock);
    int yes = nopen > 1 && open[0].r.end_ns <= through_ns;
    pthread_mutex_unlock(&lock);
    return yes;
}

int drk_gputime_round_end(uint64_t end_ns, const char *why, const drk_round_memory *mem)
{
    if (!drk_gputime_mark(end_ns, why, mem))
        return 0;
    drk_gputime_close(UINT64_MAX);
    return 1;
}

/* ---- Reading ---- */

drk_gputime_totals drk_gputime_totals_get(void)
{
    pthread_mutex_lock(&lock);
    drk_gputime_totals t = totals;
    t.entries = ntimed;
    pthread_mutex_unlock(&lock);
    return t;
}

static int by_total(const void *a, const void *b)
{
    const drk_time_row *x = a, *y = b;
    return x->stats.total_ns > y->stats.total_ns ? -1 : x->stats.total_ns < y->stats.total_ns;
}

size_t drk_gputime_rows(drk_time_row *out, size_t max)
{
    pthread_mutex_lock(&lock);
    size_t n = 0;
    drk_time_row *all = malloc((nentries ? nentries : 1) * sizeof *all);
    if (all) {
        size_t timed = 0; /* an entry made for its occupancy alone has no row */
        for (size_t i = 0; i < nentries; i++)
            if (by_index[i]->all.n)
                all[timed++] = (drk_time_row){by_index[i]->key, drk_time_hist_stats(&by_index[i]->all)};
        qsort(all, timed, sizeof *all, by_total);
        n = timed < max ? timed : max;
        memcpy(out, all, n * sizeof *out);
        free(all);
    }
    pthread_mutex_unlock(&lock);
    return n;
}

size_t drk_gputime_rounds(const drk_round **out, size_t max)
{
    pthread_mutex_lock(&lock);
    uint64_t kept = closed < DRK_ROUNDS_KEPT ? closed : DRK_ROUNDS_KEPT;
    size_t n = 0;
    for (uint64_t i = closed - kept; i < closed && n < max; i++)
        out[n++] = &ring[i % DRK_ROUNDS_KEPT];
    pthread_mutex_unlock(&lock);
    return n;
}

drk_rounds_merged drk_gputime_merged(void)
{
    pthread_mutex_lock(&lock);
    drk_rounds_merged m = merged;
    pthread_mutex_unlock(&lock);
    return m;
}

uint64_t drk_gputime_open_since(void)
{
    pthread_mutex_lock(&lock);
    uint64_t s = nopen ? open[nopen - 1].r.start_ns : 0;
    pthread_mutex_unlock(&lock);
    return s;
}

void drk_gputime_jit(uint64_t at_ns, const char *how, unsigned kernels, uint64_t load_ns)
{
    pthread_mutex_lock(&lock);
    if (nopen && njits < JITS_MAX) {
        struct jit *j = &jits[njits++];
        *j = (struct jit){at_ns, "", kernels, load_ns};
        snprintf(j->how, sizeof j->how, "%s", how);
    }
    pthread_mutex_unlock(&lock);
}

size_t drk_gputime_findings(const drk_finding **out, size_t max)
{
    pthread_mutex_lock(&lock);
    size_t n = drk_findings_get(out, max);
    pthread_mutex_unlock(&lock);
    return n;
}

uint64_t drk_gputime_rounds_closed(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = closed;
    pthread_mutex_unlock(&lock);
    return n;
}

/* ---- Occupancy ---- */

/* Entries made for an occupancy alone leave this many for shapes that only
 * CUPTI sees (graph kernels, launches drk missed). */
#define OCC_ENTRIES_MAX (DRK_TIME_ENTRIES - DRK_TIME_ENTRIES / 4)

/* The entry of `k`, or NULL; never makes one. Locked. */
static entry *lookup(const drk_time_key *k)
{
    uint64_t h = key_hash(k);
    for (size_t i = h % TABLE; table[i]; i = (i + 1) % TABLE)
        if (table[i]->hash == h && same_key(&table[i]->key, k))
            return table[i];
    return NULL;
}

void drk_gputime_occupancy(const drk_time_key *k, const drk_occupancy *o)
{
    if (!k->name || !o->max_warps_per_sm)
        return;
    pthread_mutex_lock(&lock);
    entry *e = lookup(k);
    if (!e && nentries < OCC_ENTRIES_MAX)
        e = find(k);
    if (e) {
        /* The same build again replaces its variant; a new one takes the
         * next slot, the oldest going once all are taken. */
        unsigned v = 0;
        while (v < e->nocc && (e->occ[v].regs != o->regs || e->occ[v].static_shared != o->static_shared))
            v++;
        if (v == e->nocc)
            v = e->nocc < DRK_OCC_VARIANTS ? e->nocc++ : (e->latest + 1) % DRK_OCC_VARIANTS;
        e->occ[v] = *o;
        e->latest = v;
    }
    pthread_mutex_unlock(&lock);
}

int drk_gputime_occupancy_of(const drk_time_key *k, drk_occupancy *out)
{
    if (!k->name)
        return 0;
    pthread_mutex_lock(&lock);
    const entry *e = lookup(k);
    int found = e && e->nocc;
    if (found)
        *out = e->occ[e->latest];
    pthread_mutex_unlock(&lock);
    return found;
}

const char *drk_occupancy_limit_name(uint32_t limit)
{
    switch (limit) {
    case DRK_OCC_LIMIT_REGISTERS: return "registers";
    case DRK_OCC_LIMIT_SHARED: return "shared_memory";
    case DRK_OCC_LIMIT_WARPS: return "block_size";
    case DRK_OCC_LIMIT_BLOCKS: return "blocks";
    case DRK_OCC_LIMIT_NONE: return "none";
    default: return NULL;
    }
}

const char *drk_occupancy_limit_text(const drk_occupancy *o, char *buf, size_t n)
{
    switch (o->limit) {
    case DRK_OCC_LIMIT_REGISTERS:
        snprintf(buf, n, "registers: %u a thread", o->regs);
        break;
    case DRK_OCC_LIMIT_SHARED:
        snprintf(buf, n, "shared memory: %u bytes a block, %u static and %u dynamic",
                 o->static_shared + o->dynamic_shared, o->static_shared, o->dynamic_shared);
        break;
    case DRK_OCC_LIMIT_WARPS:
        snprintf(buf, n, "block size: %u threads, %u warps of the SM's %u", o->block_threads, o->warps_per_block,
                 o->max_warps_per_sm);
        break;
    case DRK_OCC_LIMIT_BLOCKS:
        snprintf(buf, n, "the SM's blocks: %u", o->blocks_per_sm);
        break;
    case DRK_OCC_LIMIT_NONE:
        snprintf(buf, n, "nothing: every warp of the SM taken");
        break;
    default:
        snprintf(buf, n, "unknown");
        break;
    }
    return buf;
}
