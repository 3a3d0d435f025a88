#define _GNU_SOURCE
#include "evolve/loaded.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/sha256.h"
#include "evolve/image/fatbin.h"
#include "evolve/image/hostelf.h"

typedef struct loaded {
    uintptr_t owner;               /* 0 once unloaded (a deferred image stays) */
    char label[96];
    drk_image img;
    const drk_image_facts **facts; /* per kernel of img, made on first ask */
    const void *deferred;          /* not read yet: the image, in a loaded object */
    size_t deferred_size;
    const drk_ptx_text **ptx;      /* per kernel of img: its kept PTX, or NULL (NULL: none kept) */
    drk_images_again again;        /* what loading it again takes; again.image counts against the cap */
    int again_pending;             /* deferred: its image may be kept once read */
} loaded;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *table;
static size_t count, cap;
static drk_images_stats stats;
static atomic_uint sm;

void drk_images_set_sm(unsigned s) { atomic_store(&sm, s); }
unsigned drk_images_sm(void) { return atomic_load(&sm); }

static void drop_image(loaded *l);

static void forget(loaded *l)
{
    drop_image(l);
    drk_image_free(&l->img);
    free(l->facts);
    free(l->ptx);
    *l = table[--count];
}

/* Large images inside a loaded object (cudart's fatbins in libtorch_cuda.so:
 * tens of MB to decompress for one library load) are not read when loaded:
 * the driver's answers name them and lay out their parameters, and only a
 * report needs more, at exit. Smaller images, and those in memory the
 * program may free, are read at once. */
#define DEFER_BYTES (1u << 20)

/* Bytes drk_image_read would decompress for SM `sm`: the entries that run
 * there. Trusts the headers, which the driver has just accepted. */
static uint64_t read_cost(const void *data, size_t size, unsigned sm)
{
    drk_image_format f = drk_image_classify(data, size);
    const void *containers[16];
    int n = 1;
    if (f == DRK_IMAGE_WRAPPER) {
        n = drk_fatbin_wrapper_containers(data, containers, 16);
        if (n < 0 || n > 16)
            return n < 0 ? 0 : UINT64_MAX;
    } else if (f == DRK_IMAGE_FATBIN) {
        containers[0] = data;
    } else {
        return size;
    }
    uint64_t cost = 0;
    for (int i = 0; i < n; i++) {
        size_t csize;
        if (drk_fatbin_container_size(containers[i], SIZE_MAX, &csize) != 0)
            continue;
        drk_fatbin_iter it;
        drk_fatbin_entry e;
        drk_fatbin_iter_init(&it, containers[i], csize);
        while (drk_fatbin_next(&it, &e) == 1)
            if ((e.kind == DRK_FATBIN_ELF && drk_image_sass_runs_on(e.arch, e.arch_suffix, sm)) ||
                (e.kind == DRK_FATBIN_PTX && drk_image_ptx_runs_on(e.arch, e.arch_suffix, sm)))
                cost += e.compressed_size ? e.decompressed_size : e.stored_size;
    }
    return cost;
}

static int in_loaded_object(const void *p)
{
    Dl_info info;
    return dladdr(p, &info) != 0 && info.dli_fname != NULL;
}

static int grow(void)
{
    size_t ncap = cap ? cap * 2 : 16;
    loaded *t = realloc(table, sizeof *t * ncap);
    if (!t)
        return -1;
    table = t, cap = ncap;
    return 0;
}

static loaded *find_owner(uintptr_t owner)
{
    for (size_t i = 0; i < count; i++)
        if (table[i].owner == owner)
            return &table[i];
    return NULL;
}

/* Kernels of `img` a device of SM `sm` gets from PTX only: JIT'd by the driver. */
static unsigned jit_kernels(const drk_image *img, unsigned sm)
{
    unsigned n = 0;
    for (size_t i = 0; sm && i < img->nkernels; i++)
        n += !drk_image_kernel_sass_for(&img->kernels[i], sm) && drk_image_kernel_ptx_for(&img->kernels[i], sm);
    return n;
}

static void read_deferred(loaded *l);

/* ---- Kept PTX ---- */

static size_t ptx_cap;   /* 0: keep none */
static drk_ptx_text **kept;
static size_t nkept, kept_cap;
static int cap_said;

void drk_images_keep_ptx(size_t cap)
{
    pthread_mutex_lock(&lock);
    ptx_cap = cap;
    pthread_mutex_unlock(&lock);
}

static size_t keep_cap(void)
{
    pthread_mutex_lock(&lock);
    size_t c = ptx_cap;
    pthread_mutex_unlock(&lock);
    return c;
}

/* Whether `len` more bytes fit the cap, beside the texts and images kept.
 * Caller holds the lock. */
static int fits(size_t len)
{
    return len <= ptx_cap && stats.ptx_kept_bytes + stats.images_kept_bytes + len <= ptx_cap;
}

/* Whether drk may rebuild `k` from its PTX on a device of SM `sm`. */
static int wants_ptx(const drk_image_kernel *k, unsigned sm)
{
    return k->ptx_text && k->flow && k->flow->evolvable && (!sm || drk_image_kernel_ptx_for(k, sm));
}

/* Digests of the texts of `img` that kernels want, made outside the lock
 * (a text may be megabytes); all zero for texts not wanted. NULL if none. */
static unsigned char (*digest_texts(const drk_image *img, unsigned sm))[DRK_SHA256_BYTES]
{
    unsigned char(*d)[DRK_SHA256_BYTES] = NULL;
    for (size_t i = 0; i < img->nkernels; i++) {
        const drk_image_kernel *k = &img->kernels[i];
        uint32_t t = k->ptx_text;
        if (!wants_ptx(k, sm) || !img->ptx_texts[t - 1])
            continue;
        if (!d && !(d = calloc(img->nptx_texts, sizeof *d)))
            return NULL;
        static const unsigned char zero[DRK_SHA256_BYTES];
        if (memcmp(d[t - 1], zero, sizeof zero) == 0)
            drk_sha256(img->ptx_texts[t - 1], img->ptx_lens[t - 1], d[t - 1]);
    }
    return d;
}

/* The kept text with this digest, or one made from slot `t` of `img` (the
 * text moves out of the image); NULL past the cap or out of memory.
 * Caller holds the lock. */
static const drk_ptx_text *keep_text(drk_image *img, uint32_t t, const unsigned char *digest, const char *how)
{
    for (size_t i = 0; i < nkept; i++)
        if (memcmp(kept[i]->sha256, digest, DRK_SHA256_BYTES) == 0)
            return kept[i];
    if (!img->ptx_texts[t])
        return NULL; /* over the cap for an earlier kernel of it */
    size_t len = img->ptx_lens[t];
    if (!fits(len)) {
        stats.ptx_over_cap++;
        free(img->ptx_texts[t]);
        img->ptx_texts[t] = NULL;
        if (!cap_said) {
            cap_said = 1;
            drk_log(DRK_LOG_DEBUG, "%s: PTX of %zu bytes not kept, nor any later one past the cap of %zu bytes", how,
                    len, ptx_cap);
        }
        return NULL;
    }
    if (nkept == kept_cap) {
        size_t c = kept_cap ? kept_cap * 2 : 16;
        drk_ptx_text **k = realloc(kept, c * sizeof *k);
        if (!k)
            return NULL;
        kept = k, kept_cap = c;
    }
    drk_ptx_text *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    p->text = img->ptx_texts[t];
    p->len = len;
    memcpy(p->sha256, digest, DRK_SHA256_BYTES);
    img->ptx_texts[t] = NULL;
    kept[nkept++] = p;
    stats.ptx_kept++;
    stats.ptx_kept_bytes += len;
    return p;
}

/* Keeps the texts the kernels of `l` want (digests from digest_texts), and
 * frees the image's other texts: only kept ones outlive the load. Caller
 * holds the lock. */
static void keep_texts(loaded *l, unsigned char (*digests)[DRK_SHA256_BYTES], unsigned sm, const char *how)
{
    drk_image *img = &l->img;
    if (digests && ptx_cap)
        l->ptx = calloc(img->nkernels + 1, sizeof *l->ptx);
    for (size_t i = 0; l->ptx && i < img->nkernels; i++) {
        const drk_image_kernel *k = &img->kernels[i];
        if (!wants_ptx(k, sm))
            continue;
        uint32_t t = k->ptx_text - 1;
        /* A text moved out for an earlier kernel is found by its digest. */
        l->ptx[i] = keep_text(img, t, digests[t], how);
    }
    for (uint32_t t = 0; t < img->nptx_texts; t++) {
        free(img->ptx_texts[t]);
        img->ptx_texts[t] = NULL;
    }
}

const drk_ptx_text *drk_images_ptx(uintptr_t owner, const char *name)
{
    if (!owner || !name)
        return NULL;
    pthread_mutex_lock(&lock);
    loaded *l = find_owner(owner);
    const drk_ptx_text *p = NULL;
    if (l && l->deferred)
        read_deferred(l);
    if (l && l->ptx && !l->deferred) {
        const drk_image_kernel *k = drk_image_find(&l->img, name);
        p = k ? l->ptx[k - l->img.kernels] : NULL;
    }
    pthread_mutex_unlock(&lock);
    return p;
}

/* ---- Images kept for loading again (drk_images_again_of) ---- */

#define WHY_OFF "its image was not kept: PTX keeping is off (drk_images_keep_ptx(0))"
#define WHY_NO_PTX "its image was not kept: none of its kernels had PTX kept"
static int image_cap_said;

/* Whether JIT option `o` shapes the code a load makes (a scalar, repeated
 * as passed): 1; one that only reports (logs, wall time): 0; any other: -1,
 * drk does not repeat it. */
static int option_kind(CUjit_option o)
{
    switch (o) {
    case CU_JIT_MAX_REGISTERS:
    case CU_JIT_THREADS_PER_BLOCK:
    case CU_JIT_OPTIMIZATION_LEVEL:
    case CU_JIT_TARGET_FROM_CUCONTEXT:
    case CU_JIT_TARGET:
    case CU_JIT_FALLBACK_STRATEGY:
    case CU_JIT_GENERATE_DEBUG_INFO:
    case CU_JIT_GENERATE_LINE_INFO:
    case CU_JIT_CACHE_MODE:
    case CU_JIT_POSITION_INDEPENDENT_CODE:
    case CU_JIT_MIN_CTA_PER_SM:
    case CU_JIT_MAX_THREADS_PER_BLOCK:
    case CU_JIT_OVERRIDE_DIRECTIVE_VALUES: return 1;
    case CU_JIT_WALL_TIME:
    case CU_JIT_INFO_LOG_BUFFER:
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
    case CU_JIT_ERROR_LOG_BUFFER:
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
    case CU_JIT_LOG_VERBOSE: return 0;
    default: return -1;
    }
}

/* The code-shaping options of load `ld` into `a`; -1 with a->why for one
 * drk does not repeat, or more than it holds. */
static int take_options(drk_images_again *a, const drk_images_load *ld)
{
    if (!ld || ld->nopts == 0)
        return 0;
    if (ld->nopts > DRK_IMAGES_AGAIN_OPTS || !ld->opts || !ld->vals) {
        snprintf(a->why, sizeof a->why, "its module was loaded with %u JIT options, more than drk repeats (%d)",
                 ld->nopts, DRK_IMAGES_AGAIN_OPTS);
        return -1;
    }
    for (unsigned i = 0; i < ld->nopts; i++) {
        int k = option_kind(ld->opts[i]);
        if (k < 0) {
            snprintf(a->why, sizeof a->why, "its module was loaded with JIT option %d, which drk does not repeat",
                     (int)ld->opts[i]);
            a->nopts = 0;
            return -1;
        }
        if (k > 0) {
            a->opts[a->nopts] = ld->opts[i];
            a->vals[a->nopts++] = ld->vals[i];
        }
    }
    return 0;
}

static void why_over_cap(drk_images_again *a, uint64_t len, size_t cap)
{
    snprintf(a->why, sizeof a->why, "its image of %llu bytes was not kept: over the cap of %zu bytes for kept PTX",
             (unsigned long long)len, cap);
}

/* The bytes to keep of the image at `data` (its extent `size`): a fatbin
 * wrapper's one container (the wrapper only points at it), else the image
 * itself. NULL with a->why for a wrapper of several containers. */
static const void *image_span(const void *data, size_t size, size_t *len, drk_images_again *a)
{
    if (drk_image_classify(data, size) != DRK_IMAGE_WRAPPER) {
        *len = size;
        return data;
    }
    const void *c[2];
    int n = drk_fatbin_wrapper_containers(data, c, 2);
    if (n == 1 && drk_fatbin_container_size(c[0], SIZE_MAX, len) == 0)
        return c[0];
    if (n == 1 || n < 0)
        snprintf(a->why, sizeof a->why, "its image was not kept: its fatbin wrapper could not be followed");
    else
        snprintf(a->why, sizeof a->why, "its image was not kept: a fatbin wrapper of %d containers (drk keeps one)",
                 n);
    return NULL;
}

/* A malloc'd copy of the `len` bytes at `p`, and a NUL after them (PTX is a
 * string to the driver); NULL out of memory. */
static void *copy_bytes(const void *p, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, p, len);
        c[len] = 0;
    }
    return c;
}

/* The bytes of file `path` and a NUL, at most `cap` of them; NULL with
 * a->why. */
static void *read_whole(const char *path, size_t cap, size_t *len, drk_images_again *a)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(a->why, sizeof a->why, "its file %.60s could not be read: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > cap) {
        close(fd);
        why_over_cap(a, (uint64_t)st.st_size, cap);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    drk_src src;
    drk_src_file(&src, fd, n);
    int short_read = buf && drk_src_read(&src, 0, buf, n) != 0;
    drk_src_close(&src);
    close(fd);
    if (!buf || short_read) {
        snprintf(a->why, sizeof a->why, "its file %.60s could not be read: %s", path,
                 buf ? "shorter than it was" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* A copy of the image a module was loaded from (`data`, its extent `size`,
 * or the file `path`), at most `cap` bytes; NULL with a->why. */
static void *copy_image(const void *data, size_t size, const char *path, size_t cap, size_t *len,
                        drk_images_again *a)
{
    if (path)
        return read_whole(path, cap, len, a);
    const void *p = image_span(data, size, len, a);
    if (!p)
        return NULL;
    if (*len > cap) {
        why_over_cap(a, *len, cap);
        return NULL;
    }
    void *c = copy_bytes(p, *len);
    if (!c)
        snprintf(a->why, sizeof a->why, "its image of %zu bytes was not kept: out of memory", *len);
    return c;
}

/* What loading a load's image again takes, made before the lock (a copy
 * may be megabytes): its options, and a copy of its image when the module
 * may be kept (keeping on, options drk repeats, `wants`: one of its kernels
 * wants its PTX kept). NULL with a->why, or for a library; a deferred
 * image is copied once read (*pending). */
static void *again_at_load(drk_images_again *a, const drk_images_load *ld, size_t cap, int wants, int deferred,
                           const void *data, size_t size, const char *path, size_t *len, int *pending)
{
    *a = (drk_images_again){.library = ld && ld->library};
    *pending = 0;
    if (a->library)
        return NULL;
    if (cap == 0) {
        snprintf(a->why, sizeof a->why, WHY_OFF);
        return NULL;
    }
    if (take_options(a, ld) != 0)
        return NULL;
    if (deferred) {
        *pending = 1;
        snprintf(a->why, sizeof a->why, "its image was not read yet");
        return NULL;
    }
    if (!wants) {
        snprintf(a->why, sizeof a->why, WHY_NO_PTX);
        return NULL;
    }
    return copy_image(data, size, path, cap, len, a);
}

static int any_ptx_kept(const loaded *l)
{
    for (size_t i = 0; l->ptx && i < l->img.nkernels; i++)
        if (l->ptx[i])
            return 1;
    return 0;
}

/* Keeps `copy` (`len` bytes, or NULL: a->why is said) as l's image if one
 * of its kernels had PTX kept and it fits the cap; else frees it. Caller
 * holds the lock. */
static void keep_image(loaded *l, void *copy, size_t len)
{
    if (!copy)
        return;
    if (!any_ptx_kept(l)) {
        snprintf(l->again.why, sizeof l->again.why, WHY_NO_PTX);
        free(copy);
        return;
    }
    if (!fits(len)) {
        why_over_cap(&l->again, len, ptx_cap);
        free(copy);
        if (!image_cap_said) {
            image_cap_said = 1;
            drk_log(DRK_LOG_DEBUG, "%s: %s", l->label, l->again.why);
        }
        return;
    }
    l->again.image = copy;
    l->again.size = len;
    l->again.why[0] = 0;
    stats.images_kept++;
    stats.images_kept_bytes += len;
}

/* Frees l's kept image, its bytes back under the cap. Caller holds the lock. */
static void drop_image(loaded *l)
{
    l->again_pending = 0;
    if (!l->again.image)
        return;
    free(l->again.image);
    stats.images_kept--;
    stats.images_kept_bytes -= l->again.size;
    l->again.image = NULL;
    l->again.size = 0;
}

int drk_images_again_of(uintptr_t owner, drk_images_again *out)
{
    *out = (drk_images_again){0};
    pthread_mutex_lock(&lock);
    loaded *l = owner ? find_owner(owner) : NULL;
    if (l && l->deferred && !l->again.library)
        read_deferred(l);
    int r = -1;
    if (!l) {
        snprintf(out->why, sizeof out->why, "drk has no image of owner %#jx: unknown, not read, or unloaded",
                 (uintmax_t)owner);
    } else if (l->again.library || l->again.image) {
        *out = l->again;
        out->image = NULL;
        if (l->again.image && !(out->image = copy_bytes(l->again.image, l->again.size)))
            snprintf(out->why, sizeof out->why, "no memory for a copy of its image of %zu bytes", l->again.size);
        else
            r = 0;
    } else {
        snprintf(out->why, sizeof out->why, "%s", l->again.why[0] ? l->again.why : "its image was not kept");
    }
    pthread_mutex_unlock(&lock);
    return r;
}

void drk_images_again_free(drk_images_again *a)
{
    if (!a)
        return;
    free(a->image);
    a->image = NULL;
    a->size = 0;
}

unsigned drk_images_loaded(uintptr_t owner, const char *how, const void *data, const char *path)
{
    return drk_images_loaded_ex(owner, how, data, path, NULL);
}

unsigned drk_images_loaded_ex(uintptr_t owner, const char *how, const void *data, const char *path,
                              const drk_images_load *how_loaded)
{
    if (!owner || (!data && !path))
        return 0;
    size_t keep = keep_cap();
    drk_image_options opt = {drk_images_sm(), keep != 0};
    drk_image img = {0};
    char err[160] = "";
    uint64_t t0 = drk_mono_ns();
    int r;
    const void *deferred = NULL;
    size_t size = 0;
    if (path) {
        r = drk_image_read_file(path, &opt, &img, err, sizeof err);
    } else {
        /* The driver accepted the image, so its headers are sound; they
         * alone bound it, as they bound the driver's own reading. */
        r = drk_image_extent(data, SIZE_MAX, &size);
        if (r != 0)
            snprintf(err, sizeof err, "not a fatbin, cubin or PTX image");
        else if (opt.sm && read_cost(data, size, opt.sm) > DEFER_BYTES && in_loaded_object(data))
            deferred = data;
        else
            r = drk_image_read(data, size, &opt, &img, err, sizeof err);
    }
    unsigned char(*digests)[DRK_SHA256_BYTES] = r == 0 && !deferred ? digest_texts(&img, opt.sm) : NULL;
    drk_images_again again = {0};
    size_t copy_len = 0;
    int pending = 0;
    void *copy = r == 0 ? again_at_load(&again, how_loaded, keep, digests != NULL, deferred != NULL, data, size,
                                        path, &copy_len, &pending)
                        : NULL;
    uint64_t dt = drk_mono_ns() - t0;
    pthread_mutex_lock(&lock);
    stats.loads++;
    stats.read_ns += dt;
    loaded *old = find_owner(owner); /* a handle value reused after an unload drk missed */
    if (old)
        forget(old);
    if (r != 0) {
        stats.failed++;
        pthread_mutex_unlock(&lock);
        free(digests);
        drk_log(DRK_LOG_INFO, "%s: image not read (%s); its kernels are known from the driver's answers", how, err);
        return 0;
    }
    unsigned jit = deferred ? 0 : jit_kernels(&img, opt.sm);
    if (count == cap && grow() != 0) {
        pthread_mutex_unlock(&lock);
        drk_image_free(&img);
        free(digests);
        free(copy);
        return jit;
    }
    loaded *l = &table[count];
    *l = (loaded){.owner = owner, .img = img, .deferred = deferred, .deferred_size = size};
    if (!deferred && !(l->facts = calloc(img.nkernels + 1, sizeof *l->facts))) {
        pthread_mutex_unlock(&lock);
        drk_image_free(&img);
        free(digests);
        free(copy);
        return jit;
    }
    snprintf(l->label, sizeof l->label, "%s #%u%s%.60s", how, stats.loads, path ? " " : "", path ? path : "");
    keep_texts(l, digests, opt.sm, how);
    free(digests);
    l->again = again;
    l->again_pending = pending;
    keep_image(l, copy, copy_len);
    count++;
    if (deferred) {
        stats.deferred++;
    } else {
        stats.read++;
        stats.kernels += (unsigned)img.nkernels;
    }
    pthread_mutex_unlock(&lock);
    if (deferred)
        drk_log(DRK_LOG_DEBUG, "%s: image of %zu bytes left for later (large, and in a loaded object)", how, size);
    else
        drk_log(DRK_LOG_DEBUG, "%s: %s image, %zu kernels, %u entries (%u read) in %.2f ms", how,
                drk_image_format_name(img.format), img.nkernels, img.stats.entries, img.stats.entries_read,
                dt / 1e6);
    return jit;
}

/* Reads a deferred image now. Caller holds the lock. */
static void read_deferred(loaded *l)
{
    const void *data = l->deferred;
    l->deferred = NULL;
    drk_image_options opt = {drk_images_sm(), ptx_cap != 0};
    char err[160] = "";
    uint64_t t0 = drk_mono_ns();
    /* dlclose may have unmapped it since. */
    int r = in_loaded_object(data) ? drk_image_read(data, l->deferred_size, &opt, &l->img, err, sizeof err) : -1;
    uint64_t dt = drk_mono_ns() - t0;
    stats.read_ns += dt;
    stats.late_read_ns += dt;
    if (r == 0)
        l->facts = calloc(l->img.nkernels + 1, sizeof *l->facts);
    if (r != 0 || !l->facts) {
        drk_image_free(&l->img);
        l->img = (drk_image){0};
        stats.failed++;
        if (l->again_pending)
            snprintf(l->again.why, sizeof l->again.why, "its image could not be read");
        l->again_pending = 0;
        return;
    }
    stats.read++;
    stats.deferred_read++;
    stats.kernels += (unsigned)l->img.nkernels;
    /* Hashed under the lock: a deferred image is read for a report or the
     * engine, off the program's path. */
    unsigned char(*digests)[DRK_SHA256_BYTES] = digest_texts(&l->img, opt.sm);
    keep_texts(l, digests, opt.sm, l->label);
    free(digests);
    /* Its image, for loading it again, while its object still has it. */
    if (l->again_pending) {
        l->again_pending = 0;
        size_t len = 0;
        int any = any_ptx_kept(l);
        void *copy = any ? copy_image(data, l->deferred_size, NULL, ptx_cap, &len, &l->again) : NULL;
        if (!any)
            snprintf(l->again.why, sizeof l->again.why, WHY_NO_PTX);
        keep_image(l, copy, len);
    }
}

void drk_images_unloaded(uintptr_t owner)
{
    pthread_mutex_lock(&lock);
    loaded *l = find_owner(owner);
    if (l && l->deferred) {
        l->owner = 0; /* still in its object, for a report's names */
        drop_image(l);
    } else if (l) {
        forget(l);
    }
    pthread_mutex_unlock(&lock);
}

static const drk_image_facts *facts_in(loaded *l, const char *name, int may_read)
{
    if (l->deferred && may_read)
        read_deferred(l);
    if (l->deferred || !l->facts)
        return NULL;
    const drk_image_kernel *k = drk_image_find(&l->img, name);
    if (!k)
        return NULL;
    size_t i = (size_t)(k - l->img.kernels);
    if (!l->facts[i])
        l->facts[i] = drk_image_facts_make(k, l->label, drk_images_sm());
    return l->facts[i];
}

const drk_image_facts *drk_images_facts(uintptr_t owner, const char *name, int may_read)
{
    if (!name)
        return NULL;
    pthread_mutex_lock(&lock);
    loaded *l = owner ? find_owner(owner) : NULL;
    const drk_image_facts *f = l ? facts_in(l, name, may_read) : NULL;
    /* Read images first, so a name search reads deferred ones only if it must. */
    for (size_t i = 0; !f && i < count; i++)
        f = facts_in(&table[i], name, 0);
    for (size_t i = 0; !f && may_read && i < count; i++)
        f = facts_in(&table[i], name, 1);
    pthread_mutex_unlock(&lock);
    return f;
}

/* The paths of the loaded objects, the program first. */
typedef struct object_list {
    char **paths;
    size_t n, cap;
} object_list;

static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    object_list *l = arg;
    char exe[4096];
    const char *path = info->dlpi_name;
    if (!path || !*path) {
        ssize_t n = l->n ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return 0;
        exe[n] = 0;
        path = exe;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **p = realloc(l->paths, sizeof *p * cap);
        if (!p)
            return 1;
        l->paths = p, l->cap = cap;
    }
    if ((l->paths[l->n] = strdup(path)) != NULL)
        l->n++;
    return 0;
}

static int scanned_objects;

static drk_image_format classify_file(const char *path)
{
    unsigned char head[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, head, sizeof head, 0) : -1;
    if (fd >= 0)
        close(fd);
    return n > 0 ? drk_image_classify(head, (size_t)n) : DRK_IMAGE_UNKNOWN;
}

/* The last resort for kernels no load drk saw brought in (a cudart that
 * loads through private calls): the fatbin sections of every loaded
 * object, read from their files for the device's SM. Once per process. */
static void scan_objects(void)
{
    if (scanned_objects)
        return;
    scanned_objects = 1;
    object_list objs = {0};
    dl_iterate_phdr(add_object, &objs);
    drk_image_options opt = {.sm = drk_images_sm()};
    for (size_t i = 0; i < objs.n; i++) {
        drk_image img;
        char err[160];
        uint64_t t0 = drk_mono_ns();
        int r = classify_file(objs.paths[i]) == DRK_IMAGE_HOST_ELF
                    ? drk_image_read_file(objs.paths[i], &opt, &img, err, sizeof err)
                    : -1;
        uint64_t dt = drk_mono_ns() - t0;
        stats.read_ns += dt;
        stats.late_read_ns += dt;
        if (r != 0 || img.nkernels == 0 || (count == cap && grow() != 0)) {
            if (r == 0)
                drk_image_free(&img);
            continue;
        }
        loaded *l = &table[count];
        *l = (loaded){.img = img, .facts = calloc(img.nkernels + 1, sizeof *l->facts)};
        if (!l->facts) {
            drk_image_free(&img);
            continue;
        }
        snprintf(l->label, sizeof l->label, "%s", objs.paths[i]);
        count++;
        stats.objects_read++;
        stats.kernels += (unsigned)img.nkernels;
        drk_log(DRK_LOG_INFO, "read %zu kernels from %s, for kernels no load showed drk", img.nkernels,
                objs.paths[i]);
    }
    for (size_t i = 0; i < objs.n; i++)
        free(objs.paths[i]);
    free(objs.paths);
}

const drk_image_facts *drk_images_facts_anywhere(const char *name)
{
    const drk_image_facts *f = drk_images_facts(0, name, 1);
    if (f || !name)
        return f;
    pthread_mutex_lock(&lock);
    scan_objects();
    for (size_t i = 0; !f && i < count; i++)
        f = facts_in(&table[i], name, 0);
    pthread_mutex_unlock(&lock);
    return f;
}

drk_images_stats drk_images_stats_get(void)
{
    pthread_mutex_lock(&lock);
    drk_images_stats s = stats;
    pthread_mutex_unlock(&lock);
    return s;
}

void drk_images_after_fork_child(void)
{
    /* A parent thread may have held the lock at fork: only this thread
     * exists now, and it holds nothing. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&lock, &fresh, sizeof lock);
}
