// The driver program's kernel, compiled to a fatbin (sm_90 SASS + compute_90
// PTX) and loaded with cuModuleLoadData. extern "C": its name in drk's report
// and in CUPTI is exactly drk_drv_vecadd.
//
// It accumulates (acc[i] += a[i] + b[i]) so that the final array tells how
// many launches really ran: a dropped or doubled launch changes the result.
// Grid-stride loop: any grid size is correct, so the cooperative launch can
// use a small, co-resident grid.
extern "C" __global__ void drk_drv_vecadd(const int *a, const int *b, int *acc, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc[i] += a[i] + b[i];
}
