/* The HTTP side of `pfr serve`: a libmicrohttpd daemon (a thread per connection) that serves the
 * embedded page and hands /api/ requests to the bounded job runner. */
#include "pfr_serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pfr_gzip.h"
#include "pfr_render.h"
#include "pfr_time.h"
#include "serve_guard.h"

#define MAX_ARGS      64
#define GZIP_MIN_SIZE 1024

struct pfr_serve {
    struct MHD_Daemon *mhd;
    pfr_serve_guard *guard; /* deadlines of the connections */
    pfr_serve_api api;
    pfr_serve_jobs *jobs;
    char *store_path;
    unsigned port;
    bool loopback;
    char url[128];
};

/* ---- the listen address ---- */
int pfr_serve_parse_listen(const char *listen, void *sa_out, size_t *salen, char *err,
                           size_t errlen)
{
    char host[256], port[16];
    const char *colon = strrchr(listen, ':');
    const char *h = listen, *p = colon ? colon + 1 : listen;
    size_t hlen = colon ? (size_t)(colon - listen) : 0;
    if (!colon)
        h = "127.0.0.1", hlen = strlen(h);
    else if (listen[0] == '[') { /* [v6]:port */
        if (colon == listen || colon[-1] != ']') {
            snprintf(err, errlen, "bad address \"%s\": expected [IPV6]:PORT", listen);
            return -EINVAL;
        }
        h = listen + 1;
        hlen = (size_t)(colon - 1 - h);
    } else if (memchr(listen, ':', hlen)) {
        snprintf(err, errlen, "bad address \"%s\": write an IPv6 address as [ADDR]:PORT", listen);
        return -EINVAL;
    }
    if (hlen == 0)
        h = "127.0.0.1", hlen = strlen(h);
    char *end;
    long pn = strtol(p, &end, 10);
    if (!*p || *end || pn < 0 || pn > 65535 || hlen >= sizeof(host)) {
        snprintf(err, errlen, "bad address \"%s\": expected HOST:PORT, [IPV6]:PORT or PORT",
                 listen);
        return -EINVAL;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    snprintf(port, sizeof(port), "%ld", pn);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV},
                    *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve \"%s\": %s", host, gai_strerror(rc));
        return -EINVAL;
    }
    if (res->ai_addrlen > sizeof(struct sockaddr_storage)) {
        freeaddrinfo(res);
        snprintf(err, errlen, "address of \"%s\" too long", host);
        return -EINVAL;
    }
    memcpy(sa_out, res->ai_addr, res->ai_addrlen);
    *salen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

bool pfr_serve_is_loopback(const void *sa)
{
    const struct sockaddr *s = sa;
    if (s->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (s->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

/* Our own socket, so a busy port is a clear error and port 0 tells us the port it got. */
static int bind_socket(const struct sockaddr_storage *sa, size_t salen, unsigned *port, char *err,
                       size_t errlen)
{
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -errno;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    struct sockaddr_storage got;
    socklen_t glen = sizeof(got);
    if (bind(fd, (const struct sockaddr *)sa, (socklen_t)salen) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&got, &glen) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot listen: %s", strerror(e));
        close(fd);
        return -e;
    }
    *port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                            : ((struct sockaddr_in *)&got)->sin_port);
    return fd;
}

/* ---- responses ---- */
/* gzip'd copy of buf (level 1: cheap, still 5-10x smaller for JSON), or NULL. */
static char *gzip_copy(const char *buf, size_t len, size_t *outlen)
{
    pfr_buf z = {0};
    if (pfr_gzip(buf, len, 1, &z) < 0) {
        pfr_buf_free(&z);
        return NULL;
    }
    return (char *)pfr_buf_steal(&z, outlen);
}

static bool accepts_gzip(struct MHD_Connection *c)
{
    const char *ae =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return ae && strstr(ae, "gzip");
}

static void add_common_headers(struct MHD_Response *r, const char *type, bool page)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, page ? "no-cache" : "no-store");
    /* Nothing but this server: no CDN, no font, no beacon can load even by mistake. */
    if (page)
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'none'; script-src 'self'; style-src 'self'; "
                                "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                "form-action 'none'; frame-ancestors 'none'");
}

/* Queue body (static when !owned, else malloc'ed and taken over). */
static enum MHD_Result send_body(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *body, size_t len, bool owned, bool page,
                                 unsigned retry_after)
{
    size_t zlen = 0;
    char *z = len >= GZIP_MIN_SIZE && accepts_gzip(c) ? gzip_copy(body, len, &zlen) : NULL;
    struct MHD_Response *r;
    if (z) {
        if (owned)
            free((char *)body);
        r = MHD_create_response_from_buffer(zlen, z, MHD_RESPMEM_MUST_FREE);
    } else {
        r = MHD_create_response_from_buffer(len, (void *)body,
                                            owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        free(z ? z : owned ? (char *)body : NULL);
        return MHD_NO;
    }
    add_common_headers(r, type, page);
    if (len >= GZIP_MIN_SIZE)
        MHD_add_response_header(r, "Vary", "Accept-Encoding");
    if (z)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    if (retry_after) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%u", retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_response(struct MHD_Connection *c, pfr_serve_response *resp)
{
    char *b = resp->body;
    resp->body = NULL;
    return send_body(c, resp->status, resp->content_type, b, resp->len, true, false,
                     resp->retry_after);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    pfr_serve_response r = {0};
    if (pfr_serve_response_error(&r, status, "%s", msg) < 0)
        return MHD_NO;
    return send_response(c, &r);
}

/* ---- the page ---- */
static const struct asset {
    const char *path;
    const char *type;
    const char *data;
} assets[] = {
    {"/", "text/html; charset=utf-8", pfr_asset_serve_html},
    {"/index.html", "text/html; charset=utf-8", pfr_asset_serve_html},
    {"/assets/serve.js", "text/javascript; charset=utf-8", pfr_asset_serve_js},
    {"/assets/serve.css", "text/css; charset=utf-8", pfr_asset_serve_css},
    {"/assets/flame.js", "text/javascript; charset=utf-8", pfr_asset_flame_js},
    {"/assets/flame.css", "text/css; charset=utf-8", pfr_asset_flame_css},
};

static const struct asset *find_asset(const char *url)
{
    for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++)
        if (strcmp(assets[i].path, url) == 0)
            return &assets[i];
    return NULL;
}

/* ---- DNS rebinding: on loopback, only loopback names may be in Host ---- */
static bool host_allowed(const pfr_serve *s, struct MHD_Connection *c)
{
    if (!s->loopback)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!h)
        return true; /* HTTP/1.0 */
    char name[256];
    size_t n;
    if (h[0] == '[') {
        const char *e = strchr(h, ']');
        n = e ? (size_t)(e - h - 1) : 0;
        h++;
    } else {
        const char *e = strchr(h, ':');
        n = e ? (size_t)(e - h) : strlen(h);
    }
    if (n == 0 || n >= sizeof(name))
        return false;
    memcpy(name, h, n);
    name[n] = '\0';
    size_t len = strlen(name);
    if (strcasecmp(name, "localhost") == 0 ||
        (len > 10 && strcasecmp(name + len - 10, ".localhost") == 0))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, name, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, name, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* ---- requests ---- */
typedef struct arg_list {
    pfr_kv kv[MAX_ARGS];
    size_t n;
    bool overflow;
} arg_list;

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    arg_list *a = cls;
    if (a->n == MAX_ARGS) {
        a->overflow = true;
        return MHD_NO;
    }
    a->kv[a->n++] = (pfr_kv){.key = key, .value = value ? value : ""};
    return MHD_YES;
}

static enum MHD_Result serve_api(pfr_serve *s, struct MHD_Connection *c, const char *url)
{
    arg_list a = {.n = 0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &a);
    if (a.overflow)
        return send_error(c, 400, "too many arguments");
    pfr_serve_response resp;
    if (pfr_serve_jobs_call(s->jobs, url, a.kv, a.n, pfr_time_now_ns(), &resp) < 0 || !resp.body)
        return MHD_NO;
    return send_response(c, &resp);
}

/* ---- the page's first data, started with the page ---- */
static const char *first_arg(const arg_list *a, const char *key)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->kv[i].key, key) == 0)
            return a->kv[i].value;
    return NULL;
}

/* A time of the URL as serve.js sends it back: String(Math.round(v * 1000) / 1000). false unless
 * a plain decimal number (so parseFloat in the page reads the same value). */
static bool page_time(const char *s, char *buf, size_t len)
{
    if (!s || !*s || s[strspn(s, "0123456789.")] != '\0')
        return false;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= 0 && v < 1e11))
        return false;
    snprintf(buf, len, "%.3f", round(v * 1000) / 1000);
    char *p = buf + strlen(buf) - 1;
    while (*p == '0')
        *p-- = '\0';
    if (*p == '.')
        *p = '\0';
    return true;
}

/* The page at a URL naming its view (service, from, to; serve.js's readUrl) asks for that view's
 * flame graph first thing: start it now, while the browser loads the page and its script. The
 * arguments are the ones serve.js sends (service, type, label..., from, to), so its call finds
 * this one in flight or its answer kept. A comparison, or anything else, is left to the page. */
static void prefetch_view(pfr_serve *s, struct MHD_Connection *c)
{
    arg_list a = {.n = 0}, flame = {.n = 0};
    char from[32], to[32];
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &a);
    const char *svc = first_arg(&a, "service"), *type = first_arg(&a, "type");
    const char *mode = first_arg(&a, "mode");
    if (a.overflow || !svc || !*svc || (mode && strcmp(mode, "compare") == 0) ||
        !page_time(first_arg(&a, "from"), from, sizeof(from)) ||
        !page_time(first_arg(&a, "to"), to, sizeof(to)) || strtod(to, NULL) <= strtod(from, NULL))
        return;
    flame.kv[flame.n++] = (pfr_kv){"service", svc};
    if (type && *type)
        flame.kv[flame.n++] = (pfr_kv){"type", type};
    for (size_t i = 0; i < a.n && flame.n < MAX_ARGS - 2; i++) {
        const char *eq = strchr(a.kv[i].value, '=');
        if (strcmp(a.kv[i].key, "label") == 0 && eq && eq != a.kv[i].value)
            flame.kv[flame.n++] = a.kv[i];
    }
    flame.kv[flame.n++] = (pfr_kv){"from", from};
    flame.kv[flame.n++] = (pfr_kv){"to", to};
    pfr_serve_jobs_prefetch(s->jobs, "/api/flame", flame.kv, flame.n, pfr_time_now_ns());
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    pfr_serve *s = cls;
    if (!*con_cls) { /* headers only so far; the next call has the whole request */
        *con_cls = s;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        pfr_serve_guard_answering(s->guard, ci ? ci->socket_context : NULL);
        return MHD_YES;
    }
    if (*upload_size) { /* a body: nothing here takes one; drain it and answer 405/400 below */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_error(c, 405, "only GET and HEAD are served");
    if (!host_allowed(s, c))
        return send_error(c, 403,
                          "Host not allowed: pfr serve on a loopback address answers to localhost "
                          "and loopback addresses only (open it as http://localhost:PORT/)");
    if (pfr_serve_api_path(url))
        return serve_api(s, c, url);
    const struct asset *a = find_asset(url);
    if (a && a->data == pfr_asset_serve_html && strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        prefetch_view(s, c);
    if (a)
        return send_body(c, 200, a->type, a->data, strlen(a->data), false, true, 0);
    return send_error(c, 404, "not found");
}

/* ---- connections: each under the guard's deadlines ---- */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    pfr_serve *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context =
            fd ? pfr_serve_guard_open(s->guard, fd->connect_fd, addr ? addr->client_addr : NULL)
               : NULL;
    } else {
        pfr_serve_guard_close(s->guard, *socket_context);
        *socket_context = NULL;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)con_cls;
    (void)toe;
    pfr_serve *s = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pfr_serve_guard_waiting(s->guard, ci ? ci->socket_context : NULL);
}

/* ---- life cycle ---- */
static void format_url(pfr_serve *s, const struct sockaddr_storage *sa)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof(host));
    else
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
    snprintf(s->url, sizeof(s->url),
             sa->ss_family == AF_INET6 ? "http://[%s]:%u/" : "http://%s:%u/", host, s->port);
}

int pfr_serve_start(const pfr_serve_config *cfg, pfr_serve **out, char *err, size_t errlen)
{
    struct sockaddr_storage sa;
    size_t salen = 0;
    int rc = pfr_serve_parse_listen(cfg->listen ? cfg->listen : PFR_SERVE_DEFAULT_LISTEN, &sa,
                                    &salen, err, errlen);
    if (rc < 0)
        return rc;
    pfr_serve *s = calloc(1, sizeof(*s));
    if (!s || !(s->store_path = strdup(cfg->store_path))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->api.store_path = s->store_path;
    s->api.limits = pfr_serve_limits_resolve(&cfg->limits);
    s->loopback = pfr_serve_is_loopback(&sa);
    s->jobs = pfr_serve_jobs_new(&s->api);
    const pfr_serve_limits *l = &s->api.limits;
    int fd = s->jobs ? pfr_serve_guard_new(l->max_conns, l->max_conns_per_ip, l->header_timeout_ns,
                                           l->request_timeout_ns, &s->guard)
                     : -ENOMEM;
    if (fd == 0)
        fd = bind_socket(&sa, salen, &s->port, err, errlen);
    else
        snprintf(err, errlen, "out of memory");
    if (fd < 0) {
        pfr_serve_stop(s);
        return fd;
    }
    format_url(s, &sa);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* The connection limits are the guard's (it closes idle connections to make room, where
     * libmicrohttpd would refuse the new one): its own limit is only the guard's capacity. */
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->port, NULL, NULL, handle, s,
                              MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                              pfr_serve_guard_capacity(s->guard), MHD_OPTION_CONNECTION_TIMEOUT,
                              l->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)(128 * 1024), MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->mhd) { /* libmicrohttpd closes the socket it was given */
        snprintf(err, errlen, "cannot start the HTTP server (libmicrohttpd)");
        pfr_serve_stop(s);
        return -EIO;
    }
    *out = s;
    return 0;
}

unsigned pfr_serve_port(const pfr_serve *s)
{
    return s->port;
}

const char *pfr_serve_url(const pfr_serve *s)
{
    return s->url;
}

bool pfr_serve_loopback(const pfr_serve *s)
{
    return s->loopback;
}

void pfr_serve_conn_stats(pfr_serve *s, uint64_t *cut, uint64_t *evicted, uint64_t *refused)
{
    pfr_serve_guard_stats st = pfr_serve_guard_get_stats(s->guard);
    *cut = st.cut;
    *evicted = st.evicted;
    *refused = st.refused;
}

void pfr_serve_stop(pfr_serve *s)
{
    if (!s)
        return;
    if (s->mhd)
        MHD_stop_daemon(s->mhd);    /* waits for the connection threads */
    pfr_serve_guard_free(s->guard); /* after them: no connection uses a slot any more */
    pfr_serve_jobs_free(s->jobs);   /* waits for abandoned workers */
    free(s->store_path);
    free(s);
}
