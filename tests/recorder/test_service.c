/* Service naming: container ids from cgroup paths, systemd units, rules, fallbacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "service.h"

#define ID64 "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100"

static void container_ids(void **state)
{
    (void)state;
    char id[PFR_RUNTIME_ID_MAX + 1];
    static const char *const yes[] = {
        "/system.slice/docker-" ID64 ".scope",
        "/docker/" ID64,
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/"
        "cri-containerd-" ID64 ".scope",
        "/kubepods/burstable/pod0c9a-11/" ID64,
        "/machine.slice/libpod-" ID64 ".scope",
        "/kubepods.slice/kubepods-pod1.slice/crio-" ID64 ".scope",
        "/system.slice/docker-" ID64 ".scope/init.scope/../x",
    };
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        assert_true(pfr_container_id_from_cgroup(yes[i], id));
        assert_string_equal(id, ID64);
    }
    static const char *const no[] = {
        "/",
        "/system.slice/nginx.service",
        "/user.slice/user-1000.slice/session-2.scope",
        "/machine.slice/libpod-conmon-" ID64 ".scope",
        "/docker/3f4e5d",                                                           /* too short */
        "/docker/" ID64 "0",                                                        /* too long */
        "/docker/zz4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100", /* not hex */
        "",
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        assert_false(pfr_container_id_from_cgroup(no[i], id));
        assert_string_equal(id, "");
    }
    assert_false(pfr_container_id_from_cgroup(NULL, id));
    /* upper-case hex is normalised */
    assert_true(pfr_container_id_from_cgroup(
        "/docker/3F4E5D6C7B8A99887766554433221100FFEEDDCCBBAA99887766554433221100", id));
    assert_string_equal(id, ID64);
}

static void systemd_units(void **state)
{
    (void)state;
    char u[64];
    assert_true(pfr_systemd_unit_from_cgroup("/system.slice/nginx.service", u, sizeof(u)));
    assert_string_equal(u, "nginx");
    assert_true(pfr_systemd_unit_from_cgroup(
        "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", u, sizeof(u)));
    assert_string_equal(u, "foo");
    assert_true(pfr_systemd_unit_from_cgroup("/system.slice/getty@tty1.service", u, sizeof(u)));
    assert_string_equal(u, "getty@tty1");
    assert_false(
        pfr_systemd_unit_from_cgroup("/user.slice/user-0.slice/session-3.scope", u, sizeof(u)));
    assert_false(pfr_systemd_unit_from_cgroup("/", u, sizeof(u)));
    assert_false(pfr_systemd_unit_from_cgroup("/system.slice/.service", u, sizeof(u)));
    assert_false(pfr_systemd_unit_from_cgroup(NULL, u, sizeof(u)));
}

static void name_rule_order(void **state)
{
    (void)state;
    char svc[PFR_CONTAINER_ID_MAX + 1], cid[PFR_CONTAINER_ID_MAX + 1];
    pfr_process_facts f = {
        .comm = "nginx", .exe = "/usr/sbin/nginx", .cgroup = "/system.slice/nginx.service"};
    /* no identity known: the unit's name */
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "nginx");
    assert_string_equal(cid, "");
    /* Coroot's identity of the cgroup wins */
    f.coroot_id = f.coroot_service = "/system.slice/nginx.service";
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "/system.slice/nginx.service");
    assert_string_equal(cid, "/system.slice/nginx.service");
    f.coroot_id = "/k8s/prod/api-7d4f9c8b6-x2b5k/app";
    f.coroot_service = "/k8s/prod/api";
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "/k8s/prod/api");
    assert_string_equal(cid, "/k8s/prod/api-7d4f9c8b6-x2b5k/app");
    /* an id without a service name is its own service */
    f.coroot_service = NULL;
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "/k8s/prod/api-7d4f9c8b6-x2b5k/app");
    f.coroot_id = f.coroot_service = NULL;

    /* a container whose metadata is not had yet: its short runtime id, no container id */
    f.cgroup = "/system.slice/docker-" ID64 ".scope";
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "3f4e5d6c7b8a");
    assert_string_equal(cid, "");

    f.cgroup = "/user.slice/user-0.slice/session-1.scope";
    f.exe = "/opt/app/bin/my-server";
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "my-server");

    f.exe = NULL;
    f.comm = "worker";
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "worker");

    f.comm = "";
    pfr_service_name(NULL, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "unknown");

    pfr_process_facts k = {.comm = "kworker/0:1", .cgroup = "/", .kthread = true};
    pfr_service_name(NULL, &k, svc, sizeof(svc), cid);
    assert_string_equal(svc, "kernel");
}

static void rules(void **state)
{
    (void)state;
    pfr_service_rules r = {0};
    char err[256];
    assert_int_equal(pfr_service_rules_add(&r, "comm postgres* database", err, sizeof(err)), 0);
    assert_int_equal(pfr_service_rules_add(&r, "  exe   /opt/app/*   app  ", err, sizeof(err)), 0);
    assert_int_equal(pfr_service_rules_add(&r, "cgroup /system.slice/x* xsvc", err, sizeof(err)),
                     0);
    assert_int_equal(pfr_service_rules_add(&r, "container 3f4e* web", err, sizeof(err)), 0);
    assert_int_equal(r.n, 4);

    assert_int_equal(pfr_service_rules_add(&r, "comm onlytwo", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "KIND PATTERN SERVICE"));
    assert_int_equal(pfr_service_rules_add(&r, "pid 1 init", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "unknown kind 'pid'"));
    assert_int_equal(pfr_service_rules_add(&r, "comm a b c", err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_service_rules_add(&r, "", err, sizeof(err)), -EINVAL);
    assert_int_equal(r.n, 4);

    char svc[PFR_CONTAINER_ID_MAX + 1], cid[PFR_CONTAINER_ID_MAX + 1];
    pfr_process_facts f = {.comm = "postgres: writer", .exe = "/usr/lib/postgresql/bin/postgres"};
    pfr_service_name(&r, &f, svc, sizeof(svc), cid);
    assert_string_equal(svc, "database");

    pfr_process_facts g = {.comm = "x", .exe = "/opt/app/server"};
    pfr_service_name(&r, &g, svc, sizeof(svc), cid);
    assert_string_equal(svc, "app");

    pfr_process_facts h = {.comm = "x", .exe = "/bin/x", .cgroup = "/system.slice/xyz.service"};
    pfr_service_name(&r, &h, svc, sizeof(svc), cid);
    assert_string_equal(svc, "xsvc");

    /* a rule beats the container name; the container id label stays */
    pfr_process_facts c = {.comm = "x",
                           .exe = "/bin/x",
                           .cgroup = "/docker/" ID64,
                           .coroot_id = "/docker/shop",
                           .coroot_service = "/docker/shop"};
    pfr_service_name(&r, &c, svc, sizeof(svc), cid);
    assert_string_equal(svc, "web");
    assert_string_equal(cid, "/docker/shop");
    /* a container rule matches the Coroot container id too */
    pfr_service_rules r2 = {0};
    assert_int_equal(pfr_service_rules_add(&r2, "container /docker/sh* shop", err, sizeof(err)), 0);
    pfr_service_name(&r2, &c, svc, sizeof(svc), cid);
    assert_string_equal(svc, "shop");
    pfr_service_rules_free(&r2);

    pfr_service_rules copy;
    assert_int_equal(pfr_service_rules_copy(&copy, &r), 0);
    assert_int_equal(copy.n, 4);
    assert_string_equal(copy.v[3].service, "web");
    pfr_service_rules_free(&copy);
    pfr_service_rules_free(&r);
    assert_int_equal(r.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(container_ids),
        cmocka_unit_test(systemd_units),
        cmocka_unit_test(name_rule_order),
        cmocka_unit_test(rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
