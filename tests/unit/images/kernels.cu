// Fixture for tests/unit/test_image.c: two kernels in one translation unit,
// built into fatbins with several archs (plain, "a" and "f" targets) and
// into a host executable.
__global__ void axpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += a * x[i];
}

__global__ void fill(long long *out, long long v)
{
    out[threadIdx.x] = v;
}
