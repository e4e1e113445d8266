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
#include "u64map.h"

#define PFR_SERVICE_MAX 128

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
    uint64_t exited_gen;  /* drain generation when the exit was seen */
    uint64_t sampled_gen; /* last drain generation with samples */
} pfr_proc;

typedef struct pfr_proc_table {
    pfr_u64map by_tgid; /* tgid -> pfr_proc * */
    char *proc_root;    /* "/proc" */
    uint64_t created, forgotten;
} pfr_proc_table;

int pfr_proc_table_init(pfr_proc_table *t, const char *proc_root);
void pfr_proc_table_free(pfr_proc_table *t);
size_t pfr_proc_table_size(const pfr_proc_table *t);

pfr_proc *pfr_proc_table_get(const pfr_proc_table *t, uint32_t tgid);

/* Create or reset the record of tgid from what the kernel told (comm, kthread) and what /proc
 * says now (exe, cgroup); computes its service with rules. Returns NULL on allocation failure. */
pfr_proc *pfr_proc_table_learn(pfr_proc_table *t, uint32_t tgid, uint64_t start_time,
                               const char *comm, bool kthread, const pfr_service_rules *rules);

/* Re-read exe, cgroup and comm (comm: /proc's, else the one given) and recompute the service
 * (after exec, or after the rules changed). */
void pfr_proc_refresh(pfr_proc_table *t, pfr_proc *p, const char *comm,
                      const pfr_service_rules *rules);

/* Remove tgid (the caller forgets it elsewhere too). */
void pfr_proc_table_remove(pfr_proc_table *t, uint32_t tgid);

/* Read a process's executable path, cgroup v2 path and (if commlen > 0) comm and kernel-thread
 * flag from proc_root/PID. Strings are left "" if unreadable. Returns 0, or -ESRCH if the
 * process is gone. kthread may be NULL. */
int pfr_process_read_facts(const char *proc_root, uint32_t tgid, char *exe, size_t exelen,
                           char *cgroup, size_t cgrouplen, char *comm, size_t commlen,
                           bool *kthread);

/* Kernel-thread flag from the text of /proc/PID/stat; false if it cannot be parsed. */
bool pfr_stat_is_kthread(const char *stat_text);

#endif
