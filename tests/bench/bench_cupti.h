/* CUPTI's activity API as drk's GPU times use it (evolve/cupti.c), for the
 * benchmarks that drive it themselves: the library opened with dlopen, its
 * calls, buffers handed out and freed unread, and CUPTI_CHECK (BENCH_NAME
 * starts its line, as bench_cuda.h's CHECK). Include after bench_cuda.h. */
#ifndef DRK_BENCH_CUPTI_H
#define DRK_BENCH_CUPTI_H

#include <cupti_activity.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
    void *lib;
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*finalize)(void); /* NULL where the library has none */
} cupti;

#define CUPTI_CHECK(x)                                                                                                \
    do {                                                                                                             \
        CUptiResult r_ = (x);                                                                                        \
        if (r_ != CUPTI_SUCCESS) {                                                                                   \
            fprintf(stderr, "%s: %s: CUPTI error %d (line %d)\n", BENCH_NAME, #x, (int)r_, __LINE__);               \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

static void CUPTIAPI bench_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 4u << 20, *max_records = 0;
    *buf = aligned_alloc(64, *size);
}

static void CUPTIAPI bench_buffer_completed(CUcontext c, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)c, (void)stream, (void)size, (void)valid;
    free(buf);
}

/* Opens `so` into `cupti` (once); exits, saying why, where it cannot. */
static inline void bench_cupti_open(const char *so)
{
    if (cupti.lib)
        return;
    if (!(cupti.lib = dlopen(so, RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "%s: %s: %s\n", BENCH_NAME, so, dlerror());
        exit(1);
    }
    cupti.register_callbacks = (__typeof__(cupti.register_callbacks))dlsym(cupti.lib, "cuptiActivityRegisterCallbacks");
    cupti.enable = (__typeof__(cupti.enable))dlsym(cupti.lib, "cuptiActivityEnable");
    cupti.disable = (__typeof__(cupti.disable))dlsym(cupti.lib, "cuptiActivityDisable");
    cupti.flush_all = (__typeof__(cupti.flush_all))dlsym(cupti.lib, "cuptiActivityFlushAll");
    cupti.finalize = (__typeof__(cupti.finalize))dlsym(cupti.lib, "cuptiFinalize");
    if (!cupti.register_callbacks || !cupti.enable || !cupti.disable || !cupti.flush_all) {
        fprintf(stderr, "%s: %s lacks the activity API\n", BENCH_NAME, so);
        exit(1);
    }
}

/* Buffers registered: the records start once a kind is enabled. */
static inline void bench_cupti_register(void)
{
    CUPTI_CHECK(cupti.register_callbacks(bench_buffer_requested, bench_buffer_completed));
}

#endif
