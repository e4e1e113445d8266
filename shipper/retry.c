#include "retry.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>

const char *pfr_outcome_name(enum pfr_outcome o)
{
    switch (o) {
    case PFR_OUT_OK:
        return "ok";
    case PFR_OUT_RETRY:
        return "retry";
    case PFR_OUT_REJECT:
        return "rejected";
    case PFR_OUT_ABORTED:
        return "aborted";
    case PFR_OUT_SINK:
        return "refused by the sink";
    }
    return "?";
}

/* First match wins. */
static const struct status_class {
    long lo, hi;
    enum pfr_outcome outcome;
} status_classes[] = {
    {200, 299, PFR_OUT_OK},
    /* Who we are or where we send, not what: every chunk would get the same answer. (Coroot:
     * 404 = unknown API key or a wrong path.) */
    {401, 401, PFR_OUT_SINK},
    {403, 403, PFR_OUT_SINK},
    {404, 405, PFR_OUT_SINK},
    {407, 407, PFR_OUT_SINK},
    /* Timeouts, "too early", rate limits and every server-side failure pass with time. */
    {408, 408, PFR_OUT_RETRY},
    {425, 425, PFR_OUT_RETRY},
    {429, 429, PFR_OUT_RETRY},
    {400, 499, PFR_OUT_REJECT},
    {500, 599, PFR_OUT_RETRY},
    /* Redirects are not followed (a body must not wander): the URL is wrong. */
    {300, 399, PFR_OUT_SINK},
};

enum pfr_outcome pfr_outcome_of_status(long status)
{
    for (size_t i = 0; i < sizeof(status_classes) / sizeof(status_classes[0]); i++)
        if (status >= status_classes[i].lo && status <= status_classes[i].hi)
            return status_classes[i].outcome;
    /* 1xx as a final answer, or no HTTP status at all: nothing about the chunk, so wait. */
    return PFR_OUT_RETRY;
}

uint64_t pfr_rng_next(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

int64_t pfr_backoff_delay_ms(const pfr_backoff *b, unsigned attempt, int64_t retry_after_ms,
                             uint64_t *rng)
{
    int64_t initial = b->initial_ms > 0 ? b->initial_ms : PFR_BACKOFF_INITIAL_MS;
    int64_t cap = b->max_ms > 0 ? b->max_ms : PFR_BACKOFF_MAX_MS;
    if (initial > cap)
        initial = cap;
    int64_t d = initial;
    for (unsigned i = 1; i < attempt && d < cap; i++)
        d = d > cap / 2 ? cap : d * 2;
    if (d > cap)
        d = cap;
    int64_t half = d / 2;
    int64_t delay = d - half + (half > 0 ? (int64_t)(pfr_rng_next(rng) % (uint64_t)(half + 1)) : 0);
    if (retry_after_ms > delay)
        delay = retry_after_ms;
    return delay > cap ? cap : delay;
}

int64_t pfr_retry_after_ms(const char *value, int64_t now_s)
{
    if (!value)
        return -1;
    while (isspace((unsigned char)*value))
        value++;
    if (!*value)
        return -1;
    if (isdigit((unsigned char)*value)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (errno || *end)
            return -1;
        if (v > 30ull * 86400)
            v = 30ull * 86400;
        return (int64_t)v * 1000;
    }
    time_t t = curl_getdate(value, NULL);
    if (t == (time_t)-1)
        return -1;
    int64_t d = (int64_t)t - now_s;
    return d > 0 ? d * 1000 : 0;
}
