/* The device pool (alloc/device.c) where a context ends while other
 * threads are inside it, and where a context other than the pool's ends,
 * on the stand-in driver, linked directly (no preloading). Each case runs
 * in a child process of its own (the pool's state is the process's, and a
 * case may crash); the driver table's hooks stop one thread at a chosen
 * point inside the pool while another ends the context, so each
 * interleaving is forced, not hoped for.
 *
 *  stream_shard_after_end: a thread that saw the pool running reaches a
 *      new stream's shard after the pool ended (its pages gone, no shards):
 *      the allocation must go to the driver (return 0), not crash.
 *  range_after_end: a thread reserves a new VA chunk after the ending pool
 *      marked its ranges dead and before it took the shard's lock; the
 *      chunk goes back to the driver with the pool, and the next pool gets
 *      the same addresses: its blocks must still be its own (frees and
 *      queries answered by the pool).
 *  foreign_context_streams: the pool serves the primary context; a
 *      library's context with a stream of its own is destroyed (the driver
 *      destroys the stream with it; drk is told of the context only).
 *      cuMemFree'd blocks must still come back. Its control (the stream
 *      destroyed first) passes either way.
 *  lost_stream: drk's list of streams cannot grow (out of host memory) as
 *      the program creates a stream, before or after the pool starts. Work
 *      on that stream uses a block the program then frees with cuMemFree:
 *      the block must not come back while the stream is busy (seals that
 *      record nothing there would complete at once). Its control (the
 *      stream listed) shows the same block held while the stream is busy
 *      and reused once it is idle. After the program's cuCtxSynchronize,
 *      the held blocks come back.
 *  green_context: the program makes a green context, whose streams drk
 *      never hears of; a block freed while one of them is busy must not
 *      come back; the driver serves allocations from then on; after the
 *      program's cuCtxSynchronize the block comes back to the pool.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc/device.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/gpu/programs/linked_driver.h"
#include "tests/unit/check.h"
#include "tests/unit/fail_realloc.h"

#define MIB ((size_t)1 << 20)


static void nap(void)
{
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

/* Waits up to ~5 s for *flag; 0 if it never came. */
static int await(atomic_int *flag)
{
    for (int i = 0; i < 50000; i++) {
        if (atomic_load(flag))
            return 1;
        nap();
    }
    return 0;
}

/* ---- The driver table, with gates ---- */

static drk_driver table;
static CUcontext primary;
static CUdevice dev;

/* cuStreamIsCapturing: the first call once armed stops until `go`. */
static atomic_int cap_armed, cap_in, cap_go;
static CUresult gated_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    if (atomic_exchange(&cap_armed, 0)) {
        atomic_store(&cap_in, 1);
        await(&cap_go);
    }
    return cuStreamIsCapturing(s, st);
}

/* cuMemAddressReserve: the first call once armed reserves, then stops until `go`. */
static atomic_int res_armed, res_in, res_go;
static CUresult gated_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags)
{
    CUresult r = cuMemAddressReserve(p, size, align, addr, flags);
    if (atomic_exchange(&res_armed, 0)) {
        atomic_store(&res_in, 1);
        await(&res_go);
    }
    return r;
}

/* cuCtxGetCurrent: the ending thread's first call comes after the pool
 * marked its ranges dead and took grower_lock and grow_lock. */
static __thread int ending_thread;
static atomic_int ender_inside;
static CUresult noted_get_current(CUcontext *c)
{
    if (ending_thread)
        atomic_store(&ender_inside, 1);
    return cuCtxGetCurrent(c);
}


/* Events recorded on `busy_stream` stay incomplete while `busy` is set, as
 * the work of a stream running a long kernel. */
static CUstream busy_stream;
static atomic_int busy;
static CUevent on_busy[256];
static int non_busy;
static pthread_mutex_t busy_mu = PTHREAD_MUTEX_INITIALIZER;

static int busy_event(CUevent e)
{
    pthread_mutex_lock(&busy_mu);
    int i = 0;
    while (i < non_busy && on_busy[i] != e)
        i++;
    pthread_mutex_unlock(&busy_mu);
    return i < non_busy;
}

static CUresult gated_record(CUevent e, CUstream st)
{
    CUresult r = cuEventRecord(e, st);
    pthread_mutex_lock(&busy_mu);
    int i = 0;
    while (i < non_busy && on_busy[i] != e)
        i++;
    if (r == CUDA_SUCCESS && st == busy_stream && busy_stream && i == non_busy && non_busy < 256)
        on_busy[non_busy++] = e;
    else if (r == CUDA_SUCCESS && st != busy_stream && i < non_busy)
        on_busy[i] = on_busy[--non_busy]; /* recorded again elsewhere */
    pthread_mutex_unlock(&busy_mu);
    return r;
}

static CUresult gated_query(CUevent e)
{
    return atomic_load(&busy) && busy_event(e) ? CUDA_ERROR_NOT_READY : cuEventQuery(e);
}

static CUresult gated_synchronize(CUevent e)
{
    for (int i = 0; i < 50000 && atomic_load(&busy) && busy_event(e); i++)
        nap();
    return cuEventSynchronize(e);
}

static void setup(void)
{
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&primary, dev) || cuCtxSetCurrent(primary)) {
        fprintf(stderr, "set-up failed\n");
        exit(2);
    }
    table = linked_driver;
    table.stream_is_capturing = gated_is_capturing;
    table.mem_address_reserve = gated_reserve;
    table.ctx_get_current = noted_get_current;
    table.event_record = gated_record;
    table.event_query = gated_query;
    table.event_synchronize = gated_synchronize;
    drk_dpool_settings s = {.reserve = 0, .defrag = 1, .defrag_threshold = 1000};
    drk_dpool_configure(&table, &s);
}

static int alloc_on(CUdeviceptr *p, size_t size, CUstream stream, int has_stream, CUresult *r)
{
    *r = CUDA_ERROR_UNKNOWN;
    return drk_dpool_alloc(p, size, stream, has_stream, r);
}

/* ---- stream_shard_after_end ---- */

static CUstream stream_s;

static void *stream_thread(void *arg)
{
    (void)arg;
    CUdeviceptr p, q = 0;
    CUresult r;
    cuCtxSetCurrent(primary);
    /* The pool starts; this thread caches it. */
    CHECK(alloc_on(&p, MIB, NULL, 0, &r) && r == CUDA_SUCCESS);
    /* A capture elsewhere makes the allocation ask whether its stream
     * captures: the gate holds it there, past the pool lookup. */
    drk_dpool_capture_begins();
    atomic_store(&cap_armed, 1);
    int handled = alloc_on(&q, MIB, stream_s, 1, &r);
    drk_dpool_capture_ends();
    printf("stream_shard_after_end: allocation after the pool ended: %s\n",
           handled ? "served by the pool" : "handed to the driver");
    if (handled && r == CUDA_SUCCESS) {
        drk_dpool_block b;
        CHECK(drk_dpool_query(q, &b) == 1);
    }
    return NULL;
}

static int case_stream_shard_after_end(void)
{
    setup();
    CHECK(cuStreamCreate(&stream_s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    drk_dpool_stream_created(stream_s);
    pthread_t t;
    pthread_create(&t, NULL, stream_thread, NULL);
    CHECK(await(&cap_in));
    drk_dpool_context_ends(primary, 1); /* what cuDevicePrimaryCtxReset's hook does first */
    atomic_store(&cap_go, 1);
    pthread_join(t, NULL);
    return check_failures;
}

/* ---- range_after_end ---- */

static CUdeviceptr old_block;
static atomic_int begin_reserving, begin_ending;

static void *reserving_thread(void *arg)
{
    (void)arg;
    CUresult r;
    cuCtxSetCurrent(primary);
    await(&begin_reserving);
    atomic_store(&res_armed, 1);
    CHECK(alloc_on(&old_block, MIB, NULL, 0, &r));
    return NULL;
}

static void *ending(void *arg)
{
    (void)arg;
    ending_thread = 1;
    await(&begin_ending);
    drk_dpool_context_ends(primary, 1);
    return NULL;
}

static int case_range_after_end(void)
{
    /* The next pool's chunk should land where the first one was: no
     * mapping of malloc's or of a new thread's may fall into the hole. */
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    fakecuda_set_total_memory(64 * MIB); /* shard 0's chunk: the device's size */
    setup();
    pthread_t t, h;
    pthread_create(&t, NULL, reserving_thread, NULL);
    pthread_create(&h, NULL, ending, NULL);
    atomic_store(&begin_reserving, 1);
    CHECK(await(&res_in)); /* its chunk is reserved, not yet noted in the ranges */
    atomic_store(&begin_ending, 1);
    CHECK(await(&ender_inside)); /* the ranges were marked dead; it waits for the shard */
    atomic_store(&res_go, 1);
    pthread_join(t, NULL);
    pthread_join(h, NULL);
    /* A fresh pool, on the same addresses if the hole is still whole. */
    CUdeviceptr q;
    CUresult r;
    CHECK(alloc_on(&q, MIB, NULL, 0, &r) && r == CUDA_SUCCESS);
    drk_dpool_block b;
    int query = drk_dpool_query(q, &b);
    int freed = drk_dpool_free(q, NULL, 0, &r);
    int same = q - old_block < 64 * MIB || old_block - q < 64 * MIB;
    printf("range_after_end: old block 0x%llx, new 0x%llx (%s): query %d, free %s\n",
           (unsigned long long)old_block, (unsigned long long)q,
           same ? "the old chunk's addresses" : "elsewhere: inconclusive", query,
           freed ? "by the pool" : "handed to the driver");
    CHECK(query == 1);
    CHECK(freed && r == CUDA_SUCCESS);
    return check_failures;
}

/* ---- foreign_context_streams ---- */

/* The pool serves the primary context; a library makes a context of its
 * own with a stream and destroys the context (which destroys its streams:
 * no cuStreamDestroy). The stand-in's cuCtxDestroy keeps what was made in
 * the context (a deviation), so the stream is destroyed here without drk's
 * hook, as the driver's cuCtxDestroy would: drk is told only of the
 * context's end. Control: the library destroys its stream first. */
static int case_foreign_context_streams(int destroy_first)
{
    setup();
    CUcontext made;
    CUdeviceptr p;
    CUresult r;
    CHECK(alloc_on(&p, MIB, NULL, 0, &r) && r == CUDA_SUCCESS); /* the pool serves the primary context */
    CHECK(drk_dpool_free(p, NULL, 0, &r) && r == CUDA_SUCCESS);
    CHECK(cuCtxCreate_v4(&made, NULL, 0, dev) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(made) == CUDA_SUCCESS);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    drk_dpool_stream_created(s);
    if (destroy_first)
        drk_dpool_stream_destroyed(s);
    drk_dpool_context_ends(made, 1); /* cuCtxDestroy's hook */
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS); /* what the driver's cuCtxDestroy does to its streams */
    CHECK(cuCtxDestroy(made) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
    int ooms = 0;
    for (int i = 0; i < 1500 && !ooms; i++) {
        if (!alloc_on(&p, MIB, NULL, 0, &r) || r != CUDA_SUCCESS) {
            printf("  allocation %d failed (%d)\n", i, (int)r);
            ooms++;
            break;
        }
        CHECK(drk_dpool_free(p, NULL, 0, &r) && r == CUDA_SUCCESS);
    }
    drk_dpool_report rep;
    drk_dpool_get_report(&rep);
    printf("foreign_context_streams%s: 1500 x (1 MiB cuMemAlloc, cuMemFree): %s, reserved %llu MiB, pending %llu MiB\n",
           destroy_first ? " (control)" : "", ooms ? "out of memory" : "all served",
           (unsigned long long)(rep.reserved_bytes >> 20), (unsigned long long)(rep.pending_bytes >> 20));
    CHECK(!ooms);
    CHECK(rep.reserved_bytes < 64 * MIB);
    return check_failures;
}

/* The program's cuCtxSynchronize, as its hook runs it. */
static void program_waits(void)
{
    uint64_t mark = drk_dpool_sync_begin(NULL);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    drk_dpool_sync_end(NULL, mark);
}

/* ---- lost_stream ---- */

/* 0: the list fails after the pool started; 1: before it starts (the
 * stream the program's first); 2: the control, listed. */
static int case_lost_stream(int when)
{
    setup();
    CUdeviceptr p, x;
    CUresult r;
    if (when != 1) /* the pool starts */
        CHECK(alloc_on(&p, MIB, NULL, 0, &r) && r == CUDA_SUCCESS && drk_dpool_free(p, NULL, 0, &r));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    atomic_store(&realloc_fails, when != 2);
    drk_dpool_stream_created(s);
    CHECK(atomic_load(&realloc_fails) == 0); /* the list's growth met the failure */
    busy_stream = s;
    /* A long kernel on s uses x; the program frees x with cuMemFree. */
    CHECK(alloc_on(&x, MIB, NULL, 0, &r) && r == CUDA_SUCCESS);
    atomic_store(&busy, 1);
    CHECK(drk_dpool_free(x, NULL, 0, &r) && r == CUDA_SUCCESS);
    int early = 0, later = 0;
    for (int i = 0; i < 400; i++) {
        CHECK(alloc_on(&p, MIB, NULL, 0, &r) && r == CUDA_SUCCESS);
        early += p == x;
        CHECK(drk_dpool_free(p, NULL, 0, &r) && r == CUDA_SUCCESS);
    }
    atomic_store(&busy, 0); /* the kernel ends */
    for (int i = 0; i < 400; i++) {
        CHECK(alloc_on(&p, MIB, NULL, 0, &r) && r == CUDA_SUCCESS);
        later += p == x;
        CHECK(drk_dpool_free(p, NULL, 0, &r) && r == CUDA_SUCCESS);
    }
    drk_dpool_report rep;
    drk_dpool_get_report(&rep);
    printf("lost_stream (%s): x reused %d times while its stream was busy, %d after; pending %llu MiB\n",
           when == 0 ? "list fails after the pool started" : when == 1 ? "list fails before" : "control: listed",
           early, later, (unsigned long long)(rep.pending_bytes >> 20));
    CHECK(early == 0);
    if (when == 2) {
        CHECK(later > 0); /* the model holds x for the busy stream alone */
        return check_failures;
    }
    CHECK(rep.pending_bytes >= 400 * MIB); /* cuMemFree's blocks stay out */
    /* Until the program waits for the device: then they come back. */
    program_waits();
    int after = 0;
    for (int i = 0; i < 400; i++) {
        CHECK(alloc_on(&p, MIB, NULL, 0, &r) && r == CUDA_SUCCESS);
        after += p == x;
        CHECK(drk_dpool_free(p, NULL, 0, &r) && r == CUDA_SUCCESS);
    }
    drk_dpool_get_report(&rep);
    printf("  after the program's cuCtxSynchronize: %llu blocks back, x reused %d times\n",
           (unsigned long long)rep.sync_reclaims, after);
    CHECK(rep.sync_reclaims >= 800 && after > 0);
    return check_failures;
}

/* ---- green_context ---- */

/* The program makes a green context while the pool runs: a kernel on one
 * of its streams (which drk never hears of) uses x, which the program
 * frees with cuMemFree. x must not come back while that stream is busy;
 * the driver serves the device's allocations from then on; x comes back
 * after the program waits for the device. */
static int case_green_context(void)
{
    setup();
    CUdeviceptr p, x, y;
    CUresult r;
    CHECK(alloc_on(&x, MIB, NULL, 0, &r) && r == CUDA_SUCCESS); /* the pool starts, serves x */
    CUstream s; /* the green context's stream: its creation goes by no hook */
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    busy_stream = s;
    drk_dpool_green_ctx(dev); /* cuGreenCtxCreate's hook */
    atomic_store(&busy, 1);
    CHECK(drk_dpool_free(x, NULL, 0, &r) && r == CUDA_SUCCESS);
    int served = 0;
    for (int i = 0; i < 100; i++)
        served += alloc_on(&p, MIB, NULL, 0, &r) + alloc_on(&p, MIB, s, 1, &r);
    drk_dpool_report rep;
    drk_dpool_get_report(&rep);
    printf("green_context: %d of 200 allocations served by the pool after the green context (%llu by the driver), "
           "pending %llu MiB\n", served, (unsigned long long)rep.green_allocs,
           (unsigned long long)(rep.pending_bytes >> 20));
    CHECK(served == 0 && rep.green_allocs == 200 && rep.green_devices == 1 && rep.pending_bytes == MIB);
    CHECK(drk_dpool_query(x, &(drk_dpool_block){0}) == 0); /* freed, pending: no allocation's */
    atomic_store(&busy, 0);
    program_waits();
    drk_dpool_get_report(&rep);
    printf("  after the program's cuCtxSynchronize: %llu block back, pending %llu MiB\n",
           (unsigned long long)rep.sync_reclaims, (unsigned long long)(rep.pending_bytes >> 20));
    CHECK(rep.sync_reclaims == 1 && rep.pending_bytes == 0);
    CHECK(!alloc_on(&y, MIB, NULL, 0, &r)); /* still the driver's */
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
    return check_failures;
}

/* ---- Driver ---- */

static int run_case(const char *name, int (*fn)(int), int arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        int f = fn(arg);
        fflush(stdout);
        _exit(f ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        printf("%s: FAILED (killed by signal %d: %s)\n", name, WTERMSIG(st), strsignal(WTERMSIG(st)));
        return 1;
    }
    printf("%s: %s\n", name, WEXITSTATUS(st) ? "FAILED" : "passed");
    return WEXITSTATUS(st) != 0;
}

static int c1(int a) { (void)a; return case_stream_shard_after_end(); }
static int c2(int a) { (void)a; return case_range_after_end(); }
static int c3(int a) { return case_foreign_context_streams(a); }
static int c4(int a) { return case_lost_stream(a); }
static int c5(int a) { (void)a; return case_green_context(); }

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    int bad = 0;
    if (!only || !strcmp(only, "stream_shard_after_end"))
        bad += run_case("stream_shard_after_end", c1, 0);
    if (!only || !strcmp(only, "range_after_end"))
        bad += run_case("range_after_end", c2, 0);
    if (!only || !strcmp(only, "foreign_context_streams"))
        bad += run_case("foreign_context_streams (control: stream destroyed first)", c3, 1) +
               run_case("foreign_context_streams", c3, 0);
    if (!only || !strcmp(only, "lost_stream"))
        bad += run_case("lost_stream (control: listed)", c4, 2) + run_case("lost_stream (after the start)", c4, 0) +
               run_case("lost_stream (before the start)", c4, 1);
    if (!only || !strcmp(only, "green_context"))
        bad += run_case("green_context", c5, 0);
    printf("test_dpool_races: %s\n", bad ? "FAILED" : "passed");
    return bad ? 1 : 0;
}
