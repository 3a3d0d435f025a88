/* What the driver-API benchmark programs share: CHECK, which names the
 * failing call, its CUresult and line, and exits (BENCH_NAME, defined before
 * the include, starts the line); the clock; and reading a whole file (the
 * PTX they load). Static definitions: one program includes it once. */
#ifndef DRK_BENCH_CUDA_H
#define DRK_BENCH_CUDA_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x)                                                                                                      \
    do {                                                                                                             \
        CUresult r_ = (x);                                                                                           \
        if (r_ != CUDA_SUCCESS) {                                                                                    \
            const char *s_ = NULL;                                                                                   \
            cuGetErrorName(r_, &s_);                                                                                 \
            fprintf(stderr, "%s: %s: %s (line %d)\n", BENCH_NAME, #x, s_ ? s_ : "?", __LINE__);                     \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

/* Device 0's primary context, retained for the program's life and made
 * current; the device in *dev. */
static inline void bench_primary_context(CUdevice *dev)
{
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    CHECK(cuCtxSetCurrent(ctx));
}

/* CLOCK_MONOTONIC in milliseconds (drk's debug lines carry the same clock,
 * in seconds), and a sleep of `ms`. */
static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The whole of file `path`, NUL-terminated; NULL, said on stderr, when it
 * cannot be read. */
static inline char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    char *text = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = calloc(1, (size_t)len + 1)) &&
        fread(text, 1, (size_t)len, f) != (size_t)len) {
        free(text);
        text = NULL;
    }
    fclose(f);
    if (!text)
        fprintf(stderr, "%s: cannot read it\n", path);
    return text;
}

/* How the PTX programs start: the PTX file at `path` read (NULL, said on
 * stderr, when it cannot be: no context made), then device 0's primary
 * context made current (bench_primary_context). */
static inline char *bench_ptx_program(const char *path, CUdevice *dev)
{
    char *ptx = read_file(path);
    if (ptx)
        bench_primary_context(dev);
    return ptx;
}

#endif
