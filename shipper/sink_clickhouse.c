/* The clickhouse sink: rows of Coroot's profiling_samples and profiling_stacks through
 * ClickHouse's HTTP interface, INSERT ... FORMAT Native (one block per table and batch). Each batch
 * carries insert_deduplication_token (the engine derives it from the batch's chunk id range),
 * so an insert retried after a lost answer is dropped by ClickHouse instead of doubling values:
 * for a plain MergeTree that needs the table setting non_replicated_deduplication_window > 0,
 * which the tables we create have, and which prepare() checks on existing tables. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ch_answer.h"
#include "chenc.h"
#include "coroot_fmt.h"
#include "sink.h"

struct ch_sink {
    pfr_sink base;
    pfr_chenc *enc;
    bool prepared;
    bool batch_open;
    bool sealed;                   /* a batch is in flight: its bodies are below */
    pfr_buf fl_samples, fl_stacks; /* the bodies of the batch in flight */
    char *base_url;                /* without trailing '/' */
    char *db_param;                /* escaped database name */
    char *user_hdr;                /* X-ClickHouse-User: ... */
    char *key_hdr;                 /* X-ClickHouse-Key: ... (secret) */
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

/* The server's exception code, from the header or the "Code: N." at the start of the body. */
static long ch_code(const pfr_http_resp *resp)
{
    if (resp->ch_exception_code[0])
        return strtol(resp->ch_exception_code, NULL, 10);
    const char *b = resp->body ? strstr(resp->body, "Code: ") : NULL;
    return b ? strtol(b + 6, NULL, 10) : 0;
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
            char snip[300];
            pfr_http_snippet(resp.body, resp.body_len, snip, sizeof(snip));
            snprintf(r->message, sizeof(r->message),
                     "HTTP %ld but the answer is not a stored insert (%s%s%s): will retry",
                     resp.status, resp.ch_exception_code[0] ? "exception " : "",
                     resp.ch_exception_code, snip[0] ? snip : "");
            r->outcome = PFR_OUT_RETRY;
        } else if (out) {
            *out = resp.body;
            resp.body = NULL;
        }
    } else if (r->outcome == PFR_OUT_REJECT) {
        long code = ch_code(&resp);
        switch (code) {
        case 60: /* UNKNOWN_TABLE */
        case 81: /* UNKNOWN_DATABASE */
        case 16: /* NO_SUCH_COLUMN_IN_TABLE */
        case 47: /* UNKNOWN_IDENTIFIER */
            /* The tables, not the chunks: check them again and wait. */
            c->prepared = false;
            r->outcome = PFR_OUT_RETRY;
            break;
        case 192:             /* UNKNOWN_USER */
        case 193:             /* WRONG_PASSWORD */
        case 194:             /* REQUIRED_PASSWORD */
        case 497:             /* ACCESS_DENIED */
        case 516:             /* AUTHENTICATION_FAILED */
            r->split = false; /* every chunk would fail alike */
            break;
        default:
            r->split = true;
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

static bool create_tables(struct ch_sink *c, pfr_sink_result *r)
{
    pfr_buf q = {0};
    if (strcmp(c->base.conf->database, "default")) {
        pfr_buf_printf(&q, "CREATE DATABASE IF NOT EXISTS %s", c->base.conf->database);
        if (q.oom) {
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "out of memory");
            return false;
        }
        ch_request(c, pfr_buf_cstr(&q), NULL, NULL, false, NULL, 0, NULL, r);
    }
    for (int i = 0; i < 4 && r->outcome == PFR_OUT_OK; i++) {
        ddl(c, &q, i);
        if (q.oom || !pfr_buf_cstr(&q)) {
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "out of memory");
            break;
        }
        ch_request(c, (const char *)q.data, NULL, NULL, true, NULL, 0, NULL, r);
    }
    pfr_buf_free(&q);
    if (r->outcome != PFR_OUT_OK) {
        char m[sizeof(r->message)];
        snprintf(m, sizeof(m), "%s", r->message);
        snprintf(r->message, sizeof(r->message), "creating tables: %.480s", m);
        return false;
    }
    return true;
}

static void ch_prepare(pfr_sink *s, pfr_sink_result *r)
{
    struct ch_sink *c = (struct ch_sink *)s;
    pfr_sink_result_reset(r);
    if (c->prepared)
        return;
    if (s->conf->create_tables && !create_tables(c, r))
        return;
    char *ans = NULL;
    ch_request(c,
               "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() "
               "AND table IN ('profiling_samples', 'profiling_stacks') ORDER BY table, name "
               "FORMAT TabSeparated",
               NULL, NULL, true, NULL, 0, &ans, r);
    if (r->outcome != PFR_OUT_OK)
        return;
    char why[256];
    if (!pfr_ch_check_columns(ans, why, sizeof(why))) {
        free(ans);
        r->outcome = PFR_OUT_RETRY;
        snprintf(r->message, sizeof(r->message), "tables in database %s: %s", s->conf->database,
                 why);
        return;
    }
    free(ans);
    ans = NULL;
    ch_request(c,
               "SELECT name, engine, engine_full FROM system.tables WHERE database = "
               "currentDatabase() AND name IN ('profiling_samples', 'profiling_stacks') "
               "FORMAT TabSeparated",
               NULL, NULL, true, NULL, 0, &ans, r);
    if (r->outcome != PFR_OUT_OK)
        return;
    const char *tables[] = {"profiling_samples", "profiling_stacks"};
    char notice[sizeof(r->message)] = "";
    for (int i = 0; i < 2; i++) {
        bool replicated, found;
        long long w = pfr_ch_dedup_window(ans, tables[i], &replicated, &found);
        if (!found) {
            free(ans);
            r->outcome = PFR_OUT_RETRY;
            snprintf(r->message, sizeof(r->message), "system.tables does not list %s", tables[i]);
            return;
        }
        if (replicated || w > 0)
            continue;
        if (s->conf->create_tables) {
            pfr_buf q = {0};
            pfr_buf_printf(
                &q, "ALTER TABLE %s MODIFY SETTING non_replicated_deduplication_window = %llu",
                tables[i], (unsigned long long)s->conf->dedup_window);
            const char *qs = pfr_buf_cstr(&q);
            if (qs)
                ch_request(c, qs, NULL, NULL, true, NULL, 0, NULL, r);
            pfr_buf_free(&q);
            if (!qs || r->outcome != PFR_OUT_OK) {
                free(ans);
                r->outcome = PFR_OUT_RETRY;
                return;
            }
        } else if (!notice[0]) {
            snprintf(notice, sizeof(notice),
                     "%s.%s has no non_replicated_deduplication_window: an insert retried after "
                     "a lost answer may double values (set it, or let the shipper create the "
                     "tables)",
                     s->conf->database, tables[i]);
        }
    }
    free(ans);
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

static int ch_add(pfr_sink *s, const pfr_chunk_meta *m, const pfr_profile *p, char *why,
                  size_t whylen)
{
    struct ch_sink *c = (struct ch_sink *)s;
    ch_open(c);
    int rc = pfr_chenc_add(c->enc, m, p);
    if (rc == -EINVAL)
        snprintf(why, whylen, "chunk %lld has no service name", (long long)m->id);
    return rc;
}

static int ch_add_samples(pfr_sink *s, const pfr_chunk_meta *m, const pfr_chunk_samples *v,
                          char *why, size_t whylen)
{
    struct ch_sink *c = (struct ch_sink *)s;
    ch_open(c);
    int rc = pfr_chenc_add_samples(c->enc, m, v);
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
    const pfr_buf *st = &c->fl_stacks, *sa = &c->fl_samples;
    /* The stack block holds one row per (ServiceName, Hash) already (chcols.c), so ClickHouse
     * need not merge it on insert (optimize_on_insert, ReplacingMergeTree only): the part is
     * the same, for ~10 % less ClickHouse CPU per insert. Both blocks come sorted by the
     * tables' ORDER BY (ClickHouse skips its sort). */
    if (st->len)
        ch_request(c, "INSERT INTO profiling_stacks (" PFR_CHENC_STACKS_COLUMNS ") FORMAT Native",
                   token, "optimize_on_insert=0", true, st->data, st->len, NULL, r);
    if (r->outcome == PFR_OUT_OK && sa->len)
        ch_request(c, "INSERT INTO profiling_samples (" PFR_CHENC_SAMPLES_COLUMNS ") FORMAT Native",
                   token, NULL, true, sa->data, sa->len, NULL, r);
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
        pfr_buf_free(&c->fl_stacks);
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
        pfr_buf_free(&c->fl_stacks);
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
    pfr_buf_free(&c->fl_stacks);
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
