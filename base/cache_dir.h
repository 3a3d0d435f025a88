/* What the store (base/cache.c) asks of the directory walks
 * (base/cache_dir.c), beside the public list, prune and clear. */
#ifndef DRK_BASE_CACHE_DIR_H
#define DRK_BASE_CACHE_DIR_H

#include <stdint.h>

#include "base/cache.h"

/* How long drk waits for another process's v1/lock, at most: puts run on
 * drk's own thread and counters are added at exit, and a holder that hangs
 * (stopped, on a stuck network file system) must not hang either. */
#define DRK_CACHE_LOCK_WAIT_MS 2000

/* An eviction pass over `vdir` (DIR/v1): when its entries total more than
 * `cap` bytes, the least recently used go, never `keep` (the entry just
 * written), until they total `target` or less. One process at a time, by
 * v1/lock, waited for up to `wait_ms` milliseconds: 1 and no pass when
 * another process holds it that long. *total gets the entries' total
 * after the pass. 0, 1, or -1 when the directory cannot be read. */
int drk_cache_evict_pass(const char *vdir, uint64_t cap, uint64_t target, const char *keep, int wait_ms,
                         uint64_t *total, drk_cache_removed *removed);

/* Adds `add` to the counters in vdir/stats, under v1/lock (waited for
 * DRK_CACHE_LOCK_WAIT_MS at most); quietly nothing when the directory
 * cannot be written or the lock is held that long. */
void drk_cache_shared_add(const char *vdir, const drk_cache_counters *add);

#endif
