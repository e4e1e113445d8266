/* pfr_settings: the layers (default < file < environment < flag), aliases, lists, collected
 * groups, the refusals and their messages, and the texts made from the rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings_demo_table.h"

/* One value a collected group received. */
struct got {
    char lines[16][160];
    size_t n;
};

static int collect(void *ctx, const pfr_settings_group *g, const char *instance,
                   const pfr_setting *row, const char *value, enum pfr_settings_layer layer,
                   const char *where, char *err, size_t errlen)
{
    struct got *got = ctx;
    (void)g;
    if (!strcmp(value, "refused")) {
        snprintf(err, errlen, "the collector refuses it");
        return -EINVAL;
    }
    if (got->n < 16)
        snprintf(got->lines[got->n++], 160, "%s %s=%s %d %s", instance ? instance : "-", row->key,
                 value, (int)layer, where);
    return 0;
}

struct fixture {
    pfr_settings *s;
    struct demo_conf c;
    struct got got;
    char path[64];
    char err[1024];
};

static struct fixture *fx_new(void)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->s = pfr_settings_new("demo", "PFR_DEMO_", "Usage: demo [OPTIONS]");
    assert_non_null(f->s);
    assert_int_equal(pfr_settings_bind(f->s, &demo_group, &f->c, f->err, sizeof(f->err)), 0);
    assert_int_equal(pfr_settings_bind(f->s, &demo_service_group, &f->c, f->err, sizeof(f->err)),
                     0);
    assert_int_equal(
        pfr_settings_bind_collect(f->s, &demo_sink_group, collect, &f->got, f->err, sizeof(f->err)),
        0);
    snprintf(f->path, sizeof(f->path), "/tmp/test_settings.%d.ini", (int)getpid());
    return f;
}

static void fx_free(struct fixture *f)
{
    pfr_settings_release(&demo_group, &f->c);
    pfr_settings_release(&demo_service_group, &f->c);
    pfr_settings_free(f->s);
    unlink(f->path);
    free(f);
}

static void write_file(const struct fixture *f, const char *text)
{
    FILE *o = fopen(f->path, "w");
    assert_non_null(o);
    fputs(text, o);
    fclose(o);
}

static int load_file(struct fixture *f, const char *text, const char *const *ignore)
{
    write_file(f, text);
    f->err[0] = '\0';
    return pfr_settings_load_file(f->s, f->path, ignore, f->err, sizeof(f->err));
}

/* argv from a NULL-terminated list (getopt permutes it). */
static int load_args(struct fixture *f, const char *const *args, pfr_settings_args *a)
{
    char *argv[32];
    int argc = 0;
    for (; args[argc]; argc++)
        argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    f->err[0] = '\0';
    return pfr_settings_load_args(f->s, argc, argv, a, f->err, sizeof(f->err));
}

static void assert_err_contains(const struct fixture *f, const char *want)
{
    if (!strstr(f->err, want))
        fail_msg("error '%s' lacks '%s'", f->err, want);
}

static void defaults(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    assert_string_equal(f->c.store, "/var/lib/demo/ring.db");
    assert_true(f->c.interval_ns == 10000000000LL);
    assert_int_equal(f->c.cpu_hz, 100);
    assert_true(f->c.max_bytes == 512ull << 20);
    assert_int_equal(f->c.port, 9465);
    assert_true(f->c.dwarf);
    assert_int_equal(f->c.mode, 0);
    assert_null(f->c.token);
    assert_null(f->c.name);
    assert_int_equal(f->c.rules.n, 0);
    assert_false(pfr_settings_is_set(f->s, "demo", "interval"));
    fx_free(f);
}

/* default < file < environment < flag, key by key. */
static void layering(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    write_file(f, "[demo]\ninterval = 20s\ncpu_hz = 200\nstore = /file\nunwind = fp\n"
                  "[service]\nrule = comm a A\nrule = comm b B\n");
    char *envp[] = {"PFR_DEMO_CPU_HZ=300", "PFR_DEMO_STORE=/env", "PFR_DEMO_UNWINDX=dwarf",
                    "DEMO_TOKEN=tok", NULL};
    char cfg[80];
    snprintf(cfg, sizeof(cfg), "--config=%s", f->path);
    char *argv[] = {"demo",           "--cpu-hz", "400",        cfg,
                    "--service-rule", "exe c C",  "--no-dwarf", NULL};
    pfr_settings_args a;
    int rc = pfr_settings_load(f->s, 7, argv, envp, "PFR_DEMO_CONFIG", NULL, NULL, &a, f->err,
                               sizeof(f->err));
    if (rc)
        fail_msg("%s", f->err);
    assert_string_equal(a.config_path, f->path);
    assert_true(f->c.interval_ns == 20000000000LL); /* file */
    assert_string_equal(f->c.store, "/env");        /* environment over file */
    assert_int_equal(f->c.cpu_hz, 400);             /* flag over environment */
    assert_int_equal(f->c.mode, 1);                 /* file; PFR_DEMO_UNWINDX is no variable */
    assert_false(f->c.dwarf);                       /* --no-dwarf */
    assert_string_equal(f->c.token, "tok");         /* the first of "DEMO_TOKEN,PFR_DEMO_TOKEN" */
    /* lists gather every layer, the flags' first */
    assert_int_equal(f->c.rules.n, 3);
    assert_string_equal(f->c.rules.v[0], "exe c C");
    assert_string_equal(f->c.rules.v[1], "comm a A");
    assert_string_equal(f->c.rules.v[2], "comm b B");
    assert_true(pfr_settings_is_set(f->s, "demo", "interval"));
    assert_true(pfr_settings_is_set(f->s, "demo", "dwarf"));
    assert_false(pfr_settings_is_set(f->s, "demo", "port"));
    fx_free(f);
}

/* The config file's path: --config, else the variable, else the default path if it exists. */
static void config_path(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    write_file(f, "[demo]\ncpu_hz = 7\n");
    char envname[128];
    snprintf(envname, sizeof(envname), "PFR_DEMO_CONFIG=%s", f->path);
    char *envp[] = {"OTHER_CONFIG=", envname, NULL};
    char *argv[] = {"demo", NULL};
    pfr_settings_args a;
    assert_int_equal(pfr_settings_load(f->s, 1, argv, envp, "OTHER_CONFIG,PFR_DEMO_CONFIG",
                                       "/nonexistent.ini", NULL, &a, f->err, sizeof(f->err)),
                     0);
    assert_int_equal(f->c.cpu_hz, 7);
    fx_free(f);

    f = fx_new();
    write_file(f, "[demo]\ncpu_hz = 8\n");
    char *none[] = {NULL};
    assert_int_equal(pfr_settings_load(f->s, 1, argv, none, "PFR_DEMO_CONFIG", f->path, NULL, &a,
                                       f->err, sizeof(f->err)),
                     0);
    assert_int_equal(f->c.cpu_hz, 8);
    assert_int_equal(pfr_settings_load(f->s, 1, argv, none, "PFR_DEMO_CONFIG", "/nonexistent.ini",
                                       NULL, &a, f->err, sizeof(f->err)),
                     0);
    assert_null(a.config_path);
    /* --help: nothing else is read, a broken file included */
    write_file(f, "[demo]\ncpu_hz = lots\n");
    char *help[] = {"demo", "--help", NULL};
    assert_int_equal(
        pfr_settings_load(f->s, 2, help, none, NULL, f->path, NULL, &a, f->err, sizeof(f->err)), 0);
    assert_true(a.help);
    assert_int_equal(
        pfr_settings_load(f->s, 1, argv, none, NULL, f->path, NULL, &a, f->err, sizeof(f->err)),
        -EINVAL);
    assert_err_contains(f, ":2: cpu_hz: 'lots' is not a whole number");
    fx_free(f);
}

static void file_refusals(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    char want[256];
    assert_int_equal(load_file(f, "[demo]\ncpu_hz = 1\ncpu_hz = 2\n", NULL), -EINVAL);
    snprintf(want, sizeof(want), "%s:3: key 'cpu_hz' in [demo] given again (first at line 2)",
             f->path);
    assert_err_contains(f, want);
    assert_int_equal(load_file(f, "[demo]\n[demo]\n", NULL), -EINVAL);
    assert_err_contains(f, "section [demo] given again");
    assert_int_equal(load_file(f, "[demo]\n\nfoo = 1\n", NULL), -EINVAL);
    snprintf(want, sizeof(want), "%s:3: unknown key 'foo' in [demo]", f->path);
    assert_string_equal(f->err, want);
    assert_int_equal(load_file(f, "[other]\nx = 1\n", NULL), -EINVAL);
    assert_err_contains(f, ":2: unknown section [other]");
    assert_int_equal(load_file(f, "x = 1\n", NULL), -EINVAL);
    assert_err_contains(f, ":1: key 'x' before any [section]");
    static const char *const ign[] = {"other", NULL}, *const all[] = {"*", NULL};
    assert_int_equal(load_file(f, "[other]\nx = 1\n[other thing]\ny = 2\n", ign), 0);
    assert_int_equal(load_file(f, "[else]\nx = 1\n", all), 0);
    assert_int_equal(load_file(f, "[demo]\nonce = true\n", NULL), -EINVAL); /* flag only */
    assert_err_contains(f, "unknown key 'once'");
    assert_int_equal(load_file(f, "[demo]\nno_dwarf = true\n", NULL), -EINVAL);
    assert_int_equal(load_file(f, "[demo]\ninterval = 2h\n", NULL), -ERANGE);
    snprintf(want, sizeof(want), "%s:2: interval: '2h' is above 1h", f->path);
    assert_string_equal(f->err, want);
    assert_int_equal(load_file(f, "[demo]\nbroken line\n", NULL), -EINVAL);
    assert_err_contains(f, ":2: syntax error");
    assert_int_equal(load_file(f, "[service]\nrule = one two\n", NULL), -EINVAL);
    assert_err_contains(f, ":2: rule: 'one two' is not KIND PATTERN SERVICE");
    f->err[0] = '\0';
    assert_int_equal(
        pfr_settings_load_file(f->s, "/nonexistent/x.ini", NULL, f->err, sizeof(f->err)), -ENOENT);
    assert_err_contains(f, "cannot open config file /nonexistent/x.ini");
    fx_free(f);
}

static void flag_refusals(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    pfr_settings_args a;
    assert_int_equal(load_args(f, (const char *[]){"demo", "--interval", "0.1", NULL}, &a),
                     -ERANGE);
    assert_string_equal(f->err, "--interval: '0.1' is below 200ms");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--interval=10x", NULL}, &a), -EINVAL);
    assert_string_equal(f->err, "--interval: '10x' is not a duration (e.g. 250ms, 10s, 1m30s)");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--unwind", "bogus", NULL}, &a),
                     -EINVAL);
    assert_string_equal(f->err, "--unwind: 'bogus' is not one of auto, fp, dwarf");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--cpu-hz", "0", NULL}, &a), -ERANGE);
    assert_string_equal(f->err, "--cpu-hz: '0' is below 1");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--port", "70000", NULL}, &a), -ERANGE);
    assert_err_contains(f, "too large");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--max-store-bytes", "1K", NULL}, &a),
                     -ERANGE);
    assert_string_equal(f->err, "--max-store-bytes: '1K' is below 1M");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--bogus", NULL}, &a), -EINVAL);
    assert_string_equal(f->err, "unknown option '--bogus' (see --help)");
    assert_int_equal(load_args(f, (const char *[]){"demo", "-x", NULL}, &a), -EINVAL);
    assert_string_equal(f->err, "unknown option '-x' (see --help)");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--cpu-hz", NULL}, &a), -EINVAL);
    assert_string_equal(f->err, "option '--cpu-hz' needs a value (see --help)");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--once=yes", NULL}, &a), -EINVAL);
    assert_string_equal(f->err, "option '--once=yes' takes no value (see --help)");
    assert_int_equal(load_args(f, (const char *[]){"demo", "-n", "a b", NULL}, &a), -EINVAL);
    assert_string_equal(f->err, "-n: a name has no spaces");
    assert_int_equal(
        load_args(f, (const char *[]){"demo", "--print-settings=everything", NULL}, &a), -EINVAL);
    assert_err_contains(f, "not one of help, sample, reference");
    fx_free(f);
}

/* A secret's value is never in a message. */
static void secrets(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    pfr_settings_args a;
    assert_int_equal(load_args(f, (const char *[]){"demo", "--token", "hunter 2", NULL}, &a),
                     -EINVAL);
    assert_null(strstr(f->err, "hunter"));
    assert_string_equal(f->err, "--token: not a valid string (the value is not shown)");
    char *envp[] = {"PFR_DEMO_TOKEN=hunter 3", NULL};
    assert_int_equal(pfr_settings_load_env(f->s, envp, f->err, sizeof(f->err)), -EINVAL);
    assert_null(strstr(f->err, "hunter"));
    assert_err_contains(f, "PFR_DEMO_TOKEN: not a valid string");
    assert_int_equal(load_file(f, "[demo]\ntoken = hunter 4\n", NULL), -EINVAL);
    assert_null(strstr(f->err, "hunter"));
    fx_free(f);
}

static void flags(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    pfr_settings_args a;
    char *argv[] = {"demo",     "op1",  "--interval=250ms", "-n",  "node1", "--once",
                    "--budget", "1.5s", "--dwarf",          "off", "op2",   "--",
                    "--cpu-hz", NULL};
    assert_int_equal(pfr_settings_load_args(f->s, 13, argv, &a, f->err, sizeof(f->err)), 0);
    assert_true(f->c.interval_ns == 250000000);
    assert_string_equal(f->c.name, "node1");
    assert_true(f->c.once);
    assert_true(f->c.budget_ms == 1500);
    assert_false(f->c.dwarf);
    /* operands permuted to the end, in their order; "--" ends the options */
    assert_int_equal(a.first_operand, 10);
    assert_string_equal(argv[10], "op1");
    assert_string_equal(argv[11], "op2");
    assert_string_equal(argv[12], "--cpu-hz");
    assert_int_equal(load_args(f, (const char *[]){"demo", "--version", "-h", NULL}, &a), 0);
    assert_true(a.version && a.help);
    assert_int_equal(
        load_args(f, (const char *[]){"demo", "--print-settings", "reference", NULL}, &a), 0);
    assert_string_equal(a.print_settings, "reference");
    /* the last flag of a key wins */
    assert_int_equal(
        load_args(f, (const char *[]){"demo", "--cpu-hz=5", "--cpu-hz", "6", NULL}, &a), 0);
    assert_int_equal(f->c.cpu_hz, 6);
    fx_free(f);
}

static void direct_set(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    assert_int_equal(
        pfr_settings_set(f->s, "demo", "cpu_hz", "9", "x.ini:4", f->err, sizeof(f->err)), 0);
    assert_int_equal(f->c.cpu_hz, 9);
    assert_int_equal(
        pfr_settings_set(f->s, "demo", "cpu_hz", "x", "x.ini:4", f->err, sizeof(f->err)), -EINVAL);
    assert_string_equal(f->err, "x.ini:4: cpu_hz: 'x' is not a whole number");
    assert_int_equal(pfr_settings_set(f->s, "demo", "nope", "1", NULL, f->err, sizeof(f->err)),
                     -ENOENT);
    assert_string_equal(f->err, "unknown key 'nope'");
    fx_free(f);
}

static void collected(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    int rc = load_file(f,
                       "[demo]\nbatch_bytes = 2M\n"
                       "[sink a]\nurl = http://a\npassword_file = /k\n"
                       "[sink \"b\"]\ntimeout = 5s\n"
                       "[sink:c]\nurl = http://c\n",
                       NULL);
    if (rc)
        fail_msg("%s", f->err);
    assert_int_equal(f->got.n, 5);
    char want[160];
    assert_string_equal(f->got.lines[0],
                        (snprintf(want, sizeof(want), "- batch_bytes=2M 0 %s", f->path), want));
    assert_string_equal(f->got.lines[1],
                        (snprintf(want, sizeof(want), "a url=http://a 0 %s", f->path), want));
    assert_string_equal(f->got.lines[2],
                        (snprintf(want, sizeof(want), "a api_key_file=/k 0 %s", f->path), want));
    assert_string_equal(f->got.lines[3],
                        (snprintf(want, sizeof(want), "b timeout=5s 0 %s", f->path), want));
    assert_string_equal(f->got.lines[4],
                        (snprintf(want, sizeof(want), "c url=http://c 0 %s", f->path), want));
    f->got.n = 0;
    char *envp[] = {"DEMO_URL=http://env", NULL};
    assert_int_equal(pfr_settings_load_env(f->s, envp, f->err, sizeof(f->err)), 0);
    pfr_settings_args a;
    assert_int_equal(load_args(f, (const char *[]){"demo", "--timeout", "1s", NULL}, &a), 0);
    assert_int_equal(f->got.n, 2);
    assert_string_equal(f->got.lines[0], "- url=http://env 1 DEMO_URL");
    assert_string_equal(f->got.lines[1], "- timeout=1s 2 --timeout");
    /* checked by the row before the collector sees it; the collector's refusal has the line */
    assert_int_equal(load_file(f, "[sink a]\nbatch_bytes = 1\n", NULL), -ERANGE);
    snprintf(want, sizeof(want), "%s:2: batch_bytes: '1' is below 1K", f->path);
    assert_string_equal(f->err, want);
    assert_int_equal(load_file(f, "[sink a]\n\nurl = refused\n", NULL), -EINVAL);
    snprintf(want, sizeof(want), "%s:3: url: the collector refuses it", f->path);
    assert_string_equal(f->err, want);
    assert_int_equal(load_file(f, "[sink a/b]\nurl = x\n", NULL), -EINVAL);
    assert_err_contains(f, "[sink a/b]: a section's name is letters");
    assert_int_equal(load_file(f, "[sink a]\nfoo = x\n", NULL), -EINVAL);
    assert_err_contains(f, ":2: unknown key 'foo' in [sink a]");
    /* a collected group's struct, filled by the program */
    struct demo_sink sk;
    assert_int_equal(pfr_settings_group_defaults(&demo_sink_group, &sk, f->err, sizeof(f->err)), 0);
    assert_true(sk.batch_bytes == 16ull << 20 && sk.timeout_ms == 60000 && !sk.url);
    assert_int_equal(pfr_settings_group_set(&demo_sink_group, &sk, "password_file", "/p", NULL,
                                            f->err, sizeof(f->err)),
                     0);
    assert_string_equal(sk.key_file, "/p");
    assert_int_equal(pfr_settings_group_set(&demo_sink_group, &sk, "timeout", "0", "[sink a]",
                                            f->err, sizeof(f->err)),
                     -ERANGE);
    assert_string_equal(f->err, "[sink a]: timeout: '0' is below 1ms");
    assert_int_equal(
        pfr_settings_group_set(&demo_sink_group, &sk, "nope", "0", NULL, f->err, sizeof(f->err)),
        -ENOENT);
    pfr_settings_release(&demo_sink_group, &sk);
    assert_null(sk.key_file);
    fx_free(f);
}

/* The mistakes a program's table can make are refused at bind. */
static void table_mistakes(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    struct demo_conf other;
    static const pfr_setting clash_flag[] = {
        {.key = "store2", .type = PFR_SET_STRING, .flag = "store", DF(store)}};
    static const pfr_setting clash_env[] = {
        {.key = "x", .type = PFR_SET_STRING, .env = "PFR_DEMO_STORE", DF(store)}};
    static const pfr_setting clash_env2[] = {
        {.key = "x", .type = PFR_SET_STRING, .env = "OTHER,PFR_DEMO_TOKEN", DF(store)}};
    static const pfr_setting clash_key[] = {
        {.key = "cpu_hz", .type = PFR_SET_COUNT, .flag = "", .env = "", DF(cpu_hz)}};
    static const pfr_setting builtin[] = {{.key = "config", .type = PFR_SET_STRING, DF(store)}};
    static const pfr_setting bad_alias[] = {{.key = "x", .alias_of = "nothing"}};
    static const pfr_setting bad_width[] = {{.key = "x", .type = PFR_SET_BOOL, DF(cpu_hz)}};
    static const pfr_setting bad_default[] = {
        {.key = "x", .type = PFR_SET_DURATION, .def = "soon", DF(interval_ns)}};
    static const pfr_setting no_parse[] = {{.key = "x", .type = PFR_SET_LIST, DF(rules)}};
    const struct {
        const pfr_setting *rows;
        const char *section;
        int rc;
        const char *msg;
    } cases[] = {
        {clash_flag, "x", -EEXIST, "has the flag of demo's row store"},
        {clash_env, "x", -EEXIST, "has the environment variable of demo's row store"},
        {clash_env2, "x", -EEXIST, "has the environment variable of demo's row token"},
        {clash_key, "demo", -EEXIST, "has the key of demo's row cpu_hz"},
        {builtin, "x", -EEXIST, "a flag every program has"},
        {bad_alias, "x", -EINVAL, "an alias of no row"},
        {bad_width, "x", -EINVAL, "a boolean field is a bool"},
        {bad_default, "x", -EINVAL, "bad: the default of x: 'soon' is not a duration"},
        {no_parse, "x", -EINVAL, "no parse function"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pfr_settings_group g = {
            .name = "bad", .section = cases[i].section, .rows = cases[i].rows, .nrows = 1};
        memset(&other, 0, sizeof(other));
        f->err[0] = '\0';
        assert_int_equal(pfr_settings_bind(f->s, &g, &other, f->err, sizeof(f->err)), cases[i].rc);
        assert_err_contains(f, cases[i].msg);
        pfr_settings_release(&g, &other);
    }
    fx_free(f);
}

static void required_and_default_section(void **state)
{
    (void)state;
    static const pfr_setting rows[] = {{.key = "url",
                                        .type = PFR_SET_STRING,
                                        .offset = offsetof(struct demo_sink, url),
                                        .width = sizeof(char *),
                                        .flags = PFR_SETF_REQUIRED}};
    pfr_settings_group g = {.name = "req", .section = "req", .rows = rows, .nrows = 1};
    struct demo_sink sk;
    char err[256];
    pfr_settings *s = pfr_settings_new("req", "PFR_REQ_", "usage");
    assert_int_equal(pfr_settings_bind(s, &g, &sk, err, sizeof(err)), 0);
    char *argv[] = {"req", NULL}, *envp[] = {NULL};
    pfr_settings_args a;
    assert_int_equal(pfr_settings_load(s, 1, argv, envp, NULL, NULL, NULL, &a, err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "url is required (--url)");
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_settings_req.%d.ini", (int)getpid());
    FILE *o = fopen(path, "w");
    fputs("url = http://x\n", o);
    fclose(o);
    pfr_settings_set_default_section(s, "req");
    assert_int_equal(pfr_settings_load_file(s, path, NULL, err, sizeof(err)), 0);
    assert_string_equal(sk.url, "http://x");
    unlink(path);
    pfr_settings_release(&g, &sk);
    pfr_settings_free(s);
}

static char *text_of(const pfr_settings *s, const char *what)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    assert_non_null(o);
    assert_int_equal(pfr_settings_write(s, what, o), 0);
    fclose(o);
    return buf;
}

static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("no '%s' in:\n%s", want, text);
}

/* The layer that set a key; a program with subcommands; a program without a config file. */
static void layers_and_modes(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    write_file(f, "[demo]\ncpu_hz = 7\nport = 1\n");
    char *envp[] = {"PFR_DEMO_PORT=2", NULL};
    char *argv[] = {"demo", "--interval", "1s", NULL};
    pfr_settings_args a;
    assert_int_equal(
        pfr_settings_load(f->s, 3, argv, envp, NULL, f->path, NULL, &a, f->err, sizeof(f->err)), 0);
    assert_int_equal(pfr_settings_layer_of(f->s, "demo", "cpu_hz"), PFR_SETTINGS_FILE);
    assert_int_equal(pfr_settings_layer_of(f->s, "demo", "port"), PFR_SETTINGS_ENV);
    assert_int_equal(pfr_settings_layer_of(f->s, "demo", "interval"), PFR_SETTINGS_ARGS);
    assert_int_equal(pfr_settings_layer_of(f->s, "demo", "store"), -1);
    assert_int_equal(pfr_settings_layer_of(f->s, "demo", "nothing"), -1);

    /* stop at the first operand: the command's flags are left to it */
    pfr_settings_set_stop_at_operand(f->s, true);
    char *cmd[] = {"demo", "--cpu-hz", "5", "flame", "--from", "-1h", NULL};
    assert_int_equal(pfr_settings_load_args(f->s, 6, cmd, &a, f->err, sizeof(f->err)), 0);
    assert_int_equal(a.first_operand, 3);
    assert_string_equal(cmd[3], "flame");
    assert_string_equal(cmd[4], "--from");
    assert_int_equal(f->c.cpu_hz, 5);

    /* no config file: --config is unknown and --help does not offer it */
    char *cfg[] = {"demo", "--config", "x.ini", NULL};
    assert_int_equal(pfr_settings_load_args(f->s, 3, cfg, &a, f->err, sizeof(f->err)), 0);
    assert_string_equal(a.config, "x.ini");
    pfr_settings_set_no_config(f->s, true);
    assert_int_equal(pfr_settings_load_args(f->s, 3, cfg, &a, f->err, sizeof(f->err)), -EINVAL);
    assert_string_equal(f->err, "unknown option '--config' (see --help)");
    char *buf = text_of(f->s, "help");
    assert_null(strstr(buf, "--config"));
    assert_non_null(strstr(buf, "--help"));
    free(buf);
    fx_free(f);
}

static void texts(void **state)
{
    (void)state;
    struct fixture *f = fx_new();
    pfr_settings_set_sample_header(f->s, "demo.ini: the demo's configuration.\n\nLayers.");
    char *help = text_of(f->s, "help");
    assert_has(help, "Usage: demo [OPTIONS]\n\ndemo:\n");
    assert_has(help, "  --interval DURATION      length of one profile (200ms to 1h; default "
                     "10s; env PFR_DEMO_INTERVAL)\n");
    assert_has(help, "  --max-store-bytes SIZE   size cap of the ring (at least 1M; default 512M; "
                     "env\n                           PFR_DEMO_MAX_STORE_BYTES)\n");
    assert_has(help, "  -n, --name VALUE         this node's name (env PFR_DEMO_NAME)\n");
    assert_has(help, "  --no-dwarf               the same as --dwarf false\n");
    assert_has(help, "  --token VALUE            a secret (env DEMO_TOKEN/PFR_DEMO_TOKEN)\n");
    assert_has(help, "  --service-rule 'KIND PATTERN SERVICE'\n                           name");
    assert_has(help, "  --budget DURATION        symbolizing time per interval (0 to 1h; "
                     "default half the interval;");
    assert_null(strstr(help, "debug"));
    assert_has(help, "  -h, --help");
    free(help);

    char *sample = text_of(f->s, "sample");
    assert_has(sample, "# demo.ini: the demo's configuration.\n#\n# Layers.\n\n[demo]\n\n# The "
                       "demo's own settings.\n\n# the ring\n#store = /var/lib/demo/ring.db\n");
    assert_has(sample, "# length of one profile (200ms to 1h)\n#interval = 10s\n");
    assert_has(sample, "# this node's name\n#name = node-1\n");
    assert_has(sample, "#token =\n");
    assert_has(sample, "\n[service]\n");
    assert_has(sample, "#rule = comm postgres* database\n#rule = exe /opt/shop/bin/* shop\n");
    assert_has(sample, "\n#[sink NAME]\n\n# One [sink NAME] section per sink.\n");
    assert_has(sample, "#batch_bytes = 16M\n");
    assert_null(strstr(sample, "once"));
    assert_null(strstr(sample, "no_dwarf"));
    assert_null(strstr(sample, "password_file"));
    assert_null(strstr(sample, "debug"));
    free(sample);

    char *ref = text_of(f->s, "reference");
    assert_has(ref, "<!-- settings:demo:demo begin -->\nThe demo's own settings.\n\n| flag | key "
                    "in `[demo]` | environment | default | meaning |\n|---|---|---|---|---|\n");
    assert_has(ref, "| `--interval DURATION` | `interval` | `PFR_DEMO_INTERVAL` | `10s` | length "
                    "of one profile (200ms to 1h) |\n");
    assert_has(ref, "| `--no-dwarf` |  |  |  | the same as --dwarf false |\n");
    assert_has(ref, "| `--token VALUE` | `token` | `DEMO_TOKEN`, else `PFR_DEMO_TOKEN` |  | a "
                    "secret |\n");
    assert_has(ref, "| `-n`, `--name VALUE` | `name` | `PFR_DEMO_NAME` | none |");
    assert_has(ref, "| `--budget DURATION` | `budget` | `PFR_DEMO_BUDGET` | half the interval |");
    assert_has(ref, "| `--once` |  |  | `false` | run once, then exit |\n");
    assert_has(ref, "| `--service-rule 'KIND PATTERN SERVICE'` | `rule` (repeatable) |  | none |");
    assert_has(ref, "<!-- settings:demo:service-rules end -->\n");
    assert_has(ref, "| flag | key in `[sink NAME]` |");
    assert_has(ref, "| `--password-file VALUE` | `password_file` |  |  | the same as "
                    "--api-key-file FILE |\n");
    assert_null(strstr(ref, "debug"));
    free(ref);
    assert_int_equal(pfr_settings_write(f->s, "other", stdout), -EINVAL);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(layering),
        cmocka_unit_test(config_path),
        cmocka_unit_test(file_refusals),
        cmocka_unit_test(flag_refusals),
        cmocka_unit_test(secrets),
        cmocka_unit_test(flags),
        cmocka_unit_test(direct_set),
        cmocka_unit_test(collected),
        cmocka_unit_test(table_mistakes),
        cmocka_unit_test(required_and_default_section),
        cmocka_unit_test(texts),
        cmocka_unit_test(layers_and_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
