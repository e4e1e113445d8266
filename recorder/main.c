/* pfr-recorder: top level. Configuration, signals, the interval loop, writing to the ring. */
#include <bpf/libbpf.h>
#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "config.h"
#include "daemon_metrics.h"
#include "daemon_services.h"
#include "daemon_triggers.h"
#include "heap_pages.h"
#include "host.h"
#include "pfr_clock.h"
#include "pfr_fsguard.h"
#include "pfr_identity.h"
#include "pfr_membudget.h"
#include "pfr_log.h"
#include "pfr_store.h"
#include "source.h"

#define MAX_SOURCES   8
#define TRIM_EVERY    6     /* intervals between looks at what malloc holds free */
#define RECORDER_NICE (-10) /* see main */
/* SIGTERM: how long the last collections may take, then how long the sources' threads may take
 * to stop, before the recorder exits without them (one stuck on a hung mount never returns) */
#define STOP_COLLECT_NS  (4 * 1000000000LL)
#define STOP_THREADS_SEC 3
#define RELOAD_WAIT_NS   (2 * 1000000000LL)
#define MEMORY_CHECK_NS  1000000000LL /* how often the resident set is measured near the budget */

typedef struct writer {
    pfr_store *store;
    const pfr_host *host;
    uint64_t chunks, errors;
    uint64_t intervals;
    pfr_daemon_metrics *metrics;
    pfr_identity *identity;              /* NULL: none */
    pfr_fsguard *fsguard;                /* files of remote file systems */
    pfr_membudget *membudget;            /* the resident set's budget */
    const pfr_daemon_services *services; /* the symbolizer's figures */
    int mem_level;                       /* the budget's level, as last logged */
    bool huge_pages;          /* the heap on huge pages (heap_pages.h): given up near the budget */
    uint64_t mem_checks;      /* measures near or over the budget (every few trims memory) */
    uint64_t identity_errors; /* metadata failures already logged */
    pfr_collector **collectors; /* one per source */
    size_t ncollectors;
    bool interval_open;      /* an interval was posted and not all collections ended */
    uint32_t late;           /* collectors found busy at an interval's end (logged) */
    bool disk_full;          /* profiles lost to a full disk, logged; until a write succeeds */
    uint64_t disk_full_lost; /* profiles lost in this episode */
    int cap_reason;          /* the ring's cap in force, as last logged */
    uint64_t pins_released;  /* the ring's count, as last logged (UINT64_MAX: not read yet) */
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
/* pin_max_bytes in bytes: a share of the cap, or a size (never more than the cap). */
static uint64_t pin_budget_bytes(const pfr_config *cfg)
{
    uint64_t cap = cfg->max_store_bytes ? cfg->max_store_bytes : PFR_STORE_DEFAULT_MAX_BYTES;
    uint64_t b = cfg->pin_max.percent > 0 ? (uint64_t)((double)cap * cfg->pin_max.percent / 100.0)
                                          : cfg->pin_max.bytes;
    return b > cap ? cap : b ? b : 1;
}

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
    double mib = 1048576.0;
    if (st->cap_reason == PFR_STORE_CAP_DISK_RESERVE && st->fs_free_bytes < st->reserve_bytes)
        pfr_warn("ring: free space on its file system is %.1f MiB, short of the %.1f MiB reserve: "
                 "cap %.1f MiB, effective %.1f MiB (%s); the ring grows no further and gives "
                 "its oldest profiles up for the new ones",
                 (double)st->fs_free_bytes / mib, (double)st->reserve_bytes / mib,
                 (double)st->max_bytes / mib, (double)st->effective_max_bytes / mib,
                 pfr_store_cap_reason_name(st->cap_reason));
    else if (st->cap_reason == PFR_STORE_CAP_DISK_RESERVE)
        /* Free space above the reserve, but not enough for the whole cap beside it. */
        pfr_warn("ring: its file system has room for %.1f MiB of the %.1f MiB cap (free space "
                 "%.1f MiB, of which %.1f MiB is kept as the reserve): cap %.1f MiB, effective "
                 "%.1f MiB (%s); past that the oldest profiles are given up for the new ones",
                 (double)st->effective_max_bytes / mib, (double)st->max_bytes / mib,
                 (double)st->fs_free_bytes / mib, (double)st->reserve_bytes / mib,
                 (double)st->max_bytes / mib, (double)st->effective_max_bytes / mib,
                 pfr_store_cap_reason_name(st->cap_reason));
    else
        pfr_info("ring: its file system has room again, cap %.1f MiB",
                 (double)st->max_bytes / 1048576.0);
}

/* Pins released by the ring (for the pin budget, or as the last thing left to give up). */
static void log_pins_released(writer *w, const pfr_store_stats *st)
{
    if (w->pins_released != UINT64_MAX && st->pins_released > w->pins_released)
        pfr_warn("ring: %llu pin(s) released (pins keep at most %.1f MiB, pin_max_bytes; "
                 "automatic pins go first, manual ones only when nothing else is left); "
                 "pfr pins lists those kept",
                 (unsigned long long)(st->pins_released - w->pins_released),
                 (double)st->pin_max_bytes / 1048576.0);
    w->pins_released = st->pins_released;
}

/* The collectors' own figures (how long each source's collection took, how many intervals a
 * collection still running made it fold into the next), what the guard did with remote files,
 * the memory budget, the symbol cache. */
static void own_metrics(writer *w)
{
    for (size_t i = 0; i < w->ncollectors; i++) {
        pfr_collector_stats cs;
        pfr_collector_stats_get(w->collectors[i], &cs);
        pfr_daemon_metrics_publish(w->metrics, &pfr_daemon_collector_metrics, &cs,
                                   pfr_collector_name(w->collectors[i]));
    }
    pfr_fsguard_stats fs;
    pfr_fsguard_stats_get(w->fsguard, &fs);
    pfr_daemon_metrics_publish(w->metrics, &pfr_daemon_fsguard_metrics, &fs, NULL);
    pfr_membudget_stats ms;
    pfr_membudget_stats_get(w->membudget, &ms);
    pfr_daemon_metrics_publish(w->metrics, &pfr_daemon_membudget_metrics, &ms, NULL);
    pfr_daemon_services_publish(w->services, w->metrics);
}

/* Measure the resident set against the budget; near or over it, give freed memory back. */
static void check_memory(writer *w)
{
    int level = pfr_membudget_update(w->membudget);
    if (level < 0)
        return;
    if (level != w->mem_level) {
        pfr_membudget_stats st;
        pfr_membudget_stats_get(w->membudget, &st);
        if (level == PFR_MEM_OVER)
            pfr_warn("memory: %.1f MiB resident, over the %.1f MiB budget: no new symbol or "
                     "unwind tables until it falls",
                     (double)st.rss_bytes / 1048576.0, (double)st.budget_bytes / 1048576.0);
        else
            pfr_info("memory: %.1f MiB resident of the %.1f MiB budget (%s)",
                     (double)st.rss_bytes / 1048576.0, (double)st.budget_bytes / 1048576.0,
                     level == PFR_MEM_TIGHT ? "near it: only small new costs" : "within it");
        w->mem_level = level;
    }
    /* near or over the budget, the ring's writer gives back the tables of streams not expected
     * to append again (down to a half of them near it, a quarter over it) and its page cache,
     * and what was freed goes back; not every second (a trim costs a TLB shootdown on every
     * CPU). The tables of streams appending every interval stay: given back, each was read
     * back from the ring within the interval (a third of this thread's CPU over the budget). */
    if (level != PFR_MEM_OK && ++w->mem_checks % TRIM_EVERY == 1) {
        pfr_store_mem_stats sm;
        pfr_store_mem_stats_get(w->store, &sm);
        pfr_store_trim_idle(w->store, sm.table_bytes / (level == PFR_MEM_OVER ? 4 : 2));
        /* a huge page with one live byte is 2 MiB resident: the heap on small pages first */
        if (w->huge_pages)
            pfr_heap_pages_small();
        malloc_trim(0);
    }
}

/* The main thread's own metrics (the sources mirror theirs from their collectors' threads). */
static void update_metrics(writer *w)
{
    own_metrics(w);
    if (w->identity) {
        pfr_identity_stats is;
        pfr_identity_get_stats(w->identity, &is);
        pfr_daemon_metrics_publish(w->metrics, &pfr_daemon_identity_metrics, &is, NULL);
        log_identity(&is, &w->identity_errors);
    }
    pfr_store_stats ss;
    /* not the full statistics: they read every chunk's row, 37 ms a time on a 200 MB ring */
    if (pfr_store_stats_quick(w->store, &ss) == 0) {
        pfr_store_mem_stats sm;
        pfr_store_mem_stats_get(w->store, &sm);
        pfr_daemon_metrics_store(w->metrics, &ss, &sm, (unsigned long long)w->errors);
        log_ring_cap(w, &ss);
        log_pins_released(w, &ss);
    }
}

/* An interval's end: each source collects on its own thread; one still busy with an earlier
 * interval (said once until it ends) folds this one into its next collection. */
static void post_interval(writer *w, int64_t end)
{
    if (w->interval_open)
        update_metrics(w); /* a collection is late: the metrics still move */
    for (size_t i = 0; i < w->ncollectors; i++) {
        uint32_t bit = 1u << i;
        if (pfr_collector_post(w->collectors[i], end, false) == 0) {
            w->late &= ~bit;
            continue;
        }
        if (!(w->late & bit))
            pfr_warn("source %s: still collecting an earlier interval; this one is folded into "
                     "its next collection",
                     pfr_collector_name(w->collectors[i]));
        w->late |= bit;
    }
    w->interval_open = true;
}

/* Write what the collectors hand over. When the interval's collections have all ended: the
 * metrics, and memory given back. Returns whether every collector is idle. */
static bool serve_collectors(writer *w)
{
    bool idle = true;
    for (size_t i = 0; i < w->ncollectors; i++)
        idle &= pfr_collector_serve(w->collectors[i], write_chunks, w);
    if (!idle || !w->interval_open)
        return idle;
    w->interval_open = false;
    update_metrics(w);
    /* give back what the last intervals' work freed, when it is worth it: trimming costs a TLB
     * shootdown on every CPU, and mallinfo2 a walk of the free lists, so look every few */
    if (++w->intervals % TRIM_EVERY == 0) {
        struct mallinfo2 mi = mallinfo2();
        if (mi.fordblks > 8u << 20)
            malloc_trim(0);
    }
    pfr_debug("interval ended: %llu profiles written in all, %llu write errors",
              (unsigned long long)w->chunks, (unsigned long long)w->errors);
    return true;
}

static void drain_wake(int efd)
{
    uint64_t v;
    if (read(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        pfr_warn("collectors' eventfd: %s", strerror(errno));
}

/* Serve the collectors until all are idle or timeout_ns passed. Returns whether all are idle. */
static bool wait_collectors(writer *w, int efd, int64_t timeout_ns)
{
    int64_t deadline = pfr_clock_mono_ns() + timeout_ns;
    for (;;) {
        if (serve_collectors(w))
            return true;
        int64_t left = deadline - pfr_clock_mono_ns();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = efd, .events = POLLIN};
        int ms = (int)(left / 1000000) + 1;
        if (poll(&p, 1, ms) > 0)
            drain_wake(efd);
    }
}

/* SIGTERM: the last interval of every source, within STOP_COLLECT_NS in all. A source still
 * busy with the one before gets its last collection once that ends, if time is left. */
static void finish_intervals(writer *w, int efd)
{
    int64_t deadline = pfr_clock_mono_ns() + STOP_COLLECT_NS;
    int64_t end = pfr_clock_real_ns();
    for (;;) {
        bool waiting = false; /* a source whose last collection could not be posted yet */
        for (size_t i = 0; i < w->ncollectors; i++) {
            pfr_collector *c = w->collectors[i];
            if (pfr_collector_next_start(c) >= end)
                continue;
            if (pfr_collector_busy(c))
                waiting = true;
            else if (pfr_collector_post(c, end, true) == 0)
                w->interval_open = true;
        }
        int64_t left = deadline - pfr_clock_mono_ns();
        bool idle = wait_collectors(w, efd, left > 0 ? left : 0);
        if (idle && !waiting)
            return;
        if (pfr_clock_mono_ns() >= deadline)
            break;
    }
    for (size_t i = 0; i < w->ncollectors; i++)
        if (pfr_collector_busy(w->collectors[i]))
            pfr_err("source %s: its collection did not end within %lld s of the signal; its "
                    "last interval is lost",
                    pfr_collector_name(w->collectors[i]),
                    (long long)(STOP_COLLECT_NS / 1000000000LL));
}

/* Returns 0 when every collector's thread ended, else -ETIMEDOUT (some are left running). */
static int stop_collectors(writer *w)
{
    int rc = 0;
    for (size_t i = 0; i < w->ncollectors; i++) {
        if (pfr_collector_stop(w->collectors[i], 500 * 1000000LL) != 0)
            rc = -ETIMEDOUT;
        w->collectors[i] = NULL;
    }
    w->ncollectors = 0;
    return rc;
}

/* The sources' own threads (the unwinder's, the notification thread) are joined when they are
 * destroyed; one stuck in the kernel would hold SIGTERM up forever. The ring is closed by then,
 * so past STOP_THREADS_SEC, plus what the sources said their wind-down may take (a JVM's
 * JFR.stop), the process exits without them. */
typedef struct stop_watch {
    int exit_code;
    unsigned secs;
} stop_watch;

static void *stop_watchdog(void *arg)
{
    stop_watch sw = *(stop_watch *)arg;
    free(arg);
    sleep(sw.secs);
    pfr_err("the sources' threads did not stop within %u s: exiting without them", sw.secs);
    _exit(sw.exit_code);
    return NULL;
}

static void start_stop_watchdog(int exit_code, int64_t wind_down_ns)
{
    stop_watch *sw = malloc(sizeof(*sw));
    if (!sw)
        return;
    *sw = (stop_watch){exit_code,
                       STOP_THREADS_SEC + (unsigned)((wind_down_ns + 999999999) / 1000000000)};
    pthread_t t;
    if (pthread_create(&t, NULL, stop_watchdog, sw) == 0)
        pthread_detach(t);
    else
        free(sw);
}

/* SIGHUP. A source's settings change only while it is not collecting: the collectors are given
 * a moment to end; one still busy after it keeps its settings (said in the log). */
static void reload(int argc, char **argv, pfr_config *cur, pfr_source *src, size_t nsrc, writer *w,
                   int efd, pfr_daemon_triggers *trig)
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
    wait_collectors(w, efd, RELOAD_WAIT_NS);
    for (size_t i = 0; i < nsrc; i++) {
        if (!src[i].ops->reload)
            continue;
        if (pfr_collector_busy(w->collectors[i]))
            pfr_warn("SIGHUP: source %s is still collecting: it keeps its settings",
                     src[i].ops->name);
        else if (src[i].ops->reload(src[i].self, &fresh))
            pfr_warn("SIGHUP: source %s did not take the new configuration", src[i].ops->name);
    }
    if (strcmp(fresh.store_path, cur->store_path) || fresh.interval_ns != cur->interval_ns ||
        fresh.max_store_bytes != cur->max_store_bytes ||
        fresh.disk_reserve.mode != cur->disk_reserve.mode ||
        fresh.disk_reserve.bytes != cur->disk_reserve.bytes ||
        fresh.disk_reserve.percent != cur->disk_reserve.percent)
        pfr_warn("SIGHUP: store, interval, max_store_bytes and disk_reserve take effect on "
                 "restart");
    pfr_daemon_triggers_reload(trig, &fresh);
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
            sources[*nsrc].desc = d; /* its metric tables */
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
    int exit_code = 0;
    int64_t wind_down_ns = 0; /* what the sources said their stop may take (SIGTERM) */
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
    /* First of all (no thread, no descriptor yet): the heap on huge pages means running again */
    if (cfg.huge_pages && pfr_heap_pages_exec(argv, err, sizeof(err)))
        pfr_warn("memory: the heap stays on small pages: %s", err);
    bool huge_pages = pfr_heap_pages_huge();
    if (huge_pages)
        pfr_info("memory: the heap on transparent huge pages (glibc.malloc.hugetlb=1)");
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

    /* What every source shares (daemon_services.h), before the first source starts. */
    pfr_daemon_services svc;
    rc = pfr_daemon_services_start(&cfg, metrics, &svc, err, sizeof(err));
    if (rc) {
        pfr_err("%s", err);
        pfr_daemon_metrics_free(metrics);
        pfr_config_free(&cfg);
        return 1;
    }
    pfr_source sources[MAX_SOURCES];
    size_t nsrc = 0;
    pfr_source_env env = {.cfg = &cfg, .metrics = metrics, .node_name = host.name};
    pfr_daemon_services_lend(&svc, &env);
    rc = start_sources(&env, sources, &nsrc, err, sizeof(err));
    if (rc) {
        pfr_err("%s", err);
        stop_sources(sources, nsrc);
        pfr_daemon_services_stop(&svc);
        pfr_daemon_metrics_free(metrics);
        pfr_config_free(&cfg);
        return 1;
    }

    pfr_store *store = NULL;
    pfr_store_opts so = {.max_bytes = cfg.max_store_bytes,
                         .reserve = {.mode = (enum pfr_store_reserve_mode)cfg.disk_reserve.mode,
                                     .bytes = cfg.disk_reserve.bytes,
                                     .percent = cfg.disk_reserve.percent},
                         .pin_max_bytes = pin_budget_bytes(&cfg),
                         .fold_stacks = cfg.retention_fold_stacks ? cfg.retention_fold_stacks
                                                                  : PFR_STORE_FOLD_OFF};
    rc = pfr_store_tiers_parse(cfg.retention_tiers, &so.tiers, err, sizeof(err));
    if (rc == 0)
        rc = ensure_parent_dir(cfg.store_path);
    if (rc == 0)
        rc = pfr_store_open(cfg.store_path, &so, &store, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "cannot create its directory: %s", strerror(-rc));
    if (rc) {
        pfr_err("cannot open the ring %s: %s", cfg.store_path, err);
        stop_sources(sources, nsrc);
        pfr_daemon_services_stop(&svc);
        pfr_daemon_metrics_free(metrics);
        pfr_config_free(&cfg);
        return 1;
    }
    writer w = {.store = store,
                .host = &host,
                .metrics = metrics,
                .identity = svc.identity,
                .fsguard = svc.fsguard,
                .membudget = svc.membudget,
                .services = &svc,
                .pins_released = UINT64_MAX,
                .huge_pages = huge_pages};
    pfr_collector *collectors[MAX_SOURCES] = {0};
    pfr_daemon_triggers *trig = NULL;
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int64_t start = pfr_clock_real_ns();
    rc = efd < 0 ? -errno : 0;
    for (size_t i = 0; i < nsrc && rc == 0; i++) {
        rc = pfr_collector_start(&sources[i], start, efd, metrics, &collectors[i]);
        w.ncollectors += rc == 0;
    }
    w.collectors = collectors;
    if (rc) {
        pfr_err("cannot start the sources' collectors: %s", strerror(-rc));
        exit_code = 1;
        goto stop;
    }

    /* Triggers: events the recorder sees become pin requests; what becomes of a request is
     * daemon_triggers.c's on_pin_request. Without them the recorder records as before. */
    pfr_daemon_triggers_start(&cfg, svc.identity, metrics, sources, nsrc, &trig);

    /* "sampling": the line that says the recorder is up (tests and scripts wait for it) */
    pfr_info("pfr-recorder %s: sampling with %zu sources, %.3g s intervals, ring %s, host %s",
             PFR_VERSION, nsrc, (double)cfg.interval_ns / 1e9, cfg.store_path, host.name);

    arm_timer(tfd, next_boundary(start, cfg.interval_ns));
    check_memory(&w);
    int64_t next_mem_check = pfr_clock_mono_ns() + MEMORY_CHECK_NS;
    for (;;) {
        struct pollfd pfd[3] = {{.fd = sfd, .events = POLLIN},
                                {.fd = tfd, .events = POLLIN},
                                {.fd = efd, .events = POLLIN}};
        /* Within the budget, the resident set is measured at each interval's end, and by the
         * sources before they pay for a file (pfr_membudget_allow measures again when its last
         * measure is a second old): an idle recorder does not wake every second for it. Near or
         * over the budget, every second, so that what was freed is given back. */
        int64_t now_mono = pfr_clock_mono_ns();
        bool watch = w.mem_level != PFR_MEM_OK ||
                     pfr_membudget_level(w.membudget) != PFR_MEM_OK; /* (a source's measure) */
        if (watch && now_mono >= next_mem_check) {
            check_memory(&w);
            next_mem_check = now_mono + MEMORY_CHECK_NS;
        }
        int n = poll(pfd, 3, watch ? (int)((next_mem_check - now_mono) / 1000000) + 1 : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            pfr_err("poll: %s", strerror(errno));
            exit_code = 1;
            break;
        }
        if (pfd[2].revents & POLLIN) {
            drain_wake(efd);
            serve_collectors(&w);
        }
        if (pfd[1].revents & POLLIN) {
            uint64_t ticks;
            if (read(tfd, &ticks, sizeof(ticks)) < 0 && errno != ECANCELED)
                pfr_warn("timer: %s", strerror(errno));
            post_interval(&w, pfr_clock_real_ns());
            arm_timer(tfd, next_boundary(pfr_clock_real_ns(), cfg.interval_ns));
            if (!watch) {
                check_memory(&w);
                next_mem_check = pfr_clock_mono_ns() + MEMORY_CHECK_NS;
            }
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) != sizeof(si))
                continue;
            if (si.ssi_signo == SIGHUP) {
                reload(argc, argv, &cfg, sources, nsrc, &w, efd, trig);
                continue;
            }
            pfr_info("%s: writing the current interval and exiting",
                     si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
            for (size_t i = 0; i < nsrc; i++) {
                int64_t need =
                    sources[i].ops->stopping ? sources[i].ops->stopping(sources[i].self) : 0;
                wind_down_ns = need > wind_down_ns ? need : wind_down_ns;
            }
            finish_intervals(&w, efd);
            break;
        }
    }
stop:
    pfr_daemon_triggers_stop(trig); /* its pending requests are handed over */
    if (stop_collectors(&w) != 0) {
        /* a source is stuck in the kernel (a hung mount): what could be written is, the ring is
         * closed; its threads cannot be stopped, and the process goes without them */
        pfr_store_close(store);
        pfr_err("exiting with a source's thread stuck");
        _exit(exit_code);
    }
    pfr_store_close(store);
    start_stop_watchdog(exit_code, wind_down_ns);
    stop_sources(sources, nsrc);
    pfr_daemon_services_stop(&svc); /* after the sources: they borrow them */
    pfr_daemon_metrics_free(metrics);
    if (efd >= 0)
        close(efd);
    close(sfd);
    close(tfd);
    pfr_config_free(&cfg);
    curl_global_cleanup();
    return exit_code;
}
