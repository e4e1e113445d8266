/* Building per-service CPU profiles from drained samples. */
#include "profile_builder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfr_clock.h"
#include "pfr_hash.h"
#include "pfr_vec.h"

#define MAX_INLINE     16
#define MAX_STACK_LOCS (2 * PFR_MAX_STACK_DEPTH + 2)

/* A user location of one build under its file's frame key (see frame_key): the processes of
 * one program (a worker pool, a program run many times) share it, and each after the first
 * finds it here instead of naming its frames again. */
typedef struct file_loc {
    uint64_t space, addr; /* the frame key */
    uint64_t module_hash; /* of the path the file is mapped by (named as each process maps it) */
    bool leaf;
    int64_t loc;
} file_loc;

/* Per-profile caches for one build: address -> location index. */
typedef struct group {
    pfr_map kernel_locs; /* kernel ip -> location */
    pfr_map user_by_pid; /* tgid -> pfr_map * (ip -> location) */
    pfr_map file_locs;   /* hash of a file_loc's key -> its index + 1 in files */
    file_loc *files;
    size_t nfiles, cap_files;
    int64_t special[4]; /* locations of marker frames, -1 until made */
} group;

typedef struct build {
    const pfr_build_input *in;
    bool late; /* deadline passed */
    pfr_profile_set *out;
    group *groups;
    size_t cap;
    pfr_build_stats *st;
} build;

enum { MARK_KLOST, MARK_ULOST, MARK_MISSING, MARK_EMPTY };
static const char *const mark_names[] = {"[kernel stack lost]", "[user stack lost]",
                                         "[stack missing]", "[no stack]"};

void pfr_profile_set_free(pfr_profile_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        pfr_profile_free(set->v[i].profile);
    free(set->v);
    set->v = NULL;
    set->n = 0;
}

static void group_free(group *g)
{
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&g->user_by_pid, &pos, &k, &v)) {
        pfr_map *m = (pfr_map *)(uintptr_t)v;
        pfr_map_free(m);
        free(m);
    }
    pfr_map_free(&g->user_by_pid);
    pfr_map_free(&g->kernel_locs);
    pfr_map_free(&g->file_locs);
    free(g->files);
}

static pfr_profile *new_profile(const pfr_build_input *in)
{
    pfr_profile *p = pfr_profile_new();
    if (!p)
        return NULL;
    pfr_profile_add_sample_type(p, PFR_CPU_PROFILE_TYPE, "nanoseconds");
    pfr_profile_set_period(p, "cpu", "nanoseconds", in->period_ns);
    pfr_profile_set_time(p, in->start_ns, in->end_ns - in->start_ns);
    if (pfr_profile_error(p)) {
        pfr_profile_free(p);
        return NULL;
    }
    return p;
}

/* Index of the group for (service, container), created if needed; -1 on allocation failure. */
static ssize_t find_group(build *b, const char *service, const char *container)
{
    for (size_t i = 0; i < b->out->n; i++)
        if (!strcmp(b->out->v[i].service, service) && !strcmp(b->out->v[i].container_id, container))
            return (ssize_t)i;
    if (b->out->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        pfr_service_profile *v = realloc(b->out->v, cap * sizeof(*v));
        if (!v)
            return -1;
        b->out->v = v;
        group *g = realloc(b->groups, cap * sizeof(*g));
        if (!g)
            return -1;
        b->groups = g;
        b->cap = cap;
    }
    pfr_profile *p = new_profile(b->in);
    if (!p)
        return -1;
    size_t i = b->out->n++;
    pfr_service_profile *sp = &b->out->v[i];
    memset(sp, 0, sizeof(*sp));
    snprintf(sp->service, sizeof(sp->service), "%s", service);
    snprintf(sp->container_id, sizeof(sp->container_id), "%s", container);
    sp->profile = p;
    memset(&b->groups[i], 0, sizeof(group));
    for (int m = 0; m < 4; m++)
        b->groups[i].special[m] = -1;
    return (ssize_t)i;
}

static int64_t marker_loc(pfr_profile *p, group *g, int which)
{
    if (g->special[which] < 0)
        g->special[which] = pfr_profile_add_frame(p, mark_names[which], "", 0);
    return g->special[which];
}

/* A string of a frame from the frame cache, interned in p with the length and hash the cache
 * keeps: no string is measured or hashed again in each interval's profile. */
static int64_t intern_cached(pfr_profile *p, const char *str)
{
    pfr_hstr h = {.s = str};
    pfr_frame_cache_str(str, &h.len, &h.hash);
    return pfr_profile_intern_hstr(p, &h);
}

static int64_t cached_function(pfr_profile *p, const pfr_cached_frame *f)
{
    int64_t name = intern_cached(p, f->function), file = intern_cached(p, f->file);
    if (name < 0 || file < 0)
        return -ENOMEM;
    return pfr_profile_add_function_ids(p, (uint32_t)name, (uint32_t)name, (uint32_t)file, 0);
}

static int64_t cached_mapping(pfr_profile *p, const pfr_cached_frame *f)
{
    int64_t file = intern_cached(p, f->module);
    if (file < 0)
        return -ENOMEM;
    return pfr_profile_add_mapping_ids(p, 0, 0, 0, (uint32_t)file, 0); /* 0: "" */
}

/* A location from frames (innermost first) with one line per frame; cached: the frames are the
 * frame cache's (their strings interned there). */
static int64_t frames_loc(pfr_profile *p, uint64_t ip, const pfr_cached_frame *fr, size_t n,
                          bool cached)
{
    pfr_line lines[MAX_INLINE];
    if (n > MAX_INLINE)
        n = MAX_INLINE;
    for (size_t i = 0; i < n; i++) {
        int64_t fn =
            cached ? cached_function(p, &fr[i])
                   : pfr_profile_add_function(p, fr[i].function, fr[i].function, fr[i].file, 0);
        if (fn < 0)
            return -ENOMEM;
        lines[i] = (pfr_line){.function = (uint32_t)fn, .line = fr[i].line};
    }
    int64_t map =
        cached ? cached_mapping(p, &fr[0]) : pfr_profile_add_mapping(p, 0, 0, 0, fr[0].module, "");
    if (map < 0)
        return -ENOMEM;
    return pfr_profile_add_location(p, map, ip, lines, n);
}

/* Where the frame cache keeps the frames of a user address (the call itself for a return
 * address): under its file's space and offset when the symbolizer holds the file, so that a new
 * process of a program met before is named from the cache; else under the process's. */
typedef struct frame_key {
    uint64_t space, addr;
    const char *module; /* the file as this process maps it (a hit must name the same), or NULL */
} frame_key;

static frame_key user_key(const build *b, uint32_t tgid, uint64_t addr)
{
    frame_key k = {tgid, addr, NULL};
    uint64_t space, off;
    const char *module;
    if (pfr_symbolizer_frame_key(b->in->sym, (pid_t)tgid, addr, &space, &off, &module) == 1)
        k = (frame_key){PFR_FRAME_CACHE_FILE | space, off, module};
    return k;
}

static size_t cache_get(pfr_frame_cache *fc, const frame_key *k, const pfr_cached_frame **out)
{
    size_t n = pfr_frame_cache_get(fc, k->space, k->addr, out);
    /* the same file under another path (another mount namespace): named as this one maps it */
    return n > 0 && k->module && strcmp((*out)[0].module, k->module) ? 0 : n;
}

/* Location address of a user frame: its file offset when keyed by file (the same in every
 * process of a program, whatever its address space layout, so that the profiles' locations and
 * stacks, and the store's dictionaries, are shared by them), else the address. */
static uint64_t loc_address(const frame_key *k, uint64_t ip, bool leaf)
{
    return k->module ? k->addr + !leaf : ip;
}

/* Frames of (tgid, ip) from the cross-interval cache, or from the symbolizer (then cached,
 * unless the address was outside every known mapping or is JIT code: a later look may find
 * it, or other code there). Returns the
 * count (>= 1) or a negative errno; *out points to frames valid until the next call, the
 * cache's when *cached. */
static int resolve(build *b, uint32_t tgid, uint64_t ip, bool kernel, bool leaf, frame_key *uk,
                   const pfr_cached_frame **out, pfr_cached_frame *tmp, bool *cached)
{
    *cached = false;
    /* return addresses point after the call: look up the call itself */
    uint64_t addr = leaf ? ip : ip - 1;
    frame_key k = kernel ? (frame_key){PFR_FRAME_CACHE_KERNEL, addr, NULL} : *uk;
    pfr_frame_cache *fc = b->in->frames;
    if (fc) {
        size_t n = cache_get(fc, &k, out);
        *cached = n > 0;
        if (n > 0)
            return (int)n;
    }
    pfr_sym_frame fr[MAX_INLINE];
    int n = kernel ? pfr_symbolize_kernel(b->in->sym, addr, fr)
                   : pfr_symbolize_user(b->in->sym, (pid_t)tgid, addr, fr, MAX_INLINE);
    if (n <= 0) {
        tmp[0] = (pfr_cached_frame){.function = "[unknown]", .file = "", .module = ""};
        *out = tmp;
        return 1;
    }
    for (int i = 0; i < n; i++)
        tmp[i] = (pfr_cached_frame){.function = fr[i].function,
                                    .file = fr[i].file ? fr[i].file : "",
                                    .module = fr[i].module ? fr[i].module : "",
                                    .line = fr[i].line};
    *out = tmp;
    if (!kernel && !k.module) /* its file may have been read in by this look: keyed by it now */
        k = *uk = user_key(b, tgid, addr);
    bool unmapped = !tmp[0].module[0] && !strcmp(tmp[0].function, "[unknown]");
    if (fc && !unmapped && !fr[0].transient) {
        if (pfr_frame_cache_put(fc, k.space, k.addr, tmp, (size_t)n))
            return -ENOMEM;
        /* the cache's copy: its strings interned, with their hashes */
        size_t m = pfr_frame_cache_get(fc, k.space, k.addr, out);
        *cached = m == (size_t)n;
        if (!*cached)
            *out = tmp;
    }
    if (kernel)
        b->st->kernel_frames++;
    else
        b->st->user_frames++;
    return n;
}

static int64_t kernel_loc(build *b, pfr_profile *p, group *g, uint64_t ip, int leaf)
{
    uint64_t *c = pfr_map_get(&g->kernel_locs, ip);
    if (c)
        return (int64_t)*c;
    pfr_cached_frame tmp[MAX_INLINE];
    const pfr_cached_frame *fr;
    bool cached;
    int n = resolve(b, 0, ip, true, leaf, NULL, &fr, tmp, &cached);
    if (n < 0)
        return n;
    int64_t loc = frames_loc(p, ip, fr, (size_t)n, cached);
    if (loc >= 0 && pfr_map_put(&g->kernel_locs, ip, (uint64_t)loc))
        return -ENOMEM;
    return loc;
}

/* The address -> location map of process tgid in group g, created if needed; NULL if out of
 * memory. Looked up once per stack, not once per frame. */
static pfr_map *user_locs(group *g, uint32_t tgid)
{
    uint64_t *pm = pfr_map_get(&g->user_by_pid, tgid);
    if (pm)
        return (pfr_map *)(uintptr_t)*pm;
    pfr_map *m = calloc(1, sizeof(*m));
    if (!m || pfr_map_put(&g->user_by_pid, tgid, (uint64_t)(uintptr_t)m)) {
        free(m);
        return NULL;
    }
    return m;
}

static uint64_t file_loc_hash(const file_loc *f)
{
    uint64_t h = pfr_hash_combine(pfr_hash_combine(f->space, f->addr), f->module_hash);
    return pfr_hash_combine(h, f->leaf);
}

/* The location this build made for the key of *f (its loc not read), or -1. */
static int64_t file_loc_get(const group *g, const file_loc *f)
{
    const uint64_t *i = pfr_map_get(&g->file_locs, file_loc_hash(f));
    if (!i)
        return -1;
    const file_loc *e = &g->files[*i - 1];
    bool same = e->space == f->space && e->addr == f->addr && e->module_hash == f->module_hash &&
                e->leaf == f->leaf;
    return same ? e->loc : -1; /* another key of the same hash: named the long way */
}

static int file_loc_put(group *g, const file_loc *f)
{
    uint64_t h = file_loc_hash(f);
    if (pfr_map_get(&g->file_locs, h))
        return 0; /* the slot is another key's */
    if (PFR_VEC_RESERVE(g->files, g->cap_files, g->nfiles + 1))
        return -ENOMEM;
    g->files[g->nfiles++] = *f;
    return pfr_map_put(&g->file_locs, h, g->nfiles);
}

static int64_t user_loc(build *b, pfr_profile *p, group *g, pfr_map *m, uint32_t tgid, uint64_t ip,
                        int leaf)
{
    uint64_t *c = pfr_map_get(m, ip);
    if (c)
        return (int64_t)*c;
    pfr_cached_frame tmp[MAX_INLINE];
    const pfr_cached_frame *fr = NULL;
    int n = 0;
    bool cached = false;
    frame_key key = user_key(b, tgid, leaf ? ip : ip - 1);
    /* keyed by file: another process of this program may have met it in this build (the key
     * as it is now: resolve may find the file only in this look) */
    bool memo = key.module != NULL;
    file_loc fk = {0};
    if (memo) {
        fk = (file_loc){.space = key.space,
                        .addr = key.addr,
                        .module_hash = pfr_hash_bytes(key.module, strlen(key.module)),
                        .leaf = leaf != 0};
        int64_t loc = file_loc_get(g, &fk);
        if (loc >= 0) {
            b->st->shared_frames++;
            return pfr_map_put(m, ip, (uint64_t)loc) ? -ENOMEM : loc;
        }
    }
    if (b->late && b->in->frames) {
        /* past the deadline: only what is already known */
        n = (int)cache_get(b->in->frames, &key, &fr);
        cached = n > 0;
    } else if (!b->late) {
        n = resolve(b, tgid, ip, false, leaf, &key, &fr, tmp, &cached);
        if (n < 0)
            return n;
    }
    if (n == 0) {
        /* past the deadline, an unknown frame still says which file it is in, as a frame that
         * cannot be named does: finding the mapping reads no file */
        b->st->late_frames++;
        pfr_sym_frame sf;
        if (pfr_symbolize_user_mapping(b->in->sym, (pid_t)tgid, leaf ? ip : ip - 1, &sf) == 1) {
            tmp[0] = (pfr_cached_frame){.function = sf.function, .file = "", .module = sf.module};
            fr = tmp;
            n = 1;
        }
    }
    int64_t loc;
    if (n == 0) {
        char name[32];
        snprintf(name, sizeof(name), "0x%llx", (unsigned long long)ip);
        loc = pfr_profile_add_frame(p, name, "", 0);
    } else {
        loc = frames_loc(p, loc_address(&key, ip, leaf), fr, (size_t)n, cached);
    }
    if (loc < 0)
        return loc;
    if (pfr_map_put(m, ip, (uint64_t)loc))
        return -ENOMEM;
    /* named frames only: one left as an address may be named by a later look */
    if (memo && cached) {
        fk.loc = loc;
        if (file_loc_put(g, &fk))
            return -ENOMEM;
    }
    return loc;
}

/* ---- Python frames: the sampler appends them after the native ones (cpu_profile.h) ---- */

#define PY_EVAL "_PyEval_EvalFrameDefault"

/* Whether the native frame at ip (a return address unless leaf) runs the interpreter loop. */
static bool runs_eval(build *b, uint32_t tgid, uint64_t ip, bool leaf)
{
    pfr_cached_frame tmp[MAX_INLINE];
    const pfr_cached_frame *fr = NULL;
    int n = 0;
    frame_key key = user_key(b, tgid, leaf ? ip : ip - 1);
    bool cached;
    if (!b->late) {
        n = resolve(b, tgid, ip, false, leaf, &key, &fr, tmp, &cached);
    } else if (b->in->frames) {
        n = (int)cache_get(b->in->frames, &key, &fr);
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(fr[i].function, PY_EVAL))
            return true;
    return false;
}

static int64_t py_loc(build *b, pfr_profile *p, pfr_map *m, uint32_t tgid, uint64_t v)
{
    uint64_t *c = pfr_map_get(m, v);
    if (c)
        return (int64_t)*c;
    pfr_cached_frame fr = {.function = "[python: unreadable]", .file = "", .module = "python"};
    if (b->in->py_name)
        b->in->py_name(b->in->py_ctx, tgid, v, &fr);
    fr.module = "python";
    /* the frame's own value is its address: unique per code object and instruction */
    int64_t loc = frames_loc(p, v, &fr, 1, false);
    if (loc >= 0 && pfr_map_put(m, v, (uint64_t)loc))
        return -ENOMEM;
    return loc;
}

/* Python frames from ips[*k] on, up to the last of one _PyEval_EvalFrameDefault activation. */
static int add_py_group(build *b, pfr_profile *p, pfr_map *m, uint32_t tgid, const uint64_t *ips,
                        size_t nf, size_t *k, uint32_t *locs, size_t *n)
{
    while (*k < nf && *n < MAX_STACK_LOCS - 1) {
        uint64_t v = ips[(*k)++];
        int64_t loc = py_loc(b, p, m, tgid, v);
        if (loc < 0)
            return (int)loc;
        locs[(*n)++] = (uint32_t)loc;
        if (pfr_py_frame_entry(v))
            break;
    }
    return 0;
}

/* A user stack with Python frames: the native frames leaf first, each activation of
 * _PyEval_EvalFrameDefault preceded by the Python functions it was running, innermost first.
 * Python frames no activation was found for (the native walk was cut) go at the outer end. */
static int add_py_stack(build *b, pfr_profile *p, group *g, pfr_map *m, uint32_t tgid,
                        const uint64_t *ips, size_t nf, uint32_t *locs, size_t *n)
{
    size_t native = 0;
    while (native < nf && !pfr_py_frame_is(ips[native]))
        native++;
    size_t k = native;
    b->st->py_stacks++;
    for (size_t i = 0; i < native && *n < MAX_STACK_LOCS - 1; i++) {
        if (k < nf && runs_eval(b, tgid, ips[i], i == 0)) {
            int rc = add_py_group(b, p, m, tgid, ips, nf, &k, locs, n);
            if (rc)
                return rc;
        }
        int64_t loc = user_loc(b, p, g, m, tgid, ips[i], i == 0);
        if (loc < 0)
            return (int)loc;
        if (*n < MAX_STACK_LOCS - 1)
            locs[(*n)++] = (uint32_t)loc;
    }
    if (k < nf)
        b->st->py_unplaced++;
    while (k < nf && *n < MAX_STACK_LOCS - 1) {
        int rc = add_py_group(b, p, m, tgid, ips, nf, &k, locs, n);
        if (rc)
            return rc;
    }
    return 0;
}

/* Append the locations of one stack (kernel or user) to locs. */
static int add_stack(build *b, pfr_profile *p, group *g, uint32_t tgid, uint64_t id, bool kernel,
                     uint32_t *locs, size_t *n)
{
    if (id == 0)
        return 0;
    int64_t loc;
    if (id == PFR_STACK_ERROR) {
        b->st->lost_stacks++;
        loc = marker_loc(p, g, kernel ? MARK_KLOST : MARK_ULOST);
        if (loc < 0)
            return (int)loc;
        locs[(*n)++] = (uint32_t)loc;
        return 0;
    }
    size_t nf = 0;
    const uint64_t *ips = b->in->stack(b->in->stack_ctx, id, &nf);
    if (!ips || nf == 0) {
        b->st->lost_stacks++;
        loc = marker_loc(p, g, MARK_MISSING);
        if (loc < 0)
            return (int)loc;
        locs[(*n)++] = (uint32_t)loc;
        return 0;
    }
    pfr_map *m = kernel ? NULL : user_locs(g, tgid);
    if (!kernel && !m)
        return -ENOMEM;
    if (!kernel && nf > 0 && pfr_py_frame_is(ips[nf - 1]))
        return add_py_stack(b, p, g, m, tgid, ips, nf, locs, n);
    for (size_t i = 0; i < nf && *n < MAX_STACK_LOCS - 1; i++) {
        loc = kernel ? kernel_loc(b, p, g, ips[i], i == 0)
                     : user_loc(b, p, g, m, tgid, ips[i], i == 0);
        if (loc < 0)
            return (int)loc;
        locs[(*n)++] = (uint32_t)loc;
    }
    return 0;
}

static int add_one(build *b, const pfr_cpu_sample *s)
{
    const pfr_build_input *in = b->in;
    pfr_proc *proc = pfr_proc_table_get(in->procs, s->tgid);
    if (proc && proc->opted_out) {
        /* its environment refuses profiling: dropped before any of it is symbolized */
        proc->sampled_gen = in->gen;
        b->st->opted_out_samples += s->count;
        return 0;
    }
    char comm[16];
    const char *service = "unknown", *container = "";
    if (proc) {
        proc->sampled_gen = in->gen;
        service = proc->service;
        container = proc->container_id;
        /* bounded: the label must end in a NUL whatever the table holds */
        memcpy(comm, proc->comm, sizeof(comm) - 1);
        comm[sizeof(comm) - 1] = '\0';
    } else {
        b->st->unknown_processes++;
        memcpy(comm, "?", 2);
    }
    ssize_t gi = find_group(b, service, container);
    if (gi < 0)
        return -ENOMEM;
    pfr_profile *p = b->out->v[gi].profile;
    group *g = &b->groups[gi];

    uint32_t locs[MAX_STACK_LOCS];
    size_t n = 0;
    /* pprof stacks are leaf first: the kernel part (if the sample was in the kernel), then the
     * user part that called into it */
    int rc = add_stack(b, p, g, s->tgid, s->kstack, true, locs, &n);
    if (rc == 0)
        rc = add_stack(b, p, g, s->tgid, s->ustack, false, locs, &n);
    if (rc)
        return rc;
    if (n == 0) {
        int64_t loc = marker_loc(p, g, MARK_EMPTY);
        if (loc < 0)
            return (int)loc;
        locs[n++] = (uint32_t)loc;
    }
    int64_t value = (int64_t)s->count * in->period_ns;
    pfr_label labels[2] = {
        {.key = "pid", .num = (int64_t)s->tgid},
        {.key = "comm", .str = comm},
    };
    int64_t r = pfr_profile_add_sample(p, locs, n, &value, labels, 2);
    if (r < 0)
        return (int)r;
    b->st->samples++;
    return 0;
}

int pfr_build_cpu_profiles(const pfr_build_input *in, pfr_profile_set *out, pfr_build_stats *st)
{
    build b = {.in = in, .out = out, .st = st};
    memset(out, 0, sizeof(*out));
    int rc = 0;
    if (in->lock)
        pfr_fair_lock_acquire(in->lock);
    for (size_t i = 0; i < in->nsamples && rc == 0; i++) {
        /* the clock is read every 8 samples: a sample costs microseconds, the budget seconds */
        if (in->deadline_ns && !b.late && (i & 7) == 0 && pfr_clock_mono_ns() > in->deadline_ns)
            b.late = true;
        /* between samples, let anyone waiting go first (process notifications must be handled
         * within milliseconds, or short-lived processes exit before their mappings are read);
         * once late, finish quickly instead: no symbolizer calls are left to make */
        if (in->lock && !b.late && (i & 7) == 7 && pfr_fair_lock_contended(in->lock)) {
            pfr_fair_lock_release(in->lock);
            pfr_fair_lock_acquire(in->lock);
            if (in->deadline_ns && pfr_clock_mono_ns() > in->deadline_ns)
                b.late = true;
        }
        rc = add_one(&b, &in->samples[i]);
    }
    if (in->lock)
        pfr_fair_lock_release(in->lock);
    for (size_t i = 0; i < out->n; i++) {
        if (rc == 0 && pfr_profile_error(out->v[i].profile))
            rc = pfr_profile_error(out->v[i].profile);
        group_free(&b.groups[i]);
    }
    free(b.groups);
    if (rc)
        pfr_profile_set_free(out);
    return rc;
}
