#include "base/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

const drk_option_desc drk_option_table[DRK_OPT_COUNT] = {
    [DRK_OPT_DISABLE] = {"DRK_DISABLE", DRK_OPTION_BOOL, "0",
                         "hand every call straight to the driver; drk does nothing else"},
    [DRK_OPT_OBSERVE] = {"DRK_OBSERVE", DRK_OPTION_BOOL, "1",
                         "count calls, kernels and allocations for the report (0: hooks only forward)"},
    [DRK_OPT_REPORT] = {"DRK_REPORT", DRK_OPTION_PATH, "",
                        "write a JSON report at exit: a file (%p becomes the pid), or a directory "
                        "(existing, or ending in /) that gets one file per process; empty or 0: none"},
    [DRK_OPT_LOG_LEVEL] = {"DRK_LOG_LEVEL", DRK_OPTION_LEVEL, "warn",
                           "least severe log lines written: error, warn, info or debug"},
    [DRK_OPT_LOG_FILE] = {"DRK_LOG_FILE", DRK_OPTION_PATH, "",
                          "append log lines to this file instead of standard error (empty or 0: standard error)"},
    [DRK_OPT_CUDA_LIBRARY] = {"DRK_CUDA_LIBRARY", DRK_OPTION_PATH, "libcuda.so.1",
                              "the CUDA driver library drk forwards to (one it cannot open: warn, use the default)"},
    [DRK_OPT_IMAGES] = {"DRK_IMAGES", DRK_OPTION_BOOL, "1",
                        "read the device images a program loads, to know each kernel's parameters, resources "
                        "and PTX (0: kernels are known from the driver's answers only)"},
    [DRK_OPT_ALLOC_TRACE] = {"DRK_ALLOC_TRACE", DRK_OPTION_PATH, "",
                             "record every device allocation and free, written at exit as an allocation trace "
                             "to this file (%p becomes the pid) for `drk trace replay`; empty or 0: none"},
    [DRK_OPT_ALLOC] = {"DRK_ALLOC", DRK_OPTION_BOOL, "1",
                       "serve cuMemAlloc, cuMemAllocAsync, cuMemAllocPitch and their frees from drk's paged, "
                       "stream-ordered device pool (0: the driver allocates)"},
    [DRK_OPT_ALLOC_SYNC_FREE] = {"DRK_ALLOC_SYNC_FREE", DRK_OPTION_BOOL, "0",
                                 "cuMemFree and cuMemFreeHost of pool memory wait for the device first, as the "
                                 "driver's may (for programs that rely on that synchronization)"},
    [DRK_OPT_STREAM_RESERVE] = {"DRK_STREAM_RESERVE", DRK_OPTION_AMOUNT, "5%",
                                "free device memory the pool keeps mapped for reuse before it stitches pages "
                                "instead (bytes, or a share of device memory); all streams share it"},
    [DRK_OPT_DEFRAG] = {"DRK_DEFRAG", DRK_OPTION_BOOL, "1",
                        "when no free range fits, map free pages into a new range rather than create pages or "
                        "fail; compact at quiet moments past DRK_DEFRAG_THRESHOLD (0: never move a page)"},
    [DRK_OPT_DEFRAG_THRESHOLD] = {"DRK_DEFRAG_THRESHOLD", DRK_OPTION_PERCENT, "10%",
                                  "share of the pool's pages idle (mapped under no live block) past which a "
                                  "quiet moment releases the excess"},
    [DRK_OPT_ALLOC_THREAD_SHARDS] = {"DRK_ALLOC_THREAD_SHARDS", DRK_OPTION_BOOL, "1",
                                     "a thread whose cuMemAlloc calls keep finding another thread in the pool's "
                                     "shared shard gets a shard of its own, so threads allocating at once scale "
                                     "(0: every thread shares one)"},
    [DRK_OPT_ALLOC_GROW] = {"DRK_ALLOC_GROW", DRK_OPTION_BOOL, "0",
                            "a thread of drk's creates and maps device pages ahead of a growing program's "
                            "allocations, within the reserve, so they find pages ready (0: each allocation "
                            "makes the pages it needs; off: on the H200 it gained nothing measurable)"},
    [DRK_OPT_ALLOC_RUN_PAGES] = {"DRK_ALLOC_RUN_PAGES", DRK_OPTION_COUNT, "64",
                                 "the most device pages one driver handle of the pool covers: pages are made, "
                                 "mapped, moved and given back in runs of up to this many, one driver call each "
                                 "(1: a handle a page, as before runs)"},
    [DRK_OPT_HOST_ALLOC] = {"DRK_HOST_ALLOC", DRK_OPTION_BOOL, "1",
                            "serve cuMemHostAlloc and cuMemAllocHost from drk's pinned host pool (0: the driver "
                            "pins every allocation)"},
    [DRK_OPT_PROFILE] = {"DRK_PROFILE", DRK_OPTION_PROFILE, "0",
                         "1: time every kernel, copy and set on the GPU with CUPTI's activity records, per kernel, "
                         "launch shape and round, for the report; counters: also DRAM throughput, achieved "
                         "occupancy and sectors per request of the hottest kernels, one sampled launch at a time "
                         "(off by default: it costs small trainers several percent, README says how much)"},
    [DRK_OPT_CUPTI_LIBRARY] = {"DRK_CUPTI_LIBRARY", DRK_OPTION_PATH, "",
                               "the libcupti.so.13 to time with, tried after a copy the program already loaded "
                               "(empty: the CUDA toolkit's, then the nvidia-cuda-cupti wheel's, then the loader's)"},
    [DRK_OPT_ROUND_SECONDS] = {"DRK_ROUND_SECONDS", DRK_OPTION_SECONDS, "10s",
                               "with DRK_PROFILE, end a round every this long while the program marks none "
                               "(cuProfilerStop marks one); 0: only the program's marks"},
    [DRK_OPT_ROUND] = {"DRK_ROUND", DRK_OPTION_PATH, "round",
                       "with DRK_PROFILE, the NVTX range or mark whose end ends a round (an fnmatch pattern, e.g. "
                       "'step*'; NVTX reaches drk through NVTX_INJECTION64_PATH, which drk run sets)"},
    [DRK_OPT_COUNTERS_BUDGET] = {"DRK_COUNTERS_BUDGET", DRK_OPTION_PERCENT, "5%",
                                 "with DRK_PROFILE=counters, the share of wall time sampled launches may take, "
                                 "none banked (each is replayed once per counter pass, 0.2-0.5 s on an H200, "
                                 "inside the program's call; 0% samples none)"},
    [DRK_OPT_CACHE_DIR] = {"DRK_CACHE_DIR", DRK_OPTION_PATH, "",
                           "where evolved kernels (cubins) and search results are kept between runs, shared "
                           "safely by concurrent processes (empty: $XDG_CACHE_HOME/drk, else ~/.cache/drk)"},
    [DRK_OPT_CACHE_SIZE] = {"DRK_CACHE_SIZE", DRK_OPTION_AMOUNT, "1G",
                            "the cache's cap: past it the least recently used entries go (bytes, or a share "
                            "of the file system holding it); 0: no cache, every run searches afresh"},
    [DRK_OPT_EVOLVE] = {"DRK_EVOLVE", DRK_OPTION_BOOL, "1",
                        "evolve the hottest kernels: variants of their PTX built, proven bit for bit equal on "
                        "replays of real launches, timed, and served only when faster. GPU times are taken "
                        "only once the program has launched a kernel drk could evolve, and only while CUPTI "
                        "attached costs its launch calls at most a quarter of DRK_EVOLVE_BUDGET of its run time "
                        "(a launch-bound program is left without); kernel records are kept within the same "
                        "quarter; drk's device memory for trials is given back if the program runs out. 0: off, "
                        "the A/B"},
    [DRK_OPT_EVOLVE_BUDGET] = {"DRK_EVOLVE_BUDGET", DRK_OPTION_PERCENT, "2%",
                               "with DRK_EVOLVE, the GPU time trials may take, as a share of the program's "
                               "kernel time"},
    [DRK_OPT_EVOLVE_COPY_MAX] = {"DRK_EVOLVE_COPY_MAX", DRK_OPTION_AMOUNT, "256M",
                                 "with DRK_EVOLVE, the memory one launch reaches that drk will copy for its "
                                 "trials (three copies are made); a kernel reaching more is not evolved"},
    [DRK_OPT_EVOLVE_ONLY] = {"DRK_EVOLVE_ONLY", DRK_OPTION_PATH, "",
                             "with DRK_EVOLVE, evolve only kernels whose (mangled) name matches one of these "
                             "comma-separated fnmatch patterns (empty: all)"},
    [DRK_OPT_EVOLVE_SKIP] = {"DRK_EVOLVE_SKIP", DRK_OPTION_PATH, "",
                             "with DRK_EVOLVE, never evolve kernels whose name matches one of these patterns"},
    [DRK_OPT_EVOLVE_TURN] = {"DRK_EVOLVE_TURN", DRK_OPTION_COUNT, "10",
                             "with DRK_EVOLVE, the search rounds a kernel takes in a row while a hot kernel "
                             "that never had a turn waits; its search goes on once each has had one"},
    [DRK_OPT_EVOLVE_COMPILE_THREADS] = {"DRK_EVOLVE_COMPILE_THREADS", DRK_OPTION_COUNT, "4",
                                        "with DRK_EVOLVE, how many of a batch's variants nvJitLink compiles at once, "
                                        "on threads drk starts for the batch (1: one after another, on drk's thread)"},
    [DRK_OPT_EVOLVE_SPANS] = {"DRK_EVOLVE_SPANS", DRK_OPTION_BOOL, "1",
                              "with DRK_EVOLVE, each replay of a trial is prepared by restoring only the "
                              "allocations it may have changed from drk's snapshot (every variant's run is "
                              "compared anyway); 0: the whole snapshot copied before every replay, the A/B"},
    [DRK_OPT_EVOLVE_PLANT] = {"DRK_EVOLVE_PLANT", DRK_OPTION_PATH, "",
                              "testing only: builds of the variant named so (e.g. 'regs=32') get their PTX's "
                              "float arithmetic rounded toward zero, wrong code the proof must reject"},
    [DRK_OPT_NVJITLINK] = {"DRK_NVJITLINK", DRK_OPTION_PATH, "",
                           "with DRK_EVOLVE, the libnvJitLink.so.13 that compiles variants, tried after a copy "
                           "the program already loaded (empty: the CUDA toolkit's, then the nvidia-nvjitlink "
                           "wheel's, then the loader's; without one no PTX is rebuilt)"},
};

static const char *const level_names[] = {
    [DRK_LOG_ERROR] = "error", [DRK_LOG_WARN] = "warn", [DRK_LOG_INFO] = "info", [DRK_LOG_DEBUG] = "debug"};

const char *drk_level_name(long level)
{
    return level >= DRK_LOG_ERROR && level <= DRK_LOG_DEBUG ? level_names[level] : "?";
}

static int parse_bool(const char *t, long *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(t, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(t, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_level(const char *t, long *out)
{
    for (long l = DRK_LOG_ERROR; l <= DRK_LOG_DEBUG; l++)
        if (strcasecmp(t, level_names[l]) == 0)
            return *out = l, 0;
    /* A digit 0-3 is accepted too (error..debug), as other shims use. */
    if (t[0] >= '0' && t[0] <= '3' && t[1] == '\0')
        return *out = t[0] - '0', 0;
    return -1;
}

/* A byte count with an optional K/M/G/T suffix, or a share "N%" with up
 * to two decimals, kept as basis points. */
static int parse_amount(const char *t, long *out, int share_only)
{
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (end == t || errno || !(v >= 0))
        return -1;
    if (*end == '%' && end[1] == '\0') {
        if (v > 100)
            return -1;
        return *out = -(long)(v * 100 + 0.5), 0;
    }
    if (share_only) {
        if (*end || v > 100)
            return -1;
        return *out = -(long)(v * 100 + 0.5), 0;
    }
    double unit = 1;
    switch (*end) {
    case 'T': case 't': unit *= 1024; /* fallthrough */
    case 'G': case 'g': unit *= 1024; /* fallthrough */
    case 'M': case 'm': unit *= 1024; /* fallthrough */
    case 'K': case 'k': unit *= 1024; end++; break;
    default: break;
    }
    if (unit > 1 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'B' || end[1] == 'b'))
        end += 2; /* KiB, MiB ... */
    else if (unit > 1 && (*end == 'B' || *end == 'b'))
        end++;
    if (*end || v * unit > 9.2e18)
        return -1;
    return *out = (long)(v * unit), 0;
}

size_t drk_option_amount(long num, size_t whole)
{
    if (num >= 0)
        return (size_t)num;
    return (size_t)((double)whole * (double)-num / 10000.0);
}

/* A duration in milliseconds: a number of seconds (decimals allowed), or
 * with a unit, s, ms or min. */
static int parse_seconds(const char *t, long *out)
{
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (end == t || errno || !(v >= 0))
        return -1;
    double ms = v * 1000;
    if (strcmp(end, "ms") == 0)
        ms = v;
    else if (strcmp(end, "min") == 0)
        ms = v * 60000;
    else if (*end && strcmp(end, "s") != 0)
        return -1;
    if (ms > 1e12)
        return -1;
    *out = (long)(ms + 0.5);
    return 0;
}

int drk_option_parse(drk_option_id id, const char *text, drk_option_value *out, char *why,
                     size_t whylen)
{
    const drk_option_desc *d = &drk_option_table[id];
    long num = 0;
    switch (d->type) {
    case DRK_OPTION_BOOL:
        if (parse_bool(text, &num) != 0) {
            snprintf(why, whylen, "not a boolean (1/0, true/false, yes/no, on/off)");
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%ld", num);
        break;
    case DRK_OPTION_PROFILE:
        if (strcasecmp(text, "counters") == 0) {
            num = DRK_PROFILE_COUNTERS;
            snprintf(out->text, sizeof out->text, "counters");
            break;
        }
        if (parse_bool(text, &num) != 0) {
            snprintf(why, whylen, "not 0, 1 (or another boolean word) or counters");
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%ld", num);
        break;
    case DRK_OPTION_LEVEL:
        if (parse_level(text, &num) != 0) {
            snprintf(why, whylen, "not a log level (error, warn, info, debug)");
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%s", level_names[num]);
        break;
    case DRK_OPTION_PATH:
        /* A file drk writes: 0 turns it off, as it turns off every switch, rather than
         * writing a file named 0 into the program's directory. */
        if ((id == DRK_OPT_REPORT || id == DRK_OPT_LOG_FILE || id == DRK_OPT_ALLOC_TRACE) &&
            strcmp(text, "0") == 0)
            text = "";
        if (strlen(text) >= sizeof out->text) {
            snprintf(why, whylen, "longer than %d bytes", DRK_OPTION_PATH_MAX - 1);
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%s", text);
        break;
    case DRK_OPTION_AMOUNT:
        if (parse_amount(text, &num, 0) != 0) {
            snprintf(why, whylen, "not an amount (bytes with an optional K/M/G/T suffix, or a share like 5%%)");
            return -1;
        }
        if (num < 0)
            snprintf(out->text, sizeof out->text, "%g%%", (double)-num / 100);
        else
            snprintf(out->text, sizeof out->text, "%ld", num);
        break;
    case DRK_OPTION_SECONDS:
        if (parse_seconds(text, &num) != 0) {
            snprintf(why, whylen, "not a duration (seconds, or with a unit: 10s, 500ms, 5min)");
            return -1;
        }
        if (num % 1000 == 0)
            snprintf(out->text, sizeof out->text, "%lds", num / 1000);
        else
            snprintf(out->text, sizeof out->text, "%ldms", num);
        break;
    case DRK_OPTION_COUNT: {
        char *end;
        errno = 0;
        num = strtol(text, &end, 10);
        if (end == text || *end || errno || num < 1 || num > 1000000) {
            snprintf(why, whylen, "not a whole number from 1 to 1000000");
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%ld", num);
        break;
    }
    case DRK_OPTION_PERCENT:
        if (parse_amount(text, &num, 1) != 0) {
            snprintf(why, whylen, "not a percentage from 0 to 100");
            return -1;
        }
        num = -num;
        snprintf(out->text, sizeof out->text, "%g%%", (double)num / 100);
        break;
    }
    out->num = num;
    return 0;
}


int drk_option_find(const char *name)
{
    for (int i = 0; i < DRK_OPT_COUNT; i++) {
        const char *full = drk_option_table[i].name;
        if (strcmp(name, full) == 0 || strcmp(name, full + 4) == 0)
            return i;
    }
    return -1;
}
