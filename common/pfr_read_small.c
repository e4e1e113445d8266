/* A small file read whole into a buffer (pfr_read_small.h). */
#include "pfr_read_small.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

ssize_t pfr_read_small(const char *path, char *buf, size_t cap)
{
    if (cap == 0)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}
