/* pfr_settings: rows of settings bound to structs; the layers, flags and docs made from them. */
#include "pfr_settings.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pfr_ini.h"
#include "pfr_settings_int.h"
#include "pfr_units.h"

#define NAME_MAX_LEN PFR_SETTINGS_NAME_MAX

/* A flag found on the command line, applied after the parse. */
struct pending {
    size_t b;
    const pfr_setting *row;
    const char *value;
    char where[NAME_MAX_LEN + 8];
};

/* ---- rows ---- */

bool pfr_settings_row_is_list(const pfr_setting *r)
{
    return r->type == PFR_SET_LIST;
}

bool pfr_settings_row_repeats(const pfr_setting *r)
{
    return pfr_settings_row_is_list(r) || (r->flags & PFR_SETF_REPEAT);
}

const pfr_setting *pfr_settings_row_target(const pfr_settings_group *g, const pfr_setting *r)
{
    if (!r->alias_of)
        return r;
    for (size_t i = 0; i < g->nrows; i++)
        if (!g->rows[i].alias_of && strcmp(g->rows[i].key, r->alias_of) == 0)
            return &g->rows[i];
    return NULL;
}

bool pfr_settings_row_in_file(const pfr_setting *r)
{
    return !(r->flags & PFR_SETF_NO_FILE) && !(r->alias_of && r->alias_value);
}

bool pfr_settings_row_flag(const pfr_setting *r, char *buf, size_t n)
{
    if (r->flag && !r->flag[0])
        return false;
    snprintf(buf, n, "%s", r->flag ? r->flag : r->key);
    if (!r->flag)
        for (char *p = buf; *p; p++)
            if (*p == '_')
                *p = '-';
    return true;
}

bool pfr_settings_row_env(const pfr_settings *s, const pfr_setting *r, char *buf, size_t n)
{
    if (r->env) {
        snprintf(buf, n, "%s", r->env);
        return r->env[0] != '\0';
    }
    if (r->alias_of || !s || !s->env_prefix)
        return false;
    size_t len = (size_t)snprintf(buf, n, "%s", s->env_prefix);
    for (const char *k = r->key; *k && len + 1 < n; k++)
        buf[len++] = (char)toupper((unsigned char)*k);
    buf[len < n ? len : n - 1] = '\0';
    return true;
}

static void *field_of(const pfr_setting *r, void *conf)
{
    return (char *)conf + r->offset;
}

static int store_unsigned(void *field, size_t width, uint64_t v)
{
    switch (width) {
    case 1:
        if (v > UINT8_MAX)
            return -ERANGE;
        *(uint8_t *)field = (uint8_t)v;
        return 0;
    case 2:
        if (v > UINT16_MAX)
            return -ERANGE;
        *(uint16_t *)field = (uint16_t)v;
        return 0;
    case 4:
        if (v > UINT32_MAX)
            return -ERANGE;
        *(uint32_t *)field = (uint32_t)v;
        return 0;
    case 8:
        *(uint64_t *)field = v;
        return 0;
    }
    return -EINVAL;
}

static int store_signed(void *field, size_t width, int64_t v)
{
    if (width == 4) {
        if (v > INT32_MAX || v < INT32_MIN)
            return -ERANGE;
        *(int32_t *)field = (int32_t)v;
        return 0;
    }
    if (width == 8) {
        *(int64_t *)field = v;
        return 0;
    }
    return -EINVAL;
}

/* A bound in the row's own syntax: "200ms", "1M", "64". */
static void format_bound(const pfr_setting *r, double v, char *buf, size_t n)
{
    if (r->type == PFR_SET_DURATION)
        pfr_format_duration((int64_t)(v * 1e9 + (v >= 0 ? 0.5 : -0.5)), buf, n);
    else if (r->type == PFR_SET_SIZE)
        pfr_format_size((uint64_t)v, buf, n);
    else
        snprintf(buf, n, "%.0f", v);
}

static bool has_bounds(const pfr_setting *r)
{
    return r->min != 0 || r->max != 0;
}

/* 0 if v (seconds, bytes or a count) is within r's bounds; else -ERANGE with the reason. */
static int check_bounds(const pfr_setting *r, const char *text, double v, char *err, size_t errlen)
{
    if (!has_bounds(r))
        return 0;
    char b[48];
    if (v < r->min) {
        format_bound(r, r->min, b, sizeof(b));
        snprintf(err, errlen, "'%.80s' is below %s", text, b);
        return -ERANGE;
    }
    if (r->max != 0 && v > r->max) {
        format_bound(r, r->max, b, sizeof(b));
        snprintf(err, errlen, "'%.80s' is above %s", text, b);
        return -ERANGE;
    }
    return 0;
}

static int parse_string(const pfr_setting *r, const char *value, void *field)
{
    char **dst = field;
    char *v = NULL;
    if ((value[0] || (r->flags & PFR_SETF_EMPTY_OK)) && !(v = strdup(value)))
        return -ENOMEM;
    if (*dst && (r->flags & PFR_SETF_SECRET))
        explicit_bzero(*dst, strlen(*dst));
    free(*dst);
    *dst = v;
    return 0;
}

static int parse_enum(const pfr_setting *r, const char *value, void *field, char *err,
                      size_t errlen)
{
    size_t n = 0, len = 0;
    for (; r->choices && r->choices[n]; n++)
        if (strcasecmp(value, r->choices[n]) == 0)
            return store_signed(field, r->width, (int64_t)n);
    len = (size_t)snprintf(err, errlen, "'%.80s' is not one of", value);
    for (size_t i = 0; i < n && len < errlen; i++)
        len += (size_t)snprintf(err + len, errlen - len, "%s %s", i ? "," : "", r->choices[i]);
    return -EINVAL;
}

/* One value into r's field; the reason (without the key) in err. */
static int parse_value(const pfr_setting *r, const char *value, void *field, char *err,
                       size_t errlen)
{
    int rc = 0;
    int64_t ns;
    uint64_t u;
    switch (r->type) {
    case PFR_SET_STRING:
        rc = parse_string(r, value, field);
        break;
    case PFR_SET_BOOL:
        rc = pfr_parse_bool(value, field, err, errlen);
        break;
    case PFR_SET_DURATION:
        if ((rc = pfr_parse_duration(value, &ns, err, errlen)) ||
            (rc = check_bounds(r, value, (double)ns / 1e9, err, errlen)))
            break;
        int64_t unit = r->unit_ns > 0 ? r->unit_ns : 1;
        rc = store_signed(field, r->width, ns / unit + (ns % unit >= (unit + 1) / 2 ? 1 : 0));
        break;
    case PFR_SET_SIZE:
    case PFR_SET_COUNT:
        rc = r->type == PFR_SET_SIZE ? pfr_parse_size(value, &u, err, errlen)
                                     : pfr_parse_count(value, UINT64_MAX, &u, err, errlen);
        if (rc || (rc = check_bounds(r, value, (double)u, err, errlen)))
            break;
        if ((rc = store_unsigned(field, r->width, u)))
            snprintf(err, errlen, "'%.80s' is too large", value);
        break;
    case PFR_SET_ENUM:
        rc = parse_enum(r, value, field, err, errlen);
        break;
    case PFR_SET_LIST:
    case PFR_SET_CUSTOM:
        return r->parse(value, field, err, errlen);
    }
    if (rc == 0 && r->parse)
        rc = r->parse(value, field, err, errlen);
    if (rc == -ENOMEM)
        snprintf(err, errlen, "out of memory");
    return rc;
}

static const char *type_name(enum pfr_setting_type t)
{
    static const char *const names[] = {
        [PFR_SET_STRING] = "string", [PFR_SET_BOOL] = "boolean", [PFR_SET_DURATION] = "duration",
        [PFR_SET_SIZE] = "size",     [PFR_SET_COUNT] = "number", [PFR_SET_ENUM] = "choice",
        [PFR_SET_LIST] = "value",    [PFR_SET_CUSTOM] = "value",
    };
    return names[t];
}

/* parse_value, with the key in front of the reason; a secret's value is never shown. */
static int set_row(const pfr_setting *r, const char *value, void *field, bool with_key, char *err,
                   size_t errlen)
{
    char why[512] = "";
    int rc = parse_value(r, value, field, why, sizeof(why));
    if (rc == 0)
        return 0;
    if (r->flags & PFR_SETF_SECRET)
        snprintf(why, sizeof(why), "not a valid %s (the value is not shown)", type_name(r->type));
    if (with_key)
        snprintf(err, errlen, "%s: %s", r->key, why);
    else
        snprintf(err, errlen, "%s", why);
    return rc;
}

static void release_row(const pfr_setting *r, void *conf)
{
    void *field = field_of(r, conf);
    if (r->type == PFR_SET_STRING) {
        char **p = field;
        if (*p && (r->flags & PFR_SETF_SECRET))
            explicit_bzero(*p, strlen(*p));
        free(*p);
    } else if (r->free) {
        r->free(field);
    }
    memset(field, 0, r->width);
}

void pfr_settings_release(const pfr_settings_group *g, void *conf)
{
    for (size_t i = 0; conf && i < g->nrows; i++)
        if (!g->rows[i].alias_of)
            release_row(&g->rows[i], conf);
}

int pfr_settings_group_defaults(const pfr_settings_group *g, void *conf, char *err, size_t errlen)
{
    for (size_t i = 0; i < g->nrows; i++) {
        const pfr_setting *r = &g->rows[i];
        if (r->alias_of)
            continue;
        memset(field_of(r, conf), 0, r->width);
        char why[512];
        int rc = r->def ? set_row(r, r->def, field_of(r, conf), true, why, sizeof(why)) : 0;
        if (rc) {
            snprintf(err, errlen, "%s: the default of %s", g->name, why);
            return rc;
        }
    }
    return 0;
}

/* The row of g read from a file as key (an alias's key included); NULL if none. */
static const pfr_setting *find_file_key(const pfr_settings_group *g, const char *key)
{
    for (size_t i = 0; i < g->nrows; i++)
        if (pfr_settings_row_in_file(&g->rows[i]) && strcmp(g->rows[i].key, key) == 0)
            return &g->rows[i];
    return NULL;
}

int pfr_settings_group_set(const pfr_settings_group *g, void *conf, const char *key,
                           const char *value, const char *where, char *err, size_t errlen)
{
    const pfr_setting *r = find_file_key(g, key), *t = r ? pfr_settings_row_target(g, r) : NULL;
    if (!t) {
        snprintf(err, errlen, "%s%sunknown key '%s'", where ? where : "", where ? ": " : "", key);
        return -ENOENT;
    }
    char why[640];
    int rc = set_row(t, r->alias_value ? r->alias_value : value, field_of(t, conf), true, why,
                     sizeof(why));
    if (rc)
        snprintf(err, errlen, "%s%s%s", where ? where : "", where ? ": " : "", why);
    return rc;
}

/* ---- binding ---- */

pfr_settings *pfr_settings_new(const char *program, const char *env_prefix, const char *usage)
{
    pfr_settings *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->program = strdup(program ? program : "");
    s->usage = strdup(usage ? usage : "");
    s->env_prefix = env_prefix ? strdup(env_prefix) : NULL;
    if (!s->program || !s->usage || (env_prefix && !s->env_prefix)) {
        pfr_settings_free(s);
        return NULL;
    }
    return s;
}

void pfr_settings_free(pfr_settings *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nb; i++)
        free(s->b[i].set);
    free(s->b);
    free(s->program);
    free(s->env_prefix);
    free(s->usage);
    free(s->sample_header);
    free(s->default_section);
    free(s);
}

static void replace_text(char **dst, const char *text)
{
    free(*dst);
    *dst = text ? strdup(text) : NULL; /* NULL on ENOMEM too: the text is left out */
}

void pfr_settings_set_stop_at_operand(pfr_settings *s, bool on)
{
    s->stop_at_operand = on;
}

void pfr_settings_set_no_config(pfr_settings *s, bool on)
{
    s->no_config = on;
}

void pfr_settings_set_default_section(pfr_settings *s, const char *section)
{
    replace_text(&s->default_section, section);
}

void pfr_settings_set_sample_header(pfr_settings *s, const char *text)
{
    replace_text(&s->sample_header, text);
}

static bool same_section(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The table mistakes a test should catch: a field of the wrong width, an alias of nothing, a
 * list without a parser. */
static int check_row(const pfr_settings_group *g, const pfr_setting *r, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (r->alias_of && !pfr_settings_row_target(g, r))
        bad = "an alias of no row";
    else if (r->alias_of)
        return 0;
    else if ((r->type == PFR_SET_LIST || r->type == PFR_SET_CUSTOM) && !r->parse)
        bad = "no parse function";
    else if (r->type == PFR_SET_ENUM && !r->choices)
        bad = "no choices";
    else if (r->type == PFR_SET_STRING && r->width != sizeof(char *))
        bad = "a string field is a char *";
    else if (r->type == PFR_SET_BOOL && r->width != sizeof(bool))
        bad = "a boolean field is a bool";
    else if ((r->type == PFR_SET_DURATION || r->type == PFR_SET_ENUM) && r->width != 4 &&
             r->width != 8)
        bad = "a duration or enum field is 4 or 8 bytes";
    else if ((r->type == PFR_SET_SIZE || r->type == PFR_SET_COUNT) &&
             (r->width == 0 || r->width > 8 || (r->width & (r->width - 1))))
        bad = "a size or count field is 1, 2, 4 or 8 bytes";
    if (!bad)
        return 0;
    snprintf(err, errlen, "%s: row %s: %s", g->name, r->key, bad);
    return -EINVAL;
}

/* Do two ','-separated lists of names have a name in common? */
static bool lists_share(const char *a, const char *b)
{
    for (const char *p = a; *p; p += *p == ',') {
        size_t n = strcspn(p, ",");
        for (const char *q = b; *q; q += *q == ',') {
            size_t m = strcspn(q, ",");
            if (n == m && strncmp(p, q, n) == 0)
                return true;
            q += m;
        }
        p += n;
    }
    return false;
}

/* Does a (in ga) clash with b (in gb): the same key in the same section, flag or variable? */
static int check_clash(const pfr_settings *s, const pfr_settings_group *ga, const pfr_setting *a,
                       const pfr_settings_group *gb, const pfr_setting *b, char *err, size_t errlen)
{
    char fa[NAME_MAX_LEN], fb[NAME_MAX_LEN], ea[256], eb[256];
    const char *what = NULL;
    if (ga->section && same_section(ga->section, gb->section) && pfr_settings_row_in_file(a) &&
        pfr_settings_row_in_file(b) && strcmp(a->key, b->key) == 0)
        what = "key";
    else if (pfr_settings_row_flag(a, fa, sizeof(fa)) && pfr_settings_row_flag(b, fb, sizeof(fb)) &&
             strcmp(fa, fb) == 0)
        what = "flag";
    else if (a->short_opt && a->short_opt == b->short_opt)
        what = "short option";
    else if (pfr_settings_row_env(s, a, ea, sizeof(ea)) &&
             pfr_settings_row_env(s, b, eb, sizeof(eb)) && lists_share(ea, eb))
        what = "environment variable";
    if (!what)
        return 0;
    snprintf(err, errlen, "%s: row %s has the %s of %s's row %s", ga->name, a->key, what, gb->name,
             b->key);
    return -EEXIST;
}

static bool builtin_flag(const char *f)
{
    return !strcmp(f, "help") || !strcmp(f, "version") || !strcmp(f, "config") ||
           !strcmp(f, "print-settings");
}

static int check_group(const pfr_settings *s, const pfr_settings_group *g, char *err, size_t errlen)
{
    for (size_t i = 0; i < g->nrows; i++) {
        const pfr_setting *r = &g->rows[i];
        char f[NAME_MAX_LEN];
        int rc = check_row(g, r, err, errlen);
        if (rc)
            return rc;
        if ((pfr_settings_row_flag(r, f, sizeof(f)) && builtin_flag(f)) || r->short_opt == 'h') {
            snprintf(err, errlen, "%s: row %s takes a flag every program has", g->name, r->key);
            return -EEXIST;
        }
        for (size_t j = 0; j < i; j++)
            if ((rc = check_clash(s, g, r, g, &g->rows[j], err, errlen)))
                return rc;
        for (size_t k = 0; k < s->nb; k++)
            for (size_t j = 0; j < s->b[k].g->nrows; j++)
                if ((rc = check_clash(s, g, r, s->b[k].g, &s->b[k].g->rows[j], err, errlen)))
                    return rc;
    }
    return 0;
}

static int add_binding(pfr_settings *s, const pfr_settings_group *g, void *conf,
                       pfr_settings_collect_fn fn, void *ctx, char *err, size_t errlen)
{
    int rc = check_group(s, g, err, errlen);
    if (rc)
        return rc;
    struct pfr_settings_binding *b = realloc(s->b, (s->nb + 1) * sizeof(*b));
    if (!b)
        return -ENOMEM;
    s->b = b;
    unsigned char *set = calloc(g->nrows + 1, 1);
    if (!set)
        return -ENOMEM;
    if (conf && (rc = pfr_settings_group_defaults(g, conf, err, errlen))) {
        free(set);
        return rc;
    }
    s->b[s->nb++] =
        (struct pfr_settings_binding){.g = g, .conf = conf, .collect = fn, .ctx = ctx, .set = set};
    return 0;
}

int pfr_settings_bind(pfr_settings *s, const pfr_settings_group *g, void *conf, char *err,
                      size_t errlen)
{
    return add_binding(s, g, conf, NULL, NULL, err, errlen);
}

int pfr_settings_bind_collect(pfr_settings *s, const pfr_settings_group *g,
                              pfr_settings_collect_fn fn, void *ctx, char *err, size_t errlen)
{
    return add_binding(s, g, NULL, fn, ctx, err, errlen);
}

/* ---- applying a value ---- */

/* The bytes a collected group's rows span: a scratch struct checks a value. */
static size_t span_of(const pfr_settings_group *g)
{
    size_t n = 1;
    for (size_t i = 0; i < g->nrows; i++)
        if (g->rows[i].offset + g->rows[i].width > n)
            n = g->rows[i].offset + g->rows[i].width;
    return n;
}

static int collect_value(const struct pfr_settings_binding *b, const pfr_setting *t,
                         const char *value, const char *instance, enum pfr_settings_layer layer,
                         const char *where, bool with_key, char *err, size_t errlen)
{
    void *scratch = calloc(1, span_of(b->g));
    if (!scratch)
        return -ENOMEM;
    int rc = set_row(t, value, field_of(t, scratch), with_key, err, errlen);
    release_row(t, scratch);
    free(scratch);
    if (rc)
        return rc;
    char why[512] = "";
    rc = b->collect(b->ctx, b->g, instance, t, value, layer, where, why, sizeof(why));
    if (rc)
        snprintf(err, errlen, "%s%s%s", with_key ? t->key : "", with_key ? ": " : "", why);
    return rc;
}

/* r (of binding b, maybe an alias) given value from a layer. with_key: the reason starts with
 * the key (a file's line); a flag's or variable's message starts with where. */
static int apply(const struct pfr_settings_binding *b, const pfr_setting *r, const char *value,
                 const char *instance, enum pfr_settings_layer layer, const char *where,
                 bool with_key, char *err, size_t errlen)
{
    const pfr_setting *t = pfr_settings_row_target(b->g, r);
    if (r->alias_value)
        value = r->alias_value;
    if (b->collect)
        return collect_value(b, t, value, instance, layer, where, with_key, err, errlen);
    int rc = set_row(t, value, field_of(t, b->conf), with_key, err, errlen);
    if (rc == 0)
        b->set[t - b->g->rows] = (unsigned char)(1 + layer);
    return rc;
}

/* The binding and row of section's key (section NULL: the groups without one). */
static const struct pfr_settings_binding *find_key(const pfr_settings *s, const char *section,
                                                   const char *key, const pfr_setting **row)
{
    for (size_t i = 0; i < s->nb; i++) {
        if (!same_section(s->b[i].g->section, section))
            continue;
        const pfr_setting *r = find_file_key(s->b[i].g, key);
        if (!r && !section) /* flags-only groups: any row by its key */
            for (size_t j = 0; j < s->b[i].g->nrows && !r; j++)
                if (strcmp(s->b[i].g->rows[j].key, key) == 0)
                    r = &s->b[i].g->rows[j];
        if (r) {
            *row = r;
            return &s->b[i];
        }
    }
    return NULL;
}

int pfr_settings_set(pfr_settings *s, const char *section, const char *key, const char *value,
                     const char *where, char *err, size_t errlen)
{
    const pfr_setting *r;
    const struct pfr_settings_binding *b = find_key(s, section, key, &r);
    char why[640];
    int rc;
    if (!b) {
        snprintf(why, sizeof(why), "unknown key '%s'", key);
        rc = -ENOENT;
    } else {
        rc = apply(b, r, value, NULL, PFR_SETTINGS_FILE, where, true, why, sizeof(why));
    }
    if (rc)
        snprintf(err, errlen, "%s%s%s", where ? where : "", where ? ": " : "", why);
    return rc;
}

int pfr_settings_layer_of(const pfr_settings *s, const char *section, const char *key)
{
    const pfr_setting *r;
    const struct pfr_settings_binding *b = find_key(s, section, key, &r);
    if (!b || !(r = pfr_settings_row_target(b->g, r)))
        return -1;
    return (int)b->set[r - b->g->rows] - 1;
}

bool pfr_settings_is_set(const pfr_settings *s, const char *section, const char *key)
{
    return pfr_settings_layer_of(s, section, key) >= 0;
}

/* ---- the config file ---- */

struct file_ctx {
    pfr_settings *s;
    const char *path;
    const char *const *ignore;
    char why[768];
    int rc;
};

/* "sink a" -> kind "sink" (in kind, kn bytes) and name "a"; false if section has no name. */
static bool split_instance(const char *section, char *kind, size_t kn, const char **name)
{
    size_t k = strcspn(section, " \t:.");
    if (!section[k] || k + 1 > kn)
        return false;
    memcpy(kind, section, k);
    kind[k] = '\0';
    const char *p = section + k + 1;
    while (*p == ' ' || *p == '\t' || *p == '"')
        p++;
    *name = p;
    return true;
}

/* The instance name without trailing quotes and spaces, checked. */
static bool instance_name(const char *raw, char *out, size_t n)
{
    snprintf(out, n, "%s", raw);
    size_t l = strlen(out);
    while (l && (out[l - 1] == '"' || out[l - 1] == ' ' || out[l - 1] == '\t'))
        out[--l] = '\0';
    if (!l || strlen(raw) >= n)
        return false;
    for (const char *p = out; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
            return false;
    return true;
}

static bool ignored(const char *const *ignore, const char *section)
{
    size_t first = strcspn(section, " \t:.");
    for (const char *const *i = ignore; i && *i; i++)
        if (!strcmp(*i, "*") || !strcmp(*i, section) ||
            (strlen(*i) == first && !strncmp(*i, section, first) && first))
            return true;
    return false;
}

/* The binding a file's key goes to: section's own groups, then collected groups' instance and
 * shared sections. *known: a group reads section. */
static const struct pfr_settings_binding *file_binding(const pfr_settings *s, const char *section,
                                                       const char *key, const pfr_setting **row,
                                                       const char **instance, char *name, size_t nn,
                                                       bool *known, bool *bad_name)
{
    char kind[NAME_MAX_LEN];
    const char *raw = NULL;
    bool has_instance = split_instance(section, kind, sizeof(kind), &raw);
    *instance = NULL;
    for (size_t i = 0; i < s->nb; i++) {
        const pfr_settings_group *g = s->b[i].g;
        bool here = g->section &&
                    (!strcmp(g->section, section) ||
                     (s->b[i].collect && g->shared_section && !strcmp(g->shared_section, section)));
        bool inst =
            !here && s->b[i].collect && has_instance && g->section && !strcmp(g->section, kind);
        if (!here && !inst)
            continue;
        *known = true;
        if (inst && !instance_name(raw, name, nn)) {
            *bad_name = true;
            return NULL;
        }
        const pfr_setting *r = find_file_key(g, key);
        if (r) {
            *row = r;
            *instance = inst ? name : NULL;
            return &s->b[i];
        }
    }
    return NULL;
}

static int file_line(void *user, const char *section, const char *key, const char *value)
{
    struct file_ctx *x = user;
    const pfr_settings *s = x->s;
    if (!section[0] && s->default_section)
        section = s->default_section;
    const pfr_setting *r = NULL;
    const char *instance;
    char name[NAME_MAX_LEN + 1];
    bool known = false, bad_name = false;
    const struct pfr_settings_binding *b =
        file_binding(s, section, key, &r, &instance, name, sizeof(name), &known, &bad_name);
    if (b) {
        x->rc =
            apply(b, r, value, instance, PFR_SETTINGS_FILE, x->path, true, x->why, sizeof(x->why));
        return x->rc == 0;
    }
    if (bad_name)
        snprintf(x->why, sizeof(x->why),
                 "[%s]: a section's name is letters, digits, '_', '-' and '.' (at most %d)",
                 section, NAME_MAX_LEN);
    else if (known)
        snprintf(x->why, sizeof(x->why), "unknown key '%s' in [%s]", key, section);
    else if (ignored(x->ignore, section))
        return 1;
    else if (!section[0])
        snprintf(x->why, sizeof(x->why), "key '%s' before any [section]", key);
    else
        snprintf(x->why, sizeof(x->why), "unknown section [%s]", section);
    x->rc = -EINVAL;
    return 0;
}

/* "section.key" of every repeatable key of a group's own section: pfr_ini refuses the rest
 * given twice. NULL-terminated; the strings follow the pointers in one allocation. */
static char **repeatable_keys(const pfr_settings *s)
{
    size_t n = 0, bytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        char **v = pass ? malloc((n + 1) * sizeof(char *) + bytes) : NULL;
        if (pass && !v)
            return NULL;
        char *str = pass ? (char *)(v + n + 1) : NULL;
        size_t k = 0;
        for (size_t i = 0; i < s->nb; i++) {
            const pfr_settings_group *g = s->b[i].g;
            for (size_t j = 0; g->section && j < g->nrows; j++) {
                const pfr_setting *r = &g->rows[j], *t = pfr_settings_row_target(g, r);
                if (!pfr_settings_row_in_file(r) || !t || !pfr_settings_row_repeats(t))
                    continue;
                bool dflt = s->default_section && !strcmp(s->default_section, g->section);
                for (int d = 0; d <= (int)dflt; d++) {
                    const char *sec = d ? "" : g->section;
                    size_t len = strlen(sec) + 1 + strlen(r->key) + 1;
                    if (!pass) {
                        n++, bytes += len;
                        continue;
                    }
                    snprintf(str, len, "%s.%s", sec, r->key);
                    v[k++] = str;
                    str += len;
                }
            }
        }
        if (pass) {
            v[k] = NULL;
            return v;
        }
    }
    return NULL;
}

/* The file's text parsed, or by pfr_ini_parse when text is NULL (f is then read). */
static int load_ini(pfr_settings *s, FILE *f, const char *text, size_t len, const char *name,
                    const char *const *ignore_sections, char *err, size_t errlen)
{
    char **rep = repeatable_keys(s);
    if (!rep) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct file_ctx x = {.s = s, .path = name, .ignore = ignore_sections};
    const char *const *r = (const char *const *)rep;
    int line = text ? pfr_ini_parse_text(text, len, name, r, file_line, &x, err, errlen)
                    : pfr_ini_parse(f, name, r, file_line, &x, err, errlen);
    free(rep);
    if (line <= 0)
        return line; /* 0, or a line too long, a duplicate, an unreadable file: err says */
    snprintf(err, errlen, "%s:%d: %s", name, line, x.why[0] ? x.why : "syntax error");
    return x.rc ? x.rc : -EINVAL;
}

int pfr_settings_load_file(pfr_settings *s, const char *path, const char *const *ignore_sections,
                           char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(e));
        return -e;
    }
    int rc = load_ini(s, f, NULL, 0, path, ignore_sections, err, errlen);
    fclose(f);
    return rc;
}

int pfr_settings_load_text(pfr_settings *s, const char *text, size_t len, const char *name,
                           const char *const *ignore_sections, char *err, size_t errlen)
{
    return load_ini(s, NULL, text, len, name, ignore_sections, err, errlen);
}

/* ---- the environment ---- */

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int pfr_settings_load_env(pfr_settings *s, char *const *envp, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->nb; i++) {
        const pfr_settings_group *g = s->b[i].g;
        for (size_t j = 0; j < g->nrows; j++) {
            char names[256];
            if (!pfr_settings_row_env(s, &g->rows[j], names, sizeof(names)))
                continue;
            for (char *n = names, *save = NULL; (n = strtok_r(n, ",", &save)); n = NULL) {
                const char *v = env_get(envp, n);
                if (!v)
                    continue;
                char why[640];
                int rc = apply(&s->b[i], &g->rows[j], v, NULL, PFR_SETTINGS_ENV, n, false, why,
                               sizeof(why));
                if (rc) {
                    snprintf(err, errlen, "%s: %s", n, why);
                    return rc;
                }
                break; /* "A,B": A, else B */
            }
        }
    }
    return 0;
}

/* ---- the command line ---- */

enum { OPT_HELP = 'h', OPT_VERSION = 1, OPT_CONFIG, OPT_PRINT, OPT_ROW = 256 };

/* getopt_long's tables, built from the rows. */
struct optset {
    struct option *opts;
    struct {
        size_t b;
        const pfr_setting *row;
    } * rows;    /* by val - OPT_ROW */
    char *names; /* the flags' names, one after another */
    char shorts[256];
};

static void optset_free(struct optset *o)
{
    free(o->opts);
    free(o->rows);
    free(o->names);
}

static int optset_build(const pfr_settings *s, struct optset *o)
{
    size_t n = 0, bytes = 0;
    char f[NAME_MAX_LEN];
    for (size_t i = 0; i < s->nb; i++)
        for (size_t j = 0; j < s->b[i].g->nrows; j++)
            if (pfr_settings_row_flag(&s->b[i].g->rows[j], f, sizeof(f)))
                n++, bytes += strlen(f) + 1;
    static const struct option builtin[] = {
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {"print-settings", required_argument, NULL, OPT_PRINT},
        {"config", required_argument, NULL, OPT_CONFIG}, /* last: left out with no_config */
    };
    size_t nb = sizeof(builtin) / sizeof(builtin[0]) - (s->no_config ? 1 : 0);
    o->opts = calloc(n + nb + 1, sizeof(*o->opts));
    o->rows = calloc(n + 1, sizeof(*o->rows));
    o->names = malloc(bytes + 1);
    if (!o->opts || !o->rows || !o->names)
        return -ENOMEM;
    memcpy(o->opts, builtin, nb * sizeof(builtin[0]));
    size_t k = 0, sl = (size_t)snprintf(o->shorts, sizeof(o->shorts), "%s:h",
                                        s->stop_at_operand ? "+" : "");
    char *p = o->names;
    for (size_t i = 0; i < s->nb; i++)
        for (size_t j = 0; j < s->b[i].g->nrows; j++) {
            const pfr_setting *r = &s->b[i].g->rows[j];
            if (!pfr_settings_row_flag(r, p, NAME_MAX_LEN))
                continue;
            int has_arg = (r->flags & PFR_SETF_NO_ARG) ? no_argument : required_argument;
            o->opts[nb + k] = (struct option){p, has_arg, NULL, OPT_ROW + (int)k};
            o->rows[k].b = i;
            o->rows[k].row = r;
            if (r->short_opt && sl + 3 < sizeof(o->shorts)) {
                o->shorts[sl++] = r->short_opt;
                if (has_arg)
                    o->shorts[sl++] = ':';
                o->shorts[sl] = '\0';
            }
            p += strlen(p) + 1;
            k++;
        }
    return 0;
}

/* The row of a short option c, as an index into o->rows. */
static int short_row(const struct optset *o, int c)
{
    for (int k = 0; o->rows[k].row; k++)
        if (o->rows[k].row->short_opt == c)
            return k;
    return -1;
}

static int bad_option(int opt, int argc, char **argv, char *err, size_t errlen)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    if (opt == ':')
        snprintf(err, errlen, "option '%s' needs a value (see --help)", arg);
    else if (optopt && strncmp(arg, "--", 2) == 0)
        snprintf(err, errlen, "option '%s' takes no value (see --help)", arg);
    else if (optopt)
        snprintf(err, errlen, "unknown option '-%c' (see --help)", optopt);
    else
        snprintf(err, errlen, "unknown option '%s' (see --help)", arg);
    return -EINVAL;
}

static int builtin_opt(int opt, pfr_settings_args *out, char *err, size_t errlen)
{
    switch (opt) {
    case OPT_HELP:
        out->help = true;
        return 0;
    case OPT_VERSION:
        out->version = true;
        return 0;
    case OPT_CONFIG:
        out->config = optarg;
        return 0;
    }
    if (strcmp(optarg, "help") && strcmp(optarg, "sample") && strcmp(optarg, "reference")) {
        snprintf(err, errlen, "--print-settings: '%s' is not one of help, sample, reference",
                 optarg);
        return -EINVAL;
    }
    out->print_settings = optarg;
    return 0;
}

/* getopt_long over argv: the built-in flags into out, the rows' flags into *pend (n of them). */
static int parse_args(const pfr_settings *s, int argc, char **argv, pfr_settings_args *out,
                      struct pending **pend, size_t *n, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->first_operand = argc;
    *n = 0;
    struct optset o = {0};
    *pend = calloc((size_t)argc + 1, sizeof(**pend));
    int rc = *pend ? optset_build(s, &o) : -ENOMEM;
    optind = 0; /* a full re-initialisation: a program may parse argv again on reload */
    opterr = 0;
    int opt, idx;
    while (rc == 0 && (opt = getopt_long(argc, argv, o.shorts, o.opts, &idx)) != -1) {
        int k = opt >= OPT_ROW ? opt - OPT_ROW : opt > ' ' && opt != 'h' ? short_row(&o, opt) : -1;
        if (opt == '?' || opt == ':') {
            rc = bad_option(opt, argc, argv, err, errlen);
        } else if (k < 0) {
            rc = builtin_opt(opt, out, err, errlen);
        } else {
            const pfr_setting *r = o.rows[k].row;
            struct pending *p = &(*pend)[(*n)++];
            p->b = o.rows[k].b;
            p->row = r;
            p->value = optarg ? optarg : r->alias_value ? r->alias_value : "true";
            if (opt >= OPT_ROW)
                snprintf(p->where, sizeof(p->where), "--%s", o.opts[idx].name);
            else
                snprintf(p->where, sizeof(p->where), "-%c", opt);
        }
    }
    if (rc == 0)
        out->first_operand = optind;
    optset_free(&o);
    if (rc == -ENOMEM)
        snprintf(err, errlen, "out of memory");
    return rc;
}

enum which { LISTS, NOT_LISTS, ALL };

/* The pending flags of LIST rows, of the others, or all, in their order. */
static int apply_pending(const pfr_settings *s, const struct pending *p, size_t n, enum which which,
                         char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const struct pfr_settings_binding *b = &s->b[p[i].b];
        bool list = pfr_settings_row_is_list(pfr_settings_row_target(b->g, p[i].row));
        if (which != ALL && list != (which == LISTS))
            continue;
        char why[640];
        int rc = apply(b, p[i].row, p[i].value, NULL, PFR_SETTINGS_ARGS, p[i].where, false, why,
                       sizeof(why));
        if (rc) {
            snprintf(err, errlen, "%s: %s", p[i].where, why);
            return rc;
        }
    }
    return 0;
}

int pfr_settings_load_args(pfr_settings *s, int argc, char **argv, pfr_settings_args *out,
                           char *err, size_t errlen)
{
    struct pending *p;
    size_t n;
    int rc = parse_args(s, argc, argv, out, &p, &n, err, errlen);
    if (rc == 0)
        rc = apply_pending(s, p, n, ALL, err, errlen);
    free(p);
    return rc;
}

/* The config file's path: --config, else the first variable of config_envs set, else
 * default_path if it exists; NULL if none. */
static const char *config_path(const pfr_settings_args *a, char *const *envp,
                               const char *config_envs, const char *default_path)
{
    if (a->config && a->config[0])
        return a->config;
    char names[256];
    snprintf(names, sizeof(names), "%s", config_envs ? config_envs : "");
    for (char *n = names, *save = NULL; (n = strtok_r(n, ",", &save)); n = NULL) {
        const char *v = env_get(envp, n);
        if (v && v[0])
            return v;
    }
    if (default_path && access(default_path, F_OK) == 0)
        return default_path;
    return NULL;
}

static int check_required(const pfr_settings *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->nb; i++)
        for (size_t j = 0; s->b[i].conf && j < s->b[i].g->nrows; j++) {
            const pfr_setting *r = &s->b[i].g->rows[j];
            if ((r->flags & PFR_SETF_REQUIRED) && !s->b[i].set[j]) {
                char f[NAME_MAX_LEN] = "";
                pfr_settings_row_flag(r, f, sizeof(f));
                snprintf(err, errlen, "%s is required (--%s)", r->key, f);
                return -EINVAL;
            }
        }
    return 0;
}

int pfr_settings_load(pfr_settings *s, int argc, char **argv, char *const *envp,
                      const char *config_envs, const char *default_path,
                      const char *const *ignore_sections, pfr_settings_args *out, char *err,
                      size_t errlen)
{
    struct pending *p;
    size_t n;
    int rc = parse_args(s, argc, argv, out, &p, &n, err, errlen);
    if (rc || out->help || out->version || out->print_settings) {
        free(p);
        return rc;
    }
    rc = apply_pending(s, p, n, LISTS, err, errlen);
    const char *path = config_path(out, envp, config_envs, default_path);
    if (rc == 0 && path) {
        out->config_path = path;
        rc = pfr_settings_load_file(s, path, ignore_sections, err, errlen);
    }
    if (rc == 0)
        rc = pfr_settings_load_env(s, envp, err, errlen);
    if (rc == 0)
        rc = apply_pending(s, p, n, NOT_LISTS, err, errlen);
    if (rc == 0)
        rc = check_required(s, err, errlen);
    free(p);
    return rc;
}
