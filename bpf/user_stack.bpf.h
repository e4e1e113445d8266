/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0) */
/*
 * User stacks walked by the sampler itself (x86-64): the frame-pointer walk of the kernel's
 * perf_callchain_user, frame for frame, with fewer copies from user memory. Shared by the
 * sampler (cpu_profile.bpf.c) and the test that holds it to the kernel's walk on live processes
 * (tests/recorder/walk_check.bpf.c). Needs vmlinux.h, bpf_helpers.h, bpf_core_read.h,
 * bpf_tracing.h and cpu_profile.h before it.
 *
 * Not the same as the kernel's in two rare cases: a uretprobe's trampoline address is not
 * replaced by the real return address, and a uprobe at a function's first instruction does not
 * add the caller from the top of the stack (both only while someone probes the process).
 */
#ifndef PFR_USER_STACK_BPF_H
#define PFR_USER_STACK_BPF_H

/* 1 if the interrupted context was user mode, 0 if kernel, -1 if this architecture is not known
 * here (then the kernel stack is asked for, and an empty one reads as an error). */
static __always_inline int user_mode(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
    /* perf_event contexts read pt_regs fields 8 bytes at a time */
    __u64 cs = *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
    return (cs & 3) == 3;
#elif defined(__TARGET_ARCH_arm64)
    return (ctx->regs.pstate & 0xf) == 0;
#else
    return -1;
#endif
}

#if defined(__TARGET_ARCH_x86)
#define PFR_USER_ADDR_END (1ull << 56) /* above any user address, 5-level paging included */

/* How far above an address known to be stack another is taken to be stack too. */
#define PFR_WALK_NEAR (64 * 1024)

/* The walk of the kernel's perf_callchain_user on x86-64: the leaf's ip, then from the frame
 * pointer each frame record's return address ([fp + 8]; [fp] is the caller's frame pointer)
 * until a read fails, a zero return address or PFR_MAX_STACK_DEPTH (the kernel stores a zero
 * and goes on; pfr has always cut the stack there). The kernel copies 8 bytes of user memory
 * twice per frame; this copies the rest of a record's page once and reads the records that
 * follow there while they stay inside it. That is done only for a record that is stack memory
 * by the chain's own evidence: the first when it lies a little above the stack pointer (the
 * frame between them is the stack's), a later one when it lies a little above the record
 * that links to it. Any other record is read 16 bytes deep, as by the kernel: in code built
 * without frame pointers the register may point anywhere, device memory included. Returns the
 * frames stored in w->st.ips. Global: verified once. */
__noinline int pfr_walk_user(struct pfr_walk *w, __u64 ip, __u64 fp, __u64 sp)
{
    if (!w)
        return 0;
    w->st.ips[0] = ip;
    __u64 lo = 0, hi = 0; /* user addresses [lo, hi) are copied at w->page */
    int stack = fp >= sp && fp - sp < PFR_WALK_NEAR;
    __u32 n = 1;
    for (__u32 i = 1; i < PFR_MAX_STACK_DEPTH; i++) {
        __u64 rec[2];
        if (!fp || fp >= PFR_USER_ADDR_END)
            break;
        if (!(fp >= lo && fp + sizeof(rec) <= hi)) {
            __u64 len = PFR_WALK_PAGE - (fp & (PFR_WALK_PAGE - 1));
            lo = hi = 0;
            if (stack && len >= sizeof(rec)) {
                if (bpf_probe_read_user(w->page, len, (void *)fp))
                    break;
                lo = fp;
                hi = fp + len;
            }
        }
        if (hi) {
            __u64 off = fp - lo;
            if (off > PFR_WALK_PAGE - sizeof(rec))
                break; /* cannot happen; tells the verifier */
            rec[0] = *(__u64 *)(w->page + off);
            rec[1] = *(__u64 *)(w->page + off + 8);
        } else if (bpf_probe_read_user(rec, sizeof(rec), (void *)fp)) {
            break;
        }
        if (!rec[1] || n >= PFR_MAX_STACK_DEPTH)
            break;
        w->st.ips[n] = rec[1];
        n++;
        stack = rec[0] > fp && rec[0] - fp < PFR_WALK_NEAR;
        fp = rec[0];
    }
    return (int)n;
}

#define PFR_USER64_CS    0x33   /* __USER_CS */
#define PFR_XENPV_USER64 0xe033 /* FLAT_USER_CS64 of a Xen PV guest */
#endif

/* The user registers of this sample: the interrupted ones (a sample in user mode) or the task's
 * saved ones (in the kernel). 0, or -1 where the walks here do not apply (another architecture,
 * a 32-bit task, no bpf_task_pt_regs): then the kernel walks. */
static __always_inline int user_regs(struct bpf_perf_event_data *ctx, struct task_struct *task,
                                     int umode, __u64 *ip, __u64 *fp, __u64 *sp)
{
#if defined(__TARGET_ARCH_x86)
    __u64 cs;
    /* ip, frame pointer and sp by bpf_tracing.h's names; cs (64-bit user code?) is x86's own */
    if (umode == 1) {
        *ip = PT_REGS_IP(&ctx->regs);
        *fp = PT_REGS_FP(&ctx->regs);
        *sp = PT_REGS_SP(&ctx->regs);
        cs = *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
    } else if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
        struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
        *ip = PT_REGS_IP_CORE(r);
        *fp = PT_REGS_FP_CORE(r);
        *sp = PT_REGS_SP_CORE(r);
        cs = BPF_CORE_READ(r, cs);
    } else {
        return -1;
    }
    cs &= 0xffff;
    if (cs != PFR_USER64_CS && cs != PFR_XENPV_USER64)
        return -1;
    return 0;
#else
    return -1;
#endif
}

/* The user stack into w->st by the frame-pointer walk above. Returns the frames, or -1 where it
 * does not apply (see user_regs). */
static __always_inline long walk_user_stack(struct bpf_perf_event_data *ctx,
                                            struct task_struct *task, int umode, struct pfr_walk *w)
{
#if defined(__TARGET_ARCH_x86)
    __u64 ip, fp, sp;
    if (user_regs(ctx, task, umode, &ip, &fp, &sp))
        return -1;
    return pfr_walk_user(w, ip, fp, sp);
#else
    return -1;
#endif
}

#endif
