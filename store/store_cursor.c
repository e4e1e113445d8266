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
#include "store_util.h"

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

/* Write buf to dir/name by a temporary file, fsync, rename over the old one, fsync of dir. */
static int write_atomic(const char *dir, const char *name, const char *buf, size_t len)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    if (snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst) ||
        snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, name, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    errno = 0;
    if ((len && write(fd, buf, len) != (ssize_t)len) || fsync(fd) != 0)
        rc = errno ? -errno : -EIO;
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, dst) != 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return rc;
    }
    return fsync_dir(dir);
}

int pfr_store_cursor_set(pfr_store *s, const char *consumer, int64_t chunk_id)
{
    if (!valid_name(consumer) || chunk_id < 0)
        return -EINVAL;
    if (mkdir(s->cursor_dir, 0755) != 0 && errno != EEXIST)
        return -errno;
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%" PRId64 "\n", chunk_id);
    return write_atomic(s->cursor_dir, consumer, buf, (size_t)len);
}

/* The folder of the set-aside lists: a dot name, so that listing the cursors passes over it. */
static int aside_dir(const pfr_store *s, char *out, size_t cap)
{
    return snprintf(out, cap, "%s/.aside", s->cursor_dir) >= (int)cap ? -ENAMETOOLONG : 0;
}

int pfr_store_aside_set(pfr_store *s, const char *consumer, const int64_t *ids, size_t n)
{
    char dir[PATH_MAX];
    int rc;
    if (!valid_name(consumer))
        return -EINVAL;
    if ((rc = aside_dir(s, dir, sizeof(dir))) != 0)
        return rc;
    if (n == 0) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", dir, consumer) >= (int)sizeof(path))
            return -ENAMETOOLONG;
        if (unlink(path) != 0)
            return errno == ENOENT ? 0 : -errno;
        return fsync_dir(dir);
    }
    if ((mkdir(s->cursor_dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(dir, 0755) != 0 && errno != EEXIST))
        return -errno;
    char *buf = malloc(n * 21);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(buf + len, "%" PRId64 "\n", ids[i]);
    rc = write_atomic(dir, consumer, buf, len);
    free(buf);
    return rc;
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

int pfr_store_cursor_known(pfr_store *s, const char *consumer, bool *known)
{
    int64_t id;
    *known = false;
    if (!valid_name(consumer))
        return -EINVAL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", s->cursor_dir, consumer) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int rc = read_cursor(path, &id);
    *known = rc != -ENOENT;
    return rc == -ENOENT || rc == -EBADMSG ? 0 : rc;
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

/* Add the ids of one set-aside list (one per line; a line that is no id is passed over: the
 * list only holds roll-ups back, so a damaged one costs at most a roll-up). */
static int aside_read(const char *path, struct store_cursors *c)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? 0 : -errno;
    char line[64];
    int rc = 0;
    while (!rc && fgets(line, sizeof(line), f)) {
        char *end;
        errno = 0;
        long long v = strtoll(line, &end, 10);
        if (end == line || errno || v <= 0 || (*end && *end != '\n'))
            continue;
        if (VEC_RESERVE(c->aside, c->cap_aside, c->naside + 1))
            rc = -ENOMEM;
        else
            c->aside[c->naside++] = v;
    }
    fclose(f);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int asides_read(pfr_store *s, struct store_cursors *c)
{
    char dir[PATH_MAX];
    int rc = aside_dir(s, dir, sizeof(dir));
    if (rc)
        return rc;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        if (valid_name(e->d_name) &&
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
            rc = aside_read(path, c);
    }
    closedir(d);
    if (rc || c->naside == 0)
        return rc;
    qsort(c->aside, c->naside, sizeof(*c->aside), cmp_i64);
    size_t k = 0;
    for (size_t i = 0; i < c->naside; i++)
        if (k == 0 || c->aside[k - 1] != c->aside[i])
            c->aside[k++] = c->aside[i];
    c->naside = k;
    return 0;
}

int pfr_st_cursors_read(pfr_store *s, struct store_cursors *c)
{
    c->any = false;
    c->min_cursor = INT64_MAX;
    c->n = c->naside = 0;
    DIR *d = opendir(s->cursor_dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        if (!valid_name(e->d_name) ||
            snprintf(path, sizeof(path), "%s/%s", s->cursor_dir, e->d_name) >= (int)sizeof(path))
            continue;
        int64_t id = 0;
        int r = read_cursor(path, &id);
        if (r == -ENOENT)
            continue; /* removed while we listed */
        if (r)
            id = 0; /* unreadable: its consumer has taken nothing we can prove */
        if (VEC_RESERVE(c->v, c->cap, c->n + 1)) {
            rc = -ENOMEM;
            break;
        }
        struct store_consumer *k = &c->v[c->n++];
        memcpy(k->name, e->d_name, strlen(e->d_name) + 1); /* valid_name: <= 128 bytes */
        k->cursor = id;
        k->lost = 0;
        c->any = true;
        if (id < c->min_cursor)
            c->min_cursor = id;
    }
    closedir(d);
    return rc ? rc : asides_read(s, c);
}

void pfr_st_cursors_free(struct store_cursors *c)
{
    free(c->v);
    free(c->aside);
    memset(c, 0, sizeof(*c));
}

bool pfr_st_cursors_aside(const struct store_cursors *c, int64_t id)
{
    size_t lo = 0, hi = c->naside;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->aside[mid] == id)
            return true;
        if (c->aside[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool pfr_st_cursors_count_lost(struct store_cursors *c, int64_t id)
{
    bool any = false;
    for (size_t i = 0; i < c->n; i++)
        if (id > c->v[i].cursor) {
            c->v[i].lost++;
            any = true;
        }
    return any;
}
