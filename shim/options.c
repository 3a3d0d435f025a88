#include "options.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "log.h"

const drk_option_desc drk_option_table[DRK_OPT_COUNT] = {
    [DRK_OPT_DISABLE] = {"DRK_DISABLE", DRK_OPTION_BOOL, "0",
                         "hand every call straight to the driver; drk does nothing else"},
    [DRK_OPT_OBSERVE] = {"DRK_OBSERVE", DRK_OPTION_BOOL, "1",
                         "count calls, kernels and allocations for the report (0: hooks only forward)"},
    [DRK_OPT_REPORT] = {"DRK_REPORT", DRK_OPTION_PATH, "",
                        "write a JSON report at exit: a file (%p becomes the pid), or a directory "
                        "(existing, or ending in /) that gets one file per process"},
    [DRK_OPT_LOG_LEVEL] = {"DRK_LOG_LEVEL", DRK_OPTION_LEVEL, "warn",
                           "least severe log lines written: error, warn, info or debug"},
    [DRK_OPT_LOG_FILE] = {"DRK_LOG_FILE", DRK_OPTION_PATH, "",
                          "append log lines to this file instead of standard error"},
    [DRK_OPT_CUDA_LIBRARY] = {"DRK_CUDA_LIBRARY", DRK_OPTION_PATH, "libcuda.so.1",
                              "the CUDA driver library drk forwards to (one it cannot open: warn, use the default)"},
    [DRK_OPT_IMAGES] = {"DRK_IMAGES", DRK_OPTION_BOOL, "1",
                        "read the device images a program loads, to know each kernel's parameters, resources "
                        "and PTX (0: kernels are known from the driver's answers only)"},
    [DRK_OPT_ALLOC_TRACE] = {"DRK_ALLOC_TRACE", DRK_OPTION_PATH, "",
                             "record every device allocation and free, written at exit as an allocation trace "
                             "to this file (%p becomes the pid) for `drk trace replay`"},
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
    case DRK_OPTION_LEVEL:
        if (parse_level(text, &num) != 0) {
            snprintf(why, whylen, "not a log level (error, warn, info, debug)");
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%s", level_names[num]);
        break;
    case DRK_OPTION_PATH:
        if (strlen(text) >= sizeof out->text) {
            snprintf(why, whylen, "longer than %d bytes", DRK_OPTION_PATH_MAX - 1);
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%s", text);
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
