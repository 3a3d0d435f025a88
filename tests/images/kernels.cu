// Fixture kernels for the image reader's cross-check with cuobjdump: a mix of
// parameter layouts, templates, shared and local memory and launch bounds.
#include <cuda_fp16.h>

// Alignment gaps: char then double, short then an int.
struct Gappy {
    char c;
    double d;
    short s;
    int i;
};

// Over 4 KiB of parameters (the large-parameter form, CUDA 12.1+).
struct Big {
    float v[1100];
};

__constant__ float coeffs[16];

extern "C" __global__ void plain_scale(float *a, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] *= s * coeffs[i & 15];
}

__global__ void odd_params(char c, short s, double d, __half h, Gappy g, char c2, double *out)
{
    out[threadIdx.x] = c + s + d + __half2float(h) + g.c + g.d + g.s + g.i + c2;
}

__global__ void big_params(Big b, float *out, int n)
{
    int i = threadIdx.x;
    if (i < n && i < 1100)
        out[i] = b.v[i];
}

__global__ void __launch_bounds__(256, 2) shared_reduce(const float *in, float *out)
{
    __shared__ float buf[1024];
    __shared__ int flags[32];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * 1024 + t];
    flags[t & 31] = t;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (t < s)
            buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = buf[0] + flags[3];
}

// A dynamically indexed array lives in local memory (a stack frame).
__global__ void __launch_bounds__(128) uses_local(const int *idx, float *out)
{
    float tmp[96];
    for (int i = 0; i < 96; i++)
        tmp[i] = out[i] * 3.0f;
    out[threadIdx.x] = tmp[idx[threadIdx.x] % 96];
}

__global__ void no_params(void) {}

template <typename T, int N> __global__ void tmpl_fill(T *out, T v)
{
    for (int i = 0; i < N; i++)
        out[threadIdx.x * N + i] = v;
}

namespace ns {
template <typename T> __global__ void tmpl_pair(T a, T b, T *out) { *out = b ? a : b; }
}

template __global__ void tmpl_fill<float, 4>(float *, float);
template __global__ void tmpl_fill<double, 2>(double *, double);
template __global__ void tmpl_fill<unsigned char, 16>(unsigned char *, unsigned char);
template __global__ void ns::tmpl_pair<short>(short, short, short *);
template __global__ void ns::tmpl_pair<Gappy *>(Gappy *, Gappy *, Gappy **);
