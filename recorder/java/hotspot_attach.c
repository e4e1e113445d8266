/* HotSpot's dynamic attach, as a client: finding JVMs, the handshake, one command. */
#include "hotspot_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pfr_clock.h"
#include "pfr_fsguard.h"
#include "pfr_read_small.h"

/* ---- /proc text ---- */

/* The value of "Key:\t..." lines in a status text: the rest of the line, or NULL. */
static const char *status_field(const char *text, size_t len, const char *key, size_t *vlen)
{
    size_t klen = strlen(key);
    const char *end = text + len;
    for (const char *p = text; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if ((size_t)(le - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == ':') {
            *vlen = (size_t)(le - p - (ptrdiff_t)klen - 1);
            return p + klen + 1;
        }
        p = nl ? nl + 1 : end;
    }
    return NULL;
}

/* The decimal numbers of a field, up to max of them. Returns how many, or -1 on a bad one. */
static int field_numbers(const char *v, size_t len, unsigned long long *out, int max, int base)
{
    int n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t'))
            i++;
        if (i == len)
            break;
        unsigned long long x = 0;
        size_t start = i;
        for (; i < len && v[i] != ' ' && v[i] != '\t'; i++) {
            int d;
            if (v[i] >= '0' && v[i] <= '9')
                d = v[i] - '0';
            else if (base == 16 && v[i] >= 'a' && v[i] <= 'f')
                d = v[i] - 'a' + 10;
            else
                return -1;
            if (x > (ULLONG_MAX - (unsigned)d) / (unsigned)base)
                return -1;
            x = x * (unsigned)base + (unsigned)d;
        }
        if (i == start)
            return -1;
        if (n < max)
            out[n] = x;
        n++;
    }
    return n;
}

int pfr_hotspot_parse_status(const char *text, size_t len, pfr_jvm *out)
{
    size_t vl;
    unsigned long long v[8];
    const char *f = status_field(text, len, "NSpid", &vl);
    int n = f ? field_numbers(f, vl, v, 8, 10) : -1;
    if (n < 1 || n > 8 || v[n - 1] == 0 || v[n - 1] > INT_MAX)
        return -EBADMSG;
    out->nspid = (pid_t)v[n - 1];
    f = status_field(text, len, "Uid", &vl);
    if (!f || field_numbers(f, vl, v, 4, 10) != 4 || v[1] > UINT32_MAX)
        return -EBADMSG;
    out->uid = (uid_t)v[1];
    f = status_field(text, len, "Gid", &vl);
    if (!f || field_numbers(f, vl, v, 4, 10) != 4 || v[1] > UINT32_MAX)
        return -EBADMSG;
    out->gid = (gid_t)v[1];
    f = status_field(text, len, "SigCgt", &vl);
    if (!f || field_numbers(f, vl, v, 1, 16) != 1)
        return -EBADMSG;
    out->sigquit_caught = (v[0] >> (SIGQUIT - 1)) & 1;
    return 0;
}

bool pfr_hotspot_maps_have_libjvm(const char *text, size_t len)
{
    static const char name[] = "/libjvm.so";
    const size_t nl = sizeof(name) - 1;
    const char *end = text + len;
    for (const char *p = text; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *le = e ? e : end;
        /* the path is the line's end; a deleted file's carries " (deleted)" */
        const char *hit = memmem(p, (size_t)(le - p), name, nl);
        if (hit && (hit + nl == le || hit[nl] == ' '))
            return true;
        p = e ? e + 1 : end;
    }
    return false;
}

bool pfr_hotspot_cmdline_flag(const char *cmdline, size_t len, const char *flag)
{
    bool on = false;
    size_t fl = strlen(flag);
    for (size_t i = 0; i < len;) {
        const char *a = cmdline + i;
        size_t al = strnlen(a, len - i);
        if (al == 5 + fl && memcmp(a, "-XX:", 4) == 0 && memcmp(a + 5, flag, fl) == 0) {
            if (a[4] == '+')
                on = true;
            else if (a[4] == '-')
                on = false;
        }
        i += al + 1;
    }
    return on;
}

/* Whether /proc/PID/maps names libjvm.so, read in blocks (a JVM maps thousands of regions). A
 * line cut by a block's end is carried into the next. */
static int maps_have_libjvm(const char *path, bool *found)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    char buf[16384];
    size_t have = 0;
    *found = false;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        char *last = memrchr(buf, '\n', have);
        size_t whole = last ? (size_t)(last - buf) + 1 : have;
        if (pfr_hotspot_maps_have_libjvm(buf, whole)) {
            *found = true;
            break;
        }
        memmove(buf, buf + whole, have - whole);
        have -= whole;
    }
    if (!*found && have)
        *found = pfr_hotspot_maps_have_libjvm(buf, have);
    close(fd);
    return 0;
}

static int read_start_time(const char *path, uint64_t *start)
{
    char buf[1024];
    ssize_t n = pfr_read_small(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    /* fields after the comm's last ')' (a comm may hold spaces and parentheses) */
    const char *p = strrchr(buf, ')');
    if (!p)
        return -EBADMSG;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(p, &e, 10);
    if (field != 22 || e == p || errno)
        return -EBADMSG;
    *start = v;
    return 0;
}

/* status and start time of jvm->pid into jvm */
static int read_status(const char *proc_root, pfr_jvm *jvm)
{
    char path[PATH_MAX], buf[8192];
    snprintf(path, sizeof(path), "%s/%d/status", proc_root, (int)jvm->pid);
    ssize_t n = pfr_read_small(path, buf, sizeof(buf));
    if (n < 0)
        return n == -ENOENT ? -ESRCH : (int)n;
    int rc = pfr_hotspot_parse_status(buf, (size_t)n, jvm);
    if (rc)
        return rc;
    snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)jvm->pid);
    rc = read_start_time(path, &jvm->start_time);
    return rc == -ENOENT ? -ESRCH : rc;
}

int pfr_hotspot_probe(const char *proc_root, pid_t pid, pfr_jvm *out)
{
    if (!proc_root)
        proc_root = "/proc";
    char path[PATH_MAX];
    memset(out, 0, sizeof(*out));
    out->pid = pid;
    bool jvm = false;
    snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)pid);
    int rc = maps_have_libjvm(path, &jvm);
    if (rc)
        return rc;
    if (!jvm)
        return -ENOENT;
    rc = read_status(proc_root, out);
    if (rc)
        return rc;
    /* a command line past the buffer keeps its flags unseen: then the deadline and the
     * backoff handle a JVM that never answers */
    char *cl = malloc(65536);
    if (!cl)
        return -ENOMEM;
    snprintf(path, sizeof(path), "%s/%d/cmdline", proc_root, (int)pid);
    ssize_t n = pfr_read_small(path, cl, 65536);
    if (n > 0) {
        out->attach_disabled = pfr_hotspot_cmdline_flag(cl, (size_t)n, "DisableAttachMechanism");
        out->frame_pointers = pfr_hotspot_cmdline_flag(cl, (size_t)n, "PreserveFramePointer");
    }
    free(cl);
    return 0;
}

int pfr_hotspot_refresh(const char *proc_root, pfr_jvm *jvm)
{
    pfr_jvm now = *jvm;
    int rc = read_status(proc_root ? proc_root : "/proc", &now);
    if (rc)
        return rc;
    if (now.start_time != jvm->start_time)
        return -ESTALE;
    /* an exec keeps the pid and the start time: a JVM that exec'd another program */
    if (now.uid != jvm->uid || now.gid != jvm->gid || now.nspid != jvm->nspid)
        return -ESTALE;
    jvm->sigquit_caught = now.sigquit_caught;
    return 0;
}

/* ---- the protocol ---- */

int pfr_hotspot_request(char *buf, size_t cap, const char *cmd, const char *arg1, const char *arg2,
                        const char *arg3)
{
    const char *parts[5] = {"1", cmd, arg1 ? arg1 : "", arg2 ? arg2 : "", arg3 ? arg3 : ""};
    size_t n = 0;
    for (int i = 0; i < 5; i++) {
        size_t l = strlen(parts[i]);
        if ((i == 1 && (l == 0 || l > PFR_HOTSPOT_NAME_MAX)) || l > PFR_HOTSPOT_ARG_MAX)
            return -ENAMETOOLONG;
        if (n + l + 1 > cap)
            return -ENOSPC;
        memcpy(buf + n, parts[i], l + 1);
        n += l + 1;
    }
    return (int)n;
}

int pfr_hotspot_parse_reply(const char *buf, size_t len, int *status, size_t *body)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && buf[i] == '-') {
        neg = true;
        i++;
    }
    size_t digits = i;
    long v = 0;
    for (; i < len && buf[i] >= '0' && buf[i] <= '9'; i++) {
        if (i - digits >= 9)
            return -EBADMSG;
        v = v * 10 + (buf[i] - '0');
    }
    if (i == digits || i >= len || buf[i] != '\n')
        return -EBADMSG;
    *status = (int)(neg ? -v : v);
    *body = i + 1;
    return 0;
}

int pfr_hotspot_socket_name(char *buf, size_t cap, pid_t nspid)
{
    int n = snprintf(buf, cap, ".java_pid%d", (int)nspid);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

int pfr_hotspot_trigger_name(char *buf, size_t cap, pid_t nspid)
{
    int n = snprintf(buf, cap, ".attach_pid%d", (int)nspid);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

int pfr_hotspot_open_tmp(struct pfr_fsguard *fsguard, const char *proc_root, pid_t pid)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%d/root", proc_root ? proc_root : "/proc", (int)pid);
    int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    int fd;
    if (fsguard) {
        fd = pfr_fsguard_open_local(fsguard, pid, root, "/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else {
        fd = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            fd = -errno;
    }
    close(root);
    return fd;
}

/* ---- the child that takes the JVM's credentials ---- */

/* What the child does; everything it needs is prepared before fork (after fork, in a
 * multi-threaded process, only async-signal-safe calls). */
struct child_job {
    const pfr_jvm *jvm;
    int tmp_fd;
    bool connect, trigger;
    char sock[32], trig[32];
    bool triggered;           /* (the child's copy) a trigger file was made and SIGQUIT sent */
    const char *const *names; /* to remove */
    size_t nnames;
    int64_t deadline_ns;
};

/* Raw system calls: glibc's wrappers would try to change every thread's credentials, and the
 * child has one thread anyway. The order: groups while CAP_SETGID still holds, then the uid. */
static int become(const pfr_jvm *j)
{
    if (geteuid() == j->uid && getegid() == j->gid)
        return 0;
    if (syscall(SYS_setgroups, 0, NULL) != 0 && errno != EPERM)
        return -errno;
    if (syscall(SYS_setresgid, j->gid, j->gid, j->gid) != 0)
        return -errno;
    if (syscall(SYS_setresuid, j->uid, j->uid, j->uid) != 0)
        return -errno;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The socket's inode, opened without following a link and checked to be the JVM's socket. */
static int open_socket_inode(const struct child_job *c)
{
    int fd = openat(c->tmp_fd, c->sock, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != c->jvm->uid) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

/* Make the trigger file (as the JVM's user, so the JVM takes it), SIGQUIT, and wait for the
 * socket until the deadline. The trigger file is removed whatever happened. */
static int trigger(struct child_job *c)
{
    int t = openat(c->tmp_fd, c->trig, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool made = t >= 0;
    if (t < 0 && errno != EEXIST)
        return -errno;
    if (made) {
        /* already the JVM's when the credentials were taken; explicit for a root target */
        if (fchown(t, c->jvm->uid, c->jvm->gid) != 0) {
            close(t);
            unlinkat(c->tmp_fd, c->trig, 0);
            return -EPERM;
        }
        close(t);
    }
    int rc = kill(c->jvm->pid, SIGQUIT) == 0 ? -ETIMEDOUT : -errno;
    c->triggered = rc == -ETIMEDOUT;
    /* stop waiting before the parent's deadline, or it kills the child before the file is
     * removed */
    int64_t now = pfr_clock_mono_ns();
    int64_t until = c->deadline_ns - (c->deadline_ns - now) / 5;
    while (rc == -ETIMEDOUT && pfr_clock_mono_ns() < until) {
        sleep_ms(10);
        int fd = open_socket_inode(c);
        if (fd >= 0)
            rc = fd;
        else if (fd != -ENOENT)
            rc = fd;
    }
    if (made)
        unlinkat(c->tmp_fd, c->trig, 0);
    return rc;
}

static void put_fd_number(char *dst, int n)
{
    char tmp[16];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n && k < 15);
    while (k)
        *dst++ = tmp[--k];
    *dst = '\0';
}

static int child_connect(struct child_job *c)
{
    int path_fd = open_socket_inode(c);
    if (path_fd == -ENOENT && c->trigger)
        path_fd = trigger(c);
    if (path_fd < 0)
        return path_fd;
    /* connect through the descriptor: the name cannot be swapped for a link meanwhile, and a
     * long /proc/PID/root/... path never meets sun_path's 108 bytes */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, "/proc/self/fd/", 14);
    put_fd_number(sa.sun_path + 14, path_fd);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    for (;;) {
        if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return s;
        /* a full backlog answers EAGAIN on a non-blocking UNIX socket */
        if (errno != EAGAIN || pfr_clock_mono_ns() >= c->deadline_ns) {
            int e = errno == EAGAIN ? -ETIMEDOUT : -errno;
            close(s);
            return e;
        }
        sleep_ms(10);
    }
}

/* The child's answer: a result (0 or -errno) and, for a connect, the socket. */
static void child_reply(int chan, int result, bool triggered, int fd)
{
    int msg[2] = {result, triggered};
    struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        m.msg_control = u.buf;
        m.msg_controllen = sizeof(u.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    while (sendmsg(chan, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static void child_main(struct child_job *c, int chan)
{
    /* the daemon's handlers are not the child's to run: a signal waits (SIGKILL still ends it) */
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    int rc = become(c->jvm);
    if (rc) {
        child_reply(chan, rc, false, -1);
        _exit(0);
    }
    if (c->connect) {
        int s = child_connect(c);
        child_reply(chan, s < 0 ? s : 0, c->triggered, s);
        _exit(0);
    }
    rc = 0;
    for (size_t i = 0; i < c->nnames; i++)
        if (unlinkat(c->tmp_fd, c->names[i], 0) != 0 && errno != ENOENT && rc == 0)
            rc = -errno;
    child_reply(chan, rc, false, -1);
    _exit(0);
}

/* The result the child sent (and *fd, for a connect), waiting until the deadline; a child
 * still busy then is killed. */
static int child_wait(pid_t child, int chan, int64_t deadline_ns, int *fd, bool *triggered)
{
    int result = -ETIMEDOUT;
    int64_t left = deadline_ns - pfr_clock_mono_ns();
    struct pollfd p = {.fd = chan, .events = POLLIN};
    int pr;
    do
        pr = poll(&p, 1, left > 0 ? (int)(left / 1000000) + 1 : 0);
    while (pr < 0 && errno == EINTR);
    if (pr == 1) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        int v[2] = {0, 0};
        struct iovec iov = {.iov_base = v, .iov_len = sizeof(v)};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = u.buf,
                           .msg_controllen = sizeof(u.buf)};
        ssize_t n = recvmsg(chan, &m, MSG_CMSG_CLOEXEC);
        if (n == (ssize_t)sizeof(v)) {
            result = v[0];
            *triggered = v[1] != 0;
            struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
            if (cm && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(fd, CMSG_DATA(cm), sizeof(int));
        } else {
            result = -EPROTO; /* the child died before it answered */
        }
    } else {
        kill(child, SIGKILL);
    }
    /* the child only touches a local /tmp (pfr_hotspot_open_tmp): it exits at once */
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    if (result == 0 && fd && *fd < 0)
        result = -EPROTO;
    return result;
}

static int as_jvm_user(struct child_job *c, int *fd, pfr_attach_stats *st)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return -errno;
    if (st && (geteuid() != c->jvm->uid || getegid() != c->jvm->gid))
        st->credential_switches++;
    pid_t child = fork();
    if (child < 0) {
        int e = -errno;
        close(sv[0]);
        close(sv[1]);
        return e;
    }
    if (child == 0) {
        close(sv[0]);
        child_main(c, sv[1]);
    }
    close(sv[1]);
    if (fd)
        *fd = -1;
    bool triggered = false;
    int rc = child_wait(child, sv[0], c->deadline_ns, fd, &triggered);
    if (triggered && st)
        st->triggers++;
    close(sv[0]);
    return rc;
}

/* ---- a command ---- */

static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    for (;;) {
        int64_t left = deadline_ns - pfr_clock_mono_ns();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)(left / 1000000) + 1);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

static int exchange(int s, const char *req, size_t reqlen, int64_t deadline_ns, char *out,
                    size_t cap, size_t *outlen)
{
    size_t done = 0;
    while (done < reqlen) {
        int rc = wait_fd(s, POLLOUT, deadline_ns);
        if (rc)
            return rc;
        ssize_t w = send(s, req + done, reqlen - done, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return errno == EPIPE || errno == ECONNRESET ? -ECONNREFUSED : -errno;
        if (w > 0)
            done += (size_t)w;
    }
    *outlen = 0;
    for (;;) {
        int rc = wait_fd(s, POLLIN, deadline_ns);
        if (rc)
            return rc;
        if (*outlen == cap) {
            char b;
            ssize_t r = recv(s, &b, 1, MSG_DONTWAIT);
            return r == 0 ? 0 : -EMSGSIZE;
        }
        ssize_t r = recv(s, out + *outlen, cap - *outlen, MSG_DONTWAIT);
        if (r == 0)
            return 0;
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            return errno == ECONNRESET ? -ECONNREFUSED : -errno;
        if (r > 0)
            *outlen += (size_t)r;
    }
}

int pfr_hotspot_run(const pfr_jvm *jvm, int tmp_fd, bool may_trigger, const char *cmd,
                    const char *arg1, int64_t deadline_ns, char *out, size_t cap, size_t *outlen,
                    pfr_attach_stats *st)
{
    char req[PFR_HOTSPOT_NAME_MAX + 3 * PFR_HOTSPOT_ARG_MAX + 16];
    int reqlen = pfr_hotspot_request(req, sizeof(req), cmd, arg1, NULL, NULL);
    if (reqlen < 0)
        return reqlen;
    struct child_job c = {.jvm = jvm,
                          .tmp_fd = tmp_fd,
                          .connect = true,
                          .trigger = may_trigger,
                          .deadline_ns = deadline_ns};
    if (pfr_hotspot_socket_name(c.sock, sizeof(c.sock), jvm->nspid) ||
        pfr_hotspot_trigger_name(c.trig, sizeof(c.trig), jvm->nspid))
        return -ENOSPC;
    /* the child may signal it: a JVM that would die of SIGQUIT (-Xrs, or still starting) is
     * never triggered */
    if (!jvm->sigquit_caught)
        c.trigger = false;
    int s = -1;
    int rc = as_jvm_user(&c, &s, st);
    if (rc)
        return rc == -ENOENT ? -ECONNREFUSED : rc;
    rc = exchange(s, req, (size_t)reqlen, deadline_ns, out, cap, outlen);
    close(s);
    if (rc == 0 && kill(jvm->pid, 0) != 0 && errno == ESRCH && *outlen == 0)
        rc = -ESRCH;
    return rc;
}

int pfr_hotspot_unlink(const pfr_jvm *jvm, int tmp_fd, const char *const *names, size_t n,
                       int64_t deadline_ns, pfr_attach_stats *st)
{
    for (size_t i = 0; i < n; i++)
        if (!names[i][0] || strchr(names[i], '/'))
            return -EINVAL;
    struct child_job c = {
        .jvm = jvm, .tmp_fd = tmp_fd, .names = names, .nnames = n, .deadline_ns = deadline_ns};
    return as_jvm_user(&c, NULL, st);
}
