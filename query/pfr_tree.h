/*
 * pfr_tree: the flame tree. One node per (parent, frame) where a frame is a function name, so the
 * same function called from two places is two nodes. Node 0 is the root ("all").
 *
 * A tree has two sides of values so a diff is one tree: side 0 is the only side of a plain flame
 * graph (and the baseline of a diff), side 1 the comparison. Values are doubles so that gauge
 * types (averaged over the chunks of a range) and per-second normalisation need no second tree;
 * sums of integer sample values stay exact up to 2^53.
 *
 * Totals are valid only after pfr_tree_finish().
 *
 * Ownership: the tree owns its nodes and strings; pointers stay valid until the next add call or
 * pfr_tree_free().
 */
#ifndef PFR_TREE_H
#define PFR_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_profile.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFR_TREE_NONE  UINT32_MAX
#define PFR_TREE_SIDES 2

typedef struct pfr_tree pfr_tree;

typedef struct pfr_tree_node {
    uint32_t parent;       /* PFR_TREE_NONE for the root */
    uint32_t name;         /* string id of the function name */
    uint32_t module;       /* string id of the module (binary) it was first seen in; 0 = "" */
    uint32_t first_child;  /* PFR_TREE_NONE when a leaf */
    uint32_t next_sibling; /* PFR_TREE_NONE when last */
    uint32_t depth;        /* root = 0 */
    double total[PFR_TREE_SIDES]; /* value of every stack through this node */
    double self[PFR_TREE_SIDES];  /* value of the stacks that end here */
} pfr_tree_node;

pfr_tree *pfr_tree_new(void);
void pfr_tree_free(pfr_tree *t);

/* Add one stack, root first (names[0] is the outermost caller). modules may be NULL. */
int pfr_tree_add_stack(pfr_tree *t, int side, const char *const *names, const char *const *modules,
                       size_t n, double value);

/* Add every sample of p, using its sample type type_index, multiplied by scale. If prefix is not
 * NULL it is put above every stack as an extra outermost frame (e.g. the service name when a
 * tree holds several services). Unknown functions are named "[module]" or "[unknown]". */
int pfr_tree_add_profile(pfr_tree *t, int side, const pfr_profile *p, size_t type_index,
                         double scale, const char *prefix);

/* Leave out of the tree built by pfr_tree_finish() every subtree whose value is below share
 * (0..1) of its side's total on both sides (its value still counts in its parent's total). For
 * pictures: a day of profiles has millions of frames nobody can see. 0 (default) keeps all. */
void pfr_tree_set_min_share(pfr_tree *t, double share);

/* Build the nodes from the stacks added so far; call after adding and before reading. Adding
 * only records root-first paths; finishing sorts them and creates every node once, with its
 * totals, children sorted by name so output does not depend on input order. May be called again
 * after more adds (the tree is rebuilt from all stacks). 0 or -ENOMEM. */
int pfr_tree_finish(pfr_tree *t);

/* Finish without creating nodes below the root: enough for pfr_tree_walk_stacks() (folded
 * output), and much cheaper for a day of profiles. */
void pfr_tree_set_stacks_only(pfr_tree *t, bool on);

/* Every distinct stack (root first, as string ids) with its summed value on side, in
 * alphabetical order of frames. Needs a finished tree. cb returns non-zero to stop. */
typedef int (*pfr_tree_stack_cb)(const pfr_tree *t, const uint32_t *names, size_t n, double value,
                                 void *ctx);
int pfr_tree_walk_stacks(const pfr_tree *t, int side, pfr_tree_stack_cb cb, void *ctx);

size_t pfr_tree_size(const pfr_tree *t);
const pfr_tree_node *pfr_tree_node_at(const pfr_tree *t, uint32_t i);
const char *pfr_tree_str(const pfr_tree *t, uint32_t id);
size_t pfr_tree_num_strs(const pfr_tree *t);
/* Deepest node depth. */
uint32_t pfr_tree_max_depth(const pfr_tree *t);
/* Number of samples added (stacks with a non-zero value) per side. */
uint64_t pfr_tree_stacks(const pfr_tree *t, int side);

/* Visit nodes depth first, parents before children, children in list order. cb returns non-zero to
 * stop (returned). skip_children set by cb prunes the subtree below the node just visited. */
typedef int (*pfr_tree_visit_cb)(const pfr_tree *t, uint32_t node, int *skip_children, void *ctx);
int pfr_tree_walk(const pfr_tree *t, pfr_tree_visit_cb cb, void *ctx);

/* Function aggregates for "top" tables: self summed over the stacks ending in the function,
 * total counted once per stack even under recursion. Read from the stacks, so it works on a
 * stacks-only tree too. */
typedef struct pfr_tree_func {
    uint32_t name;
    uint32_t module;
    double self[PFR_TREE_SIDES];
    double total[PFR_TREE_SIDES];
} pfr_tree_func;
/* *out (malloc'ed, caller frees) gets one entry per distinct function name, root excluded. */
int pfr_tree_functions(const pfr_tree *t, pfr_tree_func **out, size_t *n);
/* qsort order of a top table: self (side 0) descending, then total descending, then name. */
int pfr_tree_func_cmp_self(const void *a, const void *b);

#ifdef __cplusplus
}
#endif
#endif
