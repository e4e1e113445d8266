/* ch_answer: reading ClickHouse's answers to the clickhouse sink's schema checks. The answers
 * come from the network (a proxy, a lying server): any text gives a verdict, never a crash. */
#ifndef PFR_SHIP_CH_ANSWER_H
#define PFR_SHIP_CH_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

/* ans: "table\tname\ttype" lines (system.columns). True if profiling_samples and
 * profiling_stacks have every column the sink writes, with its type; else why says what. */
bool pfr_ch_check_columns(const char *ans, char *why, size_t whylen);

/* ans: "name\tengine\tengine_full" lines (system.tables). The table's
 * non_replicated_deduplication_window (0 if unset); *replicated for Replicated / Shared engines
 * (which deduplicate on their own); *found whether the table is listed. */
long long pfr_ch_dedup_window(const char *ans, const char *table, bool *replicated, bool *found);

#endif
