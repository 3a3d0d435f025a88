/* The cache's store: open, get, put (base/cache.h). Readers take no lock
 * and trust nothing they read; writers publish by rename; the size is
 * learnt by walking the directory, now and then, not kept in an index that
 * concurrent processes would have to agree on. */
#define _GNU_SOURCE
#include "base/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cache_dir.h"
#include "base/cache_entry.h"
#include "base/fnv.h"
#include "base/log.h"

/* Entries this handle has marked used: a lossy set (a collision only costs
 * one more futimens), so a hot entry is touched once, not on every hit. */
#define TOUCHED 256

struct drk_cache {
    char root[PATH_MAX];
    char vdir[PATH_MAX]; /* root/v1 */
    uint64_t cap;
    unsigned flags;
    pthread_mutex_t mu; /* the size estimate below, and one eviction pass at a time */
    int walked;         /* the directory has been walked once */
    uint64_t bytes;     /* entries' total at the last walk, plus this handle's puts since */
    uint64_t since_walk; /* bytes this handle put since that walk */
    atomic_uint_fast64_t touched[TOUCHED];
    atomic_uint seq; /* temporary files' names */
    atomic_uint_fast64_t hits, misses, invalid, puts, put_failures, evicted, evicted_bytes;
};

/* Each trouble is logged once per process; repeats go to the debug level.
 * (Into a variable first: drk_log evaluates its level twice.) */
static atomic_int logged_invalid, logged_write, logged_fsize;

static int log_level_once(atomic_int *flag) { return atomic_exchange(flag, 1) ? DRK_LOG_DEBUG : DRK_LOG_WARN; }

/* mkdir -p: each missing component, as mkdir(2) would make it. */
static int make_dirs(const char *path)
{
    char p[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof p)
        return errno = ENAMETOOLONG, -1;
    memcpy(p, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            struct stat st;
            /* A component that exists read-only says EACCES or EROFS, not EEXIST. */
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
                return errno = e, -1;
        }
        p[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

int drk_cache_open(drk_cache **out, const char *dir, uint64_t cap, unsigned flags, char *why, size_t whylen)
{
    *out = NULL;
    if (cap == 0)
        return snprintf(why, whylen, "DRK_CACHE_SIZE is 0"), -1;
    if (!dir || !*dir)
        return snprintf(why, whylen, "no directory (set DRK_CACHE_DIR, XDG_CACHE_HOME or HOME)"), -1;
    /* Room for "/v1/ab/<64 hex>.<kind>.tmp.<pid>.<n>" after it. */
    if (strlen(dir) + 3 + DRK_CACHE_NAME_MAX + 48 >= PATH_MAX)
        return snprintf(why, whylen, "%s: path too long", dir), -1;
    drk_cache *c = calloc(1, sizeof *c);
    if (!c)
        return snprintf(why, whylen, "out of memory"), -1;
    memcpy(c->root, dir, strlen(dir) + 1);
    (void)drk_cache_join(c->vdir, sizeof c->vdir, dir, DRK_CACHE_VDIR);
    if (make_dirs(c->vdir) != 0) {
        snprintf(why, whylen, "cannot make %s: %s", c->vdir, strerror(errno));
        free(c);
        return -1;
    }
    /* Absolute, so a program that changes directory later keeps its cache. */
    char *abs = realpath(dir, NULL);
    if (abs && strlen(abs) + 3 + DRK_CACHE_NAME_MAX + 48 < PATH_MAX) {
        memcpy(c->root, abs, strlen(abs) + 1);
        (void)drk_cache_join(c->vdir, sizeof c->vdir, abs, DRK_CACHE_VDIR);
    }
    free(abs);
    c->cap = cap;
    c->flags = flags;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

const char *drk_cache_root(const drk_cache *c) { return c->root; }

void drk_cache_counters_get(drk_cache *c, drk_cache_counters *o)
{
    o->hits = atomic_load(&c->hits);
    o->misses = atomic_load(&c->misses);
    o->invalid = atomic_load(&c->invalid);
    o->puts = atomic_load(&c->puts);
    o->put_failures = atomic_load(&c->put_failures);
    o->evicted = atomic_load(&c->evicted);
    o->evicted_bytes = atomic_load(&c->evicted_bytes);
}

void drk_cache_close(drk_cache *c)
{
    if (!c)
        return;
    drk_cache_counters n;
    drk_cache_counters_get(c, &n);
    if (n.hits || n.misses || n.invalid || n.puts || n.put_failures || n.evicted)
        drk_cache_shared_add(c->vdir, &n);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int entry_path(const drk_cache *c, const drk_cache_key *key, const char *kind, char *path, size_t n)
{
    char name[DRK_CACHE_NAME_MAX];
    drk_cache_entry_name(key, kind, name);
    return drk_cache_join(path, n, c->vdir, name);
}

/* An entry that failed its checks: logged, and removed unless someone has
 * renamed a new file into its place since we opened it. */
static void reject(drk_cache *c, const char *path, int fd, const char *why)
{
    atomic_fetch_add(&c->invalid, 1);
    struct stat mine, now;
    int removed = fstat(fd, &mine) == 0 && S_ISREG(mine.st_mode) && stat(path, &now) == 0 &&
                  now.st_dev == mine.st_dev && now.st_ino == mine.st_ino && unlink(path) == 0;
    int level = log_level_once(&logged_invalid);
    drk_log(level, "cache: ignored %s: %s%s (further ones are logged at debug level)", path, why,
            removed ? "; removed it" : "");
}

static uint64_t touch_tag(const drk_cache_key *key, const char *kind)
{
    uint64_t t;
    memcpy(&t, key->digest, sizeof t);
    return drk_fnv(t, kind, strlen(kind)) | 1; /* 0 is an empty slot */
}

int drk_cache_get(drk_cache *c, const drk_cache_key *key, const char *kind, drk_cache_blob *out)
{
    memset(out, 0, sizeof *out);
    if (!c || !drk_cache_kind_valid(kind))
        return -1;
    char path[PATH_MAX];
    int fd = entry_path(c, key, kind, path, sizeof path) == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) {
        atomic_fetch_add(&c->misses, 1);
        if (errno != ENOENT)
            drk_log(DRK_LOG_DEBUG, "cache: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    unsigned char *buf = NULL;
    char why[160];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        atomic_fetch_add(&c->misses, 1);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    if (st.st_size < DRK_CACHE_HEADER)
        snprintf(why, sizeof why, "truncated (%zu bytes, shorter than a header)", size);
    else if ((uint64_t)st.st_size > DRK_CACHE_HEADER + DRK_CACHE_META_MAX + DRK_CACHE_ENTRY_MAX)
        snprintf(why, sizeof why, "too large to be an entry");
    else if (!(buf = malloc(size))) {
        atomic_fetch_add(&c->misses, 1);
        close(fd);
        return -1;
    }
    while (buf && got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    drk_cache_header h;
    if (!buf || got < size || drk_cache_entry_check(buf, size, key, kind, &h, why, sizeof why) != 0) {
        if (buf && got < size)
            snprintf(why, sizeof why, "cannot read it all (%zu of %zu bytes)", got, size);
        reject(c, path, fd, why);
        free(buf);
        close(fd);
        return -1;
    }
    /* Mark it used for the LRU: its mtime, once per handle. A cache we may
     * not write keeps its times; nothing else depends on it. */
    uint64_t tag = touch_tag(key, kind);
    atomic_uint_fast64_t *slot = &c->touched[(tag >> 1) % TOUCHED];
    if (atomic_load_explicit(slot, memory_order_relaxed) != tag) {
        (void)futimens(fd, NULL);
        atomic_store_explicit(slot, tag, memory_order_relaxed);
    }
    close(fd);
    out->mem = buf;
    out->meta = (const char *)buf + DRK_CACHE_HEADER;
    out->data = buf + DRK_CACHE_HEADER + h.meta_bytes;
    out->len = (size_t)h.payload;
    out->created_ns = h.created_ns;
    atomic_fetch_add(&c->hits, 1);
    return 0;
}

void drk_cache_blob_free(drk_cache_blob *b)
{
    if (!b)
        return;
    free(b->mem);
    memset(b, 0, sizeof *b);
}

static int write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0)
            return errno = EIO, -1;
        p += w, len -= (size_t)w;
    }
    return 0;
}

/* A file past RLIMIT_FSIZE raises SIGXFSZ, whose default kills the
 * program, and a handler of the program's would see a signal it did not
 * cause: such a put is refused before writing. Where the program ignores
 * the signal, the write fails with EFBIG, handled as a full disk. */
static int over_file_limit(uint64_t size)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || size <= rl.rlim_cur)
        return 0;
    struct sigaction sa;
    if (sigaction(SIGXFSZ, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN)
        return 0;
    return 1;
}

static int put_failed(drk_cache *c, const char *what, const char *path, int err)
{
    atomic_fetch_add(&c->put_failures, 1);
    int level = log_level_once(&logged_write);
    drk_log(level, "cache: cannot %s %s: %s; going on without storing (further failures are logged at debug level)",
            what, path, strerror(err));
    return -1;
}

/* After a put of `size` bytes: walk the directory (and evict) the first
 * time, when the estimate passes the cap, or when this handle alone has
 * written a sixteenth of the cap since the last walk, so the other
 * processes' writes are learnt in time. Another process's pass may have
 * walked before this handle's writes landed, so past that sixteenth the
 * put waits for the lock (a while, not for ever) rather than skip its
 * pass: skipping, six processes on two busy cores left three times the
 * cap behind them. */
static void account(drk_cache *c, uint64_t size, const char *name)
{
    pthread_mutex_lock(&c->mu);
    c->bytes += size;
    c->since_walk += size;
    int owed = c->since_walk > c->cap / 16;
    if (!c->walked || c->bytes > c->cap || owed) {
        uint64_t total = c->bytes;
        drk_cache_removed r = {0};
        /* Down to 90% at once: the walk is paid for a batch of evictions. */
        int wait_ms = owed ? DRK_CACHE_LOCK_WAIT_MS : 0;
        int rc = drk_cache_evict_pass(c->vdir, c->cap, c->cap - c->cap / 10, name, wait_ms, &total, &r);
        if (rc == 0) {
            c->walked = 1;
            c->bytes = total;
            c->since_walk = 0;
        }
        atomic_fetch_add(&c->evicted, r.files);
        atomic_fetch_add(&c->evicted_bytes, r.bytes);
    }
    pthread_mutex_unlock(&c->mu);
}

int drk_cache_put(drk_cache *c, const drk_cache_key *key, const char *kind, const void *data, size_t len,
                  const char *meta)
{
    if (!c || !drk_cache_kind_valid(kind) || (len && !data))
        return -1;
    size_t meta_area = drk_cache_meta_area(meta);
    uint64_t size = DRK_CACHE_HEADER + meta_area + (uint64_t)len;
    char name[DRK_CACHE_NAME_MAX], path[PATH_MAX], tmp[PATH_MAX];
    drk_cache_entry_name(key, kind, name);
    (void)drk_cache_join(path, sizeof path, c->vdir, name); /* fits: drk_cache_open made sure */
    if (len > DRK_CACHE_ENTRY_MAX || size > c->cap) {
        atomic_fetch_add(&c->put_failures, 1);
        drk_log(DRK_LOG_DEBUG, "cache: %s (%llu bytes) is larger than the cap; not stored", name,
                (unsigned long long)size);
        return -1;
    }
    if (over_file_limit(size)) {
        atomic_fetch_add(&c->put_failures, 1);
        int level = log_level_once(&logged_fsize);
        drk_log(level, "cache: %s (%llu bytes) is over the file size limit (RLIMIT_FSIZE); not stored", name,
                (unsigned long long)size);
        return -1;
    }
    unsigned char head[DRK_CACHE_HEADER + DRK_CACHE_META_MAX];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    drk_cache_entry_head(head, key, kind, meta, meta_area, data, len,
                         (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);

    char tmpname[DRK_CACHE_NAME_MAX + 48];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld.%u", name, (long)getpid(), atomic_fetch_add(&c->seq, 1));
    (void)drk_cache_join(tmp, sizeof tmp, c->vdir, tmpname);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
        /* The fan-out directory (or v1, after a clear) is not there yet. */
        char fan[PATH_MAX], two[3] = {name[0], name[1], '\0'};
        if (drk_cache_join(fan, sizeof fan, c->vdir, two) == 0 && make_dirs(fan) == 0)
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return put_failed(c, "create", tmp, errno);
    int err = 0, renaming = 0;
    const char *what = "write";
    if (write_all(fd, head, DRK_CACHE_HEADER + meta_area) != 0 || write_all(fd, data, len) != 0)
        err = errno;
    else if ((c->flags & DRK_CACHE_SYNC) && fdatasync(fd) != 0)
        err = errno, what = "sync";
    if (close(fd) != 0 && !err) /* NFS reports a full disk here */
        err = errno, what = "write";
    if (!err && rename(tmp, path) != 0)
        err = errno, what = "rename into", renaming = 1;
    if (err) {
        unlink(tmp);
        return put_failed(c, what, renaming ? path : tmp, err);
    }
    atomic_fetch_add(&c->puts, 1);
    account(c, size, name);
    return 0;
}
