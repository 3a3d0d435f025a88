/* libFuzzer target for the image reader: every entry point that takes
 * untrusted bytes (a program's images, a file named to drk inspect) gets
 * the input, whole, as the only bytes it may read. Built with
 * -fsanitize=fuzzer,address,undefined (DRK_FUZZ=ON, clang); run by
 * tests/fuzz/run.sh on the image fixtures. PTX goes on to the data-flow
 * analysis (ptx_flow.h). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "evolve/image/cubin.h"
#include "evolve/image/fatbin.h"
#include "evolve/image/image.h"
#include "evolve/image/ptx.h"
#include "evolve/image/ptx_flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A fuzzed header may state payloads up to DRK_FATBIN_MAX_PAYLOAD (1 GiB),
 * which the reader allocates by design; beyond this the harness does not
 * ask, so the fuzzer's memory limit finds real leaks and overruns instead. */
#define HARNESS_MAX_PAYLOAD (64u << 20)

/* Reads every field the reader filled, so garbage in them shows up under
 * the sanitizers. */
static unsigned touch_info(const drk_kernel_info *k)
{
    unsigned h = k->nparams ^ k->params_size ^ k->regs ^ k->shared_bytes ^ k->local_bytes ^ k->const_bytes ^
                 k->max_threads ^ k->reqntid[0] ^ k->reqntid[1] ^ k->reqntid[2];
    if (k->name)
        h ^= (unsigned)strlen(k->name);
    for (uint32_t i = 0; i < k->nparams; i++)
        h ^= k->params[i].offset ^ k->params[i].size ^ k->params[i].kind ^ k->params[i].align_log2;
    return h;
}

static volatile unsigned sink;

/* A flow's words lie in its parameter buffer, in order, with known classes. */
static unsigned touch_flow(const drk_ptx_flow *f, const drk_kernel_info *k)
{
    if (!f)
        return 0;
    unsigned h = f->flags ^ (unsigned)f->evolvable ^ (unsigned)strnlen(f->reason, sizeof f->reason);
    if (strnlen(f->reason, sizeof f->reason) == sizeof f->reason || (f->evolvable != !(f->flags & DRK_FLOW_BLOCKING)))
        __builtin_trap();
    for (uint32_t i = 0; i < f->nwords; i++) {
        const drk_flow_word *w = &f->words[i];
        if (w->cls > DRK_FLOW_POINTER || w->param >= k->nparams || (i && w->offset < f->words[i - 1].offset))
            __builtin_trap();
        h ^= w->offset ^ w->size ^ w->cls;
    }
    return h;
}

/* drk_ptx_read's result, then the data flow of its kernels. */
static void read_ptx(const char *text, size_t size)
{
    drk_ptx x;
    char err[256];
    if (drk_ptx_read(text, size, &x, err, sizeof err) != 0)
        return;
    drk_ptx_flow **flows = drk_ptx_flows(text, size, &x);
    for (size_t i = 0; flows && i < x.nkernels; i++)
        sink ^= touch_info(&x.kernels[i]) ^ touch_flow(flows[i], &x.kernels[i]);
    drk_ptx_flows_free(flows, x.nkernels);
    drk_ptx_free(&x);
}

static void read_image(const uint8_t *data, size_t size, unsigned sm)
{
    drk_image_options opt = {.sm = sm};
    drk_image img;
    char err[256];
    memset(&img, 0, sizeof img);
    if (drk_image_read(data, size, &opt, &img, err, sizeof err) != 0) {
        sink ^= (unsigned)strlen(err);
        return;
    }
    unsigned h = (unsigned)strlen(img.first_error) ^ img.stats.entries ^ (unsigned)strlen(drk_image_format_name(img.format));
    for (size_t i = 0; i < img.nkernels; i++) {
        const drk_image_kernel *k = &img.kernels[i];
        h ^= touch_info(&k->info) ^ k->source_arch ^ k->nsass ^ k->nptx;
        if (k->flow && k->flow->nwords && k->source == DRK_INFO_PTX)
            h ^= touch_flow(k->flow, &k->info);
        for (unsigned j = 0; j < k->nsass && j < DRK_IMAGE_MAX_ARCHS; j++)
            h ^= k->sass[j];
        for (unsigned j = 0; j < k->nptx && j < DRK_IMAGE_MAX_ARCHS; j++)
            h ^= k->ptx[j] ^ k->ptx_isa[j];
        if (k->info.name && drk_image_find(&img, k->info.name) == NULL)
            __builtin_trap(); /* every kernel listed must be found by its name */
        h ^= (unsigned)drk_image_kernel_ptx_for(k, 90);
    }
    sink ^= h;
    drk_image_free(&img);
}

static void walk_fatbin(const uint8_t *data, size_t size)
{
    drk_fatbin_iter it;
    drk_fatbin_entry e;
    drk_fatbin_iter_init(&it, data, size);
    int rc, n = 0;
    while ((rc = drk_fatbin_next(&it, &e)) == 1 && n++ < 4096) {
        /* The entry must lie inside the input. */
        if (e.payload < data || e.payload + e.stored_size > data + size ||
            (e.identifier && (e.identifier < (const char *)data ||
                              e.identifier + e.identifier_len > (const char *)data + size)))
            __builtin_trap();
        if (e.decompressed_size > HARNESS_MAX_PAYLOAD)
            continue;
        uint8_t *p = NULL;
        size_t len = 0;
        if (drk_fatbin_payload(&e, &p, &len) == 0) {
            if (p[len] != 0)
                __builtin_trap(); /* promised: a NUL after the bytes */
            if (e.kind == DRK_FATBIN_ELF) {
                drk_cubin c;
                char err[256];
                if (drk_cubin_read(p, len, &c, err, sizeof err) == 0)
                    drk_cubin_free(&c);
            } else if (e.kind == DRK_FATBIN_PTX) {
                read_ptx((const char *)p, len);
            }
            free(p);
        }
    }
    sink ^= (unsigned)rc ^ (unsigned)it.error;
    size_t csize;
    if (drk_fatbin_container_size(data, size, &csize) == 0 && csize > size)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy with nothing around it: ASan then sees any read past
     * the end, which the fuzzer's own buffer may hide. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);

    sink ^= (unsigned)drk_image_classify(copy, size) ^ (unsigned)drk_is_cubin(copy, size) ^
            (unsigned)drk_is_ptx(copy, size);
    size_t extent = 0;
    if (drk_image_extent(copy, size, &extent) == 0 && extent > size)
        __builtin_trap(); /* trusted at most `avail` bytes */
    if (drk_elf_extent(copy, size, &extent) == 0 && extent > size)
        __builtin_trap();

    /* A wrapper's pointers are the caller's to vouch for (image.h): bytes
     * from outside a program never are. */
    if (drk_image_classify(copy, size) != DRK_IMAGE_WRAPPER) {
        read_image(copy, size, 0);
        read_image(copy, size, 90);
    }
    walk_fatbin(copy, size);

    drk_cubin c;
    char err[256];
    if (drk_cubin_read(copy, size, &c, err, sizeof err) == 0) {
        for (size_t i = 0; i < c.nkernels; i++)
            sink ^= touch_info(&c.kernels[i]);
        drk_cubin_free(&c);
    }
    read_ptx((const char *)copy, size);
    free(copy);
    return 0;
}
