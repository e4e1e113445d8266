/* clickhouse_sink: the sink kind "clickhouse" (rows of Coroot's tables through ClickHouse's HTTP
 * interface): its own settings and its row of the kinds' table (sinks.h). */
#ifndef PFR_SHIP_CLICKHOUSE_SINK_H
#define PFR_SHIP_CLICKHOUSE_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "sinks/sinks.h"

/* What only a clickhouse sink has (pfr_sink_conf.kind_conf). */
typedef struct pfr_ch_conf {
    char *user;                /* default "default" */
    char *database;            /* default "default" */
    bool basic_auth;           /* HTTP basic auth instead of X-ClickHouse-User / X-ClickHouse-Key */
    bool create_tables;        /* create Coroot's tables when missing */
    bool create_tables_any_db; /* ... in a database not named like Coroot's too */
    uint32_t ttl_days;         /* TTL of tables we create (default 7, Coroot's); 0 = none */
    uint64_t dedup_window;     /* non_replicated_deduplication_window of tables we create */
    int64_t stack_refresh_ms;  /* how far ahead a stack row's LastSeen reaches */
    bool compress;             /* gzip request bodies (Content-Encoding) */
    uint64_t batch_memory;     /* what the sink may hold to send a batch: the blocks of its
                                  streamed inserts, the encoder's caches, the ring's cache */
} pfr_ch_conf;

extern const pfr_sink_kind pfr_sink_clickhouse;

/* Its row's parts (clickhouse_settings.c): the kind's keys, its defaults of common keys, its
 * checks across fields, the Basic form of its credentials, its share of the ring's cache, and
 * its database for `status`. */
extern const pfr_settings_group pfr_ch_settings;
void pfr_ch_defaults(pfr_sink_conf *c);
int pfr_ch_check(pfr_sink_conf *c, char *err, size_t errlen);
int pfr_ch_secrets(const pfr_sink_conf *c, pfr_secrets *k);
uint64_t pfr_ch_ring_cache(const pfr_sink_conf *c);
void pfr_ch_status_detail(const pfr_sink_conf *c, const char **label, const char **value);

#endif
