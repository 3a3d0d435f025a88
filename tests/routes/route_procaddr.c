/* cudart's route: dlsym only cuGetProcAddress_v2, look itself up, then
 * resolve every entry point through it with a cudaVersion and flags; the
 * driver picks the ABI form (_v2, _ptsz, legacy). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/routes/workload.h"

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

/* The base name, version and flags that make the driver choose `name`. */
static void query_for(const char *name, char *base, int *version, cuuint64_t *flags)
{
    static const char *const legacy_with_v2[] = {"cuMemAlloc", "cuMemFree", "cuMemAllocPitch", "cuMemGetInfo",
                                                 "cuMemGetAddressRange", "cuMemAllocHost", "cuStreamDestroy"};
    size_t n = strlen(name);
    strcpy(base, name);
    *version = 12000;
    *flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    /* Forms that a later version replaced: asked for with a version from before. */
    static const char *const replaced_in_10010[] = {"cuStreamBeginCapture"};
    int v2 = 0;
    if (n > 5 && strcmp(name + n - 5, "_ptsz") == 0) {
        base[n -= 5] = '\0';
        *flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        if (n > 3 && strcmp(base + n - 3, "_v2") == 0)
            base[n - 3] = '\0', v2 = 1; /* the per-thread form of a _v2 */
    } else if (n > 3 && strcmp(name + n - 3, "_v2") == 0) {
        base[n - 3] = '\0';
        *flags = CU_GET_PROC_ADDRESS_DEFAULT;
        v2 = 1;
    } else {
        for (size_t i = 0; i < sizeof legacy_with_v2 / sizeof *legacy_with_v2; i++)
            if (strcmp(name, legacy_with_v2[i]) == 0)
                *version = 2000;
    }
    for (size_t i = 0; !v2 && i < sizeof replaced_in_10010 / sizeof *replaced_in_10010; i++)
        if (strcmp(base, replaced_in_10010[i]) == 0)
            *version = 10000;
    if (strcmp(base, "cuStreamBeginCaptureToGraph") == 0)
        *version = 12030; /* new in 12.3 */
    if (strcmp(base, "cuGreenCtxCreate") == 0)
        *version = 12040; /* new in 12.4 */
    if (v2 && strcmp(base, "cuCtxSynchronize") == 0)
        *version = 13000; /* its _v2 is CUDA 13's */
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    gpa_v2_fn first = (gpa_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    unsigned long long (*driver_calls)(const char *) =
        (unsigned long long (*)(const char *))dlsym(h, "fakecuda_calls");
    if (!first || !driver_calls) {
        fprintf(stderr, "missing cuGetProcAddress_v2 or fakecuda_calls\n");
        return 1;
    }
    unsigned long long gpa_calls = 0, gpa_v1_calls = 0;
    int bad = 0;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;

    /* Self-lookup, as cudart does, then everything through the answer. */
    void *self = NULL, *legacy = NULL;
    bad += first("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || !self || st != CU_GET_PROC_ADDRESS_SUCCESS;
    gpa_calls++;
    gpa_v2_fn gpa = (gpa_v2_fn)self;
    bad += gpa("cuGetProcAddress", &legacy, 11030, 0, NULL) != CUDA_SUCCESS || !legacy;
    gpa_calls++;

    route_api api = {0};
    api.driver_calls = driver_calls;
    api.inject_error = (int (*)(const char *, CUresult, unsigned))dlsym(h, "fakecuda_inject_error");
    for (int i = 0; i < R_COUNT; i++) {
        char base[64];
        int version;
        cuuint64_t flags;
        query_for(route_fn_name[i], base, &version, &flags);
        if (strcmp(route_fn_name[i], "cuGetProcAddress") == 0)
            version = 11030;
        if (strcmp(route_fn_name[i], "cuGetProcAddress_v2") == 0)
            version = 12000;
        /* Half through the legacy 4-argument resolver, half through _v2. */
        CUresult r;
        if (i % 2) {
            r = ((gpa_v1_fn)legacy)(base, &api.fn[i], version, flags);
            gpa_v1_calls++;
        } else {
            r = gpa(base, &api.fn[i], version, flags, i % 4 ? &st : NULL);
            gpa_calls++;
        }
        if (r != CUDA_SUCCESS || !api.fn[i]) {
            fprintf(stderr, "cuGetProcAddress(%s, %d, %llu) gave %d, %p\n", base, version,
                    (unsigned long long)flags, (int)r, api.fn[i]);
            bad++;
        }
    }

    /* Edge cases whose answers must be the driver's own. */
    void *p = (void *)1;
    st = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = gpa("cuNoSuchFunction", &p, 12000, 0, &st);
    printf("unknown symbol: %d %s %d\n", (int)r, p ? "set" : "NULL", (int)st);
    p = (void *)1;
    r = gpa("cuLibraryLoadData", &p, 11000, 0, &st);
    printf("too old a version: %d %s %d\n", (int)r, p ? "set" : "NULL", (int)st);
    r = gpa("cuLaunchKernel", &p, 99000, 0, NULL);
    printf("version above the driver: %d\n", (int)r);
    gpa_calls += 3;

    workload_note_calls(R_cuGetProcAddress_v2, gpa_calls);
    workload_note_calls(R_cuGetProcAddress, gpa_v1_calls);
    bad += route_check_owners(&api);
    int rc = workload_run(&api, argc > 1 ? atoi(argv[1]) : 1, argc > 2 ? argv[2] : NULL);
    return rc || bad ? 1 : 0;
}
