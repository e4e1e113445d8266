/*
 * Space policy (store_policy.h): pure functions of the measurements. The reserve and the cap in
 * force are also public (pfr_store_reserve_bytes, pfr_store_effective_cap).
 */
#include "store_policy.h"

const char *pfr_store_cap_reason_name(int reason)
{
    return reason == PFR_STORE_CAP_DISK_RESERVE ? "disk free space reserve" : "configured";
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
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
    /* Short of the reserve the ring stops growing, but keeps what it holds: a disk another
     * program fills is no reason to give its history up. The next writes reuse the pages its
     * oldest chunks leave (issue 31). It may grow to the floor where the disk has room for it,
     * whatever the reserve, so that a small disk still records. */
    uint64_t floor = min_u64(min_u64(room, max_bytes), PFR_STORE_SPACE_FLOOR);
    uint64_t cap = max_u64(max_u64(allowed, files_bytes), floor);
    bool disk = cap < max_bytes;
    if (reason)
        *reason = disk ? PFR_STORE_CAP_DISK_RESERVE : PFR_STORE_CAP_CONFIGURED;
    return disk ? cap : max_bytes;
}

uint64_t pfr_st_policy_wal_budget(uint64_t cap)
{
    return min_u64(max_u64(cap / 16, 64u << 10), 4u << 20);
}

/* The largest transaction's WAL seen, at least floor, at most an eighth of the configured cap
 * max_bytes (or the budget). */
static uint64_t seen_within(uint64_t wal_seen, uint64_t floor, uint64_t budget, uint64_t max_bytes)
{
    return min_u64(max_u64(wal_seen, floor), max_u64(max_bytes / 8, budget));
}

uint64_t pfr_st_policy_wal_peak(uint64_t wal_seen, uint64_t budget, uint64_t max_bytes)
{
    /* Not below three quarters of the budget: the writer keeps its transactions of room near
     * that (pfr_st_policy_room_steps) and a young ring has seen few. Not the budget itself: with
     * the hour's base written apart the largest transaction is often smaller, and a WAL counted
     * at the budget took the database's room (issue 31). */
    return seen_within(wal_seen, budget - budget / 4, budget, max_bytes);
}

/* The disk is full (issue 31): the room the ring holds is shared out anew. A young ring holds
 * most of it in the WAL and the spare file when the disk fills (both sized for the largest
 * transaction seen, or the WAL grown while a reader held it), the database only its own pages:
 * so each interval's new dictionaries took the place of most of its chunks. Now the WAL keeps the
 * room of one recent transaction (its blocks past that are given back after a checkpoint), the
 * spare file is not made again until there is room, and the rest is the database's, as far as
 * the free space still holds the room the ring held when the disk filled (another program may
 * have taken it since). */
static void decide_full(const struct store_policy_in *in, uint64_t held, uint64_t budget,
                        uint64_t peak, struct store_policy_out *o)
{
    /* a quarter more than the largest recent transaction: on a busy host they grow (the
     * intervals a slow writer folds together, new services' dictionaries) */
    uint64_t recent = in->wal_recent ? min_u64(in->wal_recent, peak) : 0;
    uint64_t keep = max_u64(recent ? sat_add(recent, recent / 4) : peak, budget);
    uint64_t room = max_u64(held, min_u64(in->room_held, sat_add(held, in->fs_avail)));
    uint64_t free_beyond = sat_sub(in->fs_avail, room - held);
    /* the WAL's room still to take from the free space (the spare file's is its own) */
    uint64_t owed = sat_sub(keep, sat_add(in->wal_file, in->spare_file));
    o->room = room;
    o->wal_keep = keep;
    o->wal_owed = owed;
    o->shares = keep;
    o->cap = pfr_store_effective_cap(in->max_bytes, room, free_beyond, in->reserve, &o->reason);
    /* The database grows only into free blocks (the WAL's past its share come back at its next
     * checkpoint, the spare file's when it is deleted): never into what the WAL is owed. */
    uint64_t grow = sat_add(in->db_file, sat_sub(in->fs_avail, owed));
    o->db_target =
        min_u64(min_u64(sat_sub(o->cap, keep), grow), sat_sub(in->max_bytes, 2 * o->spare_bytes));
    o->disk_bound = true;
    o->tight = true;
    o->starved = true;
}

void pfr_st_policy_decide(const struct store_policy_in *in, struct store_policy_out *o)
{
    *o = (struct store_policy_out){0};
    /* The shares are sized from the room the disk gives the ring (what its files hold, or what
     * the reserve leaves, up to the configured cap), not from the cap alone: a 512 MiB cap's
     * 4 MiB WAL budget and spare file would take all of a 12 MiB file system's room, or of a
     * full disk's, and leave the database none. */
    uint64_t held = sat_add(sat_add(in->db_file, in->wal_file), in->spare_file);
    uint64_t room_cap =
        pfr_store_effective_cap(in->max_bytes, held, in->fs_avail, in->reserve, NULL);
    uint64_t budget = pfr_st_policy_wal_budget(room_cap);
    /* The WAL's peak: between a commit and the checkpoint after it the WAL holds the whole
     * transaction, the largest seen (at least three quarters of the budget, up to an eighth of
     * the configured cap). A full disk gives the WAL no more than the blocks it holds and the
     * spare file's. */
    uint64_t peak = pfr_st_policy_wal_peak(in->wal_seen, budget, in->max_bytes);
    /* The spare file is as large as the largest seen, at least the budget (a disk filled at
     * once may leave the WAL no blocks of its own), up to an eighth of the room (made while the
     * disk has room, it is what the WAL may grow into once the disk is full). A reader counts
     * it as it finds it, at least at the WAL's budget. */
    uint64_t top = max_u64(room_cap / 8, budget);
    uint64_t largest = seen_within(in->wal_seen, budget, budget, in->max_bytes);
    uint64_t spare = in->reader ? budget : min_u64(largest, top);
    /* The WAL's share: its peak, but never more than the spare file (a disk-bound ring's) */
    uint64_t share = in->reader ? budget : min_u64(peak, spare);
    o->wal_budget = budget;
    o->spare_bytes = spare;
    o->wal_share = share;
    /* The WAL and the spare file are counted at their shares, or more when they hold more: the
     * room they may still take is not free for the database, nor what they hold (on a full
     * disk the WAL keeps its blocks). */
    uint64_t w_b = max_u64(in->wal_file, share), spare_b = max_u64(in->spare_file, spare);
    uint64_t owed = (w_b - in->wal_file) + (spare_b - in->spare_file);
    uint64_t avail = sat_sub(in->fs_avail, owed);
    o->shares = w_b + spare_b;
    o->cap = pfr_store_effective_cap(in->max_bytes, sat_add(in->db_file, o->shares), avail,
                                     in->reserve, &o->reason);
    /* Under the configured cap the WAL is counted at its peak: between a commit and the
     * checkpoint that follows it, the WAL holds the whole transaction, which may be more than
     * the budget. The largest seen sizes the WAL's share (never below three quarters of the
     * budget) and the spare file (never below the budget: on a disk filled at once it is most
     * of the WAL's room). A reader that stats the files at that moment then still finds them
     * within the cap. */
    o->db_target = sat_sub(in->max_bytes, share + spare);
    /* Bound by the disk, the database keeps at least the pages its file holds: its free pages
     * are the room the next chunks take, once the oldest are given up for them. */
    uint64_t disk = sat_sub(o->cap, o->shares);
    if (disk < o->db_target) {
        o->db_target = disk;
        o->disk_bound = true;
    }
    o->tight = in->fs_avail < sat_add(in->reserve, 2 * (budget + spare));
    /* Hardly any room: the free space does not hold what the WAL and the spare file are owed,
     * and a budget more. */
    o->starved = in->fs_avail < sat_add(owed, budget);
    o->room = held;
    /* A ring the disk bounds holds the floor's room (less the WAL's and the spare file's
     * shares) from the start, as free pages of its database: a disk filled while the ring is
     * young then leaves it that room, not the few pages its first chunks took, most of its files
     * being the WAL and the spare file then (issue 31). Not on a tight disk: the room is not the
     * ring's to claim there. */
    if (!in->reader && o->reason == PFR_STORE_CAP_DISK_RESERVE && !o->tight)
        o->db_pad =
            min_u64(o->db_target, sat_sub(min_u64(o->cap, PFR_STORE_SPACE_FLOOR), o->shares));
    /* Once the disk has filled, the room stays shared out so until the free space is above the
     * reserve again (the WAL's blocks given back must not make the spare file again). */
    if (!in->reader && (o->starved || (in->room_held && o->tight)))
        decide_full(in, held, budget, largest, o);
}

size_t pfr_st_policy_room_steps(size_t cap, size_t steps, uint64_t frames, uint64_t budget,
                                bool more)
{
    if (frames * 4 > budget * 3)
        return steps > 1 ? steps / 2 : 1;
    if (more && frames * 2 < budget && steps >= cap)
        return steps + steps / 4 + 1;
    return cap ? cap : 1;
}

enum store_piece_when pfr_st_policy_piece_when(bool appends, bool apart_done, size_t steps)
{
    if (appends)
        return apart_done ? PIECE_NOW : PIECE_APART; /* once: the retry's room is made there */
    return steps > 1 ? PIECE_NEXT : PIECE_NOW;
}
