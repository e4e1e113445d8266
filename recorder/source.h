/*
 * source: what produces profiles for the recorder. The daemon starts the sources of its table
 * (sources.c: one row per source), calls every one once per interval (collect), writes what
 * they emit to the ring, and then publishes each one's counters through its metric tables.
 *
 * A new source is its own folder (recorder/NAME/) with its adapter NAME_source.c, which defines
 * a pfr_source_desc, plus one row in sources.c: no other module names it.
 */
#ifndef PFR_RECORDER_SOURCE_H
#define PFR_RECORDER_SOURCE_H

#include <stdbool.h>

#include "config.h"
#include "daemon_metrics.h"
#include "pfr_metric_rows.h"
#include "pfr_store.h"

struct pfr_disk_keep;
struct pfr_exe_scan;
struct pfr_fsguard;
struct pfr_identity;
struct pfr_k8s_pods;
struct pfr_membudget;
struct pfr_shared_sym;

/* Called by a source with the profiles it produced (all of an interval at once, so they are
 * written in one transaction); chunks[i].labels are the source's own labels (e.g.
 * container.id), the daemon adds host labels. Returns how many were written (n when all), or a
 * negative errno when none could be. */
typedef int (*pfr_emit_fn)(const pfr_chunk_in *chunks, size_t n, void *ctx);

typedef struct pfr_source_ops {
    const char *name;
    /* Produce what was gathered in [start_ns, end_ns) through emit. */
    int (*collect)(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit, void *emit_ctx);
    /* Apply the reloadable parts of a new configuration (SIGHUP). May be NULL. */
    int (*reload)(void *self, const pfr_config *cfg);
    /* Log counters (debug level) after an interval. May be NULL. */
    void (*log_stats)(void *self);
    /* Fill out (the descriptor's stats_size bytes) with the source's cumulative counters, which
     * the collector then publishes through the descriptor's metric tables after each interval.
     * May be NULL (no metrics). */
    void (*stats)(void *self, void *out);
    void (*destroy)(void *self);
    /* A trigger wants these processes' profiles at the next collection rather than when they
     * are next due (memory pressure brings the Go heap). Any thread; may be NULL. */
    void (*collect_soon)(void *self, const int32_t *pids, size_t npids);
    /* The daemon stops (SIGTERM): wind down what is left to undo in other processes (a JVM's
     * recording), beside the last collection, rather than in destroy. Returns how long that may
     * still take (ns; 0: nothing to undo): the daemon waits for the sources' threads a few
     * seconds more than that, not forever. collect is still called once more. May be NULL. */
    int64_t (*stopping)(void *self);
    /* Whether collect has work for an interval ending at end_ns: its own period is due,
     * something was asked for soon, profiles are queued, its counters moved. Otherwise the
     * daemon leaves the collector's thread asleep (a thread's wake-up after seconds asleep costs
     * ~1 ms of CPU on a VM) and the next collection covers the time; it still collects at least
     * once a minute. Called on the main thread while no collection runs (what the last one set
     * is visible). May be NULL: every interval. */
    bool (*due)(void *self, int64_t end_ns);
} pfr_source_ops;

struct pfr_source_desc;

typedef struct pfr_source {
    const pfr_source_ops *ops;
    void *self;
    const struct pfr_source_desc *desc; /* the row it was started from (set by the daemon) */
} pfr_source;

/* What the daemon lends the sources it starts: the services they share, which the daemon
 * creates before the first source starts and frees after the last one is destroyed (main.c).
 * A source names no other source. */
typedef struct pfr_source_env {
    const pfr_config *cfg;
    /* The symbolizer every source shares, behind its lock (pfr_shared_sym.h): one symbol cache
     * for every profile; never NULL. */
    struct pfr_shared_sym *sym;
    struct pfr_exe_scan *exes; /* the shared /proc scan; NULL: each source scans on its own */
    pfr_daemon_metrics *metrics;
    struct pfr_identity *identity; /* NULL: processes named from their cgroup paths alone */
    /* Which file systems the sources' threads may open other processes' files on, and the
     * copies of remote ones (pfr_fsguard.h); never NULL. */
    struct pfr_fsguard *fsguard;
    /* The recorder's memory budget, asked before a cost is paid (pfr_membudget.h); never
     * NULL (a budget of 0 allows everything). */
    struct pfr_membudget *membudget;
    /* This node's Kubernetes pod list (pfr_k8s_pods.h): one client, which the identities'
     * resolver also uses; NULL when none is configured (or it could not start). */
    struct pfr_k8s_pods *k8s_pods;
    /* The free space the recorder's own files (the unwind cache) leave to the ring
     * (pfr_disk_keep.h), filled by the daemon from the ring's settings; NULL: the floor only. */
    const struct pfr_disk_keep *disk_keep;
    /* This host's name (host.name, as the node agent reports it: Coroot's node name); "" when
     * unknown. */
    const char *node_name;
} pfr_source_env;

/* One row of the source table. */
typedef struct pfr_source_desc {
    const char *name; /* "cpu", "goheap", "scrape": logs and the last-error metric */
    /* Its settings: groups whose rows' offsets are in its config struct of conf_size bytes,
     * which the config module allocates, fills and frees (pfr_config_source); NULL-terminated,
     * or NULL for none. */
    const pfr_settings_group *const *settings;
    size_t conf_size;
    /* Checks across its fields once every layer is read; NULL = none. 0 or a negative errno
     * with a reason in err. */
    int (*finish)(void *conf, char *err, size_t errlen);
    /* The daemon cannot run without it: its failure to start stops the daemon. Any other
     * source that cannot start is logged and left out (CPU profiles matter more). */
    bool required;
    /* Whether the configuration asks for it; NULL = always. */
    bool (*wanted)(const pfr_config *cfg);
    /* Start it (threads included) into *out, and log what it does. Returns 0 or a negative
     * errno with a reason in err. */
    int (*start)(pfr_source_env *env, pfr_source *out, char *err, size_t errlen);
    /* Its metrics: tables of rows (pfr_metric_rows.h) read from the struct of stats_size bytes
     * that ops.stats fills; NULL-terminated, or NULL for none. Also the docs' reference. */
    const pfr_metric_table *const *metrics;
    size_t stats_size;
} pfr_source_desc;

/* The table, in start order (sources.c). */
const pfr_source_desc *const *pfr_recorder_sources(size_t *n);

/* Every metric table of the recorder: the daemon's own, then each source's (sources.c). Up to
 * max into out; returns how many there are. */
size_t pfr_recorder_metric_tables(const pfr_metric_table **out, size_t max);

/* The sources that look for programs (Go heap, pprof discovery) share one /proc scan
 * (exe_scan.h): a scan made by one serves the other if it is younger than half its interval,
 * so a program started meanwhile is found up to that much later. */
#define PFR_EXES_MAX_AGE(interval_ns) ((interval_ns) / 2)

#endif
