/* What a launch's pointers reach (evolve/reach.h), on PTX drk analyses
 * itself: a kernel taking two pointers, a scalar and a by-value struct of a
 * pointer and a count, launched through kernelParams and through a packed
 * buffer, against a table of allocations standing for the pool and the
 * driver. */
#include "evolve/reach.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/ptx.h"
#include "evolve/image/ptx_flow.h"

static int failures;
#define CHECK(c)                                                                                                    \
    do {                                                                                                           \
        if (!(c)) {                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                                  \
            failures++;                                                                                            \
        }                                                                                                          \
    } while (0)

/* out[i] = in[i] * s + t.p[i % t.n]: pointers at offsets 0, 8 and 24 of
 * the parameter buffer (the struct at 24: its pointer word, then n). */
static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 out, .param .u64 in, .param .f32 s, .param .align 8 .b8 t[16])\n{\n"
    " .reg .b32 %r<8>; .reg .b64 %rd<16>; .reg .f32 %f<6>; .reg .pred %p;\n"
    " ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in]; ld.param.f32 %f1, [s];\n"
    " ld.param.u64 %rd3, [t]; ld.param.u32 %r1, [t+8];\n"
    " mov.u32 %r2, %tid.x; rem.u32 %r3, %r2, %r1;\n"
    " cvta.to.global.u64 %rd4, %rd1; cvta.to.global.u64 %rd5, %rd2; cvta.to.global.u64 %rd6, %rd3;\n"
    " mul.wide.u32 %rd7, %r2, 4; add.s64 %rd8, %rd5, %rd7; ld.global.f32 %f2, [%rd8];\n"
    " mul.wide.u32 %rd9, %r3, 4; add.s64 %rd10, %rd6, %rd9; ld.global.f32 %f3, [%rd10];\n"
    " fma.rn.f32 %f4, %f2, %f1, %f3; add.s64 %rd11, %rd4, %rd7; st.global.f32 [%rd11], %f4;\n"
    " ret;\n}\n";

/* The allocations: two device buffers of the pool, one of the driver,
 * pinned host memory. */
static const drk_extent table[] = {
    {0x7f0000000000ull, 1 << 20, 1},
    {0x7f0000200000ull, 4096, 1},
    {0x7e0000000000ull, 64 << 20, 1},
    {0x10000000ull, 8192, 0},
};
static int resolves;

static int resolve(CUdeviceptr p, drk_extent *out)
{
    resolves++;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (p >= table[i].base && p - table[i].base < table[i].size) {
            *out = table[i];
            return 0;
        }
    return -1;
}

typedef struct {
    uint64_t p;
    uint32_t n, pad;
} tiny;

int main(void)
{
    drk_ptx m;
    char err[200];
    CHECK(drk_ptx_read(ptx, sizeof ptx - 1, &m, err, sizeof err) == 0 && m.nkernels == 1);
    drk_ptx_flow **flows = drk_ptx_flows(ptx, sizeof ptx - 1, &m);
    CHECK(flows && flows[0] && flows[0]->evolvable);
    if (!flows || !flows[0] || m.nkernels != 1) {
        fprintf(stderr, "test_reach: the PTX was not analysed\n");
        return 1;
    }
    const drk_ptx_flow *f = flows[0];
    const drk_kernel_info *k = &m.kernels[0];
    CHECK(k->nparams == 4 && k->params[3].offset == 24 && k->params[3].size == 16);

    /* kernelParams: one pointer a parameter. */
    uint64_t out = 0x7f0000000100ull, in = 0x7f0000200010ull; /* interior pointers */
    float s = 2.0f;
    tiny t = {0x7f0000000000ull, 7, 0}; /* the same allocation as out */
    void *kp[4] = {&out, &in, &s, &t};
    uint8_t buf[DRK_PARAMS_MAX];
    size_t len = 0;
    CHECK(drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, buf, sizeof buf, &len) == 0 && len == 40);
    drk_reach r;
    CHECK(drk_reach_of(f, buf, len, resolve, 1u << 30, &r) == 0);
    CHECK(r.n == 2 && r.pointers == 3 && r.nulls == 0 && r.bytes == (1u << 20) + 4096);
    CHECK(r.alloc[0].base == 0x7f0000000000ull && r.alloc[1].base == 0x7f0000200000ull);
    /* Rewritten to the copies, each pointer at its own offset in its copy;
     * the scalar and the count untouched. */
    CUdeviceptr copies[2] = {0x5000000000ull, 0x6000000000ull};
    drk_reach_rewrite(f, &r, copies, buf, len);
    uint64_t w0, w1, w3;
    uint32_t n;
    float s2;
    memcpy(&w0, buf, 8), memcpy(&w1, buf + 8, 8), memcpy(&s2, buf + 16, 4), memcpy(&w3, buf + 24, 8),
        memcpy(&n, buf + 32, 4);
    CHECK(w0 == 0x5000000100ull && w1 == 0x6000000010ull && w3 == 0x5000000000ull && s2 == 2.0f && n == 7);

    /* The same launch as a packed buffer (cuLaunchKernel's extra). */
    uint8_t packed[40] = {0};
    memcpy(packed, &out, 8), memcpy(packed + 8, &in, 8), memcpy(packed + 16, &s, 4), memcpy(packed + 24, &t, 16);
    CHECK(drk_params_pack(k->params, (uint32_t)k->nparams, NULL, packed, sizeof packed, buf, sizeof buf, &len) == 0);
    CHECK(drk_reach_of(f, buf, len, resolve, 1u << 30, &r) == 0 && r.n == 2);
    CHECK(drk_params_pack(k->params, (uint32_t)k->nparams, NULL, packed, 39, buf, sizeof buf, &len) == -1);
    CHECK(drk_params_pack(k->params, (uint32_t)k->nparams, NULL, NULL, 0, buf, sizeof buf, &len) == -1);
    CHECK(drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, buf, 32, &len) == -1);
    CHECK(drk_params_pack(NULL, 0, kp, NULL, 0, buf, sizeof buf, &len) == -1);

    /* A null pointer word stays null (the launch did not dereference it). */
    t.p = 0;
    drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, buf, sizeof buf, &len);
    CHECK(drk_reach_of(f, buf, len, resolve, 1u << 30, &r) == 0 && r.nulls == 1 && r.n == 2);
    drk_reach_rewrite(f, &r, copies, buf, len);
    memcpy(&w3, buf + 24, 8);
    CHECK(w3 == 0);

    /* Refused: a pointer no allocation holds, host memory, the budget. */
    in = 0x7f0000300000ull;
    drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, buf, sizeof buf, &len);
    CHECK(drk_reach_of(f, buf, len, resolve, 1u << 30, &r) == -1 && strstr(r.why, "parameter 1 (offset 8)") &&
          strstr(r.why, "no allocation"));
    in = 0x10000100ull;
    drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, buf, sizeof buf, &len);
    CHECK(drk_reach_of(f, buf, len, resolve, 1u << 30, &r) == -1 && strstr(r.why, "host memory"));
    in = 0x7e0000000000ull;
    drk_params_pack(k->params, (uint32_t)k->nparams, kp, NULL, 0, buf, sizeof buf, &len);
    CHECK(drk_reach_of(f, buf, len, resolve, 32u << 20, &r) == -1 && strstr(r.why, "copy budget"));
    CHECK(drk_reach_of(f, buf, len, resolve, (64u << 20) + (1u << 20), &r) == 0 && r.n == 2);
    CHECK(drk_reach_of(f, buf, len, NULL, 1u << 30, &r) == -1);
    CHECK(drk_reach_of(f, buf, 20, resolve, 1u << 30, &r) == -1 && strstr(r.why, "past the parameter buffer"));

    /* A kernel its flow refuses is refused with the flow's reason. */
    static const char global_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                     ".global .align 4 .u32 counter;\n"
                                     ".visible .entry g(.param .u64 p)\n{\n .reg .b64 %rd<3>; .reg .b32 %r<2>;\n"
                                     " ld.param.u64 %rd1, [p]; ld.global.u32 %r1, [counter];\n"
                                     " cvta.to.global.u64 %rd2, %rd1; st.global.u32 [%rd2], %r1; ret;\n}\n";
    drk_ptx gm;
    CHECK(drk_ptx_read(global_ptx, sizeof global_ptx - 1, &gm, err, sizeof err) == 0);
    drk_ptx_flow **gf = drk_ptx_flows(global_ptx, sizeof global_ptx - 1, &gm);
    CHECK(gf && gf[0] && !gf[0]->evolvable);
    if (gf && gf[0]) {
        CHECK(drk_reach_of(gf[0], buf, 8, resolve, 1u << 30, &r) == -1 && strstr(r.why, "counter"));
        drk_ptx_flows_free(gf, gm.nkernels);
    }
    drk_ptx_free(&gm);
    CHECK(drk_reach_of(NULL, buf, len, resolve, 1u << 30, &r) == -1);

    drk_ptx_flows_free(flows, m.nkernels);
    drk_ptx_free(&m);
    printf("%s: %s (%d resolver calls)\n", __FILE__, failures ? "FAILED" : "passed", resolves);
    return failures != 0;
}
