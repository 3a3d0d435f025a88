/* The bookkeeping both CPU page backends share (alloc/pages_host.c,
 * alloc/pages_counting.c): live pages with per-page map counts, reserved
 * ranges, and which page is mapped at each virtual page. Every misuse of the
 * backend interface is caught here, at O(1) per page or O(log ranges) per
 * call. Not thread-safe: the backend holds its lock around each call.
 *
 * Map and unmap are split into a check, which changes nothing (so a backend
 * can then do the real work and still back out), and a commit, which cannot
 * fail. */
#ifndef DRK_ALLOC_PAGES_BOOK_H
#define DRK_ALLOC_PAGES_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "alloc/pages.h"

typedef struct drk_book_slot {
    uint32_t gen;  /* odd while the page is live; bumped on create and release */
    uint32_t maps; /* virtual addresses the page is mapped at */
    uint32_t next; /* next free slot, while free */
} drk_book_slot;

typedef struct drk_book_range {
    uintptr_t start;
    size_t size;
    size_t mapped; /* pages mapped inside it */
} drk_book_range;

typedef struct drk_book_entry {
    uint64_t key; /* virtual page number + 1; 0: empty */
    drk_page_handle page;
} drk_book_entry;

typedef struct drk_pages_book {
    size_t page_size, capacity;
    drk_book_slot *slots; /* a handle is gen << 32 | slot index */
    uint32_t nslots, slots_cap, free_head; /* free_head: UINT32_MAX when none */
    size_t live;                           /* pages created and not released */
    drk_book_range *ranges;                /* sorted by start, disjoint */
    size_t nranges, ranges_cap;
    drk_book_entry *table; /* open addressing, linear probing, load <= 1/2 */
    size_t table_cap, mapped;
} drk_pages_book;

/* 0, or DRK_PAGES_INVALID for a page size that is not a power of two or a
 * capacity of 2^32 pages or more. */
int drk_book_init(drk_pages_book *k, size_t page_size, size_t capacity);
void drk_book_fini(drk_pages_book *k);

/* The slot index of a handle (the host backend's memfd slice). */
static inline uint32_t drk_book_slot_of(drk_page_handle page) { return (uint32_t)page; }

/* A new live page (OOM at capacity, FAILED when out of host memory). */
int drk_book_create(drk_pages_book *k, drk_page_handle *page);
/* INVALID unless the page is live and mapped nowhere. */
int drk_book_release(drk_pages_book *k, drk_page_handle page);

/* INVALID for a size that is zero or not a multiple of the page size. */
int drk_book_reserve_check(const drk_pages_book *k, size_t size);
/* Records [va, va + size); FAILED when out of host memory or overlapping. */
int drk_book_reserve_add(drk_pages_book *k, uintptr_t va, size_t size);
/* INVALID unless [va, va + size) is exactly a reserved range with nothing
 * mapped in it; *at is its index for drk_book_unreserve_commit. */
int drk_book_unreserve_check(const drk_pages_book *k, uintptr_t va, size_t size, size_t *at);
void drk_book_unreserve_commit(drk_pages_book *k, size_t at);

/* INVALID unless the run is page-aligned, inside one reserved range, every
 * virtual page in it unmapped and every page live; FAILED when out of host
 * memory (the room the commit needs is made here). */
int drk_book_map_check(drk_pages_book *k, uintptr_t va, const drk_page_handle *pages, size_t n, size_t *at);
void drk_book_map_commit(drk_pages_book *k, uintptr_t va, const drk_page_handle *pages, size_t n, size_t at);

/* INVALID unless the run is page-aligned, inside one reserved range and
 * every virtual page in it mapped. */
int drk_book_unmap_check(const drk_pages_book *k, uintptr_t va, size_t n, size_t *at);
void drk_book_unmap_commit(drk_pages_book *k, uintptr_t va, size_t n, size_t at);

#endif
