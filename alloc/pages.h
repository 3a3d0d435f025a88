/* The pool's page backend: physical pages and virtual ranges, the only way
 * the device pool reaches memory. On a GPU it is CUDA virtual memory
 * management through the driver table (cuMemCreate, cuMemAddressReserve,
 * cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease); in CI a host backend
 * maps real pages (memfd + mmap MAP_FIXED), so remapping and stitching are
 * tested on real memory; for replaying traces far larger than the machine,
 * a counting backend maps nothing.
 *
 * A page is one physical allocation of `page_size` bytes with its own
 * handle, so it can be mapped, unmapped and mapped again elsewhere (a
 * handle's memory cannot be split once mapped). A page may be mapped at
 * several virtual addresses at once. Every call returns 0 or a CUresult-like
 * error (DRK_PAGES_OOM when memory is exhausted). */
#ifndef DRK_ALLOC_PAGES_H
#define DRK_ALLOC_PAGES_H

#include <stddef.h>
#include <stdint.h>

enum {
    DRK_PAGES_OK = 0,
    DRK_PAGES_OOM = 2,     /* CUDA_ERROR_OUT_OF_MEMORY */
    DRK_PAGES_INVALID = 1, /* CUDA_ERROR_INVALID_VALUE: a misuse, a bug in the caller */
    DRK_PAGES_FAILED = 999, /* CUDA_ERROR_UNKNOWN: the backend itself failed */
    DRK_PAGES_BUSY = 600    /* CUDA_ERROR_NOT_READY: the heap's pages there are being mapped by the grower
                             * (heap.h); never a backend's answer, never the program's */
};

typedef uint64_t drk_page_handle;

typedef struct drk_page_backend drk_page_backend;

struct drk_page_backend {
    const char *name;  /* "vmm", "host", "counting" */
    size_t page_size;  /* the granularity: 2 MiB on an H200 */
    size_t capacity;   /* pages the backend can create at most (device memory / page_size) */

    /* A virtual range of `size` bytes (a multiple of page_size), aligned to
     * page_size, with nothing mapped. */
    int (*reserve)(drk_page_backend *b, size_t size, uintptr_t *va);
    int (*unreserve)(drk_page_backend *b, uintptr_t va, size_t size);

    /* One physical page; its contents are undefined. */
    int (*create)(drk_page_backend *b, drk_page_handle *page);
    /* Frees a page that is mapped nowhere. */
    int (*release)(drk_page_backend *b, drk_page_handle page);

    /* Maps `n` pages at va, va + page_size, ... (each page-aligned, inside a
     * reserved range, currently unmapped) and makes them readable and
     * writable by the device: one access call covers the run, as access
     * changes cost the same for one page or many. */
    int (*map)(drk_page_backend *b, uintptr_t va, const drk_page_handle *pages, size_t n);
    /* Unmaps [va, va + n * page_size), which map() mapped (possibly in
     * several calls). */
    int (*unmap)(drk_page_backend *b, uintptr_t va, size_t n);

    /* State, for tests and the trace replayer: pages created and not yet
     * released, and mappings in place (a page mapped at two addresses
     * counts twice). */
    size_t (*pages_created)(drk_page_backend *b);
    size_t (*pages_mapped)(drk_page_backend *b);

    /* Ends the backend: unmaps, releases and unreserves what is left. */
    void (*destroy)(drk_page_backend *b);
};

/* The CPU backends catch every misuse with DRK_PAGES_INVALID: an unaligned
 * or zero size, a run outside one reserved range, mapping a virtual page
 * that is mapped, unmapping one that is not, unreserving a range that is not
 * exactly one reserve()'s or that still has pages mapped, releasing a page
 * that is mapped or a handle that is not live (a released page's handle
 * stays invalid after its slot is reused). They serialize calls on a lock.
 * `capacity` must be below 2^32. */

/* Host backend: pages are page_size-byte slices of one memfd (a power of two,
 * a multiple of the system page size); `capacity` pages at most. A handle's
 * low 32 bits are its slice; released slices are reused, so the file grows
 * only to the most pages live at once. NULL if memfd or mmap is refused. */
drk_page_backend *drk_pages_host(size_t page_size, size_t capacity);

/* Counting backend: hands out addresses and handles, maps nothing (for
 * replaying traces of any size); `capacity` pages at most. Its addresses
 * start near 0x7f0000000000 with an unreserved page between ranges; they
 * must never be dereferenced. create and release cost O(1), map and unmap
 * O(1) a page plus O(log ranges). */
drk_page_backend *drk_pages_counting(size_t page_size, size_t capacity);

#endif
