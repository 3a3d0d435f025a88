#include "evolve/trial.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "evolve/robust.h"

/* A driver call's failure into `why`: the call by its exported name and
 * the CUresult, so a report line can be looked up. -1; 0 on success. */
static int failed(char *why, size_t cap, CUresult rc, const char *call)
{
    if (rc == CUDA_SUCCESS)
        return 0;
    snprintf(why, cap, "%s failed: CUresult %d", call, (int)rc);
    return -1;
}
#define ENV_CALL(env, expr, name) failed((env)->why, sizeof (env)->why, (expr), name)
#define CALL(t, expr, name) failed((t)->why, sizeof (t)->why, (expr), name)

/* Every entry the trials use: a table without one is refused at open
 * rather than crashing on a worker thread later. */
#define TRIAL_ENTRIES(X)                                                                                           \
    X(ctx_get_device) X(device_get_attribute) X(stream_create) X(stream_destroy) X(stream_synchronize)             \
    X(event_create) X(event_destroy) X(event_record) X(event_elapsed_time) X(mem_alloc) X(mem_free)                \
    X(memcpy_dtod_async) X(memcpy_dtoh_async) X(memcpy_htod_async) X(memset_d8_async) X(launch_kernel) X(module_load_data_ex) \
    X(module_get_function) X(module_unload) X(mem_host_alloc) X(mem_free_host)

static const char *missing_entry(const drk_driver *d)
{
#define MISSING_(m)                                                                                                \
    if (!d->m)                                                                                                     \
        return #m;
    TRIAL_ENTRIES(MISSING_)
#undef MISSING_
    return NULL;
}

static atomic_int said_host; /* the "host compares" line, once a process */

/* drk's kernels from `fatbin`, or env->why saying why not (compares then
 * go to the host). */
static void load_kernels(drk_trial_env *env, const void *fatbin)
{
    const drk_driver *d = &env->drv;
    CUmodule m = NULL;
    CUresult rc = CUDA_ERROR_INVALID_IMAGE;
    if (!fatbin) {
        snprintf(env->why, sizeof env->why, "no fatbin of drk's kernels: compares on the host");
        return;
    }
    if ((rc = d->module_load_data_ex(&m, fatbin, 0, NULL, NULL)) != CUDA_SUCCESS) {
        snprintf(env->why, sizeof env->why, "drk's kernels did not load (cuModuleLoadDataEx: CUresult %d): "
                 "compares on the host", (int)rc);
        return;
    }
    const char *name = DRK_TRIAL_COMPARE;
    if ((rc = d->module_get_function(&env->compare, m, name)) == CUDA_SUCCESS) {
        name = DRK_TRIAL_POISON;
        rc = d->module_get_function(&env->poison, m, name);
    }
    if (rc != CUDA_SUCCESS) {
        snprintf(env->why, sizeof env->why, "drk's kernels lack %s (cuModuleGetFunction: CUresult %d): "
                 "compares on the host", name, (int)rc);
        d->module_unload(m);
        env->compare = env->poison = NULL;
        return;
    }
    env->kernels = m;
}

int drk_trial_env_open(drk_trial_env *env, const drk_driver *drv, CUcontext ctx, const void *fatbin)
{
    memset(env, 0, sizeof *env);
    env->opened_ns[0] = drk_mono_ns();
    env->drv = *drv;
    env->ctx = ctx;
    const drk_driver *d = &env->drv;
    const char *missing = missing_entry(d);
    if (missing) {
        snprintf(env->why, sizeof env->why, "the driver table lacks %s", missing);
        return -1;
    }
    CUdevice dev;
    int major = 0, minor = 0;
    if (ENV_CALL(env, d->ctx_get_device(&dev), "cuCtxGetDevice") ||
        ENV_CALL(env, d->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                 "cuDeviceGetAttribute") ||
        ENV_CALL(env, d->device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                 "cuDeviceGetAttribute") ||
        ENV_CALL(env, d->device_get_attribute(&env->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                 "cuDeviceGetAttribute"))
        goto fail;
    env->sm = major * 10 + minor;
    if (env->sms < 1)
        env->sms = 1;
    /* Non-blocking: drk's replays never wait on the program's legacy
     * stream, nor it on them. Default events: they time. */
    if (ENV_CALL(env, d->stream_create(&env->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
        goto fail;
    for (unsigned i = 0; i < 2 * DRK_TRIAL_EVENTS; i++)
        if (ENV_CALL(env, d->event_create(&env->ev[i], CU_EVENT_DEFAULT), "cuEventCreate"))
            goto fail;
    env->opened_ns[1] = drk_mono_ns();
    size_t results = DRK_TRIAL_SLOTS * sizeof(drk_trial_compare_result);
    if (ENV_CALL(env, d->mem_alloc(&env->result, results), "cuMemAlloc_v2"))
        goto fail;
    env->opened_ns[2] = drk_mono_ns();
    if (ENV_CALL(env, d->mem_host_alloc((void **)&env->host_result, results, 0), "cuMemHostAlloc"))
        goto fail;
    env->opened_ns[3] = drk_mono_ns();
    load_kernels(env, fatbin);
    env->opened_ns[4] = drk_mono_ns();
    if (!env->kernels) {
        if (ENV_CALL(env, d->mem_host_alloc(&env->staging, DRK_TRIAL_STAGING, 0), "cuMemHostAlloc"))
            goto fail;
        if (!atomic_exchange(&said_host, 1))
            drk_log(DRK_LOG_INFO, "trials: %s", env->why);
    }
    return 0;
fail: {
    char why[sizeof env->why];
    memcpy(why, env->why, sizeof why);
    drk_trial_env_close(env);
    memcpy(env->why, why, sizeof why);
    return -1;
}
}

CUresult drk_trial_buf_get(drk_trial_env *env, CUdeviceptr *ptr, size_t size)
{
    /* The smallest kept buffer that holds `size` and wastes at most as much. */
    unsigned best = env->nkept;
    for (unsigned i = 0; i < env->nkept; i++)
        if (env->kept[i].size >= size && env->kept[i].size / 2 <= size &&
            (best == env->nkept || env->kept[i].size < env->kept[best].size))
            best = i;
    if (best < env->nkept) {
        *ptr = env->kept[best].ptr;
        env->kept[best] = env->kept[--env->nkept];
        return CUDA_SUCCESS;
    }
    CUresult rc = env->drv.mem_alloc(ptr, size);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && env->nkept) {
        drk_trial_env_trim(env, 0); /* what is kept goes before drk yields */
        rc = env->drv.mem_alloc(ptr, size);
    }
    return rc;
}

/* The index of the largest kept buffer (nkept > 0). */
static unsigned largest_kept(const drk_trial_env *env)
{
    unsigned big = 0;
    for (unsigned i = 1; i < env->nkept; i++)
        big = env->kept[i].size > env->kept[big].size ? i : big;
    return big;
}

void drk_trial_buf_put(drk_trial_env *env, CUdeviceptr ptr, size_t size)
{
    if (!ptr)
        return;
    if (!size) {
        env->drv.mem_free(ptr);
        return;
    }
    if (env->nkept == DRK_TRIAL_KEPT) {
        /* Full: the largest goes, the rest stay for the sizes in use. */
        unsigned big = largest_kept(env);
        if (env->kept[big].size <= size) {
            env->drv.mem_free(ptr);
            return;
        }
        env->drv.mem_free(env->kept[big].ptr);
        env->kept[big] = env->kept[--env->nkept];
    }
    env->kept[env->nkept].ptr = ptr, env->kept[env->nkept].size = size;
    env->nkept++;
}

void drk_trial_env_trim(drk_trial_env *env, size_t keep)
{
    size_t total = 0;
    for (unsigned i = 0; i < env->nkept; i++)
        total += env->kept[i].size;
    while (total > keep && env->nkept) {
        unsigned big = largest_kept(env);
        total -= env->kept[big].size;
        env->drv.mem_free(env->kept[big].ptr);
        env->kept[big] = env->kept[--env->nkept];
    }
}

void drk_trial_env_close(drk_trial_env *env)
{
    const drk_driver *d = &env->drv;
    /* Nothing of drk's may still run on what is freed. */
    if (env->stream)
        d->stream_synchronize(env->stream);
    drk_trial_env_trim(env, 0);
    if (env->kernels)
        d->module_unload(env->kernels);
    if (env->result)
        d->mem_free(env->result);
    if (env->staging)
        d->mem_free_host(env->staging);
    if (env->host_result)
        d->mem_free_host(env->host_result);
    for (unsigned i = 0; i < 2 * DRK_TRIAL_EVENTS; i++)
        if (env->ev[i])
            d->event_destroy(env->ev[i]);
    if (env->stream)
        d->stream_destroy(env->stream);
    drk_driver keep = env->drv;
    memset(env, 0, sizeof *env);
    env->drv = keep;
}

/* ---- trials ---- */

/* Sets `from`..`to` back to the kept buffers, or (`now`: memory ran short)
 * to the driver. */
static void free_sets(drk_trial *t, unsigned from, unsigned to, int now)
{
    for (unsigned s = from; s <= to; s++)
        for (unsigned i = 0; i < DRK_REACH_MAX; i++)
            if (t->set[s][i]) {
                if (now)
                    t->env->drv.mem_free(t->set[s][i]);
                else
                    drk_trial_buf_put(t->env, t->set[s][i], i < t->reach.n ? t->reach.alloc[i].size : 0);
                t->set[s][i] = 0;
            }
}

int drk_trial_open(drk_trial *t, drk_trial_env *env, const drk_ptx_flow *flow, const drk_reach *reach,
                   const CUdeviceptr *snap, const uint8_t *bytes, size_t len, const uint32_t grid[3],
                   const uint32_t block[3], uint32_t shared_bytes, CUfunction original)
{
    memset(t, 0, sizeof *t);
    t->env = env;
    if (!reach || reach->n > DRK_REACH_MAX || (reach->n && !snap)) {
        snprintf(t->why, sizeof t->why, "no allocations for the trial");
        return DRK_TRIAL_FAILED;
    }
    /* The snapshot is the trial's from here on (drk_trial_close frees it). */
    t->reach = *reach;
    for (unsigned i = 0; i < reach->n; i++)
        t->set[DRK_SET_SNAPSHOT][i] = snap[i];
    t->original = (drk_trial_fn){original, -1};
    if (!env || !flow || !bytes || !original || len > DRK_PARAMS_MAX) {
        snprintf(t->why, sizeof t->why, "%s", len > DRK_PARAMS_MAX ? "parameter bytes past the limit"
                                                                   : "no environment, flow, bytes or function");
        return DRK_TRIAL_FAILED;
    }
    for (unsigned s = DRK_SET_REFERENCE; s <= DRK_SET_WORK; s++)
        for (unsigned i = 0; i < reach->n; i++) {
            CUresult rc = drk_trial_buf_get(env, &t->set[s][i], reach->alloc[i].size);
            if (rc != CUDA_SUCCESS) {
                t->set[s][i] = 0;
                snprintf(t->why, sizeof t->why, "cuMemAlloc_v2 of %zu bytes failed: CUresult %d",
                         reach->alloc[i].size, (int)rc);
                free_sets(t, DRK_SET_REFERENCE, DRK_SET_WORK, 1);
                return rc == CUDA_ERROR_OUT_OF_MEMORY ? DRK_TRIAL_NO_MEMORY : DRK_TRIAL_FAILED;
            }
        }
    /* Each set's own parameter bytes: the same launch on its copies. */
    for (unsigned s = 0; s < DRK_SETS; s++) {
        memcpy(t->params[s], bytes, len);
        drk_reach_rewrite(flow, &t->reach, t->set[s], t->params[s], len);
    }
    t->len = len;
    t->flow = flow;
    memcpy(t->grid, grid, sizeof t->grid);
    memcpy(t->block, block, sizeof t->block);
    t->shared_bytes = shared_bytes;
    drk_proof_work_init(&t->work, env->spans);
    return DRK_TRIAL_OK;
}

void drk_trial_close(drk_trial *t)
{
    if (t->env) {
        if (t->env->stream)
            t->env->drv.stream_synchronize(t->env->stream);
        free_sets(t, DRK_SET_SNAPSHOT, DRK_SET_WORK, 0);
    }
    if (t->fenced)
        pthread_mutex_unlock(t->fence);
    t->fenced = 0;
    t->env = NULL;
}

/* The kernels' grid: DRK_KERNELS_BYTES_PER_THREAD bytes a thread, at most
 * DRK_KERNELS_BLOCKS_PER_SM blocks an SM, at least one (kernels/kernels.h). */
static unsigned kernel_grid(const drk_trial_env *env, size_t n)
{
    uint64_t per_block = (uint64_t)DRK_TRIAL_KERNEL_BYTES * DRK_TRIAL_KERNEL_BLOCK;
    uint64_t blocks = (n + per_block - 1) / per_block, cap = (uint64_t)DRK_TRIAL_KERNEL_BLOCKS_PER_SM * env->sms;
    if (blocks > cap)
        blocks = cap;
    return blocks ? (unsigned)blocks : 1;
}

static int set_ok(drk_trial *t, unsigned set, int written)
{
    if (set < DRK_SETS && (!written || set != DRK_SET_SNAPSHOT))
        return 0;
    snprintf(t->why, sizeof t->why, "%s set %u", written ? "refused to write" : "no", set);
    return -1;
}

static int op_copy(drk_trial *t, unsigned dst, unsigned src)
{
    if (set_ok(t, dst, 1) || set_ok(t, src, 0))
        return -1;
    const drk_trial_env *env = t->env;
    for (unsigned i = 0; i < t->reach.n; i++) {
        if (CALL(t, env->drv.memcpy_dtod_async(t->set[dst][i], t->set[src][i], t->reach.alloc[i].size, env->stream),
                 "cuMemcpyDtoDAsync_v2"))
            return -1;
        t->moved += 2 * (uint64_t)t->reach.alloc[i].size;
    }
    return 0;
}

static int copy_fn(void *self, unsigned dst, unsigned src) { return op_copy(self, dst, src); }

/* 0 when [off, off + len) lies in allocation `alloc`; else -1, why says
 * what (`what`) would have gone past it. */
static int span_ok(drk_trial *t, unsigned alloc, size_t off, size_t len, const char *what)
{
    if (alloc < t->reach.n && off <= t->reach.alloc[alloc].size && len <= t->reach.alloc[alloc].size - off)
        return 0;
    snprintf(t->why, sizeof t->why, "%s past allocation %u", what, alloc);
    return -1;
}

static int copy_part_fn(void *self, unsigned dst, unsigned src, unsigned alloc, size_t off, size_t len)
{
    drk_trial *t = self;
    if (set_ok(t, dst, 1) || set_ok(t, src, 0) || span_ok(t, alloc, off, len, "copy"))
        return -1;
    if (!len)
        return 0;
    t->moved += 2 * (uint64_t)len;
    return CALL(t, t->env->drv.memcpy_dtod_async(t->set[dst][alloc] + off, t->set[src][alloc] + off, len,
                                                 t->env->stream),
                "cuMemcpyDtoDAsync_v2");
}

static size_t size_fn(void *self, unsigned alloc)
{
    drk_trial *t = self;
    return alloc < t->reach.n ? t->reach.alloc[alloc].size : 0;
}

static int poison_fn(void *self, unsigned set, unsigned alloc, size_t off, size_t len, uint64_t pattern)
{
    drk_trial *t = self;
    const drk_trial_env *env = t->env;
    const drk_driver *d = &env->drv;
    if (set_ok(t, set, 1) || span_ok(t, alloc, off, len, "poison"))
        return -1;
    if (!len)
        return 0;
    t->moved += len;
    CUdeviceptr dst = t->set[set][alloc] + off;
    if (env->kernels) {
        drk_trial_poison_params p = {dst, len, pattern};
        void *kp[3] = {&p.dst, &p.n, &p.pattern};
        return CALL(t,
                    d->launch_kernel(env->poison, kernel_grid(env, len), 1, 1, DRK_TRIAL_KERNEL_BLOCK, 1, 1, 0,
                                     env->stream, kp, NULL),
                    "cuLaunchKernel (drk_poison)");
    }
    /* Host path: the pattern from the staging buffer's start, a multiple
     * of 8 bytes a copy, so each copy starts at the pattern's byte 0. The
     * copies queued on drk's stream land first; a copy from pinned memory
     * has completed when it returns. */
    if (CALL(t, d->stream_synchronize(env->stream), "cuStreamSynchronize"))
        return -1;
    uint8_t *h = env->staging;
    size_t chunk = len < DRK_TRIAL_STAGING ? len : DRK_TRIAL_STAGING;
    for (size_t i = 0; i < chunk; i++)
        h[i] = (uint8_t)(pattern >> (8 * (i % 8)));
    for (size_t done = 0; done < len; done += chunk) {
        size_t n = len - done < chunk ? len - done : chunk;
        /* On drk's stream (never the legacy one, which would order the
         * program's blocking streams after it), waited for before the
         * staging buffer is used again. */
        if (CALL(t, d->memcpy_htod_async(dst + done, h, n, env->stream), "cuMemcpyHtoDAsync_v2") ||
            CALL(t, d->stream_synchronize(env->stream), "cuStreamSynchronize"))
            return -1;
    }
    return 0;
}

static void diff_bytes(const uint8_t *a, const uint8_t *b, size_t n, uint64_t base, drk_diff *out)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (!out->ndiff)
                out->first = base + i;
            out->last = base + i;
            out->ndiff++;
        }
}

static int compare_fn(void *self, unsigned a, unsigned b, unsigned alloc, unsigned slot)
{
    drk_trial *t = self;
    const drk_trial_env *env = t->env;
    const drk_driver *d = &env->drv;
    if (set_ok(t, a, 0) || set_ok(t, b, 0))
        return -1;
    if (alloc >= t->reach.n || slot >= DRK_TRIAL_SLOTS) {
        snprintf(t->why, sizeof t->why, "no allocation %u or slot %u", alloc, slot);
        return -1;
    }
    CUdeviceptr pa = t->set[a][alloc], pb = t->set[b][alloc];
    size_t n = t->reach.alloc[alloc].size;
    t->moved += 2 * (uint64_t)n;
    t->slots = slot + 1 > t->slots ? slot + 1 : t->slots;
    t->slot_grid[slot] = 0;
    if (env->kernels) {
        CUdeviceptr res = env->result + slot * sizeof(drk_trial_compare_result);
        drk_trial_compare_params p = {pa, pb, n, res};
        void *kp[4] = {&p.a, &p.b, &p.n, &p.result};
        unsigned grid = kernel_grid(env, n);
        if (CALL(t, d->memset_d8_async(res, 0, sizeof(drk_trial_compare_result), env->stream), "cuMemsetD8Async") ||
            CALL(t,
                 d->launch_kernel(env->compare, grid, 1, 1, DRK_TRIAL_KERNEL_BLOCK, 1, 1, 0, env->stream, kp, NULL),
                 "cuLaunchKernel (drk_compare)"))
            return -1;
        t->slot_grid[slot] = grid;
        return 0;
    }
    /* Host path: both sides through the staging buffer's halves, copied
     * in order on drk's stream (after what is queued), compared now. */
    drk_diff *out = &t->slot_diff[slot];
    *out = (drk_diff){0, UINT64_MAX, UINT64_MAX};
    size_t half = DRK_TRIAL_STAGING / 2;
    uint8_t *ha = env->staging, *hb = ha + half;
    for (size_t off = 0; off < n; off += half) {
        size_t c = n - off < half ? n - off : half;
        if (CALL(t, d->memcpy_dtoh_async(ha, pa + off, c, env->stream), "cuMemcpyDtoHAsync_v2") ||
            CALL(t, d->memcpy_dtoh_async(hb, pb + off, c, env->stream), "cuMemcpyDtoHAsync_v2") ||
            CALL(t, d->stream_synchronize(env->stream), "cuStreamSynchronize"))
            return -1;
        if (memcmp(ha, hb, c) != 0)
            diff_bytes(ha, hb, c, off, out);
    }
    t->slot_grid[slot] = 1;
    return 0;
}

/* A replay of `fn` took `ns` by its events: its function's runs and
 * quickest run (drk_trial_gpu_ns). */
static void note_run(drk_trial *t, drk_trial_fn fn, double ns)
{
    unsigned i = 0;
    while (i < t->nfns && (t->fns[i].fn.fn != fn.fn || t->fns[i].fn.carveout != fn.carveout))
        i++;
    if (i == t->nfns) {
        if (i == DRK_TRIAL_FNS) {
            t->other_ns += ns;
            return;
        }
        t->fns[t->nfns++].fn = fn, t->fns[i].runs = 0, t->fns[i].min_ns = ns;
    }
    t->fns[i].runs++;
    if (ns < t->fns[i].min_ns)
        t->fns[i].min_ns = ns;
}

/* Waits for what is queued and reads the replays' times: ticket k's
 * events are pair k % DRK_TRIAL_EVENTS. Releases the fence. */
static int harvest(drk_trial *t)
{
    const drk_trial_env *env = t->env;
    const drk_driver *d = &env->drv;
    int bad = CALL(t, d->stream_synchronize(env->stream), "cuStreamSynchronize");
    t->waits++;
    if (t->fenced)
        pthread_mutex_unlock(t->fence);
    t->fenced = 0;
    for (; t->harvested < t->tickets; t->harvested++) {
        unsigned e = 2 * (t->harvested % DRK_TRIAL_EVENTS);
        float ms = 0;
        double *ns = &t->ns[t->harvested % DRK_TRIAL_TICKETS];
        *ns = -1;
        if (bad || (bad = CALL(t, d->event_elapsed_time(&ms, env->ev[e], env->ev[e + 1]), "cuEventElapsedTime_v2")))
            continue; /* lost with the batch */
        *ns = ms > 0 ? (double)ms * 1e6 : 0;
        t->gpu_ns += (uint64_t)(*ns + 0.5);
        note_run(t, t->ticket_fn[t->harvested % DRK_TRIAL_TICKETS], *ns);
    }
    return bad ? -1 : 0;
}

double drk_trial_gpu_ns(const drk_trial *t)
{
    double ns = t->other_ns;
    for (unsigned i = 0; i < t->nfns; i++)
        ns += t->fns[i].runs * t->fns[i].min_ns;
    return ns;
}

static int wait_fn(void *self, drk_diff *out, unsigned nslots)
{
    drk_trial *t = self;
    const drk_trial_env *env = t->env;
    int bad = 0;
    if (env->kernels && t->slots)
        bad = CALL(t,
                   env->drv.memcpy_dtoh_async(env->host_result, env->result,
                                              t->slots * sizeof(drk_trial_compare_result), env->stream),
                   "cuMemcpyDtoHAsync_v2");
    if (harvest(t) != 0)
        bad = 1;
    for (unsigned i = 0; i < nslots && !bad; i++) {
        uint32_t grid = i < t->slots ? t->slot_grid[i] : 0;
        if (!grid) {
            snprintf(t->why, sizeof t->why, "compare slot %u was not queued", i);
            bad = 1;
        } else if (!env->kernels) {
            out[i] = t->slot_diff[i];
        } else {
            const drk_trial_compare_result *r = &env->host_result[i];
            if (r->done != 1 || r->blocks != grid) {
                snprintf(t->why, sizeof t->why, "drk_compare did not finish (done %u, %llu of %u blocks)", r->done,
                         (unsigned long long)r->blocks, grid);
                bad = 1;
            }
            out[i] = (drk_diff){r->ndiff, r->first, r->last};
        }
    }
    /* What the work set's runs rested on (drk_proof_work): every slot
     * queued, equal or not; a failed wait holds nothing. */
    static unsigned char equal[DRK_TRIAL_SLOTS];
    for (unsigned i = 0; i < t->slots; i++) {
        const drk_diff *d = &t->slot_diff[i];
        drk_diff gpu;
        if (env->kernels && t->slot_grid[i]) {
            const drk_trial_compare_result *r = &env->host_result[i];
            gpu = (drk_diff){r->done == 1 && r->blocks == t->slot_grid[i] ? r->ndiff : 1, 0, 0};
            d = &gpu;
        }
        equal[i] = !bad && t->slot_grid[i] && d->ndiff == 0;
    }
    drk_proof_work_waited(&t->work, equal, bad ? 0 : t->slots);
    memset(t->slot_grid, 0, t->slots * sizeof *t->slot_grid);
    t->slots = 0;
    t->checks = 0;
    return bad ? -1 : 0;
}

/* Queues one replay of `fn` on `set` between a pair of events: its
 * ticket, or -1. With DRK_TRIAL_EVENTS in flight, the oldest are waited
 * for first. */
static int replay(drk_trial *t, unsigned set, drk_trial_fn fn)
{
    const drk_trial_env *env = t->env;
    const drk_driver *d = &env->drv;
    if (set_ok(t, set, 1))
        return -1;
    if (!fn.fn || (fn.carveout >= 0 && !d->launch_kernel_ex)) {
        snprintf(t->why, sizeof t->why, "%s",
                 fn.fn ? "the driver lacks cuLaunchKernelEx (a carveout a launch)" : "no function to replay");
        return -1;
    }
    if (t->tickets - t->harvested >= DRK_TRIAL_EVENTS && harvest(t) != 0)
        return -1;
    if (t->fence && !t->fenced) {
        pthread_mutex_lock(t->fence);
        t->fenced = 1;
    }
    if (t->gone && atomic_load(t->gone)) {
        t->unloaded = 1;
        snprintf(t->why, sizeof t->why, "its module was unloaded by the program");
        return -1;
    }
    size_t len = t->len;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, t->params[set], CU_LAUNCH_PARAM_BUFFER_SIZE, &len,
                     CU_LAUNCH_PARAM_END};
    unsigned e = 2 * (t->tickets % DRK_TRIAL_EVENTS);
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT};
    attr.value.sharedMemCarveout = (unsigned)fn.carveout;
    CUlaunchConfig lc = {t->grid[0], t->grid[1], t->grid[2], t->block[0],   t->block[1],
                         t->block[2], t->shared_bytes, env->stream, &attr, 1};
    if (CALL(t, d->event_record(env->ev[e], env->stream), "cuEventRecord") ||
        (fn.carveout < 0 ? CALL(t,
                                d->launch_kernel(fn.fn, t->grid[0], t->grid[1], t->grid[2], t->block[0], t->block[1],
                                                 t->block[2], t->shared_bytes, env->stream, NULL, extra),
                                "cuLaunchKernel")
                         : CALL(t, d->launch_kernel_ex(&lc, fn.fn, NULL, extra), "cuLaunchKernelEx")) ||
        CALL(t, d->event_record(env->ev[e + 1], env->stream), "cuEventRecord"))
        return -1;
    t->ticket_fn[t->tickets % DRK_TRIAL_TICKETS] = fn;
    return (int)t->tickets++;
}

static int run_fn(void *self, unsigned set, int variant)
{
    drk_trial *t = self;
    return replay(t, set, variant ? t->variant : t->original) < 0 ? -1 : 0;
}

drk_proof_ops drk_trial_ops(drk_trial *t)
{
    return (drk_proof_ops){t, t->reach.n, size_fn, copy_fn, poison_fn, run_fn, compare_fn, wait_fn, copy_part_fn,
                           &t->work};
}

int drk_trial_queue_timed(drk_trial *t, drk_trial_fn fn)
{
    drk_proof_ops ops = drk_trial_ops(t);
    if (drk_proof_fresh(&ops, t->ref, DRK_SET_WORK, t->ref && t->ref->poisoned) != 0)
        return -1;
    int k = replay(t, DRK_SET_WORK, fn);
    if (k < 0)
        return k;
    if (!t->ref) {
        t->work.known = 0; /* no W to say what it wrote */
        return k;
    }
    int variant = fn.fn != t->original.fn || fn.carveout != t->original.carveout;
    drk_proof_work_ran(&ops, t->ref, variant);
    /* Every timed run compared with O1 too, while restoring only what may
     * differ: a variant's, so that the runs after it need no whole copy (a
     * compare reads what that copy would); the original's, so that every
     * run is prepared alike -- after a run and its compare -- and a
     * candidate's time is never taken on a cache its predecessor left
     * warmer than the original's. */
    if ((t->work.spans || t->check_whole) && t->checks < DRK_TRIAL_CHECKS &&
        drk_proof_check_work(&ops, t->ref, DRK_PROOF_SLOTS + t->checks++ * DRK_REACH_MAX) != 0)
        return -1;
    return k;
}

int drk_trial_tainted(const drk_trial *t) { return t->work.tainted; }

int drk_trial_last_ticket(const drk_trial *t) { return t->tickets ? (int)t->tickets - 1 : -1; }

int drk_trial_wait(drk_trial *t) { return wait_fn(t, NULL, 0); }

double drk_trial_ticket_ns(drk_trial *t, int ticket)
{
    unsigned k = (unsigned)ticket;
    if (ticket < 0 || k >= t->harvested || t->tickets - k > DRK_TRIAL_TICKETS) {
        snprintf(t->why, sizeof t->why, "no time for replay %d", ticket);
        return -1;
    }
    double ns = t->ns[k % DRK_TRIAL_TICKETS];
    if (ns < 0)
        return -1; /* lost with a failed wait: why says how */
    if (ns == 0) {
        snprintf(t->why, sizeof t->why, "a replay timed 0 ns (below the events' resolution)");
        return -1;
    }
    return ns;
}

int drk_trial_queue_pairs(drk_trial *t, unsigned pairs)
{
    int first = -1;
    for (unsigned p = 0; p < pairs; p++)
        for (int j = 0; j < 2; j++) {
            int v = p % 2 ? 1 - j : j; /* AB, then BA: neither always runs on a warm cache */
            int k = drk_trial_queue_timed(t, v ? t->variant : t->original);
            if (k < 0)
                return -1;
            first = first < 0 ? k : first;
        }
    return first;
}

/* The median of `n` runs of one function (sorted in place) that were not
 * held up: within DRK_TRIAL_HELD of the quickest of them. The GPU shares
 * itself between the program's context and drk's in time slices, and a
 * replay's events then count the program's slice too: on the H200 the
 * n-body's served variant measured in pairs 9.0, 2.05, 9.5, 2.06 (every
 * second run of the original held up by ~2 ms; its true speedup 2.05),
 * and the original's median over 4 runs made its candidates 5.3-5.8x.
 * Noise on a GPU of its own (1-3%) keeps every run. */
static double clean_median(float *ns, unsigned n)
{
    drk_sort_floats(ns, n);
    unsigned k = 1;
    while (k < n && ns[k] <= ns[0] * DRK_TRIAL_HELD)
        k++;
    return drk_median_sorted(ns, k);
}

int drk_trial_read_pairs(drk_trial *t, int first, unsigned pairs, float *speedups, double *original_ns)
{
    double ns[DRK_TRIAL_EVENTS / 2][2]; /* [p][0] the original's, [p][1] the variant's */
    float sorted[2][DRK_TRIAL_EVENTS / 2];
    int got = 0;
    if (original_ns)
        *original_ns = 0;
    if (pairs > DRK_TRIAL_EVENTS / 2) {
        snprintf(t->why, sizeof t->why, "more pairs than a wait holds");
        return -1;
    }
    unsigned n = 0;
    for (unsigned p = 0; p < pairs; p++, n++) {
        for (int j = 0; j < 2; j++)
            if ((ns[p][p % 2 ? 1 - j : j] = drk_trial_ticket_ns(t, first + 2 * (int)p + j)) < 0)
                return -1;
        sorted[0][p] = (float)ns[p][0], sorted[1][p] = (float)ns[p][1];
        if (ns[p][1] >= 2 * ns[p][0] && !t->full) {
            n++;
            break; /* 2x slower: one sample says enough */
        }
    }
    /* A run held up stands at its function's median of runs that were not
     * (clean_median): each pair's sample is then both sides' own time. */
    double med[2] = {clean_median(sorted[0], n), clean_median(sorted[1], n)};
    double q[2] = {sorted[0][0], sorted[1][0]}; /* the quickest of each side */
    for (unsigned p = 0; p < n; p++) {
        double x[2];
        for (int j = 0; j < 2; j++)
            x[j] = ns[p][j] > q[j] * DRK_TRIAL_HELD ? med[j] : ns[p][j];
        speedups[got++] = (float)(x[0] / x[1]);
    }
    if (original_ns && got)
        *original_ns = med[0];
    return got;
}

int drk_trial_read_runs(drk_trial *t, int first, unsigned runs, float *speedups)
{
    if (t->original_ns <= 0) {
        snprintf(t->why, sizeof t->why, "the original was not timed on this capture");
        return -1;
    }
    int got = 0;
    for (unsigned i = 0; i < runs; i++) {
        double ns = drk_trial_ticket_ns(t, first + (int)i);
        if (ns < 0)
            return -1;
        speedups[got++] = (float)(t->original_ns / ns);
        if (ns >= 2 * t->original_ns)
            break; /* 2x slower: one sample says enough */
    }
    return got;
}

int drk_trial_queue_runs(drk_trial *t, drk_trial_fn fn, unsigned runs)
{
    int first = -1;
    for (unsigned i = 0; i < runs; i++) {
        int k = drk_trial_queue_timed(t, fn);
        if (k < 0)
            return -1;
        first = first < 0 ? k : first;
    }
    return first;
}

int drk_trial_read_original_at(drk_trial *t, const int *tickets, unsigned runs)
{
    /* The median of the runs not held up by the program's time slices
     * (clean_median), not the mean nor the plain median: on the H200 every
     * second run could be held up. */
    float ns[DRK_TRIAL_EVENTS];
    t->original_ns = 0;
    if (runs > DRK_TRIAL_EVENTS) {
        snprintf(t->why, sizeof t->why, "more runs than a wait holds");
        return -1;
    }
    for (unsigned i = 0; i < runs; i++) {
        double x = drk_trial_ticket_ns(t, tickets[i]);
        if (x < 0)
            return -1;
        ns[i] = (float)x;
    }
    if (runs)
        t->original_ns = clean_median(ns, runs);
    return 0;
}

int drk_trial_read_original(drk_trial *t, int first, unsigned runs)
{
    int k[DRK_TRIAL_EVENTS];
    for (unsigned i = 0; i < runs && i < DRK_TRIAL_EVENTS; i++)
        k[i] = first + (int)i;
    return drk_trial_read_original_at(t, k, runs);
}

int drk_trial_time_original(drk_trial *t, unsigned runs)
{
    t->original_ns = 0;
    int first = drk_trial_queue_runs(t, t->original, runs);
    if ((runs && first < 0) || drk_trial_wait(t) != 0)
        return -1;
    return drk_trial_read_original(t, first, runs);
}

int drk_trial_time_variant(drk_trial *t, unsigned runs, float *speedups)
{
    if (t->original_ns <= 0) {
        snprintf(t->why, sizeof t->why, "the original was not timed on this capture");
        return -1;
    }
    int first = drk_trial_queue_runs(t, t->variant, runs);
    if ((runs && first < 0) || drk_trial_wait(t) != 0)
        return -1;
    return drk_trial_read_runs(t, first, runs, speedups);
}

int drk_trial_time(drk_trial *t, unsigned pairs, float *speedups, double *original_ns)
{
    int first = drk_trial_queue_pairs(t, pairs);
    if ((pairs && first < 0) || drk_trial_wait(t) != 0)
        return -1;
    return drk_trial_read_pairs(t, first, pairs, speedups, original_ns);
}
