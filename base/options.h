/* DRK_* options: one table (name, type, default, one-line doc), read once
 * from the environment on first entry into drk. */
#ifndef DRK_BASE_OPTIONS_H
#define DRK_BASE_OPTIONS_H

#include <stddef.h>

typedef enum drk_option_id {
    DRK_OPT_DISABLE,
    DRK_OPT_OBSERVE,
    DRK_OPT_REPORT,
    DRK_OPT_LOG_LEVEL,
    DRK_OPT_LOG_FILE,
    DRK_OPT_CUDA_LIBRARY,
    DRK_OPT_IMAGES,
    DRK_OPT_ALLOC_TRACE,
    DRK_OPT_ALLOC,
    DRK_OPT_ALLOC_SYNC_FREE,
    DRK_OPT_STREAM_RESERVE,
    DRK_OPT_DEFRAG,
    DRK_OPT_DEFRAG_THRESHOLD,
    DRK_OPT_ALLOC_THREAD_SHARDS,
    DRK_OPT_ALLOC_GROW,
    DRK_OPT_ALLOC_RUN_PAGES,
    DRK_OPT_HOST_ALLOC,
    DRK_OPT_PROFILE,
    DRK_OPT_CUPTI_LIBRARY,
    DRK_OPT_ROUND_SECONDS,
    DRK_OPT_ROUND,
    DRK_OPT_COUNTERS_BUDGET,
    DRK_OPT_CACHE_DIR,
    DRK_OPT_CACHE_SIZE,
    DRK_OPT_EVOLVE,
    DRK_OPT_EVOLVE_BUDGET,
    DRK_OPT_EVOLVE_COPY_MAX,
    DRK_OPT_EVOLVE_ONLY,
    DRK_OPT_EVOLVE_SKIP,
    DRK_OPT_EVOLVE_TURN,
    DRK_OPT_EVOLVE_COMPILE_THREADS,
    DRK_OPT_EVOLVE_SPANS,
    DRK_OPT_EVOLVE_PLANT,
    DRK_OPT_NVJITLINK,
    DRK_OPT_COUNT
} drk_option_id;

typedef enum drk_option_type {
    DRK_OPTION_BOOL,  /* 1/0, true/false, yes/no, on/off */
    DRK_OPTION_LEVEL, /* error, warn, info, debug */
    DRK_OPTION_PATH,  /* any text; empty means unset */
    DRK_OPTION_AMOUNT, /* bytes (suffix K, M, G, T: powers of 1024) or N% of a whole */
    DRK_OPTION_PERCENT, /* N or N%, 0 to 100 */
    DRK_OPTION_SECONDS, /* a duration: N, N.N, with an optional s, ms or min; kept in milliseconds */
    DRK_OPTION_PROFILE, /* a boolean (0, 1: as BOOL), or counters (2) */
    DRK_OPTION_COUNT,   /* a whole number from 1 to 1000000 */
} drk_option_type;

/* DRK_PROFILE's values. */
enum { DRK_PROFILE_OFF, DRK_PROFILE_TIMES, DRK_PROFILE_COUNTERS };

typedef struct drk_option_desc {
    const char *name;   /* the environment variable */
    drk_option_type type;
    const char *fallback; /* the default, as text */
    const char *doc;
} drk_option_desc;

extern const drk_option_desc drk_option_table[DRK_OPT_COUNT];

/* The longest path an option keeps; longer values are refused. */
#define DRK_OPTION_PATH_MAX 4096

typedef struct drk_option_value {
    long num; /* BOOL and LEVEL; AMOUNT: bytes, or -(basis points) for a share; PERCENT: basis points;
               * SECONDS: milliseconds */
    char text[DRK_OPTION_PATH_MAX]; /* the value's canonical text */
} drk_option_value;

/* Parse `text` as option `id`. Returns 0 on success; otherwise writes a
 * reason into `why` and leaves `out` untouched. Pure: no logging, no state. */
int drk_option_parse(drk_option_id id, const char *text, drk_option_value *out, char *why,
                     size_t whylen);

/* The option named `name` (with or without the DRK_ prefix), or -1. */
int drk_option_find(const char *name);

const char *drk_level_name(long level);

/* An AMOUNT option's bytes, its share taken of `whole`. */
size_t drk_option_amount(long num, size_t whole);

/* The loaded values (base/settings.c); first use reads the environment.
 * Only shim/ and the drk command read them: shim/ hands every other part
 * its settings once, at configure. */
long drk_opt_num(drk_option_id id);
const char *drk_opt_str(drk_option_id id);
/* In a fork child: forget a read that a parent's thread had under way. */
void drk_base_after_fork_child(void);

/* Variables of other tools that drk must know of, read with the options:
 * the CUPTI tool injected into the process (nsys, ncu, compute-sanitizer
 * set it), the NVTX tool (drk run sets it to drk; nsys to itself), and
 * where the cache goes by default (XDG_CACHE_HOME, HOME: see
 * drk_cache_dir_choose in base/cache.h). Empty when unset. */
typedef enum drk_env_id {
    DRK_ENV_CUDA_INJECTION,
    DRK_ENV_NVTX_INJECTION,
    DRK_ENV_XDG_CACHE_HOME,
    DRK_ENV_HOME,
    DRK_ENV_COUNT
} drk_env_id;
const char *drk_env(drk_env_id id);

#endif
