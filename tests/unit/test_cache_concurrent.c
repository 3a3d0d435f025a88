/* Many processes on one cache at once, as torchrun ranks are: for two
 * seconds each of six processes puts and gets the same 24 keys (and a few
 * of its own), every put of a key with other contents and another length,
 * under a cap small enough that evictions run all the while. Every hit
 * must be whole and self-consistent (its bytes derive from its first
 * eight), no get may find an invalid entry, and afterwards every entry
 * verifies, no temporary file is left, and the cap held within what the
 * design allows (docs/cache.md). */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cache.h"
#include "base/log.h"
#include "tests/unit/check.h"

enum { NPROC = 6, NSHARED = 24, NPRIVATE = 6 };
#define SECONDS 2.0

typedef struct tally {
    uint64_t puts, put_failures, hits, misses, invalid, torn, evicted;
} tally;

static drk_cache_key key_of(int i)
{
    char extra[32];
    snprintf(extra, sizeof extra, "key %d", i);
    drk_cache_key_parts p = {.ptx = ".entry k", .ptx_len = 8, .extra = extra, .extra_len = strlen(extra)};
    drk_cache_key k;
    drk_cache_key_make(&p, &k);
    return k;
}

/* Up to 384 KiB per key, and up to 4 KiB more that varies per write. */
static size_t base_len(int key) { return 1024 * (size_t)(1 + (key * 37) % 384); }

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* The payload for one write: its seed, then bytes derived from it. */
static size_t fill(unsigned char *buf, int key, uint64_t seed)
{
    size_t len = base_len(key) + seed % 4096;
    memcpy(buf, &seed, 8);
    for (size_t j = 8; j < len; j++)
        buf[j] = (unsigned char)(mix(seed + j / 8) >> (8 * (j % 8)));
    return len;
}

static int consistent(const unsigned char *data, size_t len, int key)
{
    if (len < 8)
        return 0;
    uint64_t seed;
    memcpy(&seed, data, 8);
    if (len != base_len(key) + seed % 4096)
        return 0;
    for (size_t j = 8; j < len; j++)
        if (data[j] != (unsigned char)(mix(seed + j / 8) >> (8 * (j % 8))))
            return 0;
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void child(const char *dir, uint64_t cap, int me, tally *t)
{
    char why[256];
    drk_cache *c;
    if (drk_cache_open(&c, dir, cap, 0, why, sizeof why) != 0) {
        fprintf(stderr, "child %d: %s\n", me, why);
        _exit(1);
    }
    unsigned char *buf = malloc(384 * 1024 + 8192);
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1), n = 0;
    double end = now_s() + SECONDS;
    while (now_s() < end) {
        rng = mix(rng + 1);
        int op = (int)(rng % 8);
        int key = op < 7 ? (int)((rng >> 8) % NSHARED) : 1000 + me * 100 + (int)((rng >> 8) % NPRIVATE);
        drk_cache_key k = key_of(key);
        if (op < 2 || op == 7) {
            size_t len = fill(buf, key, (uint64_t)getpid() << 32 | n++);
            if (drk_cache_put(c, &k, "cubin", buf, len, "concurrent") == 0)
                t->puts++;
            else
                t->put_failures++;
        }
        if (op >= 2) {
            drk_cache_blob b;
            if (drk_cache_get(c, &k, "cubin", &b) == 0) {
                t->hits++;
                if (!consistent(b.data, b.len, key) || strcmp(b.meta, "concurrent") != 0)
                    t->torn++;
                drk_cache_blob_free(&b);
            } else {
                t->misses++;
            }
        }
    }
    drk_cache_counters cn;
    drk_cache_counters_get(c, &cn);
    t->invalid = cn.invalid;
    t->evicted = cn.evicted;
    drk_cache_close(c);
    free(buf);
    _exit(0);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/drk-test-cache-conc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return perror("mkdtemp"), 1;
    uint64_t all = 0, biggest = 0;
    for (int i = 0; i < NSHARED; i++) {
        all += base_len(i) + 4096 + 256;
        if (base_len(i) + 4096 + 256 > biggest)
            biggest = base_len(i) + 4096 + 256;
    }
    uint64_t cap = all * 2 / 5; /* evictions all the time */
    tally *t = mmap(NULL, NPROC * sizeof *t, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(t != MAP_FAILED);
    memset(t, 0, NPROC * sizeof *t);
    fflush(stdout);
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++)
        if ((pids[i] = fork()) == 0)
            child(dir, cap, i, &t[i]);
    tally sum = {0};
    for (int i = 0; i < NPROC; i++) {
        int st;
        CHECK(waitpid(pids[i], &st, 0) == pids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        sum.puts += t[i].puts, sum.put_failures += t[i].put_failures, sum.hits += t[i].hits;
        sum.misses += t[i].misses, sum.invalid += t[i].invalid, sum.torn += t[i].torn, sum.evicted += t[i].evicted;
    }
    printf("concurrent: %d processes, %.0f s: %llu puts (%llu failed), %llu hits, %llu misses, %llu evicted, "
           "%llu invalid, %llu torn\n",
           NPROC, SECONDS, (unsigned long long)sum.puts, (unsigned long long)sum.put_failures,
           (unsigned long long)sum.hits, (unsigned long long)sum.misses, (unsigned long long)sum.evicted,
           (unsigned long long)sum.invalid, (unsigned long long)sum.torn);
    CHECK(sum.invalid == 0 && sum.torn == 0 && sum.put_failures == 0);
    CHECK(sum.hits > 100 && sum.puts > 100 && sum.evicted > 0);

    /* Afterwards: every entry whole, nothing half-written left, the cap kept
     * within what each process may have written since its last walk. */
    drk_cache_listing l;
    char why[256];
    CHECK(drk_cache_list(dir, &l, why, sizeof why) == 0);
    size_t bad = 0;
    for (size_t i = 0; i < l.n; i++) {
        drk_cache_info info;
        if (drk_cache_read_info(dir, l.files[i].name, 1, &info, why, sizeof why) != 0) {
            fprintf(stderr, "%s: %s\n", l.files[i].name, why);
            bad++;
        }
    }
    uint64_t slack = NPROC * (cap / 16 + biggest);
    printf("concurrent: %zu entries, %llu bytes, cap %llu (allowed while writers run: %llu), %zu temporary files\n",
           l.n, (unsigned long long)l.bytes, (unsigned long long)cap, (unsigned long long)(cap + slack), l.temps);
    CHECK(bad == 0 && l.temps == 0 && l.foreign == 0);
    CHECK(l.bytes <= cap + slack);
    drk_cache_listing_free(&l);
    drk_cache_removed r;
    CHECK(drk_cache_prune(dir, cap, &r, why, sizeof why) == 0);
    CHECK(drk_cache_list(dir, &l, why, sizeof why) == 0 && l.bytes <= cap);
    drk_cache_listing_free(&l);
    drk_cache_counters shared;
    drk_cache_shared_counters(dir, &shared);
    printf("concurrent: shared counters: %llu hits, %llu puts\n", (unsigned long long)shared.hits,
           (unsigned long long)shared.puts);
    CHECK(shared.hits == sum.hits && shared.puts == sum.puts); /* no close's addition lost */
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return CHECK_DONE();
}
