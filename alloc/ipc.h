/* IPC on pool memory: cuIpcGetMemHandle / cuIpcOpenMemHandle /
 * cuIpcCloseMemHandle for allocations drk's device pool made, between two
 * processes that both run drk. The driver's legacy IPC cannot share
 * virtual-memory-managed pages, so drk exports the pages under the
 * allocation as POSIX file descriptors and hands them to the importing
 * process, which maps them into a range of its own.
 *
 * A drk handle is told apart from the driver's by its first bytes; a
 * process without drk that receives one gets the driver's error for an
 * invalid handle. */
#ifndef DRK_ALLOC_IPC_H
#define DRK_ALLOC_IPC_H

#include <cuda.h>

#include "base/driver.h"

/* The driver table the IPC calls use; before any other call. */
void drk_ipc_configure(const drk_driver *drv);

/* A handle for the pool allocation starting at `base`: CUDA_SUCCESS, or the
 * error the program gets (with one log line saying why and how to keep such
 * allocations out of the pool). */
CUresult drk_ipc_export(CUipcMemHandle *handle, CUdeviceptr base);

/* Whether `handle` is one of drk's. */
int drk_ipc_is_drk_handle(const CUipcMemHandle *handle);

/* Maps the allocation a drk handle names into this process. */
CUresult drk_ipc_import(CUdeviceptr *ptr, const CUipcMemHandle *handle, unsigned int flags);

/* Unmaps what drk_ipc_import mapped at `ptr`: 1 with the result in *r, or 0
 * when `ptr` is not one of drk's imports (the driver's to close). */
int drk_ipc_close(CUdeviceptr ptr, CUresult *r);

/* Whether `ptr` lies in an allocation this process imported: its start
 * (the pointer cuIpcOpenMemHandle gave) and size, for the pointer queries,
 * which would otherwise see the pages' mappings. */
int drk_ipc_imported(CUdeviceptr ptr, CUdeviceptr *base, size_t *size);

/* In a fork child: the parent's exports and imports are not the child's. */
void drk_ipc_after_fork_child(void);

#endif
