#include "sink.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
    char snip[400];
    pfr_http_snippet(resp->body, resp->body_len, snip, sizeof(snip));
    if (r->outcome == PFR_OUT_OK)
        r->message[0] = 0;
    else
        snprintf(r->message, sizeof(r->message), "HTTP %ld: %s", resp->status,
                 snip[0] ? snip : "(empty answer)");
}

int pfr_sink_new(const pfr_sink_conf *conf, const pfr_http_opts *http, pfr_sink **out, char *err,
                 size_t errlen)
{
    pfr_sink *s = NULL;
    int rc;
    switch (conf->kind) {
    case PFR_SINK_COROOT:
        rc = pfr_sink_coroot_new(conf, &s);
        break;
    case PFR_SINK_CLICKHOUSE:
        rc = pfr_sink_clickhouse_new(conf, &s);
        break;
    default:
        rc = -EINVAL;
        break;
    }
    if (rc) {
        snprintf(err, errlen, "sink %s: cannot create (%s)", conf->name, strerror(-rc));
        return rc;
    }
    pfr_http_opts o = *http;
    o.connect_timeout_ms = conf->connect_timeout_ms;
    o.timeout_ms = conf->timeout_ms;
    o.ca_file = conf->ca_file;
    o.insecure = conf->tls_insecure;
    o.client_cert = conf->client_cert;
    o.client_key = conf->client_key;
    o.max_send_bps = conf->bandwidth;
    if ((rc = pfr_http_new(&o, &s->http))) {
        s->ops->free(s);
        snprintf(err, errlen, "sink %s: cannot create its HTTP client", conf->name);
        return rc;
    }
    *out = s;
    return 0;
}

void pfr_sink_free(pfr_sink *s)
{
    if (!s)
        return;
    pfr_http_free(s->http);
    s->http = NULL;
    s->ops->free(s);
}
