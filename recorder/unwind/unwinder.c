/* unwinder: builds unwind tables off the sampling path and keeps them in the sampler's maps. */
#include "unwinder.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include <bpf/bpf.h>

#include "pfr_fsguard.h"
#include "pfr_membudget.h"
#include "pfr_vec.h"
#include "sym_maps.h"
#include "unwind_index.h"
#include "unwind_table.h"
#include "pfr_clock.h"
#include "pfr_disk_keep.h"

#ifndef ENOTSUPP
#define ENOTSUPP 524 /* the kernel's own "operation not supported" */
#endif

/* Requests waiting for the thread; past this they are dropped and asked again by the sampler.
 * The smallest mapping is served first: a program's own table (milliseconds) must not wait for
 * a burst of huge libraries (libLLVM: seconds each), nor for one already being built (a small
 * file's is built while the large build pauses: serve_small()). */
#define QUEUE_MAX 512
/* How deep builds pause one inside another: a large build, a small one in its pause, and a tiny
 * one in that one's (a new program's table behind libc's, built while libLLVM's pauses). */
#define MAX_DEPTH 2
/* Rows written to the array map per syscall, or per window of it mapped (64 KiB). */
#define WRITE_BATCH 8192
/* After evicting, wait this long before the rows are written over: a sample that looked the
 * file up just before it went is still reading them (a sample's walk takes microseconds). */
#define EVICT_GRACE_NS (10 * 1000000l)
/* Only tables the sampler has not used for this long (in its last_used units, 2^30 ns) are
 * evicted: tables in use are never traded for one another, which would rebuild them in turn. */
#define IDLE_UNITS 2
/* A table the cache on disk holds comes back in a read (a millisecond for 50k rows); one it does
 * not must be built again (libbpf's, libz's: built again after each eviction on a busy host).
 * So an idle table kept on disk counts as idle for this much longer when a victim is chosen
 * (about a minute): it goes before the tables only a build brings back, unless they have been
 * idle a minute longer (a one-off program's, likely never used again). */
#define ON_DISK_UNITS 64
/* A file refused for want of room (every table in use) gets 0 rows for this long by default,
 * then it is dropped and asked for again. */
#define NO_ROOM_RETRY_MS 30000
/* A file that could not be opened (its process gone: most processes on a host starting many
 * are short-lived) is asked for again after this long, not by the next process mapping it: a
 * request per new process would cost a wake-up and a failed open each. */
#define RETRY_FAILED_NS (1000 * 1000000ll)
#define FAILED_MAX      1024
/* Files remembered as needing more room than the memory budget gave their last build: built
 * again only once the room is there, not every time they are asked for (a second later). */
#define SHORT_MAX 64
/* Files smaller than this have no table worth keeping on disk (PFR_UNWIND_CACHE_MIN_ROWS rows
 * take ~1k FDEs, 30 KB of .eh_frame): their key is not even read. */
#define CACHE_MIN_FILE (64u << 10)
/* Rows of a table past which its build's memory is handed back to the system at once. */
#define TRIM_AFTER_ROWS (64 * 1024)

struct extent {
    uint32_t start, len;
};

/* A request in the queue. */
struct queued {
    struct pfr_unwind_req r;
    int64_t asked_ns; /* when the sampler asked (CLOCK_MONOTONIC) */
    bool small;       /* its mapping is small: may be built while a large build pauses */
    bool deferred;    /* it was tried so and did not fit: it waits its turn */
};

struct loaded {
    struct pfr_file_key key;
    uint32_t first, nrows; /* its extent in unwind_rows: nindex index entries, then nrows rows */
    uint32_t nindex;
    int64_t retry_ns;   /* a "no room" entry: dropped at this time (0: kept) */
    uint32_t last_used; /* the sampler's, as read_last_used() last saw it */
    bool on_disk;       /* the cache on disk holds its table (read from it, or written; a file
                         * its bound dropped since is built again, as before) */
};

struct pfr_unwinder {
    pfr_unwinder_opts opts;
    char proc[64];
    struct pfr_fsguard *fsguard; /* NULL: files opened directly */
    int rows_fd, files_fd, asked_fd;
    bool rows_mmapable; /* unwind_rows made with BPF_F_MMAPABLE: rows written by copy */
    size_t page;        /* the windows of unwind_rows are mapped at page boundaries */
    int64_t retry_ns;   /* of a "no room" entry */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;             /* guards the queue, stop, handled and st */
    pthread_cond_t cv;              /* queue not empty, or stop */
    pthread_cond_t done;            /* handled moved */
    struct queued queue[QUEUE_MAX]; /* unordered */
    size_t qlen;
    uint64_t queued, handled;
    bool stop;
    atomic_bool cancel;        /* stop, for the build under way */
    atomic_uint small_due;     /* queued small files not deferred: a build pauses for them */
    atomic_ullong small_asked; /* such files queued so far (a pause with none new looks no more) */
    pfr_unwinder_stats st;
    /* thread only: */
    uint64_t held_cost;  /* the memory budget's cost of the builds under way (paused or not) */
    uint64_t build_map;  /* the mapping size of the innermost build under way; UINT64_MAX: a
                          * large one (it pauses for any small file) */
    int depth;           /* builds under way, one inside another's pause */
    uint64_t looked_at;  /* small_asked when a pause last found no file small enough for the
                          * build under way (UINT64_MAX: not since that build began or ended) */
    int64_t paused_ns;   /* time large builds spent paused, added up */
    struct extent *free; /* free row extents, by start, never adjacent */
    size_t nfree, capfree;
    struct loaded *files; /* files with an entry in unwind_files */
    size_t nfiles, capfiles;
    uint64_t rows_used;
    struct failed {
        struct pfr_file_key key;
        int64_t retry_ns;
    } failed[FAILED_MAX]; /* files that failed to open, asked again at retry_ns */
    size_t nfailed;
    struct short_of {
        struct pfr_file_key key;
        uint64_t need;     /* bytes its build took past the room it had, at least */
    } short_of[SHORT_MAX]; /* files whose builds passed the room the memory budget gave them */
    size_t nshort, next_short;
    uint32_t gen;             /* of the last table loaded */
    bool batch_unsupported;   /* the kernel refused batched array updates once */
    char *cache_dir;          /* opts.cache_dir's copy */
    pfr_unwind_cache *cache;  /* NULL: tables are not kept on disk */
    bool cache_error_told;    /* a failed write was told to opts.on_cache_error */
    bool cache_no_room;       /* the table being loaded was not kept: the disk's room is the
                                 ring's (told with it to opts.on_built) */
    pfr_disk_keep cache_keep; /* opts.cache_keep's copy (the cache opens on the thread) */
};

/* ---- row extents ---- */

static int extent_alloc(pfr_unwinder *u, uint32_t n, uint32_t *first)
{
    for (size_t i = 0; i < u->nfree; i++) {
        if (u->free[i].len < n)
            continue;
        *first = u->free[i].start;
        u->free[i].start += n;
        u->free[i].len -= n;
        if (u->free[i].len == 0) {
            memmove(&u->free[i], &u->free[i + 1], (u->nfree - i - 1) * sizeof(*u->free));
            u->nfree--;
        }
        return 0;
    }
    return -ENOSPC;
}

static int extent_free(pfr_unwinder *u, uint32_t start, uint32_t n)
{
    size_t i = 0;
    while (i < u->nfree && u->free[i].start < start)
        i++;
    bool join_prev = i > 0 && u->free[i - 1].start + u->free[i - 1].len == start;
    bool join_next = i < u->nfree && start + n == u->free[i].start;
    if (join_prev && join_next) {
        u->free[i - 1].len += n + u->free[i].len;
        memmove(&u->free[i], &u->free[i + 1], (u->nfree - i - 1) * sizeof(*u->free));
        u->nfree--;
    } else if (join_prev) {
        u->free[i - 1].len += n;
    } else if (join_next) {
        u->free[i].start = start;
        u->free[i].len += n;
    } else {
        if (PFR_VEC_RESERVE(u->free, u->capfree, u->nfree + 1))
            return -ENOMEM; /* the rows leak until restart; counted nowhere, very unlikely */
        memmove(&u->free[i + 1], &u->free[i], (u->nfree - i) * sizeof(*u->free));
        u->free[i] = (struct extent){start, n};
        u->nfree++;
    }
    return 0;
}

/* ---- the sampler's maps ---- */

/* Rows written through a window of the map mapped into the recorder (BPF_F_MMAPABLE): a copy.
 * An update syscall, even batched, copies and checks each 8-byte row on its own: it cost as much
 * CPU as building the table. One window at a time, so the recorder's RSS never holds more of
 * the map than WRITE_BATCH rows. */
static int write_rows_mapped(pfr_unwinder *u, uint32_t first, const struct pfr_unwind_row *rows,
                             size_t n)
{
    for (size_t done = 0; done < n;) {
        size_t cnt = n - done < WRITE_BATCH ? n - done : WRITE_BATCH;
        uint64_t off = ((uint64_t)first + done) * sizeof(*rows);
        uint64_t start = off & ~(uint64_t)(u->page - 1);
        size_t len = (size_t)(off + cnt * sizeof(*rows) - start);
        len = (len + u->page - 1) & ~(u->page - 1);
        void *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, u->rows_fd, (off_t)start);
        if (w == MAP_FAILED)
            return -errno;
        memcpy((char *)w + (off - start), rows + done, cnt * sizeof(*rows));
        munmap(w, len);
        done += cnt;
    }
    return 0;
}

static int write_rows(pfr_unwinder *u, uint32_t first, const struct pfr_unwind_row *rows, size_t n)
{
    if (u->rows_mmapable)
        return write_rows_mapped(u, first, rows, n);
    uint32_t *keys = malloc(WRITE_BATCH * sizeof(*keys));
    if (!keys)
        return -ENOMEM;
    int rc = 0;
    for (size_t done = 0; done < n && rc == 0;) {
        uint32_t cnt = (uint32_t)(n - done < WRITE_BATCH ? n - done : WRITE_BATCH);
        for (uint32_t i = 0; i < cnt; i++)
            keys[i] = first + (uint32_t)done + i;
        if (!u->batch_unsupported) {
            uint32_t c = cnt;
            if (bpf_map_update_batch(u->rows_fd, keys, rows + done, &c, NULL) == 0) {
                done += cnt;
                continue;
            }
            if (errno != EINVAL && errno != ENOTSUPP && errno != EOPNOTSUPP) {
                rc = -errno;
                break;
            }
            u->batch_unsupported = true; /* before Linux 5.6: one row per call */
        }
        for (uint32_t i = 0; i < cnt && rc == 0; i++)
            if (bpf_map_update_elem(u->rows_fd, &keys[i], &rows[done + i], BPF_ANY))
                rc = -errno;
        done += cnt;
    }
    free(keys);
    return rc;
}

static void forget_asked(pfr_unwinder *u, const struct pfr_file_key *k)
{
    bpf_map_delete_elem(u->asked_fd, k);
}

/* The sampler's clock (bpf_ktime_get_ns(), CLOCK_MONOTONIC) in last_used units. */
static uint32_t sampler_now(void)
{
    return (uint32_t)((uint64_t)pfr_clock_mono_ns() >> 30);
}

/* Each loaded file's last_used as the sampler wrote it: one read per file before a round of
 * evictions, not one per file and eviction. */
static void read_last_used(pfr_unwinder *u)
{
    for (size_t i = 0; i < u->nfiles; i++) {
        struct pfr_unwind_file f;
        u->files[i].last_used =
            bpf_map_lookup_elem(u->files_fd, &u->files[i].key, &f) == 0 ? f.last_used : 0;
    }
}

/* The loaded file the sampler used least recently (rows only: with_rows), among those idle for
 * IDLE_UNITS at least, by the last read_last_used(), a table kept on disk taken for ON_DISK_UNITS
 * idler than it is; -1 if none is idle. */
static ssize_t lru_victim(pfr_unwinder *u, bool with_rows)
{
    ssize_t best = -1;
    uint64_t best_idle = 0;
    uint32_t now = sampler_now();
    for (size_t i = 0; i < u->nfiles; i++) {
        if (with_rows && u->files[i].nrows == 0)
            continue;
        uint32_t idle = now - u->files[i].last_used;
        if (idle < IDLE_UNITS)
            continue;
        uint64_t rank = (uint64_t)idle + (u->files[i].on_disk ? ON_DISK_UNITS : 0);
        if (best < 0 || rank > best_idle) {
            best = (ssize_t)i;
            best_idle = rank;
        }
    }
    return best;
}

/* After a change of unwind_files, never before it (see pfr_unwinder_opts.files_gen). */
static void files_changed(pfr_unwinder *u)
{
    if (u->opts.files_gen)
        __atomic_fetch_add(u->opts.files_gen, 1, __ATOMIC_SEQ_CST);
}

/* Drop file i: out of unwind_files first (no new walk finds it), its rows free after the
 * caller's grace, and out of unwind_asked so its next use asks again. */
static void drop(pfr_unwinder *u, size_t i)
{
    struct loaded l = u->files[i];
    bpf_map_delete_elem(u->files_fd, &l.key);
    files_changed(u);
    if (l.nrows) {
        extent_free(u, l.first, l.nindex + l.nrows);
        u->rows_used -= l.nindex + l.nrows;
    }
    forget_asked(u, &l.key);
    u->files[i] = u->files[--u->nfiles];
}

static void evict(pfr_unwinder *u, size_t i)
{
    drop(u, i);
    pthread_mutex_lock(&u->mu);
    u->st.evictions++;
    pthread_mutex_unlock(&u->mu);
}

/* Drop the "no room" entries whose time is up, and the asked marks of files that failed to
 * open a while ago, so their files are asked for again. */
static void expire(pfr_unwinder *u)
{
    int64_t now = pfr_clock_mono_ns();
    for (size_t i = u->nfiles; i-- > 0;)
        if (u->files[i].retry_ns && u->files[i].retry_ns <= now)
            drop(u, i);
    for (size_t i = u->nfailed; i-- > 0;)
        if (u->failed[i].retry_ns <= now) {
            forget_asked(u, &u->failed[i].key);
            u->failed[i] = u->failed[--u->nfailed];
        }
}

/* When expire() next has something to do (INT64_MAX: nothing waits), so that an idle thread
 * sleeps until then rather than waking every second (each wake-up costs the host's CPU). */
static int64_t next_expiry(const pfr_unwinder *u)
{
    int64_t due = INT64_MAX;
    for (size_t i = 0; i < u->nfiles; i++)
        if (u->files[i].retry_ns && u->files[i].retry_ns < due)
            due = u->files[i].retry_ns;
    for (size_t i = 0; i < u->nfailed; i++)
        if (u->failed[i].retry_ns < due)
            due = u->failed[i].retry_ns;
    return due;
}

/* A file that could not be opened now: asked for again in a while (at once if too many wait). */
static void retry_later(pfr_unwinder *u, const struct pfr_file_key *k)
{
    if (u->nfailed == FAILED_MAX) {
        forget_asked(u, k);
        return;
    }
    u->failed[u->nfailed++] = (struct failed){*k, pfr_clock_mono_ns() + RETRY_FAILED_NS};
}

static void grace(void)
{
    struct timespec ts = {0, EVICT_GRACE_NS};
    nanosleep(&ts, NULL);
}

/* Room for n rows, evicting idle tables, least recently used first, as needed. -ENOSPC if they
 * do not make enough room. */
static int make_room(pfr_unwinder *u, uint32_t n, uint32_t *first)
{
    if (n > u->opts.max_rows)
        return -ENOSPC;
    bool evicted = false;
    int rc = extent_alloc(u, n, first);
    if (rc)
        read_last_used(u);
    for (; rc != 0; rc = extent_alloc(u, n, first)) {
        ssize_t v = lru_victim(u, true);
        if (v < 0)
            return rc;
        evict(u, (size_t)v);
        evicted = true;
    }
    if (evicted)
        grace();
    return 0;
}

/* The index of t's rows (unwind_index.h), or none where the table and its index would not fit
 * the map even alone (the table is then loaded without). 0 or -ENOMEM. */
static int index_for(const pfr_unwinder *u, const pfr_unwind_table *t, pfr_unwind_index *ix)
{
    int rc = pfr_unwind_index_build(t->rows, t->nrows, ix);
    if (rc == 0 && (uint64_t)ix->n + t->nrows > u->opts.max_rows)
        pfr_unwind_index_free(ix);
    return rc;
}

static int add_loaded(pfr_unwinder *u, const struct loaded *l)
{
    if (PFR_VEC_RESERVE(u->files, u->capfiles, u->nfiles + 1))
        return -ENOMEM;
    u->files[u->nfiles++] = *l;
    return 0;
}

/* Give a file its entry: the rows of t (on_disk: the cache on disk holds them too), or 0 rows
 * when t is NULL (until retry_ns, if not 0). */
static int load(pfr_unwinder *u, const struct pfr_file_key *key, const pfr_unwind_table *t,
                bool on_disk, int64_t retry_ns)
{
    if (u->nfiles >= PFR_UNWIND_FILES_MAX) {
        read_last_used(u);
        ssize_t v = lru_victim(u, false);
        if (v >= 0)
            evict(u, (size_t)v);
    }
    struct loaded l = {.key = *key, .retry_ns = t ? 0 : retry_ns, .on_disk = t && on_disk};
    struct pfr_unwind_file f = {0};
    if (t && t->nrows) {
        pfr_unwind_index ix;
        int rc = index_for(u, t, &ix);
        if (rc)
            return rc;
        rc = make_room(u, ix.n + (uint32_t)t->nrows, &l.first);
        if (rc) {
            pfr_unwind_index_free(&ix);
            return rc;
        }
        l.nindex = ix.n;
        l.nrows = (uint32_t)t->nrows;
        f.index_shift = ix.shift;
        rc = write_rows(u, l.first, ix.ent, ix.n);
        if (rc == 0)
            rc = write_rows(u, l.first + l.nindex, t->rows, t->nrows);
        if (rc == 0)
            rc = add_loaded(u, &l);
        pfr_unwind_index_free(&ix);
        if (rc) {
            extent_free(u, l.first, l.nindex + l.nrows);
            return rc;
        }
        u->rows_used += l.nindex + l.nrows;
        f.base = t->base;
        f.delta = t->delta;
        f.first = l.first + l.nindex;
        f.nrows = l.nrows;
        f.index_first = l.first;
        f.index_n = l.nindex;
        f.gen = ++u->gen ? u->gen : ++u->gen; /* never 0: 0 keeps the memo out */
    } else if (add_loaded(u, &l)) {
        return -ENOMEM;
    }
    if (bpf_map_update_elem(u->files_fd, key, &f, BPF_ANY)) {
        int rc = -errno;
        drop(u, u->nfiles - 1);
        return rc;
    }
    files_changed(u);
    return 0;
}

/* ---- finding the file ---- */

static int open_checked(const char *path, uint64_t ino)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_ino != ino) {
        close(fd);
        return -ESTALE; /* replaced since the sampler saw it */
    }
    return fd;
}

/* The path of the mapping that starts at start with inode ino, from /proc/PID/maps (lines read
 * by the symbolizer's parser, which treats them as hostile). */
static int mapped_path(const char *maps, const struct pfr_unwind_req *r, char *out, size_t outlen)
{
    FILE *f = fopen(maps, "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = -ENOENT;
    while ((len = getline(&line, &cap, f)) > 0) {
        struct pfr_sym_maps_line l;
        char why[64];
        size_t n = (size_t)len - (line[len - 1] == '\n');
        if (pfr_sym_maps_parse_line(line, n, &l, why, sizeof(why)) || l.start != r->start ||
            l.ino != r->ino)
            continue;
        static const char del[] = " (deleted)";
        bool deleted = l.path_len >= sizeof(del) - 1 &&
                       !memcmp(l.path + l.path_len - (sizeof(del) - 1), del, sizeof(del) - 1);
        if (l.path_len > 0 && l.path[0] == '/' && !deleted && l.path_len < outlen) {
            memcpy(out, l.path, l.path_len);
            out[l.path_len] = '\0';
            rc = 0;
        }
        break;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Open the file the sampler asked about, as the asking process maps it: its map_files link
 * (exact, needs CAP_SYS_ADMIN), else its path in /proc/PID/maps under the process's root (a
 * container's file too), checked by inode. A descriptor or -errno. */
static int open_mapped(pfr_unwinder *u, const struct pfr_unwind_req *r, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/%" PRIu32 "/map_files/%llx-%llx", u->proc, r->ev.tgid,
             (unsigned long long)r->start, (unsigned long long)r->end);
    uint64_t dev = makedev(r->dev >> 20, r->dev & 0xfffff); /* the kernel's dev_t */
    if (u->fsguard && !pfr_fsguard_local(u->fsguard, (pid_t)r->ev.tgid, dev)) {
        /* a remote file system: only the guard's worker touches it */
        int fd = pfr_fsguard_copy(u->fsguard, path, dev, r->ino);
        if (fd == -EPERM || fd == -ENOENT || fd == -EACCES) { /* map_files wants CAP_SYS_ADMIN */
            char maps[128], rel[4096];
            snprintf(maps, sizeof(maps), "%s/%" PRIu32 "/maps", u->proc, r->ev.tgid);
            if (mapped_path(maps, r, rel, sizeof(rel)) == 0) {
                snprintf(path, pathlen, "%s/%" PRIu32 "/root%s", u->proc, r->ev.tgid, rel);
                fd = pfr_fsguard_copy(u->fsguard, path, dev, r->ino);
            }
        }
        return fd;
    }
    int fd = open_checked(path, r->ino);
    if (fd >= 0)
        return fd;
    char maps[128], rel[4096];
    snprintf(maps, sizeof(maps), "%s/%" PRIu32 "/maps", u->proc, r->ev.tgid);
    int rc = mapped_path(maps, r, rel, sizeof(rel));
    if (rc)
        return rc;
    snprintf(path, pathlen, "%s/%" PRIu32 "/root%s", u->proc, r->ev.tgid, rel);
    return open_checked(path, r->ino);
}

/* The table of the vDSO, from this process's own (the same image in every 64-bit process). */
static int build_vdso(pfr_unwind_table *t, char *err, size_t errlen)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    char line[512];
    unsigned long long s = 0, e = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &s, &e) == 2)
            break;
    fclose(f);
    if (e <= s)
        return -ENOENT;
    return pfr_unwind_table_build_mem((const void *)(uintptr_t)s, (size_t)(e - s), 0, t, err,
                                      errlen);
}

/* ---- the thread ---- */

/* A handled request into the stats: its outcome, its build's time (t0 on, but paused_ns spent
 * on other files' builds while it paused), and a small file's wait since it was asked. */
static void count(pfr_unwinder *u, const struct queued *q, uint64_t *field, int64_t t0,
                  int64_t paused_ns)
{
    int64_t now = pfr_clock_mono_ns();
    uint64_t dt = (uint64_t)(now - t0 - paused_ns);
    uint64_t waited = now > q->asked_ns ? (uint64_t)(now - q->asked_ns) : 0;
    pthread_mutex_lock(&u->mu);
    (*field)++;
    u->st.build_ns += dt;
    if (dt > u->st.build_max_ns)
        u->st.build_max_ns = dt;
    if (q->small) {
        u->st.small_files++;
        u->st.small_wait_ns += waited;
        if (waited > u->st.small_wait_max_ns)
            u->st.small_wait_max_ns = waited;
    }
    pthread_mutex_unlock(&u->mu);
}

/* The name of the file open at fd, from our descriptor (its process may be gone by now; a
 * container's file is named as the recorder sees it), else path. */
static const char *fd_name(int fd, const char *path, char *buf, size_t buflen)
{
    char fdlink[64];
    snprintf(fdlink, sizeof(fdlink), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(fdlink, buf, buflen - 1);
    if (n <= 0)
        return path;
    buf[n] = '\0';
    return buf;
}

/* A loaded table told to the caller (its debug log): its build's time and its wait. */
static void built(pfr_unwinder *u, const struct queued *q, const char *name, uint32_t rows,
                  bool cached, int64_t t0, int64_t paused_ns)
{
    if (!u->opts.on_built)
        return;
    int64_t now = pfr_clock_mono_ns();
    pfr_unwind_built b = {.pid = q->r.ev.tgid,
                          .dev = q->r.dev,
                          .ino = q->r.ino,
                          .path = name,
                          .rows = rows,
                          .build_ms = (double)(now - t0 - paused_ns) / 1e6,
                          .waited_ms = (double)(now - q->asked_ns) / 1e6,
                          .small = q->small,
                          .cached = cached,
                          .not_kept_no_room = u->cache_no_room};
    u->opts.on_built(u->opts.ctx, &b);
}

/* A refused file, open at fd: counted by reason and told to the caller (its log). */
static void refused(pfr_unwinder *u, const struct pfr_unwind_req *r, int fd, const char *path,
                    int rc, const char *why)
{
    int reason = pfr_unwind_refusal(rc);
    if (reason < 0)
        return;
    pthread_mutex_lock(&u->mu);
    u->st.refused[reason]++;
    pthread_mutex_unlock(&u->mu);
    if (!u->opts.on_refused)
        return;
    char real[4096];
    pfr_unwind_refused f = {.pid = r->ev.tgid,
                            .dev = r->dev,
                            .ino = r->ino,
                            .path = fd_name(fd, path, real, sizeof(real)),
                            .reason = reason,
                            .why = why};
    u->opts.on_refused(u->opts.ctx, &f);
}

/* What building a file's table holds at its peak, roughly, for the memory budget: an eighth
 * of the file (libLLVM-15, 120 MB, took 10 MiB), within the builder's own limits. */
static uint64_t build_cost(int fd)
{
    struct stat sb;
    uint64_t size = fstat(fd, &sb) == 0 && sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    uint64_t cost = size / 8;
    return cost < (64u << 10) ? 64u << 10 : cost > (32u << 20) ? 32u << 20 : cost;
}

static bool serve_small(void *ctx);

/* ---- the cache on disk ---- */

/* The key of the file open at fd in the cache, if it may have a table worth keeping there and
 * is the file the sampler asked about (not a copy of a remote file: its inode is another). */
static bool cache_key(pfr_unwinder *u, int fd, const struct pfr_unwind_req *r,
                      pfr_unwind_cache_key *key)
{
    struct stat st;
    if (!u->cache || fstat(fd, &st) != 0 || st.st_ino != r->ino || st.st_size < CACHE_MIN_FILE)
        return false;
    return pfr_unwind_cache_key_fd(fd, u->opts.build_flags, key) == 0;
}

/* A table just built, kept on disk if worth it (reading it back must beat building it): true
 * if it is. */
static bool cache_put(pfr_unwinder *u, const pfr_unwind_cache_key *key, const pfr_unwind_table *t)
{
    if (t->nrows < PFR_UNWIND_CACHE_MIN_ROWS && t->stats.cpu_ns < PFR_UNWIND_CACHE_MIN_CPU_NS)
        return false;
    int rc = pfr_unwind_cache_put(u->cache, key, t);
    u->cache_no_room = rc == -EDQUOT; /* not an error: counted, and said in the debug log */
    if (rc && rc != -EFBIG && rc != -EDQUOT && !u->cache_error_told && u->opts.on_cache_error) {
        u->cache_error_told = true;
        u->opts.on_cache_error(u->opts.ctx, pfr_unwind_cache_last_error(u->cache));
    }
    return rc == 0;
}

/* Open the cache (on the thread: the directory is listed, old files removed). */
static void cache_open(pfr_unwinder *u)
{
    if (!u->cache_dir)
        return;
    char err[512];
    if (pfr_unwind_cache_open(u->cache_dir, u->opts.cache_bytes, u->opts.membudget, &u->cache_keep,
                              &u->cache, err, sizeof(err)) != 0 &&
        u->opts.on_cache_error)
        u->opts.on_cache_error(u->opts.ctx, err);
}

/* The limits of a build: unwind_table.h's defaults, the map's cap, the CPU share; a small file
 * built while another build pauses (nested) within the small ones; a build pauses for the small
 * files queued meanwhile (unless opts.one_lane), a nested one too, once. */
static void build_limits(pfr_unwinder *u, const struct queued *q, bool nested,
                         pfr_unwind_limits *lim)
{
    pfr_unwind_limits_default(lim);
    /* a table larger than the whole map could never be loaded: its build stops there */
    lim->max_rows = u->opts.max_rows ? u->opts.max_rows : 1;
    lim->cpu_share = u->opts.cpu_share ? u->opts.cpu_share : PFR_UNWINDER_CPU_SHARE;
    /* A small file's build is short (its mapping is at most PFR_UNWINDER_SMALL_MAP): spread over
     * time it only lengthens the while its process's stacks stay partial (python3's own table,
     * ~0.5 s of CPU, took ~1.3 s at half a core: 6 % of a 5 s run unwalked). Only large builds
     * are spread. */
    if (q->small && !u->opts.one_lane)
        lim->cpu_share = 0;
    lim->cancel = &u->cancel;
    if (nested) {
        lim->max_eh_frame_bytes = PFR_UNWINDER_SMALL_EH_FRAME;
        lim->max_fdes = PFR_UNWINDER_SMALL_FDES;
        lim->max_held_bytes = PFR_UNWINDER_SMALL_HELD;
    }
    if (!u->opts.one_lane && u->depth < MAX_DEPTH) {
        lim->yield = serve_small;
        lim->yield_ctx = u;
    }
}

/* ---- files short of room ---- */

static struct short_of *short_find(pfr_unwinder *u, const struct pfr_file_key *k)
{
    for (size_t i = 0; i < u->nshort; i++)
        if (u->short_of[i].key.ino == k->ino && u->short_of[i].key.dev == k->dev)
            return &u->short_of[i];
    return NULL;
}

/* k's build needed more than need bytes: remembered (the oldest entry replaced when full). */
static void short_note(pfr_unwinder *u, const struct pfr_file_key *k, uint64_t need)
{
    struct short_of *e = short_find(u, k);
    if (!e) {
        if (u->nshort < SHORT_MAX)
            e = &u->short_of[u->nshort++];
        else
            e = &u->short_of[u->next_short++ % SHORT_MAX];
        e->key = *k;
    }
    e->need = need;
}

static void short_forget(pfr_unwinder *u, const struct pfr_file_key *k)
{
    struct short_of *e = short_find(u, k);
    if (e)
        *e = u->short_of[--u->nshort];
}

/* Build the table of the file open at fd, its build's cost held meanwhile, within max_bytes of
 * its own memory (0: no bound). */
static int build(pfr_unwinder *u, const struct queued *q, bool nested, int fd, uint64_t cost,
                 uint64_t max_bytes, pfr_unwind_table *t, char *err, size_t errlen)
{
    pfr_unwind_limits lim;
    build_limits(u, q, nested, &lim);
    lim.max_bytes = max_bytes;
    uint64_t outer_map = u->build_map;
    u->held_cost += cost;
    u->build_map = q->small && !q->deferred ? q->r.end - q->r.start : UINT64_MAX;
    u->looked_at = UINT64_MAX; /* what was too large for another build may be small for this */
    u->depth++;
    int rc = pfr_unwind_table_build_limited(fd, u->opts.build_flags, &lim, t, err, errlen);
    u->depth--;
    u->build_map = outer_map;
    u->looked_at = UINT64_MAX; /* ... and for the build it paused (a large one takes any) */
    u->held_cost -= cost;
    return rc;
}

/* Build and load the table of a queued file. nested: while a large build pauses; false when it
 * does not fit the small limits or the memory budget beside the large build (nothing counted
 * but that: it waits its turn). */
static bool handle(pfr_unwinder *u, const struct queued *q, bool nested)
{
    const struct pfr_unwind_req *r = &q->r;
    struct pfr_file_key key = {.ino = r->ino, .dev = r->dev};
    int64_t t0 = pfr_clock_mono_ns(), paused0 = u->paused_ns;
    pfr_unwind_table t = {0};
    char err[256], path[4096 + 128], name_buf[4096];
    const char *name = "[vdso]";
    bool cached = false, on_disk = false;
    int rc;
    u->cache_no_room = false;
    if (r->ino == PFR_UNWIND_VDSO_INO && r->dev == 0) {
        rc = build_vdso(&t, err, sizeof(err));
    } else {
        int fd = open_mapped(u, r, path, sizeof(path));
        if (fd < 0) {
            retry_later(u, &key); /* another process mapping it will ask again */
            count(u, q, &u->st.open_failed, t0, 0);
            return true;
        }
        /* a table kept on disk first: read back, it holds its rows only (asked of the budget
         * by the cache), so even a file that waits past the small limits comes at once; one the
         * budget refuses (-ENOBUFS) is a miss: the build's own cost is asked next */
        pfr_unwind_cache_key ck;
        bool keep = cache_key(u, fd, r, &ck);
        rc = keep ? pfr_unwind_cache_get(u->cache, &ck, u->opts.max_rows, &t) : -ENOENT;
        cached = rc == 0;
        uint64_t cost = build_cost(fd);
        if (!cached && nested &&
            pfr_membudget_headroom(u->opts.membudget) < (int64_t)(u->held_cost + cost)) {
            close(fd); /* not both builds at once: after the large one */
            return false;
        }
        /* a build holds its cost only until the rows are in the kernel's map: a brief cost,
         * paid near the budget too while it stays below 15/16 of it (a recorder that stays near
         * its budget on a busy host otherwise never builds a library's table again: every
         * libpython of 13-16 MB, 1.7-2 MB to build, was walked by frame pointers, its stacks
         * cut after their first frame) */
        /* the estimate (cost) is asked of the budget, but a file's real cost is known only as
         * it is read: the build keeps to the room the budget has now (or to the estimate, a
         * small cost being allowed near the budget too). A 560 MB library reached the map's cap
         * of rows, 32 MiB of them, past the budget, on an estimate of 32 MiB in all. A file
         * that passed its room before is built again only once there is more. */
        const struct short_of *sh = cached ? NULL : short_find(u, &key);
        int64_t room = cached ? 0 : pfr_membudget_brief_room(u->opts.membudget);
        uint64_t max_bytes = room == INT64_MAX ? 0 : (uint64_t)room > cost ? (uint64_t)room : cost;
        bool refuse = sh && room != INT64_MAX && (uint64_t)room < sh->need;
        if (refuse)
            pfr_membudget_count_refused(u->opts.membudget, PFR_MEM_UNWIND);
        else if (!cached)
            refuse = !pfr_membudget_allow_brief(u->opts.membudget, PFR_MEM_UNWIND, cost);
        if (refuse) {
            /* over the recorder's memory budget: frame pointers until it is asked again */
            close(fd);
            retry_later(u, &key);
            count(u, q, &u->st.no_room, t0, 0);
            return true;
        }
        if (!cached) {
            rc = build(u, q, nested, fd, cost, max_bytes, &t, err, sizeof(err));
            if (nested && (rc == -EFBIG || rc == -EOVERFLOW || rc == -ENOBUFS)) {
                close(fd); /* past the small limits or the room (checked before they were
                            * paid): after the large build */
                return false;
            }
            if (rc == -ENOBUFS) { /* past the room the budget gave it: as refused by it */
                close(fd);
                short_note(u, &key, max_bytes + 1);
                pfr_membudget_count_refused(u->opts.membudget, PFR_MEM_UNWIND);
                retry_later(u, &key);
                malloc_trim(0); /* it held up to the room */
                count(u, q, &u->st.no_room, t0, u->paused_ns - paused0);
                return true;
            }
            short_forget(u, &key);
            refused(u, r, fd, path, rc, err);
            if (rc == 0 && keep)
                on_disk = cache_put(u, &ck, &t);
        }
        if (rc == 0 && u->opts.on_built)
            name = fd_name(fd, path, name_buf, sizeof(name_buf));
        close(fd);
    }
    uint64_t *outcome = &u->st.tables;
    if (rc == -ECANCELED) /* the unwinder is stopping */
        return true;
    if (rc == -ENOMEM) {
        forget_asked(u, &key);
        count(u, q, &u->st.open_failed, t0, u->paused_ns - paused0);
        return true;
    }
    if (rc == -ENOEXEC)
        outcome = &u->st.bad_files;
    else if (rc || t.nrows > u->opts.max_rows) /* -E2BIG: past the cap */
        outcome = &u->st.no_table;
    /* (a file refused past a limit may have held up to it) */
    bool large = (rc != -ENOEXEC && pfr_unwind_refusal(rc) >= 0) || t.nrows >= TRIM_AFTER_ROWS;
    bool with_rows = outcome == &u->st.tables;
    rc = load(u, &key, with_rows ? &t : NULL, cached || on_disk, 0);
    if (rc && with_rows) { /* frame pointers for this file: for a while if only for want of room */
        outcome = rc == -ENOSPC ? &u->st.no_room : &u->st.no_table;
        rc = load(u, &key, NULL, false, rc == -ENOSPC ? pfr_clock_mono_ns() + u->retry_ns : 0);
    }
    uint32_t rows = (uint32_t)t.nrows;
    pfr_unwind_table_free(&t);
    if (rc)
        forget_asked(u, &key);
    else if (outcome == &u->st.tables)
        built(u, q, name, rows, cached, t0, u->paused_ns - paused0);
    /* a large file's build (or one refused past a limit) leaves small blocks free in the heap:
     * give them back (libLLVM's table takes 10 MiB to build; the recorder runs in ~45) */
    if (large)
        malloc_trim(0);
    count(u, q, outcome, t0, u->paused_ns - paused0);
    return true;
}

/* The thread's figures into the stats (lock held). */
static void publish(pfr_unwinder *u)
{
    u->st.rows = u->rows_used;
    u->st.files = u->nfiles;
    size_t with_rows = 0;
    for (size_t i = 0; i < u->nfiles; i++)
        with_rows += u->files[i].nrows != 0;
    u->st.files_with_rows = with_rows;
    u->st.cache_enabled = u->cache != NULL;
    if (u->cache)
        pfr_unwind_cache_stats_get(u->cache, &u->st.cache);
}

/* A small file not yet tried between a large build's steps. */
static bool due(const struct queued *q)
{
    return q->small && !q->deferred;
}

/* Into the queue (lock held): false when it is full. */
static bool push(pfr_unwinder *u, const struct queued *q)
{
    if (u->qlen == QUEUE_MAX)
        return false;
    u->queue[u->qlen++] = *q;
    if (due(q)) {
        atomic_fetch_add(&u->small_due, 1);
        atomic_fetch_add(&u->small_asked, 1);
    }
    return true;
}

/* The index of the queued request of the smallest mapping (among those due only: due_only), qlen
 * when there is none (lock held). */
static size_t smallest(const pfr_unwinder *u, bool due_only)
{
    size_t best = u->qlen;
    for (size_t i = 0; i < u->qlen; i++) {
        const struct pfr_unwind_req *r = &u->queue[i].r;
        if (due_only && !due(&u->queue[i]))
            continue;
        if (best < u->qlen && r->end - r->start >= u->queue[best].r.end - u->queue[best].r.start)
            continue;
        best = i;
    }
    return best;
}

/* The queued request at index i, out of the queue (lock held). */
static struct queued take_at(pfr_unwinder *u, size_t i)
{
    struct queued q = u->queue[i];
    u->queue[i] = u->queue[--u->qlen];
    if (due(&q))
        atomic_fetch_sub(&u->small_due, 1);
    return q;
}

/* A request handled (lock held): sync()'s waiters are told. */
static void finished(pfr_unwinder *u)
{
    u->handled++;
    publish(u);
    pthread_cond_broadcast(&u->done);
}

/* A small file worth a pause of the build under way: any, for a large build; for a small one
 * (libstdc++'s table, a tenth of a second or more under load, held up a new program's 30-row
 * one) a file of a mapping at most an eighth of its own. */
static bool worth_a_pause(const pfr_unwinder *u, size_t i)
{
    const struct pfr_unwind_req *r = &u->queue[i].r;
    return u->build_map == UINT64_MAX || (r->end - r->start) * 8 <= u->build_map;
}

/* A build's pause (its lim.yield): the small files queued meanwhile are built and loaded on this
 * thread, the paused build's state untouched (it loads nothing until it ends). A small file that
 * does not fit beside it goes back to the queue, for after it. True if any was handled. */
static bool serve_small(void *ctx)
{
    pfr_unwinder *u = ctx;
    if (atomic_load_explicit(&u->small_due, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&u->small_asked, memory_order_relaxed) == u->looked_at)
        return false;
    int64_t t0 = pfr_clock_mono_ns(), inner0 = u->paused_ns;
    bool any = false;
    pthread_mutex_lock(&u->mu);
    while (!u->stop && atomic_load(&u->small_due) > 0) {
        size_t i = smallest(u, true);
        if (!worth_a_pause(u, i)) {
            u->looked_at = atomic_load(&u->small_asked); /* until another is asked */
            break;
        }
        any = true;
        struct queued q = take_at(u, i);
        pthread_mutex_unlock(&u->mu);
        bool done = handle(u, &q, true);
        pthread_mutex_lock(&u->mu);
        if (done) {
            u->st.interleaved++;
        } else {
            u->st.deferred++;
            q.deferred = true;
            if (push(u, &q))
                continue;
            u->st.queue_full++; /* (the sampler asks again) */
            forget_asked(u, &(struct pfr_file_key){.ino = q.r.ino, .dev = q.r.dev});
        }
        finished(u);
    }
    pthread_mutex_unlock(&u->mu);
    if (!any)
        return false;
    /* this pause, less the pauses of the builds made in it (counted already) */
    int64_t inner = u->paused_ns - inner0;
    u->paused_ns += pfr_clock_mono_ns() - t0 - inner;
    return true;
}

/* Table builds are background work (a large library's takes a second of CPU, several under a
 * sanitizer): the thread gives way to the recorder's others, which must snapshot processes and
 * read JIT maps while those live, and end intervals on time (nice +5 weighs a third as much),
 * yet still comes before the host's ordinary processes when the recorder runs at nice -10 as
 * its unit sets: +10 left new programs walked by frame pointers for seconds on a busy host.
 * Linux gives each thread its own nice value; raising it needs no privilege. */
static void lower_priority(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno == 0)
        setpriority(PRIO_PROCESS, (id_t)tid, prio + 5 > 19 ? 19 : prio + 5);
}

static void *thread_main(void *arg)
{
    pfr_unwinder *u = arg;
    lower_priority();
    cache_open(u);
    pthread_mutex_lock(&u->mu);
    publish(u);
    for (;;) {
        while (!u->stop && u->qlen == 0) {
            /* (files and failed are this thread's own: read without the lock's need) */
            int64_t due = next_expiry(u);
            if (due == INT64_MAX) {
                pthread_cond_wait(&u->cv, &u->mu); /* requests and the stop signal it */
            } else { /* (cv waits on the monotonic clock, as retry_ns counts) */
                struct timespec until = {.tv_sec = due / 1000000000, .tv_nsec = due % 1000000000};
                pthread_cond_timedwait(&u->cv, &u->mu, &until);
            }
            pthread_mutex_unlock(&u->mu);
            expire(u);
            pthread_mutex_lock(&u->mu);
            publish(u);
        }
        if (u->stop)
            break;
        struct queued q = take_at(u, smallest(u, false));
        pthread_mutex_unlock(&u->mu);
        expire(u);
        handle(u, &q, false);
        pthread_mutex_lock(&u->mu);
        finished(u);
    }
    pthread_mutex_unlock(&u->mu);
    pfr_unwind_cache_close(u->cache);
    u->cache = NULL;
    return NULL;
}

int pfr_unwinder_new(const pfr_unwinder_opts *opts, int rows_fd, int files_fd, int asked_fd,
                     pfr_unwinder **out, char *err, size_t errlen)
{
    pfr_unwinder *u = calloc(1, sizeof(*u));
    if (!u) {
        snprintf(err, errlen, "unwinder: out of memory");
        return -ENOMEM;
    }
    u->looked_at = UINT64_MAX;
    u->opts = *opts;
    u->opts.cache_dir = NULL; /* (the copy's) */
    if (opts->cache_keep)
        u->cache_keep = *opts->cache_keep;
    u->opts.cache_keep = NULL;
    if (opts->cache_dir && opts->cache_dir[0] && !(u->cache_dir = strdup(opts->cache_dir))) {
        free(u);
        snprintf(err, errlen, "unwinder: out of memory");
        return -ENOMEM;
    }
    snprintf(u->proc, sizeof(u->proc), "%s", opts->proc ? opts->proc : "/proc");
    u->fsguard = opts->fsguard;
    u->rows_fd = rows_fd;
    u->files_fd = files_fd;
    u->asked_fd = asked_fd;
    struct bpf_map_info info = {0};
    uint32_t ilen = sizeof(info);
    u->rows_mmapable =
        bpf_obj_get_info_by_fd(rows_fd, &info, &ilen) == 0 && (info.map_flags & BPF_F_MMAPABLE);
    u->page = (size_t)sysconf(_SC_PAGESIZE);
    u->st.max_rows = opts->max_rows;
    u->retry_ns =
        (int64_t)(opts->no_room_retry_ms ? opts->no_room_retry_ms : NO_ROOM_RETRY_MS) * 1000000;
    pthread_mutex_init(&u->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&u->done, NULL);
    if (opts->max_rows && extent_free(u, 0, opts->max_rows)) {
        pfr_unwinder_free(u);
        snprintf(err, errlen, "unwinder: out of memory");
        return -ENOMEM;
    }
    int rc = pthread_create(&u->thread, NULL, thread_main, u);
    if (rc) {
        pfr_unwinder_free(u);
        snprintf(err, errlen, "unwinder: cannot start its thread: %s", strerror(rc));
        return -rc;
    }
    pthread_setname_np(u->thread, "pfr-unwind");
    u->started = true;
    *out = u;
    return 0;
}

void pfr_unwinder_request(pfr_unwinder *u, const struct pfr_unwind_req *req)
{
    pthread_mutex_lock(&u->mu);
    u->st.requests++;
    int64_t now = pfr_clock_mono_ns();
    /* the sampler's own time of asking, when it says (its wait in the ring counts too) */
    int64_t asked = req->asked_ns && (int64_t)req->asked_ns <= now ? (int64_t)req->asked_ns : now;
    struct queued q = {
        .r = *req, .asked_ns = asked, .small = req->end - req->start <= PFR_UNWINDER_SMALL_MAP};
    if (!push(u, &q)) {
        u->st.queue_full++;
        pthread_mutex_unlock(&u->mu);
        struct pfr_file_key k = {.ino = req->ino, .dev = req->dev};
        forget_asked(u, &k);
        return;
    }
    u->queued++;
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

void pfr_unwinder_sync(pfr_unwinder *u)
{
    pthread_mutex_lock(&u->mu);
    uint64_t target = u->queued;
    while (u->handled < target && !u->stop)
        pthread_cond_wait(&u->done, &u->mu);
    pthread_mutex_unlock(&u->mu);
}

void pfr_unwinder_stats_get(pfr_unwinder *u, pfr_unwinder_stats *out)
{
    pthread_mutex_lock(&u->mu);
    *out = u->st;
    pthread_mutex_unlock(&u->mu);
}

void pfr_unwinder_free(pfr_unwinder *u)
{
    if (!u)
        return;
    if (u->started) {
        pthread_mutex_lock(&u->mu);
        u->stop = true;
        atomic_store(&u->cancel, true);
        pthread_cond_broadcast(&u->cv);
        pthread_cond_broadcast(&u->done);
        pthread_mutex_unlock(&u->mu);
        pthread_join(u->thread, NULL);
    }
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    pthread_cond_destroy(&u->done);
    free(u->free);
    free(u->files);
    free(u->cache_dir);
    free(u);
}
