/* Configuration layering for pfr-recorder: defaults < file < environment < flags. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pfr_goheap.h"
#include "pfr_ini.h"
#include "pfr_metrics.h"
#include "pfr_scrape.h"
#include "pfr_store.h"
#include "cpu_profiler.h"

/* Settings known by key; the same key is used in the file, as PFR_<KEY> in the environment and
 * as --<key with dashes> on the command line. */
static const char *const keys[] = {
    "store",
    "interval",
    "cpu_hz",
    "max_store_bytes",
    "disk_reserve",
    "log_level",
    "stack_map_entries",
    "count_map_entries",
    "sym_cache_bytes",
    "dwarf",
    "perf_maps",
    "unwind",
    "unwind_table_bytes",
    "symbolize_budget",
    "go_heap_profiler",
    "go_heap_interval",
    "metrics_listen",
    "scrape_interval",
    "scrape_local",
    "scrape_other_netns",
    "scrape_endpoints",
    "scrape_cpu_seconds",
    "scrape_ca_file",
    "scrape_insecure",
    "kubelet_url",
    "k8s_apiserver_url",
    "k8s_node_name",
    "k8s_token_file",
    "k8s_ca_file",
    "k8s_insecure",
    "docker_socket",
    "docker_root",
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
    c->perf_maps = true;
    c->unwind = PFR_UNWIND_AUTO;
    c->unwind_table_bytes = (uint64_t)PFR_UNWIND_ROWS_DEFAULT * sizeof(struct pfr_unwind_row);
    c->go_heap_mode = PFR_GOHEAP_ENABLED;
    c->go_heap_interval_ns = 60 * 1000000000ll;
    c->scrape_interval_ns = PFR_SCRAPE_DEFAULT_INTERVAL_NS;
    c->scrape_local = PFR_SCRAPE_LOCAL_AUTO;
    c->scrape_other_netns = PFR_SCRAPE_NETNS_AUTO;
    c->scrape_endpoints = PFR_SCRAPE_ALL_ENDPOINTS;
    c->scrape_cpu_seconds = PFR_SCRAPE_DEFAULT_CPU_SECONDS;
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
    free(c->metrics_listen);
    free(c->scrape_ca_file);
    for (size_t i = 0; i < c->nscrape_targets; i++)
        free(c->scrape_targets[i]);
    free(c->scrape_targets);
    free(c->k8s_kubelet_url);
    free(c->k8s_apiserver_url);
    free(c->k8s_node_name);
    free(c->k8s_token_file);
    free(c->k8s_ca_file);
    free(c->docker_socket);
    free(c->docker_root);
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

static int parse_seconds(const char *key, const char *value, double min, double max, int64_t *out,
                         char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double d = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(d) || d < min || d > max) {
        snprintf(err, errlen, "%s: '%s' is not a number of seconds in [%g, %g]", key, value, min,
                 max);
        return -EINVAL;
    }
    *out = (int64_t)llround(d * 1e9);
    return 0;
}

/* The free space the ring leaves on its file system: auto, off (or 0), a size (K/M/G) or a
 * percentage of the file system ("5%", at most 50). */
static int parse_reserve(const char *v, pfr_store_reserve *out)
{
    size_t n = strlen(v);
    if (!strcasecmp(v, "auto")) {
        *out = (pfr_store_reserve){.mode = PFR_STORE_RESERVE_AUTO};
        return 0;
    }
    if (!strcasecmp(v, "off")) {
        *out = (pfr_store_reserve){.mode = PFR_STORE_RESERVE_OFF};
        return 0;
    }
    if (n > 1 && v[n - 1] == '%') {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end != v + n - 1 || !isfinite(d) || d <= 0 || d > 50)
            return -EINVAL;
        *out = (pfr_store_reserve){.mode = PFR_STORE_RESERVE_PERCENT, .percent = d};
        return 0;
    }
    uint64_t u;
    if (parse_u64(v, 0, UINT64_MAX, true, &u))
        return -EINVAL;
    *out = u ? (pfr_store_reserve){.mode = PFR_STORE_RESERVE_BYTES, .bytes = u}
             : (pfr_store_reserve){.mode = PFR_STORE_RESERVE_OFF};
    return 0;
}

/* Replace *dst by a copy of value; an empty value clears it (NULL). */
static int set_string(char **dst, const char *value)
{
    char *s = value[0] ? strdup(value) : NULL;
    if (value[0] && !s)
        return -ENOMEM;
    free(*dst);
    *dst = s;
    return 0;
}

static int string_key(pfr_config *c, const char *key, char ***dst)
{
    static const struct {
        const char *key;
        size_t off;
    } strs[] = {
        {"scrape_ca_file", offsetof(pfr_config, scrape_ca_file)},
        {"kubelet_url", offsetof(pfr_config, k8s_kubelet_url)},
        {"k8s_apiserver_url", offsetof(pfr_config, k8s_apiserver_url)},
        {"k8s_node_name", offsetof(pfr_config, k8s_node_name)},
        {"k8s_token_file", offsetof(pfr_config, k8s_token_file)},
        {"k8s_ca_file", offsetof(pfr_config, k8s_ca_file)},
        {"docker_socket", offsetof(pfr_config, docker_socket)},
        {"docker_root", offsetof(pfr_config, docker_root)},
    };
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        if (!strcmp(key, strs[i].key)) {
            *dst = (char **)((char *)c + strs[i].off);
            return 1;
        }
    return 0;
}

/* Append a static scrape target line after checking its syntax. */
int pfr_config_add_scrape_target(pfr_config *c, const char *line, char *err, size_t errlen)
{
    pfr_scrape_target *t = NULL;
    char why[256];
    int rc = pfr_scrape_parse_target(line, &t, why, sizeof(why));
    free(t);
    if (rc) {
        snprintf(err, errlen, "scrape target '%s': %s", line, why);
        return rc;
    }
    char **v = realloc(c->scrape_targets, (c->nscrape_targets + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    c->scrape_targets = v;
    if (!(v[c->nscrape_targets] = strdup(line)))
        return -ENOMEM;
    c->nscrape_targets++;
    return 0;
}

/* The settings of the Go heap profiler, the metrics endpoint and the scraper. 1 = not one of
 * those keys. */
static int set_source_key(pfr_config *c, const char *key, const char *value, char *err,
                          size_t errlen)
{
    char **str;
    if (string_key(c, key, &str))
        return set_string(str, value);
    if (!strcmp(key, "go_heap_profiler")) {
        enum pfr_goheap_mode m;
        if (pfr_goheap_parse_mode(value, &m)) {
            snprintf(err, errlen, "go_heap_profiler: '%s' is not one of disabled, enabled, force",
                     value);
            return -EINVAL;
        }
        c->go_heap_mode = (int)m;
        return 0;
    }
    if (!strcmp(key, "go_heap_interval"))
        return parse_seconds(key, value, 1, 86400, &c->go_heap_interval_ns, err, errlen);
    if (!strcmp(key, "scrape_interval"))
        return parse_seconds(key, value, 1, 86400, &c->scrape_interval_ns, err, errlen);
    if (!strcmp(key, "metrics_listen")) {
        bool off = !value[0] || !strcasecmp(value, "off");
        if (!off && !strchr(value, ':')) {
            snprintf(err, errlen, "metrics_listen: '%s' is not ADDRESS:PORT (or off)", value);
            return -EINVAL;
        }
        char *v = strdup(off ? "" : value);
        if (!v)
            return -ENOMEM;
        free(c->metrics_listen);
        c->metrics_listen = v;
        return 0;
    }
    if (!strcmp(key, "scrape_local")) {
        enum pfr_scrape_local_mode m;
        if (pfr_scrape_parse_local_mode(value, &m)) {
            snprintf(err, errlen, "scrape_local: '%s' is not one of auto, on, off", value);
            return -EINVAL;
        }
        c->scrape_local = (int)m;
        return 0;
    }
    if (!strcmp(key, "scrape_other_netns")) {
        enum pfr_scrape_netns_mode m;
        if (pfr_scrape_parse_netns_mode(value, &m)) {
            snprintf(err, errlen, "scrape_other_netns: '%s' is not one of auto, off", value);
            return -EINVAL;
        }
        c->scrape_other_netns = (int)m;
        return 0;
    }
    if (!strcmp(key, "scrape_endpoints")) {
        char why[200];
        if (pfr_scrape_parse_endpoints(value, &c->scrape_endpoints, why, sizeof(why))) {
            snprintf(err, errlen, "scrape_endpoints: %s", why);
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(key, "scrape_cpu_seconds")) {
        uint64_t u;
        if (parse_u64(value, 0, 300, false, &u)) {
            snprintf(err, errlen, "scrape_cpu_seconds: '%s' is not an integer in [0, 300]", value);
            return -EINVAL;
        }
        c->scrape_cpu_seconds = (int)u;
        return 0;
    }
    if (!strcmp(key, "scrape_insecure") || !strcmp(key, "k8s_insecure")) {
        bool *b = key[0] == 's' ? &c->scrape_insecure : &c->k8s_insecure;
        if (parse_bool(value, b)) {
            snprintf(err, errlen, "%s: '%s' is not a boolean", key, value);
            return -EINVAL;
        }
        return 0;
    }
    return 1;
}

int pfr_config_set(pfr_config *c, const char *key, const char *value, char *err, size_t errlen)
{
    uint64_t u;
    int src = set_source_key(c, key, value, err, errlen);
    if (src <= 0)
        return src;
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
    if (!strcmp(key, "disk_reserve")) {
        pfr_store_reserve r;
        if (parse_reserve(value, &r)) {
            snprintf(err, errlen,
                     "disk_reserve: '%s' is not auto, off, a size (K/M/G) or a percentage "
                     "(at most 50%%)",
                     value);
            return -EINVAL;
        }
        c->disk_reserve_mode = (int)r.mode;
        c->disk_reserve_bytes = r.bytes;
        c->disk_reserve_percent = r.percent;
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
    if (!strcmp(key, "symbolize_budget"))
        return parse_seconds(key, value, 0, 3600, &c->symbolize_budget_ns, err, errlen);
    if (!strcmp(key, "dwarf")) {
        if (parse_bool(value, &c->dwarf)) {
            snprintf(err, errlen, "dwarf: '%s' is not a boolean", value);
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(key, "perf_maps")) {
        if (parse_bool(value, &c->perf_maps)) {
            snprintf(err, errlen, "perf_maps: '%s' is not a boolean", value);
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(key, "unwind")) {
        static const char *const modes[] = {
            [PFR_UNWIND_AUTO] = "auto", [PFR_UNWIND_FP] = "fp", [PFR_UNWIND_DWARF] = "dwarf"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(value, modes[i])) {
                c->unwind = i;
                return 0;
            }
        snprintf(err, errlen, "unwind: '%s' is not one of auto, fp, dwarf", value);
        return -EINVAL;
    }
    if (!strcmp(key, "unwind_table_bytes")) {
        /* rows of 8 bytes; at most 2^28 rows (2 GiB), a bound far above any host's need */
        if (parse_u64(value, 1 << 20, 2ull << 30, true, &u)) {
            snprintf(err, errlen, "unwind_table_bytes: '%s' is not a size from 1M to 2G", value);
            return -EINVAL;
        }
        c->unwind_table_bytes = u;
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
    } else if (!strcmp(section, "scrape")) {
        if (strcmp(name, "target") != 0) {
            snprintf(why, sizeof(why),
                     "[scrape]: unknown key '%s' (expected target = URL service=NAME "
                     "[key=value ...]; other scrape settings go in [recorder])",
                     name);
            rc = -EINVAL;
        } else {
            rc = pfr_config_add_scrape_target(x->c, value, why, sizeof(why));
        }
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
    /* the keys a file may give many times; any other one given twice is refused */
    static const char *const repeatable[] = {"service.rule", "scrape.target", NULL};
    int line = pfr_ini_parse(f, path, repeatable, config_ini_line, &x, err, errlen);
    fclose(f);
    if (line <= 0)
        return line; /* 0, or a line too long, a duplicate, an unreadable file: err says */
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
    const char **targets; /* --scrape-target */
    size_t ntargets;
    const char *config;
    bool help, version;
    struct option *opts; /* built from keys[]: --<key with dashes> */
    char *names;         /* storage of the dashed names */
};

/* Flags that are not a key's --<key>: val = OPT_SPECIAL + n; a key's flag has val = index. */
enum {
    OPT_SPECIAL = 1000,
    OPT_NO_DWARF = OPT_SPECIAL,
    OPT_CONFIG,
    OPT_RULE,
    OPT_TARGET,
    OPT_HELP,
    OPT_VERSION,
};

static const struct option special_opts[] = {
    {"no-dwarf", no_argument, NULL, OPT_NO_DWARF},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"service-rule", required_argument, NULL, OPT_RULE},
    {"scrape-target", required_argument, NULL, OPT_TARGET},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
};
#define NSPECIAL (sizeof(special_opts) / sizeof(special_opts[0]))

/* getopt's table: every key as --<key-with-dashes>, then the special flags. */
static int build_options(struct flags *fl)
{
    size_t bytes = 0;
    for (size_t i = 0; i < NKEYS; i++)
        bytes += strlen(keys[i]) + 1;
    fl->opts = calloc(NKEYS + NSPECIAL + 1, sizeof(*fl->opts));
    fl->names = malloc(bytes);
    if (!fl->opts || !fl->names)
        return -ENOMEM;
    char *p = fl->names;
    for (size_t i = 0; i < NKEYS; i++) {
        size_t len = strlen(keys[i]) + 1;
        for (size_t j = 0; j < len; j++)
            p[j] = keys[i][j] == '_' ? '-' : keys[i][j];
        fl->opts[i] = (struct option){p, required_argument, NULL, (int)i};
        p += len;
    }
    memcpy(fl->opts + NKEYS, special_opts, sizeof(special_opts));
    return 0;
}

static const char usage[] =
    "Usage: pfr-recorder [OPTIONS]\n"
    "Always-on whole-host profiler: CPU profiles of every process (eBPF), Go heap profiles read\n"
    "from the Go runtime, and pprof scraped from Go programs, written to the local ring.\n"
    "\n"
    "  --store PATH             ring database (env PFR_STORE; default " PFR_STORE_DEFAULT_PATH ")\n"
    "  --interval SECONDS       profile length (env PFR_INTERVAL; default 10)\n"
    "  --cpu-hz N               samples per second per CPU (env PFR_CPU_HZ; default 100)\n"
    "  --max-store-bytes N      ring size cap, K/M/G suffixes (env PFR_MAX_STORE_BYTES;\n"
    "                           default 512M)\n"
    "  --disk-reserve SIZE      free space kept on the ring's file system: the ring gives its\n"
    "                           oldest profiles up rather than take it; a size (K/M/G), a\n"
    "                           percentage of the file system (5%), off, or auto (default: 5%\n"
    "                           or 256M, whichever is larger; at most half the file system)\n"
    "  --config FILE            INI file with [recorder], [service] and [scrape] sections\n"
    "                           (env PFR_CONFIG; default " PFR_RECORDER_DEFAULT_CONFIG
    " if it exists)\n"
    "  --log-level LEVEL        error, warn, info or debug (env PFR_LOG_LEVEL; default info)\n"
    "  --service-rule 'KIND PATTERN SERVICE'\n"
    "                           name processes whose KIND (comm, exe, cgroup, container) matches\n"
    "                           the glob PATTERN as SERVICE; repeatable, before the file's rules\n"
    "  --stack-map-entries N    stacks kept per interval (default 0: CPUs x rate x interval / 2,\n"
    "                           at least 8192, at most 65536)\n"
    "  --count-map-entries N    (process, stack) pairs kept per interval (default 0: twice the\n"
    "                           stacks)\n"
    "  --sym-cache-bytes N      symbol cache bound (default 32M)\n"
    "  --dwarf BOOL, --no-dwarf read file:line from DWARF (default true)\n"
    "  --perf-maps BOOL         name JIT code (Node, Java, Python 3.12+, ...) from the\n"
    "                           /tmp/perf-PID.map its process writes (default true)\n"
    "  --unwind MODE            how user stacks are walked: auto (unwind tables built from\n"
    "                           .eh_frame where a file has them, frame pointers elsewhere;\n"
    "                           default), fp (frame pointers only), dwarf (as auto, Go's\n"
    "                           .debug_frame too; fails on kernels before 5.17)\n"
    "  --unwind-table-bytes N   kernel memory for unwind tables, least recently used files\n"
    "                           evicted past it (default 16M)\n"
    "  --symbolize-budget SECONDS\n"
    "                           symbolizing time per interval; past it new frames are written\n"
    "                           as module+0xoffset so intervals stay on time (default: half\n"
    "                           the interval, at most 5)\n"
    "  --metrics-listen ADDR:PORT\n"
    "                           Prometheus metrics at /metrics (default " PFR_METRICS_DEFAULT_LISTEN
    ";\n"
    "                           off = none)\n"
    "\n"
    "Go heap profiles (read through /proc/PID/mem):\n"
    "  --go-heap-profiler MODE  disabled, enabled (default: processes already sampling) or\n"
    "                           force (also switch sampling on where the linker left it off);\n"
    "                           env GO_HEAP_PROFILER or PFR_GO_HEAP_PROFILER\n"
    "  --go-heap-interval SECONDS\n"
    "                           between heap profiles (default 60)\n"
    "\n"
    "pprof scraping of Go programs that serve net/http/pprof:\n"
    "  --scrape-target 'URL service=NAME [key=value ...]'\n"
    "                           a static target; repeatable, with the file's [scrape] target\n"
    "                           lines\n"
    "  --scrape-interval SECONDS\n"
    "                           between scrapes (default 60)\n"
    "  --scrape-local MODE      discover local Go processes linking net/http/pprof: auto (when\n"
    "                           there are no static or Kubernetes targets; default), on, off\n"
    "  --scrape-other-netns MODE\n"
    "                           local Go processes in other network namespaces: auto (scrape\n"
    "                           from inside their namespace when permitted; default), off\n"
    "  --scrape-endpoints LIST  comma-separated: cpu, heap, goroutine, block, mutex, all\n"
    "                           (default all)\n"
    "  --scrape-cpu-seconds N   length of the CPU profile asked for (default 10; 0 = none)\n"
    "  --scrape-ca-file FILE    CA bundle for https targets (default: system CAs)\n"
    "  --scrape-insecure BOOL   do not verify targets' TLS certificates (default false)\n"
    "  --kubelet-url URL        scrape annotated pods listed by this node's kubelet\n"
    "                           (e.g. https://127.0.0.1:10250)\n"
    "  --k8s-apiserver-url URL  ... or by the API server (needs --k8s-node-name)\n"
    "  --k8s-node-name NAME     only pods of this node\n"
    "  --k8s-token-file FILE    bearer token for the kubelet / API server\n"
    "  --k8s-ca-file FILE       their CA bundle\n"
    "  --k8s-insecure BOOL      do not verify their TLS certificates (default false)\n"
    "\n"
    "Identities (container.id and service.name as Coroot names them; docs/coroot.md):\n"
    "  --docker-socket PATH     Docker's API, for container names (default\n"
    "                           /var/run/docker.sock; off = none)\n"
    "  --docker-root DIR        Docker's data, read when the socket is not permitted (default\n"
    "                           /var/lib/docker)\n"
    "  Kubernetes pods are named from the kubelet or API server given above.\n"
    "  --help, --version\n"
    "\n"
    "Every option above but --config, --service-rule, --scrape-target and --no-dwarf is also a\n"
    "[recorder] key of the config file (the flag's name with underscores: cpu_hz, dwarf,\n"
    "go_heap_profiler, ...) and an environment variable PFR_<KEY> (PFR_CPU_HZ, ...).\n"
    "Precedence: flags > environment > file > defaults. SIGHUP reloads log_level, service\n"
    "rules and scrape targets; SIGTERM/SIGINT write the current interval and exit.\n";

static int parse_flags(int argc, char **argv, struct flags *fl, char *err, size_t errlen)
{
    memset(fl, 0, sizeof(*fl));
    fl->kv = calloc((size_t)argc + 1, sizeof(*fl->kv));
    fl->rules = calloc((size_t)argc + 1, sizeof(*fl->rules));
    fl->targets = calloc((size_t)argc + 1, sizeof(*fl->targets));
    if (!fl->kv || !fl->rules || !fl->targets || build_options(fl))
        return -ENOMEM;
    optind = 0; /* full re-initialisation: we may parse the same argv again on reload */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", fl->opts, NULL)) != -1) {
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
        case OPT_TARGET:
            fl->targets[fl->ntargets++] = optarg;
            break;
        case OPT_NO_DWARF:
            fl->kv[fl->n++] = (struct flag_kv){"dwarf", "false"};
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
            if (opt < 0 || (size_t)opt >= NKEYS)
                return -EINVAL;
            fl->kv[fl->n++] = (struct flag_kv){keys[opt], optarg};
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
    free(fl->targets);
    free(fl->opts);
    free(fl->names);
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
    /* the name Coroot's node agent reads; PFR_GO_HEAP_PROFILER wins when both are set */
    const char *gh = getenv("GO_HEAP_PROFILER");
    if (gh && !getenv("PFR_GO_HEAP_PROFILER")) {
        char why[256];
        if (pfr_config_set(c, "go_heap_profiler", gh, why, sizeof(why))) {
            snprintf(err, errlen, "environment GO_HEAP_PROFILER: %s", why);
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

/* Flag targets come first, then the file's (all are scraped). */
static int prepend_targets(pfr_config *c, const struct flags *fl, char *err, size_t errlen)
{
    if (fl->ntargets == 0)
        return 0;
    char **file = c->scrape_targets;
    size_t nfile = c->nscrape_targets;
    c->scrape_targets = NULL;
    c->nscrape_targets = 0;
    int rc = 0;
    for (size_t i = 0; i < fl->ntargets && rc == 0; i++)
        rc = pfr_config_add_scrape_target(c, fl->targets[i], err, errlen);
    for (size_t i = 0; i < nfile; i++) {
        if (rc == 0)
            rc = pfr_config_add_scrape_target(c, file[i], err, errlen);
        free(file[i]);
    }
    free(file);
    return rc;
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
    rc = prepend_targets(c, fl, err, errlen);
    if (rc)
        return rc;
    if (!c->metrics_listen && !(c->metrics_listen = strdup(PFR_METRICS_DEFAULT_LISTEN)))
        return -ENOMEM;
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
