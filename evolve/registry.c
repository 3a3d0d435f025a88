#define _GNU_SOURCE
#include "evolve/registry.h"

#include <stdio.h>
#include <string.h>

#include "base/counter.h"
#include "base/log.h"
#include "evolve/arena.h"
#include "evolve/facts.h"

/* The slot table is fixed (.bss: untouched pages cost nothing); records come
 * from the arena as kernels appear, so a launch never calls malloc. 32768
 * kernels is far beyond any program seen (PyTorch runs a few thousand);
 * launches past it are counted as untracked. */
#define SLOT_BITS DRK_REGISTRY_SLOT_BITS
#define SLOTS (1u << SLOT_BITS)
#define RECORDS DRK_REGISTRY_RECORDS

/* What a slot holds besides a record. */
#define REC_CREATING ((drk_kernel_record *)0)
#define REC_RETIRED ((drk_kernel_record *)1)
#define REC_UNTRACKED ((drk_kernel_record *)2) /* no room for its record */

_Static_assert((uintptr_t)REC_UNTRACKED + 1 == DRK_REGISTRY_LIVE, "the inline path's notion of live");

static inline int live(const drk_kernel_record *r) { return (uintptr_t)r >= DRK_REGISTRY_LIVE; }

typedef drk_registry_slot slot;

slot drk_registry_slots[SLOTS];
static _Atomic(drk_kernel_record *) records[RECORDS];
static atomic_size_t nrecords;
static _Atomic uint64_t untracked[DRK_REGISTRY_ENTRIES];
static atomic_int full_logged;
static _Atomic uint64_t shapes_added;

static drk_kernel_record *record_new(uintptr_t handle, drk_handle_kind kind, const char *name, uintptr_t owner)
{
    size_t i = atomic_fetch_add_explicit(&nrecords, 1, memory_order_relaxed);
    drk_kernel_record *r = i < RECORDS ? drk_arena_alloc(sizeof *r, _Alignof(drk_kernel_record)) : NULL;
    if (!r) {
        if (i >= RECORDS)
            atomic_store_explicit(&nrecords, RECORDS, memory_order_relaxed);
        if (!atomic_exchange(&full_logged, 1))
            drk_log(DRK_LOG_WARN, "kernel registry full (%u kernels or out of memory); further kernels are counted as untracked",
                    RECORDS);
        return NULL;
    }
    r->handle = handle;
    r->kind = kind;
    r->name = drk_name_copy(name);
    if (!r->name)
        r->name = "?";
    atomic_store_explicit(&r->owner, owner, memory_order_relaxed);
    atomic_store_explicit(&records[i], r, memory_order_release);
    return r;
}

/* The driver table kernels are named and asked about with: a copy,
 * published once configured; until then a table with no answers. */
static drk_driver drv_copy;
static const drk_driver no_driver;
static _Atomic(const drk_driver *) drv_at;

void drk_registry_configure(const drk_driver *d)
{
    drv_copy = *d; /* the table handed in may be a thread's own copy */
    atomic_store_explicit(&drv_at, &drv_copy, memory_order_release);
}

static const drk_driver *driver(void)
{
    const drk_driver *d = atomic_load_explicit(&drv_at, memory_order_acquire);
    return d ? d : &no_driver;
}

/* The driver's name for a handle seen first at launch. cudart passes
 * CUkernels as CUfunctions, so ask for both. */
static drk_kernel_record *record_from_driver(uintptr_t handle)
{
    const drk_driver *drv = driver();
    const char *name = NULL;
    drk_handle_kind kind = DRK_HANDLE_UNKNOWN;
    if (drv->func_get_name && drv->func_get_name(&name, (CUfunction)handle) == CUDA_SUCCESS && name)
        kind = DRK_HANDLE_FUNCTION;
    else if (drv->kernel_get_name && drv->kernel_get_name(&name, (CUkernel)handle) == CUDA_SUCCESS && name)
        kind = DRK_HANDLE_KERNEL;
    char unnamed[40];
    if (!name) {
        snprintf(unnamed, sizeof unnamed, "<unnamed %#lx>", (unsigned long)handle);
        name = unnamed;
    }
    drk_kernel_record *r = record_new(handle, kind, name, 0);
    if (r)
        drk_log(DRK_LOG_DEBUG, "kernel %s (handle %#lx) first launched", r->name, (unsigned long)handle);
    return r;
}

/* The slot holding `handle`, or NULL (unknown without `claim`, or table
 * full). *claimed says this thread took an empty slot and must create its
 * record. */
static slot *slot_find(uintptr_t handle, int claim, int *claimed)
{
    *claimed = 0;
    size_t i = drk_registry_slot_of(handle);
    for (size_t probe = 0; probe < SLOTS; probe++, i = (i + 1) & (SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&drk_registry_slots[i].key, memory_order_acquire);
        if (k == handle)
            return &drk_registry_slots[i];
        if (k != 0)
            continue;
        if (!claim)
            return NULL;
        uintptr_t empty = 0;
        if (atomic_compare_exchange_strong(&drk_registry_slots[i].key, &empty, handle)) {
            *claimed = 1;
            return &drk_registry_slots[i];
        }
        if (empty == handle)
            return &drk_registry_slots[i];
    }
    return NULL;
}

/* The record of a slot, creating it with make() where this thread must: it
 * claimed the slot, or took over a retired one. Others spin for the
 * microseconds creation takes; they hold nothing the creator could need. */
static drk_kernel_record *slot_record(slot *s, int claimed, drk_kernel_record *(*make)(void *), void *arg)
{
    drk_kernel_record *r;
    for (;;) {
        if (claimed)
            break;
        r = atomic_load_explicit(&s->rec, memory_order_acquire);
        if (live(r))
            return r;
        if (r == REC_UNTRACKED)
            return NULL;
        if (r == REC_RETIRED && atomic_compare_exchange_strong(&s->rec, &r, REC_CREATING))
            break;
        __builtin_ia32_pause();
    }
    r = make(arg);
    atomic_store_explicit(&s->rec, r ? r : REC_UNTRACKED, memory_order_release);
    return r;
}

static drk_kernel_record *make_from_driver(void *arg)
{
    return record_from_driver(*(uintptr_t *)arg);
}

void drk_registry_launch_slow(uintptr_t handle, const drk_launch_shape *shape, unsigned thread)
{
    int claimed;
    slot *s = slot_find(handle, 1, &claimed);
    drk_kernel_record *r = s && !claimed ? atomic_load_explicit(&s->rec, memory_order_acquire) : NULL;
    if (!live(r)) {
        r = s ? slot_record(s, claimed, make_from_driver, &handle) : NULL;
        if (!r) {
            atomic_fetch_add_explicit(&untracked[shape->entry % DRK_REGISTRY_ENTRIES], 1, memory_order_relaxed);
            return;
        }
    }
    /* A kernel's first launch asks the driver what it knows of it, once:
     * the kernel is surely loaded now, and the driver may be gone at exit. */
    if (!atomic_load_explicit(&r->driver_asked, memory_order_relaxed) && !atomic_exchange(&r->driver_asked, 1))
        atomic_store_explicit(&r->driver, drk_driver_facts_ask(driver(), r->handle, r->kind), memory_order_release);
    int owned = thread < DRK_REGISTRY_SHARDS - 1;
    drk_kernel_counts *counts = &r->counts[owned ? thread : DRK_REGISTRY_SHARDS - 1];
    /* Shapes are compared directly (no hash on the launch path). A shape
     * being written is skipped; at worst a racing first launch takes a
     * second entry for the same shape, which the report merges. */
    for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++) {
        drk_shape_slot *c = &r->shapes[i];
        uint32_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == DRK_SHAPE_FREE) {
            if (!atomic_compare_exchange_strong(&c->state, &st, DRK_SHAPE_WRITING))
                goto taken;
            c->shape = *shape;
            atomic_store_explicit(&c->state, DRK_SHAPE_READY, memory_order_release);
            atomic_fetch_add_explicit(&shapes_added, 1, memory_order_release);
            drk_counter_add(&counts->shape[i], owned);
            return;
        }
    taken:
        if (st == DRK_SHAPE_READY && drk_same_shape(&c->shape, shape)) {
            drk_counter_add(&counts->shape[i], owned);
            return;
        }
    }
    drk_counter_add(&counts->other[shape->entry % DRK_REGISTRY_ENTRIES], owned);
}

struct bind_ctx {
    uintptr_t handle;
    drk_handle_kind kind;
    const char *name;
    uintptr_t owner;
};

static drk_kernel_record *make_bound(void *arg)
{
    struct bind_ctx *c = arg;
    return record_new(c->handle, c->kind, c->name, c->owner);
}

void drk_registry_bind(uintptr_t handle, drk_handle_kind kind, const char *name, uintptr_t owner)
{
    struct bind_ctx c = {handle, kind, name, owner};
    int claimed;
    slot *s = slot_find(handle, 1, &claimed);
    if (!s)
        return;
    drk_kernel_record *r = slot_record(s, claimed, make_bound, &c);
    if (claimed || !r)
        return;
    if (strcmp(r->name, name) == 0) {
        atomic_store_explicit(&r->owner, owner, memory_order_relaxed);
        return;
    }
    /* The handle value now names another kernel: a new record takes the
     * slot, the old one keeps its counts for the report. */
    drk_kernel_record *fresh = record_new(handle, kind, name, owner);
    if (fresh)
        atomic_store_explicit(&s->rec, fresh, memory_order_release);
}

void drk_record_learn_image(const drk_kernel_record *r, const struct drk_image_facts *facts)
{
    const struct drk_image_facts *none = NULL;
    if (r && facts)
        atomic_compare_exchange_strong(&((drk_kernel_record *)r)->image, &none, facts);
}

void drk_registry_learn_image(uintptr_t handle, const struct drk_image_facts *facts)
{
    drk_record_learn_image(drk_registry_find(handle), facts);
}

const drk_kernel_record *drk_registry_find(uintptr_t handle)
{
    int claimed;
    slot *s = slot_find(handle, 0, &claimed);
    drk_kernel_record *r = s ? atomic_load_explicit(&s->rec, memory_order_acquire) : NULL;
    return live(r) ? r : NULL;
}

void drk_registry_retire(uintptr_t owner)
{
    if (!owner)
        return;
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n; i++) {
        drk_kernel_record *r = atomic_load_explicit(&records[i], memory_order_acquire);
        if (!r || atomic_load_explicit(&r->owner, memory_order_relaxed) != owner)
            continue;
        int claimed;
        slot *s = slot_find(r->handle, 0, &claimed);
        drk_kernel_record *cur = r;
        if (s)
            atomic_compare_exchange_strong(&s->rec, &cur, REC_RETIRED);
    }
}

unsigned drk_registry_serve(uintptr_t handle, const drk_launch_shape *shape, uintptr_t fn)
{
    int claimed;
    slot *s = slot_find(handle, 0, &claimed);
    drk_kernel_record *r = s ? atomic_load_explicit(&s->rec, memory_order_acquire) : NULL;
    if (!live(r))
        return 0;
    unsigned n = 0;
    for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++) {
        if (atomic_load_explicit(&r->shapes[i].state, memory_order_acquire) != DRK_SHAPE_READY)
            break;
        const drk_launch_shape *sh = &r->shapes[i].shape;
        if (memcmp(sh->grid, shape->grid, sizeof sh->grid) == 0 && memcmp(sh->block, shape->block, sizeof sh->block) == 0 &&
            sh->shared_bytes == shape->shared_bytes) {
            atomic_store_explicit(&r->variant[i], fn, memory_order_release);
            n++;
        }
    }
    return n;
}

void drk_registry_variant_failed(drk_launch_site site, uintptr_t fn)
{
    if (!site.r)
        return;
    uintptr_t expected = fn;
    if (atomic_compare_exchange_strong(&site.r->variant[site.shape], &expected, 0))
        drk_log(DRK_LOG_INFO, "kernel %s: its variant failed to launch; the original serves it again", site.r->name);
}

size_t drk_registry_size(void)
{
    size_t n = atomic_load_explicit(&nrecords, memory_order_acquire);
    return n < RECORDS ? n : RECORDS;
}

/* Records whose creation is still under way read as empty ones. */
static const drk_kernel_record empty_record = {.name = ""};

const drk_kernel_record *drk_registry_at(size_t i)
{
    const drk_kernel_record *r = atomic_load_explicit(&records[i], memory_order_acquire);
    return r ? r : &empty_record;
}

uint64_t drk_record_shape_launches(const drk_kernel_record *r, int shape)
{
    uint64_t n = 0;
    for (int s = 0; s < DRK_REGISTRY_SHARDS; s++)
        n += atomic_load_explicit(&r->counts[s].shape[shape], memory_order_relaxed);
    return n;
}

uint64_t drk_record_other_launches(const drk_kernel_record *r)
{
    uint64_t n = 0;
    for (int s = 0; s < DRK_REGISTRY_SHARDS; s++)
        for (int e = 0; e < DRK_REGISTRY_ENTRIES; e++)
            n += atomic_load_explicit(&r->counts[s].other[e], memory_order_relaxed);
    return n;
}

uint64_t drk_record_launches(const drk_kernel_record *r)
{
    uint64_t n = drk_record_other_launches(r);
    for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++)
        n += drk_record_shape_launches(r, i);
    return n;
}

const drk_kernel_record *drk_registry_find_shape(const char *name, const uint32_t grid[3], const uint32_t block[3],
                                                 uint32_t shared_bytes, int *slot)
{
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n; i++) {
        const drk_kernel_record *r = drk_registry_at(i);
        if (!r || !r->name || strcmp(r->name, name) != 0)
            continue;
        for (int s = 0; s < DRK_SHAPES_PER_KERNEL; s++) {
            if (atomic_load_explicit(&r->shapes[s].state, memory_order_acquire) != DRK_SHAPE_READY)
                break;
            const drk_launch_shape *sh = &r->shapes[s].shape;
            if (memcmp(sh->grid, grid, sizeof sh->grid) == 0 && memcmp(sh->block, block, sizeof sh->block) == 0 &&
                sh->shared_bytes == shared_bytes) {
                if (slot)
                    *slot = s;
                return r;
            }
        }
    }
    return NULL;
}

uint64_t drk_registry_shapes_added(void) { return atomic_load_explicit(&shapes_added, memory_order_acquire); }

uint64_t drk_registry_untracked(void)
{
    uint64_t n = 0;
    for (int e = 0; e < DRK_REGISTRY_ENTRIES; e++)
        n += atomic_load_explicit(&untracked[e], memory_order_relaxed);
    return n;
}

uint64_t drk_registry_launches(void)
{
    uint64_t n = drk_registry_untracked();
    size_t size = drk_registry_size();
    for (size_t i = 0; i < size; i++)
        n += drk_record_launches(drk_registry_at(i));
    return n;
}

uint64_t drk_registry_entry_launches(unsigned entry)
{
    if (entry >= DRK_REGISTRY_ENTRIES)
        return 0;
    uint64_t n = atomic_load_explicit(&untracked[entry], memory_order_relaxed);
    size_t size = drk_registry_size();
    for (size_t i = 0; i < size; i++) {
        const drk_kernel_record *r = drk_registry_at(i);
        for (int k = 0; k < DRK_SHAPES_PER_KERNEL; k++)
            if (atomic_load_explicit(&r->shapes[k].state, memory_order_acquire) == DRK_SHAPE_READY &&
                r->shapes[k].shape.entry == entry)
                n += drk_record_shape_launches(r, k);
        for (int s = 0; s < DRK_REGISTRY_SHARDS; s++)
            n += atomic_load_explicit(&r->counts[s].other[entry], memory_order_relaxed);
    }
    return n;
}

void drk_registry_reset_counts(void)
{
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n; i++) {
        drk_kernel_record *r = atomic_load_explicit(&records[i], memory_order_acquire);
        for (int s = 0; r && s < DRK_REGISTRY_SHARDS; s++) {
            for (int e = 0; e < DRK_REGISTRY_ENTRIES; e++)
                atomic_store_explicit(&r->counts[s].other[e], 0, memory_order_relaxed);
            for (int j = 0; j < DRK_SHAPES_PER_KERNEL; j++)
                atomic_store_explicit(&r->counts[s].shape[j], 0, memory_order_relaxed);
        }
        /* The parent's variants are functions of its contexts: a child runs
         * the program's own. */
        for (int j = 0; r && j < DRK_SHAPES_PER_KERNEL; j++)
            atomic_store_explicit(&r->variant[j], 0, memory_order_relaxed);
    }
    for (int e = 0; e < DRK_REGISTRY_ENTRIES; e++)
        atomic_store_explicit(&untracked[e], 0, memory_order_relaxed);
}
