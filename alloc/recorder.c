#define _GNU_SOURCE
#include "alloc/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "alloc/trace.h"
#include "base/clock.h"

atomic_int drk_recording;

static _Atomic(drk_rec *) chunks[DRK_REC_CHUNKS];
static atomic_size_t next_rec;
static atomic_size_t dropped;
static char out_path[4096];

/* Streams by first use: a small table searched linearly (programs use tens
 * of streams; JAX about 33), claimed with a compare-and-swap so that two
 * threads meeting a stream at once agree on its number. Index 0 is the
 * legacy default stream. */
#define STREAMS 1024
static _Atomic uintptr_t stream_of[STREAMS];

static uint32_t stream_index(uintptr_t s)
{
    if (s == 0 || s == (uintptr_t)0x1) /* NULL and CU_STREAM_LEGACY: the legacy stream */
        return 0;
    for (uint32_t i = 1; i < STREAMS; i++) {
        uintptr_t v = atomic_load_explicit(&stream_of[i], memory_order_acquire);
        if (v == 0 && atomic_compare_exchange_strong(&stream_of[i], &v, s))
            return i;
        if (v == s)
            return i;
    }
    return STREAMS - 1; /* beyond the table: merged into its last number */
}

static drk_rec *chunk(size_t c)
{
    drk_rec *p = atomic_load_explicit(&chunks[c], memory_order_acquire);
    if (p)
        return p;
    void *m = mmap(NULL, sizeof(drk_rec) * DRK_REC_CHUNK, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    drk_rec *none = NULL;
    if (!atomic_compare_exchange_strong(&chunks[c], &none, (drk_rec *)m)) {
        munmap(m, sizeof(drk_rec) * DRK_REC_CHUNK);
        return none;
    }
    return m;
}

void drk_record_slow(char kind, uintptr_t ptr, size_t size, uintptr_t stream, int has_stream)
{
    size_t i = atomic_fetch_add_explicit(&next_rec, 1, memory_order_relaxed);
    drk_rec *c = i / DRK_REC_CHUNK < DRK_REC_CHUNKS ? chunk(i / DRK_REC_CHUNK) : NULL;
    if (!c) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return;
    }
    c[i % DRK_REC_CHUNK] = (drk_rec){drk_mono_ns(), ptr, size, has_stream ? stream_index(stream) : UINT32_MAX, kind};
}

void drk_recorder_start(const char *path)
{
    snprintf(out_path, sizeof out_path, "%s", path);
    atomic_store(&drk_recording, 1);
}

void drk_recorder_after_fork_child(void)
{
    atomic_store(&next_rec, 0);
    atomic_store(&dropped, 0);
}

/* ---- Writing ---- */

static int by_time(const void *a, const void *b)
{
    const drk_rec *x = a, *y = b;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

/* Live pointers -> trace ids, open addressing (at exit: malloc is fine). */
typedef struct id_map {
    uint64_t *key, *val;
    size_t cap, n;
} id_map;

static size_t slot_of(const id_map *m, uint64_t k)
{
    size_t i = (size_t)((k >> 8) * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_put(id_map *m, uint64_t k, uint64_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        id_map g = {calloc(m->cap * 2, 8), calloc(m->cap * 2, 8), m->cap * 2, 0};
        if (!g.key || !g.val)
            return free(g.key), free(g.val), -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i] && m->key[i] != UINT64_MAX) {
                size_t j = slot_of(&g, m->key[i]);
                g.key[j] = m->key[i], g.val[j] = m->val[i], g.n++;
            }
        free(m->key), free(m->val);
        *m = g;
    }
    size_t i = slot_of(m, k);
    m->n += !m->key[i];
    m->key[i] = k, m->val[i] = v;
    return 0;
}

/* Removes k and returns its id, or 0 if it is not live. Deletion leaves the
 * key as a tombstone that lookups skip (UINT64_MAX is no device pointer). */
static uint64_t map_take(id_map *m, uint64_t k)
{
    size_t i = (size_t)((k >> 8) * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    for (; m->key[i]; i = (i + 1) & (m->cap - 1))
        if (m->key[i] == k) {
            m->key[i] = UINT64_MAX;
            return m->val[i];
        }
    return 0;
}

static void output_path(char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = out_path; *p && o + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(out + o, len - o, "%d", (int)getpid());
            p++;
            if (o >= len)
                o = len - 1;
            continue;
        }
        out[o++] = *p;
    }
    out[o] = '\0';
}

static int write_records(FILE *f, drk_rec *r, size_t n)
{
    qsort(r, n, sizeof *r, by_time);
    id_map m = {calloc(1024, 8), calloc(1024, 8), 1024, 0};
    if (!m.key || !m.val)
        return free(m.key), free(m.val), -1;
    uint64_t next_id = 1, t0 = n ? r[0].t_ns : 0, skipped = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        drk_trace_op op = {.t_ns = r[i].t_ns - t0, .size = r[i].size, .kind = r[i].kind,
                           .stream = r[i].stream == UINT32_MAX ? DRK_TRACE_NO_STREAM : r[i].stream};
        if (drk_trace_is_alloc(op.kind)) {
            op.id = next_id++;
            if (map_put(&m, r[i].ptr, op.id) != 0)
                rc = -1;
        } else if ((op.id = map_take(&m, r[i].ptr)) == 0) {
            skipped++; /* allocated before recording began, or not by a recorded call */
            continue;
        }
        if (rc == 0)
            rc = drk_trace_write_op(f, &op);
    }
    if (rc == 0 && (skipped || atomic_load(&dropped)))
        rc = fprintf(f, "# frees of unrecorded allocations skipped %llu; records dropped (memory) %zu\n",
                     (unsigned long long)skipped, atomic_load(&dropped)) < 0 ? -1 : 0;
    free(m.key), free(m.val);
    return rc;
}

int drk_recorder_write(void)
{
    if (!atomic_exchange(&drk_recording, 0))
        return 0;
    size_t n = atomic_load(&next_rec);
    if (n > (size_t)DRK_REC_CHUNK * DRK_REC_CHUNKS)
        n = (size_t)DRK_REC_CHUNK * DRK_REC_CHUNKS;
    drk_rec *all = malloc(sizeof *all * (n ? n : 1));
    if (!all)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        drk_rec *c = atomic_load(&chunks[i / DRK_REC_CHUNK]);
        if (c && c[i % DRK_REC_CHUNK].kind) /* a record still being written at exit is left out */
            all[k++] = c[i % DRK_REC_CHUNK];
    }
    char path[4096];
    output_path(path, sizeof path);
    FILE *f = fopen(path, "we");
    int rc = -1;
    if (f) {
        drk_trace_header h = {.page_size = 2u << 20};
        snprintf(h.program, sizeof h.program, "%s", program_invocation_short_name);
        snprintf(h.recorded_by, sizeof h.recorded_by, "drk %s", DRK_VERSION);
        rc = drk_trace_write_header(f, &h) == 0 && write_records(f, all, k) == 0 ? 0 : -1;
        int err = errno;
        if (fclose(f) != 0 && rc == 0)
            rc = -1;
        else
            errno = err;
    }
    free(all);
    return rc;
}
