/*
 * sink: what the engine asks of a destination. A batch is a list of ring chunks (chunksrc.h),
 * planned from their metadata; the sink reads the chunks itself while it sends them, and again
 * at every attempt, so it holds one request's worth of a batch at a time, never the batch. The
 * sink judges the answer: delivered, retry later, refused by the sink as a whole (retried too:
 * nothing set aside), or rejected for good (then the engine sets the chunks aside, once the
 * sink's answer to its probe shows the rejection was about them).
 */
#ifndef PFR_SHIP_SINK_H
#define PFR_SHIP_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunksrc.h"
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
    uint64_t body_bytes;    /* the same before compression, of the requests that went whole */
    char message[512];      /* the server's words (quoted) or the transport error, printable */
} pfr_sink_result;

struct pfr_sink_ops {
    const char *kind;
    /* Request bytes per byte the ring stores, before a batch was measured: batch_bytes limits
     * batches by this estimate, then by the ratio batches showed. */
    double stored_ratio;
    /* Get the far side ready before the first batch (tables, schema): an outcome in r. */
    void (*prepare)(pfr_sink *s, pfr_sink_result *r);
    /* Whether a chunk can be sent, from its metadata: 0, or -EINVAL for a chunk that never can
     * (reason in why): the engine sets it aside. */
    int (*check)(const pfr_sink *s, const pfr_chunk_meta *m, char *why, size_t whylen);
    /* Send src's chunks, read from the ring as they go (src's states then say which were gone
     * or corrupt). token names the batch for idempotent retries (the same chunks always get the
     * same token). */
    void (*send)(pfr_sink *s, pfr_chunksrc *src, const char *token, pfr_sink_result *r);
    /* Whether the sink's shipping policy sends a chunk, from its metadata: false = pass it
     * over for good (the engine moves on and counts it). NULL: every chunk goes. */
    bool (*ships)(const pfr_sink *s, const pfr_chunk_meta *m);
    /* A request that carries no chunk and changes nothing, whose answer from a healthy sink
     * differs from any answer about a chunk's content: the engine compares it with a rejection
     * before it sets chunks aside (engine.c, judge_rejection). NULL: none. */
    void (*probe)(pfr_sink *s, pfr_sink_result *r);
    void (*free)(pfr_sink *s);
};

struct pfr_sink {
    const struct pfr_sink_ops *ops;
    const pfr_sink_conf *conf; /* not owned */
    pfr_http *http;            /* owned: the sink's connection */
    pfr_http_opts http_opts;   /* its options (timeouts, TLS, bandwidth, secrets) */
    pfr_secrets secrets;       /* owned: every form the sink's credentials travel in */
};

/* Create the sink for conf by its kind (sinks/sinks.h); conf must outlive it. */
int pfr_sink_new(const pfr_sink_conf *conf, const pfr_http_opts *http, pfr_sink **out, char *err,
                 size_t errlen);
void pfr_sink_free(pfr_sink *s);

/* Helpers shared by the sinks. */
/* Another connection with the sink's options, for a sink that makes requests while one
 * streams; the caller owns it (pfr_http_free). 0 or a negative errno. */
int pfr_sink_http_new(const pfr_sink *s, pfr_http **out);
void pfr_sink_result_reset(pfr_sink_result *r);
/* Fill r from a transport outcome and answer: status class, Retry-After, server message. */
void pfr_sink_result_from_http(pfr_sink_result *r, enum pfr_outcome transport,
                               const pfr_http_resp *resp);
/* An answer that says nothing about the content sent: an HTML page (Content-Type text/html, or
 * a body starting with '<'), as a proxy or a server of another kind answers (nginx's "400 The
 * plain HTTP request was sent to HTTPS port"). pfr_sink_result_from_http makes such a 4xx
 * (but 413 and 414, which are about the request's size) a failure of the sink: nothing is set
 * aside. */
bool pfr_sink_page_answer(const pfr_http_resp *resp);
/* What a page's quote says in a few words: its <title>, or the quote itself. Returns out. */
const char *pfr_sink_page_title(const char *quote, char *out, size_t cap);
/* Make msg (NUL-terminated) fit to write down: the sink's secrets redacted, bytes that are not
 * printable ASCII replaced. The engine passes every result through it. */
void pfr_sink_scrub(const pfr_sink *s, char *msg);

#endif
