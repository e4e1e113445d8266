/*
 * sink: what the engine asks of a destination. A batch is built chunk by chunk (add), sent
 * (send, possibly many times), then committed (it arrived) or discarded. The sink judges the
 * answer: delivered, retry later, refused by the sink as a whole (retried too: nothing set
 * aside), or rejected for good (then the engine sets the chunks aside).
 */
#ifndef PFR_SHIP_SINK_H
#define PFR_SHIP_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "http.h"
#include "pfr_profile.h"
#include "pfr_store.h"
#include "redact.h"
#include "retry.h"

typedef struct pfr_sink pfr_sink;

typedef struct pfr_sink_result {
    enum pfr_outcome outcome;
    /* Leading chunks of the batch that arrived before the outcome (sinks sending one request
     * per chunk). All-or-nothing sinks report 0 on failure, the batch size on success. */
    size_t ndone;
    /* The failure concerns chunk ndone alone (per-chunk sinks); otherwise the rest of the
     * batch. */
    bool one_chunk;
    /* A rejection that may come from one bad chunk among many: worth trying smaller batches
     * before setting all of them aside. */
    bool split;
    long status;            /* HTTP status, 0 if no answer */
    int64_t retry_after_ms; /* -1 = none */
    uint64_t bytes_sent;    /* request body bytes that went out */
    char message[512];      /* the server's words (quoted) or the transport error, printable */
} pfr_sink_result;

struct pfr_sink_ops {
    const char *kind;
    /* Get the far side ready before the first batch (tables, schema): an outcome in r. */
    void (*prepare)(pfr_sink *s, pfr_sink_result *r);
    /* Encode one chunk into the open batch. 0; -ENOMEM; or -EINVAL for a chunk that can never
     * be sent (reason in why): the engine sets it aside. */
    int (*add)(pfr_sink *s, const pfr_chunk_meta *m, const pfr_profile *p, char *why,
               size_t whylen);
    /* Optional, used instead of add when set: the chunk as the ring's samples against its
     * stream's dictionary (pfr_store_scan_samples), for sinks that need no pprof profile. */
    int (*add_samples)(pfr_sink *s, const pfr_chunk_meta *m, const pfr_chunk_samples *v, char *why,
                       size_t whylen);
    /* Bytes the batch's requests will carry so far. */
    uint64_t (*batch_bytes)(const pfr_sink *s);
    /* Send the open batch. token names it for idempotent retries (the same chunks always get
     * the same token). */
    void (*send)(pfr_sink *s, const char *token, pfr_sink_result *r);
    void (*commit)(pfr_sink *s);
    void (*discard)(pfr_sink *s);
    /* Optional (both or neither), to build the next batch while one is sent: seal makes the
     * open batch the one in flight (send and retries send it; commit or discard end it) and
     * lets add start the next batch; discard_open drops that next batch alone. seal: 0 or
     * -ENOMEM (nothing sealed); a batch already in flight (a retry) stays sealed as it is.
     * send may then run in another thread than add. */
    int (*seal)(pfr_sink *s);
    void (*discard_open)(pfr_sink *s);
    void (*free)(pfr_sink *s);
};

struct pfr_sink {
    const struct pfr_sink_ops *ops;
    const pfr_sink_conf *conf; /* not owned */
    pfr_http *http;            /* owned */
    pfr_secrets secrets;       /* owned: every form the sink's credentials travel in */
};

/* Create the sink for conf (conf must outlive it). */
int pfr_sink_new(const pfr_sink_conf *conf, const pfr_http_opts *http, pfr_sink **out, char *err,
                 size_t errlen);
void pfr_sink_free(pfr_sink *s);

/* Helpers shared by the sinks. */
void pfr_sink_result_reset(pfr_sink_result *r);
/* Fill r from a transport outcome and answer: status class, Retry-After, server message. */
void pfr_sink_result_from_http(pfr_sink_result *r, enum pfr_outcome transport,
                               const pfr_http_resp *resp);
/* Make msg (NUL-terminated) fit to write down: the sink's secrets redacted, bytes that are not
 * printable ASCII replaced. The engine passes every result through it. */
void pfr_sink_scrub(const pfr_sink *s, char *msg);

int pfr_sink_coroot_new(const pfr_sink_conf *conf, pfr_sink **out);
int pfr_sink_clickhouse_new(const pfr_sink_conf *conf, pfr_sink **out);

#endif
