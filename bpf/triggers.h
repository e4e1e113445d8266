/*
 * Types shared by the triggers' BPF program (triggers.bpf.c) and its loader
 * (recorder/triggers/trig_bpf.c): one event per OOM victim and per process that died of a
 * fatal signal, with what names its service while the process is still there (its cgroup's
 * path, walked in the kernel: the cgroup of a killed container may be gone before user space
 * reads the event).
 */
#ifndef PFR_TRIGGERS_BPF_H
#define PFR_TRIGGERS_BPF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define PFR_TRIG_COMM_LEN 16
/* The cgroup path's components, leaf first: container cgroups are 1-5 levels deep (systemd
 * unit, Docker scope, Kubernetes pod and container), their names at most ~90 bytes. */
#define PFR_TRIG_CGROUP_DEPTH 8
#define PFR_TRIG_CGROUP_NAME  128

enum pfr_trig_event_kind {
    PFR_TRIG_EV_OOM = 1,   /* the OOM killer chose this task (oom/mark_victim) */
    PFR_TRIG_EV_SIGNAL = 2 /* the last thread of a process exited, killed by a signal */
};

struct pfr_trig_event {
    __u32 kind; /* enum pfr_trig_event_kind */
    __u32 tgid;
    __u32 pid;
    __u32 exit_code; /* PFR_TRIG_EV_SIGNAL: the wait status (signal | 0x80 if it dumped core) */
    __u64 time_ns;   /* CLOCK_BOOTTIME */
    __u64 cgroup_id; /* of the default (v2) hierarchy */
    __u32 depth;     /* components in cgroup[] (leaf first; the root has none) */
    __u32 truncated; /* 1: the path is deeper than PFR_TRIG_CGROUP_DEPTH */
    char comm[PFR_TRIG_COMM_LEN];
    char cgroup[PFR_TRIG_CGROUP_DEPTH][PFR_TRIG_CGROUP_NAME];
};

#endif
