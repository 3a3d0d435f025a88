/* What drk's jemalloc copy sees of the outside: its configuration, and
 * stand-ins for the few outside functions the build redirects here
 * (cmake/host_pool.cmake, DRK_JE_REDIRECTS). */
#define _GNU_SOURCE
#include "alloc/host_je.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>

/* Only the host pool's arenas allocate: no thread caches (frees must reach
 * the arena at once), no background threads, no purging (the extent hooks
 * keep pinned memory: there is nothing to give back), freed extents reused
 * for requests of any size (pinning anew costs far more than splitting),
 * metadata without THP.
 * One automatic arena, which nothing uses. (Cache-oblivious offsets are a
 * build option in 5.3; the pool's page alignment of large allocations
 * turns them off.) */
const char *drk_je_malloc_conf = "tcache:false,background_thread:false,narenas:1,percpu_arena:disabled,"
                                 "dirty_decay_ms:-1,muzzy_decay_ms:-1,retain:true,lg_extent_max_active_fit:63,"
                                 "metadata_thp:disabled,hpa:false,abort:false,abort_conf:false";

/* MALLOC_CONF and /etc/malloc.conf configure the program's own jemalloc, if
 * it has one; drk's copy reads neither. */
char *drk_je_secure_getenv(const char *name)
{
    (void)name;
    return NULL;
}

long drk_je_readlink(const char *path, char *buf, size_t len)
{
    (void)path, (void)buf, (void)len;
    errno = ENOENT;
    return -1;
}

/* jemalloc looks up pthread_create only for lazy locking or background
 * threads, both off. */
void *drk_je_dlsym(void *handle, const char *name)
{
    (void)handle, (void)name;
    return NULL;
}

/* No fork handlers. jemalloc's would re-initialize its arenas' locks in a
 * child, and those of the pool's arenas live in the pinned chunks, which
 * the driver maps shared: the child wrote into the parent's live records
 * (a stand-in with shared chunks: 368 bytes changed, a parent thread's
 * wait never woken). A child never uses the pool (host_pool.c), so the
 * handlers have nothing to do. */
int drk_je_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    (void)prepare, (void)parent, (void)child;
    return 0;
}

/* Heap profiling's backtraces (profiling is off): an empty stack. */
int drk_je__Unwind_Backtrace(void *trace, void *arg)
{
    (void)trace, (void)arg;
    return 5; /* _URC_END_OF_STACK */
}

unsigned long drk_je__Unwind_GetIP(void *context)
{
    (void)context;
    return 0;
}

/* Heap profiling's sampling maths, without libm. Accurate to a few ulp,
 * which is more than sampling needs. */
static double scale2(double x, int k)
{
    while (k > 1000)
        x *= 0x1p1000, k -= 1000;
    while (k < -1000)
        x *= 0x1p-1000, k += 1000;
    union {
        uint64_t u;
        double d;
    } p = {.u = (uint64_t)(k + 1023) << 52};
    return x * p.d;
}

double drk_je_exp(double x)
{
    if (isnan(x))
        return x;
    if (x > 709.8)
        return HUGE_VAL;
    if (x < -745.2)
        return 0;
    double k = (double)(long)(x / M_LN2 + (x < 0 ? -0.5 : 0.5));
    double r = x - k * M_LN2, term = 1, sum = 1;
    for (int n = 1; n < 24; n++)
        term *= r / n, sum += term;
    return scale2(sum, (int)k);
}

double drk_je_log(double x)
{
    if (isnan(x) || x < 0)
        return NAN;
    if (x == 0)
        return -HUGE_VAL;
    if (isinf(x))
        return x;
    int e = 0;
    while (x < 0x1p-1000)
        x *= 0x1p1000, e -= 1000;
    union {
        double d;
        uint64_t u;
    } v = {.d = x};
    e += (int)((v.u >> 52) & 0x7ff) - 1022; /* x = m 2^e, m in [0.5, 1) */
    v.u = (v.u & ~((uint64_t)0x7ff << 52)) | ((uint64_t)1022 << 52);
    double m = v.d;
    if (m < M_SQRT1_2)
        m *= 2, e--;
    double s = (m - 1) / (m + 1), s2 = s * s, t = s, sum = 0;
    for (int k = 1; k < 40; k += 2)
        sum += t / k, t *= s2;
    return 2 * sum + e * M_LN2;
}

double drk_je_round(double x)
{
    if (!(x > -0x1p52 && x < 0x1p52))
        return x; /* integral already, infinite or NaN */
    double t = (double)(long long)x, f = x - t;
    return f >= 0.5 ? t + 1 : f <= -0.5 ? t - 1 : t;
}
