/*
 * service: which service a process belongs to, and its container id, in Coroot's form.
 *
 * Rule (first that applies wins):
 *   1. a configured rule: `rule = KIND PATTERN SERVICE` in the [service] section, KIND one of
 *      comm, exe, cgroup, container; PATTERN is a shell glob (fnmatch) on the process's comm, its
 *      executable path, its cgroup v2 path or its container id (the runtime's 64-hex id or the
 *      Coroot container id, either matches); the container id stays as rule 3 finds it;
 *   2. a kernel thread: "kernel";
 *   3. the Coroot identity of its cgroup (recorder/identity): container.id = the Coroot
 *      container id ("/system.slice/nginx.service", "/docker/web", "/k8s/ns/pod/container"),
 *      service.name = Coroot's service name for it ("/k8s/ns/deployment" for a Deployment's pod);
 *   4. a container whose metadata is not had yet: the runtime's id shortened to 12 characters,
 *      as `docker ps` shows it, and no container id;
 *   5. a systemd unit Coroot does not name (a user unit): the unit's name without ".service";
 *   6. the executable's base name (/usr/sbin/nginx gives "nginx"), or the comm when the
 *      executable cannot be read.
 */
#ifndef PFR_RECORDER_SERVICE_H
#define PFR_RECORDER_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

/* Coroot container ids: "/k8s/<namespace>/<pod>/<container>" fits (63 + 253 + 63 + 7) */
#define PFR_CONTAINER_ID_MAX 399
/* A container runtime's id: 64 hex digits */
#define PFR_RUNTIME_ID_MAX 64

enum pfr_rule_kind { PFR_RULE_COMM, PFR_RULE_EXE, PFR_RULE_CGROUP, PFR_RULE_CONTAINER };

typedef struct pfr_service_rule {
    enum pfr_rule_kind kind;
    char *pattern;
    char *service;
} pfr_service_rule;

/* Owned rules array. */
typedef struct pfr_service_rules {
    pfr_service_rule *v;
    size_t n;
} pfr_service_rules;

/* What the rule looks at. Any string may be NULL or "" when unknown. */
typedef struct pfr_process_facts {
    const char *comm;
    const char *exe;    /* executable path */
    const char *cgroup; /* cgroup v2 path, e.g. "/system.slice/nginx.service" */
    bool kthread;
    /* The cgroup's Coroot identity (recorder/identity), NULL or "" when it has none (yet) */
    const char *coroot_id;
    const char *coroot_service;
} pfr_process_facts;

/* Parse "KIND PATTERN SERVICE" and append it to rules. -EINVAL with a reason on bad syntax. */
int pfr_service_rules_add(pfr_service_rules *rules, const char *text, char *err, size_t errlen);
void pfr_service_rules_free(pfr_service_rules *rules);
/* Deep copy (dst must be empty). */
int pfr_service_rules_copy(pfr_service_rules *dst, const pfr_service_rules *src);

/* The container runtime's id found in a cgroup path, written to id (PFR_RUNTIME_ID_MAX + 1
 * bytes); returns false (id = "") when the path is not a container's. */
bool pfr_container_id_from_cgroup(const char *cgroup, char *id);
/* Systemd service name from a cgroup path ("nginx" for ".../nginx.service"); false if none. */
bool pfr_systemd_unit_from_cgroup(const char *cgroup, char *unit, size_t unitlen);

/* Apply the rule above; writes the service name (never empty) and the Coroot container id ("" when
 * none; PFR_CONTAINER_ID_MAX + 1 bytes) into the caller's buffers. */
void pfr_service_name(const pfr_service_rules *rules, const pfr_process_facts *f, char *service,
                      size_t servicelen, char *container_id);

#endif
