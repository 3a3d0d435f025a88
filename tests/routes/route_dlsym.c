/* The dlopen+dlsym route (Triton, JAX/XLA, CuPy, PyTorch's NVRTC path):
 * names looked up on the driver's own handle, which a preloaded library's
 * exports do not answer; drk's dlsym must. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/routes/workload.h"

/* Lookups that must behave exactly as without drk. */
static int unhooked_lookups(void *h)
{
    static const char *const absent[] = {"cuNoSuchFunction", "cuLaunchKernelX", "cuLaunch_", "cu", ""};
    int bad = 0;
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
        dlerror();
        void *p = dlsym(h, absent[i]);
        const char *err = dlerror();
        printf("dlsym(%s) -> %s, error %s\n", absent[i], p ? "found" : "NULL", err ? "set" : "none");
        bad += p != NULL || err == NULL;
    }
    /* A name the driver has but drk does not hook: the driver's own pointer. */
    void *direct = dlsym(h, "cuDriverGetVersion");
    Dl_info info;
    bad += !direct || !dladdr(direct, &info) || !info.dli_fname;
    return bad;
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    route_api api = {0};
    for (int i = 0; i < R_COUNT; i++)
        api.fn[i] = dlsym(h, route_fn_name[i]);
    api.driver_calls = (unsigned long long (*)(const char *))dlsym(h, "fakecuda_calls");
    api.inject_error = (int (*)(const char *, CUresult, unsigned))dlsym(h, "fakecuda_inject_error");
    int bad = unhooked_lookups(h) + route_check_owners(&api);
    int rc = workload_run(&api, argc > 1 ? atoi(argv[1]) : 1, argc > 2 ? argv[2] : NULL);
    return rc || bad ? 1 : 0;
}
