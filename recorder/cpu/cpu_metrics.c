/* The CPU profiler's metrics: samples taken and lost, processes, the symbol cache, the unwind
 * tables. Mirrors of the source's cumulative counters, set after each interval. */
#include "cpu_metrics.h"

#define C   PFR_METRIC_COUNTER
#define G   PFR_METRIC_GAUGE
#define put pfr_daemon_metrics_put
#define put1(m, name, help, label, value, v)                                                       \
    pfr_daemon_metrics_put1(m, name, help, C, label, value, v)

static void unwind_counters(pfr_daemon_metrics *m, const pfr_cpu_source_stats *st);
static void symbolizer_counters(pfr_daemon_metrics *m, const pfr_sym_stats *st);

static void cpu_counters(pfr_daemon_metrics *m, const pfr_cpu_source_stats *st)
{
    static const char lost_help[] = "CPU samples lost or with a stack that could not be kept";
    put(m, "pfr_cpu_samples_total", "CPU samples taken (idle excluded)", C,
        (double)st->bpf.samples);
    put1(m, "pfr_cpu_samples_lost_total", lost_help, "reason", "count_map_full",
         (double)st->bpf.count_map_full);
    put1(m, "pfr_cpu_samples_lost_total", lost_help, "reason", "prog_busy",
         (double)st->bpf.prog_misses);
    put1(m, "pfr_cpu_samples_lost_total", lost_help, "reason", "stack_map_full",
         (double)st->bpf.stack_map_full);
    put1(m, "pfr_cpu_samples_lost_total", lost_help, "reason", "kernel_stack_error",
         (double)st->bpf.kstack_errors);
    put1(m, "pfr_cpu_samples_lost_total", lost_help, "reason", "user_stack_error",
         (double)st->bpf.ustack_errors);
    put(m, "pfr_cpu_samples_in_execve_total",
        "CPU samples inside execve, kept without their user stack (the old image's)", C,
        (double)st->bpf.exec_no_ustack);
    put(m, "pfr_cpu_process_events_lost_total", "process notifications dropped (ring full)", C,
        (double)st->bpf.events_lost);
    put(m, "pfr_cpu_bpf_run_seconds_total",
        "run time of the BPF sampler (needs kernel.bpf_stats_enabled=1)", C,
        (double)st->bpf.prog_run_ns / 1e9);
    put(m, "pfr_processes_symbolized_total", "processes whose mappings were snapshotted", C,
        (double)st->processes_seen);
    put(m, "pfr_processes_tracked", "processes the CPU profiler holds records of", G,
        (double)st->processes_live);
    static const char cg_help[] = "cgroups of new processes, by where they came from";
    put1(m, "pfr_process_cgroup_lookups_total", cg_help, "from", "cache", (double)st->cgroup_hits);
    put1(m, "pfr_process_cgroup_lookups_total", cg_help, "from", "proc", (double)st->cgroup_reads);
    put1(m, "pfr_process_cgroup_lookups_total", cg_help, "from", "walk", (double)st->cgroup_walks);
    put(m, "pfr_processes_exiting_named_total",
        "processes sampled only while exiting, named by their cgroup", C,
        (double)st->exiting_named);
    put(m, "pfr_processes_renamed_total",
        "processes named again once their container's metadata was had", C, (double)st->renamed);
    static const char exe_help[] = "executable paths of processes, by where they came from";
    put1(m, "pfr_process_exe_lookups_total", exe_help, "from", "mappings", (double)st->exe_hits);
    put1(m, "pfr_process_exe_lookups_total", exe_help, "from", "proc", (double)st->exe_reads);
    static const char xm_help[] =
        "exits that carried the process's mappings, by whether they replaced its snapshot";
    put1(m, "pfr_process_exit_mappings_total", xm_help, "use", "taken",
         (double)st->exit_maps_taken);
    put1(m, "pfr_process_exit_mappings_total", xm_help, "use", "unneeded",
         (double)st->exit_maps_unneeded);
    static const char xp_help[] = "paths of files exits mapped code from that no snapshot saw, "
                                  "by whether they were learned";
    put1(m, "pfr_process_exit_paths_total", xp_help, "result", "learned",
         (double)st->exit_paths_learned);
    put1(m, "pfr_process_exit_paths_total", xp_help, "result", "refused",
         (double)st->exit_paths_refused);
    put(m, "pfr_process_snapshots_deferred_total",
        "new processes whose mappings were left for the drain or their exit", C,
        (double)st->snapshots_deferred);
    put(m, "pfr_symbol_files_parsed_total", "ELF files parsed for symbols", C,
        (double)st->sym.files_parsed);
    put(m, "pfr_symbol_cache_bytes", "bytes held by the symbol cache", G,
        (double)st->sym.cache_bytes);
    symbolizer_counters(m, &st->sym);
    put(m, "pfr_frames_unresolved_total", "frames that could not be named", C,
        (double)st->sym.unresolved_frames);
    put(m, "pfr_frames_late_total", "frames left as addresses: symbolizing budget spent", C,
        (double)st->build.late_frames);
    put(m, "pfr_cpu_profiles_total", "CPU profiles written", C, (double)st->profiles);
    unwind_counters(m, st);
}

static void unwind_counters(pfr_daemon_metrics *m, const pfr_cpu_source_stats *st)
{
    const pfr_cpu_counters *b = &st->bpf;
    const pfr_unwinder_stats *u = &st->unwind;
    static const char walk_help[] = "user stacks by how they were walked: dwarf (at least one "
                                    "frame found by an unwind table) or fp (frame pointers only)";
    put(m, "pfr_unwind_tables_enabled", "1 if user stacks are walked with unwind tables", G,
        st->unwind_tables ? 1 : 0);
    put1(m, "pfr_cpu_stacks_walked_total", walk_help, "method", "dwarf", (double)b->uw_dwarf);
    put1(m, "pfr_cpu_stacks_walked_total", walk_help, "method", "fp", (double)b->uw_fp);
    put(m, "pfr_unwind_frames_total", "user frames found by unwind tables", C,
        (double)b->uw_frames);
    put(m, "pfr_unwind_stacks_complete_total",
        "user stacks walked to their outermost frame (a table marked it)", C, (double)b->uw_end);
    static const char fb_help[] = "user stacks with a frame walked by frame pointer instead of "
                                  "a table, by why";
    put1(m, "pfr_unwind_fallbacks_total", fb_help, "reason", "table_pending",
         (double)b->uw_pending);
    put1(m, "pfr_unwind_fallbacks_total", fb_help, "reason", "no_row", (double)b->uw_no_row);
    put1(m, "pfr_unwind_fallbacks_total", fb_help, "reason", "mappings_busy", (double)b->uw_busy);
    put1(m, "pfr_unwind_fallbacks_total", fb_help, "reason", "mapping_not_cached",
         (double)b->uw_vma_miss);
    static const char cut_help[] = "user stack walks cut short, by why";
    put1(m, "pfr_unwind_walks_cut_total", cut_help, "reason", "bad_memory", (double)b->uw_cut_read);
    put1(m, "pfr_unwind_walks_cut_total", cut_help, "reason", "unmapped_pc", (double)b->uw_cut_map);
    put1(m, "pfr_unwind_walks_cut_total", cut_help, "reason", "max_depth", (double)b->uw_cut_depth);
    put(m, "pfr_unwind_requests_lost_total",
        "requests for a table dropped (notification ring or queue full), asked again", C,
        (double)(b->uw_ask_lost + u->queue_full));
    static const char files_help[] = "files the sampler asked unwind tables for, by outcome";
    put1(m, "pfr_unwind_files_total", files_help, "outcome", "table", (double)u->tables);
    put1(m, "pfr_unwind_files_total", files_help, "outcome", "no_table", (double)u->no_table);
    put1(m, "pfr_unwind_files_total", files_help, "outcome", "no_room", (double)u->no_room);
    put1(m, "pfr_unwind_files_total", files_help, "outcome", "bad_file", (double)u->bad_files);
    put1(m, "pfr_unwind_files_total", files_help, "outcome", "open_failed", (double)u->open_failed);
    static const char refused_help[] = "files whose unwind table was refused, by why (also "
                                       "counted as no_table or bad_file)";
    for (int r = 0; r < PFR_UW_REFUSALS; r++)
        put1(m, "pfr_unwind_files_refused_total", refused_help, "reason",
             pfr_unwind_refusal_name(r), (double)u->refused[r]);
    put(m, "pfr_unwind_table_files", "files with an unwind table loaded", G,
        (double)u->files_with_rows);
    put(m, "pfr_unwind_table_bytes", "kernel memory used by unwind table rows", G,
        (double)u->rows * sizeof(struct pfr_unwind_row));
    put(m, "pfr_unwind_table_bytes_max", "the cap of unwind table rows (unwind_table_bytes)", G,
        (double)u->max_rows * sizeof(struct pfr_unwind_row));
    put(m, "pfr_unwind_table_evictions_total", "unwind tables evicted for room", C,
        (double)u->evictions);
    put(m, "pfr_unwind_table_build_seconds_total", "time spent building and loading tables", C,
        (double)u->build_ns / 1e9);
    put(m, "pfr_unwind_table_build_max_seconds", "the longest build and load of one table", G,
        (double)u->build_max_ns / 1e9);
}

static void symbolizer_counters(pfr_daemon_metrics *m, const pfr_sym_stats *st)
{
    static const char lookup_help[] = "files looked up in the symbol cache, by result";
    put1(m, "pfr_symbol_cache_lookups_total", lookup_help, "result", "hit", (double)st->cache_hits);
    put1(m, "pfr_symbol_cache_lookups_total", lookup_help, "result", "miss",
         (double)st->cache_misses);
    put(m, "pfr_symbol_files_evicted_total", "files evicted from the symbol cache for room", C,
        (double)st->evictions);
    put(m, "pfr_symbol_files_reparsed_total", "files parsed again after their eviction", C,
        (double)st->reparses);
    put(m, "pfr_symbol_files_cached", "files in the symbol cache", G, (double)st->files_cached);
    put(m, "pfr_symbol_files_open",
        "descriptors the symbol cache keeps open (names are read "
        "from the files)",
        G, (double)st->open_files);
    put(m, "pfr_symbol_cache_protected_bytes",
        "of the symbol cache, bytes of files used more than once", G, (double)st->protected_bytes);
    put(m, "pfr_symbol_dwarf_loads_total", "DWARF line tables opened (again after a drop)", C,
        (double)st->dwarf_loads);
    put(m, "pfr_symbol_dwarf_evictions_total", "DWARF dropped for room while the symbols stayed", C,
        (double)st->dwarf_evictions);
    put(m, "pfr_symbol_dwarf_refused_total",
        "DWARF not read: its debug sections leave no room to grow under the per-file cap", C,
        (double)st->dwarf_too_big);
    put(m, "pfr_symbol_dwarf_no_room_total",
        "DWARF put off: it needs the room of DWARF in use (read later, each time later)", C,
        (double)st->dwarf_no_room);
    put(m, "pfr_symbol_dwarf_outgrown_total",
        "DWARF dropped after its line tables outgrew the per-file cap (read again later, each "
        "time later)",
        C, (double)st->dwarf_outgrown);
    put(m, "pfr_symbol_dwarf_bytes", "of the symbol cache, bytes of open DWARF", G,
        (double)st->dwarf_bytes);
    put(m, "pfr_symbol_name_errors_total",
        "symbol names unreadable: the file changed on disk after it was parsed", C,
        (double)st->name_errors);
    put(m, "pfr_symbol_errors_total", "files or maps the symbolizer could not use", C,
        (double)st->errors);
    static const char refused_help[] = "mapped files (or a table, a unit's lines of one) refused "
                                       "before they were paid for, by reason";
    for (int k = PFR_REFUSED_NONE + 1; k < PFR_NREFUSALS; k++)
        put1(m, "pfr_symbol_files_refused_total", refused_help, "reason", pfr_refusal_name(k),
             (double)st->files_refused[k]);
    put(m, "pfr_symbol_jit_frames_total", "frames of JIT code named from a perf map", C,
        (double)st->jit_frames);
    put(m, "pfr_symbol_perf_maps_opened_total", "processes whose /tmp/perf-PID.map was opened", C,
        (double)st->perf_maps_opened);
    put(m, "pfr_symbol_perf_map_bad_lines_total", "perf map lines skipped as malformed", C,
        (double)st->perf_map_bad_lines);
    put(m, "pfr_symbol_perf_maps_full_total",
        "perf maps no longer read: their share of the symbol cache is used up", C,
        (double)st->perf_maps_full);
    put(m, "pfr_symbol_perf_map_errors_total",
        "perf maps refused (not a regular file of the process's user) or unreadable", C,
        (double)st->perf_map_errors);
}

void pfr_cpu_source_export_metrics(void *self, pfr_daemon_metrics *m)
{
    pfr_cpu_source_stats st;
    pfr_cpu_source_stats_get(self, &st);
    cpu_counters(m, &st);
}
