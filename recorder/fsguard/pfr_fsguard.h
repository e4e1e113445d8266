/*
 * pfr_fsguard: knows, before a file of another process is opened, whether it lies on a file
 * system whose server can stop answering (FUSE, NFS, CIFS, 9p, Ceph, ...: "remote"), where an
 * open, a stat or a read can block in the kernel for as long as that server likes. Any local
 * user can mount one (FUSE, in a user namespace of their own) and map a file from it.
 *
 * The recorder's threads with deadlines (the collectors, the unwind table builder) open only
 * files the guard calls local. A remote file is read, if the policy allows, by a worker of its
 * own with a deadline (pfr_fsguard_copy), which nobody waits for: a child process (a thread
 * blocked in a FUSE request cannot be killed, and would keep the recorder from exiting) copies
 * the file to an unlinked temporary file (or memory), and the caller parses the copy at a
 * later call. A worker still blocked at its deadline is abandoned (counted; it is reaped
 * whenever the server answers), and its file system is avoided for a while.
 *
 * A file system is known by its device number (st_dev; the field /proc/PID/maps and
 * mountinfo give), looked up in /proc/PID/mountinfo of a process that maps it (mounts differ
 * between mount namespaces) and cached for a short time (anonymous device numbers are reused
 * after an unmount). A device no mount table names is handled as remote.
 *
 * Thread-safe. Constructor pfr_fsguard_new, destructor pfr_fsguard_free (workers still blocked
 * are killed if they can be, else left behind). Functions return 0 or a negative errno; none
 * prints.
 */
#ifndef PFR_FSGUARD_H
#define PFR_FSGUARD_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct pfr_fsguard pfr_fsguard;

enum pfr_fs_kind {
    PFR_FS_LOCAL = 0, /* a disk or memory file system: opened directly */
    PFR_FS_REMOTE,    /* a server answers for it: only a copy worker touches it */
    PFR_FS_UNKNOWN,   /* no mount table names the device: handled as remote */
};

enum pfr_fsguard_remote {
    PFR_FSGUARD_REMOTE_COPY = 0, /* copied by a worker with a deadline (the default) */
    PFR_FSGUARD_REMOTE_SKIP,     /* never touched: their frames stay unnamed */
};

struct pfr_disk_keep;

typedef struct pfr_fsguard_opts {
    const char *proc_root; /* NULL = "/proc" */
    enum pfr_fsguard_remote remote;
    int64_t timeout_ns;    /* a copy's deadline; 0 = 2 s */
    int64_t avoid_ns;      /* a file system whose worker was abandoned is avoided this
                              long; 0 = 10 min */
    size_t max_copy_bytes; /* a larger remote file is not copied; 0 = 32 MiB */
    const char *copy_dir;  /* where copies live (unlinked, O_TMPFILE); NULL or "" or a
                              directory that refuses: anonymous memory (memfd) */
    /* The free space a copy in copy_dir leaves to the ring (pfr_disk_keep.h; copied; NULL:
     * the floor only): a copy that could take it (up to max_copy_bytes) is not made (no_room). */
    const struct pfr_disk_keep *copy_keep;
    unsigned max_stuck; /* workers left blocked at once before copies stop; 0 = 4 */
    int64_t keep_ns;    /* a finished copy nobody has taken is kept this long in copy_dir, so
                           that a caller asking once a minute (pprof discovery, the Go heap
                           profiler) finds it at its next round; 0 = 10 min (one in memory: 10 s
                           or keep_ns, the shorter) */
} pfr_fsguard_opts;

typedef struct pfr_fsguard_stats {
    uint64_t lookups;         /* devices classified (cache hits included) */
    uint64_t mountinfo_reads; /* mount tables read */
    uint64_t remote_lookups;  /* of lookups, those that answered remote or unknown */
    uint64_t refused_skip;    /* remote files not touched: policy skip */
    uint64_t refused_avoided; /* not touched: their file system is avoided, or too many
                                 workers are stuck */
    uint64_t refused_too_big; /* remote files over max_copy_bytes */
    uint64_t refused_no_room; /* not copied: the copy could take the free space the ring keeps */
    uint64_t copies;          /* remote files copied */
    uint64_t copy_bytes;      /* bytes copied */
    uint64_t copy_errors;     /* copies that failed (gone, replaced, read errors) */
    uint64_t abandoned;       /* workers abandoned at their deadline */
    uint64_t stuck_now;       /* of those, still blocked */
} pfr_fsguard_stats;

/* @return 0, -EINVAL (bad options) or -ENOMEM. */
int pfr_fsguard_new(const pfr_fsguard_opts *opts, pfr_fsguard **out);
void pfr_fsguard_free(pfr_fsguard *g);

/* The kind of the file system of device dev (st_dev form), as process pid mounts it (pid 0:
 * the recorder's own mount table only). */
enum pfr_fs_kind pfr_fsguard_kind(pfr_fsguard *g, pid_t pid, uint64_t dev);

/* Whether a thread with a deadline may open (stat, read) a file on dev mapped by pid: a local
 * file system. */
bool pfr_fsguard_local(pfr_fsguard *g, pid_t pid, uint64_t dev);

/* The kind of the file system path (absolute, as pid sees it) would be opened on, from the
 * longest mount point of pid's mount table that is a prefix of it; *dev gets its device. Paths
 * with symbolic links are judged by their text: open them with pfr_fsguard_open_local. */
enum pfr_fs_kind pfr_fsguard_path_kind(pfr_fsguard *g, pid_t pid, const char *path, uint64_t *dev);

/* Open path (absolute, in pid's view) under root_fd (an O_PATH descriptor of /proc/PID/root)
 * only if it lies, without crossing a mount or following a symbolic link past its mount
 * point, on a local file system: openat2 with RESOLVE_NO_XDEV from its mount point.
 * @return a descriptor (flags as open), -EREMOTE when the file system is not local, or
 * -errno. */
int pfr_fsguard_open_local(pfr_fsguard *g, pid_t pid, int root_fd, const char *path, int flags);

/* A copy of the remote file at path (a /proc/PID/map_files link or a path under
 * /proc/PID/root), made by a worker with the guard's deadline. Nobody waits: the first call
 * starts the worker and returns -EINPROGRESS; a later call for the same dev:ino takes the
 * result (a finished copy waits for its first taker up to keep_ns, then stays a few seconds
 * for the other callers). The file must be a regular file with device dev and inode ino (0:
 * any) and at most max_copy_bytes. A worker still blocked at its deadline is abandoned at the
 * next call (or statistics) and its file system avoided. @return a read-only descriptor of the
 * copy (the caller's), or -EINPROGRESS (ask again later), -EREMOTE (policy skip), -EAGAIN
 * (avoided, too many workers stuck or in flight), -EFBIG, -ESTALE (not that file), -errno of
 * open/read. */
int pfr_fsguard_copy(pfr_fsguard *g, const char *path, uint64_t dev, uint64_t ino);

/* Whether a result of pfr_fsguard_copy stands for that file for good (over max_copy_bytes, or a
 * policy that skips remote files): a caller that remembers verdicts by file remembers this one
 * rather than asking again (a worker each time, for -EFBIG). */
static inline bool pfr_fsguard_copy_final(int rc)
{
    return rc == -EFBIG || rc == -EREMOTE;
}

/* Mark dev's file system as avoided for the guard's avoid time (e.g. a read past a deadline). */
void pfr_fsguard_avoid(pfr_fsguard *g, uint64_t dev);

void pfr_fsguard_stats_get(pfr_fsguard *g, pfr_fsguard_stats *st);

/* stat() of a path (relative to dirfd) that never asks a remote file system's server: cached
 * attributes (statx AT_STATX_DONT_SYNC), so a hung server cannot block it. 0 or -errno. */
int pfr_fsguard_stat_cached(int dirfd, const char *path, struct stat *st);

/* ---- the mount table, exposed for tests and the fuzzer ---- */

/* One line of /proc/PID/mountinfo (no newline needed): the device (st_dev form), the mount
 * point (octal escapes decoded into mnt, NUL-terminated) and the file system type. @return 0
 * or -EINVAL for a malformed line. */
int pfr_fsguard_parse_mountinfo_line(const char *line, size_t len, uint64_t *dev, char *mnt,
                                     size_t mntlen, char *fstype, size_t fstypelen);
/* Whether a file system type is one a server answers for. */
bool pfr_fsguard_remote_type(const char *fstype);

#endif
