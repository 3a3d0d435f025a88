/* A minimal assertion for unit tests: report every failure, exit non-zero. */
#ifndef DRK_TESTS_CHECK_H
#define DRK_TESTS_CHECK_H

#include <stdio.h>

static int check_failures;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                  \
        }                                                                      \
    } while (0)

#define CHECK_DONE()                                                           \
    (printf("%s: %s\n", __FILE__, check_failures ? "FAILED" : "passed"), check_failures ? 1 : 0)

#endif
