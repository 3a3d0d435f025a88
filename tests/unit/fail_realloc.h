/* realloc failing on purpose, for a test linked with -Wl,--wrap=realloc:
 * once realloc_fails is set, the next call fails (and clears it), so a
 * test can tell that the growth it aimed at met the failure. */
#ifndef DRK_TESTS_FAIL_REALLOC_H
#define DRK_TESTS_FAIL_REALLOC_H

#include <stdatomic.h>
#include <stddef.h>

static atomic_int realloc_fails;
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) { return atomic_exchange(&realloc_fails, 0) ? NULL : __real_realloc(p, n); }

#endif
