/* The clickhouse sink: rows of Coroot's profiling_samples and profiling_stacks through
 * ClickHouse's HTTP interface, INSERT ... FORMAT Native (one block per table and batch). Each batch
 * carries insert_deduplication_token (the engine derives it from the batch's chunk id range),
 * so an insert retried after a lost answer is dropped by ClickHouse instead of doubling values:
 * for a plain MergeTree that needs the table setting non_replicated_deduplication_window > 0,
 * which the tables we create have, and which prepare() checks on existing tables. Stack rows
 * that would move a stack's LastSeen back are left out (ch_lastseen.h). Where Coroot keeps the
 * database on a cluster, rows go through its profiling_*_distributed tables, and create_tables
 * makes nothing (ch_answer.h's survey). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ch_answer.h"
#include "ch_error.h"
#include "ch_lastseen.h"
#include "chenc.h"
#include "coroot_fmt.h"
#include "sink.h"
#include "svcname.h"

struct ch_sink {
    pfr_sink base;
    pfr_chenc *enc;
    bool prepared;
    bool batch_open;
    bool sealed;          /* a batch is in flight: its samples' body and stack rows below */
    bool dist_stacks;     /* insert through profiling_stacks_distributed (a cluster) */
    bool dist_samples;    /* insert through profiling_samples_distributed */
    pfr_buf fl_samples;   /* the samples' body of the batch in flight */
    pfr_chcols fl_stacks; /* its stack rows, rendered at each attempt (ch_lastseen.h) */
    pfr_buf name;         /* a chunk's service name as shipped (service_prefix) */
    char *base_url;       /* without trailing '/' */
    char *db_param;       /* escaped database name */
    char *user_hdr;       /* X-ClickHouse-User: ... */
    char *key_hdr;        /* X-ClickHouse-Key: ... (secret) */
    pfr_buf url, body;
};

/* ---- requests ---- */

static int build_url(struct ch_sink *c, const char *query, const char *token, const char *settings,
                     bool with_db)
{
    char *q = pfr_url_escape(query);
    if (!q)
        return -ENOMEM;
    pfr_buf_reset(&c->url);
    pfr_buf_puts(&c->url, c->base_url);
    pfr_buf_puts(&c->url, "/?query=");
    pfr_buf_puts(&c->url, q);
    free(q);
    if (with_db) {
        pfr_buf_puts(&c->url, "&database=");
        pfr_buf_puts(&c->url, c->db_param);
    }
    if (token) {
        char *t = pfr_url_escape(token);
        if (!t)
            return -ENOMEM;
        pfr_buf_puts(&c->url, "&insert_deduplication_token=");
        pfr_buf_puts(&c->url, t);
        free(t);
    }
    if (settings) {
        pfr_buf_putc(&c->url, '&');
        pfr_buf_puts(&c->url, settings);
    }
    return pfr_buf_cstr(&c->url) ? 0 : -ENOMEM;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return false;
    return true;
}

/* One request; r gets the outcome. settings: more URL parameters (query settings), or NULL.
 * Answers of SELECTs go to *out (malloc'ed) when out != NULL.
 * An INSERT or DDL that answers 200 must answer nothing more: anything else is not ClickHouse
 * (or an exception streamed after the status), and the data may not be stored. */
static void ch_request(struct ch_sink *c, const char *query, const char *token,
                       const char *settings, bool with_db, const void *data, size_t len, char **out,
                       pfr_sink_result *r)
{
    pfr_sink *s = &c->base;
    if (build_url(c, query, token, settings, with_db) < 0) {
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "out of memory");
        return;
    }
    const char *headers[5];
    size_t nh = 0;
    /* Not curl's default (form data): the body is a statement or rows (Native). */
    headers[nh++] =
        data ? "Content-Type: application/octet-stream" : "Content-Type: text/plain; charset=utf-8";
    if (!s->conf->basic_auth) {
        headers[nh++] = c->user_hdr;
        if (c->key_hdr)
            headers[nh++] = c->key_hdr;
    }
    uint8_t *gz = NULL;
    size_t gzlen = 0;
    if (data && s->conf->compress) {
        if (pfr_gzip(data, len, s->conf->compress_level, &gz, &gzlen) < 0) {
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "out of memory");
            return;
        }
        headers[nh++] = "Content-Encoding: gzip";
    }
    pfr_http_req req = {.url = (const char *)c->url.data,
                        .headers = headers,
                        .nheaders = nh,
                        .body = gz ? gz : data,
                        .body_len = gz ? gzlen : len};
    if (!data) {
        /* Statements without data go in the body of a POST (GET is read-only for ClickHouse). */
        req.body = "";
        req.body_len = 0;
    }
    if (s->conf->basic_auth) {
        req.basic_user = s->conf->user;
        req.basic_password = s->conf->api_key;
    }
    pfr_http_resp resp;
    enum pfr_outcome t = pfr_http_do(s->http, &req, &resp);
    free(gz);
    pfr_sink_result_from_http(r, t, &resp);
    if (r->outcome == PFR_OUT_OK) {
        if (resp.ch_exception_code[0] || (!out && !blank(resp.body, resp.body_len))) {
            snprintf(r->message, sizeof(r->message),
                     "HTTP %ld but the answer is not a stored insert (%s%s%.300s): will retry",
                     resp.status, resp.ch_exception_code[0] ? "exception " : "",
                     resp.ch_exception_code, resp.quote);
            r->outcome = PFR_OUT_RETRY;
        } else if (out) {
            *out = resp.body;
            resp.body = NULL;
        }
    } else if (resp.status) {
        /* An error answer: its exception code says whether it is about the rows (ch_error.c). */
        switch (pfr_ch_verdict_of(resp.status,
                                  pfr_ch_exception_code(resp.ch_exception_code, resp.body))) {
        case PFR_CH_DATA:
            r->outcome = PFR_OUT_REJECT;
            r->split = true; /* one bad chunk may spoil the insert: narrow it down */
            break;
        case PFR_CH_SCHEMA:
            c->prepared = false; /* check the tables again (create them), then wait */
            r->outcome = PFR_OUT_SINK;
            break;
        case PFR_CH_SINK:
            r->outcome = PFR_OUT_SINK;
            break;
        case PFR_CH_RETRY:
            r->outcome = PFR_OUT_RETRY;
            break;
        }
    }
    pfr_http_resp_free(&resp);
}

/* ---- tables ---- */

static void ddl(struct ch_sink *c, pfr_buf *b, int which)
{
    const pfr_sink_conf *k = c->base.conf;
    char ttl[96] = "";
    const char *col = which == 1 ? "Start" : "LastSeen";
    if (k->ttl_days > 0)
        snprintf(ttl, sizeof(ttl), "TTL toDateTime(%s) + toIntervalDay(%lld)\n", col,
                 (long long)k->ttl_days);
    pfr_buf_reset(b);
    switch (which) {
    case 0:
        pfr_buf_printf(b,
                       "CREATE TABLE IF NOT EXISTS profiling_stacks (\n"
                       "  ServiceName LowCardinality(String) CODEC(ZSTD(1)),\n"
                       "  Hash UInt64 CODEC(ZSTD(1)),\n"
                       "  LastSeen DateTime64(9) CODEC(Delta, ZSTD(1)),\n"
                       "  Stack Array(String) CODEC(ZSTD(1))\n"
                       ") ENGINE ReplacingMergeTree()\n"
                       "PRIMARY KEY (ServiceName, Hash)\n%s"
                       "PARTITION BY toDate(LastSeen)\n"
                       "ORDER BY (ServiceName, Hash)\n"
                       "SETTINGS non_replicated_deduplication_window = %llu",
                       ttl, (unsigned long long)k->dedup_window);
        break;
    case 1:
        pfr_buf_printf(
            b,
            "CREATE TABLE IF NOT EXISTS profiling_samples (\n"
            "  ServiceName LowCardinality(String) CODEC(ZSTD(1)),\n"
            "  Type LowCardinality(String) CODEC(ZSTD(1)),\n"
            "  Start DateTime64(9) CODEC(Delta, ZSTD(1)),\n"
            "  End DateTime64(9) CODEC(Delta, ZSTD(1)),\n"
            "  Labels Map(LowCardinality(String), String) CODEC(ZSTD(1)),\n"
            "  StackHash UInt64 CODEC(ZSTD(1)),\n"
            "  Value Int64 CODEC(ZSTD(1))\n"
            ") ENGINE MergeTree()\n%s"
            "PARTITION BY toDate(Start)\n"
            "ORDER BY (ServiceName, Type, toUnixTimestamp(Start), toUnixTimestamp(End))\n"
            "SETTINGS non_replicated_deduplication_window = %llu",
            ttl, (unsigned long long)k->dedup_window);
        break;
    case 2:
        pfr_buf_printf(b,
                       "CREATE TABLE IF NOT EXISTS profiling_profiles (\n"
                       "  ServiceName LowCardinality(String) CODEC(ZSTD(1)),\n"
                       "  Type LowCardinality(String) CODEC(ZSTD(1)),\n"
                       "  LastSeen DateTime64(9) CODEC(Delta, ZSTD(1))\n"
                       ") ENGINE ReplacingMergeTree()\n"
                       "PRIMARY KEY (ServiceName, Type)\n%s"
                       "PARTITION BY toDate(LastSeen)",
                       ttl);
        break;
    case 3:
        pfr_buf_puts(b, "CREATE MATERIALIZED VIEW IF NOT EXISTS profiling_profiles_mv TO "
                        "profiling_profiles AS\n"
                        "SELECT ServiceName, Type, max(End) AS LastSeen FROM profiling_samples "
                        "GROUP BY ServiceName, Type");
        break;
    }
}

static void fail_oom(pfr_sink_result *r)
{
    r->outcome = PFR_OUT_RETRY;
    snprintf(r->message, sizeof(r->message), "out of memory");
}

/* Put what before r's message ("creating tables: HTTP 500 ..."). */
static void explain(pfr_sink_result *r, const char *what)
{
    char m[sizeof(r->message)];
    snprintf(m, sizeof(m), "%s", r->message);
    snprintf(r->message, sizeof(r->message), "%s: %.440s", what, m);
}

static bool create_tables(struct ch_sink *c, pfr_sink_result *r)
{
    pfr_buf q = {0};
    if (strcmp(c->base.conf->database, "default")) {
        pfr_buf_printf(&q, "CREATE DATABASE IF NOT EXISTS %s", c->base.conf->database);
        if (q.oom) {
            fail_oom(r);
            return false;
        }
        ch_request(c, pfr_buf_cstr(&q), NULL, NULL, false, NULL, 0, NULL, r);
    }
    for (int i = 0; i < 4 && r->outcome == PFR_OUT_OK; i++) {
        ddl(c, &q, i);
        if (q.oom || !pfr_buf_cstr(&q)) {
            fail_oom(r);
            break;
        }
        ch_request(c, (const char *)q.data, NULL, NULL, true, NULL, 0, NULL, r);
    }
    pfr_buf_free(&q);
    if (r->outcome != PFR_OUT_OK) {
        explain(r, "creating tables");
        return false;
    }
    return true;
}

/* The database's tables and the server's kind (ch_answer.h) into *l; *ans keeps the answer
 * (malloc'ed) for the tables' engines. Asked without the database parameter: it may not exist
 * yet. */
static bool survey(struct ch_sink *c, char **ans, pfr_ch_layout *l, pfr_sink_result *r)
{
    pfr_buf q = {0};
    if (pfr_ch_survey_query(c->base.conf->database, &q) < 0) {
        pfr_buf_free(&q);
        fail_oom(r);
        return false;
    }
    ch_request(c, (const char *)q.data, NULL, NULL, false, NULL, 0, ans, r);
    pfr_buf_free(&q);
    if (r->outcome != PFR_OUT_OK)
        return false;
    pfr_ch_layout_read(*ans, l);
    return true;
}

static bool all_tables(const pfr_ch_layout *l)
{
    return l->stacks && l->samples && l->profiles && l->profiles_mv;
}

/* create_tables: Coroot's tables where some are missing, unless Coroot keeps them on a cluster
 * (it makes them Replicated, ON CLUSTER: a plain MergeTree made first would stay in its way). */
static bool ensure_tables(struct ch_sink *c, const pfr_ch_layout *l, pfr_sink_result *r)
{
    char why[128];
    if (all_tables(l))
        return true;
    if (pfr_ch_layout_clustered(l, why, sizeof(why))) {
        r->outcome = PFR_OUT_SINK;
        snprintf(r->message, sizeof(r->message),
                 "not creating tables: database %s is on a ClickHouse cluster (%s), where Coroot "
                 "makes its tables Replicated ON CLUSTER with Distributed ones; create_tables "
                 "would make plain MergeTree tables. Let Coroot create them (waiting for them)",
                 c->base.conf->database, why);
        return false;
    }
    return create_tables(c, r);
}

static bool check_columns(struct ch_sink *c, pfr_sink_result *r)
{
    char *ans = NULL, why[256];
    ch_request(c,
               "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() "
               "AND table IN ('profiling_samples', 'profiling_stacks') ORDER BY table, name "
               "FORMAT TabSeparated",
               NULL, NULL, true, NULL, 0, &ans, r);
    if (r->outcome != PFR_OUT_OK)
        return false;
    bool ok = pfr_ch_check_columns(ans, why, sizeof(why));
    free(ans);
    if (!ok) {
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "tables in database %s: %s",
                 c->base.conf->database, why);
    }
    return ok;
}

/* Inserts retried after a lost answer must not double: a plain MergeTree needs a deduplication
 * window. ans: the survey's answer. A warning for the log goes to notice. */
static bool check_dedup(struct ch_sink *c, const char *ans, char *notice, size_t noticelen,
                        pfr_sink_result *r)
{
    const pfr_sink_conf *k = c->base.conf;
    const char *tables[] = {"profiling_samples", "profiling_stacks"};
    for (int i = 0; i < 2; i++) {
        bool replicated, found;
        long long w = pfr_ch_dedup_window(ans, tables[i], &replicated, &found);
        if (!found) {
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "system.tables does not list %s", tables[i]);
            return false;
        }
        if (replicated || w > 0)
            continue;
        if (k->create_tables) {
            pfr_buf q = {0};
            pfr_buf_printf(
                &q, "ALTER TABLE %s MODIFY SETTING non_replicated_deduplication_window = %llu",
                tables[i], (unsigned long long)k->dedup_window);
            const char *qs = pfr_buf_cstr(&q);
            if (qs)
                ch_request(c, qs, NULL, NULL, true, NULL, 0, NULL, r);
            pfr_buf_free(&q);
            if (!qs || r->outcome != PFR_OUT_OK) {
                r->outcome = PFR_OUT_RETRY;
                return false;
            }
        } else if (!notice[0]) {
            snprintf(notice, noticelen,
                     "%s.%s has no non_replicated_deduplication_window: an insert retried after "
                     "a lost answer may double values (set it, or let the shipper create the "
                     "tables)",
                     k->database, tables[i]);
        }
    }
    return true;
}

static void ch_prepare(pfr_sink *s, pfr_sink_result *r)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_sink_result_reset(r);
    if (c->prepared)
        return;
    char *ans = NULL, notice[sizeof(r->message)] = "";
    pfr_ch_layout l;
    bool ok = survey(c, &ans, &l, r);
    if (ok && s->conf->create_tables && !all_tables(&l)) {
        free(ans);
        ans = NULL;
        ok = ensure_tables(c, &l, r) && survey(c, &ans, &l, r);
    }
    ok = ok && check_columns(c, r) && check_dedup(c, ans, notice, sizeof(notice), r);
    free(ans);
    if (!ok)
        return;
    /* On a cluster Coroot reads through the Distributed tables: rows go in through them too,
     * so they land on the shards Coroot's sharding keys (Hash, StackHash) give. */
    c->dist_stacks = l.stacks_dist;
    c->dist_samples = l.samples_dist;
    pfr_sink_result_reset(r);
    snprintf(r->message, sizeof(r->message), "%s", notice);
    c->prepared = true;
}

/* ---- batches ---- */

static void ch_open(struct ch_sink *c)
{
    if (!c->batch_open) {
        pfr_chenc_begin(c->enc);
        c->batch_open = true;
    }
}

/* m as shipped: *tmp, with the sink's service_prefix before its service, when there is one.
 * NULL on -ENOMEM. */
static const pfr_chunk_meta *shipped(struct ch_sink *c, const pfr_chunk_meta *m,
                                     pfr_chunk_meta *tmp)
{
    const char *prefix = c->base.conf->service_prefix;
    if (!prefix || !prefix[0] || !m->service || !m->service[0])
        return m; /* no service: the encoder says so */
    *tmp = *m;
    tmp->service = pfr_svcname(prefix, m->service, &c->name);
    return tmp->service ? tmp : NULL;
}

static int ch_add(pfr_sink *s, const pfr_chunk_meta *m, const pfr_profile *p, char *why,
                  size_t whylen)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_chunk_meta tmp;
    const pfr_chunk_meta *sm = shipped(c, m, &tmp);
    if (!sm)
        return -ENOMEM;
    ch_open(c);
    int rc = pfr_chenc_add(c->enc, sm, p);
    if (rc == -EINVAL)
        snprintf(why, whylen, "chunk %lld has no service name", (long long)m->id);
    return rc;
}

static int ch_add_samples(pfr_sink *s, const pfr_chunk_meta *m, const pfr_chunk_samples *v,
                          char *why, size_t whylen)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_chunk_meta tmp;
    const pfr_chunk_meta *sm = shipped(c, m, &tmp);
    if (!sm)
        return -ENOMEM;
    ch_open(c);
    int rc = pfr_chenc_add_samples(c->enc, sm, v);
    if (rc == -EINVAL)
        snprintf(why, whylen, "chunk %lld has no service name", (long long)m->id);
    return rc;
}

static uint64_t ch_batch_bytes(const pfr_sink *s)
{
    const struct ch_sink *c = (const struct ch_sink *)s;
    return pfr_chenc_bytes(c->enc);
}

/* The open batch becomes the batch in flight; the encoder counts its stacks as written. A
 * batch already in flight (a retry) stays as it is. */
static int ch_seal(pfr_sink *s)
{
    struct ch_sink *c = (struct ch_sink *)s;
    if (c->sealed)
        return 0;
    ch_open(c);
    int rc = pfr_chenc_seal(c->enc, &c->fl_samples, &c->fl_stacks);
    if (rc)
        return rc;
    c->batch_open = false;
    c->sealed = true;
    return 0;
}

/* The stack rows of the batch in flight that move their stack's LastSeen forward, rendered
 * into c->body (empty: none). Asked again at every attempt, so a retry leaves out what an
 * attempt whose answer was lost stored (rows only go, never come: the insert token's
 * deduplication, per partition, stays right). */
static void render_new_stacks(struct ch_sink *c, pfr_sink_result *r)
{
    const char *table = c->dist_stacks ? "profiling_stacks_distributed" : "profiling_stacks";
    pfr_ch_lastseen *l = NULL;
    pfr_buf q = {0};
    char *ans = NULL, what[128];
    if (pfr_ch_lastseen_new(&c->fl_stacks, &l) < 0) {
        fail_oom(r);
        return;
    }
    for (;;) {
        if (pfr_ch_lastseen_query(l, table, PFR_CH_LASTSEEN_KEYS, &q) < 0) {
            fail_oom(r);
            break;
        }
        if (!q.len)
            break;
        /* The query in the body: it may be longer than a URL should be. A rejection (the
         * batch's names or hashes spoiling it) narrows the batch down like the insert's would. */
        ch_request(c, "", NULL, NULL, true, q.data, q.len, &ans, r);
        if (r->outcome != PFR_OUT_OK) {
            explain(r, "asking for the stacks' LastSeen");
            break;
        }
        long n = pfr_ch_lastseen_apply(l, ans, what, sizeof(what));
        free(ans);
        ans = NULL;
        if (n < 0) {
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "asking for the stacks' LastSeen: %s", what);
            break;
        }
    }
    pfr_buf_free(&q);
    if (r->outcome == PFR_OUT_OK && pfr_chcols_render_stacks(&c->fl_stacks, PFR_CH_NATIVE,
                                                             pfr_ch_lastseen_skip(l), &c->body) < 0)
        fail_oom(r);
    pfr_ch_lastseen_free(l);
}

static void ch_send(pfr_sink *s, const char *token, pfr_sink_result *r)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_sink_result_reset(r);
    if (!c->prepared) {
        ch_prepare(s, r);
        if (r->outcome != PFR_OUT_OK)
            return;
        pfr_sink_result_reset(r);
    }
    /* Stacks first: a sample row never points at a stack that is not stored. */
    if (!c->sealed && ch_seal(s) < 0) {
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "out of memory encoding the batch");
        return;
    }
    /* The stack block holds one row per (ServiceName, Hash) already (chcols.c), so ClickHouse
     * need not merge it on insert (optimize_on_insert, ReplacingMergeTree only): the part is
     * the same, for ~10 % less ClickHouse CPU per insert. Both blocks come sorted by the
     * tables' ORDER BY (ClickHouse skips its sort). Through a Distributed table the insert
     * returns once every shard stored its rows (insert_distributed_sync): a retry then finds
     * each shard's part under the same token, as the rows split alike every time. */
    if (pfr_chcols_stack_rows(&c->fl_stacks))
        render_new_stacks(c, r);
    if (r->outcome == PFR_OUT_OK && c->body.len)
        ch_request(c,
                   c->dist_stacks
                       ? "INSERT INTO profiling_stacks_distributed (" PFR_CHENC_STACKS_COLUMNS
                         ") FORMAT Native"
                       : "INSERT INTO profiling_stacks (" PFR_CHENC_STACKS_COLUMNS
                         ") FORMAT Native",
                   token,
                   c->dist_stacks ? "optimize_on_insert=0&insert_distributed_sync=1"
                                  : "optimize_on_insert=0",
                   true, c->body.data, c->body.len, NULL, r);
    pfr_buf_free(&c->body); /* made again at the next attempt */
    const pfr_buf *sa = &c->fl_samples;
    if (r->outcome == PFR_OUT_OK && sa->len)
        ch_request(c,
                   c->dist_samples
                       ? "INSERT INTO profiling_samples_distributed (" PFR_CHENC_SAMPLES_COLUMNS
                         ") FORMAT Native"
                       : "INSERT INTO profiling_samples (" PFR_CHENC_SAMPLES_COLUMNS
                         ") FORMAT Native",
                   token, c->dist_samples ? "insert_distributed_sync=1" : NULL, true, sa->data,
                   sa->len, NULL, r);
    r->ndone = 0;
    r->one_chunk = false;
}

/* The batch arrived: the one in flight if sealed (its stacks already count as written), else
 * the open one (nothing was sent: chunks that could not be encoded, or none). */
static void ch_commit(pfr_sink *s)
{
    struct ch_sink *c = (struct ch_sink *)s;
    if (c->sealed) {
        /* Freed, not kept: the next seal renders its bodies before it lets these go, and a
         * batch held three times (columns, new bodies, old bodies) is its peak memory. */
        c->sealed = false;
        pfr_buf_free(&c->fl_samples);
        pfr_chcols_free(&c->fl_stacks);
        return;
    }
    if (c->batch_open)
        pfr_chenc_commit(c->enc);
    c->batch_open = false;
}

static void ch_discard_open(pfr_sink *s)
{
    struct ch_sink *c = (struct ch_sink *)s;
    if (c->batch_open)
        pfr_chenc_discard(c->enc);
    c->batch_open = false;
}

/* The batch will not arrive as it is: a sealed batch's stacks were counted as written, so the
 * encoder forgets what it wrote (stack rows come again: ClickHouse keeps one of each). */
static void ch_discard(pfr_sink *s)
{
    struct ch_sink *c = (struct ch_sink *)s;
    if (c->sealed) {
        c->sealed = false;
        pfr_buf_free(&c->fl_samples);
        pfr_chcols_free(&c->fl_stacks);
        pfr_chenc_forget(c->enc);
    }
    ch_discard_open(s);
}

static void ch_free(pfr_sink *s)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_chenc_free(c->enc);
    free(c->base_url);
    free(c->db_param);
    free(c->user_hdr);
    if (c->key_hdr) {
        explicit_bzero(c->key_hdr, strlen(c->key_hdr));
        free(c->key_hdr);
    }
    pfr_buf_free(&c->url);
    pfr_buf_free(&c->body);
    pfr_buf_free(&c->fl_samples);
    pfr_chcols_free(&c->fl_stacks);
    pfr_buf_free(&c->name);
    free(c);
}

static const struct pfr_sink_ops clickhouse_ops = {
    .kind = "clickhouse",
    .prepare = ch_prepare,
    .add = ch_add,
    .add_samples = ch_add_samples,
    .batch_bytes = ch_batch_bytes,
    .send = ch_send,
    .commit = ch_commit,
    .discard = ch_discard,
    .seal = ch_seal,
    .discard_open = ch_discard_open,
    .free = ch_free,
};

int pfr_sink_clickhouse_new(const pfr_sink_conf *conf, pfr_sink **out)
{
    struct ch_sink *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->base.ops = &clickhouse_ops;
    c->base.conf = conf;
    pfr_chenc_opts eo = {.stack_refresh_ns = conf->stack_refresh_ms * 1000000,
                         .format = PFR_CH_NATIVE};
    int rc = pfr_chenc_new(&eo, &c->enc);
    size_t n = strlen(conf->url);
    while (n && conf->url[n - 1] == '/')
        n--;
    if (!rc) {
        c->base_url = strndup(conf->url, n);
        c->db_param = pfr_url_escape(conf->database ? conf->database : "default");
        if (asprintf(&c->user_hdr, "X-ClickHouse-User: %s", conf->user ? conf->user : "default") <
            0)
            c->user_hdr = NULL;
        if (conf->api_key && asprintf(&c->key_hdr, "X-ClickHouse-Key: %s", conf->api_key) < 0)
            rc = -ENOMEM, c->key_hdr = NULL;
        if (!c->base_url || !c->db_param || !c->user_hdr)
            rc = -ENOMEM;
    }
    if (rc) {
        ch_free(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}
