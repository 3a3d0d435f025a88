#define _GNU_SOURCE
#include "evolve/image/libs.h"

#include <dlfcn.h>
#include <lz4.h>
#include <stdatomic.h>
#include <zstd.h>

#include "base/dlsym.h"
#include "base/log.h"

/* A library opened once; racing first callers may both open it (dlopen
 * counts references), one result wins. 0 not tried, 1 open, 2 missing. */
typedef struct lib_slot {
    atomic_int state;
    void *handle;
} lib_slot;

static void *open_lib(lib_slot *s, const char *const *names, const char *what)
{
    int st = atomic_load_explicit(&s->state, memory_order_acquire);
    if (st)
        return st == 1 ? s->handle : NULL;
    void *h = NULL;
    for (const char *const *n = names; *n && !h; n++)
        h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        drk_log(DRK_LOG_WARN, "%s cannot be opened (%s): kernels in compressed or ELF images are known from the "
                              "driver's answers only",
                names[0], what);
        atomic_store_explicit(&s->state, 2, memory_order_release);
        return NULL;
    }
    s->handle = h;
    atomic_store_explicit(&s->state, 1, memory_order_release);
    return h;
}

static lib_slot elf_lib, lz4_lib, zstd_lib;
static drk_elf_api elf_api;
static atomic_int elf_state; /* 0 not tried, 1 ready, 2 missing, 3 being filled */

const drk_elf_api *drk_elf(void)
{
    int st = atomic_load_explicit(&elf_state, memory_order_acquire);
    if (st == 1)
        return &elf_api;
    if (st == 2)
        return NULL;
    static const char *const names[] = {"libelf.so.1", "libelf.so", NULL};
    void *h = open_lib(&elf_lib, names, "reading cubins");
    if (!h) {
        atomic_store_explicit(&elf_state, 2, memory_order_release);
        return NULL;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&elf_state, &expected, 3)) {
        while ((expected = atomic_load_explicit(&elf_state, memory_order_acquire)) == 3)
            __builtin_ia32_pause();
        return expected == 1 ? &elf_api : NULL;
    }
    drk_dlsym_fn sym = drk_real_dlsym();
    int ok = 1;
#define DRK_ELF_RESOLVE(f)                                                                                             \
    elf_api.f = (__typeof__(f) *)sym(h, #f);                                                                           \
    ok &= elf_api.f != NULL;
    DRK_ELF_FUNCS(DRK_ELF_RESOLVE)
#undef DRK_ELF_RESOLVE
    if (ok && elf_api.elf_version(EV_CURRENT) == EV_NONE)
        ok = 0;
    if (!ok)
        drk_log(DRK_LOG_WARN, "libelf.so.1 lacks functions drk needs: cubins are not read");
    atomic_store_explicit(&elf_state, ok ? 1 : 2, memory_order_release);
    return ok ? &elf_api : NULL;
}

static _Atomic(__typeof__(LZ4_decompress_safe) *) lz4_fn;

long drk_lz4_decompress(const void *in, size_t in_size, void *out, size_t out_size)
{
    __typeof__(LZ4_decompress_safe) *fn = atomic_load_explicit(&lz4_fn, memory_order_acquire);
    if (!fn) {
        static const char *const names[] = {"liblz4.so.1", "liblz4.so", NULL};
        void *h = open_lib(&lz4_lib, names, "LZ4-compressed fatbin entries");
        fn = h ? (__typeof__(LZ4_decompress_safe) *)drk_real_dlsym()(h, "LZ4_decompress_safe") : NULL;
        if (!fn)
            return DRK_CODEC_MISSING;
        atomic_store_explicit(&lz4_fn, fn, memory_order_release);
    }
    if (in_size > (size_t)LZ4_MAX_INPUT_SIZE || out_size > (size_t)0x7fffffff)
        return DRK_CODEC_CORRUPT;
    int n = fn((const char *)in, (char *)out, (int)in_size, (int)out_size);
    return n >= 0 && (size_t)n == out_size ? n : DRK_CODEC_CORRUPT;
}

typedef struct zstd_fns {
    __typeof__(ZSTD_decompress) *decompress;
    __typeof__(ZSTD_isError) *is_error;
} zstd_fns;
static zstd_fns zstd;
static atomic_int zstd_state; /* 0 not tried, 1 ready, 2 missing, 3 being filled */

long drk_zstd_decompress(const void *in, size_t in_size, void *out, size_t out_size)
{
    int st = atomic_load_explicit(&zstd_state, memory_order_acquire);
    if (st != 1) {
        int expected = 0;
        if (st == 0 && atomic_compare_exchange_strong(&zstd_state, &expected, 3)) {
            static const char *const names[] = {"libzstd.so.1", "libzstd.so", NULL};
            void *h = open_lib(&zstd_lib, names, "ZSTD-compressed fatbin entries");
            if (h) {
                zstd.decompress = (__typeof__(ZSTD_decompress) *)drk_real_dlsym()(h, "ZSTD_decompress");
                zstd.is_error = (__typeof__(ZSTD_isError) *)drk_real_dlsym()(h, "ZSTD_isError");
            }
            atomic_store_explicit(&zstd_state, zstd.decompress && zstd.is_error ? 1 : 2, memory_order_release);
        }
        while ((st = atomic_load_explicit(&zstd_state, memory_order_acquire)) == 3)
            __builtin_ia32_pause();
        if (st != 1)
            return DRK_CODEC_MISSING;
    }
    size_t n = zstd.decompress(out, out_size, in, in_size);
    return !zstd.is_error(n) && n == out_size ? (long)n : DRK_CODEC_CORRUPT;
}
