/* The libraries the image reader uses: libelf, liblz4 and libzstd. They are
 * opened on first use with dlopen(RTLD_LOCAL), never NEEDED by
 * libdrk_shim.so: their symbols then never take the place of a program's own
 * copies (wheels bundle zstd), and a machine without them still runs drk,
 * which then knows kernels from the driver's answers alone. The tables'
 * members have the libraries' own prototypes, checked by the compiler. */
#ifndef DRK_EVOLVE_LIBS_H
#define DRK_EVOLVE_LIBS_H

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>

#define DRK_ELF_FUNCS(X)                                                                                               \
    X(elf_version) X(elf_memory) X(elf_begin) X(elf_end) X(elf_kind) X(elf_getident) X(elf_getshdrstrndx)             \
        X(elf_getshdrnum) X(elf_nextscn) X(elf_getscn) X(elf_ndxscn) X(elf_strptr) X(elf_getdata) X(elf_rawdata)      \
            X(elf_errmsg) X(elf_errno) X(gelf_getehdr) X(gelf_getshdr) X(gelf_getsym) X(gelf_getphdr)                 \
                X(elf_getphdrnum)

typedef struct drk_elf_api {
#define DRK_ELF_MEMBER(f) __typeof__(f) *f;
    DRK_ELF_FUNCS(DRK_ELF_MEMBER)
#undef DRK_ELF_MEMBER
} drk_elf_api;

/* libelf, opened and initialised (elf_version) once; NULL when it cannot be
 * opened (logged once, at warn). Thread-safe. */
const drk_elf_api *drk_elf(void);

/* Codec results: the decompressed size, or one of these. */
#define DRK_CODEC_MISSING (-1) /* the library cannot be opened */
#define DRK_CODEC_CORRUPT (-2) /* the input does not decode into exactly `out_size` bytes */

/* A raw LZ4 block (as fatbins store it) of `in_size` bytes into `out_size`
 * bytes at `out`. */
long drk_lz4_decompress(const void *in, size_t in_size, void *out, size_t out_size);
/* One or more ZSTD frames, likewise. */
long drk_zstd_decompress(const void *in, size_t in_size, void *out, size_t out_size);

#endif
