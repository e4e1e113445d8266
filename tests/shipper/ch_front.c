/*
 * ch_front: a small HTTP server that speaks the part of ClickHouse's HTTP interface pfr-shipper
 * uses, backed by a real ClickHouse engine: libchdb.so (ClickHouse embedded as a library, from
 * the npm package @chdb/lib-linux-x64-gnu), loaded with dlopen, one persistent session.
 *
 *   POST /?query=...&database=...&<setting>=...   body: data of an INSERT, or the query itself
 *   GET  /?query=...                              read-only queries
 *   GET  /ping                                    "Ok.\n"
 *   auth: X-ClickHouse-User / X-ClickHouse-Key, HTTP basic, or user= / password= parameters
 *   answers: 200 + X-ClickHouse-Summary, or ClickHouse's error text with its status (400, 403,
 *   404, 500) and X-ClickHouse-Exception-Code. Request bodies may be gzip'd (Content-Encoding).
 *
 * Faults for tests, from flags or GET /__fault?mode=M&count=N&match=S&retry_after=S&delay_ms=N:
 *   reset    close the connection while the request arrives (nothing executed)
 *   503      answer 503 with Retry-After (nothing executed)
 *   slow     wait delay_ms, then execute and answer
 *   lost     execute, then close the connection without an answer
 *   garbage  answer 200 with an HTML page (nothing executed): a lying sink
 *   reject   answer 400 like a parse error (nothing executed)
 *   tls400   answer 400 with nginx's page for a plain HTTP request on its TLS port (no code)
 *   plain400 answer 400 "Bad Request" in plain text (no code): a proxy
 *   echo     answer 403 AUTHENTICATION_FAILED whose text echoes every request header (a server
 *            that quotes the credentials back)
 * count: how many matching requests get the fault (0 = all); match: a substring of the query.
 * --reject-substring S: any request whose data contains S gets a 400 (a chunk ClickHouse refuses).
 * --config F: a ClickHouse config file for the engine (remote_servers: a cluster whose shards are
 * this engine itself, for Distributed tables).
 * GET /__fault?password=P changes the password the front accepts (a password rotated on the
 * server while the shipper runs).
 * chdb's own "default" database is a file overlay; requests for "default" (or none) use the
 * Atomic database --default-database (default "chdefault") instead.
 */
#include <ctype.h>
#include <dlfcn.h>
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
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "echo_headers.h"
#include "nginx_answers.h"

/* ---- the chdb C API (its header is not in the npm package; these are its declarations) ---- */
typedef struct chdb_connection_ {
    void *internal_data;
} * chdb_connection;
typedef struct chdb_result_ {
    void *internal_data;
} chdb_result;

static struct {
    chdb_connection *(*connect)(int, char **);
    void (*close_conn)(chdb_connection *);
    chdb_result *(*query_n)(chdb_connection, const char *, size_t, const char *, size_t);
    char *(*buffer)(chdb_result *);
    size_t (*length)(chdb_result *);
    const char *(*error)(chdb_result *);
    uint64_t (*rows_written)(chdb_result *);
    uint64_t (*rows_read)(chdb_result *);
    uint64_t (*bytes_written)(chdb_result *);
    void (*destroy)(chdb_result *);
} ch;

/* ---- the server's state (this test program's top level) ---- */
struct fault {
    char mode[16];
    long count; /* remaining, 0 = unlimited */
    char match[256];
    int retry_after;
    int delay_ms;
};

static struct {
    chdb_connection *conn;
    pthread_mutex_t lock;
    const char *user, *password, *default_db, *data_dir;
    const char *tmp_dir; /* where INSERT data waits for ClickHouse to read it */
    FILE *log;
    struct fault fault;
    char reject_substring[256];
    char password_buf[256]; /* a password set by /__fault */
    unsigned long seq, inserts, faults, files;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct req {
    char *body;
    size_t len, cap;
    bool faulted; /* reset during upload */
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    if (!S.log)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[1024];
    int n =
        snprintf(line, sizeof(line), "%lld ", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    fputs(line, S.log); /* one call: lines of concurrent requests do not mix */
    fflush(S.log);
}

static int load_chdb(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "ch_front: %s\n", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&ch.field = dlsym(h, name);                                                      \
        if (!ch.field) {                                                                           \
            fprintf(stderr, "ch_front: %s has no %s\n", path, name);                               \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    SYM(connect, "chdb_connect");
    SYM(close_conn, "chdb_close_conn");
    SYM(query_n, "chdb_query_n");
    SYM(buffer, "chdb_result_buffer");
    SYM(length, "chdb_result_length");
    SYM(error, "chdb_result_error");
    SYM(rows_written, "chdb_result_rows_written");
    SYM(rows_read, "chdb_result_rows_read");
    SYM(bytes_written, "chdb_result_bytes_written");
    SYM(destroy, "chdb_destroy_query_result");
#undef SYM
    return 0;
}

/* Run one statement; *out gets the result (malloc'ed) or the error text; returns the ClickHouse
 * exception code (0 = success). Caller holds S.lock. */
static int run_sql(const char *q, size_t n, const char *fmt, char **out, size_t *outlen,
                   uint64_t *written)
{
    chdb_result *r = ch.query_n(*S.conn, q, n, fmt, strlen(fmt));
    const char *e = r ? ch.error(r) : "chdb returned nothing";
    int code = 0;
    if (e && *e) {
        const char *c = strstr(e, "Code: ");
        code = c ? atoi(c + 6) : 1001;
        if (!code)
            code = 1001;
        *out = strdup(e);
        *outlen = *out ? strlen(*out) : 0;
    } else {
        size_t len = ch.length(r);
        *out = malloc(len + 1);
        if (*out) {
            if (len)
                memcpy(*out, ch.buffer(r), len);
            (*out)[len] = 0;
        }
        *outlen = len;
        if (written)
            *written = ch.rows_written(r);
    }
    if (r)
        ch.destroy(r);
    return code;
}

static int simple_sql(const char *q)
{
    char *o;
    size_t n;
    int code = run_sql(q, strlen(q), "TabSeparated", &o, &n, NULL);
    if (code)
        fprintf(stderr, "ch_front: %s: %s\n", q, o ? o : "?");
    free(o);
    return code;
}

/* ClickHouse's HTTP status for an exception code (the ones this front can meet). */
static unsigned status_of(int code)
{
    switch (code) {
    case 60: /* UNKNOWN_TABLE */
    case 81: /* UNKNOWN_DATABASE */
    case 47: /* UNKNOWN_IDENTIFIER */
    case 16: /* NO_SUCH_COLUMN_IN_TABLE */
        return 404;
    case 192:
    case 193:
    case 194:
    case 516:
        return 403; /* authentication */
    case 6:
    case 27:
    case 33:
    case 36:
    case 38:
    case 41:
    case 62:
    case 72:
    case 115:
    case 117:
    case 457:
    case 715:
        return 400;
    default:
        return 500;
    }
}

/* ---- HTTP helpers ---- */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *body,
                              size_t len, const char *ctype, int code, uint64_t written,
                              int retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype ? ctype : "text/plain; charset=UTF-8");
    char v[256];
    if (code) {
        snprintf(v, sizeof(v), "%d", code);
        MHD_add_response_header(r, "X-ClickHouse-Exception-Code", v);
    } else if (status == 200 && !ctype) {
        snprintf(v, sizeof(v),
                 "{\"read_rows\":\"0\",\"read_bytes\":\"0\",\"written_rows\":\"%llu\","
                 "\"written_bytes\":\"0\",\"total_rows_to_read\":\"0\",\"result_rows\":\"0\","
                 "\"result_bytes\":\"0\",\"elapsed_ns\":\"0\"}",
                 (unsigned long long)written);
        MHD_add_response_header(r, "X-ClickHouse-Summary", v);
        snprintf(v, sizeof(v), "pfr-front-%lu", S.seq);
        MHD_add_response_header(r, "X-ClickHouse-Query-Id", v);
    }
    if (retry_after > 0) {
        snprintf(v, sizeof(v), "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", v);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static const char *arg(struct MHD_Connection *c, const char *k)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k);
}

static bool ident(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static int gunzip(const char *in, size_t len, char **out, size_t *outlen)
{
    z_stream z = {0};
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return -1;
    size_t cap = len * 4 + 1024, n = 0;
    char *o = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (o && rc != Z_STREAM_END) {
        if (n == cap) {
            char *no = realloc(o, cap *= 2);
            if (!no) {
                free(o);
                o = NULL;
                break;
            }
            o = no;
        }
        z.next_out = (Bytef *)o + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
        if (rc != Z_OK && rc != Z_STREAM_END) {
            free(o);
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

/* ---- faults ---- */

/* Does the current fault apply to this query? Consumes one count. Caller holds S.lock. */
static bool fault_hits(const char *query, char *mode, size_t cap, int *retry_after, int *delay)
{
    if (!S.fault.mode[0] || !strcmp(S.fault.mode, "none"))
        return false;
    if (S.fault.match[0] && (!query || !strstr(query, S.fault.match)))
        return false;
    snprintf(mode, cap, "%s", S.fault.mode);
    *retry_after = S.fault.retry_after;
    *delay = S.fault.delay_ms;
    if (S.fault.count > 0 && --S.fault.count == 0)
        snprintf(S.fault.mode, sizeof(S.fault.mode), "none");
    S.faults++;
    return true;
}

static void set_fault(const char *mode, const char *count, const char *match,
                      const char *retry_after, const char *delay)
{
    snprintf(S.fault.mode, sizeof(S.fault.mode), "%s", mode ? mode : "none");
    S.fault.count = count ? atol(count) : 0;
    snprintf(S.fault.match, sizeof(S.fault.match), "%s", match ? match : "");
    S.fault.retry_after = retry_after ? atoi(retry_after) : 1;
    S.fault.delay_ms = delay ? atoi(delay) : 0;
}

/* ---- requests ---- */

struct setting {
    const char *k, *v;
};

struct settings {
    struct setting v[32];
    size_t n;
    bool bad;
};

static const char *const control_args[] = {
    "query",      "database",        "user",     "password",   "default_format",    "query_id",
    "session_id", "session_timeout", "compress", "decompress", "wait_end_of_query", NULL};

static enum MHD_Result collect_setting(void *cls, enum MHD_ValueKind kind, const char *k,
                                       const char *v)
{
    (void)kind;
    struct settings *s = cls;
    for (size_t i = 0; control_args[i]; i++)
        if (!strcmp(k, control_args[i]))
            return MHD_YES;
    if (!ident(k) || s->n == 32) {
        s->bad = true;
        return MHD_YES;
    }
    s->v[s->n++] = (struct setting){k, v ? v : ""};
    return MHD_YES;
}

static void sql_quote(char *out, size_t cap, const char *v)
{
    size_t o = 0;
    out[o++] = '\'';
    for (; *v && o + 4 < cap; v++) {
        if (*v == '\'' || *v == '\\')
            out[o++] = '\\';
        out[o++] = *v;
    }
    out[o++] = '\'';
    out[o] = 0;
}

static bool authorized(struct MHD_Connection *c)
{
    if (!S.user)
        return true;
    const char *u = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-ClickHouse-User");
    const char *k = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-ClickHouse-Key");
    char *bu = NULL, *bp = NULL;
    if (!u) {
        bu = MHD_basic_auth_get_username_password(c, &bp);
        u = bu;
        k = bp;
    }
    if (!u) {
        u = arg(c, "user");
        k = arg(c, "password");
    }
    pthread_mutex_lock(&S.lock); /* /__fault may change the password */
    bool ok = u && !strcmp(u, S.user) && !strcmp(k ? k : "", S.password ? S.password : "");
    pthread_mutex_unlock(&S.lock);
    MHD_free(bu);
    MHD_free(bp);
    return ok;
}

/* For "INSERT ... FORMAT x": the offset of that last FORMAT keyword, else 0. */
static size_t insert_format_pos(const char *q)
{
    const char *p = q;
    while (isspace((unsigned char)*p))
        p++;
    if (strncasecmp(p, "INSERT", 6))
        return 0;
    size_t pos = 0;
    for (const char *f = p; *f; f++) {
        if (!strncasecmp(f, "FORMAT", 6) && f > q && isspace((unsigned char)f[-1]) &&
            isspace((unsigned char)f[6]))
            pos = (size_t)(f - q);
    }
    return pos;
}

static enum MHD_Result handle(struct MHD_Connection *c, const char *url, struct req *rq)
{
    if (!strcmp(url, "/ping"))
        return answer(c, 200, "Ok.\n", 4, NULL, 0, 0, 0);
    if (!strcmp(url, "/__fault")) {
        pthread_mutex_lock(&S.lock);
        set_fault(arg(c, "mode"), arg(c, "count"), arg(c, "match"), arg(c, "retry_after"),
                  arg(c, "delay_ms"));
        const char *rej = arg(c, "reject");
        if (rej)
            snprintf(S.reject_substring, sizeof(S.reject_substring), "%s", rej);
        const char *pw = arg(c, "password");
        if (pw)
            snprintf(S.password_buf, sizeof(S.password_buf), "%s", pw);
        if (pw)
            S.password = S.password_buf;
        logf_("fault mode=%s count=%ld match=%s\n", S.fault.mode, S.fault.count, S.fault.match);
        pthread_mutex_unlock(&S.lock);
        return answer(c, 200, "ok\n", 3, NULL, 0, 0, 0);
    }
    if (!strcmp(url, "/__stats")) {
        char b[256];
        pthread_mutex_lock(&S.lock);
        int n = snprintf(b, sizeof(b), "requests %lu\ninserts %lu\nfaults %lu\n", S.seq, S.inserts,
                         S.faults);
        pthread_mutex_unlock(&S.lock);
        return answer(c, 200, b, (size_t)n, NULL, 0, 0, 0);
    }
    if (strcmp(url, "/"))
        return answer(c, 404, "Not found\n", 10, NULL, 0, 0, 0);

    if (!authorized(c)) {
        const char *m = "Code: 516. DB::Exception: Authentication failed: password is incorrect, "
                        "or there is no user with such name. (AUTHENTICATION_FAILED)\n";
        return answer(c, 403, m, strlen(m), NULL, 516, 0, 0);
    }
    const char *enc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    char *data = rq->body;
    size_t dlen = rq->len;
    char *unz = NULL;
    if (enc && !strcasecmp(enc, "gzip") && dlen) {
        if (gunzip(data, dlen, &unz, &dlen)) {
            const char *m = "Code: 354. DB::Exception: inflate failed. (ZLIB_INFLATE_FAILED)\n";
            return answer(c, 400, m, strlen(m), NULL, 354, 0, 0);
        }
        data = unz;
    }
    const char *qp = arg(c, "query");
    size_t qlen = qp ? strlen(qp) : 0;
    /* ClickHouse: the query parameter, then the body (the INSERT's data, or more query text).
     * chdb takes inline INSERT data like clickhouse-client in multi-query mode, where an empty
     * line ends the data: binary rows with two newline bytes in a row would be cut. So the data
     * of an INSERT goes through a file: INSERT ... FROM INFILE 'f' FORMAT ... (the same insert
     * pipeline, insert_deduplication_token included). */
    pthread_mutex_lock(&S.lock);
    bool rejected = S.reject_substring[0] &&
                    ((dlen && memmem(data, dlen, S.reject_substring, strlen(S.reject_substring))) ||
                     (qp && strstr(qp, S.reject_substring)));
    pthread_mutex_unlock(&S.lock);
    char infile[4200] = "";
    size_t fpos = qlen ? insert_format_pos(qp) : 0;
    char *q;
    size_t n = 0;
    if (fpos && dlen) {
        pthread_mutex_lock(&S.lock);
        unsigned long id = ++S.files;
        pthread_mutex_unlock(&S.lock);
        snprintf(infile, sizeof(infile), "%s/.insert-%d-%lu.bin", S.tmp_dir, (int)getpid(), id);
        FILE *f = fopen(infile, "wb");
        if (!f || fwrite(data, 1, dlen, f) != dlen || fclose(f)) {
            free(unz);
            unlink(infile);
            const char *m = "Code: 1001. DB::Exception: cannot buffer the data. (STD_EXCEPTION)\n";
            return answer(c, 500, m, strlen(m), NULL, 1001, 0, 0);
        }
        char lit[4300];
        sql_quote(lit, sizeof(lit), infile);
        size_t need = qlen + strlen(lit) + 32;
        q = malloc(need);
        if (q)
            n = (size_t)snprintf(q, need, "%.*sFROM INFILE %s %s", (int)fpos, qp, lit, qp + fpos);
    } else {
        q = malloc(qlen + 1 + dlen + 1);
        if (q) {
            if (qlen) {
                memcpy(q, qp, qlen);
                n = qlen;
                if (dlen)
                    q[n++] = '\n';
            }
            if (dlen)
                memcpy(q + n, data, dlen);
            n += dlen;
            q[n] = 0;
        }
    }
    free(unz);
    if (!q) {
        if (infile[0])
            unlink(infile);
        return MHD_NO;
    }
    if (!n) {
        free(q);
        const char *m = "Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)\n";
        return answer(c, 400, m, strlen(m), NULL, 62, 0, 0);
    }
    struct settings st = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_setting, &st);
    const char *db = arg(c, "database");
    if (!db || !strcmp(db, "default"))
        db = S.default_db;
    if (st.bad || !ident(db)) {
        free(q);
        if (infile[0])
            unlink(infile);
        const char *m = "Code: 115. DB::Exception: Unknown setting or bad database name. "
                        "(UNKNOWN_SETTING)\n";
        return answer(c, 400, m, strlen(m), NULL, 115, 0, 0);
    }
    const char *fmt = arg(c, "default_format");
    if (!fmt || !ident(fmt))
        fmt = "TabSeparated";
    char first[128];
    size_t fl = strcspn(q, "\n");
    snprintf(first, sizeof(first), "%.*s", (int)(fl < 100 ? fl : 100), q);
    const char *token = arg(c, "insert_deduplication_token");

    pthread_mutex_lock(&S.lock);
    unsigned long seq = ++S.seq;
    char mode[16] = "";
    int retry_after = 0, delay = 0;
    bool hit = fault_hits(q, mode, sizeof(mode), &retry_after, &delay);
    pthread_mutex_unlock(&S.lock);

    if (hit && strcmp(mode, "slow") && strcmp(mode, "lost") && infile[0])
        unlink(infile); /* the fault answers before anything runs */
    if (hit) {
        logf_("%lu fault=%s token=%s q=%s\n", seq, mode, token ? token : "-", first);
        if (!strcmp(mode, "reset") || !strcmp(mode, "down")) {
            free(q);
            return MHD_NO;
        }
        if (!strcmp(mode, "503")) {
            free(q);
            const char *m = "Code: 202. DB::Exception: Too many simultaneous queries. "
                            "(TOO_MANY_SIMULTANEOUS_QUERIES)\n";
            return answer(c, 503, m, strlen(m), NULL, 202, 0, retry_after);
        }
        if (!strcmp(mode, "garbage")) {
            free(q);
            const char *m = "<html><body><h1>Welcome</h1>Please log in to continue.</body></html>";
            return answer(c, 200, m, strlen(m), "text/html", 0, 0, 0);
        }
        if (!strcmp(mode, "reject")) {
            free(q);
            const char *m = "Code: 27. DB::Exception: Cannot parse input: injected fault. "
                            "(CANNOT_PARSE_INPUT_ASSERTION_FAILED)\n";
            return answer(c, 400, m, strlen(m), NULL, 27, 0, 0);
        }
        if (!strcmp(mode, "tls400") || !strcmp(mode, "plain400")) {
            free(q);
            bool page = !strcmp(mode, "tls400");
            const char *m = page ? NGINX_TLS_400 : "Bad Request\n";
            return answer(c, 400, m, strlen(m), page ? "text/html" : "text/plain", 0, 0, 0);
        }
        if (!strcmp(mode, "echo")) {
            free(q);
            char m[4096] = "Code: 516. DB::Exception: Authentication failed; the request was:\n";
            echo_headers(c, m, sizeof(m));
            return answer(c, 403, m, strlen(m), NULL, 516, 0, 0);
        }
        if (!strcmp(mode, "slow"))
            usleep((useconds_t)delay * 1000);
    }
    if (rejected) {
        free(q);
        if (infile[0])
            unlink(infile);
        logf_("%lu rejected-substring token=%s q=%s\n", seq, token ? token : "-", first);
        const char *m = "Code: 27. DB::Exception: Cannot parse input: expected something else "
                        "(test reject). (CANNOT_PARSE_INPUT_ASSERTION_FAILED)\n";
        return answer(c, 400, m, strlen(m), NULL, 27, 0, 0);
    }

    pthread_mutex_lock(&S.lock);
    char sql[1024];
    snprintf(sql, sizeof(sql), "USE %s", db);
    char *out = NULL;
    size_t outlen = 0;
    uint64_t written = 0;
    int code = run_sql(sql, strlen(sql), "TabSeparated", &out, &outlen, NULL);
    for (size_t i = 0; !code && i < st.n; i++) {
        free(out);
        char v[600];
        sql_quote(v, sizeof(v), st.v[i].v);
        snprintf(sql, sizeof(sql), "SET %s = %s", st.v[i].k, v);
        code = run_sql(sql, strlen(sql), "TabSeparated", &out, &outlen, NULL);
    }
    if (!code) {
        free(out);
        code = run_sql(q, n, fmt, &out, &outlen, &written);
    }
    for (size_t i = 0; i < st.n; i++) {
        char *o2;
        size_t l2;
        snprintf(sql, sizeof(sql), "SET %s = DEFAULT", st.v[i].k);
        run_sql(sql, strlen(sql), "TabSeparated", &o2, &l2, NULL);
        free(o2);
    }
    if (!code && !strncasecmp(q, "INSERT", 6))
        S.inserts++;
    pthread_mutex_unlock(&S.lock);
    free(q);
    if (infile[0])
        unlink(infile);
    logf_("%lu status=%u code=%d written=%llu token=%s q=%s\n", seq, code ? status_of(code) : 200,
          code, (unsigned long long)written, token ? token : "-", first);
    if (hit && !strcmp(mode, "lost")) {
        free(out);
        return MHD_NO;
    }
    enum MHD_Result ret;
    if (code) {
        size_t ol = outlen;
        char *m = malloc(ol + 2);
        if (m) {
            memcpy(m, out, ol);
            m[ol++] = '\n';
        }
        ret = answer(c, status_of(code), m ? m : "error\n", m ? ol : 6, NULL, code, 0, 0);
        free(m);
    } else {
        ret = answer(c, 200, out ? out : "", out ? outlen : 0, NULL, 0, written, 0);
    }
    free(out);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls, (void)version, (void)method;
    struct req *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof(*rq));
        if (!rq)
            return MHD_NO;
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        /* A reset while the body arrives: the client sees its request cut. */
        pthread_mutex_lock(&S.lock);
        bool reset = false;
        if (!rq->len && !strcmp(S.fault.mode, "reset")) {
            const char *qp = arg(c, "query");
            if (!S.fault.match[0] || (qp && strstr(qp, S.fault.match))) {
                char m[16];
                int ra, d;
                reset = fault_hits(qp ? qp : "", m, sizeof(m), &ra, &d);
            }
        }
        pthread_mutex_unlock(&S.lock);
        if (reset) {
            logf_("- fault=reset (during upload)\n");
            return MHD_NO;
        }
        if (rq->len + *upload_size + 1 > rq->cap) {
            size_t cap = rq->cap ? rq->cap : 65536;
            while (cap < rq->len + *upload_size + 1)
                cap *= 2;
            char *b = realloc(rq->body, cap);
            if (!b)
                return MHD_NO;
            rq->body = b;
            rq->cap = cap;
        }
        memcpy(rq->body + rq->len, upload_data, *upload_size);
        rq->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    return handle(c, url, rq);
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

static void usage(void)
{
    fprintf(stderr,
            "usage: ch_front --lib libchdb.so --data DIR [--port N] [--port-file F] [--log F]\n"
            "                [--user U --password P] [--default-database DB] [--config F]\n"
            "                [--fault MODE [--fault-count N] [--fault-match S] [--retry-after S]\n"
            "                 [--delay-ms N]] [--reject-substring S]\n");
}

int main(int argc, char **argv)
{
    const char *lib = getenv("PFR_CHDB_LIB"), *data = NULL, *port_file = NULL, *logp = NULL;
    const char *fmode = NULL, *fcount = NULL, *fmatch = NULL, *fra = NULL, *fdelay = NULL;
    const char *config = NULL;
    int port = 0;
    S.default_db = "chdefault";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--lib"))
            lib = v;
        else if (!strcmp(a, "--data"))
            data = v;
        else if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--port-file"))
            port_file = v;
        else if (!strcmp(a, "--log"))
            logp = v;
        else if (!strcmp(a, "--user"))
            S.user = v;
        else if (!strcmp(a, "--password"))
            S.password = v;
        else if (!strcmp(a, "--default-database"))
            S.default_db = v;
        else if (!strcmp(a, "--config"))
            config = v;
        else if (!strcmp(a, "--fault"))
            fmode = v;
        else if (!strcmp(a, "--fault-count"))
            fcount = v;
        else if (!strcmp(a, "--fault-match"))
            fmatch = v;
        else if (!strcmp(a, "--retry-after"))
            fra = v;
        else if (!strcmp(a, "--delay-ms"))
            fdelay = v;
        else if (!strcmp(a, "--reject-substring"))
            snprintf(S.reject_substring, sizeof(S.reject_substring), "%s", v);
        else {
            usage();
            return 2;
        }
    }
    if (!lib || !data) {
        usage();
        return 2;
    }
    S.data_dir = data;
    /* The data of an insert is written once and read once: memory (tmpfs) when there is some,
     * else beside the database. */
    S.tmp_dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : data;
    set_fault(fmode, fcount, fmatch, fra, fdelay);
    if (logp && !(S.log = fopen(logp, "a"))) {
        perror(logp);
        return 1;
    }
    if (load_chdb(lib))
        return 1;
    char patharg[4096];
    snprintf(patharg, sizeof(patharg), "--path=%s", data);
    /* --config: a ClickHouse config file for the engine (clusters, for Distributed tables). */
    char confarg[4096];
    snprintf(confarg, sizeof(confarg), "--config-file=%s", config ? config : "");
    char *cargv[] = {"clickhouse", patharg, confarg};
    S.conn = ch.connect(config ? 3 : 2, cargv);
    if (!S.conn || !*S.conn) {
        fprintf(stderr, "ch_front: chdb_connect failed\n");
        return 1;
    }
    char sql[256];
    snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s ENGINE = Atomic", S.default_db);
    if (simple_sql(sql))
        return 1;

    /* Stop signals are waited for by main alone: block them before MHD starts its threads. */
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
        fprintf(stderr, "ch_front: cannot listen on port %d\n", port);
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
    logf_("listening on %d\n", bound);
    int sig;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    pthread_mutex_lock(&S.lock);
    ch.close_conn(S.conn);
    if (S.log)
        fclose(S.log);
    /* chdb's static destructors crash at exit in this version: leave without them. */
    _exit(0);
}
