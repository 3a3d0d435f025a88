#include "evolve/robust.h"

double drk_root(double x)
{
    if (x <= 0)
        return 0;
    double r = x > 1 ? x : 1;
    for (int i = 0; i < 40; i++)
        r = 0.5 * (r + x / r);
    return r;
}

void drk_sort_floats(float *a, unsigned n)
{
    for (unsigned i = 1; i < n; i++) {
        float x = a[i];
        unsigned j = i;
        for (; j > 0 && a[j - 1] > x; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

double drk_median_sorted(const float *a, unsigned n)
{
    return n % 2 ? a[n / 2] : 0.5 * ((double)a[n / 2 - 1] + a[n / 2]);
}

double drk_mad_sorted(const float *a, unsigned n, double median)
{
    float dev[DRK_RATIO_MAX];
    for (unsigned i = 0; i < n; i++)
        dev[i] = (float)(a[i] > median ? a[i] - median : median - a[i]);
    drk_sort_floats(dev, n);
    return drk_median_sorted(dev, n);
}

drk_ratio_stats drk_ratio_stats_sorted(float *a, unsigned n, double noise, int how)
{
    drk_ratio_stats r = {n, 1.0, 0.0, 1.0, -1.0, 3.0};
    if (!n)
        return r;
    drk_sort_floats(a, n);
    r.median = drk_median_sorted(a, n);
    r.scale = 1.4826 * drk_mad_sorted(a, n, r.median);
    noise *= r.median > 0 ? r.median : 0;
    double scale = how == DRK_SE_OWN                  ? r.scale
                   : how == DRK_SE_KERNEL && noise > 0 ? noise
                   : r.scale > noise                   ? r.scale
                                                       : noise;
    /* Fewer than 3 samples say nothing of their spread: only the kernel's
     * noise does (a trial cut short after one launch 2x slower). */
    r.se = n >= 3 ? 1.2533 * scale / drk_root(n) : noise > 0 ? 1.2533 * noise / drk_root(n) : 1.0;
    if (r.se < DRK_EVO_SE_FLOOR)
        r.se = DRK_EVO_SE_FLOOR;
    r.lower = r.median - 2 * r.se;
    r.upper = r.median + 2 * r.se;
    return r;
}

drk_ratio_stats drk_ratio_stats_of(const float *s, unsigned n)
{
    float a[DRK_RATIO_MAX];
    unsigned m = n < DRK_RATIO_MAX ? n : DRK_RATIO_MAX;
    for (unsigned i = 0; i < m; i++)
        a[i] = s[m == n ? i : (unsigned)((uint64_t)i * n / m)];
    drk_ratio_stats r = drk_ratio_stats_sorted(a, m, 0, DRK_SE_OWN);
    r.n = n;
    return r;
}

/* Hoare's partition, narrowing to the side that holds k. */
float drk_select_kth(float *a, unsigned n, unsigned k)
{
    unsigned lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = a[(lo + hi) / 2];
        unsigned i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return a[k];
}

double drk_dev_factor(unsigned n)
{
    static const double factor[] = {0, 0, 0, 3.205, 2.042, 2.033, 1.897, 1.814, 1.772};
    return n < sizeof factor / sizeof *factor ? factor[n] : 0;
}
