/* pfr_settings_doc: --help, the sample config file and the configuration reference, from rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_settings_int.h"
#include "pfr_units.h"

#define WIDTH        100 /* of --help and the sample file */
#define HELP_COLUMN  27  /* where --help's texts start */
#define NAME_MAX_LEN PFR_SETTINGS_NAME_MAX

/* Text wrapped at WIDTH from column col; every new line starts with indent spaces and lead
 * (written only before a word, so an empty comment line is "#", not "# "). '\n' breaks. */
static void wrap(FILE *out, const char *text, size_t col, size_t indent, const char *lead)
{
    size_t lead_len = strlen(lead);
    bool empty = true;
    for (const char *p = text; *p;) {
        if (*p == '\n') {
            if (empty && lead_len)
                fprintf(out, "%.*s", (int)(lead_len - (lead[lead_len - 1] == ' ')), lead);
            fprintf(out, "\n%*s", (int)indent, "");
            col = indent;
            empty = true;
            p++;
            if (!*p) /* a closing '\n' ends the text */
                return;
            continue;
        }
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (!empty && col + 1 + w > WIDTH) {
            fprintf(out, "\n%*s", (int)indent, "");
            col = indent;
            empty = true;
        }
        if (empty) {
            fputs(lead, out);
            col += lead_len;
        } else {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, w, out);
        col += w;
        empty = false;
        p += w;
    }
    if (empty && lead_len)
        fprintf(out, "%.*s", (int)(lead_len - (lead[lead_len - 1] == ' ')), lead);
    fputc('\n', out);
}

static const char *metavar(const pfr_setting *r)
{
    static const char *const names[] = {
        [PFR_SET_STRING] = "VALUE", [PFR_SET_BOOL] = "BOOL",    [PFR_SET_DURATION] = "DURATION",
        [PFR_SET_SIZE] = "SIZE",    [PFR_SET_COUNT] = "N",      [PFR_SET_ENUM] = "MODE",
        [PFR_SET_LIST] = "VALUE",   [PFR_SET_CUSTOM] = "VALUE",
    };
    return r->metavar ? r->metavar : names[r->type];
}

/* The default value as text (buf): .def, else the type's zero ("false", "0", the first
 * choice); "" for none (a string, a list) and for secrets. */
static void default_value(const pfr_setting *r, char *buf, size_t n)
{
    buf[0] = '\0';
    if ((r->flags & PFR_SETF_SECRET) || r->alias_of)
        return;
    if (r->def)
        snprintf(buf, n, "%s", r->def);
    else if (r->type == PFR_SET_BOOL)
        snprintf(buf, n, "false");
    else if (r->type == PFR_SET_COUNT || r->type == PFR_SET_SIZE || r->type == PFR_SET_DURATION)
        snprintf(buf, n, "0");
    else if (r->type == PFR_SET_ENUM && r->choices && r->choices[0])
        snprintf(buf, n, "%s", r->choices[0]);
}

/* The default as --help and the reference say it (buf): .def_doc (prose: false returned), else
 * the value (true returned if there is one). */
static bool default_text(const pfr_setting *r, char *buf, size_t n)
{
    if (r->def_doc && !(r->flags & PFR_SETF_SECRET) && !r->alias_of) {
        snprintf(buf, n, "%s", r->def_doc);
        return false;
    }
    default_value(r, buf, n);
    return buf[0] != '\0';
}

/* "200ms to 1h", "at least 1M", or "" (buf). */
static void bounds_text(const pfr_setting *r, char *buf, size_t n)
{
    char lo[48], hi[48];
    buf[0] = '\0';
    if (r->min == 0 && r->max == 0)
        return;
    bool dur = r->type == PFR_SET_DURATION, size = r->type == PFR_SET_SIZE;
    if (dur) {
        pfr_format_duration((int64_t)(r->min * 1e9 + 0.5), lo, sizeof(lo));
        pfr_format_duration((int64_t)(r->max * 1e9 + 0.5), hi, sizeof(hi));
    } else if (size) {
        pfr_format_size((uint64_t)r->min, lo, sizeof(lo));
        pfr_format_size((uint64_t)r->max, hi, sizeof(hi));
    } else {
        snprintf(lo, sizeof(lo), "%.0f", r->min);
        snprintf(hi, sizeof(hi), "%.0f", r->max);
    }
    if (r->max == 0)
        snprintf(buf, n, "at least %s", lo);
    else
        snprintf(buf, n, "%s to %s", lo, hi);
}

/* What an alias row without help says: "the same as --dwarf false". */
static void alias_help(const pfr_settings_group *g, const pfr_setting *r, char *buf, size_t n)
{
    const pfr_setting *t = pfr_settings_row_target(g, r);
    char f[NAME_MAX_LEN] = "";
    if (t && pfr_settings_row_flag(t, f, sizeof(f)))
        snprintf(buf, n, "the same as --%s %s", f, r->alias_value ? r->alias_value : metavar(t));
    else
        snprintf(buf, n, "another name of %s", r->alias_of);
}

static bool shown(const pfr_setting *r)
{
    return !(r->flags & PFR_SETF_HIDDEN);
}

/* ---- --help ---- */

static void help_row(const pfr_settings *s, const pfr_settings_group *g, const pfr_setting *r,
                     FILE *out)
{
    char f[NAME_MAX_LEN], env[256], def[256], bounds[128], text[1024];
    if (!pfr_settings_row_flag(r, f, sizeof(f)))
        return;
    int col = 0;
    if (r->short_opt)
        col += fprintf(out, "  -%c, --%s", r->short_opt, f);
    else
        col += fprintf(out, "  --%s", f);
    if (!(r->flags & PFR_SETF_NO_ARG))
        col += fprintf(out, " %s", metavar(r));
    if (col + 1 >= HELP_COLUMN) {
        fputc('\n', out);
        col = 0;
    }
    fprintf(out, "%*s", HELP_COLUMN - col, "");
    if (r->help)
        snprintf(text, sizeof(text), "%s", r->help);
    else
        alias_help(g, r, text, sizeof(text));
    bounds_text(r, bounds, sizeof(bounds));
    bool has_def = default_text(r, def, sizeof(def)) || def[0];
    bool has_env = pfr_settings_row_env(s, r, env, sizeof(env));
    if (bounds[0] || has_def || has_env) {
        size_t len = strlen(text);
        const char *sep = " (";
        if (bounds[0])
            len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s", sep, bounds),
                sep = "; ";
        if (has_def && len < sizeof(text))
            len += (size_t)snprintf(text + len, sizeof(text) - len, "%sdefault %s", sep, def),
                sep = "; ";
        if (has_env && len < sizeof(text)) {
            for (char *c = env; *c; c++)
                if (*c == ',')
                    *c = '/';
            len += (size_t)snprintf(text + len, sizeof(text) - len, "%senv %s", sep, env);
        }
        if (len < sizeof(text))
            snprintf(text + len, sizeof(text) - len, ")");
    }
    wrap(out, text, HELP_COLUMN, HELP_COLUMN, "");
}

void pfr_settings_write_help(const pfr_settings *s, FILE *out)
{
    fputs(s->usage, out);
    if (s->usage[0] && s->usage[strlen(s->usage) - 1] != '\n')
        fputc('\n', out);
    for (size_t i = 0; i < s->nb; i++) {
        const pfr_settings_group *g = s->b[i].g;
        bool any = false;
        char f[NAME_MAX_LEN];
        for (size_t j = 0; j < g->nrows; j++)
            any |= shown(&g->rows[j]) && pfr_settings_row_flag(&g->rows[j], f, sizeof(f));
        if (!any)
            continue;
        fprintf(out, "\n%s:\n", g->name);
        for (size_t j = 0; j < g->nrows; j++)
            if (shown(&g->rows[j]))
                help_row(s, g, &g->rows[j], out);
    }
    fputc('\n', out);
    if (!s->no_config)
        fputs("  --config FILE            the config file\n", out);
    fputs("  -h, --help               this text\n"
          "  --version                the version\n",
          out);
}

/* ---- the sample file ---- */

static bool in_sample(const pfr_setting *r)
{
    return shown(r) && !r->alias_of && !(r->flags & PFR_SETF_NO_FILE);
}

static void sample_row(const pfr_setting *r, FILE *out)
{
    char def[256], bounds[128], text[1024];
    fputc('\n', out);
    bounds_text(r, bounds, sizeof(bounds));
    snprintf(text, sizeof(text), "%s%s%s%s", r->help ? r->help : "", bounds[0] ? " (" : "", bounds,
             bounds[0] ? ")" : "");
    if (text[0])
        wrap(out, text, 0, 0, "# ");
    if (r->sample) {
        fprintf(out, "%s = %s\n", r->key, r->sample);
        return;
    }
    default_value(r, def, sizeof(def));
    if (def[0] || !r->example) {
        fprintf(out, "#%s =%s%s\n", r->key, def[0] ? " " : "", def);
        return;
    }
    for (const char *p = r->example; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(out, "#%s = %.*s\n", r->key, (int)n, p);
        p += n + (p[n] == '\n');
    }
}

/* The groups of one section (collected groups: one "[section NAME]" example). */
static void sample_section(const pfr_settings *s, size_t first, FILE *out)
{
    const struct pfr_settings_binding *b0 = &s->b[first];
    bool collected = b0->collect != NULL;
    if (collected)
        fprintf(out, "\n#[%s NAME]\n", b0->g->section);
    else
        fprintf(out, "\n[%s]\n", b0->g->section);
    for (size_t i = first; i < s->nb; i++) {
        const pfr_settings_group *g = s->b[i].g;
        if (!g->section || strcmp(g->section, b0->g->section) || !s->b[i].collect != !collected)
            continue;
        if (g->intro) {
            fputc('\n', out);
            wrap(out, g->intro, 0, 0, "# ");
        }
        for (size_t j = 0; j < g->nrows; j++)
            if (in_sample(&g->rows[j]))
                sample_row(&g->rows[j], out);
    }
}

void pfr_settings_write_sample(const pfr_settings *s, FILE *out)
{
    if (s->sample_header)
        wrap(out, s->sample_header, 0, 0, "# ");
    for (size_t i = 0; i < s->nb; i++) {
        const pfr_settings_group *g = s->b[i].g;
        bool seen = !g->section;
        for (size_t j = 0; j < i && !seen; j++)
            seen = s->b[j].g->section && !strcmp(s->b[j].g->section, g->section) &&
                   !s->b[j].collect == !s->b[i].collect;
        if (!seen)
            sample_section(s, i, out);
    }
}

/* ---- the reference ---- */

/* A Markdown cell: '|' escaped, newlines as spaces. */
static void cell(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p == '|')
            fputs("\\|", out);
        else
            fputc(*p == '\n' ? ' ' : *p, out);
    }
}

static void reference_row(const pfr_settings *s, const pfr_settings_group *g, const pfr_setting *r,
                          FILE *out)
{
    char f[NAME_MAX_LEN], env[256], def[256], bounds[128], text[1024];
    fputs("| ", out);
    if (pfr_settings_row_flag(r, f, sizeof(f))) {
        if (r->short_opt)
            fprintf(out, "`-%c`, ", r->short_opt);
        fprintf(out, "`--%s", f);
        if (!(r->flags & PFR_SETF_NO_ARG)) {
            fputc(' ', out);
            cell(out, metavar(r));
        }
        fputc('`', out);
    }
    fputs(" | ", out);
    if (g->section && pfr_settings_row_in_file(r)) {
        const pfr_setting *t = pfr_settings_row_target(g, r);
        fprintf(out, "`%s`%s", r->key, t && pfr_settings_row_repeats(t) ? " (repeatable)" : "");
    }
    fputs(" | ", out);
    if (pfr_settings_row_env(s, r, env, sizeof(env))) {
        char *save = NULL;
        for (char *n = strtok_r(env, ",", &save), *first = n; n; n = strtok_r(NULL, ",", &save))
            fprintf(out, "%s`%s`", n == first ? "" : ", else ", n);
    }
    fputs(" | ", out);
    bool code = default_text(r, def, sizeof(def));
    if (code) {
        fputc('`', out);
        cell(out, def);
        fputc('`', out);
    } else if (def[0]) {
        cell(out, def);
    } else if (!r->alias_of && !(r->flags & PFR_SETF_SECRET)) {
        fputs("none", out);
    }
    fputs(" | ", out);
    if (r->help)
        snprintf(text, sizeof(text), "%s", r->help);
    else
        alias_help(g, r, text, sizeof(text));
    cell(out, text);
    bounds_text(r, bounds, sizeof(bounds));
    if (bounds[0])
        fprintf(out, " (%s)", bounds);
    fputs(" |\n", out);
}

/* "sink clickhouse" -> "sink-clickhouse", for the markers. */
static void marker_name(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s", name);
    for (char *p = buf; *p; p++)
        if (*p == ' ')
            *p = '-';
}

void pfr_settings_write_reference(const pfr_settings *s, FILE *out)
{
    for (size_t i = 0; i < s->nb; i++) {
        const pfr_settings_group *g = s->b[i].g;
        char m[NAME_MAX_LEN * 2];
        marker_name(g->name, m, sizeof(m));
        fprintf(out, "<!-- settings:%s:%s begin -->\n", s->program, m);
        if (g->intro) {
            wrap(out, g->intro, 0, 0, "");
            fputc('\n', out);
        }
        if (!g->section)
            fputs("| flag | key | environment | default | meaning |\n", out);
        else if (s->b[i].collect)
            fprintf(out, "| flag | key in `[%s NAME]` | environment | default | meaning |\n",
                    g->section);
        else
            fprintf(out, "| flag | key in `[%s]` | environment | default | meaning |\n",
                    g->section);
        fputs("|---|---|---|---|---|\n", out);
        for (size_t j = 0; j < g->nrows; j++)
            if (shown(&g->rows[j]))
                reference_row(s, g, &g->rows[j], out);
        fprintf(out, "<!-- settings:%s:%s end -->\n", s->program, m);
    }
}

int pfr_settings_write(const pfr_settings *s, const char *what, FILE *out)
{
    if (!strcmp(what, "help"))
        pfr_settings_write_help(s, out);
    else if (!strcmp(what, "sample"))
        pfr_settings_write_sample(s, out);
    else if (!strcmp(what, "reference"))
        pfr_settings_write_reference(s, out);
    else
        return -EINVAL;
    return 0;
}
