/* A stand-in nvJitLink in the same library (drk opens it with
 * DRK_NVJITLINK pointing here): PTX in, a "cubin" out that this driver
 * loads as that PTX built with the options given. The cubin is
 * FAKECUDA_CUBIN_MAGIC, the options separated by spaces, a newline, then
 * the PTX; cuModuleLoadData* of it caps registers by its -maxrregcount.
 * fakecuda_fail_jit's planted failure (a register budget) fails the
 * link as ptxas would, with its line in the error log. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

enum { OK = 0, UNRECOGNIZED_OPTION = 1, MISSING_ARCH = 2, INVALID_INPUT = 3, PTX_COMPILE = 4 };

struct link {
    char opts[512];
    char *ptx;
    char *cubin;
    size_t cubin_len;
    char error[256], info[128];
};

static char g_last_opts[512];

/* nvJitLink 13.0's entry points, as drk's jitlink.c looks them up. */
FC_EXPORT int __nvJitLinkCreate_13_0(struct link **h, uint32_t n, const char **opts);
FC_EXPORT int __nvJitLinkDestroy_13_0(struct link **h);
FC_EXPORT int __nvJitLinkAddData_13_0(struct link *l, int type, const void *data, size_t size, const char *name);
FC_EXPORT int __nvJitLinkComplete_13_0(struct link *l);
FC_EXPORT int __nvJitLinkGetLinkedCubinSize_13_0(struct link *l, size_t *n);
FC_EXPORT int __nvJitLinkGetLinkedCubin_13_0(struct link *l, void *out);
FC_EXPORT int __nvJitLinkGetErrorLogSize_13_0(struct link *l, size_t *n);
FC_EXPORT int __nvJitLinkGetErrorLog_13_0(struct link *l, char *o);
FC_EXPORT int __nvJitLinkGetInfoLogSize_13_0(struct link *l, size_t *n);
FC_EXPORT int __nvJitLinkGetInfoLog_13_0(struct link *l, char *o);
FC_EXPORT int nvJitLinkVersion(unsigned *major, unsigned *minor);

static int known(const char *o)
{
    static const char *const prefixes[] = {"-arch=sm_", "-maxrregcount=", "-verbose", "-Xptxas="};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(o, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

FC_EXPORT int __nvJitLinkCreate_13_0(struct link **h, uint32_t n, const char **opts)
{
    if (!h)
        return INVALID_INPUT;
    *h = NULL;
    int arch = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!opts || !opts[i] || !known(opts[i]))
            return UNRECOGNIZED_OPTION;
        arch |= strncmp(opts[i], "-arch=sm_", 9) == 0;
    }
    if (!arch)
        return MISSING_ARCH;
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        return INVALID_INPUT;
    for (uint32_t i = 0; i < n; i++) {
        size_t u = strlen(l->opts);
        snprintf(l->opts + u, sizeof l->opts - u, "%s%s", u ? " " : "", opts[i]);
    }
    *h = l;
    return OK;
}

FC_EXPORT int __nvJitLinkDestroy_13_0(struct link **h)
{
    if (!h || !*h)
        return INVALID_INPUT;
    free((*h)->ptx);
    free((*h)->cubin);
    free(*h);
    *h = NULL;
    return OK;
}

FC_EXPORT int __nvJitLinkAddData_13_0(struct link *l, int type, const void *data, size_t size, const char *name)
{
    (void)name;
    if (!l || type != 2 /* PTX */ || !data || !size || l->ptx)
        return INVALID_INPUT;
    if (!(l->ptx = malloc(size + 1)))
        return INVALID_INPUT;
    memcpy(l->ptx, data, size);
    l->ptx[size] = '\0';
    return OK;
}

FC_EXPORT int __nvJitLinkComplete_13_0(struct link *l)
{
    if (!l || !l->ptx)
        return INVALID_INPUT;
    LOCK();
    snprintf(g_last_opts, sizeof g_last_opts, "%s", l->opts);
    CUjit_option fail_opt = g_fail_opt;
    unsigned long long fail_val = g_fail_val;
    UNLOCK();
    if (fail_opt == CU_JIT_MAX_REGISTERS) {
        char planted[40];
        snprintf(planted, sizeof planted, "-maxrregcount=%llu", fail_val);
        const char *at = strstr(l->opts, planted);
        if (at && (at[strlen(planted)] == ' ' || at[strlen(planted)] == '\0')) {
            snprintf(l->error, sizeof l->error, "ptxas fatal   : fakecuda: %s planted to fail", planted);
            return PTX_COMPILE;
        }
    }
    size_t n = strlen(FAKECUDA_CUBIN_MAGIC) + 1 + strlen(l->opts) + 1 + strlen(l->ptx) + 1;
    if (!(l->cubin = malloc(n)))
        return INVALID_INPUT;
    l->cubin_len = (size_t)snprintf(l->cubin, n, "%s %s\n%s", FAKECUDA_CUBIN_MAGIC, l->opts, l->ptx) + 1;
    snprintf(l->info, sizeof l->info, "ptxas info    : fakecuda: compiled");
    return OK;
}

FC_EXPORT int __nvJitLinkGetLinkedCubinSize_13_0(struct link *l, size_t *n)
{
    if (!l || !n || !l->cubin)
        return INVALID_INPUT;
    *n = l->cubin_len;
    return OK;
}

FC_EXPORT int __nvJitLinkGetLinkedCubin_13_0(struct link *l, void *out)
{
    if (!l || !out || !l->cubin)
        return INVALID_INPUT;
    memcpy(out, l->cubin, l->cubin_len);
    return OK;
}

static int log_size(const char *s, size_t *n) { return n ? (*n = strlen(s) + 1, OK) : INVALID_INPUT; }

static int log_get(const char *s, char *out) { return out ? (memcpy(out, s, strlen(s) + 1), OK) : INVALID_INPUT; }

FC_EXPORT int __nvJitLinkGetErrorLogSize_13_0(struct link *l, size_t *n)
{
    return l ? log_size(l->error, n) : INVALID_INPUT;
}

FC_EXPORT int __nvJitLinkGetErrorLog_13_0(struct link *l, char *o) { return l ? log_get(l->error, o) : INVALID_INPUT; }

FC_EXPORT int __nvJitLinkGetInfoLogSize_13_0(struct link *l, size_t *n)
{
    return l ? log_size(l->info, n) : INVALID_INPUT;
}

FC_EXPORT int __nvJitLinkGetInfoLog_13_0(struct link *l, char *o) { return l ? log_get(l->info, o) : INVALID_INPUT; }

FC_EXPORT int nvJitLinkVersion(unsigned *major, unsigned *minor)
{
    if (!major || !minor)
        return INVALID_INPUT;
    *major = 13, *minor = 0;
    return OK;
}

FC_EXPORT int fakecuda_jitlink_last_options(char *out, size_t len)
{
    if (!out || !len)
        return -1;
    LOCK();
    snprintf(out, len, "%s", g_last_opts);
    UNLOCK();
    return 0;
}
