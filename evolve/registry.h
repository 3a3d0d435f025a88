/* The kernel registry: every kernel handle a program launches or looks up,
 * mapped to one record (name, owner, launches by shape). A launch finds its
 * record in O(1) without locks; the first launch of an unknown handle asks
 * the driver for its name. */
#ifndef DRK_EVOLVE_REGISTRY_H
#define DRK_EVOLVE_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/counter.h"
#include "base/driver.h"

typedef enum drk_handle_kind {
    DRK_HANDLE_UNKNOWN,  /* seen only at launch, driver could not name it */
    DRK_HANDLE_FUNCTION, /* a CUfunction */
    DRK_HANDLE_KERNEL,   /* a CUkernel (also when passed as a CUfunction) */
} drk_handle_kind;

/* How a kernel was launched. `entry` is the caller's label for the entry
 * point it came through (drk passes the hooked name's slot), so the counts
 * by shape are also the counts by entry point. */
#define DRK_REGISTRY_ENTRIES 8

typedef struct drk_launch_shape {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes; /* dynamic shared memory */
    uint32_t entry;        /* < DRK_REGISTRY_ENTRIES */
} drk_launch_shape;

#define DRK_SHAPES_PER_KERNEL 8
#define DRK_REGISTRY_RECORDS (1u << 15) /* kernels recorded; the rest counted as untracked */

/* Launch counts are kept in rows of their own cache lines: one owned by
 * each of the first launching threads, and a shared last row for the rest
 * (base/counter.h), so threads launching one kernel at once neither lock
 * nor share a line. */
#define DRK_REGISTRY_SHARDS 8

enum { DRK_SHAPE_FREE, DRK_SHAPE_WRITING, DRK_SHAPE_READY };

typedef struct drk_shape_slot {
    _Atomic uint32_t state; /* DRK_SHAPE_*: shape is readable once READY */
    drk_launch_shape shape;
} drk_shape_slot;

typedef struct drk_kernel_counts {
    _Atomic uint64_t shape[DRK_SHAPES_PER_KERNEL];
    _Atomic uint64_t other[DRK_REGISTRY_ENTRIES]; /* in shapes beyond the first 8, by entry */
} __attribute__((aligned(128))) drk_kernel_counts;

struct drk_image_facts;
struct drk_driver_facts;

typedef struct drk_kernel_record {
    uintptr_t handle;
    _Atomic uintptr_t owner; /* CUmodule or CUlibrary, 0 if unknown */
    const char *name;
    drk_handle_kind kind;
    /* What the kernel's image says (set when it is bound, from the image its
     * owner loaded) and what the driver says (asked at its first launch). */
    _Atomic(const struct drk_image_facts *) image;
    _Atomic(const struct drk_driver_facts *) driver;
    atomic_int driver_asked;
    drk_shape_slot shapes[DRK_SHAPES_PER_KERNEL]; /* read on every launch, written rarely */
    /* The function that serves launches at each shape instead of the
     * handle: an evolved variant proven equal to it (0: the handle itself).
     * Read on every launch, one load; set and cleared by the engine. */
    _Atomic uintptr_t variant[DRK_SHAPES_PER_KERNEL];
    drk_kernel_counts counts[DRK_REGISTRY_SHARDS];
} drk_kernel_record;

/* Once, before the first launch: the driver table (copied) that names
 * handles seen for the first time and tells what it knows of them. */
void drk_registry_configure(const drk_driver *drv);

/* A successful launch of `handle` (a CUfunction or a CUkernel) by the thread
 * of index `thread` (drk_thread_index()). The common case (known handle,
 * known shape) is inline below; the rest is drk_registry_launch_slow.
 * A launch hook finds the site first (before the launch: its variant),
 * and counts it after a successful launch. */
typedef struct drk_launch_site {
    drk_kernel_record *r; /* NULL: not found inline (counted by the slow path) */
    int shape;
} drk_launch_site;
static inline drk_launch_site drk_registry_site(uintptr_t handle, const drk_launch_shape *shape);
static inline void drk_registry_count(drk_launch_site site, uintptr_t handle, const drk_launch_shape *shape,
                                      unsigned thread);
static inline void drk_registry_launch(uintptr_t handle, const drk_launch_shape *shape, unsigned thread);
void drk_registry_launch_slow(uintptr_t handle, const drk_launch_shape *shape, unsigned thread);

/* The function serving the site's launches: a published variant, or 0. */
static inline uintptr_t drk_site_variant(drk_launch_site site)
{
    return site.r ? atomic_load_explicit(&site.r->variant[site.shape], memory_order_acquire) : 0;
}

/* Publishes `fn` to serve launches of `handle` at the geometry of `shape`
 * (every entry point's slot of it; 0 withdraws it). The number of slots
 * set. A launch that sees it uses it from then on. */
unsigned drk_registry_serve(uintptr_t handle, const drk_launch_shape *shape, uintptr_t fn);
/* A launch of the site's variant `fn` failed (another context, a handle
 * gone): it is withdrawn from that site if still published there, and the
 * launch goes to the original. */
void drk_registry_variant_failed(drk_launch_site site, uintptr_t fn);

/* A handle the driver just returned for a named kernel (cuModuleGetFunction,
 * cuLibraryGetKernel, cuKernelGetFunction). A handle value reused for
 * another kernel gets a new record. */
void drk_registry_bind(uintptr_t handle, drk_handle_kind kind, const char *name, uintptr_t owner);

/* The image facts of a bound handle's kernel, or of a record (also one
 * whose owner was unloaded); the first set stays. */
void drk_registry_learn_image(uintptr_t handle, const struct drk_image_facts *facts);
void drk_record_learn_image(const drk_kernel_record *r, const struct drk_image_facts *facts);

/* The record of a handle, or NULL; never creates one. */
const drk_kernel_record *drk_registry_find(uintptr_t handle);
/* The first record named `name` that launched at this geometry (any entry
 * point), and its shape slot; NULL if none. A scan: drk's thread only. */
const drk_kernel_record *drk_registry_find_shape(const char *name, const uint32_t grid[3], const uint32_t block[3],
                                                 uint32_t shared_bytes, int *slot);

/* The module or library `owner` was unloaded: its handles may be reused, so
 * their next launch is looked up afresh. Records stay for the report. */
void drk_registry_retire(uintptr_t owner);

/* Records in creation order, for the report. */
size_t drk_registry_size(void);
const drk_kernel_record *drk_registry_at(size_t i);
uint64_t drk_record_launches(const drk_kernel_record *r);
uint64_t drk_record_shape_launches(const drk_kernel_record *r, int shape);
uint64_t drk_record_other_launches(const drk_kernel_record *r);
/* Launch shapes recorded so far (a record's first 8): drk's thread looks at
 * records again only when it moved (evolve/occupancy.c). */
uint64_t drk_registry_shapes_added(void);
/* Launches of kernels that found no room in the registry. */
uint64_t drk_registry_untracked(void);
/* All successful launches: every record's and the untracked ones. */
uint64_t drk_registry_launches(void);
/* All launches through entry point `entry`, recorded or untracked. */
uint64_t drk_registry_entry_launches(unsigned entry);

/* A forked child: counts from zero, and no published variants. */
void drk_registry_reset_counts(void);

/* The handle table, open-addressed by a multiplicative hash of the handle.
 * A slot's record pointer below DRK_REGISTRY_LIVE means "being created",
 * "retired" or "untracked". */
#define DRK_REGISTRY_SLOT_BITS 16
#define DRK_REGISTRY_LIVE 3

typedef struct drk_registry_slot {
    _Atomic uintptr_t key;
    _Atomic(drk_kernel_record *) rec;
} drk_registry_slot;

extern drk_registry_slot drk_registry_slots[1u << DRK_REGISTRY_SLOT_BITS];

static inline size_t drk_registry_slot_of(uintptr_t handle)
{
    return (size_t)(((uint64_t)handle * 0x9e3779b97f4a7c15ull) >> (64 - DRK_REGISTRY_SLOT_BITS));
}

static inline int drk_same_shape(const drk_launch_shape *a, const drk_launch_shape *b)
{
    return memcmp(a, b, sizeof *a) == 0; /* 32 bytes: a few wide compares */
}

static inline drk_launch_site drk_registry_site(uintptr_t handle, const drk_launch_shape *shape)
{
    drk_registry_slot *s = &drk_registry_slots[drk_registry_slot_of(handle)];
    if (__builtin_expect(atomic_load_explicit(&s->key, memory_order_acquire) == handle, 1)) {
        drk_kernel_record *r = atomic_load_explicit(&s->rec, memory_order_acquire);
        if (__builtin_expect((uintptr_t)r >= DRK_REGISTRY_LIVE, 1)) {
            for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++) {
                if (atomic_load_explicit(&r->shapes[i].state, memory_order_acquire) != DRK_SHAPE_READY)
                    break;
                if (drk_same_shape(&r->shapes[i].shape, shape))
                    return (drk_launch_site){r, i};
            }
        }
    }
    return (drk_launch_site){NULL, 0};
}

static inline void drk_registry_count(drk_launch_site site, uintptr_t handle, const drk_launch_shape *shape,
                                      unsigned thread)
{
    if (__builtin_expect(site.r != NULL, 1)) {
        int owned = thread < DRK_REGISTRY_SHARDS - 1;
        drk_counter_add(&site.r->counts[owned ? thread : DRK_REGISTRY_SHARDS - 1].shape[site.shape], owned);
        return;
    }
    drk_registry_launch_slow(handle, shape, thread);
}

static inline void drk_registry_launch(uintptr_t handle, const drk_launch_shape *shape, unsigned thread)
{
    drk_registry_count(drk_registry_site(handle, shape), handle, shape, thread);
}

#endif
