/* The settings of a small demo program: the tables test_settings.c and settings_demo.c share,
 * with a row of every type and flag the module has. */
#ifndef SETTINGS_DEMO_TABLE_H
#define SETTINGS_DEMO_TABLE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_settings.h"

struct demo_list {
    char **v;
    size_t n;
};

struct demo_conf {
    char *store;
    int64_t interval_ns;
    unsigned cpu_hz;
    uint64_t max_bytes;
    uint16_t port;
    bool dwarf;
    int mode;
    int64_t budget_ms;
    char *token;
    char *name;
    bool once;
    bool debug;
    struct demo_list rules;
};

/* A rule is three words. */
static int demo_rule_add(const char *value, void *field, char *err, size_t errlen)
{
    struct demo_list *l = field;
    int words = 0;
    for (const char *p = value; *p;) {
        while (*p == ' ')
            p++;
        if (*p)
            words++;
        while (*p && *p != ' ')
            p++;
    }
    if (words != 3) {
        snprintf(err, errlen, "'%s' is not KIND PATTERN SERVICE", value);
        return -EINVAL;
    }
    char **v = realloc(l->v, (l->n + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    l->v = v;
    if (!(v[l->n] = strdup(value)))
        return -ENOMEM;
    l->n++;
    return 0;
}

static void demo_rules_free(void *field)
{
    struct demo_list *l = field;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* An extra check after the type's own parse: a name has no spaces. */
static int demo_name_check(const char *value, void *field, char *err, size_t errlen)
{
    (void)field;
    if (strchr(value, ' ')) {
        snprintf(err, errlen, "a name has no spaces");
        return -EINVAL;
    }
    return 0;
}

static const char *const demo_modes[] = {"auto", "fp", "dwarf", NULL};

#define DF(f) PFR_SETTING_FIELD(struct demo_conf, f)

static const pfr_setting demo_rows[] = {
    {.key = "store",
     .type = PFR_SET_STRING,
     DF(store),
     .def = "/var/lib/demo/ring.db",
     .metavar = "PATH",
     .help = "the ring"},
    {.key = "interval",
     .type = PFR_SET_DURATION,
     DF(interval_ns),
     .def = "10s",
     .min = 0.2,
     .max = 3600,
     .help = "length of one profile"},
    {.key = "cpu_hz",
     .type = PFR_SET_COUNT,
     DF(cpu_hz),
     .def = "100",
     .min = 1,
     .max = 10000,
     .help = "samples per second per CPU"},
    {.key = "max_store_bytes",
     .type = PFR_SET_SIZE,
     DF(max_bytes),
     .def = "512M",
     .min = 1 << 20,
     .help = "size cap of the ring"},
    {.key = "port", .type = PFR_SET_COUNT, DF(port), .def = "9465", .help = "a port"},
    {.key = "dwarf",
     .type = PFR_SET_BOOL,
     DF(dwarf),
     .def = "true",
     .help = "read file:line from DWARF"},
    {.key = "no_dwarf", .alias_of = "dwarf", .alias_value = "false", .flags = PFR_SETF_NO_ARG},
    {.key = "unwind",
     .type = PFR_SET_ENUM,
     DF(mode),
     .choices = demo_modes,
     .help = "how stacks are walked: auto, fp or dwarf"},
    {.key = "budget",
     .type = PFR_SET_DURATION,
     DF(budget_ms),
     .unit_ns = 1000000,
     .max = 3600,
     .def_doc = "half the interval",
     .help = "symbolizing time per interval"},
    {.key = "token",
     .type = PFR_SET_STRING,
     DF(token),
     .flags = PFR_SETF_SECRET,
     .env = "DEMO_TOKEN,PFR_DEMO_TOKEN",
     .parse = demo_name_check,
     .help = "a secret"},
    {.key = "name",
     .type = PFR_SET_STRING,
     DF(name),
     .short_opt = 'n',
     .parse = demo_name_check,
     .example = "node-1",
     .help = "this node's name"},
    {.key = "once",
     .type = PFR_SET_BOOL,
     DF(once),
     .env = "",
     .flags = PFR_SETF_NO_ARG | PFR_SETF_NO_FILE,
     .help = "run once, then exit"},
    {.key = "debug_knob",
     .type = PFR_SET_BOOL,
     DF(debug),
     .flag = "",
     .env = "",
     .flags = PFR_SETF_HIDDEN,
     .help = "hidden"},
};

static const pfr_setting demo_service_rows[] = {
    {.key = "rule",
     .type = PFR_SET_LIST,
     DF(rules),
     .parse = demo_rule_add,
     .free = demo_rules_free,
     .flag = "service-rule",
     .env = "",
     .metavar = "'KIND PATTERN SERVICE'",
     .example = "comm postgres* database\nexe /opt/shop/bin/* shop",
     .help = "name processes whose KIND matches PATTERN as SERVICE; first match wins"},
};

static const pfr_settings_group demo_group = {
    .name = "demo",
    .section = "demo",
    .intro = "The demo's own settings.",
    .rows = demo_rows,
    .nrows = sizeof(demo_rows) / sizeof(demo_rows[0]),
};

static const pfr_settings_group demo_service_group = {
    .name = "service rules",
    .section = "service",
    .rows = demo_service_rows,
    .nrows = sizeof(demo_service_rows) / sizeof(demo_service_rows[0]),
};

/* A sink's settings: collected per [sink NAME], keys in [demo] as every sink's default. */
struct demo_sink {
    char *url;
    uint64_t batch_bytes;
    int64_t timeout_ms;
    char *key_file;
};

#define SF(f) PFR_SETTING_FIELD(struct demo_sink, f)

static const pfr_setting demo_sink_rows[] = {
    {.key = "url",
     .type = PFR_SET_STRING,
     SF(url),
     .env = "DEMO_URL",
     .metavar = "URL",
     .help = "the sink's base URL"},
    {.key = "batch_bytes",
     .type = PFR_SET_SIZE,
     SF(batch_bytes),
     .def = "16M",
     .min = 1024,
     .env = "",
     .help = "request bytes per batch"},
    {.key = "timeout",
     .type = PFR_SET_DURATION,
     SF(timeout_ms),
     .unit_ns = 1000000,
     .def = "60s",
     .min = 0.001,
     .env = "",
     .help = "whole request"},
    {.key = "api_key_file",
     .type = PFR_SET_STRING,
     SF(key_file),
     .env = "",
     .metavar = "FILE",
     .help = "the key, first line of FILE"},
    {.key = "password_file", .alias_of = "api_key_file"},
};

static const pfr_settings_group demo_sink_group = {
    .name = "sink",
    .section = "sink",
    .shared_section = "demo",
    .intro = "One [sink NAME] section per sink.",
    .rows = demo_sink_rows,
    .nrows = sizeof(demo_sink_rows) / sizeof(demo_sink_rows[0]),
};

#endif
