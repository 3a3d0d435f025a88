#define _GNU_SOURCE
#include "evolve/image/image.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "evolve/image/bytes.h"
#include "evolve/image/cubin.h"
#include "evolve/image/fatbin.h"
#include "evolve/image/hostelf.h"
#include "evolve/image/ptx.h"
#include "evolve/image/ptx_flow.h"

/* A container bigger than this is not believed (the largest in
 * libcublasLt.so.13 is 6 MB); the file reader's buffer never grows past it. */
#define MAX_CONTAINER ((size_t)DRK_FATBIN_MAX_PAYLOAD)
/* Standalone cubin or PTX files are read whole up to this size. */
#define MAX_WHOLE_FILE ((uint64_t)DRK_FATBIN_MAX_PAYLOAD)
/* Fatbin-carrying sections of one host file that are walked. */
#define MAX_SECTIONS 64

const char *drk_image_format_name(drk_image_format f)
{
    switch (f) {
    case DRK_IMAGE_WRAPPER: return "fatbin wrapper";
    case DRK_IMAGE_FATBIN: return "fatbin";
    case DRK_IMAGE_CUBIN: return "cubin";
    case DRK_IMAGE_PTX: return "ptx";
    case DRK_IMAGE_HOST_ELF: return "host ELF";
    default: return "unknown";
    }
}

drk_image_format drk_image_classify(const void *data, size_t avail)
{
    const uint8_t *b = data;
    if (!b || avail < 4)
        return DRK_IMAGE_UNKNOWN;
    uint32_t magic = drk_ld32(b);
    if (magic == DRK_FATBIN_WRAPPER_MAGIC)
        return avail >= DRK_FATBIN_WRAPPER_SIZE ? DRK_IMAGE_WRAPPER : DRK_IMAGE_UNKNOWN;
    if (magic == DRK_FATBIN_MAGIC)
        return avail >= DRK_FATBIN_HEADER_SIZE ? DRK_IMAGE_FATBIN : DRK_IMAGE_UNKNOWN;
    if (memcmp(b, ELFMAG, SELFMAG) == 0) {
        if (avail < 20)
            return DRK_IMAGE_UNKNOWN;
        uint16_t machine;
        memcpy(&machine, b + 18, sizeof machine);
        return machine == EM_CUDA ? DRK_IMAGE_CUBIN : DRK_IMAGE_HOST_ELF;
    }
    return drk_is_ptx(data, avail) ? DRK_IMAGE_PTX : DRK_IMAGE_UNKNOWN;
}

/* ---- Which code runs where ---- */

static unsigned suffix_rank(char s) { return s == 'a' ? 2 : s == 'f' ? 1 : 0; }
static unsigned arch_key(unsigned arch, char s) { return arch * 4 + suffix_rank(s); }

int drk_image_sass_runs_on(unsigned arch, char suffix, unsigned sm)
{
    if (suffix == 'a')
        return arch == sm;
    return arch / 10 == sm / 10 && arch <= sm;
}

int drk_image_ptx_runs_on(unsigned arch, char suffix, unsigned sm)
{
    if (suffix == 'a')
        return arch == sm;
    if (suffix == 'f')
        return arch / 10 == sm / 10 && arch <= sm;
    return arch <= sm;
}

int drk_image_kernel_ptx_for(const drk_image_kernel *k, unsigned sm)
{
    for (unsigned i = 0; i < k->nptx && i < DRK_IMAGE_MAX_ARCHS; i++)
        if (drk_image_ptx_runs_on(k->ptx[i], k->ptx_suffix[i], sm))
            return 1;
    return 0;
}

int drk_image_kernel_sass_for(const drk_image_kernel *k, unsigned sm)
{
    for (unsigned i = 0; i < k->nsass && i < DRK_IMAGE_MAX_ARCHS; i++)
        if (drk_image_sass_runs_on(k->sass[i], k->sass_suffix[i], sm))
            return 1;
    return 0;
}

/* ---- The table being built ---- */

/* One device entry's identity: SASS or PTX, arch, suffix, PTX ISA. */
typedef struct code_ref {
    int sass;
    unsigned arch;
    char suffix;
    unsigned isa;
} code_ref;

/* The archs of one container's entries (the lists kernels get with sm set). */
typedef struct arch_lists {
    code_ref sass[DRK_IMAGE_MAX_ARCHS], ptx[DRK_IMAGE_MAX_ARCHS];
    unsigned nsass, nptx;
} arch_lists;

typedef struct kacc {
    drk_image_kernel k;
    uint64_t rank;          /* of k.info; every kept kernel has one */
    drk_param *ptx_params;  /* of the best PTX seen, for pointer kinds */
    uint32_t ptx_nparams;
    uint64_t ptx_rank;
    drk_ptx_flow *ptx_flow; /* of the same PTX */
    uint32_t ptx_text;      /* of the same PTX, as in drk_image_kernel */
} kacc;

typedef struct builder {
    unsigned sm;
    drk_image *img;
    kacc *v;
    size_t n, cap;
    uint32_t *slots; /* open addressing: index + 1, 0 empty */
    size_t nslots;
    uint64_t base;   /* offset of the container being read, for messages */
    int keep_ptx;
    int nomem;
} builder;

static void note_error(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_error(builder *b, const char *fmt, ...)
{
    b->img->stats.errors++;
    if (b->img->first_error[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->img->first_error, sizeof b->img->first_error, fmt, ap);
    va_end(ap);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int grow_slots(builder *b)
{
    size_t n = b->nslots ? b->nslots * 2 : 256;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < b->n; i++) {
        size_t j = name_hash(b->v[i].k.info.name) & (n - 1);
        while (s[j])
            j = (j + 1) & (n - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(b->slots);
    b->slots = s;
    b->nslots = n;
    return 0;
}

/* The kernel's accumulator, or a new zeroed one (rank 0, so the caller
 * fills its info and name at once); NULL when out of memory. */
static kacc *find_kernel(builder *b, const char *name)
{
    if ((b->n + 1) * 2 > b->nslots && grow_slots(b))
        return NULL;
    size_t j = name_hash(name) & (b->nslots - 1);
    for (; b->slots[j]; j = (j + 1) & (b->nslots - 1))
        if (strcmp(b->v[b->slots[j] - 1].k.info.name, name) == 0)
            return &b->v[b->slots[j] - 1];
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        kacc *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return NULL;
        b->v = v;
        b->cap = cap;
    }
    if (b->n >= UINT32_MAX - 1)
        return NULL;
    kacc *a = &b->v[b->n];
    memset(a, 0, sizeof *a);
    b->slots[j] = (uint32_t)++b->n;
    return a;
}

/* Inserts (arch, suffix) into an ascending list, once. */
static void add_arch(uint16_t *arch, char *suffix, uint16_t *isa, unsigned *n, const code_ref *c)
{
    unsigned key = arch_key(c->arch, c->suffix), i = 0;
    for (; i < *n; i++) {
        unsigned k = arch_key(arch[i], suffix[i]);
        if (k == key) {
            if (isa && c->isa > isa[i])
                isa[i] = (uint16_t)c->isa;
            return;
        }
        if (k > key)
            break;
    }
    if (*n == DRK_IMAGE_MAX_ARCHS || c->arch > UINT16_MAX)
        return;
    memmove(arch + i + 1, arch + i, (*n - i) * sizeof *arch);
    memmove(suffix + i + 1, suffix + i, (*n - i) * sizeof *suffix);
    if (isa)
        memmove(isa + i + 1, isa + i, (*n - i) * sizeof *isa);
    arch[i] = (uint16_t)c->arch;
    suffix[i] = c->suffix;
    if (isa)
        isa[i] = (uint16_t)c->isa;
    (*n)++;
}

static void add_code(drk_image_kernel *k, const code_ref *c)
{
    if (c->sass)
        add_arch(k->sass, k->sass_suffix, NULL, &k->nsass, c);
    else
        add_arch(k->ptx, k->ptx_suffix, k->ptx_isa, &k->nptx, c);
}

/* How much an entry is preferred as a kernel's source of info: for an SM,
 * code that runs there first, SASS before PTX, then the newest; for sm 0,
 * SASS before PTX, then the newest. Never 0. */
static uint64_t entry_rank(unsigned sm, const code_ref *c)
{
    uint64_t r = 1 + ((uint64_t)arch_key(c->arch, c->suffix) << 16) + (c->sass ? 0 : (c->isa & 0xffff));
    if (c->sass)
        r |= 1ull << 40;
    if (sm && (c->sass ? drk_image_sass_runs_on(c->arch, c->suffix, sm) : drk_image_ptx_runs_on(c->arch, c->suffix, sm)))
        r |= 1ull << 41;
    return r;
}

/* Keeps the parameters (and takes the flow, *flow then NULL) of the best
 * PTX entry seen. */
static void keep_ptx_kinds(kacc *a, const drk_kernel_info *ki, uint64_t rank, drk_ptx_flow **flow,
                           uint32_t text)
{
    if (rank <= a->ptx_rank)
        return;
    drk_param *p = NULL;
    if (ki->nparams) {
        p = malloc(ki->nparams * sizeof *p);
        if (!p)
            return;
        memcpy(p, ki->params, ki->nparams * sizeof *p);
    }
    free(a->ptx_params);
    a->ptx_params = p;
    a->ptx_nparams = ki->nparams;
    a->ptx_rank = rank;
    free(a->ptx_flow);
    a->ptx_flow = flow ? *flow : NULL;
    if (flow)
        *flow = NULL;
    a->ptx_text = text;
}

/* Takes the kernels a reader produced (their allocations move into the table
 * when they become a kernel's info), with their flows for PTX (NULL: none;
 * those taken are set NULL). `lists` (sm set): the archs to list for them;
 * NULL: just this entry's. */
static void merge_kernels(builder *b, const code_ref *c, drk_kernel_info *ks, size_t nk, drk_ptx_flow **flows,
                          const arch_lists *lists, uint32_t text)
{
    uint64_t rank = entry_rank(b->sm, c);
    for (size_t i = 0; i < nk; i++) {
        if (!ks[i].name)
            continue;
        kacc *a = find_kernel(b, ks[i].name);
        if (!a) {
            b->nomem = 1;
            return;
        }
        if (lists) {
            for (unsigned j = 0; j < lists->nsass; j++)
                add_code(&a->k, &lists->sass[j]);
            for (unsigned j = 0; j < lists->nptx; j++)
                add_code(&a->k, &lists->ptx[j]);
        }
        add_code(&a->k, c);
        if (!c->sass)
            keep_ptx_kinds(a, &ks[i], rank, flows ? &flows[i] : NULL, text);
        if (rank > a->rank) {
            drk_kernel_info_clear(&a->k.info);
            a->k.info = ks[i];
            memset(&ks[i], 0, sizeof ks[i]);
            a->k.source = c->sass ? DRK_INFO_SASS : DRK_INFO_PTX;
            a->k.source_arch = c->arch;
            a->k.source_suffix = c->suffix;
            a->rank = rank;
        }
    }
}

/* ---- Reading entries ---- */

static const char *kind_name(unsigned kind)
{
    return kind == DRK_FATBIN_ELF ? "ELF" : kind == DRK_FATBIN_PTX ? "PTX" : "other";
}

static void entry_error(builder *b, const drk_fatbin_entry *e, const char *what)
{
    char sfx[2] = {e->arch_suffix, 0};
    note_error(b, "%s entry for arch %u%s at 0x%llx: %s", kind_name(e->kind), e->arch, sfx,
               (unsigned long long)(b->base + e->offset), what);
}

static code_ref entry_ref(const drk_fatbin_entry *e)
{
    return (code_ref){e->kind == DRK_FATBIN_ELF, e->arch, e->arch_suffix, e->major * 10 + e->minor};
}

/* `p` is a private buffer when `owned`: libelf reads it in place. */
static void read_cubin_bytes(builder *b, const uint8_t *p, size_t n, int owned, code_ref *c,
                             const arch_lists *lists, char *err, size_t errlen, int *ok)
{
    drk_cubin cub;
    memset(&cub, 0, sizeof cub);
    *ok = (owned ? drk_cubin_read_private((void *)p, n, &cub, err, errlen) : drk_cubin_read(p, n, &cub, err, errlen)) ==
          0;
    if (!*ok)
        return;
    if (!c->arch)
        c->arch = cub.sm;
    merge_kernels(b, c, cub.kernels, cub.nkernels, NULL, lists, 0);
    drk_cubin_free(&cub);
}

static char target_suffix(const char *target)
{
    size_t n = strnlen(target, 16);
    return n && (target[n - 1] == 'a' || target[n - 1] == 'f') ? target[n - 1] : 0;
}

/* With keep_ptx: a copy of one PTX entry's text in the image's list; its
 * number (index + 1), or 0 when not kept. Texts no kernel ends up using
 * are freed at finish. */
static uint32_t keep_text(builder *b, const char *p, size_t n)
{
    drk_image *img = b->img;
    if (!b->keep_ptx || img->nptx_texts == UINT32_MAX)
        return 0;
    char **t = realloc(img->ptx_texts, (img->nptx_texts + 1) * sizeof *t);
    if (t)
        img->ptx_texts = t;
    size_t *l = t ? realloc(img->ptx_lens, (img->nptx_texts + 1) * sizeof *l) : NULL;
    if (l)
        img->ptx_lens = l;
    char *copy = l ? malloc(n + 1) : NULL;
    if (!copy)
        return 0; /* not kept: the kernel cannot be rebuilt, nothing else lost */
    memcpy(copy, p, n);
    copy[n] = 0;
    img->ptx_texts[img->nptx_texts] = copy;
    img->ptx_lens[img->nptx_texts] = n;
    return ++img->nptx_texts;
}

static void read_ptx_bytes(builder *b, const char *p, size_t n, code_ref *c, const arch_lists *lists, char *err,
                           size_t errlen, int *ok)
{
    drk_ptx px;
    memset(&px, 0, sizeof px);
    *ok = drk_ptx_read(p, n, &px, err, errlen) == 0;
    if (!*ok)
        return;
    if (!c->arch) {
        c->arch = px.target;
        c->suffix = target_suffix(px.target_name);
    }
    if (!c->isa)
        c->isa = px.version_major * 10 + px.version_minor;
    /* Which parameters are pointers, and whether drk can evolve each
     * kernel: linear in the text, bounded (ptx_flow.h). */
    drk_ptx_flow **flows = drk_ptx_flows(p, n, &px);
    merge_kernels(b, c, px.kernels, px.nkernels, flows, lists, keep_text(b, p, n));
    drk_ptx_flows_free(flows, px.nkernels);
    drk_ptx_free(&px);
}

/* Decompresses and parses one ELF or PTX entry into the table. */
static void read_entry(builder *b, const drk_fatbin_entry *e, const arch_lists *lists)
{
    uint8_t *buf;
    size_t len;
    int rc = drk_fatbin_payload(e, &buf, &len);
    if (rc) {
        if (rc == DRK_FATBIN_NOMEM)
            b->nomem = 1;
        entry_error(b, e, drk_fatbin_strerror(rc));
        return;
    }
    char err[128] = "";
    int ok;
    code_ref c = entry_ref(e);
    if (e->kind == DRK_FATBIN_ELF)
        read_cubin_bytes(b, buf, len, 1, &c, lists, err, sizeof err, &ok);
    else
        read_ptx_bytes(b, (const char *)buf, len, &c, lists, err, sizeof err, &ok);
    free(buf);
    if (ok)
        b->img->stats.entries_read++;
    else
        entry_error(b, e, err[0] ? err : "unreadable");
}

static void count_entry(drk_image_stats *st, const drk_fatbin_entry *e)
{
    st->entries++;
    if (e->kind == DRK_FATBIN_ELF)
        st->sass_entries++;
    else if (e->kind == DRK_FATBIN_PTX)
        st->ptx_entries++;
    else
        st->other_entries++;
    if (e->flags & DRK_FATBIN_FLAG_LZ4)
        st->lz4++;
    else if (e->flags & DRK_FATBIN_FLAG_ZSTD)
        st->zstd++;
    st->stored_bytes += e->stored_size;
    st->decompressed_bytes += e->decompressed_size ? e->decompressed_size : e->stored_size;
}

/* The entry of `kind` that matters on b->sm: the SASS the driver loads (the
 * highest arch that runs there, exact SM first), or the newest PTX it can
 * JIT; -1 if none. */
static long best_entry(const builder *b, const drk_fatbin_entry *es, size_t n, unsigned kind)
{
    long best = -1;
    uint64_t best_rank = 0;
    for (size_t i = 0; i < n; i++) {
        if (es[i].kind != kind)
            continue;
        code_ref c = entry_ref(&es[i]);
        uint64_t r = entry_rank(b->sm, &c);
        if ((r >> 41) && r > best_rank) {
            best = (long)i;
            best_rank = r;
        }
    }
    return best;
}

static void read_container(builder *b, const drk_fatbin_entry *es, size_t n)
{
    b->img->stats.containers++;
    for (size_t i = 0; i < n; i++)
        count_entry(&b->img->stats, &es[i]);
    if (!b->sm) {
        for (size_t i = 0; i < n && !b->nomem; i++)
            if (es[i].kind == DRK_FATBIN_ELF || es[i].kind == DRK_FATBIN_PTX)
                read_entry(b, &es[i], NULL);
        return;
    }
    arch_lists lists;
    memset(&lists, 0, sizeof lists);
    for (size_t i = 0; i < n; i++) {
        code_ref c = entry_ref(&es[i]);
        if (es[i].kind == DRK_FATBIN_ELF && lists.nsass < DRK_IMAGE_MAX_ARCHS)
            lists.sass[lists.nsass++] = c;
        else if (es[i].kind == DRK_FATBIN_PTX && lists.nptx < DRK_IMAGE_MAX_ARCHS)
            lists.ptx[lists.nptx++] = c;
    }
    long s = best_entry(b, es, n, DRK_FATBIN_ELF), p = best_entry(b, es, n, DRK_FATBIN_PTX);
    if (s >= 0)
        read_entry(b, &es[s], &lists);
    /* The PTX too: it is what runs without SASS, and it says which
     * parameters are pointers. */
    if (p >= 0 && !b->nomem)
        read_entry(b, &es[p], &lists);
}

/* Reads the one container at [c, c+size), entry headers first. */
static void walk_container(builder *b, const uint8_t *c, size_t size)
{
    drk_fatbin_iter it;
    drk_fatbin_iter_init(&it, c, size);
    drk_fatbin_entry *es = NULL, e;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = drk_fatbin_next(&it, &e)) == 1) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            drk_fatbin_entry *v = realloc(es, ncap * sizeof *v);
            if (!v) {
                b->nomem = 1;
                break;
            }
            es = v;
            cap = ncap;
        }
        es[n++] = e;
    }
    if (rc < 0)
        note_error(b, "container at 0x%llx, entry at 0x%llx: %s", (unsigned long long)b->base,
                   (unsigned long long)(b->base + it.next), drk_fatbin_strerror(rc));
    if (!b->nomem)
        read_container(b, es, n);
    free(es);
}

/* Index of the first non-zero byte at or after `pos`, below `end` (zero
 * padding between containers); `end` if none or unreadable. */
static uint64_t skip_zeros(drk_src *s, uint64_t pos, uint64_t end)
{
    while (pos < end) {
        size_t len = end - pos < 4096 ? (size_t)(end - pos) : 4096;
        const uint8_t *p = drk_src_view(s, pos, len);
        if (!p)
            return end;
        size_t i = 0;
        while (i < len && p[i] == 0)
            i++;
        pos += i;
        if (i < len)
            break;
    }
    return pos;
}

/* Every container back to back in [off, off+len) of `s`, one at a time. */
static void walk_region(builder *b, drk_src *s, uint64_t off, uint64_t len)
{
    uint64_t pos = off, end = off + len;
    while (!b->nomem && (pos = skip_zeros(s, pos, end)) < end) {
        uint64_t room = end - pos;
        size_t avail = room > MAX_CONTAINER ? MAX_CONTAINER : (size_t)room, csize;
        const uint8_t *h = drk_src_view(s, pos, avail < DRK_FATBIN_HEADER_SIZE ? avail : DRK_FATBIN_HEADER_SIZE);
        int rc = h ? drk_fatbin_container_size(h, avail, &csize) : DRK_FATBIN_TRUNCATED;
        if (rc) {
            if (rc == DRK_FATBIN_TRUNCATED && room > MAX_CONTAINER)
                rc = DRK_FATBIN_TOO_LARGE;
            note_error(b, "container at 0x%llx: %s", (unsigned long long)pos, drk_fatbin_strerror(rc));
            return; /* the next container cannot be found */
        }
        const uint8_t *c = drk_src_view(s, pos, csize);
        if (!c) {
            note_error(b, "container at 0x%llx (%zu bytes) cannot be read", (unsigned long long)pos, csize);
            return;
        }
        b->base = pos;
        walk_container(b, c, csize);
        pos += csize;
    }
}

static void read_wrapper(builder *b, const void *w)
{
    /* -rdc programs list one prelinked container per translation unit. */
    int n = drk_fatbin_wrapper_containers(w, NULL, 0);
    const void **cs = n > 0 ? malloc((size_t)n * sizeof *cs) : NULL;
    if (n > 0 && !cs) {
        b->nomem = 1;
        return;
    }
    if (n > 0)
        n = drk_fatbin_wrapper_containers(w, cs, n);
    if (n < 0)
        note_error(b, "wrapper: %s", drk_fatbin_strerror(n));
    for (int i = 0; i < n && !b->nomem; i++) {
        size_t csize;
        /* The caller vouches for the wrapper; its containers are bounded
         * by their own headers. */
        int rc = drk_fatbin_container_size(cs[i], MAX_CONTAINER, &csize);
        if (rc) {
            note_error(b, "wrapper's container %d: %s", i, drk_fatbin_strerror(rc));
            continue;
        }
        drk_src s;
        drk_src_memory(&s, cs[i], csize);
        walk_region(b, &s, 0, csize);
    }
    free(cs);
}

static void read_host_elf(builder *b, drk_src *s)
{
    drk_elf_section secs[MAX_SECTIONS];
    char err[128] = "";
    int n = drk_hostelf_fatbin_sections(s, secs, MAX_SECTIONS, err, sizeof err);
    if (n < 0) {
        note_error(b, "host ELF: %s", err);
        return;
    }
    if (n > MAX_SECTIONS)
        n = MAX_SECTIONS;
    for (int i = 0; i < n && !b->nomem; i++)
        walk_region(b, s, secs[i].offset, secs[i].size);
}

static void read_single(builder *b, const void *data, size_t size, drk_image_format f)
{
    drk_image_stats *st = &b->img->stats;
    st->entries++;
    st->stored_bytes += size;
    st->decompressed_bytes += size;
    char err[128] = "";
    int ok;
    code_ref c = {f == DRK_IMAGE_CUBIN, 0, 0, 0};
    if (f == DRK_IMAGE_CUBIN) {
        st->sass_entries++;
        read_cubin_bytes(b, data, size, 0, &c, NULL, err, sizeof err, &ok);
    } else {
        st->ptx_entries++;
        read_ptx_bytes(b, data, strnlen(data, size), &c, NULL, err, sizeof err, &ok);
    }
    if (ok)
        st->entries_read++;
    else
        note_error(b, "%s: %s", drk_image_format_name(f), err[0] ? err : "unreadable");
}

/* ---- Finishing ---- */

/* PTX declares which parameters are pointers; a cubin may not say. */
static void copy_ptx_kinds(kacc *a)
{
    drk_kernel_info *ki = &a->k.info;
    if (a->k.source != DRK_INFO_SASS || !a->ptx_rank || a->ptx_nparams != ki->nparams)
        return;
    for (uint32_t i = 0; i < ki->nparams; i++)
        if (a->ptx_params[i].size != ki->params[i].size)
            return;
    for (uint32_t i = 0; i < ki->nparams; i++)
        if (a->ptx_params[i].kind != DRK_PARAM_KIND_UNKNOWN)
            ki->params[i].kind = a->ptx_params[i].kind;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(((const drk_image_kernel *)x)->info.name, ((const drk_image_kernel *)y)->info.name);
}

/* PTX entries whose kernels all took their flow from a better entry. */
static void drop_unused_texts(drk_image *img)
{
    for (uint32_t t = 0; t < img->nptx_texts; t++) {
        int used = 0;
        for (size_t i = 0; i < img->nkernels && !used; i++)
            used = img->kernels[i].ptx_text == t + 1;
        if (!used) {
            free(img->ptx_texts[t]);
            img->ptx_texts[t] = NULL;
        }
    }
}

static int finish(builder *b)
{
    free(b->slots);
    drk_image *img = b->img;
    img->kernels = b->n ? malloc(b->n * sizeof *img->kernels) : NULL;
    if (b->n && !img->kernels)
        b->nomem = 1;
    for (size_t i = 0; i < b->n; i++) {
        copy_ptx_kinds(&b->v[i]);
        free(b->v[i].ptx_params);
        b->v[i].k.flow = b->v[i].ptx_flow;
        b->v[i].k.ptx_text = b->v[i].ptx_text;
        if (img->kernels) {
            img->kernels[i] = b->v[i].k;
        } else {
            drk_kernel_info_clear(&b->v[i].k.info);
            free(b->v[i].k.flow);
        }
    }
    free(b->v);
    if (img->kernels) {
        img->nkernels = b->n;
        qsort(img->kernels, img->nkernels, sizeof *img->kernels, by_name);
    }
    drop_unused_texts(img);
    return b->nomem ? -1 : 0;
}

/* The result: -1 when nothing could be read (or memory ran out). */
static int conclude(builder *b, char *err, size_t errlen)
{
    drk_image *img = b->img;
    int rc = finish(b);
    if (rc == 0 && img->stats.errors && !img->stats.entries_read && !img->nkernels)
        rc = -1;
    if (rc) {
        char msg[sizeof img->first_error];
        snprintf(msg, sizeof msg, "%s", b->nomem ? "out of memory" : img->first_error);
        drk_image_free(img);
        return drk_fail(err, errlen, "%s", msg);
    }
    if (err && errlen)
        err[0] = 0;
    return 0;
}

static void start(builder *b, drk_image *out, const drk_image_options *opt, drk_image_format f)
{
    memset(out, 0, sizeof *out);
    memset(b, 0, sizeof *b);
    out->format = f;
    b->img = out;
    b->sm = opt ? opt->sm : 0;
    b->keep_ptx = opt ? opt->keep_ptx : 0;
}

int drk_image_read(const void *data, size_t size, const drk_image_options *opt, drk_image *out, char *err,
                   size_t errlen)
{
    builder b;
    drk_image_format f = drk_image_classify(data, size);
    start(&b, out, opt, f);
    drk_src s;
    drk_src_memory(&s, data, size);
    switch (f) {
    case DRK_IMAGE_WRAPPER: read_wrapper(&b, data); break;
    case DRK_IMAGE_FATBIN: walk_region(&b, &s, 0, size); break;
    case DRK_IMAGE_CUBIN:
    case DRK_IMAGE_PTX: read_single(&b, data, size, f); break;
    case DRK_IMAGE_HOST_ELF: read_host_elf(&b, &s); break;
    default: note_error(&b, "not a fatbin, cubin, PTX or ELF image"); break;
    }
    return conclude(&b, err, errlen);
}

/* A cubin or PTX file, read whole (with a NUL after it, for PTX). */
static void read_whole(builder *b, drk_src *s, drk_image_format f)
{
    if (s->size > MAX_WHOLE_FILE) {
        note_error(b, "%s file of %llu bytes is beyond drk's limit", drk_image_format_name(f),
                   (unsigned long long)s->size);
        return;
    }
    uint8_t *buf = malloc((size_t)s->size + 1);
    if (!buf) {
        b->nomem = 1;
        return;
    }
    if (drk_src_read(s, 0, buf, (size_t)s->size) == 0) {
        buf[s->size] = 0;
        read_single(b, buf, (size_t)s->size, f);
    } else {
        note_error(b, "cannot read the file: %s", strerror(errno));
    }
    free(buf);
}

int drk_image_read_file(const char *path, const drk_image_options *opt, drk_image *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return drk_fail(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    uint8_t head[64];
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return drk_fail(err, errlen, "%s: not a regular file", path);
    }
    drk_src s;
    drk_src_file(&s, fd, (uint64_t)st.st_size);
    size_t hn = st.st_size < (off_t)sizeof head ? (size_t)st.st_size : sizeof head;
    drk_image_format f = drk_src_read(&s, 0, head, hn) ? DRK_IMAGE_UNKNOWN : drk_image_classify(head, hn);
    /* PTX may begin with a long comment: look further before giving up. */
    if (f == DRK_IMAGE_UNKNOWN && hn == sizeof head) {
        size_t n = st.st_size < 4096 ? (size_t)st.st_size : 4096;
        const uint8_t *p = drk_src_view(&s, 0, n);
        if (p && drk_is_ptx(p, n))
            f = DRK_IMAGE_PTX;
    }
    builder b;
    start(&b, out, opt, f);
    switch (f) {
    case DRK_IMAGE_FATBIN: walk_region(&b, &s, 0, s.size); break;
    case DRK_IMAGE_HOST_ELF: read_host_elf(&b, &s); break;
    case DRK_IMAGE_CUBIN:
    case DRK_IMAGE_PTX: read_whole(&b, &s, f); break;
    default: note_error(&b, "%s: not a fatbin, cubin, PTX or ELF file", path); break;
    }
    drk_src_close(&s);
    close(fd);
    return conclude(&b, err, errlen);
}

int drk_image_extent(const void *data, size_t avail, size_t *size)
{
    switch (drk_image_classify(data, avail)) {
    case DRK_IMAGE_WRAPPER: *size = DRK_FATBIN_WRAPPER_SIZE; return 0;
    case DRK_IMAGE_FATBIN: return drk_fatbin_container_size(data, avail, size) ? -1 : 0;
    case DRK_IMAGE_CUBIN:
    case DRK_IMAGE_HOST_ELF: return drk_elf_extent(data, avail, size);
    case DRK_IMAGE_PTX: *size = strnlen(data, avail); return 0;
    default: return -1;
    }
}

void drk_image_free(drk_image *img)
{
    for (size_t i = 0; i < img->nkernels; i++) {
        drk_kernel_info_clear(&img->kernels[i].info);
        free(img->kernels[i].flow);
    }
    free(img->kernels);
    img->kernels = NULL;
    img->nkernels = 0;
    for (uint32_t t = 0; t < img->nptx_texts; t++)
        free(img->ptx_texts[t]);
    free(img->ptx_texts);
    free(img->ptx_lens);
    img->ptx_texts = NULL;
    img->ptx_lens = NULL;
    img->nptx_texts = 0;
}

const drk_image_kernel *drk_image_find(const drk_image *img, const char *name)
{
    size_t lo = 0, hi = img->nkernels;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(img->kernels[mid].info.name, name);
        if (c == 0)
            return &img->kernels[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
