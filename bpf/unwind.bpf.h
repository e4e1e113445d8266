/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0) */
/*
 * User stacks walked with unwind tables (x86-64): for code built without frame pointers, where
 * the frame-pointer walk of user_stack.bpf.h loses callers or stops. Included by the sampler
 * (cpu_profile.bpf.c) after user_stack.bpf.h.
 *
 * Per frame: the mapping of the pc (consecutive frames in one mapping reuse it; a switch looks
 * in the process's cache, uw_procs, filled by bpf_find_vma at most once per sample), its
 * file's place in unwind_rows (unwind_files, by dev and ino), the row covering the pc (a
 * per-CPU memo, else a binary search in the rows its table's index names), then the row's rule
 * gives the caller's rsp, rbp and return address. Code with no table (JIT code, Go, a file whose
 * table is not built yet or was evicted) is walked by its frame pointer, so mixed stacks (native ->
 * Go, kernel -> user) keep their frames. A file met without a table is asked for once through the
 * ring buffer (PFR_EV_UNWIND); user space builds it off the sampling path.
 *
 * Every read of stack memory goes through a window: where an address is known to be stack, its
 * page from the frame's sp on is copied once, and the reads that follow are served from it.
 *
 * Needs bpf_find_vma (Linux 5.17): only the pfr_sample_uw program uses it, and the loader loads
 * that program only where the kernel has it.
 */
#ifndef PFR_UNWIND_BPF_H
#define PFR_UNWIND_BPF_H

/* The maps are declared on every architecture, so that the skeleton user space is built against
 * has the same members everywhere; only x86-64 walks with them (elsewhere the loader sizes
 * unwind_rows to one row and loads pfr_sample, which does not use them). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1); /* set by the loader: the configured cap */
    __type(key, __u32);
    __type(value, struct pfr_unwind_row);
} unwind_rows SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PFR_UNWIND_FILES_MAX);
    __type(key, struct pfr_file_key);
    __type(value, struct pfr_unwind_file);
} unwind_files SEC(".maps");

/* Files asked for and not answered yet: a file is asked once, not at every sample until its
 * table is in. User space deletes the key when it drops a file. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, PFR_UNWIND_FILES_MAX);
    __type(key, struct pfr_file_key);
    __type(value, __u8);
} unwind_asked SEC(".maps");

/* Mappings met by the walk, per process (see struct pfr_uw_proc). */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct pfr_uw_proc);
} uw_procs SEC(".maps");

#if defined(__TARGET_ARCH_x86)

#ifndef ENOENT
#define ENOENT 2
#endif

/* Offsets in the x86-64 rt_sigframe as a signal handler returns into the trampoline (pretcode
 * popped, rsp at the ucontext): uc_mcontext is at 40, its rbp, rsp and rip at 80, 120, 128. */
#define PFR_SIG_RBP 120
#define PFR_SIG_RSP 160
#define PFR_SIG_RIP 168

/* Bits of the binary search: rows per file at most 2^24. */
#define PFR_UW_SEARCH_STEPS 24

static const struct pfr_uw_proc uw_proc_zero;

static long pfr_uw_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
    struct pfr_uw_vma *v = data;
    struct file *f = vma->vm_file;
    v->start = vma->vm_start;
    v->end = vma->vm_end;
    v->pgoff = vma->vm_pgoff << 12;
    v->file = 0;
    v->exec = (vma->vm_flags & VM_EXEC) ? 1 : 0;
    if (f) {
        v->ino = BPF_CORE_READ(f, f_inode, i_ino);
        v->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
        v->file = 1;
    } else if ((__u64)BPF_CORE_READ(vma, vm_mm, context.vdso) == v->start) {
        v->ino = PFR_UNWIND_VDSO_INO;
        v->dev = 0;
        v->file = 1;
    }
    return 0;
}

/* 8 bytes of user memory at addr through the window (see the top). near: addr is known to be
 * stack, so the rest of its page may be copied. 0, or -1 if unreadable. */
static __always_inline int uw_read(struct pfr_walk *w, __u64 addr, int near, __u64 *val)
{
    struct pfr_uw_state *u = &w->uw;
    if (!(addr >= u->lo && addr + 8 <= u->hi)) {
        if (!near || PFR_WALK_PAGE - (addr & (PFR_WALK_PAGE - 1)) < 8)
            return bpf_probe_read_user(val, 8, (void *)addr) ? -1 : 0;
        /* from the frame's sp on (the stack between it and addr is as readable), so that the
         * frame's other reads (its saved rbp, below the return address) are in the copy too */
        __u64 page = addr & ~(__u64)(PFR_WALK_PAGE - 1), start = addr;
        if (u->sp <= addr)
            start = u->sp > page ? u->sp : page;
        __u64 len = page + PFR_WALK_PAGE - start;
        u->lo = u->hi = 0;
        if (len > PFR_WALK_PAGE || bpf_probe_read_user(w->page, len, (void *)start))
            return -1;
        u->lo = start;
        u->hi = start + len;
    }
    __u64 off = addr - u->lo;
    if (off > PFR_WALK_PAGE - 8)
        return -1; /* cannot happen; tells the verifier */
    *val = *(__u64 *)(w->page + off);
    return 0;
}

/* Ask user space for the table of the file of v (once, until it answers or drops the file). */
static __always_inline void uw_ask(struct pfr_walk *w, const struct pfr_uw_vma *v)
{
    struct pfr_file_key k = {.ino = v->ino, .dev = v->dev};
    __u8 one = 1;
    if (bpf_map_update_elem(&unwind_asked, &k, &one, BPF_NOEXIST))
        return; /* asked already (or another CPU is asking now) */
    struct pfr_unwind_req *r = bpf_ringbuf_reserve(&unwind_asks, sizeof(*r), 0);
    if (!r) {
        bpf_map_delete_elem(&unwind_asked, &k); /* ask again at a later sample */
        w->uw.flags |= PFR_UWF_LOST;
        return;
    }
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    __builtin_memset(&r->ev, 0, sizeof(r->ev));
    r->ev.type = PFR_EV_UNWIND;
    r->ev.tgid = pid_tgid >> 32;
    r->start = v->start;
    r->end = v->end;
    r->pgoff = v->pgoff;
    r->ino = v->ino;
    r->dev = v->dev;
    r->pad = 0;
    r->asked_ns = bpf_ktime_get_ns(); /* the wait counted from here, the ring's included */
    bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

/* The process's entry for mm, emptied if it held another mm's (a new process reusing the tgid,
 * or an exec); created if missing. NULL if the map has no room. An entry made again (the LRU
 * map evicted the first, with the mappings of earlier samples: KNOWN_UW in the process's known
 * entry says one was made) cannot say they are all there (PFR_UWP_LOST). */
static __always_inline struct pfr_uw_proc *uw_proc(__u32 tgid, __u64 mm)
{
    struct pfr_uw_proc *p = bpf_map_lookup_elem(&uw_procs, &tgid);
    bool created = false;
    if (!p) {
        bpf_map_update_elem(&uw_procs, &tgid, &uw_proc_zero, BPF_NOEXIST);
        p = bpf_map_lookup_elem(&uw_procs, &tgid);
        if (!p)
            return NULL;
        created = true;
    }
    if (p->mm != mm) {
        for (int i = 0; i < PFR_UW_PROC_VMAS; i++)
            p->vma[i].end = 0;
        p->mm = mm;
        p->next = 0;
        p->flags = 0;
        p->nmiss = 0;
    }
    if (created) {
        __u64 *k = bpf_map_lookup_elem(&known, &tgid);
        if (!k || (__sync_fetch_and_or(k, KNOWN_UW) & KNOWN_UW))
            p->flags |= PFR_UWP_LOST;
    }
    return p;
}

/* The entry of the sampled process (uw_proc). */
static __always_inline struct pfr_uw_proc *uw_proc_current(void)
{
    struct task_struct *task = bpf_get_current_task_btf();
    return uw_proc(bpf_get_current_pid_tgid() >> 32, (__u64)task->mm);
}

/* A sample's user stack read without the walk (and so without its cache): the exit cannot say
 * which mappings it needs. */
static __always_inline void uw_note_lost(void)
{
    struct pfr_uw_proc *p = uw_proc_current();
    if (p)
        p->flags |= PFR_UWP_LOST;
}

/* A pc walked without its mapping: its page kept in the process's entry p for the exit
 * (PFR_UWP_LOST once they do not fit). */
static __always_inline void uw_note_miss(struct pfr_uw_proc *p, __u64 pc)
{
    if (!p)
        return;
    __u64 page = pc >> 12;
    __u32 n = p->nmiss;
    for (int i = 0; i < PFR_UW_PROC_MISSES; i++)
        if (i < n && p->miss[i] == page)
            return;
    if (n >= PFR_UW_PROC_MISSES) {
        p->flags |= PFR_UWP_LOST;
        return;
    }
    p->miss[n & (PFR_UW_PROC_MISSES - 1)] = page;
    p->nmiss = n + 1;
}

/* The mapping of pc into *v: from the process's cache, else by bpf_find_vma (once per sample)
 * into the cache. 0; 1 when it is not known yet (the frame is walked by frame pointer); -1 when
 * pc is in no mapping. */
static __always_inline int uw_find_vma(struct pfr_walk *w, __u64 pc, struct pfr_uw_vma *v)
{
    struct pfr_uw_state *u = &w->uw;
    struct task_struct *task = bpf_get_current_task_btf();
    __u64 mm = (__u64)task->mm, now = u->now;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct pfr_uw_proc *p = bpf_map_lookup_elem(&uw_procs, &tgid);
    int slot = -1;
    if (p && p->mm == mm) {
        for (int i = 0; i < PFR_UW_PROC_VMAS; i++) {
            struct pfr_uw_vma *e = &p->vma[i];
            if (pc >= e->start && pc < e->end) {
                *v = *e;
                if (now - e->seen < PFR_UW_VMA_TTL_NS || u->vma_looked_up)
                    return 0;
                slot = i; /* old: looked up again, in its slot */
                break;
            }
        }
    }
    if (u->vma_looked_up) {
        u->flags |= PFR_UWF_VMA_MISS;
        uw_note_miss(p && p->mm == mm ? p : uw_proc(tgid, mm), pc);
        return 1;
    }
    u->vma_looked_up = 1;
    long rc = bpf_find_vma(task, pc, pfr_uw_vma_cb, v, 0);
    if (rc == -ENOENT)
        return -1;
    if (rc) { /* the mappings are being changed (-EBUSY) */
        u->flags |= PFR_UWF_BUSY;
        uw_note_miss(p && p->mm == mm ? p : uw_proc(tgid, mm), pc);
        return 1;
    }
    v->seen = now;
    p = uw_proc(tgid, mm);
    if (!p)
        return 0;
    if (slot < 0)
        slot = p->next++ & (PFR_UW_PROC_VMAS - 1);
    struct pfr_uw_vma *e = &p->vma[slot & (PFR_UW_PROC_VMAS - 1)];
    /* a mapping some sample met, replaced by another: the exit cannot list it any more */
    if (e->end && (e->start != v->start || e->end != v->end || e->pgoff != v->pgoff ||
                   e->ino != v->ino || e->dev != v->dev || e->file != v->file))
        p->flags |= PFR_UWP_LOST;
    *e = *v;
    return 0;
}

/* The mapping of pc from the per-CPU memo (struct pfr_uw_mapc) into the state: true if there. */
static __always_inline bool uw_mapc_get(struct pfr_walk *w, __u64 pc)
{
    struct pfr_uw_state *u = &w->uw;
    for (int i = 0; i < PFR_UW_MAPC_SLOTS; i++) {
        const struct pfr_uw_mapc *c = &w->mapc[i];
        if (!(pc >= c->map.start && pc < c->map.end) || c->mm != u->mm || c->tgid != u->tgid ||
            c->files_gen != u->files_gen || u->now - c->checked >= PFR_UW_MAPC_TTL_NS)
            continue;
        u->map = c->map;
        if (c->pending)
            u->flags |= PFR_UWF_PENDING;
        return true;
    }
    return false;
}

/* The state's mapping, just looked up, into the memo. */
static __always_inline void uw_mapc_put(struct pfr_walk *w, __u32 pending)
{
    struct pfr_uw_state *u = &w->uw;
    struct pfr_uw_mapc *c = &w->mapc[w->mapc_next++ & (PFR_UW_MAPC_SLOTS - 1)];
    c->mm = u->mm;
    c->tgid = u->tgid;
    c->files_gen = u->files_gen;
    c->checked = u->now;
    c->map = u->map;
    c->pending = pending;
}

/* The mapping of pc into the state's cache: its range, and its file's rows (map.nrows 0: walk
 * by frame pointer). 0, or -1 when pc is in no mapping. */
static __always_inline int uw_map(struct pfr_walk *w, __u64 pc)
{
    if (uw_mapc_get(w, pc))
        return 0;
    struct pfr_uw_state *u = &w->uw;
    struct pfr_uw_vma v = {};
    u->map.nrows = 0;
    int rc = uw_find_vma(w, pc, &v);
    if (rc < 0)
        return -1;
    if (rc > 0) { /* not known in this sample: this frame by frame pointer */
        u->map.start = u->map.end = 0;
        return 0;
    }
    u->map = (struct pfr_uw_placed){.start = v.start, .end = v.end};
    if (!v.file) {
        uw_mapc_put(w, 0);
        return 0;
    }
    struct pfr_file_key k = {.ino = v.ino, .dev = v.dev};
    struct pfr_unwind_file *f = bpf_map_lookup_elem(&unwind_files, &k);
    if (!f) {
        u->flags |= PFR_UWF_PENDING;
        uw_ask(w, &v);
        uw_mapc_put(w, 1);
        return 0;
    }
    __u32 now = (__u32)(u->now >> 30);
    if (f->last_used != now)
        f->last_used = now;
    u->map.first = f->first;
    u->map.nrows = f->nrows;
    u->map.gen = f->gen;
    u->map.index_first = f->index_first;
    u->map.index_n = f->index_n;
    u->map.index_shift = f->index_shift;
    /* file vaddr - base = pc - start + pgoff + delta - base */
    u->map.adj = v.pgoff + f->delta - f->base - v.start;
    uw_mapc_put(w, 0);
    return 0;
}

/* The rule of the row covering x (file vaddr - base) in the cached file's rows; a rule of kind
 * PFR_UW_NONE when no row covers it. The table's index, where it has one, narrows the search
 * to the rows of x's granule (a few, on a cache line or two, instead of ~16 misses). */
static __always_inline __u32 uw_rule(struct pfr_walk *w, __u64 x)
{
    struct pfr_uw_state *u = &w->uw;
    __u32 lo = 0, n = u->map.nrows, first = u->map.first;
    if (x >= (1ull << 32))
        return PFR_UW_NONE;
    if (u->map.index_n) {
        __u32 g = (__u32)x >> (u->map.index_shift & 31);
        if (g >= u->map.index_n)
            g = u->map.index_n - 1; /* past the last granule's start: the last rows */
        __u32 k = u->map.index_first + g;
        struct pfr_unwind_row *e = bpf_map_lookup_elem(&unwind_rows, &k);
        if (!e)
            return PFR_UW_NONE;
        lo = e->pc;
        n = e->rule;
    }
    /* last row with pc <= x: lo .. lo + n - 1 holds it */
    for (int i = 0; i < PFR_UW_SEARCH_STEPS && n > 1; i++) {
        __u32 half = n / 2, mid = first + lo + half;
        struct pfr_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &mid);
        if (!r)
            return PFR_UW_NONE;
        if (r->pc <= (__u32)x) {
            lo += half;
            n -= half;
        } else {
            n = half;
        }
    }
    __u32 idx = first + lo;
    struct pfr_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &idx);
    if (!r || n != 1 || r->pc > (__u32)x)
        return PFR_UW_NONE;
    return r->rule;
}

/* uw_rule through the per-CPU memo (struct pfr_uw_memo). */
static __always_inline __u32 uw_rule_memo(struct pfr_walk *w, __u64 x)
{
    struct pfr_uw_state *u = &w->uw;
    if (x >= (1ull << 32) || !u->map.gen)
        return uw_rule(w, x);
    __u64 key = (__u64)u->map.gen << 32 | x;
    struct pfr_uw_memo *m =
        &w->memo[(__u32)((key * 0x9e3779b97f4a7c15ull) >> 55) & (PFR_UW_MEMO_SLOTS - 1)];
    if (m->key == key)
        return m->rule;
    __u32 rule = uw_rule(w, x);
    m->key = key;
    m->rule = rule;
    return rule;
}

/* One frame by frame pointer: the record at rbp holds the caller's rbp and the return address.
 * 0, or -1 at the end of the chain. */
static __always_inline int uw_fp_step(struct pfr_walk *w)
{
    struct pfr_uw_state *u = &w->uw;
    __u64 fp = u->bp, next_bp, ra;
    if (!fp || fp >= PFR_USER_ADDR_END)
        return -1;
    int near = fp >= u->sp && fp - u->sp < PFR_WALK_NEAR;
    if (uw_read(w, fp, near, &next_bp) || uw_read(w, fp + 8, near, &ra))
        return -1;
    u->bp = next_bp;
    u->sp = fp + 16;
    u->pc = ra;
    u->is_ra = 1;
    return 0;
}

/* One frame by a table rule. 0 on a step, 1 at the stack's end, -1 when cut. */
static __always_inline int uw_rule_step(struct pfr_walk *w, __u32 rule)
{
    struct pfr_uw_state *u = &w->uw;
    __u32 kind = PFR_UW_RULE_KIND(rule);
    int arg = PFR_UW_RULE_ARG(rule);
    __u64 off = PFR_UW_RULE_OFF(rule), cfa, ra, bp = u->bp;
    switch (kind) {
    case PFR_UW_END:
        return 1;
    case PFR_UW_SIGNAL: {
        __u64 sp = u->sp, nsp, pc;
        if (uw_read(w, sp + PFR_SIG_RBP, 1, &bp) || uw_read(w, sp + PFR_SIG_RSP, 1, &nsp) ||
            uw_read(w, sp + PFR_SIG_RIP, 1, &pc))
            return -1;
        u->bp = bp;
        u->sp = nsp;
        u->pc = pc;
        u->is_ra = 0; /* the interrupted instruction itself */
        return 0;
    }
    case PFR_UW_CFA_RSP:
        cfa = u->sp + off;
        break;
    case PFR_UW_CFA_RBP:
        cfa = u->bp + off;
        break;
    case PFR_UW_CFA_DEREF_RBP: {
        /* gcc's realigning prologue: CFA = *(rbp + soff), the caller's rbp at rbp + 8 * arg */
        int near = u->bp >= u->sp && u->bp - u->sp < PFR_WALK_NEAR;
        if (uw_read(w, u->bp + PFR_UW_RULE_SOFF(rule), near, &cfa) ||
            uw_read(w, u->bp + (__s64)arg * 8, near, &bp))
            return -1;
        arg = 0; /* the caller's rbp is read already */
        break;
    }
    case PFR_UW_PLT:
        cfa = u->sp + off + ((u->pc & 15) >= (__u64)arg ? 8 : 0);
        arg = 0;
        break;
    default:
        return -1;
    }
    if (cfa <= u->sp || cfa >= PFR_USER_ADDR_END)
        return -1; /* a caller's frame lies above its callee's */
    int near = cfa - u->sp < PFR_WALK_NEAR;
    if (uw_read(w, cfa - 8, near, &ra))
        return -1;
    if (arg && uw_read(w, cfa + (__s64)arg * 8, near, &bp))
        return -1;
    u->bp = bp;
    u->sp = cfa;
    u->pc = ra;
    u->is_ra = 1;
    w->uw.dwarf_frames++;
    return 0;
}

/* Walk one more frame from the state: 0 to go on, 1 at the stack's end, -1 when cut (the
 * reason in uw.flags). Global, so the verifier checks it once for every frame. */
__noinline int pfr_uw_step(struct pfr_walk *w)
{
    if (!w)
        return -1;
    struct pfr_uw_state *u = &w->uw;
    __u64 pc = u->is_ra ? u->pc - 1 : u->pc;
    if (!(pc >= u->map.start && pc < u->map.end)) {
        if (uw_map(w, pc)) {
            u->flags |= PFR_UWF_CUT_MAP;
            return -1;
        }
    }
    __u32 rule = u->map.nrows ? uw_rule_memo(w, pc + u->map.adj) : PFR_UW_NONE;
    int rc;
    if (PFR_UW_RULE_KIND(rule) == PFR_UW_NONE) {
        if (u->map.nrows)
            u->flags |= PFR_UWF_NO_ROW;
        rc = uw_fp_step(w);
        if (rc)
            return 1; /* the frame-pointer chain's own end */
    } else {
        rc = uw_rule_step(w, rule);
        if (rc < 0) {
            u->flags |= PFR_UWF_CUT_READ;
            return -1;
        }
        if (rc > 0) {
            u->flags |= PFR_UWF_END;
            return 1;
        }
    }
    if (!u->pc || u->pc >= PFR_USER_ADDR_END)
        return 1;
    return 0;
}

/* The user stack from ip/sp/bp into w->st.ips: the frames. Global: verified once. */
__noinline int pfr_unwind_user(struct pfr_walk *w, __u64 ip, __u64 sp, __u64 bp)
{
    if (!w)
        return 0;
    struct pfr_uw_state *u = &w->uw;
    __builtin_memset(u, 0, sizeof(*u));
    u->pc = ip;
    u->sp = sp;
    u->bp = bp;
    u->now = bpf_ktime_get_ns();
    u->mm = (__u64)bpf_get_current_task_btf()->mm;
    u->tgid = bpf_get_current_pid_tgid() >> 32;
    u->files_gen = uw_files_gen;
    w->st.ips[0] = ip;
    __u32 n = 1;
    for (__u32 i = 1; i < PFR_MAX_STACK_DEPTH; i++) {
        if (pfr_uw_step(w))
            break;
        if (n >= PFR_MAX_STACK_DEPTH)
            break;
        w->st.ips[n] = u->pc;
        n++;
        if (n == PFR_MAX_STACK_DEPTH)
            u->flags |= PFR_UWF_CUT_DEPTH;
    }
    if (u->flags & PFR_UWF_CUT_DEPTH) /* the last frame's mapping was not looked up */
        uw_note_miss(uw_proc_current(), u->pc - 1);
    return (int)n;
}

#endif /* __TARGET_ARCH_x86 */
#endif
