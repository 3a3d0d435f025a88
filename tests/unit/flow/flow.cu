// Kernels whose parameters tests/unit/test_ptx_flow.c classifies from
// nvcc's PTX (nvcc -ptx -arch=compute_90), one case of ptx_flow.h each.
// extern "C" keeps the names plain; the expected classes are in the test.
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>

namespace cg = cooperative_groups;

__device__ int flow_counter;
__constant__ float flow_weights[16];

struct Pair {
    float *a;
    float *b;
    int n;
};

struct Node {
    int value;
    Node *next;
};

struct Four {
    float *p[4];
};

// Three pointers and a count.
extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

// A float scalar and a count before the pointers.
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// Reads and writes the same buffer.
extern "C" __global__ void inplace(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * 2.0f + 1.0f;
}

// Pointers inside a struct passed by value: two pointer words, one value word.
extern "C" __global__ void pair(Pair p)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n)
        p.b[i] = p.a[i] * 2.0f;
}

// A table of pointers: the loaded pointers are dereferenced.
extern "C" __global__ void table(float **tables, int n)
{
    int i = threadIdx.x;
    if (i < n)
        tables[blockIdx.x][i] += 1.0f;
}

// A linked list walk.
extern "C" __global__ void list(const Node *head, int *out)
{
    int s = 0;
    for (const Node *p = head; p; p = p->next)
        s += p->value;
    *out = s;
}

// A module __device__ variable.
extern "C" __global__ void device_var(float *x)
{
    atomicAdd(&flow_counter, 1);
    x[threadIdx.x] += 1.0f;
}

// A module __constant__ array.
extern "C" __global__ void const_array(float *x)
{
    x[threadIdx.x] *= flow_weights[threadIdx.x & 15];
}

// Device printf.
extern "C" __global__ void print(const float *x)
{
    printf("%f\n", x[threadIdx.x]);
}

// A grid-wide sync (cooperative launch).
extern "C" __global__ void grid_sync(float *x)
{
    cg::grid_group g = cg::this_grid();
    x[g.thread_rank()] += 1.0f;
    g.sync();
    x[0] = 0.0f;
}

// atomicAdd into a pointer parameter.
extern "C" __global__ void atomics(float *sum, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(sum, x[i]);
}

// A pointer through a function that is not inlined, and one it returns.
__device__ __noinline__ void bump(float *p, int i)
{
    p[i] += 1.0f;
}

__device__ __noinline__ float *pick(float *a, float *b, int which)
{
    return which ? a : b;
}

extern "C" __global__ void noinline(float *p, float *q, float *r, int which)
{
    bump(p, threadIdx.x);
    pick(q, r, which)[threadIdx.x] = 1.0f;
}

// A 64-bit index.
extern "C" __global__ void index64(float *p, long long stride, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i * stride] = 0.0f;
}

// __ldg: ld.global.nc.
extern "C" __global__ void ldg(const float *__restrict__ in, float *out)
{
    out[threadIdx.x] = __ldg(&in[threadIdx.x]) * 3.0f;
}

// float4 loads and stores.
extern "C" __global__ void vec4(const float4 *in, float4 *out)
{
    float4 v = in[threadIdx.x];
    v.x += v.w;
    out[threadIdx.x] = v;
}

// A parameter used only to size shared memory work.
extern "C" __global__ void shared_size(float *out, int n)
{
    extern __shared__ float s[];
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = s[n - 1];
}

// A pointer parameter never used.
extern "C" __global__ void unused_ptr(float *used, float *unused, int n)
{
    if ((int)threadIdx.x < n)
        used[threadIdx.x] = 1.0f;
}

// An index loaded from memory (a gather): still evolvable.
extern "C" __global__ void gather(const float *in, const long long *idx, float *out)
{
    out[threadIdx.x] = in[idx[threadIdx.x]];
}

// A 64-bit byte offset added to a pointer: a value, not a pointer.
extern "C" __global__ void byte_offset(const char *in, char *out, long long off)
{
    out[threadIdx.x] = in[threadIdx.x + off];
}

// One of two pointers, chosen by a flag.
extern "C" __global__ void select_ptr(float *a, float *b, int which)
{
    float *p = which ? a : b;
    p[threadIdx.x] = 2.0f;
}

// Writes a pointer it dereferences into memory (a pointer it only stores
// is a value to it: drk does not move what it points to).
extern "C" __global__ void store_ptr(float **out, float *p, float *q)
{
    p[threadIdx.x] = 0.0f;
    out[threadIdx.x] = p + threadIdx.x;
    out[threadIdx.x + 32] = q;
}

// Calls through a function pointer.
__device__ float twice(float v) { return 2.0f * v; }
__device__ float thrice(float v) { return 3.0f * v; }
__device__ float (*ops[2])(float) = {twice, thrice};

extern "C" __global__ void fn_pointer(float *x, int which)
{
    float (*f)(float) = which ? thrice : twice;
    x[threadIdx.x] = f(x[threadIdx.x]);
}

// Device malloc: a function that is not in the module.
extern "C" __global__ void device_malloc(float **out)
{
    float *p = (float *)malloc(16);
    p[0] = 1.0f;
    out[0] = p;
}

// A texture object.
extern "C" __global__ void texture(cudaTextureObject_t t, float *out)
{
    out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);
}

// A struct of pointers indexed at run time.
extern "C" __global__ void dynamic_index(Four f, int j)
{
    f.p[j & 3][threadIdx.x] = 1.0f;
}

// __grid_constant__ indexed at run time: read through the parameter's address.
extern "C" __global__ void grid_constant(const __grid_constant__ Four f, int j)
{
    f.p[j & 3][threadIdx.x] = 1.0f;
}
