/* Cubin ELF (EM_CUDA): the SM it is for (from e_flags, read according to
 * EI_ABIVERSION), and per kernel the parameter layout (.nv.info.<k>:
 * KPARAM_INFO and KPARAM_INFO_V2, PARAM_CBANK, CBANK_PARAM_SIZE), limits
 * (MAX_THREADS, REQNTID), registers (.nv.info REGCOUNT), static shared
 * memory (.nv.shared.<k>) and stack frame. Read with libelf from a private
 * writable copy; every record is bounded by its section. */
#ifndef DRK_EVOLVE_CUBIN_H
#define DRK_EVOLVE_CUBIN_H

#include <stddef.h>
#include <stdint.h>

#include "evolve/image/kernel.h"

#ifndef EM_CUDA
#define EM_CUDA 190
#endif

typedef struct drk_cubin {
    unsigned sm;          /* 90 for sm_90 */
    unsigned virtual_sm;  /* from e_flags where the ABI says, else 0 */
    unsigned abi;         /* EI_ABIVERSION */
    unsigned elf_type;    /* ET_EXEC, or ET_REL for -rdc objects */
    size_t nkernels;
    drk_kernel_info *kernels; /* in section order */
} drk_cubin;

/* Reads the cubin at [data, data+size); the bytes are copied first, so
 * `data` may be read-only. 0, or -1 with a message in err (which names what
 * was wrong and where). Kernels are the STT_FUNC symbols marked
 * STO_CUDA_ENTRY (st_other 0x10) in .text.<name>. Parameter offsets are
 * KPARAM's as stored: relative to PARAM_CBANK's base, i.e. offsets in the
 * kernelParams buffer. A parameter is DRK_PARAM_POINTER only when its
 * KPARAM space is non-zero (a PTX .ptr: nvcc writes it for sm_100, not for
 * sm_90), else DRK_PARAM_KIND_UNKNOWN. shared_bytes is .nv.shared.<k>'s size,
 * what cuobjdump reports as SHARED (1 KiB reserved included on sm_90+). */
int drk_cubin_read(const void *data, size_t size, drk_cubin *out, char *err, size_t errlen);
/* The same on bytes the caller gives libelf to write into (a private,
 * writable buffer, such as a decompressed payload): no copy is made. */
int drk_cubin_read_private(void *data, size_t size, drk_cubin *out, char *err, size_t errlen);
void drk_cubin_free(drk_cubin *c);

/* A fingerprint of what kernel `kernel` does in this cubin: its code, the
 * module's device functions, its registers, memory and limits; not the
 * options recorded beside them. Two builds with the same digest run the
 * same instructions on the same resources (a register cap above what the
 * compiler wanted makes the same cubin but for the cap it records). 0, or
 * -1 with a message in err. */
int drk_cubin_code_digest(const void *data, size_t size, const char *kernel, uint64_t *digest, char *err,
                          size_t errlen);

/* Whether the bytes start like a cubin (64-bit little-endian ELF, EM_CUDA). */
int drk_is_cubin(const void *data, size_t size);

/* The extent of an ELF image whose length nobody passed (cuModuleLoadData):
 * the furthest end of its headers, sections and program headers, read from
 * at most `avail` bytes. 0, or -1 if it is not a sane ELF within `avail`. */
int drk_elf_extent(const void *data, size_t avail, size_t *size);

#endif
