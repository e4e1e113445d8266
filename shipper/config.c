/* config: pfr-shipper's settings: the tables (settings.h, each sink kind's) loaded in layers by
 * pfr_settings, the sinks built from them, and the checks across fields. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfr_settings.h"
#include "pfr_store.h"
#include "pfr_time.h"
#include "settings.h"
#include "sinks/sinks.h"

extern char **environ;

static int fail(char *err, size_t errlen, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int e, const char *fmt, ...)
{
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return e;
}

/* ---- one sink's settings ---- */

int pfr_sink_conf_init(pfr_sink_conf *s, const pfr_sink_kind *k, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    if (k->conf_size && !(s->kind_conf = calloc(1, k->conf_size)))
        return fail(err, errlen, -ENOMEM, "out of memory");
    int rc = pfr_settings_group_defaults(&pfr_sink_settings, s, err, errlen);
    if (!rc && k->settings)
        rc = pfr_settings_group_defaults(k->settings, s->kind_conf, err, errlen);
    s->kind = k; /* after the defaults: "type" has none */
    if (!rc && k->defaults)
        k->defaults(s);
    return rc;
}

int pfr_sink_conf_set(pfr_sink_conf *s, const char *key, const char *value, char *err,
                      size_t errlen)
{
    if (!strcmp(key, "type")) {
        if (pfr_sink_kind_find(value) != s->kind)
            return fail(err, errlen, -EINVAL, "type: the sink is %s", s->kind->name);
        return 0;
    }
    int rc = pfr_settings_group_set(&pfr_sink_settings, s, key, value, NULL, err, errlen);
    if (rc == -ENOENT && s->kind->settings)
        rc = pfr_settings_group_set(s->kind->settings, s->kind_conf, key, value, NULL, err, errlen);
    if (rc == -ENOENT)
        return fail(err, errlen, rc, "%s is not a setting of %s sinks", key, s->kind->name);
    return rc;
}

void pfr_sink_conf_release(pfr_sink_conf *s)
{
    if (s->kind && s->kind->settings && s->kind_conf)
        pfr_settings_release(s->kind->settings, s->kind_conf);
    free(s->kind_conf);
    s->kind_conf = NULL;
    /* The secret is read after the layers (load_secret), not by a row: freed here, first. */
    if (s->api_key) {
        explicit_bzero(s->api_key, strlen(s->api_key));
        free(s->api_key);
        s->api_key = NULL;
    }
    pfr_settings_release(&pfr_sink_settings, s);
    free(s->name);
    memset(s, 0, sizeof(*s));
}

void pfr_shipper_conf_free(pfr_shipper_conf *c)
{
    for (size_t i = 0; i < c->nsinks; i++)
        pfr_sink_conf_release(&c->sinks[i]);
    free(c->sinks);
    pfr_settings_release(&pfr_shipper_settings, c);
    free(c->config_path);
    free(c->backfill_sink);
    memset(c, 0, sizeof(*c));
}

uint64_t pfr_shipper_ring_cache(const pfr_shipper_conf *c)
{
    uint64_t m = 0;
    for (size_t i = 0; i < c->nsinks; i++) {
        const pfr_sink_kind *k = c->sinks[i].kind;
        uint64_t want = k->ring_cache ? k->ring_cache(&c->sinks[i]) : 0;
        if (want > m)
            m = want;
    }
    return m;
}

pfr_sink_conf *pfr_shipper_conf_sink(const pfr_shipper_conf *c, const char *name)
{
    for (size_t i = 0; i < c->nsinks; i++)
        if (!strcmp(c->sinks[i].name, name))
            return &c->sinks[i];
    return NULL;
}

/* ---- sink values as pfr_settings hands them over ---- */

/* One value of a sink key: from [shipper] (instance NULL, file), [sink NAME], the environment
 * or a flag. Sinks are built once every layer is read, when their kinds are known. */
struct sinkval {
    const pfr_settings_group *g;
    const pfr_setting *row;
    char *instance; /* NULL: [shipper], environment, flags */
    char *value;
    char *where;
    enum pfr_settings_layer layer;
};

struct loader {
    struct sinkval *v;
    size_t n, cap;
    char **names; /* the [sink NAME] sections, in the file's order */
    size_t nnames;
};

static void loader_free(struct loader *L)
{
    for (size_t i = 0; i < L->n; i++) {
        free(L->v[i].instance);
        free(L->v[i].value);
        free(L->v[i].where);
    }
    free(L->v);
    for (size_t i = 0; i < L->nnames; i++)
        free(L->names[i]);
    free(L->names);
    memset(L, 0, sizeof(*L));
}

static int add_name(struct loader *L, const char *name)
{
    for (size_t i = 0; i < L->nnames; i++)
        if (!strcmp(L->names[i], name))
            return 0;
    char **n = realloc(L->names, (L->nnames + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    L->names = n;
    if (!(n[L->nnames] = strdup(name)))
        return -ENOMEM;
    L->nnames++;
    return 0;
}

static int collect(void *ctx, const pfr_settings_group *g, const char *instance,
                   const pfr_setting *row, const char *value, enum pfr_settings_layer layer,
                   const char *where, char *err, size_t errlen)
{
    struct loader *L = ctx;
    if (!instance && layer == PFR_SETTINGS_FILE && !strcmp(row->key, "type"))
        return fail(err, errlen, -EINVAL, "type belongs in a [sink NAME] section");
    if (instance && add_name(L, instance))
        return -ENOMEM;
    if (layer == PFR_SETTINGS_ENV && !*value)
        return 0; /* an empty variable is not set */
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 16;
        struct sinkval *n = realloc(L->v, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        L->v = n;
        L->cap = cap;
    }
    struct sinkval *e = &L->v[L->n];
    *e = (struct sinkval){.g = g, .row = row, .layer = layer};
    e->instance = instance ? strdup(instance) : NULL;
    e->value = strdup(value);
    e->where = strdup(where ? where : "");
    if ((instance && !e->instance) || !e->value || !e->where) {
        free(e->instance);
        free(e->value);
        free(e->where);
        return -ENOMEM;
    }
    L->n++;
    return 0;
}

/* The last value of key in a layer (instance: NULL, or that section's). */
static const char *last_value(const struct loader *L, enum pfr_settings_layer layer,
                              const char *instance, const char *key)
{
    const char *r = NULL;
    for (size_t i = 0; i < L->n; i++) {
        const struct sinkval *e = &L->v[i];
        if (e->layer == layer && !strcmp(e->row->key, key) &&
            (instance ? e->instance && !strcmp(e->instance, instance) : !e->instance))
            r = e->value;
    }
    return r;
}

/* Flags that name the sink from flags alone; the others apply to every sink. */
static bool flag_sink_only(const pfr_setting *row)
{
    return !strcmp(row->key, "url") || !strcmp(row->key, "api_key_file");
}

/* Whether value e goes to sink s at this pass (0 [shipper], 1 [sink NAME], 2 environment,
 * 3 flags). A value of another kind's key is skipped, but not in the sink's own section. */
static bool applies(const struct sinkval *e, const pfr_sink_conf *s, bool is_flag_sink, int pass)
{
    static const enum pfr_settings_layer layer[] = {PFR_SETTINGS_FILE, PFR_SETTINGS_FILE,
                                                    PFR_SETTINGS_ENV, PFR_SETTINGS_ARGS};
    if (e->layer != layer[pass] || !strcmp(e->row->key, "type"))
        return false;
    if (pass == 1)
        return e->instance && !strcmp(e->instance, s->name);
    if (e->instance)
        return false;
    if (e->g != &pfr_sink_settings && e->g != s->kind->settings)
        return false;
    if (pass == 2 || (pass == 3 && flag_sink_only(e->row)))
        return is_flag_sink;
    return true;
}

static int apply_values(pfr_sink_conf *s, const struct loader *L, bool is_flag_sink, char *err,
                        size_t errlen)
{
    for (int pass = 0; pass < 4; pass++) {
        for (size_t i = 0; i < L->n; i++) {
            const struct sinkval *e = &L->v[i];
            if (!applies(e, s, is_flag_sink, pass))
                continue;
            char why[512];
            int rc = pfr_sink_conf_set(s, e->row->key, e->value, why, sizeof(why));
            if (rc)
                return fail(err, errlen, rc, "%s%s[sink %s] %s", e->where, e->where[0] ? ": " : "",
                            s->name, why);
        }
    }
    return 0;
}

/* The sink name: its kind from the section's type, or for the sink from flags its name. */
static int add_sink(pfr_shipper_conf *c, const struct loader *L, const char *name,
                    bool is_flag_sink, char *err, size_t errlen)
{
    const char *type = is_flag_sink ? name : last_value(L, PFR_SETTINGS_FILE, name, "type");
    const pfr_sink_kind *k = pfr_sink_kind_find(type);
    if (!k) {
        char names[128];
        return fail(err, errlen, -EINVAL, "sink %s: no type (%s)", name,
                    pfr_sink_kind_names(", ", " or ", names, sizeof(names)));
    }
    pfr_sink_conf *n = realloc(c->sinks, (c->nsinks + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    c->sinks = n;
    pfr_sink_conf *s = &c->sinks[c->nsinks++];
    int rc = pfr_sink_conf_init(s, k, err, errlen);
    if (rc)
        return rc;
    if (!(s->name = strdup(name)))
        return -ENOMEM;
    if ((rc = apply_values(s, L, is_flag_sink, err, errlen)))
        return rc;
    if (!s->url)
        return fail(err, errlen, -EINVAL, "sink %s: no url", name);
    if (k->check && (rc = k->check(s, err, errlen)))
        return rc;
    if (s->backoff.initial_ms > s->backoff.max_ms)
        s->backoff.initial_ms = s->backoff.max_ms;
    return 0;
}

/* A flag or variable of a kind's own keys where no sink is of that kind. */
static int check_kind_flags(const pfr_shipper_conf *c, const struct loader *L, char *err,
                            size_t errlen)
{
    for (size_t i = 0; c->nsinks && i < L->n; i++) {
        const struct sinkval *e = &L->v[i];
        if (e->layer == PFR_SETTINGS_FILE || e->g == &pfr_sink_settings)
            continue;
        bool any = false;
        for (size_t j = 0; j < c->nsinks; j++)
            any |= c->sinks[j].kind->settings == e->g;
        if (!any)
            return fail(err, errlen, -EINVAL, "%s: %s is a setting of %s sinks and no sink is one",
                        e->where, e->row->key, e->g->name + strlen("sink "));
    }
    return 0;
}

/* Whether --url or PFR_SHIPPER_URL gave the sink from flags its URL. */
static bool url_given(const struct loader *L)
{
    return last_value(L, PFR_SETTINGS_ENV, NULL, "url") ||
           last_value(L, PFR_SETTINGS_ARGS, NULL, "url");
}

/* The file's sinks, then the one from flags and environment (fs_name: its kind, or NULL). */
static int build_sinks(pfr_shipper_conf *c, const struct loader *L, const char *fs_name, char *err,
                       size_t errlen)
{
    bool merged = false;
    for (size_t i = 0; i < L->nnames; i++) {
        bool same = fs_name && !strcmp(L->names[i], fs_name);
        int rc = add_sink(c, L, L->names[i], same, err, errlen);
        if (rc)
            return rc;
        merged |= same;
    }
    if (fs_name && !merged) {
        if (!url_given(L))
            return fail(err, errlen, -EINVAL, "sink %s: --url is required", fs_name);
        int rc = add_sink(c, L, fs_name, true, err, errlen);
        if (rc)
            return rc;
    }
    return check_kind_flags(c, L, err, errlen);
}

/* The name of the sink from flags and environment (its kind): --sink, else PFR_SHIPPER_SINK;
 * NULL if none. With backfill, --sink names the sink to send to, which flags define only when
 * it is a kind's name and --url is given. */
static int flag_sink(pfr_shipper_conf *c, const struct loader *L, const char **out, char *err,
                     size_t errlen)
{
    const char *env_type = last_value(L, PFR_SETTINGS_ENV, NULL, "type");
    bool url = url_given(L);
    char names[128];
    pfr_sink_kind_names("|", "|", names, sizeof(names));
    *out = NULL;
    if (c->cmd == PFR_CMD_BACKFILL) {
        if (!c->sink_flag)
            return fail(err, errlen, -EINVAL, "backfill needs --sink NAME");
        if (!(c->backfill_sink = strdup(c->sink_flag)))
            return -ENOMEM;
        if (pfr_sink_kind_find(c->sink_flag) && url)
            *out = c->sink_flag;
    } else if (c->sink_flag) {
        if (!pfr_sink_kind_find(c->sink_flag))
            return fail(err, errlen, -EINVAL, "--sink: expected %s, got '%s'", names, c->sink_flag);
        *out = c->sink_flag;
    } else {
        *out = env_type;
    }
    if (!*out && url)
        return fail(err, errlen, -EINVAL, "--url needs --sink %s", names);
    return 0;
}

/* ---- secrets ---- */

/* *mode gets the file's permission bits (the daemon warns when others may read it). */
static int read_secret_file(const char *path, char **out, unsigned *mode, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    *mode = fstat(fd, &sb) == 0 ? (unsigned)(sb.st_mode & 07777) : 0;
    char buf[4097];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return fail(err, errlen, -e, "cannot read %s: %s", path, strerror(e));
    buf[n] = 0;
    size_t len = strcspn(buf, "\r\n");
    while (len && isspace((unsigned char)buf[len - 1]))
        len--;
    size_t start = 0;
    while (start < len && isspace((unsigned char)buf[start]))
        start++;
    if (len == start) {
        explicit_bzero(buf, sizeof(buf));
        return fail(err, errlen, -EINVAL, "%s: empty", path);
    }
    *out = strndup(buf + start, len - start);
    explicit_bzero(buf, sizeof(buf));
    return *out ? 0 : -ENOMEM;
}

static int load_secret(pfr_sink_conf *s, bool flag_sink, char *err, size_t errlen)
{
    const char *env = s->api_key_env;
    if (!env && !s->api_key_file && flag_sink && getenv("PFR_SHIPPER_API_KEY"))
        env = "PFR_SHIPPER_API_KEY";
    if (env) {
        const char *v = getenv(env);
        if (!v || !*v)
            return fail(err, errlen, -EINVAL, "sink %s: environment variable %s is empty", s->name,
                        env);
        s->api_key = strdup(v);
        return s->api_key ? 0 : -ENOMEM;
    }
    if (s->api_key_file) {
        char e[300];
        int rc = read_secret_file(s->api_key_file, &s->api_key, &s->key_file_mode, e, sizeof(e));
        if (rc)
            return fail(err, errlen, rc, "sink %s: api key: %s", s->name, e);
        return 0;
    }
    return s->kind->check_key ? s->kind->check_key(s, err, errlen) : 0;
}

/* ---- loading ---- */

static const char usage_text[] =
    "usage: pfr-shipper [run] [options]        ship the ring to its sinks (daemon)\n"
    "       pfr-shipper status [options]       backlog, last success and errors per sink\n"
    "       pfr-shipper backfill --from T --to T --sink NAME [options]\n"
    "                                          re-send a past range (live cursor untouched)\n"
    "       pfr-shipper backfill --store SLICE --sink NAME [options]\n"
    "                                          ship a ring slice (pfr export --ring), with\n"
    "                                          its own state (see docs/operations.md)";

static const char exit_text[] =
    "Exit codes: 0 done (--once/backfill: everything shipped; daemon: stopped by a signal);\n"
    "  1 fatal error (ring, state file, another daemon); 2 bad command line or settings;\n"
    "  69 --once/backfill: a sink delivered nothing and its last answer was an error;\n"
    "  75 --once/backfill: not everything shipped (deadline or signal): try again later.\n"
    "Every sink setting also goes in the config file; see docs/shipper.md.\n";

static const char sample_header[] =
    "/etc/pfr/shipper.ini: pfr-shipper's configuration (docs/configuration.md, docs/shipper.md).\n"
    "\n"
    "Keys are shown commented out with their built-in defaults; `state` is set because the "
    "packaged service keeps its state in its own folder. Layers, later wins: built-in defaults < "
    "this file < environment (PFR_SHIPPER_*) < command-line flags. A bad key or value stops the "
    "shipper at start (exit status 2); so does having no sink, until one is configured: the "
    "example sections at the end show one of each kind.\n"
    "\n"
    "Durations: 250ms, 10s, 1m30s or a bare number of seconds. Sizes: 65536, 512k, 8M, 1G.";

/* --print-settings: the sample ends with an example section of each sink kind. */
static int print_settings(const pfr_settings *s, const char *what, FILE *out, char *err,
                          size_t errlen)
{
    if (pfr_settings_write(s, what, out))
        return fail(err, errlen, -EINVAL, "--print-settings: help, sample or reference");
    for (size_t i = 0; !strcmp(what, "sample") && i < pfr_sink_nkinds; i++) {
        const char *p = pfr_sink_kinds[i]->sample;
        fputs(p ? "\n" : "", out);
        while (p && *p) {
            size_t n = strcspn(p, "\n");
            fprintf(out, "#%.*s\n", (int)n, p);
            p += n + (p[n] == '\n');
        }
    }
    return PFR_CONF_EXIT;
}

/* The settings of c: the program's group bound to c, the sinks' groups collected into L. */
static pfr_settings *settings_new(pfr_shipper_conf *c, struct loader *L, char *err, size_t errlen)
{
    pfr_settings *s = pfr_settings_new("pfr-shipper", PFR_SHIPPER_ENV_PREFIX, usage_text);
    if (!s) {
        fail(err, errlen, -ENOMEM, "out of memory");
        return NULL;
    }
    pfr_settings_set_default_section(s, "shipper");
    pfr_settings_set_sample_header(s, sample_header);
    int rc = pfr_settings_bind(s, &pfr_shipper_settings, c, err, errlen);
    if (!rc)
        rc = pfr_settings_bind_collect(s, &pfr_sink_settings, collect, L, err, errlen);
    for (size_t i = 0; !rc && i < pfr_sink_nkinds; i++)
        if (pfr_sink_kinds[i]->settings)
            rc = pfr_settings_bind_collect(s, pfr_sink_kinds[i]->settings, collect, L, err, errlen);
    if (rc) {
        pfr_settings_free(s);
        return NULL;
    }
    return s;
}

int pfr_shipper_conf_parse_ini(pfr_shipper_conf *c, const char *text, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    struct loader L = {0};
    pfr_settings *s = settings_new(c, &L, err, errlen);
    if (!s)
        return -ENOMEM;
    int rc = pfr_settings_load_text(s, text, strlen(text), "config", NULL, err, errlen);
    if (!rc)
        rc = build_sinks(c, &L, NULL, err, errlen);
    pfr_settings_free(s);
    loader_free(&L);
    return rc;
}

/* argv without the subcommand; c->cmd from it. The array is malloc'ed (the strings are argv's). */
static int subcommand(pfr_shipper_conf *c, int argc, char **argv, char ***out, int *outc, char *err,
                      size_t errlen)
{
    static const char *const cmds[] = {"run", "status", "backfill"};
    int skip = 0;
    if (argc > 1 && argv[1][0] != '-') {
        size_t i = 0;
        while (i < 3 && strcmp(argv[1], cmds[i]))
            i++;
        if (i == 3)
            return fail(err, errlen, -EINVAL, "unknown command '%s' (run, status, backfill)",
                        argv[1]);
        c->cmd = (enum pfr_shipper_cmd)i;
        skip = 1;
    }
    char **a = calloc((size_t)argc + 1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a[0] = argv[0];
    for (int i = 1 + skip; i < argc; i++)
        a[i - skip] = argv[i];
    *out = a;
    *outc = argc - skip;
    return 0;
}

static int backfill_range(pfr_shipper_conf *c, int64_t now_ns, char *err, size_t errlen)
{
    const char *from = c->from_text, *to = c->to_text;
    if (c->cmd != PFR_CMD_BACKFILL)
        return from || to ? fail(err, errlen, -EINVAL, "--from/--to are for backfill") : 0;
    if (!pfr_shipper_conf_sink(c, c->backfill_sink))
        return fail(err, errlen, -EINVAL, "backfill: no sink named '%s'", c->backfill_sink);
    if (!from != !to)
        return fail(err, errlen, -EINVAL, "backfill needs --from and --to");
    /* Neither: from_ns = to_ns = 0, the whole of a ring slice (main.c refuses it for a ring). */
    char why[1024];
    if (from && pfr_time_parse(from, now_ns, &c->from_ns, why, sizeof(why)))
        return fail(err, errlen, -EINVAL, "--from: %s", why);
    if (to && pfr_time_parse(to, now_ns, &c->to_ns, why, sizeof(why)))
        return fail(err, errlen, -EINVAL, "--to: %s", why);
    if (from && c->to_ns <= c->from_ns)
        return fail(err, errlen, -EINVAL, "backfill: --to must be after --from");
    return 0;
}

/* What spans settings, once every layer is in. */
static int finish(pfr_shipper_conf *c, const struct loader *L, int64_t now_ns, char *err,
                  size_t errlen)
{
    int rc;
    if ((!c->store_path && !(c->store_path = strdup(PFR_STORE_DEFAULT_PATH))) ||
        (!c->state_path && !(c->state_path = strdup(PFR_SHIPPER_DEFAULT_STATE))))
        return -ENOMEM;
    const char *fs_name;
    if ((rc = flag_sink(c, L, &fs_name, err, errlen)) ||
        (rc = build_sinks(c, L, fs_name, err, errlen)))
        return rc;
    if (c->cmd == PFR_CMD_RUN && c->nsinks == 0) {
        char names[128];
        return fail(err, errlen, -EINVAL,
                    "no sink: give --sink %s --url URL, or a config file with [sink NAME] "
                    "sections",
                    pfr_sink_kind_names("|", "|", names, sizeof(names)));
    }
    if ((rc = backfill_range(c, now_ns, err, errlen)))
        return rc;
    for (size_t i = 0; c->cmd != PFR_CMD_STATUS && i < c->nsinks; i++) {
        if (c->cmd == PFR_CMD_BACKFILL && strcmp(c->sinks[i].name, c->backfill_sink))
            continue;
        bool is_flag = fs_name && !strcmp(c->sinks[i].name, fs_name);
        if ((rc = load_secret(&c->sinks[i], is_flag, err, errlen)))
            return rc;
    }
    return 0;
}

int pfr_shipper_conf_load(pfr_shipper_conf *c, int argc, char **argv, int64_t now_ns, FILE *out,
                          char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    struct loader L = {0};
    char **args = NULL;
    int nargs = 0;
    int rc = subcommand(c, argc, argv, &args, &nargs, err, errlen);
    if (rc)
        return rc;
    pfr_settings *s = settings_new(c, &L, err, errlen);
    if (!s) {
        free(args);
        return -ENOMEM;
    }
    pfr_settings_args a = {0};
    rc = pfr_settings_load(s, nargs, args, environ, "PFR_SHIPPER_CONFIG",
                           PFR_SHIPPER_DEFAULT_CONFIG, NULL, &a, err, errlen);
    if (!rc && a.help) {
        pfr_settings_write_help(s, out);
        fputs(exit_text, out);
        rc = PFR_CONF_EXIT;
    } else if (!rc && a.version) {
        fprintf(out, "pfr-shipper %s\n", PFR_VERSION);
        rc = PFR_CONF_EXIT;
    } else if (!rc && a.print_settings) {
        rc = print_settings(s, a.print_settings, out, err, errlen);
    } else if (!rc && a.first_operand < nargs) {
        rc = fail(err, errlen, -EINVAL, "unexpected argument '%s'", args[a.first_operand]);
    } else if (!rc && a.config_path && !(c->config_path = strdup(a.config_path))) {
        rc = -ENOMEM;
    }
    if (!rc) {
        /* A ring slice takes its state from --state or PFR_SHIPPER_STATE only. */
        int layer = pfr_settings_layer_of(s, "shipper", "state");
        c->state_given = layer == PFR_SETTINGS_ENV || layer == PFR_SETTINGS_ARGS;
        /* The daemon never gives up, but --once and backfill do (default 10m). */
        if (!c->once && c->cmd == PFR_CMD_RUN && !pfr_settings_is_set(s, "shipper", "deadline"))
            c->deadline_ms = 0;
        rc = finish(c, &L, now_ns, err, errlen);
    }
    pfr_settings_free(s);
    loader_free(&L);
    free(args);
    return rc;
}
