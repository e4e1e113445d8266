/* pfr_fsguard_copy: a remote file read by a worker with a deadline (see pfr_fsguard.h).
 *
 * The worker is a child process, not a thread: a request that a FUSE server has read and never
 * answers holds its caller in the kernel even against SIGKILL, and a thread held so would keep
 * the recorder itself from ever exiting. A child held so is left behind (counted) and the
 * recorder goes on and can stop; it is reaped whenever the server answers or goes away.
 *
 * Nobody waits for a copy: the first call forks the worker and answers -EINPROGRESS, a later
 * call for the same file takes the finished copy. The copy is written to a descriptor the
 * parent made before the fork (an unlinked O_TMPFILE file, else a memfd), so nothing but an
 * exit status crosses back. Jobs past their deadline are abandoned at the next call (or
 * statistics), and their file system avoided. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsguard_internal.h"
#include "pfr_clock.h"

#define COPY_CHUNK (64u << 10)
#define DST_FD     3 /* the copy's descriptor in the child */

/* ---- the child: only system calls from here (it forked a threaded process) ---- */

static int child_write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Open, check, copy. Returns 0 or an errno (the exit status). */
static int child_copy(const char *path, uint64_t dev, uint64_t ino, size_t max)
{
    int src = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (src < 0)
        return errno;
    struct stat st;
    if (fstat(src, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_dev != dev || (ino && (uint64_t)st.st_ino != ino))
        return ESTALE;
    if ((uint64_t)st.st_size > max)
        return EFBIG;
    static char buf[COPY_CHUNK]; /* the child's own copy of the page: no malloc after fork */
    size_t total = 0;
    for (;;) {
        ssize_t n = read(src, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return 0;
        total += (size_t)n;
        if (total > max) /* it grew while read */
            return EFBIG;
        int rc = child_write_all(DST_FD, buf, (size_t)n);
        if (rc)
            return rc;
    }
}

static void child_main(int dst, const char *path, uint64_t dev, uint64_t ino, size_t max)
{
    /* the recorder's signals were blocked for its signalfd: a child stopped by the unit's
     * SIGTERM is fine; none of the recorder's descriptors (BPF maps, the ring) stays held by a
     * child that may block for ever */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(dst, DST_FD) < 0)
        _exit(EBADF);
    syscall(SYS_close_range, DST_FD + 1, ~0U, 0);
    int rc = child_copy(path, dev, ino, max);
    _exit(rc > 0 && rc < 256 ? rc : (rc ? EIO : 0));
}

/* ---- the parent ---- */

typedef pfr_fsguard_job copy_job;

/* The file a copy is written to: in the copy directory when its file system has room for the
 * largest copy past what keep leaves to the ring (-EDQUOT, counted, when not: a temporary copy
 * gives up room before the ring does), else in memory (*in_memory). Call with g->lock held. */
static int make_copy_file(pfr_fsguard *g, bool *in_memory)
{
    int fd = -1;
    *in_memory = false;
    if (g->copy_dir[0])
        fd = open(g->copy_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 && pfr_disk_keep_fits(&g->keep, fd, g->max_copy, NULL) != 0) {
        close(fd);
        g->st.refused_no_room++;
        return -EDQUOT;
    }
    if (fd < 0) {
        fd = memfd_create("pfr-remote-copy", MFD_CLOEXEC);
        *in_memory = fd >= 0;
    }
    return fd < 0 ? -errno : fd;
}

/* A read-only descriptor of the copy at offset 0, like the file it stands for. */
static int reopen_ro(int fd)
{
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    int ro = open(self, O_RDONLY | O_CLOEXEC);
    return ro < 0 ? -errno : ro;
}

static void count_result_locked(pfr_fsguard *g, const copy_job *j)
{
    struct stat st;
    if (j->result == 0) {
        g->st.copies++;
        g->st.copy_bytes += fstat(j->dst, &st) == 0 ? (uint64_t)st.st_size : 0;
    } else if (j->result == -EFBIG) {
        g->st.refused_too_big++;
    } else {
        g->st.copy_errors++;
    }
}

static void job_remove_locked(pfr_fsguard *g, size_t i)
{
    close(g->jobs[i].dst);
    g->jobs[i] = g->jobs[--g->njobs];
}

/* Whether the worker has ended (reaping it, setting j->result and counting it once). */
static bool job_ended_locked(pfr_fsguard *g, copy_job *j, int64_t now)
{
    if (!j->pid)
        return true;
    int status;
    pid_t p = waitpid(j->pid, &status, WNOHANG);
    if (p == 0)
        return false;
    if (p < 0)
        j->result = -ECHILD; /* reaped by someone else: its result is unknown */
    else if (WIFEXITED(status))
        j->result = -WEXITSTATUS(status);
    else
        j->result = -EINTR;
    j->pid = 0;
    /* until its first taker: a caller that asks once a minute got -EINPROGRESS at its last
     * round and comes back at its next, long after the statistics reaped the worker. A copy in
     * memory is the recorder's memory (64 of them could hold 2 GiB): only the short while. */
    j->deadline = now + (j->in_memory ? g->shared_ns : g->keep_ns);
    count_result_locked(g, j);
    return true;
}

/* A caller has the finished copy (or its error): the others may have it for a while yet. */
static void job_taken_locked(pfr_fsguard *g, copy_job *j, int64_t now)
{
    if (j->taken)
        return;
    j->taken = true;
    if (j->deadline > now + g->shared_ns)
        j->deadline = now + g->shared_ns;
}

/* Room for one more job when every slot is taken: the finished copy nearest its end goes (a
 * worker still running is never dropped here). Whether there is room now. Call with g->lock
 * held. */
static bool make_job_room_locked(pfr_fsguard *g)
{
    if (g->njobs < PFR_FSGUARD_MAX_JOBS)
        return true;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < g->njobs; i++)
        if (!g->jobs[i].pid && (best == SIZE_MAX || g->jobs[i].deadline < g->jobs[best].deadline))
            best = i;
    if (best == SIZE_MAX)
        return false;
    job_remove_locked(g, best);
    return true;
}

/* Reap the abandoned workers that ended at last. Call with g->lock held. */
static void reap_stuck_locked(pfr_fsguard *g)
{
    for (size_t i = 0; i < g->nstuck;) {
        if (waitpid(g->stuck[i], NULL, WNOHANG) != 0)
            g->stuck[i] = g->stuck[--g->nstuck];
        else
            i++;
    }
}

/* Let go of the finished copies kept long enough, and give up on the workers past their
 * deadline: they stay blocked in the kernel (counted), their file systems are avoided. Call
 * with g->lock held. */
static void sweep_locked(pfr_fsguard *g, int64_t now)
{
    reap_stuck_locked(g);
    for (size_t i = 0; i < g->njobs;) {
        copy_job *j = &g->jobs[i];
        bool ended = job_ended_locked(g, j, now);
        if (j->deadline > now) {
            i++;
            continue;
        }
        if (!ended) {
            kill(j->pid, SIGKILL); /* ends it unless the kernel holds it */
            if (g->nstuck < PFR_FSGUARD_MAX_JOBS)
                g->stuck[g->nstuck++] = j->pid;
            pfr_map_put(&g->avoided, j->dev, (uint64_t)(now + g->avoid_ns));
            g->st.abandoned++;
        }
        job_remove_locked(g, i);
    }
    g->st.stuck_now = g->nstuck;
}

void pfr_fsguard_sweep(pfr_fsguard *g)
{
    pthread_mutex_lock(&g->lock);
    sweep_locked(g, pfr_clock_mono_ns());
    pthread_mutex_unlock(&g->lock);
}

void pfr_fsguard_jobs_free(pfr_fsguard *g)
{
    for (size_t i = 0; i < g->njobs; i++) {
        if (g->jobs[i].pid) {
            kill(g->jobs[i].pid, SIGKILL);
            waitpid(g->jobs[i].pid, NULL, WNOHANG);
        }
        close(g->jobs[i].dst);
    }
    g->njobs = 0;
}

/* May a copy start? 0, or the refusal's errno (counted). Call with g->lock held. */
static int admit_locked(pfr_fsguard *g, uint64_t dev, int64_t now)
{
    if (g->remote == PFR_FSGUARD_REMOTE_SKIP) {
        g->st.refused_skip++;
        return -EREMOTE;
    }
    if (pfr_fsguard_avoided_locked(g, dev, now) || g->nstuck >= g->max_stuck ||
        !make_job_room_locked(g)) {
        g->st.refused_avoided++;
        return -EAGAIN;
    }
    return 0;
}

static int start_locked(pfr_fsguard *g, const char *path, uint64_t dev, uint64_t ino, int64_t now)
{
    bool in_memory;
    int dst = make_copy_file(g, &in_memory);
    if (dst < 0)
        return dst;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(dst);
        return -e;
    }
    if (pid == 0)
        child_main(dst, path, dev, ino, g->max_copy);
    g->jobs[g->njobs++] = (copy_job){.dev = dev,
                                     .ino = ino,
                                     .pid = pid,
                                     .dst = dst,
                                     .deadline = now + g->timeout_ns,
                                     .in_memory = in_memory};
    return -EINPROGRESS;
}

int pfr_fsguard_copy(pfr_fsguard *g, const char *path, uint64_t dev, uint64_t ino)
{
    int64_t now = pfr_clock_mono_ns();
    pthread_mutex_lock(&g->lock);
    sweep_locked(g, now);
    int rc = -EINPROGRESS;
    size_t i = 0;
    while (i < g->njobs && !(g->jobs[i].dev == dev && g->jobs[i].ino == ino))
        i++;
    if (i < g->njobs) {
        /* every caller gets a descriptor of its own of the one copy */
        copy_job *j = &g->jobs[i];
        if (job_ended_locked(g, j, now)) {
            rc = j->result ? j->result : reopen_ro(j->dst);
            job_taken_locked(g, j, now);
        }
    } else {
        rc = admit_locked(g, dev, now);
        if (rc == 0)
            rc = start_locked(g, path, dev, ino, now);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}
