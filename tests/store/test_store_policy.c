/*
 * The space policy (store/store_policy.h) as a pure function: figures in, decision out, no
 * database and no file system. What it must decide is told in docs/store.md, "Disk space".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_policy.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

static struct store_policy_out decide(struct store_policy_in in)
{
    struct store_policy_out o;
    pfr_st_policy_decide(&in, &o);
    /* whatever the figures: the database's target and the shares stay within the cap */
    assert_true(o.db_target + o.shares <= o.cap || o.db_target == 0);
    assert_true(o.wal_budget >= 64 * KiB && o.wal_budget <= 4 * MiB);
    assert_true(o.spare_bytes >= o.wal_budget);
    /* the WAL is counted at the largest transaction seen, at least three quarters of the
     * budget, never more than the spare file */
    assert_true(o.wal_share >= o.wal_budget - o.wal_budget / 4 && o.wal_share <= o.spare_bytes);
    return o;
}

/* A large disk: the configured cap, the WAL's budget cap/16 (at most 4 MiB), the target the cap
 * less the WAL's peak (three quarters of the budget while no larger transaction has been seen)
 * and the spare file (the budget). */
static void test_configured(void **state)
{
    (void)state;
    struct store_policy_out o = decide((struct store_policy_in){
        .max_bytes = 512 * MiB, .fs_bytes = 100 * GiB, .fs_avail = 50 * GiB, .reserve = 5 * GiB});
    assert_int_equal(o.cap, 512 * MiB);
    assert_int_equal(o.reason, PFR_STORE_CAP_CONFIGURED);
    assert_int_equal(o.wal_budget, 4 * MiB);
    assert_int_equal(o.spare_bytes, 4 * MiB);
    assert_int_equal(o.wal_share, 3 * MiB);
    assert_int_equal(o.db_target, 512 * MiB - 7 * MiB);
    assert_false(o.disk_bound);
    assert_false(o.tight);
    assert_false(o.starved);
    /* a 2 MiB cap: budget and spare 128 KiB, the WAL's share 96 KiB */
    o = decide((struct store_policy_in){
        .max_bytes = 2 * MiB, .fs_bytes = 100 * GiB, .fs_avail = 50 * GiB, .reserve = 5 * GiB});
    assert_int_equal(o.wal_budget, 128 * KiB);
    assert_int_equal(o.spare_bytes, 128 * KiB);
    assert_int_equal(o.wal_share, 96 * KiB);
    assert_int_equal(o.db_target, 2 * MiB - 224 * KiB);
    /* the largest WAL seen sizes the spare file, up to an eighth of the cap */
    o = decide((struct store_policy_in){.max_bytes = 2 * MiB,
                                        .fs_bytes = 100 * GiB,
                                        .fs_avail = 50 * GiB,
                                        .reserve = 5 * GiB,
                                        .wal_seen = 10 * MiB});
    assert_int_equal(o.spare_bytes, 256 * KiB);
}

/* Issue 31, eleventh round: the WAL is counted at the largest transaction seen, not the
 * budget: the scaled 200-service ring (2.56 MiB cap, a 167,772-byte budget) whose largest is
 * 36 frames (148,352 bytes) gives the database 19,420 bytes more. Never below three quarters of
 * the budget; the spare file stays at the budget at least (a disk filled at once: the WAL's
 * room); a reader counts both at the budget. */
static void test_wal_peak(void **state)
{
    (void)state;
    uint64_t cap = 2684354, budget = cap / 16; /* 167,772 */
    struct store_policy_in in = {
        .max_bytes = cap, .fs_bytes = 100 * GiB, .fs_avail = 50 * GiB, .wal_seen = 148352};
    struct store_policy_out o = decide(in);
    assert_int_equal(o.wal_budget, budget);
    assert_int_equal(o.wal_share, 148352);
    assert_int_equal(o.spare_bytes, budget);
    assert_int_equal(o.db_target, cap - 148352 - budget);
    /* a small largest (a young ring): three quarters of the budget */
    in.wal_seen = 40 * KiB;
    o = decide(in);
    assert_int_equal(o.wal_share, budget - budget / 4);
    assert_int_equal(pfr_st_policy_wal_peak(0, budget, cap), budget - budget / 4);
    /* larger than the budget: the largest for both, up to an eighth of the cap */
    in.wal_seen = 200000;
    o = decide(in);
    assert_int_equal(o.wal_share, 200000);
    assert_int_equal(o.spare_bytes, 200000);
    assert_int_equal(o.db_target, cap - 400000);
    assert_int_equal(pfr_st_policy_wal_peak(UINT64_MAX, budget, cap), cap / 8);
    /* a reader counts the WAL and the spare file at the budget */
    in.wal_seen = 0;
    in.reader = true;
    o = decide(in);
    assert_int_equal(o.wal_share, budget);
    assert_int_equal(o.spare_bytes, budget);
}

/* Issue 31, default cap (512 MiB): the shares scale to the room the disk gives, and a full disk
 * leaves the database the pages its file holds (before: a 4 MiB WAL budget and spare file left a
 * 12 MiB file system's ring a target of 0, and a full disk dropped the cap to the 4 MiB floor). */
static void test_small_and_full_disk(void **state)
{
    (void)state;
    /* a fresh ring on 12 MiB: the reserve (half of it) leaves 6 MiB */
    struct store_policy_out o = decide((struct store_policy_in){.max_bytes = 512 * MiB,
                                                                .fs_bytes = 12 * MiB,
                                                                .fs_avail = 11 * MiB,
                                                                .db_file = 96 * KiB,
                                                                .reserve = 6 * MiB});
    assert_int_equal(o.reason, PFR_STORE_CAP_DISK_RESERVE);
    assert_true(o.cap >= 5 * MiB && o.cap <= 6 * MiB);
    assert_true(o.wal_budget <= 6 * MiB / 16);
    assert_true(o.db_target >= 4 * MiB);
    assert_false(o.starved);
    /* it claims the floor's room less the shares, within the target (issue 31, young rings) */
    assert_true(o.db_pad >= 3 * MiB && o.db_pad <= o.db_target);
    assert_true(o.db_pad + o.shares <= PFR_STORE_SPACE_FLOOR);
    /* an hour-old ring (11 MB, the 4 MiB spare file) on a full 128 MiB file system: it keeps
     * what its file holds, and makes no spare file */
    struct store_policy_in full = {.max_bytes = 512 * MiB,
                                   .fs_bytes = 128 * MiB,
                                   .db_file = 11 * MiB,
                                   .spare_file = 4 * MiB,
                                   .wal_seen = 4 * MiB,
                                   .reserve = 64 * MiB};
    o = decide(full);
    assert_true(o.disk_bound);
    assert_int_equal(o.db_target, 11 * MiB);
    assert_true(o.cap >= 15 * MiB);
    assert_true(o.starved);
    /* the same with the spare file given to the WAL: still all the file holds */
    full.wal_file = full.spare_file;
    full.spare_file = 0;
    o = decide(full);
    assert_int_equal(o.db_target, 11 * MiB);
    /* free space short of the reserve, not full: no growth, nothing given back */
    o = decide((struct store_policy_in){.max_bytes = 512 * MiB,
                                        .fs_bytes = 128 * MiB,
                                        .fs_avail = 20 * MiB,
                                        .db_file = 30 * MiB,
                                        .spare_file = 4 * MiB,
                                        .wal_seen = 4 * MiB,
                                        .reserve = 64 * MiB});
    assert_int_equal(o.db_target, 30 * MiB);
}

/* Issue 31, young rings: a ring the disk bounds holds the floor's room as free pages while the
 * disk has room (db_pad); once the disk is full, the WAL keeps a recent transaction's room and
 * a quarter more, and the room the ring held (its spare file's too, deleted at the first failed
 * write) is the database's. */
static void test_young_ring(void **state)
{
    (void)state;
    /* (a fresh ring on 12 MiB claims the floor's room: test_small_and_full_disk) free space
     * short of the reserve: nothing claimed */
    struct store_policy_out o = decide((struct store_policy_in){.max_bytes = 512 * MiB,
                                                                .fs_bytes = 12 * MiB,
                                                                .fs_avail = 5 * MiB,
                                                                .db_file = 96 * KiB,
                                                                .reserve = 6 * MiB});
    assert_int_equal(o.db_pad, 0);
    /* full: the ring held 1,430 KiB when the disk filled; its spare file is gone (400 KiB free),
     * its WAL holds 330 KiB, its last transactions took up to 300 KiB of WAL */
    struct store_policy_in full = {.max_bytes = 512 * MiB,
                                   .fs_bytes = 12 * MiB,
                                   .fs_avail = 400 * KiB,
                                   .db_file = 700 * KiB,
                                   .wal_file = 330 * KiB,
                                   .wal_seen = 400 * KiB,
                                   .wal_recent = 300 * KiB,
                                   .room_held = 1430 * KiB,
                                   .reserve = 6 * MiB};
    o = decide(full);
    assert_true(o.starved && o.disk_bound);
    assert_int_equal(o.wal_keep, 375 * KiB);
    assert_int_equal(o.wal_owed, 45 * KiB);
    assert_int_equal(o.db_target, 1055 * KiB); /* before: the 700 KiB its file held */
    assert_int_equal(o.db_pad, 0);
    /* another program took the free space since: the database keeps what its file holds, less
     * what the WAL is still owed */
    full.fs_avail = 0;
    o = decide(full);
    assert_int_equal(o.db_target, 655 * KiB);
    /* the same without a measured recent transaction (a restarted writer): the largest seen */
    full.fs_avail = 400 * KiB;
    full.wal_recent = 0;
    o = decide(full);
    assert_int_equal(o.wal_keep, 400 * KiB);
}

/* Room made in transactions of its own (room_txn): the steps each may take follow the WAL they
 * wrote against the budget (41 frames: the scaled 200-service ring's 2.56 MiB cap). */
static void test_room_steps(void **state)
{
    (void)state;
    /* past three quarters of the budget: halved (the room for a drifting hour's base, 20 steps
     * in one transaction, wrote 55 frames) */
    assert_int_equal(pfr_st_policy_room_steps(20, 20, 55, 41, true), 10);
    assert_int_equal(pfr_st_policy_room_steps(8, 8, 31, 41, false), 4);
    assert_int_equal(pfr_st_policy_room_steps(1, 1, 80, 41, true), 1);
    /* under half with room still lacking after every step allowed: grown */
    assert_int_equal(pfr_st_policy_room_steps(8, 8, 20, 41, true), 11);
    /* between half and three quarters, or the room made, or fewer steps than allowed: kept */
    assert_int_equal(pfr_st_policy_room_steps(8, 8, 25, 41, true), 8);
    assert_int_equal(pfr_st_policy_room_steps(8, 8, 12, 41, false), 8);
    assert_int_equal(pfr_st_policy_room_steps(8, 3, 12, 41, true), 8);
    assert_int_equal(pfr_st_policy_room_steps(0, 0, 0, 41, false), 1);
}

/* A piece of the coarsest is made in a transaction of room alone, first in it: the appends'
 * transaction starts again after one (once: then made there), a transaction of room that took
 * other steps ends before it; the first step of one makes it. */
static void test_piece_when(void **state)
{
    (void)state;
    assert_int_equal(pfr_st_policy_piece_when(true, false, 1), PIECE_APART);
    assert_int_equal(pfr_st_policy_piece_when(true, false, 5), PIECE_APART);
    assert_int_equal(pfr_st_policy_piece_when(true, true, 3), PIECE_NOW);
    assert_int_equal(pfr_st_policy_piece_when(false, false, 1), PIECE_NOW);
    assert_int_equal(pfr_st_policy_piece_when(false, false, 2), PIECE_NEXT);
    assert_int_equal(pfr_st_policy_piece_when(false, true, 4), PIECE_NEXT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configured),          cmocka_unit_test(test_wal_peak),
        cmocka_unit_test(test_small_and_full_disk), cmocka_unit_test(test_young_ring),
        cmocka_unit_test(test_room_steps),          cmocka_unit_test(test_piece_when),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
