/*
 * Internal interfaces of pfr_identity shared between its files (see pfr_identity.h).
 * Names: id_* for functions, struct id_* for types; nothing here is part of the public API.
 */
#ifndef PFR_ID_INTERNAL_H
#define PFR_ID_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_identity.h"

/* ---- id_text.c: small string helpers ---- */

/* Go's path.Clean of s[0..n) into out (room for n + 2 bytes); "" stays "" (path.Join("", s)). */
void pfr_identity_path_clean(const char *s, size_t n, char *out);
/* snprintf into out; -ENAMETOOLONG (and out "") if it did not fit. */
int pfr_identity_fmt(char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copy s into out; -ENAMETOOLONG (and out "") if it does not fit. NULL copies "". */
int pfr_identity_copy(char *out, size_t outlen, const char *s);
/* Go's strings.Split as an iterator: every piece of [p, end) between seps, including empty
 * ones (an empty text is one empty piece). */
struct id_split {
    const char *p, *end;
    bool done;
};
/* The next piece (start, length); false when there are no more. */
bool pfr_identity_split_next(struct id_split *s, char sep, const char **piece, size_t *n);
/* [a-z0-9]: the class of the agent's 64-character runtime id. */
bool pfr_identity_is_rid_char(char c);
/* Length of the run of [a-z0-9] characters at s. */
size_t pfr_identity_rid_run(const char *s);

/* ---- metadata of a runtime container (id_compose.c) ---- */

#define ID_FIELD PFR_IDENTITY_ID_MAX

/* What Docker's inspect, a pod list or an OCI config tells about a container. */
struct id_meta {
    char name[ID_FIELD];          /* Docker's container name without the leading '/' */
    char pod[ID_FIELD];           /* io.kubernetes.pod.name */
    char ns[ID_FIELD];            /* io.kubernetes.pod.namespace */
    char container[ID_FIELD];     /* io.kubernetes.container.name */
    char swarm_task[ID_FIELD];    /* com.docker.swarm.task.name */
    char swarm_ns[ID_FIELD];      /* com.docker.stack.namespace */
    char swarm_service[ID_FIELD]; /* com.docker.swarm.service.name */
    char nomad_alloc[ID_FIELD];   /* NOMAD_ALLOC_ID */
    char nomad_group[ID_FIELD];   /* NOMAD_GROUP_NAME */
    char nomad_job[ID_FIELD];     /* NOMAD_JOB_NAME */
    char nomad_ns[ID_FIELD];      /* NOMAD_NAMESPACE */
    char nomad_task[ID_FIELD];    /* NOMAD_TASK_NAME */
    bool too_long;                /* a value of interest did not fit: no id can be made */
};

/* Store a label's value into its field of m if it is one of interest; a value that does not fit
 * sets m->too_long. */
void pfr_identity_meta_label(struct id_meta *m, const char *key, const char *value);
/* "KEY=VALUE" entries (Docker's Config.Env, /proc/PID/environ): the NOMAD_* ones, likewise. */
void pfr_identity_meta_env_entry(struct id_meta *m, const char *entry, size_t len);
/* The NUL-separated entries of an environ file. */
void pfr_identity_meta_environ(struct id_meta *m, const char *buf, size_t len);

/* The node agent's calcId for a runtime container: Kubernetes labels, then a Swarm task, then
 * Nomad's env, then Docker's name. Writes "" when the container has no id. (The agent's
 * "sandbox" name for a gVisor sandbox is set in m->container by the caller, id_worker.c.)
 * @return 0 or -ENAMETOOLONG (out ""). */
int pfr_identity_calc(const struct id_meta *m, int64_t now_unix_s, char *out, size_t outlen);

/* ---- id_json.c: jansson helpers ---- */

struct json_t;
/* Parse a whole JSON document; NULL with "<what>: <reason> (line N)" in err. The caller owns
 * the result (json_decref). */
struct json_t *pfr_identity_json_load(const char *json, size_t len, const char *what, char *err,
                                      size_t errlen);
/* obj[key] if obj is an object and that is a string, else NULL. */
const char *pfr_identity_json_str(struct json_t *obj, const char *key);

/* ---- id_docker_json.c: Docker inspect / config.v2.json ---- */

/* Parse Name, Config.Labels and Config.Env. -EBADMSG (reason in err) for anything that is not
 * a JSON object or whose fields have the wrong types. */
int pfr_identity_docker_parse(const char *json, size_t len, struct id_meta *m, char *err,
                              size_t errlen);

/* ---- id_oci.c: the OCI config.json a CRI runtime writes ---- */

/* Fill pod, ns and container from the annotations of containerd's CRI plugin
 * (io.kubernetes.cri.*) or CRI-O (io.kubernetes.cri-o.Labels, a JSON string); a pod sandbox
 * gets an empty container name (no id). 1 = the annotations name a pod, 0 = they do not,
 * -EBADMSG = not an OCI config. */
int pfr_identity_oci_parse(const char *json, size_t len, struct id_meta *m, char *err,
                           size_t errlen);

/* ---- id_pods.c: the pod list, indexed by runtime id ---- */

struct id_pod_entry {
    char rid[PFR_IDENTITY_RUNTIME_ID_LEN + 1];
    const char *ns, *pod, *container; /* into the index's arena */
};

struct id_pod_index {
    struct id_pod_entry *v; /* sorted by rid */
    size_t n;
    char *arena; /* every string of v */
};

/* Index status.{containerStatuses,initContainerStatuses,ephemeralContainerStatuses}[].
 * containerID ("<runtime>://<64 [a-z0-9]>") of every pod of a PodList. Entries without an id or
 * with a malformed one are skipped. On error (-EBADMSG: not a pod list; -ENOMEM) *out is empty. */
int pfr_identity_pods_parse(const char *json, size_t len, struct id_pod_index *out, char *err,
                            size_t errlen);
/* The entry of runtime id rid, or NULL. */
const struct id_pod_entry *pfr_identity_pods_find(const struct id_pod_index *ix, const char *rid);
void pfr_identity_pods_free(struct id_pod_index *ix);

/* ---- id_http.c: one bounded GET with libcurl ---- */

struct id_http_req {
    const char *url;
    const char *unix_socket; /* connect here instead of the URL's host; NULL = TCP */
    const char *bearer;      /* "Authorization: Bearer ..."; NULL = none */
    const char *ca_file;     /* NULL = system store */
    bool insecure;
    int64_t timeout_ms; /* whole transfer; the connect gets half */
    size_t max_body;
    const atomic_bool *stop; /* abort when it becomes true; NULL = never */
};

/* GET rq->url. 0 with *body (malloc'd, NUL-terminated, owned by the caller) and *len on HTTP
 * 200; otherwise *body is NULL and: -ENOENT (HTTP 404), -EPROTO (another status), -ETIMEDOUT,
 * -EFBIG (body over max_body), -ECANCELED (stop), -ENOTCONN (no connection: no socket, EACCES,
 * refused; err names the system error) or -EIO, with a reason in err. */
int pfr_identity_http_get(const struct id_http_req *rq, char **body, size_t *len, char *err,
                          size_t errlen);

/* ---- id_file.c ---- */

/* Read a whole file of at most max bytes into a malloc'd NUL-terminated buffer owned by the
 * caller. -EFBIG if larger, -errno if it cannot be read. */
int pfr_identity_read_file(const char *path, size_t max, char **out, size_t *len);

/* ---- id_cache.c: cgroup path -> entry, bounded, least recently used first out ---- */

struct id_entry {
    char *key; /* the cgroup path as looked up (owned) */
    uint64_t hash;
    struct id_entry *hnext;       /* hash chain */
    struct id_entry *prev, *next; /* recency list, most recent first */
    struct id_entry *qnext;       /* work queue link */
    pfr_identity_cgroup cg;       /* the classification */
    char *container_id, *service; /* RESOLVED: owned strings; else NULL */
    enum pfr_identity_state state;
    bool queued;         /* in the work queue or being worked on: not evictable */
    int pid;             /* the latest non-zero pid looked up with it */
    int checked_pid;     /* SANDBOX: the last pid whose command line named no gVisor sandbox */
    unsigned attempts;   /* failed metadata attempts so far */
    int64_t next_try_ns; /* PENDING/FAILED: when to queue again (CLOCK_MONOTONIC) */
};

struct id_cache {
    struct id_entry **buckets;
    size_t nbuckets, n, max;
    struct id_entry *head, *tail; /* recency list */
};

int pfr_identity_cache_init(struct id_cache *c, size_t max);
void pfr_identity_cache_free(struct id_cache *c);
/* The entry of key (moved to the front of the recency list), or NULL. */
struct id_entry *pfr_identity_cache_get(struct id_cache *c, const char *key);
/* Add a new entry for key (not present), evicting the least recently used entries that are not
 * queued while the cache is full. *evicted counts them. NULL on ENOMEM. */
struct id_entry *pfr_identity_cache_add(struct id_cache *c, const char *key, uint64_t *evicted);
/* Set an entry's RESOLVED strings (NULL ids clear them). -ENOMEM leaves them cleared. */
int pfr_identity_entry_set_ids(struct id_entry *e, const char *container_id, const char *service);

#endif
