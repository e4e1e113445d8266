/*
 * The triggers' parts, shared between their files (pfr_trig_ prefix): the coalescer of pending
 * requests (trig_coalesce.c), PSI and memory.events parsing and the sustained-level tracker
 * (trig_psi.c), the cgroups watched (trig_cgroups.c), the BPF loader (trig_bpf.c).
 */
#ifndef PFR_TRIG_INTERNAL_H
#define PFR_TRIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pfr_triggers.h"

/* ---- coalescer (pure; not thread-safe: triggers.c holds a lock around it) ---- */

typedef struct pfr_trig_coalescer pfr_trig_coalescer;

/* max_window_ns: a pending request never grows longer than this (it is closed and a new one
 * starts after it); max_per_hour: new requests per service in any hour (0 = none). */
int pfr_trig_coalescer_new(int64_t max_window_ns, uint32_t max_per_hour, pfr_trig_coalescer **out);
void pfr_trig_coalescer_free(pfr_trig_coalescer *c);

/* Offer a request at now_ns (wall clock). Returns an enum pfr_trig_offer, or -ENOMEM. */
int pfr_trig_coalescer_offer(pfr_trig_coalescer *c, const pfr_pin_request *r, int64_t now_ns);

/* Stretch the service's pending request over r's window (a condition that lasts), if it may
 * grow so far. Returns PFR_TRIG_EXTENDED, or -ENOENT (nothing pending, or too long): nothing
 * new is started. */
int pfr_trig_coalescer_extend(pfr_trig_coalescer *c, const pfr_pin_request *r);

/* Take one pending request whose window ended at or before now_ns (INT64_MAX: any) into *out.
 * Returns true when one was taken. */
bool pfr_trig_coalescer_take_due(pfr_trig_coalescer *c, int64_t now_ns, pfr_pin_request *out);

/* The earliest window end pending, INT64_MAX when none. */
int64_t pfr_trig_coalescer_next_due(const pfr_trig_coalescer *c);

/* ---- PSI ---- */

typedef struct pfr_psi {
    double some_avg10, some_avg60, some_avg300;
    uint64_t some_total; /* microseconds */
} pfr_psi;

/* Parse the text of a pressure file (/proc/pressure/cpu, a cgroup's memory.pressure): its
 * "some" line. Returns 0 or -EINVAL. */
int pfr_trig_psi_parse(const char *text, size_t len, pfr_psi *out);

/* The "high" count of a cgroup v2 memory.events text. Returns 0 or -EINVAL (no such line). */
int pfr_trig_memory_events_high(const char *text, size_t len, uint64_t *high);

/* A level held above a threshold for a while: one episode fires once, then extends while it
 * lasts, and re-arms only once the level dropped below the threshold and rearm_ns passed
 * since it fired. */
typedef struct pfr_trig_sustain {
    int64_t above_since;  /* 0: below */
    bool fired;           /* this episode fired */
    int64_t last_fire_ns; /* 0: never */
} pfr_trig_sustain;

enum pfr_trig_level { PFR_TRIG_QUIET = 0, PFR_TRIG_FIRE, PFR_TRIG_HOLD };

/* Feed one reading at now_ns (monotonic): FIRE when it has been at or above threshold for
 * for_ns (and rearm_ns passed since the last FIRE), HOLD while a fired episode lasts, QUIET
 * otherwise. */
enum pfr_trig_level pfr_trig_sustain_update(pfr_trig_sustain *s, double level, double threshold,
                                            int64_t for_ns, int64_t rearm_ns, int64_t now_ns);

/* ---- the BPF program (OOM victims, deaths by fatal signal) ---- */

typedef struct pfr_trig_bpf pfr_trig_bpf;

/* A process the kernel told about: kind PFR_PIN_OOM_KILL or PFR_PIN_FATAL_SIGNAL. */
typedef struct pfr_trig_death {
    enum pfr_pin_kind kind;
    int32_t tgid;
    int signal; /* FATAL_SIGNAL: the signal */
    bool core;  /* ... and it dumped core */
    char comm[PFR_PIN_COMM_MAX];
    char cgroup[4096]; /* v2 path, "/" for the root */
} pfr_trig_death;

typedef void (*pfr_trig_death_fn)(void *ctx, const pfr_trig_death *d);

/* Load and attach the programs the flags ask for. Returns 0 or a negative errno with a reason
 * in err. */
int pfr_trig_bpf_new(bool oom, bool signals, pfr_trig_death_fn fn, void *ctx, pfr_trig_bpf **out,
                     char *err, size_t errlen);
void pfr_trig_bpf_free(pfr_trig_bpf *b);
/* The descriptor to poll for events. */
int pfr_trig_bpf_fd(pfr_trig_bpf *b);
/* Hand the events waiting to fn. Returns how many, or a negative errno. */
int pfr_trig_bpf_consume(pfr_trig_bpf *b);
uint64_t pfr_trig_bpf_lost(pfr_trig_bpf *b);

/* ---- cgroups ---- */

/* The cgroup v2 mount point (from mountinfo_path, e.g. "/proc/self/mountinfo") into out.
 * Returns 0 or -ENOENT. */
int pfr_trig_cgroup2_root(const char *mountinfo_path, char *out, size_t outlen);

/* A pressure or events file kept open between readings: procfs and cgroupfs render such a file
 * again for a read at offset 0, so a reading every few seconds costs one syscall, not three. */
typedef struct pfr_trig_file {
    bool open;
    int fd;
} pfr_trig_file;

/* How many files may be kept open at once (a share of the descriptors the process may have). */
typedef struct pfr_trig_fds {
    size_t open, max;
} pfr_trig_fds;

/* max from the soft RLIMIT_NOFILE (an eighth of it, at most 512). */
void pfr_trig_fds_init(pfr_trig_fds *fds);

/* Read root + path + "/" + name into buf (NUL-terminated) through f: its kept descriptor when it
 * has one (opened again once when a read through it fails), else opened now and kept while
 * fds allows. Returns the length or a negative errno (f then closed). */
ssize_t pfr_trig_file_read(pfr_trig_file *f, pfr_trig_fds *fds, const char *root, const char *path,
                           const char *name, char *buf, size_t cap);
void pfr_trig_file_close(pfr_trig_file *f, pfr_trig_fds *fds);

/* A cgroup holding processes, whose pressure is watched; its state survives rescans. */
typedef struct pfr_trig_cgroup {
    uint64_t ino; /* its directory's inode: the cgroup id */
    char *path;   /* below the root: "/system.slice/nginx.service" */
    pfr_trig_sustain cpu, mem;
    uint64_t high;        /* memory.events "high", as last read */
    bool high_known;      /* ... read at least once */
    int64_t last_heap_ns; /* monotonic time of its last heap request, 0 = none */
    bool found;           /* seen by the scan in progress */
    pfr_trig_file cpu_file, mem_file, events_file; /* cpu.pressure, memory.pressure, .events */
} pfr_trig_cgroup;

typedef struct pfr_trig_cgroups {
    char root[4096];
    pfr_trig_cgroup *v;
    size_t n, cap;
    pfr_trig_fds fds; /* the files kept open, the host's pressure files' too */
} pfr_trig_cgroups;

/* Find the cgroups under root that hold processes (at most max_cgroups, the root itself not
 * included), keeping the state of those seen before (the files of those gone are closed).
 * Returns 0 or a negative errno. */
int pfr_trig_cgroups_scan(pfr_trig_cgroups *c, size_t max_cgroups);
void pfr_trig_cgroups_free(pfr_trig_cgroups *c);

/* Read a file below the root ("/x/cpu.pressure") into buf (NUL-terminated); its length or a
 * negative errno. */
ssize_t pfr_trig_read_file(const char *root, const char *path, const char *file, char *buf,
                           size_t cap);

/* Up to max pids of the cgroup's cgroup.procs. Returns how many (0 when none or unreadable). */
size_t pfr_trig_cgroup_pids(const char *root, const char *path, int32_t *pids, size_t max);

#endif
