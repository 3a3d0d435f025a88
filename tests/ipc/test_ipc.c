/* IPC on pool memory (alloc/ipc.c) between real processes, on the device
 * pool (alloc/device.c) over the stand-in driver's virtual memory calls,
 * linked directly (no preloading): the parent allocates and exports, a
 * child it execs opens the handle, reads the parent's bytes, writes its
 * own and closes; the parent sees them. Then the failures: interior
 * pointers, pages that cannot be exported, bad handles, a handle of a
 * process that has exited, a freed allocation, another user, fork, and an
 * exporter whose runs do not add up.
 *
 * Usage: test_ipc                      (the test)
 *        test_ipc open HANDLE SIZE     (the importing child)
 *        test_ipc export SIZE          (prints a handle, exits)
 *        test_ipc other-user HANDLE    (opens as uid 65534: refused) */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/device.h"
#include "alloc/ipc.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/gpu/programs/linked_driver.h"
#include "tests/unit/check.h"

#define MIB ((size_t)1 << 20)

/* cuCtxSetCurrent on the exporter's answering thread: once armed, the
 * next such call (after the export was found live, before its pages are
 * exported) stops until `serve_go`. */
static atomic_int serve_armed, serve_in, serve_go;
static __thread int test_thread; /* the test's own threads: never held */
static void nap_ms(int ms) { nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L}, NULL); }
static CUresult gated_set_current(CUcontext c)
{
    if (!test_thread && atomic_exchange(&serve_armed, 0)) {
        atomic_store(&serve_in, 1);
        for (int i = 0; i < 5000 && !atomic_load(&serve_go); i++)
            nap_ms(1);
    }
    return cuCtxSetCurrent(c);
}

static drk_driver table;
static CUcontext primary;

static void setup(void)
{
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&primary, dev) || cuCtxSetCurrent(primary)) {
        fprintf(stderr, "set-up failed\n");
        exit(1);
    }
    table = linked_driver;
    table.ctx_set_current = gated_set_current;
    test_thread = 1;
    drk_dpool_settings s = {.reserve = 0, .defrag = 1, .defrag_threshold = 1000};
    drk_dpool_configure(&table, &s);
    drk_ipc_configure(&table);
}

static CUdeviceptr alloc(size_t size)
{
    CUdeviceptr p = 0;
    CUresult r = CUDA_ERROR_UNKNOWN;
    if (!drk_dpool_alloc(&p, size, NULL, 0, &r) || r != CUDA_SUCCESS) {
        fprintf(stderr, "pool allocation of %zu bytes failed\n", size);
        exit(1);
    }
    return p;
}

static void release(CUdeviceptr p)
{
    CUresult r = CUDA_ERROR_UNKNOWN;
    CHECK(drk_dpool_free(p, NULL, 0, &r) && r == CUDA_SUCCESS);
}

/* Byte i of pattern `seed`. */
static unsigned char pat(size_t i, unsigned seed) { return (unsigned char)(i * 31u + seed + (i >> 12)); }

static void write_pattern(CUdeviceptr p, size_t size, unsigned seed)
{
    unsigned char *h = malloc(size);
    for (size_t i = 0; i < size; i++)
        h[i] = pat(i, seed);
    CHECK(cuMemcpyHtoD(p, h, size) == CUDA_SUCCESS);
    free(h);
}

static int has_pattern(CUdeviceptr p, size_t size, unsigned seed)
{
    unsigned char *h = malloc(size);
    int ok = cuMemcpyDtoH(h, p, size) == CUDA_SUCCESS;
    for (size_t i = 0; ok && i < size; i++)
        ok = h[i] == pat(i, seed);
    free(h);
    return ok;
}

static void to_hex(const CUipcMemHandle *h, char out[129])
{
    for (int i = 0; i < 64; i++)
        sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static int from_hex(const char *s, CUipcMemHandle *h)
{
    if (strlen(s) != 128)
        return -1;
    for (int i = 0; i < 64; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        h->reserved[i] = (char)v;
    }
    return 0;
}

/* Runs this program with `args` and returns its exit status (-1 if it
 * did not exit); its standard output, if `out`, in out. */
static int run_self(const char *a1, const char *a2, const char *a3, char *out, size_t outlen)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execl("/proc/self/exe", "test_ipc", a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t k;
    while (out && n + 1 < outlen && (k = read(pfd[0], out + n, outlen - 1 - n)) > 0)
        n += (size_t)k;
    if (out)
        out[n] = '\0';
    close(pfd[0]);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* Open file descriptors: neither side keeps the pages' descriptors. */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

/* ---- The child's side ---- */

static int child_open(const char *hex, size_t size)
{
    CUipcMemHandle h;
    CUdeviceptr p = 0, q = 0;
    CUresult r = CUDA_ERROR_UNKNOWN;
    int fds = count_fds();
    CHECK(from_hex(hex, &h) == 0 && drk_ipc_is_drk_handle(&h));
    CHECK(drk_ipc_import(&p, &h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS && p);
    CHECK(has_pattern(p, size, 1));
    write_pattern(p, size, 2);
    /* Open again in the same context: the same pointer, one more close. */
    CHECK(drk_ipc_import(&q, &h, 0) == CUDA_SUCCESS && q == p);
    CHECK(drk_ipc_close(p, &r) == 1 && r == CUDA_SUCCESS);
    CHECK(has_pattern(p, size, 2));
    CHECK(drk_ipc_close(p, &r) == 1 && r == CUDA_SUCCESS);
    CHECK(drk_ipc_close(p, &r) == 0); /* closed: the driver's to answer */
    size_t free_b, total;
    CHECK(cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS && free_b == total); /* nothing left mapped */
    CHECK(count_fds() == fds);
    return check_failures ? 1 : 0;
}

static int child_export(size_t size)
{
    CUdeviceptr p = alloc(size);
    write_pattern(p, size, 3);
    CUipcMemHandle h;
    char hex[129];
    if (drk_ipc_export(&h, p) != CUDA_SUCCESS)
        return 1;
    to_hex(&h, hex);
    printf("%s\n", hex);
    return 0;
}

static int child_other_user(const char *hex)
{
    CUipcMemHandle h;
    CUdeviceptr p = 0;
    if (from_hex(hex, &h) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
        return 2;
    return drk_ipc_import(&p, &h, 0) == CUDA_ERROR_INVALID_HANDLE ? 0 : 1;
}

/* ---- The tests ---- */

static void test_share(void)
{
    /* A block that starts inside a page and spans several. */
    CUdeviceptr head = alloc(MIB + 4096);
    size_t size = 5 * MIB + 100;
    CUdeviceptr p = alloc(size);
    write_pattern(p, size, 1);
    CUipcMemHandle h, h2;
    int fds = count_fds();
    uint64_t offset;
    CHECK(drk_ipc_export(&h, p) == CUDA_SUCCESS && drk_ipc_is_drk_handle(&h));
    memcpy(&offset, h.reserved + 16, sizeof offset);
    CHECK(offset == (p - head) % (2 * MIB) && offset != 0);
    CHECK(drk_ipc_export(&h2, p) == CUDA_SUCCESS && memcmp(&h, &h2, sizeof h) == 0); /* the same export */
    char hex[129], sz[32];
    to_hex(&h, hex);
    snprintf(sz, sizeof sz, "%zu", size);
    CHECK(run_self("open", hex, sz, NULL, 0) == 0);
    CHECK(has_pattern(p, size, 2));    /* the child's bytes */
    CHECK(count_fds() == fds + 1);     /* the socket only */

    /* The exporting process may open its own handle (its thread answers). */
    CUdeviceptr q = 0, q2 = 0;
    CUresult r;
    CHECK(drk_ipc_import(&q, &h, 0) == CUDA_SUCCESS && q && q != p && has_pattern(q, size, 2));
    CHECK(drk_ipc_import(&q2, &h, 0) == CUDA_SUCCESS && q2 == q);
    CHECK(drk_ipc_close(q, &r) == 1 && r == CUDA_SUCCESS && drk_ipc_close(q, &r) == 1 && r == CUDA_SUCCESS);
    CHECK(drk_ipc_close(q, &r) == 0);

    /* Interior pointers and memory not the pool's cannot be exported. */
    CHECK(drk_ipc_export(&h2, p + 4096) == CUDA_ERROR_INVALID_VALUE);
    CHECK(drk_ipc_export(&h2, (CUdeviceptr)(uintptr_t)&h2) == CUDA_ERROR_INVALID_VALUE);
    CHECK(drk_ipc_export(NULL, p) == CUDA_ERROR_INVALID_VALUE);
    release(p);
    release(head);
}

/* A block over runs (pages made as one handle each, alloc/heap.h): the
 * handle's offset is from the start of the first run under it, which
 * begins before the block; the runs reach past its end. The importer maps
 * each run whole and sees the block's bytes. */
static void test_share_runs(void)
{
    CUdeviceptr a = alloc(40 * MIB); /* runs of 5, 3, 3 and 2 pages, then single pages */
    release(a);
    CUdeviceptr head = alloc(MIB), p = alloc(30 * MIB + 100);
    CHECK(head == a && p == a + MIB);
    size_t size = 30 * MIB + 100;
    write_pattern(p, size, 1);
    CUipcMemHandle h;
    uint64_t offset;
    CHECK(drk_ipc_export(&h, p) == CUDA_SUCCESS);
    memcpy(&offset, h.reserved + 16, sizeof offset);
    CHECK(offset == MIB);
    char hex[129], sz[32];
    to_hex(&h, hex);
    snprintf(sz, sizeof sz, "%zu", size);
    CHECK(run_self("open", hex, sz, NULL, 0) == 0);
    CHECK(has_pattern(p, size, 2));
    release(p);
    release(head);
}

/* A rogue exporter (this test, on a socket named as drk names its own):
 * replies whose runs do not add up to the pages announced are refused, the
 * descriptors sent closed, nothing mapped.
 * The layouts are ipc.c's wire format. */
typedef struct rogue_reply {
    uint32_t status, pad;
    uint64_t runs, pages, page_size, offset, size;
} rogue_reply;

typedef struct rogue_batch {
    uint32_t n;
    uint32_t lens[250];
} rogue_batch;

typedef struct rogue {
    int fd;
    uint32_t lens[2];
    int send[2]; /* descriptors of real pages, or -1: /dev/null's */
} rogue;

static void *rogue_serve(void *arg)
{
    rogue *g = arg;
    int c = accept(g->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    char q[16];
    if (recv(c, q, sizeof q, 0) == (ssize_t)sizeof q) {
        rogue_reply a = {.status = 0, .runs = 2, .pages = 3, .page_size = 2 * MIB, .offset = 0, .size = MIB};
        send(c, &a, sizeof a, MSG_NOSIGNAL);
        int fds[2];
        for (int k = 0; k < 2; k++)
            fds[k] = g->send[k] >= 0 ? dup(g->send[k]) : open("/dev/null", O_RDONLY);
        rogue_batch b = {.n = 2, .lens = {g->lens[0], g->lens[1]}};
        char ctl[CMSG_SPACE(2 * sizeof(int))];
        memset(ctl, 0, sizeof ctl);
        struct iovec iov = {.iov_base = &b, .iov_len = sizeof b};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, sizeof fds);
        sendmsg(c, &m, MSG_NOSIGNAL);
        close(fds[0]), close(fds[1]);
        char end;
        recv(c, &end, 1, 0); /* until the importer hangs up */
    }
    close(c);
    return NULL;
}

static void test_rogue_runs(void)
{
    /* Two real pages of the driver's, exportable: runs that import but
     * fall short of the three pages announced. */
    CUdevice dev;
    CUmemGenericAllocationHandle page[2];
    int page_fd[2] = {-1, -1};
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    CHECK(cuCtxGetDevice(&dev) == CUDA_SUCCESS);
    prop.location.id = dev;
    for (int k = 0; k < 2; k++)
        CHECK(cuMemCreate(&page[k], 2 * MIB, &prop, 0) == CUDA_SUCCESS &&
              cuMemExportToShareableHandle(&page_fd[k], page[k], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
                  CUDA_SUCCESS);
    /* Case 1 sends /dev/null, not pages: the import fails. */
    static const uint32_t bad[][2] = {{1, 1}, {1, 1}, {2, 5}, {0, 3}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fds = count_fds();
        uint64_t secret = 0x5eed0000u + i;
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        int n = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "drk-ipc-%u-%016llx", (unsigned)getpid(),
                         (unsigned long long)secret);
        socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
        rogue g = {.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), .lens = {bad[i][0], bad[i][1]},
                   .send = {i == 1 ? -1 : page_fd[0], i == 1 ? -1 : page_fd[1]}};
        CHECK(g.fd >= 0 && bind(g.fd, (struct sockaddr *)&addr, len) == 0 && listen(g.fd, 1) == 0);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, rogue_serve, &g) == 0);
        CUipcMemHandle h;
        memset(&h, 0, sizeof h);
        uint32_t pid = (uint32_t)getpid();
        uint64_t id = 1, size = MIB;
        memcpy(h.reserved, "drk\2", 4);
        memcpy(h.reserved + 4, &pid, 4);
        memcpy(h.reserved + 8, &id, 8);
        memcpy(h.reserved + 24, &size, 8);
        memcpy(h.reserved + 32, &secret, 8);
        CUdeviceptr p = 0;
        CUresult r = drk_ipc_import(&p, &h, 0);
        /* Refused: before importing (a run of 0, or past the pages
         * announced), or when the descriptors, not the driver's, fail to
         * import, or when the runs fall short. */
        CHECK(r != CUDA_SUCCESS && p == 0);
        pthread_join(t, NULL);
        close(g.fd);
        CHECK(count_fds() == fds);
    }
    for (int k = 0; k < 2; k++) {
        close(page_fd[k]);
        CHECK(cuMemRelease(page[k]) == CUDA_SUCCESS);
    }
}

static void test_not_exportable(void)
{
    CUdeviceptr p = alloc(3 * MIB);
    CUipcMemHandle h;
    fakecuda_inject_error("cuMemExportToShareableHandle", CUDA_ERROR_NOT_SUPPORTED, 1);
    CHECK(drk_ipc_export(&h, p) == CUDA_ERROR_INVALID_VALUE);
    CHECK(drk_ipc_export(&h, p) == CUDA_SUCCESS); /* the driver exports again */
    release(p);
}

static void test_bad_handles(void)
{
    CUipcMemHandle zero, h, bad;
    CUdeviceptr p = 0;
    memset(&zero, 0, sizeof zero);
    CHECK(!drk_ipc_is_drk_handle(&zero) && !drk_ipc_is_drk_handle(NULL));
    CHECK(drk_ipc_import(&p, &zero, 0) == CUDA_ERROR_INVALID_HANDLE);

    CUdeviceptr a = alloc(MIB);
    write_pattern(a, MIB, 5);
    CHECK(drk_ipc_export(&h, a) == CUDA_SUCCESS);
    CHECK(drk_ipc_import(&p, &h, 0x10) == CUDA_ERROR_INVALID_VALUE);
    CHECK(drk_ipc_import(NULL, &h, 0) == CUDA_ERROR_INVALID_VALUE);
    /* An export id the exporter never gave. */
    bad = h;
    bad.reserved[8] ^= 0x40;
    CHECK(drk_ipc_import(&p, &bad, 0) == CUDA_ERROR_INVALID_HANDLE);
    /* Another socket name (pid or random part): nobody answers. */
    bad = h;
    bad.reserved[32] ^= 1;
    CHECK(drk_ipc_import(&p, &bad, 0) == CUDA_ERROR_INVALID_HANDLE);
    bad = h;
    bad.reserved[4] ^= 1;
    CHECK(drk_ipc_import(&p, &bad, 0) == CUDA_ERROR_INVALID_HANDLE);
    /* A size that does not match the exporter's: refused. */
    bad = h;
    bad.reserved[24] ^= 1;
    CHECK(drk_ipc_import(&p, &bad, 0) == CUDA_ERROR_INVALID_HANDLE);

    /* A freed allocation's handle no longer opens; the next allocation at
     * the same address gets a handle of its own (cuda.h). */
    release(a);
    CHECK(drk_ipc_import(&p, &h, 0) == CUDA_ERROR_INVALID_HANDLE);
    CUdeviceptr b = alloc(MIB);
    CUipcMemHandle hb;
    CHECK(drk_ipc_export(&hb, b) == CUDA_SUCCESS && memcmp(&hb, &h, sizeof h) != 0);
    release(b);
}

static void test_exited_process(void)
{
    char out[256];
    CHECK(run_self("export", "3000000", NULL, out, sizeof out) == 0);
    out[strcspn(out, "\n")] = '\0';
    CUipcMemHandle h;
    CUdeviceptr p = 0;
    CHECK(from_hex(out, &h) == 0 && drk_ipc_is_drk_handle(&h));
    CHECK(drk_ipc_import(&p, &h, 0) == CUDA_ERROR_INVALID_HANDLE);
}

static void test_other_user(void)
{
    if (geteuid() != 0) {
        printf("%s: not root, another user's open is not tested\n", __FILE__);
        return;
    }
    CUdeviceptr a = alloc(MIB);
    CUipcMemHandle h;
    char hex[129];
    CHECK(drk_ipc_export(&h, a) == CUDA_SUCCESS);
    to_hex(&h, hex);
    CHECK(run_self("other-user", hex, NULL, NULL, 0) == 0);
    release(a);
}

/* A fork child: the parent's imports are not its own; it exports through
 * a socket of its own and may still open the parent's handles. */
static void test_fork(void)
{
    size_t size = 2 * MIB + 7;
    CUdeviceptr a = alloc(size), q = 0;
    write_pattern(a, size, 6);
    CUipcMemHandle h;
    CUresult r;
    CHECK(drk_ipc_export(&h, a) == CUDA_SUCCESS && drk_ipc_import(&q, &h, 0) == CUDA_SUCCESS);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        drk_dpool_after_fork_child();
        drk_ipc_after_fork_child();
        int ok = drk_ipc_close(q, &r) == 0; /* the parent's import: forgotten */
        CUdeviceptr pq = 0, c = alloc(MIB), cq = 0;
        write_pattern(c, MIB, 7);
        CUipcMemHandle hc;
        ok &= drk_ipc_import(&pq, &h, 0) == CUDA_SUCCESS && has_pattern(pq, size, 6);
        ok &= drk_ipc_export(&hc, c) == CUDA_SUCCESS;
        uint32_t pid_in;
        memcpy(&pid_in, hc.reserved + 4, sizeof pid_in);
        ok &= pid_in == (uint32_t)getpid();
        ok &= drk_ipc_import(&cq, &hc, 0) == CUDA_SUCCESS && has_pattern(cq, MIB, 7);
        ok &= drk_ipc_close(cq, &r) == 1 && r == CUDA_SUCCESS && drk_ipc_close(pq, &r) == 1 && r == CUDA_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    int st;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(drk_ipc_close(q, &r) == 1 && r == CUDA_SUCCESS); /* the parent's own, still there */
    release(a);
}

/* The pool's context ends while the exporter's thread answers an open
 * of one of its allocations, after it found the export live and before
 * it exported the pages: the pages must not be exported from a backend
 * the pool let go (before, they were: the sanitizer build reported a use
 * after free); the open fails instead. */
static CUipcMemHandle ending_handle;
static atomic_int opened;
static void *opener(void *arg)
{
    (void)arg;
    test_thread = 1;
    cuCtxSetCurrent(primary);
    CUdeviceptr q = 0;
    CUresult r = drk_ipc_import(&q, &ending_handle, 0);
    atomic_store(&opened, r == CUDA_SUCCESS ? 1 : 2);
    if (r == CUDA_SUCCESS)
        drk_ipc_close(q, &r);
    return NULL;
}

static void test_context_ends_while_serving(void)
{
    CUdeviceptr a = alloc(40 * MIB); /* the next block spans several runs */
    CUdeviceptr p = alloc(24 * MIB);
    release(a);
    CHECK(drk_ipc_export(&ending_handle, p) == CUDA_SUCCESS);
    atomic_store(&serve_armed, 1);
    pthread_t o;
    CHECK(pthread_create(&o, NULL, opener, NULL) == 0);
    for (int i = 0; i < 5000 && !atomic_load(&serve_in); i++)
        nap_ms(1);
    CHECK(atomic_load(&serve_in)); /* found live, not yet exported */
    drk_dpool_context_ends(primary, 1);
    atomic_store(&serve_go, 1);
    pthread_join(o, NULL);
    printf("context_ends_while_serving: the open %s\n", atomic_load(&opened) == 1 ? "succeeded" : "failed");
    CHECK(atomic_load(&opened) == 2);
}

int main(int argc, char **argv)
{
    setup();
    if (argc == 4 && strcmp(argv[1], "open") == 0)
        return child_open(argv[2], strtoull(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "export") == 0)
        return child_export(strtoull(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "other-user") == 0)
        return child_other_user(argv[2]);
    test_share();
    test_share_runs();
    test_rogue_runs();
    test_not_exportable();
    test_bad_handles();
    test_exited_process();
    test_other_user();
    test_fork();
    test_context_ends_while_serving();
    return CHECK_DONE();
}
