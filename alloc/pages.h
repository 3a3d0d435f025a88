/* The pool's page backend: physical pages and virtual ranges, the only way
 * the device pool reaches memory. On a GPU it is CUDA virtual memory
 * management through the driver table (cuMemCreate, cuMemAddressReserve,
 * cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease); in CI a host backend
 * maps real pages (memfd + mmap MAP_FIXED), so remapping and stitching are
 * tested on real memory; for replaying traces far larger than the machine,
 * a counting backend maps nothing.
 *
 * A page is `page_size` bytes of physical memory. A handle is one physical
 * allocation of one page or of a run of several (a run handle: the driver
 * charges per handle, whatever its size), mapped whole or not at all: it
 * can be mapped, unmapped and mapped again elsewhere, but its memory cannot
 * be split. A handle may be mapped at several virtual addresses at once.
 * Counts (capacity, pages created, pages mapped) are in pages, never
 * handles. Every call returns 0 or a CUresult-like error (DRK_PAGES_OOM
 * when memory is exhausted). */
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
    /* One physical allocation of `n` consecutive pages (n >= 1; n == 1 is
     * exactly what create makes), one handle for all of them; OOM when the
     * pages live plus n would pass capacity. */
    int (*create_run)(drk_page_backend *b, size_t n, drk_page_handle *handle);
    /* Frees a handle, all its pages, once it is mapped nowhere. */
    int (*release)(drk_page_backend *b, drk_page_handle handle);

    /* Maps `n` handles one after another from va: a handle of k pages takes
     * k consecutive virtual pages, each page-aligned, inside one reserved
     * range and currently unmapped. Then makes the run readable and
     * writable by the device: one access call covers it all, as access
     * changes cost the same for one page or many. */
    int (*map)(drk_page_backend *b, uintptr_t va, const drk_page_handle *handles, size_t n);
    /* Unmaps the `n` pages [va, va + n * page_size), which map() mapped
     * (possibly in several calls). Every page in it must be mapped and every
     * mapping in it covered whole: a run handle mapped at some address is
     * unmapped there entirely or not at all. */
    int (*unmap)(drk_page_backend *b, uintptr_t va, size_t n);

    /* State, for tests and the trace replayer, in pages: pages created and
     * not yet released, and virtual pages mapped (a page mapped at two
     * addresses counts twice). */
    size_t (*pages_created)(drk_page_backend *b);
    size_t (*pages_mapped)(drk_page_backend *b);

    /* Ends the backend: unmaps, releases and unreserves what is left. */
    void (*destroy)(drk_page_backend *b);
};

/* The CPU backends catch every misuse with DRK_PAGES_INVALID: an unaligned
 * or zero size or page count, a run outside one reserved range, mapping a
 * virtual page that is mapped, unmapping one that is not or only part of a
 * run handle's mapping, unreserving a range that is not exactly one
 * reserve()'s or that still has pages mapped, releasing a handle that is
 * mapped or that is not live (a released handle stays invalid after its
 * slots are reused). They serialize calls on a lock. `capacity` must be
 * below 2^32. */

/* Host backend: pages are page_size-byte slices of one memfd (a power of two,
 * a multiple of the system page size); `capacity` pages at most. A handle's
 * low 32 bits are its first slice; a run handle's other slices need not
 * follow it in the file. Released slices are reused, so the file grows only
 * to the most pages live at once. NULL if memfd or mmap is refused. */
drk_page_backend *drk_pages_host(size_t page_size, size_t capacity);

/* Counting backend: hands out addresses and handles, maps nothing (for
 * replaying traces of any size); `capacity` pages at most. Its addresses
 * start near 0x7f0000000000 with an unreserved page between ranges; they
 * must never be dereferenced. create, release, map and unmap cost O(1) a
 * page, map and unmap plus O(log ranges). */
drk_page_backend *drk_pages_counting(size_t page_size, size_t capacity);

#endif
