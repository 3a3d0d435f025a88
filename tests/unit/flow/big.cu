// A large kernel for the analysis' time: a CUTLASS-like register-blocked
// GEMM, every loop unrolled (tens of thousands of PTX instructions per
// instantiation), and a kernel of many pointer parameters. test_ptx_flow.c
// prints the time the analysis takes on nvcc's PTX of it.
template <int TM, int TN, int TK>
__global__ void __launch_bounds__(256) blocked_gemm(const float *__restrict__ A, const float *__restrict__ B,
                                                    float *__restrict__ C, int M, int N, int K, int lda, int ldb,
                                                    int ldc, float alpha, float beta)
{
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.0f;
    int row = (blockIdx.y * blockDim.y + threadIdx.y) * TM, col = (blockIdx.x * blockDim.x + threadIdx.x) * TN;
    for (int k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
        for (int k = 0; k < TK; k++) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
                a[i] = A[(long long)(row + i) * lda + k0 + k];
#pragma unroll
            for (int j = 0; j < TN; j++)
                b[j] = B[(long long)(k0 + k) * ldb + col + j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] += a[i] * b[j];
        }
    }
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            if (row + i < M && col + j < N) {
                float *c = &C[(long long)(row + i) * ldc + col + j];
                *c = alpha * acc[i][j] + beta * *c;
            }
}

template __global__ void blocked_gemm<8, 8, 64>(const float *, const float *, float *, int, int, int, int, int, int,
                                                float, float);
template __global__ void blocked_gemm<8, 4, 64>(const float *, const float *, float *, int, int, int, int, int, int,
                                                float, float);
template __global__ void blocked_gemm<4, 4, 128>(const float *, const float *, float *, int, int, int, int, int, int,
                                                 float, float);

struct Many {
    float *p[16];
};

// Sixteen pointers in a struct and sixteen as parameters, all summed into
// the last: every word a pointer but the count.
extern "C" __global__ void many_pointers(Many m, float *q0, float *q1, float *q2, float *q3, float *q4, float *q5,
                                         float *q6, float *q7, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float s = q0[i] + q1[i] + q2[i] + q3[i] + q4[i] + q5[i] + q6[i] + q7[i];
#pragma unroll
    for (int k = 0; k < 16; k++)
        s += m.p[k][i];
    out[i] = s;
}
