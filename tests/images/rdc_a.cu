// -rdc=true, first unit: a kernel calling a device function of rdc_b.cu.
extern __device__ float rdc_helper(float x);

__global__ void rdc_kernel_a(float *a, int n)
{
    int i = threadIdx.x;
    if (i < n)
        a[i] = rdc_helper(a[i]);
}
