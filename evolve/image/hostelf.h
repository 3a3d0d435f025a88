/* Bytes to read an image from, in memory or in a file (read with pread,
 * never mapped or read whole), and the host ELF sections that carry fatbin
 * containers, found from the ELF64 section headers with every offset
 * checked against the size. */
#ifndef DRK_EVOLVE_HOSTELF_H
#define DRK_EVOLVE_HOSTELF_H

#include <stddef.h>
#include <stdint.h>

typedef struct drk_src {
    const uint8_t *mem; /* NULL: read from fd */
    int fd;
    uint64_t size;
    uint8_t *buf; /* for views of a file; grown as needed */
    size_t bufcap;
} drk_src;

void drk_src_memory(drk_src *s, const void *data, size_t size);
void drk_src_file(drk_src *s, int fd, uint64_t size);
void drk_src_close(drk_src *s); /* frees the view buffer, not the fd */

/* Copies [off, off+len) to dst; 0, or -1 if out of range or unreadable. */
int drk_src_read(drk_src *s, uint64_t off, void *dst, size_t len);
/* A pointer to [off, off+len), valid until the next view of `s` (files are
 * read into one buffer, grown as needed); NULL if out of range, unreadable
 * or out of memory. */
const uint8_t *drk_src_view(drk_src *s, uint64_t off, size_t len);

typedef struct drk_elf_section {
    uint64_t offset, size;
    char name[32];
} drk_elf_section;

/* The sections of the ELF64 host file at `s` that hold fatbin containers:
 * .nv_fatbin (device code of executables and libraries, and of device-linked
 * -rdc programs), any other section named like "fatbin" whose bytes start
 * with a container, and last __nv_relfatbin (the relocatable device code of
 * -rdc objects; in a linked program it is nvlink's input, which the
 * runtime never loads, so it is left out when other sections hold
 * containers). Fills up to `max`; returns
 * how many there are, or -1 with a message in err. */
int drk_hostelf_fatbin_sections(drk_src *s, drk_elf_section *out, int max, char *err, size_t errlen);

#endif
