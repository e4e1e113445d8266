#include "writer_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int pfr_writer_start(struct writer_run *w, const char *exe, const char *db, uint64_t seed,
                     long count, uint64_t max_bytes, bool nonblock)
{
    int p[2];
    memset(w, 0, sizeof(*w));
    if (pipe(p) != 0)
        return -errno;
    char s_seed[32], s_count[32], s_max[32];
    snprintf(s_seed, sizeof(s_seed), "%llu", (unsigned long long)seed);
    snprintf(s_count, sizeof(s_count), "%ld", count);
    snprintf(s_max, sizeof(s_max), "%llu", (unsigned long long)max_bytes);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(exe, exe, db, s_seed, s_count, s_max, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    if (nonblock)
        fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    w->pid = pid;
    w->fd = p[0];
    return 0;
}

int pfr_writer_read(struct writer_run *w, uint64_t seed, struct committed **out, size_t *n,
                    size_t *cap)
{
    for (;;) {
        ssize_t r = read(w->fd, w->buf + w->len, sizeof(w->buf) - 1 - w->len);
        if (r == 0)
            return 1;
        if (r < 0)
            return errno == EINTR ? 0 : (errno == EAGAIN ? 0 : 1);
        w->len += (size_t)r;
        w->buf[w->len] = 0;
        char *line = w->buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = 0;
            long long id;
            long idx;
            /* "pin ID" and "unpin ID" (PFR_WRITER_PINS): kept as n = WRITER_PIN / WRITER_UNPIN */
            bool ok = false;
            if (sscanf(line, "pin %lld", &id) == 1) {
                idx = WRITER_PIN;
                ok = true;
            } else if (sscanf(line, "unpin %lld", &id) == 1) {
                idx = WRITER_UNPIN;
                ok = true;
            } else if (sscanf(line, "unpinning %lld", &id) == 1) {
                idx = WRITER_UNPINNING;
                ok = true;
            } else {
                ok = sscanf(line, "%lld %ld", &id, &idx) == 2;
            }
            if (ok) {
                if (*n == *cap) {
                    *cap = *cap ? *cap * 2 : 256;
                    *out = realloc(*out, *cap * sizeof(**out));
                    if (!*out)
                        abort();
                }
                (*out)[(*n)++] = (struct committed){id, idx, seed};
            }
            line = nl + 1;
        }
        w->len = strlen(line);
        memmove(w->buf, line, w->len);
    }
}

int pfr_writer_wait(struct writer_run *w)
{
    int status = 0;
    waitpid(w->pid, &status, 0);
    close(w->fd);
    return status;
}
