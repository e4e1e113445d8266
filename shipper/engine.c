#include "engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "pfr_clock.h"
#include "pfr_log.h"
#include "sink.h"
#include "sinks/sinks.h"

#define SCAN_STOP 1 /* a scan callback's "batch is full" */

/* Where a lane is; each step moves it along (lane_step). */
enum lane_phase {
    LANE_NEW,     /* its state row is read again when it first runs (an earlier lane of the
                     sink may have moved it) */
    LANE_PREPARE, /* the sink's far side is not ready yet (ops.prepare) */
    LANE_IDLE,    /* no batch open: one is planned when due */
    LANE_BATCH,   /* a batch planned after the cursor (or the mode's position), being sent */
    LANE_AHEAD,   /* live: a batch of pinned chunks ahead of the cursor, being sent */
    LANE_DONE,    /* finished: --once, a backfill's range, the set-aside chunks */
};

/* What only the live lane keeps. Pinned ranges first (catching up): chunks past the cursor
 * taken out of order. A LANE_AHEAD batch is of them (its ids are pick); those delivered so far
 * (skip) are passed over when the cursor's own batches get there. Both are in the state file
 * (pfr_state_ahead_*), so a restart resends exactly the batch in flight and never a delivered
 * chunk. */
struct lane_live {
    int64_t target_max; /* --once: the ring's newest id when we started */
    int64_t *pick, *skip;
    size_t npick, cap_pick, nskip, cap_skip;
};

/* What only a backfill lane keeps. */
struct lane_backfill {
    int64_t from_ns, to_ns; /* its range */
    int64_t pos;            /* the last id sent */
    uint64_t total;         /* chunks in the range at start */
};

/* What only the rejected lane keeps. */
struct lane_rejected {
    int64_t pos;    /* the last id tried */
    int64_t *group; /* the set-aside ids being retried */
    size_t ngroup, cap_group;
};

struct lane {
    pfr_engine *e;
    const pfr_sink_conf *conf;
    pfr_sink *sink;
    enum pfr_lane_mode mode;
    enum lane_phase phase;
    union {
        struct lane_live live;
        struct lane_backfill bf;
        struct lane_rejected rj;
    } m; /* by mode */
    pfr_sink_state st;
    char consumer[96];
    char label[96]; /* "sink coroot" / "backfill of coroot" for logs */
    /* backoff (monotonic ns) */
    int64_t retry_at;
    int64_t down_since;
    /* the open batch (LANE_BATCH, LANE_AHEAD): chunks after b_after up to b_max */
    int64_t b_after, b_max;
    char token[256];
    pfr_chunksrc src; /* its chunks, which the sink reads from the ring */
    int64_t *bad;     /* chunks the sink cannot send: set aside with the batch */
    size_t nbad, cap_bad;
    char bad_why[256];
    uint64_t corrupt; /* chunks of the batch the ring skipped as corrupt (after a send) */
    int64_t *skipped; /* chunks of the batch the sink's shipping policy passes over (ops.ships) */
    size_t nskipped, cap_skipped;
    double ratio; /* request bytes per stored byte, as the last batches showed */
    pfr_pacer pacer;
    uint64_t errors;                  /* consecutive local (ring, state file) errors */
    uint64_t sent_chunks, sent_bytes; /* this run */
    uint64_t passed_chunks;           /* this run: passed over by the sink's policy */
    int64_t started_mono, last_progress;
    int64_t reaped_below; /* set-aside chunks below this id were looked for in the ring */
    /* The sink's last HTTP answer in this run: its number among the engine's answers (0 =
     * none yet) and whether it was an error. */
    uint64_t answer_seq;
    bool answer_failed;
};

/* pending_after of a batch of pinned chunks in flight (its ids are the state's ahead rows). */
#define PENDING_AHEAD (-1)

struct pfr_engine {
    pfr_engine_opts o;
    struct lane **lanes;
    size_t nlanes;
    char instance[24];
    bool ring_replaced;
    uint64_t rng;
    uint64_t answers; /* HTTP answers received by every lane, to order the lanes' last ones */
};

struct lane;
static int lost_baseline(struct lane *l);
static int aside_publish(struct lane *l);

static int grow_ids(int64_t **v, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 256;
    while (c < need)
        c *= 2;
    int64_t *n = realloc(*v, c * sizeof(*n));
    if (!n)
        return -ENOMEM;
    *v = n;
    *cap = c;
    return 0;
}

/* ---- identity: tokens must differ between hosts and between rings ---- */

static int new_instance(pfr_engine *e)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint64_t)pfr_clock_real_ns() ^ ((uint64_t)getpid() << 32);
    snprintf(e->instance, sizeof(e->instance), "%016" PRIx64, r);
    return pfr_state_meta_put(e->o.state, "instance", e->instance);
}

static int engine_identity(pfr_engine *e)
{
    struct stat sb;
    char ring[64] = "", old[64] = "";
    if (stat(e->o.store_path, &sb) == 0)
        snprintf(ring, sizeof(ring), "%" PRIx64 ":%" PRIx64, (uint64_t)sb.st_dev,
                 (uint64_t)sb.st_ino);
    int rc = pfr_state_meta_get(e->o.state, "ring", old, sizeof(old));
    if (rc && rc != -ENOENT)
        return rc;
    rc = pfr_state_meta_get(e->o.state, "instance", e->instance, sizeof(e->instance));
    if (rc && rc != -ENOENT)
        return rc;
    if (rc == -ENOENT || (old[0] && ring[0] && strcmp(old, ring))) {
        if (old[0] && ring[0] && strcmp(old, ring)) {
            pfr_warn("the ring %s is not the file the shipper knew: starting its cursors over",
                     e->o.store_path);
            e->ring_replaced = true;
        }
        if ((rc = new_instance(e)))
            return rc;
    }
    if (ring[0] && (rc = pfr_state_meta_put(e->o.state, "ring", ring)))
        return rc;
    return 0;
}

int pfr_engine_new(const pfr_engine_opts *o, pfr_engine **out, char *err, size_t errlen)
{
    pfr_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->o = *o;
    if (e->o.poll_ms <= 0)
        e->o.poll_ms = 5000;
    e->rng = o->seed ? o->seed : (uint64_t)pfr_clock_real_ns() | 1;
    int rc = engine_identity(e);
    if (rc) {
        snprintf(err, errlen, "state file: %s", strerror(-rc));
        free(e);
        return rc;
    }
    *out = e;
    return 0;
}

static void lane_free(struct lane *l)
{
    if (!l)
        return;
    pfr_sink_free(l->sink);
    pfr_chunksrc_free(&l->src);
    if (l->mode == PFR_LANE_LIVE) {
        free(l->m.live.pick);
        free(l->m.live.skip);
    } else if (l->mode == PFR_LANE_REJECTED) {
        free(l->m.rj.group);
    }
    free(l->bad);
    free(l->skipped);
    free(l);
}

void pfr_engine_free(pfr_engine *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nlanes; i++)
        lane_free(e->lanes[i]);
    free(e->lanes);
    free(e);
}

static bool engine_abort(void *ctx)
{
    pfr_engine *e = ctx;
    return e->o.should_stop && e->o.should_stop(e->o.ctx);
}

static int reap_set_aside(struct lane *l, int64_t below);
static int ring_floor(const pfr_engine *e, int64_t *below);

static int count_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)m, (void)p;
    ++*(uint64_t *)ctx;
    return 0;
}

int pfr_engine_add_lane(pfr_engine *e, const pfr_sink_conf *conf, enum pfr_lane_mode mode,
                        int64_t from_ns, int64_t to_ns, char *err, size_t errlen)
{
    struct lane *l = calloc(1, sizeof(*l));
    struct lane **v = realloc(e->lanes, (e->nlanes + 1) * sizeof(*v));
    if (!l || !v) {
        free(l);
        if (v)
            e->lanes = v;
        return -ENOMEM;
    }
    e->lanes = v;
    l->e = e;
    l->conf = conf;
    l->mode = mode;
    if (mode == PFR_LANE_BACKFILL)
        l->m.bf = (struct lane_backfill){.from_ns = from_ns, .to_ns = to_ns};
    l->pacer.rate = conf->bandwidth;
    l->src.store = e->o.store;
    l->started_mono = l->last_progress = pfr_clock_mono_ns();
    snprintf(l->consumer, sizeof(l->consumer), "shipper.%s", conf->name);
    snprintf(l->label, sizeof(l->label), "%s%s",
             mode == PFR_LANE_BACKFILL ? "backfill to " : "sink ", conf->name);
    pfr_http_opts ho = {.should_abort = engine_abort, .abort_ctx = e};
    int rc = pfr_sink_new(conf, &ho, &l->sink, err, errlen);
    if (rc) {
        free(l);
        return rc;
    }
    l->ratio = l->sink->ops->stored_ratio;
    rc = pfr_state_sink_get(e->o.state, conf->name, conf->kind->name, &l->st);
    if (rc) {
        snprintf(err, errlen, "state file: sink %s: %s", conf->name, strerror(-rc));
        lane_free(l);
        return rc;
    }
    pfr_store_stats rs;
    if ((rc = pfr_store_stats_get(e->o.store, &rs))) {
        snprintf(err, errlen, "ring: %s", strerror(-rc));
        lane_free(l);
        return rc;
    }
    if (mode == PFR_LANE_LIVE)
        l->m.live.target_max = rs.max_id;
    /* A cursor past the ring's newest chunk: the ring was replaced (see below). */
    bool replaced = e->ring_replaced || (rs.max_id > 0 && l->st.cursor > rs.max_id);
    if (mode == PFR_LANE_LIVE) {
        bool reset = e->ring_replaced;
        if (replaced && !reset) {
            pfr_warn("%s: its cursor (%lld) is past the ring's newest chunk (%lld): the ring was "
                     "replaced; starting over",
                     l->label, (long long)l->st.cursor, (long long)rs.max_id);
            reset = true;
            if ((rc = new_instance(e))) {
                lane_free(l);
                return rc;
            }
        }
        if (reset) {
            l->st.cursor = 0;
            l->st.pending_max = l->st.pending_after = 0;
            l->st.pending_limit = 0;
            l->st.pending_token[0] = 0;
            l->st.ring_lost_seen = 0; /* a new ring's count */
        }
        l->st.next_attempt_ns = 0;
        if ((rc = lost_baseline(l)) || (rc = pfr_state_sink_put(e->o.state, &l->st)) ||
            (rc = pfr_store_cursor_set(e->o.store, l->consumer, l->st.cursor)) ||
            (rc = aside_publish(l))) {
            snprintf(err, errlen, "%s: cannot record its cursor: %s", l->label, strerror(-rc));
            lane_free(l);
            return rc;
        }
    } else if (mode == PFR_LANE_BACKFILL) {
        bool done;
        if ((rc = pfr_state_backfill_get(e->o.state, conf->name, from_ns, to_ns, &l->m.bf.pos,
                                         &done))) {
            lane_free(l);
            return rc;
        }
        if (done)
            l->m.bf.pos = 0; /* a finished backfill asked again: send it all again */
        pfr_store_filter f = {.from_ns = from_ns, .to_ns = to_ns};
        if ((rc = pfr_store_scan(e->o.store, &f, PFR_SCAN_META_ONLY, count_cb, &l->m.bf.total,
                                 NULL)) < 0) {
            lane_free(l);
            return rc;
        }
        if (l->m.bf.pos)
            pfr_info("%s: resuming after chunk %lld", l->label, (long long)l->m.bf.pos);
    }
    /* Chunks set aside in an earlier run that the ring evicted meanwhile (all of them if the
     * ring was replaced) are counted before anything else. */
    int64_t below = INT64_MAX;
    if ((!replaced && (rc = ring_floor(e, &below))) || (rc = reap_set_aside(l, below))) {
        snprintf(err, errlen, "%s: set-aside chunks: %s", l->label, strerror(-rc));
        lane_free(l);
        return rc;
    }
    e->lanes[e->nlanes++] = l;
    return 0;
}

/* ---- state ---- */

static int save(struct lane *l)
{
    /* A backfill runs beside the daemon: the sink's row is the daemon's; the backfill keeps its
     * progress in its own row. */
    if (l->mode == PFR_LANE_BACKFILL)
        return 0;
    int rc = pfr_state_sink_put(l->e->o.state, &l->st);
    if (rc)
        pfr_err("%s: cannot write the state file: %s", l->label, strerror(-rc));
    return rc;
}

static void set_error(struct lane *l, const char *msg)
{
    snprintf(l->st.last_error, sizeof(l->st.last_error), "%s", msg);
    l->st.last_error_ns = pfr_clock_real_ns();
}

/* Set-aside chunks the ring has evicted are lost like any chunk evicted before it was shipped:
 * counted, logged, and no longer listed. below: the ring's oldest id, INT64_MAX for all of
 * them (the ring is empty, or not the one they came from). A backfill leaves it to the daemon,
 * whose row of the sink it must not write. */
static int reap_set_aside(struct lane *l, int64_t below)
{
    pfr_engine *e = l->e;
    if (l->mode == PFR_LANE_BACKFILL || below <= l->reaped_below)
        return 0;
    uint64_t n;
    int64_t first, last;
    int rc = pfr_state_begin(e->o.state);
    if (rc)
        return rc;
    if ((rc = pfr_state_rejected_drop_below(e->o.state, l->conf->name, below, &n, &first, &last)))
        goto fail;
    if (n) {
        l->st.lost_chunks += n;
        if ((rc = save(l)) || (rc = aside_publish(l)))
            goto fail;
    }
    if ((rc = pfr_state_commit(e->o.state)))
        goto fail;
    if (n)
        pfr_warn("%s: %" PRIu64 " set-aside chunks (ids %lld..%lld) were evicted from the ring "
                 "before they were shipped: counted as lost",
                 l->label, n, (long long)first, (long long)last);
    l->reaped_below = below;
    return 0;
fail:
    pfr_state_rollback(e->o.state);
    return rc;
}

/* The id below which the ring has nothing left (see reap_set_aside). */
static int ring_floor(const pfr_engine *e, int64_t *below)
{
    pfr_store_stats rs;
    int rc = pfr_store_stats_quick(e->o.store, &rs);
    if (rc)
        return rc;
    *below = rs.chunks && rs.min_id > 0 ? rs.min_id : INT64_MAX;
    return 0;
}

/* ---- building a batch ----
 * A batch is planned from the chunks' metadata alone: which chunks, up to the limits. The sink
 * reads them from the ring when it sends them. batch_bytes is weighed in request bytes
 * estimated from the stored size, at the ratio the lane's earlier batches showed. */

struct build {
    struct lane *l;
    size_t max_chunks;
    uint64_t stored_max; /* batch_bytes in stored bytes, at the lane's ratio */
    int64_t last_added;
};

static bool sorted_has(const int64_t *v, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] == id)
            return true;
        if (v[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static bool in_group(const struct lane *l, int64_t id)
{
    size_t lo = 0, hi = l->m.rj.ngroup;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->m.rj.group[mid] == id)
            return true;
        if (l->m.rj.group[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Take one chunk into the lane's batch, or among the chunks the sink cannot send. */
static int plan_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct build *b = ctx;
    struct lane *l = b->l;
    if (l->mode == PFR_LANE_REJECTED && !in_group(l, m->id))
        return 0;
    if (l->phase == LANE_AHEAD && !sorted_has(l->m.live.pick, l->m.live.npick, m->id))
        return 0; /* a batch of pinned chunks takes only those */
    if (l->mode == PFR_LANE_LIVE && l->phase != LANE_AHEAD &&
        sorted_has(l->m.live.skip, l->m.live.nskip, m->id)) {
        b->last_added = m->id; /* delivered ahead of the cursor: the cursor passes it */
        return 0;
    }
    b->last_added = m->id;
    if (l->sink->ops->ships && !l->sink->ops->ships(l->sink, m)) {
        /* passed over for good: the cursor moves past it with the batch */
        if (grow_ids(&l->skipped, &l->cap_skipped, l->nskipped + 1) < 0)
            return -ENOMEM;
        l->skipped[l->nskipped++] = m->id;
        return 0;
    }
    char why[256] = "";
    int rc = l->sink->ops->check(l->sink, m, why, sizeof(why));
    if (rc == -EINVAL) {
        if (grow_ids(&l->bad, &l->cap_bad, l->nbad + 1) < 0)
            return -ENOMEM;
        l->bad[l->nbad++] = m->id;
        snprintf(l->bad_why, sizeof(l->bad_why), "%s", why);
        return 0;
    }
    if (rc < 0 || (rc = pfr_chunksrc_add(&l->src, m)) < 0)
        return rc;
    if (l->src.n >= b->max_chunks || l->src.stored_bytes >= b->stored_max)
        return SCAN_STOP;
    return 0;
}

static void batch_drop(struct lane *l)
{
    l->phase = LANE_IDLE;
    pfr_chunksrc_reset(&l->src);
    l->nbad = 0;
    l->nskipped = 0;
    l->corrupt = 0;
}

static size_t batch_cap(const struct lane *l)
{
    size_t cap = l->conf->batch.max_chunks;
    if (l->st.batch_limit && l->st.batch_limit < cap)
        cap = (size_t)l->st.batch_limit;
    return cap ? cap : 1;
}

/* Plan (after, max] (max 0 = open) into l's batch. */
static int scan_batch(struct lane *l, int64_t after, int64_t max, size_t limit)
{
    pfr_engine *e = l->e;
    pfr_chunksrc_reset(&l->src);
    l->nbad = 0;
    l->nskipped = 0;
    l->corrupt = 0;
    double ratio = l->ratio > 0.01 ? l->ratio : 0.01;
    struct build b = {.l = l,
                      .max_chunks = limit,
                      .stored_max = (uint64_t)((double)l->conf->batch.max_bytes / ratio) + 1,
                      .last_added = 0};
    pfr_store_filter f = {.after_id = after, .max_id = max};
    if (l->mode == PFR_LANE_BACKFILL) {
        f.from_ns = l->m.bf.from_ns;
        f.to_ns = l->m.bf.to_ns;
        /* The scan lists its candidates up front: a batch's worth, not the rest of the range.
         * (The other modes are bounded by max.) */
        f.limit = limit;
    }
    pfr_scan_stats ss = {0};
    int rc = pfr_store_scan(e->o.store, &f, PFR_SCAN_META_ONLY, plan_cb, &b, &ss);
    if (rc < 0)
        return rc;
    l->b_after = after;
    if (rc == SCAN_STOP)
        l->b_max = b.last_added;
    else
        l->b_max = ss.last_id > max && max ? max : (ss.last_id ? ss.last_id : max);
    if (l->b_max < b.last_added)
        l->b_max = b.last_added;
    return 0;
}

/* Plan (after, max] (max 0 = open) as a batch of phase (LANE_BATCH, or LANE_AHEAD: only the
 * pinned chunks of pick). On return l->b_after/b_max describe it. */
static int fill(struct lane *l, enum lane_phase phase, int64_t after, int64_t max, size_t limit)
{
    l->phase = phase;
    int rc = scan_batch(l, after, max, limit);
    if (rc < 0)
        batch_drop(l);
    return rc;
}

static void make_token(struct lane *l)
{
    pfr_engine *e = l->e;
    switch (l->mode) {
    case PFR_LANE_LIVE:
        if (l->phase == LANE_AHEAD)
            snprintf(l->token, sizeof(l->token), "pfr-%s-%s-pin-%" PRId64 "-%" PRId64 "-%zu",
                     e->instance, l->conf->name, l->src.n ? l->src.ids[0] : 0,
                     l->src.n ? l->src.ids[l->src.n - 1] : 0, l->src.n);
        else
            snprintf(l->token, sizeof(l->token), "pfr-%s-%s-%" PRId64 "-%" PRId64 "-%zu",
                     e->instance, l->conf->name, l->b_after, l->b_max, l->src.n);
        break;
    case PFR_LANE_REJECTED:
        snprintf(l->token, sizeof(l->token), "pfr-%s-%s-rj-%" PRId64 "-%" PRId64 "-%zu",
                 e->instance, l->conf->name, l->src.n ? l->src.ids[0] : 0,
                 l->src.n ? l->src.ids[l->src.n - 1] : 0, l->src.n);
        break;
    case PFR_LANE_BACKFILL:
        snprintf(l->token, sizeof(l->token),
                 "pfr-%s-%s-bf%" PRId64 "-%" PRId64 "-%" PRId64 "-%" PRId64 "-%zu", e->instance,
                 l->conf->name, l->m.bf.from_ns, l->m.bf.to_ns, l->b_after, l->b_max, l->src.n);
        break;
    }
}

/* What waits after the cursor, from chunk metadata only. */
struct look {
    pfr_backlog bl;
    int64_t first_id, last_id;
    size_t limit;
};

static int look_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct look *k = ctx;
    if (!k->bl.chunks) {
        k->first_id = m->id;
        k->bl.oldest_end = m->end_ns;
    }
    k->bl.chunks++;
    k->bl.bytes += m->stored_bytes;
    k->last_id = m->id;
    return 0;
}

/* Chunks the ring gave up past this sink's cursor before it took them. The ring counts them for
 * this sink as it evicts them (pfr_store_consumer_lost): ids missing after the cursor are not
 * all lost (a roll-up keeps only the smallest id of its inputs, and chunks evicted before the
 * sink's cursor existed were nobody's to lose), and chunks of the batch in flight are counted
 * there too. What the ring counted since the sink last looked is what it lost. */
static int check_lost(struct lane *l)
{
    uint64_t n;
    int rc = pfr_store_consumer_lost(l->e->o.store, l->consumer, &n);
    if (rc || n == l->st.ring_lost_seen)
        return rc;
    if (n > l->st.ring_lost_seen) {
        uint64_t lost = n - l->st.ring_lost_seen;
        l->st.lost_chunks += lost;
        pfr_warn("%s: %" PRIu64 " chunks were evicted from the ring before they were shipped "
                 "(the ring's count for this sink)",
                 l->label, lost);
    } /* below: the ring's count started again (a new ring) */
    l->st.ring_lost_seen = n;
    return save(l);
}

/* A sink whose cursor file is not there (its first start; or the file was removed) starts from
 * what the ring counts now: the writer counts for it only while the file is there, and what it
 * gave up before was nobody's to lose (or counted in a life of the file before). So does a sink
 * whose state an older shipper wrote (ring_lost_unknown): it counted the ids missing after its
 * cursor in lost_chunks itself, and those the ring counted meanwhile are not counted again. */
static int lost_baseline(struct lane *l)
{
    bool known;
    int rc = pfr_store_cursor_known(l->e->o.store, l->consumer, &known);
    if (rc || (known && !l->st.ring_lost_unknown))
        return rc;
    if ((rc = pfr_store_consumer_lost(l->e->o.store, l->consumer, &l->st.ring_lost_seen)) == 0)
        l->st.ring_lost_unknown = false;
    return rc;
}

/* Tell the ring which chunks this sink set aside (every one, from the state file, inside its
 * transaction when there is one): the writer never rolls them up, so --retry-rejected sends
 * them as recorded. Written before the cursor passes a chunk set aside with its batch. */
static int aside_publish(struct lane *l)
{
    int64_t *ids = NULL, after = 0;
    size_t n = 0, cap = 0, got;
    int rc = 0;
    do {
        if (grow_ids(&ids, &cap, n + 1024) < 0) {
            rc = -ENOMEM;
            break;
        }
        if ((rc = pfr_state_rejected(l->e->o.state, l->conf->name, after, ids + n, 1024, &got)))
            break;
        n += got;
        if (got)
            after = ids[n - 1];
    } while (got == 1024);
    if (!rc)
        rc = pfr_store_aside_set(l->e->o.store, l->consumer, ids, n);
    free(ids);
    return rc;
}

/* Set-aside chunks done with (sent, passed over, gone): no longer listed, nor held by the ring. */
static int unreject(struct lane *l, const int64_t *ids, size_t n)
{
    int rc = pfr_state_unreject(l->e->o.state, l->conf->name, ids, n);
    return rc ? rc : aside_publish(l);
}

/* ---- pinned ranges first ---- */
struct pinned {
    struct lane *l;
    size_t cap;
    size_t taken; /* of the pin being scanned */
};

static int pinned_chunk(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct pinned *x = ctx;
    struct lane *l = x->l;
    if (sorted_has(l->m.live.skip, l->m.live.nskip, m->id))
        return 0;
    if (l->sink->ops->ships && !l->sink->ops->ships(l->sink, m))
        return 0; /* passed over when the cursor gets there */
    if (grow_ids(&l->m.live.pick, &l->m.live.cap_pick, l->m.live.npick + 1) < 0)
        return -ENOMEM;
    l->m.live.pick[l->m.live.npick++] = m->id;
    return ++x->taken >= x->cap ? SCAN_STOP : 0; /* this pin's oldest cap are enough */
}

/* Each pin's chunks past the cursor not yet delivered (the pins' labels live during the
 * callback only: the scan runs inside it). */
static int pinned_range(const pfr_pin_info *pin, void *ctx)
{
    struct pinned *x = ctx;
    pfr_store_filter f = {.from_ns = pin->from_ns,
                          .to_ns = pin->to_ns,
                          .service = pin->service,
                          .labels = pin->labels,
                          .nlabels = pin->nlabels,
                          .after_id = x->l->st.cursor};
    x->taken = 0;
    int rc = pfr_store_scan(x->l->e->o.store, &f, PFR_SCAN_META_ONLY, pinned_chunk, x, NULL);
    return rc < 0 ? rc : 0;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The oldest cap pinned chunks past the cursor not yet delivered, ascending, in l->m.live.pick. */
static int pinned_pick(struct lane *l, size_t cap)
{
    l->m.live.npick = 0;
    struct pinned x = {.l = l, .cap = cap};
    int rc = pfr_store_pins(l->e->o.store, pinned_range, &x);
    if (rc < 0)
        return rc;
    if (l->m.live.npick == 0)
        return 0; /* (no list yet: qsort takes no NULL) */
    qsort(l->m.live.pick, l->m.live.npick, sizeof(*l->m.live.pick), cmp_id);
    size_t k = 0;
    for (size_t i = 0; i < l->m.live.npick; i++)
        if (k == 0 || l->m.live.pick[k - 1] != l->m.live.pick[i])
            l->m.live.pick[k++] = l->m.live.pick[i];
    l->m.live.npick = k < cap ? k : cap;
    return 0;
}

/* A batch of pinned chunks, ahead of the cursor, when the lane is catching up (more than a
 * batch waits: a link came back) and pins have chunks it has not delivered. Its ids go to the
 * state file as in flight with the batch (pending_after PENDING_AHEAD) before it is sent.
 * *built false: none. */
static int build_ahead(struct lane *l, size_t cap, bool *built)
{
    *built = false;
    int rc = pinned_pick(l, cap);
    if (rc || !l->m.live.npick)
        return rc;
    rc = fill(l, LANE_AHEAD, l->m.live.pick[0] - 1, l->m.live.pick[l->m.live.npick - 1],
              l->m.live.npick);
    if (rc)
        return rc;
    /* what the batch holds: taken chunks and those the sink cannot send (set aside with it) */
    size_t n = 0;
    for (size_t i = 0; i < l->m.live.npick; i++)
        if (sorted_has(l->src.ids, l->src.n, l->m.live.pick[i]) ||
            sorted_has(l->bad, l->nbad, l->m.live.pick[i]))
            l->m.live.pick[n++] = l->m.live.pick[i];
    l->m.live.npick = n;
    if (!n) {
        batch_drop(l);
        return 0;
    }
    make_token(l);
    l->st.pending_after = PENDING_AHEAD;
    l->st.pending_max = l->b_max;
    l->st.pending_limit = n;
    snprintf(l->st.pending_token, sizeof(l->st.pending_token), "%s", l->token);
    pfr_state *st = l->e->o.state;
    if ((rc = pfr_state_begin(st)) == 0 &&
        (rc = pfr_state_ahead_put(st, l->conf->name, l->m.live.pick, n)) == 0 &&
        (rc = pfr_state_sink_put(st, &l->st)) == 0)
        rc = pfr_state_commit(st);
    if (rc) {
        pfr_state_rollback(st);
        batch_drop(l);
        return rc;
    }
    pfr_info("%s: %zu pinned chunks first (ids %lld..%lld), ahead of the backlog", l->label, n,
             (long long)l->m.live.pick[0], (long long)l->m.live.pick[n - 1]);
    *built = true;
    return 0;
}

/* A batch of pinned chunks was in flight when we stopped: exactly it again, same token. */
static int rebuild_ahead(struct lane *l)
{
    int rc = pfr_state_ahead_list(l->e->o.state, l->conf->name, false, 0, &l->m.live.pick,
                                  &l->m.live.npick, &l->m.live.cap_pick);
    if (rc)
        return rc;
    if (!l->m.live.npick) { /* nothing recorded: drop it, plan again */
        l->st.pending_max = l->st.pending_after = 0;
        l->st.pending_limit = 0;
        return save(l);
    }
    rc = fill(l, LANE_AHEAD, l->m.live.pick[0] - 1, l->m.live.pick[l->m.live.npick - 1],
              l->m.live.npick);
    if (rc)
        return rc;
    l->b_max = l->st.pending_max;
    size_t found = l->src.n + l->nbad;
    if (found < l->m.live.npick) /* counted by the ring (check_lost): past the cursor */
        pfr_warn("%s: %zu pinned chunks of the batch in flight were evicted from the ring before "
                 "they were shipped",
                 l->label, l->m.live.npick - found);
    snprintf(l->token, sizeof(l->token), "%s", l->st.pending_token);
    return 0;
}

/* Build the live lane's next batch if one is due. *wait_ms > 0: not yet. */
static int build_live(struct lane *l, int64_t *wait_ms)
{
    pfr_engine *e = l->e;
    *wait_ms = 0;
    int rc = pfr_state_ahead_list(e->o.state, l->conf->name, true, l->st.cursor, &l->m.live.skip,
                                  &l->m.live.nskip, &l->m.live.cap_skip);
    if (rc)
        return rc;
    if ((rc = check_lost(l)))
        return rc;
    if (l->st.pending_max > 0 && l->st.pending_after == PENDING_AHEAD)
        return rebuild_ahead(l);
    if (l->st.pending_max > 0) {
        /* A batch was in flight when we stopped: send exactly it again, same token. */
        int rc = fill(l, LANE_BATCH, l->st.pending_after, l->st.pending_max,
                      (size_t)l->st.pending_limit);
        if (rc)
            return rc;
        l->b_max = l->st.pending_max;
        size_t found = l->src.n + l->nbad;
        if (found < l->st.pending_limit) /* counted by the ring (check_lost): past the cursor */
            pfr_warn("%s: %" PRIu64 " chunks of the batch in flight were evicted from the ring "
                     "before they were shipped",
                     l->label, l->st.pending_limit - found);
        snprintf(l->token, sizeof(l->token), "%s", l->st.pending_token);
        return 0;
    }
    if ((rc = pfr_state_ahead_forget(e->o.state, l->conf->name, l->st.cursor)) != 0)
        return rc;
    struct look k = {.limit = batch_cap(l)};
    pfr_store_filter f = {.after_id = l->st.cursor, .limit = k.limit};
    rc = pfr_store_scan(e->o.store, &f, PFR_SCAN_META_ONLY, look_cb, &k, NULL);
    if (rc < 0)
        return rc;
    /* A full batch waits and more may follow: a link came back. Pinned chunks go first (not
     * while a rejected chunk is being narrowed down: that takes the cursor's order). */
    bool built = false;
    if (k.bl.chunks >= k.limit && !l->st.batch_limit && (rc = build_ahead(l, k.limit, &built)))
        return rc;
    if (built)
        return 0;
    bool draining = e->o.once || l->mode != PFR_LANE_LIVE;
    pfr_batch_limits lim = l->conf->batch;
    lim.max_chunks = k.limit;
    int64_t w = pfr_batch_wait_ms(&lim, &k.bl, pfr_clock_real_ns(), draining);
    if (w > 0) {
        *wait_ms = w;
        return 0;
    }
    if ((rc = fill(l, LANE_BATCH, l->st.cursor, k.last_id, k.limit)))
        return rc;
    make_token(l);
    l->st.pending_after = l->b_after;
    l->st.pending_max = l->b_max;
    l->st.pending_limit = l->src.n + l->nbad;
    snprintf(l->st.pending_token, sizeof(l->st.pending_token), "%s", l->token);
    return save(l);
}

static void progress(struct lane *l, bool final);

/* The lane has nothing left to do; a backfill says how it went. */
static void lane_finish(struct lane *l)
{
    l->phase = LANE_DONE;
    progress(l, true);
}

/* A backfill batch is built: the end of the range, or its token. */
static int backfill_built(struct lane *l)
{
    if (!l->src.n && !l->nbad && !l->corrupt) {
        batch_drop(l);
        lane_finish(l);
        return pfr_state_backfill_put(l->e->o.state, l->conf->name, l->m.bf.from_ns, l->m.bf.to_ns,
                                      l->m.bf.pos, true, pfr_clock_real_ns());
    }
    make_token(l);
    return 0;
}

static int build_backfill(struct lane *l)
{
    int rc = fill(l, LANE_BATCH, l->m.bf.pos, 0, batch_cap(l));
    return rc ? rc : backfill_built(l);
}

static int build_rejected(struct lane *l)
{
    pfr_engine *e = l->e;
    size_t cap = batch_cap(l);
    if (grow_ids(&l->m.rj.group, &l->m.rj.cap_group, cap) < 0)
        return -ENOMEM;
    size_t n = 0;
    int rc = pfr_state_rejected(e->o.state, l->conf->name, l->m.rj.pos, l->m.rj.group, cap, &n);
    if (rc)
        return rc;
    l->m.rj.ngroup = n;
    if (!n) {
        lane_finish(l);
        l->st.batch_limit = 0;
        return save(l);
    }
    if ((rc = fill(l, LANE_BATCH, l->m.rj.group[0] - 1, l->m.rj.group[n - 1], cap)))
        return rc;
    /* Set-aside chunks the ring no longer has are gone for good. */
    size_t gone = 0;
    for (size_t i = 0; i < n; i++) {
        bool have = false;
        for (size_t j = 0; j < l->src.n && !have; j++)
            have = l->src.ids[j] == l->m.rj.group[i];
        for (size_t j = 0; j < l->nbad && !have; j++)
            have = l->bad[j] == l->m.rj.group[i];
        if (!have && l->m.rj.group[i] <= l->b_max) {
            rc = unreject(l, &l->m.rj.group[i], 1);
            if (rc)
                return rc;
            l->st.lost_chunks++;
            gone++;
        }
    }
    if (gone)
        pfr_warn("%s: %zu set-aside chunks are no longer in the ring", l->label, gone);
    if (!l->src.n && !l->nbad) {
        batch_drop(l);
        l->m.rj.pos = l->b_max;
        return save(l);
    }
    make_token(l);
    return 0;
}

/* ---- after a send ---- */

/* The chunks of the batch up to id to that the sink's policy passes over: counted (status:
 * skipped), and no longer set aside when the rejected lane met them. */
static int pass_over(struct lane *l, int64_t to)
{
    size_t n = 0;
    while (n < l->nskipped && l->skipped[n] <= to)
        n++;
    if (!n)
        return 0;
    l->st.skipped_chunks += n;
    l->passed_chunks += n;
    if (l->mode == PFR_LANE_REJECTED)
        return unreject(l, l->skipped, n);
    return 0;
}

static int advance(struct lane *l, int64_t to)
{
    pfr_engine *e = l->e;
    int rc = pass_over(l, to);
    if (rc)
        return rc;
    switch (l->mode) {
    case PFR_LANE_LIVE:
        /* pinned chunks ahead of the cursor: recorded, the cursor stays */
        if (l->phase == LANE_AHEAD)
            return (rc = pfr_state_ahead_sent(e->o.state, l->conf->name, to)) ? rc : save(l);
        l->st.cursor = to;
        if ((rc = save(l)))
            return rc;
        return pfr_store_cursor_set(e->o.store, l->consumer, to);
    case PFR_LANE_BACKFILL:
        l->m.bf.pos = to;
        return pfr_state_backfill_put(e->o.state, l->conf->name, l->m.bf.from_ns, l->m.bf.to_ns, to,
                                      false, pfr_clock_real_ns());
    case PFR_LANE_REJECTED:
        l->m.rj.pos = to;
        return save(l);
    }
    return 0;
}

/* Record chunks as set aside (and, for the rejected lane, they stay where they were). */
static int set_aside(struct lane *l, const int64_t *ids, size_t n, long status, const char *why)
{
    if (!n)
        return 0;
    int rc =
        pfr_state_reject(l->e->o.state, l->conf->name, ids, n, status, why, pfr_clock_real_ns());
    if (rc || (rc = aside_publish(l)))
        return rc;
    if (l->mode != PFR_LANE_REJECTED)
        l->st.rejected_chunks += n;
    if (n == 1)
        pfr_warn("%s: chunk %lld set aside: %s", l->label, (long long)ids[0], why);
    else
        pfr_warn("%s: %zu chunks (%lld..%lld) set aside: %s", l->label, n, (long long)ids[0],
                 (long long)ids[n - 1], why);
    return 0;
}

static void progress(struct lane *l, bool final)
{
    pfr_engine *e = l->e;
    if (l->mode != PFR_LANE_BACKFILL || !e->o.progress_ms)
        return;
    int64_t now = pfr_clock_mono_ns();
    if (!final && now - l->last_progress < e->o.progress_ms * 1000000)
        return;
    l->last_progress = now;
    double secs = (double)(now - l->started_mono) / 1e9;
    /* chunks the sink's policy passed over are done with too */
    uint64_t done = l->sent_chunks + l->passed_chunks, total = l->m.bf.total;
    double rate = secs > 0 ? (double)done / secs : 0;
    char b[32], eta[32] = "-", passed[64] = "";
    uint64_t left = total > done ? total - done : 0;
    if (rate > 0)
        pfr_fmt_duration((int64_t)((double)left / rate * 1000), eta, sizeof(eta));
    if (l->passed_chunks)
        snprintf(passed, sizeof(passed), " (%" PRIu64 " passed over: ship = agent)",
                 l->passed_chunks);
    if (final)
        pfr_info("%s: %" PRIu64 "/%" PRIu64 " chunks (100.0%%)%s, %.0f chunks/s, %s sent, done "
                 "(%" PRIu64 " bytes in %.1f s)",
                 l->label, done, total, passed, rate, pfr_fmt_bytes(l->sent_bytes, b, sizeof(b)),
                 l->sent_bytes, secs);
    else
        pfr_info("%s: %" PRIu64 "/%" PRIu64 " chunks (%.1f%%)%s, %.0f chunks/s, %s sent, eta %s",
                 l->label, done, total, total ? 100.0 * (double)done / (double)total : 100.0,
                 passed, rate, pfr_fmt_bytes(l->sent_bytes, b, sizeof(b)), eta);
}

/* Of the batch's first n chunks, those the sink's reads found corrupt or gone (counted in
 * l->corrupt, and as lost); and, when all of them went, what they took: the ratio of request
 * bytes to stored bytes that the next batches are planned with. Returns the chunks delivered. */
static size_t settle(struct lane *l, const pfr_sink_result *r, size_t n)
{
    size_t gone = 0;
    l->corrupt = 0;
    for (size_t i = 0; i < n; i++) {
        gone += l->src.state[i] == PFR_CHUNK_GONE;
        l->corrupt += l->src.state[i] == PFR_CHUNK_CORRUPT;
    }
    if (gone) {
        /* the live lane's are past its cursor: the ring counts them for it (check_lost) */
        if (l->mode != PFR_LANE_LIVE)
            l->st.lost_chunks += gone;
        pfr_warn("%s: %zu chunks of the batch were evicted from the ring before they were shipped",
                 l->label, gone);
    }
    if (n == l->src.n && r->body_bytes && l->src.stored_bytes)
        l->ratio = (l->ratio + (double)r->body_bytes / (double)l->src.stored_bytes) / 2;
    return n - gone - (size_t)l->corrupt;
}

static int on_delivered(struct lane *l, const pfr_sink_result *r)
{
    pfr_engine *e = l->e;
    int rc = pfr_state_begin(e->o.state);
    if (rc)
        return rc;
    if (l->nbad && (rc = set_aside(l, l->bad, l->nbad, 0, l->bad_why)))
        goto fail;
    if (l->mode == PFR_LANE_REJECTED && l->src.n && (rc = unreject(l, l->src.ids, l->src.n)))
        goto fail;
    int64_t now = pfr_clock_real_ns();
    size_t delivered = settle(l, r, l->src.n);
    l->st.delivered_chunks += delivered;
    l->st.delivered_bytes += r->bytes_sent;
    l->st.corrupt_chunks += l->corrupt;
    if (l->corrupt)
        pfr_warn("%s: %" PRIu64 " corrupt chunks skipped (ids %lld..%lld)", l->label, l->corrupt,
                 (long long)l->b_after + 1, (long long)l->b_max);
    l->st.last_success_ns = now;
    l->st.attempts = 0;
    l->st.next_attempt_ns = 0;
    if (l->mode == PFR_LANE_LIVE) {
        l->st.pending_max = l->st.pending_after = 0;
        l->st.pending_limit = 0;
        l->st.pending_token[0] = 0;
    }
    /* After narrowing a rejection down, grow back. */
    if (l->st.batch_limit) {
        l->st.batch_limit *= 2;
        if (l->st.batch_limit >= l->conf->batch.max_chunks)
            l->st.batch_limit = 0;
    }
    if ((rc = advance(l, l->b_max)))
        goto fail;
    if ((rc = pfr_state_commit(e->o.state)))
        goto fail;
    if (l->down_since) {
        char d[32];
        pfr_info("%s: delivering again (failed for %s)", l->label,
                 pfr_fmt_duration((pfr_clock_mono_ns() - l->down_since) / 1000000, d, sizeof(d)));
        l->down_since = 0;
    }
    pfr_debug("%s: delivered %zu chunks (%lld..%lld), %" PRIu64 " bytes", l->label, delivered,
              (long long)(l->src.n ? l->src.ids[0] : 0),
              (long long)(l->src.n ? l->src.ids[l->src.n - 1] : 0), r->bytes_sent);
    l->sent_chunks += delivered;
    l->sent_bytes += r->bytes_sent;
    batch_drop(l);
    l->retry_at = 0;
    progress(l, false);
    return 0;
fail:
    pfr_state_rollback(e->o.state);
    pfr_err("%s: cannot record the delivery: %s", l->label, strerror(-rc));
    return rc;
}

/* A per-chunk sink delivered the first r->ndone chunks, then stopped. */
static int on_partial(struct lane *l, const pfr_sink_result *r)
{
    pfr_engine *e = l->e;
    int64_t to = l->src.ids[r->ndone - 1];
    int rc = pfr_state_begin(e->o.state);
    if (rc)
        return rc;
    /* Chunks that could not be encoded and lie before the point reached go aside now. */
    size_t nb = 0;
    while (nb < l->nbad && l->bad[nb] < to)
        nb++;
    if (nb && (rc = set_aside(l, l->bad, nb, 0, l->bad_why)))
        goto fail;
    if (l->mode == PFR_LANE_REJECTED && (rc = unreject(l, l->src.ids, r->ndone)))
        goto fail;
    size_t delivered = settle(l, r, r->ndone);
    l->st.delivered_chunks += delivered;
    l->st.delivered_bytes += r->bytes_sent;
    l->st.corrupt_chunks += l->corrupt;
    l->st.last_success_ns = pfr_clock_real_ns();
    if (l->mode == PFR_LANE_LIVE) {
        l->st.pending_max = l->st.pending_after = 0;
        l->st.pending_limit = 0;
        l->st.pending_token[0] = 0;
    }
    if ((rc = advance(l, to)) || (rc = pfr_state_commit(e->o.state)))
        goto fail;
    l->sent_chunks += delivered;
    l->sent_bytes += r->bytes_sent;
    return 0;
fail:
    pfr_state_rollback(e->o.state);
    return rc;
}

static int on_rejected(struct lane *l, const pfr_sink_result *r)
{
    pfr_engine *e = l->e;
    size_t from = r->one_chunk ? r->ndone : 0;
    size_t n = r->one_chunk ? 1 : l->src.n - from;
    if (!r->one_chunk && r->split && l->src.n > 1) {
        /* One bad chunk may spoil a whole insert: narrow it down before setting anything
         * aside. */
        l->st.batch_limit = l->src.n / 2;
        l->st.pending_max = l->st.pending_after = 0;
        l->st.pending_limit = 0;
        l->st.pending_token[0] = 0;
        set_error(l, r->message);
        pfr_info("%s: batch of %zu chunks rejected (%s); retrying in halves", l->label, l->src.n,
                 r->message);
        batch_drop(l);
        return save(l);
    }
    int rc = pfr_state_begin(e->o.state);
    if (rc)
        return rc;
    if ((rc = set_aside(l, l->src.ids + from, n, r->status, r->message)))
        goto fail;
    set_error(l, r->message);
    if (l->mode == PFR_LANE_LIVE) {
        l->st.pending_max = l->st.pending_after = 0;
        l->st.pending_limit = 0;
        l->st.pending_token[0] = 0;
    }
    int64_t to = r->one_chunk ? l->src.ids[from] : l->b_max;
    size_t delivered = 0;
    if (r->one_chunk && from > 0) {
        delivered = settle(l, r, from);
        l->st.delivered_chunks += delivered;
        l->st.corrupt_chunks += l->corrupt;
        l->st.delivered_bytes += r->bytes_sent;
        l->st.last_success_ns = pfr_clock_real_ns();
        if (l->mode == PFR_LANE_REJECTED && (rc = unreject(l, l->src.ids, from)))
            goto fail;
    }
    int64_t to_bad = r->one_chunk ? l->src.ids[from] : INT64_MAX;
    size_t nb = 0;
    while (nb < l->nbad && l->bad[nb] < to_bad)
        nb++;
    if (nb && (rc = set_aside(l, l->bad, nb, 0, l->bad_why)))
        goto fail;
    l->st.attempts = 0;
    if ((rc = advance(l, to)) || (rc = pfr_state_commit(e->o.state)))
        goto fail;
    if (r->one_chunk) { /* the chunks before the rejected one arrived */
        l->sent_chunks += delivered;
        l->sent_bytes += r->bytes_sent;
    }
    batch_drop(l);
    return 0;
fail:
    pfr_state_rollback(e->o.state);
    return rc;
}

/* A rejection that would set chunks aside is first checked against the sink's answer to a
 * request that carries no chunk (ops.probe): a server that answers everything alike (a proxy's
 * "400 Bad Request", a server of another kind) gives both the same answer, and then it is about
 * the sink: r becomes PFR_OUT_SINK and nothing is set aside. A healthy sink answers the probe
 * otherwise (Coroot: "service.name is empty"; ClickHouse: SELECT 1), and the chunk goes aside.
 * No answer to the probe: nothing is set aside on that evidence, the batch is tried again later.
 * A rejection that narrows a batch down sets nothing aside: not checked. */
static void judge_rejection(struct lane *l, pfr_sink_result *r)
{
    if (!l->sink->ops->probe || (!r->one_chunk && r->split && l->src.n > 1))
        return;
    if (r->one_chunk && r->ndone > 0)
        return; /* chunks before it in the same batch arrived: it is about this one */
    pfr_sink_result p;
    l->sink->ops->probe(l->sink, &p);
    pfr_sink_scrub(l->sink, p.message);
    if (p.outcome == PFR_OUT_ABORTED) {
        r->outcome = PFR_OUT_ABORTED;
    } else if (!p.status) {
        char m[sizeof(r->message)];
        snprintf(m, sizeof(m),
                 "%.250s; no answer to a request without a chunk (%.120s): not set aside on that "
                 "evidence",
                 r->message, p.message);
        snprintf(r->message, sizeof(r->message), "%s", m);
        r->outcome = PFR_OUT_RETRY;
    } else if (p.status == r->status && !strcmp(p.message, r->message)) {
        size_t n = strlen(r->message);
        snprintf(r->message + n, sizeof(r->message) - n,
                 " (the same answer to a request without any chunk: about the sink, not the "
                 "chunk)");
        r->outcome = PFR_OUT_SINK;
    }
}

/* A failure that is not about the chunks (transient, or the sink refusing every request):
 * back off and send the same batch again; nothing is set aside. */
static void on_retry(struct lane *l, const pfr_sink_result *r)
{
    pfr_engine *e = l->e;
    l->st.attempts++;
    l->st.retries++;
    int64_t d = pfr_backoff_delay_ms(&l->conf->backoff, l->st.attempts, r->retry_after_ms, &e->rng);
    int64_t now = pfr_clock_mono_ns();
    l->retry_at = now + d * 1000000;
    l->st.next_attempt_ns = pfr_clock_real_ns() + d * 1000000;
    bool refused = r->outcome == PFR_OUT_SINK;
    l->st.sink_failures += refused;
    if (refused) {
        char m[sizeof(l->st.last_error)];
        snprintf(m, sizeof(m), "refused by the sink (nothing set aside): %.460s", r->message);
        set_error(l, m);
    } else {
        set_error(l, r->message);
    }
    if (!l->down_since)
        l->down_since = now;
    /* Say it at the first failure and then less and less often. */
    uint32_t a = l->st.attempts;
    if ((a & (a - 1)) == 0) {
        char ds[32];
        pfr_warn("%s: attempt %u failed%s: %s; next in %s%s", l->label, a,
                 refused ? ", refused by the sink (nothing set aside)" : "", r->message,
                 pfr_fmt_duration(d, ds, sizeof(ds)),
                 r->retry_after_ms >= 0 ? " (Retry-After)" : "");
    }
    save(l);
}

/* Every result passes here first: its message is made fit to write down (it quotes the
 * server), and an HTTP answer is noted for pfr_engine_failed_sinks. */
static void took_result(struct lane *l, pfr_sink_result *r)
{
    pfr_sink_scrub(l->sink, r->message);
    if (r->status) {
        l->answer_seq = ++l->e->answers;
        l->answer_failed = r->outcome != PFR_OUT_OK;
    }
}

/* Send the open batch: the sink reads its chunks from the ring as it sends them. */
static void send_batch(struct lane *l, pfr_sink_result *r)
{
    pfr_chunksrc_rewind(&l->src);
    l->sink->ops->send(l->sink, &l->src, l->token, r);
}

/* ---- one step of a lane ---- */

/* Do what is due; *next_ns (monotonic) gets when to come back. */
static int lane_step(struct lane *l, int64_t now, int64_t *next_ns)
{
    pfr_engine *e = l->e;
    int rc;
    *next_ns = now + e->o.poll_ms * 1000000;
    if (l->phase == LANE_DONE)
        return 0;
    if (l->phase == LANE_NEW) {
        rc = pfr_state_sink_get(e->o.state, l->conf->name, l->conf->kind->name, &l->st);
        if (rc)
            return rc;
        l->phase = LANE_PREPARE;
    }
    if (l->retry_at > now) {
        *next_ns = l->retry_at;
        return 0;
    }
    if (l->mode != PFR_LANE_BACKFILL) {
        int64_t below;
        if ((rc = ring_floor(e, &below)) || (rc = reap_set_aside(l, below)))
            return rc;
    }
    if (l->phase == LANE_PREPARE) {
        pfr_sink_result r;
        l->sink->ops->prepare(l->sink, &r);
        took_result(l, &r);
        if (r.outcome == PFR_OUT_ABORTED)
            return 0;
        if (r.outcome != PFR_OUT_OK) {
            on_retry(l, &r);
            *next_ns = l->retry_at;
            return 0;
        }
        if (r.message[0])
            pfr_warn("%s: %s", l->label, r.message);
        l->phase = LANE_IDLE;
    }
    if (l->phase == LANE_IDLE) {
        int64_t wait_ms = 0;
        switch (l->mode) {
        case PFR_LANE_LIVE:
            rc = build_live(l, &wait_ms);
            break;
        case PFR_LANE_BACKFILL:
            rc = build_backfill(l);
            break;
        case PFR_LANE_REJECTED:
            rc = build_rejected(l);
            break;
        default:
            rc = -EINVAL;
        }
        if (rc < 0)
            return rc;
        if (l->phase == LANE_DONE)
            return 0;
        if (wait_ms > 0 || l->phase == LANE_IDLE) {
            int64_t w = wait_ms > 0 ? wait_ms : e->o.poll_ms;
            if (w > e->o.poll_ms)
                w = e->o.poll_ms;
            if (l->mode == PFR_LANE_LIVE && e->o.once && l->st.cursor >= l->m.live.target_max)
                lane_finish(l);
            *next_ns = now + w * 1000000;
            return 0;
        }
        if (!l->src.n && !l->nbad && !l->corrupt && l->b_max <= l->b_after) {
            batch_drop(l);
            if (l->mode == PFR_LANE_LIVE) {
                l->st.pending_max = 0;
                if (e->o.once && l->st.cursor >= l->m.live.target_max)
                    lane_finish(l);
            }
            return 0;
        }
    }
    int64_t pw = pfr_pacer_wait_ns(&l->pacer, now);
    if (pw > 0) {
        *next_ns = now + pw;
        return 0;
    }
    pfr_sink_result r;
    if (!l->src.n) {
        /* Nothing to send (only chunks that cannot be encoded, or corrupt ones): move on. */
        pfr_sink_result_reset(&r);
        rc = on_delivered(l, &r);
        *next_ns = now;
        return rc;
    }
    l->st.last_attempt_ns = pfr_clock_real_ns();
    int64_t t0 = pfr_clock_mono_ns();
    send_batch(l, &r);
    took_result(l, &r);
    pfr_pacer_sent(&l->pacer, r.bytes_sent, t0);
    switch (r.outcome) {
    case PFR_OUT_OK:
        rc = on_delivered(l, &r);
        break;
    case PFR_OUT_ABORTED:
        return 0;
    case PFR_OUT_REJECT:
        judge_rejection(l, &r);
        if (r.outcome == PFR_OUT_ABORTED)
            return 0;
        if (r.outcome == PFR_OUT_REJECT) {
            rc = on_rejected(l, &r);
            break;
        }
        on_retry(l, &r);
        *next_ns = l->retry_at;
        return 0;
    case PFR_OUT_RETRY:
    case PFR_OUT_SINK:
    default:
        if (r.one_chunk && r.ndone > 0) {
            rc = on_partial(l, &r);
            batch_drop(l);
            if (rc)
                return rc;
        }
        on_retry(l, &r);
        *next_ns = l->retry_at;
        return 0;
    }
    if (rc)
        return rc;
    *next_ns = now; /* there may be more right away */
    if (l->mode == PFR_LANE_LIVE && e->o.once && l->st.cursor >= l->m.live.target_max &&
        l->phase == LANE_IDLE)
        lane_finish(l);
    return 0;
}

int pfr_engine_run(pfr_engine *e, int64_t deadline_ns)
{
    for (;;) {
        if (e->o.should_stop && e->o.should_stop(e->o.ctx))
            return PFR_RUN_STOPPED;
        int64_t now = pfr_clock_mono_ns();
        int64_t next = INT64_MAX;
        bool all_done = true;
        for (size_t i = 0; i < e->nlanes; i++) {
            struct lane *l = e->lanes[i];
            /* A backfill or rejected pass must finish before the live lane of its sink. */
            bool blocked = false;
            for (size_t j = 0; j < i && !blocked; j++)
                blocked = e->lanes[j]->conf == l->conf && e->lanes[j]->phase != LANE_DONE;
            if (blocked) {
                all_done = false;
                continue;
            }
            int64_t n;
            int rc = lane_step(l, now, &n);
            if (rc < 0) {
                /* The ring or the state file failed (busy, full disk, a migration...): the
                 * daemon keeps going and tries again, like after a sink failure. */
                l->errors++;
                if ((l->errors & (l->errors - 1)) == 0)
                    pfr_err("%s: %s (local error %" PRIu64 "); trying again", l->label,
                            strerror(-rc), l->errors);
                int64_t wait = e->o.poll_ms > 1000 ? e->o.poll_ms : 1000;
                l->retry_at = pfr_clock_mono_ns() + wait * 1000000;
                n = l->retry_at;
            } else {
                l->errors = 0;
            }
            if (l->phase == LANE_DONE)
                continue;
            all_done = false;
            if (n < next)
                next = n;
            if (e->o.should_stop && e->o.should_stop(e->o.ctx))
                return PFR_RUN_STOPPED;
        }
        /* Live lanes are done only with --once. */
        if (all_done)
            return PFR_RUN_DONE;
        now = pfr_clock_mono_ns();
        if (deadline_ns && now >= deadline_ns)
            return PFR_RUN_DEADLINE;
        if (next > now) {
            int64_t w = next - now;
            if (deadline_ns && now + w > deadline_ns)
                w = deadline_ns - now;
            e->o.sleep(e->o.ctx, w);
        }
    }
}

size_t pfr_engine_failed_sinks(const pfr_engine *e)
{
    size_t failed = 0;
    for (size_t i = 0; i < e->nlanes; i++) {
        const pfr_sink_conf *conf = e->lanes[i]->conf;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = e->lanes[j]->conf == conf;
        if (seen)
            continue;
        /* The sink's lanes together: what they delivered, and the newest answer. */
        uint64_t delivered = 0;
        const struct lane *last = NULL;
        for (size_t j = i; j < e->nlanes; j++) {
            const struct lane *l = e->lanes[j];
            if (l->conf != conf)
                continue;
            delivered += l->sent_chunks;
            if (l->answer_seq && (!last || l->answer_seq > last->answer_seq))
                last = l;
        }
        if (delivered || !last || !last->answer_failed)
            continue;
        pfr_err("%s: nothing delivered in this run; its last answer: %s", last->label,
                last->st.last_error[0] ? last->st.last_error : "an error");
        failed++;
    }
    return failed;
}
