/* The allocation trace recorder (DRK_ALLOC_TRACE): every device allocation
 * and free the program makes, kept in memory as it happens and written as
 * an allocation trace (alloc/trace.h) at exit, for `drk trace replay`.
 * Recording costs one atomic add, one clock read and a 32-byte store, with
 * no lock and no heap allocation (records live in mmap'd chunks); when off,
 * one load.
 * Pointers become trace ids and streams small numbers only when written. */
#ifndef DRK_ALLOC_RECORDER_H
#define DRK_ALLOC_RECORDER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct drk_rec {
    uint64_t t_ns;
    uint64_t ptr;
    uint64_t size;   /* allocs; 0 for frees */
    uint32_t stream; /* index into the stream table, or UINT32_MAX for none */
    char kind;       /* a drk_trace_kind */
} drk_rec;

/* Records are kept in chunks of this many; at most this many chunks (64
 * million records, 2 GiB of address space, touched only as used). */
#define DRK_REC_CHUNK (1u << 20)
#define DRK_REC_CHUNKS 64u

extern atomic_int drk_recording;

/* Starts recording; the trace goes to `path` (%p: the pid) at exit. */
void drk_recorder_start(const char *path);

void drk_record_slow(char kind, uintptr_t ptr, size_t size, uintptr_t stream, int has_stream);

/* A successful device allocation or free. `stream` counts only for the
 * async kinds ('A', 'F'). */
static inline void drk_record(char kind, uintptr_t ptr, size_t size, uintptr_t stream, int has_stream)
{
    if (__builtin_expect(atomic_load_explicit(&drk_recording, memory_order_relaxed), 0))
        drk_record_slow(kind, ptr, size, stream, has_stream);
}

/* Writes the trace (at exit; a second call writes nothing). 0, or -1 with
 * errno set (logged by the caller). */
int drk_recorder_write(void);

/* In a forked child: it records its own trace from zero. */
void drk_recorder_after_fork_child(void);

#endif
