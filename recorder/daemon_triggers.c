/* The daemon's side of the triggers: pin requests, POST /pin, early heaps, metrics. */
#include "daemon_triggers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfr_clock.h"
#include "pfr_log.h"
#include "pfr_store.h"
#include "pfr_triggers.h"

struct pfr_daemon_triggers {
    pfr_triggers *t;
    pfr_triggers_config cfg;
    char *ring_path; /* the recorder's ring, where the pins go */
    pfr_store *ring; /* a read-only handle of the triggers' own (pins take a short write
                      * transaction of their own: the writer's handle stays the main thread's);
                      * opened at the first request */
    uint64_t pins_made, pins_failed;
    pfr_daemon_metrics *metrics;
    const pfr_source *sources;
    size_t nsrc;
};

static const char *kind_name(int k)
{
    return pfr_pin_kind_name((enum pfr_pin_kind)k);
}

/* What the rows read: the triggers' figures and the pins made of their requests. */
typedef struct triggers_view {
    pfr_triggers_stats st;
    uint64_t pins_made, pins_failed;
} triggers_view;

#define C       PFR_METRIC_COUNTER
#define F(f)    PFR_METRIC_FIELD(triggers_view, st.f)
#define BY_KIND .labels = {"reason"}, .name_of = kind_name, .first = 0, .end = PFR_PIN_NKINDS

static const pfr_metric_row trigger_rows[] = {
    {"pfr_triggers_fired_total", C, "events that asked for a pin, by reason", F(fired[0]), BY_KIND},
    {"pfr_triggers_coalesced_total", C, "events that stretched a pending request of their service",
     F(coalesced[0]), BY_KIND},
    {"pfr_triggers_suppressed_total", C,
     "new requests dropped: the service passed max_pins_per_hour", F(suppressed[0]), BY_KIND},
    {"pfr_pins_requested_total", C,
     "pin requests handed over (windows ended), by the reason of their first event",
     F(requested[0]), BY_KIND},
    {"pfr_triggers_heap_requests_total", C,
     "cgroups under memory pressure whose Go heaps were asked for early", F(heap_requests)},
    {"pfr_triggers_events_lost_total", C,
     "OOM and fatal-signal events the BPF ring buffer had no room for", F(bpf_lost)},
    {"pfr_trigger_pins_made_total", C, "pins made in the ring for the requests",
     PFR_METRIC_FIELD(triggers_view, pins_made)},
    {"pfr_trigger_pins_failed_total", C,
     "requests no pin could be made for (the ring refused it: see the log and pfr_last_error_info)",
     PFR_METRIC_FIELD(triggers_view, pins_failed)},
    {"pfr_triggers_cgroups_watched", PFR_METRIC_GAUGE,
     "cgroups holding processes whose pressure is read", F(cgroups_watched)},
};
#undef BY_KIND
#undef F
#undef C
const pfr_metric_table pfr_daemon_triggers_metrics =
    PFR_METRIC_TABLE("Triggers (pins the recorder asks for)", trigger_rows);

static void put_metrics(pfr_daemon_triggers *d)
{
    triggers_view v = {.pins_made = d->pins_made, .pins_failed = d->pins_failed};
    pfr_triggers_stats_get(d->t, &v.st);
    pfr_daemon_metrics_publish(d->metrics, &pfr_daemon_triggers_metrics, &v, NULL);
}

static void fmt_time(int64_t ns, char *out, size_t cap)
{
    time_t s = (time_t)(ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Pin r's window in the ring. A service the ring has no profile of (an OOM victim that never ran
 * on a CPU while sampled) gets the whole host's window instead: what ran beside it is the
 * evidence then. 0, or a negative errno with the reason in err. */
static int make_pin(pfr_daemon_triggers *d, const pfr_pin_request *r, pfr_pin_result *res,
                    char *err, size_t errlen)
{
    if (!d->ring) {
        pfr_store_opts o = {.read_only = true};
        int rc = pfr_store_open(d->ring_path, &o, &d->ring, err, errlen);
        if (rc)
            return rc;
    }
    char origin[64], reason[PFR_PIN_REASON_MAX + 1];
    snprintf(origin, sizeof(origin), "trigger:%s", pfr_pin_kind_name(r->kind));
    /* a request's reason (its events, "+N more") may pass the store's bound: cut, not refused */
    if (snprintf(reason, sizeof(reason), "%s", r->reason) >= (int)sizeof(reason))
        reason[sizeof(reason) - 1] = '\0';
    pfr_pin_in in = {.from_ns = r->from_ns,
                     .to_ns = r->to_ns,
                     .service = r->service[0] ? r->service : NULL,
                     .reason = reason,
                     .origin = origin};
    int rc = pfr_store_pin_add(d->ring, &in, res, err, errlen);
    if (rc == -ENOENT && in.service) {
        if (snprintf(reason, sizeof(reason),
                     "%.700s (no profile of service %.200s in the ring: every service)", r->reason,
                     r->service) >= (int)sizeof(reason))
            reason[sizeof(reason) - 1] = '\0';
        in.service = NULL;
        rc = pfr_store_pin_add(d->ring, &in, res, err, errlen);
    }
    return rc;
}

/* Where a pin request ends up: the window is pinned in the ring, "made by trigger:<kind>".
 * Runs on the triggers' thread (or at stop, on the main thread after that one ended), never on
 * the ring's writer: the pin's write transaction holds the ring's lock for a row's insert. */
static void on_pin_request(void *ctx, const pfr_pin_request *r)
{
    pfr_daemon_triggers *d = ctx;
    char from[32], to[32], err[512] = "";
    fmt_time(r->from_ns, from, sizeof(from));
    fmt_time(r->to_ns, to, sizeof(to));
    pfr_info("pin requested: %s service=%s from=%s to=%s events=%u: %s", pfr_pin_kind_name(r->kind),
             r->service[0] ? r->service : "(every service)", from, to, r->events, r->reason);
    pfr_pin_result res = {0};
    int rc = make_pin(d, r, &res, err, sizeof(err));
    if (rc == 0) {
        d->pins_made++;
        pfr_info("pinned: pin %lld (%s), %.1f MiB kept, %zu automatic pin(s) released for the "
                 "budget",
                 (long long)res.id, pfr_pin_kind_name(r->kind), (double)res.bytes / 1048576.0,
                 res.nreleased);
    } else {
        d->pins_failed++;
        char msg[768];
        snprintf(msg, sizeof(msg), "no pin for %s service=%s from=%s to=%s: %s",
                 pfr_pin_kind_name(r->kind), r->service[0] ? r->service : "(every service)", from,
                 to, err);
        pfr_warn("%s", msg);
        pfr_daemon_metrics_error(d->metrics, "triggers", msg);
    }
    put_metrics(d);
}

static void on_fired(void *ctx, const pfr_pin_request *r, int offer)
{
    pfr_daemon_triggers *d = ctx;
    static const char *const what[] = {[PFR_TRIG_NEW] = "new request",
                                       [PFR_TRIG_EXTENDED] = "extends the pending request",
                                       [PFR_TRIG_SUPPRESSED] =
                                           "suppressed: the service passed max_pins_per_hour"};
    pfr_info("trigger %s: service=%s (%s): %s", pfr_pin_kind_name(r->kind),
             r->service[0] ? r->service : "(every service)", what[offer], r->reason);
    put_metrics(d);
}

/* Memory pressure brings the heap: every source that can collect early is asked. */
static void on_heap_wanted(void *ctx, const char *cgroup, const int32_t *pids, size_t npids)
{
    pfr_daemon_triggers *d = ctx;
    pfr_info("memory pressure in cgroup %s: Go heap profiles of its %zu processes at the next "
             "interval's end",
             cgroup, npids);
    for (size_t i = 0; i < d->nsrc; i++)
        if (d->sources[i].ops->collect_soon)
            d->sources[i].ops->collect_soon(d->sources[i].self, pids, npids);
    put_metrics(d);
}

/* POST /pin?service=S&reason=TEXT&from=T&to=T (or before=D&after=D). */
static unsigned on_post_pin(void *ctx, const char *const *keys, const char *const *values, size_t n,
                            bool loopback, char *reply, size_t replylen)
{
    pfr_daemon_triggers *d = ctx;
    if (!loopback && !d->cfg.pin_from_any_host) {
        snprintf(reply, replylen,
                 "POST /pin is answered from the loopback only "
                 "(pin_from_any_host)");
        return 403;
    }
    pfr_pin_arg args[16];
    for (size_t i = 0; i < n && i < 16; i++)
        args[i] = (pfr_pin_arg){keys[i], values[i]};
    pfr_pin_request *r = malloc(sizeof(*r));
    if (!r) {
        snprintf(reply, replylen, "out of memory");
        return 500;
    }
    char err[512];
    int rc = pfr_pin_query_parse(args, n < 16 ? n : 16, pfr_clock_real_ns(), &d->cfg, r, err,
                                 sizeof(err));
    unsigned code = 400;
    if (rc) {
        snprintf(reply, replylen, "bad request: %s", err);
    } else {
        rc = pfr_triggers_external(d->t, r);
        if (rc == PFR_TRIG_SUPPRESSED) {
            snprintf(reply, replylen, "suppressed: service '%s' passed max_pins_per_hour",
                     r->service);
            code = 429;
        } else if (rc < 0) {
            snprintf(reply, replylen, "error: %s", strerror(-rc));
            code = 500;
        } else {
            snprintf(reply, replylen, "%s",
                     rc == PFR_TRIG_NEW ? "accepted"
                                        : "accepted: extends "
                                          "a pending request");
            code = 202;
        }
    }
    free(r);
    return code;
}

int pfr_daemon_triggers_start(const pfr_config *cfg, struct pfr_identity *identity,
                              pfr_daemon_metrics *metrics, const pfr_source *sources, size_t nsrc,
                              pfr_daemon_triggers **out)
{
    *out = NULL;
    if (!pfr_triggers_config_any(&cfg->triggers))
        return 0;
    pfr_daemon_triggers *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->cfg = cfg->triggers;
    d->ring_path = strdup(cfg->store_path);
    if (!d->ring_path) {
        free(d);
        return -ENOMEM;
    }
    d->metrics = metrics;
    d->sources = sources;
    d->nsrc = nsrc;
    pfr_triggers_env env = {.cfg = &cfg->triggers, .rules = &cfg->rules, .identity = identity};
    pfr_triggers_hooks hooks = {
        .ctx = d, .pin = on_pin_request, .heap_wanted = on_heap_wanted, .fired = on_fired};
    char err[1024] = "";
    bool warned = false;
    int rc = pfr_triggers_new(&env, &hooks, &d->t, &warned, err, sizeof(err));
    if (rc) {
        pfr_err("%s", err);
        pfr_daemon_metrics_error(metrics, "triggers", err);
        free(d->ring_path);
        free(d);
        return rc;
    }
    if (warned) {
        pfr_warn("%s", err);
        pfr_daemon_metrics_error(metrics, "triggers", err);
    }
    if (cfg->triggers.pin_endpoint)
        pfr_daemon_metrics_on_post(metrics, "/pin", on_post_pin, d);
    put_metrics(d);
    const pfr_triggers_config *c = &cfg->triggers;
    pfr_info("triggers: oom=%s fatal_signal=%s pressure=%s cgroups=%s (cpu %u%% for %.0f s, "
             "memory %u%% for %.0f s), window %.0f s before, %.0f s after, %u pins/h/service, "
             "POST /pin %s",
             c->oom && !warned ? "on" : "off", c->fatal_signal && !warned ? "on" : "off",
             c->pressure ? "on" : "off", c->pressure_cgroups ? "on" : "off", c->cpu_percent,
             (double)c->cpu_for_ns / 1e9, c->memory_percent, (double)c->memory_for_ns / 1e9,
             (double)c->before_ns / 1e9, (double)c->after_ns / 1e9, c->max_pins_per_hour,
             !c->pin_endpoint                    ? "off"
             : !pfr_daemon_metrics_port(metrics) ? "off (no metrics listener)"
             : c->pin_from_any_host              ? "on (any host)"
                                                 : "on (loopback clients)");
    *out = d;
    return 0;
}

void pfr_daemon_triggers_reload(pfr_daemon_triggers *d, const pfr_config *cfg)
{
    if (d && pfr_triggers_set_rules(d->t, &cfg->rules))
        pfr_warn("SIGHUP: the triggers keep their service rules (out of memory)");
}

void pfr_daemon_triggers_stop(pfr_daemon_triggers *d)
{
    if (!d)
        return;
    pfr_daemon_metrics_on_post(d->metrics, "/pin", NULL, NULL);
    pfr_triggers_free(d->t); /* hands the pending requests to on_pin_request */
    pfr_store_close(d->ring);
    free(d->ring_path);
    free(d);
}
