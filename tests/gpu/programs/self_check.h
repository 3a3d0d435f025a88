/* For the suite's self-checking programs: a failed driver call or check
 * says where and what, and the program exits 1. */
#ifndef DRK_TESTS_SELF_CHECK_H
#define DRK_TESTS_SELF_CHECK_H

#include <cuda.h>
#include <stdio.h>

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        CUresult r_ = (call);                                                                                          \
        if (r_ != CUDA_SUCCESS) {                                                                                      \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)r_);                                  \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)
#define EXPECT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond);                                        \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

#endif
