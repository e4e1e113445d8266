/* pfr-recorder: top level. Configuration, signals, the interval loop, writing to the ring. */
#include <bpf/libbpf.h>
#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "daemon_metrics.h"
#include "exe_scan.h"
#include "host.h"
#include "pfr_clock.h"
#include "pfr_identity.h"
#include "pfr_log.h"
#include "pfr_store.h"
#include "source.h"

#define MAX_SOURCES   8
#define TRIM_EVERY    6     /* intervals between looks at what malloc holds free */
#define RECORDER_NICE (-10) /* see main */

typedef struct writer {
    pfr_store *store;
    const pfr_host *host;
    uint64_t chunks, errors;
    uint64_t intervals;
    pfr_daemon_metrics *metrics;
    pfr_identity *identity;   /* NULL: none */
    uint64_t identity_errors; /* metadata failures already logged */
    const pfr_source *sources;
    size_t nsources;
    bool disk_full;          /* profiles lost to a full disk, logged; until a write succeeds */
    uint64_t disk_full_lost; /* profiles lost in this episode */
    int cap_reason;          /* the ring's cap in force, as last logged */
} writer;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    /* libbpf's warnings (verifier log included) are detail behind our own error message */
    if (level == LIBBPF_DEBUG || pfr_log_get_level() < PFR_LOG_DEBUG)
        return 0;
    char buf[1024];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    pfr_debug("libbpf: %s", buf);
    return 0;
}

/* The ring's file system is full and the store had nothing older to give up (-ENOSPC): said
 * once per episode, not at every interval; the episode ends when a write succeeds again. */
static void lost_to_full_disk(writer *w, size_t n)
{
    if (!w->disk_full) {
        pfr_err("the ring's file system is full and the ring has nothing older left to give up: "
                "profiles are lost until space is freed");
        pfr_daemon_metrics_error(w->metrics, "store", strerror(ENOSPC));
        w->disk_full = true;
    }
    w->disk_full_lost += n;
}

static void written_again(writer *w)
{
    if (!w->disk_full)
        return;
    pfr_info("the ring is written again: %llu profiles were lost to the full file system",
             (unsigned long long)w->disk_full_lost);
    w->disk_full = false;
    w->disk_full_lost = 0;
}

/* Add host labels and append to the ring: the interval's chunks in one transaction (one fsync);
 * if that fails, one by one, so one bad chunk does not lose the others. A full disk is not
 * retried here: the store already gave up all it could for them. */
static int write_chunks(const pfr_chunk_in *in, size_t n, void *ctx)
{
    writer *w = ctx;
    enum { MAX_LABELS = 16 };
    if (n == 0)
        return 0;
    pfr_chunk_in *c = calloc(n, sizeof(*c));
    pfr_kv *labels = calloc(n * MAX_LABELS, sizeof(*labels));
    if (!c || !labels) {
        free(c);
        free(labels);
        w->errors += n;
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        pfr_kv *l = labels + i * MAX_LABELS;
        size_t k = 0;
        for (size_t j = 0; j < in[i].nlabels && k < MAX_LABELS - 2; j++)
            l[k++] = in[i].labels[j];
        if (w->host->name[0])
            l[k++] = (pfr_kv){"host.name", w->host->name};
        if (w->host->id[0])
            l[k++] = (pfr_kv){"host.id", w->host->id};
        c[i] = in[i];
        c[i].labels = l;
        c[i].nlabels = k;
    }
    int written = 0;
    int rc = pfr_store_append_batch(w->store, c, n, NULL);
    if (rc == 0) {
        written = (int)n;
    } else if (rc == -ENOSPC) {
        lost_to_full_disk(w, n);
    } else {
        pfr_warn("writing %zu profiles to the ring at once failed (%s): writing them one by one", n,
                 strerror(-rc));
        for (size_t i = 0; i < n; i++) {
            int r = pfr_store_append(w->store, &c[i], NULL);
            if (r == 0) {
                written++;
            } else if (r == -ENOSPC) {
                lost_to_full_disk(w, 1);
            } else {
                pfr_warn("writing the profile of service %s to the ring failed: %s", c[i].service,
                         strerror(-r));
                pfr_daemon_metrics_error(w->metrics, "store", strerror(-r));
            }
        }
    }
    if (written > 0)
        written_again(w);
    w->chunks += (uint64_t)written;
    w->errors += n - (size_t)written;
    free(c);
    free(labels);
    return written > 0 || n == 0 ? written : rc;
}

/* Create the ring's directory (and its parents) if missing, as a daemon's state directory. */
static int ensure_parent_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* The next interval boundary after now, on the wall clock (so hosts line up). */
static int64_t next_boundary(int64_t now, int64_t interval)
{
    return (now / interval + 1) * interval;
}

static int arm_timer(int tfd, int64_t at_ns)
{
    struct itimerspec its = {
        .it_value = {.tv_sec = at_ns / 1000000000, .tv_nsec = at_ns % 1000000000},
    };
    return timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The resolver of Coroot identities, with the metadata sources the configuration gives. */
static int identity_new(const pfr_config *cfg, pfr_identity **out, char *err, size_t errlen)
{
    const char *sock = cfg->docker_socket;
    pfr_identity_opts o = {
        .docker_socket = sock && strcmp(sock, "off") == 0 ? "" : sock,
        .docker_root = cfg->docker_root,
        .kubelet_url = cfg->k8s_kubelet_url,
        .apiserver_url = cfg->k8s_apiserver_url,
        .node_name = cfg->k8s_node_name,
        .token_file = cfg->k8s_token_file,
        .ca_file = cfg->k8s_ca_file,
        .insecure = cfg->k8s_insecure,
    };
    return pfr_identity_new(&o, out, err, errlen);
}

/* A metadata failure is a warning when it leaves containers unnamed (a socket refused while
 * Docker's data folder named them is not), logged when the count grows: the resolver retries
 * with backoff, so this is a line per retry of a cgroup at most. */
static void log_identity(const pfr_identity_stats *st, uint64_t *logged)
{
    uint64_t failures = st->docker_failures + st->docker_disk_failures + st->k8s_failures;
    if (failures > *logged && st->last_error[0] && st->pending + st->failed > 0)
        pfr_warn("identities: %s (%zu containers named by their runtime ids until it is had)",
                 st->last_error, st->pending + st->failed);
    *logged = failures;
    pfr_debug("identities: lookups=%llu hits=%llu cgroups{resolved=%zu none=%zu pending=%zu "
              "failed=%zu} docker{fetches=%llu failures=%llu disk_reads=%llu} "
              "k8s{fetches=%llu failures=%llu containers=%llu} oci_reads=%llu",
              (unsigned long long)st->lookups, (unsigned long long)st->cache_hits, st->resolved,
              st->none, st->pending, st->failed, (unsigned long long)st->docker_fetches,
              (unsigned long long)st->docker_failures, (unsigned long long)st->docker_disk_reads,
              (unsigned long long)st->k8s_fetches, (unsigned long long)st->k8s_failures,
              (unsigned long long)st->k8s_containers, (unsigned long long)st->oci_reads);
}

/* When the disk's free space starts or stops lowering the ring's cap (the ring gives its oldest
 * profiles up for it meanwhile). */
static void log_ring_cap(writer *w, const pfr_store_stats *st)
{
    if (st->cap_reason == w->cap_reason)
        return;
    w->cap_reason = st->cap_reason;
    if (st->cap_reason == PFR_STORE_CAP_DISK_RESERVE)
        pfr_warn("ring: free space on its file system is %.1f MiB, short of the %.1f MiB reserve: "
                 "cap %.1f MiB, effective %.1f MiB (%s); the oldest profiles are given up",
                 (double)st->fs_free_bytes / 1048576.0, (double)st->reserve_bytes / 1048576.0,
                 (double)st->max_bytes / 1048576.0, (double)st->effective_max_bytes / 1048576.0,
                 pfr_store_cap_reason_name(st->cap_reason));
    else
        pfr_info("ring: its file system has room again, cap %.1f MiB",
                 (double)st->max_bytes / 1048576.0);
}

static void update_metrics(writer *w)
{
    for (size_t i = 0; i < w->nsources; i++)
        if (w->sources[i].ops->export_metrics)
            w->sources[i].ops->export_metrics(w->sources[i].self, w->metrics);
    if (w->identity) {
        pfr_identity_stats is;
        pfr_identity_get_stats(w->identity, &is);
        pfr_daemon_metrics_identity(w->metrics, &is);
        log_identity(&is, &w->identity_errors);
    }
    pfr_store_stats ss;
    /* not the full statistics: they read every chunk's row, 37 ms a time on a 200 MB ring */
    if (pfr_store_stats_quick(w->store, &ss) == 0) {
        pfr_daemon_metrics_store(w->metrics, &ss, (unsigned long long)w->errors);
        log_ring_cap(w, &ss);
    }
}

static void collect_all(pfr_source *src, size_t nsrc, int64_t start, int64_t end, writer *w)
{
    uint64_t before = w->chunks;
    for (size_t i = 0; i < nsrc; i++) {
        int rc = src[i].ops->collect(src[i].self, start, end, write_chunks, w);
        if (rc) {
            pfr_warn("source %s: interval lost: %s", src[i].ops->name, strerror(-rc));
            pfr_daemon_metrics_error(w->metrics, src[i].ops->name, strerror(-rc));
        }
        if (src[i].ops->log_stats)
            src[i].ops->log_stats(src[i].self);
    }
    update_metrics(w);
    /* give back what the last intervals' work freed, when it is worth it: trimming costs a TLB
     * shootdown on every CPU, and mallinfo2 a walk of the free lists, so look every few */
    if (++w->intervals % TRIM_EVERY == 0) {
        struct mallinfo2 mi = mallinfo2();
        if (mi.fordblks > 8u << 20)
            malloc_trim(0);
    }
    pfr_debug("interval %.3f s: %llu profiles written (%llu total, %llu write errors)",
              (double)(end - start) / 1e9, (unsigned long long)(w->chunks - before),
              (unsigned long long)w->chunks, (unsigned long long)w->errors);
}

static void reload(int argc, char **argv, pfr_config *cur, pfr_source *src, size_t nsrc)
{
    pfr_config fresh;
    char err[512];
    int rc = pfr_config_reload(&fresh, argc, argv, err, sizeof(err));
    if (rc) {
        pfr_err("SIGHUP: configuration not reloaded: %s", err);
        pfr_config_free(&fresh);
        return;
    }
    pfr_log_set_level((enum pfr_log_level)fresh.log_level);
    for (size_t i = 0; i < nsrc; i++)
        if (src[i].ops->reload && src[i].ops->reload(src[i].self, &fresh))
            pfr_warn("SIGHUP: source %s did not take the new configuration", src[i].ops->name);
    if (strcmp(fresh.store_path, cur->store_path) || fresh.interval_ns != cur->interval_ns ||
        fresh.max_store_bytes != cur->max_store_bytes ||
        fresh.disk_reserve.mode != cur->disk_reserve.mode ||
        fresh.disk_reserve.bytes != cur->disk_reserve.bytes ||
        fresh.disk_reserve.percent != cur->disk_reserve.percent)
        pfr_warn("SIGHUP: store, interval, max_store_bytes and disk_reserve take effect on "
                 "restart");
    pfr_service_rules_free(&cur->rules);
    pfr_service_rules_copy(&cur->rules, &fresh.rules);
    cur->log_level = fresh.log_level;
    pfr_info("configuration reloaded (log level, %zu service rules)", fresh.rules.n);
    pfr_config_free(&fresh);
}

/* The sources of the table that the configuration asks for. One that cannot start is logged
 * and left out, unless the daemon cannot run without it. */
static int start_sources(pfr_source_env *env, pfr_source *sources, size_t *nsrc, char *err,
                         size_t errlen)
{
    size_t n;
    const pfr_source_desc *const *table = pfr_recorder_sources(&n);
    for (size_t i = 0; i < n && *nsrc < MAX_SOURCES; i++) {
        const pfr_source_desc *d = table[i];
        if (d->wanted && !d->wanted(env->cfg))
            continue;
        char why[512] = "";
        int rc = d->start(env, &sources[*nsrc], why, sizeof(why));
        if (rc == 0) {
            (*nsrc)++;
            continue;
        }
        if (d->required) {
            snprintf(err, errlen, "%s", why);
            return rc;
        }
        pfr_err("%s", why);
        pfr_daemon_metrics_error(env->metrics, d->name, why);
    }
    return 0;
}

static void stop_sources(pfr_source *sources, size_t nsrc)
{
    for (size_t i = nsrc; i-- > 0;)
        sources[i].ops->destroy(sources[i].self);
}

int main(int argc, char **argv)
{
    pfr_config cfg;
    char err[1024] = "";
    int rc = pfr_config_load(&cfg, argc, argv, stdout, err, sizeof(err));
    if (rc == PFR_CONFIG_EXIT) {
        pfr_config_free(&cfg);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "pfr-recorder: %s\n", err);
        pfr_config_free(&cfg);
        return 2;
    }
    pfr_log_set_level((enum pfr_log_level)cfg.log_level);
    libbpf_set_print(libbpf_print);
    /* libcurl's global state (the scraper) must be set up before any thread starts */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* Memory stays bounded only if freed symbol tables go back to the system: one arena (the
     * notification thread allocates too), and large blocks (parsed symbol tables) always mmap'ed
     * rather than carved from the heap, where they would leave holes. */
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024); /* no brk() shrink after every interval */

    /* Before any thread starts, so all inherit it. A new process must be snapshotted before it
     * exits: at the default priority, on a busy host, the notification thread (or the builder
     * holding the lock it waits for) waited up to 2.7 s for a CPU and 25 % of the sampled
     * short-lived processes were gone by then; at -10 the longest wait was 0.25 s and 15 % were
     * gone. The recorder's work is the same, only done sooner. Without the right (root or
     * CAP_SYS_NICE) it stays as it is: under the systemd unit, its Nice= has set it already. */
    if (setpriority(PRIO_PROCESS, 0, RECORDER_NICE) != 0) {
        int e = errno;
        pfr_debug("staying at nice %d: %s", getpriority(PRIO_PROCESS, 0), strerror(e));
    }

    /* Signals arrive through a signalfd; block them before any thread starts. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    int tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC);
    if (sfd < 0 || tfd < 0) {
        pfr_err("cannot create signal/timer descriptors: %s", strerror(errno));
        return 1;
    }

    pfr_host host;
    pfr_host_identify(&host, NULL);

    pfr_daemon_metrics *metrics = NULL;
    rc = pfr_daemon_metrics_new(cfg.metrics_listen, &metrics, err, sizeof(err));
    if (rc && cfg.metrics_listen[0]) {
        /* profiles matter more than their metrics: carry on without the endpoint */
        pfr_warn("metrics: cannot serve on %s: %s; running without the endpoint",
                 cfg.metrics_listen, err);
        rc = pfr_daemon_metrics_new("", &metrics, err, sizeof(err));
    }
    if (rc) {
        pfr_err("metrics: %s", strerror(-rc));
        pfr_config_free(&cfg);
        return 1;
    }
    if (pfr_daemon_metrics_port(metrics))
        pfr_info("metrics: http://%s/metrics (port %u)", cfg.metrics_listen,
                 pfr_daemon_metrics_port(metrics));

    /* Without it (bad options, no memory) processes are named from their cgroup paths alone. */
    pfr_identity *identity = NULL;
    if (identity_new(&cfg, &identity, err, sizeof(err))) {
        pfr_err("identities: %s; containers are named by their runtime ids", err);
        pfr_daemon_metrics_error(metrics, "identity", err);
    }

    /* one /proc scan for the sources that look for programs; without it (out of memory) each
     * scans on its own */
    pfr_exe_scan *exes = NULL;
    if (pfr_exe_scan_new("/proc", &exes))
        exes = NULL;
    pfr_source sources[MAX_SOURCES];
    size_t nsrc = 0;
    pfr_source_env env = {.cfg = &cfg, .exes = exes, .metrics = metrics, .identity = identity};
    rc = start_sources(&env, sources, &nsrc, err, sizeof(err));
    if (rc) {
        pfr_err("%s", err);
        stop_sources(sources, nsrc);
        pfr_exe_scan_free(exes);
        pfr_identity_free(identity);
        pfr_daemon_metrics_free(metrics);
        pfr_config_free(&cfg);
        return 1;
    }

    pfr_store *store = NULL;
    pfr_store_opts so = {.max_bytes = cfg.max_store_bytes,
                         .reserve = {.mode = (enum pfr_store_reserve_mode)cfg.disk_reserve.mode,
                                     .bytes = cfg.disk_reserve.bytes,
                                     .percent = cfg.disk_reserve.percent}};
    rc = ensure_parent_dir(cfg.store_path);
    if (rc == 0)
        rc = pfr_store_open(cfg.store_path, &so, &store, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "cannot create its directory: %s", strerror(-rc));
    if (rc) {
        pfr_err("cannot open the ring %s: %s", cfg.store_path, err);
        stop_sources(sources, nsrc);
        pfr_exe_scan_free(exes);
        pfr_identity_free(identity);
        pfr_daemon_metrics_free(metrics);
        pfr_config_free(&cfg);
        return 1;
    }
    writer w = {.store = store,
                .host = &host,
                .metrics = metrics,
                .identity = identity,
                .sources = sources,
                .nsources = nsrc};

    /* "sampling": the line that says the recorder is up (tests and scripts wait for it) */
    pfr_info("pfr-recorder %s: sampling with %zu sources, %.3g s intervals, ring %s, host %s",
             PFR_VERSION, nsrc, (double)cfg.interval_ns / 1e9, cfg.store_path, host.name);

    int64_t start = pfr_clock_real_ns();
    int64_t next = next_boundary(start, cfg.interval_ns);
    arm_timer(tfd, next);
    int exit_code = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN}, {.fd = tfd, .events = POLLIN}};
        int n = poll(pfd, 2, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            pfr_err("poll: %s", strerror(errno));
            exit_code = 1;
            break;
        }
        if (pfd[1].revents & POLLIN) {
            uint64_t ticks;
            if (read(tfd, &ticks, sizeof(ticks)) < 0 && errno != ECANCELED)
                pfr_warn("timer: %s", strerror(errno));
            int64_t now = pfr_clock_real_ns();
            collect_all(sources, nsrc, start, now, &w);
            start = now;
            next = next_boundary(pfr_clock_real_ns(), cfg.interval_ns);
            arm_timer(tfd, next);
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) != sizeof(si))
                continue;
            if (si.ssi_signo == SIGHUP) {
                reload(argc, argv, &cfg, sources, nsrc);
                continue;
            }
            pfr_info("%s: writing the current interval and exiting",
                     si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
            int64_t now = pfr_clock_real_ns();
            if (now > start)
                collect_all(sources, nsrc, start, now, &w);
            break;
        }
    }
    stop_sources(sources, nsrc);
    pfr_exe_scan_free(exes);
    pfr_identity_free(identity); /* after the sources: they look identities up */
    pfr_daemon_metrics_free(metrics);
    pfr_store_close(store);
    close(sfd);
    close(tfd);
    pfr_config_free(&cfg);
    curl_global_cleanup();
    return exit_code;
}
