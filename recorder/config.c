/* Configuration layering for pfr-recorder: defaults < file < environment < flags. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pfr_store.h"

/* Settings known by key; the same key is used in the file, as PFR_<KEY> in the environment and
 * as --<key with dashes> on the command line. */
static const char *const keys[] = {
    "store",
    "interval",
    "cpu_hz",
    "max_store_bytes",
    "log_level",
    "stack_map_entries",
    "count_map_entries",
    "sym_cache_bytes",
    "dwarf",
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static void set_defaults(pfr_config *c)
{
    memset(c, 0, sizeof(*c));
    c->interval_ns = 10 * 1000000000ll;
    c->cpu_hz = 100;
    c->max_store_bytes = 0;
    c->log_level = PFR_LOG_INFO;
    c->stack_map_entries = 0; /* sized from CPUs, rate and interval at start */
    c->count_map_entries = 0;
    c->sym_cache_bytes = 32ull << 20;
    c->dwarf = true;
}

void pfr_config_map_sizes(const pfr_config *c, unsigned ncpus, unsigned *stacks, unsigned *counts)
{
    /* one interval's samples, of which about half are distinct kernel or user stacks; a full
     * map keeps the sample (its stack shows as lost) and counts it */
    uint64_t samples = (uint64_t)ncpus * c->cpu_hz * (uint64_t)(c->interval_ns / 1000000) / 1000;
    unsigned s = 8192;
    while (s < samples / 2 && s < 65536)
        s *= 2;
    *stacks = c->stack_map_entries ? c->stack_map_entries : s;
    *counts = c->count_map_entries ? c->count_map_entries : 2 * *stacks;
}

void pfr_config_free(pfr_config *c)
{
    free(c->store_path);
    free(c->config_path);
    pfr_service_rules_free(&c->rules);
    memset(c, 0, sizeof(*c));
}

static int parse_u64(const char *v, uint64_t min, uint64_t max, bool size_suffix, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!v[0] || v[0] == '-')
        return -EINVAL;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v)
        return -EINVAL;
    unsigned shift = 0;
    if (size_suffix && *end) {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            return -EINVAL;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
    }
    if (*end)
        return -EINVAL;
    if (shift && x > (ULLONG_MAX >> shift))
        return -ERANGE;
    x <<= shift;
    if (x < min || x > max)
        return -ERANGE;
    *out = x;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on")) {
        *out = true;
        return 0;
    }
    if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
        !strcasecmp(v, "off")) {
        *out = false;
        return 0;
    }
    return -EINVAL;
}

int pfr_config_set(pfr_config *c, const char *key, const char *value, char *err, size_t errlen)
{
    uint64_t u;
    if (!strcmp(key, "store")) {
        if (!value[0]) {
            snprintf(err, errlen, "store: empty path");
            return -EINVAL;
        }
        char *s = strdup(value);
        if (!s)
            return -ENOMEM;
        free(c->store_path);
        c->store_path = s;
        return 0;
    }
    if (!strcmp(key, "interval")) {
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(d) || d < 0.2 || d > 3600) {
            snprintf(err, errlen, "interval: '%s' is not a number of seconds in [0.2, 3600]",
                     value);
            return -EINVAL;
        }
        c->interval_ns = (int64_t)llround(d * 1e9);
        return 0;
    }
    if (!strcmp(key, "cpu_hz")) {
        if (parse_u64(value, 1, 10000, false, &u)) {
            snprintf(err, errlen, "cpu_hz: '%s' is not an integer in [1, 10000]", value);
            return -EINVAL;
        }
        c->cpu_hz = (unsigned)u;
        return 0;
    }
    if (!strcmp(key, "max_store_bytes")) {
        if (parse_u64(value, 1 << 20, UINT64_MAX, true, &u)) {
            snprintf(err, errlen, "max_store_bytes: '%s' is not a size of at least 1M", value);
            return -EINVAL;
        }
        c->max_store_bytes = u;
        return 0;
    }
    if (!strcmp(key, "log_level")) {
        enum pfr_log_level l;
        if (pfr_log_parse_level(value, &l)) {
            snprintf(err, errlen, "log_level: '%s' is not one of error, warn, info, debug", value);
            return -EINVAL;
        }
        c->log_level = l;
        return 0;
    }
    if (!strcmp(key, "stack_map_entries") || !strcmp(key, "count_map_entries")) {
        if (parse_u64(value, 0, 1u << 22, false, &u) || (u > 0 && u < 64)) {
            snprintf(err, errlen, "%s: '%s' is not 0 (automatic) or an integer in [64, 4194304]",
                     key, value);
            return -EINVAL;
        }
        if (key[0] == 's')
            c->stack_map_entries = (unsigned)u;
        else
            c->count_map_entries = (unsigned)u;
        return 0;
    }
    if (!strcmp(key, "sym_cache_bytes")) {
        if (parse_u64(value, 1 << 20, 1ull << 40, true, &u)) {
            snprintf(err, errlen, "sym_cache_bytes: '%s' is not a size of at least 1M", value);
            return -EINVAL;
        }
        c->sym_cache_bytes = u;
        return 0;
    }
    if (!strcmp(key, "symbolize_budget")) {
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(d) || d < 0 || d > 3600) {
            snprintf(err, errlen, "symbolize_budget: '%s' is not a number of seconds in [0, 3600]",
                     value);
            return -EINVAL;
        }
        c->symbolize_budget_ns = (int64_t)llround(d * 1e9);
        return 0;
    }
    if (!strcmp(key, "dwarf")) {
        if (parse_bool(value, &c->dwarf)) {
            snprintf(err, errlen, "dwarf: '%s' is not a boolean", value);
            return -EINVAL;
        }
        return 0;
    }
    snprintf(err, errlen, "unknown setting '%s'", key);
    return -EINVAL;
}

/* ---- config file ---- */

struct ini_ctx {
    pfr_config *c;
    char *err;
    size_t errlen;
    int rc;
};

static int config_ini_line(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *x = user;
    char why[256];
    int rc = 0;
    if (!strcmp(section, "recorder")) {
        rc = pfr_config_set(x->c, name, value, why, sizeof(why));
    } else if (!strcmp(section, "service")) {
        if (strcmp(name, "rule") != 0) {
            snprintf(why, sizeof(why),
                     "[service]: unknown key '%s' (expected rule = KIND PATTERN "
                     "SERVICE)",
                     name);
            rc = -EINVAL;
        } else {
            rc = pfr_service_rules_add(&x->c->rules, value, why, sizeof(why));
        }
    } else {
        return 1; /* other programs' sections of a shared file */
    }
    if (rc) {
        if (x->rc == 0) {
            snprintf(x->err, x->errlen, "%s", why);
            x->rc = rc;
        }
        return 0;
    }
    return 1;
}

static int load_file(pfr_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(e));
        return -e;
    }
    char why[384] = "";
    struct ini_ctx x = {.c = c, .err = why, .errlen = sizeof(why)};
    int line = ini_parse_file(f, config_ini_line, &x);
    fclose(f);
    if (line == 0)
        return 0;
    if (line < 0) {
        snprintf(err, errlen, "cannot read config file %s", path);
        return -EIO;
    }
    if (why[0])
        snprintf(err, errlen, "%s:%d: %s", path, line, why);
    else
        snprintf(err, errlen, "%s:%d: syntax error", path, line);
    return x.rc ? x.rc : -EINVAL;
}

/* ---- command line ---- */

struct flag_kv {
    const char *key;
    const char *value;
};

struct flags {
    struct flag_kv *kv;
    size_t n;
    const char **rules;
    size_t nrules;
    const char *config;
    bool help, version;
};

enum {
    OPT_STORE = 256,
    OPT_INTERVAL,
    OPT_CPU_HZ,
    OPT_MAX_STORE,
    OPT_LOG_LEVEL,
    OPT_STACK_ENTRIES,
    OPT_COUNT_ENTRIES,
    OPT_SYM_CACHE,
    OPT_NO_DWARF,
    OPT_BUDGET,
    OPT_CONFIG,
    OPT_RULE,
    OPT_HELP,
    OPT_VERSION,
};

static const struct option long_opts[] = {
    {"store", required_argument, NULL, OPT_STORE},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"cpu-hz", required_argument, NULL, OPT_CPU_HZ},
    {"max-store-bytes", required_argument, NULL, OPT_MAX_STORE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"stack-map-entries", required_argument, NULL, OPT_STACK_ENTRIES},
    {"count-map-entries", required_argument, NULL, OPT_COUNT_ENTRIES},
    {"sym-cache-bytes", required_argument, NULL, OPT_SYM_CACHE},
    {"no-dwarf", no_argument, NULL, OPT_NO_DWARF},
    {"symbolize-budget", required_argument, NULL, OPT_BUDGET},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"service-rule", required_argument, NULL, OPT_RULE},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static const char usage[] =
    "Usage: pfr-recorder [OPTIONS]\n"
    "Always-on whole-host CPU profiler: samples every CPU with eBPF and writes one profile per\n"
    "service per interval to the local ring.\n"
    "\n"
    "  --store PATH             ring database (env PFR_STORE; default " PFR_STORE_DEFAULT_PATH ")\n"
    "  --interval SECONDS       profile length (env PFR_INTERVAL; default 10)\n"
    "  --cpu-hz N               samples per second per CPU (env PFR_CPU_HZ; default 100)\n"
    "  --max-store-bytes N      ring size cap, K/M/G suffixes (env PFR_MAX_STORE_BYTES;\n"
    "                           default 512M)\n"
    "  --config FILE            INI file with [recorder] and [service] sections (env PFR_CONFIG;\n"
    "                           default " PFR_RECORDER_DEFAULT_CONFIG " if it exists)\n"
    "  --log-level LEVEL        error, warn, info or debug (env PFR_LOG_LEVEL; default info)\n"
    "  --service-rule 'KIND PATTERN SERVICE'\n"
    "                           name processes whose KIND (comm, exe, cgroup, container) matches\n"
    "                           the glob PATTERN as SERVICE; repeatable, before the file's rules\n"
    "  --stack-map-entries N    stacks kept per interval (default 0: CPUs x rate x interval / 2,\n"
    "                           at least 8192, at most 65536)\n"
    "  --count-map-entries N    (process, stack) pairs kept per interval (default 0: twice the\n"
    "                           stacks)\n"
    "  --sym-cache-bytes N      symbol cache bound (default 32M)\n"
    "  --no-dwarf               do not read file:line from DWARF\n"
    "  --symbolize-budget SECONDS\n"
    "                           symbolizing time per interval; past it new frames are written\n"
    "                           as addresses so intervals stay on time (default: half the\n"
    "                           interval, at most 5)\n"
    "  --help, --version\n"
    "\n"
    "Config file keys in [recorder]: store, interval, cpu_hz, max_store_bytes, log_level,\n"
    "stack_map_entries, count_map_entries, sym_cache_bytes, dwarf, symbolize_budget.\n"
    "Environment: PFR_<KEY>.\n"
    "Precedence: flags > environment > file > defaults. SIGHUP reloads log_level and service\n"
    "rules; SIGTERM/SIGINT write the current interval and exit.\n";

static const char *flag_key(int opt)
{
    switch (opt) {
    case OPT_STORE:
        return "store";
    case OPT_INTERVAL:
        return "interval";
    case OPT_CPU_HZ:
        return "cpu_hz";
    case OPT_MAX_STORE:
        return "max_store_bytes";
    case OPT_LOG_LEVEL:
        return "log_level";
    case OPT_STACK_ENTRIES:
        return "stack_map_entries";
    case OPT_COUNT_ENTRIES:
        return "count_map_entries";
    case OPT_SYM_CACHE:
        return "sym_cache_bytes";
    case OPT_NO_DWARF:
        return "dwarf";
    case OPT_BUDGET:
        return "symbolize_budget";
    }
    return NULL;
}

static int parse_flags(int argc, char **argv, struct flags *fl, char *err, size_t errlen)
{
    memset(fl, 0, sizeof(*fl));
    fl->kv = calloc((size_t)argc + 1, sizeof(*fl->kv));
    fl->rules = calloc((size_t)argc + 1, sizeof(*fl->rules));
    if (!fl->kv || !fl->rules)
        return -ENOMEM;
    optind = 0; /* full re-initialisation: we may parse the same argv again on reload */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        switch (opt) {
        case OPT_HELP:
            fl->help = true;
            break;
        case OPT_VERSION:
            fl->version = true;
            break;
        case OPT_CONFIG:
            fl->config = optarg;
            break;
        case OPT_RULE:
            fl->rules[fl->nrules++] = optarg;
            break;
        case '?':
        case ':':
            if (optopt)
                snprintf(err, errlen, "bad or incomplete option '%s' (see --help)",
                         argv[optind - 1]);
            else
                snprintf(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
            return -EINVAL;
        default:
            fl->kv[fl->n].key = flag_key(opt);
            fl->kv[fl->n].value = opt == OPT_NO_DWARF ? "false" : optarg;
            fl->n++;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

static void free_flags(struct flags *fl)
{
    free(fl->kv);
    free(fl->rules);
}

static int apply_env(pfr_config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < NKEYS; i++) {
        char name[64] = "PFR_";
        size_t j = 4;
        for (const char *k = keys[i]; *k && j < sizeof(name) - 1; k++)
            name[j++] = (char)(*k >= 'a' && *k <= 'z' ? *k - 32 : *k);
        name[j] = '\0';
        const char *v = getenv(name);
        if (!v)
            continue;
        char why[256];
        if (pfr_config_set(c, keys[i], v, why, sizeof(why))) {
            snprintf(err, errlen, "environment %s: %s", name, why);
            return -EINVAL;
        }
    }
    return 0;
}

/* Flag rules come first so they win over the file's. */
static int prepend_rules(pfr_config *c, const struct flags *fl, char *err, size_t errlen)
{
    if (fl->nrules == 0)
        return 0;
    pfr_service_rules merged = {0};
    for (size_t i = 0; i < fl->nrules; i++) {
        char why[256];
        int rc = pfr_service_rules_add(&merged, fl->rules[i], why, sizeof(why));
        if (rc) {
            snprintf(err, errlen, "--service-rule: %s", why);
            pfr_service_rules_free(&merged);
            return rc;
        }
    }
    for (size_t i = 0; i < c->rules.n; i++) {
        pfr_service_rule *v = realloc(merged.v, (merged.n + 1) * sizeof(*v));
        if (!v) {
            pfr_service_rules_free(&merged);
            return -ENOMEM;
        }
        merged.v = v;
        merged.v[merged.n++] = c->rules.v[i];
    }
    free(c->rules.v);
    c->rules = merged;
    return 0;
}

static int build(pfr_config *c, const struct flags *fl, char *err, size_t errlen)
{
    set_defaults(c);
    const char *path = fl->config ? fl->config : getenv("PFR_CONFIG");
    if (path && !path[0])
        path = NULL;
    if (!path && access(PFR_RECORDER_DEFAULT_CONFIG, F_OK) == 0)
        path = PFR_RECORDER_DEFAULT_CONFIG;
    if (path) {
        c->config_path = strdup(path);
        if (!c->config_path)
            return -ENOMEM;
        int rc = load_file(c, path, err, errlen);
        if (rc)
            return rc;
    }
    int rc = apply_env(c, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; i < fl->n; i++) {
        char why[256];
        rc = pfr_config_set(c, fl->kv[i].key, fl->kv[i].value, why, sizeof(why));
        if (rc) {
            snprintf(err, errlen, "--%s", why);
            for (char *p = err + 2; *p && *p != ':'; p++)
                if (*p == '_')
                    *p = '-';
            return rc;
        }
    }
    rc = prepend_rules(c, fl, err, errlen);
    if (rc)
        return rc;
    if (!c->store_path) {
        c->store_path = strdup(PFR_STORE_DEFAULT_PATH);
        if (!c->store_path)
            return -ENOMEM;
    }
    return 0;
}

int pfr_config_load(pfr_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen)
{
    struct flags fl;
    set_defaults(c);
    int rc = parse_flags(argc, argv, &fl, err, errlen);
    if (rc == 0 && (fl.help || fl.version)) {
        if (fl.help)
            fputs(usage, out);
        else
            fprintf(out, "pfr-recorder %s\n", PFR_VERSION);
        free_flags(&fl);
        return PFR_CONFIG_EXIT;
    }
    if (rc == 0)
        rc = build(c, &fl, err, errlen);
    free_flags(&fl);
    return rc;
}

int pfr_config_reload(pfr_config *fresh, int argc, char **argv, char *err, size_t errlen)
{
    struct flags fl;
    set_defaults(fresh);
    int rc = parse_flags(argc, argv, &fl, err, errlen);
    if (rc == 0)
        rc = build(fresh, &fl, err, errlen);
    free_flags(&fl);
    return rc;
}
