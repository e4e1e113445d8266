/* Small recorder modules: the common map as the recorder uses it, host identity, BPF diagnosis, CPU
 * lists, /proc parsing, the heap's pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf_diag.h"
#include "fair_lock.h"
#include "frame_cache.h"
#include "heap_pages.h"
#include "pfr_hash.h"
#include "cpu_profiler.h"
#include "host.h"
#include "process_info.h"
#include "pfr_map.h"

static void map_matches_reference(void **state)
{
    (void)state;
    enum { N = 5000 };
    static uint64_t ref[N];
    static bool present[N];
    memset(present, 0, sizeof(present));
    pfr_map m = {0};
    srand(7);
    for (int round = 0; round < 40000; round++) {
        int k = rand() % N;
        uint64_t key = (uint64_t)k * 0x1000 + 0xffff000000000000ull; /* aligned, high bits */
        int op = rand() % 3;
        if (op < 2) {
            uint64_t v = (uint64_t)rand();
            assert_int_equal(pfr_map_put(&m, key, v), 0);
            ref[k] = v;
            present[k] = true;
        } else {
            assert_int_equal(pfr_map_del(&m, key), present[k]);
            present[k] = false;
        }
    }
    size_t live = 0;
    for (int k = 0; k < N; k++) {
        uint64_t key = (uint64_t)k * 0x1000 + 0xffff000000000000ull;
        uint64_t *v = pfr_map_get(&m, key);
        if (present[k]) {
            live++;
            assert_non_null(v);
            assert_int_equal(*v, ref[k]);
        } else {
            assert_null(v);
        }
    }
    assert_int_equal(m.n, live);
    size_t pos = 0, seen = 0;
    uint64_t k, v;
    while (pfr_map_next(&m, &pos, &k, &v))
        seen++;
    assert_int_equal(seen, live);
    pfr_map_clear(&m);
    assert_int_equal(m.n, 0);
    assert_null(pfr_map_get(&m, 0xffff000000000000ull));
    /* key 0 is an ordinary key */
    assert_int_equal(pfr_map_put(&m, 0, 42), 0);
    assert_int_equal(*pfr_map_get(&m, 0), 42);
    pfr_map_free(&m);
    pfr_map empty = {0};
    assert_null(pfr_map_get(&empty, 1));
    assert_false(pfr_map_del(&empty, 1));
}

static void machine_id(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(
        pfr_host_parse_machine_id("0123456789abcdef0123456789abcdef\n", out, sizeof(out)), 1);
    assert_string_equal(out, "0123456789abcdef0123456789abcdef");
    assert_int_equal(pfr_host_parse_machine_id("0123456789abcdef", out, sizeof(out)), 0);
    assert_int_equal(
        pfr_host_parse_machine_id("0123456789abcdef0123456789abcdeg", out, sizeof(out)), 0);
    assert_int_equal(pfr_host_parse_machine_id("", out, sizeof(out)), 0);

    char dir[] = "/tmp/pfr-host-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/etc", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/etc/machine-id", dir);
    FILE *f = fopen(path, "w");
    fputs("fedcba9876543210fedcba9876543210\n", f);
    fclose(f);
    pfr_host h;
    pfr_host_identify(&h, dir);
    assert_string_equal(h.id, "fedcba9876543210fedcba9876543210");
    assert_true(h.name[0] != '\0');
    unlink(path);
    pfr_host_identify(&h, dir); /* no file: empty id, still a name */
    assert_string_equal(h.id, "");
    snprintf(path, sizeof(path), "%s/etc", dir);
    rmdir(path);
    rmdir(dir);
}

static void bpf_precheck(void **state)
{
    (void)state;
    char msg[512];
    pfr_bpf_env ok = {.cap_bpf = true, .cap_perfmon = true, .btf = true};
    strcpy(ok.lockdown, "none");
    assert_int_equal(pfr_bpf_precheck(&ok, msg, sizeof(msg)), 0);

    pfr_bpf_env e = ok;
    e.cap_bpf = e.cap_perfmon = false;
    assert_int_equal(pfr_bpf_precheck(&e, msg, sizeof(msg)), -EPERM);
    assert_non_null(strstr(msg, "missing capability CAP_BPF and CAP_PERFMON"));
    e.cap_sys_admin = true; /* SYS_ADMIN alone is enough */
    assert_int_equal(pfr_bpf_precheck(&e, msg, sizeof(msg)), 0);

    e = ok;
    e.cap_perfmon = false;
    assert_int_equal(pfr_bpf_precheck(&e, msg, sizeof(msg)), -EPERM);
    assert_non_null(strstr(msg, "missing capability CAP_PERFMON"));

    e = ok;
    e.btf = false;
    assert_int_equal(pfr_bpf_precheck(&e, msg, sizeof(msg)), -ENOTSUP);
    assert_non_null(strstr(msg, "no BTF"));

    e = ok;
    strcpy(e.lockdown, "confidentiality");
    assert_int_equal(pfr_bpf_precheck(&e, msg, sizeof(msg)), -EPERM);
    assert_non_null(strstr(msg, "locked down"));

    pfr_bpf_explain(&ok, "load", EPERM, msg, sizeof(msg));
    assert_non_null(strstr(msg, "load"));
    assert_non_null(strstr(msg, "Operation not permitted"));
    e = ok;
    e.cap_bpf = false;
    pfr_bpf_explain(&e, "load", EPERM, msg, sizeof(msg));
    assert_non_null(strstr(msg, "CAP_BPF"));
    pfr_bpf_explain(&ok, "load", EACCES, msg, sizeof(msg));
    assert_non_null(strstr(msg, "verifier"));
    e = ok;
    e.perf_paranoid = 4;
    pfr_bpf_explain(&e, "perf_event_open", EACCES, msg, sizeof(msg));
    assert_non_null(strstr(msg, "perf_event_paranoid = 4"));
    pfr_bpf_explain(&ok, "load", ENOMEM, msg, sizeof(msg));
    assert_non_null(strstr(msg, "--stack-map-entries"));

    char mode[64];
    pfr_bpf_parse_lockdown("none [integrity] confidentiality\n", mode, sizeof(mode));
    assert_string_equal(mode, "integrity");
    pfr_bpf_parse_lockdown("garbage", mode, sizeof(mode));
    assert_string_equal(mode, "");

    pfr_bpf_env real;
    pfr_bpf_env_read(&real); /* must not crash; as root it has the capabilities */
    if (geteuid() == 0)
        assert_true(real.cap_sys_admin || (real.cap_bpf && real.cap_perfmon));
}

static void cpu_lists(void **state)
{
    (void)state;
    unsigned char set[64];
    assert_int_equal(pfr_parse_cpu_list("0-3,5\n", set, 64), 5);
    assert_true(set[0] && set[3] && !set[4] && set[5]);
    assert_int_equal(pfr_parse_cpu_list("0", set, 64), 1);
    assert_int_equal(pfr_parse_cpu_list("0-1,1", set, 64), 2);
    assert_int_equal(pfr_parse_cpu_list("3-1", set, 64), -EINVAL);
    assert_int_equal(pfr_parse_cpu_list("0-99", set, 64), -EINVAL);
    assert_int_equal(pfr_parse_cpu_list("a", set, 64), -EINVAL);
    assert_int_equal(pfr_parse_cpu_list("1,,2", set, 64), -EINVAL);
    assert_int_equal(pfr_parse_cpu_list("", set, 64), 0);
}

static void stat_kthread(void **state)
{
    (void)state;
    assert_true(pfr_stat_is_kthread("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0"));
    assert_false(pfr_stat_is_kthread("1 (systemd) S 0 1 1 0 -1 4194560 1 2 3"));
    /* a comm with spaces and parentheses */
    assert_false(pfr_stat_is_kthread("77 (a) b) (c) S 1 77 77 0 -1 4194304 0"));
    assert_true(pfr_stat_is_kthread("77 (x) y) S 1 77 77 0 -1 2097152 0"));
    assert_false(pfr_stat_is_kthread("garbage"));
    assert_false(pfr_stat_is_kthread("1 (x) S 1"));
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void facts_from_fake_proc(void **state)
{
    (void)state;
    char root[] = "/tmp/pfr-proc-XXXXXX";
    assert_non_null(mkdtemp(root));
    char d[256], p[300];
    snprintf(d, sizeof(d), "%s/4242", root);
    mkdir(d, 0755);
    snprintf(p, sizeof(p), "%s/cgroup", d);
    write_text(p, "0::/system.slice/fake.service\n");
    snprintf(p, sizeof(p), "%s/comm", d);
    write_text(p, "fakecomm\n");
    snprintf(p, sizeof(p), "%s/stat", d);
    write_text(p, "4242 (fakecomm) S 1 4242 4242 0 -1 4194560 0 0\n");
    snprintf(p, sizeof(p), "%s/exe", d);
    assert_int_equal(symlink("/usr/bin/fake-server (deleted)", p), 0);

    char exe[256], cg[256], comm[16];
    bool kt = true;
    assert_int_equal(pfr_process_read_facts(root, 4242, exe, sizeof(exe), cg, sizeof(cg), comm,
                                            sizeof(comm), &kt),
                     0);
    assert_string_equal(exe, "/usr/bin/fake-server");
    assert_string_equal(cg, "/system.slice/fake.service");
    assert_string_equal(comm, "fakecomm");
    assert_false(kt);
    assert_int_equal(pfr_process_read_facts(root, 4243, exe, sizeof(exe), cg, sizeof(cg), comm,
                                            sizeof(comm), &kt),
                     -ESRCH);

    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, root), 0);
    pfr_service_rules rules = {0};
    pfr_proc *pr = pfr_proc_table_learn(&t, 4242, 1000, "fakecomm", false, &rules);
    assert_non_null(pr);
    /* a systemd service: Coroot's container id, its own service name */
    assert_string_equal(pr->service, "/system.slice/fake.service");
    assert_string_equal(pr->container_id, "/system.slice/fake.service");
    assert_int_equal(pfr_proc_table_size(&t), 1);
    /* a rule applied on refresh */
    char err[128];
    assert_int_equal(pfr_service_rules_add(&rules, "comm fake* renamed", err, sizeof(err)), 0);
    pfr_proc_refresh(&t, pr, NULL, &rules);
    assert_string_equal(pr->service, "renamed");
    /* tgid reuse resets the record; what /proc says now beats the notification's comm */
    pr = pfr_proc_table_learn(&t, 4242, 2000, "other", false, NULL);
    assert_int_equal(pr->start_time, 2000);
    assert_string_equal(pr->comm, "fakecomm"); /* /proc says so now: it wins */
    assert_int_equal(pfr_proc_table_size(&t), 1);
    /* a process gone from /proc keeps what the kernel told */
    pr = pfr_proc_table_learn(&t, 99, 5, "ghost", false, NULL);
    assert_string_equal(pr->service, "ghost");
    pfr_proc_table_remove(&t, 99);
    assert_null(pfr_proc_table_get(&t, 99));
    assert_int_equal(t.forgotten, 1);
    pfr_proc_table_free(&t);
    pfr_service_rules_free(&rules);

    const char *files[] = {"cgroup", "comm", "stat", "exe"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", d, files[i]);
        unlink(p);
    }
    rmdir(d);
    rmdir(root);
}

/* Hinted learning: the notification's comm is taken as is, and a cgroup id whose directory
 * under the cgroup mount carries it (its inode number) gives later processes their cgroup
 * without reading /proc/PID/cgroup; an id the directory does not carry is never cached. */
static void facts_from_hints(void **state)
{
    (void)state;
    char root[] = "/tmp/pfr-proc-XXXXXX", cgmnt[] = "/tmp/pfr-cgroup-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_non_null(mkdtemp(cgmnt));
    char d[256], p[300], unit[300];
    for (int pid = 4242; pid <= 4244; pid++) {
        snprintf(d, sizeof(d), "%s/%d", root, pid);
        mkdir(d, 0755);
        snprintf(p, sizeof(p), "%s/cgroup", d);
        write_text(p, pid == 4242 ? "0::/system.slice/web.service\n" : "0::/user.slice\n");
        snprintf(p, sizeof(p), "%s/comm", d);
        write_text(p, "proccomm\n");
    }
    snprintf(unit, sizeof(unit), "%s/system.slice", cgmnt);
    mkdir(unit, 0755);
    snprintf(unit, sizeof(unit), "%s/system.slice/web.service", cgmnt);
    mkdir(unit, 0755);
    struct stat st;
    assert_int_equal(stat(unit, &st), 0);

    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, root), 0);
    assert_null(t.cgroup_root); /* a fake /proc: no host cgroup mount */
    t.cgroup_root = strdup(cgmnt);
    pfr_proc_hint hint = {.comm = "evcomm", .cgroup_id = (uint64_t)st.st_ino};
    pfr_proc *pr = pfr_proc_table_learn_hinted(&t, 4242, 1, false, &hint, NULL);
    assert_non_null(pr);
    assert_string_equal(pr->comm, "evcomm"); /* not /proc's */
    assert_string_equal(pr->cgroup, "/system.slice/web.service");
    assert_string_equal(pr->service, "/system.slice/web.service");
    assert_int_equal(t.cgroup_reads, 1);
    assert_int_equal(t.cgroup_hits, 0);
    /* same id: the cgroup comes from memory (this fake /proc would say /user.slice) */
    pr = pfr_proc_table_learn_hinted(&t, 4243, 1, false, &hint, NULL);
    assert_string_equal(pr->cgroup, "/system.slice/web.service");
    assert_string_equal(pr->service, "/system.slice/web.service");
    assert_int_equal(t.cgroup_hits, 1);
    /* even for a process already gone from /proc */
    pr = pfr_proc_table_learn_hinted(&t, 77, 1, false, &hint, NULL);
    assert_string_equal(pr->cgroup, "/system.slice/web.service");
    assert_int_equal(t.cgroup_hits, 2);
    /* gone from /proc, its cgroup never met: found by walking the cgroup tree, then cached */
    char other_unit[300];
    snprintf(other_unit, sizeof(other_unit), "%s/system.slice/db.service", cgmnt);
    mkdir(other_unit, 0755);
    struct stat ost;
    assert_int_equal(stat(other_unit, &ost), 0);
    pfr_proc_hint gone = {.comm = "db", .cgroup_id = (uint64_t)ost.st_ino};
    pr = pfr_proc_table_learn_hinted(&t, 78, 1, false, &gone, NULL);
    assert_string_equal(pr->cgroup, "/system.slice/db.service");
    assert_string_equal(pr->service, "/system.slice/db.service");
    assert_int_equal(t.cgroup_walks, 1);
    pr = pfr_proc_table_learn_hinted(&t, 79, 1, false, &gone, NULL);
    assert_string_equal(pr->cgroup, "/system.slice/db.service");
    assert_int_equal(t.cgroup_walks, 1);
    assert_int_equal(t.cgroup_hits, 3);
    rmdir(other_unit);
    /* an id the directory of the path read does not carry: read, and not cached */
    pfr_proc_hint other = {.comm = "x", .cgroup_id = (uint64_t)st.st_ino + 1000};
    pr = pfr_proc_table_learn_hinted(&t, 4244, 1, false, &other, NULL);
    assert_string_equal(pr->cgroup, "/user.slice");
    pr = pfr_proc_table_learn_hinted(&t, 4243, 2, false, &other, NULL);
    assert_string_equal(pr->cgroup, "/user.slice");
    assert_int_equal(t.cgroup_reads, 3);
    assert_int_equal(t.cgroup_hits, 3);
    /* no hint: /proc as before, comm included */
    pr = pfr_proc_table_learn(&t, 4243, 3, "old", false, NULL);
    assert_string_equal(pr->comm, "proccomm");
    assert_string_equal(pr->cgroup, "/user.slice");
    pfr_proc_table_free(&t);

    for (int pid = 4242; pid <= 4244; pid++) {
        const char *files[] = {"cgroup", "comm"};
        for (size_t i = 0; i < 2; i++) {
            snprintf(p, sizeof(p), "%s/%d/%s", root, pid, files[i]);
            unlink(p);
        }
        snprintf(d, sizeof(d), "%s/%d", root, pid);
        rmdir(d);
    }
    rmdir(unit);
    snprintf(unit, sizeof(unit), "%s/system.slice", cgmnt);
    rmdir(unit);
    rmdir(cgmnt);
    rmdir(root);
}

/* A fake /proc/PID with cgroup text and an exe link; returns its directory in d. */
static void fake_pid(const char *root, int pid, const char *cgroup_text, char *d, size_t dlen)
{
    char p[512];
    snprintf(d, dlen, "%s/%d", root, pid);
    mkdir(d, 0755);
    snprintf(p, sizeof(p), "%s/cgroup", d);
    write_text(p, cgroup_text);
    snprintf(p, sizeof(p), "%s/comm", d);
    write_text(p, "fakecomm\n");
    snprintf(p, sizeof(p), "%s/exe", d);
    unlink(p);
    assert_int_equal(symlink("/usr/bin/fake-server", p), 0);
}

static void unfake_pid(const char *d)
{
    const char *files[] = {"cgroup", "comm", "exe"};
    char p[512];
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", d, files[i]);
        unlink(p);
    }
    rmdir(d);
}

#define HEX64 "b43d92bf1e5c6f78bb9b7bc6f40721280299855ba692092716e3a1b6c0b86f3f"

/* Which /proc/PID/cgroup line names a process, on each kind of host: the node agent's rule
 * (its cgroup.go getId), then the name that gives (no resolver: paths alone). */
static void facts_by_host_kind(void **state)
{
    (void)state;
    static const struct {
        const char *what, *text, *cgroup, *service, *container_id;
    } cases[] = {
        {"v2 only: a systemd service", "0::/system.slice/nginx.service\n",
         "/system.slice/nginx.service", "/system.slice/nginx.service",
         "/system.slice/nginx.service"},
        {"v2 only: init.scope is no container", "0::/init.scope\n", "", "fake-server", ""},
        {"v2 only: the root", "0::/\n", "", "fake-server", ""},
        {"hybrid, systemd's v2 tree (v2 and name=systemd agree)",
         "12:perf_event:/\n11:devices:/system.slice/ssh.service\n6:memory:/system.slice/"
         "ssh.service\n4:cpu,cpuacct:/\n1:name=systemd:/system.slice/ssh.service\n0::/system."
         "slice/ssh.service\n",
         "/system.slice/ssh.service", "/system.slice/ssh.service", "/system.slice/ssh.service"},
        {"hybrid, an empty v2 tree: the v1 cpu path",
         "9:name=systemd:/\n8:pids:/\n4:memory:/\n2:cpuacct:/\n1:cpu:/system.slice/"
         "build.service\n0::/\n",
         "/system.slice/build.service", "/system.slice/build.service",
         "/system.slice/build.service"},
        {"hybrid, v2 in init.scope: Docker's v1 cpu path",
         "12:cpu,cpuacct:/docker/" HEX64 "\n0::/init.scope\n", "/docker/" HEX64, "b43d92bf1e5c",
         ""},
        {"hybrid, this test host's shape: memory alone says something",
         "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n4:memory:/process_api/"
         "434167152192274543fb61edf242cca4\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n",
         "/process_api/434167152192274543fb61edf242cca4", "fake-server", ""},
        {"hybrid, Kubernetes on v1: the pod's cpu path over systemd's v2 one",
         "12:memory:/kubepods/burstable/pod1/" HEX64
         "\n2:cpu,cpuacct:/kubepods/burstable/pod1/" HEX64
         "\n0::/reserved.slice/containerd.service\n",
         "/kubepods/burstable/pod1/" HEX64, "b43d92bf1e5c", ""},
        {"v1 only: memory and pids in init.scope, the unit in name=systemd",
         "11:freezer:/\n10:blkio:/init.scope\n8:memory:/init.scope\n7:pids:/init.scope\n2:cpu,"
         "cpuacct:/\n1:name=systemd:/system.slice/springboot.service\n",
         "/system.slice/springboot.service", "/system.slice/springboot.service",
         "/system.slice/springboot.service"},
        {"v1 only: cpu before memory",
         "4:memory:/system.slice/a.service\n3:cpu:/system.slice/"
         "b.service\n",
         "/system.slice/b.service", "/system.slice/b.service", "/system.slice/b.service"},
        {"v1 only: a templated unit's sub-slice",
         "5:cpu,cpuacct:/\n2:devices:/system.slice/system-getty.slice\n1:name=systemd:/system."
         "slice/system-getty.slice/getty@tty1.service\n",
         "/system.slice/system-getty.slice/getty@tty1.service", "/system.slice/system-getty.slice",
         "/system.slice/system-getty.slice"},
        {"v1 only: Docker", "7:cpu,cpuacct:/docker/" HEX64 "\n1:name=systemd:/docker/" HEX64 "\n",
         "/docker/" HEX64, "b43d92bf1e5c", ""},
    };
    char root[] = "/tmp/pfr-proc-XXXXXX";
    assert_non_null(mkdtemp(root));
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, root), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char d[256], cg[512];
        print_message("%s\n", cases[i].what);
        fake_pid(root, 4242, cases[i].text, d, sizeof(d));
        assert_int_equal(pfr_process_read_facts(root, 4242, NULL, 0, cg, sizeof(cg), NULL, 0, NULL),
                         0);
        assert_string_equal(cg, cases[i].cgroup);
        pfr_proc *pr = pfr_proc_table_learn(&t, 4242, 1, "fakecomm", false, NULL);
        assert_non_null(pr);
        assert_string_equal(pr->cgroup ? pr->cgroup : "", cases[i].cgroup);
        assert_string_equal(pr->service, cases[i].service);
        assert_string_equal(pr->container_id, cases[i].container_id);
        unfake_pid(d);
    }
    pfr_proc_table_free(&t);
    rmdir(root);
}

/* A cgroup v2 id stands for a path only where it decides the agent's pick: on a hybrid host
 * whose processes all sit in the v2 root, each process's v1 path is read; on a v2 only host the
 * root's id is remembered ("" = no container). */
static void cgroup_cache_by_host_kind(void **state)
{
    (void)state;
    char root[] = "/tmp/pfr-proc-XXXXXX", cgmnt[] = "/tmp/pfr-cgroup-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_non_null(mkdtemp(cgmnt));
    struct stat st;
    assert_int_equal(stat(cgmnt, &st), 0); /* the fake v2 root's id */
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, root), 0);
    t.cgroup_root = strdup(cgmnt);
    pfr_proc_hint hint = {.comm = "c", .cgroup_id = (uint64_t)st.st_ino};
    char d1[256], d2[256];

    /* hybrid: two services in v1 cpu, both in the v2 root */
    fake_pid(root, 10, "1:cpu:/system.slice/a.service\n0::/\n", d1, sizeof(d1));
    fake_pid(root, 11, "1:cpu:/system.slice/b.service\n0::/\n", d2, sizeof(d2));
    pfr_proc *pr = pfr_proc_table_learn_hinted(&t, 10, 1, false, &hint, NULL);
    assert_string_equal(pr->service, "/system.slice/a.service");
    pr = pfr_proc_table_learn_hinted(&t, 11, 1, false, &hint, NULL);
    assert_string_equal(pr->service, "/system.slice/b.service");
    assert_int_equal(t.cgroup_reads, 2);
    assert_int_equal(t.cgroup_hits, 0);
    /* gone: the walk finds the v2 root, which names nothing and is not remembered */
    pr = pfr_proc_table_learn_hinted(&t, 12, 1, false, &hint, NULL);
    assert_string_equal(pr->cgroup, "/");
    assert_string_equal(pr->service, "c");
    assert_int_equal(t.cgroup_walks, 1);
    pr = pfr_proc_table_learn_hinted(&t, 10, 2, false, &hint, NULL);
    assert_string_equal(pr->service, "/system.slice/a.service");
    assert_int_equal(t.cgroup_reads, 3);
    assert_int_equal(t.cgroup_hits, 0);
    unfake_pid(d1);
    unfake_pid(d2);

    /* v2 only: the root's id says "no container" for every process in it */
    fake_pid(root, 20, "0::/\n", d1, sizeof(d1));
    fake_pid(root, 21, "0::/\n", d2, sizeof(d2));
    pr = pfr_proc_table_learn_hinted(&t, 20, 1, false, &hint, NULL);
    assert_null(pr->cgroup);
    assert_string_equal(pr->service, "fake-server");
    pr = pfr_proc_table_learn_hinted(&t, 21, 1, false, &hint, NULL);
    assert_null(pr->cgroup);
    assert_int_equal(t.cgroup_reads, 4);
    assert_int_equal(t.cgroup_hits, 1);
    unfake_pid(d1);
    unfake_pid(d2);

    pfr_proc_table_free(&t);
    rmdir(cgmnt);
    rmdir(root);
}

struct lock_arg {
    pfr_fair_lock *l;
    int id;
    int *order;
    int *n;
};

static void *lock_taker(void *p)
{
    struct lock_arg *a = p;
    pfr_fair_lock_acquire(a->l);
    a->order[(*a->n)++] = a->id;
    pfr_fair_lock_release(a->l);
    return NULL;
}

static void wait_queued(pfr_fair_lock *l, uint64_t behind)
{
    for (;;) {
        pthread_mutex_lock(&l->m);
        uint64_t q = l->next - l->serving;
        pthread_mutex_unlock(&l->m);
        if (q >= behind + 1)
            return;
        sched_yield();
    }
}

static void fair_lock_fifo(void **state)
{
    (void)state;
    pfr_fair_lock l;
    pfr_fair_lock_init(&l);
    pfr_fair_lock_acquire(&l);
    assert_false(pfr_fair_lock_contended(&l));
    int order[3], n = 0;
    struct lock_arg a[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (struct lock_arg){.l = &l, .id = i, .order = order, .n = &n};
        assert_int_equal(pthread_create(&t[i], NULL, lock_taker, &a[i]), 0);
        wait_queued(&l, (uint64_t)i + 1); /* queue them in a known order */
    }
    assert_true(pfr_fair_lock_contended(&l));
    pfr_fair_lock_release(&l);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(order[i], i);
    assert_false(pfr_fair_lock_contended(&l));
    pfr_fair_lock_destroy(&l);
}

static void frame_cache(void **state)
{
    (void)state;
    pfr_frame_cache c;
    pfr_frame_cache_init(&c, 64 * 1024);
    const pfr_cached_frame *f;
    assert_int_equal(pfr_frame_cache_get(&c, 7, 0x1000, &f), 0);
    char fn[32] = "inner";
    pfr_cached_frame in[2] = {{.function = fn, .file = "a.c", .module = "/bin/a", .line = 3},
                              {.function = "outer", .file = "a.c", .module = "/bin/a", .line = 9}};
    assert_int_equal(pfr_frame_cache_put(&c, 7, 0x1000, in, 2), 0);
    strcpy(fn, "changed"); /* strings were copied */
    assert_int_equal(pfr_frame_cache_get(&c, 7, 0x1000, &f), 2);
    assert_string_equal(f[0].function, "inner");
    assert_string_equal(f[1].function, "outer");
    assert_int_equal(f[1].line, 9);
    /* interned: the same text is the same pointer */
    assert_ptr_equal(f[0].file, f[1].file);
    /* with its length and the profiles' hash kept beside it, "" included */
    size_t len;
    uint64_t h;
    pfr_frame_cache_str(f[1].function, &len, &h);
    assert_int_equal(len, 5);
    assert_true(h == pfr_hash_bytes("outer", 5));
    pfr_frame_cache_str(f[0].module, &len, &h);
    assert_int_equal(len, 6);
    assert_true(h == pfr_hash_bytes("/bin/a", 6));
    assert_int_equal(pfr_frame_cache_get(&c, 8, 0x1000, &f), 0); /* another process */
    pfr_cached_frame k = {.function = "schedule", .file = NULL, .module = "[kernel]"};
    assert_int_equal(pfr_frame_cache_put(&c, PFR_FRAME_CACHE_KERNEL, 0xffffffff81000000ull, &k, 1),
                     0);
    assert_int_equal(pfr_frame_cache_get(&c, PFR_FRAME_CACHE_KERNEL, 0xffffffff81000000ull, &f), 1);
    assert_string_equal(f[0].file, "");
    pfr_frame_cache_str(f[0].file, &len, &h);
    assert_int_equal(len, 0);
    assert_true(h == pfr_hash_bytes("", 0));
    pfr_frame_cache_forget(&c, 7);
    assert_int_equal(pfr_frame_cache_get(&c, 7, 0x1000, &f), 0);
    assert_int_equal(pfr_frame_cache_get(&c, PFR_FRAME_CACHE_KERNEL, 0xffffffff81000000ull, &f), 1);
    /* bounded: filling past the cap starts over */
    for (uint64_t a = 0; a < 20000; a++) {
        char name[32];
        snprintf(name, sizeof(name), "fn_%llu", (unsigned long long)a);
        pfr_cached_frame x = {.function = name, .file = "", .module = "/bin/b"};
        assert_int_equal(pfr_frame_cache_put(&c, 9, a, &x, 1), 0);
        assert_true(c.bytes <= 64 * 1024 + 4096 || c.nframes <= 1);
    }
    assert_true(c.resets >= 1);
    assert_int_equal(pfr_frame_cache_get(&c, 9, 19999, &f), 1);
    assert_string_equal(f[0].function, "fn_19999");
    pfr_frame_cache_free(&c);
}

/* When the recorder runs itself again for a heap on huge pages, and with which tunables. */
static void heap_pages_plan(void **state)
{
    (void)state;
    static const char *const madvise = "always [madvise] never\n", *const never =
                                                                       "always madvise [never]\n";
    static const struct {
        const char *tunables, *thp;
        bool secure, run;
        const char *want;
    } cases[] = {
        {NULL, madvise, false, true, "glibc.malloc.hugetlb=1"},
        {"", "[always] madvise never", false, true, "glibc.malloc.hugetlb=1"},
        {"glibc.malloc.arena_max=1", madvise, false, true,
         "glibc.malloc.arena_max=1:glibc.malloc.hugetlb=1"},
        /* an administrator's value stands, 0 as much as 1 */
        {"glibc.malloc.hugetlb=0", madvise, false, false, NULL},
        {"glibc.malloc.arena_max=1:glibc.malloc.hugetlb=1", madvise, false, false, NULL},
        /* a longer name that starts the same is another tunable */
        {"glibc.malloc.hugetlbx=1", madvise, false, true,
         "glibc.malloc.hugetlbx=1:glibc.malloc.hugetlb=1"},
        {NULL, never, false, false, NULL},
        {NULL, NULL, false, false, NULL}, /* no THP in the kernel */
        {NULL, "", false, false, NULL},
        {NULL, madvise, true, false, NULL}, /* glibc would erase it: no loop */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[256] = "";
        bool run =
            pfr_heap_pages_plan(cases[i].tunables, cases[i].thp, cases[i].secure, out, sizeof(out));
        assert_int_equal(run, cases[i].run);
        if (run)
            assert_string_equal(out, cases[i].want);
    }
    char tiny[8];
    assert_false(pfr_heap_pages_plan(NULL, madvise, false, tiny, sizeof(tiny)));
}

/* The heap given back to small pages: every [heap] mapping marked "nh" (no huge pages). */
static void heap_pages_small(void **state)
{
    (void)state;
    /* the brk heap exists (sanitizers' allocators make none of their own): left in place,
     * since malloc may have moved the break since */
    assert_true(sbrk(64 * 1024) != (void *)-1);
    assert_true(pfr_heap_pages_small() > 0);
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    int heaps = 0, marked = 0;
    bool in_heap = false;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in_heap = strstr(line, "[heap]") != NULL;
        } else if (in_heap && !strncmp(line, "VmFlags:", 8)) {
            heaps++;
            marked += strstr(line, " nh") != NULL;
        }
    }
    fclose(f);
    assert_true(heaps > 0);
    assert_int_equal(marked, heaps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(map_matches_reference),
        cmocka_unit_test(machine_id),
        cmocka_unit_test(bpf_precheck),
        cmocka_unit_test(cpu_lists),
        cmocka_unit_test(stat_kthread),
        cmocka_unit_test(facts_from_fake_proc),
        cmocka_unit_test(facts_from_hints),
        cmocka_unit_test(facts_by_host_kind),
        cmocka_unit_test(cgroup_cache_by_host_kind),
        cmocka_unit_test(fair_lock_fifo),
        cmocka_unit_test(frame_cache),
        cmocka_unit_test(heap_pages_plan),
        cmocka_unit_test(heap_pages_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
