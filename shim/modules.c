#include "shim/modules.h"

#include <cuda.h>
#include <limits.h>
#include <stdatomic.h>
#include <time.h>

#include "base/clock.h"
#include "base/options.h"
#include "evolve/cupti.h"
#include "evolve/engine.h"
#include "evolve/gputime.h"
#include "evolve/loaded.h"
#include "evolve/occupancy.h"
#include "interpose/table.h"

static atomic_int reserved_shared = -1;

/* The SM images are read for: the current context's device, else device 0.
 * Also the shared memory the system reserves per block, which a cubin's
 * shared size includes and the driver's SHARED_SIZE_BYTES does not. */
static void learn_sm(void)
{
    static atomic_int learned;
    if (atomic_load_explicit(&learned, memory_order_acquire))
        return;
    const drk_driver *drv = drk_driver_table();
    CUdevice dev = 0;
    int major = 0, minor = 0;
    if (!drv->device_get_attribute)
        return;
    if (!drv->ctx_get_device || drv->ctx_get_device(&dev) != CUDA_SUCCESS)
        if (!drv->device_get || drv->device_get(&dev, 0) != CUDA_SUCCESS)
            return;
    if (drv->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        drv->device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
        return;
    int reserved = 0;
    if (drv->device_get_attribute(&reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev) ==
        CUDA_SUCCESS)
        atomic_store(&reserved_shared, reserved);
    drk_images_set_sm((unsigned)(major * 10 + minor));
    atomic_store_explicit(&learned, 1, memory_order_release);
}

int drk_modules_reserved_shared(void) { return atomic_load(&reserved_shared); }

uint64_t drk_modules_clock(void) { return drk_mono_ns(); }

void drk_modules_loaded(int r, const void *const *owner, const char *how, const void *data, const char *path,
                        const drk_images_load *how_loaded, uint64_t load_ns)
{
    if (r != CUDA_SUCCESS || !owner || !*owner || !drk_opt_num(DRK_OPT_IMAGES))
        return;
    learn_sm();
    unsigned jit = drk_images_loaded_ex((uintptr_t)*owner, how, data, path, how_loaded);
    /* The driver compiled PTX in this load: time lost to its JIT. */
    uint64_t at = jit ? drk_cupti_now() : 0;
    if (at)
        drk_gputime_jit(at, how, jit, load_ns);
}

void drk_modules_unloading(const void *owner)
{
    drk_engine_unloading((uintptr_t)owner);
    /* The shapes launched since drk's last tick, while their handles are
     * whole (a program that loads, launches and unloads within a tick would
     * leave them unknown); only while GPU times are taken. */
    if (drk_cupti_running())
        drk_occupancy_update(UINT_MAX);
}

void drk_modules_unloaded(int r, const void *owner)
{
    if (r != CUDA_SUCCESS)
        return;
    drk_registry_retire((uintptr_t)owner);
    drk_images_unloaded((uintptr_t)owner);
}

void drk_modules_bound(int r, const void *const *handle, drk_handle_kind kind, const char *name, const void *owner)
{
    if (r != CUDA_SUCCESS || !handle || !*handle || !name)
        return;
    drk_registry_bind((uintptr_t)*handle, kind, name, (uintptr_t)owner);
    drk_registry_learn_image((uintptr_t)*handle, drk_images_facts((uintptr_t)owner, name, 0));
}

/* The function of a kernel is that kernel in the current context: same
 * name, same library, same facts. */
void drk_modules_function_of(int r, const void *const *fn, const void *kernel)
{
    if (r != CUDA_SUCCESS || !fn || !*fn)
        return;
    const drk_kernel_record *k = drk_registry_find((uintptr_t)kernel);
    const char *name = k ? k->name : NULL;
    const drk_driver *drv = drk_driver_table();
    if (!name && (!drv->kernel_get_name || drv->kernel_get_name(&name, (CUkernel)kernel) != CUDA_SUCCESS))
        return;
    uintptr_t owner = k ? atomic_load_explicit(&k->owner, memory_order_relaxed) : 0;
    drk_registry_bind((uintptr_t)*fn, DRK_HANDLE_FUNCTION, name, owner);
    const drk_image_facts *f = k ? atomic_load_explicit(&k->image, memory_order_acquire) : NULL;
    drk_registry_learn_image((uintptr_t)*fn, f ? f : drk_images_facts(owner, name, 0));
}

void drk_modules_complete(void)
{
    size_t n = drk_registry_size();
    for (size_t i = 0; i < n; i++) {
        const drk_kernel_record *r = drk_registry_at(i);
        if (!r->handle || atomic_load_explicit(&r->image, memory_order_acquire))
            continue;
        /* Deferred images, and at last the loaded objects' own fatbins,
         * are read for launched kernels only. */
        int launched = drk_record_launches(r) > 0;
        uintptr_t owner = atomic_load_explicit(&r->owner, memory_order_relaxed);
        const drk_image_facts *f = drk_images_facts(owner, r->name, launched);
        if (!f && launched && r->kind != DRK_HANDLE_UNKNOWN)
            f = drk_images_facts_anywhere(r->name);
        drk_record_learn_image(r, f);
    }
}
