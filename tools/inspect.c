/* `drk inspect FILE...`: the kernels in device images (fatbins, cubins, PTX)
 * and in the programs, libraries and objects that carry them, as the image
 * reader (evolve/image/image.h) sees them. A table per file, or JSON. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "evolve/image/image.h"
#include "tools/commands.h"
#include "tools/table.h"

/* Names wider than this are cut in the table (cuBLAS's run to hundreds of
 * characters); --json has them whole. So are the parameter classes. */
#define NAME_COLUMN 96
#define WORDS_COLUMN 24
#define INSPECT_SCHEMA_VERSION 1

void usage_inspect(FILE *f)
{
    fputs("usage: drk inspect [--json] [--demangle] [--arch sm_NN] FILE...\n"
          "\n"
          "Lists the kernels in each FILE: an executable, shared library or object file with device\n"
          "code, a fatbin, a cubin or PTX text. One row per kernel: parameters (count and bytes),\n"
          "registers, static shared bytes, local (stack) bytes per thread, the thread limit\n"
          "(<=N from __launch_bounds__ / .maxntid, =XxYxZ from .reqntid), the entry the row's\n"
          "numbers come from, the SASS and PTX archs that carry the kernel, then from the PTX's\n"
          "data flow each parameter word's class (P pointer, v value, - unused; [..] the words of\n"
          "a by-value struct) and whether drk can evolve the kernel (or why not); then a summary\n"
          "line per file. '-' is unknown (PTX has no registers or shared memory; SASS no flow).\n"
          "\n"
          "  --arch sm_NN  take each kernel's numbers from the entry a GPU of that SM would use\n"
          "                (the best SASS of its family, else the newest PTX it can JIT), and read\n"
          "                only those entries; default: every entry, numbers from the newest SASS\n"
          "  --demangle    show C++ names demangled (JSON: also as \"demangled\")\n"
          "  --json        print JSON (schema \"drk-inspect\", see docs/inspect.md)\n"
          "\n"
          "Exit status 1 when a file cannot be read (the other files are still listed).\n",
          f);
}

#define usage_error(...) usage_fail("inspect", "usage: drk inspect [--json] [--demangle] [--arch sm_NN] FILE...\n", __VA_ARGS__)

/* "sm_90", "sm_90a", "compute_90" or "90" -> 90; 0 if not an SM. */
static unsigned parse_arch(const char *s)
{
    if (strncmp(s, "sm_", 3) == 0)
        s += 3;
    else if (strncmp(s, "compute_", 8) == 0)
        s += 8;
    if (*s < '1' || *s > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || v > 1000 || (*end && strcmp(end, "a") != 0 && strcmp(end, "f") != 0))
        return 0;
    return (unsigned)v;
}

/* ---------------------------------------------------------------- names */

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

/* libstdc++'s demangler, opened when --demangle is first used: the drk
 * command is C and needs no C++ runtime otherwise. NULL if unavailable. */
static cxa_demangle_fn demangler(void)
{
    static int tried;
    static cxa_demangle_fn fn;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h)
            *(void **)&fn = dlsym(h, "__cxa_demangle");
        if (!fn)
            fputs("drk inspect: warning: libstdc++.so.6 (__cxa_demangle) is not available; names stay mangled\n",
                  stderr);
    }
    return fn;
}

/* The demangled name (malloc'd), or NULL when `name` is not a C++ name. */
static char *demangle(const char *name)
{
    if (strncmp(name, "_Z", 2) != 0)
        return NULL;
    cxa_demangle_fn fn = demangler();
    if (!fn)
        return NULL;
    int status = -1;
    char *d = fn(name, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}

/* ------------------------------------------------------------ reading */

/* Reads `path` into `img`. Host ELF files go to drk_image_read_file (it maps
 * and reads only their device sections); the rest is mapped read-only and
 * handed to drk_image_read, so memory stays bounded either way. */
static int read_image(const char *path, const drk_image_options *opt, drk_image *img, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "is a directory");
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        snprintf(err, errlen, st.st_size == 0 ? "empty file" : "not a regular file");
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "cannot map: %s", strerror(errno));
        return -1;
    }
    drk_image_format f = drk_image_classify(map, size);
    int rc;
    if (f == DRK_IMAGE_UNKNOWN) {
        snprintf(err, errlen, "unknown format (not a fatbin, cubin, PTX, or ELF file with device code)");
        rc = -1;
    } else if (f == DRK_IMAGE_WRAPPER) {
        /* Its data pointer points into the program that registered it; in a
         * file it points nowhere drk may read. */
        snprintf(err, errlen, "a fatbin wrapper (__fatBinC_Wrapper_t) holds pointers into a running program; "
                              "it cannot be read from a file");
        rc = -1;
    } else if (f == DRK_IMAGE_HOST_ELF) {
        munmap(map, size);
        return drk_image_read_file(path, opt, img, err, errlen);
    } else {
        rc = drk_image_read(map, size, opt, img, err, errlen);
    }
    munmap(map, size);
    return rc;
}

/* ------------------------------------------------------------- tables */

static const char *u32s(uint32_t v, char *buf, size_t n)
{
    if (v == DRK_UNKNOWN_U32)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%" PRIu32, v);
    return buf;
}

/* "80,90a,100f": suffixes mark arch-specific (a) and family (f) targets. */
static void arch_list(const uint16_t *a, const char *suffix, unsigned n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u%.1s", i ? "," : "", a[i], &suffix[i]);
    if (!n)
        snprintf(buf, len, "-");
}

static void threads_text(const drk_kernel_info *k, char *buf, size_t n)
{
    if (k->reqntid[0])
        snprintf(buf, n, "=%" PRIu32 "x%" PRIu32 "x%" PRIu32, k->reqntid[0], k->reqntid[1] ? k->reqntid[1] : 1,
                 k->reqntid[2] ? k->reqntid[2] : 1);
    else if (k->max_threads)
        snprintf(buf, n, "<=%" PRIu32, k->max_threads);
    else
        snprintf(buf, n, "-");
}

/* "PPPv", "vvPP", "[PPv]": a letter per word, a by-value struct's words in
 * brackets; "-" without a flow. */
static void words_text(const drk_ptx_flow *f, char *buf, size_t n)
{
    char s[4 * WORDS_COLUMN + 8];
    size_t at = 0;
    if (!f || (!f->nwords && (f->flags & DRK_FLOW_UNPARSED))) {
        snprintf(buf, n, "-");
        return;
    }
    for (uint32_t i = 0; i < f->nwords && at + 4 < sizeof s; i++) {
        const drk_flow_word *w = &f->words[i];
        int first = i == 0 || f->words[i - 1].param != w->param;
        int last = i + 1 == f->nwords || f->words[i + 1].param != w->param;
        if (first && !last)
            s[at++] = '[';
        s[at++] = w->cls == DRK_FLOW_POINTER ? 'P' : w->cls == DRK_FLOW_VALUE ? 'v' : '-';
        if (last && !first)
            s[at++] = ']';
    }
    s[at] = 0;
    text_fit(s, WORDS_COLUMN, buf, n);
}

static void evolve_text(const drk_ptx_flow *f, char *buf, size_t n)
{
    if (!f)
        snprintf(buf, n, "-");
    else if (f->evolvable)
        snprintf(buf, n, "yes");
    else
        snprintf(buf, n, "no: %s", f->reason);
}

static void print_table(const char *path, const drk_image *img, int want_demangle)
{
    printf("%s: %s\n", path, drk_image_format_name(img->format));
    if (img->nkernels) {
        table tb;
        table_init(&tb, "lrrrrrrllll");
        table_row(&tb, (const char *const[]){"kernel", "params", "regs", "shared", "local", "threads", "from",
                                             "SASS", "PTX", "words", "evolve"});
        for (size_t i = 0; i < img->nkernels; i++) {
            const drk_image_kernel *k = &img->kernels[i];
            const drk_kernel_info *ki = &k->info;
            char *d = want_demangle ? demangle(ki->name) : NULL;
            char name[4 * NAME_COLUMN + 1], params[48], regs[16], shared[16], local[16], threads[48], from[24],
                sass[DRK_IMAGE_MAX_ARCHS * 6 + 1], ptx[DRK_IMAGE_MAX_ARCHS * 6 + 1], words[4 * WORDS_COLUMN + 1],
                evolve[sizeof k->flow->reason + 8];
            text_fit(d ? d : ki->name ? ki->name : "?", NAME_COLUMN, name, sizeof name);
            free(d);
            snprintf(params, sizeof params, "%" PRIu32 " (%" PRIu32 " B)", ki->nparams, ki->params_size);
            threads_text(ki, threads, sizeof threads);
            snprintf(from, sizeof from, "%s_%u%.1s", k->source == DRK_INFO_SASS ? "sm" : "compute", k->source_arch,
                     &k->source_suffix);
            arch_list(k->sass, k->sass_suffix, k->nsass, sass, sizeof sass);
            arch_list(k->ptx, k->ptx_suffix, k->nptx, ptx, sizeof ptx);
            words_text(k->flow, words, sizeof words);
            evolve_text(k->flow, evolve, sizeof evolve);
            table_row(&tb, (const char *const[]){name, params, u32s(ki->regs, regs, sizeof regs),
                                                 u32s(ki->shared_bytes, shared, sizeof shared),
                                                 u32s(ki->local_bytes, local, sizeof local), threads, from, sass,
                                                 ptx, words, evolve});
        }
        table_print(&tb, stdout, "  ");
        if (tb.failed)
            fputs("  (out of memory: rows left out)\n", stdout);
        table_free(&tb);
    }
    const drk_image_stats *s = &img->stats;
    /* Label first, so one line reads the same whatever the counts. */
    printf("%s: kernels %zu, containers %u, entries %u (SASS %u, PTX %u, other %u), LZ4 %u, ZSTD %u, errors %u\n",
           path, img->nkernels, s->containers, s->entries, s->sass_entries, s->ptx_entries, s->other_entries, s->lz4,
           s->zstd, s->errors);
    if (s->errors && img->first_error[0])
        printf("%s: first error: %s\n", path, img->first_error);
}

/* --------------------------------------------------------------- JSON */

/* Compact, with a file and a kernel per line; written out a kernel at a
 * time, so a large library's document is never held whole. */
static void json_u32(drk_json *j, const char *key, uint32_t v)
{
    if (v == DRK_UNKNOWN_U32)
        drk_json_null(j, key);
    else
        drk_json_u64(j, key, v);
}

static const char *kind_name(unsigned kind)
{
    return kind == DRK_PARAM_POINTER ? "pointer" : kind == DRK_PARAM_SCALAR ? "scalar" : "unknown";
}

/* {"evolvable": b, "reason": s|null, "flags": [..], "words": [{param, offset, size, class}, ..]} */
static void json_flow(drk_json *j, const drk_ptx_flow *f)
{
    if (!f) {
        drk_json_null(j, "flow");
        return;
    }
    drk_json_open_inline(j, "flow", '{');
    drk_json_bool(j, "evolvable", f->evolvable);
    drk_json_str(j, "reason", f->evolvable ? NULL : f->reason);
    drk_json_open_inline(j, "flags", '[');
    for (unsigned b = 0; b < DRK_FLOW_NFLAGS; b++)
        if (f->flags & (1u << b))
            drk_json_str(j, NULL, drk_flow_flag_name(1u << b));
    drk_json_close(j, ']');
    drk_json_open_inline(j, "words", '[');
    for (uint32_t i = 0; i < f->nwords; i++) {
        const drk_flow_word *w = &f->words[i];
        drk_json_open_inline(j, NULL, '{');
        drk_json_u64(j, "param", w->param);
        drk_json_u64(j, "offset", w->offset);
        drk_json_u64(j, "size", w->size);
        drk_json_str(j, "class", drk_flow_class_name(w->cls));
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_close(j, '}');
}

static void json_kernel(drk_json *j, const drk_image_kernel *k, int want_demangle)
{
    const drk_kernel_info *ki = &k->info;
    char text[48];
    drk_json_open_inline(j, NULL, '{');
    drk_json_str(j, "name", ki->name);
    char *d = want_demangle && ki->name ? demangle(ki->name) : NULL;
    drk_json_str(j, "demangled", d);
    free(d);
    drk_json_str(j, "source", k->source == DRK_INFO_SASS ? "sass" : "ptx");
    drk_json_u64(j, "source_arch", k->source_arch);
    drk_json_open_inline(j, "sass", '[');
    for (unsigned i = 0; i < k->nsass; i++)
        drk_json_u64(j, NULL, k->sass[i]);
    drk_json_close(j, ']');
    drk_json_open_inline(j, "sass_targets", '[');
    for (unsigned i = 0; i < k->nsass; i++) {
        snprintf(text, sizeof text, "sm_%u%.1s", k->sass[i], &k->sass_suffix[i]);
        drk_json_str(j, NULL, text);
    }
    drk_json_close(j, ']');
    drk_json_open_inline(j, "ptx", '[');
    for (unsigned i = 0; i < k->nptx; i++) {
        drk_json_open_inline(j, NULL, '{');
        drk_json_u64(j, "arch", k->ptx[i]);
        snprintf(text, sizeof text, "compute_%u%.1s", k->ptx[i], &k->ptx_suffix[i]);
        drk_json_str(j, "target", text);
        snprintf(text, sizeof text, "%u.%u", k->ptx_isa[i] / 10, k->ptx_isa[i] % 10);
        drk_json_str(j, "isa", text);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_u64(j, "params_size", ki->params_size);
    drk_json_open_inline(j, "params", '[');
    for (uint32_t i = 0; i < ki->nparams; i++) {
        const drk_param *p = &ki->params[i];
        drk_json_open_inline(j, NULL, '{');
        drk_json_u64(j, "offset", p->offset);
        drk_json_u64(j, "size", p->size);
        drk_json_str(j, "kind", kind_name(p->kind));
        /* align_log2 0 is "unknown" in kernel.h, which 1-byte alignment
         * cannot be told from: null for both. */
        if (p->align_log2)
            drk_json_u64(j, "align", 1u << (p->align_log2 & 31));
        else
            drk_json_null(j, "align");
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    json_u32(j, "registers", ki->regs);
    json_u32(j, "shared_bytes", ki->shared_bytes);
    json_u32(j, "local_bytes", ki->local_bytes);
    json_u32(j, "const_bytes", ki->const_bytes);
    if (ki->max_threads)
        drk_json_u64(j, "max_threads", ki->max_threads);
    else
        drk_json_null(j, "max_threads");
    if (ki->reqntid[0]) {
        drk_json_open_inline(j, "reqntid", '[');
        for (int i = 0; i < 3; i++)
            drk_json_u64(j, NULL, ki->reqntid[i]);
        drk_json_close(j, ']');
    } else {
        drk_json_null(j, "reqntid");
    }
    json_flow(j, k->flow);
    drk_json_close(j, '}');
}

static void json_file(drk_json *j, const char *path, const drk_image *img, const char *error, int want_demangle)
{
    drk_json_open_inline(j, NULL, '{');
    drk_json_str(j, "path", path);
    drk_json_str(j, "format", img ? drk_image_format_name(img->format) : NULL);
    drk_json_str(j, "error", error);
    if (!img) {
        drk_json_null(j, "stats");
    } else {
        const drk_image_stats *s = &img->stats;
        drk_json_open_inline(j, "stats", '{');
        drk_json_u64(j, "kernels", img->nkernels);
        drk_json_u64(j, "containers", s->containers);
        drk_json_u64(j, "entries", s->entries);
        drk_json_u64(j, "sass_entries", s->sass_entries);
        drk_json_u64(j, "ptx_entries", s->ptx_entries);
        drk_json_u64(j, "other_entries", s->other_entries);
        drk_json_u64(j, "lz4", s->lz4);
        drk_json_u64(j, "zstd", s->zstd);
        drk_json_u64(j, "entries_read", s->entries_read);
        drk_json_u64(j, "errors", s->errors);
        drk_json_u64(j, "stored_bytes", s->stored_bytes);
        drk_json_u64(j, "decompressed_bytes", s->decompressed_bytes);
        drk_json_str(j, "first_error", img->first_error[0] ? img->first_error : NULL);
        drk_json_close(j, '}');
    }
    drk_json_open(j, "kernels", '[');
    for (size_t i = 0; img && i < img->nkernels; i++) {
        json_kernel(j, &img->kernels[i], want_demangle);
        drk_json_flush(j, stdout);
    }
    drk_json_close(j, ']');
    drk_json_close(j, '}');
    drk_json_flush(j, stdout);
}

/* -------------------------------------------------------------- command */

int cmd_inspect(int argc, char **argv)
{
    int json = 0, want_demangle = 0, i = 1;
    drk_image_options opt = {0};
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_inspect(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--demangle") == 0) {
            want_demangle = 1;
        } else if (strcmp(a, "--arch") == 0 || strncmp(a, "--arch=", 7) == 0) {
            const char *v = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return usage_error("--arch needs an SM, e.g. --arch sm_90");
            opt.sm = parse_arch(v);
            if (!opt.sm)
                return usage_error("--arch %s: not an SM (expected sm_NN, e.g. sm_90)", v);
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (i >= argc)
        return usage_error("no FILE given");

    int status = 0;
    drk_json j = {.compact = 1};
    if (json) {
        drk_json_open_inline(&j, NULL, '{');
        drk_json_str(&j, "schema", "drk-inspect");
        drk_json_u64(&j, "version", INSPECT_SCHEMA_VERSION);
        drk_json_u64(&j, "sm", opt.sm);
        drk_json_open(&j, "files", '[');
    }
    for (int n = 0; i < argc; i++, n++) {
        const char *path = argv[i];
        drk_image img;
        memset(&img, 0, sizeof img);
        char err[512] = "";
        if (read_image(path, &opt, &img, err, sizeof err) != 0) {
            if (!err[0])
                snprintf(err, sizeof err, "cannot be read");
            fprintf(stderr, "drk inspect: %s: %s\n", path, err);
            status = 1;
            if (json)
                json_file(&j, path, NULL, err, want_demangle);
            continue;
        }
        if (json) {
            json_file(&j, path, &img, NULL, want_demangle);
        } else {
            if (n)
                putchar('\n');
            print_table(path, &img, want_demangle);
        }
        drk_image_free(&img);
    }
    if (json) {
        drk_json_close(&j, ']');
        drk_json_close(&j, '}');
        /* Write errors show in ferror(stdout), which drk checks before it exits. */
        if (drk_json_flush(&j, stdout) != 0 && j.failed) {
            fputs("drk inspect: out of memory: the JSON is incomplete\n", stderr);
            status = 1;
        }
        drk_json_free(&j);
    }
    return status;
}
