/* One driver workload, reached through whichever route a test program
 * resolves (linked -lcuda, dlopen+dlsym, cuGetProcAddress). It counts its own
 * calls by exact exported name, checks its results, and checks that the
 * stand-in driver saw exactly those calls in exactly those ABI forms. */
#ifndef DRK_TESTS_WORKLOAD_H
#define DRK_TESTS_WORKLOAD_H

#include <cuda.h>

#include "interpose/hooks.h"

/* Driver functions the workload needs besides the hooked ones. */
#define ROUTE_HELPERS(X)                                                       \
    X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)    \
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2)

typedef enum route_fn {
#define ROUTE_HOOKED_(name, body, family) R_##name,
#define ROUTE_HELPER_(name) R_##name,
    DRK_HOOKS(ROUTE_HOOKED_) ROUTE_HELPERS(ROUTE_HELPER_)
#undef ROUTE_HOOKED_
#undef ROUTE_HELPER_
    R_COUNT
} route_fn;

extern const char *const route_fn_name[R_COUNT];

typedef struct route_api {
    void *fn[R_COUNT];                                   /* the route's pointers */
    unsigned long long (*driver_calls)(const char *name); /* fakecuda_calls */
    int (*inject_error)(const char *name, CUresult r, unsigned n); /* fakecuda_inject_error */
} route_api;

/* Runs the workload `rounds` times through `api`, prints its results to
 * stdout and writes its own counts as JSON to `counts_path` (if not NULL).
 * Returns 0 when every check held. */
int workload_run(const route_api *api, int rounds, const char *counts_path);

/* Calls the route made itself while resolving (cuGetProcAddress). */
void workload_note_calls(route_fn f, unsigned long long n);

/* Check that every resolved pointer lies in the object the environment
 * variable ROUTE_EXPECT_OWNER names ("drk" or "driver"); 0 if unset or ok. */
int route_check_owners(const route_api *api);

#endif
