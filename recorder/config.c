/* pfr-recorder's settings: its core rows, the source table's groups, and the checks across
 * fields. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pfr_identity.h"
#include "pfr_metrics.h"
#include "pfr_store.h"
#include "pfr_units.h"
#include "source.h"

extern char **environ;

/* ---- parsers of the rows no type says ---- */

static void free_string(void *field)
{
    free(*(char **)field);
}

static int replace_string(void *field, const char *value)
{
    char *s = strdup(value);
    if (!s)
        return -ENOMEM;
    free(*(char **)field);
    *(char **)field = s;
    return 0;
}

static int parse_store(const char *v, void *field, char *err, size_t errlen)
{
    if (!v[0]) {
        snprintf(err, errlen, "empty path");
        return -EINVAL;
    }
    return replace_string(field, v);
}

/* ADDRESS:PORT, or off (or "") for none, kept as "". */
static int parse_listen(const char *v, void *field, char *err, size_t errlen)
{
    bool off = !v[0] || !strcasecmp(v, "off");
    if (!off && !strchr(v, ':')) {
        snprintf(err, errlen, "'%s' is not ADDRESS:PORT (or off)", v);
        return -EINVAL;
    }
    return replace_string(field, off ? "" : v);
}

/* auto, off (or 0), a size (K/M/G) or a percentage of the file system ("5%", at most 50). */
static int parse_reserve(const char *v, void *field, char *err, size_t errlen)
{
    pfr_disk_reserve *r = field;
    size_t n = strlen(v);
    uint64_t u;
    if (!strcasecmp(v, "auto")) {
        *r = (pfr_disk_reserve){.mode = PFR_STORE_RESERVE_AUTO};
    } else if (!strcasecmp(v, "off")) {
        *r = (pfr_disk_reserve){.mode = PFR_STORE_RESERVE_OFF};
    } else if (n > 1 && v[n - 1] == '%') {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end != v + n - 1 || !isfinite(d) || d <= 0 || d > 50)
            goto bad;
        *r = (pfr_disk_reserve){.mode = PFR_STORE_RESERVE_PERCENT, .percent = d};
    } else if (v[0] != '-' && pfr_parse_size(v, &u, NULL, 0) == 0) {
        *r = u ? (pfr_disk_reserve){.mode = PFR_STORE_RESERVE_BYTES, .bytes = u}
               : (pfr_disk_reserve){.mode = PFR_STORE_RESERVE_OFF};
    } else {
        goto bad;
    }
    return 0;
bad:
    snprintf(err, errlen, "'%s' is not auto, off, a size (K/M/G) or a percentage (at most 50%%)",
             v);
    return -EINVAL;
}

/* A size (K/M/G) or a percentage of max_store_bytes ("25%", more than 0, at most 100). */
static int parse_pin_max(const char *v, void *field, char *err, size_t errlen)
{
    pfr_pin_budget *b = field;
    size_t n = strlen(v);
    uint64_t u;
    if (n > 1 && v[n - 1] == '%') {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (!errno && end == v + n - 1 && isfinite(d) && d > 0 && d <= 100) {
            *b = (pfr_pin_budget){.percent = d};
            return 0;
        }
    } else if (v[0] != '-' && pfr_parse_size(v, &u, NULL, 0) == 0 && u > 0) {
        *b = (pfr_pin_budget){.bytes = u};
        return 0;
    }
    snprintf(err, errlen, "'%s' is not a size (K/M/G) or a percentage of max_store_bytes", v);
    return -EINVAL;
}

/* Roll-up steps of the ring's tiers ("1m,10m,1h") or off: checked here, applied by the store. */
static int parse_tiers(const char *v, void *field, char *err, size_t errlen)
{
    pfr_store_tiers t;
    char why[200];
    if (pfr_store_tiers_parse(v, &t, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "'%s': %s", v, why);
        return -EINVAL;
    }
    return replace_string(field, v);
}

static int parse_rule(const char *v, void *field, char *err, size_t errlen)
{
    return pfr_service_rules_add(field, v, err, errlen);
}

static void free_rules(void *field)
{
    pfr_service_rules_free(field);
}

/* ---- the core rows ---- */

/* The store's default fold bound as the row's default text. */
#define FOLD_TEXT_(n)     #n
#define FOLD_TEXT(n)      FOLD_TEXT_(n)
#define FOLD_DEFAULT_TEXT FOLD_TEXT(PFR_STORE_DEFAULT_FOLD_STACKS)

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

#define F(field) PFR_SETTING_FIELD(pfr_config, field)

static const pfr_setting core_rows[] = {
    {.key = "store",
     .type = PFR_SET_CUSTOM,
     F(store_path),
     .def = PFR_STORE_DEFAULT_PATH,
     .parse = parse_store,
     .free = free_string,
     .metavar = "PATH",
     .help = "the ring; created 0640, with its folder if missing"},
    {.key = "interval",
     .type = PFR_SET_DURATION,
     F(interval_ns),
     .def = "10s",
     .min = 0.2,
     .max = 3600,
     .metavar = "DURATION",
     .help = "length of one CPU profile (250ms, 10s, 1m30s; a bare number is seconds); "
             "boundaries on the wall clock"},
    {.key = "max_store_bytes",
     .def = "512M",
     .type = PFR_SET_SIZE,
     F(max_store_bytes),
     .min = 1 << 20,
     .metavar = "SIZE",
     .help = "size cap of the ring; when full, old chunks are rolled up first and the "
             "oldest of the coarsest tier evicted (retention_tiers; docs/operations.md, Size "
             "the ring)"},
    {.key = "disk_reserve",
     .type = PFR_SET_CUSTOM,
     F(disk_reserve),
     .def = "auto",
     .parse = parse_reserve,
     .metavar = "SIZE",
     .def_doc = "auto: 5% or 256M, whichever is larger; at most half the file system",
     .help = "free space kept on the ring's file system: below it the ring stops growing and "
             "gives its oldest chunks up (never below 4 MiB); a size (2G), a percentage of "
             "the file system (5%, at most 50), off (the ring yields only to a full disk), "
             "or auto. Never more than half the file system"},
    {.key = "pin_max_bytes",
     .type = PFR_SET_CUSTOM,
     F(pin_max),
     .def = "25%",
     .parse = parse_pin_max,
     .metavar = "SIZE",
     .help = "what pins (pfr pin, and the recorder's triggers) may keep from eviction: a size "
             "(128M) or a share of max_store_bytes (25%); past it, new pins release the oldest "
             "automatic ones (docs/operations.md, After an incident)"},
    {.key = "retention_tiers",
     .type = PFR_SET_CUSTOM,
     F(retention_tiers),
     .def = PFR_STORE_DEFAULT_TIERS,
     .parse = parse_tiers,
     .free = free_string,
     .metavar = "STEPS",
     .help = "when the ring is full it first rolls old chunks up into coarser ones, each tier "
             "merging the chunks of a stream within one step (exact: sums add up, in-use heap "
             "and goroutines keep their time average); only the coarsest tier is deleted, "
             "oldest first. Increasing steps, each a multiple of the one before, or off "
             "(age-only eviction). docs/store.md, Tiers"},
    {.key = "retention_fold_stacks",
     .type = PFR_SET_COUNT,
     F(retention_fold_stacks),
     .def = FOLD_DEFAULT_TEXT,
     .max = 100000000,
     .metavar = "N",
     .help = "a roll-up into the coarsest tier with more than N distinct stacks (a stack seen "
             "in two processes counts twice) has its rarest folded into their callers under a "
             "\"[folded]\" frame, every total kept (CPU, allocations; in-use heap and goroutines "
             "their time average), so weeks of a service whose stacks keep changing fit the "
             "ring. 0 = never (exact stack for stack). docs/store.md, Tiers"},
    {.key = "memory_budget",
     .type = PFR_SET_SIZE,
     F(memory_budget),
     .def = "64M",
     .metavar = "SIZE",
     .help = "the recorder's resident memory: the symbol and frame caches grow only into "
             "what is left of it; a large symbol or unwind table is built only if it fits; "
             "near it only small ones (and unwind tables, held only while built or read "
             "back, while below 15/16 of it), over it none (frames stay file+offset, stacks are "
             "walked by frame pointers); near or over it the caches and the ring writer's "
             "tables shrink, the heap goes back to small pages and freed memory goes back to "
             "the system; 0 = no budget (keep it "
             "below the unit's MemoryMax)"},
    {.key = "huge_pages",
     .type = PFR_SET_BOOL,
     F(huge_pages),
     .def = "true",
     .metavar = "BOOL",
     .help = "the recorder's heap on transparent huge pages where the kernel offers them "
             "(its mode not \"never\"): it runs itself again at start with glibc's tunable "
             "glibc.malloc.hugetlb=1 (unless GLIBC_TUNABLES sets it already). Its tables, "
             "walked every interval after seconds asleep, then cost a fraction of the page "
             "walks; its resident memory grows by a few MiB, and near the memory budget the heap "
             "goes back to small pages. docs/operations.md"},
    {.key = "log_level",
     .type = PFR_SET_ENUM,
     F(log_level),
     .def = "info",
     .choices = log_levels,
     .metavar = "LEVEL",
     .help = "error, warn, info or debug (debug: the sampler's counters every interval)"},
    {.key = "metrics_listen",
     .type = PFR_SET_CUSTOM,
     F(metrics_listen),
     .def = PFR_METRICS_DEFAULT_LISTEN,
     .parse = parse_listen,
     .free = free_string,
     .metavar = "ADDR:PORT",
     .help = "Prometheus metrics at /metrics (numeric address, [IPv6]:PORT too; port 0 picks "
             "one; off = none); a port that cannot be bound is logged and the daemon carries "
             "on"},
};

static const char *const remote_modes[] = {"copy", "skip", NULL};

static const pfr_setting files_rows[] = {
    {.key = "remote_files",
     .type = PFR_SET_ENUM,
     F(remote_files),
     .def = "copy",
     .choices = remote_modes,
     .metavar = "MODE",
     .help = "mapped files on file systems a server answers for (FUSE, NFS, CIFS, 9p, Ceph, "
             "...: known from the mount table before they are opened): copy (a worker with a "
             "deadline copies the file, and the copy is read; a worker still blocked at its "
             "deadline is abandoned and the file system avoided for 10 minutes) or skip (never "
             "touched: their frames stay file+offset). No thread that samples, writes or "
             "handles signals ever opens them"},
    {.key = "remote_file_timeout",
     .type = PFR_SET_DURATION,
     F(remote_file_timeout_ns),
     .def = "2s",
     .min = 0.01,
     .max = 60,
     .metavar = "DURATION",
     .help = "deadline of one remote file's copy"},
    {.key = "remote_file_max_bytes",
     .type = PFR_SET_SIZE,
     F(remote_file_max_bytes),
     .def = "32M",
     .min = 4096,
     .metavar = "SIZE",
     .help = "remote files larger than this are not copied (the copy is an unlinked file in "
             "the ring's folder while it is used)"},
};

/* the shared symbolizer's (recorder/shared_sym), every source's names of addresses */
static const pfr_setting symbol_rows[] = {
    {.key = "sym_cache_bytes",
     .type = PFR_SET_SIZE,
     F(sym_cache_bytes),
     .def = "32M",
     .min = 1 << 20,
     .max = 1099511627776.0,
     .metavar = "SIZE",
     .help = "symbol cache bound"},
    {.key = "dwarf",
     .type = PFR_SET_BOOL,
     F(dwarf),
     .def = "true",
     .metavar = "BOOL",
     .help = "read file:line from DWARF"},
    {.key = "no_dwarf",
     .alias_of = "dwarf",
     .alias_value = "false",
     .flags = PFR_SETF_NO_ARG,
     .env = "",
     .help = "the same as --dwarf false"},
    {.key = "perf_maps",
     .type = PFR_SET_BOOL,
     F(perf_maps),
     .def = "true",
     .metavar = "BOOL",
     .help = "name JIT-compiled code from the /tmp/perf-PID.map its process writes (Node "
             "--perf-basic-prof, Java with a perf map agent, Python 3.12+ -X perf, .NET "
             "DOTNET_PerfMapEnabled=1)"},
};

static const pfr_setting identity_rows[] = {
    {.key = "docker_socket",
     .example = "/var/run/docker.sock",
     .type = PFR_SET_STRING,
     F(docker_socket),
     .metavar = "PATH",
     .def_doc = "/var/run/docker.sock",
     .help = "Docker's API, asked for a container's name and labels (its Coroot identity); "
             "off = not asked"},
    {.key = "docker_root",
     .example = "/var/lib/docker",
     .type = PFR_SET_STRING,
     F(docker_root),
     .metavar = "DIR",
     .def_doc = "/var/lib/docker",
     .help = "Docker's data folder: containers/<id>/config.v2.json is read when the socket "
             "is not permitted or dockerd is down"},
    {.key = "kubelet_url",
     .type = PFR_SET_STRING,
     F(k8s_kubelet_url),
     .metavar = "URL",
     .example = "https://127.0.0.1:10250",
     .help = "name pods, and scrape the annotated ones, from this node's kubelet"},
    {.key = "k8s_apiserver_url",
     .type = PFR_SET_STRING,
     F(k8s_apiserver_url),
     .metavar = "URL",
     .help = "... or from the API server (needs k8s_node_name)"},
    {.key = "k8s_node_name",
     .type = PFR_SET_STRING,
     F(k8s_node_name),
     .metavar = "NAME",
     .help = "only pods of this node"},
    {.key = "k8s_token_file",
     .type = PFR_SET_STRING,
     F(k8s_token_file),
     .metavar = "FILE",
     .help = "bearer token for the kubelet / API server"},
    {.key = "k8s_ca_file",
     .def_doc = "the system's CAs",
     .type = PFR_SET_STRING,
     F(k8s_ca_file),
     .metavar = "FILE",
     .help = "their CA bundle"},
    {.key = "k8s_insecure",
     .type = PFR_SET_BOOL,
     F(k8s_insecure),
     .def = "false",
     .metavar = "BOOL",
     .help = "do not verify their TLS certificates"},
};

static const pfr_setting service_rows[] = {
    {.key = "rule",
     .type = PFR_SET_LIST,
     F(rules),
     .parse = parse_rule,
     .free = free_rules,
     .flag = "service-rule",
     .env = "",
     .metavar = "'KIND PATTERN SERVICE'",
     .example = "comm nginx* web",
     .help = "name processes whose KIND (comm, exe, cgroup, container) matches the glob "
             "PATTERN as SERVICE; repeatable, the flags' rules before the file's; first "
             "match wins"},
};

#undef F

static const pfr_settings_group core_group = {
    .name = "recorder",
    .section = "recorder",
    .intro = "The daemon: its ring, its intervals, its logs and metrics.",
    .rows = core_rows,
    .nrows = sizeof(core_rows) / sizeof(core_rows[0]),
};

static const pfr_settings_group identity_group = {
    .name = "identities",
    .section = "recorder",
    .intro = "container.id and service.name as Coroot names them (docs/coroot.md).",
    .rows = identity_rows,
    .nrows = sizeof(identity_rows) / sizeof(identity_rows[0]),
};

static const pfr_settings_group symbol_group = {
    .name = "symbols",
    .section = "recorder",
    .intro = "The symbolizer every source shares: its cache, DWARF lines, JIT perf maps.",
    .rows = symbol_rows,
    .nrows = sizeof(symbol_rows) / sizeof(symbol_rows[0]),
};

static const pfr_settings_group files_group = {
    .name = "files",
    .section = "recorder",
    .intro = "Other processes' files: what the recorder may open, and how.",
    .rows = files_rows,
    .nrows = sizeof(files_rows) / sizeof(files_rows[0]),
};

static const pfr_settings_group service_group = {
    .name = "service",
    .section = "service",
    .intro = "Service names by rule, tried in order before the names Coroot would give.",
    .rows = service_rows,
    .nrows = sizeof(service_rows) / sizeof(service_rows[0]),
};

/* ---- loading ---- */

static const char usage[] =
    "Usage: pfr-recorder [OPTIONS]\n"
    "Always-on whole-host profiler: CPU profiles of every process (eBPF), Go heap profiles read\n"
    "from the Go runtime, and pprof scraped from Go programs, written to the local ring.\n"
    "Every option is also a key of the config file and an environment variable PFR_<KEY>.\n"
    "Precedence: flags > environment > file > defaults. SIGHUP reloads log_level, service\n"
    "rules and scrape targets; SIGTERM/SIGINT write the current interval and exit.";

void pfr_config_free(pfr_config *c)
{
    size_t n;
    const pfr_source_desc *const *table = pfr_recorder_sources(&n);
    for (size_t i = 0; i < n && i < PFR_CONFIG_MAX_SOURCES; i++) {
        for (size_t g = 0; c->source_conf[i] && table[i]->settings && table[i]->settings[g]; g++)
            pfr_settings_release(table[i]->settings[g], c->source_conf[i]);
        free(c->source_conf[i]);
    }
    pfr_settings_release(&core_group, c);
    pfr_settings_release(&identity_group, c);
    pfr_settings_release(&files_group, c);
    pfr_settings_release(&symbol_group, c);
    pfr_settings_release(&service_group, c);
    pfr_settings_release(&pfr_triggers_settings_group, &c->triggers);
    pfr_settings_free(c->settings);
    free(c->config_path);
    memset(c, 0, sizeof(*c));
}

static const char sample_header[] =
    "/etc/pfr/recorder.ini: pfr-recorder's configuration (docs/configuration.md).\n"
    "\n"
    "Every key is shown commented out with its built-in default. Layers, later wins: built-in "
    "defaults < this file < environment (PFR_<KEY>, e.g. PFR_CPU_HZ) < command-line flags "
    "(--<key with dashes>, e.g. --cpu-hz). An unknown key or a bad value stops the daemon at "
    "start with the file and line (exit status 2). Sections [recorder], [service], [scrape] and "
    "[triggers] are read; others are ignored.\n"
    "\n"
    "`systemctl reload pfr-recorder` (SIGHUP) applies log_level, the [service] rules and the "
    "[scrape] targets at once; the other keys take effect on restart.\n"
    "\n"
    "Durations: 250ms, 10s, 1m30s or a bare number of seconds. Sizes: 65536, 512K, 8M, 1G.";

/* The settings of c: its core groups, then each source's, bound to their structs (defaults). */
static int bind_all(pfr_config *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->settings = pfr_settings_new("pfr-recorder", "PFR_", usage);
    if (!c->settings)
        return -ENOMEM;
    pfr_settings_set_sample_header(c->settings, sample_header);
    const pfr_settings_group *core[] = {&core_group, &files_group, &symbol_group, &identity_group,
                                        &service_group};
    for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++) {
        int rc = pfr_settings_bind(c->settings, core[i], c, err, errlen);
        if (rc)
            return rc;
    }
    size_t n;
    const pfr_source_desc *const *table = pfr_recorder_sources(&n);
    if (n > PFR_CONFIG_MAX_SOURCES) {
        snprintf(err, errlen, "more sources than PFR_CONFIG_MAX_SOURCES");
        return -E2BIG;
    }
    for (size_t i = 0; i < n; i++) {
        if (!table[i]->conf_size)
            continue;
        if (!(c->source_conf[i] = calloc(1, table[i]->conf_size)))
            return -ENOMEM;
        for (size_t g = 0; table[i]->settings && table[i]->settings[g]; g++) {
            int rc = pfr_settings_bind(c->settings, table[i]->settings[g], c->source_conf[i], err,
                                       errlen);
            if (rc)
                return rc;
        }
    }
    /* the triggers' [triggers] section, after the sources' */
    return pfr_settings_bind(c->settings, &pfr_triggers_settings_group, &c->triggers, err, errlen);
}

/* The checks across fields, each source's own included. */
static int finish(pfr_config *c, char *err, size_t errlen)
{
    size_t n;
    const pfr_source_desc *const *table = pfr_recorder_sources(&n);
    for (size_t i = 0; i < n; i++) {
        int rc = table[i]->finish ? table[i]->finish(c->source_conf[i], err, errlen) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static int load(pfr_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen)
{
    int rc = bind_all(c, err, errlen);
    if (rc) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    /* other programs' sections of a shared file are theirs */
    static const char *const others[] = {"*", NULL};
    pfr_settings_args a = {0};
    rc = pfr_settings_load(c->settings, argc, argv, environ, "PFR_CONFIG",
                           PFR_RECORDER_DEFAULT_CONFIG, others, &a, err, errlen);
    if (rc)
        return rc;
    if (a.help || a.version || a.print_settings) {
        if (!out)
            return PFR_CONFIG_OK; /* a reload: argv was good at start-up */
        if (a.help)
            pfr_settings_write_help(c->settings, out);
        else if (a.version)
            fprintf(out, "pfr-recorder %s\n", PFR_VERSION);
        else if ((rc = pfr_settings_write(c->settings, a.print_settings, out)))
            snprintf(err, errlen, "--print-settings: '%s' is not help, sample or reference",
                     a.print_settings);
        return rc ? rc : PFR_CONFIG_EXIT;
    }
    if (a.first_operand < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[a.first_operand]);
        return -EINVAL;
    }
    if (a.config_path && !(c->config_path = strdup(a.config_path)))
        return -ENOMEM;
    return finish(c, err, errlen);
}

/* A value out of its bounds is as bad as any other (-ERANGE from the rows). */
int pfr_config_load(pfr_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen)
{
    int rc = load(c, argc, argv, out, err, errlen);
    return rc == -ERANGE ? -EINVAL : rc;
}

int pfr_config_reload(pfr_config *fresh, int argc, char **argv, char *err, size_t errlen)
{
    int rc = load(fresh, argc, argv, NULL, err, errlen);
    return rc == -ERANGE ? -EINVAL : rc;
}

const void *pfr_config_source(const pfr_config *c, const pfr_source_desc *d)
{
    size_t n;
    const pfr_source_desc *const *table = pfr_recorder_sources(&n);
    for (size_t i = 0; i < n; i++)
        if (table[i] == d)
            return c->source_conf[i];
    return NULL;
}

int pfr_config_set(pfr_config *c, const char *key, const char *value, char *err, size_t errlen)
{
    if (!c->settings) {
        snprintf(err, errlen, "configuration not loaded");
        return -EINVAL;
    }
    int rc = pfr_settings_set(c->settings, "recorder", key, value, NULL, err, errlen);
    return rc == -ERANGE ? -EINVAL : rc;
}
