/* Small string helpers of pfr_identity: Go's path.Clean, bounded formatting (id_internal.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "id_internal.h"

/* The node agent builds every cgroup id with path.Join, so paths are compared clean. */
void pfr_identity_path_clean(const char *s, size_t n, char *out)
{
    if (n == 0) {
        out[0] = '\0';
        return;
    }
    bool rooted = s[0] == '/';
    size_t r = 0, w = 0, dotdot = 0;
    if (rooted) {
        out[w++] = '/';
        r = dotdot = 1;
    }
    while (r < n) {
        if (s[r] == '/') {
            r++;
        } else if (s[r] == '.' && (r + 1 == n || s[r + 1] == '/')) {
            r++;
        } else if (s[r] == '.' && r + 1 < n && s[r + 1] == '.' && (r + 2 == n || s[r + 2] == '/')) {
            r += 2;
            if (w > dotdot) {
                w--;
                while (w > dotdot && out[w] != '/')
                    w--;
            } else if (!rooted) {
                if (w > 0)
                    out[w++] = '/';
                out[w++] = '.';
                out[w++] = '.';
                dotdot = w;
            }
        } else {
            if ((rooted && w != 1) || (!rooted && w != 0))
                out[w++] = '/';
            for (; r < n && s[r] != '/'; r++)
                out[w++] = s[r];
        }
    }
    if (w == 0)
        out[w++] = '.';
    out[w] = '\0';
}

int pfr_identity_fmt(char *out, size_t outlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, outlen, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= outlen) {
        if (outlen)
            out[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

int pfr_identity_copy(char *out, size_t outlen, const char *s)
{
    return pfr_identity_fmt(out, outlen, "%s", s ? s : "");
}

bool pfr_identity_split_next(struct id_split *s, char sep, const char **piece, size_t *n)
{
    if (s->done)
        return false;
    const char *q = memchr(s->p, sep, (size_t)(s->end - s->p));
    *piece = s->p;
    *n = q ? (size_t)(q - s->p) : (size_t)(s->end - s->p);
    if (q)
        s->p = q + 1;
    else
        s->done = true;
    return true;
}

bool pfr_identity_is_rid_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

size_t pfr_identity_rid_run(const char *s)
{
    size_t n = 0;
    while (pfr_identity_is_rid_char(s[n]))
        n++;
    return n;
}
