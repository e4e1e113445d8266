/* The recorder's health metrics: the ring, the identities, the sources' last errors. */
#include "daemon_metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

struct pfr_daemon_metrics {
    pfr_metrics *reg;
    pfr_metrics_server *server;
};

int pfr_daemon_metrics_new(const char *listen, pfr_daemon_metrics **out, char *err, size_t errlen)
{
    pfr_daemon_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    int rc = pfr_metrics_new(0, &m->reg);
    if (rc == 0 && listen && listen[0])
        rc = pfr_metrics_serve(m->reg, listen, &m->server, err, errlen);
    if (rc) {
        pfr_daemon_metrics_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void pfr_daemon_metrics_free(pfr_daemon_metrics *m)
{
    if (!m)
        return;
    if (m->server)
        pfr_metrics_server_stop(m->server);
    pfr_metrics_free(m->reg);
    free(m);
}

pfr_metrics *pfr_daemon_metrics_registry(pfr_daemon_metrics *m)
{
    return m->reg;
}

unsigned pfr_daemon_metrics_port(const pfr_daemon_metrics *m)
{
    return m->server ? pfr_metrics_server_port(m->server) : 0;
}

void pfr_daemon_metrics_put(pfr_daemon_metrics *m, const char *name, const char *help,
                            enum pfr_metric_type t, double v)
{
    pfr_metric_family *f;
    if (pfr_metrics_family(m->reg, name, help, t, NULL, 0, &f) == 0)
        pfr_metrics_set(f, NULL, v);
}

void pfr_daemon_metrics_put1(pfr_daemon_metrics *m, const char *name, const char *help,
                             enum pfr_metric_type t, const char *label, const char *value, double v)
{
    pfr_metric_family *f;
    const char *names[1] = {label}, *values[1] = {value};
    if (pfr_metrics_family(m->reg, name, help, t, names, 1, &f) == 0)
        pfr_metrics_set(f, values, v);
}

#define put   pfr_daemon_metrics_put
#define put1t pfr_daemon_metrics_put1

#define C PFR_METRIC_COUNTER
#define G PFR_METRIC_GAUGE

void pfr_daemon_metrics_store(pfr_daemon_metrics *m, const pfr_store_stats *st,
                              unsigned long long write_errors)
{
    put(m, "pfr_store_bytes", "ring file bytes on disk (database + WAL)", G,
        (double)st->file_bytes);
    put(m, "pfr_store_max_bytes", "ring size cap", G, (double)st->max_bytes);
    put(m, "pfr_store_chunks", "chunks in the ring", G, (double)st->chunks);
    put(m, "pfr_store_oldest_timestamp_seconds", "start of the oldest chunk", G,
        (double)st->oldest_ns / 1e9);
    put(m, "pfr_store_chunks_evicted_total", "chunks evicted by the size cap", C,
        (double)st->evicted);
    put(m, "pfr_store_chunks_lost_unshipped_total",
        "chunks evicted before a registered consumer (the shipper) had taken them", C,
        (double)st->lost_unshipped);
    put(m, "pfr_store_write_errors_total", "profiles that could not be written", C,
        (double)write_errors);
    put(m, "pfr_store_effective_max_bytes",
        "the cap in force: pfr_store_max_bytes, or less while the file system's free space is "
        "short of the reserve",
        G, (double)st->effective_max_bytes);
    put(m, "pfr_store_disk_limited",
        "1 while the file system's free space lowers the cap in force (disk free space reserve)", G,
        st->cap_reason == PFR_STORE_CAP_DISK_RESERVE ? 1 : 0);
    put(m, "pfr_store_disk_reserve_bytes", "free space the ring leaves on its file system", G,
        (double)st->reserve_bytes);
    put(m, "pfr_store_disk_free_bytes", "free space on the ring's file system (for its user)", G,
        (double)st->fs_free_bytes);
    put(m, "pfr_store_chunks_evicted_disk_total",
        "of pfr_store_chunks_evicted_total, chunks given up for disk space (the reserve, or a "
        "full disk)",
        C, (double)st->evicted_disk);
    put(m, "pfr_store_chunks_dropped_disk_full_total",
        "profiles not written: the disk was full and the ring had nothing older to give up", C,
        (double)st->dropped_disk);
    put(m, "pfr_store_pins", "pins in the ring (pfr pins)", G, (double)st->pins);
    put(m, "pfr_store_pin_max_bytes", "what pins may keep from eviction (pin_max_bytes)", G,
        (double)st->pin_max_bytes);
    put(m, "pfr_store_pins_released_total",
        "pins released: automatic ones for the pin budget, any when only pinned chunks were "
        "left to give up",
        C, (double)st->pins_released);
}

void pfr_daemon_metrics_identity(pfr_daemon_metrics *m, const pfr_identity_stats *st)
{
    static const char cg_help[] =
        "cgroups by Coroot identity state (pending, failed: named by what is known until their "
        "metadata is had)";
    static const char md_help[] = "container metadata fetches, by source and result";
    static const char *const states[] = {"resolved", "none", "pending", "failed"};
    const size_t counts[] = {st->resolved, st->none, st->pending, st->failed};
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        put1t(m, "pfr_identity_cgroups", cg_help, G, "state", states[i], (double)counts[i]);
    put(m, "pfr_identity_lookups_total", "identity lookups of processes' cgroups", C,
        (double)st->lookups);
    const struct {
        const char *source;
        uint64_t all, failed;
    } fetches[] = {
        {"docker_api", st->docker_fetches, st->docker_failures},
        {"docker_disk", st->docker_disk_reads, st->docker_disk_failures},
        {"kubernetes", st->k8s_fetches, st->k8s_failures},
    };
    pfr_metric_family *f;
    const char *names[2] = {"source", "result"};
    if (pfr_metrics_family(m->reg, "pfr_identity_metadata_fetches_total", md_help, C, names, 2,
                           &f) == 0) {
        for (size_t i = 0; i < sizeof(fetches) / sizeof(fetches[0]); i++) {
            const char *ok[2] = {fetches[i].source, "ok"}, *bad[2] = {fetches[i].source, "error"};
            pfr_metrics_set(f, ok, (double)(fetches[i].all - fetches[i].failed));
            pfr_metrics_set(f, bad, (double)fetches[i].failed);
        }
    }
}

void pfr_daemon_metrics_error(pfr_daemon_metrics *m, const char *source, const char *message)
{
    pfr_metrics_set_last_error(m->reg, source, message, (double)time(NULL));
}
