/* The parts of CUPTI's profiler host API (cupti_profiler_host.h) that drk's
 * counters use, declared for C: the toolkit's header includes <string> and
 * compiles only as C++. Field order and types are the header's (CUDA 13.0);
 * each struct's size is CUPTI_PROFILER_STRUCT_SIZE of its last field, as
 * there. The stand-in CUPTI of the tests implements the same. */
#ifndef DRK_EVOLVE_CUPTI_HOST_H
#define DRK_EVOLVE_CUPTI_HOST_H

#include <cupti_result.h>
#include <stddef.h>
#include <stdint.h>

#ifndef CUPTI_PROFILER_STRUCT_SIZE
#define CUPTI_PROFILER_STRUCT_SIZE(type_, lastfield_) (offsetof(type_, lastfield_) + sizeof(((type_ *)0)->lastfield_))
#endif

typedef enum drk_cupti_profiler_type {
    DRK_CUPTI_RANGE_PROFILER = 0, /* CUPTI_PROFILER_TYPE_RANGE_PROFILER */
} drk_cupti_profiler_type;

typedef struct drk_cupti_host_object drk_cupti_host_object;

typedef struct drk_cupti_host_init {
    size_t structSize;
    void *pPriv;
    int profilerType; /* CUpti_ProfilerType */
    const char *pChipName;
    const uint8_t *pCounterAvailabilityImage;
    drk_cupti_host_object *pHostObject;
} drk_cupti_host_init;

typedef struct drk_cupti_host_deinit {
    size_t structSize;
    void *pPriv;
    drk_cupti_host_object *pHostObject;
} drk_cupti_host_deinit;

typedef struct drk_cupti_host_add_metrics {
    size_t structSize;
    void *pPriv;
    drk_cupti_host_object *pHostObject;
    const char **ppMetricNames;
    size_t numMetrics;
} drk_cupti_host_add_metrics;

typedef struct drk_cupti_host_config_size {
    size_t structSize;
    void *pPriv;
    drk_cupti_host_object *pHostObject;
    size_t configImageSize;
} drk_cupti_host_config_size;

typedef struct drk_cupti_host_config {
    size_t structSize;
    void *pPriv;
    drk_cupti_host_object *pHostObject;
    size_t configImageSize;
    uint8_t *pConfigImage;
} drk_cupti_host_config;

typedef struct drk_cupti_host_passes {
    size_t structSize;
    void *pPriv;
    size_t configImageSize;
    uint8_t *pConfigImage;
    size_t numOfPasses;
} drk_cupti_host_passes;

typedef struct drk_cupti_host_evaluate {
    size_t structSize;
    void *pPriv;
    drk_cupti_host_object *pHostObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char **ppMetricNames;
    size_t numMetrics;
    double *pMetricValues;
} drk_cupti_host_evaluate;

#define DRK_CUPTI_SIZE(t, last) CUPTI_PROFILER_STRUCT_SIZE(t, last)

/* The entry points, as libcupti exports them (drk resolves them with dlsym;
 * the stand-in CUPTI defines them). */
CUptiResult cuptiProfilerHostInitialize(drk_cupti_host_init *p);
CUptiResult cuptiProfilerHostDeinitialize(drk_cupti_host_deinit *p);
CUptiResult cuptiProfilerHostConfigAddMetrics(drk_cupti_host_add_metrics *p);
CUptiResult cuptiProfilerHostGetConfigImageSize(drk_cupti_host_config_size *p);
CUptiResult cuptiProfilerHostGetConfigImage(drk_cupti_host_config *p);
CUptiResult cuptiProfilerHostGetNumOfPasses(drk_cupti_host_passes *p);
CUptiResult cuptiProfilerHostEvaluateToGpuValues(drk_cupti_host_evaluate *p);

#endif
