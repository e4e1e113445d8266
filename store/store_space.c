/*
 * Disk space: the ring yields to the file system it lives on. store_policy.c decides from what
 * this file measures (statvfs, the ring's files); this file applies it: the WAL's size limit and
 * the spare file that keeps room for the WAL, so that a disk filled up by another program still
 * lets the writer commit the transactions that give the oldest chunks up and write the newest.
 * Why this shape: docs/store.md, "Disk space".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "store_space.h"

static uint64_t size_of(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int pfr_st_space_open(struct store_space *sp, const char *path, uint64_t max_bytes, bool read_only,
                      const pfr_store_reserve *reserve)
{
    sp->max_bytes = max_bytes;
    sp->read_only = read_only;
    if (reserve)
        sp->reserve = *reserve;
    if (!(sp->db_path = strdup(path)) || asprintf(&sp->wal_path, "%s-wal", path) < 0 ||
        asprintf(&sp->spare_path, "%s-spare", path) < 0) {
        sp->wal_path = sp->spare_path = NULL;
        return -ENOMEM;
    }
    /* The largest WAL seen outlives a restart as the spare file's size (not a recent one: a
     * bulk writer's large batches before do not size this writer's WAL on a full disk). */
    if (!read_only)
        sp->wal_seen = size_of(sp->spare_path);
    return 0;
}

void pfr_st_space_close(struct store_space *sp)
{
    free(sp->db_path);
    free(sp->wal_path);
    free(sp->spare_path);
    sp->db_path = sp->wal_path = sp->spare_path = NULL;
}

uint64_t pfr_st_space_db_file(const struct store_space *sp)
{
    return size_of(sp->db_path);
}

uint64_t pfr_st_space_files(const struct store_space *sp)
{
    return size_of(sp->db_path) + size_of(sp->wal_path) + size_of(sp->spare_path);
}

int pfr_st_space_measure(struct store_space *sp, uint64_t max_bytes, uint64_t reserve,
                         struct space_now *now, struct store_policy_out *out)
{
    memset(now, 0, sizeof(*now));
    struct statvfs v;
    if (statvfs(sp->db_path, &v) != 0)
        return -errno;
    struct store_policy_in in = {
        .max_bytes = max_bytes,
        .fs_bytes = (uint64_t)v.f_blocks * v.f_frsize,
        .fs_avail = (uint64_t)v.f_bavail * v.f_frsize,
        .db_file = size_of(sp->db_path),
        .wal_file = size_of(sp->wal_path),
        .spare_file = size_of(sp->spare_path),
        .wal_seen = sp->wal_seen,
        .reader = sp->read_only,
    };
    if (!sp->read_only) {
        for (size_t i = 0; i < sizeof(sp->wal_last) / sizeof(sp->wal_last[0]); i++)
            if (sp->wal_last[i] > in.wal_recent)
                in.wal_recent = sp->wal_last[i];
        in.room_held = sp->room_held;
    }
    in.reserve =
        reserve != UINT64_MAX ? reserve : pfr_store_reserve_bytes(&sp->reserve, in.fs_bytes);
    pfr_st_policy_decide(&in, out);
    now->fs_bytes = in.fs_bytes;
    now->fs_avail = in.fs_avail;
    now->reserve = in.reserve;
    now->cap = out->cap;
    now->reason = out->reason;
    return 0;
}

bool pfr_st_space_growth_fits(struct store_space *sp, uint64_t db_bytes)
{
    uint64_t file = size_of(sp->db_path);
    if (db_bytes <= file)
        return true;
    struct statvfs v;
    if (statvfs(sp->db_path, &v) != 0)
        return true; /* not measured: the disk decides, as before */
    /* The WAL may still take its budget (on a full disk: the room it is owed) before the
     * checkpoint extends the file. */
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    uint64_t wal = sp->now.wal_budget > sp->now.wal_owed ? sp->now.wal_budget : sp->now.wal_owed;
    return db_bytes - file <= (avail > wal ? avail - wal : 0);
}

uint64_t pfr_st_space_wal_file(const struct store_space *sp)
{
    return size_of(sp->wal_path);
}

uint64_t pfr_st_space_wal_deficit(struct store_space *sp)
{
    struct statvfs v;
    if (!sp->now.starved || statvfs(sp->db_path, &v) != 0)
        return 0;
    uint64_t has = size_of(sp->wal_path) + (uint64_t)v.f_bavail * v.f_frsize;
    uint64_t lack = sp->now.wal_keep > has ? sp->now.wal_keep - has : 0;
    return lack < has / 2 ? lack : has / 2;
}

uint64_t pfr_st_space_wal_limit(const struct store_space *sp)
{
    uint64_t budget = sp->now.wal_budget, share = sp->now.wal_share;
    return share && share < budget ? share : budget;
}

/* journal_size_limit: the WAL's share in force (its budget, or the peak the database's target
 * counts it at when that is less), or off while the disk is starved (blocks given back then go to
 * whichever program fills the disk); the automatic checkpoint every half budget in force (a small
 * disk's budget is a fraction of the cap's). */
static void wal_limit(struct store_space *sp, struct store_db *sql, bool keep, uint64_t budget)
{
    uint64_t want = keep ? UINT64_MAX : pfr_st_space_wal_limit(sp);
    if (want == sp->wal_limit && budget == sp->wal_budget_set)
        return;
    char q[128];
    snprintf(q, sizeof(q), "PRAGMA journal_size_limit = %lld; PRAGMA wal_autocheckpoint = %llu",
             keep ? -1ll : (long long)want,
             (unsigned long long)(budget / 2 / (sql->page_size ? sql->page_size : 4096) + 1));
    if (pfr_st_exec(sql, q) == 0) {
        sp->wal_limit = want;
        sp->wal_budget_set = budget;
        sp->wal_kept = keep;
    }
}

void pfr_st_space_plan(struct store_space *sp, struct store_db *sql)
{
    struct space_now n;
    if (pfr_st_space_measure(sp, sp->max_bytes, UINT64_MAX, &n, &sp->now) != 0) {
        /* not measured: the configured cap's shares */
        struct store_policy_in in = {
            .max_bytes = sp->max_bytes, .fs_avail = UINT64_MAX, .wal_seen = sp->wal_seen};
        pfr_st_policy_decide(&in, &sp->now);
        sp->now.tight = sp->now.starved = false;
        return;
    }
    sp->reserve_bytes = n.reserve;
    /* The room the ring held when the disk filled stays its own while the disk is full (the
     * WAL's and the spare file's past one transaction become the database's); forgotten once
     * the free space is above the reserve again. */
    if (sp->now.starved) {
        if (sp->now.room > sp->room_held)
            sp->room_held = sp->now.room;
    } else if (!sp->now.tight) {
        sp->room_held = 0;
    }
    wal_limit(sp, sql, sp->now.starved, sp->now.wal_budget);
}

void pfr_st_space_note_wal(struct store_space *sp, uint64_t wal_bytes)
{
    if (wal_bytes > sp->wal_seen)
        sp->wal_seen = wal_bytes;
    sp->wal_last[sp->wal_next++ % (sizeof(sp->wal_last) / sizeof(sp->wal_last[0]))] = wal_bytes;
}

void pfr_st_space_spare_make(struct store_space *sp)
{
    uint64_t want = sp->now.spare_bytes;
    if (!sp->spare_path || sp->now.starved || !want || size_of(sp->spare_path) >= want)
        return;
    int fd = open(sp->spare_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return;
    int rc = posix_fallocate(fd, 0, (off_t)want);
    close(fd);
    if (rc != 0)
        unlink(sp->spare_path); /* no half spare: it would be counted as held */
}

bool pfr_st_space_spare_held(const struct store_space *sp)
{
    return sp->spare_path && size_of(sp->spare_path) > 0;
}

void pfr_st_space_spare_drop(struct store_space *sp)
{
    if (sp->spare_path)
        unlink(sp->spare_path);
}
