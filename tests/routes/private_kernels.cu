// Device code carried in a program's .nv_fatbin section but never handed to
// the driver by a load drk sees: how a runtime that loads privately looks.
extern "C" __global__ void drk_private_scale(float *x, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}
