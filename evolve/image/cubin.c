/* Cubin reader. The ELF tables are bounds-checked here before libelf sees
 * them, libelf reads a private writable copy, and every .nv.info record is
 * bounded by its section. Layouts verified on nvcc 13.0 output for sm_80,
 * sm_90, sm_100 and -rdc (tests/unit/test_cubin.c). */
#include "evolve/image/cubin.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fnv.h"
#include "evolve/image/bytes.h"
#include "evolve/image/libs.h"

#define DRK_STO_CUDA_ENTRY 0x10          /* st_other of __global__ functions (not of device functions) */
#define DRK_SHT_CUDA_INFO 0x70000000u
#define DRK_SHT_CUDA_SHARED 0x7000000au  /* .nv.shared.<k> in -rdc objects: no file bytes, like NOBITS */

/* .nv.info record formats and the attributes read. */
enum { EIFMT_NVAL = 1, EIFMT_BVAL = 2, EIFMT_HVAL = 3, EIFMT_SVAL = 4 };
enum {
    EIATTR_MAX_THREADS = 0x05,
    EIATTR_PARAM_CBANK = 0x0a,
    EIATTR_REQNTID = 0x10,
    EIATTR_FRAME_SIZE = 0x11,
    EIATTR_KPARAM_INFO = 0x17,
    EIATTR_CBANK_PARAM_SIZE = 0x19,
    EIATTR_REGCOUNT = 0x2f,
    EIATTR_KPARAM_INFO_V2 = 0x45,
};

static int is_elf64le(const uint8_t *p, size_t size)
{
    return size >= 64 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[EI_CLASS] == ELFCLASS64 &&
           p[EI_DATA] == ELFDATA2LSB;
}

int drk_is_cubin(const void *data, size_t size)
{
    const uint8_t *p = data;
    return data && is_elf64le(p, size) && drk_ld16(p + 18) == EM_CUDA;
}

/* end = max(end, off + len), 0 if that passes avail (or overflows). */
static int extend(size_t *end, uint64_t off, uint64_t len, size_t avail)
{
    if (off > avail || len > avail - off)
        return 0;
    if (off + len > *end)
        *end = (size_t)(off + len);
    return 1;
}

/* A table of num entries of entsize bytes (>= minent) at off, within avail. */
static int table_ok(size_t *end, uint64_t off, uint64_t num, uint64_t entsize, uint64_t minent, size_t avail)
{
    if (num == 0)
        return 1;
    if (entsize < minent || num > avail / entsize)
        return 0;
    return extend(end, off, num * entsize, avail);
}

int drk_elf_extent(const void *data, size_t avail, size_t *size)
{
    const uint8_t *p = data;
    if (!data || !is_elf64le(p, avail))
        return -1;
    uint64_t phoff = drk_ld64(p + 0x20), shoff = drk_ld64(p + 0x28);
    uint16_t ehsize = drk_ld16(p + 0x34), phentsize = drk_ld16(p + 0x36), phnum = drk_ld16(p + 0x38);
    uint16_t shentsize = drk_ld16(p + 0x3a);
    uint64_t shnum = drk_ld16(p + 0x3c);
    size_t end = 64;
    if (!extend(&end, 0, ehsize, avail))
        return -1;
    if (shnum == 0 && shoff) { /* extended numbering: the count is section 0's sh_size */
        if (shentsize < 64 || !extend(&end, shoff, 64, avail))
            return -1;
        shnum = drk_ld64(p + shoff + 0x20);
    }
    if (!table_ok(&end, phoff, phnum == 0xffff ? 0 : phnum, phentsize, 56, avail) ||
        !table_ok(&end, shoff, shnum, shentsize, 64, avail))
        return -1;
    for (uint64_t i = 0; i < (phnum == 0xffff ? 0u : phnum); i++) {
        const uint8_t *ph = p + phoff + i * phentsize;
        if (!extend(&end, drk_ld64(ph + 0x08), drk_ld64(ph + 0x20), avail))
            return -1;
    }
    for (uint64_t i = 1; i < shnum; i++) {
        const uint8_t *sh = p + shoff + i * shentsize;
        uint32_t type = drk_ld32(sh + 4);
        if (type == SHT_NOBITS || type == DRK_SHT_CUDA_SHARED)
            continue;
        if (!extend(&end, drk_ld64(sh + 0x18), drk_ld64(sh + 0x20), avail))
            return -1;
    }
    *size = end;
    return 0;
}

/* ------------------------------------------------------------------ */
/* .nv.info records                                                   */

typedef struct nv_rec {
    uint8_t fmt, attr;
    uint16_t x;         /* HVAL/BVAL value, or SVAL length */
    const uint8_t *val; /* SVAL payload (x bytes) */
} nv_rec;

/* The record at *pos of [p, p+n): 1 and *pos advanced, 0 at the end, -1 if
 * it is malformed (message in err). */
static int nv_next(const uint8_t *p, size_t n, size_t *pos, nv_rec *r, const char *sec, char *err, size_t errlen)
{
    size_t at = *pos;
    if (at >= n)
        return 0;
    if (n - at < 4)
        return drk_fail(err, errlen, "cubin: %s: record at +0x%zx is cut short", sec, at);
    r->fmt = p[at];
    r->attr = p[at + 1];
    r->x = drk_ld16(p + at + 2);
    r->val = p + at + 4;
    if (r->fmt < EIFMT_NVAL || r->fmt > EIFMT_SVAL)
        return drk_fail(err, errlen, "cubin: %s: record at +0x%zx has unknown format %u", sec, at, r->fmt);
    size_t len = r->fmt == EIFMT_SVAL ? r->x : 0;
    if (len > n - at - 4)
        return drk_fail(err, errlen, "cubin: %s: attribute 0x%02x at +0x%zx runs past the section (%zu bytes)", sec,
                    r->attr, at, n);
    *pos = at + 4 + len;
    return 1;
}

/* An SVAL record whose payload has at least `min` bytes. */
static int nv_sval(const nv_rec *r, unsigned min)
{
    return r->fmt == EIFMT_SVAL && r->x >= min;
}

/* ------------------------------------------------------------------ */
/* The file                                                           */

typedef struct sec_info {
    const char *name;
    GElf_Shdr sh;
    Elf_Scn *scn;
    size_t info, shared, const0; /* for .text.<k>: its .nv.info.<k>, .nv.shared.<k>, .nv.constant0.<k> (0: none) */
    size_t entry_sym;            /* for .text.<k>: the entry symbol (0: none) */
} sec_info;

typedef struct reader {
    const drk_elf_api *E;
    Elf *elf;
    size_t nsec;
    sec_info *secs;
    size_t symtab;      /* section index of .symtab, 0 if none */
    size_t nsyms;
    uint32_t *sym_regs;  /* by symbol index, from .nv.info REGCOUNT */
    uint32_t *sym_frame; /* by symbol index, from .nv.info FRAME_SIZE */
    char *err;
    size_t errlen;
} reader;

static int section_bytes(reader *R, size_t i, const uint8_t **p, size_t *n)
{
    Elf_Data *d = R->E->elf_rawdata(R->secs[i].scn, NULL);
    if (!d || (!d->d_buf && d->d_size))
        return drk_fail(R->err, R->errlen, "cubin: section %s: cannot read its bytes (%s)", R->secs[i].name,
                    R->E->elf_errmsg(-1));
    *p = d->d_buf;
    *n = d->d_size;
    return 0;
}

static int load_sections(reader *R)
{
    const drk_elf_api *E = R->E;
    size_t shstrndx;
    if (E->elf_getshdrnum(R->elf, &R->nsec) != 0 || E->elf_getshdrstrndx(R->elf, &shstrndx) != 0)
        return drk_fail(R->err, R->errlen, "cubin: no section table (%s)", E->elf_errmsg(-1));
    R->secs = calloc(R->nsec ? R->nsec : 1, sizeof *R->secs);
    if (!R->secs)
        return drk_fail(R->err, R->errlen, "cubin: out of memory for %zu sections", R->nsec);
    for (size_t i = 1; i < R->nsec; i++) {
        sec_info *s = &R->secs[i];
        s->scn = E->elf_getscn(R->elf, i);
        if (!s->scn || !E->gelf_getshdr(s->scn, &s->sh))
            return drk_fail(R->err, R->errlen, "cubin: section %zu: bad header (%s)", i, E->elf_errmsg(-1));
        s->name = E->elf_strptr(R->elf, shstrndx, s->sh.sh_name);
        if (!s->name)
            return drk_fail(R->err, R->errlen, "cubin: section %zu: bad name", i);
        if (s->sh.sh_type == SHT_SYMTAB && !R->symtab)
            R->symtab = i;
    }
    return 0;
}

/* Whether `name` is prefix + the name of text section t after ".text.". */
static int names_kernel_of(const reader *R, const char *name, const char *prefix, size_t t)
{
    size_t pl = strlen(prefix);
    const char *tn = R->secs[t].name;
    return strncmp(name, prefix, pl) == 0 && strncmp(tn, ".text.", 6) == 0 && strcmp(name + pl, tn + 6) == 0;
}

/* Ties .nv.info.<k>, .nv.shared.<k>, .nv.constant0.<k> to .text.<k>: their
 * sh_info is the text section's index, and the names must agree. */
static void link_kernel_sections(reader *R)
{
    for (size_t i = 1; i < R->nsec; i++) {
        sec_info *s = &R->secs[i];
        size_t t = s->sh.sh_info;
        if (t == 0 || t >= R->nsec)
            continue;
        if (s->sh.sh_type == DRK_SHT_CUDA_INFO && names_kernel_of(R, s->name, ".nv.info.", t))
            R->secs[t].info = i;
        else if (names_kernel_of(R, s->name, ".nv.shared.", t))
            R->secs[t].shared = i;
        else if (names_kernel_of(R, s->name, ".nv.constant0.", t))
            R->secs[t].const0 = i;
    }
}

static const char *sym_name(reader *R, const GElf_Sym *sym)
{
    return R->E->elf_strptr(R->elf, R->secs[R->symtab].sh.sh_link, sym->st_name);
}

/* Marks the text sections of kernels. An entry is an STT_FUNC symbol with
 * STO_CUDA_ENTRY in st_other whose section is .text.<its name>; binding is
 * GLOBAL, or WEAK for template instances in -rdc objects. Device functions
 * have .nv.info.<f> too in -rdc objects, so that alone proves nothing. A
 * file without any STO_CUDA_ENTRY (older toolkits) falls back to functions
 * that have a .nv.info.<k>. */
static int find_entries(reader *R)
{
    if (!R->symtab)
        return 0;
    sec_info *st = &R->secs[R->symtab];
    if (st->sh.sh_link == 0 || st->sh.sh_link >= R->nsec)
        return drk_fail(R->err, R->errlen, "cubin: .symtab has no string table");
    Elf_Data *d = R->E->elf_getdata(st->scn, NULL);
    if (!d)
        return drk_fail(R->err, R->errlen, "cubin: cannot read .symtab (%s)", R->E->elf_errmsg(-1));
    R->nsyms = d->d_size / sizeof(Elf64_Sym);
    int any_entry = 0;
    for (int pass = 0; pass < 2 && !any_entry; pass++) {
        for (size_t i = 1; i < R->nsyms; i++) {
            GElf_Sym sym;
            if (!R->E->gelf_getsym(d, (int)i, &sym))
                return drk_fail(R->err, R->errlen, "cubin: symbol %zu unreadable", i);
            int entry = (sym.st_other & DRK_STO_CUDA_ENTRY) != 0;
            if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == 0 || sym.st_shndx >= R->nsec ||
                (pass == 0 && !entry) || (pass == 1 && (GELF_ST_BIND(sym.st_info) == STB_LOCAL)))
                continue;
            sec_info *t = &R->secs[sym.st_shndx];
            const char *n = sym_name(R, &sym);
            if (!n || strncmp(t->name, ".text.", 6) != 0 || strcmp(t->name + 6, n) != 0)
                continue;
            if (pass == 1 && !t->info)
                continue;
            t->entry_sym = i;
            any_entry = 1;
        }
    }
    return 0;
}

/* REGCOUNT and FRAME_SIZE from the module-wide .nv.info, by symbol index. */
static int read_module_info(reader *R)
{
    if (R->nsyms == 0)
        return 0;
    R->sym_regs = malloc(R->nsyms * sizeof *R->sym_regs);
    R->sym_frame = malloc(R->nsyms * sizeof *R->sym_frame);
    if (!R->sym_regs || !R->sym_frame)
        return drk_fail(R->err, R->errlen, "cubin: out of memory for %zu symbols", R->nsyms);
    for (size_t i = 0; i < R->nsyms; i++)
        R->sym_regs[i] = R->sym_frame[i] = DRK_UNKNOWN_U32;
    for (size_t i = 1; i < R->nsec; i++) {
        if (R->secs[i].sh.sh_type != DRK_SHT_CUDA_INFO || strcmp(R->secs[i].name, ".nv.info") != 0)
            continue;
        const uint8_t *p;
        size_t n, pos = 0;
        if (section_bytes(R, i, &p, &n))
            return -1;
        nv_rec r = {0};
        int rc;
        while ((rc = nv_next(p, n, &pos, &r, ".nv.info", R->err, R->errlen)) == 1) {
            if ((r.attr != EIATTR_REGCOUNT && r.attr != EIATTR_FRAME_SIZE) || !nv_sval(&r, 8))
                continue;
            uint32_t sym = drk_ld32(r.val), v = drk_ld32(r.val + 4);
            if (sym < R->nsyms)
                (r.attr == EIATTR_REGCOUNT ? R->sym_regs : R->sym_frame)[sym] = v;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* One kernel                                                         */

typedef struct kparams {
    uint32_t nparams;
    int have_cbank, have_size;
    uint32_t cbank_size, param_size;
    uint64_t max_threads;
    uint32_t reqntid[3];
} kparams;

/* The KPARAM_INFO (0x17) and KPARAM_INFO_V2 (0x45) payloads: u32 index,
 * u16 ordinal, u16 offset (from PARAM_CBANK's base, i.e. in the parameter
 * buffer), then V1: u32 w = log2 align [0,8) | space [8,12) | cbank [12,17)
 * | smem flag 17 | size [18,32); V2: u16 size, u16 attrs = log2 align
 * [0,8) | space [8,12). */
static void decode_kparam(const nv_rec *r, uint16_t *ord, drk_param *prm)
{
    *ord = drk_ld16(r->val + 4);
    prm->offset = drk_ld16(r->val + 6);
    unsigned space;
    if (r->attr == EIATTR_KPARAM_INFO) {
        uint32_t w = drk_ld32(r->val + 8);
        prm->size = (w >> 18) & 0x3fff;
        prm->align_log2 = (uint8_t)(w & 0xff);
        space = (w >> 8) & 0xf;
    } else {
        uint16_t attrs = drk_ld16(r->val + 10);
        prm->size = drk_ld16(r->val + 8);
        prm->align_log2 = (uint8_t)(attrs & 0xff);
        space = (attrs >> 8) & 0xf;
    }
    /* space is the state space of a PTX `.ptr` parameter (4 .global, 5
     * generic: ptxas 13; nvcc marks pointers so for sm_100), 0 without .ptr,
     * which proves nothing: nvcc for sm_90 declares pointers as plain .u64. */
    prm->kind = space ? DRK_PARAM_POINTER : DRK_PARAM_KIND_UNKNOWN;
}

static int is_kparam(const nv_rec *r)
{
    return (r->attr == EIATTR_KPARAM_INFO || r->attr == EIATTR_KPARAM_INFO_V2) && nv_sval(r, 12);
}

static uint64_t dims_product(const uint8_t *v, uint32_t out[3])
{
    uint64_t prod = 1;
    for (int i = 0; i < 3; i++) {
        uint32_t d = drk_ld32(v + 4 * i);
        if (out)
            out[i] = d;
        prod *= d; /* three u32 factors can overflow: saturated by the caller's check */
        if (prod > UINT32_MAX)
            prod = UINT32_MAX;
    }
    return prod;
}

/* First pass: everything but the parameters themselves, and their count. */
static int scan_kernel_info(reader *R, const uint8_t *p, size_t n, const char *sec, kparams *kp)
{
    size_t pos = 0;
    nv_rec r = {0};
    int rc;
    while ((rc = nv_next(p, n, &pos, &r, sec, R->err, R->errlen)) == 1) {
        if (is_kparam(&r)) {
            uint32_t ord = drk_ld16(r.val + 4);
            if (ord + 1 > kp->nparams)
                kp->nparams = ord + 1;
        } else if (r.attr == EIATTR_PARAM_CBANK && nv_sval(&r, 8)) {
            kp->have_cbank = 1;
            kp->cbank_size = drk_ld16(r.val + 6);
        } else if (r.attr == EIATTR_CBANK_PARAM_SIZE && r.fmt == EIFMT_HVAL) {
            kp->have_size = 1;
            kp->param_size = r.x;
        } else if (r.attr == EIATTR_MAX_THREADS && nv_sval(&r, 12)) {
            kp->max_threads = dims_product(r.val, NULL);
        } else if (r.attr == EIATTR_REQNTID && nv_sval(&r, 12)) {
            dims_product(r.val, kp->reqntid);
        }
    }
    return rc;
}

/* Second pass: the parameters, by ordinal (records come last to first). */
static int fill_params(reader *R, const uint8_t *p, size_t n, const char *sec, drk_kernel_info *k)
{
    uint8_t *seen = calloc(k->nparams, 1);
    if (!seen)
        return drk_fail(R->err, R->errlen, "cubin: out of memory");
    size_t pos = 0;
    nv_rec r = {0};
    int rc;
    while ((rc = nv_next(p, n, &pos, &r, sec, R->err, R->errlen)) == 1) {
        if (!is_kparam(&r))
            continue;
        uint16_t ord;
        drk_param prm;
        decode_kparam(&r, &ord, &prm);
        if (seen[ord]) {
            rc = drk_fail(R->err, R->errlen, "cubin: %s: parameter %u described twice", sec, ord);
            break;
        }
        seen[ord] = 1;
        k->params[ord] = prm;
    }
    for (uint32_t i = 0; rc == 0 && i < k->nparams; i++)
        if (!seen[i])
            rc = drk_fail(R->err, R->errlen, "cubin: %s: parameter %u is not described", sec, i);
    free(seen);
    return rc;
}

/* The parameters must fit the buffer the attributes declare. */
static int check_params(reader *R, const char *sec, drk_kernel_info *k)
{
    for (uint32_t i = 0; i < k->nparams; i++) {
        uint64_t end = (uint64_t)k->params[i].offset + k->params[i].size;
        if (k->params[i].size == 0 || end > k->params_size)
            return drk_fail(R->err, R->errlen, "cubin: %s: parameter %u (+%u, %u bytes) outside the %u-byte buffer", sec,
                        i, k->params[i].offset, k->params[i].size, k->params_size);
    }
    return 0;
}

static int read_kernel_info(reader *R, size_t info, drk_kernel_info *k)
{
    const uint8_t *p;
    size_t n;
    const char *sec = R->secs[info].name;
    if (section_bytes(R, info, &p, &n))
        return -1;
    kparams kp = {0};
    if (scan_kernel_info(R, p, n, sec, &kp))
        return -1;
    k->max_threads = (uint32_t)kp.max_threads;
    memcpy(k->reqntid, kp.reqntid, sizeof k->reqntid);
    k->nparams = kp.nparams;
    if (kp.nparams) {
        k->params = calloc(kp.nparams, sizeof *k->params);
        if (!k->params)
            return drk_fail(R->err, R->errlen, "cubin: out of memory");
        if (fill_params(R, p, n, sec, k))
            return -1;
    }
    uint32_t last_end = 0;
    for (uint32_t i = 0; i < k->nparams; i++)
        if (k->params[i].offset + k->params[i].size > last_end)
            last_end = k->params[i].offset + k->params[i].size;
    k->params_size = kp.have_size ? kp.param_size : kp.have_cbank ? kp.cbank_size : last_end;
    if (kp.have_size && kp.have_cbank && kp.param_size != kp.cbank_size)
        return drk_fail(R->err, R->errlen, "cubin: %s: CBANK_PARAM_SIZE %u but PARAM_CBANK says %u", sec, kp.param_size,
                    kp.cbank_size);
    return check_params(R, sec, k);
}

static uint32_t sh_size_u32(const sec_info *s)
{
    return s->sh.sh_size > UINT32_MAX ? DRK_UNKNOWN_U32 : (uint32_t)s->sh.sh_size;
}

static int read_kernel(reader *R, size_t t, drk_kernel_info *k)
{
    sec_info *text = &R->secs[t];
    k->name = strdup(text->name + 6);
    if (!k->name)
        return drk_fail(R->err, R->errlen, "cubin: out of memory");
    size_t sym = text->entry_sym;
    k->regs = R->sym_regs ? R->sym_regs[sym] : DRK_UNKNOWN_U32;
    /* Older toolkits also put registers in sh_info's top byte; CUDA 13 keeps
     * only the symbol index there, so use it only when REGCOUNT is absent. */
    if (k->regs == DRK_UNKNOWN_U32 && (text->sh.sh_info >> 24) != 0)
        k->regs = (uint32_t)(text->sh.sh_info >> 24);
    k->local_bytes = R->sym_frame ? R->sym_frame[sym] : DRK_UNKNOWN_U32;
    /* .nv.shared.<k>'s size is what cuobjdump reports as SHARED; on sm_90+
     * it includes the 1 KiB the toolkit reserves per block. */
    k->shared_bytes = text->shared ? sh_size_u32(&R->secs[text->shared]) : 0;
    k->const_bytes = text->const0 ? sh_size_u32(&R->secs[text->const0]) : DRK_UNKNOWN_U32;
    return text->info ? read_kernel_info(R, text->info, k) : 0;
}

static int read_kernels(reader *R, drk_cubin *out)
{
    size_t n = 0;
    for (size_t i = 1; i < R->nsec; i++)
        n += R->secs[i].entry_sym != 0;
    if (n == 0)
        return 0;
    out->kernels = calloc(n, sizeof *out->kernels);
    if (!out->kernels)
        return drk_fail(R->err, R->errlen, "cubin: out of memory for %zu kernels", n);
    for (size_t i = 1; i < R->nsec; i++) {
        if (!R->secs[i].entry_sym)
            continue;
        drk_kernel_info *k = &out->kernels[out->nkernels++];
        if (read_kernel(R, i, k))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */

static int read_header(const uint8_t *p, size_t size, drk_cubin *out, char *err, size_t errlen)
{
    if (!drk_is_cubin(p, size))
        return drk_fail(err, errlen, "cubin: not a 64-bit little-endian EM_CUDA ELF (%zu bytes)", size);
    size_t extent;
    if (drk_elf_extent(p, size, &extent))
        return drk_fail(err, errlen, "cubin: its headers or sections run past its %zu bytes", size);
    /* OSABI is 0x33 before CUDA 13 and 0x41 since; either is accepted. */
    uint32_t flags = drk_ld32(p + 0x30);
    out->abi = p[EI_ABIVERSION];
    out->elf_type = drk_ld16(p + 16);
    if (out->abi == 7) {
        out->sm = flags & 0xff;
        out->virtual_sm = (flags >> 16) & 0xff;
    } else if (out->abi == 8) {
        out->sm = (flags >> 8) & 0xff;
    } else {
        return drk_fail(err, errlen, "cubin: unknown EI_ABIVERSION %u (e_flags 0x%08x)", out->abi, flags);
    }
    return 0;
}

static void reader_free(reader *R)
{
    if (R->elf)
        R->E->elf_end(R->elf);
    free(R->secs);
    free(R->sym_regs);
    free(R->sym_frame);
}

/* Opens the cubin at `data` (libelf may write into it), reads its header
 * into *hdr and its sections, entries and module info, then runs `then`
 * on it: 0, or -1 with a message in err. */
static int with_reader(void *data, size_t size, drk_cubin *hdr, char *err, size_t errlen,
                       int (*then)(reader *R, void *arg), void *arg)
{
    if (!data || read_header(data, size, hdr, err, errlen))
        return data ? -1 : drk_fail(err, errlen, "cubin: no data");
    reader R = {.E = drk_elf(), .err = err, .errlen = errlen};
    if (!R.E)
        return drk_fail(err, errlen, "cubin: libelf is missing (libelf.so.1 cannot be opened)");
    int rc = -1;
    R.elf = R.E->elf_memory(data, size);
    if (!R.elf || R.E->elf_kind(R.elf) != ELF_K_ELF)
        drk_fail(err, errlen, "cubin: libelf rejects it (%s)", R.E->elf_errmsg(-1));
    else if (!load_sections(&R)) {
        link_kernel_sections(&R);
        rc = find_entries(&R) || read_module_info(&R) || then(&R, arg) ? -1 : 0;
    }
    reader_free(&R);
    return rc;
}

static int then_kernels(reader *R, void *out) { return read_kernels(R, out); }

int drk_cubin_read_private(void *data, size_t size, drk_cubin *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = with_reader(data, size, out, err, errlen, then_kernels, out);
    if (rc)
        drk_cubin_free(out);
    return rc;
}

int drk_cubin_read(const void *data, size_t size, drk_cubin *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!data)
        return drk_fail(err, errlen, "cubin: no data");
    /* libelf may write into its buffer (elfutils decompresses in place), so
     * it gets a private copy, never the caller's possibly read-only bytes. */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return drk_fail(err, errlen, "cubin: out of memory for %zu bytes", size);
    memcpy(copy, data, size);
    int rc = drk_cubin_read_private(copy, size, out, err, errlen);
    free(copy);
    return rc;
}

/* FNV-1a tells builds apart; a collision only makes the search skip one
 * candidate. */
static uint64_t fnv_u32(uint64_t h, uint32_t v) { return drk_fnv(h, &v, sizeof v); }

/* The digest of what the kernel's behaviour rests on: its code, the code of
 * every device function in the module (what it may call), and its
 * resources and limits. Attributes that only record the options of the
 * build (the register cap it was given) are left out. */
static int digest_kernel(reader *R, const char *kernel, uint64_t *digest)
{
    size_t t = 0;
    for (size_t i = 1; i < R->nsec && !t; i++)
        if (R->secs[i].entry_sym && strcmp(R->secs[i].name + 6, kernel) == 0)
            t = i;
    if (!t)
        return drk_fail(R->err, R->errlen, "cubin: no kernel %.80s", kernel);
    drk_kernel_info k = {0};
    int rc = read_kernel(R, t, &k);
    uint64_t h = DRK_FNV_OFFSET;
    const uint32_t facts[] = {k.regs, k.shared_bytes, k.local_bytes, k.const_bytes, k.max_threads,
                              k.reqntid[0], k.reqntid[1], k.reqntid[2], k.params_size};
    for (size_t i = 0; i < sizeof facts / sizeof *facts; i++)
        h = fnv_u32(h, facts[i]);
    drk_kernel_info_clear(&k);
    for (size_t i = 1; i < R->nsec && rc == 0; i++) {
        const sec_info *s = &R->secs[i];
        if (strncmp(s->name, ".text.", 6) != 0 || (i != t && s->entry_sym))
            continue;
        const uint8_t *p;
        size_t n;
        if ((rc = section_bytes(R, i, &p, &n)) == 0) {
            h = drk_fnv(h, s->name, strlen(s->name) + 1);
            h = fnv_u32(h, (uint32_t)n);
            h = drk_fnv(h, p, n);
        }
    }
    *digest = h;
    return rc;
}

struct digest_of {
    const char *kernel;
    uint64_t *digest;
};

static int then_digest(reader *R, void *arg)
{
    const struct digest_of *d = arg;
    return digest_kernel(R, d->kernel, d->digest);
}

int drk_cubin_code_digest(const void *data, size_t size, const char *kernel, uint64_t *digest, char *err,
                          size_t errlen)
{
    if (!data || !kernel || !digest)
        return drk_fail(err, errlen, "cubin: no data");
    char *copy = malloc(size ? size : 1); /* libelf may write into its buffer */
    if (!copy)
        return drk_fail(err, errlen, "cubin: out of memory for %zu bytes", size);
    memcpy(copy, data, size);
    drk_cubin hdr;
    memset(&hdr, 0, sizeof hdr);
    struct digest_of d = {kernel, digest};
    int rc = with_reader(copy, size, &hdr, err, errlen, then_digest, &d);
    free(copy);
    return rc;
}

void drk_cubin_free(drk_cubin *c)
{
    for (size_t i = 0; i < c->nkernels; i++)
        drk_kernel_info_clear(&c->kernels[i]);
    free(c->kernels);
    c->kernels = NULL;
    c->nkernels = 0;
}
