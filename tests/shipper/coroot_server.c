/*
 * coroot_server: a test server keeping Coroot's profile ingest contract (POST /v1/profiles):
 *   - X-API-Key must be the configured key: otherwise 404 (Coroot: project not found);
 *   - service.name is required: otherwise 400 "service.name is empty";
 *   - the body must be a pprof profile, raw or gzip'd: otherwise 400;
 *   - 200 with an empty body once stored.
 * Every stored body is saved as DIR/NNNNNN.pb.gz (exactly as received) with DIR/NNNNNN.txt
 * (query string, then "time_nanos duration_nanos"), and one line per request goes to the log:
 *   "<seq> <status> service=<name> time=<time_nanos> dur=<duration_nanos> bytes=<n> q=<query>".
 *
 * Faults (flags, or GET /__fault?mode=M&count=N&match=S&retry_after=S&delay_ms=N):
 *   reset (close while the request arrives), 503 (with Retry-After), slow (wait delay_ms, then
 *   store and answer), lost (store, then close without an answer), html (200 with an HTML page,
 *   nothing stored: a lying sink), reject (400), echo401 (401 whose body echoes every request
 *   header, the API key included: a careless proxy), tls400 (400 with nginx's page for a plain
 *   HTTP request on its TLS port), plain400 (400 "Bad Request" for every request: a proxy).
 *   match: a substring of the query string.
 * --no-save 1: check and count bodies without keeping them (benchmarks; GET /__stats).
 * --reject-service NAME: profiles of that service get 400 (a chunk Coroot refuses for good);
 * GET /__fault?reject_service= changes it.
 */
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "echo_headers.h"
#include "nginx_answers.h"

struct fault {
    char mode[16];
    long count;
    char match[256];
    int retry_after, delay_ms;
};

static struct {
    pthread_mutex_t lock;
    const char *dir, *key;
    FILE *log;
    struct fault fault;
    char reject_service[256];
    bool no_save; /* benchmarks: check, count, do not keep */
    unsigned long seq, stored, bytes;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct req {
    char *body;
    size_t len, cap;
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    if (!S.log)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&S.lock);
    fprintf(S.log, "%lld ", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    vfprintf(S.log, fmt, ap);
    fflush(S.log);
    pthread_mutex_unlock(&S.lock);
    va_end(ap);
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *body,
                              const char *ctype, int retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype ? ctype : "text/plain; charset=utf-8");
    if (retry_after > 0) {
        char v[32];
        snprintf(v, sizeof(v), "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- a minimal pprof check: gunzip, then a protobuf message whose fields all parse, with at
 * least one sample_type and a string table starting with "" ---- */

static int gunzip(const char *in, size_t len, unsigned char **out, size_t *outlen)
{
    z_stream z = {0};
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return -1;
    size_t cap = len * 8 + 4096, n = 0;
    unsigned char *o = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (o && rc != Z_STREAM_END) {
        if (n == cap) {
            if (cap > (256u << 20)) {
                free(o);
                o = NULL;
                break;
            }
            unsigned char *no = realloc(o, cap *= 2);
            if (!no) {
                free(o);
                o = NULL;
                break;
            }
            o = no;
        }
        z.next_out = o + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
        if (rc != Z_OK && rc != Z_STREAM_END) {
            free(o);
            o = NULL;
        }
        if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
            free(o); /* truncated */
            o = NULL;
        }
    }
    inflateEnd(&z);
    if (!o)
        return -1;
    *out = o;
    *outlen = n;
    return 0;
}

static int varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int s = 0; s < 64; s += 7) {
        if (*p >= end)
            return -1;
        unsigned char c = *(*p)++;
        x |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static const char *pprof_check(const unsigned char *b, size_t len, int64_t *time_ns,
                               int64_t *dur_ns)
{
    const unsigned char *p = b, *end = b + len;
    bool sample_type = false, strings = false, first_string = true;
    *time_ns = *dur_ns = 0;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key))
            return "truncated field key";
        unsigned field = (unsigned)(key >> 3), wt = key & 7;
        if (!field)
            return "field number 0";
        switch (wt) {
        case 0:
            if (varint(&p, end, &v))
                return "truncated varint";
            if (field == 9)
                *time_ns = (int64_t)v;
            if (field == 10)
                *dur_ns = (int64_t)v;
            break;
        case 1:
            if (end - p < 8)
                return "truncated fixed64";
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return "truncated fixed32";
            p += 4;
            break;
        case 2:
            if (varint(&p, end, &v) || v > (uint64_t)(end - p))
                return "truncated length-delimited field";
            if (field == 1)
                sample_type = true;
            if (field == 6) {
                if (first_string && v != 0)
                    return "string_table[0] is not empty";
                first_string = false;
                strings = true;
            }
            p += v;
            break;
        default:
            return "bad wire type";
        }
    }
    if (!strings)
        return "no string table";
    if (!sample_type)
        return "no sample_type";
    return NULL;
}

/* ---- requests ---- */

struct qs {
    char text[2048];
    size_t len;
    char service[256];
    int service_count;
};

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    struct qs *q = cls;
    if (!strcmp(k, "service.name")) {
        snprintf(q->service, sizeof(q->service), "%s", v ? v : "");
        q->service_count++;
    }
    int n = snprintf(q->text + q->len, sizeof(q->text) - q->len, "%s%s=%s", q->len ? "&" : "", k,
                     v ? v : "");
    if (n > 0 && (size_t)n < sizeof(q->text) - q->len)
        q->len += (size_t)n;
    return MHD_YES;
}

static bool fault_hits(const char *query, struct fault *f)
{
    bool hit = false;
    pthread_mutex_lock(&S.lock);
    if (S.fault.mode[0] && strcmp(S.fault.mode, "none") &&
        (!S.fault.match[0] || strstr(query, S.fault.match))) {
        *f = S.fault;
        hit = true;
        if (S.fault.count > 0 && --S.fault.count == 0)
            snprintf(S.fault.mode, sizeof(S.fault.mode), "none");
    }
    pthread_mutex_unlock(&S.lock);
    return hit;
}

static void set_fault(const char *mode, const char *count, const char *match, const char *ra,
                      const char *delay)
{
    snprintf(S.fault.mode, sizeof(S.fault.mode), "%s", mode ? mode : "none");
    S.fault.count = count ? atol(count) : 0;
    snprintf(S.fault.match, sizeof(S.fault.match), "%s", match ? match : "");
    S.fault.retry_after = ra ? atoi(ra) : 1;
    S.fault.delay_ms = delay ? atoi(delay) : 0;
}

static int save(unsigned long seq, const struct req *rq, const struct qs *q, int64_t t, int64_t d)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%06lu.pb.gz", S.dir, seq);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(rq->body, 1, rq->len, f) != rq->len || fclose(f) || rename(tmp, path))
        return -1;
    snprintf(path, sizeof(path), "%s/%06lu.txt", S.dir, seq);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n%lld %lld\n", q->text, (long long)t, (long long)d);
    return fclose(f);
}

static enum MHD_Result handle(struct MHD_Connection *c, const char *url, const char *method,
                              struct req *rq)
{
    if (!strcmp(url, "/__fault")) {
        const char *g = NULL;
        pthread_mutex_lock(&S.lock);
#define A(k) MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k)
        set_fault(A("mode"), A("count"), A("match"), A("retry_after"), A("delay_ms"));
        if ((g = A("reject_service")))
            snprintf(S.reject_service, sizeof(S.reject_service), "%s", g);
#undef A
        pthread_mutex_unlock(&S.lock);
        logf_("fault mode=%s count=%ld\n", S.fault.mode, S.fault.count);
        return answer(c, 200, "ok\n", NULL, 0);
    }
    if (!strcmp(url, "/__stats")) {
        char b[128];
        pthread_mutex_lock(&S.lock);
        snprintf(b, sizeof(b), "requests %lu\nstored %lu\nbytes %lu\n", S.seq, S.stored, S.bytes);
        pthread_mutex_unlock(&S.lock);
        return answer(c, 200, b, NULL, 0);
    }
    if (strcmp(url, "/v1/profiles") || strcmp(method, "POST"))
        return answer(c, 404, "404 page not found\n", NULL, 0);
    struct qs q = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect, &q);
    pthread_mutex_lock(&S.lock);
    unsigned long seq = ++S.seq;
    bool reject_svc = S.reject_service[0] && !strcmp(q.service, S.reject_service);
    pthread_mutex_unlock(&S.lock);
    struct fault f;
    bool hit = fault_hits(q.text, &f);
    if (hit) {
        logf_("%lu fault=%s q=%s\n", seq, f.mode, q.text);
        if (!strcmp(f.mode, "reset"))
            return MHD_NO;
        if (!strcmp(f.mode, "503"))
            return answer(c, 503, "service unavailable\n", NULL, f.retry_after);
        if (!strcmp(f.mode, "html"))
            return answer(c, 200, "<html><body>Sign in to the Wi-Fi</body></html>",
                          "text/html; charset=utf-8", 0);
        if (!strcmp(f.mode, "reject"))
            return answer(c, 400, "injected rejection\n", NULL, 0);
        if (!strcmp(f.mode, "tls400"))
            return answer(c, 400, NGINX_TLS_400, "text/html", 0);
        if (!strcmp(f.mode, "plain400"))
            return answer(c, 400, "Bad Request\n", "text/plain", 0);
        if (!strcmp(f.mode, "echo401")) {
            char b[4096] = "unauthorized; your request was:\r\n";
            echo_headers(c, b, sizeof(b));
            return answer(c, 401, b, NULL, 0);
        }
        if (!strcmp(f.mode, "slow"))
            usleep((useconds_t)f.delay_ms * 1000);
    }
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-Key");
    if (S.key && (!key || strcmp(key, S.key))) {
        logf_("%lu 404 unknown-key q=%s\n", seq, q.text);
        return answer(c, 404, "project not found\n", NULL, 0);
    }
    if (q.service_count != 1 || !q.service[0]) {
        logf_("%lu 400 no-service q=%s\n", seq, q.text);
        return answer(c, 400, "service.name is empty\n", NULL, 0);
    }
    unsigned char *raw = NULL;
    size_t rawlen = 0;
    bool gz =
        rq->len >= 2 && (unsigned char)rq->body[0] == 0x1f && (unsigned char)rq->body[1] == 0x8b;
    const char *bad = NULL;
    int64_t t = 0, d = 0;
    if (gz && gunzip(rq->body, rq->len, &raw, &rawlen))
        bad = "gzip: invalid data";
    if (!bad)
        bad = pprof_check(gz ? raw : (unsigned char *)rq->body, gz ? rawlen : rq->len, &t, &d);
    free(raw);
    if (!bad && reject_svc)
        bad = "decoding profile: unexpected data (test rejection)";
    if (bad) {
        logf_("%lu 400 bad-profile (%s) q=%s\n", seq, bad, q.text);
        char m[300];
        snprintf(m, sizeof(m), "%s\n", bad);
        return answer(c, 400, m, NULL, 0);
    }
    if (!S.no_save && save(seq, rq, &q, t, d)) {
        logf_("%lu 500 cannot-save\n", seq);
        return answer(c, 500, "cannot save\n", NULL, 0);
    }
    pthread_mutex_lock(&S.lock);
    S.stored++;
    S.bytes += rq->len;
    pthread_mutex_unlock(&S.lock);
    logf_("%lu 200 service=%s time=%lld dur=%lld bytes=%zu q=%s\n", seq, q.service, (long long)t,
          (long long)d, rq->len, q.text);
    if (hit && !strcmp(f.mode, "lost"))
        return MHD_NO;
    return answer(c, 200, "", NULL, 0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls, (void)version;
    struct req *rq = *con_cls;
    if (!rq) {
        if (!(rq = calloc(1, sizeof(*rq))))
            return MHD_NO;
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rq->len) {
            pthread_mutex_lock(&S.lock);
            bool reset = !strcmp(S.fault.mode, "reset");
            pthread_mutex_unlock(&S.lock);
            if (reset) {
                struct qs q = {0};
                MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect, &q);
                struct fault f;
                if (fault_hits(q.text, &f)) {
                    logf_("- fault=reset (during upload) q=%s\n", q.text);
                    return MHD_NO;
                }
            }
        }
        if (rq->len + *upload_size > rq->cap) {
            size_t cap = rq->cap ? rq->cap : 65536;
            while (cap < rq->len + *upload_size)
                cap *= 2;
            char *b = realloc(rq->body, cap);
            if (!b)
                return MHD_NO;
            rq->body = b;
            rq->cap = cap;
        }
        memcpy(rq->body + rq->len, upload, *upload_size);
        rq->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    return handle(c, url, method, rq);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
    }
    *con_cls = NULL;
}

int main(int argc, char **argv)
{
    const char *port_file = NULL, *logp = NULL, *fm = NULL, *fc = NULL, *fma = NULL, *fra = NULL,
               *fd = NULL;
    int port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--dir"))
            S.dir = v;
        else if (!strcmp(a, "--api-key"))
            S.key = v;
        else if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--port-file"))
            port_file = v;
        else if (!strcmp(a, "--log"))
            logp = v;
        else if (!strcmp(a, "--fault"))
            fm = v;
        else if (!strcmp(a, "--fault-count"))
            fc = v;
        else if (!strcmp(a, "--fault-match"))
            fma = v;
        else if (!strcmp(a, "--retry-after"))
            fra = v;
        else if (!strcmp(a, "--delay-ms"))
            fd = v;
        else if (!strcmp(a, "--no-save"))
            S.no_save = !strcmp(v, "1");
        else if (!strcmp(a, "--reject-service"))
            snprintf(S.reject_service, sizeof(S.reject_service), "%s", v);
        else {
            fprintf(stderr, "coroot_server: unknown option %s\n", a);
            return 2;
        }
    }
    if (!S.dir || argc % 2 == 0) {
        fprintf(stderr, "usage: coroot_server --dir DIR [--api-key K] [--port N] [--port-file F] "
                        "[--log F] [--fault MODE ...] [--reject-service NAME]\n");
        return 2;
    }
    set_fault(fm, fc, fma, fra, fd);
    if (logp && !(S.log = fopen(logp, "a"))) {
        perror(logp);
        return 1;
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
        (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "coroot_server: cannot listen on port %d\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = info ? info->port : port;
    if (port_file) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", bound) < 0 || fclose(f) || rename(tmp, port_file)) {
            perror(port_file);
            return 1;
        }
    }
    int sig;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    if (S.log)
        fclose(S.log);
    return 0;
}
