/* The Go heap profiler as a recorder source: scheduling, naming, labels, metrics, logs. */
#include "goheap_source.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe_scan.h"
#include "naming.h"
#include "pfr_goheap_sym.h"
#include "pfr_log.h"
#include "process_info.h"
#include "pfr_map.h"
#include "pfr_shared_sym.h"

/* One process's profile, kept until the whole collection is written in one transaction. */
struct pending {
    pfr_profile *profile;
    char service[PFR_SERVICE_MAX];
    char container_id[PFR_CONTAINER_ID_MAX + 1];
    char pid[16];
    pfr_kv labels[2];
    size_t nlabels;
    int64_t start_ns, end_ns;
};

typedef struct pfr_goheap_source pfr_goheap_source;

#define SOON_MAX 256 /* pids waiting for an early heap profile; more wait for the next minute */

struct pfr_goheap_source {
    pfr_goheap *collector;
    pfr_shared_sym *sym; /* the daemon's (borrowed) */
    pfr_daemon_metrics *metrics;
    pfr_metric_family *alloc_bytes, *alloc_objects;
    pfr_service_rules rules;
    pfr_identity *identity;    /* borrowed */
    pfr_goheap_resolver inner; /* the shared symbolizer's resolver */
    int64_t interval_ns, next_ns;
    int64_t tick_ns; /* the recorder's interval */
    struct pending *pending;
    size_t npending, cap_pending;
    pfr_map seen, seen_before; /* pids profiled this collection and the one before */
    pfr_map resolved;          /* pids whose mappings this source asked the symbolizer for */
    int emit_rc;
    /* pids a trigger wants profiled at the next collection (collect_soon, any thread) */
    pthread_mutex_t soon_lock;
    pid_t soon[SOON_MAX];
    size_t nsoon;
    uint64_t soon_collections; /* early collections made for them */
    char names[16384];         /* the last resolved frames' strings, valid until the next resolve */
};

/* ---- resolver: the shared symbolizer, remembering which pids it snapshotted ---- */

/* The symbolizer is taken per call, not for the whole collection: the CPU profiler's
 * notification thread must snapshot new processes within milliseconds, and a collection scans
 * every executable of the host. */
static int track_begin(void *ctx, pid_t pid)
{
    pfr_goheap_source *g = ctx;
    if (pfr_map_put(&g->resolved, (uint64_t)pid, 1))
        return -ENOMEM;
    pfr_shared_sym_acquire(g->sym);
    int rc = g->inner.begin(g->inner.ctx, pid);
    pfr_shared_sym_release(g->sym);
    return rc;
}

/* Copy s into the source's string buffer (the symbolizer's strings may be freed by the other
 * thread once it is released); a name that does not fit is cut. */
static const char *keep(pfr_goheap_source *g, const char *s, size_t *used)
{
    size_t room = sizeof(g->names) - *used;
    if (room == 0)
        return "";
    char *dst = g->names + *used;
    size_t n = strnlen(s, room - 1);
    memcpy(dst, s, n);
    dst[n] = '\0';
    *used += n + 1;
    return dst;
}

static int track_resolve(void *ctx, pid_t pid, uint64_t addr, pfr_goheap_frame *out, size_t cap)
{
    pfr_goheap_source *g = ctx;
    pfr_shared_sym_acquire(g->sym);
    int n = g->inner.resolve(g->inner.ctx, pid, addr, out, cap);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        out[i].function = keep(g, out[i].function, &used);
        out[i].file = keep(g, out[i].file, &used);
    }
    pfr_shared_sym_release(g->sym);
    return n;
}

/* ---- sink ---- */

static void name_process(pfr_goheap_source *g, pid_t pid, struct pending *p)
{
    char exe[4096], cgroup[4096], comm[16];
    bool kthread = false;
    pfr_process_read_facts("/proc", (uint32_t)pid, exe, sizeof(exe), cgroup, sizeof(cgroup), comm,
                           sizeof(comm), &kthread);
    pfr_process_facts f = {.comm = comm, .exe = exe, .cgroup = cgroup, .kthread = kthread};
    pfr_name_process(g->identity, &g->rules, &f, (int)pid, p->service, sizeof(p->service),
                     p->container_id);
}

static void update_counters(pfr_goheap_source *g, const pfr_goheap_proc *info,
                            const struct pending *p)
{
    const char *exe = strrchr(info->exe, '/') ? strrchr(info->exe, '/') + 1 : info->exe;
    const char *values[PFR_METRIC_GO_LABELS] = {p->service, p->container_id, p->pid, exe};
    if (g->alloc_bytes)
        pfr_metrics_set(g->alloc_bytes, values, (double)info->alloc_bytes_total);
    if (g->alloc_objects)
        pfr_metrics_set(g->alloc_objects, values, (double)info->alloc_objects_total);
}

static void on_profile(void *ctx, const pfr_goheap_proc *info, pfr_profile *profile)
{
    pfr_goheap_source *g = ctx;
    if (g->npending == g->cap_pending) {
        size_t cap = g->cap_pending ? 2 * g->cap_pending : 16;
        struct pending *v = realloc(g->pending, cap * sizeof(*v));
        if (!v) {
            pfr_profile_free(profile);
            g->emit_rc = -ENOMEM;
            return;
        }
        g->pending = v;
        g->cap_pending = cap;
    }
    struct pending *p = &g->pending[g->npending++];
    memset(p, 0, sizeof(*p));
    p->profile = profile;
    name_process(g, info->pid, p);
    snprintf(p->pid, sizeof(p->pid), "%d", (int)info->pid);
    if (p->container_id[0])
        p->labels[p->nlabels++] = (pfr_kv){"container.id", p->container_id};
    p->labels[p->nlabels++] = (pfr_kv){"pid", p->pid};
    /* pprof's time_nanos is the profile's start: the chunk covers [start, start + duration) */
    p->start_ns = pfr_profile_time_nanos(profile);
    p->end_ns = p->start_ns + pfr_profile_duration_nanos(profile);
    update_counters(g, info, p);
    pfr_map_put(&g->seen, (uint64_t)info->pid, 1);
}

static void on_event(void *ctx, const pfr_goheap_event *ev)
{
    pfr_goheap_source *g = ctx;
    switch (ev->kind) {
    case PFR_GOHEAP_EV_STRIPPED:
        pfr_info("goheap: %s is a stripped Go executable (no .symtab): no heap profile", ev->exe);
        break;
    case PFR_GOHEAP_EV_BAD_BINARY:
        pfr_warn("goheap: %s: %s", ev->exe, ev->msg);
        pfr_daemon_metrics_error(g->metrics, "goheap", ev->msg);
        break;
    case PFR_GOHEAP_EV_RATE_FORCED:
        pfr_info("goheap: pid %d (%s): MemProfileRate was 0, set it to the Go default",
                 (int)ev->pid, ev->exe);
        break;
    case PFR_GOHEAP_EV_FORCE_FAILED:
        pfr_warn("goheap: pid %d (%s): cannot switch heap sampling on: %s", (int)ev->pid, ev->exe,
                 ev->msg[0] ? ev->msg : strerror(-ev->err));
        pfr_daemon_metrics_error(g->metrics, "goheap", ev->msg);
        break;
    case PFR_GOHEAP_EV_WALK_ERROR:
        /* usually a process that exited or exec'ed while read: detail, not alarm */
        pfr_debug("goheap: pid %d (%s): %s", (int)ev->pid, ev->exe, ev->msg);
        if (ev->err != -ESRCH)
            pfr_daemon_metrics_error(g->metrics, "goheap", ev->msg);
        break;
    case PFR_GOHEAP_EV_RESTARTED:
        pfr_debug("goheap: pid %d (%s) is a new process: its deltas start again", (int)ev->pid,
                  ev->exe);
        break;
    }
}

/* ---- collection ---- */

/* Processes profiled before but not now are gone (or stopped being Go): drop their counters, and
 * the mappings snapshots this source asked for. Called holding the shared symbolizer. */
static void forget_gone(pfr_goheap_source *g)
{
    size_t pos = 0;
    uint64_t pid, v;
    while (pfr_map_next(&g->seen_before, &pos, &pid, &v)) {
        if (pfr_map_get(&g->seen, pid))
            continue;
        char s[16];
        snprintf(s, sizeof(s), "%" PRIu64, pid);
        if (g->alloc_bytes)
            pfr_metrics_remove_matching(g->alloc_bytes, "pid", s);
        if (g->alloc_objects)
            pfr_metrics_remove_matching(g->alloc_objects, "pid", s);
    }
    pos = 0;
    while (pfr_map_next(&g->resolved, &pos, &pid, &v))
        if (!pfr_map_get(&g->seen, pid))
            pfr_shared_sym_forget(g->sym, (pid_t)pid);
    pfr_map_clear(&g->resolved);
    /* the snapshots of processes profiled now stay for the next collection */
    pos = 0;
    while (pfr_map_next(&g->seen, &pos, &pid, &v))
        pfr_map_put(&g->resolved, pid, 1);
    pfr_map seen_before = g->seen_before;
    g->seen_before = g->seen;
    g->seen = seen_before;
    pfr_map_clear(&g->seen);
}

static int emit_pending(pfr_goheap_source *g, pfr_emit_fn emit, void *emit_ctx)
{
    if (g->npending == 0)
        return 0;
    pfr_chunk_in *chunks = calloc(g->npending, sizeof(*chunks));
    if (!chunks)
        return -ENOMEM;
    for (size_t i = 0; i < g->npending; i++) {
        struct pending *p = &g->pending[i];
        chunks[i] = (pfr_chunk_in){
            .service = p->service,
            .labels = p->labels,
            .nlabels = p->nlabels,
            .start_ns = p->start_ns,
            .end_ns = p->end_ns,
            .profile = p->profile,
        };
    }
    int rc = emit(chunks, g->npending, emit_ctx);
    free(chunks);
    return rc < 0 ? rc : 0;
}

static void free_pending(pfr_goheap_source *g)
{
    for (size_t i = 0; i < g->npending; i++)
        pfr_profile_free(g->pending[i].profile);
    g->npending = 0;
}

/* The pids a trigger asked for since the last collection, taken (at most SOON_MAX). */
static size_t take_soon(pfr_goheap_source *g, pid_t *pids)
{
    pthread_mutex_lock(&g->soon_lock);
    size_t n = g->nsoon;
    memcpy(pids, g->soon, n * sizeof(*pids));
    g->nsoon = 0;
    pthread_mutex_unlock(&g->soon_lock);
    return n;
}

/* Collections ride on the recorder's intervals, whose ends jitter by a little: due within half
 * an interval counts as due, or a 3 s heap interval would last 4 s half the time. */
static bool heap_due(const pfr_goheap_source *g, int64_t end_ns)
{
    return end_ns + g->tick_ns / 2 >= g->next_ns;
}

static bool goheap_due(void *self, int64_t end_ns)
{
    pfr_goheap_source *g = self;
    pthread_mutex_lock(&g->soon_lock);
    bool soon = g->nsoon > 0;
    pthread_mutex_unlock(&g->soon_lock);
    return soon || heap_due(g, end_ns);
}

static int goheap_collect(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit,
                          void *emit_ctx)
{
    (void)start_ns;
    pfr_goheap_source *g = self;
    pid_t soon[SOON_MAX];
    size_t nsoon = take_soon(g, soon);
    bool due = heap_due(g, end_ns);
    if (!due && nsoon == 0)
        return 0;
    if (due)
        g->next_ns = end_ns + g->interval_ns;
    else
        g->soon_collections++;
    g->emit_rc = 0;
    pfr_goheap_sink sink = {.ctx = g, .profile = on_profile, .event = on_event};
    /* an early collection visits only the pids asked for, and forgets nobody */
    int rc = pfr_goheap_collect(g->collector, end_ns, due ? NULL : soon, due ? 0 : nsoon, &sink);
    if (due) {
        pfr_shared_sym_acquire(g->sym);
        forget_gone(g);
        pfr_shared_sym_release(g->sym);
    }
    if (rc == 0)
        rc = g->emit_rc;
    int erc = emit_pending(g, emit, emit_ctx);
    free_pending(g);
    if (rc) {
        pfr_daemon_metrics_error(g->metrics, "goheap", strerror(-rc));
        return rc;
    }
    return erc;
}

static int goheap_reload(void *self, const pfr_config *cfg)
{
    pfr_goheap_source *g = self;
    pfr_service_rules rules;
    int rc = pfr_service_rules_copy(&rules, &cfg->rules);
    if (rc)
        return rc;
    pfr_service_rules_free(&g->rules);
    g->rules = rules;
    return 0;
}

static void goheap_log_stats(void *self)
{
    pfr_goheap_source *g = self;
    if (pfr_log_get_level() < PFR_LOG_DEBUG)
        return;
    pfr_goheap_stats s;
    pfr_goheap_get_stats(g->collector, &s);
    pfr_debug("goheap: collections=%llu go_processes=%llu profiles=%llu forced=%llu "
              "stripped=%llu walk_errors=%llu buckets=%llu mem_reads=%llu collect_ms=%.1f",
              (unsigned long long)s.collections, (unsigned long long)s.go_processes,
              (unsigned long long)s.profiles, (unsigned long long)s.rates_forced,
              (unsigned long long)s.stripped_binaries, (unsigned long long)s.walk_errors,
              (unsigned long long)s.buckets_read, (unsigned long long)s.mem_reads,
              (double)s.collect_ns / 1e6);
}

/* What the rows read: the collector's figures and the source's early collections. */
typedef struct goheap_view {
    pfr_goheap_stats st;
    uint64_t soon_collections;
} goheap_view;

#define C    PFR_METRIC_COUNTER
#define F(f) PFR_METRIC_FIELD(goheap_view, st.f)

static const pfr_metric_row goheap_metric_rows[] = {
    {"pfr_goheap_profiles_total", C, "Go heap profiles written", F(profiles)},
    {"pfr_goheap_process_visits_total", C,
     "visits of Go processes with symbols (one per process and collection)", F(go_processes)},
    {"pfr_goheap_processes_opted_out_total", C,
     "Go processes whose environment refuses profiling: their heap is never read", F(opted_out)},
    {"pfr_goheap_rates_forced_total", C, "MemProfileRate writes in force mode", F(rates_forced)},
    {"pfr_goheap_stripped_binaries_total", C, "Go executables skipped: no .symtab",
     F(stripped_binaries)},
    {"pfr_goheap_walk_errors_total", C, "Go heap walks that failed, by reason",
     .labels = {"reason"},
     .series = PFR_METRIC_SERIES({{"read"}, F(read_errors)}, {{"loop"}, F(loop_errors)},
                                 {{"limit"}, F(limit_errors)}, {{"bad_bucket"}, F(bad_buckets)},
                                 {{"timeout"}, F(timeouts)})},
    {"pfr_goheap_files_refused_total", C,
     "Go executables refused before they were read through, by reason", .labels = {"reason"},
     F(files_refused[0]), .name_of = pfr_refusal_name, .first = PFR_REFUSED_NONE + 1,
     .end = PFR_NREFUSALS},
    {"pfr_goheap_early_collections_total", C,
     "heap collections made before they were due, for processes under memory pressure",
     PFR_METRIC_FIELD(goheap_view, soon_collections)},
    {"pfr_goheap_collect_seconds_total", C, "time spent collecting Go heap profiles", F(collect_ns),
     .divisor = 1e9},
};
static const pfr_metric_table goheap_table =
    PFR_METRIC_TABLE("Go heap profiles", goheap_metric_rows);
static const pfr_metric_table *const goheap_tables[] = {&goheap_table, &pfr_metrics_go_alloc_table,
                                                        NULL};
#undef F

static void goheap_stats(void *self, void *out)
{
    pfr_goheap_source *g = self;
    goheap_view *v = out;
    pfr_goheap_get_stats(g->collector, &v->st);
    v->soon_collections = g->soon_collections;
}

static void goheap_collect_soon(void *self, const int32_t *pids, size_t npids)
{
    pfr_goheap_source *g = self;
    pthread_mutex_lock(&g->soon_lock);
    for (size_t i = 0; i < npids && g->nsoon < SOON_MAX; i++) {
        bool have = false;
        for (size_t j = 0; j < g->nsoon && !have; j++)
            have = g->soon[j] == (pid_t)pids[i];
        if (!have)
            g->soon[g->nsoon++] = (pid_t)pids[i];
    }
    pthread_mutex_unlock(&g->soon_lock);
}

static void goheap_destroy(void *self)
{
    pfr_goheap_source *g = self;
    if (!g)
        return;
    pthread_mutex_destroy(&g->soon_lock);
    free_pending(g);
    free(g->pending);
    pfr_goheap_free(g->collector);
    pfr_service_rules_free(&g->rules);
    pfr_map_free(&g->seen);
    pfr_map_free(&g->seen_before);
    pfr_map_free(&g->resolved);
    free(g);
}

static const pfr_source_ops goheap_ops = {
    .name = "goheap",
    .collect = goheap_collect,
    .reload = goheap_reload,
    .log_stats = goheap_log_stats,
    .stats = goheap_stats,
    .destroy = goheap_destroy,
    .collect_soon = goheap_collect_soon,
    .due = goheap_due,
};

static pfr_source pfr_goheap_source_as_source(pfr_goheap_source *g)
{
    return (pfr_source){.ops = &goheap_ops, .self = g};
}

static int pfr_goheap_source_new(const pfr_source_env *env, pfr_goheap_source **out, char *err,
                                 size_t errlen)
{
    const pfr_config *cfg = env->cfg;
    pfr_exe_scan *exes = env->exes;
    pfr_daemon_metrics *metrics = env->metrics;
    struct pfr_identity *identity = env->identity;
    pfr_goheap_source *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    pthread_mutex_init(&g->soon_lock, NULL);
    g->identity = identity;
    g->sym = env->sym;
    g->metrics = metrics;
    const pfr_goheap_config *gc = pfr_config_source(cfg, &pfr_goheap_source_desc);
    g->interval_ns = gc->interval_ns;
    g->tick_ns = cfg->interval_ns;
    /* the symbolizer is only borrowed: the resolver object itself owns nothing */
    pfr_symbolizer *sym = pfr_shared_sym_acquire(g->sym);
    g->inner = pfr_goheap_sym_resolver(sym);
    pfr_shared_sym_release(g->sym);
    int rc = pfr_service_rules_copy(&g->rules, &cfg->rules);
    if (rc == 0)
        rc = pfr_metrics_go_alloc_families(pfr_daemon_metrics_registry(metrics), &g->alloc_bytes,
                                           &g->alloc_objects);
    if (rc == 0) {
        pfr_goheap_opts o = {
            .mode = (enum pfr_goheap_mode)gc->mode,
            .interval_ns = gc->interval_ns,
            .resolver = {.ctx = g, .begin = track_begin, .resolve = track_resolve},
            .exes = exes,
            .exes_max_age_ns = PFR_EXES_MAX_AGE(gc->interval_ns),
            .fsguard = env->fsguard,
            .membudget = env->membudget,
        };
        rc = pfr_goheap_new(&o, &g->collector);
    }
    if (rc) {
        snprintf(err, errlen, "cannot start the Go heap profiler: %s", strerror(-rc));
        goheap_destroy(g);
        return rc;
    }
    *out = g;
    return 0;
}

static bool goheap_wanted(const pfr_config *cfg)
{
    const pfr_goheap_config *gc = pfr_config_source(cfg, &pfr_goheap_source_desc);
    return gc->mode != PFR_GOHEAP_DISABLED;
}

static int goheap_start(pfr_source_env *env, pfr_source *out, char *err, size_t errlen)
{
    const pfr_config *cfg = env->cfg;
    pfr_goheap_source *g = NULL;
    int rc = pfr_goheap_source_new(env, &g, err, errlen);
    if (rc)
        return rc;
    const pfr_goheap_config *gc = pfr_config_source(cfg, &pfr_goheap_source_desc);
    pfr_info("Go heap profiler: %s, every %.0f s",
             pfr_goheap_mode_name((enum pfr_goheap_mode)gc->mode), (double)gc->interval_ns / 1e9);
    *out = pfr_goheap_source_as_source(g);
    return 0;
}

static const char *const goheap_modes[] = {[PFR_GOHEAP_DISABLED] = "disabled",
                                           [PFR_GOHEAP_ENABLED] = "enabled",
                                           [PFR_GOHEAP_FORCE] = "force",
                                           NULL};

static const pfr_setting goheap_rows[] = {
    {.key = "go_heap_profiler",
     .type = PFR_SET_ENUM,
     PFR_SETTING_FIELD(pfr_goheap_config, mode),
     .def = "enabled",
     .choices = goheap_modes,
     .env = "PFR_GO_HEAP_PROFILER,GO_HEAP_PROFILER",
     .metavar = "MODE",
     .help = "disabled; enabled: Go processes whose heap sampling is on; force: also switch "
             "sampling on (writes runtime.MemProfileRate) where the linker left it off "
             "(docs/goheap.md). GO_HEAP_PROFILER is Coroot's name"},
    {.key = "go_heap_interval",
     .type = PFR_SET_DURATION,
     PFR_SETTING_FIELD(pfr_goheap_config, interval_ns),
     .def = "60s",
     .min = 1,
     .max = 86400,
     .metavar = "DURATION",
     .help = "between heap profiles"},
};

static const pfr_settings_group goheap_group = {
    .name = "goheap",
    .section = "recorder",
    .intro = "Go heap profiles, read through /proc/PID/mem.",
    .rows = goheap_rows,
    .nrows = sizeof(goheap_rows) / sizeof(goheap_rows[0]),
};

static const pfr_settings_group *const goheap_groups[] = {&goheap_group, NULL};

const pfr_source_desc pfr_goheap_source_desc = {
    .name = "goheap",
    .settings = goheap_groups,
    .conf_size = sizeof(pfr_goheap_config),
    .wanted = goheap_wanted,
    .start = goheap_start,
    .metrics = goheap_tables,
    .stats_size = sizeof(goheap_view),
};
