/* drk's cache on disk: compiled cubins and search results that a later run
 * reuses, so it launches the winners of an earlier run with no search.
 *
 * Content-addressed: an entry is named by a key (a SHA-256 over what the
 * compile depended on: PTX, JIT options, device, driver, this format) and a
 * kind ("cubin", "result", ...). Files live in DIR/v1/ab/<key hex>.<kind>;
 * each carries a header with its key, kind, length and a SHA-256 over all of
 * it, checked on every read. Writes go to a temporary file and are renamed
 * into place, so concurrent processes (torchrun ranks) never see a partial
 * entry; readers take no lock. Past the cap the least recently used entries
 * go. Every failure (no directory, read-only, full disk, a corrupt file)
 * makes a get a miss or a put a no-op, logged once per process: evolution
 * goes on without the cache. The format and the reasons: docs/cache.md.
 *
 * libc only, no CUDA types: the engine (evolve/) fills the key's parts from
 * the driver's answers, and the drk command (tools/) lists and prunes. */
#ifndef DRK_BASE_CACHE_H
#define DRK_BASE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/sha256.h"

/* The entry layout and the key recipe; the directory under DIR is "v1". A
 * change of either makes a new number (old entries are then simply not
 * found, and `drk cache clear` of the old drk removes them). */
#define DRK_CACHE_FORMAT 1
#define DRK_CACHE_KIND_MAX 15        /* kinds: 1 to 15 of [a-z0-9_] */
#define DRK_CACHE_META_MAX 4096      /* the meta area, its NUL included */
#define DRK_CACHE_ENTRY_MAX (1ull << 30) /* no entry file is larger */
#define DRK_CACHE_DEFAULT_SIZE "1G"  /* DRK_CACHE_SIZE's default */

/* ---------------------------------------------------------------- keys */

typedef struct drk_cache_key {
    unsigned char digest[DRK_SHA256_BYTES];
} drk_cache_key;

/* One JIT option as the driver takes it (CUjit_option and its value,
 * widened). */
typedef struct drk_cache_jit_option {
    int32_t id;
    int64_t value;
} drk_cache_jit_option;

/* What an entry's content depends on. Any part may be empty (NULL/0): a
 * search result is keyed without options, for instance. */
typedef struct drk_cache_key_parts {
    const void *ptx; /* the PTX text as loaded (its bytes, NUL or not) */
    size_t ptx_len;
    const drk_cache_jit_option *options; /* in the order given to the JIT */
    size_t noptions;
    const char *device_name;      /* cuDeviceGetName, e.g. "NVIDIA H200" */
    unsigned char device_uuid[16]; /* all zero: any device of this name and
                                    * capability (cubins are; pass the UUID
                                    * only for what one GPU alone may reuse) */
    int cc_major, cc_minor;       /* compute capability */
    int driver_version;           /* cuDriverGetVersion, e.g. 13000 */
    const void *extra;            /* the caller's own distinctions (the kernel and
                                   * shape class of a result, the engine's version) */
    size_t extra_len;
} drk_cache_key_parts;

void drk_cache_key_make(const drk_cache_key_parts *parts, drk_cache_key *out);
/* 64 lowercase hex digits and a NUL. */
void drk_cache_key_hex(const drk_cache_key *key, char out[2 * DRK_SHA256_BYTES + 1]);
/* 0 when `hex` is exactly 64 lowercase hex digits. */
int drk_cache_key_parse(const char *hex, drk_cache_key *out);
/* 1 when `kind` can name entries: 1 to DRK_CACHE_KIND_MAX of [a-z0-9_]. */
int drk_cache_kind_valid(const char *kind);

/* -------------------------------------------------------------- settings */

/* The cache directory: `setting` (DRK_CACHE_DIR) when not empty, else
 * $XDG_CACHE_HOME/drk (when absolute, as the XDG spec asks), else
 * $HOME/.cache/drk. Pure: the caller hands in the environment's values
 * (base/settings.c reads them). -1 when none can be named or it does not
 * fit in `n`. */
int drk_cache_dir_choose(const char *setting, const char *xdg_cache_home, const char *home, char *out, size_t n);

/* DRK_CACHE_SIZE's parsed value (drk_option_value.num: bytes, or a share)
 * in bytes; a share is of the file system that holds (or will hold) `dir`,
 * and 1 GiB when that cannot be asked. 0 means no cache. */
uint64_t drk_cache_cap_bytes(long size_option, const char *dir);

/* ------------------------------------------------------------- the store */

typedef struct drk_cache drk_cache;

/* drk_cache_open flags. SYNC: fdatasync each entry before its rename (not
 * the default: a crash's torn entry fails its checksum and is ignored,
 * and the sync costs milliseconds a put). */
enum { DRK_CACHE_SYNC = 1 };

/* Opens (creating when missing) the cache in `dir` with a cap of `cap`
 * bytes. 0 and a handle, also when the directory exists but cannot be
 * written (gets work, puts fail quietly); -1 and a reason in `why` when
 * there is no cache to use: cap 0, or a directory that neither exists nor
 * can be made. Logs nothing; the caller says once why it goes without. */
int drk_cache_open(drk_cache **out, const char *dir, uint64_t cap, unsigned flags, char *why, size_t whylen);
/* Adds this handle's counters to the directory's shared ones (v1/stats,
 * for `drk cache stats`) and frees it. NULL is fine. */
void drk_cache_close(drk_cache *c);
const char *drk_cache_root(const drk_cache *c);

/* A hit: one allocation holding the whole entry; data and meta point in. */
typedef struct drk_cache_blob {
    const unsigned char *data; /* the payload, 16-byte aligned */
    size_t len;
    const char *meta;          /* the put's meta text ("" when none) */
    int64_t created_ns;        /* when it was written, ns since the epoch */
    void *mem;
} drk_cache_blob;

/* 0 and the entry in `out` on a hit; -1 on a miss: absent, unreadable, or
 * invalid (truncated, corrupt, another key's or kind's), which is removed
 * and logged once per process. A hit marks the entry used (its mtime) the
 * first time this handle reads it. Thread-safe; takes no lock. */
int drk_cache_get(drk_cache *c, const drk_cache_key *key, const char *kind, drk_cache_blob *out);
void drk_cache_blob_free(drk_cache_blob *b);

/* Stores `len` bytes as (key, kind), replacing what was there, with a
 * free-form `meta` text (the kernel's name; NULL for none; cut to fit
 * DRK_CACHE_META_MAX). 0 when stored; -1 when not (read-only, full, over
 * the file-size limit, larger than the cap), logged once per process.
 * May evict least recently used entries to keep the directory under the
 * cap. Thread-safe. */
int drk_cache_put(drk_cache *c, const drk_cache_key *key, const char *kind, const void *data, size_t len,
                  const char *meta);

typedef struct drk_cache_counters {
    uint64_t hits, misses;  /* misses: absent (invalid ones are counted apart) */
    uint64_t invalid;       /* present but rejected: also a miss to the caller */
    uint64_t puts, put_failures;
    uint64_t evicted, evicted_bytes;
} drk_cache_counters;

/* This handle's counters since it was opened. */
void drk_cache_counters_get(drk_cache *c, drk_cache_counters *out);

/* ------------------------------------- the directory: drk cache commands */

/* One entry file as the directory shows it (no file read). */
typedef struct drk_cache_file {
    char name[96];     /* "ab/<key hex>.<kind>", under DIR/v1 */
    char kind[DRK_CACHE_KIND_MAX + 1];
    drk_cache_key key;
    uint64_t bytes;    /* the file's size */
    int64_t used_ns;   /* last use (its mtime), ns since the epoch */
} drk_cache_file;

typedef struct drk_cache_listing {
    drk_cache_file *files; /* least recently used first */
    size_t n;
    uint64_t bytes;        /* of the entries */
    size_t temps;          /* temporary files: writes under way, or of a crashed writer */
    uint64_t temp_bytes;
    size_t foreign;        /* files that are not drk's, which drk never removes */
    int exists;            /* DIR/v1 exists */
} drk_cache_listing;

/* Lists DIR's entries. 0 (a missing directory lists empty), or -1 and
 * `why` when it cannot be read. */
int drk_cache_list(const char *dir, drk_cache_listing *out, char *why, size_t whylen);
void drk_cache_listing_free(drk_cache_listing *l);

/* An entry's header, read from its file. */
typedef struct drk_cache_info {
    char kind[DRK_CACHE_KIND_MAX + 1];
    drk_cache_key key;
    uint64_t payload;
    int64_t created_ns;
    char meta[DRK_CACHE_META_MAX];
} drk_cache_info;

/* Reads entry `name` (a drk_cache_file's) of DIR. `verify`: read all of it
 * and check everything a get checks; else the header's own fields only. 0,
 * or -1 and what is wrong in `why`. */
int drk_cache_read_info(const char *dir, const char *name, int verify, drk_cache_info *out, char *why,
                        size_t whylen);

typedef struct drk_cache_removed {
    size_t files;
    uint64_t bytes;
    size_t left;  /* clear: files not drk's, left in place */
} drk_cache_removed;

/* Removes least recently used entries until DIR's entries total at most
 * `target` bytes, and temporary files a crashed writer left (over an hour
 * old). 0, or -1 and `why`. */
int drk_cache_prune(const char *dir, uint64_t target, drk_cache_removed *out, char *why, size_t whylen);
/* Removes every entry, temporary file and drk file of DIR/v1, and the
 * directories left empty; never a file drk did not name (counted in
 * out->left). DIR itself stays. 0, or -1 and `why`. */
int drk_cache_clear(const char *dir, drk_cache_removed *out, char *why, size_t whylen);
/* The counters processes added at close (v1/stats); zeros when none. */
void drk_cache_shared_counters(const char *dir, drk_cache_counters *out);

#endif
