#define _GNU_SOURCE
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/options.h"

atomic_int drk_log_level = DRK_LOG_WARN;
static atomic_int log_fd = 2;

void drk_log_set_fd(int fd) { atomic_store(&log_fd, fd); }

void drk_log_write(int level, const char *fmt, ...)
{
    /* One write(2) per line, built on the stack: no allocation, no stdio
     * lock, and lines from many threads and processes do not interleave. */
    char line[1024];
    int n = snprintf(line, sizeof line, "drk[%d:%ld] %s: ", (int)getpid(), (long)syscall(SYS_gettid),
                     drk_level_name(level));
    if (level == DRK_LOG_DEBUG) {
        /* Debug lines carry the monotonic clock, to line them up with a
         * program's own timings (CLOCK_MONOTONIC, seconds). */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        n += snprintf(line + n, sizeof line - (size_t)n, "[%lld.%06ld] ", (long long)ts.tv_sec, ts.tv_nsec / 1000);
    }
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(atomic_load_explicit(&log_fd, memory_order_relaxed), line, (size_t)n);
}
