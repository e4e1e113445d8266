/* Diff arithmetic: default baseline, per-second normalisation, change score, change table. */
#include "pfr_diff.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

void pfr_diff_default_base(int64_t from_ns, int64_t to_ns, int64_t *base_from, int64_t *base_to)
{
    *base_to = from_ns;
    *base_from = from_ns - (to_ns - from_ns);
}

double pfr_diff_norm(int64_t from_ns, int64_t to_ns)
{
    return to_ns > from_ns ? 1e9 / (double)(to_ns - from_ns) : 0;
}

double pfr_diff_change(double b, double c)
{
    double m = b > c ? b : c;
    if (m <= 0 || b == c)
        return 0;
    double r = (c - b) / m;
    return r > 1 ? 1 : r < -1 ? -1 : r;
}

double pfr_diff_width(double b, double c)
{
    return (b + c) / 2;
}

static int cmp_rows(const void *a, const void *b)
{
    const pfr_diff_row *x = a, *y = b;
    double dx = fabs(x->comp_self - x->base_self), dy = fabs(y->comp_self - y->base_self);
    if (dx != dy)
        return dx < dy ? 1 : -1;
    dx = fabs(x->comp_total - x->base_total);
    dy = fabs(y->comp_total - y->base_total);
    if (dx != dy)
        return dx < dy ? 1 : -1;
    return x->name < y->name ? -1 : x->name > y->name;
}

int pfr_diff_rows(const pfr_tree *t, const double norm[2], pfr_diff_row **rows, size_t *n)
{
    pfr_tree_func *f;
    size_t nf;
    int rc = pfr_tree_functions(t, &f, &nf);
    if (rc < 0)
        return rc;
    pfr_diff_row *r = calloc(nf ? nf : 1, sizeof(*r));
    if (!r) {
        free(f);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nf; i++) {
        r[i].name = f[i].name;
        r[i].module = f[i].module;
        r[i].base_self = f[i].self[0] * norm[0];
        r[i].comp_self = f[i].self[1] * norm[1];
        r[i].base_total = f[i].total[0] * norm[0];
        r[i].comp_total = f[i].total[1] * norm[1];
    }
    free(f);
    qsort(r, nf, sizeof(*r), cmp_rows);
    *rows = r;
    *n = nf;
    return 0;
}
