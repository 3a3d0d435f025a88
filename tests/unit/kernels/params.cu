// Fixture kernels for the cubin and PTX readers (tests/unit/test_cubin.c,
// test_ptx.c). The expected values in the tests come from this source
// (sizeof/alignof) and from cuobjdump, not from the readers.
#include <cuda_fp16.h>

struct Gap {     // sizeof 16, alignof 8: 3 bytes of padding after c
    char c;
    int i;
    double d;
};

struct alignas(16) Wide { // sizeof 16, alignof 16
    float x, y, z;
};

struct Big {     // 4400 bytes: the large-parameter form (> 4 KiB)
    int v[1100];
};

__device__ __noinline__ float helper(float x) { return x * 2.0f + 1.0f; }

template <typename T, int N>
__global__ void tmpl(T *out, T v)
{
    out[threadIdx.x % N] = v;
}
template __global__ void tmpl<float, 4>(float *, float);
template __global__ void tmpl<double, 2>(double *, double);

__global__ void gaps(char c, Gap g, short s, Wide w, double d, __half h, float *out)
{
    out[0] = c + g.c + g.i + (float)g.d + s + w.x + (float)d + __half2float(h) + helper(out[1]);
}

__global__ void big(Big b, int *out)
{
    out[threadIdx.x] = b.v[threadIdx.x];
}

__global__ void noparams(void)
{
}

__global__ void __launch_bounds__(256, 2) bounded(float *p)
{
    p[threadIdx.x] *= 2.0f;
}

__global__ void shared(float *p)
{
    __shared__ float a[1024];
    __shared__ int b[33];
    a[threadIdx.x] = p[threadIdx.x];
    b[threadIdx.x % 33] = threadIdx.x;
    __syncthreads();
    p[threadIdx.x] = a[1023 - threadIdx.x] + b[(threadIdx.x + 1) % 33];
}

__global__ void stack(int *p, int i) // a 4 KiB stack frame (cuobjdump's STACK)
{
    int a[1024];
    for (int j = 0; j < 1024; j++)
        a[j] = p[j];
    p[0] = a[i & 1023];
}
