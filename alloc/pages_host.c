/* The host page backend: pages are slices of one memfd, mapped with
 * MAP_FIXED into PROT_NONE reservations, so one page really shows at every
 * address it is mapped at and the pool's remapping and stitching run on real
 * memory in CI. A run handle of n pages is n slices, one per book slot (not
 * necessarily next to each other in the file), mapped slice by slice. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc/pages.h"
#include "alloc/pages_book.h"

typedef struct host {
    drk_page_backend base; /* first: the backend pointer is the struct's */
    pthread_mutex_t lock;
    drk_pages_book book;
    int fd;
    uint32_t slices; /* slices the file holds; a page's book slot is its slice */
} host;

static host *of(drk_page_backend *b) { return (host *)b; }

static int errno_rc(int err) { return err == ENOMEM || err == ENOSPC ? DRK_PAGES_OOM : DRK_PAGES_FAILED; }

/* Puts an inaccessible, unbacked mapping over [va, va + len): what a
 * reservation holds where nothing is mapped. */
static int hold(uintptr_t va, size_t len)
{
    void *p = mmap((void *)va, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? errno_rc(errno) : DRK_PAGES_OK;
}

/* A page_size-aligned PROT_NONE range: over-reserve by one page and trim. */
static int reserve_aligned(size_t size, size_t page_size, uintptr_t *va)
{
    void *p = mmap(NULL, size + page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return errno_rc(errno);
    uintptr_t raw = (uintptr_t)p, at = (raw + page_size - 1) & ~(uintptr_t)(page_size - 1);
    size_t head = at - raw, tail = page_size - head;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((void *)(at + size), tail);
    *va = at;
    return DRK_PAGES_OK;
}

static int h_reserve(drk_page_backend *b, size_t size, uintptr_t *va)
{
    host *h = of(b);
    if (!va || drk_book_reserve_check(&h->book, size) != DRK_PAGES_OK)
        return DRK_PAGES_INVALID;
    if (size > SIZE_MAX - b->page_size)
        return DRK_PAGES_OOM;
    pthread_mutex_lock(&h->lock);
    uintptr_t at;
    int rc = reserve_aligned(size, b->page_size, &at);
    if (rc == DRK_PAGES_OK) {
        rc = drk_book_reserve_add(&h->book, at, size);
        if (rc == DRK_PAGES_OK)
            *va = at;
        else
            munmap((void *)at, size);
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_unreserve(drk_page_backend *b, uintptr_t va, size_t size)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    size_t at;
    int rc = drk_book_unreserve_check(&h->book, va, size, &at);
    if (rc == DRK_PAGES_OK)
        rc = munmap((void *)va, size) == 0 ? DRK_PAGES_OK : DRK_PAGES_FAILED;
    if (rc == DRK_PAGES_OK)
        drk_book_unreserve_commit(&h->book, at);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

/* Allocates the file's memory up to the handle's last slice now (not at
 * first touch), so exhaustion is OOM here rather than SIGBUS in the
 * program. Reused slices keep their memory. */
static int slices_back(host *h, drk_page_handle handle)
{
    uint32_t top = 0;
    for (uint32_t s = drk_book_slot_of(handle); s != DRK_BOOK_NO_SLOT; s = drk_book_next_slot(&h->book, s))
        top = s + 1 > top ? s + 1 : top;
    if (top <= h->slices)
        return DRK_PAGES_OK;
    size_t ps = h->base.page_size;
    int err = posix_fallocate(h->fd, (off_t)h->slices * (off_t)ps, (off_t)(top - h->slices) * (off_t)ps);
    if (err)
        return errno_rc(err);
    h->slices = top;
    return DRK_PAGES_OK;
}

static int h_create_run(drk_page_backend *b, size_t n, drk_page_handle *handle)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    int rc = drk_book_create_run(&h->book, n, handle);
    if (rc == DRK_PAGES_OK && (rc = slices_back(h, *handle)) != DRK_PAGES_OK)
        drk_book_release(&h->book, *handle);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_create(drk_page_backend *b, drk_page_handle *page) { return h_create_run(b, 1, page); }

static int h_release(drk_page_backend *b, drk_page_handle page)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    int rc = drk_book_release(&h->book, page);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

/* Consecutive slices mapped in one mmap, from virtual page `at` of a run. */
typedef struct stretch {
    size_t at, len;
    uint32_t first;
} stretch;

static int stretch_map(host *h, uintptr_t va, const stretch *st)
{
    size_t ps = h->base.page_size;
    void *p = mmap((void *)(va + st->at * ps), st->len * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->fd,
                   (off_t)st->first * (off_t)ps);
    return p == MAP_FAILED ? errno_rc(errno) : DRK_PAGES_OK;
}

/* Maps the checked run slice by slice, one mmap per stretch of consecutive
 * slices (within a handle and across handles); on a failure puts back what
 * this call mapped. */
static int map_slices(host *h, uintptr_t va, const drk_page_handle *handles, size_t n)
{
    stretch st = {0, 0, 0};
    int rc = DRK_PAGES_OK;
    for (size_t i = 0; i < n && rc == DRK_PAGES_OK; i++)
        for (uint32_t s = drk_book_slot_of(handles[i]); s != DRK_BOOK_NO_SLOT; s = drk_book_next_slot(&h->book, s)) {
            if (st.len && s == st.first + st.len) {
                st.len++;
                continue;
            }
            if (st.len && (rc = stretch_map(h, va, &st)) != DRK_PAGES_OK)
                break;
            st = (stretch){st.at + st.len, 1, s};
        }
    if (rc == DRK_PAGES_OK && st.len)
        rc = stretch_map(h, va, &st);
    if (rc != DRK_PAGES_OK && st.at)
        hold(va, st.at * h->base.page_size);
    return rc;
}

static int h_map(drk_page_backend *b, uintptr_t va, const drk_page_handle *handles, size_t n)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    size_t at, pages;
    int rc = drk_book_map_check(&h->book, va, handles, n, &at, &pages);
    if (rc == DRK_PAGES_OK)
        rc = map_slices(h, va, handles, n);
    if (rc == DRK_PAGES_OK)
        drk_book_map_commit(&h->book, va, handles, n, at);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static int h_unmap(drk_page_backend *b, uintptr_t va, size_t n)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    size_t at;
    int rc = drk_book_unmap_check(&h->book, va, n, &at);
    if (rc == DRK_PAGES_OK)
        rc = hold(va, n * b->page_size);
    if (rc == DRK_PAGES_OK)
        drk_book_unmap_commit(&h->book, va, n, at);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static size_t h_pages_created(drk_page_backend *b)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    size_t n = h->book.live;
    pthread_mutex_unlock(&h->lock);
    return n;
}

static size_t h_pages_mapped(drk_page_backend *b)
{
    host *h = of(b);
    pthread_mutex_lock(&h->lock);
    size_t n = h->book.mapped;
    pthread_mutex_unlock(&h->lock);
    return n;
}

static void h_destroy(drk_page_backend *b)
{
    if (!b)
        return;
    host *h = of(b);
    /* Unmapping a reservation drops the mappings in it; closing the file
     * frees every page. */
    for (size_t i = 0; i < h->book.nranges; i++)
        munmap((void *)h->book.ranges[i].start, h->book.ranges[i].size);
    close(h->fd);
    drk_book_fini(&h->book);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

drk_page_backend *drk_pages_host(size_t page_size, size_t capacity)
{
    long sys = sysconf(_SC_PAGESIZE);
    if (sys <= 0 || page_size % (size_t)sys)
        return NULL;
    host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    if (drk_book_init(&h->book, page_size, capacity) != DRK_PAGES_OK) {
        free(h);
        return NULL;
    }
    h->fd = memfd_create("drk-pages", MFD_CLOEXEC);
    if (h->fd < 0) {
        drk_book_fini(&h->book);
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    h->base = (drk_page_backend){
        .name = "host",
        .page_size = page_size,
        .capacity = capacity,
        .reserve = h_reserve,
        .unreserve = h_unreserve,
        .create = h_create,
        .create_run = h_create_run,
        .release = h_release,
        .map = h_map,
        .unmap = h_unmap,
        .pages_created = h_pages_created,
        .pages_mapped = h_pages_mapped,
        .destroy = h_destroy,
    };
    return &h->base;
}
