/*
 * pfr_diff: the arithmetic of comparing two ranges. A diff is a pfr_tree whose side 0 holds the
 * baseline and side 1 the comparison; each side is turned into a rate (value per second of its
 * range) so ranges of different lengths compare fairly.
 */
#ifndef PFR_DIFF_H
#define PFR_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default baseline: the range of equal length that ends where the comparison starts. */
void pfr_diff_default_base(int64_t from_ns, int64_t to_ns, int64_t *base_from, int64_t *base_to);

/* Factor that turns a range's summed values into a per-second rate. */
double pfr_diff_norm(int64_t from_ns, int64_t to_ns);

/* Relative change of a frame, in [-1, 1]: (c - b) / max(b, c); 0 when equal or both zero.
 * +1: only in the comparison; -1: gone in the comparison. Shading grows with |change|. */
double pfr_diff_change(double base_rate, double comp_rate);

/* Width of a frame in a diff flame graph: the mean of the two rates, which keeps every child
 * inside its parent (the max of the two would not). */
double pfr_diff_width(double base_rate, double comp_rate);

/* One function of the "largest changes" table (rates, already normalised). */
typedef struct pfr_diff_row {
    uint32_t name;   /* tree string id */
    uint32_t module; /* tree string id */
    double base_self, comp_self;
    double base_total, comp_total;
} pfr_diff_row;

/* Rows sorted by |comp_self - base_self| (largest first), ties by |total change|. *rows is
 * malloc'ed, caller frees. norm[0]/norm[1] are the sides' rate factors. */
int pfr_diff_rows(const pfr_tree *t, const double norm[2], pfr_diff_row **rows, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
