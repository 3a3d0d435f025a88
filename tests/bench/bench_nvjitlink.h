/* What the nvJitLink benchmark programs share (jitlink_threads.c,
 * jit_opts.c: no GPU, no driver): nvJitLink 13's entry points opened by
 * hand, the clock and reading a whole file. They call nvJitLink itself, not
 * through drk, to measure nvJitLink alone. Static definitions: one program
 * includes it once. */
#ifndef DRK_BENCH_NVJITLINK_H
#define DRK_BENCH_NVJITLINK_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NVJITLINK_INPUT_PTX 2

typedef struct nvJitLink *jl_handle;
static struct {
    int (*create)(jl_handle *, uint32_t, const char **);
    int (*destroy)(jl_handle *);
    int (*add)(jl_handle, int, const void *, size_t, const char *);
    int (*complete)(jl_handle);
    int (*cubin_size)(jl_handle, size_t *);
    int (*cubin)(jl_handle, void *);
    int (*info_size)(jl_handle, size_t *);
    int (*info)(jl_handle, char *);
} jl;

/* Opens `so` (a bare name also under /usr/local/cuda/lib64) into jl: 0, or
 * -1 said on stderr after `who`. */
static int bench_nvjitlink_open(const char *who, const char *so)
{
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib && !strchr(so, '/'))
        lib = dlopen("/usr/local/cuda/lib64/libnvJitLink.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        *(void **)&jl.create = dlsym(lib, "__nvJitLinkCreate_13_0");
        *(void **)&jl.destroy = dlsym(lib, "__nvJitLinkDestroy_13_0");
        *(void **)&jl.add = dlsym(lib, "__nvJitLinkAddData_13_0");
        *(void **)&jl.complete = dlsym(lib, "__nvJitLinkComplete_13_0");
        *(void **)&jl.cubin_size = dlsym(lib, "__nvJitLinkGetLinkedCubinSize_13_0");
        *(void **)&jl.cubin = dlsym(lib, "__nvJitLinkGetLinkedCubin_13_0");
        *(void **)&jl.info_size = dlsym(lib, "__nvJitLinkGetInfoLogSize_13_0");
        *(void **)&jl.info = dlsym(lib, "__nvJitLinkGetInfoLog_13_0");
    }
    if (!lib || !jl.create || !jl.destroy || !jl.add || !jl.complete || !jl.cubin_size || !jl.cubin ||
        !jl.info_size || !jl.info) {
        fprintf(stderr, "%s: %s: not found, or not nvJitLink 13: %s\n", who, so, lib ? "an entry point is missing" :
                dlerror());
        return -1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The whole file, NUL-terminated (malloc'd), its length in *len; NULL if
 * it cannot be read. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = calloc(1, (size_t)n + 1)) &&
        fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    if (f)
        fclose(f);
    *len = text ? (size_t)n : 0;
    return text;
}

#endif
