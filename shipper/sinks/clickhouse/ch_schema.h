/* ch_schema: reading ClickHouse's answers to the clickhouse sink's schema checks. The answers
 * come from the network (a proxy, a lying server): any text gives a verdict, never a crash. */
#ifndef PFR_SHIP_CH_SCHEMA_H
#define PFR_SHIP_CH_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "pfr_buf.h"

/* ans: "table\tname\ttype" lines (system.columns). True if profiling_samples and
 * profiling_stacks have every column the sink writes, with its type; else why says what. */
bool pfr_ch_check_columns(const char *ans, char *why, size_t whylen);

/* ans: "name\tengine\tengine_full" lines (system.tables). The table's
 * non_replicated_deduplication_window (0 if unset); *replicated for Replicated / Shared engines
 * (which deduplicate on their own); *found whether the table is listed. */
long long pfr_ch_dedup_window(const char *ans, const char *table, bool *replicated, bool *found);

/* What a database holds and what kind of server keeps it: the sink's survey before the first
 * batch, one query (pfr_ch_survey_query) answered with "name\tengine\tengine_full" lines. */
typedef struct pfr_ch_layout {
    /* Coroot's tables and view exist; profiling_*_distributed exist with engine Distributed */
    bool stacks, samples, profiles, profiles_mv;
    bool stacks_dist, samples_dist;
    bool replicated; /* one of Coroot's tables is Replicated* */
    bool keeper;     /* the server has ZooKeeper or Keeper (system.zookeeper exists) */
    bool cloud;      /* ClickHouse Cloud (cloud_mode_engine >= 2): no cluster tables there */
    long clusters;   /* clusters in system.clusters */
} pfr_ch_layout;

/* The survey of database db (letters, digits, _) into out (reset first). 0 or -ENOMEM. */
int pfr_ch_survey_query(const char *db, pfr_buf *out);
/* Read the survey's answer (any text: unknown lines are ignored). */
void pfr_ch_layout_read(const char *ans, pfr_ch_layout *l);
/* True if Coroot keeps (or would make) this database's tables on a cluster: Replicated tables
 * created ON CLUSTER, read through Distributed ones. Coroot does so when the server has Keeper
 * and a cluster (not in ClickHouse Cloud); Replicated or Distributed tables show it too. why
 * says which. */
bool pfr_ch_layout_clustered(const pfr_ch_layout *l, char *why, size_t whylen);

#endif
