/* Device memory hooks: with DRK_ALLOC on, cuMemAlloc, cuMemAllocAsync,
 * cuMemAllocPitch and their frees go to drk's device pool (alloc/device.c),
 * and every query that can see pool memory answers for it as the driver
 * would for its own allocation. What the pool does not handle (memory it
 * does not own, graph captures, the 32-bit legacy forms, explicit memory
 * pools) goes to the driver unchanged. Allocations are counted by kind and
 * recorded for DRK_ALLOC_TRACE. A context that ends takes the memory made in
 * it, so drk's pools hear of it first (below). */
#include "shim/hook.h"

#include "alloc/device.h"
#include "alloc/host_pool.h"
#include "alloc/ipc.h"
#include "alloc/recorder.h"
#include "alloc/stats.h"
#include "shim/evolve_wiring.h"
#include "interpose/table.h"

/* After a device allocation or free, pool's or driver's: counted, and
 * recorded as trace op `op` (async kinds carry their stream). */
static inline __attribute__((always_inline)) CUresult allocated(drk_sym sym, CUresult r, drk_alloc_kind kind,
                                                                size_t bytes, char op, CUdeviceptr ptr,
                                                                CUstream stream, int has_stream)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_alloc_note(kind, r == CUDA_SUCCESS ? bytes : 0, r == CUDA_SUCCESS);
        if (r == CUDA_SUCCESS)
            drk_record(op, (uintptr_t)ptr, bytes, (uintptr_t)stream, has_stream);
    }
    return r;
}

static inline __attribute__((always_inline)) CUresult freed(drk_sym sym, CUresult r, drk_alloc_kind kind, char op,
                                                            CUdeviceptr ptr, CUstream stream, int has_stream)
{
    if (drk_observing()) {
        drk_count_call(sym);
        drk_free_note(kind, r == CUDA_SUCCESS);
        if (r == CUDA_SUCCESS)
            drk_record(op, (uintptr_t)ptr, 0, (uintptr_t)stream, has_stream);
    }
    return r;
}

/* The pool's view of an async call's stream: NULL is the legacy stream,
 * or under a _ptsz name the calling thread's per-thread stream, which the
 * pool treats as no stream (its handle names a different stream in every
 * thread, so blocks freed on it wait for an epoch like cuMemFree's). */
static inline __attribute__((always_inline)) int pool_stream(CUstream *s, int per_thread_name)
{
    if (*s == NULL)
        *s = per_thread_name ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    return *s != CU_STREAM_PER_THREAD;
}

DRK_BODY device_alloc(drk_sym sym, CUdeviceptr *dptr, size_t size)
{
    CUresult r;
    if (!drk_pooling() || !drk_dpool_alloc(dptr, size, NULL, 0, &r)) {
        DRK_REAL_OR_MISSING(mem_alloc);
        r = real(dptr, size);
    }
    return r;
}

/* A device allocation that ran out of memory is tried once more after
 * evolution gave its own memory back (drk_evolve_give_back): under drk
 * the program never runs out where it would not without it. */
DRK_BODY drk_body_mem_alloc(drk_sym sym, CUdeviceptr *dptr, size_t size)
{
    CUresult r = device_alloc(sym, dptr, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && drk_evolve_give_back())
        r = device_alloc(sym, dptr, size);
    return allocated(sym, r, DRK_ALLOC_DEVICE, size, 'a', r == CUDA_SUCCESS ? *dptr : 0, NULL, 0);
}

DRK_BODY async_alloc(drk_sym sym, CUdeviceptr *dptr, size_t size, CUstream stream)
{
    CUresult r;
    CUstream s = stream;
    int has_stream = pool_stream(&s, sym == DRK_SYM_cuMemAllocAsync_ptsz);
    if (!drk_pooling() || !drk_dpool_alloc(dptr, size, s, has_stream, &r)) {
        DRK_REAL_OR_MISSING(mem_alloc_async);
        r = real(dptr, size, stream);
    }
    return r;
}

DRK_BODY drk_body_mem_alloc_async(drk_sym sym, CUdeviceptr *dptr, size_t size, CUstream stream)
{
    CUresult r = async_alloc(sym, dptr, size, stream);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && drk_evolve_give_back())
        r = async_alloc(sym, dptr, size, stream);
    return allocated(sym, r, DRK_ALLOC_ASYNC, size, 'A', r == CUDA_SUCCESS ? *dptr : 0, stream, 1);
}

/* The pitch the driver would give: rows rounded to its pitch alignment,
 * learnt once per element size from the driver itself. */
static _Atomic size_t pitch_align[17];

static inline size_t learn_pitch_align(drk_sym sym, unsigned int elem)
{
    size_t a = atomic_load_explicit(&pitch_align[elem], memory_order_relaxed);
    if (a)
        return a;
    drk_fn_mem_alloc_pitch real = DRK_REAL(mem_alloc_pitch);
    drk_fn_mem_free free_real = (drk_fn_mem_free)drk_real(DRK_SYM_cuMemFree_v2);
    CUdeviceptr p;
    size_t pitch = 0;
    if (!real || !free_real || real(&p, &pitch, 1, 1, elem) != CUDA_SUCCESS)
        return 0;
    free_real(p);
    atomic_store(&pitch_align[elem], pitch);
    return pitch;
}

DRK_BODY drk_body_mem_alloc_pitch(drk_sym sym, CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                  unsigned int elem)
{
    CUresult r;
    size_t align = 0, row = 0;
    /* Only requests the driver would grant go to the pool; the rest get
     * the driver's own answer. */
    int pooled = drk_pooling() && dptr && pitch && width && height && (elem == 4 || elem == 8 || elem == 16) &&
                 (align = learn_pitch_align(sym, elem)) != 0 && width <= ((size_t)1 << 40) &&
                 (row = (width + align - 1) / align * align) <= ((size_t)1 << 40) / height;
    if (pooled && drk_dpool_alloc(dptr, row * height, NULL, 0, &r)) {
        if (r == CUDA_SUCCESS)
            *pitch = row;
    } else {
        DRK_REAL_OR_MISSING(mem_alloc_pitch);
        r = real(dptr, pitch, width, height, elem);
    }
    return allocated(sym, r, DRK_ALLOC_PITCH, r == CUDA_SUCCESS ? *pitch * height : 0, 'a',
                     r == CUDA_SUCCESS ? *dptr : 0, NULL, 0);
}

DRK_BODY drk_body_mem_free(drk_sym sym, CUdeviceptr dptr)
{
    CUresult r;
    if (!drk_pooling() || !drk_dpool_free(dptr, NULL, 0, &r)) {
        DRK_REAL_OR_MISSING(mem_free);
        r = real(dptr);
    }
    return freed(sym, r, DRK_ALLOC_DEVICE, 'f', dptr, NULL, 0);
}

DRK_BODY drk_body_mem_free_async(drk_sym sym, CUdeviceptr dptr, CUstream stream)
{
    CUresult r;
    CUstream s = stream;
    int has_stream = pool_stream(&s, sym == DRK_SYM_cuMemFreeAsync_ptsz);
    if (!drk_pooling() || !drk_dpool_free(dptr, s, has_stream, &r)) {
        DRK_REAL_OR_MISSING(mem_free_async);
        r = real(dptr, stream);
    }
    return freed(sym, r, DRK_ALLOC_ASYNC, 'F', dptr, stream, 1);
}

/* The driver serves these: the 32-bit legacy forms (pool addresses never
 * fit) and allocations from a memory pool the program chose. `bytes` is
 * read only when the driver succeeded. */
DRK_BODY drk_body_mem_alloc_v1(drk_sym sym, unsigned int *dptr, unsigned int size)
{
    DRK_REAL_OR_MISSING(mem_alloc_v1);
    CUresult r = real(dptr, size);
    return allocated(sym, r, DRK_ALLOC_DEVICE, size, 'a', r == CUDA_SUCCESS ? *dptr : 0, NULL, 0);
}

DRK_BODY drk_body_mem_alloc_pitch_v1(drk_sym sym, unsigned int *dptr, unsigned int *pitch, unsigned int width,
                                     unsigned int height, unsigned int elem)
{
    DRK_REAL_OR_MISSING(mem_alloc_pitch_v1);
    CUresult r = real(dptr, pitch, width, height, elem);
    return allocated(sym, r, DRK_ALLOC_PITCH, r == CUDA_SUCCESS ? (size_t)*pitch * height : 0, 'a',
                     r == CUDA_SUCCESS ? *dptr : 0, NULL, 0);
}

DRK_BODY drk_body_mem_alloc_pool_async(drk_sym sym, CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                       CUstream stream)
{
    DRK_REAL_OR_MISSING(mem_alloc_pool_async);
    CUresult r = real(dptr, size, pool, stream);
    return allocated(sym, r, DRK_ALLOC_POOL, size, 'A', r == CUDA_SUCCESS ? *dptr : 0, stream, 1);
}

DRK_BODY drk_body_mem_free_v1(drk_sym sym, unsigned int dptr)
{
    DRK_REAL_OR_MISSING(mem_free_v1);
    return freed(sym, real(dptr), DRK_ALLOC_DEVICE, 'f', dptr, NULL, 0);
}

DRK_BODY drk_body_mem_get_info_v1(drk_sym sym, unsigned int *free_bytes, unsigned int *total_bytes)
{
    DRK_REAL_OR_MISSING(mem_get_info_v1);
    return drk_counted(sym, real(free_bytes, total_bytes));
}

DRK_BODY drk_body_mem_get_range_v1(drk_sym sym, unsigned int *base, unsigned int *size, unsigned int dptr)
{
    DRK_REAL_OR_MISSING(mem_get_range_v1);
    return drk_counted(sym, real(base, size, dptr));
}

/* ---- Queries ---- */

/* Free memory includes what the pool holds free: the program may have it. */
DRK_BODY drk_body_mem_get_info(drk_sym sym, size_t *free_bytes, size_t *total_bytes)
{
    DRK_REAL_OR_MISSING(mem_get_info);
    CUresult r = real(free_bytes, total_bytes);
    if (r == CUDA_SUCCESS && free_bytes && drk_pooling()) {
        size_t cached = drk_dpool_cached_free();
        *free_bytes += cached;
        if (total_bytes && *free_bytes > *total_bytes)
            *free_bytes = *total_bytes;
    }
    return drk_counted(sym, r);
}

static inline int pool_query(CUdeviceptr p, drk_dpool_block *b)
{
    return drk_pooling() ? drk_dpool_query(p, b) : -1;
}

DRK_BODY drk_body_mem_get_range(drk_sym sym, CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    if (drk_observing())
        drk_count_call(sym);
    drk_dpool_block b;
    switch (pool_query(dptr, &b)) {
    case 1:
        if (base)
            *base = b.base;
        if (size)
            *size = b.size;
        return CUDA_SUCCESS;
    case 0:
        return CUDA_ERROR_NOT_FOUND; /* the driver's answer for an address in no allocation */
    default: {
        void *hbase;
        size_t hsize;
        unsigned flags;
        /* A pinned pool allocation, by its host or device address: its
         * own range, not its chunk's. */
        if (drk_current_mode() != DRK_MODE_OFF && drk_host_pool_find((const void *)(uintptr_t)dptr, &hbase, &hsize, &flags) == 0) {
            CUdeviceptr d0 = (CUdeviceptr)(uintptr_t)hbase;
            if (drk_host_pool_device_pointer(hbase, &d0) != CUDA_SUCCESS)
                d0 = (CUdeviceptr)(uintptr_t)hbase;
            if (base)
                *base = d0;
            if (size)
                *size = hsize;
            return CUDA_SUCCESS;
        }
        /* Memory another drk process shared: its allocation, not the pages. */
        CUdeviceptr ibase;
        size_t isize;
        if (drk_current_mode() != DRK_MODE_OFF && drk_ipc_imported(dptr, &ibase, &isize)) {
            if (base)
                *base = ibase;
            if (size)
                *size = isize;
            return CUDA_SUCCESS;
        }
        DRK_REAL_OR_MISSING(mem_get_range);
        return real(base, size, dptr);
    }
    }
}

/* One attribute of a live pool allocation that differs from what the
 * driver says of the pages under it: 1 if written, 0 to ask the driver. */
static inline int pool_attribute(const drk_dpool_block *b, CUpointer_attribute attr, void *data)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = b->ctx; return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = b->base; return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = b->size; return 1;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = b->buffer_id; return 1;
    /* drk's IPC shares cuMemAlloc allocations between processes running
     * drk; async ones are no more shareable than the driver's. */
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(unsigned int *)data = !b->async; return 1;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = NULL; return 1;
    default: return 0;
    }
}

/* The range attributes of a pinned host pool allocation (the driver would
 * give its chunk's) or of memory imported from another drk process (the
 * driver would give a page's); 1 if written. */
static inline int host_attribute(CUdeviceptr ptr, CUpointer_attribute attr, void *data)
{
    void *base;
    size_t size;
    unsigned flags;
    CUdeviceptr ibase;
    if ((attr != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && attr != CU_POINTER_ATTRIBUTE_RANGE_SIZE) ||
        drk_current_mode() == DRK_MODE_OFF)
        return 0;
    if (drk_ipc_imported(ptr, &ibase, &size)) {
        if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
            *(size_t *)data = size;
        else
            *(CUdeviceptr *)data = ibase;
        return 1;
    }
    if (drk_host_pool_find((const void *)(uintptr_t)ptr, &base, &size, &flags) != 0)
        return 0;
    if (attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
        *(size_t *)data = size;
    } else {
        CUdeviceptr d0 = (CUdeviceptr)(uintptr_t)base;
        /* The start in the address space `ptr` is in: host or device view. */
        CUdeviceptr dev;
        if (drk_host_pool_device_pointer(base, &dev) == CUDA_SUCCESS && ptr >= dev && ptr - dev < size)
            d0 = dev;
        *(CUdeviceptr *)data = d0;
    }
    return 1;
}

DRK_BODY drk_body_pointer_get_attribute(drk_sym sym, void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    if (drk_observing())
        drk_count_call(sym);
    drk_dpool_block b;
    int q = pool_query(ptr, &b);
    if (q < 0 && data && host_attribute(ptr, attr, data))
        return CUDA_SUCCESS;
    if (q == 0)
        return CUDA_ERROR_INVALID_VALUE; /* as for any address in no allocation */
    if (q == 1 && data && pool_attribute(&b, attr, data))
        return CUDA_SUCCESS;
    DRK_REAL_OR_MISSING(pointer_get_attribute);
    return real(data, attr, ptr);
}

/* An address no allocation has anywhere: the driver's defaults for it are
 * its answer for pool addresses in no live allocation. */
#define DRK_NOWHERE ((CUdeviceptr)16)

DRK_BODY drk_body_pointer_get_attributes(drk_sym sym, unsigned int nattr, CUpointer_attribute *attrs, void **data,
                                         CUdeviceptr ptr)
{
    if (drk_observing())
        drk_count_call(sym);
    DRK_REAL_OR_MISSING(pointer_get_attributes);
    drk_dpool_block b;
    int q = pool_query(ptr, &b);
    CUresult r = real(nattr, attrs, data, q == 0 ? DRK_NOWHERE : ptr);
    if (r == CUDA_SUCCESS && q == 1)
        for (unsigned int i = 0; i < nattr; i++)
            if (data[i])
                (void)pool_attribute(&b, attrs[i], data[i]);
    if (r == CUDA_SUCCESS && q < 0)
        for (unsigned int i = 0; i < nattr; i++)
            if (data[i])
                (void)host_attribute(ptr, attrs[i], data[i]);
    return r;
}

DRK_BODY drk_body_ipc_get_mem_handle(drk_sym sym, CUipcMemHandle *handle, CUdeviceptr dptr)
{
    if (drk_observing())
        drk_count_call(sym);
    drk_dpool_block b;
    int q = handle ? pool_query(dptr, &b) : -1;
    if (q == 0 || (q == 1 && (b.base != dptr || b.async)))
        return CUDA_ERROR_INVALID_VALUE; /* the driver's answer for anything but a cuMemAlloc block's start */
    if (q == 1)
        return drk_ipc_export(handle, dptr);
    DRK_REAL_OR_MISSING(ipc_get_mem_handle);
    return real(handle, dptr);
}

DRK_BODY drk_body_ipc_open_mem_handle(drk_sym sym, CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags)
{
    if (drk_observing())
        drk_count_call(sym);
    if (drk_current_mode() != DRK_MODE_OFF && drk_ipc_is_drk_handle(&handle))
        return dptr ? drk_ipc_import(dptr, &handle, flags) : CUDA_ERROR_INVALID_VALUE;
    DRK_REAL_OR_MISSING(ipc_open_mem_handle);
    return real(dptr, handle, flags);
}

DRK_BODY drk_body_ipc_close_mem_handle(drk_sym sym, CUdeviceptr dptr)
{
    if (drk_observing())
        drk_count_call(sym);
    CUresult r;
    if (drk_current_mode() != DRK_MODE_OFF && drk_ipc_close(dptr, &r))
        return r;
    DRK_REAL_OR_MISSING(ipc_close_mem_handle);
    return real(dptr);
}

/* Peer access reaches cuMemAlloc memory by itself, pool pages only when
 * drk grants it. */
DRK_BODY drk_body_ctx_enable_peer_access(drk_sym sym, CUcontext peer, unsigned int flags)
{
    DRK_REAL_OR_MISSING(ctx_enable_peer_access);
    CUresult r = real(peer, flags);
    if ((r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) && drk_pooling())
        drk_dpool_peer_enabled(peer);
    return drk_counted(sym, r);
}

/* ---- Contexts that end ---- */

/* The primary context of `dev` if it is active (asking for it then creates
 * nothing), else NULL. Rare calls: teardown only. */
static CUcontext primary_of(CUdevice dev)
{
    const drk_driver *d = drk_driver_table();
    unsigned int flags;
    int active = 0;
    CUcontext ctx = NULL;
    if (!d->primary_ctx_get_state || !d->primary_ctx_retain || !d->primary_ctx_release ||
        d->primary_ctx_get_state(dev, &flags, &active) != CUDA_SUCCESS || !active ||
        d->primary_ctx_retain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    d->primary_ctx_release(dev);
    return ctx;
}

static int primary_active(CUdevice dev)
{
    const drk_driver *d = drk_driver_table();
    unsigned int flags;
    int active = 0;
    return d->primary_ctx_get_state && d->primary_ctx_get_state(dev, &flags, &active) == CUDA_SUCCESS && active;
}

/* Whether ctx is some device's primary context: cuCtxDestroy refuses those
 * and they must then stay served. */
static int is_primary(CUcontext ctx)
{
    const drk_driver *d = drk_driver_table();
    CUcontext cur = NULL;
    CUdevice dev;
    if (!d->ctx_get_current || !d->ctx_set_current || !d->ctx_get_device || d->ctx_get_current(&cur) != CUDA_SUCCESS)
        return 0;
    int ok = (cur == ctx || d->ctx_set_current(ctx) == CUDA_SUCCESS) && d->ctx_get_device(&dev) == CUDA_SUCCESS;
    if (cur != ctx)
        d->ctx_set_current(cur);
    return ok && primary_of(dev) == ctx;
}

static void context_ends(CUcontext ctx, int alive)
{
    if (drk_pooling())
        drk_dpool_context_ends(ctx, alive);
    drk_host_pool_context_ends(ctx);
}

DRK_BODY drk_body_ctx_destroy(drk_sym sym, CUcontext ctx)
{
    DRK_REAL_OR_MISSING(ctx_destroy);
    if (ctx && drk_current_mode() != DRK_MODE_OFF && !is_primary(ctx))
        context_ends(ctx, 1);
    return drk_counted(sym, real(ctx));
}

DRK_BODY drk_body_primary_ctx_reset(drk_sym sym, CUdevice dev)
{
    DRK_REAL_OR_MISSING(primary_ctx_reset);
    CUcontext ctx = drk_current_mode() != DRK_MODE_OFF ? primary_of(dev) : NULL;
    if (ctx)
        context_ends(ctx, 1);
    return drk_counted(sym, real(dev));
}

/* Only the last release ends the context, and only the driver knows which
 * is last: asked afterwards. (A device pool holds its own retain, so its
 * context never ends this way; the host pool's chunks may.) */
DRK_BODY drk_body_primary_ctx_release(drk_sym sym, CUdevice dev)
{
    DRK_REAL_OR_MISSING(primary_ctx_release);
    CUcontext ctx = drk_current_mode() != DRK_MODE_OFF ? primary_of(dev) : NULL;
    CUresult r = real(dev);
    if (ctx && r == CUDA_SUCCESS && !primary_active(dev))
        context_ends(ctx, 0);
    return drk_counted(sym, r);
}

/* A green context's streams use the primary context's memory without
 * being its streams: the device pool steps aside (alloc/device.h). */
DRK_BODY drk_body_green_ctx_create(drk_sym sym, CUgreenCtx *green, CUdevResourceDesc desc, CUdevice dev,
                                   unsigned int flags)
{
    DRK_REAL_OR_MISSING(green_ctx_create);
    CUresult r = real(green, desc, dev, flags);
    if (r == CUDA_SUCCESS && drk_pooling())
        drk_dpool_green_ctx(dev);
    return drk_counted(sym, r);
}

DRK_HOOKS_MEMORY(DRK_EXPORT)
