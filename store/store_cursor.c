/*
 * Consumer cursors: one small file per consumer in "<db path>-cursors/", holding the id of the
 * last chunk the consumer has taken. Files, not rows, so a read-only consumer (the shipper opens
 * the ring read-only) keeps its place without writing the database. Each update is a write to a
 * temporary file, fsync, rename over the old one, fsync of the folder: a reader sees the old or
 * the new value, never a torn one, and the new value survives a crash once set returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_cursor.h"

#define CURSOR_NAME_MAX 128

static bool valid_name(const char *c)
{
    size_t n = c ? strlen(c) : 0;
    if (n == 0 || n > CURSOR_NAME_MAX || c[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = c[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

int pfr_store_cursor_set(pfr_store *s, const char *consumer, int64_t chunk_id)
{
    if (!valid_name(consumer) || chunk_id < 0)
        return -EINVAL;
    if (mkdir(s->cursor_dir, 0755) != 0 && errno != EEXIST)
        return -errno;
    char tmp[PATH_MAX], dst[PATH_MAX];
    if (snprintf(dst, sizeof(dst), "%s/%s", s->cursor_dir, consumer) >= (int)sizeof(dst) ||
        snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", s->cursor_dir, consumer, (int)getpid()) >=
            (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%" PRId64 "\n", chunk_id);
    int rc = 0;
    if (write(fd, buf, (size_t)len) != len || fsync(fd) != 0)
        rc = errno ? -errno : -EIO;
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, dst) != 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return rc;
    }
    return fsync_dir(s->cursor_dir);
}

/* Parse a cursor file: 0 with *id, -ENOENT if absent, -EBADMSG if unreadable. */
static int read_cursor(const char *path, int64_t *id)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char buf[64] = "";
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || errno || v < 0 || (*end && *end != '\n'))
        return -EBADMSG;
    *id = v;
    return 0;
}

int pfr_store_cursor_get(pfr_store *s, const char *consumer, int64_t *chunk_id)
{
    *chunk_id = 0;
    if (!valid_name(consumer))
        return -EINVAL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", s->cursor_dir, consumer) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int rc = read_cursor(path, chunk_id);
    return rc == -ENOENT ? 0 : rc;
}

int pfr_store_cursor_remove(pfr_store *s, const char *consumer)
{
    if (!valid_name(consumer))
        return -EINVAL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", s->cursor_dir, consumer) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    if (unlink(path) != 0)
        return errno == ENOENT ? 0 : -errno;
    return fsync_dir(s->cursor_dir);
}

/* The smallest cursor of all registered consumers (the writer counts chunks above it as
 * lost-unshipped when it evicts them). An unreadable cursor file counts as 0: its consumer has
 * taken nothing we can prove. */
int pfr_st_cursors_min(pfr_store *s, int64_t *min_cursor, bool *any)
{
    *any = false;
    *min_cursor = INT64_MAX;
    DIR *d = opendir(s->cursor_dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!valid_name(e->d_name))
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", s->cursor_dir, e->d_name) >= (int)sizeof(path))
            continue;
        int64_t id = 0;
        int rc = read_cursor(path, &id);
        if (rc == -ENOENT)
            continue; /* removed while we listed */
        if (rc)
            id = 0;
        *any = true;
        if (id < *min_cursor)
            *min_cursor = id;
    }
    closedir(d);
    return 0;
}
