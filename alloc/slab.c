#include "alloc/slab.h"

#include <string.h>
#include <sys/mman.h>

/* A slab: a pointer to the next slab, then the records. */
static size_t slab_bytes(const drk_slab *s) { return sizeof(void *) + s->size * s->per; }

void drk_slab_init(drk_slab *s, size_t size, size_t per)
{
    size = size < sizeof(void *) ? sizeof(void *) : size;
    *s = (drk_slab){.size = (size + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *), .per = per};
}

void *drk_slab_get(drk_slab *s)
{
    if (!s->spare) {
        char *m = mmap(NULL, slab_bytes(s), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        *(void **)m = s->slabs;
        s->slabs = m;
        for (size_t i = s->per; i-- > 0;)
            drk_slab_put(s, m + sizeof(void *) + i * s->size);
    }
    void *r = s->spare;
    s->spare = *(void **)r;
    memset(r, 0, s->size);
    return r;
}

void drk_slab_put(drk_slab *s, void *record)
{
    *(void **)record = s->spare;
    s->spare = record;
}

void drk_slab_fini(drk_slab *s)
{
    while (s->slabs) {
        void *next = *(void **)s->slabs;
        munmap(s->slabs, slab_bytes(s));
        s->slabs = next;
    }
    s->spare = NULL;
}
