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
    store_policy_decide(&in, &o);
    /* whatever the figures: the database's target and the shares stay within the cap */
    assert_true(o.db_target + o.shares <= o.cap || o.db_target == 0);
    assert_true(o.wal_budget >= 64 * KiB && o.wal_budget <= 4 * MiB);
    assert_true(o.spare_bytes >= o.wal_budget);
    return o;
}

/* A large disk: the configured cap, the WAL's budget cap/16 (at most 4 MiB), the target the cap
 * less the WAL's peak and the spare file. */
static void test_configured(void **state)
{
    (void)state;
    struct store_policy_out o = decide((struct store_policy_in){
        .max_bytes = 512 * MiB, .fs_bytes = 100 * GiB, .fs_avail = 50 * GiB, .reserve = 5 * GiB});
    assert_int_equal(o.cap, 512 * MiB);
    assert_int_equal(o.reason, PFR_STORE_CAP_CONFIGURED);
    assert_int_equal(o.wal_budget, 4 * MiB);
    assert_int_equal(o.spare_bytes, 4 * MiB);
    assert_int_equal(o.db_target, 512 * MiB - 8 * MiB);
    assert_false(o.disk_bound);
    assert_false(o.tight);
    assert_false(o.starved);
    /* a 2 MiB cap: budget and spare 128 KiB */
    o = decide((struct store_policy_in){
        .max_bytes = 2 * MiB, .fs_bytes = 100 * GiB, .fs_avail = 50 * GiB, .reserve = 5 * GiB});
    assert_int_equal(o.wal_budget, 128 * KiB);
    assert_int_equal(o.db_target, 2 * MiB - 256 * KiB);
    /* the largest WAL seen sizes the spare file, up to an eighth of the cap */
    o = decide((struct store_policy_in){.max_bytes = 2 * MiB,
                                        .fs_bytes = 100 * GiB,
                                        .fs_avail = 50 * GiB,
                                        .reserve = 5 * GiB,
                                        .wal_seen = 10 * MiB});
    assert_int_equal(o.spare_bytes, 256 * KiB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
