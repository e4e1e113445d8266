/* Diff arithmetic: baseline default, normalisation, change score, colours, change table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "pfr_diff.h"
#include "pfr_render.h"
#include "pfr_tree.h"

#define S 1000000000LL

static void add(pfr_tree *t, int side, const char *a, const char *b, double v)
{
    const char *names[] = {a, b};
    assert_int_equal(pfr_tree_add_stack(t, side, names, NULL, b ? 2 : 1, v), 0);
    pfr_tree_finish(t);
}

static void test_base_and_norm(void **state)
{
    (void)state;
    int64_t bf, bt;
    pfr_diff_default_base(100 * S, 160 * S, &bf, &bt);
    assert_true(bf == 40 * S && bt == 100 * S);
    assert_true(pfr_diff_norm(0, 10 * S) == 0.1);
    assert_true(pfr_diff_norm(5, 5) == 0);
}

static void test_change(void **state)
{
    (void)state;
    assert_true(pfr_diff_change(5, 5) == 0);
    assert_true(pfr_diff_change(0, 0) == 0);
    assert_true(pfr_diff_change(0, 3) == 1);
    assert_true(pfr_diff_change(3, 0) == -1);
    assert_true(pfr_diff_change(10, 15) > 0.33 && pfr_diff_change(10, 15) < 0.34);
    assert_true(pfr_diff_change(15, 10) < -0.33);
    /* a bigger change gives a stronger shade */
    assert_true(pfr_diff_change(10, 20) > pfr_diff_change(10, 12));
    assert_true(pfr_diff_width(2, 4) == 3);
    char neutral[8], red[8], darker[8], green[8];
    unsigned r, g, b, r2, g2, b2;
    pfr_diff_color(0, neutral);
    sscanf(neutral + 1, "%2x%2x%2x", &r, &g, &b);
    assert_true(r == g && g == b);
    pfr_diff_color(0.3, red);
    sscanf(red + 1, "%2x%2x%2x", &r, &g, &b);
    assert_true(r > g && r > b);
    pfr_diff_color(0.9, darker);
    sscanf(darker + 1, "%2x%2x%2x", &r2, &g2, &b2);
    assert_true(r2 - g2 > r - g); /* more saturated */
    pfr_diff_color(-0.5, green);
    sscanf(green + 1, "%2x%2x%2x", &r, &g, &b);
    assert_true(g > r && g > b);
}

/* Baseline 10 s, comparison 20 s: equal rates must show no change. */
static void test_normalised_rows(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    add(t, 0, "main", "steady", 10);
    add(t, 1, "main", "steady", 20);
    add(t, 0, "main", "hot", 10);
    add(t, 1, "main", "hot", 80);
    add(t, 0, "main", "gone", 5);
    double norm[2] = {pfr_diff_norm(0, 10 * S), pfr_diff_norm(0, 20 * S)};
    pfr_diff_row *r;
    size_t n;
    assert_int_equal(pfr_diff_rows(t, norm, &r, &n), 0);
    assert_int_equal(n, 4);
    assert_string_equal(pfr_tree_str(t, r[0].name), "hot"); /* 1/s -> 4/s */
    assert_true(r[0].base_self == 1 && r[0].comp_self == 4);
    assert_string_equal(pfr_tree_str(t, r[1].name), "gone"); /* self 0.5/s -> 0 */
    assert_true(r[1].comp_self == 0);
    assert_string_equal(pfr_tree_str(t, r[2].name), "main"); /* self 0, total 2.5/s -> 5/s */
    assert_string_equal(pfr_tree_str(t, r[3].name), "steady");
    assert_true(r[3].base_self == r[3].comp_self);
    free(r);

    /* the json marks hot red (change > 0), gone green, steady neutral */
    pfr_render_opts o = {.diff = true, .norm = {norm[0], norm[1]}, .unit = "nanoseconds"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_json(f, t, &o, NULL), 0);
    fclose(f);
    json_t *doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "kind")), "diff");
    json_t *main_ = json_array_get(json_object_get(json_object_get(doc, "root"), "children"), 0);
    json_t *kids = json_object_get(main_, "children");
    size_t i;
    json_t *k;
    int seen = 0;
    json_array_foreach(kids, i, k)
    {
        const char *name = json_string_value(json_object_get(k, "name"));
        double change = json_real_value(json_object_get(k, "change"));
        if (strcmp(name, "hot") == 0)
            assert_true(change > 0.7), seen++;
        else if (strcmp(name, "gone") == 0)
            assert_true(change == -1), seen++;
        else if (strcmp(name, "steady") == 0)
            assert_true(change == 0), seen++;
    }
    assert_int_equal(seen, 3);
    json_decref(doc);
    free(buf);

    o.limit = 10;
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_top(f, t, &o), 0);
    fclose(f);
    assert_non_null(strstr(buf, "+300.0%"));
    assert_non_null(strstr(buf, "gone"));
    assert_null(strstr(buf, "steady")); /* unchanged functions are not listed */
    free(buf);
    pfr_tree_free(t);
}

static void test_identical_sides_neutral(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    for (int side = 0; side < 2; side++) {
        add(t, side, "main", "a", 7);
        add(t, side, "main", "b", 3);
        add(t, side, "main", NULL, 1);
    }
    pfr_render_opts o = {.diff = true, .norm = {0.1, 0.1}, .unit = "nanoseconds"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_top(f, t, &o), 0);
    fclose(f);
    assert_non_null(strstr(buf, "no differences"));
    free(buf);
    for (uint32_t i = 0; i < pfr_tree_size(t); i++) {
        const pfr_tree_node *n = pfr_tree_node_at(t, i);
        assert_true(pfr_diff_change(n->total[0] * 0.1, n->total[1] * 0.1) == 0);
    }
    pfr_tree_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_and_norm),
        cmocka_unit_test(test_change),
        cmocka_unit_test(test_normalised_rows),
        cmocka_unit_test(test_identical_sides_neutral),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
