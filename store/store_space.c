/*
 * Disk space: the ring yields to the file system it lives on. The cap in force is max_bytes or,
 * when the file system's free space is short of the reserve, what the ring holds plus what is
 * free beyond the reserve (never below a floor of its own). The spare file keeps room for the
 * WAL, as large as the largest WAL seen: a disk filled up by another program still lets the
 * writer commit the transactions that give the oldest chunks up and write the newest. Why this
 * shape: docs/store.md, "Disk space".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "store_internal.h"

const char *pfr_store_cap_reason_name(int reason)
{
    return reason == PFR_STORE_CAP_DISK_RESERVE ? "disk free space reserve" : "configured";
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static uint64_t percent_of(uint64_t bytes, double percent)
{
    if (!(percent > 0))
        return 0;
    if (percent >= 100)
        return bytes;
    return (uint64_t)((double)bytes * percent / 100.0);
}

static uint64_t size_of(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

uint64_t pfr_store_reserve_bytes(const pfr_store_reserve *r, uint64_t fs_bytes)
{
    uint64_t v;
    switch (r ? r->mode : PFR_STORE_RESERVE_AUTO) {
    case PFR_STORE_RESERVE_OFF:
        return 0;
    case PFR_STORE_RESERVE_BYTES:
        v = r->bytes;
        break;
    case PFR_STORE_RESERVE_PERCENT:
        v = percent_of(fs_bytes, r->percent);
        break;
    default:
        v = percent_of(fs_bytes, PFR_STORE_RESERVE_AUTO_PERCENT);
        if (v < PFR_STORE_RESERVE_AUTO_BYTES)
            v = PFR_STORE_RESERVE_AUTO_BYTES;
    }
    return min_u64(v, fs_bytes / 2); /* a small disk still records */
}

uint64_t pfr_store_effective_cap(uint64_t max_bytes, uint64_t files_bytes, uint64_t avail_bytes,
                                 uint64_t reserve_bytes, enum pfr_store_cap_reason *reason)
{
    uint64_t room = sat_add(files_bytes, avail_bytes);
    uint64_t allowed = sat_sub(room, reserve_bytes);
    /* The floor is kept, or taken where the disk has room for it, whatever the reserve. */
    uint64_t floor = min_u64(min_u64(room, max_bytes), PFR_STORE_SPACE_FLOOR);
    uint64_t cap = allowed > floor ? allowed : floor;
    bool disk = cap < max_bytes;
    if (reason)
        *reason = disk ? PFR_STORE_CAP_DISK_RESERVE : PFR_STORE_CAP_CONFIGURED;
    return disk ? cap : max_bytes;
}

uint64_t pfr_store_space_wal_budget(uint64_t max_bytes)
{
    uint64_t b = max_bytes / 16;
    if (b < (64u << 10))
        b = 64u << 10;
    if (b > (4u << 20))
        b = 4u << 20;
    return b;
}

int pfr_store_space_open(pfr_store *s, const pfr_store_reserve *reserve)
{
    if (reserve)
        s->space.reserve = *reserve;
    s->space.spare_bytes = s->wal_budget;
    if (asprintf(&s->space.spare_path, "%s-spare", s->path) < 0) {
        s->space.spare_path = NULL;
        return -ENOMEM;
    }
    /* The largest WAL seen outlives a restart as the spare file's size. */
    if (!s->read_only)
        pfr_store_space_note_wal(s, size_of(s->space.spare_path));
    return 0;
}

void pfr_store_space_close(pfr_store *s)
{
    free(s->space.spare_path);
    s->space.spare_path = NULL;
}

int pfr_store_space_measure(pfr_store *s, uint64_t max_bytes, uint64_t reserve,
                            struct space_now *out)
{
    memset(out, 0, sizeof(*out));
    struct statvfs v;
    if (statvfs(s->path, &v) != 0)
        return -errno;
    out->fs_bytes = (uint64_t)v.f_blocks * v.f_frsize;
    out->fs_avail = (uint64_t)v.f_bavail * v.f_frsize;
    out->reserve =
        reserve != UINT64_MAX ? reserve : pfr_store_reserve_bytes(&s->space.reserve, out->fs_bytes);
    char wal[4200];
    snprintf(wal, sizeof(wal), "%s-wal", s->path);
    uint64_t db = size_of(s->path), w = size_of(wal), spare = size_of(s->space.spare_path);
    out->files = db + w + spare;
    /* The WAL and the spare file are counted at their budget, or more when they hold more: the
     * room they may still take is not free for the database, nor what they hold (on a full disk
     * the WAL keeps its blocks). A reader counts the spare file as it finds it, at least at the
     * WAL's budget (the writer sizes it by the WAL it has seen). */
    uint64_t budget = pfr_store_space_wal_budget(max_bytes);
    uint64_t spare_budget = s->read_only ? budget : s->space.spare_bytes;
    uint64_t w_b = w > budget ? w : budget, spare_b = spare > spare_budget ? spare : spare_budget;
    uint64_t avail = sat_sub(sat_sub(out->fs_avail, w_b - w), spare_b - spare);
    out->shares = w_b + spare_b;
    out->cap =
        pfr_store_effective_cap(max_bytes, db + w_b + spare_b, avail, out->reserve, &out->reason);
    return 0;
}

bool pfr_store_space_growth_fits(pfr_store *s, uint64_t db_bytes)
{
    uint64_t file = size_of(s->path);
    if (db_bytes <= file)
        return true;
    struct statvfs v;
    if (statvfs(s->path, &v) != 0)
        return true; /* not measured: the disk decides, as before */
    /* The WAL may still take its budget before the checkpoint extends the file. */
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    return db_bytes - file <= sat_sub(avail, s->wal_budget);
}

/* journal_size_limit: the WAL's budget, or off while the disk is starved. */
static void wal_keep(pfr_store *s, bool keep)
{
    if (keep == s->space.wal_kept)
        return;
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %lld",
             keep ? -1ll : (long long)s->wal_budget);
    if (pfr_store_exec(s, sql) == 0)
        s->space.wal_kept = keep;
}

void pfr_store_space_plan(pfr_store *s)
{
    struct store_space *sp = &s->space;
    uint64_t room = s->wal_budget + sp->spare_bytes; /* the WAL's and the spare file's */
    /* Under the configured cap the WAL is counted at its peak: between a commit and the
     * checkpoint that follows it, the WAL holds the whole transaction, which may be more than
     * the budget. The largest seen is the spare file's size (never below the budget), so the
     * WAL and the spare file take two of it. A reader that stats the files at that moment
     * then still finds them within the cap. */
    sp->db_target = sat_sub(s->max_bytes, 2 * sp->spare_bytes);
    sp->disk_bound = sp->tight = sp->starved = false;
    struct space_now n;
    if (pfr_store_space_measure(s, s->max_bytes, UINT64_MAX, &n) != 0)
        return;
    sp->reserve_bytes = n.reserve;
    uint64_t disk = sat_sub(n.cap, n.shares);
    if (disk < sp->db_target) {
        sp->db_target = disk;
        sp->disk_bound = true;
    }
    sp->tight = n.fs_avail < sat_add(n.reserve, 2 * room);
    sp->starved = n.fs_avail < room;
    wal_keep(s, sp->starved);
}

void pfr_store_space_note_wal(pfr_store *s, uint64_t wal_bytes)
{
    uint64_t top = s->max_bytes / 8 > s->wal_budget ? s->max_bytes / 8 : s->wal_budget;
    if (wal_bytes > s->space.spare_bytes)
        s->space.spare_bytes = wal_bytes < top ? wal_bytes : top;
}

void pfr_store_space_spare_make(pfr_store *s)
{
    struct store_space *sp = &s->space;
    if (!sp->spare_path || sp->starved || size_of(sp->spare_path) >= sp->spare_bytes)
        return;
    int fd = open(sp->spare_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return;
    int rc = posix_fallocate(fd, 0, (off_t)sp->spare_bytes);
    close(fd);
    if (rc != 0)
        unlink(sp->spare_path); /* no half spare: it would be counted as held */
}

void pfr_store_space_spare_drop(pfr_store *s)
{
    if (s->space.spare_path)
        unlink(s->space.spare_path);
}
