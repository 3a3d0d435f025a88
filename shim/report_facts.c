#include "shim/report_facts.h"

#include <stdio.h>

#include "evolve/facts.h"
#include "evolve/loaded.h"
#include "shim/modules.h"

static const char *const kind_names[] = {"scalar", "pointer", "unknown"};

static void u32_or_null(drk_json *j, const char *key, uint32_t v)
{
    if (v == DRK_UNKNOWN_U32)
        drk_json_null(j, key);
    else
        drk_json_u64(j, key, v);
}

static void i32_or_null(drk_json *j, const char *key, int32_t v)
{
    if (v == DRK_DRIVER_UNKNOWN)
        drk_json_null(j, key);
    else
        drk_json_i64(j, key, v);
}

static void write_params(drk_json *j, const drk_param *p, size_t n, int with_kind)
{
    drk_json_open(j, "params", '[');
    for (size_t i = 0; i < n; i++) {
        drk_json_open(j, NULL, '{');
        drk_json_u64(j, "offset", p[i].offset);
        drk_json_u64(j, "size", p[i].size);
        if (with_kind)
            drk_json_str(j, "kind", kind_names[p[i].kind <= DRK_PARAM_KIND_UNKNOWN ? p[i].kind : 2]);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
}

static void write_archs(drk_json *j, const char *key, const uint16_t *a, unsigned n)
{
    drk_json_open(j, key, '[');
    for (unsigned i = 0; i < n; i++)
        drk_json_u64(j, NULL, a[i]);
    drk_json_close(j, ']');
}

static void write_image(drk_json *j, const drk_image_facts *f)
{
    if (!f) {
        drk_json_null(j, "image");
        return;
    }
    drk_json_open(j, "image", '{');
    drk_json_str(j, "from", f->image);
    drk_json_str(j, "layout_source", f->from_ptx ? "ptx" : "sass");
    drk_json_u64(j, "source_arch", f->source_arch);
    write_params(j, f->params, f->nparams, 1);
    drk_json_u64(j, "params_size", f->params_size);
    u32_or_null(j, "registers", f->regs);
    u32_or_null(j, "shared_bytes", f->shared_bytes);
    u32_or_null(j, "local_bytes", f->local_bytes);
    u32_or_null(j, "const_bytes", f->const_bytes);
    drk_json_u64(j, "max_threads", f->max_threads);
    drk_json_open(j, "reqntid", '[');
    for (int d = 0; d < 3; d++)
        drk_json_u64(j, NULL, f->reqntid[d]);
    drk_json_close(j, ']');
    write_archs(j, "sass", f->sass, f->nsass);
    drk_json_open(j, "ptx", '[');
    for (unsigned i = 0; i < f->nptx; i++) {
        char isa[16];
        snprintf(isa, sizeof isa, "%u.%u", f->ptx_isa[i] / 10u, f->ptx_isa[i] % 10u);
        drk_json_open(j, NULL, '{');
        drk_json_u64(j, "arch", f->ptx[i]);
        drk_json_str(j, "isa", isa);
        drk_json_close(j, '}');
    }
    drk_json_close(j, ']');
    drk_json_bool(j, "ptx_for_device", f->ptx_for_device);
    drk_json_close(j, '}');
}

static void write_driver(drk_json *j, const drk_driver_facts *f)
{
    if (!f) {
        drk_json_null(j, "driver");
        return;
    }
    drk_json_open(j, "driver", '{');
    if (f->nparams == DRK_DRIVER_UNKNOWN)
        drk_json_null(j, "params");
    else
        write_params(j, f->params, (size_t)f->nparams, 0);
    i32_or_null(j, "registers", f->regs);
    i32_or_null(j, "shared_bytes", f->shared_bytes);
    i32_or_null(j, "local_bytes", f->local_bytes);
    i32_or_null(j, "const_bytes", f->const_bytes);
    i32_or_null(j, "max_threads", f->max_threads);
    i32_or_null(j, "ptx_version", f->ptx_version);
    i32_or_null(j, "binary_version", f->binary_version);
    drk_json_close(j, '}');
}

void drk_report_facts(drk_json *j, const drk_kernel_record *const *recs, size_t count, uint64_t launches,
                      drk_facts_totals *t)
{
    const drk_image_facts *img = NULL;
    const drk_driver_facts *drv = NULL;
    int named = 0;
    for (size_t i = 0; i < count; i++) {
        if (!img)
            img = atomic_load_explicit(&recs[i]->image, memory_order_acquire);
        if (!drv)
            drv = atomic_load_explicit(&recs[i]->driver, memory_order_acquire);
        named |= recs[i]->kind != DRK_HANDLE_UNKNOWN;
    }
    write_image(j, img);
    write_driver(j, drv);
    int match = drk_facts_params_match(img, drv);
    if (match < 0)
        drk_json_null(j, "params_match");
    else
        drk_json_bool(j, "params_match", match);
    if (!launches)
        return;
    int drv_layout = drv && drv->nparams != DRK_DRIVER_UNKNOWN;
    t->launched++;
    t->named += (uint64_t)named;
    t->with_layout += (uint64_t)(img || drv_layout);
    t->layout_from_image += (uint64_t)(img != NULL);
    t->layout_equal += (uint64_t)(match == 1);
    t->layout_differs += (uint64_t)(match == 0);
    t->image_only += (uint64_t)(img && !drv_layout);
    t->driver_only += (uint64_t)(!img && drv_layout);
    t->with_ptx += (uint64_t)(img && img->nptx);
    t->ptx_for_device += (uint64_t)(img && img->ptx_for_device);
}

void drk_report_facts_totals(drk_json *j, const drk_facts_totals *t)
{
    drk_images_stats s = drk_images_stats_get();
    drk_json_open(j, "facts", '{');
    if (drk_images_sm())
        drk_json_u64(j, "device_sm", drk_images_sm());
    else
        drk_json_null(j, "device_sm");
    if (drk_modules_reserved_shared() >= 0)
        drk_json_u64(j, "device_reserved_shared_bytes", (uint64_t)drk_modules_reserved_shared());
    else
        drk_json_null(j, "device_reserved_shared_bytes");
    drk_json_open(j, "images", '{');
    drk_json_u64(j, "loads", s.loads);
    drk_json_u64(j, "read", s.read);
    drk_json_u64(j, "failed", s.failed);
    drk_json_u64(j, "deferred", s.deferred);
    drk_json_u64(j, "deferred_read", s.deferred_read);
    drk_json_u64(j, "objects_read", s.objects_read);
    drk_json_u64(j, "kernels", s.kernels);
    drk_json_u64(j, "read_us", s.read_ns / 1000u);
    drk_json_u64(j, "read_at_exit_us", s.late_read_ns / 1000u);
    drk_json_close(j, '}');
    drk_json_u64(j, "launched_kernels", t->launched);
    drk_json_u64(j, "named", t->named);
    drk_json_u64(j, "with_layout", t->with_layout);
    drk_json_u64(j, "layout_from_image", t->layout_from_image);
    drk_json_u64(j, "layout_equal_to_driver", t->layout_equal);
    drk_json_u64(j, "layout_differs_from_driver", t->layout_differs);
    drk_json_u64(j, "image_layout_only", t->image_only);
    drk_json_u64(j, "driver_layout_only", t->driver_only);
    drk_json_u64(j, "with_ptx", t->with_ptx);
    drk_json_u64(j, "ptx_for_device", t->ptx_for_device);
    drk_json_close(j, '}');
}
