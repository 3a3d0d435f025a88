/* The kernel registry against a driver table the test controls: names from
 * binds and from the driver, shapes, retirement and handle reuse, and exact
 * counts under many threads. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "evolve/registry.h"
#include "tests/unit/check.h"

/* Handles 0x1000.. are functions named f<N>, 0x9000.. kernels named k<N>;
 * anything else the driver cannot name. `renamed` makes function names
 * change, as when a handle value is reused by another module. */
static int renamed;
static char names[256][32];

static CUresult func_name(const char **name, CUfunction f)
{
    uintptr_t h = (uintptr_t)f;
    if (h < 0x1000 || h >= 0x1000 + 256)
        return CUDA_ERROR_INVALID_HANDLE;
    snprintf(names[h - 0x1000], sizeof names[0], "f%lu%s", (unsigned long)(h - 0x1000), renamed ? "b" : "");
    *name = names[h - 0x1000];
    return CUDA_SUCCESS;
}

static CUresult kernel_name(const char **name, CUkernel k)
{
    uintptr_t h = (uintptr_t)k;
    if (h < 0x9000 || h >= 0x9000 + 256)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = "k-from-driver";
    return CUDA_SUCCESS;
}

static const drk_driver table = {.func_get_name = func_name, .kernel_get_name = kernel_name};

static const drk_kernel_record *named(const char *name, int nth)
{
    for (size_t i = 0; i < drk_registry_size(); i++)
        if (strcmp(drk_registry_at(i)->name, name) == 0 && nth-- == 0)
            return drk_registry_at(i);
    return NULL;
}

/* The main thread counts as a thread past the owned rows; the hammer
 * threads are 0..THREADS-1, so both owned rows and the shared one (7 and up)
 * are written at once. */
static unsigned t_shard = 100;

static drk_launch_shape shape(unsigned g, unsigned b) { return (drk_launch_shape){{g, 1, 1}, {b, 1, 1}, 0, 0}; }

enum { THREADS = 10, PER_THREAD = 100000, HANDLES = 64 };

static void *hammer(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        drk_launch_shape s = shape(1 + (i + t) % 4, 128);
        drk_registry_launch(0x1000 + 100 + (i * 7 + t) % HANDLES, &s, t);
    }
    return NULL;
}

int main(void)
{
    drk_launch_shape a = shape(4, 128), b = shape(8, 64);
    drk_registry_configure(&table);

    /* A bound handle keeps the name it was bound with. */
    drk_registry_bind(0x1001, DRK_HANDLE_FUNCTION, "vec_add", 0xAA);
    for (int i = 0; i < 3; i++)
        drk_registry_launch(0x1001, &a, t_shard);
    drk_registry_launch(0x1001, &b, t_shard);
    drk_registry_launch(0x1001, &b, t_shard);
    const drk_kernel_record *r = named("vec_add", 0);
    CHECK(r && drk_record_launches(r) == 5 && r->kind == DRK_HANDLE_FUNCTION);
    CHECK(r && drk_record_shape_launches(r, 0) == 3 && drk_record_shape_launches(r, 1) == 2 &&
          r->shapes[1].shape.grid[0] == 8);
    CHECK(drk_registry_find(0x1001) == r && drk_registry_find(0x1002) == NULL);

    /* A variant serves the geometry it was published for, at every entry
     * point's slot of it, and only there; withdrawn when its launch fails. */
    drk_launch_shape a_ex = a;
    a_ex.entry = 3;
    drk_registry_launch(0x1001, &a_ex, t_shard);
    CHECK(drk_site_variant(drk_registry_site(0x1001, &a)) == 0);
    CHECK(drk_registry_serve(0x1001, &a, 0x7777) == 2 && drk_registry_serve(0x4242, &a, 0x7777) == 0);
    drk_launch_site sa = drk_registry_site(0x1001, &a), sb = drk_registry_site(0x1001, &b);
    CHECK(drk_site_variant(sa) == 0x7777 && drk_site_variant(drk_registry_site(0x1001, &a_ex)) == 0x7777);
    CHECK(sb.r == r && drk_site_variant(sb) == 0);
    CHECK(drk_site_variant(drk_registry_site(0x4242, &a)) == 0);
    drk_registry_variant_failed(sa, 0x6666); /* not the one published: nothing */
    CHECK(drk_site_variant(sa) == 0x7777);
    drk_registry_variant_failed(sa, 0x7777);
    CHECK(drk_site_variant(sa) == 0 && drk_site_variant(drk_registry_site(0x1001, &a_ex)) == 0x7777);
    CHECK(drk_registry_serve(0x1001, &a, 0) == 2 && drk_site_variant(drk_registry_site(0x1001, &a_ex)) == 0);
    CHECK(drk_record_launches(r) == 6);

    /* Unknown handles are named by the driver: function, kernel, neither. */
    drk_registry_launch(0x1002, &a, t_shard);
    drk_registry_launch(0x9001, &a, t_shard);
    drk_registry_launch(0x5555, &a, t_shard);
    CHECK(named("f2", 0) && named("f2", 0)->kind == DRK_HANDLE_FUNCTION);
    CHECK(named("k-from-driver", 0) && named("k-from-driver", 0)->kind == DRK_HANDLE_KERNEL);
    CHECK(named("<unnamed 0x5555>", 0) && named("<unnamed 0x5555>", 0)->kind == DRK_HANDLE_UNKNOWN);

    /* Beyond 8 shapes, launches still count. */
    for (unsigned g = 1; g <= 10; g++) {
        drk_launch_shape s = shape(100 + g, 32);
        drk_registry_launch(0x1002, &s, t_shard);
    }
    const drk_kernel_record *f2 = named("f2", 0);
    CHECK(f2 && drk_record_launches(f2) == 11 && drk_record_other_launches(f2) == 3);

    /* Unloading the owner retires its handles: a reused value is looked up
     * afresh and gets a record of its own; the old one keeps its counts. */
    drk_registry_retire(0xAA);
    renamed = 1;
    drk_registry_launch(0x1001, &a, t_shard);
    CHECK(drk_record_launches(named("vec_add", 0)) == 6);
    CHECK(named("f1b", 0) && drk_record_launches(named("f1b", 0)) == 1);
    renamed = 0;

    /* Binding a handle to another name (no unload seen) also starts anew. */
    drk_registry_bind(0x1002, DRK_HANDLE_FUNCTION, "other", 0xBB);
    drk_registry_launch(0x1002, &a, t_shard);
    CHECK(drk_record_launches(named("f2", 0)) == 11 && named("other", 0) && drk_record_launches(named("other", 0)) == 1);
    /* Binding the same name again only updates the owner. */
    size_t before = drk_registry_size();
    drk_registry_bind(0x1002, DRK_HANDLE_FUNCTION, "other", 0xCC);
    CHECK(drk_registry_size() == before && named("other", 0)->owner == 0xCC);

    /* Many threads, first launches racing: one record per handle, every
     * launch counted. */
    before = drk_registry_size();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, hammer, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(drk_registry_size() == before + HANDLES);
    uint64_t total = 0;
    for (size_t i = before; i < drk_registry_size(); i++)
        total += drk_record_launches(drk_registry_at(i));
    CHECK(total == (uint64_t)THREADS * PER_THREAD);
    CHECK(drk_registry_untracked() == 0);

    drk_registry_reset_counts();
    for (size_t i = 0; i < drk_registry_size(); i++)
        CHECK(drk_record_launches(drk_registry_at(i)) == 0);
    return CHECK_DONE();
}
