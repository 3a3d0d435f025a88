/* An independent launch counter for the GPU suite, built on CUPTI and knowing
 * nothing of drk. The driver loads it through CUDA_INJECTION64_PATH at cuInit
 * and calls InitializeInjection; it subscribes to the driver-API callbacks of
 * the six launch entry points and of the allocation calls drk's pools serve
 * only (enabling the whole domain would slow every driver call), and counts:
 *
 *   - at API_ENTER: every call, per entry point (CBID) and per kernel name;
 *   - at API_EXIT: whether the driver accepted it (CUDA_SUCCESS) or not, so a
 *     refused launch (say, a zero grid) can be matched with drk's
 *     kernels.failed_launches.
 *
 * The kernel name is CUpti_CallbackData.symbolName; where CUPTI leaves it
 * empty, the driver's own cuFuncGetName / cuKernelGetName on the launched
 * handle (the name_source object says how often each was used).
 *
 * Allocation calls (cuMemAlloc_v2, cuMemAllocAsync, cuMemFree_v2, ...) are
 * counted per entry point, called and accepted, under "memory": natively,
 * what the program asked of the driver; under drk, what still reached it.
 *
 * At exit it writes JSON to $DRK_TEST_CUPTI_OUT (%p becomes the pid):
 *   {"pid", "enabled", "error", "total", "ok", "failed",
 *    "by_api", "by_api_ok", "by_api_failed", "by_kernel", "by_kernel_ok",
 *    "by_kernel_failed", "name_source",
 *    "memory": {"by_api", "by_api_ok", "by_api_failed"}}
 * Any CUPTI error is printed, recorded in "error", and disables the counter
 * ("enabled": false); the program itself always goes on. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int InitializeInjection(void) __attribute__((visibility("default")));

enum { API_COUNT = 6 };
static const struct {
    CUpti_CallbackId cbid;
    const char *name;
} apis[API_COUNT] = {
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, "cuLaunchKernelEx_ptsz"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel_ptsz"},
};

static atomic_ullong api_entry[API_COUNT], api_ok[API_COUNT], api_failed[API_COUNT];

enum { MEM_COUNT = 13 };
static const struct {
    CUpti_CallbackId cbid;
    const char *name;
} mem_apis[MEM_COUNT] = {
    {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, "cuMemAllocPitch_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, "cuMemAllocAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, "cuMemFreeAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, "cuMemHostAlloc"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, "cuMemAllocHost_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, "cuMemFreeHost"},
    {CUPTI_DRIVER_TRACE_CBID_cuIpcGetMemHandle, "cuIpcGetMemHandle"},
};
static atomic_ullong mem_entry[MEM_COUNT], mem_ok[MEM_COUNT], mem_failed[MEM_COUNT];
static atomic_int enabled;
static char error_text[512];
static char out_path[4096];
static CUpti_SubscriberHandle subscriber;

enum { SRC_CUPTI, SRC_FUNC, SRC_KERNEL, SRC_NONE, SRC_COUNT };
static const char *const src_names[SRC_COUNT] = {"cupti", "cuFuncGetName", "cuKernelGetName", "none"};
static atomic_ullong name_source[SRC_COUNT];

/* Kernel names: an open-addressing table of heap entries under one lock
 * (launch rates here are far below what a mutex costs). Entries never move,
 * so an entry callback can hand its entry to the exit callback. */
typedef struct {
    char *name;
    unsigned long long entry, ok, failed;
} kernel_entry;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static kernel_entry **table;
static size_t table_cap, table_used;

typedef CUresult (*fn_get_name)(const char **, void *);
static fn_get_name func_get_name, kernel_get_name;

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The entry of the name, inserted if new; NULL when out of memory. Called
 * with table_lock held. */
static kernel_entry *table_entry(const char *name)
{
    if (table_used * 2 >= table_cap) {
        size_t cap = table_cap ? table_cap * 2 : 256;
        kernel_entry **t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < table_cap; i++) {
            if (!table[i])
                continue;
            size_t j = hash_name(table[i]->name) & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = table[i];
        }
        free(table);
        table = t;
        table_cap = cap;
    }
    size_t j = hash_name(name) & (table_cap - 1);
    while (table[j] && strcmp(table[j]->name, name) != 0)
        j = (j + 1) & (table_cap - 1);
    if (!table[j]) {
        kernel_entry *e = calloc(1, sizeof *e);
        if (!e || !(e->name = strdup(name))) {
            free(e);
            return NULL;
        }
        table[j] = e;
        table_used++;
    }
    return table[j];
}

static void fail(const char *what, CUptiResult r)
{
    const char *text = NULL;
    if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS)
        text = "?";
    snprintf(error_text, sizeof error_text, "%s: %s (%d)", what, text, (int)r);
    fprintf(stderr, "cupti_count: %s; the launch counter is disabled\n", error_text);
    atomic_store(&enabled, 0);
}

static CUfunction launched_function(CUpti_CallbackId cbid, const void *params)
{
    if (!params)
        return NULL;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        return ((const cuLaunchKernel_params *)params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        return ((const cuLaunchKernel_ptsz_params *)params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        return ((const cuLaunchKernelEx_params *)params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        return ((const cuLaunchKernelEx_ptsz_params *)params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        return ((const cuLaunchCooperativeKernel_params *)params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return ((const cuLaunchCooperativeKernel_ptsz_params *)params)->f;
    }
    return NULL;
}

static const char *kernel_name(CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
    if (cd->symbolName && *cd->symbolName) {
        atomic_fetch_add(&name_source[SRC_CUPTI], 1);
        return cd->symbolName;
    }
    /* A CUfunction or, from cudart, a CUkernel passed as one. */
    CUfunction f = launched_function(cbid, cd->functionParams);
    const char *name = NULL;
    if (f && func_get_name && func_get_name(&name, f) == CUDA_SUCCESS && name && *name) {
        atomic_fetch_add(&name_source[SRC_FUNC], 1);
        return name;
    }
    name = NULL;
    if (f && kernel_get_name && kernel_get_name(&name, f) == CUDA_SUCCESS && name && *name) {
        atomic_fetch_add(&name_source[SRC_KERNEL], 1);
        return name;
    }
    atomic_fetch_add(&name_source[SRC_NONE], 1);
    return "<unknown>";
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !data || !atomic_load_explicit(&enabled, memory_order_relaxed))
        return;
    int api = -1;
    for (int i = 0; i < API_COUNT; i++)
        if (apis[i].cbid == cbid)
            api = i;
    const CUpti_CallbackData *cd = data;
    if (api < 0) {
        for (int i = 0; i < MEM_COUNT; i++) {
            if (mem_apis[i].cbid != cbid)
                continue;
            if (cd->callbackSite == CUPTI_API_ENTER)
                atomic_fetch_add(&mem_entry[i], 1);
            else if (cd->callbackSite == CUPTI_API_EXIT)
                atomic_fetch_add(cd->functionReturnValue && *(const CUresult *)cd->functionReturnValue == CUDA_SUCCESS
                                     ? &mem_ok[i]
                                     : &mem_failed[i],
                                 1);
        }
        return;
    }
    if (cd->callbackSite == CUPTI_API_ENTER) {
        atomic_fetch_add(&api_entry[api], 1);
        const char *name = kernel_name(cbid, cd);
        pthread_mutex_lock(&table_lock);
        kernel_entry *e = table_entry(name);
        if (e)
            e->entry++;
        pthread_mutex_unlock(&table_lock);
        /* Hand the entry to this call's exit callback. */
        if (cd->correlationData)
            *cd->correlationData = (uint64_t)(uintptr_t)e;
    } else if (cd->callbackSite == CUPTI_API_EXIT) {
        int ok = cd->functionReturnValue && *(const CUresult *)cd->functionReturnValue == CUDA_SUCCESS;
        atomic_fetch_add(ok ? &api_ok[api] : &api_failed[api], 1);
        kernel_entry *e = cd->correlationData ? (kernel_entry *)(uintptr_t)*cd->correlationData : NULL;
        if (e) {
            pthread_mutex_lock(&table_lock);
            if (ok)
                e->ok++;
            else
                e->failed++;
            pthread_mutex_unlock(&table_lock);
        }
    }
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_api_map(FILE *f, const char *key, atomic_ullong *counts)
{
    fprintf(f, "  \"%s\": {", key);
    for (int i = 0; i < API_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", apis[i].name, (unsigned long long)atomic_load(&counts[i]));
    fprintf(f, "},\n");
}

static void json_mem_map(FILE *f, const char *key, atomic_ullong *counts, const char *end)
{
    fprintf(f, "    \"%s\": {", key);
    for (int i = 0; i < MEM_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", mem_apis[i].name, (unsigned long long)atomic_load(&counts[i]));
    fprintf(f, "}%s\n", end);
}

static void json_kernel_map(FILE *f, const char *key, int which)
{
    fprintf(f, "  \"%s\": {", key);
    int first = 1;
    for (size_t i = 0; i < table_cap; i++) {
        if (!table[i])
            continue;
        const kernel_entry *e = table[i];
        unsigned long long v = which == 0 ? e->entry : which == 1 ? e->ok : e->failed;
        if (v == 0)
            continue;
        fprintf(f, "%s\n    ", first ? "" : ",");
        json_string(f, e->name);
        fprintf(f, ": %llu", v);
        first = 0;
    }
    fprintf(f, "\n  },\n");
}

static void expand_path(char *dst, size_t len, const char *src)
{
    size_t o = 0;
    for (; *src && o + 1 < len; src++) {
        if (src[0] == '%' && src[1] == 'p') {
            o += (size_t)snprintf(dst + o, len - o, "%d", (int)getpid());
            src++;
        } else {
            dst[o++] = *src;
        }
        if (o >= len)
            o = len - 1;
    }
    dst[o] = '\0';
}

static void write_counts(void)
{
    if (!out_path[0]) {
        unsigned long long t = 0;
        for (int i = 0; i < API_COUNT; i++)
            t += atomic_load(&api_entry[i]);
        fprintf(stderr, "cupti_count: %llu launch calls (set DRK_TEST_CUPTI_OUT for the JSON)\n", t);
        return;
    }
    char path[4200], tmp[4300];
    expand_path(path, sizeof path, out_path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        return;
    }
    pthread_mutex_lock(&table_lock);
    unsigned long long total = 0, ok = 0, failed = 0;
    for (int i = 0; i < API_COUNT; i++) {
        total += atomic_load(&api_entry[i]);
        ok += atomic_load(&api_ok[i]);
        failed += atomic_load(&api_failed[i]);
    }
    int on = atomic_load(&enabled);
    fprintf(f, "{\n  \"pid\": %d,\n  \"enabled\": %s,\n  \"error\": ", (int)getpid(), on ? "true" : "false");
    if (error_text[0])
        json_string(f, error_text);
    else
        fputs("null", f);
    fprintf(f, ",\n");
    if (on)
        fprintf(f, "  \"total\": %llu,\n  \"ok\": %llu,\n  \"failed\": %llu,\n", total, ok, failed);
    else
        fprintf(f, "  \"total\": null,\n  \"ok\": null,\n  \"failed\": null,\n");
    json_api_map(f, "by_api", api_entry);
    json_api_map(f, "by_api_ok", api_ok);
    json_api_map(f, "by_api_failed", api_failed);
    json_kernel_map(f, "by_kernel", 0);
    json_kernel_map(f, "by_kernel_ok", 1);
    json_kernel_map(f, "by_kernel_failed", 2);
    fprintf(f, "  \"name_source\": {");
    for (int i = 0; i < SRC_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", src_names[i], (unsigned long long)atomic_load(&name_source[i]));
    fprintf(f, "},\n  \"memory\": {\n");
    json_mem_map(f, "by_api", mem_entry, ",");
    json_mem_map(f, "by_api_ok", mem_ok, ",");
    json_mem_map(f, "by_api_failed", mem_failed, "");
    fprintf(f, "  }\n}\n");
    pthread_mutex_unlock(&table_lock);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        perror(path);
}

/* A fork child starts from zero, like drk's report, and writes its own file. */
static void after_fork_child(void)
{
    for (int i = 0; i < API_COUNT; i++) {
        atomic_store(&api_entry[i], 0);
        atomic_store(&api_ok[i], 0);
        atomic_store(&api_failed[i], 0);
    }
    for (int i = 0; i < SRC_COUNT; i++)
        atomic_store(&name_source[i], 0);
    for (int i = 0; i < MEM_COUNT; i++) {
        atomic_store(&mem_entry[i], 0);
        atomic_store(&mem_ok[i], 0);
        atomic_store(&mem_failed[i], 0);
    }
    pthread_mutex_init(&table_lock, NULL);
    /* Keep the entries (an exit callback in flight may hold one); zero them. */
    for (size_t i = 0; i < table_cap; i++)
        if (table[i])
            table[i]->entry = table[i]->ok = table[i]->failed = 0;
}

int InitializeInjection(void)
{
    static atomic_int once;
    if (atomic_exchange(&once, 1))
        return 1;
    const char *p = getenv("DRK_TEST_CUPTI_OUT");
    if (p)
        snprintf(out_path, sizeof out_path, "%s", p);
    atexit(write_counts);
    pthread_atfork(NULL, NULL, after_fork_child);

    /* The driver is loaded by now (it is what calls us). Not hooked by drk,
     * so these are the driver's own, whatever route dlsym takes. */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda) {
        func_get_name = (fn_get_name)dlsym(cuda, "cuFuncGetName");
        kernel_get_name = (fn_get_name)dlsym(cuda, "cuKernelGetName");
    }

    atomic_store(&enabled, 1);
    CUptiResult r = cuptiSubscribe(&subscriber, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        fail("cuptiSubscribe", r);
        return 1;
    }
    for (int i = 0; i < API_COUNT; i++) {
        r = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, apis[i].cbid);
        if (r != CUPTI_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "cuptiEnableCallback(%s)", apis[i].name);
            fail(what, r);
            cuptiUnsubscribe(subscriber);
            return 1;
        }
    }
    for (int i = 0; i < MEM_COUNT; i++) {
        r = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, mem_apis[i].cbid);
        if (r != CUPTI_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "cuptiEnableCallback(%s)", mem_apis[i].name);
            fail(what, r);
            cuptiUnsubscribe(subscriber);
            return 1;
        }
    }
    return 1;
}
