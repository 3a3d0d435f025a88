/* The host pool with two contexts. The driver frees a context's pinned
 * memory when the context ends, and only that context's: an allocation the
 * program made while another context was current outlives it. The pool's
 * arenas are per flag set, not per context, so an allocation made under
 * context B could be carved from a chunk pinned under context A (it was,
 * before the pool served only the context of its first allocation): it
 * must come from the driver, or from a chunk pinned under B. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/host_pool.h"
#include "tests/unit/check.h"

static CUcontext current = (CUcontext)(uintptr_t)0xA000;
#define CTX_A ((CUcontext)(uintptr_t)0xA000)
#define CTX_B ((CUcontext)(uintptr_t)0xB000)

static struct pin {
    uintptr_t base;
    size_t size;
    CUcontext ctx;
} pins[64];
static int npins;

static CUresult t_host_alloc(void **pp, size_t size, unsigned int flags)
{
    (void)flags;
    void *p = NULL;
    if (npins == 64 || posix_memalign(&p, 4096, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pins[npins++] = (struct pin){(uintptr_t)p, size, current};
    *pp = p;
    return CUDA_SUCCESS;
}

#include "tests/host_pool/stub_table.h"

static CUcontext pinned_in(const void *p)
{
    for (int i = 0; i < npins; i++)
        if ((uintptr_t)p - pins[i].base < pins[i].size)
            return pins[i].ctx;
    return NULL;
}

int main(void)
{
    drk_host_pool_configure(&table, &(drk_host_pool_settings){.on = 1});
#if !DRK_HOST_POOL_BUILT
    return CHECK_DONE();
#else
    void *a = NULL, *b = NULL;
    current = CTX_A;
    CHECK(drk_host_pool_alloc(&a, 4096, 0) == 0);
    current = CTX_B;
    int rb = drk_host_pool_alloc(&b, 4096, 0);
    printf("allocation under context B: %s\n", rb != 0 ? "the driver's" : pinned_in(b) == CTX_A ? "the pool's, in a chunk "
           "pinned under context A" : "the pool's, in a chunk pinned under context B");
    CHECK(rb != 0 || pinned_in(b) == CTX_B);
    /* Context A ends (cuCtxDestroy): the driver frees A's chunks, and the
     * pool stops; B's allocation, the driver's, is not the pool's to free. */
    drk_host_pool_context_ends(CTX_A);
    if (rb == 0) {
        void *base = NULL;
        CHECK(drk_host_pool_find(b, &base, NULL, NULL) == 0 && base == b);
        CHECK(drk_host_pool_free(b) == DRK_HOST_FREED);
    } else {
        CHECK(drk_host_pool_free(a) != DRK_HOST_FREED); /* gone with A: the driver answers */
    }
    return CHECK_DONE();
#endif
}
