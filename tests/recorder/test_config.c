/* Configuration layering (defaults < file < environment < flags) and its errors. */
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

#include "config.h"
#include "cpu_source.h"
#include "goheap_source.h"
#include "pfr_goheap.h"
#include "pfr_scrape.h"
#include "scrape_source.h"

/* Each source's settings, through the source table. */
static const pfr_cpu_config *cpu_of(const pfr_config *c)
{
    return pfr_config_source(c, &pfr_cpu_source_desc);
}

static const pfr_goheap_config *goheap_of(const pfr_config *c)
{
    return pfr_config_source(c, &pfr_goheap_source_desc);
}

static const pfr_scrape_config *scrape_of(const pfr_config *c)
{
    return pfr_config_source(c, &pfr_scrape_source_desc);
}

static const char *env_names[] = {"PFR_STORE",
                                  "PFR_SCRAPE_INTERVAL",
                                  "PFR_INTERVAL",
                                  "PFR_CPU_HZ",
                                  "PFR_MAX_STORE_BYTES",
                                  "PFR_LOG_LEVEL",
                                  "PFR_CONFIG",
                                  "PFR_STACK_MAP_ENTRIES",
                                  "PFR_COUNT_MAP_ENTRIES",
                                  "PFR_SYM_CACHE_BYTES",
                                  "PFR_DWARF",
                                  "PFR_SYMBOLIZE_BUDGET",
                                  "PFR_GO_HEAP_PROFILER",
                                  "GO_HEAP_PROFILER",
                                  "PFR_METRICS_LISTEN",
                                  "PFR_SCRAPE_INTERVAL",
                                  "PFR_UNWIND",
                                  "PFR_UNWIND_TABLE_BYTES",
                                  "PFR_DISK_RESERVE"};

/* No PFR_* variable, and PFR_CONFIG naming an empty file: a host with pfr installed has a
 * default config file that would otherwise change what the tests see. */
static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
        unsetenv(env_names[i]);
    setenv("PFR_CONFIG", "/dev/null", 1);
    return 0;
}

static char *write_file(const char *text)
{
    char *path = strdup("/tmp/pfr-config-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static int load(pfr_config *c, char **argv, char *err, size_t errlen)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    FILE *out = fopen("/dev/null", "w");
    int rc = pfr_config_load(c, argc, argv, out, err, errlen);
    fclose(out);
    return rc;
}

/* The Go heap, metrics and scrape settings: defaults, every layer, and their errors. */
static void source_settings(void **state)
{
    (void)state;
    pfr_config c;
    char err[512] = "";
    char *argv0[] = {"pfr-recorder", NULL};
    assert_int_equal(load(&c, argv0, err, sizeof(err)), 0);
    assert_int_equal(goheap_of(&c)->mode, PFR_GOHEAP_ENABLED);
    assert_true(goheap_of(&c)->interval_ns == 60000000000ll);
    assert_string_equal(c.metrics_listen, "127.0.0.1:9465");
    assert_int_equal(scrape_of(&c)->local, PFR_SCRAPE_LOCAL_AUTO);
    assert_int_equal(scrape_of(&c)->other_netns, PFR_SCRAPE_NETNS_AUTO);
    assert_int_equal(scrape_of(&c)->cpu_seconds, 10);
    assert_int_equal(scrape_of(&c)->targets.n, 0);
    pfr_config_free(&c);

    char *path = write_file("[recorder]\ngo_heap_interval = 30\nscrape_endpoints = heap,cpu\n"
                            "[scrape]\ntarget = http://10.0.0.5:6060 service=api team=core\n");
    setenv("GO_HEAP_PROFILER", "force", 1);
    setenv("PFR_METRICS_LISTEN", "off", 1);
    char *argv1[] = {"pfr-recorder",
                     "--config",
                     path,
                     "--scrape-target",
                     "http://127.0.0.1:7070 service=web",
                     "--scrape-local",
                     "off",
                     "--scrape-other-netns",
                     "off",
                     "--scrape-cpu-seconds",
                     "0",
                     NULL};
    assert_int_equal(load(&c, argv1, err, sizeof(err)), 0);
    assert_int_equal(goheap_of(&c)->mode, PFR_GOHEAP_FORCE);
    assert_true(goheap_of(&c)->interval_ns == 30000000000ll);
    assert_string_equal(c.metrics_listen, "");
    assert_int_equal(scrape_of(&c)->local, PFR_SCRAPE_LOCAL_OFF);
    assert_int_equal(scrape_of(&c)->other_netns, PFR_SCRAPE_NETNS_OFF);
    assert_int_equal(scrape_of(&c)->cpu_seconds, 0);
    assert_int_equal(scrape_of(&c)->endpoints, (1u << PFR_SCRAPE_HEAP) | (1u << PFR_SCRAPE_CPU));
    assert_int_equal(scrape_of(&c)->targets.n, 2);
    assert_string_equal(scrape_of(&c)->targets.v[0],
                        "http://127.0.0.1:7070 service=web"); /* flags first */
    assert_string_equal(scrape_of(&c)->targets.v[1], "http://10.0.0.5:6060 service=api team=core");
    pfr_config_free(&c);
    /* PFR_GO_HEAP_PROFILER wins over Coroot's name */
    setenv("PFR_GO_HEAP_PROFILER", "disabled", 1);
    assert_int_equal(load(&c, argv0, err, sizeof(err)), 0);
    assert_int_equal(goheap_of(&c)->mode, PFR_GOHEAP_DISABLED);
    pfr_config_free(&c);
    unlink(path);
    free(path);

    static const struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--go-heap-profiler", "sometimes", "go_heap_profiler"},
        {"--go-heap-interval", "0", "go_heap_interval"},
        {"--metrics-listen", "9465", "metrics_listen"},
        {"--scrape-local", "maybe", "scrape_local"},
        {"--scrape-other-netns", "sometimes", "scrape_other_netns"},
        {"--scrape-endpoints", "cpu,disk", "scrape_endpoints"},
        {"--scrape-target", "http://x:1", "service"},
        {"--scrape-cpu-seconds", "-1", "scrape_cpu_seconds"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        clear_env(NULL);
        char *argv2[] = {"pfr-recorder", (char *)bad[i].flag, (char *)bad[i].value, NULL};
        err[0] = '\0';
        assert_int_equal(load(&c, argv2, err, sizeof(err)), -EINVAL);
        if (!strstr(err, bad[i].needle) && !strstr(err, bad[i].flag + 2))
            fail_msg("%s %s: error '%s' does not name the setting", bad[i].flag, bad[i].value, err);
        pfr_config_free(&c);
    }
    char *badfile = write_file("[scrape]\ninterval = 5\n");
    char *argv3[] = {"pfr-recorder", "--config", badfile, NULL};
    assert_int_equal(load(&c, argv3, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "[scrape]"));
    pfr_config_free(&c);
    unlink(badfile);
    free(badfile);
}

static void defaults(void **state)
{
    (void)state;
    pfr_config c;
    char err[512] = "";
    char *argv[] = {"pfr-recorder", NULL};
    assert_int_equal(load(&c, argv, err, sizeof(err)), 0);
    assert_string_equal(c.store_path, "/var/lib/pfr/ring.db");
    assert_int_equal(c.interval_ns, 10000000000ll);
    assert_int_equal(cpu_of(&c)->cpu_hz, 100);
    assert_int_equal(c.log_level, PFR_LOG_INFO);
    assert_true(c.dwarf);
    assert_int_equal(c.rules.n, 0);
    pfr_config_free(&c);
}

static void layering(void **state)
{
    (void)state;
    char *path = write_file("; comment\n[recorder]\nstore = /tmp/from-file.db\ninterval = 5\n"
                            "cpu_hz = 49\nlog_level = warn\nmax_store_bytes = 64M\n"
                            "dwarf = no\n[service]\nrule = comm file* from-file\n"
                            "[shipper]\nendpoint = whatever\n");
    char cfgarg[128];
    snprintf(cfgarg, sizeof(cfgarg), "--config=%s", path);
    pfr_config c;
    char err[512] = "";

    char *argv1[] = {"pfr-recorder", cfgarg, NULL};
    assert_int_equal(load(&c, argv1, err, sizeof(err)), 0);
    assert_string_equal(c.store_path, "/tmp/from-file.db");
    assert_int_equal(c.interval_ns, 5000000000ll);
    assert_int_equal(cpu_of(&c)->cpu_hz, 49);
    assert_int_equal(c.log_level, PFR_LOG_WARN);
    assert_int_equal(c.max_store_bytes, 64ull << 20);
    assert_false(c.dwarf);
    assert_int_equal(c.rules.n, 1);
    pfr_config_free(&c);

    /* environment beats the file */
    setenv("PFR_CPU_HZ", "77", 1);
    setenv("PFR_INTERVAL", "0.5", 1);
    assert_int_equal(load(&c, argv1, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->cpu_hz, 77);
    assert_int_equal(c.interval_ns, 500000000ll);
    assert_string_equal(c.store_path, "/tmp/from-file.db");
    pfr_config_free(&c);

    /* flags beat the environment; flag rules come before the file's */
    char *argv2[] = {"pfr-recorder",      cfgarg,
                     "--cpu-hz",          "99",
                     "--store",           "/tmp/flag.db",
                     "--service-rule",    "exe /x/* from-flag",
                     "--log-level=debug", NULL};
    assert_int_equal(load(&c, argv2, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->cpu_hz, 99);
    assert_string_equal(c.store_path, "/tmp/flag.db");
    assert_int_equal(c.log_level, PFR_LOG_DEBUG);
    assert_int_equal(c.rules.n, 2);
    assert_string_equal(c.rules.v[0].service, "from-flag");
    assert_string_equal(c.rules.v[1].service, "from-file");
    pfr_config_free(&c);

    /* PFR_CONFIG names the file when --config does not */
    setenv("PFR_CONFIG", path, 1);
    char *argv3[] = {"pfr-recorder", NULL};
    assert_int_equal(load(&c, argv3, err, sizeof(err)), 0);
    assert_string_equal(c.store_path, "/tmp/from-file.db");
    pfr_config_free(&c);

    /* reload reads it all again */
    assert_int_equal(pfr_config_reload(&c, 2, argv1, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->cpu_hz, 77);
    pfr_config_free(&c);
    clear_env(NULL);
    unlink(path);
    free(path);
}

static void expect_error(char **argv, const char *needle)
{
    pfr_config c;
    char err[512] = "";
    int rc = load(&c, argv, err, sizeof(err));
    assert_true(rc < 0);
    if (!strstr(err, needle))
        fail_msg("error '%s' does not mention '%s'", err, needle);
    pfr_config_free(&c);
}

static void file_errors(void **state)
{
    (void)state;
    struct {
        const char *text, *needle;
    } cases[] = {
        {"[recorder]\nbogus = 1\n", ":2: unknown key 'bogus'"},
        {"[recorder]\n\ncpu_hz = fast\n", ":3: cpu_hz: 'fast' is not"},
        {"[recorder]\ncpu_hz = 0\n", "cpu_hz"},
        {"[recorder]\ninterval = 0.01\n", "interval"},
        {"[recorder]\nmax_store_bytes = 12Q\n", "max_store_bytes"},
        {"[recorder]\nlog_level = loud\n", "log_level: 'loud'"},
        {"[recorder]\ndwarf = maybe\n", "dwarf"},
        {"[service]\nrule = comm x\n", "KIND PATTERN SERVICE"},
        {"[service]\nname = x\n", "unknown key 'name'"},
        {"[recorder\nstore = x\n", ":1:"},
        /* given twice: refused with both lines, not the last silently winning */
        {"[recorder]\ncpu_hz = 10\ncpu_hz = 20\n", ":3: key 'cpu_hz' in [recorder] given again "
                                                   "(first at line 2)"},
        {"[recorder]\ncpu_hz = 10\n[recorder]\n", ":3: section [recorder] given again"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *path = write_file(cases[i].text);
        char cfgarg[128];
        snprintf(cfgarg, sizeof(cfgarg), "--config=%s", path);
        char *argv[] = {"pfr-recorder", cfgarg, NULL};
        expect_error(argv, cases[i].needle);
        /* the file's path is named */
        expect_error(argv, path);
        unlink(path);
        free(path);
    }
    char *argv[] = {"pfr-recorder", "--config", "/nonexistent/pfr.ini", NULL};
    expect_error(argv, "cannot open config file /nonexistent/pfr.ini");
}

/* Lines are read whole: a long comment never sets a key, a 300-byte value arrives whole, and a
 * line past the limit is refused by number. Repeatable keys stay repeatable. */
static void long_lines_and_repeats(void **state)
{
    (void)state;
    char text[9000], pad[400];
    memset(pad, 'x', 380);
    pad[380] = '\0';
    char store[310] = "/tmp/";
    memset(store + 5, 's', 295);
    store[300] = '\0';
    snprintf(text, sizeof(text),
             "[recorder]\n# %sinterval = 7\nstore = %s\n[service]\nrule = comm a x\n"
             "rule = comm b y\n",
             pad, store);
    char *path = write_file(text);
    char cfgarg[128], err[512] = "";
    snprintf(cfgarg, sizeof(cfgarg), "--config=%s", path);
    char *argv[] = {"pfr-recorder", cfgarg, NULL};
    pfr_config c;
    assert_int_equal(load(&c, argv, err, sizeof(err)), 0);
    assert_int_equal(c.interval_ns, 10000000000ll); /* the comment's "interval = 7": ignored */
    assert_string_equal(c.store_path, store);
    assert_int_equal(c.rules.n, 2);
    pfr_config_free(&c);
    unlink(path);
    free(path);

    char *huge = malloc(6000);
    memset(huge, 'h', 5000);
    huge[5000] = '\0';
    snprintf(text, sizeof(text), "[recorder]\nstore = /tmp/%s\n", huge);
    free(huge);
    path = write_file(text);
    snprintf(cfgarg, sizeof(cfgarg), "--config=%s", path);
    expect_error(argv, ":2: line is too long");
    unlink(path);
    free(path);
}

static void flag_and_env_errors(void **state)
{
    (void)state;
    char *a1[] = {"pfr-recorder", "--cpu-hz", "abc", NULL};
    expect_error(a1, "--cpu-hz: 'abc'");
    char *a2[] = {"pfr-recorder", "--interval", "-3", NULL};
    expect_error(a2, "--interval");
    char *a3[] = {"pfr-recorder", "--frobnicate", NULL};
    expect_error(a3, "unknown option '--frobnicate'");
    char *a4[] = {"pfr-recorder", "stray", NULL};
    expect_error(a4, "unexpected argument 'stray'");
    char *a5[] = {"pfr-recorder", "--store", NULL};
    expect_error(a5, "--store");
    char *a6[] = {"pfr-recorder", "--service-rule", "comm", NULL};
    expect_error(a6, "--service-rule");
    char *a7[] = {"pfr-recorder", "--store=", NULL};
    expect_error(a7, "empty path");
    setenv("PFR_CPU_HZ", "lots", 1);
    char *a8[] = {"pfr-recorder", NULL};
    expect_error(a8, "PFR_CPU_HZ: ");
    clear_env(NULL);
}

static void help_version(void **state)
{
    (void)state;
    pfr_config c;
    char err[256];
    char buf[32768] = ""; /* the whole --help */
    FILE *out = fmemopen(buf, sizeof(buf) - 1, "w");
    char *a1[] = {"pfr-recorder", "--help", NULL};
    assert_int_equal(pfr_config_load(&c, 2, a1, out, err, sizeof(err)), PFR_CONFIG_EXIT);
    fclose(out);
    pfr_config_free(&c);
    assert_non_null(strstr(buf, "--store PATH"));
    assert_non_null(strstr(buf, "--cpu-hz N"));
    out = fmemopen(buf, sizeof(buf) - 1, "w");
    char *a2[] = {"pfr-recorder", "--version", NULL};
    assert_int_equal(pfr_config_load(&c, 2, a2, out, err, sizeof(err)), PFR_CONFIG_EXIT);
    fclose(out);
    pfr_config_free(&c);
    assert_non_null(strstr(buf, "pfr-recorder " PFR_VERSION));
}

static void set_values(void **state)
{
    (void)state;
    pfr_config c;
    char err[256];
    char *argv0[] = {"pfr-recorder", NULL};
    assert_int_equal(load(&c, argv0, err, sizeof(err)), 0);
    assert_int_equal(pfr_config_set(&c, "max_store_bytes", "2GiB", err, sizeof(err)), 0);
    assert_int_equal(c.max_store_bytes, 2ull << 30);
    assert_int_equal(pfr_config_set(&c, "sym_cache_bytes", "1k", err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_config_set(&c, "sym_cache_bytes", "8m", err, sizeof(err)), 0);
    assert_int_equal(c.sym_cache_bytes, 8ull << 20);
    assert_int_equal(pfr_config_set(&c, "stack_map_entries", "100000000", err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(pfr_config_set(&c, "count_map_entries", "4096", err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->count_map_entries, 4096);
    assert_int_equal(
        pfr_config_set(&c, "max_store_bytes", "99999999999999999999G", err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_config_set(&c, "interval", "nan", err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_config_set(&c, "interval", "3600", err, sizeof(err)), 0);
    assert_int_equal(pfr_config_set(&c, "symbolize_budget", "2.5", err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->symbolize_budget_ns, 2500000000ll);
    assert_int_equal(pfr_config_set(&c, "symbolize_budget", "-1", err, sizeof(err)), -EINVAL);
    pfr_config_free(&c);
}

/* disk_reserve: its forms, its errors, and a flag over the environment. Modes are
 * pfr_store_reserve_mode's (the store's header is not this test's). */
static void disk_reserve_settings(void **state)
{
    (void)state;
    enum { AUTO, BYTES, PERCENT, OFF };
    pfr_config c;
    char err[256];
    char *argv0[] = {"pfr-recorder", NULL};
    assert_int_equal(load(&c, argv0, err, sizeof(err)), 0);
    assert_int_equal(c.disk_reserve.mode, AUTO);
    const struct {
        const char *v;
        int mode;
        uint64_t bytes;
        double percent;
    } ok[] = {{"2G", BYTES, 2ull << 30, 0},
              {"512k", BYTES, 512u << 10, 0},
              {"5%", PERCENT, 0, 5},
              {"12.5%", PERCENT, 0, 12.5},
              {"50%", PERCENT, 0, 50},
              {"off", OFF, 0, 0},
              {"0", OFF, 0, 0},
              {"auto", AUTO, 0, 0}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(pfr_config_set(&c, "disk_reserve", ok[i].v, err, sizeof(err)), 0);
        assert_int_equal(c.disk_reserve.mode, ok[i].mode);
        if (ok[i].mode == BYTES)
            assert_int_equal(c.disk_reserve.bytes, ok[i].bytes);
        if (ok[i].mode == PERCENT)
            assert_true(c.disk_reserve.percent == ok[i].percent);
    }
    const char *bad[] = {"", "-1", "0%", "51%", "%", "5%%", "abc", "1Q", "nan%", "1e999%"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(pfr_config_set(&c, "disk_reserve", bad[i], err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "disk_reserve"));
    }
    pfr_config_free(&c);
    setenv("PFR_DISK_RESERVE", "10%", 1);
    assert_int_equal(load(&c, argv0, err, sizeof(err)), 0);
    assert_int_equal(c.disk_reserve.mode, PERCENT);
    pfr_config_free(&c);
    char *argv1[] = {"pfr-recorder", "--disk-reserve", "1G", NULL};
    assert_int_equal(load(&c, argv1, err, sizeof(err)), 0);
    assert_int_equal(c.disk_reserve.mode, BYTES);
    assert_int_equal(c.disk_reserve.bytes, 1ull << 30);
    pfr_config_free(&c);
    unsetenv("PFR_DISK_RESERVE");
}

/* Where unwind tables are kept: the unit's cache directory, else beside the ring; a setting
 * over both; off, or a bound of 0: nowhere. */
static void unwind_cache_dir(void **state)
{
    (void)state;
    pfr_config c;
    char err[256], dir[256];
    char *a0[] = {"pfr-recorder", "--store", "/srv/p/ring.db", NULL};
    assert_int_equal(load(&c, a0, err, sizeof(err)), 0);
    const pfr_cpu_config *cc = cpu_of(&c);
    assert_null(cc->unwind_cache_dir);
    assert_int_equal(cc->unwind_cache_bytes, 128ull << 20);
    assert_true(pfr_cpu_config_unwind_cache_dir(cc, c.store_path, NULL, dir, sizeof(dir)));
    assert_string_equal(dir, "/srv/p/unwind-cache");
    assert_true(pfr_cpu_config_unwind_cache_dir(cc, c.store_path, "/var/cache/pfr:/other", dir,
                                                sizeof(dir)));
    assert_string_equal(dir, "/var/cache/pfr/unwind");
    assert_true(pfr_cpu_config_unwind_cache_dir(cc, "ring.db", "", dir, sizeof(dir)));
    assert_string_equal(dir, "unwind-cache");
    pfr_config_free(&c);

    char *a1[] = {"pfr-recorder", "--unwind-cache-dir", "/tmp/uw", NULL};
    assert_int_equal(load(&c, a1, err, sizeof(err)), 0);
    assert_true(pfr_cpu_config_unwind_cache_dir(cpu_of(&c), c.store_path, "/var/cache/pfr", dir,
                                                sizeof(dir)));
    assert_string_equal(dir, "/tmp/uw");
    pfr_config_free(&c);

    char *off[][4] = {{"pfr-recorder", "--unwind-cache-dir", "off", NULL},
                      {"pfr-recorder", "--unwind-cache-bytes", "0", NULL}};
    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
        assert_int_equal(load(&c, off[i], err, sizeof(err)), 0);
        assert_false(pfr_cpu_config_unwind_cache_dir(cpu_of(&c), c.store_path, "/var/cache/pfr",
                                                     dir, sizeof(dir)));
        pfr_config_free(&c);
    }
}

/* --unwind and --unwind-table-bytes through every layer, their defaults and their errors. */
static void unwind_settings(void **state)
{
    (void)state;
    pfr_config c;
    char err[256];
    char *a0[] = {"pfr-recorder", NULL};
    assert_int_equal(load(&c, a0, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->unwind, PFR_UNWIND_AUTO);
    assert_int_equal(cpu_of(&c)->unwind_table_bytes, 32ull << 20);
    pfr_config_free(&c);

    char *path = write_file("[recorder]\nunwind = dwarf\nunwind_table_bytes = 64M\n");
    char *a1[] = {"pfr-recorder", "--config", path, NULL};
    assert_int_equal(load(&c, a1, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->unwind, PFR_UNWIND_DWARF);
    assert_int_equal(cpu_of(&c)->unwind_table_bytes, 64ull << 20);
    pfr_config_free(&c);

    setenv("PFR_UNWIND", "fp", 1); /* environment over the file */
    assert_int_equal(load(&c, a1, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->unwind, PFR_UNWIND_FP);
    pfr_config_free(&c);

    char *a2[] = {"pfr-recorder",         "--config", path, "--unwind", "auto",
                  "--unwind-table-bytes", "2M",       NULL}; /* flags over both */
    assert_int_equal(load(&c, a2, err, sizeof(err)), 0);
    assert_int_equal(cpu_of(&c)->unwind, PFR_UNWIND_AUTO);
    assert_int_equal(cpu_of(&c)->unwind_table_bytes, 2ull << 20);
    pfr_config_free(&c);
    unsetenv("PFR_UNWIND");

    char *a3[] = {"pfr-recorder", "--unwind", "frame-pointers", NULL};
    assert_int_equal(load(&c, a3, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "auto, fp, dwarf"));
    pfr_config_free(&c);
    char *a4[] = {"pfr-recorder", "--unwind-table-bytes", "100k", NULL};
    assert_int_equal(load(&c, a4, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "below 1M"));
    pfr_config_free(&c);
    unlink(path);
    free(path);
}

static void map_sizes(void **state)
{
    (void)state;
    pfr_cpu_config cc = {.cpu_hz = 100};
    int64_t interval = 10000000000ll;
    unsigned st, ct;
    pfr_cpu_config_map_sizes(&cc, interval, 2, &st, &ct); /* 2000 samples: the floor */
    assert_int_equal(st, 8192);
    assert_int_equal(ct, 4096); /* a drain's samples twice over, not the stacks' room */
    pfr_cpu_config_map_sizes(&cc, interval, 64, &st, &ct); /* 64000 samples */
    assert_int_equal(st, 32768);
    assert_int_equal(ct, 131072);
    pfr_cpu_config_map_sizes(&cc, 1000000000ll, 1, &st, &ct); /* 100 samples: the floors */
    assert_int_equal(st, 8192);
    assert_int_equal(ct, 1024);
    pfr_cpu_config_map_sizes(&cc, interval, 1024, &st, &ct); /* capped */
    assert_int_equal(st, 65536);
    assert_int_equal(ct, 131072);
    cc.stack_map_entries = 1000;
    cc.count_map_entries = 3000;
    pfr_cpu_config_map_sizes(&cc, interval, 64, &st, &ct); /* configured wins */
    assert_int_equal(st, 1000);
    assert_int_equal(ct, 3000);
}

/* Every key of before the settings tables, in each layer: the file ([recorder] key), the
 * environment (PFR_KEY) and the flag (--key-with-dashes). A good value loads; a bad one (where a
 * key has bad values) is refused naming the key in every layer, so no key is silently ignored. */
static void every_old_key(void **state)
{
    (void)state;
    static const struct {
        const char *key, *good, *bad;
    } keys[] = {
        {"store", "/tmp/k.db", ""},
        {"interval", "5", "5x"},
        {"cpu_hz", "49", "0"},
        {"max_store_bytes", "64M", "1k"},
        {"disk_reserve", "5%", "60%"},
        {"log_level", "debug", "loud"},
        {"stack_map_entries", "4096", "10"},
        {"count_map_entries", "8192", "10"},
        {"sym_cache_bytes", "8M", "1k"},
        {"dwarf", "false", "maybe"},
        {"perf_maps", "off", "maybe"},
        {"unwind", "fp", "frame-pointers"},
        {"unwind_table_bytes", "2M", "100k"},
        {"symbolize_budget", "2", "-1"},
        {"go_heap_profiler", "disabled", "sometimes"},
        {"go_heap_interval", "30", "0"},
        {"metrics_listen", "off", "9465"},
        {"scrape_interval", "30", "0"},
        {"scrape_local", "off", "maybe"},
        {"scrape_other_netns", "off", "sometimes"},
        {"scrape_endpoints", "heap", "disk"},
        {"scrape_cpu_seconds", "0", "301"},
        {"scrape_ca_file", "/tmp/ca.pem", NULL},
        {"scrape_insecure", "true", "maybe"},
        {"kubelet_url", "https://127.0.0.1:10250", NULL},
        {"k8s_apiserver_url", "https://10.0.0.1", NULL},
        {"k8s_node_name", "node-1", NULL},
        {"k8s_token_file", "/tmp/token", NULL},
        {"k8s_ca_file", "/tmp/k8s-ca.pem", NULL},
        {"k8s_insecure", "yes", "maybe"},
        {"docker_socket", "off", NULL},
        {"docker_root", "/tmp/docker", NULL},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char env[64] = "PFR_", flag[64] = "--", text[256];
        size_t k;
        for (k = 0; keys[i].key[k]; k++) {
            char ch = keys[i].key[k];
            env[4 + k] = (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
            flag[2 + k] = ch == '_' ? '-' : ch;
        }
        env[4 + k] = flag[2 + k] = '\0';
        const char *values[2] = {keys[i].good, keys[i].bad};
        for (int v = 0; v < 2; v++) {
            if (!values[v])
                continue;
            int want = v == 0 ? 0 : -EINVAL;
            pfr_config c;
            char err[512] = "";
            /* the file */
            snprintf(text, sizeof(text), "[recorder]\n%s = %s\n", keys[i].key, values[v]);
            char *path = write_file(text);
            char *a1[] = {"pfr-recorder", "--config", path, NULL};
            if (load(&c, a1, err, sizeof(err)) != want || (v && !strstr(err, keys[i].key)))
                fail_msg("file %s = '%s': '%s'", keys[i].key, values[v], err);
            pfr_config_free(&c);
            unlink(path);
            free(path);
            /* the environment */
            setenv(env, values[v], 1);
            char *a2[] = {"pfr-recorder", NULL};
            if (load(&c, a2, err, sizeof(err)) != want || (v && !strstr(err, env)))
                fail_msg("%s='%s': '%s'", env, values[v], err);
            pfr_config_free(&c);
            unsetenv(env);
            /* the flag */
            char *a3[] = {"pfr-recorder", flag, (char *)values[v], NULL};
            if (load(&c, a3, err, sizeof(err)) != want || (v && !strstr(err, flag)))
                fail_msg("%s '%s': '%s'", flag, values[v], err);
            pfr_config_free(&c);
        }
    }
}

/* Durations take units everywhere; a bare number stays seconds. */
static void durations_with_units(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int64_t ns;
    } cases[] = {{"10s", 10000000000ll},
                 {"1m30s", 90000000000ll},
                 {"2.5", 2500000000ll},
                 {"1500ms", 1500000000ll},
                 {"2m", 120000000000ll}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *v = cases[i].value;
        pfr_config c;
        char err[512] = "";
        char text[256];
        snprintf(text, sizeof(text), "[recorder]\ninterval = %s\ngo_heap_interval = %s\n", v, v);
        char *path = write_file(text);
        setenv("PFR_SCRAPE_INTERVAL", v, 1);
        char *argv[] = {"pfr-recorder", "--config", path, "--symbolize-budget", (char *)v, NULL};
        assert_int_equal(load(&c, argv, err, sizeof(err)), 0);
        assert_true(c.interval_ns == cases[i].ns);
        assert_true(goheap_of(&c)->interval_ns == cases[i].ns);
        assert_true(scrape_of(&c)->interval_ns == cases[i].ns);
        assert_true(cpu_of(&c)->symbolize_budget_ns == cases[i].ns);
        pfr_config_free(&c);
        unsetenv("PFR_SCRAPE_INTERVAL");
        unlink(path);
        free(path);
    }
    char *a1[] = {"pfr-recorder", "--interval", "250ms", NULL};
    pfr_config c;
    char err[512] = "";
    assert_int_equal(load(&c, a1, err, sizeof(err)), 0);
    assert_true(c.interval_ns == 250000000ll);
    pfr_config_free(&c);
    char *a2[] = {"pfr-recorder", "--interval", "100ms", NULL}; /* below 0.2 s */
    expect_error(a2, "--interval");
    char *a3[] = {"pfr-recorder", "--go-heap-interval", "10 parsecs", NULL};
    expect_error(a3, "--go-heap-interval");
}

/* --no-dwarf, and the flags of the list settings. */
static void special_flags(void **state)
{
    (void)state;
    pfr_config c;
    char err[512] = "";
    char *a1[] = {"pfr-recorder", "--no-dwarf", NULL};
    assert_int_equal(load(&c, a1, err, sizeof(err)), 0);
    assert_false(c.dwarf);
    pfr_config_free(&c);
    char *path = write_file("[recorder]\nno_dwarf = 1\n"); /* a flag, not a key */
    char *a2[] = {"pfr-recorder", "--config", path, NULL};
    expect_error(a2, "no_dwarf");
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(defaults, clear_env),
        cmocka_unit_test_setup(layering, clear_env),
        cmocka_unit_test_setup(file_errors, clear_env),
        cmocka_unit_test_setup(long_lines_and_repeats, clear_env),
        cmocka_unit_test_setup(flag_and_env_errors, clear_env),
        cmocka_unit_test_setup(help_version, clear_env),
        cmocka_unit_test_setup(set_values, clear_env),
        cmocka_unit_test_setup(source_settings, clear_env),
        cmocka_unit_test(map_sizes),
        cmocka_unit_test_setup(unwind_settings, clear_env),
        cmocka_unit_test_setup(unwind_cache_dir, clear_env),
        cmocka_unit_test_setup(disk_reserve_settings, clear_env),
        cmocka_unit_test_setup(every_old_key, clear_env),
        cmocka_unit_test_setup(durations_with_units, clear_env),
        cmocka_unit_test_setup(special_flags, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
