#include "alloc/pages_book.h"

#include <stdlib.h>
#include <string.h>

#define NO_SLOT DRK_BOOK_NO_SLOT

int drk_book_init(drk_pages_book *k, size_t page_size, size_t capacity)
{
    memset(k, 0, sizeof *k);
    if (page_size == 0 || (page_size & (page_size - 1)) || capacity >= NO_SLOT)
        return DRK_PAGES_INVALID;
    k->page_size = page_size;
    k->capacity = capacity;
    k->free_head = NO_SLOT;
    return DRK_PAGES_OK;
}

void drk_book_fini(drk_pages_book *k)
{
    free(k->slots);
    free(k->ranges);
    free(k->table);
    memset(k, 0, sizeof *k);
}

/* Handles. */

/* The head slot of a live handle, or NULL. A member slot's own value is no
 * handle: its npages is 0. */
static drk_book_slot *live_slot(const drk_pages_book *k, drk_page_handle page)
{
    uint32_t s = drk_book_slot_of(page), gen = (uint32_t)(page >> 32);
    if (s >= k->nslots || k->slots[s].gen != gen || !(gen & 1) || !k->slots[s].npages)
        return NULL;
    return &k->slots[s];
}

size_t drk_book_pages_of(const drk_pages_book *k, drk_page_handle page)
{
    const drk_book_slot *sl = live_slot(k, page);
    return sl ? sl->npages : 0;
}

/* Room for `more` slots past nslots (which, as every slot is a page live
 * now or before, never passes capacity). */
static int slots_room(drk_pages_book *k, size_t more)
{
    size_t need = (size_t)k->nslots + more, cap = k->slots_cap ? k->slots_cap : 64;
    if (need <= k->slots_cap)
        return DRK_PAGES_OK;
    while (cap < need)
        cap *= 2;
    if (cap > k->capacity)
        cap = k->capacity;
    drk_book_slot *s = realloc(k->slots, cap * sizeof *s);
    if (!s)
        return DRK_PAGES_FAILED;
    k->slots = s;
    k->slots_cap = (uint32_t)cap;
    return DRK_PAGES_OK;
}

/* A slot put in use, as a member: a free one, else a new one (slots_room
 * made room for it). */
static uint32_t take_slot(drk_pages_book *k)
{
    uint32_t s = k->free_head;
    if (s != NO_SLOT) {
        k->free_head = k->slots[s].next;
    } else {
        s = k->nslots++;
        k->slots[s] = (drk_book_slot){0};
    }
    drk_book_slot *sl = &k->slots[s];
    sl->gen++; /* odd: in use; a stale handle to this slot no longer matches */
    sl->npages = sl->maps = 0;
    sl->next = NO_SLOT;
    return s;
}

int drk_book_create_run(drk_pages_book *k, size_t n, drk_page_handle *page)
{
    if (!page || n == 0)
        return DRK_PAGES_INVALID;
    if (n > k->capacity - k->live)
        return DRK_PAGES_OOM;
    size_t nfree = k->nslots - k->live; /* every slot in use is a live page */
    if (n > nfree && slots_room(k, n - nfree) != DRK_PAGES_OK)
        return DRK_PAGES_FAILED;
    uint32_t head = take_slot(k), last = head;
    for (size_t i = 1; i < n; i++) {
        uint32_t s = take_slot(k);
        k->slots[last].next = s;
        last = s;
    }
    k->slots[head].npages = (uint32_t)n;
    k->live += n;
    *page = (drk_page_handle)k->slots[head].gen << 32 | head;
    return DRK_PAGES_OK;
}

int drk_book_create(drk_pages_book *k, drk_page_handle *page) { return drk_book_create_run(k, 1, page); }

int drk_book_release(drk_pages_book *k, drk_page_handle page)
{
    drk_book_slot *sl = live_slot(k, page);
    if (!sl || sl->maps)
        return DRK_PAGES_INVALID;
    k->live -= sl->npages;
    sl->npages = 0;
    /* The chain goes onto the free list as it is: the next run of its size
     * gets the same slots in the same order. */
    uint32_t head = drk_book_slot_of(page), s = head, last = head;
    for (; s != NO_SLOT; s = k->slots[s].next) {
        k->slots[s].gen++;
        last = s;
    }
    k->slots[last].next = k->free_head;
    k->free_head = head;
    return DRK_PAGES_OK;
}

/* Reserved ranges: a sorted array, found by binary search. */

/* The number of ranges starting at or below va. */
static size_t ranges_upto(const drk_pages_book *k, uintptr_t va)
{
    size_t lo = 0, hi = k->nranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->ranges[mid].start <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int drk_book_reserve_check(const drk_pages_book *k, size_t size)
{
    return size && size % k->page_size == 0 ? DRK_PAGES_OK : DRK_PAGES_INVALID;
}

int drk_book_reserve_add(drk_pages_book *k, uintptr_t va, size_t size)
{
    size_t at = ranges_upto(k, va);
    /* The addresses come from the backend itself: an overlap is its bug. */
    if ((at > 0 && va - k->ranges[at - 1].start < k->ranges[at - 1].size) ||
        (at < k->nranges && k->ranges[at].start - va < size))
        return DRK_PAGES_FAILED;
    if (k->nranges == k->ranges_cap) {
        size_t cap = k->ranges_cap ? k->ranges_cap * 2 : 16;
        drk_book_range *r = realloc(k->ranges, cap * sizeof *r);
        if (!r)
            return DRK_PAGES_FAILED;
        k->ranges = r;
        k->ranges_cap = cap;
    }
    memmove(&k->ranges[at + 1], &k->ranges[at], (k->nranges - at) * sizeof *k->ranges);
    k->ranges[at] = (drk_book_range){va, size, 0};
    k->nranges++;
    return DRK_PAGES_OK;
}

int drk_book_unreserve_check(const drk_pages_book *k, uintptr_t va, size_t size, size_t *at)
{
    size_t n = ranges_upto(k, va);
    if (n == 0)
        return DRK_PAGES_INVALID;
    const drk_book_range *r = &k->ranges[n - 1];
    if (r->start != va || r->size != size || r->mapped)
        return DRK_PAGES_INVALID;
    *at = n - 1;
    return DRK_PAGES_OK;
}

void drk_book_unreserve_commit(drk_pages_book *k, size_t at)
{
    k->nranges--;
    memmove(&k->ranges[at], &k->ranges[at + 1], (k->nranges - at) * sizeof *k->ranges);
}

/* The index of the reserved range holding the page-aligned run of n pages
 * at va, or INVALID. */
static int run_range(const drk_pages_book *k, uintptr_t va, size_t n, size_t *at)
{
    if (n == 0 || va % k->page_size || n > SIZE_MAX / k->page_size)
        return DRK_PAGES_INVALID;
    size_t len = n * k->page_size, i = ranges_upto(k, va);
    if (i == 0)
        return DRK_PAGES_INVALID;
    const drk_book_range *r = &k->ranges[i - 1];
    size_t off = va - r->start;
    if (off >= r->size || len > r->size - off)
        return DRK_PAGES_INVALID;
    *at = i - 1;
    return DRK_PAGES_OK;
}

/* Mapped virtual pages: a hash table of virtual page number -> the page of
 * a handle mapped there. */

static size_t table_home(const drk_pages_book *k, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ h >> 32) & (k->table_cap - 1);
}

static uint64_t vpage_key(const drk_pages_book *k, uintptr_t va) { return va / k->page_size + 1; }

/* The index of key's entry, or SIZE_MAX. */
static size_t table_find(const drk_pages_book *k, uint64_t key)
{
    if (!k->table_cap)
        return SIZE_MAX;
    size_t mask = k->table_cap - 1;
    for (size_t i = table_home(k, key); k->table[i].key; i = (i + 1) & mask)
        if (k->table[i].key == key)
            return i;
    return SIZE_MAX;
}

static void table_put(drk_pages_book *k, drk_book_entry e)
{
    size_t mask = k->table_cap - 1, i = table_home(k, e.key);
    while (k->table[i].key)
        i = (i + 1) & mask;
    k->table[i] = e;
}

/* Removes entry i, shifting back later entries of its probe run so no
 * tombstones are needed. */
static void table_erase(drk_pages_book *k, size_t i)
{
    size_t mask = k->table_cap - 1;
    for (size_t j = (i + 1) & mask; k->table[j].key; j = (j + 1) & mask) {
        size_t home = table_home(k, k->table[j].key);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            k->table[i] = k->table[j];
            i = j;
        }
    }
    k->table[i].key = 0;
}

/* Room for `need` entries at load 1/2 at most. */
static int table_room(drk_pages_book *k, size_t need)
{
    size_t cap = k->table_cap ? k->table_cap : 1024;
    while (need > cap / 2) {
        if (cap > SIZE_MAX / 2 / sizeof *k->table)
            return DRK_PAGES_FAILED;
        cap *= 2;
    }
    if (cap == k->table_cap)
        return DRK_PAGES_OK;
    drk_book_entry *old = k->table, *t = calloc(cap, sizeof *t);
    if (!t)
        return DRK_PAGES_FAILED;
    size_t old_cap = k->table_cap;
    k->table = t;
    k->table_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key)
            table_put(k, old[i]);
    free(old);
    return DRK_PAGES_OK;
}

int drk_book_map_check(drk_pages_book *k, uintptr_t va, const drk_page_handle *handles, size_t n, size_t *at,
                       size_t *pages)
{
    if (!handles)
        return DRK_PAGES_INVALID;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const drk_book_slot *sl = live_slot(k, handles[i]);
        if (!sl || total > SIZE_MAX - sl->npages)
            return DRK_PAGES_INVALID;
        total += sl->npages;
    }
    if (run_range(k, va, total, at) != DRK_PAGES_OK)
        return DRK_PAGES_INVALID;
    uint64_t key = vpage_key(k, va);
    for (size_t i = 0; i < total; i++)
        if (table_find(k, key + i) != SIZE_MAX)
            return DRK_PAGES_INVALID;
    *pages = total;
    return table_room(k, k->mapped + total);
}

void drk_book_map_commit(drk_pages_book *k, uintptr_t va, const drk_page_handle *handles, size_t n, size_t at)
{
    uint64_t key = vpage_key(k, va);
    for (size_t i = 0; i < n; i++) {
        uint32_t s = drk_book_slot_of(handles[i]);
        drk_book_slot *sl = &k->slots[s];
        for (uint32_t off = 0; off < sl->npages; off++)
            table_put(k, (drk_book_entry){key++, s, off});
        sl->maps++;
    }
    size_t total = key - vpage_key(k, va);
    k->ranges[at].mapped += total;
    k->mapped += total;
}

int drk_book_unmap_check(const drk_pages_book *k, uintptr_t va, size_t n, size_t *at)
{
    if (run_range(k, va, n, at) != DRK_PAGES_OK)
        return DRK_PAGES_INVALID;
    uint64_t key = vpage_key(k, va);
    size_t first = SIZE_MAX, e = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if ((e = table_find(k, key + i)) == SIZE_MAX)
            return DRK_PAGES_INVALID;
        if (i == 0)
            first = e;
    }
    /* Mappings tile what is mapped: if the run starts one and ends one,
     * every mapping in it is whole. */
    const drk_book_entry *last = &k->table[e];
    if (k->table[first].off != 0 || last->off + 1 != k->slots[last->slot].npages)
        return DRK_PAGES_INVALID;
    return DRK_PAGES_OK;
}

void drk_book_unmap_commit(drk_pages_book *k, uintptr_t va, size_t n, size_t at)
{
    uint64_t key = vpage_key(k, va);
    for (size_t i = 0; i < n; i++) {
        size_t e = table_find(k, key + i);
        if (k->table[e].off == 0) /* each mapping once */
            k->slots[k->table[e].slot].maps--;
        table_erase(k, e);
    }
    k->ranges[at].mapped -= n;
    k->mapped -= n;
}

int drk_book_mapping(const drk_pages_book *k, uintptr_t va, uintptr_t *start, size_t *pages)
{
    size_t e = table_find(k, vpage_key(k, va));
    if (e == SIZE_MAX)
        return DRK_PAGES_INVALID;
    *start = (va - va % k->page_size) - (uintptr_t)k->table[e].off * k->page_size;
    *pages = k->slots[k->table[e].slot].npages;
    return DRK_PAGES_OK;
}
