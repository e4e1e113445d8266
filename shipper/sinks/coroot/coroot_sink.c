/* The coroot sink: POST {url}/v1/profiles?service.name=...&<labels>, one gzip'd pprof per
 * chunk, X-API-Key, each encoded from the ring just before it goes (one body held at a time).
 * Coroot reads End = time_nanos, so each body is re-timed to the chunk's end. Coroot has no
 * idempotency key: a request whose answer was lost is sent again (at least once). Answers: 400 is
 * about the profile (set aside), unless it is a page (sink.c) or the answer to a post without
 * service.name too (c_probe); 404 (unknown key, wrong path), 401 and 403 are about the sink
 * (retried, nothing set aside): retry.c's status table. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sinks/coroot_conventions.h"
#include "sink.h"
#include "sinks/coroot/coroot_sink.h"
#include "sinks/service_name.h"

struct coroot_sink {
    pfr_sink base;
    char *endpoint;   /* .../v1/profiles */
    char *key_header; /* "X-API-Key: ..." (secret) */
    pfr_buf url;      /* the endpoint and the chunk's query */
    pfr_buf name;     /* a chunk's service name as shipped (service_prefix) */
    uint8_t *body;    /* the chunk's gzip'd profile */
    size_t len;
    char why[256];         /* why the chunk cannot be encoded */
    pfr_unit_cache *units; /* ship = agent's systemd units (NULL: none looked at) */
};

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

static bool c_ships(const pfr_sink *s, const pfr_chunk_meta *m)
{
    return pfr_coroot_ships(s->conf, ((const struct coroot_sink *)s)->units, m);
}

static int c_check(const pfr_sink *s, const pfr_chunk_meta *m, char *why, size_t whylen)
{
    (void)s;
    if (!m->service || !m->service[0]) {
        snprintf(why, whylen, "chunk %lld has no service name", (long long)m->id);
        return -EINVAL;
    }
    if (m->end_ns <= m->start_ns) {
        snprintf(why, whylen, "chunk %lld has an empty time range", (long long)m->id);
        return -EINVAL;
    }
    return 0;
}

/* The chunk's request: the URL with its service and labels in c->url, its body in c->body.
 * 0, -ENOMEM, or -EINVAL (reason in c->why). */
static int encode_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct coroot_sink *c = ctx;
    const char *service = pfr_sink_service_name(c->base.conf->service_prefix, m->service, &c->name);
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
    pfr_buf_reset(&c->url);
    pfr_buf_puts(&c->url, c->endpoint);
    pfr_buf_putc(&c->url, '?');
    pfr_buf_put(&c->url, q.data, q.len);
    pfr_buf_free(&q);
    if (rc || !pfr_buf_cstr(&c->url))
        return -ENOMEM;
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    free(c->body);
    c->body = NULL;
    rc = pfr_profile_encode(p, false, &raw, &rawlen);
    if (!rc)
        rc = pfr_pprof_retime(raw, rawlen, m->end_ns,
                              m->end_ns - m->start_ns - pfr_coroot_start_shift(m), true,
                              c->base.conf->compress_level, &c->body, &c->len);
    free(raw);
    if (rc && rc != -ENOMEM) {
        snprintf(c->why, sizeof(c->why), "chunk %lld: cannot encode its profile (%s)",
                 (long long)m->id, strerror(-rc));
        return -EINVAL;
    }
    return rc;
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

/* Post body to url with the key; r gets the outcome. */
static void post(struct coroot_sink *c, const char *url, const void *body, size_t len,
                 pfr_sink_result *r)
{
    const char *headers[] = {c->key_header, "Content-Type: application/octet-stream"};
    pfr_http_req req = {.url = url,
                        .headers = c->key_header ? headers : headers + 1,
                        .nheaders = c->key_header ? 2 : 1,
                        .body = body,
                        .body_len = len};
    pfr_http_resp resp;
    enum pfr_outcome t = pfr_http_do(c->base.http, &req, &resp);
    pfr_sink_result_from_http(r, t, &resp);
    if (r->outcome == PFR_OUT_OK && lying(&resp, r->message, sizeof(r->message)))
        r->outcome = PFR_OUT_RETRY;
    if (r->outcome == PFR_OUT_SINK)
        explain(r);
    pfr_http_resp_free(&resp);
}

static void c_send(pfr_sink *s, pfr_chunksrc *src, const char *token, pfr_sink_result *r)
{
    (void)token;
    struct coroot_sink *c = (struct coroot_sink *)s;
    pfr_sink_result_reset(r);
    for (size_t i = 0; i < src->n; i++) {
        int rc = pfr_chunksrc_read_profile(src, i, encode_cb, c);
        if (!rc && src->state[i] == PFR_CHUNK_READ) {
            post(c, (const char *)c->url.data, c->body, c->len, r);
            if (r->outcome == PFR_OUT_OK)
                r->body_bytes += c->len;
        } else if (rc == -EINVAL) {
            r->outcome = PFR_OUT_REJECT;
            r->status = 0;
            snprintf(r->message, sizeof(r->message), "%s", c->why);
        } else if (rc) {
            r->outcome = PFR_OUT_RETRY;
            r->status = 0;
            snprintf(r->message, sizeof(r->message), "reading chunk %lld: %s",
                     (long long)src->ids[i], strerror(-rc));
        }
        free(c->body);
        c->body = NULL;
        if (r->outcome != PFR_OUT_OK) {
            r->ndone = i;
            r->one_chunk = true;
            return;
        }
    }
    r->ndone = src->n;
}

/* A profile without service.name, which Coroot refuses before it reads anything ("400
 * service.name is empty"; 404 for an unknown key): a server that gives the same answer as to a
 * chunk answers alike whatever it gets. */
static void c_probe(pfr_sink *s, pfr_sink_result *r)
{
    struct coroot_sink *c = (struct coroot_sink *)s;
    pfr_sink_result_reset(r);
    post(c, c->endpoint, "", 0, r);
}

static void c_free(pfr_sink *s)
{
    struct coroot_sink *c = (struct coroot_sink *)s;
    free(c->body);
    free(c->endpoint);
    if (c->key_header) {
        explicit_bzero(c->key_header, strlen(c->key_header));
        free(c->key_header);
    }
    pfr_buf_free(&c->url);
    pfr_buf_free(&c->name);
    pfr_unit_cache_free(c->units);
    free(c);
}

static const struct pfr_sink_ops coroot_ops = {
    .kind = "coroot",
    /* gzip'd pprof per byte of a chunk's stored samples (pfr_testgen's rings): a profile
     * repeats the strings the ring keeps once per stream. */
    .stored_ratio = 120,
    .prepare = c_prepare,
    .check = c_check,
    .send = c_send,
    .ships = c_ships,
    .probe = c_probe,
    .free = c_free,
};

static int c_create(const pfr_sink_conf *conf, pfr_sink **out)
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
    if (pfr_coroot_units_new(conf, &c->units) < 0) {
        c_free(&c->base);
        return -ENOMEM;
    }
    *out = &c->base;
    return 0;
}

/* Coroot refuses every profile without X-API-Key. */
static int c_check_key(const pfr_sink_conf *c, char *err, size_t errlen)
{
    if (c->api_key)
        return 0;
    snprintf(err, errlen,
             "sink %s: a coroot sink needs an API key (api_key_file, api_key_env, "
             "--api-key-file or PFR_SHIPPER_API_KEY)",
             c->name);
    return -EINVAL;
}

/* batch_bytes etc.: the common group's defaults are Coroot's. */
const pfr_sink_kind pfr_sink_coroot = {
    .name = "coroot",
    .conf_size = 0,
    .check_key = c_check_key,
    .sample = "[sink coroot]\n"
              "type = coroot\n"
              "url = https://coroot.example.com\n"
              "api_key_file = /run/credentials/pfr-shipper.service/pfr_coroot-api-key\n",
    .create = c_create,
};
