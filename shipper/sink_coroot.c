/* The coroot sink: POST {url}/v1/profiles?service.name=...&<labels>, one gzip'd pprof per
 * chunk, X-API-Key. Coroot reads End = time_nanos, so each body is re-timed to the chunk's end.
 * Coroot has no idempotency key: a request whose answer was lost is sent again (at least once).
 * Answers: 400 is about the profile (set aside); 404 (unknown key, wrong path), 401 and 403 are
 * about the sink (retried, nothing set aside): retry.c's status table. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coroot_fmt.h"
#include "sink.h"
#include "svcname.h"

struct item {
    int64_t id;
    char *query;
    uint8_t *body;
    size_t len;
};

struct coroot_sink {
    pfr_sink base;
    char *endpoint;   /* .../v1/profiles */
    char *key_header; /* "X-API-Key: ..." (secret) */
    struct item *items;
    size_t n, cap;
    uint64_t bytes;
    pfr_buf url;
    pfr_buf name; /* a chunk's service name as shipped (service_prefix) */
};

static void items_clear(struct coroot_sink *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].query);
        free(c->items[i].body);
    }
    c->n = 0;
    c->bytes = 0;
}

static void c_prepare(pfr_sink *s, pfr_sink_result *r)
{
    (void)s;
    pfr_sink_result_reset(r);
}

static int add_param(pfr_buf *q, const char *k, const char *v)
{
    char *ek = pfr_url_escape(k), *ev = pfr_url_escape(v);
    if (!ek || !ev) {
        free(ek);
        free(ev);
        return -ENOMEM;
    }
    if (q->len)
        pfr_buf_putc(q, '&');
    pfr_buf_puts(q, ek);
    pfr_buf_putc(q, '=');
    pfr_buf_puts(q, ev);
    free(ek);
    free(ev);
    return q->oom ? -ENOMEM : 0;
}

static int c_add(pfr_sink *s, const pfr_chunk_meta *m, const pfr_profile *p, char *why,
                 size_t whylen)
{
    struct coroot_sink *c = (struct coroot_sink *)s;
    if (!m->service || !m->service[0]) {
        snprintf(why, whylen, "chunk %lld has no service name", (long long)m->id);
        return -EINVAL;
    }
    if (m->end_ns <= m->start_ns) {
        snprintf(why, whylen, "chunk %lld has an empty time range", (long long)m->id);
        return -EINVAL;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct item *n = realloc(c->items, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        c->items = n;
        c->cap = cap;
    }
    const char *service = pfr_svcname(s->conf->service_prefix, m->service, &c->name);
    if (!service)
        return -ENOMEM;
    pfr_buf q = {0};
    int rc = add_param(&q, "service.name", service);
    for (size_t i = 0; !rc && i < m->nlabels; i++) {
        /* service.name comes from the chunk; a label of that name would make it two-valued,
         * and Coroot ignores multi-valued parameters. */
        if (strcmp(m->labels[i].key, "service.name"))
            rc = add_param(&q, m->labels[i].key, m->labels[i].value);
    }
    const char *qs = rc ? NULL : pfr_buf_cstr(&q);
    if (!qs) {
        pfr_buf_free(&q);
        return -ENOMEM;
    }
    uint8_t *raw = NULL, *body = NULL;
    size_t rawlen = 0, len = 0;
    rc = pfr_profile_encode(p, false, &raw, &rawlen);
    if (!rc)
        rc = pfr_pprof_retime(raw, rawlen, m->end_ns, m->end_ns - m->start_ns, true,
                              s->conf->compress_level, &body, &len);
    free(raw);
    if (rc) {
        pfr_buf_free(&q);
        if (rc == -ENOMEM)
            return rc;
        snprintf(why, whylen, "chunk %lld: cannot encode its profile (%s)", (long long)m->id,
                 strerror(-rc));
        return -EINVAL;
    }
    c->items[c->n++] =
        (struct item){.id = m->id, .query = (char *)q.data, .body = body, .len = len};
    c->bytes += len + q.len;
    return 0;
}

static uint64_t c_batch_bytes(const pfr_sink *s)
{
    return ((const struct coroot_sink *)s)->bytes;
}

/* A 200 that is not Coroot's: a captive portal, a proxy's page, a wrong URL. Coroot answers a
 * stored profile with an empty body. */
static bool lying(const pfr_http_resp *resp, char *why, size_t whylen)
{
    if (!strncasecmp(resp->content_type, "text/html", 9)) {
        snprintf(why, whylen, "HTTP %ld with an HTML page: not Coroot's answer", resp->status);
        return true;
    }
    size_t i = 0;
    while (i < resp->body_len && isspace((unsigned char)resp->body[i]))
        i++;
    if (i < resp->body_len && (resp->body[i] == '<' || resp->body_len - i > 256)) {
        snprintf(why, whylen, "HTTP %ld with an unexpected body (%.160s): not Coroot's answer",
                 resp->status, resp->quote);
        return true;
    }
    return false;
}

/* What Coroot means by a status that concerns the sink, not the profile (appended to r's
 * message, which status and the log show). */
static void explain(pfr_sink_result *r)
{
    const char *hint = NULL;
    if (r->status == 404)
        hint = "Coroot: unknown API key, or the URL is not Coroot's";
    else if (r->status == 401 || r->status == 403)
        hint = "check the API key, or a proxy's credentials";
    else if (r->status >= 300 && r->status < 400)
        hint = "a redirect: give the URL it points to (https?)";
    if (!hint)
        return;
    size_t n = strlen(r->message);
    snprintf(r->message + n, sizeof(r->message) - n, " (%s)", hint);
}

static void c_send(pfr_sink *s, const char *token, pfr_sink_result *r)
{
    (void)token;
    struct coroot_sink *c = (struct coroot_sink *)s;
    pfr_sink_result_reset(r);
    const char *headers[] = {c->key_header, "Content-Type: application/octet-stream"};
    for (size_t i = 0; i < c->n; i++) {
        struct item *it = &c->items[i];
        pfr_buf_reset(&c->url);
        pfr_buf_puts(&c->url, c->endpoint);
        pfr_buf_putc(&c->url, '?');
        pfr_buf_puts(&c->url, it->query);
        const char *url = pfr_buf_cstr(&c->url);
        if (!url) {
            r->outcome = PFR_OUT_RETRY;
            r->ndone = i;
            snprintf(r->message, sizeof(r->message), "out of memory");
            return;
        }
        pfr_http_req req = {.url = url,
                            .headers = headers,
                            .nheaders = c->key_header ? 2 : 1,
                            .body = it->body,
                            .body_len = it->len};
        if (!c->key_header)
            req.headers = headers + 1;
        pfr_http_resp resp;
        enum pfr_outcome t = pfr_http_do(s->http, &req, &resp);
        pfr_sink_result_from_http(r, t, &resp);
        if (r->outcome == PFR_OUT_OK && lying(&resp, r->message, sizeof(r->message)))
            r->outcome = PFR_OUT_RETRY;
        if (r->outcome == PFR_OUT_SINK)
            explain(r);
        pfr_http_resp_free(&resp);
        if (r->outcome != PFR_OUT_OK) {
            r->ndone = i;
            r->one_chunk = true;
            return;
        }
    }
    r->ndone = c->n;
}

static void c_commit(pfr_sink *s)
{
    items_clear((struct coroot_sink *)s);
}

static void c_free(pfr_sink *s)
{
    struct coroot_sink *c = (struct coroot_sink *)s;
    items_clear(c);
    free(c->items);
    free(c->endpoint);
    if (c->key_header) {
        explicit_bzero(c->key_header, strlen(c->key_header));
        free(c->key_header);
    }
    pfr_buf_free(&c->url);
    pfr_buf_free(&c->name);
    free(c);
}

static const struct pfr_sink_ops coroot_ops = {
    .kind = "coroot",
    .prepare = c_prepare,
    .add = c_add,
    .batch_bytes = c_batch_bytes,
    .send = c_send,
    .commit = c_commit,
    .discard = c_commit,
    .free = c_free,
};

int pfr_sink_coroot_new(const pfr_sink_conf *conf, pfr_sink **out)
{
    struct coroot_sink *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->base.ops = &coroot_ops;
    c->base.conf = conf;
    size_t n = strlen(conf->url);
    while (n && conf->url[n - 1] == '/')
        n--;
    const char *suffix = "/v1/profiles";
    bool has =
        n >= strlen(suffix) && !strncmp(conf->url + n - strlen(suffix), suffix, strlen(suffix));
    if (asprintf(&c->endpoint, "%.*s%s", (int)n, conf->url, has ? "" : suffix) < 0) {
        c->endpoint = NULL;
        c_free(&c->base);
        return -ENOMEM;
    }
    if (conf->api_key && asprintf(&c->key_header, "X-API-Key: %s", conf->api_key) < 0) {
        c->key_header = NULL;
        c_free(&c->base);
        return -ENOMEM;
    }
    *out = &c->base;
    return 0;
}
