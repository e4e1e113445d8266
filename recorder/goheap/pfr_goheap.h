/*
 * pfr_goheap: memory profiles of Go processes, read from the Go runtime from outside.
 *
 * Every collection the collector looks at each process (all of <proc_root>, or a given list of
 * pids), recognises Go executables by their .go.buildinfo section, finds runtime.mbuckets and
 * runtime.MemProfileRate by streaming the executable's .symtab (results cached per executable),
 * reads MemProfileRate and walks the runtime's memory-profile bucket list through process memory
 * (goheap_walk.h), and hands the caller one pfr_profile per process with four sample types:
 *
 *   go_runtime:heap_alloc_objects:count  go_runtime:heap_alloc_space:bytes   (this interval)
 *   go_runtime:heap_inuse_objects:count  go_runtime:heap_inuse_space:bytes   (now)
 *
 * scaled to estimates of the true totals as Go's runtime/pprof scales them (goheap_delta.h).
 * Frames are named by the caller's resolver (pfr_goheap_sym.h adapts the recorder's symbolizer);
 * results are memoised per executable, and leading runtime.* frames (the allocator itself) are
 * hidden as Go's pprof hides them.
 *
 * Modes: DISABLED does nothing; ENABLED reads only processes whose MemProfileRate is already
 * non-zero (those that import runtime/pprof or net/http/pprof, or set a rate); FORCE also writes
 * the Go default rate (524288) into processes where the linker left it 0 and reports each pid it
 * changed (an event), after which their buckets appear with the next allocations.
 *
 * Errors about one process (a stripped executable, a failed read because it exited or exec'ed,
 * a loop or an absurd stack depth in its memory, a deadline) are counted in the stats and
 * reported through the event callback; they never stop the collection of other processes.
 *
 * Thread-safety: a collector is used by one thread at a time.
 */
#ifndef PFR_GOHEAP_H
#define PFR_GOHEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "goheap_mem.h"
#include "pfr_profile.h"
#include "pfr_refusal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFR_GOHEAP_TYPE_ALLOC_OBJECTS "go_runtime:heap_alloc_objects:count"
#define PFR_GOHEAP_TYPE_ALLOC_SPACE   "go_runtime:heap_alloc_space:bytes"
#define PFR_GOHEAP_TYPE_INUSE_OBJECTS "go_runtime:heap_inuse_objects:count"
#define PFR_GOHEAP_TYPE_INUSE_SPACE   "go_runtime:heap_inuse_space:bytes"
#define PFR_GOHEAP_DEFAULT_RATE       524288

typedef struct pfr_goheap pfr_goheap;

enum pfr_goheap_mode { PFR_GOHEAP_DISABLED = 0, PFR_GOHEAP_ENABLED, PFR_GOHEAP_FORCE };
/* "disabled" | "enabled" | "force" (for --go-heap-profiler / GO_HEAP_PROFILER); -EINVAL else. */
int pfr_goheap_parse_mode(const char *s, enum pfr_goheap_mode *out);
const char *pfr_goheap_mode_name(enum pfr_goheap_mode m);

/* One frame of a resolved address, innermost inlined frame first. */
typedef struct pfr_goheap_frame {
    const char *function; /* never NULL */
    const char *file;     /* "" when unknown */
    int64_t line;         /* 0 when unknown */
} pfr_goheap_frame;

/* Names addresses. Strings returned need only live until the next call. */
typedef struct pfr_goheap_resolver {
    void *ctx;
    /* Called once per collection of pid before its first resolve() (snapshot mappings). May be
     * NULL. A negative return means "cannot resolve this process now" (addresses stay raw). */
    int (*begin)(void *ctx, pid_t pid);
    /* Resolve the instruction at addr (a return address minus one) of pid: up to cap frames,
     * returns how many (>= 1) or a negative errno. */
    int (*resolve)(void *ctx, pid_t pid, uint64_t addr, pfr_goheap_frame *out, size_t cap);
} pfr_goheap_resolver;

typedef struct pfr_goheap_opts {
    enum pfr_goheap_mode mode;
    const char *proc_root;        /* NULL = "/proc" */
    int64_t interval_ns;          /* duration given to a process's first profile; 0 = 60 s */
    int64_t force_rate;           /* written in FORCE mode; 0 = 524288 */
    size_t max_buckets;           /* per process; 0 = 100000 */
    uint32_t max_nstk;            /* 0 = 1024 */
    int64_t max_walk_ns;          /* per process walk; 0 = 200 ms */
    size_t max_binaries;          /* executables cached; 0 = 1024 */
    size_t max_frames;            /* resolved addresses cached per executable; 0 = 262144 */
    pfr_goheap_resolver resolver; /* .resolve NULL: frames keep raw addresses only */
    /* The /proc scan shared with the daemon's other sources (borrowed), and how old a scan may
     * be to serve a collection; NULL: a scan of its own each collection. */
    struct pfr_exe_scan *exes;
    int64_t exes_max_age_ns;
    /* Testing hook: called with each process's reader before it is used; may wrap it. */
    void (*mem_hook)(void *ctx, pid_t pid, pfr_goheap_mem *mem);
    void *mem_hook_ctx;
    /* Executables on remote file systems are read only as copies its workers make
     * (pfr_fsguard.h); NULL: opened directly. Borrowed. */
    struct pfr_fsguard *fsguard;
    /* Heap walks are skipped while the recorder is over its memory budget (counted there);
     * NULL: no budget. Borrowed. */
    struct pfr_membudget *membudget;
} pfr_goheap_opts;

/* What the daemon needs to name and label a profile. Strings valid during the callback. */
typedef struct pfr_goheap_proc {
    pid_t pid;
    const char *exe;                    /* /proc/PID/exe target, as the kernel shows it */
    const char *go_version;             /* "go1.22.12", or "" */
    uint64_t start_time;                /* /proc/PID/stat starttime (clock ticks since boot) */
    int64_t mem_profile_rate;           /* as read this collection */
    size_t buckets;                     /* buckets walked */
    bool baseline;                      /* first look at an older process: alloc values are 0 */
    int64_t alloc_objects_total;        /* scaled, since the process started (for counters) */
    int64_t alloc_bytes_total;          /* scaled, since the process started */
    int64_t inuse_objects, inuse_bytes; /* scaled, now */
    int64_t interval_alloc_objects, interval_alloc_bytes; /* what this profile's alloc_* sum to */
} pfr_goheap_proc;

enum pfr_goheap_event_kind {
    PFR_GOHEAP_EV_STRIPPED = 1, /* a Go executable without .symtab (once per executable) */
    PFR_GOHEAP_EV_BAD_BINARY,   /* an executable that could not be parsed (once per executable) */
    PFR_GOHEAP_EV_RATE_FORCED,  /* FORCE mode wrote the rate into this pid */
    PFR_GOHEAP_EV_FORCE_FAILED, /* ... and could not */
    PFR_GOHEAP_EV_WALK_ERROR,   /* reading this pid's buckets failed; no profile this time */
    PFR_GOHEAP_EV_RESTARTED,    /* this pid is a new process or exec'ed; its state was reset */
};

typedef struct pfr_goheap_event {
    enum pfr_goheap_event_kind kind;
    pid_t pid;
    const char *exe;
    int err;         /* negative errno (0 for informational events) */
    const char *msg; /* human-readable reason, "" if none */
} pfr_goheap_event;

typedef struct pfr_goheap_sink {
    void *ctx;
    /* A profile for info->pid. Ownership of profile passes to the callee (pfr_profile_free). */
    void (*profile)(void *ctx, const pfr_goheap_proc *info, pfr_profile *profile);
    /* Something worth a log line; may be NULL. */
    void (*event)(void *ctx, const pfr_goheap_event *ev);
} pfr_goheap_sink;

typedef struct pfr_goheap_stats {
    uint64_t collections;       /* pfr_goheap_collect calls */
    uint64_t processes_checked; /* process visits */
    uint64_t go_processes;      /* visits of Go processes with symbols */
    uint64_t opted_out;         /* Go processes (and execs) refusing profiling: never read */
    uint64_t profiles;          /* profiles handed to the sink */
    uint64_t not_sampling;      /* visits skipped because MemProfileRate was 0 (ENABLED mode) */
    uint64_t rates_forced;      /* FORCE mode writes */
    uint64_t force_errors;
    uint64_t stripped_binaries; /* executables skipped for lack of symbols */
    uint64_t bad_binaries;      /* executables that failed to parse */
    uint64_t binaries_parsed;
    uint64_t walk_errors;  /* all failed walks, of which: */
    uint64_t read_errors;  /*   a read failed: process exited, exec'ed or remapped */
    uint64_t loop_errors;  /*   a bucket seen twice */
    uint64_t limit_errors; /*   too many buckets or stack words */
    uint64_t bad_buckets;  /*   not a memory bucket, absurd depth, bad pointer */
    uint64_t timeouts;     /*   the walk deadline passed */
    uint64_t restarts;     /* pids whose process changed under the same number */
    uint64_t buckets_read;
    uint64_t mem_reads; /* system calls spent reading process memory */
    uint64_t mem_bytes;
    uint64_t resolver_calls;               /* addresses resolved (memo misses) */
    uint64_t collect_ns;                   /* wall time spent in pfr_goheap_collect */
    uint64_t files_refused[PFR_NREFUSALS]; /* executables refused, by reason (pfr_refusal.h) */
} pfr_goheap_stats;

int pfr_goheap_new(const pfr_goheap_opts *opts, pfr_goheap **out);
void pfr_goheap_free(pfr_goheap *c);

/* One collection. now_ns is the wall-clock time (CLOCK_REALTIME ns) stamped on the profiles.
 * pids == NULL visits every process under proc_root (and forgets pids that are gone);
 * otherwise only the npids given. Returns 0, or a negative errno if nothing could be done
 * (proc_root unreadable, out of memory); per-process problems are events and counters. */
int pfr_goheap_collect(pfr_goheap *c, int64_t now_ns, const pid_t *pids, size_t npids,
                       const pfr_goheap_sink *sink);

/* Forget pid's state (the daemon saw it exit). */
void pfr_goheap_forget(pfr_goheap *c, pid_t pid);

void pfr_goheap_get_stats(const pfr_goheap *c, pfr_goheap_stats *st);

#ifdef __cplusplus
}
#endif
#endif
