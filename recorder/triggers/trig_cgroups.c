/* The cgroups whose pressure is watched: those holding processes, found by walking cgroupfs
 * (the recorder's rule allows cgroupfs and procfs files of its own on this thread). */
#include "trig_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH      16
#define MAX_KEPT_FILES 512

int pfr_trig_cgroup2_root(const char *mountinfo_path, char *out, size_t outlen)
{
    FILE *f = fopen(mountinfo_path, "re");
    if (!f)
        return -errno;
    char line[4096];
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof(line), f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char *sep = strstr(line, " - ");
        char mnt[4096];
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0 ||
            sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
            continue;
        snprintf(out, outlen, "%s", mnt);
        rc = 0;
    }
    fclose(f);
    return rc;
}

ssize_t pfr_trig_read_file(const char *root, const char *path, const char *file, char *buf,
                           size_t cap)
{
    char p[8192];
    snprintf(p, sizeof(p), "%s%s/%s", root, strcmp(path, "/") ? path : "", file);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, cap - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = '\0';
    return n;
}

void pfr_trig_fds_init(pfr_trig_fds *fds)
{
    struct rlimit rl;
    fds->open = 0;
    fds->max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (size_t)rl.rlim_cur / 8
                   : MAX_KEPT_FILES;
    if (fds->max > MAX_KEPT_FILES)
        fds->max = MAX_KEPT_FILES;
}

void pfr_trig_file_close(pfr_trig_file *f, pfr_trig_fds *fds)
{
    if (!f->open)
        return;
    close(f->fd);
    f->open = false;
    fds->open--;
}

static ssize_t read_kept(pfr_trig_file *f, char *buf, size_t cap)
{
    ssize_t n = pread(f->fd, buf, cap - 1, 0);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return n;
}

ssize_t pfr_trig_file_read(pfr_trig_file *f, pfr_trig_fds *fds, const char *root, const char *path,
                           const char *name, char *buf, size_t cap)
{
    if (f->open) {
        ssize_t n = read_kept(f, buf, cap);
        if (n > 0)
            return n;
        pfr_trig_file_close(f, fds); /* the cgroup went, or the file changed: open it again */
    }
    if (fds->open >= fds->max)
        return pfr_trig_read_file(root, path, name, buf, cap);
    char p[8192];
    snprintf(p, sizeof(p), "%s%s/%s", root, strcmp(path, "/") ? path : "", name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    f->fd = fd;
    f->open = true;
    fds->open++;
    ssize_t n = read_kept(f, buf, cap);
    if (n <= 0)
        pfr_trig_file_close(f, fds);
    return n;
}

size_t pfr_trig_cgroup_pids(const char *root, const char *path, int32_t *pids, size_t max)
{
    char buf[4096];
    if (pfr_trig_read_file(root, path, "cgroup.procs", buf, sizeof(buf)) <= 0)
        return 0;
    size_t n = 0;
    for (char *p = buf, *end; n < max && *p; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v > 0)
            pids[n++] = (int32_t)v;
        while (*end == '\n')
            end++;
    }
    return n;
}

static pfr_trig_cgroup *find(pfr_trig_cgroups *c, uint64_t ino)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].ino == ino)
            return &c->v[i];
    return NULL;
}

static void forget(pfr_trig_cgroups *c, pfr_trig_cgroup *g)
{
    pfr_trig_file_close(&g->cpu_file, &c->fds);
    pfr_trig_file_close(&g->mem_file, &c->fds);
    pfr_trig_file_close(&g->events_file, &c->fds);
    free(g->path);
    g->path = NULL;
}

static int add(pfr_trig_cgroups *c, uint64_t ino, const char *path)
{
    pfr_trig_cgroup *g = find(c, ino);
    if (g && strcmp(g->path, path) == 0) {
        g->found = true;
        return 0;
    }
    if (g) { /* the inode now names another cgroup */
        forget(c, g);
        memset(g, 0, sizeof(*g));
    } else {
        if (c->n == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 16;
            pfr_trig_cgroup *v = realloc(c->v, cap * sizeof(*v));
            if (!v)
                return -ENOMEM;
            c->v = v;
            c->cap = cap;
        }
        g = &c->v[c->n++];
        memset(g, 0, sizeof(*g));
    }
    g->ino = ino;
    g->found = true;
    if (!(g->path = strdup(path)))
        return -ENOMEM;
    return 0;
}

/* Whether the cgroup dir/name lists a process: its cgroup.procs read no further than its first
 * line. */
static bool holds_processes(int dir, const char *name)
{
    char p[NAME_MAX + 16], buf[32];
    snprintf(p, sizeof(p), "%s/cgroup.procs", name);
    int fd = openat(dir, p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    return n > 0 && buf[0] >= '0' && buf[0] <= '9';
}

/* The subdirectories of the cgroup at path (open as dir) that hold processes, and theirs below.
 * getdents64 into a buffer on the stack, relative to the parent's descriptor: the walk runs every
 * few seconds, and opendir's 32 KiB buffer and the absolute paths' lookups were most of it. */
static int walk(pfr_trig_cgroups *c, int dir, const char *path, int depth, size_t max,
                size_t *count)
{
    char buf[4096] __attribute__((aligned(8)));
    int rc = 0;
    ssize_t len;
    while (rc == 0 && *count < max && (len = getdents64(dir, buf, sizeof(buf))) > 0) {
        for (ssize_t off = 0; rc == 0 && *count < max && off < len;) {
            const struct dirent64 *e = (const struct dirent64 *)(buf + off);
            off += e->d_reclen;
            if (e->d_type != DT_DIR || e->d_name[0] == '.')
                continue;
            char sub[4096];
            int n = snprintf(sub, sizeof(sub), "%s/%s", strcmp(path, "/") ? path : "", e->d_name);
            if (n < 0 || (size_t)n >= sizeof(sub))
                continue;
            struct stat st;
            if (fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            if (holds_processes(dir, e->d_name)) {
                rc = add(c, (uint64_t)st.st_ino, sub);
                (*count)++;
            }
            /* a directory's link count is 2 + its subdirectories (cgroupfs, like ext4 and
             * tmpfs): a leaf cgroup, most of them, is not opened and listed (btrfs says 1:
             * walked) */
            if (rc || depth >= MAX_DEPTH || st.st_nlink == 2)
                continue;
            int fd = openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                continue; /* removed meanwhile */
            rc = walk(c, fd, sub, depth + 1, max, count);
            close(fd);
        }
    }
    return rc;
}

int pfr_trig_cgroups_scan(pfr_trig_cgroups *c, size_t max_cgroups)
{
    for (size_t i = 0; i < c->n; i++)
        c->v[i].found = false;
    size_t count = 0;
    int rc = 0, fd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        rc = walk(c, fd, "/", 0, max_cgroups, &count);
        close(fd);
    }
    /* those gone (or empty now) are forgotten */
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->v[i].found)
            c->v[k++] = c->v[i];
        else
            forget(c, &c->v[i]);
    }
    c->n = k;
    return rc;
}

void pfr_trig_cgroups_free(pfr_trig_cgroups *c)
{
    for (size_t i = 0; i < c->n; i++)
        forget(c, &c->v[i]);
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
}
