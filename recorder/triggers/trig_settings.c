/* The triggers' settings ([triggers]): rows, and the names of the kinds. */
#include "pfr_triggers.h"

#define F(field) PFR_SETTING_FIELD(pfr_triggers_config, field)

static const pfr_setting rows[] = {
    {.key = "pin_before",
     .type = PFR_SET_DURATION,
     F(before_ns),
     .def = "10m",
     .min = 0,
     .max = 86400,
     .metavar = "DURATION",
     .help = "a trigger keeps this much before its event"},
    {.key = "pin_after",
     .type = PFR_SET_DURATION,
     F(after_ns),
     .def = "2m",
     .min = 0,
     .max = 86400,
     .metavar = "DURATION",
     .help = "... and this much after it; the request is handed over once this has passed"},
    {.key = "pin_max_window",
     .type = PFR_SET_DURATION,
     F(max_window_ns),
     .def = "30m",
     .min = 1,
     .max = 7 * 86400,
     .metavar = "DURATION",
     .help = "events of one service whose windows overlap make one request, at most this long "
             "(then a new one starts); a pressure that lasts stretches its request this far "
             "and no further"},
    {.key = "max_pins_per_hour",
     .type = PFR_SET_COUNT,
     F(max_pins_per_hour),
     .def = "4",
     .min = 1,
     .max = 64,
     .metavar = "N",
     .help = "new requests per service in any hour; more are dropped and counted "
             "(pfr_triggers_suppressed_total)"},
    {.key = "trigger_oom",
     .type = PFR_SET_BOOL,
     F(oom),
     .def = "true",
     .metavar = "BOOL",
     .help = "the kernel's OOM killer (host or cgroup) kills a process: its service"},
    {.key = "trigger_fatal_signal",
     .type = PFR_SET_BOOL,
     F(fatal_signal),
     .def = "true",
     .metavar = "BOOL",
     .help = "a process dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT (a signal it "
             "handles and survives is no death): its service"},
    {.key = "trigger_pressure",
     .type = PFR_SET_BOOL,
     F(pressure),
     .def = "true",
     .metavar = "BOOL",
     .help = "the host's CPU or memory pressure (/proc/pressure) held above its threshold: "
             "every service"},
    {.key = "trigger_pressure_cgroups",
     .type = PFR_SET_BOOL,
     F(pressure_cgroups),
     .def = "true",
     .metavar = "BOOL",
     .help = "the same for each cgroup holding processes (cpu.pressure, memory.pressure): its "
             "service"},
    {.key = "pressure_cpu_percent",
     .type = PFR_SET_COUNT,
     F(cpu_percent),
     .def = "90",
     .min = 1,
     .max = 100,
     .metavar = "PERCENT",
     .help = "CPU pressure threshold: PSI some avg10 (the share of time some task waited for a "
             "CPU) at or above this ..."},
    {.key = "pressure_cpu_for",
     .type = PFR_SET_DURATION,
     F(cpu_for_ns),
     .def = "5m",
     .min = 1,
     .max = 86400,
     .metavar = "DURATION",
     .help = "... for this long"},
    {.key = "pressure_memory_percent",
     .type = PFR_SET_COUNT,
     F(memory_percent),
     .def = "20",
     .min = 1,
     .max = 100,
     .metavar = "PERCENT",
     .help = "memory pressure threshold: PSI some avg10 (the share of time some task stalled "
             "on reclaim or swap-in) at or above this ..."},
    {.key = "pressure_memory_for",
     .type = PFR_SET_DURATION,
     F(memory_for_ns),
     .def = "30s",
     .min = 1,
     .max = 86400,
     .metavar = "DURATION",
     .help = "... for this long"},
    {.key = "pressure_rearm",
     .type = PFR_SET_DURATION,
     F(pressure_rearm_ns),
     .def = "6h",
     .min = 0,
     .max = 7 * 86400,
     .metavar = "DURATION",
     .help = "a pressure episode of the host or a cgroup fires once (its request stretched "
             "while it lasts, up to pin_max_window); the next one of the same kind there fires "
             "no sooner than this after it: a host busy all day makes a few pins, not dozens"},
    {.key = "pressure_poll",
     .type = PFR_SET_DURATION,
     F(pressure_poll_ns),
     .def = "10s",
     .min = 0.1,
     .max = 60,
     .metavar = "DURATION",
     .help = "how often the pressure files are read and the cgroups holding processes found "
             "(on the triggers' own thread; avg10 is a 10-second average, so a shorter period "
             "only costs CPU)"},
    {.key = "heap_on_memory_pressure",
     .type = PFR_SET_BOOL,
     F(heap_on_memory_pressure),
     .def = "true",
     .metavar = "BOOL",
     .help = "a cgroup under memory pressure, or whose memory.events high count rises, has "
             "its Go processes' heap profiles taken at the next interval's end instead of "
             "at go_heap_interval"},
    {.key = "heap_min_gap",
     .type = PFR_SET_DURATION,
     F(heap_min_gap_ns),
     .def = "1m",
     .min = 1,
     .max = 86400,
     .metavar = "DURATION",
     .help = "at most one such early heap profile per cgroup this often"},
    {.key = "cgroup_root",
     .type = PFR_SET_STRING,
     F(cgroup_root),
     .metavar = "DIR",
     .def_doc = "the cgroup2 mount of /proc/self/mountinfo",
     .help = "where cgroup v2 is mounted (a recorder in a container may see the host's "
             "elsewhere); its cgroups' pressure files are read"},
    {.key = "pin_endpoint",
     .type = PFR_SET_BOOL,
     F(pin_endpoint),
     .def = "true",
     .metavar = "BOOL",
     .help = "POST /pin on the metrics listener (metrics_listen) asks for a pin "
             "(docs/operations.md, Triggers)"},
    {.key = "pin_from_any_host",
     .type = PFR_SET_BOOL,
     F(pin_from_any_host),
     .def = "false",
     .metavar = "BOOL",
     .help = "answer POST /pin from clients that are not on the loopback; off, they get 403 "
             "even when metrics_listen binds a public address"},
};

#undef F

const pfr_settings_group pfr_triggers_settings_group = {
    .name = "triggers",
    .section = "triggers",
    .intro = "The recorder pins what it sees: OOM kills, deaths by fatal signals, pressure, and "
             "requests from outside (POST /pin) ask for the profiles around them to be kept.",
    .rows = rows,
    .nrows = sizeof(rows) / sizeof(rows[0]),
};

bool pfr_triggers_config_any(const pfr_triggers_config *c)
{
    return c->oom || c->fatal_signal || c->pressure || c->pressure_cgroups ||
           c->heap_on_memory_pressure || c->pin_endpoint;
}

const char *pfr_pin_kind_name(enum pfr_pin_kind k)
{
    static const char *const names[PFR_PIN_NKINDS] = {"oom_kill", "fatal_signal", "pressure_cpu",
                                                      "pressure_memory", "external"};
    return (unsigned)k < PFR_PIN_NKINDS ? names[k] : "unknown";
}
