/* The CPU profiler's metrics: samples taken and lost, processes, the unwind tables. Mirrors of
 * the source's cumulative counters, set after each interval: one row each. (The symbol cache's
 * are the daemon's: daemon_metrics.c.) */
#include "cpu_metrics.h"

#define C    PFR_METRIC_COUNTER
#define G    PFR_METRIC_GAUGE
#define F(f) PFR_METRIC_FIELD(pfr_cpu_source_stats, f)

static const pfr_metric_row cpu_rows[] = {
    {"pfr_cpu_samples_total", C, "CPU samples taken (idle excluded)", F(bpf.samples)},
    {"pfr_cpu_samples_lost_total", C, "CPU samples lost or with a stack that could not be kept",
     .labels = {"reason"},
     .series = PFR_METRIC_SERIES({{"count_map_full"}, F(bpf.count_map_full)},
                                 {{"prog_busy"}, F(bpf.prog_misses)},
                                 {{"stack_map_full"}, F(bpf.stack_map_full)},
                                 {{"kernel_stack_error"}, F(bpf.kstack_errors)},
                                 {{"user_stack_error"}, F(bpf.ustack_errors)})},
    {"pfr_cpu_samples_in_execve_total", C,
     "CPU samples inside execve, kept without their user stack (the old image's)",
     F(bpf.exec_no_ustack)},
    {"pfr_cpu_process_events_lost_total", C, "process notifications dropped (ring full)",
     F(bpf.events_lost)},
    {"pfr_cpu_bpf_run_seconds_total", C,
     "run time of the BPF sampler (needs kernel.bpf_stats_enabled=1)", F(bpf.prog_run_ns),
     .divisor = 1e9},
    {"pfr_processes_symbolized_total", C, "processes whose mappings were snapshotted",
     F(processes_seen)},
    {"pfr_processes_tracked", G, "processes the CPU profiler holds records of", F(processes_live)},
    {"pfr_process_cgroup_lookups_total", C, "cgroups of new processes, by where they came from",
     .labels = {"from"},
     .series = PFR_METRIC_SERIES({{"cache"}, F(cgroup_hits)}, {{"proc"}, F(cgroup_reads)},
                                 {{"walk"}, F(cgroup_walks)})},
    {"pfr_processes_exiting_named_total", C,
     "processes sampled only while exiting, named by their cgroup", F(exiting_named)},
    {"pfr_processes_opted_out_total", C,
     "processes whose environment refuses profiling (COROOT_EBPF_PROFILING or PFR_PROFILING "
     "containing \"disabled\"), read when first seen or at an exec: no source profiles them",
     F(opted_out)},
    {"pfr_cpu_samples_opted_out_total", C,
     "CPU samples of processes refusing profiling, dropped before symbolizing",
     F(build.opted_out_samples)},
    {"pfr_processes_renamed_total", C,
     "processes named again once their container's metadata was had", F(renamed)},
    {"pfr_process_exe_lookups_total", C, "executable paths of processes, by where they came from",
     .labels = {"from"},
     .series = PFR_METRIC_SERIES({{"mappings"}, F(exe_hits)}, {{"proc"}, F(exe_reads)})},
    {"pfr_process_exit_mappings_total", C,
     "exits that carried the process's mappings, by whether they replaced its snapshot",
     .labels = {"use"},
     .series =
         PFR_METRIC_SERIES({{"taken"}, F(exit_maps_taken)}, {{"unneeded"}, F(exit_maps_unneeded)})},
    {"pfr_process_exit_mapping_lists_total", C,
     "exits that carried mappings, by where the sampler found them: a walk of all the process's "
     "mappings, or the list its samples met",
     .labels = {"from"},
     .series =
         PFR_METRIC_SERIES({{"walk"}, F(exit_maps_walked)}, {{"samples"}, F(exit_maps_sampled)})},
    {"pfr_process_exit_paths_total", C,
     "paths of files exits mapped code from that no snapshot saw, by whether they were learned",
     .labels = {"result"},
     .series = PFR_METRIC_SERIES({{"learned"}, F(exit_paths_learned)},
                                 {{"refused"}, F(exit_paths_refused)})},
    {"pfr_process_snapshots_deferred_total", C,
     "new processes whose mappings were left for the drain or their exit", F(snapshots_deferred)},
    {"pfr_frames_late_total", C, "frames left as addresses: symbolizing budget spent",
     F(build.late_frames)},
    {"pfr_python_processes", G, "CPython processes whose interpreter frames are walked",
     F(py.processes)},
    {"pfr_python_unknown_versions_total", C,
     "CPython processes of a version with no layout known: walked natively only",
     F(py.unknown_versions)},
    {"pfr_python_stacks_walked_total", C,
     "samples of CPython threads whose interpreter frames were walked", F(bpf.py_stacks)},
    {"pfr_python_samples_no_thread_total", C,
     "samples of CPython processes' threads no thread state names (native threads)",
     F(bpf.py_no_thread)},
    {"pfr_python_frames_total", C, "interpreter frames the sampler recorded", F(bpf.py_frames)},
    {"pfr_python_frames_read_total", C, "code objects read from CPython processes",
     F(py.frames_read)},
    {"pfr_python_read_failures_total", C,
     "interpreter frames that could not be read (shown as [python: unreadable])",
     F(py.read_failures)},
    {"pfr_python_code_cache_bytes", G, "bytes held by the cache of code objects",
     F(py.cache_bytes)},
    {"pfr_python_bpf_seconds_total", C,
     "sampler time of CPython processes' samples, by walk: native stack or interpreter frames",
     .labels = {"walk"},
     .series =
         PFR_METRIC_SERIES({{"native"}, F(bpf.py_native_ns)}, {{"python"}, F(bpf.py_walk_ns)}),
     .divisor = 1e9},
    {"pfr_cpu_profiles_total", C, "CPU profiles written", F(profiles)},
    {"pfr_frame_cache_bytes", G,
     "symbolized frames kept across intervals (at most a quarter of the symbol cache's bound)",
     F(frame_cache_bytes)},
};

/* requests lost in the sampler's ring and in the builder's queue: both are asked again */
static double unwind_requests_lost(const void *p)
{
    const pfr_cpu_source_stats *st = p;
    return (double)(st->bpf.uw_ask_lost + st->unwind.queue_full);
}

static double unwind_table_bytes(const void *p)
{
    const pfr_cpu_source_stats *st = p;
    return (double)st->unwind.rows * sizeof(struct pfr_unwind_row);
}

/* (the cache counts every eviction; the disk's room is one reason of them) */
static double unwind_cache_bound_evictions(const void *p)
{
    const pfr_cpu_source_stats *st = p;
    return (double)(st->unwind.cache.evictions - st->unwind.cache.room_evictions);
}

static double unwind_table_bytes_max(const void *p)
{
    const pfr_cpu_source_stats *st = p;
    return (double)st->unwind.max_rows * sizeof(struct pfr_unwind_row);
}

static const pfr_metric_row unwind_rows[] = {
    {"pfr_unwind_tables_enabled", G, "1 if user stacks are walked with unwind tables",
     F(unwind_tables)},
    {"pfr_cpu_stacks_walked_total", C,
     "user stacks by how they were walked: dwarf (at least one frame found by an unwind table) "
     "or fp (frame pointers only)",
     .labels = {"method"},
     .series = PFR_METRIC_SERIES({{"dwarf"}, F(bpf.uw_dwarf)}, {{"fp"}, F(bpf.uw_fp)})},
    {"pfr_unwind_frames_total", C, "user frames found by unwind tables", F(bpf.uw_frames)},
    {"pfr_unwind_stacks_complete_total", C,
     "user stacks walked to their outermost frame (a table marked it)", F(bpf.uw_end)},
    {"pfr_unwind_fallbacks_total", C,
     "user stacks with a frame walked by frame pointer instead of a table, by why",
     .labels = {"reason"},
     .series = PFR_METRIC_SERIES(
         {{"table_pending"}, F(bpf.uw_pending)}, {{"no_row"}, F(bpf.uw_no_row)},
         {{"mappings_busy"}, F(bpf.uw_busy)}, {{"mapping_not_cached"}, F(bpf.uw_vma_miss)})},
    {"pfr_unwind_walks_cut_total", C, "user stack walks cut short, by why", .labels = {"reason"},
     .series = PFR_METRIC_SERIES({{"bad_memory"}, F(bpf.uw_cut_read)},
                                 {{"unmapped_pc"}, F(bpf.uw_cut_map)},
                                 {{"max_depth"}, F(bpf.uw_cut_depth)})},
    {"pfr_unwind_requests_lost_total", C,
     "requests for a table dropped (notification ring or queue full), asked again",
     .get = unwind_requests_lost},
    {"pfr_unwind_files_total", C, "files the sampler asked unwind tables for, by outcome",
     .labels = {"outcome"},
     .series =
         PFR_METRIC_SERIES({{"table"}, F(unwind.tables)}, {{"no_table"}, F(unwind.no_table)},
                           {{"no_room"}, F(unwind.no_room)}, {{"bad_file"}, F(unwind.bad_files)},
                           {{"open_failed"}, F(unwind.open_failed)})},
    {"pfr_unwind_files_refused_total", C,
     "files whose unwind table was refused, by why (also counted as no_table or bad_file)",
     .labels = {"reason"}, F(unwind.refused[0]), .name_of = pfr_unwind_refusal_name, .first = 0,
     .end = PFR_UW_REFUSALS},
    {"pfr_unwind_table_files", G, "files with an unwind table loaded", F(unwind.files_with_rows)},
    {"pfr_unwind_table_bytes", G, "kernel memory used by unwind table rows",
     .get = unwind_table_bytes},
    {"pfr_unwind_table_bytes_max", G, "the cap of unwind table rows (unwind_table_bytes)",
     .get = unwind_table_bytes_max},
    {"pfr_unwind_table_evictions_total", C, "unwind tables evicted for room", F(unwind.evictions)},
    {"pfr_unwind_cache_enabled", G, "1 if built unwind tables are kept on disk (unwind_cache_dir)",
     F(unwind.cache_enabled)},
    {"pfr_unwind_cache_lookups_total", C,
     "tables looked up on disk before a build, by outcome: hit (read back, not built), miss, "
     "bad_file (failed its checks: removed, built again), no_memory (the memory budget refused the "
     "read: built if it allows the build)",
     .labels = {"outcome"},
     .series = PFR_METRIC_SERIES(
         {{"hit"}, F(unwind.cache.hits)}, {{"miss"}, F(unwind.cache.misses)},
         {{"bad_file"}, F(unwind.cache.bad_files)}, {{"no_memory"}, F(unwind.cache.no_memory)})},
    {"pfr_unwind_cache_writes_total", C,
     "built tables written to disk, by outcome: written, failed (a full disk, an unwritable "
     "directory: logged the first time), no_room (not written: the file system's free space is "
     "left to the ring, its reserve and cap, or under 5 % of it; debug log)",
     .labels = {"outcome"},
     .series = PFR_METRIC_SERIES({{"written"}, F(unwind.cache.writes)},
                                 {{"failed"}, F(unwind.cache.write_errors)},
                                 {{"no_room"}, F(unwind.cache.no_room)})},
    {"pfr_unwind_cache_evictions_total", C,
     "table files removed, by reason: bound (to stay within unwind_cache_bytes), disk_room (to "
     "leave the file system's free space to the ring)",
     .labels = {"reason"},
     .series = PFR_METRIC_SERIES({{"bound"}, .get = unwind_cache_bound_evictions},
                                 {{"disk_room"}, F(unwind.cache.room_evictions)})},
    {"pfr_unwind_cache_bytes", G, "bytes of the table files on disk", F(unwind.cache.bytes)},
    {"pfr_unwind_cache_bytes_max", G, "their bound (unwind_cache_bytes)",
     F(unwind.cache.max_bytes)},
    {"pfr_unwind_cache_files", G, "table files on disk", F(unwind.cache.files)},
    {"pfr_unwind_table_build_seconds_total", C, "time spent building and loading tables",
     F(unwind.build_ns), .divisor = 1e9},
    {"pfr_unwind_table_build_max_seconds", G, "the longest build and load of one table",
     F(unwind.build_max_ns), .divisor = 1e9},
    {"pfr_unwind_small_files_total", C,
     "files of small mappings (up to 8 MiB) whose table was asked for and handled",
     F(unwind.small_files)},
    {"pfr_unwind_small_wait_seconds_total", C,
     "time small files waited from their request to their entry in the kernel, added up",
     F(unwind.small_wait_ns), .divisor = 1e9},
    {"pfr_unwind_small_wait_max_seconds", G,
     "the longest a small file waited from its request to its entry in the kernel",
     F(unwind.small_wait_max_ns), .divisor = 1e9},
    {"pfr_unwind_builds_interleaved_total", C, "small files built while a larger build paused",
     F(unwind.interleaved)},
    {"pfr_unwind_builds_deferred_total", C,
     "small files left for after a larger build (past the small limits, or no memory for both)",
     F(unwind.deferred)},
};

static const pfr_metric_table cpu_table =
    PFR_METRIC_TABLE("CPU samples, processes and profiles", cpu_rows);
static const pfr_metric_table unwind_table = PFR_METRIC_TABLE("Unwind tables", unwind_rows);

const pfr_metric_table *const pfr_cpu_metric_tables[] = {&cpu_table, &unwind_table, NULL};

void pfr_cpu_source_stats_op(void *self, void *out)
{
    pfr_cpu_source_stats_get(self, out);
}
