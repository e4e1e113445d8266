/*
 * state: the shipper's own small SQLite file (the ring stays single-writer). Per sink: the
 * cursor (id of the last chunk delivered or set aside), the batch in flight (so a restart
 * re-sends exactly it, with the same idempotency token), consecutive failed attempts, the
 * last error and success, counters; the chunks a sink rejected (set aside); backfill progress.
 * Commits are synchronous (FULL): a cursor that was committed survives power loss.
 */
#ifndef PFR_SHIP_STATE_H
#define PFR_SHIP_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_state pfr_state;

typedef struct pfr_sink_state {
    char name[72];
    char kind[16];
    int64_t cursor;
    /* the batch in flight: chunks after pending_after up to pending_max (at most pending_limit
     * of them); pending_max == 0: none */
    int64_t pending_after, pending_max;
    uint64_t pending_limit;
    char pending_token[256];
    uint64_t batch_limit;    /* chunks per batch while isolating a rejected chunk; 0 = normal */
    uint32_t attempts;       /* consecutive failed attempts of the current batch */
    int64_t next_attempt_ns; /* wall clock; 0 = now */
    int64_t last_attempt_ns, last_success_ns, last_error_ns;
    char last_error[512];
    uint64_t delivered_chunks, delivered_bytes; /* bytes: request bodies */
    uint64_t rejected_chunks;                   /* ever set aside */
    uint64_t lost_chunks;    /* evicted from the ring before this sink took them */
    uint64_t corrupt_chunks; /* skipped as corrupt */
    uint64_t retries;        /* failed attempts, ever */
    uint64_t sink_failures;  /* of them, answers about the sink as a whole: nothing set aside */
    uint64_t skipped_chunks; /* left out by the sink's shipping policy (ship = agent) */
    /* the ring's count of chunks it gave up past this sink's cursor (pfr_store_consumer_lost)
     * when the sink last looked: what it counted since then is what this sink lost */
    uint64_t ring_lost_seen;
    /* ring_lost_seen was never taken (a row of a shipper before it, whose own count of the ids
     * missing after its cursor may be in the ring's count already): the next start takes the
     * ring's count as it is, so the chunks are not counted lost twice */
    bool ring_lost_unknown;
} pfr_sink_state;

/* Open (creating it unless read_only) the state file at path. The file and its -wal, -shm and
 * -journal are made mode 0600, whatever the umask and their mode before: they hold the servers'
 * messages. */
int pfr_state_open(const char *path, bool read_only, pfr_state **out, char *err, size_t errlen);
void pfr_state_close(pfr_state *st);

/* Transactions group several writes (a delivered batch: cursor, counters, rejected rows). */
int pfr_state_begin(pfr_state *st);
int pfr_state_commit(pfr_state *st);
void pfr_state_rollback(pfr_state *st);

/* The row of sink name; created (cursor 0) when missing unless the file is read-only, in which
 * case -ENOENT. kind is recorded at creation; a sink that changes kind keeps its cursor. */
int pfr_state_sink_get(pfr_state *st, const char *name, const char *kind, pfr_sink_state *out);
int pfr_state_sink_put(pfr_state *st, const pfr_sink_state *s);
/* Every sink row, by name. cb's non-zero return stops and is returned. */
int pfr_state_sinks(pfr_state *st, int (*cb)(const pfr_sink_state *s, void *ctx), void *ctx);

/* Set chunks aside for sink (idempotent per chunk id: a second rejection updates the reason). */
int pfr_state_reject(pfr_state *st, const char *sink, const int64_t *ids, size_t n, long status,
                     const char *reason, int64_t now_ns);
/* Up to cap set-aside ids of sink greater than after_id, ascending; *n gets the count. */
int pfr_state_rejected(pfr_state *st, const char *sink, int64_t after_id, int64_t *ids, size_t cap,
                       size_t *n);
int pfr_state_unreject(pfr_state *st, const char *sink, const int64_t *ids, size_t n);
int pfr_state_rejected_count(pfr_state *st, const char *sink, uint64_t *n);
/* Chunks a sink takes out of order, ahead of its cursor (pinned ranges first, engine.c): put
 * as the batch in flight (sent 0), marked delivered up to an id, listed (sent or in flight, ids
 * > after_id ascending, *ids grown with realloc), and forgotten: the in-flight ones (their batch
 * ended otherwise) and the delivered ones the cursor has passed. */
int pfr_state_ahead_put(pfr_state *st, const char *sink, const int64_t *ids, size_t n);
int pfr_state_ahead_sent(pfr_state *st, const char *sink, int64_t up_to);
int pfr_state_ahead_list(pfr_state *st, const char *sink, bool sent, int64_t after_id,
                         int64_t **ids, size_t *n, size_t *cap);
int pfr_state_ahead_forget(pfr_state *st, const char *sink, int64_t cursor);
/* Forget the set-aside chunks of sink with ids below below (INT64_MAX: all): the ring no longer
 * has them. *n gets how many there were, *first / *last their lowest and highest id. */
int pfr_state_rejected_drop_below(pfr_state *st, const char *sink, int64_t below, uint64_t *n,
                                  int64_t *first, int64_t *last);
/* The last reason recorded for a set-aside chunk of sink (for status). */
int pfr_state_rejected_last(pfr_state *st, const char *sink, char *reason, size_t cap,
                            int64_t *at_ns);

/* Small named values (the shipper's instance id, the ring file's identity). *value gets at
 * most cap bytes; -ENOENT when unset. */
int pfr_state_meta_get(pfr_state *st, const char *key, char *value, size_t cap);
int pfr_state_meta_put(pfr_state *st, const char *key, const char *value);

/* Backfill progress of (sink, from, to): the last chunk id sent (0 = none) and whether done. */
int pfr_state_backfill_get(pfr_state *st, const char *sink, int64_t from, int64_t to,
                           int64_t *last_id, bool *done);
int pfr_state_backfill_put(pfr_state *st, const char *sink, int64_t from, int64_t to,
                           int64_t last_id, bool done, int64_t now_ns);

#endif
