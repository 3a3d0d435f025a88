/* Another interposer preloaded before drk that hooks cuLaunchKernel and
 * forwards with dlsym(RTLD_NEXT): it must reach drk, and drk the driver. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>

unsigned long long chain_launches;

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                        void **extra)
{
    static __typeof__(&cuLaunchKernel) next;
    if (!next)
        next = (__typeof__(&cuLaunchKernel))dlsym(RTLD_NEXT, "cuLaunchKernel");
    __atomic_add_fetch(&chain_launches, 1, __ATOMIC_RELAXED);
    return next(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
