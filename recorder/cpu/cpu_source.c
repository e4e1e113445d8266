/* The eBPF CPU profiler source: sampler + process notifications + per-interval profiles. */
#include "cpu_source.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cpu_metrics.h"
#include "pfr_clock.h"
#include "pfr_hash.h"
#include "pfr_log.h"
#include "py_frames.h"

/* An idle process keeps its record and mappings snapshot; every this many intervals (5 minutes
 * at the default 10 s) the records not sampled since are checked for liveness, in case an exit
 * notification was lost. That is rare (a full notification ring, which is counted), and a gone
 * process costs only its record meanwhile; the check costs a kill(2) per idle process. */
#define SWEEP_EVERY_GENS 30

/* A process first seen within moments of its start (or of an exec) is often still inside the
 * dynamic loader, its libraries not mapped yet: its mappings are read again a little later, so
 * a process that lives 50 ms still has them all. Later dlopen()s are caught by the symbolizer,
 * which re-reads the mappings of a live process when an address falls outside them. */
#define RESNAP_DELAY_NS (15 * 1000000ll)
#define YOUNG_NS        (100 * 1000000ll)
#define RESNAP_MAX      4096
/* Once exits are seen to carry mappings, a new process whose executable is already known (by its
 * inode, from other snapshots) is not snapshotted at once: most such processes are short-lived
 * and their exit names them for nothing; the ones still alive at the drain are snapshotted
 * then. At most this many wait; past it, snapshots are taken at once again. */
#define DEFER_MAX 4096
/* executable files mapped while in the dynamic loader: the program and ld.so */
#define LOADER_FILES 2
/* How long a drain waits for the notification thread to handle what was sent before the flip;
 * past it the interval goes on, and processes not handled yet are read from /proc. */
#define EVENTS_WAIT_NS (200 * 1000000ll)

struct resnap {
    uint32_t tgid;
    uint64_t start_time;
    int64_t due_ns;
};

struct deferred {
    uint32_t tgid;
    uint64_t start_time;
};

struct pfr_cpu_source {
    pfr_cpu_profiler *cp;
    pfr_shared_sym *shared; /* the daemon's symbolizer (borrowed), once this is its keeper */
    pfr_symbolizer *sym;    /* its symbolizer: used only holding lock */
    pfr_proc_table procs;
    pfr_frame_cache frames;   /* symbolized frames kept across intervals */
    pfr_py *py;               /* Python processes' frames; NULL when python_frames is off */
    uint64_t perf_map_errors; /* the symbolizer's, as last logged */
    pfr_service_rules rules;
    pfr_cpu_config conf;      /* as started: what a reload cannot change */
    uint64_t sym_cache_bytes; /* the shared symbolizer's settings as started (for reload) */
    bool dwarf, perf_maps;
    /* the shared symbolizer's lock: guards procs, rules, sym, gen and the counters below (one
     * lock, as the builder reads procs while it symbolizes) */
    pfr_fair_lock *lock;
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    int wake_fd; /* eventfd: wakes the notification thread (to stop, or to read exits) */
    /* the notification thread broadcasts events_cv after each pass over the notifications,
     * for a drain waiting until what was sent before its flip is handled (wait_events) */
    pthread_mutex_t events_mu;
    pthread_cond_t events_cv;
    int64_t period_ns;
    int64_t build_budget_ns; /* symbolization time per interval before frames go unnamed */
    uint64_t gen;            /* drain generation */
    pfr_cpu_source_stats st;
    struct resnap *resnaps; /* pending second looks, event thread only */
    size_t nresnaps;
    bool exit_maps_seen;       /* an exit carried mappings: this kernel sends them */
    pfr_map named;             /* files the sampler was told user space can name (file_key()) */
    uint64_t named_gen;        /* the symbolizer's paths generation they were told under */
    struct deferred *deferred; /* snapshots left for the drain (see DEFER_MAX), under lock */
    size_t ndeferred;
};

/* ---- process notifications (event thread, lock held) ---- */

/* A device number as the kernel's BPF reads it (major << 20 | minor), as stat() reports it. */
static uint64_t stat_dev(uint32_t kernel_dev)
{
    return makedev(kernel_dev >> 20, kernel_dev & 0xfffff);
}

/* The other way round. */
static uint32_t kernel_dev(uint64_t dev)
{
    return (uint32_t)(major(dev) << 20 | (minor(dev) & 0xfffff));
}

static void name_files_of(pfr_cpu_source *cs, uint32_t tgid);

static int timed_add_process(pfr_cpu_source *cs, uint32_t tgid)
{
    int64_t t0 = pfr_clock_mono_ns();
    int rc = pfr_symbolizer_add_process(cs->sym, (pid_t)tgid);
    if (rc == 0) {
        name_files_of(cs, tgid);
        pfr_py_frames_note(cs->py, cs->cp, cs->sym, tgid);
    }
    uint64_t dt = (uint64_t)(pfr_clock_mono_ns() - t0);
    cs->st.snapshots++;
    cs->st.snapshot_ns += dt;
    if (dt > cs->st.snapshot_max_ns)
        cs->st.snapshot_max_ns = dt;
    return rc;
}

static int snapshot_tgid(pfr_cpu_source *cs, uint32_t tgid)
{
    int rc = timed_add_process(cs, tgid);
    if (rc == -ESRCH)
        cs->st.snapshot_failures++;
    return rc;
}

static void snapshot(pfr_cpu_source *cs, pfr_proc *p)
{
    if (!p->kthread)
        snapshot_tgid(cs, p->tgid);
}

/* Snapshot a process the notification ev is about (unless it is a kernel thread) and find its
 * executable's path among the mappings (exe[0] = '\0' if not there). */
static void snapshot_for(pfr_cpu_source *cs, const struct pfr_event *ev, char *exe, size_t exelen)
{
    exe[0] = '\0';
    if (ev->flags & PFR_EVF_KTHREAD)
        return;
    if (snapshot_tgid(cs, ev->tgid) != 0) {
        /* what the symbolizer still holds under this pid is another image (before the exec, or
         * of an earlier process with the pid): the mappings listed at the exit replace it */
        pfr_symbolizer_forget_process(cs->sym, (pid_t)ev->tgid);
        return;
    }
    if (!ev->exe_ino)
        return;
    uint64_t dev = stat_dev(ev->exe_dev);
    if (pfr_symbolizer_file_path(cs->sym, (pid_t)ev->tgid, dev, ev->exe_ino, exe, exelen) != 0)
        exe[0] = '\0';
}

static uint64_t file_key(uint32_t dev, uint64_t ino)
{
    return pfr_hash_combine(pfr_mix64(ino), dev); /* a clash only leaves a file untold */
}

/* Once the symbolizer has forgotten the paths (it keeps a bounded number), the sampler must
 * forget the files they named. */
static void sync_named(pfr_cpu_source *cs)
{
    uint64_t gen = pfr_symbolizer_paths_generation(cs->sym);
    if (gen == cs->named_gen)
        return;
    pfr_cpu_profiler_unname_files(cs->cp);
    pfr_map_clear(&cs->named);
    cs->named_gen = gen;
}

/* Tell the sampler that user space can name a file (kernel dev_t) from an exit's mappings: new
 * processes running it need not wake this thread (their notifications wait for the next wake-up
 * or the drain), and exits need not send its path. Undone when the symbolizer forgets the paths
 * that name them. */
static void name_file(pfr_cpu_source *cs, uint32_t dev, uint64_t ino)
{
    sync_named(cs);
    uint64_t key = file_key(dev, ino);
    if (pfr_map_get(&cs->named, key) || cs->named.n >= PFR_NAMED_FILES_MAX)
        return;
    /* a new CPython process is walked from its notification on: it must not wait */
    if (pfr_py_frames_is_python(cs->py, cs->sym, stat_dev(dev), ino))
        return;
    if (pfr_cpu_profiler_name_file(cs->cp, dev, ino) == 0)
        pfr_map_put(&cs->named, key, 1);
}

#define NAMED_PER_SNAPSHOT 64

/* The files of a process just snapshotted, once exits are seen to carry mappings (before, or on
 * a kernel that sends none, a known path does not name a process gone before its look). */
static void name_files_of(pfr_cpu_source *cs, uint32_t tgid)
{
    pfr_sym_file_id ids[NAMED_PER_SNAPSHOT];
    if (!cs->exit_maps_seen)
        return;
    size_t n = pfr_symbolizer_named_files(cs->sym, (pid_t)tgid, ids, NAMED_PER_SNAPSHOT);
    for (size_t i = 0; i < n && i < NAMED_PER_SNAPSHOT; i++)
        name_file(cs, kernel_dev(ids[i].dev), ids[i].ino);
}

/* Leave the snapshot of the process ev is about to the drain or its exit, when both can name it:
 * exits carry mappings on this kernel and its executable's path is known. Returns whether it
 * was left, with the executable's path in exe. */
static bool defer_snapshot(pfr_cpu_source *cs, const struct pfr_event *ev, char *exe, size_t exelen)
{
    if (!cs->exit_maps_seen || (ev->flags & PFR_EVF_KTHREAD) || !ev->exe_ino ||
        cs->ndeferred >= DEFER_MAX)
        return false;
    uint64_t dev = stat_dev(ev->exe_dev);
    if (pfr_symbolizer_known_path(cs->sym, dev, ev->exe_ino, exe, exelen) != 0)
        return false; /* a program not seen yet: its snapshot teaches the paths of its files */
    pfr_symbolizer_forget_process(cs->sym, (pid_t)ev->tgid); /* another image's, if any */
    cs->deferred[cs->ndeferred++] = (struct deferred){ev->tgid, ev->start_time};
    cs->st.snapshots_deferred++;
    name_file(cs, ev->exe_dev, ev->exe_ino);
    return true;
}

/* Snapshot the processes whose snapshot was left for the drain and that still live (the others
 * had theirs from their exit). */
static void take_deferred(pfr_cpu_source *cs)
{
    pfr_fair_lock_acquire(cs->lock);
    for (size_t i = 0; i < cs->ndeferred; i++) {
        pfr_proc *p = pfr_proc_table_get(&cs->procs, cs->deferred[i].tgid);
        if (p && !p->exited && !p->opted_out && p->start_time == cs->deferred[i].start_time &&
            pfr_symbolizer_process_files(cs->sym, (pid_t)p->tgid) == 0)
            snapshot_tgid(cs, p->tgid);
    }
    cs->ndeferred = 0;
    pfr_fair_lock_release(cs->lock);
}

/* The event thread's turn at the lock (the builder lets it in between samples). */
static void lock_first(pfr_cpu_source *cs)
{
    int64_t t0 = pfr_clock_mono_ns();
    pfr_fair_lock_acquire(cs->lock);
    uint64_t dt = (uint64_t)(pfr_clock_mono_ns() - t0);
    if (dt > cs->st.event_wait_max_ns)
        cs->st.event_wait_max_ns = dt;
}

static void schedule_resnap(pfr_cpu_source *cs, const pfr_proc *p, bool force)
{
    if (p->kthread || cs->nresnaps >= RESNAP_MAX)
        return;
    int64_t now = pfr_clock_mono_ns(); /* task start_time is CLOCK_MONOTONIC */
    if (!force && now - (int64_t)p->start_time > YOUNG_NS)
        return;
    /* past the loader already (its libraries mapped): a second look would find the same, and
     * costs a wake-up and a read of the maps per short-lived process */
    if (pfr_symbolizer_process_files(cs->sym, (pid_t)p->tgid) > LOADER_FILES)
        return;
    cs->resnaps[cs->nresnaps++] = (struct resnap){
        .tgid = p->tgid, .start_time = p->start_time, .due_ns = now + RESNAP_DELAY_NS};
}

/* Take the second looks that are due; returns ms until the next one (or -1). */
static int run_resnaps(pfr_cpu_source *cs)
{
    int64_t now = pfr_clock_mono_ns(), next = -1;
    size_t j = 0;
    if (cs->nresnaps == 0)
        return -1;
    lock_first(cs);
    for (size_t i = 0; i < cs->nresnaps; i++) {
        struct resnap r = cs->resnaps[i];
        if (r.due_ns > now) {
            cs->resnaps[j++] = r;
            if (next < 0 || r.due_ns < next)
                next = r.due_ns;
            continue;
        }
        pfr_proc *p = pfr_proc_table_get(&cs->procs, r.tgid);
        if (p && !p->exited && !p->opted_out && p->start_time == r.start_time)
            timed_add_process(cs, r.tgid);
    }
    cs->nresnaps = j;
    pfr_fair_lock_release(cs->lock);
    return next < 0 ? -1 : (int)((next - now) / 1000000 + 1);
}

static void on_new(pfr_cpu_source *cs, const struct pfr_event *ev)
{
    pfr_proc *p = pfr_proc_table_get(&cs->procs, ev->tgid);
    if (p && !p->exited && p->start_time == ev->start_time)
        return; /* duplicate */
    if (p && !p->exited && p->start_time == 0) {
        /* a record the drain made before this notification was handled: complete it */
        p->start_time = ev->start_time;
        if (ev->comm[0])
            snprintf(p->comm, sizeof(p->comm), "%s", ev->comm);
        if (p->opted_out)
            return; /* never profiled: no mappings */
        snapshot(cs, p);
        schedule_resnap(cs, p, false);
        return;
    }
    if (p)
        pfr_frame_cache_forget(&cs->frames, ev->tgid); /* a new process reusing the tgid */
    /* the mappings first: the sooner they are read, the likelier a short-lived process still
     * has them, and they name the executable */
    char exe[PATH_MAX];
    bool deferred = defer_snapshot(cs, ev, exe, sizeof(exe));
    if (!deferred)
        snapshot_for(cs, ev, exe, sizeof(exe));
    if (deferred)
        pfr_py_frames_note_exe(cs->py, cs->cp, ev->tgid, exe);
    pfr_proc_hint hint = {.comm = ev->comm, .cgroup_id = ev->cgroup_id, .exe = exe};
    p = pfr_proc_table_learn_hinted(&cs->procs, ev->tgid, ev->start_time,
                                    ev->flags & PFR_EVF_KTHREAD, &hint, &cs->rules);
    if (!p)
        return;
    cs->st.processes_seen++;
    if (p->opted_out) {
        /* never profiled: its mappings are not kept either */
        pfr_symbolizer_forget_process(cs->sym, (pid_t)p->tgid);
        return;
    }
    if (!deferred)
        schedule_resnap(cs, p, false);
}

static void on_exec(pfr_cpu_source *cs, const struct pfr_event *ev)
{
    pfr_proc *p = pfr_proc_table_get(&cs->procs, ev->tgid);
    if (!p) {
        on_new(cs, ev);
        return;
    }
    pfr_frame_cache_forget(&cs->frames, p->tgid); /* a new image */
    pfr_py_frames_drop(cs->py, cs->cp, p->tgid);
    char exe[PATH_MAX];
    bool deferred = defer_snapshot(cs, ev, exe, sizeof(exe));
    if (!deferred)
        snapshot_for(cs, ev, exe, sizeof(exe));
    if (deferred)
        pfr_py_frames_note_exe(cs->py, cs->cp, ev->tgid, exe);
    /* the notification was sent after exec had set the new comm */
    pfr_proc_hint hint = {.comm = ev->comm, .cgroup_id = ev->cgroup_id, .exe = exe};
    pfr_proc_refresh_hinted(&cs->procs, p, &hint, &cs->rules);
    if (p->opted_out)
        pfr_symbolizer_forget_process(cs->sym, (pid_t)p->tgid);
    else if (!deferred)
        schedule_resnap(cs, p, true);
}

static int by_start(const void *a, const void *b)
{
    uint64_t x = ((const pfr_sym_exit_map *)a)->start, y = ((const pfr_sym_exit_map *)b)->start;
    return x < y ? -1 : x > y;
}

/* The mappings the kernel listed at the exit, for a process whose snapshot failed (it exited
 * first), was taken in its loader, or came before a dlopen: taken if they name more files. Those
 * its samples met (the sampler's cache) are added to the snapshot instead. */
static void take_exit_maps(pfr_cpu_source *cs, const pfr_proc *p, const struct pfr_exit_maps *em)
{
    pfr_sym_exit_map v[PFR_EXIT_MAPS_MAX];
    uint32_t n = em->nmaps < PFR_EXIT_MAPS_MAX ? em->nmaps : PFR_EXIT_MAPS_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const struct pfr_map_rec *r = &em->maps[i];
        v[i] = (pfr_sym_exit_map){.start = r->start,
                                  .end = r->end,
                                  .pgoff = r->pgoff,
                                  .dev = stat_dev(r->dev),
                                  .ino = r->ino,
                                  .kind = r->kind == PFR_MAPREC_VDSO   ? PFR_SYM_EXIT_VDSO
                                          : r->kind == PFR_MAPREC_FILE ? PFR_SYM_EXIT_FILE
                                                                       : PFR_SYM_EXIT_ANON};
    }
    int rc;
    if (em->ev.flags & PFR_EVF_MAPS_SAMPLED) { /* the sampler's cache: in no order */
        cs->st.exit_maps_sampled++;
        qsort(v, n, sizeof(v[0]), by_start);
        rc = pfr_symbolizer_merge_exit_maps(cs->sym, (pid_t)p->tgid, v, n);
    } else {
        cs->st.exit_maps_walked++;
        rc = pfr_symbolizer_set_exit_maps(cs->sym, (pid_t)p->tgid, v, n);
    }
    if (rc > 0)
        cs->st.exit_maps_taken++;
    else
        cs->st.exit_maps_unneeded++;
    if (rc < 0)
        pfr_debug("cpu: mappings at the exit of %u refused: %s", p->tgid,
                  rc == -EINVAL ? pfr_symbolizer_last_error(cs->sym) : strerror(-rc));
}

/* The components of pe (leaf first) as an absolute path into out; 0, or -1 when cut by the
 * sampler or not clean (an empty, "." or ".." component, or a '/'). */
static int join_path(const struct pfr_path_event *pe, char *out, size_t outlen)
{
    size_t len = 0;
    if ((pe->ev.flags & PFR_EVF_PATH_CUT) || pe->nparts == 0)
        return -1;
    for (uint32_t i = pe->nparts; i-- > 0;) {
        const char *part = pe->parts[i];
        size_t n = strlen(part);
        if (n == 0 || strchr(part, '/') || strcmp(part, ".") == 0 || strcmp(part, "..") == 0 ||
            len + 1 + n >= outlen)
            return -1;
        out[len++] = '/';
        memcpy(out + len, part, n);
        len += n;
    }
    out[len] = '\0';
    return 0;
}

/* The path of a file an exiting process maps code from, which no snapshot saw (a library it
 * opened after its own snapshot, mostly): learned, so that its exit's mappings name it. */
static void on_path(pfr_cpu_source *cs, const struct pfr_path_event *pe)
{
    char path[PATH_MAX];
    if (join_path(pe, path, sizeof(path)) != 0 ||
        pfr_symbolizer_learn_path(cs->sym, stat_dev(pe->dev), pe->ino, path) != 0) {
        cs->st.exit_paths_refused++;
        return;
    }
    cs->st.exit_paths_learned++;
    name_file(cs, pe->dev, pe->ino);
}

static void on_exit_event(pfr_cpu_source *cs, const struct pfr_event *ev)
{
    pfr_proc *p = pfr_proc_table_get(&cs->procs, ev->tgid);
    if (!p || p->exited)
        return;
    if (ev->flags & PFR_EVF_MAPS)
        cs->exit_maps_seen = true;
    if (p->start_time != 0 && p->start_time != ev->start_time)
        return;
    p->exited = true;
    p->exited_gen = cs->gen;
    if ((ev->flags & PFR_EVF_MAPS) && !p->kthread)
        take_exit_maps(cs, p, (const struct pfr_exit_maps *)ev);
}

/* A file the unwinder refused (once per file: it then has no table and is not asked for again):
 * its stacks are walked by frame pointers. Past a limit it is a warning (a file that large, or
 * one made to cost the recorder); a file libdw cannot read is common enough for info. */
static void log_unwind_refused(void *ctx, const pfr_unwind_refused *r)
{
    (void)ctx;
    const char *reason = pfr_unwind_refusal_name(r->reason);
    if (r->reason == PFR_UW_REFUSED_BAD_FILE)
        pfr_info("cpu: no unwind table for %s (pid %u): %s: %s", r->path, r->pid, reason, r->why);
    else
        pfr_warn("cpu: unwind table of %s (pid %u) refused, %s: %s; its stacks are walked by "
                 "frame pointers",
                 r->path, r->pid, reason, r->why);
}

/* A table in place: how long the file's stacks were walked by frame pointers, for the debug log
 * (a program's first stacks are only as good as its frame pointers until then). */
static void log_unwind_built(void *ctx, const pfr_unwind_built *b)
{
    (void)ctx;
    pfr_debug("cpu: unwind table of %s (pid %u): %u rows, %s in %.1f ms, in place %.1f ms "
              "after it was asked%s%s",
              b->path, b->pid, b->rows, b->cached ? "read from the cache" : "built", b->build_ms,
              b->waited_ms, b->small ? " (small)" : "",
              b->not_kept_no_room ? "; not kept on disk: its file system's free space is left "
                                    "to the ring"
                                  : "");
}

static void log_unwind_cache_error(void *ctx, const char *why)
{
    (void)ctx;
    pfr_warn("cpu: %s (tables are built again after each eviction)", why);
}

bool pfr_cpu_config_unwind_cache_dir(const pfr_cpu_config *cc, const char *store_path,
                                     const char *cache_directory, char *buf, size_t len)
{
    const char *set = cc->unwind_cache_dir;
    if (cc->unwind_cache_bytes == 0 || (set && strcmp(set, "off") == 0))
        return false;
    int n;
    if (set) {
        n = snprintf(buf, len, "%s", set);
    } else if (cache_directory && cache_directory[0] == '/') {
        size_t first = strcspn(cache_directory, ":"); /* systemd lists several with ':' */
        n = snprintf(buf, len, "%.*s/unwind", (int)first, cache_directory);
    } else {
        const char *slash = store_path ? strrchr(store_path, '/') : NULL;
        if (!slash) /* a ring named without a folder: the working directory's */
            n = snprintf(buf, len, "unwind-cache");
        else
            n = snprintf(buf, len, "%.*s/unwind-cache", (int)(slash - store_path), store_path);
    }
    return n > 0 && (size_t)n < len;
}

static void on_event(const struct pfr_event *ev, void *ctx)
{
    pfr_cpu_source *cs = ctx;
    lock_first(cs);
    sync_named(cs); /* the drain's re-reads of mappings may have made it forget them */
    switch (ev->type) {
    case PFR_EV_NEW:
        on_new(cs, ev);
        break;
    case PFR_EV_EXEC:
        on_exec(cs, ev);
        break;
    case PFR_EV_EXIT:
        on_exit_event(cs, ev);
        break;
    case PFR_EV_PATH:
        on_path(cs, (const struct pfr_path_event *)ev);
        break;
    }
    pfr_fair_lock_release(cs->lock);
}

/* Sleeps until a notification comes, a second look is due, or destroy wakes it: a thread that
 * woke up every few milliseconds for nothing would cost more than the work itself. */
static void *event_thread(void *arg)
{
    pfr_cpu_source *cs = arg;
    pthread_setname_np(pthread_self(), "pfr-notify");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.fd = pfr_cpu_profiler_event_fd(cs->cp);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0) {
        pfr_err("cpu: cannot wait for process notifications: %s", strerror(errno));
        if (ep >= 0)
            close(ep);
        return NULL;
    }
    ev.data.fd = cs->wake_fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, cs->wake_fd, &ev);
    int timeout = -1;
    while (!atomic_load(&cs->stop)) {
        struct epoll_event got[2];
        int n = epoll_wait(ep, got, 2, timeout);
        if (n < 0 && errno != EINTR) {
            pfr_warn("cpu: waiting for process notifications failed: %s", strerror(errno));
            usleep(100000);
        }
        for (int i = 0; i < n; i++) {
            uint64_t pokes;
            if (got[i].data.fd == cs->wake_fd && read(cs->wake_fd, &pokes, sizeof(pokes)) < 0)
                pfr_debug("cpu: reading the wake-up counter: %s", strerror(errno));
        }
        int rc = pfr_cpu_profiler_consume_events(cs->cp);
        if (rc < 0)
            pfr_warn("cpu: reading process notifications failed: %s", strerror(-rc));
        pthread_mutex_lock(&cs->events_mu);
        pthread_cond_broadcast(&cs->events_cv);
        pthread_mutex_unlock(&cs->events_mu);
        timeout = run_resnaps(cs);
    }
    close(ep);
    return NULL;
}

/* ---- per-interval work (main thread) ---- */

/* Records for sampled processes whose notification is not handled yet (still queued, or lost):
 * read them from /proc now. */
static void learn_missing(pfr_cpu_source *cs, const pfr_cpu_drain *d)
{
    pfr_fair_lock_acquire(cs->lock);
    for (size_t i = 0; i < d->nsamples; i++) {
        uint32_t tgid = d->samples[i].tgid;
        if (pfr_proc_table_get(&cs->procs, tgid))
            continue;
        char exe[16], cgroup[16], comm[16];
        bool kthread = false;
        int rc = pfr_process_read_facts(cs->procs.proc_root, tgid, exe, sizeof(exe), cgroup,
                                        sizeof(cgroup), comm, sizeof(comm), &kthread);
        pfr_proc *p;
        struct pfr_exiting ex;
        if (rc != 0 && pfr_cpu_profiler_exiting(cs->cp, tgid, &ex) == 0) {
            /* sampled only while exiting, its /proc entry gone: its cgroup still names its
             * service and container */
            ex.comm[sizeof(ex.comm) - 1] = '\0';
            pfr_proc_hint hint = {.comm = ex.comm, .cgroup_id = ex.cgroup_id};
            p = pfr_proc_table_learn_hinted(&cs->procs, tgid, 0, false, &hint, &cs->rules);
            cs->st.exiting_named += p != NULL;
        } else {
            /* gone before its notification was handled: named "[exited]" */
            p = pfr_proc_table_learn(&cs->procs, tgid, 0, rc == 0 ? comm : "[exited]", kthread,
                                     &cs->rules);
        }
        if (!p)
            continue;
        cs->st.processes_seen++;
        /* no snapshot here: its notification (queued) takes it, off the interval's clock; a
         * lost notification is sent again by the kernel on the process's next sample */
        if (rc != 0) {
            /* gone, and its notification lost: name what we can, forget after this drain */
            p->exited = true;
            p->exited_gen = cs->gen - 1;
            cs->st.snapshot_failures++;
        }
    }
    /* containers whose metadata came since they were first named */
    cs->st.renamed += pfr_proc_table_rename_pending(&cs->procs, &cs->rules);
    pfr_fair_lock_release(cs->lock);
}

/* By signal 0, not by /proc/PID: a path walk through /proc for each of hundreds of idle
 * processes was most of the sweep's cost. The tgids are the kernel's (BPF), so this holds where
 * the recorder shares the host's pid namespace, as its /proc and BPF need anyway. */
static bool pid_alive(uint32_t tgid)
{
    return kill((pid_t)tgid, 0) == 0 || errno == EPERM;
}

/* Forget processes that exited before this drain began (their samples are all drained), and,
 * now and then, idle records of processes that are gone. */
static void forget_exited(pfr_cpu_source *cs, uint64_t gen)
{
    pfr_fair_lock_acquire(cs->lock);
    bool sweep = gen % SWEEP_EVERY_GENS == 0;
    uint32_t *drop = NULL;
    size_t ndrop = 0, cap = 0;
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&cs->procs.by_tgid, &pos, &k, &v)) {
        pfr_proc *p = (pfr_proc *)(uintptr_t)v;
        bool gone = p->exited && p->exited_gen < gen;
        if (!gone && sweep && !p->exited && p->sampled_gen < gen && !pid_alive(p->tgid))
            gone = true;
        if (!gone)
            continue;
        if (ndrop == cap) {
            cap = cap ? cap * 2 : 64;
            uint32_t *d = realloc(drop, cap * sizeof(*d));
            if (!d)
                break;
            drop = d;
        }
        drop[ndrop++] = p->tgid;
    }
    for (size_t i = 0; i < ndrop; i++) {
        pfr_proc *p = pfr_proc_table_get(&cs->procs, drop[i]);
        if (!p->exited)
            pfr_cpu_profiler_forget(cs->cp, drop[i]); /* exit notification lost */
        if (!p->kthread)
            pfr_symbolizer_forget_process(cs->sym, (pid_t)drop[i]);
        pfr_frame_cache_forget(&cs->frames, drop[i]);
        pfr_py_frames_drop(cs->py, cs->cp, drop[i]);
        pfr_proc_table_remove(&cs->procs, drop[i]);
        cs->st.processes_forgotten++;
    }
    free(drop);
    cs->st.processes_live = pfr_proc_table_size(&cs->procs);
    pfr_fair_lock_release(cs->lock);
}

static const uint64_t *stack_of(void *ctx, uint64_t id, size_t *n)
{
    return pfr_cpu_profiler_stack(ctx, id, n);
}

/* A perf map refused or unreadable is a process's doing (a symlink, another user's file): say
 * so once for each, with the last reason. */
static void log_perf_map_errors(pfr_cpu_source *cs)
{
    pfr_sym_stats st;
    char why[256];
    pfr_fair_lock_acquire(cs->lock);
    pfr_symbolizer_stats(cs->sym, &st);
    snprintf(why, sizeof(why), "%s", pfr_symbolizer_perf_map_error(cs->sym));
    uint64_t n = st.perf_map_errors - cs->perf_map_errors;
    cs->perf_map_errors = st.perf_map_errors;
    pfr_fair_lock_release(cs->lock);
    if (n > 0)
        pfr_warn("cpu: %llu perf map%s of JIT code not read (frames stay [unknown]): %s",
                 (unsigned long long)n, n == 1 ? "" : "s", why);
}

static void add_build_stats(pfr_build_stats *sum, const pfr_build_stats *b)
{
    sum->samples += b->samples;
    sum->user_frames += b->user_frames;
    sum->shared_frames += b->shared_frames;
    sum->kernel_frames += b->kernel_frames;
    sum->lost_stacks += b->lost_stacks;
    sum->unknown_processes += b->unknown_processes;
    sum->late_frames += b->late_frames;
    sum->opted_out_samples += b->opted_out_samples;
    sum->py_stacks += b->py_stacks;
    sum->py_unplaced += b->py_unplaced;
}

/* The caches follow the recorder's memory budget (pfr_shared_sym_fit): cold files go at once,
 * the rest for room. The frame cache is bounded to a quarter of the symbol cache's bound
 * (emptied when past it). Without a budget: their settings. */
static void fit_caches(pfr_cpu_source *cs)
{
    size_t bound = pfr_shared_sym_fit(cs->shared);
    cs->frames.max_bytes = bound / 4;
    if (cs->frames.bytes > cs->frames.max_bytes)
        pfr_frame_cache_clear(&cs->frames);
}

/* Let the notification thread handle what was sent before the flip (up to EVENTS_WAIT_NS), so
 * processes that already exited are named from their notification. It broadcasts events_cv
 * after each pass, having moved the consumed position first: checked under events_mu, no pass
 * is missed. */
static void wait_events(pfr_cpu_source *cs)
{
    uint64_t produced = pfr_cpu_profiler_events_produced(cs->cp);
    if (pfr_cpu_profiler_events_consumed(cs->cp) >= produced)
        return;
    /* exits do not wake the thread (see the sampler): poke it */
    uint64_t one = 1;
    if (write(cs->wake_fd, &one, sizeof(one)) != sizeof(one))
        pfr_debug("cpu: waking the notification thread: %s", strerror(errno));
    int64_t deadline = pfr_clock_mono_ns() + EVENTS_WAIT_NS;
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    pthread_mutex_lock(&cs->events_mu);
    while (pfr_cpu_profiler_events_consumed(cs->cp) < produced &&
           pthread_cond_timedwait(&cs->events_cv, &cs->events_mu, &ts) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&cs->events_mu);
}

static int cpu_collect(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit,
                       void *emit_ctx)
{
    pfr_cpu_source *cs = self;
    /* The generation moves before the flip: an exit seen from now on may still have samples in
     * the buffer that becomes active, so it is kept until the next drain. */
    pfr_fair_lock_acquire(cs->lock);
    uint64_t gen = ++cs->gen;
    fit_caches(cs);
    pfr_fair_lock_release(cs->lock);

    int64_t t0 = pfr_clock_mono_ns();
    pfr_cpu_drain d;
    int rc = pfr_cpu_profiler_drain(cs->cp, &d);
    if (rc) {
        pfr_err("cpu: draining the sample maps failed: %s", strerror(-rc));
        return rc;
    }
    int64_t t1 = pfr_clock_mono_ns();
    wait_events(cs);
    take_deferred(cs);
    learn_missing(cs, &d);

    pfr_build_input in = {
        .samples = d.samples,
        .nsamples = d.nsamples,
        .stack = stack_of,
        .stack_ctx = cs->cp,
        .procs = &cs->procs,
        .sym = cs->sym,
        .lock = cs->lock,
        .frames = &cs->frames,
        .period_ns = cs->period_ns,
        .start_ns = start_ns,
        .end_ns = end_ns,
        .gen = gen,
        .py_name = cs->py ? pfr_py_frames_name : NULL,
        .py_ctx = cs->py,
        .deadline_ns = t1 + cs->build_budget_ns,
    };
    pfr_profile_set set;
    pfr_build_stats bs = {0};
    rc = pfr_build_cpu_profiles(&in, &set, &bs);
    int64_t t2 = pfr_clock_mono_ns();
    if (rc) {
        pfr_err("cpu: building profiles failed: %s", strerror(-rc));
    } else {
        pfr_chunk_in *chunks = calloc(set.n ? set.n : 1, sizeof(*chunks));
        pfr_kv *labels = calloc(set.n ? set.n : 1, sizeof(*labels));
        int written = -ENOMEM;
        if (chunks && labels) {
            for (size_t i = 0; i < set.n; i++) {
                bool in_container = set.v[i].container_id[0] != '\0';
                labels[i] = (pfr_kv){.key = "container.id", .value = set.v[i].container_id};
                chunks[i] = (pfr_chunk_in){
                    .service = set.v[i].service,
                    .labels = in_container ? &labels[i] : NULL,
                    .nlabels = in_container ? 1 : 0,
                    .start_ns = start_ns,
                    .end_ns = end_ns,
                    .profile = set.v[i].profile,
                };
            }
            written = set.n ? emit(chunks, set.n, emit_ctx) : 0;
        }
        free(chunks);
        free(labels);
        pfr_fair_lock_acquire(cs->lock);
        cs->st.profiles += written > 0 ? (uint64_t)written : 0;
        cs->st.emit_errors += set.n - (written > 0 ? (size_t)written : 0);
        pfr_fair_lock_release(cs->lock);
        pfr_profile_set_free(&set);
    }
    int64_t t3 = pfr_clock_mono_ns();
    log_perf_map_errors(cs);
    forget_exited(cs, gen);

    pfr_fair_lock_acquire(cs->lock);
    add_build_stats(&cs->st.build, &bs);
    cs->st.intervals++;
    cs->st.last_drain_ns = (uint64_t)(t1 - t0);
    cs->st.last_build_ns = (uint64_t)(t2 - t1);
    cs->st.last_emit_ns = (uint64_t)(t3 - t2);
    pfr_fair_lock_release(cs->lock);
    return rc;
}

static int cpu_reload(void *self, const pfr_config *cfg)
{
    pfr_cpu_source *cs = self;
    const pfr_cpu_config *n = pfr_config_source(cfg, &pfr_cpu_source_desc), *o = &cs->conf;
    if (n->cpu_hz != o->cpu_hz || n->stack_map_entries != o->stack_map_entries ||
        n->count_map_entries != o->count_map_entries ||
        cfg->sym_cache_bytes != cs->sym_cache_bytes || cfg->dwarf != cs->dwarf ||
        cfg->perf_maps != cs->perf_maps || n->unwind != o->unwind ||
        n->unwind_table_bytes != o->unwind_table_bytes || n->python_frames != o->python_frames)
        pfr_warn("SIGHUP: cpu_hz, map/cache sizes, dwarf, perf_maps, unwind and python_frames "
                 "take effect on restart");
    pfr_service_rules rules;
    int rc = pfr_service_rules_copy(&rules, &cfg->rules);
    if (rc)
        return rc;
    pfr_fair_lock_acquire(cs->lock);
    pfr_service_rules_free(&cs->rules);
    cs->rules = rules;
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&cs->procs.by_tgid, &pos, &k, &v)) {
        pfr_proc *p = (pfr_proc *)(uintptr_t)v;
        if (!p->exited)
            pfr_proc_refresh(&cs->procs, p, NULL, &cs->rules);
    }
    pfr_fair_lock_release(cs->lock);
    return 0;
}

void pfr_cpu_source_stats_get(pfr_cpu_source *cs, pfr_cpu_source_stats *st)
{
    pfr_cpu_counters c;
    pfr_cpu_profiler_counters(cs->cp, &c);
    pfr_fair_lock_acquire(cs->lock);
    *st = cs->st;
    pfr_symbolizer_stats(cs->sym, &st->sym);
    if (cs->py)
        pfr_py_stats_get(cs->py, &st->py);
    st->frame_cache_bytes = cs->frames.bytes;
    st->frame_cache_hits = cs->frames.hits;
    st->frame_cache_misses = cs->frames.misses;
    st->frame_cache_resets = cs->frames.resets;
    st->cgroup_hits = cs->procs.cgroup_hits;
    st->cgroup_reads = cs->procs.cgroup_reads;
    st->cgroup_walks = cs->procs.cgroup_walks;
    st->exe_hits = cs->procs.exe_hits;
    st->exe_reads = cs->procs.exe_reads;
    st->opted_out = cs->procs.opted_out;
    pfr_fair_lock_release(cs->lock);
    st->bpf = c;
    st->unwind_tables = pfr_cpu_profiler_unwind_stats(cs->cp, &st->unwind);
}

static void cpu_log_stats(void *self)
{
    pfr_cpu_source *cs = self;
    if (pfr_log_get_level() < PFR_LOG_DEBUG)
        return;
    pfr_cpu_source_stats s;
    pfr_cpu_source_stats_get(cs, &s);
    pfr_debug("cpu: samples=%llu idle=%llu lost{count_map_full=%llu prog_misses=%llu} "
              "stacks{kernel_err=%llu user_err=%llu map_full=%llu new=%llu read=%llu "
              "map_resets=%llu} events_lost=%llu bpf_run_ns=%llu",
              (unsigned long long)s.bpf.samples, (unsigned long long)s.bpf.idle,
              (unsigned long long)s.bpf.count_map_full, (unsigned long long)s.bpf.prog_misses,
              (unsigned long long)s.bpf.kstack_errors, (unsigned long long)s.bpf.ustack_errors,
              (unsigned long long)s.bpf.stack_map_full, (unsigned long long)s.bpf.stacks_new,
              (unsigned long long)s.bpf.stack_reads, (unsigned long long)s.bpf.stack_map_resets,
              (unsigned long long)s.bpf.events_lost, (unsigned long long)s.bpf.prog_run_ns);
    if (s.unwind_tables)
        pfr_debug(
            "cpu: unwind{stacks_dwarf=%llu stacks_fp=%llu frames=%llu complete=%llu "
            "pending=%llu no_row=%llu busy=%llu vma_miss=%llu cut{read=%llu map=%llu depth=%llu} "
            "files{tables=%llu none=%llu no_room=%llu bad=%llu open_failed=%llu} rows=%llu/%llu "
            "evictions=%llu build_ms{total=%.1f max=%.1f} small{files=%llu wait_max_ms=%.1f "
            "interleaved=%llu deferred=%llu}}",
            (unsigned long long)s.bpf.uw_dwarf, (unsigned long long)s.bpf.uw_fp,
            (unsigned long long)s.bpf.uw_frames, (unsigned long long)s.bpf.uw_end,
            (unsigned long long)s.bpf.uw_pending, (unsigned long long)s.bpf.uw_no_row,
            (unsigned long long)s.bpf.uw_busy, (unsigned long long)s.bpf.uw_vma_miss,
            (unsigned long long)s.bpf.uw_cut_read, (unsigned long long)s.bpf.uw_cut_map,
            (unsigned long long)s.bpf.uw_cut_depth, (unsigned long long)s.unwind.tables,
            (unsigned long long)s.unwind.no_table, (unsigned long long)s.unwind.no_room,
            (unsigned long long)s.unwind.bad_files, (unsigned long long)s.unwind.open_failed,
            (unsigned long long)s.unwind.rows, (unsigned long long)s.unwind.max_rows,
            (unsigned long long)s.unwind.evictions, (double)s.unwind.build_ns / 1e6,
            (double)s.unwind.build_max_ns / 1e6, (unsigned long long)s.unwind.small_files,
            (double)s.unwind.small_wait_max_ns / 1e6, (unsigned long long)s.unwind.interleaved,
            (unsigned long long)s.unwind.deferred);
    pfr_fair_lock_acquire(cs->lock);
    size_t symmem = pfr_symbolizer_memory(cs->sym);
    pfr_fair_lock_release(cs->lock);
    struct mallinfo2 mi = mallinfo2();
    pfr_debug("cpu: snapshots=%llu snapshot_ms{total=%.1f max=%.1f} event_wait_max_ms=%.1f "
              "sym_memory=%zu frame_cache{bytes=%llu hits=%llu misses=%llu resets=%llu} "
              "heap{used=%zu free=%zu mmap=%zu}",
              (unsigned long long)s.snapshots, (double)s.snapshot_ns / 1e6,
              (double)s.snapshot_max_ns / 1e6, (double)s.event_wait_max_ns / 1e6, symmem,
              (unsigned long long)s.frame_cache_bytes, (unsigned long long)s.frame_cache_hits,
              (unsigned long long)s.frame_cache_misses, (unsigned long long)s.frame_cache_resets,
              mi.uordblks, mi.fordblks, mi.hblkhd);
    pfr_debug("cpu: processes{seen=%llu live=%llu forgotten=%llu snapshot_failures=%llu "
              "exiting_named=%llu "
              "cgroups_cached=%llu cgroups_read=%llu exes_mapped=%llu exes_read=%llu "
              "exit_maps{taken=%llu unneeded=%llu walked=%llu sampled=%llu} "
              "exit_paths{learned=%llu refused=%llu} "
              "deferred=%llu} "
              "profiles=%llu emit_errors=%llu frames{user=%llu shared=%llu kernel=%llu "
              "lost_stacks=%llu late=%llu} "
              "sym{files=%llu hits=%llu misses=%llu evictions=%llu cache_bytes=%llu "
              "unresolved=%llu errors=%llu reparses=%llu dwarf_loads=%llu dwarf_evictions=%llu "
              "dwarf_too_big=%llu dwarf_no_room=%llu dwarf_outgrown=%llu dwarf_bytes=%llu "
              "protected_bytes=%llu} "
              "drain_ms=%.1f build_ms=%.1f",
              (unsigned long long)s.processes_seen, (unsigned long long)s.processes_live,
              (unsigned long long)s.processes_forgotten, (unsigned long long)s.snapshot_failures,
              (unsigned long long)s.exiting_named, (unsigned long long)s.cgroup_hits,
              (unsigned long long)s.cgroup_reads, (unsigned long long)s.exe_hits,
              (unsigned long long)s.exe_reads, (unsigned long long)s.exit_maps_taken,
              (unsigned long long)s.exit_maps_unneeded, (unsigned long long)s.exit_maps_walked,
              (unsigned long long)s.exit_maps_sampled, (unsigned long long)s.exit_paths_learned,
              (unsigned long long)s.exit_paths_refused, (unsigned long long)s.snapshots_deferred,
              (unsigned long long)s.profiles, (unsigned long long)s.emit_errors,
              (unsigned long long)s.build.user_frames, (unsigned long long)s.build.shared_frames,
              (unsigned long long)s.build.kernel_frames, (unsigned long long)s.build.lost_stacks,
              (unsigned long long)s.build.late_frames, (unsigned long long)s.sym.files_parsed,
              (unsigned long long)s.sym.cache_hits, (unsigned long long)s.sym.cache_misses,
              (unsigned long long)s.sym.evictions, (unsigned long long)s.sym.cache_bytes,
              (unsigned long long)s.sym.unresolved_frames, (unsigned long long)s.sym.errors,
              (unsigned long long)s.sym.reparses, (unsigned long long)s.sym.dwarf_loads,
              (unsigned long long)s.sym.dwarf_evictions, (unsigned long long)s.sym.dwarf_too_big,
              (unsigned long long)s.sym.dwarf_no_room, (unsigned long long)s.sym.dwarf_outgrown,
              (unsigned long long)s.sym.dwarf_bytes, (unsigned long long)s.sym.protected_bytes,
              (double)s.last_drain_ns / 1e6, (double)s.last_build_ns / 1e6);
    pfr_py_frames_log(&s.bpf, &s.py, &s.build);
}

static void cpu_destroy(void *self)
{
    pfr_cpu_source *cs = self;
    if (!cs)
        return;
    if (cs->thread_started) {
        atomic_store(&cs->stop, true);
        uint64_t one = 1;
        if (write(cs->wake_fd, &one, sizeof(one)) != sizeof(one))
            pfr_warn("cpu: cannot wake the notification thread");
        pthread_join(cs->thread, NULL);
    }
    if (cs->wake_fd >= 0)
        close(cs->wake_fd);
    pthread_cond_destroy(&cs->events_cv);
    pthread_mutex_destroy(&cs->events_mu);
    pfr_cpu_profiler_close(cs->cp);
    if (cs->shared) /* no other source asks it about this one's processes any more */
        pfr_shared_sym_set_keeper(cs->shared, NULL, NULL);
    pfr_py_free(cs->py);
    pfr_proc_table_free(&cs->procs);
    pfr_frame_cache_free(&cs->frames);
    pfr_service_rules_free(&cs->rules);
    free(cs->resnaps);
    free(cs->deferred);
    pfr_map_free(&cs->named);
    free(cs);
}

static const pfr_source_ops cpu_ops = {
    .name = "cpu",
    .collect = cpu_collect,
    .reload = cpu_reload,
    .log_stats = cpu_log_stats,
    .stats = pfr_cpu_source_stats_op,
    .destroy = cpu_destroy,
};

/* The shared symbolizer's keeper (pfr_shared_sym_set_keeper): a process this source tracks keeps
 * its snapshot until this source's own last drain of it. Called holding the lock. */
static bool cpu_keeps(void *ctx, pid_t pid)
{
    pfr_cpu_source *cs = ctx;
    return pfr_proc_table_get(&cs->procs, (uint32_t)pid) != NULL;
}

int pfr_cpu_source_ncpus(const pfr_cpu_source *cs)
{
    return pfr_cpu_profiler_ncpus(cs->cp);
}

pfr_source pfr_cpu_source_as_source(pfr_cpu_source *cs)
{
    return (pfr_source){.ops = &cpu_ops, .self = cs};
}

int pfr_cpu_source_new(const pfr_source_env *env, pfr_cpu_source **out, char *err, size_t errlen)
{
    const pfr_config *cfg = env->cfg;
    pfr_cpu_source *cs = calloc(1, sizeof(*cs));
    if (!cs)
        return -ENOMEM;
    cs->wake_fd = -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&cs->events_mu, NULL);
    pthread_cond_init(&cs->events_cv, &ca);
    pthread_condattr_destroy(&ca);
    cs->lock = pfr_shared_sym_lock(env->sym);
    cs->sym_cache_bytes = cfg->sym_cache_bytes;
    cs->dwarf = cfg->dwarf;
    cs->perf_maps = cfg->perf_maps;
    atomic_init(&cs->stop, false);
    cs->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (cs->wake_fd < 0) {
        snprintf(err, errlen, "cannot create an eventfd: %s", strerror(errno));
        cpu_destroy(cs);
        return -errno;
    }
    const pfr_cpu_config *cc = pfr_config_source(cfg, &pfr_cpu_source_desc);
    cs->conf = *cc;
    cs->period_ns = 1000000000ll / cc->cpu_hz;
    /* by default half the interval, at most 5 s: even when symbolizing is slow (a cold cache on a
     * busy host), intervals are written on time; what is left over shows as addresses */
    cs->build_budget_ns = cc->symbolize_budget_ns;
    if (cs->build_budget_ns == 0)
        cs->build_budget_ns =
            cfg->interval_ns / 2 < 5000000000ll ? cfg->interval_ns / 2 : 5000000000ll;
    pfr_frame_cache_init(&cs->frames, cfg->sym_cache_bytes / 4);
    /* code objects: a quarter of the symbol cache's bound, as the frame cache */
    if (cc->python_frames == PFR_PY_FRAMES_ENABLED &&
        pfr_py_new("/proc", cfg->sym_cache_bytes / 4, &cs->py) != 0) {
        snprintf(err, errlen, "out of memory");
        cpu_destroy(cs);
        return -ENOMEM;
    }
    /* the interpreters' files are read as the symbolizer reads files: through the guard */
    if (cs->py)
        pfr_py_set_fsguard(cs->py, env->fsguard);
    cs->resnaps = calloc(RESNAP_MAX, sizeof(*cs->resnaps));
    cs->deferred = calloc(DEFER_MAX, sizeof(*cs->deferred));
    int rc = cs->resnaps && cs->deferred ? pfr_proc_table_init(&cs->procs, "/proc") : -ENOMEM;
    cs->procs.identity = env->identity;
    if (rc == 0)
        rc = pfr_service_rules_copy(&cs->rules, &cfg->rules);
    if (rc) {
        snprintf(err, errlen, "out of memory");
        cpu_destroy(cs);
        return rc;
    }
    rc = pfr_shared_sym_set_keeper(env->sym, cpu_keeps, cs);
    if (rc) {
        snprintf(err, errlen, "the shared symbolizer has another keeper of processes");
        cpu_destroy(cs);
        return rc;
    }
    cs->shared = env->sym; /* from here on, destroy clears the keeper */
    /* Every host profile has kernel frames: read the kernel's symbols now, a one-off cost at
     * start-up rather than in whichever interval meets the first kernel frame, and a reason
     * in the log at once if they cannot be read. */
    cs->sym = pfr_shared_sym_acquire(cs->shared);
    if (pfr_symbolizer_reload_kernel(cs->sym))
        pfr_warn("cpu: kernel symbols unreadable (%s): kernel frames will show as addresses",
                 pfr_symbolizer_last_error(cs->sym));
    pfr_shared_sym_release(cs->shared);
    pfr_cpu_profiler_opts po = {
        .hz = cc->cpu_hz,
        .stack_map_entries = cc->stack_map_entries,
        .count_map_entries = cc->count_map_entries,
        .unwind = cc->unwind,
        .unwind_rows = (uint32_t)(cc->unwind_table_bytes / sizeof(struct pfr_unwind_row)),
        .fsguard = env->fsguard,
        .membudget = env->membudget,
        .unwind_refused = log_unwind_refused,
        .unwind_built = log_unwind_built,
        .unwind_cache_bytes = cc->unwind_cache_bytes,
        .unwind_cache_keep = env->disk_keep,
        .unwind_cache_error = log_unwind_cache_error,
    };
    char cache_dir[4096];
    if (pfr_cpu_config_unwind_cache_dir(cc, cfg->store_path, getenv("CACHE_DIRECTORY"), cache_dir,
                                        sizeof(cache_dir)))
        po.unwind_cache_dir = cache_dir;
    pfr_cpu_config_map_sizes(cc, cfg->interval_ns, (unsigned)sysconf(_SC_NPROCESSORS_ONLN),
                             &po.stack_map_entries, &po.count_map_entries);
    pfr_debug("cpu: BPF maps per buffer: %u stacks, %u counts", po.stack_map_entries,
              po.count_map_entries);
    rc = pfr_cpu_profiler_open(&po, on_event, cs, &cs->cp, err, errlen);
    if (rc) {
        cpu_destroy(cs);
        return rc;
    }
    pfr_unwinder_stats us;
    if (pfr_cpu_profiler_unwind_stats(cs->cp, &us))
        pfr_info("cpu: user stacks walked with unwind tables where files have them (up to %llu "
                 "bytes of tables), frame pointers elsewhere",
                 (unsigned long long)us.max_rows * sizeof(struct pfr_unwind_row));
    else if (cc->unwind == PFR_UNWIND_FP)
        pfr_info("cpu: user stacks walked by frame pointers only (unwind = fp)");
    else
        pfr_warn("cpu: this kernel cannot walk stacks with unwind tables (needs bpf_find_vma, "
                 "Linux 5.17): user stacks by frame pointers only; code built without them "
                 "loses callers");
    rc = pthread_create(&cs->thread, NULL, event_thread, cs);
    if (rc) {
        snprintf(err, errlen, "cannot start the notification thread: %s", strerror(rc));
        cpu_destroy(cs);
        return -rc;
    }
    cs->thread_started = true;
    *out = cs;
    return 0;
}

static int cpu_start(pfr_source_env *env, pfr_source *out, char *err, size_t errlen)
{
    pfr_cpu_source *cs = NULL;
    int rc = pfr_cpu_source_new(env, &cs, err, errlen);
    if (rc)
        return rc;
    pfr_info("cpu: sampling %d CPUs at %u Hz", pfr_cpu_source_ncpus(cs), cs->conf.cpu_hz);
    *out = pfr_cpu_source_as_source(cs);
    return 0;
}

void pfr_cpu_config_map_sizes(const pfr_cpu_config *cc, int64_t interval_ns, unsigned ncpus,
                              unsigned *stacks, unsigned *counts)
{
    /* one interval's samples, of which about half are distinct kernel or user stacks; a full
     * map keeps the sample (its stack shows as lost) and counts it */
    uint64_t samples = (uint64_t)ncpus * cc->cpu_hz * (uint64_t)(interval_ns / 1000000) / 1000;
    unsigned s = 8192;
    while (s < samples / 2 && s < 65536)
        s *= 2;
    /* The counts are emptied at every drain, so they need room for a drain's samples only (two
     * intervals': one collection may be folded into the next), not for the stacks kept across
     * drains: the drain's batch walks every bucket, and 16,384 of them for the 2,000 samples of
     * a 2-CPU host's interval took ~0.6 ms of each drain. */
    unsigned c = 1024;
    while (c < 2 * samples && c < 131072)
        c *= 2;
    *stacks = cc->stack_map_entries ? cc->stack_map_entries : s;
    *counts = cc->count_map_entries ? cc->count_map_entries : c;
}

/* ---- settings ---- */

/* 0 (sized at start) or at least 64 */
static int check_map_entries(const char *value, void *field, char *err, size_t errlen)
{
    unsigned v = *(unsigned *)field;
    if (v > 0 && v < 64) {
        snprintf(err, errlen, "'%s' is not 0 (automatic) or an integer in [64, 4194304]", value);
        return -EINVAL;
    }
    return 0;
}

static const char *const python_modes[] = {
    [PFR_PY_FRAMES_ENABLED] = "enabled", [PFR_PY_FRAMES_DISABLED] = "disabled", NULL};

static const char *const unwind_modes[] = {
    [PFR_UNWIND_AUTO] = "auto", [PFR_UNWIND_FP] = "fp", [PFR_UNWIND_DWARF] = "dwarf", NULL};

#define F(field) PFR_SETTING_FIELD(pfr_cpu_config, field)

static const pfr_setting cpu_rows[] = {
    {.key = "cpu_hz",
     .type = PFR_SET_COUNT,
     F(cpu_hz),
     .def = "100",
     .min = 1,
     .max = 10000,
     .metavar = "N",
     .help = "samples per second per CPU"},
    {.key = "stack_map_entries",
     .type = PFR_SET_COUNT,
     F(stack_map_entries),
     .def = "0",
     .max = 4194304,
     .parse = check_map_entries,
     .metavar = "N",
     .def_doc = "0: CPUs x rate x interval / 2, at least 8192, at most 65536",
     .help = "stacks kept per interval"},
    {.key = "count_map_entries",
     .type = PFR_SET_COUNT,
     F(count_map_entries),
     .def = "0",
     .max = 4194304,
     .parse = check_map_entries,
     .metavar = "N",
     .def_doc = "0: twice the samples of an interval, at least 1024",
     .help = "(process, stack) pairs kept per interval"},
    {.key = "unwind",
     .type = PFR_SET_ENUM,
     F(unwind),
     .def = "auto",
     .choices = unwind_modes,
     .metavar = "MODE",
     .help = "how user stacks are walked: auto (unwind tables built from .eh_frame where a "
             "file has them, frame pointers elsewhere), fp (frame pointers only), dwarf (as "
             "auto, Go's .debug_frame too; fails on kernels before 5.17)"},
    {.key = "unwind_table_bytes",
     .type = PFR_SET_SIZE,
     F(unwind_table_bytes),
     .def = "32M",
     .min = 1 << 20,
     .max = 2147483648.0,
     .metavar = "SIZE",
     .help = "kernel memory for unwind tables (8 bytes a row); past it the tables of the "
             "files sampled least recently are evicted and rebuilt when needed. A typical "
             "program with its libraries needs 0.3-2 MiB, a compiler 4-16 MiB"},
    {.key = "unwind_cache_dir",
     .type = PFR_SET_STRING,
     F(unwind_cache_dir),
     .metavar = "DIR",
     .def_doc = "auto: $CACHE_DIRECTORY/unwind under the unit, else unwind-cache beside the ring",
     .help = "where unwind tables worth it (2k rows, or 2 ms to build) are kept on disk, so "
             "that a table evicted from kernel memory, or built before a restart, is read back "
             "instead of built again; created 0700, and not used if another user owns it or "
             "others may write to it; off = not kept"},
    {.key = "unwind_cache_bytes",
     .type = PFR_SET_SIZE,
     F(unwind_cache_bytes),
     .def = "128M",
     .max = 1099511627776.0,
     .metavar = "SIZE",
     .help = "bound of unwind_cache_dir's files, least recently used removed first (libLLVM's "
             "0.95M rows take 1.2 MB); 0 = not kept"},
    {.key = "python_frames",
     .type = PFR_SET_ENUM,
     F(python_frames),
     .def = "enabled",
     .choices = python_modes,
     .metavar = "MODE",
     .help = "CPython 3.8-3.13 processes: the Python functions each _PyEval_EvalFrameDefault runs, "
             "named from the process's code objects (docs/python.md); disabled: the "
             "interpreter's own C frames only"},
    {.key = "symbolize_budget",
     .type = PFR_SET_DURATION,
     F(symbolize_budget_ns),
     .min = 0,
     .max = 3600,
     .metavar = "DURATION",
     .def_doc = "half the interval, at most 5s",
     .help = "symbolizing time per interval; past it new frames are written as "
             "module+0xoffset (as found in the process's mappings, no file read), so "
             "intervals stay on time"},
};

#undef F

static const pfr_settings_group cpu_group = {
    .name = "cpu",
    .section = "recorder",
    .intro = "The eBPF CPU profiler: sampling, symbols, stack walking.",
    .rows = cpu_rows,
    .nrows = sizeof(cpu_rows) / sizeof(cpu_rows[0]),
};

static const pfr_settings_group *const cpu_groups[] = {&cpu_group, NULL};

const pfr_source_desc pfr_cpu_source_desc = {
    .name = "cpu",
    .settings = cpu_groups,
    .conf_size = sizeof(pfr_cpu_config),
    .required = true,
    .start = cpu_start,
    .metrics = pfr_cpu_metric_tables,
    .stats_size = sizeof(pfr_cpu_source_stats),
};
