/*
 * The fold (layer 1, internal): a merged profile with more distinct (stack, label set) entries
 * than a bound gets its rare stacks folded into their callers, every total kept. A pure function
 * over a profile (no SQLite); the writer applies it to roll-ups into the coarsest tier only.
 * Why and what a user sees: docs/store.md, "Tiers" (Folding the coarsest tier).
 */
#ifndef PFR_STORE_FOLD_H
#define PFR_STORE_FOLD_H

#include <stddef.h>

#include "pfr_profile.h"

/* The synthetic leaf a folded stack ends in: "what this caller did in stacks too rare to keep"
 * (no file, no mapping, address 0). Bracketed like pfr's other synthetic frames ("[unknown]",
 * "[jit]"). */
#define STORE_FOLD_FRAME "[folded]"

struct store_fold_stats {
    size_t in_entries, out_entries; /* distinct (stack, label set) before and after */
    size_t kept_nodes;              /* call tree nodes kept (of the tree built from the root) */
    double moved;                   /* share of the value moved into folded frames: the largest
                                       over the sample types of Σ|v| folded / Σ|v| */
    double depth_kept;              /* the frames of its stack a sample keeps (a whole stack
                                       1, folded below its third of ten frames 0.3), averaged
                                       weighted by the first sample type's |v| */
};

/* p folded to at most max_entries distinct (stack, label set) entries (best effort: never fewer
 * than its distinct label sets, each of which may become one "[folded]" stack).
 *
 * The call tree is built from the root of p's samples; a node's weight is its share of each
 * sample type's total (of absolute values), the largest over the types, so a heap profile's
 * allocations and in-use bytes both count. The nodes at or above a threshold are kept (a child
 * weighs no more than its parent, so they form a tree from the root); the threshold is the
 * lowest whose result has at most max_entries entries (a binary search over the nodes' weights).
 * A sample whose stack leaves the kept tree becomes its kept prefix plus one STORE_FOLD_FRAME
 * leaf, with the same labels; samples that end up with the same stack and labels are summed.
 * Values only move between stacks: every type's total is the same, per label set too (an
 * averaged type's time average with it).
 *
 * *out: NULL when p has at most max_entries entries, or max_entries is 0 (p is to be used as it
 * is, untouched), else a new profile (the caller's) with p's sample types, period and time, its
 * frames as the store keeps them (docs/store.md, "Fidelity"). st may be NULL. 0 or -ENOMEM,
 * -EOVERFLOW (more than 2^31 tree nodes). */
int pfr_st_fold(const pfr_profile *p, size_t max_entries, pfr_profile **out,
                struct store_fold_stats *st);

#endif
