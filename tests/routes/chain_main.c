/* Launches through the -lcuda route with libchain.so (preloaded first) in
 * front of drk; prints what each layer counted. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#include "tests/fakecuda/fakecuda.h"

enum { LAUNCHES = 25 };

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction empty;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&mod, "DRKFAKE1\nempty\n") || cuModuleGetFunction(&empty, mod, "empty"))
        return 1;
    for (int i = 0; i < LAUNCHES; i++)
        if (cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return 1;
    unsigned long long *chain = (unsigned long long *)dlsym(RTLD_DEFAULT, "chain_launches");
    printf("program %d chain %llu driver %llu\n", LAUNCHES, chain ? *chain : 0ull, fakecuda_calls("cuLaunchKernel"));
    return 0;
}
