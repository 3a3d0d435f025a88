/* The counting page backend: the host backend's checks and accounting
 * without memory, so traces of any size replay on a small machine. */
#include <pthread.h>
#include <stdlib.h>

#include "alloc/pages.h"
#include "alloc/pages_book.h"

#define COUNTING_BASE ((uintptr_t)0x7f0000000000)

typedef struct counting {
    drk_page_backend base; /* first: the backend pointer is the struct's */
    pthread_mutex_t lock;
    drk_pages_book book;
    uintptr_t next_va;
} counting;

static counting *of(drk_page_backend *b) { return (counting *)b; }

static int c_reserve(drk_page_backend *b, size_t size, uintptr_t *va)
{
    counting *c = of(b);
    if (!va || drk_book_reserve_check(&c->book, size) != DRK_PAGES_OK)
        return DRK_PAGES_INVALID;
    pthread_mutex_lock(&c->lock);
    /* A page left unreserved after each range, so a run that strays past
     * its range's end is caught rather than landing in the next one. */
    uintptr_t at = c->next_va;
    int rc = DRK_PAGES_OOM;
    if (size <= UINTPTR_MAX - at && b->page_size <= UINTPTR_MAX - at - size) {
        rc = drk_book_reserve_add(&c->book, at, size);
        if (rc == DRK_PAGES_OK) {
            c->next_va = at + size + b->page_size;
            *va = at;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int c_unreserve(drk_page_backend *b, uintptr_t va, size_t size)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    size_t at;
    int rc = drk_book_unreserve_check(&c->book, va, size, &at);
    if (rc == DRK_PAGES_OK)
        drk_book_unreserve_commit(&c->book, at);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int c_create_run(drk_page_backend *b, size_t n, drk_page_handle *handle)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    int rc = drk_book_create_run(&c->book, n, handle);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int c_create(drk_page_backend *b, drk_page_handle *page) { return c_create_run(b, 1, page); }

static int c_release(drk_page_backend *b, drk_page_handle page)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    int rc = drk_book_release(&c->book, page);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int c_map(drk_page_backend *b, uintptr_t va, const drk_page_handle *handles, size_t n)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    size_t at, pages;
    int rc = drk_book_map_check(&c->book, va, handles, n, &at, &pages);
    if (rc == DRK_PAGES_OK)
        drk_book_map_commit(&c->book, va, handles, n, at);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static int c_unmap(drk_page_backend *b, uintptr_t va, size_t n)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    size_t at;
    int rc = drk_book_unmap_check(&c->book, va, n, &at);
    if (rc == DRK_PAGES_OK)
        drk_book_unmap_commit(&c->book, va, n, at);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static size_t c_pages_created(drk_page_backend *b)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    size_t n = c->book.live;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static size_t c_pages_mapped(drk_page_backend *b)
{
    counting *c = of(b);
    pthread_mutex_lock(&c->lock);
    size_t n = c->book.mapped;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static void c_destroy(drk_page_backend *b)
{
    if (!b)
        return;
    counting *c = of(b);
    drk_book_fini(&c->book);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

drk_page_backend *drk_pages_counting(size_t page_size, size_t capacity)
{
    counting *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (drk_book_init(&c->book, page_size, capacity) != DRK_PAGES_OK) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->next_va = (COUNTING_BASE + page_size - 1) & ~(uintptr_t)(page_size - 1);
    c->base = (drk_page_backend){
        .name = "counting",
        .page_size = page_size,
        .capacity = capacity,
        .reserve = c_reserve,
        .unreserve = c_unreserve,
        .create = c_create,
        .create_run = c_create_run,
        .release = c_release,
        .map = c_map,
        .unmap = c_unmap,
        .pages_created = c_pages_created,
        .pages_mapped = c_pages_mapped,
        .destroy = c_destroy,
    };
    return &c->base;
}
