/* `pfr serve`: the API handlers on real rings (status codes, JSON bodies, the engine's answers),
 * the bounded job runner (deadline, slots), and the HTTP daemon itself over a loopback socket
 * (routing, Host check, methods, gzip, and that it keeps serving after bad requests). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#include "pfr_serve.h"
#include "pfr_testgen.h"
#include "pfr_names.h"
#include "ring_fixture.h"

#define T0  (1714564800LL * FX_S)
#define MID (T0 + 300 * FX_S) /* the shift ring's hot function changes here */
#define END (T0 + 600 * FX_S)

typedef struct fixture {
    char dir[64];
    char shift[128]; /* "app": 60 chunks of 10 s from T0, hot_before then hot_after */
    char types[128]; /* "heap": two level types; "api": testgen CPU, 120 chunks */
    char names[128]; /* Coroot-style and hostile service names (pfr_fx_names), 30 chunks from T0 */
    char escapes[128]; /* names that need escapes (pfr_fx_escapes), 30 chunks from T0 */
    pfr_serve_api api;
} fixture;

static int make_types_ring(const char *path)
{
    pfr_store *s = pfr_fx_open(path);
    int rc = 0;
    for (int i = 0; i < 6 && rc == 0; i++) {
        const char *types[] = {"go:heap_alloc_space:bytes", "go:heap_inuse_space:bytes"};
        for (int k = 0; k < 2 && rc == 0; k++) {
            pfr_profile *p = pfr_fx_profile(types[k]);
            rc = p ? pfr_fx_sample(p, "main;alloc", 1000 * (k + 1), 7, "heapy") : -ENOMEM;
            if (rc == 0)
                rc = pfr_fx_append(s, "heap", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p);
            pfr_profile_free(p);
        }
    }
    pfr_testgen *g = pfr_testgen_new(7, 0, NULL);
    for (int i = 0; i < 120 && rc == 0 && g; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * 10 * FX_S, 10 * FX_S);
        rc = p ? pfr_fx_append(s, "api", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p) : -ENOMEM;
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    pfr_store_close(s);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/pfr-serve-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->shift, sizeof(f->shift), "%s/shift.db", f->dir);
    snprintf(f->types, sizeof(f->types), "%s/types.db", f->dir);
    snprintf(f->names, sizeof(f->names), "%s/names.db", f->dir);
    snprintf(f->escapes, sizeof(f->escapes), "%s/escapes.db", f->dir);
    pfr_store *s = pfr_fx_open(f->shift);
    int rc = pfr_fx_shift_ring(s, "app", T0, 60);
    pfr_store_close(s);
    s = pfr_fx_open(f->names);
    rc = rc ? rc : pfr_fx_names_ring(s, T0, 30);
    pfr_store_close(s);
    s = pfr_fx_open(f->escapes);
    rc = rc ? rc : pfr_fx_escapes_ring(s, T0, 30);
    pfr_store_close(s);
    if (rc || make_types_ring(f->types))
        return -1;
    f->api.store_path = f->shift;
    f->api.limits = pfr_serve_limits_resolve(NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

/* Call path with the arguments kv[0..n) (values as they are, '=' and all). */
static json_t *call_kv(const pfr_serve_api *api, const char *path, unsigned *status,
                       const pfr_kv *kv, size_t n)
{
    pfr_serve_response r;
    assert_int_equal(pfr_serve_api_call(api, path, kv, n, END, &r), 0);
    assert_non_null(r.body);
    assert_non_null(strstr(r.content_type, "application/json"));
    json_error_t err;
    json_t *doc = json_loadb(r.body, r.len, 0, &err);
    if (!doc)
        fail_msg("%s: not JSON (%s): %.200s", path, err.text, r.body);
    *status = r.status;
    pfr_serve_response_free(&r);
    return doc;
}

/* Call path with "k=v" arguments (NULL-terminated) and parse the JSON body. */
static json_t *call_api(const pfr_serve_api *api, const char *path, unsigned *status, ...)
{
    pfr_kv kv[16];
    char keys[16][32];
    size_t n = 0;
    va_list ap;
    va_start(ap, status);
    for (const char *a; n < 16 && (a = va_arg(ap, const char *));) {
        const char *eq = strchr(a, '=');
        assert_non_null(eq);
        snprintf(keys[n], sizeof(keys[n]), "%.*s", (int)(eq - a), a);
        kv[n].key = keys[n];
        kv[n].value = eq + 1;
        n++;
    }
    va_end(ap);
    return call_kv(api, path, status, kv, n);
}

#define ARG_RANGE(a, b) "from=" #a, "to=" #b

/* A 4xx with a JSON {"error": "...", "status": N} whose message contains want. */
/* status is read here, after doc's call wrote it (argument evaluation order is unspecified) */
static void expect_error(json_t *doc, const unsigned *statusp, unsigned want_status,
                         const char *want)
{
    unsigned status = *statusp;
    const char *msg = json_string_value(json_object_get(doc, "error"));
    assert_non_null(msg);
    if (status != want_status || !strstr(msg, want))
        fail_msg("status %u (want %u), error \"%s\" (want \"%s\")", status, want_status, msg, want);
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), (json_int_t)status);
    json_decref(doc);
}

static void test_ls(void **state)
{
    fixture *f = *state;
    unsigned st;
    json_t *d = call_api(&f->api, "/api/ls", &st, NULL);
    assert_int_equal(st, 200);
    json_t *svc = json_array_get(json_object_get(json_object_get(d, "ls"), "services"), 0);
    assert_string_equal(json_string_value(json_object_get(svc, "name")), "app");
    assert_true(json_integer_value(json_object_get(json_object_get(d, "limits"), "max_range_ns")) >
                0);
    json_decref(d);
}

static const char *top_name(json_t *d, size_t i)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(d, "top"), i), "name"));
}

static void test_flame(void **state)
{
    fixture *f = *state;
    unsigned st;
    /* first half: hot_before is the heaviest function */
    json_t *d = call_api(&f->api, "/api/flame", &st, "service=app", "from=1714564800",
                         "to=1714565100", NULL);
    assert_int_equal(st, 200);
    assert_string_equal(top_name(d, 0), "hot_before");
    json_t *fl = json_object_get(d, "flame");
    assert_string_equal(json_string_value(json_object_get(fl, "kind")), "flame");
    assert_int_equal(json_integer_value(json_object_get(d, "chunks")), 30);
    /* 30 chunks of (2 + 3 + 0.5) s */
    assert_int_equal(json_integer_value(json_object_get(fl, "total")), 30 * 55 * FX_S / 10);
    json_decref(d);
    /* second half, relative times resolved against the request's now (END) */
    d = call_api(&f->api, "/api/flame", &st, "from=-5m", "to=now", "top=1", NULL);
    assert_int_equal(st, 200);
    assert_string_equal(top_name(d, 0), "hot_after");
    assert_int_equal(json_array_size(json_object_get(d, "top")), 1);
    json_decref(d);
}

static void test_diff(void **state)
{
    fixture *f = *state;
    unsigned st;
    json_t *d = call_api(&f->api, "/api/diff", &st, "service=app", "from=1714565100",
                         "to=1714565400", NULL);
    assert_int_equal(st, 200);
    json_t *fl = json_object_get(d, "flame");
    assert_string_equal(json_string_value(json_object_get(fl, "kind")), "diff");
    assert_int_equal(json_integer_value(json_object_get(fl, "base_from_ns")), T0);
    bool seen_after = false, seen_before = false;
    for (size_t i = 0; i < json_array_size(json_object_get(d, "top")); i++) {
        json_t *row = json_array_get(json_object_get(d, "top"), i);
        const char *n = json_string_value(json_object_get(row, "name"));
        double ch = json_real_value(json_object_get(row, "change"));
        if (strcmp(n, "hot_after") == 0)
            seen_after = ch > 0.5;
        if (strcmp(n, "hot_before") == 0)
            seen_before = ch < -0.5;
        assert_string_not_equal(n, "steady_work"); /* unchanged: left out */
    }
    assert_true(seen_after && seen_before);
    json_decref(d);
    /* a baseline before the ring: no data there, said so */
    d = call_api(&f->api, "/api/diff", &st, "from=1714564800", "to=1714565100", NULL);
    expect_error(d, &st, 404, "baseline");
    d = call_api(&f->api, "/api/diff", &st, "from=1714565100", "to=1714565400",
                 "base_to=1714565100", NULL);
    expect_error(d, &st, 400, "base_to needs base_from");
}

static void test_timeline(void **state)
{
    fixture *f = *state;
    unsigned st;
    json_t *d = call_api(&f->api, "/api/timeline", &st, "from=1714564800", "to=1714565400",
                         "step=1m", NULL);
    assert_int_equal(st, 200);
    json_t *pts = json_object_get(json_object_get(d, "timeline"), "points");
    assert_int_equal(json_array_size(pts), 10);
    assert_int_equal(json_integer_value(json_object_get(d, "chunks")), 60);
    json_decref(d);
    d = call_api(&f->api, "/api/timeline", &st, "from=1714564800", "to=1714565400", "points=100",
                 NULL);
    assert_int_equal(st, 200);
    assert_true(json_array_size(json_object_get(json_object_get(d, "timeline"), "points")) <= 100);
    json_decref(d);
    d = call_api(&f->api, "/api/timeline", &st, "from=1714564800", "to=1714565400", "step=1ms",
                 NULL);
    expect_error(d, &st, 400, "too many intervals");
    d = call_api(&f->api, "/api/timeline", &st, "points=0", NULL);
    expect_error(d, &st, 400, "bad points");
    d = call_api(&f->api, "/api/timeline", &st, "step=soon", NULL);
    expect_error(d, &st, 400, "bad step");
}

static void test_labels(void **state)
{
    fixture *f = *state;
    unsigned st;
    json_t *d = call_api(&f->api, "/api/labels", &st, "from=1714564800", "to=1714565400", NULL);
    assert_int_equal(st, 200);
    json_t *pid = json_object_get(json_object_get(d, "sample_labels"), "pid");
    assert_string_equal(json_string_value(json_object_get(json_array_get(pid, 0), "value")), "100");
    json_decref(d);
    /* a sample label filter: the engine keeps only matching samples */
    d = call_api(&f->api, "/api/flame", &st, "from=1714564800", "to=1714565400", "label=comm=app",
                 NULL);
    assert_int_equal(st, 200);
    assert_true(json_integer_value(json_object_get(json_object_get(d, "flame"), "total")) > 0);
    json_decref(d);
    d = call_api(&f->api, "/api/flame", &st, "label=pid", NULL);
    expect_error(d, &st, 400, "bad label");
}

/* ---- service names as Coroot gives them ('/', '.', '-', ':'), URL-significant and hostile ---- */
static const char *flame_str(json_t *d, const char *key)
{
    return json_string_value(json_object_get(json_object_get(d, "flame"), key));
}

/* A name as the API prints it (pfr_names.h), malloc'ed. */
static char *json_form(const char *name)
{
    int err;
    char *p = pfr_name_json(name, &err);
    assert_int_equal(err, 0);
    return p ? p : strdup(name);
}

/* Every service of the names ring, by its exact name: the flame graph, the timeline and the diff
 * answer for that service and no other. */
static void test_names(void **state)
{
    fixture *f = *state;
    pfr_serve_api api = {.store_path = f->names, .limits = f->api.limits};
    unsigned st;
    json_t *d = call_api(&api, "/api/ls", &st, NULL);
    assert_int_equal(st, 200);
    json_t *svcs = json_object_get(json_object_get(d, "ls"), "services");
    assert_int_equal(json_array_size(svcs), pfr_fx_nnames - 1); /* two instances of one service */
    bool seen_bytes = false;
    for (size_t i = 0; i < json_array_size(svcs); i++)
        seen_bytes |= strcmp(json_string_value(json_object_get(json_array_get(svcs, i), "name")),
                             "bytes\\xff\\xfe") == 0;
    assert_true(seen_bytes); /* not UTF-8 in the ring: listed with its bad bytes as \xHH */
    json_decref(d);
    for (size_t k = 0; k < pfr_fx_nnames; k++) {
        const fx_named *n = &pfr_fx_names[k];
        if (k > 0 && strcmp(n->service, pfr_fx_names[k - 1].service) == 0)
            continue; /* the other api instance */
        char *name = json_form(n->service), *leaf = json_form(n->leaf);
        pfr_kv q[] = {{"service", name}, {"from", "1714564800"}, {"to", "1714565100"}};
        d = call_kv(&api, "/api/flame", &st, q, 3);
        if (st != 200)
            fail_msg("%s: %u %s", name, st, json_dumps(d, 0));
        assert_string_equal(flame_str(d, "service"), name);
        assert_string_equal(top_name(d, 0), leaf);
        json_decref(d);
        d = call_kv(&api, "/api/timeline", &st, q, 3);
        assert_int_equal(st, 200);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(d, "timeline"), "service")), name);
        assert_int_equal(json_integer_value(json_object_get(d, "chunks")),
                         strcmp(n->service, "/k8s/default/api") == 0 ? 60 : 30);
        json_decref(d);
        pfr_kv dq[] = {{"service", name}, {"from", "1714564950"}, {"to", "1714565100"}};
        d = call_kv(&api, "/api/diff", &st, dq, 3);
        assert_int_equal(st, 200);
        assert_string_equal(flame_str(d, "service"), name);
        assert_string_equal(flame_str(d, "kind"), "diff");
        json_decref(d);
        free(name);
        free(leaf);
    }
    /* one instance of the Deployment: Coroot's per-instance view filters on container.id */
    for (int inst = 0; inst < 2; inst++) {
        const fx_named *n = &pfr_fx_names[2 + inst];
        char label[128];
        snprintf(label, sizeof(label), "container.id=%s", n->container_id);
        pfr_kv q[] = {{"service", n->service},
                      {"label", label},
                      {"from", "1714564800"},
                      {"to", "1714565100"}};
        d = call_kv(&api, "/api/flame", &st, q, 4);
        assert_int_equal(st, 200);
        assert_string_equal(top_name(d, 0), n->leaf);
        assert_null(top_name(d, 2)); /* main and the leaf: the other instance left out */
        json_t *fl = json_object_get(d, "flame");
        assert_int_equal(json_integer_value(json_object_get(fl, "total")), 30 * n->value);
        assert_string_equal(json_string_value(json_object_get(json_object_get(fl, "profile_labels"),
                                                              "container.id")),
                            n->container_id);
        json_decref(d);
        d = call_kv(&api, "/api/labels", &st, q, 4);
        assert_int_equal(st, 200);
        json_decref(d);
    }
    pfr_kv other[] = {{"service", "/k8s/default/api"},
                      {"label", "container.id=/k8s/default/api-7d4f9c6b8d-zzzzz/app"}};
    expect_error(call_kv(&api, "/api/flame", &st, other, 2), &st, 404, "match");
    /* a name that is only the start, or another form, of a real one is not it */
    pfr_kv near[] = {{"service", "/k8s/default"}};
    expect_error(call_kv(&api, "/api/flame", &st, near, 1), &st, 404, "no service");
    pfr_kv slash[] = {{"service", "k8s/default/api"}};
    expect_error(call_kv(&api, "/api/flame", &st, slash, 1), &st, 404, "no service");
    /* every service at once: a function name that is not UTF-8 is still a row of the table */
    d = call_api(&api, "/api/flame", &st, "from=1714564800", "to=1714565100", "top=50", NULL);
    assert_int_equal(st, 200);
    bool seen = false;
    for (size_t i = 0; top_name(d, i); i++)
        seen |= strcmp(top_name(d, i), "bytes_fn\\xff") == 0;
    assert_true(seen);
    json_decref(d);
}

/* Names that need escapes (pfr_fx_escapes): each name /api/ls prints, service or container.id,
 * and each comm value /api/labels prints, selects its own stream in /api/flame and
 * /api/timeline as it is; frames come in the same form. */
static void test_escaped_names(void **state)
{
    fixture *f = *state;
    pfr_serve_api api = {.store_path = f->escapes, .limits = f->api.limits};
    unsigned st;
    json_t *ls = call_api(&api, "/api/ls", &st, NULL);
    assert_int_equal(st, 200);
    json_t *svcs = json_object_get(json_object_get(ls, "ls"), "services");
    assert_int_equal(json_array_size(svcs), pfr_fx_nescapes);
    for (size_t i = 0; i < json_array_size(svcs); i++) {
        json_t *svc = json_array_get(svcs, i);
        const char *name = json_string_value(json_object_get(svc, "name"));
        const char *cid = json_string_value(
            json_array_get(json_object_get(json_object_get(svc, "labels"), "container.id"), 0));
        const fx_named *n = NULL;
        for (size_t k = 0; k < pfr_fx_nescapes && !n; k++) {
            char *want = json_form(pfr_fx_escapes[k].service);
            n = strcmp(want, name) == 0 ? &pfr_fx_escapes[k] : NULL;
            free(want);
        }
        if (!n)
            fail_msg("/api/ls printed \"%s\", no service's JSON form", name);
        char *leaf = json_form(n->leaf), label[256], *want_cid = json_form(n->container_id);
        assert_string_equal(cid, want_cid);
        snprintf(label, sizeof(label), "container.id=%s", cid);
        pfr_kv q[] = {
            {"service", name}, {"label", label}, {"from", "1714564800"}, {"to", "1714565100"}};
        json_t *d = call_kv(&api, "/api/flame", &st, q, 4);
        if (st != 200)
            fail_msg("%s: %u %s", name, st, json_dumps(d, 0));
        assert_string_equal(flame_str(d, "service"), name);
        assert_string_equal(top_name(d, 0), leaf);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "flame"), "total")),
                         30 * n->value);
        json_decref(d);
        d = call_kv(&api, "/api/timeline", &st, q, 4);
        assert_int_equal(st, 200);
        assert_int_equal(json_integer_value(json_object_get(d, "chunks")), 30);
        json_decref(d);
        /* the comm value /api/labels prints selects the same samples, with no service given */
        d = call_kv(&api, "/api/labels", &st, q, 1);
        assert_int_equal(st, 200);
        json_t *comm = json_object_get(json_object_get(d, "sample_labels"), "comm");
        assert_int_equal(json_array_size(comm), 1);
        snprintf(label, sizeof(label), "comm=%s",
                 json_string_value(json_object_get(json_array_get(comm, 0), "value")));
        json_decref(d);
        pfr_kv cq[] = {{"label", label}, {"from", "1714564800"}, {"to", "1714565100"}};
        d = call_kv(&api, "/api/flame", &st, cq, 3);
        assert_int_equal(st, 200);
        assert_string_equal(top_name(d, 0), leaf);
        json_decref(d);
        free(leaf);
        free(want_cid);
    }
    json_decref(ls);
}

/* Everything a page or a person can get wrong: a JSON 4xx, never a crash. */
static void test_bad_requests(void **state)
{
    fixture *f = *state;
    unsigned st;
    expect_error(call_api(&f->api, "/api/flame", &st, "service=nope", NULL), &st, 404,
                 "no service \"nope\"");
    expect_error(call_api(&f->api, "/api/timeline", &st, "service=nope", NULL), &st, 404,
                 "no service");
    expect_error(call_api(&f->api, "/api/flame", &st, "type=go:nothing:count", NULL), &st, 404,
                 "no profiles of type");
    expect_error(call_api(&f->api, "/api/flame", &st, "from=tomorrow-ish", NULL), &st, 400,
                 "bad from");
    expect_error(call_api(&f->api, "/api/flame", &st, "to=13:61", NULL), &st, 400, "bad to");
    expect_error(call_api(&f->api, "/api/flame", &st, "from=1714565400", "to=1714564800", NULL),
                 &st, 400, "empty range");
    /* huge: from the epoch to now, and a year */
    expect_error(call_api(&f->api, "/api/flame", &st, "from=0", "to=now", NULL), &st, 400,
                 "too long");
    expect_error(call_api(&f->api, "/api/diff", &st, "from=-1y", NULL), &st, 400, "bad from");
    expect_error(call_api(&f->api, "/api/diff", &st, "from=-400d", NULL), &st, 400, "too long");
    expect_error(call_api(&f->api, "/api/labels", &st, "from=-400d", NULL), &st, 400, "too long");
    /* nothing in range */
    expect_error(call_api(&f->api, "/api/flame", &st, "from=-2d", "to=-1d", NULL), &st, 404,
                 "no data");
    expect_error(call_api(&f->api, "/api/nope", &st, NULL), &st, 404, "no such endpoint");
    expect_error(call_api(&f->api, "/api/flame", &st, "servce=app", NULL), &st, 400,
                 "unknown argument \"servce\"");
    expect_error(call_api(&f->api, "/api/flame", &st, "min_width=200", NULL), &st, 400,
                 "bad min_width");
    expect_error(call_api(&f->api, "/api/flame", &st, "top=100000", NULL), &st, 400, "bad top");
    /* a smaller --max-range */
    pfr_serve_api small = f->api;
    small.limits.max_range_ns = 60 * FX_S;
    expect_error(call_api(&small, "/api/flame", &st, "from=-2m", NULL), &st, 400, "at most 1m");
    /* no ring there */
    pfr_serve_api none = f->api;
    none.store_path = "/nonexistent/ring.db";
    expect_error(call_api(&none, "/api/ls", &st, NULL), &st, 503, "no ring at");
    /* and it still answers */
    json_t *d = call_api(&f->api, "/api/flame", &st, NULL);
    assert_int_equal(st, 200);
    json_decref(d);
}

static void test_types(void **state)
{
    fixture *f = *state;
    unsigned st;
    pfr_serve_api api = f->api;
    api.store_path = f->types;
    expect_error(
        call_api(&api, "/api/flame", &st, "service=heap", "from=1714564800", "to=1714564860", NULL),
        &st, 400, "several profile types");
    /* a level type: the mean over the chunks */
    json_t *d = call_api(&api, "/api/flame", &st, "service=heap", "type=go:heap_inuse_space:bytes",
                         "from=1714564800", "to=1714564860", NULL);
    assert_int_equal(st, 200);
    json_t *fl = json_object_get(d, "flame");
    assert_true(json_is_true(json_object_get(fl, "gauge")));
    assert_true(json_number_value(json_object_get(fl, "total")) == 2000);
    json_decref(d);
}

/* The job runner: a deadline far too short gets a 503; the worker finishes on its own and keeps
 * its answer, so a retry gets it. */
static void test_jobs_deadline(void **state)
{
    fixture *f = *state;
    pfr_serve_api api = f->api;
    api.store_path = f->types;
    api.limits.timeout_ns = 1000; /* 1 us: no query of 120 chunks finishes in that */
    api.limits.max_queries = 1;
    pfr_serve_jobs *j = pfr_serve_jobs_new(&api);
    assert_non_null(j);
    pfr_kv args[] = {{"service", "api"}, {"from", "1714564800"}, {"to", "1714566000"}};
    pfr_kv rel[] = {{"service", "api"}, {"from", "-10m"}};
    pfr_serve_response r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pfr_serve_jobs_call(j, "/api/flame", i ? rel : args, i ? 2 : 3, END, &r),
                         0);
        assert_int_equal(r.status, 503);
        assert_true(r.retry_after > 0);
        assert_true(strstr(r.body, "longer than") || strstr(r.body, "busy"));
        pfr_serve_response_free(&r);
    }
    for (int i = 0; i < 2000 && pfr_serve_jobs_running(j); i++) /* at most 20 s */
        usleep(10000);
    assert_int_equal(pfr_serve_jobs_running(j), 0);
    /* the abandoned query's answer was kept: the retry gets it at once */
    assert_int_equal(pfr_serve_jobs_call(j, "/api/flame", args, 3, END, &r), 0);
    assert_int_equal(r.status, 200);
    pfr_serve_response_free(&r);
    /* relative times are never reused */
    assert_int_equal(pfr_serve_jobs_call(j, "/api/flame", rel, 2, END, &r), 0);
    assert_int_equal(r.status, 503);
    pfr_serve_response_free(&r);
    pfr_serve_jobs_free(j); /* waits for the abandoned worker */

    api.limits.timeout_ns = 30LL * FX_S;
    j = pfr_serve_jobs_new(&api);
    assert_int_equal(pfr_serve_jobs_call(j, "/api/flame", rel, 2, END, &r), 0);
    assert_int_equal(r.status, 200);
    pfr_serve_response_free(&r);
    assert_int_equal(pfr_serve_jobs_running(j), 0);
    pfr_serve_jobs_free(j);
}

/* A call started ahead (the page's first flame graph, with the page): the call that follows
 * waits for that answer instead of computing it again, and gets what a call alone gets. Calls
 * whose answer may not be kept are not started ahead. */
static void test_jobs_prefetch(void **state)
{
    fixture *f = *state;
    pfr_serve_api api = f->api;
    api.store_path = f->types;
    pfr_serve_jobs *j = pfr_serve_jobs_new(&api);
    assert_non_null(j);
    pfr_kv args[] = {{"service", "api"}, {"from", "1714564800"}, {"to", "1714566000"}};
    pfr_kv rel[] = {{"service", "api"}, {"from", "-10m"}};
    assert_int_equal(pfr_serve_jobs_prefetch(j, "/api/flame", rel, 2, END), 0);
    assert_int_equal(pfr_serve_jobs_running(j), 0);
    assert_int_equal(pfr_serve_jobs_prefetch(j, "/api/flame", args, 3, END), 0);
    pfr_serve_response r, alone;
    assert_int_equal(pfr_serve_jobs_call(j, "/api/flame", args, 3, END, &r), 0);
    assert_int_equal(r.status, 200);
    uint64_t hits, misses;
    pfr_serve_cache_stats(pfr_serve_jobs_cache(j), &hits, &misses);
    assert_int_equal(hits, 1); /* the answer computed ahead, not a second run */
    assert_int_equal(pfr_serve_api_call(&api, "/api/flame", args, 3, END, &alone), 0);
    assert_int_equal(alone.status, 200);
    assert_int_equal(r.len, alone.len);
    assert_memory_equal(r.body, alone.body, r.len);
    pfr_serve_response_free(&r);
    pfr_serve_response_free(&alone);
    for (int i = 0; i < 2000 && pfr_serve_jobs_running(j); i++) /* at most 20 s */
        usleep(10000);
    assert_int_equal(pfr_serve_jobs_running(j), 0);
    pfr_serve_jobs_free(j);
}

static void test_cache(void **state)
{
    fixture *f = *state;
    char *k1, *k2, *k3;
    pfr_kv abs[] = {{"from", "1714564800"}, {"to", "@1714565400.5"}};
    pfr_kv rel[] = {{"from", "-1h"}, {"to", "1714565400"}};
    pfr_kv half[] = {{"from", "1714564800"}};
    assert_int_equal(pfr_serve_cache_key(f->types, "/api/ls", NULL, 0, &k1), 0);
    assert_null(k1);
    assert_int_equal(pfr_serve_cache_key(f->types, "/api/flame", rel, 2, &k1), 0);
    assert_null(k1);
    assert_int_equal(pfr_serve_cache_key(f->types, "/api/flame", half, 1, &k1), 0);
    assert_null(k1);
    assert_int_equal(pfr_serve_cache_key(f->types, "/api/flame", abs, 2, &k1), 0);
    assert_int_equal(pfr_serve_cache_key(f->types, "/api/diff", abs, 2, &k2), 0);
    assert_non_null(k1);
    assert_non_null(k2);

    pfr_serve_cache *c = pfr_serve_cache_new(100, 2);
    pfr_serve_response r = {.status = 200, .content_type = "application/json"}, got;
    r.body = strdup("{\"a\":1}");
    r.len = strlen(r.body);
    pfr_serve_cache_put(c, k1, &r);
    assert_true(pfr_serve_cache_get(c, k1, &got));
    assert_int_equal(got.len, r.len);
    assert_memory_equal(got.body, r.body, r.len);
    pfr_serve_response_free(&got);
    assert_false(pfr_serve_cache_get(c, k2, &got));
    r.status = 404; /* errors are not kept */
    pfr_serve_cache_put(c, k2, &r);
    assert_false(pfr_serve_cache_get(c, k2, &got));
    r.status = 200;

    /* a write to the ring makes a new key: the old answer is never served again */
    pfr_store *w = pfr_fx_open(f->types);
    pfr_profile *p = pfr_fx_profile("go:heap_alloc_space:bytes");
    assert_int_equal(pfr_fx_sample(p, "main;more", 5, 7, "heapy"), 0);
    assert_int_equal(pfr_fx_append(w, "heap", NULL, 0, T0 + 3600 * FX_S, 10 * FX_S, p), 0);
    pfr_profile_free(p);
    pfr_store_close(w);
    assert_int_equal(pfr_serve_cache_key(f->types, "/api/flame", abs, 2, &k3), 0);
    assert_non_null(k3);
    assert_false(pfr_serve_cache_get(c, k3, &got));

    /* least recently used out first (2 entries) */
    pfr_serve_cache_put(c, k2, &r);
    assert_true(pfr_serve_cache_get(c, k1, &got)); /* k1 now newer than k2 */
    pfr_serve_response_free(&got);
    pfr_serve_cache_put(c, k3, &r);
    assert_false(pfr_serve_cache_get(c, k2, &got));
    assert_true(pfr_serve_cache_get(c, k1, &got));
    pfr_serve_response_free(&got);
    uint64_t hits, misses;
    pfr_serve_cache_stats(c, &hits, &misses);
    assert_int_equal(hits, 3);
    /* bodies over half the budget are not kept */
    pfr_serve_response big = {.status = 200, .body = calloc(1, 80), .len = 80};
    pfr_serve_cache_put(c, k2, &big);
    assert_false(pfr_serve_cache_get(c, k2, &got));
    pfr_serve_response_free(&big);
    pfr_serve_response_free(&r);
    pfr_serve_cache_free(c);
    free(k1);
    free(k2);
    free(k3);
}

static void test_listen(void **state)
{
    (void)state;
    struct sockaddr_storage sa;
    size_t len;
    char err[256];
    assert_int_equal(pfr_serve_parse_listen("8123", &sa, &len, err, sizeof(err)), 0);
    assert_true(pfr_serve_is_loopback(&sa));
    assert_int_equal(pfr_serve_parse_listen("127.0.0.1:0", &sa, &len, err, sizeof(err)), 0);
    assert_true(pfr_serve_is_loopback(&sa));
    assert_int_equal(pfr_serve_parse_listen("[::1]:80", &sa, &len, err, sizeof(err)), 0);
    assert_true(pfr_serve_is_loopback(&sa));
    assert_int_equal(pfr_serve_parse_listen("0.0.0.0:80", &sa, &len, err, sizeof(err)), 0);
    assert_false(pfr_serve_is_loopback(&sa));
    assert_int_equal(pfr_serve_parse_listen("::1:80", &sa, &len, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_serve_parse_listen("127.0.0.1:99999", &sa, &len, err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(pfr_serve_parse_listen("127.0.0.1:", &sa, &len, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_serve_parse_listen("[::1:80", &sa, &len, err, sizeof(err)), -EINVAL);
}

/* ---- the daemon over HTTP ---- */
typedef struct http_result {
    long status;
    char body[8192];
    size_t len;
    char headers[4096];
    size_t hlen;
} http_result;

static size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
    http_result *r = ctx;
    size_t k = sz * n, room = sizeof(r->body) - 1 - r->len;
    memcpy(r->body + r->len, p, k < room ? k : room);
    r->len += k < room ? k : room;
    r->body[r->len] = '\0';
    return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ctx)
{
    http_result *r = ctx;
    size_t k = sz * n, room = sizeof(r->headers) - 1 - r->hlen;
    memcpy(r->headers + r->hlen, p, k < room ? k : room);
    r->hlen += k < room ? k : room;
    r->headers[r->hlen] = '\0';
    return k;
}

static void http(const char *url, const char *method, const char *host, bool gzip, http_result *r)
{
    memset(r, 0, sizeof(*r));
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char hh[128];
    if (host) {
        snprintf(hh, sizeof(hh), "Host: %s", host);
        h = curl_slist_append(h, hh);
    }
    if (gzip)
        h = curl_slist_append(h, "Accept-Encoding: gzip");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (method && strcmp(method, "POST") == 0)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "x=1");
    else if (method && strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void test_http(void **state)
{
    fixture *f = *state;
    pfr_serve_config cfg = {.store_path = f->shift, .listen = "127.0.0.1:0"};
    pfr_serve *s = NULL;
    char err[256] = "";
    int rc = pfr_serve_start(&cfg, &s, err, sizeof(err));
    if (rc < 0)
        fail_msg("start: %s", err);
    assert_true(pfr_serve_loopback(s));
    assert_true(pfr_serve_port(s) > 0);
    char base[128], url[512];
    snprintf(base, sizeof(base), "%s", pfr_serve_url(s));
    http_result r;

    http(base, NULL, NULL, false, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "assets/serve.js"));
    assert_non_null(strstr(r.headers, "Content-Security-Policy: default-src 'none'"));
    http(base, "HEAD", NULL, false, &r);
    assert_int_equal(r.status, 200);
    snprintf(url, sizeof(url), "%sassets/flame.js", base);
    http(url, NULL, NULL, true, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.headers, "Content-Encoding: gzip"));
    assert_true((unsigned char)r.body[0] == 0x1f && (unsigned char)r.body[1] == 0x8b);

    /* bad requests, each a JSON 4xx */
    snprintf(url, sizeof(url), "%sapi/flame?service=nope", base);
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "\"error\""));
    snprintf(url, sizeof(url), "%sapi/flame?from=%%ff%%00garbage", base);
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "not valid UTF-8"));
    snprintf(url, sizeof(url), "%sapi/flame?service=%%c0%%80&type=%%ed%%a0%%80", base);
    http(url, NULL, NULL, false, &r); /* overlong NUL, a surrogate */
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "not valid UTF-8"));
    snprintf(url, sizeof(url), "%sapi/flame?from=%%c3%%a9t%%c3%%a9", base); /* "été" */
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "bad from \\\"\xc3\xa9t\xc3\xa9\\\""));
    snprintf(url, sizeof(url), "%sapi/flame?from=0&to=now", base);
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "too long"));
    snprintf(url, sizeof(url), "%sapi/ls", base);
    http(url, "POST", NULL, false, &r);
    assert_int_equal(r.status, 405);
    http(url, NULL, "attacker.example:8123", false, &r);
    assert_int_equal(r.status, 403);
    http(url, NULL, "localhost:9999", false, &r); /* an SSH tunnel's local port */
    assert_int_equal(r.status, 200);
    snprintf(url, sizeof(url), "%snot/here", base);
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 404);
    snprintf(url, sizeof(url),
             "%sapi/flame?a=1&a=2&a=3&a=4&a=5&a=6&a=7&a=8&a=9&a=10&a=11&a=12&a="
             "13&a=14&a=15&a=16&a=17&a=18&a=19&a=20&a=21&a=22&a=23&a=24&a=25&a=26"
             "&a=27&a=28&a=29&a=30&a=31&a=32&a=33&a=34&a=35&a=36&a=37&a=38&a=39&"
             "a=40&a=41&a=42&a=43&a=44&a=45&a=46&a=47&a=48&a=49&a=50&a=51&a=52&a="
             "53&a=54&a=55&a=56&a=57&a=58&a=59&a=60&a=61&a=62&a=63&a=64&a=65",
             base);
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 400);

    /* and the server keeps serving */
    snprintf(url, sizeof(url), "%sapi/flame?service=app&from=1714565100&to=1714565400&top=1", base);
    http(url, NULL, NULL, false, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"top\":[{\"name\":\"hot_after\""));
    pfr_serve_stop(s);

    /* a port in use is a clear error */
    pfr_serve *a = NULL, *b = NULL;
    assert_int_equal(pfr_serve_start(&cfg, &a, err, sizeof(err)), 0);
    snprintf(url, sizeof(url), "127.0.0.1:%u", pfr_serve_port(a));
    cfg.listen = url;
    assert_true(pfr_serve_start(&cfg, &b, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "in use"));
    pfr_serve_stop(a);
}

/* GET <server>api/<query>, expecting a 200 whose body contains want. */
static void get_has(const pfr_serve *s, const char *query, const char *want, http_result *r)
{
    char url[1024];
    snprintf(url, sizeof(url), "%sapi/%s", pfr_serve_url(s), query);
    http(url, NULL, NULL, false, r);
    if (r->status != 200 || !strstr(r->body, want))
        fail_msg("%s: %ld, want 200 with %s: %.300s", query, r->status, want, r->body);
}

/* Names in the query string, percent-encoded as curl and as the page's URLSearchParams do it
 * ('+' for a space, so a '+' of the name is %2B). */
static void test_http_names(void **state)
{
    fixture *f = *state;
    pfr_serve_config cfg = {.store_path = f->names, .listen = "127.0.0.1:0"};
    pfr_serve *s = NULL;
    char err[256] = "", q[768], label[256];
    assert_int_equal(pfr_serve_start(&cfg, &s, err, sizeof(err)), 0);
    http_result r;
    const fx_named *weird = &pfr_fx_names[7], *api = &pfr_fx_names[3];
    snprintf(label, sizeof(label), "container.id=%s", api->container_id);
    CURL *c = curl_easy_init();
    char *svc = curl_easy_escape(c, weird->service, 0), *a = curl_easy_escape(c, api->service, 0),
         *l = curl_easy_escape(c, label, 0);
    snprintf(q, sizeof(q), "flame?service=%s&from=1714564800&to=1714565100&top=1", svc);
    get_has(s, q, "\"service\":\"/weird/a+b %2F c?d=e&f#g:8080\"", &r);
    assert_non_null(strstr(r.body, "\"top\":[{\"name\":\"weird_fn\""));
    get_has(s,
            "flame?service=%2Fweird%2Fa%2Bb+%252F+c%3Fd%3De%26f%23g%3A8080"
            "&from=1714564800&to=1714565100&top=1",
            "\"top\":[{\"name\":\"weird_fn\"", &r);
    snprintf(q, sizeof(q), "flame?service=%s&label=%s&from=1714564800&to=1714565100", a, l);
    get_has(s, q, "\"top\":[{\"name\":\"api_q9zzm\"", &r);
    assert_null(strstr(r.body, "api_x2b5k"));
    /* unescaped '/' in a value is fine too: only '&', '=', '+', '%' and '#' need escapes */
    get_has(s, "timeline?service=/k8s/prod/db-0/postgres&from=1714564800&to=1714565100",
            "\"service\": \"/k8s/prod/db-0/postgres\"", &r);
    curl_free(svc);
    curl_free(a);
    curl_free(l);
    curl_easy_cleanup(c);
    pfr_serve_stop(s);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ls),
        cmocka_unit_test(test_flame),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_timeline),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_jobs_deadline),
        cmocka_unit_test(test_jobs_prefetch),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_escaped_names),
        cmocka_unit_test(test_http_names),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
