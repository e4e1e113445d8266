/* Integration-style units of the pfr_identity resolver: Docker's API stand-in on a unix
 * socket, Docker's on-disk config, the pod list from a file and from a kubelet stand-in on TCP,
 * CRI OCI configs, Nomad's environ, backoff, the cache bound, lookups from many threads, and a
 * free() that does not wait for a hung daemon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "id_testdir.h"
#include "id_testsrv.h"
#include "pfr_identity.h"

#define IDA "a0000000000000000000000000000000000000000000000000000000000000aa"
#define IDB "b0000000000000000000000000000000000000000000000000000000000000bb"
#define IDC "c0000000000000000000000000000000000000000000000000000000000000cc"
#define IDD "d0000000000000000000000000000000000000000000000000000000000000dd"
#define IDE "e0000000000000000000000000000000000000000000000000000000000000ee"
#define IDF "f0000000000000000000000000000000000000000000000000000000000000ff"
#define IDG "9000000000000000000000000000000000000000000000000000000000000099"
#define IDH "8000000000000000000000000000000000000000000000000000000000000088"

#define DOCKER_SCOPE(id) "/system.slice/docker-" id ".scope"
#define CONTAINERD_CG(id)                                                                          \
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2942c55e_c9cb_428a_93f4_"      \
    "eaf89c1f3ce0.slice/cri-containerd-" id ".scope"
#define CRIO_CG(id)                                                                                \
    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8712f785_1a3e_41ec_a00b_"    \
    "e2dcc77431cb.slice/crio-" id ".scope"

/* ---- scaffolding ---- */

static int setup(void **state)
{
    (void)state;
    return id_testdir_setup("identity");
}

static int teardown(void **state)
{
    (void)state;
    return id_testdir_teardown();
}

#define tpath id_testdir_path

static void put_file(const char *rel, const char *content)
{
    id_testdir_put(rel, content, strlen(content));
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Look cg up until its state is want (5 s at most); the last answer in *r. */
static void wait_state(pfr_identity *id, const char *cg, int pid, enum pfr_identity_state want,
                       pfr_identity_result *r)
{
    double end = now_s() + 5;
    do {
        pfr_identity_lookup(id, cg, pid, r);
        if (r->state == want)
            return;
        sleep_ms(5);
    } while (now_s() < end);
    fail_msg("%s: state %s, want %s", cg, pfr_identity_state_name(r->state),
             pfr_identity_state_name(want));
}

static void expect_resolved(pfr_identity *id, const char *cg, int pid, const char *cid,
                            const char *service)
{
    pfr_identity_result r;
    wait_state(id, cg, pid, PFR_IDENTITY_RESOLVED, &r);
    assert_string_equal(r.container_id, cid);
    assert_string_equal(r.service, service);
}

/* Options with every source off; tests turn on what they use. */
static pfr_identity_opts opts_off(void)
{
    pfr_identity_opts o = {
        .docker_socket = "",
        .docker_root = "",
        .containerd_root = "",
        .crio_root = "",
        .retry_min_ms = 10,
        .retry_max_ms = 40,
    };
    return o;
}

static pfr_identity *new_identity(const pfr_identity_opts *o)
{
    pfr_identity *id = NULL;
    char err[256] = "";
    int rc = pfr_identity_new(o, &id, err, sizeof(err));
    if (rc)
        fail_msg("pfr_identity_new: %d %s", rc, err);
    return id;
}

/* ---- tests ---- */

static void test_path_only(void **state)
{
    (void)state;
    pfr_identity_opts o = opts_off();
    pfr_identity *id = new_identity(&o);
    pfr_identity_result r;

    pfr_identity_lookup(id, "/system.slice/nginx.service", 0, &r);
    assert_int_equal(r.state, PFR_IDENTITY_RESOLVED);
    assert_int_equal(r.kind, PFR_IDENTITY_KIND_SYSTEMD);
    assert_string_equal(r.container_id, "/system.slice/nginx.service");
    assert_string_equal(r.service, "/system.slice/nginx.service");
    assert_string_equal(r.runtime_id, "");
    pfr_identity_lookup(id, "/system/dashboard", 0, &r);
    assert_string_equal(r.container_id, "/talos/dashboard");

    static const struct {
        const char *cg;
        enum pfr_identity_kind kind;
    } none[] = {
        {"/user.slice/user-1000.slice/session-3.scope", PFR_IDENTITY_KIND_PLAIN},
        {"/init.scope", PFR_IDENTITY_KIND_PLAIN},
        {"/lxc/mysql", PFR_IDENTITY_KIND_LXC},
        {"/kubepods/burstable/pod1", PFR_IDENTITY_KIND_SANDBOX},
        {"/machine.slice/libpod-" IDA ".scope", PFR_IDENTITY_KIND_UNKNOWN},
        {NULL, PFR_IDENTITY_KIND_PLAIN},
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        pfr_identity_lookup(id, none[i].cg, 0, &r);
        assert_int_equal(r.state, PFR_IDENTITY_NONE);
        assert_int_equal(r.kind, none[i].kind);
        assert_string_equal(r.container_id, "");
        assert_string_equal(r.service, "");
    }

    /* a Docker container with no source of metadata: pending, then failed */
    pfr_identity_lookup(id, DOCKER_SCOPE(IDA), 0, &r);
    assert_int_equal(r.state, PFR_IDENTITY_PENDING);
    assert_int_equal(r.kind, PFR_IDENTITY_KIND_DOCKER);
    assert_string_equal(r.runtime_id, IDA);
    wait_state(id, DOCKER_SCOPE(IDA), 0, PFR_IDENTITY_FAILED, &r);
    assert_string_equal(r.container_id, "");

    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.resolved, 2);
    assert_int_equal(st.none, 6);
    assert_int_equal(st.entries, 9);
    assert_true(st.lookups > 10);
    assert_true(st.cache_hits >= 1);
    assert_int_equal(st.docker_fetches, 0);
    assert_int_equal(st.k8s_fetches, 0);
    pfr_identity_free(id);
    pfr_identity_free(NULL);
}

static const char inspect_web[] = "{\"Id\":\"" IDA "\",\"Name\":\"/web\",\"Config\":{\"Env\":["
                                  "\"PATH=/bin\"],\"Labels\":{\"x\":\"y\"}}}";
static const char inspect_swarm[] =
    "{\"Name\":\"/shop_web.1.x3k2\",\"Config\":{\"Labels\":{"
    "\"com.docker.swarm.task.name\":\"shop_web.1.x3k2\",\"com.docker.stack.namespace\":\"shop\","
    "\"com.docker.swarm.service.name\":\"shop_web\"}}}";
static const char inspect_nomad[] =
    "{\"Name\":\"/server-0b4c\",\"Config\":{\"Env\":[\"NOMAD_ALLOC_ID=0b4c\","
    "\"NOMAD_GROUP_NAME=api\",\"NOMAD_JOB_NAME=shop\",\"NOMAD_NAMESPACE=default\","
    "\"NOMAD_TASK_NAME=server\"]}}";

static void test_docker_socket(void **state)
{
    (void)state;
    static char big[5 << 20];
    memset(big, ' ', sizeof(big));
    const struct ts_route routes[] = {
        {"/containers/" IDA "/json", 200, inspect_web, 0, false},
        {"/containers/" IDB "/json", 200, inspect_swarm, 0, false},
        {"/containers/" IDC "/json", 200, inspect_nomad, 0, false},
        {"/containers/" IDD "/json", 200, "{\"Name\":\"\",\"Config\":{}}", 0, false},
        {"/containers/" IDE "/json", 200, "{\"Name\":\"/x\",\"Config\":[", 0, false},
        {"/containers/" IDF "/json", 200, big, sizeof(big), false},
        {"/containers/" IDG "/json", 500, "{\"message\":\"boom\"}", 0, false},
    };
    struct ts_server *srv;
    assert_int_equal(ts_start_unix(tpath("docker.sock"), routes, 7, &srv), 0);
    pfr_identity_opts o = opts_off();
    o.docker_socket = tpath("docker.sock");
    pfr_identity *id = new_identity(&o);

    expect_resolved(id, DOCKER_SCOPE(IDA), 0, "/docker/web", "/docker/web");
    expect_resolved(id, "/docker/" IDB, 0, "/swarm/shop/web/1", "/swarm/shop/web/1");
    expect_resolved(id, "/docker/" IDC, 0, "/nomad/default/shop/api/0b4c/server",
                    "/nomad/default/shop/api/0b4c/server");
    pfr_identity_result r;
    wait_state(id, "/docker/" IDD, 0, PFR_IDENTITY_NONE, &r); /* no name: no id */
    assert_int_equal(r.kind, PFR_IDENTITY_KIND_DOCKER);
    wait_state(id, "/docker/" IDE, 0, PFR_IDENTITY_FAILED, &r); /* broken JSON */
    wait_state(id, "/docker/" IDF, 0, PFR_IDENTITY_FAILED, &r); /* body over the cap */
    wait_state(id, "/docker/" IDG, 0, PFR_IDENTITY_FAILED, &r); /* HTTP 500 */
    wait_state(id, "/docker/" IDH, 0, PFR_IDENTITY_FAILED, &r); /* 404 */

    /* answered from the cache: no new request */
    unsigned before = ts_requests(srv);
    pfr_identity_lookup(id, DOCKER_SCOPE(IDA), 0, &r);
    assert_int_equal(r.state, PFR_IDENTITY_RESOLVED);
    assert_string_equal(r.runtime_id, IDA);
    assert_int_equal(ts_requests(srv), before);

    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_true(st.docker_fetches >= 8);
    assert_true(st.docker_failures >= 4 * 3); /* each failed one tried 3 times */
    assert_int_equal(st.docker_disk_reads, 0);
    assert_true(st.last_error[0] != '\0');
    pfr_identity_free(id);
    ts_stop(srv);
}

static void test_docker_disk(void **state)
{
    (void)state;
    put_file("docker/containers/" IDA "/config.v2.json",
             "{\"ID\":\"" IDA "\",\"Name\":\"/db\",\"Config\":{\"Labels\":{}}}");
    put_file("docker/containers/" IDB "/config.v2.json", inspect_nomad);
    pfr_identity_opts o = opts_off();
    o.docker_socket = tpath("no-such.sock"); /* as for an unprivileged recorder: no connection */
    o.docker_root = tpath("docker");
    pfr_identity *id = new_identity(&o);
    expect_resolved(id, DOCKER_SCOPE(IDA), 0, "/docker/db", "/docker/db");
    expect_resolved(id, "/docker/" IDB, 0, "/nomad/default/shop/api/0b4c/server",
                    "/nomad/default/shop/api/0b4c/server");
    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_int_equal(st.docker_fetches, 1); /* the socket is left alone after it failed once */
    assert_int_equal(st.docker_failures, 1);
    assert_int_equal(st.docker_disk_reads, 2);
    assert_int_equal(st.docker_disk_failures, 0);
    pfr_identity_free(id);
}

static char *pods_doc(const char *extra)
{
    /* a CronJob's pod scheduled this minute */
    long minute = (long)(time(NULL) / 60);
    char *doc;
    int n = asprintf(
        &doc,
        "{\"kind\":\"PodList\",\"items\":["
        "{\"metadata\":{\"name\":\"api-5d9c7b6f4-x2x7q\",\"namespace\":\"prod\"},\"status\":{"
        "\"containerStatuses\":[{\"name\":\"api\",\"containerID\":\"containerd://" IDA "\"}]}},"
        "{\"metadata\":{\"name\":\"db-0\",\"namespace\":\"data\"},\"status\":{"
        "\"containerStatuses\":[{\"name\":\"db\",\"containerID\":\"cri-o://" IDB "\"}]}},"
        "{\"metadata\":{\"name\":\"backup-%ld-bcdfg\",\"namespace\":\"batch\"},\"status\":{"
        "\"containerStatuses\":[{\"name\":\"job\",\"containerID\":\"containerd://" IDC "\"}]}}"
        "%s]}",
        minute, extra);
    assert_true(n > 0);
    return doc;
}

static void test_k8s_file(void **state)
{
    (void)state;
    char *doc = pods_doc("");
    put_file("pods.json", doc);
    free(doc);
    /* the pause container of a pod, and a CRI-O container not in the list (yet) */
    put_file("containerd/io.containerd.runtime.v2.task/k8s.io/" IDD "/config.json",
             "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
             "\"io.kubernetes.cri.sandbox-name\":\"api-5d9c7b6f4-x2x7q\","
             "\"io.kubernetes.cri.sandbox-namespace\":\"prod\"}}");
    put_file("crio/overlay-containers/" IDE "/userdata/config.json",
             "{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"container\","
             "\"io.kubernetes.cri-o.Labels\":\"{\\\"io.kubernetes.container.name\\\":\\\"db\\\","
             "\\\"io.kubernetes.pod.name\\\":\\\"db-1\\\","
             "\\\"io.kubernetes.pod.namespace\\\":\\\"data\\\"}\"}}");
    pfr_identity_opts o = opts_off();
    o.k8s.pods_json_file = tpath("pods.json");
    o.containerd_root = tpath("containerd");
    o.crio_root = tpath("crio");
    o.k8s.min_refresh_ms = 20;
    pfr_identity *id = new_identity(&o);
    pfr_identity_stats st;
    double end = now_s() + 5;
    do {
        pfr_identity_get_stats(id, &st);
        sleep_ms(2);
    } while (st.k8s_fetches == 0 && now_s() < end);
    assert_int_equal(st.k8s_failures, 0);
    assert_int_equal(st.k8s_containers, 3);

    /* in the pod list: answered at the first lookup */
    pfr_identity_result r;
    pfr_identity_lookup(id, CONTAINERD_CG(IDA), 0, &r);
    assert_int_equal(r.state, PFR_IDENTITY_RESOLVED);
    assert_int_equal(r.kind, PFR_IDENTITY_KIND_CONTAINERD);
    assert_string_equal(r.container_id, "/k8s/prod/api-5d9c7b6f4-x2x7q/api");
    assert_string_equal(r.service, "/k8s/prod/api");
    pfr_identity_lookup(id, CRIO_CG(IDB), 0, &r);
    assert_string_equal(r.container_id, "/k8s/data/db-0/db");
    assert_string_equal(r.service, "/k8s/data/db");
    pfr_identity_lookup(id, CONTAINERD_CG(IDC), 0, &r);
    assert_string_equal(r.container_id, "/k8s-cronjob/batch/backup/job");
    assert_string_equal(r.service, "/k8s-cronjob/batch/backup/job");

    /* from the runtimes' OCI configs */
    wait_state(id, CONTAINERD_CG(IDD), 0, PFR_IDENTITY_NONE, &r);
    expect_resolved(id, CRIO_CG(IDE), 0, "/k8s/data/db-1/db", "/k8s/data/db");

    /* a container that appears in the list later: found by the refresh its miss triggers */
    pfr_identity_lookup(id, CONTAINERD_CG(IDF), 0, &r);
    assert_int_equal(r.state, PFR_IDENTITY_PENDING);
    doc = pods_doc(",{\"metadata\":{\"name\":\"web-7xk2p\",\"namespace\":\"edge\"},\"status\":{"
                   "\"containerStatuses\":[{\"name\":\"nginx\",\"containerID\":"
                   "\"containerd://" IDF "\"}]}}");
    put_file("pods.json", doc);
    free(doc);
    sleep_ms(30);
    expect_resolved(id, CONTAINERD_CG(IDF), 0, "/k8s/edge/web-7xk2p/nginx", "/k8s/edge/web");
    pfr_identity_get_stats(id, &st);
    assert_true(st.k8s_fetches >= 2);
    assert_int_equal(st.k8s_containers, 4);
    assert_true(st.oci_reads >= 2);
    pfr_identity_free(id);
}

static void test_kubelet_http(void **state)
{
    (void)state;
    char *doc = pods_doc("");
    const struct ts_route routes[] = {
        {"/pods", 200, doc, 0, false},
        {"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", 200, doc, 0, false},
    };
    struct ts_server *srv;
    int port;
    assert_int_equal(ts_start_tcp(routes, 2, &port, &srv), 0);
    put_file("token", "secret-token\n");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);

    pfr_identity_opts o = opts_off();
    o.k8s.kubelet_url = url;
    o.k8s.token_file = tpath("token");
    pfr_identity *id = new_identity(&o);
    expect_resolved(id, CONTAINERD_CG(IDA), 0, "/k8s/prod/api-5d9c7b6f4-x2x7q/api",
                    "/k8s/prod/api");
    char auth[128];
    ts_last_auth(srv, auth, sizeof(auth));
    assert_string_equal(auth, "Bearer secret-token");
    pfr_identity_free(id);

    o = opts_off();
    o.k8s.apiserver_url = url;
    o.k8s.node_name = "node-1";
    id = new_identity(&o);
    expect_resolved(id, CRIO_CG(IDB), 0, "/k8s/data/db-0/db", "/k8s/data/db");
    ts_last_auth(srv, auth, sizeof(auth));
    assert_string_equal(auth, "");
    pfr_identity_free(id);

    /* a kubelet that refuses: counted, reported, the container stays unresolved */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/wrong", port);
    o = opts_off();
    o.k8s.kubelet_url = url;
    id = new_identity(&o);
    pfr_identity_stats st;
    double end = now_s() + 5;
    do {
        pfr_identity_get_stats(id, &st);
        sleep_ms(2);
    } while (st.k8s_failures == 0 && now_s() < end);
    assert_int_equal(st.k8s_failures, 1);
    assert_int_equal(st.k8s_containers, 0);
    assert_non_null(strstr(st.last_error, "HTTP 404"));
    pfr_identity_result r;
    wait_state(id, CONTAINERD_CG(IDA), 0, PFR_IDENTITY_FAILED, &r);
    pfr_identity_free(id);
    ts_stop(srv);
    free(doc);
}

static void test_nomad_environ(void **state)
{
    (void)state;
    static const char env[] = "PATH=/bin\0NOMAD_ALLOC_ID=0b4c\0NOMAD_GROUP_NAME=api\0"
                              "NOMAD_JOB_NAME=shop\0NOMAD_NAMESPACE=default\0"
                              "NOMAD_TASK_NAME=server\0";
    put_file("proc/4242/cmdline", "x");
    FILE *f = fopen(tpath("proc/4242/environ"), "w");
    assert_non_null(f);
    fwrite(env, 1, sizeof(env) - 1, f);
    fclose(f);
    /* only part of a Nomad task's variables: not a Nomad task, and nothing else is known */
    put_file("proc/4243/cmdline", "x");
    f = fopen(tpath("proc/4243/environ"), "w");
    assert_non_null(f);
    fwrite(env, 1, 40, f);
    fclose(f);
    pfr_identity_opts o = opts_off();
    o.proc_root = tpath("proc");
    pfr_identity *id = new_identity(&o);
    pfr_identity_result r;
    wait_state(id, DOCKER_SCOPE(IDD), 4243, PFR_IDENTITY_FAILED, &r);
    expect_resolved(id, DOCKER_SCOPE(IDA), 4242, "/nomad/default/shop/api/0b4c/server",
                    "/nomad/default/shop/api/0b4c/server");
    wait_state(id, DOCKER_SCOPE(IDB), 0, PFR_IDENTITY_FAILED, &r); /* no pid: nothing to read */
    wait_state(id, DOCKER_SCOPE(IDC), 999999, PFR_IDENTITY_FAILED, &r); /* pid gone */
    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_true(st.environ_reads >= 4); /* 4243 three times or more, 4242 once */
    pfr_identity_free(id);
}

static void test_retry(void **state)
{
    (void)state;
    mkdir(tpath("docker2"), 0755);
    pfr_identity_opts o = opts_off();
    o.docker_root = tpath("docker2");
    pfr_identity *id = new_identity(&o);
    pfr_identity_result r;
    wait_state(id, DOCKER_SCOPE(IDA), 0, PFR_IDENTITY_FAILED, &r);
    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_int_equal(st.docker_disk_failures, 3); /* the PENDING attempts, then no more ... */
    sleep_ms(100);
    pfr_identity_get_stats(id, &st);
    assert_int_equal(st.docker_disk_failures, 3); /* ... until a lookup asks again */
    put_file("docker2/containers/" IDA "/config.v2.json", "{\"Name\":\"/late\"}");
    expect_resolved(id, DOCKER_SCOPE(IDA), 0, "/docker/late", "/docker/late");
    pfr_identity_free(id);
}

static void test_cache_bound(void **state)
{
    (void)state;
    pfr_identity_opts o = opts_off();
    o.cache_max = 8;
    pfr_identity *id = new_identity(&o);
    pfr_identity_result r;
    char cg[64];
    for (int i = 0; i < 50; i++) {
        snprintf(cg, sizeof(cg), "/system.slice/unit%d.service", i);
        pfr_identity_lookup(id, cg, 0, &r);
        assert_string_equal(r.container_id, cg);
    }
    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_int_equal(st.entries, 8);
    assert_int_equal(st.evictions, 42);
    assert_int_equal(st.cache_hits, 0);
    /* the most recent stay */
    pfr_identity_lookup(id, "/system.slice/unit49.service", 0, &r);
    pfr_identity_get_stats(id, &st);
    assert_int_equal(st.cache_hits, 1);
    pfr_identity_free(id);
}

struct hammer {
    pfr_identity *id;
    int seed;
    int bad; /* answers that contradict the expected ones */
};

static const char *const hammer_paths[] = {
    DOCKER_SCOPE(IDA), "/docker/" IDB, "/system.slice/a.service",
    "/user.slice",     "/docker/" IDD, "/docker/" IDH,
};
static const char *const hammer_ids[] = {
    "/docker/web", "/swarm/shop/web/1", "/system.slice/a.service", "", "", ""};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    unsigned s = (unsigned)h->seed;
    for (int i = 0; i < 20000; i++) {
        s = s * 1103515245u + 12345u;
        size_t k = (s >> 16) % 6;
        char cg[160];
        /* many distinct paths too, to keep the cache evicting */
        bool distinct = (s >> 8) % 4 == 0;
        if (distinct)
            snprintf(cg, sizeof(cg), "/system.slice/x%u.service", (s >> 4) % 500);
        else
            snprintf(cg, sizeof(cg), "%s", hammer_paths[k]);
        pfr_identity_result r;
        pfr_identity_lookup(h->id, cg, 0, &r);
        if (distinct
                ? strcmp(r.container_id, cg) != 0
                : r.state == PFR_IDENTITY_RESOLVED && strcmp(r.container_id, hammer_ids[k]) != 0)
            h->bad++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    const struct ts_route routes[] = {
        {"/containers/" IDA "/json", 200, inspect_web, 0, false},
        {"/containers/" IDB "/json", 200, inspect_swarm, 0, false},
        {"/containers/" IDD "/json", 200, "{\"Name\":\"\"}", 0, false},
    };
    struct ts_server *srv;
    assert_int_equal(ts_start_unix(tpath("docker3.sock"), routes, 3, &srv), 0);
    pfr_identity_opts o = opts_off();
    o.docker_socket = tpath("docker3.sock");
    o.cache_max = 64;
    pfr_identity *id = new_identity(&o);
    pthread_t t[4];
    struct hammer h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (struct hammer){.id = id, .seed = i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(h[i].bad, 0);
    }
    expect_resolved(id, DOCKER_SCOPE(IDA), 0, "/docker/web", "/docker/web");
    expect_resolved(id, "/docker/" IDB, 0, "/swarm/shop/web/1", "/swarm/shop/web/1");
    pfr_identity_stats st;
    pfr_identity_get_stats(id, &st);
    assert_true(st.lookups >= 4 * 20000 + 2);
    assert_true(st.entries <= 64 + 8);
    assert_true(st.evictions > 0);
    pfr_identity_free(id);
    ts_stop(srv);
}

static void test_free_prompt(void **state)
{
    (void)state;
    const struct ts_route routes[] = {{"/containers/" IDA "/json", 200, "", 0, true}};
    struct ts_server *srv;
    assert_int_equal(ts_start_unix(tpath("hang.sock"), routes, 1, &srv), 0);
    pfr_identity_opts o = opts_off();
    o.docker_socket = tpath("hang.sock");
    o.docker_timeout_ms = 30000;
    pfr_identity *id = new_identity(&o);
    pfr_identity_result r;
    pfr_identity_lookup(id, DOCKER_SCOPE(IDA), 0, &r);
    assert_int_equal(r.state, PFR_IDENTITY_PENDING);
    double end = now_s() + 5;
    while (ts_requests(srv) == 0 && now_s() < end)
        sleep_ms(5);
    assert_int_equal(ts_requests(srv), 1);
    /* lookups go on while the thread waits on the daemon */
    double t0 = now_s();
    pfr_identity_lookup(id, DOCKER_SCOPE(IDA), 0, &r);
    pfr_identity_lookup(id, DOCKER_SCOPE(IDB), 0, &r);
    assert_true(now_s() - t0 < 0.1);
    assert_int_equal(r.state, PFR_IDENTITY_PENDING);
    t0 = now_s();
    pfr_identity_free(id);
    double took = now_s() - t0;
    if (took > 2.0)
        fail_msg("pfr_identity_free took %.2f s with a transfer in flight", took);
    ts_stop(srv);
}

static void test_bad_opts(void **state)
{
    (void)state;
    pfr_identity *id = (pfr_identity *)1;
    char err[256];
    pfr_identity_opts o = {.k8s = {.kubelet_url = "https://a:10250", .apiserver_url = "https://b"}};
    assert_int_equal(pfr_identity_new(&o, &id, err, sizeof(err)), -EINVAL);
    assert_null(id);
    assert_non_null(strstr(err, "exclusive"));
    o = (pfr_identity_opts){.k8s = {.apiserver_url = "https://b"}};
    assert_int_equal(pfr_identity_new(&o, &id, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "node_name"));
    o = (pfr_identity_opts){.k8s = {.kubelet_url = ""}};
    assert_int_equal(pfr_identity_new(&o, &id, err, sizeof(err)), -EINVAL);
    o = (pfr_identity_opts){.retry_min_ms = 100, .retry_max_ms = 10};
    assert_int_equal(pfr_identity_new(&o, &id, err, sizeof(err)), -EINVAL);
    /* all defaults (NULL opts): works, with nothing listening where the defaults point */
    assert_int_equal(pfr_identity_new(NULL, &id, err, sizeof(err)), 0);
    pfr_identity_result r;
    pfr_identity_lookup(id, "/system.slice/sshd.service", 0, &r);
    assert_string_equal(r.service, "/system.slice/sshd.service");
    assert_string_equal(pfr_identity_state_name(PFR_IDENTITY_FAILED), "failed");
    pfr_identity_free(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_only),    cmocka_unit_test(test_docker_socket),
        cmocka_unit_test(test_docker_disk),  cmocka_unit_test(test_k8s_file),
        cmocka_unit_test(test_kubelet_http), cmocka_unit_test(test_nomad_environ),
        cmocka_unit_test(test_retry),        cmocka_unit_test(test_cache_bound),
        cmocka_unit_test(test_threads),      cmocka_unit_test(test_free_prompt),
        cmocka_unit_test(test_bad_opts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
