/*
 * triggers: the recorder notices an incident by itself and asks for the profiles around it to
 * be kept. Each trigger turns an event into a pin request (a time window around the event, the
 * service it concerns, a reason naming the event) handed to the daemon's callback:
 *
 * - an OOM kill (the kernel's OOM killer, host or cgroup): the victim's service;
 * - a process that dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT (a handled signal is no
 *   death and no trigger);
 * - CPU or memory pressure (PSI "some avg10") of the host or of a cgroup holding processes,
 *   above a threshold for a while;
 * - a request from outside (POST /pin on the metrics listener, pfr_triggers_external).
 *
 * Requests of one service whose windows overlap are coalesced into one, which is handed over
 * once its window has ended (or at pfr_triggers_free); a service gets at most
 * max_pins_per_hour new requests an hour, the rest are counted as suppressed.
 *
 * Memory pressure of a cgroup (PSI, or its memory.events "high" count rising) also asks for its
 * processes' Go heap profiles at once (hooks.heap_wanted).
 *
 * Threads: one of its own ("pfr-triggers"), which reads the BPF ring buffer, the PSI files of
 * /proc/pressure and cgroupfs, and /proc/PID of the processes it names; the hooks are called on
 * it. pfr_triggers_external may be called from any thread (the metrics server's). Nothing here
 * runs on the daemon's main thread but new/free/stats.
 */
#ifndef PFR_TRIGGERS_H
#define PFR_TRIGGERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_identity.h"
#include "pfr_settings.h"
#include "process_info.h"
#include "service.h"

enum pfr_pin_kind {
    PFR_PIN_OOM_KILL = 0,
    PFR_PIN_FATAL_SIGNAL,
    PFR_PIN_PRESSURE_CPU,
    PFR_PIN_PRESSURE_MEMORY,
    PFR_PIN_EXTERNAL,
    PFR_PIN_NKINDS
};

/* A reason may be this long (bytes); an external one longer is refused */
#define PFR_PIN_REASON_MAX 1024
#define PFR_PIN_COMM_MAX   16

/* What a trigger asks to keep. Times are wall-clock (CLOCK_REALTIME) ns, [from_ns, to_ns]. */
typedef struct pfr_pin_request {
    int64_t from_ns, to_ns;
    char service[PFR_SERVICE_MAX];               /* "" = every service of the host */
    char container_id[PFR_CONTAINER_ID_MAX + 1]; /* "" = none */
    int32_t pid;                                 /* 0 = none */
    char comm[PFR_PIN_COMM_MAX];                 /* "" = none */
    enum pfr_pin_kind kind;                      /* of the first event */
    uint32_t events;                             /* events coalesced into it (>= 1) */
    char reason[PFR_PIN_REASON_MAX + 64];        /* the first event's, "(+N more events)" */
} pfr_pin_request;

/* "oom_kill", "fatal_signal", "pressure_cpu", "pressure_memory", "external" */
const char *pfr_pin_kind_name(enum pfr_pin_kind k);

/* Its settings ([triggers] section; rows in trig_settings.c). */
typedef struct pfr_triggers_config {
    int64_t before_ns, after_ns; /* the window around an event */
    int64_t max_window_ns;       /* a coalesced request never grows longer */
    bool oom, fatal_signal, pressure, pressure_cgroups, heap_on_memory_pressure;
    uint32_t cpu_percent, memory_percent; /* PSI some avg10 thresholds */
    int64_t cpu_for_ns, memory_for_ns;    /* ... held this long */
    int64_t pressure_poll_ns;             /* how often PSI is read */
    int64_t pressure_rearm_ns;            /* between two pressure events of one host/cgroup */
    int64_t heap_min_gap_ns;              /* between two heap requests of one cgroup */
    uint32_t max_pins_per_hour;           /* per service */
    bool pin_endpoint;                    /* POST /pin */
    bool pin_from_any_host;               /* POST /pin from non-loopback clients */
    char *cgroup_root; /* cgroup v2's mount; NULL: found in /proc/self/mountinfo */
} pfr_triggers_config;

/* The settings group (section "triggers"), bound to a pfr_triggers_config. */
extern const pfr_settings_group pfr_triggers_settings_group;

/* Whether any trigger is on. */
bool pfr_triggers_config_any(const pfr_triggers_config *c);

/* What the triggers call, on their own thread. */
typedef struct pfr_triggers_hooks {
    void *ctx;
    /* A request whose window has ended (or every pending one at free). */
    void (*pin)(void *ctx, const pfr_pin_request *req);
    /* A cgroup under memory pressure: its processes' Go heaps are wanted now. May be NULL. */
    void (*heap_wanted)(void *ctx, const char *cgroup, const int32_t *pids, size_t npids);
    /* An event, and what became of it (offer: enum pfr_trig_offer): for the daemon's log. Called
     * on the triggers' thread, or on pfr_triggers_external's caller's. May be NULL. */
    void (*fired)(void *ctx, const pfr_pin_request *req, int offer);
} pfr_triggers_hooks;

typedef struct pfr_triggers_env {
    const pfr_triggers_config *cfg;
    const pfr_service_rules *rules; /* copied */
    pfr_identity *identity;         /* NULL: cgroup paths alone; outlives the triggers */
    /* Where /proc is (tests point it elsewhere); NULL: "/proc" */
    const char *proc_root;
} pfr_triggers_env;

typedef struct pfr_triggers_stats {
    uint64_t fired[PFR_PIN_NKINDS];      /* events seen, by kind */
    uint64_t requested[PFR_PIN_NKINDS];  /* requests handed over, by kind */
    uint64_t coalesced[PFR_PIN_NKINDS];  /* events that extended a pending request */
    uint64_t suppressed[PFR_PIN_NKINDS]; /* new requests over the rate limit */
    uint64_t heap_requests;              /* hooks.heap_wanted calls */
    uint64_t bpf_lost;                   /* events the ring buffer had no room for */
    uint64_t cgroups_watched;            /* cgroups whose PSI is read */
    bool bpf_loaded;                     /* OOM / signal events are seen */
} pfr_triggers_stats;

typedef struct pfr_triggers pfr_triggers;

/* Start the triggers the settings ask for (BPF program, thread); *out is set before the thread
 * starts, so the hooks may use it. A BPF program that cannot be
 * loaded leaves OOM and signal triggers off (said in err, rc 0 and *warned set); other failures
 * return a negative errno with a reason in err. Owner: the caller, pfr_triggers_free. */
int pfr_triggers_new(const pfr_triggers_env *env, const pfr_triggers_hooks *hooks,
                     pfr_triggers **out, bool *warned, char *err, size_t errlen);

/* Stop the thread and hand every pending request over. NULL is fine. */
void pfr_triggers_free(pfr_triggers *t);

void pfr_triggers_stats_get(pfr_triggers *t, pfr_triggers_stats *st);

/* Replace the service rules (SIGHUP). */
int pfr_triggers_set_rules(pfr_triggers *t, const pfr_service_rules *rules);

enum pfr_trig_offer {
    PFR_TRIG_NEW = 0,       /* a new pending request */
    PFR_TRIG_EXTENDED = 1,  /* merged into a pending request of the service */
    PFR_TRIG_SUPPRESSED = 2 /* over the service's rate limit: dropped, counted */
};

/* A request from outside (any thread): kind is set to PFR_PIN_EXTERNAL. Returns an enum
 * pfr_trig_offer. */
int pfr_triggers_external(pfr_triggers *t, const pfr_pin_request *req);

/* ---- POST /pin ---- */

typedef struct pfr_pin_arg {
    const char *key, *value;
} pfr_pin_arg;

/* Parse the query of POST /pin into req: service=S (optional: "" = the whole host), reason=TEXT
 * (required, at most PFR_PIN_REASON_MAX bytes), and either from=T&to=T (the times of pfr_time.h:
 * unix seconds, RFC 3339, "-10m", ...) or before=D&after=D (durations around now_ns; each
 * defaults to cfg's window). Returns 0, or -EINVAL with a reason fit for a 400 reply in err. */
int pfr_pin_query_parse(const pfr_pin_arg *args, size_t nargs, int64_t now_ns,
                        const pfr_triggers_config *cfg, pfr_pin_request *req, char *err,
                        size_t errlen);

#endif
