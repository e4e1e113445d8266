/* pfr_membudget: levels with hysteresis, what each level allows, the resident set read from
 * a statm file, refusals counted by user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "pfr_membudget.h"

#define MiB (1024ull * 1024)

static void levels(void **state)
{
    (void)state;
    const uint64_t b = 64 * MiB;
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OK, 40 * MiB, b), PFR_MEM_OK);
    /* between 3/4 and 7/8: stays where it was (OK stays OK, TIGHT stays TIGHT) */
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OK, 50 * MiB, b), PFR_MEM_OK);
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_TIGHT, 50 * MiB, b), PFR_MEM_TIGHT);
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OVER, 50 * MiB, b), PFR_MEM_TIGHT);
    /* between 7/8 and the budget: TIGHT, or OVER until it falls below 7/8 */
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OK, 60 * MiB, b), PFR_MEM_TIGHT);
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OVER, 60 * MiB, b), PFR_MEM_OVER);
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OK, 65 * MiB, b), PFR_MEM_OVER);
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OVER, 47 * MiB, b), PFR_MEM_OK);
    assert_int_equal(pfr_membudget_next_level(PFR_MEM_OVER, 900 * MiB, 0), PFR_MEM_OK);
}

static void write_statm(const char *path, unsigned long long pages)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%llu %llu 100 10 0 200 0\n", pages * 2, pages);
    fclose(f);
}

/* A 64 MiB budget measured from a statm file of its own at path (a mkstemp template). */
static pfr_membudget *budget_on_file(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    pfr_membudget *b;
    assert_int_equal(pfr_membudget_new(64 * MiB, path, &b), 0);
    return b;
}

/* A cache's bound follows the headroom, down to its floor: a quarter of its setting, but never
 * above an eighth of the budget (a 512M symbol cache held 128 MB under a 64 MiB budget, and
 * the recorder, over it, refused every new program's symbols). */
static void cache_bound(void **state)
{
    (void)state;
    char path[] = "/tmp/pfr-statm-XXXXXX";
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    pfr_membudget *b = budget_on_file(path);
    write_statm(path, 32 * MiB / page); /* headroom: 48 - 32 = 16 MiB */
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OK);
    int64_t room = pfr_membudget_headroom(b);
    assert_int_equal(pfr_membudget_cache_bound(b, 32 * MiB, 10 * MiB), 10 * MiB + room / 2);
    assert_int_equal(pfr_membudget_cache_bound(b, 12 * MiB, 10 * MiB), 12 * MiB); /* setting */
    write_statm(path, 80 * MiB / page); /* over: the floors */
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OVER);
    assert_int_equal(pfr_membudget_cache_bound(b, 32 * MiB, 20 * MiB), 8 * MiB);
    assert_int_equal(pfr_membudget_cache_bound(b, 512 * MiB, 20 * MiB), 8 * MiB);  /* not 128 */
    assert_int_equal(pfr_membudget_cache_bound(b, 512 * MiB, 60 * MiB), 44 * MiB); /* half back */
    assert_int_equal(pfr_membudget_cache_bound(b, 16 * MiB, 20 * MiB), 4 * MiB);
    pfr_membudget_free(b);
    unlink(path);
    /* no budget: the setting */
    assert_int_equal(pfr_membudget_cache_bound(NULL, 512 * MiB, 600 * MiB), 512 * MiB);
}

/* Decisions measure again once the last measure is older than their age (the daemon no longer
 * wakes every second to measure an idle recorder), and take a recent one as it is. */
static void decisions_measure(void **state)
{
    (void)state;
    char path[] = "/tmp/pfr-statm-XXXXXX";
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    pfr_membudget *b = budget_on_file(path);
    pfr_membudget_set_fresh(b, 0); /* every decision measures */
    write_statm(path, 10 * MiB / page);
    assert_true(pfr_membudget_allow(b, PFR_MEM_SYMBOLS, 30 * MiB)); /* no update called */
    assert_int_equal(pfr_membudget_level(b), PFR_MEM_OK);
    write_statm(path, 70 * MiB / page);
    assert_false(pfr_membudget_allow(b, PFR_MEM_SYMBOLS, 1));
    assert_int_equal(pfr_membudget_level(b), PFR_MEM_OVER);
    write_statm(path, 20 * MiB / page);
    assert_int_equal(pfr_membudget_headroom(b), 48 * MiB - 20 * MiB / page * page);
    assert_int_equal(pfr_membudget_level(b), PFR_MEM_OK);
    write_statm(path, 70 * MiB / page);
    assert_true(pfr_membudget_cache_bound(b, 512 * MiB, 60 * MiB) < 60 * MiB); /* over: back */
    pfr_membudget_set_fresh(b, 3600 * 1000000000LL); /* a measure an hour old still stands */
    write_statm(path, 10 * MiB / page);
    assert_false(pfr_membudget_allow(b, PFR_MEM_SYMBOLS, 1));
    pfr_membudget_stats st;
    pfr_membudget_stats_get(b, &st);
    assert_int_equal(st.rss_bytes, 70 * MiB / page * page);
    assert_int_equal(st.refused[PFR_MEM_SYMBOLS], 2);
    pfr_membudget_free(b);
    unlink(path);
}

static void measured(void **state)
{
    (void)state;
    char path[] = "/tmp/pfr-statm-XXXXXX";
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    pfr_membudget *b = budget_on_file(path);
    write_statm(path, 10 * MiB / page);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OK);
    assert_true(pfr_membudget_allow(b, PFR_MEM_SYMBOLS, 30 * MiB));
    write_statm(path, 40 * MiB / page);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OK);
    assert_true(pfr_membudget_allow(b, PFR_MEM_UNWIND, 16 * MiB));  /* up to 7/8: yes */
    assert_false(pfr_membudget_allow(b, PFR_MEM_UNWIND, 17 * MiB)); /* past it: no */
    assert_true(pfr_membudget_allow(b, PFR_MEM_UNWIND, MiB));
    assert_int_equal(pfr_membudget_headroom(b), 48 * MiB - 40 * MiB / page * page);
    write_statm(path, 60 * MiB / page);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_TIGHT);
    assert_true(pfr_membudget_allow(b, PFR_MEM_UNWIND, MiB));      /* small: yes */
    assert_false(pfr_membudget_allow(b, PFR_MEM_UNWIND, 2 * MiB)); /* over 1/64: no */
    write_statm(path, 70 * MiB / page);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OVER);
    assert_false(pfr_membudget_allow(b, PFR_MEM_GOHEAP, 1));
    assert_true(pfr_membudget_headroom(b) < 0); /* over: negative */
    assert_false(pfr_membudget_allow(b, PFR_MEM_SYMBOLS, 1));
    pfr_membudget_stats st;
    pfr_membudget_stats_get(b, &st);
    assert_int_equal(st.rss_bytes, 70 * MiB / page * page);
    assert_int_equal(st.peak_bytes, 70 * MiB / page * page);
    assert_int_equal(st.level, PFR_MEM_OVER);
    assert_int_equal(st.over_intervals, 1);
    assert_int_equal(st.refused[PFR_MEM_SYMBOLS], 1);
    assert_int_equal(st.refused[PFR_MEM_UNWIND], 2);
    assert_int_equal(st.refused[PFR_MEM_GOHEAP], 1);
    write_statm(path, 20 * MiB / page);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OK);
    pfr_membudget_stats_get(b, &st);
    assert_int_equal(st.peak_bytes, 70 * MiB / page * page);
    /* unreadable (the descriptor is kept: an empty read), then gone: the level stays */
    fclose(fopen(path, "w"));
    assert_true(pfr_membudget_update(b) < 0);
    assert_int_equal(pfr_membudget_level(b), PFR_MEM_OK);
    unlink(path);
    assert_true(pfr_membudget_update(b) < 0);
    assert_int_equal(pfr_membudget_level(b), PFR_MEM_OK);
    pfr_membudget_free(b);
    /* the real one, off: everything allowed whatever the resident set */
    assert_int_equal(pfr_membudget_new(0, NULL, &b), 0);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OK);
    pfr_membudget_stats_get(b, &st);
    assert_true(st.rss_bytes > 0);
    assert_true(pfr_membudget_allow(b, PFR_MEM_SYMBOLS, 1ull << 40));
    pfr_membudget_free(b);
    assert_true(pfr_membudget_allow(NULL, PFR_MEM_SYMBOLS, 1ull << 40));
    assert_true(pfr_membudget_headroom(NULL) == INT64_MAX);
}

/* A brief cost (held only while its asker runs) is paid near the budget too while the resident
 * set plus it stays below 15/16 of the budget; never over the budget. */
static void brief(void **state)
{
    (void)state;
    char path[] = "/tmp/pfr-statm-XXXXXX";
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    pfr_membudget *b = budget_on_file(path);
    write_statm(path, 57 * MiB / page); /* past 7/8 of 64 MiB: TIGHT */
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_TIGHT);
    /* an unwind table's read-back of 1.4 MB: large for pfr_membudget_allow, not as brief */
    assert_false(pfr_membudget_allow(b, PFR_MEM_UNWIND, 1400000));
    assert_true(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, 1400000));
    assert_true(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, 3 * MiB)); /* 60 MiB: the line */
    assert_false(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, 3 * MiB + 1));
    assert_true(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, MiB)); /* small: as ever */
    write_statm(path, 61 * MiB / page); /* still TIGHT, no room for a brief large cost */
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_TIGHT);
    assert_false(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, 1400000));
    assert_true(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, MiB));
    write_statm(path, 65 * MiB / page); /* over: nothing, brief or not */
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OVER);
    assert_false(pfr_membudget_allow_brief(b, PFR_MEM_UNWIND, 1));
    pfr_membudget_stats st;
    pfr_membudget_stats_get(b, &st);
    assert_int_equal(st.refused[PFR_MEM_UNWIND], 4);
    unlink(path);
    pfr_membudget_free(b);
    assert_true(pfr_membudget_allow_brief(NULL, PFR_MEM_UNWIND, 1ull << 40));
}

/* The room a build allowed to start keeps to: 15/16 of the budget less the resident set measured
 * at that moment (not a second before), none when over; a refusal past it is counted. */
static void brief_room(void **state)
{
    (void)state;
    char path[] = "/tmp/pfr-statm-XXXXXX";
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    pfr_membudget *b = budget_on_file(path);
    pfr_membudget_set_fresh(b, 3600ll * 1000000000); /* decisions would not measure again */
    write_statm(path, 20 * MiB / page);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_OK);
    assert_int_equal(pfr_membudget_brief_room(b), 40 * MiB);
    write_statm(path, 50 * MiB / page); /* grown since: the room is measured, not remembered */
    assert_int_equal(pfr_membudget_brief_room(b), 10 * MiB);
    write_statm(path, 61 * MiB / page); /* past the ceiling, not yet over */
    assert_int_equal(pfr_membudget_brief_room(b), 0);
    write_statm(path, 65 * MiB / page);
    assert_int_equal(pfr_membudget_brief_room(b), 0);
    assert_int_equal(pfr_membudget_level(b), PFR_MEM_OVER);
    pfr_membudget_count_refused(b, PFR_MEM_UNWIND);
    pfr_membudget_count_refused(b, PFR_MEM_NUSERS); /* out of range: not counted */
    pfr_membudget_stats st;
    pfr_membudget_stats_get(b, &st);
    assert_int_equal(st.refused[PFR_MEM_UNWIND], 1);
    assert_int_equal(st.refused[PFR_MEM_SYMBOLS] + st.refused[PFR_MEM_GOHEAP], 0);
    unlink(path);
    pfr_membudget_free(b);
    assert_int_equal(pfr_membudget_brief_room(NULL), INT64_MAX);
    pfr_membudget_count_refused(NULL, PFR_MEM_UNWIND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(levels),
        cmocka_unit_test(measured),
        cmocka_unit_test(decisions_measure),
        cmocka_unit_test(cache_bound),
        cmocka_unit_test(brief),
        cmocka_unit_test(brief_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
