/* Outside libdrk_shim.so (the drk command, the tests) nothing interposes on
 * dlsym: glibc's is the real one. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "base/dlsym.h"

drk_dlsym_fn drk_real_dlsym(void) { return dlsym; }
