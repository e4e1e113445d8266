/*
 * cpu_profiler: loads the BPF CPU sampler, attaches it to a cpu-clock perf event on every online
 * CPU plus the exec/exit tracepoints, delivers process notifications, and drains the sample
 * buffers each interval.
 *
 * Threads: pfr_cpu_profiler_poll_events() may run in one thread while another calls
 * pfr_cpu_profiler_drain(), _forget() and _counters(); each function on its own is not
 * reentrant.
 */
#ifndef PFR_RECORDER_CPU_PROFILER_H
#define PFR_RECORDER_CPU_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf_diag.h"
#include "cpu_profile.h"

struct pfr_unwinder_stats; /* unwind/unwinder.h */
struct pfr_unwind_refused; /* unwind/unwinder.h */
struct pfr_unwind_built;

typedef struct pfr_cpu_profiler pfr_cpu_profiler;

/* How user stacks are walked. */
enum pfr_unwind_mode {
    PFR_UNWIND_AUTO = 0, /* unwind tables where a file has them, frame pointers elsewhere; frame
                          * pointers only on a kernel without bpf_find_vma (before 5.17) */
    PFR_UNWIND_FP,       /* frame pointers only */
    PFR_UNWIND_DWARF,    /* as auto, Go programs' .debug_frame included; refuses to start on a
                          * kernel that cannot walk with tables */
};

typedef struct pfr_cpu_profiler_opts {
    unsigned hz;                /* samples per second per CPU */
    unsigned stack_map_entries; /* distinct stacks, per buffer; 0 = 8192 */
    unsigned count_map_entries; /* per buffer; 0 = 16384 */
    int unwind;                 /* enum pfr_unwind_mode */
    uint32_t unwind_rows;       /* cap of the unwind tables, rows; 0 = PFR_UNWIND_ROWS_DEFAULT */
    /* a file whose unwind table was refused (unwinder.h), on the unwinder's thread; NULL: none */
    void (*unwind_refused)(void *ctx, const struct pfr_unwind_refused *r);
    /* a file whose unwind table was loaded (unwinder.h), on the unwinder's thread; NULL: none */
    void (*unwind_built)(void *ctx, const struct pfr_unwind_built *b);
    /* unwind tables kept on disk there (unwinder.h), within unwind_cache_bytes; NULL: not */
    const char *unwind_cache_dir;
    uint64_t unwind_cache_bytes;
    const struct pfr_disk_keep *unwind_cache_keep; /* the free space it leaves to the ring */
    /* the cache on disk could not be opened, or its first write failed (unwinder.h) */
    void (*unwind_cache_error)(void *ctx, const char *why);
    void *unwind_refused_ctx;        /* the callbacks' */
    struct pfr_fsguard *fsguard;     /* the unwinder's guard of remote files; NULL: none */
    struct pfr_membudget *membudget; /* the unwinder's memory budget; NULL: none */
} pfr_cpu_profiler_opts;

/* Cumulative counters since open. */
typedef struct pfr_cpu_counters {
    uint64_t samples; /* samples taken, idle excluded */
    uint64_t idle;    /* samples that hit an idle CPU */
    uint64_t kstack_errors, ustack_errors;
    uint64_t stack_map_full; /* stacks not stored (sample kept, stack shown as an error frame) */
    uint64_t count_map_full; /* samples lost: count map full */
    uint64_t events_lost;    /* process notifications dropped (ring buffer full) */
    uint64_t stacks_new;     /* stacks added to a stack map (the others were there) */
    uint64_t exec_no_ustack; /* samples inside execve, kept without their user stack */
    uint64_t prog_misses;    /* samples the kernel skipped because a BPF program was running */
    uint64_t prog_run_ns, prog_runs; /* BPF run time, when kernel.bpf_stats_enabled = 1 */
    uint64_t drains;
    uint64_t stack_reads;      /* stack map entries read (once per stack, not per drain) */
    uint64_t stack_map_resets; /* stack maps emptied after a drain, having filled up */
    /* user stacks with unwind tables on (see enum pfr_counter's PFR_CNT_UW_*) */
    uint64_t uw_dwarf, uw_fp, uw_frames, uw_end, uw_pending, uw_no_row, uw_busy, uw_vma_miss;
    uint64_t uw_cut_read, uw_cut_map, uw_cut_depth, uw_ask_lost;
    /* Python processes' samples (see enum pfr_counter's PFR_CNT_PY_*) */
    uint64_t py_samples, py_stacks, py_frames, py_no_thread, py_cut_read, py_cut_depth;
    uint64_t py_native_ns, py_walk_ns;
} pfr_cpu_counters;

/* One (process, kernel stack, user stack) count from a drain. */
typedef struct pfr_cpu_sample {
    uint32_t tgid;
    uint64_t kstack, ustack; /* 0 = none, PFR_STACK_ERROR = lost, else an id in the drain
                              * (see pfr_count_key) */
    uint64_t count;
} pfr_cpu_sample;

/* The result of a drain; owned by the profiler, valid until the next drain or close. */
typedef struct pfr_cpu_drain {
    const pfr_cpu_sample *samples;
    size_t nsamples;
    uint64_t total; /* sum of counts */
} pfr_cpu_drain;

/* Called from pfr_cpu_profiler_poll_events() for each notification. An exit with PFR_EVF_MAPS in
 * its flags is the head of a struct pfr_exit_maps whose nmaps entries are checked; a PFR_EV_PATH
 * is the head of a struct pfr_path_event whose nparts components are NUL-terminated. */
typedef void (*pfr_cpu_event_cb)(const struct pfr_event *ev, void *ctx);

/* Load and attach. On failure returns a negative errno and a full sentence in err (missing
 * capability, no BTF, lockdown, verifier). */
int pfr_cpu_profiler_open(const pfr_cpu_profiler_opts *opts, pfr_cpu_event_cb cb, void *cb_ctx,
                          pfr_cpu_profiler **out, char *err, size_t errlen);
void pfr_cpu_profiler_close(pfr_cpu_profiler *cp);

/* Number of CPUs the sampler is attached to. */
int pfr_cpu_profiler_ncpus(const pfr_cpu_profiler *cp);

/* A descriptor that polls readable while notifications wait, and a call that dispatches them
 * without waiting (for a caller's own event loop). Returns how many, or -errno. */
int pfr_cpu_profiler_event_fd(const pfr_cpu_profiler *cp);
int pfr_cpu_profiler_consume_events(pfr_cpu_profiler *cp);

/* Wait up to timeout_ms for notifications and dispatch them, those queued without a wake-up
 * (exits) included. Returns how many, or -errno. */
int pfr_cpu_profiler_poll_events(pfr_cpu_profiler *cp, int timeout_ms);

/* Positions (bytes) of the notification ring buffer: all notifications produced up to a moment
 * are handled once consumed >= the produced position read at that moment. */
uint64_t pfr_cpu_profiler_events_produced(const pfr_cpu_profiler *cp);
uint64_t pfr_cpu_profiler_events_consumed(const pfr_cpu_profiler *cp);

/* Switch buffers, wait until no CPU still writes the old one, read and empty it. */
int pfr_cpu_profiler_drain(pfr_cpu_profiler *cp, pfr_cpu_drain *out);

/* Frames of stack id from the last drain (leaf first); NULL if unknown. */
const uint64_t *pfr_cpu_profiler_stack(const pfr_cpu_profiler *cp, uint64_t id, size_t *n);

/* Tell the sampler that user space can name this file (kernel dev_t, inode) from an exit's
 * mapping list: new processes running it no longer wake the notification reader (their
 * notifications wait for the next wake-up or the drain), and exits mapping it send no
 * PFR_EV_PATH for it. 0 or -errno (-E2BIG once PFR_NAMED_FILES_MAX are set).
 * pfr_cpu_profiler_unname_files() undoes them all. */
int pfr_cpu_profiler_name_file(pfr_cpu_profiler *cp, uint32_t dev, uint64_t ino);
void pfr_cpu_profiler_unname_files(pfr_cpu_profiler *cp);

/* Walk the interpreter frames of Python process tgid as p says (cpu_profile.h): 0 or -errno
 * (-E2BIG once the map is full). pfr_cpu_profiler_py_del() stops it. */
int pfr_cpu_profiler_py_set(pfr_cpu_profiler *cp, uint32_t tgid, const struct pfr_py_proc *p);
void pfr_cpu_profiler_py_del(pfr_cpu_profiler *cp, uint32_t tgid);

/* What the sampler kept of tgid, a process it first saw exiting (never announced): 0, or
 * -ENOENT. */
int pfr_cpu_profiler_exiting(pfr_cpu_profiler *cp, uint32_t tgid, struct pfr_exiting *out);

/* Forget tgid in the kernel so its next sample notifies again. */
void pfr_cpu_profiler_forget(pfr_cpu_profiler *cp, uint32_t tgid);

void pfr_cpu_profiler_counters(pfr_cpu_profiler *cp, pfr_cpu_counters *out);

/* Whether user stacks are walked with unwind tables (mode auto on a kernel that cannot is
 * frame pointers only); the tables' figures, when they are. Returns false and zeroes out
 * otherwise. */
bool pfr_cpu_profiler_unwind_stats(pfr_cpu_profiler *cp, struct pfr_unwinder_stats *out);

/* Wait until the unwind tables asked for so far are built (tests). */
void pfr_cpu_profiler_unwind_sync(pfr_cpu_profiler *cp);

/* Parse a CPU list ("0-3,5") into a bitmap of up to max CPUs; returns the count or -EINVAL. */
int pfr_parse_cpu_list(const char *text, unsigned char *set, int max);

#endif
