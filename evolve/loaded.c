#define _GNU_SOURCE
#include "evolve/loaded.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sha256.h"
#include "evolve/image/fatbin.h"

typedef struct loaded {
    uintptr_t owner;               /* 0 once unloaded (a deferred image stays) */
    char label[96];
    drk_image img;
    const drk_image_facts **facts; /* per kernel of img, made on first ask */
    const void *deferred;          /* not read yet: the image, in a loaded object */
    size_t deferred_size;
    const drk_ptx_text **ptx;      /* per kernel of img: its kept PTX, or NULL (NULL: none kept) */
} loaded;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *table;
static size_t count, cap;
static drk_images_stats stats;
static atomic_uint sm;

void drk_images_set_sm(unsigned s) { atomic_store(&sm, s); }
unsigned drk_images_sm(void) { return atomic_load(&sm); }

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void forget(loaded *l)
{
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
    if (len > ptx_cap || stats.ptx_kept_bytes + len > ptx_cap) {
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

unsigned drk_images_loaded(uintptr_t owner, const char *how, const void *data, const char *path)
{
    if (!owner || (!data && !path))
        return 0;
    drk_image_options opt = {drk_images_sm(), keep_cap() != 0};
    drk_image img = {0};
    char err[160] = "";
    uint64_t t0 = now_ns();
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
    uint64_t dt = now_ns() - t0;
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
        return jit;
    }
    loaded *l = &table[count];
    *l = (loaded){.owner = owner, .img = img, .deferred = deferred, .deferred_size = size};
    if (!deferred && !(l->facts = calloc(img.nkernels + 1, sizeof *l->facts))) {
        pthread_mutex_unlock(&lock);
        drk_image_free(&img);
        free(digests);
        return jit;
    }
    keep_texts(l, digests, opt.sm, how);
    free(digests);
    count++;
    if (deferred) {
        stats.deferred++;
    } else {
        stats.read++;
        stats.kernels += (unsigned)img.nkernels;
    }
    snprintf(l->label, sizeof l->label, "%s #%u%s%.60s", how, stats.loads, path ? " " : "", path ? path : "");
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
    uint64_t t0 = now_ns();
    /* dlclose may have unmapped it since. */
    int r = in_loaded_object(data) ? drk_image_read(data, l->deferred_size, &opt, &l->img, err, sizeof err) : -1;
    uint64_t dt = now_ns() - t0;
    stats.read_ns += dt;
    stats.late_read_ns += dt;
    if (r == 0)
        l->facts = calloc(l->img.nkernels + 1, sizeof *l->facts);
    if (r != 0 || !l->facts) {
        drk_image_free(&l->img);
        l->img = (drk_image){0};
        stats.failed++;
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
}

void drk_images_unloaded(uintptr_t owner)
{
    pthread_mutex_lock(&lock);
    loaded *l = find_owner(owner);
    if (l && l->deferred)
        l->owner = 0; /* still in its object, for a report's names */
    else if (l)
        forget(l);
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
        uint64_t t0 = now_ns();
        int r = classify_file(objs.paths[i]) == DRK_IMAGE_HOST_ELF
                    ? drk_image_read_file(objs.paths[i], &opt, &img, err, sizeof err)
                    : -1;
        uint64_t dt = now_ns() - t0;
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
