#include "batch.h"

int64_t pfr_batch_wait_ms(const pfr_batch_limits *l, const pfr_backlog *b, int64_t now_ns,
                          bool draining)
{
    if (b->chunks == 0)
        return INT64_MAX;
    if (draining || b->chunks >= l->max_chunks || (l->max_bytes && b->bytes >= l->max_bytes))
        return 0;
    int64_t due = b->oldest_end + l->max_age_ms * 1000000;
    if (due <= now_ns)
        return 0;
    return (due - now_ns + 999999) / 1000000;
}

int64_t pfr_pacer_wait_ns(const pfr_pacer *p, int64_t now_ns)
{
    if (!p->rate || p->next_ns <= now_ns)
        return 0;
    return p->next_ns - now_ns;
}

void pfr_pacer_sent(pfr_pacer *p, uint64_t bytes, int64_t start_ns)
{
    if (!p->rate)
        return;
    int64_t from = p->next_ns > start_ns ? p->next_ns : start_ns;
    /* bytes * 1e9 / rate without overflow for bodies up to exabytes. */
    int64_t cost = (int64_t)((long double)bytes * 1e9L / (long double)p->rate);
    p->next_ns = from + cost;
}
