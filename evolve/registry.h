/* The kernel registry: every kernel handle a program launches or looks up,
 * mapped to one record (name, owner, launches by shape). A launch finds its
 * record in O(1) without locks; the first launch of an unknown handle asks
 * the driver for its name. */
#ifndef DRK_EVOLVE_REGISTRY_H
#define DRK_EVOLVE_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../shim/driver.h"

typedef enum drk_handle_kind {
    DRK_HANDLE_UNKNOWN,  /* seen only at launch, driver could not name it */
    DRK_HANDLE_FUNCTION, /* a CUfunction */
    DRK_HANDLE_KERNEL,   /* a CUkernel (also when passed as a CUfunction) */
} drk_handle_kind;

typedef struct drk_launch_shape {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes; /* dynamic shared memory */
} drk_launch_shape;

#define DRK_SHAPES_PER_KERNEL 8

enum { DRK_SHAPE_FREE, DRK_SHAPE_WRITING, DRK_SHAPE_READY };

typedef struct drk_shape_count {
    _Atomic uint32_t state; /* DRK_SHAPE_*: shape is readable once READY */
    drk_launch_shape shape;
    _Atomic uint64_t launches;
} drk_shape_count;

typedef struct drk_kernel_record {
    uintptr_t handle;
    _Atomic uintptr_t owner; /* CUmodule or CUlibrary, 0 if unknown */
    const char *name;
    drk_handle_kind kind;
    _Atomic uint64_t other_launches; /* launches in shapes beyond the first 8 */
    drk_shape_count shapes[DRK_SHAPES_PER_KERNEL];
} drk_kernel_record;

/* A successful launch of `handle` (a CUfunction or a CUkernel). `driver`
 * is called only for a handle seen for the first time, to name it. */
void drk_registry_launch(const drk_driver *(*driver)(void), uintptr_t handle, const drk_launch_shape *shape);

/* A handle the driver just returned for a named kernel (cuModuleGetFunction,
 * cuLibraryGetKernel, cuKernelGetFunction). A handle value reused for
 * another kernel gets a new record. */
void drk_registry_bind(uintptr_t handle, drk_handle_kind kind, const char *name, uintptr_t owner);

/* The record of a handle, or NULL; never creates one. */
const drk_kernel_record *drk_registry_find(uintptr_t handle);

/* The module or library `owner` was unloaded: its handles may be reused, so
 * their next launch is looked up afresh. Records stay for the report. */
void drk_registry_retire(uintptr_t owner);

/* Records in creation order, for the report. */
size_t drk_registry_size(void);
const drk_kernel_record *drk_registry_at(size_t i);
uint64_t drk_record_launches(const drk_kernel_record *r);
/* Launches of kernels that found no room in the registry. */
uint64_t drk_registry_untracked(void);

void drk_registry_reset_counts(void);

#endif
