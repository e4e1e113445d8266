/*
 * pfr_unwind_index: the rows an entry names always hold the row covering every address of its
 * granule (the one the whole table's search finds), for dense, sparse and clustered tables,
 * addresses below the first row and past the last; the index stays within its share of the
 * rows; small tables get none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "unwind_index.h"
#include "unwind_table.h"

/* The last row with pc <= x in rows [lo, lo + n), or -1: the sampler's search in its range. */
static long search(const struct pfr_unwind_row *rows, uint32_t lo, uint32_t n, uint32_t x)
{
    long found = -1;
    for (uint32_t i = lo; i < lo + n; i++)
        if (rows[i].pc <= x)
            found = i;
    return found;
}

/* Every address from 0 to past the last row (step apart) finds through the index the row the
 * whole table's search finds. */
static void check_all(const pfr_unwind_table *t, uint32_t step)
{
    pfr_unwind_index ix;
    assert_int_equal(pfr_unwind_index_build(t->rows, t->nrows, &ix), 0);
    assert_true(ix.n > 0);
    assert_true(ix.n <= t->nrows / PFR_UNWIND_INDEX_ROWS_PER);
    uint64_t end = (uint64_t)t->rows[t->nrows - 1].pc + 4096;
    for (uint64_t x = 0; x < end; x += step) {
        uint32_t lo, n;
        pfr_unwind_index_range(&ix, (uint32_t)x, &lo, &n);
        assert_true(n >= 1 && (uint64_t)lo + n <= t->nrows);
        const struct pfr_unwind_row *want = pfr_unwind_table_find(t, t->base + x);
        long got = search(t->rows, lo, n, (uint32_t)x);
        if (!want)
            assert_int_equal(got, -1);
        else
            assert_int_equal(got, want - t->rows);
    }
    pfr_unwind_index_free(&ix);
}

static pfr_unwind_table table_of(size_t nrows, uint32_t first_pc, uint32_t (*gap)(size_t))
{
    pfr_unwind_table t = {.base = 0x400000, .nrows = nrows};
    t.rows = calloc(nrows, sizeof(*t.rows));
    assert_non_null(t.rows);
    uint32_t pc = first_pc;
    for (size_t i = 0; i < nrows; i++) {
        t.rows[i].pc = pc;
        t.rows[i].rule = (uint32_t)i;
        pc += gap(i);
    }
    return t;
}

static uint32_t gap_dense(size_t i)
{
    return 1 + (uint32_t)(i * 7 % 40); /* 1-40 bytes: code */
}

static uint32_t gap_clustered(size_t i)
{
    return i % 500 == 499 ? 70000 : 3; /* runs of close rows, far apart */
}

static uint32_t gap_sparse(size_t i)
{
    return i % 3 == 0 ? 5000 : 600; /* rows wider than the smallest granule */
}

static void test_dense(void **state)
{
    (void)state;
    pfr_unwind_table t = table_of(20000, 0, gap_dense);
    check_all(&t, 1);
    free(t.rows);
}

static void test_clustered_first_row_above_zero(void **state)
{
    (void)state;
    pfr_unwind_table t = table_of(5000, 12345, gap_clustered);
    check_all(&t, 3);
    free(t.rows);
}

static void test_sparse(void **state)
{
    (void)state;
    pfr_unwind_table t = table_of(3000, 0, gap_sparse);
    check_all(&t, 7);
    free(t.rows);
}

static void test_small_table_has_none(void **state)
{
    (void)state;
    pfr_unwind_table t = table_of(PFR_UNWIND_INDEX_MIN_ROWS - 1, 0, gap_dense);
    pfr_unwind_index ix;
    assert_int_equal(pfr_unwind_index_build(t.rows, t.nrows, &ix), 0);
    assert_int_equal(ix.n, 0);
    assert_null(ix.ent);
    free(t.rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_clustered_first_row_above_zero),
        cmocka_unit_test(test_sparse),
        cmocka_unit_test(test_small_table_has_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
