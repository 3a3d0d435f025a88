/* What drk knows of a kernel beyond its name: what its device image says,
 * and what the driver says. Both are made once per kernel and live until
 * exit (arena memory), so records share them and a launch may read them. */
#ifndef DRK_EVOLVE_FACTS_H
#define DRK_EVOLVE_FACTS_H

#include <stdint.h>

#include "base/driver.h"
#include "evolve/image/image.h"
#include "evolve/image/kernel.h"
#include "evolve/image/ptx_flow.h"

typedef struct drk_image_facts {
    const char *image;        /* the load it came from: "cuLibraryLoadData #3", a path */
    uint32_t nparams;
    const drk_param *params;
    uint32_t params_size;
    uint32_t regs, shared_bytes, local_bytes, const_bytes, max_threads; /* DRK_UNKNOWN_U32 if unknown */
    uint32_t reqntid[3];
    uint8_t from_ptx;         /* the layout came from PTX (no SASS for the device in the image) */
    uint16_t source_arch;
    uint8_t nsass, nptx;
    uint16_t sass[DRK_IMAGE_MAX_ARCHS];
    uint16_t ptx[DRK_IMAGE_MAX_ARCHS], ptx_isa[DRK_IMAGE_MAX_ARCHS];
    uint8_t ptx_for_device;   /* PTX that the device (drk_images_sm) can JIT */
    const drk_ptx_flow *flow; /* its PTX's parameter classes and evolvability; NULL without PTX */
} drk_image_facts;

#define DRK_DRIVER_UNKNOWN INT32_MIN

typedef struct drk_driver_facts {
    int32_t nparams;          /* DRK_DRIVER_UNKNOWN: the driver cannot say */
    const drk_param *params;  /* offset and size (cuFuncGetParamInfo / cuKernelGetParamInfo) */
    int32_t regs, shared_bytes, local_bytes, const_bytes, max_threads, ptx_version, binary_version;
    int32_t device;           /* of the context current at its first launch */
} drk_driver_facts;

/* The image facts of `k`, copied into the arena; NULL if memory ran out. */
const drk_image_facts *drk_image_facts_make(const drk_image_kernel *k, const char *image, unsigned sm);

/* Asks the driver about a handle (a CUfunction or CUkernel, `kind` as the
 * registry knows it). Lock-free and malloc-free: it may run in a launch's
 * slow path. NULL if memory ran out. */
const drk_driver_facts *drk_driver_facts_ask(const drk_driver *drv, uintptr_t handle, int kind);

/* Whether the image's parameter layout is the driver's: 1 equal, 0 differs,
 * -1 cannot tell (either side unknown). */
int drk_facts_params_match(const drk_image_facts *img, const drk_driver_facts *drv);

#endif
