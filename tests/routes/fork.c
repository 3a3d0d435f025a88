/* A process under drk forks: the child is a process of its own, with its own
 * report that counts only its own calls and names its parent. Prints
 * "parent PID child PID" for the checker. Linked -lcuda. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { BEFORE = 5, CHILD = 7, AFTER = 3 };

static int launches(CUfunction f, int n)
{
    for (int i = 0; i < n; i++)
        if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return -1;
    return 0;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction empty;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&mod, "DRKFAKE1\nempty\n") || cuModuleGetFunction(&empty, mod, "empty") ||
        launches(empty, BEFORE)) {
        fprintf(stderr, "set-up failed\n");
        return 1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0)
        exit(launches(empty, CHILD) ? 1 : 0); /* exit(): the child's report is written */
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    if (launches(empty, AFTER))
        return 1;
    printf("parent %d child %d launches %d %d\n", (int)getpid(), (int)child, BEFORE + AFTER, CHILD);
    return 0;
}
