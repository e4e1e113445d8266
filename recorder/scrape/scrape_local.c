/* Local discovery of Go pprof servers (see scrape_local.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfr_identity.h"
#include "pfr_vec.h"
#include "scrape_elf.h"
#include "scrape_local.h"
#include "pfr_fsguard.h"
#include "scrape_netns.h"
#include "scrape_procnet.h"

#define MAX_PORTS    16    /* listening ports considered per process */
#define MAX_EXES     4096  /* executables whose verdict is cached */
#define MAX_LISTEN   65536 /* LISTEN entries read from one tcp table */
#define MAX_FDS      65536 /* descriptors looked at per process */
#define MAX_PROC_NET (64u << 20)

struct lport {
    char host[64];
    unsigned port;
    bool probed;
    bool listening; /* in the last scan */
};

struct lproc {
    pid_t pid;
    uint64_t start;
    bool seen;
    char exe_base[64];
    struct lport ports[MAX_PORTS];
    size_t nports;
    int confirmed;                /* index in ports, or -1 */
    uint64_t netns;               /* inode of its network namespace when not ours, else 0 */
    int netns_fd;                 /* /proc/PID/ns/net when netns != 0, else -1 */
    bool consent_read, opted_out; /* its environment read; it refuses profiling: no scrape */
};

struct exe_verdict {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool pprof;
};

struct sc_local {
    char *proc_root;
    struct pfr_fsguard *fsguard; /* borrowed; NULL: executables opened directly */
    struct sc_netns *ns;
    struct lproc *procs;
    size_t nprocs, cap_procs;
    struct exe_verdict *exes;
    size_t nexes, cap_exes;
    struct sc_local_probe *probes;
    size_t nprobes, cap_probes;
};

static void proc_reset(struct lproc *p, pid_t pid, uint64_t start)
{
    if (p->netns_fd >= 0)
        close(p->netns_fd);
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->start = start;
    p->confirmed = -1;
    p->netns_fd = -1;
}

int pfr_scrape_local_new(const char *proc_root, struct pfr_fsguard *fsguard, struct sc_netns *ns,
                         struct sc_local **out)
{
    struct sc_local *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->ns = ns;
    l->fsguard = fsguard;
    l->proc_root = strdup(proc_root ? proc_root : "/proc");
    if (!l->proc_root) {
        free(l);
        return -ENOMEM;
    }
    *out = l;
    return 0;
}

void pfr_scrape_local_free(struct sc_local *l)
{
    if (!l)
        return;
    free(l->proc_root);
    for (size_t i = 0; i < l->nprocs; i++)
        if (l->procs[i].netns_fd >= 0)
            close(l->procs[i].netns_fd);
    free(l->procs);
    free(l->exes);
    free(l->probes);
    free(l);
}

bool pfr_scrape_local_is_pprof_index(const unsigned char *body, size_t len)
{
    return body && memmem(body, len, "/debug/pprof/", 13) && memmem(body, len, "goroutine", 9);
}

/* starttime (field 22) of /proc/PID/stat; the comm may hold spaces and parentheses. */
static int read_starttime(const char *root, pid_t pid, uint64_t *start)
{
    char path[512], *text = NULL;
    snprintf(path, sizeof(path), "%s/%d/stat", root, (int)pid);
    int rc = pfr_scrape_read_file(path, 4096, &text, NULL);
    if (rc)
        return rc;
    char *p = strrchr(text, ')');
    rc = -EBADMSG;
    if (p) {
        p++;
        for (int field = 3; field < 22 && p; field++) {
            p = strchr(p + 1, ' ');
        }
        if (p && isdigit((unsigned char)p[1])) {
            *start = strtoull(p + 1, NULL, 10);
            rc = 0;
        }
    }
    free(text);
    return rc;
}

static void exe_base(const char *root, pid_t pid, char *buf, size_t len)
{
    char path[512], target[4096];
    snprintf(path, sizeof(path), "%s/%d/exe", root, (int)pid);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    buf[0] = '\0';
    if (n > 0) {
        target[n] = '\0';
        char *del = strstr(target, " (deleted)");
        if (del && del[10] == '\0')
            *del = '\0';
        const char *b = strrchr(target, '/');
        pfr_scrape_copy(buf, len, b ? b + 1 : target);
    }
    if (!buf[0] || !pfr_scrape_label_value_ok(buf)) {
        char *comm = NULL;
        snprintf(path, sizeof(path), "%s/%d/comm", root, (int)pid);
        if (pfr_scrape_read_file(path, 256, &comm, NULL) == 0) {
            comm[strcspn(comm, "\n")] = '\0';
            for (char *c = comm; *c; c++)
                if ((unsigned char)*c <= ' ' || *c == 0x7f)
                    *c = '_';
            pfr_scrape_copy(buf, len, comm);
            free(comm);
        }
    }
    if (!buf[0])
        snprintf(buf, len, "pid-%d", (int)pid);
}

/* Remember the verdict on the executable sb describes; returns it. */
static int remember(struct sc_local *l, const struct stat *sb, bool pprof)
{
    if (l->nexes == MAX_EXES)
        l->nexes = 0; /* forget them all rather than grow */
    if (PFR_VEC_RESERVE(l->exes, l->cap_exes, l->nexes + 1))
        return pprof;
    l->exes[l->nexes++] = (struct exe_verdict){.dev = sb->st_dev,
                                               .ino = sb->st_ino,
                                               .size = sb->st_size,
                                               .mtime = sb->st_mtim,
                                               .pprof = pprof};
    return pprof;
}

/* Cached verdict for an executable, inspecting it when new. -1: cannot tell now. */
static int exe_pprof(struct sc_local *l, const pfr_exe *x, struct sc_local_scan_stats *st)
{
    const struct stat *sb = &x->st;
    if (!S_ISREG(sb->st_mode))
        return -1;
    for (size_t i = 0; i < l->nexes; i++) {
        const struct exe_verdict *v = &l->exes[i];
        if (v->dev == sb->st_dev && v->ino == sb->st_ino && v->size == sb->st_size &&
            v->mtime.tv_sec == sb->st_mtim.tv_sec && v->mtime.tv_nsec == sb->st_mtim.tv_nsec)
            return v->pprof;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/%d/exe", l->proc_root, (int)x->pid);
    /* on a remote file system only the guard's worker touches it (and checks dev:inode) */
    bool remote = l->fsguard && !pfr_fsguard_local(l->fsguard, x->pid, sb->st_dev);
    int fd = remote ? pfr_fsguard_copy(l->fsguard, path, sb->st_dev, sb->st_ino)
                    : open(path, O_RDONLY | O_CLOEXEC);
    if (remote && pfr_fsguard_copy_final(fd))
        return remember(l, sb, false); /* never copied: not asked again */
    if (fd < 0)
        return -1; /* a copy under way (-EINPROGRESS): taken at the next scan */
    struct stat now;
    if (!remote && (fstat(fd, &now) < 0 || now.st_dev != sb->st_dev || now.st_ino != sb->st_ino)) {
        close(fd); /* exec'ed since the scan: the next scan tells */
        return -1;
    }
    struct sc_file f = pfr_scrape_fd_file(fd, (uint64_t)sb->st_size);
    struct sc_elf_info info;
    int rc = pfr_scrape_elf_inspect(&f, &info, NULL, 0);
    close(fd);
    if (rc == -EBADMSG)
        st->bad_binaries++;
    else if (rc && rc != -ENOEXEC)
        return -1; /* a read error: try again next scan */
    return remember(l, sb, rc == 0 && info.is_go && info.pprof);
}

static uint64_t netns_of(const char *root, const char *who)
{
    char path[512];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/%s/ns/net", root, who);
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

/* Open the network namespace of pid, checking it is still the one (inode ino) scanned. */
static int open_netns(const char *root, pid_t pid, uint64_t ino, int *out)
{
    char path[512];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/%d/ns/net", root, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_ino != ino) {
        close(fd);
        return -ESRCH;
    }
    *out = fd;
    return 0;
}

static struct lproc *proc_entry(struct sc_local *l, pid_t pid, uint64_t start)
{
    for (size_t i = 0; i < l->nprocs; i++) {
        struct lproc *p = &l->procs[i];
        if (p->pid != pid)
            continue;
        if (p->start != start) /* pid reused: a new process */
            proc_reset(p, pid, start);
        return p;
    }
    if (PFR_VEC_RESERVE(l->procs, l->cap_procs, l->nprocs + 1))
        return NULL;
    struct lproc *p = &l->procs[l->nprocs++];
    p->netns_fd = -1;
    proc_reset(p, pid, start);
    return p;
}

static int read_listen(const char *root, pid_t pid, struct sc_listen **v, size_t *n)
{
    static const char *const files[2] = {"tcp", "tcp6"};
    for (int i = 0; i < 2; i++) {
        char path[512], *text = NULL;
        snprintf(path, sizeof(path), "%s/%d/net/%s", root, (int)pid, files[i]);
        if (pfr_scrape_read_file(path, MAX_PROC_NET, &text, NULL) < 0)
            continue; /* no IPv6, or the process is gone */
        int rc = pfr_scrape_procnet_parse(text, i == 1, v, n, MAX_LISTEN, NULL);
        free(text);
        if (rc)
            return rc;
    }
    return 0;
}

static bool has_inode(const uint64_t *v, size_t n, uint64_t ino)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] == ino)
            return true;
        if (v[mid] < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Refresh p's listening ports, keeping what was learnt about ports still there. */
static void update_ports(struct sc_local *l, struct lproc *p)
{
    struct sc_listen *ls = NULL;
    size_t nls = 0, nino = 0;
    uint64_t *inodes = NULL;
    for (size_t i = 0; i < p->nports; i++)
        p->ports[i].listening = false;
    if (read_listen(l->proc_root, p->pid, &ls, &nls) == 0 && nls > 0 &&
        pfr_scrape_proc_socket_inodes(l->proc_root, p->pid, &inodes, &nino, MAX_FDS) == 0) {
        for (size_t i = 0; i < nls; i++) {
            if (!has_inode(inodes, nino, ls[i].inode))
                continue;
            char host[64];
            if (!pfr_scrape_listen_host(&ls[i], host, sizeof(host)))
                continue;
            size_t j;
            for (j = 0; j < p->nports; j++)
                if (p->ports[j].port == ls[i].port && strcmp(p->ports[j].host, host) == 0)
                    break;
            if (j == p->nports) {
                if (p->nports == MAX_PORTS)
                    continue;
                struct lport *np = &p->ports[p->nports++];
                memset(np, 0, sizeof(*np));
                pfr_scrape_copy(np->host, sizeof(np->host), host);
                np->port = ls[i].port;
            }
            p->ports[j].listening = true;
        }
    }
    free(ls);
    free(inodes);
    /* forget ports that closed (the confirmed one included) */
    size_t k = 0;
    int confirmed = -1;
    for (size_t i = 0; i < p->nports; i++) {
        if (!p->ports[i].listening)
            continue;
        if ((int)i == p->confirmed)
            confirmed = (int)k;
        p->ports[k++] = p->ports[i];
    }
    p->nports = k;
    p->confirmed = confirmed;
}

static int add_probe(struct sc_local *l, size_t proc, size_t port)
{
    if (l->nprobes == l->cap_probes) {
        size_t ncap = l->cap_probes ? l->cap_probes * 2 : 16;
        struct sc_local_probe *nv = realloc(l->probes, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        l->probes = nv;
        l->cap_probes = ncap;
    }
    struct sc_local_probe *pr = &l->probes[l->nprobes++];
    const struct lport *lp = &l->procs[proc].ports[port];
    snprintf(pr->url, sizeof(pr->url), "http://%s:%u/debug/pprof/", lp->host, lp->port);
    pr->netns_fd = l->procs[proc].netns ? l->procs[proc].netns_fd : -1;
    pr->proc = proc;
    pr->port = port;
    return 0;
}

int pfr_scrape_local_scan(struct sc_local *l, const pfr_exe_list *exes,
                          bool (*allow)(void *ctx, pid_t pid), void *ctx,
                          struct sc_local_scan_stats *st)
{
    memset(st, 0, sizeof(*st));
    l->nprobes = 0;
    for (size_t i = 0; i < l->nprocs; i++)
        l->procs[i].seen = false;
    uint64_t my_netns = netns_of(l->proc_root, "self");
    pid_t self = getpid();
    for (size_t x = 0; x < exes->n; x++) {
        pid_t pid = exes->v[x].pid;
        if (pid == self || exe_pprof(l, &exes->v[x], st) != 1)
            continue;
        st->processes++;
        if (allow && !allow(ctx, pid))
            continue;
        char who[32];
        snprintf(who, sizeof(who), "%d", (int)pid);
        uint64_t ns = netns_of(l->proc_root, who);
        bool other = my_netns && ns != my_netns;
        if (other) {
            st->other_netns++;
            if (!l->ns || sc_netns_get_state(l->ns) != SC_NETNS_USABLE) {
                st->netns_skipped++;
                continue;
            }
        }
        uint64_t start;
        if (read_starttime(l->proc_root, pid, &start) < 0)
            continue;
        struct lproc *p = proc_entry(l, pid, start);
        if (!p)
            break;
        uint64_t want_ns = other ? ns : 0;
        if (p->netns != want_ns) { /* it moved (setns): what we knew of its ports is void */
            proc_reset(p, pid, start);
            p->netns = want_ns;
        }
        if (other && p->netns_fd < 0 && open_netns(l->proc_root, pid, ns, &p->netns_fd) < 0) {
            st->netns_skipped++;
            continue; /* not seen: dropped below */
        }
        p->seen = true;
        if (!p->consent_read) { /* once per process: never probed nor scraped if it refuses */
            pfr_identity_consent_read(l->proc_root, pid, PFR_CONSENT_ENVIRON_MAX, &p->opted_out);
            p->consent_read = true;
            st->opted_out += p->opted_out;
        }
        if (p->opted_out)
            continue;
        if (!p->exe_base[0])
            exe_base(l->proc_root, pid, p->exe_base, sizeof(p->exe_base));
        update_ports(l, p);
    }
    /* drop processes that are gone (or no longer qualify), then list the probes */
    size_t k = 0;
    for (size_t i = 0; i < l->nprocs; i++) {
        if (l->procs[i].seen)
            l->procs[k++] = l->procs[i];
        else if (l->procs[i].netns_fd >= 0)
            close(l->procs[i].netns_fd);
    }
    l->nprocs = k;
    for (size_t i = 0; i < l->nprocs; i++) {
        const struct lproc *p = &l->procs[i];
        if (p->confirmed >= 0)
            continue;
        for (size_t j = 0; j < p->nports; j++)
            if (!p->ports[j].probed && add_probe(l, i, j) < 0)
                return -ENOMEM;
    }
    return 0;
}

size_t pfr_scrape_local_probes(struct sc_local *l, const struct sc_local_probe **out)
{
    *out = l->probes;
    return l->nprobes;
}

void pfr_scrape_local_probe_result(struct sc_local *l, const struct sc_local_probe *pr,
                                   const unsigned char *body, size_t len)
{
    if (pr->proc >= l->nprocs || pr->port >= l->procs[pr->proc].nports)
        return;
    struct lproc *p = &l->procs[pr->proc];
    p->ports[pr->port].probed = true;
    if (!pfr_scrape_local_is_pprof_index(body, len))
        return;
    /* several answering ports: the lowest wins, so the choice does not depend on timing */
    if (p->confirmed < 0 || p->ports[pr->port].port < p->ports[p->confirmed].port)
        p->confirmed = (int)pr->port;
}

/* The labels of a target named by container id cid: container.id, and outside Kubernetes the
 * namespace and pod of its Coroot instance (ns and pod hold their values). Returns how many. */
static size_t container_labels(const char *cid, const char *node_name, pfr_kv labels[3], char *ns,
                               size_t nslen, char *pod, size_t podlen)
{
    if (!cid[0] || !pfr_scrape_label_value_ok(cid))
        return 0;
    labels[0] = (pfr_kv){"container.id", cid};
    if (pfr_identity_coroot_instance(cid, node_name, ns, nslen, pod, podlen) != 1 ||
        !pfr_scrape_label_value_ok(ns) || !pfr_scrape_label_value_ok(pod))
        return 1;
    labels[1] = (pfr_kv){"namespace", ns};
    labels[2] = (pfr_kv){"pod", pod};
    return 3;
}

int pfr_scrape_local_wants(struct sc_local *l, const char *node_name,
                           int (*service_for_pid)(void *, pid_t, char *, size_t, char *, size_t),
                           void *ctx, struct sc_wantlist *out)
{
    for (size_t i = 0; i < l->nprocs; i++) {
        const struct lproc *p = &l->procs[i];
        if (p->confirmed < 0)
            continue;
        const struct lport *lp = &p->ports[p->confirmed];
        char url[128], service[SC_MAX_LABEL + 1], cid[SC_MAX_LABEL + 1] = "";
        char ns[SC_MAX_LABEL + 1], pod[SC_MAX_LABEL + 1];
        snprintf(url, sizeof(url), "http://%s:%u", lp->host, lp->port);
        if (!service_for_pid ||
            service_for_pid(ctx, p->pid, service, sizeof(service), cid, sizeof(cid)) != 0 ||
            !pfr_scrape_label_value_ok(service)) {
            pfr_scrape_copy(service, sizeof(service), p->exe_base);
            cid[0] = '\0';
        }
        pfr_kv labels[3];
        size_t nlabels = container_labels(cid, node_name, labels, ns, sizeof(ns), pod, sizeof(pod));
        struct sc_want w;
        int rc = pfr_scrape_want_make(&w, url, service, labels, nlabels, PFR_SCRAPE_LOCAL, p->pid,
                                      p->start, NULL, 0);
        if (rc == -ENOMEM)
            return rc;
        if (rc)
            continue;
        if (p->netns) { /* the same address in another namespace is another target */
            char *key = NULL;
            if (asprintf(&key, "%s\x1fnetns:%llu", w.key, (unsigned long long)p->netns) < 0) {
                pfr_scrape_want_free(&w);
                return -ENOMEM;
            }
            free(w.key);
            w.key = key;
            w.netns = p->netns;
        }
        rc = pfr_scrape_wantlist_push(out, &w);
        if (rc)
            return rc;
    }
    return 0;
}
