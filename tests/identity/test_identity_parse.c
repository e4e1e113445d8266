/* Unit tests of pfr_identity's parsers of outside input: Docker's container JSON, the pod list,
 * the OCI configs of containerd and CRI-O, environ; and calcId's order over their metadata. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "id_internal.h"
#include "pfr_identity.h"

#define ID1 "73051af271105c07e1f493b34856a77e665e3b0b4fc72f76c807dfbffeb881bd"
#define ID2 "49f9e8e5395d57c1083996c09e2e6f042d5fe1ec0310facab32f94912b35ce59"
#define ID3 "c74b0f5062f0bc726cae1e9369ad4a95deed6b298d247f0407475adb23fa3190"
#define NOW 1700000000ll

static int docker(const char *json, struct id_meta *m)
{
    char err[256] = "";
    return pfr_identity_docker_parse(json, strlen(json), m, err, sizeof(err));
}

static const char *calc(const struct id_meta *m)
{
    static char out[PFR_IDENTITY_ID_MAX];
    assert_int_equal(pfr_identity_calc(m, NOW, out, sizeof(out)), 0);
    return out;
}

static void test_docker_plain(void **state)
{
    (void)state;
    struct id_meta *m = calloc(1, sizeof(*m));
    /* a trimmed real inspect answer */
    assert_int_equal(docker("{\"Id\":\"" ID1 "\",\"Created\":\"2024-01-02T03:04:05Z\","
                            "\"Path\":\"nginx\",\"State\":{\"Status\":\"running\",\"Pid\":42},"
                            "\"Name\":\"/web\",\"Config\":{\"Hostname\":\"73051af27110\","
                            "\"Env\":[\"PATH=/usr/bin\",\"NGINX_VERSION=1.25\",\"EMPTY=\","
                            "\"NOEQUALS\"],\"Labels\":{\"maintainer\":\"NGINX\"}},"
                            "\"HostConfig\":{\"LogConfig\":{\"Type\":\"json-file\"}}}",
                            m),
                     0);
    assert_string_equal(m->name, "web");
    assert_string_equal(calc(m), "/docker/web");
    /* null Config, labels, env are fine (old daemons, config.v2.json of a created container) */
    assert_int_equal(docker("{\"Name\":\"/db\",\"Config\":null}", m), 0);
    assert_string_equal(calc(m), "/docker/db");
    assert_int_equal(docker("{\"Name\":\"db\",\"Config\":{\"Labels\":null,\"Env\":null}}", m), 0);
    assert_string_equal(calc(m), "/docker/db");
    /* no name: no id */
    assert_int_equal(docker("{\"Config\":{}}", m), 0);
    assert_string_equal(calc(m), "");
    assert_int_equal(docker("{\"Name\":\"/\"}", m), 0);
    assert_string_equal(calc(m), "");
    free(m);
}

static void test_docker_labels(void **state)
{
    (void)state;
    struct id_meta *m = calloc(1, sizeof(*m));
    /* dockershim: Kubernetes labels win over the name */
    assert_int_equal(
        docker("{\"Name\":\"/k8s_api_api-5d9c7b6f4-x2x7q_prod_0f0e_0\",\"Config\":{\"Labels\":{"
               "\"io.kubernetes.pod.name\":\"api-5d9c7b6f4-x2x7q\","
               "\"io.kubernetes.pod.namespace\":\"prod\","
               "\"io.kubernetes.container.name\":\"api\",\"annotation.x\":\"y\"}}}",
               m),
        0);
    assert_string_equal(calc(m), "/k8s/prod/api-5d9c7b6f4-x2x7q/api");
    /* dockershim's pause container */
    assert_int_equal(docker("{\"Name\":\"/k8s_POD_api_prod_0\",\"Config\":{\"Labels\":{"
                            "\"io.kubernetes.pod.name\":\"api-5d9c7b6f4-x2x7q\","
                            "\"io.kubernetes.pod.namespace\":\"prod\","
                            "\"io.kubernetes.container.name\":\"POD\"}}}",
                            m),
                     0);
    assert_string_equal(calc(m), "");
    /* Swarm beats Nomad and the name */
    assert_int_equal(docker("{\"Name\":\"/shop_web.1.x3k2\",\"Config\":{\"Labels\":{"
                            "\"com.docker.swarm.task.name\":\"shop_web.1.x3k2\","
                            "\"com.docker.stack.namespace\":\"shop\","
                            "\"com.docker.swarm.service.name\":\"shop_web\"},"
                            "\"Env\":[\"NOMAD_ALLOC_ID=a\",\"NOMAD_GROUP_NAME=g\","
                            "\"NOMAD_JOB_NAME=j\",\"NOMAD_NAMESPACE=n\",\"NOMAD_TASK_NAME=t\"]}}",
                            m),
                     0);
    assert_string_equal(calc(m), "/swarm/shop/web/1");
    /* Nomad (docker driver): env beats the name; the last of a repeated variable counts */
    assert_int_equal(docker("{\"Name\":\"/server-0b4c\",\"Config\":{\"Env\":["
                            "\"NOMAD_ALLOC_ID=old\",\"NOMAD_ALLOC_ID=0b4c\","
                            "\"NOMAD_GROUP_NAME=api\",\"NOMAD_JOB_NAME=shop\","
                            "\"NOMAD_NAMESPACE=default\",\"NOMAD_TASK_NAME=server\"]}}",
                            m),
                     0);
    assert_string_equal(calc(m), "/nomad/default/shop/api/0b4c/server");
    /* an incomplete Nomad env: the name */
    assert_int_equal(docker("{\"Name\":\"/x\",\"Config\":{\"Env\":[\"NOMAD_ALLOC_ID=a\"]}}", m), 0);
    assert_string_equal(calc(m), "/docker/x");
    free(m);
}

static void test_docker_bad(void **state)
{
    (void)state;
    struct id_meta *m = calloc(1, sizeof(*m));
    static const char *const bad[] = {
        "",
        "null",
        "[]",
        "\"x\"",
        "{\"Name\":3}",
        "{\"Name\":\"/x\",\"Config\":[]}",
        "{\"Name\":\"/x\",\"Config\":{\"Labels\":[]}}",
        "{\"Name\":\"/x\",\"Config\":{\"Labels\":{\"a\":1}}}",
        "{\"Name\":\"/x\",\"Config\":{\"Env\":{}}}",
        "{\"Name\":\"/x\",\"Config\":{\"Env\":[1]}}",
        "{\"Name\":\"/x\"",
        "{\"Name\":\"/x\"} trailing",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        int rc = pfr_identity_docker_parse(bad[i], strlen(bad[i]), m, err, sizeof(err));
        if (rc != -EBADMSG)
            fail_msg("%s: rc %d", bad[i], rc);
        assert_true(err[0] != '\0');
        assert_string_equal(m->name, ""); /* nothing half-filled */
    }
    /* a value too long for an id: no id at all */
    static char big[2048];
    int n = snprintf(big, sizeof(big), "{\"Name\":\"/");
    memset(big + n, 'a', 1000);
    strcpy(big + n + 1000, "\"}");
    assert_int_equal(docker(big, m), 0);
    assert_true(m->too_long);
    char out[PFR_IDENTITY_ID_MAX];
    assert_int_equal(pfr_identity_calc(m, NOW, out, sizeof(out)), -ENAMETOOLONG);
    assert_string_equal(out, "");
    free(m);
}

static const char pods_json[] =
    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":["
    /* a Deployment's pod on containerd, with an init container */
    "{\"metadata\":{\"name\":\"api-5d9c7b6f4-x2x7q\",\"namespace\":\"prod\"},"
    "\"spec\":{\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\","
    "\"initContainerStatuses\":[{\"name\":\"migrate\",\"containerID\":\"containerd://" ID2 "\"}],"
    "\"containerStatuses\":[{\"name\":\"api\",\"containerID\":\"containerd://" ID1 "\"},"
    "{\"name\":\"sidecar\",\"state\":{\"waiting\":{}}}]}},"
    /* CRI-O, an ephemeral debug container */
    "{\"metadata\":{\"name\":\"db-0\",\"namespace\":\"data\"},\"status\":{"
    "\"ephemeralContainerStatuses\":[{\"name\":\"debugger\",\"containerID\":\"cri-o://" ID3 "\"}]"
    "}},"
    /* junk that must be skipped, not fail the list */
    "{\"metadata\":{\"name\":\"bad\",\"namespace\":\"x\"},\"status\":{\"containerStatuses\":["
    "{\"name\":\"short\",\"containerID\":\"docker://abc\"},"
    "{\"name\":\"upper\",\"containerID\":\"docker://"
    "73051AF271105C07E1F493B34856A77E665E3B0B4FC"
    "72F76C807DFBFFEB881BD\"},"
    "{\"name\":\"noscheme\",\"containerID\":\"" ID1 "\"},"
    "{\"name\":7,\"containerID\":\"docker://" ID1 "\"},"
    "{\"containerID\":\"docker://" ID1 "\"},"
    "\"string\",null]}},"
    "{\"metadata\":{\"name\":\"\",\"namespace\":\"x\"},\"status\":{\"containerStatuses\":["
    "{\"name\":\"c\",\"containerID\":\"docker://" ID1 "\"}]}},"
    "{\"metadata\":{\"namespace\":\"x\"}},"
    "3,null,{}"
    "]}";

static void test_pods(void **state)
{
    (void)state;
    struct id_pod_index ix;
    char err[256] = "";
    assert_int_equal(pfr_identity_pods_parse(pods_json, strlen(pods_json), &ix, err, sizeof(err)),
                     0);
    assert_int_equal(ix.n, 3);
    const struct id_pod_entry *e = pfr_identity_pods_find(&ix, ID1);
    assert_non_null(e);
    assert_string_equal(e->ns, "prod");
    assert_string_equal(e->pod, "api-5d9c7b6f4-x2x7q");
    assert_string_equal(e->container, "api");
    e = pfr_identity_pods_find(&ix, ID2);
    assert_non_null(e);
    assert_string_equal(e->container, "migrate");
    e = pfr_identity_pods_find(&ix, ID3);
    assert_non_null(e);
    assert_string_equal(e->ns, "data");
    assert_string_equal(e->pod, "db-0");
    assert_string_equal(e->container, "debugger");
    assert_null(pfr_identity_pods_find(
        &ix, "0000000000000000000000000000000000000000000000000000000000000000"));
    assert_null(pfr_identity_pods_find(&ix, "short"));
    pfr_identity_pods_free(&ix);

    /* an empty list is a list */
    const char *empty = "{\"kind\":\"PodList\",\"items\":[]}";
    assert_int_equal(pfr_identity_pods_parse(empty, strlen(empty), &ix, err, sizeof(err)), 0);
    assert_int_equal(ix.n, 0);
    assert_null(pfr_identity_pods_find(&ix, ID1));
    pfr_identity_pods_free(&ix);

    static const char *const bad[] = {
        "", "{", "[]", "{\"kind\":\"Status\",\"code\":403}", "{\"items\":{}}", "{\"items\":null}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(pfr_identity_pods_parse(bad[i], strlen(bad[i]), &ix, err, sizeof(err)),
                         -EBADMSG);
        assert_true(err[0] != '\0');
        assert_int_equal(ix.n, 0);
        assert_null(ix.v);
    }
}

static int oci(const char *json, struct id_meta *m)
{
    char err[256] = "";
    return pfr_identity_oci_parse(json, strlen(json), m, err, sizeof(err));
}

static void test_oci(void **state)
{
    (void)state;
    struct id_meta *m = calloc(1, sizeof(*m));
    /* containerd's CRI plugin */
    assert_int_equal(oci("{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"/app\"]},"
                         "\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
                         "\"io.kubernetes.cri.container-name\":\"api\","
                         "\"io.kubernetes.cri.sandbox-name\":\"api-5d9c7b6f4-x2x7q\","
                         "\"io.kubernetes.cri.sandbox-namespace\":\"prod\","
                         "\"io.kubernetes.cri.sandbox-id\":\"" ID2 "\"}}",
                         m),
                     1);
    assert_string_equal(calc(m), "/k8s/prod/api-5d9c7b6f4-x2x7q/api");
    /* ... its pod sandbox (pause) */
    assert_int_equal(oci("{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
                         "\"io.kubernetes.cri.sandbox-name\":\"api-5d9c7b6f4-x2x7q\","
                         "\"io.kubernetes.cri.sandbox-namespace\":\"prod\"}}",
                         m),
                     1);
    assert_string_equal(calc(m), "");
    /* CRI-O: labels as a JSON string */
    assert_int_equal(
        oci("{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"container\","
            "\"io.kubernetes.cri-o.Labels\":\"{\\\"io.kubernetes.container.name\\\":\\\"db\\\","
            "\\\"io.kubernetes.pod.name\\\":\\\"db-0\\\","
            "\\\"io.kubernetes.pod.namespace\\\":\\\"data\\\"}\"}}",
            m),
        1);
    assert_string_equal(calc(m), "/k8s/data/db-0/db");
    assert_int_equal(
        oci("{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"sandbox\","
            "\"io.kubernetes.cri-o.Labels\":\"{\\\"io.kubernetes.container.name\\\":\\\"POD\\\","
            "\\\"io.kubernetes.pod.name\\\":\\\"db-0\\\"}\"}}",
            m),
        1);
    assert_string_equal(calc(m), "");
    /* not a Kubernetes container, or broken labels: 0 */
    assert_int_equal(oci("{\"ociVersion\":\"1.0.2\"}", m), 0);
    assert_int_equal(oci("{\"annotations\":{\"io.kubernetes.cri-o.Labels\":\"{not json\"}}", m), 0);
    assert_int_equal(oci("{\"annotations\":{\"io.kubernetes.cri.sandbox-name\":5}}", m), 0);
    /* not an OCI config */
    assert_int_equal(oci("[]", m), -EBADMSG);
    assert_int_equal(oci("{\"annotations\":[]}", m), -EBADMSG);
    assert_int_equal(oci("", m), -EBADMSG);
    free(m);
}

static void test_environ(void **state)
{
    (void)state;
    struct id_meta *m = calloc(1, sizeof(*m));
    static const char env[] = "HOME=/root\0NOMAD_ALLOC_ID=0b4c\0NOMAD_GROUP_NAME=api\0"
                              "NOMAD_JOB_NAME=shop\0NOMAD_NAMESPACE=default\0"
                              "NOMAD_TASK_NAME=server\0NOMAD_TASK_NAME_X=no\0=\0junk";
    pfr_identity_meta_environ(m, env, sizeof(env) - 1);
    assert_string_equal(m->nomad_alloc, "0b4c");
    assert_string_equal(m->nomad_task, "server");
    assert_string_equal(calc(m), "/nomad/default/shop/api/0b4c/server");
    /* a value split at the buffer's end is cut there, not read past it */
    memset(m, 0, sizeof(*m));
    pfr_identity_meta_environ(m, "NOMAD_TASK_NAME=serverXYZ", 22);
    assert_string_equal(m->nomad_task, "server");
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_plain), cmocka_unit_test(test_docker_labels),
        cmocka_unit_test(test_docker_bad),   cmocka_unit_test(test_pods),
        cmocka_unit_test(test_oci),          cmocka_unit_test(test_environ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
