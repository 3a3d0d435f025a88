/* The fatbin container: a wrapper (0x466243B1, versions 1 and 2) points at
 * one or more containers (header 0xBA55ED50), each a run of entries (PTX,
 * ELF, NVVM IR) with arch, version and flags; payloads may be LZ4 (0x2000)
 * or ZSTD (0x8000) compressed. Every read is bounded by the bytes the caller
 * vouches for: a malformed or truncated container is an error, never a read
 * past its end. */
#ifndef DRK_EVOLVE_FATBIN_H
#define DRK_EVOLVE_FATBIN_H

#include <stddef.h>
#include <stdint.h>

#define DRK_FATBIN_WRAPPER_MAGIC 0x466243B1u
#define DRK_FATBIN_MAGIC 0xBA55ED50u
#define DRK_FATBIN_HEADER_SIZE 16u

enum { DRK_FATBIN_PTX = 1, DRK_FATBIN_ELF = 2, DRK_FATBIN_OLDCUBIN = 4, DRK_FATBIN_IR = 8 };
#define DRK_FATBIN_FLAG_LZ4 0x2000ull
#define DRK_FATBIN_FLAG_ZSTD 0x8000ull
#define DRK_FATBIN_FLAG_OLD_COMPRESS 0x1000ull /* pre-LZ4 codec: not read (DRK_FATBIN_NO_CODEC) */
/* Arch-specific targets (observed with nvcc 13.0): the entry's arch stays
 * the SM number and these bits say sm_90a / compute_90a ("a": that SM only)
 * or sm_100f / compute_100f ("f": the family, same major, minor >= arch).
 * The cubin's e_flags do not tell them apart. */
#define DRK_FATBIN_FLAG_ARCH_SPECIFIC 0x100000ull
#define DRK_FATBIN_FLAG_ARCH_FAMILY 0x200000ull
#define DRK_FATBIN_WRAPPER_SIZE 24u
#define DRK_FATBIN_MAX_PRELINKED 4096 /* bound on a v2 wrapper's array walk */

/* Errors, negative; drk_fatbin_strerror names them. */
enum {
    DRK_FATBIN_OK = 0,
    DRK_FATBIN_TRUNCATED = -1,  /* a header or payload runs past the end */
    DRK_FATBIN_BAD_MAGIC = -2,
    DRK_FATBIN_BAD_HEADER = -3, /* version, header size or sizes that cannot be */
    DRK_FATBIN_NO_CODEC = -4,   /* liblz4 or libzstd cannot be opened */
    DRK_FATBIN_CORRUPT = -5,    /* a payload does not decompress to its stated size */
    DRK_FATBIN_NOMEM = -6,
    DRK_FATBIN_TOO_LARGE = -7,  /* a stated size beyond DRK_FATBIN_MAX_PAYLOAD */
};
const char *drk_fatbin_strerror(int err);

/* No payload decompresses beyond this (1 GiB): a lying header cannot make
 * drk allocate without bound. */
#define DRK_FATBIN_MAX_PAYLOAD (1ull << 30)

typedef struct drk_fatbin_entry {
    unsigned kind;            /* DRK_FATBIN_* (other values are passed through) */
    unsigned version;         /* entry header version, 0x0101 */
    unsigned arch;            /* SM number: 90 for sm_90 (PTX: the virtual arch, compute_90) */
    char arch_suffix;         /* 'a' (sm_90a), 'f' (sm_100f) or 0, from the flags above */
    unsigned major, minor;    /* PTX: ISA version; ELF: code version */
    uint64_t flags;
    const uint8_t *payload;   /* stored bytes (compressed or not) */
    size_t stored_size;       /* bytes at payload that belong to this entry */
    size_t compressed_size;   /* 0 if not compressed */
    size_t decompressed_size; /* 0 if not compressed */
    const char *identifier;   /* not NUL-terminated; NULL if none */
    size_t identifier_len;
    size_t offset;            /* of the entry header from the start of the bytes walked */
} drk_fatbin_entry;

/* Walks every entry of every container back to back in [data, data+size). */
typedef struct drk_fatbin_iter {
    const uint8_t *data;
    size_t size;
    size_t container;     /* offset of the current container header */
    size_t container_end; /* offset past its last entry */
    size_t next;          /* offset of the next entry header */
    int error;            /* first error met, or 0 */
} drk_fatbin_iter;

void drk_fatbin_iter_init(drk_fatbin_iter *it, const void *data, size_t size);
/* 1 and *e filled; 0 at the end; a negative error (also kept in it->error),
 * after which the walk is over. Zero padding between containers is skipped. */
int drk_fatbin_next(drk_fatbin_iter *it, drk_fatbin_entry *e);

/* The bytes of one container starting at `p` (header + fatSize), checked
 * against `avail`; a negative error if it is not a container. */
int drk_fatbin_container_size(const void *p, size_t avail, size_t *size);

/* An entry's payload, decompressed when compressed, in a malloc'd buffer
 * with a NUL after its `*size` bytes (PTX is text); trailing NUL padding of
 * PTX is not counted. 0 or a negative error. */
int drk_fatbin_payload(const drk_fatbin_entry *e, uint8_t **out, size_t *size);

/* The containers a wrapper points at: v1 its data pointer, v2 also its
 * NULL-terminated array of prelinked containers. The caller vouches that
 * `wrapper` points at 24 readable bytes; the containers it names are in the
 * program's memory and are bounded by their own headers. Fills up to `max`
 * pointers (`out` may be NULL when max is 0); returns how many there are
 * (may exceed max), or an error. A v2 array longer than
 * DRK_FATBIN_MAX_PRELINKED without its NULL is DRK_FATBIN_BAD_HEADER. */
int drk_fatbin_wrapper_containers(const void *wrapper, const void **out, int max);

#endif
