// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0)
/*
 * pfr triggers: tells user space when the OOM killer picks a victim and when a process dies of
 * a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT), with the process's cgroup path, so
 * the recorder can keep the profiles of the minutes before. Both hooks run once per event, never
 * on a hot path: a handled SIGSEGV (a JVM's null checks) is no exit and costs nothing here.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "triggers.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define SIGILL  4
#define SIGABRT 6
#define SIGBUS  7
#define SIGFPE  8
#define SIGSEGV 11

/* Linux 6.15 renamed kernfs_node's "parent" (the pinned vmlinux.h's, from 6.12) "__parent" */
struct kernfs_node___new {
    struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 64 * 1024);
} trig_events SEC(".maps");

/* Events that did not fit the ring buffer (user space reports them) */
__u64 trig_lost;

static struct kernfs_node *kn_parent(struct kernfs_node *kn)
{
    struct kernfs_node___new *kn_new = (void *)kn;
    if (bpf_core_field_exists(kn_new->__parent))
        return BPF_CORE_READ(kn_new, __parent);
    return BPF_CORE_READ(kn, parent);
}

static void fill(struct pfr_trig_event *e, struct task_struct *task, __u32 kind)
{
    e->kind = kind;
    e->tgid = BPF_CORE_READ(task, tgid);
    e->pid = BPF_CORE_READ(task, pid);
    e->time_ns = bpf_ktime_get_boot_ns();
    BPF_CORE_READ_STR_INTO(&e->comm, task, group_leader, comm);
    struct kernfs_node *kn = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn);
    e->cgroup_id = BPF_CORE_READ(kn, id);
    e->depth = 0;
    e->truncated = 0;
    for (int i = 0; i < PFR_TRIG_CGROUP_DEPTH; i++) {
        struct kernfs_node *parent = kn ? kn_parent(kn) : 0;
        if (!parent) /* kn is the root (its name is "/"), or there is none */
            return;
        const char *name = BPF_CORE_READ(kn, name);
        bpf_probe_read_kernel_str(e->cgroup[i], PFR_TRIG_CGROUP_NAME, name);
        e->depth = i + 1;
        kn = parent;
    }
    e->truncated = kn && kn_parent(kn) != 0;
}

static void send(struct task_struct *task, __u32 kind, __u32 exit_code)
{
    struct pfr_trig_event *e = bpf_ringbuf_reserve(&trig_events, sizeof(*e), 0);
    if (!e) {
        __sync_fetch_and_add(&trig_lost, 1);
        return;
    }
    fill(e, task, kind);
    e->exit_code = exit_code;
    bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/mark_victim")
int BPF_PROG(pfr_trig_oom, struct task_struct *task)
{
    send(task, PFR_TRIG_EV_OOM, 0);
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(pfr_trig_exit, struct task_struct *p)
{
    struct task_struct *task = bpf_get_current_task_btf();
    /* signal->live drops to 0 when the last thread of the group exits: one event a process */
    if (BPF_CORE_READ(task, signal, live.counter) != 0)
        return 0;
    __u32 code = (__u32)BPF_CORE_READ(task, exit_code);
    /* a death by signal has the signal in the low 7 bits and no exit status above them */
    if (code & 0xff00)
        return 0;
    __u32 sig = code & 0x7f;
    if (sig != SIGSEGV && sig != SIGBUS && sig != SIGILL && sig != SIGFPE && sig != SIGABRT)
        return 0;
    send(task, PFR_TRIG_EV_SIGNAL, code);
    return 0;
}
