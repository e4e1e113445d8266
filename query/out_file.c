/* Output files written beside their target and renamed, or in place for devices and pipes. */
#include "out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file a regular-file path names: the path itself, or a symlink's final target. */
static char *regular_target(const char *path)
{
    struct stat ls;
    if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode))
        return realpath(path, NULL);
    return strdup(path);
}

/* A temporary file beside target, with the mode the target has (or a new file would get). */
static int open_beside(pfr_out_file *out, mode_t mode, char *err, size_t errlen)
{
    char *copy = strdup(out->target);
    if (!copy)
        return -ENOMEM;
    const char *dir = dirname(copy);
    size_t n = strlen(dir) + strlen("/.pfr-out-XXXXXX") + 1;
    out->tmp = malloc(n);
    if (!out->tmp) {
        free(copy);
        return -ENOMEM;
    }
    snprintf(out->tmp, n, "%s/.pfr-out-XXXXXX", dir);
    free(copy);
    int fd = mkstemp(out->tmp);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot write %s: %s", out->target, strerror(e));
        free(out->tmp);
        out->tmp = NULL;
        return -e;
    }
    if (fchmod(fd, mode) != 0 || !(out->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(out->tmp);
        snprintf(err, errlen, "cannot write %s: %s", out->target, strerror(e));
        free(out->tmp);
        out->tmp = NULL;
        return -e;
    }
    return 0;
}

static int open_path(const char *path, pfr_out_file *out, char *err, size_t errlen)
{
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        /* a device, a pipe, /dev/stdout: written in place, never replaced or removed */
        out->f = fopen(path, "w");
        if (!out->f) {
            int e = errno;
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
            return -e;
        }
        return 0;
    }
    if (!exists && errno != ENOENT) {
        int e = errno;
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        return -e;
    }
    out->target = regular_target(path);
    if (!out->target) {
        int e = errno ? errno : ENOMEM;
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        return -e;
    }
    mode_t um = umask(0);
    umask(um);
    int rc = open_beside(out, exists ? (st.st_mode & 07777) : (0666 & ~um), err, errlen);
    if (rc < 0) {
        free(out->target);
        out->target = NULL;
    }
    return rc;
}

int pfr_out_file_open(const char *path, pfr_out_file *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!(out->name = strdup(path))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = open_path(path, out, err, errlen);
    if (rc < 0) {
        free(out->name);
        out->name = NULL;
    }
    return rc;
}

int pfr_out_file_close(pfr_out_file *out, bool ok, char *err, size_t errlen)
{
    int rc = 0, e = errno; /* a failed write before this call left its errno */
    if (out->f) {
        if (ferror(out->f))
            rc = -(e ? e : EIO);
        else if (fflush(out->f) != 0)
            rc = -(errno ? errno : EIO);
        if (out->tmp && rc == 0 && fsync(fileno(out->f)) != 0)
            rc = -errno;
        if (fclose(out->f) != 0 && rc == 0)
            rc = -(errno ? errno : EIO);
        out->f = NULL;
    }
    const char *name = out->name ? out->name : "the output";
    if (rc < 0)
        snprintf(err, errlen, "cannot write %s: %s", name, strerror(-rc));
    if (out->tmp) {
        if (ok && rc == 0 && rename(out->tmp, out->target) != 0) {
            rc = -errno;
            snprintf(err, errlen, "cannot replace %s: %s", name, strerror(-rc));
        }
        if (!ok || rc < 0)
            unlink(out->tmp); /* only the temporary file: the target stays as it was */
    }
    free(out->tmp);
    free(out->target);
    free(out->name);
    out->tmp = out->target = out->name = NULL;
    return rc;
}
