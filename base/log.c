#define _GNU_SOURCE
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
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
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(atomic_load_explicit(&log_fd, memory_order_relaxed), line, (size_t)n);
}
