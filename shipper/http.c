#include "http.h"

#include <assert.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct pfr_http {
    CURL *curl;
    pfr_http_opts o;
    char *ca_file, *client_cert, *client_key;
};

int pfr_http_new(const pfr_http_opts *o, pfr_http **out)
{
    pfr_http *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->o = *o;
    if (h->o.connect_timeout_ms <= 0)
        h->o.connect_timeout_ms = 10000;
    if (h->o.timeout_ms <= 0)
        h->o.timeout_ms = 60000;
    h->ca_file = o->ca_file ? strdup(o->ca_file) : NULL;
    h->client_cert = o->client_cert ? strdup(o->client_cert) : NULL;
    h->client_key = o->client_key ? strdup(o->client_key) : NULL;
    h->curl = curl_easy_init();
    if (!h->curl || (o->ca_file && !h->ca_file) || (o->client_cert && !h->client_cert) ||
        (o->client_key && !h->client_key)) {
        pfr_http_free(h);
        return -ENOMEM;
    }
    *out = h;
    return 0;
}

void pfr_http_free(pfr_http *h)
{
    if (!h)
        return;
    if (h->curl)
        curl_easy_cleanup(h->curl);
    free(h->ca_file);
    free(h->client_cert);
    free(h->client_key);
    free(h);
}

void pfr_http_resp_free(pfr_http_resp *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
    r->retry_after_ms = -1;
}

struct xfer {
    pfr_http *h;
    pfr_http_resp *r;
    size_t cap;
    const pfr_http_req *req;
    bool read_failed; /* req->read gave the request up */
};

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
    struct xfer *x = ud;
    ptrdiff_t n = x->req->read(x->req->read_ctx, buf, size * nitems);
    if (n < 0) {
        x->read_failed = true;
        return CURL_READFUNC_ABORT;
    }
    return (size_t)n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    pfr_http_resp *r = x->r;
    size_t room = PFR_HTTP_BODY_MAX - r->body_len;
    size_t take = n < room ? n : room;
    if (take < n)
        r->body_truncated = true;
    if (take) {
        if (r->body_len + take + 1 > x->cap) {
            size_t cap = x->cap ? x->cap : 1024;
            while (cap < r->body_len + take + 1)
                cap *= 2;
            char *b = realloc(r->body, cap);
            if (!b)
                return 0; /* curl fails the transfer: reported as a transport error */
            r->body = b;
            x->cap = cap;
        }
        memcpy(r->body + r->body_len, p, take);
        r->body_len += take;
        r->body[r->body_len] = 0;
    }
    return n;
}

static void header_value(const char *line, size_t n, size_t name_len, char *out, size_t cap)
{
    const char *v = line + name_len;
    size_t len = n - name_len;
    while (len && isspace((unsigned char)*v))
        v++, len--;
    while (len && isspace((unsigned char)v[len - 1]))
        len--;
    if (len >= cap)
        len = cap - 1;
    memcpy(out, v, len);
    out[len] = 0;
}

/* Whether line is header name's; *value_at gets the offset past "name:". */
static bool header_is(const char *line, size_t n, const char *name, size_t *value_at)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
        return false;
    *value_at = k + 1;
    return true;
}

static size_t keep_count(const pfr_http_req *req)
{
    return req->nkeep_headers < PFR_HTTP_KEEP_MAX ? req->nkeep_headers : PFR_HTTP_KEEP_MAX;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    pfr_http_resp *r = x->r;
    if (n >= 5 && !strncmp(p, "HTTP/", 5)) {
        /* A new answer (after 100 Continue or a redirect): forget the previous one's headers. */
        r->retry_after_ms = -1;
        r->content_type[0] = 0;
        for (size_t i = 0; i < PFR_HTTP_KEEP_MAX; i++)
            r->kept[i][0] = 0;
        return n;
    }
    char v[512];
    size_t at;
    if (header_is(p, n, "Retry-After", &at)) {
        header_value(p, n, at, v, sizeof(v));
        r->retry_after_ms = pfr_retry_after_ms(v, (int64_t)time(NULL));
    } else if (header_is(p, n, "Content-Type", &at)) {
        header_value(p, n, at, r->content_type, sizeof(r->content_type));
    } else {
        for (size_t i = 0; i < keep_count(x->req); i++) {
            if (header_is(p, n, x->req->keep_headers[i], &at)) {
                header_value(p, n, at, r->kept[i], sizeof(r->kept[i]));
                break;
            }
        }
    }
    return n;
}

/* A short text from the answer, made fit to show. */
static void scrub(const pfr_http *h, char *s)
{
    pfr_redact(s, strlen(s), h->o.secrets);
    pfr_text_printable(s);
}

static void scrub_headers(const pfr_http *h, pfr_http_resp *r)
{
    scrub(h, r->content_type);
    for (size_t i = 0; i < PFR_HTTP_KEEP_MAX; i++)
        scrub(h, r->kept[i]);
}

/* The body's quote: secrets are redacted in a copy of the whole body before it is cut, so a
 * secret cannot survive in part at the cut; a copy that cannot be made is not shown. */
static void scrub_answer(const pfr_http *h, pfr_http_resp *r)
{
    r->quote[0] = 0;
    if (!r->body_len)
        return;
    char *t = malloc(r->body_len + 1);
    if (!t) {
        snprintf(r->quote, sizeof(r->quote), "(answer not shown: out of memory)");
        return;
    }
    memcpy(t, r->body, r->body_len);
    t[r->body_len] = 0;
    size_t n = pfr_redact(t, r->body_len, h->o.secrets);
    if (r->body_truncated)
        n = pfr_redact_cut(t, n, h->o.secrets);
    pfr_http_snippet(t, n, r->quote, sizeof(r->quote));
    explicit_bzero(t, r->body_len);
    free(t);
    /* Collapsed blanks and replaced bytes could spell a secret that has them. */
    pfr_redact(r->quote, strlen(r->quote), h->o.secrets);
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct xfer *x = ud;
    return x->h->o.should_abort && x->h->o.should_abort(x->h->o.abort_ctx) ? 1 : 0;
}

enum pfr_outcome pfr_http_do(pfr_http *h, const pfr_http_req *req, pfr_http_resp *resp)
{
    memset(resp, 0, sizeof(*resp));
    resp->retry_after_ms = -1;
    assert(req->nkeep_headers <= PFR_HTTP_KEEP_MAX);
    CURL *c = h->curl;
    curl_easy_reset(c);
    struct xfer x = {.h = h, .r = resp, .req = req};
    struct curl_slist *hdrs = NULL;
    /* No "Expect: 100-continue" round trip before each body. */
    struct curl_slist *t = curl_slist_append(hdrs, "Expect:");
    if (t && req->read)
        t = curl_slist_append(t, "Transfer-Encoding: chunked");
    if (!t) {
        curl_slist_free_all(hdrs);
        snprintf(resp->error, sizeof(resp->error), "out of memory");
        return PFR_OUT_RETRY;
    }
    hdrs = t;
    for (size_t i = 0; i < req->nheaders; i++) {
        t = curl_slist_append(hdrs, req->headers[i]);
        if (!t) {
            curl_slist_free_all(hdrs);
            snprintf(resp->error, sizeof(resp->error), "out of memory");
            return PFR_OUT_RETRY;
        }
        hdrs = t;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)h->o.connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)h->o.timeout_ms);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "pfr-shipper/" PFR_VERSION);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    /* Redirects are not followed: a POST body must not wander to another host. */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (h->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    if (h->o.insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (h->client_cert)
        curl_easy_setopt(c, CURLOPT_SSLCERT, h->client_cert);
    if (h->client_key)
        curl_easy_setopt(c, CURLOPT_SSLKEY, h->client_key);
    if (h->o.max_send_bps)
        curl_easy_setopt(c, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)h->o.max_send_bps);
    if (req->read) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &x);
        /* curl sends a request again when a reused connection turns out closed, which needs
         * the body from its start: not this one. */
        curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
        /* Pieces of 1 MiB rather than 64 KiB: fewer calls and chunk heads on both sides (~2 % of
         * ClickHouse's CPU for an insert, measured). */
        curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
    } else if (req->body) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    if (req->basic_user) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, req->basic_user);
        curl_easy_setopt(c, CURLOPT_PASSWORD, req->basic_password ? req->basic_password : "");
    }
    CURLcode rc = curl_easy_perform(c);
    curl_off_t up = 0;
    if (curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up) == CURLE_OK && up > 0)
        resp->bytes_sent = (uint64_t)up;
    curl_slist_free_all(hdrs);
    /* Leave no pointer to this call's stack or buffers in the handle. */
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_READDATA, NULL);
    scrub_headers(h, resp);
    if (x.read_failed) {
        snprintf(resp->error, sizeof(resp->error), "the request body could not be made");
        resp->status = 0;
        return PFR_OUT_RETRY;
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(resp->error, sizeof(resp->error), "interrupted");
        resp->status = 0;
        return PFR_OUT_ABORTED;
    }
    if (rc != CURLE_OK) {
        snprintf(resp->error, sizeof(resp->error), "%s",
                 errbuf[0] ? errbuf : curl_easy_strerror(rc));
        scrub(h, resp->error);
        resp->status = 0;
        return PFR_OUT_RETRY;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    resp->status = status;
    scrub_answer(h, resp);
    if (!resp->body) {
        resp->body = calloc(1, 1);
        if (!resp->body) {
            snprintf(resp->error, sizeof(resp->error), "out of memory");
            resp->status = 0;
            return PFR_OUT_RETRY;
        }
    }
    return PFR_OUT_OK;
}

char *pfr_url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *o = malloc(n * 3 + 1), *p = o;
    if (!o)
        return NULL;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (isalnum(*c) || *c == '-' || *c == '_' || *c == '.' || *c == '~') {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = 0;
    return o;
}

const char *pfr_url_redact(const char *url, char *out, size_t cap)
{
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    const char *end = host + strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *p = host; p < end; p++)
        if (*p == '@')
            at = p;
    if (!at) {
        snprintf(out, cap, "%s", url);
        return out;
    }
    snprintf(out, cap, "%.*s***@%s", (int)(host - url), url, at + 1);
    return out;
}

void pfr_http_snippet(const char *body, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    bool space = false;
    if (!cap)
        return;
    for (size_t i = 0; i < len && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)body[i];
        if (isspace(c)) {
            space = o > 0;
            continue;
        }
        if (space) {
            out[o++] = ' ';
            space = false;
            if (o + 4 >= cap)
                break;
        }
        out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        if (o + 4 >= cap && i + 1 < len) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
    }
    out[o] = 0;
}
