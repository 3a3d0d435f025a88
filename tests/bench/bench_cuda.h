/* What the driver-API benchmark programs share: CHECK, which names the
 * failing call, its CUresult and line, and exits (BENCH_NAME, defined before
 * the include, starts the line); and reading a whole file (the PTX they
 * load). Static definitions: one program includes it once. */
#ifndef DRK_BENCH_CUDA_H
#define DRK_BENCH_CUDA_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
