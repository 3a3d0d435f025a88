/* A minimal assertion for unit tests: report every failure, exit non-zero. */
#ifndef DRK_TESTS_CHECK_H
#define DRK_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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

/* The whole of file dir/name in a malloc'd buffer of exactly its size (no
 * terminator: under ASan a reader that reads past the end is caught);
 * exits if it cannot be read, since the fixture is part of the test. */
static inline unsigned char *check_load(const char *dir, const char *name, size_t *size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    unsigned char *buf = n >= 0 ? malloc(n ? (size_t)n : 1) : NULL;
    if (!f || !buf || fseek(f, 0, SEEK_SET) != 0 || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

#endif
