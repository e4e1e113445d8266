/* Listening TCP sockets of a process (see scrape_procnet.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scrape_procnet.h"

#define TCP_LISTEN 0x0A

/* Parse exactly n hex digits at *p into *v. */
static bool hex_n(const char **p, size_t n, uint32_t *v)
{
    uint32_t x = 0;
    for (size_t i = 0; i < n; i++) {
        char c = (*p)[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return false;
        x = x << 4 | (uint32_t)d;
    }
    *p += n;
    *v = x;
    return true;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static const char *skip_field(const char *p)
{
    while (*p && *p != ' ' && *p != '\t' && *p != '\n')
        p++;
    return skip_space(p);
}

int pfr_scrape_procnet_parse_line(const char *line, bool v6, struct sc_listen *out)
{
    const char *p = skip_space(line);
    if (!*p || *p == '\n' || strncmp(p, "sl", 2) == 0)
        return 0;
    /* "N:" */
    if (!isdigit((unsigned char)*p))
        return -EBADMSG;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p++ != ':')
        return -EBADMSG;
    p = skip_space(p);
    /* local address */
    struct sc_listen l = {.v6 = v6};
    size_t words = v6 ? 4 : 1;
    for (size_t i = 0; i < words; i++) {
        uint32_t w;
        if (!hex_n(&p, 8, &w))
            return -EBADMSG;
        memcpy(l.addr + 4 * i, &w, 4); /* the kernel prints each word in host order */
    }
    uint32_t port, st;
    if (*p++ != ':' || !hex_n(&p, 4, &port))
        return -EBADMSG;
    l.port = port;
    p = skip_space(p);
    p = skip_field(p); /* remote address */
    if (!hex_n(&p, 2, &st))
        return -EBADMSG;
    p = skip_space(p);
    for (int i = 0; i < 5; i++) { /* queues, timer, retransmits, uid, timeout */
        if (!*p || *p == '\n')
            return -EBADMSG;
        p = skip_field(p);
    }
    if (!isdigit((unsigned char)*p))
        return -EBADMSG;
    uint64_t ino = 0;
    for (; isdigit((unsigned char)*p); p++) {
        if (ino > (UINT64_MAX - 9) / 10)
            return -EBADMSG;
        ino = ino * 10 + (uint64_t)(*p - '0');
    }
    if (st != TCP_LISTEN || l.port == 0 || ino == 0)
        return 0;
    l.inode = ino;
    *out = l;
    return 1;
}

int pfr_scrape_procnet_parse(const char *text, bool v6, struct sc_listen **v, size_t *n, size_t max,
                             size_t *bad)
{
    size_t cap = *n;
    const char *p = text;
    while (*p && *n < max) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        if (len < sizeof(line)) {
            memcpy(line, p, len);
            line[len] = '\0';
            struct sc_listen l;
            int rc = pfr_scrape_procnet_parse_line(line, v6, &l);
            if (rc < 0 && bad)
                (*bad)++;
            if (rc == 1) {
                if (*n == cap) {
                    size_t ncap = cap ? cap * 2 : 16;
                    struct sc_listen *nv = realloc(*v, ncap * sizeof(*nv));
                    if (!nv)
                        return -ENOMEM;
                    *v = nv;
                    cap = ncap;
                }
                (*v)[(*n)++] = l;
            }
        } else if (bad) {
            (*bad)++;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

bool pfr_scrape_listen_host(const struct sc_listen *l, char *buf, size_t len)
{
    static const uint8_t zero[16] = {0};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char tmp[INET6_ADDRSTRLEN];
    const uint8_t *v4 = NULL;
    if (!l->v6) {
        v4 = l->addr;
    } else if (memcmp(l->addr, mapped, 12) == 0) {
        v4 = l->addr + 12;
    } else if (memcmp(l->addr, zero, 16) == 0) {
        snprintf(buf, len, "[::1]");
        return true;
    } else if (l->addr[0] == 0xfe && (l->addr[1] & 0xc0) == 0x80) {
        return false; /* link-local: needs an interface */
    } else {
        if (!inet_ntop(AF_INET6, l->addr, tmp, sizeof(tmp)))
            return false;
        snprintf(buf, len, "[%s]", tmp);
        return true;
    }
    if (memcmp(v4, zero, 4) == 0) {
        snprintf(buf, len, "127.0.0.1");
        return true;
    }
    if (!inet_ntop(AF_INET, v4, tmp, sizeof(tmp)))
        return false;
    snprintf(buf, len, "%s", tmp);
    return true;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int pfr_scrape_proc_socket_inodes(const char *proc_root, pid_t pid, uint64_t **out, size_t *n,
                                  size_t max)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%d/fd", proc_root, (int)pid);
    *out = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int dfd = dirfd(d);
    uint64_t *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) && cnt < max) {
        if (de->d_name[0] == '.')
            continue;
        char link[64];
        ssize_t ln = readlinkat(dfd, de->d_name, link, sizeof(link) - 1);
        if (ln <= 0)
            continue;
        link[ln] = '\0';
        unsigned long long ino;
        char tail;
        if (sscanf(link, "socket:[%llu%c", &ino, &tail) != 2 || tail != ']')
            continue;
        if (cnt == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            uint64_t *nv = realloc(v, ncap * sizeof(*nv));
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        v[cnt++] = ino;
    }
    closedir(d);
    if (rc) {
        free(v);
        return rc;
    }
    if (cnt)
        qsort(v, cnt, sizeof(*v), u64_cmp);
    *out = v;
    *n = cnt;
    return 0;
}
