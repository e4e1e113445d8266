/* The coalescer: pending pin requests by service, overlapping windows merged, new ones rate
 * limited per service. */
#include "trig_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOUR_NS   (3600LL * 1000000000LL)
#define MAX_LIMIT 64 /* the rate limit's bound: a service's recent starts are kept in a ring */
#define MAX_SLOTS 256

/* One service's state: its pending request (if any) and when its last requests started. */
struct slot {
    bool used, pending;
    pfr_pin_request req;
    int64_t starts[MAX_LIMIT]; /* wall-clock times of its newest new requests, a ring */
    uint32_t nstarts, next;
};

struct pfr_trig_coalescer {
    int64_t max_window_ns;
    uint32_t max_per_hour;
    struct slot *slots;
    size_t nslots, cap;
    pfr_pin_request *parked; /* requests that may grow no more, handed over when their window
                                ends */
    size_t nparked, cap_parked;
};

int pfr_trig_coalescer_new(int64_t max_window_ns, uint32_t max_per_hour, pfr_trig_coalescer **out)
{
    pfr_trig_coalescer *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->max_window_ns = max_window_ns;
    c->max_per_hour = max_per_hour > MAX_LIMIT ? MAX_LIMIT : max_per_hour;
    *out = c;
    return 0;
}

void pfr_trig_coalescer_free(pfr_trig_coalescer *c)
{
    if (!c)
        return;
    free(c->slots);
    free(c->parked);
    free(c);
}

static uint32_t starts_within_hour(const struct slot *s, int64_t now_ns)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nstarts; i++)
        n += s->starts[i] > now_ns - HOUR_NS;
    return n;
}

/* A slot that is neither pending nor started a request within the hour holds nothing worth
 * keeping: it may be reused for another service. */
static bool idle(const struct slot *s, int64_t now_ns)
{
    return !s->used || (!s->pending && starts_within_hour(s, now_ns) == 0);
}

/* The slot of service, else a fresh one; NULL when none can be had. */
static struct slot *find(pfr_trig_coalescer *c, const char *service, int64_t now_ns)
{
    struct slot *spare = NULL;
    for (size_t i = 0; i < c->nslots; i++) {
        struct slot *s = &c->slots[i];
        if (s->used && strcmp(s->req.service, service) == 0)
            return s;
        if (!spare && idle(s, now_ns))
            spare = s;
    }
    if (!spare && c->nslots < c->cap)
        spare = &c->slots[c->nslots++];
    if (!spare && c->cap < MAX_SLOTS) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        struct slot *v = realloc(c->slots, cap * sizeof(*v));
        if (!v)
            return NULL;
        c->slots = v;
        c->cap = cap;
        spare = &c->slots[c->nslots++];
    }
    if (!spare) /* MAX_SLOTS services each with a request this hour */
        return NULL;
    memset(spare, 0, sizeof(*spare));
    spare->used = true;
    snprintf(spare->req.service, sizeof(spare->req.service), "%s", service);
    return spare;
}

/* Merge r into the pending request p: the union of the windows, the first event's reason with
 * the count of the others. */
static void extend(pfr_pin_request *p, const pfr_pin_request *r)
{
    if (r->from_ns < p->from_ns)
        p->from_ns = r->from_ns;
    if (r->to_ns > p->to_ns)
        p->to_ns = r->to_ns;
    p->events += r->events ? r->events : 1;
    char *more = strstr(p->reason, " (+");
    if (more)
        *more = '\0';
    size_t len = strlen(p->reason);
    snprintf(p->reason + len, sizeof(p->reason) - len, " (+%u more events)", p->events - 1);
}

static int start_new(pfr_trig_coalescer *c, struct slot *s, const pfr_pin_request *r,
                     int64_t now_ns)
{
    if (c->max_per_hour && starts_within_hour(s, now_ns) >= c->max_per_hour)
        return PFR_TRIG_SUPPRESSED;
    if (c->max_per_hour) {
        s->starts[s->next] = now_ns;
        s->next = (s->next + 1) % c->max_per_hour;
        if (s->nstarts < c->max_per_hour)
            s->nstarts++;
    }
    s->req = *r;
    if (s->req.events == 0)
        s->req.events = 1;
    s->pending = true;
    return PFR_TRIG_NEW;
}

/* A pending request that may grow no more (its service has a new one) waits apart. */
static int park(pfr_trig_coalescer *c, const pfr_pin_request *r)
{
    if (c->nparked == c->cap_parked) {
        size_t cap = c->cap_parked ? 2 * c->cap_parked : 4;
        pfr_pin_request *v = realloc(c->parked, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        c->parked = v;
        c->cap_parked = cap;
    }
    c->parked[c->nparked++] = *r;
    return 0;
}

/* A new request of a service whose pending one it does not extend: that one is parked first
 * (unless the new one is suppressed). */
static int start_parking(pfr_trig_coalescer *c, struct slot *s, const pfr_pin_request *r,
                         int64_t now_ns)
{
    if (c->max_per_hour && starts_within_hour(s, now_ns) >= c->max_per_hour)
        return PFR_TRIG_SUPPRESSED;
    int rc = park(c, &s->req);
    if (rc)
        return rc;
    s->pending = false;
    return start_new(c, s, r, now_ns);
}

int pfr_trig_coalescer_offer(pfr_trig_coalescer *c, const pfr_pin_request *r, int64_t now_ns)
{
    struct slot *s = find(c, r->service, now_ns);
    if (!s) /* out of memory, or MAX_SLOTS services pinned within the hour */
        return PFR_TRIG_SUPPRESSED;
    if (s->pending && r->from_ns <= s->req.to_ns && r->to_ns >= s->req.from_ns) {
        int64_t from = r->from_ns < s->req.from_ns ? r->from_ns : s->req.from_ns;
        int64_t to = r->to_ns > s->req.to_ns ? r->to_ns : s->req.to_ns;
        if (to - from <= c->max_window_ns) {
            extend(&s->req, r);
            return PFR_TRIG_EXTENDED;
        }
        /* too long to grow: the pending one stays as it is and the rest of r's window starts a
         * new one (counted against the rate limit) */
        pfr_pin_request rest = *r;
        if (rest.from_ns < s->req.to_ns)
            rest.from_ns = s->req.to_ns;
        if (rest.to_ns <= rest.from_ns) /* nothing of r lies past it */
            return PFR_TRIG_EXTENDED;
        return start_parking(c, s, &rest, now_ns);
    }
    return s->pending ? start_parking(c, s, r, now_ns) : start_new(c, s, r, now_ns);
}

int pfr_trig_coalescer_extend(pfr_trig_coalescer *c, const pfr_pin_request *r)
{
    for (size_t i = 0; i < c->nslots; i++) {
        struct slot *s = &c->slots[i];
        if (!s->used || !s->pending || strcmp(s->req.service, r->service) != 0)
            continue;
        int64_t from = r->from_ns < s->req.from_ns ? r->from_ns : s->req.from_ns;
        int64_t to = r->to_ns > s->req.to_ns ? r->to_ns : s->req.to_ns;
        if (r->from_ns > s->req.to_ns || to - from > c->max_window_ns)
            return -ENOENT;
        if (from < s->req.from_ns)
            s->req.from_ns = from;
        s->req.to_ns = to; /* the same episode: no event added to the reason */
        return PFR_TRIG_EXTENDED;
    }
    return -ENOENT;
}

bool pfr_trig_coalescer_take_due(pfr_trig_coalescer *c, int64_t now_ns, pfr_pin_request *out)
{
    size_t pi = SIZE_MAX;
    for (size_t i = 0; i < c->nparked; i++)
        if (c->parked[i].to_ns <= now_ns &&
            (pi == SIZE_MAX || c->parked[i].to_ns < c->parked[pi].to_ns))
            pi = i;
    if (pi != SIZE_MAX) {
        *out = c->parked[pi];
        c->parked[pi] = c->parked[--c->nparked];
        return true;
    }
    struct slot *best = NULL;
    for (size_t i = 0; i < c->nslots; i++) {
        struct slot *s = &c->slots[i];
        if (s->pending && s->req.to_ns <= now_ns && (!best || s->req.to_ns < best->req.to_ns))
            best = s;
    }
    if (!best)
        return false;
    *out = best->req;
    best->pending = false;
    return true;
}

int64_t pfr_trig_coalescer_next_due(const pfr_trig_coalescer *c)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < c->nparked; i++)
        if (c->parked[i].to_ns < next)
            next = c->parked[i].to_ns;
    for (size_t i = 0; i < c->nslots; i++)
        if (c->slots[i].pending && c->slots[i].req.to_ns < next)
            next = c->slots[i].req.to_ns;
    return next;
}
