#include "sym_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK 65536

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool pfr_sym_parse_hex(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    while (*p < end && hexval(**p) >= 0) {
        if (++digits > 16)
            return false;
        v = (v << 4) | (uint64_t)hexval(**p);
        (*p)++;
    }
    *out = v;
    return digits > 0;
}

struct splitter {
    const struct pfr_sym_line_limits *lim;
    pfr_sym_line_cb cb;
    void *ctx;
    size_t lineno;
    char *err;
    size_t errlen;
};

static int emit(struct splitter *sp, char *line, size_t len)
{
    if (len > sp->lim->max_line) {
        snprintf(sp->err, sp->errlen, "line %zu longer than %zu bytes", sp->lineno + 1,
                 sp->lim->max_line);
        return -EINVAL;
    }
    if (memchr(line, '\0', len)) {
        snprintf(sp->err, sp->errlen, "line %zu has a NUL byte", sp->lineno + 1);
        return -EINVAL;
    }
    if (++sp->lineno > sp->lim->max_lines) {
        snprintf(sp->err, sp->errlen, "more than %zu lines", sp->lim->max_lines);
        return -E2BIG;
    }
    line[len] = '\0';
    return sp->cb(sp->ctx, line, len, sp->lineno);
}

/* Emits every complete line of buf[0..len); returns bytes consumed or a negative errno. */
static long split(struct splitter *sp, char *buf, size_t len)
{
    size_t pos = 0;
    for (;;) {
        char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl)
            break;
        size_t l = (size_t)(nl - (buf + pos));
        int rc = emit(sp, buf + pos, l);
        if (rc)
            return rc;
        pos += l + 1;
    }
    if (len - pos > sp->lim->max_line) {
        snprintf(sp->err, sp->errlen, "line %zu longer than %zu bytes", sp->lineno + 1,
                 sp->lim->max_line);
        return -EINVAL;
    }
    return (long)pos;
}

int pfr_sym_lines_from_file(const char *path, const struct pfr_sym_line_limits *lim,
                            pfr_sym_line_cb cb, void *ctx, char *err, size_t errlen)
{
    struct splitter sp = {lim, cb, ctx, 0, err, errlen};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "open %s: %s", path, strerror(e));
        return -e;
    }
    size_t cap = lim->max_line + 1 + CHUNK;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t have = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, cap - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "read %s: %s", path, strerror(-rc));
            break;
        }
        if (n == 0) {
            if (have > 0)
                rc = emit(&sp, buf, have);
            break;
        }
        have += (size_t)n;
        long used = split(&sp, buf, have);
        if (used < 0) {
            rc = (int)used;
            break;
        }
        memmove(buf, buf + used, have - (size_t)used);
        have -= (size_t)used;
    }
    free(buf);
    close(fd);
    return rc;
}

int pfr_sym_lines_from_mem(const char *data, size_t len, const struct pfr_sym_line_limits *lim,
                           pfr_sym_line_cb cb, void *ctx, char *err, size_t errlen)
{
    struct splitter sp = {lim, cb, ctx, 0, err, errlen};
    char *buf = malloc(len + 1);
    if (!buf)
        return -ENOMEM;
    if (len)
        memcpy(buf, data, len);
    int rc = 0;
    size_t pos = 0;
    while (pos < len) {
        char *nl = memchr(buf + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - (buf + pos)) : len - pos;
        rc = emit(&sp, buf + pos, l);
        if (rc)
            break;
        pos += l + 1;
    }
    free(buf);
    return rc;
}
