/* A kernel whose image drk never sees loaded: the program's own .nv_fatbin
 * section carries it (as nvcc builds put it), but the stand-in driver gets
 * it by name from a text image, as a runtime loading through private calls
 * would. drk must still find its facts, in the program's fatbin, for the
 * report. Linked -lcuda. */
#include <cuda.h>
#include <stdio.h>

#include "tests/fakecuda/fakecuda.h"
#include "tests/gpu/programs/self_check.h"

static void scale(const fakecuda_thread *t)
{
    unsigned i = t->blockIdx.x * t->blockDim.x + t->threadIdx.x;
    if ((int)i < *(int *)t->params[2])
        (*(float **)t->params[0])[i] *= *(float *)t->params[1];
}

int main(void)
{
    static const size_t sizes[] = {8, 4, 4};
    if (fakecuda_register_kernel_params("drk_private_scale", scale, 3, sizes) != 0)
        return 1;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "DRKFAKE1\ndrk_private_scale\n"));
    CHECK(cuModuleGetFunction(&f, mod, "drk_private_scale"));
    float host[64];
    for (int i = 0; i < 64; i++)
        host[i] = (float)i;
    CUdeviceptr x;
    CHECK(cuMemAlloc(&x, sizeof host));
    CHECK(cuMemcpyHtoD(x, host, sizeof host));
    float s = 2.0f;
    int n = 64;
    void *params[] = {&x, &s, &n};
    for (int i = 0; i < 5; i++)
        CHECK(cuLaunchKernel(f, 2, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CHECK(cuMemcpyDtoH(host, x, sizeof host));
    CHECK(cuMemFree(x));
    CHECK(cuModuleUnload(mod));
    printf("ok %g\n", (double)host[63]);
    return 0;
}
