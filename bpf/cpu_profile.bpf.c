// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0)
/*
 * pfr CPU sampler: runs on a cpu-clock perf event on every CPU, counts samples by
 * (process, kernel stack, user stack) into one of two buffers, and tells user space when it sees a
 * process for the first time (so its mappings are snapshotted while it is alive), when a known
 * process calls exec and when it exits.
 *
 * Double buffering: user space flips active_buf (counting it up: its low bit names the buffer),
 * waits until no CPU is inside the sampler (cpu_state.inflight), then reads and empties the
 * other buffer's count and stack maps at leisure.
 *
 * Per sample, in the common case: one per-CPU lookup (state, counters), the process memo, the
 * user stack walked and found by its hash in the per-CPU memo of stored stacks, else in the
 * stack map (and the kernel stack, copied by
 * bpf_get_stack, for a sample taken in the kernel) and an increment in a per-CPU slot (the count
 * map is touched when the slot held another key). The idle task costs one lookup.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "cpu_profile.h"
#include "user_stack.bpf.h"

#define EEXIST     17
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000
#define VM_EXEC    0x00000004

/* The task_vma iterator (Linux 6.7): weak, so the program still loads on older kernels, where
 * an exit carries no mappings. */
extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
                                 __u64 addr) __weak __ksym;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __weak __ksym;

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Bumped by user space after every change of unwind_files: the per-CPU memo of mappings
 * (struct pfr_uw_mapc, unwind.bpf.h) trusts only entries made since. First: the x86-64 walk
 * uses it first, and the skeleton's .bss must have one layout on every architecture. */
volatile __u32 uw_files_gen;
/* Which buffer samples go to: its low bit; counted up by user space through the mmap'ed .bss
 * at each flip. */
volatile __u32 active_buf;
/* Bumped by user space after it deleted a process from known: drops the per-CPU memo of the
 * last process noted (pfr_cpu_state.last_*), so that process is announced again. */
volatile __u32 known_gen;

#define COUNT_MAP(name)                                                                            \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, 16384);                                                                \
        __type(key, struct pfr_count_key);                                                         \
        __type(value, __u64);                                                                      \
    } name SEC(".maps")

/* Stacks by content: hash of the frames (PFR_STACK_HASHED set) -> the frames. */
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

#define PENDING_MAP(name)                                                                          \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                                   \
        __uint(max_entries, 1);                                                                    \
        __type(key, __u32);                                                                        \
        __type(value, struct pfr_pending);                                                         \
    } name SEC(".maps")

PENDING_MAP(pending0);
PENDING_MAP(pending1);

/* Per-CPU scratch for the stack being stored (5 KiB do not fit the 512-byte BPF stack). */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pfr_walk);
} scratch SEC(".maps");

/* Per-CPU room to build an exit's mappings before they are copied to the ring buffer at their
 * size (2.6 KiB does not fit the BPF stack). The walk's counters live here too: in memory the
 * verifier does not track their values, so the loop's states converge instead of being explored
 * once per value. */
struct exit_walk {
    struct pfr_exit_maps m;
    __u32 visited;
    __u32 last_dev; /* the file of the last executable mapping */
    __u64 last_ino;
};
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct exit_walk);
} exit_scratch SEC(".maps");

/* Per-CPU in-flight flag, memo and counters: one lookup per sample. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct pfr_cpu_state);
} cpu_state SEC(".maps");

/* tgid -> group leader start time, for processes user space has been told about; with
 * KNOWN_UW set once the unwinder made the process's entry in uw_procs (unwind.bpf.h). */
#define KNOWN_UW (1ull << 63)
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, __u64);
} known SEC(".maps");

/* Files user space can name from an exit's mapping list (it learned their paths from
 * snapshots, or from an exit's PFR_EV_PATH). A new process whose executable is one of them need
 * not wake user space: its exit names it, or the drain snapshots it if it still lives. An exit
 * sends the path of every other file it maps code from. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PFR_NAMED_FILES_MAX);
    __type(key, struct pfr_file_key);
    __type(value, __u8);
} named_files SEC(".maps");

#define EVENTS_BYTES (256 * 1024)
struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, EVENTS_BYTES);
} events SEC(".maps");

/* The requests for unwind tables (struct pfr_unwind_req), apart from the notifications: a thread
 * that does nothing else hands them to the unwinder, so that they never wait behind the
 * notifications' handling (recorder/cpu/unwind_asks.h). 64 KiB: ~600 requests, more than the
 * unwinder's queue (a request that finds the ring full is asked again at a later sample). */
#define UNWIND_ASKS_BYTES (64 * 1024)
struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, UNWIND_ASKS_BYTES);
} unwind_asks SEC(".maps");

#include "unwind.bpf.h"
#include "python.bpf.h"

static __always_inline struct pfr_cpu_state *cpu_state_get(void)
{
    __u32 zero = 0;
    return bpf_map_lookup_elem(&cpu_state, &zero);
}

/* per-CPU: no atomics needed */
#define COUNT(cs, which) ((cs)->counters[(which)] += 1)

/* A stack's id: a 64-bit hash of its frames, with PFR_STACK_HASHED set so it is never 0 (no
 * stack) or PFR_STACK_ERROR. Two stacks of a host with the same hash are unlikely enough (about
 * n^2 / 2^64 for n distinct stacks) to be ignored. Global, so the verifier checks its loop once. */
__noinline __u64 pfr_stack_id(const struct pfr_stack *st, __u32 kernel)
{
    if (!st)
        return PFR_STACK_ERROR;
    __u32 n = st->nframes;
    __u64 h = (0xcbf29ce484222325ull ^ n ^ ((__u64)kernel << 32)) * 0x9e3779b97f4a7c15ull;
    for (__u32 i = 0; i < PFR_MAX_STACK_DEPTH; i++) {
        if (i >= n)
            break;
        h ^= st->ips[i];
        h *= 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h | PFR_STACK_HASHED;
}

/* Store w's stack (nframes > 0) in the stack map of the buffer tag names unless it is there
 * (the per-CPU memo of struct pfr_walk.stored says so without a lookup). Returns its id, or
 * PFR_STACK_ERROR when the map is full. */
static __always_inline __u64 store_stack(struct pfr_cpu_state *cs, struct pfr_walk *w, void *stacks,
                                         __u32 kernel, __u32 tag)
{
    __u64 id = pfr_stack_id(&w->st, kernel);
    if (w->stored_tag != tag) { /* a flip since: nothing known of this buffer's map */
        for (int i = 0; i < PFR_STORED_SLOTS; i++)
            w->stored[i] = 0;
        w->stored_tag = tag;
    }
    __u64 *known = &w->stored[(id ^ (id >> 32)) & (PFR_STORED_SLOTS - 1)];
    if (*known == id)
        return id;
    if (bpf_map_lookup_elem(stacks, &id)) {
        *known = id;
        return id;
    }
    long err = bpf_map_update_elem(stacks, &id, &w->st, BPF_NOEXIST);
    if (err == 0)
        COUNT(cs, PFR_CNT_STACK_NEW);
    if (err == 0 || err == -EEXIST) { /* EEXIST: another CPU stored it first */
        *known = id;
        return id;
    }
    COUNT(cs, PFR_CNT_STACK_FULL);
    return PFR_STACK_ERROR;
}

#if defined(__TARGET_ARCH_x86)
/* The counters of a walk with unwind tables. */
static __always_inline void count_unwind(struct pfr_cpu_state *cs, const struct pfr_uw_state *u)
{
    __u32 f = u->flags;
    if (u->dwarf_frames) {
        COUNT(cs, PFR_CNT_UW_DWARF);
        cs->counters[PFR_CNT_UW_FRAMES] += u->dwarf_frames;
    } else {
        COUNT(cs, PFR_CNT_UW_FP);
    }
    if (f & PFR_UWF_END)
        COUNT(cs, PFR_CNT_UW_END);
    if (f & PFR_UWF_PENDING)
        COUNT(cs, PFR_CNT_UW_PENDING);
    if (f & PFR_UWF_NO_ROW)
        COUNT(cs, PFR_CNT_UW_NO_ROW);
    if (f & PFR_UWF_BUSY)
        COUNT(cs, PFR_CNT_UW_BUSY);
    if (f & PFR_UWF_VMA_MISS)
        COUNT(cs, PFR_CNT_UW_VMA_MISS);
    if (f & PFR_UWF_CUT_READ)
        COUNT(cs, PFR_CNT_UW_CUT_READ);
    if (f & PFR_UWF_CUT_MAP)
        COUNT(cs, PFR_CNT_UW_CUT_MAP);
    if (f & PFR_UWF_CUT_DEPTH)
        COUNT(cs, PFR_CNT_UW_CUT_DEPTH);
    if (f & PFR_UWF_LOST)
        COUNT(cs, PFR_CNT_UW_ASK_LOST);
}
#endif

/* The user stack of this sample into w: with unwind tables (the pfr_sample_uw program), else by
 * frame pointers. The frames, or -1 where neither applies (then the kernel walks). */
static __always_inline long user_stack(struct pfr_cpu_state *cs, struct bpf_perf_event_data *ctx,
                                       struct task_struct *task, int umode, struct pfr_walk *w,
                                       bool tables)
{
#if defined(__TARGET_ARCH_x86)
    if (tables) {
        __u64 ip, fp, sp;
        if (user_regs(ctx, task, umode, &ip, &fp, &sp)) {
            uw_note_lost(); /* the kernel's walk: its frames are not in the cache */
            return -1;
        }
        long n = pfr_unwind_user(w, ip, sp, fp);
        count_unwind(cs, &w->uw);
        return n;
    }
#endif
    return walk_user_stack(ctx, task, umode, w);
}

/* The interpreter frames of a Python process's sample after its n native frames (walked since
 * t0), counted and timed. Returns the new frame count. */
static __always_inline long py_stack(struct pfr_cpu_state *cs, struct pfr_walk *w, long n,
                                     __u32 tgid, __u32 tid, __u64 t0)
{
    __u64 t1 = bpf_ktime_get_ns();
    n = pfr_py_walk(w, (__u32)n, tgid, tid);
    cs->counters[PFR_CNT_PY_NATIVE_NS] += t1 - t0;
    cs->counters[PFR_CNT_PY_WALK_NS] += bpf_ktime_get_ns() - t1;
    __u32 f = w->py_flags;
    if (!(f & PFR_PYF_PYTHON))
        return n;
    COUNT(cs, PFR_CNT_PY_SAMPLES);
    if (f & PFR_PYF_WALKED)
        COUNT(cs, PFR_CNT_PY_STACKS);
    if (f & PFR_PYF_NO_THREAD)
        COUNT(cs, PFR_CNT_PY_NO_THREAD);
    if (f & PFR_PYF_CUT_READ)
        COUNT(cs, PFR_CNT_PY_CUT_READ);
    if (f & PFR_PYF_CUT_DEPTH)
        COUNT(cs, PFR_CNT_PY_CUT_DEPTH);
    cs->counters[PFR_CNT_PY_FRAMES] += w->py_frames;
    return n;
}

/* Store the stack of this sample (kernel or user): its id, or PFR_STACK_ERROR. */
static __always_inline __u64 sample_stack(struct pfr_cpu_state *cs, struct bpf_perf_event_data *ctx,
                                          struct task_struct *task, int umode, void *stacks,
                                          __u32 tag, __u32 kernel, bool tables)
{
    __u32 zero = 0;
    struct pfr_walk *w = bpf_map_lookup_elem(&scratch, &zero);
    if (!w)
        return PFR_STACK_ERROR;
    /* a Python process's samples are timed: the cost of its frames beside the native walk */
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    __u32 tgid = pid_tgid >> 32;
    bool py = !kernel && py_enabled && bpf_map_lookup_elem(&py_procs, &tgid);
    __u64 t0 = py ? bpf_ktime_get_ns() : 0;
    long n = kernel ? -1 : user_stack(cs, ctx, task, umode, w, tables);
    if (n < 0) {
        long len = bpf_get_stack(ctx, w->st.ips, sizeof(w->st.ips), kernel ? 0 : BPF_F_USER_STACK);
        n = len < 0 ? len : (long)((__u64)len / sizeof(__u64));
    }
    if (py && n > 0 && n <= PFR_MAX_STACK_DEPTH)
        n = py_stack(cs, w, n, tgid, (__u32)pid_tgid, t0);
    if (n <= 0) { /* unreadable, or empty where a stack was due */
        COUNT(cs, kernel ? PFR_CNT_KSTACK_ERR : PFR_CNT_USTACK_ERR);
        return PFR_STACK_ERROR;
    }
    w->st.nframes = (__u32)n;
    return store_stack(cs, w, stacks, kernel, tag);
}

static __always_inline void add_count(struct pfr_cpu_state *cs, void *counts,
                                      struct pfr_count_key *key, __u64 n)
{
    __u64 *v = bpf_map_lookup_elem(counts, key);
    if (v) {
        __sync_fetch_and_add(v, n);
        return;
    }
    long err = bpf_map_update_elem(counts, key, &n, BPF_NOEXIST);
    if (err == -EEXIST) { /* another CPU inserted it first */
        v = bpf_map_lookup_elem(counts, key);
        if (v)
            __sync_fetch_and_add(v, n);
        return;
    }
    if (err)
        cs->counters[PFR_CNT_COUNT_FULL] += n;
}

/* Count one sample of key: in its pending slot if the slot holds key, else the slot's count goes
 * to the count map and key takes the slot. */
static __always_inline void add_sample(struct pfr_cpu_state *cs, void *pending, void *counts,
                                       struct pfr_count_key *key)
{
    __u32 zero = 0;
    struct pfr_pending *p = bpf_map_lookup_elem(pending, &zero);
    if (!p) {
        add_count(cs, counts, key, 1);
        return;
    }
    struct pfr_pending_slot *s = &p->slot[pfr_pending_index(key) & (PFR_PENDING_SLOTS - 1)];
    if (s->count) {
        if (s->key.tgid == key->tgid && s->key.kstack == key->kstack &&
            s->key.ustack == key->ustack) {
            s->count += 1; /* per-CPU, and user space reads it only after the flip */
            return;
        }
        add_count(cs, counts, &s->key, s->count);
    }
    s->key = *key;
    s->count = 1;
}

static __always_inline void count_lost_event(void)
{
    struct pfr_cpu_state *cs = cpu_state_get();
    if (cs)
        COUNT(cs, PFR_CNT_EVENTS_LOST);
}

static __always_inline void fill_event(struct pfr_event *e, __u32 type, struct task_struct *task,
                                       __u32 tgid, __u64 start)
{
    struct task_struct *leader = BPF_CORE_READ(task, group_leader);
    e->type = type;
    e->tgid = tgid;
    e->start_time = start;
    e->cgroup_id = bpf_get_current_cgroup_id();
    e->flags = (BPF_CORE_READ(task, flags) & PF_KTHREAD) ? PFR_EVF_KTHREAD : 0;
    bpf_core_read_str(e->comm, sizeof(e->comm), &leader->comm);
    e->exe_ino = 0;
    e->exe_dev = 0;
    e->pad = 0;
    if (type != PFR_EV_EXIT) {
        struct inode *exe = BPF_CORE_READ(task, mm, exe_file, f_inode);
        if (exe) {
            e->exe_ino = BPF_CORE_READ(exe, i_ino);
            e->exe_dev = BPF_CORE_READ(exe, i_sb, s_dev);
        }
    }
}

/* A notification that need not wake user space (see emit()) still does once the ring is a
 * quarter full: a burst of them (exits with their mappings, a parallel build ending) must not
 * fill it. */
static __always_inline __u64 lazy_wakeup(void)
{
    return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > EVENTS_BYTES / 4 ? BPF_RB_FORCE_WAKEUP
                                                                            : BPF_RB_NO_WAKEUP;
}

static __always_inline int emit(__u32 type, struct task_struct *task, __u32 tgid, __u64 start)
{
    struct pfr_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost_event();
        return -1;
    }
    fill_event(e, type, task, tgid, start);
    struct pfr_file_key exe = {.ino = e->exe_ino, .dev = e->exe_dev};
    bool quiet = type == PFR_EV_EXIT || (exe.ino && bpf_map_lookup_elem(&named_files, &exe));
    /* A new process or image must be snapshotted while it lives: wake user space now. An exit
     * can wait for the next wake-up or the drain (which reads the ring first): most sampled
     * processes are short-lived, and a wake-up per exit was a third of the notification
     * thread's time on a host starting 100 processes a second. A forced wake-up after a quiet
     * one: the default wakes only a consumer that has read everything before the record. */
    bpf_ringbuf_submit(e, quiet ? lazy_wakeup() : BPF_RB_FORCE_WAKEUP);
    return 0;
}

/* Tell user space about a process it has not seen (or a new one reusing a known tgid). The
 * per-CPU memo of the last process noted here skips the known lookup while a CPU keeps sampling
 * the same process. */
static __always_inline void note_process(struct pfr_cpu_state *cs, struct task_struct *task,
                                         __u32 tgid)
{
    __u64 start = task->group_leader->start_time;
    __u32 gen = known_gen;
    if (cs->last_tgid == tgid && cs->last_start == start && cs->last_gen == gen)
        return;
    __u64 *seen = bpf_map_lookup_elem(&known, &tgid);
    if (!(seen && (*seen & ~KNOWN_UW) == start)) {
        if (bpf_map_update_elem(&known, &tgid, &start, seen ? BPF_ANY : BPF_NOEXIST))
            return; /* another CPU got there first */
        if (emit(PFR_EV_NEW, task, tgid, start)) {
            bpf_map_delete_elem(&known, &tgid); /* retry on the next sample */
            return;
        }
    }
    cs->last_tgid = tgid;
    cs->last_start = start;
    cs->last_gen = gen;
}

/* Processes sampled only while exiting, never announced (LRU: user space reads an entry at the
 * drain after, and forgets nothing; old ones just age out). */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, PFR_EXITING_MAX);
    __type(key, __u32);
    __type(value, struct pfr_exiting);
} exiting SEC(".maps");

/* An exiting task of a process user space was never told about: keep what names it. */
static __always_inline void note_exiting(struct task_struct *task, __u32 tgid)
{
    __u64 start = task->group_leader->start_time;
    __u64 *seen = bpf_map_lookup_elem(&known, &tgid);
    if (seen && (*seen & ~KNOWN_UW) == start)
        return;
    struct pfr_exiting *e = bpf_map_lookup_elem(&exiting, &tgid);
    if (e && e->start_time == start)
        return;
    struct pfr_exiting n = {.start_time = start, .cgroup_id = bpf_get_current_cgroup_id()};
    bpf_core_read_str(n.comm, sizeof(n.comm), &task->group_leader->comm);
    bpf_map_update_elem(&exiting, &tgid, &n, BPF_ANY);
}

/* One sample; tables: walk user stacks with unwind tables (a constant: each program below is
 * verified with its own walk). */
static __always_inline int sample(struct bpf_perf_event_data *ctx, bool tables)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct pfr_cpu_state *cs = cpu_state_get();
    if (!cs)
        return 0;
    if (tgid == 0) {
        COUNT(cs, PFR_CNT_IDLE);
        return 0;
    }
    /* A locked add orders this store before the load of active_buf below (full barrier on x86),
     * so once user space has flipped the buffer and seen inflight == 0 on a CPU, any later sample
     * on that CPU uses the new buffer. */
    __sync_fetch_and_add(&cs->inflight, 1);

    /* Read the buffer index before counting the sample: a sample counted before user space
     * flips is then always in the buffer it drains (tests check the drained totals against the
     * counter read just before and just after each flip). */
    __u32 tag = active_buf, buf = tag & 1;
    struct task_struct *task = bpf_get_current_task_btf();
    /* no user stack for kernel threads nor for a task whose mm is already gone */
    int no_user = (task->flags & PF_KTHREAD) || !task->mm;
    int umode = user_mode(ctx);
    struct pfr_count_key key = {.tgid = tgid};

    COUNT(cs, PFR_CNT_SAMPLES);
    /* A task sampled after its exit was reported must not be announced as new again. */
    if (!(task->flags & PF_EXITING))
        note_process(cs, task, tgid);
    else
        note_exiting(task, tgid);
    void *stacks = buf ? (void *)&stacks1 : (void *)&stacks0;
    if (umode != 1) {
        key.kstack = sample_stack(cs, ctx, task, umode, stacks, tag, 1, false);
        if (umode < 0 && key.kstack == PFR_STACK_ERROR)
            key.kstack = 0; /* most likely an empty kernel stack */
        /* Inside execve the saved user registers are the old image's until the new one starts,
         * while the mm may already be the new one's: a user stack read then is addresses of a
         * program no longer mapped ("[unknown]" frames). The sample keeps its kernel stack. */
        if (!no_user && bpf_core_field_exists(task->in_execve) &&
            BPF_CORE_READ_BITFIELD_PROBED(task, in_execve)) {
            no_user = 1;
            COUNT(cs, PFR_CNT_EXEC_NO_USTACK);
        }
    }
    if (!no_user)
        key.ustack = sample_stack(cs, ctx, task, umode, stacks, tag, 0, tables);
    if (buf)
        add_sample(cs, &pending1, &counts1, &key);
    else
        add_sample(cs, &pending0, &counts0, &key);
    __sync_fetch_and_add(&cs->inflight, -1);
    return 0;
}

/* The sampler of user stacks by frame pointers. */
SEC("perf_event")
int pfr_sample(struct bpf_perf_event_data *ctx)
{
    return sample(ctx, false);
}

/* The sampler of user stacks with unwind tables: a program of its own, loaded only where the
 * kernel can run it (bpf_find_vma and callbacks, Linux 5.17), so that the frame-pointer one
 * still loads on older kernels. */
SEC("perf_event")
int pfr_sample_uw(struct bpf_perf_event_data *ctx)
{
    return sample(ctx, true);
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

_Static_assert((PFR_EXIT_MAPS_MAX & (PFR_EXIT_MAPS_MAX - 1)) == 0,
               "PFR_EXIT_MAPS_MAX masks an index: a power of 2");

/* One mapping into m->maps[n]; returns it. The iterator's mappings are trusted pointers: read
 * by plain loads, not bpf_probe_read_kernel calls (an exit walks every mapping of its process:
 * 600-900 for a Chromium process). */
static __always_inline struct pfr_map_rec *add_map_rec(struct pfr_exit_maps *m, __u32 n,
                                                       struct vm_area_struct *vma, __u64 vdso)
{
    struct pfr_map_rec *r = &m->maps[n & (PFR_EXIT_MAPS_MAX - 1)];
    struct file *file = vma->vm_file;
    r->start = vma->vm_start;
    r->end = vma->vm_end;
    r->pgoff = vma->vm_pgoff << 12;
    r->ino = 0;
    r->dev = 0;
    if (file) {
        r->kind = PFR_MAPREC_FILE;
        r->ino = file->f_inode->i_ino;
        r->dev = file->f_inode->i_sb->s_dev;
    } else {
        r->kind = r->start == vdso ? PFR_MAPREC_VDSO : PFR_MAPREC_ANON;
    }
    return r;
}

#define PFR_PATH_MOUNTS 8

/* The path of the file at file_addr into e: its dentries up to their mount's root, then the
 * mount's mount point, and so on up to the root of the mount namespace. Components leaf first;
 * cut (flagged) past PFR_PATH_PARTS, at a longer component, past PFR_PATH_MOUNTS mounts stacked
 * on one directory, or at a root no mount leads to (a private mount's). Reads are racy by
 * nature; user space opens the path only where device and inode still match. */
static __always_inline void walk_path(struct pfr_path_event *e, __u64 file_addr)
{
    struct file *file = (struct file *)file_addr;
    struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
    struct vfsmount *vm = BPF_CORE_READ(file, f_path.mnt);
    /* container_of, with the offset relocated to the running kernel's struct mount */
    struct mount *mnt = (struct mount *)((char *)vm - bpf_core_field_offset(struct mount, mnt));
    e->nparts = 0;
    /* one component per step, after climbing the mounts d is the root of (one loop variable
     * each, so the verifier's states converge) */
    for (__u32 n = 0; n <= PFR_PATH_PARTS; n++) {
        for (int j = 0; j < PFR_PATH_MOUNTS; j++) {
            if (d != BPF_CORE_READ(mnt, mnt.mnt_root))
                break;
            struct mount *parent = BPF_CORE_READ(mnt, mnt_parent);
            if (!parent || parent == mnt) {
                e->nparts = n; /* the namespace's root: done */
                return;
            }
            d = BPF_CORE_READ(mnt, mnt_mountpoint);
            mnt = parent;
        }
        struct dentry *up = BPF_CORE_READ(d, d_parent);
        if (!up || up == d)
            break; /* a root the mounts did not lead to (a private mount's) */
        if (n == PFR_PATH_PARTS || BPF_CORE_READ(d, d_name.len) >= PFR_PATH_PART_LEN)
            break;
        bpf_probe_read_kernel_str(e->parts[n & (PFR_PATH_PARTS - 1)], PFR_PATH_PART_LEN,
                                  BPF_CORE_READ(d, d_name.name));
        d = up;
    }
    e->ev.flags |= PFR_EVF_PATH_CUT;
}

_Static_assert((PFR_PATH_PARTS & (PFR_PATH_PARTS - 1)) == 0,
               "PFR_PATH_PARTS masks an index: a power of 2");

/* Before an exit: the path of a file (struct file at file_addr) the exiting process maps code
 * from, unless user space can name it already. Global, so the verifier checks it once rather
 * than for every mapping of the walk that calls it. */
__noinline int pfr_emit_path(__u64 file_addr, __u64 ino, __u32 dev, __u32 tgid, __u64 start)
{
    struct pfr_file_key k = {.ino = ino, .dev = dev};
    if (!file_addr || bpf_map_lookup_elem(&named_files, &k))
        return 0;
    struct pfr_path_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        count_lost_event();
        return -1;
    }
    fill_event(&e->ev, PFR_EV_PATH, bpf_get_current_task_btf(), tgid, start);
    e->ino = ino;
    e->dev = dev;
    walk_path(e, file_addr);
    bpf_ringbuf_submit(e, lazy_wakeup());
    return 0;
}

/* An exit with the process's executable mappings, walked now that it can no longer map more:
 * what user space needs for a process that exited before it could read them, or that it saw
 * only in its loader. Returns 0 once sent, -1 if this kernel cannot walk them here (then a
 * plain exit is sent). */
static __always_inline int emit_exit_maps(struct task_struct *task, __u32 tgid, __u64 start)
{
    __u32 zero = 0;
    if (!bpf_iter_task_vma_new || !task->mm)
        return -1;
    struct exit_walk *w = bpf_map_lookup_elem(&exit_scratch, &zero);
    if (!w)
        return -1;
    struct pfr_exit_maps *m = &w->m;
    fill_event(&m->ev, PFR_EV_EXIT, task, tgid, start);
    m->nmaps = 0;
    m->pad = 0;
    w->visited = 0;
    w->last_ino = 0;
    w->last_dev = 0;
    __u64 vdso = (__u64)BPF_CORE_READ(task, mm, context.vdso);
    struct bpf_iter_task_vma it;
    struct vm_area_struct *vma;
    int rc = bpf_iter_task_vma_new(&it, task, 0);
    while (rc == 0 && (vma = bpf_iter_task_vma_next(&it))) {
        if (++w->visited > PFR_EXIT_VMAS_MAX) {
            m->ev.flags |= PFR_EVF_MAPS_CUT;
            break;
        }
        if (!(vma->vm_flags & VM_EXEC))
            continue;
        if (m->nmaps >= PFR_EXIT_MAPS_MAX) {
            m->ev.flags |= PFR_EVF_MAPS_CUT;
            break;
        }
        struct pfr_map_rec *r = add_map_rec(m, m->nmaps, vma, vdso);
        m->nmaps++;
        /* a file's code is mostly one mapping, its others adjacent: one path per file */
        if (r->kind == PFR_MAPREC_FILE && (r->ino != w->last_ino || r->dev != w->last_dev)) {
            w->last_ino = r->ino;
            w->last_dev = r->dev;
            /* (a scalar for the global function: a probe read, once per new file) */
            pfr_emit_path((__u64)BPF_CORE_READ(vma, vm_file), r->ino, r->dev, tgid, start);
        }
    }
    bpf_iter_task_vma_destroy(&it);
    if (rc != 0)
        return -1;
    m->ev.flags |= PFR_EVF_MAPS;
    __u32 n = m->nmaps;
    __u64 size =
        __builtin_offsetof(struct pfr_exit_maps, maps) +
        (__u64)(n > PFR_EXIT_MAPS_MAX ? PFR_EXIT_MAPS_MAX : n) * sizeof(struct pfr_map_rec);
    if (bpf_ringbuf_output(&events, m, size, lazy_wakeup()) != 0)
        count_lost_event();
    return 0;
}

#if defined(__TARGET_ARCH_x86)
/* Is page (an address >> 12) in one of the first n mappings of m? */
static __always_inline bool page_listed(const struct pfr_exit_maps *m, __u32 n, __u64 page)
{
    for (int j = 0; j < PFR_UW_PROC_VMAS + PFR_UW_PROC_MISSES; j++) {
        if (j >= n)
            break;
        const struct pfr_map_rec *r = &m->maps[j & (PFR_EXIT_MAPS_MAX - 1)];
        if (page >= r->start >> 12 && page < r->end >> 12)
            return true;
    }
    return false;
}
#endif

/* Mapping v as m->maps[n], if it is code and user space can name its file: 1 when added, 0
 * when it is no code (a pc there was a walk's garbage), -1 when its file cannot be named. */
static __always_inline int add_listed(struct pfr_exit_maps *m, __u32 n, const struct pfr_uw_vma *v)
{
    if (!v->exec)
        return 0;
    bool vdso = v->file && v->ino == PFR_UNWIND_VDSO_INO;
    if (v->file && !vdso) {
        struct pfr_file_key k = {.ino = v->ino, .dev = v->dev};
        if (!bpf_map_lookup_elem(&named_files, &k))
            return -1; /* the walk sends its path */
    }
    struct pfr_map_rec *r = &m->maps[n & (PFR_EXIT_MAPS_MAX - 1)];
    r->start = v->start;
    r->end = v->end;
    r->pgoff = v->pgoff;
    r->ino = vdso ? 0 : v->ino;
    r->dev = vdso ? 0 : v->dev;
    r->kind = vdso ? PFR_MAPREC_VDSO : v->file ? PFR_MAPREC_FILE : PFR_MAPREC_ANON;
    return 1;
}

/* An exit with the mappings the process's samples met, from the walk's cache (see struct
 * pfr_uw_proc), where they are all there and user space can name every file among them: the
 * walk of all its mappings costs ~250 ns a mapping (13 µs for a compiler's 55), and most
 * processes a busy host samples are short-lived. Returns 0 once sent, -1 where the walk must
 * do. */
static __always_inline int emit_sampled_maps(struct task_struct *task, __u32 tgid, __u64 start)
{
    __u32 zero = 0;
    struct pfr_uw_proc *p = bpf_map_lookup_elem(&uw_procs, &tgid);
    if (!p || p->mm != (__u64)task->mm || (p->flags & PFR_UWP_LOST))
        return -1;
    struct exit_walk *w = bpf_map_lookup_elem(&exit_scratch, &zero);
    if (!w)
        return -1;
    struct pfr_exit_maps *m = &w->m;
    __u32 n = 0;
    for (int j = 0; j < PFR_UW_PROC_VMAS; j++) {
        /* (an entry that is no code held a walk's garbage pc: the full walk lists none either) */
        int added = p->vma[j].end ? add_listed(m, n, &p->vma[j]) : 0;
        if (added < 0)
            return -1;
        n += added;
    }
#if defined(__TARGET_ARCH_x86)
    /* The pcs walked without their mapping, where no entry holds it: looked up now (here, with
     * interrupts on, bpf_find_vma may be called more than once). One in no mapping was a walk's
     * garbage. */
    __u32 nmiss = p->nmiss;
    for (int i = 0; i < PFR_UW_PROC_MISSES; i++) {
        if (i >= nmiss)
            break;
        __u64 page = p->miss[i & (PFR_UW_PROC_MISSES - 1)];
        if (page_listed(m, n, page))
            continue;
        struct pfr_uw_vma v = {};
        long rc = bpf_find_vma(task, page << 12, pfr_uw_vma_cb, &v, 0);
        if (rc == -ENOENT)
            continue;
        int added = rc == 0 ? add_listed(m, n, &v) : -1;
        if (added < 0)
            return -1;
        n += added;
    }
#endif
    fill_event(&m->ev, PFR_EV_EXIT, task, tgid, start);
    m->ev.flags |= PFR_EVF_MAPS | PFR_EVF_MAPS_SAMPLED;
    m->nmaps = n;
    m->pad = 0;
    __u64 max = PFR_UW_PROC_VMAS + PFR_UW_PROC_MISSES,
          size = __builtin_offsetof(struct pfr_exit_maps, maps) +
                 (__u64)(n > max ? max : n) * sizeof(struct pfr_map_rec);
    if (bpf_ringbuf_output(&events, m, size, lazy_wakeup()) != 0)
        count_lost_event();
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
    __u64 start = BPF_CORE_READ(task, group_leader, start_time);
    /* only where exits carry mappings anyway (user space relies on them there) */
    int sent = bpf_iter_task_vma_new ? emit_sampled_maps(task, tgid, start) : -1;
    bpf_map_delete_elem(&uw_procs, &tgid);
    if (sent != 0 && emit_exit_maps(task, tgid, start) != 0)
        emit(PFR_EV_EXIT, task, tgid, start);
    return 0;
}
