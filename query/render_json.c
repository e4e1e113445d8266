/* JSON renderer: metadata, package colours and the nested flame tree. */
#include "pfr_diff.h"
#include "render_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double pfr_render_node_width(const pfr_tree_node *n, const pfr_render_opts *o)
{
    double n0 = o->norm[0] ? o->norm[0] : 1;
    if (!o->diff)
        return n->total[0] * n0;
    double n1 = o->norm[1] ? o->norm[1] : 1;
    return pfr_diff_width(n->total[0] * n0, n->total[1] * n1);
}

/* Integers stay integers in the output; rates are reals. */
static json_t *number(double v)
{
    if (v == floor(v) && fabs(v) < 9.0e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

typedef struct json_ctx {
    const pfr_render_opts *o;
    double min_value;
    json_t **kids; /* children array per depth */
    size_t cap;
    json_t *packages;    /* array of {name, color} */
    json_t *package_idx; /* package name -> index */
    json_t *root;
    int err;
} json_ctx;

static int64_t package_index(json_ctx *c, const pfr_tree *t, const pfr_tree_node *n)
{
    char pkg[512], color[8];
    const char *name = pfr_tree_str(t, n->name), *module = pfr_tree_str(t, n->module);
    pfr_frame_package(name, module, pkg, sizeof(pkg));
    json_t *idx = json_object_get(c->package_idx, pkg);
    if (idx)
        return json_integer_value(idx);
    int64_t i = (int64_t)json_array_size(c->packages);
    pfr_package_color(pkg, module, color);
    if (json_object_set_new(c->package_idx, pkg, json_integer(i)) ||
        json_array_append_new(c->packages, json_pack("{s:s, s:s}", "name", pkg, "color", color)))
        return -ENOMEM;
    return i;
}

static int set_values(json_t *obj, const pfr_tree_node *n, const pfr_render_opts *o)
{
    int bad = 0;
    if (!o->diff) {
        double k = o->norm[0] ? o->norm[0] : 1;
        bad |= json_object_set_new(obj, "value", number(n->total[0] * k));
        bad |= json_object_set_new(obj, "self", number(n->self[0] * k));
        return bad ? -ENOMEM : 0;
    }
    double k0 = o->norm[0] ? o->norm[0] : 1, k1 = o->norm[1] ? o->norm[1] : 1;
    double b = n->total[0] * k0, c = n->total[1] * k1;
    double bs = n->self[0] * k0, cs = n->self[1] * k1;
    bad |= json_object_set_new(obj, "value", number(pfr_diff_width(b, c)));
    bad |= json_object_set_new(obj, "self", number(pfr_diff_width(bs, cs)));
    bad |= json_object_set_new(obj, "base", number(b));
    bad |= json_object_set_new(obj, "comp", number(c));
    bad |= json_object_set_new(obj, "base_self", number(bs));
    bad |= json_object_set_new(obj, "comp_self", number(cs));
    double change = pfr_diff_change(b, c);
    char color[8];
    pfr_diff_color(change, color);
    bad |= json_object_set_new(obj, "change", json_real(change));
    bad |= json_object_set_new(obj, "color", json_string(color));
    return bad ? -ENOMEM : 0;
}

static int json_visit(const pfr_tree *t, uint32_t id, int *skip, void *vctx)
{
    json_ctx *c = vctx;
    const pfr_tree_node *n = pfr_tree_node_at(t, id);
    if (id != 0 && pfr_render_node_width(n, c->o) < c->min_value) {
        *skip = 1;
        return 0;
    }
    if (n->depth + 1 >= c->cap) {
        size_t cap = (n->depth + 1) * 2 + 16;
        json_t **k = realloc(c->kids, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        c->kids = k;
        c->cap = cap;
    }
    int64_t pkg = package_index(c, t, n);
    if (pkg < 0)
        return (int)pkg;
    json_t *obj = json_object(), *children = json_array();
    if (!obj || !children) {
        json_decref(obj);
        json_decref(children);
        return -ENOMEM;
    }
    int bad = json_object_set_new(obj, "name", json_string(pfr_tree_str(t, n->name)));
    bad |= json_object_set_new(obj, "package", json_integer(pkg));
    bad |= set_values(obj, n, c->o);
    bad |= json_object_set_new(obj, "children", children);
    if (id == 0)
        c->root = obj;
    else
        bad |= json_array_append_new(c->kids[n->depth - 1], obj);
    c->kids[n->depth] = children;
    if (bad) {
        if (id == 0) {
            json_decref(obj);
            c->root = NULL;
        }
        return -ENOMEM;
    }
    return 0;
}

int pfr_render_json_doc(const pfr_tree *t, const pfr_render_opts *o, const char *meta_json,
                        double min_width, json_t **out)
{
    json_ctx c = {.o = o};
    const pfr_tree_node *root = pfr_tree_node_at(t, 0);
    double total = pfr_render_node_width(root, o);
    c.min_value = min_width > 0 ? total * min_width : 0;
    c.packages = json_array();
    c.package_idx = json_object();
    json_t *doc = json_object();
    int rc = -ENOMEM;
    if (!c.packages || !c.package_idx || !doc)
        goto out;
    if (meta_json) {
        json_error_t jerr;
        json_t *meta = json_loads(meta_json, 0, &jerr);
        if (!meta || json_object_update(doc, meta)) {
            json_decref(meta);
            rc = -EINVAL;
            goto out;
        }
        json_decref(meta);
    }
    rc = pfr_tree_walk(t, json_visit, &c);
    if (rc < 0)
        goto out;
    double n0 = o->norm[0] ? o->norm[0] : 1, n1 = o->norm[1] ? o->norm[1] : 1;
    int bad = json_object_set_new(doc, "kind", json_string(o->diff ? "diff" : "flame"));
    bad |= json_object_set_new(doc, "unit", json_string(o->unit ? o->unit : ""));
    bad |= json_object_set_new(doc, "per_second", json_boolean(o->diff));
    bad |= json_object_set_new(doc, "title", json_string(o->title ? o->title : "Flame graph"));
    bad |= json_object_set_new(doc, "subtitle", json_string(o->subtitle ? o->subtitle : ""));
    bad |= json_object_set_new(doc, "total", number(total));
    if (o->diff) {
        bad |= json_object_set_new(doc, "base_total", number(root->total[0] * n0));
        bad |= json_object_set_new(doc, "comp_total", number(root->total[1] * n1));
    }
    bad |= json_object_set_new(doc, "nodes", json_integer((json_int_t)pfr_tree_size(t)));
    bad |= json_object_set_new(doc, "packages", c.packages);
    c.packages = NULL;
    bad |= json_object_set_new(doc, "root", c.root);
    c.root = NULL;
    rc = bad ? -ENOMEM : 0;
out:
    json_decref(c.packages);
    json_decref(c.package_idx);
    json_decref(c.root);
    free(c.kids);
    if (rc < 0) {
        json_decref(doc);
        return rc;
    }
    *out = doc;
    return 0;
}

int pfr_render_json(FILE *out, const pfr_tree *t, const pfr_render_opts *o, const char *meta_json)
{
    pfr_render_opts def = {0};
    json_t *doc;
    int rc = pfr_render_json_doc(t, o ? o : &def, meta_json, 0, &doc);
    if (rc < 0)
        return rc;
    rc = json_dumpf(doc, out, JSON_COMPACT | JSON_REAL_PRECISION(10)) ? -EIO : 0;
    json_decref(doc);
    if (rc == 0 && (fputc('\n', out) == EOF || ferror(out)))
        rc = -EIO;
    return rc;
}
