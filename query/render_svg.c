/* SVG renderer: frames laid out here (so the picture shows without a script), plus an inline
 * script for tooltips, click-to-zoom and search. Root at the bottom. */
#include "pfr_diff.h"
#include "pfr_names.h"
#include "render_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_H    16
#define TOP_PAD    66
#define BOTTOM_PAD 28
#define CHAR_W     7.0 /* average glyph width of the 12px font; only used to shorten labels */

void pfr_render_xml_escape(FILE *out, const char *text)
{
    /* XML must be well-formed UTF-8: a browser refuses the whole picture otherwise. Names are
     * shown in their JSON form (pfr_names.h), as the page and the JSON show them. */
    int err;
    char *fixed = pfr_name_json(text, &err);
    const char *s = fixed ? fixed : text;
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '&':
            fputs("&amp;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            /* control characters are not allowed in XML 1.0; a newline would split the
             * tooltip's first line, the frame's name */
            if ((unsigned char)*s < 0x20 && *s != '\t')
                fputc('?', out);
            else
                fputc(*s, out);
        }
    }
    free(fixed);
}

typedef struct svg_ctx {
    FILE *out;
    const pfr_render_opts *o;
    double total, min_value, width;
    uint32_t max_depth; /* deepest visible frame */
    double *cursor;     /* next x (in value units) per depth */
    size_t cap;
    int pass; /* 0: measure depth, 1: write */
    int height;
} svg_ctx;

static int reserve_depth(svg_ctx *c, size_t d)
{
    if (d + 2 <= c->cap)
        return 0;
    size_t cap = (d + 2) * 2;
    double *p = realloc(c->cursor, cap * sizeof(*p));
    if (!p)
        return -ENOMEM;
    c->cursor = p;
    c->cap = cap;
    return 0;
}

/* Label that fits into w pixels: the name, or its start and "..", or nothing. */
static void write_label(FILE *out, const char *name, double wpx)
{
    size_t fit = wpx > 6 ? (size_t)((wpx - 6) / CHAR_W) : 0;
    size_t len = strlen(name);
    if (fit < 3)
        return;
    if (len <= fit) {
        pfr_render_xml_escape(out, name);
        return;
    }
    char buf[512];
    size_t n = fit - 2 < sizeof(buf) - 3 ? fit - 2 : sizeof(buf) - 3;
    /* do not cut a UTF-8 sequence in the middle */
    while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80)
        n--;
    memcpy(buf, name, n);
    memcpy(buf + n, "..", 3);
    pfr_render_xml_escape(out, buf);
}

static void write_tooltip(svg_ctx *c, const pfr_tree *t, const pfr_tree_node *n)
{
    const pfr_render_opts *o = c->o;
    char a[40], b[40], d[40];
    pfr_render_xml_escape(c->out, pfr_tree_str(t, n->name));
    double k0 = o->norm[0] ? o->norm[0] : 1, k1 = o->norm[1] ? o->norm[1] : 1;
    if (!o->diff) {
        double v = n->total[0] * k0, s = n->self[0] * k0;
        fprintf(c->out, "\n%s (%.2f%%), self %s", pfr_format_value(v, o->unit, false, a, 40),
                c->total > 0 ? 100 * v / c->total : 0, pfr_format_value(s, o->unit, false, b, 40));
        return;
    }
    double bv = n->total[0] * k0, cv = n->total[1] * k1;
    fprintf(c->out, "\nbaseline %s, comparison %s, change %+.1f%%\nself %s -> ",
            pfr_format_value(bv, o->unit, true, a, 40), pfr_format_value(cv, o->unit, true, b, 40),
            100 * pfr_diff_change(bv, cv), pfr_format_value(n->self[0] * k0, o->unit, true, d, 40));
    fputs(pfr_format_value(n->self[1] * k1, o->unit, true, a, 40), c->out);
}

static void frame_color(svg_ctx *c, const pfr_tree *t, const pfr_tree_node *n, char color[8])
{
    const pfr_render_opts *o = c->o;
    if (o->diff) {
        double k0 = o->norm[0] ? o->norm[0] : 1, k1 = o->norm[1] ? o->norm[1] : 1;
        pfr_diff_color(pfr_diff_change(n->total[0] * k0, n->total[1] * k1), color);
        return;
    }
    char pkg[512];
    const char *module = pfr_tree_str(t, n->module);
    pfr_frame_package(pfr_tree_str(t, n->name), module, pkg, sizeof(pkg));
    pfr_package_color(pkg, module, color);
}

static int svg_visit(const pfr_tree *t, uint32_t id, int *skip, void *vctx)
{
    svg_ctx *c = vctx;
    const pfr_tree_node *n = pfr_tree_node_at(t, id);
    double w = pfr_render_node_width(n, c->o);
    if (id != 0 && (w < c->min_value || w <= 0)) {
        *skip = 1;
        return 0;
    }
    if (reserve_depth(c, n->depth) < 0)
        return -ENOMEM;
    if (c->pass == 0) {
        if (n->depth > c->max_depth)
            c->max_depth = n->depth;
        return 0;
    }
    double x = id == 0 ? 0 : c->cursor[n->depth];
    c->cursor[n->depth] = x + w;
    c->cursor[n->depth + 1] = x;
    double fx = c->total > 0 ? x / c->total : 0, fw = c->total > 0 ? w / c->total : 1;
    double px = fx * c->width, pw = fw * c->width;
    int y = c->height - BOTTOM_PAD - (int)(n->depth + 1) * FRAME_H;
    char color[8];
    frame_color(c, t, n, color);
    fprintf(c->out, "<g class=\"f\" data-x=\"%.9g\" data-w=\"%.9g\" data-d=\"%u\"><title>", fx, fw,
            n->depth);
    write_tooltip(c, t, n);
    fprintf(c->out,
            "</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>"
            "<text x=\"%.2f\" y=\"%d\">",
            px, y, pw > 0.5 ? pw - 0.5 : pw, FRAME_H - 1, color, px + 3, y + FRAME_H - 4);
    write_label(c->out, pfr_tree_str(t, n->name), pw);
    fputs("</text></g>\n", c->out);
    return 0;
}

static void write_header(svg_ctx *c)
{
    const pfr_render_opts *o = c->o;
    FILE *out = c->out;
    int w = (int)c->width;
    fprintf(out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
            "data-unit=\"",
            w, c->height, w, c->height);
    pfr_render_xml_escape(out, o->unit ? o->unit : "");
    fprintf(out, "\" data-diff=\"%d\" data-total=\"%.9g\">\n", o->diff ? 1 : 0, c->total);
    fputs("<style>\n"
          "text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}\n"
          ".f text{pointer-events:none}\n"
          ".f:hover rect{stroke:#222;stroke-width:0.6}\n"
          ".f.anc rect{opacity:0.55}\n"
          ".f.hide{display:none}\n"
          ".f rect.match{fill:#b040e0}\n"
          "#title{font-size:17px}\n"
          "#sub{font-size:12px;fill:#444}\n"
          ".btn{cursor:pointer;fill:#0645ad}\n"
          "</style>\n",
          out);
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fbfbf6\"/>\n", w,
            c->height);
    fprintf(out, "<text id=\"title\" x=\"%d\" y=\"22\" text-anchor=\"middle\">", w / 2);
    pfr_render_xml_escape(out, o->title ? o->title : "Flame graph");
    fprintf(out, "</text>\n<text id=\"sub\" x=\"%d\" y=\"40\" text-anchor=\"middle\">", w / 2);
    pfr_render_xml_escape(out, o->subtitle ? o->subtitle : "");
    fputs("</text>\n<text id=\"reset\" class=\"btn\" x=\"10\" y=\"58\" "
          "style=\"display:none\">Reset zoom</text>\n",
          out);
    fprintf(out,
            "<foreignObject x=\"%d\" y=\"44\" width=\"250\" height=\"22\">"
            "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
            "placeholder=\"Search (regex)\" style=\"width:240px;font-size:12px\" value=\"",
            w - 260);
    pfr_render_xml_escape(out, o->search ? o->search : "");
    fputs("\"/></foreignObject>\n", out);
    fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"58\" text-anchor=\"end\"></text>\n", w - 270);
    fprintf(out, "<text id=\"details\" x=\"10\" y=\"%d\"> </text>\n", c->height - 9);
    fputs("<g id=\"frames\">\n", out);
}

int pfr_render_svg(FILE *out, const pfr_tree *t, const pfr_render_opts *o)
{
    pfr_render_opts def = {0};
    if (!o)
        o = &def;
    svg_ctx c = {.out = out, .o = o, .width = o->width > 0 ? o->width : 1200};
    c.total = pfr_render_node_width(pfr_tree_node_at(t, 0), o);
    double mw = o->min_width == 0 ? 0.0005 : o->min_width;
    c.min_value = mw > 0 ? c.total * mw : 0;
    int rc = pfr_tree_walk(t, svg_visit, &c);
    if (rc == 0) {
        c.height = TOP_PAD + (int)(c.max_depth + 1) * FRAME_H + BOTTOM_PAD;
        write_header(&c);
        c.pass = 1;
        rc = pfr_tree_walk(t, svg_visit, &c);
    }
    free(c.cursor);
    if (rc < 0)
        return rc;
    fputs("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n", out);
    fputs(pfr_asset_svg_js, out);
    fputs("\n]]></script>\n</svg>\n", out);
    return ferror(out) ? -EIO : 0;
}
