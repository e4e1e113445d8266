/*
 * cpu_source: the eBPF CPU profiler as a recorder source. Owns the BPF sampler, the process
 * table and a thread that handles process notifications (snapshot of a new process's mappings
 * within milliseconds of its first sample, so short-lived processes are named); names frames
 * with the daemon's shared symbolizer (pfr_shared_sym.h), whose lock also guards its process
 * table, and is that symbolizer's keeper of processes.
 */
#ifndef PFR_RECORDER_CPU_SOURCE_H
#define PFR_RECORDER_CPU_SOURCE_H

#include "cpu_profiler.h"
#include "pfr_python.h"
#include "pfr_shared_sym.h"
#include "profile_builder.h"
#include "source.h"
#include "unwinder.h"

typedef struct pfr_cpu_source pfr_cpu_source;

/* Its settings ([recorder] keys; rows in cpu_source.c). */
typedef struct pfr_cpu_config {
    unsigned cpu_hz;             /* samples per second per CPU */
    unsigned stack_map_entries;  /* per buffer; 0 = sized at start */
    unsigned count_map_entries;  /* per buffer; 0 = sized at start */
    int64_t symbolize_budget_ns; /* per interval; 0 = half the interval, at most 5 s */
    int unwind;                  /* enum pfr_unwind_mode (cpu_profiler.h) */
    uint64_t unwind_table_bytes; /* cap of the sampler's unwind tables */
    char *unwind_cache_dir;      /* unwind tables kept on disk; NULL = auto, "off" = not kept */
    uint64_t unwind_cache_bytes; /* its bound; 0 = not kept */
    int python_frames;           /* PFR_PY_FRAMES_* */
} pfr_cpu_config;
enum { PFR_PY_FRAMES_ENABLED = 0, PFR_PY_FRAMES_DISABLED };

/* Counters kept for metrics; cumulative since start. */
typedef struct pfr_cpu_source_stats {
    pfr_cpu_counters bpf;
    bool unwind_tables;        /* user stacks walked with unwind tables */
    pfr_unwinder_stats unwind; /* their figures, when they are */
    pfr_build_stats build;     /* summed over intervals */
    pfr_py_stats py;           /* Python processes' frames (all 0 when python_frames is off) */
    pfr_sym_stats sym;
    uint64_t intervals;
    uint64_t profiles; /* profiles emitted */
    uint64_t emit_errors;
    uint64_t processes_seen; /* notifications of new processes */
    uint64_t processes_live; /* records held now */
    uint64_t processes_forgotten;
    uint64_t snapshot_failures; /* process gone before its mappings were read */
    uint64_t exiting_named;     /* processes sampled only while exiting, named by their cgroup */
    uint64_t renamed;           /* processes named again once their cgroup's metadata came */
    /* exits that carried the process's mappings (kernels with the task_vma iterator): taken as
     * its snapshot (they name more files than the one it had, if any), or not needed */
    uint64_t exit_maps_taken, exit_maps_unneeded;
    uint64_t exit_maps_walked, exit_maps_sampled; /* where the exits' mappings came from */
    /* paths of files exits mapped code from that no snapshot saw: learned, or refused (cut by
     * the sampler, or not a clean absolute path) */
    uint64_t exit_paths_learned, exit_paths_refused;
    uint64_t snapshots_deferred; /* new processes left for the drain or their exit (DEFER_MAX) */
    uint64_t snapshots;          /* mappings snapshots taken (first looks and second looks) */
    uint64_t snapshot_ns, snapshot_max_ns; /* time spent taking them (files parsed included) */
    uint64_t event_wait_max_ns;            /* longest wait of a notification for the lock */
    uint64_t frame_cache_bytes, frame_cache_hits, frame_cache_misses, frame_cache_resets;
    uint64_t cgroup_hits, cgroup_reads; /* process cgroups known by id / read from /proc */
    uint64_t cgroup_walks;              /* ... / found by walking the tree (gone processes) */
    uint64_t exe_hits, exe_reads;       /* executables found in the mappings / read from /proc */
    uint64_t opted_out;                 /* processes whose environment refuses profiling */
    uint64_t last_drain_ns, last_build_ns, last_emit_ns; /* durations of the last interval's work */
} pfr_cpu_source_stats;

/* From env (borrowed, all outlive it): cfg, sym (never NULL; the source becomes its keeper of
 * processes), identity (may be NULL) gives processes their cgroup's Coroot identity, fsguard
 * (may be NULL) keeps files on remote file systems away from the threads with deadlines
 * (pfr_fsguard.h), membudget (may be NULL) is asked before unwind tables are paid for
 * (pfr_membudget.h), disk_keep (copied, may be NULL) is the free space the unwind
 * cache's writes leave to the ring (pfr_disk_keep.h). */
int pfr_cpu_source_new(const pfr_source_env *env, pfr_cpu_source **out, char *err, size_t errlen);
pfr_source pfr_cpu_source_as_source(pfr_cpu_source *cs);
void pfr_cpu_source_stats_get(pfr_cpu_source *cs, pfr_cpu_source_stats *st);

/* CPUs the sampler is attached to. */
int pfr_cpu_source_ncpus(const pfr_cpu_source *cs);

/* BPF map sizes: the configured ones, or (when 0) sized for one interval at the sampling rate
 * on ncpus CPUs: CPUs x rate x interval / 2 stacks rounded up to a power of two in
 * [8192, 65536], twice as many counts. */
void pfr_cpu_config_map_sizes(const pfr_cpu_config *cc, int64_t interval_ns, unsigned ncpus,
                              unsigned *stacks, unsigned *counts);

/* Where unwind tables are kept on disk, into buf: the setting; when it is auto (NULL), under
 * the unit's cache directory (cache_directory, systemd's $CACHE_DIRECTORY: its first entry) in
 * "unwind", else in "unwind-cache" beside the ring (store_path). false: not kept (off, a bound
 * of 0, a path too long). */
bool pfr_cpu_config_unwind_cache_dir(const pfr_cpu_config *cc, const char *store_path,
                                     const char *cache_directory, char *buf, size_t len);

/* Its row of the source table: required. Its config struct is a pfr_cpu_config. */
extern const pfr_source_desc pfr_cpu_source_desc;

#endif
