#include "evolve/predict.h"

#include <string.h>

#include "evolve/shapes.h"

/* No libm in the library: log2 from the binary exponent and atanh's series
 * (|z| <= 1/3 on [1, 2): under 1e-5 off, plenty for a distance). */
static double log2_of(double x)
{
    if (x <= 0)
        return -64;
    int e = 0;
    while (x >= 2)
        x /= 2, e++;
    while (x < 1)
        x *= 2, e--;
    double z = (x - 1) / (x + 1), z2 = z * z;
    double ln = 2 * z * (1 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 / 9))));
    return e + ln * 1.4426950408889634;
}

static double ratio_steps(double a, double b)
{
    double d = log2_of(a / b);
    return d < 0 ? -d : d;
}

double drk_kernel_distance(const drk_kernel_features *a, const drk_kernel_features *b)
{
    double ra = a->regs ? a->regs : 1, rb = b->regs ? b->regs : 1;
    double ba = a->block_threads ? a->block_threads : 1, bb = b->block_threads ? b->block_threads : 1;
    return 2 * ratio_steps(ra, rb) + ratio_steps(a->shared_bytes + 1024.0, b->shared_bytes + 1024.0) +
           ratio_steps(ba, bb) + 0.5 * ratio_steps(a->param_bytes + 8.0, b->param_bytes + 8.0);
}

void drk_predictor_init(drk_predictor *p)
{
    memset(p, 0, sizeof *p);
}

void drk_predictor_learn(drk_predictor *p, uint64_t kernel, uint64_t cls, const drk_kernel_features *f,
                         const drk_variant *best, double speedup)
{
    drk_predict_entry *slot = NULL;
    for (unsigned i = 0; i < DRK_PREDICT_ENTRIES && !slot; i++)
        if (p->e[i].used && p->e[i].kernel == kernel && p->e[i].cls == cls)
            slot = &p->e[i];
    /* Else a free one, else the oldest. */
    for (unsigned i = 0; i < DRK_PREDICT_ENTRIES && !slot; i++)
        if (!p->e[i].used)
            slot = &p->e[i];
    if (!slot) {
        slot = &p->e[0];
        for (unsigned i = 1; i < DRK_PREDICT_ENTRIES; i++)
            if (p->e[i].when < slot->when)
                slot = &p->e[i];
    }
    memset(slot, 0, sizeof *slot);
    slot->used = 1;
    slot->kernel = kernel;
    slot->cls = cls;
    slot->f = *f;
    if (best)
        slot->best = *best;
    slot->speedup = speedup;
    slot->when = ++p->clock;
}

/* How far apart two classes of one kernel are: powers of two of grid, the
 * block or shared memory changing counting as more. */
static unsigned class_steps(uint64_t a, uint64_t b)
{
    drk_shape_parts pa = drk_shape_class_parts(a), pb = drk_shape_class_parts(b);
    unsigned steps = pa.grid_log2 > pb.grid_log2 ? pa.grid_log2 - pb.grid_log2 : pb.grid_log2 - pa.grid_log2;
    if (memcmp(pa.block, pb.block, sizeof pa.block))
        steps += 64;
    if (pa.dynamic_shared != pb.dynamic_shared)
        steps += 64;
    return steps;
}

drk_predict_source drk_predictor_guess(const drk_predictor *p, uint64_t kernel, uint64_t cls,
                                       const drk_kernel_features *f, drk_variant *out, double *distance,
                                       uint64_t *from_kernel)
{
    memset(out, 0, sizeof *out);
    const drk_predict_entry *same = NULL, *near = NULL;
    unsigned same_steps = 0;
    double near_d = 0;
    for (unsigned i = 0; i < DRK_PREDICT_ENTRIES; i++) {
        const drk_predict_entry *x = &p->e[i];
        if (!x->used)
            continue;
        if (x->kernel == kernel) {
            if (x->cls == cls)
                continue; /* the class itself: not a prediction */
            unsigned steps = class_steps(x->cls, cls);
            if (!same || steps < same_steps || (steps == same_steps && x->speedup > same->speedup))
                same = x, same_steps = steps;
        } else {
            double d = drk_kernel_distance(&x->f, f);
            if (d <= DRK_PREDICT_NEAR && (!near || d < near_d - 1e-9 || (d < near_d + 1e-9 && x->speedup > near->speedup)))
                near = x, near_d = d;
        }
    }
    if (distance)
        *distance = same ? 0 : near_d;
    if (from_kernel)
        *from_kernel = same ? same->kernel : near ? near->kernel : 0;
    if (same) {
        *out = same->best;
        return DRK_PREDICT_SAME_KERNEL;
    }
    if (near) {
        *out = near->best;
        return DRK_PREDICT_SIMILAR;
    }
    return DRK_PREDICT_NONE;
}
