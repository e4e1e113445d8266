/*
 * pfr_settings: a program's settings as tables, in the manner of systemd's config tables.
 *
 * One row per setting: {section, key, type, field, default, bounds, help}. From the rows come
 * the layering every program shares (built-in defaults < config file < environment < command
 * line), the INI keys (pfr_ini: whole lines, no key twice), the PFR_... environment variables,
 * the getopt_long flags, --help, the sample config file and the configuration reference in
 * docs/. A program's config module keeps only what no row can say: checks across fields.
 *
 * Rows are grouped: a group is the rows of one part of a program (the recorder's core, its CPU
 * source, its Go heap source, a shipper sink kind), with offsets into that part's own config
 * struct. A program binds each group to the struct it fills (pfr_settings_bind), so a new source
 * or sink brings its group and struct with it and no other module lists its keys.
 *
 * Names: a row's key is its INI key; its flag is --<key with '_' as '-'> unless .flag says
 * otherwise ("" = no flag); its environment variable is <env prefix><KEY in capitals> unless
 * .env says otherwise ("" = none; several names separated by ',' are tried in order).
 *
 * Errors: 0 or a negative errno, with a reason naming the setting and where it came from
 * ("FILE:LINE: interval: '7x' is not a duration (250ms, 10s, 1m30s)", "PFR_INTERVAL: ...",
 * "--interval: ...") in err.
 */
#ifndef PFR_SETTINGS_H
#define PFR_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum pfr_setting_type {
    PFR_SET_STRING,   /* char * (owned, strdup'd); "" leaves NULL unless PFR_SETF_EMPTY_OK */
    PFR_SET_BOOL,     /* bool */
    PFR_SET_DURATION, /* int64_t, in units of .unit_ns (1 = ns, 1000000 = ms); pfr_units.h */
    PFR_SET_SIZE,     /* uint64_t bytes (or a narrower unsigned field: .width) */
    PFR_SET_COUNT,    /* unsigned integer field of .width bytes (1, 2, 4 or 8) */
    PFR_SET_ENUM,     /* int: the index of the value in .choices */
    PFR_SET_LIST,     /* repeatable; each value goes through .parse (which appends) */
    PFR_SET_CUSTOM,   /* .parse does all; .format prints the default for docs */
};

enum pfr_setting_flags {
    PFR_SETF_REPEAT = 1u << 0,   /* may be given many times (implied by PFR_SET_LIST) */
    PFR_SETF_NO_FILE = 1u << 1,  /* command line (and environment) only */
    PFR_SETF_EMPTY_OK = 1u << 2, /* STRING: "" is a value, not NULL */
    PFR_SETF_HIDDEN = 1u << 3,   /* left out of --help, the sample and the reference */
    PFR_SETF_SECRET = 1u << 4,   /* never printed back (errors say the key, not the value) */
    PFR_SETF_REQUIRED = 1u << 5, /* an error when nothing set it */
    PFR_SETF_NO_ARG = 1u << 6,   /* a flag with no argument: sets .alias_value (default "true") */
};

/* A parser of one value into field (CUSTOM and LIST rows, or an extra check after the type's
 * own parse). Returns 0 or a negative errno with the reason in err. */
typedef int (*pfr_setting_parse_fn)(const char *value, void *field, char *err, size_t errlen);
/* Frees what parse left in field (CUSTOM and LIST rows; STRING rows are freed by the module). */
typedef void (*pfr_setting_free_fn)(void *field);

typedef struct pfr_setting {
    const char *key; /* INI key */
    enum pfr_setting_type type;
    size_t offset;   /* of the field in the group's struct */
    size_t width;    /* sizeof the field */
    const char *def; /* the built-in default, as text in the row's own syntax; NULL = zero */
    double min, max; /* bounds (seconds for durations, bytes for sizes); min == max == 0:
                      * none. A value outside is refused with the bounds in the reason. */
    const char *const *choices; /* ENUM: the names by value, NULL-terminated */
    int64_t unit_ns;            /* DURATION: the field's unit (0 = 1 ns) */
    pfr_setting_parse_fn parse;
    pfr_setting_free_fn free;
    const char *flag;        /* NULL: from the key; "": none */
    char short_opt;          /* 0: none */
    const char *env;         /* NULL: prefix + KEY; "": none; "A,B": A, else B */
    const char *alias_of;    /* this row is another name of that key (a flag or key alias) */
    const char *alias_value; /* ... which sets it to this value (NULL = the value given) */
    const char *metavar;     /* "DURATION", "PATH": --help and the reference */
    const char *help;        /* one or two sentences */
    const char *sample;      /* the sample file sets this value (uncommented); NULL: the key is
                              * shown commented out at its default */
    unsigned flags;          /* enum pfr_setting_flags */
    const char *example;     /* the sample shows "#key = example" (lines split at '\n') when
                              * the row has no default to show */
    const char *def_doc;     /* the default as --help and the reference say it ("the system's
                              * CAs", "half the interval"), where .def alone would mislead */
} pfr_setting;

/* Fill offset and width of a row from a struct type and its field. */
#define PFR_SETTING_FIELD(type, field)                                                             \
    .offset = offsetof(type, field), .width = sizeof(((type *)0)->field)

typedef struct pfr_settings_group {
    const char *name;    /* "recorder", "cpu", "goheap", "sink clickhouse": a heading */
    const char *section; /* INI section of its keys ("recorder"); "sink" for [sink NAME];
                          * NULL: flags and environment only (the query tool's subcommands) */
    const char *intro;   /* a paragraph for the reference and the sample file, or NULL */
    const pfr_setting *rows;
    size_t nrows;
    const char *shared_section; /* collected groups (pfr_settings_bind_collect): their keys may
                                 * also be written in this section, as every instance's default */
} pfr_settings_group;

/* The settings of one program: groups bound to the structs they fill. Opaque. */
typedef struct pfr_settings pfr_settings;

/* program: "pfr-recorder"; env_prefix: "PFR_"; usage: the first line of --help. */
pfr_settings *pfr_settings_new(const char *program, const char *env_prefix, const char *usage);
void pfr_settings_free(pfr_settings *s);

/* Bind a group to conf (the struct its rows' offsets are in) and set conf's fields to their
 * defaults. The group and conf outlive s. */
int pfr_settings_bind(pfr_settings *s, const pfr_settings_group *g, void *conf, char *err,
                      size_t errlen);

/* Where a value came from. */
enum pfr_settings_layer {
    PFR_SETTINGS_FILE,
    PFR_SETTINGS_ENV,
    PFR_SETTINGS_ARGS,
};

/* A value for a collected group, already checked by its row's parser (and bounds).
 * instance: NAME of a "[SECTION NAME]" section (also written "[SECTION:NAME]",
 * "[SECTION \"NAME\"]"; NAME is letters, digits, '_', '-', '.'); NULL for "[SECTION]", the
 * group's shared_section, the environment and flags. row: the row set (an alias resolved to its
 * target, value to its alias_value). where: the file's path, "PFR_X" or "--x". Returns 0, or a
 * negative errno with the reason in err (the module puts the file and line before it). */
typedef int (*pfr_settings_collect_fn)(void *ctx, const pfr_settings_group *g, const char *instance,
                                       const pfr_setting *row, const char *value,
                                       enum pfr_settings_layer layer, const char *where, char *err,
                                       size_t errlen);

/* Bind a group whose values the program keeps itself, such as the shipper's sinks (one struct
 * per [sink NAME], built once the sink's type is known): its rows give flags, environment
 * variables, keys of "[SECTION NAME]" sections, --help and docs like any group's, and each value
 * given is passed to fn instead of being stored. The program then fills its structs with
 * pfr_settings_group_defaults and pfr_settings_group_set. */
int pfr_settings_bind_collect(pfr_settings *s, const pfr_settings_group *g,
                              pfr_settings_collect_fn fn, void *ctx, char *err, size_t errlen);

/* Set conf's fields of g's rows to their defaults, as bind does, without binding. */
int pfr_settings_group_defaults(const pfr_settings_group *g, void *conf, char *err, size_t errlen);

/* Set one key of g in conf from text (where: for the message, or NULL). -ENOENT: no such key
 * (or alias) in g. */
int pfr_settings_group_set(const pfr_settings_group *g, void *conf, const char *key,
                           const char *value, const char *where, char *err, size_t errlen);

/* Options end at the first operand (getopt's leading '+'), for the global options of a
 * program with subcommands: `pfr --store X flame --from -1h` leaves "flame --from -1h" to the
 * command. Off by default (GNU permutation). */
void pfr_settings_set_stop_at_operand(pfr_settings *s, bool on);

/* The program reads no config file: --config is not recognised and not in --help. */
void pfr_settings_set_no_config(pfr_settings *s, bool on);

/* Keys written before any section header belong to this section (the shipper's "shipper");
 * without it they are an error (or ignored with "" in ignore_sections). */
void pfr_settings_set_default_section(pfr_settings *s, const char *section);

/* The comment at the top of the sample file (plain text, wrapped and put after "# "; a line
 * "" is a blank comment line). */
void pfr_settings_set_sample_header(pfr_settings *s, const char *text);

/* Set one key from text (where = "FILE:LINE", "PFR_X", "--x": for the message). */
int pfr_settings_set(pfr_settings *s, const char *section, const char *key, const char *value,
                     const char *where, char *err, size_t errlen);

/* Read a config file: the sections of bound groups; a section in ignore_sections (NULL-
 * terminated, may be NULL; an entry matches the section's name or its first word) is skipped
 * (another program's part of a shared file), and "*" there skips every unknown section; any
 * other section is an error. An unknown key of a known section is an error, so is a key given
 * twice (but for PFR_SETF_REPEAT and LIST rows of a group's own section). */
int pfr_settings_load_file(pfr_settings *s, const char *path, const char *const *ignore_sections,
                           char *err, size_t errlen);

/* The same over text (len bytes; name, for messages, stands for the file's path). */
int pfr_settings_load_text(pfr_settings *s, const char *text, size_t len, const char *name,
                           const char *const *ignore_sections, char *err, size_t errlen);

/* Apply the environment (envp: NULL-terminated "NAME=value"). A variable set to "" is a value
 * "" (a STRING row without PFR_SETF_EMPTY_OK reads it as unset). */
int pfr_settings_load_env(pfr_settings *s, char *const *envp, char *err, size_t errlen);

/* What pfr_settings_load_args found besides settings. */
typedef struct pfr_settings_args {
    bool help, version;
    const char *config;         /* --config FILE, or NULL */
    int first_operand;          /* argv index of the first non-option (argc if none) */
    const char *print_settings; /* --print-settings=help|sample|reference (a hidden flag of
                                 * every program, for scripts/gen-config-docs.sh): print it with
                                 * pfr_settings_write and exit 0 */
    const char *config_path;    /* pfr_settings_load: the file it read, or NULL */
} pfr_settings_args;

/* Parse the command line (getopt_long, permuting options and operands as GNU does) and apply
 * the flags in their order. --help, -h, --version, --config FILE and --print-settings=WHAT are
 * recognised for every program. A flag of a PFR_SETF_NO_ARG row takes no value and sets
 * .alias_value ("true" if NULL). */
int pfr_settings_load_args(pfr_settings *s, int argc, char **argv, pfr_settings_args *out,
                           char *err, size_t errlen);

/* The whole layering: defaults (done by bind) < the config file (--config, else the first of
 * config_envs that is set ("PFR_CONFIG"; "A,B": A, else B), else default_path if it exists) <
 * envp < argv. LIST rows gather the values of every layer, the flags' first (a rule given as a
 * flag comes before the file's). With --help, --version or --print-settings nothing but argv is
 * read. REQUIRED rows nothing set are an error. Returns 0, or a negative errno with the reason
 * in err; out says about --help etc. */
int pfr_settings_load(pfr_settings *s, int argc, char **argv, char *const *envp,
                      const char *config_envs, const char *default_path,
                      const char *const *ignore_sections, pfr_settings_args *out, char *err,
                      size_t errlen);

/* Whether key (of section) was set by a file, the environment or a flag (not its default). */
bool pfr_settings_is_set(const pfr_settings *s, const char *section, const char *key);

/* The layer (enum pfr_settings_layer) that last set key (of section), or -1 when it holds its
 * default (or is no key of a bound group). */
int pfr_settings_layer_of(const pfr_settings *s, const char *section, const char *key);

/* --help: usage, then each group's flags with metavar, default and help, wrapped to 100. */
void pfr_settings_write_help(const pfr_settings *s, FILE *out);

/* The sample config file: every key commented out at its default, under its help. */
void pfr_settings_write_sample(const pfr_settings *s, FILE *out);

/* The configuration reference: per group a Markdown table
 * | flag | key in [section] | environment | default | meaning |. */
void pfr_settings_write_reference(const pfr_settings *s, FILE *out);

/* pfr_settings_write_help, _sample or _reference by name ("help", "sample", "reference", as
 * --print-settings gives it). -EINVAL for another name. */
int pfr_settings_write(const pfr_settings *s, const char *what, FILE *out);

/* Free what the rows of g own in conf (strings, lists, custom fields). */
void pfr_settings_release(const pfr_settings_group *g, void *conf);

#endif
