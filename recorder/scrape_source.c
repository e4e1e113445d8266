/* pprof pull mode as a recorder source: configuration, naming, logs and metrics. */
#include "scrape_source.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_log.h"
#include "pfr_scrape.h"
#include "naming.h"
#include "process_info.h"

struct pfr_scraper_source {
    pfr_scrape *scraper;
    pfr_daemon_metrics *metrics;
    pthread_mutex_t rules_lock; /* the scrape thread names processes while SIGHUP may swap */
    pfr_service_rules rules;
    pfr_identity *identity; /* borrowed */
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
    int rc = pfr_scrape_collect(s->scraper, emit_one, &e);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s->scraper, &st);
    pfr_daemon_metrics_scrape(s->metrics, &st);
    return rc;
}

/* Parse the configured target lines into t (each entry one allocation, freed by the caller). */
static int parse_targets(const pfr_config *cfg, pfr_scrape_target **t, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->nscrape_targets; i++) {
        pfr_scrape_target *one = NULL;
        int rc = pfr_scrape_parse_target(cfg->scrape_targets[i], &one, err, errlen);
        if (rc)
            return rc;
        t[i] = one;
    }
    return 0;
}

static int set_targets(pfr_scraper_source *s, const pfr_config *cfg, char *err, size_t errlen)
{
    size_t n = cfg->nscrape_targets;
    pfr_scrape_target **parsed = calloc(n ? n : 1, sizeof(*parsed));
    pfr_scrape_target *flat = calloc(n ? n : 1, sizeof(*flat));
    int rc = parsed && flat ? parse_targets(cfg, parsed, err, errlen) : -ENOMEM;
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
    .destroy = scrape_destroy,
};

pfr_source pfr_scraper_source_as_source(pfr_scraper_source *s)
{
    return (pfr_source){.ops = &scrape_ops, .self = s};
}

int pfr_scraper_source_new(const pfr_config *cfg, pfr_exe_scan *exes, pfr_daemon_metrics *metrics,
                           struct pfr_identity *identity, pfr_scraper_source **out, char *err,
                           size_t errlen)
{
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
    pfr_scrape_opts o = {
        .interval_ns = cfg->scrape_interval_ns,
        .cpu_seconds = cfg->scrape_cpu_seconds > 0 ? cfg->scrape_cpu_seconds : -1,
        .endpoints = cfg->scrape_endpoints,
        .ca_file = cfg->scrape_ca_file,
        .insecure = cfg->scrape_insecure,
        .local = (enum pfr_scrape_local_mode)cfg->scrape_local,
        .other_netns = (enum pfr_scrape_netns_mode)cfg->scrape_other_netns,
        .service_for_pid = service_for_pid,
        .discovery_ctx = s,
        .exes = exes,
        .exes_max_age_ns = PFR_EXES_MAX_AGE(cfg->scrape_interval_ns),
        .k8s =
            {
                .kubelet_url = cfg->k8s_kubelet_url,
                .apiserver_url = cfg->k8s_apiserver_url,
                .node_name = cfg->k8s_node_name,
                .token_file = cfg->k8s_token_file,
                .ca_file = cfg->k8s_ca_file,
                .insecure = cfg->k8s_insecure,
            },
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
