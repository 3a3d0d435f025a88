/* Walking the cache's directory: the list, eviction, prune and clear, and
 * the counters processes share (base/cache.h, base/cache_dir.h). Only
 * names drk makes are ever removed; the lock (v1/lock, flock) only keeps
 * two evictions from racing each other; reads and writes never take it. */
#define _GNU_SOURCE
#include "base/cache_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cache_entry.h"

#define FAIL(...) return snprintf(why, whylen, __VA_ARGS__), -1

/* A writer that has not renamed its file in this long has died. */
#define STALE_TEMP_NS (3600ll * 1000000000)

static int64_t mtime_ns(const struct stat *st) { return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec; }

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

typedef struct walk {
    drk_cache_listing l;
    size_t cap;
    drk_cache_file *temps; /* name, bytes, used_ns (mtime) */
    size_t ntemps, tcap;
} walk;

static int push(drk_cache_file **a, size_t *n, size_t *cap, const drk_cache_file *f)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        drk_cache_file *b = realloc(*a, c * sizeof *b);
        if (!b)
            return -1;
        *a = b, *cap = c;
    }
    (*a)[(*n)++] = *f;
    return 0;
}

/* drk's own files at the top of v1: the lock, the shared counters and a
 * temporary file of theirs. */
static int own_top_name(const char *name)
{
    if (strcmp(name, "lock") == 0 || strcmp(name, "stats") == 0)
        return 1;
    if (strncmp(name, "stats.tmp.", 10) != 0)
        return 0;
    const char *p = name + 10;
    size_t a = strspn(p, "0123456789");
    if (!a || p[a] != '.')
        return 0;
    p += a + 1;
    size_t b = strspn(p, "0123456789");
    return b && !p[b];
}

static int walk_fan(int vfd, const char *fan, walk *w)
{
    int fd = openat(vfd, fan, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return errno == ENOENT ? 0 : -1;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        drk_cache_file f = {0};
        int cls = drk_cache_name_class(fan, e->d_name, &f.key, f.kind);
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT) /* gone since readdir: evicted by another process */
                w->l.foreign++;
            continue;
        }
        if (cls == DRK_CACHE_NAME_FOREIGN || !S_ISREG(st.st_mode)) {
            w->l.foreign++;
            continue;
        }
        if (drk_cache_join(f.name, sizeof f.name, fan, e->d_name) != 0) {
            w->l.foreign++;
            continue;
        }
        f.bytes = (uint64_t)st.st_size;
        f.used_ns = mtime_ns(&st);
        if (cls == DRK_CACHE_NAME_ENTRY) {
            if (push(&w->l.files, &w->l.n, &w->cap, &f) != 0)
                rc = -1;
            w->l.bytes += f.bytes;
        } else {
            if (push(&w->temps, &w->ntemps, &w->tcap, &f) != 0)
                rc = -1;
            w->l.temps++;
            w->l.temp_bytes += f.bytes;
        }
    }
    closedir(d);
    return rc;
}

static int by_use(const void *a, const void *b)
{
    const drk_cache_file *x = a, *y = b;
    if (x->used_ns != y->used_ns)
        return x->used_ns < y->used_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void walk_free(walk *w)
{
    free(w->l.files);
    free(w->temps);
    memset(w, 0, sizeof *w);
}

/* Everything under `vdir`, entries least recently used first. */
static int walk_dir(const char *vdir, walk *w, char *why, size_t whylen)
{
    memset(w, 0, sizeof *w);
    int vfd = open(vdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = vfd >= 0 ? fdopendir(vfd) : NULL;
    if (!d) {
        int e = errno;
        if (vfd >= 0)
            close(vfd);
        if (e == ENOENT)
            return 0;
        FAIL("cannot read %s: %s", vdir, strerror(e));
    }
    w->l.exists = 1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || own_top_name(e->d_name))
            continue;
        struct stat st;
        if (!drk_cache_fan_name(e->d_name) || fstatat(vfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode)) {
            w->l.foreign++;
            continue;
        }
        if (walk_fan(vfd, e->d_name, w) != 0 && rc == 0) {
            rc = -1;
            snprintf(why, whylen, "cannot read %s/%s: %s", vdir, e->d_name, strerror(errno));
        }
    }
    closedir(d);
    if (rc != 0) {
        walk_free(w);
        return -1;
    }
    if (w->l.n)
        qsort(w->l.files, w->l.n, sizeof *w->l.files, by_use);
    return 0;
}

static int vdir_of(const char *dir, char *out, size_t n) { return drk_cache_join(out, n, dir, DRK_CACHE_VDIR); }

int drk_cache_list(const char *dir, drk_cache_listing *out, char *why, size_t whylen)
{
    char vdir[PATH_MAX];
    walk w;
    memset(out, 0, sizeof *out);
    if (vdir_of(dir, vdir, sizeof vdir) != 0)
        FAIL("%s: path too long", dir);
    if (walk_dir(vdir, &w, why, whylen) != 0)
        return -1;
    free(w.temps);
    *out = w.l;
    return 0;
}

void drk_cache_listing_free(drk_cache_listing *l)
{
    free(l->files);
    memset(l, 0, sizeof *l);
}

int drk_cache_read_info(const char *dir, const char *name, int verify, drk_cache_info *out, char *why,
                        size_t whylen)
{
    char vdir[PATH_MAX], path[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (vdir_of(dir, vdir, sizeof vdir) != 0 || drk_cache_join(path, sizeof path, vdir, name) != 0)
        FAIL("%s: path too long", dir);
    const char *slash = strchr(name, '/');
    drk_cache_key key;
    char kind[DRK_CACHE_KIND_MAX + 1];
    if (!slash || slash - name != 2 || drk_cache_name_class(name, slash + 1, &key, kind) != DRK_CACHE_NAME_ENTRY)
        FAIL("%s: not an entry's name", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        FAIL("cannot read: %s", strerror(e));
    }
    size_t want = verify ? (size_t)st.st_size : DRK_CACHE_HEADER + DRK_CACHE_META_MAX;
    if (verify && (uint64_t)st.st_size > DRK_CACHE_HEADER + DRK_CACHE_META_MAX + DRK_CACHE_ENTRY_MAX) {
        close(fd);
        FAIL("too large to be an entry");
    }
    unsigned char *buf = malloc(want ? want : 1);
    size_t got = 0;
    while (buf && got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf)
        FAIL("out of memory");
    drk_cache_header h;
    int rc = verify ? drk_cache_entry_check(buf, got, &key, kind, &h, why, whylen)
                    : drk_cache_entry_header(buf, got, &h, why, whylen);
    if (rc == 0 && !verify && got < DRK_CACHE_HEADER + h.meta_bytes)
        rc = -1, snprintf(why, whylen, "truncated (%zu bytes, shorter than its meta text)", got);
    if (rc == 0) {
        memcpy(out->kind, h.kind, sizeof out->kind);
        out->key = h.key;
        out->payload = h.payload;
        out->created_ns = h.created_ns;
        snprintf(out->meta, sizeof out->meta, "%.*s", (int)h.meta_bytes, (const char *)buf + DRK_CACHE_HEADER);
    }
    free(buf);
    return rc;
}

/* v1/lock, held (flock) while a walk decides what to remove. -2: another
 * process holds it (and nowait). -1: no lock to be had (a read-only
 * directory, a file system without flock): go on without it. */
/* v1/lock, flock'd: wait_ms 0 tries once (-2 when another process holds
 * it), -1 waits as long as it takes, more tries every millisecond for that
 * long, so a holder that hangs (stopped, on a stuck network file system)
 * cannot hang the caller. */
static int lock_take(const char *vdir, int wait_ms)
{
    char path[PATH_MAX];
    if (drk_cache_join(path, sizeof path, vdir, "lock") != 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (flock(fd, LOCK_EX | (wait_ms >= 0 ? LOCK_NB : 0)) != 0) {
        if (errno == EINTR)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (errno == EWOULDBLOCK && (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < wait_ms) {
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
            continue;
        }
        int busy = errno == EWOULDBLOCK;
        close(fd);
        return busy ? -2 : -1;
    }
    return fd;
}

static void lock_drop(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock */
}

/* Removes the least recently used of `w`'s entries until they total
 * `target`. An entry used or rewritten since the walk saw it (its mtime
 * moved) stays: another process wants it. */
static int evict(const char *vdir, walk *w, uint64_t target, const char *keep, drk_cache_removed *r)
{
    int failed = 0;
    for (size_t i = 0; i < w->l.n && w->l.bytes > target; i++) {
        drk_cache_file *f = &w->l.files[i];
        if (keep && strcmp(f->name, keep) == 0)
            continue;
        char path[PATH_MAX];
        if (drk_cache_join(path, sizeof path, vdir, f->name) != 0)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0) {
            if (errno == ENOENT) /* another process removed it */
                w->l.bytes -= f->bytes;
            continue;
        }
        if (mtime_ns(&st) != f->used_ns)
            continue;
        if (unlink(path) == 0) {
            r->files++;
            r->bytes += f->bytes;
        } else if (errno != ENOENT) {
            failed = errno;
            continue;
        }
        w->l.bytes -= f->bytes;
    }
    return failed ? (errno = failed, -1) : 0;
}

int drk_cache_evict_pass(const char *vdir, uint64_t cap, uint64_t target, const char *keep, int wait_ms,
                         uint64_t *total, drk_cache_removed *removed)
{
    int lock = lock_take(vdir, wait_ms);
    if (lock == -2)
        return 1;
    walk w;
    char why[16];
    if (walk_dir(vdir, &w, why, sizeof why) != 0) {
        lock_drop(lock);
        return -1;
    }
    if (w.l.bytes > cap)
        (void)evict(vdir, &w, target, keep, removed);
    *total = w.l.bytes;
    walk_free(&w);
    lock_drop(lock);
    return 0;
}

int drk_cache_prune(const char *dir, uint64_t target, drk_cache_removed *out, char *why, size_t whylen)
{
    char vdir[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (vdir_of(dir, vdir, sizeof vdir) != 0)
        FAIL("%s: path too long", dir);
    int lock = lock_take(vdir, -1);
    walk w;
    if (walk_dir(vdir, &w, why, whylen) != 0) {
        lock_drop(lock);
        return -1;
    }
    int64_t now = now_ns();
    int failed = 0;
    for (size_t i = 0; i < w.ntemps; i++) {
        if (now - w.temps[i].used_ns < STALE_TEMP_NS)
            continue;
        char path[PATH_MAX];
        if (drk_cache_join(path, sizeof path, vdir, w.temps[i].name) != 0)
            continue;
        if (unlink(path) == 0)
            out->files++, out->bytes += w.temps[i].bytes;
        else if (errno != ENOENT)
            failed = errno;
    }
    if (evict(vdir, &w, target, NULL, out) != 0)
        failed = errno;
    walk_free(&w);
    lock_drop(lock);
    if (failed)
        FAIL("cannot remove entries of %s: %s", vdir, strerror(failed));
    return 0;
}

int drk_cache_clear(const char *dir, drk_cache_removed *out, char *why, size_t whylen)
{
    char vdir[PATH_MAX], path[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (vdir_of(dir, vdir, sizeof vdir) != 0)
        FAIL("%s: path too long", dir);
    int lock = lock_take(vdir, -1);
    walk w;
    if (walk_dir(vdir, &w, why, whylen) != 0) {
        lock_drop(lock);
        return -1;
    }
    int failed = 0;
    for (int pass = 0; pass < 2; pass++) {
        drk_cache_file *a = pass ? w.temps : w.l.files;
        size_t n = pass ? w.ntemps : w.l.n;
        for (size_t i = 0; i < n; i++) {
            if (drk_cache_join(path, sizeof path, vdir, a[i].name) != 0)
                continue;
            if (unlink(path) == 0)
                out->files++, out->bytes += a[i].bytes;
            else if (errno != ENOENT)
                failed = errno;
        }
    }
    out->left = w.l.foreign;
    walk_free(&w);
    /* The fan-out directories and v1 itself, where now empty: rmdir fails
     * on one that holds someone else's file, which is what we want. */
    DIR *d = opendir(vdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (drk_cache_join(path, sizeof path, vdir, e->d_name) != 0)
            continue;
        if (drk_cache_fan_name(e->d_name)) {
            (void)rmdir(path);
        } else if (own_top_name(e->d_name) && strcmp(e->d_name, "lock") != 0) {
            if (unlink(path) != 0 && errno != ENOENT)
                failed = errno;
        }
    }
    if (d)
        closedir(d);
    if (drk_cache_join(path, sizeof path, vdir, "lock") == 0)
        (void)unlink(path);
    lock_drop(lock);
    (void)rmdir(vdir);
    if (failed)
        FAIL("cannot remove entries of %s: %s", vdir, strerror(failed));
    return 0;
}

/* ------------------------------------------------- the shared counters */

static const char *const counter_names[] = {"hits", "misses", "invalid", "puts", "put_failures", "evicted",
                                            "evicted_bytes"};

static uint64_t *counter_at(drk_cache_counters *c, size_t i)
{
    uint64_t *all[] = {&c->hits, &c->misses, &c->invalid, &c->puts, &c->put_failures, &c->evicted,
                       &c->evicted_bytes};
    return all[i];
}

#define NCOUNTERS (sizeof counter_names / sizeof *counter_names)

static void read_counters(const char *path, drk_cache_counters *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[128];
    if (!fgets(line, sizeof line, f) || strcmp(line, "drk cache counters 1\n") != 0) {
        fclose(f); /* not ours, or an older layout: start again from zero */
        return;
    }
    while (fgets(line, sizeof line, f)) {
        char name[32];
        unsigned long long v;
        if (sscanf(line, "%31s %llu", name, &v) != 2)
            continue;
        for (size_t i = 0; i < NCOUNTERS; i++)
            if (strcmp(name, counter_names[i]) == 0)
                *counter_at(out, i) = v;
    }
    fclose(f);
}

void drk_cache_shared_counters(const char *dir, drk_cache_counters *out)
{
    char vdir[PATH_MAX], path[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (vdir_of(dir, vdir, sizeof vdir) == 0 && drk_cache_join(path, sizeof path, vdir, "stats") == 0)
        read_counters(path, out);
}

void drk_cache_shared_add(const char *vdir, const drk_cache_counters *add)
{
    static atomic_uint seq;
    char path[PATH_MAX], tmp[PATH_MAX], name[64];
    snprintf(name, sizeof name, "stats.tmp.%ld.%u", (long)getpid(), atomic_fetch_add(&seq, 1));
    if (drk_cache_join(path, sizeof path, vdir, "stats") != 0 || drk_cache_join(tmp, sizeof tmp, vdir, name) != 0)
        return;
    /* Without the lock two closes could each add to the old sum and lose
     * one; with none to be had, a lost addition is all it costs. A holder
     * that never lets go costs this close (the program's exit) two seconds,
     * and the addition. */
    int lock = lock_take(vdir, DRK_CACHE_LOCK_WAIT_MS);
    if (lock == -2)
        return;
    drk_cache_counters sum;
    read_counters(path, &sum);
    drk_cache_counters a = *add;
    for (size_t i = 0; i < NCOUNTERS; i++)
        *counter_at(&sum, i) += *counter_at(&a, i);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        lock_drop(lock);
        return;
    }
    fputs("drk cache counters 1\n", f);
    for (size_t i = 0; i < NCOUNTERS; i++)
        fprintf(f, "%s %" PRIu64 "\n", counter_names[i], *counter_at(&sum, i));
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        unlink(tmp);
    lock_drop(lock);
}
