/* What every image reader needs: little-endian loads from bytes with no
 * alignment guarantee (x86-64 only, so host order is the file's order), and
 * one way to say what went wrong. */
#ifndef DRK_EVOLVE_BYTES_H
#define DRK_EVOLVE_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t drk_ld16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t drk_ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t drk_ld64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Formats the message into err (when there is room) and returns -1. */
int drk_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
