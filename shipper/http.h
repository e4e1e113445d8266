/* http: one keep-alive HTTP client per sink over libcurl, with connect and total timeouts, TLS
 * options, a send-speed cap and an abort hook, returning the few parts of an answer the sinks
 * judge (status, a bounded body, Retry-After, Content-Type, and the headers a request names:
 * a sink asks for its server's own). An answer is untrusted
 * text: what of it may be shown (the quote, header values, the transport error) comes printable
 * and with the client's secrets redacted, in case the server echoed the request's headers. */
#ifndef PFR_SHIP_HTTP_H
#define PFR_SHIP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redact.h"
#include "retry.h"

typedef struct pfr_http pfr_http;

typedef struct pfr_http_opts {
    int64_t connect_timeout_ms; /* default 10 s */
    int64_t timeout_ms;         /* the whole request, default 60 s */
    const char *ca_file;        /* NULL = the system's CA bundle */
    bool insecure;              /* skip TLS peer and host verification (tests only) */
    const char *client_cert, *client_key;
    uint64_t max_send_bps; /* 0 = unlimited */
    /* Polled during transfers; returning true aborts the request (shutdown). */
    bool (*should_abort)(void *ctx);
    void *abort_ctx;
    const pfr_secrets *secrets; /* redacted from what an answer shows; not owned, may be NULL */
} pfr_http_opts;

typedef struct pfr_http_req {
    const char *url;
    const char *const *headers; /* "Name: value" lines; they may carry secrets: never logged */
    size_t nheaders;
    const void *body; /* POST body (NULL = GET, unless read is set) */
    size_t body_len;
    /* Or a POST body of unknown length, made while it is sent (Transfer-Encoding: chunked):
     * read puts up to cap bytes in buf and returns their number, 0 at the end of the body, or
     * -1 to give the request up (then pfr_http_do returns PFR_OUT_RETRY with "the request body
     * could not be made": the caller knows why). Called from inside pfr_http_do only. Such a
     * request goes on a new connection: a body made once cannot be sent again on another. */
    ptrdiff_t (*read)(void *ctx, void *buf, size_t cap);
    void *read_ctx;
    const char *basic_user, *basic_password; /* HTTP basic auth when basic_user != NULL */
    /* Names of the answer's headers to keep (without ':', any case), at most PFR_HTTP_KEEP_MAX:
     * their values land in resp->kept[i]. Not owned. */
    const char *const *keep_headers;
    size_t nkeep_headers;
} pfr_http_req;

#define PFR_HTTP_BODY_MAX   131072 /* bytes of an answer kept; the rest is read and dropped */
#define PFR_HTTP_QUOTE_MAX  320    /* bytes of an answer's quote, "..." included */
#define PFR_HTTP_KEEP_MAX   4      /* headers a request may ask to keep */
#define PFR_HTTP_HEADER_MAX 512    /* bytes of a kept header's value, NUL included */

typedef struct pfr_http_resp {
    long status; /* 0 when no HTTP answer arrived */
    char *body;  /* NUL-terminated, at most PFR_HTTP_BODY_MAX bytes; owned; raw: never shown */
    size_t body_len;
    bool body_truncated;
    int64_t retry_after_ms; /* -1 if none */
    char content_type[128];
    /* The value of req->keep_headers[i] (of the last answer, printable, secrets redacted), ""
     * when it was absent: a sink reads its server's own headers here. */
    char kept[PFR_HTTP_KEEP_MAX][PFR_HTTP_HEADER_MAX];
    uint64_t bytes_sent; /* request bytes put on the wire (body) */
    char error[256];     /* transport failure (status 0) */
    /* The body for messages: printable, blanks collapsed, secrets redacted, cut ("..."). */
    char quote[PFR_HTTP_QUOTE_MAX];
} pfr_http_resp;

int pfr_http_new(const pfr_http_opts *o, pfr_http **out);
void pfr_http_free(pfr_http *h);

/* Send req. Returns PFR_OUT_OK when an HTTP answer arrived (whatever its status: judge
 * resp->status), PFR_OUT_RETRY for transport failures (refused, reset, timeout, DNS, TLS) with
 * the reason in resp->error, PFR_OUT_ABORTED if should_abort stopped it. resp is reset first
 * and must be released with pfr_http_resp_free. */
enum pfr_outcome pfr_http_do(pfr_http *h, const pfr_http_req *req, pfr_http_resp *resp);
void pfr_http_resp_free(pfr_http_resp *r);

/* Percent-encode s (RFC 3986 unreserved kept) onto the end of a malloc'ed string: returns
 * NULL on ENOMEM. */
char *pfr_url_escape(const char *s);
/* The URL without user:password@ (for logs). out gets at most cap bytes. */
const char *pfr_url_redact(const char *url, char *out, size_t cap);
/* Copy an answer body for a log line: printable ASCII only (others become '?'), blanks
 * collapsed, at most cap - 1 bytes with "..." if cut. Secrets are not looked for: see quote. */
void pfr_http_snippet(const char *body, size_t len, char *out, size_t cap);

#endif
