/* Profiler hooks: cuProfilerStop (cudaProfilerStop) is one of the marks that
 * end a round of GPU time; both are counted. */
#include "shim/hook.h"

#include "shim/worker.h"

DRK_BODY drk_body_profiler_start(drk_sym sym)
{
    DRK_REAL_OR_MISSING(profiler_start);
    return drk_counted(sym, real());
}

/* Marked whatever the driver answers: the program meant a boundary. */
DRK_BODY drk_body_profiler_stop(drk_sym sym)
{
    DRK_REAL_OR_MISSING(profiler_stop);
    CUresult r = real();
    if (drk_observing()) {
        drk_count_call(sym);
        drk_worker_mark("cuProfilerStop");
    }
    return r;
}

DRK_HOOKS_PROFILER(DRK_EXPORT)
