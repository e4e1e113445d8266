/* retry: what to do after a request — the outcome classes, exponential backoff with jitter, and
 * the Retry-After header. */
#ifndef PFR_SHIP_RETRY_H
#define PFR_SHIP_RETRY_H

#include <stdbool.h>
#include <stdint.h>

enum pfr_outcome {
    PFR_OUT_OK = 0,  /* delivered */
    PFR_OUT_RETRY,   /* transient: 5xx, 408, 425, 429, timeouts, resets, DNS, a lying answer */
    PFR_OUT_REJECT,  /* this content will fail forever as sent (400, 413, ...): set it aside */
    PFR_OUT_ABORTED, /* we stopped it (shutdown): not the sink's fault, not an attempt */
    /* The sink refuses every request whatever it carries (401/403/404, redirects, ClickHouse's
     * authentication, rights, quota): retried like PFR_OUT_RETRY, nothing set aside. */
    PFR_OUT_SINK,
};

const char *pfr_outcome_name(enum pfr_outcome o);

/* The class of an HTTP status (the transport worked), from a table of status ranges. */
enum pfr_outcome pfr_outcome_of_status(long status);

typedef struct pfr_backoff {
    int64_t initial_ms; /* first delay (default 1 s) */
    int64_t max_ms;     /* cap (default 5 min); Retry-After is honoured up to this too */
} pfr_backoff;

#define PFR_BACKOFF_INITIAL_MS 1000
#define PFR_BACKOFF_MAX_MS     (5 * 60 * 1000)

/* Delay before attempt number attempt+1 after attempt failures (attempt >= 1): the capped
 * exponential initial * 2^(attempt-1), of which a random half is kept ("equal jitter", so
 * many shippers restarted at once spread out, and the delay never collapses to zero).
 * retry_after_ms >= 0 (from the server) raises the delay to at least that, within the cap.
 * rng is the caller's xorshift state (never 0). */
int64_t pfr_backoff_delay_ms(const pfr_backoff *b, unsigned attempt, int64_t retry_after_ms,
                             uint64_t *rng);

/* A Retry-After value: delta seconds ("120") or an HTTP date. now_s is the current unix time.
 * Returns milliseconds from now (>= 0), or -1 if absent or unparseable. */
int64_t pfr_retry_after_ms(const char *value, int64_t now_s);

/* xorshift64*: a small generator for jitter; state must be non-zero. */
uint64_t pfr_rng_next(uint64_t *state);

#endif
