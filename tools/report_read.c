/* Reading one report: the file, its JSON, and the fields `drk report` uses,
 * each checked for its documented type so a damaged report is refused with
 * the place that is wrong rather than printed as wrong numbers. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/report.h"

typedef struct ctx {
    const char *file;
    char *why;
    size_t whylen;
    int failed;
} ctx;

static int bad(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(ctx *c, const char *fmt, ...)
{
    if (!c->failed) {
        c->failed = 1;
        int n = snprintf(c->why, c->whylen, "%s: ", c->file);
        if (n < 0 || (size_t)n >= c->whylen)
            n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why + n, c->whylen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int read_all(const char *path, char **out, size_t *out_len, ctx *c)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bad(c, "cannot open: %s", strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            close(fd);
            return bad(c, "out of memory");
        }
        if (len == cap) {
            char *n = realloc(buf, cap * 2);
            if (!n) {
                free(buf);
                buf = NULL;
                continue;
            }
            buf = n, cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return bad(c, "cannot read: %s", strerror(e));
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    *out = buf;
    *out_len = len;
    return 0;
}

/* `where` + "." + `key`, for messages; the top level has no prefix. */
static const char *join(char *buf, size_t n, const char *where, const char *key)
{
    snprintf(buf, n, "%s%s%s", where, *where ? "." : "", key);
    return buf;
}

static const json_value *field(ctx *c, const json_value *obj, const char *where, const char *key, json_type want)
{
    if (c->failed)
        return NULL;
    const json_value *v = json_get(obj, key);
    if (!v) {
        bad(c, "%s: missing \"%s\"", *where ? where : "top level", key);
        return NULL;
    }
    if (v->type != want) {
        char at[256];
        bad(c, "%s: expected %s %s, found %s", join(at, sizeof at, where, key),
            want == JSON_OBJECT || want == JSON_ARRAY ? "an" : "a", json_type_name(want), json_type_name(v->type));
        return NULL;
    }
    return v;
}

static int as_u64(ctx *c, const json_value *v, const char *at, uint64_t *out)
{
    if (v->type != JSON_NUMBER || !v->u.num.is_u64)
        return bad(c, "%s: expected a non-negative integer, found %s", at,
                   v->type == JSON_NUMBER ? "a fraction or negative number" : json_type_name(v->type));
    *out = v->u.num.u;
    return 0;
}

static int get_u64(ctx *c, const json_value *obj, const char *where, const char *key, uint64_t *out)
{
    if (c->failed)
        return -1;
    char at[256];
    const json_value *v = json_get(obj, key);
    if (!v)
        return bad(c, "%s: missing \"%s\"", *where ? where : "top level", key);
    return as_u64(c, v, join(at, sizeof at, where, key), out);
}

/* A key newer reports have: 0 when absent, checked when present. */
static int get_u64_optional(ctx *c, const json_value *obj, const char *where, const char *key, uint64_t *out)
{
    if (c->failed)
        return -1;
    char at[256];
    const json_value *v = json_get(obj, key);
    *out = 0;
    return v ? as_u64(c, v, join(at, sizeof at, where, key), out) : 0;
}

static int get_bool(ctx *c, const json_value *obj, const char *where, const char *key, int *out)
{
    if (c->failed)
        return -1;
    char at[256];
    const json_value *v = json_get(obj, key);
    if (!v)
        return bad(c, "%s: missing \"%s\"", *where ? where : "top level", key);
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return bad(c, "%s: expected true or false, found %s", join(at, sizeof at, where, key), json_type_name(v->type));
    *out = v->type == JSON_TRUE;
    return 0;
}

static const char *get_str(ctx *c, const json_value *obj, const char *where, const char *key)
{
    const json_value *v = field(c, obj, where, key, JSON_STRING);
    return v ? v->u.str.s : NULL;
}

/* A string, or NULL for a JSON null (a failure for any other type). */
static const char *get_str_or_null(ctx *c, const json_value *obj, const char *where, const char *key)
{
    const json_value *v = json_get(obj, key);
    if (v && v->type == JSON_NULL)
        return NULL;
    return get_str(c, obj, where, key);
}

static int read_dim3(ctx *c, const json_value *shape, const char *where, const char *key, uint64_t out[3])
{
    char at[256];
    const json_value *a = field(c, shape, where, key, JSON_ARRAY);
    if (!a)
        return -1;
    join(at, sizeof at, where, key);
    if (a->u.arr.count != 3)
        return bad(c, "%s: expected 3 numbers, found %zu", at, a->u.arr.count);
    for (int d = 0; d < 3; d++)
        if (as_u64(c, &a->u.arr.items[d], at, &out[d]) != 0)
            return -1;
    return 0;
}

/* A kernel-shape's geometry, as every table keys it: grid, block and
 * dynamic shared bytes. */
static void read_geometry(ctx *c, const json_value *r, const char *at, uint64_t grid[3], uint64_t block[3],
                          uint64_t *shared_bytes)
{
    read_dim3(c, r, at, "grid", grid);
    read_dim3(c, r, at, "block", block);
    get_u64(c, r, at, "shared_bytes", shared_bytes);
}

static int read_kernel(ctx *c, const json_value *k, const char *where, rep_kernel *out)
{
    if (k->type != JSON_OBJECT)
        return bad(c, "%s: expected an object, found %s", where, json_type_name(k->type));
    out->name = get_str(c, k, where, "name");
    get_u64(c, k, where, "handles", &out->handles);
    get_u64(c, k, where, "launches", &out->launches);
    get_u64(c, k, where, "other_shape_launches", &out->other_shape_launches);
    get_u64_optional(c, k, where, "gpu_ns", &out->gpu_ns);
    get_u64_optional(c, k, where, "gpu_launches", &out->gpu_launches);
    const json_value *shapes = field(c, k, where, "shapes", JSON_ARRAY);
    if (c->failed)
        return -1;
    out->shapes = calloc(shapes->u.arr.count + 1, sizeof *out->shapes);
    if (!out->shapes)
        return bad(c, "out of memory");
    for (size_t i = 0; i < shapes->u.arr.count; i++) {
        const json_value *s = &shapes->u.arr.items[i];
        rep_shape *o = &out->shapes[out->nshapes++];
        char at[256];
        snprintf(at, sizeof at, "%s.shapes[%zu]", where, i);
        if (s->type != JSON_OBJECT)
            return bad(c, "%s: expected an object, found %s", at, json_type_name(s->type));
        read_geometry(c, s, at, o->grid, o->block, &o->shared_bytes);
        get_u64(c, s, at, "launches", &o->launches);
        if (c->failed)
            return -1;
    }
    return 0;
}

/* kernels.facts, when the report has it. */
static void read_facts(ctx *c, const json_value *k, rep_facts *f)
{
    const json_value *o = k ? json_get(k, "facts") : NULL;
    if (!o || o->type != JSON_OBJECT)
        return;
    f->present = 1;
    get_u64(c, o, "kernels.facts", "launched_kernels", &f->launched);
    get_u64(c, o, "kernels.facts", "with_layout", &f->with_layout);
    get_u64(c, o, "kernels.facts", "layout_from_image", &f->from_image);
    get_u64(c, o, "kernels.facts", "layout_equal_to_driver", &f->equal);
    get_u64(c, o, "kernels.facts", "layout_differs_from_driver", &f->differs);
    get_u64(c, o, "kernels.facts", "with_ptx", &f->with_ptx);
    get_u64(c, o, "kernels.facts", "ptx_for_device", &f->ptx_for_device);
    const json_value *sm = json_get(o, "device_sm");
    if (sm && sm->type == JSON_NUMBER && sm->u.num.is_u64)
        f->device_sm = sm->u.num.u;
}

static int read_kernels(ctx *c, const json_value *doc, rep_totals *t)
{
    const json_value *k = field(c, doc, "", "kernels", JSON_OBJECT);
    read_facts(c, k, &t->facts);
    get_u64(c, k, "kernels", "launches", &t->launches);
    get_u64(c, k, "kernels", "failed_launches", &t->failed_launches);
    get_u64(c, k, "kernels", "untracked_launches", &t->untracked_launches);
    const json_value *list = field(c, k, "kernels", "list", JSON_ARRAY);
    if (c->failed)
        return -1;
    t->kernels = calloc(list->u.arr.count + 1, sizeof *t->kernels);
    if (!t->kernels)
        return bad(c, "out of memory");
    for (size_t i = 0; i < list->u.arr.count; i++) {
        char at[64];
        snprintf(at, sizeof at, "kernels.list[%zu]", i);
        if (read_kernel(c, &list->u.arr.items[i], at, &t->kernels[t->nkernels++]) != 0)
            return -1;
    }
    return 0;
}

static int read_calls(ctx *c, const json_value *doc, rep_totals *t)
{
    const json_value *calls = field(c, doc, "", "calls", JSON_OBJECT);
    if (!calls)
        return -1;
    size_t n = calls->u.obj.count;
    t->families = calloc(n + 1, sizeof *t->families);
    if (!t->families)
        return bad(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_member *m = &calls->u.obj.members[i];
        rep_family *f = &t->families[t->nfamilies++];
        char at[256];
        snprintf(at, sizeof at, "calls.%s", m->key);
        f->name = m->key;
        if (m->value.type != JSON_OBJECT)
            return bad(c, "%s: expected an object, found %s", at, json_type_name(m->value.type));
        get_u64(c, &m->value, at, "total", &f->total);
        const json_value *by = field(c, &m->value, at, "by_name", JSON_OBJECT);
        if (c->failed)
            return -1;
        f->names = calloc(by->u.obj.count + 1, sizeof *f->names);
        if (!f->names)
            return bad(c, "out of memory");
        char where[sizeof at + 16];
        snprintf(where, sizeof where, "%s.by_name", at);
        for (size_t j = 0; j < by->u.obj.count; j++) {
            rep_count *rc = &f->names[f->nnames++];
            rc->name = by->u.obj.members[j].key;
            if (get_u64(c, by, where, rc->name, &rc->calls) != 0)
                return -1;
        }
    }
    return 0;
}

static int read_memory(ctx *c, const json_value *doc, rep_totals *t)
{
    const json_value *mem = field(c, doc, "", "memory", JSON_OBJECT);
    if (!mem)
        return -1;
    t->memory = calloc(mem->u.obj.count + 1, sizeof *t->memory);
    if (!t->memory)
        return bad(c, "out of memory");
    for (size_t i = 0; i < mem->u.obj.count; i++) {
        const json_member *m = &mem->u.obj.members[i];
        rep_memkind *k = &t->memory[t->nmemory++];
        char at[256];
        snprintf(at, sizeof at, "memory.%s", m->key);
        k->name = m->key;
        if (m->value.type != JSON_OBJECT)
            return bad(c, "%s: expected an object, found %s", at, json_type_name(m->value.type));
        get_u64(c, &m->value, at, "allocs", &k->allocs);
        get_u64(c, &m->value, at, "failed", &k->failed);
        get_u64(c, &m->value, at, "bytes", &k->bytes);
        get_u64(c, &m->value, at, "frees", &k->frees);
        get_u64(c, &m->value, at, "failed_frees", &k->failed_frees);
    }
    return c->failed ? -1 : 0;
}

/* An optional top-level object: NULL when absent (reports of an older drk),
 * a failure when present with another type. */
static const json_value *optional_object(ctx *c, const json_value *doc, const char *key)
{
    const json_value *v = json_get(doc, key);
    if (!v || c->failed)
        return NULL;
    if (v->type != JSON_OBJECT) {
        bad(c, "%s: expected an object, found %s", key, json_type_name(v->type));
        return NULL;
    }
    return v;
}

/* A latency histogram: bucket floors in ns (powers of two) -> samples. */
static void read_histogram(ctx *c, const json_value *lat, const char *key, uint64_t *buckets)
{
    char at[64];
    const json_value *h = field(c, lat, "device_pool.latency_ns", key, JSON_OBJECT);
    if (!h)
        return;
    join(at, sizeof at, "device_pool.latency_ns", key);
    for (size_t i = 0; i < h->u.obj.count && !c->failed; i++) {
        const char *floor = h->u.obj.members[i].key;
        char *end;
        errno = 0;
        unsigned long long f = strtoull(floor, &end, 10);
        if (!*floor || *end || errno || floor[0] == '-' || !f || (f & (f - 1))) {
            bad(c, "%s: bucket \"%s\" is not a power of two of nanoseconds", at, floor);
            return;
        }
        char where[96];
        uint64_t count = 0;
        if (as_u64(c, &h->u.obj.members[i].value, join(where, sizeof where, at, floor), &count) != 0)
            return;
        uint64_t *b = &buckets[__builtin_ctzll(f)];
        *b = count > UINT64_MAX - *b ? UINT64_MAX : *b + count; /* a repeated floor adds up */
    }
}

static int read_device_pool(ctx *c, const json_value *doc, rep_dpool *d)
{
    const char *at = "device_pool";
    const json_value *o = optional_object(c, doc, at);
    if (!o)
        return c->failed ? -1 : 0;
    d->present = 1;
    get_u64(c, o, at, "allocs", &d->allocs);
    get_u64(c, o, at, "frees", &d->frees);
    get_u64(c, o, at, "failed_allocs", &d->failed_allocs);
    get_u64(c, o, at, "out_of_memory", &d->out_of_memory);
    get_u64(c, o, at, "bad_frees", &d->bad_frees);
    get_u64(c, o, at, "driver_allocs", &d->driver_allocs);
    get_u64(c, o, at, "peak_live_bytes", &d->peak_live_bytes);
    get_u64(c, o, at, "peak_reserved_bytes", &d->peak_reserved_bytes);
    get_u64(c, o, at, "pages_created", &d->pages_created);
    get_u64(c, o, at, "pages_moved", &d->pages_moved);
    get_u64(c, o, at, "pages_released", &d->pages_released);
    get_u64(c, o, at, "defrag_events", &d->defrag_events);
    get_u64_optional(c, o, at, "pages_made_ahead", &d->pages_made_ahead);
    get_u64_optional(c, o, at, "pages_taken_ahead", &d->pages_taken_ahead);
    get_u64_optional(c, o, at, "pages_created_in_calls", &d->pages_created_in_calls);
    get_u64_optional(c, o, at, "growth_waits", &d->growth_waits);
    get_u64_optional(c, o, at, "thread_shards", &d->thread_shards);
    get_u64_optional(c, o, at, "handles_created", &d->handles_created);
    get_u64_optional(c, o, at, "handles_moved", &d->handles_moved);
    const json_value *lat = field(c, o, at, "latency_ns", JSON_OBJECT);
    get_u64(c, lat, "device_pool.latency_ns", "samples", &d->latency_samples);
    read_histogram(c, lat, "alloc", d->alloc_ns);
    read_histogram(c, lat, "free", d->free_ns);
    d->processes = d->allocs > 0;
    return c->failed ? -1 : 0;
}

static int read_host_pool(ctx *c, const json_value *doc, rep_hpool *h)
{
    const char *at = "host_pool";
    const json_value *o = optional_object(c, doc, at);
    if (!o)
        return c->failed ? -1 : 0;
    h->present = 1;
    get_u64(c, o, at, "allocs", &h->allocs);
    get_u64(c, o, at, "frees", &h->frees);
    get_u64(c, o, at, "bad_frees", &h->bad_frees);
    get_u64(c, o, at, "peak_live_bytes", &h->peak_live_bytes);
    get_u64(c, o, at, "pinned_bytes", &h->pinned_bytes);
    get_u64(c, o, at, "chunks", &h->chunks);
    get_u64(c, o, at, "driver_fallbacks", &h->driver_fallbacks);
    get_u64(c, o, at, "driver_direct", &h->driver_direct);
    get_u64_optional(c, o, at, "reuse_waits", &h->reuse_waits);
    get_u64_optional(c, o, at, "reuse_wait_us", &h->reuse_wait_us);
    h->processes = h->allocs > 0;
    return c->failed ? -1 : 0;
}

static uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* An array member of `obj` whose items must be objects; NULL on failure. */
static const json_value *object_array(ctx *c, const json_value *obj, const char *where, const char *key)
{
    const json_value *a = field(c, obj, where, key, JSON_ARRAY);
    if (!a)
        return NULL;
    for (size_t i = 0; i < a->u.arr.count; i++)
        if (a->u.arr.items[i].type != JSON_OBJECT) {
            char at[256];
            bad(c, "%s[%zu]: expected an object, found %s", join(at, sizeof at, where, key), i,
                json_type_name(a->u.arr.items[i].type));
            return NULL;
        }
    return a;
}

/* A row of gpu_time.by_kernel (`with_max`) or of a round's top. */
static int read_time_row(ctx *c, const json_value *r, const char *at, int with_max, rep_time_row *o)
{
    o->name = get_str(c, r, at, "name");
    if (c->failed)
        return -1;
    read_geometry(c, r, at, o->grid, o->block, &o->shared_bytes);
    get_u64(c, r, at, "launches", &o->launches);
    get_u64(c, r, at, "total_ns", &o->total_ns);
    get_u64(c, r, at, "min_ns", &o->min_ns);
    get_u64(c, r, at, "median_ns", &o->median_ns);
    get_u64(c, r, at, "p95_ns", &o->p95_ns);
    if (with_max)
        get_u64(c, r, at, "max_ns", &o->max_ns);
    o->quantile_launches = o->launches;
    return c->failed ? -1 : 0;
}

/* Any number: counters' values and budget, a finding's value and
 * reference (shares or nanoseconds), written as %.6g. */
static void get_number(ctx *c, const json_value *obj, const char *where, const char *key, double *out)
{
    const json_value *v = field(c, obj, where, key, JSON_NUMBER);
    if (v)
        *out = v->u.num.d;
}

/* A number newer reports have: `absent` when they have not. */
static void get_number_optional(ctx *c, const json_value *obj, const char *where, const char *key, double *out,
                                double absent)
{
    *out = absent;
    if (json_get(obj, key))
        get_number(c, obj, where, key, out);
}

/* gpu_time.counters, when the report has it (an older drk's has not). */
static int read_counters(ctx *c, const json_value *gpu, rep_counters *k)
{
    const char *at = "gpu_time.counters";
    const json_value *o = json_get(gpu, "counters");
    if (!o)
        return 0;
    if (o->type != JSON_OBJECT)
        return bad(c, "%s: expected an object, found %s", at, json_type_name(o->type));
    int enabled = 0;
    k->present = 1;
    k->reports = 1;
    get_bool(c, o, at, "enabled", &enabled);
    k->processes = enabled;
    k->off_reason = get_str_or_null(c, o, at, "off_reason");
    k->asked = enabled || (k->off_reason && strcmp(k->off_reason, REP_COUNTERS_NOT_ASKED) != 0);
    get_u64(c, o, at, "samples", &k->samples);
    get_u64(c, o, at, "discarded", &k->discarded);
    get_u64(c, o, at, "cost_ns", &k->cost_ns);
    get_u64(c, o, at, "passes", &k->passes);
    get_number(c, o, at, "budget", &k->budget);
    const json_value *rows = object_array(c, o, at, "by_kernel");
    if (c->failed)
        return -1;
    k->rows = calloc(rows->u.arr.count + 1, sizeof *k->rows);
    if (!k->rows)
        return bad(c, "out of memory");
    for (size_t i = 0; i < rows->u.arr.count; i++) {
        const json_value *r = &rows->u.arr.items[i];
        rep_counter_row *x = &k->rows[k->nrows++];
        char where[64];
        snprintf(where, sizeof where, "%s.by_kernel[%zu]", at, i);
        x->name = get_str(c, r, where, "name");
        if (c->failed)
            return -1;
        read_geometry(c, r, where, x->grid, x->block, &x->shared_bytes);
        get_number(c, r, where, "dram_pct", &x->dram_pct);
        get_number(c, r, where, "occupancy_pct", &x->occupancy_pct);
        get_number(c, r, where, "ld_sectors_per_request", &x->ld_sectors_per_request);
        get_number(c, r, where, "st_sectors_per_request", &x->st_sectors_per_request);
        get_u64(c, r, where, "samples", &x->samples);
        get_u64(c, r, where, "round", &x->round);
        if (c->failed)
            return -1;
    }
    return 0;
}

static int read_gpu_time(ctx *c, const json_value *doc, rep_gpu *g)
{
    const char *at = "gpu_time";
    const json_value *o = optional_object(c, doc, at);
    if (!o)
        return c->failed ? -1 : 0;
    int enabled = 0;
    g->present = 1;
    g->reports = 1;
    get_bool(c, o, at, "enabled", &enabled);
    g->processes = enabled;
    g->off_reason = get_str_or_null(c, o, at, "off_reason");
    g->source = get_str_or_null(c, o, at, "source");
    g->stopped = get_str_or_null(c, o, at, "stopped");
    g->stopped_processes = g->stopped != NULL;
    get_u64(c, o, at, "kernels", &g->kernels);
    get_u64(c, o, at, "kernel_ns", &g->kernel_ns);
    get_u64(c, o, at, "copies", &g->copies);
    get_u64(c, o, at, "copy_ns", &g->copy_ns);
    get_u64(c, o, at, "copy_bytes", &g->copy_bytes);
    get_u64(c, o, at, "dropped", &g->dropped);
    get_u64(c, o, at, "untracked", &g->untracked);
    get_u64(c, o, at, "late", &g->late);
    g->has_excluded = json_get(o, "excluded") != NULL;
    get_u64_optional(c, o, at, "excluded", &g->excluded);
    g->has_unsampled = json_get(o, "unsampled_rounds") != NULL;
    get_u64_optional(c, o, at, "unsampled_rounds", &g->unsampled);
    g->has_drk = json_get(o, "drk_records") != NULL;
    get_u64_optional(c, o, at, "drk_records", &g->drk_records);
    get_u64_optional(c, o, at, "drk_ns", &g->drk_ns);
    const json_value *rows = object_array(c, o, at, "by_kernel");
    if (c->failed)
        return -1;
    g->rows = calloc(rows->u.arr.count + 1, sizeof *g->rows);
    if (!g->rows)
        return bad(c, "out of memory");
    for (size_t i = 0; i < rows->u.arr.count; i++) {
        char where[64];
        snprintf(where, sizeof where, "gpu_time.by_kernel[%zu]", i);
        if (read_time_row(c, &rows->u.arr.items[i], where, 1, &g->rows[g->nrows++]) != 0)
            return -1;
    }
    return read_counters(c, o, &g->counters);
}

/* evolve, when the report has it (an older drk's has not); `pid`: the
 * process's, for its rows. */
static int read_evolve(ctx *c, const json_value *doc, rep_evolve *e, uint64_t pid)
{
    const char *at = "evolve";
    const json_value *o = optional_object(c, doc, at);
    if (!o)
        return c->failed ? -1 : 0;
    int enabled = 0;
    e->present = 1;
    e->reports = 1;
    get_bool(c, o, at, "enabled", &enabled);
    e->processes = enabled;
    e->off_reason = get_str_or_null(c, o, at, "off_reason");
    e->asked = enabled || (e->off_reason && strcmp(e->off_reason, REP_EVOLVE_NOT_ASKED) != 0);
    get_number(c, o, at, "budget", &e->budget);
    get_u64(c, o, at, "rounds", &e->rounds);
    get_u64(c, o, at, "trial_ns", &e->trial_ns);
    get_u64_optional(c, o, at, "trial_bytes", &e->trial_bytes);
    get_u64(c, o, at, "program_kernel_ns", &e->program_kernel_ns);
    get_u64_optional(c, o, at, "own_context_mib", &e->own_context_mib);
    get_u64_optional(c, o, at, "gave_back_memory", &e->gave_back);
    get_u64_optional(c, o, at, "saved_ns", &e->saved_ns);
    get_number(c, o, at, "trial_share", &e->trial_share);
    get_number(c, o, at, "researched_share", &e->researched_share);
    get_u64(c, o, at, "kernels", &e->kernels);
    get_u64(c, o, at, "evolved", &e->evolved);
    get_u64(c, o, at, "refused", &e->refused);
    get_u64(c, o, at, "failed", &e->failed);
    const json_value *cap = field(c, o, at, "captures", JSON_OBJECT);
    get_u64(c, cap, "evolve.captures", "captured", &e->captured);
    get_u64(c, cap, "evolve.captures", "snapped", &e->snapped);
    get_u64(c, cap, "evolve.captures", "moved", &e->moved);
    get_u64(c, cap, "evolve.captures", "busy", &e->busy);
    get_u64(c, cap, "evolve.captures", "mismatched", &e->mismatched);
    const json_value *rows = object_array(c, o, at, "by_kernel");
    if (c->failed)
        return -1;
    e->rows = calloc(rows->u.arr.count + 1, sizeof *e->rows);
    if (!e->rows)
        return bad(c, "out of memory");
    for (size_t i = 0; i < rows->u.arr.count; i++) {
        const json_value *r = &rows->u.arr.items[i];
        rep_evolve_row *x = &e->rows[e->nrows++];
        char where[64];
        snprintf(where, sizeof where, "%s.by_kernel[%zu]", at, i);
        x->pid = pid;
        x->name = get_str(c, r, where, "name");
        if (c->failed)
            return -1;
        read_geometry(c, r, where, x->grid, x->block, &x->shared_bytes);
        x->state = get_str(c, r, where, "state");
        x->why = get_str_or_null(c, r, where, "why");
        get_u64(c, r, where, "captures", &x->captures);
        get_u64(c, r, where, "rounds", &x->rounds);
        get_u64(c, r, where, "tried", &x->tried);
        get_u64(c, r, where, "proven", &x->proven);
        get_u64(c, r, where, "rejected", &x->rejected);
        get_u64(c, r, where, "trusted", &x->trusted);
        get_u64_optional(c, r, where, "same_code", &x->same_code);
        get_u64_optional(c, r, where, "hops", &x->hops);
        x->serving = get_str(c, r, where, "serving");
        get_number(c, r, where, "speedup", &x->speedup);
        /* Older reports: their speedup was the replays'. */
        get_number_optional(c, r, where, "run_speedup", &x->run_speedup, 0);
        get_number_optional(c, r, where, "replay_speedup", &x->replay_speedup, x->speedup);
        get_u64(c, r, where, "builds", &x->builds);
        get_number(c, r, where, "build_ms", &x->build_ms);
        get_number(c, r, where, "build_ms_max", &x->build_ms_max);
        get_u64(c, r, where, "trial_ns", &x->trial_ns);
        get_u64_optional(c, r, where, "trial_bytes", &x->trial_bytes);
        get_u64_optional(c, r, where, "saved_ns", &x->saved_ns);
        get_u64(c, r, where, "snapshot_bytes", &x->snapshot_bytes);
        if (c->failed)
            return -1;
    }
    return 0;
}

static int read_round(ctx *c, const json_value *r, const char *at, rep_round *o)
{
    get_u64(c, r, at, "index", &o->index);
    o->ended_by = get_str(c, r, at, "ended_by");
    get_u64(c, r, at, "start_ns", &o->start_ns);
    get_u64(c, r, at, "end_ns", &o->end_ns);
    get_u64(c, r, at, "wall_ns", &o->wall_ns);
    get_u64(c, r, at, "busy_ns", &o->busy_ns);
    get_u64_optional(c, r, at, "drk_ns", &o->drk_ns);
    get_u64(c, r, at, "kernel_ns", &o->kernel_ns);
    get_u64(c, r, at, "copy_ns", &o->copy_ns);
    get_u64(c, r, at, "kernels", &o->kernels);
    get_u64(c, r, at, "copies", &o->copies);
    char where[96];
    snprintf(where, sizeof where, "%s.memory", at);
    const json_value *m = field(c, r, at, "memory", JSON_OBJECT);
    get_u64(c, m, where, "live_bytes", &o->live_bytes);
    get_u64(c, m, where, "reserved_bytes", &o->reserved_bytes);
    get_u64(c, m, where, "pages_moved", &o->pages_moved);
    get_u64(c, m, where, "out_of_memory", &o->out_of_memory);
    snprintf(where, sizeof where, "%s.other", at);
    const json_value *other = field(c, r, at, "other", JSON_OBJECT);
    get_u64(c, other, where, "kernels", &o->other_kernels);
    get_u64(c, other, where, "ns", &o->other_ns);

    const json_value *gaps = object_array(c, r, at, "gaps");
    const json_value *top = object_array(c, r, at, "top");
    if (c->failed)
        return -1;
    o->gaps = calloc(gaps->u.arr.count + 1, sizeof *o->gaps);
    o->top = calloc(top->u.arr.count + 1, sizeof *o->top);
    if (!o->gaps || !o->top)
        return bad(c, "out of memory");
    for (size_t i = 0; i < gaps->u.arr.count; i++) {
        const json_value *g = &gaps->u.arr.items[i];
        rep_gap *x = &o->gaps[o->ngaps++];
        snprintf(where, sizeof where, "%s.gaps[%zu]", at, i);
        get_u64(c, g, where, "ns", &x->ns);
        x->after = get_str_or_null(c, g, where, "after"); /* null: the round's edge */
        x->before = get_str_or_null(c, g, where, "before");
        get_u64_optional(c, g, where, "drk_ns", &x->drk_ns);
        if (c->failed)
            return -1;
    }
    for (size_t i = 0; i < top->u.arr.count; i++) {
        snprintf(where, sizeof where, "%s.top[%zu]", at, i);
        if (read_time_row(c, &top->u.arr.items[i], where, 0, &o->top[o->ntop++]) != 0)
            return -1;
    }
    return 0;
}

/* Also adds the rounds' wall and busy time into `g`, for the totals. */
static int read_rounds(ctx *c, const json_value *doc, rep_rounds *rs, rep_gpu *g)
{
    const char *at = "rounds";
    const json_value *o = optional_object(c, doc, at);
    if (!o)
        return c->failed ? -1 : 0;
    rs->present = 1;
    get_u64(c, o, at, "closed", &rs->closed);
    get_u64(c, o, at, "kept", &rs->kept);
    get_u64(c, o, at, "marked", &rs->marked);
    const json_value *m = field(c, o, at, "merged", JSON_OBJECT);
    get_u64(c, m, "rounds.merged", "rounds", &rs->merged_rounds);
    get_u64(c, m, "rounds.merged", "wall_ns", &rs->merged_wall_ns);
    get_u64(c, m, "rounds.merged", "busy_ns", &rs->merged_busy_ns);
    get_u64(c, m, "rounds.merged", "kernel_ns", &rs->merged_kernel_ns);
    get_u64(c, m, "rounds.merged", "copy_ns", &rs->merged_copy_ns);
    get_u64(c, m, "rounds.merged", "kernels", &rs->merged_kernels);
    get_u64(c, m, "rounds.merged", "copies", &rs->merged_copies);
    const json_value *list = object_array(c, o, at, "list");
    if (c->failed)
        return -1;
    rs->list = calloc(list->u.arr.count + 1, sizeof *rs->list);
    if (!rs->list)
        return bad(c, "out of memory");
    g->rounds = rs->merged_rounds;
    g->wall_ns = rs->merged_wall_ns;
    g->busy_ns = rs->merged_busy_ns;
    for (size_t i = 0; i < list->u.arr.count; i++) {
        char where[64];
        snprintf(where, sizeof where, "rounds.list[%zu]", i);
        rep_round *r = &rs->list[rs->nlist++];
        if (read_round(c, &list->u.arr.items[i], where, r) != 0)
            return -1;
        g->rounds = add(g->rounds, 1);
        g->wall_ns = add(g->wall_ns, r->wall_ns);
        g->busy_ns = add(g->busy_ns, r->busy_ns);
    }
    return 0;
}

static int read_finding(ctx *c, const json_value *f, const char *at, rep_finding *o)
{
    o->name = get_str(c, f, at, "name");
    get_u64(c, f, at, "first_round", &o->first_round);
    get_u64(c, f, at, "last_round", &o->last_round);
    get_u64(c, f, at, "rounds", &o->rounds);
    const json_value *k = json_get(f, "kernel");
    if (c->failed)
        return -1;
    if (!k)
        return bad(c, "%s: missing \"kernel\"", at);
    if (k->type != JSON_NULL) { /* null: the finding is about no kernel-shape */
        char where[96];
        snprintf(where, sizeof where, "%s.kernel", at);
        if (k->type != JSON_OBJECT)
            return bad(c, "%s: expected an object or null, found %s", where, json_type_name(k->type));
        o->kernel = get_str(c, k, where, "name");
        read_geometry(c, k, where, o->grid, o->block, &o->shared_bytes);
    }
    get_number(c, f, at, "value", &o->value);
    get_number(c, f, at, "reference", &o->reference);
    o->evidence = get_str(c, f, at, "evidence");
    return c->failed ? -1 : 0;
}

/* findings: optional (reports of an older drk), an array when present. */
static int read_findings(ctx *c, const json_value *doc, rep_findings *fs)
{
    if (!json_get(doc, "findings"))
        return 0;
    const json_value *list = object_array(c, doc, "", "findings");
    if (c->failed)
        return -1;
    fs->present = 1;
    fs->list = calloc(list->u.arr.count + 1, sizeof *fs->list);
    if (!fs->list)
        return bad(c, "out of memory");
    for (size_t i = 0; i < list->u.arr.count; i++) {
        char at[64];
        snprintf(at, sizeof at, "findings[%zu]", i);
        if (read_finding(c, &list->u.arr.items[i], at, &fs->list[fs->n++]) != 0)
            return -1;
    }
    return 0;
}

static int read_process(ctx *c, const json_value *doc, rep_process *p)
{
    const json_value *proc = field(c, doc, "", "process", JSON_OBJECT);
    get_u64(c, proc, "process", "pid", &p->pid);
    get_u64(c, proc, "process", "forked_from", &p->forked_from);
    p->program = get_str(c, proc, "process", "program");
    p->exe = get_str(c, proc, "process", "exe");
    get_u64(c, proc, "process", "start_unix_ns", &p->start_ns);
    get_u64(c, proc, "process", "end_unix_ns", &p->end_ns);
    p->drk_version = get_str(c, doc, "", "drk_version");

    const json_value *drv = field(c, doc, "", "driver", JSON_OBJECT);
    p->driver_library = get_str(c, drv, "driver", "library");
    p->driver_path = get_str_or_null(c, drv, "driver", "path");
    const json_value *ver = json_get(drv, "version");
    if (c->failed)
        return -1;
    if (!ver)
        return bad(c, "driver: missing \"version\"");
    if (ver->type != JSON_NULL) {
        uint64_t v = 0;
        if (as_u64(c, ver, "driver.version", &v) != 0)
            return -1;
        p->has_driver_version = 1;
        p->driver_version = (int64_t)v;
    }
    return 0;
}

int report_load(const char *path, rep_process *out, char *why, size_t whylen)
{
    ctx c = {path, why, whylen, 0};
    memset(out, 0, sizeof *out);
    out->path = strdup(path);
    if (!out->path)
        return bad(&c, "out of memory"), REPORT_ERROR;

    char *text = NULL;
    size_t len = 0;
    if (read_all(path, &text, &len, &c) != 0)
        return REPORT_ERROR;
    json_error err;
    int r = json_parse(text, len, &out->doc, &err);
    free(text);
    if (r != 0) {
        snprintf(why, whylen, "%s:%zu:%zu: malformed JSON: %s", path, err.line, err.column, err.msg);
        return REPORT_ERROR;
    }

    const json_value *doc = &out->doc;
    if (doc->type != JSON_OBJECT) {
        bad(&c, "not a drk report (the top level is %s, not an object)", json_type_name(doc->type));
        return REPORT_NOT_A_REPORT;
    }
    const json_value *schema = json_get(doc, "schema");
    if (!schema || schema->type != JSON_STRING || strcmp(schema->u.str.s, "drk-report") != 0) {
        if (schema && schema->type == JSON_STRING)
            bad(&c, "not a drk report (\"schema\" is \"%s\", not \"drk-report\")", schema->u.str.s);
        else
            bad(&c, "not a drk report (no \"schema\": \"drk-report\" at the top level)");
        return REPORT_NOT_A_REPORT;
    }

    const json_value *version = json_get(doc, "version");
    if (!version)
        return bad(&c, "missing \"version\"; this drk reads report version %d", REPORT_VERSION), REPORT_ERROR;
    if (version->type != JSON_NUMBER || !version->u.num.is_u64 || version->u.num.u == 0)
        return bad(&c, "\"version\" must be a positive integer; this drk reads report version %d", REPORT_VERSION),
               REPORT_ERROR;
    if (version->u.num.u > REPORT_VERSION)
        return bad(&c, "report version %llu is newer than this drk (" DRK_VERSION ") can read "
                       "(it reads version %d); use the drk that came with the library that wrote it",
                   (unsigned long long)version->u.num.u, REPORT_VERSION),
               REPORT_ERROR;
    if (version->u.num.u != REPORT_VERSION)
        return bad(&c, "unknown report version %llu; this drk reads version %d", (unsigned long long)version->u.num.u,
                   REPORT_VERSION),
               REPORT_ERROR;

    if (read_process(&c, doc, out) != 0 || read_kernels(&c, doc, &out->t) != 0 || read_calls(&c, doc, &out->t) != 0 ||
        read_memory(&c, doc, &out->t) != 0 || read_device_pool(&c, doc, &out->t.dpool) != 0 ||
        read_host_pool(&c, doc, &out->t.hpool) != 0 || read_gpu_time(&c, doc, &out->t.gpu) != 0 ||
        read_rounds(&c, doc, &out->rounds, &out->t.gpu) != 0 || read_findings(&c, doc, &out->findings) != 0 ||
        read_evolve(&c, doc, &out->t.evolve, out->pid) != 0)
        return REPORT_ERROR;
    return REPORT_OK;
}

void report_release(rep_process *p)
{
    for (size_t i = 0; i < p->rounds.nlist; i++) {
        free(p->rounds.list[i].gaps);
        free(p->rounds.list[i].top);
    }
    free(p->rounds.list);
    memset(&p->rounds, 0, sizeof p->rounds);
    free(p->findings.list);
    memset(&p->findings, 0, sizeof p->findings);
    totals_release(&p->t);
    json_free(&p->doc);
    free(p->path);
    p->path = NULL;
}
