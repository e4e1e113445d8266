/* pfr_fsguard: which file systems a thread with a deadline may touch (see pfr_fsguard.h). The
 * copy worker is fsguard_copy.c. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsguard_internal.h"
#include "pfr_clock.h"

#define CACHE_TTL_NS     (10 * 1000000000LL) /* anonymous device numbers are reused */
#define CACHE_MAX        4096                /* devices remembered before the cache restarts */
#define MOUNTINFO_LINES  100000              /* fs.mount-max's default: a table past it is bad */
#define DEFAULT_TIMEOUT  (2 * 1000000000LL)
#define DEFAULT_AVOID    (600 * 1000000000LL)
#define DEFAULT_MAX_COPY (32u << 20)
#define DEFAULT_STUCK    4
#define DEFAULT_KEEP     (600 * 1000000000LL) /* longer than any caller's round */
#define DEFAULT_SHARED   (10 * 1000000000LL)  /* the callers after the first: one interval */

/* Types whose operations wait for a server (a daemon, a network peer or a hypervisor). */
static const char *const remote_types[] = {
    "fuse",  "fuseblk",   "nfs",    "nfs4",     "cifs",   "smb3",  "smbfs", "9p",
    "ceph",  "glusterfs", "afs",    "ncpfs",    "lustre", "gpfs",  "coda",  "virtiofs",
    "ocfs2", "gfs2",      "beegfs", "orangefs", "pvfs2",  "davfs", NULL,
};

bool pfr_fsguard_remote_type(const char *fstype)
{
    if (!strncmp(fstype, "fuse.", 5)) /* fuse.sshfs, fuse.s3fs, ... */
        return true;
    for (const char *const *t = remote_types; *t; t++)
        if (!strcmp(fstype, *t))
            return true;
    return false;
}

/* ---- mountinfo ---- */

/* The next space-separated field of [*p, end), or NULL. */
static const char *field(const char **p, const char *end, size_t *len)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    if (s >= end)
        return NULL;
    const char *e = memchr(s, ' ', (size_t)(end - s));
    if (!e)
        e = end;
    *len = (size_t)(e - s);
    *p = e;
    return s;
}

/* Mount points escape space, tab, newline and backslash as \ooo. */
static int unescape(const char *s, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
            s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
            c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        }
        if (c == '\0')
            return -EINVAL;
        if (o + 1 >= outlen)
            return -ENAMETOOLONG;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

int pfr_fsguard_parse_mountinfo_line(const char *line, size_t len, uint64_t *dev, char *mnt,
                                     size_t mntlen, char *fstype, size_t fstypelen)
{
    const char *p = line, *end = line + len, *f[5];
    size_t fl[5];
    if (memchr(line, '\0', len)) /* the kernel's lines have none */
        return -EINVAL;
    while (end > p && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    for (int i = 0; i < 5; i++)
        if (!(f[i] = field(&p, end, &fl[i])))
            return -EINVAL;
    /* f[2] is major:minor, f[4] the mount point */
    char num[32];
    if (fl[2] >= sizeof(num))
        return -EINVAL;
    memcpy(num, f[2], fl[2]);
    num[fl[2]] = '\0';
    unsigned maj, min;
    char extra;
    if (sscanf(num, "%u:%u%c", &maj, &min, &extra) != 2)
        return -EINVAL;
    /* optional fields, up to the lone "-" */
    const char *s;
    size_t sl;
    while ((s = field(&p, end, &sl)) && !(sl == 1 && *s == '-'))
        ;
    if (!s || !(s = field(&p, end, &sl)) || sl == 0 || sl >= fstypelen)
        return -EINVAL;
    memcpy(fstype, s, sl);
    fstype[sl] = '\0';
    if (unescape(f[4], fl[4], mnt, mntlen) || mnt[0] != '/')
        return -EINVAL;
    *dev = (uint64_t)makedev(maj, min);
    return 0;
}

/* Calls fn for each well-formed line of pid's mount table (0: the recorder's own), until it
 * returns non-zero. Malformed lines are skipped. @return 0 or -errno of the open. */
static int each_mount(pfr_fsguard *g, pid_t pid,
                      int (*fn)(void *ctx, uint64_t dev, const char *mnt, const char *fstype),
                      void *ctx)
{
    char path[sizeof(g->proc_root) + 32];
    if (pid > 0)
        snprintf(path, sizeof(path), "%s/%d/mountinfo", g->proc_root, (int)pid);
    else
        snprintf(path, sizeof(path), "%s/self/mountinfo", g->proc_root);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char *line = NULL, mnt[4096], fstype[64];
    size_t cap = 0;
    ssize_t n;
    unsigned lines = 0;
    while ((n = getline(&line, &cap, f)) > 0 && lines++ < MOUNTINFO_LINES) {
        uint64_t dev;
        if (pfr_fsguard_parse_mountinfo_line(line, (size_t)n, &dev, mnt, sizeof(mnt), fstype,
                                             sizeof(fstype)))
            continue;
        if (fn(ctx, dev, mnt, fstype))
            break;
    }
    free(line);
    fclose(f);
    pthread_mutex_lock(&g->lock);
    g->st.mountinfo_reads++;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

/* ---- the device cache ---- */

static uint64_t cache_val(enum pfr_fs_kind kind, int64_t now)
{
    return (uint64_t)((now + CACHE_TTL_NS) / 1000000) << 2 | (uint64_t)kind;
}

static void cache_put_locked(pfr_fsguard *g, uint64_t dev, enum pfr_fs_kind kind, int64_t now)
{
    if (g->cache.n >= CACHE_MAX)
        pfr_map_clear(&g->cache);
    pfr_map_put(&g->cache, dev, cache_val(kind, now)); /* out of memory: looked up again */
}

struct learn_ctx {
    pfr_fsguard *g;
    uint64_t want;
    int found; /* -1: not seen, else its kind */
    int64_t now;
};

static int learn(void *arg, uint64_t dev, const char *mnt, const char *fstype)
{
    (void)mnt;
    struct learn_ctx *c = arg;
    enum pfr_fs_kind k = pfr_fsguard_remote_type(fstype) ? PFR_FS_REMOTE : PFR_FS_LOCAL;
    pthread_mutex_lock(&c->g->lock);
    cache_put_locked(c->g, dev, k, c->now);
    pthread_mutex_unlock(&c->g->lock);
    if (dev == c->want)
        c->found = (int)k;
    return 0;
}

static int cached_kind(pfr_fsguard *g, uint64_t dev, int64_t now)
{
    pthread_mutex_lock(&g->lock);
    g->st.lookups++;
    int k = PFR_FS_LOCAL; /* the memory file system (memfd_dev): an entry that never expires */
    if (dev == 0 || dev != g->memfd_dev) {
        uint64_t *v = pfr_map_get(&g->cache, dev);
        k = v && (int64_t)(*v >> 2) * 1000000 > now ? (int)(*v & 3) : -1;
    }
    g->st.remote_lookups += k > 0;
    pthread_mutex_unlock(&g->lock);
    return k;
}

/* The device of the kernel's internal memory file system, which every memfd (and SysV shared
 * memory) lives on: no mount table names it, yet no server answers for it. Programs run from a
 * memfd (runc's copy of itself, sandboxes' sealed binaries) would otherwise each cost a copy
 * worker, a fork of the whole recorder. 0 when it cannot be told. */
static uint64_t memfd_dev(void)
{
    int fd = memfd_create("pfr-fsguard-probe", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    uint64_t dev = fstat(fd, &st) == 0 ? (uint64_t)st.st_dev : 0;
    close(fd);
    return dev;
}

enum pfr_fs_kind pfr_fsguard_kind(pfr_fsguard *g, pid_t pid, uint64_t dev)
{
    int64_t now = pfr_clock_mono_ns();
    int k = cached_kind(g, dev, now);
    if (k >= 0)
        return (enum pfr_fs_kind)k;
    struct learn_ctx c = {.g = g, .want = dev, .found = -1, .now = now};
    if (pid > 0)
        each_mount(g, pid, learn, &c);
    if (c.found < 0)
        each_mount(g, 0, learn, &c);
    enum pfr_fs_kind kind = c.found < 0 ? PFR_FS_UNKNOWN : (enum pfr_fs_kind)c.found;
    pthread_mutex_lock(&g->lock);
    if (c.found < 0)
        cache_put_locked(g, dev, kind, now);
    g->st.remote_lookups += kind != PFR_FS_LOCAL;
    pthread_mutex_unlock(&g->lock);
    return kind;
}

bool pfr_fsguard_local(pfr_fsguard *g, pid_t pid, uint64_t dev)
{
    return pfr_fsguard_kind(g, pid, dev) == PFR_FS_LOCAL;
}

/* ---- paths ---- */

struct prefix_ctx {
    const char *path;
    bool found;
    size_t best_len; /* the longest mount point that is a prefix ("/": 0) */
    uint64_t best_dev;
    bool best_remote;
    size_t min_remote_len; /* the shortest remote mount point that is a prefix */
    char best_mnt[4096];
};

static bool is_prefix(const char *mnt, const char *path, size_t *len)
{
    size_t n = strlen(mnt);
    if (n == 1) { /* "/" */
        *len = 0;
        return true;
    }
    if (strncmp(mnt, path, n) || (path[n] != '/' && path[n] != '\0'))
        return false;
    *len = n;
    return true;
}

static int longest(void *arg, uint64_t dev, const char *mnt, const char *fstype)
{
    struct prefix_ctx *c = arg;
    size_t n;
    if (!is_prefix(mnt, c->path, &n))
        return 0;
    bool remote = pfr_fsguard_remote_type(fstype);
    if (remote && n < c->min_remote_len)
        c->min_remote_len = n;
    if (c->found && n < c->best_len)
        return 0;
    /* later lines mount over earlier ones at the same point */
    c->found = true;
    c->best_len = n;
    c->best_dev = dev;
    c->best_remote = remote;
    snprintf(c->best_mnt, sizeof(c->best_mnt), "%s", mnt);
    return 0;
}

enum pfr_fs_kind pfr_fsguard_path_kind(pfr_fsguard *g, pid_t pid, const char *path, uint64_t *dev)
{
    return pfr_fsguard_path_mount(g, pid, path, dev, NULL, 0);
}

enum pfr_fs_kind pfr_fsguard_path_mount(pfr_fsguard *g, pid_t pid, const char *path, uint64_t *dev,
                                        char *mnt, size_t mntlen)
{
    struct prefix_ctx *c = calloc(1, sizeof(*c));
    if (!c || path[0] != '/') {
        free(c);
        return PFR_FS_UNKNOWN;
    }
    c->path = path;
    c->min_remote_len = SIZE_MAX;
    enum pfr_fs_kind kind = PFR_FS_UNKNOWN;
    if (each_mount(g, pid, longest, c) == 0 && c->found) {
        /* a remote mount above it would be asked on the walk down to it (one mounted over at
         * the same point is not: the walk goes straight to the top one) */
        bool remote = c->best_remote || c->min_remote_len < c->best_len;
        kind = remote ? PFR_FS_REMOTE : PFR_FS_LOCAL;
        if (dev)
            *dev = c->best_dev;
        if (mnt)
            snprintf(mnt, mntlen, "%s", c->best_mnt);
    }
    free(c);
    return kind;
}

int pfr_fsguard_open_local(pfr_fsguard *g, pid_t pid, int root_fd, const char *path, int flags)
{
    char mnt[4096];
    uint64_t dev = 0;
    if (pfr_fsguard_path_mount(g, pid, path, &dev, mnt, sizeof(mnt)) != PFR_FS_LOCAL)
        return -EREMOTE;
    /* up to its mount point through local mounts only; from there without leaving it */
    struct open_how to_mnt = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                              .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS};
    const char *rel_mnt = mnt[1] ? mnt + 1 : ".";
    int mfd = (int)syscall(SYS_openat2, root_fd, rel_mnt, &to_mnt, sizeof(to_mnt));
    if (mfd < 0)
        return -errno;
    const char *rest = path + (mnt[1] ? strlen(mnt) : 0);
    while (*rest == '/')
        rest++;
    struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, mfd, *rest ? rest : ".", &how, sizeof(how));
    int rc = fd < 0 ? -errno : fd;
    close(mfd);
    if (rc == -EXDEV)
        return -EREMOTE; /* it crossed into another mount: judged by its text, it was not */
    return rc;
}

int pfr_fsguard_stat_cached(int dirfd, const char *path, struct stat *st)
{
    struct statx sx;
    if (statx(dirfd, path, AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx) != 0)
        return -errno;
    memset(st, 0, sizeof(*st));
    st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
    st->st_ino = sx.stx_ino;
    st->st_mode = sx.stx_mode;
    st->st_nlink = sx.stx_nlink;
    st->st_uid = sx.stx_uid;
    st->st_gid = sx.stx_gid;
    st->st_size = (off_t)sx.stx_size;
    st->st_blocks = (blkcnt_t)sx.stx_blocks;
    st->st_atim = (struct timespec){sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec};
    st->st_mtim = (struct timespec){sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec};
    st->st_ctim = (struct timespec){sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec};
    return 0;
}

/* ---- the handle ---- */

int pfr_fsguard_new(const pfr_fsguard_opts *opts, pfr_fsguard **out)
{
    pfr_fsguard_opts o = opts ? *opts : (pfr_fsguard_opts){0};
    if (o.remote != PFR_FSGUARD_REMOTE_COPY && o.remote != PFR_FSGUARD_REMOTE_SKIP)
        return -EINVAL;
    pfr_fsguard *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    snprintf(g->proc_root, sizeof(g->proc_root), "%s", o.proc_root ? o.proc_root : "/proc");
    snprintf(g->copy_dir, sizeof(g->copy_dir), "%s", o.copy_dir ? o.copy_dir : "");
    if (o.copy_keep)
        g->keep = *o.copy_keep;
    g->remote = o.remote;
    g->timeout_ns = o.timeout_ns > 0 ? o.timeout_ns : DEFAULT_TIMEOUT;
    g->avoid_ns = o.avoid_ns > 0 ? o.avoid_ns : DEFAULT_AVOID;
    g->keep_ns = o.keep_ns > 0 ? o.keep_ns : DEFAULT_KEEP;
    g->shared_ns = g->keep_ns < DEFAULT_SHARED ? g->keep_ns : DEFAULT_SHARED;
    g->max_copy = o.max_copy_bytes ? o.max_copy_bytes : DEFAULT_MAX_COPY;
    g->max_stuck = o.max_stuck ? o.max_stuck : DEFAULT_STUCK;
    g->memfd_dev = memfd_dev();
    pthread_mutex_init(&g->lock, NULL);
    *out = g;
    return 0;
}

void pfr_fsguard_free(pfr_fsguard *g)
{
    if (!g)
        return;
    pfr_fsguard_jobs_free(g);
    pfr_map_free(&g->cache);
    pfr_map_free(&g->avoided);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void pfr_fsguard_avoid(pfr_fsguard *g, uint64_t dev)
{
    pthread_mutex_lock(&g->lock);
    pfr_map_put(&g->avoided, dev, (uint64_t)(pfr_clock_mono_ns() + g->avoid_ns));
    pthread_mutex_unlock(&g->lock);
}

bool pfr_fsguard_avoided_locked(pfr_fsguard *g, uint64_t dev, int64_t now)
{
    uint64_t *until = pfr_map_get(&g->avoided, dev);
    if (!until)
        return false;
    if ((int64_t)*until > now)
        return true;
    pfr_map_del(&g->avoided, dev);
    return false;
}

void pfr_fsguard_stats_get(pfr_fsguard *g, pfr_fsguard_stats *st)
{
    pfr_fsguard_sweep(g);
    pthread_mutex_lock(&g->lock);
    *st = g->st;
    pthread_mutex_unlock(&g->lock);
}
