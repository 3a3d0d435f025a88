// -rdc=true, second unit: the device function and a kernel of its own.
__device__ float rdc_helper(float x) { return x * x + 1.0f; }

__global__ void rdc_kernel_b(double *d, long long n, char tag)
{
    if (threadIdx.x < n)
        d[threadIdx.x] += tag;
}
