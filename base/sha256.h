/* SHA-256 (FIPS 180-4): the on-disk cache's keys and entry checksums. The
 * x86 SHA extensions are used where the CPU has them (about 8x faster, which
 * is what keeps a 256 KiB cache hit well under a millisecond); the result is
 * the same either way. */
#ifndef DRK_BASE_SHA256_H
#define DRK_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DRK_SHA256_BYTES 32

typedef struct drk_sha256_ctx {
    uint32_t h[8];
    uint64_t total;          /* bytes hashed so far */
    unsigned char block[64]; /* a partial block */
    size_t fill;
} drk_sha256_ctx;

void drk_sha256_init(drk_sha256_ctx *s);
void drk_sha256_update(drk_sha256_ctx *s, const void *data, size_t len);
void drk_sha256_final(drk_sha256_ctx *s, unsigned char out[DRK_SHA256_BYTES]);
/* The digest of one buffer. */
void drk_sha256(const void *data, size_t len, unsigned char out[DRK_SHA256_BYTES]);

/* "sha-ni" or "portable": the implementation in use. */
const char *drk_sha256_impl(void);
/* Tests: 1 forces the portable code, 0 lets the CPU decide again. */
void drk_sha256_force_portable(int on);

#endif
