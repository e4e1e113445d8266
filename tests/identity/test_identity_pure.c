/* Unit tests of pfr_identity's pure tier: cgroup classification, service names, Kubernetes /
 * Swarm / Nomad ids, the /proc/PID/cgroup pick, Go's path.Clean, Coroot's instance of an id.
 * Expected values are what coroot-node-agent and Coroot give for the same input (checked
 * against Go in test_identity_oracle.c, but for the instances: read from Coroot's code). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "id_internal.h"
#include "pfr_identity.h"

#define ID1 "73051af271105c07e1f493b34856a77e665e3b0b4fc72f76c807dfbffeb881bd"
#define ID2 "49f9e8e5395d57c1083996c09e2e6f042d5fe1ec0310facab32f94912b35ce59"
#define ID3 "c74b0f5062f0bc726cae1e9369ad4a95deed6b298d247f0407475adb23fa3190"

struct cg_case {
    const char *path;
    enum pfr_identity_kind kind;
    const char *rid; /* "" = none */
    const char *id;  /* "" = none */
};

#define PLAIN      PFR_IDENTITY_KIND_PLAIN
#define UNKNOWN    PFR_IDENTITY_KIND_UNKNOWN
#define SYSTEMD    PFR_IDENTITY_KIND_SYSTEMD
#define TALOS      PFR_IDENTITY_KIND_TALOS
#define DOCKER     PFR_IDENTITY_KIND_DOCKER
#define CRIO       PFR_IDENTITY_KIND_CRIO
#define CONTAINERD PFR_IDENTITY_KIND_CONTAINERD
#define SANDBOX    PFR_IDENTITY_KIND_SANDBOX
#define LXC        PFR_IDENTITY_KIND_LXC

static const struct cg_case cg_cases[] = {
    /* plain processes */
    {"", PLAIN, "", ""},
    {"/", PLAIN, "", ""},
    {"/init.scope", PLAIN, "", ""},
    {"/user.slice/user-1000.slice/session-2.scope", PLAIN, "", ""},
    {"/user.slice/user-1000.slice/user@1000.service/app.slice/libpod-" ID1 ".scope", PLAIN, "", ""},
    {"/systemd/system.slice", PLAIN, "", ""},
    {"/lxc.monitor.first", PLAIN, "", ""},
    {"/foo", PLAIN, "", ""},
    {"/system.slice/nginx.service (deleted)", PLAIN, "", ""},
    /* systemd units */
    {"/system.slice/nginx.service", SYSTEMD, "", "/system.slice/nginx.service"},
    {"/system.slice/docker.service", SYSTEMD, "", "/system.slice/docker.service"},
    {"/system.slice/system-serial\\x2dgetty.slice", SYSTEMD, "",
     "/system.slice/system-serial-getty.slice"},
    {"/system.slice/my\\x2dapp\\x2dworker.service", SYSTEMD, "",
     "/system.slice/my-app-worker.service"},
    {"/system.slice/system-postgresql.slice/postgresql@9.4-main.service", SYSTEMD, "",
     "/system.slice/system-postgresql.slice"},
    {"/system.slice/springboot.service/child", SYSTEMD, "", "/system.slice/springboot.service"},
    {"/runtime.slice/kubelet.service", SYSTEMD, "", "/runtime.slice/kubelet.service"},
    {"/reserved.slice/kubelet.service", SYSTEMD, "", "/reserved.slice/kubelet.service"},
    {"/kube.slice/kubelet.service", SYSTEMD, "", "/kube.slice/kubelet.service"},
    {"/azure.slice/walinuxagent.service", SYSTEMD, "", "/azure.slice/walinuxagent.service"},
    {"/podruntime.slice/containerd.service", SYSTEMD, "", "/podruntime.slice/containerd.service"},
    {"/system.slice//nginx.service/", SYSTEMD, "", "/system.slice/nginx.service"},
    {"/system.slice/run-ra2ddf9594bbf4a1986439b594f89eb0f.scope", PLAIN, "", ""},
    {"/system.slice/cri-containerd-" ID3 ".scope", PLAIN, "", ""},
    {"/system.slice/crio-conmon-" ID2 ".scope", PLAIN, "", ""},
    {"/system.slice/crio-conmon-" ID2 ".scope/x", PLAIN, "", ""},
    {"/system.slice", UNKNOWN, "", ""},
    /* Docker */
    {"/docker/" ID1, DOCKER, ID1, ""},
    {"/system.slice/docker-" ID1 ".scope", DOCKER, ID1, ""},
    {"/docker/" ID1 "/kubepods/besteffort/pod1/" ID2, DOCKER, ID1, ""}, /* kind in Docker */
    {"/system.slice/docker-abc.scope", UNKNOWN, "", ""},
    {"/docker", UNKNOWN, "", ""},
    /* Kubernetes */
    {"/kubepods/burstable/pod6a4ce4a0-ba47-11ea-b2a7-0cc47ac5979e/" ID1, DOCKER, ID1, ""},
    {"/kubepods/besteffort/pod0d08203e-255a-11e9-8cd9-0007cb0b2cc8/" ID1 "/kube-proxy", DOCKER, ID1,
     ""},
    {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8712f785_1a3e_41ec_a00b_"
     "e2dcc77431cb.slice/docker-" ID1 ".scope",
     DOCKER, ID1, ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2942c55e_c9cb_428a_93f4_"
     "eaf89c1f3ce0.slice/crio-" ID2 ".scope",
     CRIO, ID2, ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podea19ff5d_943a_4466_a07e_"
     "a71e9e50cc62.slice/crio-" ID2 ".scope/container",
     CRIO, ID2, ""},
    {"/kubepods/poda48c12e8-255a-11e9-8cd9-0007cb0b2cc8/crio-" ID2, CRIO, ID2, ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2942c55e_c9cb_428a_93f4_"
     "eaf89c1f3ce0.slice/crio-conmon-" ID2 ".scope",
     UNKNOWN, "", ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-"
     "pod3e61c214bc3ed9ff81e21474dd6cba17.slice/cri-containerd-" ID3 ".scope",
     CONTAINERD, ID3, ""},
    {"/system.slice/containerd.service/kubepods-burstable-pod4ed02c0b_0df8_4d14_a30e_fd589ee4143a."
     "slice:cri-containerd:" ID3,
     CONTAINERD, ID3, ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2942c55e_c9cb_428a_93f4_"
     "eaf89c1f3ce0.slice",
     SANDBOX, "", ""},
    {"/kubepods/burstable", SANDBOX, "", ""},
    {"/kubepods/burstable/pod1/" ID1 "x", DOCKER, ID1, ""},     /* 65 chars: the first 64 */
    {"/kubepods/burstable/pod1/" ID1 "/../x", SANDBOX, "", ""}, /* cleaned away */
    /* LXC (recognised, no Coroot id) */
    {"/lxc/mysql-primary-db", LXC, "", "/lxc/mysql-primary-db"},
    {"/lxc.payload.first", LXC, "", "/lxc/first"},
    {"/lxc.payload.first/system.slice/nginx.service", LXC, "", "/lxc/first"},
    {"/lxc", UNKNOWN, "", ""},
    /* Talos */
    {"/init", TALOS, "", "/talos/init"},
    {"/system/dashboard", TALOS, "", "/talos/dashboard"},
    {"/podruntime/kubelet", TALOS, "", "/talos/kubelet"},
    {"/podruntime/runtime", TALOS, "", "/talos/runtime"},
    {"/system", UNKNOWN, "", ""},
    /* podman and other runtimes outside Kubernetes */
    {"/machine.slice/libpod-" ID1 ".scope", UNKNOWN, "", ""},
    {"/foo/bar", UNKNOWN, "", ""},
};

static void test_classify_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cg_cases) / sizeof(cg_cases[0]); i++) {
        const struct cg_case *c = &cg_cases[i];
        pfr_identity_cgroup cg;
        pfr_identity_classify(c->path, &cg);
        if (cg.kind != c->kind || strcmp(cg.runtime_id, c->rid) != 0 || strcmp(cg.id, c->id) != 0)
            fail_msg("%s: got %s %s %s, want %s %s %s", c->path, pfr_identity_kind_name(cg.kind),
                     cg.runtime_id, cg.id, pfr_identity_kind_name(c->kind), c->rid, c->id);
    }
    /* kubepods: set when the path was read as a Kubernetes one */
    pfr_identity_cgroup cg;
    pfr_identity_classify("/kubepods/poda48c12e8-255a-11e9-8cd9-0007cb0b2cc8/crio-" ID2, &cg);
    assert_int_equal(cg.kind, CRIO);
    assert_true(cg.kubepods);
    pfr_identity_classify("/docker/" ID1 "/kubepods/besteffort/pod1/" ID2, &cg);
    assert_int_equal(cg.kind, DOCKER);
    assert_false(cg.kubepods);
    pfr_identity_classify("/kubepods/burstable", &cg);
    assert_true(cg.kubepods);
    pfr_identity_classify(NULL, &cg);
    assert_int_equal(cg.kind, PLAIN);
    assert_string_equal(pfr_identity_kind_name(CONTAINERD), "containerd");
    assert_string_equal(pfr_identity_kind_name((enum pfr_identity_kind)99), "?");
}

static void test_classify_long(void **state)
{
    (void)state;
    static char path[8192];
    memset(path, 'a', sizeof(path) - 1);
    path[0] = '/';
    pfr_identity_cgroup cg;
    pfr_identity_classify(path, &cg); /* longer than any kernel path */
    assert_int_equal(cg.kind, UNKNOWN);
    /* a systemd unit whose id does not fit: no id rather than a cut one */
    memcpy(path, "/system.slice/", 14);
    path[2000] = '\0';
    pfr_identity_classify(path, &cg);
    assert_int_equal(cg.kind, UNKNOWN);
    assert_string_equal(cg.id, "");
}

/* A table of (input, expected output) for a function of a string. */
struct str_case {
    const char *in, *want;
};

typedef int (*str_fn)(const char *in, char *out, size_t outlen);

static void run_table(const struct str_case *cases, size_t n, str_fn fn)
{
    for (size_t i = 0; i < n; i++) {
        char out[4096];
        assert_int_equal(fn(cases[i].in, out, sizeof(out)), 0);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("%s: got %s, want %s", cases[i].in, out, cases[i].want);
    }
}

static const struct str_case svc_cases[] = {
    /* Coroot's own examples */
    {"/k8s/otel-demo/otel-demo-frauddetectionservice-64cd4f9686-mvtnb/frauddetectionservice",
     "/k8s/otel-demo/otel-demo-frauddetectionservice"},
    {"/k8s/coroot/coroot-node-agent-np9pk/node-agent", "/k8s/coroot/coroot-node-agent"},
    {"/k8s/coroot/pyroscope-df884bb79-hhxtv/pyroscope", "/k8s/coroot/pyroscope"},
    {"/k8s/default/cassandra-main-12/cassandra", "/k8s/default/cassandra-main"},
    {"/k8s/default/hello-28283967-khz2f/xz", "/k8s/default/hello"}, /* hex-looking job minute */
    {"/system.slice/k3s.service", "/system.slice/k3s.service"},
    {"/docker/container_name", "/docker/container_name"},
    /* Deployment */
    {"/k8s/prod/api-5d9c7b6f4-x2x7q/api", "/k8s/prod/api"},
    {"/k8s/prod/app2-5f6b7-x9z4q/app", "/k8s/prod/app2"},
    {"/k8s/prod/web-1-22222/c", "/k8s/prod/web"},
    {"/k8s/prod/web-v2-6c8d9f7b5c-7wz9k/web", "/k8s/prod/web-v2"},
    {"/k8s/a/b-0123456789-bcdfg/c", "/k8s/a/b"},
    /* hash of 11 chars or with a non-hex char: not a Deployment's, but a DaemonSet's shape */
    {"/k8s/prod/web-7d4b9c8f6a1-bcdfg/c", "/k8s/prod/web-7d4b9c8f6a1"},
    {"/k8s/prod/web-7d4b9c8fz-bcdfg/c", "/k8s/prod/web-7d4b9c8fz"},
    /* vowels or 0/1/3 in the suffix: no controller recognised */
    {"/k8s/ns/web-7d4b9c8f6-abcde/c", "/k8s/ns/web-7d4b9c8f6-abcde/c"},
    {"/k8s/ns/web-7d4b9c8f6-bcd1f/c", "/k8s/ns/web-7d4b9c8f6-bcd1f/c"},
    /* DaemonSet */
    {"/k8s/kube-system/kube-proxy-7xk2p/kube-proxy", "/k8s/kube-system/kube-proxy"},
    {"/k8s/ns/web-22222/c", "/k8s/ns/web"},
    {"/k8s/ns/a-bcdfg/c", "/k8s/ns/a"},
    {"/k8s/ns/-bcdfg/c", "/k8s/ns/-bcdfg/c"},
    /* StatefulSet */
    {"/k8s/db/postgres-0/postgres", "/k8s/db/postgres"},
    {"/k8s/ns/web-12345/c", "/k8s/ns/web"},
    {"/k8s/ns/redis2-10/redis", "/k8s/ns/redis2"},
    {"/k8s/ns/0-1/c", "/k8s/ns/0"},
    /* bare pods and shapes that match nothing */
    {"/k8s/ns/bare-pod/c", "/k8s/ns/bare-pod/c"},
    {"/k8s/ns/web-bcdfg/", "/k8s/ns/web-bcdfg/"},
    {"/k8s/ns/web-bcdfg", "/k8s/ns/web-bcdfg"},
    {"/k8s/ns/web-bcdfg/\n", "/k8s/ns/web-bcdfg/\n"},
    {"/k8s/Ns/web-bcdfg/c", "/k8s/Ns/web-bcdfg/c"},
    {"/k8s/ns/Web-bcdfg/c", "/k8s/ns/Web-bcdfg/c"},
    {"/k8s/ns/web.x-bcdfg/c", "/k8s/ns/web.x-bcdfg/c"},
    {"/k8s//web-bcdfg/c", "/k8s//web-bcdfg/c"},
    {"/k8s/ns/pod/c/k8s/x/y-bcdfg/z", "/k8s/x/y"}, /* unanchored: a later match counts */
    {"/k8s/", "/k8s/"},
    {"", ""},
    /* CronJob ids are their own service (Coroot rewrites only /k8s/ ids) */
    {"/k8s-cronjob/ns/backup/job", "/k8s-cronjob/ns/backup/job"},
    {"/swarm/stack/web/1", "/swarm/stack/web/1"},
    {"/nomad/default/job/group/0b4c-9a/task", "/nomad/default/job/group/0b4c-9a/task"},
};

static void test_service_table(void **state)
{
    (void)state;
    run_table(svc_cases, sizeof(svc_cases) / sizeof(svc_cases[0]), pfr_identity_service_name);
    char small[8];
    assert_int_equal(pfr_identity_service_name("/docker/long-name", small, sizeof(small)),
                     -ENAMETOOLONG);
    assert_string_equal(small, "");
    char out[64];
    assert_int_equal(pfr_identity_service_name(NULL, out, sizeof(out)), 0);
    assert_string_equal(out, "");
}

/* 2023-11-14T22:13:20Z; minute 28333333 */
#define NOW 1700000000ll

static void test_k8s_id(void **state)
{
    (void)state;
    char out[PFR_IDENTITY_ID_MAX];
    assert_int_equal(
        pfr_identity_k8s_id("prod", "api-5d9c7b6f4-x2x7q", "api", NOW, out, sizeof(out)), 0);
    assert_string_equal(out, "/k8s/prod/api-5d9c7b6f4-x2x7q/api");
    /* pause containers */
    assert_int_equal(
        pfr_identity_k8s_id("prod", "api-5d9c7b6f4-x2x7q", "POD", NOW, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(pfr_identity_k8s_id("prod", "api", "", NOW, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(pfr_identity_k8s_id("prod", "api", NULL, NOW, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(pfr_identity_k8s_id("prod", "", "c", NOW, out, sizeof(out)), -EINVAL);

    struct {
        const char *pod, *want;
    } cron[] = {
        {"backup-28333333-bcdfg", "/k8s-cronjob/ns/backup/c"},
        {"backup-28333300-x9z4q", "/k8s-cronjob/ns/backup/c"}, /* 33 minutes ago */
        {"nightly-db-dump-28323254-k8k8k", "/k8s-cronjob/ns/nightly-db-dump/c"}, /* 7 days ago */
        {"backup-28323254-bcdfgzzz", "/k8s-cronjob/ns/backup/c"}, /* unanchored at the end */
        {"my.job-28333333-bcdfg", "/k8s-cronjob/ns/job/c"},       /* ... and the start */
        {"a-28333333-bcdfg-28333334-bcdfg", "/k8s-cronjob/ns/a-28333333-bcdfg/c"}, /* greedy */
        {"backup-28323253-bcdfg", "/k8s/ns/backup-28323253-bcdfg/c"}, /* just over 7 days ago */
        {"backup-28343414-bcdfg", "/k8s/ns/backup-28343414-bcdfg/c"}, /* just over 7 days ahead */
        {"backup-28343413-bcdfg", "/k8s-cronjob/ns/backup/c"},
        {"backup-20000000-bcdfg", "/k8s/ns/backup-20000000-bcdfg/c"},
        {"backup-2833333-bcdfg", "/k8s/ns/backup-2833333-bcdfg/c"},   /* 7 digits */
        {"backup-28333333-abcde", "/k8s/ns/backup-28333333-abcde/c"}, /* vowels */
        {"-28333333-bcdfg", "/k8s/ns/-28333333-bcdfg/c"},             /* no job name */
    };
    for (size_t i = 0; i < sizeof(cron) / sizeof(cron[0]); i++) {
        assert_int_equal(pfr_identity_k8s_id("ns", cron[i].pod, "c", NOW, out, sizeof(out)), 0);
        if (strcmp(out, cron[i].want) != 0)
            fail_msg("%s: got %s, want %s", cron[i].pod, out, cron[i].want);
    }
    char small[16];
    assert_int_equal(pfr_identity_k8s_id("prod", "api-0", "api", NOW, small, sizeof(small)),
                     -ENAMETOOLONG);
    assert_string_equal(small, "");
}

static void test_swarm_nomad(void **state)
{
    (void)state;
    char out[PFR_IDENTITY_ID_MAX];
    assert_int_equal(pfr_identity_swarm_id("shop_web.1.x3k2", "shop", "shop_web", out, sizeof(out)),
                     1);
    assert_string_equal(out, "/swarm/shop/web/1");
    assert_int_equal(pfr_identity_swarm_id("web.2.x3k2", NULL, "web", out, sizeof(out)), 1);
    assert_string_equal(out, "/swarm/_/web/2");
    assert_int_equal(pfr_identity_swarm_id("web.2.x3k2", "", "other_web", out, sizeof(out)), 1);
    assert_string_equal(out, "/swarm/_/other_web/2");
    assert_int_equal(pfr_identity_swarm_id("a.b.c.d", "ns", "svc", out, sizeof(out)), 1);
    assert_string_equal(out, "/swarm/ns/svc/b");
    assert_int_equal(pfr_identity_swarm_id("web.1", "shop", "shop_web", out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(pfr_identity_swarm_id(NULL, "shop", "shop_web", out, sizeof(out)), 0);

    assert_int_equal(pfr_identity_nomad_id("0b4c9a3e-1111-2222-3333-444455556666", "api", "shop",
                                           "default", "server", out, sizeof(out)),
                     1);
    assert_string_equal(out, "/nomad/default/shop/api/0b4c9a3e-1111-2222-3333-444455556666/server");
    assert_int_equal(pfr_identity_nomad_id("a", "g", "j", "", "t", out, sizeof(out)), 0);
    assert_int_equal(pfr_identity_nomad_id("a", "g", NULL, "n", "t", out, sizeof(out)), 0);
    char small[8];
    assert_int_equal(pfr_identity_nomad_id("a", "g", "j", "n", "t", small, sizeof(small)),
                     -ENAMETOOLONG);
}

static const struct str_case proc_cases[] = {
    {"0::/system.slice/nginx.service\n", "/system.slice/nginx.service"},
    {"0::/init.scope\n", ""},
    {"0::/\n", ""},
    {"", ""},
    {"garbage without colons\n", ""},
    /* hybrid v1 + v2: a kubepods cpu path wins over the v2 one */
    {"12:cpu,cpuacct:/kubepods/burstable/pod1/" ID1 "\n11:memory:/kubepods/burstable/pod1/" ID1
     "\n1:name=systemd:/system.slice/containerd.service\n0::/\n",
     "/kubepods/burstable/pod1/" ID1},
    {"4:memory:/kubepods/pod1/" ID1 "\n0::/system.slice/foo.service\n", "/kubepods/pod1/" ID1},
    /* v1 only: cpu, then memory, then name=systemd */
    {"12:cpu,cpuacct:/docker/" ID1 "\n1:name=systemd:/docker/" ID1 "\n", "/docker/" ID1},
    {"9:memory:/system.slice/a.service\n1:name=systemd:/system.slice/b.service\n",
     "/system.slice/a.service"},
    {"1:name=systemd:/user.slice/user-0.slice/session-1.scope\n",
     "/user.slice/user-0.slice/session-1.scope"},
    {"12:cpu,cpuacct:/\n1:name=systemd:/init.scope\n", ""},
    /* hybrid: a v2 "/" or "/init.scope" is passed over for the v1 cpu, memory, name=systemd */
    {"12:cpu,cpuacct:/docker/" ID1 "\n0::/init.scope\n", "/docker/" ID1},
    {"9:name=systemd:/\n4:memory:/process_api/4341\n1:cpu:/\n0::/\n", "/process_api/4341"},
    {"1:name=systemd:/system.slice/a.service\n2:cpu,cpuacct:/\n0::/\n", "/system.slice/a.service"},
    /* v1 only: memory in init.scope counts for nothing */
    {"8:memory:/init.scope\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/b.service\n",
     "/system.slice/b.service"},
    /* v2 over v1 cpu when neither is kubepods */
    {"12:cpu:/system.slice/a.service\n0::/system.slice/b.service", "/system.slice/b.service"},
    /* LXC's payload counts as a whole; paths are cleaned */
    {"0::/lxc.payload.first/system.slice/foo.service\n", "/lxc.payload.first"},
    {"0::/../../kubepods/x\n", "/kubepods/x"},
    {"0::/system.slice//a.service/\n", "/system.slice/a.service"},
    /* controllers are split as Go splits them: "cpu," also names the v2 ("") hierarchy */
    {"12:cpu:/system.slice/a.service\n1:memory,:/system.slice/b.service\n",
     "/system.slice/b.service"},
    {"1:name=systemd,:/system.slice/c.service\n", "/system.slice/c.service"},
    /* the last line of a controller wins */
    {"0::/system.slice/a.service\n0::/system.slice/b.service\n", "/system.slice/b.service"},
};

static int from_proc_str(const char *text, char *out, size_t outlen)
{
    return pfr_identity_cgroup_from_proc(text, strlen(text), out, outlen);
}

static void test_cgroup_from_proc(void **state)
{
    (void)state;
    run_table(proc_cases, sizeof(proc_cases) / sizeof(proc_cases[0]), from_proc_str);
    char small[8];
    const char *t = "0::/system.slice/nginx.service\n";
    assert_int_equal(pfr_identity_cgroup_from_proc(t, strlen(t), small, sizeof(small)),
                     -ENAMETOOLONG);
    /* the length bounds the text: no read past it */
    char out[64];
    assert_int_equal(pfr_identity_cgroup_from_proc("0::/a.service0::/b", 13, out, sizeof(out)), 0);
    assert_string_equal(out, "/a.service");
}

static void test_proc_has_v1(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool v1;
    } cases[] = {
        {"0::/system.slice/a.service\n", false},
        {"0::/\n", false},
        {"", false},
        {"garbage\n0::/x", false},
        {"0::/\n1:name=systemd:/\n", true},
        {"12:cpu,cpuacct:/\n", true},
        {"3:,memory:/x\n", true},
        {"0:,:/x\n", false}, /* empty items only: the v2 slot */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(pfr_identity_proc_has_v1(cases[i].text, strlen(cases[i].text)),
                         cases[i].v1);
    /* the length bounds the text */
    assert_false(pfr_identity_proc_has_v1("0::/a\n1:cpu:/b", 6));
}

static void test_path_clean(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"", ""},
        {"/", "/"},
        {"//", "/"},
        {"/a/b/", "/a/b"},
        {"/a/./b", "/a/b"},
        {"/a/../b", "/b"},
        {"/../a", "/a"},
        {"a/../..", ".."},
        {"a/..", "."},
        {".", "."},
        {"./a//b/.", "a/b"},
        {"/a/b/../../..", "/"},
        {"../../a", "../../a"},
        {"/a..b/..c", "/a..b/..c"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[64];
        pfr_identity_path_clean(cases[i][0], strlen(cases[i][0]), out);
        if (strcmp(out, cases[i][1]) != 0)
            fail_msg("clean(%s): got %s, want %s", cases[i][0], out, cases[i][1]);
    }
}

/* Coroot's instance of each kind of id outside Kubernetes (constructor/containers.go). */
static void test_coroot_instance(void **state)
{
    (void)state;
    static const struct {
        const char *id, *node;
        int rc;
        const char *ns, *pod;
    } cases[] = {
        /* Docker: the container's name */
        {"/docker/web", "node1", 1, "_", "web@node1"},
        {"/docker/" ID1, "node1", 1, "_", ID1 "@node1"},
        /* systemd units: less ".service", then ".slice" */
        {"/system.slice/nginx.service", "node1", 1, "_", "nginx@node1"},
        {"/system.slice/system-getty.slice/getty@tty1.service", "n", 1, "_", "getty@tty1@n"},
        {"/runtime.slice/kubelet.service", "n", 1, "_", "kubelet@n"},
        {"/user.slice", "n", 1, "_", "user@n"},
        {"/system.slice/a.slice.service", "n", 1, "_", "a@n"},
        {"/system.slice/a.service.slice", "n", 1, "_", "a.service@n"},
        {"/system.slice/a.socket", "n", 1, "_", "a.socket@n"},
        {"/lxc/box", "n", 1, "_", "box@n"},
        /* a last element Coroot keeps even when empty */
        {"/docker/", "n", 1, "_", "@n"},
        /* Kubernetes: the pod is the instance (the scraper sends no instance labels) */
        {"/k8s/prod/api-5d9c7b6f4-x2x7q/api", "n", 0, "", ""},
        /* a /k8s/ id of another shape is no pod to Coroot: named like a unit */
        {"/k8s/prod/api", "n", 1, "_", "api@n"},
        {"/k8s-cronjob/prod/backup/job", "node1", 1, "prod", "backup@node1"},
        {"/k8s-cronjob//backup/job", "node1", 1, "_", "backup@node1"},
        {"/nomad/default/web/frontend/4b5a1c2e-0f12-4c3d-9e8f-1a2b3c4d5e6f/server", "n", 1,
         "default", "frontend-4b5a1c2e-0f12-4c3d-9e8f-1a2b3c4d5e6f"},
        {"/nomad/default/web/frontend/alloc", "n", 1, "_", "alloc@n"}, /* not 7 parts */
        {"/swarm/_/web/2", "n", 1, "_", "web.2"},
        {"/swarm/shop/web/2", "n", 1, "shop", "web.2"},
        {"/swarm/shop/web/2", NULL, 1, "shop", "web.2"}, /* needs no node */
        {"/swarm/web/2", "n", 1, "_", "2@n"},            /* not 5 parts */
        /* no instance */
        {"", "n", 0, "", ""},
        {NULL, "n", 0, "", ""},
        {"docker/web", "n", 0, "", ""},
        {"/docker/web", "", 0, "", ""},
        {"/docker/web", NULL, 0, "", ""},
        {"/k8s-cronjob/prod/backup/job", NULL, 0, "", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char ns[64] = "x", pod[128] = "x";
        int rc = pfr_identity_coroot_instance(cases[i].id, cases[i].node, ns, sizeof(ns), pod,
                                              sizeof(pod));
        if (rc != cases[i].rc || strcmp(ns, cases[i].ns) || strcmp(pod, cases[i].pod))
            fail_msg("instance(%s, %s): got %d %s %s, want %d %s %s",
                     cases[i].id ? cases[i].id : "NULL", cases[i].node ? cases[i].node : "NULL", rc,
                     ns, pod, cases[i].rc, cases[i].ns, cases[i].pod);
    }
    char ns[8], pod[8];
    assert_int_equal(
        pfr_identity_coroot_instance("/docker/web", "node1", ns, sizeof(ns), pod, sizeof(pod)),
        -ENAMETOOLONG);
    assert_string_equal(ns, "");
    assert_string_equal(pod, "");
    assert_int_equal(
        pfr_identity_coroot_instance("/swarm/a-long-ns/w/1", "n", ns, sizeof(ns), pod, sizeof(pod)),
        -ENAMETOOLONG);
    assert_string_equal(ns, "");
    assert_string_equal(pod, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_table),  cmocka_unit_test(test_classify_long),
        cmocka_unit_test(test_service_table),   cmocka_unit_test(test_k8s_id),
        cmocka_unit_test(test_swarm_nomad),     cmocka_unit_test(test_cgroup_from_proc),
        cmocka_unit_test(test_proc_has_v1),     cmocka_unit_test(test_path_clean),
        cmocka_unit_test(test_coroot_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
