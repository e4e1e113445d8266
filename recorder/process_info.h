/*
 * process_info: what the recorder knows about each sampled process (name, service, container),
 * and the bookkeeping that forgets exited processes after their samples were drained, so memory
 * stays bounded however many short-lived processes come and go.
 */
#ifndef PFR_RECORDER_PROCESS_INFO_H
#define PFR_RECORDER_PROCESS_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service.h"
#include "pfr_map.h"

/* Coroot service names: "/k8s/<namespace>/<owner>" and longer ids fit */
#define PFR_SERVICE_MAX 400

typedef struct pfr_proc {
    uint32_t tgid;
    uint64_t start_time; /* boot-time ns of the group leader; tells tgid reuse apart */
    char comm[16];
    char service[PFR_SERVICE_MAX];
    char container_id[PFR_CONTAINER_ID_MAX + 1];
    char *exe;    /* owned; NULL if unreadable */
    char *cgroup; /* owned; NULL if unreadable */
    bool kthread;
    bool exited;
    bool naming_pending; /* named before its cgroup's metadata was had: name again */
    /* its environment refuses profiling (COROOT_EBPF_PROFILING or PFR_PROFILING containing
     * "disabled"), read when it was first seen and at each exec: no source profiles it */
    bool opted_out;
    uint64_t exited_gen;  /* drain generation when the exit was seen */
    uint64_t sampled_gen; /* last drain generation with samples */
} pfr_proc;

typedef struct pfr_proc_table {
    pfr_map by_tgid; /* tgid -> pfr_proc * */
    char *proc_root; /* "/proc" */
    /* cgroup paths by cgroup v2 id (char *, owned): the processes of a service share a cgroup,
     * so only the first of them has its /proc/PID/cgroup read, a read that walks every
     * hierarchy with interrupts off and contends with forks. An id is cached only when it
     * decides the path (the node agent's rule took the v2 path, or there is no v1 hierarchy)
     * and once the directory under cgroup_root is seen to carry it. */
    pfr_map cgroups;
    char *cgroup_root;             /* where cgroup v2 is mounted, or NULL: no caching */
    struct pfr_identity *identity; /* borrowed; NULL = identities from cgroup paths alone */
    size_t naming_pending;         /* records with naming_pending */
    uint64_t created, forgotten;
    uint64_t cgroup_hits, cgroup_reads; /* processes named from the cache / from /proc */
    uint64_t cgroup_walks;        /* cgroups of gone processes found by walking the cgroup tree */
    uint64_t exe_hits, exe_reads; /* executables known from the hint / read from /proc */
    uint64_t opted_out;           /* processes (and execs) found refusing profiling */
} pfr_proc_table;

/* What a kernel notification already says about a process, so /proc need not be asked. */
typedef struct pfr_proc_hint {
    const char *comm;   /* the group leader's comm when it was sent; NULL or "": ask /proc */
    uint64_t cgroup_id; /* its cgroup v2 id, 0 if unknown */
    const char *exe;    /* its executable's path (from its mappings); NULL: ask /proc */
} pfr_proc_hint;

int pfr_proc_table_init(pfr_proc_table *t, const char *proc_root);
void pfr_proc_table_free(pfr_proc_table *t);
size_t pfr_proc_table_size(const pfr_proc_table *t);

pfr_proc *pfr_proc_table_get(const pfr_proc_table *t, uint32_t tgid);

/* Create or reset the record of tgid from what the kernel told (comm, kthread) and what /proc
 * says now (exe, cgroup); computes its service with rules. Returns NULL on allocation failure. */
pfr_proc *pfr_proc_table_learn(pfr_proc_table *t, uint32_t tgid, uint64_t start_time,
                               const char *comm, bool kthread, const pfr_service_rules *rules);

/* Re-read exe, cgroup and comm (comm: /proc's, else the one given) and recompute the service
 * (after the rules changed; its consent is not read again). */
void pfr_proc_refresh(pfr_proc_table *t, pfr_proc *p, const char *comm,
                      const pfr_service_rules *rules);
/* As pfr_proc_table_learn and pfr_proc_refresh (after an exec: its consent is read again, the
 * new image has a new environment), taking what hint says as true: its comm is not read again,
 * and a cgroup id already seen gives the cgroup path without reading /proc. */
pfr_proc *pfr_proc_table_learn_hinted(pfr_proc_table *t, uint32_t tgid, uint64_t start_time,
                                      bool kthread, const pfr_proc_hint *hint,
                                      const pfr_service_rules *rules);
void pfr_proc_refresh_hinted(pfr_proc_table *t, pfr_proc *p, const pfr_proc_hint *hint,
                             const pfr_service_rules *rules);
/* Where cgroup v2 is mounted on this host (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
 * hybrid one), or NULL. */
const char *pfr_cgroup2_mount(void);

/* Name again the processes named before their cgroup's metadata was had. Returns how many got
 * their final name. */
size_t pfr_proc_table_rename_pending(pfr_proc_table *t, const pfr_service_rules *rules);

/* Remove tgid (the caller forgets it elsewhere too). */
void pfr_proc_table_remove(pfr_proc_table *t, uint32_t tgid);

/* Read a process's executable path (unless exelen is 0), cgroup v2 path (unless cgrouplen is 0)
 * and (if commlen > 0) comm and kernel-thread flag from proc_root/PID. Strings are left "" if
 * unreadable. Returns 0, or -ESRCH if the process is gone (seen only when the exe or the cgroup
 * is read). kthread may be NULL. */
int pfr_process_read_facts(const char *proc_root, uint32_t tgid, char *exe, size_t exelen,
                           char *cgroup, size_t cgrouplen, char *comm, size_t commlen,
                           bool *kthread);

/* Kernel-thread flag from the text of /proc/PID/stat; false if it cannot be parsed. */
bool pfr_stat_is_kthread(const char *stat_text);

#endif
