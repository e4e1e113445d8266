/* The HTTP stand-in of the resolver's tests (id_testsrv.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "id_testsrv.h"

struct ts_server {
    int fd;
    const struct ts_route *routes;
    size_t n;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    unsigned requests;
    char auth[512];
};

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* the client may hang up */
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Read the request head; false if the peer went away first. */
static bool read_head(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r <= 0)
            return false;
        len += (size_t)r;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            return true;
    }
    return false;
}

static void header(const char *head, const char *name, char *out, size_t len)
{
    out[0] = '\0';
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
            const char *v = p + 3 + nl;
            while (*v == ' ')
                v++;
            snprintf(out, len, "%.*s", (int)strcspn(v, "\r\n"), v);
            return;
        }
    }
}

static void serve_one(struct ts_server *s, int c)
{
    char head[16384], target[4096] = "";
    if (!read_head(c, head, sizeof(head)) || sscanf(head, "GET %4095s HTTP/1.", target) != 1)
        return;
    const struct ts_route *r = NULL;
    for (size_t i = 0; i < s->n && !r; i++)
        if (strcmp(s->routes[i].path, target) == 0)
            r = &s->routes[i];
    pthread_mutex_lock(&s->mu);
    s->requests++;
    header(head, "Authorization", s->auth, sizeof(s->auth));
    pthread_mutex_unlock(&s->mu);
    if (r && r->hang) {
        while (!atomic_load(&s->stop))
            usleep(10000);
        return;
    }
    int status = r ? r->status : 404;
    const char *body = r ? r->body : "{\"message\":\"No such container\"}";
    size_t blen = r && r->body_len ? r->body_len : strlen(body);
    char h[256];
    int hl = snprintf(h, sizeof(h),
                      "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, blen);
    write_all(c, h, (size_t)hl);
    write_all(c, body, blen);
}

static void *loop(void *arg)
{
    struct ts_server *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            continue;
        serve_one(s, c);
        close(c);
    }
    return NULL;
}

static int start(int fd, const struct ts_route *routes, size_t n, struct ts_server **out)
{
    struct ts_server *s = calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        return -ENOMEM;
    }
    s->fd = fd;
    s->routes = routes;
    s->n = n;
    atomic_init(&s->stop, false);
    pthread_mutex_init(&s->mu, NULL);
    if (listen(fd, 16) != 0 || pthread_create(&s->thread, NULL, loop, s) != 0) {
        int e = errno ? errno : EAGAIN;
        close(fd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return -e;
    }
    *out = s;
    return 0;
}

int ts_start_unix(const char *path, const struct ts_route *routes, size_t n, struct ts_server **out)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return -ENAMETOOLONG;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return start(fd, routes, n, out);
}

int ts_start_tcp(const struct ts_route *routes, size_t n, int *port, struct ts_server **out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *port = ntohs(a.sin_port);
    return start(fd, routes, n, out);
}

unsigned ts_requests(struct ts_server *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->requests;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ts_last_auth(struct ts_server *s, char *buf, size_t len)
{
    pthread_mutex_lock(&s->mu);
    snprintf(buf, len, "%s", s->auth);
    pthread_mutex_unlock(&s->mu);
}

void ts_stop(struct ts_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
