/* Theoretical occupancy worked out on the stand-in driver (evolve/occupancy.c)
 * from a thread with no context current, as drk's own thread is: each limit
 * (registers, shared memory, block size) named, a CUkernel through its
 * function in the pushed primary context, the context stack and the
 * primary context's retains left as they were, nothing asked again when
 * nothing is new, a kernel reloaded with more registers at the same shape,
 * and failures (the calculator refusing, no active primary context, an
 * unloaded module) leaving the occupancy unknown with one log line in all. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "evolve/gputime.h"
#include "evolve/occupancy.h"
#include "evolve/registry.h"
#include "tests/fakecuda/fakecuda.h"
#include "tests/unit/check.h"

static drk_driver table;

/* The stand-in's entry points, by the table's own list. */
static void fill(void)
{
#define FILL_(member, name, params) table.member = (__typeof__(table.member))dlsym(RTLD_DEFAULT, #name);
    DRK_DRIVER_ENTRIES(FILL_)
#undef FILL_
}

static void heavy(const fakecuda_thread *t) { (void)t; }

static drk_launch_shape shape(unsigned threads, unsigned dyn) { return (drk_launch_shape){{4, 1, 1}, {threads, 1, 1}, dyn, 0}; }

static drk_time_key key_of(const char *name, const drk_launch_shape *s)
{
    return (drk_time_key){name, {s->grid[0], s->grid[1], s->grid[2]}, {s->block[0], s->block[1], s->block[2]},
                          s->shared_bytes};
}

/* A launch as the hooks record it: on this (the program's) thread. */
static void launch(const void *handle, drk_handle_kind kind, const char *name, const void *owner,
                   const drk_launch_shape *s)
{
    drk_registry_bind((uintptr_t)handle, kind, name, (uintptr_t)owner);
    drk_registry_launch((uintptr_t)handle, s, 100);
}

/* drk's thread: a thread of its own, no context current. */
static unsigned worked;
static CUcontext left_current;

static void *worker(void *arg)
{
    (void)arg;
    worked = drk_occupancy_update(1000);
    table.ctx_get_current(&left_current);
    return NULL;
}

static unsigned update(void)
{
    pthread_t t;
    left_current = (CUcontext)1;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
        abort();
    CHECK(left_current == NULL); /* what was pushed was popped */
    return worked;
}

static int occupancy(const char *name, const drk_launch_shape *s, drk_occupancy *o)
{
    drk_time_key k = key_of(name, s);
    return drk_gputime_occupancy_of(&k, o);
}

static int log_lines(int fd, const char *what)
{
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    int lines = 0;
    for (const char *p = buf; (p = strstr(p, what)) != NULL; p++)
        lines++;
    return lines;
}

int main(void)
{
    char path[] = "/tmp/drk-test-occupancy-XXXXXX";
    int log = mkstemp(path);
    CHECK(log >= 0);
    unlink(path);
    drk_log_set_fd(log);
    atomic_store(&drk_log_level, DRK_LOG_INFO);

    fill();
    CHECK(table.occupancy_max_active_blocks && table.ctx_push_current && table.kernel_get_function);
    CUdevice dev;
    CUcontext primary;
    CUmodule mod;
    CUfunction empty, vec_add, heavy32, heavy128;
    CHECK(fakecuda_register_kernel("heavy", heavy) == 0);
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
          cuDevicePrimaryCtxRetain(&primary, dev) == CUDA_SUCCESS && cuCtxSetCurrent(primary) == CUDA_SUCCESS);
    CHECK(cuModuleLoadData(&mod, "DRKFAKE1\nempty\nvec_add\nheavy\n") == CUDA_SUCCESS &&
          cuModuleGetFunction(&empty, mod, "empty") == CUDA_SUCCESS &&
          cuModuleGetFunction(&vec_add, mod, "vec_add") == CUDA_SUCCESS &&
          cuModuleGetFunction(&heavy32, mod, "heavy") == CUDA_SUCCESS);
    drk_gputime_reset(0);
    drk_registry_configure(&table);
    drk_occupancy_configure(&table);
    CHECK(update() == 0); /* nothing launched */

    /* Each limit, from the stand-in's sm_90 (64 warps, 32 blocks, 64K
     * registers, 228 KiB of shared memory an SM). */
    drk_launch_shape b256 = shape(256, 0), b768 = shape(768, 0), smem = shape(256, 40960), b32 = shape(32, 0);
    launch(empty, DRK_HANDLE_FUNCTION, "empty", mod, &b256);
    launch(empty, DRK_HANDLE_FUNCTION, "empty", mod, &b768);
    launch(empty, DRK_HANDLE_FUNCTION, "empty", mod, &b32);
    launch(vec_add, DRK_HANDLE_FUNCTION, "vec_add", mod, &smem);
    launch(heavy32, DRK_HANDLE_FUNCTION, "heavy", mod, &b256);
    unsigned long long retains = fakecuda_calls("cuDevicePrimaryCtxRetain");
    unsigned long long releases = fakecuda_calls("cuDevicePrimaryCtxRelease_v2");
    CHECK(update() == 5);
    CHECK(fakecuda_calls("cuDevicePrimaryCtxRetain") - retains == 1); /* once for the whole update */
    CHECK(fakecuda_calls("cuDevicePrimaryCtxRelease_v2") - releases == 1);
    CHECK(fakecuda_calls("cuCtxPushCurrent_v2") == fakecuda_calls("cuCtxPopCurrent_v2"));
    drk_occupancy o;
    CHECK(occupancy("empty", &b256, &o) && o.theoretical == 1.0 && o.blocks_per_sm == 8 && o.warps_per_block == 8 &&
          o.max_warps_per_sm == 64 && o.regs == 32 && o.limit == DRK_OCC_LIMIT_NONE);
    CHECK(occupancy("empty", &b768, &o) && o.theoretical == 0.75 && o.blocks_per_sm == 2 &&
          o.limit == DRK_OCC_LIMIT_WARPS);
    CHECK(occupancy("empty", &b32, &o) && o.theoretical == 0.5 && o.limit == DRK_OCC_LIMIT_BLOCKS);
    /* 40 KiB and the 1 KiB reserve a block: 5 blocks of 8 warps. */
    CHECK(occupancy("vec_add", &smem, &o) && o.theoretical == 40.0 / 64 && o.blocks_per_sm == 5 &&
          o.dynamic_shared == 40960 && o.limit == DRK_OCC_LIMIT_SHARED);
    CHECK(occupancy("heavy", &b256, &o) && o.theoretical == 1.0 && o.regs == 32);
    char text[160];
    CHECK(strcmp(drk_occupancy_limit_text(&o, text, sizeof text), "nothing: every warp of the SM taken") == 0);

    /* Nothing new: no driver call at all. */
    fakecuda_reset_calls();
    CHECK(update() == 0 && fakecuda_calls("cuOccupancyMaxActiveBlocksPerMultiprocessor") == 0 &&
          fakecuda_calls("cuDevicePrimaryCtxGetState") == 0);
    /* A known shape launched again is not new either. */
    launch(empty, DRK_HANDLE_FUNCTION, "empty", mod, &b256);
    CHECK(update() == 0);

    /* `heavy` reloaded, built with 128 registers: a new handle at the same
     * name and shape; its occupancy is the shape's latest, a variant of its
     * own (the 32-register one stays for records that say they ran it). */
    CUmodule mod2;
    CHECK(fakecuda_set_kernel_resources("heavy", 128, 0) == 0);
    CHECK(cuModuleLoadData(&mod2, "DRKFAKE1\nheavy\n") == CUDA_SUCCESS &&
          cuModuleGetFunction(&heavy128, mod2, "heavy") == CUDA_SUCCESS && heavy128 != heavy32);
    launch(heavy128, DRK_HANDLE_FUNCTION, "heavy", mod2, &b256);
    CHECK(update() == 1);
    CHECK(occupancy("heavy", &b256, &o) && o.theoretical == 0.25 && o.regs == 128 && o.blocks_per_sm == 2 &&
          o.limit == DRK_OCC_LIMIT_REGISTERS);
    CHECK(strcmp(drk_occupancy_limit_text(&o, text, sizeof text), "registers: 128 a thread") == 0);

    /* A CUkernel: its function in the pushed context. */
    CUlibrary lib;
    CUkernel kern;
    CHECK(cuLibraryLoadData(&lib, "DRKFAKE1\nscale\n", NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS &&
          cuLibraryGetKernel(&kern, lib, "scale") == CUDA_SUCCESS);
    launch(kern, DRK_HANDLE_KERNEL, "scale", lib, &b768);
    unsigned long long got_fn = fakecuda_calls("cuKernelGetFunction");
    CHECK(update() == 1 && fakecuda_calls("cuKernelGetFunction") == got_fn + 1);
    CHECK(occupancy("scale", &b768, &o) && o.theoretical == 0.75);
    CHECK(log_lines(log, "occupancy:") == 0); /* all went well */

    /* The calculator refuses: unknown, one line, however many kernels. */
    drk_launch_shape b512 = shape(512, 0), b128 = shape(128, 0);
    CHECK(fakecuda_inject_error("cuOccupancyMaxActiveBlocksPerMultiprocessor", CUDA_ERROR_UNKNOWN, 3) == 0);
    launch(empty, DRK_HANDLE_FUNCTION, "empty", mod, &b512);
    launch(vec_add, DRK_HANDLE_FUNCTION, "vec_add", mod, &b512);
    launch(kern, DRK_HANDLE_KERNEL, "scale", lib, &b512);
    CHECK(update() == 3);
    CHECK(!occupancy("empty", &b512, &o) && !occupancy("vec_add", &b512, &o) && !occupancy("scale", &b512, &o));
    CHECK(log_lines(log, "occupancy:") == 1);
    CHECK(log_lines(log, "cuOccupancyMaxActiveBlocksPerMultiprocessor failed (999)") == 1);
    CHECK(update() == 0); /* tried once: not again */

    /* An unloaded module's kernels: their handles may be gone, not asked. */
    launch(heavy128, DRK_HANDLE_FUNCTION, "heavy", mod2, &b128);
    drk_registry_retire((uintptr_t)mod2);
    CHECK(cuModuleUnload(mod2) == CUDA_SUCCESS);
    fakecuda_reset_calls();
    CHECK(update() == 1 && fakecuda_calls("cuFuncGetAttribute") == 0 && !occupancy("heavy", &b128, &o));

    /* The program released its primary context: drk does not make one. */
    launch(empty, DRK_HANDLE_FUNCTION, "empty", mod, &b128);
    CHECK(cuDevicePrimaryCtxRelease_v2(dev) == CUDA_SUCCESS);
    fakecuda_reset_calls();
    CHECK(update() == 1 && fakecuda_calls("cuDevicePrimaryCtxRetain") == 0 && !occupancy("empty", &b128, &o));
    CHECK(log_lines(log, "occupancy:") == 1); /* still the one line */

    drk_gputime_reset(0);
    close(log);
    return CHECK_DONE();
}
