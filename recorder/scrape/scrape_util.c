/* Small helpers of pfr_scrape: error text, backoff, bounded file reads. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scrape_internal.h"

void pfr_scrape_errf(char *err, size_t len, const char *fmt, ...)
{
    if (!err || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

void pfr_scrape_copy(char *dst, size_t cap, const char *src)
{
    if (cap == 0)
        return;
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

bool pfr_scrape_backoff_fail(struct sc_backoff *b, int64_t now, int64_t interval, int64_t max)
{
    int64_t prev = b->delay_ns;
    b->consecutive++;
    int64_t d = interval;
    for (unsigned i = 1; i < b->consecutive && d < max; i++)
        d = d > max / 2 ? max : d * 2;
    if (d > max)
        d = max;
    b->delay_ns = d;
    b->until_mono = now + d;
    return b->consecutive == 1 || d != prev;
}

bool pfr_scrape_backoff_ok(struct sc_backoff *b)
{
    bool was = b->consecutive > 0;
    b->consecutive = 0;
    b->delay_ns = 0;
    b->until_mono = 0;
    return was;
}

bool pfr_scrape_backoff_due(const struct sc_backoff *b, int64_t now, int64_t interval)
{
    return b->consecutive == 0 || now + interval / 4 >= b->until_mono;
}

int pfr_scrape_read_file(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    if (len)
        *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = max < 4096 ? max : 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                close(fd);
                return -EFBIG;
            }
            size_t ncap = cap * 2 > max ? max : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                close(fd);
                return -ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return 0;
}
