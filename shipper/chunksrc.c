#include "chunksrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_vec.h"

int pfr_chunksrc_add(pfr_chunksrc *s, const pfr_chunk_meta *m)
{
    size_t cap = s->cap;
    if (pfr_vec_grow(&s->ids, &cap, s->n + 1, sizeof(*s->ids)) < 0)
        return -ENOMEM;
    cap = s->cap;
    if (pfr_vec_grow(&s->svc, &cap, s->n + 1, sizeof(*s->svc)) < 0)
        return -ENOMEM;
    cap = s->cap;
    if (pfr_vec_grow(&s->state, &cap, s->n + 1, sizeof(*s->state)) < 0)
        return -ENOMEM;
    const char *svc = m->service ? m->service : "";
    if (s->names.len > UINT32_MAX - strlen(svc) - 1)
        return -ENOMEM;
    s->cap = cap;
    s->ids[s->n] = m->id;
    s->svc[s->n] = (uint32_t)s->names.len;
    s->state[s->n] = PFR_CHUNK_UNREAD;
    pfr_buf_put(&s->names, svc, strlen(svc) + 1);
    if (s->names.oom)
        return -ENOMEM;
    s->n++;
    s->stored_bytes += m->stored_bytes;
    return 0;
}

void pfr_chunksrc_reset(pfr_chunksrc *s)
{
    s->n = 0;
    s->stored_bytes = 0;
    pfr_buf_reset(&s->names);
}

void pfr_chunksrc_free(pfr_chunksrc *s)
{
    free(s->ids);
    free(s->svc);
    free(s->state);
    pfr_buf_free(&s->names);
    pfr_store *store = s->store;
    memset(s, 0, sizeof(*s));
    s->store = store;
}

const char *pfr_chunksrc_service(const pfr_chunksrc *s, size_t i)
{
    return (const char *)s->names.data + s->svc[i];
}

struct one {
    pfr_chunksrc *s;
    size_t i;
    pfr_samples_cb scb;
    pfr_chunk_cb pcb;
    void *ctx;
};

static int one_samples(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    struct one *o = ctx;
    o->s->state[o->i] = PFR_CHUNK_READ;
    return o->scb(m, v, o->ctx);
}

static int one_profile(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct one *o = ctx;
    o->s->state[o->i] = PFR_CHUNK_READ;
    return o->pcb(m, p, o->ctx);
}

/* One chunk by id: a scan of (id - 1, id]. */
static int read_one(pfr_chunksrc *s, size_t i, struct one *o)
{
    pfr_store_filter f = {.after_id = s->ids[i] - 1, .max_id = s->ids[i]};
    pfr_scan_stats st = {0};
    s->state[i] = PFR_CHUNK_UNREAD;
    int rc = o->scb ? pfr_store_scan_samples(s->store, &f, 0, one_samples, o, &st)
                    : pfr_store_scan(s->store, &f, 0, one_profile, o, &st);
    if (s->state[i] == PFR_CHUNK_UNREAD && rc >= 0)
        s->state[i] = st.corrupt ? PFR_CHUNK_CORRUPT : PFR_CHUNK_GONE;
    return rc;
}

int pfr_chunksrc_read_samples(pfr_chunksrc *s, size_t i, pfr_samples_cb cb, void *ctx)
{
    struct one o = {.s = s, .i = i, .scb = cb, .ctx = ctx};
    return read_one(s, i, &o);
}

int pfr_chunksrc_read_profile(pfr_chunksrc *s, size_t i, pfr_chunk_cb cb, void *ctx)
{
    struct one o = {.s = s, .i = i, .pcb = cb, .ctx = ctx};
    return read_one(s, i, &o);
}

size_t pfr_chunksrc_count(const pfr_chunksrc *s, enum pfr_chunk_state st)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->state[i] == st;
    return n;
}

void pfr_chunksrc_rewind(pfr_chunksrc *s)
{
    if (s->n)
        memset(s->state, PFR_CHUNK_UNREAD, s->n);
}
