/* Log lines: "drk[pid:tid] level: message", to standard error or
 * DRK_LOG_FILE. Deciding whether to log costs one cached integer; nothing on
 * a hot path logs. */
#ifndef DRK_BASE_LOG_H
#define DRK_BASE_LOG_H

#include <stdatomic.h>

enum { DRK_LOG_ERROR, DRK_LOG_WARN, DRK_LOG_INFO, DRK_LOG_DEBUG };

/* The current level; warn until the options are read. */
extern atomic_int drk_log_level;

void drk_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define drk_log(level, ...)                                                    \
    do {                                                                       \
        if ((level) <= atomic_load_explicit(&drk_log_level, memory_order_relaxed)) \
            drk_log_write((level), __VA_ARGS__);                               \
    } while (0)

/* Direct lines to `fd` (the settings open DRK_LOG_FILE). */
void drk_log_set_fd(int fd);

#endif
