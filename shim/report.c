#define _GNU_SOURCE
#include "shim/report.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc/stats.h"
#include "base/json.h"
#include "base/log.h"
#include "base/options.h"
#include "evolve/registry.h"
#include "interpose/real.h"
#include "interpose/symbols.h"
#include "interpose/table.h"
#include "shim/calls.h"
#include "shim/modules.h"
#include "shim/report_facts.h"
#include "shim/report_pool.h"
#include "shim/report_evolve.h"
#include "shim/report_time.h"
#include "shim/state.h"

static atomic_int written;

void drk_report_after_fork_child(void) { atomic_store(&written, 0); }

static const char *const families[] = {"launch", "graph", "module", "memory", "host_memory", "stream", "entry",
                                       "profiler"};

static void write_process(drk_json *j)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    drk_json_open(j, "process", '{');
    drk_json_i64(j, "pid", getpid());
    drk_json_i64(j, "forked_from", drk_process_forked_from());
    drk_json_str(j, "program", program_invocation_short_name);
    drk_json_str(j, "exe", exe);
    drk_json_i64(j, "start_unix_ns", drk_process_start_ns());
    drk_json_i64(j, "end_unix_ns", (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
    drk_json_close(j, '}');
}

static void write_driver(drk_json *j)
{
    void *h = drk_driver_handle_if_open();
    struct link_map *lm = NULL;
    int version = 0;
    const drk_driver *drv = h ? drk_driver_table() : NULL;
    drk_json_open(j, "driver", '{');
    drk_json_str(j, "library", drk_opt_str(DRK_OPT_CUDA_LIBRARY));
    if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name)
        drk_json_str(j, "path", lm->l_name);
    else
        drk_json_null(j, "path");
    if (drv && (drv->version || (drv->driver_get_version && drv->driver_get_version(&version) == CUDA_SUCCESS)))
        drk_json_i64(j, "version", drv->version ? drv->version : version);
    else
        drk_json_null(j, "version");
    drk_json_close(j, '}');
}

static void write_options(drk_json *j)
{
    drk_json_open(j, "options", '{');
    for (int i = 0; i < DRK_OPT_COUNT; i++)
        drk_json_str(j, drk_option_table[i].name, drk_opt_str((drk_option_id)i));
    drk_json_close(j, '}');
}

static void write_calls(drk_json *j)
{
    drk_json_open(j, "calls", '{');
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
        uint64_t total = 0;
        for (int s = 0; s < DRK_SYM_COUNT; s++)
            if (strcmp(drk_sym_family[s], families[f]) == 0)
                total += drk_calls((drk_sym)s);
        drk_json_open(j, families[f], '{');
        drk_json_u64(j, "total", total);
        drk_json_open(j, "by_name", '{');
        for (int s = 0; s < DRK_SYM_COUNT; s++)
            if (strcmp(drk_sym_family[s], families[f]) == 0)
                drk_json_u64(j, drk_sym_name[s], drk_calls((drk_sym)s));
        drk_json_close(j, '}');
        drk_json_close(j, '}');
    }
    drk_json_close(j, '}');
}

/* One kernel of the report: records of the same name merged. */
typedef struct merged_shape {
    drk_launch_shape shape;
    uint64_t launches;
} merged_shape;

typedef struct kernel_entry {
    const char *name;
    size_t first, count; /* range in the name-sorted record list */
    uint64_t launches, other;
} kernel_entry;

static int by_name(const void *a, const void *b)
{
    const drk_kernel_record *x = *(const drk_kernel_record *const *)a, *y = *(const drk_kernel_record *const *)b;
    return strcmp(x->name, y->name);
}

static int by_launches_desc(const void *a, const void *b)
{
    const kernel_entry *x = a, *y = b;
    if (x->launches != y->launches)
        return x->launches < y->launches ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int shape_cmp(const void *a, const void *b)
{
    return memcmp(&((const merged_shape *)a)->shape, &((const merged_shape *)b)->shape, sizeof(drk_launch_shape));
}

static int shape_by_launches_desc(const void *a, const void *b)
{
    const merged_shape *x = a, *y = b;
    if (x->launches != y->launches)
        return x->launches < y->launches ? 1 : -1;
    return shape_cmp(a, b);
}

static void write_shapes(drk_json *j, const drk_kernel_record *const *recs, size_t count)
{
    merged_shape *m = malloc(sizeof *m * count * DRK_SHAPES_PER_KERNEL + 1);
    size_t n = 0;
    for (size_t r = 0; m && r < count; r++)
        for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++) {
            uint64_t l = drk_record_shape_launches(recs[r], i);
            if (l && atomic_load_explicit(&recs[r]->shapes[i].state, memory_order_acquire) == DRK_SHAPE_READY)
                m[n++] = (merged_shape){recs[r]->shapes[i].shape, l};
        }
    if (n)
        qsort(m, n, sizeof *m, shape_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u && shape_cmp(&m[u - 1], &m[i]) == 0)
            m[u - 1].launches += m[i].launches;
        else
            m[u++] = m[i];
    }
    if (u)
        qsort(m, u, sizeof *m, shape_by_launches_desc);
    drk_json_open(j, "shapes", '[');
    for (size_t i = 0; i < u; i++) {
        const drk_launch_shape *s = &m[i].shape;
        drk_json_open(j, NULL, '{');
        drk_json_open(j, "grid", '[');
        for (int d = 0; d < 3; d++)
            drk_json_u64(j, NULL, s->grid[d]);
        drk_json_close(j, ']');
        drk_json_open(j, "block", '[');
        for (int d = 0; d < 3; d++)
            drk_json_u64(j, NULL, s->block[d]);
        drk_json_close(j, ']');
        drk_json_u64(j, "shared_bytes", s->shared_bytes);
        drk_json_str(j, "entry", s->entry < DRK_SYM_COUNT ? drk_sym_name[s->entry] : "?");
        drk_json_u64(j, "launches", m[i].launches);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    if (!m)
        j->failed = 1;
    free(m);
}

static void write_kernels(drk_json *j)
{
    drk_modules_complete();
    size_t n = drk_registry_size();
    const drk_kernel_record **recs = malloc(sizeof *recs * n + 1);
    kernel_entry *entries = malloc(sizeof *entries * n + 1);
    if (!recs || !entries) {
        j->failed = 1;
        free(recs);
        free(entries);
        return;
    }
    for (size_t i = 0; i < n; i++)
        recs[i] = drk_registry_at(i);
    if (n)
        qsort(recs, n, sizeof *recs, by_name);
    size_t ne = 0;
    uint64_t launches = drk_registry_untracked();
    for (size_t i = 0; i < n; i++) {
        if (!ne || strcmp(entries[ne - 1].name, recs[i]->name) != 0)
            entries[ne++] = (kernel_entry){recs[i]->name, i, 0, 0, 0};
        kernel_entry *e = &entries[ne - 1];
        e->count++;
        uint64_t l = drk_record_launches(recs[i]);
        e->launches += l;
        e->other += drk_record_other_launches(recs[i]);
        launches += l;
    }
    if (ne)
        qsort(entries, ne, sizeof *entries, by_launches_desc);

    drk_json_open(j, "kernels", '{');
    drk_json_u64(j, "launches", launches);
    drk_json_u64(j, "failed_launches", drk_failed_launches());
    drk_json_u64(j, "untracked_launches", drk_registry_untracked());
    drk_json_u64(j, "distinct", ne);
    drk_facts_totals totals = {0};
    drk_json_open(j, "list", '[');
    for (size_t i = 0; i < ne; i++) {
        const kernel_entry *e = &entries[i];
        drk_json_open(j, NULL, '{');
        drk_json_str(j, "name", e->name);
        drk_json_u64(j, "handles", e->count);
        drk_json_u64(j, "launches", e->launches);
        write_shapes(j, recs + e->first, e->count);
        drk_json_u64(j, "other_shape_launches", e->other);
        uint64_t timed;
        drk_json_u64(j, "gpu_ns", drk_report_kernel_gpu_ns(e->name, &timed));
        drk_json_u64(j, "gpu_launches", timed);
        drk_report_facts(j, recs + e->first, e->count, e->launches, &totals);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_report_facts_totals(j, &totals);
    drk_json_close(j, '}');
    free(recs);
    free(entries);
}

static void write_memory(drk_json *j)
{
    drk_json_open(j, "memory", '{');
    for (int k = 0; k < DRK_ALLOC_KINDS; k++) {
        drk_alloc_counts totals = drk_alloc_counts_of((drk_alloc_kind)k);
        const drk_alloc_counts *c = &totals;
        drk_json_open(j, drk_alloc_kind_name[k], '{');
        drk_json_u64(j, "allocs", c->allocs);
        drk_json_u64(j, "failed", c->failed);
        drk_json_u64(j, "bytes", c->bytes);
        drk_json_u64(j, "frees", c->frees);
        drk_json_u64(j, "failed_frees", c->free_failed);
        drk_json_open(j, "sizes", '{');
        for (int b = 0; b < DRK_SIZE_BUCKETS; b++) {
            uint64_t v = c->by_size[b];
            char key[8];
            snprintf(key, sizeof key, b ? "2^%d" : "0", b);
            if (v)
                drk_json_u64(j, key, v);
        }
        drk_json_close(j, '}');
        drk_json_close(j, '}');
    }
    drk_json_close(j, '}');
}

/* Where this process's report goes: DRK_REPORT with %p replaced, or a file
 * named for the program and pid inside a directory. */
static int report_path(char *out, size_t outlen)
{
    const char *opt = drk_opt_str(DRK_OPT_REPORT);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    size_t len = strlen(opt);
    struct stat st;
    if ((len && opt[len - 1] == '/') || (stat(opt, &st) == 0 && S_ISDIR(st.st_mode))) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", opt);
        for (char *p = dir + 1; *p; p++) /* mkdir -p */
            if (*p == '/') {
                *p = '\0';
                (void)mkdir(dir, 0755);
                *p = '/';
            }
        (void)mkdir(dir, 0755);
        int n = snprintf(out, outlen, "%s%sdrk-%s-%s.json", opt, opt[len - 1] == '/' ? "" : "/",
                         program_invocation_short_name, pid);
        return n > 0 && (size_t)n < outlen ? 0 : -1;
    }
    size_t o = 0;
    for (const char *p = opt; *p; p++) {
        const char *piece = p;
        size_t plen = 1;
        if (p[0] == '%' && p[1] == 'p') {
            piece = pid;
            plen = strlen(pid);
            p++;
        }
        if (o + plen >= outlen)
            return -1;
        memcpy(out + o, piece, plen);
        o += plen;
    }
    out[o] = '\0';
    return 0;
}

static int write_file(const char *path, const char *data, size_t len)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    int err = done == len ? 0 : errno ? errno : EIO;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        errno = err;
        return -1;
    }
    return 0;
}

void drk_report_at_exit(void)
{
    if (atomic_exchange(&written, 1) || drk_current_mode() == DRK_MODE_OFF)
        return;
    uint64_t launches = drk_registry_launches(), allocs = 0;
    for (int k = 0; k < DRK_ALLOC_KINDS; k++)
        allocs += drk_alloc_counts_of((drk_alloc_kind)k).allocs;
    if (!*drk_opt_str(DRK_OPT_REPORT)) {
        drk_log(DRK_LOG_INFO, "%llu launches of %zu kernel handles, %llu allocations; set DRK_REPORT for a report",
                (unsigned long long)launches, drk_registry_size(), (unsigned long long)allocs);
        return;
    }
    char path[PATH_MAX];
    if (report_path(path, sizeof path) != 0) {
        drk_log(DRK_LOG_WARN, "DRK_REPORT=%s gives too long a path; no report written", drk_opt_str(DRK_OPT_REPORT));
        return;
    }
    drk_json j = {0};
    drk_json_open(&j, NULL, '{');
    drk_json_str(&j, "schema", "drk-report");
    drk_json_i64(&j, "version", DRK_REPORT_SCHEMA_VERSION);
    drk_json_str(&j, "drk_version", DRK_VERSION);
    write_process(&j);
    write_driver(&j);
    write_options(&j);
    write_calls(&j);
    write_kernels(&j);
    write_memory(&j);
    drk_report_device_pool(&j);
    drk_report_host_pool(&j);
    drk_report_gpu_time(&j);
    drk_report_rounds(&j);
    drk_report_findings(&j);
    drk_report_evolve(&j);
    drk_json_close(&j, '}');
    if (j.failed)
        drk_log(DRK_LOG_WARN, "out of memory building the report; no report written");
    else if (write_file(path, j.buf, j.len) != 0)
        drk_log(DRK_LOG_WARN, "cannot write the report to %s: %s", path, strerror(errno));
    else
        drk_log(DRK_LOG_INFO, "%llu launches, %llu allocations; report written to %s",
                (unsigned long long)launches, (unsigned long long)allocs, path);
    drk_json_free(&j);
}
