// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0)
/*
 * Holds the sampler's user-stack walk (bpf/user_stack.bpf.h) to the kernel's: on each sample of
 * a process under test, both walk its user stack and the frames are compared.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "cpu_profile.h"
#include "user_stack.bpf.h"
#include "walk_check.h"

#define PF_KTHREAD 0x00200000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, struct pfr_walk_tally);
} tallies SEC(".maps");

struct scratch {
    struct pfr_walk w;
    __u64 kernel[PFR_MAX_STACK_DEPTH];
};
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct scratch);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pfr_walk_diff);
} first_diff SEC(".maps");

volatile __u64 diff_taken;

/* Frames of the kernel's walk up to its first zero (where pfr cuts), or -1 if they differ from
 * the n of the sampler's walk. Global: verified once. */
__noinline int pfr_same_frames(const struct scratch *s, __u32 n, __u32 kn)
{
    if (!s)
        return -1;
    __u32 nz = 0;
    for (__u32 i = 0; i < PFR_MAX_STACK_DEPTH; i++) {
        if (i >= kn || !s->kernel[i])
            break;
        nz++;
    }
    if (nz != n)
        return -1;
    for (__u32 i = 0; i < PFR_MAX_STACK_DEPTH; i++) {
        if (i >= n)
            break;
        if (s->w.st.ips[i] != s->kernel[i])
            return -1;
    }
    return (int)n;
}

static __always_inline void keep_diff(__u32 tgid, struct scratch *s, __u32 n, __u32 kn)
{
    __u32 zero = 0;
    if (__sync_val_compare_and_swap(&diff_taken, 0, 1) != 0)
        return;
    struct pfr_walk_diff *d = bpf_map_lookup_elem(&first_diff, &zero);
    if (!d)
        return;
    d->tgid = tgid;
    d->n_walk = n;
    d->n_kernel = kn;
    __builtin_memcpy(d->walk, s->w.st.ips, sizeof(d->walk));
    __builtin_memcpy(d->kernel, s->kernel, sizeof(d->kernel));
}

SEC("perf_event")
int walk_check(struct bpf_perf_event_data *ctx)
{
    __u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
    struct pfr_walk_tally *t = bpf_map_lookup_elem(&tallies, &tgid);
    if (!t)
        return 0;
    struct task_struct *task = bpf_get_current_task_btf();
    if ((task->flags & PF_KTHREAD) || !task->mm)
        return 0;
    struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
    if (!s)
        return 0;
    int umode = user_mode(ctx);
    long n = walk_user_stack(ctx, task, umode, &s->w);
    if (n < 0) {
        __sync_fetch_and_add(&t->not_walked, 1);
        return 0;
    }
    long len = bpf_get_stack(ctx, s->kernel, sizeof(s->kernel), BPF_F_USER_STACK);
    if (len <= 0) {
        __sync_fetch_and_add(&t->kernel_fail, 1);
        return 0;
    }
    __u32 kn = (__u32)((__u64)len / sizeof(__u64));
    __sync_fetch_and_add(&t->compared, 1);
    if (umode != 1)
        __sync_fetch_and_add(&t->in_kernel, 1);
    if (pfr_same_frames(s, (__u32)n, kn) < 0) {
        __sync_fetch_and_add(&t->differ, 1);
        keep_diff(tgid, s, (__u32)n, kn);
        return 0;
    }
    __sync_fetch_and_add(&t->frames, (__u64)n);
    return 0;
}
