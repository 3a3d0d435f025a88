#include "evolve/arena.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK_BYTES (1u << 20)

typedef struct chunk {
    _Atomic size_t used;
    size_t size;
    char bytes[] __attribute__((aligned(64)));
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

void *drk_arena_alloc(size_t size, size_t align)
{
    for (;;) {
        chunk *c = atomic_load_explicit(&current, memory_order_acquire);
        if (c) {
            /* Claim size + align - 1 bytes so an aligned start fits. */
            size_t at = atomic_fetch_add_explicit(&c->used, size + align - 1, memory_order_relaxed);
            if (at + size + align - 1 <= c->size) {
                uintptr_t p = ((uintptr_t)(c->bytes + at) + align - 1) & ~(uintptr_t)(align - 1);
                return (void *)p; /* fresh mmap pages are zero */
            }
        }
        /* Full or none yet: install a fresh chunk. A chunk that loses the
         * race goes back; the old one stays (what it holds is in use). */
        chunk *fresh = chunk_new(size + align);
        if (!fresh)
            return NULL;
        if (!atomic_compare_exchange_strong(&current, &c, fresh))
            munmap(fresh, fresh->size + sizeof(chunk));
    }
}

const char *drk_name_copy(const char *s)
{
    size_t len = strlen(s) + 1;
    char *p = drk_arena_alloc(len, 1);
    if (p)
        memcpy(p, s, len);
    return p;
}
