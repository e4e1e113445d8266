/*
 * The store's key tables (store/store_util.h): a table copied whole (pfr_st_ktab_copy, how a
 * writer adopts a chain's dictionary) holds the same keys at the same indexes as one interned
 * key by key, and interns on from there; a table taken over whole (pfr_st_ktab_move) the same,
 * without the copy.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store_util.h"

static void fill(struct ktab *t, uint32_t n)
{
    char key[32];
    for (uint32_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof(key), "key-%u%s", i, i % 3 ? "" : "-longer-than-eight");
        bool added;
        assert_int_equal(pfr_st_ktab_intern(t, key, (size_t)len, &added), i);
        assert_true(added);
    }
}

static void copy_keeps_indexes(void **state)
{
    (void)state;
    struct ktab src = {0}, dst = {0};
    fill(&src, 1000);
    /* a prefix, as a chain whose tables hold a later layer's keys too */
    assert_int_equal(pfr_st_ktab_copy(&dst, &src, 700), 0);
    assert_int_equal(dst.n, 700);
    for (uint32_t i = 0; i < 700; i++) {
        size_t a, b;
        const uint8_t *ka = ktab_key(&src, i, &a), *kb = ktab_key(&dst, i, &b);
        assert_int_equal(a, b);
        assert_memory_equal(ka, kb, a);
        assert_int_equal(kb[b], 0); /* still a C string */
        assert_int_equal(pfr_st_ktab_find(&dst, ka, a), i);
    }
    /* the keys past the prefix are not there, and interning goes on at the next index */
    size_t len;
    const uint8_t *k = ktab_key(&src, 700, &len);
    assert_int_equal(pfr_st_ktab_find(&dst, k, len), -1);
    bool added;
    assert_int_equal(pfr_st_ktab_intern(&dst, k, len, &added), 700);
    assert_true(added);
    assert_int_equal(pfr_st_ktab_intern(&dst, "key-5", 5, &added), 5);
    assert_false(added);
    /* copied again over a table in use: the old keys go */
    assert_int_equal(pfr_st_ktab_copy(&dst, &src, 3), 0);
    assert_int_equal(dst.n, 3);
    assert_int_equal(pfr_st_ktab_find(&dst, "key-5", 5), -1);
    assert_int_equal(pfr_st_ktab_find(&dst, "key-1", 5), 1);
    pfr_st_ktab_free(&src);
    pfr_st_ktab_free(&dst);
}

static void copy_empty_and_too_many(void **state)
{
    (void)state;
    struct ktab src = {0}, dst = {0};
    assert_int_equal(pfr_st_ktab_copy(&dst, &src, 0), 0);
    assert_int_equal(dst.n, 0);
    bool added;
    assert_int_equal(pfr_st_ktab_intern(&dst, "", 0, &added), 0);
    assert_true(added);
    fill(&src, 4);
    assert_int_equal(pfr_st_ktab_copy(&dst, &src, 5), -EINVAL);
    pfr_st_ktab_free(&src);
    pfr_st_ktab_free(&dst);
}

/* A corrupt dictionary can hold a key twice: interning would fold them into one index and shift
 * every later one, so the copy says so instead. */
static void copy_refuses_equal_keys(void **state)
{
    (void)state;
    struct ktab src = {0}, dst = {0};
    assert_int_equal(pfr_st_ktab_add(&src, "a", 1), 0);
    assert_int_equal(pfr_st_ktab_add(&src, "bb", 2), 1);
    assert_int_equal(pfr_st_ktab_add(&src, "a", 1), 2);
    assert_int_equal(pfr_st_ktab_copy(&dst, &src, 2), 0);
    assert_int_equal(pfr_st_ktab_copy(&dst, &src, 3), -EEXIST);
    pfr_st_ktab_free(&src);
    pfr_st_ktab_free(&dst);
}

/* A table taken over whole: the same keys at the same indexes, interning on from there, and
 * nothing left in the source; a prefix is copied instead (the source keeps its keys). */
static void move_takes_over(void **state)
{
    (void)state;
    struct ktab src = {0}, dst = {0}, want = {0};
    fill(&src, 1000);
    fill(&want, 1000);
    fill(&dst, 5); /* a table in use: its keys go */
    const uint8_t *arena = src.arena;
    assert_int_equal(pfr_st_ktab_move(&dst, &src, 1000), 0);
    assert_ptr_equal(dst.arena, arena); /* taken, not copied */
    assert_int_equal(src.n, 0);
    assert_null(src.arena);
    assert_int_equal(dst.n, 1000);
    for (uint32_t i = 0; i < 1000; i++) {
        size_t a;
        const uint8_t *k = ktab_key(&want, i, &a);
        assert_int_equal(pfr_st_ktab_find(&dst, k, a), i);
    }
    bool added;
    assert_int_equal(pfr_st_ktab_intern(&dst, "new", 3, &added), 1000);
    assert_true(added);
    /* a prefix: copied, the source unchanged */
    assert_int_equal(pfr_st_ktab_move(&src, &want, 10), 0);
    assert_int_equal(src.n, 10);
    assert_int_equal(want.n, 1000);
    assert_int_equal(pfr_st_ktab_find(&src, "key-8", 5), 8);
    /* an empty table, and one whose keys repeat (a corrupt chain) */
    struct ktab empty = {0}, twice = {0};
    assert_int_equal(pfr_st_ktab_move(&dst, &empty, 0), 0);
    assert_int_equal(dst.n, 0);
    assert_int_equal(pfr_st_ktab_intern(&dst, "", 0, &added), 0);
    assert_int_equal(pfr_st_ktab_add(&twice, "a", 1), 0);
    assert_int_equal(pfr_st_ktab_add(&twice, "a", 1), 1);
    assert_int_equal(pfr_st_ktab_move(&dst, &twice, 2), -EEXIST);
    pfr_st_ktab_free(&src);
    pfr_st_ktab_free(&dst);
    pfr_st_ktab_free(&want);
    pfr_st_ktab_free(&twice);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copy_keeps_indexes),
        cmocka_unit_test(copy_empty_and_too_many),
        cmocka_unit_test(copy_refuses_equal_keys),
        cmocka_unit_test(move_takes_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
