/*
 * Container ids from metadata: Kubernetes (with the CronJob rule), Docker Swarm, Nomad, Docker's
 * name, combined in the node agent's order (its calcId), and the metadata fields they use.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "id_internal.h"

/* The agent accepts a CronJob pod scheduled within this long of now, either way. */
#define CRONJOB_WINDOW_S (7 * 24 * 3600)
#define POD_NAME_MAX     1024

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static bool is_suffix_char(char c)
{
    return c && strchr("bcdfghjklmnpqrstvwxz2456789", c) != NULL;
}

/* "-<8 digits>-<5 suffix chars>" at s: the scheduled minute, or -1. */
static int64_t cron_tail(const char *s)
{
    if (s[0] != '-')
        return -1;
    int64_t minute = 0;
    for (int i = 1; i <= 8; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        minute = minute * 10 + (s[i] - '0');
    }
    if (s[9] != '-')
        return -1;
    for (int i = 10; i < 15; i++)
        if (!is_suffix_char(s[i]))
            return -1;
    return minute;
}

/* The agent's `([a-z0-9-]+)-([0-9]{8})-[bcdfghjklmnpqrstvwxz2456789]{5}` on a pod name,
 * unanchored, leftmost-first with a greedy group: the CronJob name (start, length) and the
 * scheduled minute. Every character of the tail is in the group's class, so the tail lies
 * inside the same run of [a-z0-9-] as the group. */
static bool cronjob_match(const char *pod, size_t *start, size_t *len, int64_t *minute)
{
    size_t n = strlen(pod);
    for (size_t i = 0; i < n; i++) {
        if (!is_name_char(pod[i]))
            continue;
        size_t run = i;
        while (run < n && is_name_char(pod[run]))
            run++;
        for (size_t j = run >= 15 ? run - 15 : 0; j > i; j--) {
            int64_t m = cron_tail(pod + j);
            if (m >= 0) {
                *start = i;
                *len = j - i;
                *minute = m;
                return true;
            }
        }
    }
    return false;
}

int pfr_identity_k8s_id(const char *ns, const char *pod, const char *container, int64_t now_unix_s,
                        char *out, size_t outlen)
{
    if (!pod || !*pod) {
        pfr_identity_copy(out, outlen, "");
        return -EINVAL;
    }
    ns = ns ? ns : "";
    if (strlen(pod) >= POD_NAME_MAX) { /* Kubernetes allows 253; bounds the matcher below */
        pfr_identity_copy(out, outlen, "");
        return -ENAMETOOLONG;
    }
    if (!container || !*container || strcmp(container, "POD") == 0)
        return pfr_identity_copy(out, outlen, ""); /* a pause container */
    size_t start, len;
    int64_t minute;
    if (cronjob_match(pod, &start, &len, &minute)) {
        int64_t at = minute * 60;
        if (at > now_unix_s - CRONJOB_WINDOW_S && at < now_unix_s + CRONJOB_WINDOW_S)
            return pfr_identity_fmt(out, outlen, "/k8s-cronjob/%s/%.*s/%s", ns, (int)len,
                                    pod + start, container);
    }
    return pfr_identity_fmt(out, outlen, "/k8s/%s/%s/%s", ns, pod, container);
}

int pfr_identity_swarm_id(const char *task_name, const char *stack_namespace, const char *service,
                          char *out, size_t outlen)
{
    /* the task name "<service>.<slot or node id>.<task id>": at least three parts */
    const char *d1 = task_name ? strchr(task_name, '.') : NULL;
    const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d2) {
        pfr_identity_copy(out, outlen, "");
        return 0;
    }
    const char *ns = stack_namespace ? stack_namespace : "";
    const char *svc = service ? service : "";
    size_t nl = strlen(ns);
    if (nl && strncmp(svc, ns, nl) == 0 && svc[nl] == '_')
        svc += nl + 1;
    int rc = pfr_identity_fmt(out, outlen, "/swarm/%s/%s/%.*s", nl ? ns : "_", svc,
                              (int)(d2 - d1 - 1), d1 + 1);
    return rc ? rc : 1;
}

int pfr_identity_nomad_id(const char *alloc_id, const char *group, const char *job, const char *ns,
                          const char *task, char *out, size_t outlen)
{
    const char *parts[] = {alloc_id, group, job, ns, task};
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        if (!parts[i] || !*parts[i]) {
            pfr_identity_copy(out, outlen, "");
            return 0;
        }
    }
    int rc = pfr_identity_fmt(out, outlen, "/nomad/%s/%s/%s/%s/%s", ns, job, group, alloc_id, task);
    return rc ? rc : 1;
}

/* ---- metadata fields ---- */

struct field {
    const char *key;
    size_t offset;
};

static const struct field label_fields[] = {
    {"io.kubernetes.pod.name", offsetof(struct id_meta, pod)},
    {"io.kubernetes.pod.namespace", offsetof(struct id_meta, ns)},
    {"io.kubernetes.container.name", offsetof(struct id_meta, container)},
    {"com.docker.swarm.task.name", offsetof(struct id_meta, swarm_task)},
    {"com.docker.stack.namespace", offsetof(struct id_meta, swarm_ns)},
    {"com.docker.swarm.service.name", offsetof(struct id_meta, swarm_service)},
};

static const struct field env_fields[] = {
    {"NOMAD_ALLOC_ID", offsetof(struct id_meta, nomad_alloc)},
    {"NOMAD_GROUP_NAME", offsetof(struct id_meta, nomad_group)},
    {"NOMAD_JOB_NAME", offsetof(struct id_meta, nomad_job)},
    {"NOMAD_NAMESPACE", offsetof(struct id_meta, nomad_ns)},
    {"NOMAD_TASK_NAME", offsetof(struct id_meta, nomad_task)},
};

static void set_field(struct id_meta *m, const struct field *f, size_t nf, const char *key,
                      size_t keylen, const char *value, size_t vlen)
{
    for (size_t i = 0; i < nf; i++) {
        if (strlen(f[i].key) != keylen || strncmp(f[i].key, key, keylen) != 0)
            continue;
        char *dst = (char *)m + f[i].offset;
        if (vlen >= ID_FIELD) {
            dst[0] = '\0';
            m->too_long = true;
            return;
        }
        memcpy(dst, value, vlen);
        dst[vlen] = '\0';
        return;
    }
}

void pfr_identity_meta_label(struct id_meta *m, const char *key, const char *value)
{
    set_field(m, label_fields, sizeof(label_fields) / sizeof(label_fields[0]), key, strlen(key),
              value, strlen(value));
}

void pfr_identity_meta_env_entry(struct id_meta *m, const char *entry, size_t len)
{
    const char *eq = memchr(entry, '=', len);
    if (!eq)
        return;
    size_t kl = (size_t)(eq - entry);
    set_field(m, env_fields, sizeof(env_fields) / sizeof(env_fields[0]), entry, kl, eq + 1,
              len - kl - 1);
}

void pfr_identity_meta_environ(struct id_meta *m, const char *buf, size_t len)
{
    struct id_split sp = {buf, buf + len, false};
    const char *entry;
    size_t n;
    while (pfr_identity_split_next(&sp, '\0', &entry, &n))
        pfr_identity_meta_env_entry(m, entry, n);
}

int pfr_identity_calc(const struct id_meta *m, int64_t now_unix_s, char *out, size_t outlen)
{
    if (m->too_long) {
        pfr_identity_copy(out, outlen, "");
        return -ENAMETOOLONG;
    }
    if (m->pod[0])
        return pfr_identity_k8s_id(m->ns, m->pod, m->container, now_unix_s, out, outlen);
    int rc = pfr_identity_swarm_id(m->swarm_task, m->swarm_ns, m->swarm_service, out, outlen);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    rc = pfr_identity_nomad_id(m->nomad_alloc, m->nomad_group, m->nomad_job, m->nomad_ns,
                               m->nomad_task, out, outlen);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if (!m->name[0])
        return pfr_identity_copy(out, outlen, "");
    return pfr_identity_fmt(out, outlen, "/docker/%s", m->name);
}
