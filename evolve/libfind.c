/* Finding a CUDA library drk opens itself (libfind.h). */
#define _GNU_SOURCE
#include "evolve/libfind.h"

#include <dlfcn.h>
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "base/dlsym.h"
#include "base/log.h"

static void *open_path(const char *p, char *path, size_t len)
{
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (h)
        snprintf(path, len, "%s", p);
    return h;
}

/* The first match of each pattern that opens, in order. */
static void *open_glob(const char *pattern, char *path, size_t len)
{
    glob_t g;
    void *h = NULL;
    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t k = 0; k < g.gl_pathc && !h; k++)
            h = open_path(g.gl_pathv[k], path, len);
    globfree(&g);
    return h;
}

void *drk_libfind_open(const drk_libfind *w, const char *explicit_path, const char *exe, char *path, size_t len)
{
    void *h = dlopen(w->soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h) {
        Dl_info info;
        void *sym = w->probe ? drk_real_dlsym()(h, w->probe) : NULL;
        snprintf(path, len, "%s", sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : w->soname);
        return h;
    }
    if (explicit_path && *explicit_path) {
        if ((h = open_path(explicit_path, path, len)))
            return h;
        drk_log(DRK_LOG_WARN, "cannot open %s=%s (%s); looking for %s elsewhere", w->option, explicit_path, dlerror(),
                w->soname);
    }
    for (size_t i = 0; i < w->ntoolkit; i++)
        if ((h = open_glob(w->toolkit[i], path, len)))
            return h;
    char exe_dir[4096] = "", pat[4400];
    if (exe && *exe) {
        snprintf(exe_dir, sizeof exe_dir, "%s", exe);
        dirname(exe_dir);
    }
    static const char *const roots[] = {"/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
                                        "/usr/local/lib/python3*/site-packages"};
    for (size_t i = 0; i < w->nwheels; i++) {
        if (exe_dir[0]) {
            snprintf(pat, sizeof pat, "%s/../lib/python3*/site-packages/nvidia/%s/%s", exe_dir, w->wheels[i],
                     w->soname);
            if ((h = open_glob(pat, path, len)))
                return h;
        }
    }
    for (size_t r = 0; r < sizeof roots / sizeof *roots; r++)
        for (size_t i = 0; i < w->nwheels; i++) {
            snprintf(pat, sizeof pat, "%s/nvidia/%s/%s", roots[r], w->wheels[i], w->soname);
            if ((h = open_glob(pat, path, len)))
                return h;
        }
    return open_path(w->soname, path, len);
}
