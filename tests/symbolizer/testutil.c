#include "testutil.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int pfr_tu_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st)) {
        fprintf(stderr, "command failed: %s\n", cmd);
        return -1;
    }
    if (WEXITSTATUS(st) != 0)
        fprintf(stderr, "command exited %d: %s\n", WEXITSTATUS(st), cmd);
    return WEXITSTATUS(st);
}

int pfr_tu_start(struct tu_child *c, char *const argv[])
{
    int in[2], out[2];
    memset(c, 0, sizeof(*c));
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) /* no leak into later children */
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->pid = pid;
    c->in_fd = in[1];
    FILE *f = fdopen(out[0], "r");
    char line[256];
    int rc = -1;
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "ready", 5) == 0) {
            rc = 0;
            break;
        }
        char name[64];
        uint64_t a;
        if (c->nsyms < TU_MAX_SYMS && sscanf(line, "%63s %" SCNx64, name, &a) == 2) {
            snprintf(c->names[c->nsyms], sizeof(c->names[0]), "%s", name);
            c->addrs[c->nsyms++] = a;
        }
    }
    if (f)
        fclose(f);
    if (rc)
        pfr_tu_stop(c);
    return rc;
}

uint64_t pfr_tu_addr(const struct tu_child *c, const char *name)
{
    for (int i = 0; i < c->nsyms; i++)
        if (strcmp(c->names[i], name) == 0)
            return c->addrs[i];
    return 0;
}

int pfr_tu_stop(struct tu_child *c)
{
    int st = -1;
    if (c->in_fd >= 0)
        close(c->in_fd);
    c->in_fd = -1;
    if (c->pid > 0 && waitpid(c->pid, &st, 0) == c->pid) {
        c->pid = 0;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    return -1;
}

int pfr_tu_marker_line(const char *path, const char *marker)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0, found = -1;
    while (f && fgets(line, sizeof(line), f)) {
        n++;
        if (strstr(line, marker)) {
            found = n;
            break;
        }
    }
    if (f)
        fclose(f);
    return found;
}

bool pfr_tu_mapping(pid_t pid, uint64_t addr, uint64_t *start, uint64_t *pgoff)
{
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    bool ok = false;
    while (f && fgets(line, sizeof(line), f)) {
        uint64_t s, e, o;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64, &s, &e, &o) == 3 && s <= addr &&
            addr < e) {
            *start = s;
            *pgoff = o;
            ok = true;
            break;
        }
    }
    if (f)
        fclose(f);
    return ok;
}

bool pfr_tu_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}
