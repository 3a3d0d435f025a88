/* `drk cache list|stats|clear|prune`: the evolution engine's cache on disk
 * (base/cache.h, docs/cache.md), seen and trimmed from outside a run. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cache.h"
#include "base/json.h"
#include "base/options.h"
#include "tools/commands.h"
#include "tools/table.h"

#define CACHE_SCHEMA_VERSION 1

static const char cache_synopsis[] = "usage: drk cache [--dir DIR] list [--json] [--verify]\n"
                                     "       drk cache [--dir DIR] stats [--json] [--size AMOUNT]\n"
                                     "       drk cache [--dir DIR] clear\n"
                                     "       drk cache [--dir DIR] prune [--size AMOUNT]\n";

void usage_cache(FILE *f)
{
    fputs(cache_synopsis, f);
    fputs("\n"
          "drk's cache on disk holds the kernels evolution compiled (cubins) and what its searches\n"
          "found, so that a later run launches the winners without searching again. Many processes\n"
          "may use one cache at once (docs/cache.md).\n"
          "\n"
          "  list    the entries, most recently used first: kind, size, last use, age, key, meta\n"
          "  stats   entries and bytes (per kind) against the cap, and the hits, misses and stores\n"
          "          the processes that used the cache counted\n"
          "  clear   remove every entry; files that are not drk's stay, and so does DIR\n"
          "  prune   remove the least recently used entries until the rest fit the cap, and the\n"
          "          temporary files of writers that died (an hour old)\n"
          "\n"
          "  --dir DIR      the cache (default: DRK_CACHE_DIR, else $XDG_CACHE_HOME/drk, else\n"
          "                 ~/.cache/drk)\n"
          "  --size AMOUNT  the cap (default: DRK_CACHE_SIZE, else " DRK_CACHE_DEFAULT_SIZE "): bytes, with a K, M, G\n"
          "                 or T suffix (powers of 1024), or a share of the file system, e.g. 10%\n"
          "  --verify       list: read every entry whole and check it as a run would\n"
          "  --json         print JSON (schema \"drk-cache\", see docs/cache.md)\n"
          "\n"
          "Exit status 1 when the cache cannot be read or an entry cannot be removed, and for\n"
          "list --verify when an entry is invalid.\n",
          f);
}

#define usage_error(...) usage_fail("cache", cache_synopsis, __VA_ARGS__)

typedef struct cache_args {
    const char *sub;
    char dir[DRK_OPTION_PATH_MAX];
    uint64_t cap;
    int json, verify;
} cache_args;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* "12 s", "5 min", "3 h", "2 d": how long ago. */
static const char *human_age(int64_t ns, char *buf, size_t n)
{
    int64_t s = ns / 1000000000;
    if (s < 1)
        snprintf(buf, n, "<1 s");
    else if (s < 120)
        snprintf(buf, n, "%" PRId64 " s", s);
    else if (s < 2 * 3600)
        snprintf(buf, n, "%" PRId64 " min", s / 60);
    else if (s < 2 * 86400)
        snprintf(buf, n, "%" PRId64 " h", s / 3600);
    else
        snprintf(buf, n, "%" PRId64 " d", s / 86400);
    return buf;
}

static void json_head(drk_json *j, const cache_args *a)
{
    drk_json_open(j, NULL, '{');
    drk_json_str(j, "schema", "drk-cache");
    drk_json_u64(j, "version", CACHE_SCHEMA_VERSION);
    drk_json_str(j, "command", a->sub);
    drk_json_str(j, "dir", a->dir);
    drk_json_u64(j, "format", DRK_CACHE_FORMAT);
    drk_json_u64(j, "cap_bytes", a->cap);
}

static int json_end(drk_json *j)
{
    drk_json_close(j, '}');
    int rc = 0;
    if (drk_json_flush(j, stdout) != 0 && j->failed) {
        fputs("drk cache: out of memory: the JSON is incomplete\n", stderr);
        rc = 1;
    }
    drk_json_free(j);
    return rc;
}

static int cache_list(const cache_args *a)
{
    drk_cache_listing l;
    char why[512];
    if (drk_cache_list(a->dir, &l, why, sizeof why) != 0) {
        fprintf(stderr, "drk cache list: %s\n", why);
        return 1;
    }
    static drk_cache_info info; /* 4 KiB of meta: not on the stack */
    int64_t now = now_ns();
    int status = 0;
    drk_json j = {0};
    table t;
    if (a->json) {
        json_head(&j, a);
        drk_json_u64(&j, "total_bytes", l.bytes);
        drk_json_u64(&j, "temporary_files", l.temps);
        drk_json_u64(&j, "foreign_files", l.foreign);
        drk_json_open(&j, "entries", '[');
    } else {
        table_init(&t, a->verify ? "lrrrlll" : "lrrrll");
        table_row(&t, (const char *const[]){"kind", "size", "used", "made", "key", a->verify ? "check" : "meta",
                                             "meta"});
    }
    /* Most recently used first: what a user looks for. */
    for (size_t k = l.n; k-- > 0;) {
        const drk_cache_file *f = &l.files[k];
        int ok = drk_cache_read_info(a->dir, f->name, a->verify, &info, why, sizeof why) == 0;
        if (!ok && a->verify)
            status = 1;
        char hex[2 * DRK_SHA256_BYTES + 1];
        drk_cache_key_hex(&f->key, hex);
        if (a->json) {
            drk_json_open_inline(&j, NULL, '{');
            drk_json_str(&j, "key", hex);
            drk_json_str(&j, "kind", f->kind);
            drk_json_u64(&j, "bytes", f->bytes);
            drk_json_i64(&j, "used_unix_ns", f->used_ns);
            if (ok) {
                drk_json_u64(&j, "payload_bytes", info.payload);
                drk_json_i64(&j, "created_unix_ns", info.created_ns);
                drk_json_str(&j, "meta", info.meta);
            } else {
                drk_json_null(&j, "payload_bytes");
                drk_json_null(&j, "created_unix_ns");
                drk_json_null(&j, "meta");
            }
            drk_json_bool(&j, "valid", ok);
            drk_json_str(&j, "error", ok ? NULL : why);
            drk_json_close(&j, '}');
            if (drk_json_flush(&j, stdout) != 0)
                break;
            continue;
        }
        char size[32], used[32], made[32], meta[4 * 48 + 1], check[4 * 48 + 1];
        human_bytes(f->bytes, size, sizeof size);
        human_age(now - f->used_ns, used, sizeof used);
        if (ok)
            human_age(now - info.created_ns, made, sizeof made);
        else
            snprintf(made, sizeof made, "?");
        text_fit(ok ? info.meta : why, 48, meta, sizeof meta);
        hex[16] = '\0';
        if (a->verify) {
            text_fit(ok ? "ok" : why, 48, check, sizeof check);
            text_fit(ok ? info.meta : "", 48, meta, sizeof meta);
            table_row(&t, (const char *const[]){f->kind, size, used, made, hex, check, meta});
        } else {
            table_row(&t, (const char *const[]){f->kind, size, used, made, hex, meta, NULL});
        }
    }
    if (a->json) {
        drk_json_close(&j, ']');
        if (json_end(&j) != 0)
            status = 1;
    } else {
        printf("drk cache %s (format v%d)\n", a->dir, DRK_CACHE_FORMAT);
        if (l.n)
            table_print(&t, stdout, "  ");
        char total[32], cap[32];
        printf("%zu entr%s, %s of a %s cap", l.n, l.n == 1 ? "y" : "ies", human_bytes(l.bytes, total, sizeof total),
               human_bytes(a->cap, cap, sizeof cap));
        if (l.temps)
            printf("; %zu temporary file%s", l.temps, l.temps == 1 ? "" : "s");
        if (l.foreign)
            printf("; %zu file%s not drk's", l.foreign, l.foreign == 1 ? "" : "s");
        printf("%s\n", l.exists ? "" : " (no cache there yet)");
        table_free(&t);
    }
    drk_cache_listing_free(&l);
    return status;
}

typedef struct kind_sum {
    char kind[DRK_CACHE_KIND_MAX + 1];
    size_t n;
    uint64_t bytes;
} kind_sum;

static int cache_stats(const cache_args *a)
{
    drk_cache_listing l;
    char why[512];
    if (drk_cache_list(a->dir, &l, why, sizeof why) != 0) {
        fprintf(stderr, "drk cache stats: %s\n", why);
        return 1;
    }
    kind_sum kinds[32];
    size_t nkinds = 0, other = 0;
    for (size_t i = 0; i < l.n; i++) {
        size_t k = 0;
        while (k < nkinds && strcmp(kinds[k].kind, l.files[i].kind) != 0)
            k++;
        if (k == nkinds) {
            if (nkinds == sizeof kinds / sizeof *kinds) {
                other++;
                continue;
            }
            memset(&kinds[k], 0, sizeof kinds[k]);
            memcpy(kinds[k].kind, l.files[i].kind, sizeof kinds[k].kind);
            nkinds++;
        }
        kinds[k].n++;
        kinds[k].bytes += l.files[i].bytes;
    }
    drk_cache_counters c;
    drk_cache_shared_counters(a->dir, &c);
    int64_t now = now_ns();
    if (a->json) {
        drk_json j = {0};
        json_head(&j, a);
        drk_json_bool(&j, "exists", l.exists);
        drk_json_u64(&j, "entries", l.n);
        drk_json_u64(&j, "bytes", l.bytes);
        drk_json_open(&j, "kinds", '{');
        for (size_t k = 0; k < nkinds; k++) {
            drk_json_open_inline(&j, kinds[k].kind, '{');
            drk_json_u64(&j, "entries", kinds[k].n);
            drk_json_u64(&j, "bytes", kinds[k].bytes);
            drk_json_close(&j, '}');
        }
        drk_json_close(&j, '}');
        if (l.n) {
            drk_json_i64(&j, "oldest_use_unix_ns", l.files[0].used_ns);
            drk_json_i64(&j, "newest_use_unix_ns", l.files[l.n - 1].used_ns);
        } else {
            drk_json_null(&j, "oldest_use_unix_ns");
            drk_json_null(&j, "newest_use_unix_ns");
        }
        drk_json_u64(&j, "temporary_files", l.temps);
        drk_json_u64(&j, "temporary_bytes", l.temp_bytes);
        drk_json_u64(&j, "foreign_files", l.foreign);
        drk_json_open_inline(&j, "counters", '{');
        drk_json_u64(&j, "hits", c.hits);
        drk_json_u64(&j, "misses", c.misses);
        drk_json_u64(&j, "invalid", c.invalid);
        drk_json_u64(&j, "puts", c.puts);
        drk_json_u64(&j, "put_failures", c.put_failures);
        drk_json_u64(&j, "evicted", c.evicted);
        drk_json_u64(&j, "evicted_bytes", c.evicted_bytes);
        drk_json_close(&j, '}');
        drk_cache_listing_free(&l);
        return json_end(&j);
    }
    char b1[32], b2[32], b3[32];
    printf("drk cache %s (format v%d)%s\n", a->dir, DRK_CACHE_FORMAT, l.exists ? "" : ": no cache there yet");
    double share = a->cap ? 100.0 * (double)l.bytes / (double)a->cap : 0;
    printf("  entries    %zu, %s of a %s cap (%.1f%%)\n", l.n, human_bytes(l.bytes, b1, sizeof b1),
           human_bytes(a->cap, b2, sizeof b2), share);
    for (size_t k = 0; k < nkinds; k++)
        printf("    %-*s %zu, %s\n", DRK_CACHE_KIND_MAX, kinds[k].kind, kinds[k].n,
               human_bytes(kinds[k].bytes, b1, sizeof b1));
    if (other)
        printf("    (%zu entries of further kinds)\n", other);
    if (l.n)
        printf("  last use   %s ago, the least recent %s ago\n", human_age(now - l.files[l.n - 1].used_ns, b1, sizeof b1),
               human_age(now - l.files[0].used_ns, b2, sizeof b2));
    if (l.temps)
        printf("  temporary  %zu file%s, %s (writes under way, or left by a writer that died)\n", l.temps,
               l.temps == 1 ? "" : "s", human_bytes(l.temp_bytes, b1, sizeof b1));
    if (l.foreign)
        printf("  not drk's  %zu file%s (drk cache clear leaves them)\n", l.foreign, l.foreign == 1 ? "" : "s");
    printf("  counted    %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64 " invalid, %" PRIu64 " stored, %" PRIu64
           " not stored, %" PRIu64 " evicted (%s)\n",
           c.hits, c.misses, c.invalid, c.puts, c.put_failures, c.evicted, human_bytes(c.evicted_bytes, b3, sizeof b3));
    drk_cache_listing_free(&l);
    return 0;
}

static int cache_clear(const cache_args *a)
{
    drk_cache_removed r;
    char why[512], b[32];
    int rc = drk_cache_clear(a->dir, &r, why, sizeof why);
    printf("drk cache clear: removed %zu file%s (%s) from %s", r.files, r.files == 1 ? "" : "s",
           human_bytes(r.bytes, b, sizeof b), a->dir);
    if (r.left)
        printf("; left %zu file%s that %s not drk's", r.left, r.left == 1 ? "" : "s", r.left == 1 ? "is" : "are");
    putchar('\n');
    if (rc != 0)
        fprintf(stderr, "drk cache clear: %s\n", why);
    return rc != 0;
}

static int cache_prune(const cache_args *a)
{
    drk_cache_removed r;
    char why[512], b1[32], b2[32], b3[32];
    int rc = drk_cache_prune(a->dir, a->cap, &r, why, sizeof why);
    if (rc != 0 && r.files == 0) {
        fprintf(stderr, "drk cache prune: %s\n", why);
        return 1;
    }
    drk_cache_listing l;
    uint64_t left = 0;
    if (drk_cache_list(a->dir, &l, why, sizeof why) == 0)
        left = l.bytes, drk_cache_listing_free(&l);
    printf("drk cache prune: removed %zu file%s (%s) from %s; its entries now total %s of a %s cap\n", r.files,
           r.files == 1 ? "" : "s", human_bytes(r.bytes, b1, sizeof b1), a->dir, human_bytes(left, b2, sizeof b2),
           human_bytes(a->cap, b3, sizeof b3));
    if (rc != 0)
        fprintf(stderr, "drk cache prune: %s\n", why);
    return rc != 0;
}

/* The cap: --size, else DRK_CACHE_SIZE as the library reads it (a value it
 * refuses: the default, said once), else the default. */
static int cache_cap(const char *size, const char *dir, uint64_t *cap)
{
    static drk_option_value v; /* 4 KiB: not on the stack */
    char why[160];
    if (size) {
        if (drk_option_parse(DRK_OPT_CACHE_SIZE, size, &v, why, sizeof why) != 0)
            return usage_error("--size %s: %s", size, why);
    } else {
        const char *env = getenv("DRK_CACHE_SIZE");
        if (!env || !*env || drk_option_parse(DRK_OPT_CACHE_SIZE, env, &v, why, sizeof why) != 0) {
            if (env && *env)
                fprintf(stderr, "drk cache: DRK_CACHE_SIZE=%s is %s; using %s\n", env, why, DRK_CACHE_DEFAULT_SIZE);
            (void)drk_option_parse(DRK_OPT_CACHE_SIZE, DRK_CACHE_DEFAULT_SIZE, &v, why, sizeof why);
        }
    }
    *cap = drk_cache_cap_bytes(v.num, dir);
    return 0;
}

int cmd_cache(int argc, char **argv)
{
    cache_args a = {0};
    const char *dir = NULL, *size = NULL;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        size_t n;
#define VALUE(opt)                                                                                         \
    ((n = strlen(opt)), strncmp(s, opt, n) == 0 && (s[n] == '=' || (s[n] == '\0' && i + 1 < argc)) \
                            ? (s[n] == '=' ? s + n + 1 : argv[++i])                                         \
                            : NULL)
        const char *v;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage_cache(stdout);
            return 0;
        } else if (strcmp(s, "--json") == 0) {
            a.json = 1;
        } else if (strcmp(s, "--verify") == 0) {
            a.verify = 1;
        } else if ((v = VALUE("--dir"))) {
            if (!*v)
                return usage_error("--dir: empty");
            dir = v;
        } else if ((v = VALUE("--size"))) {
            size = v;
        } else if (s[0] == '-') {
            return usage_error("unknown option '%s'%s", s,
                               strcmp(s, "--dir") == 0 || strcmp(s, "--size") == 0 ? " (it needs a value)" : "");
        } else if (!a.sub) {
            a.sub = s;
        } else {
            return usage_error("unexpected argument '%s'", s);
        }
#undef VALUE
    }
    if (!a.sub)
        return usage_error("list, stats, clear or prune?");
    int list = strcmp(a.sub, "list") == 0, stats = strcmp(a.sub, "stats") == 0;
    int clear = strcmp(a.sub, "clear") == 0, prune = strcmp(a.sub, "prune") == 0;
    if (!list && !stats && !clear && !prune)
        return usage_error("unknown subcommand '%s' (list, stats, clear or prune)", a.sub);
    if (a.verify && !list)
        return usage_error("--verify is for list");
    if (a.json && !list && !stats)
        return usage_error("--json is for list and stats");
    if (size && (list || clear))
        return usage_error("--size is for prune and stats");
    if (drk_cache_dir_choose(dir ? dir : getenv("DRK_CACHE_DIR"), getenv("XDG_CACHE_HOME"), getenv("HOME"), a.dir,
                             sizeof a.dir) != 0) {
        fputs("drk cache: no cache directory: give --dir, or set DRK_CACHE_DIR or HOME\n", stderr);
        return EXIT_USAGE;
    }
    int rc = cache_cap(size, a.dir, &a.cap);
    if (rc != 0)
        return rc;
    if (list)
        return cache_list(&a);
    if (stats)
        return cache_stats(&a);
    if (clear)
        return cache_clear(&a);
    return cache_prune(&a);
}
