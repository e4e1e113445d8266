/* The Java profiler as a recorder source: the worker that drives the JVMs, and the adapter. */
#include "java_source.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe_scan.h"
#include "jfr_session.h"
#include "naming.h"
#include "pfr_clock.h"
#include "pfr_identity.h"
#include "pfr_jfr.h"
#include "pfr_log.h"
#include "pfr_map.h"
#include "pfr_membudget.h"
#include "process_info.h"

/* Deadlines: the attach handshake and JFR.start (a JVM that must start its listener takes
 * ~100 ms; a loaded one more), a dump (the JVM writes the file before it answers), and the
 * stop of each recording when the recorder stops (under systemd's 30 s stop timeout). */
#define START_TIMEOUT_NS (5 * 1000000000LL)
#define DUMP_TIMEOUT_NS  (10 * 1000000000LL)
#define STOP_TIMEOUT_NS  (2 * 1000000000LL)
#define STOP_BUDGET_NS   (15 * 1000000000LL)
/* A JVM that did not answer is asked again after this, doubled up to the cap. */
#define BACKOFF_MIN_NS   (30 * 1000000000LL)
#define BACKOFF_MAX_NS   (3600 * 1000000000LL)
#define PERFMAP_EVERY_NS (60 * 1000000000LL)

/* Why a JVM was passed over (a metric label each). */
enum skip {
    SKIP_ATTACH_DISABLED = 0, /* -XX:+DisableAttachMechanism */
    SKIP_NO_SIGQUIT,          /* no SIGQUIT handler (-Xrs, or still starting) and no socket */
    SKIP_NO_ANSWER,           /* no listener or no reply before the deadline */
    SKIP_NO_PERMISSION,       /* its credentials could not be taken */
    SKIP_NO_JFR,              /* no Flight Recorder */
    SKIP_OPTED_OUT,           /* its environment refuses profiling */
    SKIP_OTHER,
    NSKIPS
};

typedef struct java_stats {
    uint64_t jvms, recording, with_own_recordings; /* gauges */
    uint64_t attaches, skips[NSKIPS];
    uint64_t dumps, dump_errors, dump_bytes, dump_ns;
    uint64_t conversion_errors, profiles, events, perfmaps, stops, stop_errors;
    uint64_t carried_stacks, uncarried_chunks; /* pfr_jfr_counts' */
    uint64_t triggers, credential_switches;
} java_stats;

enum jvm_state { J_NEW = 0, J_RECORDING, J_BACKOFF, J_SKIPPED };

typedef struct jvm_entry {
    pfr_jfr_session s;
    enum jvm_state state;
    int64_t next_try_ns, backoff_ns; /* CLOCK_MONOTONIC */
    int64_t from_ns;                 /* unix ns: the next dump covers [from, now) */
    int64_t perfmap_ns;
    uint64_t exe_key; /* of its executable when found */
    bool seen;        /* in this round's scan */
    bool warned;      /* a conversion error was logged at warning level */
    /* threads with an allocation sample in pfr's recording (pfr_jfr.h): a thread's first one
     * weighs what it allocated before the recording began, and is left out */
    pfr_jfr_threads alloc_seen;
} jvm_entry;

/* One profile the worker finished, kept until collect emits it. */
typedef struct pending {
    pfr_profile *profile;
    char service[PFR_SERVICE_MAX];
    char container_id[PFR_CONTAINER_ID_MAX + 1];
    char pid[16];
    pfr_kv labels[2];
    size_t nlabels;
    int64_t start_ns, end_ns;
} pending;

typedef struct pfr_java_source {
    /* set at start, read-only after */
    pfr_exe_scan *exes, *own_exes;
    struct pfr_fsguard *fsguard;
    pfr_membudget *membudget;
    pfr_identity *identity;
    pfr_daemon_metrics *metrics;
    int64_t interval_ns;
    pthread_t worker;
    bool worker_started;

    pthread_mutex_t lock; /* guards what follows, up to the worker's own */
    pthread_cond_t wake;
    bool stop, enabled, round_asked;
    uint64_t max_dump_bytes;
    pfr_service_rules rules;
    pending *done;
    size_t ndone, cap_done;
    java_stats shown; /* the worker's figures as of its last round */

    /* the worker's own */
    pfr_map by_pid;  /* pid -> jvm_entry * */
    pfr_map not_jvm; /* pid -> st_ino ^ st_dev of an executable seen not to be a JVM */
    java_stats st;
} pfr_java_source;

static const char *const skip_names[NSKIPS] = {
    [SKIP_ATTACH_DISABLED] = "attach_disabled",
    [SKIP_NO_SIGQUIT] = "no_sigquit_handler",
    [SKIP_NO_ANSWER] = "no_answer",
    [SKIP_NO_PERMISSION] = "no_permission",
    [SKIP_NO_JFR] = "no_flight_recorder",
    [SKIP_OPTED_OUT] = "opted_out",
    [SKIP_OTHER] = "error",
};

/* ---- the worker: finding JVMs ---- */

static void entry_free(pfr_java_source *g, jvm_entry *e)
{
    g->st.triggers += e->s.attach.triggers;
    g->st.credential_switches += e->s.attach.credential_switches;
    pfr_jfr_session_close(&e->s);
    pfr_jfr_threads_free(&e->alloc_seen);
    free(e);
}

static void skip(pfr_java_source *g, jvm_entry *e, enum skip why, bool for_good)
{
    g->st.skips[why]++;
    const char *how = for_good ? "not profiled" : "asked again later";
    if (why == SKIP_OPTED_OUT)
        pfr_info("java: pid %d refuses profiling (environment): %s", (int)e->s.jvm.pid, how);
    else
        pfr_warn("java: pid %d: %s%s%s: %s", (int)e->s.jvm.pid, skip_names[why],
                 e->s.err[0] ? ": " : "", e->s.err, how);
    if (for_good) {
        e->state = J_SKIPPED;
        return;
    }
    e->backoff_ns = e->backoff_ns ? e->backoff_ns * 2 : BACKOFF_MIN_NS;
    if (e->backoff_ns > BACKOFF_MAX_NS)
        e->backoff_ns = BACKOFF_MAX_NS;
    e->state = J_BACKOFF;
    e->next_try_ns = pfr_clock_mono_ns() + e->backoff_ns;
}

static uint64_t exe_key(const pfr_exe *x)
{
    return (((uint64_t)x->st.st_dev << 40) ^ (uint64_t)x->st.st_ino) << 1;
}

/* A process not known yet: a JVM becomes an entry; anything else is remembered by its
 * executable so it is not read again until it execs. Once it was seen twice without libjvm:
 * the java launcher loads libjvm.so (dlopen) just after it starts, and a scan may come first. */
static void discover(pfr_java_source *g, const pfr_exe *x)
{
    uint64_t *v = pfr_map_get(&g->not_jvm, (uint64_t)x->pid);
    if (v && *v == (exe_key(x) | 1))
        return;
    pfr_jvm jvm;
    int rc = pfr_hotspot_probe(NULL, x->pid, &jvm);
    if (rc == -ENOENT) {
        pfr_map_put(&g->not_jvm, (uint64_t)x->pid,
                    v && *v == exe_key(x) ? exe_key(x) | 1 : exe_key(x));
        return;
    }
    if (rc)
        return; /* gone, or unreadable now: looked at again next round */
    pfr_map_del(&g->not_jvm, (uint64_t)x->pid);
    jvm_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    e->s.tmp_fd = -1;
    e->s.jvm = jvm;
    e->exe_key = exe_key(x);
    e->seen = true;
    if (pfr_map_put(&g->by_pid, (uint64_t)x->pid, (uint64_t)(uintptr_t)e)) {
        free(e);
        return;
    }
    g->st.jvms++;
    bool opted_out = false;
    pfr_identity_consent_read(NULL, x->pid, 1 << 20, &opted_out);
    if (opted_out)
        skip(g, e, SKIP_OPTED_OUT, true);
    else if (jvm.attach_disabled)
        skip(g, e, SKIP_ATTACH_DISABLED, true);
    else
        pfr_info("java: pid %d (pid %d in its namespace, uid %u) is a HotSpot JVM", (int)x->pid,
                 (int)jvm.nspid, (unsigned)jvm.uid);
}

/* Mark the JVMs still there, find new ones, drop the gone. */
static void scan(pfr_java_source *g)
{
    pfr_exe_list l = {0};
    if (pfr_exe_scan_get(g->exes, PFR_EXES_MAX_AGE(g->interval_ns), &l) != 0)
        return;
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&g->by_pid, &pos, &k, &v))
        ((jvm_entry *)(uintptr_t)v)->seen = false;
    pfr_map alive = {0};
    for (size_t i = 0; i < l.n; i++) {
        pfr_map_put(&alive, (uint64_t)l.v[i].pid, 1);
        uint64_t *ev = pfr_map_get(&g->by_pid, (uint64_t)l.v[i].pid);
        if (!ev) {
            discover(g, &l.v[i]);
            continue;
        }
        jvm_entry *e = (jvm_entry *)(uintptr_t)*ev;
        /* the same pid, another process (or the JVM exec'd): dropped below, found anew */
        e->seen = e->exe_key == exe_key(&l.v[i]) && pfr_hotspot_refresh(NULL, &e->s.jvm) == 0;
    }
    pfr_exe_list_free(&l);
    /* entries not seen: exited (their /tmp, if it still exists, is the JVM's to clean) */
    pos = 0;
    while (pfr_map_next(&g->by_pid, &pos, &k, &v)) {
        jvm_entry *e = (jvm_entry *)(uintptr_t)v;
        if (e->seen)
            continue;
        pfr_map_del(&g->by_pid, k);
        g->st.jvms--;
        pos = 0; /* the map changed under the walk */
        entry_free(g, e);
    }
    pos = 0;
    while (pfr_map_next(&g->not_jvm, &pos, &k, &v))
        if (!pfr_map_get(&alive, k)) {
            pfr_map_del(&g->not_jvm, k);
            pos = 0;
        }
    pfr_map_free(&alive);
}

/* ---- the worker: recording ---- */

static enum skip skip_of(int rc)
{
    switch (rc) {
    case -ETIMEDOUT:
    case -ECONNREFUSED:
        return SKIP_NO_ANSWER;
    case -EPERM:
    case -EACCES:
        return SKIP_NO_PERMISSION;
    case -ENOTSUP:
        return SKIP_NO_JFR;
    default:
        return SKIP_OTHER;
    }
}

static void start_recording(pfr_java_source *g, jvm_entry *e, uint64_t max_bytes)
{
    /* with no handler and no socket yet, SIGQUIT would kill it: wait for the handler */
    if (e->s.tmp_fd < 0) {
        int rc = pfr_jfr_session_open(&e->s, g->fsguard, NULL, &e->s.jvm, (size_t)max_bytes,
                                      2 * (g->interval_ns / 1000000000) + 60);
        if (rc) {
            skip(g, e, SKIP_OTHER, false);
            return;
        }
    }
    e->s.max_bytes = (size_t)max_bytes;
    int64_t t0 = pfr_clock_mono_ns();
    int rc = pfr_jfr_session_start(&e->s, t0 + START_TIMEOUT_NS);
    if (rc == -ECONNREFUSED && !e->s.jvm.sigquit_caught) {
        snprintf(e->s.err, sizeof(e->s.err), "no SIGQUIT handler and no attach socket");
        skip(g, e, SKIP_NO_SIGQUIT, false);
        return;
    }
    if (rc) {
        if (!e->s.err[0])
            snprintf(e->s.err, sizeof(e->s.err), "%s", strerror(-rc));
        skip(g, e, skip_of(rc), rc == -ENOTSUP);
        return;
    }
    g->st.attaches++;
    e->state = J_RECORDING;
    e->backoff_ns = 0;
    e->from_ns = pfr_clock_real_ns();
    e->alloc_seen.n = 0; /* a new recording: every thread's next sample is its first in it */
    if (e->s.others)
        g->st.with_own_recordings++;
    pfr_info("java: pid %d: recording, started in %.1f ms (%u recording%s of its own kept)",
             (int)e->s.jvm.pid, (double)(pfr_clock_mono_ns() - t0) / 1e6, e->s.others,
             e->s.others == 1 ? "" : "s");
}

static int keep_profile(pfr_java_source *g, jvm_entry *e, pfr_profile *p, int64_t from, int64_t to)
{
    pending d = {.profile = p, .start_ns = from, .end_ns = to};
    snprintf(d.pid, sizeof(d.pid), "%d", (int)e->s.jvm.pid);
    char exe[4096], cgroup[4096], comm[16];
    bool kthread = false;
    pfr_process_read_facts("/proc", (uint32_t)e->s.jvm.pid, exe, sizeof(exe), cgroup,
                           sizeof(cgroup), comm, sizeof(comm), &kthread);
    pfr_process_facts f = {.comm = comm, .exe = exe, .cgroup = cgroup, .kthread = kthread};
    pthread_mutex_lock(&g->lock);
    pfr_name_process(g->identity, &g->rules, &f, (int)e->s.jvm.pid, d.service, sizeof(d.service),
                     d.container_id);
    if (g->ndone == g->cap_done) {
        size_t cap = g->cap_done ? 2 * g->cap_done : 16;
        pending *v = realloc(g->done, cap * sizeof(*v));
        if (!v) {
            pthread_mutex_unlock(&g->lock);
            pfr_profile_free(p);
            return -ENOMEM;
        }
        g->done = v;
        g->cap_done = cap;
    }
    g->done[g->ndone++] = d;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

static void convert(pfr_java_source *g, jvm_entry *e, const uint8_t *buf, size_t len, int64_t from,
                    int64_t to)
{
    pfr_jfr_opts o = {.cpu_period_ns = PFR_JFR_CPU_PERIOD_NS,
                      .from_ns = from,
                      .to_ns = to,
                      .alloc_seen = &e->alloc_seen};
    pfr_jfr_profiles out = {0};
    char err[256] = "";
    int rc = pfr_jfr_to_profiles(buf, len, &o, &out, err, sizeof(err));
    if (rc) {
        g->st.conversion_errors++;
        /* the first of a JVM's at warning level, the rest at debug: a JVM writing what the
         * parser cannot read would fill the log every interval */
        if (!e->warned)
            pfr_warn("java: pid %d: its recording (%zu bytes) not converted: %s%s%s",
                     (int)e->s.jvm.pid, len, strerror(-rc), err[0] ? ": " : "", err);
        else
            pfr_debug("java: pid %d: recording not converted: %s", (int)e->s.jvm.pid, err);
        e->warned = true;
        pfr_daemon_metrics_error(g->metrics, "java", err[0] ? err : strerror(-rc));
        return;
    }
    g->st.events += out.counts.events;
    g->st.carried_stacks += out.counts.carried_stacks;
    g->st.uncarried_chunks += out.counts.uncarried_chunks;
    pfr_profile *ps[] = {out.cpu, out.alloc, out.lock};
    for (size_t i = 0; i < 3; i++) {
        if (!ps[i])
            continue;
        if (keep_profile(g, e, ps[i], from, to) == 0)
            g->st.profiles++;
    }
    out.cpu = out.alloc = out.lock = NULL;
    pfr_jfr_profiles_free(&out);
}

static void dump(pfr_java_source *g, jvm_entry *e)
{
    /* under memory pressure the recording waits (the JVM keeps maxage of it) */
    if (g->membudget && pfr_membudget_level(g->membudget) == PFR_MEM_OVER)
        return;
    int64_t to = pfr_clock_real_ns();
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t late = e->s.late_removals;
    int rc =
        pfr_jfr_session_dump(&e->s, e->from_ns, pfr_clock_mono_ns() + DUMP_TIMEOUT_NS, &buf, &len);
    g->st.dump_ns += (uint64_t)e->s.dump_ns;
    int64_t from = e->from_ns;
    /* the next dump begins here whatever happened: a dump refused for its size would only grow */
    e->from_ns = to;
    if (rc) {
        g->st.dump_errors++;
        pfr_warn("java: pid %d: dump: %s", (int)e->s.jvm.pid, e->s.err);
        if (!e->s.recording)
            e->state = J_NEW; /* its recording is gone: start again */
        else if (rc == -ETIMEDOUT || rc == -ECONNREFUSED || rc == -ESRCH)
            skip(g, e, SKIP_NO_ANSWER, false);
        return;
    }
    g->st.dumps++;
    g->st.dump_bytes += len;
    pfr_debug("java: pid %d: dump of %zu bytes in %.1f ms", (int)e->s.jvm.pid, len,
              (double)e->s.dump_ns / 1e6);
    if (e->s.late_removals != late)
        pfr_info("java: pid %d: %s: kept, removed again at the next dump", (int)e->s.jvm.pid,
                 e->s.err);
    convert(g, e, buf, len, from, to);
    free(buf);
}

static void perfmap(pfr_java_source *g, jvm_entry *e)
{
    int64_t now = pfr_clock_mono_ns();
    if (!e->s.jvm.frame_pointers || (e->perfmap_ns && now - e->perfmap_ns < PERFMAP_EVERY_NS))
        return;
    e->perfmap_ns = now;
    if (pfr_jfr_session_perfmap(&e->s, now + START_TIMEOUT_NS) == 0) {
        g->st.perfmaps++;
        pfr_debug("java: pid %d: perf map asked for", (int)e->s.jvm.pid);
    } else
        pfr_debug("java: pid %d: Compiler.perfmap: %s", (int)e->s.jvm.pid, e->s.err);
}

static bool stopping(pfr_java_source *g)
{
    pthread_mutex_lock(&g->lock);
    bool s = g->stop || !g->enabled;
    pthread_mutex_unlock(&g->lock);
    return s;
}

static void round_jvms(pfr_java_source *g, uint64_t max_bytes)
{
    scan(g);
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&g->by_pid, &pos, &k, &v) && !stopping(g)) {
        jvm_entry *e = (jvm_entry *)(uintptr_t)v;
        if (e->state == J_BACKOFF && pfr_clock_mono_ns() >= e->next_try_ns)
            e->state = J_NEW;
        if (e->state == J_NEW)
            start_recording(g, e, max_bytes);
        else if (e->state == J_RECORDING)
            dump(g, e);
        if (e->state == J_RECORDING)
            perfmap(g, e);
    }
}

/* Stop pfr's recordings everywhere (the recorder stops, or the setting was turned off) and
 * forget every JVM: turned on again, they are found anew. */
static void stop_all(pfr_java_source *g)
{
    int64_t budget_end = pfr_clock_mono_ns() + STOP_BUDGET_NS;
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&g->by_pid, &pos, &k, &v)) {
        jvm_entry *e = (jvm_entry *)(uintptr_t)v;
        if (e->s.recording || e->s.seq) {
            int64_t now = pfr_clock_mono_ns();
            int64_t dl = now + STOP_TIMEOUT_NS < budget_end ? now + STOP_TIMEOUT_NS : budget_end;
            if (pfr_jfr_session_stop(&e->s, dl) == 0) {
                g->st.stops++;
                pfr_debug("java: pid %d: pfr's recording stopped", (int)e->s.jvm.pid);
            } else {
                g->st.stop_errors++;
                pfr_warn("java: pid %d: stopping pfr's recording: %s", (int)e->s.jvm.pid, e->s.err);
            }
        }
        entry_free(g, e);
    }
    pfr_map_clear(&g->by_pid);
    g->st.jvms = 0;
    g->st.with_own_recordings = 0;
}

static void publish(pfr_java_source *g)
{
    java_stats s = g->st;
    s.recording = 0;
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&g->by_pid, &pos, &k, &v)) {
        jvm_entry *e = (jvm_entry *)(uintptr_t)v;
        s.recording += e->state == J_RECORDING;
        s.triggers += e->s.attach.triggers;
        s.credential_switches += e->s.attach.credential_switches;
    }
    pthread_mutex_lock(&g->lock);
    g->shown = s;
    pthread_mutex_unlock(&g->lock);
}

static void *worker_main(void *arg)
{
    pfr_java_source *g = arg;
    bool had = false; /* JVMs may hold pfr's recordings */
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (!g->stop && !g->round_asked && !(had && !g->enabled))
            pthread_cond_wait(&g->wake, &g->lock);
        bool stop = g->stop, enabled = g->enabled;
        uint64_t max_bytes = g->max_dump_bytes;
        g->round_asked = false;
        pthread_mutex_unlock(&g->lock);
        if (stop || !enabled) {
            stop_all(g);
            had = false;
        } else {
            round_jvms(g, max_bytes);
            had = true;
        }
        publish(g);
        pthread_mutex_lock(&g->lock);
        if (stop)
            break;
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* ---- the adapter ---- */

static int java_collect(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit,
                        void *emit_ctx)
{
    (void)start_ns;
    (void)end_ns;
    pfr_java_source *g = self;
    pthread_mutex_lock(&g->lock);
    pending *done = g->done;
    size_t n = g->ndone;
    g->done = NULL;
    g->ndone = g->cap_done = 0;
    g->round_asked = true; /* the worker dumps now; its profiles go out at the next collect */
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    int rc = 0;
    if (n) {
        pfr_chunk_in *chunks = calloc(n, sizeof(*chunks));
        rc = chunks ? 0 : -ENOMEM;
        for (size_t i = 0; chunks && i < n; i++) {
            pending *p = &done[i];
            /* as the Go heap source labels its profiles */
            p->nlabels = 0;
            if (p->container_id[0])
                p->labels[p->nlabels++] = (pfr_kv){"container.id", p->container_id};
            p->labels[p->nlabels++] = (pfr_kv){"pid", p->pid};
            chunks[i] = (pfr_chunk_in){.service = p->service,
                                       .labels = p->labels,
                                       .nlabels = p->nlabels,
                                       .start_ns = p->start_ns,
                                       .end_ns = p->end_ns,
                                       .profile = p->profile};
        }
        if (chunks) {
            int w = emit(chunks, n, emit_ctx);
            rc = w < 0 ? w : 0;
        }
        free(chunks);
    }
    for (size_t i = 0; i < n; i++)
        pfr_profile_free(done[i].profile);
    free(done);
    if (rc)
        pfr_daemon_metrics_error(g->metrics, "java", strerror(-rc));
    return rc;
}

static int java_reload(void *self, const pfr_config *cfg)
{
    pfr_java_source *g = self;
    const pfr_java_config *jc = pfr_config_source(cfg, &pfr_java_source_desc);
    pfr_service_rules rules;
    int rc = pfr_service_rules_copy(&rules, &cfg->rules);
    if (rc)
        return rc;
    pthread_mutex_lock(&g->lock);
    pfr_service_rules_free(&g->rules);
    g->rules = rules;
    bool was = g->enabled;
    g->enabled = jc->mode == PFR_JAVA_ENABLED;
    g->max_dump_bytes = jc->max_dump_bytes;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    if (was != g->enabled)
        pfr_info("java profiler: %s", g->enabled ? "enabled" : "disabled: pfr's recordings stop");
    return 0;
}

static void java_stats_fill(void *self, void *out)
{
    pfr_java_source *g = self;
    pthread_mutex_lock(&g->lock);
    *(java_stats *)out = g->shown;
    pthread_mutex_unlock(&g->lock);
}

static void java_log_stats(void *self)
{
    if (pfr_log_get_level() < PFR_LOG_DEBUG)
        return;
    java_stats s;
    java_stats_fill(self, &s);
    pfr_debug("java: jvms=%" PRIu64 " recording=%" PRIu64 " attaches=%" PRIu64 " dumps=%" PRIu64
              " dump_errors=%" PRIu64 " conversion_errors=%" PRIu64 " profiles=%" PRIu64
              " dump_ms=%.1f",
              s.jvms, s.recording, s.attaches, s.dumps, s.dump_errors, s.conversion_errors,
              s.profiles, (double)s.dump_ns / 1e6);
}

/* pfr's recordings are stopped now, beside the last collection (which takes what the worker
 * had dumped): in destroy, a round still converting a dump under load and then the JFR.stop
 * took longer than the daemon waits for the sources' threads, and the recording stayed in the
 * JVM. */
static int64_t java_stopping(void *self)
{
    pfr_java_source *g = self;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    /* a JVM known may hold pfr's recording: the round under way, then its JFR.stop (a loaded
     * JVM answers an attach in seconds), within the stop's budget */
    int64_t need = g->shown.jvms ? STOP_BUDGET_NS : 0;
    pthread_mutex_unlock(&g->lock);
    return need;
}

static void java_destroy(void *self)
{
    pfr_java_source *g = self;
    if (!g)
        return;
    if (g->worker_started) {
        (void)java_stopping(g);        /* (again, if the daemon said so at SIGTERM) */
        pthread_join(g->worker, NULL); /* it stops pfr's recordings first */
    }
    for (size_t i = 0; i < g->ndone; i++)
        pfr_profile_free(g->done[i].profile);
    free(g->done);
    pfr_map_free(&g->by_pid);
    pfr_map_free(&g->not_jvm);
    pfr_service_rules_free(&g->rules);
    pfr_exe_scan_free(g->own_exes);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static const pfr_source_ops java_ops = {
    .name = "java",
    .collect = java_collect,
    .reload = java_reload,
    .log_stats = java_log_stats,
    .stats = java_stats_fill,
    .destroy = java_destroy,
    .stopping = java_stopping,
};

static int java_start(pfr_source_env *env, pfr_source *out, char *err, size_t errlen)
{
    pfr_java_source *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    g->fsguard = env->fsguard;
    g->membudget = env->membudget;
    g->identity = env->identity;
    g->metrics = env->metrics;
    g->interval_ns = env->cfg->interval_ns;
    g->exes = env->exes;
    int rc = 0;
    if (!g->exes) {
        rc = pfr_exe_scan_new(NULL, &g->own_exes);
        g->exes = g->own_exes;
    }
    if (rc == 0)
        rc = java_reload(g, env->cfg);
    if (rc == 0) {
        rc = -pthread_create(&g->worker, NULL, worker_main, g);
        g->worker_started = rc == 0;
        if (rc == 0)
            pthread_setname_np(g->worker, "pfr-java"); /* its CPU in /proc/PID/task */
    }
    if (rc) {
        snprintf(err, errlen, "cannot start the Java profiler: %s", strerror(-rc));
        java_destroy(g);
        return rc;
    }
    pfr_info("Java profiler: HotSpot JVMs through Flight Recorder, every %.0f s",
             (double)g->interval_ns / 1e9);
    *out = (pfr_source){.ops = &java_ops, .self = g};
    return 0;
}

static bool java_wanted(const pfr_config *cfg)
{
    const pfr_java_config *jc = pfr_config_source(cfg, &pfr_java_source_desc);
    return jc->mode != PFR_JAVA_DISABLED;
}

/* ---- settings and metrics ---- */

static const char *const java_modes[] = {
    [PFR_JAVA_DISABLED] = "disabled", [PFR_JAVA_ENABLED] = "enabled", NULL};

static const pfr_setting java_rows[] = {
    {.key = "java_profiler",
     .type = PFR_SET_ENUM,
     PFR_SETTING_FIELD(pfr_java_config, mode),
     .def = "disabled",
     .choices = java_modes,
     .env = "PFR_JAVA_PROFILER",
     .metavar = "MODE",
     .help = "disabled; enabled: record every HotSpot JVM with its own Flight Recorder, through "
             "the attach mechanism (changes the JVM: docs/java.md; the unit needs the drop-in "
             "of docs/operations.md, \"Java\")"},
    {.key = "java_max_dump_bytes",
     .type = PFR_SET_SIZE,
     PFR_SETTING_FIELD(pfr_java_config, max_dump_bytes),
     .def = "64M",
     .min = 1 << 20,
     .max = 1ULL << 30,
     .metavar = "SIZE",
     .help = "a JVM's recording file for one interval larger than this is removed unread"},
};

static const pfr_settings_group java_group = {
    .name = "java",
    .section = "recorder",
    .intro = "Java profiles from HotSpot JVMs' Flight Recorder (docs/java.md).",
    .rows = java_rows,
    .nrows = sizeof(java_rows) / sizeof(java_rows[0]),
};

static const pfr_settings_group *const java_groups[] = {&java_group, NULL};

#define C    PFR_METRIC_COUNTER
#define G    PFR_METRIC_GAUGE
#define F(f) PFR_METRIC_FIELD(java_stats, f)

static const pfr_metric_row java_metric_rows[] = {
    {"pfr_java_jvms", G, "HotSpot JVMs found", F(jvms)},
    {"pfr_java_recording_jvms", G, "JVMs running pfr's Flight Recorder recording", F(recording)},
    {"pfr_java_jvms_with_own_recordings", G,
     "JVMs recording with pfr that also run recordings of their own (kept)",
     F(with_own_recordings)},
    {"pfr_java_attaches_total", C, "pfr's recordings started", F(attaches)},
    {"pfr_java_skips_total", C, "JVMs passed over, by reason (most are asked again later)",
     .labels = {"reason"},
     .series = PFR_METRIC_SERIES({{"attach_disabled"}, F(skips[SKIP_ATTACH_DISABLED])},
                                 {{"no_sigquit_handler"}, F(skips[SKIP_NO_SIGQUIT])},
                                 {{"no_answer"}, F(skips[SKIP_NO_ANSWER])},
                                 {{"no_permission"}, F(skips[SKIP_NO_PERMISSION])},
                                 {{"no_flight_recorder"}, F(skips[SKIP_NO_JFR])},
                                 {{"opted_out"}, F(skips[SKIP_OPTED_OUT])},
                                 {{"error"}, F(skips[SKIP_OTHER])})},
    {"pfr_java_dumps_total", C, "recording files read", F(dumps)},
    {"pfr_java_dump_errors_total", C, "dumps that failed (no answer, refused or bad file)",
     F(dump_errors)},
    {"pfr_java_dump_bytes_total", C, "bytes of recording files read", F(dump_bytes)},
    {"pfr_java_dump_seconds_total", C, "time spent dumping, reading and removing recordings",
     F(dump_ns), .divisor = 1e9},
    {"pfr_java_conversion_errors_total", C, "recordings that could not be turned into profiles",
     F(conversion_errors)},
    {"pfr_java_profiles_total", C, "Java profiles made", F(profiles)},
    {"pfr_java_events_total", C, "Flight Recorder events read", F(events)},
    {"pfr_java_earlier_stacks_total", C,
     "samples whose stack only an earlier chunk of the dump held (a monitor wait across a "
     "chunk rotation)",
     F(carried_stacks)},
    {"pfr_java_chunks_not_kept_total", C,
     "recording chunks too large to keep for a later chunk's stacks (over 16 MiB parsed)",
     F(uncarried_chunks)},
    {"pfr_java_perfmaps_total", C, "perf maps asked of JVMs with -XX:+PreserveFramePointer",
     F(perfmaps)},
    {"pfr_java_attach_triggers_total", C, "attach listeners started (trigger file and SIGQUIT)",
     F(triggers)},
    {"pfr_java_credential_switches_total", C,
     "children that took a JVM's user to talk to it (docs/java.md, Security)",
     F(credential_switches)},
    {"pfr_java_stops_total", C, "pfr's recordings stopped", F(stops)},
    {"pfr_java_stop_errors_total", C, "pfr's recordings that could not be stopped", F(stop_errors)},
};
#undef F
#undef C
#undef G

static const pfr_metric_table java_table = PFR_METRIC_TABLE("Java profiles", java_metric_rows);
static const pfr_metric_table *const java_tables[] = {&java_table, NULL};

const pfr_source_desc pfr_java_source_desc = {
    .name = "java",
    .settings = java_groups,
    .conf_size = sizeof(pfr_java_config),
    .wanted = java_wanted,
    .start = java_start,
    .metrics = java_tables,
    .stats_size = sizeof(java_stats),
};
