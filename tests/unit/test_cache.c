/* The cache on disk (base/cache.h), in one process: keys (the recipe pinned
 * by digests Python computed from docs/cache.md), put and get, every
 * truncation and byte flip of an entry rejected with one log line, another
 * key's or kind's file refused, LRU eviction order and the cap, the
 * failures (no directory, read-only, full disk, the file-size limit), a put
 * that owes a walk waiting out another process's lock (and not for ever),
 * the counters shared at close, prune and clear beside foreign files, and the
 * time of a hit, printed. The concurrent processes: test_cache_concurrent.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cache.h"
#include "base/cache_entry.h"
#include "base/log.h"
#include "base/options.h"
#include "tests/unit/check.h"

static char root[256];
static int logfd;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void rm_rf(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void subdir(char *out, size_t n, const char *name)
{
    if (snprintf(out, n, "%s/%s", root, name) >= (int)n)
        exit(1);
    rm_rf(out);
}

static drk_cache_key key_of(int i)
{
    char ptx[32];
    snprintf(ptx, sizeof ptx, ".entry k%d", i);
    drk_cache_key_parts p = {.ptx = ptx, .ptx_len = strlen(ptx), .device_name = "NVIDIA H200", .cc_major = 9,
                             .driver_version = 13000};
    drk_cache_key k;
    drk_cache_key_make(&p, &k);
    return k;
}

static unsigned char *payload_of(int i, size_t len)
{
    unsigned char *b = malloc(len ? len : 1);
    for (size_t j = 0; j < len; j++)
        b[j] = (unsigned char)(j * 7 + (size_t)i * 13 + (j >> 9));
    return b;
}

static void path_of(const char *dir, const drk_cache_key *k, const char *kind, char *out, size_t n)
{
    char name[DRK_CACHE_NAME_MAX];
    drk_cache_entry_name(k, kind, name);
    snprintf(out, n, "%s/v1/%s", dir, name);
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static void spit(const char *p, const void *data, size_t n)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, data, n) == (ssize_t)n);
    close(fd);
}

static off_t log_seen;

/* Log lines since the last call that contain `what`. */
static int log_lines(const char *what)
{
    off_t seen = log_seen;
    off_t end = lseek(logfd, 0, SEEK_END);
    size_t n = (size_t)(end - seen);
    char *buf = malloc(n + 1);
    CHECK(pread(logfd, buf, n, seen) == (ssize_t)n);
    buf[n] = '\0';
    log_seen = end;
    int count = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        printf("  log: %s\n", line);
        count += strstr(line, what) != NULL;
    }
    free(buf);
    return count;
}

static size_t count_files(const char *dir, const char *part)
{
    size_t n = 0;
    char fan[600];
    DIR *v = opendir(dir);
    struct dirent *e;
    while (v && (e = readdir(v))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(fan, sizeof fan, "%s/%s", dir, e->d_name);
        DIR *d = opendir(fan);
        struct dirent *f;
        while (d && (f = readdir(d)))
            n += strstr(f->d_name, part) != NULL;
        if (d)
            closedir(d);
    }
    if (v)
        closedir(v);
    return n;
}

static void test_keys(void)
{
    drk_cache_jit_option opts[] = {{0, 64}, {7, 4}};
    static const char ptx[] = "// ptx\n.version 8.0\n";
    drk_cache_key_parts p = {.ptx = ptx, .ptx_len = strlen(ptx), .options = opts, .noptions = 2,
                             .device_name = "NVIDIA H200", .cc_major = 9, .cc_minor = 0, .driver_version = 13000,
                             .extra = "k", .extra_len = 1};
    for (int i = 0; i < 16; i++)
        p.device_uuid[i] = (unsigned char)i;
    drk_cache_key k, k2, empty;
    char hex[65];
    drk_cache_key_make(&p, &k);
    drk_cache_key_hex(&k, hex);
    /* The recipe of docs/cache.md, computed by Python's hashlib: a change to
     * it must change DRK_CACHE_FORMAT too (and these digests). */
    CHECK(strcmp(hex, "ecbd2b5ed5371029d150372afdf799e2800ca0d1e8054e310588cbb571b4e586") == 0);
    drk_cache_key_parts none = {0};
    drk_cache_key_make(&none, &empty);
    drk_cache_key_hex(&empty, hex);
    CHECK(strcmp(hex, "3315c305d9e2819be42ba7d1379346bec5df91d649b0c1837e31a3c1fa515da9") == 0);
    CHECK(drk_cache_key_parse(hex, &k2) == 0 && memcmp(&k2, &empty, sizeof k2) == 0);
    CHECK(drk_cache_key_parse("3315C305d9e2819be42ba7d1379346bec5df91d649b0c1837e31a3c1fa515da9", &k2) != 0);
    CHECK(drk_cache_key_parse("3315c305", &k2) != 0);
    CHECK(drk_cache_key_parse("3315c305d9e2819be42ba7d1379346bec5df91d649b0c1837e31a3c1fa515da90", &k2) != 0);

    /* Every part counts, and so does the options' order. */
    drk_cache_key_parts q;
#define DIFFERS(change)                                                                                        \
    do {                                                                                                       \
        q = p;                                                                                                 \
        change;                                                                                                \
        drk_cache_key_make(&q, &k2);                                                                           \
        CHECK(memcmp(&k, &k2, sizeof k) != 0);                                                                 \
    } while (0)
    drk_cache_jit_option swapped[] = {{7, 4}, {0, 64}}, other[] = {{0, 63}, {7, 4}};
    DIFFERS(q.ptx_len--);
    DIFFERS(q.options = swapped);
    DIFFERS(q.options = other);
    DIFFERS(q.noptions = 1);
    DIFFERS(q.device_name = "NVIDIA H100");
    DIFFERS(q.device_uuid[15] = 0);
    DIFFERS(q.cc_minor = 1);
    DIFFERS(q.cc_major = 10);
    DIFFERS(q.driver_version = 12080);
    DIFFERS(q.extra = NULL);
    /* Parts cannot run into each other: "ab" + "c" is not "a" + "bc". */
    drk_cache_key_parts a = {.ptx = "ab", .ptx_len = 2, .device_name = "c"};
    drk_cache_key_parts b = {.ptx = "a", .ptx_len = 1, .device_name = "bc"};
    drk_cache_key_make(&a, &k);
    drk_cache_key_make(&b, &k2);
    CHECK(memcmp(&k, &k2, sizeof k) != 0);

    CHECK(drk_cache_kind_valid("cubin") && drk_cache_kind_valid("result_2") && drk_cache_kind_valid("a"));
    CHECK(!drk_cache_kind_valid("") && !drk_cache_kind_valid(NULL) && !drk_cache_kind_valid("Cubin"));
    CHECK(!drk_cache_kind_valid("a.b") && !drk_cache_kind_valid("a/b") && !drk_cache_kind_valid("0123456789abcdef"));
    CHECK(drk_cache_kind_valid("0123456789abcde"));

    char dir[64];
    CHECK(drk_cache_dir_choose("/c", "/x", "/h", dir, sizeof dir) == 0 && strcmp(dir, "/c") == 0);
    CHECK(drk_cache_dir_choose("", "/x", "/h", dir, sizeof dir) == 0 && strcmp(dir, "/x/drk") == 0);
    CHECK(drk_cache_dir_choose(NULL, "rel", "/h", dir, sizeof dir) == 0 && strcmp(dir, "/h/.cache/drk") == 0);
    CHECK(drk_cache_dir_choose(NULL, "", "/h", dir, sizeof dir) == 0 && strcmp(dir, "/h/.cache/drk") == 0);
    CHECK(drk_cache_dir_choose(NULL, NULL, "", dir, sizeof dir) != 0);
    CHECK(drk_cache_dir_choose(NULL, NULL, "/a/very/long/home/directory/that/does/not/fit", dir, 16) != 0);

    /* DRK_CACHE_SIZE: bytes, a share of the file system, 0 for none. */
    drk_option_value v;
    char why[96];
    CHECK(drk_option_parse(DRK_OPT_CACHE_SIZE, drk_option_table[DRK_OPT_CACHE_SIZE].fallback, &v, why, sizeof why) == 0);
    CHECK(strcmp(drk_option_table[DRK_OPT_CACHE_SIZE].fallback, DRK_CACHE_DEFAULT_SIZE) == 0);
    CHECK(drk_cache_cap_bytes(v.num, root) == 1ull << 30);
    CHECK(drk_option_parse(DRK_OPT_CACHE_SIZE, "0", &v, why, sizeof why) == 0 && drk_cache_cap_bytes(v.num, root) == 0);
    CHECK(drk_option_parse(DRK_OPT_CACHE_SIZE, "10%", &v, why, sizeof why) == 0);
    uint64_t share = drk_cache_cap_bytes(v.num, root);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/not/yet/made", root);
    CHECK(share > 0 && drk_cache_cap_bytes(v.num, missing) == share);
    CHECK(drk_option_parse(DRK_OPT_CACHE_SIZE, "lots", &v, why, sizeof why) != 0);
    CHECK(drk_option_find("CACHE_DIR") == DRK_OPT_CACHE_DIR);
}

static void test_roundtrip(void)
{
    char dir[300], why[256];
    subdir(dir, sizeof dir, "roundtrip/deeper"); /* made with its parent */
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, 64 << 20, 0, why, sizeof why) == 0);
    if (!c)
        return;
    char real[PATH_MAX];
    CHECK(realpath(dir, real) && strcmp(drk_cache_root(c), real) == 0);
    static const size_t sizes[] = {0, 1, 100, 4096, 256 << 10};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        drk_cache_key k = key_of((int)i);
        drk_cache_blob b;
        CHECK(drk_cache_get(c, &k, "cubin", &b) == -1 && b.mem == NULL);
        unsigned char *data = payload_of((int)i, sizes[i]);
        CHECK(drk_cache_put(c, &k, "cubin", data, sizes[i], "_Z6vecaddPfS_S_i") == 0);
        CHECK(drk_cache_get(c, &k, "cubin", &b) == 0);
        CHECK(b.len == sizes[i] && memcmp(b.data, data, sizes[i]) == 0);
        CHECK(strcmp(b.meta, "_Z6vecaddPfS_S_i") == 0 && b.created_ns > 0);
        CHECK(((uintptr_t)b.data & 15) == 0);
        drk_cache_blob_free(&b);
        CHECK(b.mem == NULL);
        /* The same key's other kind is its own entry. */
        CHECK(drk_cache_get(c, &k, "result", &b) == -1);
        free(data);
    }
    /* A put replaces; meta NULL is "", and a long one is cut to fit. */
    drk_cache_key k = key_of(0);
    char *longmeta = malloc(10000);
    memset(longmeta, 'm', 9999);
    longmeta[9999] = '\0';
    CHECK(drk_cache_put(c, &k, "cubin", "new", 3, NULL) == 0);
    drk_cache_blob b;
    CHECK(drk_cache_get(c, &k, "cubin", &b) == 0 && b.len == 3 && memcmp(b.data, "new", 3) == 0 && !*b.meta);
    drk_cache_blob_free(&b);
    CHECK(drk_cache_put(c, &k, "result", "r", 1, longmeta) == 0);
    CHECK(drk_cache_get(c, &k, "result", &b) == 0 && strlen(b.meta) == DRK_CACHE_META_MAX - 1);
    drk_cache_blob_free(&b);
    free(longmeta);
    /* Kinds that cannot name a file are refused, not stored. */
    CHECK(drk_cache_put(c, &k, "../x", "x", 1, NULL) == -1);
    CHECK(drk_cache_get(c, &k, "../x", &b) == -1);
    drk_cache_counters n;
    drk_cache_counters_get(c, &n);
    printf("roundtrip: hits %llu misses %llu puts %llu\n", (unsigned long long)n.hits, (unsigned long long)n.misses,
           (unsigned long long)n.puts);
    CHECK(n.hits == 7 && n.misses == 10 && n.puts == 7 && n.invalid == 0);
    /* The directory went away under the handle (a clear): puts make it again. */
    char v1[320];
    snprintf(v1, sizeof v1, "%s/v1", dir);
    rm_rf(v1);
    CHECK(drk_cache_get(c, &k, "cubin", &b) == -1);
    CHECK(drk_cache_put(c, &k, "cubin", "again", 5, NULL) == 0);
    CHECK(drk_cache_get(c, &k, "cubin", &b) == 0 && b.len == 5);
    drk_cache_blob_free(&b);
    CHECK(count_files(v1, ".tmp.") == 0);
    drk_cache_close(c);
    drk_cache_close(NULL);
}

static void test_corrupt(void)
{
    char dir[300], why[256], path[600], other[600];
    subdir(dir, sizeof dir, "corrupt");
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, 1 << 20, 0, why, sizeof why) == 0);
    if (!c)
        return;
    (void)log_lines("");
    drk_cache_key k = key_of(1), k2 = key_of(2);
    unsigned char *data = payload_of(1, 100);
    CHECK(drk_cache_put(c, &k, "cubin", data, 100, "kern") == 0);
    path_of(dir, &k, "cubin", path, sizeof path);
    size_t size = 0;
    unsigned char *good = slurp(path, &size);
    CHECK(good && size == DRK_CACHE_HEADER + 16 + 100);
    drk_cache_blob b;
    int bad = 0, cases = 0;
    /* Cut at every length. */
    for (size_t len = 0; len < size; len++, cases++) {
        spit(path, good, len);
        bad += drk_cache_get(c, &k, "cubin", &b) == 0;
        CHECK(!exists(path)); /* removed */
    }
    /* Every byte flipped, one bit low and one high. */
    unsigned char *flipped = malloc(size + 1);
    for (size_t at = 0; at < size; at++)
        for (int m = 0; m < 2; m++, cases++) {
            memcpy(flipped, good, size);
            flipped[at] ^= m ? 0x80 : 0x01;
            spit(path, flipped, size);
            bad += drk_cache_get(c, &k, "cubin", &b) == 0;
        }
    /* One byte too many. */
    memcpy(flipped, good, size);
    flipped[size] = 0;
    spit(path, flipped, size + 1);
    bad += drk_cache_get(c, &k, "cubin", &b) == 0;
    cases++;
    /* Another key's file renamed into this key's place, and another kind's. */
    spit(path, good, size);
    CHECK(drk_cache_put(c, &k2, "cubin", "k2", 2, NULL) == 0);
    path_of(dir, &k2, "cubin", other, sizeof other);
    spit(other, good, size);
    bad += drk_cache_get(c, &k2, "cubin", &b) == 0;
    path_of(dir, &k, "result", other, sizeof other);
    spit(other, good, size);
    bad += drk_cache_get(c, &k, "result", &b) == 0;
    cases += 2;
    printf("corrupt: %d of %d damaged entries accepted\n", bad, cases);
    CHECK(bad == 0);
    drk_cache_counters n;
    drk_cache_counters_get(c, &n);
    CHECK(n.invalid == (uint64_t)cases && n.hits == 0);
    /* The good file is still good, and one line was logged for them all. */
    CHECK(drk_cache_get(c, &k, "cubin", &b) == 0 && b.len == 100 && memcmp(b.data, data, 100) == 0);
    drk_cache_blob_free(&b);
    CHECK(log_lines("ignored") == 1);
    /* The tool's reader agrees: header-only and verified. */
    drk_cache_info info;
    char name[DRK_CACHE_NAME_MAX];
    drk_cache_entry_name(&k, "cubin", name);
    CHECK(drk_cache_read_info(dir, name, 1, &info, why, sizeof why) == 0 && info.payload == 100 &&
          strcmp(info.meta, "kern") == 0 && strcmp(info.kind, "cubin") == 0);
    flipped[DRK_CACHE_HEADER + 16 + 50] ^= 1;
    spit(path, flipped, size);
    CHECK(drk_cache_read_info(dir, name, 0, &info, why, sizeof why) == 0);
    CHECK(drk_cache_read_info(dir, name, 1, &info, why, sizeof why) != 0 && strstr(why, "checksum"));
    CHECK(drk_cache_read_info(dir, "zz/nope", 0, &info, why, sizeof why) != 0);
    free(flipped);
    free(good);
    free(data);
    drk_cache_close(c);
}

static void set_used(const char *dir, const drk_cache_key *k, time_t when)
{
    char path[600];
    path_of(dir, k, "cubin", path, sizeof path);
    struct timespec t[2] = {{when, 0}, {when, 0}};
    CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
}

static uint64_t dir_bytes(const char *dir, size_t *n)
{
    drk_cache_listing l;
    char why[256];
    CHECK(drk_cache_list(dir, &l, why, sizeof why) == 0);
    uint64_t b = l.bytes;
    if (n)
        *n = l.n;
    drk_cache_listing_free(&l);
    return b;
}

static void test_lru(void)
{
    char dir[300], why[256], path[600];
    subdir(dir, sizeof dir, "lru");
    const size_t len = 4000, entry = DRK_CACHE_HEADER + 16 + 4000;
    const uint64_t cap = 10 * entry;
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, cap, 0, why, sizeof why) == 0);
    if (!c)
        return;
    unsigned char *data = payload_of(0, len);
    time_t base = time(NULL) - 100000;
    /* Ten fill the cap exactly: nothing goes. Their uses are set a second
     * apart (mtimes written in one tick would tie). */
    for (int i = 0; i < 10; i++) {
        drk_cache_key k = key_of(i);
        CHECK(drk_cache_put(c, &k, "cubin", data, len, NULL) == 0);
        set_used(dir, &k, base + i);
    }
    size_t n;
    CHECK(dir_bytes(dir, &n) == cap && n == 10);
    drk_cache_close(c);
    /* A new handle (another process) uses entry 0: it becomes the newest. */
    CHECK(drk_cache_open(&c, dir, cap, 0, why, sizeof why) == 0);
    drk_cache_key k0 = key_of(0);
    drk_cache_blob b;
    CHECK(drk_cache_get(c, &k0, "cubin", &b) == 0);
    drk_cache_blob_free(&b);
    path_of(dir, &k0, "cubin", path, sizeof path);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_mtime > base + 1000);
    /* The 11th passes the cap: down to 90%, the least recent first (1, 2). */
    drk_cache_key k10 = key_of(10);
    CHECK(drk_cache_put(c, &k10, "cubin", data, len, NULL) == 0);
    set_used(dir, &k10, base + 10);
    for (int i = 0; i <= 10; i++) {
        drk_cache_key k = key_of(i);
        path_of(dir, &k, "cubin", path, sizeof path);
        CHECK(exists(path) == !(i == 1 || i == 2));
    }
    CHECK(dir_bytes(dir, &n) == 9 * entry && n == 9);
    /* Forty more: the cap holds after every put, and the newest stay. */
    for (int i = 11; i < 51; i++) {
        drk_cache_key k = key_of(i);
        CHECK(drk_cache_put(c, &k, "cubin", data, len, NULL) == 0);
        set_used(dir, &k, base + i);
        CHECK(dir_bytes(dir, NULL) <= cap);
    }
    /* Exactly the newest eight, and entry 0, used after them all. */
    for (int i = 0; i < 51; i++) {
        drk_cache_key k = key_of(i);
        path_of(dir, &k, "cubin", path, sizeof path);
        CHECK(exists(path) == (i == 0 || i >= 43));
    }
    CHECK(dir_bytes(dir, &n) == 9 * entry && n == 9);
    drk_cache_counters cn;
    drk_cache_counters_get(c, &cn);
    printf("lru: %llu evicted (%llu bytes), %zu entries left\n", (unsigned long long)cn.evicted,
           (unsigned long long)cn.evicted_bytes, n);
    CHECK(cn.evicted >= 40);
    /* One larger than the whole cap is not stored (and evicts nothing). */
    unsigned char *huge = payload_of(0, cap);
    drk_cache_key kh = key_of(99);
    CHECK(drk_cache_put(c, &kh, "cubin", huge, cap, NULL) == -1);
    free(huge);
    drk_cache_close(c);
    free(data);
}

static int64_t elapsed(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (int64_t)(t1.tv_sec - t0->tv_sec) * 1000000000 + (t1.tv_nsec - t0->tv_nsec);
}

/* Another process holds v1/lock (its pass walked before these puts
 * landed): a put that owes a walk waits for it and then evicts, so the cap
 * holds once the puts return; a holder that never lets go costs a put (and
 * a close, adding its counters) two seconds, not a hang. */
static pid_t hold_lock(const char *dir, int ms)
{
    char path[600];
    snprintf(path, sizeof path, "%s/v1/lock", dir);
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(path, O_RDWR | O_CREAT, 0644);
        if (fd < 0 || flock(fd, LOCK_EX) != 0)
            _exit(1);
        (void)!write(ready[1], "x", 1);
        if (ms < 0)
            pause();
        else
            nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000}, NULL);
        _exit(0);
    }
    char x;
    CHECK(pid > 0 && read(ready[0], &x, 1) == 1);
    close(ready[0]);
    close(ready[1]);
    return pid;
}

static void test_lock_wait(void)
{
    char dir[300], why[256];
    subdir(dir, sizeof dir, "lockwait");
    const size_t len = 4000, entry = DRK_CACHE_HEADER + 16 + 4000;
    const uint64_t cap = 10 * entry; /* every put is past a sixteenth of it */
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, cap, 0, why, sizeof why) == 0);
    if (!c)
        return;
    unsigned char *data = payload_of(1, len);
    for (int i = 0; i < 10; i++) {
        drk_cache_key k = key_of(200 + i);
        CHECK(drk_cache_put(c, &k, "cubin", data, len, NULL) == 0);
    }
    CHECK(dir_bytes(dir, NULL) == cap);
    int st;
    struct timespec t0;
    pid_t holder = hold_lock(dir, 300);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 10; i < 13; i++) {
        drk_cache_key k = key_of(200 + i);
        CHECK(drk_cache_put(c, &k, "cubin", data, len, NULL) == 0);
    }
    int64_t waited = elapsed(&t0);
    CHECK(waitpid(holder, &st, 0) == holder && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("lock wait: puts waited %.0f ms for a lock held 300 ms; %llu bytes of a %llu cap\n", waited / 1e6,
           (unsigned long long)dir_bytes(dir, NULL), (unsigned long long)cap);
    CHECK(waited >= 250 * 1000000ll && dir_bytes(dir, NULL) <= cap);
    holder = hold_lock(dir, -1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    drk_cache_key k = key_of(213);
    CHECK(drk_cache_put(c, &k, "cubin", data, len, NULL) == 0); /* stored, the pass given up */
    waited = elapsed(&t0);
    printf("lock wait: a put gave up after %.0f ms on a lock never let go\n", waited / 1e6);
    CHECK(waited >= 1900 * 1000000ll && waited < 10000 * 1000000ll);
    /* A close adds its counters under the lock: it gives up too. */
    drk_cache *c2;
    CHECK(drk_cache_open(&c2, dir, cap, 0, why, sizeof why) == 0);
    drk_cache_blob b;
    CHECK(drk_cache_get(c2, &k, "cubin", &b) == 0);
    drk_cache_blob_free(&b);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    drk_cache_close(c2);
    waited = elapsed(&t0);
    kill(holder, SIGKILL);
    CHECK(waitpid(holder, &st, 0) == holder);
    printf("lock wait: a close gave up adding its counters after %.0f ms\n", waited / 1e6);
    CHECK(waited >= 1900 * 1000000ll && waited < 10000 * 1000000ll);
    k = key_of(214);
    CHECK(drk_cache_put(c, &k, "cubin", data, len, NULL) == 0);
    CHECK(dir_bytes(dir, NULL) <= cap);
    drk_cache_close(c);
    free(data);
}

/* In a child: returns its exit status (0 when its checks passed). */
static int in_child(void (*fn)(const char *), const char *dir)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        check_failures = 0;
        fn(dir);
        fflush(stdout);
        _exit(check_failures ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    log_seen = lseek(logfd, 0, SEEK_END); /* the child showed its lines */
    if (WIFSIGNALED(st)) {
        printf("child killed by signal %d\n", WTERMSIG(st));
        return 128 + WTERMSIG(st);
    }
    return WEXITSTATUS(st);
}

/* The cache exists with an entry, but this process may not write it. */
static void readonly_child(const char *dir)
{
    if (geteuid() == 0) {
        /* root writes everywhere: be nobody. */
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            printf("readonly: SKIPPED: cannot drop root (setuid: %s)\n", strerror(errno));
            _exit(77);
        }
    }
    char why[256];
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, 1 << 20, 0, why, sizeof why) == 0);
    if (!c)
        return;
    drk_cache_key k = key_of(5), k6 = key_of(6);
    drk_cache_blob b;
    CHECK(drk_cache_get(c, &k, "cubin", &b) == 0 && b.len == 10);
    drk_cache_blob_free(&b);
    CHECK(drk_cache_put(c, &k6, "cubin", "x", 1, NULL) == -1);
    CHECK(drk_cache_put(c, &k6, "cubin", "x", 1, NULL) == -1);
    CHECK(drk_cache_get(c, &k6, "cubin", &b) == -1);
    CHECK(drk_cache_get(c, &k, "cubin", &b) == 0);
    drk_cache_blob_free(&b);
    drk_cache_counters n;
    drk_cache_counters_get(c, &n);
    CHECK(n.put_failures == 2 && n.hits == 2);
    CHECK(log_lines("cannot create") == 1); /* twice refused, once said */
    drk_cache_close(c);
}

static void fsize_ignored_child(const char *dir)
{
    /* A full disk, as RLIMIT_FSIZE with SIGXFSZ ignored makes it: writes past
     * the limit fail (EFBIG) part way, like ENOSPC. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {64 << 10, 64 << 10};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    char why[256];
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, 16 << 20, 0, why, sizeof why) == 0);
    if (!c)
        return;
    unsigned char *big = payload_of(7, 256 << 10);
    drk_cache_key k = key_of(7), k8 = key_of(8), k5 = key_of(5);
    drk_cache_blob b;
    CHECK(drk_cache_put(c, &k, "cubin", big, 256 << 10, NULL) == -1);
    CHECK(drk_cache_get(c, &k, "cubin", &b) == -1);
    CHECK(drk_cache_put(c, &k8, "cubin", big, 1024, NULL) == 0); /* what fits still goes */
    CHECK(drk_cache_get(c, &k8, "cubin", &b) == 0 && b.len == 1024);
    drk_cache_blob_free(&b);
    CHECK(drk_cache_get(c, &k5, "cubin", &b) == 0);
    drk_cache_blob_free(&b);
    char v1[320];
    snprintf(v1, sizeof v1, "%s/v1", dir);
    CHECK(count_files(v1, ".tmp.") == 0); /* the torn temporary file is gone */
    CHECK(log_lines("File too large") == 1);
    free(big);
    drk_cache_close(c);
}

static void fsize_default_child(const char *dir)
{
    /* SIGXFSZ left to its default would kill the program: the put is
     * refused before it writes, and the process lives. */
    struct rlimit rl = {64 << 10, 64 << 10};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    char why[256];
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, 16 << 20, 0, why, sizeof why) == 0);
    if (!c)
        return;
    unsigned char *big = payload_of(7, 256 << 10);
    drk_cache_key k = key_of(7);
    CHECK(drk_cache_put(c, &k, "cubin", big, 256 << 10, NULL) == -1);
    CHECK(log_lines("RLIMIT_FSIZE") == 1);
    free(big);
    drk_cache_close(c);
}

static void test_failures(void)
{
    char dir[400], file[300], why[256];
    drk_cache *c;
    subdir(dir, sizeof dir, "fail");
    CHECK(drk_cache_open(&c, dir, 0, 0, why, sizeof why) == -1 && !c && strstr(why, "DRK_CACHE_SIZE"));
    CHECK(drk_cache_open(&c, "", 1 << 20, 0, why, sizeof why) == -1 && !c);
    /* A directory whose parent is a regular file: cannot be made, even by root. */
    subdir(file, sizeof file, "a-file");
    spit(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/cache", file);
    CHECK(drk_cache_open(&c, dir, 1 << 20, 0, why, sizeof why) == -1 && !c && strstr(why, "Not a directory"));
    printf("failures: under a file: %s\n", why);
    CHECK(drk_cache_open(&c, "/proc/self/drk-cache", 1 << 20, 0, why, sizeof why) == -1 && !c);
    printf("failures: in /proc: %s\n", why);
    CHECK(drk_cache_open(&c, file, 1 << 20, 0, why, sizeof why) == -1 && !c);
    /* The tools' walks say so too, without crashing. */
    drk_cache_listing l;
    CHECK(drk_cache_list(dir, &l, why, sizeof why) != 0 || !l.exists);

    /* Read-only: the directory exists with an entry; this process cannot write. */
    subdir(dir, sizeof dir, "readonly");
    CHECK(drk_cache_open(&c, dir, 1 << 20, 0, why, sizeof why) == 0);
    drk_cache_key k5 = key_of(5);
    CHECK(c && drk_cache_put(c, &k5, "cubin", "0123456789", 10, NULL) == 0);
    drk_cache_close(c);
    char v1[420], fan[430];
    snprintf(v1, sizeof v1, "%s/v1", dir);
    char name[DRK_CACHE_NAME_MAX];
    drk_cache_entry_name(&k5, "cubin", name);
    snprintf(fan, sizeof fan, "%s/%.2s", v1, name);
    chmod(root, 0755); /* mkdtemp's 0700 would keep nobody out */
    if (geteuid() != 0) {
        chmod(v1, 0555);
        chmod(fan, 0555);
    }
    int rc = in_child(readonly_child, dir);
    CHECK(rc == 0 || rc == 77);
    chmod(v1, 0755);
    chmod(fan, 0755);
    chmod(root, 0700);

    /* A full disk and the file-size limit. */
    CHECK(in_child(fsize_ignored_child, dir) == 0);
    CHECK(in_child(fsize_default_child, dir) == 0);
}

static void test_shared_counters(void)
{
    char dir[300], why[256];
    subdir(dir, sizeof dir, "counters");
    for (int round = 0; round < 2; round++) {
        drk_cache *c;
        CHECK(drk_cache_open(&c, dir, 1 << 20, 0, why, sizeof why) == 0);
        drk_cache_key k = key_of(round);
        drk_cache_blob b;
        CHECK(drk_cache_get(c, &k, "cubin", &b) == -1);
        CHECK(drk_cache_put(c, &k, "cubin", "abc", 3, NULL) == 0);
        CHECK(drk_cache_get(c, &k, "cubin", &b) == 0);
        drk_cache_blob_free(&b);
        drk_cache_close(c);
    }
    drk_cache_counters n;
    drk_cache_shared_counters(dir, &n);
    CHECK(n.hits == 2 && n.misses == 2 && n.puts == 2 && n.invalid == 0);
}

static void test_prune_clear(void)
{
    char dir[300], why[256], p[600];
    subdir(dir, sizeof dir, "prune");
    drk_cache *c;
    CHECK(drk_cache_open(&c, dir, 1 << 20, 0, why, sizeof why) == 0);
    if (!c)
        return;
    const size_t entry = DRK_CACHE_HEADER + 16 + 1000;
    unsigned char *data = payload_of(0, 1000);
    time_t base = time(NULL) - 1000;
    for (int i = 0; i < 6; i++) {
        drk_cache_key k = key_of(i);
        CHECK(drk_cache_put(c, &k, i % 2 ? "result" : "cubin", data, 1000, NULL) == 0);
        char path[600];
        path_of(dir, &k, i % 2 ? "result" : "cubin", path, sizeof path);
        struct timespec t[2] = {{base + i, 0}, {base + i, 0}};
        utimensat(AT_FDCWD, path, t, 0);
    }
    drk_cache_close(c); /* writes v1/stats */
    /* Files that are not drk's, and temporary files: a stale one (a writer
     * that died two hours ago) and a fresh one (a write under way). */
    drk_cache_key k0 = key_of(0);
    char name[DRK_CACHE_NAME_MAX], fan[3];
    drk_cache_entry_name(&k0, "cubin", name);
    memcpy(fan, name, 2), fan[2] = '\0';
    char foreign[5][700];
    snprintf(foreign[0], sizeof foreign[0], "%s/v1/README", dir);
    snprintf(foreign[1], sizeof foreign[1], "%s/v1/%s/notes.txt", dir, fan);
    snprintf(foreign[2], sizeof foreign[2], "%s/v1/%s/%.64s.CUBIN", dir, fan, name + 3); /* not a kind */
    snprintf(foreign[3], sizeof foreign[3], "%s/mine.txt", dir);                          /* beside v1 */
    snprintf(foreign[4], sizeof foreign[4], "%s/v1/zz", dir);
    for (int i = 0; i < 5; i++)
        spit(foreign[i], "not drk's", 9);
    snprintf(p, sizeof p, "%s/v1/%s.tmp.123.0", dir, name);
    spit(p, "stale", 5);
    struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    utimensat(AT_FDCWD, p, old, 0);
    char fresh[600];
    snprintf(fresh, sizeof fresh, "%s/v1/%s.tmp.124.0", dir, name);
    spit(fresh, "fresh", 5);

    drk_cache_listing l;
    CHECK(drk_cache_list(dir, &l, why, sizeof why) == 0);
    CHECK(l.n == 6 && l.bytes == 6 * entry && l.temps == 2 && l.foreign == 4 && l.exists);
    CHECK(l.n == 6 && l.files[0].used_ns < l.files[5].used_ns); /* least recent first */
    drk_cache_listing_free(&l);

    drk_cache_removed r;
    CHECK(drk_cache_prune(dir, 4 * entry, &r, why, sizeof why) == 0);
    CHECK(r.files == 3 && r.bytes == 2 * entry + 5); /* the two oldest and the stale file */
    CHECK(!exists(p) && exists(fresh));
    CHECK(dir_bytes(dir, NULL) == 4 * entry);
    for (int i = 0; i < 6; i++) {
        drk_cache_key k = key_of(i);
        char path[600];
        path_of(dir, &k, i % 2 ? "result" : "cubin", path, sizeof path);
        CHECK(exists(path) == (i >= 2));
    }

    CHECK(drk_cache_clear(dir, &r, why, sizeof why) == 0);
    CHECK(r.files == 5 && r.left == 4); /* four entries, the fresh temp; stats go uncounted */
    CHECK(dir_bytes(dir, NULL) == 0 && !exists(fresh));
    for (int i = 0; i < 5; i++)
        CHECK(exists(foreign[i]));
    snprintf(p, sizeof p, "%s/v1/stats", dir);
    CHECK(!exists(p));
    snprintf(p, sizeof p, "%s/v1/lock", dir);
    CHECK(!exists(p));
    free(data);
    /* Nothing there: all empty, nothing fails. */
    subdir(dir, sizeof dir, "never-made");
    CHECK(drk_cache_list(dir, &l, why, sizeof why) == 0 && l.n == 0 && !l.exists);
    CHECK(drk_cache_prune(dir, 0, &r, why, sizeof why) == 0 && r.files == 0);
    CHECK(drk_cache_clear(dir, &r, why, sizeof why) == 0 && r.files == 0);
    CHECK(!exists(dir));
}

static int cmp_ns(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_timing(void)
{
    char dir[300], why[256];
    subdir(dir, sizeof dir, "timing");
    enum { GETS = 201, PUTS = 21 };
    const size_t len = 256 << 10;
    unsigned char *data = payload_of(3, len);
    int64_t get_ns[GETS], put_ns[2][PUTS];
    for (int sync = 0; sync < 2; sync++) {
        drk_cache *c;
        CHECK(drk_cache_open(&c, dir, 1ull << 30, sync ? DRK_CACHE_SYNC : 0, why, sizeof why) == 0);
        if (!c)
            return;
        for (int i = 0; i < PUTS; i++) {
            drk_cache_key k = key_of(1000 + i);
            struct timespec t0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            CHECK(drk_cache_put(c, &k, "cubin", data, len, "timing") == 0);
            put_ns[sync][i] = elapsed(&t0);
        }
        qsort(put_ns[sync], PUTS, sizeof **put_ns, cmp_ns);
        if (sync) {
            drk_cache_close(c);
            break;
        }
        drk_cache_key k = key_of(1000);
        for (int i = 0; i < GETS; i++) {
            drk_cache_blob b;
            struct timespec t0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int hit = drk_cache_get(c, &k, "cubin", &b);
            get_ns[i] = elapsed(&t0);
            CHECK(hit == 0 && b.len == len);
            drk_cache_blob_free(&b);
        }
        drk_cache_close(c);
    }
    qsort(get_ns, GETS, sizeof *get_ns, cmp_ns);
    /* Of which the checksum: SHA-256 of the same bytes. */
    int64_t sum_ns[51];
    for (int i = 0; i < 51; i++) {
        unsigned char d[32];
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        drk_sha256(data, len, d);
        sum_ns[i] = elapsed(&t0);
    }
    qsort(sum_ns, 51, sizeof *sum_ns, cmp_ns);
    printf("timing: hit of a 256 KiB entry: median %.3f ms, p90 %.3f ms, min %.3f ms; its checksum alone "
           "(sha256, %s) %.3f ms\n",
           (double)get_ns[GETS / 2] / 1e6, (double)get_ns[GETS * 9 / 10] / 1e6, (double)get_ns[0] / 1e6,
           drk_sha256_impl(), (double)sum_ns[25] / 1e6);
    printf("timing: put of a 256 KiB entry: median %.3f ms; with DRK_CACHE_SYNC (fdatasync) %.3f ms\n",
           (double)put_ns[0][PUTS / 2] / 1e6, (double)put_ns[1][PUTS / 2] / 1e6);
    CHECK(get_ns[GETS / 2] < 100000000); /* a sanity bound, not the target */
    free(data);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/drk-test-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s/log", root);
    logfd = open(logpath, O_RDWR | O_CREAT | O_APPEND, 0644);
    drk_log_set_fd(logfd);
    test_keys();
    test_roundtrip();
    test_corrupt();
    test_lru();
    test_lock_wait();
    test_failures();
    test_shared_counters();
    test_prune_clear();
    test_timing();
    close(logfd);
    rm_rf(root);
    return CHECK_DONE();
}
