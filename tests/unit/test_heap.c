/* The device heap (alloc/heap.c) on real memory: the host page backend maps
 * memfd pages, so blocks are filled and read back while the heap moves idle
 * pages between holes. Invariants are checked after every operation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/growth.h"
#include "alloc/heap.h"
#include "tests/unit/check.h"

#define PAGE (64u * 1024)

static void fill(uintptr_t p, size_t n, uint32_t seed)
{
    uint32_t *w = (uint32_t *)p;
    for (size_t i = 0; i < n / 4; i++)
        w[i] = seed * 2654435761u + (uint32_t)i;
}

static int intact(uintptr_t p, size_t n, uint32_t seed)
{
    const uint32_t *w = (const uint32_t *)p;
    for (size_t i = 0; i < n / 4; i++)
        if (w[i] != seed * 2654435761u + (uint32_t)i)
            return 0;
    return 1;
}

static int checked(const drk_heap *h)
{
    char err[256];
    if (drk_heap_check(h, err, sizeof err) == 0)
        return 1;
    fprintf(stderr, "heap invariant: %s\n", err);
    return 0;
}

static void test_basics(void)
{
    drk_page_backend *pb = drk_pages_host(PAGE, 64);
    drk_heap *h = pb ? drk_heap_new(pb, 16 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    uintptr_t a, b, c, base;
    size_t size;
    CHECK(drk_heap_alloc(h, 0, &a) == DRK_PAGES_INVALID);
    CHECK(drk_heap_alloc(h, 1, &a) == 0 && a % DRK_HEAP_ALIGN == 0);
    CHECK(drk_heap_alloc(h, 1000, &b) == 0 && b % DRK_HEAP_ALIGN == 0 && b >= a + DRK_HEAP_ALIGN);
    CHECK(drk_heap_alloc(h, 3 * PAGE + 17, &c) == 0 && c % DRK_HEAP_ALIGN == 0);
    fill(c, 3 * PAGE, 7);
    CHECK(intact(c, 3 * PAGE, 7));
    CHECK(drk_heap_find(h, c + 2 * PAGE + 5, &base, &size) == 0 && base == c && size == 3 * PAGE + 17);
    CHECK(drk_heap_find(h, b + 999, &base, &size) == 0 && base == b && size == 1000);
    CHECK(drk_heap_find(h, b + 1000, &base, &size) == DRK_PAGES_INVALID); /* past its asked size */
    CHECK(drk_heap_free(h, b + 8) == DRK_PAGES_INVALID);                  /* not a block start */
    CHECK(drk_heap_free(h, b) == 0 && drk_heap_free(h, b) == DRK_PAGES_INVALID);
    CHECK(drk_heap_find(h, b, &base, &size) == DRK_PAGES_INVALID);
    CHECK(checked(h));
    drk_heap_stats s = drk_heap_get_stats(h);
    CHECK(s.live_blocks == 2 && s.live_bytes == 1 + 3 * PAGE + 17 && s.peak_live_bytes == 1 + 1000 + 3 * PAGE + 17);
    CHECK(drk_heap_free(h, a) == 0 && drk_heap_free(h, c) == 0 && checked(h));
    s = drk_heap_get_stats(h);
    uint64_t holes, largest;
    drk_heap_holes(h, &holes, &largest);
    CHECK(s.live_bytes == 0 && s.idle_pages == s.pages && holes == s.reserved_va && largest == holes);
    drk_heap_trim(h, 0);
    s = drk_heap_get_stats(h);
    CHECK(s.pages == 0 && s.idle_pages == 0 && checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* Capacity full of one-page blocks, every other one freed: half the pages
 * are idle in holes no larger than a page. A block of half the capacity
 * must still come, made of those pages, with the live blocks untouched. */
static void test_stitching(void)
{
    enum { CAP = 32 };
    drk_page_backend *pb = drk_pages_host(PAGE, CAP);
    drk_heap *h = pb ? drk_heap_new(pb, 64 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    uintptr_t blk[CAP], big;
    for (int i = 0; i < CAP; i++) {
        CHECK(drk_heap_alloc(h, PAGE, &blk[i]) == 0);
        fill(blk[i], PAGE, (uint32_t)i);
    }
    CHECK(drk_heap_alloc(h, PAGE, &big) == DRK_PAGES_OOM && checked(h)); /* truly full */
    for (int i = 0; i < CAP; i += 2)
        CHECK(drk_heap_free(h, blk[i]) == 0);
    drk_heap_stats s = drk_heap_get_stats(h);
    uint64_t holes, largest;
    drk_heap_holes(h, &holes, &largest);
    CHECK(s.idle_pages == CAP / 2 && largest >= (uint64_t)PAGE);
    CHECK(drk_heap_alloc(h, CAP / 2 * PAGE, &big) == 0 && checked(h));
    fill(big, CAP / 2 * PAGE, 999);
    for (int i = 1; i < CAP; i += 2)
        CHECK(intact(blk[i], PAGE, (uint32_t)i));
    CHECK(intact(big, CAP / 2 * PAGE, 999));
    s = drk_heap_get_stats(h);
    CHECK(s.pages == CAP && s.moves == CAP / 2 && s.idle_pages == 0);
    CHECK(drk_heap_alloc(h, 1, &big) == DRK_PAGES_OOM && checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* Random sizes and lifetimes on real pages: contents survive, invariants
 * hold after every operation, and the heap runs out only when no page is
 * idle outside the refused block's span (every other page is under live
 * data). */
static void test_random(size_t run_max)
{
    enum { CAP = 56, SLOTS = 48, OPS = 6000 };
    drk_page_backend *pb = drk_pages_host(PAGE, CAP);
    drk_heap *h = pb ? drk_heap_new(pb, 32 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    drk_heap_set_run_max(h, run_max);
    uintptr_t ptr[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    uint32_t seed[SLOTS] = {0};
    unsigned rng = 12345, ooms = 0, bad_ooms = 0;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 1103515245u + 12345u;
        int s = (int)((rng >> 8) % SLOTS);
        if (ptr[s]) {
            CHECK(intact(ptr[s], len[s] & ~(size_t)3, seed[s]));
            CHECK(drk_heap_free(h, ptr[s]) == 0);
            ptr[s] = 0;
        } else {
            rng = rng * 1103515245u + 12345u;
            /* Mostly up to three pages; one in eight up to 20, in runs. */
            size_t n = 1 + (rng >> 4) % ((rng & 7) ? 3 * PAGE : 20 * PAGE);
            int r = drk_heap_alloc(h, n, &ptr[s]);
            if (r == 0) {
                len[s] = n, seed[s] = (uint32_t)op;
                fill(ptr[s], n & ~(size_t)3, seed[s]);
            } else {
                ptr[s] = 0;
                ooms++;
                /* Idle runs left now can only be those under the refused
                 * block's own span, given back when it was refused (a run
                 * at either end may reach past it); and the heap keeps no
                 * idle page here (1% of 56 pages), so no run is ever
                 * covered in part (cut, not stranded): every idle page is
                 * in an idle run. */
                drk_heap_stats now = drk_heap_get_stats(h);
                bad_ooms += r != DRK_PAGES_OOM || now.idle_run_pages > n / PAGE + 2 + 2 * (run_max - 1) ||
                            now.idle_pages != now.idle_run_pages;
            }
        }
        if (!checked(h)) {
            CHECK(0);
            break;
        }
    }
    for (int s = 0; s < SLOTS; s++)
        if (ptr[s])
            CHECK(intact(ptr[s], len[s] & ~(size_t)3, seed[s]) && drk_heap_free(h, ptr[s]) == 0);
    drk_heap_stats st = drk_heap_get_stats(h);
    fprintf(stderr,
            "random, runs of %zu pages at most: %u out-of-memory, %llu pages created (%llu handles), %llu moved "
            "(%llu), peak live %llu of %u bytes\n",
            run_max, ooms, (unsigned long long)st.creates, (unsigned long long)st.create_calls,
            (unsigned long long)st.moves, (unsigned long long)st.move_calls, (unsigned long long)st.peak_live_bytes,
            CAP * PAGE);
    CHECK(bad_ooms == 0 && st.moves > 0 && st.live_bytes == 0 && checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* Many operations on the counting backend (nothing mapped): the heap's own
 * bookkeeping at scale. */
static void test_scale(void)
{
    enum { SLOTS = 4096, OPS = 200000 };
    drk_page_backend *pb = drk_pages_counting(2u << 20, 1u << 16);
    drk_heap *h = pb ? drk_heap_new(pb, (size_t)1 << 36) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    static uintptr_t ptr[SLOTS];
    unsigned rng = 7;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 1103515245u + 12345u;
        int s = (int)((rng >> 8) % SLOTS);
        if (ptr[s]) {
            CHECK(drk_heap_free(h, ptr[s]) == 0);
            ptr[s] = 0;
        } else {
            rng = rng * 1103515245u + 12345u;
            CHECK(drk_heap_alloc(h, 256 + ((size_t)(rng >> 4) << ((rng >> 28) & 7)) % (64u << 20), &ptr[s]) == 0);
        }
        if (op % 20000 == 0)
            CHECK(checked(h));
    }
    CHECK(checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* The reserve and the caching mode: idle pages up to the floor stay where
 * they are (a request no hole fits gets new pages); with moves off they
 * stay for good and a full backend means out of memory; alloc_existing
 * never creates. Tags and serials follow each allocation. */
static void test_policy(void)
{
    drk_page_backend *pb = drk_pages_host(PAGE, 12);
    drk_heap *h = pb ? drk_heap_new(pb, 64 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    uintptr_t a[4], big, base;
    size_t size;
    uint64_t s1, s2;
    unsigned tag = 9;
    drk_heap_set_policy(h, 0, 2, 1); /* keep 2 idle pages in place */
    for (int i = 0; i < 4; i++) {
        CHECK(drk_heap_alloc(h, PAGE, &a[i]) == 0);
        fill(a[i], PAGE, (uint32_t)i);
    }
    CHECK(drk_heap_lookup(h, a[1] + 5, &base, &size, &s1, &tag) == 0 && base == a[1] && tag == 0);
    CHECK(drk_heap_set_tag(h, a[1], 1) == 0 && drk_heap_lookup(h, a[1], &base, &size, &s2, &tag) == 0 && tag == 1);
    CHECK(drk_heap_set_tag(h, a[1] + 512, 1) == DRK_PAGES_INVALID);
    CHECK(drk_heap_free(h, a[0]) == 0 && drk_heap_free(h, a[2]) == 0); /* two idle pages: within the floor */
    drk_heap_stats st = drk_heap_get_stats(h);
    CHECK(st.idle_pages == 2 && st.pages == 4);
    CHECK(drk_heap_alloc_existing(h, 2 * PAGE, &big) == DRK_PAGES_OOM); /* would need new pages */
    CHECK(drk_heap_alloc(h, 2 * PAGE, &big) == 0);
    st = drk_heap_get_stats(h);
    CHECK(st.pages == 6 && st.moves == 0 && st.idle_pages == 2); /* created: the idle ones stayed */
    CHECK(drk_heap_free(h, big) == 0);
    /* Past the floor the idle pages move to where a request needs them. */
    drk_heap_set_policy(h, 0, 0, 1);
    CHECK(drk_heap_alloc_existing(h, 3 * PAGE, &big) == 0);
    st = drk_heap_get_stats(h);
    CHECK(st.pages == 6 && st.moves >= 1);
    CHECK(intact(a[1], PAGE, 1) && intact(a[3], PAGE, 3));
    CHECK(drk_heap_free(h, big) == 0);
    CHECK(checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);

    /* Moves off: a full backend and idle pages in holes is out of memory. */
    pb = drk_pages_host(PAGE, 4);
    h = pb ? drk_heap_new(pb, 64 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    drk_heap_set_policy(h, 0, 0, 0);
    for (int i = 0; i < 4; i++)
        CHECK(drk_heap_alloc(h, PAGE, &a[i]) == 0);
    CHECK(drk_heap_free(h, a[0]) == 0 && drk_heap_free(h, a[2]) == 0);
    CHECK(drk_heap_alloc(h, 2 * PAGE, &big) == DRK_PAGES_OOM);
    drk_heap_set_policy(h, 0, 0, 1);
    CHECK(drk_heap_alloc(h, 2 * PAGE, &big) == 0); /* stitched from the two holes' pages */
    CHECK(checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* Runs: a gap is filled with handles of several pages, a quarter of what
 * is left each (16 pages: 4, 3, 2, then seven single pages). Within the
 * reserve, a smaller block reuses part of an idle run in place, its other
 * pages then stranded until the block goes; past it, such a block cuts the
 * run (given back, its pages made anew, one handle for the page the block
 * shares with a neighbour). Whole idle runs move in one call each into a
 * gap they fit, longest first, with no page made while they cover it. The
 * runs under a block are what IPC shares. The heap makes runs no longer
 * than it is told. */
static void test_runs(void)
{
    static const uint32_t shape[] = {4, 3, 2, 1, 1, 1, 1, 1, 1, 1};
    drk_page_backend *pb = drk_pages_host(PAGE, 40);
    drk_heap *h = pb ? drk_heap_new(pb, 64 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    drk_heap_set_policy(h, 0, 40, 1); /* a reserve: idle pages stay in place */
    uintptr_t r1, p1, r2, p2, c, d, va;
    drk_page_handle hs[16];
    uint32_t lens[16];
    size_t n;
    CHECK(drk_heap_alloc(h, 16 * PAGE, &r1) == 0 && drk_heap_alloc(h, PAGE, &p1) == 0);
    CHECK(drk_heap_alloc(h, 16 * PAGE, &r2) == 0 && drk_heap_alloc(h, PAGE, &p2) == 0 && checked(h));
    drk_heap_stats st = drk_heap_get_stats(h);
    CHECK(st.pages == 34 && st.creates == 34 && st.create_calls == 22);
    CHECK(drk_heap_block_runs(h, r2, hs, lens, 16, &n, &va) == 0 && n == 10 && va == r2 &&
          memcmp(lens, shape, sizeof shape) == 0);
    CHECK(drk_heap_block_runs(h, r2, hs, lens, 3, &n, &va) == DRK_PAGES_OOM && n == 10);
    fill(r1, 16 * PAGE, 1), fill(p1, PAGE, 2), fill(p2, PAGE, 3);
    /* Within the reserve: the block over part of the run of four lies on
     * the run whole, from its first page; the run's two other pages are
     * idle, but not in an idle run. */
    CHECK(drk_heap_free(h, r2) == 0 && drk_heap_alloc(h, PAGE + 1, &d) == 0 && d == r2 && checked(h));
    CHECK(drk_heap_block_runs(h, d, hs, lens, 16, &n, &va) == 0 && n == 1 && lens[0] == 4 && va == d);
    st = drk_heap_get_stats(h);
    CHECK(st.pages == 34 && st.idle_pages == 14 && st.idle_run_pages == 12 && st.cut_calls == 0);
    CHECK(drk_heap_free(h, d) == 0 && drk_heap_get_stats(h).idle_run_pages == 16 && checked(h));
    /* Past it: the run of four is cut; the block's two pages are idle
     * single pages moved, its second one its own (the block ends in it). */
    drk_heap_set_policy(h, 0, 0, 1);
    CHECK(drk_heap_alloc(h, PAGE + 1, &d) == 0 && d == r2 && checked(h));
    CHECK(drk_heap_block_runs(h, d, hs, lens, 16, &n, &va) == 0 && n == 2 && lens[0] == 1 && lens[1] == 1);
    st = drk_heap_get_stats(h);
    CHECK(st.cut_calls == 1 && st.releases == 4 && st.pages == 30 && st.idle_pages == 10 && st.idle_run_pages == 10);
    CHECK(drk_heap_free(h, d) == 0 && checked(h));
    /* Holes of 16 pages (r1's, r2's), pins between: a request of twenty
     * fits neither. At the end of the range it takes whole idle runs,
     * longest first: no page made. */
    CHECK(drk_heap_free(h, r1) == 0 && checked(h));
    drk_heap_stats before = drk_heap_get_stats(h);
    CHECK(drk_heap_alloc(h, 20 * PAGE, &c) == 0 && checked(h));
    fill(c, 20 * PAGE, 4);
    st = drk_heap_get_stats(h);
    CHECK(st.moves - before.moves == 20 && st.move_calls - before.move_calls == 11 && st.creates == before.creates);
    CHECK(st.unmap_calls - before.unmap_calls == 11 && st.pages == 30 && st.idle_pages == 8);
    CHECK(drk_heap_block_runs(h, c, hs, lens, 16, &n, &va) == 0 && n == 11 && va == c && lens[0] == 4 &&
          lens[1] == 3 && lens[2] == 3 && lens[10] == 1);
    CHECK(intact(p1, PAGE, 2) && intact(p2, PAGE, 3) && intact(c, 20 * PAGE, 4));
    /* Given back whole; and runs no longer than the longest the heap makes. */
    CHECK(drk_heap_free(h, c) == 0);
    drk_heap_trim(h, 0);
    st = drk_heap_get_stats(h);
    CHECK(st.pages == 2 && st.idle_pages == 0 && checked(h));
    drk_heap_set_run_max(h, 2);
    CHECK(drk_heap_alloc(h, 16 * PAGE, &c) == 0 && checked(h));
    CHECK(drk_heap_block_runs(h, c, hs, lens, 16, &n, &va) == 0 && n == 11 && lens[0] == 2 && lens[4] == 2 &&
          lens[5] == 1);
    fill(c, 16 * PAGE, 5);
    CHECK(intact(c, 16 * PAGE, 5) && intact(p1, PAGE, 2) && intact(p2, PAGE, 3));
    /* With moves off (DRK_DEFRAG=0) pages stay where first mapped: no cut. */
    drk_heap_set_policy(h, 0, 0, 0);
    before = drk_heap_get_stats(h);
    CHECK(drk_heap_free(h, c) == 0 && drk_heap_alloc(h, PAGE + 1, &d) == 0 && d == c && checked(h));
    st = drk_heap_get_stats(h);
    CHECK(st.cut_calls == before.cut_calls && st.releases == before.releases && st.pages == before.pages);
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* Growth ahead: pages claimed at the frontier are mapped outside the heap
 * (as device.c's grower does, through the backend), then taken by
 * allocations that need no page of their own; an allocation over claimed
 * pages is refused with BUSY and changes nothing; a claim partly mapped
 * leaves the rest unmapped; ahead pages moved elsewhere stop being ahead. */
static void test_ahead(void)
{
    drk_page_backend *pb = drk_pages_host(PAGE, 16);
    drk_heap *h = pb ? drk_heap_new(pb, 32 * PAGE) : NULL;
    CHECK(h != NULL);
    if (!h)
        return;
    drk_heap_set_policy(h, 0, 16, 1); /* keep idle pages in place */
    uintptr_t a, b, c, va = 0;
    CHECK(drk_heap_alloc(h, PAGE, &a) == 0); /* page 0; the frontier starts at page 1 */
    CHECK(drk_heap_ahead_ready(h) == 0 && drk_heap_claim_ahead(h, 3, &va) == 3 && va == a + PAGE);
    CHECK(drk_heap_claim_ahead(h, 3, &va) == 0); /* one claim at a time */
    drk_heap_stats before = drk_heap_get_stats(h);
    CHECK(drk_heap_alloc(h, 100, &b) == DRK_PAGES_BUSY && checked(h));
    drk_heap_stats after = drk_heap_get_stats(h);
    CHECK(after.live_blocks == 1 && after.pages == before.pages && after.busy == 1);
    /* The grower's part, outside the lock: create and map. */
    drk_page_handle hs[3];
    for (int i = 0; i < 3; i++)
        CHECK(pb->create(pb, &hs[i]) == 0);
    CHECK(pb->map(pb, va, hs, 3) == 0);
    drk_heap_claim_done(h, hs, 3);
    CHECK(checked(h));
    after = drk_heap_get_stats(h);
    CHECK(after.ahead_pages == 3 && after.ahead_made == 3 && after.idle_pages == 3 && after.pages == 4 &&
          after.creates == 1);
    /* Two pages at the frontier: mapped already, nothing created. */
    CHECK(drk_heap_alloc_existing(h, 2 * PAGE, &b) == 0 && b == a + PAGE);
    fill(b, 2 * PAGE, 11);
    after = drk_heap_get_stats(h);
    CHECK(after.creates == 1 && after.ahead_used == 2 && after.ahead_pages == 1 && after.grown == 3 && checked(h));
    /* One page is ready; two more claimed; only the first gets mapped. */
    CHECK(drk_heap_ahead_ready(h) == 1 && drk_heap_claim_ahead(h, 2, &va) == 2 && va == a + 4 * PAGE);
    CHECK(pb->create(pb, &hs[0]) == 0 && pb->map(pb, va, hs, 1) == 0);
    drk_heap_claim_done(h, hs, 1);
    CHECK(checked(h));
    CHECK(drk_heap_ahead_ready(h) == 2 && drk_heap_claim_ahead(h, 2, &va) == 2 && va == a + 5 * PAGE);
    drk_heap_claim_done(h, NULL, 0); /* nothing mapped: as it was */
    CHECK(checked(h) && drk_heap_get_stats(h).ahead_pages == 2);
    /* A hole of one page, then a request of two no hole fits: at the
     * frontier, the two ahead pages; the third made by the allocation. */
    CHECK(drk_heap_free(h, a) == 0);
    CHECK(drk_heap_alloc(h, 3 * PAGE, &c) == 0 && c == a + 3 * PAGE);
    fill(c, 3 * PAGE, 12);
    after = drk_heap_get_stats(h);
    CHECK(after.ahead_pages == 0 && after.ahead_used == 4 && after.creates == 2 && checked(h));
    CHECK(intact(b, 2 * PAGE, 11) && intact(c, 3 * PAGE, 12));
    /* Ahead pages that move stop being ahead. */
    CHECK(drk_heap_claim_ahead(h, 2, &va) == 2);
    CHECK(pb->create(pb, &hs[0]) == 0 && pb->create(pb, &hs[1]) == 0 && pb->map(pb, va, hs, 2) == 0);
    drk_heap_claim_done(h, hs, 2);
    drk_heap_trim(h, 0);
    after = drk_heap_get_stats(h);
    CHECK(after.ahead_pages == 0 && after.idle_pages == 0 && checked(h));
    drk_heap_delete(h);
    pb->destroy(pb);
}

/* The grower's watermarks (growth.h): what recent growth took, fading with
 * time; capped by a share of the live pages (never below the minimum), by
 * the most ahead, and by the reserve's room. */
static void test_growth(void)
{
    const uint64_t ms = 1000000;
    drk_growth g = {0};
    drk_growth_observe(&g, 1 * ms, 0, 1000, 1000);
    CHECK(g.high == 0 && g.low == 0); /* nothing grown yet */
    drk_growth_observe(&g, 2 * ms, 10, 1000, 1000);
    CHECK(g.high == 10 && g.low == 5);
    drk_growth_observe(&g, 2 * ms + DRK_GROWTH_WINDOW_NS, 10, 1000, 1000);
    CHECK(g.high == 5 && g.low == 3); /* one window later: half */
    drk_growth_observe(&g, 2 * ms + 20 * DRK_GROWTH_WINDOW_NS, 10, 1000, 1000);
    CHECK(g.high == 0); /* long quiet: nothing ahead */
    drk_growth_observe(&g, 3 * ms + 20 * DRK_GROWTH_WINDOW_NS, 5000, 1000, 1000);
    CHECK(g.high == 1000 / DRK_GROWTH_LIVE_SHARE); /* the live share */
    drk_growth_observe(&g, 4 * ms + 20 * DRK_GROWTH_WINDOW_NS, 5000, 10, 1000);
    CHECK(g.high == DRK_GROWTH_MIN_PAGES); /* a small program: the minimum */
    drk_growth_observe(&g, 5 * ms + 20 * DRK_GROWTH_WINDOW_NS, 90000, 1000000, 100000);
    CHECK(g.high == DRK_GROWTH_MAX_PAGES);
    drk_growth_observe(&g, 6 * ms + 20 * DRK_GROWTH_WINDOW_NS, 90000, 1000000, 3);
    CHECK(g.high == 3 && g.low == 2); /* the reserve's room */
}

int main(void)
{
    test_basics();
    test_ahead();
    test_growth();
    test_runs();
    test_policy();
    test_stitching();
    test_random(1);
    test_random(2);
    test_random(DRK_HEAP_RUN_MAX);
    test_scale();
    return CHECK_DONE();
}
