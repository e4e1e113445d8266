/* pfr_disk_keep: the free space the recorder's own files leave to the ring (see
 * pfr_disk_keep.h). */
#include "pfr_disk_keep.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

bool pfr_disk_keep_find_ring(pfr_disk_keep *keep, const char *ring_path, uint64_t *fs_bytes)
{
    keep->ring_known = false;
    keep->ring_dev = 0;
    *fs_bytes = 0;
    char p[PATH_MAX];
    if (!ring_path || snprintf(p, sizeof(p), "%s", ring_path) >= (int)sizeof(p))
        return false;
    /* the ring's file, else its folder, else the folder's: the first that exists */
    struct stat st;
    while (stat(p, &st) != 0) {
        char *slash = strrchr(p, '/');
        if (strcmp(p, ".") == 0 || strcmp(p, "/") == 0)
            return false;
        if (!slash)
            snprintf(p, sizeof(p), "."); /* a relative path: the working directory's */
        else if (slash == p)
            p[1] = '\0';
        else
            *slash = '\0';
    }
    struct statvfs v;
    if (statvfs(p, &v) == 0)
        *fs_bytes = (uint64_t)v.f_blocks * v.f_frsize;
    keep->ring_known = true;
    keep->ring_dev = (uint64_t)st.st_dev;
    return true;
}

int pfr_disk_keep_fits(const pfr_disk_keep *keep, int fd, uint64_t bytes, uint64_t *short_by)
{
    if (short_by)
        *short_by = 0;
    struct statvfs v;
    struct stat st;
    if (fstatvfs(fd, &v) != 0 || fstat(fd, &st) != 0)
        return 0;
    uint64_t size = (uint64_t)v.f_blocks * v.f_frsize;
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    uint64_t want = (uint64_t)((double)size * PFR_DISK_KEEP_PERCENT / 100.0);
    if (keep && keep->ring_reserve > want)
        want = keep->ring_reserve;
    if (keep && keep->ring_known && keep->ring_dev == (uint64_t)st.st_dev) {
        uint64_t ring = sat_add(keep->ring_reserve, keep->ring_cap);
        if (ring > want)
            want = ring;
    }
    uint64_t need = sat_add(want, bytes);
    if (avail >= need)
        return 0;
    if (short_by)
        *short_by = need - avail;
    return -EDQUOT;
}
