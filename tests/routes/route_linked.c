/* The -lcuda route: the program binds the driver's exported names at link
 * time; under drk the loader binds them to drk's exports instead. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>
#include <stdlib.h>

#include "tests/fakecuda/fakecuda.h"
#include "tests/routes/workload.h"

int main(int argc, char **argv)
{
    route_api api = {0};
#define SET_(name, ...) api.fn[R_##name] = (void *)&name;
    DRK_HOOKS(SET_)
    ROUTE_HELPERS(SET_)
#undef SET_
    api.driver_calls = fakecuda_calls;
    api.inject_error = fakecuda_inject_error;
    return workload_run(&api, argc > 1 ? atoi(argv[1]) : 1, argc > 2 ? argv[2] : NULL);
}
