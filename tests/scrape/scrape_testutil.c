#include "scrape_testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <microhttpd.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- child processes ---- */

static int spawn(tu_proc *p, char *const argv[], bool netns);

int pfr_tu_spawn(tu_proc *p, char *const argv[])
{
    return spawn(p, argv, false);
}

int pfr_tu_spawn_netns(tu_proc *p, char *const argv[])
{
    return spawn(p, argv, true);
}

/* Bring the loopback interface of this network namespace up. */
static int loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    close(s);
    return rc;
}

static int spawn(tu_proc *p, char *const argv[], bool netns)
{
    int fds[2];
    memset(p, 0, sizeof(*p));
    p->pid = -1;
    p->out = -1;
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        if (netns && (unshare(CLONE_NEWNET) < 0 || loopback_up() < 0))
            _exit(125);
        dup2(fds[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    p->pid = pid;
    p->out = fds[0];
    return 0;
}

bool pfr_tu_read_value(tu_proc *p, const char *key, char *buf, size_t len, int timeout_ms)
{
    char line[512];
    size_t n = 0;
    size_t kl = strlen(key);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long spent = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= timeout_ms)
            return false;
        struct pollfd pfd = {.fd = p->out, .events = POLLIN};
        if (poll(&pfd, 1, (int)(timeout_ms - spent)) <= 0)
            return false;
        char c;
        ssize_t r = read(p->out, &c, 1);
        if (r <= 0)
            return false;
        if (c != '\n') {
            if (n + 1 < sizeof(line))
                line[n++] = c;
            continue;
        }
        line[n] = '\0';
        n = 0;
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
            snprintf(buf, len, "%s", line + kl + 1);
            return true;
        }
    }
}

void pfr_tu_kill(tu_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    if (p->out >= 0)
        close(p->out);
    p->pid = -1;
    p->out = -1;
}

unsigned pfr_tu_port_of(const char *hostport)
{
    const char *c = strrchr(hostport, ':');
    return c ? (unsigned)atoi(c + 1) : 0;
}

/* ---- synthetic profiles ---- */

static int64_t add_stack(pfr_profile *p, const char *leaf, const int64_t *v)
{
    uint32_t locs[2];
    locs[0] = (uint32_t)pfr_profile_add_frame(p, leaf, "/src/good/main.go", 42);
    locs[1] = (uint32_t)pfr_profile_add_frame(p, "main.main", "/src/good/main.go", 10);
    return pfr_profile_add_sample(p, locs, 2, v, NULL, 0);
}

int pfr_tu_make_profile(int ep, int64_t n, uint8_t **out, size_t *len)
{
    pfr_profile *p = pfr_profile_new();
    if (!p)
        return -ENOMEM;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t t = (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec;
    pfr_profile_set_time(p, t, 0);
    switch (ep) {
    case PFR_SCRAPE_CPU: {
        pfr_profile_add_sample_type(p, "samples", "count");
        pfr_profile_add_sample_type(p, "cpu", "nanoseconds");
        pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
        pfr_profile_set_time(p, t - 1000000000ll, 1000000000ll);
        int64_t v[2] = {10, 100000000};
        add_stack(p, "main.goodCPU", v);
        break;
    }
    case PFR_SCRAPE_HEAP: {
        pfr_profile_add_sample_type(p, "alloc_objects", "count");
        pfr_profile_add_sample_type(p, "alloc_space", "bytes");
        pfr_profile_add_sample_type(p, "inuse_objects", "count");
        pfr_profile_add_sample_type(p, "inuse_space", "bytes");
        pfr_profile_set_period(p, "space", "bytes", 524288);
        int64_t v[4] = {10 * n, 10240 * n, 5, 5120};
        add_stack(p, "main.goodAlloc", v);
        break;
    }
    case PFR_SCRAPE_GOROUTINE: {
        pfr_profile_add_sample_type(p, "goroutine", "count");
        int64_t v[1] = {8};
        add_stack(p, "main.goodPark", v);
        break;
    }
    case PFR_SCRAPE_BLOCK:
    case PFR_SCRAPE_MUTEX: {
        pfr_profile_add_sample_type(p, "contentions", "count");
        pfr_profile_add_sample_type(p, "delay", "nanoseconds");
        int64_t v[2] = {3 * n, 3000 * n};
        add_stack(p, ep == PFR_SCRAPE_BLOCK ? "main.goodBlock" : "main.goodMutex", v);
        break;
    }
    default:
        pfr_profile_free(p);
        return -EINVAL;
    }
    int rc = pfr_profile_error(p);
    if (!rc)
        rc = pfr_profile_encode(p, true, out, len);
    pfr_profile_free(p);
    return rc;
}

/* ---- the test server ---- */

#define NMODES 10
static const char *const modes[NMODES] = {"good", "garbage",  "huge",  "hugechunked", "slow",
                                          "e500", "redirect", "flaky", "pods",        "other"};

struct tu_server {
    struct MHD_Daemon *d;
    unsigned port;
    pthread_mutex_t mu;
    unsigned requests[NMODES], inflight[NMODES], max_inflight[NMODES];
    int64_t good_count[PFR_SCRAPE_NUM_ENDPOINTS];
    int64_t flaky_count[PFR_SCRAPE_NUM_ENDPOINTS];
    int flaky_failures;
    char *pods, *token;
    char *cert, *key;
};

static int mode_index(const char *url, const char **rest)
{
    const char *p = url[0] == '/' ? url + 1 : url;
    size_t n = strcspn(p, "/");
    if (n == 5 && strncmp(p, "debug", 5) == 0) { /* a pod's http://IP:PORT/debug/pprof/... */
        *rest = p + n;
        return 0;
    }
    for (int i = 0; i < NMODES - 1; i++) {
        if (strlen(modes[i]) == n && strncmp(p, modes[i], n) == 0) {
            *rest = p + n;
            return i;
        }
    }
    *rest = p + n;
    return NMODES - 1;
}

static int endpoint_of(const char *rest)
{
    const char *last = strrchr(rest, '/');
    last = last ? last + 1 : rest;
    static const char *const names[PFR_SCRAPE_NUM_ENDPOINTS] = {"profile", "heap", "goroutine",
                                                                "block", "mutex"};
    for (int i = 0; i < PFR_SCRAPE_NUM_ENDPOINTS; i++)
        if (strcmp(last, names[i]) == 0)
            return i;
    return -1;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const void *body,
                             size_t len, enum MHD_ResponseMemoryMode mm)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mm);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

struct stream {
    uint64_t total;
    bool slow;
};

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    if (pos >= st->total)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (st->slow) {
        usleep(200000);
        buf[0] = (char)0x1f;
        return 1;
    }
    size_t n = st->total - pos < max ? (size_t)(st->total - pos) : max;
    memset(buf, 'x', n);
    return (ssize_t)n;
}

static enum MHD_Result stream_reply(struct MHD_Connection *c, uint64_t total, bool known, bool slow)
{
    struct stream *st = malloc(sizeof(*st));
    st->total = total;
    st->slow = slow;
    struct MHD_Response *r = MHD_create_response_from_callback(known ? total : MHD_SIZE_UNKNOWN,
                                                               65536, stream_cb, st, free);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result good_reply(struct MHD_Connection *c, int ep, int64_t n)
{
    if (ep < 0)
        return reply(c, 200, "<html>/debug/pprof/ goroutine</html>", 36, MHD_RESPMEM_PERSISTENT);
    uint8_t *body;
    size_t len;
    if (pfr_tu_make_profile(ep, n, &body, &len) != 0)
        return reply(c, 500, "oom", 3, MHD_RESPMEM_PERSISTENT);
    return reply(c, 200, body, len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)method;
    (void)version;
    (void)upload;
    (void)upload_size;
    tu_server *s = cls;
    if (!*con_cls) { /* first call for this request: headers only */
        *con_cls = s;
        return MHD_YES;
    }
    const char *rest;
    int m = mode_index(url, &rest);
    int ep = endpoint_of(rest);
    pthread_mutex_lock(&s->mu);
    s->requests[m]++;
    s->inflight[m]++;
    if (s->inflight[m] > s->max_inflight[m])
        s->max_inflight[m] = s->inflight[m];
    int64_t n = 0;
    bool flaky_fail = false;
    if (ep >= 0 && strcmp(modes[m], "good") == 0)
        n = ++s->good_count[ep];
    if (ep >= 0 && strcmp(modes[m], "flaky") == 0) {
        n = ++s->flaky_count[ep];
        flaky_fail = n <= s->flaky_failures;
    }
    char *pods = s->pods ? strdup(s->pods) : NULL;
    char *token = s->token ? strdup(s->token) : NULL;
    pthread_mutex_unlock(&s->mu);

    /* the CPU profile takes a while, as Go's does: lets the test see parallel requests */
    if (ep == PFR_SCRAPE_CPU && (strcmp(modes[m], "good") == 0))
        usleep(300000);

    enum MHD_Result ret;
    const char *mode = modes[m];
    if (strcmp(mode, "good") == 0) {
        ret = good_reply(c, ep, n);
    } else if (strcmp(mode, "flaky") == 0) {
        ret = flaky_fail ? reply(c, 500, "not yet", 7, MHD_RESPMEM_PERSISTENT)
                         : good_reply(c, ep, n - s->flaky_failures);
    } else if (strcmp(mode, "garbage") == 0) {
        static const char junk[] = "\x0a\xff\xff\xff\xff\x0fthis is not a profile\x12\x99";
        ret = reply(c, 200, junk, sizeof(junk) - 1, MHD_RESPMEM_PERSISTENT);
    } else if (strcmp(mode, "huge") == 0) {
        ret = stream_reply(c, 16u << 20, true, false);
    } else if (strcmp(mode, "hugechunked") == 0) {
        ret = stream_reply(c, 16u << 20, false, false);
    } else if (strcmp(mode, "slow") == 0) {
        ret = stream_reply(c, 100, false, true);
    } else if (strcmp(mode, "e500") == 0) {
        ret = reply(c, 500, "internal error", 14, MHD_RESPMEM_PERSISTENT);
    } else if (strcmp(mode, "redirect") == 0) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        char loc[512];
        snprintf(loc, sizeof(loc), "/good%s", rest);
        MHD_add_response_header(r, "Location", loc);
        ret = MHD_queue_response(c, 302, r);
        MHD_destroy_response(r);
    } else if (strcmp(mode, "pods") == 0) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        char want[512];
        snprintf(want, sizeof(want), "Bearer %s", token ? token : "");
        if (token && (!auth || strcmp(auth, want) != 0))
            ret = reply(c, 401, "Unauthorized", 12, MHD_RESPMEM_PERSISTENT);
        else if (!pods)
            ret = reply(c, 500, "kubelet error", 13, MHD_RESPMEM_PERSISTENT);
        else
            ret = reply(c, 200, strdup(pods), strlen(pods), MHD_RESPMEM_MUST_FREE);
    } else {
        ret = reply(c, 404, "not found", 9, MHD_RESPMEM_PERSISTENT);
    }
    free(pods);
    free(token);
    pthread_mutex_lock(&s->mu);
    s->inflight[m]--;
    pthread_mutex_unlock(&s->mu);
    return ret;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

int pfr_tu_server_start(tu_server **out, const char *cert, const char *key)
{
    tu_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
    if (cert) {
        s->cert = slurp(cert);
        s->key = slurp(key);
        if (!s->cert || !s->key) {
            pfr_tu_server_stop(s);
            return -ENOENT;
        }
        s->d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, handle, s,
                                MHD_OPTION_HTTPS_MEM_CERT, s->cert, MHD_OPTION_HTTPS_MEM_KEY,
                                s->key, MHD_OPTION_END);
    } else {
        s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_END);
    }
    if (!s->d) {
        pfr_tu_server_stop(s);
        return -EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return 0;
}

void pfr_tu_server_stop(tu_server *s)
{
    if (!s)
        return;
    if (s->d)
        MHD_stop_daemon(s->d);
    pthread_mutex_destroy(&s->mu);
    free(s->pods);
    free(s->token);
    free(s->cert);
    free(s->key);
    free(s);
}

unsigned pfr_tu_server_port(const tu_server *s)
{
    return s->port;
}

void pfr_tu_server_set_flaky(tu_server *s, int failures)
{
    pthread_mutex_lock(&s->mu);
    s->flaky_failures = failures;
    pthread_mutex_unlock(&s->mu);
}

void pfr_tu_server_set_pods(tu_server *s, const char *body, const char *token)
{
    pthread_mutex_lock(&s->mu);
    free(s->pods);
    free(s->token);
    s->pods = body ? strdup(body) : NULL;
    s->token = token ? strdup(token) : NULL;
    pthread_mutex_unlock(&s->mu);
}

static int mode_by_name(const char *mode)
{
    for (int i = 0; i < NMODES; i++)
        if (strcmp(modes[i], mode) == 0)
            return i;
    return NMODES - 1;
}

unsigned pfr_tu_server_requests(tu_server *s, const char *mode)
{
    pthread_mutex_lock(&s->mu);
    unsigned v = s->requests[mode_by_name(mode)];
    pthread_mutex_unlock(&s->mu);
    return v;
}

unsigned pfr_tu_server_max_inflight(tu_server *s, const char *mode)
{
    pthread_mutex_lock(&s->mu);
    unsigned v = s->max_inflight[mode_by_name(mode)];
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* ---- store ---- */

int pfr_tu_store_open(char *dir, pfr_store **out)
{
    snprintf(dir, PATH_MAX, "/tmp/pfr-scrape-test-XXXXXX");
    if (!mkdtemp(dir))
        return -errno;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/ring.db", dir);
    char err[256];
    int rc = pfr_store_open(path, NULL, out, err, sizeof(err));
    if (rc)
        fprintf(stderr, "store: %s\n", err);
    return rc;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void pfr_tu_store_remove(char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int64_t pfr_tu_value_of(const pfr_profile *p, int t, const char *fn)
{
    int64_t sum = 0;
    pfr_frame frames[256];
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        size_t n = pfr_profile_sample_frames(p, i, frames, 256);
        if (n > 256)
            n = 256;
        for (size_t j = 0; j < n; j++) {
            if (strcmp(frames[j].function, fn) == 0) {
                sum += pfr_profile_sample_values(p, i)[t];
                break;
            }
        }
    }
    return sum;
}

int pfr_tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    size_t w = fwrite(data, 1, len, f);
    int rc = fclose(f);
    return w == len && rc == 0 ? 0 : -EIO;
}
