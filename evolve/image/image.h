/* One device image, whatever its form (fatbin wrapper, fatbin, cubin, PTX,
 * or a host executable or library carrying fatbins), read into one table of
 * kernels: for each kernel name, the SASS archs and PTX archs present, and
 * the layout and resources from the entry that matters (for the SM asked
 * about: the SASS the driver would load, else the PTX it would JIT). */
#ifndef DRK_EVOLVE_IMAGE_H
#define DRK_EVOLVE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "evolve/image/kernel.h"
#include "evolve/image/ptx_flow.h"

typedef enum drk_image_format {
    DRK_IMAGE_UNKNOWN,
    DRK_IMAGE_WRAPPER, /* __fatBinC_Wrapper_t, as cudart hands cuLibraryLoadData */
    DRK_IMAGE_FATBIN,
    DRK_IMAGE_CUBIN,
    DRK_IMAGE_PTX,
    DRK_IMAGE_HOST_ELF, /* an executable, shared library or object file with .nv_fatbin / __nv_relfatbin */
} drk_image_format;

const char *drk_image_format_name(drk_image_format f);

/* The form of the bytes at `data`, from their first bytes (at most `avail`). */
drk_image_format drk_image_classify(const void *data, size_t avail);

#define DRK_IMAGE_MAX_ARCHS 16

typedef struct drk_image_kernel {
    drk_kernel_info info;      /* from `source` below */
    enum { DRK_INFO_SASS, DRK_INFO_PTX } source;
    unsigned source_arch;      /* the SASS or PTX arch the info came from */
    char source_suffix;        /* its arch suffix: 'a', 'f' or 0 (see below) */
    /* Arch lists, ascending by arch (then plain < 'f' < 'a'). Each arch has a
     * suffix in the parallel array: 'a' for arch-specific targets (sm_90a:
     * that SM only), 'f' for family targets (sm_100f: same major, minor >=),
     * 0 for plain ones. With drk_image_options.sm set, only the entries that
     * matter are parsed, and a kernel's lists name the archs of every entry
     * of the containers it was found in (a container is one translation unit
     * or one device link, whose entries carry the same kernels); with sm 0
     * they name exactly the entries the kernel was read from. */
    uint16_t sass[DRK_IMAGE_MAX_ARCHS]; /* SM numbers with SASS for this kernel */
    char sass_suffix[DRK_IMAGE_MAX_ARCHS];
    unsigned nsass;
    uint16_t ptx[DRK_IMAGE_MAX_ARCHS];  /* virtual archs with PTX for this kernel */
    char ptx_suffix[DRK_IMAGE_MAX_ARCHS];
    uint16_t ptx_isa[DRK_IMAGE_MAX_ARCHS]; /* their ISA versions, major*10+minor */
    unsigned nptx;
    /* Its parameters' classes and whether drk can evolve it (ptx_flow.h),
     * from the PTX entry its PTX numbers would come from (the newest read);
     * NULL without PTX, or when memory ran out. */
    drk_ptx_flow *flow;
    /* With drk_image_options.keep_ptx: that same PTX entry's text, as
     * drk_image.ptx_texts[ptx_text - 1] (shared by the entry's kernels);
     * 0 when not kept. */
    uint32_t ptx_text;
} drk_image_kernel;

typedef struct drk_image_stats {
    unsigned containers, entries, sass_entries, ptx_entries, other_entries;
    unsigned lz4, zstd;      /* compressed entries */
    unsigned entries_read;   /* entries decompressed and parsed */
    unsigned errors;         /* entries (or containers) that could not be read (the rest still is) */
    uint64_t stored_bytes;       /* payload bytes as stored, all entries */
    uint64_t decompressed_bytes; /* payload bytes once decompressed, all entries (from their headers) */
} drk_image_stats;

typedef struct drk_image {
    drk_image_format format;
    drk_image_kernel *kernels; /* sorted by name */
    size_t nkernels;
    drk_image_stats stats;
    char first_error[160];     /* the first entry error, "" if none */
    /* With keep_ptx: the decompressed text of each PTX entry some kernel's
     * flow came from (malloc'd, NUL-terminated; a slot may be taken,
     * leaving NULL, and drk_image_free frees the rest). */
    char **ptx_texts;
    size_t *ptx_lens;
    uint32_t nptx_texts;
} drk_image;

typedef struct drk_image_options {
    /* 0: read every entry (drk inspect). Otherwise an SM number: read only
     * the entries that matter for it (the best SASS <= sm of the same major
     * family, and the newest PTX <= sm) and the headers of the rest, so
     * loading a large library costs little. */
    unsigned sm;
    /* Keep the text of the PTX entries kernels' flows come from, so a
     * kernel can be JIT-compiled again (evolve/loaded.h). Costs a copy. */
    int keep_ptx;
} drk_image_options;

/* Reads the image at [data, data+size). 0, or -1 with a message in err if
 * nothing of it could be read; errors in single entries are counted in
 * stats and the rest is read. */
int drk_image_read(const void *data, size_t size, const drk_image_options *opt, drk_image *out, char *err,
                   size_t errlen);
/* The same for a file on disk: a host ELF file (its fatbin sections are read
 * with pread one container at a time, so memory stays bounded by the largest
 * container), or a standalone fatbin, cubin or PTX file. */
int drk_image_read_file(const char *path, const drk_image_options *opt, drk_image *out, char *err, size_t errlen);
/* The byte length of an image nobody gave a size for (cuModuleLoadData),
 * trusting at most `avail` bytes: container headers, ELF extent, strlen. */
int drk_image_extent(const void *data, size_t avail, size_t *size);
void drk_image_free(drk_image *img);

/* The kernel named `name` (mangled), or NULL. */
const drk_image_kernel *drk_image_find(const drk_image *img, const char *name);

/* Whether `k` has PTX a device of SM `sm` can JIT: a PTX arch <= sm (an
 * arch-specific "a" target only for its own SM). */
int drk_image_kernel_ptx_for(const drk_image_kernel *k, unsigned sm);
/* Whether `k` has SASS a device of SM `sm` can load: same major, arch <= sm
 * (an "a" target only on its own SM). */
int drk_image_kernel_sass_for(const drk_image_kernel *k, unsigned sm);

/* Whether code for `arch` with `suffix` ('a', 'f' or 0) runs on SM `sm`:
 * SASS needs the same major and arch <= sm; PTX any arch <= sm ('f': of the
 * same major); both 'a' only on arch == sm. */
int drk_image_sass_runs_on(unsigned arch, char suffix, unsigned sm);
int drk_image_ptx_runs_on(unsigned arch, char suffix, unsigned sm);

#endif
