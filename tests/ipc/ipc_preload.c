/* A program that shares device memory with a child it execs, through
 * cuIpcGetMemHandle / cuIpcOpenMemHandle, run under libdrk_shim.so with
 * the stand-in driver: with drk's pool serving cuMemAlloc_v2, the handle
 * is drk's and the child maps the parent's pages. Linked -lcuda.
 *
 * Exit 0: shared both ways; else failed (a handle that is not drk's
 * included: the pool serves this allocation, so the driver's handle would
 * name memory it does not hold).
 * Usage: ipc_preload [open HANDLE] */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE ((size_t)(6 << 20) + 12345)

static unsigned char pat(size_t i, unsigned seed) { return (unsigned char)(i * 7u + seed + (i >> 16)); }

static int fill(CUdeviceptr p, unsigned seed)
{
    unsigned char *h = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++)
        h[i] = pat(i, seed);
    int ok = cuMemcpyHtoD(p, h, SIZE) == CUDA_SUCCESS;
    free(h);
    return ok;
}

static int holds(CUdeviceptr p, unsigned seed)
{
    unsigned char *h = malloc(SIZE);
    int ok = cuMemcpyDtoH(h, p, SIZE) == CUDA_SUCCESS;
    for (size_t i = 0; ok && i < SIZE; i++)
        ok = h[i] == pat(i, seed);
    free(h);
    return ok;
}

static int child(const char *hex)
{
    CUipcMemHandle h;
    for (int i = 0; i < 64; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 2;
        h.reserved[i] = (char)v;
    }
    CUdeviceptr p;
    if (cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS) {
        fprintf(stderr, "child: cuIpcOpenMemHandle failed\n");
        return 1;
    }
    int ok = holds(p, 1) && fill(p, 2);
    /* The queries see the shared allocation, not the pages under it. */
    CUdeviceptr base = 0;
    size_t size = 0;
    if (cuMemGetAddressRange(&base, &size, p + SIZE - 1) != CUDA_SUCCESS || base != p || size != SIZE) {
        fprintf(stderr, "child: cuMemGetAddressRange gave 0x%llx + %zu for the import at 0x%llx\n",
                (unsigned long long)base, size, (unsigned long long)p);
        ok = 0;
    }
    ok &= cuIpcCloseMemHandle(p) == CUDA_SUCCESS;
    if (!ok)
        fprintf(stderr, "child: the parent's bytes were not there, or writing or closing failed\n");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "set-up failed\n");
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "open") == 0)
        return child(argv[2]);

    CUdeviceptr head, p;
    CUipcMemHandle h;
    if (cuMemAlloc(&head, 3 << 20) || cuMemAlloc(&p, SIZE) || !fill(p, 1)) {
        fprintf(stderr, "allocation failed\n");
        return 1;
    }
    CUresult r = cuIpcGetMemHandle(&h, p);
    /* "drk" and the handle's version (alloc/ipc.c). */
    if (r != CUDA_SUCCESS || memcmp(h.reserved, "drk", 3) != 0) {
        fprintf(stderr, "cuIpcGetMemHandle gave %d and a handle that is not drk's\n", (int)r);
        return 1;
    }
    int ok = cuIpcGetMemHandle(&h, p + 256) == CUDA_ERROR_INVALID_VALUE; /* interior: refused */
    if (!ok)
        fprintf(stderr, "an interior pointer was exported\n");
    r = cuIpcGetMemHandle(&h, p);
    char hex[129];
    for (int i = 0; i < 64; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)h.reserved[i]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "ipc_preload", "open", hex, (char *)NULL);
        _exit(127);
    }
    int st;
    ok &= r == CUDA_SUCCESS && pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    ok &= holds(p, 2);
    ok &= cuMemFree(p) == CUDA_SUCCESS && cuMemFree(head) == CUDA_SUCCESS;
    printf("ipc_preload: %s\n", ok ? "passed" : "FAILED");
    return ok ? 0 : 1;
}
