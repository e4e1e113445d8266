/* Flame tree building and the folded, json and top renderers, the package rule, pictures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "pfr_names.h"
#include "pfr_profile.h"
#include "pfr_render.h"
#include "pfr_tree.h"

static void add(pfr_tree *t, int side, const char *folded, double v)
{
    const char *names[64];
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", folded);
    size_t n = 0;
    for (char *save, *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save))
        names[n++] = tok;
    assert_int_equal(pfr_tree_add_stack(t, side, names, NULL, n, v), 0);
    pfr_tree_finish(t);
}

/* Render into a malloc'ed string. */
typedef int (*render_fn)(FILE *, const pfr_tree *, const pfr_render_opts *);
static char *render(render_fn fn, const pfr_tree *t, const pfr_render_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(fn(f, t, o), 0);
    fclose(f);
    return buf;
}

static char *render_json(const pfr_tree *t, const pfr_render_opts *o, const char *meta)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_json(f, t, o, meta), 0);
    fclose(f);
    return buf;
}

static uint32_t find_child(const pfr_tree *t, uint32_t parent, const char *name)
{
    for (uint32_t c = pfr_tree_node_at(t, parent)->first_child; c != PFR_TREE_NONE;
         c = pfr_tree_node_at(t, c)->next_sibling)
        if (strcmp(pfr_tree_str(t, pfr_tree_node_at(t, c)->name), name) == 0)
            return c;
    return PFR_TREE_NONE;
}

static void test_build(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    add(t, 0, "main;work;hash", 5);
    add(t, 0, "main;work", 3);
    add(t, 0, "main;io", 2);
    add(t, 0, "main;work;hash", 1);
    /* the same function under another parent is another node */
    add(t, 0, "main;io;hash", 4);
    assert_int_equal(pfr_tree_size(t), 6); /* all main work hash io hash */
    const pfr_tree_node *root = pfr_tree_node_at(t, 0);
    assert_true(root->total[0] == 15);
    uint32_t m = find_child(t, 0, "main");
    uint32_t w = find_child(t, m, "work");
    uint32_t h = find_child(t, w, "hash");
    uint32_t io = find_child(t, m, "io");
    uint32_t h2 = find_child(t, io, "hash");
    assert_true(pfr_tree_node_at(t, w)->total[0] == 9);
    assert_true(pfr_tree_node_at(t, w)->self[0] == 3);
    assert_true(pfr_tree_node_at(t, h)->self[0] == 6);
    assert_true(pfr_tree_node_at(t, h2)->total[0] == 4);
    assert_true(pfr_tree_node_at(t, io)->self[0] == 2);
    assert_int_equal(pfr_tree_node_at(t, h)->depth, 3);
    assert_int_equal(pfr_tree_max_depth(t), 3);
    assert_int_equal(pfr_tree_stacks(t, 0), 5);
    pfr_tree_free(t);
}

static void test_folded(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    add(t, 0, "main;work;hash", 5);
    add(t, 0, "main;io", 2);
    add(t, 0, "main;work", 3);
    add(t, 0, "main;work;hash", 1);
    pfr_tree_finish(t);
    char *out = render(pfr_render_folded, t, NULL);
    assert_string_equal(out, "main;io 2\nmain;work 3\nmain;work;hash 6\n");
    free(out);
    pfr_tree_free(t);
}

static void test_prune(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    add(t, 0, "main;big;leaf", 900);
    add(t, 0, "main;small", 10);
    add(t, 0, "main", 90);
    pfr_tree_set_min_share(t, 0.02);
    assert_int_equal(pfr_tree_finish(t), 0);
    /* small (1%) is left out, its value stays in main's total */
    assert_int_equal(pfr_tree_size(t), 4);
    uint32_t m = find_child(t, 0, "main");
    assert_true(pfr_tree_node_at(t, m)->total[0] == 1000);
    assert_true(pfr_tree_node_at(t, m)->self[0] == 90);
    assert_int_not_equal(find_child(t, find_child(t, m, "big"), "leaf"), PFR_TREE_NONE);
    /* finishing again with no pruning brings it back */
    pfr_tree_set_min_share(t, 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    assert_int_equal(pfr_tree_size(t), 5);
    assert_true(pfr_tree_node_at(t, find_child(t, m, "small"))->total[0] == 10);
    pfr_tree_free(t);
}

static void test_functions_recursion(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    /* recursion: a appears twice on one stack; its total counts the stack once */
    add(t, 0, "a;b;a;b", 4);
    add(t, 0, "a;c", 6);
    pfr_tree_func *f;
    size_t n;
    assert_int_equal(pfr_tree_functions(t, &f, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        const char *name = pfr_tree_str(t, f[i].name);
        if (strcmp(name, "a") == 0) {
            assert_true(f[i].total[0] == 10);
            assert_true(f[i].self[0] == 0);
        } else if (strcmp(name, "b") == 0) {
            assert_true(f[i].total[0] == 4);
            assert_true(f[i].self[0] == 4);
        } else {
            assert_string_equal(name, "c");
            assert_true(f[i].total[0] == 6 && f[i].self[0] == 6);
        }
    }
    free(f);
    pfr_tree_free(t);
}

static void test_top(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    add(t, 0, "main;work;hash", 6000000000.0);
    add(t, 0, "main;io", 3000000000.0);
    add(t, 0, "main", 1000000000.0);
    pfr_render_opts o = {.unit = "nanoseconds", .limit = 2};
    char *out = render(pfr_render_top, t, &o);
    /* heaviest self first, limited to 2 rows, percent of the total */
    char *hash = strstr(out, "hash"), *io = strstr(out, "io\n");
    assert_non_null(strstr(out, "total 10 s"));
    assert_non_null(hash);
    assert_non_null(io);
    assert_true(hash < io);
    assert_non_null(strstr(out, "60.00%"));
    assert_non_null(strstr(out, "SELF%"));
    assert_null(strstr(out, "main\n")); /* third row cut by the limit */
    free(out);
    pfr_tree_free(t);
}

static void test_json(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    const char *names[] = {"main", "runtime.mallocgc"};
    const char *mods[] = {"/usr/bin/app", "/usr/bin/app"};
    assert_int_equal(pfr_tree_add_stack(t, 0, names, mods, 2, 7), 0);
    assert_int_equal(pfr_tree_add_stack(t, 0, names, mods, 1, 3), 0);
    pfr_tree_finish(t);
    pfr_render_opts o = {.unit = "nanoseconds", .title = "T", .subtitle = "S"};
    char *out = render_json(t, &o, "{\"service\":\"api\"}");
    json_error_t jerr;
    json_t *doc = json_loads(out, 0, &jerr);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "kind")), "flame");
    assert_string_equal(json_string_value(json_object_get(doc, "service")), "api");
    assert_string_equal(json_string_value(json_object_get(doc, "unit")), "nanoseconds");
    assert_int_equal(json_integer_value(json_object_get(doc, "total")), 10);
    json_t *root = json_object_get(doc, "root");
    assert_string_equal(json_string_value(json_object_get(root, "name")), "all");
    json_t *main_ = json_array_get(json_object_get(root, "children"), 0);
    assert_string_equal(json_string_value(json_object_get(main_, "name")), "main");
    assert_int_equal(json_integer_value(json_object_get(main_, "value")), 10);
    assert_int_equal(json_integer_value(json_object_get(main_, "self")), 3);
    json_t *leaf = json_array_get(json_object_get(main_, "children"), 0);
    assert_int_equal(json_integer_value(json_object_get(leaf, "value")), 7);
    /* the package table names runtime for runtime.mallocgc, app for main (its module) */
    json_t *pk = json_object_get(doc, "packages");
    size_t pi = (size_t)json_integer_value(json_object_get(leaf, "package"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(pk, pi), "name")),
                        "runtime");
    pi = (size_t)json_integer_value(json_object_get(main_, "package"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(pk, pi), "name")), "app");
    const char *color = json_string_value(json_object_get(json_array_get(pk, pi), "color"));
    assert_int_equal(strlen(color), 7);
    assert_int_equal(color[0], '#');
    json_decref(doc);
    free(out);
    pfr_tree_free(t);
}

static void test_from_profile(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    assert_int_equal(pfr_profile_add_sample_type(p, "ebpf:cpu:nanoseconds", "nanoseconds"), 0);
    int64_t m = pfr_profile_add_mapping(p, 0x1000, 0x9000, 0, "/usr/lib/libfoo.so", "");
    int64_t fmain = pfr_profile_add_function(p, "main", "main", "main.c", 1);
    int64_t fouter = pfr_profile_add_function(p, "outer", "outer", "a.c", 1);
    int64_t finl = pfr_profile_add_function(p, "inlined", "inlined", "a.c", 9);
    pfr_line lmain = {(uint32_t)fmain, 10};
    pfr_line lboth[2] = {{(uint32_t)finl, 12}, {(uint32_t)fouter, 5}}; /* innermost first */
    int64_t locmain = pfr_profile_add_location(p, -1, 0x10, &lmain, 1);
    int64_t locboth = pfr_profile_add_location(p, -1, 0x20, lboth, 2);
    int64_t locanon = pfr_profile_add_location(p, m, 0x2000, NULL, 0);
    uint32_t s1[] = {(uint32_t)locboth, (uint32_t)locmain}; /* leaf first */
    uint32_t s2[] = {(uint32_t)locanon, (uint32_t)locmain};
    int64_t v1 = 30, v2 = 12;
    pfr_label lab = {.key = "comm", .str = "x"};
    assert_true(pfr_profile_add_sample(p, s1, 2, &v1, &lab, 1) >= 0);
    assert_true(pfr_profile_add_sample(p, s2, 2, &v2, NULL, 0) >= 0);
    assert_int_equal(pfr_profile_error(p), 0);

    pfr_tree *t = pfr_tree_new();
    assert_int_equal(pfr_tree_add_profile(t, 0, p, 0, 1.0, NULL), 0);
    assert_int_equal(pfr_tree_add_profile(t, 0, p, 0, 0.5, "svc"), 0);
    pfr_tree_finish(t);
    char *out = render(pfr_render_folded, t, NULL);
    assert_string_equal(out, "main;[libfoo.so] 12\n"
                             "main;outer;inlined 30\n"
                             "svc;main;[libfoo.so] 6\n"
                             "svc;main;outer;inlined 15\n");
    free(out);
    assert_int_equal(pfr_tree_add_profile(t, 0, p, 1, 1.0, NULL), -22); /* no such type */
    pfr_tree_free(t);
    pfr_profile_free(p);
}

static void test_package_rule(void **state)
{
    (void)state;
    char b[256];
    static const struct {
        const char *name, *module, *pkg;
    } cases[] = {
        {"github.com/org/repo/pkg.(*Server).Handle", "", "github.com/org/repo/pkg"},
        {"net/http.(*conn).serve", "", "net/http"},
        {"runtime.mallocgc", "", "runtime"},
        {"main.main", "/app", "main"},
        {"std::vector<int, std::allocator<int>>::push_back(int const&)", "", "std::vector"},
        {"ns::Class::method()", "", "ns::Class"},
        {"foo::bar", "", "foo"},
        {"memcpy", "/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6"},
        {"do_work_item", "", "do"},
        {"__libc_start_main", "", "libc"},
        {"compress.part.0", "/usr/bin/gzip", "gzip"},
        {"[libfoo.so]", "", "[libfoo.so]"},
        {"/system.slice/nginx.service", "", "/system.slice/nginx.service"}, /* service frames */
        {"/k8s/default/api", "", "/k8s/default/api"},
        {"worker", "", "worker"},
        {"", "", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(pfr_frame_package(cases[i].name, cases[i].module, b, sizeof(b)),
                            cases[i].pkg);
    /* same package, same colour; a kernel frame gets a blue hue */
    char c1[8], c2[8], k[8];
    pfr_package_color("runtime", "", c1);
    pfr_package_color("runtime", "/x", c2);
    assert_string_equal(c1, c2);
    pfr_package_color("[kernel.kallsyms]", "[kernel.kallsyms]", k);
    unsigned r, g, bl;
    sscanf(k + 1, "%2x%2x%2x", &r, &g, &bl);
    assert_true(bl > r);
    sscanf(c1 + 1, "%2x%2x%2x", &r, &g, &bl);
    assert_true(r > bl); /* warm */
}

static void test_format_value(void **state)
{
    (void)state;
    char b[40];
    assert_string_equal(pfr_format_value(1.5e9, "nanoseconds", false, b, 40), "1.5 s");
    assert_string_equal(pfr_format_value(250e6, "nanoseconds", true, b, 40), "250 ms/s");
    assert_string_equal(pfr_format_value(3 * 1048576.0, "bytes", false, b, 40), "3 MiB");
    assert_string_equal(pfr_format_value(12, "count", false, b, 40), "12");
    assert_string_equal(pfr_format_value(12500, "count", false, b, 40), "12.5 k");
    assert_string_equal(pfr_type_unit("ebpf:cpu:nanoseconds"), "nanoseconds");
    assert_string_equal(pfr_type_unit("x"), "");
}

static void test_pictures_self_contained(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    add(t, 0, "main;work;hash", 6);
    add(t, 0, "main;</script><b>x", 4);
    pfr_tree_finish(t);
    pfr_render_opts o = {.unit = "nanoseconds", .title = "cpu & <stuff>", .subtitle = "range"};
    char *svg = render(pfr_render_svg, t, &o);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "cpu &amp; &lt;stuff&gt;"));
    assert_non_null(strstr(svg, "&lt;/script&gt;&lt;b&gt;x"));
    assert_non_null(strstr(svg, "id=\"search\""));
    assert_null(strstr(svg, "<script src"));
    /* 5 frames: all main work hash and the odd one */
    size_t frames = 0;
    for (const char *p = svg; (p = strstr(p, "<g class=\"f\"")); p++)
        frames++;
    assert_int_equal(frames, 5);
    free(svg);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_html(f, t, &o, NULL), 0);
    fclose(f);
    assert_non_null(strstr(buf, "<!DOCTYPE html>"));
    assert_non_null(strstr(buf, "PfrFlame.mount"));
    /* the frame name cannot close the data element: no '<' in the data; no external resource */
    assert_non_null(strstr(buf, "\\u003c\\/script>\\u003cb>x"));
    assert_null(strstr(buf, "<\\/script>"));
    assert_null(strstr(buf, "src=\"http"));
    assert_null(strstr(buf, "href=\"http"));
    assert_null(strstr(buf, "@import"));
    free(buf);
    pfr_tree_free(t);
}

/* Names from outside in text output: escaped so they can neither break a line nor drive a
 * terminal, quoted where a list needs it, cut with "..." when they do not fit. */
static void test_text_escape(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(pfr_text_escape("/k8s/prod/db-0/postgres", PFR_TEXT_QUOTE, b, 64),
                        "/k8s/prod/db-0/postgres");
    assert_string_equal(pfr_text_escape("", PFR_TEXT_QUOTE, b, 64), "\"\"");
    assert_string_equal(pfr_text_escape("", 0, b, 64), "");
    assert_string_equal(pfr_text_escape("a b", PFR_TEXT_QUOTE, b, 64), "\"a b\"");
    assert_string_equal(pfr_text_escape("a b", 0, b, 64), "a b");
    assert_string_equal(pfr_text_escape("q\"\\", PFR_TEXT_QUOTE, b, 64), "\"q\\\"\\\\\"");
    assert_string_equal(pfr_text_escape("q\"\\", 0, b, 64), "q\"\\");
    assert_string_equal(pfr_text_escape("semi;colon\nx\x1b[0m\t\r\x7f", 0, b, 64),
                        "semi;colon\\nx\\x1b[0m\\t\\r\\x7f");
    assert_string_equal(pfr_text_escape("semi;colon", PFR_TEXT_SEMICOLON, b, 64), "semi\\x3bcolon");
    assert_string_equal(pfr_text_escape("bad\xff\xc3(", 0, b, 64), "bad\\xff\\xc3(");
    assert_string_equal(pfr_text_escape("csi\xc2\x9b", 0, b, 64), "csi\\u009b"); /* C1 */
    assert_string_equal(pfr_text_escape("été ✓", PFR_TEXT_QUOTE, b, 64), "\"été ✓\"");
    assert_string_equal(pfr_text_escape("été", PFR_TEXT_QUOTE, b, 64), "été");
    /* cut: whole characters and escapes only, then "..." */
    assert_string_equal(pfr_text_escape("/k8s/long/xxxxxxxxxxxxxxxxxxxxxxxx", 0, b, 16),
                        "/k8s/long/xx...");
    assert_string_equal(pfr_text_escape("ab\n\n\n\n", 0, b, 10), "ab\\n\\n...");
    assert_string_equal(pfr_text_escape("aééééé", 0, b, 9), "aéé...");
    assert_string_equal(pfr_text_escape("abcdef", 0, b, 7), "abcdef");
    assert_string_equal(pfr_text_escape("abcdefg", 0, b, 3), "ab");

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pfr_text_put(f, "x\ny", PFR_TEXT_QUOTE);
    pfr_text_put(f, "plain", PFR_TEXT_QUOTE);
    fclose(f);
    assert_string_equal(buf, "\"x\\ny\"plain");
    free(buf);

    /* folded: a frame name with ';' or a newline stays one frame of one line; top likewise */
    pfr_tree *t = pfr_tree_new();
    const char *names[] = {"svc;a\nb", "main", "leaf\x1b[2J"};
    assert_int_equal(pfr_tree_add_stack(t, 0, names, NULL, 3, 5), 0);
    pfr_tree_finish(t);
    char *folded = render(pfr_render_folded, t, NULL);
    assert_string_equal(folded, "svc\\x3ba\\nb;main;leaf\\x1b[2J 5\n");
    free(folded);
    pfr_render_opts o = {.title = "cpu: svc;a\nb", .subtitle = "s"};
    char *top = render(pfr_render_top, t, &o);
    assert_non_null(strstr(top, "# cpu: svc;a\\nb — s\n"));
    assert_non_null(strstr(top, "  leaf\\x1b[2J\n"));
    assert_null(strchr(top, '\x1b'));
    free(top);
    pfr_tree_free(t);
}

/* name's JSON form (pfr_names.h), malloc'ed */
static char *json_form(const char *name)
{
    int err;
    char *p = pfr_name_json(name, &err);
    assert_int_equal(err, 0);
    return p ? p : strdup(name);
}

/* what printed reads back to in form f, malloc'ed */
static char *read_back(const char *printed, pfr_name_form f)
{
    pfr_buf b = {0};
    assert_int_equal(pfr_name_read(printed, strlen(printed), f, &b), 0);
    pfr_buf_cstr(&b);
    return (char *)pfr_buf_steal(&b, NULL);
}

/* A name in JSON form and in folded form: plain names unchanged (systemd's \x2d included), the
 * rest escaped whole, and every one read back to its bytes. */
static void test_name_forms(void **state)
{
    (void)state;
    static const struct {
        const char *name, *json, *folded;
    } cases[] = {
        {"/system.slice/nginx.service", NULL, NULL},
        {"with space", NULL, NULL},
        {"été ✓", NULL, NULL},
        {"dev-disk-by\\x2duuid.device", NULL, "dev-disk-by\\\\x2duuid.device"},
        {"C:\\dir\\file", NULL, NULL}, /* no backslash there reads as an escape */
        {"\\", NULL, NULL},
        {"a;b", NULL, "a\\x3bb"},
        {"a\\x3bb", NULL, "a\\\\x3bb"},
        {"new\nline\t\x1b", NULL, "new\\nline\\t\\x1b"},
        {"bad\xff\xc3(", "bad\\xff\\xc3(", "bad\\xff\\xc3("},
        {"a\\xffb", "a\\\\xffb", "a\\\\xffb"},
        {"a\\xFFb", "a\\\\xFFb", "a\\\\xFFb"},
        {"two\\\\", "two\\\\\\\\", "two\\\\\\\\"},
        {"\\\xff", "\\\\\\xff", "\\\\\\xff"},
        {"c1\xc2\x9b\\u0041", NULL, "c1\\u009b\\\\u0041"},
    };
    char b[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *name = cases[i].name;
        const char *json = cases[i].json ? cases[i].json : name;
        const char *folded = cases[i].folded ? cases[i].folded : name;
        char *j = json_form(name);
        assert_string_equal(j, json);
        assert_string_equal(pfr_text_escape(name, PFR_TEXT_SEMICOLON, b, sizeof(b)), folded);
        char *back = read_back(j, PFR_NAME_JSON);
        assert_string_equal(back, name);
        free(back);
        back = read_back(b, PFR_NAME_FOLDED);
        assert_string_equal(back, name);
        free(back);
        int err;
        char *parsed = pfr_name_parse(j, PFR_NAME_JSON, &err);
        assert_int_equal(err, 0);
        assert_string_equal(parsed ? parsed : j, name);
        assert_true(!parsed == !cases[i].json); /* parsed: only a name that was escaped */
        free(parsed);
        free(j);
    }

    /* folded: a literal "a\x3bb" and "a;b" are two frames apart, each read back to its bytes */
    pfr_tree *t = pfr_tree_new();
    const char *lit[] = {"main", "a\\x3bb"}, *semi[] = {"main", "a;b"};
    assert_int_equal(pfr_tree_add_stack(t, 0, lit, NULL, 2, 1), 0);
    assert_int_equal(pfr_tree_add_stack(t, 0, semi, NULL, 2, 2), 0);
    pfr_tree_finish(t);
    char *out = render(pfr_render_folded, t, NULL);
    assert_non_null(strstr(out, "main;a\\\\x3bb 1\n"));
    assert_non_null(strstr(out, "main;a\\x3bb 2\n"));
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char *value = strrchr(line, ' ');
        *value++ = '\0';
        char *back = read_back(strchr(line, ';') + 1, PFR_NAME_FOLDED);
        assert_string_equal(back, strcmp(value, "1") == 0 ? lit[1] : semi[1]);
        free(back);
    }
    free(out);
    pfr_tree_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),        cmocka_unit_test(test_folded),
        cmocka_unit_test(test_prune),        cmocka_unit_test(test_functions_recursion),
        cmocka_unit_test(test_top),          cmocka_unit_test(test_json),
        cmocka_unit_test(test_from_profile), cmocka_unit_test(test_package_rule),
        cmocka_unit_test(test_format_value), cmocka_unit_test(test_pictures_self_contained),
        cmocka_unit_test(test_text_escape),  cmocka_unit_test(test_name_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
