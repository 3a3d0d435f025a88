/* What the page backend tests share (test_pages.c for the CPU backends,
 * test_pages_vmm.c for the device one on the stand-in driver): page
 * patterns, and the checks of run handles (one handle over several pages)
 * that every backend must pass. Include after check.h. */
#ifndef DRK_TESTS_PAGES_RUNS_H
#define DRK_TESTS_PAGES_RUNS_H

#include <stdint.h>

#include "alloc/pages.h"

/* Fills a page with a pattern derived from `seed`, or checks it is there. */
static inline void fill(uintptr_t va, size_t size, uint64_t seed)
{
    uint64_t *w = (uint64_t *)va;
    for (size_t i = 0; i < size / 8; i++)
        w[i] = seed * 0x9e3779b97f4a7c15ull + i;
}

static inline int holds(uintptr_t va, size_t size, uint64_t seed)
{
    const uint64_t *w = (const uint64_t *)va;
    for (size_t i = 0; i < size / 8; i++)
        if (w[i] != seed * 0x9e3779b97f4a7c15ull + i)
            return 0;
    return 1;
}

/* Whether the n pages from va hold seeds seed, seed + 1, ... */
static inline int holds_pages(uintptr_t va, size_t ps, size_t n, uint64_t seed)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= holds(va + i * ps, ps, seed + i);
    return ok;
}

static inline void fill_pages(uintptr_t va, size_t ps, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        fill(va + i * ps, ps, seed + i);
}

/* Run handles on backend b, of capacity 8 with nothing created yet; `real`:
 * its mapped pages are memory this process can read and write. Capacity
 * and counts are in pages; a run maps and unmaps whole, alone or among
 * other handles in one call, at several addresses at once; every misuse is
 * INVALID and changes nothing. */
static inline void check_runs(drk_page_backend *b, int real)
{
    const size_t ps = b->page_size;
    drk_page_handle a, c, s1, s2, s3, spare, a2;
    uintptr_t r1, r2;
    CHECK(b->capacity == 8);

    CHECK(b->create_run(b, 0, &a) == DRK_PAGES_INVALID);
    CHECK(b->create_run(b, 2, NULL) == DRK_PAGES_INVALID);
    CHECK(b->create_run(b, 9, &a) == DRK_PAGES_OOM);
    CHECK(b->pages_created(b) == 0);

    /* 3 + 2 + 1 + 1 pages live: a run of 2 no longer fits, one page does. */
    CHECK(b->create_run(b, 3, &a) == DRK_PAGES_OK && b->create_run(b, 2, &c) == DRK_PAGES_OK);
    CHECK(b->create(b, &s1) == DRK_PAGES_OK && b->create_run(b, 1, &s2) == DRK_PAGES_OK);
    CHECK(b->pages_created(b) == 7);
    CHECK(b->create_run(b, 2, &s3) == DRK_PAGES_OOM && b->pages_created(b) == 7);
    CHECK(b->create(b, &s3) == DRK_PAGES_OK && b->pages_created(b) == 8);
    CHECK(b->create(b, &spare) == DRK_PAGES_OOM && b->create_run(b, 1, &spare) == DRK_PAGES_OOM);
    CHECK(b->release(b, s3) == DRK_PAGES_OK && b->pages_created(b) == 7);

    CHECK(b->reserve(b, 8 * ps, &r1) == DRK_PAGES_OK && b->reserve(b, 8 * ps, &r2) == DRK_PAGES_OK);
    /* A run's later pages are no handles of their own (on a fresh backend
     * a's pages are slots 0-2 of one generation: a + 1 is its second). */
    CHECK(b->map(b, r1, (drk_page_handle[]){a + 1}, 1) == DRK_PAGES_INVALID);
    CHECK(b->map(b, r1, (drk_page_handle[]){a + 2}, 1) == DRK_PAGES_INVALID);
    CHECK(b->release(b, a + 1) == DRK_PAGES_INVALID && b->pages_created(b) == 7);

    /* r1: page 0 free, a at 1-3, then s1, c, s2 (4, 5-6, 7) in one call. */
    CHECK(b->map(b, r1 + ps, &a, 1) == DRK_PAGES_OK && b->pages_mapped(b) == 3);
    if (real) {
        fill_pages(r1 + ps, ps, 3, 10);
        CHECK(holds_pages(r1 + ps, ps, 3, 10));
    }
    CHECK(b->map(b, r1, &c, 1) == DRK_PAGES_INVALID);          /* its last page over a's first */
    CHECK(b->map(b, r1 + 3 * ps, &c, 1) == DRK_PAGES_INVALID); /* its first over a's last */
    CHECK(b->map(b, r1 + 7 * ps, &c, 1) == DRK_PAGES_INVALID); /* past the range's end */
    CHECK(b->map(b, r2 - ps, &c, 1) == DRK_PAGES_INVALID);     /* across r2's start */
    CHECK(b->map(b, r2 + 6 * ps, (drk_page_handle[]){c, a}, 2) == DRK_PAGES_INVALID);
    CHECK(b->map(b, r1 + 4 * ps, (drk_page_handle[]){s1, c, s2, s2}, 4) == DRK_PAGES_INVALID); /* past the end */
    CHECK(b->map(b, r1 + 4 * ps, (drk_page_handle[]){s1, c, a + 1}, 3) == DRK_PAGES_INVALID);
    CHECK(b->map(b, r1 + 4 * ps, (drk_page_handle[]){s1, c, s3}, 3) == DRK_PAGES_INVALID); /* s3: released */
    CHECK(b->pages_mapped(b) == 3);
    CHECK(b->map(b, r1 + 4 * ps, (drk_page_handle[]){s1, c, s2}, 3) == DRK_PAGES_OK);
    CHECK(b->pages_mapped(b) == 7);
    if (real) {
        fill_pages(r1 + 4 * ps, ps, 4, 20);
        CHECK(holds_pages(r1 + ps, ps, 3, 10) && holds_pages(r1 + 4 * ps, ps, 4, 20));
    }

    /* Part of a mapping is never unmapped: a's first page or last alone,
     * from its middle, up to its middle, c's first or last with a single
     * page beside it; nor a range with a page unmapped. */
    CHECK(b->unmap(b, r1 + ps, 1) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + 3 * ps, 1) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + 2 * ps, 2) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + 2 * ps, 3) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + ps, 2) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + 4 * ps, 2) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + 6 * ps, 2) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1 + 5 * ps, 1) == DRK_PAGES_INVALID && b->unmap(b, r1 + 6 * ps, 1) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1, 4) == DRK_PAGES_INVALID);
    CHECK(b->pages_mapped(b) == 7);
    if (real)
        CHECK(holds_pages(r1 + ps, ps, 3, 10) && holds_pages(r1 + 4 * ps, ps, 4, 20));

    /* c and a again at r2, in one call: the same memory at both addresses. */
    CHECK(b->map(b, r2, (drk_page_handle[]){c, a}, 2) == DRK_PAGES_OK && b->pages_mapped(b) == 12);
    if (real) {
        CHECK(holds_pages(r2, ps, 2, 21) && holds_pages(r2 + 2 * ps, ps, 3, 10));
        fill(r2 + 3 * ps, ps, 30); /* a's second page, read through r1 */
        CHECK(holds(r1 + 2 * ps, ps, 30));
    }
    CHECK(b->release(b, a) == DRK_PAGES_INVALID && b->release(b, c) == DRK_PAGES_INVALID);
    CHECK(b->release(b, s1) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r2 + ps, 4) == DRK_PAGES_INVALID); /* c's second page to a's end */
    /* Two whole run handles in one call; r1 still has both. */
    CHECK(b->unmap(b, r2, 5) == DRK_PAGES_OK && b->pages_mapped(b) == 7);
    CHECK(b->unmap(b, r2, 5) == DRK_PAGES_INVALID);
    if (real)
        CHECK(holds(r1 + ps, ps, 10) && holds(r1 + 2 * ps, ps, 30) && holds_pages(r1 + 4 * ps, ps, 4, 20));
    CHECK(b->release(b, a) == DRK_PAGES_INVALID && b->release(b, c) == DRK_PAGES_INVALID);

    /* One run twice in one call: two mappings, each unmapped on its own. */
    CHECK(b->map(b, r2, (drk_page_handle[]){a, a}, 2) == DRK_PAGES_OK && b->pages_mapped(b) == 13);
    if (real)
        CHECK(holds(r2 + ps, ps, 30) && holds(r2 + 4 * ps, ps, 30));
    CHECK(b->unmap(b, r2 + ps, 3) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r2, 3) == DRK_PAGES_OK && b->unmap(b, r2 + 3 * ps, 3) == DRK_PAGES_OK);
    CHECK(b->pages_mapped(b) == 7);

    /* All of r1, singles and runs, in one call; then a goes. */
    CHECK(b->unmap(b, r1 + ps, 7) == DRK_PAGES_OK && b->pages_mapped(b) == 0);
    CHECK(b->release(b, a) == DRK_PAGES_OK && b->pages_created(b) == 4);
    CHECK(b->release(b, a) == DRK_PAGES_INVALID);
    CHECK(b->map(b, r1, &a, 1) == DRK_PAGES_INVALID);
    /* Its pages come back as single pages, then as a run again: live
     * handles, while the old one stays dead. */
    drk_page_handle t[3];
    for (int i = 0; i < 3; i++)
        CHECK(b->create(b, &t[i]) == DRK_PAGES_OK && t[i] != a);
    CHECK(b->map(b, r1, t, 3) == DRK_PAGES_OK && b->pages_mapped(b) == 3);
    CHECK(b->map(b, r1 + 3 * ps, &a, 1) == DRK_PAGES_INVALID && b->release(b, a) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r1, 3) == DRK_PAGES_OK);
    for (int i = 0; i < 3; i++)
        CHECK(b->release(b, t[i]) == DRK_PAGES_OK);
    CHECK(b->create_run(b, 3, &a2) == DRK_PAGES_OK && a2 != a && b->pages_created(b) == 7);
    CHECK(b->map(b, r1, &a, 1) == DRK_PAGES_INVALID && b->release(b, a) == DRK_PAGES_INVALID);
    CHECK(b->map(b, r1 + 5 * ps, &a2, 1) == DRK_PAGES_OK && b->pages_mapped(b) == 3);
    if (real) {
        fill_pages(r1 + 5 * ps, ps, 3, 40);
        CHECK(holds_pages(r1 + 5 * ps, ps, 3, 40));
    }
    CHECK(b->unmap(b, r1 + 5 * ps, 3) == DRK_PAGES_OK);
    CHECK(b->release(b, a2) == DRK_PAGES_OK && b->release(b, c) == DRK_PAGES_OK);
    CHECK(b->release(b, s1) == DRK_PAGES_OK && b->release(b, s2) == DRK_PAGES_OK);
    CHECK(b->pages_created(b) == 0 && b->pages_mapped(b) == 0);
    /* The whole capacity as one run. */
    CHECK(b->create_run(b, 8, &a) == DRK_PAGES_OK && b->pages_created(b) == 8);
    CHECK(b->map(b, r2, &a, 1) == DRK_PAGES_OK && b->pages_mapped(b) == 8);
    CHECK(b->unmap(b, r2, 7) == DRK_PAGES_INVALID && b->unmap(b, r2 + ps, 7) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, r2, 8) == DRK_PAGES_OK && b->release(b, a) == DRK_PAGES_OK);
    CHECK(b->unreserve(b, r1, 8 * ps) == DRK_PAGES_OK && b->unreserve(b, r2, 8 * ps) == DRK_PAGES_OK);
}

#endif
