/* Whole-file reads with a size cap, for the on-disk metadata sources (id_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "id_internal.h"

/* Reads up to max + 1 bytes so that a file over the cap is told from one exactly at it; files
 * of /proc report size 0, so the size of fstat is only a first guess. */
int pfr_identity_read_file(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 && (size_t)st.st_size <= max
                     ? (size_t)st.st_size + 1
                     : 4096;
    char *buf = NULL;
    size_t n = 0;
    int rc = 0;
    for (;;) {
        if (!buf || n == cap) {
            cap = buf ? cap * 2 : cap;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            rc = -EFBIG;
            break;
        }
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}
