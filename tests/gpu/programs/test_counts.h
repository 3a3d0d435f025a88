/* For the suite's programs (C and CUDA C++): each writes its own counts as
 * one JSON line to the file named by $DRK_TEST_COUNTS, for
 * tests/gpu/check.py to compare with what drk counted. */
#ifndef DRK_TESTS_TEST_COUNTS_H
#define DRK_TESTS_TEST_COUNTS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Writes the formatted text to $DRK_TEST_COUNTS (replacing the file) when it
 * is set and not empty. Returns 0 on success or when it is unset; 1, after
 * perror(path), when the file cannot be opened or closed. */
__attribute__((format(printf, 1, 2))) static inline int write_test_counts(const char *fmt, ...)
{
    const char *path = getenv("DRK_TEST_COUNTS");
    if (!path || !*path)
        return 0;
    FILE *f = fopen(path, "w");
    if (!f)
        return perror(path), 1;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) != 0)
        return perror(path), 1;
    return 0;
}

#endif
