#include "goheap_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PAGE_DOWN(x) ((x) & ~(uint64_t)4095)

int pfr_goheap_parse_stat(const char *text, size_t len, uint64_t *starttime, uint64_t *startstack)
{
    /* comm (field 2) may hold spaces and parentheses: fields resume after the last ')' */
    const char *end = text + len, *p = NULL;
    for (const char *q = text; q < end; q++)
        if (*q == ')')
            p = q;
    if (!p)
        return -EBADMSG;
    p++;
    int field = 2;
    uint64_t v22 = 0, v28 = 0;
    while (p < end && field < 28) {
        while (p < end && *p == ' ')
            p++;
        if (p >= end)
            break;
        field++;
        uint64_t v = 0;
        const char *s = p;
        while (p < end && *p != ' ' && *p != '\n') {
            if (*p >= '0' && *p <= '9' && v < UINT64_MAX / 10)
                v = v * 10 + (uint64_t)(*p - '0');
            p++;
        }
        if (p == s)
            break;
        if (field == 22)
            v22 = v;
        else if (field == 28)
            v28 = v;
        if (p < end && *p == '\n')
            break;
    }
    if (field < 28)
        return -EBADMSG;
    *starttime = v22;
    *startstack = v28;
    return 0;
}

int pfr_goheap_read_stat(const char *proc_root, pid_t pid, uint64_t *starttime,
                         uint64_t *startstack)
{
    char path[96], buf[1024];
    snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return err == ESRCH ? -ESRCH : -err;
    buf[n] = '\0';
    return pfr_goheap_parse_stat(buf, (size_t)n, starttime, startstack);
}

/* "start-end perms offset maj:min inode   path" */
static int parse_maps_line(const char *line, uint64_t *start, uint64_t *off, unsigned *maj,
                           unsigned *min, uint64_t *ino, const char **path)
{
    uint64_t end;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 "%n", start, &end,
               perms, off, maj, min, ino, &pos) != 7)
        return -EBADMSG;
    const char *p = line + pos;
    while (*p == ' ')
        p++;
    *path = p;
    return 0;
}

int pfr_goheap_read_bias(const char *proc_root, pid_t pid, const struct stat *exe,
                         const char *exe_path, uint64_t load_vaddr, uint64_t load_offset,
                         uint64_t *bias)
{
    char path[96];
    snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? -ESRCH : -errno;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = -ENOENT;
    size_t plen = exe_path ? strlen(exe_path) : 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        uint64_t start, off, ino;
        unsigned maj, min;
        const char *mpath;
        if (parse_maps_line(line, &start, &off, &maj, &min, &ino, &mpath) < 0)
            continue;
        bool same_file = (ino == (uint64_t)exe->st_ino && maj == major(exe->st_dev) &&
                          min == minor(exe->st_dev)) ||
                         (plen && strcmp(mpath, exe_path) == 0);
        if (same_file && off == PAGE_DOWN(load_offset)) {
            *bias = start - PAGE_DOWN(load_vaddr);
            rc = 0;
            break;
        }
    }
    if (rc == -ENOENT && ferror(f))
        rc = -EIO;
    free(line);
    fclose(f);
    return rc;
}
