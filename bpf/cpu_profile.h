/*
 * Types shared by the CPU sampler (cpu_profile.bpf.c) and its loader
 * (recorder/cpu/cpu_profiler.c).
 *
 * Stacks are stored by content: the sampler copies a stack's frames into per-CPU scratch (user
 * stacks on x86-64 by walking the frame pointers itself, a page of stack per copy; other stacks
 * with bpf_get_stack), hashes them, and adds them to a hash map keyed by that 64-bit hash unless
 * they are there already. Kernel stack-trace maps (bpf_get_stackid) cost more per sample (their
 * bucket handling, ~1.5 µs here) and refuse a stack whose bucket holds another one; a hash map
 * loses a stack only when full, which the counters report.
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
 * could not be read or stored (counted in the counters). Otherwise it is the content hash under
 * which the stack is in the buffer's stack map, with PFR_STACK_HASHED set. */
struct pfr_count_key {
    __u32 tgid;
    __u32 pad;
    __u64 kstack;
    __u64 ustack;
};
#define PFR_STACK_ERROR  1ull
#define PFR_STACK_HASHED (1ull << 63)

/* Per-CPU counters, summed by the loader. */
enum pfr_counter {
    PFR_CNT_SAMPLES = 0,    /* samples taken (idle excluded) */
    PFR_CNT_IDLE,           /* samples that hit the idle task, not recorded */
    PFR_CNT_KSTACK_ERR,     /* kernel stack could not be read */
    PFR_CNT_USTACK_ERR,     /* user stack could not be read */
    PFR_CNT_STACK_FULL,     /* a stack map was full: stack recorded as PFR_STACK_ERROR */
    PFR_CNT_COUNT_FULL,     /* a count map was full: sample lost */
    PFR_CNT_EVENTS_LOST,    /* ring buffer full: a process notification was dropped */
    PFR_CNT_STACK_NEW,      /* stacks added to a stack map (the others were there already) */
    PFR_CNT_EXEC_NO_USTACK, /* sampled inside execve: user stack not read (see the sampler) */
    /* User stacks walked with unwind tables on (unwind.bpf.h): */
    PFR_CNT_UW_DWARF,     /* stacks with at least one frame found by a table */
    PFR_CNT_UW_FP,        /* stacks walked by frame pointers only */
    PFR_CNT_UW_FRAMES,    /* frames found by tables */
    PFR_CNT_UW_END,       /* stacks walked to their outermost frame (a table said so) */
    PFR_CNT_UW_PENDING,   /* stacks that met a file whose table was not in place yet */
    PFR_CNT_UW_NO_ROW,    /* stacks that met a pc its file's table has no rule for */
    PFR_CNT_UW_BUSY,      /* stacks with a frame walked by frame pointer: mappings locked */
    PFR_CNT_UW_VMA_MISS,  /* stacks with a frame walked by frame pointer: its mapping not in
                           * the process's cache yet (one is looked up per sample) */
    PFR_CNT_UW_CUT_READ,  /* walks cut: a table's rule led to unreadable or wrong memory */
    PFR_CNT_UW_CUT_MAP,   /* walks cut: a return address in no mapping */
    PFR_CNT_UW_CUT_DEPTH, /* walks cut at PFR_MAX_STACK_DEPTH frames */
    PFR_CNT_UW_ASK_LOST,  /* requests for a table dropped (ring buffer full), asked again */
    /* Python processes (struct pfr_py_proc): */
    PFR_CNT_PY_SAMPLES,   /* samples of a thread of a Python process */
    PFR_CNT_PY_STACKS,    /* ... whose thread state was found: interpreter frames walked */
    PFR_CNT_PY_FRAMES,    /* interpreter frames recorded */
    PFR_CNT_PY_NO_THREAD, /* ... no thread state names the sampled thread (a native thread) */
    PFR_CNT_PY_CUT_READ,  /* walks cut: a frame could not be read */
    PFR_CNT_PY_CUT_DEPTH, /* walks cut at PFR_MAX_STACK_DEPTH frames or PFR_PY_MAX_FRAMES */
    PFR_CNT_PY_NATIVE_NS, /* time of the native user stack walk of these samples, ns */
    PFR_CNT_PY_WALK_NS,   /* time of their interpreter frame walk, ns */
    PFR_CNT_MAX,
};

/* Per-CPU, per-buffer cache of the last counts, direct-mapped by key: a sample whose key is in
 * its slot only increments it; one that is not moves the slot's count into the count map (a hash
 * map lookup, the costlier part of counting) and takes the slot. User space adds the slots of the
 * buffer it drains to the count map's entries. */
#define PFR_PENDING_BITS  8
#define PFR_PENDING_SLOTS (1u << PFR_PENDING_BITS)
struct pfr_pending_slot {
    struct pfr_count_key key;
    __u64 count; /* 0 = free */
};
struct pfr_pending {
    struct pfr_pending_slot slot[PFR_PENDING_SLOTS];
};

static inline __u32 pfr_pending_index(const struct pfr_count_key *k)
{
    __u64 h = k->tgid + k->kstack * 0x9e3779b97f4a7c15ull + k->ustack * 0xc2b2ae3d27d4eb4full;
    return (__u32)(h >> (64 - PFR_PENDING_BITS)) & (PFR_PENDING_SLOTS - 1);
}

/* Per-CPU scratch of the sampler: the stack being stored, and the window of user stack the
 * frame-pointer walk reads from (PFR_WALK_PAGE bytes at most, never across a page boundary: a
 * mapped page is readable as a whole or not at all, as each frame is for the kernel's walk). */
#define PFR_WALK_PAGE 4096

/* The mapping a walk met last: its range and its file's rows (what uw_map looks up, and the
 * per-CPU memo of struct pfr_uw_mapc keeps). */
struct pfr_uw_placed {
    __u64 start, end, adj;                   /* file vaddr - base = pc + adj */
    __u32 first, nrows;                      /* its file's rows (nrows 0: none, frame pointers) */
    __u32 gen;                               /* its table's load (pfr_unwind_file.gen) */
    __u32 index_first, index_n, index_shift; /* its table's index (pfr_unwind_file.index_*) */
};

/* State of a walk with unwind tables (unwind.bpf.h), one frame to the next. */
struct pfr_uw_state {
    __u64 pc, sp, bp;         /* the frame's registers */
    __u64 lo, hi;             /* user addresses [lo, hi) are copied in the page */
    struct pfr_uw_placed map; /* the last mapping met */
    __u32 is_ra;              /* pc is a return address (look up pc - 1) */
    __u32 flags;              /* PFR_UWF_* */
    __u32 dwarf_frames;       /* frames found by tables */
    __u32 vma_looked_up;      /* bpf_find_vma was called in this sample (once only) */
    __u64 now;                /* bpf_ktime_get_ns() at the walk's start */
    __u64 mm;                 /* the sampled process's (struct pfr_uw_mapc's key, with tgid) */
    __u32 tgid;
    __u32 files_gen; /* uw_files_gen at the walk's start */
};

/* Per-CPU memo of the rules found, direct-mapped by (table load, address in the file): a frame
 * met in an earlier sample skips the binary search (steady stacks repeat their frames). */
#define PFR_UW_MEMO_SLOTS 512
struct pfr_uw_memo {
    __u64 key; /* gen << 32 | file vaddr - base; 0 = empty */
    __u32 rule;
    __u32 pad;
};
#define PFR_UWF_PENDING   1u   /* met a file whose table is not in place yet */
#define PFR_UWF_BUSY      2u   /* bpf_find_vma refused (mappings being changed) */
#define PFR_UWF_CUT_MAP   4u   /* a pc in no mapping */
#define PFR_UWF_CUT_READ  8u   /* a rule led to unreadable or wrong memory */
#define PFR_UWF_CUT_DEPTH 16u  /* PFR_MAX_STACK_DEPTH reached */
#define PFR_UWF_END       32u  /* a table said the outermost frame was reached */
#define PFR_UWF_NO_ROW    64u  /* a pc in a file with a table, but no rule for it */
#define PFR_UWF_LOST      128u /* a request for a table was dropped */
#define PFR_UWF_VMA_MISS  256u /* a pc whose mapping was not cached, after this sample's lookup */

/* Per process, the mappings the walk met, so that a sample needs bpf_find_vma for one new
 * mapping at most: the helper defers releasing the mappings' lock to an irq_work when called
 * with interrupts off, and refuses a second call before that work has run, i.e. within the
 * same sample. Valid for one mm (an exec replaces it) and refreshed after PFR_UW_VMA_TTL_NS. */
#define PFR_UW_PROC_VMAS  16
#define PFR_UW_VMA_TTL_NS (10ull * 1000000000)
struct pfr_uw_vma {
    __u64 start, end, pgoff, ino;
    __u32 dev;
    __u32 file; /* 1 if file-backed */
    __u64 seen; /* bpf_ktime_get_ns() of the lookup */
    __u32 exec; /* 1 if executable */
    __u32 pad;
};
/* The entries also tell the exit which mappings the process's samples met (see the exit in
 * cpu_profile.bpf.c): complete unless PFR_UWP_LOST says an entry a sample used was replaced by
 * another mapping, or a walk went without them; the pages of pcs walked without their mapping
 * (PFR_UWF_VMA_MISS, PFR_UWF_BUSY) are kept, for the exit to look up. */
#define PFR_UW_PROC_MISSES 8
#define PFR_UWP_LOST       1u
struct pfr_uw_proc {
    __u64 mm;    /* the mm the entries belong to */
    __u32 next;  /* the slot to fill next (round robin) */
    __u32 flags; /* PFR_UWP_* */
    __u32 nmiss; /* pages in miss[] */
    __u32 pad;
    __u64 miss[PFR_UW_PROC_MISSES]; /* pc >> 12 */
    struct pfr_uw_vma vma[PFR_UW_PROC_VMAS];
};

/* Per-CPU memo of the mappings the last walks placed (uw_map's answer: the range and its file's
 * rows), so that a walk coming back to a mapping (a program's frames around libc's), or the next
 * sample of the same process, skips the process's entry and its file's: two hash lookups, ~0.8
 * µs a switch here, most of a walk's cost after the frames themselves. An entry holds while
 * unwind_files is unchanged (user space bumps uw_files_gen at every change, so no entry outlives
 * a table's eviction and the reuse of its rows) and for PFR_UW_MAPC_TTL_NS after its lookup,
 * well within the process's own entry's PFR_UW_VMA_TTL_NS and often enough that the file's
 * last_used (what eviction goes by) stays current. */
#define PFR_UW_MAPC_SLOTS  8
#define PFR_UW_MAPC_TTL_NS (500ull * 1000000)
struct pfr_uw_mapc {
    __u64 mm;
    __u64 checked; /* bpf_ktime_get_ns() of the lookup */
    __u32 tgid, files_gen;
    struct pfr_uw_placed map;
    __u32 pending; /* a file whose table is not in place yet (PFR_UWF_PENDING) */
    __u32 pad;
};

/* Per-CPU memo of the stacks this CPU stored in the active buffer's stack map (their ids,
 * direct-mapped), so a stack met again skips the map's lookup (~1 µs here: a random bucket of a
 * large map, a TLB miss in a guest). Tagged with active_buf's whole value: user space counts
 * its flips up and empties a map only after flipping away from it, so a memo made before any
 * later flip is never trusted again. */
#define PFR_STORED_SLOTS 64

struct pfr_walk {
    struct pfr_stack st;
    struct pfr_uw_state uw;
    __u8 page[PFR_WALK_PAGE];
    struct pfr_uw_memo memo[PFR_UW_MEMO_SLOTS];
    struct pfr_uw_mapc mapc[PFR_UW_MAPC_SLOTS];
    __u32 mapc_next;  /* the slot to fill next (round robin) */
    __u32 stored_tag; /* active_buf when stored[] was begun */
    __u64 stored[PFR_STORED_SLOTS];
    __u32 py_frames; /* interpreter frames appended by the last Python walk */
    __u32 py_flags;  /* PFR_PYF_* of that walk */
};
#define PFR_PYF_PYTHON    1u  /* the process is a Python process */
#define PFR_PYF_NO_THREAD 2u  /* no thread state names the sampled thread */
#define PFR_PYF_WALKED    4u  /* its thread state was found: frames walked */
#define PFR_PYF_CUT_READ  8u  /* a frame could not be read */
#define PFR_PYF_CUT_DEPTH 16u /* frames left: the stack or PFR_PY_MAX_FRAMES was full */

/* Per-CPU state of the sampler: one map lookup per sample. */
struct pfr_cpu_state {
    __u64 inflight;   /* non-zero while this CPU is inside the sampler */
    __u32 last_tgid;  /* process of the last sample here that user space knows about ... */
    __u32 last_gen;   /* ... as of this known_gen ... */
    __u64 last_start; /* ... and its group leader's start time */
    __u64 counters[PFR_CNT_MAX];
};

/* Notifications to user space, through the ring buffer. */
enum pfr_event_type {
    PFR_EV_NEW = 1, /* first sample of a process (or of a new process reusing a tgid) */
    PFR_EV_EXEC,    /* a known process called exec: mappings and comm changed */
    PFR_EV_EXIT,    /* the last thread of a known process exited */
    PFR_EV_PATH,    /* sent before an exit with mappings: the path of a file it maps code
                     * from that user space cannot name yet (struct pfr_path_event) */
    PFR_EV_UNWIND,  /* a file the sampler has no unwind table for (struct pfr_unwind_req) */
};

struct pfr_event {
    __u32 type;
    __u32 tgid;
    __u64 start_time; /* group leader's start time (ns since boot): tells tgid reuse apart */
    __u64 cgroup_id;
    __u32 flags;                  /* PFR_EVF_* */
    char comm[PFR_TASK_COMM_LEN]; /* the group leader's comm */
    /* The executable's inode and device (kernel dev_t: major << 20 | minor), 0 when there is
     * none or for an exit: user space finds its path among the snapshotted mappings instead of
     * reading /proc/PID/exe, a path walk that was the costliest step per new process. */
    __u64 exe_ino;
    __u32 exe_dev;
    __u32 pad;
};
#define PFR_EVF_KTHREAD 1u

/* A process first sampled while it exits (it is never announced: see the sampler), as the
 * sampler saw it: its samples are named from its cgroup, which outlives its /proc entry. */
struct pfr_exiting {
    __u64 start_time; /* group leader's start time */
    __u64 cgroup_id;
    char comm[PFR_TASK_COMM_LEN]; /* the group leader's comm */
};
#define PFR_EXITING_MAX 4096
/* An exit that carries the process's executable mappings as its last moment saw them: the event
 * is then the head of a struct pfr_exit_maps. Sent on kernels whose BPF can walk a task's
 * mappings at exit (the task_vma iterator, with mm still set at sched_process_exit); user space
 * takes them for a process whose own snapshot came too late or saw only its loader. */
#define PFR_EVF_MAPS 2u
/* More executable mappings than an exit carries (or than the walk visits): the list is cut. */
#define PFR_EVF_MAPS_CUT 4u
/* The mappings are those the process's samples met (the walk's cache, in no order), not every
 * executable one: all its samples need, for the cost of no walk of its mappings. */
#define PFR_EVF_MAPS_SAMPLED 16u

/* Executable mappings per exit, and mappings visited to find them (a bound on the time the walk
 * takes in the exiting task: a few µs for a typical process). */
#define PFR_EXIT_MAPS_MAX 64
#define PFR_EXIT_VMAS_MAX 4096

enum pfr_map_kind {
    PFR_MAPREC_FILE = 0, /* file-backed: known to user space by dev and ino */
    PFR_MAPREC_VDSO,
    PFR_MAPREC_ANON, /* JIT code and the like */
};

struct pfr_map_rec {
    __u64 start, end;
    __u64 pgoff; /* bytes */
    __u64 ino;
    __u32 dev;  /* kernel dev_t, as in pfr_event */
    __u32 kind; /* enum pfr_map_kind */
};

/* An executable (or any file) by inode and device (kernel dev_t, as in pfr_event). */
struct pfr_file_key {
    __u64 ino;
    __u32 dev;
    __u32 pad;
};
/* Files user space can name from an exit's mapping list, their paths learned from snapshots
 * (see the sampler's named_files): as large as the symbolizer's memo of paths. */
#define PFR_NAMED_FILES_MAX 4096

/* The path of a mapped file, as the kernel's dentries and mounts give it up to the root of the
 * exiting process's mount namespace: for code the process mapped after its snapshot (a
 * dlopen) from a file no snapshot saw, its exit could not name otherwise. Components leaf
 * first; a path deeper than PFR_PATH_PARTS, or with a longer component, is cut (flags). */
#define PFR_PATH_PARTS    16
#define PFR_PATH_PART_LEN 64
#define PFR_EVF_PATH_CUT  8u
struct pfr_path_event {
    struct pfr_event ev; /* type PFR_EV_PATH, of the exiting process */
    __u64 ino;
    __u32 dev; /* kernel dev_t, as in pfr_event */
    __u32 nparts;
    char parts[PFR_PATH_PARTS][PFR_PATH_PART_LEN]; /* NUL-terminated, leaf first */
};

struct pfr_exit_maps {
    struct pfr_event ev; /* type PFR_EV_EXIT, flags has PFR_EVF_MAPS */
    __u32 nmaps;
    __u32 pad;
    struct pfr_map_rec maps[PFR_EXIT_MAPS_MAX]; /* by address; only nmaps are sent */
};

/* ---- Unwind tables (.eh_frame / .debug_frame), for user code built without frame pointers ----
 *
 * User space turns each executable file's call-frame information into rows, sorted by address,
 * each valid from its pc up to the next row's: how to find the caller's frame from there. The
 * rows of every file live in one array map (unwind_rows), a file's rows contiguous; a hash map
 * (unwind_files) gives a file's place in it by (dev, ino), as the sampler finds the file of a
 * pc from the task's mappings. x86-64 rules only for now; the kind field leaves room for arm64's.
 */

/* What a row says about the frame of a pc (kind, 4 bits). */
enum pfr_unwind_kind {
    PFR_UW_NONE = 0,      /* no rule known here: walk this frame by its frame pointer */
    PFR_UW_CFA_RSP,       /* CFA = rsp + off */
    PFR_UW_CFA_RBP,       /* CFA = rbp + off */
    PFR_UW_PLT,           /* a PLT stub: CFA = rsp + off + ((rip & 15) >= arg ? 8 : 0) */
    PFR_UW_SIGNAL,        /* a signal trampoline: the interrupted registers are in the ucontext
                           * at rsp (the kernel's rt_sigframe, pretcode popped) */
    PFR_UW_END,           /* the outermost frame (return address undefined): the stack is whole */
    PFR_UW_CFA_DEREF_RBP, /* CFA = *(rbp + off), off signed; the caller's rbp at rbp + 8 * arg
                           * (gcc's prologue that realigns the stack: CFA = *(rbp - 8), arg 0) */
    PFR_UW_KINDS,
};

/* A row's rule, packed in 32 bits: kind (bits 0-3); arg (bits 4-11, signed): the slot where the
 * caller's rbp was saved, at CFA + 8 * arg (0: rbp unchanged), or a PLT's threshold; off (bits
 * 12-31, unsigned, bytes; signed for PFR_UW_CFA_DEREF_RBP): the CFA's offset. The return
 * address is always at CFA - 8 on x86-64. An offset or slot out of range makes the row
 * PFR_UW_NONE. */
#define PFR_UW_OFF_MAX ((1u << 20) - 1)
#define PFR_UW_ARG_MIN (-128)
#define PFR_UW_ARG_MAX 127
#define PFR_UW_RULE(kind, arg, off)                                                                \
    ((__u32)(kind) | ((__u32)((arg)&0xff) << 4) | ((__u32)(off) << 12))
#define PFR_UW_RULE_KIND(r) ((r)&0xf)
#define PFR_UW_RULE_ARG(r)  ((int)(signed char)(((r) >> 4) & 0xff))
#define PFR_UW_RULE_OFF(r)  ((r) >> 12)
#define PFR_UW_RULE_SOFF(r) ((__s64)((__s32)(r) >> 12)) /* the offset, signed */

struct pfr_unwind_row {
    __u32 pc;   /* the row's first address: file virtual address - pfr_unwind_file.base */
    __u32 rule; /* PFR_UW_RULE() */
};

/* A file's rows, by (dev, ino) (struct pfr_file_key). nrows 0: the file has no table (none in
 * the file, or it keeps frame pointers, as Go's code does): its frames are walked by frame
 * pointers and the sampler does not ask again. */
struct pfr_unwind_file {
    __u64 base;  /* file virtual address of row pc 0 */
    __u64 delta; /* p_vaddr - p_offset of the file's executable segment */
    __u32 first; /* index of its first row in unwind_rows */
    __u32 nrows;
    __u32 last_used; /* written by the sampler (bpf_ktime_get_ns() >> 30): for LRU eviction */
    __u32 gen;       /* this load of the table (never 0): keys the sampler's memo of rules */
    /* The index in front of the rows (recorder/unwind/unwind_index.h), index_n entries from
     * index_first in unwind_rows, one per 2^index_shift bytes of row pcs: entry g's pc is the
     * first row (from first) to search for an address of granule g, its rule their count.
     * index_n 0: the whole table is searched. */
    __u32 index_first;
    __u32 index_n;
    __u32 index_shift;
    __u32 pad;
};

/* Asked by the sampler the first time it meets a file mapped executable with no entry in
 * unwind_files (at most once per file until user space drops the file): the mapping that
 * holds it, in the sampled process. */
struct pfr_unwind_req {
    struct pfr_event ev; /* type PFR_EV_UNWIND */
    __u64 start, end;    /* the mapping */
    __u64 pgoff;         /* bytes */
    __u64 ino;
    __u32 dev; /* kernel dev_t, as in pfr_event */
    __u32 pad;
    __u64 asked_ns; /* when the sampler asked (bpf_ktime_get_ns: CLOCK_MONOTONIC); 0: unknown */
};

/* The vDSO has no file: the sampler asks for its table under this key (dev 0). It is the same
 * image in every 64-bit process of a kernel, so user space builds it from its own. */
#define PFR_UNWIND_VDSO_INO (~0ull)

/* Default cap of unwind_rows (rows of 8 bytes): 4 Mi rows, 32 MiB (a build host's compilers
 * alone, cc1 and clang's libLLVM and libclang-cpp, take 23 MiB). */
#define PFR_UNWIND_ROWS_DEFAULT (4u << 20)
/* Files with a table (or known to have none) at once. */
#define PFR_UNWIND_FILES_MAX 4096

/* ---- Python interpreter frames (CPython 3.8+) ----
 *
 * For a process user space found to run CPython (recorder/python/), py_procs holds where its
 * thread states are and the layout of its version. The sampler finds the thread state of the
 * sampled thread (the one whose thread id field is the thread's: any thread, not only the one
 * holding the GIL) and appends the thread's interpreter frames to the user stack, innermost
 * first, after the native frames: per frame the code object's address and the instruction's
 * index, tagged so that no native address can be taken for one. User space reads the code
 * objects and puts each group of frames in the place of the _PyEval_EvalFrameDefault
 * activation that ran them (PFR_PY_ENTRY ends a group). 3.11+ keep their frames in a data stack
 * of _PyInterpreterFrames; 3.8-3.10's frames are PyFrameObjects on the heap, linked by f_back,
 * each run by an activation of its own (PFR_PY_FRAMES_OBJECT). */
#define PFR_PY_MAX_FRAMES    PFR_MAX_STACK_DEPTH /* interpreter frames walked per sample */
#define PFR_PY_MAX_THREADS   64  /* thread states looked at to find the sampled thread's */
#define PFR_PY_FRAME_READ    80  /* bytes of a frame read at once: covers every field used */
#define PFR_PY_OBJ_READ      112 /* bytes of a PyFrameObject read (3.8-3.10): f_back .. f_lasti */
#define PFR_PY_OFF_NONE      0xffff
#define PFR_PY_FRAMES_INTERP 0 /* _PyInterpreterFrame (3.11+) */
#define PFR_PY_FRAMES_OBJECT 1 /* PyFrameObject (3.8-3.10): f_previous is f_back */

struct pfr_py_proc {
    __u64 interp_head; /* address of _PyRuntime.interpreters.head */
    /* PFR_PY_FRAMES_OBJECT: _PyEval_EvalFrameDefault's code [eval_lo, eval_hi) (0, 0: unknown),
     * to keep room for the Python frame of each activation among the native frames kept */
    __u64 eval_lo, eval_hi;
    __u16 is_threads_head, ts_next, ts_tid, ts_frame;
    __u16 cf_frame; /* PFR_PY_OFF_NONE: ts_frame points at the frame itself */
    __u16 f_code, f_previous, f_instr, f_owner;
    __u16 f_is_entry;  /* PFR_PY_OFF_NONE: none (3.12+: C entry frames are owner_cstack) */
    __u16 co_code;     /* offset of the first instruction in a code object */
    __u8 tid_kind;     /* 0: native thread id (pid namespace's), 1: pthread_self (fs base) */
    __u8 owner_cstack; /* 0xff: none */
    __u8 frame_kind;   /* PFR_PY_FRAMES_* */
    __u8 lasti_shift;  /* PFR_PY_FRAMES_OBJECT: instruction index = f_lasti >> lasti_shift */
    __u16 f_lasti;     /* PFR_PY_FRAMES_OBJECT: offset of the int f_lasti */
};

/* A frame in a stack: bits 61-63 = 0b101 (never those of a user address), bit 60 = the last
 * frame of its _PyEval_EvalFrameDefault activation, bits 16-59 = code object address / 8,
 * bits 0-15 = instruction index + 1 (0: before the first; capped). Code address 0: the frame
 * could not be read. */
#define PFR_PY_FRAME_TAG 5ull
#define PFR_PY_ENTRY     (1ull << 60)
#define PFR_PY_UNIT_MAX  0xffffull
static inline __u64 pfr_py_frame_make(__u64 code, __u64 unit1, int entry)
{
    return (PFR_PY_FRAME_TAG << 61) | (entry ? PFR_PY_ENTRY : 0) |
           (((code >> 3) & ((1ull << 44) - 1)) << 16) |
           (unit1 > PFR_PY_UNIT_MAX ? PFR_PY_UNIT_MAX : unit1);
}
static inline int pfr_py_frame_is(__u64 v)
{
    return (v >> 61) == PFR_PY_FRAME_TAG;
}
static inline __u64 pfr_py_frame_code(__u64 v)
{
    return ((v >> 16) & ((1ull << 44) - 1)) << 3;
}
static inline __u32 pfr_py_frame_unit1(__u64 v)
{
    return (__u32)(v & PFR_PY_UNIT_MAX);
}
static inline int pfr_py_frame_entry(__u64 v)
{
    return (v & PFR_PY_ENTRY) != 0;
}

#endif
