/* pprof encoding: protobuf-c packs the message (its structs point into the model), zlib gzips.
 * Decoding is in pfr_profile_decode.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_gzip.h"
#include "pfr_profile_internal.h"
#include "profile.pb-c.h"

/* ---- a bump arena: the protobuf-c messages of one encode, freed at once ---- */

struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
};

struct arena {
    struct arena_block *head;
    size_t first; /* size of the first block (0 = 64 KiB): one block when the need is known */
    bool failed;
};

static void *arena_alloc(void *ctx, size_t n)
{
    struct arena *a = ctx;
    n = (n + 15) & ~(size_t)15;
    struct arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : a->first ? a->first : 64u << 10;
        if (cap > (64u << 20))
            cap = 64u << 20;
        if (cap < n)
            cap = n;
        b = malloc(sizeof(*b) + cap);
        if (!b) {
            a->failed = true;
            return NULL;
        }
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *r = (char *)b->data + b->used;
    b->used += n;
    return r;
}

static void arena_destroy(struct arena *a)
{
    struct arena_block *b = a->head;
    while (b) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

/* calloc-style arena array; NULL for n == 0 or on failure (check a->failed). */
static void *arena_array(struct arena *a, size_t n, size_t elem)
{
    if (n == 0)
        return NULL;
    if (n > SIZE_MAX / elem) {
        a->failed = true;
        return NULL;
    }
    return arena_alloc(a, n * elem);
}

/* ---- encoding ---- */

/* Fill msg from p; every array lives in a. */
static int build_message(const pfr_profile *p, struct arena *a, Perftools__Profiles__Profile *m)
{
    size_t nt = p->ntypes;
    m->n_sample_type = nt;
    m->sample_type = arena_array(a, nt, sizeof(*m->sample_type));
    Perftools__Profiles__ValueType *vts = arena_array(a, nt + 1, sizeof(*vts));
    if (a->failed)
        return -ENOMEM;
    for (size_t i = 0; i <= nt; i++)
        perftools__profiles__value_type__init(&vts[i]);
    for (size_t i = 0; i < nt; i++) {
        vts[i].type = p->types[i].type;
        vts[i].unit = p->types[i].unit;
        m->sample_type[i] = &vts[i];
    }
    if (p->period_type.type || p->period_type.unit) {
        vts[nt].type = p->period_type.type;
        vts[nt].unit = p->period_type.unit;
        m->period_type = &vts[nt];
    }
    m->period = p->period;
    m->time_nanos = p->time_nanos;
    m->duration_nanos = p->duration_nanos;

    /* strings */
    m->n_string_table = p->nstrs;
    m->string_table = arena_array(a, p->nstrs, sizeof(char *));
    if (a->failed)
        return -ENOMEM;
    for (size_t i = 0; i < p->nstrs; i++)
        m->string_table[i] = (char *)p->strs[i].s;

    /* mappings: what a location tells about its mapping's symbolization */
    m->n_mapping = p->nmaps;
    m->mapping = arena_array(a, p->nmaps, sizeof(*m->mapping));
    Perftools__Profiles__Mapping *maps = arena_array(a, p->nmaps, sizeof(*maps));
    if (a->failed)
        return -ENOMEM;
    for (size_t i = 0; i < p->nmaps; i++) {
        Perftools__Profiles__Mapping *mp = &maps[i];
        perftools__profiles__mapping__init(mp);
        mp->id = i + 1;
        mp->memory_start = p->maps[i].start;
        mp->memory_limit = p->maps[i].limit;
        mp->file_offset = p->maps[i].offset;
        mp->filename = p->maps[i].file;
        mp->build_id = p->maps[i].build_id;
        m->mapping[i] = mp;
    }

    m->n_function = p->nfuncs;
    m->function = arena_array(a, p->nfuncs, sizeof(*m->function));
    Perftools__Profiles__Function *funcs = arena_array(a, p->nfuncs, sizeof(*funcs));
    if (a->failed)
        return -ENOMEM;
    for (size_t i = 0; i < p->nfuncs; i++) {
        Perftools__Profiles__Function *f = &funcs[i];
        perftools__profiles__function__init(f);
        f->id = i + 1;
        f->name = p->funcs[i].name;
        f->system_name = p->funcs[i].system_name;
        f->filename = p->funcs[i].file;
        f->start_line = p->funcs[i].start_line;
        m->function[i] = f;
    }

    m->n_location = p->nlocs;
    m->location = arena_array(a, p->nlocs, sizeof(*m->location));
    Perftools__Profiles__Location *locs = arena_array(a, p->nlocs, sizeof(*locs));
    Perftools__Profiles__Line *lines = arena_array(a, p->nlines, sizeof(*lines));
    Perftools__Profiles__Line **line_ptrs = arena_array(a, p->nlines, sizeof(*line_ptrs));
    if (a->failed)
        return -ENOMEM;
    for (size_t i = 0; i < p->nlines; i++) {
        perftools__profiles__line__init(&lines[i]);
        lines[i].function_id = (uint64_t)p->lines[i].function + 1;
        lines[i].line = p->lines[i].line;
        line_ptrs[i] = &lines[i];
    }
    for (size_t i = 0; i < p->nlocs; i++) {
        const struct pfr_location_rec *r = &p->locs[i];
        Perftools__Profiles__Location *l = &locs[i];
        perftools__profiles__location__init(l);
        l->id = i + 1;
        l->mapping_id = r->mapping;
        l->address = r->address;
        l->n_line = r->nlines;
        l->line = r->nlines ? line_ptrs + r->line_off : NULL;
        m->location[i] = l;
        if (r->mapping && r->nlines) {
            Perftools__Profiles__Mapping *mp = &maps[r->mapping - 1];
            mp->has_functions = mp->has_filenames = mp->has_line_numbers = true;
            if (r->nlines > 1)
                mp->has_inline_frames = true;
        }
    }

    m->n_sample = p->nsamples;
    m->sample = arena_array(a, p->nsamples, sizeof(*m->sample));
    Perftools__Profiles__Sample *samples = arena_array(a, p->nsamples, sizeof(*samples));
    uint64_t *ids = arena_array(a, p->nstack, sizeof(*ids));
    Perftools__Profiles__Label *labels = arena_array(a, p->nlabels, sizeof(*labels));
    Perftools__Profiles__Label **label_ptrs = arena_array(a, p->nlabels, sizeof(*label_ptrs));
    if (a->failed)
        return -ENOMEM;
    for (size_t i = 0; i < p->nstack; i++)
        ids[i] = (uint64_t)p->stack[i] + 1;
    for (size_t i = 0; i < p->nlabels; i++) {
        const struct pfr_label_rec *r = &p->labels[i];
        Perftools__Profiles__Label *l = &labels[i];
        perftools__profiles__label__init(l);
        l->key = r->key;
        if (r->str == PFR_LABEL_NUM) {
            l->num = r->num;
            l->num_unit = r->unit;
        } else {
            l->str = r->str;
        }
        label_ptrs[i] = l;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct pfr_sample_rec *r = &p->samples[i];
        Perftools__Profiles__Sample *s = &samples[i];
        perftools__profiles__sample__init(s);
        s->n_location_id = r->nlocs;
        s->location_id = r->nlocs ? ids + r->loc_off : NULL;
        s->n_value = nt;
        s->value = nt ? p->values + i * nt : NULL;
        s->n_label = r->nlabels;
        s->label = r->nlabels ? label_ptrs + r->label_off : NULL;
        m->sample[i] = s;
    }
    return 0;
}

int pfr_profile_encode(const pfr_profile *p, bool gzip, uint8_t **out, size_t *out_len)
{
    if (p->err)
        return p->err;
    /* One arena block sized for the message structs (their sizes, rounded up). */
    struct arena a = {.first = p->nmaps * 112 + p->nfuncs * 80 + p->nlocs * 96 + p->nlines * 64 +
                               p->nsamples * 112 + p->nlabels * 80 + p->nstack * 8 + p->nstrs * 8 +
                               p->ntypes * 48 + 4096};
    Perftools__Profiles__Profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
    int rc = build_message(p, &a, &m);
    if (rc) {
        arena_destroy(&a);
        return rc;
    }
    size_t len = perftools__profiles__profile__get_packed_size(&m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        arena_destroy(&a);
        return -ENOMEM;
    }
    size_t packed = perftools__profiles__profile__pack(&m, buf);
    arena_destroy(&a);
    if (packed != len) {
        free(buf);
        return -EINVAL;
    }
    if (!gzip) {
        *out = buf;
        *out_len = len;
        return 0;
    }
    pfr_buf z = {0};
    rc = pfr_gzip(buf, len, PFR_GZIP_DEFAULT_LEVEL, &z);
    free(buf);
    if (rc) {
        pfr_buf_free(&z);
        return rc;
    }
    *out = pfr_buf_steal(&z, out_len);
    return 0;
}
