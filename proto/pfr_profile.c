/* The profile model: interned tables, de-duplicated records, samples summed by (stack, labels),
 * and the read accessors. Encoding is in pfr_profile_codec.c, merging in pfr_profile_merge.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_profile_internal.h"

/* ---- vectors and hashing ---- */

/* A probe sequence over the slots whose tag matches a hash. */
struct ht_iter {
    size_t i;
    uint64_t tag;
};

#define HT_TAG_MASK 0xffffffff00000000ull

static inline struct ht_iter ht_begin(const struct pfr_htab *ht, uint64_t h)
{
    struct ht_iter it = {(size_t)h & ht->mask, h & HT_TAG_MASK};
    return it;
}

/* Next candidate record index, or -1 once an empty slot is reached (it->i is then that slot). */
static inline int64_t ht_next(const struct pfr_htab *ht, struct ht_iter *it)
{
    for (;;) {
        uint64_t s = ht->slots[it->i];
        if (!s)
            return -1;
        it->i = (it->i + 1) & ht->mask;
        if ((s & HT_TAG_MASK) == it->tag)
            return (int64_t)(uint32_t)s - 1;
    }
}

static inline void ht_set(struct pfr_htab *ht, size_t slot, uint64_t h, uint32_t idx)
{
    ht->slots[slot] = (h & HT_TAG_MASK) | ((uint64_t)idx + 1);
    ht->count++;
}

static void ht_put_rehash(struct pfr_htab *ht, uint64_t h, uint32_t idx)
{
    size_t i = (size_t)h & ht->mask;
    while (ht->slots[i])
        i = (i + 1) & ht->mask;
    ht->slots[i] = (h & HT_TAG_MASK) | ((uint64_t)idx + 1);
}

/* Rebuild the index with cap slots over n records whose hashes are at base + i * stride. */
static int ht_resize(struct pfr_htab *ht, size_t cap, const void *base, size_t stride, size_t n)
{
    uint64_t *ns = calloc(cap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    free(ht->slots);
    ht->slots = ns;
    ht->mask = cap - 1;
    const unsigned char *b = base;
    for (size_t i = 0; i < n; i++) {
        uint64_t h;
        memcpy(&h, b + i * stride, sizeof(h));
        ht_put_rehash(ht, h, (uint32_t)i);
    }
    ht->count = n;
    return 0;
}

/* Make room for want entries in all (load factor <= 1/2). */
static int ht_reserve(struct pfr_htab *ht, size_t want, const void *base, size_t stride, size_t n)
{
    size_t cap = ht->slots ? ht->mask + 1 : 0;
    if (want * 2 <= cap)
        return 0;
    size_t ncap = cap ? cap : 64;
    while (ncap < want * 2) {
        if (ncap > SIZE_MAX / 32)
            return -ENOMEM;
        ncap *= 2;
    }
    return ht_resize(ht, ncap, base, stride, n);
}

/* HT_RESERVE: room for one more; HT_PRESIZE: room for want in all. */
#define HT_RESERVE(ht, vec, n)                                                                     \
    ((ht)->slots && ((n) + 1) * 2 <= (ht)->mask + 1 ? 0 : HT_PRESIZE(ht, vec, n, (n) + 1))
#define HT_PRESIZE(ht, vec, n, want)                                                               \
    ht_reserve((ht), (want), (n) ? (const void *)&(vec)[0].hash : NULL, sizeof(*(vec)), (n))

int pfr_profile_reserve(pfr_profile *p, const struct pfr_sizes *z)
{
    if (p->err)
        return p->err;
    size_t vals = (p->nsamples + z->samples) * (p->ntypes + z->types);
    if (PFR_RESERVE(p->strs, p->cap_strs, p->nstrs + z->strs) ||
        PFR_RESERVE(p->maps, p->cap_maps, p->nmaps + z->maps) ||
        PFR_RESERVE(p->funcs, p->cap_funcs, p->nfuncs + z->funcs) ||
        PFR_RESERVE(p->locs, p->cap_locs, p->nlocs + z->locs) ||
        PFR_RESERVE(p->lines, p->cap_lines, p->nlines + z->lines) ||
        PFR_RESERVE(p->samples, p->cap_samples, p->nsamples + z->samples) ||
        PFR_RESERVE(p->stack, p->cap_stack, p->nstack + z->stack) ||
        PFR_RESERVE(p->labels, p->cap_labels, p->nlabels + z->labels) ||
        PFR_RESERVE(p->pub_labels, p->cap_pub_labels, p->nlabels + z->labels) ||
        PFR_RESERVE(p->values, p->cap_values, vals) ||
        HT_PRESIZE(&p->str_ht, p->strs, p->nstrs, p->nstrs + z->strs) ||
        HT_PRESIZE(&p->map_ht, p->maps, p->nmaps, p->nmaps + z->maps) ||
        HT_PRESIZE(&p->func_ht, p->funcs, p->nfuncs, p->nfuncs + z->funcs) ||
        HT_PRESIZE(&p->loc_ht, p->locs, p->nlocs, p->nlocs + z->locs) ||
        HT_PRESIZE(&p->sample_ht, p->samples, p->nsamples, p->nsamples + z->samples))
        return pfr_fail(p, -ENOMEM);
    return 0;
}

/* ---- life cycle ---- */

pfr_profile *pfr_profile_new(void)
{
    pfr_profile *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    if (pfr_profile_intern(p, "") != 0) {
        pfr_profile_free(p);
        return NULL;
    }
    return p;
}

void pfr_profile_free(pfr_profile *p)
{
    if (!p)
        return;
    struct pfr_strblock *b = p->blocks;
    while (b) {
        struct pfr_strblock *next = b->next;
        free(b);
        b = next;
    }
    free(p->strs);
    free(p->str_ht.slots);
    free(p->types);
    free(p->maps);
    free(p->map_ht.slots);
    free(p->funcs);
    free(p->func_ht.slots);
    free(p->locs);
    free(p->loc_ht.slots);
    free(p->lines);
    free(p->samples);
    free(p->sample_ht.slots);
    free(p->stack);
    free(p->values);
    free(p->labels);
    free(p->pub_labels);
    free(p);
}

int pfr_profile_error(const pfr_profile *p)
{
    return p->err;
}

/* ---- strings ---- */

static char *str_alloc(pfr_profile *p, size_t n)
{
    struct pfr_strblock *b = p->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : 4096;
        if (cap > (1u << 20))
            cap = 1u << 20;
        if (cap < n)
            cap = n;
        struct pfr_strblock *nb = malloc(sizeof(*nb) + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        /* A block made for one big string goes behind the current one so the current block's
         * free space stays usable. */
        if (b && cap == n && b->cap - b->used > 64) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            p->blocks = nb;
        }
        b = nb;
    }
    char *s = b->data + b->used;
    b->used += n;
    return s;
}

int64_t pfr_intern_hashed(pfr_profile *p, const char *s, size_t len, uint64_t h)
{
    if (p->err)
        return p->err;
    if (HT_RESERVE(&p->str_ht, p->strs, p->nstrs))
        return pfr_fail(p, -ENOMEM);
    struct ht_iter it = ht_begin(&p->str_ht, h);
    int64_t c;
    while ((c = ht_next(&p->str_ht, &it)) >= 0) {
        const struct pfr_string_rec *r = &p->strs[c];
        if (r->hash == h && r->len == len && memcmp(r->s, s, len) == 0)
            return c;
    }
    if (p->nstrs >= PFR_MAX_ITEMS || len > UINT32_MAX - 1)
        return pfr_fail(p, -ENOMEM);
    if (PFR_RESERVE(p->strs, p->cap_strs, p->nstrs + 1))
        return pfr_fail(p, -ENOMEM);
    char *copy = str_alloc(p, len + 1);
    if (!copy)
        return pfr_fail(p, -ENOMEM);
    memcpy(copy, s, len);
    copy[len] = '\0';
    struct pfr_string_rec *r = &p->strs[p->nstrs];
    r->s = copy;
    r->len = (uint32_t)len;
    r->hash = h;
    ht_set(&p->str_ht, it.i, h, (uint32_t)p->nstrs);
    return (int64_t)p->nstrs++;
}

int64_t pfr_profile_intern(pfr_profile *p, const char *s)
{
    if (!s)
        s = "";
    size_t len = strlen(s);
    return pfr_intern_hashed(p, s, len, pfr_hash_bytes(s, len));
}

int64_t pfr_profile_intern_hstr(pfr_profile *p, const pfr_hstr *s)
{
    return pfr_intern_hashed(p, s->len ? s->s : "", s->len, s->hash);
}

/* ---- sample types, period, time ---- */

int pfr_profile_add_sample_type(pfr_profile *p, const char *type, const char *unit)
{
    if (p->err)
        return p->err;
    if (p->nsamples > 0) /* values are laid out ntypes per sample */
        return pfr_fail(p, -EINVAL);
    int64_t t = pfr_profile_intern(p, type);
    int64_t u = pfr_profile_intern(p, unit);
    if (t < 0 || u < 0)
        return p->err;
    if (PFR_RESERVE(p->types, p->cap_types, p->ntypes + 1))
        return pfr_fail(p, -ENOMEM);
    p->types[p->ntypes].type = (uint32_t)t;
    p->types[p->ntypes].unit = (uint32_t)u;
    return (int)p->ntypes++;
}

void pfr_profile_set_period(pfr_profile *p, const char *type, const char *unit, int64_t period)
{
    int64_t t = pfr_profile_intern(p, type);
    int64_t u = pfr_profile_intern(p, unit);
    if (t < 0 || u < 0)
        return;
    p->period_type.type = (uint32_t)t;
    p->period_type.unit = (uint32_t)u;
    p->period = period;
}

void pfr_profile_set_time(pfr_profile *p, int64_t time_nanos, int64_t duration_nanos)
{
    p->time_nanos = time_nanos;
    p->duration_nanos = duration_nanos;
}

/* ---- mappings, functions, locations ---- */

uint64_t pfr_mapping_hash(const pfr_profile *p, const struct pfr_mapping_rec *m)
{
    uint64_t h = pfr_hash_step(0x3a77, m->start);
    h = pfr_hash_step(h, m->limit);
    h = pfr_hash_step(h, m->offset);
    h = pfr_hash_step(h, pfr_str_hash(p, m->file));
    h = pfr_hash_step(h, pfr_str_hash(p, m->build_id));
    return pfr_hash_mix(h);
}

int64_t pfr_mapping_put(pfr_profile *p, const struct pfr_mapping_rec *m)
{
    if (p->err)
        return p->err;
    if (HT_RESERVE(&p->map_ht, p->maps, p->nmaps))
        return pfr_fail(p, -ENOMEM);
    struct ht_iter it = ht_begin(&p->map_ht, m->hash);
    int64_t c;
    while ((c = ht_next(&p->map_ht, &it)) >= 0) {
        const struct pfr_mapping_rec *o = &p->maps[c];
        if (o->start == m->start && o->limit == m->limit && o->offset == m->offset &&
            o->file == m->file && o->build_id == m->build_id)
            return c;
    }
    if (p->nmaps >= PFR_MAX_ITEMS || PFR_RESERVE(p->maps, p->cap_maps, p->nmaps + 1))
        return pfr_fail(p, -ENOMEM);
    p->maps[p->nmaps] = *m;
    ht_set(&p->map_ht, it.i, m->hash, (uint32_t)p->nmaps);
    return (int64_t)p->nmaps++;
}

int64_t pfr_profile_add_mapping_ids(pfr_profile *p, uint64_t start, uint64_t limit, uint64_t offset,
                                    uint32_t file, uint32_t build_id)
{
    if (p->err)
        return p->err;
    if (file >= p->nstrs || build_id >= p->nstrs)
        return pfr_fail(p, -EINVAL);
    struct pfr_mapping_rec m = {
        .start = start, .limit = limit, .offset = offset, .file = file, .build_id = build_id};
    m.hash = pfr_mapping_hash(p, &m);
    return pfr_mapping_put(p, &m);
}

int64_t pfr_profile_add_mapping(pfr_profile *p, uint64_t start, uint64_t limit, uint64_t offset,
                                const char *file, const char *build_id)
{
    int64_t f = pfr_profile_intern(p, file);
    int64_t b = pfr_profile_intern(p, build_id);
    if (f < 0 || b < 0)
        return p->err;
    return pfr_profile_add_mapping_ids(p, start, limit, offset, (uint32_t)f, (uint32_t)b);
}

uint64_t pfr_function_hash(const pfr_profile *p, const struct pfr_function_rec *f)
{
    uint64_t h = pfr_hash_step(0xf00d, pfr_str_hash(p, f->name));
    h = pfr_hash_step(h, pfr_str_hash(p, f->system_name));
    h = pfr_hash_step(h, pfr_str_hash(p, f->file));
    h = pfr_hash_step(h, (uint64_t)f->start_line);
    return pfr_hash_mix(h);
}

int64_t pfr_function_put(pfr_profile *p, const struct pfr_function_rec *f)
{
    if (p->err)
        return p->err;
    if (HT_RESERVE(&p->func_ht, p->funcs, p->nfuncs))
        return pfr_fail(p, -ENOMEM);
    struct ht_iter it = ht_begin(&p->func_ht, f->hash);
    int64_t c;
    while ((c = ht_next(&p->func_ht, &it)) >= 0) {
        const struct pfr_function_rec *o = &p->funcs[c];
        if (o->name == f->name && o->system_name == f->system_name && o->file == f->file &&
            o->start_line == f->start_line)
            return c;
    }
    if (p->nfuncs >= PFR_MAX_ITEMS || PFR_RESERVE(p->funcs, p->cap_funcs, p->nfuncs + 1))
        return pfr_fail(p, -ENOMEM);
    p->funcs[p->nfuncs] = *f;
    ht_set(&p->func_ht, it.i, f->hash, (uint32_t)p->nfuncs);
    return (int64_t)p->nfuncs++;
}

int64_t pfr_profile_add_function(pfr_profile *p, const char *name, const char *system_name,
                                 const char *file, int64_t start_line)
{
    int64_t n = pfr_profile_intern(p, name);
    /* Every caller in the tree passes the name as the system name too: the same string needs no
     * second look-up (strlen, hash and probe; a third of this call's interning). */
    int64_t s = system_name == name ? n : pfr_profile_intern(p, system_name);
    int64_t f = pfr_profile_intern(p, file);
    if (n < 0 || s < 0 || f < 0)
        return p->err;
    return pfr_profile_add_function_ids(p, (uint32_t)n, (uint32_t)s, (uint32_t)f, start_line);
}

int64_t pfr_profile_add_function_ids(pfr_profile *p, uint32_t name, uint32_t system_name,
                                     uint32_t file, int64_t start_line)
{
    if (p->err)
        return p->err;
    if (name >= p->nstrs || system_name >= p->nstrs || file >= p->nstrs)
        return pfr_fail(p, -EINVAL);
    struct pfr_function_rec r = {
        .start_line = start_line, .name = name, .system_name = system_name, .file = file};
    r.hash = pfr_function_hash(p, &r);
    return pfr_function_put(p, &r);
}

uint64_t pfr_location_hash(const pfr_profile *p, uint32_t mapping_plus1, uint64_t address,
                           const pfr_line *lines, size_t nlines)
{
    uint64_t h = pfr_hash_step(0x10c, mapping_plus1 ? p->maps[mapping_plus1 - 1].hash : 0);
    h = pfr_hash_step(h, address);
    for (size_t i = 0; i < nlines; i++) {
        h = pfr_hash_step(h, p->funcs[lines[i].function].hash);
        h = pfr_hash_step(h, (uint64_t)lines[i].line);
    }
    return pfr_hash_mix(h ^ nlines);
}

int64_t pfr_location_put(pfr_profile *p, uint32_t mapping_plus1, uint64_t address,
                         const pfr_line *lines, uint32_t nlines, uint64_t hash)
{
    if (p->err)
        return p->err;
    if (HT_RESERVE(&p->loc_ht, p->locs, p->nlocs))
        return pfr_fail(p, -ENOMEM);
    struct ht_iter it = ht_begin(&p->loc_ht, hash);
    int64_t c;
    while ((c = ht_next(&p->loc_ht, &it)) >= 0) {
        const struct pfr_location_rec *o = &p->locs[c];
        if (o->hash != hash || o->mapping != mapping_plus1 || o->address != address ||
            o->nlines != nlines)
            continue;
        uint32_t i = 0;
        while (i < nlines && p->lines[o->line_off + i].function == lines[i].function &&
               p->lines[o->line_off + i].line == lines[i].line)
            i++;
        if (i == nlines)
            return c;
    }
    if (p->nlocs >= PFR_MAX_ITEMS || p->nlines + nlines > PFR_MAX_ITEMS ||
        PFR_RESERVE(p->locs, p->cap_locs, p->nlocs + 1) ||
        PFR_RESERVE(p->lines, p->cap_lines, p->nlines + nlines))
        return pfr_fail(p, -ENOMEM);
    struct pfr_location_rec *r = &p->locs[p->nlocs];
    r->address = address;
    r->hash = hash;
    r->mapping = mapping_plus1;
    r->line_off = (uint32_t)p->nlines;
    r->nlines = nlines;
    if (nlines)
        memcpy(p->lines + p->nlines, lines, nlines * sizeof(*lines));
    p->nlines += nlines;
    ht_set(&p->loc_ht, it.i, hash, (uint32_t)p->nlocs);
    return (int64_t)p->nlocs++;
}

int64_t pfr_profile_add_location(pfr_profile *p, int64_t mapping, uint64_t address,
                                 const pfr_line *lines, size_t nlines)
{
    if (p->err)
        return p->err;
    if (mapping < -1 || (mapping >= 0 && (size_t)mapping >= p->nmaps) || (nlines && !lines) ||
        nlines > PFR_MAX_ITEMS)
        return pfr_fail(p, -EINVAL);
    for (size_t i = 0; i < nlines; i++)
        if (lines[i].function >= p->nfuncs)
            return pfr_fail(p, -EINVAL);
    uint32_t m1 = (uint32_t)(mapping + 1);
    uint64_t h = pfr_location_hash(p, m1, address, lines, nlines);
    return pfr_location_put(p, m1, address, lines, (uint32_t)nlines, h);
}

int64_t pfr_profile_add_frame(pfr_profile *p, const char *name, const char *file, int64_t line)
{
    int64_t f = pfr_profile_add_function(p, name, name, file, 0);
    if (f < 0)
        return f;
    pfr_line l = {.function = (uint32_t)f, .line = line};
    return pfr_profile_add_location(p, -1, 0, &l, 1);
}

/* ---- samples ---- */

uint64_t pfr_labels_hash(const pfr_profile *p, const struct pfr_label_rec *l, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        bool is_num = l[i].str == PFR_LABEL_NUM;
        sum += pfr_label_hash(pfr_str_hash(p, l[i].key), is_num,
                              is_num ? 0 : pfr_str_hash(p, l[i].str), l[i].num,
                              pfr_str_hash(p, l[i].unit));
    }
    return sum ^ n;
}

static bool label_eq(const struct pfr_label_rec *a, const struct pfr_label_rec *b)
{
    return a->key == b->key && a->str == b->str && a->num == b->num && a->unit == b->unit;
}

/* Same label set: order does not matter (hashes are order-independent too). */
static bool labels_eq(const struct pfr_label_rec *a, const struct pfr_label_rec *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (label_eq(&a[i], &b[i]))
            continue;
        uint32_t j = 0;
        while (j < n && !label_eq(&a[i], &b[j]))
            j++;
        if (j == n)
            return false;
    }
    return true;
}

static inline int64_t add_wrap(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

int64_t pfr_sample_put(pfr_profile *p, const uint32_t *locs, uint32_t nlocs, uint64_t stack_hash,
                       const int64_t *values, const struct pfr_label_rec *labels, uint32_t nlabels,
                       uint64_t labels_hash)
{
    if (p->err)
        return p->err;
    if (HT_RESERVE(&p->sample_ht, p->samples, p->nsamples))
        return pfr_fail(p, -ENOMEM);
    uint64_t h = pfr_sample_hash(stack_hash, labels_hash);
    size_t nt = p->ntypes;
    struct ht_iter it = ht_begin(&p->sample_ht, h);
    int64_t c;
    while ((c = ht_next(&p->sample_ht, &it)) >= 0) {
        const struct pfr_sample_rec *o = &p->samples[c];
        if (o->hash != h || o->nlocs != nlocs || o->nlabels != nlabels ||
            (nlocs && memcmp(p->stack + o->loc_off, locs, nlocs * sizeof(*locs)) != 0) ||
            (nlabels && !labels_eq(p->labels + o->label_off, labels, nlabels)))
            continue;
        for (size_t i = 0; i < nt; i++)
            p->values[(size_t)c * nt + i] = add_wrap(p->values[(size_t)c * nt + i], values[i]);
        return c;
    }
    if (p->nsamples >= PFR_MAX_ITEMS || p->nstack + nlocs > PFR_MAX_ITEMS ||
        p->nlabels + nlabels > PFR_MAX_ITEMS ||
        PFR_RESERVE(p->samples, p->cap_samples, p->nsamples + 1) ||
        PFR_RESERVE(p->stack, p->cap_stack, p->nstack + nlocs) ||
        PFR_RESERVE(p->values, p->cap_values, (p->nsamples + 1) * nt) ||
        PFR_RESERVE(p->labels, p->cap_labels, p->nlabels + nlabels) ||
        PFR_RESERVE(p->pub_labels, p->cap_pub_labels, p->nlabels + nlabels))
        return pfr_fail(p, -ENOMEM);
    struct pfr_sample_rec *r = &p->samples[p->nsamples];
    r->hash = h;
    r->stack_hash = stack_hash;
    r->loc_off = (uint32_t)p->nstack;
    r->nlocs = nlocs;
    r->label_off = (uint32_t)p->nlabels;
    r->nlabels = nlabels;
    if (nlocs)
        memcpy(p->stack + p->nstack, locs, nlocs * sizeof(*locs));
    p->nstack += nlocs;
    if (nt)
        memcpy(p->values + p->nsamples * nt, values, nt * sizeof(*values));
    for (uint32_t i = 0; i < nlabels; i++) {
        const struct pfr_label_rec *l = &labels[i];
        p->labels[p->nlabels] = *l;
        pfr_label *pub = &p->pub_labels[p->nlabels];
        pub->key = p->strs[l->key].s;
        pub->str = l->str == PFR_LABEL_NUM ? NULL : p->strs[l->str].s;
        pub->num = l->str == PFR_LABEL_NUM ? l->num : 0;
        pub->unit = l->str == PFR_LABEL_NUM && l->unit ? p->strs[l->unit].s : NULL;
        p->nlabels++;
    }
    ht_set(&p->sample_ht, it.i, h, (uint32_t)p->nsamples);
    return (int64_t)p->nsamples++;
}

int64_t pfr_profile_add_sample(pfr_profile *p, const uint32_t *locs, size_t nlocs,
                               const int64_t *values, const pfr_label *labels, size_t nlabels)
{
    if (p->err)
        return p->err;
    if ((nlocs && !locs) || (p->ntypes && !values) || (nlabels && !labels) ||
        nlocs > PFR_MAX_ITEMS || nlabels > 4096)
        return pfr_fail(p, -EINVAL);
    for (size_t i = 0; i < nlocs; i++)
        if (locs[i] >= p->nlocs)
            return pfr_fail(p, -EINVAL);
    struct pfr_label_rec small[8], *recs = small;
    if (nlabels > 8) {
        recs = malloc(nlabels * sizeof(*recs));
        if (!recs)
            return pfr_fail(p, -ENOMEM);
    }
    for (size_t i = 0; i < nlabels; i++) {
        const pfr_label *l = &labels[i];
        /* pprof cannot tell an empty string label from a number 0 (both are index 0): store it
         * the way any reader will see it after encoding. */
        bool is_str = l->str && l->str[0];
        int64_t k = pfr_profile_intern(p, l->key);
        int64_t s = is_str ? pfr_profile_intern(p, l->str) : PFR_LABEL_NUM;
        int64_t u = is_str || l->str ? 0 : pfr_profile_intern(p, l->unit);
        if (k < 0 || s < 0 || u < 0)
            break;
        recs[i].key = (uint32_t)k;
        recs[i].str = (uint32_t)s;
        recs[i].unit = (uint32_t)u;
        recs[i].num = is_str || l->str ? 0 : l->num;
    }
    int64_t r = p->err;
    if (!r) {
        uint64_t sh = pfr_stack_hash(p, locs, nlocs);
        uint64_t lh = pfr_labels_hash(p, recs, nlabels);
        r = pfr_sample_put(p, locs, (uint32_t)nlocs, sh, values, recs, (uint32_t)nlabels, lh);
    }
    if (recs != small)
        free(recs);
    return r;
}

/* ---- reading ---- */

size_t pfr_profile_num_sample_types(const pfr_profile *p)
{
    return p->ntypes;
}

const char *pfr_profile_sample_type(const pfr_profile *p, size_t i, const char **unit)
{
    if (i >= p->ntypes) {
        if (unit)
            *unit = NULL;
        return NULL;
    }
    if (unit)
        *unit = p->strs[p->types[i].unit].s;
    return p->strs[p->types[i].type].s;
}

int pfr_profile_find_sample_type(const pfr_profile *p, const char *type)
{
    for (size_t i = 0; i < p->ntypes; i++)
        if (strcmp(p->strs[p->types[i].type].s, type) == 0)
            return (int)i;
    return -1;
}

int64_t pfr_profile_time_nanos(const pfr_profile *p)
{
    return p->time_nanos;
}

int64_t pfr_profile_duration_nanos(const pfr_profile *p)
{
    return p->duration_nanos;
}

int64_t pfr_profile_period(const pfr_profile *p, const char **type, const char **unit)
{
    if (type)
        *type = p->strs[p->period_type.type].s;
    if (unit)
        *unit = p->strs[p->period_type.unit].s;
    return p->period;
}

size_t pfr_profile_num_strings(const pfr_profile *p)
{
    return p->nstrs;
}

const char *pfr_profile_string(const pfr_profile *p, size_t i)
{
    return i < p->nstrs ? p->strs[i].s : NULL;
}

size_t pfr_profile_num_mappings(const pfr_profile *p)
{
    return p->nmaps;
}

size_t pfr_profile_num_functions(const pfr_profile *p)
{
    return p->nfuncs;
}

size_t pfr_profile_num_locations(const pfr_profile *p)
{
    return p->nlocs;
}

size_t pfr_profile_num_samples(const pfr_profile *p)
{
    return p->nsamples;
}

const int64_t *pfr_profile_sample_values(const pfr_profile *p, size_t i)
{
    if (i >= p->nsamples || !p->ntypes)
        return NULL;
    return p->values + i * p->ntypes;
}

const uint32_t *pfr_profile_sample_locations(const pfr_profile *p, size_t i, size_t *n)
{
    if (i >= p->nsamples) {
        *n = 0;
        return NULL;
    }
    *n = p->samples[i].nlocs;
    return *n ? p->stack + p->samples[i].loc_off : NULL;
}

size_t pfr_profile_sample_labels(const pfr_profile *p, size_t i, const pfr_label **labels)
{
    if (i >= p->nsamples || !p->samples[i].nlabels) {
        *labels = NULL;
        return 0;
    }
    *labels = p->pub_labels + p->samples[i].label_off;
    return p->samples[i].nlabels;
}

const char *pfr_profile_sample_label_str(const pfr_profile *p, size_t i, const char *key)
{
    const pfr_label *l;
    size_t n = pfr_profile_sample_labels(p, i, &l);
    for (size_t j = 0; j < n; j++)
        if (l[j].str && strcmp(l[j].key, key) == 0)
            return l[j].str;
    return NULL;
}

bool pfr_profile_sample_label_num(const pfr_profile *p, size_t i, const char *key, int64_t *out)
{
    const pfr_label *l;
    size_t n = pfr_profile_sample_labels(p, i, &l);
    for (size_t j = 0; j < n; j++) {
        if (!l[j].str && strcmp(l[j].key, key) == 0) {
            *out = l[j].num;
            return true;
        }
    }
    return false;
}

size_t pfr_profile_location_frames(const pfr_profile *p, uint32_t loc, pfr_frame *out, size_t cap)
{
    if (loc >= p->nlocs)
        return 0;
    const struct pfr_location_rec *l = &p->locs[loc];
    const char *module = l->mapping ? p->strs[p->maps[l->mapping - 1].file].s : "";
    if (l->nlines == 0) {
        /* An unsymbolized location is still one frame. */
        if (cap > 0)
            out[0] = (pfr_frame){"", "", 0, l->address, module};
        return 1;
    }
    for (uint32_t i = 0; i < l->nlines && i < cap; i++) {
        const pfr_line *ln = &p->lines[l->line_off + i];
        const struct pfr_function_rec *f = &p->funcs[ln->function];
        out[i] = (pfr_frame){p->strs[f->name].s, p->strs[f->file].s, ln->line, l->address, module};
    }
    return l->nlines;
}

uint64_t pfr_string_hash(const char *s, size_t len)
{
    return pfr_hash_bytes(s, len);
}

size_t pfr_profile_location_hashes(const pfr_profile *p, uint32_t loc, pfr_frame_hash *out,
                                   size_t cap, uint64_t *module)
{
    if (loc >= p->nlocs) {
        *module = pfr_hash_bytes("", 0);
        return 0;
    }
    const struct pfr_location_rec *l = &p->locs[loc];
    *module = l->mapping ? p->strs[p->maps[l->mapping - 1].file].hash : p->strs[0].hash;
    if (l->nlines == 0) {
        if (cap > 0)
            out[0] = (pfr_frame_hash){p->strs[0].hash, p->strs[0].hash};
        return 1;
    }
    for (uint32_t i = 0; i < l->nlines && i < cap; i++) {
        const struct pfr_function_rec *f = &p->funcs[p->lines[l->line_off + i].function];
        out[i] = (pfr_frame_hash){p->strs[f->name].hash, p->strs[f->file].hash};
    }
    return l->nlines;
}

size_t pfr_profile_sample_frames(const pfr_profile *p, size_t i, pfr_frame *out, size_t cap)
{
    size_t n;
    const uint32_t *locs = pfr_profile_sample_locations(p, i, &n);
    size_t total = 0;
    for (size_t j = 0; j < n; j++) {
        size_t room = total < cap ? cap - total : 0;
        total += pfr_profile_location_frames(p, locs[j], room ? out + total : NULL, room);
    }
    return total;
}
