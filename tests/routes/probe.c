/* Two libraries defining probe_name(): PROBE_NAME is "a" or "b". Library a
 * also asks dlsym(RTLD_NEXT) for the next probe_name, which glibc finds
 * relative to the caller: from a it is b. If drk's dlsym were the caller,
 * the answer would be a's own (drk is preloaded just before a). */
#define _GNU_SOURCE
#include <dlfcn.h>

const char *probe_name(void);
const char *probe_name(void) { return PROBE_NAME; }

#ifdef PROBE_NEXT
const char *probe_next(void);
const char *probe_next(void)
{
    const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "probe_name");
    return next ? next() : "none";
}
#endif
