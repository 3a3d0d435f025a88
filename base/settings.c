/* Loading the DRK_* options, once per process. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/once.h"
#include "base/options.h"

static drk_option_value values[DRK_OPT_COUNT];
static const char *const env_names[DRK_ENV_COUNT] = {[DRK_ENV_CUDA_INJECTION] = "CUDA_INJECTION64_PATH",
                                                      [DRK_ENV_NVTX_INJECTION] = "NVTX_INJECTION64_PATH",
                                                      [DRK_ENV_XDG_CACHE_HOME] = "XDG_CACHE_HOME",
                                                      [DRK_ENV_HOME] = "HOME"};
static char env_values[DRK_ENV_COUNT][DRK_OPTION_PATH_MAX];
static drk_once loaded;

struct pending_warning {
    drk_option_id id;
    char why[96];
    char given[128];
};

static void settings_read(void)
{
    struct pending_warning warn[DRK_OPT_COUNT];
    int nwarn = 0;
    char why[96];
    for (int i = 0; i < DRK_OPT_COUNT; i++) {
        const drk_option_desc *d = &drk_option_table[i];
        (void)drk_option_parse((drk_option_id)i, d->fallback, &values[i], why, sizeof why);
        const char *text = getenv(d->name);
        if (!text || !*text)
            continue;
        if (drk_option_parse((drk_option_id)i, text, &values[i], why, sizeof why) != 0) {
            struct pending_warning *w = &warn[nwarn++];
            w->id = (drk_option_id)i;
            memcpy(w->why, why, sizeof w->why);
            strncpy(w->given, text, sizeof w->given - 1);
            w->given[sizeof w->given - 1] = '\0';
        }
    }
    for (int i = 0; i < DRK_ENV_COUNT; i++) {
        const char *v = getenv(env_names[i]);
        snprintf(env_values[i], sizeof env_values[i], "%s", v ? v : "");
    }
    /* Under DRK_DISABLE drk stays silent and touches no file. */
    if (values[DRK_OPT_DISABLE].num)
        return;
    atomic_store(&drk_log_level, (int)values[DRK_OPT_LOG_LEVEL].num);
    const char *log_file = values[DRK_OPT_LOG_FILE].text;
    if (*log_file) {
        int fd = open(log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            drk_log_set_fd(fd);
        else
            drk_log(DRK_LOG_WARN, "cannot open DRK_LOG_FILE=%s; logging to standard error", log_file);
    }
    for (int i = 0; i < nwarn; i++)
        drk_log(DRK_LOG_WARN, "%s=%s is %s; using %s", drk_option_table[warn[i].id].name,
                warn[i].given, warn[i].why, values[warn[i].id].text);
}

static void settings_load(void)
{
    if (drk_once_begin(&loaded)) {
        settings_read();
        drk_once_end(&loaded);
    }
}

void drk_base_after_fork_child(void) { drk_once_after_fork_child(&loaded); }

long drk_opt_num(drk_option_id id)
{
    settings_load();
    return values[id].num;
}

const char *drk_env(drk_env_id id)
{
    settings_load();
    return env_values[id];
}

const char *drk_opt_str(drk_option_id id)
{
    settings_load();
    return values[id].text;
}
