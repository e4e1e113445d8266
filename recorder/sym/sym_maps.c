#include "sym_maps.h"
#include "sym_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static bool parse_dec(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        uint64_t d = (uint64_t)(**p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        digits++;
        (*p)++;
    }
    *out = v;
    return digits > 0;
}

static bool expect(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return false;
    (*p)++;
    return true;
}

static bool parse_perms(const char **p, const char *end, char perms[4])
{
    static const char allowed[4][3] = {"r-", "w-", "x-", "ps"};
    if (end - *p < 4)
        return false;
    for (int i = 0; i < 4; i++) {
        char c = (*p)[i];
        if (c != allowed[i][0] && c != allowed[i][1])
            return false;
        perms[i] = c;
    }
    *p += 4;
    return true;
}

int pfr_sym_maps_parse_line(const char *line, size_t len, struct pfr_sym_maps_line *out, char *err,
                            size_t errlen)
{
    const char *p = line, *end = line + len;
    uint64_t major, minor;
    const char *what = NULL;
    if (!pfr_sym_parse_hex(&p, end, &out->start) || !expect(&p, end, '-'))
        what = "start address";
    else if (!pfr_sym_parse_hex(&p, end, &out->end) || !expect(&p, end, ' '))
        what = "end address";
    else if (!parse_perms(&p, end, out->perms) || !expect(&p, end, ' '))
        what = "permissions";
    else if (!pfr_sym_parse_hex(&p, end, &out->pgoff) || !expect(&p, end, ' '))
        what = "offset";
    else if (!pfr_sym_parse_hex(&p, end, &major) || !expect(&p, end, ':') ||
             !pfr_sym_parse_hex(&p, end, &minor) || major > 0xfff || minor > 0xfffff)
        what = "device";
    else if (!expect(&p, end, ' ') || !parse_dec(&p, end, &out->ino))
        what = "inode";
    else if (out->start >= out->end)
        what = "empty range";
    if (what) {
        snprintf(err, errlen, "bad %s", what);
        return -EINVAL;
    }
    out->dev = makedev((unsigned)major, (unsigned)minor);
    if (p < end && *p != ' ') {
        snprintf(err, errlen, "bad inode");
        return -EINVAL;
    }
    while (p < end && *p == ' ')
        p++;
    out->path = p;
    out->path_len = (size_t)(end - p);
    return 0;
}

struct parse_ctx {
    struct pfr_sym_maps *out;
    uint64_t prev_end;
    char *err;
    size_t errlen;
};

static int add_map(struct pfr_sym_maps *m, const struct pfr_sym_maps_line *l)
{
    static const char deleted[] = " (deleted)";
    const size_t dlen = sizeof(deleted) - 1;
    if (m->n == PFR_MAPS_MAX_EXEC)
        return -E2BIG;
    if (m->n == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 32;
        struct pfr_sym_map *nv = realloc(m->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        m->v = nv;
        m->cap = ncap;
    }
    struct pfr_sym_map *e = &m->v[m->n];
    *e = (struct pfr_sym_map){
        .start = l->start, .end = l->end, .pgoff = l->pgoff, .dev = l->dev, .ino = l->ino};
    size_t plen = l->path_len;
    if (plen > dlen && memcmp(l->path + plen - dlen, deleted, dlen) == 0) {
        e->deleted = true;
        plen -= dlen;
    }
    if (plen == 0)
        e->kind = PFR_MAP_ANON;
    else if (plen == 6 && memcmp(l->path, "[vdso]", 6) == 0)
        e->kind = PFR_MAP_VDSO;
    else if (l->path[0] == '[')
        e->kind = PFR_MAP_SPECIAL;
    else
        e->kind = PFR_MAP_FILE;
    /* processes map the same library many times; share one copy of its path */
    e->path = pfr_sym_strpool_intern(&m->paths, l->path, plen);
    if (e->path == PFR_STR_NONE)
        return -ENOMEM;
    m->n++;
    return 0;
}

static int on_line(void *vctx, char *line, size_t len, size_t lineno)
{
    struct parse_ctx *c = vctx;
    struct pfr_sym_maps_line l;
    char why[64];
    int rc = pfr_sym_maps_parse_line(line, len, &l, why, sizeof(why));
    if (rc) {
        snprintf(c->err, c->errlen, "line %zu: %s", lineno, why);
        return rc;
    }
    if (l.start < c->prev_end) {
        snprintf(c->err, c->errlen, "line %zu: mappings out of order", lineno);
        return -EINVAL;
    }
    c->prev_end = l.end;
    if (l.perms[2] != 'x')
        return 0;
    rc = add_map(c->out, &l);
    if (rc == -E2BIG)
        snprintf(c->err, c->errlen, "more than %d executable mappings", PFR_MAPS_MAX_EXEC);
    return rc;
}

static const struct pfr_sym_line_limits maps_limits = {PFR_MAPS_MAX_LINE, PFR_MAPS_MAX_LINES};

static int finish(struct pfr_sym_maps *out, int rc)
{
    if (rc) {
        pfr_sym_maps_free(out);
        return rc;
    }
    pfr_sym_strpool_forget_interned(&out->paths);
    pfr_sym_strpool_shrink(&out->paths);
    if (out->n < out->cap) {
        struct pfr_sym_map *nv = realloc(out->v, (out->n ? out->n : 1) * sizeof(*nv));
        if (nv) {
            out->v = nv;
            out->cap = out->n ? out->n : 1;
        }
    }
    return 0;
}

int pfr_sym_maps_read(const char *path, struct pfr_sym_maps *out, char *err, size_t errlen)
{
    struct parse_ctx c = {out, 0, err, errlen};
    return finish(out, pfr_sym_lines_from_file(path, &maps_limits, on_line, &c, err, errlen));
}

int pfr_sym_maps_parse_mem(const char *data, size_t len, struct pfr_sym_maps *out, char *err,
                           size_t errlen)
{
    struct parse_ctx c = {out, 0, err, errlen};
    return finish(out, pfr_sym_lines_from_mem(data, len, &maps_limits, on_line, &c, err, errlen));
}

int pfr_sym_maps_from_lines(const struct pfr_sym_maps_line *v, size_t n, struct pfr_sym_maps *out,
                            char *err, size_t errlen)
{
    uint64_t prev_end = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (v[i].end <= v[i].start || v[i].start < prev_end) {
            snprintf(err, errlen, "mapping %zu: empty, or out of order", i);
            rc = -EINVAL;
        } else {
            prev_end = v[i].end;
            rc = add_map(out, &v[i]);
            if (rc)
                snprintf(err, errlen, "mapping %zu: %s", i, strerror(-rc));
        }
    }
    return finish(out, rc);
}

/* PROCMAP_QUERY (Linux 6.11): one VMA per ioctl, filtered by the kernel. Declared here because
 * the build machine's kernel headers may predate it; the layout is the kernel's UAPI. */
struct pfr_procmap_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define PFR_PROCMAP_QUERY               _IOWR('f', 17, struct pfr_procmap_query)
#define PFR_PROCMAP_QUERY_VMA_EXEC      0x04
#define PFR_PROCMAP_QUERY_COVER_OR_NEXT 0x10

int pfr_sym_maps_query(const char *path, struct pfr_sym_maps *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    char name[PATH_MAX + 16];
    uint64_t addr = 0;
    int rc = 0;
    for (;;) {
        struct pfr_procmap_query q = {
            .size = sizeof(q),
            .query_flags = PFR_PROCMAP_QUERY_COVER_OR_NEXT | PFR_PROCMAP_QUERY_VMA_EXEC,
            .query_addr = addr,
            .vma_name_addr = (uint64_t)(uintptr_t)name,
            .vma_name_size = sizeof(name),
        };
        if (ioctl(fd, PFR_PROCMAP_QUERY, &q) != 0) {
            if (errno != ENOENT) { /* ENOENT: no executable mapping past addr */
                rc = -errno;
                snprintf(err, errlen, "%s: PROCMAP_QUERY: %s", path, strerror(errno));
            }
            break;
        }
        if (q.vma_end <= q.vma_start || q.vma_start < addr) {
            snprintf(err, errlen, "%s: PROCMAP_QUERY went backwards", path);
            rc = -EINVAL;
            break;
        }
        struct pfr_sym_maps_line l = {
            .start = q.vma_start,
            .end = q.vma_end,
            .pgoff = q.vma_offset,
            .dev = makedev(q.dev_major, q.dev_minor),
            .ino = q.inode,
            .path = name,
            .path_len = q.vma_name_size ? strnlen(name, q.vma_name_size) : 0,
        };
        rc = add_map(out, &l);
        if (rc) {
            snprintf(err, errlen, "%s: %s", path,
                     rc == -E2BIG ? "too many executable mappings" : strerror(-rc));
            break;
        }
        addr = q.vma_end;
    }
    close(fd);
    return finish(out, rc);
}

const struct pfr_sym_map *pfr_sym_maps_find(const struct pfr_sym_maps *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m->n && m->v[lo].start <= addr)
        return &m->v[lo];
    return NULL;
}

size_t pfr_sym_maps_bytes(const struct pfr_sym_maps *m)
{
    return m->cap * sizeof(struct pfr_sym_map) + pfr_sym_strpool_bytes(&m->paths);
}

void pfr_sym_maps_free(struct pfr_sym_maps *m)
{
    free(m->v);
    pfr_sym_strpool_free(&m->paths);
    memset(m, 0, sizeof(*m));
}
