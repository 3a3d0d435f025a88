#include "names.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK_BYTES (1u << 20)

typedef struct chunk {
    _Atomic size_t used;
    size_t size;
    char bytes[];
} chunk;

static _Atomic(chunk *) current;

static chunk *chunk_new(size_t need)
{
    size_t size = need + sizeof(chunk) > CHUNK_BYTES ? need + sizeof(chunk) : CHUNK_BYTES;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    chunk *c = p;
    c->size = size - sizeof(chunk);
    atomic_init(&c->used, 0);
    return c;
}

const char *drk_name_copy(const char *s)
{
    size_t len = strlen(s) + 1;
    for (;;) {
        chunk *c = atomic_load_explicit(&current, memory_order_acquire);
        if (c) {
            size_t at = atomic_fetch_add_explicit(&c->used, len, memory_order_relaxed);
            if (at + len <= c->size) {
                memcpy(c->bytes + at, s, len);
                return c->bytes + at;
            }
        }
        /* Full or none yet: install a fresh chunk. A chunk that loses the
         * race goes back; the old one stays (its names are still in use). */
        chunk *fresh = chunk_new(len);
        if (!fresh)
            return NULL;
        if (!atomic_compare_exchange_strong(&current, &c, fresh))
            munmap(fresh, fresh->size + sizeof(chunk));
    }
}
