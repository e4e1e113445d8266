/* pfr's Flight Recorder recording in one JVM: start, dump, stop, perf map. */
#include "jfr_session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pfr_clock.h"

/* JFR.check and JFR.start answer in a few lines; a JVM running many recordings lists them all. */
#define REPLY_MAX 65536

/* pfr's events (Coroot's agent asks async-profiler for the same: CPU every 10 ms, allocations,
 * locks); settings=none: nothing else is recorded, and no .jfc file must be put where the JVM
 * can read it. The "+" adds a setting the (empty) configuration does not have. */
static const char *const pfr_events[] = {
    "+jdk.ExecutionSample#enabled=true",
    "+jdk.ExecutionSample#period=10ms",
    "+jdk.ObjectAllocationSample#enabled=true",
    "+jdk.ObjectAllocationSample#throttle=150/s",
    "+jdk.ObjectAllocationSample#stackTrace=true",
    "+jdk.JavaMonitorEnter#enabled=true",
    "+jdk.JavaMonitorEnter#threshold=1ms",
    "+jdk.JavaMonitorEnter#stackTrace=true",
    "+jdk.ThreadPark#enabled=true",
    "+jdk.ThreadPark#threshold=1ms",
    "+jdk.ThreadPark#stackTrace=true",
};

int pfr_jfr_start_line(char *buf, size_t cap, int64_t maxage_s)
{
    size_t n = 0;
    int w = snprintf(buf, cap, "JFR.start name=%s settings=none maxage=%llds", PFR_JFR_RECORDING,
                     (long long)maxage_s);
    if (w < 0 || (size_t)w >= cap)
        return -ENOSPC;
    n = (size_t)w;
    for (size_t i = 0; i < sizeof(pfr_events) / sizeof(pfr_events[0]); i++) {
        w = snprintf(buf + n, cap - n, " %s", pfr_events[i]);
        if (w < 0 || (size_t)w >= cap - n)
            return -ENOSPC;
        n += (size_t)w;
    }
    return n > PFR_HOTSPOT_ARG_MAX ? -ENOSPC : (int)n;
}

int pfr_jfr_dump_line(char *buf, size_t cap, const char *path, int64_t begin_ns)
{
    int w;
    if (begin_ns > 0) {
        /* an Instant (UTC): the JVM reads begin with Instant.parse among others */
        time_t t = (time_t)(begin_ns / 1000000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        char ts[64];
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
        w = snprintf(buf, cap, "JFR.dump name=%s filename=%s begin=%s.%09lldZ", PFR_JFR_RECORDING,
                     path, ts, (long long)(begin_ns % 1000000000));
    } else {
        w = snprintf(buf, cap, "JFR.dump name=%s filename=%s", PFR_JFR_RECORDING, path);
    }
    return w < 0 || (size_t)w >= cap ? -ENOSPC : w;
}

void pfr_jfr_check_parse(const char *out, size_t len, const char *name, unsigned *count,
                         bool *has_name)
{
    *count = 0;
    *has_name = false;
    size_t nl = strlen(name);
    const char *end = out + len;
    for (const char *p = out; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *le = e ? e : end;
        /* "Recording 3: name=pfr-recorder maxage=2m (running)" */
        if ((size_t)(le - p) > 10 && memcmp(p, "Recording ", 10) == 0) {
            const char *n = memmem(p, (size_t)(le - p), ": name=", 7);
            if (n) {
                (*count)++;
                n += 7;
                if ((size_t)(le - n) >= nl && memcmp(n, name, nl) == 0 &&
                    (n + nl == le || n[nl] == ' '))
                    *has_name = true;
            }
        }
        p = e ? e + 1 : end;
    }
}

int pfr_jfr_session_open(pfr_jfr_session *s, struct pfr_fsguard *fsguard, const char *proc_root,
                         const pfr_jvm *jvm, size_t max_bytes, int64_t maxage_s)
{
    pfr_jvm j = *jvm; /* jvm may be s's own */
    memset(s, 0, sizeof(*s));
    s->jvm = j;
    s->max_bytes = max_bytes;
    s->maxage_s = maxage_s;
    s->tmp_fd = pfr_hotspot_open_tmp(fsguard, proc_root, jvm->pid);
    if (s->tmp_fd < 0) {
        int rc = s->tmp_fd;
        snprintf(s->err, sizeof(s->err), "its /tmp: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

/* One jcmd line; the output (NUL-terminated) into out. A status other than 0 is -EPROTO. */
static int jcmd(pfr_jfr_session *s, bool may_trigger, const char *line, int64_t deadline_ns,
                char *out, size_t cap, size_t *body)
{
    size_t len = 0;
    int rc = pfr_hotspot_run(&s->jvm, s->tmp_fd, may_trigger, "jcmd", line, deadline_ns, out,
                             cap - 1, &len, &s->attach);
    out[rc == 0 ? len : 0] = '\0';
    if (rc) {
        snprintf(s->err, sizeof(s->err), "%.40s: %s", line, strerror(-rc));
        return rc;
    }
    int status;
    if (pfr_hotspot_parse_reply(out, len, &status, body) != 0) {
        snprintf(s->err, sizeof(s->err), "%.40s: not an attach listener's reply", line);
        return -EBADMSG;
    }
    if (status != 0) {
        snprintf(s->err, sizeof(s->err), "%.40s: status %d: %.120s", line, status, out + *body);
        return -EPROTO;
    }
    return 0;
}

int pfr_jfr_session_start(pfr_jfr_session *s, int64_t deadline_ns)
{
    char *out = malloc(REPLY_MAX);
    if (!out)
        return -ENOMEM;
    size_t body = 0;
    int rc = jcmd(s, true, "JFR.check", deadline_ns, out, REPLY_MAX, &body);
    /* a JVM without Flight Recorder answers that the command is unknown */
    if (rc == -EPROTO || (rc == 0 && strstr(out + body, "Unknown diagnostic command"))) {
        snprintf(s->err, sizeof(s->err), "no Flight Recorder (JFR.check: %.100s)", out + body);
        rc = -ENOTSUP;
    }
    bool left = false;
    if (rc == 0)
        pfr_jfr_check_parse(out + body, strlen(out + body), PFR_JFR_RECORDING, &s->others, &left);
    if (rc == 0 && left) {
        s->others--;
        rc = jcmd(s, false, "JFR.stop name=" PFR_JFR_RECORDING, deadline_ns, out, REPLY_MAX, &body);
    }
    char line[PFR_HOTSPOT_ARG_MAX + 1];
    if (rc == 0) {
        int n = pfr_jfr_start_line(line, sizeof(line), s->maxage_s);
        rc = n < 0 ? n : 0;
    }
    if (rc == 0) {
        /* a start whose answer was lost (the deadline) may have started: then it is stopped
         * with the others, or by the next start's JFR.check */
        s->recording = true;
        rc = jcmd(s, false, line, deadline_ns, out, REPLY_MAX, &body);
        if (rc == 0 && !strstr(out + body, "Started recording")) {
            snprintf(s->err, sizeof(s->err), "JFR.start: %.160s", out + body);
            rc = -EPROTO;
        }
        if (rc == -EPROTO)
            s->recording = false; /* the JVM said no */
    }
    free(out);
    return rc;
}

static void file_name(const pfr_jfr_session *s, uint64_t seq, char *buf, size_t cap)
{
    snprintf(buf, cap, "pfr-jfr-%d-%llu.jfr", (int)s->jvm.nspid, (unsigned long long)seq);
}

/* The dump the JVM wrote, read only if it is a regular file of the JVM's user with one link
 * (the user owns /tmp's entries: a FIFO would block, a link would name another file). */
static int read_dump(pfr_jfr_session *s, const char *name, uint8_t **buf, size_t *len)
{
    int fd = openat(s->tmp_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno == ELOOP ? -EBADMSG : -errno;
        snprintf(s->err, sizeof(s->err), "dump %s: %s", name, strerror(-e));
        return e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || st.st_uid != s->jvm.uid || st.st_nlink != 1)
        rc = -EBADMSG;
    else if ((uint64_t)st.st_size > s->max_bytes)
        rc = -EFBIG;
    uint8_t *b = NULL;
    size_t n = 0;
    if (rc == 0 && !(b = malloc(st.st_size ? (size_t)st.st_size : 1)))
        rc = -ENOMEM;
    /* a file that grows while read is cut at the size fstat gave */
    while (rc == 0 && n < (size_t)st.st_size) {
        ssize_t r = read(fd, b + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (rc) {
        free(b);
        snprintf(s->err, sizeof(s->err), "dump %s: %s", name,
                 rc == -EBADMSG ? "not a regular file of the JVM's user" : strerror(-rc));
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

static void remember_stale(pfr_jfr_session *s, uint64_t seq)
{
    if (s->nstale == sizeof(s->stale) / sizeof(s->stale[0])) {
        memmove(s->stale, s->stale + 1, sizeof(s->stale) - sizeof(s->stale[0]));
        s->nstale--;
    }
    s->stale[s->nstale++] = seq;
}

/* Remove the files of earlier dumps that may have appeared since, and extra's (0: none). */
static int remove_files(pfr_jfr_session *s, uint64_t extra, int64_t deadline_ns)
{
    char names[9][64];
    const char *v[9];
    size_t n = 0;
    for (unsigned i = 0; i < s->nstale; i++) {
        file_name(s, s->stale[i], names[n], sizeof(names[n]));
        v[n] = names[n];
        n++;
    }
    if (extra) {
        file_name(s, extra, names[n], sizeof(names[n]));
        v[n] = names[n];
        n++;
    }
    if (n == 0)
        return 0;
    int rc = pfr_hotspot_unlink(&s->jvm, s->tmp_fd, v, n, deadline_ns, &s->attach);
    if (rc == 0)
        s->nstale = 0;
    return rc;
}

int pfr_jfr_session_dump(pfr_jfr_session *s, int64_t begin_ns, int64_t deadline_ns, uint8_t **buf,
                         size_t *len)
{
    int64_t t0 = pfr_clock_mono_ns();
    *buf = NULL;
    *len = 0;
    char name[64], path[80], line[256];
    file_name(s, ++s->seq, name, sizeof(name));
    snprintf(path, sizeof(path), "/tmp/%s", name);
    int rc = pfr_jfr_dump_line(line, sizeof(line), path, begin_ns);
    char out[4096];
    size_t body = 0;
    if (rc >= 0)
        rc = jcmd(s, false, line, deadline_ns, out, sizeof(out), &body);
    if (rc == 0 && !strstr(out + body, "Dumped recording")) {
        snprintf(s->err, sizeof(s->err), "JFR.dump: %.160s", out + body);
        rc = strstr(out + body, "Could not find") ? -ENOENT : -EPROTO;
        if (rc == -ENOENT)
            s->recording = false; /* someone stopped it: start again */
    }
    if (rc == 0)
        rc = read_dump(s, name, buf, len);
    /* removed whatever happened: the JVM may have written part of it; one it may still be
     * writing (no answer in time) is removed again at the next dump and at the stop */
    int64_t unlink_dl = pfr_clock_mono_ns() + 1000000000LL;
    if (rc == -ETIMEDOUT) {
        remember_stale(s, s->seq);
        remove_files(s, 0, unlink_dl);
    } else {
        int urc = remove_files(s, s->seq, unlink_dl);
        if (urc)
            remember_stale(s, s->seq);
        if (rc == 0 && urc) {
            snprintf(s->err, sizeof(s->err), "removing %s: %s", name, strerror(-urc));
            rc = urc;
        }
    }
    if (rc) {
        free(*buf);
        *buf = NULL;
        *len = 0;
    }
    s->dump_ns = pfr_clock_mono_ns() - t0;
    return rc;
}

int pfr_jfr_session_perfmap(pfr_jfr_session *s, int64_t deadline_ns)
{
    char out[1024];
    size_t body;
    return jcmd(s, false, "Compiler.perfmap", deadline_ns, out, sizeof(out), &body);
}

int pfr_jfr_session_stop(pfr_jfr_session *s, int64_t deadline_ns)
{
    int rc = 0;
    if (s->recording) {
        char out[1024];
        size_t body;
        rc = jcmd(s, false, "JFR.stop name=" PFR_JFR_RECORDING, deadline_ns, out, sizeof(out),
                  &body);
        s->recording = false;
    }
    /* files dumps left (the JVM wrote them after pfr gave up), and the last dump's */
    if (s->seq) {
        int urc = remove_files(s, s->seq, deadline_ns);
        if (rc == 0)
            rc = urc;
    }
    return rc;
}

void pfr_jfr_session_close(pfr_jfr_session *s)
{
    if (s->tmp_fd >= 0)
        close(s->tmp_fd);
    s->tmp_fd = -1;
}
