/* pprof pull mode as a recorder source: configuration, naming, logs and metrics. */
#include "scrape_source.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exe_scan.h"
#include "pfr_log.h"
#include "pfr_scrape.h"
#include "naming.h"
#include "process_info.h"

typedef struct pfr_scraper_source pfr_scraper_source;

struct pfr_scraper_source {
    pfr_scrape *scraper;
    pfr_daemon_metrics *metrics;
    pthread_mutex_t rules_lock; /* the scrape thread names processes while SIGHUP may swap */
    pfr_service_rules rules;
    pfr_identity *identity;     /* borrowed */
    pfr_scrape_stats published; /* the counters as last published (collector's thread) */
};

struct emit_ctx {
    pfr_emit_fn emit;
    void *ctx;
    size_t written, failed;
};

/* ---- callbacks from the scrape thread ---- */

static int service_for_pid(void *ctx, pid_t pid, char *buf, size_t len, char *cid, size_t cidlen)
{
    pfr_scraper_source *s = ctx;
    char exe[4096], cgroup[4096], comm[16], container[PFR_CONTAINER_ID_MAX + 1];
    bool kthread = false;
    if (pfr_process_read_facts("/proc", (uint32_t)pid, exe, sizeof(exe), cgroup, sizeof(cgroup),
                               comm, sizeof(comm), &kthread))
        return -ESRCH;
    pfr_process_facts f = {.comm = comm, .exe = exe, .cgroup = cgroup, .kthread = kthread};
    pthread_mutex_lock(&s->rules_lock);
    /* a target is named once, when found: one whose metadata is not had yet keeps the name it
     * got until it is found again */
    pfr_name_process(s->identity, &s->rules, &f, (int)pid, buf, len, container);
    pthread_mutex_unlock(&s->rules_lock);
    snprintf(cid, cidlen, "%s", container);
    return 0;
}

static void on_event(void *ctx, const pfr_scrape_event *ev)
{
    pfr_scraper_source *s = ctx;
    const char *ep = ev->endpoint >= 0 ? pfr_scrape_endpoint_name(ev->endpoint) : NULL;
    switch (ev->kind) {
    case PFR_SCRAPE_EV_TARGET_ADDED:
        pfr_info("scrape: target %s (service %s) added", ev->url, ev->service);
        break;
    case PFR_SCRAPE_EV_TARGET_REMOVED:
        pfr_info("scrape: target %s (service %s) removed", ev->url, ev->service);
        break;
    case PFR_SCRAPE_EV_FAILED: {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s%s%s: %s", ev->url, ep ? " " : "", ep ? ep : "", ev->msg);
        pfr_warn("scrape: %s (%u in a row; next try in %.0f s)", msg, ev->consecutive_failures,
                 (double)ev->backoff_ns / 1e9);
        pfr_daemon_metrics_error(s->metrics, "scrape", msg);
        break;
    }
    case PFR_SCRAPE_EV_RECOVERED:
        pfr_info("scrape: %s%s%s works again", ev->url, ep ? " " : "", ep ? ep : "");
        break;
    case PFR_SCRAPE_EV_RESTARTED:
        pfr_debug("scrape: %s %s restarted: cumulative series start again", ev->url, ep ? ep : "");
        break;
    case PFR_SCRAPE_EV_DISCOVERY_ERROR:
        pfr_warn("scrape: discovery: %s", ev->msg);
        pfr_daemon_metrics_error(s->metrics, "scrape", ev->msg);
        break;
    case PFR_SCRAPE_EV_QUEUE_FULL:
        pfr_warn("scrape: %s", ev->msg[0] ? ev->msg : "queue full: oldest profiles dropped");
        break;
    }
}

/* ---- the recorder's side ---- */

static int emit_one(const pfr_chunk_in *chunk, void *ctx)
{
    struct emit_ctx *e = ctx;
    int rc = e->emit(chunk, 1, e->ctx);
    if (rc == 1)
        e->written++;
    else
        e->failed++; /* counted by the writer; the drain goes on */
    return 0;
}

static int scrape_collect(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit,
                          void *emit_ctx)
{
    (void)start_ns;
    (void)end_ns;
    pfr_scraper_source *s = self;
    struct emit_ctx e = {.emit = emit, .ctx = emit_ctx};
    return pfr_scrape_collect(s->scraper, emit_one, &e);
}

/* Parse the configured target lines into t (each entry one allocation, freed by the caller). */
static int parse_targets(const pfr_scrape_config *sc, pfr_scrape_target **t, char *err,
                         size_t errlen)
{
    for (size_t i = 0; i < sc->targets.n; i++) {
        pfr_scrape_target *one = NULL;
        int rc = pfr_scrape_parse_target(sc->targets.v[i], &one, err, errlen);
        if (rc)
            return rc;
        t[i] = one;
    }
    return 0;
}

static int set_targets(pfr_scraper_source *s, const pfr_config *cfg, char *err, size_t errlen)
{
    const pfr_scrape_config *sc = pfr_config_source(cfg, &pfr_scrape_source_desc);
    size_t n = sc->targets.n;
    pfr_scrape_target **parsed = calloc(n ? n : 1, sizeof(*parsed));
    pfr_scrape_target *flat = calloc(n ? n : 1, sizeof(*flat));
    int rc = parsed && flat ? parse_targets(sc, parsed, err, errlen) : -ENOMEM;
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            flat[i] = *parsed[i];
        rc = pfr_scrape_set_targets(s->scraper, flat, n, err, errlen);
    }
    for (size_t i = 0; parsed && i < n; i++)
        free(parsed[i]);
    free(parsed);
    free(flat);
    return rc;
}

static int scrape_reload(void *self, const pfr_config *cfg)
{
    pfr_scraper_source *s = self;
    pfr_service_rules rules;
    int rc = pfr_service_rules_copy(&rules, &cfg->rules);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->rules_lock);
    pfr_service_rules_free(&s->rules);
    s->rules = rules;
    pthread_mutex_unlock(&s->rules_lock);
    char err[256];
    rc = set_targets(s, cfg, err, sizeof(err));
    if (rc)
        pfr_warn("SIGHUP: scrape targets not changed: %s", err);
    return rc;
}

static void scrape_log_stats(void *self)
{
    pfr_scraper_source *s = self;
    if (pfr_log_get_level() < PFR_LOG_DEBUG)
        return;
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s->scraper, &st);
    pfr_debug("scrape: rounds=%llu targets=%llu requests=%llu failures=%llu profiles=%llu "
              "emitted=%llu dropped=%llu last_round_ms=%.1f",
              (unsigned long long)st.rounds, (unsigned long long)st.targets,
              (unsigned long long)st.requests, (unsigned long long)st.failures,
              (unsigned long long)st.profiles, (unsigned long long)st.emitted,
              (unsigned long long)st.dropped, (double)st.last_round_ns / 1e6);
}

#define C    PFR_METRIC_COUNTER
#define G    PFR_METRIC_GAUGE
#define F(f) PFR_METRIC_FIELD(pfr_scrape_stats, f)

static const pfr_metric_row scrape_metric_rows[] = {
    {"pfr_scrape_targets", G, "pprof targets scraped", F(targets)},
    {"pfr_scrape_requests_total", C, "pprof requests completed", F(requests)},
    {"pfr_scrape_failures_total", C, "pprof scrapes that failed, by reason", .labels = {"reason"},
     .series = PFR_METRIC_SERIES({{"connect"}, F(connect_errors)}, {{"timeout"}, F(timeouts)},
                                 {{"http"}, F(http_errors)}, {{"too_large"}, F(too_large)},
                                 {{"invalid"}, F(invalid)}, {{"other"}, F(other_errors)})},
    {"pfr_scrape_profiles_total", C, "profiles scraped and queued", F(profiles)},
    {"pfr_scrape_profiles_dropped_total", C, "scraped profiles dropped from a full queue",
     F(dropped)},
    {"pfr_scrape_local_other_netns", G,
     "local Go pprof processes in another network namespace (last round)", F(local_other_netns)},
    {"pfr_scrape_local_netns_skipped", G,
     "of those, skipped: scrape_other_netns = off or setns not permitted (last round)",
     F(local_netns_skipped)},
    {"pfr_scrape_local_opted_out_total", C,
     "local Go pprof processes whose environment refuses profiling: never probed nor scraped",
     F(local_opted_out)},
    {"pfr_scrape_netns_failures_total", C,
     "requests that failed to open a socket in the target's network namespace", F(netns_failures)},
    {"pfr_scrape_netns_denied_total", C,
     "setns into a target's network namespace refused (no CAP_SYS_ADMIN)", F(netns_denied)},
    {"pfr_scrape_netns_broken", G,
     "1: the scrape thread could not return to its own network namespace (restart needed)",
     F(netns_broken)},
};
static const pfr_metric_table scrape_table = PFR_METRIC_TABLE("pprof scrapes", scrape_metric_rows);
static const pfr_metric_table *const scrape_tables[] = {&scrape_table, NULL};
#undef F

static void scrape_stats(void *self, void *out)
{
    pfr_scraper_source *s = self;
    pfr_scrape_get_stats(s->scraper, out);
    s->published = *(const pfr_scrape_stats *)out;
}

/* Profiles queued, or counters moved (a round ended) since they were last published. */
static bool scrape_due(void *self, int64_t end_ns)
{
    (void)end_ns;
    pfr_scraper_source *s = self;
    pfr_scrape_stats now;
    pfr_scrape_get_stats(s->scraper, &now);
    return pfr_scrape_queued(s->scraper) > 0 || memcmp(&now, &s->published, sizeof(now)) != 0;
}

static void scrape_destroy(void *self)
{
    pfr_scraper_source *s = self;
    if (!s)
        return;
    pfr_scrape_free(s->scraper); /* stops the thread first */
    pfr_service_rules_free(&s->rules);
    pthread_mutex_destroy(&s->rules_lock);
    free(s);
}

static const pfr_source_ops scrape_ops = {
    .name = "scrape",
    .collect = scrape_collect,
    .reload = scrape_reload,
    .log_stats = scrape_log_stats,
    .stats = scrape_stats,
    .destroy = scrape_destroy,
    .due = scrape_due,
};

static pfr_source pfr_scraper_source_as_source(pfr_scraper_source *s)
{
    return (pfr_source){.ops = &scrape_ops, .self = s};
}

static int pfr_scraper_source_new(const pfr_source_env *env, pfr_scraper_source **out, char *err,
                                  size_t errlen)
{
    const pfr_config *cfg = env->cfg;
    pfr_exe_scan *exes = env->exes;
    pfr_daemon_metrics *metrics = env->metrics;
    struct pfr_identity *identity = env->identity;
    pfr_scraper_source *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->identity = identity;
    pthread_mutex_init(&s->rules_lock, NULL);
    s->metrics = metrics;
    int rc = pfr_service_rules_copy(&s->rules, &cfg->rules);
    if (rc) {
        scrape_destroy(s);
        return rc;
    }
    const pfr_scrape_config *sc = pfr_config_source(cfg, &pfr_scrape_source_desc);
    pfr_scrape_opts o = {
        .interval_ns = sc->interval_ns,
        .cpu_seconds = sc->cpu_seconds > 0 ? (int)sc->cpu_seconds : -1,
        .endpoints = sc->endpoints,
        .ca_file = sc->ca_file,
        .insecure = sc->insecure,
        .local = (enum pfr_scrape_local_mode)sc->local,
        .other_netns = (enum pfr_scrape_netns_mode)sc->other_netns,
        .service_for_pid = service_for_pid,
        .node_name = env->node_name,
        .discovery_ctx = s,
        .exes = exes,
        .exes_max_age_ns = PFR_EXES_MAX_AGE(sc->interval_ns),
        .fsguard = env->fsguard,
        /* the daemon's pod list client, shared with the identities' resolver */
        .k8s = {.pods = env->k8s_pods, .node_name = cfg->k8s_node_name},
        .event = on_event,
        .event_ctx = s,
    };
    rc = pfr_scrape_new(&o, &s->scraper, err, errlen);
    if (rc == 0)
        rc = set_targets(s, cfg, err, errlen);
    if (rc == 0 && (rc = pfr_scrape_start(s->scraper)))
        snprintf(err, errlen, "cannot start the scrape thread: %s", strerror(-rc));
    if (rc) {
        scrape_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Static targets, Kubernetes pods, or local discovery (auto: when there are neither). */
static bool scrape_wanted(const pfr_config *cfg)
{
    const pfr_scrape_config *sc = pfr_config_source(cfg, &pfr_scrape_source_desc);
    bool k8s = cfg->k8s_kubelet_url || cfg->k8s_apiserver_url;
    return sc->local != PFR_SCRAPE_LOCAL_OFF || sc->targets.n > 0 || k8s;
}

static int scrape_start(pfr_source_env *env, pfr_source *out, char *err, size_t errlen)
{
    const pfr_config *cfg = env->cfg;
    const pfr_scrape_config *sc = pfr_config_source(cfg, &pfr_scrape_source_desc);
    pfr_scraper_source *s = NULL;
    char why[512];
    int rc = pfr_scraper_source_new(env, &s, why, sizeof(why));
    if (rc) {
        snprintf(err, errlen, "pprof scraping: %s", why);
        return rc;
    }
    bool k8s = env->k8s_pods != NULL;
    bool local = sc->local == PFR_SCRAPE_LOCAL_ON ||
                 (sc->local == PFR_SCRAPE_LOCAL_AUTO && !k8s && sc->targets.n == 0);
    pfr_info("pprof scraping: %zu static targets%s%s, every %.0f s", sc->targets.n,
             k8s ? ", Kubernetes pods" : "", local ? ", local discovery" : "",
             (double)sc->interval_ns / 1e9);
    *out = pfr_scraper_source_as_source(s);
    return 0;
}

/* ---- settings ---- */

static int parse_local(const char *v, void *field, char *err, size_t errlen)
{
    enum pfr_scrape_local_mode m;
    if (pfr_scrape_parse_local_mode(v, &m)) {
        snprintf(err, errlen, "'%s' is not one of auto, on, off", v);
        return -EINVAL;
    }
    *(int *)field = (int)m;
    return 0;
}

static int parse_netns(const char *v, void *field, char *err, size_t errlen)
{
    enum pfr_scrape_netns_mode m;
    if (pfr_scrape_parse_netns_mode(v, &m)) {
        snprintf(err, errlen, "'%s' is not one of auto, off", v);
        return -EINVAL;
    }
    *(int *)field = (int)m;
    return 0;
}

static int parse_endpoints(const char *v, void *field, char *err, size_t errlen)
{
    return pfr_scrape_parse_endpoints(v, field, err, errlen) ? -EINVAL : 0;
}

/* A static target line, checked, appended. */
static int parse_target(const char *v, void *field, char *err, size_t errlen)
{
    struct pfr_scrape_lines *l = field;
    pfr_scrape_target *t = NULL;
    char why[256];
    int rc = pfr_scrape_parse_target(v, &t, why, sizeof(why));
    free(t);
    if (rc) {
        snprintf(err, errlen, "scrape target '%s': %s", v, why);
        return rc;
    }
    char **nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    l->v = nv;
    if (!(nv[l->n] = strdup(v)))
        return -ENOMEM;
    l->n++;
    return 0;
}

static void free_targets(void *field)
{
    struct pfr_scrape_lines *l = field;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

#define F(field) PFR_SETTING_FIELD(pfr_scrape_config, field)

static const pfr_setting scrape_rows[] = {
    {.key = "scrape_interval",
     .type = PFR_SET_DURATION,
     F(interval_ns),
     .def = "60s",
     .min = 1,
     .max = 86400,
     .metavar = "DURATION",
     .help = "between scrapes"},
    {.key = "scrape_local",
     .type = PFR_SET_CUSTOM,
     F(local),
     .def = "auto",
     .parse = parse_local,
     .metavar = "MODE",
     .help = "discover local Go processes linking net/http/pprof: auto (when there are no "
             "static or Kubernetes targets), on, off"},
    {.key = "scrape_other_netns",
     .type = PFR_SET_CUSTOM,
     F(other_netns),
     .def = "auto",
     .parse = parse_netns,
     .metavar = "MODE",
     .help = "local Go processes in other network namespaces: auto (scrape from inside their "
             "namespace when permitted), off"},
    {.key = "scrape_endpoints",
     .type = PFR_SET_CUSTOM,
     F(endpoints),
     .def = "all",
     .parse = parse_endpoints,
     .metavar = "LIST",
     .help = "comma-separated: cpu, heap, goroutine, block, mutex, all"},
    {.key = "scrape_cpu_seconds",
     .type = PFR_SET_COUNT,
     F(cpu_seconds),
     .def = "10",
     .max = 300,
     .metavar = "N",
     .help = "length of the CPU profile asked for; 0 = none"},
    {.key = "scrape_ca_file",
     .type = PFR_SET_STRING,
     F(ca_file),
     .metavar = "FILE",
     .def_doc = "the system's CAs",
     .help = "CA bundle for https targets"},
    {.key = "scrape_insecure",
     .type = PFR_SET_BOOL,
     F(insecure),
     .def = "false",
     .metavar = "BOOL",
     .help = "do not verify targets' TLS certificates"},
};

static const pfr_setting target_rows[] = {
    {.key = "target",
     .type = PFR_SET_LIST,
     F(targets),
     .parse = parse_target,
     .free = free_targets,
     .flag = "scrape-target",
     .env = "",
     .metavar = "'URL service=NAME [key=value ...]'",
     .example = "http://10.0.0.5:6060 service=api team=core",
     .help = "a static pprof target: base URL, service, labels (docs/scrape.md); repeatable, "
             "the flags' before the file's"},
};

#undef F

static const pfr_settings_group scrape_group = {
    .name = "scrape",
    .section = "recorder",
    .intro = "pprof scraping of Go programs that serve net/http/pprof (docs/scrape.md).",
    .rows = scrape_rows,
    .nrows = sizeof(scrape_rows) / sizeof(scrape_rows[0]),
};

static const pfr_settings_group target_group = {
    .name = "scrape targets",
    .section = "scrape",
    .intro = "Static pprof targets, scraped besides any discovered.",
    .rows = target_rows,
    .nrows = sizeof(target_rows) / sizeof(target_rows[0]),
};

static const pfr_settings_group *const scrape_groups[] = {&scrape_group, &target_group, NULL};

const pfr_source_desc pfr_scrape_source_desc = {
    .name = "scrape",
    .settings = scrape_groups,
    .conf_size = sizeof(pfr_scrape_config),
    .wanted = scrape_wanted,
    .start = scrape_start,
    .metrics = scrape_tables,
    .stats_size = sizeof(pfr_scrape_stats),
};
