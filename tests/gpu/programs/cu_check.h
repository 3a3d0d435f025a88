/* For the suite's driver-API programs: every driver call checked, a failure
 * printed with the call, the line and the driver's error name, and the
 * program ends with exit status 1. Define CU_CHECK_PROGRAM (the program's
 * name, for messages) before including. */
#ifndef DRK_TESTS_CU_CHECK_H
#define DRK_TESTS_CU_CHECK_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static inline const char *cu_error_name(CUresult r)
{
    const char *name = NULL;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        return "CUDA_ERROR_?";
    return name;
}

static inline void cu_check_at(CUresult r, const char *what, int line)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *text = NULL;
    cuGetErrorString(r, &text);
    fprintf(stderr, "%s: %s failed: %s (%d): %s at line %d\n", CU_CHECK_PROGRAM, what, cu_error_name(r), (int)r,
            text ? text : "?", line);
    exit(1);
}
#define CU_CHECK(call) cu_check_at((call), #call, __LINE__)

#endif
