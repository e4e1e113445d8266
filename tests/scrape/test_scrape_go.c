/* The scraper against real Go programs built with Debian's Go (tests/scrape/go): what it stores
 * shows the programs' known CPU, allocation, blocking, mutex and goroutine sites; a restarted
 * program resets its deltas; local discovery finds Go pprof servers with no configuration and
 * leaves other listeners alone; a Go program in a network namespace of its own (a container's
 * situation) is scraped at its loopback address from inside that namespace, and when entering
 * it is not permitted or not possible the process is skipped, counted and reported once.
 *
 * usage: test_scrape_go static|restart|local|netns GO_BIN_DIR GO_TOOL */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pfr_scrape.h"
#include "scrape_elf.h"
#include "scrape_netns.h"
#include "scrape_testutil.h"

#define S_NS 1000000000ll

static const char *go_bin_dir, *go_tool;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * S_NS + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    int64_t now = mono_ns();
    if (t > now)
        usleep((useconds_t)((t - now) / 1000));
}

static void start_go(tu_proc *p, const char *prog, const char *flag1, const char *flag2,
                     const char *key, char *addr, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", go_bin_dir, prog);
    char *argv[4] = {path, (char *)flag1, (char *)flag2, NULL};
    if (!flag1)
        argv[1] = NULL;
    assert_int_equal(pfr_tu_spawn(p, argv), 0);
    assert_true(pfr_tu_read_value(p, key, addr, len, 10000));
}

struct body {
    char *data;
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct body *b = ctx;
    char *nd = realloc(b->data, b->len + size * n + 1);
    if (!nd)
        return 0;
    memcpy(nd + b->len, p, size * n);
    b->data = nd;
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

static struct body http_get(const char *url)
{
    struct body b = {0};
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_cleanup(c);
    return b;
}

/* Chunks read back from the ring. */
#define MAX_CHUNKS 256
struct chunk {
    char service[64], type0[64], instance[64], env[16], container_id[64];
    int64_t start, end;
    pfr_profile *p;
};
struct chunks {
    size_t n;
    struct chunk v[MAX_CHUNKS];
};

static const char *kv(const pfr_kv *l, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].key, key) == 0)
            return l[i].value;
    return "";
}

static int on_chunk(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct chunks *cs = ctx;
    assert_true(cs->n < MAX_CHUNKS);
    struct chunk *k = &cs->v[cs->n++];
    snprintf(k->service, sizeof(k->service), "%s", m->service);
    snprintf(k->type0, sizeof(k->type0), "%s", m->types[0]);
    snprintf(k->instance, sizeof(k->instance), "%s", kv(m->labels, m->nlabels, "instance"));
    snprintf(k->container_id, sizeof(k->container_id), "%s",
             kv(m->labels, m->nlabels, "container.id"));
    snprintf(k->env, sizeof(k->env), "%s", kv(m->labels, m->nlabels, "env"));
    k->start = m->start_ns;
    k->end = m->end_ns;
    k->p = pfr_profile_new();
    assert_int_equal(pfr_profile_merge(k->p, p, 0), 0);
    return 0;
}

/* Scrape queue -> a fresh ring -> read back. */
static struct chunks *store_and_read(pfr_scrape *s, char *dir)
{
    pfr_store *st;
    assert_int_equal(pfr_tu_store_open(dir, &st), 0);
    size_t written;
    assert_int_equal(pfr_scrape_store(s, st, &written), 0);
    struct chunks *cs = calloc(1, sizeof(*cs));
    pfr_store_filter f = {0};
    assert_int_equal(pfr_store_scan(st, &f, 0, on_chunk, cs, NULL), 0);
    assert_int_equal(cs->n, written);
    pfr_store_close(st);
    return cs;
}

static void chunks_free(struct chunks *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        pfr_profile_free(cs->v[i].p);
    free(cs);
}

/* Sum of type t's values over chunks of type0 where a frame names fn; *nchunks gets the number
 * of such chunks and *hits those where fn was seen. */
static int64_t sum_of(const struct chunks *cs, const char *type0, int t, const char *fn,
                      size_t *nchunks, size_t *hits)
{
    int64_t sum = 0;
    *nchunks = *hits = 0;
    for (size_t i = 0; i < cs->n; i++) {
        if (strcmp(cs->v[i].type0, type0) != 0)
            continue;
        (*nchunks)++;
        int64_t v = pfr_tu_value_of(cs->v[i].p, t, fn);
        sum += v;
        if (v > 0)
            (*hits)++;
    }
    return sum;
}

/* ---- events ---- */
struct events {
    pthread_mutex_t mu;
    size_t restarted, removed, discovery;
    char msg[512];
};

static void on_event(void *ctx, const pfr_scrape_event *ev)
{
    struct events *e = ctx;
    pthread_mutex_lock(&e->mu);
    if (ev->kind == PFR_SCRAPE_EV_RESTARTED)
        e->restarted++;
    if (ev->kind == PFR_SCRAPE_EV_TARGET_REMOVED)
        e->removed++;
    if (ev->kind == PFR_SCRAPE_EV_DISCOVERY_ERROR) {
        e->discovery++;
        snprintf(e->msg, sizeof(e->msg), "%s", ev->msg);
    }
    pthread_mutex_unlock(&e->mu);
}

/* ---- static target: the stored profiles show the program's known sites ---- */

static void test_static(void **state)
{
    (void)state;
    tu_proc go;
    char addr[64];
    start_go(&go, "pprofsrv", NULL, NULL, "pprof", addr, sizeof(addr));
    const int64_t interval = 2 * S_NS;
    pfr_scrape_opts o = {.interval_ns = interval, .cpu_seconds = 1, .local = PFR_SCRAPE_LOCAL_OFF};
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    char line[256], err[256];
    snprintf(line, sizeof(line), "http://%s service=api env=test", addr);
    assert_int_equal(pfr_scrape_add_target_line(s, line, err, sizeof(err)), 0);
    const int rounds = 3;
    int64_t t0 = mono_ns();
    for (int r = 0; r < rounds; r++) {
        if (r)
            sleep_until(t0 + r * interval);
        assert_int_equal(pfr_scrape_run_once(s), 0);
    }
    /* the program's own cumulative block count, after the last scrape */
    char url[256];
    snprintf(url, sizeof(url), "http://%s/debug/pprof/block", addr);
    struct body b = http_get(url);
    pfr_profile *cum;
    assert_int_equal(pfr_profile_decode((uint8_t *)b.data, b.len, 0, &cum, err, sizeof(err)), 0);
    free(b.data);
    int64_t cum_block =
        pfr_tu_value_of(cum, pfr_profile_find_sample_type(cum, "contentions"), "main.blockSite");
    pfr_profile_free(cum);

    char dir[PATH_MAX];
    struct chunks *cs = store_and_read(s, dir);
    for (size_t i = 0; i < cs->n; i++) {
        assert_string_equal(cs->v[i].service, "api");
        assert_string_equal(cs->v[i].instance, addr);
        assert_string_equal(cs->v[i].env, "test");
        assert_true(cs->v[i].start < cs->v[i].end);
    }
    size_t n, hits;
    int64_t v = sum_of(cs, PFR_SCRAPE_TYPE_CPU, 0, "main.burnCPU", &n, &hits);
    fprintf(stderr, "cpu: %zu chunks, main.burnCPU %lld ns in %zu\n", n, (long long)v, hits);
    if (n != (size_t)rounds) { /* (failed once in a full run, 1 of 3: say why when it does) */
        pfr_scrape_stats st;
        pfr_scrape_get_stats(s, &st);
        const struct {
            const char *name;
            uint64_t v;
        } said[] = {{"rounds", st.rounds},          {"requests", st.requests},
                    {"failed", st.failures},        {"connect", st.connect_errors},
                    {"timeout", st.timeouts},       {"http", st.http_errors},
                    {"invalid", st.invalid},        {"other", st.other_errors},
                    {"backoff", st.skipped_backoff}};
        fprintf(stderr, "scrape:");
        for (size_t i = 0; i < sizeof(said) / sizeof(said[0]); i++)
            fprintf(stderr, " %s=%llu", said[i].name, (unsigned long long)said[i].v);
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, rounds);
    assert_true(hits >= 1 && v > 0);
    /* heap: in-use space at allocSite at once, allocations as deltas after the first */
    v = sum_of(cs, PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS, 3, "main.allocSite", &n, &hits);
    fprintf(stderr, "heap: %zu chunks, main.allocSite in use %lld bytes\n", n, (long long)v);
    assert_int_equal(n, rounds);
    assert_true(hits >= 1);
    v = sum_of(cs, PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS, 1, "main.allocSite", &n, &hits);
    fprintf(stderr, "heap: main.allocSite allocated %lld bytes in %zu deltas\n", (long long)v,
            hits);
    assert_true(hits >= 1 && v > 0);
    v = sum_of(cs, PFR_SCRAPE_TYPE_GOROUTINES, 0, "main.parkedGoroutine", &n, &hits);
    assert_int_equal(n, rounds);
    assert_int_equal(v, 8 * rounds);
    /* block and mutex: deltas, the first scrape being the baseline */
    int64_t blocked = sum_of(cs, PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS, 0, "main.blockSite", &n, &hits);
    fprintf(stderr, "block: %zu chunks, main.blockSite %lld contentions (cumulative %lld)\n", n,
            (long long)blocked, (long long)cum_block);
    assert_int_equal(n, rounds - 1);
    assert_int_equal(hits, rounds - 1);
    assert_true(blocked > 0 && blocked < cum_block);
    v = sum_of(cs, PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS, 1, "main.blockSite", &n, &hits);
    assert_true(v > 0);
    v = sum_of(cs, PFR_SCRAPE_TYPE_MUTEX_CONTENTIONS, 0, "main.mutexSite", &n, &hits);
    fprintf(stderr, "mutex: %zu chunks, main.mutexSite %lld contentions\n", n, (long long)v);
    assert_int_equal(n, rounds - 1);
    assert_int_equal(hits, rounds - 1);
    /* the block deltas tile time: each starts where the previous ended */
    int64_t prev_end = 0;
    const pfr_profile *block = NULL;
    for (size_t i = 0; i < cs->n; i++) {
        if (strcmp(cs->v[i].type0, PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS) != 0)
            continue;
        if (prev_end)
            assert_int_equal(cs->v[i].start, prev_end);
        prev_end = cs->v[i].end;
        block = cs->v[i].p;
    }

    /* what we store is pprof that `go tool pprof` reads, with Coroot's type names */
    uint8_t *enc;
    size_t len;
    assert_int_equal(pfr_profile_encode(block, true, &enc, &len), 0);
    char file[PATH_MAX + 32], cmd[6 * PATH_MAX];
    snprintf(file, sizeof(file), "%s/block.pb.gz", dir);
    assert_int_equal(pfr_tu_write_file(file, enc, len), 0);
    free(enc);
    snprintf(cmd, sizeof(cmd), "HOME=%s GOCACHE=%s/gocache '%s' tool pprof -raw '%s' 2>&1", dir,
             dir, go_tool, file);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[1 << 16];
    size_t got = fread(out, 1, sizeof(out) - 1, f);
    out[got] = '\0';
    assert_int_equal(pclose(f), 0);
    assert_non_null(strstr(out, "go:block_contentions:count/count"));
    assert_non_null(strstr(out, "go:block_delay:nanoseconds/nanoseconds"));
    assert_non_null(strstr(out, "main.blockSite"));

    chunks_free(cs);
    pfr_tu_store_remove(dir);
    pfr_scrape_free(s);
    pfr_tu_kill(&go);
}

/* ---- restart: counters going down reset the deltas ---- */

static void check_non_negative(const struct chunks *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        const pfr_profile *p = cs->v[i].p;
        size_t nt = pfr_profile_num_sample_types(p);
        for (size_t j = 0; j < pfr_profile_num_samples(p); j++)
            for (size_t t = 0; t < nt; t++)
                assert_true(pfr_profile_sample_values(p, j)[t] >= 0);
    }
}

static void test_restart(void **state)
{
    (void)state;
    tu_proc a, b;
    char addr[64], addr2[64], flag[96];
    start_go(&a, "pprofsrv", NULL, NULL, "pprof", addr, sizeof(addr));
    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    const int64_t interval = S_NS;
    pfr_scrape_opts o = {.interval_ns = interval,
                         .endpoints = (1u << PFR_SCRAPE_HEAP) | (1u << PFR_SCRAPE_BLOCK) |
                                      (1u << PFR_SCRAPE_MUTEX),
                         .local = PFR_SCRAPE_LOCAL_OFF,
                         .event = on_event,
                         .event_ctx = &ev};
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    char line[256];
    snprintf(line, sizeof(line), "http://%s service=api", addr);
    assert_int_equal(pfr_scrape_add_target_line(s, line, NULL, 0), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0); /* baseline */
    usleep(1500 * 1000);
    assert_int_equal(pfr_scrape_run_once(s), 0); /* deltas */
    assert_int_equal(ev.restarted, 0);

    /* the program restarts on the same port: its counters start from zero */
    pfr_tu_kill(&a);
    snprintf(flag, sizeof(flag), "-addr=%s", addr);
    start_go(&b, "pprofsrv", flag, NULL, "pprof", addr2, sizeof(addr2));
    assert_string_equal(addr, addr2);
    usleep(300 * 1000);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    fprintf(stderr, "restart events: %zu\n", ev.restarted);
    assert_true(ev.restarted >= 2); /* block and mutex at least */
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.restarts, ev.restarted);
    /* the restart's block values are everything since the restart: at most what B has now */
    char url[256], err[256];
    snprintf(url, sizeof(url), "http://%s/debug/pprof/block", addr);
    struct body body = http_get(url);
    pfr_profile *cum;
    assert_int_equal(pfr_profile_decode((uint8_t *)body.data, body.len, 0, &cum, err, sizeof(err)),
                     0);
    free(body.data);
    int64_t cum_b =
        pfr_tu_value_of(cum, pfr_profile_find_sample_type(cum, "contentions"), "main.blockSite");
    pfr_profile_free(cum);
    size_t restarted = ev.restarted;
    usleep(1000 * 1000);
    assert_int_equal(pfr_scrape_run_once(s), 0); /* deltas again */
    assert_int_equal(ev.restarted, restarted);

    char dir[PATH_MAX];
    struct chunks *cs = store_and_read(s, dir);
    check_non_negative(cs);
    int64_t block[8] = {0};
    size_t nb = 0;
    for (size_t i = 0; i < cs->n && nb < 8; i++)
        if (!strcmp(cs->v[i].type0, PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS))
            block[nb++] = pfr_tu_value_of(cs->v[i].p, 0, "main.blockSite");
    fprintf(stderr, "block deltas: %lld %lld %lld (B cumulative %lld)\n", (long long)block[0],
            (long long)block[1], (long long)block[2], (long long)cum_b);
    assert_int_equal(nb, 3);
    assert_true(block[0] > 0 && block[1] > 0 && block[2] > 0);
    assert_true(block[1] <= cum_b);
    chunks_free(cs);
    pfr_tu_store_remove(dir);
    pfr_scrape_free(s);
    pfr_tu_kill(&b);
}

/* ---- local discovery ---- */

/* A C program listening beside the Go ones: reports each accepted connection on a pipe. */
struct listener {
    pid_t pid;
    int accepts; /* read end: one byte per connection */
    unsigned port;
};

static void start_listener(struct listener *l)
{
    int fds[2], portp[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(pipe(portp), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 16) < 0)
            _exit(1);
        socklen_t al = sizeof(a);
        getsockname(s, (struct sockaddr *)&a, &al);
        unsigned port = ntohs(a.sin_port);
        if (write(portp[1], &port, sizeof(port)) != sizeof(port))
            _exit(1);
        for (;;) {
            int c = accept(s, NULL, NULL);
            if (c < 0)
                continue;
            if (write(fds[1], "x", 1) != 1)
                _exit(1);
            close(c);
        }
    }
    close(fds[1]);
    close(portp[1]);
    assert_int_equal(read(portp[0], &l->port, sizeof(l->port)), sizeof(l->port));
    close(portp[0]);
    l->pid = pid;
    l->accepts = fds[0];
    fcntl(l->accepts, F_SETFL, O_NONBLOCK);
}

struct allowed {
    pid_t pids[8];
    size_t n;
};

static bool allow(void *ctx, pid_t pid)
{
    const struct allowed *a = ctx;
    for (size_t i = 0; i < a->n; i++)
        if (a->pids[i] == pid)
            return true;
    return false; /* other Go servers on this machine (other tests) are not ours to probe */
}

struct found {
    pid_t pid;
    enum pfr_scrape_source source;
    char service[64], url[128];
};
struct found_list {
    size_t n;
    struct found v[16];
};

static int list_target(const pfr_scrape_target_info *t, void *ctx)
{
    struct found_list *l = ctx;
    if (l->n < 16) {
        l->v[l->n].pid = t->pid;
        l->v[l->n].source = t->source;
        snprintf(l->v[l->n].service, sizeof(l->v[l->n].service), "%s", t->service);
        snprintf(l->v[l->n].url, sizeof(l->v[l->n].url), "%s", t->url);
        l->n++;
    }
    return 0;
}

static const struct found *by_pid(const struct found_list *l, pid_t pid)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].pid == pid)
            return &l->v[i];
    return NULL;
}

/* Options for local discovery limited to the processes of al, events to ev. */
static pfr_scrape_opts local_opts(struct allowed *al, struct events *ev)
{
    return (pfr_scrape_opts){.interval_ns = S_NS,
                             .cpu_seconds = 1,
                             .allow_pid = allow,
                             .discovery_ctx = al,
                             .event = on_event,
                             .event_ctx = ev};
}

static void check_binary(const char *name, bool is_go, bool pprof, bool from_pclntab)
{
    char path[PATH_MAX];
    if (name[0] == '/')
        snprintf(path, sizeof(path), "%s", name);
    else
        snprintf(path, sizeof(path), "%s/%s", go_bin_dir, name);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat sb;
    fstat(fd, &sb);
    struct sc_file f = pfr_scrape_fd_file(fd, (uint64_t)sb.st_size);
    struct sc_elf_info info;
    char err[128];
    assert_int_equal(pfr_scrape_elf_inspect(&f, &info, err, sizeof(err)), 0);
    close(fd);
    fprintf(stderr, "%s: go %d pprof %d (pclntab %d), %u reads\n", name, info.is_go, info.pprof,
            info.from_pclntab, info.reads);
    assert_int_equal(info.is_go, is_go);
    assert_int_equal(info.pprof, pprof);
    assert_int_equal(info.from_pclntab, from_pclntab);
}

static void test_local(void **state)
{
    (void)state;
    check_binary("pprofsrv", true, true, false);
    check_binary("pprofsrv-stripped", true, true, true);
    check_binary("plainsrv", true, false, false);
    check_binary("/proc/self/exe", false, false, false);

    tu_proc go, stripped, plain;
    char addr[64], app[64], saddr[64], paddr[64];
    start_go(&go, "pprofsrv", "-app-addr=127.0.0.1:0", NULL, "app", app, sizeof(app));
    assert_true(pfr_tu_read_value(&go, "pprof", addr, sizeof(addr), 10000));
    start_go(&stripped, "pprofsrv-stripped", NULL, NULL, "pprof", saddr, sizeof(saddr));
    start_go(&plain, "plainsrv", NULL, NULL, "addr", paddr, sizeof(paddr));
    struct listener cl;
    start_listener(&cl);
    struct allowed al = {.pids = {go.pid, stripped.pid, plain.pid, cl.pid}, .n = 4};

    /* no configuration at all: local discovery is on by itself */
    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pfr_scrape_opts o = local_opts(&al, &ev);
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    struct found_list fl = {0};
    pfr_scrape_targets(s, list_target, &fl);
    assert_int_equal(fl.n, 2);
    const struct found *f1 = by_pid(&fl, go.pid), *f2 = by_pid(&fl, stripped.pid);
    assert_non_null(f1);
    assert_non_null(f2);
    assert_int_equal(f1->source, PFR_SCRAPE_LOCAL);
    assert_string_equal(f1->service, "pprofsrv");
    assert_string_equal(f2->service, "pprofsrv-stripped");
    char want[128];
    snprintf(want, sizeof(want), "http://%s/debug/pprof", addr); /* not the app port */
    assert_string_equal(f1->url, want);
    snprintf(want, sizeof(want), "http://%s/debug/pprof", saddr);
    assert_string_equal(f2->url, want);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    fprintf(stderr, "local: %llu Go pprof processes on this host, %llu probes\n",
            (unsigned long long)st.local_processes, (unsigned long long)st.local_probes);
    assert_true(st.local_processes >= 2);
    assert_int_equal(st.local_probes, 3); /* pprofsrv's two ports, the stripped one's */

    /* probed once: a second round sends no new probes */
    assert_int_equal(pfr_scrape_run_once(s), 0);
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.local_probes, 3);
    char dir[PATH_MAX];
    struct chunks *cs = store_and_read(s, dir);
    size_t per[2] = {0};
    for (size_t i = 0; i < cs->n; i++)
        per[strcmp(cs->v[i].service, "pprofsrv") == 0 ? 0 : 1]++;
    assert_int_equal(per[0], 3 + 5); /* baseline round without block and mutex, then all */
    assert_int_equal(per[1], 3 + 5);
    chunks_free(cs);
    pfr_tu_store_remove(dir);

    /* nothing ever reached the Go server without pprof or the C listener */
    char url[128];
    snprintf(url, sizeof(url), "http://%s/count", paddr);
    struct body b = http_get(url);
    assert_string_equal(b.data, "0\n");
    free(b.data);
    char x;
    assert_int_equal(read(cl.accepts, &x, 1), -1);
    assert_int_equal(errno, EAGAIN);

    /* a program that exits is dropped */
    pfr_tu_kill(&go);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    assert_int_equal(ev.removed, 1);
    fl.n = 0;
    pfr_scrape_targets(s, list_target, &fl);
    assert_int_equal(fl.n, 1);

    pfr_scrape_free(s);
    pfr_tu_kill(&stripped);
    pfr_tu_kill(&plain);
    kill(cl.pid, SIGKILL);
    waitpid(cl.pid, NULL, 0);
    close(cl.accepts);
}

/* ---- other network namespaces ---- */

static pid_t netns_pid;

static int service_of(void *ctx, pid_t pid, char *buf, size_t len, char *cid, size_t cidlen)
{
    (void)ctx;
    if (pid != netns_pid)
        return -1; /* the default: the executable's name */
    snprintf(buf, len, "ctr-%d", (int)pid);
    snprintf(cid, cidlen, "/docker/ctr-%d", (int)pid);
    return 0;
}

static struct chunks *round_and_read(pfr_scrape *s, char *dir)
{
    assert_int_equal(pfr_scrape_run_once(s), 0);
    return store_and_read(s, dir);
}

/* A Go pprof server in a network namespace of its own on the same 127.0.0.1:PORT as one in ours:
 * both are found, each is scraped in its own namespace (a connection is never reused across
 * them) and named by its own pid. */
static void check_other_netns(void)
{
    tu_proc host, inns;
    char haddr[64], naddr[64], flag[96], path[PATH_MAX];
    start_go(&host, "pprofsrv-stripped", NULL, NULL, "pprof", haddr, sizeof(haddr));
    snprintf(flag, sizeof(flag), "-addr=%s", haddr);
    snprintf(path, sizeof(path), "%s/pprofsrv", go_bin_dir);
    char *argv[] = {path, flag, NULL};
    assert_int_equal(pfr_tu_spawn_netns(&inns, argv), 0);
    assert_true(pfr_tu_read_value(&inns, "pprof", naddr, sizeof(naddr), 10000));
    assert_string_equal(naddr, haddr);
    netns_pid = inns.pid;
    struct allowed al = {.pids = {host.pid, inns.pid}, .n = 2};

    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pfr_scrape_opts o = local_opts(&al, &ev);
    o.service_for_pid = service_of;
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    struct found_list fl = {0};
    pfr_scrape_targets(s, list_target, &fl);
    assert_int_equal(fl.n, 2);
    const struct found *fh = by_pid(&fl, host.pid), *fn = by_pid(&fl, inns.pid);
    assert_non_null(fh);
    assert_non_null(fn);
    char want[128], ctr[32];
    snprintf(want, sizeof(want), "http://%s/debug/pprof", haddr);
    assert_string_equal(fh->url, want);
    assert_string_equal(fn->url, want); /* 127.0.0.1 as seen in its namespace */
    assert_string_equal(fh->service, "pprofsrv-stripped");
    snprintf(ctr, sizeof(ctr), "ctr-%d", (int)inns.pid);
    assert_string_equal(fn->service, ctr);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.local_other_netns, 1);
    assert_int_equal(st.local_netns_skipped, 0);
    assert_int_equal(st.local_probes, 2);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.netns_failures + st.netns_denied + st.netns_broken, 0);

    char dir[PATH_MAX];
    struct chunks *cs = round_and_read(s, dir);
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.failures, 0);
    size_t per[2] = {0}, nc, hits;
    char want_cid[64];
    snprintf(want_cid, sizeof(want_cid), "/docker/%s", ctr);
    for (size_t i = 0; i < cs->n; i++) {
        bool in_ctr = strcmp(cs->v[i].service, ctr) == 0;
        per[in_ctr ? 0 : 1]++;
        /* the daemon's naming gives the container id label too */
        assert_string_equal(cs->v[i].container_id, in_ctr ? want_cid : "");
    }
    assert_int_equal(per[0], 3 + 5); /* baseline round without block and mutex, then all */
    assert_int_equal(per[1], 3 + 5);
    /* the container's own CPU and heap, under its service */
    struct chunks mine = {0};
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].service, ctr) == 0)
            mine.v[mine.n++] = cs->v[i];
    assert_true(sum_of(&mine, PFR_SCRAPE_TYPE_CPU, 0, "main.burnCPU", &nc, &hits) > 0);
    assert_int_equal(nc, 2);
    assert_true(sum_of(&mine, PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS, 3, "main.allocSite", &nc, &hits) >
                0);
    fprintf(stderr, "netns: %zu chunks of %s (pid %d), %zu of the host's twin\n", per[0], ctr,
            (int)inns.pid, per[1]);
    chunks_free(cs);
    pfr_tu_store_remove(dir);

    /* the process goes: its target goes (and its namespace descriptor with it) */
    pfr_tu_kill(&inns);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    fl.n = 0;
    pfr_scrape_targets(s, list_target, &fl);
    assert_int_equal(fl.n, 1);
    assert_int_equal(fl.v[0].pid, host.pid);
    assert_int_equal(ev.discovery, 0);
    pfr_scrape_free(s);
    pfr_tu_kill(&host);
}

/* Without CAP_SYS_ADMIN (dropped from this thread's effective set: capabilities are per thread)
 * setns is refused: the container is skipped, counted and reported once; the host's process is
 * still scraped. */
struct denied_run {
    pfr_scrape *s;
    int rounds;
    int rc[3];
};

static void *denied_thread(void *arg)
{
    struct denied_run *d = arg;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) < 0)
        return (void *)1;
    data[0].effective &= ~(1u << CAP_SYS_ADMIN);
    if (syscall(SYS_capset, &hdr, data) < 0)
        return (void *)1;
    for (int i = 0; i < d->rounds; i++)
        d->rc[i] = pfr_scrape_run_once(d->s);
    return NULL;
}

static void check_denied(void)
{
    tu_proc host, inns;
    char haddr[64], naddr[64], path[PATH_MAX];
    start_go(&host, "pprofsrv-stripped", NULL, NULL, "pprof", haddr, sizeof(haddr));
    snprintf(path, sizeof(path), "%s/pprofsrv", go_bin_dir);
    char *argv[] = {path, NULL};
    assert_int_equal(pfr_tu_spawn_netns(&inns, argv), 0);
    assert_true(pfr_tu_read_value(&inns, "pprof", naddr, sizeof(naddr), 10000));
    netns_pid = inns.pid;
    struct allowed al = {.pids = {host.pid, inns.pid}, .n = 2};
    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pfr_scrape_opts o = local_opts(&al, &ev);
    o.cpu_seconds = -1;
    o.service_for_pid = service_of;
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    struct denied_run d = {.s = s, .rounds = 3};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, denied_thread, &d), 0);
    void *ret = (void *)1;
    pthread_join(th, &ret);
    assert_null(ret);
    for (int i = 0; i < 3; i++)
        assert_int_equal(d.rc[i], 0);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    fprintf(stderr, "denied: other_netns %llu skipped %llu denied %llu failures %llu: %s\n",
            (unsigned long long)st.local_other_netns, (unsigned long long)st.local_netns_skipped,
            (unsigned long long)st.netns_denied, (unsigned long long)st.netns_failures, ev.msg);
    assert_int_equal(st.netns_denied, 1);   /* tried once, then no more */
    assert_int_equal(st.netns_failures, 1); /* that one probe */
    assert_int_equal(st.local_other_netns, 1);
    assert_int_equal(st.local_netns_skipped, 1); /* the later rounds skip it */
    assert_int_equal(st.local_probes, 2);
    assert_int_equal(st.netns_broken, 0);
    assert_int_equal(ev.discovery, 1); /* logged once, with the reason */
    assert_non_null(strstr(ev.msg, "CAP_SYS_ADMIN"));
    assert_non_null(strstr(ev.msg, "not permitted"));
    struct found_list fl = {0};
    pfr_scrape_targets(s, list_target, &fl);
    assert_int_equal(fl.n, 1);
    assert_int_equal(fl.v[0].pid, host.pid);
    pfr_scrape_free(s);
    pfr_tu_kill(&inns);
    pfr_tu_kill(&host);
}

/* A namespace descriptor that is not a network namespace (a fake /proc whose PID/ns/net is a
 * plain file: a fault that cannot be caused otherwise): setns fails with EINVAL, the probe fails,
 * it is counted, nothing is sent and nothing crashes. */
static void check_not_a_netns(void)
{
    tu_proc host;
    char haddr[64];
    start_go(&host, "pprofsrv", NULL, NULL, "pprof", haddr, sizeof(haddr));
    char root[] = "/tmp/pfr-fakeproc-XXXXXX", p1[PATH_MAX], p2[PATH_MAX];
    assert_non_null(mkdtemp(root));
    snprintf(p1, sizeof(p1), "%s/self", root);
    assert_int_equal(symlink("/proc/self", p1), 0);
    snprintf(p1, sizeof(p1), "%s/%d", root, (int)host.pid);
    assert_int_equal(mkdir(p1, 0700), 0);
    static const char *const links[] = {"exe", "stat", "comm", "net", "fd"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        snprintf(p1, sizeof(p1), "/proc/%d/%s", (int)host.pid, links[i]);
        snprintf(p2, sizeof(p2), "%s/%d/%s", root, (int)host.pid, links[i]);
        assert_int_equal(symlink(p1, p2), 0);
    }
    snprintf(p2, sizeof(p2), "%s/%d/ns", root, (int)host.pid);
    assert_int_equal(mkdir(p2, 0700), 0);
    snprintf(p2, sizeof(p2), "%s/%d/ns/net", root, (int)host.pid);
    assert_int_equal(pfr_tu_write_file(p2, "net:[0]\n", 8), 0);

    struct allowed al = {.pids = {host.pid}, .n = 1};
    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pfr_scrape_opts o = local_opts(&al, &ev);
    o.cpu_seconds = -1;
    o.proc_root = root;
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.local_processes, 1);
    assert_int_equal(st.local_other_netns, 1);
    assert_int_equal(st.local_probes, 1); /* probed once only */
    assert_int_equal(st.netns_failures, 1);
    assert_int_equal(st.netns_denied, 0);
    assert_int_equal(st.netns_broken, 0);
    assert_int_equal(st.targets, 0);
    assert_int_equal(ev.discovery, 0);
    pfr_scrape_free(s);
    pfr_tu_store_remove(root); /* FTW_PHYS: the links, never what they point to */
    pfr_tu_kill(&host);
}

/* The thread cannot return to its own namespace (its "own" descriptor is not one): the state
 * is BROKEN and no socket is opened any more, not even one that asks for no namespace. */
struct broken_run {
    int ns_fd;
    int rc1, rc2;
    enum sc_netns_state st;
};

static void *broken_thread(void *arg)
{
    struct broken_run *b = arg;
    struct sc_netns n;
    pfr_scrape_netns_init_fd(&n, open("/dev/null", O_RDONLY | O_CLOEXEC));
    b->rc1 = pfr_scrape_netns_socket(&n, b->ns_fd, AF_INET, SOCK_STREAM, 0);
    b->rc2 = pfr_scrape_netns_socket(&n, -1, AF_INET, SOCK_STREAM, 0);
    b->st = sc_netns_get_state(&n);
    pfr_scrape_netns_close(&n);
    return NULL; /* this thread stays in the other namespace and ends */
}

static void check_broken(void)
{
    tu_proc inns;
    char naddr[64], path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/plainsrv", go_bin_dir);
    char *argv[] = {path, NULL};
    assert_int_equal(pfr_tu_spawn_netns(&inns, argv), 0);
    assert_true(pfr_tu_read_value(&inns, "addr", naddr, sizeof(naddr), 10000));
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)inns.pid);
    struct stat before, after;
    assert_int_equal(stat("/proc/thread-self/ns/net", &before), 0);
    struct broken_run b = {.ns_fd = open(path, O_RDONLY | O_CLOEXEC)};
    assert_true(b.ns_fd >= 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, broken_thread, &b), 0);
    pthread_join(th, NULL);
    close(b.ns_fd);
    assert_int_equal(b.rc1, -ENOTRECOVERABLE);
    assert_int_equal(b.rc2, -ENOTRECOVERABLE);
    assert_int_equal(b.st, SC_NETNS_BROKEN);
    /* only that thread moved */
    assert_int_equal(stat("/proc/thread-self/ns/net", &after), 0);
    assert_true(before.st_ino == after.st_ino);
    pfr_tu_kill(&inns);
}

static void test_netns(void **state)
{
    (void)state;
    if (geteuid() != 0)
        fail_msg("netns: needs root (network namespaces, setns); the suite runs as root");
    check_other_netns();
    check_denied();
    check_not_a_netns();
    check_broken();
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s static|restart|local|netns GO_BIN_DIR GO_TOOL\n", argv[0]);
        return 2;
    }
    go_bin_dir = argv[2];
    go_tool = argv[3];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct CMUnitTest t;
    /* The static targets' Go programs refuse profiling (the consent variable their children
     * inherit): a test recorder running beside this test discovers local pprof servers, and its
     * CPU profile made one of this test's fail ("HTTP 500: cpu profiling already in use").
     * Static targets are scraped whatever the program's consent. */
    if (strcmp(argv[1], "static") == 0 || strcmp(argv[1], "restart") == 0)
        setenv("PFR_PROFILING", "disabled", 1);
    if (strcmp(argv[1], "static") == 0)
        t = (struct CMUnitTest)cmocka_unit_test(test_static);
    else if (strcmp(argv[1], "restart") == 0)
        t = (struct CMUnitTest)cmocka_unit_test(test_restart);
    else if (strcmp(argv[1], "local") == 0)
        t = (struct CMUnitTest)cmocka_unit_test(test_local);
    else if (strcmp(argv[1], "netns") == 0)
        t = (struct CMUnitTest)cmocka_unit_test(test_netns);
    else
        return 2;
    const struct CMUnitTest tests[] = {t};
    int rc = cmocka_run_group_tests_name(argv[1], tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
