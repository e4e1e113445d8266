/*
 * scrape_local: targets on this host found without configuration.
 *
 * A scan walks <proc_root>/[0-9]*, and for each process whose executable is a Go program that
 * links net/http/pprof (scrape_elf.h; the verdict is cached per executable: device, inode, size,
 * mtime), lists the TCP ports it listens on (scrape_procnet.h: /proc/PID/net/tcp{,6}, the view of
 * the process's own network namespace). A process in another network namespace (a container)
 * gets a descriptor of its namespace (/proc/PID/ns/net, kept while the process is known) through
 * which its probes and its target connect (scrape_netns.h); when entering namespaces is off,
 * not permitted or broken, such processes are skipped. Each (process, port) is probed once at
 * /debug/pprof/; the first port whose probe answers with Go's pprof index page becomes the
 * process's target. A process that restarts (a new start time under the same pid) is a new process.
 * Nothing is sent to a process that is not a Go program linking net/http/pprof.
 *
 * The caller does the probing (with its HTTP client) between pfr_scrape_local_scan and
 * pfr_scrape_local_wants.
 */
#ifndef PFR_SCRAPE_LOCAL_H
#define PFR_SCRAPE_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exe_scan.h"
#include "scrape_internal.h"

struct sc_local;
struct sc_netns;

struct sc_local_probe {
    char url[128];     /* http://host:port/debug/pprof/ */
    int netns_fd;      /* connect from this network namespace; -1 = our own */
    size_t proc, port; /* private */
};

struct sc_local_scan_stats {
    uint64_t processes;     /* Go processes linking net/http/pprof */
    uint64_t other_netns;   /* of which in another network namespace */
    uint64_t netns_skipped; /* of those, skipped: off, not permitted, or no namespace fd */
    uint64_t bad_binaries;  /* executables that failed to parse */
    uint64_t opted_out;     /* processes found refusing profiling (first seen): never probed */
};

/* ns (borrowed, may be NULL = skip other namespaces) says whether namespaces may be entered. */
struct pfr_fsguard;
/* fsguard (borrowed, may be NULL): executables on remote file systems are read as its copies. */
int pfr_scrape_local_new(const char *proc_root, struct pfr_fsguard *fsguard, struct sc_netns *ns,
                         struct sc_local **out);
void pfr_scrape_local_free(struct sc_local *l);

/* One look at the processes exes lists (a /proc scan). allow (may be NULL) says whether a
 * process may be probed. Returns 0 or -ENOMEM. */
int pfr_scrape_local_scan(struct sc_local *l, const pfr_exe_list *exes,
                          bool (*allow)(void *ctx, pid_t pid), void *ctx,
                          struct sc_local_scan_stats *st);

/* The probes the last scan calls for (owned by l, valid until the next scan). */
size_t pfr_scrape_local_probes(struct sc_local *l, const struct sc_local_probe **out);
/* The answer to a probe: body is what /debug/pprof/ returned with status 200 (NULL if the probe
 * failed). */
void pfr_scrape_local_probe_result(struct sc_local *l, const struct sc_local_probe *p,
                                   const unsigned char *body, size_t len);

/* Append a want for every process with a confirmed pprof port. service_for_pid (may be NULL)
 * names it and gives its container.id label; the default is the executable's base name. A
 * container id Coroot places outside Kubernetes also gives the namespace and pod labels of its
 * Coroot instance on node node_name (may be NULL; pfr_identity_coroot_instance). A process
 * in another network namespace gets want.netns = the namespace's inode (and that in its key). */
int pfr_scrape_local_wants(struct sc_local *l, const char *node_name,
                           int (*service_for_pid)(void *, pid_t, char *, size_t, char *, size_t),
                           void *ctx, struct sc_wantlist *out);

/* Does this body look like Go's /debug/pprof/ index page? */
bool pfr_scrape_local_is_pprof_index(const unsigned char *body, size_t len);

#endif
