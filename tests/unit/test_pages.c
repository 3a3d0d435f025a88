/* The CPU page backends (alloc/pages_host.c, alloc/pages_counting.c): every
 * misuse is refused with DRK_PAGES_INVALID and changes nothing, capacity
 * gives OOM, run handles (pages_runs.h) map and unmap whole, the host
 * backend really shows one page at several addresses and reuses released
 * slices of its file (also within runs), both hold under many threads, and
 * the counting backend replays a million operations on 100 GiB quickly. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc/pages.h"
#include "tests/unit/check.h"
#include "tests/unit/pages_runs.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

typedef drk_page_backend *(*factory)(size_t page_size, size_t capacity);

static uint32_t slice_of(drk_page_handle p) { return (uint32_t)p; }

/* Constructors refuse page sizes that are not powers of two (the host one
 * also those below the system page) and capacities of 2^32 pages. */
static void test_construct(void)
{
    CHECK(drk_pages_counting(0, 4) == NULL);
    CHECK(drk_pages_counting(3 * 4096, 4) == NULL);
    CHECK(drk_pages_counting(4096, (size_t)1 << 32) == NULL);
    CHECK(drk_pages_host(0, 4) == NULL);
    CHECK(drk_pages_host(1024, 4) == NULL);
    CHECK(drk_pages_host(3 * 4096, 4) == NULL);
    drk_page_backend *b = drk_pages_host(64 * KIB, 4);
    CHECK(b && strcmp(b->name, "host") == 0 && b->page_size == 64 * KIB && b->capacity == 4);
    if (b)
        b->destroy(b);
    b = drk_pages_counting(2 * MIB, 4);
    CHECK(b && strcmp(b->name, "counting") == 0 && b->page_size == 2 * MIB && b->capacity == 4);
    if (b)
        b->destroy(b);
}

/* Every misuse is refused with INVALID and leaves the state as it was. */
static void test_misuse(factory make)
{
    const size_t ps = 64 * KIB;
    drk_page_backend *b = make(ps, 16);
    uintptr_t va = 0, gone = 0;
    drk_page_handle p[3], stale;

    CHECK(b->reserve(b, 0, &va) == DRK_PAGES_INVALID);
    CHECK(b->reserve(b, ps + 4096, &va) == DRK_PAGES_INVALID);
    CHECK(b->reserve(b, ps, NULL) == DRK_PAGES_INVALID);
    CHECK(b->reserve(b, 8 * ps, &va) == DRK_PAGES_OK && va && va % ps == 0);
    /* A range given back: its addresses are outside every reservation. */
    CHECK(b->reserve(b, 2 * ps, &gone) == DRK_PAGES_OK && gone % ps == 0);
    CHECK(gone + 2 * ps <= va || gone >= va + 8 * ps);
    CHECK(b->unreserve(b, gone, 2 * ps) == DRK_PAGES_OK);
    CHECK(b->unreserve(b, gone, 2 * ps) == DRK_PAGES_INVALID);

    for (int i = 0; i < 3; i++)
        CHECK(b->create(b, &p[i]) == DRK_PAGES_OK);
    CHECK(b->create(b, NULL) == DRK_PAGES_INVALID);
    CHECK(b->pages_created(b) == 3);

    CHECK(b->map(b, va, &p[0], 1) == DRK_PAGES_OK);
    CHECK(b->map(b, va, &p[0], 1) == DRK_PAGES_INVALID);         /* mapped twice at one address */
    CHECK(b->map(b, va, &p[1], 1) == DRK_PAGES_INVALID);         /* another page over it */
    CHECK(b->map(b, va + ps, &p[0], 1) == DRK_PAGES_OK);         /* one page, two addresses: fine */
    CHECK(b->map(b, va + 2 * ps, p, 0) == DRK_PAGES_INVALID);    /* nothing */
    CHECK(b->map(b, va + 2 * ps, NULL, 1) == DRK_PAGES_INVALID);
    CHECK(b->map(b, va + 2 * ps + 4096, &p[1], 1) == DRK_PAGES_INVALID); /* unaligned */
    CHECK(b->map(b, va + 7 * ps, p + 1, 2) == DRK_PAGES_INVALID);         /* runs past the range */
    CHECK(b->map(b, va - ps, p + 1, 2) == DRK_PAGES_INVALID);             /* starts before it */
    CHECK(b->map(b, gone, &p[1], 1) == DRK_PAGES_INVALID);                /* outside any range */
    CHECK(b->map(b, va + ps, p + 1, 2) == DRK_PAGES_INVALID); /* second address of the run is mapped */
    CHECK(b->map(b, va + 2 * ps, (drk_page_handle[]){p[1], 12345}, 2) == DRK_PAGES_INVALID);
    CHECK(b->pages_mapped(b) == 2);

    /* A released page's handle stays dead, also once its slot is reused. */
    CHECK(b->create(b, &stale) == DRK_PAGES_OK && b->release(b, stale) == DRK_PAGES_OK);
    CHECK(b->release(b, stale) == DRK_PAGES_INVALID);
    CHECK(b->map(b, va + 2 * ps, &stale, 1) == DRK_PAGES_INVALID);
    drk_page_handle again;
    CHECK(b->create(b, &again) == DRK_PAGES_OK && again != stale);
    CHECK(b->map(b, va + 2 * ps, &stale, 1) == DRK_PAGES_INVALID);
    CHECK(b->release(b, again) == DRK_PAGES_OK);

    CHECK(b->release(b, p[0]) == DRK_PAGES_INVALID); /* mapped */
    CHECK(b->unmap(b, va + 2 * ps, 1) == DRK_PAGES_INVALID); /* never mapped */
    CHECK(b->unmap(b, va, 3) == DRK_PAGES_INVALID);          /* partly mapped */
    CHECK(b->unmap(b, va + 4096, 1) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, va, 0) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, gone, 1) == DRK_PAGES_INVALID);
    CHECK(b->pages_mapped(b) == 2);
    CHECK(b->unreserve(b, va, 8 * ps) == DRK_PAGES_INVALID); /* pages mapped in it */
    CHECK(b->unreserve(b, va, 4 * ps) == DRK_PAGES_INVALID); /* not the reserved size */
    CHECK(b->unreserve(b, va + ps, 7 * ps) == DRK_PAGES_INVALID);

    CHECK(b->unmap(b, va + ps, 1) == DRK_PAGES_OK);
    CHECK(b->release(b, p[0]) == DRK_PAGES_INVALID); /* still mapped at va */
    CHECK(b->unmap(b, va, 1) == DRK_PAGES_OK);
    CHECK(b->unmap(b, va, 1) == DRK_PAGES_INVALID);
    CHECK(b->pages_mapped(b) == 0);
    CHECK(b->release(b, p[0]) == DRK_PAGES_OK);
    CHECK(b->release(b, p[0]) == DRK_PAGES_INVALID);
    CHECK(b->pages_created(b) == 2);

    /* A run spanning the whole range, then the range goes. */
    drk_page_handle run[8];
    for (int i = 0; i < 8; i++)
        run[i] = p[1 + i % 2];
    CHECK(b->map(b, va, run, 8) == DRK_PAGES_OK && b->pages_mapped(b) == 8);
    CHECK(b->release(b, p[2]) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, va, 8) == DRK_PAGES_OK && b->pages_mapped(b) == 0);
    CHECK(b->unreserve(b, va, 8 * ps) == DRK_PAGES_OK);
    CHECK(b->map(b, va, &p[1], 1) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, va, 1) == DRK_PAGES_INVALID);
    CHECK(b->release(b, p[1]) == DRK_PAGES_OK && b->release(b, p[2]) == DRK_PAGES_OK);
    CHECK(b->pages_created(b) == 0);
    b->destroy(b);
}

static void test_runs(factory make)
{
    drk_page_backend *b = make(64 * KIB, 8);
    check_runs(b, make == drk_pages_host);
    b->destroy(b);
}

/* Pages beyond capacity are OOM; a release makes room again. */
static void test_capacity(factory make)
{
    drk_page_backend *b = make(64 * KIB, 4);
    drk_page_handle p[5];
    for (int i = 0; i < 4; i++)
        CHECK(b->create(b, &p[i]) == DRK_PAGES_OK);
    CHECK(b->create(b, &p[4]) == DRK_PAGES_OOM);
    CHECK(b->pages_created(b) == 4);
    CHECK(b->release(b, p[1]) == DRK_PAGES_OK);
    CHECK(b->create(b, &p[1]) == DRK_PAGES_OK);
    CHECK(b->create(b, &p[4]) == DRK_PAGES_OOM);
    b->destroy(b); /* with pages left: destroy frees them */

    b = make(64 * KIB, 0);
    CHECK(b->create(b, &p[0]) == DRK_PAGES_OOM);
    b->destroy(b);
}

/* Whether /proc/self/maps shows [va, va + len) inaccessible (---p). */
static int inaccessible(uintptr_t va, size_t len)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= va && va + len <= hi)
            found = strcmp(perms, "---p") == 0;
    }
    if (f)
        fclose(f);
    return found;
}

/* The same physical page at several addresses: writes through one show
 * through the other, and survive unmapping the first (stitching). */
static void test_host_aliasing(void)
{
    const size_t ps = 64 * KIB;
    drk_page_backend *b = drk_pages_host(ps, 16);
    uintptr_t a, s;
    drk_page_handle p[4];
    CHECK(b->reserve(b, 4 * ps, &a) == DRK_PAGES_OK && a % ps == 0);
    CHECK(b->reserve(b, 3 * ps, &s) == DRK_PAGES_OK && s % ps == 0);
    CHECK(inaccessible(a, 4 * ps) && inaccessible(s, 3 * ps));
    for (int i = 0; i < 4; i++)
        CHECK(b->create(b, &p[i]) == DRK_PAGES_OK);
    CHECK(b->map(b, a, p, 4) == DRK_PAGES_OK);
    for (int i = 0; i < 4; i++)
        fill(a + i * ps, ps, 100 + i);

    /* Stitch pages 2 and 0 into s, out of order. */
    CHECK(b->map(b, s, (drk_page_handle[]){p[2], p[0]}, 2) == DRK_PAGES_OK);
    CHECK(holds(s, ps, 102) && holds(s + ps, ps, 100));
    fill(s + ps, ps, 200); /* written through s, read through a */
    CHECK(holds(a, ps, 200));
    CHECK(b->pages_mapped(b) == 6);

    CHECK(b->unmap(b, a, 4) == DRK_PAGES_OK);
    CHECK(inaccessible(a, 4 * ps));
    CHECK(holds(s, ps, 102) && holds(s + ps, ps, 200));

    /* The unmapped range takes pages again, here 3 then 1. */
    CHECK(b->map(b, a + ps, (drk_page_handle[]){p[3], p[1]}, 2) == DRK_PAGES_OK);
    CHECK(holds(a + ps, ps, 103) && holds(a + 2 * ps, ps, 101));
    CHECK(inaccessible(a, ps) && inaccessible(a + 3 * ps, ps));
    CHECK(b->map(b, s + 2 * ps, &p[3], 1) == DRK_PAGES_OK);
    fill(s + 2 * ps, ps, 300);
    CHECK(holds(a + ps, ps, 300));

    CHECK(b->unmap(b, s, 3) == DRK_PAGES_OK && b->unmap(b, a + ps, 2) == DRK_PAGES_OK);
    CHECK(b->unreserve(b, s, 3 * ps) == DRK_PAGES_OK);
    for (int i = 0; i < 4; i++)
        CHECK(b->release(b, p[i]) == DRK_PAGES_OK);
    b->destroy(b); /* with a reservation left */
}

/* Size of this process's memfd named drk-pages (there is one backend at a
 * time here), or -1. */
static long memfd_size(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long size = -1;
    while (d && (e = readdir(d))) {
        char path[300], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        struct stat st;
        if (n <= 0)
            continue;
        target[n] = 0;
        if (strncmp(target, "/memfd:drk-pages", 16) == 0 && stat(path, &st) == 0)
            size = (long)st.st_size;
    }
    if (d)
        closedir(d);
    return size;
}

/* Released slices are reused: the file grows to the most pages live at
 * once, not to the pages ever created. */
static void test_host_reuse(void)
{
    const size_t ps = 64 * KIB;
    drk_page_backend *b = drk_pages_host(ps, 64);
    drk_page_handle p[8];
    CHECK(memfd_size() == 0);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 8; i++)
            CHECK(b->create(b, &p[i]) == DRK_PAGES_OK && slice_of(p[i]) < 8);
        for (int i = 0; i < 8; i++)
            CHECK(b->release(b, p[i]) == DRK_PAGES_OK);
    }
    CHECK(memfd_size() == (long)(8 * ps));
    b->destroy(b);
    CHECK(memfd_size() == -1); /* closed */
}

/* A run handle made of reused slices apart in the file and a new one:
 * the file grows by that one, each page is its own memory, and a mapping
 * among single pages shows the same bytes as one of the run alone. */
static void test_host_run_slices(void)
{
    const size_t ps = 64 * KIB;
    drk_page_backend *b = drk_pages_host(ps, 8);
    drk_page_handle p[4], r;
    uintptr_t va, vb;
    for (int i = 0; i < 4; i++)
        CHECK(b->create(b, &p[i]) == DRK_PAGES_OK);
    CHECK(b->release(b, p[1]) == DRK_PAGES_OK && b->release(b, p[3]) == DRK_PAGES_OK);
    CHECK(b->create_run(b, 3, &r) == DRK_PAGES_OK && b->pages_created(b) == 5);
    CHECK(memfd_size() == (long)(5 * ps));
    CHECK(b->reserve(b, 5 * ps, &va) == DRK_PAGES_OK && b->reserve(b, 3 * ps, &vb) == DRK_PAGES_OK);
    CHECK(b->map(b, va, (drk_page_handle[]){p[0], r, p[2]}, 3) == DRK_PAGES_OK && b->pages_mapped(b) == 5);
    fill_pages(va, ps, 5, 50);
    CHECK(holds_pages(va, ps, 5, 50));
    CHECK(b->map(b, vb, &r, 1) == DRK_PAGES_OK && holds_pages(vb, ps, 3, 51));
    CHECK(b->unmap(b, va, 5) == DRK_PAGES_OK && inaccessible(va, 5 * ps));
    CHECK(holds_pages(vb, ps, 3, 51));
    CHECK(b->unmap(b, vb, 3) == DRK_PAGES_OK && b->release(b, r) == DRK_PAGES_OK);
    /* Its slices come back, to a run as to single pages. */
    CHECK(b->create_run(b, 2, &r) == DRK_PAGES_OK && b->create(b, &p[1]) == DRK_PAGES_OK);
    CHECK(memfd_size() == (long)(5 * ps) && b->pages_created(b) == 5);
    b->destroy(b);
}

/* Many threads at once, each with a range of its own and a window of a
 * shared one: pages created, mapped at two addresses, written and read (host),
 * unmapped and released. */
enum { THREADS = 8, ROUNDS = 1500 };

typedef struct worker {
    drk_page_backend *b;
    uintptr_t own, shared;
    int real, t, errors;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    drk_page_backend *b = w->b;
    size_t ps = b->page_size;
    uintptr_t win = w->shared + (size_t)w->t * 2 * ps;
    for (int r = 0; r < ROUNDS; r++) {
        drk_page_handle p[2];
        uint64_t seed = (uint64_t)w->t << 32 | (uint64_t)r;
        int ok = b->create(b, &p[0]) == DRK_PAGES_OK && b->create(b, &p[1]) == DRK_PAGES_OK &&
                 b->map(b, w->own, p, 2) == DRK_PAGES_OK &&
                 b->map(b, win + (size_t)(r & 1) * ps, &p[1], 1) == DRK_PAGES_OK;
        if (ok && w->real) {
            fill(w->own + ps, ps, seed);
            ok = holds(win + (size_t)(r & 1) * ps, ps, seed);
        }
        ok = ok && b->unmap(b, w->own, 2) == DRK_PAGES_OK && b->release(b, p[1]) == DRK_PAGES_INVALID &&
             b->unmap(b, win + (size_t)(r & 1) * ps, 1) == DRK_PAGES_OK && b->release(b, p[0]) == DRK_PAGES_OK &&
             b->release(b, p[1]) == DRK_PAGES_OK;
        w->errors += !ok;
    }
    return NULL;
}

static void test_threads(factory make, int real)
{
    const size_t ps = 64 * KIB;
    drk_page_backend *b = make(ps, 2 * THREADS);
    worker w[THREADS];
    pthread_t th[THREADS];
    uintptr_t shared;
    CHECK(b->reserve(b, 2 * THREADS * ps, &shared) == DRK_PAGES_OK);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.b = b, .shared = shared, .real = real, .t = i};
        CHECK(b->reserve(b, 2 * ps, &w[i].own) == DRK_PAGES_OK);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, work, &w[i]);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0);
        CHECK(b->unreserve(b, w[i].own, 2 * ps) == DRK_PAGES_OK);
    }
    CHECK(b->pages_created(b) == 0 && b->pages_mapped(b) == 0);
    CHECK(b->unreserve(b, shared, 2 * THREADS * ps) == DRK_PAGES_OK);
    if (real)
        CHECK(memfd_size() <= (long)(2 * THREADS * ps));
    b->destroy(b);
}

/* Counting addresses: page-aligned, high, never overlapping, a gap page
 * between ranges. */
static void test_counting_addresses(void)
{
    const size_t ps = 2 * MIB;
    drk_page_backend *b = drk_pages_counting(ps, 8);
    uintptr_t v1, v2;
    CHECK(b->reserve(b, 3 * ps, &v1) == DRK_PAGES_OK && b->reserve(b, ps, &v2) == DRK_PAGES_OK);
    CHECK(v1 >= 0x7f0000000000 && v1 % ps == 0 && v2 % ps == 0);
    CHECK(v2 >= v1 + 4 * ps);
    drk_page_handle p;
    CHECK(b->create(b, &p) == DRK_PAGES_OK);
    CHECK(b->map(b, v1 + 3 * ps, &p, 1) == DRK_PAGES_INVALID); /* the gap */
    CHECK(b->map(b, v1 + 2 * ps, (drk_page_handle[]){p, p}, 2) == DRK_PAGES_INVALID);
    b->destroy(b);
}

/* The process's CPU time: the scale check guards against a slower algorithm,
 * and must not fail because other work shares the machine (CI, -j). */
static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#if defined(__SANITIZE_ADDRESS__)
#define SCALE_LIMIT_S 5.0
#else
#define SCALE_LIMIT_S 1.0
#endif

/* 100 GiB of 2 MiB pages, a range of 1 1/8 of it: a million single-page
 * maps and unmaps with 40,000 mapped at a time, then the whole memory mapped
 * at two ranges in two calls, as single pages, as runs of 512 and as one
 * run handle. */
static void test_counting_scale(void)
{
    const size_t ps = 2 * MIB, cap = 100 * GIB / ps, slots = cap + cap / 8, window = 40000;
    enum { OPS = 500000 };
    drk_page_backend *b = drk_pages_counting(ps, cap);
    drk_page_handle *p = malloc(cap * sizeof *p);
    uintptr_t va, va2;
    double t0 = seconds();
    CHECK(b->reserve(b, slots * ps, &va) == DRK_PAGES_OK);
    int errors = 0;
    for (size_t i = 0; i < cap; i++)
        errors += b->create(b, &p[i]) != DRK_PAGES_OK;
    CHECK(b->create(b, &(drk_page_handle){0}) == DRK_PAGES_OOM);
    for (size_t i = 0; i < OPS; i++) {
        errors += b->map(b, va + (i % slots) * ps, &p[i % cap], 1) != DRK_PAGES_OK;
        if (i >= window)
            errors += b->unmap(b, va + ((i - window) % slots) * ps, 1) != DRK_PAGES_OK;
    }
    CHECK(b->pages_mapped(b) == window);
    for (size_t i = OPS - window; i < OPS; i++)
        errors += b->unmap(b, va + (i % slots) * ps, 1) != DRK_PAGES_OK;
    CHECK(b->pages_mapped(b) == 0);
    CHECK(b->reserve(b, cap * ps, &va2) == DRK_PAGES_OK);
    CHECK(b->map(b, va, p, cap) == DRK_PAGES_OK && b->map(b, va2, p, cap) == DRK_PAGES_OK);
    CHECK(b->pages_mapped(b) == 2 * cap);
    CHECK(b->release(b, p[cap / 2]) == DRK_PAGES_INVALID);
    CHECK(b->unmap(b, va, cap) == DRK_PAGES_OK && b->unmap(b, va2, cap) == DRK_PAGES_OK);
    for (size_t i = 0; i < cap; i++)
        errors += b->release(b, p[i]) != DRK_PAGES_OK;
    /* The same memory as runs of 512 pages, then as one run. */
    const size_t runs = cap / 512;
    for (size_t i = 0; i < runs; i++)
        errors += b->create_run(b, 512, &p[i]) != DRK_PAGES_OK;
    CHECK(b->map(b, va, p, runs) == DRK_PAGES_OK && b->map(b, va2, p, runs) == DRK_PAGES_OK);
    CHECK(b->pages_created(b) == cap && b->pages_mapped(b) == 2 * cap);
    CHECK(b->unmap(b, va, cap) == DRK_PAGES_OK && b->unmap(b, va2, cap) == DRK_PAGES_OK);
    for (size_t i = 0; i < runs; i++)
        errors += b->release(b, p[i]) != DRK_PAGES_OK;
    CHECK(b->create_run(b, cap, &p[0]) == DRK_PAGES_OK);
    CHECK(b->map(b, va, p, 1) == DRK_PAGES_OK && b->map(b, va2, p, 1) == DRK_PAGES_OK);
    CHECK(b->unmap(b, va, cap) == DRK_PAGES_OK && b->unmap(b, va2, cap) == DRK_PAGES_OK);
    CHECK(b->release(b, p[0]) == DRK_PAGES_OK);
    double dt = seconds() - t0;
    CHECK(errors == 0);
    CHECK(b->pages_created(b) == 0 && b->pages_mapped(b) == 0);
    printf("counting: %zu pages, %d single-page maps and unmaps, 2 x %zu pages as single pages, 512-page handles "
           "and one handle: %.3f s\n",
           cap, 2 * OPS, cap, dt);
    CHECK(dt < SCALE_LIMIT_S);
    free(p);
    b->destroy(b);
}

int main(void)
{
    test_construct();
    test_misuse(drk_pages_host);
    test_misuse(drk_pages_counting);
    test_capacity(drk_pages_host);
    test_capacity(drk_pages_counting);
    test_runs(drk_pages_host);
    test_runs(drk_pages_counting);
    test_host_aliasing();
    test_host_reuse();
    test_host_run_slices();
    test_threads(drk_pages_host, 1);
    test_threads(drk_pages_counting, 0);
    test_counting_addresses();
    test_counting_scale();
    return CHECK_DONE();
}
