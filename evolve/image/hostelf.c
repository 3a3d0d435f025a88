#define _GNU_SOURCE
#include "evolve/image/hostelf.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "evolve/image/bytes.h"
#include "evolve/image/fatbin.h"

void drk_src_memory(drk_src *s, const void *data, size_t size)
{
    memset(s, 0, sizeof *s);
    s->mem = data;
    s->fd = -1;
    s->size = size;
}

void drk_src_file(drk_src *s, int fd, uint64_t size)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->size = size;
}

void drk_src_close(drk_src *s)
{
    free(s->buf);
    s->buf = NULL;
    s->bufcap = 0;
}

static int in_range(const drk_src *s, uint64_t off, size_t len)
{
    return off <= s->size && len <= s->size - off;
}

static int pread_all(int fd, void *dst, size_t len, uint64_t off)
{
    uint8_t *p = dst;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int drk_src_read(drk_src *s, uint64_t off, void *dst, size_t len)
{
    if (!in_range(s, off, len))
        return -1;
    if (s->mem) {
        memcpy(dst, s->mem + off, len);
        return 0;
    }
    return pread_all(s->fd, dst, len, off);
}

const uint8_t *drk_src_view(drk_src *s, uint64_t off, size_t len)
{
    if (!in_range(s, off, len))
        return NULL;
    if (s->mem)
        return s->mem + off;
    if (len > s->bufcap) {
        /* Grow geometrically so a run of growing containers stays cheap. */
        size_t cap = s->bufcap ? s->bufcap : 4096;
        while (cap < len)
            cap = cap > SIZE_MAX / 2 ? len : cap * 2;
        uint8_t *b = realloc(s->buf, cap);
        if (!b)
            return NULL;
        s->buf = b;
        s->bufcap = cap;
    }
    return pread_all(s->fd, s->buf, len, off) ? NULL : s->buf;
}

/* Section tables larger than this are not believed. */
#define MAX_SECTIONS (1u << 20)

typedef struct shdr_table {
    uint64_t off;
    uint64_t num;
    Elf64_Shdr strtab;
    int relocatable; /* an object file (ET_REL), not a linked program */
} shdr_table;

static int get_shdr(drk_src *s, const shdr_table *t, uint64_t i, Elf64_Shdr *sh)
{
    return drk_src_read(s, t->off + i * sizeof *sh, sh, sizeof *sh);
}

/* Locates the section header table and the section-name table, including
 * the extended numbering of files with more than 0xff00 sections. */
static int open_table(drk_src *s, shdr_table *t, char *err, size_t errlen)
{
    Elf64_Ehdr eh;
    if (drk_src_read(s, 0, &eh, sizeof eh))
        return drk_fail(err, errlen, "too short for an ELF64 header");
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return drk_fail(err, errlen, "not a 64-bit little-endian ELF file");
    t->relocatable = eh.e_type == ET_REL;
    if (eh.e_shoff == 0)
        return 0; /* no sections: nothing to find */
    if (eh.e_shentsize != sizeof(Elf64_Shdr))
        return drk_fail(err, errlen, "section header size %u, expected %zu", eh.e_shentsize, sizeof(Elf64_Shdr));
    t->off = eh.e_shoff;
    t->num = 1;
    Elf64_Shdr first;
    if (get_shdr(s, t, 0, &first))
        return drk_fail(err, errlen, "section header table at 0x%llx past the end", (unsigned long long)eh.e_shoff);
    t->num = eh.e_shnum ? eh.e_shnum : first.sh_size;
    uint64_t strndx = eh.e_shstrndx == SHN_XINDEX ? first.sh_link : eh.e_shstrndx;
    if (t->num > MAX_SECTIONS || !in_range(s, t->off, (size_t)(t->num * sizeof(Elf64_Shdr))))
        return drk_fail(err, errlen, "section header table (%llu entries) past the end", (unsigned long long)t->num);
    if (strndx == SHN_UNDEF || strndx >= t->num || get_shdr(s, t, strndx, &t->strtab))
        return drk_fail(err, errlen, "no section name table");
    if (!in_range(s, t->strtab.sh_offset, (size_t)t->strtab.sh_size))
        return drk_fail(err, errlen, "section name table past the end");
    return 1;
}

/* The section's name into `name` (cut at its size); 0 if unreadable. */
static int section_name(drk_src *s, const shdr_table *t, const Elf64_Shdr *sh, char *name, size_t size)
{
    if (sh->sh_name >= t->strtab.sh_size)
        return 0;
    uint64_t room = t->strtab.sh_size - sh->sh_name;
    size_t len = room < size - 1 ? (size_t)room : size - 1;
    if (drk_src_read(s, t->strtab.sh_offset + sh->sh_name, name, len))
        return 0;
    name[len] = 0;
    return 1;
}

/* 0 for .nv_fatbin, 1 for other containers, 2 for __nv_relfatbin, -1 for a
 * section without containers. */
static int section_rank(drk_src *s, const Elf64_Shdr *sh, const char *name)
{
    if (sh->sh_type == SHT_NOBITS || sh->sh_size < DRK_FATBIN_HEADER_SIZE || !in_range(s, sh->sh_offset, sh->sh_size))
        return -1;
    if (strcmp(name, ".nv_fatbin") == 0)
        return 0;
    if (strcmp(name, "__nv_relfatbin") == 0)
        return 2;
    /* .nvFatBinSegment holds wrappers (pointers), not containers. */
    if (!strcasestr(name, "fatbin") || strcmp(name, ".nvFatBinSegment") == 0)
        return -1;
    uint8_t magic[4];
    uint32_t m;
    if (drk_src_read(s, sh->sh_offset, magic, sizeof magic))
        return -1;
    memcpy(&m, magic, sizeof m);
    return m == DRK_FATBIN_MAGIC ? 1 : -1;
}

int drk_hostelf_fatbin_sections(drk_src *s, drk_elf_section *out, int max, char *err, size_t errlen)
{
    shdr_table t = {0};
    int rc = open_table(s, &t, err, errlen);
    if (rc <= 0)
        return rc;
    int n = 0;
    for (int want = 0; want <= 2; want++) {
        /* A device-linked (-rdc) program keeps nvlink's inputs in
         * __nv_relfatbin; the runtime loads only what .nv_fatbin holds. */
        if (want == 2 && n > 0 && !t.relocatable)
            break;
        for (uint64_t i = 1; i < t.num; i++) {
            Elf64_Shdr sh;
            char name[64];
            if (get_shdr(s, &t, i, &sh) || !section_name(s, &t, &sh, name, sizeof name))
                continue;
            if (section_rank(s, &sh, name) != want)
                continue;
            if (n < max) {
                out[n].offset = sh.sh_offset;
                out[n].size = sh.sh_size;
                size_t len = strnlen(name, sizeof out[n].name - 1);
                memcpy(out[n].name, name, len);
                out[n].name[len] = 0;
            }
            n++;
        }
    }
    return n;
}
