/*
 * engine: moves chunks from the ring to the sinks. One lane per sink (and mode): it finds what
 * waits after its cursor, plans a batch (its chunk ids, from their metadata) when the batching
 * limits say so, records the batch as in flight in the state file, has the sink send it (the
 * sink reads the chunks from the ring as it goes, at every attempt), and on success moves its
 * cursor (state file, then the ring's consumer cursor "shipper.<sink>"). Failures back off
 * exponentially with jitter, and so do answers about the sink as a whole (a wrong key: nothing is
 * set aside); rejections of the content are narrowed down to the guilty chunks (smaller batches),
 * which are set aside. A set-aside chunk the ring evicts is counted as lost, like one evicted
 * before it was sent.
 *
 * Modes: live (the daemon and --once), rejected (--retry-rejected: the set-aside chunks, oldest
 * first), backfill (a time range, with its own progress row; the live cursor is not moved).
 */
#ifndef PFR_SHIP_ENGINE_H
#define PFR_SHIP_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pfr_store.h"
#include "state.h"

typedef struct pfr_engine pfr_engine;

typedef struct pfr_engine_opts {
    pfr_store *store; /* read-only ring, not owned */
    pfr_state *state; /* not owned */
    const char *store_path;
    bool once;           /* drain what is there and finish */
    int64_t poll_ms;     /* idle look at the ring */
    int64_t progress_ms; /* backfill progress lines (0 = none) */
    /* Wait up to ns (monotonic); return early when a signal asks to stop. */
    void (*sleep)(void *ctx, int64_t ns);
    bool (*should_stop)(void *ctx);
    void *ctx;
    uint64_t seed; /* jitter */
} pfr_engine_opts;

enum pfr_lane_mode {
    PFR_LANE_LIVE = 0,
    PFR_LANE_REJECTED,
    PFR_LANE_BACKFILL,
};

int pfr_engine_new(const pfr_engine_opts *o, pfr_engine **out, char *err, size_t errlen);
void pfr_engine_free(pfr_engine *e);

/* Add a lane for sink conf (conf must outlive the engine). Backfill lanes take [from, to). */
int pfr_engine_add_lane(pfr_engine *e, const pfr_sink_conf *conf, enum pfr_lane_mode mode,
                        int64_t from_ns, int64_t to_ns, char *err, size_t errlen);

enum pfr_run_result {
    PFR_RUN_DONE = 0, /* once/backfill: everything that was there went (or was set aside) */
    PFR_RUN_STOPPED,  /* should_stop said so */
    PFR_RUN_DEADLINE, /* deadline passed with work left */
};

/* Run the lanes until done (once/backfill), stopped, or deadline_ns (monotonic, 0 = none).
 * Returns a pfr_run_result or a negative errno (state file or ring failure). */
int pfr_engine_run(pfr_engine *e, int64_t deadline_ns);

/* After a run: the sinks that delivered nothing in it and whose last HTTP answer was an error
 * (refused, chunks set aside, or a server failure; a sink never reached is not counted), each
 * logged with that answer. */
size_t pfr_engine_failed_sinks(const pfr_engine *e);

#endif
