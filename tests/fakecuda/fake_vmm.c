/* fakecuda, the stand-in libcuda.so.1: virtual memory management. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Virtual memory management: a reservation is a PROT_NONE host range, a    */
/* physical allocation a memfd, mapping is mmap MAP_FIXED of it (no access  */
/* until cuMemSetAccess), so one allocation shows at every address it is    */
/* mapped at, as on a GPU. Each cuMemMap is a record among the allocations  */
/* (A_VMM), so copies, sets and pointer queries see it once access is set.  */
/* Created bytes count as device memory in use from cuMemCreate to          */
/* cuMemRelease; imported handles do not count them again.                  */
/* ------------------------------------------------------------------------ */

#define FC_VMM_GRANULARITY ((size_t)2 << 20)
#define FC_VMM_FD_NAME "fakecuda-vmm"

FC_HIDDEN vmm_alloc g_vmm[FC_VMM_HANDLES];
FC_HIDDEN int g_vmm_init;

FC_HIDDEN struct resv *g_resv;
FC_HIDDEN size_t g_resv_n;
static size_t g_resv_cap;

/* ---- What the calls cost on a GPU, modelled (FAKECUDA_VMM_COSTS) ---- */

/* On a GPU every VMM call costs tens of microseconds of CPU time in the
 * driver, which is what drk's pool works to keep off the program's
 * allocations. FAKECUDA_VMM_COSTS=h200 makes each call here take what it
 * took on an H200 (docs/memory.md, tests/bench/vmm_costs), per handle
 * whatever its size: cuMemCreate 13 us, cuMemMap 8.5 us, cuMemSetAccess
 * 31 us per mapping it covers, cuMemUnmap 26 us per mapping it covers,
 * cuMemRelease 14 us (a refused call costs one handle's); or "C,M,A,U,R"
 * in microseconds. The time is spent spinning, outside the stand-in's lock
 * but one call at a time, as a driver that serializes them would. Unset: no
 * cost. */
enum { COST_CREATE, COST_MAP, COST_ACCESS, COST_UNMAP, COST_RELEASE, NCOSTS };
static double vmm_costs_us[NCOSTS];
static pthread_once_t vmm_costs_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t vmm_cost_lock = PTHREAD_MUTEX_INITIALIZER;

static void vmm_costs_load(void)
{
    const char *v = getenv("FAKECUDA_VMM_COSTS");
    static const double h200[NCOSTS] = {13, 8.5, 31, 26, 14};
    if (!v || !*v)
        return;
    if (!strcmp(v, "h200")) {
        memcpy(vmm_costs_us, h200, sizeof h200);
        return;
    }
    double c[NCOSTS];
    if (sscanf(v, "%lf,%lf,%lf,%lf,%lf", &c[0], &c[1], &c[2], &c[3], &c[4]) == NCOSTS)
        memcpy(vmm_costs_us, c, sizeof c);
    else
        fprintf(stderr, "fakecuda: FAKECUDA_VMM_COSTS=%s: not \"h200\" or five numbers; no costs modelled\n", v);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Spends what `handles` handles of call `kind` cost. */
static void vmm_cost(int kind, size_t handles)
{
    pthread_once(&vmm_costs_once, vmm_costs_load);
    double us = vmm_costs_us[kind] * (double)handles;
    if (us <= 0)
        return;
    pthread_mutex_lock(&vmm_cost_lock);
    for (double end = now_us() + us; now_us() < end;) {
    }
    pthread_mutex_unlock(&vmm_cost_lock);
}

/* Handles are slot + 1 with a tag, so 0 and stray values are refused. */
#define VMM_TAG 0x5a5a000000000000ull

/* Caller holds the lock. */
static vmm_alloc *vmm_of(CUmemGenericAllocationHandle h)
{
    if (!g_vmm_init || (h & 0xffff000000000000ull) != VMM_TAG || (h & 0xffffffffull) == 0 ||
        (h & 0xffffffffull) > FC_VMM_HANDLES)
        return NULL;
    vmm_alloc *a = &g_vmm[(h & 0xffffffffull) - 1];
    return a->fd >= 0 ? a : NULL;
}

/* Caller holds the lock. A free handle slot, or -1. */
static int vmm_free_slot(void)
{
    if (!g_vmm_init) {
        for (int i = 0; i < FC_VMM_HANDLES; i++)
            g_vmm[i].fd = -1;
        g_vmm_init = 1;
    }
    for (int i = 0; i < FC_VMM_HANDLES; i++)
        if (g_vmm[i].fd < 0)
            return i;
    return -1;
}

static int vmm_prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           prop->location.id == 0;
}

/* Caller holds the lock. The reservation holding all of [p, p + size)? */
static int resv_holds(uintptr_t p, size_t size)
{
    for (size_t i = 0; i < g_resv_n; i++)
        if (p >= g_resv[i].base && p - g_resv[i].base < g_resv[i].size &&
            size <= g_resv[i].size - (p - g_resv[i].base))
            return 1;
    return 0;
}

/* Caller holds the lock. Does any record overlap [p, p + size)? */
static int a_overlaps(uintptr_t p, size_t size)
{
    size_t i = a_lower(p + size); /* first base at or past the end */
    return i > 0 && a_items[i - 1]->base + a_items[i - 1]->size > p;
}

/* Caller holds the lock. [p, p + size) as whole mappings end to end: the
 * index of the first and, in *count, how many; -1 if it is not that. */
static long vmm_tiles(uintptr_t p, size_t size, size_t *count)
{
    size_t i = a_lower(p), j = i;
    uintptr_t at = p;
    while (at - p < size && j < a_n && a_items[j]->kind == A_VMM && a_items[j]->base == at)
        at += a_items[j++]->size;
    if (at - p != size)
        return -1;
    *count = j - i;
    return (long)i;
}

FC_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option)
{
    ENTER_INIT(cuMemGetAllocationGranularity);
    (void)option;
    if (!granularity || !vmm_prop_ok(prop))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = FC_VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                       unsigned long long flags)
{
    ENTER_INIT(cuMemAddressReserve);
    size_t align = alignment ? alignment : FC_VMM_GRANULARITY;
    if (!ptr || !size || size % FC_VMM_GRANULARITY || (align & (align - 1)) || addr || flags)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t raw = (uintptr_t)p, at = (raw + align - 1) & ~(uintptr_t)(align - 1);
    if (at > raw)
        munmap(p, at - raw);
    if (raw + size + align > at + size)
        munmap((void *)(at + size), raw + size + align - (at + size));
    LOCK();
    int ok = 1;
    if (g_resv_n == g_resv_cap) {
        size_t cap = g_resv_cap ? g_resv_cap * 2 : 16;
        struct resv *items = realloc(g_resv, cap * sizeof *items);
        if (items)
            g_resv = items, g_resv_cap = cap;
        else
            ok = 0;
    }
    if (ok)
        g_resv[g_resv_n++] = (struct resv){at, size};
    UNLOCK();
    if (!ok) {
        munmap((void *)at, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)at;
    return CUDA_SUCCESS;
}

/* The whole reservation, as reserved, with nothing mapped in it any more. */
FC_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    ENTER_INIT(cuMemAddressFree);
    if (!ptr || !size || ptr % FC_VMM_GRANULARITY || size % FC_VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    for (size_t i = 0; i < g_resv_n; i++) {
        if (g_resv[i].base != (uintptr_t)ptr || g_resv[i].size != size)
            continue;
        if (!a_overlaps((uintptr_t)ptr, size) && munmap((void *)(uintptr_t)ptr, size) == 0) {
            g_resv[i] = g_resv[--g_resv_n];
            rc = CUDA_SUCCESS;
        }
        break;
    }
    UNLOCK();
    return rc;
}

FC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    ENTER_INIT(cuMemCreate);
    if (!handle || !size || size % FC_VMM_GRANULARITY || !vmm_prop_ok(prop) || flags)
        return CUDA_ERROR_INVALID_VALUE;
    /* Only file descriptors can be shared here (no Win32, no fabric). */
    if (prop->requestedHandleTypes & ~(unsigned int)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    vmm_cost(COST_CREATE, 1);
    LOCK();
    int slot = vmm_free_slot();
    CUresult rc = CUDA_SUCCESS;
    if (slot < 0 || size > g_total_mem - g_live_bytes) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        int fd = memfd_create(FC_VMM_FD_NAME, MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
            if (fd >= 0)
                close(fd);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            g_vmm[slot] = (vmm_alloc){fd, size, (unsigned int)prop->requestedHandleTypes, 0};
            g_live_bytes += size;
            *handle = VMM_TAG | (CUmemGenericAllocationHandle)(slot + 1);
        }
    }
    UNLOCK();
    return rc;
}

/* Memory stays where it is mapped (the mappings hold the file) until
 * unmapped, as the driver documents; the handle is gone at once. */
FC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    ENTER_INIT(cuMemRelease);
    vmm_cost(COST_RELEASE, 1);
    LOCK();
    vmm_alloc *a = vmm_of(handle);
    if (a) {
        close(a->fd);
        a->fd = -1;
        if (!a->imported)
            g_live_bytes -= a->size;
    }
    UNLOCK();
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Whole allocations only (offset 0, size = the allocation's), inside a
 * reservation, over nothing already mapped. */
FC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags)
{
    ENTER_INIT(cuMemMap);
    uintptr_t at = (uintptr_t)ptr;
    vmm_cost(COST_MAP, 1);
    LOCK();
    vmm_alloc *a = vmm_of(handle);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (a && at && at % FC_VMM_GRANULARITY == 0 && offset == 0 && size == a->size && !flags && resv_holds(at, size) &&
        !a_overlaps(at, size)) {
        struct alloc *m = malloc(sizeof *m);
        if (!m) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else if (mmap((void *)at, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, 0) == MAP_FAILED) {
            free(m);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *m = (struct alloc){at, size, size, atomic_fetch_add(&g_next_buffer_id, 1), A_VMM, 0, 0,
                                (CUcontext)&g_primary};
            if (a_add(m) == 0) {
                rc = CUDA_SUCCESS;
            } else {
                mmap((void *)at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
                free(m);
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
    }
    UNLOCK();
    return rc;
}

/* Whole mappings only (one or several end to end); the range goes back to
 * being reserved. */
FC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    ENTER_INIT(cuMemUnmap);
    if (!ptr || !size || ptr % FC_VMM_GRANULARITY || size % FC_VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    size_t n = 1;
    long i = vmm_tiles((uintptr_t)ptr, size, &n);
    if (i >= 0 && mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                       -1, 0) != MAP_FAILED) {
        for (size_t k = 0; k < n; k++)
            free(a_items[(size_t)i + k]);
        memmove(a_items + i, a_items + (size_t)i + n, (a_n - (size_t)i - n) * sizeof *a_items);
        a_n -= n;
        rc = CUDA_SUCCESS;
    }
    UNLOCK();
    vmm_cost(COST_UNMAP, n);
    return rc;
}

/* A range of whole mappings end to end, as the driver documents. */
FC_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    ENTER_INIT(cuMemSetAccess);
    if (!ptr || !size || !desc || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        desc->location.id != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot;
    switch (desc->flags) {
    case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot = PROT_NONE; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READ: prot = PROT_READ; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot = PROT_READ | PROT_WRITE; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    size_t n = 1;
    long i = vmm_tiles((uintptr_t)ptr, size, &n);
    if (i >= 0 && mprotect((void *)(uintptr_t)ptr, size, prot) == 0) {
        for (size_t k = 0; k < n; k++)
            a_items[(size_t)i + k]->prot = prot;
        rc = CUDA_SUCCESS;
    }
    UNLOCK();
    vmm_cost(COST_ACCESS, n);
    return rc;
}

/* A file descriptor (a dup of the allocation's memfd; the caller closes
 * it), for handles created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
 * requested. */
FC_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                CUmemAllocationHandleType handleType, unsigned long long flags)
{
    ENTER_INIT(cuMemExportToShareableHandle);
    if (!shareableHandle || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    LOCK();
    vmm_alloc *a = vmm_of(handle);
    if (a && (a->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        int fd = dup(a->fd);
        if (fd >= 0) {
            *(int *)shareableHandle = fd;
            rc = CUDA_SUCCESS;
        } else {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    UNLOCK();
    return rc;
}

/* Is fd one of this library's allocation memfds? Its size in *size. */
static int vmm_fd_size(intptr_t fd, size_t *size)
{
    struct stat st;
    char link[64], target[64];
    if (fd < 0 || fd > INT_MAX || fstat((int)fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (size_t)st.st_size % FC_VMM_GRANULARITY)
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", (int)fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        return 0;
    target[n] = '\0';
    if (strncmp(target, "/memfd:" FC_VMM_FD_NAME, strlen("/memfd:" FC_VMM_FD_NAME)) != 0)
        return 0;
    *size = (size_t)st.st_size;
    return 1;
}

/* A new handle on the same memory (its own dup of the fd): mapping it shows
 * the same bytes. Not counted as device memory again. */
FC_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    ENTER_INIT(cuMemImportFromShareableHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t size;
    if (!vmm_fd_size((intptr_t)osHandle, &size))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    LOCK();
    int slot = vmm_free_slot();
    int fd = slot < 0 ? -1 : fcntl((int)(intptr_t)osHandle, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0) {
        g_vmm[slot] = (vmm_alloc){fd, size, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1};
        *handle = VMM_TAG | (CUmemGenericAllocationHandle)(slot + 1);
        rc = CUDA_SUCCESS;
    }
    UNLOCK();
    return rc;
}
