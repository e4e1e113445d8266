/* clickhouse_settings: the clickhouse sink kind's own settings, its defaults of the common ones,
 * its checks across fields, and what else of it `status` and the redaction need. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sinks/clickhouse/clickhouse_sink.h"

static int check_database(const char *v, void *field, char *err, size_t errlen)
{
    (void)field;
    for (const char *p = v; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '_') {
            snprintf(err, errlen, "letters, digits and _ only");
            return -EINVAL;
        }
    }
    if (!*v) {
        snprintf(err, errlen, "empty");
        return -EINVAL;
    }
    return 0;
}

#define C(field) PFR_SETTING_FIELD(pfr_ch_conf, field)

static const pfr_setting ch_rows[] = {
    {.key = "user",
     .type = PFR_SET_STRING,
     C(user),
     .def = "default",
     .metavar = "NAME",
     .help = "ClickHouse user."},
    {.key = "database",
     .type = PFR_SET_STRING,
     C(database),
     .def = "default",
     .parse = check_database,
     .metavar = "NAME",
     .help = "ClickHouse database (letters, digits, _): the Coroot project's, "
             "coroot_<project id> with a global ClickHouse; status shows it."},
    {.key = "basic_auth",
     .type = PFR_SET_BOOL,
     C(basic_auth),
     .def = "false",
     .env = "",
     .flags = PFR_SETF_NO_ARG,
     .help = "HTTP basic auth instead of X-ClickHouse-User / X-ClickHouse-Key."},
    {.key = "create_tables",
     .type = PFR_SET_BOOL,
     C(create_tables),
     .def = "false",
     .env = "",
     .flags = PFR_SETF_NO_ARG,
     .help = "Create the database and Coroot's tables when missing; refused at startup for a "
             "database not named coroot or coroot_<id> (default included), and it creates "
             "nothing on a cluster (Coroot makes those)."},
    {.key = "create_tables_any_database",
     .type = PFR_SET_BOOL,
     C(create_tables_any_db),
     .def = "false",
     .env = "",
     .flags = PFR_SETF_NO_ARG,
     .help = "Allow create_tables in a database of any name (a project whose ClickHouse "
             "integration names one)."},
    {.key = "ttl_days",
     .type = PFR_SET_COUNT,
     C(ttl_days),
     .def = "7",
     .max = 36500,
     .env = "",
     .metavar = "N",
     .help = "TTL of the tables it creates, in days; 0 = none."},
    {.key = "dedup_window",
     .type = PFR_SET_COUNT,
     C(dedup_window),
     .def = "10000",
     .min = 1,
     .max = 10000000,
     .flag = "",
     .env = "",
     .metavar = "N",
     .help = "non_replicated_deduplication_window of the tables it creates."},
    {.key = "stack_refresh",
     .type = PFR_SET_DURATION,
     C(stack_refresh_ms),
     .unit_ns = 1000000,
     .def = "1h",
     .min = 1,
     .env = "",
     .metavar = "DURATION",
     .help = "How far ahead a stack row's LastSeen reaches."},
    {.key = "batch_memory",
     .type = PFR_SET_SIZE,
     C(batch_memory),
     .def = "32M",
     .min = 4 << 20,
     .env = "",
     .metavar = "SIZE",
     .help = "Memory for sending a batch (its streamed blocks, the encoder's caches, an eighth "
             "for the ring's decoded dictionaries); peak RSS stays within ~2x."},
    {.key = "compress",
     .type = PFR_SET_BOOL,
     C(compress),
     .def = "false",
     .env = "",
     .flags = PFR_SETF_NO_ARG,
     .help = "gzip request bodies."},
    {.key = "no_compress",
     .alias_of = "compress",
     .alias_value = "false",
     .type = PFR_SET_BOOL,
     C(compress),
     .env = "",
     .flags = PFR_SETF_NO_ARG | PFR_SETF_NO_FILE,
     .help = "Turns compress off."},
};

const pfr_settings_group pfr_ch_settings = {
    .name = "sink clickhouse",
    .section = "sink",
    .shared_section = "shipper",
    .intro = "Keys of clickhouse sinks only (type = clickhouse): rows of Coroot's tables "
             "through ClickHouse's HTTP interface.",
    .rows = ch_rows,
    .nrows = sizeof(ch_rows) / sizeof(ch_rows[0]),
};

void pfr_ch_defaults(pfr_sink_conf *c)
{
    /* Bigger inserts make fewer parts to merge (256M saves a fifth of ClickHouse's CPU per
     * chunk in a backfill, docs/benchmarks.md), but a batch must also get through the link
     * within `timeout`: 64M needs ~1.1 MB/s for 60 s. Backfills over fast links: 256M. */
    c->batch.max_chunks = 2000;
    c->batch.max_bytes = 64ull << 20;
}

/* A database Coroot reads: "coroot", or "coroot_<project id>" (Coroot's ids: [0-9a-z]). */
static bool coroot_database(const char *db)
{
    if (!strcmp(db, "coroot"))
        return true;
    if (strncmp(db, "coroot_", 7) || !db[7])
        return false;
    for (const char *p = db + 7; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p))
            return false;
    return true;
}

int pfr_ch_check(pfr_sink_conf *c, char *err, size_t errlen)
{
    const pfr_ch_conf *k = c->kind_conf;
    if (k->create_tables && !k->create_tables_any_db && !coroot_database(k->database)) {
        snprintf(err, errlen,
                 "sink %s: create_tables would create Coroot's tables in database '%s', which "
                 "Coroot does not read: Coroot keeps a project in 'coroot_<project id>' (a global "
                 "ClickHouse) or 'coroot'; give --database, or set create_tables_any_database "
                 "(--create-tables-any-database) if '%s' is the database of the project's "
                 "ClickHouse integration",
                 c->name, k->database, k->database);
        return -EINVAL;
    }
    return 0;
}

int pfr_ch_secrets(const pfr_sink_conf *c, pfr_secrets *k)
{
    const pfr_ch_conf *cc = c->kind_conf;
    return c->api_key ? pfr_secrets_add_basic(k, cc->user ? cc->user : "default", c->api_key) : 0;
}

uint64_t pfr_ch_ring_cache(const pfr_sink_conf *c)
{
    const pfr_ch_conf *cc = c->kind_conf;
    return cc->batch_memory / 8;
}

void pfr_ch_status_detail(const pfr_sink_conf *c, const char **label, const char **value)
{
    const pfr_ch_conf *cc = c->kind_conf;
    *label = "database";
    *value = cc->database;
}
