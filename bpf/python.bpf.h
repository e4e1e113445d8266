/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0) */
/*
 * CPython's interpreter frames, appended to a sampled user stack (see cpu_profile.h, "Python
 * interpreter frames"). Included by the sampler (cpu_profile.bpf.c).
 *
 * The thread state of the sampled thread is the one in the main interpreter's list whose thread
 * id field names the sampled thread: what CPython itself writes for every thread, whether it
 * holds the GIL or waits for it (_PyRuntime's current thread state names the GIL holder only).
 * The match is remembered per thread (py_threads) and checked again at each sample (one read).
 * 3.11+ name the thread by its id in its pid namespace (native_thread_id); 3.8-3.10 have only
 * thread_id, pthread_self(): on x86-64 (glibc and musl alike) the address of the thread's
 * control block, which is the thread's fs base, read from the task (py_thread_id).
 * Every read is of user memory through bpf_probe_read_user and bounded in number: a process
 * that rewrites its frames, or a hostile _PyRuntime, costs at most PFR_PY_MAX_THREADS +
 * PFR_PY_MAX_FRAMES reads and yields frames user space will not name.
 */
#ifndef PFR_PYTHON_BPF_H
#define PFR_PYTHON_BPF_H

/* Python processes, by tgid: filled by user space. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct pfr_py_proc);
} py_procs SEC(".maps");

/* Thread (kernel tid) -> its thread state, as last found. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32);
    __type(value, __u64);
} py_threads SEC(".maps");

/* Set by user space while py_procs is not empty: other samples skip the lookup. */
volatile __u32 py_enabled;

/* The kernel's pid and thread types, as far as needed here, relocated by CO-RE (the committed
 * vmlinux.h does not carry them). */
struct upid___pfr {
    int nr;
} __attribute__((preserve_access_index));
struct pid___pfr {
    unsigned int level;
    struct upid___pfr numbers[1];
} __attribute__((preserve_access_index));
struct thread_struct___pfr {
    unsigned long fsbase;
} __attribute__((preserve_access_index));
struct task_struct___pfr {
    struct pid___pfr *thread_pid;
    struct thread_struct___pfr thread;
} __attribute__((preserve_access_index));

/* What the thread state's id field holds for the current thread: its id in its own pid
 * namespace (CPython's native_thread_id, from gettid()), or its fs base (pthread_self()). */
static __always_inline __u64 py_thread_id(struct task_struct *task, __u8 kind)
{
    struct task_struct___pfr *t = (void *)task;
#if defined(__TARGET_ARCH_x86)
    if (kind == 1)
        return BPF_CORE_READ(t, thread.fsbase);
#endif
    struct pid___pfr *pid = BPF_CORE_READ(t, thread_pid);
    unsigned int level = BPF_CORE_READ(pid, level);
    if (!pid || level > 32)
        return 0;
    int nr = 0;
    char *first = (char *)pid + bpf_core_field_offset(struct pid___pfr, numbers);
    bpf_probe_read_kernel(&nr, sizeof(nr),
                          first + (__u64)level * bpf_core_type_size(struct upid___pfr));
    return (__u64)(__u32)nr;
}

static __always_inline int py_read(__u64 addr, __u64 *val)
{
    return addr ? (int)bpf_probe_read_user(val, sizeof(*val), (void *)addr) : -1;
}

/* The sampled thread's thread state, or 0. */
static __always_inline __u64 py_tstate(const struct pfr_py_proc *pp, __u32 tid, __u64 want)
{
    __u64 ts = 0, id = 0;
    __u64 *cached = bpf_map_lookup_elem(&py_threads, &tid);
    if (cached && py_read(*cached + pp->ts_tid, &id) == 0 && id == want)
        return *cached;
    __u64 interp;
    if (py_read(pp->interp_head, &interp) || py_read(interp + pp->is_threads_head, &ts))
        return 0;
    for (int i = 0; i < PFR_PY_MAX_THREADS && ts; i++) {
        if (py_read(ts + pp->ts_tid, &id))
            return 0;
        if (id == want) {
            bpf_map_update_elem(&py_threads, &tid, &ts, BPF_ANY);
            return ts;
        }
        if (py_read(ts + pp->ts_next, &ts))
            return 0;
    }
    return 0;
}

/* Masks an index into ips for the verifier (n < PFR_MAX_STACK_DEPTH is checked before). */
#define PFR_PY_IX_MASK 127u
_Static_assert(PFR_MAX_STACK_DEPTH <= PFR_PY_IX_MASK + 1, "the mask covers every index");
static __always_inline __u32 py_ix(__u32 n)
{
    asm volatile("" : "+r"(n)); /* the compiler must not drop the mask for the bound it knows */
    return n & PFR_PY_IX_MASK;
}

/* A field of the frame copied at w->page + off. */
static __always_inline __u64 py_field(struct pfr_walk *w, __u32 off, __u16 foff)
{
    __u32 i = off + foff;
    if (foff > PFR_PY_FRAME_READ - 8 || i > PFR_WALK_PAGE - 8)
        return 0;
    return *(__u64 *)(w->page + i);
}

static __always_inline __u8 py_byte(struct pfr_walk *w, __u32 off, __u16 foff)
{
    __u32 i = off + foff;
    if (foff > PFR_PY_FRAME_READ - 1 || i > PFR_WALK_PAGE - 1)
        return 0;
    return w->page[i];
}

/* The frame at f copied into w->page: its offset there, or -1 if unreadable. Frames live in
 * the thread's data stack, a caller's mostly just below its callee's: the page under a frame is
 * copied with it (from the page's start: a mapped page is readable as a whole), and the frames
 * that follow are read from that copy while they lie in it. [*lo, *hi) is what the copy holds. */
static __always_inline long py_frame_at(struct pfr_walk *w, __u64 f, __u64 *lo, __u64 *hi)
{
    if (f >= *lo && f + PFR_PY_FRAME_READ <= *hi)
        return (long)(f - *lo);
    __u64 page = f & ~(__u64)(PFR_WALK_PAGE - 1), len = f + PFR_PY_FRAME_READ - page;
    *lo = *hi = 0;
    if (len > PFR_WALK_PAGE) { /* across a page boundary: the frame alone */
        if (bpf_probe_read_user(w->page, PFR_PY_FRAME_READ, (void *)f))
            return -1;
        *lo = f;
        *hi = f + PFR_PY_FRAME_READ;
        return 0;
    }
    if (bpf_probe_read_user(w->page, len & (2 * PFR_WALK_PAGE - 1), (void *)page))
        return -1;
    *lo = page;
    *hi = page + len;
    return (long)(f - page);
}

/* A field of the PyFrameObject copied at w->page (PFR_PY_FRAMES_OBJECT); foff is checked to be
 * within PFR_PY_OBJ_READ by the caller. */
static __always_inline __u64 py_obj_u64(struct pfr_walk *w, __u32 foff)
{
    return *(__u64 *)(w->page + foff);
}

/* 3.8-3.10: how many of the n native frames to keep, and (*limit) the frames in all, so that
 * each activation of the interpreter loop kept has room for its Python frame after them: every
 * Python call nests a few native frames and an activation, and a deep recursion's native frames
 * alone would fill the stack. Kept: the innermost native frames up to the point where they and
 * their activations' Python frames fill it. n <= PFR_MAX_STACK_DEPTH (< 256). */
__noinline int pfr_py_keep(struct pfr_walk *w, __u32 n, __u64 lo, __u64 hi)
{
    /* Returns the frames to keep | the limit << 8. Global, so that its caller goes on with one
     * unknown answer, not with each of the up to 127 it can give (each would have the verifier
     * follow the frame walk after it again). */
    __u32 acts = 0;
    if (!w || !lo || hi <= lo || hi >> 63)
        return (int)(n | PFR_MAX_STACK_DEPTH << 8);
    __u64 size = hi - lo;
    for (__u32 i = 0; i < PFR_MAX_STACK_DEPTH && i < n; i++) {
        /* a return address after the leaf: the call is before it */
        __u64 d = w->st.ips[py_ix(i)] - (i > 0) - lo, t = d - size;
        /* a = lo <= ip < hi without a branch (user addresses are below 2^63, so d and t have
         * bit 63 set exactly when ip < lo and ip < hi): a branch here would have the verifier
         * follow every combination of the frames' answers */
        asm volatile("" : "+r"(d), "+r"(t));
        __u32 a = (__u32)((t >> 63) & (~d >> 63));
        if (i + 1 + acts + a > PFR_MAX_STACK_DEPTH) {
            w->py_flags |= PFR_PYF_CUT_DEPTH;
            return (int)(i | (i + acts) << 8);
        }
        acts += a;
    }
    return (int)(n | PFR_MAX_STACK_DEPTH << 8);
}

/* 3.8-3.10 (PFR_PY_FRAMES_OBJECT): from the thread state's frame f along f_back, one read of
 * PFR_PY_OBJ_READ bytes per frame (frame objects live on the heap, each its own allocation: no
 * page of them to copy at once). Every frame is run by an activation of its own, so each is the
 * last of its group. Appends to w->st after n frames; returns the new count. Global: verified
 * once. */
__noinline int pfr_py_walk_objects(struct pfr_walk *w, __u32 n, __u64 f,
                                   const struct pfr_py_proc *pp)
{
    if (!w || !pp)
        return 0;
    __u32 o_code = pp->f_code, o_back = pp->f_previous, o_lasti = pp->f_lasti;
    __u8 shift = pp->lasti_shift & 1;
    if (o_code > PFR_PY_OBJ_READ - 8 || o_back > PFR_PY_OBJ_READ - 8 ||
        o_lasti > PFR_PY_OBJ_READ - 4)
        return (int)n;
    /* checked: the compiler must not add them to w->page before (the sum would be unbounded) */
    asm volatile("" : "+r"(o_code), "+r"(o_back), "+r"(o_lasti));
    __u32 keep = (__u32)pfr_py_keep(w, n, pp->eval_lo, pp->eval_hi);
    __u32 limit = keep >> 8;
    n = keep & 0xff;
    for (int i = 0; i < PFR_PY_MAX_FRAMES; i++) {
        if (!f)
            return (int)n;
        if (n >= limit || n >= PFR_MAX_STACK_DEPTH) {
            w->py_flags |= PFR_PYF_CUT_DEPTH;
            return (int)n;
        }
        if (bpf_probe_read_user(w->page, PFR_PY_OBJ_READ, (void *)f)) {
            w->st.ips[py_ix(n)] = pfr_py_frame_make(0, 0, 1);
            w->py_flags |= PFR_PYF_CUT_READ;
            return (int)n + 1;
        }
        __s32 lasti = *(__s32 *)(w->page + o_lasti); /* -1: no instruction run yet */
        __u64 unit1 = lasti < 0 ? 0 : ((__u64)lasti >> shift) + 1;
        w->st.ips[py_ix(n)] = pfr_py_frame_make(py_obj_u64(w, o_code), unit1, 1);
        n++;
        w->py_frames++;
        f = py_obj_u64(w, o_back);
    }
    if (f)
        w->py_flags |= PFR_PYF_CUT_DEPTH;
    return (int)n;
}

/* Append the interpreter frames of the sampled thread (tgid, kernel tid) to w->st after its n
 * native frames; w->py_* say what happened. Returns the new frame count. Global: verified
 * once. */
__noinline int pfr_py_walk(struct pfr_walk *w, __u32 n, __u32 tgid, __u32 tid)
{
    if (!w)
        return 0;
    w->py_flags = 0;
    w->py_frames = 0;
    struct pfr_py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
    if (!pp)
        return (int)n;
    w->py_flags |= PFR_PYF_PYTHON;
    __u64 ts = py_tstate(pp, tid, py_thread_id(bpf_get_current_task_btf(), pp->tid_kind));
    if (!ts) {
        w->py_flags |= PFR_PYF_NO_THREAD;
        return (int)n;
    }
    __u64 f = 0;
    if (py_read(ts + pp->ts_frame, &f))
        return (int)n;
    if (pp->cf_frame != PFR_PY_OFF_NONE && py_read(f + pp->cf_frame, &f))
        return (int)n;
    w->py_flags |= PFR_PYF_WALKED;
    if (pp->frame_kind == PFR_PY_FRAMES_OBJECT)
        return pfr_py_walk_objects(w, n, f, pp);
    __u32 first = n;
    __u64 lo = 0, hi = 0;
    for (int i = 0; i < PFR_PY_MAX_FRAMES; i++) {
        if (!f)
            return (int)n;
        if (n >= PFR_MAX_STACK_DEPTH) {
            w->py_flags |= PFR_PYF_CUT_DEPTH;
            return (int)n;
        }
        long off = py_frame_at(w, f, &lo, &hi);
        if (off < 0 || off > PFR_WALK_PAGE - PFR_PY_FRAME_READ) {
            w->st.ips[py_ix(n)] = pfr_py_frame_make(0, 0, 1);
            w->py_flags |= PFR_PYF_CUT_READ;
            return (int)n + 1;
        }
        __u32 o = (__u32)off;
        __u64 code = py_field(w, o, pp->f_code), prev = py_field(w, o, pp->f_previous);
        __u64 instr = py_field(w, o, pp->f_instr);
        __u8 owner = py_byte(w, o, pp->f_owner);
        if (pp->owner_cstack != 0xff && owner == pp->owner_cstack) {
            /* a C call's entry frame: the frame after it ran in that activation */
            if (n > first)
                w->st.ips[py_ix(n - 1)] |= PFR_PY_ENTRY;
        } else {
            int entry = pp->f_is_entry != PFR_PY_OFF_NONE && py_byte(w, o, pp->f_is_entry);
            __u64 start = code + pp->co_code, unit1 = 0;
            if (instr >= start)
                unit1 = (instr - start) / 2 + 1;
            w->st.ips[py_ix(n)] = pfr_py_frame_make(code, unit1, entry);
            n++;
            w->py_frames++;
        }
        f = prev;
    }
    if (f)
        w->py_flags |= PFR_PYF_CUT_DEPTH;
    return (int)n;
}

#endif
