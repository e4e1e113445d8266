/* ch_lastseen: keeps the LastSeen of Coroot's stacks from going back.
 *
 * profiling_stacks is a ReplacingMergeTree without a version column, partitioned by
 * toDate(LastSeen): of a (ServiceName, Hash)'s rows in one partition a merge keeps the one
 * inserted last. Coroot reads the table without FINAL and finds a stack with "LastSeen > from",
 * so an old stack row inserted after a newer one (a backfill, a second host) would make the
 * stack vanish from the live range once merged. Before a batch's stack rows go, the sink asks
 * ClickHouse for the newest LastSeen stored under each of their keys, and leaves out the rows
 * that would not move it forward, and those whose chunk the stored one still covers (a row's
 * LastSeen is its chunk's end plus refresh: the same rule as the encoder's, which may have
 * forgotten the stack; what is stored is kept for it, pfr_ch_lastseen_stored).
 *
 * The questions: one query per up to max_keys keys (and 192 KiB of text, below ClickHouse's
 * default max_query_size of 256 KiB), answered with at most one line of numbers per key:
 *   SELECT indexOf([services], ServiceName) AS s, Hash, toUnixTimestamp64Nano(max(LastSeen))
 *   FROM <table> WHERE ServiceName IN (services) AND Hash IN (hashes)     -- the primary key
 *     AND (s, Hash) IN ((1, h1), (1, h2), (2, h3)...)                       -- the keys exactly
 *   GROUP BY s, Hash
 * PFR_CH_LASTSEEN_KEYS keys keep an answer within the 128 KiB the HTTP client keeps of one (a
 * question costs ClickHouse more than its keys: few, full ones).
 * Usage: new → (query → send → apply)... until query gives an empty text → skip flags for
 * pfr_ch_columns_render_stacks → free.
 */
#ifndef PFR_SHIP_CH_LASTSEEN_H
#define PFR_SHIP_CH_LASTSEEN_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_buf.h"
#include "sinks/clickhouse/ch_columns.h"

typedef struct pfr_ch_lastseen pfr_ch_lastseen;

#define PFR_CH_LASTSEEN_KEYS 2400 /* keys per query: answer lines of <= 46 bytes each */

/* A lookup over the stack rows of c (which must stay unchanged until it is freed), leaving out
 * rows whose LastSeen minus refresh_ns is not after the stored one. 0 or -ENOMEM. */
int pfr_ch_lastseen_new(const pfr_ch_columns *c, int64_t refresh_ns, pfr_ch_lastseen **out);
void pfr_ch_lastseen_free(pfr_ch_lastseen *l);

/* The next query (into out, reset first) over up to max_keys keys not asked yet, reading table.
 * An empty out: every key was asked. 0 or -ENOMEM. */
int pfr_ch_lastseen_query(pfr_ch_lastseen *l, const char *table, size_t max_keys, pfr_buf *out);

/* Read the answer to the last query ("s\tHash\tnanoseconds" lines): rows whose LastSeen is not
 * after the stored one are flagged. Returns the rows flagged, or -EINVAL for an answer that is
 * not of that form, or cut (what says where). */
long pfr_ch_lastseen_apply(pfr_ch_lastseen *l, const char *ans, char *what, size_t whatlen);

/* One flag per stack row as added (pfr_ch_columns_render_stacks' skip); valid until freed. */
const uint8_t *pfr_ch_lastseen_skip(const pfr_ch_lastseen *l);
/* Per stack row as added, the newest LastSeen stored under its key (INT64_MIN: none, or not
 * asked yet); valid until freed. */
const int64_t *pfr_ch_lastseen_stored(const pfr_ch_lastseen *l);

#endif
