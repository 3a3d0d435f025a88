/* The device images a program loaded through public calls (cuModuleLoad*,
 * cuLibraryLoad*), read when loaded and kept by owner (CUmodule or
 * CUlibrary) until unloaded, so a kernel bound later by name finds its
 * facts. Not on the launch path: a mutex guards the table. */
#ifndef DRK_EVOLVE_LOADED_H
#define DRK_EVOLVE_LOADED_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sha256.h"
#include "evolve/facts.h"

/* The SM of the device images are read for (90 for an H200): entries that
 * cannot run on it are left compressed. 0 until set: everything is read. */
void drk_images_set_sm(unsigned sm);
unsigned drk_images_sm(void);

/* A successful load gave `owner`. `data` is the image the program passed
 * (its size unknown: bounded by its own headers, which the driver has just
 * accepted), or `path` a file it named. `how` names the call. Returns the
 * image's kernels the device has no SASS for but PTX, which the driver had
 * to compile (JIT) in that load; 0 for an image left unread. */
unsigned drk_images_loaded(uintptr_t owner, const char *how, const void *data, const char *path);
void drk_images_unloaded(uintptr_t owner);

/* How a load was made, as far as loading it again needs: whether the owner
 * is a CUlibrary, and the JIT options passed with it, copied before the
 * driver's call (CU_JIT_THREADS_PER_BLOCK's slot is written back). nopts
 * over DRK_IMAGES_AGAIN_OPTS says "more options than drk repeats" and the
 * arrays are not read. */
typedef struct drk_images_load {
    int library;
    unsigned nopts;
    const CUjit_option *opts;
    void *const *vals;
} drk_images_load;

/* drk_images_loaded, told how the load was made (NULL: a module loaded with
 * no options, which is what drk_images_loaded says). */
unsigned drk_images_loaded_ex(uintptr_t owner, const char *how, const void *data, const char *path,
                              const drk_images_load *how_loaded);

/* What loading an owner's image again takes, in a context of drk's own
 * (the original of a trial, evolve/engine_capture.c). */
#define DRK_IMAGES_AGAIN_OPTS 16
typedef struct drk_images_again {
    int library;               /* a CUlibrary: the driver keeps its image (cuLibraryGetKernel finds the kernel) */
    void *image;               /* a module's image as the program passed it (a copy, malloc'd: the caller frees it with drk_images_again_free) */
    size_t size;
    unsigned nopts;            /* the load's JIT options that shape the code, and their values */
    CUjit_option opts[DRK_IMAGES_AGAIN_OPTS];
    void *vals[DRK_IMAGES_AGAIN_OPTS];
    char why[128];             /* when it cannot be loaded again, why, in words */
} drk_images_again;
/* 0 with *out filled (image NULL for a library), or -1 with out->why: an owner drk
 * has no image for or that was unloaded, a module whose image was not kept
 * (keeping off: drk_images_keep_ptx(0); none of its kernels had PTX kept; over
 * the cap), or one loaded with a JIT option drk does not repeat.
 * The image is the bytes the program passed (for a fatbin wrapper, the one
 * container it points at; for a file, the file), followed by a NUL that
 * `size` does not count, so PTX text is a string cuModuleLoadDataEx takes.
 * Kept only while PTX keeping is on, for a module of which at least one
 * kernel's PTX was kept, within the cap; freed when the owner is unloaded. */
int drk_images_again_of(uintptr_t owner, drk_images_again *out);
void drk_images_again_free(drk_images_again *a);

/* The facts of kernel `name` in the image of `owner`; with owner 0 or an
 * owner drk has no image for, in any loaded image. NULL if none has it.
 * Large images in loaded objects are read when loaded only if the device
 * needs little of them; `may_read` reads such a deferred image now (for a
 * report, at exit), else it is skipped. */
const drk_image_facts *drk_images_facts(uintptr_t owner, const char *name, int may_read);

/* The same for a kernel no known image may have: any image, read now if
 * deferred, and at last the fatbin sections of every loaded object (a
 * cudart that loads its images through private calls). For a report. */
const drk_image_facts *drk_images_facts_anywhere(const char *name);

/* The PTX a kernel can be rebuilt from (evolve/source.h): the text of the
 * PTX module its flow came from, decompressed, shared by all its kernels
 * and by every load of the same text. Kept only for kernels whose PTX the
 * device can JIT and whose flow is evolvable, and only once turned on
 * (nothing in a program does yet). Kept until exit, never freed: a record
 * or a built variant may point at it after its owner is unloaded; the
 * total is bounded by the cap instead. */
typedef struct drk_ptx_text {
    const char *text;                        /* NUL-terminated */
    size_t len;                              /* bytes before the NUL */
    unsigned char sha256[DRK_SHA256_BYTES];  /* of the text: the module's identity in cache keys */
} drk_ptx_text;

#define DRK_IMAGES_PTX_CAP ((size_t)64 << 20)

/* Keep PTX texts from the images read from now on, `cap` bytes in all (0:
 * keep none, the default), and the images of modules whose PTX was kept
 * (drk_images_again_of), within the same cap. Past the cap later modules
 * are not kept (one debug line says so). */
void drk_images_keep_ptx(size_t cap);

/* The kept PTX of kernel `name` in the image of `owner` (a deferred image is
 * read now); NULL if none was kept: no PTX for the device, not evolvable,
 * over the cap, keeping off, or the owner unknown or unloaded. */
const drk_ptx_text *drk_images_ptx(uintptr_t owner, const char *name);

typedef struct drk_images_stats {
    unsigned loads, read, failed; /* images seen, read, that could not be read */
    unsigned deferred;            /* left unread when loaded */
    unsigned deferred_read;       /* of those, read later for a report */
    unsigned objects_read;        /* loaded objects whose fatbin sections were read */
    unsigned kernels;             /* kernels in images read */
    uint64_t read_ns;             /* time spent reading */
    uint64_t late_read_ns;        /* of which for a report, at exit (deferred images, objects) */
    unsigned ptx_kept;            /* distinct PTX texts kept */
    uint64_t ptx_kept_bytes;
    unsigned ptx_over_cap;        /* texts not kept: past the cap */
    unsigned images_kept;         /* module images held now for loading again (within the cap too) */
    uint64_t images_kept_bytes;
} drk_images_stats;
drk_images_stats drk_images_stats_get(void);

/* In a forked child: the table's lock is free again (the images stay). */
void drk_images_after_fork_child(void);

#endif
