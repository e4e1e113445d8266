#include "sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sinks/sinks.h"

void pfr_sink_result_reset(pfr_sink_result *r)
{
    memset(r, 0, sizeof(*r));
    r->retry_after_ms = -1;
}

void pfr_sink_result_from_http(pfr_sink_result *r, enum pfr_outcome transport,
                               const pfr_http_resp *resp)
{
    r->status = resp->status;
    r->retry_after_ms = resp->retry_after_ms;
    r->bytes_sent += resp->bytes_sent;
    if (transport != PFR_OUT_OK) {
        r->outcome = transport;
        snprintf(r->message, sizeof(r->message), "%s", resp->error);
        return;
    }
    r->outcome = pfr_outcome_of_status(resp->status);
    if (r->outcome == PFR_OUT_OK) {
        r->message[0] = 0;
    } else if (r->outcome == PFR_OUT_REJECT && pfr_sink_page_answer(resp)) {
        char gist[PFR_HTTP_QUOTE_MAX];
        r->outcome = PFR_OUT_SINK;
        snprintf(r->message, sizeof(r->message),
                 "HTTP %ld: %s (an HTML page, not the sink's answer about the content: a proxy's "
                 "or another server's; check the URL's scheme http/https and its port)",
                 resp->status, pfr_sink_page_title(resp->quote, gist, sizeof(gist)));
    } else {
        snprintf(r->message, sizeof(r->message), "HTTP %ld: %s", resp->status,
                 resp->quote[0] ? resp->quote : "(empty answer)");
    }
}

bool pfr_sink_page_answer(const pfr_http_resp *resp)
{
    /* 413 and 414 name the request's size, which is the content's */
    if (resp->status == 413 || resp->status == 414)
        return false;
    if (!strncasecmp(resp->content_type, "text/html", 9))
        return true;
    size_t i = 0;
    while (i < resp->body_len && strchr(" \t\r\n", resp->body[i]))
        i++;
    return i < resp->body_len && resp->body[i] == '<';
}

const char *pfr_sink_page_title(const char *quote, char *out, size_t cap)
{
    const char *t = strcasestr(quote, "<title>");
    const char *end = t ? strcasestr(t, "</title>") : NULL;
    if (t && end && end > t + 7)
        snprintf(out, cap, "%.*s", (int)(end - t - 7), t + 7);
    else
        snprintf(out, cap, "%s", quote[0] ? quote : "(empty answer)");
    return out;
}

void pfr_sink_scrub(const pfr_sink *s, char *msg)
{
    pfr_redact(msg, strlen(msg), &s->secrets);
    pfr_text_printable(msg);
}

/* The credentials as they go out: the key or password itself (X-API-Key, X-ClickHouse-Key),
 * the URL's user:password@ (curl sends it as Basic), and the kind's own forms (an
 * Authorization: Basic header of its user). */
static int collect_secrets(const pfr_sink_conf *conf, pfr_secrets *k)
{
    int rc = pfr_secrets_add(k, conf->api_key);
    if (!rc && conf->kind->secrets)
        rc = conf->kind->secrets(conf, k);
    const char *scheme = strstr(conf->url, "://");
    const char *host = scheme ? scheme + 3 : conf->url;
    size_t hl = strcspn(host, "/?#");
    const char *at = memrchr(host, '@', hl);
    if (!rc && at) {
        char *ui = strndup(host, (size_t)(at - host));
        if (!ui)
            return -ENOMEM;
        char *colon = strchr(ui, ':');
        if (colon) {
            *colon = 0;
            rc = pfr_secrets_add(k, colon + 1);
            if (!rc)
                rc = pfr_secrets_add_basic(k, ui, colon + 1);
            *colon = ':';
        }
        explicit_bzero(ui, strlen(ui));
        free(ui);
    }
    return rc;
}

int pfr_sink_new(const pfr_sink_conf *conf, const pfr_http_opts *http, pfr_sink **out, char *err,
                 size_t errlen)
{
    pfr_sink *s = NULL;
    int rc = conf->kind ? conf->kind->create(conf, &s) : -EINVAL;
    if (rc) {
        snprintf(err, errlen, "sink %s: cannot create (%s)", conf->name, strerror(-rc));
        return rc;
    }
    if ((rc = collect_secrets(conf, &s->secrets))) {
        pfr_secrets_free(&s->secrets);
        s->ops->free(s);
        snprintf(err, errlen, "sink %s: out of memory", conf->name);
        return rc;
    }
    pfr_http_opts o = *http;
    o.secrets = &s->secrets;
    o.connect_timeout_ms = conf->connect_timeout_ms;
    o.timeout_ms = conf->timeout_ms;
    o.ca_file = conf->ca_file;
    o.insecure = conf->tls_insecure;
    o.client_cert = conf->client_cert;
    o.client_key = conf->client_key;
    o.max_send_bps = conf->bandwidth;
    s->http_opts = o;
    if ((rc = pfr_http_new(&o, &s->http))) {
        pfr_secrets_free(&s->secrets);
        s->ops->free(s);
        snprintf(err, errlen, "sink %s: cannot create its HTTP client", conf->name);
        return rc;
    }
    *out = s;
    return 0;
}

int pfr_sink_http_new(const pfr_sink *s, pfr_http **out)
{
    return pfr_http_new(&s->http_opts, out);
}

void pfr_sink_free(pfr_sink *s)
{
    if (!s)
        return;
    pfr_http_free(s->http);
    s->http = NULL;
    pfr_secrets_free(&s->secrets);
    s->ops->free(s);
}
