/* The two routes besides exported symbols by which programs reach the
 * driver: dlsym and cuGetProcAddress. */
#ifndef DRK_INTERPOSE_ROUTES_H
#define DRK_INTERPOSE_ROUTES_H

/* Map a pointer the driver's cuGetProcAddress returned for `symbol` to the
 * hook of the same exported name; any other pointer comes back unchanged. */
void *drk_route_proc(const char *symbol, void *fn);

/* Provided by shim/: whether routes hand out hooks (false under DRK_DISABLE). */
int drk_routes_active(void);

/* Provided by shim/: the program looked up a CUPTI name (`cupti...`) with
 * dlsym, so it will use CUPTI itself. */
void drk_routes_cupti_seen(const char *name);

/* Provided by shim/: drk's own function of that name (`drk_...`, which a
 * program under drk finds with dlsym, as drk exports nothing but hooks),
 * or NULL. */
void *drk_routes_own(const char *name);

#endif
