#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse.h"
#include "pfr_ini.h"
#include "pfr_time.h"
#include "pfr_store.h"
#include "svcname.h"

const char *pfr_sink_kind_name(enum pfr_sink_kind k)
{
    switch (k) {
    case PFR_SINK_COROOT:
        return "coroot";
    case PFR_SINK_CLICKHOUSE:
        return "clickhouse";
    case PFR_SINK_NONE:
        break;
    }
    return "none";
}

static enum pfr_sink_kind kind_of(const char *s)
{
    if (s && !strcmp(s, "coroot"))
        return PFR_SINK_COROOT;
    if (s && !strcmp(s, "clickhouse"))
        return PFR_SINK_CLICKHOUSE;
    return PFR_SINK_NONE;
}

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

static int set_str(char **dst, const char *v)
{
    char *d = strdup(v);
    if (!d)
        return -ENOMEM;
    free(*dst);
    *dst = d;
    return 0;
}

void pfr_sink_conf_defaults(pfr_sink_conf *s, enum pfr_sink_kind k)
{
    s->kind = k;
    s->basic_auth = false;
    s->create_tables = false;
    s->ttl_days = 7;
    s->dedup_window = 10000;
    s->stack_refresh_ms = 3600 * 1000;
    s->compress = false;
    s->compress_level = 1;
    /* ClickHouse: bigger inserts make fewer parts to merge (256M saves a fifth of ClickHouse's
     * CPU per chunk in a backfill, docs/benchmarks.md), but a batch must also get through the
     * link within `timeout`: 64M needs ~1.1 MB/s for 60 s. Backfills over fast links: 256M. */
    s->batch.max_chunks = k == PFR_SINK_CLICKHOUSE ? 2000 : 100;
    s->batch.max_bytes = k == PFR_SINK_CLICKHOUSE ? 64ull << 20 : 16ull << 20;
    s->batch.max_age_ms = 10000;
    /* What a ClickHouse batch may hold in memory while it streams (blocks, caches): with the
     * rest of the process, within 64 MiB (docs/benchmarks.md). */
    s->batch.max_memory = 32ull << 20;
    s->backoff.initial_ms = PFR_BACKOFF_INITIAL_MS;
    s->backoff.max_ms = PFR_BACKOFF_MAX_MS;
    s->connect_timeout_ms = 10000;
    s->timeout_ms = 60000;
    s->bandwidth = 0;
    s->tls_insecure = false;
}

static void sink_conf_free(pfr_sink_conf *s)
{
    free(s->name);
    free(s->url);
    if (s->api_key) {
        explicit_bzero(s->api_key, strlen(s->api_key));
        free(s->api_key);
    }
    free(s->api_key_file);
    free(s->api_key_env);
    free(s->user);
    free(s->database);
    free(s->service_prefix);
    free(s->ca_file);
    free(s->client_cert);
    free(s->client_key);
    memset(s, 0, sizeof(*s));
}

void pfr_shipper_conf_free(pfr_shipper_conf *c)
{
    for (size_t i = 0; i < c->nsinks; i++)
        sink_conf_free(&c->sinks[i]);
    free(c->sinks);
    free(c->config_path);
    free(c->store_path);
    free(c->state_path);
    free(c->backfill_sink);
    memset(c, 0, sizeof(*c));
}

uint64_t pfr_shipper_ring_cache(const pfr_shipper_conf *c)
{
    uint64_t m = 0;
    for (size_t i = 0; i < c->nsinks; i++)
        if (c->sinks[i].batch.max_memory > m)
            m = c->sinks[i].batch.max_memory;
    return m ? m / 8 : 0;
}

pfr_sink_conf *pfr_shipper_conf_sink(const pfr_shipper_conf *c, const char *name)
{
    for (size_t i = 0; i < c->nsinks; i++)
        if (!strcmp(c->sinks[i].name, name))
            return &c->sinks[i];
    return NULL;
}

static int set_ms(int64_t *dst, const char *key, const char *v, int64_t min, char *err,
                  size_t errlen)
{
    int64_t ms;
    if (pfr_parse_duration_ms(v, &ms) || ms < min)
        return fail(err, errlen, -EINVAL, "%s: bad duration '%s' (e.g. 500ms, 10s, 5m)", key, v);
    *dst = ms;
    return 0;
}

static int set_size(uint64_t *dst, const char *key, const char *v, char *err, size_t errlen)
{
    if (pfr_parse_size(v, dst))
        return fail(err, errlen, -EINVAL, "%s: bad size '%s' (e.g. 65536, 512k, 8M)", key, v);
    return 0;
}

static int set_bool(bool *dst, const char *key, const char *v, char *err, size_t errlen)
{
    if (pfr_parse_bool(v, dst))
        return fail(err, errlen, -EINVAL, "%s: expected true or false, got '%s'", key, v);
    return 0;
}

static int set_uint(uint64_t *dst, const char *key, const char *v, uint64_t min, uint64_t max,
                    char *err, size_t errlen)
{
    uint64_t u;
    if (pfr_parse_uint(v, max, &u) || u < min)
        return fail(err, errlen, -EINVAL, "%s: expected an integer in %llu..%llu, got '%s'", key,
                    (unsigned long long)min, (unsigned long long)max, v);
    *dst = u;
    return 0;
}

int pfr_sink_conf_set(pfr_sink_conf *s, const char *key, const char *v, char *err, size_t errlen)
{
    uint64_t u = 0;
    int rc;
    if (!strcmp(key, "type")) {
        enum pfr_sink_kind k = kind_of(v);
        if (!k)
            return fail(err, errlen, -EINVAL, "type: expected coroot or clickhouse, got '%s'", v);
        if (s->kind && s->kind != k)
            return fail(err, errlen, -EINVAL, "type: sink is already %s",
                        pfr_sink_kind_name(s->kind));
        s->kind = k;
        return 0;
    }
    if (!strcmp(key, "url")) {
        if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
            return fail(err, errlen, -EINVAL, "url: expected http://... or https://...");
        return set_str(&s->url, v);
    }
    if (!strcmp(key, "api_key") || !strcmp(key, "password"))
        return fail(err, errlen, -EINVAL,
                    "%s: secrets are not taken inline; use %s_file (a file) or %s_env (an "
                    "environment variable)",
                    key, key, key);
    if (!strcmp(key, "api_key_file") || !strcmp(key, "password_file"))
        return set_str(&s->api_key_file, v);
    if (!strcmp(key, "api_key_env") || !strcmp(key, "password_env"))
        return set_str(&s->api_key_env, v);
    if (!strcmp(key, "user"))
        return set_str(&s->user, v);
    if (!strcmp(key, "database")) {
        for (const char *p = v; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_')
                return fail(err, errlen, -EINVAL, "database: letters, digits and _ only");
        if (!*v)
            return fail(err, errlen, -EINVAL, "database: empty");
        return set_str(&s->database, v);
    }
    if (!strcmp(key, "basic_auth"))
        return set_bool(&s->basic_auth, key, v, err, errlen);
    if (!strcmp(key, "create_tables"))
        return set_bool(&s->create_tables, key, v, err, errlen);
    if (!strcmp(key, "create_tables_any_database"))
        return set_bool(&s->create_tables_any_db, key, v, err, errlen);
    if (!strcmp(key, "service_prefix")) {
        if (!pfr_svcname_prefix_ok(v))
            return fail(err, errlen, -EINVAL,
                        "service_prefix: at most %d bytes, no control characters",
                        PFR_SVCNAME_PREFIX_MAX);
        return set_str(&s->service_prefix, v);
    }
    if (!strcmp(key, "ttl_days")) {
        if ((rc = set_uint(&u, key, v, 0, 36500, err, errlen)))
            return rc;
        s->ttl_days = (int64_t)u;
        return 0;
    }
    if (!strcmp(key, "dedup_window"))
        return set_uint(&s->dedup_window, key, v, 1, 10000000, err, errlen);
    if (!strcmp(key, "stack_refresh"))
        return set_ms(&s->stack_refresh_ms, key, v, 1000, err, errlen);
    if (!strcmp(key, "compress"))
        return set_bool(&s->compress, key, v, err, errlen);
    if (!strcmp(key, "compress_level")) {
        if ((rc = set_uint(&u, key, v, 1, 9, err, errlen)))
            return rc;
        s->compress_level = (int)u;
        return 0;
    }
    if (!strcmp(key, "batch_chunks")) {
        if ((rc = set_uint(&u, key, v, 1, 1000000, err, errlen)))
            return rc;
        s->batch.max_chunks = (size_t)u;
        return 0;
    }
    if (!strcmp(key, "batch_bytes"))
        return set_size(&s->batch.max_bytes, key, v, err, errlen);
    if (!strcmp(key, "batch_age"))
        return set_ms(&s->batch.max_age_ms, key, v, 0, err, errlen);
    if (!strcmp(key, "batch_memory")) {
        if ((rc = set_size(&s->batch.max_memory, key, v, err, errlen)))
            return rc;
        if (s->batch.max_memory < (4ull << 20))
            return fail(err, errlen, -EINVAL, "batch_memory: at least 4M");
        return 0;
    }
    if (!strcmp(key, "backoff_initial"))
        return set_ms(&s->backoff.initial_ms, key, v, 1, err, errlen);
    if (!strcmp(key, "backoff_max"))
        return set_ms(&s->backoff.max_ms, key, v, 1, err, errlen);
    if (!strcmp(key, "connect_timeout"))
        return set_ms(&s->connect_timeout_ms, key, v, 1, err, errlen);
    if (!strcmp(key, "timeout"))
        return set_ms(&s->timeout_ms, key, v, 1, err, errlen);
    if (!strcmp(key, "bandwidth"))
        return set_size(&s->bandwidth, key, v, err, errlen);
    if (!strcmp(key, "ca_file"))
        return set_str(&s->ca_file, v);
    if (!strcmp(key, "client_cert"))
        return set_str(&s->client_cert, v);
    if (!strcmp(key, "client_key"))
        return set_str(&s->client_key, v);
    if (!strcmp(key, "tls_insecure"))
        return set_bool(&s->tls_insecure, key, v, err, errlen);
    return fail(err, errlen, -ENOENT, "unknown sink setting '%s'", key);
}

static int global_set(pfr_shipper_conf *c, const char *key, const char *v, char *err, size_t errlen)
{
    if (!strcmp(key, "store"))
        return set_str(&c->store_path, v);
    if (!strcmp(key, "state"))
        return set_str(&c->state_path, v);
    if (!strcmp(key, "log_level")) {
        enum pfr_log_level l;
        if (pfr_log_parse_level(v, &l))
            return fail(err, errlen, -EINVAL, "log_level: expected error, warn, info or debug");
        c->log_level = l;
        return 0;
    }
    if (!strcmp(key, "poll_interval"))
        return set_ms(&c->poll_ms, key, v, 10, err, errlen);
    if (!strcmp(key, "deadline"))
        return set_ms(&c->deadline_ms, key, v, 0, err, errlen);
    if (!strcmp(key, "progress_interval"))
        return set_ms(&c->progress_ms, key, v, 100, err, errlen);
    return fail(err, errlen, -ENOENT, "unknown setting '%s'", key);
}

/* ---- building sinks from key/value lists ---- */

struct kv {
    char *key, *value;
    int line; /* config file line, 0 for flags and environment */
};

struct kvlist {
    struct kv *v;
    size_t n, cap;
};

static int kv_add(struct kvlist *l, const char *k, const char *v, int line)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct kv *n = realloc(l->v, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        l->v = n;
        l->cap = cap;
    }
    struct kv *e = &l->v[l->n];
    e->key = strdup(k);
    e->value = strdup(v);
    e->line = line;
    if (!e->key || !e->value) {
        free(e->key);
        free(e->value);
        return -ENOMEM;
    }
    l->n++;
    return 0;
}

static void kv_free(struct kvlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static const char *kv_get(const struct kvlist *l, const char *key)
{
    const char *r = NULL;
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].key, key))
            r = l->v[i].value;
    return r;
}

struct sinkdef {
    char *name;
    struct kvlist kv;
    int line;
};

struct loader {
    pfr_shipper_conf *c;
    struct kvlist shared; /* sink settings in [shipper]: defaults for every sink */
    struct sinkdef *defs;
    size_t ndefs;
    struct kvlist flag_sink; /* the sink named by --sink / PFR_SHIPPER_SINK */
    struct kvlist flag_all;  /* sink settings from flags: for every sink */
    char *err;
    size_t errlen;
    int rc;
};

static void loader_free(struct loader *L)
{
    kv_free(&L->shared);
    for (size_t i = 0; i < L->ndefs; i++) {
        free(L->defs[i].name);
        kv_free(&L->defs[i].kv);
    }
    free(L->defs);
    kv_free(&L->flag_sink);
    kv_free(&L->flag_all);
}

static bool valid_name(const char *n)
{
    if (!*n || strlen(n) > 64)
        return false;
    for (const char *p = n; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
            return false;
    return true;
}

static struct sinkdef *def_get(struct loader *L, const char *name, int line)
{
    for (size_t i = 0; i < L->ndefs; i++)
        if (!strcmp(L->defs[i].name, name))
            return &L->defs[i];
    struct sinkdef *n = realloc(L->defs, (L->ndefs + 1) * sizeof(*n));
    if (!n)
        return NULL;
    L->defs = n;
    struct sinkdef *d = &L->defs[L->ndefs];
    memset(d, 0, sizeof(*d));
    d->name = strdup(name);
    d->line = line;
    if (!d->name)
        return NULL;
    L->ndefs++;
    return d;
}

/* Is key a sink setting? (checked on a scratch sink so errors show up at their line) */
static int check_sink_key(const char *key, const char *value, char *err, size_t errlen)
{
    pfr_sink_conf s = {0};
    int rc = pfr_sink_conf_set(&s, key, value, err, errlen);
    sink_conf_free(&s);
    return rc;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
    struct loader *L = user;
    int line = 0; /* this libinih does not pass line numbers to handlers */
    if (L->rc)
        return 1;
    char e[256] = "";
    if (!name) /* a section header alone */
        return 1;
    if (!strcmp(section, "shipper") || !section[0]) {
        int rc = global_set(L->c, name, value, e, sizeof(e));
        if (rc == -ENOENT) {
            rc = check_sink_key(name, value, e, sizeof(e));
            if (!rc && !strcmp(name, "type"))
                rc = fail(e, sizeof(e), -EINVAL, "type belongs in a [sink NAME] section");
            if (!rc)
                rc = kv_add(&L->shared, name, value, line);
        }
        if (rc) {
            L->rc = fail(L->err, L->errlen, rc, "[%s] %s: %s", section, name, e);
            return 0;
        }
        return 1;
    }
    if (!strncmp(section, "sink", 4) && strchr(" :.", section[4]) && section[4]) {
        const char *sname = section + 5;
        while (*sname == ' ' || *sname == '"')
            sname++;
        char nm[80];
        snprintf(nm, sizeof(nm), "%s", sname);
        size_t l = strlen(nm);
        while (l && (nm[l - 1] == '"' || nm[l - 1] == ' '))
            nm[--l] = 0;
        if (!valid_name(nm)) {
            L->rc = fail(L->err, L->errlen, -EINVAL,
                         "[%s]: a sink name is letters, digits, '_', '-' and '.'", section);
            return 0;
        }
        int rc = check_sink_key(name, value, e, sizeof(e));
        struct sinkdef *d = rc ? NULL : def_get(L, nm, line);
        if (!rc && (!d || kv_add(&d->kv, name, value, line)))
            rc = -ENOMEM, snprintf(e, sizeof(e), "out of memory");
        if (rc) {
            L->rc = fail(L->err, L->errlen, rc, "[%s] %s: %s", section, name, e);
            return 0;
        }
        return 1;
    }
    L->rc = fail(L->err, L->errlen, -EINVAL,
                 "[%s]: unknown section (expected [shipper] or "
                 "[sink NAME])",
                 section);
    return 0;
}

static int apply_list(pfr_sink_conf *s, const struct kvlist *l, const char *what, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < l->n; i++) {
        char e[256];
        int rc = pfr_sink_conf_set(s, l->v[i].key, l->v[i].value, e, sizeof(e));
        if (rc) {
            if (l->v[i].line)
                return fail(err, errlen, rc, "%s line %d: %s", what, l->v[i].line, e);
            return fail(err, errlen, rc, "%s: %s", what, e);
        }
    }
    return 0;
}

/* A database Coroot reads: "coroot", or "coroot_<project id>" (Coroot's ids: [0-9a-z]). */
static bool coroot_database(const char *db)
{
    if (!strcmp(db, "coroot"))
        return true;
    if (strncmp(db, "coroot_", 7) || !db[7])
        return false;
    for (const char *p = db + 7; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p))
            return false;
    return true;
}

static int add_sink(pfr_shipper_conf *c, const char *name, const struct kvlist *a,
                    const struct kvlist *b, const struct kvlist *d, const struct kvlist *f,
                    char *err, size_t errlen)
{
    const char *type = NULL;
    const struct kvlist *ls[] = {a, b, d, f};
    for (size_t i = 0; i < 4; i++)
        if (ls[i] && kv_get(ls[i], "type"))
            type = kv_get(ls[i], "type");
    enum pfr_sink_kind k = kind_of(type);
    if (!k)
        return fail(err, errlen, -EINVAL, "sink %s: no type (coroot or clickhouse)", name);
    pfr_sink_conf *n = realloc(c->sinks, (c->nsinks + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    c->sinks = n;
    pfr_sink_conf *s = &c->sinks[c->nsinks++];
    memset(s, 0, sizeof(*s));
    pfr_sink_conf_defaults(s, k);
    if (!(s->name = strdup(name)))
        return -ENOMEM;
    static const char *const what[] = {"[shipper]", "[sink]", "environment", "flags"};
    for (size_t i = 0; i < 4; i++) {
        if (!ls[i])
            continue;
        int rc = apply_list(s, ls[i], what[i], err, errlen);
        if (rc)
            return rc;
    }
    if (!s->url)
        return fail(err, errlen, -EINVAL, "sink %s: no url", name);
    if (k == PFR_SINK_CLICKHOUSE) {
        if (!s->user && !(s->user = strdup("default")))
            return -ENOMEM;
        if (!s->database && !(s->database = strdup("default")))
            return -ENOMEM;
        if (s->create_tables && !s->create_tables_any_db && !coroot_database(s->database))
            return fail(err, errlen, -EINVAL,
                        "sink %s: create_tables would create Coroot's tables in database '%s', "
                        "which Coroot does not read: Coroot keeps a project in 'coroot_<project "
                        "id>' (a global ClickHouse) or 'coroot'; give --database, or set "
                        "create_tables_any_database (--create-tables-any-database) if '%s' is "
                        "the database of the project's ClickHouse integration",
                        name, s->database, s->database);
    }
    if (s->backoff.initial_ms > s->backoff.max_ms)
        s->backoff.initial_ms = s->backoff.max_ms;
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
    if (s->kind == PFR_SINK_COROOT)
        return fail(err, errlen, -EINVAL,
                    "sink %s: Coroot needs an API key (api_key_file, api_key_env, "
                    "--api-key-file or PFR_SHIPPER_API_KEY)",
                    s->name);
    return 0;
}

/* ---- command line ---- */

static void usage(FILE *o)
{
    fputs("usage: pfr-shipper [run] [options]        ship the ring to its sinks (daemon)\n"
          "       pfr-shipper status [options]       backlog, last success and errors per sink\n"
          "       pfr-shipper backfill --from T --to T --sink NAME [options]\n"
          "                                          re-send a past range (live cursor untouched)\n"
          "       pfr-shipper backfill --store SLICE --sink NAME [options]\n"
          "                                          ship a ring slice (pfr export --ring), with\n"
          "                                          its own state (see docs/operations.md)\n"
          "\n"
          "  --store PATH            ring database (env PFR_SHIPPER_STORE or PFR_STORE; "
          "default " PFR_STORE_DEFAULT_PATH ")\n"
          "  --state PATH            the shipper's own state (env PFR_SHIPPER_STATE; "
          "default " PFR_SHIPPER_DEFAULT_STATE ")\n"
          "  --config FILE           INI file with [shipper] and [sink NAME] sections\n"
          "                          (env PFR_SHIPPER_CONFIG; default " PFR_SHIPPER_DEFAULT_CONFIG
          " if it exists)\n"
          "  --sink coroot|clickhouse  a sink from flags, named after its type (env "
          "PFR_SHIPPER_SINK);\n"
          "                          with backfill: the name of the sink to re-send to\n"
          "  --url URL               its base URL (env PFR_SHIPPER_URL)\n"
          "  --api-key-file FILE     Coroot API key / ClickHouse password, first line of FILE\n"
          "                          (or the key itself in env PFR_SHIPPER_API_KEY);\n"
          "  --password-file FILE    the same\n"
          "  --user NAME             ClickHouse user (env PFR_SHIPPER_USER; default default)\n"
          "  --database NAME         ClickHouse database (env PFR_SHIPPER_DATABASE; default "
          "default)\n"
          "  --create-tables         ClickHouse: create Coroot's tables if missing (in a\n"
          "                          database named coroot or coroot_<project id>)\n"
          "  --create-tables-any-database  ... in a database of any other name too\n"
          "  --service-prefix P      put P before every service name shipped (e.g. site1-)\n"
          "  --ttl-days N            ClickHouse: TTL of the tables it creates (7; 0 = none)\n"
          "  --stack-refresh DURATION  ClickHouse: how far ahead a stack row's LastSeen reaches "
          "(1h)\n"
          "  --basic-auth            ClickHouse: HTTP basic auth instead of X-ClickHouse-User/Key\n"
          "  --once                  ship what is there, then exit: 0 = all shipped; 75 = not all\n"
          "                          (deadline, signal); 69 = a sink delivered nothing and its\n"
          "                          last answer was an error (wrong key or URL, refused)\n"
          "  --retry-rejected        first try again the chunks sinks rejected before\n"
          "  --deadline DURATION     --once / backfill: give up after this long (default 10m)\n"
          "  --batch-chunks N        chunks per batch (coroot 100, clickhouse 2000)\n"
          "  --batch-bytes SIZE      request bytes per batch (coroot 16M, clickhouse 64M)\n"
          "  --batch-memory SIZE     ClickHouse: memory for sending a batch (32M)\n"
          "  --batch-age DURATION    send a partial batch once its oldest chunk is this old (10s)\n"
          "  --backoff-initial DURATION  first retry delay (1s)\n"
          "  --backoff-max DURATION  retry delay cap, also for Retry-After (5m)\n"
          "  --connect-timeout DURATION  (10s)    --timeout DURATION  whole request (60s)\n"
          "  --bandwidth RATE        bytes/s cap per sink, e.g. 256k (default unlimited)\n"
          "  --compress, --no-compress  gzip ClickHouse request bodies (default off)\n"
          "  --ca-file FILE          CA bundle for https   --insecure  no TLS verification\n"
          "  --poll DURATION         how often an idle shipper looks at the ring (5s)\n"
          "  --from T --to T         backfill range: now, -2h, @UNIX, 2024-05-01T10:00:00Z\n"
          "                          (of a slice: default its whole range)\n"
          "  --progress DURATION     backfill: period of the progress line (2s)\n"
          "  --json                  status as JSON\n"
          "  --log-level LEVEL       error, warn, info or debug (env PFR_SHIPPER_LOG_LEVEL)\n"
          "  -h, --help, --version\n"
          "Exit codes: 0 done (--once/backfill: everything shipped; daemon: stopped by a signal);\n"
          "  1 fatal error (ring, state file, another daemon); 2 bad command line or settings;\n"
          "  69 --once/backfill: a sink delivered nothing and its last answer was an error;\n"
          "  75 --once/backfill: not everything shipped (deadline or signal): try again later.\n"
          "Every sink setting also goes in the config file; see docs/shipper.md.\n",
          o);
}

enum {
    O_STORE = 256,
    O_STATE,
    O_CONFIG,
    O_SINK,
    O_URL,
    O_KEYFILE,
    O_USER,
    O_DATABASE,
    O_CREATE,
    O_CREATE_ANY,
    O_SVC_PREFIX,
    O_BASIC,
    O_ONCE,
    O_RETRY_REJ,
    O_DEADLINE,
    O_BCHUNKS,
    O_BBYTES,
    O_BAGE,
    O_BMEM,
    O_BOFF_INIT,
    O_BOFF_MAX,
    O_CTIMEOUT,
    O_TIMEOUT,
    O_BANDWIDTH,
    O_COMPRESS,
    O_NOCOMPRESS,
    O_CAFILE,
    O_INSECURE,
    O_POLL,
    O_FROM,
    O_TO,
    O_JSON,
    O_LOGLEVEL,
    O_VERSION,
    O_FORBIDDEN,
    O_TTL,
    O_REFRESH,
    O_PROGRESS,
};

static const struct option longopts[] = {
    {"store", required_argument, 0, O_STORE},
    {"state", required_argument, 0, O_STATE},
    {"config", required_argument, 0, O_CONFIG},
    {"sink", required_argument, 0, O_SINK},
    {"url", required_argument, 0, O_URL},
    {"api-key-file", required_argument, 0, O_KEYFILE},
    {"password-file", required_argument, 0, O_KEYFILE},
    {"user", required_argument, 0, O_USER},
    {"database", required_argument, 0, O_DATABASE},
    {"create-tables", no_argument, 0, O_CREATE},
    {"create-tables-any-database", no_argument, 0, O_CREATE_ANY},
    {"service-prefix", required_argument, 0, O_SVC_PREFIX},
    {"basic-auth", no_argument, 0, O_BASIC},
    {"once", no_argument, 0, O_ONCE},
    {"retry-rejected", no_argument, 0, O_RETRY_REJ},
    {"deadline", required_argument, 0, O_DEADLINE},
    {"batch-chunks", required_argument, 0, O_BCHUNKS},
    {"batch-bytes", required_argument, 0, O_BBYTES},
    {"batch-age", required_argument, 0, O_BAGE},
    {"batch-memory", required_argument, 0, O_BMEM},
    {"backoff-initial", required_argument, 0, O_BOFF_INIT},
    {"backoff-max", required_argument, 0, O_BOFF_MAX},
    {"connect-timeout", required_argument, 0, O_CTIMEOUT},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {"bandwidth", required_argument, 0, O_BANDWIDTH},
    {"compress", no_argument, 0, O_COMPRESS},
    {"no-compress", no_argument, 0, O_NOCOMPRESS},
    {"ca-file", required_argument, 0, O_CAFILE},
    {"insecure", no_argument, 0, O_INSECURE},
    {"ttl-days", required_argument, 0, O_TTL},
    {"stack-refresh", required_argument, 0, O_REFRESH},
    {"poll", required_argument, 0, O_POLL},
    {"progress", required_argument, 0, O_PROGRESS},
    {"from", required_argument, 0, O_FROM},
    {"to", required_argument, 0, O_TO},
    {"json", no_argument, 0, O_JSON},
    {"log-level", required_argument, 0, O_LOGLEVEL},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, O_VERSION},
    {"api-key", required_argument, 0, O_FORBIDDEN},
    {"password", required_argument, 0, O_FORBIDDEN},
    {"key", required_argument, 0, O_FORBIDDEN},
    {0, 0, 0, 0},
};

/* The key a sink-level flag sets, or NULL. */
static const char *flag_key(int opt, bool *for_flag_sink_only)
{
    *for_flag_sink_only = false;
    switch (opt) {
    case O_URL:
        *for_flag_sink_only = true;
        return "url";
    case O_KEYFILE:
        *for_flag_sink_only = true;
        return "api_key_file";
    case O_USER:
        return "user";
    case O_DATABASE:
        return "database";
    case O_CREATE:
        return "create_tables";
    case O_CREATE_ANY:
        return "create_tables_any_database";
    case O_SVC_PREFIX:
        return "service_prefix";
    case O_BASIC:
        return "basic_auth";
    case O_BCHUNKS:
        return "batch_chunks";
    case O_BBYTES:
        return "batch_bytes";
    case O_BAGE:
        return "batch_age";
    case O_BMEM:
        return "batch_memory";
    case O_BOFF_INIT:
        return "backoff_initial";
    case O_BOFF_MAX:
        return "backoff_max";
    case O_CTIMEOUT:
        return "connect_timeout";
    case O_TIMEOUT:
        return "timeout";
    case O_BANDWIDTH:
        return "bandwidth";
    case O_COMPRESS:
        return "compress";
    case O_NOCOMPRESS:
        return "compress";
    case O_CAFILE:
        return "ca_file";
    case O_INSECURE:
        return "tls_insecure";
    case O_TTL:
        return "ttl_days";
    case O_REFRESH:
        return "stack_refresh";
    }
    return NULL;
}

static bool is_clickhouse_only(const char *key)
{
    static const char *const ch[] = {
        "user",       "database", "create_tables", "create_tables_any_database",
        "basic_auth", "ttl_days", "stack_refresh", "compress"};
    for (size_t i = 0; i < sizeof(ch) / sizeof(ch[0]); i++)
        if (!strcmp(key, ch[i]))
            return true;
    return false;
}

static int env_layer(struct loader *L, char *err, size_t errlen)
{
    pfr_shipper_conf *c = L->c;
    const char *v;
    int rc;
    if ((v = getenv("PFR_STORE")) && *v && (rc = set_str(&c->store_path, v)))
        return rc;
    if ((v = getenv("PFR_SHIPPER_STORE")) && *v && (rc = set_str(&c->store_path, v)))
        return rc;
    if ((v = getenv("PFR_SHIPPER_STATE")) && *v) {
        if ((rc = set_str(&c->state_path, v)))
            return rc;
        c->state_given = true;
    }
    if ((v = getenv("PFR_SHIPPER_LOG_LEVEL")) && *v &&
        (rc = global_set(c, "log_level", v, err, errlen)))
        return rc;
    static const char *const sink_env[][2] = {{"PFR_SHIPPER_SINK", "type"},
                                              {"PFR_SHIPPER_URL", "url"},
                                              {"PFR_SHIPPER_API_KEY_FILE", "api_key_file"},
                                              {"PFR_SHIPPER_USER", "user"},
                                              {"PFR_SHIPPER_DATABASE", "database"}};
    for (size_t i = 0; i < sizeof(sink_env) / sizeof(sink_env[0]); i++) {
        if (!(v = getenv(sink_env[i][0])) || !*v)
            continue;
        char e[256];
        if ((rc = check_sink_key(sink_env[i][1], v, e, sizeof(e))))
            return fail(err, errlen, rc, "%s: %s", sink_env[i][0], e);
        if ((rc = kv_add(&L->flag_sink, sink_env[i][1], v, 0)))
            return rc;
    }
    return 0;
}

int pfr_shipper_conf_parse_ini(pfr_shipper_conf *c, const char *text, char *err, size_t errlen)
{
    struct loader L = {.c = c, .err = err, .errlen = errlen};
    char e[512] = "";
    int line = pfr_ini_parse_text(text, strlen(text), "config", NULL, ini_cb, &L, e, sizeof(e));
    int rc = L.rc;
    if (!rc && line < 0)
        rc = fail(err, errlen, line, "%s", e);
    else if (!rc && line != 0)
        rc = fail(err, errlen, -EINVAL, "line %d: syntax error", line);
    for (size_t i = 0; !rc && i < L.ndefs; i++)
        rc = add_sink(c, L.defs[i].name, &L.shared, &L.defs[i].kv, NULL, NULL, err, errlen);
    loader_free(&L);
    return rc;
}

int pfr_shipper_conf_load(pfr_shipper_conf *c, int argc, char **argv, int64_t now_ns, FILE *out,
                          char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->log_level = PFR_LOG_INFO;
    c->poll_ms = 5000;
    c->deadline_ms = 10 * 60 * 1000;
    c->progress_ms = 2000;
    struct loader L = {.c = c, .err = err, .errlen = errlen};
    int rc = 0;
    const char *sink_flag = NULL, *config_flag = NULL, *from = NULL, *to = NULL;
    bool deadline_given = false;

    int argi = 1;
    if (argc > 1 && argv[1][0] != '-') {
        if (!strcmp(argv[1], "run"))
            c->cmd = PFR_CMD_RUN;
        else if (!strcmp(argv[1], "status"))
            c->cmd = PFR_CMD_STATUS;
        else if (!strcmp(argv[1], "backfill"))
            c->cmd = PFR_CMD_BACKFILL;
        else
            return fail(err, errlen, -EINVAL, "unknown command '%s' (run, status, backfill)",
                        argv[1]);
        argi = 2;
    }
    /* Flags are read first (into lists) and applied last, over the file and environment. */
    struct kvlist flag_globals = {0};
    int opt;
    optind = argi;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        bool only_flag_sink;
        const char *key = flag_key(opt, &only_flag_sink);
        if (key) {
            const char *v = optarg ? optarg : (opt == O_NOCOMPRESS ? "false" : "true");
            char e[256];
            if ((rc = check_sink_key(key, v, e, sizeof(e)))) {
                rc = fail(err, errlen, rc, "%s: %s", argv[optind - 1], e);
                goto out;
            }
            if ((rc = kv_add(only_flag_sink ? &L.flag_sink : &L.flag_all, key, v, 0)))
                goto out;
            continue;
        }
        switch (opt) {
        case 'h':
            usage(out);
            rc = PFR_CONF_EXIT;
            goto out;
        case O_VERSION:
            fprintf(out, "pfr-shipper %s\n", PFR_VERSION);
            rc = PFR_CONF_EXIT;
            goto out;
        case O_FORBIDDEN:
            rc = fail(err, errlen, -EINVAL,
                      "secrets are not taken on the command line (other users can read it): "
                      "use --api-key-file FILE or the environment variable PFR_SHIPPER_API_KEY");
            goto out;
        case O_STORE:
            rc = kv_add(&flag_globals, "store", optarg, 0);
            break;
        case O_STATE:
            rc = kv_add(&flag_globals, "state", optarg, 0);
            c->state_given = true;
            break;
        case O_LOGLEVEL:
            rc = kv_add(&flag_globals, "log_level", optarg, 0);
            break;
        case O_POLL:
            rc = kv_add(&flag_globals, "poll_interval", optarg, 0);
            break;
        case O_PROGRESS:
            rc = kv_add(&flag_globals, "progress_interval", optarg, 0);
            break;
        case O_DEADLINE:
            rc = kv_add(&flag_globals, "deadline", optarg, 0);
            deadline_given = true;
            break;
        case O_CONFIG:
            config_flag = optarg;
            break;
        case O_SINK:
            sink_flag = optarg;
            break;
        case O_ONCE:
            c->once = true;
            break;
        case O_RETRY_REJ:
            c->retry_rejected = true;
            break;
        case O_JSON:
            c->json = true;
            break;
        case O_FROM:
            from = optarg;
            break;
        case O_TO:
            to = optarg;
            break;
        case ':':
            rc = fail(err, errlen, -EINVAL, "%s needs a value", argv[optind - 1]);
            goto out;
        default:
            rc = fail(err, errlen, -EINVAL, "unknown option %s (see --help)", argv[optind - 1]);
            goto out;
        }
        if (rc)
            goto out;
    }
    if (optind < argc) {
        rc = fail(err, errlen, -EINVAL, "unexpected argument '%s'", argv[optind]);
        goto out;
    }

    /* The config file. */
    const char *path = config_flag ? config_flag : getenv("PFR_SHIPPER_CONFIG");
    if (path && !*path)
        path = NULL;
    if (!path && access(PFR_SHIPPER_DEFAULT_CONFIG, F_OK) == 0)
        path = PFR_SHIPPER_DEFAULT_CONFIG;
    if (path) {
        if ((rc = set_str(&c->config_path, path)))
            goto out;
        FILE *f = fopen(path, "r");
        if (!f) {
            rc = fail(err, errlen, -errno, "config %s: %s", path, strerror(errno));
            goto out;
        }
        char ie[512] = "";
        int line = pfr_ini_parse(f, path, NULL, ini_cb, &L, ie, sizeof(ie));
        fclose(f);
        if (line < 0 && !L.rc) { /* a line too long, a duplicate, an unreadable file */
            rc = fail(err, errlen, line, "config %s", ie);
            goto out;
        }
        if (L.rc) {
            char e[512];
            snprintf(e, sizeof(e), "%s", err);
            rc = fail(err, errlen, L.rc, "config %s: %s", path, e);
            goto out;
        }
        if (line) {
            rc = fail(err, errlen, -EINVAL, "config %s line %d: syntax error", path, line);
            goto out;
        }
    }
    if ((rc = env_layer(&L, err, errlen)))
        goto out;
    for (size_t i = 0; i < flag_globals.n; i++)
        if ((rc = global_set(c, flag_globals.v[i].key, flag_globals.v[i].value, err, errlen)))
            goto out;
    if (!c->store_path && (rc = set_str(&c->store_path, PFR_STORE_DEFAULT_PATH)))
        goto out;
    if (!c->state_path && (rc = set_str(&c->state_path, PFR_SHIPPER_DEFAULT_STATE)))
        goto out;
    if (!c->once && c->cmd == PFR_CMD_RUN && !deadline_given)
        c->deadline_ms = 0;

    /* The sink from flags/environment: its name is its type. */
    const char *env_type = kv_get(&L.flag_sink, "type");
    const char *fs_name = NULL;
    if (c->cmd == PFR_CMD_BACKFILL) {
        if (!sink_flag) {
            rc = fail(err, errlen, -EINVAL, "backfill needs --sink NAME");
            goto out;
        }
        if ((rc = set_str(&c->backfill_sink, sink_flag)))
            goto out;
        if (kind_of(sink_flag) && kv_get(&L.flag_sink, "url"))
            fs_name = sink_flag;
    } else if (sink_flag) {
        if (!kind_of(sink_flag)) {
            rc = fail(err, errlen, -EINVAL, "--sink: expected coroot or clickhouse, got '%s'",
                      sink_flag);
            goto out;
        }
        fs_name = sink_flag;
    } else if (env_type) {
        fs_name = env_type;
    }
    if (fs_name && !kv_get(&L.flag_sink, "type") && (rc = kv_add(&L.flag_sink, "type", fs_name, 0)))
        goto out;
    if (fs_name && env_type && strcmp(env_type, fs_name)) {
        /* --sink wins over PFR_SHIPPER_SINK */
        for (size_t i = 0; i < L.flag_sink.n; i++)
            if (!strcmp(L.flag_sink.v[i].key, "type") &&
                (rc = set_str(&L.flag_sink.v[i].value, fs_name)))
                goto out;
    }
    if (!fs_name && kv_get(&L.flag_sink, "url")) {
        rc = fail(err, errlen, -EINVAL, "--url needs --sink coroot|clickhouse");
        goto out;
    }

    bool flag_sink_merged = false;
    for (size_t i = 0; i < L.ndefs; i++) {
        bool same = fs_name && !strcmp(L.defs[i].name, fs_name);
        if ((rc = add_sink(c, L.defs[i].name, &L.shared, &L.defs[i].kv, same ? &L.flag_sink : NULL,
                           &L.flag_all, err, errlen)))
            goto out;
        flag_sink_merged |= same;
    }
    if (fs_name && !flag_sink_merged) {
        if (!kv_get(&L.flag_sink, "url")) {
            rc = fail(err, errlen, -EINVAL, "sink %s: --url is required", fs_name);
            goto out;
        }
        if ((rc = add_sink(c, fs_name, &L.shared, NULL, &L.flag_sink, &L.flag_all, err, errlen)))
            goto out;
    }
    /* Settings that only mean something for ClickHouse, given where no sink is ClickHouse. */
    bool any_ch = false;
    for (size_t i = 0; i < c->nsinks; i++)
        any_ch |= c->sinks[i].kind == PFR_SINK_CLICKHOUSE;
    const struct kvlist *fl[] = {&L.flag_sink, &L.flag_all};
    for (size_t k = 0; c->nsinks && !any_ch && k < 2; k++) {
        for (size_t i = 0; i < fl[k]->n; i++) {
            if (is_clickhouse_only(fl[k]->v[i].key)) {
                rc = fail(err, errlen, -EINVAL,
                          "%s is a ClickHouse setting and no sink is "
                          "ClickHouse",
                          fl[k]->v[i].key);
                goto out;
            }
        }
    }

    if (c->cmd == PFR_CMD_RUN && c->nsinks == 0) {
        rc = fail(err, errlen, -EINVAL,
                  "no sink: give --sink coroot|clickhouse --url URL, or a config file with "
                  "[sink NAME] sections");
        goto out;
    }
    if (c->cmd == PFR_CMD_BACKFILL) {
        if (!pfr_shipper_conf_sink(c, c->backfill_sink)) {
            rc = fail(err, errlen, -EINVAL, "backfill: no sink named '%s'", c->backfill_sink);
            goto out;
        }
        if (!from != !to) {
            rc = fail(err, errlen, -EINVAL, "backfill needs --from and --to");
            goto out;
        }
        /* Neither: from_ns = to_ns = 0, the whole of a ring slice (main.c refuses it for a
         * ring). */
        char why[1024];
        if (from && pfr_time_parse(from, now_ns, &c->from_ns, why, sizeof(why))) {
            rc = fail(err, errlen, -EINVAL, "--from: %s", why);
            goto out;
        }
        if (to && pfr_time_parse(to, now_ns, &c->to_ns, why, sizeof(why))) {
            rc = fail(err, errlen, -EINVAL, "--to: %s", why);
            goto out;
        }
        if (from && c->to_ns <= c->from_ns) {
            rc = fail(err, errlen, -EINVAL, "backfill: --to must be after --from");
            goto out;
        }
    } else if (from || to) {
        rc = fail(err, errlen, -EINVAL, "--from/--to are for backfill");
        goto out;
    }
    if (c->cmd != PFR_CMD_STATUS) {
        for (size_t i = 0; i < c->nsinks; i++) {
            if (c->cmd == PFR_CMD_BACKFILL && strcmp(c->sinks[i].name, c->backfill_sink))
                continue;
            bool is_flag = fs_name && !strcmp(c->sinks[i].name, fs_name);
            if ((rc = load_secret(&c->sinks[i], is_flag, err, errlen)))
                goto out;
        }
    }
out:
    kv_free(&flag_globals);
    loader_free(&L);
    return rc;
}
