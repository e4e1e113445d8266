/* pfr-shipper's settings: every key, alias, flag and environment variable it took before the
 * settings tables still works, durations and sizes with units work everywhere, per-kind defaults
 * hold, and bad settings are refused with a reason (config.c, settings.c, the kinds' tables). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "sinks/clickhouse/clickhouse_sink.h"
#include "sinks/coroot/coroot_sink.h"
#include "sinks/sinks.h"

static const pfr_ch_conf *ch(const pfr_sink_conf *s)
{
    assert_ptr_equal(s->kind, &pfr_sink_clickhouse);
    return s->kind_conf;
}

/* A file of text for --config or PFR_SHIPPER_CONFIG; path gets its name. */
static void write_file(char *path, const char *text)
{
    int fd = mkstemp(path);
    if (fd < 0) /* (once, beside the whole suite under load: the reason, if ever again) */
        fail_msg("mkstemp %s: %s", path, strerror(errno));
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* Variables the tests set, unset before and after each (the host's own are not read). */
static const char *const env_names[] = {
    "PFR_SHIPPER_CONFIG",   "PFR_SHIPPER_STORE",        "PFR_STORE",
    "PFR_SHIPPER_STATE",    "PFR_SHIPPER_LOG_LEVEL",    "PFR_SHIPPER_SINK",
    "PFR_SHIPPER_URL",      "PFR_SHIPPER_API_KEY_FILE", "PFR_SHIPPER_USER",
    "PFR_SHIPPER_DATABASE", "PFR_SHIPPER_API_KEY",      "MY_KEY"};

static int clean_env(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
        unsetenv(env_names[i]);
    /* Not the host's /etc/pfr/shipper.ini: an empty file. */
    static char empty[] = "/tmp/pfr-shipper-empty-XXXXXX";
    if (empty[sizeof(empty) - 2] == 'X')
        write_file(empty, "");
    setenv("PFR_SHIPPER_CONFIG", empty, 1);
    return 0;
}

static void test_config_ini(void **st)
{
    (void)st;
    pfr_shipper_conf c = {0};
    char err[512];
    const char *ini = "[shipper]\n"
                      "store = /tmp/r.db\n"
                      "batch_age = 3s\n"
                      "[sink coroot]\n"
                      "type = coroot\n"
                      "url = https://coroot.example\n"
                      "api_key_env = MY_KEY\n"
                      "[sink:ch]\n"
                      "type = clickhouse\n"
                      "url = http://ch:8123\n"
                      "database = coroot\n"
                      "create_tables = yes\n"
                      "batch_chunks = 500\n"
                      "batch_memory = 48M\n"
                      "bandwidth = 256k\n";
    assert_int_equal(pfr_shipper_conf_parse_ini(&c, ini, err, sizeof(err)), 0);
    assert_string_equal(c.store_path, "/tmp/r.db");
    assert_int_equal(c.nsinks, 2);
    pfr_sink_conf *s = pfr_shipper_conf_sink(&c, "coroot");
    assert_non_null(s);
    assert_ptr_equal(s->kind, &pfr_sink_coroot);
    assert_int_equal(s->batch.max_age_ms, 3000);
    assert_int_equal(s->batch.max_chunks, 100);
    assert_string_equal(s->api_key_env, "MY_KEY");
    s = pfr_shipper_conf_sink(&c, "ch");
    assert_non_null(s);
    assert_ptr_equal(s->kind, &pfr_sink_clickhouse);
    const pfr_ch_conf *cc = s->kind_conf;
    assert_string_equal(cc->database, "coroot");
    assert_string_equal(cc->user, "default");
    assert_true(cc->create_tables);
    assert_int_equal(s->batch.max_chunks, 500);
    assert_int_equal(cc->batch_memory, 48 << 20);
    assert_int_equal(s->bandwidth, 256 * 1024);
    /* the ring's cache of dictionaries: an eighth of the largest batch_memory */
    assert_int_equal(pfr_shipper_ring_cache(&c), 6 << 20);
    pfr_shipper_conf_free(&c);

    const char *bad[] = {
        "[sink x]\ntype = coroot\nurl = http://a\napi_key = hunter2\n",     /* inline secret */
        "[sink x]\ntype = kafka\nurl = http://a\n",                         /* unknown type */
        "[sink x]\nurl = http://a\n",                                       /* no type */
        "[sink x]\ntype = coroot\n",                                        /* no url */
        "[sink x]\ntype = coroot\nurl = ftp://a\n",                         /* bad url */
        "[sink x]\ntype = coroot\nurl = http://a\nbatch_age = soon\n",      /* bad value */
        "[sink x]\ntype = coroot\nurl = http://a\nfrobnicate = 1\n",        /* unknown key */
        "[sink b@d]\ntype = coroot\nurl = http://a\n",                      /* bad name */
        "[elsewhere]\nx = 1\n",                                             /* unknown section */
        "[shipper]\nlog_level = loud\n",                                    /* bad level */
        "[sink x]\ntype = clickhouse\nurl = http://a\ndatabase = a;b\n",    /* bad database */
        "[sink x]\ntype = clickhouse\nurl = http://a\nbatch_memory = 1M\n", /* too little */
        "[sink x\ntype = coroot\n",                                         /* syntax */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&c, 0, sizeof(c));
        err[0] = 0;
        int rc = pfr_shipper_conf_parse_ini(&c, bad[i], err, sizeof(err));
        if (rc == 0)
            fail_msg("accepted: %s", bad[i]);
        assert_true(err[0] != 0);
        assert_null(strstr(err, "hunter2"));
        pfr_shipper_conf_free(&c);
    }
}

static int load(pfr_shipper_conf *c, char *err, size_t errlen, ...)
{
    char *argv[96] = {"pfr-shipper"};
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 95)
        argv[argc++] = (char *)a;
    va_end(ap);
    FILE *devnull = fopen("/dev/null", "w");
    int rc = pfr_shipper_conf_load(c, argc, argv, 1714557600ll * 1000000000, devnull, err, errlen);
    fclose(devnull);
    return rc;
}

static void test_config_flags(void **st)
{
    (void)st;
    pfr_shipper_conf c;
    char err[512];
    setenv("PFR_SHIPPER_API_KEY", "k-from-env", 1);
    assert_int_equal(load(&c, err, sizeof(err), "--store", "/tmp/r.db", "--state", "/tmp/s.db",
                          "--sink", "coroot", "--url", "http://c:8080", "--once", "--backoff-max",
                          "2s", "--batch-chunks", "7", NULL),
                     0);
    assert_true(c.once);
    assert_int_equal(c.nsinks, 1);
    assert_string_equal(c.sinks[0].name, "coroot");
    assert_string_equal(c.sinks[0].api_key, "k-from-env");
    assert_int_equal(c.sinks[0].backoff.max_ms, 2000);
    assert_int_equal(c.sinks[0].batch.max_chunks, 7);
    assert_int_equal(c.deadline_ms, 600000);
    pfr_shipper_conf_free(&c);
    unsetenv("PFR_SHIPPER_API_KEY");

    /* a key file: first line, trimmed */
    char keyfile[] = "/tmp/pfr-shipper-key-XXXXXX";
    int fd = mkstemp(keyfile);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "  s3cret \nsecond line\n", 22), 22);
    close(fd);
    assert_int_equal(load(&c, err, sizeof(err), "--sink", "clickhouse", "--url", "http://h:8123",
                          "--api-key-file", keyfile, "--user", "bob", "--database", "coroot",
                          "--create-tables", NULL),
                     0);
    assert_string_equal(c.sinks[0].api_key, "s3cret");
    const pfr_ch_conf *cc = c.sinks[0].kind_conf;
    assert_string_equal(cc->user, "bob");
    assert_true(cc->create_tables);
    assert_int_equal(c.deadline_ms, 0); /* daemon: no deadline */
    pfr_shipper_conf_free(&c);
    unlink(keyfile);

    /* secrets never on the command line */
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", "--api-key",
                     "hunter2", NULL) < 0);
    assert_null(strstr(err, "hunter2"));
    pfr_shipper_conf_free(&c);
    /* Coroot without a key */
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", NULL) < 0);
    pfr_shipper_conf_free(&c);
    /* no sink */
    assert_true(load(&c, err, sizeof(err), "--once", NULL) < 0);
    pfr_shipper_conf_free(&c);
    /* backfill needs a whole range (none: from = to = 0, the whole of a ring slice, which
     * main.c checks once the store is open) and a sink that exists */
    setenv("PFR_SHIPPER_API_KEY", "k", 1);
    assert_true(load(&c, err, sizeof(err), "backfill", "--sink", "coroot", "--url", "http://c",
                     "--from", "-2h", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_int_equal(
        load(&c, err, sizeof(err), "backfill", "--sink", "coroot", "--url", "http://c", NULL), 0);
    assert_true(c.from_ns == 0 && c.to_ns == 0);
    pfr_shipper_conf_free(&c);
    assert_int_equal(load(&c, err, sizeof(err), "backfill", "--sink", "coroot", "--url", "http://c",
                          "--from", "-2h", "--to", "now", NULL),
                     0);
    assert_int_equal(c.cmd, PFR_CMD_BACKFILL);
    assert_int_equal(c.to_ns - c.from_ns, 7200ll * 1000000000);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "backfill", "--sink", "nosuch", "--from", "-2h", "--to",
                     "now", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "status", "--from", "-2h", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "frobnicate", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", "--user", "x",
                     NULL) < 0);
    pfr_shipper_conf_free(&c);
    unsetenv("PFR_SHIPPER_API_KEY");
    assert_int_equal(load(&c, err, sizeof(err), "--help", NULL), PFR_CONF_EXIT);
    pfr_shipper_conf_free(&c);
    assert_int_equal(load(&c, err, sizeof(err), "status", NULL), 0);
    pfr_shipper_conf_free(&c);
}

static void test_config_service_prefix(void **st)
{
    (void)st;
    pfr_shipper_conf c = {0};
    char err[512];
    const char *ini = "[shipper]\nservice_prefix = dc2-\n"
                      "[sink co]\ntype = coroot\nurl = http://c\n"
                      "[sink ch]\ntype = clickhouse\nurl = http://h\nservice_prefix = site1-\n";
    assert_int_equal(pfr_shipper_conf_parse_ini(&c, ini, err, sizeof(err)), 0);
    assert_string_equal(pfr_shipper_conf_sink(&c, "co")->service_prefix, "dc2-");
    assert_string_equal(pfr_shipper_conf_sink(&c, "ch")->service_prefix, "site1-");
    pfr_shipper_conf_free(&c);
    memset(&c, 0, sizeof(c));
    assert_true(pfr_shipper_conf_parse_ini(
                    &c, "[sink co]\ntype = coroot\nurl = http://c\nservice_prefix = a\x01\n", err,
                    sizeof(err)) < 0);
    assert_non_null(strstr(err, "service_prefix"));
    pfr_shipper_conf_free(&c);
    setenv("PFR_SHIPPER_API_KEY", "k", 1);
    assert_int_equal(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c",
                          "--service-prefix", "eu-", NULL),
                     0);
    assert_string_equal(c.sinks[0].service_prefix, "eu-");
    pfr_shipper_conf_free(&c);
    unsetenv("PFR_SHIPPER_API_KEY");
}

/* The config parser's verdict on a clickhouse sink with create_tables into db (and
 * create_tables_any_database when any). */
static int create_into(const char *db, bool any, char *err, size_t errlen)
{
    char ini[512];
    pfr_shipper_conf c = {0};
    snprintf(ini, sizeof(ini),
             "[sink ch]\ntype = clickhouse\nurl = http://h\ndatabase = %s\n"
             "create_tables = true\n%s",
             db, any ? "create_tables_any_database = true\n" : "");
    int rc = pfr_shipper_conf_parse_ini(&c, ini, err, errlen);
    pfr_shipper_conf_free(&c);
    return rc;
}

static void test_ch_dbnames(void **st)
{
    (void)st;
    const char *ok[] = {"coroot", "coroot_1elggi7o", "coroot_abc"};
    const char *bad[] = {"default", "pfr", "coroot_", "coroot_ABC", "corootx", "Coroot"};
    char err[512];
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (create_into(ok[i], false, err, sizeof(err)))
            fail_msg("refused %s: %s", ok[i], err);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (!create_into(bad[i], false, err, sizeof(err)))
            fail_msg("accepted create_tables into %s", bad[i]);
        assert_non_null(strstr(err, "create_tables_any_database"));
        assert_int_equal(create_into(bad[i], true, err, sizeof(err)), 0); /* told so */
    }
    pfr_shipper_conf c = {0};
    /* the default database, without --database */
    assert_true(load(&c, err, sizeof(err), "--sink", "clickhouse", "--url", "http://h",
                     "--create-tables", NULL) < 0);
    assert_non_null(strstr(err, "'default'"));
    pfr_shipper_conf_free(&c);
    assert_int_equal(load(&c, err, sizeof(err), "--sink", "clickhouse", "--url", "http://h",
                          "--create-tables", "--create-tables-any-database", NULL),
                     0);
    assert_true(((const pfr_ch_conf *)c.sinks[0].kind_conf)->create_tables_any_db);
    pfr_shipper_conf_free(&c);
    assert_int_equal(load(&c, err, sizeof(err), "--sink", "clickhouse", "--url", "http://h",
                          "--database", "pfr", NULL),
                     0);
    pfr_shipper_conf_free(&c);
}

/* Every key of the file, with units, in [shipper] (as every sink's default) and in the sinks'
 * own sections, in each spelling of a sink section. */
static void test_config_every_key(void **st)
{
    (void)st;
    pfr_shipper_conf c = {0};
    char err[512];
    const char *ini = "[shipper]\n"
                      "store = /tmp/r.db\n"
                      "state = /tmp/s.db\n"
                      "log_level = debug\n"
                      "poll_interval = 250ms\n"
                      "deadline = 1m30s\n"
                      "progress_interval = 1.5\n"
                      "backoff_max = 2m\n"
                      "ttl_days = 3\n" /* a clickhouse key: the coroot sink has none */
                      "[sink co]\n"
                      "type = coroot\n"
                      "url = https://coroot.example\n"
                      "api_key_env = MY_KEY\n"
                      "[sink:ch]\n"
                      "type = clickhouse\n"
                      "url = http://ch:8123\n"
                      "password_file = /tmp/pw\n"
                      "user = pfr\n"
                      "database = coroot_x1\n"
                      "basic_auth = yes\n"
                      "create_tables = on\n"
                      "create_tables_any_database = true\n"
                      "dedup_window = 500\n"
                      "stack_refresh = 30m\n"
                      "compress = 1\n"
                      "compress_level = 6\n"
                      "service_prefix = dc1-\n"
                      "batch_chunks = 50\n"
                      "batch_bytes = 2M\n"
                      "batch_memory = 48MiB\n"
                      "batch_age = 500ms\n"
                      "backoff_initial = 250ms\n"
                      "connect_timeout = 1m\n"
                      "timeout = 2m30s\n"
                      "bandwidth = 256k\n"
                      "ca_file = /tmp/ca.pem\n"
                      "client_cert = /tmp/c.pem\n"
                      "client_key = /tmp/k.pem\n"
                      "tls_insecure = true\n"
                      "[sink.ch2]\n"
                      "type = clickhouse\n"
                      "url = http://ch2:8123\n"
                      "password_env = CH_PW\n"
                      "[sink \"co2\"]\n"
                      "type = coroot\n"
                      "url = http://co2\n"
                      "api_key_file = /tmp/k\n";
    assert_int_equal(pfr_shipper_conf_parse_ini(&c, ini, err, sizeof(err)), 0);
    assert_string_equal(c.store_path, "/tmp/r.db");
    assert_string_equal(c.state_path, "/tmp/s.db");
    assert_int_equal(c.log_level, PFR_LOG_DEBUG);
    assert_int_equal(c.poll_ms, 250);
    assert_int_equal(c.deadline_ms, 90000);
    assert_int_equal(c.progress_ms, 1500);
    assert_int_equal(c.nsinks, 4);
    const pfr_sink_conf *co = pfr_shipper_conf_sink(&c, "co");
    assert_ptr_equal(co->kind, &pfr_sink_coroot);
    assert_string_equal(co->api_key_env, "MY_KEY");
    assert_int_equal(co->backoff.max_ms, 120000);
    assert_int_equal(co->batch.max_chunks, 100);     /* coroot's default */
    assert_int_equal(co->batch.max_bytes, 16 << 20); /* coroot's default */
    const pfr_sink_conf *s = pfr_shipper_conf_sink(&c, "ch");
    const pfr_ch_conf *k = ch(s);
    assert_string_equal(s->url, "http://ch:8123");
    assert_string_equal(s->api_key_file, "/tmp/pw");
    assert_string_equal(k->user, "pfr");
    assert_string_equal(k->database, "coroot_x1");
    assert_true(k->basic_auth && k->create_tables && k->create_tables_any_db && k->compress);
    assert_int_equal(k->ttl_days, 3);
    assert_int_equal(k->dedup_window, 500);
    assert_int_equal(k->stack_refresh_ms, 30 * 60000);
    assert_int_equal(s->compress_level, 6);
    assert_string_equal(s->service_prefix, "dc1-");
    assert_int_equal(s->batch.max_chunks, 50);
    assert_int_equal(s->batch.max_bytes, 2 << 20);
    assert_int_equal(k->batch_memory, 48 << 20);
    assert_int_equal(s->batch.max_age_ms, 500);
    assert_int_equal(s->backoff.initial_ms, 250);
    assert_int_equal(s->backoff.max_ms, 120000); /* from [shipper] */
    assert_int_equal(s->connect_timeout_ms, 60000);
    assert_int_equal(s->timeout_ms, 150000);
    assert_int_equal(s->bandwidth, 256 << 10);
    assert_string_equal(s->ca_file, "/tmp/ca.pem");
    assert_string_equal(s->client_cert, "/tmp/c.pem");
    assert_string_equal(s->client_key, "/tmp/k.pem");
    assert_true(s->tls_insecure);
    s = pfr_shipper_conf_sink(&c, "ch2");
    k = ch(s);
    assert_string_equal(s->api_key_env, "CH_PW");
    assert_int_equal(s->batch.max_chunks, 2000);    /* clickhouse's default */
    assert_int_equal(s->batch.max_bytes, 64 << 20); /* clickhouse's default */
    assert_int_equal(k->batch_memory, 32 << 20);    /* the default */
    assert_int_equal(k->ttl_days, 3);               /* from [shipper] */
    assert_string_equal(k->user, "default");
    assert_string_equal(k->database, "default");
    assert_int_equal(k->dedup_window, 10000);
    assert_int_equal(k->stack_refresh_ms, 3600000);
    assert_false(k->compress);
    assert_int_equal(s->compress_level, 1);
    assert_int_equal(s->connect_timeout_ms, 10000);
    assert_int_equal(s->timeout_ms, 60000);
    assert_string_equal(pfr_shipper_conf_sink(&c, "co2")->api_key_file, "/tmp/k");
    pfr_shipper_conf_free(&c);

    /* a kind's key in a sink of another kind */
    memset(&c, 0, sizeof(c));
    assert_true(
        pfr_shipper_conf_parse_ini(&c, "[sink co]\ntype = coroot\nurl = http://c\ndatabase = x\n",
                                   err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "database"));
    pfr_shipper_conf_free(&c);
}

/* Every flag, with units, and where each applies. */
static void test_config_every_flag(void **st)
{
    (void)st;
    char keyfile[] = "/tmp/pfr-shipper-key-XXXXXX", ini[] = "/tmp/pfr-shipper-ini-XXXXXX";
    write_file(keyfile, "pw\n");
    write_file(ini, "[sink other]\ntype = clickhouse\nurl = http://o\n");
    pfr_shipper_conf c;
    char err[512];
    assert_int_equal(
        load(&c, err, sizeof(err), "run", "--config", ini, "--store", "/tmp/r.db", "--state",
             "/tmp/s.db", "--log-level", "warn", "--poll", "100ms", "--once", "--deadline", "1m30s",
             "--retry-rejected", "--sink", "clickhouse", "--url", "http://h:8123",
             "--password-file", keyfile, "--user", "u", "--database", "coroot", "--create-tables",
             "--create-tables-any-database", "--basic-auth", "--ttl-days", "0", "--stack-refresh",
             "2h", "--compress", "--no-compress", "--service-prefix", "p-", "--batch-chunks", "9",
             "--batch-bytes", "1M", "--batch-memory", "8M", "--batch-age", "1s",
             "--backoff-initial", "10ms", "--backoff-max", "1m", "--connect-timeout", "3s",
             "--timeout", "1m", "--bandwidth", "64k", "--ca-file", "/tmp/ca", "--insecure", NULL),
        0);
    assert_string_equal(c.config_path, ini);
    assert_string_equal(c.store_path, "/tmp/r.db");
    assert_string_equal(c.state_path, "/tmp/s.db");
    assert_true(c.state_given && c.once && c.retry_rejected);
    assert_int_equal(c.log_level, PFR_LOG_WARN);
    assert_int_equal(c.poll_ms, 100);
    assert_int_equal(c.deadline_ms, 90000);
    assert_int_equal(c.nsinks, 2);
    const pfr_sink_conf *s = pfr_shipper_conf_sink(&c, "clickhouse");
    const pfr_ch_conf *k = ch(s);
    assert_string_equal(s->url, "http://h:8123");
    assert_string_equal(s->api_key, "pw");
    assert_string_equal(k->user, "u");
    assert_string_equal(k->database, "coroot");
    assert_true(k->create_tables && k->create_tables_any_db && k->basic_auth);
    assert_false(k->compress); /* --no-compress came last */
    assert_int_equal(k->ttl_days, 0);
    assert_int_equal(k->stack_refresh_ms, 7200000);
    assert_string_equal(s->service_prefix, "p-");
    assert_int_equal(s->batch.max_chunks, 9);
    assert_int_equal(s->batch.max_bytes, 1 << 20);
    assert_int_equal(k->batch_memory, 8 << 20);
    assert_int_equal(s->batch.max_age_ms, 1000);
    assert_int_equal(s->backoff.initial_ms, 10);
    assert_int_equal(s->backoff.max_ms, 60000);
    assert_int_equal(s->connect_timeout_ms, 3000);
    assert_int_equal(s->timeout_ms, 60000);
    assert_int_equal(s->bandwidth, 64 << 10);
    assert_string_equal(s->ca_file, "/tmp/ca");
    assert_true(s->tls_insecure);
    /* the file's sink: every sink flag but --url and --api-key-file */
    s = pfr_shipper_conf_sink(&c, "other");
    k = ch(s);
    assert_string_equal(s->url, "http://o");
    assert_null(s->api_key_file);
    assert_string_equal(k->user, "u");
    assert_int_equal(s->batch.max_chunks, 9);
    assert_int_equal(s->timeout_ms, 60000);
    pfr_shipper_conf_free(&c);

    /* backfill: --progress, --from, --to; a file's sink named by --sink */
    assert_int_equal(load(&c, err, sizeof(err), "backfill", "--config", ini, "--sink", "other",
                          "--from", "-1h", "--to", "now", "--progress", "500ms", NULL),
                     0);
    assert_int_equal(c.progress_ms, 500);
    assert_string_equal(c.backfill_sink, "other");
    assert_int_equal(c.to_ns - c.from_ns, 3600ll * 1000000000);
    assert_int_equal(c.deadline_ms, 600000); /* backfill's default */
    pfr_shipper_conf_free(&c);
    /* status --json */
    assert_int_equal(load(&c, err, sizeof(err), "status", "--json", NULL), 0);
    assert_true(c.json);
    pfr_shipper_conf_free(&c);
    /* secrets never from flags, whichever name */
    static const char *const secret_flags[] = {"--api-key", "--password", "--key"};
    for (size_t i = 0; i < 3; i++) {
        assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c",
                         secret_flags[i], "hunter2", NULL) < 0);
        assert_null(strstr(err, "hunter2"));
        pfr_shipper_conf_free(&c);
    }
    /* a bad duration names the flag */
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", "--timeout",
                     "soon", NULL) < 0);
    assert_non_null(strstr(err, "timeout"));
    pfr_shipper_conf_free(&c);
    unlink(keyfile);
    unlink(ini);
}

/* Every environment variable: the program's, and the sink's, which define the sink from flags
 * and environment only. */
static void test_config_every_env(void **st)
{
    (void)st;
    char keyfile[] = "/tmp/pfr-shipper-key-XXXXXX", ini[] = "/tmp/pfr-shipper-ini-XXXXXX";
    write_file(keyfile, "k1\n");
    write_file(ini, "[shipper]\nlog_level = error\n"
                    "[sink other]\ntype = clickhouse\nurl = http://o\n");
    setenv("PFR_SHIPPER_CONFIG", ini, 1);
    setenv("PFR_STORE", "/tmp/fallback.db", 1);
    setenv("PFR_SHIPPER_STATE", "/tmp/env-state.db", 1);
    setenv("PFR_SHIPPER_LOG_LEVEL", "debug", 1);
    setenv("PFR_SHIPPER_SINK", "clickhouse", 1);
    setenv("PFR_SHIPPER_URL", "http://env:8123", 1);
    setenv("PFR_SHIPPER_API_KEY_FILE", keyfile, 1);
    setenv("PFR_SHIPPER_USER", "envuser", 1);
    setenv("PFR_SHIPPER_DATABASE", "envdb", 1);
    pfr_shipper_conf c;
    char err[512];
    assert_int_equal(load(&c, err, sizeof(err), NULL), 0);
    assert_string_equal(c.config_path, ini);
    assert_string_equal(c.store_path,
                        "/tmp/fallback.db"); /* PFR_STORE, without PFR_SHIPPER_STORE */
    assert_string_equal(c.state_path, "/tmp/env-state.db");
    assert_true(c.state_given);
    assert_int_equal(c.log_level, PFR_LOG_DEBUG);
    assert_int_equal(c.nsinks, 2);
    const pfr_sink_conf *s = pfr_shipper_conf_sink(&c, "clickhouse");
    assert_string_equal(s->url, "http://env:8123");
    assert_string_equal(s->api_key, "k1");
    assert_string_equal(ch(s)->user, "envuser");
    assert_string_equal(ch(s)->database, "envdb");
    /* the environment's sink settings are the sink from flags' only */
    s = pfr_shipper_conf_sink(&c, "other");
    assert_string_equal(ch(s)->user, "default");
    assert_null(s->api_key);
    pfr_shipper_conf_free(&c);
    /* PFR_SHIPPER_STORE wins over PFR_STORE; flags over the environment; --sink over
     * PFR_SHIPPER_SINK */
    setenv("PFR_SHIPPER_STORE", "/tmp/own.db", 1);
    setenv("PFR_SHIPPER_API_KEY", "k2", 1);
    unsetenv("PFR_SHIPPER_API_KEY_FILE");
    assert_int_equal(load(&c, err, sizeof(err), "--sink", "coroot", "--log-level", "info", NULL),
                     0);
    assert_string_equal(c.store_path, "/tmp/own.db");
    assert_int_equal(c.log_level, PFR_LOG_INFO);
    s = pfr_shipper_conf_sink(&c, "coroot");
    assert_non_null(s);
    assert_string_equal(s->url, "http://env:8123");
    assert_string_equal(s->api_key, "k2"); /* PFR_SHIPPER_API_KEY: the key itself */
    pfr_shipper_conf_free(&c);
    /* api_key_env (alias password_env) names the variable holding the key */
    unlink(ini);
    char ini2[] = "/tmp/pfr-shipper-ini-XXXXXX";
    write_file(ini2, "[sink co]\ntype = coroot\nurl = http://c\npassword_env = MY_KEY\n");
    unsetenv("PFR_SHIPPER_SINK");
    unsetenv("PFR_SHIPPER_URL");
    setenv("MY_KEY", "k3", 1);
    /* PFR_SHIPPER_USER where no sink is clickhouse: refused, as the flag is */
    assert_true(load(&c, err, sizeof(err), "--config", ini2, NULL) < 0);
    assert_non_null(strstr(err, "PFR_SHIPPER_USER"));
    pfr_shipper_conf_free(&c);
    unsetenv("PFR_SHIPPER_USER");
    unsetenv("PFR_SHIPPER_DATABASE");
    assert_int_equal(load(&c, err, sizeof(err), "--config", ini2, NULL), 0);
    assert_string_equal(pfr_shipper_conf_sink(&c, "co")->api_key, "k3");
    pfr_shipper_conf_free(&c);
    /* state from the file is the daemon's: a ring slice does not take it */
    unsetenv("PFR_SHIPPER_STATE");
    char ini3[] = "/tmp/pfr-shipper-ini-XXXXXX";
    write_file(ini3, "[shipper]\nstate = /tmp/file-state.db\n"
                     "[sink co]\ntype = coroot\nurl = http://c\napi_key_env = MY_KEY\n");
    assert_int_equal(load(&c, err, sizeof(err), "status", "--config", ini3, NULL), 0);
    assert_string_equal(c.state_path, "/tmp/file-state.db");
    assert_false(c.state_given);
    pfr_shipper_conf_free(&c);
    assert_int_equal(
        load(&c, err, sizeof(err), "status", "--config", ini3, "--state=/tmp/x.db", NULL), 0);
    assert_true(c.state_given);
    pfr_shipper_conf_free(&c);
    unlink(keyfile);
    unlink(ini2);
    unlink(ini3);
    clean_env(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_ini, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_config_flags, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_config_service_prefix, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_ch_dbnames, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_config_every_key, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_config_every_flag, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_config_every_env, clean_env, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
