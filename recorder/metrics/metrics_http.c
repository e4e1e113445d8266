/* The HTTP exporter: GET /metrics renders the registry; one POST path may be given a handler
 * (the recorder's POST /pin). */
#include "pfr_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define POST_MAX_ARGS  16
#define POST_REPLY_MAX 2048

struct pfr_metrics_server {
    pfr_metrics *m;
    struct MHD_Daemon *d;
    uint16_t port;
    pthread_mutex_t lock; /* the POST handler */
    char post_path[64];
    pfr_metrics_post_fn post_fn;
    void *post_ctx;
};

struct post_args {
    const char *keys[POST_MAX_ARGS], *values[POST_MAX_ARGS];
    size_t n;
    bool overflow;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct post_args *a = cls;
    if (a->n == POST_MAX_ARGS) {
        a->overflow = true;
        return MHD_NO;
    }
    a->keys[a->n] = key;
    a->values[a->n++] = value;
    return MHD_YES;
}

static bool from_loopback(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return false;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD, POST");
    enum MHD_Result rc = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return rc;
}

/* POST: the handler's path only; the reply is a copy of the handler's text. */
static enum MHD_Result handle_post(pfr_metrics_server *s, struct MHD_Connection *conn,
                                   const char *url)
{
    struct post_args a = {0};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_arg, &a);
    char *text = malloc(POST_REPLY_MAX);
    if (!text)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    text[0] = '\0';
    /* the handler runs under the lock, so one taken away is not running after on_post returns */
    pthread_mutex_lock(&s->lock);
    bool found = s->post_fn && strcmp(url, s->post_path) == 0;
    unsigned code = 0;
    if (found && !a.overflow)
        code = s->post_fn(s->post_ctx, a.keys, a.values, a.n, from_loopback(conn), text,
                          POST_REPLY_MAX - 1);
    pthread_mutex_unlock(&s->lock);
    if (!found || a.overflow) {
        free(text);
        if (found)
            return reply(conn, MHD_HTTP_BAD_REQUEST, "too many parameters\n");
        /* the paths GET serves are there, but not for POST */
        if (strcmp(url, "/") == 0 || strcmp(url, "/metrics") == 0)
            return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        return reply(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    size_t len = strnlen(text, POST_REPLY_MAX - 2);
    text[len++] = '\n';
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
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
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0)
        return handle_post(s, conn, url);
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
    pthread_mutex_init(&s->lock, NULL);
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
        pthread_mutex_destroy(&s->lock);
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

void pfr_metrics_server_on_post(pfr_metrics_server *s, const char *path, pfr_metrics_post_fn fn,
                                void *ctx)
{
    pthread_mutex_lock(&s->lock);
    snprintf(s->post_path, sizeof(s->post_path), "%s", fn ? path : "");
    s->post_fn = fn;
    s->post_ctx = ctx;
    pthread_mutex_unlock(&s->lock);
}

void pfr_metrics_server_stop(pfr_metrics_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
