// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0)
/*
 * pfr CPU sampler: runs on a cpu-clock perf event on every CPU, counts samples by
 * (process, kernel stack, user stack) into one of two buffers, and tells user space when it sees a
 * process for the first time (so its mappings are snapshotted while it is alive), when a known
 * process calls exec and when it exits.
 *
 * Double buffering: user space flips active_buf, waits until no CPU is inside the sampler
 * (inflight), then reads and empties the other buffer's count and stack maps at leisure.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "cpu_profile.h"

#define EEXIST     17
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Which buffer samples go to (0 or 1); written by user space through the mmap'ed .bss. */
volatile __u32 active_buf;

#define COUNT_MAP(name)                                                                            \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, 16384);                                                                \
        __type(key, struct pfr_count_key);                                                         \
        __type(value, __u64);                                                                      \
    } name SEC(".maps")

#define STACK_MAP(name)                                                                            \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, 8192);                                                                 \
        __type(key, __u64);                                                                        \
        __type(value, struct pfr_stack);                                                           \
    } name SEC(".maps")

COUNT_MAP(counts0);
COUNT_MAP(counts1);
STACK_MAP(stacks0);
STACK_MAP(stacks1);

/* Per-CPU scratch for bpf_get_stack (1 KiB does not fit the 512-byte BPF stack). */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pfr_stack);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, PFR_CNT_MAX);
    __type(key, __u32);
    __type(value, __u64);
} counters SEC(".maps");

/* Non-zero while this CPU is inside the sampler; user space waits for 0 after a flip. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} inflight SEC(".maps");

/* tgid -> group leader start time, for processes user space has been told about. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, __u64);
} known SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline void count(__u32 which)
{
    __u64 *v = bpf_map_lookup_elem(&counters, &which);
    if (v)
        *v += 1; /* per-CPU: no atomics needed */
}

static __always_inline __u64 hash_stack(const struct pfr_stack *st, __u32 n)
{
    __u64 h = 0xcbf29ce484222325ull ^ n;
    for (__u32 i = 0; i < PFR_MAX_STACK_DEPTH; i++) {
        if (i >= n)
            break;
        h ^= st->ips[i];
        h *= 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    /* 0 and PFR_STACK_ERROR are reserved ids */
    return h > PFR_STACK_ERROR ? h : h + 2;
}

/* Copy the current stack (kernel or user per flags) and store it in stacks by content hash.
 * Returns its id, 0 if the stack is empty, or PFR_STACK_ERROR. */
static __always_inline __u64 store_stack(void *ctx, void *stacks, __u64 flags, __u32 err_counter)
{
    __u32 zero = 0;
    struct pfr_stack *st = bpf_map_lookup_elem(&scratch, &zero);
    if (!st)
        return PFR_STACK_ERROR;
    long len = bpf_get_stack(ctx, st->ips, sizeof(st->ips), flags);
    if (len < 0) {
        count(err_counter);
        return PFR_STACK_ERROR;
    }
    __u32 n = (__u32)len / sizeof(__u64);
    if (n == 0)
        return 0;
    st->nframes = n;
    __u64 id = hash_stack(st, n);
    if (bpf_map_lookup_elem(stacks, &id)) {
        count(PFR_CNT_STACK_REUSED);
        return id;
    }
    long err = bpf_map_update_elem(stacks, &id, st, BPF_NOEXIST);
    if (err == 0 || err == -EEXIST)
        return id;
    count(PFR_CNT_STACK_FULL);
    return PFR_STACK_ERROR;
}

static __always_inline void add_count(void *counts, struct pfr_count_key *key)
{
    __u64 *v = bpf_map_lookup_elem(counts, key);
    if (v) {
        __sync_fetch_and_add(v, 1);
        return;
    }
    __u64 one = 1;
    long err = bpf_map_update_elem(counts, key, &one, BPF_NOEXIST);
    if (err == -EEXIST) { /* another CPU inserted it first */
        v = bpf_map_lookup_elem(counts, key);
        if (v)
            __sync_fetch_and_add(v, 1);
        return;
    }
    if (err)
        count(PFR_CNT_COUNT_FULL);
}

static __always_inline int emit(__u32 type, struct task_struct *task, __u32 tgid, __u64 start)
{
    struct pfr_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count(PFR_CNT_EVENTS_LOST);
        return -1;
    }
    struct task_struct *leader = BPF_CORE_READ(task, group_leader);
    e->type = type;
    e->tgid = tgid;
    e->start_time = start;
    e->cgroup_id = bpf_get_current_cgroup_id();
    e->flags = (BPF_CORE_READ(task, flags) & PF_KTHREAD) ? PFR_EVF_KTHREAD : 0;
    bpf_core_read_str(e->comm, sizeof(e->comm), &leader->comm);
    bpf_ringbuf_submit(e, 0);
    return 0;
}

/* Tell user space about a process it has not seen (or a new one reusing a known tgid). */
static __always_inline void note_process(struct task_struct *task, __u32 tgid)
{
    __u64 start = BPF_CORE_READ(task, group_leader, start_time);
    __u64 *seen = bpf_map_lookup_elem(&known, &tgid);
    if (seen && *seen == start)
        return;
    if (bpf_map_update_elem(&known, &tgid, &start, seen ? BPF_ANY : BPF_NOEXIST))
        return; /* another CPU got there first */
    if (emit(PFR_EV_NEW, task, tgid, start))
        bpf_map_delete_elem(&known, &tgid); /* retry on the next sample */
}

SEC("perf_event")
int pfr_sample(struct bpf_perf_event_data *ctx)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    __u32 zero = 0;

    if (tgid == 0) {
        count(PFR_CNT_IDLE);
        return 0;
    }
    __u64 *busy = bpf_map_lookup_elem(&inflight, &zero);
    if (!busy)
        return 0;
    /* A locked add orders this store before the load of active_buf below (full barrier on x86),
     * so once user space has flipped the buffer and seen busy == 0 on a CPU, any later sample on
     * that CPU uses the new buffer. */
    __sync_fetch_and_add(busy, 1);

    /* Read the buffer index before counting the sample: a sample counted before user space
     * flips is then always in the buffer it drains (tests check the drained totals against the
     * counter read just before and just after each flip). */
    __u32 buf = active_buf & 1;
    struct task_struct *task = bpf_get_current_task_btf();
    int kthread = task->flags & PF_KTHREAD;
    struct pfr_count_key key = {.tgid = tgid};

    count(PFR_CNT_SAMPLES);
    /* A task sampled after its exit was reported must not be announced as new again. */
    if (!(task->flags & PF_EXITING))
        note_process(task, tgid);
    if (buf) {
        key.kstack = store_stack(ctx, &stacks1, 0, PFR_CNT_KSTACK_ERR);
        if (!kthread)
            key.ustack = store_stack(ctx, &stacks1, BPF_F_USER_STACK, PFR_CNT_USTACK_ERR);
        add_count(&counts1, &key);
    } else {
        key.kstack = store_stack(ctx, &stacks0, 0, PFR_CNT_KSTACK_ERR);
        if (!kthread)
            key.ustack = store_stack(ctx, &stacks0, BPF_F_USER_STACK, PFR_CNT_USTACK_ERR);
        add_count(&counts0, &key);
    }
    __sync_fetch_and_add(busy, -1);
    return 0;
}

/* BTF-typed raw tracepoints attach without tracefs being mounted. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(pfr_exec, struct task_struct *p)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (!bpf_map_lookup_elem(&known, &tgid))
        return 0;
    struct task_struct *task = bpf_get_current_task_btf();
    emit(PFR_EV_EXEC, task, tgid, BPF_CORE_READ(task, group_leader, start_time));
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(pfr_exit, struct task_struct *p)
{
    struct task_struct *task = bpf_get_current_task_btf();
    /* signal->live drops to 0 when the last thread of the group exits */
    if (BPF_CORE_READ(task, signal, live.counter) != 0)
        return 0;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (!bpf_map_lookup_elem(&known, &tgid))
        return 0;
    bpf_map_delete_elem(&known, &tgid);
    emit(PFR_EV_EXIT, task, tgid, BPF_CORE_READ(task, group_leader, start_time));
    return 0;
}
