/* The flame tree: interned frame names; stacks are collected as root-first paths, sorted, and the
 * tree is built top-down over runs of equal frames (no per-frame hash lookups), optionally leaving
 * out subtrees below a share of the total. */
#include "pfr_tree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pfr_hash.h"

#define ARENA_BLOCK (64u << 10)

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    char data[];
} arena_block;

/* Root-first paths of the stacks added so far, back to back, for the build in finish. */
typedef struct sample_paths {
    uint32_t *names, *modules;
    size_t len, cap;
    size_t *off;
    uint32_t *depth;
    double *value;
    uint8_t *side;
    size_t *order; /* paths sorted by names */
    size_t n, cap_n;
} sample_paths;

struct pfr_tree {
    pfr_tree_node *nodes;
    size_t nnodes, cap_nodes;
    const char **strs; /* string id -> text */
    uint64_t *str_hash;
    size_t nstrs, cap_strs;
    uint32_t *str_slots;
    size_t str_mask;
    arena_block *arena;
    uint32_t max_depth;
    uint64_t stacks[PFR_TREE_SIDES];
    double min_share;
    bool stacks_only;
    bool finished;
    sample_paths paths;
};

/* Big arrays (millions of nodes for a day of profiles) are faulted in 2 MiB pages where the
 * kernel allows it: a quarter of the time of a large flame graph went into 4 KiB page faults. */
static void hint_huge(void *p, size_t bytes)
{
    const uintptr_t huge = 2u << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (bytes >= 4 * huge && e > a)
        madvise((void *)a, e - a, MADV_HUGEPAGE);
}

static uint64_t hash_str(const char *s, size_t *len)
{
    *len = strlen(s);
    return pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, s, *len);
}

static char *arena_copy(pfr_tree *t, const char *s, size_t len)
{
    arena_block *b = t->arena;
    if (!b || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > ARENA_BLOCK ? len + 1 : ARENA_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->next = t->arena;
        b->used = 0;
        b->cap = cap;
        t->arena = b;
    }
    char *d = b->data + b->used;
    memcpy(d, s, len);
    d[len] = '\0';
    b->used += len + 1;
    return d;
}

static uint32_t *new_slots(size_t n)
{
    uint32_t *s = malloc(n * sizeof(*s));
    if (s)
        memset(s, 0xff, n * sizeof(*s));
    return s;
}

static int grow_str_slots(pfr_tree *t)
{
    size_t n = (t->str_mask + 1) * 2;
    uint32_t *slots = new_slots(n);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->nstrs; i++) {
        size_t j = t->str_hash[i] & (n - 1);
        while (slots[j] != PFR_TREE_NONE)
            j = (j + 1) & (n - 1);
        slots[j] = (uint32_t)i;
    }
    free(t->str_slots);
    t->str_slots = slots;
    t->str_mask = n - 1;
    return 0;
}

/* Returns the string's id, or a negative errno. */
static int64_t intern(pfr_tree *t, const char *s)
{
    size_t len;
    uint64_t h = hash_str(s, &len);
    size_t j = h & t->str_mask;
    for (uint32_t id; (id = t->str_slots[j]) != PFR_TREE_NONE; j = (j + 1) & t->str_mask)
        if (t->str_hash[id] == h && strcmp(t->strs[id], s) == 0)
            return id;
    if (t->nstrs == t->cap_strs) {
        size_t cap = t->cap_strs ? t->cap_strs * 2 : 256;
        const char **strs = realloc(t->strs, cap * sizeof(*strs));
        if (!strs)
            return -ENOMEM;
        t->strs = strs;
        uint64_t *hs = realloc(t->str_hash, cap * sizeof(*hs));
        if (!hs)
            return -ENOMEM;
        t->str_hash = hs;
        t->cap_strs = cap;
    }
    char *copy = arena_copy(t, s, len);
    if (!copy)
        return -ENOMEM;
    uint32_t id = (uint32_t)t->nstrs++;
    t->strs[id] = copy;
    t->str_hash[id] = h;
    t->str_slots[j] = id;
    if (t->nstrs * 2 > t->str_mask + 1 && grow_str_slots(t) < 0)
        return -ENOMEM;
    return id;
}

static int64_t new_node(pfr_tree *t, uint32_t parent, uint32_t name, uint32_t module)
{
    if (t->nnodes == t->cap_nodes) {
        size_t cap = t->cap_nodes * 2;
        pfr_tree_node *nodes = realloc(t->nodes, cap * sizeof(*nodes));
        if (!nodes)
            return -ENOMEM;
        hint_huge(nodes, cap * sizeof(*nodes));
        t->nodes = nodes;
        t->cap_nodes = cap;
    }
    if (t->nnodes >= PFR_TREE_NONE - 1)
        return -E2BIG;
    uint32_t id = (uint32_t)t->nnodes++;
    pfr_tree_node *n = &t->nodes[id];
    memset(n, 0, sizeof(*n));
    n->parent = parent;
    n->name = name;
    n->module = module;
    n->first_child = PFR_TREE_NONE;
    n->next_sibling = PFR_TREE_NONE;
    if (parent != PFR_TREE_NONE) {
        n->depth = t->nodes[parent].depth + 1;
        if (n->depth > t->max_depth)
            t->max_depth = n->depth;
    }
    return id;
}

static int reserve_nodes(pfr_tree *t, size_t want)
{
    if (want <= t->cap_nodes)
        return 0;
    pfr_tree_node *nodes = realloc(t->nodes, want * sizeof(*nodes));
    if (!nodes)
        return -ENOMEM;
    hint_huge(nodes, want * sizeof(*nodes));
    t->nodes = nodes;
    t->cap_nodes = want;
    return 0;
}

pfr_tree *pfr_tree_new(void)
{
    pfr_tree *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->cap_nodes = 1024;
    t->nodes = malloc(t->cap_nodes * sizeof(*t->nodes));
    t->str_slots = new_slots(512);
    t->str_mask = 511;
    if (!t->nodes || !t->str_slots || intern(t, "") != 0 || intern(t, "all") != 1 ||
        new_node(t, PFR_TREE_NONE, 1, 0) != 0) {
        pfr_tree_free(t);
        return NULL;
    }
    return t;
}

static void paths_free(sample_paths *sp)
{
    free(sp->names);
    free(sp->modules);
    free(sp->off);
    free(sp->depth);
    free(sp->value);
    free(sp->side);
    free(sp->order);
}

void pfr_tree_free(pfr_tree *t)
{
    if (!t)
        return;
    for (arena_block *b = t->arena, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(t->nodes);
    free(t->strs);
    free(t->str_hash);
    free(t->str_slots);
    paths_free(&t->paths);
    free(t);
}

void pfr_tree_set_min_share(pfr_tree *t, double share)
{
    t->min_share = share > 0 ? share : 0;
}

/* Room for npaths more paths of frames frames in all. */
static int paths_reserve_bulk(sample_paths *sp, size_t npaths, size_t frames)
{
    if (sp->n + npaths > sp->cap_n) {
        size_t cap = sp->n + npaths;
        size_t *off = realloc(sp->off, cap * sizeof(*off));
        if (off)
            sp->off = off;
        uint32_t *dep = off ? realloc(sp->depth, cap * sizeof(*dep)) : NULL;
        if (dep)
            sp->depth = dep;
        double *val = dep ? realloc(sp->value, cap * sizeof(*val)) : NULL;
        if (val)
            sp->value = val;
        uint8_t *side = val ? realloc(sp->side, cap * sizeof(*side)) : NULL;
        if (side)
            sp->side = side;
        if (!side)
            return -ENOMEM;
        sp->cap_n = cap;
    }
    if (sp->len + frames > sp->cap) {
        size_t cap = sp->len + frames;
        uint32_t *a = realloc(sp->names, cap * sizeof(*a));
        if (a)
            sp->names = a;
        uint32_t *b = a ? realloc(sp->modules, cap * sizeof(*b)) : NULL;
        if (b)
            sp->modules = b;
        if (!a || !b)
            return -ENOMEM;
        hint_huge(a, cap * sizeof(*a));
        hint_huge(b, cap * sizeof(*b));
        sp->cap = cap;
    }
    return 0;
}

/* Room for one more path of depth frames (amortised growth). */
static int paths_reserve(sample_paths *sp, size_t depth)
{
    size_t np = sp->n == sp->cap_n ? (sp->cap_n ? sp->cap_n : 1024) : 0;
    size_t nf = sp->len + depth > sp->cap ? sp->len + depth + 4096 : 0;
    return paths_reserve_bulk(sp, np, nf ? nf - sp->len : 0);
}

/* Record the path just written at sp->names + sp->len. */
static void paths_commit(pfr_tree *t, int side, size_t depth, double value)
{
    sample_paths *sp = &t->paths;
    sp->off[sp->n] = sp->len;
    sp->depth[sp->n] = (uint32_t)depth;
    sp->value[sp->n] = value;
    sp->side[sp->n] = (uint8_t)side;
    sp->n++;
    sp->len += depth;
    t->stacks[side]++;
}

int pfr_tree_add_stack(pfr_tree *t, int side, const char *const *names, const char *const *modules,
                       size_t n, double value)
{
    if (side < 0 || side >= PFR_TREE_SIDES || n > UINT32_MAX)
        return -EINVAL;
    int rc = paths_reserve(&t->paths, n);
    if (rc < 0)
        return rc;
    uint32_t *dn = t->paths.names + t->paths.len, *dm = t->paths.modules + t->paths.len;
    for (size_t i = 0; i < n; i++) {
        int64_t id = intern(t, names[i] ? names[i] : "");
        if (id < 0)
            return (int)id;
        dn[i] = (uint32_t)id;
        id = intern(t, modules && modules[i] ? modules[i] : "");
        if (id < 0)
            return (int)id;
        dm[i] = (uint32_t)id;
    }
    paths_commit(t, side, n, value);
    return 0;
}

/* Interned frames of every location of one profile, computed once per profile. */
typedef struct loc_frames {
    uint32_t *off;   /* per location: first entry in names/modules (innermost first) */
    uint32_t *count; /* per location: frame count */
    uint32_t *names, *modules;
    size_t n, cap;
} loc_frames;

static void loc_frames_free(loc_frames *lf)
{
    free(lf->off);
    free(lf->count);
    free(lf->names);
    free(lf->modules);
}

static int64_t frame_name_id(pfr_tree *t, const pfr_frame *f)
{
    if (f->function && f->function[0])
        return intern(t, f->function);
    char buf[512];
    if (f->module && f->module[0]) {
        const char *base = strrchr(f->module, '/');
        snprintf(buf, sizeof(buf), "[%s]", base ? base + 1 : f->module);
    } else {
        snprintf(buf, sizeof(buf), "[unknown]");
    }
    return intern(t, buf);
}

static int loc_frames_build(pfr_tree *t, const pfr_profile *p, loc_frames *lf)
{
    size_t nloc = pfr_profile_num_locations(p);
    pfr_frame stackbuf[16];
    lf->off = malloc((nloc + 1) * sizeof(*lf->off));
    lf->count = malloc((nloc + 1) * sizeof(*lf->count));
    if (!lf->off || !lf->count)
        return -ENOMEM;
    for (size_t l = 0; l < nloc; l++) {
        pfr_frame *fr = stackbuf;
        size_t nf = pfr_profile_location_frames(p, (uint32_t)l, fr, 16);
        if (nf > 16) {
            fr = malloc(nf * sizeof(*fr));
            if (!fr)
                return -ENOMEM;
            nf = pfr_profile_location_frames(p, (uint32_t)l, fr, nf);
        }
        if (lf->n + nf > lf->cap) {
            size_t cap = (lf->n + nf) * 2 + 64;
            uint32_t *a = realloc(lf->names, cap * sizeof(*a));
            uint32_t *b = a ? realloc(lf->modules, cap * sizeof(*b)) : NULL;
            if (a)
                lf->names = a;
            if (b)
                lf->modules = b;
            if (!a || !b) {
                if (fr != stackbuf)
                    free(fr);
                return -ENOMEM;
            }
            lf->cap = cap;
        }
        lf->off[l] = (uint32_t)lf->n;
        lf->count[l] = (uint32_t)nf;
        int rc = 0;
        for (size_t i = 0; i < nf && rc == 0; i++) {
            int64_t name = frame_name_id(t, &fr[i]);
            int64_t mod = name < 0 ? name : intern(t, fr[i].module ? fr[i].module : "");
            if (name < 0 || mod < 0) {
                rc = -ENOMEM;
                break;
            }
            lf->names[lf->n] = (uint32_t)name;
            lf->modules[lf->n] = (uint32_t)mod;
            lf->n++;
        }
        if (fr != stackbuf)
            free(fr);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pfr_tree_add_profile(pfr_tree *t, int side, const pfr_profile *p, size_t type_index,
                         double scale, const char *prefix)
{
    if (side < 0 || side >= PFR_TREE_SIDES || type_index >= pfr_profile_num_sample_types(p))
        return -EINVAL;
    int64_t prefix_id = -1;
    if (prefix) {
        prefix_id = intern(t, prefix);
        if (prefix_id < 0)
            return (int)prefix_id;
    }
    loc_frames lf = {0};
    int rc = loc_frames_build(t, p, &lf);
    size_t nsamples = pfr_profile_num_samples(p), frames = 0, npaths = 0;
    /* size the path buffers once: a day of profiles is millions of frames */
    for (size_t s = 0; s < nsamples && rc == 0; s++) {
        if (pfr_profile_sample_values(p, s)[type_index] == 0)
            continue;
        size_t nlocs;
        const uint32_t *locs = pfr_profile_sample_locations(p, s, &nlocs);
        frames += prefix ? 1 : 0;
        for (size_t i = 0; i < nlocs; i++)
            frames += lf.count[locs[i]];
        npaths++;
    }
    if (rc == 0)
        rc = paths_reserve_bulk(&t->paths, npaths, frames);
    for (size_t s = 0; s < nsamples && rc == 0; s++) {
        int64_t raw = pfr_profile_sample_values(p, s)[type_index];
        if (raw == 0)
            continue;
        size_t nlocs;
        const uint32_t *locs = pfr_profile_sample_locations(p, s, &nlocs);
        size_t depth = prefix ? 1 : 0;
        for (size_t i = 0; i < nlocs; i++)
            depth += lf.count[locs[i]];
        if (depth > UINT32_MAX) {
            rc = -E2BIG;
            break;
        }
        if ((rc = paths_reserve(&t->paths, depth)) < 0)
            break;
        uint32_t *names = t->paths.names + t->paths.len, *mods = t->paths.modules + t->paths.len;
        /* locs are leaf first and each location's lines innermost first: fill from the back. */
        size_t pos = depth;
        for (size_t i = 0; i < nlocs; i++) {
            uint32_t off = lf.off[locs[i]], cnt = lf.count[locs[i]];
            for (uint32_t k = 0; k < cnt; k++) {
                pos--;
                names[pos] = lf.names[off + k];
                mods[pos] = lf.modules[off + k];
            }
        }
        if (prefix) {
            names[0] = (uint32_t)prefix_id;
            mods[0] = 0;
        }
        paths_commit(t, side, depth, (double)raw * scale);
    }
    loc_frames_free(&lf);
    return rc;
}

/* Paths in alphabetical order of their frames (a prefix first), so siblings are created in name
 * order and output does not depend on input order. Frames are compared by their strings' ranks in
 * alphabetical order (one sort of the strings, not a strcmp per frame compared). */
typedef struct path_order {
    const sample_paths *sp;
    const uint32_t *rank; /* string id -> its place in alphabetical order */
} path_order;

static int cmp_str_ids(const void *a, const void *b, void *ctx)
{
    const pfr_tree *t = ctx;
    return strcmp(t->strs[*(const uint32_t *)a], t->strs[*(const uint32_t *)b]);
}

/* rank[id] = place of string id in alphabetical order (distinct strings: no ties). */
static uint32_t *string_ranks(const pfr_tree *t)
{
    uint32_t *ids = malloc((t->nstrs + 1) * sizeof(*ids));
    uint32_t *rank = malloc((t->nstrs + 1) * sizeof(*rank));
    if (ids && rank) {
        for (size_t i = 0; i < t->nstrs; i++)
            ids[i] = (uint32_t)i;
        qsort_r(ids, t->nstrs, sizeof(*ids), cmp_str_ids, (void *)t);
        for (size_t i = 0; i < t->nstrs; i++)
            rank[ids[i]] = (uint32_t)i;
    } else {
        free(rank);
        rank = NULL;
    }
    free(ids);
    return rank;
}

/* A run of sorted paths [lo, hi) that share their first depth frames, under node. */
typedef struct build_span {
    size_t lo, hi;
    uint32_t depth, node;
} build_span;

/* Order of two paths that share their first d frames: by the rank of the first frame that
 * differs, else the shorter first. */
static int cmp_paths_from(const sample_paths *sp, const uint32_t *rank, size_t i, size_t j,
                          uint32_t d)
{
    const uint32_t *x = sp->names + sp->off[i], *y = sp->names + sp->off[j];
    uint32_t n = sp->depth[i] < sp->depth[j] ? sp->depth[i] : sp->depth[j];
    for (uint32_t k = d; k < n; k++)
        if (x[k] != y[k])
            return rank[x[k]] < rank[y[k]] ? -1 : 1;
    return sp->depth[i] < sp->depth[j] ? -1 : sp->depth[i] > sp->depth[j];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct sort_span {
    size_t lo, hi;
    uint32_t depth;
} sort_span;

/* Sort order[0, n) as a stable sort by frames would (the same permutation), most
 * significant frame first: each span of paths that share their first d frames is ordered by
 * frame d alone (paths that end at d first), then each run of equal frames is a span of depth
 * d + 1. A day of stacks shares long prefixes, which a comparison sort walks again at every
 * comparison; here each frame of a path is looked at about once. */
static int sort_paths(const path_order *po, size_t nstrs, size_t *order, size_t n)
{
    const sample_paths *sp = po->sp;
    const uint32_t *rank = po->rank;
    enum { SMALL = 16 };
    uint64_t *keys = malloc((n + 1) * sizeof(*keys));
    size_t *tmp = malloc((n + 1) * sizeof(*tmp));
    size_t *count = calloc(nstrs + 2, sizeof(*count));
    sort_span *stack = malloc(64 * sizeof(*stack));
    size_t top = 0, cap = 64;
    int rc = keys && tmp && count && stack ? 0 : -ENOMEM;
    if (rc == 0 && n > 1)
        stack[top++] = (sort_span){0, n, 0};
    while (top > 0 && rc == 0) {
        sort_span b = stack[--top];
        size_t m = b.hi - b.lo;
        size_t *o = order + b.lo;
        if (m < SMALL) { /* insertion sort: stable */
            for (size_t i = 1; i < m; i++) {
                size_t x = o[i], j = i;
                for (; j > 0 && cmp_paths_from(sp, rank, o[j - 1], x, b.depth) > 0; j--)
                    o[j] = o[j - 1];
                o[j] = x;
            }
            continue;
        }
        /* key: 0 for a path that ends here, else 1 + the rank of its frame at this depth */
        bool same = true;
        for (size_t i = 0; i < m; i++) {
            size_t p = o[i];
            uint64_t k =
                sp->depth[p] == b.depth ? 0 : 1 + (uint64_t)rank[sp->names[sp->off[p] + b.depth]];
            keys[i] = k;
            same = same && k == keys[0];
        }
        if (same) {
            if (keys[0] != 0) /* one frame for all: on to the next */
                stack[top++] = (sort_span){b.lo, b.hi, b.depth + 1};
            continue;
        }
        if (m * 4 >= nstrs) { /* counting sort (stable) */
            for (size_t i = 0; i < m; i++)
                count[keys[i] + 1]++;
            for (size_t k = 1; k < nstrs + 2; k++)
                count[k] += count[k - 1];
            for (size_t i = 0; i < m; i++)
                tmp[count[keys[i]]++] = o[i];
            memset(count, 0, (nstrs + 2) * sizeof(*count));
            for (size_t i = 0; i < m; i++)
                keys[i] = sp->depth[tmp[i]] == b.depth
                              ? 0
                              : 1 + (uint64_t)rank[sp->names[sp->off[tmp[i]] + b.depth]];
        } else { /* (key, position) pairs: ties keep their order */
            for (size_t i = 0; i < m; i++)
                keys[i] = keys[i] << 32 | i;
            qsort(keys, m, sizeof(*keys), cmp_u64);
            for (size_t i = 0; i < m; i++) {
                tmp[i] = o[keys[i] & 0xffffffffu];
                keys[i] >>= 32;
            }
        }
        memcpy(o, tmp, m * sizeof(*o));
        /* runs of one frame go on one level down; paths that end here are equal */
        for (size_t i = 0; i < m && rc == 0;) {
            size_t j = i + 1;
            while (j < m && keys[j] == keys[i])
                j++;
            if (keys[i] != 0 && j - i > 1) {
                if (top == cap) {
                    sort_span *ns = realloc(stack, cap * 2 * sizeof(*ns));
                    if (!ns) {
                        rc = -ENOMEM;
                        break;
                    }
                    stack = ns;
                    cap *= 2;
                }
                stack[top++] = (sort_span){b.lo + i, b.lo + j, b.depth + 1};
            }
            i = j;
        }
    }
    free(keys);
    free(tmp);
    free(count);
    free(stack);
    return rc;
}

/* Upper bound of the node count: frames not shared with the previous sorted path. */
static size_t count_new_frames(const sample_paths *sp)
{
    size_t total = 0, prev_depth = 0;
    const uint32_t *prev = NULL;
    for (size_t k = 0; k < sp->n; k++) {
        size_t i = sp->order[k], depth = sp->depth[i], common = 0;
        const uint32_t *names = sp->names + sp->off[i];
        while (prev && common < depth && common < prev_depth && names[common] == prev[common])
            common++;
        total += depth - common;
        prev = names;
        prev_depth = depth;
    }
    return total;
}

/* Build the tree from scratch over the sorted paths: every node is created once, with its totals
 * summed over its run; runs below min_share of their side's total are left out (their value
 * stays in the parent's total). */
static int build(pfr_tree *t)
{
    sample_paths *sp = &t->paths;
    free(sp->order);
    sp->order = malloc((sp->n + 1) * sizeof(*sp->order));
    path_order po = {.sp = sp, .rank = sp->order ? string_ranks(t) : NULL};
    if (!po.rank) {
        free(sp->order);
        sp->order = NULL;
        return -ENOMEM;
    }
    for (size_t i = 0; i < sp->n; i++)
        sp->order[i] = i;
    int src = sort_paths(&po, t->nstrs, sp->order, sp->n);
    free((void *)po.rank);
    if (src < 0) {
        free(sp->order);
        sp->order = NULL;
        return src;
    }

    /* start again from the root alone */
    t->nnodes = 1;
    t->max_depth = 0;
    memset(t->nodes[0].total, 0, sizeof(t->nodes[0].total));
    memset(t->nodes[0].self, 0, sizeof(t->nodes[0].self));
    t->nodes[0].first_child = PFR_TREE_NONE;
    for (size_t i = 0; i < sp->n; i++)
        t->nodes[0].total[sp->side[i]] += sp->value[i];
    double min_value[PFR_TREE_SIDES];
    for (int s = 0; s < PFR_TREE_SIDES; s++)
        min_value[s] = t->nodes[0].total[s] * t->min_share;
    if (t->stacks_only)
        return 0;
    int rc = reserve_nodes(t, 1 + count_new_frames(sp));
    build_span *stack = malloc(64 * sizeof(*stack));
    size_t top = 0, cap = 64;
    if (!stack)
        rc = -ENOMEM;
    if (rc == 0)
        stack[top++] = (build_span){0, sp->n, 0, 0};
    while (top > 0 && rc == 0) {
        build_span b = stack[--top];
        size_t i = b.lo;
        uint32_t last = PFR_TREE_NONE;
        /* paths that end here sort first: they are prefixes of the others */
        for (; i < b.hi && sp->depth[sp->order[i]] == b.depth; i++)
            t->nodes[b.node].self[sp->side[sp->order[i]]] += sp->value[sp->order[i]];
        while (i < b.hi && rc == 0) {
            size_t first = sp->order[i];
            uint32_t name = sp->names[sp->off[first] + b.depth];
            double sum[PFR_TREE_SIDES] = {0};
            size_t j = i;
            for (; j < b.hi && sp->names[sp->off[sp->order[j]] + b.depth] == name; j++)
                sum[sp->side[sp->order[j]]] += sp->value[sp->order[j]];
            bool keep = t->min_share <= 0;
            for (int s = 0; s < PFR_TREE_SIDES && !keep; s++)
                keep = sum[s] > 0 && sum[s] >= min_value[s];
            if (keep) {
                int64_t id = new_node(t, b.node, name, sp->modules[sp->off[first] + b.depth]);
                if (id < 0) {
                    rc = (int)id;
                    break;
                }
                memcpy(t->nodes[id].total, sum, sizeof(sum));
                /* siblings come in name order: append */
                if (last == PFR_TREE_NONE)
                    t->nodes[b.node].first_child = (uint32_t)id;
                else
                    t->nodes[last].next_sibling = (uint32_t)id;
                last = (uint32_t)id;
                if (top == cap) {
                    build_span *ns = realloc(stack, cap * 2 * sizeof(*ns));
                    if (!ns) {
                        rc = -ENOMEM;
                        break;
                    }
                    stack = ns;
                    cap *= 2;
                }
                stack[top++] = (build_span){i, j, b.depth + 1, (uint32_t)id};
            }
            i = j;
        }
    }
    free(stack);
    return rc;
}

int pfr_tree_finish(pfr_tree *t)
{
    int rc = build(t);
    t->finished = rc == 0;
    return rc;
}

void pfr_tree_set_stacks_only(pfr_tree *t, bool on)
{
    t->stacks_only = on;
}

int pfr_tree_walk_stacks(const pfr_tree *t, int side, pfr_tree_stack_cb cb, void *ctx)
{
    const sample_paths *sp = &t->paths;
    if (!t->finished || side < 0 || side >= PFR_TREE_SIDES)
        return -EINVAL;
    size_t k = 0;
    while (k < sp->n) {
        size_t i = sp->order[k];
        const uint32_t *names = sp->names + sp->off[i];
        uint32_t depth = sp->depth[i];
        double sum = 0;
        /* equal paths are neighbours */
        for (; k < sp->n; k++) {
            size_t j = sp->order[k];
            if (sp->depth[j] != depth ||
                memcmp(sp->names + sp->off[j], names, depth * sizeof(*names)) != 0)
                break;
            if (sp->side[j] == side)
                sum += sp->value[j];
        }
        if (sum != 0) {
            int rc = cb(t, names, depth, sum, ctx);
            if (rc)
                return rc;
        }
    }
    return 0;
}

size_t pfr_tree_size(const pfr_tree *t)
{
    return t->nnodes;
}

const pfr_tree_node *pfr_tree_node_at(const pfr_tree *t, uint32_t i)
{
    return i < t->nnodes ? &t->nodes[i] : NULL;
}

const char *pfr_tree_str(const pfr_tree *t, uint32_t id)
{
    return id < t->nstrs ? t->strs[id] : "";
}

size_t pfr_tree_num_strs(const pfr_tree *t)
{
    return t->nstrs;
}

uint32_t pfr_tree_max_depth(const pfr_tree *t)
{
    return t->max_depth;
}

uint64_t pfr_tree_stacks(const pfr_tree *t, int side)
{
    return side >= 0 && side < PFR_TREE_SIDES ? t->stacks[side] : 0;
}

int pfr_tree_walk(const pfr_tree *t, pfr_tree_visit_cb cb, void *ctx)
{
    /* Iterative so hostile, very deep stacks cannot exhaust the C stack. */
    uint32_t cur = 0;
    for (;;) {
        int skip = 0;
        int rc = cb(t, cur, &skip, ctx);
        if (rc)
            return rc;
        if (!skip && t->nodes[cur].first_child != PFR_TREE_NONE) {
            cur = t->nodes[cur].first_child;
            continue;
        }
        while (cur != 0 && t->nodes[cur].next_sibling == PFR_TREE_NONE)
            cur = t->nodes[cur].parent;
        if (cur == 0)
            return 0;
        cur = t->nodes[cur].next_sibling;
    }
}

int pfr_tree_functions(const pfr_tree *t, pfr_tree_func **out, size_t *nout)
{
    /* From the stacks rather than the nodes, so it works on a stacks-only tree. A function's
     * total counts each stack once: stamp[name] remembers the last stack that counted it. */
    const sample_paths *sp = &t->paths;
    uint32_t *func_of_name = new_slots(t->nstrs);
    size_t *stamp = malloc(t->nstrs * sizeof(*stamp));
    pfr_tree_func *funcs = calloc(t->nstrs ? t->nstrs : 1, sizeof(*funcs));
    if (!func_of_name || !stamp || !funcs) {
        free(func_of_name);
        free(stamp);
        free(funcs);
        return -ENOMEM;
    }
    memset(stamp, 0xff, t->nstrs * sizeof(*stamp));
    size_t n = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const uint32_t *names = sp->names + sp->off[i], *mods = sp->modules + sp->off[i];
        int side = sp->side[i];
        double v = sp->value[i];
        for (uint32_t d = 0; d < sp->depth[i]; d++) {
            uint32_t name = names[d], f = func_of_name[name];
            if (f == PFR_TREE_NONE) {
                f = (uint32_t)n++;
                func_of_name[name] = f;
                funcs[f].name = name;
                funcs[f].module = mods[d];
            }
            if (stamp[name] != i) {
                stamp[name] = i;
                funcs[f].total[side] += v;
            }
            if (d + 1 == sp->depth[i])
                funcs[f].self[side] += v;
        }
    }
    free(func_of_name);
    free(stamp);
    *out = funcs;
    *nout = n;
    return 0;
}

int pfr_tree_func_cmp_self(const void *a, const void *b)
{
    const pfr_tree_func *x = a, *y = b;
    if (x->self[0] != y->self[0])
        return x->self[0] < y->self[0] ? 1 : -1;
    if (x->total[0] != y->total[0])
        return x->total[0] < y->total[0] ? 1 : -1;
    return x->name < y->name ? -1 : x->name > y->name;
}
