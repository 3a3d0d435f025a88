/* Allocation accounting by kind: counts, bytes, failures and a log2 size
 * histogram. Frees are counted under the kind whose call frees: cuMemFree
 * frees device and pitch blocks, cuMemFreeAsync async and pool blocks. */
#ifndef DRK_ALLOC_STATS_H
#define DRK_ALLOC_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum drk_alloc_kind {
    DRK_ALLOC_DEVICE, /* cuMemAlloc */
    DRK_ALLOC_PITCH,  /* cuMemAllocPitch */
    DRK_ALLOC_ASYNC,  /* cuMemAllocAsync */
    DRK_ALLOC_POOL,   /* cuMemAllocFromPoolAsync */
    DRK_ALLOC_HOST,   /* cuMemHostAlloc, cuMemAllocHost */
    DRK_ALLOC_KINDS
} drk_alloc_kind;

#define DRK_SIZE_BUCKETS 64 /* bucket b: sizes in [2^(b-1), 2^b), b=0 for 0 */

/* Kept per thread (base/counter.h), so threads allocating at once share no
 * cache line; the report sums them. */
typedef struct drk_alloc_counts {
    uint64_t allocs, failed, bytes, frees, free_failed;
    uint64_t by_size[DRK_SIZE_BUCKETS];
} drk_alloc_counts;

extern const char *const drk_alloc_kind_name[DRK_ALLOC_KINDS];

void drk_alloc_note(drk_alloc_kind kind, size_t bytes, int ok);
void drk_free_note(drk_alloc_kind kind, int ok);
/* The counts of `kind`, summed over threads. */
drk_alloc_counts drk_alloc_counts_of(drk_alloc_kind kind);
void drk_alloc_stats_reset(void);

#endif
