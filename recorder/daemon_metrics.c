/* The recorder's health metrics: the ring, the identities, the collectors, remote files, the
 * memory budget, the symbol cache, the sources' last errors; each a table of rows. */
#include "daemon_metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "collector.h"
#include "pfr_fsguard.h"
#include "pfr_membudget.h"
#include "pfr_refusal.h"
#include "symbolizer.h"

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

void pfr_daemon_metrics_on_post(pfr_daemon_metrics *m, const char *path, pfr_metrics_post_fn fn,
                                void *ctx)
{
    if (m->server)
        pfr_metrics_server_on_post(m->server, path, fn, ctx);
}

void pfr_daemon_metrics_publish(pfr_daemon_metrics *m, const pfr_metric_table *t, const void *stats,
                                const char *instance)
{
    /* a family that cannot be registered (out of memory) only loses its series */
    (void)pfr_metrics_publish(m->reg, t, stats, instance);
}

#define C PFR_METRIC_COUNTER
#define G PFR_METRIC_GAUGE

/* ---- the ring ---- */

/* What the store's rows read: its statistics and the daemon's failed writes. */
typedef struct store_view {
    pfr_store_stats st;
    pfr_store_mem_stats mem;
    unsigned long long write_errors;
} store_view;

#define ST(f) PFR_METRIC_FIELD(store_view, st.f)
#define SM(f) PFR_METRIC_FIELD(store_view, mem.f)

static double store_disk_limited(const void *p)
{
    return ((const store_view *)p)->st.cap_reason == PFR_STORE_CAP_DISK_RESERVE ? 1 : 0;
}

static const pfr_metric_row store_rows[] = {
    {"pfr_store_bytes", G, "ring file bytes on disk (database + WAL)", ST(file_bytes)},
    {"pfr_store_max_bytes", G, "ring size cap", ST(max_bytes)},
    {"pfr_store_chunks", G, "chunks in the ring", ST(chunks)},
    {"pfr_store_oldest_timestamp_seconds", G, "start of the oldest chunk", ST(oldest_ns),
     .divisor = 1e9},
    {"pfr_store_chunks_evicted_total", C, "chunks evicted by the size cap", ST(evicted)},
    {"pfr_store_chunks_lost_unshipped_total", C,
     "chunks evicted before a registered consumer (the shipper) had taken them",
     ST(lost_unshipped)},
    {"pfr_store_write_errors_total", C, "profiles that could not be written",
     PFR_METRIC_FIELD(store_view, write_errors)},
    {"pfr_store_effective_max_bytes", G,
     "the cap in force: pfr_store_max_bytes, or less while the file system's free space is "
     "short of the reserve",
     ST(effective_max_bytes)},
    {"pfr_store_disk_limited", G,
     "1 while the file system's free space lowers the cap in force (disk free space reserve)",
     .get = store_disk_limited},
    {"pfr_store_disk_reserve_bytes", G, "free space the ring leaves on its file system",
     ST(reserve_bytes)},
    {"pfr_store_disk_free_bytes", G, "free space on the ring's file system (for its user)",
     ST(fs_free_bytes)},
    {"pfr_store_chunks_evicted_disk_total", C,
     "of pfr_store_chunks_evicted_total, chunks given up for disk space (the reserve, or a "
     "full disk)",
     ST(evicted_disk)},
    {"pfr_store_chunks_dropped_disk_full_total", C,
     "profiles not written: the disk was full and the ring had nothing older to give up",
     ST(dropped_disk)},
    {"pfr_store_pins", G, "pins in the ring (pfr pins)", ST(pins)},
    {"pfr_store_pin_max_bytes", G, "what pins may keep from eviction (pin_max_bytes)",
     ST(pin_max_bytes)},
    {"pfr_store_pins_released_total", C,
     "pins released: automatic ones for the pin budget, any when only pinned chunks were left "
     "to give up",
     ST(pins_released)},
    {"pfr_store_writer_table_bytes", G,
     "the writer's memory: streams' dictionary tables kept between chunks (at most 8 MiB)",
     SM(table_bytes)},
    {"pfr_store_writer_table_streams", G, "streams whose dictionary tables are kept",
     SM(table_streams)},
    {"pfr_store_writer_tables_dropped_total", C,
     "streams' tables given up for memory (their next chunk writes a new base: more disk)",
     SM(tables_dropped)},
    {"pfr_store_page_cache_bytes", G, "the writer's SQLite page cache (up to 4 MiB)",
     SM(page_cache_bytes)},
    {"pfr_store_chain_cache_bytes", G,
     "dictionary chains the writer decoded to read the ring (roll-ups), kept until memory is "
     "trimmed",
     SM(chain_cache_bytes)},
};
const pfr_metric_table pfr_daemon_store_metrics = PFR_METRIC_TABLE("The ring", store_rows);

void pfr_daemon_metrics_store(pfr_daemon_metrics *m, const pfr_store_stats *st,
                              const pfr_store_mem_stats *mem, unsigned long long write_errors)
{
    store_view v = {*st, *mem, write_errors};
    pfr_daemon_metrics_publish(m, &pfr_daemon_store_metrics, &v, NULL);
}

/* ---- the identities' resolver ---- */

#define ID(f) PFR_METRIC_FIELD(pfr_identity_stats, f)

/* metadata fetches that worked: all of them but the failed */
static double docker_api_ok(const void *p)
{
    const pfr_identity_stats *st = p;
    return (double)(st->docker_fetches - st->docker_failures);
}

static double docker_disk_ok(const void *p)
{
    const pfr_identity_stats *st = p;
    return (double)(st->docker_disk_reads - st->docker_disk_failures);
}

static double kubernetes_ok(const void *p)
{
    const pfr_identity_stats *st = p;
    return (double)(st->k8s_fetches - st->k8s_failures);
}

static const pfr_metric_row identity_rows[] = {
    {"pfr_identity_cgroups", G,
     "cgroups by Coroot identity state (pending, failed: named by what is known until their "
     "metadata is had)",
     .labels = {"state"},
     .series = PFR_METRIC_SERIES({{"resolved"}, ID(resolved)}, {{"none"}, ID(none)},
                                 {{"pending"}, ID(pending)}, {{"failed"}, ID(failed)})},
    {"pfr_identity_lookups_total", C, "identity lookups of processes' cgroups", ID(lookups)},
    {"pfr_identity_metadata_fetches_total", C, "container metadata fetches, by source and result",
     .labels = {"source", "result"},
     .series = PFR_METRIC_SERIES({{"docker_api", "ok"}, .get = docker_api_ok},
                                 {{"docker_api", "error"}, ID(docker_failures)},
                                 {{"docker_disk", "ok"}, .get = docker_disk_ok},
                                 {{"docker_disk", "error"}, ID(docker_disk_failures)},
                                 {{"kubernetes", "ok"}, .get = kubernetes_ok},
                                 {{"kubernetes", "error"}, ID(k8s_failures)})},
};
const pfr_metric_table pfr_daemon_identity_metrics =
    PFR_METRIC_TABLE("Coroot identities", identity_rows);

/* ---- the collectors: one instance per source ---- */

#define CS(f) PFR_METRIC_FIELD(pfr_collector_stats, f)

static const pfr_metric_row collector_rows[] = {
    {"pfr_source_intervals_folded_total", C,
     "intervals a source's collection was still running at the end of, folded into its next "
     "collection",
     CS(folded), .labels = {"source"}, .doc_values = "each source"},
    {"pfr_source_intervals_not_due_total", C,
     "intervals a source had no work for (its own period not due, nothing queued), left asleep "
     "and covered by its next collection",
     CS(not_due), .labels = {"source"}, .doc_values = "each source"},
    {"pfr_source_collect_seconds", G, "how long the source's last collection took", CS(last_ns),
     .divisor = 1e9, .labels = {"source"}, .doc_values = "each source"},
    {"pfr_source_collect_running_seconds", G,
     "how long the source's collection now running has run (0: idle); one stuck in the kernel "
     "grows here",
     CS(running_for_ns), .divisor = 1e9, .labels = {"source"}, .doc_values = "each source"},
};
const pfr_metric_table pfr_daemon_collector_metrics =
    PFR_METRIC_TABLE("The sources' collectors", collector_rows);

/* ---- files on remote file systems ---- */

#define FG(f) PFR_METRIC_FIELD(pfr_fsguard_stats, f)

static const pfr_metric_row fsguard_rows[] = {
    {"pfr_remote_files_total", C,
     "files of other processes on remote file systems (FUSE, NFS, ...), by what the recorder "
     "did with them",
     .labels = {"result"},
     .series =
         PFR_METRIC_SERIES({{"copied"}, FG(copies)}, {{"skipped"}, FG(refused_skip)},
                           {{"avoided"}, FG(refused_avoided)}, {{"too_big"}, FG(refused_too_big)},
                           {{"no_room"}, FG(refused_no_room)}, {{"error"}, FG(copy_errors)},
                           {{"abandoned"}, FG(abandoned)})},
    {"pfr_remote_file_workers_stuck", G,
     "copy workers still blocked in the kernel past their deadline", FG(stuck_now)},
    {"pfr_remote_file_lookups_total", C,
     "mapped files found on a remote (or unknown) file system before they were opened",
     FG(remote_lookups)},
};
const pfr_metric_table pfr_daemon_fsguard_metrics =
    PFR_METRIC_TABLE("Files on remote file systems", fsguard_rows);

/* ---- the memory budget ---- */

#define MB(f) PFR_METRIC_FIELD(pfr_membudget_stats, f)

static const pfr_metric_row membudget_rows[] = {
    {"pfr_memory_budget_bytes", G, "the recorder's resident memory budget (memory_budget; 0: off)",
     MB(budget_bytes)},
    {"pfr_memory_resident_bytes", G, "the recorder's resident memory", MB(rss_bytes)},
    {"pfr_memory_resident_peak_bytes", G, "the most resident memory measured", MB(peak_bytes)},
    {"pfr_memory_budget_level", G,
     "0: within the budget; 1: near it (only small new costs paid); 2: over it (no new cost "
     "paid)",
     MB(level)},
    {"pfr_memory_refused_total", C,
     "new costs refused for the memory budget, by what would have paid them (frames left "
     "unnamed, stacks walked by frame pointers, heaps not read)",
     .labels = {"user"},
     .series = PFR_METRIC_SERIES({{"symbols"}, MB(refused[PFR_MEM_SYMBOLS])},
                                 {{"unwind"}, MB(refused[PFR_MEM_UNWIND])},
                                 {{"goheap"}, MB(refused[PFR_MEM_GOHEAP])})},
};
const pfr_metric_table pfr_daemon_membudget_metrics =
    PFR_METRIC_TABLE("The memory budget", membudget_rows);

/* ---- the symbol cache (the daemon's shared symbolizer, whichever sources use it) ---- */

#define SY(f) PFR_METRIC_FIELD(pfr_sym_stats, f)

static const pfr_metric_row symbolizer_rows[] = {
    {"pfr_symbol_files_parsed_total", C, "ELF files parsed for symbols", SY(files_parsed)},
    {"pfr_symbol_cache_bytes", G, "bytes held by the symbol cache", SY(cache_bytes)},
    {"pfr_symbol_cache_bound_bytes", G,
     "what the symbol cache may hold now: sym_cache_bytes, or less (down to a quarter) while "
     "the memory budget has no room for it",
     SY(bound_bytes)},
    {"pfr_symbol_cache_lookups_total", C, "files looked up in the symbol cache, by result",
     .labels = {"result"},
     .series = PFR_METRIC_SERIES({{"hit"}, SY(cache_hits)}, {{"miss"}, SY(cache_misses)})},
    {"pfr_symbol_files_evicted_total", C, "files evicted from the symbol cache for room",
     SY(evictions)},
    {"pfr_symbol_files_reparsed_total", C, "files parsed again after their eviction", SY(reparses)},
    {"pfr_symbol_files_cached", G, "files in the symbol cache", SY(files_cached)},
    {"pfr_symbol_files_open", G,
     "descriptors the symbol cache keeps open (names are read from the files)", SY(open_files)},
    {"pfr_symbol_cache_protected_bytes", G,
     "of the symbol cache, bytes of files used more than once", SY(protected_bytes)},
    {"pfr_symbol_dwarf_loads_total", C, "DWARF line tables opened (again after a drop)",
     SY(dwarf_loads)},
    {"pfr_symbol_dwarf_evictions_total", C, "DWARF dropped for room while the symbols stayed",
     SY(dwarf_evictions)},
    {"pfr_symbol_dwarf_refused_total", C,
     "DWARF not read: its debug sections leave no room to grow under the per-file cap",
     SY(dwarf_too_big)},
    {"pfr_symbol_dwarf_no_room_total", C,
     "DWARF put off: it needs the room of DWARF in use (read later, each time later)",
     SY(dwarf_no_room)},
    {"pfr_symbol_dwarf_outgrown_total", C,
     "DWARF dropped after its line tables outgrew the per-file cap (read again later, each "
     "time later)",
     SY(dwarf_outgrown)},
    {"pfr_symbol_dwarf_bytes", G, "of the symbol cache, bytes of open DWARF", SY(dwarf_bytes)},
    {"pfr_symbol_name_errors_total", C,
     "symbol names unreadable: the file changed on disk after it was parsed", SY(name_errors)},
    {"pfr_symbol_errors_total", C, "files or maps the symbolizer could not use", SY(errors)},
    {"pfr_symbol_files_refused_total", C,
     "mapped files (or a table, a unit's lines of one) refused before they were paid for, by "
     "reason",
     .labels = {"reason"}, SY(files_refused[0]), .name_of = pfr_refusal_name,
     .first = PFR_REFUSED_NONE + 1, .end = PFR_NREFUSALS},
    {"pfr_symbol_jit_frames_total", C, "frames of JIT code named from a perf map", SY(jit_frames)},
    {"pfr_symbol_perf_maps_opened_total", C, "processes whose /tmp/perf-PID.map was opened",
     SY(perf_maps_opened)},
    {"pfr_symbol_perf_map_bad_lines_total", C, "perf map lines skipped as malformed",
     SY(perf_map_bad_lines)},
    {"pfr_symbol_perf_maps_full_total", C,
     "perf maps no longer read: their share of the symbol cache is used up", SY(perf_maps_full)},
    {"pfr_symbol_perf_map_errors_total", C,
     "perf maps refused (not a regular file of the process's user) or unreadable",
     SY(perf_map_errors)},
    {"pfr_frames_unresolved_total", C, "frames that could not be named", SY(unresolved_frames)},
};
const pfr_metric_table pfr_daemon_symbolizer_metrics = PFR_METRIC_TABLE("Symbols", symbolizer_rows);

const pfr_metric_table *const pfr_daemon_metric_tables[] = {
    &pfr_daemon_store_metrics,    &pfr_daemon_collector_metrics,  &pfr_daemon_membudget_metrics,
    &pfr_daemon_fsguard_metrics,  &pfr_daemon_symbolizer_metrics, &pfr_daemon_identity_metrics,
    &pfr_daemon_triggers_metrics, &pfr_metrics_registry_table,    NULL,
};

void pfr_daemon_metrics_error(pfr_daemon_metrics *m, const char *source, const char *message)
{
    pfr_metrics_set_last_error(m->reg, source, message, (double)time(NULL));
}
