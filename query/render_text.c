/* Text renderers: folded stacks and the top tables. */
#include "pfr_diff.h"
#include "pfr_render.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct folded_ctx {
    FILE *out;
    double norm;
} folded_ctx;

static int folded_stack(const pfr_tree *t, const uint32_t *names, size_t n, double value,
                        void *vctx)
{
    folded_ctx *c = vctx;
    long long v = llround(value * c->norm);
    if (v == 0)
        return 0;
    if (n == 0)
        fputs("[no stack]", c->out);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(';', c->out);
        pfr_text_put(c->out, pfr_tree_str(t, names[i]), PFR_TEXT_SEMICOLON);
    }
    fprintf(c->out, " %lld\n", v);
    return 0;
}

int pfr_render_folded(FILE *out, const pfr_tree *t, const pfr_render_opts *o)
{
    folded_ctx c = {.out = out, .norm = o && o->norm[0] ? o->norm[0] : 1};
    int rc = pfr_tree_walk_stacks(t, 0, folded_stack, &c);
    if (rc == 0 && ferror(out))
        rc = -EIO;
    return rc;
}

static double pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0;
}

static int top_flame(FILE *out, const pfr_tree *t, const pfr_render_opts *o)
{
    pfr_tree_func *f;
    size_t n;
    int rc = pfr_tree_functions(t, &f, &n);
    if (rc < 0)
        return rc;
    qsort(f, n, sizeof(*f), pfr_tree_func_cmp_self);
    double norm = o->norm[0] ? o->norm[0] : 1;
    double total = pfr_tree_node_at(t, 0)->total[0] * norm;
    size_t limit = o->limit ? o->limit : 30;
    char a[32], b[32], tot[32];
    fprintf(out, "total %s, %zu functions\n", pfr_format_value(total, o->unit, false, tot, 32), n);
    fprintf(out, "%12s %7s %12s %7s  %s\n", "SELF", "SELF%", "TOTAL", "TOTAL%", "FUNCTION");
    for (size_t i = 0; i < n && i < limit; i++) {
        double s = f[i].self[0] * norm, tt = f[i].total[0] * norm;
        fprintf(out, "%12s %6.2f%% %12s %6.2f%%  ", pfr_format_value(s, o->unit, false, a, 32),
                pct(s, total), pfr_format_value(tt, o->unit, false, b, 32), pct(tt, total));
        pfr_text_put(out, pfr_tree_str(t, f[i].name), 0);
        fputc('\n', out);
    }
    free(f);
    return 0;
}

static void fmt_change(double b, double c, char *buf, size_t len)
{
    if (b == 0 && c == 0)
        snprintf(buf, len, "=");
    else if (b == 0)
        snprintf(buf, len, "new");
    else if (c == 0)
        snprintf(buf, len, "gone");
    else
        snprintf(buf, len, "%+.1f%%", 100.0 * (c - b) / b);
}

static int top_diff(FILE *out, const pfr_tree *t, const pfr_render_opts *o)
{
    pfr_diff_row *r;
    size_t n;
    double norm[2] = {o->norm[0] ? o->norm[0] : 1, o->norm[1] ? o->norm[1] : 1};
    int rc = pfr_diff_rows(t, norm, &r, &n);
    if (rc < 0)
        return rc;
    const pfr_tree_node *root = pfr_tree_node_at(t, 0);
    char a[32], b[32], d[32], ch[32], ta[32], tb[32];
    fprintf(out, "total %s -> %s (%s)\n",
            pfr_format_value(root->total[0] * norm[0], o->unit, true, a, 32),
            pfr_format_value(root->total[1] * norm[1], o->unit, true, b, 32),
            (fmt_change(root->total[0] * norm[0], root->total[1] * norm[1], ch, 32), ch));
    size_t limit = o->limit ? o->limit : 30, shown = 0;
    fprintf(out, "%14s %14s %14s %8s %14s %14s  %s\n", "SELF BASE", "SELF COMP", "SELF DELTA",
            "CHANGE", "TOTAL BASE", "TOTAL COMP", "FUNCTION");
    for (size_t i = 0; i < n && shown < limit; i++) {
        if (r[i].base_self == r[i].comp_self && r[i].base_total == r[i].comp_total)
            continue;
        fmt_change(r[i].base_self, r[i].comp_self, ch, sizeof(ch));
        fprintf(out, "%14s %14s %14s %8s %14s %14s  ",
                pfr_format_value(r[i].base_self, o->unit, true, a, 32),
                pfr_format_value(r[i].comp_self, o->unit, true, b, 32),
                pfr_format_value(r[i].comp_self - r[i].base_self, o->unit, true, d, 32), ch,
                pfr_format_value(r[i].base_total, o->unit, true, ta, 32),
                pfr_format_value(r[i].comp_total, o->unit, true, tb, 32));
        pfr_text_put(out, pfr_tree_str(t, r[i].name), 0);
        fputc('\n', out);
        shown++;
    }
    if (!shown)
        fprintf(out, "no differences\n");
    free(r);
    return 0;
}

int pfr_render_top(FILE *out, const pfr_tree *t, const pfr_render_opts *o)
{
    pfr_render_opts def = {0};
    if (!o)
        o = &def;
    if (o->title || o->subtitle) {
        fputs("# ", out);
        pfr_text_put(out, o->title ? o->title : "", 0);
        fputs(o->title && o->subtitle ? " — " : "", out);
        pfr_text_put(out, o->subtitle ? o->subtitle : "", 0);
        fputc('\n', out);
    }
    int rc = o->diff ? top_diff(out, t, o) : top_flame(out, t, o);
    if (rc == 0 && ferror(out))
        rc = -EIO;
    return rc;
}
