/* N launches of the stand-in driver's empty kernel through cuLaunchKernel,
 * for launch_instructions.sh to count what drk adds to each. Linked -lcuda. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction empty;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&mod, "DRKFAKE1\nempty\n") || cuModuleGetFunction(&empty, mod, "empty")) {
        fprintf(stderr, "launch_loop: set-up failed\n");
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS) {
            fprintf(stderr, "launch_loop: launch %d failed\n", i);
            return 1;
        }
    return 0;
}
