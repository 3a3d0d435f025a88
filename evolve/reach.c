#include "evolve/reach.h"

#include <stdio.h>
#include <string.h>

int drk_params_pack(const drk_param *params, uint32_t nparams, void *const *kernel_params, const void *packed,
                    size_t packed_size, uint8_t *out, size_t cap, size_t *len)
{
    if (!params || !nparams)
        return -1;
    size_t end = 0;
    for (uint32_t i = 0; i < nparams; i++) {
        size_t e = (size_t)params[i].offset + params[i].size;
        if (params[i].size == 0 || e > cap)
            return -1;
        if (e > end)
            end = e;
    }
    if (kernel_params) {
        memset(out, 0, end); /* the padding between parameters */
        for (uint32_t i = 0; i < nparams; i++) {
            if (!kernel_params[i])
                return -1;
            memcpy(out + params[i].offset, kernel_params[i], params[i].size);
        }
    } else {
        if (!packed || packed_size < end)
            return -1;
        memcpy(out, packed, end);
    }
    *len = end;
    return 0;
}

static int refuse(drk_reach *r, const char *why, uint32_t param, uint32_t offset)
{
    snprintf(r->why, sizeof r->why, "parameter %u (offset %u): %s", param, offset, why);
    return -1;
}

int drk_reach_of(const drk_ptx_flow *flow, const uint8_t *buf, size_t len, drk_extent_fn resolve, size_t copy_max,
                 drk_reach *out)
{
    memset(out, 0, sizeof *out);
    if (!flow || !flow->evolvable) {
        snprintf(out->why, sizeof out->why, "%s", flow ? flow->reason : "no data flow for the kernel");
        return -1;
    }
    for (uint32_t w = 0; w < flow->nwords; w++) {
        const drk_flow_word *fw = &flow->words[w];
        if (fw->cls != DRK_FLOW_POINTER)
            continue;
        out->pointers++;
        if (fw->size != 8)
            return refuse(out, "a pointer word that is not 8 bytes", fw->param, fw->offset);
        if ((size_t)fw->offset + 8 > len)
            return refuse(out, "a pointer word past the parameter buffer", fw->param, fw->offset);
        uint64_t p;
        memcpy(&p, buf + fw->offset, 8);
        if (!p) {
            out->nulls++;
            continue;
        }
        drk_extent e;
        if (!resolve || resolve((CUdeviceptr)p, &e) != 0 || e.size == 0 || p < e.base || p - e.base >= e.size)
            return refuse(out, "points into no allocation drk can place", fw->param, fw->offset);
        if (!e.device)
            return refuse(out, "points at host memory", fw->param, fw->offset);
        unsigned i = 0;
        while (i < out->n && out->alloc[i].base != e.base)
            i++;
        if (i < out->n)
            continue;
        if (out->n == DRK_REACH_MAX)
            return refuse(out, "more allocations than a replay copies (32)", fw->param, fw->offset);
        if (out->bytes + e.size > copy_max) {
            snprintf(out->why, sizeof out->why, "its allocations pass the copy budget (%zu bytes)", copy_max);
            return -1;
        }
        out->alloc[out->n++] = e;
        out->bytes += e.size;
    }
    return 0;
}

void drk_reach_rewrite(const drk_ptx_flow *flow, const drk_reach *r, const CUdeviceptr *bases, uint8_t *buf,
                       size_t len)
{
    for (uint32_t w = 0; w < flow->nwords; w++) {
        const drk_flow_word *fw = &flow->words[w];
        if (fw->cls != DRK_FLOW_POINTER || fw->size != 8 || (size_t)fw->offset + 8 > len)
            continue;
        uint64_t p;
        memcpy(&p, buf + fw->offset, 8);
        if (!p)
            continue;
        for (unsigned i = 0; i < r->n; i++)
            if (p >= r->alloc[i].base && p - r->alloc[i].base < r->alloc[i].size) {
                uint64_t q = (uint64_t)bases[i] + (p - r->alloc[i].base);
                memcpy(buf + fw->offset, &q, 8);
                break;
            }
    }
}
