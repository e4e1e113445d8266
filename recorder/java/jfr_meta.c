/* jfr_meta: a chunk's metadata record, the classes and fields the rest is read by
 * (jfr_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jfr_internal.h"
#include "pfr_vec.h"

/* ---- metadata ---- */

enum ectx { E_TOP, E_ROOT, E_METADATA, E_CLASS, E_FIELD, E_OTHER };

/* The names the element tree is read for, tagged once per string table rather than compared
 * at each of its ~10^4 uses. */
enum { T_OTHER, T_NAME, T_ID, T_CLASS, T_CPOOL, T_DIM, T_METADATA, T_FIELD };

typedef struct meta_strs {
    const uint32_t *off; /* arena offsets of the string table */
    uint8_t *tag;
    size_t n;
} meta_strs;

static uint8_t tag_of(const char *s)
{
    static const char *const names[] = {"",          "name",     "id",   "class", "constantPool",
                                        "dimension", "metadata", "field"};
    for (uint8_t t = T_NAME; t <= T_FIELD; t++)
        if (strcmp(s, names[t]) == 0)
            return t;
    return T_OTHER;
}

static int meta_str(jp *P, jfr_chunk *c, rd *r, const meta_strs *s, const char **out, uint8_t *tag)
{
    uint64_t i;
    int rc = pfr_jfr_rd_varint(P, r, &i);
    if (rc < 0)
        return rc;
    if (i >= s->n)
        return pfr_jfr_fail(P, -EINVAL, "metadata: string index %llu past the table's %zu",
                            (unsigned long long)i, s->n);
    *out = c->arena + s->off[i];
    *tag = s->tag[i];
    return 0;
}

static int parse_u64(jp *P, const char *s, uint64_t *v)
{
    uint64_t x = 0;
    if (!*s)
        return pfr_jfr_fail(P, -EINVAL, "metadata: empty number");
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
            return pfr_jfr_fail(P, -EINVAL, "metadata: bad number");
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return 0;
}

typedef struct elem_attrs {
    const char *name, *id, *cls, *cpool, *dim;
} elem_attrs;

static int add_class(jp *P, jfr_chunk *c, const elem_attrs *a)
{
    if (!a->id || !a->name)
        return pfr_jfr_fail(P, -EINVAL, "metadata: a class without id or name");
    if (c->nclasses >= JFR_MAX_CLASSES)
        return pfr_jfr_fail(P, -E2BIG, "metadata: more than %d classes", JFR_MAX_CLASSES);
    if (PFR_VEC_RESERVE(c->classes, c->ccap, c->nclasses + 1) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for classes");
    class_def *cd = &c->classes[c->nclasses];
    memset(cd, 0, sizeof(*cd));
    int rc = parse_u64(P, a->id, &cd->id);
    if (rc < 0)
        return rc;
    cd->name = (uint32_t)(a->name - c->arena);
    cd->field0 = (uint32_t)c->nfields;
    c->nclasses++;
    return 0;
}

static int add_field(jp *P, jfr_chunk *c, const elem_attrs *a)
{
    if (!a->name || !a->cls)
        return pfr_jfr_fail(P, -EINVAL, "metadata: a field without name or class");
    if (c->nfields >= JFR_MAX_FIELDS)
        return pfr_jfr_fail(P, -E2BIG, "metadata: more than %u fields", JFR_MAX_FIELDS);
    if (PFR_VEC_RESERVE(c->fields, c->fcap, c->nfields + 1) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for fields");
    field_def *f = &c->fields[c->nfields];
    memset(f, 0, sizeof(*f));
    int rc = parse_u64(P, a->cls, &f->type_id);
    if (rc < 0)
        return rc;
    f->name = (uint32_t)(a->name - c->arena);
    f->cpool = a->cpool && strcmp(a->cpool, "true") == 0;
    if (a->dim) {
        uint64_t d;
        if ((rc = parse_u64(P, a->dim, &d)) < 0)
            return rc;
        if (d > 1)
            return pfr_jfr_fail(P, -EINVAL, "metadata: field of dimension %llu",
                                (unsigned long long)d);
        f->array = d == 1;
    }
    c->nfields++;
    c->classes[c->nclasses - 1].nfields++;
    return 0;
}

static enum ectx elem_kind(enum ectx parent, uint8_t tag)
{
    if (parent == E_TOP)
        return E_ROOT;
    if (parent == E_ROOT && tag == T_METADATA)
        return E_METADATA;
    if (parent == E_METADATA && tag == T_CLASS)
        return E_CLASS;
    if (parent == E_CLASS && tag == T_FIELD)
        return E_FIELD;
    return E_OTHER;
}

static int parse_element(jp *P, jfr_chunk *c, rd *r, const meta_strs *s, enum ectx parent,
                         int depth)
{
    if (depth > JFR_MAX_META_DEPTH)
        return pfr_jfr_fail(P, -EINVAL, "metadata: elements nested deeper than %d",
                            JFR_MAX_META_DEPTH);
    const char *name;
    uint8_t tag, vtag;
    uint64_t nattr, nchild;
    int rc = meta_str(P, c, r, s, &name, &tag);
    if (rc < 0 || (rc = pfr_jfr_rd_count(P, r, 2, "metadata attributes", &nattr)) < 0)
        return rc;
    enum ectx me = elem_kind(parent, tag);
    elem_attrs a = {0};
    for (uint64_t i = 0; i < nattr; i++) {
        const char *k, *v;
        if ((rc = meta_str(P, c, r, s, &k, &tag)) < 0 || (rc = meta_str(P, c, r, s, &v, &vtag)) < 0)
            return rc;
        if (tag == T_NAME)
            a.name = v;
        else if (tag == T_ID)
            a.id = v;
        else if (tag == T_CLASS)
            a.cls = v;
        else if (tag == T_CPOOL)
            a.cpool = v;
        else if (tag == T_DIM)
            a.dim = v;
    }
    if (me == E_CLASS)
        rc = add_class(P, c, &a);
    else if (me == E_FIELD)
        rc = add_field(P, c, &a);
    if (rc < 0 || (rc = pfr_jfr_rd_count(P, r, 3, "metadata children", &nchild)) < 0)
        return rc;
    for (uint64_t i = 0; i < nchild && rc == 0; i++)
        rc = parse_element(P, c, r, s, me, depth + 1);
    return rc;
}

static uint8_t prim_of(const char *name)
{
    static const struct {
        const char *name;
        uint8_t prim;
    } prims[] = {
        {"boolean", P_BOOLEAN}, {"byte", P_BYTE},     {"char", P_CHAR},
        {"short", P_SHORT},     {"int", P_INT},       {"long", P_LONG},
        {"float", P_FLOAT},     {"double", P_DOUBLE}, {"java.lang.String", P_STRING},
    };
    for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
        if (strcmp(name, prims[i].name) == 0)
            return prims[i].prim;
    return P_STRUCT;
}

/* Class ids to indices, field types to classes. */
static int resolve_types(jp *P, jfr_chunk *c)
{
    if (pfr_map_reserve(&c->class_by_id, c->nclasses) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for classes");
    for (size_t i = 0; i < c->nclasses; i++) {
        class_def *cd = &c->classes[i];
        uint64_t *slot;
        int rc = pfr_map_intern(&c->class_by_id, cd->id, i, &slot);
        if (rc < 0)
            return pfr_jfr_fail(P, -ENOMEM, "out of memory for classes");
        if (rc == 1)
            return pfr_jfr_fail(P, -EINVAL, "metadata: class id %llu declared twice",
                                (unsigned long long)cd->id);
        cd->prim = prim_of(c->arena + cd->name);
    }
    for (size_t i = 0; i < c->nfields; i++) {
        uint64_t *v = pfr_map_get(&c->class_by_id, c->fields[i].type_id);
        if (!v)
            return pfr_jfr_fail(P, -EINVAL, "metadata: field %s of undeclared type %llu",
                                c->arena + c->fields[i].name,
                                (unsigned long long)c->fields[i].type_id);
        c->fields[i].cls = (uint32_t)*v;
    }
    return 0;
}

static bool field_has_data(const jfr_chunk *c, const field_def *f)
{
    return f->array || f->cpool || c->classes[f->cls].has_data;
}

/* has_data: a primitive, or a struct with an array, pool or primitive field, or with a struct
 * field that has data: propagated backwards along struct fields, breadth first, so that cycles
 * of structs (which the metadata may declare) end. Then each class's live fields. */
static int compute_layout(jp *P, jfr_chunk *c)
{
    size_t nc = c->nclasses, nf = c->nfields;
    uint32_t *deg = calloc(nc + 1, sizeof(*deg));
    uint32_t *edges = malloc((nf ? nf : 1) * sizeof(*edges));
    uint32_t *queue = malloc((nc ? nc : 1) * sizeof(*queue));
    int rc = 0;
    if (!deg || !edges || !queue) {
        rc = pfr_jfr_fail(P, -ENOMEM, "out of memory for the metadata");
        goto out;
    }
    /* CSR of "a field of class owner has struct type t": t -> owner */
    size_t qn = 0;
    for (size_t k = 0; k < nc; k++) {
        class_def *cd = &c->classes[k];
        cd->has_data = cd->prim != P_STRUCT;
        for (uint32_t i = 0; i < cd->nfields; i++) {
            const field_def *f = &c->fields[cd->field0 + i];
            if (f->array || f->cpool || c->classes[f->cls].prim != P_STRUCT)
                cd->has_data = true;
            else
                deg[f->cls + 1]++;
        }
        if (cd->has_data)
            queue[qn++] = (uint32_t)k;
    }
    for (size_t k = 0; k < nc; k++)
        deg[k + 1] += deg[k];
    for (size_t k = 0; k < nc; k++) {
        const class_def *cd = &c->classes[k];
        for (uint32_t i = 0; i < cd->nfields; i++) {
            const field_def *f = &c->fields[cd->field0 + i];
            if (!f->array && !f->cpool && c->classes[f->cls].prim == P_STRUCT)
                edges[deg[f->cls]++] = (uint32_t)k;
        }
    }
    /* deg[t] now ends t's edges; t's start is deg[t-1] (0 for the first) */
    for (size_t qi = 0; qi < qn; qi++) {
        uint32_t t = queue[qi];
        for (uint32_t e = t ? deg[t - 1] : 0; e < deg[t]; e++) {
            class_def *owner = &c->classes[edges[e]];
            if (!owner->has_data) {
                owner->has_data = true;
                queue[qn++] = edges[e];
            }
        }
    }
    for (size_t k = 0; k < nc && rc == 0; k++) {
        class_def *cd = &c->classes[k];
        cd->live0 = (uint32_t)c->nlive;
        for (uint32_t i = 0; i < cd->nfields; i++) {
            if (!field_has_data(c, &c->fields[cd->field0 + i]))
                continue;
            if (PFR_VEC_RESERVE(c->live, c->lcap, c->nlive + 1) < 0) {
                rc = pfr_jfr_fail(P, -ENOMEM, "out of memory for the metadata");
                break;
            }
            c->live[c->nlive++] = cd->field0 + i;
            cd->nlive++;
        }
    }
out:
    free(deg);
    free(edges);
    free(queue);
    return rc;
}

int pfr_jfr_live_pos(const jfr_chunk *c, int64_t cls, const char *name)
{
    if (cls < 0)
        return -1;
    const class_def *cd = &c->classes[cls];
    for (uint32_t i = 0; i < cd->nlive; i++)
        if (strcmp(c->arena + c->fields[c->live[cd->live0 + i]].name, name) == 0)
            return (int)i;
    return -1;
}

const field_def *pfr_jfr_live_field(const jfr_chunk *c, int64_t cls, int pos)
{
    return &c->fields[c->live[c->classes[cls].live0 + (uint32_t)pos]];
}

/* The pools pfr keeps, and the shape their fields must have to be read (else skipped). */
static void find_known(jfr_chunk *c)
{
    c->k_stack = pfr_jfr_class_find(c, "jdk.types.StackTrace");
    c->k_frame = pfr_jfr_class_find(c, "jdk.types.StackFrame");
    c->k_method = pfr_jfr_class_find(c, "jdk.types.Method");
    c->k_class = pfr_jfr_class_find(c, "java.lang.Class");
    c->k_symbol = pfr_jfr_class_find(c, "jdk.types.Symbol");
    c->k_string = pfr_jfr_class_find(c, "java.lang.String");
    c->f_trunc = pfr_jfr_field_find(c, (uint32_t)c->k_stack, "truncated");
    c->f_frames = pfr_jfr_live_pos(c, c->k_stack, "frames");
    if (c->f_frames >= 0) {
        const field_def *f = pfr_jfr_live_field(c, c->k_stack, c->f_frames);
        if (!f->array || f->cpool || (int64_t)f->cls != c->k_frame)
            c->f_frames = -1;
    }
    c->f_fmethod = pfr_jfr_field_find(c, (uint32_t)c->k_frame, "method");
    c->f_fline = pfr_jfr_field_find(c, (uint32_t)c->k_frame, "lineNumber");
    c->f_mtype = pfr_jfr_field_find(c, (uint32_t)c->k_method, "type");
    c->f_mname = pfr_jfr_field_find(c, (uint32_t)c->k_method, "name");
    c->f_cname = pfr_jfr_field_find(c, (uint32_t)c->k_class, "name");
    c->f_sstring = pfr_jfr_live_pos(c, c->k_symbol, "string");
    if (c->f_sstring >= 0) {
        const field_def *f = pfr_jfr_live_field(c, c->k_symbol, c->f_sstring);
        bool inline_str = !f->cpool && c->classes[f->cls].prim == P_STRING;
        bool pooled = f->cpool && (int64_t)f->cls == c->k_string;
        if (f->array || !(inline_str || pooled))
            c->f_sstring = -1;
    }
}

int pfr_jfr_parse_metadata(jp *P, jfr_chunk *c)
{
    if (c->md_off < JFR_HEADER_SIZE || c->md_off >= c->size)
        return pfr_jfr_fail(P, -EINVAL, "metadata offset %llu outside the chunk of %zu bytes",
                            (unsigned long long)c->md_off, c->size);
    rd r = {c->base + c->md_off, c->base + c->size};
    uint64_t size, type, v, nstr;
    int rc = pfr_jfr_rd_varint(P, &r, &size);
    if (rc < 0 || (rc = pfr_jfr_rd_varint(P, &r, &type)) < 0)
        return rc;
    if (type != 0)
        return pfr_jfr_fail(P, -EINVAL, "metadata offset points at a record of type %llu",
                            (unsigned long long)type);
    if (size < (uint64_t)(r.p - (c->base + c->md_off)) || size > c->size - c->md_off)
        return pfr_jfr_fail(P, -EINVAL, "metadata record of size %llu outside the chunk",
                            (unsigned long long)size);
    r.end = c->base + c->md_off + size;
    for (int i = 0; i < 3 && rc == 0; i++) /* start, duration, metadata id */
        rc = pfr_jfr_rd_varint(P, &r, &v);
    if (rc < 0 || (rc = pfr_jfr_rd_count(P, &r, 1, "metadata strings", &nstr)) < 0)
        return rc;
    uint32_t *off = malloc((nstr ? nstr : 1) * sizeof(*off));
    uint8_t *tag = malloc(nstr ? nstr : 1);
    if (!off || !tag)
        rc = pfr_jfr_fail(P, -ENOMEM, "out of memory for the metadata");
    for (uint64_t i = 0; i < nstr && rc == 0; i++) {
        sref s;
        rc = pfr_jfr_read_string(P, c, &r, &s);
        /* a pool reference means nothing here (the pools need the metadata): "" */
        off[i] = s.kind == S_ARENA ? (uint32_t)s.v : 0;
    }
    for (uint64_t i = 0; i < nstr && rc == 0; i++)
        tag[i] = tag_of(c->arena + off[i]);
    meta_strs ms = {off, tag, (size_t)nstr};
    if (rc == 0)
        rc = parse_element(P, c, &r, &ms, E_TOP, 0);
    free(off);
    free(tag);
    if (rc == 0)
        rc = resolve_types(P, c);
    if (rc == 0)
        rc = compute_layout(P, c);
    if (rc == 0) {
        c->pool_n = calloc(c->nclasses ? c->nclasses : 1, sizeof(*c->pool_n));
        if (!c->pool_n)
            rc = pfr_jfr_fail(P, -ENOMEM, "out of memory for the metadata");
    }
    if (rc == 0)
        find_known(c);
    return rc;
}
