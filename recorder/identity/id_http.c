/*
 * One bounded GET with libcurl (id_internal.h): over a unix socket (Docker) or TCP/TLS
 * (kubelet, API server), with timeouts, a body cap, no redirects, no proxies, and an abort
 * flag polled by the progress callback so that pfr_identity_free does not wait a whole timeout.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "id_internal.h"

struct sink {
    char *buf;
    size_t len, cap, max;
    bool too_large;
};

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t n = size * nmemb;
    if (n > s->max - s->len) {
        s->too_large = true;
        return 0; /* aborts the transfer */
    }
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 16384;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (!nb)
            return 0;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, ptr, n);
    s->len += n;
    s->buf[s->len] = '\0';
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    const atomic_bool *stop = ud;
    return stop && atomic_load(stop) ? 1 : 0;
}

static void setup(CURL *c, const struct id_http_req *rq, struct sink *s, char *curl_err)
{
    curl_easy_setopt(c, CURLOPT_URL, rq->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rq->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(rq->timeout_ms / 2 ? rq->timeout_ms / 2 : 1));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)rq->stop);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    if (rq->unix_socket)
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, rq->unix_socket);
    if (rq->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, rq->ca_file);
    if (rq->insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

/* Why a unix socket refuses a connection: libcurl says "localhost port 80" and keeps no errno
 * for it, so ask the kernel once more. */
static int unix_connect_errno(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return ENAMETOOLONG;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int e = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
    close(fd);
    return e;
}

/* A failed transfer -> negative errno and a reason. */
static int failure(CURL *c, CURLcode rc, const struct sink *s, const char *curl_err,
                   const char *unix_socket, char *err, size_t errlen)
{
    if (unix_socket && rc == CURLE_COULDNT_CONNECT) {
        int e = unix_connect_errno(unix_socket);
        snprintf(err, errlen, "cannot connect to %s: %s", unix_socket,
                 e ? strerror(e) : "refused, then accepted (retrying)");
        return -ENOTCONN;
    }
    const char *why = curl_err[0] ? curl_err : curl_easy_strerror(rc);
    if (s->too_large) {
        snprintf(err, errlen, "body larger than %zu bytes", s->max);
        return -EFBIG;
    }
    switch (rc) {
    case CURLE_ABORTED_BY_CALLBACK:
        snprintf(err, errlen, "canceled");
        return -ECANCELED;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(err, errlen, "%s", why);
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: {
        long os = 0;
        curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os);
        if (os > 0)
            snprintf(err, errlen, "%s (%s)", why, strerror((int)os));
        else
            snprintf(err, errlen, "%s", why);
        return -ENOTCONN;
    }
    default:
        snprintf(err, errlen, "%s", why);
        return -EIO;
    }
}

int pfr_identity_http_get(const struct id_http_req *rq, char **body, size_t *len, char *err,
                          size_t errlen)
{
    *body = NULL;
    *len = 0;
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "curl_easy_init failed");
        return -ENOMEM;
    }
    struct sink s = {.max = rq->max_body};
    char curl_err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdr = NULL;
    char *auth = NULL;
    setup(c, rq, &s, curl_err);
    int ret = 0;
    if (rq->bearer) {
        if (asprintf(&auth, "Authorization: Bearer %s", rq->bearer) < 0) {
            auth = NULL;
            ret = -ENOMEM;
            goto out;
        }
        if (!(hdr = curl_slist_append(NULL, auth))) {
            ret = -ENOMEM;
            goto out;
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        ret = failure(c, rc, &s, curl_err, rq->unix_socket, err, errlen);
        goto out;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        snprintf(err, errlen, "HTTP %ld", status);
        ret = status == 404 ? -ENOENT : -EPROTO;
        goto out;
    }
    if (!s.buf && !(s.buf = calloc(1, 1))) {
        ret = -ENOMEM;
        goto out;
    }
    *body = s.buf;
    *len = s.len;
    s.buf = NULL;
out:
    if (ret == -ENOMEM)
        snprintf(err, errlen, "out of memory");
    free(auth);
    free(s.buf);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return ret;
}
