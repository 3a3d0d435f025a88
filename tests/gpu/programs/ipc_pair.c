/* Two processes share device memory through CUDA IPC (-lcuda).
 *
 * The parent allocates a buffer with cuMemAlloc (an odd size, across page
 * boundaries), writes a pattern, takes cuIpcGetMemHandle of it and starts a
 * child: fork, then exec of this same program with the handle hex-encoded in
 * argv, so the child is a fresh CUDA process with the parent's environment
 * (LD_PRELOAD included). The child opens the handle
 * (cuIpcOpenMemHandle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), checks the
 * pattern, writes its own, closes the handle and exits; the parent then
 * reads the child's pattern.
 *
 * A second buffer comes from cuMemAllocAsync (default pool of the device).
 * The driver refuses cuIpcGetMemHandle on such memory
 * (CUDA_ERROR_INVALID_VALUE: IPC needs cuMemAlloc memory, or a pool made
 * with an IPC handle type): the program prints what the call returned, so
 * the runs compare it, and shares the buffer the same way only if it was
 * given a handle.
 *
 *   ipc_pair                 the parent
 *   ipc_pair --child HEX BYTES SEED [HEX BYTES SEED]
 *
 * Exit status 0 when every byte was right on both sides; the child's errors
 * go to stderr prefixed "ipc_pair child:". Writes {"workload", "pid",
 * "child_pid"} to $DRK_TEST_COUNTS if set (the parent only). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "ipc_pair";
#define CU_CHECK_PROGRAM prog_name
#include "tests/gpu/programs/cu_check.h"
#include "tests/gpu/programs/test_counts.h"

enum { CHILD_WAIT_S = 60 };

/* Byte i of the pattern `seed`: differs between seeds at every byte. */
static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)((i * 7u + (i >> 9) + seed * 131u + 1u) ^ (seed * 0x5bu));
}

static void fill(unsigned char *h, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        h[i] = pattern(i, seed);
}

/* 0 when the device bytes at p are pattern `seed`; else prints the first
 * wrong byte. */
static int check_bytes(CUdeviceptr p, size_t n, unsigned seed, const char *what)
{
    unsigned char *h = malloc(n);
    if (!h) {
        fprintf(stderr, "%s: out of host memory\n", prog_name);
        exit(1);
    }
    CU_CHECK(cuMemcpyDtoH(h, p, n));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != pattern(i, seed) && bad++ == 0)
            first = i;
    if (bad)
        fprintf(stderr, "%s: %s: %zu of %zu bytes wrong, first at %zu: 0x%02x, expected 0x%02x\n", prog_name, what,
                bad, n, first, h[first], pattern(first, seed));
    free(h);
    return bad ? 1 : 0;
}

static void write_bytes(CUdeviceptr p, size_t n, unsigned seed)
{
    unsigned char *h = malloc(n);
    if (!h) {
        fprintf(stderr, "%s: out of host memory\n", prog_name);
        exit(1);
    }
    fill(h, n, seed);
    CU_CHECK(cuMemcpyHtoD(p, h, n));
    free(h);
}

static void to_hex(const CUipcMemHandle *hd, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = (const unsigned char *)hd->reserved;
    for (size_t i = 0; i < sizeof hd->reserved; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * sizeof hd->reserved] = '\0';
}

static int from_hex(const char *s, CUipcMemHandle *hd)
{
    unsigned char *b = (unsigned char *)hd->reserved;
    if (strlen(s) != 2 * sizeof hd->reserved)
        return -1;
    for (size_t i = 0; i < sizeof hd->reserved; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + (size_t)k];
            unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 99u;
            if (d > 15)
                return -1;
            v = v * 16 + d;
        }
        b[i] = (unsigned char)v;
    }
    return 0;
}

/* The child: open each handle, check the parent's pattern (seed), write
 * pattern seed + 1, close. */
static int child(int argc, char **argv)
{
    prog_name = "ipc_pair child";
    CUdevice dev;
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    int bad = 0;
    for (int a = 2; a + 2 < argc; a += 3) {
        CUipcMemHandle h;
        if (from_hex(argv[a], &h) != 0) {
            fprintf(stderr, "%s: bad handle argument %s\n", prog_name, argv[a]);
            return 1;
        }
        size_t n = strtoull(argv[a + 1], NULL, 10);
        unsigned seed = (unsigned)strtoul(argv[a + 2], NULL, 10);
        CUdeviceptr p = 0;
        CUresult r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "%s: cuIpcOpenMemHandle of the parent's %zu-byte buffer failed: %s (%d)\n", prog_name, n,
                    cu_error_name(r), (int)r);
            return 2;
        }
        bad |= check_bytes(p, n, seed, "the parent's pattern, read through the opened handle");
        write_bytes(p, n, seed + 1);
        CU_CHECK(cuCtxSynchronize());
        CU_CHECK(cuIpcCloseMemHandle(p));
    }
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    return bad ? 4 : 0;
}

/* Runs the child and waits at most CHILD_WAIT_S seconds: its exit status,
 * or -1. */
static int run_child(char **args, pid_t *pid_out)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("ipc_pair: fork");
        return -1;
    }
    if (pid == 0) {
        execv("/proc/self/exe", args);
        perror("ipc_pair: execv /proc/self/exe");
        _exit(127);
    }
    *pid_out = pid;
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (long waited = 0; waited < CHILD_WAIT_S * 100L; waited++) {
        int status = 0;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            if (WIFEXITED(status))
                return WEXITSTATUS(status);
            fprintf(stderr, "ipc_pair: the child died of signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
            return -1;
        }
        if (w < 0 && errno != EINTR) {
            perror("ipc_pair: waitpid");
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    fprintf(stderr, "ipc_pair: the child ran past %d s; killed\n", CHILD_WAIT_S);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child(argc, argv);

    const size_t n_a = ((size_t)3 << 20) + 4096 + 100; /* crosses a 2 MiB boundary, odd size */
    const size_t n_b = ((size_t)1 << 20) + 12345;
    const unsigned seed_a = 1, seed_b = 11;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    CU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    CUdeviceptr a = 0, b = 0;
    CU_CHECK(cuMemAlloc(&a, n_a));
    write_bytes(a, n_a, seed_a);
    CUipcMemHandle ha, hb;
    memset(&ha, 0, sizeof ha);
    memset(&hb, 0, sizeof hb);
    CU_CHECK(cuIpcGetMemHandle(&ha, a));

    /* Once its stream has synchronized, the allocation is usable anywhere. */
    CU_CHECK(cuMemAllocAsync(&b, n_b, stream));
    CU_CHECK(cuStreamSynchronize(stream));
    write_bytes(b, n_b, seed_b);
    CUresult rb = cuIpcGetMemHandle(&hb, b);

    char hex_a[2 * sizeof ha.reserved + 1], hex_b[2 * sizeof hb.reserved + 1];
    char na[32], nb[32], sa[16], sb[16];
    to_hex(&ha, hex_a);
    to_hex(&hb, hex_b);
    snprintf(na, sizeof na, "%zu", n_a);
    snprintf(nb, sizeof nb, "%zu", n_b);
    snprintf(sa, sizeof sa, "%u", seed_a);
    snprintf(sb, sizeof sb, "%u", seed_b);
    char *args[] = {argv[0], "--child", hex_a, na, sa, rb == CUDA_SUCCESS ? hex_b : NULL, nb, sb, NULL};

    pid_t child_pid = 0;
    int st = run_child(args, &child_pid);
    if (write_test_counts("{\"workload\": \"ipc_pair\", \"pid\": %d, \"child_pid\": %d}\n", (int)getpid(),
                          (int)child_pid) != 0)
        return 1;
    if (st != 0) {
        fprintf(stderr, "ipc_pair: the child failed (exit status %d%s)\n", st,
                st == 2 ? ": it could not open the handle" : st == 4 ? ": it read wrong bytes" : "");
        return 1;
    }
    int bad = check_bytes(a, n_a, seed_a + 1, "the child's pattern in the cuMemAlloc buffer");
    if (rb == CUDA_SUCCESS)
        bad |= check_bytes(b, n_b, seed_b + 1, "the child's pattern in the cuMemAllocAsync buffer");
    else
        bad |= check_bytes(b, n_b, seed_b, "the cuMemAllocAsync buffer (not shared)");
    CU_CHECK(cuMemFreeAsync(b, stream));
    CU_CHECK(cuStreamSynchronize(stream));
    CU_CHECK(cuMemFree(a));
    CU_CHECK(cuStreamDestroy(stream));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    if (bad)
        return 1;
    printf("ipc_pair: cuMemAlloc buffer of %zu bytes: the child read the parent's bytes, the parent the child's\n",
           n_a);
    printf("ipc_pair: cuIpcGetMemHandle of the cuMemAllocAsync buffer: %s%s\n", cu_error_name(rb),
           rb == CUDA_SUCCESS ? " (shared and checked too)" : "");
    return 0;
}
