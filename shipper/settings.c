/* settings: pfr-shipper's settings tables: the program's and every sink's. */
#include "settings.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "pfr_store.h"
#include "pfr_system_service.h"
#include "sinks/service_name.h"
#include "sinks/sinks.h"

/* ---- checks of single values (bounds and syntax are the rows') ---- */

static int check_url(const char *v, void *field, char *err, size_t errlen)
{
    (void)field;
    if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8)) {
        snprintf(err, errlen, "expected http://... or https://...");
        return -EINVAL;
    }
    return 0;
}

static int check_prefix(const char *v, void *field, char *err, size_t errlen)
{
    (void)field;
    if (!pfr_service_name_prefix_ok(v)) {
        snprintf(err, errlen, "at most %d bytes, no control characters",
                 PFR_SERVICE_NAME_PREFIX_MAX);
        return -EINVAL;
    }
    return 0;
}

static int check_prefixes(const char *v, void *field, char *err, size_t errlen)
{
    (void)field;
    return pfr_system_service_prefixes_check(v, err, errlen);
}

/* A secret given inline or as a flag: others can read the file or the command line. */
static int refuse_secret(const char *v, void *field, char *err, size_t errlen)
{
    (void)v, (void)field;
    snprintf(err, errlen,
             "secrets are not taken inline or on the command line (others can read them): use "
             "api_key_file / --api-key-file (a file), api_key_env (an environment variable) or "
             "PFR_SHIPPER_API_KEY");
    return -EINVAL;
}

static int parse_kind(const char *v, void *field, char *err, size_t errlen)
{
    if (!*v)
        return 0; /* PFR_SHIPPER_SINK= : not set */
    const pfr_sink_kind *k = pfr_sink_kind_find(v);
    if (!k) {
        char names[128];
        snprintf(err, errlen, "expected %s, got '%s'",
                 pfr_sink_kind_names(", ", " or ", names, sizeof(names)), v);
        return -EINVAL;
    }
    *(const pfr_sink_kind **)field = k;
    return 0;
}

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const ship_policies[] = {"agent", "all", NULL}; /* enum pfr_ship_policy */

#define P(field) PFR_SETTING_FIELD(pfr_shipper_conf, field)
#define MS       .unit_ns = 1000000

static const pfr_setting shipper_rows[] = {
    {.key = "store",
     .type = PFR_SET_STRING,
     P(store_path),
     .def = PFR_STORE_DEFAULT_PATH,
     .env = "PFR_SHIPPER_STORE,PFR_STORE",
     .metavar = "PATH",
     .help = "The ring, opened read-only (the shipper's user is in the ring's group)."},
    {.key = "state",
     .type = PFR_SET_STRING,
     P(state_path),
     .def = PFR_SHIPPER_DEFAULT_STATE,
     .metavar = "PATH",
     .sample = "/var/lib/pfr-shipper/state.db",
     .help = "The shipper's own state (cursors, set-aside chunks, counters); one daemon per "
             "state file (<state>.lock). The packaged shipper.ini sets "
             "/var/lib/pfr-shipper/state.db. A ring slice takes its state only from --state or "
             "PFR_SHIPPER_STATE (else $XDG_STATE_HOME/pfr/slice-<id>.db), and refuses a state "
             "file of a ring or of another slice."},
    {.key = "log_level",
     .type = PFR_SET_ENUM,
     P(log_level),
     .def = "info",
     .choices = log_levels,
     .metavar = "LEVEL",
     .help = "error, warn, info or debug."},
    {.key = "poll_interval",
     .type = PFR_SET_DURATION,
     P(poll_ms),
     MS,
     .def = "5s",
     .min = 0.01,
     .flag = "poll",
     .env = "",
     .metavar = "DURATION",
     .help = "How often an idle shipper looks at the ring for new chunks."},
    {.key = "deadline",
     .type = PFR_SET_DURATION,
     P(deadline_ms),
     MS,
     .def = "10m",
     .env = "",
     .metavar = "DURATION",
     .help = "--once and backfill: give up after this long (0 = never); the daemon never "
             "gives up."},
    {.key = "progress_interval",
     .type = PFR_SET_DURATION,
     P(progress_ms),
     MS,
     .def = "2s",
     .min = 0.1,
     .flag = "progress",
     .env = "",
     .metavar = "DURATION",
     .help = "Backfill: how often a progress line is logged."},
    {.key = "once",
     .type = PFR_SET_BOOL,
     P(once),
     .env = "",
     .flags = PFR_SETF_NO_FILE | PFR_SETF_NO_ARG,
     .help = "Ship what is there, then exit: 0 = all shipped; 75 = not all (deadline, signal); "
             "69 = a sink delivered nothing and its last answer was an error."},
    {.key = "retry_rejected",
     .type = PFR_SET_BOOL,
     P(retry_rejected),
     .env = "",
     .flags = PFR_SETF_NO_FILE | PFR_SETF_NO_ARG,
     .help = "First send again the chunks sinks set aside."},
    {.key = "sink",
     .type = PFR_SET_STRING,
     P(sink_flag),
     .env = "",
     .metavar = "NAME",
     .flags = PFR_SETF_NO_FILE,
     .help = "coroot or clickhouse: a sink from flags, named after its kind (its --url and "
             "--api-key-file are its own; other sink flags apply to every sink). With "
             "backfill: the name of the sink to send to."},
    {.key = "from",
     .type = PFR_SET_STRING,
     P(from_text),
     .env = "",
     .metavar = "TIME",
     .flags = PFR_SETF_NO_FILE,
     .def_doc = "of a slice: its range",
     .help = "Backfill: start of the range (now, -2h, @UNIX, 2024-05-01T10:00:00Z); required "
             "for a ring."},
    {.key = "to",
     .type = PFR_SET_STRING,
     P(to_text),
     .env = "",
     .metavar = "TIME",
     .flags = PFR_SETF_NO_FILE,
     .def_doc = "of a slice: its range",
     .help = "Backfill: end of the range; required for a ring."},
    {.key = "json",
     .type = PFR_SET_BOOL,
     P(json),
     .env = "",
     .flags = PFR_SETF_NO_FILE | PFR_SETF_NO_ARG,
     .help = "status as JSON."},
};

const pfr_settings_group pfr_shipper_settings = {
    .name = "shipper",
    .section = "shipper",
    .intro = "The program's keys. Any sink key may also be written in [shipper], as the "
             "default of every sink.",
    .rows = shipper_rows,
    .nrows = sizeof(shipper_rows) / sizeof(shipper_rows[0]),
};

#define S(field) PFR_SETTING_FIELD(pfr_sink_conf, field)

static const pfr_setting sink_rows[] = {
    {.key = "type",
     .type = PFR_SET_CUSTOM,
     S(kind),
     .parse = parse_kind,
     .flag = "",
     .env = "PFR_SHIPPER_SINK",
     .metavar = "KIND",
     .help = "The sink's kind: coroot or clickhouse (in [sink NAME] sections only)."},
    {.key = "url",
     .type = PFR_SET_STRING,
     S(url),
     .parse = check_url,
     .metavar = "URL",
     .example = "https://coroot.example.com",
     .help = "Base URL, http:// or https://."},
    {.key = "api_key_file",
     .type = PFR_SET_STRING,
     S(api_key_file),
     .metavar = "FILE",
     .example = "/run/credentials/pfr-shipper.service/pfr_coroot-api-key",
     .help = "Coroot API key / ClickHouse password: the first line of FILE (with the packaged "
             "unit: /etc/pfr/credentials/NAME, handed over by systemd as "
             "/run/credentials/pfr-shipper.service/pfr_NAME). Without it or api_key_env, the "
             "sink from flags takes the key itself from PFR_SHIPPER_API_KEY."},
    {.key = "password_file",
     .alias_of = "api_key_file",
     .type = PFR_SET_STRING,
     S(api_key_file),
     .env = "",
     .metavar = "FILE",
     .help = "The same as api_key_file."},
    {.key = "api_key_env",
     .type = PFR_SET_STRING,
     S(api_key_env),
     .flag = "",
     .env = "",
     .metavar = "NAME",
     .example = "PFR_COROOT_API_KEY",
     .help = "The name of an environment variable holding the secret."},
    {.key = "password_env",
     .alias_of = "api_key_env",
     .type = PFR_SET_STRING,
     S(api_key_env),
     .flag = "",
     .env = "",
     .metavar = "NAME",
     .help = "The same as api_key_env."},
    {.key = "api_key",
     .type = PFR_SET_CUSTOM,
     S(api_key),
     .parse = refuse_secret,
     .env = "",
     .flags = PFR_SETF_HIDDEN | PFR_SETF_SECRET,
     .help = "Refused: secrets go in files."},
    {.key = "password",
     .alias_of = "api_key",
     .type = PFR_SET_CUSTOM,
     S(api_key),
     .parse = refuse_secret,
     .env = "",
     .flags = PFR_SETF_HIDDEN | PFR_SETF_SECRET,
     .help = "Refused: secrets go in files."},
    {.key = "key",
     .alias_of = "api_key",
     .type = PFR_SET_CUSTOM,
     S(api_key),
     .parse = refuse_secret,
     .env = "",
     .flags = PFR_SETF_HIDDEN | PFR_SETF_SECRET,
     .help = "Refused: secrets go in files."},
    {.key = "service_prefix",
     .type = PFR_SET_STRING,
     S(service_prefix),
     .parse = check_prefix,
     .env = "",
     .metavar = "PREFIX",
     .help = "Put PREFIX before every chunk's service name as shipped (site1- + /k8s/ns/app); "
             "at most 128 bytes, no control characters."},
    {.key = "ship",
     .type = PFR_SET_ENUM,
     S(ship),
     .def = "agent",
     .choices = ship_policies,
     .env = "",
     .metavar = "POLICY",
     .help = "Which chunks go: agent = what Coroot's node agent would send (chunks with a Coroot "
             "container id, the recorder's container.id label, and, with "
             "skip_system_services, not of a systemd system service); all = every chunk. The "
             "chunks left out are passed over for good (the cursor moves on) and counted "
             "(status: passed over; skipped_chunks in --json); the ring keeps them."},
    {.key = "skip_system_services",
     .type = PFR_SET_BOOL,
     S(skip_system_services),
     .def = "true",
     .env = "",
     .metavar = "BOOL",
     .help = "ship = agent: leave out systemd system services as the node agent's flag "
             "skip-systemd-system-services does: units whose name starts with one of "
             "system_service_prefixes, whose Type is oneshot or dbus, or which an enabled timer "
             "triggers (the unit is the one the chunk's container id names: a templated unit's "
             "sub-slice, system-getty.slice; Type and timers are read from the unit files under "
             "systemd_root, again every 5 minutes)."},
    {.key = "system_service_prefixes",
     .type = PFR_SET_STRING,
     S(system_service_prefixes),
     .def = PFR_SYSTEM_SERVICE_PREFIXES,
     .parse = check_prefixes,
     .flag = "",
     .env = "",
     .metavar = "LIST",
     .help = "Unit name prefixes of system services, comma-separated (the default is the node "
             "agent's list)."},
    {.key = "systemd_root",
     .type = PFR_SET_STRING,
     S(systemd_root),
     .def = "/",
     .env = "",
     .metavar = "DIR",
     .help = "skip_system_services: the directory under which systemd's unit files are read "
             "(/etc/systemd/system, /lib/systemd/system, ...; their links resolve inside it): "
             "/ on the host; the host's root as mounted in a container (/host)."},
    {.key = "batch_chunks",
     .type = PFR_SET_COUNT,
     S(batch.max_chunks),
     .def = "100",
     .min = 1,
     .max = 1000000,
     .env = "",
     .metavar = "N",
     .def_doc = "coroot 100, clickhouse 2000",
     .help = "Chunks per batch."},
    {.key = "batch_bytes",
     .type = PFR_SET_SIZE,
     S(batch.max_bytes),
     .def = "16M",
     .env = "",
     .metavar = "SIZE",
     .def_doc = "coroot 16M, clickhouse 64M",
     .help = "Request bytes per batch (estimated from the ring's stored sizes): a ClickHouse "
             "insert's size, not memory."},
    {.key = "batch_age",
     .type = PFR_SET_DURATION,
     S(batch.max_age_ms),
     MS,
     .def = "10s",
     .env = "",
     .metavar = "DURATION",
     .help = "Send a partial batch once its oldest chunk is this old."},
    {.key = "backoff_initial",
     .type = PFR_SET_DURATION,
     S(backoff.initial_ms),
     MS,
     .def = "1s",
     .min = 0.001,
     .env = "",
     .metavar = "DURATION",
     .help = "First retry delay."},
    {.key = "backoff_max",
     .type = PFR_SET_DURATION,
     S(backoff.max_ms),
     MS,
     .def = "5m",
     .min = 0.001,
     .env = "",
     .metavar = "DURATION",
     .help = "Retry delay cap, also for Retry-After."},
    {.key = "connect_timeout",
     .type = PFR_SET_DURATION,
     S(connect_timeout_ms),
     MS,
     .def = "10s",
     .min = 0.001,
     .env = "",
     .metavar = "DURATION",
     .help = "TCP and TLS connect."},
    {.key = "timeout",
     .type = PFR_SET_DURATION,
     S(timeout_ms),
     MS,
     .def = "60s",
     .min = 0.001,
     .env = "",
     .metavar = "DURATION",
     .help = "A whole request."},
    {.key = "bandwidth",
     .type = PFR_SET_SIZE,
     S(bandwidth),
     .def = "0",
     .env = "",
     .metavar = "RATE",
     .def_doc = "0 (unlimited)",
     .help = "Bytes per second across the sink's requests, e.g. 256k; 0 = unlimited."},
    {.key = "compress_level",
     .type = PFR_SET_COUNT,
     S(compress_level),
     .def = "1",
     .min = 1,
     .max = 9,
     .flag = "",
     .env = "",
     .metavar = "N",
     .help = "gzip level of request bodies, 1 to 9 (Coroot bodies are always gzip'd)."},
    {.key = "ca_file",
     .type = PFR_SET_STRING,
     S(ca_file),
     .env = "",
     .metavar = "FILE",
     .def_doc = "the system's CAs",
     .help = "CA bundle for https."},
    {.key = "client_cert",
     .type = PFR_SET_STRING,
     S(client_cert),
     .flag = "",
     .env = "",
     .metavar = "FILE",
     .help = "TLS client certificate."},
    {.key = "client_key",
     .type = PFR_SET_STRING,
     S(client_key),
     .flag = "",
     .env = "",
     .metavar = "FILE",
     .help = "TLS client key."},
    {.key = "tls_insecure",
     .type = PFR_SET_BOOL,
     S(tls_insecure),
     .def = "false",
     .flag = "insecure",
     .env = "",
     .flags = PFR_SETF_NO_ARG,
     .help = "No TLS verification (tests only)."},
};

const pfr_settings_group pfr_sink_settings = {
    .name = "sink",
    .section = "sink",
    .shared_section = "shipper",
    .intro = "A sink's keys go in its [sink NAME] section (also [sink:NAME], [sink.NAME]), or "
             "in [shipper] as the default of every sink. From the command line, --sink KIND "
             "--url URL defines one sink named after its kind; the other sink flags apply to "
             "every sink, --url and --api-key-file to the sink named by --sink, and the "
             "environment to that sink only. A flag of one kind's settings where no sink is of "
             "that kind is an error.",
    .rows = sink_rows,
    .nrows = sizeof(sink_rows) / sizeof(sink_rows[0]),
};
