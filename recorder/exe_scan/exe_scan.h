/*
 * exe_scan: the host's processes and the identity of their executables (stat of
 * /proc/PID/exe), from one /proc scan shared by the recorder's sources that look for programs
 * (the Go heap profiler, pprof discovery). Each of them scanned /proc once a minute on its own;
 * the stat of every process's executable was most of their cost.
 *
 * Thread-safe: the sources run on different threads. A caller gets a copy of the latest scan,
 * made anew when it is older than the age the caller accepts.
 */
#ifndef PFR_EXE_SCAN_H
#define PFR_EXE_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct pfr_exe {
    pid_t pid;
    struct stat st; /* of /proc/PID/exe's target */
} pfr_exe;

typedef struct pfr_exe_list {
    pfr_exe *v; /* by /proc's order; processes without an executable (kernel threads) left out */
    size_t n;
} pfr_exe_list;

typedef struct pfr_exe_scan pfr_exe_scan;

/* proc_root: NULL = "/proc". Returns 0 or -ENOMEM. */
int pfr_exe_scan_new(const char *proc_root, pfr_exe_scan **out);
void pfr_exe_scan_free(pfr_exe_scan *s);

/* A copy of the latest scan into *out (free with pfr_exe_list_free), scanning again first if
 * that one is older than max_age_ns (0: always). Returns 0, or a negative errno when /proc
 * cannot be read (*out then empty). */
int pfr_exe_scan_get(pfr_exe_scan *s, int64_t max_age_ns, pfr_exe_list *out);
void pfr_exe_list_free(pfr_exe_list *l);

/* Scans made so far (the others were served from a recent one). */
uint64_t pfr_exe_scan_count(pfr_exe_scan *s);

#endif
