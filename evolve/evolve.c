#include "evolve/evolve.h"

#include "evolve/capture.h"
#include "evolve/counters.h"
#include "evolve/cupti.h"
#include "evolve/engine.h"
#include "evolve/loaded.h"
#include "evolve/occupancy.h"
#include "evolve/registry.h"

void drk_evolve_configure(const drk_driver *drv)
{
    drk_registry_configure(drv);
    drk_counters_configure(drv);
    drk_capture_configure(drv);
    drk_occupancy_configure(drv);
    drk_engine_configure(drv);
}

void drk_evolve_after_fork_child(void)
{
    drk_registry_reset_counts();
    drk_images_after_fork_child();
    drk_cupti_after_fork_child();
    drk_counters_after_fork_child();
    drk_capture_after_fork_child();
    drk_occupancy_after_fork_child();
    drk_engine_after_fork_child();
}
