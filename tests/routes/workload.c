/* cuda.h's internal mode declares every exported ABI form under its exact
 * name, so each call below is typed as the form it calls. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include "tests/routes/workload.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const route_fn_name[R_COUNT] = {
#define NAME_HOOKED_(name, body, family) #name,
#define NAME_HELPER_(name) #name,
    DRK_HOOKS(NAME_HOOKED_) ROUTE_HELPERS(NAME_HELPER_)
#undef NAME_HOOKED_
#undef NAME_HELPER_
};

static const route_api *api;
static unsigned long long own[R_COUNT];
static int failures;

enum { K_VEC_ADD, K_SCALE, K_FILL, K_EMPTY, K_COUNT };
static const char *const kernel_name[K_COUNT] = {"vec_add", "scale", "fill", "empty"};
static unsigned long long kernel_launches[K_COUNT], failed_launches;

enum { M_DEVICE, M_PITCH, M_ASYNC, M_POOL, M_HOST, M_COUNT };
static const char *const mem_kind[M_COUNT] = {"device", "pitch", "async", "pool_async", "host"};
static struct {
    unsigned long long allocs, bytes, frees, failed_frees;
} mem[M_COUNT];

static int checked(route_fn f, CUresult got, CUresult want, int line)
{
    own[f]++;
    if (got != want) {
        fprintf(stderr, "workload.c:%d: %s returned %d, expected %d\n", line, route_fn_name[f], (int)got,
                (int)want);
        failures++;
    }
    return got == want;
}

#define FN(name) ((__typeof__(&name))api->fn[R_##name])
#define CALL(name, ...) checked(R_##name, FN(name)(__VA_ARGS__), CUDA_SUCCESS, __LINE__)
#define CALL_FAILS(name, err, ...) checked(R_##name, FN(name)(__VA_ARGS__), err, __LINE__)

static void expect(int cond, const char *what, int line)
{
    if (!cond) {
        fprintf(stderr, "workload.c:%d: check failed: %s\n", line, what);
        failures++;
    }
}
#define EXPECT(cond) expect((cond), #cond, __LINE__)

static const char image[] = "DRKFAKE1\nvec_add\nscale\nfill\nempty\n";
/* A real PTX image of vec_add, which drk reads (the stand-in accepts PTX):
 * its layout must match what the driver says (8, 8, 8, 4 bytes). */
static const char ptx_image[] = "//\n// vec_add, as nvcc would write it\n//\n.version 8.8\n.target sm_90\n"
                                ".address_size 64\n\n.visible .entry vec_add(\n"
                                "\t.param .u64 .ptr .global .align 4 vec_add_param_0,\n"
                                "\t.param .u64 .ptr .global .align 4 vec_add_param_1,\n"
                                "\t.param .u64 .ptr .global .align 4 vec_add_param_2,\n"
                                "\t.param .u32 vec_add_param_3\n)\n{\n\tret;\n}\n";

typedef struct kernels {
    CUmodule mod[4];
    CUlibrary lib[2];
    CUfunction add, scale, fill, empty, lib_add_fn;
    CUkernel lib_add, lib_empty;
} kernels;

static void load_kernels(kernels *k, const char *image_file)
{
    CALL(cuModuleLoad, &k->mod[0], image_file);
    CALL(cuModuleLoadData, &k->mod[1], ptx_image);
    CALL(cuModuleLoadDataEx, &k->mod[2], image, 0, NULL, NULL);
    CALL(cuModuleLoadFatBinary, &k->mod[3], image);
    CALL(cuLibraryLoadData, &k->lib[0], image, NULL, NULL, 0, NULL, NULL, 0);
    CALL(cuLibraryLoadFromFile, &k->lib[1], image_file, NULL, NULL, 0, NULL, NULL, 0);
    CALL(cuModuleGetFunction, &k->add, k->mod[1], "vec_add");
    CALL(cuModuleGetFunction, &k->scale, k->mod[0], "scale");
    CALL(cuModuleGetFunction, &k->fill, k->mod[2], "fill");
    CALL(cuModuleGetFunction, &k->empty, k->mod[3], "empty");
    CALL_FAILS(cuModuleGetFunction, CUDA_ERROR_NOT_FOUND, &k->empty, k->mod[3], "no_such_kernel");
    CALL(cuLibraryGetKernel, &k->lib_add, k->lib[0], "vec_add");
    CALL(cuLibraryGetKernel, &k->lib_empty, k->lib[1], "empty");
    CALL(cuKernelGetFunction, &k->lib_add_fn, k->lib_add);
}

static void unload_kernels(kernels *k)
{
    for (int i = 0; i < 4; i++)
        CALL(cuModuleUnload, k->mod[i]);
    for (int i = 0; i < 2; i++)
        CALL(cuLibraryUnload, k->lib[i]);
}

/* One launch of kernel `kid` through the launch entry point `form`. */
static void launch(route_fn form, int kid, CUfunction f, unsigned grid, unsigned block, unsigned shmem,
                   CUstream s, void **params)
{
    CUlaunchConfig cfg = {grid, 1, 1, block, 1, 1, shmem, s, NULL, 0};
    CUresult r;
    switch (form) {
    case R_cuLaunchKernel: r = FN(cuLaunchKernel)(f, grid, 1, 1, block, 1, 1, shmem, s, params, NULL); break;
    case R_cuLaunchKernel_ptsz:
        r = FN(cuLaunchKernel_ptsz)(f, grid, 1, 1, block, 1, 1, shmem, s, params, NULL);
        break;
    case R_cuLaunchKernelEx: r = FN(cuLaunchKernelEx)(&cfg, f, params, NULL); break;
    case R_cuLaunchKernelEx_ptsz: r = FN(cuLaunchKernelEx_ptsz)(&cfg, f, params, NULL); break;
    case R_cuLaunchCooperativeKernel:
        r = FN(cuLaunchCooperativeKernel)(f, grid, 1, 1, block, 1, 1, shmem, s, params);
        break;
    case R_cuLaunchCooperativeKernel_ptsz:
        r = FN(cuLaunchCooperativeKernel_ptsz)(f, grid, 1, 1, block, 1, 1, shmem, s, params);
        break;
    default: abort();
    }
    if (checked(form, r, CUDA_SUCCESS, __LINE__))
        kernel_launches[kid]++;
}

static const route_fn launch_forms[] = {
    R_cuLaunchKernel,           R_cuLaunchKernel_ptsz,           R_cuLaunchKernelEx,
    R_cuLaunchKernelEx_ptsz,    R_cuLaunchCooperativeKernel,     R_cuLaunchCooperativeKernel_ptsz,
};
#define NFORMS (int)(sizeof launch_forms / sizeof *launch_forms)

static void round_of_work(const kernels *k, CUstream s1, CUstream s2, int round, float *out, int n)
{
    size_t bytes = (size_t)n * sizeof(float);
    CUdeviceptr a, b, c;
    CALL(cuMemAlloc_v2, &a, bytes);
    CALL(cuMemAlloc_v2, &b, bytes);
    CALL(cuMemAllocAsync, &c, bytes, s1);
    mem[M_DEVICE].allocs += 2, mem[M_DEVICE].bytes += 2 * bytes;
    mem[M_ASYNC].allocs++, mem[M_ASYNC].bytes += bytes;

    float *host = malloc(bytes);
    for (int i = 0; i < n; i++)
        host[i] = (float)(i % 97) * 0.5f + (float)round;
    CALL(cuMemcpyHtoD_v2, a, host, bytes);
    CALL(cuMemcpyHtoD_v2, b, host, bytes);

    /* Every launch form, several shapes, a CUkernel passed as a CUfunction
     * and the function of a library kernel. */
    float two = 2.0f, one = 1.0f;
    void *add_params[] = {&a, &b, &c, &n};
    void *scale_params[] = {&c, &two, &n};
    void *fill_params[] = {&b, &one, &n};
    for (int i = 0; i < NFORMS; i++) {
        unsigned block = 32u << (i % 3), grid = ((unsigned)n + block - 1) / block;
        launch(launch_forms[i], K_FILL, k->fill, grid, block, 0, s2, fill_params);
        launch(launch_forms[i], K_EMPTY, k->empty, 1, 32, (unsigned)i * 16, s1, NULL);
    }
    launch(R_cuLaunchKernel, K_VEC_ADD, k->add, ((unsigned)n + 127) / 128, 128, 0, s1, add_params);
    launch(R_cuLaunchKernel_ptsz, K_VEC_ADD, (CUfunction)k->lib_add, ((unsigned)n + 63) / 64, 64, 0,
           CU_STREAM_PER_THREAD, add_params);
    launch(R_cuLaunchKernelEx, K_VEC_ADD, k->lib_add_fn, ((unsigned)n + 255) / 256, 256, 0, s2, add_params);
    launch(R_cuLaunchKernel, K_SCALE, k->scale, ((unsigned)n + 127) / 128, 128, 0, s1, scale_params);
    launch(R_cuLaunchKernel_ptsz, K_EMPTY, (CUfunction)k->lib_empty, 2, 64, 0, NULL, NULL);

    /* A launch the driver refuses still counts as a call. */
    CALL_FAILS(cuLaunchKernel, CUDA_ERROR_INVALID_VALUE, k->empty, 1, 1, 1, 0, 1, 1, 0, s1, NULL, NULL);
    failed_launches++;

    CALL(cuStreamSynchronize, s1);
    CALL(cuMemcpyDtoH_v2, out, c, bytes);
    for (int i = 0; i < n; i++)
        EXPECT(out[i] == 2.0f * (host[i] + 1.0f)); /* fill b=1, c=a+b, c*=2 */
    free(host);

    CALL(cuMemFree_v2, a);
    CALL(cuMemFree_v2, b);
    CALL(cuMemFreeAsync, c, s1);
    mem[M_DEVICE].frees += 2, mem[M_ASYNC].frees++;
}

static void memory_calls(CUstream s1)
{
    /* Legacy 32-bit forms, pitch, per-thread async and pool allocations. */
    unsigned int small = 0, pitched = 0, pitch32 = 0, base32 = 0, size32 = 0, free32 = 0, total32 = 0;
    CALL(cuMemAlloc, &small, 1000);
    mem[M_DEVICE].allocs++, mem[M_DEVICE].bytes += 1000;
    CALL(cuMemGetAddressRange, &base32, &size32, small + 10);
    EXPECT(base32 == small && size32 >= 1000);
    CALL(cuMemGetInfo, &free32, &total32);
    CALL(cuMemAllocPitch, &pitched, &pitch32, 100, 7, 4);
    mem[M_PITCH].allocs++, mem[M_PITCH].bytes += (unsigned long long)pitch32 * 7;

    CUdeviceptr p2 = 0, q = 0, pool_block = 0, base = 0;
    size_t pitch = 0, size = 0, free_b = 0, total_b = 0;
    CALL(cuMemAllocPitch_v2, &p2, &pitch, 1000, 3, 8);
    mem[M_PITCH].allocs++, mem[M_PITCH].bytes += pitch * 3;
    CALL(cuMemGetAddressRange_v2, &base, &size, p2 + 17);
    EXPECT(base == p2 && size >= 3000);
    CALL(cuMemGetInfo_v2, &free_b, &total_b);
    EXPECT(free_b <= total_b && total_b > 0);

    CALL(cuMemAllocAsync_ptsz, &q, 4096, CU_STREAM_PER_THREAD);
    mem[M_ASYNC].allocs++, mem[M_ASYNC].bytes += 4096;
    CALL(cuMemAllocFromPoolAsync, &pool_block, 333, (CUmemoryPool)(uintptr_t)0x1000, s1);
    mem[M_POOL].allocs++, mem[M_POOL].bytes += 333;
    CUdeviceptr pool_block2 = 0;
    CALL(cuMemAllocFromPoolAsync_ptsz, &pool_block2, 77, (CUmemoryPool)(uintptr_t)0x1000, NULL);
    mem[M_POOL].allocs++, mem[M_POOL].bytes += 77;

    size_t range = 0;
    CALL(cuPointerGetAttribute, &range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p2);
    EXPECT(range == size);
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    unsigned int type = 0;
    CUdeviceptr start = 0;
    void *data[2] = {&type, &start};
    CALL(cuPointerGetAttributes, 2, attrs, data, p2 + 1);
    EXPECT(type == CU_MEMORYTYPE_DEVICE && start == p2);
    CUipcMemHandle ipc;
    CALL(cuIpcGetMemHandle, &ipc, p2);

    CALL(cuMemFree, small);
    CALL(cuMemFree, pitched);
    CALL(cuMemFree_v2, p2);
    CALL_FAILS(cuMemFree_v2, CUDA_ERROR_INVALID_VALUE, p2); /* double free */
    mem[M_DEVICE].frees += 3, mem[M_DEVICE].failed_frees++;
    CALL(cuMemFreeAsync_ptsz, q, CU_STREAM_PER_THREAD);
    CALL(cuMemFreeAsync, pool_block, s1);
    CALL(cuMemFreeAsync_ptsz, pool_block2, NULL);
    mem[M_ASYNC].frees += 3;

    void *h1 = NULL, *h2 = NULL, *h3 = NULL;
    CALL(cuMemHostAlloc, &h1, 4096, CU_MEMHOSTALLOC_PORTABLE);
    CALL(cuMemAllocHost_v2, &h2, 8192);
    CALL(cuMemAllocHost, &h3, 100);
    mem[M_HOST].allocs += 3, mem[M_HOST].bytes += 4096 + 8192 + 100;
    CALL(cuMemFreeHost, h1);
    CALL(cuMemFreeHost, h2);
    CALL(cuMemFreeHost, h3);
    CALL_FAILS(cuMemFreeHost, CUDA_ERROR_INVALID_VALUE, h3);
    mem[M_HOST].frees += 3, mem[M_HOST].failed_frees++;
}

static void write_counts(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        failures++;
        return;
    }
    fprintf(f, "{\n  \"calls\": {");
    int first = 1;
    for (int i = 0; i < R_COUNT; i++) {
        fprintf(f, "%s\n    \"%s\": %llu", first ? "" : ",", route_fn_name[i], own[i]);
        first = 0;
    }
    fprintf(f, "\n  },\n  \"kernels\": {");
    for (int i = 0; i < K_COUNT; i++)
        fprintf(f, "%s\n    \"%s\": %llu", i ? "," : "", kernel_name[i], kernel_launches[i]);
    fprintf(f, "\n  },\n  \"failed_launches\": %llu,\n  \"memory\": {", failed_launches);
    for (int i = 0; i < M_COUNT; i++)
        fprintf(f, "%s\n    \"%s\": {\"allocs\": %llu, \"bytes\": %llu, \"frees\": %llu, \"failed_frees\": %llu}",
                i ? "," : "", mem_kind[i], mem[i].allocs, mem[i].bytes, mem[i].frees, mem[i].failed_frees);
    fprintf(f, "\n  }\n}\n");
    if (fclose(f) != 0)
        failures++;
}

void workload_note_calls(route_fn f, unsigned long long n) { own[f] += n; }

int workload_run(const route_api *route, int rounds, const char *counts_path)
{
    api = route;
    if (!api->driver_calls || !api->inject_error) {
        fprintf(stderr, "the driver is not the stand-in (no fakecuda_calls, fakecuda_inject_error)\n");
        return 1;
    }
    for (int i = 0; i < R_COUNT; i++)
        if (!api->fn[i]) {
            fprintf(stderr, "route resolved no %s\n", route_fn_name[i]);
            return 1;
        }

    char image_file[] = "/tmp/drk-route-image-XXXXXX";
    int fd = mkstemp(image_file);
    if (fd < 0 || write(fd, image, sizeof image - 1) != (ssize_t)(sizeof image - 1) || close(fd) != 0) {
        perror("image file");
        return 1;
    }

    CUdevice dev;
    CUcontext ctx;
    CALL(cuInit, 0);
    CALL(cuDeviceGet, &dev, 0);
    CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
    CALL(cuCtxSetCurrent, ctx);

    CUstream s1, s2;
    CALL(cuStreamCreate, &s1, CU_STREAM_NON_BLOCKING);
    CALL(cuStreamCreateWithPriority, &s2, 0, -1);

    kernels k;
    load_kernels(&k, image_file);
    enum { N = 1000 };
    static float out[N];
    double checksum = 0;
    for (int r = 0; r < rounds; r++) {
        round_of_work(&k, s1, s2, r, out, N);
        for (int i = 0; i < N; i++)
            checksum += out[i] * (double)(i + 1);
    }
    memory_calls(s1);
    CALL(cuGraphLaunch, (CUgraphExec)(uintptr_t)0x2000, s1);
    CALL(cuGraphLaunch_ptsz, (CUgraphExec)(uintptr_t)0x2000, CU_STREAM_PER_THREAD);
    unload_kernels(&k);
    CALL(cuStreamDestroy_v2, s1);
    CALL(cuStreamDestroy, s2);
    unlink(image_file);

    /* The driver must have seen every call, each in the form it was made;
     * where drk's device pool serves memory calls (ROUTE_POOL=1), it sees
     * only those the pool passes on. */
    static const char *const family[R_COUNT] = {
#define FAMILY_HOOKED_(name, body, fam) #fam,
        DRK_HOOKS(FAMILY_HOOKED_)
#undef FAMILY_HOOKED_
    };
    const char *pool_env = getenv("ROUTE_POOL"), *host_env = getenv("ROUTE_HOST_POOL"), *drk_env = getenv("ROUTE_DRK");
    int pooled = pool_env && strcmp(pool_env, "1") == 0, host_pooled = host_env && strcmp(host_env, "1") == 0;
    int drk_on = drk_env && strcmp(drk_env, "1") == 0;
    for (int i = 0; i < R_COUNT; i++) {
        unsigned long long seen = api->driver_calls(route_fn_name[i]);
        int served = pooled && family[i] && strcmp(family[i], "memory") == 0;
        /* drk retains and releases primary contexts of its own. */
        if (drk_on && strncmp(route_fn_name[i], "cuDevicePrimaryCtx", 18) == 0 && seen >= own[i])
            continue;
        /* drk waits for events of its own (the pool's frees, evolution's
         * snapshots). */
        if (drk_on && strcmp(route_fn_name[i], "cuEventSynchronize") == 0 && seen >= own[i])
            continue;
        /* The host pool pins chunks of its own: the driver's counts tell nothing. */
        if (host_pooled && family[i] && strcmp(family[i], "host_memory") == 0)
            continue;
        if (served ? seen > own[i] : seen != own[i]) {
            fprintf(stderr, "driver saw %llu calls of %s, the program made %llu\n", seen, route_fn_name[i], own[i]);
            failures++;
        }
    }
    /* From here the driver behaves as one that has shut down, as the real
     * one may have by the time drk writes its report at exit. */
    api->inject_error("cuDriverGetVersion", CUDA_ERROR_DEINITIALIZED, 1000000);
    printf("checksum %.6f\n", checksum);
    printf("launches %llu %llu %llu %llu\n", kernel_launches[0], kernel_launches[1], kernel_launches[2],
           kernel_launches[3]);
    if (counts_path)
        write_counts(counts_path);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}

int route_check_owners(const route_api *route)
{
    const char *want = getenv("ROUTE_EXPECT_OWNER");
    if (!want || !*want)
        return 0;
    const char *lib = strcmp(want, "drk") == 0 ? "libdrk_shim.so" : "libcuda.so.1";
    int bad = 0;
    for (int i = 0; i < R_COUNT; i++) {
        int hooked = 0;
#define IS_HOOKED_(name, body, family) hooked |= i == R_##name;
        DRK_HOOKS(IS_HOOKED_)
#undef IS_HOOKED_
        Dl_info info;
        if (!dladdr(route->fn[i], &info) || !info.dli_fname) {
            fprintf(stderr, "%s: pointer %p is in no object\n", route_fn_name[i], route->fn[i]);
            bad++;
            continue;
        }
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        const char *expected = hooked ? lib : "libcuda.so.1";
        if (strcmp(base, expected) != 0) {
            fprintf(stderr, "%s resolved into %s, expected %s\n", route_fn_name[i], info.dli_fname, expected);
            bad++;
        }
    }
    return bad;
}
