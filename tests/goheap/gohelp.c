#include "gohelp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *pfr_gohelp_toolchain(const char *version, char *buf, size_t cap)
{
    snprintf(buf, cap, "/usr/lib/go-%s/bin/go", version);
    return access(buf, X_OK) == 0 ? buf : NULL;
}

int pfr_gohelp_build(const char *go, const char *src_dir, const char *flags, const char *out,
                     const char *work_dir)
{
    char lock[4096], cmd[8192];
    mkdir(work_dir, 0755);
    snprintf(lock, sizeof(lock), "%s/gobuild.lock", work_dir);
    int lfd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
        perror(lock);
        return -1;
    }
    /* HOME may be unset under a service manager: keep the build cache in the work dir then */
    const char *home = getenv("HOME");
    char cache[4200] = "";
    if (!home || !*home)
        snprintf(cache, sizeof(cache), "GOCACHE=%s/gocache HOME=%s", work_dir, work_dir);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && env %s GOFLAGS=-buildvcs=false GOTOOLCHAIN=local GOPROXY=off "
             "GO111MODULE=on '%s' build %s -o '%s' . 2>&1",
             src_dir, cache, go, flags, out);
    FILE *f = popen(cmd, "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        fputs(line, stderr);
    int rc = f ? pclose(f) : -1;
    close(lfd);
    if (rc != 0) {
        fprintf(stderr, "go build failed: %s\n", cmd);
        return -1;
    }
    return 0;
}

int pfr_gohelp_start(gohelp_proc *p, char *const argv[])
{
    int in[2], out[2];
    memset(p, 0, sizeof(*p));
    p->pid = -1;
    if (pipe2(in, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -errno;
    }
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->in = in[1];
    p->out = out[0];
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pfr_gohelp_line(gohelp_proc *p, char *line, size_t cap, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl) {
            size_t n = (size_t)(nl - p->buf);
            snprintf(line, cap, "%.*s", (int)n, p->buf);
            memmove(p->buf, nl + 1, p->len - n - 1);
            p->len -= n + 1;
            return 0;
        }
        if (p->len == sizeof(p->buf))
            p->len = 0; /* an absurd line: drop it */
        long long left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {p->out, POLLIN, 0};
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        ssize_t n = read(p->out, p->buf + p->len, sizeof(p->buf) - p->len);
        if (n <= 0)
            return -EPIPE;
        p->len += (size_t)n;
    }
}

int pfr_gohelp_expect(gohelp_proc *p, const char *prefix, char *line, size_t cap, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - now_ms();
        int rc = pfr_gohelp_line(p, line, cap, left > 0 ? (int)left : 0);
        if (rc < 0)
            return rc;
        if (strncmp(line, prefix, strlen(prefix)) == 0)
            return 0;
    }
}

int pfr_gohelp_send(gohelp_proc *p, const char *cmd)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "%s\n", cmd);
    return write(p->in, buf, (size_t)n) == n ? 0 : -EPIPE;
}

void pfr_gohelp_kill(gohelp_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = -1;
    }
    if (p->in > 0)
        close(p->in);
    if (p->out > 0)
        close(p->out);
    p->in = p->out = -1;
}
