/* The bookkeeping both CPU page backends share (alloc/pages_host.c,
 * alloc/pages_counting.c), and the device one's checks: live handles with
 * their pages and map counts, reserved ranges, and which page of which
 * handle is mapped at each virtual page. Every misuse of the backend
 * interface is caught here, at O(1) per page or O(log ranges) per call. Not
 * thread-safe: the backend holds its lock around each call.
 *
 * A handle of n pages takes n slots: its head (the handle's own) and n - 1
 * members chained from it, taken from the free slots like any other, so a
 * backend can keep something per page by slot (the host backend's memfd
 * slices).
 *
 * Map and unmap are split into a check, which changes nothing (so a backend
 * can then do the real work and still back out), and a commit, which cannot
 * fail. */
#ifndef DRK_ALLOC_PAGES_BOOK_H
#define DRK_ALLOC_PAGES_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "alloc/pages.h"

#define DRK_BOOK_NO_SLOT UINT32_MAX

typedef struct drk_book_slot {
    uint32_t gen;    /* odd while in use; bumped on create and release */
    uint32_t npages; /* a live head: its handle's pages; 0 on a member, whose own handle is never live */
    uint32_t maps;   /* a head: virtual addresses its handle is mapped at */
    uint32_t next;   /* in use: the handle's next slot (DRK_BOOK_NO_SLOT after the last); free: the next free */
} drk_book_slot;

typedef struct drk_book_range {
    uintptr_t start;
    size_t size;
    size_t mapped; /* pages mapped inside it */
} drk_book_range;

typedef struct drk_book_entry {
    uint64_t key;  /* virtual page number + 1; 0: empty */
    uint32_t slot; /* the mapped handle's head slot */
    uint32_t off;  /* the page's place in that handle: a mapping starts at 0 */
} drk_book_entry;

typedef struct drk_pages_book {
    size_t page_size, capacity;
    drk_book_slot *slots; /* a handle is gen << 32 | its head's slot index */
    uint32_t nslots, slots_cap, free_head; /* free_head: DRK_BOOK_NO_SLOT when none */
    size_t live;                           /* pages (not handles) created and not released */
    drk_book_range *ranges;                /* sorted by start, disjoint */
    size_t nranges, ranges_cap;
    drk_book_entry *table; /* open addressing, linear probing, load <= 1/2 */
    size_t table_cap, mapped;
} drk_pages_book;

/* 0, or DRK_PAGES_INVALID for a page size that is not a power of two or a
 * capacity of 2^32 pages or more. */
int drk_book_init(drk_pages_book *k, size_t page_size, size_t capacity);
void drk_book_fini(drk_pages_book *k);

/* The head slot of a handle (the host backend's memfd slice for its first
 * page). */
static inline uint32_t drk_book_slot_of(drk_page_handle page) { return (uint32_t)page; }
/* A live handle's slots in page order: its head, then each next one until
 * DRK_BOOK_NO_SLOT. */
static inline uint32_t drk_book_next_slot(const drk_pages_book *k, uint32_t slot) { return k->slots[slot].next; }
/* A live handle's pages, or 0 for one that is not live. */
size_t drk_book_pages_of(const drk_pages_book *k, drk_page_handle page);

/* A new live handle of n pages (INVALID for n == 0, OOM past capacity,
 * FAILED when out of host memory); drk_book_create is n == 1. */
int drk_book_create_run(drk_pages_book *k, size_t n, drk_page_handle *page);
int drk_book_create(drk_pages_book *k, drk_page_handle *page);
/* INVALID unless the handle is live and mapped nowhere; frees all its
 * slots. */
int drk_book_release(drk_pages_book *k, drk_page_handle page);

/* INVALID for a size that is zero or not a multiple of the page size. */
int drk_book_reserve_check(const drk_pages_book *k, size_t size);
/* Records [va, va + size); FAILED when out of host memory or overlapping. */
int drk_book_reserve_add(drk_pages_book *k, uintptr_t va, size_t size);
/* INVALID unless [va, va + size) is exactly a reserved range with nothing
 * mapped in it; *at is its index for drk_book_unreserve_commit. */
int drk_book_unreserve_check(const drk_pages_book *k, uintptr_t va, size_t size, size_t *at);
void drk_book_unreserve_commit(drk_pages_book *k, size_t at);

/* n handles mapped one after another from va: INVALID unless their pages
 * (*pages of them) are page-aligned, inside one reserved range, every
 * virtual page unmapped and every handle live; FAILED when out of host
 * memory (the room the commit needs is made here). */
int drk_book_map_check(drk_pages_book *k, uintptr_t va, const drk_page_handle *handles, size_t n, size_t *at,
                       size_t *pages);
void drk_book_map_commit(drk_pages_book *k, uintptr_t va, const drk_page_handle *handles, size_t n, size_t at);

/* n pages from va: INVALID unless page-aligned, inside one reserved range,
 * every virtual page mapped and every mapping covered whole (the first
 * page starts one, the last ends one). */
int drk_book_unmap_check(const drk_pages_book *k, uintptr_t va, size_t n, size_t *at);
void drk_book_unmap_commit(drk_pages_book *k, uintptr_t va, size_t n, size_t at);

/* The mapping holding the virtual page at va: its first address and its
 * pages (what one unmap call must cover); INVALID if va is not mapped. */
int drk_book_mapping(const drk_pages_book *k, uintptr_t va, uintptr_t *start, size_t *pages);

#endif
