/* The output formats of the query tool: one row per format (pfr_formats.h). */
#include "pfr_formats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int render_folded(FILE *out, const pfr_output_data *d)
{
    return pfr_render_folded(out, d->tree, d->opts);
}

static int render_top(FILE *out, const pfr_output_data *d)
{
    return pfr_render_top(out, d->tree, d->opts);
}

static int render_svg(FILE *out, const pfr_output_data *d)
{
    return pfr_render_svg(out, d->tree, d->opts);
}

static int render_html(FILE *out, const pfr_output_data *d)
{
    return pfr_render_html(out, d->tree, d->opts, d->meta);
}

static int render_json(FILE *out, const pfr_output_data *d)
{
    switch (d->input) {
    case PFR_OUTPUT_TIMELINE:
        return pfr_timeline_render_json(out, d->timeline, d->plan);
    case PFR_OUTPUT_LS:
        return pfr_ls_render_json(out, d->ls);
    default:
        return pfr_render_json(out, d->tree, d->opts, d->meta);
    }
}

static int render_text(FILE *out, const pfr_output_data *d)
{
    if (d->input == PFR_OUTPUT_LS)
        return pfr_ls_render_text(out, d->ls, d->values);
    return pfr_timeline_render_text(out, d->timeline, d->plan, d->width);
}

static int render_pprof(FILE *out, const pfr_output_data *d)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = pfr_profile_encode(d->profile, true, &buf, &len);
    if (rc < 0)
        return rc;
    rc = fwrite(buf, 1, len, out) == len ? 0 : -EIO;
    free(buf);
    return rc;
}

#define EXTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The order is the order of --help and of the error naming the formats. */
static const pfr_output_format formats[] = {
    {.name = "folded",
     .extensions = EXTS(".folded"),
     .inputs = PFR_OUTPUT_TREE,
     .flags = PFR_OUTPUT_STACKS,
     .help = "collapsed stacks for flamegraph.pl, speedscope, inferno",
     .render = render_folded},
    {.name = "pprof",
     .extensions = EXTS(".pb.gz", ".pprof", ".pgo", ".pb"),
     .inputs = PFR_OUTPUT_PROFILE,
     .flags = PFR_OUTPUT_BINARY,
     .help = "gzip'd, for go tool pprof and Go PGO",
     .render = render_pprof},
    {.name = "svg",
     .extensions = EXTS(".svg"),
     .inputs = PFR_OUTPUT_TREE | PFR_OUTPUT_DIFF,
     .min_share = 0.0005,
     .help = "a picture with zoom and search",
     .render = render_svg},
    {.name = "html",
     .extensions = EXTS(".html", ".htm"),
     .inputs = PFR_OUTPUT_TREE | PFR_OUTPUT_DIFF,
     .flags = PFR_OUTPUT_META,
     .min_share = 0.0001,
     .help = "one page that works offline",
     .render = render_html},
    {.name = "json",
     .extensions = EXTS(".json"),
     .inputs = PFR_OUTPUT_TREE | PFR_OUTPUT_DIFF | PFR_OUTPUT_TIMELINE | PFR_OUTPUT_LS,
     .flags = PFR_OUTPUT_META,
     .min_share = 0.0001,
     .help = "for scripts, as docs/query.md describes",
     .render = render_json},
    {.name = "top",
     .extensions = EXTS(".txt"),
     .inputs = PFR_OUTPUT_TREE | PFR_OUTPUT_DIFF,
     .flags = PFR_OUTPUT_STACKS,
     .help = "the heaviest functions (diff: the largest changes)",
     .render = render_top},
    {.name = "text",
     .inputs = PFR_OUTPUT_TIMELINE | PFR_OUTPUT_LS,
     .help = "for the terminal",
     .render = render_text},
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

const pfr_output_format *pfr_output_format_find(const char *name, unsigned inputs)
{
    for (size_t i = 0; name && i < NFORMATS; i++)
        if ((formats[i].inputs & inputs) && strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

const pfr_output_format *pfr_output_format_for_path(const char *path, unsigned inputs)
{
    for (size_t i = 0; path && i < NFORMATS; i++)
        for (const char *const *e = formats[i].extensions; e && *e; e++)
            if ((formats[i].inputs & inputs) && ends_with(path, *e))
                return &formats[i];
    return NULL;
}

char *pfr_output_format_names(unsigned inputs, char *buf, size_t len)
{
    size_t n = 0, k = 0, used = 0;
    for (size_t i = 0; i < NFORMATS; i++)
        n += (formats[i].inputs & inputs) != 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < NFORMATS && used < len; i++) {
        if (!(formats[i].inputs & inputs))
            continue;
        const char *sep = k == 0 ? "" : k + 1 == n ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, formats[i].name);
        used += w > 0 ? (size_t)w : 0;
        k++;
    }
    return buf;
}

void pfr_output_format_help(FILE *out, unsigned inputs, const char *indent, bool extensions)
{
    for (size_t i = 0; i < NFORMATS; i++) {
        const pfr_output_format *f = &formats[i];
        if (!(f->inputs & inputs))
            continue;
        fprintf(out, "%s%-7s %s", indent, f->name, f->help);
        for (const char *const *e = f->extensions; extensions && e && *e; e++)
            fprintf(out, "%s*%s", e == f->extensions ? " (" : " ", *e);
        fputs(extensions && f->extensions ? ")\n" : "\n", out);
    }
}

double pfr_output_format_share(const pfr_output_format *fmt, double min_width)
{
    if (fmt->min_share == 0 || min_width < 0)
        return 0;
    return min_width > 0 ? min_width : fmt->min_share;
}
