/* IPC on pool memory. The driver's cuIpcGetMemHandle cannot share pages
 * made with cuMemCreate, so drk shares them itself: the exporting process
 * hands the pages under an allocation, as POSIX file descriptors, to the
 * importing process over a unix socket, and the importer maps them into a
 * range of its own.
 *
 * The handle (the 64 bytes of CUipcMemHandle) holds: "drk\2", the
 * exporter's pid, the export's id (counted per process), the allocation's
 * offset in its first page, its size, the exporter's device, and a random
 * number drawn once per process that names the exporter's socket
 * ("\0drk-ipc-<pid>-<random>", abstract: nothing on the file system, gone
 * with the process; a recycled pid has another random, so a dead
 * exporter's handle never reaches a stranger).
 *
 * Exporter: drk_ipc_export records (base, the allocation's buffer id, the
 * handles of the runs of pages under it: a handle maps only whole, so a run
 * may reach past the allocation) and starts, once per process, a thread that accepts on the
 * socket. An allocation exported again gets the same handle; one freed and
 * allocated again (even at the same address) has another buffer id, so a
 * new export and a new handle, as cuda.h asks. No file descriptor is kept:
 * for each request the thread checks the peer's uid (SO_PEERCRED: our own,
 * or it refuses), checks that the allocation is still live with the same
 * pages (they never move under a live block), exports the pages then, and
 * sends them in messages of at most BATCH descriptors (SCM_RIGHTS), closing
 * its copies after each. So a shared allocation never pins device memory
 * after the program frees it, and neither side holds more than BATCH
 * descriptors at a time. Records of freed allocations are dropped at the
 * next export.
 *
 * Importer: connects, asks for the export, imports each descriptor
 * (cuMemImportFromShareableHandle) and closes it, reserves a range of all
 * the runs' pages, maps each run whole and grants the current context's
 * device read-write
 * access; returns base + offset. Opening a handle that this context has
 * open returns the same pointer and counts one more open (cuda.h);
 * cuIpcCloseMemHandle unmaps at the last close. A process may open its own
 * handles (its own thread answers), which the driver refuses; nothing else
 * changes.
 *
 * Failures: an exporter that cannot be reached, is gone, refuses, or no
 * longer has the allocation gives CUDA_ERROR_INVALID_HANDLE and one log
 * line. Every socket call times out after TIMEOUT_S: nothing waits forever.
 * Export of memory drk cannot share (an interior pointer, pages the driver
 * would not make exportable) gives CUDA_ERROR_INVALID_VALUE, as the driver
 * gives for its own pool memory, with one warning per reason. */
#define _GNU_SOURCE
#include "alloc/ipc.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "alloc/device.h"
#include "alloc/pages.h"
#include "alloc/pages_vmm.h"
#include "base/log.h"

#define MAGIC "drk\2" /* 2: runs of pages, each with its length */
#define BATCH 250
#define TIMEOUT_S 10
/* An export larger than this many pages (2 PiB of 2 MiB pages) is a corrupt reply. */
#define MAX_PAGES ((uint64_t)1 << 30)

typedef struct wire_handle {
    char magic[4];
    uint32_t pid;
    uint64_t id;
    uint64_t offset; /* of the allocation in its first run */
    uint64_t size;
    uint64_t secret; /* the exporter's socket name */
    int32_t device;
    uint32_t zero[5];
} wire_handle;
_Static_assert(sizeof(wire_handle) == sizeof(CUipcMemHandle), "a drk handle fills CUipcMemHandle");

/* Importer -> exporter: which export. */
typedef struct request {
    char magic[4];
    uint32_t pad;
    uint64_t id;
} request;

enum { REPLY_OK, REPLY_UNKNOWN, REPLY_REFUSED, REPLY_FAILED };

/* Exporter -> importer, before the descriptors. */
typedef struct reply {
    uint32_t status;
    uint32_t pad;
    uint64_t runs, pages, page_size, offset, size;
} reply;

/* Exporter -> importer: up to BATCH descriptors (SCM_RIGHTS), one a run,
 * and the runs' lengths in pages. */
typedef struct batch {
    uint32_t n;
    uint32_t lens[BATCH];
} batch;

typedef struct export {
    struct export *next;
    uint64_t id, buffer_id;
    CUdeviceptr base;
    size_t size, offset, n, npages; /* n runs of npages pages in all */
    CUcontext ctx;
    int device;
    drk_page_backend *backend;
    uint64_t *runs;
    uint32_t *lens;
} export;

typedef struct import {
    struct import *next;
    uint32_t pid;
    uint64_t secret, id;
    CUcontext ctx;
    CUdeviceptr ptr, va;
    size_t size; /* the allocation's, as its exporter asked */
    size_t n, pages, page_size; /* n runs, pages in all */
    CUmemGenericAllocationHandle *handles;
    uint32_t *lens;
    unsigned refs;
} import;

static drk_driver drv_copy;
static const drk_driver *drv; /* &drv_copy once configured */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Under the lock. */
static export *exports;
static import *imports;
static atomic_int nimports; /* so queries on other memory skip the lock */
static uint64_t next_id = 1;
static int listen_fd = -1;
static uint64_t secret;
static atomic_int warned_interior, warned_exportable, warned_socket;

void drk_ipc_configure(const drk_driver *d)
{
    drv_copy = *d; /* the table handed in may be a thread's own copy */
    drv = &drv_copy;
}

static void socket_name(struct sockaddr_un *a, socklen_t *len, uint32_t pid, uint64_t rnd)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "drk-ipc-%u-%016llx", pid, (unsigned long long)rnd);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void close_all(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* ---- Exporter: the socket's thread ---- */

static int send_fds(int s, const int *fds, const batch *bt)
{
    uint32_t n = bt->n;
    char ctl[CMSG_SPACE(BATCH * sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)bt, .iov_len = sizeof *bt};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = CMSG_SPACE(n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    return sendmsg(s, &m, MSG_NOSIGNAL) == (ssize_t)sizeof *bt ? 0 : -1;
}

/* A copy of export `id`'s record, if its allocation is still the one
 * exported, with the same runs (out->runs, out->lens: the caller's to free). */
static int live_export(uint64_t id, export *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&lock);
    export *e = exports;
    while (e && e->id != id)
        e = e->next;
    int ok = 0;
    if (e) {
        *out = *e;
        out->runs = malloc(e->n * sizeof *out->runs);
        out->lens = malloc(e->n * sizeof *out->lens);
        ok = out->runs && out->lens;
    }
    pthread_mutex_unlock(&lock);
    if (ok) {
        drk_dpool_block blk;
        size_t n = 0, size = 0;
        uintptr_t first_va = 0;
        drk_page_backend *b = NULL;
        ok = drk_dpool_query(out->base, &blk) == 1 && blk.base == out->base && blk.buffer_id == out->buffer_id &&
             drk_dpool_block_runs(out->base, out->runs, out->lens, out->n, &n, &first_va, &size, &b) == 0 &&
             n == out->n && b == out->backend && out->base - first_va == out->offset;
        /* The record's arrays, compared under the lock: a prune may free them. */
        pthread_mutex_lock(&lock);
        for (e = exports; e && e->id != id; e = e->next) {
        }
        ok = ok && e && memcmp(out->runs, e->runs, n * sizeof *e->runs) == 0 &&
             memcmp(out->lens, e->lens, n * sizeof *e->lens) == 0;
        pthread_mutex_unlock(&lock);
    }
    if (!ok) {
        free(out->runs);
        free(out->lens);
        out->runs = NULL, out->lens = NULL;
    }
    return ok;
}

static void serve(int s)
{
    set_timeouts(s);
    struct ucred cred;
    socklen_t clen = sizeof cred;
    request q;
    reply a = {.status = REPLY_FAILED};
    if (recv(s, &q, sizeof q, 0) != (ssize_t)sizeof q || memcmp(q.magic, MAGIC, 4) != 0)
        return;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
        a.status = REPLY_REFUSED;
        send(s, &a, sizeof a, MSG_NOSIGNAL);
        return;
    }
    /* The backend and its handles are used only under a hold, each time
     * after the export was found live: a pool whose context ends releases
     * them (sockets are waited on outside it). */
    export e;
    drk_dpool_backends_hold();
    int live = live_export(q.id, &e);
    size_t page_size = live ? e.backend->page_size : 0;
    drk_dpool_backends_release();
    if (!live) {
        a.status = REPLY_UNKNOWN;
        send(s, &a, sizeof a, MSG_NOSIGNAL);
        return;
    }
    /* Exports happen in the pool's context, as the pool's own calls do. */
    if (drv->ctx_set_current)
        drv->ctx_set_current(e.ctx);
    a = (reply){.status = REPLY_OK, .runs = e.n, .pages = e.npages, .page_size = page_size, .offset = e.offset,
                .size = e.size};
    if (send(s, &a, sizeof a, MSG_NOSIGNAL) != (ssize_t)sizeof a) {
        free(e.runs);
        free(e.lens);
        return;
    }
    int fds[BATCH];
    batch bt;
    for (size_t at = 0; at < e.n;) {
        uint32_t k = e.n - at < BATCH ? (uint32_t)(e.n - at) : BATCH;
        uint32_t got = 0;
        export again;
        drk_dpool_backends_hold();
        if (live_export(q.id, &again)) {
            while (got < k && drk_pages_vmm_export(e.backend, e.runs[at + got], &fds[got]) == 0)
                got++;
            free(again.runs);
            free(again.lens);
        }
        drk_dpool_backends_release();
        memset(&bt, 0, sizeof bt);
        bt.n = k;
        memcpy(bt.lens, e.lens + at, k * sizeof *bt.lens);
        int sent = got == k && send_fds(s, fds, &bt) == 0;
        close_all(fds, got);
        if (!sent) {
            /* The importer sees the connection end early and fails the open. */
            drk_log(DRK_LOG_WARN, "IPC: could not %s the pages of export %llu for process %d (%s)",
                    got < k ? "export" : "send", (unsigned long long)q.id, (int)cred.pid,
                    got < k ? "freed, its context ended, or the driver refused" : strerror(errno));
            break;
        }
        at += k;
    }
    free(e.runs);
    free(e.lens);
}

static void *server(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (;;) {
        int s = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (s >= 0) {
            serve(s);
            close(s);
        } else if (errno == EBADF || errno == EINVAL) {
            return NULL; /* the socket is gone (a fork child closed its copy) */
        } else if (errno != EINTR && errno != ECONNABORTED) {
            /* Out of descriptors or memory: let them come back. */
            nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
        }
    }
}

static uint64_t random_u64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^
            (uint64_t)(uintptr_t)&ts;
    }
    return r;
}

/* Under the lock: the socket and its thread, once per process. 0, or errno. */
static int start_server(void)
{
    if (listen_fd >= 0)
        return 0;
    uint64_t rnd = random_u64();
    struct sockaddr_un addr;
    socklen_t len;
    socket_name(&addr, &len, (uint32_t)getpid(), rnd);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, 64) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    /* The thread takes no signals: they belong to the program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &at, server, (void *)(intptr_t)fd);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        close(fd);
        return err;
    }
    listen_fd = fd, secret = rnd;
    return 0;
}

/* ---- Exporter: the handle ---- */

static void fill_handle(CUipcMemHandle *h, const export *e)
{
    wire_handle w = {.pid = (uint32_t)getpid(), .id = e->id, .offset = e->offset, .size = e->size,
                     .secret = secret, .device = e->device};
    memcpy(w.magic, MAGIC, 4);
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &w, sizeof w);
}

static CUresult impossible(atomic_int *once, const char *why)
{
    if (!atomic_exchange(once, 1))
        drk_log(DRK_LOG_WARN, "cuIpcGetMemHandle on drk pool memory is not possible here (%s); run with "
                              "DRK_ALLOC=0 to keep allocations in the driver", why);
    return CUDA_ERROR_INVALID_VALUE;
}

/* Under the lock: drops the records of allocations freed since. */
static void prune(void)
{
    for (export **p = &exports; *p;) {
        export *e = *p;
        drk_dpool_block blk;
        if (drk_dpool_query(e->base, &blk) == 1 && blk.base == e->base && blk.buffer_id == e->buffer_id) {
            p = &e->next;
            continue;
        }
        *p = e->next;
        free(e->runs);
        free(e->lens);
        free(e);
    }
}

/* Under the lock. */
static export *find_export(CUdeviceptr base, uint64_t buffer_id)
{
    for (export *e = exports; e; e = e->next)
        if (e->base == base && e->buffer_id == buffer_id)
            return e;
    return NULL;
}

CUresult drk_ipc_export(CUipcMemHandle *handle, CUdeviceptr base)
{
    if (!handle || !drv)
        return CUDA_ERROR_INVALID_VALUE;
    drk_dpool_block blk;
    if (drk_dpool_query(base, &blk) != 1 || blk.base != base)
        return impossible(&warned_interior, "the pointer is not the start of a live allocation");
    pthread_mutex_lock(&lock);
    export *e = find_export(base, blk.buffer_id);
    if (e)
        fill_handle(handle, e);
    pthread_mutex_unlock(&lock);
    if (e)
        return CUDA_SUCCESS;

    /* The runs: count them, then fetch them. */
    export *x = calloc(1, sizeof *x);
    size_t n = 0, size = 0;
    uintptr_t first_va = 0;
    drk_page_backend *b = NULL;
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int rc = drk_dpool_block_runs(base, NULL, NULL, 0, &n, &first_va, &size, &b);
    if (rc == DRK_PAGES_OOM && n) {
        x->runs = malloc(n * sizeof *x->runs);
        x->lens = malloc(n * sizeof *x->lens);
    }
    if (x->runs && x->lens)
        rc = drk_dpool_block_runs(base, x->runs, x->lens, n, &x->n, &first_va, &size, &b);
    for (size_t i = 0; rc == 0 && x->lens && i < x->n; i++)
        x->npages += x->lens[i];
    if (!x->runs || !x->lens || rc != 0 || x->n != n || !b || first_va > base ||
        base - first_va + size > x->npages * b->page_size) {
        int oom = n && (!x->runs || !x->lens);
        free(x->runs);
        free(x->lens);
        free(x);
        return oom ? CUDA_ERROR_OUT_OF_MEMORY
                   : impossible(&warned_interior, "the pointer is not the start of a live allocation");
    }
    /* Fail now, not in the importer, when the pages cannot be shared. */
    int fd = -1;
    if (drk_pages_vmm_export(b, x->runs[0], &fd) != 0) {
        free(x->runs);
        free(x->lens);
        free(x);
        return impossible(&warned_exportable, "the driver does not make drk's pages exportable as POSIX file "
                                              "descriptors");
    }
    close(fd);
    x->buffer_id = blk.buffer_id, x->base = base, x->size = size, x->offset = base - first_va;
    x->ctx = blk.ctx, x->device = blk.device, x->backend = b;

    pthread_mutex_lock(&lock);
    int err = start_server();
    e = err ? NULL : find_export(base, blk.buffer_id); /* exported meanwhile by another thread */
    if (!err && !e) {
        prune();
        x->id = next_id++;
        x->next = exports;
        exports = e = x, x = NULL;
    }
    if (e)
        fill_handle(handle, e);
    pthread_mutex_unlock(&lock);
    if (x) {
        free(x->runs);
        free(x->lens);
        free(x);
    }
    if (err) {
        char why[160];
        snprintf(why, sizeof why, "no unix socket to serve it: %s", strerror(err));
        return impossible(&warned_socket, why);
    }
    return CUDA_SUCCESS;
}

int drk_ipc_is_drk_handle(const CUipcMemHandle *handle)
{
    return handle && memcmp(handle->reserved, MAGIC, 4) == 0;
}

/* ---- Importer ---- */

/* Reads one message of `len` bytes and up to `max` descriptors; *nfd gets
 * how many came. 0, or -1 (descriptors received are closed). */
static int recv_fds(int s, void *buf, size_t len, int *fds, size_t max, size_t *nfd)
{
    char ctl[CMSG_SPACE(BATCH * sizeof(int))];
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t got = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    *nfd = 0;
    for (struct cmsghdr *c = got >= 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (*nfd < max)
                fds[(*nfd)++] = fd;
            else
                close(fd);
        }
    }
    if (got != (ssize_t)len || (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
        close_all(fds, *nfd);
        *nfd = 0;
        return -1;
    }
    return 0;
}

typedef struct fetched {
    CUmemGenericAllocationHandle *handles;
    uint32_t *lens;
    size_t n, pages, page_size, offset, size; /* n runs, pages in all */
} fetched;

static void release_handles(CUmemGenericAllocationHandle *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        drv->mem_release(h[i]);
}

/* Asks the exporter for the pages and imports them. CUDA_SUCCESS, or an
 * error with `why` filled for the log. */
static CUresult fetch(const wire_handle *w, fetched *f, char *why, size_t whylen)
{
    struct sockaddr_un addr;
    socklen_t len;
    socket_name(&addr, &len, w->pid, w->secret);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return CUDA_ERROR_INVALID_HANDLE;
    }
    set_timeouts(s);
    request q = {.id = w->id};
    memcpy(q.magic, MAGIC, 4);
    reply a;
    size_t nfd;
    CUresult r = CUDA_ERROR_INVALID_HANDLE;
    if (connect(s, (struct sockaddr *)&addr, len) != 0) {
        snprintf(why, whylen, "the exporting process is gone or has no drk IPC socket: %s", strerror(errno));
        goto out;
    }
    errno = 0;
    if (send(s, &q, sizeof q, MSG_NOSIGNAL) != (ssize_t)sizeof q || recv_fds(s, &a, sizeof a, NULL, 0, &nfd) != 0) {
        snprintf(why, whylen, "no answer from the exporting process: %s", errno ? strerror(errno) : "closed");
        goto out;
    }
    if (a.status != REPLY_OK) {
        snprintf(why, whylen, "%s", a.status == REPLY_REFUSED ? "the exporting process refused (another user)"
                                    : a.status == REPLY_UNKNOWN ? "the allocation is no longer exported (freed?)"
                                                                : "the exporting process failed");
        goto out;
    }
    if (!a.pages || a.pages > MAX_PAGES || !a.runs || a.runs > a.pages || !a.page_size ||
        (a.page_size & (a.page_size - 1)) || a.offset != w->offset || a.size != w->size ||
        a.offset >= a.pages * a.page_size || a.size > a.pages * a.page_size - a.offset) {
        snprintf(why, whylen, "the exporting process answered with a layout that does not match the handle");
        goto out;
    }
    f->handles = malloc(a.runs * sizeof *f->handles);
    f->lens = malloc(a.runs * sizeof *f->lens);
    if (!f->handles || !f->lens) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        snprintf(why, whylen, "out of host memory");
        goto fail;
    }
    f->n = 0, f->pages = 0, f->page_size = a.page_size, f->offset = a.offset, f->size = a.size;
    int fds[BATCH];
    batch bt;
    while (f->n < a.runs) {
        int ok = recv_fds(s, &bt, sizeof bt, fds, BATCH, &nfd) == 0 && bt.n == nfd && bt.n &&
                 bt.n <= a.runs - f->n;
        for (size_t i = 0; ok && i < bt.n; i++)
            ok = bt.lens[i] && bt.lens[i] <= a.pages - f->pages - i; /* never past the pages announced */
        if (!ok) {
            close_all(fds, nfd);
            snprintf(why, whylen, "the exporting process sent %zu of %llu runs, or runs that do not add up", f->n,
                     (unsigned long long)a.runs);
            goto fail;
        }
        for (size_t i = 0; i < bt.n; i++) {
            CUresult ri = drv->mem_import_from_shareable_handle(&f->handles[f->n], (void *)(uintptr_t)fds[i],
                                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
            close(fds[i]);
            if (ri != CUDA_SUCCESS) {
                close_all(fds + i + 1, bt.n - i - 1);
                r = ri;
                snprintf(why, whylen, "cuMemImportFromShareableHandle failed (error %d)", (int)ri);
                goto fail;
            }
            f->lens[f->n++] = bt.lens[i];
            f->pages += bt.lens[i];
        }
    }
    if (f->pages != a.pages) {
        snprintf(why, whylen, "the exporting process sent runs of %zu pages, not %llu", f->pages,
                 (unsigned long long)a.pages);
        goto fail;
    }
    close(s);
    return CUDA_SUCCESS;
fail:
    if (f->handles)
        release_handles(f->handles, f->n);
    free(f->handles);
    free(f->lens);
    f->handles = NULL, f->lens = NULL;
out:
    close(s);
    return r;
}

/* Unmaps the first `n` runs mapped from va: the first error. */
static CUresult unmap_runs(CUdeviceptr va, const uint32_t *lens, size_t n, size_t page_size)
{
    CUresult first = CUDA_SUCCESS, e;
    for (size_t i = 0, at = 0; i < n; at += lens[i++] * page_size)
        if ((e = drv->mem_unmap(va + at, lens[i] * page_size)) != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = e;
    return first;
}

/* Maps the fetched runs, each whole, into a new range with read-write
 * access for the current context's device. */
static CUresult map_pages(const fetched *f, CUdeviceptr *va)
{
    CUdevice dev;
    CUresult r = drv->ctx_get_device(&dev);
    size_t bytes = f->pages * f->page_size, mapped = 0, at = 0;
    if (r == CUDA_SUCCESS)
        r = drv->mem_address_reserve(va, bytes, f->page_size, 0, 0);
    if (r != CUDA_SUCCESS)
        return r;
    for (; mapped < f->n && r == CUDA_SUCCESS; at += f->lens[mapped++] * f->page_size)
        r = drv->mem_map(*va + at, f->lens[mapped] * f->page_size, 0, f->handles[mapped], 0);
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                             .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        r = drv->mem_set_access(*va, bytes, &d, 1);
    } else {
        mapped--; /* the failed one is not mapped */
    }
    if (r != CUDA_SUCCESS) {
        unmap_runs(*va, f->lens, mapped, f->page_size);
        drv->mem_address_free(*va, bytes);
    }
    return r;
}

/* Under the lock. */
static import *find_import(const wire_handle *w, CUcontext ctx)
{
    for (import *i = imports; i; i = i->next)
        if (i->pid == w->pid && i->secret == w->secret && i->id == w->id && i->ctx == ctx)
            return i;
    return NULL;
}

/* Unmaps, releases and frees an import: the first error is the program's answer. */
static CUresult unmap_import(import *i)
{
    CUresult first = unmap_runs(i->va, i->lens, i->n, i->page_size), e;
    for (size_t k = 0; k < i->n; k++)
        if ((e = drv->mem_release(i->handles[k])) != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = e;
    if ((e = drv->mem_address_free(i->va, i->pages * i->page_size)) != CUDA_SUCCESS && first == CUDA_SUCCESS)
        first = e;
    free(i->handles);
    free(i->lens);
    free(i);
    return first;
}

CUresult drk_ipc_import(CUdeviceptr *ptr, const CUipcMemHandle *handle, unsigned int flags)
{
    if (!ptr || !handle || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    if (!drk_ipc_is_drk_handle(handle) || !drv || !drv->mem_import_from_shareable_handle || !drv->ctx_get_device)
        return CUDA_ERROR_INVALID_HANDLE;
    wire_handle w;
    memcpy(&w, handle->reserved, sizeof w);
    CUcontext ctx = NULL;
    if (drv->ctx_get_current && (drv->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx))
        return CUDA_ERROR_INVALID_CONTEXT;

    pthread_mutex_lock(&lock);
    import *i = find_import(&w, ctx);
    if (i) {
        i->refs++;
        *ptr = i->ptr;
    }
    pthread_mutex_unlock(&lock);
    if (i)
        return CUDA_SUCCESS;

    import *x = malloc(sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fetched f = {0};
    char why[200];
    CUresult r = fetch(&w, &f, why, sizeof why);
    CUdeviceptr va = 0;
    if (r == CUDA_SUCCESS) {
        r = map_pages(&f, &va);
        if (r != CUDA_SUCCESS) {
            snprintf(why, sizeof why, "mapping its %zu pages failed (error %d)", f.pages, (int)r);
            release_handles(f.handles, f.n);
            free(f.handles);
            free(f.lens);
        }
    }
    if (r != CUDA_SUCCESS) {
        free(x);
        drk_log(DRK_LOG_WARN, "cuIpcOpenMemHandle: drk's handle from process %u (export %llu) could not be "
                              "opened: %s", w.pid, (unsigned long long)w.id, why);
        return r;
    }
    *x = (import){.pid = w.pid, .secret = w.secret, .id = w.id, .ctx = ctx, .ptr = va + f.offset, .va = va,
                  .size = w.size, .n = f.n, .pages = f.pages, .page_size = f.page_size, .handles = f.handles,
                  .lens = f.lens, .refs = 1};
    pthread_mutex_lock(&lock);
    i = find_import(&w, ctx); /* opened meanwhile by another thread: share that one */
    if (i) {
        i->refs++;
    } else {
        x->next = imports;
        imports = i = x, x = NULL;
        atomic_fetch_add(&nimports, 1);
    }
    *ptr = i->ptr;
    pthread_mutex_unlock(&lock);
    if (x)
        unmap_import(x);
    return CUDA_SUCCESS;
}

int drk_ipc_imported(CUdeviceptr ptr, CUdeviceptr *base, size_t *size)
{
    if (!atomic_load_explicit(&nimports, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&lock);
    const import *i = imports;
    while (i && !(ptr >= i->ptr && ptr - i->ptr < i->size))
        i = i->next;
    if (i) {
        *base = i->ptr;
        *size = i->size;
    }
    pthread_mutex_unlock(&lock);
    return i != NULL;
}

int drk_ipc_close(CUdeviceptr ptr, CUresult *r)
{
    pthread_mutex_lock(&lock);
    import **p = &imports;
    while (*p && (*p)->ptr != ptr)
        p = &(*p)->next;
    import *i = *p;
    int last = i && --i->refs == 0;
    if (last) {
        *p = i->next;
        atomic_fetch_sub(&nimports, 1);
    }
    pthread_mutex_unlock(&lock);
    if (!i)
        return 0;
    *r = CUDA_SUCCESS;
    if (!last)
        return 1;
    *r = unmap_import(i);
    return 1;
}

void drk_ipc_after_fork_child(void)
{
    /* The parent's socket and thread are not the child's (its thread was
     * not copied; the socket must close here, or a child outliving the
     * parent would keep importers waiting on a socket nobody serves), nor
     * its imports (the child cannot use the parent's device memory): drop
     * the records without a driver call, close the socket, start over. */
    pthread_mutex_init(&lock, NULL);
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
    while (exports) {
        export *e = exports;
        exports = e->next;
        free(e->runs);
        free(e->lens);
        free(e);
    }
    while (imports) {
        import *i = imports;
        imports = i->next;
        free(i->handles);
        free(i->lens);
        free(i);
    }
    atomic_store(&nimports, 0);
}
