/* The output format table: lookups by name and -o extension, per input, and rendering through
 * the rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_formats.h"

#define ALL                                                                                        \
    (PFR_OUTPUT_TREE | PFR_OUTPUT_DIFF | PFR_OUTPUT_PROFILE | PFR_OUTPUT_TIMELINE | PFR_OUTPUT_LS)

static void find_by_name_and_input(void **state)
{
    (void)state;
    assert_string_equal(pfr_output_format_find("svg", PFR_OUTPUT_DIFF)->name, "svg");
    assert_string_equal(pfr_output_format_find("pprof", PFR_OUTPUT_PROFILE)->name, "pprof");
    /* folded draws plain flame graphs only; text is for timeline and ls */
    assert_null(pfr_output_format_find("folded", PFR_OUTPUT_DIFF));
    assert_null(pfr_output_format_find("text", PFR_OUTPUT_TREE));
    assert_null(pfr_output_format_find("gif", ALL));
    assert_null(pfr_output_format_find(NULL, ALL));
    assert_null(pfr_output_format_find("json", 0));
}

static void infer_from_extension(void **state)
{
    (void)state;
    const unsigned flame = PFR_OUTPUT_TREE | PFR_OUTPUT_PROFILE;
    static const struct {
        const char *path;
        unsigned inputs;
        const char *want; /* NULL: none */
    } cases[] = {
        {"a.svg", flame, "svg"},
        {"dir.x/a.htm", flame, "html"},
        {"a.html", flame, "html"},
        {"a.json", flame, "json"},
        {"cpu.pb.gz", flame, "pprof"},
        {"default.pgo", flame, "pprof"},
        {"a.pprof", flame, "pprof"},
        {"a.pb", flame, "pprof"},
        {"a.folded", flame, "folded"},
        {"a.txt", flame, "top"},
        {"a.gz", flame, NULL},
        {"svg", flame, NULL},
        {NULL, flame, NULL},
        /* only formats of the command's input */
        {"a.folded", PFR_OUTPUT_DIFF, NULL},
        {"a.pb.gz", PFR_OUTPUT_DIFF, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const pfr_output_format *f = pfr_output_format_for_path(cases[i].path, cases[i].inputs);
        assert_string_equal(f ? f->name : "(none)", cases[i].want ? cases[i].want : "(none)");
    }
}

static void names_per_input(void **state)
{
    (void)state;
    char buf[128];
    assert_string_equal(pfr_output_format_names(PFR_OUTPUT_DIFF, buf, sizeof(buf)),
                        "svg, html, json or top");
    assert_string_equal(
        pfr_output_format_names(PFR_OUTPUT_TREE | PFR_OUTPUT_PROFILE, buf, sizeof(buf)),
        "folded, pprof, svg, html, json or top");
    assert_string_equal(pfr_output_format_names(PFR_OUTPUT_LS, buf, sizeof(buf)), "json or text");
    assert_string_equal(pfr_output_format_names(PFR_OUTPUT_PROFILE, buf, sizeof(buf)), "pprof");
    /* a short buffer is cut, still terminated */
    assert_string_equal(pfr_output_format_names(PFR_OUTPUT_DIFF, buf, 6), "svg, ");
}

static void rows_are_complete(void **state)
{
    (void)state;
    /* every row that --help lists can be found by its name and renders */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    pfr_output_format_help(f, ALL, "", true);
    fclose(f);
    int rows = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), rows++) {
        char name[16];
        assert_int_equal(sscanf(line, "%15s", name), 1);
        const pfr_output_format *fmt = pfr_output_format_find(name, ALL);
        assert_non_null(fmt);
        assert_non_null(fmt->render);
        assert_non_null(fmt->help);
        assert_true(fmt->inputs != 0);
    }
    assert_int_equal(rows, 7);
    free(text);
}

static void share_rules(void **state)
{
    (void)state;
    const pfr_output_format *svg = pfr_output_format_find("svg", PFR_OUTPUT_TREE);
    const pfr_output_format *html = pfr_output_format_find("html", PFR_OUTPUT_TREE);
    const pfr_output_format *top = pfr_output_format_find("top", PFR_OUTPUT_TREE);
    assert_true(svg->min_share == 0.0005);
    assert_true(html->min_share == 0.0001);
    assert_true(pfr_output_format_share(svg, 0) == 0.0005);
    assert_true(pfr_output_format_share(svg, 0.02) == 0.02);
    assert_true(pfr_output_format_share(svg, -1) == 0);   /* --min-width 0 keeps all */
    assert_true(pfr_output_format_share(top, 0.02) == 0); /* top reads the stacks */
    assert_true(top->flags & PFR_OUTPUT_STACKS);
    assert_true(html->flags & PFR_OUTPUT_META);
    assert_true(pfr_output_format_find("pprof", PFR_OUTPUT_PROFILE)->flags & PFR_OUTPUT_BINARY);
}

static char *render(const char *name, const pfr_output_data *d)
{
    const pfr_output_format *fmt = pfr_output_format_find(name, d->input);
    assert_non_null(fmt);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(fmt->render(f, d), 0);
    fclose(f);
    return text;
}

static void render_through_rows(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    const char *stack[] = {"main", "work"};
    assert_int_equal(pfr_tree_add_stack(t, 0, stack, NULL, 2, 7), 0);
    pfr_tree_set_stacks_only(t, true);
    assert_int_equal(pfr_tree_finish(t), 0);
    pfr_render_opts ro = {.unit = "count"};
    pfr_output_data d = {.input = PFR_OUTPUT_TREE, .tree = t, .opts = &ro};
    char *folded = render("folded", &d);
    assert_string_equal(folded, "main;work 7\n");
    free(folded);
    char *top = render("top", &d);
    assert_non_null(strstr(top, "work"));
    free(top);
    pfr_tree_free(t);

    pfr_ls ls = {0};
    pfr_output_data l = {.input = PFR_OUTPUT_LS, .ls = &ls, .values = 10};
    char *json = render("json", &l);
    assert_non_null(strstr(json, "\"services\""));
    free(json);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(find_by_name_and_input),
        cmocka_unit_test(infer_from_extension),
        cmocka_unit_test(names_per_input),
        cmocka_unit_test(rows_are_complete),
        cmocka_unit_test(share_rules),
        cmocka_unit_test(render_through_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
