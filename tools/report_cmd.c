/* `drk report PATH`: one report, or every report in a directory (one per
 * process, as DRK_REPORT=dir/ leaves them) and their sum. */
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
            "usage: drk report [--json] [--top N] PATH\n"
            "\n"
            "PATH is a report (DRK_REPORT=file) or a directory of them (DRK_REPORT=dir/: every *.json\n"
            "whose \"schema\" is \"drk-report\"). Prints, per process: a header (program, pid, the pid\n"
            "it was forked from, driver, duration), the top kernels by launches (launches, share of\n"
            "all launches, handles, distinct shapes - '+' when more were launched than recorded -\n"
            "and the most launched grid / block / shared bytes), with DRK_PROFILE=1 the top\n"
            "kernel-shapes by GPU time, GPU busy time and a table of rounds (else why times are\n"
            "off), calls by family, allocations by kind, and drk's device and host pools when\n"
            "they served allocations. A directory with several reports also gets a combined\n"
            "section (pool peaks: sums of per-process peaks; GPU time rows added up by\n"
            "kernel-shape).\n"
            "\n"
            "  --top N   kernels per table, and the last N rounds (default %d; 0: all)\n"
            "  --json    print the combined numbers as JSON (schema \"drk-report-summary\"): the\n"
            "            processes, kernels / calls / memory as in the report (all kernels unless\n"
            "            --top is given), and device_pool / host_pool / gpu_time sums\n"
            "\n"
            "This drk reads report version %d. Exit status 1 when a report cannot be read.\n",
            DEFAULT_TOP, REPORT_VERSION);
}

#define usage_error(...) usage_fail("report", "usage: drk report [--json] [--top N] PATH\n", __VA_ARGS__)

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

int cmd_report(int argc, char **argv)
{
    int json = 0, top_given = 0, paths_only = 0;
    size_t top = DEFAULT_TOP;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!paths_only && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            usage_report(stdout);
            return 0;
        } else if (!paths_only && strcmp(a, "--json") == 0) {
            json = 1;
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
        } else if (path) {
            return usage_error("one PATH only (a file or a directory), not also '%s'", a);
        } else {
            path = a;
        }
    }
    if (!path)
        return usage_error("no PATH given");
    if (json && !top_given)
        top = 0;

    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "drk report: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int is_dir = S_ISDIR(st.st_mode);
    char **files;
    size_t nfiles = 1;
    if (is_dir) {
        files = list_json(path, &nfiles);
        if (!files)
            return 1;
    } else {
        files = malloc(sizeof *files);
        if (!files || !(files[0] = strdup(path))) {
            free(files);
            fprintf(stderr, "drk report: out of memory\n");
            return 1;
        }
    }

    rep_process *procs = calloc(nfiles + 1, sizeof *procs);
    const rep_process **order = calloc(nfiles + 1, sizeof *order);
    size_t n = 0;
    int status = 0;
    if (!procs || !order) {
        fprintf(stderr, "drk report: out of memory\n");
        status = 1;
    }
    for (size_t i = 0; i < nfiles && !status; i++) {
        int r = load(files[i], &procs[n], is_dir);
        if (r == REPORT_OK) {
            order[n] = &procs[n];
            n++;
        } else {
            report_release(&procs[n]);
            if (r == REPORT_ERROR)
                status = 1;
        }
    }
    if (!status && n == 0) {
        fprintf(stderr, "drk report: %s: no drk reports in this directory (*.json files with \"schema\": "
                        "\"drk-report\")\n",
                path);
        status = 1;
    }

    if (!status) {
        if (n > 1)
            qsort(order, n, sizeof *order, by_start);
        const rep_totals **parts = calloc(n, sizeof *parts);
        rep_totals all;
        if (!parts) {
            fprintf(stderr, "drk report: out of memory\n");
            status = 1;
        } else {
            for (size_t i = 0; i < n; i++)
                parts[i] = &order[i]->t;
            if (totals_merge(parts, n, &all) != 0) {
                fprintf(stderr, "drk report: out of memory\n");
                status = 1;
            }
        }
        if (!status) {
            if (json) {
                print_json(stdout, order, n, &all, top);
            } else {
                for (size_t i = 0; i < n; i++) {
                    if (i)
                        fputc('\n', stdout);
                    print_process(stdout, order[i], top);
                }
                if (n > 1) {
                    fputc('\n', stdout);
                    print_combined(stdout, order, n, &all, top);
                }
            }
            totals_release(&all);
        }
        free(parts);
    }

    for (size_t i = 0; i < n; i++)
        report_release(&procs[i]);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(procs);
    free(order);
    return status;
}
