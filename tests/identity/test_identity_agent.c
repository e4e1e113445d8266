/* The node agent's own cases (coroot-node-agent 89a16af: cgroup/cgroup_test.go and its
 * fixtures/proc/N/cgroup, containers/registry.go's branches, proc/flags.go, containers/
 * systemd.go), each run through pfr's whole path, /proc/PID/cgroup text -> the chosen path ->
 * its class -> the resolver with the metadata the agent would get from its runtime -> the
 * Coroot container id the agent computes; and the rules of consent, gVisor sandboxes and system
 * services on their own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "id_testdir.h"
#include "pfr_identity.h"
#include "pfr_system_service.h"

/* runtime ids of the agent's fixtures and tests */
#define R100 "b43d92bf1e5c6f78bb9b7bc6f40721280299855ba692092716e3a1b6c0b86f3f"
#define R300 "17db96a24ae1e9dd57143e62b1cb0d2d35e693c65c774c7470e87b0572e07c1a"
#define R400 "73051af271105c07e1f493b34856a77e665e3b0b4fc72f76c807dfbffeb881bd"
#define R500 "ba7b10d15d16e10e3de7a2dcd408a3d971169ae303f46cfad4c5453c6326fee2"
#define R800 "cf87ba651579c9231db817909e7865e5747bd7abcac0c57ce23cf4abbaee046b"
#define R2K  "95cbe853416f52d927dec41f1406dd75015ea131244a1ca875a7cd4ebe927ac8"
#define RK1  "d166c6190614efc91956b78e96d74c3fbc96ca8e91948c36de3bc5b0e7b27d48"
#define RK2  "671a50f5d60566556912f61511d0ec9e4d5c78d53fbc4676727180438bbbbc55"
#define RK3  "32c562ed81a2622b37b80cb216859820ba51bd694f60ee4cf10d07a4011266f8"
#define RD1  "63425c4a8b4291744a79dd9011fddc7a1f8ffda61f65d72196aa01d00cae2e2d"
#define RC1  "63425c4a8b4291744a79dd9011fddc7a1f8ffda61f65d72196aa01d00cae2e2e"
#define RC2  "49f9e8e5395d57c1083996c09e2e6f042d5fe1ec0310facab32f94912b35ce59"
#define RC3  "21572039dd8398ff8272b031fa5422a40165145ab37f2f8794e1e7f844fe8118"
#define RN1  "c74b0f5062f0bc726cae1e9369ad4a95deed6b298d247f0407475adb23fa3190"
#define RN2  "d4a9f9195eaf7e4a729f24151101e1de61f1398677e7b82acfb936dff0b4ce55"
#define RNN  "aa00000000000000000000000000000000000000000000000000000000000000"
#define RGV  "e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0"
#define KP   "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2942c55e.slice"

#define V1_ROOTS "11:perf_event:/\n9:freezer:/\n8:cpuset:/\n4:hugetlb:/\n3:net_cls,net_prio:/\n"

/* The metadata a runtime id's runtime gives (written where pfr reads it). */
enum meta {
    M_NONE = 0,
    M_DOCKER_NAME,
    M_DOCKER_NONAME,
    M_DOCKER_K8S,
    M_CRIO,
    M_CONTAINERD,
    M_GVISOR
};

struct agent_case {
    const char *what;
    const char *proc; /* /proc/PID/cgroup text; NULL: path is given as the agent's cg.Id */
    const char *path; /* the agent's cg.Id */
    enum pfr_identity_kind kind; /* pfr's class (the agent's type, but PLAIN for what the agent
                                  * calls a unit and gives no id, as crio-conmon's) */
    const char *rid;             /* the agent's ContainerId of a runtime container, or "" */
    enum meta meta;              /* what its runtime says */
    const char *id;              /* the Coroot container id the agent computes, "" = none */
};

#define DK PFR_IDENTITY_KIND_DOCKER
#define CR PFR_IDENTITY_KIND_CRIO
#define CD PFR_IDENTITY_KIND_CONTAINERD
#define SD PFR_IDENTITY_KIND_SYSTEMD
#define TL PFR_IDENTITY_KIND_TALOS
#define SB PFR_IDENTITY_KIND_SANDBOX
#define LX PFR_IDENTITY_KIND_LXC
#define PL PFR_IDENTITY_KIND_PLAIN
#define UN PFR_IDENTITY_KIND_UNKNOWN

static const struct agent_case cases[] = {
    /* cgroup_test.go TestNewFromProcessCgroupFile, fixture by fixture */
    {"fixture 100: v1 only, every controller in a unit",
     V1_ROOTS
     "10:devices:/system.slice/docker.service\n7:cpu,cpuacct:/system.slice/docker.service\n"
     "6:blkio:/system.slice/docker.service\n5:memory:/system.slice/docker.service\n"
     "2:pids:/system.slice/docker.service\n1:name=systemd:/system.slice/docker.service\n",
     "/system.slice/docker.service", SD, "", M_NONE, "/system.slice/docker.service"},
    {"fixture 200: v1 only, Docker",
     "7:cpu,cpuacct:/docker/" R100 "\n5:memory:/docker/" R100 "\n1:name=systemd:/docker/" R100,
     "/docker/" R100, DK, R100, M_DOCKER_NAME, "/docker/web"},
    {"fixture 300: v1 only, dockershim pod",
     "3:cpu,cpuacct:/kubepods/burstable/pod6a4ce4a0-ba47-11ea-b2a7-0cc47ac5979e/" R300
     "\n10:memory:/kubepods/burstable/pod6a4ce4a0-ba47-11ea-b2a7-0cc47ac5979e/" R300 "\n",
     "/kubepods/burstable/pod6a4ce4a0-ba47-11ea-b2a7-0cc47ac5979e/" R300, DK, R300, M_DOCKER_K8S,
     "/k8s/prod/web-0/app"},
    {"fixture 400: v2, systemd driver, Docker in kubepods", "0::" KP "/docker-" R400 ".scope\n",
     KP "/docker-" R400 ".scope", DK, R400, M_DOCKER_K8S, "/k8s/prod/web-0/app"},
    {"fixture 500: v2 path with '..' (the agent inside a container), cleaned",
     "0::/../../../../system.slice/docker-" R500 ".scope", "/system.slice/docker-" R500 ".scope",
     DK, R500, M_DOCKER_NAME, "/docker/web"},
    {"fixture 550: hybrid, v2 unit beside v1 roots",
     "12:perf_event:/\n11:devices:/system.slice/ssh.service\n6:memory:/system.slice/ssh.service\n"
     "4:cpu,cpuacct:/\n1:name=systemd:/system.slice/ssh.service\n0::/system.slice/ssh.service\n",
     "/system.slice/ssh.service", SD, "", M_NONE, "/system.slice/ssh.service"},
    {"fixture 600: v1, memory in init.scope passed over, name=systemd decides",
     "10:blkio:/init.scope\n8:memory:/init.scope\n7:pids:/init.scope\n2:cpu,cpuacct:/\n"
     "1:name=systemd:/system.slice/springboot.service\n",
     "/system.slice/springboot.service", SD, "", M_NONE, "/system.slice/springboot.service"},
    {"fixture 700: Talos", "0::/podruntime/runtime\n", "/podruntime/runtime", TL, "", M_NONE,
     "/talos/runtime"},
    {"fixture 800: v2 Docker scope, name=systemd root",
     "1:name=systemd:/\n0::/system.slice/docker-" R800 ".scope\n",
     "/system.slice/docker-" R800 ".scope", DK, R800, M_DOCKER_NAME, "/docker/web"},
    {"fixture 900: name=systemd before a cpu root",
     "1:name=systemd:/system.slice/python-app.service\n7:cpu,cpuacct:/",
     "/system.slice/python-app.service", SD, "", M_NONE, "/system.slice/python-app.service"},
    {"fixture 1000: getty, the templated unit's sub-slice",
     "6:memory:/\n5:cpu,cpuacct:/\n2:devices:/system.slice/system-getty.slice\n"
     "1:name=systemd:/system.slice/system-getty.slice/getty@tty1.service\n",
     "/system.slice/system-getty.slice/getty@tty1.service", SD, "", M_NONE,
     "/system.slice/system-getty.slice"},
    {"fixture 2000: hybrid, kubepods cpu beats the v2 unit",
     "12:memory:/kubepods/burstable/pod8833712d-6e69-4f5c-95f3-aebd020ce2e7/" R2K
     "\n9:misc:/\n2:cpu,cpuacct:/kubepods/burstable/pod8833712d-6e69-4f5c-95f3-aebd020ce2e7/" R2K
     "\n1:name=systemd:/kubepods/burstable/pod8833712d-6e69-4f5c-95f3-aebd020ce2e7/" R2K
     "\n0::/reserved.slice/containerd.service\n",
     "/kubepods/burstable/pod8833712d-6e69-4f5c-95f3-aebd020ce2e7/" R2K, DK, R2K, M_DOCKER_K8S,
     "/k8s/prod/web-0/app"},
    {"fixture 3000: LXC payload (recognised, no id: calcId's default)",
     "0::/lxc.payload.first/system.slice/systemd-logind.service\n", "/lxc.payload.first", LX, "",
     M_NONE, ""},
    /* cgroup_test.go TestContainerByCgroup */
    {"kubepods docker 1", NULL, "/kubepods/burstable/pod9729a196c4723b60ab401eaff722982d/" RK1, DK,
     RK1, M_DOCKER_K8S, "/k8s/prod/web-0/app"},
    {"kubepods docker 2 (a child cgroup)", NULL,
     "/kubepods/besteffort/pod0d08203e-255a-11e9-8cd9-0007cb0b2cc8/" RK2 "/kube-proxy", DK, RK2,
     M_DOCKER_K8S, "/k8s/prod/web-0/app"},
    {"kubepods docker 3", NULL, "/kubepods/poda38c12e8-255a-11e9-8cd9-0007cb0b2cc8/" RK3, DK, RK3,
     M_DOCKER_K8S, "/k8s/prod/web-0/app"},
    {"docker", NULL, "/docker/" RD1, DK, RD1, M_DOCKER_NAME, "/docker/web"},
    {"docker without a name (calcId: \"pure\" dockerd, no name)", NULL, "/docker/" RNN, DK, RNN,
     M_DOCKER_NONAME, ""},
    {"lxc", NULL, "/lxc/mysql-primary-db", LX, "", M_NONE, ""},
    {"crio", NULL, "/kubepods/poda48c12e8-255a-11e9-8cd9-0007cb0b2cc8/crio-" RC1, CR, RC1, M_CRIO,
     "/k8s/data/db-0/db"},
    {"crio scope", NULL, KP "/crio-" RC2 ".scope", CR, RC2, M_CRIO, "/k8s/data/db-0/db"},
    {"crio scope child", NULL, KP "/crio-" RC3 ".scope/container", CR, RC3, M_CRIO,
     "/k8s/data/db-0/db"},
    {"crio-conmon in kubepods", NULL, KP "/crio-conmon-" RC2 ".scope", UN, "", M_NONE, ""},
    {"crio-conmon unit (calcId)", NULL, "/system.slice/crio-conmon-" RC2 ".scope/x", PL, "", M_NONE,
     ""},
    {"containerd", NULL, KP "/cri-containerd-" RN1, CD, RN1, M_CONTAINERD, "/k8s/prod/api-0/api"},
    {"containerd under its unit, ':' form", NULL,
     "/system.slice/containerd.service/kubepods-burstable-pod4ed02c0b_0df8_4d14_a30e_fd589ee4143a."
     "slice:cri-containerd:" RN2,
     CD, RN2, M_CONTAINERD, "/k8s/prod/api-0/api"},
    {"kubepods, no container id, not gVisor: the pod's own", NULL, KP, SB, "", M_NONE, ""},
    {"escaped slice", NULL, "/system.slice/system-serial\\x2dgetty.slice", SD, "", M_NONE,
     "/system.slice/system-serial-getty.slice"},
    {"runtime.slice", NULL, "/runtime.slice/kubelet.service", SD, "", M_NONE,
     "/runtime.slice/kubelet.service"},
    {"reserved.slice", NULL, "/reserved.slice/kubelet.service", SD, "", M_NONE,
     "/reserved.slice/kubelet.service"},
    {"kube.slice", NULL, "/kube.slice/kubelet.service", SD, "", M_NONE,
     "/kube.slice/kubelet.service"},
    {"azure.slice", NULL, "/azure.slice/walinuxagent.service", SD, "", M_NONE,
     "/azure.slice/walinuxagent.service"},
    {"podruntime.slice containerd", NULL, "/podruntime.slice/containerd.service", SD, "", M_NONE,
     "/podruntime.slice/containerd.service"},
    {"podruntime.slice kubelet", NULL, "/podruntime.slice/kubelet.service", SD, "", M_NONE,
     "/podruntime.slice/kubelet.service"},
    {"templated unit: its sub-slice", NULL,
     "/system.slice/system-postgresql.slice/postgresql@9.4-main.service", SD, "", M_NONE,
     "/system.slice/system-postgresql.slice"},
    {"talos podruntime", NULL, "/podruntime/kubelet", TL, "", M_NONE, "/talos/kubelet"},
    {"talos system", NULL, "/system/dashboard", TL, "", M_NONE, "/talos/dashboard"},
    {"talos init", NULL, "/init", TL, "", M_NONE, "/talos/init"},
    {"lxc payload", NULL, "/lxc.payload.first", LX, "", M_NONE, ""},
    {"lxc monitor", NULL, "/lxc.monitor.first", PL, "", M_NONE, ""},
    {"systemd under /systemd", NULL, "/systemd/system.slice", PL, "", M_NONE, ""},
    {"cri-containerd scope outside kubepods", NULL, "/system.slice/cri-containerd-" RN1 ".scope",
     PL, "", M_NONE, ""},
    {"transient run- scope", NULL, "/system.slice/run-ra2ddf9594bbf4a1986439b594f89eb0f.scope", PL,
     "", M_NONE, ""},
    {"docker scope", NULL, "/system.slice/docker-" R500 ".scope", DK, R500, M_DOCKER_NAME,
     "/docker/web"},
    /* registry.go: init.scope is no container; v2-only and v1-only hosts */
    {"init.scope, v2 only", "0::/init.scope\n", "", PL, "", M_NONE, ""},
    {"init.scope, v1 only", "1:name=systemd:/init.scope\n2:cpu,cpuacct:/init.scope\n", "", PL, "",
     M_NONE, ""},
    {"user session, v2 only", "0::/user.slice/user-0.slice/session-4.scope\n",
     "/user.slice/user-0.slice/session-4.scope", PL, "", M_NONE, ""},
    {"v1 only, cpu decides over memory",
     "5:memory:/system.slice/b.service\n"
     "4:cpu,cpuacct:/system.slice/a.service\n1:name=systemd:/system.slice/b.service\n",
     "/system.slice/a.service", SD, "", M_NONE, "/system.slice/a.service"},
    {"hybrid, the v2 root passed over for v1 cpu",
     "4:cpu,cpuacct:/system.slice/web.service\n0::/\n", "/system.slice/web.service", SD, "", M_NONE,
     "/system.slice/web.service"},
    /* registry.go: a gVisor sandbox's processes, named by runsc's last argument */
    {"gVisor sandbox (runsc-sandbox)", "0::/kubepods/besteffort/pod5e7e\n",
     "/kubepods/besteffort/pod5e7e", SB, RGV, M_GVISOR, "/k8s/prod/gv-0/sandbox"},
};

/* ---- scaffolding: a resolver over files in a temporary folder ---- */

static int setup(void **state)
{
    (void)state;
    return id_testdir_setup("idagent");
}

static int teardown(void **state)
{
    (void)state;
    return id_testdir_teardown();
}

#define tpath    id_testdir_path
#define put_file id_testdir_put

static void put_text(const char *rel, const char *content)
{
    id_testdir_put(rel, content, strlen(content));
}

/* What each runtime says of its container, where pfr reads it. */
static void put_meta(const struct agent_case *c, int pid)
{
    char rel[256];
    switch (c->meta) {
    case M_DOCKER_NAME:
        snprintf(rel, sizeof(rel), "docker/containers/%s/config.v2.json", c->rid);
        put_text(rel, "{\"Name\":\"/web\",\"Config\":{\"Labels\":{}}}");
        break;
    case M_DOCKER_NONAME:
        snprintf(rel, sizeof(rel), "docker/containers/%s/config.v2.json", c->rid);
        put_text(rel, "{\"Name\":\"\",\"Config\":{\"Labels\":{}}}");
        break;
    case M_DOCKER_K8S:
        snprintf(rel, sizeof(rel), "docker/containers/%s/config.v2.json", c->rid);
        put_text(rel, "{\"Name\":\"/k8s_app_web-0\",\"Config\":{\"Labels\":{"
                      "\"io.kubernetes.pod.name\":\"web-0\",\"io.kubernetes.pod.namespace\":"
                      "\"prod\",\"io.kubernetes.container.name\":\"app\"}}}");
        break;
    case M_CRIO:
        snprintf(rel, sizeof(rel), "crio/overlay-containers/%s/userdata/config.json", c->rid);
        put_text(rel, "{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"container\","
                      "\"io.kubernetes.cri-o.Labels\":\"{\\\"io.kubernetes.container.name\\\":"
                      "\\\"db\\\",\\\"io.kubernetes.pod.name\\\":\\\"db-0\\\","
                      "\\\"io.kubernetes.pod.namespace\\\":\\\"data\\\"}\"}}");
        break;
    case M_CONTAINERD:
        snprintf(rel, sizeof(rel), "containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json",
                 c->rid);
        put_text(rel, "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
                      "\"io.kubernetes.cri.container-name\":\"api\","
                      "\"io.kubernetes.cri.sandbox-name\":\"api-0\","
                      "\"io.kubernetes.cri.sandbox-namespace\":\"prod\"}}");
        break;
    case M_GVISOR: {
        /* the sandbox's own OCI config (a pod sandbox: no container name of its own) and
         * runsc's command line, as /proc shows it (NUL-ended arguments) */
        snprintf(rel, sizeof(rel), "containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json",
                 c->rid);
        put_text(rel, "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
                      "\"io.kubernetes.cri.sandbox-name\":\"gv-0\","
                      "\"io.kubernetes.cri.sandbox-namespace\":\"prod\"}}");
        char cmd[256];
        int n = snprintf(cmd, sizeof(cmd),
                         "/usr/local/bin/runsc-sandbox%c--root=/run/runsc%cboot%c%s%c", 0, 0, 0,
                         c->rid, 0);
        snprintf(rel, sizeof(rel), "proc/%d/cmdline", pid);
        put_file(rel, cmd, (size_t)n);
        break;
    }
    default:
        break;
    }
}

static pfr_identity *resolver(void)
{
    pfr_identity_opts o = {
        .docker_socket = "",
        .docker_root = tpath("docker"),
        .containerd_root = tpath("containerd"),
        .crio_root = tpath("crio"),
        .proc_root = tpath("proc"),
        .retry_min_ms = 10,
        .retry_max_ms = 40,
    };
    pfr_identity *id = NULL;
    char err[256];
    assert_int_equal(pfr_identity_new(&o, &id, err, sizeof(err)), 0);
    return id;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The resolver's settled answer (not PENDING) within 5 s. */
static void settle(pfr_identity *id, const char *cg, int pid, pfr_identity_result *r)
{
    double end = now_s() + 5;
    do {
        pfr_identity_lookup(id, cg, pid, r);
        if (r->state == PFR_IDENTITY_RESOLVED || r->state == PFR_IDENTITY_NONE)
            return;
        usleep(5000);
    } while (now_s() < end);
    fail_msg("%s: still %s", cg, pfr_identity_state_name(r->state));
}

static void test_agent_cases(void **state)
{
    (void)state;
    pfr_identity *id = resolver();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct agent_case *c = &cases[i];
        int pid = 1000 + (int)i;
        char path[4096];
        if (c->proc) {
            assert_int_equal(
                pfr_identity_cgroup_from_proc(c->proc, strlen(c->proc), path, sizeof(path)), 0);
            if (strcmp(path, c->path) != 0)
                fail_msg("%s: path %s, the agent's %s", c->what, path, c->path);
        } else {
            snprintf(path, sizeof(path), "%s", c->path);
        }
        pfr_identity_cgroup cg;
        pfr_identity_classify(path, &cg);
        const char *rid = c->meta == M_GVISOR ? "" : c->rid; /* a sandbox's is on its cmdline */
        if (cg.kind != c->kind || strcmp(cg.runtime_id, rid) != 0)
            fail_msg("%s: %s %s, the agent's %s %s", c->what, pfr_identity_kind_name(cg.kind),
                     cg.runtime_id, pfr_identity_kind_name(c->kind), rid);
        put_meta(c, pid);
        pfr_identity_result r;
        settle(id, path, pid, &r);
        if (strcmp(r.container_id, c->id) != 0)
            fail_msg("%s: id '%s' (%s), the agent's '%s'", c->what, r.container_id,
                     pfr_identity_state_name(r.state), c->id);
    }
    pfr_identity_free(id);
}

/* A gVisor pod's cgroup holds runsc's other processes too (its gofers): the first one asked
 * names nothing, a sandbox process asked later names the cgroup. */
static void test_gvisor_later_process(void **state)
{
    (void)state;
    put_text("containerd/io.containerd.runtime.v2.task/k8s.io/" RN2 "/config.json",
             "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
             "\"io.kubernetes.cri.sandbox-name\":\"gv-1\","
             "\"io.kubernetes.cri.sandbox-namespace\":\"prod\"}}");
    static const char gofer[] = "runsc-gofer\0--root=/run/runsc\0gofer\0" RN2;
    static const char sandbox[] = "runsc\0--root=/run/runsc\0boot\0" RN2;
    put_file("proc/2001/cmdline", gofer, sizeof(gofer));
    put_file("proc/2002/cmdline", sandbox, sizeof(sandbox));
    pfr_identity *id = resolver();
    const char *cg = "/kubepods/besteffort/pod1234";
    pfr_identity_result r;
    settle(id, cg, 2001, &r);
    assert_int_equal(r.state, PFR_IDENTITY_NONE);
    double end = now_s() + 5;
    do {
        pfr_identity_lookup(id, cg, 2002, &r);
        usleep(5000);
    } while (r.state != PFR_IDENTITY_RESOLVED && now_s() < end);
    assert_string_equal(r.container_id, "/k8s/prod/gv-1/sandbox");
    assert_string_equal(r.service, "/k8s/prod/gv"); /* a StatefulSet-like pod name */
    pfr_identity_free(id);
}

static void test_gvisor_rid(void **state)
{
    (void)state;
    char rid[PFR_IDENTITY_RUNTIME_ID_LEN + 1];
    static const struct {
        const char *text;
        size_t len;
        bool ok;
    } t[] = {
#define T(s, ok) {s, sizeof(s) - 1, ok}
        T("runsc-sandbox\0boot\0" RGV "\0", true),
        T("/usr/bin/runsc\0boot\0" RGV "\0", true),
        T("/usr/bin/runsc\0boot\0" RGV, true),        /* no trailing NUL */
        T("runsc-gofer\0gofer\0" RGV "\0", false),    /* not the sandbox */
        T("runsc-sandbox\0boot\0" RGV "\0\0", false), /* last argument empty */
        T("runsc-sandbox\0" RGV "x\0", false),        /* not exactly an id */
        T("runsc-sandbox\0E0E0\0", false),
        T("runsc-sandbox", false),
        T("", false),
        T("runsc\0--id=" RGV "\0", false),
#undef T
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (pfr_identity_gvisor_rid(t[i].text, t[i].len, rid) != t[i].ok)
            fail_msg("case %zu: want %d", i, t[i].ok);
    assert_true(pfr_identity_gvisor_rid("runsc\0" RGV "\0", sizeof("runsc\0" RGV), rid));
    assert_string_equal(rid, RGV);
}

/* proc/flags.go: NUL-ended entries, the key exact, "disabled" anywhere in the value, the last
 * entry of a key deciding, an entry without its NUL ignored. */
static void test_consent(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t len;
        bool off;
    } t[] = {
#define T(s, off) {s, sizeof(s) - 1, off}
        T("PATH=/bin\0COROOT_EBPF_PROFILING=disabled\0HOME=/\0", true),
        T("COROOT_EBPF_PROFILING=disabled\0", true),
        T("COROOT_EBPF_PROFILING=is-disabled-here\0", true),
        T("COROOT_EBPF_PROFILING=Disabled\0", false),
        T("COROOT_EBPF_PROFILING=enabled\0", false),
        T("COROOT_EBPF_PROFILING=disable\0", false),
        T("COROOT_EBPF_PROFILING=ddisabled\0", true),
        T("COROOT_EBPF_PROFILING=disabled", false), /* no NUL: the agent drops it */
        T("COROOT_EBPF_PROFILING=disabled\0COROOT_EBPF_PROFILING=on\0", false),
        T("COROOT_EBPF_PROFILING=on\0COROOT_EBPF_PROFILING=disabled\0", true),
        T("COROOT_EBPF_PROFILINGX=disabled\0", false),
        T("XCOROOT_EBPF_PROFILING=disabled\0", false),
        T("COROOT_EBPF_PROFILIN=disabled\0", false),
        T("COROOT_EBPF_TRACES=disabled\0", false),
        T("COROOT_EBPF_PROFILING\0disabled\0", false),
        T("X=COROOT_EBPF_PROFILING=disabled\0", false),
        T("COROOT_EBPF_PROFILING==disabled=\0", true),
        T("PFR_PROFILING=disabled\0", true),
        T("PFR_PROFILING=disabled\0COROOT_EBPF_PROFILING=enabled\0", true),
        T("PFR_PROFILING=on\0", false),
        T("", false),
        T("\0\0\0", false),
#undef T
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (pfr_identity_environ_opts_out(t[i].text, t[i].len) != t[i].off)
            fail_msg("case %zu (%.*s): want %d", i, (int)t[i].len, t[i].text, t[i].off);
        /* fed one byte at a time, the same answer */
        pfr_identity_consent c;
        pfr_identity_consent_init(&c);
        for (size_t j = 0; j < t[i].len; j++)
            pfr_identity_consent_feed(&c, t[i].text + j, 1);
        assert_int_equal(pfr_identity_consent_refused(&c), t[i].off);
    }
}

/* The bounded read: a variable past the bound is not seen; a file that is not there is no
 * refusal. */
static void test_consent_read(void **state)
{
    (void)state;
    size_t pad = 8000;
    char *env = malloc(pad + 64);
    assert_non_null(env);
    memcpy(env, "A=", 2);
    memset(env + 2, 'x', pad - 3);
    env[pad - 1] = '\0';
    int n = snprintf(env + pad, 64, "PFR_PROFILING=disabled");
    put_file("proc/77/environ", env, pad + (size_t)n + 1);
    free(env);
    bool off = false;
    assert_int_equal(pfr_identity_consent_read(tpath("proc"), 77, 1 << 20, &off), 0);
    assert_true(off);
    assert_int_equal(pfr_identity_consent_read(tpath("proc"), 77, 4096, &off), 0);
    assert_false(off);
    assert_int_equal(pfr_identity_consent_read(tpath("proc"), 78, 4096, &off), -ENOENT);
    assert_false(off);
}

/* containers/systemd.go: the unit asked about, and IsSystemService. */
static void test_system_services(void **state)
{
    (void)state;
    static const struct {
        const char *cgroup, *unit;
    } u[] = {
        {"/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service"},
        {"/system.slice/nginx.service", "nginx.service"},
        {"/system.slice/system-serial\\x2dgetty.slice", "system-serial\\x2dgetty.slice"},
        {"/system.slice/nginx.service/child", "nginx.service"},
        {"/runtime.slice/kubelet.service", "kubelet.service"},
        {"", ""},
    };
    char out[256];
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
        assert_int_equal(pfr_system_service_unit(u[i].cgroup, out, sizeof(out)), 0);
        assert_string_equal(out, u[i].unit);
    }
    static const struct {
        const char *unit, *type, *trig;
        bool sys;
    } s[] = {
        {"systemd-journald.service", "notify", NULL, true},
        {"dbus.service", NULL, NULL, true},
        {"getty@tty1.service", "idle", NULL, true},
        {"system-serial\\x2dgetty.slice", NULL, NULL, true},
        {"serial-getty@ttyS0.service", NULL, NULL, true},
        {"snapd.service", NULL, NULL, true},
        {"packagekit.service", NULL, NULL, true},
        {"unattended-upgrades.service", NULL, NULL, true},
        {"multipathd.service", NULL, NULL, true},
        {"qemu-guest-agent.service", NULL, NULL, true},
        {"irqbalance.service", NULL, NULL, true},
        {"networkd-dispatcher.service", NULL, NULL, true},
        {"rpcbind.service", NULL, NULL, true},
        {"apt-daily.service", "oneshot", "apt-daily.timer", true},
        {"my-batch.service", "oneshot", NULL, true},
        {"my-bus.service", "dbus", NULL, true},
        {"logrotate.service", "simple", "logrotate.timer", true},
        {"nginx.service", "forking", NULL, false},
        {"nginx.service", NULL, NULL, false},
        {"mysystemd-thing.service", NULL, NULL, false},
        {"nginx.service", "simple", "nginx.socket", false},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        if (pfr_system_service_is(s[i].unit, s[i].type, s[i].trig, NULL) != s[i].sys)
            fail_msg("%s %s %s: want %d", s[i].unit, s[i].type ? s[i].type : "-",
                     s[i].trig ? s[i].trig : "-", s[i].sys);
    /* fixture 1000's getty: the agent skips it as a system service by default */
    assert_int_equal(pfr_system_service_unit("/system.slice/system-getty.slice/getty@tty1.service",
                                             out, sizeof(out)),
                     0);
    assert_true(pfr_system_service_is(out, NULL, NULL, NULL));
    /* a list of one's own */
    assert_true(pfr_system_service_is("nginx.service", NULL, NULL, "foo,nginx"));
    assert_false(pfr_system_service_is("dbus.service", NULL, NULL, "foo,nginx"));
    assert_false(pfr_system_service_is(NULL, NULL, NULL, NULL));
    char err[128];
    assert_int_equal(
        pfr_system_service_prefixes_check(PFR_SYSTEM_SERVICE_PREFIXES, err, sizeof(err)), 0);
    assert_int_equal(pfr_system_service_prefixes_check("a,,b", err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_system_service_prefixes_check("a b", err, sizeof(err)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agent_cases),  cmocka_unit_test(test_gvisor_later_process),
        cmocka_unit_test(test_gvisor_rid),   cmocka_unit_test(test_consent),
        cmocka_unit_test(test_consent_read), cmocka_unit_test(test_system_services),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
