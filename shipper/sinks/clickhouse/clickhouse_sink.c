/* The clickhouse sink: rows of Coroot's profiling_samples and profiling_stacks through
 * ClickHouse's HTTP interface, INSERT ... FORMAT Native, one insert per table and batch.
 *
 * An insert is streamed (Transfer-Encoding: chunked): its rows go as Native blocks of a few MB,
 * encoded from the ring while the request goes, so the sink holds one block, not the batch.
 * ClickHouse squashes the blocks of an insert back into one (min_insert_block_size_bytes above
 * the insert's size, no row threshold): the parts, and the merges they cost, are those of one
 * block per batch. The chunks go service by service (by name), so blocks come in the tables'
 * sort order and the squashed block needs no sort either. Stacks go first, so a sample row
 * never points at a stack that is not stored: the batch is read twice, once per table.
 *
 * The samples' insert carries insert_deduplication_token (the engine derives it from the
 * batch's chunk id range), so an insert retried after a lost answer is dropped by ClickHouse
 * instead of doubling values: for a plain MergeTree that needs the table setting
 * non_replicated_deduplication_window > 0, which the tables we create have, and which prepare()
 * checks on existing tables. A retry sends the same blocks (the same chunks, read again, encode
 * alike), so ClickHouse's per-block tokens match too. Stack rows need no token: a stack row
 * stored twice is kept once (ReplacingMergeTree), and rows that would move a stack's LastSeen
 * back are left out (ch_lastseen.h, asked block by block on a second connection). Where Coroot
 * keeps the database on a cluster, rows go through its profiling_*_distributed tables, and
 * create_tables makes nothing (ch_schema.h's survey). */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sinks/clickhouse/clickhouse_sink.h"
#include "sinks/clickhouse/ch_schema.h"
#include "sinks/clickhouse/ch_error_codes.h"
#include "sinks/clickhouse/ch_lastseen.h"
#include "sinks/clickhouse/ch_rows.h"
#include "sinks/coroot_conventions.h"
#include "pfr_gzip.h"
#include "pfr_vec.h"
#include "sink.h"
#include "sinks/service_name.h"

/* A connection of the sink, and what its requests leave behind. */
struct ch_conn {
    pfr_http *http; /* the first is the sink's (base.http), the others are owned */
    pfr_buf url;    /* of its last request */
    bool schema;    /* an answer said the tables are not what they should be */
};

struct ch_sink {
    pfr_sink base;
    const pfr_ch_conf *cc;  /* base.conf->kind_conf: the sink's ClickHouse settings */
    struct ch_conn conn[3]; /* stacks' inserts and the rest, samples' inserts, LastSeen */
    pfr_ch_rows *enc;
    bool prepared;
    bool dist_stacks;     /* insert through profiling_stacks_distributed (a cluster) */
    bool dist_samples;    /* insert through profiling_samples_distributed */
    uint64_t block_bytes; /* rows of a block before it goes (request bytes, estimated) */
    uint32_t *order;      /* the batch's chunks (indices in its source) in the order they go */
    size_t cap_order;
    pfr_buf name;          /* a chunk's service name as shipped (service_prefix) */
    char *base_url;        /* without trailing '/' */
    char *db_param;        /* escaped database name */
    char *user_hdr;        /* X-ClickHouse-User: ... */
    char *key_hdr;         /* X-ClickHouse-Key: ... (secret) */
    pfr_unit_cache *units; /* ship = agent's systemd units (NULL: none looked at) */
};

/* A request's data: bytes, or a stream (http.h's read). */
struct ch_body {
    const void *data;
    size_t len;
    ptrdiff_t (*read)(void *ctx, void *buf, size_t cap);
    void *ctx; /* read's */
};

/* The connections, once the sink has its HTTP client (pfr_sink_new gives it after ch_create):
 * the sink's own, and two more of its options for the requests made while an insert streams.
 * 0 or a negative errno. */
static int ch_conns(struct ch_sink *c)
{
    c->conn[0].http = c->base.http;
    int rc = 0;
    for (int k = 1; k < 3 && !rc; k++)
        if (!c->conn[k].http)
            rc = pfr_sink_http_new(&c->base, &c->conn[k].http);
    return rc;
}

/* ---- requests ---- */

static int build_url(struct ch_sink *c, pfr_buf *url, const char *query, const char *token,
                     const char *settings, bool with_db)
{
    char *q = pfr_url_escape(query);
    if (!q)
        return -ENOMEM;
    pfr_buf_reset(url);
    pfr_buf_puts(url, c->base_url);
    pfr_buf_puts(url, "/?query=");
    pfr_buf_puts(url, q);
    free(q);
    if (with_db) {
        pfr_buf_puts(url, "&database=");
        pfr_buf_puts(url, c->db_param);
    }
    if (token) {
        char *t = pfr_url_escape(token);
        if (!t)
            return -ENOMEM;
        pfr_buf_puts(url, "&insert_deduplication_token=");
        pfr_buf_puts(url, t);
        free(t);
    }
    if (settings) {
        pfr_buf_putc(url, '&');
        pfr_buf_puts(url, settings);
    }
    return pfr_buf_cstr(url) ? 0 : -ENOMEM;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return false;
    return true;
}

/* An error answer: its exception code says whether it is about the rows (ch_error_codes.c). */
static void judge_error(struct ch_conn *k, const pfr_http_resp *resp, const char *code,
                        pfr_sink_result *r)
{
    if (r->outcome == PFR_OUT_SINK && pfr_outcome_of_status(resp->status) == PFR_OUT_REJECT)
        return; /* a page, not ClickHouse's answer (sink.c) */
    long ec = pfr_ch_exception_code(code, resp->body);
    if (!ec && resp->status == 400) {
        /* ClickHouse names every error it answers (X-ClickHouse-Exception-Code, "Code: N.
         * DB::Exception"): a bare 400 is another server's, and the same for every insert. */
        size_t n = strlen(r->message);
        snprintf(r->message + n, sizeof(r->message) - n,
                 " (no ClickHouse exception code: not ClickHouse's answer about the rows; check "
                 "the URL's scheme http/https and its port)");
        r->outcome = PFR_OUT_SINK;
        return;
    }
    switch (pfr_ch_verdict_of(resp->status, ec)) {
    case PFR_CH_DATA:
        r->outcome = PFR_OUT_REJECT;
        r->split = true; /* one bad chunk may spoil the insert: narrow it down */
        break;
    case PFR_CH_SCHEMA:
        k->schema = true; /* check the tables again (create them), then wait */
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

/* One request on connection k; r gets the outcome. settings: more URL parameters (query
 * settings), or NULL. data: the body (NULL: none; a stream comes gzip'd already when the sink
 * compresses). Answers of SELECTs go to *out (malloc'ed) when out != NULL.
 * An INSERT or DDL that answers 200 must answer nothing more: anything else is not ClickHouse
 * (or an exception streamed after the status), and the data may not be stored. */
/* The answer's headers the sink reads: kept[0] is the exception code (ch_error_codes.h). */
static const char *const ch_answer_headers[] = {"X-ClickHouse-Exception-Code"};

static void ch_request(struct ch_sink *c, struct ch_conn *k, const char *query, const char *token,
                       const char *settings, bool with_db, const struct ch_body *data, char **out,
                       pfr_sink_result *r)
{
    pfr_sink *s = &c->base;
    pfr_buf *url = &k->url;
    if (build_url(c, url, query, token, settings, with_db) < 0) {
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "out of memory");
        return;
    }
    const char *headers[5];
    size_t nh = 0;
    /* Not curl's default (form data): the body is a statement or rows (Native). */
    headers[nh++] =
        data ? "Content-Type: application/octet-stream" : "Content-Type: text/plain; charset=utf-8";
    if (!c->cc->basic_auth) {
        headers[nh++] = c->user_hdr;
        if (c->key_hdr)
            headers[nh++] = c->key_hdr;
    }
    pfr_buf gzb = {0};
    if (data && c->cc->compress) {
        if (!data->read && pfr_gzip(data->data, data->len, s->conf->compress_level, &gzb) < 0) {
            pfr_buf_free(&gzb);
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "out of memory");
            return;
        }
        headers[nh++] = "Content-Encoding: gzip";
    }
    /* Statements without data go in the body of a POST (GET is read-only for ClickHouse). */
    pfr_http_req req = {.url = (const char *)url->data,
                        .headers = headers,
                        .nheaders = nh,
                        .keep_headers = ch_answer_headers,
                        .nkeep_headers = 1};
    req.body = gzb.len ? gzb.data : data ? data->data : (const void *)"";
    req.body_len = gzb.len ? gzb.len : data ? data->len : 0;
    if (data && data->read) {
        req.read = data->read;
        req.read_ctx = data->ctx;
    }
    if (c->cc->basic_auth) {
        req.basic_user = c->cc->user;
        req.basic_password = s->conf->api_key;
    }
    pfr_http_resp resp;
    enum pfr_outcome t = pfr_http_do(k->http, &req, &resp);
    pfr_buf_free(&gzb);
    pfr_sink_result_from_http(r, t, &resp);
    const char *code = resp.kept[0]; /* X-ClickHouse-Exception-Code */
    if (r->outcome == PFR_OUT_OK) {
        if (code[0] || (!out && !blank(resp.body, resp.body_len))) {
            snprintf(r->message, sizeof(r->message),
                     "HTTP %ld but the answer is not a stored insert (%s%.16s%.300s): will retry",
                     resp.status, code[0] ? "exception " : "", code, resp.quote);
            r->outcome = PFR_OUT_RETRY;
        } else if (out) {
            *out = resp.body;
            resp.body = NULL;
        }
    } else if (resp.status) {
        judge_error(k, &resp, code, r);
    }
    pfr_http_resp_free(&resp);
}

/* ---- tables ---- */

static void ddl(struct ch_sink *c, pfr_buf *b, int which)
{
    const pfr_ch_conf *k = c->cc;
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
    if (strcmp(c->cc->database, "default")) {
        pfr_buf_printf(&q, "CREATE DATABASE IF NOT EXISTS %s", c->cc->database);
        if (q.oom) {
            fail_oom(r);
            return false;
        }
        ch_request(c, &c->conn[0], pfr_buf_cstr(&q), NULL, NULL, false, NULL, NULL, r);
    }
    for (int i = 0; i < 4 && r->outcome == PFR_OUT_OK; i++) {
        ddl(c, &q, i);
        if (q.oom || !pfr_buf_cstr(&q)) {
            fail_oom(r);
            break;
        }
        ch_request(c, &c->conn[0], (const char *)q.data, NULL, NULL, true, NULL, NULL, r);
    }
    pfr_buf_free(&q);
    if (r->outcome != PFR_OUT_OK) {
        explain(r, "creating tables");
        return false;
    }
    return true;
}

/* The database's tables and the server's kind (ch_schema.h) into *l; *ans keeps the answer
 * (malloc'ed) for the tables' engines. Asked without the database parameter: it may not exist
 * yet. */
static bool survey(struct ch_sink *c, char **ans, pfr_ch_layout *l, pfr_sink_result *r)
{
    pfr_buf q = {0};
    if (pfr_ch_survey_query(c->cc->database, &q) < 0) {
        pfr_buf_free(&q);
        fail_oom(r);
        return false;
    }
    ch_request(c, &c->conn[0], (const char *)q.data, NULL, NULL, false, NULL, ans, r);
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
                 c->cc->database, why);
        return false;
    }
    return create_tables(c, r);
}

static bool check_columns(struct ch_sink *c, pfr_sink_result *r)
{
    char *ans = NULL, why[256];
    ch_request(c, &c->conn[0],
               "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() "
               "AND table IN ('profiling_samples', 'profiling_stacks') ORDER BY table, name "
               "FORMAT TabSeparated",
               NULL, NULL, true, NULL, &ans, r);
    if (r->outcome != PFR_OUT_OK)
        return false;
    bool ok = pfr_ch_check_columns(ans, why, sizeof(why));
    free(ans);
    if (!ok) {
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "tables in database %s: %s", c->cc->database, why);
    }
    return ok;
}

/* Inserts retried after a lost answer must not double: a plain MergeTree needs a deduplication
 * window. ans: the survey's answer. A warning for the log goes to notice. */
static bool check_dedup(struct ch_sink *c, const char *ans, char *notice, size_t noticelen,
                        pfr_sink_result *r)
{
    const pfr_ch_conf *k = c->cc;
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
                ch_request(c, &c->conn[0], qs, NULL, NULL, true, NULL, NULL, r);
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
    int rc = ch_conns(c);
    if (rc) {
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "cannot create an HTTP client: %s", strerror(-rc));
        return;
    }
    c->conn[0].schema = false;
    if (c->prepared)
        return;
    char *ans = NULL, notice[sizeof(r->message)] = "";
    pfr_ch_layout l;
    bool ok = survey(c, &ans, &l, r);
    if (ok && c->cc->create_tables && !all_tables(&l)) {
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

/* m as shipped: *tmp, with the sink's service_prefix before its service, when there is one,
 * and the Start of an averaged type's instance (pfr_coroot_start_shift). NULL on -ENOMEM. */
static const pfr_chunk_meta *shipped(struct ch_sink *c, const pfr_chunk_meta *m,
                                     pfr_chunk_meta *tmp)
{
    const char *prefix = c->base.conf->service_prefix;
    int64_t shift = pfr_coroot_start_shift(m);
    /* no service: the encoder says so */
    bool named = prefix && prefix[0] && m->service && m->service[0];
    if (!named && !shift)
        return m;
    *tmp = *m;
    tmp->start_ns += shift;
    if (named && !(tmp->service = pfr_sink_service_name(prefix, m->service, &c->name)))
        return NULL;
    return tmp;
}

static bool ch_ships(const pfr_sink *s, const pfr_chunk_meta *m)
{
    return pfr_coroot_ships(s->conf, ((const struct ch_sink *)s)->units, m);
}

static int ch_check(const pfr_sink *s, const pfr_chunk_meta *m, char *why, size_t whylen)
{
    (void)s;
    if (m->service && m->service[0])
        return 0;
    snprintf(why, whylen, "chunk %lld has no service name", (long long)m->id);
    return -EINVAL;
}

/* By service name (where both tables' sort keys start; the service_prefix, the same for every
 * chunk, keeps the order), then as the ring has them. */
static int order_cmp(const void *a, const void *b, void *ctx)
{
    const pfr_chunksrc *src = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int d = strcmp(pfr_chunksrc_service(src, x), pfr_chunksrc_service(src, y));
    return d ? d : (x > y) - (x < y);
}

static int make_order(struct ch_sink *c, const pfr_chunksrc *src)
{
    if (src->n > UINT32_MAX || PFR_VEC_RESERVE(c->order, c->cap_order, src->n + 1) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < src->n; i++)
        c->order[i] = (uint32_t)i;
    qsort_r(c->order, src->n, sizeof(*c->order), order_cmp, (void *)src);
    return 0;
}

/* ---- streamed inserts ----
 * The batch is read once, chunk by chunk in c->order. Its stack rows and its sample rows go to
 * an insert each, streamed on a connection of its own by a thread of its own (its sender), block
 * by block: the reading thread renders a table's rows once they make a block and hands the
 * block over. The samples' body ends only once the stacks' insert was answered: a sample row
 * never points at a stack that is not stored. ClickHouse squashes each insert's blocks into one
 * while they stay below min_insert_block_size_bytes: four times the batch's size, as rows take
 * more room in memory than in a Native block. */

enum { STACKS, SAMPLES, NTABLES };

/* One table's insert: its block (made by the reading thread, sent by the sender: one buffer,
 * so a table holds one block besides its rows) and what makes it. */
struct table {
    struct ch_sink *c;
    struct ch_conn *conn;
    bool stacks;
    char query[160], settings[192];
    const char *token; /* NULL: none */
    /* shared with the sender, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pfr_buf buf; /* the block: the sender's while ready, else the reading thread's */
    size_t off;  /* of buf, gone */
    bool ready;  /* buf holds a block to send */
    bool end;    /* no more blocks: the body ends once buf is out */
    bool abort;  /* give the request up */
    bool closed; /* the request is over: nothing more is read */
    /* the sender's */
    pthread_t thread;
    bool started;
    pfr_sink_result r;
    /* the reading thread's */
    pfr_buf raw;         /* the block before gzip, when the sink compresses */
    pfr_gzip_stream gz;  /* the body's gzip */
    uint64_t body_bytes; /* rendered, before compression */
    uint64_t svc_from;   /* the block's bytes when the current service started */
    uint64_t svc_bytes;  /* the bytes the last whole service added */
};

/* http.h's read: the blocks the reading thread hands over, as they come; 0 (the body's end)
 * only once it said there are no more. */
static ptrdiff_t table_read(void *ctx, void *buf, size_t cap)
{
    struct table *t = ctx;
    ptrdiff_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->abort) {
            n = -1;
            break;
        }
        if (t->ready && t->off < t->buf.len) {
            size_t k = t->buf.len - t->off < cap ? t->buf.len - t->off : cap;
            memcpy(buf, t->buf.data + t->off, k);
            t->off += k;
            n = (ptrdiff_t)k;
        }
        if (t->ready && t->off == t->buf.len) {
            t->ready = false;
            pthread_cond_signal(&t->cv);
        }
        if (n || t->end)
            break;
        pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

static void *sender_main(void *arg)
{
    struct table *t = arg;
    struct ch_body body = {.read = table_read, .ctx = t};
    ch_request(t->c, t->conn, t->query, t->token, t->settings, true, &body, NULL, &t->r);
    pthread_mutex_lock(&t->mu);
    t->closed = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void table_init(struct table *t, struct ch_sink *c, bool stacks, const char *token)
{
    bool dist = stacks ? c->dist_stacks : c->dist_samples;
    const char *name = stacks ? "profiling_stacks" : "profiling_samples";
    *t = (struct table){.c = c, .conn = &c->conn[stacks ? 0 : 1], .stacks = stacks};
    t->token = stacks ? NULL : token;
    snprintf(t->query, sizeof(t->query), "INSERT INTO %s%s (%s) FORMAT Native", name,
             dist ? "_distributed" : "",
             stacks ? PFR_CHENC_STACKS_COLUMNS : PFR_CHENC_SAMPLES_COLUMNS);
    uint64_t squash = 4 * c->base.conf->batch.max_bytes;
    if (squash < (256ull << 20))
        squash = 256ull << 20;
    /* The stack blocks hold one row per (ServiceName, Hash) already (ch_columns.c), so ClickHouse
     * need not merge them on insert (optimize_on_insert, ReplacingMergeTree only): the part is
     * the same, for ~10 % less ClickHouse CPU per insert. Through a Distributed table the insert
     * returns once every shard stored its rows (insert_distributed_sync): a retry then finds
     * each shard's part under the same token, as the rows split alike every time. */
    snprintf(t->settings, sizeof(t->settings),
             "%smin_insert_block_size_rows=0&min_insert_block_size_bytes=%llu%s",
             stacks ? "optimize_on_insert=0&" : "", (unsigned long long)squash,
             dist ? "&insert_distributed_sync=1" : "");
    pfr_sink_result_reset(&t->r);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
}

/* End t's body (ok) or give it up, and wait for its answer. */
static void table_close(struct table *t, bool ok)
{
    if (!t->started)
        return;
    pthread_mutex_lock(&t->mu);
    if (ok)
        t->end = true;
    else
        t->abort = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    t->started = false;
}

static void table_free(struct table *t)
{
    table_close(t, false);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    pfr_gzip_stream_end(&t->gz);
    pfr_buf_free(&t->buf);
    pfr_buf_free(&t->raw);
}

/* Take t->buf for the next block, once its sender sent the last one. 0, or -EPIPE: the
 * request is over already. */
static int table_claim(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    while (t->ready && !t->closed)
        pthread_cond_wait(&t->cv, &t->mu);
    int rc = t->closed ? -EPIPE : 0;
    pthread_mutex_unlock(&t->mu);
    if (!rc)
        pfr_buf_reset(&t->buf);
    return rc;
}

/* Hand the block in t->buf to t's sender (started with the first block). 0 or -EAGAIN (no
 * thread). */
static int table_post(struct table *t)
{
    if (!t->started) {
        if (pthread_create(&t->thread, NULL, sender_main, t) != 0)
            return -EAGAIN;
        t->started = true;
    }
    pthread_mutex_lock(&t->mu);
    t->ready = true;
    t->off = 0;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* What the reading thread keeps of a batch. */
struct batchio {
    struct ch_sink *c;
    pfr_chunksrc *src;
    size_t next; /* the next chunk to read, in c->order */
    struct table t[NTABLES];
    const char *what;     /* what the reading thread was doing when it failed */
    struct table *closed; /* the table whose request ended before its body did */
    pfr_sink_result q;    /* the questions about LastSeen: the failed one's outcome */
    bool q_failed;
};

static int add_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    struct batchio *b = ctx;
    pfr_chunk_meta tmp;
    const pfr_chunk_meta *sm = shipped(b->c, m, &tmp);
    return sm ? pfr_ch_rows_add_samples(b->c->enc, sm, v) : -ENOMEM;
}

/* Whether t's rows go before the next chunk: they make a block; or the next chunk starts
 * another service and the block is half full, or would not hold another service like the last
 * one. A service's rows then stay in one block where they fit, and the squashed block stays in
 * the table's sort order (ClickHouse sorts an insert that is not: ~10 % more of its CPU for the
 * stacks). A block of stacks is three blocks' bytes, and goes at nearly a question's worth of
 * keys too, leaving room for the next chunk's (ch_lastseen.h: a question costs ClickHouse
 * ~10 ms, whatever its keys). */
static bool block_full(const struct batchio *b, struct table *t)
{
    const pfr_ch_columns *cols = pfr_ch_rows_cols(b->c->enc);
    uint64_t n = t->stacks ? cols->est_stacks : cols->est_samples, max = b->c->block_bytes;
    if (t->stacks) {
        if (pfr_ch_columns_stack_rows(cols) >= PFR_CH_LASTSEEN_KEYS * 7 / 8)
            return true;
        max *= 3;
    }
    if (n >= max)
        return true;
    const uint32_t *o = b->c->order;
    if (!b->next || !strcmp(pfr_chunksrc_service(b->src, o[b->next]),
                            pfr_chunksrc_service(b->src, o[b->next - 1])))
        return false;
    t->svc_bytes = n - t->svc_from;
    t->svc_from = n;
    return n >= max / 2 || (n && n + t->svc_bytes > max);
}

/* The block's stack rows that ClickHouse needs (ch_lastseen.h), rendered into *out (empty:
 * none); what it holds of the others is what the encoder counts as written. Asked at every
 * attempt, so a retry leaves out what an attempt whose answer was lost stored. 0, or -EIO with the
 * question's outcome in b->q, or -ENOMEM. */
static int render_new_stacks(struct batchio *b, const pfr_ch_columns *cols, pfr_buf *out)
{
    struct ch_sink *c = b->c;
    const char *table = c->dist_stacks ? "profiling_stacks_distributed" : "profiling_stacks";
    pfr_ch_lastseen *l = NULL;
    pfr_buf q = {0};
    char *ans = NULL, what[128];
    int rc = pfr_ch_lastseen_new(cols, c->cc->stack_refresh_ms * 1000000, &l);
    while (!rc) {
        if ((rc = pfr_ch_lastseen_query(l, table, PFR_CH_LASTSEEN_KEYS, &q)) < 0 || !q.len)
            break;
        /* The query in the body: it may be longer than a URL should be. A rejection (the
         * batch's names or hashes spoiling it) narrows the batch down like the insert's would. */
        struct ch_body body = {.data = q.data, .len = q.len};
        ch_request(c, &c->conn[2], "", NULL, NULL, true, &body, &ans, &b->q);
        if (b->q.outcome != PFR_OUT_OK) {
            explain(&b->q, "asking for the stacks' LastSeen");
            rc = -EIO;
            break;
        }
        long n = pfr_ch_lastseen_apply(l, ans, what, sizeof(what));
        free(ans);
        ans = NULL;
        if (n < 0) {
            b->q.outcome = PFR_OUT_RETRY;
            snprintf(b->q.message, sizeof(b->q.message), "asking for the stacks' LastSeen: %s",
                     what);
            rc = -EIO;
        }
    }
    pfr_buf_free(&q);
    if (!rc)
        rc = pfr_ch_columns_render_stacks(cols, PFR_CH_NATIVE, pfr_ch_lastseen_skip(l), out);
    for (size_t i = 0; !rc && i < cols->nstrows; i++)
        if (pfr_ch_lastseen_skip(l)[i])
            pfr_ch_rows_stored(c->enc, cols->strows[i].tag, pfr_ch_lastseen_stored(l)[i]);
    pfr_ch_lastseen_free(l);
    b->q_failed = rc == -EIO;
    return rc;
}

/* Render t's rows into a block (dropping them from the encoder) and hand it over; last: the
 * batch's last block of t. Blocks without rows make nothing, but the end of a gzip'd body. */
static int table_flush(struct batchio *b, struct table *t, bool last)
{
    struct ch_sink *c = b->c;
    pfr_ch_columns *cols = pfr_ch_rows_cols(c->enc);
    bool gz = c->cc->compress;
    pfr_buf *block = gz ? &t->raw : &t->buf;
    b->what = "sending the rows";
    int rc = table_claim(t);
    if (rc == -EPIPE)
        b->closed = t;
    b->what = "encoding the rows";
    if (!rc)
        rc = t->stacks ? render_new_stacks(b, cols, block)
                       : pfr_ch_columns_render_samples(cols, PFR_CH_NATIVE, block);
    if (t->stacks)
        pfr_ch_columns_reset_stacks(cols);
    else
        pfr_ch_columns_reset_samples(cols);
    t->svc_from = 0;
    if (rc < 0)
        return rc;
    t->body_bytes += block->len;
    if (!block->len && !(gz && last && t->body_bytes))
        return 0; /* nothing to send (a gzip'd body still needs its end) */
    if (gz) {
        rc = pfr_gzip_stream_put(&t->gz, c->base.conf->compress_level, t->raw.data, t->raw.len,
                                 last, &t->buf);
        pfr_buf_reset(&t->raw);
        if (rc < 0 || !t->buf.len)
            return rc;
    }
    b->what = "sending the rows";
    return table_post(t);
}

/* Read the batch into the two inserts, block by block. 0 or a negative errno. */
static int read_batch(struct batchio *b)
{
    int rc = 0;
    for (b->next = 0; !rc && b->next < b->src->n; b->next++) {
        for (int k = 0; !rc && k < NTABLES; k++)
            if (block_full(b, &b->t[k]))
                rc = table_flush(b, &b->t[k], false);
        b->what = "reading the ring";
        if (!rc)
            rc = pfr_chunksrc_read_samples(b->src, b->c->order[b->next], add_cb, b);
    }
    for (int k = 0; !rc && k < NTABLES; k++)
        rc = table_flush(b, &b->t[k], true);
    return rc;
}

/* The outcome of a batch that failed while it was read (rc). */
static void read_failed(struct batchio *b, int rc, pfr_sink_result *r)
{
    if (b->q_failed) {
        *r = b->q;
        return;
    }
    r->outcome = PFR_OUT_RETRY;
    r->status = 0;
    snprintf(r->message, sizeof(r->message), "%s for the batch: %s", b->what, strerror(-rc));
}

/* A table's answer into r (its bytes are counted apart). */
static void take_answer(pfr_sink_result *r, const pfr_sink_result *a)
{
    uint64_t sent = r->bytes_sent, body = r->body_bytes;
    *r = *a;
    r->bytes_sent = sent;
    r->body_bytes = body;
}

/* Stacks counted as written once stored: a retry after the samples failed sends only the
 * stacks that moved on. */
static void ch_send(pfr_sink *s, pfr_chunksrc *src, const char *token, pfr_sink_result *r)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_sink_result_reset(r);
    ch_prepare(s, r);
    if (r->outcome != PFR_OUT_OK)
        return;
    pfr_sink_result_reset(r);
    if (make_order(c, src) < 0) {
        fail_oom(r);
        return;
    }
    struct batchio b = {.c = c, .src = src};
    pfr_sink_result_reset(&b.q);
    table_init(&b.t[STACKS], c, true, NULL);
    table_init(&b.t[SAMPLES], c, false, token);
    pfr_ch_rows_begin(c->enc);
    int rc = read_batch(&b);
    struct table *st = &b.t[STACKS], *sa = &b.t[SAMPLES];
    table_close(st, !rc);
    bool stacks_ok = !rc && st->r.outcome == PFR_OUT_OK;
    table_close(sa, stacks_ok);
    if (stacks_ok)
        pfr_ch_rows_commit(c->enc);
    else
        pfr_ch_rows_discard(c->enc);
    pfr_ch_columns_reset(pfr_ch_rows_cols(c->enc));
    r->bytes_sent = st->r.bytes_sent + sa->r.bytes_sent + b.q.bytes_sent;
    r->body_bytes = st->body_bytes + sa->body_bytes;
    if (b.closed) {
        take_answer(r, &b.closed->r);
        if (r->outcome == PFR_OUT_OK) { /* not ClickHouse's way: the rows may not be stored */
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message),
                     "HTTP %ld before the insert's rows were all sent: will retry", r->status);
        }
    } else if (rc) {
        read_failed(&b, rc, r);
    } else {
        take_answer(r, st->r.outcome != PFR_OUT_OK ? &st->r : &sa->r);
    }
    for (int k = 0; k < 3; k++) {
        if (c->conn[k].schema)
            c->prepared = false; /* check the tables again (create them), then wait */
        c->conn[k].schema = false;
    }
    table_free(st);
    table_free(sa);
    r->ndone = 0;
    r->one_chunk = false;
}

static void ch_free(pfr_sink *s)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_ch_rows_free(c->enc);
    free(c->base_url);
    free(c->db_param);
    free(c->user_hdr);
    if (c->key_hdr) {
        explicit_bzero(c->key_hdr, strlen(c->key_hdr));
        free(c->key_hdr);
    }
    for (int k = 0; k < 3; k++)
        pfr_buf_free(&c->conn[k].url);
    for (int k = 1; k < 3; k++)
        pfr_http_free(c->conn[k].http);
    pfr_buf_free(&c->name);
    free(c->order);
    pfr_unit_cache_free(c->units);
    free(c);
}

/* SELECT 1: a ClickHouse that answers it refuses rows for what they are. */
static void ch_probe(pfr_sink *s, pfr_sink_result *r)
{
    struct ch_sink *c = (struct ch_sink *)s;
    char *ans = NULL;
    pfr_sink_result_reset(r);
    ch_request(c, &c->conn[0], "SELECT 1", NULL, NULL, false, NULL, &ans, r);
    free(ans);
}

static const struct pfr_sink_ops clickhouse_ops = {
    .kind = "clickhouse",
    /* Native rows per byte of a chunk's stored samples (pfr_testgen's rings: Coroot's stack
     * strings and repeated labels against the ring's dictionaries and LZ4). */
    .stored_ratio = 70,
    .prepare = ch_prepare,
    .check = ch_check,
    .send = ch_send,
    .ships = ch_ships,
    .probe = ch_probe,
    .free = ch_free,
};

static int ch_create(const pfr_sink_conf *conf, pfr_sink **out)
{
    struct ch_sink *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->base.ops = &clickhouse_ops;
    c->base.conf = conf;
    c->cc = conf->kind_conf;
    const pfr_ch_conf *cc = c->cc;
    /* batch_memory: three eighths for the blocks (a sixteenth for the samples', three for the
     * stacks': of each table, its rows and its block; buffers may grow to twice their content),
     * half for the encoder's caches, an eighth for the ring's (pfr_shipper_ring_cache). */
    c->block_bytes = cc->batch_memory / 16;
    pfr_ch_rows_opts eo = {.stack_refresh_ns = cc->stack_refresh_ms * 1000000,
                           .cache_bytes = cc->batch_memory / 2,
                           .format = PFR_CH_NATIVE};
    int rc = pfr_ch_rows_new(&eo, &c->enc);
    size_t n = strlen(conf->url);
    while (n && conf->url[n - 1] == '/')
        n--;
    if (!rc) {
        c->base_url = strndup(conf->url, n);
        c->db_param = pfr_url_escape(cc->database ? cc->database : "default");
        if (asprintf(&c->user_hdr, "X-ClickHouse-User: %s", cc->user ? cc->user : "default") < 0)
            c->user_hdr = NULL;
        if (conf->api_key && asprintf(&c->key_hdr, "X-ClickHouse-Key: %s", conf->api_key) < 0)
            rc = -ENOMEM, c->key_hdr = NULL;
        if (!c->base_url || !c->db_param || !c->user_hdr)
            rc = -ENOMEM;
    }
    if (!rc)
        rc = pfr_coroot_units_new(conf, &c->units);
    if (rc) {
        ch_free(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}

const pfr_sink_kind pfr_sink_clickhouse = {
    .name = "clickhouse",
    .settings = &pfr_ch_settings,
    .conf_size = sizeof(pfr_ch_conf),
    .defaults = pfr_ch_defaults,
    .check = pfr_ch_check,
    .secrets = pfr_ch_secrets,
    .ring_cache = pfr_ch_ring_cache,
    .status_detail = pfr_ch_status_detail,
    .sample = "[sink clickhouse]\n"
              "type = clickhouse\n"
              "url = https://clickhouse.example.com:8443\n"
              "database = coroot_project1\n"
              "password_file = /run/credentials/pfr-shipper.service/pfr_clickhouse-password\n",
    .create = ch_create,
};
