/* The allocation trace format (docs/alloc-trace.md): writer and reader. */
#include "alloc/trace.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- writer */

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_stream(char *p, uint32_t stream)
{
    if (stream == DRK_TRACE_NO_STREAM) {
        *p++ = '-';
        return p;
    }
    return put_u64(p, stream);
}

size_t drk_trace_format_op(char *buf, const drk_trace_op *op)
{
    char *p = put_u64(buf, op->t_ns);
    *p++ = ' ';
    *p++ = op->kind;
    *p++ = ' ';
    p = put_u64(p, op->id);
    *p++ = ' ';
    if (drk_trace_is_alloc(op->kind)) {
        p = put_u64(p, op->size);
        *p++ = ' ';
    }
    /* 'a' and 'f' have no stream whatever op->stream says. */
    p = put_stream(p, op->kind == DRK_TRACE_ALLOC || op->kind == DRK_TRACE_FREE ? DRK_TRACE_NO_STREAM : op->stream);
    *p++ = '\n';
    *p = '\0';
    return (size_t)(p - buf);
}

/* Appends to buf while it fits; counts the length needed regardless. */
typedef struct appender {
    char *buf;
    size_t len, used;
} appender;

static void app_bytes(appender *a, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, a->used++)
        if (a->used + 1 < a->len)
            a->buf[a->used] = s[i];
}

static void app_str(appender *a, const char *s) { app_bytes(a, s, strlen(s)); }

static void app_u64(appender *a, uint64_t v)
{
    char tmp[24];
    app_bytes(a, tmp, (size_t)(put_u64(tmp, v) - tmp));
}

static void app_text(appender *a, const char *s)
{
    for (; *s; s++) {
        char c = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
        app_bytes(a, &c, 1);
    }
}

size_t drk_trace_format_header(char *buf, size_t len, const drk_trace_header *h)
{
    appender a = {buf, len, 0};
    app_str(&a, DRK_TRACE_MAGIC " ");
    app_u64(&a, DRK_TRACE_VERSION);
    app_str(&a, "\n");
    if (h && h->page_size) {
        app_str(&a, "# page_size ");
        app_u64(&a, h->page_size);
        app_str(&a, "\n");
    }
    if (h && h->device_bytes) {
        app_str(&a, "# device_bytes ");
        app_u64(&a, h->device_bytes);
        app_str(&a, "\n");
    }
    if (h && h->program[0]) {
        app_str(&a, "# program ");
        app_text(&a, h->program);
        app_str(&a, "\n");
    }
    if (h && h->recorded_by[0]) {
        app_str(&a, "# recorded_by ");
        app_text(&a, h->recorded_by);
        app_str(&a, "\n");
    }
    if (len)
        buf[a.used < len ? a.used : len - 1] = '\0';
    return a.used;
}

int drk_trace_write_header(FILE *f, const drk_trace_header *h)
{
    char buf[4 * DRK_TRACE_TEXT_MAX];
    size_t n = drk_trace_format_header(buf, sizeof buf, h);
    if (n >= sizeof buf)
        return -1; /* cannot happen: text fields are shorter than DRK_TRACE_TEXT_MAX */
    return fwrite(buf, 1, n, f) == n ? 0 : -1;
}

int drk_trace_write_op(FILE *f, const drk_trace_op *op)
{
    char buf[DRK_TRACE_LINE_MAX];
    size_t n = drk_trace_format_op(buf, op);
    return fwrite(buf, 1, n, f) == n ? 0 : -1;
}

/* ------------------------------------------------------------- reader */

/* Live allocations: open addressing, linear probing, deletion by backward
 * shift (no tombstones, so probes stay short under endless alloc/free). */
typedef struct live_entry {
    uint64_t id, size;
    size_t slot;
    int used;
} live_entry;

struct drk_trace_live {
    live_entry *e;
    size_t cap, n; /* cap: a power of two */
};

static size_t hash_id(uint64_t id)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    return (size_t)id;
}

static live_entry *live_find(drk_trace_live *m, uint64_t id)
{
    for (size_t i = hash_id(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->e[i].used)
            return NULL;
        if (m->e[i].id == id)
            return &m->e[i];
    }
}

static int live_grow(drk_trace_live *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    live_entry *e = calloc(cap, sizeof *e);
    if (!e)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->e[i].used)
            continue;
        size_t j = hash_id(m->e[i].id) & (cap - 1);
        while (e[j].used)
            j = (j + 1) & (cap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e, m->cap = cap;
    return 0;
}

/* Inserts an id known to be absent. */
static int live_insert(drk_trace_live *m, uint64_t id, uint64_t size, size_t slot)
{
    if ((m->n + 1) * 2 > m->cap && live_grow(m) != 0)
        return -1;
    size_t i = hash_id(id) & (m->cap - 1);
    while (m->e[i].used)
        i = (i + 1) & (m->cap - 1);
    m->e[i] = (live_entry){id, size, slot, 1};
    m->n++;
    return 0;
}

static void live_remove(drk_trace_live *m, live_entry *victim)
{
    size_t mask = m->cap - 1, i = (size_t)(victim - m->e);
    /* Pull later entries of the probe run back over the hole when their
     * home position does not lie cyclically in (hole, j]. */
    for (size_t j = (i + 1) & mask; m->e[j].used; j = (j + 1) & mask) {
        size_t home = hash_id(m->e[j].id) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i].used = 0;
    m->n--;
}

#define READ_CHUNK (1u << 16)
#define LINE_MAX_BYTES 4096 /* longer lines are refused: no op line comes close */

static int fail(drk_trace_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(drk_trace_reader *r, const char *fmt, ...)
{
    int n = snprintf(r->error, sizeof r->error, "line %llu: ", (unsigned long long)r->line);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof r->error)
        vsnprintf(r->error + n, sizeof r->error - (size_t)n, fmt, ap);
    va_end(ap);
    r->eof = 2; /* sticky */
    return -1;
}

/* The next line, without its '\n', in place in r->buf: 1, 0 at the end, -1
 * on an error. The line stays valid until the next call. */
static int read_line(drk_trace_reader *r, const char **line, size_t *len)
{
    for (;;) {
        char *start = r->buf + r->buf_pos;
        size_t have = r->buf_len - r->buf_pos;
        char *nl = memchr(start, '\n', have);
        if (nl) {
            r->line++;
            *line = start, *len = (size_t)(nl - start);
            r->buf_pos += *len + 1;
            if (*len > LINE_MAX_BYTES)
                return fail(r, "line longer than %u bytes", LINE_MAX_BYTES);
            return 1;
        }
        if (have > LINE_MAX_BYTES) {
            r->line++;
            return fail(r, "line longer than %u bytes", LINE_MAX_BYTES);
        }
        if (r->eof) {
            if (!have)
                return 0;
            r->line++;
            return fail(r, "no newline at the end of the file: the trace is truncated");
        }
        memmove(r->buf, start, have);
        r->buf_pos = 0;
        size_t got = fread(r->buf + have, 1, READ_CHUNK, r->f);
        r->buf_len = have + got;
        if (got < READ_CHUNK) {
            if (ferror(r->f)) {
                r->line++;
                return fail(r, "read error");
            }
            r->eof = 1;
        }
    }
}

/* A cursor over one line. */
typedef struct cursor {
    const char *p, *end;
} cursor;

/* A decimal number without sign: 0, or -1 (no digits, or over 2^64-1). */
static int take_u64(cursor *c, uint64_t *v)
{
    if (c->p == c->end || *c->p < '0' || *c->p > '9')
        return -1;
    uint64_t x = 0;
    for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++) {
        unsigned d = (unsigned)(*c->p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

static int take_space(cursor *c)
{
    if (c->p == c->end || *c->p != ' ')
        return -1;
    c->p++;
    return 0;
}

static int take_stream(cursor *c, uint32_t *stream)
{
    uint64_t v;
    if (take_u64(c, &v) != 0 || v > DRK_TRACE_MAX_STREAM)
        return -1;
    *stream = (uint32_t)v;
    return 0;
}

/* A field for a message: the rest of the line, cut. */
static const char *shown(const char *s, size_t len, char *buf, size_t n)
{
    size_t k = len < n - 1 ? len : n - 1;
    for (size_t i = 0; i < k; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[k] = '\0';
    return buf;
}

static int parse_op(drk_trace_reader *r, const char *line, size_t len, drk_trace_op *op)
{
    cursor c = {line, line + len};
    char seen[48];
    memset(op, 0, sizeof *op);
    if (take_u64(&c, &op->t_ns) != 0)
        return fail(r, "expected a time in nanoseconds, found '%s'", shown(line, len, seen, 24));
    if (take_space(&c) != 0 || c.p == c.end)
        return fail(r, "expected ' ' and an op letter after the time");
    op->kind = *c.p++;
    if (op->kind != 'a' && op->kind != 'A' && op->kind != 'f' && op->kind != 'F')
        return fail(r, "unknown op '%c' (expected a, A, f or F)", (unsigned char)op->kind < 0x20 ? '?' : op->kind);
    if (take_space(&c) != 0 || take_u64(&c, &op->id) != 0)
        return fail(r, "op '%c': expected ' ' and an allocation id (a decimal number)", op->kind);
    if (take_space(&c) != 0)
        return fail(r, "op '%c': expected ' ' after the id", op->kind);
    if (drk_trace_is_alloc(op->kind)) {
        if (take_u64(&c, &op->size) != 0)
            return fail(r, "op '%c': expected a size in bytes", op->kind);
        if (op->size == 0)
            return fail(r, "op '%c': size 0 (the driver refuses it)", op->kind);
        if (take_space(&c) != 0)
            return fail(r, "op '%c': expected ' ' after the size", op->kind);
    }
    if (op->kind == 'a' || op->kind == 'f') {
        if (c.p == c.end || *c.p != '-')
            return fail(r, "op '%c': expected '-' for the stream (it has none)", op->kind);
        c.p++;
        op->stream = DRK_TRACE_NO_STREAM;
    } else if (take_stream(&c, &op->stream) != 0) {
        return fail(r, "op '%c': expected a stream number from 0 to %u", op->kind, DRK_TRACE_MAX_STREAM);
    }
    if (c.p != c.end)
        return fail(r, "op '%c': unexpected '%s' at the end of the line", op->kind,
                    shown(c.p, (size_t)(c.end - c.p), seen, sizeof seen));
    return 0;
}

/* `# key value` lines: known keys before the first op; any other comment is
 * skipped. */
static int comment_line(drk_trace_reader *r, const char *line, size_t len)
{
    static const char magic[] = DRK_TRACE_MAGIC " ";
    char seen[48];
    if (len >= sizeof magic - 1 && memcmp(line, magic, sizeof magic - 1) == 0)
        return fail(r, "a second header line: traces cannot be concatenated");
    static const struct {
        const char *key;
        int text;
        size_t offset;
    } keys[] = {
        {"page_size", 0, offsetof(drk_trace_header, page_size)},
        {"device_bytes", 0, offsetof(drk_trace_header, device_bytes)},
        {"program", 1, offsetof(drk_trace_header, program)},
        {"recorded_by", 1, offsetof(drk_trace_header, recorded_by)},
    };
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        size_t kl = strlen(keys[k].key);
        if (len < kl + 3 || memcmp(line, "# ", 2) != 0 || memcmp(line + 2, keys[k].key, kl) != 0 || line[2 + kl] != ' ')
            continue;
        if (r->ops_started)
            return fail(r, "'# %s' after the first op: header lines come first", keys[k].key);
        const char *v = line + kl + 3;
        size_t vl = len - kl - 3;
        char *field = (char *)&r->header + keys[k].offset;
        if (keys[k].text) {
            shown(v, vl, field, DRK_TRACE_TEXT_MAX);
        } else {
            cursor c = {v, v + vl};
            uint64_t x;
            if (take_u64(&c, &x) != 0 || c.p != c.end || x == 0)
                return fail(r, "%s: expected a positive number of bytes, found '%s'", keys[k].key,
                            shown(v, vl, seen, 24));
            memcpy(field, &x, sizeof x);
        }
        return 0;
    }
    return 0;
}

int drk_trace_open(drk_trace_reader *r, FILE *f)
{
    memset(r, 0, sizeof *r);
    r->f = f;
    r->buf = malloc(READ_CHUNK + LINE_MAX_BYTES + 1);
    r->map = calloc(1, sizeof *r->map);
    if (!r->buf || !r->map)
        return fail(r, "out of memory");
    const char *line;
    size_t len;
    int got = read_line(r, &line, &len);
    if (got < 0)
        return -1;
    static const char magic[] = DRK_TRACE_MAGIC;
    if (!got || len < sizeof magic || memcmp(line, magic, sizeof magic - 1) != 0 || line[sizeof magic - 1] != ' ') {
        r->line = 1;
        return fail(r, "not a drk allocation trace (the first line must be '%s %d')", magic, DRK_TRACE_VERSION);
    }
    cursor c = {line + sizeof magic, line + len};
    uint64_t version;
    char seen[48];
    if (take_u64(&c, &version) != 0 || c.p != c.end)
        return fail(r, "bad header line: '%s'", shown(line, len, seen, sizeof seen));
    if (version != DRK_TRACE_VERSION)
        return fail(r, "trace format version %llu; this drk reads version %d", (unsigned long long)version,
                    DRK_TRACE_VERSION);
    /* The `# key value` lines, up to the first op, which waits in place
     * (the buffer moves only when the next line is read). */
    while ((got = read_line(r, &line, &len)) > 0 && len && line[0] == '#')
        if (comment_line(r, line, len) != 0)
            return -1;
    if (got < 0)
        return -1;
    if (got > 0)
        r->pending = line, r->pending_len = len;
    return 0;
}

static int take_slot(drk_trace_reader *r, size_t *slot)
{
    if (r->nfree_slots) {
        *slot = r->free_slots[--r->nfree_slots];
        return 0;
    }
    *slot = (size_t)r->max_live;
    return 0;
}

static int give_slot(drk_trace_reader *r, size_t slot)
{
    if (r->nfree_slots == r->cap_free_slots) {
        size_t cap = r->cap_free_slots ? r->cap_free_slots * 2 : 256;
        size_t *n = realloc(r->free_slots, cap * sizeof *n);
        if (!n)
            return -1;
        r->free_slots = n, r->cap_free_slots = cap;
    }
    r->free_slots[r->nfree_slots++] = slot;
    return 0;
}

int drk_trace_next(drk_trace_reader *r, drk_trace_op *op)
{
    if (r->eof == 2)
        return -1;
    const char *line;
    size_t len;
    for (;;) {
        int got = 1;
        if (r->pending)
            line = r->pending, len = r->pending_len, r->pending = NULL;
        else
            got = read_line(r, &line, &len);
        if (got <= 0)
            return got;
        if (len && line[0] == '#') {
            if (comment_line(r, line, len) != 0)
                return -1;
            continue;
        }
        if (!len)
            return fail(r, "empty line");
        break;
    }
    if (parse_op(r, line, len, op) != 0)
        return -1;
    if (op->t_ns < r->last_t)
        return fail(r, "time %llu is before the previous op's %llu: ops must be in time order",
                    (unsigned long long)op->t_ns, (unsigned long long)r->last_t);
    live_entry *e = r->map->cap ? live_find(r->map, op->id) : NULL;
    if (drk_trace_is_alloc(op->kind)) {
        if (e)
            return fail(r, "id %llu is allocated again while live", (unsigned long long)op->id);
        if (take_slot(r, &op->slot) != 0 || live_insert(r->map, op->id, op->size, op->slot) != 0)
            return fail(r, "out of memory");
        r->live++;
        if (r->live > r->max_live)
            r->max_live = r->live;
    } else {
        if (!e)
            return fail(r, "op '%c': id %llu is not live (never allocated, or already freed)", op->kind,
                        (unsigned long long)op->id);
        op->size = e->size;
        op->slot = e->slot;
        if (give_slot(r, e->slot) != 0)
            return fail(r, "out of memory");
        live_remove(r->map, e);
        r->live--;
    }
    r->last_t = op->t_ns;
    r->ops_started = 1;
    r->ops++;
    return 1;
}

void drk_trace_close(drk_trace_reader *r)
{
    if (r->map)
        free(r->map->e);
    free(r->map);
    free(r->free_slots);
    free(r->buf);
    r->map = NULL, r->free_slots = NULL, r->buf = NULL;
}
