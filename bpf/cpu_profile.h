/*
 * Types shared by the CPU sampler (cpu_profile.bpf.c) and its loader (recorder/cpu_profiler.c).
 *
 * Stacks are stored by content hash rather than in a kernel stack-trace map: a stack-trace map
 * has one slot per hash bucket and drops a new stack whenever its bucket is taken (-EEXIST), which
 * loses a few percent of distinct stacks at realistic fill levels unless it is sized several times
 * larger than needed. Copying the stack (bpf_get_stack) and keying an ordinary hash map by a
 * 64-bit hash of it costs a short loop per sample and loses stacks only when the map is full,
 * which the loader sizes and the counters report.
 */
#ifndef PFR_CPU_PROFILE_H
#define PFR_CPU_PROFILE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames kept per stack; the kernel's default perf_event_max_stack is 127. */
#define PFR_MAX_STACK_DEPTH 127
#define PFR_TASK_COMM_LEN   16

/* A stack as stored: its frame count, then return addresses leaf first. 1 KiB exactly. */
struct pfr_stack {
    __u32 nframes;
    __u32 pad;
    __u64 ips[PFR_MAX_STACK_DEPTH];
};

/* Key of the sample count maps. A stack id of 0 means "no stack" (no kernel part because the
 * sample was in user mode, or no user part for a kernel thread); PFR_STACK_ERROR means the stack
 * could not be read or stored (counted in the counters). */
struct pfr_count_key {
    __u32 tgid;
    __u32 pad;
    __u64 kstack;
    __u64 ustack;
};
#define PFR_STACK_ERROR 1ull

/* Per-CPU counters, summed by the loader. */
enum pfr_counter {
    PFR_CNT_SAMPLES = 0,  /* samples taken (idle excluded) */
    PFR_CNT_IDLE,         /* samples that hit the idle task, not recorded */
    PFR_CNT_KSTACK_ERR,   /* kernel stack could not be read */
    PFR_CNT_USTACK_ERR,   /* user stack could not be read */
    PFR_CNT_STACK_FULL,   /* a stack map was full: stack recorded as PFR_STACK_ERROR */
    PFR_CNT_COUNT_FULL,   /* a count map was full: sample lost */
    PFR_CNT_EVENTS_LOST,  /* ring buffer full: a process notification was dropped */
    PFR_CNT_STACK_REUSED, /* stack already stored (a hit, not a loss) */
    PFR_CNT_MAX,
};

/* Notifications to user space, through the ring buffer. */
enum pfr_event_type {
    PFR_EV_NEW = 1, /* first sample of a process (or of a new process reusing a tgid) */
    PFR_EV_EXEC,    /* a known process called exec: mappings and comm changed */
    PFR_EV_EXIT,    /* the last thread of a known process exited */
};

struct pfr_event {
    __u32 type;
    __u32 tgid;
    __u64 start_time; /* group leader's start time (ns since boot): tells tgid reuse apart */
    __u64 cgroup_id;
    __u32 flags;                  /* PFR_EVF_* */
    char comm[PFR_TASK_COMM_LEN]; /* the group leader's comm */
};
#define PFR_EVF_KTHREAD 1u

#endif
