/* fakecuda, the stand-in libcuda.so.1: the kernel registry; modules,
 * libraries, functions, kernels. */
#define _GNU_SOURCE
#include "tests/fakecuda/fake_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Kernel registry                                                          */
/* ------------------------------------------------------------------------ */

FC_HIDDEN struct kentry g_kernels[FC_MAX_KERNELS];
static unsigned int g_nkernels;
static pthread_once_t g_builtins_once = PTHREAD_ONCE_INIT;

static unsigned long long global_x(const fakecuda_thread *t)
{
    return (unsigned long long)t->blockIdx.x * t->blockDim.x + t->threadIdx.x;
}

static void k_vec_add(const fakecuda_thread *t)
{
    float *a = *(float **)t->params[0], *b = *(float **)t->params[1], *c = *(float **)t->params[2];
    int n = *(int *)t->params[3];
    unsigned long long i = global_x(t);
    if (n > 0 && i < (unsigned long long)n)
        c[i] = a[i] + b[i];
}

static void k_scale(const fakecuda_thread *t)
{
    float *x = *(float **)t->params[0];
    float s = *(float *)t->params[1];
    int n = *(int *)t->params[2];
    unsigned long long i = global_x(t);
    if (n > 0 && i < (unsigned long long)n)
        x[i] *= s;
}

static void k_fill(const fakecuda_thread *t)
{
    float *x = *(float **)t->params[0];
    float v = *(float *)t->params[1];
    int n = *(int *)t->params[2];
    unsigned long long i = global_x(t);
    if (n > 0 && i < (unsigned long long)n)
        x[i] = v;
}

static void k_empty(const fakecuda_thread *t) { (void)t; }

/* Caller holds the lock. */
static int kentry_find(const char *name)
{
    for (unsigned int i = 0; i < g_nkernels; i++)
        if (strcmp(g_kernels[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The largest power of two <= 16 dividing the size: what nvcc uses for the
 * scalar and vector types tests pass. */
static size_t param_align(size_t size)
{
    size_t a = 16;
    while (a > 1 && size % a != 0)
        a /= 2;
    return a;
}

/* Caller holds the lock. nparams == (unsigned)-1: no layout. */
static int kentry_set(const char *name, fakecuda_kernel_fn fn, unsigned int nparams, const size_t *sizes)
{
    if (!name || !fn || strlen(name) >= FC_MAX_NAME || !name[0])
        return -1;
    int has_layout = nparams != (unsigned int)-1;
    if (has_layout && (nparams > FC_MAX_PARAMS || (nparams && !sizes)))
        return -1;
    if (has_layout)
        for (unsigned int i = 0; i < nparams; i++)
            if (sizes[i] == 0)
                return -1;
    int i = kentry_find(name);
    if (i < 0) {
        if (g_nkernels == FC_MAX_KERNELS)
            return -1;
        i = (int)g_nkernels++;
        snprintf(g_kernels[i].name, FC_MAX_NAME, "%s", name);
    }
    struct kentry *e = &g_kernels[i];
    e->fn = fn;
    e->has_layout = has_layout;
    e->nparams = has_layout ? nparams : 0;
    size_t off = 0;
    for (unsigned int p = 0; p < e->nparams; p++) {
        size_t a = param_align(sizes[p]);
        off = (off + a - 1) & ~(a - 1);
        e->size[p] = sizes[p];
        e->off[p] = off;
        off += sizes[p];
    }
    e->argbytes = off;
    return 0;
}

static void builtins_register(void)
{
    static const size_t vec_add[] = {8, 8, 8, 4}, one_ptr_two_words[] = {8, 4, 4};
    LOCK();
    kentry_set("vec_add", k_vec_add, 4, vec_add);
    kentry_set("scale", k_scale, 3, one_ptr_two_words);
    kentry_set("fill", k_fill, 3, one_ptr_two_words);
    kentry_set("empty", k_empty, 0, NULL);
    UNLOCK();
}

static void builtins_once(void) { pthread_once(&g_builtins_once, builtins_register); }

FC_EXPORT int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn)
{
    builtins_once();
    LOCK();
    int rc = kentry_set(name, fn, (unsigned int)-1, NULL);
    UNLOCK();
    return rc;
}

FC_EXPORT int fakecuda_register_kernel_params(const char *name, fakecuda_kernel_fn fn, unsigned int nparams,
                                              const size_t *param_sizes)
{
    if (nparams == (unsigned int)-1)
        return -1;
    builtins_once();
    LOCK();
    int rc = kentry_set(name, fn, nparams, param_sizes);
    UNLOCK();
    return rc;
}

/* Kernel `name`'s entry with the lock held (the caller unlocks), or NULL. */
static struct kentry *kentry_locked(const char *name)
{
    builtins_once();
    LOCK();
    int i = kentry_find(name);
    return i < 0 ? NULL : &g_kernels[i];
}

FC_EXPORT int fakecuda_set_kernel_resources(const char *name, unsigned int regs, unsigned int static_shared)
{
    if (!name || regs < 1 || regs > 255 || static_shared > FC_SHARED_PER_BLOCK)
        return -1;
    struct kentry *k = kentry_locked(name);
    if (k)
        k->regs = regs, k->static_shared = static_shared;
    UNLOCK();
    return k ? 0 : -1;
}

FC_EXPORT int fakecuda_set_kernel_time(const char *name, unsigned int regs, unsigned long long ns)
{
    if (!name)
        return -1;
    struct kentry *k = kentry_locked(name);
    int rc = -1;
    if (k) {
        unsigned int t = 0;
        while (t < k->ntimes && k->time_regs[t] != regs)
            t++;
        if (t < 4) {
            k->time_regs[t] = regs, k->time_ns[t] = ns;
            k->ntimes += t == k->ntimes;
            rc = 0;
        }
    }
    UNLOCK();
    return rc;
}

FC_EXPORT int fakecuda_set_carveout_time(const char *name, int carveout, unsigned long long ns)
{
    if (!name || carveout < -1 || carveout > 100)
        return -1;
    struct kentry *k = kentry_locked(name);
    if (k)
        k->time_carveout = carveout, k->carveout_ns = ns;
    UNLOCK();
    return k ? 0 : -1;
}

FC_EXPORT unsigned long long fakecuda_carveout_launches(const char *name, int carveout)
{
    if (!name || carveout < -1 || carveout > 100)
        return 0;
    struct kentry *k = kentry_locked(name);
    UNLOCK();
    return k ? atomic_load(&k->carveout_launches[carveout + 1]) : 0;
}

FC_EXPORT unsigned long long fakecuda_gpu_ns(void) { return g_gpu_ns; }

FC_EXPORT unsigned long long fakecuda_kernel_launches(const char *name)
{
    if (!name)
        return 0;
    struct kentry *k = kentry_locked(name);
    UNLOCK();
    return k ? atomic_load(&k->launches) : 0;
}

/* ------------------------------------------------------------------------ */
/* Modules, libraries, functions, kernels                                   */
/* ------------------------------------------------------------------------ */

struct module;
struct library;
struct kern;

struct func {
    uint32_t magic;
    unsigned int entry;
    struct module *mod; /* NULL for a kernel's function */
    /* The context it belongs to and may be launched in: a module's, the one
     * current at the load (else the primary); a kernel's, the one current
     * at cuKernelGetFunction. Compared, never dereferenced: the serial
     * tells a destroyed context from a later one at its address. */
    const struct ctx *ctx;
    unsigned long long ctx_serial;
    struct func *next; /* a kernel's: its next function in another context */
    /* What it was built with, as its kernel's entry said at load (and a
     * register budget its load's JIT options gave). */
    unsigned int regs, static_shared, max_threads;
    int carveout; /* CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: -1 unset */
    int rz;       /* its PTX rounds float arithmetic toward zero (".rz.f32"): a kernel may compute otherwise */
};

/* A register is allocated per warp in units of 256. */
static unsigned int regs_per_warp(unsigned int regs) { return (regs * 32 + 255) / 256 * 256; }

/* A function of the kernel entry `e` as loaded now, within a register
 * budget (0: none). */
static void func_init(struct func *f, unsigned int e, struct module *mod, unsigned int budget)
{
    f->magic = MAGIC_FUNC;
    f->entry = e;
    f->mod = mod;
    f->ctx = &g_primary;
    f->ctx_serial = 0;
    f->next = NULL;
    f->carveout = -1;
    LOCK();
    f->regs = g_kernels[e].regs ? g_kernels[e].regs : FC_DEFAULT_REGS;
    f->static_shared = g_kernels[e].static_shared;
    UNLOCK();
    if (budget && budget < f->regs)
        f->regs = budget;
    /* As many threads as the SM's registers hold, at most 1024. */
    unsigned int warps = FC_REGS_PER_SM / regs_per_warp(f->regs);
    f->max_threads = warps * 32 < 1024 ? warps * 32 : 1024;
}

#define FC_MAX_JIT 32

struct module {
    uint32_t magic;
    unsigned int n;
    struct func **funcs;
    /* The JIT options of the cuModuleLoadDataEx that made it, as passed. */
    unsigned int nopts;
    CUjit_option opts[FC_MAX_JIT];
    unsigned long long vals[FC_MAX_JIT];
};

static unsigned long long g_live_modules;
CUjit_option g_fail_opt = (CUjit_option)-1;
unsigned long long g_fail_val;

struct kern {
    uint32_t magic;
    unsigned int entry;
    struct library *lib;
    struct func *fn;     /* what cuKernelGetFunction returns in the primary context */
    struct func *others; /* and in other contexts: made on first ask, listed through next */
};

struct library {
    uint32_t magic;
    unsigned int n;
    struct kern **kerns;
};

#define FC_MAX_IMAGE ((size_t)16 << 20)

static CUresult parse_image(const char *text, unsigned int **out, unsigned int *nout);

/* PTX text stands for the registered kernels its .entry lines name, so
 * tests can hand drk a real PTX image. Caller holds the lock. */
static CUresult parse_ptx(const char *text, unsigned int **out, unsigned int *nout)
{
    size_t cap = strlen(FAKECUDA_IMAGE_MAGIC) + 2, len = 0;
    for (const char *p = text; (p = strstr(p, ".entry")) != NULL; p += 6)
        cap += FC_MAX_NAME + 1;
    char *list = malloc(cap);
    if (!list)
        return CUDA_ERROR_OUT_OF_MEMORY;
    len = (size_t)snprintf(list, cap, "%s\n", FAKECUDA_IMAGE_MAGIC);
    for (const char *p = text; (p = strstr(p, ".entry")) != NULL;) {
        p += 6;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, " \t\r\n(");
        if (n == 0 || n >= FC_MAX_NAME) {
            free(list);
            return CUDA_ERROR_INVALID_IMAGE;
        }
        memcpy(list + len, p, n);
        len += n;
        list[len++] = '\n';
        list[len] = '\0';
    }
    CUresult rc = parse_image(list, out, nout);
    free(list);
    return rc;
}

/* Parses "DRKFAKE1\n<name>\n..." (or PTX) into registry indices. Caller
 * holds the lock. */
static CUresult parse_image(const char *text, unsigned int **out, unsigned int *nout)
{
    *out = NULL;
    *nout = 0;
    size_t hl = strlen(FAKECUDA_IMAGE_MAGIC);
    if (strncmp(text, FAKECUDA_IMAGE_MAGIC, hl) != 0)
        return strstr(text, ".version") && strstr(text, ".entry") ? parse_ptx(text, out, nout)
                                                                  : CUDA_ERROR_INVALID_IMAGE;
    const char *p = text + hl;
    while (*p == '\r' || *p == ' ' || *p == '\t')
        p++;
    if (*p != '\n' && *p != '\0')
        return CUDA_ERROR_INVALID_IMAGE;
    unsigned int *ids = NULL, n = 0, cap = 0;
    while (*p) {
        p++; /* past '\n' */
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        while (len && (*s == ' ' || *s == '\t' || *s == '\r'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
            len--;
        p = end ? end : p + strlen(p);
        if (!len)
            continue;
        char name[FC_MAX_NAME];
        if (len >= sizeof name)
            goto bad;
        memcpy(name, s, len);
        name[len] = '\0';
        int id = kentry_find(name);
        if (id < 0)
            goto bad;
        for (unsigned int i = 0; i < n; i++)
            if (ids[i] == (unsigned int)id)
                goto bad;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            unsigned int *grown = realloc(ids, cap * sizeof *ids);
            if (!grown) {
                free(ids);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            ids = grown;
        }
        ids[n++] = (unsigned int)id;
    }
    *out = ids;
    *nout = n;
    return CUDA_SUCCESS;
bad:
    free(ids);
    return CUDA_ERROR_INVALID_IMAGE;
}

static void module_free(struct module *m)
{
    for (unsigned int i = 0; i < m->n; i++)
        free(m->funcs[i]);
    free(m->funcs);
    free(m);
}

/* fake_jitlink.c's cubin: its options' line (a register budget, the lower
 * of it and *budget), then the PTX, to which *text moves. Other images are
 * left as they are. 0, or -1 for a cubin without its line's end. */
static int cubin_payload(const char **text, unsigned int *budget)
{
    size_t ml = strlen(FAKECUDA_CUBIN_MAGIC);
    if (strncmp(*text, FAKECUDA_CUBIN_MAGIC, ml) != 0 || ((*text)[ml] != ' ' && (*text)[ml] != '\n'))
        return 0;
    const char *nl = strchr(*text, '\n');
    const char *rr = strstr(*text, "-maxrregcount=");
    if (!nl)
        return -1;
    if (rr && rr < nl && (*budget == 0 || (unsigned int)atoi(rr + 14) < *budget))
        *budget = (unsigned int)atoi(rr + 14);
    *text = nl + 1;
    return 0;
}

static CUresult module_from_text_ex(CUmodule *module, const char *text, unsigned int budget, struct module **made)
{
    if (!module || !text)
        return CUDA_ERROR_INVALID_VALUE;
    builtins_once();
    if (cubin_payload(&text, &budget) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    unsigned int *ids, n;
    LOCK();
    CUresult rc = parse_image(text, &ids, &n);
    UNLOCK();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct module *m = calloc(1, sizeof *m);
    if (m && n)
        m->funcs = calloc(n, sizeof *m->funcs);
    if (!m || (n && !m->funcs))
        goto oom;
    m->magic = MAGIC_MODULE;
    for (; m->n < n; m->n++) {
        struct func *f = malloc(sizeof *f);
        if (!f)
            goto oom;
        func_init(f, ids[m->n], m, budget);
        f->rz = strstr(text, ".rz.f32") != NULL;
        m->funcs[m->n] = f;
    }
    free(ids);
    ids = NULL;
    LOCK();
    /* Its functions belong to the context current now, as the driver's do. */
    const struct ctx *c = current_ctx_locked();
    if (!c)
        c = &g_primary;
    for (unsigned int i = 0; i < m->n; i++)
        m->funcs[i]->ctx = c, m->funcs[i]->ctx_serial = c->serial;
    int ok = h_add(m) == 0;
    for (unsigned int i = 0; ok && i < m->n; i++)
        ok = h_add(m->funcs[i]) == 0;
    if (!ok) {
        /* h_del ignores objects that never made it into the table. */
        for (unsigned int i = 0; i < m->n; i++)
            h_del(m->funcs[i]);
        h_del(m);
        UNLOCK();
        module_free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g_live_modules++;
    UNLOCK();
    *module = (CUmodule)m;
    if (made)
        *made = m;
    return CUDA_SUCCESS;
oom:
    free(ids);
    if (m)
        module_free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult module_from_text(CUmodule *module, const char *text)
{
    return module_from_text_ex(module, text, 0, NULL);
}

static void library_free(struct library *l)
{
    for (unsigned int i = 0; i < l->n; i++) {
        for (struct func *f = l->kerns[i]->others, *next; f; f = next) {
            next = f->next;
            free(f);
        }
        free(l->kerns[i]->fn);
        free(l->kerns[i]);
    }
    free(l->kerns);
    free(l);
}

static CUresult library_from_text(CUlibrary *library, const char *text)
{
    if (!library || !text)
        return CUDA_ERROR_INVALID_VALUE;
    builtins_once();
    unsigned int budget = 0;
    if (cubin_payload(&text, &budget) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    unsigned int *ids, n;
    LOCK();
    CUresult rc = parse_image(text, &ids, &n);
    UNLOCK();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct library *l = calloc(1, sizeof *l);
    if (l && n)
        l->kerns = calloc(n, sizeof *l->kerns);
    if (!l || (n && !l->kerns))
        goto oom;
    l->magic = MAGIC_LIB;
    for (; l->n < n; l->n++) {
        struct kern *k = malloc(sizeof *k);
        struct func *f = malloc(sizeof *f);
        if (!k || !f) {
            free(k);
            free(f);
            goto oom;
        }
        func_init(f, ids[l->n], NULL, 0);
        k->magic = MAGIC_KERN;
        k->entry = ids[l->n];
        k->lib = l;
        k->fn = f;
        k->others = NULL;
        l->kerns[l->n] = k;
    }
    free(ids);
    ids = NULL;
    LOCK();
    int ok = h_add(l) == 0;
    for (unsigned int i = 0; ok && i < l->n; i++)
        ok = h_add(l->kerns[i]) == 0 && h_add(l->kerns[i]->fn) == 0;
    if (!ok) {
        for (unsigned int i = 0; i < l->n; i++) {
            h_del(l->kerns[i]->fn);
            h_del(l->kerns[i]);
        }
        h_del(l);
        UNLOCK();
        library_free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    UNLOCK();
    *library = (CUlibrary)l;
    return CUDA_SUCCESS;
oom:
    free(ids);
    if (l)
        library_free(l);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Reads a whole image file, NUL-terminated. */
static CUresult read_file(const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap >= FC_MAX_IMAGE) {
                free(buf);
                fclose(f);
                return CUDA_ERROR_INVALID_IMAGE;
            }
            cap = cap ? cap * 2 : 8192;
            char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    buf[len] = '\0';
    *out = buf;
    return CUDA_SUCCESS;
}

static int jit_options_ok(unsigned int n, const void *opts, const void *vals)
{
    return n == 0 || (opts && vals);
}

FC_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    ENTER_INIT(cuModuleLoad);
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    char *text;
    CUresult rc = read_file(fname, &text);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = module_from_text(module, text);
    free(text);
    return rc;
}

FC_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    ENTER_INIT(cuModuleLoadData);
    return module_from_text(module, image);
}

/* Writes `msg` into the log buffer the options name (ERROR_ or INFO_):
 * truncated to its size, which is then written back as the bytes used. */
static void jit_log(unsigned int n, const CUjit_option *opts, void **vals, CUjit_option buf_opt,
                    CUjit_option size_opt, const char *msg)
{
    char *buf = NULL;
    int size_at = -1;
    for (unsigned int i = 0; i < n; i++) {
        if (opts[i] == buf_opt)
            buf = vals[i];
        else if (opts[i] == size_opt)
            size_at = (int)i;
    }
    size_t size = size_at >= 0 ? (size_t)(uintptr_t)vals[size_at] : 0;
    if (!buf || size == 0)
        return;
    int w = snprintf(buf, size, "%s", msg);
    size_t used = w < 0 ? 0 : (size_t)w + 1 > size ? size : (size_t)w + 1;
    vals[size_at] = (void *)(uintptr_t)used;
}

/* The options are recorded on the module; a register budget
 * (CU_JIT_MAX_REGISTERS) caps its functions' registers; the option and
 * value fakecuda_fail_jit planted fail the load as ptxas would; the wall
 * time reads 0.5 ms. */
FC_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
    ENTER_INIT(cuModuleLoadDataEx);
    if (!jit_options_ok(numOptions, options, optionValues) || numOptions > FC_MAX_JIT)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int budget = 0;
    LOCK();
    CUjit_option fail_opt = g_fail_opt;
    unsigned long long fail_val = g_fail_val;
    UNLOCK();
    for (unsigned int i = 0; i < numOptions; i++) {
        unsigned long long v = (uintptr_t)optionValues[i];
        if (options[i] == fail_opt && v == fail_val) {
            char msg[160];
            snprintf(msg, sizeof msg, "ptxas fatal   : fakecuda: option %d value %llu planted to fail",
                     (int)fail_opt, fail_val);
            jit_log(numOptions, options, optionValues, CU_JIT_ERROR_LOG_BUFFER,
                    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, msg);
            return CUDA_ERROR_INVALID_PTX;
        }
        if (options[i] == CU_JIT_MAX_REGISTERS)
            budget = (unsigned int)v;
    }
    struct module *m;
    CUresult rc = module_from_text_ex(module, image, budget, &m);
    if (rc != CUDA_SUCCESS)
        return rc;
    LOCK();
    m->nopts = numOptions;
    for (unsigned int i = 0; i < numOptions; i++) {
        m->opts[i] = options[i];
        m->vals[i] = (uintptr_t)optionValues[i];
    }
    UNLOCK();
    for (unsigned int i = 0; i < numOptions; i++)
        if (options[i] == CU_JIT_WALL_TIME) {
            float ms = 0.5f;
            memcpy(&optionValues[i], &ms, sizeof ms); /* the driver writes a float into the slot */
        }
    jit_log(numOptions, options, optionValues, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            "ptxas info    : fakecuda: compiled");
    return CUDA_SUCCESS;
}

FC_EXPORT int fakecuda_fail_jit(CUjit_option option, unsigned long long value)
{
    LOCK();
    g_fail_opt = option;
    g_fail_val = value;
    UNLOCK();
    return 0;
}

FC_EXPORT int fakecuda_module_jit_options(CUmodule module, CUjit_option *options, unsigned long long *values,
                                          unsigned int max)
{
    LOCK();
    struct module *m = h_get(module, MAGIC_MODULE);
    int n = m ? (int)m->nopts : -1;
    for (int i = 0; m && i < n && (unsigned int)i < max; i++) {
        options[i] = m->opts[i];
        values[i] = m->vals[i];
    }
    UNLOCK();
    return n;
}

FC_EXPORT unsigned long long fakecuda_live_modules(void)
{
    LOCK();
    unsigned long long n = g_live_modules;
    UNLOCK();
    return n;
}

FC_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    ENTER_INIT(cuModuleLoadFatBinary);
    return module_from_text(module, fatCubin);
}

FC_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    ENTER_INIT(cuModuleGetFunction);
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct module *m = h_get(hmod, MAGIC_MODULE);
    if (!m) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < m->n; i++) {
        if (strcmp(g_kernels[m->funcs[i]->entry].name, name) == 0) {
            *hfunc = (CUfunction)m->funcs[i];
            UNLOCK();
            return CUDA_SUCCESS;
        }
    }
    UNLOCK();
    return CUDA_ERROR_NOT_FOUND;
}

FC_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    ENTER_INIT(cuModuleUnload);
    LOCK();
    struct module *m = h_get(hmod, MAGIC_MODULE);
    if (!m) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < m->n; i++)
        h_del(m->funcs[i]);
    h_del(m);
    g_live_modules--;
    UNLOCK();
    module_free(m);
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                     void **jitOptionsValues, unsigned int numJitOptions,
                                     CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                     unsigned int numLibraryOptions)
{
    ENTER_INIT(cuLibraryLoadData);
    if (!jit_options_ok(numJitOptions, jitOptions, jitOptionsValues) ||
        !jit_options_ok(numLibraryOptions, libraryOptions, libraryOptionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return library_from_text(library, code);
}

FC_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                         void **jitOptionsValues, unsigned int numJitOptions,
                                         CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                         unsigned int numLibraryOptions)
{
    ENTER_INIT(cuLibraryLoadFromFile);
    if (!library || !fileName || !jit_options_ok(numJitOptions, jitOptions, jitOptionsValues) ||
        !jit_options_ok(numLibraryOptions, libraryOptions, libraryOptionValues))
        return CUDA_ERROR_INVALID_VALUE;
    char *text;
    CUresult rc = read_file(fileName, &text);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = library_from_text(library, text);
    free(text);
    return rc;
}

FC_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    ENTER_INIT(cuLibraryGetKernel);
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct library *l = h_get(library, MAGIC_LIB);
    if (!l) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < l->n; i++) {
        if (strcmp(g_kernels[l->kerns[i]->entry].name, name) == 0) {
            *pKernel = (CUkernel)l->kerns[i];
            UNLOCK();
            return CUDA_SUCCESS;
        }
    }
    UNLOCK();
    return CUDA_ERROR_NOT_FOUND;
}

FC_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    ENTER_INIT(cuLibraryUnload);
    LOCK();
    struct library *l = h_get(library, MAGIC_LIB);
    if (!l) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (unsigned int i = 0; i < l->n; i++) {
        for (struct func *f = l->kerns[i]->others; f; f = f->next)
            h_del(f);
        h_del(l->kerns[i]->fn);
        h_del(l->kerns[i]);
    }
    h_del(l);
    UNLOCK();
    library_free(l);
    return CUDA_SUCCESS;
}

/* The kernel's function in the current context (none current: the
 * primary, deviation: the driver wants one current). In another context
 * than the primary it is a function of its own, made on the first ask and
 * given again after: the same code and resources, its own attributes
 * (carveout), launchable only there. Those of a destroyed context stay,
 * unused, until the library goes. */
FC_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    ENTER_INIT(cuKernelGetFunction);
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct kern *k = h_get(kernel, MAGIC_KERN);
    if (!k) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    const struct ctx *c = current_ctx_locked();
    struct func *f = k->fn;
    if (c && c != &g_primary) {
        for (f = k->others; f && (f->ctx != c || f->ctx_serial != c->serial); f = f->next)
            ;
        if (!f && (f = malloc(sizeof *f)) != NULL) {
            *f = *k->fn;
            f->ctx = c;
            f->ctx_serial = c->serial;
            f->carveout = -1;
            if (h_add(f) != 0) {
                free(f);
                f = NULL;
            } else {
                f->next = k->others;
                k->others = f;
            }
        }
    }
    if (f)
        *pFunc = (CUfunction)f;
    UNLOCK();
    return f ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The registry entry behind a live CUfunction (kinds & 1) or CUkernel
 * (kinds & 2), or -1. Caller holds the lock. */
FC_HIDDEN int handle_entry(const void *h, int kinds)
{
    struct func *f = (kinds & 1) ? h_get(h, MAGIC_FUNC) : NULL;
    if (f)
        return (int)f->entry;
    struct kern *k = (kinds & 2) ? h_get(h, MAGIC_KERN) : NULL;
    return k ? (int)k->entry : -1;
}

/* The function behind a live CUfunction (kinds & 1) or CUkernel (kinds &
 * 2: the one cuKernelGetFunction gives), or NULL. Caller holds the lock. */
static struct func *handle_func(const void *h, int kinds)
{
    struct func *f = (kinds & 1) ? h_get(h, MAGIC_FUNC) : NULL;
    if (f)
        return f;
    struct kern *k = (kinds & 2) ? h_get(h, MAGIC_KERN) : NULL;
    return k ? k->fn : NULL;
}

FC_HIDDEN unsigned int handle_regs(const void *h, int kinds)
{
    struct func *f = handle_func(h, kinds);
    return f ? f->regs : 0;
}

FC_HIDDEN int handle_carveout(const void *h, int kinds)
{
    struct func *f = handle_func(h, kinds);
    return f ? f->carveout : -1;
}

FC_HIDDEN int handle_rz(const void *h, int kinds)
{
    struct func *f = handle_func(h, kinds);
    return f ? f->rz : 0;
}

FC_HIDDEN int handle_in_ctx(const void *h, const struct ctx *c)
{
    if (h_get(h, MAGIC_KERN))
        return 1; /* a CUkernel runs in whatever context is current */
    const struct func *f = h_get(h, MAGIC_FUNC);
    return f && f->ctx == c && f->ctx_serial == c->serial;
}

/* A function of any context, or a CUkernel passed as one (as launches take
 * it), is loaded already: nothing to do but count it. */
static atomic_ullong g_func_loads;

FC_EXPORT CUresult cuFuncLoad(CUfunction function)
{
    ENTER_INIT(cuFuncLoad);
    LOCK();
    int ok = handle_func(function, 3) != NULL;
    UNLOCK();
    if (!ok)
        return CUDA_ERROR_INVALID_HANDLE;
    atomic_fetch_add(&g_func_loads, 1);
    return CUDA_SUCCESS;
}

FC_EXPORT unsigned long long fakecuda_func_loads(void) { return atomic_load(&g_func_loads); }

static CUresult entry_name(const char **name, const void *h, int kinds)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    int e = handle_entry(h, kinds);
    UNLOCK();
    if (e < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = g_kernels[e].name;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    ENTER_INIT(cuFuncGetName);
    return entry_name(name, hfunc, 1);
}

FC_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    ENTER_INIT(cuKernelGetName);
    return entry_name(name, hfunc, 2);
}

static CUresult func_attribute(int *pi, CUfunction_attribute attrib, const void *h, int kinds)
{
    if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct func *f = handle_func(h, kinds);
    struct func copy = f ? *f : (struct func){0};
    UNLOCK();
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    int v = 0;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = (int)copy.max_threads; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: v = (int)copy.regs; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: v = (int)copy.static_shared; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: v = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: v = FC_SHARED_PER_BLOCK - (int)copy.static_shared; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: v = copy.carveout; break;
    default: break; /* const/local sizes, cluster settings: 0 */
    }
    *pi = v;
    return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    ENTER_INIT(cuFuncGetAttribute);
    return func_attribute(pi, attrib, hfunc, 1);
}

/* The carveout is remembered (-1 or 0..100, as the driver takes); the
 * other settable attributes are not modelled (CUDA_ERROR_NOT_SUPPORTED, a
 * deviation), the read-only ones CUDA_ERROR_INVALID_VALUE. */
FC_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    ENTER_INIT(cuFuncSetAttribute);
    if ((int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct func *f = handle_func(hfunc, 1);
    CUresult rc = CUDA_SUCCESS;
    if (!f)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (attrib == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT && value >= -1 && value <= 100)
        f->carveout = value;
    else if (attrib == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT ||
             attrib <= CU_FUNC_ATTRIBUTE_BINARY_VERSION || attrib == CU_FUNC_ATTRIBUTE_CACHE_MODE_CA)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = CUDA_ERROR_NOT_SUPPORTED;
    UNLOCK();
    return rc;
}

FC_EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    ENTER_INIT(cuKernelGetAttribute);
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return func_attribute(pi, attrib, kernel, 2);
}

static CUresult param_info(const void *h, int kinds, size_t index, size_t *offset, size_t *size)
{
    LOCK();
    int e = handle_entry(h, kinds);
    if (e < 0) {
        UNLOCK();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    const struct kentry *k = &g_kernels[e];
    int ok = index < k->nparams;
    if (ok && offset)
        *offset = k->off[index];
    if (ok && size)
        *size = k->size[index];
    UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    ENTER_INIT(cuFuncGetParamInfo);
    return param_info(func, 1, paramIndex, paramOffset, paramSize);
}

FC_EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                        size_t *paramSize)
{
    ENTER_INIT(cuKernelGetParamInfo);
    return param_info(kernel, 2, paramIndex, paramOffset, paramSize);
}

/* ------------------------------------------------------------------------ */
/* Occupancy                                                                */
/* ------------------------------------------------------------------------ */

static unsigned int min_u(unsigned int a, unsigned int b) { return a < b ? a : b; }

/* Blocks of `block` threads and `dyn` bytes of dynamic shared memory that an
 * SM of sm_90 holds at once: the fewest that its warps, blocks, registers
 * (allocated per warp in units of 256) and shared memory (each block's
 * static and dynamic bytes and the driver's reserved 1 KiB, in units of 128)
 * allow. 0 when one block cannot run at all. */
static int occupancy_blocks(const struct func *f, int block, size_t dyn)
{
    if ((unsigned int)block > f->max_threads || dyn > FC_SHARED_PER_BLOCK - f->static_shared)
        return 0;
    unsigned int warps = ((unsigned int)block + 31) / 32;
    unsigned int by_warps = FC_MAX_THREADS_PER_SM / 32 / warps;
    unsigned int by_regs = FC_REGS_PER_SM / regs_per_warp(f->regs) / warps;
    unsigned int shared = ((unsigned int)dyn + f->static_shared + FC_RESERVED_SHARED + 127) / 128 * 128;
    unsigned int by_shared = FC_SHARED_PER_SM / shared;
    return (int)min_u(min_u(by_warps, FC_MAX_BLOCKS_PER_SM), min_u(by_regs, by_shared));
}

/* A CUkernel passed as a CUfunction is accepted, as the driver documents.
 * Needs a current context for either, as the driver does (seen on an H200,
 * driver 580: CUDA_ERROR_INVALID_CONTEXT from a thread with none, for a
 * module's CUfunction too). */
FC_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                               size_t dynamicSMemSize)
{
    ENTER_INIT(cuOccupancyMaxActiveBlocksPerMultiprocessor);
    if (!numBlocks || blockSize < 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    LOCK();
    struct func *f = handle_func(func, 3);
    struct func copy = f ? *f : (struct func){0};
    UNLOCK();
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *numBlocks = occupancy_blocks(&copy, blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
}
