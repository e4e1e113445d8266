/* The triggers' thread: events from the kernel and pressure readings become pin requests,
 * coalesced, handed over once their windows end. */
#include "pfr_triggers.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "naming.h"
#include "pfr_clock.h"
#include "trig_internal.h"

#define RESCAN_NS     (5 * 1000000000LL)  /* how often the cgroups holding processes are found */
#define MAX_CGROUPS   1024                /* watched at most (the first found) */
#define MAX_HEAP_PIDS 64                  /* a heap request's processes */
#define MAX_WAIT_NS   (10 * 1000000000LL) /* the longest sleep with nothing due */

static const char *const signal_names[] = {
    [4] = "SIGILL", [6] = "SIGABRT", [7] = "SIGBUS", [8] = "SIGFPE", [11] = "SIGSEGV"};

struct pfr_triggers {
    pfr_triggers_config cfg;
    pfr_triggers_hooks hooks;
    pfr_identity *identity;
    char proc_root[1024];
    pfr_trig_bpf *bpf;
    pfr_trig_cgroups cgroups;
    pfr_trig_sustain host_cpu, host_mem;
    pfr_trig_file host_cpu_file, host_mem_file; /* kept open (cgroups.fds counts them) */
    int wake_fd;
    pthread_t thread;
    bool started;

    pthread_mutex_t lock; /* what follows: shared with pfr_triggers_external's callers */
    bool stop;
    pfr_service_rules rules;
    pfr_trig_coalescer *co;
    pfr_triggers_stats st;
};

/* printf into a reason, cut at its end (a cgroup path may be long) */
static void __attribute__((format(printf, 3, 4))) say(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

static void wake(pfr_triggers *t)
{
    uint64_t one = 1;
    if (write(t->wake_fd, &one, sizeof(one)) < 0) {
        /* the counter is already non-zero: the thread wakes anyway */
    }
}

/* Offer r (a new event) to the coalescer and tell the daemon. */
static int offer(pfr_triggers *t, pfr_pin_request *r)
{
    if (r->events == 0)
        r->events = 1;
    pthread_mutex_lock(&t->lock);
    int rc = pfr_trig_coalescer_offer(t->co, r, pfr_clock_real_ns());
    t->st.fired[r->kind]++;
    if (rc == PFR_TRIG_EXTENDED)
        t->st.coalesced[r->kind]++;
    else if (rc == PFR_TRIG_SUPPRESSED)
        t->st.suppressed[r->kind]++;
    pthread_mutex_unlock(&t->lock);
    if (rc >= 0 && t->hooks.fired)
        t->hooks.fired(t->hooks.ctx, r, rc);
    return rc;
}

/* Name a process the way the profiles name it: its cgroup's identity, then the rules. The
 * cgroup is the one its /proc/PID/cgroup names by the node agent's rule while it can be read;
 * the one given (the v2 path the kernel or the cgroup walk gave) only after that. */
static void name_process(pfr_triggers *t, int32_t pid, const char *comm, const char *cgroup,
                         pfr_pin_request *r)
{
    char exe[4096] = "", cg[4096] = "", c[16] = "";
    bool kthread = false;
    int rc = -ESRCH;
    if (pid > 0)
        rc = pfr_process_read_facts(t->proc_root, (uint32_t)pid, exe, sizeof(exe), cg, sizeof(cg),
                                    comm ? NULL : c, comm ? 0 : sizeof(c), &kthread);
    pfr_process_facts f = {.comm = comm ? comm : c,
                           .exe = exe[0] ? exe : NULL,
                           .cgroup = rc == 0 || !cgroup ? cg : cgroup,
                           .kthread = kthread};
    pthread_mutex_lock(&t->lock);
    pfr_name_process(t->identity, &t->rules, &f, pid, r->service, sizeof(r->service),
                     r->container_id);
    pthread_mutex_unlock(&t->lock);
    r->pid = pid;
    snprintf(r->comm, sizeof(r->comm), "%s", f.comm);
}

static void window_now(const pfr_triggers *t, pfr_pin_request *r)
{
    int64_t now = pfr_clock_real_ns();
    r->from_ns = now - t->cfg.before_ns;
    r->to_ns = now + t->cfg.after_ns;
}

/* ---- OOM kills and deaths by fatal signals ---- */

static void on_death(void *ctx, const pfr_trig_death *d)
{
    pfr_triggers *t = ctx;
    pfr_pin_request *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    r->kind = d->kind;
    window_now(t, r);
    name_process(t, d->tgid, d->comm, d->cgroup, r);
    char where[PFR_CONTAINER_ID_MAX + 32] = "";
    if (r->container_id[0])
        say(where, sizeof(where), ", container %s", r->container_id);
    if (d->kind == PFR_PIN_OOM_KILL) {
        say(r->reason, sizeof(r->reason), "OOM kill: pid %d (%s), cgroup %.1024s%s", (int)d->tgid,
            d->comm, d->cgroup, where);
    } else {
        const char *sig = (size_t)d->signal < sizeof(signal_names) / sizeof(signal_names[0]) &&
                                  signal_names[d->signal]
                              ? signal_names[d->signal]
                              : "a fatal signal";
        say(r->reason, sizeof(r->reason), "pid %d (%s) died of %s%s, cgroup %.1024s%s",
            (int)d->tgid, d->comm, sig, d->core ? " (core dumped)" : "", d->cgroup, where);
    }
    offer(t, r);
    free(r);
}

/* ---- pressure ---- */

/* A level went past its threshold for its duration (FIRE: a new event) or stays past it (HOLD:
 * the pending request stretches, nothing new starts). */
static void pressure_event(pfr_triggers *t, enum pfr_trig_level lv, enum pfr_pin_kind kind,
                           const char *cgroup, double level, uint32_t threshold, int64_t for_ns)
{
    pfr_pin_request *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    r->kind = kind;
    window_now(t, r);
    if (cgroup) {
        int32_t pid = 0;
        pfr_trig_cgroup_pids(t->cgroups.root, cgroup, &pid, 1);
        name_process(t, pid, NULL, cgroup, r);
    }
    if (lv == PFR_TRIG_HOLD) {
        pthread_mutex_lock(&t->lock);
        pfr_trig_coalescer_extend(t->co, r);
        pthread_mutex_unlock(&t->lock);
        free(r);
        return;
    }
    say(r->reason, sizeof(r->reason), "%s %s pressure: some avg10 %.1f%% >= %u%% for %.0f s",
        cgroup ? "cgroup" : "host", kind == PFR_PIN_PRESSURE_CPU ? "CPU" : "memory", level,
        threshold, (double)for_ns / 1e9);
    if (cgroup) {
        size_t len = strlen(r->reason);
        say(r->reason + len, sizeof(r->reason) - len, ", cgroup %.1024s", cgroup);
    }
    offer(t, r);
    free(r);
}

/* One pressure file: read, tracked, and an event when it fires or holds. Returns the level's
 * state (QUIET when unreadable). */
static enum pfr_trig_level check_psi(pfr_triggers *t, const char *root, const char *path,
                                     const char *file, pfr_trig_file *f, pfr_trig_sustain *s,
                                     enum pfr_pin_kind kind, bool is_cgroup)
{
    char buf[512];
    pfr_psi psi;
    ssize_t n = pfr_trig_file_read(f, &t->cgroups.fds, root, path, file, buf, sizeof(buf));
    if (n <= 0 || pfr_trig_psi_parse(buf, (size_t)n, &psi) != 0)
        return PFR_TRIG_QUIET;
    bool cpu = kind == PFR_PIN_PRESSURE_CPU;
    uint32_t threshold = cpu ? t->cfg.cpu_percent : t->cfg.memory_percent;
    int64_t for_ns = cpu ? t->cfg.cpu_for_ns : t->cfg.memory_for_ns;
    enum pfr_trig_level lv = pfr_trig_sustain_update(s, psi.some_avg10, threshold, for_ns,
                                                     t->cfg.pressure_rearm_ns, pfr_clock_mono_ns());
    if (lv != PFR_TRIG_QUIET)
        pressure_event(t, lv, kind, is_cgroup ? path : NULL, psi.some_avg10, threshold, for_ns);
    return lv;
}

/* A cgroup under memory pressure: its Go heaps now, at most every heap_min_gap. */
static void want_heap(pfr_triggers *t, pfr_trig_cgroup *g)
{
    int64_t now = pfr_clock_mono_ns();
    if (!t->cfg.heap_on_memory_pressure || !t->hooks.heap_wanted ||
        (g->last_heap_ns && now - g->last_heap_ns < t->cfg.heap_min_gap_ns))
        return;
    int32_t pids[MAX_HEAP_PIDS];
    size_t n = pfr_trig_cgroup_pids(t->cgroups.root, g->path, pids, MAX_HEAP_PIDS);
    if (n == 0)
        return;
    g->last_heap_ns = now;
    pthread_mutex_lock(&t->lock);
    t->st.heap_requests++;
    pthread_mutex_unlock(&t->lock);
    t->hooks.heap_wanted(t->hooks.ctx, g->path, pids, n);
}

/* memory.events "high" rose since the last look (cgroup v2 with the memory controller). */
static bool high_rose(pfr_triggers *t, pfr_trig_cgroup *g)
{
    char buf[512];
    uint64_t high;
    ssize_t n = pfr_trig_file_read(&g->events_file, &t->cgroups.fds, t->cgroups.root, g->path,
                                   "memory.events", buf, sizeof(buf));
    if (n <= 0 || pfr_trig_memory_events_high(buf, (size_t)n, &high) != 0)
        return false;
    bool rose = g->high_known && high > g->high;
    g->high = high;
    g->high_known = true;
    return rose;
}

static void check_pressure(pfr_triggers *t)
{
    if (t->cfg.pressure) {
        char root[1100];
        snprintf(root, sizeof(root), "%s/pressure", t->proc_root);
        check_psi(t, root, "/", "cpu", &t->host_cpu_file, &t->host_cpu, PFR_PIN_PRESSURE_CPU,
                  false);
        check_psi(t, root, "/", "memory", &t->host_mem_file, &t->host_mem, PFR_PIN_PRESSURE_MEMORY,
                  false);
    }
    if (!t->cgroups.root[0] || (!t->cfg.pressure_cgroups && !t->cfg.heap_on_memory_pressure))
        return;
    for (size_t i = 0; i < t->cgroups.n; i++) {
        pfr_trig_cgroup *g = &t->cgroups.v[i];
        enum pfr_trig_level mem = PFR_TRIG_QUIET;
        if (t->cfg.pressure_cgroups) {
            check_psi(t, t->cgroups.root, g->path, "cpu.pressure", &g->cpu_file, &g->cpu,
                      PFR_PIN_PRESSURE_CPU, true);
            mem = check_psi(t, t->cgroups.root, g->path, "memory.pressure", &g->mem_file, &g->mem,
                            PFR_PIN_PRESSURE_MEMORY, true);
        }
        if (high_rose(t, g) || mem == PFR_TRIG_FIRE)
            want_heap(t, g);
    }
}

/* ---- the thread ---- */

static void deliver_due(pfr_triggers *t, int64_t now_ns)
{
    pfr_pin_request *r = malloc(sizeof(*r));
    if (!r)
        return;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        bool got = pfr_trig_coalescer_take_due(t->co, now_ns, r);
        if (got)
            t->st.requested[r->kind]++;
        pthread_mutex_unlock(&t->lock);
        if (!got)
            break;
        t->hooks.pin(t->hooks.ctx, r);
    }
    free(r);
}

static int poll_timeout_ms(pfr_triggers *t, int64_t next_psi_mono)
{
    pthread_mutex_lock(&t->lock);
    int64_t due = pfr_trig_coalescer_next_due(t->co);
    pthread_mutex_unlock(&t->lock);
    /* nothing else to wake for: the eventfd brings requests and the stop, the BPF ring buffer
     * deaths; the cap only bounds a request's delay after a step of the wall clock */
    int64_t wait = MAX_WAIT_NS;
    if (next_psi_mono != INT64_MAX && next_psi_mono - pfr_clock_mono_ns() < wait)
        wait = next_psi_mono - pfr_clock_mono_ns();
    if (due != INT64_MAX && due - pfr_clock_real_ns() < wait)
        wait = due - pfr_clock_real_ns();
    return wait <= 0 ? 0 : (int)(wait / 1000000) + 1;
}

static void *run(void *arg)
{
    pfr_triggers *t = arg;
    bool psi = t->cfg.pressure || t->cfg.pressure_cgroups || t->cfg.heap_on_memory_pressure;
    bool cgroups =
        t->cgroups.root[0] && (t->cfg.pressure_cgroups || t->cfg.heap_on_memory_pressure);
    int64_t next_psi = psi ? pfr_clock_mono_ns() : INT64_MAX, next_scan = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = t->wake_fd, .events = POLLIN},
                              {.fd = t->bpf ? pfr_trig_bpf_fd(t->bpf) : -1, .events = POLLIN}};
        int n = poll(p, 2, poll_timeout_ms(t, next_psi));
        if (n < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            if (read(t->wake_fd, &v, sizeof(v)) < 0) {
                /* nothing to read: a spurious wake-up */
            }
        }
        pthread_mutex_lock(&t->lock);
        bool stop = t->stop;
        pthread_mutex_unlock(&t->lock);
        if (stop)
            break;
        if (t->bpf)
            pfr_trig_bpf_consume(t->bpf);
        int64_t now = pfr_clock_mono_ns();
        if (now >= next_psi) {
            /* the scan with the first reading after RESCAN_NS: one wake-up for both */
            if (cgroups && now >= next_scan) {
                pfr_trig_cgroups_scan(&t->cgroups, MAX_CGROUPS);
                next_scan = now + RESCAN_NS;
            }
            check_pressure(t);
            next_psi = now + t->cfg.pressure_poll_ns;
        }
        deliver_due(t, pfr_clock_real_ns());
    }
    if (t->bpf) /* events already in the ring buffer still count */
        pfr_trig_bpf_consume(t->bpf);
    return NULL;
}

/* ---- the handle ---- */

void pfr_triggers_free(pfr_triggers *t)
{
    if (!t)
        return;
    if (t->started) {
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        pthread_mutex_unlock(&t->lock);
        wake(t);
        pthread_join(t->thread, NULL);
    }
    if (t->co)
        deliver_due(t, INT64_MAX); /* every pending request, its window cut short */
    pfr_trig_bpf_free(t->bpf);
    pfr_trig_file_close(&t->host_cpu_file, &t->cgroups.fds);
    pfr_trig_file_close(&t->host_mem_file, &t->cgroups.fds);
    pfr_trig_cgroups_free(&t->cgroups);
    pfr_trig_coalescer_free(t->co);
    pfr_service_rules_free(&t->rules);
    if (t->wake_fd >= 0)
        close(t->wake_fd);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int pfr_triggers_new(const pfr_triggers_env *env, const pfr_triggers_hooks *hooks,
                     pfr_triggers **out, bool *warned, char *err, size_t errlen)
{
    *warned = false;
    pfr_triggers *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->cfg = *env->cfg;
    t->cfg.cgroup_root = NULL; /* the caller's string: copied into cgroups.root below */
    t->hooks = *hooks;
    t->identity = env->identity;
    t->wake_fd = -1;
    pfr_trig_fds_init(&t->cgroups.fds);
    pthread_mutex_init(&t->lock, NULL);
    snprintf(t->proc_root, sizeof(t->proc_root), "%s", env->proc_root ? env->proc_root : "/proc");
    int rc = pfr_service_rules_copy(&t->rules, env->rules);
    if (rc == 0)
        rc = pfr_trig_coalescer_new(t->cfg.max_window_ns, t->cfg.max_pins_per_hour, &t->co);
    if (rc == 0 && (t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        rc = -errno;
    if (rc) {
        snprintf(err, errlen, "triggers: %s", strerror(-rc));
        pfr_triggers_free(t);
        return rc;
    }
    if (env->cfg->cgroup_root)
        snprintf(t->cgroups.root, sizeof(t->cgroups.root), "%s", env->cfg->cgroup_root);
    else if (pfr_trig_cgroup2_root("/proc/self/mountinfo", t->cgroups.root,
                                   sizeof(t->cgroups.root)) != 0)
        t->cgroups.root[0] = '\0'; /* no cgroup v2: the host's pressure only */
    if (t->cfg.oom || t->cfg.fatal_signal) {
        char why[512];
        if (pfr_trig_bpf_new(t->cfg.oom, t->cfg.fatal_signal, on_death, t, &t->bpf, why,
                             sizeof(why)) == 0) {
            t->st.bpf_loaded = true;
        } else {
            snprintf(err, errlen, "%s: OOM and fatal-signal triggers are off", why);
            *warned = true;
        }
    }
    /* set before the thread starts: its hooks may ask for the stats at once */
    *out = t;
    rc = pthread_create(&t->thread, NULL, run, t);
    if (rc) {
        *out = NULL;
        snprintf(err, errlen, "triggers: cannot start their thread: %s", strerror(rc));
        pfr_triggers_free(t);
        return -rc;
    }
    pthread_setname_np(t->thread, "pfr-triggers");
    t->started = true;
    return 0;
}

void pfr_triggers_stats_get(pfr_triggers *t, pfr_triggers_stats *st)
{
    pthread_mutex_lock(&t->lock);
    *st = t->st;
    pthread_mutex_unlock(&t->lock);
    st->bpf_lost = t->bpf ? pfr_trig_bpf_lost(t->bpf) : 0;
    st->cgroups_watched = __atomic_load_n(&t->cgroups.n, __ATOMIC_RELAXED);
}

int pfr_triggers_set_rules(pfr_triggers *t, const pfr_service_rules *rules)
{
    pfr_service_rules copy = {0};
    int rc = pfr_service_rules_copy(&copy, rules);
    if (rc)
        return rc;
    pthread_mutex_lock(&t->lock);
    pfr_service_rules_free(&t->rules);
    t->rules = copy;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

int pfr_triggers_external(pfr_triggers *t, const pfr_pin_request *req)
{
    pfr_pin_request *r = malloc(sizeof(*r));
    if (!r)
        return -ENOMEM;
    *r = *req;
    r->kind = PFR_PIN_EXTERNAL;
    int rc = offer(t, r);
    free(r);
    wake(t); /* a window already over is handed over at once */
    return rc;
}
