/* The bounded libcurl client of pfr_scrape (see scrape_http.h). */
#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "scrape_http.h"
#include "scrape_internal.h"
#include "scrape_netns.h"

struct sc_http {
    CURLM *multi;
    atomic_bool cancel;
    struct sc_netns *ns;
};

enum { PENDING = 0, RUNNING, FINISHED };

int pfr_scrape_http_new(struct sc_http **out)
{
    struct sc_http *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->multi = curl_multi_init();
    if (!h->multi) {
        free(h);
        return -ENOMEM;
    }
    atomic_init(&h->cancel, false);
    *out = h;
    return 0;
}

void pfr_scrape_http_free(struct sc_http *h)
{
    if (!h)
        return;
    curl_multi_cleanup(h->multi);
    free(h);
}

void pfr_scrape_http_set_netns(struct sc_http *h, struct sc_netns *ns)
{
    h->ns = ns;
}

void pfr_scrape_http_cancel(struct sc_http *h)
{
    atomic_store(&h->cancel, true);
    curl_multi_wakeup(h->multi);
}

void pfr_scrape_http_uncancel(struct sc_http *h)
{
    atomic_store(&h->cancel, false);
}

void pfr_scrape_req_clear(struct sc_req *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
    r->status = 0;
    r->fail = SC_OK;
    r->error[0] = '\0';
    r->too_large = false;
    r->netns_err = 0;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sc_req *r = ud;
    size_t n = size * nmemb;
    if (n > r->max_body - r->len) {
        r->too_large = true;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    if (r->len + n > r->cap) {
        size_t ncap = r->cap ? r->cap : 65536;
        while (ncap < r->len + n)
            ncap = ncap > SIZE_MAX / 2 ? SIZE_MAX : ncap * 2;
        if (ncap > r->max_body)
            ncap = r->max_body;
        unsigned char *nb = realloc(r->body, ncap);
        if (!nb)
            return 0;
        r->body = nb;
        r->cap = ncap;
    }
    memcpy(r->body + r->len, ptr, n);
    r->len += n;
    return n;
}

/* Every socket of a transfer: in the request's network namespace, or through h->ns so that a
 * thread that could not return to its own namespace opens none at all. */
static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct sc_req *r = ud;
    struct sc_http *h = r->http;
    (void)purpose;
    int fd;
    if (h->ns) {
        fd = pfr_scrape_netns_socket(h->ns, r->netns ? r->netns_fd : -1, a->family, a->socktype,
                                     a->protocol);
    } else if (r->netns) {
        fd = -EPERM;
    } else {
        fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
        if (fd < 0)
            fd = -errno;
    }
    if (fd < 0) {
        if (r->netns || fd == -ENOTRECOVERABLE)
            r->netns_err = -fd;
        return CURL_SOCKET_BAD;
    }
    return fd;
}

static int start(struct sc_http *h, struct sc_req *r)
{
    CURL *e = curl_easy_init();
    if (!e)
        return -ENOMEM;
    r->curl_err[0] = '\0';
    r->netns_err = 0;
    r->http = h;
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
    if (r->netns) {
        /* the pool matches 127.0.0.1:6060 whatever namespace a connection was made in */
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->curl_err);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)r->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)r->max_body);
    /* A proxy from the environment would send pod and loopback traffic astray. */
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "pfr-recorder/" PFR_VERSION);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, r->insecure ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, r->insecure ? 0L : 2L);
    if (r->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, r->ca_file);
    struct curl_slist *hdr = NULL;
    if (r->bearer) {
        char *line = NULL;
        if (asprintf(&line, "Authorization: Bearer %s", r->bearer) < 0) {
            curl_easy_cleanup(e);
            return -ENOMEM;
        }
        hdr = curl_slist_append(NULL, line);
        free(line);
        if (!hdr) {
            curl_easy_cleanup(e);
            return -ENOMEM;
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdr);
    }
    r->start_ns = pfr_clock_real_ns();
    if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
        curl_slist_free_all(hdr);
        curl_easy_cleanup(e);
        return -ENOMEM;
    }
    r->easy = e;
    r->headers = hdr;
    return 0;
}

static void release(struct sc_http *h, struct sc_req *r)
{
    if (r->easy) {
        curl_multi_remove_handle(h->multi, r->easy);
        curl_easy_cleanup(r->easy);
    }
    curl_slist_free_all(r->headers);
    r->easy = NULL;
    r->headers = NULL;
}

/* The start of a body as text, for an error message. */
static void snippet(const struct sc_req *r, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < r->len && o + 1 < cap && i < 120; i++) {
        unsigned char c = r->body[i];
        if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
        if (c < ' ' || c >= 0x7f)
            break;
        out[o++] = (char)c;
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

static void classify(struct sc_req *r, CURLcode rc)
{
    CURL *e = r->easy;
    r->end_ns = pfr_clock_real_ns();
    const char *detail = r->curl_err[0] ? r->curl_err : curl_easy_strerror(rc);
    if (r->netns_err) {
        r->fail = SC_NETNS;
        if (r->netns_err == ENOTRECOVERABLE)
            pfr_scrape_errf(r->error, sizeof(r->error),
                            "the scrape thread could not return to its own network namespace");
        else
            pfr_scrape_errf(r->error, sizeof(r->error), "cannot enter the network namespace: %s",
                            strerror(r->netns_err));
        return;
    }
    if (rc == CURLE_OK) {
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
        if (r->status == 200) {
            r->fail = SC_OK;
            return;
        }
        char text[128];
        snippet(r, text, sizeof(text));
        r->fail = SC_HTTP;
        pfr_scrape_errf(r->error, sizeof(r->error), "HTTP %ld%s%s", r->status, text[0] ? ": " : "",
                        text);
        return;
    }
    switch (rc) {
    case CURLE_WRITE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
        if (r->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
            r->fail = SC_TOO_LARGE;
            pfr_scrape_errf(r->error, sizeof(r->error), "body larger than %zu bytes", r->max_body);
            return;
        }
        r->fail = SC_OTHER;
        pfr_scrape_errf(r->error, sizeof(r->error), "out of memory reading the body");
        return;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_UNSUPPORTED_PROTOCOL:
        r->fail = SC_CONNECT;
        pfr_scrape_errf(r->error, sizeof(r->error), "cannot connect: %s", detail);
        return;
    case CURLE_OPERATION_TIMEDOUT: {
        /* sent the request (on a new or a reused connection)? then it was connected */
        long sent = 0;
        curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent);
        if (sent == 0) {
            r->fail = SC_CONNECT;
            pfr_scrape_errf(r->error, sizeof(r->error), "cannot connect: %s", detail);
        } else {
            r->fail = SC_TIMEOUT;
            pfr_scrape_errf(r->error, sizeof(r->error), "timed out after %lld ms (%zu bytes read)",
                            (long long)r->timeout_ms, r->len);
        }
        return;
    }
    default:
        r->fail = SC_OTHER;
        pfr_scrape_errf(r->error, sizeof(r->error), "%s", detail);
        return;
    }
}

static void fail_now(struct sc_req *r, enum sc_fail f, const char *msg)
{
    r->fail = f;
    r->start_ns = r->end_ns = pfr_clock_real_ns();
    pfr_scrape_errf(r->error, sizeof(r->error), "%s", msg);
}

int pfr_scrape_http_run(struct sc_http *h, struct sc_req *reqs, size_t n, unsigned max_parallel,
                        unsigned per_group, sc_http_done_fn done, void *ctx)
{
    if (n == 0)
        return 0;
    int maxg = -1;
    for (size_t i = 0; i < n; i++)
        if (reqs[i].group > maxg)
            maxg = reqs[i].group;
    unsigned *active = calloc((size_t)maxg + 2, sizeof(*active));
    bool *given_up = calloc((size_t)maxg + 2, sizeof(*given_up));
    unsigned char *state = calloc(n, 1);
    if (!active || !given_up || !state) {
        free(active);
        free(given_up);
        free(state);
        return -ENOMEM;
    }
    if (max_parallel == 0)
        max_parallel = 1;
    if (per_group == 0)
        per_group = 1;
    size_t finished = 0, first_pending = 0;
    unsigned running = 0;
    int rc = 0;
    while (finished < n) {
        if (atomic_load(&h->cancel)) {
            rc = -ECANCELED;
            break;
        }
        /* start what the bounds allow, in list order */
        while (first_pending < n && state[first_pending] != PENDING)
            first_pending++;
        for (size_t i = first_pending; i < n && running < max_parallel; i++) {
            struct sc_req *r = &reqs[i];
            if (state[i] != PENDING)
                continue;
            int g = r->group;
            if (g >= 0 && given_up[g]) {
                state[i] = FINISHED;
                finished++;
                fail_now(r, SC_SKIPPED, "skipped: target unreachable");
                if (done)
                    done(r, ctx);
                continue;
            }
            if (g >= 0 && active[g] >= per_group)
                continue;
            if (start(h, r) < 0) {
                state[i] = FINISHED;
                finished++;
                fail_now(r, SC_OTHER, "out of memory starting a request");
                if (done && done(r, ctx) && g >= 0)
                    given_up[g] = true;
                continue;
            }
            state[i] = RUNNING;
            running++;
            if (g >= 0)
                active[g]++;
        }
        if (finished >= n)
            break;
        int still = 0;
        curl_multi_perform(h->multi, &still);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(h->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            char *priv = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
            struct sc_req *r = (struct sc_req *)(void *)priv;
            CURLcode res = m->data.result;
            classify(r, res);
            release(h, r);
            size_t i = (size_t)(r - reqs);
            state[i] = FINISHED;
            finished++;
            running--;
            if (r->group >= 0)
                active[r->group]--;
            if (done && done(r, ctx) && r->group >= 0)
                given_up[r->group] = true;
        }
        if (finished < n && running > 0)
            curl_multi_poll(h->multi, NULL, 0, 100, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (state[i] == RUNNING) {
            release(h, &reqs[i]);
            fail_now(&reqs[i], SC_CANCELED, "canceled");
        } else if (state[i] == PENDING) {
            fail_now(&reqs[i], SC_CANCELED, "canceled");
        }
    }
    free(active);
    free(given_up);
    free(state);
    return rc;
}
