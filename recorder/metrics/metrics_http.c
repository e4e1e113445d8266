/* The HTTP exporter: GET /metrics renders the registry. */
#include "pfr_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct pfr_metrics_server {
    pfr_metrics *m;
    struct MHD_Daemon *d;
    uint16_t port;
};

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req)
{
    (void)version;
    (void)upload;
    (void)req;
    pfr_metrics_server *s = cls;
    if (*upload_size)
        *upload_size = 0; /* a body is ignored */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (strcmp(url, "/") == 0)
        return reply(conn, MHD_HTTP_OK, "pfr-recorder: metrics at /metrics\n");
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    char *text;
    size_t len;
    if (pfr_metrics_render(s->m, &text, &len) < 0)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* "host:port" or "[v6]:port"; numeric hosts only (no DNS in a daemon's start-up path). */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, char *err, size_t errlen)
{
    char host[256];
    const char *port;
    if (!listen || !*listen)
        goto bad;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (!end || end[1] != ':' || (size_t)(end - listen - 1) >= sizeof(host))
            goto bad;
        memcpy(host, listen + 1, (size_t)(end - listen - 1));
        host[end - listen - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(listen, ':');
        if (!colon || (size_t)(colon - listen) >= sizeof(host) || strchr(listen, ':') != colon)
            goto bad;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        port = colon + 1;
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        goto bad;
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (!*host || inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)p);
        if (!*host)
            v4->sin_addr.s_addr = htonl(INADDR_ANY);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)p);
        return 0;
    }
bad:
    snprintf(err, errlen, "bad listen address \"%s\" (want IP:PORT or [IPv6]:PORT)",
             listen ? listen : "");
    return -EINVAL;
}

int pfr_metrics_serve(pfr_metrics *m, const char *listen, pfr_metrics_server **out, char *err,
                      size_t errlen)
{
    char dummy[1];
    if (!errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    struct sockaddr_storage ss;
    int rc = parse_listen(listen, &ss, err, errlen);
    if (rc < 0)
        return rc;
    pfr_metrics_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->m = m;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    errno = 0;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 32u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!s->d) {
        rc = errno ? -errno : -EADDRINUSE;
        snprintf(err, errlen, "cannot listen on %s: %s", listen, strerror(-rc));
        free(s);
        return rc;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return 0;
}

uint16_t pfr_metrics_server_port(const pfr_metrics_server *s)
{
    return s->port;
}

void pfr_metrics_server_stop(pfr_metrics_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    free(s);
}
