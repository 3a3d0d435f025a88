// Twelve kernels of the kind applications write, for the variant-space
// benchmark (evolve_space.c): compiled to compute_90 PTX, JIT'd there with
// each variant's options. Deterministic by construction (no float atomics),
// so every variant must give the default's bytes.
extern "C" {

__global__ void saxpy(float *y, const float *x, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

__global__ void matmul_naive(float *c, const float *a, const float *b, int n)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n)
        return;
    float s = 0;
    for (int k = 0; k < n; k++)
        s += a[row * n + k] * b[k * n + col];
    c[row * n + col] = s;
}

__global__ void matmul_tiled(float *c, const float *a, const float *b, int n)
{
    __shared__ float ta[16][16], tb[16][16];
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float s = 0;
    for (int t = 0; t < n; t += 16) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; k++)
            s += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = s;
}

__global__ void stencil5(float *out, const float *in, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1)
        return;
    int i = y * w + x;
    out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

__global__ void softmax_rows(float *out, const float *in, int cols)
{
    __shared__ float red[256];
    const float *row = in + (size_t)blockIdx.x * cols;
    float m = -3.0e38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        m = fmaxf(m, row[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        sum += expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        out[(size_t)blockIdx.x * cols + c] = expf(row[c] - m) / sum;
}

__global__ void transpose_naive(float *out, const float *in, int n)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < n && y < n)
        out[x * n + y] = in[y * n + x];
}

__global__ void histogram256(unsigned *bins, const unsigned char *data, int n)
{
    __shared__ unsigned local[256];
    local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

__global__ void nbody(float4 *acc, const float4 *pos, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float4 p = pos[i];
    float ax = 0, ay = 0, az = 0;
#pragma unroll 8
    for (int j = 0; j < n; j++) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float r2 = dx * dx + dy * dy + dz * dz + 1e-3f;
        float inv = rsqrtf(r2);
        float s = q.w * inv * inv * inv;
        ax += dx * s, ay += dy * s, az += dz * s;
    }
    acc[i] = make_float4(ax, ay, az, 0);
}

__device__ float cnd(float d)
{
    const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f, a4 = -1.821255978f, a5 = 1.330274429f;
    float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float c = 0.3989422804f * expf(-0.5f * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
    return d > 0 ? 1.0f - c : c;
}

__global__ void black_scholes(float *call, float *put, const float *s, const float *x, const float *t, float r,
                              float v, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float sq = sqrtf(t[i]);
        float d1 = (logf(s[i] / x[i]) + (r + 0.5f * v * v) * t[i]) / (v * sq);
        float d2 = d1 - v * sq;
        float e = expf(-r * t[i]);
        call[i] = s[i] * cnd(d1) - x[i] * e * cnd(d2);
        put[i] = x[i] * e * (1.0f - cnd(d2)) - s[i] * (1.0f - cnd(d1));
    }
}

__global__ void layernorm(float *out, const float *in, const float *gamma, const float *beta, int cols)
{
    __shared__ float red[256];
    const float *row = in + (size_t)blockIdx.x * cols;
    float s = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        s += row[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float mean = red[0] / cols;
    __syncthreads();
    float q = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = row[c] - mean;
        q += d * d;
    }
    red[threadIdx.x] = q;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float inv = rsqrtf(red[0] / cols + 1e-5f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        out[(size_t)blockIdx.x * cols + c] = (row[c] - mean) * inv * gamma[c] + beta[c];
}

__global__ void gather_rows(float *out, const float *table, const int *idx, int rows, int cols)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * cols; i += gridDim.x * blockDim.x) {
        int r = i / cols, c = i % cols;
        out[i] = table[(size_t)idx[r] * cols + c];
    }
}

__global__ void conv1d_15(float *out, const float *in, const float *taps, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 7 || i >= n - 7)
        return;
    float s = 0;
#pragma unroll
    for (int k = -7; k <= 7; k++)
        s += taps[k + 7] * in[i + k];
    out[i] = s;
}

}
