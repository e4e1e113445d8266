/* JSON renderer: metadata, package colours and the nested flame tree. */
#include "pfr_buf.h"
#include "pfr_diff.h"
#include "pfr_names.h"
#include "pfr_utf8.h"
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

json_t *pfr_json_text(const char *s)
{
    int err;
    char *fixed = pfr_name_json(s, &err);
    if (err)
        return NULL;
    json_t *j = json_string(fixed ? fixed : s);
    free(fixed);
    return j;
}

int pfr_json_set_text_key(json_t *obj, const char *key, json_t *value)
{
    int err;
    char *fixed = pfr_name_json(key, &err);
    int rc = err ? -1 : json_object_set_new(obj, fixed ? fixed : key, value);
    if (err)
        json_decref(value);
    free(fixed);
    return rc;
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
    int err;
    char *fixed = pfr_name_json(pkg, &err); /* object keys must be UTF-8 too */
    if (err)
        return err;
    const char *key = fixed ? fixed : pkg;
    json_t *idx = json_object_get(c->package_idx, key);
    int64_t i = idx ? json_integer_value(idx) : (int64_t)json_array_size(c->packages);
    if (!idx) {
        pfr_package_color(pkg, module, color);
        if (json_object_set_new(c->package_idx, key, json_integer(i)) ||
            json_array_append_new(c->packages,
                                  json_pack("{s:s, s:s}", "name", key, "color", color)))
            i = -ENOMEM;
    }
    free(fixed);
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
    int bad = json_object_set_new(obj, "name", pfr_json_text(pfr_tree_str(t, n->name)));
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

/* The caller's meta object's fields into doc; non-zero if meta_json is not a JSON object. */
static int merge_meta(json_t *doc, const char *meta_json)
{
    json_error_t jerr;
    json_t *meta = json_loads(meta_json, 0, &jerr);
    int bad = !meta || json_object_update(doc, meta);
    json_decref(meta);
    return bad;
}

/* The document's fields before "packages" and "root" (both writers); non-zero on failure. */
static int set_head(json_t *doc, const pfr_tree *t, const pfr_render_opts *o, double total)
{
    const pfr_tree_node *root = pfr_tree_node_at(t, 0);
    double n0 = o->norm[0] ? o->norm[0] : 1, n1 = o->norm[1] ? o->norm[1] : 1;
    int bad = json_object_set_new(doc, "kind", json_string(o->diff ? "diff" : "flame"));
    bad |= json_object_set_new(doc, "unit", pfr_json_text(o->unit ? o->unit : ""));
    bad |= json_object_set_new(doc, "per_second", json_boolean(o->diff));
    bad |= json_object_set_new(doc, "title", pfr_json_text(o->title ? o->title : "Flame graph"));
    bad |= json_object_set_new(doc, "subtitle", pfr_json_text(o->subtitle ? o->subtitle : ""));
    bad |= json_object_set_new(doc, "total", number(total));
    if (o->diff) {
        bad |= json_object_set_new(doc, "base_total", number(root->total[0] * n0));
        bad |= json_object_set_new(doc, "comp_total", number(root->total[1] * n1));
    }
    bad |= json_object_set_new(doc, "nodes", json_integer((json_int_t)pfr_tree_size(t)));
    return bad;
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
    if (meta_json && merge_meta(doc, meta_json)) {
        rc = -EINVAL;
        goto out;
    }
    rc = pfr_tree_walk(t, json_visit, &c);
    if (rc < 0)
        goto out;
    int bad = set_head(doc, t, o, total);
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

/* ---- the same document, written directly ----
 * A day's flame graph has tens of thousands of nodes; building a jansson object per node and
 * dumping them took longer than building the tree. The nodes are written here as jansson would
 * dump them (keys in the same order, strings escaped the same way, integers as %lld, reals through
 * jansson itself); the rest of the document is jansson's. */
/* The sticky allocation error of b as an errno. */
static int wb_err(const pfr_buf *b)
{
    return b->oom ? -ENOMEM : 0;
}

#define WB_LIT(b, s) pfr_buf_put(b, s, sizeof(s) - 1)

/* A JSON string as jansson's dump writes it (no JSON_ENSURE_ASCII) for pfr_json_text(str): the
 * name's JSON form (pfr_names.h), valid UTF-8. */
static int wb_str(pfr_buf *b, const char *name, bool escape_slash)
{
    int err;
    char *printed = pfr_name_json(name, &err);
    if (err)
        return err;
    const char *str = printed ? printed : name;
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    if (pfr_buf_reserve(b, n + 2) < 0) {
        free(printed);
        return -ENOMEM;
    }
    pfr_buf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\' &&
               !(escape_slash && s[run] == '/'))
            run++;
        pfr_buf_put(b, str + i, run - i);
        i = run;
        if (i == n)
            break;
        int32_t cp = 0;
        size_t len = pfr_utf8_seq(s + i, n - i, &cp);
        if (cp >= 0x80) {
            pfr_buf_put(b, str + i, len);
        } else {
            char seq[8];
            const char *text = seq;
            switch (cp) {
            case '\\':
                text = "\\\\";
                break;
            case '"':
                text = "\\\"";
                break;
            case '\b':
                text = "\\b";
                break;
            case '\f':
                text = "\\f";
                break;
            case '\n':
                text = "\\n";
                break;
            case '\r':
                text = "\\r";
                break;
            case '\t':
                text = "\\t";
                break;
            case '/':
                text = "\\/";
                break;
            default:
                snprintf(seq, sizeof(seq), "\\u%04X", (unsigned)cp);
            }
            pfr_buf_put(b, text, strlen(text));
        }
        i += len ? len : 1; /* len 0 cannot be: the JSON form is UTF-8 */
    }
    free(printed);
    WB_LIT(b, "\"");
    return wb_err(b);
}

static void wb_int(pfr_buf *b, long long v)
{
    char num[32];
    int n = snprintf(num, sizeof(num), "%lld", v);
    pfr_buf_put(b, num, (size_t)n);
}

/* A real as jansson dumps it with flags' precision; -ENOMEM for what json_real refuses. */
static int wb_real(pfr_buf *b, double v, size_t flags)
{
    json_t *r = json_real(v);
    char num[64];
    size_t n = r ? json_dumpb(r, num, sizeof(num), flags | JSON_ENCODE_ANY) : 0;
    json_decref(r);
    if (!n || n > sizeof(num))
        return -ENOMEM;
    pfr_buf_put(b, num, n);
    return wb_err(b);
}

/* As number(): integers stay integers. */
static int wb_number(pfr_buf *b, double v, size_t flags)
{
    if (v == floor(v) && fabs(v) < 9.0e15) {
        wb_int(b, (long long)v);
        return wb_err(b);
    }
    return wb_real(b, v, flags);
}

typedef struct write_ctx {
    const pfr_render_opts *o;
    size_t flags;
    double min_value;
    pfr_buf *b;
    uint32_t open;     /* nodes whose children array is open: the path to the current one */
    bool *has_child;   /* per depth: a child written already */
    uint32_t *pkg_mod; /* per name string: the module of the cached package, or NONE */
    int64_t *pkg_idx;
    json_t *packages, *package_idx;
    size_t cap;
} write_ctx;

static int64_t package_cached(write_ctx *w, const pfr_tree *t, const pfr_tree_node *n)
{
    if (w->pkg_mod[n->name] == n->module)
        return w->pkg_idx[n->name];
    json_ctx c = {.packages = w->packages, .package_idx = w->package_idx};
    int64_t i = package_index(&c, t, n);
    if (i >= 0) {
        w->pkg_mod[n->name] = n->module;
        w->pkg_idx[n->name] = i;
    }
    return i;
}

static int write_visit(const pfr_tree *t, uint32_t id, int *skip, void *vctx)
{
    write_ctx *w = vctx;
    pfr_buf *b = w->b;
    const pfr_tree_node *n = pfr_tree_node_at(t, id);
    if (id != 0 && pfr_render_node_width(n, w->o) < w->min_value) {
        *skip = 1;
        return 0;
    }
    if (n->depth + 1 >= w->cap) {
        size_t cap = (n->depth + 1) * 2 + 16;
        bool *h = realloc(w->has_child, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        w->has_child = h;
        w->cap = cap;
    }
    for (; w->open > n->depth; w->open--)
        WB_LIT(b, "]}");
    if (id != 0) {
        if (w->has_child[n->depth - 1])
            WB_LIT(b, ",");
        w->has_child[n->depth - 1] = true;
    }
    int64_t pkg = package_cached(w, t, n);
    if (pkg < 0)
        return (int)pkg;
    WB_LIT(b, "{\"name\":");
    int rc = wb_str(b, pfr_tree_str(t, n->name), w->flags & JSON_ESCAPE_SLASH);
    if (rc)
        return rc;
    WB_LIT(b, ",\"package\":");
    wb_int(b, pkg);
    const pfr_render_opts *o = w->o;
    if (!o->diff) {
        double k = o->norm[0] ? o->norm[0] : 1;
        WB_LIT(b, ",\"value\":");
        rc = wb_number(b, n->total[0] * k, w->flags);
        WB_LIT(b, ",\"self\":");
        rc = rc ? rc : wb_number(b, n->self[0] * k, w->flags);
    } else {
        double k0 = o->norm[0] ? o->norm[0] : 1, k1 = o->norm[1] ? o->norm[1] : 1;
        double bt = n->total[0] * k0, ct = n->total[1] * k1;
        double bs = n->self[0] * k0, cs = n->self[1] * k1;
        double change = pfr_diff_change(bt, ct);
        char color[8];
        pfr_diff_color(change, color);
        WB_LIT(b, ",\"value\":");
        rc = wb_number(b, pfr_diff_width(bt, ct), w->flags);
        WB_LIT(b, ",\"self\":");
        rc = rc ? rc : wb_number(b, pfr_diff_width(bs, cs), w->flags);
        WB_LIT(b, ",\"base\":");
        rc = rc ? rc : wb_number(b, bt, w->flags);
        WB_LIT(b, ",\"comp\":");
        rc = rc ? rc : wb_number(b, ct, w->flags);
        WB_LIT(b, ",\"base_self\":");
        rc = rc ? rc : wb_number(b, bs, w->flags);
        WB_LIT(b, ",\"comp_self\":");
        rc = rc ? rc : wb_number(b, cs, w->flags);
        WB_LIT(b, ",\"change\":");
        rc = rc ? rc : wb_real(b, change, w->flags);
        WB_LIT(b, ",\"color\":");
        rc = rc ? rc : wb_str(b, color, w->flags & JSON_ESCAPE_SLASH);
    }
    if (rc)
        return rc;
    WB_LIT(b, ",\"children\":[");
    w->has_child[n->depth] = false;
    w->open = n->depth + 1;
    return wb_err(b);
}

int pfr_render_json_text(const pfr_tree *t, const pfr_render_opts *o, const char *meta_json,
                         double min_width, size_t flags, char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    pfr_render_opts def = {0};
    if (!o)
        o = &def;
    const pfr_tree_node *root = pfr_tree_node_at(t, 0);
    double total = pfr_render_node_width(root, o);
    size_t nstrs = pfr_tree_num_strs(t);
    pfr_buf b = {0};
    pfr_buf_reserve(&b, 1 << 16); /* a failure shows as oom at the end */
    write_ctx w = {.o = o,
                   .flags = flags,
                   .min_value = min_width > 0 ? total * min_width : 0,
                   .b = &b,
                   .pkg_mod = malloc((nstrs + 1) * sizeof(*w.pkg_mod)),
                   .pkg_idx = malloc((nstrs + 1) * sizeof(*w.pkg_idx)),
                   .packages = json_array(),
                   .package_idx = json_object()};
    json_t *doc = json_object();
    char *head = NULL;
    int rc = -ENOMEM;
    if (!w.pkg_mod || !w.pkg_idx || !w.packages || !w.package_idx || !doc)
        goto out;
    memset(w.pkg_mod, 0xff, (nstrs + 1) * sizeof(*w.pkg_mod));
    if (meta_json && merge_meta(doc, meta_json)) {
        rc = -EINVAL;
        goto out;
    }
    rc = pfr_tree_walk(t, write_visit, &w);
    for (; rc == 0 && w.open > 0; w.open--)
        WB_LIT(&b, "]}");
    if (rc == 0)
        rc = wb_err(&b);
    if (rc < 0)
        goto out;
    int bad = set_head(doc, t, o, total);
    bad |= json_object_set_new(doc, "packages", w.packages);
    w.packages = NULL;
    rc = bad ? -ENOMEM : 0;
    /* "root" comes last: the head is the document without it, then the nodes. A meta object
     * that names "root" would put it elsewhere: that (never seen) case takes jansson's way. */
    if (rc == 0 && json_object_get(doc, "root"))
        rc = -EEXIST;
    if (rc == 0 && !(head = json_dumps(doc, flags)))
        rc = -ENOMEM;
    if (rc == 0) {
        /* head less its '}', then ,"root":<nodes>} */
        size_t hl = strlen(head), len = hl - 1 + 8 + b.len + 1;
        char *text = hl >= 2 && head[hl - 1] == '}' ? malloc(len + 1) : NULL;
        if (!text) {
            rc = -ENOMEM;
        } else {
            memcpy(text, head, hl - 1);
            size_t pos = hl - 1;
            const char *sep = hl > 2 ? ",\"root\":" : "\"root\":";
            memcpy(text + pos, sep, strlen(sep));
            pos += strlen(sep);
            memcpy(text + pos, b.data, b.len);
            pos += b.len;
            text[pos++] = '}';
            text[pos] = '\0';
            *out = text;
            *outlen = pos;
        }
    }
out:
    free(head);
    json_decref(doc);
    json_decref(w.packages);
    json_decref(w.package_idx);
    free(w.pkg_mod);
    free(w.pkg_idx);
    free(w.has_child);
    pfr_buf_free(&b);
    if (rc == -EEXIST) {
        json_t *d;
        rc = pfr_render_json_doc(t, o, meta_json, min_width, &d);
        if (rc == 0) {
            *out = json_dumps(d, flags);
            *outlen = *out ? strlen(*out) : 0;
            rc = *out ? 0 : -ENOMEM;
            json_decref(d);
        }
    }
    return rc;
}

int pfr_render_json_write(FILE *out, const pfr_tree *t, const pfr_render_opts *o,
                          const char *meta_json, double min_width, size_t flags)
{
    char *text;
    size_t len;
    int rc = pfr_render_json_text(t, o, meta_json, min_width, flags, &text, &len);
    if (rc == 0 && fwrite(text, 1, len, out) != len)
        rc = -EIO;
    free(text);
    return rc;
}

int pfr_render_json(FILE *out, const pfr_tree *t, const pfr_render_opts *o, const char *meta_json)
{
    int rc = pfr_render_json_write(out, t, o, meta_json, 0, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (rc == 0 && (fputc('\n', out) == EOF || ferror(out)))
        rc = -EIO;
    return rc;
}
