/* fakecuda, the stand-in libcuda.so.1: device memory, pointer queries, IPC
 * handles, copies and sets. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

/* Live allocations sorted by base, for containing-pointer lookups. */
FC_HIDDEN struct alloc **a_items;
FC_HIDDEN size_t a_n;
static size_t a_cap;

FC_HIDDEN size_t a_lower(uintptr_t key)
{
    size_t lo = 0, hi = a_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a_items[mid]->base < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Caller holds the lock. Any record containing p, VMM mappings without
 * access included. */
static struct alloc *a_containing_any(uintptr_t p)
{
    size_t i = a_lower(p + 1); /* first base > p */
    if (i == 0)
        return NULL;
    struct alloc *a = a_items[i - 1];
    return p - a->base < a->size ? a : NULL;
}

/* Caller holds the lock. The memory containing p as the driver sees it: a
 * mapping nobody may access yet is not device memory. */
FC_HIDDEN struct alloc *a_containing(uintptr_t p)
{
    struct alloc *a = a_containing_any(p);
    return a && a->kind == A_VMM && !a->prot ? NULL : a;
}

static struct alloc *a_exact(uintptr_t p)
{
    size_t i = a_lower(p);
    return i < a_n && a_items[i]->base == p ? a_items[i] : NULL;
}

FC_HIDDEN int a_add(struct alloc *a)
{
    if (a_n == a_cap) {
        size_t cap = a_cap ? a_cap * 2 : 256;
        struct alloc **items = realloc(a_items, cap * sizeof *items);
        if (!items)
            return -1;
        a_items = items, a_cap = cap;
    }
    size_t i = a_lower(a->base);
    memmove(a_items + i + 1, a_items + i, (a_n - i) * sizeof *a_items);
    a_items[i] = a;
    a_n++;
    return 0;
}

static void a_del(struct alloc *a)
{
    size_t i = a_lower(a->base);
    if (i < a_n && a_items[i] == a) {
        memmove(a_items + i, a_items + i + 1, (a_n - i - 1) * sizeof *a_items);
        a_n--;
    }
}

/* Device (host == 0) or pinned host memory (with its cuMemHostAlloc
 * flags). low32: under 4 GiB for the legacy forms' 32-bit pointers. */
FC_HIDDEN CUresult mem_alloc(uintptr_t *out, size_t size, int host, int low32, unsigned int flags)
{
    if (!out || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    long page = sysconf(_SC_PAGESIZE);
    LOCK();
    if (!host) {
        if (size > g_total_mem - g_live_bytes) {
            UNLOCK();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_live_bytes += size; /* reserved before mapping, so racing threads see it */
    }
    UNLOCK();
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc *a = NULL;
    size_t maplen = size + (size_t)page - 1;
    if (maplen < size)
        goto fail;
    maplen &= ~((size_t)page - 1);
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (low32 ? MAP_32BIT : 0), -1, 0);
    if (p == MAP_FAILED)
        goto fail;
    if (low32 && (uintptr_t)p + maplen > ((uintptr_t)1 << 32)) {
        munmap(p, maplen);
        goto fail;
    }
    a = malloc(sizeof *a);
    if (!a) {
        munmap(p, maplen);
        goto fail;
    }
    struct ctx *c = current_ctx();
    *a = (struct alloc){(uintptr_t)p, size, maplen, atomic_fetch_add(&g_next_buffer_id, 1), host ? A_HOST : A_DEVICE,
                        0, flags, (CUcontext)(c ? c : &g_primary)};
    LOCK();
    if (a_add(a) != 0) {
        UNLOCK();
        munmap(p, maplen);
        free(a);
        goto fail;
    }
    if (host)
        g_live_host++;
    else
        g_live_dev++;
    UNLOCK();
    *out = (uintptr_t)p;
    return CUDA_SUCCESS;
fail:
    if (!host) {
        LOCK();
        g_live_bytes -= size;
        UNLOCK();
    }
    return rc;
}

/* Frees the allocation based exactly at p, if it is of the right kind. */
FC_HIDDEN CUresult mem_free(uintptr_t p, int host)
{
    LOCK();
    struct alloc *a = a_exact(p);
    if (!a || a->kind != (host ? A_HOST : A_DEVICE)) {
        UNLOCK();
        return CUDA_ERROR_INVALID_VALUE;
    }
    a_del(a);
    if (host) {
        g_live_host--;
    } else {
        g_live_dev--;
        g_live_bytes -= a->size;
    }
    UNLOCK();
    munmap((void *)a->base, a->maplen);
    free(a);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    ENTER_INIT(cuMemAlloc);
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 0, 1, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return rc;
}

FC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    ENTER_INIT(cuMemAlloc_v2);
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, bytesize, 0, 0, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return rc;
}

static CUresult pitch_of(size_t width, size_t height, unsigned int elem, size_t *pitch, size_t *bytes)
{
    if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (width > SIZE_MAX - FC_PITCH_ALIGN)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pitch = (width + FC_PITCH_ALIGN - 1) / FC_PITCH_ALIGN * FC_PITCH_ALIGN;
    if (height > SIZE_MAX / *pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *bytes = *pitch * height;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                   unsigned int Height, unsigned int ElementSizeBytes)
{
    ENTER_INIT(cuMemAllocPitch);
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch, bytes;
    CUresult rc = pitch_of(WidthInBytes, Height, ElementSizeBytes, &pitch, &bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pitch > UINT32_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t p;
    rc = mem_alloc(&p, bytes, 0, 1, 0);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return rc;
}

FC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes)
{
    ENTER_INIT(cuMemAllocPitch_v2);
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch, bytes;
    CUresult rc = pitch_of(WidthInBytes, Height, ElementSizeBytes, &pitch, &bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    uintptr_t p;
    rc = mem_alloc(&p, bytes, 0, 0, 0);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr)p;
        *pPitch = pitch;
    }
    return rc;
}

FC_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    ENTER_INIT(cuMemFree);
    return mem_free(dptr, 0);
}

FC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    ENTER_INIT(cuMemFree_v2);
    return mem_free((uintptr_t)dptr, 0);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_ok(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    uintptr_t p;
    CUresult rc = mem_alloc(&p, size, 0, 0, 0);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream stream)
{
    if (!stream_ok(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    return mem_free((uintptr_t)dptr, 0);
}

FC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    ENTER_INIT(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, hStream);
}

FC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    ENTER_INIT(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, hStream);
}

/* Pools are not modelled: any non-NULL pool allocates like the default. */
FC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    ENTER_INIT(cuMemAllocFromPoolAsync);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, hStream);
}

FC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream)
{
    ENTER_INIT(cuMemAllocFromPoolAsync_ptsz);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, hStream);
}

FC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    ENTER_INIT(cuMemFreeAsync);
    return free_async(dptr, hStream);
}

FC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    ENTER_INIT(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream);
}

static void mem_info(size_t *free_bytes, size_t *total)
{
    LOCK();
    *total = g_total_mem;
    *free_bytes = g_total_mem - g_live_bytes;
    UNLOCK();
}

FC_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes)
{
    ENTER_INIT(cuMemGetInfo);
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    size_t f, t;
    mem_info(&f, &t);
    *free_bytes = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
    *total_bytes = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    ENTER_INIT(cuMemGetInfo_v2);
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    mem_info(free_bytes, total_bytes);
    return CUDA_SUCCESS;
}

/* Device allocations only, as documented for cuMemAlloc/cuMemAllocPitch;
 * for VMM memory the one mapping (cuMemMap call) containing p. */
static CUresult address_range(uintptr_t p, uintptr_t *base, size_t *size)
{
    LOCK();
    struct alloc *a = a_containing(p);
    if (!a || a->kind == A_HOST) {
        UNLOCK();
        return CUDA_ERROR_NOT_FOUND;
    }
    *base = a->base;
    *size = a->size;
    UNLOCK();
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    ENTER_INIT(cuMemGetAddressRange);
    uintptr_t base;
    size_t size;
    CUresult rc = address_range(dptr, &base, &size);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pbase)
        *pbase = (CUdeviceptr_v1)base;
    if (psize)
        *psize = (unsigned int)size;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    ENTER_INIT(cuMemGetAddressRange_v2);
    uintptr_t base;
    size_t size;
    CUresult rc = address_range((uintptr_t)dptr, &base, &size);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pbase)
        *pbase = (CUdeviceptr)base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

/* One attribute of allocation a (NULL: an unknown pointer, written as the
 * zero/NULL default cuPointerGetAttributes documents). */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, uintptr_t p, const struct alloc *a)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a ? a->ctx : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !a ? 0u : a->kind == A_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = a ? (CUdeviceptr)p : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a && a->kind != A_HOST)
            return CUDA_ERROR_INVALID_VALUE; /* device memory has no host address */
        *(void **)data = a ? (void *)p : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = a ? a->id : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(unsigned int *)data = a && a->kind == A_DEVICE; /* not VMM memory, not host */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a ? (CUdeviceptr)a->base : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a ? a->size : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = a != NULL;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

FC_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    ENTER_INIT(cuPointerGetAttribute);
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct alloc *a = a_containing((uintptr_t)ptr);
    struct alloc copy;
    if (a)
        copy = *a;
    UNLOCK();
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, (uintptr_t)ptr, &copy);
}

FC_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                          CUdeviceptr ptr)
{
    ENTER_INIT(cuPointerGetAttributes);
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < numAttributes; i++)
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct alloc *a = a_containing((uintptr_t)ptr);
    struct alloc copy;
    if (a)
        copy = *a;
    UNLOCK();
    for (unsigned int i = 0; i < numAttributes; i++) {
        CUresult rc = pointer_attribute(data[i], attributes[i], (uintptr_t)ptr, a ? &copy : NULL);
        if (rc != CUDA_SUCCESS) {
            if (attributes[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER)
                return rc;
            *(void **)data[i] = NULL; /* device memory has no host pointer; not an error here */
        }
    }
    return CUDA_SUCCESS;
}

/* The handle holds the allocation's base address (bytes 0-7) and buffer id
 * (bytes 8-15), so a reused address gives a new handle. VMM memory has no
 * legacy IPC handle. */
FC_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    ENTER_INIT(cuIpcGetMemHandle);
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct alloc *a = a_containing((uintptr_t)dptr);
    unsigned long long words[2] = {0, 0};
    if (a && a->kind == A_DEVICE)
        words[0] = a->base, words[1] = a->id;
    UNLOCK();
    if (!words[0])
        return CUDA_ERROR_INVALID_VALUE;
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, words, sizeof words);
    return CUDA_SUCCESS;
}

FC_HIDDEN struct ipc_open *g_ipc;
FC_HIDDEN size_t g_ipc_n;
static size_t g_ipc_cap;
FC_HIDDEN unsigned long long g_ipc_live;

/* Caller holds the lock. */
FC_HIDDEN struct ipc_open *ipc_find(uintptr_t base, const unsigned long long *id)
{
    for (size_t i = 0; i < g_ipc_n; i++)
        if (g_ipc[i].base == base && (!id || g_ipc[i].id == *id))
            return &g_ipc[i];
    return NULL;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    if (!pdptr || (flags & ~(unsigned int)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long words[2];
    memcpy(words, handle.reserved, sizeof words);
    LOCK();
    struct alloc *a = words[0] ? a_exact((uintptr_t)words[0]) : NULL;
    if (!a || a->kind != A_DEVICE || a->id != words[1]) {
        UNLOCK();
        return CUDA_ERROR_INVALID_VALUE; /* unknown, or its allocation is gone */
    }
    struct ipc_open *o = ipc_find(a->base, &a->id);
    if (!o) {
        if (g_ipc_n == g_ipc_cap) {
            size_t cap = g_ipc_cap ? g_ipc_cap * 2 : 16;
            struct ipc_open *items = realloc(g_ipc, cap * sizeof *items);
            if (!items) {
                UNLOCK();
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            g_ipc = items, g_ipc_cap = cap;
        }
        o = &g_ipc[g_ipc_n++];
        *o = (struct ipc_open){a->base, a->id, 0};
    }
    o->refs++;
    g_ipc_live++;
    UNLOCK();
    *pdptr = (CUdeviceptr)words[0];
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    ENTER_INIT(cuIpcOpenMemHandle);
    return ipc_open(pdptr, handle, Flags);
}

FC_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    ENTER_INIT(cuIpcOpenMemHandle_v2);
    return ipc_open(pdptr, handle, Flags);
}

FC_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    ENTER_INIT(cuIpcCloseMemHandle);
    LOCK();
    struct ipc_open *o = dptr ? ipc_find((uintptr_t)dptr, NULL) : NULL;
    if (o) {
        g_ipc_live--;
        if (--o->refs == 0)
            *o = g_ipc[--g_ipc_n];
    }
    UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_EXPORT unsigned long long fakecuda_ipc_open_count(void)
{
    LOCK();
    unsigned long long n = g_ipc_live;
    UNLOCK();
    return n;
}

/* ------------------------------------------------------------------------ */
/* Copies and sets (checked against live allocations, device or pinned)     */
/* ------------------------------------------------------------------------ */

/* Is [p, p + n) memory a copy may read (write: and write)? One allocation,
 * or VMM mappings end to end (a pool's block spans several pages), each
 * with access set; a read-only mapping refuses writes. */
static int range_ok(uintptr_t p, size_t n, int write)
{
    LOCK();
    struct alloc *a = a_containing(p);
    int ok = 0;
    if (a && a->kind != A_VMM) {
        ok = n <= a->size - (p - a->base);
    } else if (a) {
        size_t i = a_lower(a->base), left = n;
        uintptr_t at = p;
        while (i < a_n && (a = a_items[i])->kind == A_VMM && a->base <= at && a->prot &&
               (!write || (a->prot & PROT_WRITE))) {
            size_t room = a->size - (at - a->base);
            if (left <= room) {
                ok = 1;
                break;
            }
            left -= room;
            at = a->base + a->size;
            if (++i < a_n && a_items[i]->base != at)
                break;
        }
    }
    UNLOCK();
    return ok;
}

static CUresult copy_htod(uintptr_t dst, const void *src, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!src || !range_ok(dst, n, 1))
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)dst, src, n);
    return CUDA_SUCCESS;
}

static CUresult copy_dtoh(void *dst, uintptr_t src, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!dst || !range_ok(src, n, 0))
        return CUDA_ERROR_INVALID_VALUE;
    memmove(dst, (const void *)src, n);
    return CUDA_SUCCESS;
}

static CUresult copy_dtod(uintptr_t dst, uintptr_t src, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!range_ok(dst, n, 1) || !range_ok(src, n, 0))
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)dst, (const void *)src, n);
    return CUDA_SUCCESS;
}

static CUresult set_d8(uintptr_t dst, unsigned char v, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!range_ok(dst, n, 1))
        return CUDA_ERROR_INVALID_VALUE;
    memset((void *)dst, v, n);
    return CUDA_SUCCESS;
}

static CUresult set_d32(uintptr_t dst, unsigned int v, size_t n)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (dst % 4 != 0 || n > SIZE_MAX / 4 || !range_ok(dst, n * 4, 1))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int *d = (unsigned int *)dst;
    for (size_t i = 0; i < n; i++)
        d[i] = v;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    ENTER_INIT(cuMemcpyHtoD);
    return copy_htod(dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyHtoD_v2);
    return copy_htod((uintptr_t)dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyHtoD_v2_ptds);
    return copy_htod((uintptr_t)dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    ENTER_INIT(cuMemcpyDtoH);
    return copy_dtoh(dstHost, srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoH_v2);
    return copy_dtoh(dstHost, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoH_v2_ptds);
    return copy_dtoh(dstHost, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    ENTER_INIT(cuMemcpyDtoD);
    return copy_dtod(dstDevice, srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoD_v2);
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyDtoD_v2_ptds);
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

/* Async copies and sets run at once, in order with everything else. */
FC_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                        CUstream hStream)
{
    ENTER_INIT(cuMemcpyDtoDAsync_v2);
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

/* Peer copies: one device, and device memory is one address space across
 * its contexts (unified addressing, as on the driver), so they copy as
 * cuMemcpyDtoD does once both contexts check out: live created contexts,
 * or the primary while active (retained, not reset since). */
static CUresult peer_ctxs_ok(CUcontext dst, CUcontext src)
{
    LOCK();
    int live = 1;
    CUcontext both[2] = {dst, src};
    for (int i = 0; i < 2; i++) {
        struct ctx *c = h_get(both[i], MAGIC_CTX);
        live &= c && (!c->primary || (g_primary_refs > 0 && g_primary_active));
    }
    UNLOCK();
    return live;
}

FC_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount)
{
    ENTER_INIT(cuMemcpyPeer);
    if (!peer_ctxs_ok(dstContext, srcContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                     CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    ENTER_INIT(cuMemcpyPeerAsync);
    if (!peer_ctxs_ok(dstContext, srcContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return copy_dtod((uintptr_t)dstDevice, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    ENTER_INIT(cuMemcpyDtoHAsync_v2);
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return copy_dtoh(dstHost, (uintptr_t)srcDevice, ByteCount);
}

FC_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                        CUstream hStream)
{
    ENTER_INIT(cuMemcpyHtoDAsync_v2);
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return copy_htod((uintptr_t)dstDevice, srcHost, ByteCount);
}

FC_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    ENTER_INIT(cuMemsetD8Async);
    if (!stream_ok(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return set_d8((uintptr_t)dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
    ENTER_INIT(cuMemsetD8);
    return set_d8(dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    ENTER_INIT(cuMemsetD8_v2);
    return set_d8((uintptr_t)dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    ENTER_INIT(cuMemsetD8_v2_ptds);
    return set_d8((uintptr_t)dstDevice, uc, N);
}

FC_EXPORT CUresult cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N)
{
    ENTER_INIT(cuMemsetD32);
    return set_d32(dstDevice, ui, N);
}

FC_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    ENTER_INIT(cuMemsetD32_v2);
    return set_d32((uintptr_t)dstDevice, ui, N);
}

FC_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    ENTER_INIT(cuMemsetD32_v2_ptds);
    return set_d32((uintptr_t)dstDevice, ui, N);
}

/* ------------------------------------------------------------------------ */
/* Test-side memory helpers                                                 */
/* ------------------------------------------------------------------------ */

FC_EXPORT unsigned long long fakecuda_live_device_allocations(void)
{
    LOCK();
    unsigned long long n = g_live_dev;
    UNLOCK();
    return n;
}

FC_EXPORT size_t fakecuda_live_device_bytes(void)
{
    LOCK();
    size_t n = g_live_bytes;
    UNLOCK();
    return n;
}

FC_EXPORT unsigned long long fakecuda_live_host_allocations(void)
{
    LOCK();
    unsigned long long n = g_live_host;
    UNLOCK();
    return n;
}

FC_EXPORT void fakecuda_set_total_memory(size_t bytes)
{
    LOCK();
    /* Never below what is live, so free never goes negative. */
    g_total_mem = bytes < g_live_bytes ? g_live_bytes : bytes;
    UNLOCK();
}
