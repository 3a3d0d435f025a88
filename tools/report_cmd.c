/* `drk report PATH`: one report, or every report in a directory (one per
 * process, as DRK_REPORT=dir/ leaves them) and their sum. `drk report
 * --compare A B`: two such, side by side. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/commands.h"
#include "tools/report.h"

#define DEFAULT_TOP 20

void usage_report(FILE *f)
{
    fprintf(f,
            "usage: drk report [--json | --html FILE] [--top N] PATH\n"
            "       drk report --compare [--json] [--top N] A B\n"
            "\n"
            "PATH is a report (DRK_REPORT=file) or a directory of them (DRK_REPORT=dir/: every *.json\n"
            "whose \"schema\" is \"drk-report\"). Prints, per process: a header (program, pid, the pid\n"
            "it was forked from, driver, duration), the top kernels by launches (launches, share of\n"
            "all launches, handles, distinct shapes - '+' when more were launched than recorded -\n"
            "and the most launched grid / block / shared bytes), with DRK_PROFILE=1 the top\n"
            "kernel-shapes by GPU time, GPU busy time and a table of rounds (else why times are\n"
            "off), calls by family, allocations by kind, drk's device and host pools when\n"
            "they served allocations, and with DRK_EVOLVE=1 the evolved kernels (per kernel-shape\n"
            "its state, the variant served and its speedup, what was tried, why not). A directory\n"
            "with several reports also gets a combined section (pool peaks: sums of per-process\n"
            "peaks; GPU time rows added up by kernel-shape; every process's evolved kernels).\n"
            "\n"
            "  --top N   kernels per table, and the last N rounds (default %d; 0: all)\n"
            "  --json    print the combined numbers as JSON (schema \"drk-report-summary\"): the\n"
            "            processes, kernels / calls / memory as in the report (all kernels unless\n"
            "            --top is given), and device_pool / host_pool / gpu_time / evolve sums\n"
            "  --html FILE  write one self-contained HTML page to FILE ('-': standard output):\n"
            "            per process with GPU times, its top kernels' time, GPU busy and device\n"
            "            memory per round (inline SVG, nothing loaded from elsewhere), its findings,\n"
            "            the top kernels by GPU time and the evolved kernels (--top rows)\n"
            "  --compare A B  B against A, each a report or a directory (two runs, two versions):\n"
            "            per kernel (all its shapes) GPU time - or launches when a side has no\n"
            "            times - with B/A, most first; wall, busy and kernel time of the rounds\n"
            "            both have (by index) with B/A, and the median and range of the rounds'\n"
            "            kernel time B/A; --json: schema \"drk-report-compare\"\n"
            "\n"
            "This drk reads report version %d. Exit status 1 when a report cannot be read.\n",
            DEFAULT_TOP, REPORT_VERSION);
}

#define usage_error(...)                                                                                         \
    usage_fail("report",                                                                                         \
               "usage: drk report [--json | --html FILE] [--top N] PATH\n"                                       \
               "       drk report --compare [--json] [--top N] A B\n",                                           \
               __VA_ARGS__)

static int parse_top(const char *s, size_t *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || s[0] == '-')
        return -1;
    *out = (size_t)v;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Paths of the *.json regular files in `dir`, sorted; NULL on error (said). */
static char **list_json(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "drk report: %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    char **paths = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char *path = malloc(strlen(dir) + len + 2);
        if (!path)
            goto oom;
        sprintf(path, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **np = realloc(paths, ncap * sizeof *np);
            if (!np) {
                free(path);
                goto oom;
            }
            paths = np, cap = ncap;
        }
        paths[n++] = path;
    }
    closedir(d);
    if (n > 1)
        qsort(paths, n, sizeof *paths, by_name);
    *count = n;
    return paths ? paths : calloc(1, sizeof *paths);
oom:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    fprintf(stderr, "drk report: out of memory\n");
    return NULL;
}

/* Parents before their forks: by start time, then pid. */
static int by_start(const void *a, const void *b)
{
    const rep_process *x = *(const rep_process *const *)a, *y = *(const rep_process *const *)b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Load one report and put its kernels and shapes in order. Returns a
 * REPORT_* code; errors are said on stderr, skips only when `in_dir`. */
static int load(const char *path, rep_process *p, int in_dir)
{
    char why[1024];
    int r = report_load(path, p, why, sizeof why);
    if (r == REPORT_NOT_A_REPORT && in_dir) {
        fprintf(stderr, "drk report: skipping %s\n", why);
        return r;
    }
    if (r != REPORT_OK) {
        fprintf(stderr, "drk report: %s\n", why);
        return REPORT_ERROR;
    }
    const rep_totals *one = &p->t;
    rep_totals sorted;
    if (totals_merge(&one, 1, &sorted) != 0) {
        fprintf(stderr, "drk report: out of memory\n");
        return REPORT_ERROR;
    }
    totals_release(&p->t);
    p->t = sorted;
    return REPORT_OK;
}

/* One side of --compare: the reports at a path, parents first, and their
 * sum; read as `drk report PATH` reads them. */
typedef struct side {
    rep_process *procs;
    const rep_process **order;
    size_t n;
    rep_totals all;
} side;

static void side_release(side *s)
{
    for (size_t i = 0; i < s->n; i++)
        report_release(&s->procs[i]);
    free(s->procs);
    free(s->order);
    totals_release(&s->all);
}

/* 0, or 1 with the error said. */
static int side_load(const char *path, side *s)
{
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "drk report: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int is_dir = S_ISDIR(st.st_mode), status = 0;
    size_t nfiles = 1;
    char **files = is_dir ? list_json(path, &nfiles) : calloc(1, sizeof *files);
    if (!files) {
        if (!is_dir) /* list_json said why */
            fprintf(stderr, "drk report: out of memory\n");
        return 1;
    }
    s->procs = calloc(nfiles + 1, sizeof *s->procs);
    s->order = calloc(nfiles + 1, sizeof *s->order);
    const rep_totals **parts = calloc(nfiles + 1, sizeof *parts);
    if (!s->procs || !s->order || !parts || (!is_dir && !(files[0] = strdup(path)))) {
        fprintf(stderr, "drk report: out of memory\n");
        status = 1;
    }
    for (size_t i = 0; i < nfiles && !status; i++) {
        int r = load(files[i], &s->procs[s->n], is_dir);
        if (r == REPORT_OK)
            s->order[s->n] = &s->procs[s->n], s->n++;
        else
            report_release(&s->procs[s->n]);
        status = r == REPORT_ERROR;
    }
    if (!status && s->n == 0) {
        fprintf(stderr, "drk report: %s: no drk reports in this directory (*.json files with \"schema\": "
                        "\"drk-report\")\n",
                path);
        status = 1;
    }
    if (!status) {
        if (s->n > 1)
            qsort(s->order, s->n, sizeof *s->order, by_start);
        for (size_t i = 0; i < s->n; i++)
            parts[i] = &s->order[i]->t;
        if (totals_merge(parts, s->n, &s->all) != 0) {
            fprintf(stderr, "drk report: out of memory\n");
            status = 1;
        }
    }
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(parts);
    return status;
}

static int compare(const char *path_a, const char *path_b, int json, size_t top)
{
    side a, b;
    memset(&b, 0, sizeof b);
    int status = side_load(path_a, &a) || side_load(path_b, &b);
    rep_side sa = {path_a, a.order, a.n, &a.all}, sb = {path_b, b.order, b.n, &b.all};
    rep_compare c = {0};
    if (!status && compare_build(&sa, &sb, &c) != 0) {
        fprintf(stderr, "drk report: out of memory\n");
        status = 1;
    }
    if (!status && json)
        print_compare_json(stdout, &sa, &sb, &c, top);
    else if (!status)
        print_compare(stdout, &sa, &sb, &c, top);
    compare_release(&c);
    side_release(&a);
    side_release(&b);
    return status;
}

int cmd_report(int argc, char **argv)
{
    int json = 0, top_given = 0, paths_only = 0;
    int compare_given = 0; /* --compare A B */
    const char *path_b = NULL;
    const char *html = NULL; /* --html FILE */
    size_t top = DEFAULT_TOP;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!paths_only && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            usage_report(stdout);
            return 0;
        } else if (!paths_only && strcmp(a, "--json") == 0) {
            json = 1;
        } else if (!paths_only && strcmp(a, "--compare") == 0) {
            compare_given = 1;
        } else if (!paths_only && (strcmp(a, "--html") == 0 || strncmp(a, "--html=", 7) == 0)) {
            html = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
            if (!html || !*html)
                return usage_error("%s needs a file name", a);
        } else if (!paths_only && (strcmp(a, "--top") == 0 || strncmp(a, "--top=", 6) == 0)) {
            const char *v = a[5] == '=' ? a + 6 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return usage_error("%s needs a number", a);
            if (parse_top(v, &top) != 0)
                return usage_error("--top %s: not a number of kernels", v);
            top_given = 1;
        } else if (!paths_only && strcmp(a, "--") == 0) {
            paths_only = 1;
        } else if (!paths_only && a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (path_b) {
            if (compare_given)
                return usage_error("--compare takes two paths (A and B), not also '%s'", a);
            return usage_error("one PATH only (a file or a directory), not also '%s'", path_b);
        } else if (path) {
            path_b = a; /* --compare's B, which may come after the paths */
        } else {
            path = a;
        }
    }
    if (!path)
        return usage_error("no PATH given");
    if (compare_given && !path_b)
        return usage_error("--compare needs two paths, A and B");
    if (compare_given && html)
        return usage_error("--compare prints text or --json, not --html");
    if (compare_given)
        return compare(path, path_b, json, json && !top_given ? 0 : top);
    if (path_b)
        return usage_error("one PATH only (a file or a directory), not also '%s'", path_b);
    if (json && html)
        return usage_error("--json or --html, not both");
    if (json && !top_given)
        top = 0;

    side all;
    int status = side_load(path, &all);
    if (!status) {
        if (html) {
            status = report_html(html, path, all.order, all.n, top);
        } else if (json) {
            print_json(stdout, all.order, all.n, &all.all, top);
        } else {
            for (size_t i = 0; i < all.n; i++) {
                if (i)
                    fputc('\n', stdout);
                print_process(stdout, all.order[i], top);
            }
            if (all.n > 1) {
                fputc('\n', stdout);
                print_combined(stdout, all.order, all.n, &all.all, top);
            }
        }
    }
    side_release(&all);
    return status;
}
