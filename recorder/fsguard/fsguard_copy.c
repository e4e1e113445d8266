/* pfr_fsguard_copy: a remote file read by a worker thread with a deadline (see pfr_fsguard.h).
 *
 * One thread per copy (remote files are few, and each is copied once: the symbolizer and the
 * unwinder keep what they parsed). The job is shared by the caller and the worker; whichever
 * lets go last frees it, so a caller that gave up never waits for a worker blocked in the
 * kernel. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsguard_internal.h"
#include "pfr_clock.h"

#define COPY_CHUNK (64u << 10)

typedef struct copy_job {
    pfr_fsguard_stuck *stuck; /* a reference of the job's own */
    char path[4200];
    char copy_dir[4096];
    uint64_t dev, ino;
    size_t max;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs; /* caller + worker */
    bool done, abandoned;
    int result; /* the copy's descriptor or -errno */
    size_t bytes;
} copy_job;

static void job_unref(copy_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    if (j->done && j->abandoned && j->result >= 0)
        close(j->result);
    pfr_fsguard_stuck_unref(j->stuck);
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static int make_copy_file(const char *dir)
{
    int fd = -1;
    if (dir[0])
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        fd = memfd_create("pfr-remote-copy", MFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Write all of buf, or -errno. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The worker's part: open, check, copy. Returns the copy's descriptor or -errno. */
static int copy_file(copy_job *j)
{
    int src = open(j->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (src < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(src, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_dev != j->dev ||
             (j->ino && (uint64_t)st.st_ino != j->ino))
        rc = -ESTALE;
    else if ((uint64_t)st.st_size > j->max)
        rc = -EFBIG;
    int dst = rc ? -1 : make_copy_file(j->copy_dir);
    if (!rc && dst < 0)
        rc = dst;
    char *buf = rc ? NULL : malloc(COPY_CHUNK);
    if (!rc && !buf)
        rc = -ENOMEM;
    size_t total = 0;
    while (!rc) {
        ssize_t n = read(src, buf, COPY_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        total += (size_t)n;
        if (total > j->max) { /* it grew while read */
            rc = -EFBIG;
            break;
        }
        rc = write_all(dst, buf, (size_t)n);
    }
    free(buf);
    close(src);
    if (rc) {
        if (dst >= 0)
            close(dst);
        return rc;
    }
    j->bytes = total;
    /* the caller gets it read-only at offset 0, like the file it stands for */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", dst);
    int ro = open(self, O_RDONLY | O_CLOEXEC);
    close(dst);
    return ro < 0 ? -errno : ro;
}

static void *worker(void *arg)
{
    copy_job *j = arg;
    int rc = copy_file(j);
    pthread_mutex_lock(&j->lock);
    j->result = rc;
    j->done = true;
    bool abandoned = j->abandoned;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    if (abandoned) /* counted as stuck when the caller gave up on it */
        atomic_fetch_sub(&j->stuck->n, 1);
    job_unref(j);
    return NULL;
}

/* May a copy start? 0, or the refusal's errno (counted). */
static int admit(pfr_fsguard *g, uint64_t dev)
{
    int rc = 0;
    pthread_mutex_lock(&g->lock);
    if (g->remote == PFR_FSGUARD_REMOTE_SKIP) {
        g->st.refused_skip++;
        rc = -EREMOTE;
    } else if (pfr_fsguard_avoided_locked(g, dev, pfr_clock_mono_ns()) ||
               atomic_load(&g->stuck->n) >= g->max_stuck) {
        g->st.refused_avoided++;
        rc = -EAGAIN;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

static copy_job *job_new(pfr_fsguard *g, const char *path, uint64_t dev, uint64_t ino)
{
    copy_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    snprintf(j->path, sizeof(j->path), "%s", path);
    snprintf(j->copy_dir, sizeof(j->copy_dir), "%s", g->copy_dir);
    j->stuck = g->stuck;
    atomic_fetch_add(&g->stuck->refs, 1);
    j->dev = dev;
    j->ino = ino;
    j->max = g->max_copy;
    j->refs = 2;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, &ca);
    pthread_condattr_destroy(&ca);
    return j;
}

static void count_result(pfr_fsguard *g, int rc, size_t bytes)
{
    pthread_mutex_lock(&g->lock);
    if (rc >= 0) {
        g->st.copies++;
        g->st.copy_bytes += bytes;
    } else if (rc == -EFBIG) {
        g->st.refused_too_big++;
    } else {
        g->st.copy_errors++;
    }
    pthread_mutex_unlock(&g->lock);
}

int pfr_fsguard_copy(pfr_fsguard *g, const char *path, uint64_t dev, uint64_t ino)
{
    int rc = admit(g, dev);
    if (rc)
        return rc;
    copy_job *j = job_new(g, path, dev, ino);
    if (!j)
        return -ENOMEM;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    rc = pthread_create(&t, &attr, worker, j);
    pthread_attr_destroy(&attr);
    if (rc) {
        pthread_mutex_lock(&j->lock);
        j->refs = 1; /* no worker */
        pthread_mutex_unlock(&j->lock);
        job_unref(j);
        return -rc;
    }
    int64_t deadline = pfr_clock_mono_ns() + g->timeout_ns;
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    pthread_mutex_lock(&j->lock);
    int w = 0;
    while (!j->done && w != ETIMEDOUT)
        w = pthread_cond_timedwait(&j->cond, &j->lock, &ts);
    bool done = j->done;
    if (!done) {
        j->abandoned = true;
        atomic_fetch_add(&j->stuck->n, 1); /* under the job's lock: before the worker looks */
    }
    rc = done ? j->result : -ETIMEDOUT;
    size_t bytes = j->bytes;
    pthread_mutex_unlock(&j->lock);
    if (done) {
        count_result(g, rc, bytes);
    } else {
        /* blocked in the kernel: leave it, and its file system alone for a while */
        pfr_fsguard_avoid(g, dev);
        pthread_mutex_lock(&g->lock);
        g->st.abandoned++;
        pthread_mutex_unlock(&g->lock);
    }
    job_unref(j);
    return rc;
}
