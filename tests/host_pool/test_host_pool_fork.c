/* The host pool across fork(), with chunks the way the NVIDIA driver maps
 * cuMemHostAlloc memory: a shared mapping (kernel-open/nvidia/nv-mmap.c sets
 * VM_SHARED on system memory mapped through /dev/nvidiactl), which a fork
 * child inherits as the same pages. jemalloc keeps its arena records
 * (mutexes included) in the chunks, and its own pthread_atfork child
 * handler re-initializes every arena's mutexes in the child: with shared
 * chunks it writes into the parent's live records.
 *
 *   test_host_pool_fork            stand-in driver: chunks are MAP_SHARED
 *   test_host_pool_fork --cuda     the real driver (libcuda.so.1, device 0)
 *
 * Checks: (1) the child writes nothing into the parent's chunks; (2) a
 * parent thread waiting on an arena mutex another parent thread holds is
 * woken when that one unlocks it, although a child forked earlier ran its
 * fork handlers meanwhile. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc/host_pool.h"
#include "tests/unit/check.h"

#define PINS_MAX 64
static struct pin {
    uintptr_t base;
    size_t size;
} pins[PINS_MAX];
static int npins;
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;

/* A pin asked while `hold_pins` is set waits, having posted `in_pin`,
 * until `release_pin` is posted: the caller is inside the arena's extent
 * hook, holding jemalloc's grow mutex. */
static volatile int hold_pins;
static sem_t in_pin, release_pin;

static CUresult (*real_host_alloc)(void **, size_t, unsigned int);

static CUresult t_host_alloc(void **pp, size_t size, unsigned int flags)
{
    if (hold_pins) {
        sem_post(&in_pin);
        sem_wait(&release_pin);
    }
    void *p = NULL;
    CUresult r;
    if (real_host_alloc) {
        r = real_host_alloc(&p, size, flags);
    } else {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        r = p == MAP_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    }
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&pins_lock);
        if (npins < PINS_MAX)
            pins[npins++] = (struct pin){(uintptr_t)p, size};
        pthread_mutex_unlock(&pins_lock);
        *pp = p;
    }
    return r;
}

static CUcontext current = (CUcontext)(uintptr_t)0x1000;
#include "tests/host_pool/stub_table.h"

static int use_cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "no libcuda.so.1: %s\n", dlerror());
        return -1;
    }
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*dev_get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult (*set_cur)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
    real_host_alloc = (CUresult(*)(void **, size_t, unsigned))dlsym(h, "cuMemHostAlloc");
    table.mem_free_host = (CUresult(*)(void *))dlsym(h, "cuMemFreeHost");
    table.ctx_get_current = (CUresult(*)(CUcontext *))dlsym(h, "cuCtxGetCurrent");
    table.mem_host_get_device_pointer =
        (CUresult(*)(CUdeviceptr *, void *, unsigned))dlsym(h, "cuMemHostGetDevicePointer_v2");
    CUdevice dev;
    CUcontext ctx;
    if (!init || !dev_get || !retain || !set_cur || !real_host_alloc || init(0) != CUDA_SUCCESS ||
        dev_get(&dev, 0) != CUDA_SUCCESS || retain(&ctx, dev) != CUDA_SUCCESS || set_cur(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "cannot start CUDA\n");
        return -1;
    }
    return 0;
}

/* The child's first fork handler (registered before jemalloc's): waits
 * for the parent's word, so the parent can act between the fork and
 * jemalloc's child handler. */
static int go_pipe[2] = {-1, -1};
static void child_waits(void)
{
    char c;
    if (go_pipe[0] >= 0)
        while (read(go_pipe[0], &c, 1) < 0 && errno == EINTR)
            ;
}

static unsigned char *snapshot(void)
{
    size_t total = 0;
    for (int i = 0; i < npins; i++)
        total += pins[i].size;
    unsigned char *s = malloc(total), *at = s;
    for (int i = 0; i < npins; i++)
        memcpy(at, (void *)pins[i].base, pins[i].size), at += pins[i].size;
    return s;
}

static size_t differing(const unsigned char *a, const unsigned char *b)
{
    size_t total = 0, n = 0;
    for (int i = 0; i < npins; i++)
        total += pins[i].size;
    for (size_t i = 0; i < total; i++)
        n += a[i] != b[i];
    return n;
}

static pid_t fork_held(void)
{
    if (pipe(go_pipe) != 0)
        exit(2);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0); /* its fork handlers have run: drk's, then jemalloc's */
    return pid;
}

static void let_child_go(pid_t pid)
{
    (void)!write(go_pipe[1], "g", 1);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* a child killed by SIGSEGV: the chunks were not inherited */
    close(go_pipe[0]), close(go_pipe[1]);
    go_pipe[0] = go_pipe[1] = -1;
}

/* (1) Nothing but the child acts between the snapshots. */
static void test_child_writes(void)
{
    pid_t pid = fork_held();
    unsigned char *before = snapshot();
    let_child_go(pid);
    unsigned char *after = snapshot();
    size_t n = differing(before, after);
    printf("fork child changed %zu bytes of the parent's chunks\n", n);
    CHECK(n == 0);
    free(before), free(after);
}

static void *big_alloc(void *arg)
{
    void *p = NULL;
    int r = drk_host_pool_alloc(&p, (size_t)(uintptr_t)arg, 0);
    return r == 0 ? p : NULL;
}

/* (2) A holds the grow mutex (inside a pin), B waits on it; the child's
 * handler runs; A finishes. B must finish too. */
static void test_lost_wakeup(void)
{
    sem_init(&in_pin, 0, 0), sem_init(&release_pin, 0, 0);
    pid_t pid = fork_held();
    hold_pins = 1;
    pthread_t a, b;
    pthread_create(&a, NULL, big_alloc, (void *)(uintptr_t)((size_t)300 << 20));
    sem_wait(&in_pin);
    hold_pins = 0;
    pthread_create(&b, NULL, big_alloc, (void *)(uintptr_t)((size_t)310 << 20));
    usleep(300 * 1000); /* B is asleep on the grow mutex */
    let_child_go(pid);
    sem_post(&release_pin);
    void *pa = NULL, *pb = NULL;
    pthread_join(a, &pa);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    int r = pthread_timedjoin_np(b, &pb, &until);
    printf("thread A %s; thread B %s\n", pa ? "allocated" : "failed",
           r == 0 ? (pb ? "allocated" : "failed") : "still waiting after 5 s (lost wake-up)");
    CHECK(pa != NULL);
    CHECK(r == 0 && pb != NULL);
    if (r != 0) {
        printf("%s: FAILED\n", __FILE__);
        fflush(stdout);
        _exit(1);
    }
}

int main(int argc, char **argv)
{
    int cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
    if (cuda && use_cuda() != 0)
        return 2;
    /* Before the pool starts, so before jemalloc registers its handlers. */
    pthread_atfork(NULL, NULL, child_waits);
    drk_host_pool_configure(&table, &(drk_host_pool_settings){.on = 1});
#if !DRK_HOST_POOL_BUILT
    return CHECK_DONE();
#else
    void *p[16];
    for (int i = 0; i < 16; i++) {
        CHECK(drk_host_pool_alloc(&p[i], (size_t)(i + 1) * 5000, 0) == 0);
        memset(p[i], 0x5a, (size_t)(i + 1) * 5000);
    }
    printf("%s driver: %d chunk(s), first at %#lx\n", cuda ? "real" : "stand-in", npins, (unsigned long)pins[0].base);
    test_child_writes();
    test_lost_wakeup();
    return CHECK_DONE();
#endif
}
