/*
 * pfr_identity: the Coroot identity of a cgroup, i.e. the "container id" and the service name
 * Coroot's node agent would give the processes of that cgroup, so that pfr's profiles land on
 * the same application in Coroot (service.name = service, container.id = container_id).
 *
 * Two tiers:
 *   - pure functions (no I/O, no allocation, any thread): classify a cgroup path, turn a
 *     container id into a service name, build Kubernetes / Swarm / Nomad ids, pick the cgroup
 *     path of a process from the text of /proc/PID/cgroup;
 *   - the resolver, an opaque pfr_identity created by pfr_identity_new() and destroyed by
 *     pfr_identity_free(), that adds the metadata a path alone does not give (a Docker
 *     container's name and labels, a Kubernetes container's pod and namespace) and caches the
 *     answer per cgroup path.
 *
 * The rules are those of coroot-node-agent (cgroup/cgroup.go containerByCgroup, containers/
 * registry.go calcId) and of Coroot (model/container.go ContainerIdToServiceName), including
 * their edge cases; where they differ from a plain reading of Coroot's docs the code follows
 * what they do:
 *   - LXC cgroups are recognised (kind LXC) but get no container id: the agent ignores them.
 *   - a CronJob's id /k8s-cronjob/<ns>/<job>/<container> is its own service name: Coroot's
 *     ContainerIdToServiceName only rewrites ids that start with "/k8s/".
 *   - a pod-level cgroup of kubepods (no runtime id), crio-conmon, a pause container ("POD" or
 *     no container name) and a Docker container without a name have no id; but a pod-level
 *     cgroup whose process is a gVisor sandbox (runsc, its id on its command line) is
 *     "/k8s/<ns>/<pod>/sandbox", from the runtime's metadata of that id.
 *   - podman / containerd containers outside Kubernetes have no id (the agent does not know them).
 *
 * Metadata sources of the resolver (all optional; each used only for the cgroups that need it):
 *   - Docker: GET /containers/<id>/json (unversioned, so any dockerd answers with its own API
 *     version) on the unix socket; when the socket cannot be used (EACCES for an unprivileged
 *     recorder, dockerd down) <docker root>/containers/<id>/config.v2.json, which holds the same
 *     Name and Config (readable with CAP_DAC_READ_SEARCH).
 *   - Kubernetes: the pod list of the kubelet (GET <kubelet_url>/pods) or of the API server (GET
 *     <apiserver_url>/api/v1/pods?fieldSelector=spec.nodeName=<node>), or a file; it maps the
 *     runtime id of every container status to (namespace, pod, container). Fetched by the pod
 *     list's client (pfr_k8s_pods.h, which pprof discovery may share) at start, every
 *     k8s.refresh_ms, and when a runtime id is missing (at most every k8s.min_refresh_ms).
 *   - the OCI config a CRI runtime writes for every container (containerd:
 *     <containerd_root>/io.containerd.runtime.v2.task/k8s.io/<id>/config.json; CRI-O:
 *     <crio_root>/overlay-containers/<id>/userdata/config.json): their annotations name the pod,
 *     namespace and container, and mark pod sandboxes.
 *   - Nomad: the NOMAD_* variables of Docker's Config.Env, or, when Docker's metadata cannot be
 *     had at all, of <proc_root>/<pid>/environ of the pid given to the lookup.
 *
 * Errors: functions return 0 or a negative errno; those taking err/errlen write a reason there.
 * The library never logs; the last metadata error is in the stats.
 *
 * Threading: the pure functions are reentrant. A pfr_identity may be used from any number of
 * threads at once; pfr_identity_lookup never waits on I/O (only on a mutex held for
 * in-memory work): a cgroup whose metadata is not known yet is answered PENDING and queued for
 * the resolver's own thread, which does all HTTP and file reads with short timeouts.
 *
 * libcurl: pfr_identity_new calls curl_global_init(); a program that starts threads of its own
 * before creating the resolver should call curl_global_init() itself first.
 */
#ifndef PFR_IDENTITY_H
#define PFR_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_k8s_pods.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room for a container id or service name with its NUL; longer ids are treated as no id. */
#define PFR_IDENTITY_ID_MAX 512
/* A runtime (Docker, containerd, CRI-O) container id: 64 characters [a-z0-9], plus NUL. */
#define PFR_IDENTITY_RUNTIME_ID_LEN 64

/* ---- Pure tier ---- */

/* What a cgroup path is, as the node agent classifies it. */
enum pfr_identity_kind {
    PFR_IDENTITY_KIND_PLAIN = 0,  /* a plain process: /user.slice, /init.scope, a .scope, "/" */
    PFR_IDENTITY_KIND_UNKNOWN,    /* a path the agent does not recognise (it skips it) */
    PFR_IDENTITY_KIND_SYSTEMD,    /* a systemd service or slice: id from the path */
    PFR_IDENTITY_KIND_TALOS,      /* a Talos system service: id from the path */
    PFR_IDENTITY_KIND_DOCKER,     /* a 64-char id seen as Docker's (also bare ids in kubepods) */
    PFR_IDENTITY_KIND_CRIO,       /* crio-<id> in kubepods */
    PFR_IDENTITY_KIND_CONTAINERD, /* cri-containerd-<id> / cri-containerd:<id> in kubepods */
    PFR_IDENTITY_KIND_SANDBOX,    /* a kubepods cgroup without a container id (a pod's own;
                                     a gVisor sandbox's, named by its process's command line) */
    PFR_IDENTITY_KIND_LXC,        /* an LXC container: recognised, but Coroot gives it no id */
};
/* "plain", "unknown", "systemd", "talos", "docker", "crio", "containerd", "sandbox", "lxc". */
const char *pfr_identity_kind_name(enum pfr_identity_kind k);

typedef struct pfr_identity_cgroup {
    enum pfr_identity_kind kind;
    bool kubepods;                                    /* the path contains "kubepods" */
    char runtime_id[PFR_IDENTITY_RUNTIME_ID_LEN + 1]; /* DOCKER, CRIO, CONTAINERD; else "" */
    /* SYSTEMD, TALOS: the Coroot container id (final). LXC: "/lxc/<name>" (informational, not
     * an id Coroot uses). Otherwise "". */
    char id[PFR_IDENTITY_ID_MAX];
} pfr_identity_cgroup;

/* Classify a cgroup path: the v2 path, or the v1 one pfr_identity_cgroup_from_proc picks. The
 * path is first cleaned as Go's path.Clean does (duplicate slashes, ".", ".."). Paths ending in
 * "(deleted)" are PLAIN. Never fails: anything unrecognised is UNKNOWN. */
void pfr_identity_classify(const char *cgroup, pfr_identity_cgroup *out);

/* The cgroup path of a process from the text of /proc/PID/cgroup, as the node agent picks it:
 * a v1 cpu or memory path under /kubepods first, then the v2 ("0::") path, then v1 cpu,
 * memory, name=systemd; "/" and "/init.scope" are ignored; "/lxc.payload.X/..." counts as
 * "/lxc.payload.X". Writes "" when none is left (a plain process).
 * @return 0, or -ENAMETOOLONG if the chosen path does not fit in outlen (out is then ""). */
int pfr_identity_cgroup_from_proc(const char *text, size_t len, char *out, size_t outlen);

/* Whether the text of /proc/PID/cgroup has a line of a cgroup v1 hierarchy (a controller or a
 * name listed). Without one (a cgroup v2 only host) the process's v2 cgroup alone decides what
 * pfr_identity_cgroup_from_proc picks; with one, its v1 cgroups may (the v2 path "/" or
 * "/init.scope" is passed over for them, and a v1 cpu or memory path under /kubepods wins). */
bool pfr_identity_proc_has_v1(const char *text, size_t len);

/* Coroot's service name of a container id (ContainerIdToServiceName): for /k8s/<ns>/<pod>/<c>
 * whose pod is a Deployment's (<name>-<1-10 hex>-<5 of bcdfghjklmnpqrstvwxz2456789>), a
 * DaemonSet's (<name>-<5 of those>) or a StatefulSet's (<name>-<digits>), "/k8s/<ns>/<name>";
 * every other id is its own service name.
 * @return 0, or -ENAMETOOLONG if it does not fit (out is then ""). */
int pfr_identity_service_name(const char *container_id, char *out, size_t outlen);

/* Coroot's instance of a container outside Kubernetes (coroot constructor/containers.go): the
 * application's namespace and the instance's name, which Coroot's per-instance view compares
 * with the `namespace` and `pod` labels of pulled (go:*) profiles. node is the node's name (the
 * host name the node agent reports).
 *   /k8s-cronjob/<ns>/<job>/<c>                 <ns>  <job>@<node>
 *   /nomad/<ns>/<job>/<group>/<alloc>/<task>    <ns>  <group>-<alloc>
 *   /swarm/<ns>/<service>/<slot>                <ns>  <service>.<slot>
 *   any other id (Docker, systemd units, ...)   _     <last element, less ".service", then
 *                                                      ".slice">@<node>
 * An empty <ns> is "_".
 * @return 1 written; 0 (ns and pod "") for a pod's id (/k8s/<ns>/<pod>/<c>, whose instance is
 * the pod), an id not starting with '/', or a missing node where the name needs one;
 * -ENAMETOOLONG (ns and pod ""). */
int pfr_identity_coroot_instance(const char *container_id, const char *node, char *ns, size_t nslen,
                                 char *pod, size_t podlen);

/* The id of a Kubernetes container: "/k8s/<ns>/<pod>/<container>", or
 * "/k8s-cronjob/<ns>/<cronjob>/<container>" for a CronJob's pod (<cronjob>-<8 digits: scheduled
 * minute since the epoch>-<5 chars>) scheduled within 7 days of now_unix_s; "" for a pause
 * container (container "" or "POD"). pod must be non-empty.
 * @return 0, -EINVAL if pod is empty, -ENAMETOOLONG if it does not fit (out is then ""). */
int pfr_identity_k8s_id(const char *ns, const char *pod, const char *container, int64_t now_unix_s,
                        char *out, size_t outlen);

/* The id of a Docker Swarm task from its labels: com.docker.swarm.task.name ("a.b.c": at least
 * two dots), com.docker.stack.namespace (may be NULL/""), com.docker.swarm.service.name:
 * "/swarm/<namespace or _>/<service without "<namespace>_">/<b>".
 * @return 1 written, 0 the labels make no Swarm task (out ""), -ENAMETOOLONG. */
int pfr_identity_swarm_id(const char *task_name, const char *stack_namespace, const char *service,
                          char *out, size_t outlen);

/* The id of a Nomad task: "/nomad/<namespace>/<job>/<group>/<alloc id>/<task>".
 * @return 1 written, 0 if any part is NULL or empty (out ""), -ENAMETOOLONG. */
int pfr_identity_nomad_id(const char *alloc_id, const char *group, const char *job, const char *ns,
                          const char *task, char *out, size_t outlen);

/* ---- Consent, gVisor sandboxes, system services (pure but for the two reads named) ---- */

/* A process opts out of profiling when its environment has COROOT_EBPF_PROFILING (the node
 * agent's variable) or PFR_PROFILING whose value contains "disabled", as the agent reads it
 * (proc/flags.go): NUL-ended "KEY=VALUE" entries, a last entry without its NUL ignored, the
 * last entry of a key deciding. Read as a stream: feed any pieces of the text in order. */
#define PFR_CONSENT_KEYS 2
typedef struct pfr_identity_consent {
    unsigned char state, key, cand; /* where in an entry; the key of its value; candidates */
    size_t kpos, dpos;              /* characters of the key / of "disabled" matched */
    bool off[PFR_CONSENT_KEYS];     /* per key: its last whole value contains "disabled" */
} pfr_identity_consent;
void pfr_identity_consent_init(pfr_identity_consent *c);
void pfr_identity_consent_feed(pfr_identity_consent *c, const char *buf, size_t len);
bool pfr_identity_consent_refused(const pfr_identity_consent *c);
/* The same over one whole text. */
bool pfr_identity_environ_opts_out(const char *buf, size_t len);
/* Read at most max bytes of <proc_root>/<pid>/environ (proc_root NULL = /proc) through a 4 KiB
 * buffer and say whether the process opts out (false when unreadable). A variable past max is
 * not seen. @return 0 or a negative errno (open or read). */
int pfr_identity_consent_read(const char *proc_root, int pid, size_t max, bool *opted_out);
/* What the recorder reads of an environment at most: Linux allows a few MiB (a quarter of the
 * stack limit), a Kubernetes pod's service variables take tens of KiB, most take a few. */
#define PFR_CONSENT_ENVIRON_MAX (1u << 20)

/* The runtime id of a gVisor sandbox from the text of its process's /proc/PID/cmdline (the
 * node agent's registry.go, for a kubepods cgroup without a container id): with one trailing
 * NUL dropped and split at NULs, the first argument ends with "runsc-sandbox" or "runsc" and
 * the last one is the id. The agent takes any last argument holding 64 [a-z0-9] and asks its
 * runtime about it, which knows only exact ids: here the last argument must be exactly that.
 * @return true with rid (PFR_IDENTITY_RUNTIME_ID_LEN + 1 bytes) written, or false. */
bool pfr_identity_gvisor_rid(const char *cmdline, size_t len, char *rid);
/* The container name the agent gives a gVisor sandbox: "/k8s/<ns>/<pod>/sandbox". */
#define PFR_IDENTITY_SANDBOX_NAME "sandbox"

/* ---- The resolver ---- */

typedef struct pfr_identity pfr_identity;

/* Defaults for the zero fields of pfr_identity_opts. */
#define PFR_IDENTITY_DEFAULT_DOCKER_SOCKET   "/var/run/docker.sock"
#define PFR_IDENTITY_DEFAULT_DOCKER_ROOT     "/var/lib/docker"
#define PFR_IDENTITY_DEFAULT_CONTAINERD_ROOT "/run/containerd"
#define PFR_IDENTITY_DEFAULT_CRIO_ROOT       "/var/lib/containers/storage"
#define PFR_IDENTITY_DEFAULT_CACHE_MAX       4096

typedef struct pfr_identity_opts {
    const char *docker_socket;   /* NULL = /var/run/docker.sock; "" = do not use the socket */
    const char *docker_root;     /* NULL = /var/lib/docker; "" = no on-disk fallback */
    const char *containerd_root; /* NULL = /run/containerd; "" = no containerd OCI configs */
    const char *crio_root;       /* NULL = /var/lib/containers/storage; "" = no CRI-O configs */
    /* Kubernetes pod list: a client lent (pfr_k8s_pods.h; not started yet: the resolver
     * subscribes to its fetches), or, when NULL, a client of the resolver's own made from k8s
     * when k8s names a list (pfr_k8s_pods_configured); neither = no pod list. */
    struct pfr_k8s_pods *pods;
    pfr_k8s_pods_opts k8s; /* k8s.min_refresh_ms also: a missing runtime id asks a list this
                              fresh (0 = 5000), whichever client */
    const char *proc_root; /* NULL = /proc (Nomad's environ fallback) */
    size_t cache_max;      /* cgroup paths cached; 0 = 4096 (least recently used go first) */
    /* Timing; 0 = the default given. */
    int64_t retry_min_ms;      /* first retry of a failed lookup: 1000; doubles up to ... */
    int64_t retry_max_ms;      /* ... 60000 */
    int64_t docker_timeout_ms; /* a Docker inspect: 2000 (connect: half of it) */
} pfr_identity_opts;

enum pfr_identity_state {
    PFR_IDENTITY_NONE = 0, /* no container or unit: Coroot has no id for this cgroup */
    PFR_IDENTITY_RESOLVED, /* container_id and service are set */
    PFR_IDENTITY_PENDING,  /* metadata needed and being fetched (the first few attempts) */
    PFR_IDENTITY_FAILED,   /* metadata could not be had yet; retried with backoff */
};
/* "none", "resolved", "pending", "failed". */
const char *pfr_identity_state_name(enum pfr_identity_state s);

typedef struct pfr_identity_result {
    char container_id[PFR_IDENTITY_ID_MAX];           /* Coroot container id; "" unless RESOLVED */
    char service[PFR_IDENTITY_ID_MAX];                /* Coroot service name; "" unless RESOLVED */
    char runtime_id[PFR_IDENTITY_RUNTIME_ID_LEN + 1]; /* "" if the cgroup names none */
    enum pfr_identity_kind kind;
    enum pfr_identity_state state;
} pfr_identity_result;

/* Create a resolver and start its thread (the first pod list fetch starts at once). o may be
 * NULL (all defaults); the strings of o are copied. err may be NULL if errlen is 0.
 * @return 0 and *out (free with pfr_identity_free), -EINVAL for bad options (reason in err), or
 * -ENOMEM / another errno from thread creation. */
int pfr_identity_new(const pfr_identity_opts *o, pfr_identity **out, char *err, size_t errlen);

/* The identity of a cgroup path (as for pfr_identity_classify). pid (0 = unknown) is a process
 * of that cgroup, used only for Nomad's environ fallback. Never blocks on I/O. */
void pfr_identity_lookup(pfr_identity *id, const char *cgroup, int pid, pfr_identity_result *out);

typedef struct pfr_identity_stats {
    uint64_t lookups;           /* pfr_identity_lookup calls */
    uint64_t cache_hits;        /* ... answered from a cached entry */
    uint64_t evictions;         /* entries dropped for room */
    uint64_t queue_full;        /* lookups that could not be queued (retried at a later lookup) */
    uint64_t docker_fetches;    /* inspect calls on the socket */
    uint64_t docker_failures;   /* ... that failed (incl. 404) */
    uint64_t docker_disk_reads; /* config.v2.json reads */
    uint64_t docker_disk_failures; /* ... that failed */
    uint64_t oci_reads;      /* containerd / CRI-O OCI config reads that found the container */
    uint64_t environ_reads;  /* Nomad environ reads */
    uint64_t k8s_fetches;    /* pod list fetches */
    uint64_t k8s_failures;   /* ... that failed (the previous list is kept) */
    uint64_t k8s_containers; /* runtime ids in the current pod list */
    size_t entries;          /* cached cgroup paths, by state: */
    size_t resolved, none, pending, failed;
    char last_error[256]; /* the latest metadata error, "" if none */
} pfr_identity_stats;

/* A snapshot of the counters (any thread). */
void pfr_identity_get_stats(pfr_identity *id, pfr_identity_stats *out);

/* Stop the resolver's thread (an HTTP transfer in flight is aborted within about a second),
 * join it and free everything. No lookup may run during or after it. NULL is a no-op. */
void pfr_identity_free(pfr_identity *id);

#ifdef __cplusplus
}
#endif

#endif
