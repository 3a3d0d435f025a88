/* The host pool's chunk registry and its per-chunk allocation maps; the
 * pool's pointer queries. No jemalloc here: with no pool there are no
 * chunks and every query answers "not ours". */
#define _GNU_SOURCE
#include "alloc/host_chunks.h"

#include <pthread.h>
#include <sys/mman.h>

#include "alloc/host_pool.h"

static drk_host_chunk chunks[DRK_HOST_CHUNKS_MAX];
static atomic_size_t nchunks;
/* The span of all chunks: most pointers asked about are not the pool's. */
static _Atomic uintptr_t span_lo = UINTPTR_MAX, span_hi;
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;

static void *map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

drk_host_chunk *drk_host_chunk_add(uintptr_t base, size_t size, unsigned flags, const drk_driver *drv,
                                   CUcontext ctx)
{
    size_t granules = size / DRK_HOST_GRANULE;
    size_t bits_bytes = (granules + 63) / 64 * sizeof(uint64_t);
    pthread_mutex_lock(&add_lock);
    size_t n = atomic_load_explicit(&nchunks, memory_order_relaxed);
    drk_host_chunk *c = NULL;
    if (n < DRK_HOST_CHUNKS_MAX) {
        void *starts = map_zeroed(bits_bytes);
        void *sizes = starts ? map_zeroed(granules * sizeof(size_t)) : NULL;
        if (sizes) {
            c = &chunks[n];
            c->base = base, c->size = size, c->flags = flags;
            c->drv = drv, c->ctx = ctx;
            atomic_store_explicit(&c->dead, 0, memory_order_relaxed);
            atomic_store_explicit(&c->dptr, 0, memory_order_relaxed);
            c->starts = starts, c->sizes = sizes;
            atomic_store_explicit(&c->widest, 0, memory_order_relaxed);
            if (base < atomic_load_explicit(&span_lo, memory_order_relaxed))
                atomic_store_explicit(&span_lo, base, memory_order_relaxed);
            if (base + size > atomic_load_explicit(&span_hi, memory_order_relaxed))
                atomic_store_explicit(&span_hi, base + size, memory_order_relaxed);
            atomic_store_explicit(&nchunks, n + 1, memory_order_release);
        } else if (starts) {
            munmap(starts, bits_bytes);
        }
    }
    pthread_mutex_unlock(&add_lock);
    return c;
}

drk_host_chunk *drk_host_chunk_of(uintptr_t p)
{
    size_t n = atomic_load_explicit(&nchunks, memory_order_acquire);
    if (n == 0 || p < atomic_load_explicit(&span_lo, memory_order_relaxed) ||
        p >= atomic_load_explicit(&span_hi, memory_order_relaxed))
        return NULL;
    /* Newest first: later chunks are larger and hold most allocations. */
    for (size_t i = n; i-- > 0;)
        if (p - chunks[i].base < chunks[i].size && !atomic_load_explicit(&chunks[i].dead, memory_order_acquire))
            return &chunks[i];
    return NULL;
}

size_t drk_host_chunks_end_context(CUcontext ctx)
{
    size_t n = atomic_load_explicit(&nchunks, memory_order_acquire), ended = 0;
    for (size_t i = 0; i < n; i++)
        if (chunks[i].ctx == ctx && !atomic_exchange(&chunks[i].dead, 1))
            ended++;
    return ended;
}

void drk_host_chunk_note(drk_host_chunk *c, uintptr_t p, size_t size)
{
    size_t g = (p - c->base) / DRK_HOST_GRANULE;
    atomic_store_explicit(&c->sizes[g], size, memory_order_relaxed);
    size_t w = atomic_load_explicit(&c->widest, memory_order_relaxed);
    while (size > w && !atomic_compare_exchange_weak_explicit(&c->widest, &w, size, memory_order_relaxed,
                                                              memory_order_relaxed))
        ;
    atomic_fetch_or_explicit(&c->starts[g / 64], (uint64_t)1 << (g % 64), memory_order_release);
}

int drk_host_chunk_take(drk_host_chunk *c, uintptr_t p, size_t *size)
{
    size_t off = p - c->base;
    if (off % DRK_HOST_GRANULE)
        return -1;
    size_t g = off / DRK_HOST_GRANULE;
    uint64_t bit = (uint64_t)1 << (g % 64);
    uint64_t old = atomic_fetch_and_explicit(&c->starts[g / 64], ~bit, memory_order_acq_rel);
    if (!(old & bit))
        return -1;
    *size = atomic_load_explicit(&c->sizes[g], memory_order_relaxed);
    return 0;
}

/* The live allocation of chunk c containing p: the nearest start at or
 * below p is the only candidate, since allocations do not overlap. */
static int find_in(const drk_host_chunk *c, uintptr_t p, uintptr_t *start, size_t *size)
{
    size_t g = (p - c->base) / DRK_HOST_GRANULE;
    size_t reach = atomic_load_explicit(&c->widest, memory_order_relaxed) / DRK_HOST_GRANULE + 1;
    size_t lowest = g > reach ? g - reach : 0;
    size_t w = g / 64;
    uint64_t bits = atomic_load_explicit(&c->starts[w], memory_order_acquire) & (~(uint64_t)0 >> (63 - g % 64));
    for (;;) {
        if (bits) {
            size_t s = w * 64 + 63 - (size_t)__builtin_clzll(bits);
            if (s < lowest)
                return -1;
            uintptr_t b = c->base + s * DRK_HOST_GRANULE;
            size_t n = atomic_load_explicit(&c->sizes[s], memory_order_relaxed);
            if (p - b >= n)
                return -1;
            *start = b, *size = n;
            return 0;
        }
        if (w == 0 || w * 64 <= lowest)
            return -1;
        bits = atomic_load_explicit(&c->starts[--w], memory_order_acquire);
    }
}

int drk_host_pool_find(const void *p, void **base, size_t *size, unsigned *flags)
{
    drk_host_chunk *c = drk_host_chunk_of((uintptr_t)p);
    uintptr_t b;
    size_t n;
    if (!c || find_in(c, (uintptr_t)p, &b, &n) != 0)
        return -1;
    if (base)
        *base = (void *)b;
    if (size)
        *size = n;
    if (flags)
        *flags = c->flags;
    return 0;
}

int drk_host_pool_owns(const void *p) { return drk_host_chunk_of((uintptr_t)p) != NULL; }

CUresult drk_host_pool_device_pointer(const void *p, CUdeviceptr *dptr)
{
    drk_host_chunk *c = drk_host_chunk_of((uintptr_t)p);
    uintptr_t b;
    size_t n;
    if (!c || find_in(c, (uintptr_t)p, &b, &n) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Asked of the driver on first use, so it sees no call the program did
     * not need; its errors (no context ...) are not kept. */
    CUdeviceptr d = atomic_load_explicit(&c->dptr, memory_order_relaxed);
    if (!d) {
        if (!c->drv->mem_host_get_device_pointer)
            return CUDA_ERROR_NOT_SUPPORTED;
        CUresult r = c->drv->mem_host_get_device_pointer(&d, (void *)c->base, 0);
        if (r != CUDA_SUCCESS)
            return r;
        atomic_store_explicit(&c->dptr, d, memory_order_relaxed);
    }
    *dptr = d + ((uintptr_t)p - c->base);
    return CUDA_SUCCESS;
}
