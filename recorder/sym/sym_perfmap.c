#include "sym_perfmap.h"
#include "pfr_fsguard.h"
#include "sym_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READ_CHUNK  (1u << 20)  /* lines are merged into the map once per chunk */
#define READ_BUDGET (16u << 20) /* per update: a huge backlog is read over several updates */
#define STATUS_MAX  8192

void pfr_sym_perfmap_init(struct pfr_sym_perfmap *m)
{
    memset(m, 0, sizeof(*m));
    m->fd = -1;
}

static void clear_entries(struct pfr_sym_perfmap *m)
{
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
    m->lines = 0;
    m->full = false;
    m->skipping = false;
}

void pfr_sym_perfmap_free(struct pfr_sym_perfmap *m)
{
    if (!m)
        return;
    clear_entries(m);
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    m->off = 0;
}

size_t pfr_sym_perfmap_bytes(const struct pfr_sym_perfmap *m)
{
    return m->cap * sizeof(*m->v);
}

/* ---- lines ---- */

/* A hex number ("0x" optional, at most 16 digits) followed by one space. */
static bool hex_field(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    if (end - s > 2 && s[0] == '0' && (s[1] | 0x20) == 'x')
        s += 2;
    if (!pfr_sym_parse_hex(&s, end, out) || s >= end || *s != ' ')
        return false;
    *p = s + 1;
    return true;
}

/* One line without its '\n': its range, and where its name starts and ends. false when
 * malformed. */
static bool parse_line(const char *s, size_t len, uint64_t *start, uint64_t *end, const char **name,
                       const char **name_end)
{
    const char *stop = s + len;
    if (len > 0 && stop[-1] == '\r')
        stop--;
    uint64_t size;
    if (!hex_field(&s, stop, start) || !hex_field(&s, stop, &size))
        return false;
    if (size == 0 || *start > UINT64_MAX - size || s >= stop)
        return false;
    for (const char *c = s; c < stop; c++)
        if ((unsigned char)*c < 0x20 && *c != '\t')
            return false; /* names end up in profiles and pages: no control characters */
    *end = *start + size;
    *name = s;
    *name_end = stop;
    return true;
}

/* ---- the set of live entries ---- */

static int by_start_newest(const void *a, const void *b)
{
    const struct pfr_perfmap_ent *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq;
}

/* Append e to the disjoint, sorted out[0..*w): the newer of overlapping entries stays. Entries
 * come in order of start, so those e overlaps are the last ones of out. */
static void push_newest(struct pfr_perfmap_ent *out, size_t *w, const struct pfr_perfmap_ent *e)
{
    while (*w > 0 && out[*w - 1].end > e->start) {
        if (out[*w - 1].seq > e->seq)
            return; /* e was overwritten */
        (*w)--;
    }
    out[(*w)++] = *e;
}

/* Merge the batch add[0..nadd) (lines newer than every entry) into m->v, in place: the old
 * entries move to the tail of the grown array and are merged to its front (no more written
 * than read: a write never passes the next old entry), so the peak is the entries, not twice
 * them. */
static int merge(struct pfr_sym_perfmap *m, struct pfr_perfmap_ent *add, size_t nadd)
{
    if (nadd == 0)
        return 0;
    qsort(add, nadd, sizeof(*add), by_start_newest);
    size_t n = m->n, total = n + nadd;
    if (total > m->cap) {
        struct pfr_perfmap_ent *nv = realloc(m->v, total * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        m->v = nv;
        m->cap = total;
    }
    struct pfr_perfmap_ent *v = m->v, *old = v + nadd;
    memmove(old, v, n * sizeof(*v));
    size_t i = 0, j = 0, w = 0;
    while (i < n || j < nadd) {
        bool take_old = j == nadd || (i < n && by_start_newest(&old[i], &add[j]) <= 0);
        push_newest(v, &w, take_old ? &old[i++] : &add[j++]);
    }
    m->n = w;
    if (w < m->cap / 2 && w > 0) { /* give back what overwritten entries held */
        struct pfr_perfmap_ent *small = realloc(v, w * sizeof(*v));
        if (small) {
            m->v = small;
            m->cap = w;
        }
    }
    return 0;
}

/* Room for one more entry after a batch of nbatch? (The merge allocates them all.) */
static bool room_for(const struct pfr_sym_perfmap *m, size_t nbatch, size_t max_bytes)
{
    return (m->n + nbatch + 1) * sizeof(*m->v) <= max_bytes;
}

int pfr_sym_perfmap_feed(struct pfr_sym_perfmap *m, const char *data, size_t len, uint64_t at,
                         size_t max_bytes, size_t *used)
{
    *used = 0;
    if (m->full)
        return 0;
    struct pfr_perfmap_ent *batch = NULL;
    size_t nbatch = 0, cbatch = 0, i = 0;
    int rc = 0;
    while (i < len) {
        const char *line = data + i, *nl = memchr(line, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - line) : len - i;
        if (!nl) { /* unfinished: wait for its end, unless it is already too long */
            if (!m->skipping && ll >= PFR_PERFMAP_MAX_LINE) {
                m->bad_lines++;
                m->skipping = true;
            }
            if (m->skipping)
                i = len;
            break;
        }
        if (m->skipping) {
            m->skipping = false;
        } else if (ll >= PFR_PERFMAP_MAX_LINE) {
            m->bad_lines++;
        } else {
            if (!room_for(m, nbatch, max_bytes)) {
                m->full = true;
                break;
            }
            if (nbatch == cbatch) {
                size_t nc = cbatch ? cbatch * 2 : 256;
                struct pfr_perfmap_ent *nb = realloc(batch, nc * sizeof(*nb));
                if (!nb) {
                    rc = -ENOMEM;
                    break;
                }
                batch = nb;
                cbatch = nc;
            }
            uint64_t start, end;
            const char *name, *name_end;
            if (parse_line(line, ll, &start, &end, &name, &name_end)) {
                batch[nbatch++] = (struct pfr_perfmap_ent){.start = start,
                                                           .end = end,
                                                           .line = at + i,
                                                           .len = (uint32_t)ll,
                                                           .seq = m->lines};
            } else {
                m->bad_lines++;
            }
            m->lines++;
        }
        i += ll + 1;
    }
    if (rc == 0)
        rc = merge(m, batch, nbatch);
    free(batch);
    if (rc == 0)
        *used = i;
    return rc;
}

const struct pfr_perfmap_ent *pfr_sym_perfmap_find(const struct pfr_sym_perfmap *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) { /* first entry starting after addr */
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || addr >= m->v[lo - 1].end)
        return NULL;
    return &m->v[lo - 1];
}

const char *pfr_sym_perfmap_name(struct pfr_sym_perfmap *m, const struct pfr_perfmap_ent *e)
{
    if (m->fd < 0 || e->len > PFR_PERFMAP_MAX_LINE)
        return NULL;
    ssize_t n = pread(m->fd, m->name, e->len, (off_t)e->line);
    uint64_t start, end;
    const char *name, *name_end;
    if (n != (ssize_t)e->len || !parse_line(m->name, e->len, &start, &end, &name, &name_end) ||
        start != e->start || end != e->end)
        return NULL; /* rewritten since it was read */
    m->name[name_end - m->name] = '\0';
    return name;
}

/* ---- the file ---- */

/* The process's effective uid and its pid in its own namespace, from /proc/PID/status. */
static int read_status(const char *proc_root, pid_t pid, uid_t *euid, long *nspid, char *err,
                       size_t errlen)
{
    char path[256], buf[STATUS_MAX];
    snprintf(path, sizeof(path), "%s/%d/status", proc_root, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return n == 0 ? -ESRCH : -errno;
    buf[n] = '\0';
    bool have_uid = false;
    *nspid = pid; /* kernels before 4.1 have no NSpid line: no pid namespaces to mind */
    for (char *line = buf; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        unsigned long real, eff;
        if (sscanf(line, "Uid:\t%lu\t%lu", &real, &eff) == 2) {
            *euid = (uid_t)eff;
            have_uid = true;
        } else if (!strncmp(line, "NSpid:", 6)) {
            char *end = strchr(line, '\n'), *last = NULL;
            for (char *c = line + 6; c < (end ? end : line + strlen(line)); c++)
                if ((*c == '\t' || *c == ' ') && c[1] >= '0' && c[1] <= '9')
                    last = c + 1;
            if (!last || (*nspid = strtol(last, NULL, 10)) <= 0) {
                snprintf(err, errlen, "%s: bad NSpid line", path);
                return -EINVAL;
            }
        }
    }
    if (!have_uid) {
        snprintf(err, errlen, "%s: no Uid line", path);
        return -EINVAL;
    }
    return 0;
}

int pfr_sym_perfmap_open(struct pfr_sym_perfmap *m, const char *proc_root, pid_t pid, char *err,
                         size_t errlen)
{
    return pfr_sym_perfmap_open_guarded(m, proc_root, pid, NULL, err, errlen);
}

int pfr_sym_perfmap_open_guarded(struct pfr_sym_perfmap *m, const char *proc_root, pid_t pid,
                                 struct pfr_fsguard *guard, char *err, size_t errlen)
{
    uid_t euid = 0;
    long nspid = 0;
    int rc = read_status(proc_root, pid, &euid, &nspid, err, errlen);
    if (rc)
        return rc;
    char path[256];
    snprintf(path, sizeof(path), "%s/%d/root", proc_root, (int)pid);
    int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    char name[64];
    snprintf(name, sizeof(name), "tmp/perf-%ld.map", nspid);
    /* resolved as if root were "/": the process's symlinks cannot lead to the host's files;
     * with a guard, only on a local file system, never crossing into another mount */
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    char abs[80];
    snprintf(abs, sizeof(abs), "/%s", name);
    int fd = guard ? pfr_fsguard_open_local(guard, pid, root, abs, (int)how.flags)
                   : (int)syscall(SYS_openat2, root, name, &how, sizeof(how));
    rc = fd < 0 ? (guard ? fd : -errno) : 0;
    close(root);
    if (rc) {
        if (rc != -ENOENT)
            snprintf(err, errlen, "%s/%s: %s", path, name, strerror(-rc));
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != euid)) {
        snprintf(err, errlen, "%s/%s: not a regular file owned by root or uid %lu", path, name,
                 (unsigned long)euid);
        close(fd);
        return -EPERM;
    }
    pfr_sym_perfmap_free(m);
    m->fd = fd;
    return 0;
}

int pfr_sym_perfmap_update(struct pfr_sym_perfmap *m, size_t max_bytes, char *err, size_t errlen)
{
    if (m->fd < 0)
        return -EBADF;
    struct stat st;
    if (fstat(m->fd, &st) != 0)
        return -errno;
    if ((uint64_t)st.st_size < m->off) { /* truncated and written again: start over */
        clear_entries(m);
        m->off = 0;
    }
    char *buf = malloc(READ_CHUNK);
    if (!buf)
        return -ENOMEM;
    int rc = 0;
    size_t have = 0, budget = READ_BUDGET; /* have: an unfinished line carried to the front */
    while (!m->full && budget > 0) {
        ssize_t n = pread(m->fd, buf + have, READ_CHUNK - have, (off_t)(m->off + have));
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "perf map: %s", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        size_t len = have + (size_t)n, used;
        rc = pfr_sym_perfmap_feed(m, buf, len, m->off, max_bytes, &used);
        if (rc)
            break;
        m->off += used;
        have = len - used;
        memmove(buf, buf + used, have);
        budget = (size_t)n < budget ? budget - (size_t)n : 0;
    }
    free(buf);
    return rc;
}
