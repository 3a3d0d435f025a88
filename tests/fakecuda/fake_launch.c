/* fakecuda, the stand-in libcuda.so.1: kernel launches, run on the calling
 * thread. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Launch                                                                   */
/* ------------------------------------------------------------------------ */

FC_HIDDEN _Thread_local unsigned long long g_gpu_ns;

/* A launch's time on the GPU clock: its kernel's for its registers. */
static unsigned long long kernel_time(const struct kentry *k, unsigned int regs)
{
    unsigned long long any = 1000;
    for (unsigned int i = 0; i < k->ntimes; i++) {
        if (k->time_regs[i] == regs)
            return k->time_ns[i];
        if (k->time_regs[i] == 0)
            any = k->time_ns[i];
    }
    return any;
}

struct launch {
    const void *f;
    unsigned int gx, gy, gz, bx, by, bz, shmem;
    CUstream stream;
    void **params;
    void **extra;
    int coop;
    int carveout; /* the launch's carveout attribute; -2: none (the function's) */
};

/* `extra`: BUFFER_POINTER and BUFFER_SIZE pairs, ended by NULL/END. */
static CUresult parse_extra(void **extra, char **buf, size_t *size)
{
    void *p = NULL;
    const size_t *psize = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (i >= 16) /* an unterminated list: refuse rather than read on */
            return CUDA_ERROR_INVALID_VALUE;
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            p = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            psize = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!p || !psize)
        return CUDA_ERROR_INVALID_VALUE;
    *buf = p;
    *size = *psize;
    return CUDA_SUCCESS;
}

static CUresult do_launch(const struct launch *L)
{
    if (L->gx == 0 || L->gy == 0 || L->gz == 0 || L->bx == 0 || L->by == 0 || L->bz == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->bx > 1024 || L->by > 1024 || L->bz > 64 || (unsigned long long)L->bx * L->by * L->bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->gx > 2147483647u || L->gy > 65535 || L->gz > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->shmem > FC_MAX_DYN_SHARED)
        return CUDA_ERROR_INVALID_VALUE;
    if (L->params && L->extra)
        return CUDA_ERROR_INVALID_VALUE;

    LOCK();
    int e = handle_entry(L->f, 3);
    if (e < 0) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* It runs in the current context (none: the primary); a function of
     * another context is not a handle there, as with the driver. */
    struct ctx *cur = current_ctx_locked();
    if (!cur)
        cur = &g_primary;
    unsigned long long serial = cur->serial;
    if (!handle_in_ctx(L->f, cur)) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!stream_ok_locked(L->stream)) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct kentry *k = &g_kernels[e];
    fakecuda_kernel_fn fn = k->fn;
    unsigned int regs = handle_regs(L->f, 3);
    int rz = handle_rz(L->f, 3);
    int carveout = L->carveout >= -1 ? L->carveout : handle_carveout(L->f, 3);
    unsigned long long ns = k->carveout_ns && carveout == k->time_carveout ? k->carveout_ns : kernel_time(k, regs);
    int has_layout = k->has_layout;
    unsigned int nparams = k->nparams;
    size_t off[FC_MAX_PARAMS], argbytes = k->argbytes;
    memcpy(off, k->off, nparams * sizeof *off);
    UNLOCK();

    unsigned long long threads = (unsigned long long)L->bx * L->by * L->bz;
    if (L->coop) {
        /* All blocks must be co-resident: at most 32 blocks and 2048
         * threads per SM. */
        unsigned long long per_sm = FC_MAX_THREADS_PER_SM / threads;
        if (per_sm > 32)
            per_sm = 32;
        if ((unsigned long long)L->gx * L->gy * L->gz > per_sm * FC_SM_COUNT)
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }

    void *unpacked[FC_MAX_PARAMS];
    void **params = L->params;
    if (L->extra) {
        char *buf;
        size_t size;
        CUresult rc = parse_extra(L->extra, &buf, &size);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!has_layout || size < argbytes)
            return CUDA_ERROR_INVALID_VALUE;
        for (unsigned int i = 0; i < nparams; i++)
            unpacked[i] = buf + off[i];
        params = unpacked;
    } else if (!params && nparams > 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }

    void *shared = NULL;
    if (L->shmem && !(shared = calloc(1, L->shmem)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    fakecuda_thread t = {
        .gridDim = {L->gx, L->gy, L->gz},
        .blockDim = {L->bx, L->by, L->bz},
        .params = params,
        .nparams = nparams,
        .shared = shared,
        .sharedMemBytes = L->shmem,
        .regs = regs,
        .ptx_rz = rz,
        .carveout = carveout,
    };
    for (t.blockIdx.z = 0; t.blockIdx.z < L->gz; t.blockIdx.z++)
        for (t.blockIdx.y = 0; t.blockIdx.y < L->gy; t.blockIdx.y++)
            for (t.blockIdx.x = 0; t.blockIdx.x < L->gx; t.blockIdx.x++)
                for (t.threadIdx.z = 0; t.threadIdx.z < L->bz; t.threadIdx.z++)
                    for (t.threadIdx.y = 0; t.threadIdx.y < L->by; t.threadIdx.y++)
                        for (t.threadIdx.x = 0; t.threadIdx.x < L->bx; t.threadIdx.x++)
                            fn(&t);
    free(shared);
    atomic_fetch_add(&k->launches, 1);
    atomic_fetch_add(&k->carveout_launches[carveout + 1], 1);
    LOCK();
    /* Counted in its context unless that was destroyed meanwhile. */
    if (cur == &g_primary || (h_get(cur, MAGIC_CTX) && cur->serial == serial))
        cur->launches++;
    if (cur != &g_primary)
        g_launches_other++;
    UNLOCK();
    g_gpu_ns += ns;
    return CUDA_SUCCESS;
}

static CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                              unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,
                              void **params, void **extra, int coop)
{
    struct launch L = {f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra, coop, -2};
    return do_launch(&L);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    if (config->numAttrs && !config->attrs)
        return CUDA_ERROR_INVALID_VALUE;
    int coop = 0, carveout = -2;
    for (unsigned int i = 0; i < config->numAttrs; i++) {
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && config->attrs[i].value.cooperative)
            coop = 1;
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
            if (config->attrs[i].value.sharedMemCarveout > 100)
                return CUDA_ERROR_INVALID_VALUE;
            carveout = (int)config->attrs[i].value.sharedMemCarveout;
        }
    }
    struct launch L = {f,
                       config->gridDimX,
                       config->gridDimY,
                       config->gridDimZ,
                       config->blockDimX,
                       config->blockDimY,
                       config->blockDimZ,
                       config->sharedMemBytes,
                       config->hStream,
                       params,
                       extra,
                       coop,
                       carveout};
    return do_launch(&L);
}

FC_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                  unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    ENTER_INIT(cuLaunchKernel);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, extra, 0);
}

FC_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams, void **extra)
{
    ENTER_INIT(cuLaunchKernel_ptsz);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, extra, 0);
}

FC_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    ENTER_INIT(cuLaunchKernelEx);
    return launch_ex(config, f, kernelParams, extra);
}

FC_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                         void **extra)
{
    ENTER_INIT(cuLaunchKernelEx_ptsz);
    return launch_ex(config, f, kernelParams, extra);
}

FC_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                             void **kernelParams)
{
    ENTER_INIT(cuLaunchCooperativeKernel);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, NULL, 1);
}

FC_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                  unsigned int gridDimZ, unsigned int blockDimX,
                                                  unsigned int blockDimY, unsigned int blockDimZ,
                                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    ENTER_INIT(cuLaunchCooperativeKernel_ptsz);
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, NULL, 1);
}
