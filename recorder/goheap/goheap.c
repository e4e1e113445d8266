/* The collector: which processes are Go, their per-process state, and the profiles. */
#include "pfr_goheap.h"
#include "pfr_fsguard.h"
#include "pfr_membudget.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exe_scan.h"
#include "pfr_identity.h"
#include "goheap_delta.h"
#include "goheap_elf.h"
#include "pfr_map.h"
#include "pfr_vec.h"
#include "goheap_memo.h"
#include "goheap_proc.h"
#include "goheap_walk.h"
#include "pfr_clock.h"

enum bin_kind { BIN_NOT_GO, BIN_GO, BIN_STRIPPED, BIN_BAD };

/* One executable, identified by device, inode, size and mtime. */
/* What a typical heap walk holds while it runs (buckets, stacks, the profile being built),
 * for the memory budget: allowed near the budget, refused over it. */
#define WALK_COST_BYTES (1u << 20)

typedef struct gbin {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    enum bin_kind kind;
    pfr_goheap_elfinfo info;
    char why[160]; /* for STRIPPED / BAD */
    int err;
    bool reported;
    uint64_t last_used;
    unsigned refs; /* processes pointing here */
    pfr_goheap_memo memo;
} gbin;

/* One Go process we have looked at. */
typedef struct gproc {
    pid_t pid;
    uint64_t starttime, startstack;
    gbin *bin;
    char *exe;
    uint64_t bias;
    bool from_zero; /* the counters, when first walked, all belong to the coming interval */
    bool opted_out; /* its environment refuses profiling: never read (docs/coroot.md) */
    int64_t last_ns;
    uint64_t visit;
    pfr_goheap_delta delta;
} gproc;

struct pfr_goheap {
    pfr_goheap_opts o;
    char proc_root[256];
    pfr_exe_scan *own_exes; /* when the options gave none */
    gbin **bins;
    size_t nbins, cap_bins;
    gproc **procs; /* sorted by pid */
    size_t nprocs, cap_procs;
    pfr_goheap_walk walk;
    pfr_goheap_values *vals;
    size_t cap_vals;
    pfr_map locs; /* per profile: pc -> location index << 1 | leaf-is-runtime */
    uint32_t *stack;
    uint8_t *rt;
    size_t cap_stack;
    uint64_t tick;
    int64_t prev_boot_ns; /* when the previous collection (or the collector) started */
    long clk_tck;
    pfr_goheap_stats st;
};

int pfr_goheap_parse_mode(const char *s, enum pfr_goheap_mode *out)
{
    static const char *names[] = {"disabled", "enabled", "force"};
    for (int i = 0; s && i < 3; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = (enum pfr_goheap_mode)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *pfr_goheap_mode_name(enum pfr_goheap_mode m)
{
    return m == PFR_GOHEAP_FORCE ? "force" : m == PFR_GOHEAP_ENABLED ? "enabled" : "disabled";
}

int pfr_goheap_new(const pfr_goheap_opts *opts, pfr_goheap **out)
{
    pfr_goheap *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    if (opts)
        c->o = *opts;
    const char *root = c->o.proc_root ? c->o.proc_root : "/proc";
    if (strlen(root) >= sizeof(c->proc_root)) {
        free(c);
        return -ENAMETOOLONG;
    }
    snprintf(c->proc_root, sizeof(c->proc_root), "%s", root);
    c->o.proc_root = c->proc_root;
    if (!c->o.interval_ns)
        c->o.interval_ns = 60ll * 1000000000;
    if (!c->o.force_rate)
        c->o.force_rate = PFR_GOHEAP_DEFAULT_RATE;
    if (!c->o.max_binaries)
        c->o.max_binaries = 1024;
    if (!c->o.max_frames)
        c->o.max_frames = 262144;
    c->clk_tck = sysconf(_SC_CLK_TCK);
    if (c->clk_tck <= 0)
        c->clk_tck = 100;
    c->prev_boot_ns = pfr_clock_ns(CLOCK_BOOTTIME);
    if (!c->o.exes) {
        int rc = pfr_exe_scan_new(c->proc_root, &c->own_exes);
        if (rc) {
            free(c);
            return rc;
        }
        c->o.exes = c->own_exes;
        c->o.exes_max_age_ns = 0;
    }
    *out = c;
    return 0;
}

static void bin_free(gbin *b)
{
    pfr_goheap_memo_free(&b->memo);
    free(b);
}

static void proc_free(gproc *p)
{
    if (p->bin)
        p->bin->refs--;
    pfr_goheap_delta_free(&p->delta);
    free(p->exe);
    free(p);
}

void pfr_goheap_free(pfr_goheap *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nprocs; i++)
        proc_free(c->procs[i]);
    for (size_t i = 0; i < c->nbins; i++)
        bin_free(c->bins[i]);
    free(c->procs);
    free(c->bins);
    pfr_goheap_walk_free(&c->walk);
    pfr_map_free(&c->locs);
    free(c->vals);
    free(c->stack);
    free(c->rt);
    pfr_exe_scan_free(c->own_exes);
    free(c);
}

void pfr_goheap_get_stats(const pfr_goheap *c, pfr_goheap_stats *st)
{
    *st = c->st;
}

__attribute__((format(printf, 6, 7))) static void emit(const pfr_goheap_sink *sink,
                                                       enum pfr_goheap_event_kind kind, pid_t pid,
                                                       const char *exe, int err, const char *fmt,
                                                       ...)
{
    if (!sink || !sink->event)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pfr_goheap_event ev = {kind, pid, exe ? exe : "", err, msg};
    sink->event(sink->ctx, &ev);
}

/* ---- executables ---- */

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static bool bin_is(const gbin *b, const struct stat *st)
{
    return b->dev == st->st_dev && b->ino == st->st_ino && b->size == st->st_size &&
           b->mtime_ns == mtime_ns(st);
}

/* An executable's inspection is abandoned past this (a file's tables are at most 512 MiB). */
#define INSPECT_BUDGET_NS 2000000000LL

static void bin_classify(gbin *b, int fd)
{
    pfr_goheap_file f = pfr_goheap_fd_file(fd, (uint64_t)b->size);
    f.deadline_ns = pfr_clock_mono_ns() + INSPECT_BUDGET_NS;
    int rc = pfr_goheap_elf_inspect(&f, &b->info, b->why, sizeof(b->why));
    b->err = rc;
    if (rc == -ENOEXEC || (rc == 0 && !b->info.is_go)) {
        b->kind = BIN_NOT_GO;
    } else if (rc < 0) {
        b->kind = b->info.is_go ? BIN_BAD : BIN_NOT_GO;
        if (rc == -EBADMSG && !b->info.is_go)
            b->kind = BIN_BAD;
    } else if (!b->info.has_symtab || !b->info.mbuckets || !b->info.mem_profile_rate) {
        b->kind = BIN_STRIPPED;
        b->err = -ENODATA;
        snprintf(b->why, sizeof(b->why), "%s",
                 !b->info.has_symtab ? "Go executable without .symtab (stripped)"
                                     : "runtime.mbuckets or runtime.MemProfileRate not in .symtab");
    } else {
        b->kind = BIN_GO;
    }
}

/* Drop the least recently used executable no process refers to, if the cache is full. */
static void bin_evict(pfr_goheap *c)
{
    if (c->nbins < c->o.max_binaries)
        return;
    size_t victim = SIZE_MAX;
    for (size_t i = 0; i < c->nbins; i++)
        if (!c->bins[i]->refs &&
            (victim == SIZE_MAX || c->bins[i]->last_used < c->bins[victim]->last_used))
            victim = i;
    if (victim == SIZE_MAX)
        return;
    bin_free(c->bins[victim]);
    c->bins[victim] = c->bins[--c->nbins];
}

/* A new cache entry for the executable fst describes (evicting one first if the cache is full);
 * NULL when out of memory. */
static gbin *bin_add(pfr_goheap *c, const struct stat *fst)
{
    bin_evict(c);
    if (PFR_VEC_RESERVE(c->bins, c->cap_bins, c->nbins + 1))
        return NULL;
    gbin *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->dev = fst->st_dev;
    b->ino = fst->st_ino;
    b->size = fst->st_size;
    b->mtime_ns = mtime_ns(fst);
    b->last_used = c->tick;
    c->bins[c->nbins++] = b;
    return b;
}

/* The cached executable pid runs, parsed on first sight; NULL if it cannot be read now. */
static gbin *bin_get(pfr_goheap *c, pid_t pid, const struct stat *st)
{
    for (size_t i = 0; i < c->nbins; i++) {
        if (bin_is(c->bins[i], st)) {
            c->bins[i]->last_used = c->tick;
            return c->bins[i];
        }
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%d/exe", c->proc_root, (int)pid);
    /* an executable on a remote file system is read only as a copy the guard's worker made
     * (it checks dev:inode itself; the copy stands for the file) */
    bool remote = c->o.fsguard && !pfr_fsguard_local(c->o.fsguard, pid, st->st_dev);
    int fd = remote ? pfr_fsguard_copy(c->o.fsguard, path, st->st_dev, st->st_ino)
                    : open(path, O_RDONLY | O_CLOEXEC);
    if (remote && pfr_fsguard_copy_final(fd)) { /* never copied */
        gbin *b = bin_add(c, st);
        if (b) { /* remembered, so that no worker copies it again at every scan */
            b->kind = BIN_NOT_GO;
            b->err = fd;
        }
        return b;
    }
    if (fd < 0)
        return NULL; /* counted by the guard when remote; a copy under way is taken next scan */
    struct stat fst;
    gbin *b = NULL;
    if (fstat(fd, &fst) < 0)
        goto out;
    if (remote)
        fst = *st;
    else if (!bin_is(&(gbin){.dev = st->st_dev,
                             .ino = st->st_ino,
                             .size = st->st_size,
                             .mtime_ns = mtime_ns(st)},
                     &fst))
        goto out; /* replaced between stat and open: next time */
    b = bin_add(c, &fst);
    if (!b)
        goto out;
    bin_classify(b, fd);
    if (b->err == -ENOMEM) {
        c->bins[--c->nbins] = NULL; /* the entry just added: tried again next scan */
        free(b);
        b = NULL;
        goto out;
    }
    c->st.binaries_parsed++;
    if (b->info.refused > 0 && b->info.refused < PFR_NREFUSALS)
        c->st.files_refused[b->info.refused]++;
out:
    close(fd);
    return b;
}

/* ---- processes ---- */

static size_t proc_pos(const pfr_goheap *c, pid_t pid)
{
    size_t lo = 0, hi = c->nprocs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->procs[mid]->pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static gproc *proc_find(const pfr_goheap *c, pid_t pid)
{
    size_t i = proc_pos(c, pid);
    return i < c->nprocs && c->procs[i]->pid == pid ? c->procs[i] : NULL;
}

static gproc *proc_add(pfr_goheap *c, pid_t pid)
{
    if (PFR_VEC_RESERVE(c->procs, c->cap_procs, c->nprocs + 1))
        return NULL;
    gproc *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->pid = pid;
    size_t i = proc_pos(c, pid);
    memmove(c->procs + i + 1, c->procs + i, (c->nprocs - i) * sizeof(*c->procs));
    c->procs[i] = p;
    c->nprocs++;
    return p;
}

static void proc_remove_at(pfr_goheap *c, size_t i)
{
    proc_free(c->procs[i]);
    memmove(c->procs + i, c->procs + i + 1, (c->nprocs - i - 1) * sizeof(*c->procs));
    c->nprocs--;
}

void pfr_goheap_forget(pfr_goheap *c, pid_t pid)
{
    size_t i = proc_pos(c, pid);
    if (i < c->nprocs && c->procs[i]->pid == pid)
        proc_remove_at(c, i);
}

static char *read_exe(const char *root, pid_t pid)
{
    char path[PATH_MAX], buf[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%d/exe", root, (int)pid);
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return strdup(buf);
}

/* (Re)initialise p for the process now running as pid; from_zero when it began after the
 * previous collection, so everything it allocated belongs to the coming interval. */
static int proc_start(pfr_goheap *c, gproc *p, gbin *b, uint64_t starttime, uint64_t startstack,
                      bool exec_seen, const struct stat *st)
{
    pfr_goheap_delta_reset(&p->delta);
    if (p->bin)
        p->bin->refs--;
    p->bin = b;
    b->refs++;
    p->starttime = starttime;
    p->startstack = startstack;
    p->last_ns = 0;
    free(p->exe);
    p->exe = read_exe(c->proc_root, p->pid);
    if (!p->exe)
        return -ENOMEM;
    int64_t start_ns = (int64_t)(starttime * (1000000000 / (uint64_t)c->clk_tck));
    p->from_zero = exec_seen || start_ns >= c->prev_boot_ns;
    p->bias = 0;
    if (b->info.e_type == ET_DYN)
        return pfr_goheap_read_bias(c->proc_root, p->pid, st, p->exe, b->info.load_vaddr,
                                    b->info.load_offset, &p->bias);
    return 0;
}

/* ---- profiles ---- */

static int grow_stack(pfr_goheap *c, size_t n)
{
    if (n <= c->cap_stack)
        return 0;
    size_t ncap = c->cap_stack ? c->cap_stack : 64;
    while (ncap < n)
        ncap *= 2;
    uint32_t *ns = realloc(c->stack, ncap * sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    c->stack = ns;
    uint8_t *nr = realloc(c->rt, ncap);
    if (!nr)
        return -ENOMEM;
    c->rt = nr;
    c->cap_stack = ncap;
    return 0;
}

typedef struct build_ctx {
    pfr_goheap *c;
    gproc *p;
    pfr_profile *pr;
    int64_t mapping;
    bool begun, resolvable;
} build_ctx;

/* The resolved frames of pc (memoised per executable); *n = 0 when it cannot be named. */
static const pfr_goheap_mframe *frames_of(build_ctx *bc, uint64_t pc, size_t *n)
{
    pfr_goheap *c = bc->c;
    pfr_goheap_memo *m = &bc->p->bin->memo;
    uint64_t key = pc - bc->p->bias;
    const pfr_goheap_mframe *fr;
    if (pfr_goheap_memo_get(m, key, &fr, n))
        return fr;
    *n = 0;
    const pfr_goheap_resolver *r = &c->o.resolver;
    if (!r->resolve || !key)
        return NULL;
    if (!bc->begun) {
        bc->begun = true;
        bc->resolvable = !r->begin || r->begin(r->ctx, bc->p->pid) >= 0;
    }
    if (!bc->resolvable)
        return NULL;
    pfr_goheap_frame out[PFR_GOHEAP_MEMO_MAX_INLINE];
    c->st.resolver_calls++;
    int got = r->resolve(r->ctx, bc->p->pid, pc - 1, out, PFR_GOHEAP_MEMO_MAX_INLINE);
    if (got <= 0)
        return NULL; /* not memoised: maybe the process was mid-exec */
    if (pfr_goheap_memo_entries(m) >= c->o.max_frames)
        pfr_goheap_memo_clear(m);
    /* The runtime records one PC per logical frame, inlined calls included (each inlined
     * caller gets the PC of its inline mark), so each PC stands for the innermost function at
     * that address only; the outer frames of its inline chain are PCs of their own. */
    if (pfr_goheap_memo_put(m, key, out, 1) < 0 || !pfr_goheap_memo_get(m, key, &fr, n))
        return NULL;
    return fr;
}

#define LOC_RUNTIME 1u /* innermost function is runtime.* */
#define LOC_GOEXIT  2u /* runtime.goexit: the root of every goroutine, which pprof omits */

/* Location index of pc << 2 | LOC_* flags, or a negative errno. */
static int64_t location_of(build_ctx *bc, uint64_t pc)
{
    pfr_goheap *c = bc->c;
    uint64_t *v = pfr_map_get(&c->locs, pc);
    if (v)
        return (int64_t)*v;
    size_t n;
    const pfr_goheap_mframe *fr = frames_of(bc, pc, &n);
    const pfr_goheap_memo *m = &bc->p->bin->memo;
    pfr_line lines[PFR_GOHEAP_MEMO_MAX_INLINE];
    for (size_t i = 0; i < n; i++) {
        const char *fn = pfr_goheap_memo_str(m, fr[i].function);
        int64_t f = pfr_profile_add_function(bc->pr, fn, fn, pfr_goheap_memo_str(m, fr[i].file), 0);
        if (f < 0)
            return f;
        lines[i] = (pfr_line){(uint32_t)f, fr[i].line};
    }
    int64_t loc = pfr_profile_add_location(bc->pr, bc->mapping, pc, lines, n);
    if (loc < 0)
        return loc;
    const char *leaf = n > 0 ? pfr_goheap_memo_str(m, fr[0].function) : "";
    unsigned flags = strncmp(leaf, "runtime.", 8) == 0 ? LOC_RUNTIME : 0;
    if (strncmp(leaf, "runtime.goexit", 14) == 0 && (leaf[14] == '\0' || leaf[14] == '.'))
        flags |= LOC_GOEXIT;
    uint64_t val = ((uint64_t)loc << 2) | flags;
    if (pc && pfr_map_put(&c->locs, pc, val) < 0)
        return -ENOMEM;
    return (int64_t)val;
}

static int add_bucket(build_ctx *bc, const pfr_goheap_bucket *b, const pfr_goheap_values *v)
{
    pfr_goheap *c = bc->c;
    if (grow_stack(c, b->nstk) < 0)
        return -ENOMEM;
    for (uint32_t j = 0; j < b->nstk; j++) {
        int64_t l = location_of(bc, c->walk.pcs[b->stk + j]);
        if (l < 0)
            return (int)l;
        c->stack[j] = (uint32_t)(l >> 2);
        c->rt[j] = (uint8_t)(l & 3);
    }
    /* Shape stacks as Go's pprof does: hide the allocator's own frames above the first
     * non-runtime one, and stop at runtime.goexit. */
    uint32_t start = 0, end = b->nstk;
    while (start < end && (c->rt[start] & LOC_RUNTIME))
        start++;
    if (start == end)
        start = 0;
    for (uint32_t j = start; j < end; j++) {
        if (c->rt[j] & LOC_GOEXIT) {
            end = j > start ? j : end;
            break;
        }
    }
    int64_t vals[4] = {v->alloc_objects, v->alloc_bytes, v->inuse_objects, v->inuse_bytes};
    int64_t s = pfr_profile_add_sample(bc->pr, c->stack + start, end - start, vals, NULL, 0);
    return s < 0 ? (int)s : 0;
}

static int build_profile(pfr_goheap *c, gproc *p, int64_t rate, int64_t now_ns, pfr_profile **out)
{
    pfr_profile *pr = pfr_profile_new();
    if (!pr)
        return -ENOMEM;
    pfr_profile_add_sample_type(pr, PFR_GOHEAP_TYPE_ALLOC_OBJECTS, "count");
    pfr_profile_add_sample_type(pr, PFR_GOHEAP_TYPE_ALLOC_SPACE, "bytes");
    pfr_profile_add_sample_type(pr, PFR_GOHEAP_TYPE_INUSE_OBJECTS, "count");
    pfr_profile_add_sample_type(pr, PFR_GOHEAP_TYPE_INUSE_SPACE, "bytes");
    pfr_profile_set_period(pr, "space", "bytes", rate > 0 ? rate : 0);
    int64_t dur = p->last_ns && now_ns > p->last_ns ? now_ns - p->last_ns : c->o.interval_ns;
    pfr_profile_set_time(pr, now_ns - dur, dur);
    const pfr_goheap_elfinfo *in = &p->bin->info;
    build_ctx bc = {c, p, pr, -1, false, false};
    if (in->text_memsz)
        bc.mapping = pfr_profile_add_mapping(pr, in->text_vaddr + p->bias,
                                             in->text_vaddr + in->text_memsz + p->bias,
                                             in->text_offset, p->exe, "");
    pfr_map_clear(&c->locs);
    int rc = bc.mapping < -1 ? (int)bc.mapping : 0;
    for (size_t i = 0; rc == 0 && i < c->walk.nbuckets; i++) {
        const pfr_goheap_values *v = &c->vals[i];
        if (c->walk.buckets[i].nstk == 0 ||
            (!v->alloc_objects && !v->alloc_bytes && !v->inuse_objects && !v->inuse_bytes))
            continue;
        rc = add_bucket(&bc, &c->walk.buckets[i], v);
    }
    if (rc == 0)
        rc = pfr_profile_error(pr);
    if (rc < 0) {
        pfr_profile_free(pr);
        return rc;
    }
    *out = pr;
    return 0;
}

/* ---- one process ---- */

static void count_walk_error(pfr_goheap *c, int rc)
{
    c->st.walk_errors++;
    switch (rc) {
    case -ELOOP:
        c->st.loop_errors++;
        break;
    case -E2BIG:
        c->st.limit_errors++;
        break;
    case -EBADMSG:
        c->st.bad_buckets++;
        break;
    case -ETIMEDOUT:
        c->st.timeouts++;
        break;
    case -ENOMEM:
        break;
    default:
        c->st.read_errors++;
    }
}

/* MemProfileRate: read it, and in FORCE mode set it where it is 0. Returns 1 to go on walking,
 * 0 to skip this process this time, negative errno on a failed read. */
static int check_rate(pfr_goheap *c, gproc *p, const pfr_goheap_mem *mem, uint64_t addr,
                      int64_t *rate, const pfr_goheap_sink *sink)
{
    int rc = pfr_goheap_walk_read(&c->walk, mem, addr, rate, sizeof(*rate));
    if (rc < 0)
        return rc;
    if (*rate != 0)
        return 1;
    /* Nothing recorded while the rate is 0: whatever appears later is since then. */
    if (!p->delta.primed)
        p->from_zero = true;
    if (c->o.mode != PFR_GOHEAP_FORCE) {
        c->st.not_sampling++;
        return 0;
    }
    int64_t want = c->o.force_rate, check = 0;
    rc = mem->write ? mem->write(mem->ctx, addr, &want, sizeof(want)) : -EROFS;
    if (rc == 0) {
        pfr_goheap_walk_reset_cache(&c->walk);
        rc = pfr_goheap_walk_read(&c->walk, mem, addr, &check, sizeof(check));
        if (rc == 0 && check != want)
            rc = -EIO;
    }
    if (rc < 0) {
        c->st.force_errors++;
        emit(sink, PFR_GOHEAP_EV_FORCE_FAILED, p->pid, p->exe, rc,
             "could not set MemProfileRate: %s", strerror(-rc));
        return 0;
    }
    c->st.rates_forced++;
    emit(sink, PFR_GOHEAP_EV_RATE_FORCED, p->pid, p->exe, 0,
         "MemProfileRate was 0, set to %" PRId64, want);
    return 0;
}

static int grow_vals(pfr_goheap *c, size_t n)
{
    if (n <= c->cap_vals)
        return 0;
    pfr_goheap_values *nv = realloc(c->vals, n * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    c->vals = nv;
    c->cap_vals = n;
    return 0;
}

static void walk_and_emit(pfr_goheap *c, gproc *p, const pfr_goheap_mem *mem, int64_t now_ns,
                          const pfr_goheap_sink *sink)
{
    const pfr_goheap_elfinfo *in = &p->bin->info;
    int64_t rate;
    /* blocks cached from the previous process (same binary, same addresses) are not this one's */
    pfr_goheap_walk_reset_cache(&c->walk);
    int rc = check_rate(c, p, mem, in->mem_profile_rate + p->bias, &rate, sink);
    if (rc == 0)
        return;
    pfr_goheap_walk_limits lim = {c->o.max_buckets, c->o.max_nstk, 0, c->o.max_walk_ns};
    if (rc > 0)
        rc = pfr_goheap_walk_run(&c->walk, mem, in->mbuckets + p->bias, &lim);
    else
        snprintf(c->walk.err, sizeof(c->walk.err), "MemProfileRate unreadable");
    c->st.buckets_read += c->walk.nbuckets;
    if (rc < 0) {
        count_walk_error(c, rc);
        emit(sink, PFR_GOHEAP_EV_WALK_ERROR, p->pid, p->exe, rc, "%s", c->walk.err);
        return;
    }
    pfr_goheap_totals tot;
    bool baseline = !p->delta.primed && !p->from_zero;
    if (grow_vals(c, c->walk.nbuckets) < 0 ||
        pfr_goheap_delta_update(&p->delta, &c->walk, rate, p->from_zero, c->vals, &tot) < 0)
        return;
    p->from_zero = false;
    pfr_profile *pr = NULL;
    if (build_profile(c, p, rate, now_ns, &pr) < 0)
        return;
    p->last_ns = now_ns;
    c->st.profiles++;
    pfr_goheap_proc info = {
        .pid = p->pid,
        .exe = p->exe,
        .go_version = p->bin->info.go_version,
        .start_time = p->starttime,
        .mem_profile_rate = rate,
        .buckets = c->walk.nbuckets,
        .baseline = baseline,
        .alloc_objects_total = tot.alloc_objects,
        .alloc_bytes_total = tot.alloc_bytes,
        .inuse_objects = tot.inuse_objects,
        .inuse_bytes = tot.inuse_bytes,
        .interval_alloc_objects = tot.delta_objects,
        .interval_alloc_bytes = tot.delta_bytes,
    };
    if (sink && sink->profile)
        sink->profile(sink->ctx, &info, pr);
    else
        pfr_profile_free(pr);
}

/* pid, whose executable st identifies (stat of /proc/PID/exe) */
static void visit_exe(pfr_goheap *c, pid_t pid, const struct stat *st, int64_t now_ns,
                      const pfr_goheap_sink *sink)
{
    c->st.processes_checked++;
    gbin *b = bin_get(c, pid, st);
    if (!b || b->kind == BIN_NOT_GO) {
        pfr_goheap_forget(c, pid); /* it may have exec'ed away from Go */
        return;
    }
    if (b->kind != BIN_GO) {
        if (!b->reported) {
            b->reported = true;
            char *exe = read_exe(c->proc_root, pid);
            if (b->kind == BIN_STRIPPED)
                c->st.stripped_binaries++;
            else
                c->st.bad_binaries++;
            emit(sink, b->kind == BIN_STRIPPED ? PFR_GOHEAP_EV_STRIPPED : PFR_GOHEAP_EV_BAD_BINARY,
                 pid, exe, b->err, "%s", b->why);
            free(exe);
        }
        pfr_goheap_forget(c, pid);
        return;
    }
    uint64_t starttime, startstack;
    if (pfr_goheap_read_stat(c->proc_root, pid, &starttime, &startstack) < 0)
        return;
    c->st.go_processes++;
    gproc *p = proc_find(c, pid);
    bool fresh = !p;
    if (!p && !(p = proc_add(c, pid)))
        return;
    p->visit = c->tick;
    if (fresh || p->bin != b || p->starttime != starttime || p->startstack != startstack) {
        bool exec_seen = !fresh && p->starttime == starttime;
        if (!fresh) {
            c->st.restarts++;
            emit(sink, PFR_GOHEAP_EV_RESTARTED, pid, p->exe, 0, "%s",
                 exec_seen ? "process exec'ed" : "a new process has this pid");
        }
        if (proc_start(c, p, b, starttime, startstack, exec_seen, st) < 0) {
            pfr_goheap_forget(c, pid); /* not mapped (yet): try again next time */
            return;
        }
        /* once per process (and exec): its memory is neither read nor written if it refuses */
        pfr_identity_consent_read(c->proc_root, pid, PFR_CONSENT_ENVIRON_MAX, &p->opted_out);
        c->st.opted_out += p->opted_out;
    }
    if (p->opted_out)
        return;
    /* a walk holds its buckets and stacks: not while the recorder is over its memory budget */
    if (!pfr_membudget_allow(c->o.membudget, PFR_MEM_GOHEAP, WALK_COST_BYTES))
        return;
    pfr_goheap_procmem pm;
    pfr_goheap_procmem_init(&pm, pid, c->proc_root);
    pfr_goheap_mem mem = pfr_goheap_procmem_reader(&pm);
    if (c->o.mem_hook)
        c->o.mem_hook(c->o.mem_hook_ctx, pid, &mem);
    walk_and_emit(c, p, &mem, now_ns, sink);
    c->st.mem_reads += pm.reads;
    c->st.mem_bytes += pm.bytes;
    pfr_goheap_procmem_close(&pm);
}

static void visit(pfr_goheap *c, pid_t pid, int64_t now_ns, const pfr_goheap_sink *sink)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%d/exe", c->proc_root, (int)pid);
    struct stat st;
    if (pfr_fsguard_stat_cached(AT_FDCWD, path, &st) < 0) { /* never asks a hung server */
        c->st.processes_checked++;
        pfr_goheap_forget(c, pid); /* gone (or a kernel thread, never tracked) */
        return;
    }
    visit_exe(c, pid, &st, now_ns, sink);
}

static int visit_all(pfr_goheap *c, int64_t now_ns, const pfr_goheap_sink *sink)
{
    pfr_exe_list l;
    int rc = pfr_exe_scan_get(c->o.exes, c->o.exes_max_age_ns, &l);
    if (rc)
        return rc;
    for (size_t i = 0; i < l.n; i++)
        visit_exe(c, l.v[i].pid, &l.v[i].st, now_ns, sink);
    pfr_exe_list_free(&l);
    /* processes not seen this time have exited */
    for (size_t i = c->nprocs; i-- > 0;)
        if (c->procs[i]->visit != c->tick)
            proc_remove_at(c, i);
    return 0;
}

int pfr_goheap_collect(pfr_goheap *c, int64_t now_ns, const pid_t *pids, size_t npids,
                       const pfr_goheap_sink *sink)
{
    int64_t t0 = pfr_clock_ns(CLOCK_MONOTONIC), boot0 = pfr_clock_ns(CLOCK_BOOTTIME);
    c->st.collections++;
    c->tick++;
    int rc = 0;
    if (c->o.mode == PFR_GOHEAP_DISABLED)
        goto out;
    if (!pids) {
        rc = visit_all(c, now_ns, sink);
    } else {
        for (size_t i = 0; i < npids; i++)
            visit(c, pids[i], now_ns, sink);
    }
out:
    c->prev_boot_ns = boot0;
    c->st.collect_ns += (uint64_t)(pfr_clock_ns(CLOCK_MONOTONIC) - t0);
    return rc;
}
