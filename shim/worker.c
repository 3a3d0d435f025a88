#define _GNU_SOURCE
#include "shim/worker.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc/device.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/options.h"
#include "base/thread.h"
#include "evolve/counters.h"
#include "evolve/engine.h"
#include "evolve/cupti.h"
#include "evolve/findings.h"
#include "evolve/gputime.h"
#include "evolve/occupancy.h"
#include "evolve/records_cost.h"
#include "evolve/registry.h"
#include "shim/evolve_wiring.h"

#define MARKS 64
#define TICK_MS 50
/* Launch shapes whose occupancy a tick works out at most (a program that
 * loads thousands of kernels at once is caught up over a few ticks). */
#define TICK_SHAPES 256

static drk_worker_settings cfg;
static char cupti_library[4096];
static atomic_int started;
static pthread_t thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int stop; /* under lock */
static char off_why[256] = "DRK_PROFILE=0";
static _Atomic(const char *) off = off_why;
static atomic_int cupti_started; /* CUPTI's start: 0 not tried yet, 1 done, -1 failed */

/* Marks, a ring the program's threads push to and the thread pops from. */
static struct mark {
    _Atomic uint64_t t; /* 0 while being written */
    const char *why;
    int records_on;     /* kernel records were turned on at this mark (records_at_mark) */
} marks[MARKS];
static atomic_ulong mark_head, mark_tail;
static atomic_ulong marks_lost, marked;
/* Kernel records asked back on at the program's next round mark, by the
 * thread, while they rest: turned on there, the round that mark opens is
 * timed whole from its start. Turned on by the thread mid-round, the round
 * under way was partly untimed and the next one had to be timed too: two
 * rounds under CUPTI's cost (short kernels up to 5% slower on the H200)
 * for one timed. */
static atomic_int records_at_mark;
static void records_resumed(uint64_t t);

static void round_memory(drk_round_memory *m)
{
    static drk_dpool_report r; /* large; the thread and exit take turns */
    drk_dpool_get_report(&r);
    *m = (drk_round_memory){r.live_bytes, r.reserved_bytes, r.pages_moved, r.out_of_memory};
}

static void mark_round(uint64_t t, const char *why)
{
    drk_round_memory m;
    round_memory(&m);
    drk_gputime_mark(t, why, &m);
}

/* Marks the end of a round at each pending mark, oldest first. */
static int take_marks(void)
{
    int n = 0;
    for (;;) {
        unsigned long tail = atomic_load(&mark_tail);
        if (tail == atomic_load(&mark_head))
            return n;
        struct mark *k = &marks[tail % MARKS];
        uint64_t t = atomic_load_explicit(&k->t, memory_order_acquire);
        if (!t)
            return n; /* still being written: next tick */
        const char *why = k->why;
        if (k->records_on)
            records_resumed(t);
        atomic_store_explicit(&k->t, 0, memory_order_relaxed);
        atomic_store(&mark_tail, tail + 1);
        mark_round(t, why);
        atomic_fetch_add(&marked, 1);
        n++;
    }
}

/* Evolution's timing alone (DRK_PROFILE not set): CUPTI instruments every
 * kernel while kernel records are on (short kernels up to 6% slower on the
 * H200), so once the engine has had nothing to search for REST_AFTER
 * rounds they rest, and come back for one round after REST_SAMPLE rounds
 * without them, for the engine to see what has become hot; each such rest
 * twice as long as the one before, up to REST_SAMPLE_MAX, while no new
 * kernel-shape was launched and no new target chosen (drk_rest_backoff);
 * not while only kernel-shapes the engine took up have run since its latest
 * timed round (drk_engine_nothing_new: none other can have become hot). */
/* Rounds in which the engine chose nothing: 3 before it took up any kernel
 * (the first rounds may lack a kernel's facts), 1 once it has (its last
 * search ended: on the H200 the 3 rounds after a settled stencil kept it
 * 6% slower in each, the benchmark's 0.94x of native at its end). */
#define REST_AFTER 3
#define REST_SAMPLE 20
#define REST_SAMPLE_MAX 320
/* While a search runs (its kernel's time known, its trials timed on drk's
 * own stream), records rest too, and one round in about SEARCH_SAMPLE + 2
 * is timed whole, for the rounds' kernel time the budget is a share of --
 * not while only kernel-shapes the engine took up have run since its
 * latest timed round (drk_engine_nothing_new: their time is what that
 * round timed, unless what the search serves changed, which asks for a
 * timed round of its own). */
#define SEARCH_SAMPLE 4

static int resting;
static unsigned rest_for;
static drk_rest_backoff idle_rest;
static int idle_resting;   /* the rest under way is idle_rest's */
static int search_resting; /* the rest under way is a search's */
static int look_skipped;   /* the rest's look was due and skipped (said once a rest) */

/* What would give the engine something new: kernel-shapes launched, targets. */
static uint64_t news(void) { return drk_registry_shapes_added() + ((uint64_t)drk_engine_targets() << 40); }
static uint64_t unsampled_at, untimed_seen, kept_at;
/* The engine asked for a timed round, and records wait for the account. */
static int want_timed;
/* What the records cost the program (evolve/records_cost.h): kept with
 * evolution's timing alone, from CUPTI's start (costed). */
static drk_records_cost cost;
static int costed;
/* Marks the program made before the account started (from CUPTI's start,
 * which may take a round's time, to the account's): the rounds they end
 * began before it, and the launches and waits since its start are not
 * theirs. */
static unsigned long marks_uncosted;
static uint64_t began_ns; /* the thread's start: the share is paid in from there */
/* The program's waits for the GPU in its synchronize calls (a blocking
 * call: a lock is no cost there): those ended, in all (ns), and those under
 * way, their count and the sum of their starts. */
static pthread_mutex_t waits_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t waits_ns, waits_open, waits_open_sum;
static uint64_t wait_ended_at; /* when the latest wait ended (drk_mono_ns) */
/* While drk's thread weighs whether to attach CUPTI (from the worker's
 * start, which comes before any program call it hooks, to its decision),
 * and while it keeps the records' account (the waits absorb what they
 * cost), waits are timed; otherwise a synchronize pays one load. */
static atomic_int waits_wanted;

/* The waits so far, those under way included, at *now (read under the
 * lock: every wait under way began before it). */
static uint64_t waited_until(uint64_t *now)
{
    pthread_mutex_lock(&waits_lock);
    *now = drk_mono_ns();
    uint64_t w = waits_ns + waits_open * *now - waits_open_sum;
    pthread_mutex_unlock(&waits_lock);
    return w;
}

/* For a capture's trials (drk_engine_tick): 1 when the program's GPU
 * looks idle. It waits for nothing now and launched nothing since the
 * last look (drk's thread looks every millisecond while a capture waits),
 * and either its latest wait ended after its launches were last seen to
 * change (what it launched before that wait is done) or it has launched
 * nothing for IDLE_NS (a wait too short to be seen ended, or it works on
 * the host). Not less: a launch call blocks while the GPU's queue is full,
 * as long as a kernel runs, so a few milliseconds between launches says
 * nothing of the GPU. A program whose waits are not timed cannot be told: 1. */
#define IDLE_NS 20000000u
static int program_quiet(void)
{
    static uint64_t launches, changed_at;
    if (!atomic_load_explicit(&waits_wanted, memory_order_relaxed))
        return 1;
    uint64_t l = drk_registry_launches();
    pthread_mutex_lock(&waits_lock);
    uint64_t now = drk_mono_ns(), open = waits_open, ended = wait_ended_at;
    pthread_mutex_unlock(&waits_lock);
    if (l != launches) {
        launches = l, changed_at = now;
        return 0;
    }
    return !open && (ended > changed_at || now - changed_at >= IDLE_NS);
}

/* Kernel records on again from `t`: the rounds from there are timed. */
static void records_resumed(uint64_t t)
{
    drk_gputime_sampling(1, t);
    resting = 0;
    kept_at = drk_gputime_rounds_closed(); /* a round kept after this one has been timed whole */
}

/* `ended`: the rounds that ended this tick. */
static void rest_records(uint64_t now, unsigned ended)
{
    if (cfg.profile || !drk_engine_on() || !costed)
        return;
    unsigned skip = marks_uncosted < ended ? (unsigned)marks_uncosted : ended;
    marks_uncosted -= skip;
    uint64_t at, waited = waited_until(&at);
    drk_records_cost_reckon(&cost, at, drk_registry_launches(), waited, !resting, ended - skip);
    int searching = drk_engine_searching();
    unsigned idle_enough = drk_engine_targets() ? 1 : REST_AFTER;
    int whole = drk_gputime_rounds_closed() > kept_at; /* a round timed whole since they came on */
    int spent = !drk_records_cost_affords(&cost), over = drk_records_cost_over(&cost);
    int idle = drk_engine_idle_rounds() >= idle_enough;
    if (!resting && (over || (whole && (searching || spent || idle)))) {
        if (drk_cupti_kernels(0) == 0) {
            drk_gputime_sampling(0, now);
            resting = 1;
            /* Out of account only: on again as soon as it holds a round. */
            idle_resting = !searching && idle;
            search_resting = searching;
            look_skipped = 0;
            rest_for = searching ? SEARCH_SAMPLE
                       : idle    ? drk_rest_backoff_next(&idle_rest, news(), REST_SAMPLE, REST_SAMPLE_MAX)
                                 : 1;
            unsampled_at = untimed_seen = drk_gputime_totals_get().unsampled;
            const char *why = over ? "their cost ran over what the budget paid in: the round under way goes untimed"
                              : spent ? "the budget has not paid in what timing the next round would cost"
                              : searching ? "a search runs"
                                          : "evolution has nothing to search";
            drk_log(DRK_LOG_DEBUG,
                    "GPU times: kernel records rest (%s); on again after %u rounds%s (account %.2f ms; a round's "
                    "launch calls expected to cost %.2f ms: %.0f launches, %.1f ms of waits; not counted: the "
                    "kernels' own slowdown while records are on)",
                    why, rest_for, drk_records_cost_affords(&cost) ? "" : ", once the budget pays for one",
                    cost.bank_ns / 1e6, drk_records_cost_round(&cost) / 1e6, cost.round_launches,
                    cost.round_waited / 1e6);
        }
        return;
    }
    if (!resting || atomic_load(&records_at_mark))
        return; /* on at the program's next mark */
    /* A search's rest whose search ended with no other kernel to choose
     * (on the H100 the timed round that followed cost short kernels 2-5%
     * and chose nothing): the idle rest from there. */
    if (search_resting && drk_engine_nothing_to_choose()) { /* no target active: the search ended */
        search_resting = 0, idle_resting = 1, look_skipped = 0;
        rest_for = drk_rest_backoff_next(&idle_rest, news(), REST_SAMPLE, REST_SAMPLE_MAX);
        unsampled_at = drk_gputime_totals_get().unsampled;
        drk_log(DRK_LOG_DEBUG, "GPU times: kernel records rest (evolution has nothing to search); on again after %u "
                "rounds (the search ended, and no other kernel waits for a turn)", rest_for);
    }
    /* A long idle rest cut to REST_SAMPLE once something is new. */
    if (idle_resting && rest_for > REST_SAMPLE && news() != idle_rest.marker) {
        rest_for = REST_SAMPLE;
        drk_log(DRK_LOG_DEBUG, "GPU times: a new kernel-shape or target: kernel records on again %u rounds after they "
                               "came to rest", rest_for);
    }
    /* Untimed rounds still count toward measuring served variants again. */
    uint64_t untimed = drk_gputime_totals_get().unsampled;
    for (; untimed_seen < untimed; untimed_seen++)
        want_timed |= drk_engine_round_untimed();
    /* A search waiting for rounds to pay for its next capture: a timed
     * round meanwhile would only time again the kernel time its grants are
     * a share of (on the H100 a gather's search waited 25 rounds a capture,
     * and its timed rounds cost it 5% each), so it comes when the capture
     * may, or after REST_SAMPLE rounds. */
    if (search_resting && !look_skipped) {
        uint64_t want = untimed - unsampled_at + drk_engine_budget_rounds();
        want = want < REST_SAMPLE ? want : REST_SAMPLE;
        if (want > rest_for) {
            drk_log(DRK_LOG_DEBUG, "GPU times: kernel records rest on while the search waits for its budget: on "
                    "again after %llu rounds", (unsigned long long)want);
            rest_for = (unsigned)want;
        }
    }
    int due = untimed - unsampled_at >= rest_for;
    /* The idle rest's look is for what has become hot: none can have while
     * only kernel-shapes the engine took up ran (it looks once another does).
     * A search's likewise: it would time again what the latest timed round
     * did (on the H100 a gather's search, records resting through its waits
     * for the budget, still had its timed rounds cost it 5% each). */
    if (due && !want_timed && (idle_resting || search_resting) && drk_engine_nothing_new()) {
        if (!look_skipped)
            drk_log(DRK_LOG_DEBUG, "GPU times: kernel records rest on after %u rounds: only kernels evolution has "
                    "taken up ran since the latest timed round%s", rest_for,
                    drk_engine_searching() ? " (one of them is being searched)" : "");
        look_skipped = 1;
        return;
    }
    if ((want_timed || due) && drk_records_cost_affords(&cost)) {
        if (look_skipped)
            drk_log(DRK_LOG_DEBUG, "GPU times: %s: kernel records on again after %llu rounds of rest",
                    want_timed ? "the engine asked for a timed round" : "a kernel evolution has not taken up ran",
                    (unsigned long long)(untimed - unsampled_at));
        look_skipped = 0;
        want_timed = 0;
        if (atomic_load(&marked))
            atomic_store(&records_at_mark, 1); /* the program marks its rounds */
        else if (drk_cupti_kernels(1) == 0)
            records_resumed(now); /* rounds by the period: this tick just ended one, or will */
    }
}

/* One tick: marks, the period, then the records so far; a round closes a
 * tick after its end, when the records of what ran before it are in. */
static void tick(void)
{
    drk_engine_give_back_due();
    int took = take_marks();
    uint64_t now = drk_cupti_now();
    if (!now)
        return;
    /* The period ends rounds only while the program marks none. */
    if (!took && !atomic_load(&marked) && cfg.round_ms > 0 &&
        now - drk_gputime_open_since() >= (uint64_t)cfg.round_ms * 1000000u) {
        mark_round(now, "period");
        took = 1;
    }
    /* Forced when a round is to close: a flush that is not forced hands
     * over only full buffers, and a buffer holds thousands of records (on
     * the H200, a program of 1500 launches a round had none of ten rounds'
     * records until its exit: no round kernel time, no budget for
     * evolution, and records never resting). The GPU suite's gputime
     * checks find no record dropped or late with it. */
    uint64_t through = now - (uint64_t)TICK_MS * 1000000u;
    drk_cupti_flush(drk_counters_used() || drk_gputime_closable(through));
    /* Before the close: a round closes a tick after its end, by when the
     * shapes it launched are in the registry. */
    drk_occupancy_update(TICK_SHAPES);
    if (drk_gputime_close(through) && (cfg.counters || drk_engine_on())) {
        static const drk_round *kept[DRK_ROUNDS_KEPT];
        size_t n = drk_gputime_rounds(kept, DRK_ROUNDS_KEPT);
        if (n && cfg.counters)
            drk_counters_round(kept[n - 1]);
        if (n)
            drk_engine_round(kept[n - 1]);
    }
    drk_engine_tick(program_quiet);
    rest_records(now, (unsigned)took);
}

static void last_records(void);

/* NVTX loads the library its variable names: another tool's (nsys), and
 * drk's rounds never come from NVTX. Said once. */
static void nvtx_note(void)
{
    const char *path = drk_env(DRK_ENV_NVTX_INJECTION);
    Dl_info self;
    char a[PATH_MAX], b[PATH_MAX];
    if (!*path)
        drk_log(DRK_LOG_INFO, "NVTX: NVTX_INJECTION64_PATH is not set (drk run sets it): rounds end at "
                              "cuProfilerStop and by DRK_ROUND_SECONDS only");
    else if (dladdr((void *)&drk_worker_start, &self) && self.dli_fname &&
             (!realpath(path, a) || !realpath(self.dli_fname, b) || strcmp(a, b) != 0))
        drk_log(DRK_LOG_INFO, "NVTX goes to %s (NVTX_INJECTION64_PATH, nsys?): drk leaves it there; rounds end at "
                              "cuProfilerStop and by DRK_ROUND_SECONDS only", path);
}

/* Where to look for CUPTI; `exe` holds the program's path. */
static drk_cupti_settings cupti_settings(char *exe, size_t len)
{
    drk_cupti_settings cs = {.library = cupti_library, .exe = NULL};
    ssize_t n = readlink("/proc/self/exe", exe, len - 1);
    if (n > 0) {
        exe[n] = '\0';
        cs.exe = exe;
    }
    return cs;
}

/* CUPTI's start, once, where `cs` says (NULL: looked up here): 0 started,
 * -1 not (off_why says why). */
static int start_cupti(const drk_cupti_settings *cs)
{
    char why[200], exe[4096];
    drk_cupti_settings own;
    if (!cs)
        own = cupti_settings(exe, sizeof exe), cs = &own;
    uint64_t t0 = drk_mono_ns();
    int r = drk_cupti_start(cs, why, sizeof why);
    if (r != 0) {
        snprintf(off_why, sizeof off_why, "%s", why);
        atomic_store(&off, off_why);
        drk_log(DRK_LOG_INFO, "no GPU times: %s", why);
    } else {
        atomic_store(&off, (const char *)NULL);
        /* Where the attach began and ended, to set against the program's
         * launch calls (on the H200 it held one for 66 ms). */
        drk_log(DRK_LOG_DEBUG, "GPU times: CUPTI attached in %.1f ms (from %.6f s on the monotonic clock)",
                (drk_mono_ns() - t0) / 1e6, t0 / 1e9);
    }
    atomic_store(&cupti_started, r == 0 ? 1 : -1);
    return r;
}

/* Evolution's timing alone: nothing of CUPTI until the program launches a
 * kernel evolution could take up (most programs' kernels are SASS only:
 * PyTorch's, Triton's, CuPy's), looked for every WAIT_TICKS ticks. Nor
 * while the program is launch-bound: once attached, CUPTI slows every
 * launch call for the rest of the run, kernel records on or off
 * (DRK_ATTACHED_NS; drk cannot detach it safely while the program's calls
 * run), so it attaches only after a look in which that cost, less what the
 * program's waits for the GPU absorb, fits the records' share
 * (drk_attach_affordable). 1 when it may start, 0 when the process exits
 * first. */
#define WAIT_TICKS 4

/* Waits `ms` or until the thread is told to stop: 1 when it is to stop. */
static int nap(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&lock);
    while (!stop && pthread_cond_timedwait(&wake, &lock, &ts) != ETIMEDOUT)
        ;
    int s = stop;
    pthread_mutex_unlock(&lock);
    return s;
}

static char held_why[256];
/* The window that let CUPTI attach: its launches and waits, the account's
 * prior (drk_records_cost_prior). */
static uint64_t attach_made, attach_gave;

static int weigh_attach(void)
{
    /* Each look that finds a kernel judges the time since the look before
     * that did (the first: since the thread started), once it spans half a
     * look at least: a look at the thread's start, behind launches made
     * before it, judges nothing. */
    uint64_t at, launches = drk_registry_launches(), waited = waited_until(&at);
    int held = 0;
    do {
        if (!drk_engine_could_evolve())
            continue;
        uint64_t now, l = drk_registry_launches(), w = waited_until(&now);
        if (now - at < (uint64_t)WAIT_TICKS * TICK_MS * 1000000u / 2)
            continue;
        uint64_t span = now - at, made = l > launches ? l - launches : 0, gave = w > waited ? w - waited : 0;
        at = now, launches = l, waited = w;
        if (drk_attach_affordable(cfg.records_share, span, made, gave)) {
            attach_made = made, attach_gave = gave;
            if (held)
                drk_log(DRK_LOG_INFO, "evolve: GPU timing starts: the program's launch calls now leave room for "
                                      "CUPTI (%llu launches in %.0f ms, %.0f ms of it waiting for the GPU)",
                        (unsigned long long)made, span / 1e6, gave / 1e6);
            return 1;
        }
        if (!held) {
            held = 1;
            double cost = span ? drk_attach_cost_ns(made, gave) / (double)span : 0;
            snprintf(held_why, sizeof held_why,
                     "not started: the program is launch-bound, and CUPTI attached would slow its launch calls by "
                     "about %.1f%% of its run time, more than a quarter of DRK_EVOLVE_BUDGET (%.2f%%)",
                     100 * cost, 100 * cfg.records_share);
            atomic_store(&off, (const char *)held_why);
            drk_log(DRK_LOG_INFO,
                    "evolve: GPU timing waits: %llu launches in %.0f ms (%.0f ms of it waiting for the GPU): CUPTI "
                    "attached would slow the program's launch calls by about %.1f%% of its run time, more than a "
                    "quarter of DRK_EVOLVE_BUDGET (%.2f%%); drk looks again every %d ms",
                    (unsigned long long)made, span / 1e6, gave / 1e6, 100 * cost, 100 * cfg.records_share,
                    WAIT_TICKS * TICK_MS);
        }
    } while (!nap(WAIT_TICKS * TICK_MS));
    return 0;
}

/* CUPTI's attach (its first call) can hold a launch call the program
 * makes meanwhile until it ends: on the H200 a naive matmul's launch, made
 * 8.5 ms into a ~75 ms attach, waited 66.6 ms for it (in two other
 * processes, launches at the same point held nothing: only some moment
 * inside it holds one; 2026-12-05). So drk's thread attaches
 * when the program has made no launch for QUIET_NS (it waits for its GPU,
 * or works on the host), looked for every millisecond, and after
 * QUIET_MAX_MS without one attaches anyway (the library is opened before,
 * drk_cupti_load). 1 to attach, 0 when the process exits first. */
#define QUIET_NS 2000000u
#define QUIET_MAX_MS 2000

static int quiet_moment(void)
{
    uint64_t began = drk_mono_ns(), since = began, last = drk_registry_launches();
    for (;;) {
        if (nap(1))
            return 0;
        uint64_t now = drk_mono_ns(), l = drk_registry_launches();
        if (l != last) {
            last = l, since = now;
        } else if (now - since >= QUIET_NS) {
            drk_log(DRK_LOG_DEBUG, "GPU times: CUPTI attaches after %.1f ms, the program having launched nothing for "
                                   "%.1f ms (at %.6f s on the monotonic clock)",
                    (now - began) / 1e6, (now - since) / 1e6, now / 1e9);
            return 1;
        }
        if (now - began >= (uint64_t)QUIET_MAX_MS * 1000000u) {
            drk_log(DRK_LOG_DEBUG, "GPU times: CUPTI attaches while the program launches: no pause of %.1f ms in "
                                   "%d ms",
                    QUIET_NS / 1e6, QUIET_MAX_MS);
            return 1;
        }
    }
}

/* The waits go on being timed for the records' account once it returns 1. */
static int kernel_to_evolve(void)
{
    int r = weigh_attach();
    if (!r)
        atomic_store(&waits_wanted, 0);
    return r;
}

static void *run(void *arg)
{
    (void)arg;
    char why[200], exe[4096];
    drk_cupti_settings cs = {.library = NULL};
    const drk_cupti_settings *where = NULL; /* where the load ahead looked, for the start */
    began_ns = drk_mono_ns();
    if (cfg.evolve_waits) {
        drk_evolve_wiring_start();
        if (!kernel_to_evolve())
            return NULL;
        drk_log(DRK_LOG_DEBUG, "GPU times: CUPTI starts: the program launched a kernel evolution could take up");
        /* Opened ahead, so that the quiet moment holds only the attach. A
         * CUPTI that cannot be opened attaches nothing: no moment to wait
         * for (the start says why, failing the same way). */
        cs = cupti_settings(exe, sizeof exe), where = &cs;
        if (drk_cupti_load(&cs, why, sizeof why) == 0 && !quiet_moment()) {
            atomic_store(&waits_wanted, 0);
            return NULL;
        }
    }
    if (!atomic_load(&cupti_started))
        start_cupti(where);
    if (atomic_load(&cupti_started) < 0) {
        atomic_store(&waits_wanted, 0);
        drk_engine_stop(); /* no rounds to evolve by; the report says why */
        return NULL;
    }
    drk_engine_prepare(); /* drk's context for trials, made while the first rounds are timed */
    if (!cfg.profile) {
        /* Paid in from the thread's start; charged from here, the records
         * being on from CUPTI's start. */
        atomic_store(&waits_wanted, 1);
        uint64_t at, waited = waited_until(&at);
        (void)at;
        drk_records_cost_init(&cost, cfg.records_share, began_ns, drk_registry_launches(), waited);
        drk_records_cost_prior(&cost, attach_made, attach_gave);
        marks_uncosted = atomic_load(&mark_head) - atomic_load(&mark_tail);
        costed = 1;
    } else {
        atomic_store(&waits_wanted, 0);
    }
    nvtx_note();
    if (cfg.counters && drk_counters_start(cfg.counters_budget, why, sizeof why) != 0)
        drk_log(DRK_LOG_INFO, "no counters: %s", why);
    if (!cfg.evolve_waits)
        drk_evolve_wiring_start();
    if (atexit(last_records) != 0)
        drk_log(DRK_LOG_INFO, "GPU times: cannot register an exit handler; the last records may be missing");
    /* A capture held for a quiet moment is looked at every millisecond
     * between ticks: a program's pause may be short. */
    for (uint64_t ticked = drk_mono_ns();;) {
        if (nap(drk_engine_holding() ? 1 : TICK_MS))
            break;
        uint64_t now = drk_mono_ns();
        if (now - ticked < (uint64_t)TICK_MS * 1000000u && drk_engine_holding()) {
            drk_engine_tick(program_quiet);
            continue;
        }
        ticked = now;
        tick();
    }
    return NULL;
}

void drk_worker_start(const drk_worker_settings *s)
{
    if (atomic_exchange(&started, 1))
        return;
    cfg = *s;
    atomic_store(&waits_wanted, s->evolve_waits);
    snprintf(cupti_library, sizeof cupti_library, "%s", s->cupti_library ? s->cupti_library : "");
    snprintf(off_why, sizeof off_why, "%s",
             s->evolve_waits ? "not needed: DRK_PROFILE=0, and the program launched no kernel evolution could take "
                               "up (evolution starts GPU timing once it does)"
                             : "CUPTI not started yet");
    if (s->start_here && !s->evolve_waits) {
        /* CUPTI's start holds the program's launches while it attaches
         * (8-68 ms on the H200 behind a deep queue, tests/bench/drain_stall):
         * here, before the program's next call, it holds none. */
        uint64_t t0 = drk_mono_ns();
        if (start_cupti(NULL) == 0)
            drk_log(DRK_LOG_DEBUG, "GPU times: CUPTI started in the program's first call to drk (%.1f ms)",
                    (double)(drk_mono_ns() - t0) / 1e6);
    }
    if (drk_thread_start(&thread, run, NULL) != 0) {
        drk_cupti_stop("drk could not start its thread"); /* if started here: no thread takes its records */
        atomic_store(&waits_wanted, 0);
        snprintf(off_why, sizeof off_why, "drk could not start its thread");
        atomic_store(&off, off_why);
        drk_log(DRK_LOG_WARN, "no GPU times: drk could not start its thread");
        atomic_store(&started, 2);
    }
}

/* Both read the clock under the lock, so the waits at a look never exceed
 * what a later look finds. */
uint64_t drk_worker_wait_begins(void)
{
    if (!atomic_load_explicit(&waits_wanted, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&waits_lock);
    uint64_t t0 = drk_mono_ns();
    waits_open++, waits_open_sum += t0;
    pthread_mutex_unlock(&waits_lock);
    return t0;
}

void drk_worker_wait_ends(uint64_t t0)
{
    if (!t0)
        return; /* not timed */
    pthread_mutex_lock(&waits_lock);
    uint64_t now = drk_mono_ns();
    waits_open--, waits_open_sum -= t0;
    waits_ns += now > t0 ? now - t0 : 0;
    wait_ended_at = now;
    pthread_mutex_unlock(&waits_lock);
}

void drk_worker_mark(const char *why)
{
    if (atomic_load_explicit(&started, memory_order_relaxed) != 1)
        return;
    uint64_t t = drk_cupti_now();
    if (!t)
        return;
    unsigned long head = atomic_load(&mark_head);
    do {
        if (head - atomic_load(&mark_tail) >= MARKS) {
            atomic_fetch_add(&marks_lost, 1);
            return;
        }
    } while (!atomic_compare_exchange_weak(&mark_head, &head, head + 1));
    struct mark *k = &marks[head % MARKS];
    k->why = why;
    /* Records back on at this round's end (20 us in CUPTI, no launch held
     * on the H200), before its time is read; the thread learns it from the
     * mark. */
    k->records_on = atomic_load_explicit(&records_at_mark, memory_order_relaxed) &&
                    atomic_exchange(&records_at_mark, 0) && drk_cupti_kernels(1) == 0;
    uint64_t after = k->records_on ? drk_cupti_now() : 0;
    atomic_store_explicit(&k->t, after ? after : t, memory_order_release);
}

/* The thread stops, the last records come in and the open round ends. Run
 * from an exit handler registered once CUPTI started, so before the exit
 * handlers of what CUPTI (and cudart) set up when they started: CUPTI is
 * still whole. Again (a no-op) from drk's own at exit. */
static void last_records(void)
{
    static atomic_int done;
    if (atomic_load(&started) != 1 || atomic_exchange(&done, 1))
        return;
    pthread_mutex_lock(&lock);
    stop = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    /* The thread may be inside CUPTI's start (dlopen) behind a loader lock
     * an exiting program holds: wait a little, then go on without it. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    if (pthread_timedjoin_np(thread, NULL, &until) != 0) {
        drk_log(DRK_LOG_INFO, "GPU times: drk's thread did not stop in 2 s; the report has what it had");
        return;
    }
    /* Marks made while times were taken end their rounds; the open one ends
     * now, unless timing stepped aside for another CUPTI client earlier. */
    take_marks();
    drk_counters_stop(NULL);
    drk_engine_stop();
    if (drk_cupti_running()) {
        mark_round(drk_cupti_now(), "exit");
        drk_cupti_stop("the process exited");
        /* The shapes of the last rounds, before they close; the driver is
         * still whole (see above). */
        drk_occupancy_update(UINT_MAX);
    }
    drk_gputime_close(UINT64_MAX);
    const drk_finding *f[DRK_FINDINGS_MAX];
    size_t nf = drk_gputime_findings(f, DRK_FINDINGS_MAX);
    for (size_t i = 0; i < nf; i++)
        drk_log(DRK_LOG_INFO, "finding %s (rounds %llu-%llu, %llu of them): %s", f[i]->name,
                (unsigned long long)f[i]->first_round, (unsigned long long)f[i]->last_round,
                (unsigned long long)f[i]->rounds, f[i]->evidence);
    if (costed && cost.charged)
        drk_log(DRK_LOG_INFO,
                "GPU times: kernel records were on for %llu of the program's launches: about %.1f ms of its launch "
                "calls, %.1f ms of it not absorbed by its waits for the GPU, %.2f%% of its run time (at most "
                "%.2f%%: a quarter of DRK_EVOLVE_BUDGET); not counted: the kernels' own slowdown on the GPU while "
                "records were on (up to 6.4%% a kernel, measured on the H200)",
                (unsigned long long)cost.charged, DRK_RECORD_NS * (double)cost.charged / 1e6,
                drk_records_cost_charged_ns(&cost) / 1e6, 100 * drk_records_cost_charged_share(&cost),
                100 * cost.share);
    unsigned long lost = atomic_load(&marks_lost);
    if (lost)
        drk_log(DRK_LOG_INFO, "GPU times: %lu round marks came faster than drk could end rounds; merged", lost);
}

void drk_worker_at_exit(void) { last_records(); }

void drk_worker_after_fork_child(void)
{
    /* A thread of the parent's may have held it at the fork; the child's
     * waits start afresh. */
    pthread_mutex_init(&waits_lock, NULL);
    waits_ns = waits_open = waits_open_sum = 0;
    atomic_store(&waits_wanted, 0); /* no thread weighs anything there */
    if (atomic_load(&started) == 0)
        return;
    atomic_store(&started, 2);
    snprintf(off_why, sizeof off_why, "a forked child: CUPTI does not follow a fork");
    atomic_store(&off, off_why);
    drk_gputime_after_fork_child();
}

const char *drk_worker_timing_off(void) { return atomic_load(&off); }

uint64_t drk_worker_marks(void) { return atomic_load(&marked); }
