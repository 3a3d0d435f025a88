#define _GNU_SOURCE
#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "../shim/log.h"
#include "names.h"

/* Fixed tables in .bss: untouched pages cost no memory, and a launch never
 * allocates. 32768 kernels is far beyond any program seen (PyTorch runs a
 * few thousand); launches past it are counted as untracked. */
#define SLOT_BITS 16
#define SLOTS (1u << SLOT_BITS)
#define RECORDS (1u << 15)

/* What a slot holds besides a record. */
#define REC_CREATING ((drk_kernel_record *)0)
#define REC_RETIRED ((drk_kernel_record *)1)
#define REC_UNTRACKED ((drk_kernel_record *)2) /* no room for its record */

static inline int live(const drk_kernel_record *r) { return (uintptr_t)r > (uintptr_t)REC_UNTRACKED; }

typedef struct slot {
    _Atomic uintptr_t key;
    _Atomic(drk_kernel_record *) rec;
} slot;

static slot slots[SLOTS];
static drk_kernel_record records[RECORDS];
static atomic_size_t nrecords;
static _Atomic uint64_t untracked;
static atomic_int full_logged;

static inline size_t slot_of(uintptr_t h)
{
    uint64_t x = (uint64_t)h * 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> (64 - SLOT_BITS));
}

static drk_kernel_record *record_new(uintptr_t handle, drk_handle_kind kind, const char *name, uintptr_t owner)
{
    size_t i = atomic_fetch_add_explicit(&nrecords, 1, memory_order_relaxed);
    if (i >= RECORDS) {
        atomic_store_explicit(&nrecords, RECORDS, memory_order_relaxed);
        if (!atomic_exchange(&full_logged, 1))
            drk_log(DRK_LOG_WARN, "kernel registry full (%u kernels); further kernels are counted as untracked",
                    RECORDS);
        return NULL;
    }
    drk_kernel_record *r = &records[i];
    r->handle = handle;
    r->kind = kind;
    r->name = drk_name_copy(name);
    if (!r->name)
        r->name = "?";
    atomic_store_explicit(&r->owner, owner, memory_order_relaxed);
    return r;
}

/* The driver's name for a handle seen first at launch. cudart passes
 * CUkernels as CUfunctions, so ask for both. */
static drk_kernel_record *record_from_driver(const drk_driver *drv, uintptr_t handle)
{
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
    size_t i = slot_of(handle);
    for (size_t probe = 0; probe < SLOTS; probe++, i = (i + 1) & (SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
        if (k == handle)
            return &slots[i];
        if (k != 0)
            continue;
        if (!claim)
            return NULL;
        uintptr_t empty = 0;
        if (atomic_compare_exchange_strong(&slots[i].key, &empty, handle)) {
            *claimed = 1;
            return &slots[i];
        }
        if (empty == handle)
            return &slots[i];
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

struct launch_ctx {
    const drk_driver *(*driver)(void);
    uintptr_t handle;
};

static drk_kernel_record *make_from_driver(void *arg)
{
    struct launch_ctx *c = arg;
    return record_from_driver(c->driver(), c->handle);
}

static inline int same_shape(const drk_launch_shape *a, const drk_launch_shape *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

void drk_registry_launch(const drk_driver *(*driver)(void), uintptr_t handle, const drk_launch_shape *shape)
{
    int claimed;
    slot *s = slot_find(handle, 1, &claimed);
    drk_kernel_record *r = s && !claimed ? atomic_load_explicit(&s->rec, memory_order_acquire) : NULL;
    if (!live(r)) {
        struct launch_ctx c = {driver, handle};
        r = s ? slot_record(s, claimed, make_from_driver, &c) : NULL;
        if (!r) {
            atomic_fetch_add_explicit(&untracked, 1, memory_order_relaxed);
            return;
        }
    }
    /* Shapes are compared directly (no hash on the launch path). A shape
     * being written is skipped; at worst a racing first launch takes a
     * second entry for the same shape, which the report merges. */
    for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++) {
        drk_shape_count *c = &r->shapes[i];
        uint32_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == DRK_SHAPE_FREE) {
            if (!atomic_compare_exchange_strong(&c->state, &st, DRK_SHAPE_WRITING))
                goto taken;
            c->shape = *shape;
            atomic_fetch_add_explicit(&c->launches, 1, memory_order_relaxed);
            atomic_store_explicit(&c->state, DRK_SHAPE_READY, memory_order_release);
            return;
        }
    taken:
        if (st == DRK_SHAPE_READY && same_shape(&c->shape, shape)) {
            atomic_fetch_add_explicit(&c->launches, 1, memory_order_relaxed);
            return;
        }
    }
    atomic_fetch_add_explicit(&r->other_launches, 1, memory_order_relaxed);
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
        drk_kernel_record *r = &records[i];
        if (atomic_load_explicit(&r->owner, memory_order_relaxed) != owner)
            continue;
        int claimed;
        slot *s = slot_find(r->handle, 0, &claimed);
        drk_kernel_record *cur = r;
        if (s)
            atomic_compare_exchange_strong(&s->rec, &cur, REC_RETIRED);
    }
}

size_t drk_registry_size(void)
{
    size_t n = atomic_load_explicit(&nrecords, memory_order_acquire);
    return n < RECORDS ? n : RECORDS;
}

const drk_kernel_record *drk_registry_at(size_t i) { return &records[i]; }

uint64_t drk_record_launches(const drk_kernel_record *r)
{
    uint64_t n = atomic_load_explicit(&r->other_launches, memory_order_relaxed);
    for (int i = 0; i < DRK_SHAPES_PER_KERNEL; i++)
        n += atomic_load_explicit(&r->shapes[i].launches, memory_order_relaxed);
    return n;
}

uint64_t drk_registry_untracked(void) { return atomic_load_explicit(&untracked, memory_order_relaxed); }

void drk_registry_reset_counts(void)
{
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n; i++) {
        atomic_store_explicit(&records[i].other_launches, 0, memory_order_relaxed);
        for (int j = 0; j < DRK_SHAPES_PER_KERNEL; j++)
            atomic_store_explicit(&records[i].shapes[j].launches, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&untracked, 0, memory_order_relaxed);
}
