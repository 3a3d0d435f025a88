/* nvJitLink through dlopen (jitlink.h). Its entry points carry the
 * library's version in their names; drk asks for 13.0's. */
#define _GNU_SOURCE
#include "evolve/jitlink.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dlsym.h"
#include "evolve/libfind.h"

typedef struct nvJitLink *jl_handle;
enum { JL_INPUT_PTX = 2 }; /* NVJITLINK_INPUT_PTX */

static struct {
    int (*create)(jl_handle *, uint32_t, const char **);
    int (*destroy)(jl_handle *);
    int (*add)(jl_handle, int, const void *, size_t, const char *);
    int (*complete)(jl_handle);
    int (*cubin_size)(jl_handle, size_t *);
    int (*cubin)(jl_handle, void *);
    int (*error_size)(jl_handle, size_t *);
    int (*error_log)(jl_handle, char *);
    int (*info_size)(jl_handle, size_t *);
    int (*info_log)(jl_handle, char *);
    int (*version)(unsigned *, unsigned *);
} api;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state; /* 0 not tried, 1 ready, -1 absent */
/* Held for reading by each compile (several at once: nvJitLink's handles
 * are independent, and tests/bench/jitlink_threads.c found 8 threads 7.1x
 * as fast as one on the H200 host, every cubin the serial one's), for
 * writing at exit. nvJitLink was opened after drk's exit handlers were
 * registered, so at exit its own destructors run before drk's thread has
 * stopped; an atexit handler registered after it opened runs first, waits
 * out the compiles in flight and refuses later ones. */
static pthread_rwlock_t busy = PTHREAD_RWLOCK_INITIALIZER;
static int exiting;
static char explicit_path[4096], exe[4096], path[4096], failed_why[512];
static unsigned version;

void drk_jitlink_configure(const char *p, const char *e)
{
    pthread_mutex_lock(&lock);
    snprintf(explicit_path, sizeof explicit_path, "%s", p ? p : "");
    snprintf(exe, sizeof exe, "%s", e ? e : "");
    pthread_mutex_unlock(&lock);
}

static void *find(void)
{
    static const char *const toolkit[] = {
        "/usr/local/cuda/lib64/libnvJitLink.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libnvJitLink.so.13",
        "/usr/local/cuda-13*/lib64/libnvJitLink.so.13", "/usr/local/cuda-13*/targets/x86_64-linux/lib/libnvJitLink.so.13",
    };
    static const char *const wheels[] = {"cu13/lib", "nvjitlink/lib"};
    static const drk_libfind jl = {"libnvJitLink.so.13", "__nvJitLinkCreate_13_0", "DRK_NVJITLINK", toolkit, 4,
                                   wheels, 2};
    return drk_libfind_open(&jl, explicit_path, exe, path, sizeof path);
}

static int open_locked(void)
{
    void *h = find();
    if (!h) {
        snprintf(failed_why, sizeof failed_why, "nvJitLink (libnvJitLink.so.13) not found; set DRK_NVJITLINK");
        return -1;
    }
    drk_dlsym_fn sym = drk_real_dlsym();
#define GET(field, name) (*(void **)&api.field = sym(h, name))
    GET(create, "__nvJitLinkCreate_13_0"), GET(destroy, "__nvJitLinkDestroy_13_0");
    GET(add, "__nvJitLinkAddData_13_0"), GET(complete, "__nvJitLinkComplete_13_0");
    GET(cubin_size, "__nvJitLinkGetLinkedCubinSize_13_0"), GET(cubin, "__nvJitLinkGetLinkedCubin_13_0");
    GET(error_size, "__nvJitLinkGetErrorLogSize_13_0"), GET(error_log, "__nvJitLinkGetErrorLog_13_0");
    GET(info_size, "__nvJitLinkGetInfoLogSize_13_0"), GET(info_log, "__nvJitLinkGetInfoLog_13_0");
    GET(version, "nvJitLinkVersion");
#undef GET
    if (!api.create || !api.destroy || !api.add || !api.complete || !api.cubin_size || !api.cubin ||
        !api.error_size || !api.error_log || !api.info_size || !api.info_log) {
        snprintf(failed_why, sizeof failed_why, "%.400s lacks nvJitLink 13.0's entry points", path);
        memset(&api, 0, sizeof api);
        return -1;
    }
    unsigned major = 0, minor = 0;
    if (api.version && api.version(&major, &minor) == 0)
        version = major * 1000 + minor * 10;
    return 0;
}

static void at_exit(void)
{
    pthread_rwlock_wrlock(&busy);
    exiting = 1;
    pthread_rwlock_unlock(&busy);
}

int drk_jitlink_closed(void)
{
    pthread_rwlock_rdlock(&busy);
    int e = exiting;
    pthread_rwlock_unlock(&busy);
    return e;
}

static void in_child(void)
{
    /* A fork's child has no compile in flight, whatever the parent had. */
    pthread_rwlock_init(&busy, NULL);
    pthread_mutex_init(&lock, NULL);
}

int drk_jitlink_ready(char *why, size_t len)
{
    pthread_mutex_lock(&lock);
    if (state == 0) {
        state = open_locked() == 0 ? 1 : -1;
        if (state == 1 && (atexit(at_exit) != 0 || pthread_atfork(NULL, NULL, in_child) != 0)) {
            snprintf(failed_why, sizeof failed_why, "no exit handler could be registered for nvJitLink");
            state = -1;
        }
    }
    int ok = state == 1;
    if (!ok && why)
        snprintf(why, len, "%s", failed_why);
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

const char *drk_jitlink_path(void) { return state == 1 ? path : ""; }

unsigned drk_jitlink_version(void) { return state == 1 ? version : 0; }

/* A log of `h` into buf ("" if none or too long to hold whole: its head). */
static void read_log(jl_handle h, int (*size_of)(jl_handle, size_t *), int (*get)(jl_handle, char *), char *buf,
                     size_t len)
{
    size_t n = 0;
    if (!buf || !len)
        return;
    buf[0] = '\0';
    if (size_of(h, &n) != 0 || n <= 1)
        return;
    char *all = malloc(n + 1);
    if (!all)
        return;
    if (get(h, all) == 0) {
        all[n] = '\0';
        snprintf(buf, len, "%s", all);
    }
    free(all);
}

int drk_jitlink_compile(const char *ptx, size_t len, const char *const *opts, unsigned nopts, void **cubin,
                        size_t *size, char *log, size_t loglen, char *why, size_t whylen)
{
    *cubin = NULL, *size = 0;
    if (log && loglen)
        log[0] = '\0';
    if (drk_jitlink_ready(why, whylen) != 0)
        return -1;
    pthread_rwlock_rdlock(&busy);
    if (exiting) {
        pthread_rwlock_unlock(&busy);
        snprintf(why, whylen, "the process is exiting");
        return -1;
    }
    jl_handle h = NULL;
    int r = api.create(&h, nopts, (const char **)opts);
    if (r != 0) {
        snprintf(why, whylen, "nvJitLinkCreate: error %d (an option it does not take)", r);
        if (h)
            api.destroy(&h);
        pthread_rwlock_unlock(&busy);
        return -1;
    }
    const char *call = "nvJitLinkAddData";
    r = api.add(h, JL_INPUT_PTX, ptx, len + 1, "drk");
    if (r == 0)
        call = "nvJitLinkComplete", r = api.complete(h);
    if (r == 0)
        call = "nvJitLinkGetLinkedCubinSize", r = api.cubin_size(h, size);
    if (r == 0) {
        call = "nvJitLinkGetLinkedCubin";
        if (!(*cubin = malloc(*size ? *size : 1)))
            r = -1, call = "malloc";
        else if ((r = api.cubin(h, *cubin)) != 0)
            free(*cubin), *cubin = NULL;
    }
    if (r != 0) {
        char err[400];
        read_log(h, api.error_size, api.error_log, err, sizeof err);
        snprintf(why, whylen, "%s: error %d%s%s", call, r, *err ? ": " : "", err);
        *size = 0;
    } else {
        read_log(h, api.info_size, api.info_log, log, loglen);
    }
    api.destroy(&h);
    pthread_rwlock_unlock(&busy);
    return r == 0 ? 0 : -1;
}

void drk_jitlink_reset(void)
{
    pthread_mutex_lock(&lock);
    state = 0;
    memset(&api, 0, sizeof api);
    path[0] = failed_why[0] = '\0';
    version = 0;
    pthread_mutex_unlock(&lock);
}
