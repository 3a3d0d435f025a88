/* Allocation traces: the text format of docs/alloc-trace.md, a strict
 * streaming reader and a writer that formats into the caller's buffer.
 *
 *     # drk-alloc-trace 1
 *     # page_size 2097152
 *     1200 a 1 4096 -          cuMemAlloc: id 1, 4096 bytes
 *     1900 A 2 65536 3         cuMemAllocAsync on stream 3
 *     2500 F 2 3               cuMemFreeAsync on stream 3
 *     3100 f 1 -               cuMemFree
 *
 * The writer never allocates, so the library's recorder can format ops into
 * a per-thread buffer on the allocation path; the reader is for tools. */
#ifndef DRK_ALLOC_TRACE_H
#define DRK_ALLOC_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DRK_TRACE_MAGIC "# drk-alloc-trace"
#define DRK_TRACE_VERSION 1

/* The op letters, as written. */
typedef enum drk_trace_kind {
    DRK_TRACE_ALLOC = 'a',       /* cuMemAlloc: no stream */
    DRK_TRACE_ALLOC_ASYNC = 'A', /* cuMemAllocAsync on a stream */
    DRK_TRACE_FREE = 'f',        /* cuMemFree: no stream */
    DRK_TRACE_FREE_ASYNC = 'F',  /* cuMemFreeAsync on a stream */
} drk_trace_kind;

/* Streams are small integers (0: the legacy default stream); "-" reads as
 * DRK_TRACE_NO_STREAM. Larger numbers are refused so that per-stream state
 * can live in arrays. */
#define DRK_TRACE_MAX_STREAM 65535u
#define DRK_TRACE_NO_STREAM UINT32_MAX

typedef struct drk_trace_op {
    uint64_t t_ns;   /* nanoseconds since the start */
    uint64_t id;     /* allocation number, unique while live */
    uint64_t size;   /* allocs: the request; frees: the freed allocation's size (filled by the reader) */
    uint32_t stream; /* DRK_TRACE_NO_STREAM for 'a' and 'f' */
    char kind;       /* a drk_trace_kind */
    /* Reader only: a dense number for the allocation, unique while it is
     * live and reused after its free (< the most allocations live at once),
     * so consumers can keep per-allocation state in arrays. */
    size_t slot;
} drk_trace_op;

static inline int drk_trace_is_alloc(char kind) { return kind == DRK_TRACE_ALLOC || kind == DRK_TRACE_ALLOC_ASYNC; }

/* The `# key value` lines drk knows; 0 or "" when absent. */
#define DRK_TRACE_TEXT_MAX 256
typedef struct drk_trace_header {
    uint64_t page_size;                    /* the recording pool's page size */
    uint64_t device_bytes;                 /* the device's memory */
    char program[DRK_TRACE_TEXT_MAX];      /* what was traced */
    char recorded_by[DRK_TRACE_TEXT_MAX];  /* what wrote the trace */
} drk_trace_header;

/* ------------------------------------------------------------- writer */

/* Enough for any op line: 20 + 1 + 1 + 1 + 20 + 1 + 20 + 1 + 10 + 1 digits
 * and separators, and a NUL. */
#define DRK_TRACE_LINE_MAX 80

/* Formats `op` as one line, '\n' included, into buf (DRK_TRACE_LINE_MAX
 * bytes); returns its length, without the NUL it also writes. No stdio, no
 * allocation. A free's size is not written. */
size_t drk_trace_format_op(char *buf, const drk_trace_op *op);

/* The header line and a line per set field of `h` (h may be NULL), into buf
 * of `len` bytes. Returns the length written (without the NUL), or the length
 * needed when it does not fit (as snprintf: nothing usable is written then).
 * Control characters in text fields are written as '?', so a field stays on
 * its line. */
size_t drk_trace_format_header(char *buf, size_t len, const drk_trace_header *h);

/* Conveniences over a FILE: 0, or -1 when the write failed. */
int drk_trace_write_header(FILE *f, const drk_trace_header *h);
int drk_trace_write_op(FILE *f, const drk_trace_op *op);

/* ------------------------------------------------------------- reader */

typedef struct drk_trace_live drk_trace_live; /* id -> (size, slot) */

typedef struct drk_trace_reader {
    FILE *f;
    drk_trace_header header;
    uint64_t line;       /* the line last read (1-based) */
    uint64_t ops;        /* ops read so far */
    uint64_t live;       /* allocations live now */
    uint64_t max_live;   /* the most live at once: slots are below this */
    uint64_t last_t;
    int ops_started;
    char error[256];     /* "line N: ..." once an error was returned */
    /* internal */
    drk_trace_live *map;
    size_t *free_slots, nfree_slots, cap_free_slots;
    char *buf;
    size_t buf_len, buf_pos;
    const char *pending; /* the first op line, read by drk_trace_open */
    size_t pending_len;
    int eof;
} drk_trace_reader;

/* Starts reading `f` (not closed by the reader): reads the header line and
 * the comment lines that follow it, so r->header is filled on return. 0, or
 * -1 with r->error set (then call drk_trace_close all the same). */
int drk_trace_open(drk_trace_reader *r, FILE *f);
/* The next op: 1 and *op filled, 0 at the end of the trace, -1 on an error
 * (r->error names the line). After -1 every call returns -1. */
int drk_trace_next(drk_trace_reader *r, drk_trace_op *op);
void drk_trace_close(drk_trace_reader *r);

#endif
