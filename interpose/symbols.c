#include "interpose/symbols.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

const char *const drk_sym_name[DRK_SYM_COUNT] = {
#define DRK_SYM_NAME_(name, body, family) #name,
    DRK_HOOKS(DRK_SYM_NAME_)
#undef DRK_SYM_NAME_
};

const char *const drk_sym_family[DRK_SYM_COUNT] = {
#define DRK_SYM_FAMILY_(name, body, family) #family,
    DRK_HOOKS(DRK_SYM_FAMILY_)
#undef DRK_SYM_FAMILY_
};

/* Open-addressed table of slot+1 by FNV-1a hash of the name, filled on first
 * use. Every filler inserts the slots in the same order and each release
 * store publishes the ones before it, so racing threads write identical
 * values: no lock, no waiting, nothing a fork can leave half-held. */
#define DRK_SYM_TABLE 256
static _Atomic unsigned char sym_table[DRK_SYM_TABLE];
static atomic_int sym_table_ready;

_Static_assert(DRK_SYM_COUNT < 255, "slot+1 must fit a byte");
_Static_assert(DRK_SYM_COUNT * 2 < DRK_SYM_TABLE, "keep the table sparse");

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void sym_table_fill(void)
{
    for (int s = 0; s < DRK_SYM_COUNT; s++) {
        uint32_t i = name_hash(drk_sym_name[s]);
        for (;; i++) {
            unsigned char cur = atomic_load_explicit(&sym_table[i % DRK_SYM_TABLE], memory_order_acquire);
            if (cur == 0 || cur == s + 1) {
                atomic_store_explicit(&sym_table[i % DRK_SYM_TABLE], (unsigned char)(s + 1),
                                      memory_order_release);
                break;
            }
        }
    }
    atomic_store_explicit(&sym_table_ready, 1, memory_order_release);
}

int drk_sym_find(const char *name)
{
    if (!atomic_load_explicit(&sym_table_ready, memory_order_acquire))
        sym_table_fill();
    for (uint32_t i = name_hash(name);; i++) {
        unsigned char s = atomic_load_explicit(&sym_table[i % DRK_SYM_TABLE], memory_order_relaxed);
        if (s == 0)
            return -1;
        if (strcmp(drk_sym_name[s - 1], name) == 0)
            return s - 1;
    }
}

int drk_sym_is_form_of(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0)
        return 0;
    const char *rest = name + n;
    if (rest[0] == '_' && rest[1] == 'v' && rest[2] >= '0' && rest[2] <= '9') {
        rest += 2;
        while (*rest >= '0' && *rest <= '9')
            rest++;
    }
    return *rest == '\0' || strcmp(rest, "_ptsz") == 0 || strcmp(rest, "_ptds") == 0;
}
